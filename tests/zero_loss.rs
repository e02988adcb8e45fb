//! Zero-loss operations, proven with traffic: two nodes behind one FRR ToR
//! that spreads a shared VIP over them by ECMP (testlab::traffic), each
//! node with a TCP listener on the VIP and holdfast (the Kubernetes source,
//! against the in-process API stand-in bridged into each node's
//! namespace), and a client behind the ToR opening a new connection every
//! 20 ms. Every planned operation must cost no connection:
//!
//! 1. rolling restart: node1's holdfast restarted (SIGTERM, graceful
//!    restart), `/readyz` awaited, then node2's;
//! 2. `holdfast drain` on node1, its listener stopped after the wait;
//! 3. eTP Local: node1's endpoint not ready, then its listener stops;
//! 4. a pod restart: SIGTERM with graceful restart, the listener kept (the
//!    datapath stays up), holdfast started again;
//! 5. node1 shutting down (kubelet's graceful node shutdown marks its
//!    Node): the routes leave gracefully (GRACEFUL_SHUTDOWN, withdrawn,
//!    Cease), then the listener stops.
//!
//! Before each scenario both nodes must be serving (a test that only ever
//! reached node2 would prove nothing); in 2 and 3 the traffic must have
//! left node1 before its listener stops (in 5 the operations check it), and
//! in 4 node1 must keep serving while its holdfast is down.
//! `bench/run.sh --only traffic` runs the same scenarios with BIRD.

mod common;
#[path = "zero_loss/holdfast.rs"]
mod holdfast;

use std::path::Path;

use common::*;
use holdfast::{HoldfastOps, WAIT};
use testlab::traffic::{EcmpLab, Traffic, outcome_rows, run_scenarios};

#[test]
fn planned_operations_cost_no_connection() {
    let lab = EcmpLab::new(2);
    let mut ops = HoldfastOps::start(&lab, Path::new(BIN));
    let mut traffic = Traffic::start(&lab);
    let outcomes = run_scenarios(&mut traffic, &mut ops, WAIT, LONG);

    println!("| scenario | speaker | attempts | node1 | node2 | failed | slowest |");
    for row in outcome_rows("holdfast", &outcomes) {
        println!("{row}");
    }
    for o in &outcomes {
        let t = &o.tally;
        // At 20 ms a connection, even the shortest scenario (a restart
        // takes about a second) sees dozens.
        assert!(t.attempts() > 25, "{}: too few attempts: {t:?}", o.scenario);
        assert!(
            t.failures.is_empty(),
            "{}: {} failed connections: {:?}",
            o.scenario,
            t.failures.len(),
            t.failures
        );
        if let Some(moved) = &o.after_move {
            assert!(
                moved.served_by("node1") == 0 && moved.served_by("node2") > 0,
                "{}: the traffic must have left node1 before its listener stopped: {moved:?}",
                o.scenario
            );
        }
        if let Some(gap) = &o.during_gap {
            assert!(
                gap.served_by("node1") > 0,
                "{}: node1 must keep serving while its holdfast is down: {gap:?}",
                o.scenario
            );
        }
    }
    assert_eq!(outcomes.len(), 5);
    assert!(outcomes.iter().filter(|o| o.after_move.is_some()).count() == 2);
    assert!(outcomes.iter().any(|o| o.during_gap.is_some()));
}

//! A second `holdfast run` with the same `--state-dir` asks the running
//! one to hand over (the hand-off socket in the state directory), against
//! FRR with graceful restart (RFC 4724) on its side.
//!
//! This build transfers no session: every hand-off falls back. The old
//! process exits as on SIGTERM (graceful restart: FRR keeps its routes as
//! stale) once the new one has confirmed, and the new one starts with the
//! restart marker, so its OPEN sets the R bit (RFC 4724 §4.1). A new side
//! that leaves before confirming changes nothing: the old one runs on and
//! its session stays up.

mod common;

use std::net::IpAddr;
use std::os::unix::net::UnixStream;

use common::*;
use holdfast::handoff::{self, Message};
use testlab::{Frr, wait_until};

const VIP: &str = "198.51.100.80";

fn conf() -> String {
    Config::node(65001, "192.0.2.2")
        .peer(
            Peer::new("tor", "192.0.2.1", 65000)
                .fast()
                .hold_time("9s")
                .families(&["ipv4-unicast"]),
        )
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

fn neighbor() -> IpAddr {
    "192.0.2.2".parse().unwrap()
}

fn established_count(frr: &Frr) -> u64 {
    let n = frr.neighbor(neighbor());
    n["connectionsEstablished"]
        .as_u64()
        .unwrap_or_else(|| panic!("no connectionsEstablished in FRR's neighbor JSON: {n}"))
}

/// Starts a second process with the node's files while the first runs,
/// and checks the hand-off fell back as it should: the first exits 0, the
/// second starts as a restart and FRR kept the route meanwhile. Returns
/// the new side's log line that names the reason.
fn second_process_takes_over(node: &mut Holdfast, frr: &Frr, env: &[(&str, &str)]) -> String {
    let before = established_count(frr);
    let mut first = node.process.take().expect("the first holdfast runs");
    node.env = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Its API answers only once the first one is gone: not waited for.
    node.wait_ready = false;
    node.run(&[]);
    let status = first.wait_exit(LONG);
    assert!(
        status.success(),
        "the first holdfast exits 0 after a hand-off: {status:?}\n{}",
        node.log()
    );
    // Graceful restart: the route stays at the router, stale.
    assert!(
        frr.prefix(&format!("{VIP}/32")).is_some(),
        "FRR dropped the route across the hand-off"
    );
    let line = node.wait_log_line(&["hand-off: falling back to a restart"], LONG);
    node.wait_log_line(&["hand-off: the previous holdfast is gone"], LONG);
    let n = wait_until(LONG, "a new session with the second holdfast", || {
        let n = frr.neighbor(neighbor());
        (n["bgpState"] == "Established"
            && n["connectionsEstablished"]
                .as_u64()
                .is_some_and(|c| c > before))
        .then_some(n)
    });
    assert_eq!(
        n["gracefulRestartInfo"]["rBit"].as_bool(),
        Some(true),
        "the new holdfast is a restart: R set (RFC 4724 §4.1): {n}"
    );
    frr.wait_prefix(&format!("{VIP}/32"), LONG);
    line
}

#[test]
fn a_second_holdfast_takes_over_by_graceful_restart_and_says_so() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let mut node = Holdfast::start(&lab.node, &conf(), &vips(&[VIP]));
    frr.wait_established(neighbor(), LONG);
    frr.wait_prefix(&format!("{VIP}/32"), LONG);

    let line = second_process_takes_over(&mut node, &frr, &[]);
    assert!(line.contains("cannot hand its sessions over"), "{line}");
    let status = node.status();
    assert_eq!(status["handoff"]["result"], "fallback", "{status}");
    let (code, metrics) = node.http_get("/metrics");
    assert_eq!(code, 200);
    assert!(
        metrics.contains("holdfast_handoff_total{result=\"fallback\"} 1"),
        "{metrics}"
    );
    assert!(
        node.status_text()
            .contains("took over from the previous holdfast"),
        "{}",
        node.status_text()
    );
}

#[test]
fn an_incompatible_pair_falls_back_with_both_versions_named() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let mut node = Holdfast::start(&lab.node, &conf(), &vips(&[VIP]));
    frr.wait_established(neighbor(), LONG);
    frr.wait_prefix(&format!("{VIP}/32"), LONG);

    let line = second_process_takes_over(&mut node, &frr, &[(handoff::VERSION_ENV, "2")]);
    assert!(
        line.contains("the other holdfast speaks version 1, this one 2"),
        "{line}"
    );
    // The first one's account of it, in its own log.
    node.wait_log_line(
        &[
            "falling back",
            "the other holdfast speaks version 2, this one 1",
        ],
        LONG,
    );
}

#[test]
fn a_new_side_that_leaves_before_confirming_changes_nothing() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let mut node = Holdfast::start(&lab.node, &conf(), &vips(&[VIP]));
    frr.wait_established(neighbor(), LONG);
    let before = established_count(&frr);
    // A new side that asks, reads the answer and is gone without
    // confirming it.
    let s =
        UnixStream::connect(handoff::socket_path(&node.state_dir())).expect("the hand-off socket");
    let hello = Message::Hello(handoff::Hello {
        pid: std::process::id(),
        build: "test".into(),
    });
    handoff::write_frame(&s, &hello, &[], handoff::wire::VERSION).unwrap();
    let (answer, _) = handoff::read_frame(&s, handoff::wire::VERSION).unwrap();
    assert!(matches!(answer, Message::Fallback(_)), "{answer:?}");
    drop(s);
    node.wait_log_line(&["the new holdfast left before confirming"], LONG);
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(node.alive(), "the old holdfast stopped:\n{}", node.log());
    assert_eq!(frr.state(neighbor()), "Established");
    assert_eq!(established_count(&frr), before, "the session was reset");
    // And it still answers the next one.
    let s = UnixStream::connect(handoff::socket_path(&node.state_dir())).unwrap();
    handoff::write_frame(&s, &hello, &[], handoff::wire::VERSION).unwrap();
    assert!(matches!(
        handoff::read_frame(&s, handoff::wire::VERSION),
        Ok((Message::Fallback(_), _))
    ));
}

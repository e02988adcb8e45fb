//! Graceful restart's Restart State bit (R, RFC 4724 §3) against FRR: set
//! in the OPENs of a restarted holdfast until End-of-RIB has gone out
//! (RFC 4724 §4.1), and never in the OPENs of later sessions — a reset by
//! the router, a config reload that resets the session. FRR shows the R
//! bit it received as `gracefulRestartInfo.rBit` of `show bgp neighbors
//! ADDR json`.

mod common;

use std::net::IpAddr;

use common::*;
use serde_json::Value;
use testlab::{Frr, Signal, wait_until};

/// Peer `tor` (IPv4 unicast) with this hold time, keepalive 3 s.
fn peer(hold_time: &str) -> Peer {
    Peer::new("tor", "192.0.2.1", 65000)
        .fast()
        .hold_time(hold_time)
        .families(&["ipv4-unicast"])
}

fn conf(hold_time: &str) -> String {
    conf_with(peer(hold_time))
}

fn conf_with(peer: Peer) -> String {
    Config::node(65001, "192.0.2.2")
        .peer(peer)
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

/// FRR's count of sessions established with `neighbor`; a missing field
/// fails the test.
fn established_count(frr: &Frr, neighbor: IpAddr) -> u64 {
    let n = frr.neighbor(neighbor);
    n["connectionsEstablished"]
        .as_u64()
        .unwrap_or_else(|| panic!("no connectionsEstablished in FRR's neighbor JSON: {n}"))
}

/// Waits for a session newer than the `before`-th to be Established, and
/// returns FRR's view of the neighbor then.
fn wait_new_session(frr: &Frr, neighbor: IpAddr, before: u64) -> Value {
    wait_until(LONG, "a new session with holdfast", || {
        let n = frr.neighbor(neighbor);
        (n["bgpState"] == "Established"
            && n["connectionsEstablished"]
                .as_u64()
                .is_some_and(|c| c > before))
        .then_some(n)
    })
}

fn r_bit(n: &Value) -> bool {
    n["gracefulRestartInfo"]["rBit"]
        .as_bool()
        .unwrap_or_else(|| panic!("no gracefulRestartInfo.rBit in FRR's neighbor JSON: {n}"))
}

#[test]
fn r_bit_only_until_end_of_rib_after_a_restart() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    let mut node = Holdfast::start(&lab.node, &conf("9s"), &vips(&["198.51.100.80"]));
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.80/32", LONG);
    assert!(!r_bit(&frr.neighbor(neighbor)), "a first start sends R=0");

    // Killed outright: the restart marker stays, the next process is a
    // restart and its first OPEN sets R.
    node.kill(Signal::Kill);
    node.wait_exit();
    frr.wait_state_not(neighbor, "Established", LONG);
    let before = established_count(&frr, neighbor);
    node.run(&[]);
    let n = wait_new_session(&frr, neighbor, before);
    assert!(r_bit(&n), "the restarted holdfast sets R: {n}");
    wait_until(LONG, "End-of-RIB at FRR", || {
        (frr.neighbor(neighbor)["gracefulRestartInfo"]["endOfRibRecv"]["ipv4Unicast"] == true)
            .then_some(())
    });

    // FRR resets the session: holdfast reconnects on its own, without R.
    let before = established_count(&frr, neighbor);
    frr.vtysh("clear bgp *");
    let n = wait_new_session(&frr, neighbor, before);
    assert!(
        !r_bit(&n),
        "after End-of-RIB, a session reset by the router sends R=0: {n}"
    );

    // A config reload that changes the peer resets its session: the new
    // session (a new session task in the daemon) sends no R either.
    let before = established_count(&frr, neighbor);
    node.write_config(&conf("12s"));
    let n = wait_new_session(&frr, neighbor, before);
    assert!(
        node.log().contains("peer changed: resetting its session"),
        "{}",
        node.log()
    );
    assert!(
        !r_bit(&n),
        "after End-of-RIB, the session after a reload sends R=0: {n}"
    );
    frr.wait_prefix("198.51.100.80/32", LONG);
}

/// The restart also ends when the restart time has passed (RFC 4724 §4.2:
/// the router has dropped our stale routes by then), End-of-RIB or not.
/// Here End-of-RIB cannot go out: the restarted holdfast finds its VIP file
/// broken, so the source never gives a complete view. After the 4 s
/// restart time, a session reset by the router comes back with R=0.
#[test]
fn r_bit_ends_with_the_restart_time_without_end_of_rib() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    let conf = conf_with(peer("9s").graceful_restart(GracefulRestart::new().restart_time("4s")));
    let mut node = Holdfast::start(&lab.node, &conf, &vips(&["198.51.100.81"]));
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.81/32", LONG);

    node.kill(Signal::Kill);
    node.wait_exit();
    frr.wait_state_not(neighbor, "Established", LONG);
    node.write_vips("[[vip]\nbroken");
    let before = established_count(&frr, neighbor);
    node.run(&[]);
    let n = wait_new_session(&frr, neighbor, before);
    assert!(r_bit(&n), "the restarted holdfast sets R: {n}");

    wait_until(LONG, "holdfast to end the restart", || {
        node.log()
            .contains("graceful restart over for this peer")
            .then_some(())
    });
    let before = established_count(&frr, neighbor);
    frr.vtysh("clear bgp *");
    let n = wait_new_session(&frr, neighbor, before);
    assert!(
        !r_bit(&n),
        "after the restart time, a new session sends R=0: {n}"
    );
    // It was the time, not End-of-RIB: none went out in this run.
    let log = node.log();
    let run = log
        .rsplit_once("holdfast starting")
        .map(|(_, run)| run)
        .expect("the restarted run's log");
    assert!(
        run.contains("End-of-RIB waits for the source's first complete view"),
        "{run}"
    );
    assert!(!run.contains("End-of-RIB peer=tor"), "{run}");
}

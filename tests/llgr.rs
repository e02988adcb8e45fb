//! Long-lived graceful restart (RFC 9494) against FRR as the helper:
//! holdfast killed for longer than its `restart_time` keeps its route at the
//! router as LLGR_STALE (community 65535:6, FRR's `llgr-stale`) instead of
//! losing it; when holdfast is back the fresh route replaces it.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testlab::{Frr, Lab, Signal, wait_until};

fn conf(graceful_restart: GracefulRestart) -> String {
    Config::node(65001, "192.0.2.2")
        .peer(
            Peer::new("tor", "192.0.2.1", 65000)
                .fast()
                .families(&["ipv4-unicast"])
                .graceful_restart(graceful_restart),
        )
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

/// FRR keeps a peer's routes as LLGR_STALE for at most its own
/// `long-lived-graceful-restart stale-time` (the helper's local limit,
/// RFC 9494 §4.2 lets it have one; FRR's default 0 means never), and only
/// when the peer advertised the capability.
const FRR_LLGR: &str = " bgp long-lived-graceful-restart stale-time 120\n";

const PREFIX: &str = "198.51.100.90/32";

fn community(route: &Value) -> String {
    route["paths"][0]["community"]["string"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// FRR with LLGR, and holdfast with `graceful_restart = GR` advertising
/// the VIP; returns once the session is Established.
fn start<'a>(lab: &'a Lab, gr: GracefulRestart) -> (Frr, Holdfast<'a>) {
    testlab::require_root();
    let frr = Tor::new().lines(FRR_LLGR).on(lab);
    let node = Holdfast::start(&lab.node, &conf(gr), &vips(&["198.51.100.90"]));
    frr.wait_established(NEIGHBOR.parse().unwrap(), LONG);
    (frr, node)
}

const NEIGHBOR: &str = "192.0.2.2";

#[test]
fn killed_past_restart_time_the_route_stays_as_llgr_stale_then_is_refreshed() {
    let lab = Lab::pair();
    let (frr, mut node) = start(
        &lab,
        GracefulRestart::new()
            .restart_time("5s")
            .long_lived_stale_time("60s"),
    );
    let route = frr.wait_prefix(PREFIX, LONG);
    assert_eq!(
        community(&route),
        "",
        "a fresh route carries no community: {route}"
    );

    // Taken before the kill: FRR's restart timer starts when it sees the
    // connection close, which is after this instant but may be before
    // wait_exit's poll notices the exit — an instant taken after that
    // would make the bound below fail when FRR is on time.
    let killed = Instant::now();
    node.kill(Signal::Kill);
    node.wait_exit();
    frr.wait_state_not(NEIGHBOR.parse().unwrap(), "Established", LONG);
    // Past restart_time (5 s) plus slack: GR alone would have dropped it.
    let route = wait_until(LONG, "the route marked LLGR_STALE", || {
        frr.prefix(PREFIX)
            .filter(|r| community(r).contains("llgr-stale"))
    });
    assert!(
        killed.elapsed() >= Duration::from_secs(5),
        "LLGR_STALE before restart_time ran out: {route}"
    );
    std::thread::sleep(Duration::from_secs(3));
    let route = frr
        .prefix(PREFIX)
        .unwrap_or_else(|| panic!("the route is gone {:?} after the kill", killed.elapsed()));
    assert!(community(&route).contains("llgr-stale"), "{route}");
    assert!(killed.elapsed() > Duration::from_secs(8));

    node.run(&[]);
    frr.wait_established(NEIGHBOR.parse().unwrap(), LONG);
    let route = wait_until(LONG, "the refreshed route, without LLGR_STALE", || {
        frr.prefix(PREFIX)
            .filter(|r| !community(r).contains("llgr-stale") && r["paths"][0]["stale"] != true)
    });
    assert_eq!(community(&route), "", "{route}");
}

/// Without `long_lived_stale_time`, FRR drops the route once restart_time
/// has run out: what the test above guards against.
#[test]
fn without_llgr_the_route_goes_after_restart_time() {
    let lab = Lab::pair();
    let (frr, mut node) = start(&lab, GracefulRestart::new().restart_time("5s"));
    frr.wait_prefix(PREFIX, LONG);
    node.kill(Signal::Kill);
    node.wait_exit();
    frr.wait_state_not(NEIGHBOR.parse().unwrap(), "Established", LONG);
    wait_until(LONG, "the route dropped after restart_time", || {
        frr.prefix(PREFIX).is_none().then_some(())
    });
}

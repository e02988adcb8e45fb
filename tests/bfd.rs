//! BFD with FRR's bfdd: BFD comes up, a black-holed link takes
//! the BGP session down within Detect Mult × interval rather than the hold
//! time, FRR withdraws the routes, and all comes back with the link.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testlab::{Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

#[test]
fn bfd_down_takes_bgp_down_fast_and_bgp_waits_for_bfd() {
    testlab::require_root();
    let lab = Lab::pair();
    let frr = Frr::start_with_bfd(
        &lab.router,
        &frr_conf(
            65000,
            TOR,
            &[(NODE, 65001)],
            &format!(" neighbor {NODE} bfd\n neighbor {NODE} bfd profile fast\n"),
        ),
        testlab::frr::BFD_FAST_PROFILE,
    );
    let conf = format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"node-1\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\
         bfd = {{ min_rx = \"100ms\", min_tx = \"100ms\", multiplier = 3 }}\n\n\
         [source]\nkind = \"file\"\npath = \"VIPS\"\n"
    );
    let node = Holdfast::start(&lab.node, &conf, &vips(&["198.51.100.10"]));
    frr.wait_established(NODE.parse().unwrap(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let bfd = |node: &Holdfast| node.status()["peers"][0]["bfd"].clone();
    wait_until(LONG, "BFD Up at holdfast", || {
        (bfd(&node)["state"] == "Up").then_some(())
    });
    wait_until(LONG, "BFD up at FRR", || {
        frr.bfd_peers()
            .iter()
            .any(|p| p["peer"] == NODE && p["status"] == "up")
            .then_some(())
    });
    assert_eq!(bfd(&node)["detection_time_ms"], 300, "3 × 100 ms");
    let bfd_up = |node: &Holdfast| node.metric("holdfast_peer_bfd_up", &[("peer", "tor1")]);
    assert_eq!(bfd_up(&node), 1.0, "holdfast_peer_bfd_up while BFD is Up");

    // Black-hole the link: frames vanish, nothing resets.
    lab.node_link.blackhole();
    let cut = Instant::now();
    wait_until(
        Duration::from_secs(8),
        "holdfast to leave Established",
        || (node.peer_state("tor1") != "Established").then_some(()),
    );
    let down = cut.elapsed();
    // Detect Mult × interval (300 ms) plus scheduling slack, far below the
    // 9 s hold time.
    assert!(
        down < Duration::from_secs(2),
        "BGP went down {down:?} after the cut"
    );
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(5));
    assert!(
        cut.elapsed() < Duration::from_secs(5),
        "FRR withdrew the routes on BFD, not on the hold time"
    );
    let status = node.status();
    assert_eq!(status["peers"][0]["bfd"]["state"], "Down", "{status}");
    assert_eq!(
        status["peers"][0]["bfd"]["last_diagnostic"],
        "Control Detection Time Expired"
    );
    // BGP does not come back while BFD is down.
    std::thread::sleep(Duration::from_secs(3));
    assert_ne!(node.peer_state("tor1"), "Established");
    let (_, text) = node.explain("198.51.100.10");
    assert!(text.contains("BFD is Down"), "{text}");
    assert_eq!(bfd_up(&node), 0.0, "holdfast_peer_bfd_up while BFD is Down");
    assert_eq!(
        node.metric("holdfast_peer_established", &[("peer", "tor1")]),
        0.0
    );

    // The link returns: BFD, then BGP, then the route.
    lab.node_link.restore();
    wait_until(LONG, "BFD Up again", || {
        (bfd(&node)["state"] == "Up").then_some(())
    });
    frr.wait_established(NODE.parse().unwrap(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(bfd_up(&node), 1.0, "holdfast_peer_bfd_up back to 1");
}

#[test]
fn multihop_bfd_two_hops_away() {
    // FRR's bfdd has no BFD authentication: the config states "none".
    testlab::require_root();
    let lab = Lab::routed_pair();
    let router = lab.router_v4.to_string();
    let node_ip = lab.node_v4.to_string();
    let frr = Frr::start_with_bfd(
        &lab.router,
        &frr_conf(
            65000,
            &router,
            &[(&node_ip, 65001)],
            &format!(
                " neighbor {node_ip} ebgp-multihop 2\n neighbor {node_ip} bfd\n neighbor {node_ip} bfd profile fast\n"
            ),
        ),
        testlab::frr::BFD_FAST_PROFILE,
    );
    let conf = format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{node_ip}\"\nhostname = \"node-1\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{router}\"\nasn = 65000\nhold_time = \"9s\"\nconnect_retry = \"1s\"\nebgp_multihop = 2\n\
         bfd = {{ min_rx = \"100ms\", min_tx = \"100ms\", multiplier = 3, multihop = true, authentication = \"none\" }}\n\n\
         [source]\nkind = \"file\"\npath = \"VIPS\"\n"
    );
    let node = Holdfast::start(&lab.node, &conf, &vips(&["198.51.100.10"]));
    frr.wait_prefix("198.51.100.10/32", LONG);
    wait_until(LONG, "multihop BFD Up at holdfast", || {
        (node.status()["peers"][0]["bfd"]["state"] == "Up").then_some(())
    });
    wait_until(LONG, "multihop BFD up at FRR", || {
        frr.bfd_peers()
            .iter()
            .any(|p| p["peer"] == node_ip.as_str() && p["status"] == "up" && p["multihop"] == true)
            .then_some(())
    });
    assert_eq!(
        node.metric("holdfast_peer_bfd_up", &[("peer", "tor1")]),
        1.0,
        "holdfast_peer_bfd_up of the multihop session"
    );
}

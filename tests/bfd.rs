//! BFD with FRR's bfdd: BFD comes up, a black-holed link takes
//! the BGP session down within Detect Mult × interval rather than the hold
//! time, FRR withdraws the routes, and all comes back with the link.
//! Authenticated multihop BFD with BIRD (FRR's bfdd has no authentication):
//! Up with the right key, Down with a wrong one.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testlab::{Bird, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

#[test]
fn bfd_down_takes_bgp_down_fast_and_bgp_waits_for_bfd() {
    testlab::require_root();
    let (lab, frr) = Tor::new()
        .bfd(testlab::frr::BFD_FAST_PROFILE)
        .lines(&format!(
            " neighbor {NODE} bfd\n neighbor {NODE} bfd profile fast\n"
        ))
        .start();
    let conf = Config::node(65001, NODE).peer(
        Peer::new("tor1", TOR, 65000)
            .hold_time("9s")
            .connect_retry("1s")
            .bfd(Bfd::new("100ms", "100ms", 3)),
    );
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&["198.51.100.10"]));
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
    let router = testlab::lab::routed::ROUTER_V4.to_string();
    let node_ip = testlab::lab::routed::NODE_V4.to_string();
    let (lab, frr) = Tor::new()
        .routed()
        .bfd(testlab::frr::BFD_FAST_PROFILE)
        .lines(&format!(
            " neighbor {node_ip} ebgp-multihop 2\n neighbor {node_ip} bfd\n neighbor {node_ip} bfd profile fast\n"
        ))
        .start();
    let conf = Config::node(65001, &node_ip).peer(
        Peer::new("tor1", &router, 65000)
            .hold_time("9s")
            .connect_retry("1s")
            .ebgp_multihop(2)
            .bfd(
                Bfd::new("100ms", "100ms", 3)
                    .multihop()
                    .authentication("none"),
            ),
    );
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&["198.51.100.10"]));
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

/// BIRD's `bfd` protocol with one multihop session to the node, signed
/// with `how` (BIRD's words) and `key` as key ID 1.
fn bird_bfd_conf(lab: &Lab, how: &str, key: &str) -> String {
    format!(
        "router id {router};\nprotocol device {{}}\n\
         protocol bfd {{\n\
           debug {{ states, events }};\n\
           multihop {{ min rx interval 100 ms; min tx interval 100 ms; multiplier 3;\n\
             authentication {how}; password \"{key}\" {{ id 1; }}; }};\n\
           neighbor {node} local {router} multihop on;\n\
         }}\n",
        router = lab.router_v4,
        node = lab.node_v4,
    )
}

/// The State column of `show bfd sessions` for the node's address.
fn bird_bfd_state(bird: &Bird, node: &str) -> Option<String> {
    bird.birdc("show bfd sessions")
        .lines()
        .find(|l| l.split_whitespace().next() == Some(node))
        .and_then(|l| l.split_whitespace().nth(2))
        .map(str::to_owned)
}

/// holdfast's config: one peer, multihop BFD with `how` and the key in
/// `key_file`.
fn auth_conf(lab: &Lab, how: &str, key_file: &std::path::Path) -> String {
    Config::node(65001, &lab.node_v4.to_string())
        .peer(
            Peer::new("tor1", lab.router_v4, 65000)
                .hold_time("9s")
                .connect_retry("1s")
                .ebgp_multihop(2)
                .bfd(
                    Bfd::new("100ms", "100ms", 3)
                        .multihop()
                        .authentication(how)
                        .key(1, key_file),
                ),
        )
        .to_toml()
}

fn bfd_discarded(node: &Holdfast, reason: &str) -> f64 {
    node.metric(
        "holdfast_peer_bfd_discarded_total",
        &[("peer", "tor1"), ("reason", reason)],
    )
}

#[test]
fn authenticated_multihop_bfd_with_bird_up_with_the_right_key_down_with_a_wrong_one() {
    testlab::require_root();
    let lab = Lab::routed_pair();
    let node_ip = lab.node_v4.to_string();
    let keys = tempfile::tempdir().expect("tempdir");
    let key_file = keys.path().join("bfd-tor1");
    let vip = vips(&["198.51.100.10"]);

    // The right key, for each hash: both ends Up, nothing discarded.
    for (ours, birds) in [
        ("meticulous-keyed-sha1", "meticulous keyed sha1"),
        ("keyed-sha1", "keyed sha1"),
        ("meticulous-keyed-md5", "meticulous keyed md5"),
    ] {
        std::fs::write(&key_file, "s3cret-bfd-key\n").expect("write key");
        let bird = Bird::start(&lab.router, &bird_bfd_conf(&lab, birds, "s3cret-bfd-key"));
        let node = Holdfast::start(&lab.node, &auth_conf(&lab, ours, &key_file), &vip);
        wait_until(LONG, &format!("{ours}: BFD Up at holdfast"), || {
            (node.status()["peers"][0]["bfd"]["state"] == "Up").then_some(())
        });
        wait_until(LONG, &format!("{ours}: BFD Up at BIRD"), || {
            (bird_bfd_state(&bird, &node_ip).as_deref() == Some("Up")).then_some(())
        });
        // Up for a while: every packet passes, in both directions.
        std::thread::sleep(Duration::from_secs(2));
        assert_eq!(node.status()["peers"][0]["bfd"]["state"], "Up", "{ours}");
        assert_eq!(bird_bfd_state(&bird, &node_ip).as_deref(), Some("Up"));
        for reason in ["bad-digest", "bad-sequence", "wrong-key", "unauthenticated"] {
            assert_eq!(bfd_discarded(&node, reason), 0.0, "{ours}: {reason}");
        }
        assert_eq!(
            node.metric("holdfast_peer_bfd_up", &[("peer", "tor1")]),
            1.0
        );
    }

    // A wrong key: BIRD's packets arrive and are refused as forgeries;
    // neither end comes Up.
    std::fs::write(&key_file, "not-the-key\n").expect("write key");
    let bird = Bird::start(
        &lab.router,
        &bird_bfd_conf(&lab, "meticulous keyed sha1", "s3cret-bfd-key"),
    );
    let node = Holdfast::start(
        &lab.node,
        &auth_conf(&lab, "meticulous-keyed-sha1", &key_file),
        &vip,
    );
    wait_until(LONG, "holdfast to discard BIRD's packets", || {
        (bfd_discarded(&node, "bad-digest") >= 3.0).then_some(())
    });
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        assert_ne!(
            node.status()["peers"][0]["bfd"]["state"],
            "Up",
            "BFD came Up with a wrong key"
        );
        assert_ne!(
            bird_bfd_state(&bird, &node_ip).as_deref(),
            Some("Up"),
            "BIRD came Up with a wrong key"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        node.metric("holdfast_peer_bfd_up", &[("peer", "tor1")]),
        0.0
    );
    assert!(
        bird.log().contains("wrong authentication code")
            || bird.log().contains("Authentication failed"),
        "BIRD refused holdfast's packets too:\n{}",
        bird.log()
    );
}

//! The flap fix end to end, driven through the VIP file, with
//! FRR as the router: a VIP that keeps vanishing and coming back costs FRR
//! nothing; a VIP gone for good is withdrawn after the hold-down; a big
//! table arrives packed; a broken VIP file keeps everything; a config
//! reload leaves unchanged sessions alone.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use testlab::{Afi, Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

fn node_ip() -> IpAddr {
    NODE.parse().unwrap()
}

/// The node with these peers (fast timers), advertising with `community`.
fn conf(peers: &[(&str, &str)], community: &str) -> Config {
    peers
        .iter()
        .fold(Config::node(65001, NODE), |c, (name, addr)| {
            c.peer(Peer::new(name, addr, 65000).fast())
        })
        .advertisement(Advertisement::public(community))
}

/// FRR and holdfast with `hold_down`, the VIPs advertised and the initial
/// table (and End-of-RIB) received.
fn setup<'a>(lab: &'a Lab, hold_down: &str, vip_list: &[&str]) -> (Frr, Holdfast<'a>) {
    testlab::require_root();
    let frr = Tor::new().on(lab);
    let conf = conf(&[("tor1", TOR)], "65001:100").hold_down(hold_down);
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(vip_list));
    frr.wait_established(node_ip(), LONG);
    for v in vip_list {
        frr.wait_prefix(&format!("{v}/32"), LONG);
    }
    // The table and End-of-RIB are in: the UPDATE counter settles.
    let mut last = frr.updates_received(node_ip());
    wait_until(LONG, "the initial table to settle", || {
        std::thread::sleep(Duration::from_millis(300));
        let now = frr.updates_received(node_ip());
        let settled = now == last;
        last = now;
        settled.then_some(())
    });
    (frr, node)
}

#[test]
fn a_flapping_vip_costs_the_router_nothing() {
    let lab = Lab::pair();
    let (frr, node) = setup(&lab, "3s", &["198.51.100.10", "198.51.100.20"]);
    let before = frr.updates_received(node_ip());
    let with = vips(&["198.51.100.10", "198.51.100.20"]);
    let without = vips(&["198.51.100.20"]);
    // The reported scenario: the VIP's address list empties and refills
    // every second. The route must never leave FRR's table.
    let start = Instant::now();
    let mut present = true;
    let mut next_toggle = start;
    while start.elapsed() < Duration::from_secs(12) {
        if Instant::now() >= next_toggle {
            present = !present;
            node.write_vips(if present { &with } else { &without });
            next_toggle += Duration::from_secs(1);
        }
        assert!(
            frr.prefix("198.51.100.10/32").is_some(),
            "the route left FRR's table after {:?}\n{}",
            start.elapsed(),
            node.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    node.write_vips(&with);
    std::thread::sleep(Duration::from_secs(1));
    assert!(frr.prefix("198.51.100.10/32").is_some());
    // Exactly the one UPDATE of the initial table carried the prefix: none
    // since, and no withdrawal.
    assert_eq!(
        frr.updates_received(node_ip()),
        before,
        "UPDATEs reached FRR during the flapping\n{}",
        node.log()
    );
    // And holdfast saw every vanishing and absorbed it.
    let status = node.status();
    let absorbed = status["counters"]["withdrawals_absorbed"].as_u64().unwrap();
    assert!(absorbed >= 4, "the source saw the flaps: {status}");
    assert_eq!(status["counters"]["withdrawals"], 0);
    assert_eq!(
        node.metric("holdfast_withdrawals_absorbed_total", &[]),
        absorbed as f64
    );
}

#[test]
fn a_vip_removed_for_good_is_withdrawn_after_the_hold_down() {
    let lab = Lab::pair();
    let (frr, node) = setup(&lab, "2s", &["198.51.100.10", "198.51.100.20"]);
    let removed = Instant::now();
    node.write_vips(&vips(&["198.51.100.20"]));
    // While held down, status says so and when it goes.
    let held = wait_until(Duration::from_secs(2), "the route to be held down", || {
        let s = node.status();
        s["routes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["prefix"] == "198.51.100.10/32" && r["state"] == "held-down")
            .cloned()
    });
    assert!(held["seconds_left"].as_f64().unwrap() <= 2.0, "{held}");
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 0, "still advertised while held down: {text}");
    assert!(text.contains("held down"), "{text}");
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(10));
    let gone = removed.elapsed();
    assert!(
        gone >= Duration::from_secs(2) && gone <= Duration::from_secs(3),
        "withdrawn {gone:?} after the removal; the hold-down is 2s"
    );
    assert!(frr.prefix("198.51.100.20/32").is_some());
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 1, "{text}");
}

#[test]
fn ten_thousand_vips_arrive_packed() {
    let lab = Lab::pair();
    let (frr, node) = setup(&lab, "30s", &["198.51.100.10"]);
    let before = frr.updates_received(node_ip());
    let mut text = vips(&["198.51.100.10"]);
    for i in 0..10_000u32 {
        text.push_str(&format!(
            "[[vip]]\naddress = \"198.18.{}.{}\"\n",
            i / 256,
            i % 256
        ));
    }
    node.write_vips(&text);
    wait_until(LONG, "10,001 routes at FRR", || {
        (frr.count(Afi::Ipv4) == 10_001).then_some(())
    });
    let updates = frr.updates_received(node_ip()) - before;
    // 810 /32s fit one 4096-octet UPDATE; extended messages (RFC 8654) fit
    // more. Far below one per prefix.
    assert!(updates <= 20, "{updates} UPDATEs for 10,000 prefixes");
}

#[test]
fn a_broken_vip_file_keeps_every_route() {
    let lab = Lab::pair();
    let (frr, node) = setup(&lab, "2s", &["198.51.100.10", "198.51.100.20"]);
    let before = frr.updates_received(node_ip());
    std::fs::write(&node.vips, "[[vip]]\naddress = \"198.51.100.10\n").unwrap();
    let status = wait_until(Duration::from_secs(5), "status to show the error", || {
        let s = node.status();
        s["source"]["error"].as_str().is_some().then_some(s)
    });
    let err = status["source"]["error"].as_str().unwrap();
    assert!(
        err.contains("vips.toml:2:"),
        "the error has line and column: {err}"
    );
    assert_eq!(status["source"]["healthy"], false);
    assert!(node.status_text().contains("vips.toml:2:"));
    // Well past the hold-down, nothing was withdrawn.
    std::thread::sleep(Duration::from_secs(4));
    assert!(frr.prefix("198.51.100.10/32").is_some() && frr.prefix("198.51.100.20/32").is_some());
    assert_eq!(frr.updates_received(node_ip()), before);
    // Fixed with one VIP fewer: back to healthy, that VIP held down then gone.
    node.write_vips(&vips(&["198.51.100.20"]));
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(10));
    assert_eq!(node.status()["source"]["healthy"], true);
}

#[test]
fn a_config_reload_adding_a_peer_leaves_the_first_session_alone() {
    testlab::require_root();
    let (lab, frr) = Tor::new().ipv6_session().start();
    let one = conf(&[("tor1", TOR)], "65001:100").to_toml();
    let node = Holdfast::start(&lab.node, &one, &vips(&["198.51.100.10"]));
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    // FRR's own count of sessions established and dropped with tor1.
    let epoch = |frr: &Frr| {
        let n = frr.neighbor(node_ip());
        (
            n["connectionsEstablished"].as_u64(),
            n["connectionsDropped"].as_u64(),
        )
    };
    let up_since = epoch(&frr);
    assert_eq!(
        up_since,
        (Some(1), Some(0)),
        "FRR counts one session, none dropped"
    );
    std::thread::sleep(Duration::from_secs(1));
    let updates = frr.updates_received(node_ip());
    // Add a second peer (the same router over IPv6) and edit nothing else.
    let two = conf(&[("tor1", TOR), ("tor1-v6", "2001:db8::1")], "65001:100");
    node.write_config(&two.to_toml());
    frr.wait_established("2001:db8::2".parse().unwrap(), LONG);
    let status = node.status();
    let tor1 = status["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tor1")
        .unwrap()
        .clone();
    assert_eq!(tor1["established_transitions"], 1, "{tor1}");
    assert_eq!(
        epoch(&frr),
        up_since,
        "FRR's session with tor1 was not reset"
    );
    assert_eq!(
        frr.updates_received(node_ip()),
        updates,
        "the unchanged session sent nothing"
    );
    // A change of communities goes out as one UPDATE on each session,
    // without a withdrawal first.
    let changed = conf(&[("tor1", TOR), ("tor1-v6", "2001:db8::1")], "65001:777");
    node.write_config(&changed.to_toml());
    wait_until(LONG, "the new community at FRR", || {
        let r = frr.prefix("198.51.100.10/32")?;
        r["paths"]
            .as_array()?
            .iter()
            .all(|p| p["community"]["string"] == "65001:777")
            .then_some(())
    });
    assert_eq!(frr.updates_received(node_ip()), updates + 1);
    assert_eq!(epoch(&frr), up_since);
}

//! `/readyz` of a real daemon against FRR in a namespace: not ready until
//! the router has the routes and End-of-RIB, and a peer that is down (its
//! router in maintenance) stops blocking after two `connect_retry`.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testlab::{Frr, Lab, Netns, wait_until};

/// `GET /readyz` inside the namespace: (status code, body).
fn readyz(ns: &Netns) -> (u16, String) {
    let out = ns.exec(&[
        "bash",
        "-c",
        "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET /readyz HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status line from /readyz: {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.trim().to_string())
        .unwrap_or_default();
    (code, body)
}

/// FRR's End-of-RIB received flag for IPv4 unicast from `neighbor`; a
/// missing field fails the test.
fn end_of_rib_received(frr: &Frr, neighbor: IpAddr) -> bool {
    let n = frr.neighbor(neighbor);
    n["gracefulRestartInfo"]["ipv4Unicast"]["endOfRibStatus"]["endOfRibRecv"]
        .as_bool()
        .unwrap_or_else(|| panic!("no gracefulRestartInfo.ipv4Unicast.endOfRibStatus.endOfRibRecv in FRR's neighbor JSON: {n}"))
}

fn conf(peers: &[Peer], stability: Stability) -> String {
    peers
        .iter()
        .cloned()
        .fold(Config::node(65001, "192.0.2.2"), Config::peer)
        .stability(stability)
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

fn peer(name: &str, address: &str, connect_retry: &str) -> Peer {
    Peer::new(name, address, 65000)
        .fast()
        .connect_retry(connect_retry)
        .families(&["ipv4-unicast"])
}

/// Before the session: 503 naming the peer. Session up but End-of-RIB held
/// back (advertise_delay): 503 naming that. 200 only once FRR has the route
/// and End-of-RIB.
#[test]
fn ready_only_once_the_router_has_the_routes_and_end_of_rib() {
    testlab::require_root();
    let lab = Lab::pair();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    // The router is not up yet: no session.
    let node = Holdfast::start(
        &lab.node,
        &conf(
            &[peer("tor", "192.0.2.1", "2s")],
            Stability::new().advertise_delay("8s"),
        ),
        &vips(&["198.51.100.70"]),
    );
    // 503 from the first answer; once the VIP file is read (a moment after
    // the start: until then the reason is the source's), it names the peer.
    testlab::wait_for(LONG, "/readyz to name the peer", || {
        let (code, body) = readyz(&lab.node);
        assert_eq!(code, 503, "{body}\n{}", node.log());
        if body.starts_with("not ready: peer tor not Established") {
            Ok(())
        } else {
            Err(body)
        }
    });

    let frr = Tor::new().on(&lab);
    frr.wait_established(neighbor, LONG);
    // Established, End-of-RIB waiting for advertise_delay: not ready, and
    // FRR has had no End-of-RIB.
    let (code, body) = readyz(&lab.node);
    assert_eq!(code, 503, "{body}\n{}", node.log());
    assert_eq!(
        body,
        "not ready: peer tor Established, not yet sent the whole table and End-of-RIB"
    );
    assert!(!end_of_rib_received(&frr, neighbor));

    let start = Instant::now();
    let (code, body) = wait_until(LONG, "/readyz 200", || {
        let r = readyz(&lab.node);
        (r.0 == 200).then_some(r)
    });
    assert_eq!((code, body.as_str()), (200, "ready"));
    // At the first 200 FRR holds the route and End-of-RIB (within the time
    // vtysh itself takes).
    let route: Value = wait_until(Duration::from_secs(2), "the route at FRR", || {
        frr.prefix("198.51.100.70/32")
    });
    assert_eq!(route["prefix"], "198.51.100.70/32");
    assert!(wait_until(
        Duration::from_secs(2),
        "End-of-RIB at FRR",
        || { end_of_rib_received(&frr, neighbor).then_some(true) }
    ));
    eprintln!(
        "readyz turned 200 {:?} after polling began",
        start.elapsed()
    );
}

/// Two peers, one of them never answering (its router in maintenance): not
/// ready while the wait lasts, then ready with the reason — the rollout is
/// not blocked for ever.
#[test]
fn a_peer_in_maintenance_stops_blocking_after_two_connect_retries() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    // 192.0.2.9 is on the lab's link and nobody has it: connects time out.
    // connect_retry 5s × 2 = the 10 s wait.
    let config = conf(
        &[
            peer("tor", "192.0.2.1", "1s"),
            peer("maint", "192.0.2.9", "5s"),
        ],
        Stability::new(),
    );
    let started = Instant::now();
    let node = Holdfast::start(&lab.node, &config, &vips(&["198.51.100.71"]));
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.71/32", LONG);
    wait_until(LONG, "End-of-RIB at FRR", || {
        end_of_rib_received(&frr, neighbor).then_some(())
    });
    let (code, body) = readyz(&lab.node);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "the lab took too long to check the waiting phase"
    );
    assert_eq!(code, 503, "{body}\n{}", node.log());
    assert!(
        body.starts_with("not ready: peer maint not Established (")
            && body.ends_with("waiting up to 10s before not blocking the rollout)"),
        "{body}"
    );
    let (code, body) = wait_until(LONG, "/readyz 200", || {
        let r = readyz(&lab.node);
        (r.0 == 200).then_some(r)
    });
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "ready before the wait was over: {body}"
    );
    assert_eq!(
        (code, body.as_str()),
        (
            200,
            "ready: peer maint not Established after 10s; not blocking the rollout"
        )
    );
}

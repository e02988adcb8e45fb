//! `holdfast status` and `holdfast explain` against a real daemon peering
//! with FRR's bgpd in network namespaces: the Up/Down column of a peer that
//! was up and went down, and `explain` as text and as JSON.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const VIP: &str = "198.51.100.10";

fn node_ip() -> IpAddr {
    NODE.parse().unwrap()
}

/// The node peering with the ToR as `tor1`.
fn conf() -> String {
    Config::node(65001, NODE)
        .peer(Peer::new("tor1", TOR, 65000).fast())
        .advertisement(Advertisement::public("65001:100"))
        .to_toml()
}

fn tor1(node: &Holdfast) -> Value {
    node.status()["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "tor1")
        .cloned()
        .expect("tor1 in the status")
}

/// The Up/Down cell of tor1's row in `holdfast status`.
fn up_down_cell(text: &str) -> String {
    let row = text
        .lines()
        .find(|l| l.starts_with("tor1 "))
        .unwrap_or_else(|| panic!("no tor1 row in:\n{text}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    // Neighbor Address AS MsgRcvd MsgSent Up/Down State/PfxSnt
    assert_eq!(cells.len(), 7, "{row}");
    cells[5].to_string()
}

fn seconds(hh_mm_ss: &str) -> u64 {
    let parts: Vec<u64> = hh_mm_ss
        .split(':')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("{hh_mm_ss} is not HH:MM:SS"))
        })
        .collect();
    assert_eq!(parts.len(), 3, "{hh_mm_ss}");
    parts[0] * 3600 + parts[1] * 60 + parts[2]
}

#[test]
fn status_shows_how_long_a_peer_that_went_down_has_been_down() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let node = Holdfast::start(&lab.node, &conf(), &vips(&[VIP]));
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(LONG, "tor1 Established at holdfast", || {
        (tor1(&node)["state"] == "Established").then_some(())
    });
    let up = tor1(&node);
    assert!(
        up["down_seconds"].is_null(),
        "Established: no down time: {up}"
    );

    // FRR shuts the neighbor down (Cease/Administrative Shutdown) and
    // refuses it from then on: holdfast keeps retrying every second, so its
    // FSM state keeps changing while the session stays down.
    frr.configure(&["router bgp 65000", &format!("neighbor {NODE} shutdown")]);
    let went_down = Instant::now();
    testlab::wait_until(LONG, "tor1 down at holdfast", || {
        (tor1(&node)["state"] != "Established").then_some(())
    });
    std::thread::sleep(Duration::from_secs(4));

    let down = tor1(&node);
    let down_seconds = down["down_seconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("a peer that was up and went down has down_seconds: {down}"));
    let bound = went_down.elapsed().as_secs() + 1;
    assert!(
        (3..=bound).contains(&down_seconds),
        "down_seconds {down_seconds}, down for about {bound} s: {down}"
    );
    let cell = up_down_cell(&node.status_text());
    assert_ne!(cell, "never", "{}", node.status_text());
    let shown = seconds(&cell);
    assert!(
        (3..=bound + 1).contains(&shown),
        "Up/Down {cell}, down for about {bound} s:\n{}",
        node.status_text()
    );

    // Back up: the Up/Down column is the session's uptime again, and
    // down_seconds is gone.
    frr.configure(&["router bgp 65000", &format!("no neighbor {NODE} shutdown")]);
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(LONG, "tor1 Established again at holdfast", || {
        (tor1(&node)["state"] == "Established").then_some(())
    });
    let again = tor1(&node);
    assert!(again["down_seconds"].is_null(), "{again}");
    let cell = up_down_cell(&node.status_text());
    assert!(seconds(&cell) < 3, "fresh session, Up/Down {cell}");
}

#[test]
fn explain_as_text_and_as_json() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let node = Holdfast::start(&lab.node, &conf(), &vips(&[VIP]));
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix(&format!("{VIP}/32"), LONG);

    let (code, text) = node.explain(VIP);
    assert_eq!(code, 0, "{text}");
    let peers = text
        .split("\nPeers:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Peers: section in:\n{text}"));
    assert_eq!(peers, "  tor1  advertised\n", "{text}");

    let out = lab.node.exec(&[BIN, "explain", VIP, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).expect("explain --json is JSON");
    assert_eq!(json["vip"], VIP, "{json}");
    assert_eq!(json["advertised"], true, "{json}");
    assert_eq!(json["peers"][0]["peer"], "tor1", "{json}");
    assert_eq!(json["peers"][0]["advertised"], true, "{json}");
    assert!(
        json["summary"]
            .as_str()
            .is_some_and(|s| text.starts_with(s)),
        "the text starts with the JSON's summary: {json}\n{text}"
    );

    // Not advertised: exit 1 with either form.
    let absent = "198.51.100.99";
    let (code, text) = node.explain(absent);
    assert_eq!(code, 1, "{text}");
    let out = lab.node.exec(&[BIN, "explain", absent, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).expect("explain --json is JSON");
    assert_eq!(json["advertised"], false, "{json}");
}

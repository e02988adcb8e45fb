//! Routing policy per node, against FRR: `[[node_override]]` chosen by a
//! Node label (a real API server, the label changed with the real kubectl)
//! or by name (`$NODE_NAME`, the file source), the router ID of a node
//! without IPv4, peers with `asn = "external"`, and a per-peer `local_asn`.

mod common;

use std::net::IpAddr;

use common::*;
use serde_json::{Value, json};
use testlab::{Frr, Lab, Netns, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const TOR6: &str = "2001:db8::1";
const NODE6: &str = "2001:db8::2";
const VIP: &str = "198.51.100.10";
const VIP_PREFIX: &str = "198.51.100.10/32";
const VIP6: &str = "2001:db8:100::10";
const VIP6_PREFIX: &str = "2001:db8:100::10/128";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

/// FRR in `asn` with router ID `id`, each neighbor's `remote-as` as
/// written (`"external"` or a number), fast timers, both families, no
/// graceful restart (an AS change must not leave stale paths).
fn frr(asn: u32, id: &str, neighbors: &[(&str, &str)]) -> String {
    frr_conf_remote(asn, id, neighbors, "", "")
}

/// The ToR of the pair as [`frr`] has it: no graceful restart, the node's
/// AS as `remote` says.
fn tor(remote: &str) -> Tor {
    Tor::new().without_graceful_restart().node_remote_as(remote)
}

/// peer `name` at `address` with fast connections.
fn peer_at(name: &str, address: &str, asn: impl Into<PeerAsn>) -> Peer {
    Peer::new(name, address, asn)
        .hold_time("9s")
        .connect_retry("1s")
}

/// What FRR says of a neighbor: its AS and router ID, as FRR learned them
/// from the OPEN. Both fields must be there.
fn remote_as_and_id(frr: &Frr, addr: &str) -> (u64, String) {
    let n = frr.neighbor(ip(addr));
    let asn = n["remoteAs"]
        .as_u64()
        .unwrap_or_else(|| panic!("FRR shows no remoteAs for {addr}: {n}"));
    let id = n["remoteRouterId"]
        .as_str()
        .unwrap_or_else(|| panic!("FRR shows no remoteRouterId for {addr}: {n}"))
        .to_string();
    (asn, id)
}

/// The AS_PATH FRR has for `prefix` (its only path).
fn as_path(frr: &Frr, prefix: &str) -> String {
    let route = frr.wait_prefix(prefix, LONG);
    route["paths"][0]["aspath"]["string"]
        .as_str()
        .unwrap_or_else(|| panic!("FRR's path for {prefix} has no aspath.string: {route}"))
        .to_string()
}

fn peer<'s>(status: &'s Value, name: &str) -> &'s Value {
    status["peers"]
        .as_array()
        .expect("peers in status")
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no peer {name} in status: {status}"))
}

/// A Node label chooses the override: FRR, accepting any AS, sees the
/// overridden AS and router ID; when the label changes, the node's
/// session comes back with the file's values, and with another label
/// with another override's.
#[test]
fn a_node_label_chooses_the_override_frr_sees_and_a_label_change_moves_it() {
    testlab::require_root();
    let lab = Lab::pair();
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, &[("rack", "b")]);
    let frr = tor("external").on(&lab);
    // The first override's selector is at 16:17, as the status says below.
    let config = Config::new()
        .speaker(65001, NODE)
        .peer(peer_at("tor1", TOR, 65000))
        .kubernetes_source()
        .node_override(
            NodeOverride::selecting(Selector::labels(&[("rack", "b")]))
                .asn(65002)
                .router_id("192.0.2.202"),
        )
        .node_override(
            NodeOverride::selecting(Selector::labels(&[("rack", "c")]))
                .asn(65003)
                .router_id("192.0.2.203"),
        );
    let h = k.holdfast(&lab.node, "node-1", &config.to_toml());
    frr.wait_established(ip(NODE), LONG);
    assert_eq!(
        remote_as_and_id(&frr, NODE),
        (65002, "192.0.2.202".to_string()),
        "FRR sees the first session with the rack=b override\n{}",
        h.log()
    );
    let status = h.status();
    // The session started with the override: it did not come up with the
    // file's values first and reset once the labels were known.
    assert_eq!(
        peer(&status, "tor1")["established_transitions"],
        1,
        "{status}"
    );
    assert_eq!(status["asn"], 65002, "{status}");
    assert_eq!(status["router_id"], "192.0.2.202", "{status}");
    let overrides = status["node_overrides"].as_array().expect("node_overrides");
    assert_eq!(overrides.len(), 1, "{status}");
    let shown = overrides[0].as_str().unwrap();
    assert!(
        shown.contains("(by node_selector): asn, router_id") && shown.contains(":16:17"),
        "status names the override: {shown}"
    );
    assert!(
        h.status_text()
            .contains("node override [[node_override]] at"),
        "{}",
        h.status_text()
    );
    // explain names it too, whatever the VIP.
    let (_, why) = h.explain(VIP);
    assert!(
        why.contains("this node's config has [[node_override]] at")
            && why.contains("(by node_selector): asn, router_id"),
        "{why}"
    );

    // The label goes (the real `kubectl label`): the file's AS and router ID.
    k.api.kubectl(&["label", "node", "node-1", "rack-"]);
    wait_until(LONG, "FRR to see AS 65001 from the node", || {
        (frr.state(ip(NODE)) == "Established"
            && remote_as_and_id(&frr, NODE) == (65001, NODE.to_string()))
            .then_some(())
    });
    assert_eq!(h.status()["node_overrides"], json!([]));

    // Another rack: the other override.
    k.api.kubectl(&["label", "node", "node-1", "rack=c"]);
    wait_until(LONG, "FRR to see AS 65003 from the node", || {
        (frr.state(ip(NODE)) == "Established"
            && remote_as_and_id(&frr, NODE) == (65003, "192.0.2.203".to_string()))
            .then_some(())
    });
    assert!(
        h.log().contains("node labels changed: recomputing"),
        "{}",
        h.log()
    );
}

/// With the file source an override applies by `$NODE_NAME`: here it
/// moves peer tor1 to the router's IPv6 address (FRR knows only the
/// node's IPv6 address as its neighbor) and sets the AS FRR expects.
#[test]
fn an_override_by_node_name_applies_with_the_file_source() {
    testlab::require_root();
    let lab = Lab::pair();
    let frr = tor("65007").ipv6_only().on(&lab);
    let config = Config::new()
        .speaker(65001, NODE)
        .peer(peer_at("tor1", TOR, 65000))
        .file_source()
        .node_override(
            NodeOverride::names(&["node-6", "node-7"])
                .asn(65007)
                .peer_addresses("tor1", TOR6, NODE6),
        );
    let h = Holdfast::start_env(
        &lab.node,
        &config.to_toml(),
        "",
        &[],
        &[("NODE_NAME", "node-7")],
    );
    frr.wait_established(ip(NODE6), LONG);
    assert_eq!(remote_as_and_id(&frr, NODE6).0, 65007, "{}", h.log());
    let status = h.status();
    let tor1 = peer(&status, "tor1");
    assert_eq!(tor1["address"], TOR6, "{status}");
    assert_eq!(tor1["local_address"], NODE6, "{status}");
}

/// A node without IPv4 and `router_id = "auto"`: the router ID FRR sees is
/// the one derived from the node name, not 0.0.0.0.
#[test]
fn an_ipv6_only_node_gets_a_router_id_derived_from_its_name() {
    testlab::require_root();
    let lab = Lab::pair();
    // The node keeps only its IPv6 address (and loopback).
    lab.node.ip(&[
        "addr",
        "del",
        &format!("{NODE}/24"),
        "dev",
        testlab::lab::pair::NODE_IF,
    ]);
    let v4 = lab
        .node
        .ip(&["-4", "-o", "addr", "show", "scope", "global"]);
    assert!(v4.trim().is_empty(), "the node still has IPv4: {v4}");
    let frr = tor("65001").ipv6_only().on(&lab);
    let config = Config::new()
        .speaker(65001, "auto")
        .peer(peer_at("tor", TOR6, 65000).families(&["ipv6-unicast"]))
        .file_source();
    let h = Holdfast::start_env(
        &lab.node,
        &config.to_toml(),
        "",
        &[],
        &[("NODE_NAME", "worker-v6-1")],
    );
    frr.wait_established(ip(NODE6), LONG);
    let expected = holdfast::config::derived_router_id("worker-v6-1");
    let (_, id) = remote_as_and_id(&frr, NODE6);
    assert_ne!(id, "0.0.0.0");
    assert_eq!(id, expected.to_string(), "{}", h.log());
    assert_eq!(h.status()["router_id"], expected.to_string());
    assert!(
        h.log()
            .contains("the router ID is derived from the node name"),
        "{}",
        h.log()
    );
}

/// `asn = "external"` towards two routers in different ASes: both
/// sessions come up, status shows the AS each OPEN gave, and the routes
/// are eBGP routes (our AS in AS_PATH).
#[test]
fn external_peers_in_two_different_ases_are_both_established() {
    testlab::require_root();
    let lab = Lab::pair();
    // A second router on its own link, IPv6 only.
    let router2 = Netns::new("router2");
    let _link = testlab::veth(&lab.node, "to-router2", &router2, "to-node");
    lab.node.add_address("to-router2", "2001:db8:2::2/64");
    router2.add_address("to-node", "2001:db8:2::1/64");
    let frr_a = tor("65001").asn(65010).on(&lab);
    // With zebra: the IPv6 route's next hop carries a link-local address
    // (LAB-NOTES: bgpd alone resets such a session).
    let frr_b = Frr::start_with_zebra(
        &router2,
        &frr(65020, "192.0.2.129", &[("2001:db8:2::2", "65001")]),
    );
    let config = Config::new()
        .speaker(65001, NODE)
        .peer(peer_at("tor-a", TOR, PeerAsn::External).families(&["ipv4-unicast"]))
        .peer(peer_at("tor-b", "2001:db8:2::1", PeerAsn::External).families(&["ipv6-unicast"]))
        .file_source();
    let h = Holdfast::start(&lab.node, &config.to_toml(), &vips(&[VIP, VIP6]));
    frr_a.wait_established(ip(NODE), LONG);
    frr_b.wait_established(ip("2001:db8:2::2"), LONG);
    h.wait_peer_established("tor-a", LONG);
    h.wait_peer_established("tor-b", LONG);
    let status = h.status();
    for (name, asn) in [("tor-a", 65010), ("tor-b", 65020)] {
        let p = peer(&status, name);
        assert_eq!(p["configured_asn"], "external", "{p}");
        assert_eq!(p["peer_asn"], asn, "{p}");
        assert_eq!(p["asn"], asn, "{p}");
    }
    let text = h.status_text();
    assert!(
        text.contains("65010 (external)") && text.contains("65020 (external)"),
        "{text}"
    );
    assert_eq!(as_path(&frr_a, VIP_PREFIX), "65001");
    assert_eq!(as_path(&frr_b, VIP6_PREFIX), "65001");
}

/// `local_asn`: FRR, configured for AS 65100 at the node, establishes, and
/// the route's AS_PATH is 65100 alone (holdfast originates: the speaker's
/// own 65001 is nowhere on this session).
#[test]
fn local_asn_is_the_as_frr_sees_and_the_only_as_in_the_path() {
    testlab::require_root();
    let lab = Lab::pair();
    let frr = tor("65100").on(&lab);
    let config = Config::new()
        .speaker(65001, NODE)
        .peer(peer_at("tor", TOR, 65000).local_asn(65100))
        .file_source();
    let h = Holdfast::start(&lab.node, &config.to_toml(), &vips(&[VIP]));
    frr.wait_established(ip(NODE), LONG);
    assert_eq!(remote_as_and_id(&frr, NODE).0, 65100, "{}", h.log());
    assert_eq!(as_path(&frr, VIP_PREFIX), "65100");
    let status = h.status();
    assert_eq!(peer(&status, "tor")["local_asn"], 65100, "{status}");
}

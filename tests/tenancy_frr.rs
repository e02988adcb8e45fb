//! Tenants and per-peer export policy against two real FRR routers: an
//! eBGP ToR (tor-a, AS 65000, 192.0.2.1) and an iBGP router (tor-b, AS
//! 65001, 198.18.0.1 on a second link). Each tenant's VIPs reach only its
//! own router; each router's export rules are seen at FRR (a rejected
//! prefix range absent, a community and a prepend set, LOCAL_PREF over
//! iBGP); a reload that changes only one peer's rules sends that peer
//! only what changed, on the same session; `explain` names the rule.
//! Needs root (network namespaces, FRR).

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use serde_json::Value;
use testlab::{Frr, Lab, Netns, wait_until};

const NODE: &str = "192.0.2.2";
const NODE_B: &str = "198.18.0.2";
const TOR_B: &str = "198.18.0.1";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

/// The pair's ToR (eBGP) and a second router on its own link, iBGP in the
/// node's AS: `(lab, router2's namespace and link, tor-a, tor-b)`.
fn two_routers() -> (Lab, Netns, testlab::Link, Frr, Frr) {
    testlab::require_root();
    let (lab, frr_a) = Tor::new().start();
    let router2 = Netns::new("router2");
    let link = testlab::veth(&lab.node, "to-router2", &router2, "to-node");
    lab.node.add_address("to-router2", "198.18.0.2/30");
    router2.add_address("to-node", "198.18.0.1/30");
    let frr_b = Frr::start(
        &router2,
        &testlab::frr::bgpd_conf(65001, "198.18.0.1".parse().unwrap(), &[(ip(NODE_B), 65001)]),
    );
    (lab, router2, link, frr_a, frr_b)
}

fn peers(config: Config, a: Peer, b: Peer) -> Config {
    config.peer(a).peer(b)
}

fn tor_a() -> Peer {
    Peer::new("tor-a", "192.0.2.1", 65000).fast()
}

fn tor_b() -> Peer {
    Peer::new("tor-b", TOR_B, 65001).fast()
}

/// One `[[vip]]` per (address, tenant).
fn vip_file(entries: &[(&str, Option<&str>)]) -> String {
    entries
        .iter()
        .map(|(a, t)| match t {
            Some(t) => format!("[[vip]]\naddress = \"{a}\"\ntenant = \"{t}\"\n"),
            None => format!("[[vip]]\naddress = \"{a}\"\n"),
        })
        .collect()
}

fn path0(route: &Value) -> &Value {
    &route["paths"][0]
}

fn communities(route: &Value) -> String {
    path0(route)["community"]["string"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn connections(frr: &Frr, addr: &str) -> u64 {
    let n = frr.neighbor(ip(addr));
    n["connectionsEstablished"]
        .as_u64()
        .unwrap_or_else(|| panic!("no connectionsEstablished in FRR's neighbor JSON: {n}"))
}

/// RFC 4271 §9.1.3: each tenant's VIPs reach only its router, and each
/// router's export rules decide what it gets and with which attributes:
/// a rejected prefix range is absent at tor-a, tor-a's community and
/// prepend are on its routes, and tor-b (iBGP) gets tor-b's LOCAL_PREF
/// (RFC 4271 §5.1.5) and large community. `explain` names the rules.
#[test]
fn tenants_reach_only_their_routers_and_each_routers_rules_apply() {
    let (lab, _router2, _link, frr_a, frr_b) = two_routers();
    let config = peers(
        Config::node(65001, NODE),
        tor_a().export(&[
            ExportRule::new()
                .name("drop-high")
                .prefixes(&["198.51.100.128/25 le 32"])
                .action("reject"),
            ExportRule::new()
                .name("tag")
                .set_add_communities(&["65000:42"])
                .set_prepend(2),
        ]),
        tor_b().export(&[ExportRule::new()
            .name("prefer")
            .tenants(&["globex"])
            .set_local_pref(300)
            .set_add_large_communities(&["65001:7:7"])]),
    )
    .tenant(Tenant::new("acme", &["tor-a"]))
    .tenant(Tenant::new("globex", &["tor-b"]));
    let vips = vip_file(&[
        ("198.51.100.1", Some("acme")),
        ("198.51.100.2", Some("globex")),
        ("198.51.100.3", None),
        ("198.51.100.200", None),
    ]);
    let node = Holdfast::start(&lab.node, &config.to_toml(), &vips);
    frr_a.wait_established(ip(NODE), LONG);
    frr_b.wait_established(ip(NODE_B), LONG);

    // tor-a: acme's VIP and the tenant-less one, tagged and prepended.
    let acme = frr_a.wait_prefix("198.51.100.1/32", LONG);
    let plain = frr_a.wait_prefix("198.51.100.3/32", LONG);
    for r in [&acme, &plain] {
        assert_eq!(communities(r), "65000:42", "{r}");
        assert_eq!(path0(r)["aspath"]["string"], "65001 65001 65001", "{r}");
    }
    // tor-b: globex's VIP with its LOCAL_PREF and large community, the
    // tenant-less ones without.
    let globex = frr_b.wait_prefix("198.51.100.2/32", LONG);
    assert_eq!(path0(&globex)["locPrf"], 300, "{globex}");
    assert_eq!(
        path0(&globex)["largeCommunity"]["string"],
        "65001:7:7",
        "{globex}"
    );
    let plain_b = frr_b.wait_prefix("198.51.100.3/32", LONG);
    assert_eq!(path0(&plain_b)["locPrf"], 100, "{plain_b}");
    frr_b.wait_prefix("198.51.100.200/32", LONG);

    // Everything each router was going to get has arrived (one table,
    // then End-of-RIB); what it must not have is absent.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        frr_a.prefix("198.51.100.2/32").is_none(),
        "globex's VIP at tor-a"
    );
    assert!(
        frr_a.prefix("198.51.100.200/32").is_none(),
        "rejected range at tor-a"
    );
    assert!(
        frr_b.prefix("198.51.100.1/32").is_none(),
        "acme's VIP at tor-b"
    );

    let (_, text) = node.explain("198.51.100.200");
    assert!(
        text.contains("export rule 1 (\"drop-high\") rejects it"),
        "{text}"
    );
    let (_, text) = node.explain("198.51.100.1");
    assert!(
        text.contains("tenant \"acme\" may not reach this peer"),
        "{text}"
    );
    assert!(
        text.contains("export rule 2 (\"tag\") set add communities 65000:42, prepend 2"),
        "{text}"
    );
}

/// A reload that changes only tor-a's rules: tor-a gets the one changed
/// route and the one withdrawal, nothing for the unchanged route, on the
/// same session (FRR's connectionsEstablished stays); tor-b gets nothing.
#[test]
fn a_policy_only_reload_resends_only_what_changed_on_the_same_session() {
    let (lab, _router2, _link, frr_a, frr_b) = two_routers();
    let config = peers(Config::node(65001, NODE), tor_a(), tor_b());
    let vips = vip_file(&[
        ("198.51.100.1", None),
        ("198.51.100.2", None),
        ("198.51.100.3", None),
    ]);
    let node = Holdfast::start(&lab.node, &config.to_toml(), &vips);
    frr_a.wait_established(ip(NODE), LONG);
    frr_b.wait_established(ip(NODE_B), LONG);
    for p in ["198.51.100.1/32", "198.51.100.2/32", "198.51.100.3/32"] {
        frr_a.wait_prefix(p, LONG);
        frr_b.wait_prefix(p, LONG);
    }
    std::thread::sleep(Duration::from_secs(3));
    let (conn_a, conn_b) = (connections(&frr_a, NODE), connections(&frr_b, NODE_B));
    let (upd_a, upd_b) = (
        frr_a.updates_received(ip(NODE)),
        frr_b.updates_received(ip(NODE_B)),
    );
    let unchanged_at = path0(&frr_a.prefix("198.51.100.2/32").unwrap())["lastUpdate"].clone();

    let changed = peers(
        Config::node(65001, NODE),
        tor_a().export(&[
            ExportRule::new()
                .prefixes(&["198.51.100.3/32"])
                .action("reject"),
            ExportRule::new()
                .prefixes(&["198.51.100.1/32"])
                .set_add_communities(&["65000:7"]),
        ]),
        tor_b(),
    );
    node.write_config(&changed.to_toml());
    frr_a.wait_no_prefix("198.51.100.3/32", LONG);
    wait_until(LONG, "the community on 198.51.100.1 at tor-a", || {
        frr_a
            .prefix("198.51.100.1/32")
            .filter(|r| communities(r) == "65000:7")
            .map(|_| ())
    });
    std::thread::sleep(Duration::from_secs(2));

    assert_eq!(
        connections(&frr_a, NODE),
        conn_a,
        "tor-a's session was reset"
    );
    assert_eq!(
        connections(&frr_b, NODE_B),
        conn_b,
        "tor-b's session was reset"
    );
    assert_eq!(frr_a.state(ip(NODE)), "Established");
    // One UPDATE for the changed route, one for the withdrawal (or both
    // in one): never the whole table again.
    let sent_a = frr_a.updates_received(ip(NODE)) - upd_a;
    assert!((1..=2).contains(&sent_a), "tor-a got {sent_a} UPDATEs");
    assert_eq!(
        frr_b.updates_received(ip(NODE_B)),
        upd_b,
        "tor-b, whose policy did not change, got UPDATEs"
    );
    // FRR derives the epoch from its monotonic clock: it may read a
    // second apart for the same instant. A route sent again would read
    // at least 3 s later (the wait before the reload).
    let epoch = |v: &Value| v["epoch"].as_i64().expect("lastUpdate.epoch");
    let now_at = path0(&frr_a.prefix("198.51.100.2/32").unwrap())["lastUpdate"].clone();
    assert!(
        (epoch(&now_at) - epoch(&unchanged_at)).abs() <= 1,
        "the unchanged route was sent again: {unchanged_at} then {now_at}"
    );
    assert!(
        !node.log().contains("resetting its session"),
        "{}",
        node.log()
    );
}

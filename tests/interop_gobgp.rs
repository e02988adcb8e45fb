//! holdfast against GoBGP (gobgpd), in network namespaces: sessions over
//! IPv4 and IPv6 transport with 4-octet ASNs, both VIP families with their
//! communities, and iBGP local-pref — each checked through `gobgp … -j`.

mod common;

use std::net::IpAddr;

use common::peers::*;
use common::*;
use serde_json::Value;
use testlab::{Afi, Gobgp, Lab};

/// gobgpd as the ToR, waiting for holdfast's connections
/// (`passive-mode`), one neighbor per address in `neighbors`, each with
/// IPv4 and IPv6 unicast.
fn gobgp_conf(lab: &Lab, local_asn: u32, neighbors: &[IpAddr], peer_asn: u32) -> String {
    let mut c = format!(
        "[global.config]\n  as = {local_asn}\n  router-id = \"{}\"\n",
        lab.router_v4
    );
    for n in neighbors {
        c.push_str(&format!(
            r#"[[neighbors]]
  [neighbors.config]
    neighbor-address = "{n}"
    peer-as = {peer_asn}
  [neighbors.timers.config]
    connect-retry = 2
    hold-time = 9
    keepalive-interval = 3
  [neighbors.transport.config]
    passive-mode = true
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"#
        ));
    }
    c
}

#[test]
fn ebgp_over_ipv4_and_ipv6_transport_with_4_octet_asns() {
    testlab::require_root();
    let lab = Lab::pair();
    let gobgp = Gobgp::start(
        &lab.router,
        &gobgp_conf(
            &lab,
            ROUTER_ASN,
            &[lab.node_v4.into(), lab.node_v6.into()],
            NODE_ASN,
        ),
    );
    let node = Holdfast::start(
        &lab.node,
        &dual_transport_conf(&lab, NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    gobgp.wait_established(lab.node_v4.into(), LONG);
    gobgp.wait_established(lab.node_v6.into(), LONG);
    let sessions = [lab.node_v4.to_string(), lab.node_v6.to_string()];
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let paths = wait_paths(&gobgp, prefix, &sessions);
        for path in paths.as_array().unwrap() {
            check_attributes(path, &[NODE_ASN]);
            assert!(
                attr(path, LOCAL_PREF_TYPE).is_none(),
                "no LOCAL_PREF over eBGP: {path}"
            );
        }
    }
    // The IPv6 route's next hop is the node's global address on the link,
    // over either transport.
    let paths = gobgp.rib_lookup(VIP6_PREFIX).unwrap();
    for path in paths.as_array().unwrap() {
        assert_eq!(
            attr(path, MP_REACH_TYPE).unwrap()["nexthop"],
            lab.node_v6.to_string(),
            "{path}"
        );
    }
    let paths = gobgp.rib_lookup(VIP4_PREFIX).unwrap();
    for path in paths.as_array().unwrap() {
        assert_eq!(
            attr(path, NEXT_HOP_TYPE).unwrap()["nexthop"],
            lab.node_v4.to_string(),
            "{path}"
        );
    }
    for (n, name) in [
        (IpAddr::from(lab.node_v4), "tor-v4"),
        (lab.node_v6.into(), "tor-v6"),
    ] {
        // Both routes and an End-of-RIB per family.
        let neighbor = wait_updates_received(&gobgp, n, 4);
        assert_eq!(neighbor["state"]["peer_asn"], NODE_ASN, "{neighbor}");
        assert_eq!(
            neighbor["state"]["router_id"],
            lab.node_v4.to_string(),
            "{neighbor}"
        );
        let adj_in = gobgp.adj_in(n, Afi::Ipv6);
        assert!(adj_in.get(VIP6_PREFIX).is_some(), "{adj_in}");
        let peer = node.wait_peer_established(name, LONG);
        assert_eq!(peer["asn"], ROUTER_ASN, "{peer}");
        assert_eq!(peer["established_transitions"], 1, "{peer}");
    }
}

/// `state.messages.received.update` of `gobgp neighbor ADDR -j`. gobgp
/// leaves protobuf defaults out, so a zero count has no `update` key; the
/// `received` object itself, with its `total` (OPEN and KEEPALIVEs at
/// least), must be there, or the JSON is not what this reads and the test
/// fails rather than counting 0.
fn gobgp_updates_received(neighbor: &Value) -> u64 {
    let received = &neighbor["state"]["messages"]["received"];
    let total = received["total"]
        .as_u64()
        .unwrap_or_else(|| panic!("gobgp reports no state.messages.received.total: {neighbor}"));
    assert!(total > 0, "gobgp counts no message received: {neighbor}");
    match received.get("update") {
        None => 0,
        Some(n) => n
            .as_u64()
            .unwrap_or_else(|| panic!("received.update is not a count: {neighbor}")),
    }
}

/// Waits until gobgpd has received `count` UPDATEs from `neighbor`
/// (no more); returns `gobgp neighbor ADDR -j`.
fn wait_updates_received(gobgp: &Gobgp, neighbor: IpAddr, count: u64) -> Value {
    testlab::wait_for(
        LONG,
        &format!("gobgpd to receive {count} UPDATEs from {neighbor}"),
        || {
            let json = gobgp.cli_json(&["neighbor", &neighbor.to_string()]);
            let received = gobgp_updates_received(&json);
            match received {
                n if n == count => Ok(json),
                n if n > count => {
                    panic!("gobgpd received {n} UPDATEs from {neighbor}, expected {count}: {json}")
                }
                _ => Err(json.to_string()),
            }
        },
    )
}

#[test]
fn ibgp_over_ipv6_transport_carries_local_pref() {
    testlab::require_root();
    let lab = Lab::pair();
    let gobgp = Gobgp::start(
        &lab.router,
        &gobgp_conf(&lab, ROUTER_ASN, &[lab.node_v6.into()], ROUTER_ASN),
    );
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v6.to_string(), ROUTER_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    let neighbor = IpAddr::from(lab.node_v6);
    gobgp.wait_established(neighbor, LONG);
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let paths = wait_paths(&gobgp, prefix, &[neighbor.to_string()]);
        let path = &paths[0];
        check_attributes(path, &[]);
        assert_eq!(
            attr(path, LOCAL_PREF_TYPE).map(|a| &a["value"]),
            Some(&serde_json::json!(LOCAL_PREF)),
            "{path}"
        );
    }
    let json = wait_updates_received(&gobgp, neighbor, 4);
    assert_eq!(
        json["conf"]["local_asn"], json["conf"]["peer_asn"],
        "iBGP: {json}"
    );

    let peer = node.peer_status("tor");
    assert_eq!(peer["established_transitions"], 1, "{peer}");
}

const NEXT_HOP_TYPE: u64 = 3;
const LOCAL_PREF_TYPE: u64 = 5;
const COMMUNITIES_TYPE: u64 = 8;
const MP_REACH_TYPE: u64 = 14;
const LARGE_COMMUNITY_TYPE: u64 = 32;

/// The attribute of type `code` of one path of `gobgp … -j` output.
fn attr(path: &Value, code: u64) -> Option<&Value> {
    path["attrs"]
        .as_array()?
        .iter()
        .find(|a| a["type"].as_u64() == Some(code))
}

/// AS_PATH, COMMUNITIES and LARGE_COMMUNITY of a path holdfast sent.
fn check_attributes(path: &Value, as_path: &[u32]) {
    // AS_PATH is well-known mandatory (RFC 4271 §5.1.2), also when empty
    // (iBGP): the attribute must be there.
    let as_path_attr =
        attr(path, 2).unwrap_or_else(|| panic!("no AS_PATH attribute (type 2): {path}"));
    let asns: Vec<u32> = as_path_attr["as_paths"]
        .as_array()
        .map(|segments| {
            segments
                .iter()
                .flat_map(|s| s["asns"].as_array().cloned().unwrap_or_default())
                .filter_map(|a| a.as_u64().and_then(|a| u32::try_from(a).ok()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(asns, as_path, "{path}");
    // gobgp prints a community as one number: 65001:100.
    assert_eq!(
        attr(path, COMMUNITIES_TYPE).map(|a| &a["communities"]),
        Some(&serde_json::json!([(65001u32 << 16) | 100])),
        "{path}"
    );
    assert_eq!(
        attr(path, LARGE_COMMUNITY_TYPE).map(|a| &a["value"]),
        Some(&serde_json::json!([{"ASN": NODE_ASN, "LocalData1": 1, "LocalData2": 100}])),
        "{path}"
    );
}

/// Waits until gobgpd's global RIB has a path for `prefix` from each
/// neighbor in `neighbors`; returns the paths.
fn wait_paths(gobgp: &Gobgp, prefix: &str, neighbors: &[String]) -> Value {
    testlab::wait_for(
        LONG,
        &format!("gobgpd to have {prefix} from {neighbors:?}"),
        || {
            let paths = gobgp.rib_lookup(prefix).unwrap_or_default();
            let from: Vec<&str> = paths
                .as_array()
                .map(|a| a.iter().filter_map(|p| p["neighbor-ip"].as_str()).collect())
                .unwrap_or_default();
            if neighbors.iter().all(|n| from.contains(&n.as_str())) {
                Ok(paths)
            } else {
                Err(paths.to_string())
            }
        },
    )
}

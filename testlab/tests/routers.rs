//! Real routers against each other, proving the launchers and the lab
//! recipes that holdfast's interop tests build on. Needs root and the
//! packages frr, bird2, gobgpd, exabgp (fails loudly without them).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use testlab::exabgp::{API_BLOCK, raw_message};
use testlab::frr::{BFD_FAST_PROFILE, bgpd_conf};
use testlab::{Afi, Bird, ExaBgp, Frr, Gobgp, Lab, wait_until};

/// Generous: sessions come up in a few seconds, but the machine is shared.
const SESSION: Duration = Duration::from_secs(60);
const ROUTE: Duration = Duration::from_secs(30);

const ROUTER_AS: u32 = 65000;
const NODE_AS: u32 = 65001;

/// FRR in the router namespace, peering with the node and announcing
/// 203.0.113.0/24.
fn frr_router(lab: &Lab, neighbors: &[IpAddr]) -> String {
    let peers: Vec<(IpAddr, u32)> = neighbors.iter().map(|n| (*n, NODE_AS)).collect();
    let v6_announce = if neighbors.iter().any(IpAddr::is_ipv6) {
        " address-family ipv6 unicast\n  network 2001:db8:203::/48\n exit-address-family\n"
    } else {
        ""
    };
    format!(
        "{}router bgp {ROUTER_AS}\n address-family ipv4 unicast\n  network 203.0.113.0/24\n exit-address-family\n{v6_announce}exit\n",
        bgpd_conf(ROUTER_AS, lab.router_v4, &peers)
    )
}

fn bird_conf(lab: &Lab, afi: Afi) -> String {
    let (channel, local, neighbor, route) = match afi {
        Afi::Ipv4 => (
            "ipv4",
            lab.node_v4.to_string(),
            lab.router_v4.to_string(),
            "198.51.100.10/32",
        ),
        Afi::Ipv6 => (
            "ipv6",
            lab.node_v6.to_string(),
            lab.router_v6.to_string(),
            "2001:db8:100::10/128",
        ),
    };
    format!(
        "router id {node_id};
protocol device {{}}
protocol static vips {{ {channel}; route {route} blackhole; }}
protocol bgp tor {{
  local {local} as {NODE_AS};
  neighbor {neighbor} as {ROUTER_AS};
  hold time 9;
  connect delay time 1;
  connect retry time 2;
  error wait time 1, 5;
  {channel} {{ import all; export all; }};
}}
",
        node_id = lab.node_v4
    )
}

#[test]
fn frr_learns_a_bird_route_over_ipv4() {
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_router(&lab, &[lab.node_v4.into()]));
    let bird = Bird::start(&lab.node, &bird_conf(&lab, Afi::Ipv4));

    frr.wait_established(lab.node_v4.into(), SESSION);
    bird.wait_established("tor", SESSION);
    let route = frr.wait_prefix("198.51.100.10/32", ROUTE);
    let path = &route["paths"][0];
    assert_eq!(path["aspath"]["string"], "65001", "{route}");
    assert_eq!(
        path["nexthops"][0]["ip"],
        lab.node_v4.to_string(),
        "{route}"
    );
    assert_eq!(path["valid"], true, "{route}");
    assert!(frr.updates_received(lab.node_v4.into()) >= 1);
    assert!(
        frr.table(Afi::Ipv4)
            .contains(&"198.51.100.10/32".to_owned())
    );
    assert_eq!(frr.count(Afi::Ipv4), 2, "table: {:?}", frr.table(Afi::Ipv4));

    // And the other way: BIRD has FRR's network.
    let bird_route = bird.wait_route("203.0.113.0/24", ROUTE);
    assert!(bird_route.contains("BGP.as_path: 65000"), "{bird_route}");
    assert!(bird.route("198.51.100.99/32").is_none());
}

#[test]
fn frr_learns_a_bird_route_over_ipv6() {
    let lab = Lab::pair();
    // zebra beside bgpd: BIRD sends its link-local address as a second next
    // hop on a direct session, which bgpd alone (-Z) rejects for lack of
    // interface information.
    let frr = Frr::start_with_zebra(&lab.router, &frr_router(&lab, &[lab.node_v6.into()]));
    let bird = Bird::start(&lab.node, &bird_conf(&lab, Afi::Ipv6));

    frr.wait_established(lab.node_v6.into(), SESSION);
    bird.wait_established("tor", SESSION);
    let route = frr.wait_prefix("2001:db8:100::10/128", ROUTE);
    let path = &route["paths"][0];
    assert_eq!(path["aspath"]["string"], "65001", "{route}");
    let nexthops: Vec<&str> = path["nexthops"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|n| n["ip"].as_str())
        .collect();
    assert!(nexthops.contains(&"2001:db8::2"), "next hops {nexthops:?}");
    assert!(
        nexthops.iter().any(|n| n.starts_with("fe80:")),
        "no link-local next hop: {nexthops:?}"
    );
    assert_eq!(frr.table(Afi::Ipv6).len(), 2, "{:?}", frr.table(Afi::Ipv6));
    assert_eq!(frr.count(Afi::Ipv6), 2);

    let bird_route = bird.wait_route("2001:db8:203::/48", ROUTE);
    assert!(bird_route.contains("BGP.as_path: 65000"), "{bird_route}");
}

#[test]
fn frr_learns_a_route_injected_through_the_gobgp_cli() {
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_router(&lab, &[lab.node_v4.into()]));
    let gobgp = Gobgp::start(
        &lab.node,
        &format!(
            r#"[global.config]
  as = {NODE_AS}
  router-id = "{node}"
  local-address-list = ["{node}"]
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{router}"
    peer-as = {ROUTER_AS}
  [neighbors.timers.config]
    connect-retry = 2
    hold-time = 9
    keepalive-interval = 3
"#,
            node = lab.node_v4,
            router = lab.router_v4
        ),
    );

    gobgp.wait_established(lab.router_v4.into(), SESSION);
    frr.wait_established(lab.node_v4.into(), SESSION);
    gobgp.add_route("198.51.100.20/32", &["community", "65001:100"]);
    let route = frr.wait_prefix("198.51.100.20/32", ROUTE);
    assert_eq!(
        route["paths"][0]["community"]["string"], "65001:100",
        "{route}"
    );
    assert_eq!(route["paths"][0]["aspath"]["string"], "65001", "{route}");

    let paths = gobgp.wait_route("203.0.113.0/24", ROUTE);
    assert_eq!(paths[0]["best"], true, "{paths}");
    let adj_in = gobgp.adj_in(lab.router_v4.into(), Afi::Ipv4);
    assert!(adj_in.get("203.0.113.0/24").is_some(), "{adj_in}");

    gobgp.del_route("198.51.100.20/32");
    frr.wait_no_prefix("198.51.100.20/32", ROUTE);
}

#[test]
fn frr_and_exabgp_exchange_routes_and_exabgp_sends_on_demand() {
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_router(&lab, &[lab.node_v4.into()]));
    let exabgp = ExaBgp::start(
        &lab.node,
        &[lab.node_v4.into()],
        &format!(
            "neighbor {router} {{
    router-id {node};
    local-address {node};
    local-as {NODE_AS};
    peer-as {ROUTER_AS};
    hold-time 9;
    family {{ ipv4 unicast; }}
{API_BLOCK}
    static {{ route 198.51.100.30/32 next-hop self community [65001:7]; }}
}}
",
            router = lab.router_v4,
            node = lab.node_v4
        ),
    );

    frr.wait_established(lab.node_v4.into(), SESSION);
    exabgp.wait_up(lab.router_v4.into(), SESSION);
    let route = frr.wait_prefix("198.51.100.30/32", ROUTE);
    assert_eq!(
        route["paths"][0]["community"]["string"], "65001:7",
        "{route}"
    );

    // ExaBGP's capture sees FRR's UPDATE, parsed.
    exabgp.wait_announced("203.0.113.0/24", ROUTE);
    let update = exabgp.wait_received(ROUTE, "FRR's UPDATE for 203.0.113.0/24", |m| {
        m["type"] == "update" && m.to_string().contains("203.0.113.0/24")
    });
    let attributes = &update["neighbor"]["message"]["update"]["attribute"];
    assert_eq!(
        attributes["as-path"],
        serde_json::json!([ROUTER_AS]),
        "{update}"
    );
    let bytes = raw_message(&update).expect("the UPDATE's raw bytes");
    assert_eq!(bytes[18], 2, "message type of {bytes:02x?}");
    assert!(!exabgp.received_of_type("open").is_empty());

    // On demand: announce, then withdraw.
    exabgp.announce("198.51.100.31/32 next-hop self large-community [65001:1:100]");
    let route = frr.wait_prefix("198.51.100.31/32", ROUTE);
    assert_eq!(
        route["paths"][0]["largeCommunity"]["string"], "65001:1:100",
        "{route}"
    );
    exabgp.withdraw("198.51.100.31/32 next-hop self");
    frr.wait_no_prefix("198.51.100.31/32", ROUTE);
    assert!(exabgp.command("no such command").is_err());

    // A deliberately malformed UPDATE: ORIGIN (type 1, flags 0x40) with the
    // undefined value 5. ExaBGP sends the bytes as given.
    exabgp.announce_raw_attribute("198.51.100.32/32", "self", 1, 0x40, &[5]);
    let sent = wait_until(ROUTE, "ExaBGP to send the malformed UPDATE", || {
        exabgp.sent().into_iter().find(|m| {
            raw_message(m)
                .is_some_and(|bytes| bytes.windows(4).any(|w| w == [0x40, 0x01, 0x01, 0x05]))
        })
    });
    assert_eq!(sent["type"], "update", "{sent}");
    wait_until(ROUTE, "FRR to receive the malformed UPDATE", || {
        frr.log()
            .contains("Origin attribute value is invalid 5")
            .then_some(())
    });
    // RFC 7606 §7.1: an invalid ORIGIN is treat-as-withdraw.
    assert!(
        frr.prefix("198.51.100.32/32").is_none(),
        "FRR installed the malformed route"
    );
}

#[test]
fn frr_bfd_comes_up_and_goes_down_when_the_link_is_black_holed() {
    let lab = Lab::pair();
    let conf = |local: &Lab, me: IpAddr, asn: u32, peer: IpAddr, peer_as: u32| {
        let id = match me {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(_) => local.router_v4,
        };
        format!(
            "{}router bgp {asn}\n neighbor {peer} bfd\n neighbor {peer} bfd profile fast\nexit\n",
            bgpd_conf(asn, id, &[(peer, peer_as)])
        )
    };
    let router = Frr::start_with_bfd(
        &lab.router,
        &conf(
            &lab,
            lab.router_v4.into(),
            ROUTER_AS,
            lab.node_v4.into(),
            NODE_AS,
        ),
        BFD_FAST_PROFILE,
    );
    let node = Frr::start_with_bfd(
        &lab.node,
        &conf(
            &lab,
            lab.node_v4.into(),
            NODE_AS,
            lab.router_v4.into(),
            ROUTER_AS,
        ),
        BFD_FAST_PROFILE,
    );
    router.wait_established(lab.node_v4.into(), SESSION);
    node.wait_established(lab.router_v4.into(), SESSION);
    router.wait_bfd_status(lab.node_v4.into(), "up", SESSION);
    node.wait_bfd_status(lab.router_v4.into(), "up", SESSION);
    let peer = router
        .bfd_peers()
        .into_iter()
        .find(|p| p["peer"] == lab.node_v4.to_string())
        .expect("router has a BFD session with the node");
    assert_eq!(peer["detect-multiplier"], 3, "{peer}");
    assert_eq!(peer["receive-interval"], 100, "{peer}");

    let start = Instant::now();
    lab.node_link.blackhole();
    router.wait_bfd_status(lab.node_v4.into(), "down", Duration::from_secs(5));
    let bfd_down = start.elapsed();
    // BFD takes BGP down long before the 9 s hold timer would.
    let state = router.wait_state_not(lab.node_v4.into(), "Established", Duration::from_secs(6));
    let bgp_down = start.elapsed();
    eprintln!("black hole: BFD down after {bfd_down:?}, BGP {state} after {bgp_down:?}");
    assert!(
        bgp_down < Duration::from_secs(6),
        "BGP left Established only after {bgp_down:?}"
    );

    lab.node_link.restore();
    router.wait_bfd_status(lab.node_v4.into(), "up", SESSION);
    router.wait_established(lab.node_v4.into(), SESSION);
}

#[test]
fn frr_session_leaves_established_when_the_link_goes_down() {
    let lab = Lab::pair();
    let fast =
        |asn: u32, peer: IpAddr| format!("router bgp {asn}\n neighbor {peer} timers 1 3\nexit\n");
    let router_conf = format!(
        "{}{}",
        bgpd_conf(ROUTER_AS, lab.router_v4, &[(lab.node_v4.into(), NODE_AS)]),
        fast(ROUTER_AS, lab.node_v4.into())
    );
    let node_conf = format!(
        "{}{}",
        bgpd_conf(NODE_AS, lab.node_v4, &[(lab.router_v4.into(), ROUTER_AS)]),
        fast(NODE_AS, lab.router_v4.into())
    );
    let router = Frr::start(&lab.router, &router_conf);
    let node = Frr::start(&lab.node, &node_conf);
    router.wait_established(lab.node_v4.into(), SESSION);
    node.wait_established(lab.router_v4.into(), SESSION);
    assert_eq!(
        router.neighbor(lab.node_v4.into())["bgpTimerHoldTimeMsecs"],
        3000
    );

    let start = Instant::now();
    lab.node_link.set_down();
    // bgpd without zebra sees no interface event: the 3 s hold timer fires.
    let state = router.wait_state_not(lab.node_v4.into(), "Established", Duration::from_secs(15));
    eprintln!(
        "link down: router left Established ({state}) after {:?}",
        start.elapsed()
    );

    lab.node_link.set_up();
    router.wait_established(lab.node_v4.into(), SESSION);
}

#[test]
fn frr_peers_two_hops_away_with_multihop_and_gtsm() {
    let lab = Lab::routed_pair();
    let extra = |asn: u32, peer: IpAddr| {
        format!("router bgp {asn}\n neighbor {peer} ttl-security hops 2\nexit\n")
    };
    let router = Frr::start(
        &lab.router,
        &format!(
            "{}{}",
            frr_router(&lab, &[lab.node_v4.into()]),
            extra(ROUTER_AS, lab.node_v4.into())
        ),
    );
    let node = Frr::start(
        &lab.node,
        &format!(
            "{}{}",
            bgpd_conf(NODE_AS, lab.node_v4, &[(lab.router_v4.into(), ROUTER_AS)]),
            extra(NODE_AS, lab.router_v4.into())
        ),
    );
    router.wait_established(lab.node_v4.into(), SESSION);
    node.wait_established(lab.router_v4.into(), SESSION);
    let route = node.wait_prefix("203.0.113.0/24", ROUTE);
    assert_eq!(route["paths"][0]["aspath"]["string"], "65000", "{route}");
}

#[test]
fn exabgp_sends_a_message_type_that_was_never_negotiated() {
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_router(&lab, &[lab.node_v4.into()]));
    // `capability { operational enable; }` makes ExaBGP send OPERATIONAL
    // (type 6) messages on request whether or not the peer advertised the
    // capability: a well-formed header with a type the peer does not know.
    let exabgp = ExaBgp::start(
        &lab.node,
        &[lab.node_v4.into()],
        &format!(
            "neighbor {router} {{
    router-id {node};
    local-address {node};
    local-as {NODE_AS};
    peer-as {ROUTER_AS};
    family {{ ipv4 unicast; }}
    capability {{ operational enable; }}
{API_BLOCK}
}}
",
            router = lab.router_v4,
            node = lab.node_v4
        ),
    );
    frr.wait_established(lab.node_v4.into(), SESSION);
    exabgp.wait_up(lab.router_v4.into(), SESSION);

    exabgp
        // Not `adm`/`asm`: ExaBGP 4.2.21 on Python 3 fails on their advisory
        // text ("'bytes' object has no attribute 'encode'") and never
        // acknowledges the command.
        .command("announce operational rpcq afi ipv4 safi unicast sequence 1")
        .expect("ExaBGP accepts the OPERATIONAL command");
    // RFC 4271 §6.1: an unknown message type is a Message Header Error,
    // subcode 3 (Bad Message Type).
    let notification = exabgp.wait_received(ROUTE, "a NOTIFICATION from FRR", |m| {
        m["type"] == "notification"
    });
    let notification = &notification["neighbor"]["notification"];
    assert_eq!(notification["code"], 1, "{notification}");
    assert_eq!(notification["subcode"], 3, "{notification}");
    let types: Vec<u8> = exabgp
        .sent()
        .iter()
        .filter_map(raw_message)
        .filter_map(|bytes| bytes.get(18).copied())
        .collect();
    assert!(types.contains(&6), "sent message types {types:?}");
}

#[test]
fn frr_without_zebra_learns_ipv6_routes_from_gobgp_and_sends_to_exabgp() {
    // GoBGP and ExaBGP send a global next hop only, so bgpd -Z accepts
    // their IPv6 routes (unlike BIRD's global + link-local pair).
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_router(&lab, &[lab.node_v6.into()]));
    let gobgp = Gobgp::start(
        &lab.node,
        &format!(
            r#"[global.config]
  as = {NODE_AS}
  router-id = "{node_id}"
[[neighbors]]
  [neighbors.config]
    neighbor-address = "{router}"
    peer-as = {ROUTER_AS}
  [neighbors.timers.config]
    connect-retry = 2
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
"#,
            node_id = lab.node_v4,
            router = lab.router_v6
        ),
    );
    gobgp.wait_established(lab.router_v6.into(), SESSION);
    gobgp.add_route("2001:db8:100::20/128", &[]);
    let route = frr.wait_prefix("2001:db8:100::20/128", ROUTE);
    assert_eq!(
        route["paths"][0]["nexthops"][0]["ip"],
        lab.node_v6.to_string(),
        "{route}"
    );
    gobgp.wait_route("2001:db8:203::/48", ROUTE);
    drop(gobgp);

    let exabgp = ExaBgp::start(
        &lab.node,
        &[lab.node_v6.into()],
        &format!(
            "neighbor {router} {{
    router-id {node_id};
    local-address {node};
    local-as {NODE_AS};
    peer-as {ROUTER_AS};
    family {{ ipv6 unicast; }}
{API_BLOCK}
}}
",
            router = lab.router_v6,
            node = lab.node_v6,
            node_id = lab.node_v4
        ),
    );
    exabgp.wait_up(lab.router_v6.into(), SESSION);
    exabgp.wait_announced("2001:db8:203::/48", ROUTE);
    exabgp.announce("2001:db8:100::30/128 next-hop self");
    frr.wait_prefix("2001:db8:100::30/128", ROUTE);
}

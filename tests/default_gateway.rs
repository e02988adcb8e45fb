//! `address = "default-gateway"`: the node peers with its default gateway
//! and follows it when it changes; an IPv6 gateway is usually link-local.

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use testlab::{Frr, Lab, Netns, veth, wait_until};

/// A node whose default route goes via the router (192.0.2.1), and FRR
/// there peering with the node, with `extra` neighbour lines.
fn lab_with_gateway(extra: &str) -> (Lab, Frr) {
    let lab = Lab::pair();
    lab.node
        .ip(&["route", "add", "default", "via", "192.0.2.1"]);
    let frr = Tor::new().lines(extra).on(&lab);
    (lab, frr)
}

/// The node peering with its default gateway (`family`), and `more` to
/// the peer.
fn conf(family: &str, more: impl FnOnce(Peer) -> Peer) -> Config {
    Config::node(65001, "192.0.2.2").peer(more(
        Peer::new("gw", "default-gateway", 65000).family(family),
    ))
}

/// Points the node's default route at `via`.
fn move_gateway(lab: &Lab, via: &str) {
    lab.node.ip(&["route", "replace", "default", "via", via]);
}

#[test]
fn peers_with_the_default_gateway_and_follows_it() {
    testlab::require_root();
    let (lab, frr) = lab_with_gateway("");
    let conf = conf("ipv4", |p| p.hold_time("9s").connect_retry("1s"));
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&["198.51.100.10"]));
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let peer = |node: &Holdfast| node.status()["peers"][0].clone();
    assert_eq!(peer(&node)["address"], "192.0.2.1");
    assert_eq!(peer(&node)["configured_address"], "default-gateway (IPv4)");
    // The gateway moves: the session follows it (to an address nobody
    // answers on), and FRR loses the session.
    move_gateway(&lab, "192.0.2.3");
    wait_until(
        Duration::from_secs(15),
        "the peer to follow the gateway",
        || (peer(&node)["address"] == "192.0.2.3").then_some(()),
    );
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(15));
    // And back.
    move_gateway(&lab, "192.0.2.1");
    frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(peer(&node)["state"], "Established");
}

/// An IPv6-only link (no IPv4 address on it), where the default gateway is
/// the router's link-local address, as routers advertise themselves (RFC
/// 4861 §6.1.2): FRR with zebra sends router advertisements, the node's
/// kernel installs the default route via fe80::1 from them, and holdfast
/// peers with fe80::1 on that interface (the scope of the link-local
/// address). FRR gets our IPv6 VIP with the next hop of RFC 2545 §3: the
/// node's global address, then its link-local one.
#[test]
fn peers_with_a_link_local_ipv6_default_gateway() {
    testlab::require_root();
    let router = Netns::new("router");
    let node = Netns::new("node");
    // Link-local addresses of our choosing rather than from the MAC
    // address, so that FRR's config can name ours; and no address of the
    // node's made up from the advertised prefix, so that its global address
    // is the one below.
    for ns in [&router, &node] {
        ns.sysctl("net.ipv6.conf.default.addr_gen_mode", "1");
    }
    node.sysctl("net.ipv6.conf.default.autoconf", "0");
    let _link = veth(&node, "to-router", &router, "to-node");
    router.add_address("to-node", "fe80::1/64");
    router.add_address("to-node", "2001:db8::1/64");
    node.add_address("to-router", "fe80::2/64");
    node.add_address("to-router", "2001:db8::2/64");
    let v4 = node.run(&["ip", "-4", "addr", "show", "dev", "to-router"]);
    assert!(v4.trim().is_empty(), "IPv4 on the link: {v4}");

    let frr = Frr::start_with_zebra(
        &router,
        &frr_conf(
            65000,
            "192.0.2.1",
            &[("fe80::2", 65001)],
            " neighbor fe80::2 interface to-node\n",
        ),
    );
    frr.configure(&[
        "interface to-node",
        "ipv6 nd ra-interval 1",
        "no ipv6 nd suppress-ra",
    ]);
    let route = wait_until(LONG, "a default route from FRR's advertisements", || {
        let r = node.run(&["ip", "-6", "route", "show", "default"]);
        r.contains("via fe80::1 dev to-router").then_some(r)
    });
    assert!(route.contains("proto ra"), "{route}");

    let conf = conf("ipv6", |p| {
        p.families(&["ipv6-unicast"])
            .hold_time("9s")
            .connect_retry("1s")
    });
    let holdfast = Holdfast::start(&node, &conf.to_toml(), &vips(&["2001:db8:100::10"]));
    let neighbor: IpAddr = "fe80::2".parse().unwrap();
    frr.wait_established(neighbor, LONG);
    let peer = holdfast.status()["peers"][0].clone();
    assert_eq!(peer["address"], "fe80::1%to-router", "{peer}");
    assert_eq!(peer["state"], "Established", "{peer}");

    let route = frr.wait_prefix("2001:db8:100::10/128", LONG);
    let path = &route["paths"][0];
    assert_eq!(path["valid"], true, "{route}");
    let hops = path["nexthops"].as_array().expect("next hops");
    let hop = |scope: &str| {
        hops.iter()
            .find(|h| h["scope"] == scope)
            .unwrap_or_else(|| panic!("no {scope} next hop: {route}"))["ip"]
            .clone()
    };
    assert_eq!(hop("global"), "2001:db8::2", "{route}");
    assert_eq!(hop("link-local"), "fe80::2", "{route}");
    assert_eq!(hops.len(), 2, "{route}");
}

/// A passive peer addressed by `default-gateway`, with a `password_file`:
/// the router connects, signing its segments with the key (RFC 2385), so
/// the kernel drops its SYNs unless the listening socket holds the key for
/// the address the gateway resolves to. When the gateway moves, the key
/// moves with it: the old router's signed SYNs are dropped by the kernel
/// (`TCPMD5Unexpected`), never accepted; when it comes back, so does the
/// key, and the session.
#[test]
fn a_passive_default_gateway_peer_with_a_password_file_is_keyed_on_the_listener() {
    testlab::require_root();
    let (lab, frr) = lab_with_gateway(" neighbor 192.0.2.2 password s3cret-key\n");
    let dir = testlab::LabDir::new("key");
    let key = dir.write("tor.key", "s3cret-key\n");
    let conf = conf("ipv4", |p| {
        p.passive()
            .md5(key.as_path())
            .hold_time("9s")
            .connect_retry("1s")
    })
    .listen("0.0.0.0:179");
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&["198.51.100.10"]));
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    // FRR connected to our listener, signed.
    assert_eq!(frr.neighbor(neighbor)["portForeign"], 179);
    let peer = |node: &Holdfast| node.status()["peers"][0].clone();
    assert_eq!(peer(&node)["address"], "192.0.2.1");

    // The gateway moves: the key for 192.0.2.1 goes.
    move_gateway(&lab, "192.0.2.3");
    wait_until(LONG, "the peer to follow the gateway", || {
        (peer(&node)["address"] == "192.0.2.3").then_some(())
    });
    frr.wait_no_prefix("198.51.100.10/32", LONG);
    let unexpected = tcp_ext(&lab.node, "TCPMD5Unexpected");
    wait_until(LONG, "FRR's signed SYNs dropped for want of a key", || {
        (tcp_ext(&lab.node, "TCPMD5Unexpected") > unexpected).then_some(())
    });
    assert!(
        !node.log().contains("not a configured peer"),
        "a signed connection from the old gateway was accepted:\n{}",
        node.log()
    );
    // And back: keyed again, FRR connects again.
    move_gateway(&lab, "192.0.2.1");
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(peer(&node)["state"], "Established");
}

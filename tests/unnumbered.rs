//! BGP unnumbered: `[[peer]] interface = "to-router"`. The link carries no
//! IPv4 address, only IPv6 link-locals; holdfast finds the router from its
//! router advertisements (RFC 4861 §4.2), peers with its link-local address
//! on that interface, negotiates the extended next hop encoding and sends
//! IPv4 VIPs with an IPv6 next hop (RFC 8950), which the router installs
//! `via inet6 fe80::…`.

mod common;
#[allow(dead_code)] // shared with tests/deploy_manifests.rs
mod deploy;
#[allow(dead_code)]
mod image;

use common::*;
use testlab::{Frr, Netns, veth, wait_until};

/// The node peering with whoever advertises itself on `to-router`.
fn node_conf() -> String {
    node_conf_with(|p| p).to_toml()
}

/// [`node_conf`] with more to the peer.
fn node_conf_with(more: impl FnOnce(Peer) -> Peer) -> Config {
    Config::node(65001, "192.0.2.2").peer(more(
        Peer::on_interface("tor", "to-router", 65000)
            .hold_time("9s")
            .connect_retry("1s"),
    ))
}

/// FRR's side of an unnumbered link: `neighbor IF interface remote-as
/// external`, which makes bgpd advertise on the interface (through zebra)
/// and learn its peer from the advertisements it receives.
fn frr_unnumbered(router_id: &str) -> String {
    format!(
        "frr defaults datacenter\nrouter bgp 65000\n bgp router-id {router_id}\n no bgp ebgp-requires-policy\n\
         no bgp network import-check\n neighbor to-node interface remote-as external\n\
         neighbor to-node timers connect 1\n neighbor to-node timers 3 9\n\
         address-family ipv4 unicast\n  neighbor to-node activate\n exit-address-family\n\
         address-family ipv6 unicast\n  neighbor to-node activate\n exit-address-family\nexit\n"
    )
}

/// `frr_unnumbered("192.0.2.1")` with `more` (" neighbor to-node …"
/// lines) after the neighbour's connect timer.
fn frr_unnumbered_with(more: &str) -> String {
    let timers = "neighbor to-node timers connect 1\n";
    let conf = frr_unnumbered("192.0.2.1").replace(timers, &format!("{timers}{more}"));
    assert!(conf.contains(more), "{conf}");
    conf
}

/// `conf` with a listener on every IPv6 address, for a passive peer.
fn listening(conf: Config) -> String {
    conf.listen("[::]:179").to_toml()
}

/// Router and node joined by a veth with link-local addresses only.
fn link() -> (Netns, Netns, testlab::Link) {
    let router = Netns::new("router");
    let node = Netns::new("node");
    let link = veth(&node, "to-router", &router, "to-node");
    for ns in [&node, &router] {
        let v4 = ns.run(&["ip", "-4", "addr", "show", "scope", "global"]);
        assert!(v4.trim().is_empty(), "IPv4 address in a namespace: {v4}");
    }
    (router, node, link)
}

fn link_local(ns: &Netns, ifname: &str) -> String {
    wait_until(LONG, "a link-local address", || {
        let out = ns.run(&[
            "ip", "-6", "-o", "addr", "show", "dev", ifname, "scope", "link",
        ]);
        let addr = out
            .split_whitespace()
            .skip_while(|w| *w != "inet6")
            .nth(1)?;
        // Not while duplicate address detection still runs.
        (!out.contains("tentative")).then(|| addr.split('/').next().unwrap().to_string())
    })
}

/// The FRR neighbour (by interface) once Established.
fn wait_frr_established(frr: &Frr) -> serde_json::Value {
    wait_frr_established_or(frr, String::new)
}

/// The same, with `more` (sockets, logs) in the failure's message.
fn wait_frr_established_or(frr: &Frr, more: impl Fn() -> String) -> serde_json::Value {
    testlab::wait_for(LONG, "FRR's unnumbered session Established", || {
        let n = frr.json("show bgp neighbors to-node json");
        if n["to-node"]["bgpState"] == "Established" {
            Ok(n["to-node"].clone())
        } else {
            Err(format!("{n}\n{}", more()))
        }
    })
}

/// Both ends' TCP sockets and holdfast's log, for a failure's message.
fn sockets_and_log(node: &Netns, router: &Netns, holdfast: &Holdfast<'_>) -> String {
    format!(
        "node: {}\nrouter: {}\nholdfast: {}",
        node.run(&["ss", "-tnoia"]),
        router.run(&["ss", "-tnoia"]),
        holdfast.log()
    )
}

/// The VIP valid at FRR and the peer Established at holdfast.
fn assert_vip_at_frr(frr: &Frr, holdfast: &Holdfast<'_>) {
    let route = frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(route["paths"][0]["valid"], true, "{route}");
    let peer = holdfast.status()["peers"][0].clone();
    assert_eq!(peer["state"], "Established", "{peer}");
}

#[test]
fn frr_peers_over_link_local_and_installs_ipv4_via_ipv6() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let (router, node, _link) = link();
    let frr = Frr::start_forwarding(&router, &frr_unnumbered("192.0.2.1"));
    let holdfast = Holdfast::start(
        &node,
        &node_conf(),
        &vips(&["198.51.100.10", "2001:db8:100::10"]),
    );
    let ours = link_local(&node, "to-router");
    let theirs = link_local(&router, "to-node");

    let n = wait_frr_established(&frr);
    // RFC 8950 §4: both sides advertised, and the session uses, the
    // extended next hop encoding for IPv4 unicast.
    let enh = &n["neighborCapabilities"]["extendedNexthop"];
    assert_eq!(enh, "advertisedAndReceived", "{n}");
    let peer = holdfast.status()["peers"][0].clone();
    assert_eq!(peer["address"], format!("{theirs}%to-router"), "{peer}");
    assert_eq!(peer["state"], "Established", "{peer}");

    // The IPv4 VIP arrives with our link-local address as its next hop…
    let route = frr.wait_prefix("198.51.100.10/32", LONG);
    let path = &route["paths"][0];
    assert_eq!(path["valid"], true, "{route}");
    let hops = path["nexthops"].as_array().expect("next hops");
    assert!(
        hops.iter().all(|h| h["afi"] == "ipv6") && hops.iter().any(|h| h["ip"] == ours),
        "IPv4 route without our IPv6 next hop {ours}: {route}"
    );
    // …and zebra installs it in the kernel via IPv6.
    let kernel = testlab::wait_for(LONG, "the kernel route of the IPv4 VIP", || {
        let r = router.run(&["ip", "-4", "route", "show", "198.51.100.10"]);
        if r.contains("via inet6") {
            Ok(r)
        } else {
            Err(format!(
                "kernel: {r:?}; zebra: {}",
                frr.vtysh("show ip route 198.51.100.10/32")
            ))
        }
    });
    assert!(
        kernel.contains(&format!("via inet6 {ours} dev to-node")),
        "{kernel}"
    );
    // The IPv6 VIP as usual, over the same session: next hop our
    // link-local address (there is no global one on the node).
    let route6 = frr.wait_prefix("2001:db8:100::10/128", LONG);
    assert_eq!(route6["paths"][0]["valid"], true, "{route6}");
    let hops6 = route6["paths"][0]["nexthops"]
        .as_array()
        .expect("next hops");
    assert!(hops6.iter().any(|h| h["ip"] == ours), "{route6}");
}

/// The top-of-rack router is replaced: FRR stops, and another comes up on
/// the same link with a different link-local address (another MAC). The
/// node follows the new router's advertisements and peers with it.
#[test]
fn a_replaced_router_is_followed() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let (router, node, _link) = link();
    let frr = Frr::start_forwarding(&router, &frr_unnumbered("192.0.2.1"));
    let holdfast = Holdfast::start(&node, &node_conf(), &vips(&["198.51.100.10"]));
    let first = link_local(&router, "to-node");
    wait_frr_established(&frr);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let address = |h: &Holdfast| h.status()["peers"][0]["address"].clone();
    assert_eq!(address(&holdfast), format!("{first}%to-router"));
    drop(frr);

    // The new switch: another MAC, so another EUI-64 link-local address.
    router.ip(&["link", "set", "to-node", "down"]);
    router.ip(&["link", "set", "to-node", "address", "02:00:00:00:00:99"]);
    router.ip(&["link", "set", "to-node", "up"]);
    let second = wait_until(LONG, "the new router's link-local address", || {
        let a = link_local(&router, "to-node");
        (a != first).then_some(a)
    });
    assert_eq!(second, "fe80::ff:fe00:99");
    let frr = Frr::start_forwarding(&router, &frr_unnumbered("192.0.2.9"));
    wait_until(LONG, "holdfast to follow the new router", || {
        (address(&holdfast) == format!("{second}%to-router")).then_some(())
    });
    wait_frr_established(&frr);
    let route = frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(route["paths"][0]["valid"], true, "{route}");
    let log = holdfast.log();
    assert!(
        log.contains(&format!(
            "router of the link interface=to-router router={second}"
        )),
        "{log}"
    );
}

/// BIRD 2 on the router's side: it needs the node's link-local address
/// (`neighbor fe80::…`) and `extended next hop on` in its IPv4 channel; it
/// advertises itself with its radv protocol, which is how holdfast finds it.
#[test]
fn bird_peers_over_link_local_with_extended_next_hop() {
    testlab::require_root();
    testlab::require_tools(&["bird", "birdc"]);
    let (router, node, _link) = link();
    let holdfast = Holdfast::start(
        &node,
        &node_conf(),
        &vips(&["198.51.100.10", "2001:db8:100::10"]),
    );
    let ours = link_local(&node, "to-router");
    let theirs = link_local(&router, "to-node");
    let conf = format!(
        "router id 192.0.2.1;\nprotocol device {{}}\n\
         protocol radv {{ interface \"to-node\" {{ max ra interval 4; }}; }}\n\
         protocol bgp tor {{\n  local as 65000;\n  interface \"to-node\";\n  neighbor {ours} as 65001;\n\
           hold time 9;\n  connect retry time 1;\n\
           ipv4 {{ import all; export none; extended next hop on; }};\n\
           ipv6 {{ import all; export none; }};\n}}\n"
    );
    let bird = testlab::Bird::start(&router, &conf);
    bird.wait_established("tor", LONG);
    let peer = holdfast.status()["peers"][0].clone();
    assert_eq!(peer["address"], format!("{theirs}%to-router"), "{peer}");
    let info = bird.birdc("show protocols all tor");
    // RFC 8950 §4: holdfast's OPEN carries the capability for IPv4.
    let theirs_caps = info
        .split("Neighbor capabilities")
        .nth(1)
        .unwrap_or_else(|| panic!("{info}"));
    assert!(
        theirs_caps.contains("Extended next hop\n        IPv6 nexthop: ipv4"),
        "{info}"
    );
    let route = wait_until(LONG, "BIRD's IPv4 route via IPv6", || {
        let r = bird.birdc("show route 198.51.100.10/32 all");
        r.contains("198.51.100.10/32").then_some(r)
    });
    assert!(
        route.contains(&format!("via {ours} on to-node")),
        "IPv4 route not via our link-local {ours}: {route}"
    );
    let route6 = wait_until(LONG, "BIRD's IPv6 route", || {
        let r = bird.birdc("show route 2001:db8:100::10/128 all");
        r.contains("2001:db8:100::10/128").then_some(r)
    });
    assert!(
        route6.contains(&format!("via {ours} on to-node")),
        "{route6}"
    );
}

/// GTSM on both sides of an unnumbered link (RFC 5082 §3): FRR's
/// `ttl-security hops 1` and holdfast's `ttl_security = true` each send
/// with hop limit 255 and accept only 255 on the link-local session.
#[test]
fn gtsm_on_both_sides_of_an_unnumbered_link() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let (router, node, _link) = link();
    let conf = frr_unnumbered_with(" neighbor to-node ttl-security hops 1\n");
    let frr = Frr::start_forwarding(&router, &conf);
    let node_conf = node_conf_with(|p| p.ttl_security()).to_toml();
    let holdfast = Holdfast::start(&node, &node_conf, &vips(&["198.51.100.10"]));
    let n = wait_frr_established_or(&frr, || {
        format!(
            "node: {}\nrouter: {}",
            node.run(&["ss", "-tnoi"]),
            router.run(&["ss", "-tnoi"])
        )
    });
    // FRR runs the session with GTSM for a neighbour one hop away.
    assert_eq!(n["externalBgpNbrMaxHopsAway"], 1, "{n}");
    assert_vip_at_frr(&frr, &holdfast);
}

/// The same with FRR connecting: holdfast only listens (`passive`), so the
/// router's SYN is checked against the peer's minimum through the saved
/// SYN's IPv6 header, and our SYN-ACK and OPEN leave with hop limit 255.
#[test]
fn gtsm_on_an_unnumbered_link_with_the_router_connecting() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let (router, node, _link) = link();
    let conf = frr_unnumbered_with(" neighbor to-node ttl-security hops 1\n");
    let frr = Frr::start_forwarding(&router, &conf);
    let node_conf = listening(node_conf_with(|p| p.ttl_security().passive()));
    let holdfast = Holdfast::start(&node, &node_conf, &vips(&["198.51.100.10"]));
    let n = wait_frr_established_or(&frr, || sockets_and_log(&node, &router, &holdfast));
    assert_eq!(n["externalBgpNbrMaxHopsAway"], 1, "{n}");
    // The router connected: its side of the session is not port 179.
    assert_ne!(n["portLocal"], 179, "{n}");
    assert_vip_at_frr(&frr, &holdfast);
}

/// Single-hop BFD (RFC 5881) on an unnumbered peer: between the two
/// link-local addresses, on the interface. BFD comes up at both ends, and a
/// link that stops delivering (carrier still up) takes BGP down within the
/// BFD detection time, far below the 9 s hold time.
#[test]
fn bfd_over_the_link_local_addresses() {
    testlab::require_root();
    testlab::require_tools(&[
        "/usr/lib/frr/bgpd",
        "/usr/lib/frr/zebra",
        "/usr/lib/frr/bfdd",
    ]);
    let (router, node, link) = link();
    // Another interface whose fe80::/64 route comes first: a link-local
    // address means nothing without its interface (RFC 4007 §6), and BFD
    // must not go by the routing table.
    let elsewhere = Netns::new("other");
    let _decoy = veth(&node, "decoy", &elsewhere, "decoy");
    node.ip(&[
        "-6",
        "route",
        "add",
        "fe80::/64",
        "dev",
        "decoy",
        "metric",
        "1",
    ]);
    let conf = frr_unnumbered_with(" neighbor to-node bfd\n neighbor to-node bfd profile fast\n");
    let frr = Frr::start_with_bfd(&router, &conf, testlab::frr::BFD_FAST_PROFILE);
    let node_conf = node_conf_with(|p| p.bfd(Bfd::new("100ms", "100ms", 3))).to_toml();
    let holdfast = Holdfast::start(&node, &node_conf, &vips(&["198.51.100.10"]));
    let ours = link_local(&node, "to-router");
    wait_frr_established(&frr);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let bfd = |h: &Holdfast| h.status()["peers"][0]["bfd"].clone();
    wait_until(LONG, "BFD Up at holdfast", || {
        (bfd(&holdfast)["state"] == "Up").then_some(())
    });
    let peers = testlab::wait_for(LONG, "BFD up at FRR", || {
        let peers = frr.bfd_peers();
        if peers
            .iter()
            .any(|p| p["peer"] == ours.as_str() && p["status"] == "up")
        {
            Ok(peers)
        } else {
            Err(format!("{peers:?}"))
        }
    });
    // RFC 5881: single hop, on the interface.
    let p = peers.iter().find(|p| p["peer"] == ours.as_str()).unwrap();
    assert_eq!(p["multihop"], false, "{p}");
    assert_eq!(p["interface"], "to-node", "{p}");
    // Once both have moved from the slow start (1 s, RFC 5880 §6.8.3) to
    // the configured 3 × 100 ms.
    testlab::wait_for(LONG, "a detection time of 300 ms", || {
        let b = bfd(&holdfast);
        if b["detection_time_ms"] == 300 {
            Ok(())
        } else {
            Err(format!("{b}; FRR: {:?}", frr.bfd_peers()))
        }
    });

    link.blackhole();
    let cut = std::time::Instant::now();
    wait_until(
        std::time::Duration::from_secs(8),
        "holdfast to leave Established",
        || (holdfast.peer_state("tor") != "Established").then_some(()),
    );
    let down = cut.elapsed();
    assert!(
        down < std::time::Duration::from_secs(2),
        "BGP went down {down:?} after the cut"
    );
    let status = holdfast.status();
    assert_eq!(status["peers"][0]["bfd"]["state"], "Down", "{status}");
    assert_eq!(
        status["peers"][0]["bfd"]["last_diagnostic"],
        "Control Detection Time Expired"
    );

    link.restore();
    wait_until(LONG, "BFD Up again", || {
        (bfd(&holdfast)["state"] == "Up").then_some(())
    });
    wait_frr_established(&frr);
}

/// The capability sets of process `pid` (`/proc/PID/status`), as numbers,
/// and its `Uid:` line.
fn capabilities(pid: u32) -> (u64, u64, u64, String) {
    use testlab::process::{cap_set, proc_status};
    (
        cap_set(pid, "CapEff"),
        cap_set(pid, "CapPrm"),
        cap_set(pid, "CapBnd"),
        format!("Uid: {}", proc_status(pid, "Uid")),
    )
}

use testlab::process::CAP_NET_RAW;

/// As deploy/overlays/unnumbered runs it: UID and GID 65532, no capability
/// but NET_RAW in the bounding set (`capabilities: {drop: [ALL], add:
/// [NET_RAW]}`), privilege escalation allowed (no no_new_privs), and the
/// image's binary carrying `cap_net_raw+p` (permitted, not effective). The
/// unnumbered peering comes up all the same: only the router-advertisement
/// thread raises NET_RAW, to open its socket. Then the base DaemonSet's
/// settings (no_new_privs, every capability dropped): the daemon runs and
/// says what the unnumbered peer needs.
#[test]
fn unprivileged_with_only_the_capability_the_overlay_grants() {
    testlab::require_root();
    testlab::require_tools(&[
        "/usr/lib/frr/bgpd",
        "/usr/lib/frr/zebra",
        "setcap",
        "setpriv",
    ]);
    let (router, node, _link) = link();
    let frr = Frr::start_forwarding(&router, &frr_unnumbered("192.0.2.1"));
    // The image's binary (Dockerfile): NET_RAW permitted by the file, not
    // effective.
    let (_bin_dir, bin) = testlab::process::with_file_caps(BIN, "cap_net_raw+p");
    let user = [
        "setpriv",
        "--reuid=65532",
        "--regid=65532",
        "--clear-groups",
        "--inh-caps=-all",
    ];
    let overlay: Vec<&str> = user
        .iter()
        .copied()
        .chain(["--bounding-set=-all,+net_raw", "--"])
        .collect();
    let holdfast = Holdfast::start_wrapped(
        &node,
        &node_conf(),
        &vips(&["198.51.100.10"]),
        &overlay,
        &bin,
        (65532, 65532),
    );
    let pid = holdfast.pid();
    let (effective, permitted, bounding, uid) = capabilities(pid);
    assert!(uid.contains("65532"), "not running as 65532: {uid}");
    assert_eq!(bounding, CAP_NET_RAW, "bounding set {bounding:x}");
    assert_eq!(permitted, CAP_NET_RAW, "permitted set {permitted:x}");
    assert_eq!(effective, 0, "the main thread holds {effective:x}");
    wait_frr_established_or(&frr, || holdfast.log());
    assert_vip_at_frr(&frr, &holdfast);
    drop(holdfast);

    // The base DaemonSet: no_new_privs (allowPrivilegeEscalation: false)
    // and no capability at all. The file capability grants nothing; the
    // daemon runs, and the peer says what it needs.
    let base: Vec<&str> = user
        .iter()
        .copied()
        .chain(["--bounding-set=-all", "--no-new-privs", "--"])
        .collect();
    let holdfast = Holdfast::start_wrapped(
        &node,
        &node_conf(),
        &vips(&["198.51.100.10"]),
        &base,
        &bin,
        (65532, 65532),
    );
    let pid = holdfast.pid();
    assert_eq!(capabilities(pid).1, 0, "permitted under no_new_privs");
    let why = testlab::wait_for(LONG, "the peer to say what it needs", || {
        let peer = holdfast.status()["peers"][0].clone();
        let e = peer["last_error"].as_str().unwrap_or_default().to_string();
        if e.contains("CAP_NET_RAW") {
            Ok(peer)
        } else {
            Err(format!("{peer}"))
        }
    });
    assert_ne!(why["state"], "Established", "{why}");
}

/// The release image, run as the `unnumbered` rack (with
/// `deploy/components/unnumbered`) runs it (the DaemonSet rendered by kubectl: UID 65532, NET_RAW the only
/// capability in the bounding set, privilege escalation allowed, read-only
/// root, seccomp): the unnumbered session comes up from the image's file
/// capability alone, and the main thread holds no capability.
#[test]
fn the_image_peers_unnumbered_as_the_unnumbered_component_runs_it() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let image = image::Image::load("amd64");
    let ds = image::daemon_set("deploy/overlays/unnumbered");
    let (router, node, _link) = link();
    let frr = Frr::start_forwarding(&router, &frr_unnumbered("192.0.2.1"));
    let holdfast = image::start(
        &node,
        &image,
        &ds,
        &node_conf(),
        &vips(&["198.51.100.10"]),
        &[("NODE_NAME", "node-1"), ("NODE_IP", "192.0.2.2")],
    );
    wait_frr_established_or(&frr, || holdfast.log());
    assert_vip_at_frr(&frr, &holdfast);
    let pid = holdfast.container.as_ref().expect("a container").pid();
    assert_eq!(image::cap_set(pid, "CapBnd"), CAP_NET_RAW, "bounding set");
    assert_eq!(
        image::cap_set(pid, "CapEff"),
        0,
        "the main thread's effective set"
    );
    assert_eq!(image::proc_status(pid, "NoNewPrivs"), "0");
    assert!(
        image::proc_status(pid, "Uid")
            .split_whitespace()
            .all(|u| u == "65532")
    );
}

/// A passive unnumbered peer with a `password_file`: the router connects
/// from its link-local address, signing with the key (RFC 2385); the
/// listening socket holds the key for the address holdfast learnt from the
/// router's advertisements, or the kernel would drop every SYN.
#[test]
fn a_passive_unnumbered_peer_with_a_password_file_accepts_the_signed_connection() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "/usr/lib/frr/zebra"]);
    let (router, node, _link) = link();
    let conf = frr_unnumbered_with(" neighbor to-node password s3cret-key\n");
    let frr = Frr::start_forwarding(&router, &conf);
    let key = testlab::LabDir::new("key");
    let key_file = key.write("tor.key", "s3cret-key\n");
    let node_conf = listening(node_conf_with(|p| p.passive().md5(key_file.as_path())));
    let holdfast = Holdfast::start(&node, &node_conf, &vips(&["198.51.100.10"]));
    let n = wait_frr_established_or(&frr, || sockets_and_log(&node, &router, &holdfast));
    // The router connected: its side of the session is not port 179.
    assert_ne!(n["portLocal"], 179, "{n}");
    assert_vip_at_frr(&frr, &holdfast);
    assert!(
        holdfast.log().contains("listening socket: MD5 key set"),
        "{}",
        holdfast.log()
    );
}

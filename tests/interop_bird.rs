//! holdfast against BIRD 2, in network namespaces: sessions over IPv4 and
//! IPv6 transport with 4-octet ASNs, both VIP families with their
//! communities, iBGP local-pref, and route refresh — each checked through
//! `birdc`.

mod common;

use common::peers::*;
use common::*;
use testlab::{Bird, Lab};

/// BIRD as the ToR with one BGP protocol per holdfast session.
/// `protocols`: (name, neighbor address, holdfast's AS). Both channels
/// import everything and export nothing: holdfast only originates.
/// `extra` goes into every protocol (e.g. `direct;` for iBGP).
fn bird_conf(lab: &Lab, local_asn: u32, protocols: &[(&str, String, u32)], extra: &str) -> String {
    let mut c = format!("router id {};\nprotocol device {{}}\n", lab.router_v4);
    for (name, neighbor, asn) in protocols {
        c.push_str(&format!(
            "protocol bgp {name} {{
  local as {local_asn};
  neighbor {neighbor} as {asn};
  hold time 9;
  connect delay time 1;
  connect retry time 2;
  error wait time 1, 5;
  debug {{ states, events, packets }};
  {extra}
  ipv4 {{ import all; export none; }};
  ipv6 {{ import all; export none; }};
}}
"
        ));
    }
    c
}

/// The lines of one path in `show route PREFIX all` output: from the line
/// naming protocol `proto` up to the next path.
fn path_of<'a>(route: &'a str, proto: &str) -> Vec<&'a str> {
    let mut lines = route
        .lines()
        .skip_while(|l| !l.contains(&format!("[{proto} ")));
    let Some(first) = lines.next() else {
        return Vec::new();
    };
    let mut path = vec![first];
    // Attribute lines are indented by a tab; the next path starts with
    // spaces and the "unicast [" of its protocol.
    path.extend(lines.take_while(|l| l.starts_with('\t')));
    path
}

/// Waits until BIRD has a path for `prefix` from each of `protocols`.
fn wait_paths(bird: &Bird, prefix: &str, protocols: &[&str]) -> String {
    testlab::wait_for(
        LONG,
        &format!("BIRD to have {prefix} from {protocols:?}"),
        || {
            let route = bird.route(prefix).unwrap_or_default();
            if protocols.iter().all(|p| !path_of(&route, p).is_empty()) {
                Ok(route)
            } else {
                Err(route)
            }
        },
    )
}

fn attr<'a>(path: &[&'a str], name: &str) -> Option<&'a str> {
    path.iter()
        .find_map(|l| l.trim().strip_prefix(&format!("{name}:")))
        .map(str::trim)
}

#[test]
fn ebgp_over_ipv4_and_ipv6_transport_with_4_octet_asns() {
    testlab::require_root();
    let lab = Lab::pair();
    let bird = Bird::start(
        &lab.router,
        &bird_conf(
            &lab,
            ROUTER_ASN,
            &[
                ("node_v4", lab.node_v4.to_string(), NODE_ASN),
                ("node_v6", lab.node_v6.to_string(), NODE_ASN),
            ],
            "",
        ),
    );
    let node = Holdfast::start(
        &lab.node,
        &dual_transport_conf(&lab, NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    bird.wait_established("node_v4", LONG);
    bird.wait_established("node_v6", LONG);
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let route = wait_paths(&bird, prefix, &["node_v4", "node_v6"]);
        for proto in ["node_v4", "node_v6"] {
            let path = path_of(&route, proto);
            assert_eq!(
                attr(&path, "BGP.as_path"),
                Some("4200000002"),
                "{proto}: {route}"
            );
            assert_eq!(
                attr(&path, "BGP.community"),
                Some("(65001,100)"),
                "{proto}: {route}"
            );
            assert_eq!(
                attr(&path, "BGP.large_community"),
                Some("(4200000002, 1, 100)"),
                "{proto}: {route}"
            );
            // BIRD gives every eBGP route its default local preference;
            // ExaBGP's capture shows that holdfast sends no LOCAL_PREF.
            assert_eq!(attr(&path, "BGP.local_pref"), Some("100"), "{route}");
        }
    }
    // BIRD negotiated 4-octet AS with us and sees our real AS.
    for proto in ["node_v4", "node_v6"] {
        let info = bird.birdc(&format!("show protocols all {proto}"));
        assert!(info.contains("Neighbor AS:      4200000002"), "{info}");
        assert!(info.contains("4-octet AS numbers"), "{info}");
    }
    for name in ["tor-v4", "tor-v6"] {
        let peer = node.wait_peer_established(name, LONG);
        assert_eq!(peer["asn"], ROUTER_ASN, "{peer}");
    }

    // Each session came up once.
    for name in ["tor-v4", "tor-v6"] {
        let peer = node.peer_status(name);
        assert_eq!(peer["established_transitions"], 1, "{peer}");
    }
}

#[test]
fn ibgp_carries_local_pref_and_route_refresh_gets_the_full_table() {
    testlab::require_root();
    let lab = Lab::pair();
    // BIRD takes an iBGP neighbor to be multihop, with next hops resolved
    // recursively through an IGP table we do not have; `direct` says the
    // node is on the link, and its next hops are used as they are.
    let bird = Bird::start(
        &lab.router,
        &bird_conf(
            &lab,
            ROUTER_ASN,
            &[("node_v4", lab.node_v4.to_string(), ROUTER_ASN)],
            "direct;",
        ),
    );
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), ROUTER_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    bird.wait_established("node_v4", LONG);
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let route = wait_paths(&bird, prefix, &["node_v4"]);
        let path = path_of(&route, "node_v4");
        assert!(
            route.contains("Type: BGP univ") && path[0].contains("[i]"),
            "{route}"
        );
        assert_eq!(attr(&path, "BGP.local_pref"), Some("200"), "{route}");
        assert_eq!(attr(&path, "BGP.as_path"), Some(""), "{route}");
        assert_eq!(attr(&path, "BGP.community"), Some("(65001,100)"), "{route}");
        assert_eq!(
            attr(&path, "BGP.large_community"),
            Some("(4200000002, 1, 100)"),
            "{route}"
        );
    }
    node.wait_peer_established("tor", LONG);

    // The session negotiated enhanced route refresh (RFC 7313) both ways.
    let info = bird.birdc("show protocols all node_v4");
    assert_eq!(info.matches("Enhanced refresh").count(), 2, "{info}");
    let before = [
        import_updates_received(&info, "ipv4"),
        import_updates_received(&info, "ipv6"),
    ];
    assert_eq!(before, [1, 1], "one UPDATE per family so far: {info}");

    // `reload in` sends ROUTE-REFRESH for each channel. With enhanced route
    // refresh, BIRD marks the routes of the family stale at BoRR and
    // flushes those not re-sent by EoRR: the routes survive only if
    // holdfast answered with its whole table between the two.
    bird.birdc("reload in node_v4");
    let log = testlab::wait_for(LONG, "BIRD to see two BoRR…EoRR rounds", || {
        let log = bird.log();
        if log.matches("Got END-OF-RR").count() == 2 {
            Ok(log)
        } else {
            Err(log)
        }
    });
    assert_eq!(log.matches("Got BEGIN-OF-RR").count(), 2, "{log}");
    let info = bird.birdc("show protocols all node_v4");
    assert_eq!(
        [
            import_updates_received(&info, "ipv4"),
            import_updates_received(&info, "ipv6"),
        ],
        [2, 2],
        "each family's route sent again: {info}"
    );
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let route = bird.route(prefix).unwrap_or_default();
        assert_eq!(
            attr(&path_of(&route, "node_v4"), "BGP.local_pref"),
            Some("200"),
            "{prefix} after the refresh: {route}"
        );
    }
    for family in ["ipv4-unicast", "ipv6-unicast"] {
        node.wait_log_line(
            &[
                "answering ROUTE-REFRESH",
                &format!("family={family}"),
                "enhanced=true",
            ],
            LONG,
        );
    }
    let peer = node.peer_status("tor");
    assert_eq!(peer["established_transitions"], 1, "{peer}");
}

/// The "received" column of "Import updates" of one channel in
/// `show protocols all` output.
fn import_updates_received(info: &str, channel: &str) -> u64 {
    channel_stat(info, channel, "Import updates", 0)
}

/// Graceful restart (RFC 4724) with BIRD as the helper: holdfast is
/// killed outright; BIRD keeps its routes as stale; holdfast starts again
/// with the R bit, sends its whole table, then End-of-RIB, and BIRD never
/// withdraws the routes: End-of-RIB after the table only clears the
/// stale marks.
#[test]
fn graceful_restart_keeps_the_routes_through_a_kill_and_restart() {
    testlab::require_root();
    let lab = Lab::pair();
    // BIRD's default `graceful restart aware` makes it a helper.
    let bird = Bird::start(
        &lab.router,
        &bird_conf(
            &lab,
            ROUTER_ASN,
            &[("node_v4", lab.node_v4.to_string(), NODE_ASN)],
            "",
        ),
    );
    let mut node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    bird.wait_established("node_v4", LONG);
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        wait_paths(&bird, prefix, &["node_v4"]);
    }

    node.kill(testlab::Signal::Kill);
    node.wait_exit();
    testlab::wait_for(LONG, "BIRD to keep the routes as stale", || {
        let info = bird.birdc("show protocols all node_v4");
        if info.contains("Neighbor graceful restart active") {
            Ok(())
        } else {
            Err(info)
        }
    });
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        assert!(
            bird.route(prefix).is_some(),
            "{prefix} kept while holdfast is down"
        );
    }

    node.run(&[]);
    bird.wait_established("node_v4", LONG);
    testlab::wait_for(LONG, "BIRD to finish the graceful restart", || {
        let log = bird.log();
        if log.contains("node_v4: Neighbor graceful restart done") {
            Ok(())
        } else {
            Err(log)
        }
    });
    let info = bird.birdc("show protocols all node_v4");
    // The restarted holdfast set the R bit (RFC 4724 §3).
    assert!(info.contains("Restart recovery"), "{info}");
    testlab::wait_for(LONG, "both routes sent again", || {
        let info = bird.birdc("show protocols all node_v4");
        let received = ["ipv4", "ipv6"].map(|c| channel_stat(&info, c, "Import updates", 0));
        if received == [2, 2] {
            Ok(())
        } else {
            Err(info)
        }
    });
    let info = bird.birdc("show protocols all node_v4");
    for channel in ["ipv4", "ipv6"] {
        // BIRD flushes at End-of-RIB the stale routes that were not sent
        // again, and counts each as an accepted import withdraw.
        assert_eq!(
            channel_stat(&info, channel, "Import withdraws", 4),
            0,
            "{channel}: a route was withdrawn during the restart:\n{info}\n{}",
            bird.log()
        );
    }
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        wait_paths(&bird, prefix, &["node_v4"]);
    }
}

/// Column `column` (0 received, 1 rejected, 2 filtered, 3 ignored, 4
/// accepted) of row `row` ("Import updates", "Import withdraws", …) of
/// one channel's "Route change stats" in `show protocols all` output.
fn channel_stat(info: &str, channel: &str, row: &str, column: usize) -> u64 {
    info.lines()
        .skip_while(|l| l.trim() != format!("Channel {channel}"))
        .find_map(|l| l.trim().strip_prefix(&format!("{row}:")))
        .and_then(|rest| rest.split_whitespace().nth(column))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {row} column {column} for channel {channel} in:\n{info}"))
}

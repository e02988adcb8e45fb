//! holdfast against ExaBGP, in network namespaces. ExaBGP reports every
//! message it receives as parsed JSON with the raw bytes, so these tests
//! see exactly what holdfast put on the wire; and ExaBGP can put malformed
//! path attributes on the wire, so they also see how holdfast handles
//! them (RFC 7606).

mod common;

use std::net::IpAddr;

use common::peers::*;
use common::*;
use serde_json::{Value, json};
use testlab::exabgp::{API_BLOCK, raw_message};
use testlab::{ExaBgp, Lab};

/// ExaBGP as the ToR: one passive neighbor per address in `neighbors`,
/// with IPv4 and IPv6 unicast, route refresh and graceful restart, and
/// the testlab API process recording every message.
fn exabgp_conf(lab: &Lab, local_asn: u32, neighbors: &[(IpAddr, IpAddr)], peer_asn: u32) -> String {
    neighbors
        .iter()
        .map(|(neighbor, local)| {
            format!(
                "neighbor {neighbor} {{
    router-id {router_id};
    local-address {local};
    local-as {local_asn};
    peer-as {peer_asn};
    hold-time 9;
    passive true;
    family {{ ipv4 unicast; ipv6 unicast; }}
    capability {{ route-refresh enable; graceful-restart 120; }}
{API_BLOCK}
}}
",
                router_id = lab.router_v4
            )
        })
        .collect()
}

fn start_exabgp(
    lab: &Lab,
    local_asn: u32,
    neighbors: &[(IpAddr, IpAddr)],
    peer_asn: u32,
) -> ExaBgp {
    let bind: Vec<IpAddr> = neighbors.iter().map(|(_, local)| *local).collect();
    ExaBgp::start(
        &lab.router,
        &bind,
        &exabgp_conf(lab, local_asn, neighbors, peer_asn),
    )
}

#[test]
fn ebgp_over_ipv4_and_ipv6_transport_with_4_octet_asns() {
    testlab::require_root();
    let lab = Lab::pair();
    let exabgp = start_exabgp(
        &lab,
        ROUTER_ASN,
        &[
            (lab.node_v4.into(), lab.router_v4.into()),
            (lab.node_v6.into(), lab.router_v6.into()),
        ],
        NODE_ASN,
    );
    let node = Holdfast::start(
        &lab.node,
        &dual_transport_conf(&lab, NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    exabgp.wait_up(lab.node_v4.into(), LONG);
    exabgp.wait_up(lab.node_v6.into(), LONG);
    exabgp.wait_announced(VIP4_PREFIX, LONG);
    exabgp.wait_announced(VIP6_PREFIX, LONG);
    for (peer, name) in [
        (IpAddr::from(lab.node_v4), "tor-v4"),
        (lab.node_v6.into(), "tor-v6"),
    ] {
        let from = wait_end_of_rib(&exabgp, peer, &["ipv4", "ipv6"]);
        // The OPEN: AS_TRANS in the 2-octet field, the real AS in the
        // 4-octet AS capability (RFC 6793), and the capabilities holdfast
        // promises.
        let open = from
            .iter()
            .find(|m| m["type"] == "open")
            .unwrap_or_else(|| panic!("no OPEN from {peer}: {from:?}"));
        let o = &open["neighbor"]["open"];
        assert_eq!(o["asn"], 23456, "{open}");
        assert_eq!(o["hold_time"], 9, "{open}");
        assert_eq!(o["router_id"], lab.node_v4.to_string(), "{open}");
        let caps = &o["capabilities"];
        assert_eq!(caps["65"]["asn4"], NODE_ASN, "{open}");
        assert_eq!(
            caps["1"]["families"],
            json!(["ipv4/unicast", "ipv6/unicast"]),
            "{open}"
        );
        assert_eq!(caps["2"]["name"], "route-refresh", "{open}");
        assert_eq!(caps["70"]["name"], "enhanced-route-refresh", "{open}");
        assert_eq!(caps["64"]["time"], 120, "{open}");
        assert_eq!(caps["6"]["name"], "extended-message", "{open}");
        // FQDN (RFC draft, code 73) is unknown to ExaBGP 4.2: length-
        // prefixed host name "node-1", empty domain name.
        assert_eq!(caps["73"]["raw"], "066E6F64652D3100", "{open}");

        let v4 = announcement(&from, VIP4_PREFIX);
        check_attributes(&v4, &[NODE_ASN], None);
        assert_eq!(
            v4["message"]["update"]["announce"]["ipv4 unicast"][lab.node_v4.to_string()],
            json!([{"nlri": VIP4_PREFIX}]),
            "IPv4 next hop: {v4}"
        );
        let v6 = announcement(&from, VIP6_PREFIX);
        check_attributes(&v6, &[NODE_ASN], None);
        // RFC 2545 §3: global and link-local next hop on a shared link;
        // ExaBGP lists the NLRI under each.
        let next_hops = v6["message"]["update"]["announce"]["ipv6 unicast"]
            .as_object()
            .map(|o| o.keys().cloned().collect::<Vec<_>>())
            .unwrap_or_default();
        assert_eq!(next_hops.len(), 2, "{v6}");
        assert_eq!(next_hops[0], lab.node_v6.to_string(), "{v6}");
        assert!(next_hops[1].starts_with("fe80::"), "{v6}");

        let peer_status = node.wait_peer_established(name, LONG);
        assert_eq!(peer_status["established_transitions"], 1, "{peer_status}");
        // ExaBGP sends OPEN and KEEPALIVE back to back; each state change
        // is still logged.
        for (from, to) in [("OpenSent", "OpenConfirm"), ("OpenConfirm", "Established")] {
            node.wait_log_line(
                &[
                    "state change",
                    &format!("peer={name}"),
                    &format!("from={from} to={to}"),
                ],
                LONG,
            );
        }
    }
}

/// The messages ExaBGP received from `peer`, in order.
fn received_from(exabgp: &ExaBgp, peer: IpAddr) -> Vec<Value> {
    let peer = peer.to_string();
    exabgp
        .received()
        .into_iter()
        .filter(|m| m["neighbor"]["address"]["peer"].as_str() == Some(peer.as_str()))
        .collect()
}

/// Waits until ExaBGP has received End-of-RIB from `peer` for each AFI
/// in `afis` (`ipv4`, `ipv6`); returns what it received from `peer`.
fn wait_end_of_rib(exabgp: &ExaBgp, peer: IpAddr, afis: &[&str]) -> Vec<Value> {
    testlab::wait_for(
        LONG,
        &format!("ExaBGP to receive End-of-RIB {afis:?} from {peer}"),
        || {
            let from = received_from(exabgp, peer);
            let eors: Vec<&str> = from
                .iter()
                .filter_map(|m| m["neighbor"]["message"]["eor"]["afi"].as_str())
                .collect();
            if afis.iter().all(|a| eors.contains(a)) {
                Ok(from)
            } else {
                Err(format!("End-of-RIB so far: {eors:?}"))
            }
        },
    )
}

/// The `neighbor` object of the last UPDATE in `messages` that announces
/// `prefix`.
fn announcement(messages: &[Value], prefix: &str) -> Value {
    messages
        .iter()
        .rev()
        .find(|m| announcement_of(m, prefix))
        .map(|m| m["neighbor"].clone())
        .unwrap_or_else(|| panic!("no announcement of {prefix} in {messages:?}"))
}

/// The path attributes of an announcement as ExaBGP parsed them: AS_PATH,
/// COMMUNITIES, LARGE_COMMUNITY, and LOCAL_PREF (`None`: absent).
fn check_attributes(neighbor: &Value, as_path: &[u32], local_pref: Option<u32>) {
    let a = &neighbor["message"]["update"]["attribute"];
    assert_eq!(a["origin"], "igp", "{neighbor}");
    // ExaBGP leaves an empty AS_PATH (iBGP) out of its JSON.
    let parsed_path = a.get("as-path").cloned().unwrap_or(json!([]));
    assert_eq!(parsed_path, json!(as_path), "{neighbor}");
    assert_eq!(a["community"], json!([[65001, 100]]), "{neighbor}");
    assert_eq!(
        a["large-community"],
        json!([[NODE_ASN, 1, 100]]),
        "{neighbor}"
    );
    assert_eq!(
        a.get("local-preference"),
        local_pref.map(|p| json!(p)).as_ref(),
        "{neighbor}"
    );
    assert_eq!(a.get("med"), None, "{neighbor}");
}

#[test]
fn ibgp_carries_local_pref_and_route_refresh_gets_the_full_table() {
    testlab::require_root();
    let lab = Lab::pair();
    let exabgp = start_exabgp(
        &lab,
        ROUTER_ASN,
        &[(lab.node_v4.into(), lab.router_v4.into())],
        ROUTER_ASN,
    );
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), ROUTER_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    let peer = IpAddr::from(lab.node_v4);
    let from = wait_end_of_rib(&exabgp, peer, &["ipv4", "ipv6"]);
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        check_attributes(&announcement(&from, prefix), &[], Some(LOCAL_PREF));
    }
    // The empty AS_PATH is there (well-known mandatory, RFC 4271 §5.1.2),
    // and LOCAL_PREF 200.
    let update = from.iter().rev().find(|m| announcement_of(m, VIP4_PREFIX));
    let raw = update
        .and_then(raw_message)
        .expect("the UPDATE's raw bytes");
    assert!(contains(&raw, &[0x40, 0x02, 0x00]), "{raw:02x?}");
    assert!(
        contains(&raw, &[0x40, 0x05, 0x04, 0, 0, 0, 200]),
        "{raw:02x?}"
    );

    // Both sides advertised enhanced route refresh (RFC 7313): holdfast
    // answers a ROUTE-REFRESH with BoRR, its whole table of the family,
    // and EoRR — nothing of the other family.
    let before = from.len();
    exabgp
        .command("announce route-refresh ipv4 unicast")
        .expect("ExaBGP sends ROUTE-REFRESH");
    let answer = testlab::wait_for(LONG, "holdfast's answer to ROUTE-REFRESH", || {
        let after: Vec<Value> = received_from(&exabgp, peer).split_off(before);
        if after
            .iter()
            .any(|m| m["neighbor"]["route-refresh"]["subtype"] == "end")
        {
            Ok(after)
        } else {
            Err(format!("{after:?}"))
        }
    });
    let summary: Vec<String> = answer
        .iter()
        .filter(|m| m["type"] != "keepalive")
        .map(|m| match m["type"].as_str() {
            Some("refresh") => format!(
                "refresh {} {}",
                m["neighbor"]["route-refresh"]["subtype"]
                    .as_str()
                    .unwrap_or("?"),
                m["neighbor"]["route-refresh"]["afi"]
                    .as_str()
                    .unwrap_or("?")
            ),
            Some("update") => format!("update {}", m["neighbor"]["message"]["update"]["announce"]),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        summary,
        [
            "refresh begin ipv4".to_owned(),
            format!(
                "update {}",
                json!({"ipv4 unicast": {lab.node_v4.to_string(): [{"nlri": VIP4_PREFIX}]}})
            ),
            "refresh end ipv4".to_owned(),
        ],
        "{answer:?}"
    );
    let update = answer.iter().find(|m| m["type"] == "update").unwrap();
    check_attributes(&update["neighbor"], &[], Some(LOCAL_PREF));
    node.wait_log_line(
        &[
            "answering ROUTE-REFRESH",
            "family=ipv4-unicast",
            "enhanced=true",
        ],
        LONG,
    );
    let status = node.peer_status("tor");
    assert_eq!(status["established_transitions"], 1, "{status}");
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// True when `message` is an UPDATE announcing `prefix`.
fn announcement_of(message: &Value, prefix: &str) -> bool {
    message["type"] == "update"
        && message["neighbor"]["message"]["update"]["announce"]
            .to_string()
            .contains(&format!("\"{prefix}\""))
}

/// RFC 4271 §4.2: the session's Hold Time is the smaller of the two
/// proposals; §4.4 and §10: KEEPALIVEs go at most a third of it apart.
/// holdfast proposes 9 s with a 3 s keepalive; ExaBGP proposes 3 s, so
/// holdfast must send a KEEPALIVE at least every second or ExaBGP's hold
/// timer expires.
#[test]
fn the_smaller_hold_time_wins_and_keepalives_follow_it() {
    testlab::require_root();
    let lab = Lab::pair();
    let peer = IpAddr::from(lab.node_v4);
    let conf = exabgp_conf(&lab, ROUTER_ASN, &[(peer, lab.router_v4.into())], NODE_ASN)
        .replace("hold-time 9;", "hold-time 3;");
    let exabgp = ExaBgp::start(&lab.router, &[lab.router_v4.into()], &conf);
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4]),
    );
    exabgp.wait_up(peer, LONG);
    let status = node.wait_peer_established("tor", LONG);
    assert_eq!(status["hold_time"], 3, "{status}");
    assert_eq!(status["keepalive_seconds"], 1.0, "{status}");
    // Six KEEPALIVEs after the one that answered the OPEN: over two hold
    // times, each well inside one.
    let times = testlab::wait_for(LONG, "7 KEEPALIVEs from holdfast", || {
        let times: Vec<f64> = received_from(&exabgp, peer)
            .iter()
            .filter(|m| m["type"] == "keepalive")
            .filter_map(|m| m["time"].as_f64())
            .collect();
        if times.len() >= 7 {
            Ok(times)
        } else {
            Err(format!("{times:?}"))
        }
    });
    // The times are when ExaBGP read each message, so a busy machine
    // adds noise; a 3 s keepalive would space them 2.25–3 s apart.
    let gaps: Vec<f64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    assert!(
        mean <= 1.2,
        "KEEPALIVEs {mean:.2}s apart on average: {times:?}"
    );
    assert!(
        gaps.iter().all(|g| *g < 2.0),
        "a KEEPALIVE gap of 2 s or more: {gaps:?}"
    );
    let status = node.peer_status("tor");
    assert_eq!(status["established_transitions"], 1, "{status}");
    assert_eq!(status["notifications_received"], json!([]), "{status}");
    assert_eq!(exabgp.neighbor_state(peer).as_deref(), Some("up"));
    assert!(exabgp.received_of_type("notification").is_empty());
}

/// ExaBGP announcing to holdfast over one eBGP session (IPv4 transport);
/// holdfast advertises nothing. Returns once both sides are up.
struct Receiver<'a> {
    exabgp: ExaBgp,
    node: Holdfast<'a>,
    peer: IpAddr,
}

fn receiver(lab: &Lab) -> Receiver<'_> {
    let exabgp = start_exabgp(
        lab,
        ROUTER_ASN,
        &[(lab.node_v4.into(), lab.router_v4.into())],
        NODE_ASN,
    );
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(lab, &lab.router_v4.to_string(), NODE_ASN, ROUTER_ASN),
        &vips(&[]),
    );
    let peer = IpAddr::from(lab.node_v4);
    exabgp.wait_up(peer, LONG);
    node.wait_peer_established("tor", LONG);
    Receiver { exabgp, node, peer }
}

impl Receiver<'_> {
    /// ExaBGP announces `prefix` with one raw path attribute; waits until
    /// holdfast has processed that UPDATE and logged its RFC 7606 verdict,
    /// and returns that log line.
    fn malformed(&self, prefix: &str, code: u8, flags: u8, value: &[u8], error: &str) -> String {
        let before = updates_received(&self.node.peer_status("tor"));
        self.exabgp
            .announce_raw_attribute(prefix, "self", code, flags, value);
        let line = self
            .node
            .wait_log_line(&["malformed UPDATE from the peer (RFC 7606)", error], LONG);
        let status = self.node.peer_status("tor");
        assert!(updates_received(&status) > before, "{status}");
        line
    }

    /// The session carried on: a well-formed UPDATE sent after the
    /// malformed ones is received on the same session, holdfast never
    /// left Established and sent no NOTIFICATION, and ExaBGP received
    /// none.
    fn assert_session_survived(&self) {
        let before = updates_received(&self.node.peer_status("tor"));
        self.exabgp
            .announce("198.51.100.99/32 next-hop self community [65001:7]");
        let status = self.node.wait_peer_status(
            "tor",
            LONG,
            "holdfast to receive the well-formed UPDATE",
            |p| updates_received(p) > before,
        );
        assert_eq!(status["state"], "Established", "{status}");
        assert_eq!(status["established_transitions"], 1, "{status}");
        assert_eq!(status["notifications_sent"], json!([]), "{status}");
        assert_eq!(status["notifications_received"], json!([]), "{status}");
        assert_eq!(
            self.exabgp.received_of_type("notification"),
            Vec::<Value>::new()
        );
        assert_eq!(self.exabgp.neighbor_state(self.peer).as_deref(), Some("up"));
        let log = self.node.log();
        assert!(
            !log.contains("NOTIFICATION") && !log.contains("session down"),
            "{log}"
        );
    }

    /// Waits for the NOTIFICATION ExaBGP receives; returns (code,
    /// subcode, data) as decoded from the raw message.
    fn wait_notification(&self) -> (u8, u8, Vec<u8>) {
        let m = self
            .exabgp
            .wait_received(LONG, "a NOTIFICATION from holdfast", |m| {
                m["type"] == "notification"
            });
        let raw = raw_message(&m).unwrap_or_else(|| panic!("no raw bytes in {m}"));
        // Marker, length, type 3, then code, subcode, data (RFC 4271 §4.5).
        assert_eq!(raw.get(18), Some(&3), "{m}");
        let n = &m["neighbor"]["notification"];
        assert_eq!(
            n["code"].as_u64(),
            raw.get(19).map(|&c| u64::from(c)),
            "{m}"
        );
        assert_eq!(
            n["subcode"].as_u64(),
            raw.get(20).map(|&c| u64::from(c)),
            "{m}"
        );
        (raw[19], raw[20], raw[21..].to_vec())
    }

    /// After a reset: ExaBGP forgets the malformed route (it would send it
    /// again on the next session), and holdfast's automatic restart
    /// brings the session back.
    fn assert_session_recovers(&self, prefix: &str) {
        self.exabgp.withdraw(&format!("{prefix} next-hop self"));
        let status = self
            .node
            .wait_peer_status("tor", LONG, "holdfast to establish again", |p| {
                p["state"] == "Established" && p["established_transitions"].as_u64() >= Some(2)
            });
        assert!(status["last_error"].is_null(), "{status}");
        self.exabgp.wait_up(self.peer, LONG);
    }
}

#[test]
fn malformed_optional_attributes_are_treat_as_withdraw_without_a_reset() {
    testlab::require_root();
    let lab = Lab::pair();
    let r = receiver(&lab);
    // RFC 8092 §6: a LARGE_COMMUNITY whose length is not a non-zero
    // multiple of 12 is malformed: treat-as-withdraw. 5 octets here.
    let line = r.malformed(
        "198.51.100.40/32",
        32,
        0xc0,
        &[1, 2, 3, 4, 5],
        "Attribute Length Error (attribute type 32)",
    );
    assert!(line.contains("action=treat-as-withdraw"), "{line}");
    // RFC 7606 §3 (a): COMMUNITIES (optional transitive) arriving with the
    // flags of a well-known attribute (0x40): treat-as-withdraw.
    let line = r.malformed(
        "198.51.100.41/32",
        8,
        0x40,
        &[0xfd, 0xe9, 0x00, 0x64],
        "Attribute Flags Error (attribute type 8)",
    );
    assert!(line.contains("action=treat-as-withdraw"), "{line}");
    // RFC 9234 §5: an OTC attribute that is not 4 octets: treat-as-withdraw.
    let line = r.malformed(
        "198.51.100.42/32",
        35,
        0xc0,
        &[0, 0, 1],
        "Attribute Length Error (attribute type 35)",
    );
    assert!(line.contains("action=treat-as-withdraw"), "{line}");
    r.assert_session_survived();
}

/// Under RFC 4271 alone a bad mandatory attribute meant a NOTIFICATION
/// and a session reset. RFC 7606 §7.1 and §7.2 replace that for ORIGIN
/// and AS_PATH: the error concerns these routes only, so the routes are
/// treated as withdrawn and every other route of the session stays
/// (RFC 7606 §1: a reset takes down all routes for the fault of one).
#[test]
fn malformed_origin_and_as_path_are_treat_as_withdraw_too() {
    testlab::require_root();
    let lab = Lab::pair();
    let r = receiver(&lab);
    // ORIGIN 5: only 0 (IGP), 1 (EGP) and 2 (INCOMPLETE) are defined.
    let line = r.malformed(
        "198.51.100.43/32",
        1,
        0x40,
        &[5],
        "Invalid ORIGIN Attribute (attribute type 1)",
    );
    assert!(line.contains("action=treat-as-withdraw"), "{line}");
    // An AS_SEQUENCE segment claiming 5 ASes with 2 octets behind it.
    let line = r.malformed(
        "198.51.100.44/32",
        2,
        0x40,
        &[2, 5, 0, 0],
        "Malformed AS_PATH",
    );
    assert!(line.contains("action=treat-as-withdraw"), "{line}");
    r.assert_session_survived();
}

/// RFC 4271 §6.3: "If any of the well-known mandatory attributes are not
/// recognized, then the Error Subcode MUST be set to Unrecognized
/// Well-known Attribute. The Data field MUST contain the unrecognized
/// attribute (type, length, and value)." RFC 7606 leaves this a session
/// reset: an attribute every speaker must understand, and we don't.
#[test]
fn unrecognized_well_known_attribute_resets_the_session_with_3_2() {
    testlab::require_root();
    let lab = Lab::pair();
    let r = receiver(&lab);
    let prefix = "198.51.100.45/32";
    // Type 0xf0, flags 0x40: well-known (Optional bit clear), unassigned.
    r.exabgp
        .announce_raw_attribute(prefix, "self", 0xf0, 0x40, &[0xab, 0xcd]);
    let (code, subcode, data) = r.wait_notification();
    assert_eq!(
        (code, subcode),
        (3, 2),
        "UPDATE Message Error / Unrecognized Well-known Attribute"
    );
    assert_eq!(
        data,
        [0x40, 0xf0, 0x02, 0xab, 0xcd],
        "the attribute, flags to value"
    );
    r.node.wait_log_line(
        &["sent NOTIFICATION: UPDATE Message Error / Unrecognized Well-known Attribute (data 40f002abcd)", "peer=tor"],
        LONG,
    );
    let status = r.node.wait_peer_status(
        "tor",
        LONG,
        "the NOTIFICATION in holdfast's counters",
        |p| {
            p["notifications_sent"]
                .as_array()
                .is_some_and(|n| !n.is_empty())
        },
    );
    let sent = &status["notifications_sent"][0];
    assert_eq!(
        (sent["code"].as_u64(), sent["subcode"].as_u64()),
        (Some(3), Some(2)),
        "{status}"
    );
    assert_eq!(
        sent["name"], "UPDATE Message Error / Unrecognized Well-known Attribute",
        "{status}"
    );
    r.assert_session_recovers(prefix);
}

/// MP_REACH_NLRI is optional non-transitive; here it comes with the flags
/// of a well-known attribute and a value too short to hold an AFI/SAFI.
/// RFC 7606 §3 (a) would treat the routes as withdrawn, but the routes
/// are inside the attribute that cannot be read, and without a family
/// "AFI/SAFI disable" (§7.11) cannot be applied either: only a session
/// reset remains, with Attribute Flags Error and the attribute as data
/// (RFC 4271 §6.3).
#[test]
fn mp_reach_with_bad_flags_and_no_family_resets_the_session_with_3_4() {
    testlab::require_root();
    let lab = Lab::pair();
    let r = receiver(&lab);
    let prefix = "198.51.100.46/32";
    r.exabgp
        .announce_raw_attribute(prefix, "self", 14, 0x40, &[0, 1]);
    let (code, subcode, data) = r.wait_notification();
    assert_eq!(
        (code, subcode),
        (3, 4),
        "UPDATE Message Error / Attribute Flags Error"
    );
    assert_eq!(
        data,
        [0x40, 0x0e, 0x02, 0x00, 0x01],
        "the attribute, flags to value"
    );
    r.node.wait_log_line(
        &["sent NOTIFICATION: UPDATE Message Error / Attribute Flags Error (data 400e020001)"],
        LONG,
    );
    r.assert_session_recovers(prefix);
}

/// SIGTERM with graceful restart (the default): the session closes
/// without a NOTIFICATION and without withdrawing anything, so the peer
/// can keep the routes as stale (RFC 4724 §4.2); the next start sets the
/// R bit. SIGTERM with `--withdraw-on-exit`: every route is withdrawn,
/// then Cease/Administrative Shutdown with an RFC 9003 message naming the
/// node.
#[test]
fn sigterm_closes_gracefully_and_withdraw_on_exit_withdraws_then_ceases() {
    testlab::require_root();
    let lab = Lab::pair();
    let peer = IpAddr::from(lab.node_v4);
    // ExaBGP 4.2.21 cannot decode a Cease with a shutdown communication on
    // Python 3 (a TypeError in notification.py; it answers NOTIFICATION
    // 1/0): its packet log is where the bytes can be seen.
    let exabgp = ExaBgp::start_with_env(
        &lab.router,
        &[lab.router_v4.into()],
        &exabgp_conf(&lab, ROUTER_ASN, &[(peer, lab.router_v4.into())], NODE_ASN),
        &[
            ("exabgp.log.level", "DEBUG"),
            ("exabgp.log.packets", "true"),
        ],
    );
    let mut node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), NODE_ASN, ROUTER_ASN),
        &vips(&[VIP4, VIP6]),
    );
    wait_end_of_rib(&exabgp, peer, &["ipv4", "ipv6"]);
    let first_open = received_from(&exabgp, peer)
        .into_iter()
        .find(|m| m["type"] == "open")
        .expect("holdfast's OPEN");
    assert_eq!(gr_restart_state(&first_open), Some(false), "{first_open}");

    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success());
    testlab::wait_for(LONG, "ExaBGP to see the session closed", || {
        match exabgp.neighbor_state(peer).as_deref() {
            Some("down") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
    assert_eq!(exabgp.withdrawn_prefixes(), Vec::<String>::new());
    assert!(exabgp.received_of_type("notification").is_empty());
    assert!(!exabgp.log().contains("<< message of type NOTIFICATION"));

    let before = received_from(&exabgp, peer).len();
    node.run(&["--withdraw-on-exit"]);
    let from = testlab::wait_for(LONG, "the second session's End-of-RIB", || {
        let after = received_from(&exabgp, peer).split_off(before);
        let eors = after
            .iter()
            .filter(|m| !m["neighbor"]["message"]["eor"].is_null())
            .count();
        if eors == 2 {
            Ok(after)
        } else {
            Err(format!("{after:?}"))
        }
    });
    let open = from
        .iter()
        .find(|m| m["type"] == "open")
        .expect("the second OPEN");
    // RFC 4724 §3: "Restart State (R)" — this process restarted.
    assert_eq!(gr_restart_state(open), Some(true), "{open}");

    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success());
    let mut withdrawn = exabgp.withdrawn_prefixes();
    withdrawn.sort();
    assert_eq!(withdrawn, [VIP4_PREFIX, VIP6_PREFIX]);
    // NOTIFICATION 6/2, data: length 30, "node-1: holdfast shutting down".
    let message = "node-1: holdfast shutting down";
    let mut body = vec![6, 2, message.len() as u8];
    body.extend_from_slice(message.as_bytes());
    let payload = exabgp_payload(&body);
    let log = testlab::wait_for(LONG, "ExaBGP to receive the Cease", || {
        let log = exabgp.log();
        if log.contains(&payload) {
            Ok(log)
        } else {
            Err(payload.clone())
        }
    });
    let cease = log
        .find(&payload)
        .expect("the wait above found the Cease in this log");
    let withdraw = log.find("0005 20C6 3364 0A").unwrap_or(usize::MAX);
    assert!(
        withdraw < cease,
        "withdrawals before the NOTIFICATION:\n{log}"
    );
    node.wait_log_line(
        &["sent NOTIFICATION: Cease / Administrative Shutdown: \"node-1: holdfast shutting down\""],
        LONG,
    );
}

/// The R bit of the graceful restart capability in an OPEN ExaBGP
/// received, read from the raw bytes (ExaBGP 4.2 names the R bit
/// "forwarding" in its JSON). `None` without the capability.
fn gr_restart_state(open: &Value) -> Option<bool> {
    let raw = raw_message(open)?;
    // Header 19, version 1, AS 2, hold time 2, BGP Identifier 4, Opt Parm
    // Len 1; then parameters: type 2 (capabilities), length, capabilities.
    let mut params = raw.get(29..)?;
    while let [kind, len, rest @ ..] = params {
        let (value, next) = rest.split_at_checked(usize::from(*len))?;
        let mut caps = if *kind == 2 { value } else { &[][..] };
        while let [code, cap_len, cap_rest @ ..] = caps {
            let (cap, more) = cap_rest.split_at_checked(usize::from(*cap_len))?;
            if *code == 64 {
                return cap.first().map(|flags| flags & 0x80 != 0);
            }
            caps = more;
        }
        params = next;
    }
    None
}

/// How ExaBGP's packet log (`exabgp.log.packets`) prints received bytes:
/// upper-case hex in groups of two octets.
fn exabgp_payload(bytes: &[u8]) -> String {
    bytes
        .chunks(2)
        .map(|c| c.iter().map(|b| format!("{b:02X}")).collect::<String>())
        .collect::<Vec<_>>()
        .join(" ")
}

/// A router without 4-octet AS support (RFC 6793 §4.2): holdfast in AS
/// 4200000002 is AS_TRANS (23456) to it — in the OPEN's My Autonomous
/// System and in AS_PATH — and the real path travels in AS4_PATH, which
/// ExaBGP merges back into the 4-octet path.
#[test]
fn a_2_octet_peer_gets_as_trans_and_as4_path() {
    testlab::require_root();
    let lab = Lab::pair();
    let peer = IpAddr::from(lab.node_v4);
    // ExaBGP in AS 65000 expects AS_TRANS from us.
    let conf = exabgp_conf(&lab, 65000, &[(peer, lab.router_v4.into())], 23456)
        .replace("capability {", "capability { asn4 disable;");
    let exabgp = ExaBgp::start(&lab.router, &[lab.router_v4.into()], &conf);
    let node = Holdfast::start(
        &lab.node,
        &single_peer_conf(&lab, &lab.router_v4.to_string(), NODE_ASN, 65000),
        &vips(&[VIP4, VIP6]),
    );
    let from = wait_end_of_rib(&exabgp, peer, &["ipv4", "ipv6"]);
    let sent_open = exabgp
        .sent()
        .into_iter()
        .find(|m| m["type"] == "open")
        .expect("ExaBGP's OPEN");
    assert!(
        sent_open["neighbor"]["open"]["capabilities"]
            .get("asn4")
            .is_none(),
        "{sent_open}"
    );
    for prefix in [VIP4_PREFIX, VIP6_PREFIX] {
        let update = from
            .iter()
            .rev()
            .find(|m| announcement_of(m, prefix))
            .unwrap_or_else(|| panic!("no UPDATE for {prefix}"));
        let raw = raw_message(update).expect("raw bytes");
        // AS_PATH: AS_SEQUENCE of one 2-octet AS, 23456.
        assert!(
            contains(&raw, &[0x40, 0x02, 0x04, 0x02, 0x01, 0x5b, 0xa0]),
            "{raw:02x?}"
        );
        // AS4_PATH (17, optional transitive): AS_SEQUENCE [4200000002].
        let mut as4_path = vec![0xc0, 0x11, 0x06, 0x02, 0x01];
        as4_path.extend_from_slice(&NODE_ASN.to_be_bytes());
        assert!(contains(&raw, &as4_path), "{raw:02x?}");
        check_attributes(&update["neighbor"], &[NODE_ASN], None);
    }
    let status = node.wait_peer_established("tor", LONG);
    assert_eq!(status["asn"], 65000, "{status}");
    assert_eq!(status["established_transitions"], 1, "{status}");
}

//! The mrtparse sample dumps (BIRD, Quagga, OpenBGPD): every BGP message in
//! every BGP4MP record decodes and re-encodes byte for byte, in the context
//! the session's OPENs negotiated; and our reading of each UPDATE matches
//! mrtparse's (attribute flags/types/lengths in order, AS_PATH, NLRI and
//! withdrawn prefixes with their path identifiers).

mod common;

use std::collections::BTreeMap;

use bgp_proto::{Capability, Context, Family, Message, Update};
use serde_json::Value;

/// One BGP message from a BGP4MP record (RFC 6396 §4.4, RFC 8050 §3).
struct Record {
    subtype: u16,
    peer: Vec<u8>,
    local: Vec<u8>,
    message: Vec<u8>,
    /// Index of this record in the file (mrtparse's JSON is one per record).
    index: usize,
}

const BGP4MP: u16 = 16;
const BGP4MP_ET: u16 = 17;

fn records(data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut i = 0;
    let mut index = 0;
    while i + 12 <= data.len() {
        let ty = u16::from_be_bytes([data[i + 4], data[i + 5]]);
        let subtype = u16::from_be_bytes([data[i + 6], data[i + 7]]);
        let len =
            u32::from_be_bytes([data[i + 8], data[i + 9], data[i + 10], data[i + 11]]) as usize;
        let mut body = &data[i + 12..i + 12 + len];
        i += 12 + len;
        index += 1;
        if ty == BGP4MP_ET {
            body = &body[4..];
        } else if ty != BGP4MP {
            continue;
        }
        // MESSAGE subtypes: 1 (2-octet AS), 4 (AS4), 6/7 (LOCAL), 8..11
        // (ADDPATH). STATE_CHANGE (0, 5) carries no message.
        let as_len = match subtype {
            1 | 6 | 8 | 10 => 2,
            4 | 7 | 9 | 11 => 4,
            _ => continue,
        };
        let afi = u16::from_be_bytes([body[2 * as_len + 2], body[2 * as_len + 3]]);
        let ip_len = if afi == 2 { 16 } else { 4 };
        let at = 2 * as_len + 4;
        out.push(Record {
            subtype,
            peer: body[at..at + ip_len].to_vec(),
            local: body[at + ip_len..at + 2 * ip_len].to_vec(),
            message: body[at + 2 * ip_len..].to_vec(),
            index: index - 1,
        });
    }
    out
}

/// What the recording speaker itself offered. The dumps hold only the
/// peer's OPENs (BGP4MP_MESSAGE records are what was received), so the
/// other half of the negotiation comes from the sample's config file: BIRD
/// was configured with `add paths on; enable as4 on;`, Quagga and OpenBGPD
/// (2016) speak 4-octet AS but not ADD-PATH.
fn local_side(dump: &str) -> (bool, bool) {
    // (4-octet AS, ADD-PATH receive)
    if dump.starts_with("bird") {
        (true, true)
    } else {
        (true, false)
    }
}

/// The session's context: the peer's OPEN met with what the local side
/// offered (RFC 6793 §3, RFC 7911 §4).
fn contexts(dump: &str, records: &[Record]) -> BTreeMap<(Vec<u8>, Vec<u8>), Context> {
    let (local_as4, local_add_path) = local_side(dump);
    let mut sessions = BTreeMap::new();
    for r in records {
        if r.message.get(18) != Some(&1) {
            continue;
        }
        let Message::Open(o) = Message::decode(&r.message, &Context::default()).unwrap() else {
            unreachable!()
        };
        let mut ctx = Context {
            four_octet_as: local_as4 && o.four_octet_as().is_some(),
            ..Context::default()
        };
        for f in [Family::IPV4_UNICAST, Family::IPV6_UNICAST] {
            if local_add_path && o.add_path(f).is_some_and(|m| m.can_send()) {
                ctx.add_path.insert(f);
            }
        }
        if o.capabilities()
            .any(|c| matches!(c, Capability::ExtendedMessage))
        {
            ctx = ctx.with_extended_messages();
        }
        // The latest OPEN of a session stands.
        sessions.insert(session_key(r), ctx);
    }
    sessions
}

fn session_key(r: &Record) -> (Vec<u8>, Vec<u8>) {
    let (a, b) = (r.peer.clone(), r.local.clone());
    if a <= b { (a, b) } else { (b, a) }
}

fn context_for(r: &Record, sessions: &BTreeMap<(Vec<u8>, Vec<u8>), Context>) -> Context {
    let mut ctx = sessions.get(&session_key(r)).copied().unwrap_or(Context {
        four_octet_as: matches!(r.subtype, 4 | 7 | 9 | 11),
        ..Context::default()
    });
    // RFC 8050: the ADDPATH subtypes say the NLRI carry path identifiers.
    if matches!(r.subtype, 8..=11) {
        ctx = ctx
            .with_add_path(Family::IPV4_UNICAST)
            .with_add_path(Family::IPV6_UNICAST);
    }
    ctx
}

const DUMPS: [&str; 7] = [
    "bird_bgp",
    "bird6_bgp",
    "bird-mrtdump_bgp",
    "bird6-mrtdump_bgp",
    "quagga_bgp",
    "quagga_bgp_large_communities",
    "openbgpd_bgp",
];

#[test]
fn every_message_in_every_dump_round_trips() {
    let dir = common::corpora().join("mrtparse-samples");
    let mut total = BTreeMap::new();
    for name in DUMPS {
        let data = std::fs::read(dir.join("samples").join(name)).unwrap();
        let recs = records(&data);
        assert!(!recs.is_empty(), "{name}: no BGP4MP messages");
        let sessions = contexts(name, &recs);
        for r in &recs {
            let ctx = context_for(r, &sessions);
            let msg = Message::decode(&r.message, &ctx)
                .unwrap_or_else(|e| panic!("{name} record {}: {e}", r.index));
            let again = msg.encode(&ctx).unwrap();
            assert_eq!(
                again, r.message,
                "{name} record {}: re-encoding differs",
                r.index
            );
            *total.entry(msg.name()).or_insert(0) += 1;
        }
    }
    // All five message types are covered.
    for ty in [
        "OPEN",
        "UPDATE",
        "NOTIFICATION",
        "KEEPALIVE",
        "ROUTE-REFRESH",
    ] {
        assert!(
            total.get(ty).copied().unwrap_or(0) > 0,
            "no {ty} in the dumps: {total:?}"
        );
    }
}

fn prefixes(list: &Value) -> Vec<(String, Option<u64>)> {
    list.as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            (
                format!("{}/{}", n["prefix"].as_str().unwrap(), n["length"]),
                n["path_id"].as_u64(),
            )
        })
        .collect()
}

fn ours(list: &[bgp_proto::Nlri]) -> Vec<(String, Option<u64>)> {
    list.iter()
        .map(|n| (n.prefix.to_string(), n.path_id.map(u64::from)))
        .collect()
}

fn first_key(v: &Value) -> u64 {
    v.as_object()
        .and_then(|o| o.keys().next())
        .and_then(|k| k.parse().ok())
        .unwrap_or(u64::MAX)
}

fn compare_update(name: &str, index: usize, u: &Update, ctx: &Context, m: &Value) {
    let attrs = m["path_attributes"].as_array().unwrap();
    assert_eq!(
        attrs.len(),
        u.attributes.len() + usize::from(u.trailing.is_some()),
        "{name} record {index}: attribute count"
    );
    for (a, theirs) in u.attributes.iter().zip(attrs) {
        let mut enc = Vec::new();
        a.encode(ctx, &mut enc);
        let hdr = if a.flags & 0x10 != 0 { 4 } else { 3 };
        assert_eq!(
            u64::from(a.flags),
            theirs["flag"].as_u64().unwrap(),
            "{name} record {index}: flags"
        );
        assert_eq!(
            u64::from(a.type_code),
            first_key(&theirs["type"]),
            "{name} record {index}: type"
        );
        assert_eq!(
            (enc.len() - hdr) as u64,
            theirs["length"].as_u64().unwrap(),
            "{name} record {index}: length"
        );
        if a.type_code == 2 {
            let segs: Vec<Vec<String>> = theirs["value"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| {
                    s["value"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_str().unwrap().to_string())
                        .collect()
                })
                .collect();
            let mine: Vec<Vec<String>> = u
                .as_path()
                .unwrap()
                .segments
                .iter()
                .map(|s| s.asns.iter().map(|a| a.to_string()).collect())
                .collect();
            assert_eq!(mine, segs, "{name} record {index}: AS_PATH");
        }
        if a.type_code == 14 {
            let mp = u.mp_reach().unwrap();
            if mp.family.has_prefix_nlri() {
                assert_eq!(
                    ours(mp.nlri.prefixes()),
                    prefixes(&theirs["value"]["nlri"]),
                    "{name} record {index}: MP_REACH NLRI"
                );
            }
        }
        if a.type_code == 15 {
            let mp = u.mp_unreach().unwrap();
            if mp.family.has_prefix_nlri() {
                assert_eq!(
                    ours(mp.withdrawn.prefixes()),
                    prefixes(&theirs["value"]["withdrawn_routes"]),
                    "{name} record {index}: MP_UNREACH"
                );
            }
        }
    }
    assert_eq!(
        ours(&u.nlri),
        prefixes(&m["nlri"]),
        "{name} record {index}: NLRI"
    );
    assert_eq!(
        ours(&u.withdrawn),
        prefixes(&m["withdrawn_routes"]),
        "{name} record {index}: withdrawn"
    );
}

#[test]
fn updates_agree_with_mrtparse() {
    let dir = common::corpora().join("mrtparse-samples");
    let mut compared = 0;
    for name in DUMPS {
        let data = std::fs::read(dir.join("samples").join(name)).unwrap();
        let json: Vec<Value> = serde_json::from_str(
            &std::fs::read_to_string(
                dir.join("expected-mrtparse-json")
                    .join(format!("{name}.json")),
            )
            .unwrap(),
        )
        .unwrap();
        let recs = records(&data);
        let sessions = contexts(name, &recs);
        for r in &recs {
            let ctx = context_for(r, &sessions);
            let Message::Update(u) = Message::decode(&r.message, &ctx).unwrap() else {
                continue;
            };
            let m = &json[r.index]["bgp_message"];
            compare_update(name, r.index, &u, &ctx, m);
            compared += 1;
        }
    }
    assert!(compared >= 90, "compared only {compared} UPDATEs");
}

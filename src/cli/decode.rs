//! `holdfast decode`: BGP messages as hex on stdin, one per line (marker
//! included); one JSON object per message on stdout. `--verify` re-encodes
//! each message and fails on any byte difference.

use std::io::{BufRead, Write};

use bgp_proto::{
    AttrValue, Capability, Context, Error, Family, Message, MpNlri, Nlri, OptParam, PathAttribute,
    Update, hex,
};
use serde_json::{Value, json};

/// What the decoder assumes the session negotiated.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub context: Context,
    pub verify: bool,
}

/// Reads every line, writes every result. Returns the process exit code: 0,
/// or 1 when a line was not hex, or with `--verify` when a message did not
/// decode or its re-encoding differs.
pub fn run(
    input: impl BufRead,
    mut out: impl Write,
    mut err: impl Write,
    opts: Options,
) -> std::io::Result<i32> {
    let mut status = 0;
    for (n, line) in input.lines().enumerate() {
        let line = line?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let bytes = match hex::decode(text) {
            Ok(b) => b,
            Err(e) => {
                writeln!(
                    out,
                    "{}",
                    json!({ "line": n + 1, "error": { "message": format!("not hex: {e}") } })
                )?;
                status = 1;
                continue;
            }
        };
        match Message::decode(&bytes, &opts.context) {
            Ok(msg) => {
                let mut obj = message_json(&msg, &opts.context);
                if opts.verify {
                    let again = msg.encode(&opts.context).unwrap_or_default();
                    let same = again == bytes;
                    obj["verified"] = json!(same);
                    if !same {
                        status = 1;
                        writeln!(
                            err,
                            "line {}: re-encoding differs\n  in:  {}\n  out: {}",
                            n + 1,
                            text,
                            hex::encode(&again)
                        )?;
                    }
                }
                writeln!(out, "{obj}")?;
            }
            Err(e) => {
                // Without --verify a decode error is the answer asked for
                // (what NOTIFICATION the message would cause); --verify
                // checks that every message round-trips, and this one did not.
                if opts.verify {
                    status = 1;
                    writeln!(err, "line {}: does not decode: {e}", n + 1)?;
                }
                writeln!(out, "{}", json!({ "line": n + 1, "error": error_json(&e) }))?;
            }
        }
    }
    Ok(status)
}

/// The NOTIFICATION an error would cause, in numbers and words.
pub fn error_json(e: &Error) -> Value {
    json!({
        "code": e.code(),
        "subcode": e.subcode(),
        "name": bgp_proto::notification::describe_code(e.code(), e.subcode()),
        "data": hex::encode(&e.data()),
        "message": e.to_string(),
    })
}

fn nlri_json(list: &[Nlri]) -> Value {
    Value::Array(
        list.iter()
            .map(|n| match n.path_id {
                Some(id) => json!({ "prefix": n.prefix.to_string(), "path_id": id }),
                None => json!(n.prefix.to_string()),
            })
            .collect(),
    )
}

fn mp_nlri_json(n: &MpNlri) -> Value {
    match n {
        MpNlri::Prefixes(p) => nlri_json(p),
        MpNlri::Opaque(b) => json!({ "hex": hex::encode(b) }),
    }
}

fn capability_json(c: &Capability) -> Value {
    let mut v = match c {
        Capability::Multiprotocol(f) => json!({ "name": "multiprotocol", "family": f.name() }),
        Capability::RouteRefresh => json!({ "name": "route-refresh" }),
        Capability::ExtendedNextHop(l) => json!({
            "name": "extended-next-hop",
            "entries": l.iter().map(|e| json!({ "nlri_afi": e.nlri_afi, "nlri_safi": e.nlri_safi, "next_hop_afi": e.next_hop_afi })).collect::<Vec<_>>(),
        }),
        Capability::ExtendedMessage => json!({ "name": "extended-message" }),
        Capability::Role(r) => json!({ "name": "role", "role": r }),
        Capability::GracefulRestart(gr) => json!({
            "name": "graceful-restart",
            "restart_state": gr.restart_state(),
            "notification": gr.notification(),
            "restart_time": gr.restart_time,
            "families": gr.families.iter().map(|f| json!({ "family": f.family.name(), "forwarding": f.forwarding_preserved() })).collect::<Vec<_>>(),
        }),
        Capability::FourOctetAs(a) => json!({ "name": "four-octet-as", "asn": a }),
        Capability::AddPath(l) => json!({
            "name": "add-path",
            "families": l.iter().map(|(f, m)| json!({ "family": f.name(), "send": m.can_send(), "receive": m.can_receive() })).collect::<Vec<_>>(),
        }),
        Capability::EnhancedRouteRefresh => json!({ "name": "enhanced-route-refresh" }),
        Capability::LongLivedGracefulRestart(l) => json!({
            "name": "long-lived-graceful-restart",
            "families": l.iter().map(|f| json!({ "family": f.family.name(), "forwarding": f.flags & 0x80 != 0, "stale_time": f.stale_time })).collect::<Vec<_>>(),
        }),
        Capability::Fqdn { hostname, domain } => json!({
            "name": "fqdn",
            "hostname": String::from_utf8_lossy(hostname),
            "domain": String::from_utf8_lossy(domain),
        }),
        Capability::Unknown { value, .. } => {
            json!({ "name": "unknown", "value": hex::encode(value) })
        }
    };
    v["code"] = json!(c.code());
    v
}

fn attribute_json(a: &PathAttribute) -> Value {
    let value = match &a.value {
        AttrValue::Origin(o) => json!(o.as_str()),
        AttrValue::AsPath(p) | AttrValue::As4Path(p) => json!({
            "text": p.to_string(),
            "segments": p.segments.iter().map(|s| json!({ "type": format!("{:?}", s.kind).to_lowercase(), "asns": s.asns })).collect::<Vec<_>>(),
        }),
        AttrValue::NextHop(a) | AttrValue::OriginatorId(a) => json!(a.to_string()),
        AttrValue::MultiExitDisc(v) | AttrValue::LocalPref(v) | AttrValue::Otc(v) => json!(v),
        AttrValue::AtomicAggregate => json!(true),
        AttrValue::Aggregator(g) | AttrValue::As4Aggregator(g) => {
            json!({ "asn": g.asn, "address": g.address.to_string() })
        }
        AttrValue::Communities(c) => json!(c.iter().map(|c| c.to_string()).collect::<Vec<_>>()),
        AttrValue::ClusterList(l) => json!(l.iter().map(|a| a.to_string()).collect::<Vec<_>>()),
        AttrValue::MpReach(m) => {
            let (global, ll) = m.next_hops();
            let mut nh: Vec<String> = global.map(|a| a.to_string()).into_iter().collect();
            nh.extend(ll.map(|a| a.to_string()));
            json!({ "family": m.family.name(), "next_hop": nh, "next_hop_hex": hex::encode(&m.next_hop), "nlri": mp_nlri_json(&m.nlri) })
        }
        AttrValue::MpUnreach(m) => {
            json!({ "family": m.family.name(), "withdrawn": mp_nlri_json(&m.withdrawn) })
        }
        AttrValue::ExtendedCommunities(c) => {
            json!(c.iter().map(|c| c.to_string()).collect::<Vec<_>>())
        }
        AttrValue::Ipv6ExtendedCommunities(c) => {
            json!(c.iter().map(|c| hex::encode(&c.0)).collect::<Vec<_>>())
        }
        AttrValue::LargeCommunities(c) => {
            json!(c.iter().map(|c| c.to_string()).collect::<Vec<_>>())
        }
        AttrValue::Unknown(raw) => json!({ "hex": hex::encode(raw) }),
        AttrValue::Malformed(m) => {
            json!({ "hex": hex::encode(&m.raw), "error": error_json(&m.error.error), "action": m.error.action.as_str() })
        }
    };
    json!({ "type": a.name(), "code": a.type_code, "flags": format!("0x{:02x}", a.flags), "value": value })
}

fn update_json(u: &Update, ctx: &Context) -> Value {
    let mut obj = json!({
        "type": "UPDATE",
        "withdrawn": nlri_json(&u.withdrawn),
        "attributes": u.attributes.iter().map(attribute_json).collect::<Vec<_>>(),
        "nlri": nlri_json(&u.nlri),
    });
    if let Some(t) = &u.trailing {
        obj["unparsed_attributes"] = json!({ "hex": hex::encode(&t.raw), "error": error_json(&t.error.error), "action": t.error.action.as_str() });
    }
    if let Some(f) = u.end_of_rib_family() {
        obj["end_of_rib"] = json!(f.name());
    }
    let verdict = u.validate(ctx);
    if let Some(action) = verdict.action {
        obj["rfc7606"] = json!({
            "action": action.as_str(),
            "errors": verdict.errors.iter().map(|e| { let mut v = error_json(&e.error); v["action"] = json!(e.action.as_str()); v }).collect::<Vec<_>>(),
            "disabled_families": verdict.disabled_families.iter().map(|f: &Family| f.name()).collect::<Vec<_>>(),
        });
    }
    obj
}

pub fn message_json(msg: &Message, ctx: &Context) -> Value {
    match msg {
        Message::Open(o) => json!({
            "type": "OPEN",
            "version": o.version,
            "my_as": o.my_as,
            "asn": o.asn(),
            "hold_time": o.hold_time,
            "bgp_id": o.bgp_id.to_string(),
            "extended_params": o.extended_params.is_some(),
            "params": o.params.iter().map(|p| match p {
                OptParam::Capabilities(c) => json!({ "type": "capabilities", "capabilities": c.iter().map(capability_json).collect::<Vec<_>>() }),
                OptParam::Unknown { param_type, value } => json!({ "type": param_type, "value": hex::encode(value) }),
            }).collect::<Vec<_>>(),
        }),
        Message::Update(u) => update_json(u, ctx),
        Message::Notification(n) => {
            let mut v = json!({
                "type": "NOTIFICATION",
                "code": n.code,
                "subcode": n.subcode,
                "name": bgp_proto::notification::describe_code(n.code, n.subcode),
                "data": hex::encode(&n.data),
            });
            if let Some(m) = n.shutdown_message() {
                v["shutdown_message"] = json!(m);
            }
            // RFC 8538 §3: the NOTIFICATION a Hard Reset carries.
            if let Some(inner) = n.encapsulated() {
                let mut i = json!({
                    "code": inner.code,
                    "subcode": inner.subcode,
                    "name": bgp_proto::notification::describe_code(inner.code, inner.subcode),
                    "data": hex::encode(&inner.data),
                });
                if let Some(m) = inner.shutdown_message() {
                    i["shutdown_message"] = json!(m);
                }
                v["encapsulated"] = i;
            }
            v
        }
        Message::Keepalive => json!({ "type": "KEEPALIVE" }),
        Message::RouteRefresh(r) => json!({
            "type": "ROUTE-REFRESH",
            "family": r.family.name(),
            "afi": r.family.afi.0,
            "safi": r.family.safi.0,
            "subtype": match r.subtype { 0 => json!("normal"), 1 => json!("borr"), 2 => json!("eorr"), n => json!(n) },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(input: &str, verify: bool) -> (Vec<Value>, i32) {
        let mut out = Vec::new();
        let opts = Options {
            context: Context::default(),
            verify,
        };
        let code = run(input.as_bytes(), &mut out, std::io::sink(), opts).unwrap();
        let lines = String::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (lines, code)
    }

    #[test]
    fn update_to_json() {
        let (v, code) = decode(
            "ffffffffffffffffffffffffffffffff0037020000001b4001010040020602010000fde9400304c0000202c00804fde9006420c633640a\n",
            true,
        );
        assert_eq!(code, 0);
        assert_eq!(v[0]["type"], "UPDATE");
        assert_eq!(v[0]["nlri"][0], "198.51.100.10/32");
        assert_eq!(v[0]["attributes"][3]["value"][0], "65001:100");
        assert_eq!(v[0]["verified"], true);
    }

    #[test]
    fn errors_name_the_notification() {
        let (v, code) = decode("ffffffffffffffffffffffffffffffff001204\nnot hex\n", false);
        assert_eq!(v[0]["error"]["code"], 1);
        assert_eq!(v[0]["error"]["subcode"], 2);
        assert_eq!(
            v[0]["error"]["name"],
            "Message Header Error / Bad Message Length"
        );
        assert!(
            v[1]["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("not hex")
        );
        assert_eq!(code, 1);
    }

    #[test]
    fn verify_fails_on_a_message_that_does_not_decode() {
        // A KEEPALIVE whose length field says 18: Bad Message Length.
        let bad = "ffffffffffffffffffffffffffffffff001204\n";
        let (v, code) = decode(bad, true);
        assert_eq!(v[0]["error"]["code"], 1);
        assert_eq!(
            code, 1,
            "--verify must fail on a message that does not decode"
        );
        let (_, code) = decode(bad, false);
        assert_eq!(code, 0, "without --verify a decode error is a result");
    }
}

//! `/metrics`: a [`Status`] snapshot in the Prometheus text exposition
//! format, version 0.0.4, written by hand.
//!
//! The format's rules that matter here: every family is one contiguous group
//! of lines led by its `# HELP` and `# TYPE`; a label value escapes `\`, `"`
//! and line feed as `\\`, `\"` and `\n`; help text escapes `\` and line feed;
//! a series (name plus label set) appears once. Families without a sample
//! are left out, as the client libraries do for a labelled metric with no
//! children yet. README.md ("Metrics and the HTTP API") lists every family.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use crate::status::{NotificationCount, PeerStatus, Status};

/// The RFC 4271 §8.2.2 states, in the spelling `PeerStatus::state` uses.
/// `holdfast_peer_state` has one series for each.
pub const PEER_STATES: [&str; 6] = [
    "Idle",
    "Connect",
    "Active",
    "OpenSent",
    "OpenConfirm",
    "Established",
];

/// `Content-Type` of the 0.0.4 text format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
}

/// Every value holdfast exposes is a count or a whole number of seconds:
/// written as an integer, it keeps all 64 bits (an `f64` would round past
/// 2^53).
#[derive(Clone, Copy)]
enum Value {
    Int(u64),
}

struct Family {
    name: &'static str,
    help: &'static str,
    kind: Kind,
    samples: Vec<(Vec<(&'static str, String)>, Value)>,
    seen: HashSet<Vec<(&'static str, String)>>,
}

impl Family {
    fn new(name: &'static str, kind: Kind, help: &'static str) -> Self {
        Family {
            name,
            help,
            kind,
            samples: Vec::new(),
            seen: HashSet::new(),
        }
    }

    /// Adds a series; a label set already present keeps its first value, so
    /// that two peers configured alike can never produce a duplicate series
    /// that Prometheus would reject along with the whole scrape.
    fn add(&mut self, labels: Vec<(&'static str, String)>, value: Value) {
        if self.seen.insert(labels.clone()) {
            self.samples.push((labels, value));
        }
    }

    fn write(&self, out: &mut String) {
        if self.samples.is_empty() {
            return;
        }
        let kind = match self.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        };
        let _ = writeln!(out, "# HELP {} {}", self.name, escape_help(self.help));
        let _ = writeln!(out, "# TYPE {} {kind}", self.name);
        for (labels, value) in &self.samples {
            out.push_str(self.name);
            if !labels.is_empty() {
                out.push('{');
                for (i, (k, v)) in labels.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{k}=\"{}\"", escape_label_value(v));
                }
                out.push('}');
            }
            out.push(' ');
            let Value::Int(n) = *value;
            let _ = write!(out, "{n}");
            out.push('\n');
        }
    }
}

/// `\` → `\\`, `"` → `\"`, line feed → `\n` (the only three escapes the
/// format has for label values).
pub fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// `\` → `\\`, line feed → `\n` (help text leaves `"` alone).
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn flag(b: bool) -> Value {
    Value::Int(u64::from(b))
}

fn peer_labels(p: &PeerStatus) -> Vec<(&'static str, String)> {
    let address = p
        .address
        .clone()
        .unwrap_or_else(|| p.configured_address.clone());
    vec![("peer", p.name.clone()), ("address", address)]
}

/// Sums counts that share a code and subcode (the name is a function of
/// the two; should two names differ, the first one is kept).
fn notification_series(
    family: &mut Family,
    peer: &[(&'static str, String)],
    counts: &[NotificationCount],
) {
    let mut merged: BTreeMap<(u8, u8), (String, u64)> = BTreeMap::new();
    for n in counts {
        let e = merged
            .entry((n.code, n.subcode))
            .or_insert_with(|| (n.name.clone(), 0));
        e.1 = e.1.saturating_add(n.count);
    }
    for ((code, subcode), (name, count)) in merged {
        let mut labels = peer.to_vec();
        labels.push(("code", code.to_string()));
        labels.push(("subcode", subcode.to_string()));
        labels.push(("name", name));
        family.add(labels, Value::Int(count));
    }
}

/// The whole exposition for one snapshot.
pub fn render_metrics(status: &Status) -> String {
    use Kind::{Counter, Gauge};

    let mut peer_state = Family::new(
        "holdfast_peer_state",
        Gauge,
        "BGP session state (RFC 4271 section 8.2.2): 1 for the state the session is in, 0 for the others.",
    );
    let mut established = Family::new(
        "holdfast_peer_established",
        Gauge,
        "1 if the BGP session is Established, else 0.",
    );
    let mut uptime = Family::new(
        "holdfast_peer_uptime_seconds",
        Gauge,
        "Seconds the session has been Established; 0 when it is not.",
    );
    let mut msg_sent = Family::new(
        "holdfast_peer_messages_sent_total",
        Counter,
        "BGP messages sent to the peer, all types.",
    );
    let mut msg_rcvd = Family::new(
        "holdfast_peer_messages_received_total",
        Counter,
        "BGP messages received from the peer, all types.",
    );
    let mut upd_sent = Family::new(
        "holdfast_peer_updates_sent_total",
        Counter,
        "UPDATE messages sent to the peer.",
    );
    let mut upd_rcvd = Family::new(
        "holdfast_peer_updates_received_total",
        Counter,
        "UPDATE messages received from the peer.",
    );
    let mut pfx_adv = Family::new(
        "holdfast_peer_prefixes_advertised",
        Gauge,
        "Prefixes in the peer's Adj-RIB-Out, by address family.",
    );
    let mut pfx_rcvd = Family::new(
        "holdfast_peer_prefixes_received_total",
        Counter,
        "NLRI announced by the peer in received UPDATEs.",
    );
    let mut notif_sent = Family::new(
        "holdfast_peer_notifications_sent_total",
        Counter,
        "NOTIFICATION messages sent to the peer, by error code and subcode (RFC 4271 section 4.5).",
    );
    let mut notif_rcvd = Family::new(
        "holdfast_peer_notifications_received_total",
        Counter,
        "NOTIFICATION messages received from the peer, by error code and subcode (RFC 4271 section 4.5).",
    );
    let mut transitions = Family::new(
        "holdfast_peer_established_transitions_total",
        Counter,
        "Times the session entered Established.",
    );
    let mut bfd_up = Family::new(
        "holdfast_peer_bfd_up",
        Gauge,
        "1 if the peer's BFD session is Up (RFC 5880 section 4.1), else 0; only peers with BFD.",
    );
    let mut bfd_discarded = Family::new(
        "holdfast_peer_bfd_discarded_total",
        Counter,
        "BFD packets for the peer's session discarded, by reason: failed authentication (RFC 5880 section 6.7) or a full inbox.",
    );

    for p in &status.peers {
        let labels = peer_labels(p);
        let with = |k: &'static str, v: &str| {
            let mut l = labels.clone();
            l.push((k, v.to_string()));
            l
        };
        for s in PEER_STATES {
            peer_state.add(with("state", s), flag(p.state == s));
        }
        // A state outside the RFC's six still shows, rather than a peer
        // whose every state series reads 0.
        if !PEER_STATES.contains(&p.state.as_str()) {
            peer_state.add(with("state", &p.state), flag(true));
        }
        let is_established = p.state == "Established";
        established.add(labels.clone(), flag(is_established));
        let up = if is_established {
            p.uptime_seconds.unwrap_or(0)
        } else {
            0
        };
        uptime.add(labels.clone(), Value::Int(up));
        msg_sent.add(labels.clone(), Value::Int(p.messages_sent));
        msg_rcvd.add(labels.clone(), Value::Int(p.messages_received));
        upd_sent.add(labels.clone(), Value::Int(p.updates_sent));
        upd_rcvd.add(labels.clone(), Value::Int(p.updates_received));
        pfx_adv.add(
            with("family", "ipv4"),
            Value::Int(p.prefixes_advertised_ipv4),
        );
        pfx_adv.add(
            with("family", "ipv6"),
            Value::Int(p.prefixes_advertised_ipv6),
        );
        pfx_rcvd.add(labels.clone(), Value::Int(p.prefixes_received));
        notification_series(&mut notif_sent, &labels, &p.notifications_sent);
        notification_series(&mut notif_rcvd, &labels, &p.notifications_received);
        transitions.add(labels.clone(), Value::Int(p.established_transitions));
        if let Some(bfd) = &p.bfd {
            bfd_up.add(labels.clone(), flag(bfd.state == "Up"));
            for (reason, n) in &bfd.discarded {
                bfd_discarded.add(with("reason", reason), Value::Int(*n));
            }
        }
    }

    let c = &status.counters;
    let single = |name, kind, help, value| {
        let mut f = Family::new(name, kind, help);
        f.add(Vec::new(), value);
        f
    };
    let source_kind = || vec![("kind", status.source.kind.clone())];
    let mut source_healthy = Family::new(
        "holdfast_source_healthy",
        Gauge,
        "1 if the VIP source is healthy; while it is not, the last known set of VIPs stands.",
    );
    source_healthy.add(source_kind(), flag(status.source.healthy));
    let mut source_synced = Family::new(
        "holdfast_source_synced",
        Gauge,
        "1 once the VIP source has delivered its first complete view.",
    );
    source_synced.add(source_kind(), flag(status.source.synced));
    let mut source_vips = Family::new(
        "holdfast_source_vips",
        Gauge,
        "VIPs the source currently wants advertised from this node.",
    );
    source_vips.add(source_kind(), Value::Int(status.source.vips as u64));
    let version = if status.version.is_empty() {
        env!("CARGO_PKG_VERSION").to_string()
    } else {
        status.version.clone()
    };
    let mut build_info = Family::new(
        "holdfast_build_info",
        Gauge,
        "Always 1; the labels carry the holdfast version and the commit it was built from.",
    );
    build_info.add(
        vec![
            ("version", version),
            ("commit", crate::build_info::COMMIT.to_owned()),
        ],
        Value::Int(1),
    );

    let families = [
        peer_state,
        established,
        uptime,
        msg_sent,
        msg_rcvd,
        upd_sent,
        upd_rcvd,
        pfx_adv,
        pfx_rcvd,
        notif_sent,
        notif_rcvd,
        transitions,
        bfd_up,
        bfd_discarded,
        single(
            "holdfast_routes_advertised",
            Gauge,
            "Prefixes advertised now.",
            Value::Int(c.routes_advertised),
        ),
        single(
            "holdfast_routes_held_down",
            Gauge,
            "Prefixes advertised now although the source no longer has them (held down, damped or draining).",
            Value::Int(c.routes_held_down),
        ),
        single(
            "holdfast_withdrawals_absorbed_total",
            Counter,
            "VIP absences that ended inside the hold-down: withdraw/advertise pairs the routers never saw.",
            Value::Int(c.withdrawals_absorbed),
        ),
        single(
            "holdfast_damping_absorbed_total",
            Counter,
            "VIP absences that outlasted the hold-down, were kept advertised by damping, and ended with the VIP back.",
            Value::Int(c.absences_absorbed_by_damping),
        ),
        single(
            "holdfast_damping_suppressions_total",
            Counter,
            "Damping episodes begun: a prefix's figure of merit crossed the suppress threshold.",
            Value::Int(c.damping_suppressions),
        ),
        single(
            "holdfast_reconcile_repairs_total",
            Counter,
            "Routes and VIPs the periodic reconcile ([source] resync) found different from the source and repaired: each a missed event.",
            Value::Int(c.reconcile_repairs),
        ),
        single(
            "holdfast_route_advertisements_total",
            Counter,
            "Route advertisements decided (first advertisements and attribute changes).",
            Value::Int(c.advertisements),
        ),
        single(
            "holdfast_route_withdrawals_total",
            Counter,
            "Route withdrawals decided.",
            Value::Int(c.withdrawals),
        ),
        single(
            "holdfast_withdrawals_deferred",
            Gauge,
            "Withdrawals the mass-withdrawal guard holds back now.",
            Value::Int(c.withdrawals_deferred),
        ),
        single(
            "holdfast_withdrawals_deferred_total",
            Counter,
            "Withdrawals the mass-withdrawal guard has held back since the daemon started.",
            Value::Int(c.withdrawals_deferred_total),
        ),
        source_healthy,
        source_synced,
        source_vips,
        single(
            "holdfast_config_reload_error",
            Gauge,
            "1 if the last config reload failed and the daemon runs an older config.",
            flag(status.config_error.is_some()),
        ),
        build_info,
        single(
            "holdfast_uptime_seconds",
            Gauge,
            "Seconds since the daemon started.",
            Value::Int(status.uptime_seconds),
        ),
    ];
    let mut out = String::with_capacity(4096 + status.peers.len() * 2048);
    for f in &families {
        f.write(&mut out);
    }
    out
}

#[cfg(test)]
mod tests;

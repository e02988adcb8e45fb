//! `/metrics`: a [`Status`] snapshot in the Prometheus text exposition
//! format, version 0.0.4, written by hand.
//!
//! The format's rules that matter here: every family is one contiguous group
//! of lines led by its `# HELP` and `# TYPE`; a label value escapes `\`, `"`
//! and line feed as `\\`, `\"` and `\n`; help text escapes `\` and line feed;
//! a series (name plus label set) appears once. Families without a sample
//! are left out, as the client libraries do for a labelled metric with no
//! children yet. [`FAMILIES`] declares every family; the reference page
//! (docs/src/reference/metrics.md) is generated from it.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

use crate::report::status::{NotificationCount, PeerStatus, Status};

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

/// A family's metric type, as `# TYPE` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Only ever goes up (from the daemon's start).
    Counter,
    /// Goes up and down.
    Gauge,
}

impl Kind {
    /// `counter` or `gauge`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
        }
    }
}

/// One metric family `/metrics` may carry: everything the exposition and
/// the reference page (docs/src/reference/metrics.md) say of it.
#[derive(Debug)]
pub struct FamilyDoc {
    /// The metric name.
    pub name: &'static str,
    /// Counter or gauge.
    pub kind: Kind,
    /// Label names, in the order each series carries them.
    pub labels: &'static [&'static str],
    /// The `# HELP` text.
    pub help: &'static str,
    /// More for the reference page, after the help: label values, what to
    /// make of the value. May be empty.
    pub doc: &'static str,
}

/// Every value holdfast exposes is a count or a whole number of seconds:
/// written as an integer, it keeps all 64 bits (an `f64` would round past
/// 2^53).
#[derive(Clone, Copy)]
enum Value {
    Int(u64),
}

struct Family {
    doc: &'static FamilyDoc,
    samples: Vec<(Vec<(&'static str, String)>, Value)>,
    seen: HashSet<Vec<(&'static str, String)>>,
}

impl Family {
    fn new(doc: &'static FamilyDoc) -> Self {
        Family {
            doc,
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
        let FamilyDoc {
            name, kind, help, ..
        } = self.doc;
        let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(out, "# TYPE {name} {}", kind.as_str());
        for (labels, value) in &self.samples {
            out.push_str(name);
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

/// `holdfast_peer_state`.
pub const PEER_STATE: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_state",
    kind: Kind::Gauge,
    labels: &["peer", "address", "state"],
    help: "BGP session state (RFC 4271 section 8.2.2): 1 for the state the session is in, 0 for the others.",
    doc: "One series per state: `Idle`, `Connect`, `Active`, `OpenSent`, `OpenConfirm`, `Established`.",
};

/// `holdfast_peer_established`.
pub const PEER_ESTABLISHED: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_established",
    kind: Kind::Gauge,
    labels: &["peer", "address"],
    help: "1 if the BGP session is Established, else 0.",
    doc: "",
};

/// `holdfast_peer_uptime_seconds`.
pub const PEER_UPTIME_SECONDS: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_uptime_seconds",
    kind: Kind::Gauge,
    labels: &["peer", "address"],
    help: "Seconds the session has been Established; 0 when it is not.",
    doc: "",
};

/// `holdfast_peer_messages_sent_total`.
pub const PEER_MESSAGES_SENT_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_messages_sent_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "BGP messages sent to the peer, all types.",
    doc: "",
};

/// `holdfast_peer_messages_received_total`.
pub const PEER_MESSAGES_RECEIVED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_messages_received_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "BGP messages received from the peer, all types.",
    doc: "",
};

/// `holdfast_peer_updates_sent_total`.
pub const PEER_UPDATES_SENT_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_updates_sent_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "UPDATE messages sent to the peer.",
    doc: "",
};

/// `holdfast_peer_updates_received_total`.
pub const PEER_UPDATES_RECEIVED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_updates_received_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "UPDATE messages received from the peer.",
    doc: "",
};

/// `holdfast_peer_prefixes_advertised`.
pub const PEER_PREFIXES_ADVERTISED: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_prefixes_advertised",
    kind: Kind::Gauge,
    labels: &["peer", "address", "family"],
    help: "Prefixes in the peer's Adj-RIB-Out, by address family.",
    doc: "`family` is `ipv4` or `ipv6`.",
};

/// `holdfast_peer_prefixes_received_total`.
pub const PEER_PREFIXES_RECEIVED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_prefixes_received_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "NLRI announced by the peer in received UPDATEs.",
    doc: "",
};

/// `holdfast_peer_notifications_sent_total`.
pub const PEER_NOTIFICATIONS_SENT_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_notifications_sent_total",
    kind: Kind::Counter,
    labels: &["peer", "address", "code", "subcode", "name"],
    help: "NOTIFICATION messages sent to the peer, by error code and subcode (RFC 4271 section 4.5).",
    doc: "Counted once written to the socket; `name` says it in words, e.g. `Cease / Administrative Shutdown`.",
};

/// `holdfast_peer_notifications_received_total`.
pub const PEER_NOTIFICATIONS_RECEIVED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_notifications_received_total",
    kind: Kind::Counter,
    labels: &["peer", "address", "code", "subcode", "name"],
    help: "NOTIFICATION messages received from the peer, by error code and subcode (RFC 4271 section 4.5).",
    doc: "`name` says it in words, as for the sent ones.",
};

/// `holdfast_peer_established_transitions_total`.
pub const PEER_ESTABLISHED_TRANSITIONS_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_established_transitions_total",
    kind: Kind::Counter,
    labels: &["peer", "address"],
    help: "Times the session entered Established.",
    doc: "",
};

/// `holdfast_peer_bfd_up`.
pub const PEER_BFD_UP: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_bfd_up",
    kind: Kind::Gauge,
    labels: &["peer", "address"],
    help: "1 if the peer's BFD session is Up (RFC 5880 section 4.1), else 0; only peers with BFD.",
    doc: "",
};

/// `holdfast_peer_bfd_discarded_total`.
pub const PEER_BFD_DISCARDED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_peer_bfd_discarded_total",
    kind: Kind::Counter,
    labels: &["peer", "address", "reason"],
    help: "BFD packets for the peer's session discarded, by reason: failed authentication (RFC 5880 section 6.7) or a full inbox.",
    doc: "`reason`: `unauthenticated` (no Authentication Section while `bfd.authentication` is set), `unexpected-auth` (one while it is not), `wrong-key` (another Auth Type or Key ID), `bad-digest` (digest or password wrong: a wrong key, or a forgery), `bad-sequence` (a sequence number outside RFC 5880 §6.7's window: a replay), `inbox-full` (more arrived than the session could take; the oldest went). Only peers with BFD.",
};

/// `holdfast_source_healthy`.
pub const SOURCE_HEALTHY: FamilyDoc = FamilyDoc {
    name: "holdfast_source_healthy",
    kind: Kind::Gauge,
    labels: &["kind"],
    help: "1 if the VIP source is healthy; while it is not, the last known set of VIPs stands.",
    doc: "`kind` is `file` or `kubernetes`. Nothing is withdrawn while the source is unhealthy.",
};

/// `holdfast_source_synced`.
pub const SOURCE_SYNCED: FamilyDoc = FamilyDoc {
    name: "holdfast_source_synced",
    kind: Kind::Gauge,
    labels: &["kind"],
    help: "1 once the VIP source has delivered its first complete view.",
    doc: "`/readyz` waits for it.",
};

/// `holdfast_source_vips`.
pub const SOURCE_VIPS: FamilyDoc = FamilyDoc {
    name: "holdfast_source_vips",
    kind: Kind::Gauge,
    labels: &["kind"],
    help: "VIPs the source currently wants advertised from this node.",
    doc: "",
};

/// `holdfast_build_info`.
pub const BUILD_INFO: FamilyDoc = FamilyDoc {
    name: "holdfast_build_info",
    kind: Kind::Gauge,
    labels: &["version", "commit"],
    help: "Always 1; the labels carry the holdfast version and the commit it was built from.",
    doc: "",
};

/// `holdfast_routes_advertised`.
pub const ROUTES_ADVERTISED: FamilyDoc = FamilyDoc {
    name: "holdfast_routes_advertised",
    kind: Kind::Gauge,
    labels: &[],
    help: "Prefixes advertised now.",
    doc: "",
};

/// `holdfast_routes_held_down`.
pub const ROUTES_HELD_DOWN: FamilyDoc = FamilyDoc {
    name: "holdfast_routes_held_down",
    kind: Kind::Gauge,
    labels: &[],
    help: "Prefixes advertised now although the source no longer has them (held down, damped or draining).",
    doc: "",
};

/// `holdfast_withdrawals_absorbed_total`.
pub const WITHDRAWALS_ABSORBED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_withdrawals_absorbed_total",
    kind: Kind::Counter,
    labels: &[],
    help: "VIP absences that ended inside the hold-down: withdraw/advertise pairs the routers never saw.",
    doc: "Absences that ended inside `local_endpoint_delay` or `delete_delay` count too. The number holdfast exists for.",
};

/// `holdfast_damping_absorbed_total`.
pub const DAMPING_ABSORBED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_damping_absorbed_total",
    kind: Kind::Counter,
    labels: &[],
    help: "VIP absences that outlasted the hold-down, were kept advertised by damping, and ended with the VIP back.",
    doc: "",
};

/// `holdfast_damping_suppressions_total`.
pub const DAMPING_SUPPRESSIONS_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_damping_suppressions_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Damping episodes begun: a prefix's figure of merit crossed the suppress threshold.",
    doc: "",
};

/// `holdfast_reconcile_repairs_total`.
pub const RECONCILE_REPAIRS_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_reconcile_repairs_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Routes and VIPs the periodic reconcile ([source] resync) found different from the source and repaired: each a missed event.",
    doc: "Should stay 0.",
};

/// `holdfast_route_advertisements_total`.
pub const ROUTE_ADVERTISEMENTS_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_route_advertisements_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Route advertisements decided (first advertisements and attribute changes).",
    doc: "A change of a route is its attributes, or its Service's traffic policy (which sends no UPDATE when the attributes stay).",
};

/// `holdfast_route_withdrawals_total`.
pub const ROUTE_WITHDRAWALS_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_route_withdrawals_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Route withdrawals decided.",
    doc: "",
};

/// `holdfast_withdrawals_deferred`.
pub const WITHDRAWALS_DEFERRED: FamilyDoc = FamilyDoc {
    name: "holdfast_withdrawals_deferred",
    kind: Kind::Gauge,
    labels: &[],
    help: "Withdrawals the mass-withdrawal guard holds back now.",
    doc: "See `max_withdraw_fraction`. Above 0 for long: a mass withdrawal is under way; check the source.",
};

/// `holdfast_withdrawals_deferred_total`.
pub const WITHDRAWALS_DEFERRED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_withdrawals_deferred_total",
    kind: Kind::Counter,
    labels: &[],
    help: "Withdrawals the mass-withdrawal guard has held back since the daemon started.",
    doc: "",
};

/// `holdfast_config_reload_error`.
pub const CONFIG_RELOAD_ERROR: FamilyDoc = FamilyDoc {
    name: "holdfast_config_reload_error",
    kind: Kind::Gauge,
    labels: &[],
    help: "1 if the last config reload failed and the daemon runs an older config.",
    doc: "`holdfast status` shows the errors.",
};

/// `holdfast_handoff_total`.
pub const HANDOFF_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_handoff_total",
    kind: Kind::Counter,
    labels: &["result"],
    help: "Hand-offs this process received from the holdfast that ran before it with the same state directory.",
    doc: "`result`: `completed` (the sessions were taken over as they were, the routers saw nothing) or `fallback` (the previous process exited by its usual path, graceful restart where the exit plan keeps the routes, and the sessions started afresh; `holdfast status` says why). A process receives at most one, at its start: absent when it started alone.",
};

/// `holdfast_handoff_pause_milliseconds`.
pub const HANDOFF_PAUSE_MILLISECONDS: FamilyDoc = FamilyDoc {
    name: "holdfast_handoff_pause_milliseconds",
    kind: Kind::Gauge,
    labels: &[],
    help: "How long the sessions were neither read nor written during the completed hand-off this process received, in milliseconds.",
    doc: "Absent without a completed hand-off.",
};

/// `holdfast_uptime_seconds`.
pub const UPTIME_SECONDS: FamilyDoc = FamilyDoc {
    name: "holdfast_uptime_seconds",
    kind: Kind::Gauge,
    labels: &[],
    help: "Seconds since the daemon started.",
    doc: "",
};

/// `holdfast_bmp_up`.
pub const BMP_UP: FamilyDoc = FamilyDoc {
    name: "holdfast_bmp_up",
    kind: Kind::Gauge,
    labels: &["station"],
    help: "1 while the BMP station (RFC 7854) is connected and initiated, else 0.",
    doc: "One series per `[[bmp]]` station.",
};

/// `holdfast_bmp_messages_total`.
pub const BMP_MESSAGES_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_bmp_messages_total",
    kind: Kind::Counter,
    labels: &["station", "type"],
    help: "BMP messages written to the station, by type.",
    doc: "`type`: `route_monitoring`, `statistics_report`, `peer_down`, `peer_up`, `initiation`, `termination` (RFC 7854 §4.1).",
};

/// `holdfast_bmp_dropped_total`.
pub const BMP_DROPPED_TOTAL: FamilyDoc = FamilyDoc {
    name: "holdfast_bmp_dropped_total",
    kind: Kind::Counter,
    labels: &["station"],
    help: "Connections to the BMP station dropped because it fell `queue_limit` octets behind; the next connection is sent the whole state again.",
    doc: "",
};

/// Every holdfast family, in the order `/metrics` writes them.
pub const FAMILIES: &[&FamilyDoc] = &[
    &PEER_STATE,
    &PEER_ESTABLISHED,
    &PEER_UPTIME_SECONDS,
    &PEER_MESSAGES_SENT_TOTAL,
    &PEER_MESSAGES_RECEIVED_TOTAL,
    &PEER_UPDATES_SENT_TOTAL,
    &PEER_UPDATES_RECEIVED_TOTAL,
    &PEER_PREFIXES_ADVERTISED,
    &PEER_PREFIXES_RECEIVED_TOTAL,
    &PEER_NOTIFICATIONS_SENT_TOTAL,
    &PEER_NOTIFICATIONS_RECEIVED_TOTAL,
    &PEER_ESTABLISHED_TRANSITIONS_TOTAL,
    &PEER_BFD_UP,
    &PEER_BFD_DISCARDED_TOTAL,
    &ROUTES_ADVERTISED,
    &ROUTES_HELD_DOWN,
    &WITHDRAWALS_ABSORBED_TOTAL,
    &DAMPING_ABSORBED_TOTAL,
    &DAMPING_SUPPRESSIONS_TOTAL,
    &RECONCILE_REPAIRS_TOTAL,
    &ROUTE_ADVERTISEMENTS_TOTAL,
    &ROUTE_WITHDRAWALS_TOTAL,
    &WITHDRAWALS_DEFERRED,
    &WITHDRAWALS_DEFERRED_TOTAL,
    &SOURCE_HEALTHY,
    &SOURCE_SYNCED,
    &SOURCE_VIPS,
    &CONFIG_RELOAD_ERROR,
    &HANDOFF_TOTAL,
    &HANDOFF_PAUSE_MILLISECONDS,
    &BUILD_INFO,
    &UPTIME_SECONDS,
    &BMP_UP,
    &BMP_MESSAGES_TOTAL,
    &BMP_DROPPED_TOTAL,
];

/// The whole exposition for one snapshot.
pub fn render_metrics(status: &Status) -> String {
    let mut peer_state = Family::new(&PEER_STATE);
    let mut established = Family::new(&PEER_ESTABLISHED);
    let mut uptime = Family::new(&PEER_UPTIME_SECONDS);
    let mut msg_sent = Family::new(&PEER_MESSAGES_SENT_TOTAL);
    let mut msg_rcvd = Family::new(&PEER_MESSAGES_RECEIVED_TOTAL);
    let mut upd_sent = Family::new(&PEER_UPDATES_SENT_TOTAL);
    let mut upd_rcvd = Family::new(&PEER_UPDATES_RECEIVED_TOTAL);
    let mut pfx_adv = Family::new(&PEER_PREFIXES_ADVERTISED);
    let mut pfx_rcvd = Family::new(&PEER_PREFIXES_RECEIVED_TOTAL);
    let mut notif_sent = Family::new(&PEER_NOTIFICATIONS_SENT_TOTAL);
    let mut notif_rcvd = Family::new(&PEER_NOTIFICATIONS_RECEIVED_TOTAL);
    let mut transitions = Family::new(&PEER_ESTABLISHED_TRANSITIONS_TOTAL);
    let mut bfd_up = Family::new(&PEER_BFD_UP);
    let mut bfd_discarded = Family::new(&PEER_BFD_DISCARDED_TOTAL);

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
    let single = |doc, value| {
        let mut f = Family::new(doc);
        f.add(Vec::new(), value);
        f
    };
    let source_kind = || vec![("kind", status.source.kind.clone())];
    let mut source_healthy = Family::new(&SOURCE_HEALTHY);
    source_healthy.add(source_kind(), flag(status.source.healthy));
    let mut source_synced = Family::new(&SOURCE_SYNCED);
    source_synced.add(source_kind(), flag(status.source.synced));
    let mut source_vips = Family::new(&SOURCE_VIPS);
    source_vips.add(source_kind(), Value::Int(status.source.vips as u64));
    let version = if status.version.is_empty() {
        env!("CARGO_PKG_VERSION").to_string()
    } else {
        status.version.clone()
    };
    let mut build_info = Family::new(&BUILD_INFO);
    build_info.add(
        vec![
            ("version", version),
            ("commit", crate::build_info::COMMIT.to_owned()),
        ],
        Value::Int(1),
    );

    let mut bmp_up = Family::new(&BMP_UP);
    let mut bmp_messages = Family::new(&BMP_MESSAGES_TOTAL);
    let mut bmp_dropped = Family::new(&BMP_DROPPED_TOTAL);
    for b in &status.bmp {
        let station = || vec![("station", b.station.clone())];
        bmp_up.add(station(), flag(b.up));
        for (t, n) in &b.messages {
            let mut l = station();
            l.push(("type", t.clone()));
            bmp_messages.add(l, Value::Int(*n));
        }
        bmp_dropped.add(station(), Value::Int(b.dropped));
    }
    let mut handoff = Family::new(&HANDOFF_TOTAL);
    let mut handoff_pause = Family::new(&HANDOFF_PAUSE_MILLISECONDS);
    if let Some(h) = &status.handoff {
        handoff.add(vec![("result", h.result.clone())], Value::Int(1));
        if let Some(ms) = h.pause_milliseconds {
            handoff_pause.add(Vec::new(), Value::Int(ms));
        }
    }

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
        single(&ROUTES_ADVERTISED, Value::Int(c.routes_advertised)),
        single(&ROUTES_HELD_DOWN, Value::Int(c.routes_held_down)),
        single(
            &WITHDRAWALS_ABSORBED_TOTAL,
            Value::Int(c.withdrawals_absorbed),
        ),
        single(
            &DAMPING_ABSORBED_TOTAL,
            Value::Int(c.absences_absorbed_by_damping),
        ),
        single(
            &DAMPING_SUPPRESSIONS_TOTAL,
            Value::Int(c.damping_suppressions),
        ),
        single(&RECONCILE_REPAIRS_TOTAL, Value::Int(c.reconcile_repairs)),
        single(&ROUTE_ADVERTISEMENTS_TOTAL, Value::Int(c.advertisements)),
        single(&ROUTE_WITHDRAWALS_TOTAL, Value::Int(c.withdrawals)),
        single(&WITHDRAWALS_DEFERRED, Value::Int(c.withdrawals_deferred)),
        single(
            &WITHDRAWALS_DEFERRED_TOTAL,
            Value::Int(c.withdrawals_deferred_total),
        ),
        source_healthy,
        source_synced,
        source_vips,
        single(&CONFIG_RELOAD_ERROR, flag(status.config_error.is_some())),
        handoff,
        handoff_pause,
        build_info,
        single(&UPTIME_SECONDS, Value::Int(status.uptime_seconds)),
        bmp_up,
        bmp_messages,
        bmp_dropped,
    ];
    let mut out = String::with_capacity(4096 + status.peers.len() * 2048);
    for f in &families {
        f.write(&mut out);
    }
    out
}

/// docs/src/reference/metrics.md: every family, holdfast's and the
/// process ones, with its type, labels and help.
pub fn reference() -> String {
    use crate::docs::inline;
    let mut out =
        crate::docs::header("the metric families in src/api/metrics.rs and src/api/process.rs");
    out.push_str(
        "# Metrics reference\n\n\
         `GET /metrics` on the API address (`speaker.api`, default `127.0.0.1:9179`), \
         and on `speaker.metrics` when it is set, answers in the Prometheus text \
         exposition format 0.0.4 (`Content-Type: text/plain; version=0.0.4; charset=utf-8`). \
         Every value is read from the same snapshot as `GET /v1/status`, so the two \
         always agree.\n\n\
         Per-peer series carry `peer` (the `[[peer]]` name) and `address` (the address \
         in use; for a `default-gateway` peer not yet resolved, the configured text, \
         e.g. `default-gateway (ipv4)`). Counters (`_total`) count since the daemon \
         started and do not reset when a session does. A family with no series yet \
         (no NOTIFICATION ever, no peer with BFD) is left out of the output.\n\n",
    );
    let table = |out: &mut String, families: &mut dyn Iterator<Item = &FamilyDoc>| {
        out.push_str("| metric | type | labels | meaning |\n|---|---|---|---|\n");
        for f in families {
            let labels: Vec<String> = f.labels.iter().map(|l| format!("`{l}`")).collect();
            let meaning = if f.doc.is_empty() {
                f.help.to_string()
            } else {
                format!("{} {}", f.help, f.doc)
            };
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                f.name,
                f.kind.as_str(),
                labels.join(", "),
                inline(&meaning)
            );
        }
        out.push('\n');
    };
    out.push_str("## holdfast's families\n\n");
    table(&mut out, &mut FAMILIES.iter().copied());
    out.push_str(
        "## Process families\n\n\
         The standard process metrics every Prometheus client library exports, read \
         from `/proc/self` (left out where there is no `/proc`).\n\n",
    );
    table(&mut out, &mut super::process::FAMILIES.iter());
    out
}

#[cfg(test)]
mod tests;

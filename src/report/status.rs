//! The daemon's state as the HTTP API serves it (`/v1/status`,
//! `/v1/explain/{vip}`) and as `holdfast status` / `holdfast explain` read
//! it back. Plain data, serialisable both ways.

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Status {
    pub node: String,
    pub asn: u32,
    pub router_id: String,
    pub version: String,
    pub uptime_seconds: u64,
    pub config_path: String,
    /// The last config reload that failed, if the running config is older
    /// than the file (`path:line:col: message` lines).
    pub config_error: Option<String>,
    /// The `[[node_override]]`s in force on this node and what each set.
    #[serde(default)]
    pub node_overrides: Vec<String>,
    /// The sources together: healthy only when every one is; `kind`
    /// lists their kinds (`"file"`, `"kubernetes"`, `"file+kubernetes"`).
    pub source: SourceStatus,
    /// Each source, in config order (one with a single `[source]`).
    #[serde(default)]
    pub sources: Vec<SourceStatus>,
    pub peers: Vec<PeerStatus>,
    /// The routes, or one page of them (see [`RoutePage`]).
    pub routes: Vec<RouteStatus>,
    /// Set only when `routes` is not the whole list: how many routes there
    /// are in all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_total: Option<usize>,
    /// Set only when `routes` is not the whole list: the position of its
    /// first route in the whole list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_offset: Option<usize>,
    /// Set only when `routes` is not the whole list: how many routes come
    /// after it (0 on the last page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routes_truncated: Option<usize>,
    pub counters: StabilityCounters,
    /// The probes that do not pass (not passed yet, failing, or disabled by
    /// their disable file), in VIP order, at most [`PROBES_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeStatus>,
    /// Set only when more probes do not pass than `probes` lists: how many
    /// more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes_not_listed: Option<usize>,
    /// The planned withdrawal of this node's routes, while one is under way
    /// (`holdfast drain`, or SIGTERM without graceful restart).
    #[serde(default)]
    pub drain: Option<DrainStatus>,
    /// The BMP stations (RFC 7854), in config order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bmp: Vec<BmpStatus>,
    /// How this process took over from the holdfast that ran before it
    /// with the same state directory, if it did (`holdfast run` started
    /// while another ran).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<HandoffStatus>,
}

/// One BMP station as `/metrics` shows it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BmpStatus {
    /// The `[[bmp]]` name.
    pub station: String,
    /// Connected (its Initiation written).
    pub up: bool,
    /// Messages written, by type (`route_monitoring`, `peer_up`, ...).
    pub messages: Vec<(String, u64)>,
    /// Connections dropped because the station fell behind.
    pub dropped: u64,
}

/// A hand-off this process received, in `/v1/status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct HandoffStatus {
    /// "completed": the sessions were taken over as they were; "fallback":
    /// the previous process exited by its usual path (graceful restart
    /// where the exit plan keeps the routes) and the sessions started
    /// afresh.
    pub result: String,
    /// Why it fell back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When this process took over, in seconds since the Unix epoch.
    pub at_unix_seconds: u64,
    /// How long the sessions were neither read nor written (a completed
    /// hand-off), in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_milliseconds: Option<u64>,
}

/// `holdfast drain` / `undrain`, and the drain part of `/v1/status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct DrainStatus {
    /// "draining" (routes carry GRACEFUL_SHUTDOWN), "drained" (withdrawn)
    /// or "active".
    pub state: String,
    /// Seconds until the routes are withdrawn, while draining.
    pub seconds_left: Option<f64>,
    /// The daemon is shutting down (SIGTERM) once the drain is over.
    pub exiting: bool,
}

/// The most routes one `/v1/status` answer lists: with 400,000 VIPs the
/// whole list was 100–150 MB per request. A route is about 300 octets of
/// JSON, so a page stays well under 1 MB.
pub const ROUTE_PAGE_MAX: usize = 1000;

/// Which routes a `/v1/status` answer lists: `limit` of them from
/// `offset`, in prefix order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoutePage {
    pub offset: usize,
    pub limit: usize,
}

impl Default for RoutePage {
    /// The first page.
    fn default() -> Self {
        RoutePage {
            offset: 0,
            limit: ROUTE_PAGE_MAX,
        }
    }
}

impl RoutePage {
    /// Every route: for callers inside the daemon, never for an answer.
    pub const ALL: RoutePage = RoutePage {
        offset: 0,
        limit: usize::MAX,
    };

    /// No route: the counts and the peers only (the status of a node
    /// costs the same with 10 routes or 100,000).
    pub const NONE: RoutePage = RoutePage {
        offset: 0,
        limit: 0,
    };

    /// The range of a list of `total` routes this page covers.
    pub fn range(&self, total: usize) -> std::ops::Range<usize> {
        let start = self.offset.min(total);
        start..start.saturating_add(self.limit).min(total)
    }

    /// Cuts a whole status down to this page, and says so in it.
    pub fn apply(&self, status: &mut Status) {
        let total = status.routes.len();
        let range = self.range(total);
        status.routes.truncate(range.end);
        status.routes.drain(..range.start);
        self.mark(status, total);
    }

    /// Records in a status whose `routes` hold this page of `total`
    /// routes where the page lies, unless it is the whole list.
    pub fn mark(&self, status: &mut Status, total: usize) {
        let range = self.range(total);
        if range.start == 0 && range.end == total {
            return;
        }
        status.routes_total = Some(total);
        status.routes_offset = Some(range.start);
        status.routes_truncated = Some(total - range.end);
    }
}

/// The most probes one `/v1/status` answer lists.
pub const PROBES_LISTED: usize = 100;

/// A probe that does not pass, and why.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProbeStatus {
    /// The probed VIP.
    pub vip: String,
    /// What is probed: "port 443" (a TCP connect to the VIP) or the URL.
    pub target: String,
    /// "not-passed-yet" (never advertised so far), "failing" (withdrawn,
    /// or degraded) or "disabled" (its disable file exists).
    pub state: String,
    /// Probes failed in a row.
    pub consecutive_failures: u32,
    /// The last failure, in words ("HTTP 503 Service Unavailable").
    pub last_error: Option<String>,
}

/// A runtime route (`holdfast route announce`): what the API takes and
/// lists, and what the state directory keeps. The attributes are those a
/// Service may ask for with its annotations, and as for a Service, the
/// advertisement must let each through (`allow_service_attributes`).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct RuntimeRoute {
    /// `198.51.100.10/32`, `198.51.100.0/24`, `2001:db8::/64`.
    pub prefix: String,
    /// The `[[advertisement]]` it goes out under; the first one if none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertisement: Option<String>,
    /// Added to the advertisement's COMMUNITIES (RFC 1997).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub communities: Vec<String>,
    /// Added to the advertisement's LARGE_COMMUNITY (RFC 8092).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub large_communities: Vec<String>,
    /// Replaces the advertisement's LOCAL_PREF (iBGP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_pref: Option<u32>,
    /// Replaces the advertisement's MULTI_EXIT_DISC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub med: Option<u32>,
    /// Our AS this many more times in the AS_PATH (eBGP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_path_prepend: Option<u8>,
}

/// A change to the runtime routes the API asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeChange {
    Announce(RuntimeRoute),
    Withdraw(String),
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SourceStatus {
    /// Its `name` (the kind unless the config names it; for the sources
    /// together, their names joined with `+`).
    #[serde(default)]
    pub name: String,
    /// "file" or "kubernetes".
    pub kind: String,
    pub healthy: bool,
    pub synced: bool,
    pub error: Option<String>,
    /// VIPs the source currently wants advertised.
    pub vips: usize,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct NotificationCount {
    pub code: u8,
    pub subcode: u8,
    /// "Cease / Administrative Shutdown".
    pub name: String,
    pub count: u64,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerStatus {
    pub name: String,
    /// The address in use (resolved, for `default-gateway`), if any.
    pub address: Option<String>,
    /// As configured: an address or "default-gateway (ipv4)".
    pub configured_address: String,
    /// The configured AS, else (`"external"` / `"internal"`) the one the
    /// last OPEN gave; 0 before any.
    pub asn: u32,
    /// `asn` as configured: a number, "external" or "internal".
    #[serde(default)]
    pub configured_asn: String,
    /// The AS the peer's last OPEN gave (RFC 4271 §4.2, RFC 6793).
    #[serde(default)]
    pub peer_asn: Option<u32>,
    /// The AS presented to this peer instead of the speaker's (`local_asn`).
    #[serde(default)]
    pub local_asn: Option<u32>,
    /// RFC 4271 state: Idle, Connect, Active, OpenSent, OpenConfirm,
    /// Established.
    pub state: String,
    /// Seconds in the current state.
    pub state_seconds: u64,
    /// Seconds Established, when it is.
    pub uptime_seconds: Option<u64>,
    /// Seconds since the session last left Established, when it is not
    /// Established now and once was (FRR's Up/Down column shows this for a
    /// peer that is down). None: never Established.
    #[serde(default)]
    pub down_seconds: Option<u64>,
    // The counters below count since the daemon started and do not reset
    // with a session: /metrics exposes them as Prometheus counters, which
    // must only go up while the process lives.
    pub established_transitions: u64,
    pub messages_sent: u64,
    pub messages_received: u64,
    pub updates_sent: u64,
    pub updates_received: u64,
    /// NLRI announced to us in received UPDATEs.
    pub prefixes_received: u64,
    pub prefixes_advertised_ipv4: u64,
    pub prefixes_advertised_ipv6: u64,
    pub notifications_sent: Vec<NotificationCount>,
    pub notifications_received: Vec<NotificationCount>,
    /// Why the session last went down or failed, in words.
    pub last_error: Option<String>,
    pub hold_time: Option<u16>,
    pub keepalive_seconds: Option<f64>,
    pub families: Vec<String>,
    pub graceful_restart: bool,
    pub peer_hostname: Option<String>,
    pub local_address: Option<String>,
    pub bfd: Option<BfdStatus>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BfdStatus {
    /// AdminDown, Down, Init, Up (RFC 5880 §4.1).
    pub state: String,
    pub state_seconds: u64,
    pub detection_time_ms: Option<u64>,
    pub last_diagnostic: Option<String>,
    /// Received packets discarded since the session started, by reason:
    /// failed authentication (RFC 5880 §6.7) or a full inbox.
    #[serde(default)]
    pub discarded: std::collections::BTreeMap<String, u64>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct RouteStatus {
    /// "198.51.100.10/32".
    pub prefix: String,
    /// advertised | pending | held-down | damped | draining
    pub state: String,
    /// Seconds until the state ends by itself (a held-down route's
    /// withdrawal), when a timer runs.
    pub seconds_left: Option<f64>,
    /// Why the VIP is absent (vanished, no-local-endpoint, deleted,
    /// drained, probe-failed),
    /// for routes that are not simply advertised.
    pub absence: Option<String>,
    pub service: Option<String>,
    pub advertisements: Vec<String>,
    /// Peers the route is in the Adj-RIB-Out of.
    pub peers: Vec<String>,
    pub figure_of_merit: Option<f64>,
    /// The probe steers the route: "degraded" (announced with the
    /// advertisement's degraded attributes) or "disabled: FILE exists"
    /// (the probe's disable file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steering: Option<String>,
    /// Endpoint units in the route's link-bandwidth community.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_bandwidth: Option<u32>,
    /// The source the VIP comes from (its `name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct StabilityCounters {
    pub routes_advertised: u64,
    pub routes_held_down: u64,
    /// Of `routes_held_down`, the routes damping keeps advertised past
    /// their own timer now (the routes whose state is `damped`).
    #[serde(default)]
    pub routes_damped: u64,
    /// Vanishings that ended in a reappearance inside the hold-down:
    /// withdrawals the routers never saw.
    pub withdrawals_absorbed: u64,
    pub absences_absorbed_by_damping: u64,
    pub damping_suppressions: u64,
    pub advertisements: u64,
    pub withdrawals: u64,
    /// Routes and VIPs the periodic reconcile (`[source] resync`) found
    /// wrong and repaired.
    #[serde(default)]
    pub reconcile_repairs: u64,
    /// Withdrawals the mass-withdrawal guard holds back now.
    #[serde(default)]
    pub withdrawals_deferred: u64,
    /// Withdrawals the guard has held back since the daemon started.
    #[serde(default)]
    pub withdrawals_deferred_total: u64,
}

/// `/v1/explain/{vip}`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Explanation {
    pub vip: String,
    pub advertised: bool,
    /// One sentence: "198.51.100.10 is advertised to tor1 and tor2."
    pub summary: String,
    /// Every fact behind it, in plain words.
    pub reasons: Vec<String>,
    pub peers: Vec<PeerExplanation>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct PeerExplanation {
    pub peer: String,
    pub advertised: bool,
    pub why: String,
}

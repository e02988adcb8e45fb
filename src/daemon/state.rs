//! What the daemon shows: `/v1/status`, `/v1/explain/{vip}` and
//! `/metrics`, built by the main loop from the values it owns at the
//! moment a request comes ([`Facts`]); `/readyz`, answered by the API from
//! a value the main loop publishes ([`Published`]); and the words of
//! `holdfast explain`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::fsm::Stats;
use ipnet::IpNet;
use tokio::sync::watch;

use crate::config::{Config, Source};
use crate::model::Absence;
use crate::model::Route;
use crate::model::SourceSnapshot;
use crate::report::node_status::NodeRoutes;
use crate::report::status::{
    Explanation, NotificationCount, PeerExplanation, PeerStatus, ProbeStatus, RoutePage,
    RouteStatus, SourceStatus, StabilityCounters, Status,
};
use crate::routes::drain::Control;
use crate::routes::{ProbeView, Probing};
use crate::session::{PeerRuntime, PeerSpec};
use crate::stability::{KeyState, Stability};

/// One peer as a request sees it.
#[derive(Clone)]
pub struct PeerView {
    pub spec: Option<PeerSpec>,
    pub name: String,
    pub configured: String,
    /// Its session's status as the session last published it (taken from
    /// the session's watch when the request is answered).
    pub runtime: Option<PeerRuntime>,
    /// Why there is no session (a default gateway not found).
    pub waiting: Option<String>,
    /// Its BFD session's state, when it has one.
    pub bfd: Option<crate::bfd::driver::BfdView>,
    /// The counters of this peer's earlier sessions (reset by a reload or
    /// a default-gateway change): counters belong to the peer's name, not
    /// to one session task.
    pub carried: Stats,
}

/// `into += more`, counter by counter.
pub(super) fn add_stats(into: &mut Stats, more: &Stats) {
    into.messages_received += more.messages_received;
    into.messages_sent += more.messages_sent;
    into.updates_received += more.updates_received;
    into.updates_sent += more.updates_sent;
    into.prefixes_received += more.prefixes_received;
    into.established_transitions += more.established_transitions;
    for (into, more) in [
        (&mut into.notifications_sent, &more.notifications_sent),
        (
            &mut into.notifications_received,
            &more.notifications_received,
        ),
    ] {
        for &(code, subcode, n) in more {
            match into.iter_mut().find(|e| e.0 == code && e.1 == subcode) {
                Some(e) => e.2 += n,
                None => into.push((code, subcode, n)),
            }
        }
    }
}

/// A route as the stability layer holds it.
#[derive(Clone, Debug)]
pub struct RouteView {
    pub prefix: IpNet,
    pub state: KeyState,
    pub route: Option<Route>,
    pub figure_of_merit: Option<f64>,
    /// Its withdrawal is due but the mass-withdrawal guard holds it back.
    pub deferred: bool,
}

/// Names joined with `+`.
fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join("+")
}

/// How the probe steers its VIP, for `holdfast status`.
fn steering_word(p: &ProbeView) -> Option<String> {
    if let Some(file) = &p.disabled {
        return Some(format!("disabled: {} exists", file.display()));
    }
    (p.verdict == crate::probe::Verdict::Failing
        && p.on_failure == crate::config::OnFailure::Degrade)
        .then(|| "degraded".to_string())
}

/// Everything `status_page()` and `explain()` read: the main loop's own
/// values, borrowed while it answers one request, so the answer is the
/// state at that moment. Nothing is copied ahead of a request (a copy of
/// the routes kept up to date for the views was 10 MB with 100k VIPs), and
/// nothing here is shared with another task: the API gets the answer as a
/// value.
pub struct Facts<'a> {
    pub config: &'a Config,
    pub config_error: Option<&'a str>,
    pub node: &'a str,
    pub router_id: String,
    pub started: Instant,
    pub snapshot: &'a SourceSnapshot,
    /// The routes core's stability layer.
    pub stability: &'a Stability<IpNet, Route>,
    /// The routes core's probes, whose views are built from their
    /// trackers as a route row or an explanation asks for one.
    pub probes: &'a BTreeMap<IpAddr, Probing>,
    /// The routes core's drain control.
    pub drain: &'a Control,
    pub peers: Vec<PeerView>,
    /// Routes and VIPs the periodic reconciles repaired.
    pub reconcile_repairs: u64,
    /// The BMP stations' counters.
    pub bmp: Vec<crate::report::status::BmpStatus>,
    /// The hand-off this process received, if any.
    pub handoff: Option<&'a crate::report::status::HandoffStatus>,
}

/// What the API answers without asking the main loop: `/readyz` (cheap,
/// and answered while the loop is busy) and the API token. The main loop
/// publishes it on a `watch` whenever one of its parts changes; the peers'
/// parts are the sessions' own status channels, read when `/readyz` is
/// asked.
#[derive(Clone)]
pub struct Published {
    pub config: Arc<Config>,
    pub started: Instant,
    /// The snapshot in force: whether it is the source's first complete
    /// view, and the source's error.
    pub synced: bool,
    pub source_error: Option<String>,
    /// Each configured peer that exists, by name, with its session's
    /// status channel (none while it waits for a gateway or BFD).
    pub peers: Vec<(String, Option<watch::Receiver<PeerRuntime>>)>,
}

impl Published {
    /// What is published before the first snapshot and the first session.
    pub fn initial(config: Arc<Config>, started: Instant) -> Self {
        Published {
            config,
            started,
            synced: false,
            source_error: None,
            peers: Vec::new(),
        }
    }

    /// Whether `self` says what `other` says (the same config, the same
    /// source state, the same sessions): the main loop publishes only a
    /// change.
    pub fn same(&self, other: &Published) -> bool {
        Arc::ptr_eq(&self.config, &other.config)
            && self.started == other.started
            && self.synced == other.synced
            && self.source_error == other.source_error
            && self.peers.len() == other.peers.len()
            && self.peers.iter().zip(&other.peers).all(|(a, b)| {
                a.0 == b.0
                    && match (&a.1, &b.1) {
                        (Some(a), Some(b)) => a.same_channel(b),
                        (None, None) => true,
                        _ => false,
                    }
            })
    }

    /// The readiness rule ([`readiness`]) applied to the daemon's state
    /// now: the peers' sessions as they last published themselves.
    pub fn readiness(&self) -> Readiness {
        let peers: Vec<PeerReadiness> = self
            .peers
            .iter()
            .map(|(name, status)| {
                let rt = status.as_ref().map(|rx| {
                    let rt = rx.borrow();
                    (
                        rt.state == bgp_proto::fsm::State::Established,
                        rt.end_of_rib_sent,
                    )
                });
                PeerReadiness {
                    name: name.clone(),
                    established: rt.is_some_and(|r| r.0),
                    end_of_rib_sent: rt.is_some_and(|r| r.1),
                }
            })
            .collect();
        readiness(
            self.synced,
            self.source_error.as_deref(),
            &peers,
            Instant::now().saturating_duration_since(self.started),
            peer_wait(&self.config),
        )
    }

    /// The token a TCP client must send for a state-changing call, as the
    /// running config has it.
    pub fn api_token(&self) -> Option<Vec<u8>> {
        let token = self.config.speaker.api_token.as_ref()?.token.as_ref()?;
        Some(token.as_bytes().to_vec())
    }
}

fn absence_word(a: Absence) -> &'static str {
    match a {
        Absence::Vanished => "vanished",
        Absence::NoLocalEndpoint => "no-local-endpoint",
        Absence::Deleted => "deleted",
        Absence::Drained => "drained",
        Absence::ProbeFailed => "probe-failed",
    }
}

fn secs_until(t: Option<Instant>, now: Instant) -> Option<f64> {
    t.map(|t| t.saturating_duration_since(now).as_secs_f64())
}

fn notifications(list: &[(u8, u8, u64)]) -> Vec<NotificationCount> {
    list.iter()
        .map(|&(code, subcode, count)| NotificationCount {
            code,
            subcode,
            name: bgp_proto::notification::describe_code(code, subcode),
            count,
        })
        .collect()
}

fn peer_status(p: &PeerView, now: Instant) -> PeerStatus {
    let mut s = PeerStatus {
        name: p.name.clone(),
        configured_address: p.configured.clone(),
        asn: p
            .spec
            .as_ref()
            .and_then(|s| s.peer.asn.exact())
            .unwrap_or(0),
        address: p.spec.as_ref().map(|s| s.display_address()),
        state: "Idle".into(),
        last_error: p.waiting.clone(),
        ..PeerStatus::default()
    };
    if let Some(spec) = &p.spec {
        s.configured_asn = spec.peer.asn.to_string();
        s.local_asn = spec.peer.local_asn;
    }
    if let Some(view) = &p.bfd {
        let b = view.borrow().clone();
        s.bfd = Some(crate::report::status::BfdStatus {
            discarded: view
                .counters()
                .discarded()
                .into_iter()
                .map(|(reason, n)| (reason.to_string(), n))
                .collect(),
            state: b.state.to_string(),
            state_seconds: now.saturating_duration_since(b.since).as_secs(),
            detection_time_ms: b.detection_time.map(|d| d.as_millis() as u64),
            last_diagnostic: (b.diag != crate::bfd::packet::Diag::None)
                .then(|| b.diag.as_str().to_string()),
        });
    }
    let mut stats = p.carried.clone();
    let rt = p.runtime.as_ref();
    if let Some(rt) = rt {
        add_stats(&mut stats, &rt.stats);
    }
    s.established_transitions = stats.established_transitions;
    s.messages_sent = stats.messages_sent;
    s.messages_received = stats.messages_received;
    s.updates_sent = stats.updates_sent;
    s.updates_received = stats.updates_received;
    s.prefixes_received = stats.prefixes_received;
    s.notifications_sent = notifications(&stats.notifications_sent);
    s.notifications_received = notifications(&stats.notifications_received);
    let Some(rt) = rt else { return s };
    s.state = rt.state.to_string();
    s.state_seconds = now.saturating_duration_since(rt.state_since).as_secs();
    s.uptime_seconds = rt
        .established_since
        .map(|t| now.saturating_duration_since(t).as_secs());
    // Down since it last left Established; not while it is Established.
    s.down_seconds = rt
        .down_since
        .filter(|_| s.uptime_seconds.is_none())
        .map(|t| now.saturating_duration_since(t).as_secs());
    // Kept by the session as its Adj-RIB-Out changes: a scrape does not
    // count the table.
    let (ipv4, ipv6) = rt.advertised_counts;
    s.prefixes_advertised_ipv4 = ipv4 as u64;
    s.prefixes_advertised_ipv6 = ipv6 as u64;
    s.last_error = rt.last_error.clone().or(s.last_error);
    s.local_address = rt.local_address.map(|a| a.ip().to_string());
    if let Some(n) = &rt.negotiated {
        s.hold_time = Some(n.hold_time);
        s.keepalive_seconds = Some(n.keepalive.as_secs_f64());
        s.families = n.families.iter().map(|f| f.name()).collect();
        s.graceful_restart = n.peer_graceful_restart.is_some()
            && p.spec
                .as_ref()
                .is_some_and(|s| s.peer.graceful_restart.enabled);
        s.peer_hostname = n.peer_hostname.clone();
        // The AS the peer's OPEN gave: what "external" / "internal" peers
        // turned out to be.
        s.peer_asn = Some(n.peer_asn);
        if s.asn == 0 {
            s.asn = n.peer_asn;
        }
    }
    s
}

/// One peer as readiness sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerReadiness {
    pub name: String,
    pub established: bool,
    /// The whole table and End-of-RIB went out on the current session.
    pub end_of_rib_sent: bool,
}

/// What `/readyz` answers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready; with a note when it did not wait for every peer.
    Ready(Option<String>),
    NotReady(String),
}

/// The shortest wait for the peers before readiness stops waiting for
/// those that are down.
pub const MIN_PEER_WAIT: Duration = Duration::from_secs(10);

/// How long after start readiness waits for every peer to come up: two
/// connect retries of the slowest peer (the first attempt at start, one
/// retry), at least [`MIN_PEER_WAIT`].
pub fn peer_wait(config: &Config) -> Duration {
    config
        .peers
        .iter()
        .map(|p| p.connect_retry * 2)
        .max()
        .unwrap_or_default()
        .max(MIN_PEER_WAIT)
}

fn names(peers: &[&PeerReadiness]) -> String {
    peers
        .iter()
        .map(|p| p.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The readiness rule. A rolling update moves on to the next node only when
/// this one is ready, so ready means the routers have this node's routes:
///
/// 1. the source has delivered its first complete view;
/// 2. every Established peer has been sent the whole table and End-of-RIB
///    (RFC 4724 §4.1 — so a restarted node's peers have dropped their stale
///    routes and hold the fresh ones);
/// 3. every configured peer is Established — or `peer_wait` has passed
///    since start: a peer still down then (its router in maintenance) no
///    longer blocks the rollout, and the answer says so.
pub fn readiness(
    source_synced: bool,
    source_error: Option<&str>,
    peers: &[PeerReadiness],
    since_start: Duration,
    peer_wait: Duration,
) -> Readiness {
    if !source_synced {
        return Readiness::NotReady(format!(
            "waiting for the source's first complete view{}",
            source_error.map(|e| format!(": {e}")).unwrap_or_default()
        ));
    }
    let syncing: Vec<&PeerReadiness> = peers
        .iter()
        .filter(|p| p.established && !p.end_of_rib_sent)
        .collect();
    if !syncing.is_empty() {
        return Readiness::NotReady(format!(
            "peer{} {} Established, not yet sent the whole table and End-of-RIB",
            if syncing.len() == 1 { "" } else { "s" },
            names(&syncing)
        ));
    }
    let down: Vec<&PeerReadiness> = peers.iter().filter(|p| !p.established).collect();
    if down.is_empty() {
        return Readiness::Ready(None);
    }
    let wait = crate::config::format_duration(peer_wait);
    let what = format!(
        "peer{} {} not Established",
        if down.len() == 1 { "" } else { "s" },
        names(&down)
    );
    if since_start < peer_wait {
        return Readiness::NotReady(format!(
            "{what} ({:.0}s since start; waiting up to {wait} before not blocking the rollout)",
            since_start.as_secs_f64()
        ));
    }
    Readiness::Ready(Some(if down.len() == peers.len() {
        format!("no peer established after {wait}; not blocking the rollout")
    } else {
        format!("{what} after {wait}; not blocking the rollout")
    }))
}

impl Facts<'_> {
    fn advertised_to(&self, prefix: &IpNet) -> Vec<String> {
        self.peers
            .iter()
            .filter(|p| {
                p.runtime
                    .as_ref()
                    .is_some_and(|rt| rt.advertised.contains_key(prefix))
            })
            .map(|p| p.name.clone())
            .collect()
    }

    /// The route part of this node's `BGPNodeStatus`: each prefix in some
    /// peer's Adj-RIB-Out with those peers, the routes the stability layer
    /// holds that are not simply advertised, and the VIPs the source has
    /// and this node does not want, with why. One walk of each peer's
    /// table and of the stability table; no route rows built.
    pub fn node_routes(&self) -> NodeRoutes {
        let mut announced: BTreeMap<IpNet, Vec<u16>> = BTreeMap::new();
        for (i, p) in self.peers.iter().enumerate() {
            let Some(rt) = p.runtime.as_ref() else {
                continue;
            };
            let i = u16::try_from(i).unwrap_or(u16::MAX);
            for prefix in rt.advertised.keys() {
                announced.entry(*prefix).or_default().push(i);
            }
        }
        let st = self.stability;
        let mut withheld: BTreeMap<IpNet, (String, Vec<String>)> = BTreeMap::new();
        for (prefix, state) in st.states() {
            let word = match state {
                _ if st.deferred(prefix) => "deferred",
                KeyState::Advertised => continue,
                KeyState::PendingAdvertise { .. } => "pending",
                KeyState::HeldDown { .. } => "held-down",
                KeyState::Damped { .. } => "damped",
                KeyState::Draining { .. } => "draining",
            };
            let reasons = state
                .absence()
                .map(|a| vec![absence_word(a).to_string()])
                .unwrap_or_default();
            withheld.insert(*prefix, (word.to_string(), reasons));
        }
        for (ip, why) in self.snapshot.excluded.iter() {
            withheld
                .entry(IpNet::from(*ip))
                .or_insert_with(|| ("not-selected".to_string(), why.clone()));
        }
        NodeRoutes {
            peers: self.peers.iter().map(|p| p.name.clone()).collect(),
            announced: announced.into_iter().collect(),
            withheld: withheld
                .into_iter()
                .map(|(p, (state, why))| (p, state, why))
                .collect(),
        }
    }

    #[cfg(test)]
    pub fn status(&self) -> Status {
        self.status_page(RoutePage::ALL)
    }

    /// Each configured source's state: from the combined snapshot with
    /// several, from the snapshot itself with one.
    fn source_statuses(&self) -> Vec<SourceStatus> {
        if !self.snapshot.sources.is_empty() {
            return self
                .snapshot
                .sources
                .iter()
                .map(|s| SourceStatus {
                    name: s.name.clone(),
                    kind: s.kind.to_string(),
                    healthy: s.healthy,
                    synced: s.synced,
                    error: s.error.clone(),
                    vips: s.vips,
                })
                .collect();
        }
        self.config
            .sources
            .iter()
            .map(|s| SourceStatus {
                name: s.name.clone(),
                kind: s.kind.kind_name().to_string(),
                healthy: self.snapshot.healthy,
                synced: self.snapshot.synced,
                error: self.snapshot.error.clone(),
                vips: self.snapshot.vips.len(),
            })
            .collect()
    }

    /// How `explain` names source `id`: `file`, `Kubernetes`, or with a
    /// name of its own, `file "apiserver"`.
    fn source_words(&self, id: crate::model::SourceId) -> String {
        let Some(s) = self.config.sources.get(usize::from(id.0)) else {
            return self.config.source_name(id).to_string();
        };
        let kind = match s.kind {
            Source::File { .. } => "file",
            Source::Kubernetes(_) => "Kubernetes",
        };
        if s.name == s.kind.kind_name() {
            kind.to_string()
        } else {
            format!("{kind} \"{}\"", s.name)
        }
    }

    /// The status with one page of the routes: only those are looked up
    /// in the peers' Adj-RIBs-Out and turned into JSON-ready rows (with
    /// 400,000 VIPs, every route for every request was 100–150 MB). The
    /// totals are the counts the stability layer keeps, so an empty page
    /// (`/metrics`) costs the same with 10 routes or 100,000.
    pub fn status_page(&self, page: RoutePage) -> Status {
        let now = Instant::now();
        let st = self.stability;
        let total = st.shown();
        let range = page.range(total);
        let views = if range.is_empty() {
            Vec::new()
        } else {
            route_views(st, range)
        };
        let (c, on_wire) = (st.counters(), st.on_wire());
        let routes = views
            .iter()
            .map(|r| {
                let (state, left) = match &r.state {
                    _ if r.deferred => ("deferred", None),
                    KeyState::Advertised => ("advertised", None),
                    KeyState::PendingAdvertise { until } => ("pending", secs_until(*until, now)),
                    KeyState::HeldDown { until, .. } => ("held-down", secs_until(*until, now)),
                    KeyState::Damped { until_estimate, .. } => {
                        ("damped", secs_until(*until_estimate, now))
                    }
                    KeyState::Draining { until, .. } => ("draining", secs_until(*until, now)),
                };
                let ip = r.prefix.addr();
                let route = r
                    .route
                    .clone()
                    .or_else(|| self.snapshot.vips.get(&ip).map(|v| v.route.clone()));
                RouteStatus {
                    prefix: r.prefix.to_string(),
                    state: state.into(),
                    seconds_left: left,
                    absence: r.state.absence().map(|a| absence_word(a).to_string()),
                    service: route
                        .as_ref()
                        .and_then(|r| r.service.as_deref().map(str::to_string)),
                    advertisements: route
                        .as_ref()
                        .map(|r| r.advertisements.iter().cloned().collect())
                        .unwrap_or_default(),
                    peers: self.advertised_to(&r.prefix),
                    figure_of_merit: r.figure_of_merit.filter(|f| *f > 0.0),
                    steering: self.probes.get(&ip).and_then(|p| steering_word(&p.view())),
                    link_bandwidth: r
                        .route
                        .as_ref()
                        .and_then(|r| r.attributes.as_ref()?.endpoints),
                    source: route.map(|r| self.config.source_name(r.source).to_string()),
                }
            })
            .collect();
        let (probes, probes_not_listed) = self.probes_not_passing();
        let mut status = Status {
            node: self.node.to_string(),
            asn: self.config.speaker.asn,
            router_id: self.router_id.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_seconds: now.saturating_duration_since(self.started).as_secs(),
            config_path: self.config.path.display().to_string(),
            config_error: self.config_error.map(str::to_string),
            handoff: self.handoff.cloned(),
            node_overrides: self
                .config
                .applied_overrides
                .iter()
                .map(ToString::to_string)
                .collect(),
            source: SourceStatus {
                name: join(self.config.sources.iter().map(|s| s.name.as_str())),
                kind: join(self.config.sources.iter().map(|s| s.kind.kind_name())),
                healthy: self.snapshot.healthy,
                synced: self.snapshot.synced,
                error: self.snapshot.error.clone(),
                vips: self.snapshot.vips.len(),
            },
            sources: self.source_statuses(),
            peers: self.peers.iter().map(|p| peer_status(p, now)).collect(),
            routes,
            routes_total: None,
            routes_offset: None,
            routes_truncated: None,
            // While there is one.
            drain: (self.drain.drain.draining() || self.drain.exiting)
                .then(|| self.drain.status(now)),
            counters: StabilityCounters {
                routes_advertised: on_wire as u64,
                routes_held_down: c.held_down,
                routes_damped: c.damped,
                withdrawals_absorbed: c.absorbed_by_hold_down,
                absences_absorbed_by_damping: c.absorbed_by_damping,
                damping_suppressions: c.suppressions,
                advertisements: c.advertisements,
                withdrawals: c.withdrawals,
                reconcile_repairs: self.reconcile_repairs,
                withdrawals_deferred: c.withdrawals_deferred,
                withdrawals_deferred_total: c.withdrawals_deferred_total,
            },
            probes,
            probes_not_listed,
            bmp: self.bmp.clone(),
        };
        page.mark(&mut status, total);
        status
    }

    /// The probes that do not pass, for the status, at most
    /// [`PROBES_LISTED`](crate::report::status::PROBES_LISTED), and how
    /// many more there are.
    fn probes_not_passing(&self) -> (Vec<ProbeStatus>, Option<usize>) {
        use crate::probe::Verdict;
        let mut not_passing = self
            .probes
            .iter()
            .filter(|(_, p)| p.tracker.verdict != Verdict::Passing || p.tracker.disabled);
        let listed: Vec<ProbeStatus> = not_passing
            .by_ref()
            .take(crate::report::status::PROBES_LISTED)
            .map(|(ip, p)| ProbeStatus {
                vip: ip.to_string(),
                target: p.config.target.to_string(),
                state: if p.tracker.disabled {
                    "disabled"
                } else if p.tracker.verdict == Verdict::Failing {
                    "failing"
                } else {
                    "not-passed-yet"
                }
                .to_string(),
                consecutive_failures: p.tracker.consecutive_failures(),
                last_error: p.tracker.last_error.clone(),
            })
            .collect();
        let more = not_passing.count();
        (listed, (more > 0).then_some(more))
    }

    /// Why this node does or doesn't advertise `vip`, in plain words.
    /// `from_source`: the source's own account of it (the Kubernetes
    /// source's rules), when the source gives one.
    pub fn explain(&self, ip: IpAddr, from_source: Option<Vec<String>>) -> Explanation {
        // An aggregated VIP's fate is its aggregate's (crate::routes).
        let (prefix, placed) = crate::routes::explain(self.config, self.snapshot, ip);
        let now = Instant::now();
        let mut reasons = Vec::new();
        let (route_owned, guard) = (
            route_view(self.stability, &prefix),
            self.stability.guard_view(),
        );
        let route = route_owned.as_ref();
        let at_source = self.snapshot.vips.get(&ip);
        // The Kubernetes source's account speaks for its own VIPs and for
        // those no source has, not for another source's.
        let kube = self
            .config
            .sources
            .iter()
            .position(|s| matches!(s.kind, Source::Kubernetes(_)))
            .map(|i| crate::model::SourceId(i as u8));
        let from_source =
            from_source.filter(|_| at_source.is_none_or(|v| Some(v.route.source) == kube));
        let source_explains = from_source.is_some();
        let from_source = from_source.filter(|l| !l.is_empty());
        match at_source {
            _ if from_source.is_some() => reasons.extend(from_source.into_iter().flatten()),
            Some(v) => reasons.push(format!(
                "the {} source has it{}, under advertisement{} {}",
                self.source_words(v.route.source),
                v.route
                    .service
                    .as_ref()
                    .map(|s| format!(" (Service {s})"))
                    .unwrap_or_default(),
                if v.route.advertisements.len() == 1 {
                    ""
                } else {
                    "s"
                },
                v.route
                    .advertisements
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => reasons.push("the source does not have it".to_string()),
        }
        reasons.extend(placed);
        if !source_explains {
            for why in self.snapshot.excluded.get(&ip).into_iter().flatten() {
                reasons.push(why.clone());
            }
        }
        if let Some(p) = self.probes.get(&ip).map(Probing::view) {
            reasons.push(match p.verdict {
                crate::probe::Verdict::Passing => format!("its {} passes", p.target.describe()),
                crate::probe::Verdict::Unknown => format!(
                    "its {} has not succeeded yet{}: not advertised until it does",
                    p.target.describe(),
                    p.error
                        .as_ref()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ),
                crate::probe::Verdict::Failing => {
                    crate::probe::explain_failing(crate::probe::Failing {
                        target: &p.target,
                        failures: p.failures,
                        fail_after: p.fail_after,
                        error: p.error.as_deref(),
                        on_failure: p.on_failure,
                        disabled: p.disabled.as_deref(),
                    })
                }
            });
        }
        // Per-node values decide the AS, router ID and peer addresses the
        // route goes out with.
        for o in &self.config.applied_overrides {
            reasons.push(format!("this node's config has {o}"));
        }
        if !self.snapshot.healthy && self.snapshot.sources.is_empty() {
            reasons.push(format!(
                "the source is unhealthy ({}): the last known routes stand and nothing is withdrawn",
                self.snapshot.error.as_deref().unwrap_or("no detail")
            ));
        }
        // With several sources, the health of the one the VIP is from.
        let from = at_source
            .map(|v| v.route.source)
            .or(route.and_then(|r| r.route.as_ref()).map(|r| r.source));
        if let Some(s) = from.and_then(|id| self.snapshot.sources.get(usize::from(id.0)))
            && !s.healthy
        {
            reasons.push(format!(
                "its source \"{}\" is unhealthy ({}): its last known routes stand and none of them is withdrawn; the other sources' routes follow them as usual",
                s.name,
                s.error.as_deref().unwrap_or("no detail")
            ));
        }
        match route.map(|r| &r.state) {
            Some(KeyState::Advertised) => {}
            Some(KeyState::PendingAdvertise { until }) => reasons.push(format!(
                "it is waiting out advertise_delay{}",
                secs_until(*until, now).map(|s| format!(": advertised in {s:.1}s")).unwrap_or_default()
            )),
            Some(KeyState::HeldDown { since, until }) => reasons.push(format!(
                "it vanished {:.1}s ago and is held down: still advertised{}",
                now.saturating_duration_since(*since).as_secs_f64(),
                secs_until(*until, now).map(|s| format!(", withdrawn in {s:.1}s unless it comes back")).unwrap_or_else(|| " (timer paused while the source is unhealthy)".into())
            )),
            Some(KeyState::Damped { reason, figure_of_merit, until_estimate, .. }) => reasons.push(format!(
                "{}: damping holds it advertised (figure of merit {figure_of_merit:.0}){}",
                match reason {
                    Absence::NoLocalEndpoint => "its last local endpoint keeps going and coming back",
                    _ => "it keeps flapping",
                },
                secs_until(*until_estimate, now).map(|s| format!(", until about {s:.0}s from now")).unwrap_or_default()
            )),
            Some(KeyState::Draining { reason: Absence::NoLocalEndpoint, until, .. }) => reasons.push(format!(
                "no ready local endpoint is left on this node: withdrawn after stability.local_endpoint_delay {}{}",
                crate::config::format_duration(self.config.stability.local_endpoint_delay),
                secs_until(*until, now).map(|s| format!(", in {s:.1}s")).unwrap_or_default()
            )),
            Some(KeyState::Draining { reason, until, .. }) => reasons.push(format!(
                "it is going away ({}){}",
                absence_word(*reason),
                secs_until(*until, now).map(|s| format!(": withdrawn in {s:.1}s")).unwrap_or_default()
            )),
            None if at_source.is_some() => reasons.push("it is not in the routing table yet".into()),
            None => {}
        }
        if route.is_some_and(|r| r.deferred)
            && let Some(g) = guard
        {
            reasons.push(guard_words(&g, now));
        }
        let advertised_to = self.advertised_to(&prefix);
        let ads: Vec<String> = route
            .and_then(|r| r.route.as_ref())
            .map(|r| r.advertisements.iter().cloned().collect())
            .or_else(|| at_source.map(|v| v.route.advertisements.iter().cloned().collect()))
            .unwrap_or_default();
        // The tenant gate and the peer's export policy (RFC 4271 §9.1.3):
        // which rule did what, in the words of `speaker::export`.
        let held = route
            .and_then(|r| r.route.as_ref())
            .or_else(|| at_source.map(|v| &v.route));
        let export = |name: &str| -> Option<(bool, String)> {
            let peer = self.config.peer(name)?;
            let v = crate::speaker::export_verdict(self.config, peer, &prefix, held?)?;
            let words = crate::speaker::export::describe(peer, &v);
            (!words.is_empty()).then_some((v.attrs.is_some(), words))
        };
        let peers = self
            .peers
            .iter()
            .map(|p| {
                let sent = advertised_to.contains(&p.name);
                let export = export(&p.name);
                let why = if sent {
                    match &export {
                        Some((_, words)) => format!("advertised: {words}"),
                        None => "advertised".to_string(),
                    }
                } else if let Some((false, words)) = &export {
                    format!("not advertised: {words}")
                } else if route.is_none() {
                    "not advertised: no route".into()
                } else if !self.config.advertisements.iter().filter(|a| ads.contains(&a.name)).any(|a| a.applies_to_peer(&p.name)) {
                    format!("not advertised: advertisement{} {} not for this peer", if ads.len() == 1 { "" } else { "s" }, ads.join(", "))
                } else {
                    let state = p.runtime.as_ref().map(|rt| rt.state.to_string());
                    let bfd_down = p.bfd.as_ref().map(|b| b.borrow().clone()).filter(|b| b.state != crate::bfd::packet::State::Up);
                    if let Some(b) = bfd_down {
                        return PeerExplanation {
                            peer: p.name.clone(),
                            advertised: false,
                            why: format!("not advertised: BFD is {} ({}), and the BGP session waits for it", b.state, b.diag.as_str()),
                        };
                    }
                    match state.as_deref() {
                        Some("Established") => "not advertised: the session has not negotiated this address family, or has no next hop of it".into(),
                        Some(s) => format!("not advertised: the session is {s}, not Established"),
                        None => format!("not advertised: {}", p.waiting.as_deref().unwrap_or("no session")),
                    }
                };
                PeerExplanation {
                    peer: p.name.clone(),
                    advertised: sent,
                    why,
                }
            })
            .collect();
        let advertised = !advertised_to.is_empty();
        let summary = if advertised {
            format!("{ip} is advertised to {}.", advertised_to.join(", "))
        } else if route.is_some() {
            format!("{ip} is in the routing table but no peer has it.")
        } else {
            format!("{ip} is not advertised by {}.", self.node)
        };
        let d = self.drain.status(now);
        match (d.state.as_str(), d.seconds_left) {
            ("draining", Some(left)) => reasons.push(format!(
                "this node is draining: its routes carry GRACEFUL_SHUTDOWN (RFC 8326) and are withdrawn in {left:.1}s"
            )),
            ("drained", _) => reasons.push(
                "this node is drained (holdfast drain): its routes are withdrawn until holdfast undrain".to_string(),
            ),
            _ => {}
        }
        Explanation {
            vip: ip.to_string(),
            advertised,
            summary,
            reasons,
            peers,
        }
    }
}

/// One route's view, for `explain`.
fn route_view(st: &crate::stability::Stability<IpNet, Route>, prefix: &IpNet) -> Option<RouteView> {
    let state = st.state(prefix)?;
    Some(RouteView {
        prefix: *prefix,
        route: st.advertised_route(prefix).cloned(),
        figure_of_merit: st.figure_of_merit(prefix),
        deferred: st.deferred(prefix),
        state,
    })
}

/// `holdfast explain`'s line for a withdrawal the guard holds back.
fn guard_words(g: &crate::stability::GuardView, now: Instant) -> String {
    format!(
        "withdrawal deferred by the mass-withdrawal guard: {} of {} routes would go at once \
         (more than stability.max_withdraw_fraction); {} held back, released at \
         stability.withdraw_rate{}",
        g.would_go,
        g.routes,
        g.deferred,
        secs_until(g.next_release, now)
            .map(|s| format!(", the next in {s:.1}s"))
            .unwrap_or_default()
    )
}

/// The routes at positions `range` of [`crate::stability::Stability::states`].
pub fn route_views(
    st: &crate::stability::Stability<IpNet, Route>,
    range: std::ops::Range<usize>,
) -> Vec<RouteView> {
    st.states()
        .skip(range.start)
        .take(range.len())
        .map(|(k, state)| {
            let route = st.advertised_route(k).cloned();
            RouteView {
                prefix: *k,
                route,
                figure_of_merit: st.figure_of_merit(k),
                deferred: st.deferred(k),
                state,
            }
        })
        .collect()
}

#[cfg(test)]
mod readiness_tests {
    use super::*;

    fn peer(name: &str, established: bool, end_of_rib_sent: bool) -> PeerReadiness {
        PeerReadiness {
            name: name.into(),
            established,
            end_of_rib_sent,
        }
    }

    const WAIT: Duration = Duration::from_secs(60);
    const EARLY: Duration = Duration::from_secs(3);
    const LATE: Duration = Duration::from_secs(61);

    #[test]
    fn waits_for_the_source_first() {
        let r = readiness(
            false,
            Some("VIP file missing"),
            &[peer("tor1", true, true)],
            LATE,
            WAIT,
        );
        assert_eq!(
            r,
            Readiness::NotReady(
                "waiting for the source's first complete view: VIP file missing".into()
            )
        );
    }

    #[test]
    fn an_established_peer_without_end_of_rib_blocks_whatever_the_time() {
        let peers = [peer("tor1", true, true), peer("tor2", true, false)];
        for t in [EARLY, LATE, Duration::from_secs(100_000)] {
            assert_eq!(
                readiness(true, None, &peers, t, WAIT),
                Readiness::NotReady(
                    "peer tor2 Established, not yet sent the whole table and End-of-RIB".into()
                )
            );
        }
    }

    #[test]
    fn every_peer_synced_is_ready_at_once() {
        let peers = [peer("tor1", true, true), peer("tor2", true, true)];
        assert_eq!(
            readiness(true, None, &peers, EARLY, WAIT),
            Readiness::Ready(None)
        );
    }

    #[test]
    fn a_peer_down_blocks_until_the_wait_is_over_then_not() {
        let peers = [peer("tor1", true, true), peer("tor2", false, false)];
        assert_eq!(
            readiness(true, None, &peers, EARLY, WAIT),
            Readiness::NotReady(
                "peer tor2 not Established (3s since start; waiting up to 1m before not blocking the rollout)".into()
            )
        );
        assert_eq!(
            readiness(true, None, &peers, LATE, WAIT),
            Readiness::Ready(Some(
                "peer tor2 not Established after 1m; not blocking the rollout".into()
            ))
        );
    }

    #[test]
    fn no_peer_at_all_after_the_wait_does_not_block_a_rollout() {
        let peers = [peer("tor1", false, false), peer("tor2", false, false)];
        assert!(matches!(
            readiness(true, None, &peers, EARLY, WAIT),
            Readiness::NotReady(_)
        ));
        assert_eq!(
            readiness(true, None, &peers, LATE, WAIT),
            Readiness::Ready(Some(
                "no peer established after 1m; not blocking the rollout".into()
            ))
        );
    }

    #[test]
    fn the_wait_is_two_connect_retries_of_the_slowest_peer() {
        let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\
                    [[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\nconnect_retry = \"2s\"\n\
                    [[peer]]\nname = \"b\"\naddress = \"192.0.2.3\"\nasn = 65000\nconnect_retry = \"20s\"\n\
                    [source]\nkind = \"file\"\npath = \"vips.toml\"\n";
        let config = crate::config::parse(std::path::Path::new("t.toml"), text).unwrap();
        assert_eq!(peer_wait(&config), Duration::from_secs(40));
        let mut one = config.clone();
        one.peers.truncate(1);
        assert_eq!(peer_wait(&one), MIN_PEER_WAIT);
    }
}

#[cfg(test)]
mod scrape_tests {
    use super::*;

    const ROUTES: u32 = 2_000;

    fn config() -> Config {
        let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\
                    [[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
                    [[peer]]\nname = \"b\"\naddress = \"192.0.2.3\"\nasn = 65000\n\
                    [source]\nkind = \"file\"\npath = \"vips.toml\"\n";
        crate::config::parse(std::path::Path::new("t.toml"), text).unwrap()
    }

    fn prefix(i: u32) -> IpNet {
        IpNet::from(IpAddr::from(std::net::Ipv4Addr::from(0xc612_0000 + i)))
    }

    fn present(n: std::ops::Range<u32>) -> BTreeMap<IpNet, Route> {
        let ads: crate::model::Advertisements = Arc::new(["public".to_string()].into());
        n.map(|i| (prefix(i), Route::new(ads.clone(), None, None)))
            .collect()
    }

    /// What the main loop owns, for [`Facts`] to borrow.
    struct Owned {
        config: Arc<Config>,
        stability: Stability<IpNet, Route>,
        snapshot: SourceSnapshot,
        probes: BTreeMap<IpAddr, Probing>,
        drain: Control,
        peers: Vec<PeerView>,
        started: Instant,
    }

    impl Owned {
        fn facts(&self) -> Facts<'_> {
            Facts {
                config: &self.config,
                config_error: None,
                node: "n1",
                router_id: "192.0.2.2".into(),
                started: self.started,
                snapshot: &self.snapshot,
                stability: &self.stability,
                probes: &self.probes,
                drain: &self.drain,
                peers: self.peers.clone(),
                reconcile_repairs: 0,
                bmp: Vec::new(),
                handoff: None,
            }
        }
    }

    /// `ROUTES` routes, the last 10 gone from the source (held down), and
    /// two Established peers whose sessions published counts of
    /// (`ROUTES`, 0) — beside an empty table, so that a scrape which
    /// counted the table would read 0.
    fn shared() -> Owned {
        let config = Arc::new(config());
        let now = Instant::now();
        let mut st =
            crate::stability::Stability::new(crate::routes::stability_params(&config)).unwrap();
        st.update(now, present(0..ROUTES), &BTreeMap::new(), true);
        st.update(now, present(0..ROUTES - 10), &BTreeMap::new(), true);
        let peers = ["a", "b"]
            .iter()
            .map(|name| PeerView {
                spec: None,
                name: name.to_string(),
                configured: "192.0.2.1".into(),
                runtime: Some(PeerRuntime {
                    state: bgp_proto::fsm::State::Established,
                    state_since: now,
                    established_since: Some(now),
                    down_since: None,
                    stats: Stats::default(),
                    last_error: None,
                    negotiated: None,
                    local_address: None,
                    advertised: Arc::default(),
                    advertised_counts: (ROUTES as usize, 0),
                    end_of_rib_sent: true,
                    restarting: false,
                }),
                waiting: None,
                bfd: None,
                carried: Stats::default(),
            })
            .collect();
        Owned {
            drain: Control::new(config.speaker.graceful_shutdown_wait),
            config,
            started: now,
            snapshot: SourceSnapshot::default(),
            stability: st,
            peers,
            probes: BTreeMap::new(),
        }
    }

    #[test]
    fn a_scrape_walks_no_route() {
        let shared = shared();
        let before = crate::stability::walks();
        let text = crate::api::render_metrics(&shared.facts().status_page(RoutePage {
            offset: 0,
            limit: 0,
        }));
        assert_eq!(
            crate::stability::walks(),
            before,
            "building /metrics walked the route table"
        );
        for line in [
            format!("holdfast_routes_advertised {ROUTES}"),
            "holdfast_routes_held_down 10".to_string(),
            format!(
                "holdfast_peer_prefixes_advertised{{peer=\"b\",address=\"192.0.2.1\",family=\"ipv4\"}} {ROUTES}"
            ),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "no line {line:?} in\n{text}"
            );
        }
    }

    /// The node's `BGPNodeStatus` reads its counts from the counters the
    /// stability layer and its guard keep: a status without a route list
    /// (what the writer asks for) says how many routes are damped and how
    /// many withdrawals deferred, and walks no route.
    #[test]
    fn the_node_status_counts_damped_and_deferred_without_a_route_list() {
        use crate::report::node_status;
        use crate::stability::{DampingParams, GuardParams};
        let mut shared = shared();
        let secs = Duration::from_secs;
        let params = crate::stability::Params {
            withdraw_hold_down: secs(2),
            damping: Some(DampingParams {
                half_life: secs(10),
                penalty: 1000,
                suppress_threshold: 2000,
                reuse_threshold: 750,
                max_suppress: secs(60),
            }),
            guard: GuardParams {
                max_withdraw_fraction: 0.5,
                withdraw_interval: secs(1),
            },
            ..crate::stability::Params::default()
        };
        let t0 = Instant::now();
        let mut st = crate::stability::Stability::new(params).unwrap();
        let none = BTreeMap::new();
        st.update(t0, present(0..10), &none, true);
        // Route 0 flaps three times in 3 s: damped from the third absence.
        for i in 1..=2u64 {
            st.update(t0 + secs(i), present(1..10), &none, true);
            let back = t0 + secs(i) + Duration::from_millis(500);
            st.update(back, present(0..10), &none, true);
        }
        // Routes 1 to 8 go with it: at the hold-down's end, 8 of the 10
        // routes on the wire are due; the guard lets 5 go and defers 3.
        st.update(t0 + secs(3), present(9..10), &none, true);
        st.poll(t0 + secs(5));
        assert_eq!(st.on_wire(), 5);
        shared.stability = st;

        let before = crate::stability::walks();
        let status = shared.facts().status_page(RoutePage::NONE);
        assert_eq!(crate::stability::walks(), before, "a route walked");
        assert!(status.routes.is_empty());
        let body = node_status::build(&status, k8s_openapi::jiff::Timestamp::UNIX_EPOCH, None);
        assert_eq!(
            body.routes,
            node_status::RouteCounts {
                advertised: 5,
                held_down: 4,
                damped: 1,
                deferred: 3,
            }
        );
        // The same counts as the route list shows.
        let all = shared.facts().status();
        let count = |state: &str| all.routes.iter().filter(|r| r.state == state).count();
        assert_eq!((count("damped"), count("deferred")), (1, 3));
    }

    #[test]
    fn a_page_of_routes_is_the_same_slice_of_the_table() {
        let shared = shared();
        let status = shared.facts().status_page(RoutePage {
            offset: ROUTES as usize - 12,
            limit: 5,
        });
        let got: Vec<(&str, &str)> = status
            .routes
            .iter()
            .map(|r| (r.prefix.as_str(), r.state.as_str()))
            .collect();
        let want: Vec<(String, &str)> = (ROUTES - 12..ROUTES - 7)
            .map(|i| {
                (
                    prefix(i).to_string(),
                    if i < ROUTES - 10 {
                        "advertised"
                    } else {
                        "held-down"
                    },
                )
            })
            .collect();
        let want: Vec<(&str, &str)> = want.iter().map(|(p, s)| (p.as_str(), *s)).collect();
        assert_eq!(got, want);
        assert!(status.routes.iter().all(|r| r.advertisements == ["public"]));
        assert_eq!(status.routes_total, Some(ROUTES as usize));
        assert_eq!(status.routes_offset, Some(ROUTES as usize - 12));
        assert_eq!(status.routes_truncated, Some(7));
        assert_eq!(status.counters.routes_advertised, u64::from(ROUTES));
    }
}

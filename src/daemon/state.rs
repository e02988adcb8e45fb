//! What the daemon shows: the shared state behind `/v1/status`,
//! `/v1/explain/{vip}`, `/metrics` and `/readyz`, and the words of
//! `holdfast explain`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bgp_proto::fsm::Stats;
use ipnet::IpNet;

use crate::config::{Config, Source};
use crate::model::SourceSnapshot;
use crate::session::{PeerRuntime, PeerSpec};
use crate::speaker::Route;
use crate::stability::{Absence, KeyState};
use crate::status::{
    Explanation, NotificationCount, PeerExplanation, PeerStatus, RouteStatus, SourceStatus,
    StabilityCounters, Status,
};

/// One peer as the API sees it.
#[derive(Clone)]
pub struct PeerView {
    pub spec: Option<PeerSpec>,
    pub name: String,
    pub configured: String,
    pub runtime: Option<Arc<Mutex<PeerRuntime>>>,
    /// Why there is no session (a default gateway not found).
    pub waiting: Option<String>,
    /// Its BFD session's state, when it has one.
    pub bfd: Option<tokio::sync::watch::Receiver<crate::bfd::driver::BfdStatus>>,
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
}

/// A probed VIP (issue 7/7).
#[derive(Clone, Debug)]
pub struct ProbeView {
    pub port: u16,
    pub verdict: crate::probe::Verdict,
    pub failures: u32,
    pub fail_after: u32,
    pub error: Option<String>,
}

/// Everything `status()` and `explain()` read, replaced by the daemon's
/// main loop after each change.
#[derive(Clone)]
pub struct Shared {
    pub config: Arc<Config>,
    pub config_error: Option<String>,
    pub node: String,
    pub router_id: String,
    pub started: Instant,
    pub snapshot: Arc<SourceSnapshot>,
    /// The stability layer itself, shared with the daemon: the status and
    /// explain views are computed from it on request. A copy of its
    /// routes kept up to date for them was 10 MB with 100k VIPs.
    pub stability: SharedStability,
    pub peers: Vec<PeerView>,
    pub probes: BTreeMap<IpAddr, ProbeView>,
    /// The source's own account of a VIP (the Kubernetes source's rules).
    pub source_explain: Option<Arc<dyn Fn(IpAddr) -> Vec<String> + Send + Sync>>,
}

pub type SharedState = Arc<Mutex<Shared>>;

/// The daemon's stability layer. Lock order: [`SharedState`] first, then
/// this.
pub type SharedStability = Arc<Mutex<crate::stability::Stability<IpNet, Route>>>;

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
        asn: p.spec.as_ref().map_or(0, |s| s.peer.asn),
        address: p.spec.as_ref().map(|s| s.display_address()),
        state: "Idle".into(),
        last_error: p.waiting.clone(),
        ..PeerStatus::default()
    };
    if let Some(spec) = &p.spec {
        s.asn = spec.peer.asn;
    }
    if let Some(b) = &p.bfd {
        let b = b.borrow().clone();
        s.bfd = Some(crate::status::BfdStatus {
            state: b.state.to_string(),
            state_seconds: now.saturating_duration_since(b.since).as_secs(),
            detection_time_ms: b.detection_time.map(|d| d.as_millis() as u64),
            last_diagnostic: (b.diag != crate::bfd::packet::Diag::None)
                .then(|| b.diag.as_str().to_string()),
        });
    }
    let mut stats = p.carried.clone();
    let rt = p
        .runtime
        .as_ref()
        .map(|rt| rt.lock().expect("peer runtime lock").clone());
    if let Some(rt) = &rt {
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
    let ipv4 = rt
        .advertised
        .keys()
        .filter(|p| matches!(p, IpNet::V4(_)))
        .count();
    s.prefixes_advertised_ipv4 = ipv4 as u64;
    s.prefixes_advertised_ipv6 = (rt.advertised.len() - ipv4) as u64;
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
    }
    s
}

impl Shared {
    pub fn ready(&self) -> bool {
        self.snapshot.synced
    }

    fn advertised_to(&self, prefix: &IpNet) -> Vec<String> {
        self.peers
            .iter()
            .filter(|p| {
                p.runtime.as_ref().is_some_and(|rt| {
                    rt.lock()
                        .expect("peer runtime lock")
                        .advertised
                        .contains_key(prefix)
                })
            })
            .map(|p| p.name.clone())
            .collect()
    }

    pub fn status(&self) -> Status {
        let now = Instant::now();
        let kind = match self.config.source {
            Source::File { .. } => "file",
            Source::Kubernetes(_) => "kubernetes",
        };
        let (views, c) = {
            let st = self.stability.lock().expect("stability lock");
            (route_views(&st), st.counters())
        };
        let routes = views
            .iter()
            .map(|r| {
                let (state, left) = match &r.state {
                    KeyState::Advertised => ("advertised", None),
                    KeyState::PendingAdvertise { until } => ("pending", secs_until(*until, now)),
                    KeyState::HeldDown { until, .. } => ("held-down", secs_until(*until, now)),
                    KeyState::Damped { until_estimate, .. } => {
                        ("damped", secs_until(*until_estimate, now))
                    }
                    KeyState::Draining { until, .. } => ("draining", secs_until(*until, now)),
                };
                let ip = r.prefix.addr();
                let route = r.route.clone().or_else(|| {
                    self.snapshot.vips.get(&ip).map(|v| Route {
                        advertisements: v.advertisements.clone(),
                        service: v.service.clone(),
                    })
                });
                RouteStatus {
                    prefix: r.prefix.to_string(),
                    state: state.into(),
                    seconds_left: left,
                    absence: r.state.absence().map(|a| absence_word(a).to_string()),
                    service: route
                        .as_ref()
                        .and_then(|r| r.service.as_deref().map(str::to_string)),
                    advertisements: route
                        .map(|r| r.advertisements.iter().cloned().collect())
                        .unwrap_or_default(),
                    peers: self.advertised_to(&r.prefix),
                    figure_of_merit: r.figure_of_merit.filter(|f| *f > 0.0),
                }
            })
            .collect();
        Status {
            node: self.node.clone(),
            asn: self.config.speaker.asn,
            router_id: self.router_id.clone(),
            version: env!("CARGO_PKG_VERSION").into(),
            uptime_seconds: now.saturating_duration_since(self.started).as_secs(),
            config_path: self.config.path.display().to_string(),
            config_error: self.config_error.clone(),
            source: SourceStatus {
                kind: kind.into(),
                healthy: self.snapshot.healthy,
                synced: self.snapshot.synced,
                error: self.snapshot.error.clone(),
                vips: self.snapshot.vips.len(),
            },
            peers: self.peers.iter().map(|p| peer_status(p, now)).collect(),
            routes,
            counters: StabilityCounters {
                routes_advertised: views
                    .iter()
                    .filter(|r| !matches!(r.state, KeyState::PendingAdvertise { .. }))
                    .count() as u64,
                routes_held_down: c.held_down,
                withdrawals_absorbed: c.absorbed_by_hold_down,
                absences_absorbed_by_damping: c.absorbed_by_damping,
                damping_suppressions: c.suppressions,
                advertisements: c.advertisements,
                withdrawals: c.withdrawals,
            },
        }
    }

    /// Why this node does or doesn't advertise `vip`, in plain words.
    pub fn explain(&self, ip: IpAddr) -> Explanation {
        let prefix = IpNet::from(ip);
        let now = Instant::now();
        let mut reasons = Vec::new();
        let route_owned = route_view(&self.stability.lock().expect("stability lock"), &prefix);
        let route = route_owned.as_ref();
        let at_source = self.snapshot.vips.get(&ip);
        let from_source = self
            .source_explain
            .as_ref()
            .map(|f| f(ip))
            .filter(|l| !l.is_empty());
        match at_source {
            _ if from_source.is_some() => reasons.extend(from_source.into_iter().flatten()),
            Some(v) => reasons.push(format!(
                "the {} source has it{}, under advertisement{} {}",
                match self.config.source {
                    Source::File { .. } => "file",
                    Source::Kubernetes(_) => "Kubernetes",
                },
                v.service
                    .as_ref()
                    .map(|s| format!(" (Service {s})"))
                    .unwrap_or_default(),
                if v.advertisements.len() == 1 { "" } else { "s" },
                v.advertisements
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => reasons.push("the source does not have it".to_string()),
        }
        if self.source_explain.is_none() {
            for why in self.snapshot.excluded.get(&ip).into_iter().flatten() {
                reasons.push(why.clone());
            }
        }
        if let Some(p) = self.probes.get(&ip) {
            reasons.push(match p.verdict {
                crate::probe::Verdict::Passing => format!("its TCP probe to port {} passes", p.port),
                crate::probe::Verdict::Unknown => format!(
                    "its TCP probe to port {} has not succeeded yet{}: not advertised until it does",
                    p.port,
                    p.error.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
                ),
                crate::probe::Verdict::Failing => format!(
                    "its TCP probe to port {} failed {} times in a row ({}): withdrawn at once, without the hold-down — the datapath does not serve it",
                    p.port,
                    p.failures.max(p.fail_after),
                    p.error.as_deref().unwrap_or("no detail")
                ),
            });
        }
        if !self.snapshot.healthy {
            reasons.push(format!(
                "the source is unhealthy ({}): the last known routes stand and nothing is withdrawn",
                self.snapshot.error.as_deref().unwrap_or("no detail")
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
        let advertised_to = self.advertised_to(&prefix);
        let ads: Vec<String> = route
            .and_then(|r| r.route.as_ref())
            .map(|r| r.advertisements.iter().cloned().collect())
            .or_else(|| at_source.map(|v| v.advertisements.iter().cloned().collect()))
            .unwrap_or_default();
        let peers = self
            .peers
            .iter()
            .map(|p| {
                let sent = advertised_to.contains(&p.name);
                let why = if sent {
                    "advertised".to_string()
                } else if route.is_none() {
                    "not advertised: no route".into()
                } else if !self.config.advertisements.iter().filter(|a| ads.contains(&a.name)).any(|a| a.applies_to_peer(&p.name)) {
                    format!("not advertised: advertisement{} {} not for this peer", if ads.len() == 1 { "" } else { "s" }, ads.join(", "))
                } else {
                    let state = p.runtime.as_ref().map(|rt| rt.lock().expect("peer runtime lock").state.to_string());
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
        Explanation {
            vip: ip.to_string(),
            advertised,
            summary,
            reasons,
            peers,
        }
    }
}

/// Routes as the stability layer holds them, for the shared state.
/// One route's view, for `explain`.
fn route_view(st: &crate::stability::Stability<IpNet, Route>, prefix: &IpNet) -> Option<RouteView> {
    let state = st.state(prefix)?;
    Some(RouteView {
        prefix: *prefix,
        route: st.advertised_route(prefix).cloned(),
        figure_of_merit: st.figure_of_merit(prefix),
        state,
    })
}

pub fn route_views(st: &crate::stability::Stability<IpNet, Route>) -> Vec<RouteView> {
    // Both walk the prefixes in order: merge them instead of building a
    // map of every advertised route.
    let mut advertised = st.advertised().peekable();
    st.states()
        .map(|(k, state)| {
            while advertised.next_if(|(a, _)| *a < k).is_some() {}
            let route = advertised.next_if(|(a, _)| *a == k).map(|(_, v)| v.clone());
            RouteView {
                prefix: *k,
                route,
                figure_of_merit: st.figure_of_merit(k),
                state,
            }
        })
        .collect()
}

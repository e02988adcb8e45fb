//! `holdfast run`: the daemon. One task per peer session; this module's
//! main loop ([`Daemon::drive`]) is a thin driver: it feeds the routes core
//! (`routes/`, sans-IO: snapshots, probe results, drains and instants in;
//! per-peer tables, Events, routes ready and its next deadline out) and
//! carries its outputs to the sessions, the Event recorder and the shared
//! status; it also handles signals, config reloads (`reload.rs`) and the
//! peers' sessions and default gateways (`peers.rs`). `start.rs` wires it
//! all up.
//!
//! ```text
//!  source ──snapshot──▶ routes core: stability ─▶ peer tables ──watch──▶ sessions
//!    ▲                     ▲   (hold-down, damping, guard, drain)           │
//!    └── config reload ────┴──────────── SIGHUP / file change ───────────────┘
//! ```

mod drain;
mod gateway;
mod peers;
mod reload;
mod restart;
mod routes;
mod start;
mod state;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::config::{self, Config, PeerAddress, RouterId};
use crate::logging::{self, Kind};
use crate::model::SourceSnapshot;
use crate::probe;
use crate::session::{self, PeerHandle, PeerSpec, StopHow};
use crate::speaker::PeerTable;
use crate::stability::Stability;
use peers::Peer;
use reload::Stamp;
use start::{Accepted, Api, Listener, View};
pub use start::{Options, node_name, router_id, run};
pub use state::{PeerView, RouteView, Shared, SharedState};

/// The daemon's sans-IO cores, for the deterministic simulation of a node
/// (`tests/simulation.rs`) only: not an API, free to change with them.
#[doc(hidden)]
pub mod sim {
    pub use super::drain::{
        Control as DrainControl, ExitPlan, ExitReason, SharedControl, exit_plan,
        shared as drain_control,
    };
    pub use super::routes::{Event, Routes, stability_params};
    pub use super::state::SharedStability;
}

/// The periodic reconcile leaves a session alone for this long (plus its
/// MRAI) after its table changed: it may still be sending.
const RESYNC_SETTLE: Duration = Duration::from_secs(2);

/// A VIP file changed this recently is left to the file source at a resync.
const RESYNC_FILE_QUIET: Duration = Duration::from_secs(5);

struct Daemon {
    opts: Options,
    config: Arc<Config>,
    config_error: Option<String>,
    node: String,
    router_id: Ipv4Addr,
    /// This node's labels (the Kubernetes source), which pick its
    /// `[[node_override]]`s; `None` while not known.
    node_labels: Option<crate::source::kubernetes::NodeLabels>,
    /// Whether OPENs carry graceful restart's R bit (RFC 4724 §3).
    restart: restart::Restart,
    /// The routes core: snapshots, probe results, drains and time in;
    /// per-peer tables, Events and status out.
    routes: routes::Routes,
    peers: BTreeMap<String, Peer>,
    shared: SharedState,
    file_settings: Option<watch::Sender<crate::source::file::FileSettings>>,
    /// BFD (RFC 5880), started when a peer first needs it.
    bfd: Option<crate::bfd::driver::Bfd>,
    /// The Kubernetes source, when `source.kind = "kubernetes"`.
    kube: Option<Arc<crate::source::kubernetes::Handle>>,
    kube_config: Option<watch::Sender<Arc<Config>>>,
    /// Whether an advertisement announces an interface's addresses (the
    /// interface driver reads them only then).
    interfaces_wanted: watch::Sender<bool>,
    /// The probe tasks of the VIPs the routes core tracks a probe for.
    probe_tasks: BTreeMap<IpAddr, (config::Probe, probe::ProbeTask)>,
    probe_tx: tokio::sync::mpsc::UnboundedSender<probe::ProbeResult>,
    /// The routes core's `routes_ready`, for the sessions: they send
    /// End-of-RIB only once it is true (RFC 4724 §4.1).
    routes_ready: watch::Sender<bool>,
    /// The periodic reconcile (`[source] resync`).
    resync: crate::source::resync::Schedule,
    /// Routes and VIPs the reconciles have repaired.
    reconcile_repairs: u64,
    /// `holdfast drain` and the shutdown sequence (shared with the API).
    drain: drain::SharedControl,
    /// The passive side (`speaker.listen`), whose TTL settings and MD5
    /// keys follow the peers.
    listener: Option<Listener>,
    /// Where the passive side hands accepted connections.
    accept_tx: tokio::sync::mpsc::UnboundedSender<Accepted>,
    /// The HTTP API; rebound when `speaker.api` changes.
    api: Api,
    /// The metrics-only listener (`speaker.metrics`); rebound when it
    /// changes.
    metrics: Option<Api>,
    /// What the API serves.
    view: Arc<View>,
    /// Turns true when the daemon stops.
    shutdown: watch::Receiver<bool>,
    /// The config file's identity as of the last (re)load.
    config_stamp: Option<Stamp>,
    /// Reads the config and its password files off the runtime thread,
    /// bounded in time (reloads and the config file's checks).
    config_reader: reload::FileReader,
}

/// What the main loop waits on, besides the daemon's own state.
struct Inputs {
    snapshots: watch::Receiver<SourceSnapshot>,
    probes: tokio::sync::mpsc::UnboundedReceiver<probe::ProbeResult>,
    accepted: tokio::sync::mpsc::UnboundedReceiver<Accepted>,
    sigterm: tokio::signal::unix::Signal,
    sigint: tokio::signal::unix::Signal,
    sighup: tokio::signal::unix::Signal,
    /// This node's labels (the Kubernetes source only).
    labels: Option<watch::Receiver<Option<crate::source::kubernetes::NodeLabels>>>,
}

/// The Node's labels when they change; never without the Kubernetes source.
async fn next_labels(
    rx: &mut Option<watch::Receiver<Option<crate::source::kubernetes::NodeLabels>>>,
) -> Option<crate::source::kubernetes::NodeLabels> {
    let Some(rx) = rx else {
        return std::future::pending().await;
    };
    loop {
        if rx.changed().await.is_err() {
            return std::future::pending().await;
        }
        if let Some(labels) = rx.borrow_and_update().clone() {
            return Some(labels);
        }
    }
}

/// How often peers that follow the default gateway (or an interface's
/// router) check whether it moved.
const GATEWAY_CHECK: Duration = Duration::from_secs(5);

/// When the main loop's chores last ran.
struct Chores {
    /// The per-second ones.
    last: Instant,
    /// The gateway check.
    gateways: Instant,
}

impl Chores {
    fn new(now: Instant) -> Self {
        Chores {
            last: now,
            gateways: now,
        }
    }
}

/// The next change in the config file's directories; never without a
/// watch.
async fn next_change(
    watch: &mut Option<crate::source::dirwatch::PathWatch>,
) -> std::io::Result<()> {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

impl Daemon {
    /// The main loop, a thin driver: it waits for the next input — a
    /// snapshot, a probe result, a drain changed by the API, the routes
    /// core's next deadline, a connection, a signal, a change of the config
    /// file, the next chore that is due ([`Daemon::next_chore`]) — feeds it
    /// to its owner and carries the routes core's outputs. Every timer is
    /// armed for its next deadline only: an idle daemon with nothing due
    /// sleeps until a peer speaks. Returns the signal that stopped the
    /// daemon, if one did.
    async fn drive(&mut self, mut inputs: Inputs) -> Option<&'static str> {
        let drain = self.drain.clone();
        // The config file's directories, watched: a change is seen at once
        // and nothing polls while the watch is complete.
        let mut config_watch = crate::source::dirwatch::PathWatch::new(&self.opts.config)
            .map_err(|e| warn!("inotify unavailable ({e}): the config file is polled every second"))
            .ok();
        let mut config_settled: Option<Instant> = None;
        let mut chores = Chores::new(Instant::now());
        let mut signal = None;
        loop {
            let deadline = self.routes.next_deadline();
            let routes_timer = crate::sleep::until(deadline);
            let watched = config_watch.as_ref().is_some_and(|w| w.complete());
            let chore_timer = crate::sleep::until(self.next_chore(&chores, watched));
            tokio::select! {
                () = drain.1.notified() => self.routes.publish_tables(),
                // Only to arm the chore timer for the summary (next_chore).
                () = logging::summary_wanted() => {}
                () = routes_timer => {
                    if self.routes.poll(Instant::now()) {
                        break;
                    }
                }
                changed = inputs.snapshots.changed() => {
                    if changed.is_err() {
                        error!("the source stopped");
                        break;
                    }
                    let snap = inputs.snapshots.borrow_and_update().clone();
                    self.routes.on_snapshot(Instant::now(), snap);
                }
                Some(r) = inputs.probes.recv() => self.routes.on_probe(Instant::now(), r),
                Some((stream, from)) = inputs.accepted.recv() => self.accept(stream, from),
                _ = inputs.sigterm.recv() => {
                    signal = Some("SIGTERM");
                    if self.begin_exit() {
                        break;
                    }
                }
                _ = inputs.sigint.recv() => {
                    signal = Some("SIGINT");
                    if self.begin_exit() {
                        break;
                    }
                }
                Some(labels) = next_labels(&mut inputs.labels) => self.on_node_labels(labels).await,
                _ = inputs.sighup.recv() => {
                    info!("SIGHUP: reloading the config");
                    self.config_stamp = self.reload().await;
                }
                changed = next_change(&mut config_watch) => match changed {
                    // An editor's save is a burst of events: check once it
                    // is over.
                    Ok(()) => {
                        config_settled =
                            Some(Instant::now() + crate::source::file::SETTLE);
                    }
                    Err(e) => {
                        warn!("inotify failed ({e}): the config file is polled every second");
                        config_watch = None;
                    }
                },
                () = crate::sleep::until(config_settled) => {
                    config_settled = None;
                    self.poll_config_file().await;
                    if let Some(w) = config_watch.as_mut() {
                        w.rewatch();
                    }
                }
                () = chore_timer => {
                    let now = Instant::now();
                    chores.last = now;
                    logging::flush();
                    if !watched {
                        self.poll_config_file().await;
                        if let Some(w) = config_watch.as_mut() {
                            w.rewatch();
                        }
                    }
                    self.follow_restart();
                    self.follow_node();
                    if self.resync.due(now) {
                        self.reconcile().await;
                    }
                    if now.saturating_duration_since(chores.gateways) >= GATEWAY_CHECK {
                        chores.gateways = now;
                        self.check_gateways().await;
                    }
                }
            }
            self.resync.set_every(self.config.resync, Instant::now());
            let wanted = crate::source::interface::wanted(&self.config);
            self.interfaces_wanted
                .send_if_modified(|w| std::mem::replace(w, wanted) != wanted);
            self.carry();
            self.refresh_shared();
        }
        signal
    }

    /// When the main loop next has a chore to do; `None`: none is due,
    /// and no timer is armed for them. Each chore arms its own need:
    /// - every second, while one of these is going on: summaries of
    ///   suppressed log lines to write, the config file polled (its watch
    ///   is incomplete), graceful restart in progress (when each peer's
    ///   restart ends), the Kubernetes source (the Node going away);
    /// - every [`GATEWAY_CHECK`], while a peer follows the default gateway
    ///   or an interface's router;
    /// - the next periodic reconcile (`[source] resync`).
    fn next_chore(&self, chores: &Chores, config_watched: bool) -> Option<Instant> {
        let mut due = self.resync.next();
        let mut arm = |t: Instant| due = Some(due.map_or(t, |d: Instant| d.min(t)));
        if logging::pending()
            || !config_watched
            || self.restart.in_progress()
            || self.kube.is_some()
        {
            arm(chores.last + Duration::from_secs(1));
        }
        if self.peers.values().any(|p| {
            matches!(
                p.config.address,
                PeerAddress::DefaultGateway(_) | PeerAddress::Interface(_)
            )
        }) {
            arm(chores.gateways + GATEWAY_CHECK);
        }
        due
    }

    /// Carries the routes core's outputs: changed tables to the sessions,
    /// routes ready to them, Events to Kubernetes, and the probe tasks to
    /// match the probes it tracks.
    fn carry(&mut self) {
        let now = Instant::now();
        for (name, table) in self.routes.take_changed_tables() {
            if let Some(p) = self.peers.get_mut(&name) {
                p.table.send_replace(table);
                p.table_changed = now;
            }
        }
        if self.routes.routes_ready() && !*self.routes_ready.borrow() {
            self.routes_ready.send_replace(true);
        }
        let events = self.routes.take_events();
        if let Some(k) = &self.kube {
            for e in events {
                match e {
                    routes::Event::Advertised { vip, peers } => k.events().advertised(vip, &peers),
                    routes::Event::Withdrawn { vip, peers } => k.events().withdrawn(vip, &peers),
                }
            }
        }
        if self.routes.take_probes_changed() {
            let wanted = self.routes.probes();
            self.probe_tasks
                .retain(|ip, (cfg, _)| wanted.get(ip).is_some_and(|p| p.config == *cfg));
            for (ip, p) in wanted {
                if !self.probe_tasks.contains_key(ip) {
                    let task = probe::spawn(*ip, p.config.clone(), self.probe_tx.clone());
                    self.probe_tasks.insert(*ip, (p.config.clone(), task));
                }
            }
        }
    }

    /// A connection the passive side accepted goes to the session of the
    /// peer it comes from.
    fn accept(&self, stream: tokio::net::TcpStream, from: std::net::SocketAddr) {
        match self
            .peers
            .values()
            .find(|p| p.handle.as_ref().is_some_and(|h| h.spec.is_from(from)))
        {
            Some(p) => p
                .handle
                .as_ref()
                .expect("matched on a handle")
                .incoming(stream),
            None => {
                if let Some(note) = logging::allow(Kind::NotAPeer, &from.ip().to_string()) {
                    warn!(%from, "connection from an address that is not a configured peer: closed{note}");
                }
            }
        }
    }

    /// SIGTERM or SIGINT: answers whether the daemon stops now (see
    /// [`routes::Routes::begin_exit`]).
    fn begin_exit(&mut self) -> bool {
        if self.routes.exiting() {
            info!("second signal: stopping without waiting");
            return true;
        }
        // Pod restart or node going away: drain::exit_plan.
        let withdrawing: std::collections::BTreeSet<String> = self
            .decide_exit(drain::ExitReason::Signal)
            .into_iter()
            .filter(|(_, plan)| matches!(plan, drain::ExitPlan::Withdraw(_)))
            .map(|(name, _)| name)
            .collect();
        self.routes.begin_exit(Instant::now(), withdrawing)
    }

    /// The periodic reconcile (`[source] resync`, see `source::resync`):
    /// the desired set rebuilt from the source, then every session's
    /// Adj-RIB-Out compared with its desired table. What differs is
    /// repaired, logged once per resync and counted.
    async fn reconcile(&mut self) {
        use crate::source::resync::{PeerCheck, check_peer, set_differences};
        let mut repaired = 0u64;
        // The file, read from scratch, whatever its watch and polls saw —
        // unless it changed in the last few seconds (the source is still on
        // it) or the source is unhealthy (it reports that problem itself).
        if let Some(settings) = crate::source::file::FileSettings::from_config(&self.config)
            && self.routes.snapshot().healthy
        {
            let fresh = tokio::task::spawn_blocking(move || {
                let recent = std::fs::metadata(&settings.path)
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_none_or(|age| age < RESYNC_FILE_QUIET);
                (!recent).then(|| crate::source::file::FileSource::new(settings).read())
            })
            .await;
            if let Ok(Some(Ok(vips))) = fresh {
                let n = set_differences(&self.routes.snapshot().vips, &vips);
                if n > 0 {
                    warn!(
                        differences = n,
                        "resync: the VIP file differs from the set in force (a missed change): applying it"
                    );
                    self.routes.repair_vips(Instant::now(), vips);
                    self.carry();
                    repaired += n as u64;
                }
            }
        }
        // The Kubernetes source evaluates its stores afresh (and counts).
        if let Some(k) = &self.kube {
            k.resync();
        }
        let now = Instant::now();
        for (name, p) in &self.peers {
            let Some(h) = &p.handle else { continue };
            let rt = h.snapshot();
            let synced = rt.state == bgp_proto::fsm::State::Established && rt.end_of_rib_sent;
            let settle = p.config.min_route_advertisement_interval + RESYNC_SETTLE;
            let desired = p.table.borrow().clone();
            let age = now.saturating_duration_since(p.table_changed);
            if let PeerCheck::Repair(r) =
                check_peer(desired.iter(), rt.advertised.iter(), synced, age, settle)
            {
                warn!(
                    peer = %name,
                    missing = r.announce.len(),
                    extra = r.withdraw.len(),
                    first = %r.announce.first().or(r.withdraw.first()).map(ToString::to_string).unwrap_or_default(),
                    "resync: the Adj-RIB-Out differs from the desired table: repairing"
                );
                // The session diffs its Adj-RIB-Out against the table again
                // and sends what differs.
                p.table.send_modify(|_| {});
                repaired += r.len() as u64;
            }
        }
        self.reconcile_repairs += repaired;
        if repaired == 0 {
            debug!("resync: every peer's routes match the source");
        }
    }

    fn refresh_shared(&mut self) {
        let mut s = self.shared.lock().expect("shared state lock");
        s.config = self.config.clone();
        s.config_error = self.config_error.clone();
        // A reload (or a node override) may change both.
        s.node = self.node.clone();
        s.router_id = self.router_id.to_string();
        s.snapshot = self.routes.snapshot().clone();
        s.reconcile_repairs =
            self.reconcile_repairs + self.kube.as_ref().map_or(0, |k| k.resync_repairs());
        // The probes' views are the routes core's to keep (Shared::probes).
        s.peers = self
            .config
            .peers
            .iter()
            .filter_map(|cp| {
                let p = self.peers.get(&cp.name)?;
                Some(PeerView {
                    spec: p.handle.as_ref().map(|h| h.spec.clone()),
                    name: cp.name.clone(),
                    configured: cp.address.to_string(),
                    runtime: p.handle.as_ref().map(|h| h.runtime.clone()),
                    waiting: p.waiting.clone(),
                    bfd: p.bfd.as_ref().map(|b| b.view()),
                    carried: p.carried.clone(),
                })
            })
            .collect();
    }
}

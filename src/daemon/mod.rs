//! `holdfast run`: the daemon. One task per peer session; this module's
//! main loop ([`Daemon::drive`]) is a thin driver: it feeds the routes core
//! (`routes/`, sans-IO: snapshots, probe results, drains and instants in;
//! per-peer tables, Events, routes ready and its next deadline out) and
//! carries its outputs to the sessions and the Event recorder; it answers
//! the API's requests (`view.rs`) from the values it owns, and handles
//! signals, config reloads (`reload.rs`) and the peers' sessions and
//! default gateways (`peers.rs`). Values pass between the tasks — on
//! channels, as replies, on `watch`es —: what the loop owns is shared with
//! no other task under a lock (ARCHITECTURE.md lists the few locks left,
//! each private to its module). `start.rs` wires it all up.
//!
//! ```text
//!  source ──snapshot──▶ routes core: stability ─▶ peer tables ──watch──▶ sessions
//!    ▲                     ▲   (hold-down, damping, guard, drain)           │
//!    └── config reload ────┴──────────── SIGHUP / file change ───────────────┘
//! ```

mod exit;
mod gateway;
mod handoff;
mod peers;
mod reload;
mod restart;
mod start;
mod state;
#[cfg(test)]
mod tests;
mod view;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::config::{self, Config, PeerAddress, RouterId};
use crate::model::SourceSnapshot;
use crate::probe;
use crate::report::logging::{self, Kind};
use crate::session::{self, PeerHandle, PeerSpec, StopHow};
use crate::speaker::PeerTable;
use crate::stability::Stability;
use peers::Peer;
use reload::Stamp;
use start::{Accepted, Api, Listener};
pub use start::{Options, node_name, router_id, run};
use state::{PeerView, Published};
use view::{Request, View};

/// The daemon's sans-IO cores, for the deterministic simulation of a node
/// (`tests/simulation.rs`) only: not an API, free to change with them.
#[doc(hidden)]
pub mod sim {
    pub use crate::routes::drain::{Control as DrainControl, ExitPlan, ExitReason, exit_plan};
    pub use crate::routes::{Event, Routes, stability_params};
}

/// The periodic reconcile leaves a session alone for this long (plus its
/// MRAI) after its table changed: it may still be sending.
const RESYNC_SETTLE: Duration = Duration::from_secs(2);

struct Daemon {
    opts: Options,
    /// When the daemon started (uptime, readiness's wait for the peers).
    started: Instant,
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
    /// per-peer tables, Events and status out. It owns the stability
    /// layer, the probes and the drain control.
    routes: crate::routes::Routes,
    peers: BTreeMap<String, Peer>,
    /// What the API reads without asking the loop (`/readyz`, the token).
    published: watch::Sender<Published>,
    file_settings: Option<watch::Sender<crate::source::file::FileSettings>>,
    /// The file source's periodic reconcile: `()` asks it to read the file
    /// from scratch.
    file_resync: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    /// BFD (RFC 5880), started when a peer first needs it.
    bfd: Option<crate::bfd::driver::Bfd>,
    /// The Kubernetes source, when `source.kind = "kubernetes"`.
    kube: Option<Arc<crate::source::kubernetes::Handle>>,
    kube_config: Option<watch::Sender<Arc<Config>>>,
    /// The config, for the runtime routes' source (it checks them
    /// against the config in force).
    runtime_config: watch::Sender<Arc<Config>>,
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
    resync: crate::routes::reconcile::Schedule,
    /// Routes and VIPs the reconciles have repaired.
    reconcile_repairs: u64,
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
    /// What the API serves: its requests come to this loop.
    view: Arc<View>,
    /// Turns true when the daemon stops.
    shutdown: watch::Receiver<bool>,
    /// The config file's identity as of the last (re)load.
    config_stamp: Option<Stamp>,
    /// Reads the config and its password files off the runtime thread,
    /// bounded in time (reloads and the config file's checks).
    config_reader: reload::FileReader,
    /// The BMP stations (`[[bmp]]`, as at start: a reload does not change
    /// them).
    bmp: crate::bmp::Hub,
    /// The hand-off this process received at its start, if any.
    handoff: Option<crate::report::status::HandoffStatus>,
}

/// What the main loop waits on, besides the daemon's own state.
struct Inputs {
    snapshots: watch::Receiver<SourceSnapshot>,
    probes: tokio::sync::mpsc::UnboundedReceiver<probe::ProbeResult>,
    accepted: tokio::sync::mpsc::UnboundedReceiver<Accepted>,
    /// The API's requests (bounded: `view::REQUEST_QUEUE`).
    requests: tokio::sync::mpsc::Receiver<Request>,
    sigterm: tokio::signal::unix::Signal,
    sigint: tokio::signal::unix::Signal,
    sighup: tokio::signal::unix::Signal,
    /// This node's labels (the Kubernetes source only).
    labels: Option<watch::Receiver<Option<crate::source::kubernetes::NodeLabels>>>,
    /// The config file's directories, watched (set up by the loop): a
    /// change is seen at once and nothing polls while the watch is
    /// complete.
    config_watch: Option<crate::source::file::dirwatch::PathWatch>,
    /// When a burst of changes of the config file is over.
    config_settled: Option<Instant>,
    /// When the chores last ran.
    chores: Chores,
    /// Requests of a new holdfast to take over (the hand-off socket).
    handoff: tokio::sync::mpsc::Receiver<crate::handoff::Event>,
}

/// One input of the main loop, as [`Daemon::next_input`] takes it; each
/// has its handler in [`Daemon::handle`].
enum Input {
    /// Only to arm the chore timer for the summary of suppressed log lines
    /// ([`Daemon::next_chore`]).
    SummaryWanted,
    /// The routes core's next deadline.
    RoutesDue,
    Snapshot(SourceSnapshot),
    SourceStopped,
    Probe(probe::ProbeResult),
    Accepted(Accepted),
    /// SIGTERM or SIGINT.
    Signal(&'static str),
    Labels(crate::source::kubernetes::NodeLabels),
    Sighup,
    /// Something changed in the config file's directories (or the watch
    /// failed).
    ConfigChanged(std::io::Result<()>),
    /// A burst of changes of the config file is over.
    ConfigSettled,
    Chores,
    /// A request of the API.
    Request(Request),
    /// A new holdfast asks to take over.
    Handoff(crate::handoff::Event),
}

/// Whether the loop goes on after an input.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
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
    watch: &mut Option<crate::source::file::dirwatch::PathWatch>,
) -> std::io::Result<()> {
    match watch {
        Some(w) => w.changed().await,
        None => std::future::pending().await,
    }
}

impl Daemon {
    /// The main loop, a thin driver: it waits for the next input
    /// ([`Self::next_input`]) — a snapshot, a probe result, a request of
    /// the API, the routes core's next deadline, a connection, a signal, a
    /// change of the config file, the next chore that is due
    /// ([`Daemon::next_chore`]) —, hands it to its one handler
    /// ([`Self::handle`]) and carries the routes core's outputs. Every
    /// timer is armed for its next deadline only: an idle daemon with
    /// nothing due sleeps until a peer speaks. Returns the signal that
    /// stopped the daemon, if one did.
    async fn drive(&mut self, mut inputs: Inputs) -> Option<&'static str> {
        inputs.config_watch = crate::source::file::dirwatch::PathWatch::new(&self.opts.config)
            .map_err(|e| warn!("inotify unavailable ({e}): the config file is polled every second"))
            .ok();
        let mut signal = None;
        loop {
            let input = self.next_input(&mut inputs).await;
            if let Input::Signal(name) = input {
                signal = Some(name);
            }
            if let Input::Handoff(crate::handoff::Event::Confirmed(_)) = input {
                signal = Some("hand-off request");
            }
            if self.handle(input, &mut inputs).await == Flow::Stop {
                break;
            }
            self.resync.set_every(self.config.resync, Instant::now());
            let wanted = crate::source::interface::wanted(&self.config);
            self.interfaces_wanted
                .send_if_modified(|w| std::mem::replace(w, wanted) != wanted);
            self.carry();
            self.publish();
        }
        signal
    }

    /// Waits for the main loop's next input.
    async fn next_input(&mut self, inputs: &mut Inputs) -> Input {
        let routes_timer = crate::sleep::until(self.routes.next_deadline());
        let watched = inputs.config_watch.as_ref().is_some_and(|w| w.complete());
        let chore_timer = crate::sleep::until(self.next_chore(&inputs.chores, watched));
        tokio::select! {
            () = logging::summary_wanted() => Input::SummaryWanted,
            () = routes_timer => Input::RoutesDue,
            changed = inputs.snapshots.changed() => match changed {
                Ok(()) => Input::Snapshot(inputs.snapshots.borrow_and_update().clone()),
                Err(_) => Input::SourceStopped,
            },
            Some(r) = inputs.probes.recv() => Input::Probe(r),
            Some(request) = inputs.requests.recv() => Input::Request(request),
            Some(accepted) = inputs.accepted.recv() => Input::Accepted(accepted),
            _ = inputs.sigterm.recv() => Input::Signal("SIGTERM"),
            _ = inputs.sigint.recv() => Input::Signal("SIGINT"),
            Some(event) = inputs.handoff.recv() => Input::Handoff(event),
            Some(labels) = next_labels(&mut inputs.labels) => Input::Labels(labels),
            _ = inputs.sighup.recv() => Input::Sighup,
            changed = next_change(&mut inputs.config_watch) => Input::ConfigChanged(changed),
            () = crate::sleep::until(inputs.config_settled) => Input::ConfigSettled,
            () = chore_timer => Input::Chores,
        }
    }

    /// One handler per input.
    async fn handle(&mut self, input: Input, inputs: &mut Inputs) -> Flow {
        match input {
            Input::SummaryWanted => Flow::Continue,
            Input::RoutesDue => self.on_routes_due(),
            Input::Snapshot(snap) => self.on_snapshot(snap),
            Input::SourceStopped => {
                error!("the source stopped");
                Flow::Stop
            }
            Input::Probe(r) => self.on_probe(r),
            Input::Request(request) => self.on_request(request),
            Input::Accepted((stream, from)) => self.accept(stream, from),
            Input::Signal(_) => self.on_signal(),
            Input::Handoff(event) => self.on_handoff(event),
            Input::Labels(labels) => {
                self.on_node_labels(labels).await;
                Flow::Continue
            }
            Input::Sighup => self.on_sighup().await,
            Input::ConfigChanged(changed) => Self::on_config_changed(changed, inputs),
            Input::ConfigSettled => self.on_config_settled(inputs).await,
            Input::Chores => self.on_chores(inputs).await,
        }
    }

    /// The routes core's deadline: whatever is due.
    fn on_routes_due(&mut self) -> Flow {
        if self.routes.poll(Instant::now()) {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }

    fn on_snapshot(&mut self, snap: SourceSnapshot) -> Flow {
        self.routes.on_snapshot(Instant::now(), snap);
        Flow::Continue
    }

    fn on_probe(&mut self, r: probe::ProbeResult) -> Flow {
        self.routes.on_probe(Instant::now(), r);
        Flow::Continue
    }

    /// A request of the API, answered from the values the loop owns now.
    /// The answer goes back as a value: the API's task serialises it.
    fn on_request(&mut self, request: Request) -> Flow {
        if request.abandoned() {
            return Flow::Continue;
        }
        match request {
            Request::Status { page, reply } => {
                let _ = reply.send(self.facts().status_page(page));
            }
            Request::NodeStatus { reply } => {
                let facts = self.facts();
                let _ = reply.send((
                    facts.status_page(crate::report::status::RoutePage::NONE),
                    facts.node_routes(),
                ));
            }
            Request::Explain { vip, reply } => {
                // The Kubernetes source's own account of the VIP.
                let from_source = self.kube.as_ref().map(|k| k.explain(vip));
                let _ = reply.send(self.facts().explain(vip, from_source));
            }
            Request::Drain { on, reply } => {
                let _ = reply.send(self.on_drain(on));
            }
        }
        Flow::Continue
    }

    /// `holdfast drain` (`on`) or `undrain`: the tables follow at once.
    fn on_drain(&mut self, on: bool) -> Result<crate::report::status::DrainStatus, String> {
        let answer = self.routes.set_drain(Instant::now(), on);
        if answer.is_ok() {
            info!(
                "{}",
                if on {
                    "holdfast drain: routes marked GRACEFUL_SHUTDOWN, withdrawn after graceful_shutdown_wait"
                } else {
                    "holdfast undrain: routes advertised normally again"
                }
            );
        }
        answer
    }

    /// SIGTERM or SIGINT.
    fn on_signal(&mut self) -> Flow {
        if self.begin_exit() {
            Flow::Stop
        } else {
            Flow::Continue
        }
    }

    async fn on_sighup(&mut self) -> Flow {
        info!("SIGHUP: reloading the config");
        self.config_stamp = self.reload().await;
        Flow::Continue
    }

    /// An editor's save is a burst of events: the file is checked once it
    /// is over.
    fn on_config_changed(changed: std::io::Result<()>, inputs: &mut Inputs) -> Flow {
        match changed {
            Ok(()) => {
                inputs.config_settled = Some(Instant::now() + crate::source::file::SETTLE);
            }
            Err(e) => {
                warn!("inotify failed ({e}): the config file is polled every second");
                inputs.config_watch = None;
            }
        }
        Flow::Continue
    }

    async fn on_config_settled(&mut self, inputs: &mut Inputs) -> Flow {
        inputs.config_settled = None;
        self.poll_config_file().await;
        if let Some(w) = inputs.config_watch.as_mut() {
            w.rewatch();
        }
        Flow::Continue
    }

    /// The chores that are due ([`Self::next_chore`]).
    async fn on_chores(&mut self, inputs: &mut Inputs) -> Flow {
        let now = Instant::now();
        inputs.chores.last = now;
        logging::flush();
        if !inputs.config_watch.as_ref().is_some_and(|w| w.complete()) {
            self.poll_config_file().await;
            if let Some(w) = inputs.config_watch.as_mut() {
                w.rewatch();
            }
        }
        self.follow_restart();
        self.follow_node();
        if self.resync.due(now) {
            self.reconcile();
        }
        if now.saturating_duration_since(inputs.chores.gateways) >= GATEWAY_CHECK {
            inputs.chores.gateways = now;
            self.check_gateways().await;
        }
        Flow::Continue
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
                    crate::routes::Event::Advertised { vip, peers } => {
                        k.events().advertised(vip, &peers)
                    }
                    crate::routes::Event::Withdrawn { vip, peers } => {
                        k.events().withdrawn(vip, &peers)
                    }
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
    fn accept(&self, stream: tokio::net::TcpStream, from: std::net::SocketAddr) -> Flow {
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
        Flow::Continue
    }

    /// SIGTERM or SIGINT: answers whether the daemon stops now (see
    /// [`routes::Routes::begin_exit`]).
    fn begin_exit(&mut self) -> bool {
        if self.routes.exiting() {
            info!("second signal: stopping without waiting");
            return true;
        }
        // Pod restart or node going away: crate::routes::drain::exit_plan.
        let withdrawing: std::collections::BTreeSet<String> = self
            .decide_exit(crate::routes::drain::ExitReason::Signal)
            .into_iter()
            .filter(|(_, plan)| matches!(plan, crate::routes::drain::ExitPlan::Withdraw(_)))
            .map(|(name, _)| name)
            .collect();
        self.routes.begin_exit(Instant::now(), withdrawing)
    }

    /// The periodic reconcile (`[source] resync`, see `routes::reconcile`):
    /// the desired set rebuilt from the source, then every session's
    /// Adj-RIB-Out compared with its desired table. What differs is
    /// repaired, logged once per resync and counted.
    fn reconcile(&mut self) {
        use crate::routes::reconcile::{PeerCheck, check_peer};
        let mut repaired = 0u64;
        // The file source reads the file from scratch, whatever its watch
        // and polls saw, and applies what differs (and counts).
        if let Some(tx) = &self.file_resync {
            let _ = tx.send(());
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

    /// The values a status or explain request is answered from, as they
    /// are now: the routes core's, the peers' (each session's status as it
    /// last published it) and the daemon's own.
    fn facts(&self) -> state::Facts<'_> {
        state::Facts {
            config: &self.config,
            config_error: self.config_error.as_deref(),
            handoff: self.handoff.as_ref(),
            node: &self.node,
            router_id: self.router_id.to_string(),
            started: self.started,
            snapshot: self.routes.snapshot(),
            stability: self.routes.stability(),
            probes: self.routes.probes(),
            drain: self.routes.drain(),
            peers: self
                .configured_peers()
                .map(|(cp, p)| PeerView {
                    spec: p.handle.as_ref().map(|h| h.spec.clone()),
                    name: cp.name.clone(),
                    configured: cp.address.to_string(),
                    runtime: p.handle.as_ref().map(PeerHandle::snapshot),
                    waiting: p.waiting.clone(),
                    bfd: p.bfd.as_ref().map(|b| b.view()),
                    carried: p.carried.clone(),
                })
                .collect(),
            reconcile_repairs: self.reconcile_repairs + self.routes.snapshot().reconcile_repairs,
            bmp: self
                .bmp
                .status()
                .into_iter()
                .map(|s| crate::report::status::BmpStatus {
                    station: s.name,
                    up: s.up,
                    messages: s
                        .messages
                        .into_iter()
                        .map(|(t, n)| (t.to_string(), n))
                        .collect(),
                    dropped: s.dropped,
                })
                .collect(),
        }
    }

    /// The configured peers that have a peer of the daemon's, in the
    /// config's order: what the status and the published value list.
    fn configured_peers(&self) -> impl Iterator<Item = (&config::Peer, &Peer)> {
        self.config
            .peers
            .iter()
            .filter_map(|cp| Some((cp, self.peers.get(&cp.name)?)))
    }

    /// Publishes what the API reads without asking (`/readyz`, the
    /// token), when it changed: a reload (or a node override), the
    /// snapshot's state, the peers' sessions.
    fn publish(&mut self) {
        let snapshot = self.routes.snapshot();
        let now = Published {
            config: self.config.clone(),
            started: self.started,
            synced: snapshot.synced,
            source_error: snapshot.error.clone(),
            peers: self
                .configured_peers()
                .map(|(cp, p)| (cp.name.clone(), p.handle.as_ref().map(|h| h.status.clone())))
                .collect(),
        };
        self.published.send_if_modified(|p| {
            if p.same(&now) {
                false
            } else {
                *p = now;
                true
            }
        });
    }
}

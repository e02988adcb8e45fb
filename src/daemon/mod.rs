//! `holdfast run`: the daemon. One task per peer session; this module's
//! main loop connects the source, the stability layer and the speaker, and
//! handles signals, config reloads and default-gateway changes.
//!
//! ```text
//!  source ──snapshot──▶ stability ──advertised──▶ peer tables ──watch──▶ sessions
//!    ▲                     ▲   (hold-down, damping)                          │
//!    └── config reload ────┴──────────── SIGHUP / file change ───────────────┘
//! ```

mod drain;
mod gateway;
mod restart;
mod state;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ipnet::IpNet;
use tokio::sync::watch;
use tracing::{debug, error, info, warn};

use crate::config::{self, Config, PeerAddress, RouterId};
use crate::logging::{self, Kind, WithdrawCause};
use crate::model::SourceSnapshot;
use crate::probe;
use crate::session::{self, PeerHandle, PeerSpec, StopHow};
use crate::speaker::{self, PeerTable, Route};
use crate::stability::{self, Stability};
pub use state::{PeerView, RouteView, Shared, SharedState};

/// Options of `holdfast run`.
#[derive(Clone, Debug)]
pub struct Options {
    pub config: PathBuf,
    /// Withdraw every route and send Cease/Administrative Shutdown on exit,
    /// even with graceful restart enabled.
    pub withdraw_on_exit: bool,
    /// Where the restart marker lives (graceful restart's R bit).
    pub state_dir: PathBuf,
}

/// The periodic reconcile leaves a session alone for this long (plus its
/// MRAI) after its table changed: it may still be sending.
const RESYNC_SETTLE: Duration = Duration::from_secs(2);

/// A VIP file changed this recently is left to the file source at a resync.
const RESYNC_FILE_QUIET: Duration = Duration::from_secs(5);

/// Up to this many route changes at once are logged one by one at info
/// level; more are summed up in one line.
const LOG_EACH_CHANGE_UP_TO: usize = 20;

/// A withdrawn route's Service, and why it went.
type WithdrawNote = (Option<Arc<str>>, WithdrawCause);

/// What a stability update is given: the present set and the absences.
type UpdateInput<'a> = (
    &'a BTreeMap<IpNet, Route>,
    &'a BTreeMap<IpNet, stability::Absence>,
);

/// The stability layer's parameters: the config layer produced and
/// validated them (`config::Stability` is `stability::Params`); the drain's
/// wait comes from `[speaker]`.
fn stability_params(c: &Config) -> stability::Params {
    stability::Params {
        graceful_shutdown_wait: c.speaker.graceful_shutdown_wait,
        ..c.stability.clone()
    }
}

/// This node's name: `speaker.hostname`, else `$NODE_NAME`, else the
/// kernel's hostname.
pub fn node_name(c: &Config) -> String {
    c.speaker
        .hostname
        .clone()
        .or_else(|| std::env::var("NODE_NAME").ok().filter(|s| !s.is_empty()))
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "holdfast".into())
}

/// `router_id = "auto"`: `$NODE_IP` if it is IPv4, else the first global
/// IPv4 address of the node.
pub fn router_id(c: &Config) -> Result<Ipv4Addr, String> {
    match c.speaker.router_id {
        RouterId::Fixed(id) => Ok(id),
        RouterId::Auto => {
            if let Some(ip) = std::env::var("NODE_IP")
                .ok()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
            {
                return Ok(ip);
            }
            holdfast_sockopt::interface_addresses()
                .map_err(|e| format!("router_id = \"auto\": cannot list interface addresses: {e}"))?
                .into_iter()
                .filter_map(|a| match a.address {
                    IpAddr::V4(v4) if !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified() => Some(v4),
                    _ => None,
                })
                .next()
                .ok_or_else(|| "router_id = \"auto\": no $NODE_IP and no global IPv4 address on this node; set speaker.router_id".to_string())
        }
    }
}

struct Peer {
    config: config::Peer,
    handle: Option<PeerHandle>,
    table: watch::Sender<Arc<PeerTable>>,
    /// Why there is no session (no default gateway yet).
    waiting: Option<String>,
    /// Its BFD session (RFC 5880), when configured.
    bfd: Option<crate::bfd::driver::BfdSession>,
    /// When its desired table last changed (the periodic reconcile leaves
    /// a session alone while it may still be following a change).
    table_changed: Instant,
    /// The counters of its earlier sessions: they belong to the peer's
    /// name and survive a reset.
    carried: bgp_proto::fsm::Stats,
}

/// A connection accepted by the passive side, with its source.
type Accepted = (tokio::net::TcpStream, std::net::SocketAddr);

/// The passive side (`speaker.listen`) as it is bound now.
struct Listener {
    addr: std::net::SocketAddr,
    socket: Arc<tokio::net::TcpListener>,
    /// The MD5 keys set on it (RFC 2385), by peer address.
    keys: BTreeMap<IpAddr, Vec<u8>>,
    accept: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The HTTP API as it is bound now.
struct Api {
    addr: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

struct Daemon {
    opts: Options,
    config: Arc<Config>,
    config_error: Option<String>,
    node: String,
    router_id: Ipv4Addr,
    /// Whether OPENs carry graceful restart's R bit (RFC 4724 §3).
    restart: restart::Restart,
    /// Shared with the status view (`Shared::stability`).
    stability: state::SharedStability,
    snapshot: Arc<SourceSnapshot>,
    peers: BTreeMap<String, Peer>,
    shared: SharedState,
    file_settings: Option<watch::Sender<crate::source::file::FileSettings>>,
    /// BFD (RFC 5880), started when a peer first needs it.
    bfd: Option<crate::bfd::driver::Bfd>,
    /// The Kubernetes source, when `source.kind = "kubernetes"`.
    kube: Option<Arc<crate::source::kubernetes::Handle>>,
    kube_config: Option<watch::Sender<Arc<Config>>>,
    /// TCP probes of VIPs whose advertisement has one.
    probes: BTreeMap<IpAddr, Probing>,
    probe_tx: tokio::sync::mpsc::UnboundedSender<probe::ProbeResult>,
    /// True once the tables hold the source's first complete view: the
    /// sessions send End-of-RIB only then (RFC 4724 §4.1).
    routes_ready: watch::Sender<bool>,
    /// When the source first reported a complete view.
    first_synced: Option<Instant>,
    /// The stability layer was touched since its next deadline was last
    /// computed. That walks every route, so the main loop recomputes it
    /// only then, not on every wake-up (a 1 s tick, a session event): with
    /// 100k routes that walk is what idle time was spent on. (The status
    /// views are computed from the stability layer when asked for.)
    stability_dirty: bool,
    /// `stability.next_deadline()` as of the last change.
    next_deadline: Option<Instant>,
    /// The periodic reconcile (`[source] resync`).
    resync: crate::source::resync::Schedule,
    /// Routes and VIPs the reconciles have repaired.
    reconcile_repairs: u64,
    /// `holdfast drain` and the shutdown sequence (shared with the API).
    drain: drain::SharedControl,
    /// The tables last published marked some routes of a drained node
    /// GRACEFUL_SHUTDOWN.
    drained_marked: bool,
    /// The passive side (`speaker.listen`), whose TTL settings and MD5
    /// keys follow the peers.
    listener: Option<Listener>,
    /// Where the passive side hands accepted connections.
    accept_tx: tokio::sync::mpsc::UnboundedSender<Accepted>,
    /// The HTTP API; rebound when `speaker.api` changes.
    api: Api,
    /// What the API serves.
    view: Arc<View>,
    /// Turns true when the daemon stops.
    shutdown: watch::Receiver<bool>,
}

/// One probed VIP.
struct Probing {
    config: config::Probe,
    tracker: probe::Tracker,
    _task: probe::ProbeTask,
}

/// Reads the restart marker and leaves a fresh one: a process that finds
/// one was restarted (crash, or a graceful-restart exit) and sets the R bit
/// (RFC 4724 §3). A clean withdraw-on-exit removes it.
fn restart_marker(dir: &Path) -> bool {
    let marker = dir.join("running");
    let existed = marker.exists();
    if let Err(e) = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&marker, std::process::id().to_string()))
    {
        warn!(
            "cannot write the restart marker {}: {e} — graceful restart's R bit will not be set after a restart",
            marker.display()
        );
    }
    existed
}

/// The TTL settings the listening socket needs for the configured peers
/// (RFC 5082 §3; see `ListenerTtl` for the choice).
fn listener_ttl(c: &Config) -> session::socket::ListenerTtl {
    let opts: Vec<session::socket::SocketOptions> = c
        .peers
        .iter()
        .map(|p| session::socket_options(p, c.speaker.asn))
        .collect();
    session::socket::ListenerTtl::for_peers(&opts)
}

fn config_identity(c: &Config) -> impl PartialEq + use<> {
    (
        c.speaker.asn,
        c.speaker.router_id,
        c.speaker.hostname.clone(),
    )
}

impl Daemon {
    fn peer_spec(&self, p: &config::Peer, gw: gateway::Gateway) -> PeerSpec {
        PeerSpec {
            peer: p.clone(),
            address: gw.address,
            interface: gw.interface,
            local_asn: self.config.speaker.asn,
            router_id: self.router_id,
            hostname: self.node.clone(),
            restarting: self.restart.restarting(p, Instant::now()),
        }
    }

    fn resolve(p: &config::Peer) -> Result<gateway::Gateway, String> {
        match p.address {
            PeerAddress::Ip(ip) => Ok(gateway::Gateway {
                address: ip,
                interface: None,
            }),
            PeerAddress::DefaultGateway(f) => gateway::default_gateway(f),
            PeerAddress::Interface(name) => gateway::link_router(name),
        }
    }

    fn start_peer(&mut self, p: &config::Peer) {
        let (tx, _) = watch::channel(Arc::new(PeerTable::new()));
        let mut peer = Peer {
            config: p.clone(),
            handle: None,
            table: tx,
            waiting: None,
            bfd: None,
            table_changed: Instant::now(),
            carried: Default::default(),
        };
        match Self::resolve(p) {
            Ok(gw) => {
                let addr = gw.address;
                let spec = self.peer_spec(p, gw);
                if let Some(b) = &p.bfd {
                    // BFD packets to a link-local address would need its
                    // interface too, which the BFD driver does not take.
                    let bfd = if spec.interface.is_some() {
                        Err(std::io::Error::new(
                            std::io::ErrorKind::Unsupported,
                            format!(
                                "not supported with the link-local default gateway {}",
                                spec.display_address()
                            ),
                        ))
                    } else {
                        self.bfd_session(p, b, addr)
                    };
                    match bfd {
                        Ok(s) => peer.bfd = Some(s),
                        Err(e) => {
                            // Without BFD the session must not come up (it
                            // would wait for BFD for ever): say why.
                            error!(peer = %p.name, "BFD: {e}");
                            peer.waiting = Some(format!("BFD unavailable: {e}"));
                            self.peers.insert(p.name.clone(), peer);
                            return;
                        }
                    }
                }
                peer.handle = Some(session::spawn(
                    spec,
                    peer.table.subscribe(),
                    self.routes_ready.subscribe(),
                    peer.bfd.as_ref().map(|b| b.status.clone()),
                ));
            }
            Err(why) => {
                warn!(peer = %p.name, "{why}");
                peer.waiting = Some(why);
            }
        }
        self.peers.insert(p.name.clone(), peer);
        // A new session starts from the current routes.
        self.publish_tables();
    }

    /// Starts the BFD session of a peer (binding the BFD ports on first use).
    fn bfd_session(
        &mut self,
        p: &config::Peer,
        b: &config::Bfd,
        addr: IpAddr,
    ) -> std::io::Result<crate::bfd::driver::BfdSession> {
        if self.bfd.is_none() {
            self.bfd = Some(crate::bfd::driver::Bfd::start().map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot bind UDP {}/{} (root or CAP_NET_BIND_SERVICE needed): {e}",
                        crate::bfd::driver::SINGLE_HOP_PORT,
                        crate::bfd::driver::MULTIHOP_PORT
                    ),
                )
            })?);
        }
        let spec = crate::bfd::driver::BfdSpec {
            peer: addr,
            local: p.source_address,
            multihop: b.multihop,
            desired_min_tx: b.min_tx,
            required_min_rx: b.min_rx,
            detect_mult: b.multiplier,
        };
        self.bfd.as_mut().expect("started above").add(&p.name, spec)
    }

    async fn stop_peer(&mut self, name: &str, how: StopHow) {
        if let Some(p) = self.peers.remove(name)
            && let Some(h) = p.handle
        {
            // Its End-of-RIB ended the restart for this peer: the session
            // that replaces it (reload, new gateway) sends R=0.
            if h.spec.restarting && !h.snapshot().restarting {
                self.restart.end_of_rib_sent(name);
            }
            h.stop(how, Duration::from_secs(3)).await;
        }
    }

    /// The R bit follows the restart (RFC 4724 §4.1): a session that sent
    /// End-of-RIB ends it for its peer; the restart time ends it for every
    /// session still sending R.
    fn follow_restart(&mut self) {
        if !self.restart.in_progress() {
            return;
        }
        let now = Instant::now();
        let restart = &mut self.restart;
        for (name, p) in &self.peers {
            if let Some(h) = &p.handle
                && h.spec.restarting
                && !h.snapshot().restarting
            {
                restart.end_of_rib_sent(name);
            }
        }
        let in_progress = restart.settle(now, &self.config.peers);
        for p in self.peers.values_mut() {
            if let Some(h) = p.handle.as_mut()
                && h.spec.restarting
                && !restart.restarting(&p.config, now)
            {
                info!(peer = %p.config.name, "graceful restart over for this peer: later OPENs without the R bit");
                h.end_restart();
            }
        }
        if !in_progress {
            info!("graceful restart over: every later session sends R=0");
        }
    }

    /// Recomputes every peer's table and hands changed ones to the sessions.
    fn publish_tables(&mut self) {
        let (tables, drained) = {
            let st = self.stability.lock().expect("stability lock");
            let drained: std::collections::BTreeSet<IpNet> = st.drained().copied().collect();
            (speaker::peer_tables(&self.config, st.advertised()), drained)
        };
        self.drained_marked = !drained.is_empty();
        let control = self.drain.0.lock().expect("drain lock");
        for (name, table) in tables {
            // RFC 8326 §3: routes of a drained node (cordoned, excluded)
            // carry GRACEFUL_SHUTDOWN until the stability layer withdraws
            // them; `holdfast drain` and a shutdown do the same to all.
            let table = if drained.is_empty() {
                table
            } else {
                speaker::drain::mark_graceful_shutdown(table, |p| drained.contains(p))
            };
            let table = control.shape(&name, table);
            if let Some(p) = self.peers.get_mut(&name) {
                let modified = p.table.send_if_modified(|cur| {
                    if **cur == table {
                        false
                    } else {
                        *cur = Arc::new(table);
                        true
                    }
                });
                if modified {
                    p.table_changed = Instant::now();
                }
            }
        }
    }

    /// Which peers' tables hold `prefix` now.
    fn peers_with(&self, prefix: &IpNet) -> Vec<String> {
        self.peers
            .iter()
            .filter(|(_, p)| p.table.borrow().contains_key(prefix))
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// For the withdraw lines: the Service and the cause of each prefix the
    /// next stability call may withdraw, read before the call (after it,
    /// the layer has forgotten them). Absences due by `now` (every absence
    /// with `all_absent`: new timers may make any of them due), and for an
    /// update, the advertised prefixes it reports absent (withdrawn at once
    /// when their reason has no delay) — or with no hold-down, every
    /// advertised prefix missing from `present`. Skipped for a bulk change
    /// nobody would see at info level.
    fn withdraw_notes(
        &self,
        st: &Stability<IpNet, Route>,
        now: Instant,
        all_absent: bool,
        update: Option<UpdateInput<'_>>,
    ) -> BTreeMap<IpNet, WithdrawNote> {
        let service = |p: &IpNet| st.advertised_route(p).and_then(|r| r.service.clone());
        let mut notes = BTreeMap::new();
        if update.is_none() || self.next_deadline.is_some_and(|d| d <= now) {
            for (p, state) in st.states() {
                let due = all_absent
                    || match &state {
                        stability::KeyState::HeldDown { until, .. }
                        | stability::KeyState::Draining { until, .. } => {
                            until.is_some_and(|t| t <= now)
                        }
                        stability::KeyState::Damped { until_estimate, .. } => {
                            until_estimate.is_some_and(|t| t <= now)
                        }
                        _ => false,
                    };
                if let Some(cause) = WithdrawCause::from_state(&state).filter(|_| due) {
                    notes.insert(*p, (service(p), cause));
                }
            }
        }
        if let Some((present, absences)) = update {
            for (p, absence) in absences {
                if !notes.contains_key(p) && st.state(p) == Some(stability::KeyState::Advertised) {
                    notes.insert(*p, (service(p), WithdrawCause::Absence(*absence)));
                }
            }
            if st.params().withdraw_hold_down.is_zero() {
                for (p, r) in st.advertised() {
                    if !present.contains_key(p) && !notes.contains_key(p) {
                        let cause = WithdrawCause::Absence(stability::Absence::Vanished);
                        notes.insert(*p, (r.service.clone(), cause));
                    }
                }
            }
        }
        if notes.len() > LOG_EACH_CHANGE_UP_TO && !tracing::enabled!(tracing::Level::DEBUG) {
            notes.clear();
        }
        notes
    }

    /// Logs the changes, hands the new tables to the sessions and tells
    /// Kubernetes. `changes` is dropped before the tables are built: for a
    /// bulk load it holds every route (6 MB of the peak with 100k VIPs).
    /// `notes`, from [`Self::withdraw_notes`] before the change, give the
    /// withdraw lines their Service and reason.
    fn apply(
        &mut self,
        changes: Vec<stability::Change<IpNet, Route>>,
        notes: &BTreeMap<IpNet, WithdrawNote>,
    ) {
        if changes.is_empty() {
            return;
        }
        // Who had each withdrawn prefix, and whether an advertised one is
        // new (rather than new attributes), for the Kubernetes Events; only
        // the Kubernetes source has anyone to tell.
        let before: Vec<(IpNet, bool, Vec<String>)> = if self.kube.is_some() {
            changes
                .iter()
                .map(|c| match c {
                    stability::Change::Advertise(p, _) => (*p, true, self.peers_with(p)),
                    stability::Change::Withdraw(p) => (*p, false, self.peers_with(p)),
                })
                .collect()
        } else {
            Vec::new()
        };
        // One line per route for the everyday few; a bulk load (a VIP file
        // of 100k) gets one summary line at info, and the routes at debug.
        let bulk = changes.len() > LOG_EACH_CHANGE_UP_TO;
        let from_file = self.file_settings.is_some();
        let params = stability_params(&self.config);
        for c in &changes {
            match c {
                stability::Change::Advertise(p, r) => {
                    let service = r.service.as_deref().map(tracing::field::display);
                    if bulk {
                        debug!(prefix = %p, service, "advertised")
                    } else {
                        info!(prefix = %p, service, "advertised")
                    }
                }
                stability::Change::Withdraw(p) => {
                    let (service, reason) = match notes.get(p) {
                        Some((service, cause)) => {
                            (service.as_deref(), cause.describe(&params, from_file))
                        }
                        None => (None, "no longer wanted by the source".to_owned()),
                    };
                    let service = service.map(tracing::field::display);
                    let reason = reason.as_str();
                    if bulk {
                        debug!(prefix = %p, service, reason, "withdrawn")
                    } else {
                        info!(prefix = %p, service, reason, "withdrawn")
                    }
                }
            }
        }
        if bulk {
            let advertised = changes
                .iter()
                .filter(|c| matches!(c, stability::Change::Advertise(..)))
                .count();
            info!(
                advertised,
                withdrawn = changes.len() - advertised,
                "routes changed (each one logged at debug level)"
            );
        }
        drop(changes);
        self.publish_tables();
        if let Some(k) = &self.kube {
            for (prefix, advertise, had) in before {
                if advertise && had.is_empty() {
                    let peers = self.peers_with(&prefix);
                    if !peers.is_empty() {
                        k.events().advertised(prefix.addr(), &peers);
                    }
                } else if !advertise && !had.is_empty() {
                    k.events().withdrawn(prefix.addr(), &had);
                }
            }
        }
    }

    fn on_snapshot(&mut self, snap: SourceSnapshot) {
        // Not logged here: each source logs its own problems when they
        // change (the file source with the count of VIPs kept, the
        // Kubernetes watchers per watcher); logging them again per
        // snapshot doubled a VIP file's error list in the log.
        self.snapshot = Arc::new(snap);
        self.sync_probes();
        self.recompute();
    }

    /// The probe a VIP's advertisements ask for (the first that has one).
    fn probe_for(
        &self,
        advertisements: &std::collections::BTreeSet<String>,
    ) -> Option<config::Probe> {
        self.config
            .advertisements
            .iter()
            .filter(|a| advertisements.contains(&a.name))
            .find_map(|a| a.probe)
    }

    /// Starts probes for VIPs that need one, stops those no longer needed.
    fn sync_probes(&mut self) {
        let wanted: BTreeMap<IpAddr, config::Probe> = self
            .snapshot
            .vips
            .iter()
            .filter_map(|(ip, v)| Some((*ip, self.probe_for(&v.advertisements)?)))
            .collect();
        self.probes
            .retain(|ip, p| wanted.get(ip) == Some(&p.config));
        for (ip, cfg) in wanted {
            if !self.probes.contains_key(&ip) {
                let task = probe::spawn(ip, cfg, self.probe_tx.clone());
                self.probes.insert(
                    ip,
                    Probing {
                        config: cfg,
                        tracker: probe::Tracker::default(),
                        _task: task,
                    },
                );
            }
        }
    }

    fn on_probe(&mut self, r: probe::ProbeResult) {
        let Some(p) = self.probes.get_mut(&r.vip) else {
            return;
        };
        if let Some(verdict) = p.tracker.record(&p.config, r.result) {
            match verdict {
                probe::Verdict::Failing => warn!(
                    vip = %r.vip,
                    port = p.config.port,
                    error = p.tracker.last_error.as_deref().unwrap_or(""),
                    "TCP probe failed {} times: withdrawing (the datapath does not serve it)",
                    p.config.fail_after
                ),
                probe::Verdict::Passing => {
                    info!(vip = %r.vip, port = p.config.port, "TCP probe passes: advertising")
                }
                probe::Verdict::Unknown => {}
            }
            self.recompute();
        }
    }

    /// The source's set, gated by the probes, into the stability layer.
    fn recompute(&mut self) {
        let now = Instant::now();
        let snap = self.snapshot.clone();
        let mut absences: BTreeMap<IpNet, stability::Absence> = snap
            .absences
            .iter()
            .map(|(ip, a)| (IpNet::from(*ip), *a))
            .collect();
        // Collected in one go from the sorted snapshot (full B-tree nodes;
        // inserting in order leaves them half empty: with 100k VIPs, 6 MB
        // more at the peak of every update).
        let present: BTreeMap<IpNet, Route> = snap
            .vips
            .iter()
            .filter_map(
                |(ip, v)| match self.probes.get(ip).map(|p| p.tracker.verdict) {
                    None | Some(probe::Verdict::Passing) => Some((
                        IpNet::from(*ip),
                        Route {
                            advertisements: v.advertisements.clone(),
                            service: v.service.clone(),
                        },
                    )),
                    Some(probe::Verdict::Failing) => {
                        absences.insert(IpNet::from(*ip), stability::Absence::ProbeFailed);
                        None
                    }
                    Some(probe::Verdict::Unknown) => None,
                },
            )
            .collect();
        let (changes, notes) = {
            let mut st = self.stability.lock().expect("stability lock");
            let notes = self.withdraw_notes(&st, now, false, Some((&present, &absences)));
            (st.update(now, &present, &absences, snap.healthy), notes)
        };
        // Gone before the peer tables are built: with 100k VIPs this map
        // was 4 MB of the peak.
        drop(present);
        self.stability_dirty = true;
        if snap.synced && self.first_synced.is_none() {
            // The instant the stability layer saw the complete view: its
            // VIPs are due for advertisement by `now + advertise_delay`.
            self.first_synced = Some(now);
        }
        // A node drained (or undrained) inside graceful_shutdown_wait
        // changes no route in the stability layer, only the attributes
        // the speaker sends (GRACEFUL_SHUTDOWN): the tables are rebuilt
        // for it too.
        let unchanged = changes.is_empty();
        self.apply(changes, &notes);
        if unchanged {
            let drained = self
                .stability
                .lock()
                .expect("stability lock")
                .drained()
                .next()
                .is_some();
            if drained || self.drained_marked {
                self.publish_tables();
            }
        }
    }

    /// End-of-RIB tells a peer that it has all our routes; after a restart
    /// it then drops the stale ones we did not send again (RFC 4724 §4.2).
    /// So the tables count as complete only once the source has reported a
    /// complete view and the VIPs in it have had their advertise_delay.
    fn check_routes_ready(&mut self) {
        if *self.routes_ready.borrow() {
            return;
        }
        let Some(since) = self.first_synced else {
            return;
        };
        if Instant::now().saturating_duration_since(since) >= self.config.stability.advertise_delay
        {
            info!("the source's first complete view is advertised: End-of-RIB can go out");
            self.routes_ready.send_replace(true);
        }
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
            && self.snapshot.healthy
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
                let n = set_differences(&self.snapshot.vips, &vips);
                if n > 0 {
                    warn!(
                        differences = n,
                        "resync: the VIP file differs from the set in force (a missed change): applying it"
                    );
                    let mut snap = (*self.snapshot).clone();
                    snap.vips = Arc::new(vips);
                    self.snapshot = Arc::new(snap);
                    self.recompute();
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
            if let PeerCheck::Repair(r) = check_peer(&desired, &rt.advertised, synced, age, settle)
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
        if std::mem::take(&mut self.stability_dirty) {
            self.next_deadline = self
                .stability
                .lock()
                .expect("stability lock")
                .next_deadline();
        }
        let mut s = self.shared.lock().expect("shared state lock");
        s.config = self.config.clone();
        s.config_error = self.config_error.clone();
        s.snapshot = self.snapshot.clone();
        s.reconcile_repairs =
            self.reconcile_repairs + self.kube.as_ref().map_or(0, |k| k.resync_repairs());
        s.probes = self
            .probes
            .iter()
            .map(|(ip, p)| {
                (
                    *ip,
                    state::ProbeView {
                        port: p.config.port,
                        verdict: p.tracker.verdict,
                        failures: p.tracker.consecutive_failures(),
                        fail_after: p.config.fail_after,
                        error: p.tracker.last_error.clone(),
                    },
                )
            })
            .collect();
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
                    bfd: p.bfd.as_ref().map(|b| b.status.clone()),
                    carried: p.carried.clone(),
                })
            })
            .collect();
    }

    /// Config reload (SIGHUP or the file changed), everything or nothing:
    /// whatever can fail (reading and checking the file, resolving the
    /// router ID, binding a new API or BGP listening address) is done
    /// before anything changes, and a failure leaves the running config in
    /// force, logged in one line and shown by `holdfast_config_reload_error`.
    /// Then peers added, removed or changed are started, stopped or reset
    /// one by one; unchanged sessions stay up and send nothing unless their
    /// routes changed.
    ///
    /// Returns the file's identity as it was *before* it was read: an edit
    /// made while the reload ran then differs from it, and the poller
    /// reloads again.
    async fn reload(&mut self) -> Option<Stamp> {
        let before = stamp(&self.opts.config);
        match self.prepare(&self.opts.config.clone()).await {
            Ok(None) => self.config_error = None,
            Ok(Some(prepared)) => {
                self.config_error = None;
                self.commit(prepared).await;
            }
            Err(text) => {
                error!(
                    "config reload refused, the running config stays: {}",
                    text.replace('\n', "; ")
                );
                self.config_error = Some(text);
            }
        }
        before
    }

    /// Everything of a reload that can fail. `Ok(None)`: nothing changed.
    async fn prepare(&self, path: &Path) -> Result<Option<Prepared>, String> {
        let new = config::load(path).map_err(|diags| {
            diags
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        if new == *self.config {
            return Ok(None);
        }
        let identity_changed = config_identity(&new) != config_identity(&self.config);
        let router_id = if identity_changed {
            router_id(&new)?
        } else {
            self.router_id
        };
        // Checked at load time already; the stability layer checks again
        // when it takes them, which must not be the first refusal.
        new.stability
            .validate()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let api = if new.speaker.api != self.api.addr {
            Some(
                crate::api::bind(new.speaker.api)
                    .await
                    .map_err(|e| format!("speaker.api: {e}"))?,
            )
        } else {
            None
        };
        Ok(Some(Prepared {
            config: new,
            router_id,
            identity_changed,
            api,
        }))
    }

    /// Applies a prepared reload.
    async fn commit(&mut self, prepared: Prepared) {
        let Prepared {
            config: new,
            router_id,
            identity_changed,
            api,
        } = prepared;
        // The listening socket is rebound before anything else changes:
        // it is the last thing that can fail.
        let listener = if new.speaker.listen != self.config.speaker.listen {
            match self.rebind_listener(&new) {
                Ok(l) => Some(l),
                Err(e) => {
                    let text = format!("speaker.listen: {e}");
                    error!("config reload refused, the running config stays: {text}");
                    self.config_error = Some(text);
                    return;
                }
            }
        } else {
            None
        };
        info!("config reloaded from {}", self.opts.config.display());
        let old = std::mem::replace(&mut self.config, Arc::new(new));
        if identity_changed {
            self.node = node_name(&self.config);
            self.router_id = router_id;
        }
        if let Some(l) = listener {
            self.listener = l;
        }
        if let Some(l) = api {
            let addr = self.config.speaker.api;
            info!(api = %addr, "HTTP API listening");
            let new_api = spawn_api(l, addr, self.view.clone(), self.shutdown.clone());
            let old_api = std::mem::replace(&mut self.api, new_api);
            let _ = old_api.stop.send(true);
        }
        self.drain.0.lock().expect("drain lock").wait = self.config.speaker.graceful_shutdown_wait;
        // Stability parameters (validated in `prepare`).
        if old.stability != self.config.stability
            || old.speaker.graceful_shutdown_wait != self.config.speaker.graceful_shutdown_wait
        {
            let now = Instant::now();
            let (set, notes) = {
                let mut st = self.stability.lock().expect("stability lock");
                let notes = self.withdraw_notes(&st, now, true, None);
                (st.set_params(now, stability_params(&self.config)), notes)
            };
            match set {
                Ok(changes) => {
                    self.stability_dirty = true;
                    self.apply(changes, &notes);
                }
                Err(e) => error!("stability parameters: {e}"),
            }
        }
        // Peers, one by one. The listener's keys first, so that a peer
        // added or re-keyed can connect as soon as its session exists.
        self.follow_listener_keys();
        let new_peers: BTreeMap<String, config::Peer> = self
            .config
            .peers
            .iter()
            .map(|p| (p.name.clone(), p.clone()))
            .collect();
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for name in names {
            let Some(cur) = self.peers.get(&name).map(|c| c.config.clone()) else {
                continue;
            };
            match new_peers.get(&name) {
                None => {
                    info!(peer = %name, "peer removed from the config");
                    self.stop_peer(&name, StopHow::Deconfigured).await;
                }
                Some(p) if identity_changed || needs_reset(&cur, p) => {
                    info!(peer = %name, "peer changed: resetting its session");
                    let how = if cur.address != p.address {
                        StopHow::Deconfigured
                    } else {
                        StopHow::Reconfigured
                    };
                    self.reset_peer(p, how).await;
                }
                Some(p) if cur != *p => {
                    // Only timers of the next connection attempt changed
                    // (connect_retry, RFC 4271 §8.2.2): the running session
                    // keeps its TCP connection and its routes.
                    info!(peer = %name, "peer's connect_retry changed: no reset; it applies to this peer's next session");
                    if let Some(cur) = self.peers.get_mut(&name) {
                        cur.config = p.clone();
                    }
                }
                Some(_) => {}
            }
        }
        for (name, p) in &new_peers {
            if !self.peers.contains_key(name) {
                info!(peer = %name, "peer added");
                self.start_peer(p);
            }
        }
        // The listener's TTL settings follow the peers.
        if let Some(l) = &self.listener {
            let ttl = listener_ttl(&self.config);
            if ttl != listener_ttl(&old) {
                match ttl.apply(l.socket.as_ref()) {
                    Ok(()) => {
                        info!(
                            ttl = ttl.ttl,
                            min_ttl = ttl.min_ttl,
                            "listening socket's TTL settings changed"
                        )
                    }
                    Err(e) => error!("listening socket's TTL settings: {e}"),
                }
            }
        }
        // The sources follow the config.
        if let Some(tx) = &self.kube_config {
            let _ = tx.send(self.config.clone());
        }
        if let (Some(tx), Some(s)) = (
            &self.file_settings,
            crate::source::file::FileSettings::from_config(&self.config),
        ) {
            tx.send_if_modified(|cur| {
                if *cur == s {
                    false
                } else {
                    *cur = s;
                    true
                }
            });
        }
        self.sync_probes();
        self.recompute();
        if old.source != self.config.source
            && std::mem::discriminant(&old.source) != std::mem::discriminant(&self.config.source)
        {
            warn!("source.kind changed: restart holdfast for it to take effect");
        }
        self.publish_tables();
    }

    /// The passive side for `new.speaker.listen`: `Ok(None)` when it no
    /// longer listens. A new address on the same port as the old one may
    /// need the old socket closed first (a wildcard and a specific address
    /// conflict); if the new one then fails, the old address is bound again.
    fn rebind_listener(&mut self, new: &Config) -> Result<Option<Listener>, String> {
        let Some(addr) = new.speaker.listen else {
            info!("no longer accepting BGP connections (speaker.listen removed)");
            return Ok(None);
        };
        let keys = listener_keys(new);
        let ttl = listener_ttl(new);
        match bind_listener(addr, &keys, ttl, self.accept_tx.clone()) {
            Ok(l) => Ok(Some(l)),
            Err(e)
                if self
                    .listener
                    .as_ref()
                    .is_some_and(|l| l.addr.port() == addr.port()) =>
            {
                let old = self.listener.take().expect("checked above");
                let (old_addr, old_keys) = (old.addr, old.keys.clone());
                drop(old);
                match bind_listener(addr, &keys, ttl, self.accept_tx.clone()) {
                    Ok(l) => Ok(Some(l)),
                    Err(e2) => {
                        let back = listener_ttl(&self.config);
                        self.listener =
                            bind_listener(old_addr, &old_keys, back, self.accept_tx.clone()).ok();
                        if self.listener.is_none() {
                            error!(listen = %old_addr, "cannot bind the old listening address again: no passive side until the next reload");
                        }
                        Err(format!("{addr}: {e2} (first try: {e})"))
                    }
                }
            }
            Err(e) => Err(format!("{addr}: {e}")),
        }
    }

    /// The listener's MD5 keys (RFC 2385 §2: the key is per connection, so
    /// the listening socket needs one for every peer that may connect)
    /// follow the peers: added, changed and removed ones.
    fn follow_listener_keys(&mut self) {
        let Some(l) = self.listener.as_mut() else {
            return;
        };
        let want = listener_keys(&self.config);
        for ip in l.keys.keys().filter(|ip| !want.contains_key(ip)) {
            if let Err(e) = holdfast_sockopt::clear_md5_key(l.socket.as_ref(), *ip) {
                error!(peer = %ip, "listening socket: cannot remove the MD5 key: {e}");
            }
        }
        for (ip, key) in &want {
            if l.keys.get(ip) != Some(key) {
                match holdfast_sockopt::set_md5_key(l.socket.as_ref(), *ip, key) {
                    Ok(()) => info!(peer = %ip, "listening socket: MD5 key set"),
                    Err(e) => error!(peer = %ip, "listening socket: cannot set the MD5 key: {e}"),
                }
            }
        }
        l.keys = want;
    }

    /// Stops a peer's session and starts a new one from `p`; its counters
    /// carry over.
    async fn reset_peer(&mut self, p: &config::Peer, how: StopHow) {
        let (mut carried, runtime) = match self.peers.get(&p.name) {
            Some(cur) => (
                cur.carried.clone(),
                cur.handle.as_ref().map(|h| h.runtime.clone()),
            ),
            None => Default::default(),
        };
        self.stop_peer(&p.name, how).await;
        // Read after the stop: its NOTIFICATION counts.
        if let Some(rt) = runtime {
            state::add_stats(&mut carried, &rt.lock().expect("peer runtime lock").stats);
        }
        self.start_peer(p);
        if let Some(new) = self.peers.get_mut(&p.name) {
            new.carried = carried;
        }
    }

    /// `default-gateway` peers follow the gateway.
    async fn check_gateways(&mut self) {
        let moved: Vec<(config::Peer, Result<gateway::Gateway, String>)> = self
            .peers
            .values()
            .filter(|p| {
                matches!(
                    p.config.address,
                    PeerAddress::DefaultGateway(_) | PeerAddress::Interface(_)
                )
            })
            .filter_map(|p| {
                let now = Self::resolve(&p.config);
                let cur = p
                    .handle
                    .as_ref()
                    .map(|h| (h.spec.address, h.spec.interface.clone()));
                match (&now, cur) {
                    (Ok(g), Some((a, i))) if g.address == a && g.interface == i => None,
                    (Err(_), None) => None,
                    _ => Some((p.config.clone(), now)),
                }
            })
            .collect();
        for (p, now) in moved {
            match &now {
                Ok(gateway) => info!(peer = %p.name, %gateway, "default gateway changed"),
                Err(why) => info!(peer = %p.name, "default gateway gone: {why}"),
            }
            self.reset_peer(&p, StopHow::Deconfigured).await;
        }
    }

    /// SIGTERM: answers whether the daemon stops now. When some peers will
    /// lose this node's routes (no graceful restart, or
    /// `--withdraw-on-exit`) and `graceful_shutdown_wait` is not zero,
    /// their routes first carry GRACEFUL_SHUTDOWN for the wait (RFC 8326
    /// §3) and the daemon stops when it is over; a second signal stops it
    /// at once.
    fn begin_exit(&mut self) -> bool {
        let withdrawing: std::collections::BTreeSet<String> = self
            .peers
            .values()
            .filter(|p| !p.config.graceful_restart.enabled || self.opts.withdraw_on_exit)
            .map(|p| p.config.name.clone())
            .collect();
        let now = Instant::now();
        {
            let mut control = self.drain.0.lock().expect("drain lock");
            if control.exiting {
                info!("second signal: stopping without waiting");
                return true;
            }
            control.exiting = true;
            if withdrawing.is_empty() || control.wait.is_zero() {
                return true;
            }
            let wait = control.wait;
            if control.drain.start(now, wait) {
                control.scope = drain::Scope::Peers(withdrawing.clone());
                info!(
                    peers = ?withdrawing,
                    "routes marked GRACEFUL_SHUTDOWN (RFC 8326) for {wait:?}; withdrawn and the sessions closed after that"
                );
            }
            if !matches!(
                control.drain.phase(),
                speaker::DrainPhase::GracefulShutdown { .. }
            ) {
                // Drained already: nothing to wait for.
                return true;
            }
        }
        self.publish_tables();
        false
    }

    /// The drain's timer: answers whether the daemon stops now (a shutdown
    /// whose wait is over).
    fn poll_drain(&mut self) -> bool {
        let (moved, exiting) = {
            let mut control = self.drain.0.lock().expect("drain lock");
            (control.drain.poll(Instant::now()), control.exiting)
        };
        if moved && exiting {
            // The sessions withdraw every route, then Cease (shutdown()).
            return true;
        }
        if moved {
            info!(
                "graceful_shutdown_wait over: this node's routes are withdrawn (holdfast undrain brings them back)"
            );
            self.publish_tables();
        }
        false
    }

    /// Ends every session; returns how many ended for graceful restart and
    /// how many withdrew their routes.
    async fn shutdown(&mut self) -> (usize, usize) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        let mut any_graceful = false;
        let (mut graceful, mut withdrawn) = (0, 0);
        for name in names {
            let gr = self
                .peers
                .get(&name)
                .is_some_and(|p| p.config.graceful_restart.enabled);
            let how = if gr && !self.opts.withdraw_on_exit {
                any_graceful = true;
                graceful += 1;
                StopHow::Graceful
            } else {
                withdrawn += 1;
                StopHow::Withdraw(format!("{}: holdfast shutting down", self.node))
            };
            self.stop_peer(&name, how).await;
        }
        // A graceful exit keeps the marker: the next start is a restart and
        // sets the R bit. After withdrawing everything, it is a fresh start.
        if !any_graceful {
            let _ = std::fs::remove_file(self.opts.state_dir.join("running"));
        }
        (graceful, withdrawn)
    }
}

struct View(SharedState, drain::SharedControl);

impl View {
    /// The status with the drain, while there is one.
    fn with_drain(&self, mut status: crate::status::Status) -> crate::status::Status {
        let control = self.1.0.lock().expect("drain lock");
        if control.drain.draining() || control.exiting {
            status.drain = Some(control.status(Instant::now()));
        }
        status
    }
}

impl crate::api::StateView for View {
    fn status(&self) -> crate::status::Status {
        let status = self.0.lock().expect("shared state lock").status();
        self.with_drain(status)
    }
    fn status_page(&self, page: crate::status::RoutePage) -> crate::status::Status {
        let status = self.0.lock().expect("shared state lock").status_page(page);
        self.with_drain(status)
    }
    fn explain(&self, vip: IpAddr) -> crate::status::Explanation {
        let mut explanation = self.0.lock().expect("shared state lock").explain(vip);
        let control = self.1.0.lock().expect("drain lock");
        let d = control.status(Instant::now());
        let why = match (d.state.as_str(), d.seconds_left) {
            ("draining", Some(left)) => Some(format!(
                "this node is draining: its routes carry GRACEFUL_SHUTDOWN (RFC 8326) and are withdrawn in {left:.1}s"
            )),
            ("drained", _) => Some(
                "this node is drained (holdfast drain): its routes are withdrawn until holdfast undrain".to_string(),
            ),
            _ => None,
        };
        if let Some(why) = why {
            explanation.reasons.push(why);
        }
        explanation
    }
    fn drain(&self, on: bool) -> Result<crate::status::DrainStatus, String> {
        let (control, wake) = &*self.1;
        let answer = control.lock().expect("drain lock").set(on, Instant::now());
        if answer.is_ok() {
            info!(
                "{}",
                if on {
                    "holdfast drain: routes marked GRACEFUL_SHUTDOWN, withdrawn after graceful_shutdown_wait"
                } else {
                    "holdfast undrain: routes advertised normally again"
                }
            );
            wake.notify_one();
        }
        answer
    }
    fn ready(&self) -> Result<(), String> {
        self.readiness().map(|_| ())
    }
    fn readiness(&self) -> Result<Option<String>, String> {
        match self.0.lock().expect("shared state lock").readiness() {
            state::Readiness::Ready(note) => Ok(note),
            state::Readiness::NotReady(why) => Err(why),
        }
    }
}

/// A file's identity for change detection: (length, mtime, inode).
type Stamp = (u64, std::time::SystemTime, u64);

/// A reload that passed every check, ready to apply.
struct Prepared {
    config: Config,
    router_id: Ipv4Addr,
    identity_changed: bool,
    api: Option<tokio::net::TcpListener>,
}

/// Whether a peer's session must be reset for `new` to apply. Only
/// `connect_retry` does not need one: it paces connection attempts
/// (RFC 4271 §8.2.2, the ConnectRetryTimer) and nothing negotiated on an
/// established session depends on it.
fn needs_reset(old: &config::Peer, new: &config::Peer) -> bool {
    let mut same_timers = new.clone();
    same_timers.connect_retry = old.connect_retry;
    same_timers != *old
}

/// The MD5 keys the listening socket needs: one per peer with a fixed
/// address and a key.
fn listener_keys(c: &Config) -> BTreeMap<IpAddr, Vec<u8>> {
    c.peers
        .iter()
        .filter_map(|p| match (&p.address, p.md5_key()) {
            (PeerAddress::Ip(ip), Some(k)) => Some((*ip, k.to_vec())),
            _ => None,
        })
        .collect()
}

/// Binds the passive side and starts handing its connections to `to`.
fn bind_listener(
    addr: std::net::SocketAddr,
    keys: &BTreeMap<IpAddr, Vec<u8>>,
    ttl: session::socket::ListenerTtl,
    to: tokio::sync::mpsc::UnboundedSender<Accepted>,
) -> std::io::Result<Listener> {
    let list: Vec<(IpAddr, Vec<u8>)> = keys.iter().map(|(ip, k)| (*ip, k.clone())).collect();
    let socket = Arc::new(session::socket::listen(addr, &list, ttl)?);
    info!(listen = %addr, ttl = ttl.ttl, min_ttl = ttl.min_ttl, "accepting BGP connections from configured peers");
    let l = socket.clone();
    let accept = tokio::spawn(async move {
        loop {
            match l.accept().await {
                Ok(accepted) => {
                    if to.send(accepted).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // Out of descriptors under a connection flood, say.
                    if let Some(note) = logging::allow(Kind::Connection, "listener") {
                        warn!("accept: {e}{note}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(Listener {
        addr,
        socket,
        keys: keys.clone(),
        accept,
    })
}

/// Serves the API on `listener` until the daemon stops or this server is
/// replaced (a reload moved `speaker.api`).
fn spawn_api(
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    view: Arc<View>,
    mut daemon_stops: watch::Receiver<bool>,
) -> Api {
    let (stop, mut replaced) = watch::channel(false);
    let task = tokio::spawn(crate::api::serve_listener(listener, view, async move {
        tokio::select! {
            _ = daemon_stops.wait_for(|stop| *stop) => {}
            _ = replaced.wait_for(|stop| *stop) => {}
        }
    }));
    Api { addr, stop, task }
}

/// The file's identity for change detection.
fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// Longest wait for the config and its password files to be read. The
/// reader refuses FIFOs and devices at once; this bounds what is left, a
/// file system that hangs (a dead NFS server).
const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Reads and checks the config on the blocking pool, never on the
/// runtime's thread: sessions (their keepalives), the API and the sources
/// keep running while it is read, however the read goes. The error is the
/// diagnostics as `holdfast check` lists them (the first few, and a count).
async fn load_config(path: &Path) -> Result<config::Config, String> {
    let owned = path.to_path_buf();
    let read = tokio::task::spawn_blocking(move || config::load(&owned));
    match tokio::time::timeout(CONFIG_READ_TIMEOUT, read).await {
        Ok(Ok(Ok(config))) => Ok(config),
        Ok(Ok(Err(diagnostics))) => Err(config::list_diagnostics(&diagnostics)),
        Ok(Err(e)) => Err(format!(
            "{}: reading the config failed: {e}",
            path.display()
        )),
        Err(_) => Err(format!(
            "{}: the config and its password files were not read within {}s; is the file system hanging?",
            path.display(),
            CONFIG_READ_TIMEOUT.as_secs()
        )),
    }
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(opts: Options) -> Result<(), String> {
    let config = load_config(&opts.config).await?;
    let node = node_name(&config);
    let router_id = router_id(&config)?;
    let restarting = restart_marker(&opts.state_dir);
    let restart = restart::Restart::new(restarting, Instant::now(), &config.peers);
    info!(
        node = %node,
        asn = config.speaker.asn,
        router_id = %router_id,
        restarting,
        version = %env!("CARGO_PKG_VERSION"),
        "holdfast starting"
    );
    let stability = Arc::new(Mutex::new(
        Stability::new(stability_params(&config))
            .map_err(|e| format!("{}: stability: {e}", opts.config.display()))?,
    ));
    let config = Arc::new(config);
    let started = Instant::now();
    let shared = Arc::new(Mutex::new(Shared {
        config: config.clone(),
        config_error: None,
        node: node.clone(),
        router_id: router_id.to_string(),
        started,
        snapshot: Arc::new(SourceSnapshot::default()),
        stability: stability.clone(),
        peers: Vec::new(),
        probes: BTreeMap::new(),
        source_explain: None,
        reconcile_repairs: 0,
    }));
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let stops = shutdown_rx.clone();
    let until_shutdown = move || {
        let mut rx = shutdown_rx.clone();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    };

    // Not kept across a restart: a restarted holdfast advertises normally
    // (README, "holdfast drain").
    let drain_control = drain::shared(config.speaker.graceful_shutdown_wait);

    // The API first: /healthz answers while everything else starts.
    let api_listener = crate::api::bind(config.speaker.api)
        .await
        .map_err(|e| e.to_string())?;
    info!(api = %config.speaker.api, "HTTP API listening");
    let view = Arc::new(View(shared.clone(), drain_control.clone()));
    let api = spawn_api(
        api_listener,
        config.speaker.api,
        view.clone(),
        stops.clone(),
    );
    // The metrics-only listener: what a scraper on the network may reach.
    let metrics_api = match config.speaker.metrics {
        Some(addr) => {
            let listener = crate::api::bind(addr).await.map_err(|e| e.to_string())?;
            info!(metrics = %addr, "metrics listening (/metrics, /healthz, /readyz)");
            Some(tokio::spawn(crate::api::serve_surface(
                listener,
                view.clone(),
                until_shutdown(),
                crate::api::Surface::MetricsOnly,
            )))
        }
        None => None,
    };

    // The source.
    let (snap_tx, mut snap_rx) = watch::channel(SourceSnapshot::default());
    let mut file_settings = None;
    let mut kube = None;
    let mut kube_config = None;
    let mut node_status = None;
    match crate::source::file::FileSettings::from_config(&config) {
        Some(settings) => {
            let (tx, rx) = watch::channel(settings);
            tokio::spawn(crate::source::file::run(
                rx,
                snap_tx,
                crate::source::file::DEFAULT_POLL_INTERVAL,
                until_shutdown(),
            ));
            file_settings = Some(tx);
        }
        None => {
            use crate::source::kubernetes;
            // The Node is found by its name: $NODE_NAME (the downward API),
            // else speaker.hostname, else the kernel's hostname.
            let node_name = std::env::var("NODE_NAME")
                .ok()
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| node.clone());
            let options = kubernetes::Options::new(node_name);
            let client = kubernetes::connect(&options).await?;
            // This node's BGPNodeStatus, for `kubectl get bgpnodestatuses`
            // (the Kubernetes source only: the file source has no cluster).
            let view = View(shared.clone(), drain_control.clone());
            node_status = Some(kubernetes::NodeStatusWriter::spawn(
                client.clone(),
                options.node_name.clone(),
                kubernetes::node_status::DEFAULT_INTERVAL,
                Arc::new(move || crate::api::StateView::status(&view)),
            ));
            let (tx, rx) = watch::channel(config.clone());
            kube = Some(Arc::new(kubernetes::spawn(client, options, rx, snap_tx)));
            kube_config = Some(tx);
        }
    }
    if let Some(k) = &kube {
        let k = k.clone();
        shared.lock().expect("shared state lock").source_explain =
            Some(Arc::new(move |ip| k.explain(ip)));
    }

    let (probe_tx, mut probe_rx) = tokio::sync::mpsc::unbounded_channel();
    let (accept_tx, mut accept_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut d = Daemon {
        opts: opts.clone(),
        config: config.clone(),
        config_error: None,
        node,
        router_id,
        restart,
        stability,
        snapshot: Arc::new(SourceSnapshot::default()),
        peers: BTreeMap::new(),
        shared,
        file_settings,
        bfd: None,
        kube,
        kube_config,
        probes: BTreeMap::new(),
        probe_tx,
        routes_ready: watch::channel(false).0,
        first_synced: None,
        stability_dirty: true,
        next_deadline: None,
        listener: None,
        resync: crate::source::resync::Schedule::new(config.resync, Instant::now()),
        reconcile_repairs: 0,
        drain: drain_control.clone(),
        drained_marked: false,
        accept_tx,
        api,
        view,
        shutdown: stops,
    };
    for p in config.peers.clone() {
        d.start_peer(&p);
    }

    // The passive side.
    if let Some(listen) = config.speaker.listen {
        let listener = bind_listener(
            listen,
            &listener_keys(&config),
            listener_ttl(&config),
            d.accept_tx.clone(),
        )
        .map_err(|e| format!("speaker.listen {listen}: {e}"))?;
        d.listener = Some(listener);
    }

    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| e.to_string())?;
    let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .map_err(|e| e.to_string())?;
    let mut sighup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|e| e.to_string())?;
    let mut config_stamp = stamp(&opts.config);
    let mut every_second = tokio::time::interval(Duration::from_secs(1));
    every_second.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut gateway_check = Instant::now();
    d.refresh_shared();

    let mut signal = None;
    loop {
        let deadline = d.next_deadline;
        let stability_timer = async {
            match deadline {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        let drain_deadline = d.drain.0.lock().expect("drain lock").drain.deadline();
        let drain_timer = async {
            match drain_deadline {
                Some(t) => tokio::time::sleep_until(t.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = drain_control.1.notified() => d.publish_tables(),
            () = drain_timer => {
                if d.poll_drain() {
                    break;
                }
            }
            changed = snap_rx.changed() => {
                if changed.is_err() {
                    error!("the source stopped");
                    break;
                }
                let snap = snap_rx.borrow_and_update().clone();
                d.on_snapshot(snap);
            }
            () = stability_timer => {
                let now = Instant::now();
                let (changes, notes) = {
                    let mut st = d.stability.lock().expect("stability lock");
                    let notes = d.withdraw_notes(&st, now, false, None);
                    (st.poll(now), notes)
                };
                d.stability_dirty = true;
                d.apply(changes, &notes);
            }
            Some(r) = probe_rx.recv() => d.on_probe(r),
            Some((stream, from)) = accept_rx.recv() => {
                match d.peers.values().find(|p| p.handle.as_ref().is_some_and(|h| h.spec.is_from(from))) {
                    Some(p) => p.handle.as_ref().expect("matched on a handle").incoming(stream),
                    None => {
                        if let Some(note) = logging::allow(Kind::NotAPeer, &from.ip().to_string()) {
                            warn!(%from, "connection from an address that is not a configured peer: closed{note}");
                        }
                    }
                }
            }
            _ = sigterm.recv() => {
                signal = Some("SIGTERM");
                if d.begin_exit() {
                    break;
                }
            }
            _ = sigint.recv() => {
                signal = Some("SIGINT");
                if d.begin_exit() {
                    break;
                }
            }
            _ = sighup.recv() => {
                info!("SIGHUP: reloading the config");
                config_stamp = d.reload().await;
            }
            _ = every_second.tick() => {
                logging::flush();
                // The identity is taken before the file is read: an edit
                // during the reload differs from it and triggers another.
                if stamp(&opts.config) != config_stamp {
                    info!("config file changed: reloading");
                    config_stamp = d.reload().await;
                }
                d.follow_restart();
                d.resync.set_every(d.config.resync, Instant::now());
                if d.resync.due(Instant::now()) {
                    d.reconcile().await;
                }
                if gateway_check.elapsed() >= Duration::from_secs(5) {
                    gateway_check = Instant::now();
                    d.check_gateways().await;
                }
            }
        }
        d.check_routes_ready();
        d.refresh_shared();
    }
    let (graceful, withdrawn) = d.shutdown().await;
    let _ = shutdown_tx.send(true);
    drop(node_status);
    let _ = tokio::time::timeout(Duration::from_secs(2), d.api.task).await;
    if let Some(m) = metrics_api {
        let _ = tokio::time::timeout(Duration::from_secs(2), m).await;
    }
    // A planned stop: one line, whatever the number of peers.
    info!(
        signal = signal.map(tracing::field::display),
        sessions_closed_for_graceful_restart = graceful,
        sessions_withdrawn = withdrawn,
        "holdfast stopped"
    );
    Ok(())
}

//! The routes core, sans-IO: what each peer is to be told, worked out from
//! the source's snapshots, the probes' results, drain requests and the
//! time — every input carries its `Instant`, and nothing here reads a
//! clock, a socket or a file. Out come the per-peer tables, the Kubernetes
//! Event intents, the state the status view is built from (on request, by
//! the main loop that owns the core), and [`Routes::next_deadline`], the
//! instant the driver must call [`Routes::poll`] at (no fixed tick).
//!
//! ```text
//!  snapshot ─┐                                        ┌─▶ per-peer PeerTables
//!  probe    ─┼─▶ gate ─▶ stability (hold-down, damping,├─▶ Events (advertised/withdrawn)
//!  drain    ─┤           guard)  ─▶ peer_tables ─▶ drain├─▶ routes_ready (End-of-RIB)
//!  now      ─┘                                        └─▶ next_deadline
//! ```
//!
//! The driver (`daemon::Daemon`) feeds it and carries its outputs to the
//! sessions' watch channels and the Event recorder; it owns the core, its
//! stability layer and its drain control, so nothing here is shared. Its
//! tests run on simulated time (`tests.rs`), like the FSM's and the
//! stability layer's.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ipnet::IpNet;
use tracing::{debug, info, warn};

use crate::config::{self, Config};
use crate::model::{Absence, Route, SourceSnapshot};
use crate::probe;
use crate::report::logging::WithdrawCause;
use crate::report::status::DrainStatus;
use crate::speaker::{self, DrainPhase, PeerTable};
use crate::stability::{self, Stability};
use drain::{Control, ExitPlan, Scope};

/// A probed VIP (probe gating).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeView {
    /// What is probed: VIP:port, or a URL.
    pub target: config::ProbeTarget,
    pub verdict: crate::probe::Verdict,
    pub failures: u32,
    pub fail_after: u32,
    pub error: Option<String>,
    pub on_failure: crate::config::OnFailure,
    /// The disable file, while it exists.
    pub disabled: Option<std::path::PathBuf>,
}

#[cfg(test)]
mod tests;

pub mod desired;
pub mod drain;
pub mod reconcile;

pub use desired::*;

/// Up to this many route changes at once are logged one by one at info
/// level; more are summed up in one line.
const LOG_EACH_CHANGE_UP_TO: usize = 20;

/// A withdrawn route's Service, and why it went.
type WithdrawNote = (Option<crate::model::ServiceName>, WithdrawCause);

/// The changes of one stability call, as the routes core uses them: how
/// many, and each one (prefix, Service, advertised rather than withdrawn)
/// while they are few enough to log one by one, or always when they are
/// logged at debug level or told to Kubernetes. A bulk load's changes are
/// every route: kept whole, with their attributes, they were 6 MB of the
/// daemon's peak at 100k VIPs, to make one summary line.
#[derive(Debug, Default)]
struct Changes {
    keep_all: bool,
    advertised: usize,
    withdrawn: usize,
    each: Vec<(IpNet, Option<crate::model::ServiceName>, bool)>,
}

impl Changes {
    fn push(&mut self, change: stability::Change<&IpNet, &Route>) {
        match change {
            stability::Change::Advertise(..) => self.advertised += 1,
            stability::Change::Withdraw(_) => self.withdrawn += 1,
        }
        // A bulk load's Services are not even cloned.
        if self.keep_all || self.each.len() <= LOG_EACH_CHANGE_UP_TO {
            self.each.push(match change {
                stability::Change::Advertise(p, r) => (*p, r.service.clone(), true),
                stability::Change::Withdraw(p) => (*p, None, false),
            });
        }
    }

    fn len(&self) -> usize {
        self.advertised + self.withdrawn
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a stability update is given: the present set and the absences.
type UpdateInput<'a> = (&'a crate::routes::Present<'a>, &'a BTreeMap<IpNet, Absence>);

/// The stability layer's parameters: the config layer produced and
/// validated them (`config::Stability` is `stability::Params`); the drain's
/// wait comes from `[speaker]`.
pub fn stability_params(c: &Config) -> stability::Params {
    stability::Params {
        graceful_shutdown_wait: c.speaker.graceful_shutdown_wait,
        ..c.stability.clone()
    }
}

/// One probed VIP: its probe and the results so far (the probe task itself
/// is the driver's).
#[derive(Debug)]
pub struct Probing {
    pub config: config::Probe,
    pub tracker: probe::Tracker,
}

impl Probing {
    /// What the status and explain views show of it.
    pub fn view(&self) -> ProbeView {
        ProbeView {
            target: self.config.target.clone(),
            verdict: self.tracker.verdict,
            failures: self.tracker.consecutive_failures(),
            fail_after: self.config.fail_after,
            error: self.tracker.last_error.clone(),
            on_failure: self.config.on_failure,
            disabled: self
                .tracker
                .disabled
                .then(|| self.config.disable_file.clone())
                .flatten(),
        }
    }
}

/// A Kubernetes Event the driver is to record (the Kubernetes source only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The VIP went from no peer to these peers.
    Advertised { vip: IpAddr, peers: Vec<String> },
    /// The VIP was withdrawn from these peers.
    Withdrawn { vip: IpAddr, peers: Vec<String> },
}

/// The routes core.
pub struct Routes {
    config: Arc<Config>,
    /// The stability layer; the status and explain views read it when the
    /// main loop answers a request.
    stability: Stability<IpNet, Route>,
    /// `holdfast drain` and the shutdown sequence: the API's drain
    /// requests and the signals reach it through the main loop.
    drain: Control,
    /// Whether anyone records Events (the Kubernetes source).
    events_wanted: bool,
    /// The VIPs come from a file (the withdraw lines say so).
    from_file: bool,
    snapshot: Arc<SourceSnapshot>,
    /// Probes of VIPs whose advertisement has one.
    probes: BTreeMap<IpAddr, Probing>,
    /// The probed set changed since [`Self::take_probes_changed`].
    probes_changed: bool,
    /// The desired table of each peer that has a session (attached).
    tables: BTreeMap<String, Arc<PeerTable>>,
    /// Tables changed since [`Self::take_changed_tables`].
    changed: BTreeSet<String>,
    /// Events not yet taken by the driver.
    events: Vec<Event>,
    /// True once the tables hold the source's first complete view: the
    /// sessions send End-of-RIB only then (RFC 4724 §4.1).
    routes_ready: bool,
    /// When the source first reported a complete view.
    first_synced: Option<Instant>,
    /// The stability layer was touched since its next deadline was last
    /// computed. That walks every route, so it is recomputed only then,
    /// not on every wake-up (a 1 s tick, a session event): with 100k
    /// routes that walk is what idle time was spent on. (The status views
    /// are computed from the stability layer when asked for.)
    stability_dirty: bool,
    /// `stability.next_deadline()` as of the last change.
    next_stability: Option<Instant>,
    /// The tables last published marked some routes of a drained node
    /// GRACEFUL_SHUTDOWN.
    drained_marked: bool,
}

impl Routes {
    /// `stability`: the layer, built from [`stability_params`] of `config`;
    /// `events_wanted`: the Kubernetes source records Events; `from_file`:
    /// the VIPs come from a file.
    pub fn new(
        config: Arc<Config>,
        stability: Stability<IpNet, Route>,
        events_wanted: bool,
        from_file: bool,
    ) -> Self {
        let drain = Control::new(config.speaker.graceful_shutdown_wait);
        Routes {
            config,
            stability,
            drain,
            events_wanted,
            from_file,
            snapshot: Arc::new(SourceSnapshot::default()),
            probes: BTreeMap::new(),
            probes_changed: false,
            tables: BTreeMap::new(),
            changed: BTreeSet::new(),
            events: Vec::new(),
            routes_ready: false,
            first_synced: None,
            stability_dirty: true,
            next_stability: None,
            drained_marked: false,
        }
    }

    // --- inputs ---

    /// A peer's session exists (its table starts empty, as its channel
    /// does); `publish_tables` fills it.
    pub fn attach(&mut self, peer: &str) {
        self.tables
            .insert(peer.to_string(), Arc::new(PeerTable::new()));
        self.changed.remove(peer);
    }

    /// A peer's session is gone.
    pub fn detach(&mut self, peer: &str) {
        self.tables.remove(peer);
        self.changed.remove(peer);
    }

    /// A reloaded config: new stability parameters apply at `now`
    /// (validated by the config layer). The rest follows at
    /// [`Self::refresh`], once the peers are started.
    pub fn set_config(&mut self, now: Instant, config: Arc<Config>) {
        let old = std::mem::replace(&mut self.config, config);
        // A drain under way keeps the wait it started with.
        self.drain.wait = self.config.speaker.graceful_shutdown_wait;
        if old.stability != self.config.stability
            || old.speaker.graceful_shutdown_wait != self.config.speaker.graceful_shutdown_wait
        {
            let mut changes = self.collector();
            let notes = self.withdraw_notes(&self.stability, now, true, None);
            let params = stability_params(&self.config);
            let set = self
                .stability
                .set_params_with(now, params, &mut |c| changes.push(c));
            match set {
                Ok(()) => {
                    self.stability_dirty = true;
                    self.apply(changes, &notes);
                }
                Err(e) => tracing::error!("stability parameters: {e}"),
            }
        }
    }

    /// The probes and the routes worked out again from the snapshot in
    /// force and the config (after a reload).
    pub fn refresh(&mut self, now: Instant) {
        self.sync_probes();
        self.recompute(now);
        self.publish_tables();
    }

    /// The periodic reconcile found the VIP file differs from the set in
    /// force: these VIPs replace the snapshot's.
    pub fn repair_vips(&mut self, now: Instant, vips: crate::model::VipMap) {
        let mut snap = (*self.snapshot).clone();
        snap.vips = Arc::new(vips);
        self.snapshot = Arc::new(snap);
        self.recompute(now);
    }

    /// `holdfast drain` (`on`) or `undrain`, the API's request: the drain
    /// as it stands after it, or why it was refused (undrain while
    /// shutting down). The tables follow at once.
    pub fn set_drain(&mut self, now: Instant, on: bool) -> Result<DrainStatus, String> {
        let answer = self.drain.set(on, now);
        if answer.is_ok() {
            self.publish_tables();
        }
        answer
    }

    /// The Node is going away (`why`), or no longer (`None`): see
    /// [`Control::follow_node`]. Answers whether the drain changed; the
    /// tables follow at once.
    pub fn follow_node(&mut self, why: Option<&str>, now: Instant) -> bool {
        let changed = self.drain.follow_node(why, now);
        if changed {
            self.publish_tables();
        }
        changed
    }

    /// The exit, once decided: what each peer's session does.
    pub fn set_exit(&mut self, plans: BTreeMap<String, ExitPlan>) {
        self.drain.exit = Some(plans);
    }

    /// Whatever is due at `now`: the drain's timer, the stability layer's
    /// timers, routes ready. Answers whether the daemon stops now (a
    /// shutdown whose wait is over).
    pub fn poll(&mut self, now: Instant) -> bool {
        let drain_due = self.drain.drain.deadline().is_some_and(|t| t <= now);
        if drain_due && self.poll_drain(now) {
            return true;
        }
        if self.next_stability.is_some_and(|t| t <= now) {
            let mut changes = self.collector();
            let notes = self.withdraw_notes(&self.stability, now, false, None);
            self.stability.poll_with(now, &mut |c| changes.push(c));
            self.stability_dirty = true;
            self.apply(changes, &notes);
        }
        self.check_routes_ready(now);
        false
    }

    // --- outputs ---

    /// The next instant [`Self::poll`] has something to do: a stability
    /// timer (hold-down, damping, the guard's pace, advertise_delay), the
    /// drain's timer, or routes becoming ready. `None`: nothing until the
    /// next input.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        if std::mem::take(&mut self.stability_dirty) {
            self.next_stability = self.stability.next_deadline();
        }
        let drain = self.drain.drain.deadline();
        let ready = match (self.routes_ready, self.first_synced) {
            (false, Some(since)) => Some(since + self.config.stability.advertise_delay),
            _ => None,
        };
        [self.next_stability, drain, ready]
            .into_iter()
            .flatten()
            .min()
    }

    /// The tables changed since the last call, to hand to the sessions.
    pub fn take_changed_tables(&mut self) -> Vec<(String, Arc<PeerTable>)> {
        std::mem::take(&mut self.changed)
            .into_iter()
            .filter_map(|name| {
                let table = self.tables.get(&name)?.clone();
                Some((name, table))
            })
            .collect()
    }

    /// A peer's desired table now (the driver reads its channel instead).
    #[cfg(test)]
    pub fn table(&self, peer: &str) -> Option<&Arc<PeerTable>> {
        self.tables.get(peer)
    }

    /// The Events to record since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.events)
    }

    /// Whether the probed set changed since the last call (the driver
    /// starts and stops probe tasks to match [`Self::probes`]).
    pub fn take_probes_changed(&mut self) -> bool {
        std::mem::take(&mut self.probes_changed)
    }

    /// The probed VIPs.
    pub fn probes(&self) -> &BTreeMap<IpAddr, Probing> {
        &self.probes
    }

    /// A probed VIP's view, for the status and explain views, built from
    /// its tracker when asked for.
    pub fn probe_view(&self, vip: &IpAddr) -> Option<ProbeView> {
        self.probes.get(vip).map(Probing::view)
    }

    /// The stability layer, for the status and explain views.
    pub fn stability(&self) -> &Stability<IpNet, Route> {
        &self.stability
    }

    /// The drain control, for the status and explain views and the exit.
    pub fn drain(&self) -> &Control {
        &self.drain
    }

    /// The snapshot in force.
    pub fn snapshot(&self) -> &Arc<SourceSnapshot> {
        &self.snapshot
    }

    /// Whether End-of-RIB can go out (RFC 4724 §4.1).
    pub fn routes_ready(&self) -> bool {
        self.routes_ready
    }

    // --- the work ---

    /// A new snapshot from the source.
    pub fn on_snapshot(&mut self, now: Instant, snap: SourceSnapshot) {
        // Not logged here: each source logs its own problems when they
        // change (the file source with the count of VIPs kept, the
        // Kubernetes watchers per watcher); logging them again per
        // snapshot doubled a VIP file's error list in the log.
        self.snapshot = Arc::new(snap);
        self.sync_probes();
        self.recompute(now);
    }

    /// One probe's result.
    pub fn on_probe(&mut self, now: Instant, r: probe::ProbeResult) {
        let Some(p) = self.probes.get_mut(&r.vip) else {
            return;
        };
        let changed = p.tracker.observe(&p.config, r.result);
        let p = &self.probes[&r.vip];
        if let Some(verdict) = changed {
            match verdict {
                probe::Verdict::Failing if p.tracker.disabled => warn!(
                    vip = %r.vip,
                    on_failure = p.config.on_failure.as_str(),
                    "probe disable file exists: the VIP counts as failed"
                ),
                probe::Verdict::Failing if p.config.on_failure == config::OnFailure::Degrade => {
                    warn!(
                        vip = %r.vip,
                        probe = %p.config.target,
                        error = p.tracker.last_error.as_deref().unwrap_or(""),
                        "{} failed {} times: announcing with the degraded attributes",
                        p.config.target.describe(),
                        p.config.fail_after
                    )
                }
                probe::Verdict::Failing => warn!(
                    vip = %r.vip,
                    probe = %p.config.target,
                    error = p.tracker.last_error.as_deref().unwrap_or(""),
                    "{} failed {} times: withdrawing",
                    p.config.target.describe(),
                    p.config.fail_after
                ),
                probe::Verdict::Passing => {
                    info!(
                        vip = %r.vip,
                        probe = %p.config.target,
                        "{} passes: advertising",
                        p.config.target.describe()
                    )
                }
                probe::Verdict::Unknown => {}
            }
            self.recompute(now);
        }
    }

    /// A signal already began the exit (a second one stops at once).
    pub fn exiting(&self) -> bool {
        self.drain.exiting
    }

    /// SIGTERM: answers whether the daemon stops now. `withdrawing`: the
    /// peers whose routes will not outlive the exit. When some peers will
    /// lose this node's routes (no graceful restart, or
    /// `--withdraw-on-exit`) and `graceful_shutdown_wait` is not zero,
    /// their routes first carry GRACEFUL_SHUTDOWN for the wait (RFC 8326
    /// §3) and the daemon stops when it is over; a second signal stops it
    /// at once.
    pub fn begin_exit(&mut self, now: Instant, withdrawing: BTreeSet<String>) -> bool {
        {
            let control = &mut self.drain;
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
                control.scope = Scope::Peers(withdrawing.clone());
                info!(
                    peers = ?withdrawing,
                    "routes marked GRACEFUL_SHUTDOWN (RFC 8326) for {wait:?}; withdrawn and the sessions closed after that"
                );
            }
            if !matches!(control.drain.phase(), DrainPhase::GracefulShutdown { .. }) {
                // Drained already: nothing to wait for.
                return true;
            }
        }
        self.publish_tables();
        false
    }

    /// Recomputes every peer's table; changed ones are marked for the driver
    /// ([`Self::take_changed_tables`]).
    pub fn publish_tables(&mut self) {
        let st = &self.stability;
        let drained: std::collections::BTreeSet<IpNet> = st.drained().copied().collect();
        let tables = speaker::peer_tables(&self.config, st.advertised());
        self.drained_marked = !drained.is_empty();
        let control = &self.drain;
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
            if let Some(cur) = self.tables.get_mut(&name)
                && **cur != table
            {
                *cur = Arc::new(table);
                self.changed.insert(name);
            }
        }
    }

    /// Which peers' tables hold `prefix` now.
    pub fn peers_with(&self, prefix: &IpNet) -> Vec<String> {
        self.tables
            .iter()
            .filter(|(_, t)| t.contains_key(prefix))
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
        if update.is_none() || self.next_stability.is_some_and(|d| d <= now) {
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
                    if !present.contains(p) && !notes.contains_key(p) {
                        let cause = WithdrawCause::Absence(Absence::Vanished);
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

    /// A collector for the changes of one stability call.
    fn collector(&self) -> Changes {
        Changes {
            keep_all: self.events_wanted || tracing::enabled!(tracing::Level::DEBUG),
            ..Changes::default()
        }
    }

    /// Logs the changes, hands the new tables to the sessions and tells
    /// Kubernetes. `notes`, from [`Self::withdraw_notes`] before the
    /// change, give the withdraw lines their Service and reason.
    fn apply(&mut self, changes: Changes, notes: &BTreeMap<IpNet, WithdrawNote>) {
        if changes.is_empty() {
            return;
        }
        // Who had each withdrawn prefix, and whether an advertised one is
        // new (rather than new attributes), for the Kubernetes Events; only
        // the Kubernetes source has anyone to tell.
        let before: Vec<(IpNet, bool, Vec<String>)> = if self.events_wanted {
            changes
                .each
                .iter()
                .map(|(p, _, advertise)| (*p, *advertise, self.peers_with(p)))
                .collect()
        } else {
            Vec::new()
        };
        // One line per route for the everyday few; a bulk load (a VIP file
        // of 100k) gets one summary line at info, and the routes at debug.
        let bulk = changes.len() > LOG_EACH_CHANGE_UP_TO;
        if !bulk || tracing::enabled!(tracing::Level::DEBUG) {
            let from_file = self.from_file;
            let params = stability_params(&self.config);
            for (p, service, advertise) in &changes.each {
                if *advertise {
                    let service = service.as_deref().map(tracing::field::display);
                    if bulk {
                        debug!(prefix = %p, service, "advertised")
                    } else {
                        info!(prefix = %p, service, "advertised")
                    }
                    continue;
                }
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
        if bulk {
            info!(
                advertised = changes.advertised,
                withdrawn = changes.withdrawn,
                "routes changed (each one logged at debug level)"
            );
        }
        drop(changes);
        self.publish_tables();
        for (prefix, advertise, had) in before {
            if advertise && had.is_empty() {
                let peers = self.peers_with(&prefix);
                if !peers.is_empty() {
                    self.events.push(Event::Advertised {
                        vip: prefix.addr(),
                        peers,
                    });
                }
            } else if !advertise && !had.is_empty() {
                self.events.push(Event::Withdrawn {
                    vip: prefix.addr(),
                    peers: had,
                });
            }
        }
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
            .find_map(|a| a.probe.clone())
    }

    /// Tracks a probe for each VIP that needs one, forgets those no longer
    /// needed (the driver starts and stops the probe tasks to match).
    fn sync_probes(&mut self) {
        // Nothing to walk when no advertisement probes (the common case:
        // a 100k-VIP snapshot walked for nothing on every change).
        let wanted: BTreeMap<IpAddr, config::Probe> =
            if self.config.advertisements.iter().any(|a| a.probe.is_some()) {
                self.snapshot
                    .vips
                    .iter()
                    .filter_map(|(ip, v)| Some((*ip, self.probe_for(&v.route.advertisements)?)))
                    .collect()
            } else {
                BTreeMap::new()
            };
        let count = self.probes.len();
        self.probes
            .retain(|ip, p| wanted.get(ip) == Some(&p.config));
        let removed = self.probes.len() != count;
        let before = self.probes.len();
        for (ip, cfg) in wanted {
            self.probes.entry(ip).or_insert_with(|| Probing {
                config: cfg,
                tracker: probe::Tracker::default(),
            });
        }
        // Any removal or addition changes what the driver must run.
        self.probes_changed |= self.probes.len() != before || removed;
    }

    /// The source's set, gated by the probes, into the stability layer.
    fn recompute(&mut self, now: Instant) {
        let snap = self.snapshot.clone();
        // Aggregates, PodCIDRs and interface addresses: crate::routes.
        let gates: BTreeMap<IpAddr, crate::routes::Gate> = self
            .probes
            .iter()
            .map(|(ip, p)| (*ip, p.tracker.gate(&p.config)))
            .collect();
        let (present, absences) = crate::routes::desired(&self.config, &snap, &gates);
        let mut changes = self.collector();
        let notes = self.withdraw_notes(&self.stability, now, false, Some((&present, &absences)));
        // Taken: the stability layer frees it while it reads it.
        self.stability.update_with(
            now,
            present,
            &absences,
            snap.unhealthy_sources(),
            &mut |c| changes.push(c),
        );
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
            let drained = self.stability.drained().next().is_some();
            if drained || self.drained_marked {
                self.publish_tables();
            }
        }
        self.check_routes_ready(now);
    }

    /// End-of-RIB tells a peer that it has all our routes; after a restart
    /// it then drops the stale ones we did not send again (RFC 4724 §4.2).
    /// So the tables count as complete only once the source has reported a
    /// complete view and the VIPs in it have had their advertise_delay.
    fn check_routes_ready(&mut self, now: Instant) {
        if self.routes_ready {
            return;
        }
        let Some(since) = self.first_synced else {
            return;
        };
        if now.saturating_duration_since(since) >= self.config.stability.advertise_delay {
            info!("the source's first complete view is advertised: End-of-RIB can go out");
            self.routes_ready = true;
        }
    }

    /// The drain's timer: answers whether the daemon stops now (a shutdown
    /// whose wait is over).
    fn poll_drain(&mut self, now: Instant) -> bool {
        let moved = self.drain.drain.poll(now);
        let exiting = self.drain.exiting;
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
}

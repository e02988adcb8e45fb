//! The routes: source snapshots and probe results through the stability
//! layer into per-peer tables.

use super::*;

/// Up to this many route changes at once are logged one by one at info
/// level; more are summed up in one line.
pub(super) const LOG_EACH_CHANGE_UP_TO: usize = 20;

/// A withdrawn route's Service, and why it went.
pub(super) type WithdrawNote = (Option<Arc<str>>, WithdrawCause);

/// What a stability update is given: the present set and the absences.
pub(super) type UpdateInput<'a> = (
    &'a BTreeMap<IpNet, Route>,
    &'a BTreeMap<IpNet, stability::Absence>,
);

/// The stability layer's parameters: the config layer produced and
/// validated them (`config::Stability` is `stability::Params`); the drain's
/// wait comes from `[speaker]`.
pub(super) fn stability_params(c: &Config) -> stability::Params {
    stability::Params {
        graceful_shutdown_wait: c.speaker.graceful_shutdown_wait,
        ..c.stability.clone()
    }
}

/// One probed VIP.
pub(super) struct Probing {
    pub(super) config: config::Probe,
    pub(super) tracker: probe::Tracker,
    pub(super) _task: probe::ProbeTask,
}

impl Daemon {
    /// Recomputes every peer's table and hands changed ones to the sessions.
    pub(super) fn publish_tables(&mut self) {
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
    pub(super) fn peers_with(&self, prefix: &IpNet) -> Vec<String> {
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
    pub(super) fn withdraw_notes(
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
    pub(super) fn apply(
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

    pub(super) fn on_snapshot(&mut self, snap: SourceSnapshot) {
        // Not logged here: each source logs its own problems when they
        // change (the file source with the count of VIPs kept, the
        // Kubernetes watchers per watcher); logging them again per
        // snapshot doubled a VIP file's error list in the log.
        self.snapshot = Arc::new(snap);
        self.sync_probes();
        self.recompute();
    }

    /// The probe a VIP's advertisements ask for (the first that has one).
    pub(super) fn probe_for(
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
    pub(super) fn sync_probes(&mut self) {
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

    pub(super) fn on_probe(&mut self, r: probe::ProbeResult) {
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
    pub(super) fn recompute(&mut self) {
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
    pub(super) fn check_routes_ready(&mut self) {
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

    /// SIGTERM: answers whether the daemon stops now. When some peers will
    /// lose this node's routes (no graceful restart, or
    /// `--withdraw-on-exit`) and `graceful_shutdown_wait` is not zero,
    /// their routes first carry GRACEFUL_SHUTDOWN for the wait (RFC 8326
    /// §3) and the daemon stops when it is over; a second signal stops it
    /// at once.
    pub(super) fn begin_exit(&mut self) -> bool {
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
    pub(super) fn poll_drain(&mut self) -> bool {
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
}

//! The peers' sessions: started, reset, stopped; their default gateways
//! and graceful restart's R bit followed.

use super::*;

pub(super) struct Peer {
    pub(super) config: config::Peer,
    pub(super) handle: Option<PeerHandle>,
    pub(super) table: watch::Sender<Arc<PeerTable>>,
    /// Why there is no session (no default gateway yet).
    pub(super) waiting: Option<String>,
    /// Its BFD session (RFC 5880), when configured.
    pub(super) bfd: Option<crate::bfd::driver::BfdSession>,
    /// When its desired table last changed (the periodic reconcile leaves
    /// a session alone while it may still be following a change).
    pub(super) table_changed: Instant,
    /// The counters of its earlier sessions: they belong to the peer's
    /// name and survive a reset.
    pub(super) carried: bgp_proto::fsm::Stats,
}

impl Daemon {
    pub(super) fn peer_spec(&self, p: &config::Peer, gw: gateway::Gateway) -> PeerSpec {
        PeerSpec {
            peer: p.clone(),
            address: gw.address,
            interface: gw.interface,
            // RFC 7705-style: the AS this peer sees us in.
            local_asn: p.local_as(self.config.speaker.asn),
            router_id: self.router_id,
            hostname: self.node.clone(),
            restarting: self.restart.restarting(p, Instant::now()),
        }
    }

    pub(super) fn resolve(p: &config::Peer) -> Result<gateway::Gateway, String> {
        match p.address {
            PeerAddress::Ip(ip) => Ok(gateway::Gateway {
                address: ip,
                interface: None,
            }),
            PeerAddress::DefaultGateway(f) => gateway::default_gateway(f),
            PeerAddress::Interface(name) => gateway::link_router(name),
        }
    }

    pub(super) fn start_peer(&mut self, p: &config::Peer) {
        let (tx, _) = watch::channel(Arc::new(PeerTable::new()));
        self.routes.attach(&p.name);
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
                    // A link-local router (unnumbered, or a link-local
                    // default gateway) is reached on its interface.
                    let scope_id = spec.interface.as_ref().map(|i| i.index);
                    let bfd = self.bfd_session(p, b, addr, scope_id);
                    match bfd {
                        Ok(s) => peer.bfd = Some(s),
                        Err(e) => {
                            // Without BFD the session must not come up (it
                            // would wait for BFD for ever): say why.
                            error!(peer = %p.name, "BFD: {e}");
                            peer.waiting = Some(format!("BFD unavailable: {e}"));
                            self.peers.insert(p.name.clone(), peer);
                            self.follow_listener_keys();
                            return;
                        }
                    }
                }
                peer.handle = Some(session::spawn_with_bmp(
                    spec,
                    peer.table.subscribe(),
                    self.routes_ready.subscribe(),
                    peer.bfd.as_ref().map(|b| b.status.clone()),
                    self.bmp.tap(&p.name),
                ));
            }
            Err(why) => {
                warn!(peer = %p.name, "{why}");
                peer.waiting = Some(why);
            }
        }
        self.peers.insert(p.name.clone(), peer);
        // The listener's key for the address it resolved to.
        self.follow_listener_keys();
        // A new session starts from the current routes.
        self.routes.publish_tables();
        self.carry();
    }

    /// Starts the BFD session of a peer (binding the BFD ports on first use).
    pub(super) fn bfd_session(
        &mut self,
        p: &config::Peer,
        b: &config::Bfd,
        addr: IpAddr,
        scope_id: Option<u32>,
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
            scope_id,
            multihop: b.multihop,
            desired_min_tx: b.min_tx,
            required_min_rx: b.min_rx,
            detect_mult: b.multiplier,
            auth: b.authentication.key().cloned(),
        };
        self.bfd.as_mut().expect("started above").add(&p.name, spec)
    }

    pub(super) async fn stop_peer(&mut self, name: &str, how: StopHow) {
        self.routes.detach(name);
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
        // A `default-gateway` or `interface` peer's key leaves with the
        // address it resolved to.
        self.follow_listener_keys();
    }

    /// Stops a peer's session and starts a new one from `p`; its counters
    /// carry over.
    pub(super) async fn reset_peer(&mut self, p: &config::Peer, how: StopHow) {
        let (mut carried, status) = match self.peers.get(&p.name) {
            Some(cur) => (
                cur.carried.clone(),
                cur.handle.as_ref().map(|h| h.status.clone()),
            ),
            None => Default::default(),
        };
        self.stop_peer(&p.name, how).await;
        // Read after the stop (the session's last publication): its
        // NOTIFICATION counts.
        if let Some(status) = status {
            state::add_stats(&mut carried, &status.borrow().stats);
        }
        self.start_peer(p);
        if let Some(new) = self.peers.get_mut(&p.name) {
            new.carried = carried;
        }
    }

    /// The R bit follows the restart (RFC 4724 §4.1): a session that sent
    /// End-of-RIB ends it for its peer; the restart time ends it for every
    /// session still sending R.
    pub(super) fn follow_restart(&mut self) {
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

    /// `default-gateway` peers follow the gateway.
    pub(super) async fn check_gateways(&mut self) {
        let mut moved: Vec<(config::Peer, Result<gateway::Gateway, String>)> = Vec::new();
        let followed = self.peers.values_mut().filter(|p| {
            matches!(
                p.config.address,
                PeerAddress::DefaultGateway(_) | PeerAddress::Interface(_)
            )
        });
        for p in followed {
            let now = Self::resolve(&p.config);
            let cur = p
                .handle
                .as_ref()
                .map(|h| (h.spec.address, h.spec.interface.clone()));
            match (&now, cur) {
                (Ok(g), Some((a, i))) if g.address == a && g.interface == i => {}
                // Still nowhere to connect to, but the reason may have
                // changed (the listener failed since, and says why): the
                // status shows the current one.
                (Err(why), None) => {
                    if p.waiting.as_ref() != Some(why) {
                        p.waiting = Some(why.clone());
                    }
                }
                _ => moved.push((p.config.clone(), now)),
            }
        }
        for (p, now) in moved {
            match &now {
                Ok(gateway) => info!(peer = %p.name, %gateway, "default gateway changed"),
                Err(why) => info!(peer = %p.name, "default gateway gone: {why}"),
            }
            self.reset_peer(&p, StopHow::Deconfigured).await;
        }
    }

    /// Ends every session; returns how many ended for graceful restart and
    /// how many withdrew their routes.
    pub(super) async fn shutdown(&mut self) -> (usize, usize) {
        let names: Vec<String> = self.peers.keys().cloned().collect();
        let mut any_graceful = false;
        let (mut graceful, mut withdrawn) = (0, 0);
        let plans = self.decide_exit(crate::routes::drain::ExitReason::Failure);
        for name in names {
            let keep = plans
                .get(&name)
                .is_some_and(|p| *p == crate::routes::drain::ExitPlan::KeepThroughRestart);
            let how = if keep {
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

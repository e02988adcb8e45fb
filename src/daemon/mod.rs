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
use peers::Peer;
use routes::Probing;
use start::{Accepted, Api, Listener, View};
pub use start::{Options, node_name, router_id, run};
pub use state::{PeerView, RouteView, Shared, SharedState};

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

impl Daemon {
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
}

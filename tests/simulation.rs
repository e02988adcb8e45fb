//! A deterministic simulation of a whole node on virtual time.
//!
//! The daemon's sans-IO cores — the routes core (`Routes`: source
//! snapshots, probe results, drains and instants in; per-peer tables out)
//! and one `PeerSession` per router (FSM, speaker, graceful-restart R bit)
//! — are wired together as the daemon's drivers wire them, but with no
//! tokio, socket or clock: the network is a queue of deliveries on a
//! virtual clock (one `Instant` base plus a simulated offset), the routers
//! are small BGP speakers written here on `bgp-proto`'s codec, and a seeded
//! PRNG picks what happens: VIPs appearing, flapping (back before the
//! hold-down), vanishing or deleted for good, all vanishing at once, the
//! source turning unhealthy and healthy, `holdfast drain` / `undrain`,
//! probe failures, router session resets, router restarts with and without
//! graceful restart, packet delays, and time moving to the next deadline
//! or by a random step (every deadline on the way handled in order).
//!
//! After every step the invariants below are checked. A violation prints
//! its seed and the events of the run, shrunk (events dropped one at a
//! time while the run still fails).
//!
//! `HOLDFAST_SIM_SEEDS=N` runs seeds 0..N; `HOLDFAST_SIM_SEED=S` replays
//! one seed (and prints its events); `HOLDFAST_SIM_EVENTS=N` sets the
//! events per seed. Run with `cargo test --release --test simulation`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::capability::{GrFamily, GracefulRestart as GrCap};
use bgp_proto::fsm::{ConnId, Direction, State};
use bgp_proto::open::Open;
use bgp_proto::{Capability, Context, Family, Message, Notification};
use holdfast::daemon::sim::{Routes, stability_params};
use holdfast::model::{Absence, Route, SourceSnapshot, Vip, VipMap};
use holdfast::probe::{Observation, ProbeResult};
use holdfast::session::{Input, Output, PeerSession, PeerSpec, StopHow};
use holdfast::speaker::PeerTable;
use holdfast::stability::Stability;
use ipnet::IpNet;

/// VIPs 10.0.0.1..=VIPS; the odd ones are probed.
const VIPS: usize = 12;
/// `[stability] withdraw_hold_down`.
const HOLD_DOWN: Duration = Duration::from_secs(30);
/// The guard's pace (`withdraw_rate` 10/s, the default).
const WITHDRAW_INTERVAL: Duration = Duration::from_millis(100);
/// The guard's share (`max_withdraw_fraction`).
const GUARD_FRACTION: f64 = 0.5;
/// The longest one-way packet delay the simulation picks.
const MAX_DELAY_MS: u64 = 400;
/// Time a change needs to reach a router: MRAI 0, advertise_delay 0, so
/// only the network's delay, twice (a reply), with room to spare.
const SETTLE: Duration = Duration::from_millis(2 * MAX_DELAY_MS + 200);
/// r1's `graceful_restart.restart_time`.
const RESTART_TIME: Duration = Duration::from_secs(20);
/// Router keepalive interval (a third of the 9 s hold time).
const KEEPALIVE: Duration = Duration::from_secs(3);
/// (7): deliveries in flight at most (each router link carries a bounded
/// session's worth of messages: the table is at most VIPS prefixes).
const MAX_IN_FLIGHT: usize = 2_000;

const CONFIG: &str = r#"
[speaker]
asn = 65001
router_id = "192.0.2.2"
graceful_shutdown_wait = "5s"

[[peer]]
name = "r1"
address = "192.0.2.1"
asn = 65000
hold_time = "9s"
connect_retry = "1s"
families = ["ipv4-unicast"]
graceful_restart = { enabled = true, restart_time = "20s" }

[[peer]]
name = "r2"
address = "192.0.2.3"
asn = 65002
hold_time = "9s"
connect_retry = "1s"
families = ["ipv4-unicast"]
graceful_restart = { enabled = false }

[source]
kind = "kubernetes"

[stability]
withdraw_hold_down = "30s"
max_withdraw_fraction = 0.5

[[advertisement]]
name = "public"

[[advertisement]]
name = "probed"
probe = { port = 443, fail_after = 1, recover_after = 1 }
"#;

// --- PRNG ---

/// xorshift64*: small, seeded, the same on every platform.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

// --- events ---

/// One thing that happens; what cannot happen in the state at hand (a VIP
/// that is there appearing) is a no-op, so any sublist is a valid run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    /// Time moves to the next deadline (a timer, a delivery, a flap's end).
    Next,
    /// Time moves by this many ms, every deadline on the way handled.
    Step(u64),
    Appear(usize),
    /// Gone for this many ms, less than the hold-down, then back.
    Flap(usize, u64),
    /// Gone with no reason (held down), until an `Appear`.
    Vanish(usize),
    /// The Service deleted: a definitive absence.
    Delete(usize),
    /// Every VIP gone in one snapshot (the empty-list fault).
    MassVanish,
    Unhealthy,
    Healthy,
    Drain,
    Undrain,
    ProbeFail(usize),
    ProbePass(usize),
    /// The router's TCP connection fails (no NOTIFICATION).
    Reset(usize),
    /// The router restarts: its Adj-RIB-In is lost; with graceful restart
    /// it just drops the connection and comes back with R set, without,
    /// it sends Cease first.
    Restart(usize, bool),
    /// The one-way delay of the router's link, in ms.
    Delay(usize, u64),
    /// holdfast restarts gracefully (the number: its jitter seed).
    NodeRestart(u64),
}

fn generate(seed: u64, n: usize) -> Vec<Ev> {
    let mut rng = Rng::new(seed);
    let routers = 2u64;
    (0..n)
        .map(|_| {
            let vip = rng.below(VIPS as u64) as usize;
            let r = rng.below(routers) as usize;
            match rng.below(100) {
                0..=29 => Ev::Next,
                30..=44 => Ev::Step(match rng.below(10) {
                    0 => rng.below(45_000),
                    1..=3 => rng.below(5_000),
                    _ => rng.below(500),
                }),
                45..=53 => Ev::Appear(vip),
                54..=60 => Ev::Flap(vip, 1 + rng.below(HOLD_DOWN.as_millis() as u64 - 1)),
                61..=64 => Ev::Vanish(vip),
                65..=66 => Ev::Delete(vip),
                67 => Ev::MassVanish,
                68..=69 => Ev::Unhealthy,
                70..=72 => Ev::Healthy,
                73 => Ev::Drain,
                74..=75 => Ev::Undrain,
                76..=79 => Ev::ProbeFail(vip),
                80..=84 => Ev::ProbePass(vip),
                85..=88 => Ev::Reset(r),
                89..=91 => Ev::Restart(r, rng.below(2) == 0),
                92 => Ev::NodeRestart(rng.next()),
                _ => Ev::Delay(r, rng.below(MAX_DELAY_MS + 1)),
            }
        })
        .collect()
}

/// What the runs went through, to see that the events reach the paths
/// the invariants guard.
#[derive(Clone, Copy, Debug, Default)]
struct Coverage {
    sessions: u64,
    end_of_ribs: u64,
    announced: u64,
    withdrawn: u64,
    /// Connections lost with the routes kept as stale (RFC 4724 §4.2).
    stale_kept: u64,
    /// Stale routes dropped by End-of-RIB, or when the restart time ran out.
    stale_swept: u64,
    stale_expired: u64,
    /// Steps of the routes core that ended with the guard holding
    /// withdrawals back.
    guard_steps: u64,
    /// Withdrawals written while the source was unhealthy (failed probes,
    /// drains).
    unhealthy_withdrawals: u64,
}

impl Coverage {
    fn add(&mut self, o: &Coverage) {
        self.sessions += o.sessions;
        self.end_of_ribs += o.end_of_ribs;
        self.announced += o.announced;
        self.withdrawn += o.withdrawn;
        self.stale_kept += o.stale_kept;
        self.stale_swept += o.stale_swept;
        self.stale_expired += o.stale_expired;
        self.guard_steps += o.guard_steps;
        self.unhealthy_withdrawals += o.unhealthy_withdrawals;
    }
}

// --- the network ---

#[derive(Debug)]
enum Delivery {
    /// The node's connection attempt is answered (`token`: which attempt).
    Connected { r: usize, token: u64 },
    /// Octets for the node.
    ToNode {
        r: usize,
        conn: ConnId,
        bytes: Vec<u8>,
    },
    /// The router's end closed.
    NodeClosed { r: usize, conn: ConnId },
    /// A message for the router, and, for End-of-RIB, the prefixes of the
    /// node's desired table when it was written.
    ToRouter {
        r: usize,
        conn: ConnId,
        bytes: Vec<u8>,
        table: Option<BTreeSet<IpNet>>,
    },
    /// The node's end closed.
    RouterClosed { r: usize, conn: ConnId },
}

impl Delivery {
    /// The link it travels on, and which way (for in-order delivery).
    fn lane(&self) -> (usize, bool) {
        match self {
            Delivery::Connected { r, .. }
            | Delivery::ToNode { r, .. }
            | Delivery::NodeClosed { r, .. } => (*r, true),
            Delivery::ToRouter { r, .. } | Delivery::RouterClosed { r, .. } => (*r, false),
        }
    }
}

// --- the routers ---

/// Where a connection's messages from the node are, in RFC 4271 §8 order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Fresh,
    OpenSeen,
    KeepaliveSeen,
    EndOfRibSeen,
}

struct Router {
    asn: u32,
    id: Ipv4Addr,
    /// Graceful restart helper (RFC 4724 §4.2) and its capability.
    gr: bool,
    conn: Option<ConnId>,
    phase: Phase,
    /// Our OPEN on the current connection.
    open: Option<Open>,
    established_since: Option<Duration>,
    /// Adj-RIB-In: prefix → stale.
    rib: BTreeMap<IpNet, bool>,
    /// Prefixes announced (and not withdrawn) on the current connection.
    on_conn: BTreeSet<IpNet>,
    /// RFC 4724 §4.2: the stale routes go at this time unless the session
    /// is back by then.
    stale_until: Option<Duration>,
    /// The connection of a session up since the second time dropped
    /// without a NOTIFICATION at the first: the node's config has graceful
    /// restart for this router (r1), so the router is to help.
    helping: Option<(Duration, Duration)>,
    keepalive_at: Option<Duration>,
    /// Restarting: connections refused until then.
    down_until: Duration,
    /// Our next OPEN sets R (RFC 4724 §3): we restarted.
    restarted: bool,
    /// The node restarted and has not had End-of-RIB through since: its
    /// OPENs may carry R.
    node_restarting: bool,
    /// The first connection of the node's current process (what the old
    /// one still had in flight does not end the restart).
    first_conn: u64,
    /// NLRI (announced or withdrawn) received per prefix.
    updates: BTreeMap<IpNet, u64>,
    establishments: u64,
    coverage: Coverage,
}

impl Router {
    fn new(asn: u32, id: Ipv4Addr, gr: bool) -> Self {
        Router {
            asn,
            id,
            gr,
            conn: None,
            phase: Phase::Fresh,
            open: None,
            established_since: None,
            rib: BTreeMap::new(),
            on_conn: BTreeSet::new(),
            stale_until: None,
            helping: None,
            keepalive_at: None,
            down_until: Duration::ZERO,
            restarted: false,
            node_restarting: false,
            first_conn: 0,
            updates: BTreeMap::new(),
            establishments: 0,
            coverage: Coverage::default(),
        }
    }

    fn our_open(&self) -> Vec<u8> {
        let mut caps = vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::FourOctetAs(self.asn),
        ];
        if self.gr {
            caps.push(Capability::GracefulRestart(GrCap {
                flags: if self.restarted {
                    GrCap::RESTART_STATE
                } else {
                    0
                },
                restart_time: 120,
                families: vec![GrFamily {
                    family: Family::IPV4_UNICAST,
                    flags: 0x80,
                }],
            }));
        }
        let open = Message::Open(Open::new(self.asn, 9, self.id, caps));
        open.encode(&Context::default()).unwrap()
    }

    /// The node's graceful restart capability on the session that ended,
    /// if both sides had one (the router then helps, RFC 4724 §4.2).
    fn helped_restart_time(&self) -> Option<Duration> {
        if !self.gr || self.established_since.is_none() {
            return None;
        }
        let cap = self.open.as_ref()?.graceful_restart()?;
        cap.families
            .iter()
            .any(|f| f.family == Family::IPV4_UNICAST)
            .then(|| Duration::from_secs(cap.restart_time.into()))
    }

    /// The connection ended: with a NOTIFICATION, or the TCP session
    /// failing. Helping a graceful restart (RFC 4724 §4.2), the routes stay
    /// as stale for the restart time; otherwise they go.
    fn drop_conn(&mut self, now: Duration, notification: bool) {
        self.helping = self
            .established_since
            .filter(|_| self.gr && !notification)
            .map(|up| (now, up));
        match self.helped_restart_time().filter(|_| !notification) {
            Some(t) => {
                self.coverage.stale_kept += 1;
                for stale in self.rib.values_mut() {
                    *stale = true;
                }
                self.stale_until = Some(now + t);
            }
            None => {
                self.rib.clear();
                self.stale_until = None;
            }
        }
        self.conn = None;
        self.phase = Phase::Fresh;
        self.open = None;
        self.established_since = None;
        self.on_conn.clear();
        self.keepalive_at = None;
    }

    fn flush_stale(&mut self) {
        let before = self.rib.len();
        self.rib.retain(|_, stale| !*stale);
        self.coverage.stale_swept += (before - self.rib.len()) as u64;
        self.helping = None;
        self.stale_until = None;
    }
}

// --- the source's truth, as the simulation keeps it ---

#[derive(Clone, Debug, Default)]
struct VipTruth {
    present: bool,
    /// When it went, and why.
    gone: Option<(Duration, Absence)>,
    /// Start of the current stretch in which it must be advertised
    /// (present, or held down).
    covered_since: Option<Duration>,
    /// The datapath behind it fails its probe (kept across absences).
    probe_failing: bool,
    /// Bound (2): changes of what routers should have for it.
    transitions: u64,
}

fn vip_ip(i: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + i as u8))
}

fn vip_prefix(i: usize) -> IpNet {
    IpNet::from(vip_ip(i))
}

impl VipTruth {
    /// The changes counted so far, and the withdrawal of a VIP absent
    /// with no reason for the hold-down (which happens then or, paced by
    /// the guard, later; never earlier).
    fn bound(&self, now: Duration) -> u64 {
        let withdrawn = matches!(self.gone, Some((at, Absence::Vanished)) if now >= at + HOLD_DOWN);
        self.transitions + u64::from(withdrawn)
    }
}

fn probed(i: usize) -> bool {
    i % 2 == 1
}

fn index_of(p: &IpNet) -> Option<usize> {
    match p.addr() {
        IpAddr::V4(a) if p.prefix_len() == 32 && a.octets()[..3] == [10, 0, 0] => {
            let i = usize::from(a.octets()[3]).checked_sub(1)?;
            (i < VIPS).then_some(i)
        }
        _ => None,
    }
}

// --- the node and its world ---

struct Sim {
    config: Arc<holdfast::config::Config>,
    seed: u64,
    t0: Instant,
    now: Duration,
    routes: Routes,
    last_routes_call: Duration,
    sessions: Vec<PeerSession>,
    names: Vec<String>,
    /// The last table handed to each session.
    tables: Vec<Arc<PeerTable>>,
    routes_ready: bool,
    routers: Vec<Router>,
    net: BTreeMap<(Duration, u64), Delivery>,
    /// The last delivery time per lane (TCP keeps order).
    lane_at: BTreeMap<(usize, bool), Duration>,
    seq: u64,
    next_conn: u64,
    delay: Vec<Duration>,
    /// The node's pending connection attempt per router.
    connecting: Vec<Option<u64>>,
    written: BTreeMap<ConnId, u64>,
    vips: Vec<VipTruth>,
    healthy: bool,
    drained: bool,
    undrained_at: Option<Duration>,
    reappear: BTreeMap<(Duration, usize), ()>,
    checks: u64,
    coverage: Coverage,
    violation: Option<String>,
    /// A digest of every octet written, for the replay check.
    digest: u64,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let config = Arc::new(
            holdfast::config::parse(Path::new("sim.toml"), CONFIG).expect("a valid config"),
        );
        let t0 = Instant::now();
        let names: Vec<String> = config.peers.iter().map(|p| p.name.clone()).collect();
        let (routes, sessions) = boot(&config, t0, seed, false);
        let routers = (0..names.len())
            .map(|i| {
                let asn = if i == 0 { 65000 } else { 65002 };
                Router::new(asn, Ipv4Addr::new(192, 0, 2, 1 + 2 * i as u8), i == 0)
            })
            .collect();
        let n = names.len();
        let mut sim = Sim {
            config,
            seed,
            t0,
            now: Duration::ZERO,
            routes,
            last_routes_call: Duration::ZERO,
            sessions,
            names,
            tables: (0..n).map(|_| Arc::new(PeerTable::new())).collect(),
            routes_ready: false,
            routers,
            net: BTreeMap::new(),
            lane_at: BTreeMap::new(),
            seq: 0,
            next_conn: 1,
            delay: vec![Duration::from_millis(1); n],
            connecting: vec![None; n],
            written: BTreeMap::new(),
            vips: vec![VipTruth::default(); VIPS],
            healthy: true,
            drained: false,
            undrained_at: None,
            reappear: BTreeMap::new(),
            checks: 0,
            coverage: Coverage::default(),
            violation: None,
            digest: 0xcbf2_9ce4_8422_2325,
        };
        // Half the VIPs are there from the start.
        for i in 0..VIPS / 2 {
            sim.appear_truth(i);
        }
        sim.start_node();
        sim
    }

    /// The node's first snapshot, its probes' first results, its sessions
    /// started.
    fn start_node(&mut self) {
        self.snapshot();
        for i in 0..VIPS {
            self.report_probe(i);
        }
        for r in 0..self.sessions.len() {
            self.node_input(r, Input::Start { bfd_up: false });
        }
        self.pump();
    }

    /// The holdfast process restarts, gracefully (RFC 4724): its sessions
    /// close without a NOTIFICATION (the helping router keeps the routes
    /// as stale), and the new process starts from nothing — a new routes
    /// core, held-down VIPs forgotten, probes unknown, no drain — with the
    /// R bit in its OPENs to the peers with graceful restart until
    /// End-of-RIB has gone out.
    fn restart_node(&mut self, generation: u64) {
        let at = self.at();
        for r in 0..self.sessions.len() {
            let out = self.sessions[r].handle(at, Input::Stop(StopHow::Graceful));
            for o in out {
                if let Output::Close { conn } = o {
                    self.send(Delivery::RouterClosed { r, conn });
                }
            }
            self.connecting[r] = None;
        }
        let (routes, sessions) = boot(
            &self.config,
            self.t0 + self.now,
            self.seed ^ generation,
            true,
        );
        self.routes = routes;
        self.sessions = sessions;
        self.routes_ready = false;
        self.tables = (0..self.sessions.len())
            .map(|_| Arc::new(PeerTable::new()))
            .collect();
        self.written.clear();
        if self.drained {
            self.drained = false;
            self.undrained_at = Some(self.now);
        }
        for (i, v) in self.vips.iter_mut().enumerate() {
            if !v.present {
                // Held down in the old process only: the new one never
                // advertises it, and End-of-RIB sweeps it at the router.
                v.covered_since = None;
                v.gone = None;
            } else if probed(i) {
                // Unknown until its first result (which follows at once).
                v.covered_since = (!v.probe_failing).then_some(self.now);
            }
        }
        for rt in &mut self.routers {
            // Its R bit is due until End-of-RIB (graceful restart peers).
            rt.node_restarting = rt.gr;
            rt.first_conn = self.next_conn;
        }
        self.last_routes_call = self.now;
        self.start_node();
    }

    fn at(&self) -> Instant {
        self.t0 + self.now
    }

    fn fail(&mut self, what: String) {
        if self.violation.is_none() {
            self.violation = Some(format!("at {:?}: {what}", self.now));
        }
    }

    // --- the source ---

    fn appear_truth(&mut self, i: usize) {
        let now = self.now;
        let v = &mut self.vips[i];
        if v.present {
            return;
        }
        let held = matches!(v.gone, Some((at, Absence::Vanished)) if now < at + HOLD_DOWN);
        if matches!(v.gone, Some((_, Absence::Vanished))) && !held {
            // Withdrawn while away, after the hold-down.
            v.transitions += 1;
        }
        if !(held && v.covered_since.is_some()) {
            // A probed VIP whose datapath fails is never advertised: its
            // fresh probe stays Unknown (RFC-free: the probe's rule).
            v.covered_since = (!probed(i) || !v.probe_failing).then_some(now);
            v.transitions += 1;
        }
        v.present = true;
        v.gone = None;
    }

    /// The VIP appears; a probed one gets a fresh probe (Unknown: not
    /// advertised), whose first result, the datapath's health, follows at
    /// once as the probe task's would.
    fn appear(&mut self, i: usize) {
        if self.vips[i].present {
            return;
        }
        self.appear_truth(i);
        self.snapshot();
        self.report_probe(i);
    }

    fn report_probe(&mut self, i: usize) {
        if !probed(i) || !self.vips[i].present {
            return;
        }
        let result = if self.vips[i].probe_failing {
            Observation::Probed(Err("connection refused".into()))
        } else {
            Observation::Probed(Ok(()))
        };
        let vip = vip_ip(i);
        self.routes_call(|r, at| r.on_probe(at, ProbeResult { vip, result }));
    }

    fn vanish_truth(&mut self, i: usize, why: Absence) {
        let v = &mut self.vips[i];
        if !v.present {
            return;
        }
        v.present = false;
        v.gone = Some((self.now, why));
        // A definitive absence is withdrawn at once; one with no reason
        // only once it outlasts the hold-down (see `bound`).
        if why != Absence::Vanished {
            v.transitions += 1;
        }
        // A probed VIP whose probe fails is not advertised for this
        // absence (or held from an earlier one the model no longer knows).
        if why != Absence::Vanished || (probed(i) && v.probe_failing) {
            v.covered_since = None;
        }
    }

    fn snapshot(&mut self) {
        let mut vips = Vec::new();
        let mut absences = BTreeMap::new();
        for (i, v) in self.vips.iter().enumerate() {
            let ad = if probed(i) { "probed" } else { "public" };
            if v.present {
                vips.push((
                    vip_ip(i),
                    Vip::of(Route::new(
                        Arc::new(BTreeSet::from([ad.to_string()])),
                        Some(format!("default/svc-{i}").into()),
                        None,
                    )),
                ));
            } else if let Some((_, why)) = v.gone
                && why != Absence::Vanished
            {
                absences.insert(vip_ip(i), why);
            }
        }
        let snap = SourceSnapshot {
            vips: Arc::new(vips.into_iter().collect::<VipMap>()),
            absences,
            healthy: self.healthy,
            synced: true,
            ..SourceSnapshot::default()
        };
        self.routes_call(|r, at| r.on_snapshot(at, snap));
    }

    // --- the routes core, with check (5) around each call ---

    fn routes_call(&mut self, f: impl FnOnce(&mut Routes, Instant)) {
        let at = self.at();
        let (before, on_wire, episode) = {
            let st = self.routes.stability();
            let before: BTreeSet<IpNet> = st.advertised().map(|(p, _)| *p).collect();
            (before, st.on_wire(), st.guard_view().is_some())
        };
        f(&mut self.routes, at);
        let after: BTreeSet<IpNet> = {
            let st = self.routes.stability();
            self.coverage.guard_steps += u64::from(st.guard_view().is_some());
            st.advertised().map(|(p, _)| *p).collect()
        };
        // (5) The mass-withdrawal guard: one step withdraws at most
        // floor(max_withdraw_fraction × routes on the wire), at least one,
        // of the withdrawals it paces (Vanished, Deleted: not a failed
        // probe); during an episode, also the releases due since the last
        // step, one per withdraw interval (plus one for the boundary).
        let guarded = before
            .difference(&after)
            .filter(|p| index_of(p).is_none_or(|i| !self.vips[i].probe_failing))
            .count();
        let allowance = ((GUARD_FRACTION * on_wire as f64).floor() as usize).max(1);
        let releases = if episode {
            let dt = self.now.saturating_sub(self.last_routes_call);
            (dt.as_nanos() / WITHDRAW_INTERVAL.as_nanos()) as usize + 1
        } else {
            0
        };
        self.checks += 1;
        if guarded > allowance + releases {
            self.fail(format!(
                "(5) one step withdrew {guarded} of {on_wire} routes: the guard allows {allowance} (+{releases} released)"
            ));
        }
        self.last_routes_call = self.now;
        self.publish();
    }

    /// The routes core's tables and readiness to the sessions.
    fn publish(&mut self) {
        for (name, table) in self.routes.take_changed_tables() {
            let r = self.names.iter().position(|n| *n == name).unwrap();
            self.tables[r] = table.clone();
            self.node_input(r, Input::Table(table));
        }
        if !self.routes_ready && self.routes.routes_ready() {
            self.routes_ready = true;
            for r in 0..self.sessions.len() {
                self.node_input(r, Input::RoutesReady(true));
            }
        }
    }

    // --- the network ---

    fn send(&mut self, d: Delivery) {
        let lane = d.lane();
        let at = (self.now + self.delay[lane.0])
            .max(self.lane_at.get(&lane).copied().unwrap_or_default());
        self.lane_at.insert(lane, at);
        self.seq += 1;
        self.net.insert((at, self.seq), d);
        if self.net.len() > MAX_IN_FLIGHT {
            let n = self.net.len();
            self.fail(format!("(7) {n} deliveries in flight"));
        }
    }

    /// One input to a router's session, and what it asks for done.
    fn node_input(&mut self, r: usize, input: Input) {
        let mut input = Some(input);
        let mut rounds = 0;
        while let Some(i) = input.take() {
            rounds += 1;
            let at = self.at();
            let out = self.sessions[r].handle(at, i);
            if out.len() > 10_000 {
                self.fail(format!("(7) {} outputs for one input", out.len()));
            }
            let mut wrote = None;
            for o in out {
                match o {
                    Output::Connect => {
                        self.seq += 1;
                        let token = self.seq;
                        self.connecting[r] = Some(token);
                        self.send(Delivery::Connected { r, token });
                    }
                    Output::AbortConnect => self.connecting[r] = None,
                    Output::Write { conn, bytes, .. } => {
                        for b in &bytes {
                            self.digest =
                                (self.digest ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
                        }
                        *self.written.entry(conn).or_default() += bytes.len() as u64;
                        wrote = Some(conn);
                        let table = self.check_write(r, &bytes);
                        self.send(Delivery::ToRouter {
                            r,
                            conn,
                            bytes,
                            table,
                        });
                    }
                    Output::Close { conn } => {
                        self.written.remove(&conn);
                        self.send(Delivery::RouterClosed { r, conn });
                    }
                    Output::SendHoldTime { .. } => {}
                }
            }
            // The socket takes everything at once: held back output may go.
            if let Some(conn) = wrote
                && let Some(&total) = self.written.get(&conn)
                && rounds < 16
            {
                input = Some(Input::Written { conn, total });
            }
        }
    }

    /// Checks one message the node writes; for End-of-RIB, answers the
    /// desired table's prefixes (checked by the router on arrival).
    fn check_write(&mut self, r: usize, bytes: &[u8]) -> Option<BTreeSet<IpNet>> {
        let m = match Message::decode(bytes, &Context::default()) {
            Ok(m) => m,
            Err(e) => {
                self.fail(format!(
                    "the node wrote an undecodable message to r{r}: {e}"
                ));
                return None;
            }
        };
        let Message::Update(u) = m else { return None };
        if u.end_of_rib_family().is_some() {
            return Some(self.tables[r].keys().copied().collect());
        }
        // (4) While the source is unhealthy, nothing it reports withdraws
        // a route: a withdrawal then is only for a failed probe or a drain.
        if !self.healthy {
            self.checks += 1;
            for n in u.withdrawals() {
                self.coverage.unhealthy_withdrawals += 1;
                let exempt =
                    self.drained || index_of(&n.prefix).is_some_and(|i| self.vips[i].probe_failing);
                if !exempt {
                    let p = n.prefix;
                    self.fail(format!(
                        "(4) {p} withdrawn from r{r} while the source is unhealthy"
                    ));
                }
            }
        }
        None
    }

    // --- the routers ---

    fn router_receives(
        &mut self,
        r: usize,
        conn: ConnId,
        bytes: Vec<u8>,
        table: Option<BTreeSet<IpNet>>,
    ) {
        if self.routers[r].conn != Some(conn) {
            return;
        }
        let m = match Message::decode(&bytes, &Context::default()) {
            Ok(m) => m,
            Err(e) => return self.fail(format!("r{r} cannot decode: {e}")),
        };
        let now = self.now;
        let phase = self.routers[r].phase;
        // (6) RFC 4271 §8: OPEN first, then KEEPALIVE, then UPDATEs; RFC
        // 4724 §2: End-of-RIB once, after the whole table.
        self.checks += 1;
        match m {
            Message::Open(open) => {
                if phase != Phase::Fresh {
                    return self.fail(format!("(6) r{r}: OPEN in phase {phase:?}"));
                }
                let rt = &mut self.routers[r];
                // (6) RFC 4724 §3, §4.1: R only after the node restarted,
                // until its End-of-RIB.
                let r_bit = open
                    .graceful_restart()
                    .is_some_and(|c| c.flags & GrCap::RESTART_STATE != 0);
                if r_bit && !rt.node_restarting {
                    return self.fail(format!("(6) r{r}: R bit with no restart under way"));
                }
                // RFC 4724 §4.2: stale routes go at once when the new OPEN
                // has no graceful restart for the family (or F is clear).
                let keeps = open.graceful_restart().is_some_and(|c| {
                    c.families
                        .iter()
                        .any(|f| f.family == Family::IPV4_UNICAST && f.flags & 0x80 != 0)
                });
                if !keeps {
                    rt.flush_stale();
                }
                rt.open = Some(open);
                rt.phase = Phase::OpenSeen;
                let mut reply = rt.our_open();
                reply.extend(Message::Keepalive.encode(&Context::default()).unwrap());
                self.send(Delivery::ToNode {
                    r,
                    conn,
                    bytes: reply,
                });
            }
            Message::Keepalive => {
                if phase == Phase::Fresh {
                    return self.fail(format!("(6) r{r}: KEEPALIVE before OPEN"));
                }
                if phase == Phase::OpenSeen {
                    let rt = &mut self.routers[r];
                    rt.phase = Phase::KeepaliveSeen;
                    rt.established_since = Some(now);
                    rt.establishments += 1;
                    rt.coverage.sessions += 1;
                    rt.keepalive_at = Some(now + KEEPALIVE);
                    // RFC 4724 §4.2: the restart timer stops; stale routes
                    // wait for End-of-RIB.
                    if rt.stale_until.is_some() {
                        rt.stale_until = Some(Duration::MAX);
                    }
                    rt.restarted = false;
                    rt.helping = None;
                }
            }
            Message::Update(u) => {
                if phase < Phase::KeepaliveSeen {
                    return self.fail(format!("(6) r{r}: UPDATE in phase {phase:?}"));
                }
                let rt = &mut self.routers[r];
                if u.end_of_rib_family().is_some() {
                    if phase == Phase::EndOfRibSeen {
                        return self.fail(format!("(6) r{r}: a second End-of-RIB"));
                    }
                    rt.phase = Phase::EndOfRibSeen;
                    rt.node_restarting &= conn.0 < rt.first_conn;
                    rt.coverage.end_of_ribs += 1;
                    rt.flush_stale();
                    if let Some(table) = table
                        && table != rt.on_conn
                    {
                        let sent = rt.on_conn.clone();
                        return self.fail(format!(
                            "(6) r{r}: End-of-RIB after {sent:?}, the table was {table:?}"
                        ));
                    }
                    return;
                }
                for n in u.withdrawals() {
                    rt.coverage.withdrawn += 1;
                    rt.rib.remove(&n.prefix);
                    rt.on_conn.remove(&n.prefix);
                    *rt.updates.entry(n.prefix).or_default() += 1;
                }
                for n in u.announced() {
                    rt.coverage.announced += 1;
                    rt.rib.insert(n.prefix, false);
                    rt.on_conn.insert(n.prefix);
                    *rt.updates.entry(n.prefix).or_default() += 1;
                }
                if let Some(p) = rt.rib.keys().find(|p| index_of(p).is_none()) {
                    let p = *p;
                    self.fail(format!("(7) r{r} got {p}, not a VIP"));
                }
            }
            Message::Notification(_) => {
                self.routers[r].drop_conn(now, true);
                self.send(Delivery::NodeClosed { r, conn });
            }
            other => self.fail(format!("r{r}: unexpected {}", other.name())),
        }
    }

    fn router_timers(&mut self, r: usize) {
        let now = self.now;
        if self.routers[r].stale_until.is_some_and(|t| t <= now) {
            self.routers[r].coverage.stale_expired += 1;
            self.routers[r].flush_stale();
        }
        if self.routers[r].keepalive_at.is_some_and(|t| t <= now) {
            self.routers[r].keepalive_at = Some(now + KEEPALIVE);
            if let Some(conn) = self.routers[r].conn {
                let bytes = Message::Keepalive.encode(&Context::default()).unwrap();
                self.send(Delivery::ToNode { r, conn, bytes });
            }
        }
    }

    fn deliver(&mut self, d: Delivery) {
        match d {
            Delivery::Connected { r, token } => {
                if self.connecting[r] != Some(token) {
                    return;
                }
                self.connecting[r] = None;
                if self.now < self.routers[r].down_until {
                    self.node_input(r, Input::ConnectFailed("connection refused".into()));
                    return;
                }
                let conn = ConnId(self.next_conn);
                self.next_conn += 1;
                // A new connection while one is open: the old one failed.
                if let Some(old) = self.routers[r].conn {
                    self.routers[r].drop_conn(self.now, false);
                    self.send(Delivery::NodeClosed { r, conn: old });
                }
                self.routers[r].conn = Some(conn);
                let local: SocketAddr = "192.0.2.2:40000".parse().unwrap();
                self.node_input(
                    r,
                    Input::Connected {
                        conn,
                        direction: Direction::Outgoing,
                        local,
                    },
                );
            }
            Delivery::ToNode { r, conn, bytes } => self.node_input(r, Input::Data { conn, bytes }),
            Delivery::NodeClosed { r, conn } => self.node_input(
                r,
                Input::Closed {
                    conn,
                    why: "closed by the router".into(),
                },
            ),
            Delivery::ToRouter {
                r,
                conn,
                bytes,
                table,
            } => self.router_receives(r, conn, bytes, table),
            Delivery::RouterClosed { r, conn } => {
                if self.routers[r].conn == Some(conn) {
                    self.routers[r].drop_conn(self.now, false);
                }
            }
        }
    }

    // --- time ---

    fn next_deadline(&mut self) -> Option<Duration> {
        let mut next: Vec<Duration> = Vec::new();
        let since = |t: Instant| t.saturating_duration_since(self.t0);
        if let Some(t) = self.routes.next_deadline() {
            next.push(since(t));
        }
        for s in &self.sessions {
            if let Some(t) = s.next_deadline() {
                next.push(since(t));
            }
        }
        if let Some((&(t, _), _)) = self.net.first_key_value() {
            next.push(t);
        }
        for rt in &self.routers {
            next.extend(rt.stale_until.filter(|t| *t != Duration::MAX));
            next.extend(rt.keepalive_at);
        }
        if let Some((&(t, _), _)) = self.reappear.first_key_value() {
            next.push(t);
        }
        next.into_iter().min()
    }

    /// Everything due by now, in order of time, until nothing is.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let now = self.now;
            let at = self.at();
            if self.routes.next_deadline().is_some_and(|t| t <= at) {
                self.routes_call(|r, at| {
                    r.poll(at);
                });
                continue;
            }
            if let Some(r) = (0..self.sessions.len())
                .find(|&r| self.sessions[r].next_deadline().is_some_and(|t| t <= at))
            {
                self.node_input(r, Input::Timer);
                continue;
            }
            if let Some((&key, _)) = self.net.first_key_value()
                && key.0 <= now
            {
                let d = self.net.remove(&key).unwrap();
                self.deliver(d);
                continue;
            }
            if let Some((&key, _)) = self.reappear.first_key_value()
                && key.0 <= now
            {
                self.reappear.remove(&key);
                self.appear(key.1);
                continue;
            }
            let due: Vec<usize> = (0..self.routers.len())
                .filter(|&r| {
                    let rt = &self.routers[r];
                    rt.stale_until.is_some_and(|t| t <= now)
                        || rt.keepalive_at.is_some_and(|t| t <= now)
                })
                .collect();
            if due.is_empty() {
                return;
            }
            for r in due {
                self.router_timers(r);
            }
        }
        self.fail("(7) no quiescence after 100000 inputs at one instant".into());
    }

    /// Moves time to `to`, handling each deadline on the way at its time.
    fn advance_to(&mut self, to: Duration) {
        while let Some(t) = self.next_deadline()
            && t <= to
        {
            self.now = self.now.max(t);
            self.pump();
            if self.violation.is_some() {
                return;
            }
        }
        self.now = self.now.max(to);
        self.pump();
    }

    // --- one event ---

    fn apply(&mut self, ev: Ev) {
        match ev {
            Ev::Next => {
                if let Some(t) = self.next_deadline() {
                    self.advance_to(t);
                }
            }
            Ev::Step(ms) => self.advance_to(self.now + Duration::from_millis(ms)),
            Ev::Appear(i) => self.appear(i),
            Ev::Flap(i, ms) => {
                if self.vips[i].present {
                    self.vanish_truth(i, Absence::Vanished);
                    self.reappear
                        .insert((self.now + Duration::from_millis(ms), i), ());
                    self.snapshot();
                }
            }
            Ev::Vanish(i) => {
                if self.vips[i].present {
                    self.vanish_truth(i, Absence::Vanished);
                    self.snapshot();
                }
            }
            Ev::Delete(i) => {
                if self.vips[i].present {
                    self.vanish_truth(i, Absence::Deleted);
                    self.snapshot();
                }
            }
            Ev::MassVanish => {
                for i in 0..VIPS {
                    self.vanish_truth(i, Absence::Vanished);
                }
                self.snapshot();
            }
            Ev::Unhealthy => {
                if self.healthy {
                    self.healthy = false;
                    self.snapshot();
                }
            }
            Ev::Healthy => {
                if !self.healthy {
                    self.healthy = true;
                    self.snapshot();
                }
            }
            Ev::Drain | Ev::Undrain => {
                let on = ev == Ev::Drain;
                if on != self.drained {
                    let at = self.at();
                    let ok = self.routes.set_drain(at, on).is_ok();
                    if ok {
                        self.drained = on;
                        if !on {
                            self.undrained_at = Some(self.now);
                        }
                        // GRACEFUL_SHUTDOWN, withdrawal; or back.
                        for v in &mut self.vips {
                            v.transitions += if on { 2 } else { 1 };
                        }
                        self.routes_call(|r, _| r.publish_tables());
                    }
                }
            }
            Ev::ProbeFail(i) | Ev::ProbePass(i) => {
                let pass = matches!(ev, Ev::ProbePass(_));
                // The datapath's health changes; the probe reports it (a
                // probe runs only while its VIP is in the snapshot).
                if probed(i) && self.vips[i].probe_failing == pass {
                    let now = self.now;
                    let v = &mut self.vips[i];
                    v.transitions += 1;
                    v.probe_failing = !pass;
                    // Present, it is advertised from now on, or withdrawn
                    // at once; absent, its probe does not run.
                    if v.present {
                        // (Passing again: advertised again, maybe after a
                        // withdrawal; the SETTLE window starts afresh.)
                        v.covered_since = pass.then_some(now);
                    }
                    self.report_probe(i);
                }
            }
            Ev::Reset(r) => {
                if let Some(conn) = self.routers[r].conn {
                    self.routers[r].drop_conn(self.now, false);
                    self.send(Delivery::NodeClosed { r, conn });
                }
            }
            Ev::Restart(r, gr) => {
                let now = self.now;
                if let Some(conn) = self.routers[r].conn {
                    if !gr {
                        // Cease/Administrative Reset (RFC 4486), then close.
                        let n = Message::Notification(Notification::new(6, 4, Vec::new()));
                        let bytes = n.encode(&Context::default()).unwrap();
                        self.send(Delivery::ToNode { r, conn, bytes });
                    }
                    self.send(Delivery::NodeClosed { r, conn });
                }
                let rt = &mut self.routers[r];
                rt.drop_conn(now, true);
                rt.rib.clear();
                rt.stale_until = None;
                rt.restarted = gr && rt.gr;
                rt.down_until = now + Duration::from_millis(500 + (r as u64 + 1) * 700);
            }
            Ev::Delay(r, ms) => self.delay[r] = Duration::from_millis(ms),
            Ev::NodeRestart(generation) => self.restart_node(generation),
        }
        self.pump();
    }

    // --- the invariants after each step ---

    fn check(&mut self) {
        let now = self.now;
        let mut checks = 0u64;
        let mut bad: Vec<String> = Vec::new();
        for r in 0..self.routers.len() {
            let rt = &self.routers[r];
            let up = self.sessions[r].state() == State::Established
                && rt.established_since.is_some_and(|t| now >= t + SETTLE);
            // (7) A router holds VIPs only.
            checks += 1;
            if rt.rib.len() > VIPS {
                let n = rt.rib.len();
                bad.push(format!("(7) r{r} holds {n} routes of {VIPS} VIPs"));
            }
            // (1') Graceful restart (RFC 4724 §4.2): while a helping router
            // waits for the node's session to come back (within the restart
            // time, before End-of-RIB), every VIP (1) required before the
            // connection dropped is still in its table, as stale; so the
            // node's OPEN offered graceful restart for the family with F.
            if let Some((dropped, up_since)) = rt.helping
                && now < dropped + RESTART_TIME
                && dropped >= up_since + SETTLE
                && !self.drained
                && self.undrained_at.is_none_or(|t| dropped >= t + SETTLE)
            {
                for (i, v) in self.vips.iter().enumerate() {
                    checks += 1;
                    // Wanted when the connection dropped: present, or held
                    // down then (what happened since does not matter).
                    let held = match v.gone {
                        None => v.present,
                        Some((at, Absence::Vanished)) => at >= dropped || dropped < at + HOLD_DOWN,
                        Some(_) => false,
                    };
                    let wanted = held && v.covered_since.is_some_and(|t| dropped >= t + SETTLE);
                    let probe_ok = !probed(i) || !v.probe_failing;
                    if wanted && probe_ok && !rt.rib.contains_key(&vip_prefix(i)) {
                        let p = vip_prefix(i);
                        bad.push(format!(
                            "(1') {p} not kept at r{r} during the node's restart: {v:?}"
                        ));
                        break;
                    }
                }
            }
            if !up {
                continue;
            }
            // (1) A VIP the source wants (present for SETTLE), or absent
            // with no reason for less than the hold-down after being
            // wanted, is in every router's table that has been Established
            // for SETTLE — unless drained (or undrained less than SETTLE
            // ago) or its probe fails (a probed VIP is wanted from SETTLE
            // after its probe passes while it is present).
            let drained = self.drained || self.undrained_at.is_some_and(|t| now < t + SETTLE);
            if !drained {
                for (i, v) in self.vips.iter().enumerate() {
                    checks += 1;
                    let held = match v.gone {
                        None => v.present,
                        Some((at, Absence::Vanished)) => now < at + HOLD_DOWN,
                        Some(_) => false,
                    };
                    let wanted = held && v.covered_since.is_some_and(|t| now >= t + SETTLE);
                    let probe_ok = !probed(i) || !v.probe_failing;
                    if wanted && probe_ok && !rt.rib.contains_key(&vip_prefix(i)) {
                        let p = vip_prefix(i);
                        let v = v.clone();
                        let state = self.routes.stability().state(&p);
                        let desired = self.tables[r].contains_key(&p);
                        let sent = self.sessions[r].status().advertised.contains_key(&p);
                        bad.push(format!(
                            "(1) {p} missing at r{r}: {v:?}; stability {state:?}, desired {desired}, advertised {sent}"
                        ));
                        break;
                    }
                }
            }
            // (2) UPDATEs for a prefix to a router ≤ the changes of what
            // the router should have for it (appearances, absences,
            // probe verdicts, 2 per drain, 1 per undrain) + the sessions
            // established (each sends the whole table).
            for (p, &n) in &rt.updates {
                checks += 1;
                if let Some(i) = index_of(p) {
                    let bound = self.vips[i].bound(now) + rt.establishments;
                    if n > bound {
                        let v = self.vips[i].clone();
                        bad.push(format!(
                            "(2) r{r} got {n} UPDATEs for {p}, bound {bound} ({v:?}, {} sessions)",
                            rt.establishments
                        ));
                        break;
                    }
                }
            }
            // (6) Once the routes are ready, an established session has had
            // End-of-RIB (RFC 4724 §4.1) within SETTLE.
            checks += 1;
            if self.routes_ready && rt.phase != Phase::EndOfRibSeen {
                bad.push(format!("(6) r{r} established with no End-of-RIB"));
                continue;
            }
            // (3) With nothing in flight to the router, its routes (not
            // stale) are what the session's status says it advertised, and
            // that is the desired table.
            let idle = !self.net.values().any(|d| d.lane() == (r, false));
            if idle {
                checks += 1;
                let fresh: BTreeSet<IpNet> = rt
                    .rib
                    .iter()
                    .filter(|(_, s)| !**s)
                    .map(|(p, _)| *p)
                    .collect();
                let status = self.sessions[r].status();
                let advertised: BTreeSet<IpNet> = status.advertised.keys().copied().collect();
                let desired: BTreeSet<IpNet> = self.tables[r].keys().copied().collect();
                if fresh != advertised {
                    bad.push(format!(
                        "(3) r{r} has {fresh:?}, status says {advertised:?}"
                    ));
                } else if status.end_of_rib_sent && advertised != desired {
                    bad.push(format!(
                        "(3) r{r}: advertised {advertised:?}, desired {desired:?}"
                    ));
                }
            }
        }
        self.checks += checks;
        if let Some(b) = bad.into_iter().next() {
            self.fail(b);
        }
    }
}

/// A new node process: its routes core (with its stability layer and
/// drain control) and one session per peer (`restarting`: the R bit for the peers with
/// graceful restart), at `at`.
fn boot(
    config: &Arc<holdfast::config::Config>,
    at: Instant,
    seed: u64,
    restarting: bool,
) -> (Routes, Vec<PeerSession>) {
    let stability = Stability::new(stability_params(config)).expect("valid parameters");
    let mut routes = Routes::new(config.clone(), stability, false, false);
    let mut sessions = Vec::new();
    for (i, p) in config.peers.iter().enumerate() {
        routes.attach(&p.name);
        let address: IpAddr = if i == 0 {
            "192.0.2.1".parse().unwrap()
        } else {
            "192.0.2.3".parse().unwrap()
        };
        let spec = PeerSpec {
            peer: p.clone(),
            address,
            interface: None,
            local_asn: 65001,
            router_id: Ipv4Addr::new(192, 0, 2, 2),
            hostname: "node-1".into(),
            restarting: restarting && p.graceful_restart.enabled,
        };
        sessions.push(PeerSession::with_jitter_seed(
            spec,
            at,
            Box::new(|| vec![holdfast_sockopt_addr()]),
            seed ^ (i as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1),
        ));
    }
    (routes, sessions)
}

fn holdfast_sockopt_addr() -> holdfast_sockopt::InterfaceAddress {
    holdfast_sockopt::InterfaceAddress {
        interface: "eth0".into(),
        address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
        prefix_len: 24,
    }
}

/// The outcome of one run.
struct Run {
    events: u64,
    coverage: Coverage,
    checks: u64,
    digest: u64,
    /// The violation, and the index of the event after which it showed.
    violation: Option<(String, usize)>,
}

fn run(seed: u64, events: &[Ev]) -> Run {
    let mut done = 0u64;
    let mut checks = 0u64;
    let mut digest = 0;
    let mut coverage = Coverage::default();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut sim = Sim::new(seed);
        if let Some(v) = sim.violation.take() {
            return Some((v, 0));
        }
        for (k, ev) in events.iter().enumerate() {
            sim.apply(*ev);
            sim.check();
            done += 1;
            checks = sim.checks;
            digest = sim.digest;
            coverage = sim.coverage;
            for rt in &sim.routers {
                coverage.add(&rt.coverage);
            }
            if let Some(v) = sim.violation.take() {
                return Some((v, k));
            }
        }
        None
    }));
    let violation = match result {
        Ok(v) => v,
        Err(e) => {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Some((format!("(7) panic: {msg}"), done as usize))
        }
    };
    Run {
        events: done,
        coverage,
        checks,
        digest,
        violation,
    }
}

/// The invariant a violation message names, e.g. "(1)".
fn invariant(msg: &str) -> &str {
    msg.split_once(") ")
        .and_then(|(a, _)| a.rsplit_once('('))
        .map_or(msg, |(_, n)| n)
}

/// Drops events one at a time while the run still breaks the same
/// invariant.
fn shrink(seed: u64, events: &[Ev], msg: &str, at: usize) -> Vec<Ev> {
    let want = invariant(msg).to_string();
    let mut list: Vec<Ev> = events[..=at.min(events.len() - 1)].to_vec();
    let fails = |l: &[Ev]| {
        run(seed, l)
            .violation
            .is_some_and(|(m, _)| invariant(&m) == want)
    };
    // Passes from the end, until one drops nothing (or enough runs).
    let mut tries = 0;
    loop {
        let before = list.len();
        let mut i = list.len();
        while i > 0 && tries < 5_000 {
            i -= 1;
            let mut shorter = list.clone();
            shorter.remove(i);
            tries += 1;
            if fails(&shorter) {
                list = shorter;
            }
        }
        if list.len() == before || tries >= 5_000 {
            break;
        }
    }
    list
}

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
fn simulation() {
    // Logging off (no subscriber): the rate limiter `logging::allow`
    // reads the process clock, but it decides only whether a line is
    // written, nothing the simulation sees.
    let per_seed = env("HOLDFAST_SIM_EVENTS").unwrap_or(2_000) as usize;
    let seeds: Vec<u64> = match env("HOLDFAST_SIM_SEED") {
        Some(s) => vec![s],
        None => (0..env("HOLDFAST_SIM_SEEDS").unwrap_or(if cfg!(debug_assertions) {
            20
        } else {
            2_000
        }))
            .collect(),
    };
    let replay = seeds.len() == 1;
    let started = Instant::now();
    let (mut events, mut checks, mut violations) = (0u64, 0u64, 0u64);
    let mut report = String::new();
    let mut coverage = Coverage::default();
    for &seed in &seeds {
        let list = generate(seed, per_seed);
        if replay {
            println!("seed {seed}: {list:?}");
        }
        let out = run(seed, &list);
        if replay {
            // The same on every run of the seed, in any process.
            println!(
                "seed {seed}: digest of the octets written {:016x}",
                out.digest
            );
        }
        events += out.events;
        coverage.add(&out.coverage);
        checks += out.checks;
        if let Some((msg, at)) = out.violation {
            violations += 1;
            if violations <= 3 {
                let shrunk = shrink(seed, &list, &msg, at);
                let again = run(seed, &shrunk)
                    .violation
                    .map(|(m, _)| m)
                    .unwrap_or_default();
                let line = format!(
                    "seed {seed}: {msg}\n  after event {at}; shrunk to {} events: {shrunk:?}\n  which fail with: {again}\n",
                    shrunk.len()
                );
                eprint!("{line}");
                report.push_str(&line);
            }
        } else if seed == seeds[0] {
            // Deterministic: the same seed writes the same octets.
            assert_eq!(
                run(seed, &list).digest,
                out.digest,
                "seed {seed} replayed differently"
            );
        }
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "simulation: {} seeds, {events} events, {checks} checks, {violations} violations ({:.0} events/s, {secs:.1} s)",
        seeds.len(),
        events as f64 / secs
    );
    println!("{coverage:?}");
    assert_eq!(violations, 0, "{report}");
}

//! A deterministic simulation of a whole node on virtual time.
//!
//! The daemon's sans-IO cores — the source (the Kubernetes policy, or the
//! VIP file source), the routes core (`Routes`: source snapshots, probe
//! results, drains, reloads, the exit and instants in; per-peer tables
//! out) and one `PeerSession` per router (FSM, speaker, graceful-restart R
//! bit) — are wired together as the daemon's drivers wire them, but with
//! no tokio, socket or clock: the network is a queue of deliveries on a
//! virtual clock (one `Instant` base plus a simulated offset), the routers
//! are small BGP speakers written here on `bgp-proto`'s codec (one
//! dual-stack with graceful restart and enhanced route refresh, one IPv4
//! with route refresh, one IPv6 over IPv6), and a seeded PRNG picks the
//! node's settings (its source, advertise_delay, damping, each peer's
//! MRAI) and what happens.
//!
//! The source is real. A seed with the Kubernetes source keeps a model
//! cluster (a LoadBalancer Service per VIP, some with
//! `externalTrafficPolicy: Local`; their EndpointSlices, with this node's
//! endpoint ready, not ready, terminating or elsewhere; the Node, cordoned
//! or excluded), turns its objects into the watchers' records
//! (`ServiceRecord::of`, `SliceRecord::of`) and evaluates them with the
//! policy (`policy::update` for the Services a watch event names,
//! `policy::evaluate` for the Node, re-lists, an outage's end, a reload, a
//! process's first) into the snapshot (`Evaluation::snapshot`), with the
//! watcher layer's health: an outage or a 410 Gone makes the source
//! unhealthy with its last evaluation, its store frozen; when its links
//! are live again, the store is the API server's and one full evaluation
//! follows; a re-list may answer no Service at all while healthy (see
//! `Kube`). A seed with the file source writes a VIP file and has the
//! file source (`FileSource::take_read`: the digest, the parser, "empty is
//! confirmed", the last good set) read it after each edit: VIPs added or
//! removed, the file emptied, truncated and rewritten, broken (a syntax
//! error, an unknown advertisement, a VIP twice, the file deleted) and
//! mended (see `VipFile`). The daemon runs one source at a time; so does
//! each seed.
//!
//! What happens: VIPs appearing, flapping (back before the hold-down),
//! vanishing or deleted for good, all vanishing at once, the source
//! turning unhealthy and healthy, re-lists (410 Gone) and empty re-lists,
//! local endpoints lost and back, the Node cordoned and uncordoned,
//! `holdfast drain` / `undrain`, probe failures, router session resets,
//! router restarts with and without graceful restart, routers asking for
//! ROUTE-REFRESH, reloads that remove or add a peer or change the
//! hold-down, holdfast's planned exit (RFC 8326 graceful shutdown, then
//! withdrawal) and its graceful restart, packet delays, and time moving to
//! the next deadline or by a random step (every deadline on the way
//! handled in order).
//!
//! After every step the invariants below are checked against a model of
//! what the source's objects ask for, written from the policy's and the
//! sources' documented rules (`Objects::wants`, `Objects::fate`,
//! `Sim::model_kube`, `Sim::model_file`), not from their code. A
//! violation prints its seed and the events of the run, shrunk (events
//! dropped one at a time while the run still fails).
//!
//! `HOLDFAST_SIM_SEEDS=N` runs seeds 0..N; `HOLDFAST_SIM_SEED=S` replays
//! one seed (and prints its settings and events); `HOLDFAST_SIM_EVENTS=N`
//! sets the events per seed. Run with `cargo test --release --test
//! simulation`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::capability::{GrFamily, GracefulRestart as GrCap};
use bgp_proto::community::well_known::GRACEFUL_SHUTDOWN;
use bgp_proto::consts::notify::{CEASE, cease};
use bgp_proto::fsm::{ConnId, Direction, State};
use bgp_proto::open::Open;
use bgp_proto::{Capability, Community, Context, Family, Message, Notification, RouteRefresh};
use holdfast::daemon::sim::{ExitPlan, ExitReason, Routes, exit_plan, stability_params};
use holdfast::model::{Absence, SourceSnapshot};
use holdfast::probe::{Observation, ProbeResult};
use holdfast::session::{Input, Output, PeerSession, PeerSpec, StopHow};
use holdfast::source::file::{EMPTY_SETTLE, FileSettings, FileSource};
use holdfast::source::kubernetes::{
    Changes, Cluster, EXCLUDE_LABEL, Evaluation, NodeFacts, ServiceKey, ServiceRecord, SliceRecord,
    evaluate, needs_full_evaluation, node_facts, update,
};
use holdfast::speaker::PeerTable;
use holdfast::stability::{DampingParams, Stability};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::Node;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};

/// IPv4 VIPs 10.0.0.1..=V4_VIPS, then IPv6 VIPs 2001:db8:100::1..; the odd
/// ones are probed.
const V4_VIPS: usize = 12;
const VIPS: usize = 16;
/// `[stability] withdraw_hold_down` at the start (a reload may change it).
const HOLD_DOWN: Duration = Duration::from_secs(30);
/// The guard's pace (`withdraw_rate` 10/s, the default).
const WITHDRAW_INTERVAL: Duration = Duration::from_millis(100);
/// The guard's share (`max_withdraw_fraction`).
const GUARD_FRACTION: f64 = 0.5;
/// The longest one-way packet delay the simulation picks.
const MAX_DELAY_MS: u64 = 400;
/// Time a change needs to reach a router once the node's table has it:
/// the network's delay, twice (a reply), with room to spare. A peer's
/// MRAI comes on top ([`Sim::settle`]), advertise_delay before.
const SETTLE: Duration = Duration::from_millis(2 * MAX_DELAY_MS + 200);
/// The guard's pace bounds how long it may hold a due withdrawal back: one
/// per `withdraw_rate` interval, each VIP at most once (1w).
const GUARD_SLACK: Duration = Duration::from_millis(100 * (VIPS as u64 + 1));
/// The reasons the Kubernetes policy remembers for a VIP that went are
/// kept this long past the longest timer that may need them (policy.rs,
/// `REASON_MARGIN`).
const REASON_MARGIN: Duration = Duration::from_secs(60);
/// This node's name (`NODE_NAME`).
const NODE: &str = "node-1";
/// r1's `graceful_restart.restart_time`.
const RESTART_TIME: Duration = Duration::from_secs(20);
/// Router keepalive interval (a third of the 9 s hold time).
const KEEPALIVE: Duration = Duration::from_secs(3);
/// `[speaker] graceful_shutdown_wait`.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Room for the floating point of damping's figure of merit: the model's
/// end of a damping episode may differ from the layer's by rounding.
const DAMPING_MARGIN: Duration = Duration::from_millis(50);
/// (7): deliveries in flight at most (each router link carries a bounded
/// session's worth of messages: the table is at most VIPS prefixes).
const MAX_IN_FLIGHT: usize = 2_000;
/// The node's addresses: IPv4 and IPv6 sessions' local ends, and the next
/// hops (RFC 4271 §5.1.3, RFC 2545 §3).
const NODE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const NODE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

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
families = ["ipv4-unicast", "ipv6-unicast"]
graceful_restart = { enabled = true, restart_time = "20s" }

[[peer]]
name = "r2"
address = "192.0.2.3"
asn = 65002
hold_time = "9s"
connect_retry = "1s"
families = ["ipv4-unicast"]
graceful_restart = { enabled = false }

[[peer]]
name = "r3"
address = "2001:db8::3"
asn = 65003
hold_time = "9s"
connect_retry = "1s"
families = ["ipv6-unicast"]
graceful_restart = { enabled = false }

[source]
kind = "kubernetes"

[stability]
withdraw_hold_down = "30s"
max_withdraw_fraction = 0.5

[[advertisement]]
name = "public"
service_selector = { match_labels = { tier = "public" } }

[[advertisement]]
name = "probed"
service_selector = { match_labels = { tier = "probed" } }
probe = { port = 443, fail_after = 1, recover_after = 1 }
"#;

/// The `[source]` of a seed that reads a VIP file (CONFIG's is the
/// Kubernetes source).
const FILE_SOURCE: &str = "[source]\nkind = \"file\"\npath = \"vips.toml\"\n";

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

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

// --- the node's settings, drawn per seed ---

/// Where a seed's VIPs come from: one source at a time, as the daemon
/// runs one (`[source] kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SourceKind {
    /// A model cluster, read by the Kubernetes source's policy.
    Kubernetes,
    /// A VIP file, read by the file source.
    File,
}

/// The stability settings of one seed's node, and its source.
#[derive(Clone, Debug)]
struct Settings {
    source: SourceKind,
    /// `[stability] advertise_delay`.
    advertise_delay: Duration,
    /// `[stability.damping]`, when on.
    damping: Option<DampingParams>,
    /// Each peer's `min_route_advertisement_interval`.
    mrai: [Duration; 3],
}

fn settings(seed: u64) -> Settings {
    let mut rng = Rng::new(seed ^ 0x5e77_1265_da3b_0011);
    let advertise_delay = if rng.below(2) == 0 {
        Duration::ZERO
    } else {
        ms(1 + rng.below(8_000))
    };
    let damping = (rng.below(5) < 2).then(|| {
        loop {
            let penalty = 500 + rng.below(1_500) as u32;
            // Two to four absences close together start an episode; the
            // thresholds are no multiple of the penalty (a tie would be a
            // matter of rounding).
            let suppress = penalty + penalty / 3 + rng.below(u64::from(penalty) * 2) as u32;
            let reuse = 100 + rng.below(u64::from(suppress) - 150) as u32;
            let p = DampingParams {
                half_life: ms(10_000 + rng.below(300_000)),
                penalty,
                suppress_threshold: suppress,
                reuse_threshold: reuse,
                max_suppress: ms(20_000 + rng.below(600_000)),
            };
            if p.validate().is_ok() {
                break p;
            }
        }
    });
    let mrai = [0; 3].map(|_| {
        if rng.below(2) == 0 {
            Duration::ZERO
        } else {
            ms(100 + rng.below(5_000))
        }
    });
    // Drawn last: the settings above stay what they were for each seed.
    let source = if rng.below(5) < 3 {
        SourceKind::Kubernetes
    } else {
        SourceKind::File
    };
    Settings {
        source,
        advertise_delay,
        damping,
        mrai,
    }
}

/// The config file with the seed's settings, and every peer (a reload
/// removing one leaves it out: [`Sim::reload`]).
fn base_config(s: &Settings) -> holdfast::config::Config {
    let text = match s.source {
        SourceKind::Kubernetes => CONFIG.to_string(),
        SourceKind::File => CONFIG.replace("[source]\nkind = \"kubernetes\"\n", FILE_SOURCE),
    };
    let mut config = holdfast::config::parse(Path::new("sim.toml"), &text).expect("a valid config");
    assert_eq!(config.file_source().is_some(), s.source == SourceKind::File);
    assert_eq!(config.speaker.graceful_shutdown_wait, SHUTDOWN_WAIT);
    config.stability.advertise_delay = s.advertise_delay;
    config.stability.damping = s.damping;
    for (p, mrai) in config.peers.iter_mut().zip(s.mrai) {
        p.min_route_advertisement_interval = mrai;
    }
    config
}

// --- events ---

/// One thing that happens; what cannot happen in the state at hand (a VIP
/// that is there appearing) is a no-op, so any sublist is a valid run.
/// The source's events change the model cluster or the VIP file, which
/// the real source then reads (see `Kube` and `VipFile`); an event of the
/// other source is a no-op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ev {
    /// Time moves to the next deadline (a timer, a delivery, a flap's end).
    Next,
    /// Time moves by this many ms, every deadline on the way handled.
    Step(u64),
    /// Kubernetes: Service i created, or its ingress list refilled, with
    /// VIP i; file: VIP i added.
    Appear(usize),
    /// As `Vanish`, for this many ms (less than the first hold-down), then
    /// back (`Appear`): the LB-IPAM flap.
    Flap(usize, u64),
    /// Kubernetes: Service i's `status.loadBalancer.ingress` emptied; file:
    /// VIP i removed. Until an `Appear`.
    Vanish(usize),
    /// Kubernetes: Service i deleted (a definitive absence); file: VIP i
    /// removed (a file gives no reasons).
    Delete(usize),
    /// Kubernetes: every Service's ingress list emptied at once; file:
    /// every VIP removed (a valid, empty file).
    MassVanish,
    /// Kubernetes: the API server unreachable (every watcher's link
    /// broken); file: the file broken (0: a syntax error, 1: an entry
    /// naming an unknown advertisement, 2: a VIP twice, 3: the file
    /// deleted).
    Unhealthy(u8),
    /// The API server reachable again (the watchers catch up or re-list);
    /// the file mended.
    Healthy,
    /// Kubernetes: this node's endpoint of Service i is now this (only
    /// Services with traffic policy Local care, see [`local`]).
    Endpoint(usize, Endpoint),
    /// Kubernetes: the Node cordoned (`spec.unschedulable`), or (`true`)
    /// labelled excluded from load balancers.
    Cordon(bool),
    /// Kubernetes: the Node neither cordoned nor excluded.
    Uncordon,
    /// Kubernetes: a watch ends in 410 Gone; the re-list is done this many
    /// ms later.
    Relist(u64),
    /// Kubernetes: a re-list answers no Service at all, healthy (an etcd
    /// restore, the wrong cluster), for this many ms, until the next
    /// re-list; file: the file truncated (`O_TRUNC`) and rewritten this
    /// many ms later.
    EmptyList(u64),
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
    /// The router asks for the routes of its n-th family again
    /// (ROUTE-REFRESH, RFC 2918), if it can.
    Refresh(usize, usize),
    /// A config reload removes the router's peer (not the last one).
    RemovePeer(usize),
    /// A config reload adds the router's peer back.
    AddPeer(usize),
    /// A config reload sets `withdraw_hold_down` to this many seconds.
    HoldDown(u64),
    /// SIGTERM: holdfast's planned exit (`true`: `--withdraw-on-exit`);
    /// the next process starts as soon as it is over. A second one while
    /// the first waits stops at once.
    Exit(bool),
}

fn generate(seed: u64, n: usize) -> Vec<Ev> {
    let mut rng = Rng::new(seed);
    let routers = 3u64;
    (0..n)
        .map(|_| {
            let vip = rng.below(VIPS as u64) as usize;
            let r = rng.below(routers) as usize;
            match rng.below(1_000) {
                0..300 => Ev::Next,
                300..450 => Ev::Step(match rng.below(10) {
                    0 => rng.below(45_000),
                    1..=3 => rng.below(5_000),
                    _ => rng.below(500),
                }),
                450..540 => Ev::Appear(vip),
                540..610 => Ev::Flap(vip, 1 + rng.below(HOLD_DOWN.as_millis() as u64 - 1)),
                610..650 => Ev::Vanish(vip),
                650..670 => Ev::Delete(vip),
                670..678 => Ev::MassVanish,
                678..698 => Ev::Unhealthy(rng.below(4) as u8),
                698..728 => Ev::Healthy,
                728..736 => Ev::Drain,
                736..756 => Ev::Undrain,
                756..796 => Ev::ProbeFail(vip),
                796..846 => Ev::ProbePass(vip),
                846..876 => Ev::Reset(r),
                876..900 => Ev::Restart(r, rng.below(2) == 0),
                900..908 => Ev::NodeRestart(rng.next()),
                908..928 => Ev::Refresh(r, rng.below(2) as usize),
                928..932 => Ev::RemovePeer(r),
                932..944 => Ev::AddPeer(r),
                944..948 => Ev::HoldDown([5, 10, 30, 60][rng.below(4) as usize]),
                948..953 => Ev::Exit(rng.below(3) == 0),
                953..969 => Ev::Endpoint(
                    // Mostly a Service with traffic policy Local (the
                    // others' endpoints change nothing advertised).
                    if rng.below(4) == 0 {
                        vip
                    } else {
                        3 * rng.below(5) as usize + 2
                    },
                    [
                        Endpoint::Ready,
                        Endpoint::Ready,
                        Endpoint::NotReady,
                        Endpoint::Terminating,
                        Endpoint::Elsewhere,
                    ][rng.below(5) as usize],
                ),
                969..972 => Ev::Cordon(rng.below(2) == 0),
                972..978 => Ev::Uncordon,
                978..983 => Ev::Relist(rng.below(3_000)),
                983..987 => Ev::EmptyList(1 + rng.below(40_000)),
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
    announced_v6: u64,
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
    /// Checks of (1) where only damping kept an absent VIP advertised
    /// (past its hold-down).
    damped_kept: u64,
    /// Checks of (1) where a VIP was still within its advertise_delay.
    delayed: u64,
    /// Batches of route changes whose spacing the MRAI (2m) checked.
    mrai_batches: u64,
    /// ROUTE-REFRESH answers the routers got: plain (the table, then
    /// End-of-RIB) and enhanced (BoRR, the table, EoRR, RFC 7313).
    refreshes: u64,
    enhanced_refreshes: u64,
    /// Routes received with GRACEFUL_SHUTDOWN (RFC 8326).
    graceful_shutdown_routes: u64,
    /// Planned exits, and the Cease/Administrative Shutdown after the
    /// withdrawal that routers got from them.
    exits: u64,
    shutdown_ceases: u64,
    /// Peers removed by a reload (Cease/Peer De-configured received),
    /// added back, hold-down changes.
    removals: u64,
    deconfigured_ceases: u64,
    additions: u64,
    hold_down_changes: u64,
    /// The Kubernetes source's evaluations: incremental (`policy::update`)
    /// and full (`policy::evaluate`: the Node, a re-list, an outage's end,
    /// a reload, a process's first).
    policy_updates: u64,
    policy_evaluations: u64,
    /// Absences the model took: with no local endpoint (traffic policy
    /// Local), drained (the Node cordoned or excluded), Services missing
    /// in a mass disappearance (held down, not deleted).
    no_local_endpoint: u64,
    drained_absences: u64,
    mass_absences: u64,
    /// Re-lists after 410 Gone; re-lists that answered no Service.
    relists: u64,
    empty_relists: u64,
    /// Broken VIP files; reads of a VIP file emptied that the source did
    /// not believe yet.
    file_breaks: u64,
    empty_file_waits: u64,
    /// Checks of (1w) that bound a VIP gone from the source.
    withdrawn_checked: u64,
}

impl Coverage {
    fn add(&mut self, o: &Coverage) {
        self.sessions += o.sessions;
        self.end_of_ribs += o.end_of_ribs;
        self.announced += o.announced;
        self.announced_v6 += o.announced_v6;
        self.withdrawn += o.withdrawn;
        self.stale_kept += o.stale_kept;
        self.stale_swept += o.stale_swept;
        self.stale_expired += o.stale_expired;
        self.guard_steps += o.guard_steps;
        self.unhealthy_withdrawals += o.unhealthy_withdrawals;
        self.damped_kept += o.damped_kept;
        self.delayed += o.delayed;
        self.mrai_batches += o.mrai_batches;
        self.refreshes += o.refreshes;
        self.enhanced_refreshes += o.enhanced_refreshes;
        self.graceful_shutdown_routes += o.graceful_shutdown_routes;
        self.exits += o.exits;
        self.shutdown_ceases += o.shutdown_ceases;
        self.removals += o.removals;
        self.deconfigured_ceases += o.deconfigured_ceases;
        self.additions += o.additions;
        self.hold_down_changes += o.hold_down_changes;
        self.policy_updates += o.policy_updates;
        self.policy_evaluations += o.policy_evaluations;
        self.no_local_endpoint += o.no_local_endpoint;
        self.drained_absences += o.drained_absences;
        self.mass_absences += o.mass_absences;
        self.relists += o.relists;
        self.empty_relists += o.empty_relists;
        self.file_breaks += o.file_breaks;
        self.empty_file_waits += o.empty_file_waits;
        self.withdrawn_checked += o.withdrawn_checked;
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
    /// End-of-RIB for every family of the session.
    EndOfRibSeen,
}

/// What a router offers of route refresh.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refresh {
    None,
    /// RFC 2918.
    Plain,
    /// RFC 2918 and RFC 7313.
    Enhanced,
}

/// A route in a router's Adj-RIB-In.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RouteAt {
    /// Kept through the node's graceful restart (RFC 4724 §4.2).
    stale: bool,
    /// Not re-sent yet in the enhanced route refresh under way (RFC 7313
    /// §4: purged at EoRR).
    refresh_stale: bool,
    /// Carries GRACEFUL_SHUTDOWN (RFC 8326).
    graceful_shutdown: bool,
}

fn family_of(p: &IpNet) -> Family {
    match p {
        IpNet::V4(_) => Family::IPV4_UNICAST,
        IpNet::V6(_) => Family::IPV6_UNICAST,
    }
}

struct Router {
    asn: u32,
    id: Ipv4Addr,
    /// Where the node connects to it, and from which of its addresses.
    address: IpAddr,
    local: SocketAddr,
    /// Graceful restart helper (RFC 4724 §4.2) and its capability.
    gr: bool,
    families: Vec<Family>,
    refresh: Refresh,
    conn: Option<ConnId>,
    phase: Phase,
    /// Our OPEN on the current connection.
    open: Option<Open>,
    /// The families both OPENs have, and enhanced route refresh.
    session_families: Vec<Family>,
    enhanced: bool,
    /// The families End-of-RIB came for on the current connection.
    eors: BTreeSet<Family>,
    established_since: Option<Duration>,
    /// When the node process of the current session started.
    session_node_since: Duration,
    /// Adj-RIB-In.
    rib: BTreeMap<IpNet, RouteAt>,
    /// Prefixes announced (and not withdrawn) on the current connection.
    on_conn: BTreeSet<IpNet>,
    /// RFC 4724 §4.2: the stale routes go at this time unless the session
    /// is back by then.
    stale_until: Option<Duration>,
    /// The connection of a session up since the second time dropped
    /// without a NOTIFICATION at the first, in a node process started at
    /// the third: the node's config has graceful restart for this router
    /// (r1), so the router is to help.
    helping: Option<(Duration, Duration, Duration)>,
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
    /// ROUTE-REFRESH requests per family not answered yet, and the
    /// families whose enhanced refresh is under way (BoRR seen).
    refresh_asked: BTreeMap<Family, u64>,
    in_refresh: BTreeSet<Family>,
    /// The NOTIFICATION the node is to end this connection with: Cease
    /// with this subcode (a planned exit: after withdrawing every route).
    expect_cease: Option<(ConnId, u8)>,
    /// NLRI (announced or withdrawn) received per prefix.
    updates: BTreeMap<IpNet, u64>,
    establishments: u64,
    /// ROUTE-REFRESH requests sent.
    refreshes: u64,
    coverage: Coverage,
}

impl Router {
    #[allow(clippy::too_many_arguments)]
    fn new(
        asn: u32,
        id: Ipv4Addr,
        address: IpAddr,
        local: SocketAddr,
        gr: bool,
        families: Vec<Family>,
        refresh: Refresh,
    ) -> Self {
        Router {
            asn,
            id,
            address,
            local,
            gr,
            families,
            refresh,
            conn: None,
            phase: Phase::Fresh,
            open: None,
            session_families: Vec::new(),
            enhanced: false,
            eors: BTreeSet::new(),
            established_since: None,
            session_node_since: Duration::ZERO,
            rib: BTreeMap::new(),
            on_conn: BTreeSet::new(),
            stale_until: None,
            helping: None,
            keepalive_at: None,
            down_until: Duration::ZERO,
            restarted: false,
            node_restarting: false,
            first_conn: 0,
            refresh_asked: BTreeMap::new(),
            in_refresh: BTreeSet::new(),
            expect_cease: None,
            updates: BTreeMap::new(),
            establishments: 0,
            refreshes: 0,
            coverage: Coverage::default(),
        }
    }

    /// r1: dual-stack over IPv4, graceful restart, enhanced route refresh;
    /// r2: IPv4, route refresh; r3: IPv6 over IPv6, neither.
    fn all() -> Vec<Router> {
        let v4 = Family::IPV4_UNICAST;
        let v6 = Family::IPV6_UNICAST;
        let local4: SocketAddr = SocketAddr::new(IpAddr::V4(NODE_V4), 40000);
        let local6: SocketAddr = SocketAddr::new(IpAddr::V6(NODE_V6), 40000);
        vec![
            Router::new(
                65000,
                Ipv4Addr::new(192, 0, 2, 1),
                "192.0.2.1".parse().unwrap(),
                local4,
                true,
                vec![v4, v6],
                Refresh::Enhanced,
            ),
            Router::new(
                65002,
                Ipv4Addr::new(192, 0, 2, 3),
                "192.0.2.3".parse().unwrap(),
                local4,
                false,
                vec![v4],
                Refresh::Plain,
            ),
            Router::new(
                65003,
                Ipv4Addr::new(192, 0, 2, 4),
                "2001:db8::3".parse().unwrap(),
                local6,
                false,
                vec![v6],
                Refresh::None,
            ),
        ]
    }

    fn our_open(&self) -> Vec<u8> {
        let mut caps: Vec<Capability> = self
            .families
            .iter()
            .map(|f| Capability::Multiprotocol(*f))
            .collect();
        caps.push(Capability::FourOctetAs(self.asn));
        if self.refresh != Refresh::None {
            caps.push(Capability::RouteRefresh);
        }
        if self.refresh == Refresh::Enhanced {
            caps.push(Capability::EnhancedRouteRefresh);
        }
        if self.gr {
            caps.push(Capability::GracefulRestart(GrCap {
                flags: if self.restarted {
                    GrCap::RESTART_STATE
                } else {
                    0
                },
                restart_time: 120,
                families: self
                    .families
                    .iter()
                    .map(|f| GrFamily {
                        family: *f,
                        flags: 0x80,
                    })
                    .collect(),
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
            .any(|f| self.families.contains(&f.family))
            .then(|| Duration::from_secs(cap.restart_time.into()))
    }

    /// The connection ended: with a NOTIFICATION, or the TCP session
    /// failing. Helping a graceful restart (RFC 4724 §4.2), the routes stay
    /// as stale for the restart time; otherwise they go.
    fn drop_conn(&mut self, now: Duration, notification: bool) {
        self.helping = self
            .established_since
            .filter(|_| self.gr && !notification)
            .map(|up| (now, up, self.session_node_since));
        match self.helped_restart_time().filter(|_| !notification) {
            Some(t) => {
                self.coverage.stale_kept += 1;
                for route in self.rib.values_mut() {
                    route.stale = true;
                    route.refresh_stale = false;
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
        self.session_families.clear();
        self.enhanced = false;
        self.eors.clear();
        self.established_since = None;
        self.on_conn.clear();
        self.keepalive_at = None;
        self.refresh_asked.clear();
        self.in_refresh.clear();
        self.expect_cease = None;
    }

    /// Drops the stale routes of `family` (all of them: `None`).
    fn flush_stale(&mut self, family: Option<Family>) {
        let before = self.rib.len();
        self.rib
            .retain(|p, r| !(r.stale && family.is_none_or(|f| family_of(p) == f)));
        self.coverage.stale_swept += (before - self.rib.len()) as u64;
        if family.is_none() || !self.rib.values().any(|r| r.stale) {
            self.helping = None;
            self.stale_until = None;
        }
    }
}

// --- the source's truth, as the simulation keeps it ---

/// RFC 2439 damping of one VIP's absences, as the stability layer is to
/// count it (`stability::damping`): each absence of a VIP the layer had
/// advertised adds `penalty` to a figure of merit that halves every
/// `half_life`; a penalty that lifts it above `suppress_threshold` starts
/// an episode, which ends when the figure decays to `reuse_threshold` or
/// `max_suppress` after it began; the figure is capped at `reuse ×
/// 2^(max_suppress / half_life)`, lowered to `reuse` when an episode ends
/// at that ceiling, and forgotten below `reuse / 2`. While an episode
/// lasts, an absent VIP stays advertised past its hold-down.
#[derive(Clone, Debug)]
struct Flap {
    figure: f64,
    updated: Duration,
    /// The last episode: (began, ends, ended by the ceiling).
    episode: Option<(Duration, Duration, bool)>,
    /// False once the model may have missed a penalty the layer counted (a
    /// VIP back after the model's hold-down, which the layer may still
    /// have held, with an advertise_delay to wait), or a threshold was too
    /// close to call: its episodes then keep nothing in the model.
    exact: bool,
}

impl Default for Flap {
    fn default() -> Self {
        Flap {
            figure: 0.0,
            updated: Duration::ZERO,
            episode: None,
            exact: true,
        }
    }
}

/// Too close to a threshold to know which side the layer's arithmetic
/// falls on.
fn close(a: f64, threshold: f64) -> bool {
    (a - threshold).abs() <= 1e-6 * threshold.abs().max(1.0)
}

impl Flap {
    fn decay(figure: f64, elapsed: Duration, p: &DampingParams) -> f64 {
        figure * libm::exp2(-(elapsed.as_secs_f64() / p.half_life.as_secs_f64()))
    }

    fn figure_at(&mut self, t: Duration, p: &DampingParams) -> f64 {
        let reuse = f64::from(p.reuse_threshold);
        let (figure, from) = match self.episode {
            Some((_, until, true)) if until <= t => (
                Self::decay(self.figure, until.saturating_sub(self.updated), p).min(reuse),
                until,
            ),
            _ => (self.figure, self.updated),
        };
        let figure = Self::decay(figure, t.saturating_sub(from), p);
        if close(figure, reuse / 2.0) {
            self.exact = false;
        }
        if figure < reuse / 2.0 { 0.0 } else { figure }
    }

    fn penalize(&mut self, now: Duration, p: &DampingParams) {
        let in_force = self.episode.filter(|&(_, until, _)| until > now);
        let ceiling = f64::from(p.reuse_threshold)
            * libm::exp2(p.max_suppress.as_secs_f64() / p.half_life.as_secs_f64());
        let figure = (self.figure_at(now, p) + f64::from(p.penalty)).min(ceiling);
        self.figure = figure;
        self.updated = now;
        let suppress = f64::from(p.suppress_threshold);
        if in_force.is_none() && close(figure, suppress) {
            self.exact = false;
        }
        self.episode = match in_force {
            Some((since, _, _)) => Some(Self::episode(since, now, figure, p)),
            None if figure > suppress => Some(Self::episode(now, now, figure, p)),
            None => None,
        };
    }

    fn episode(
        since: Duration,
        now: Duration,
        figure: f64,
        p: &DampingParams,
    ) -> (Duration, Duration, bool) {
        let reuse = f64::from(p.reuse_threshold);
        let secs = (p.half_life.as_secs_f64() * libm::log2(figure / reuse)).max(0.0);
        let to_reuse = Duration::try_from_secs_f64(secs).unwrap_or(p.max_suppress);
        let reuse_at = now + to_reuse;
        let ceiling_at = since + p.max_suppress;
        if ceiling_at < reuse_at {
            (since, ceiling_at, true)
        } else {
            (since, reuse_at, false)
        }
    }

    /// Until when damping keeps the VIP advertised, at the earliest.
    fn keeps_until(&self) -> Option<Duration> {
        self.episode
            .filter(|_| self.exact)
            .map(|(_, until, _)| until.saturating_sub(DAMPING_MARGIN))
    }
}

#[derive(Clone, Debug, Default)]
struct VipTruth {
    present: bool,
    /// When it went, and why.
    gone: Option<(Duration, Absence)>,
    /// Start of the current stretch in which it must be advertised
    /// (present, or held down); the layer advertises it from
    /// [`Sim::due`].
    covered_since: Option<Duration>,
    /// The datapath behind it fails its probe (kept across absences), and
    /// when it last began to.
    probe_failing: bool,
    probe_failed_at: Option<Duration>,
    /// Probed: the routes core has had its probe's first result since the
    /// VIP last came into the snapshot (until then the probe is Unknown
    /// and the VIP not advertised).
    probe_known: bool,
    /// Bound (2): changes of what routers should have for it.
    transitions: u64,
    /// Gone with no reason: the stability layer has taken the absence
    /// (the source was healthy, or has been since); until then the layer
    /// keeps the VIP as it was (RFC-free: an unhealthy source's word on
    /// what went does not count).
    taken: bool,
    /// Taken: its hold-down ends here at the earliest (a reload
    /// re-evaluates it; a source healthy again restarts it, later).
    hold_until: Duration,
    flap: Flap,
    /// Gone: where the stability layer counts its hold-down from (the
    /// absence, or the source last healthy again), and its reason's timer
    /// (the reason given, or the source last healthy again): (1w).
    clock: Duration,
    reason_since: Duration,
    /// The Kubernetes policy's memory of why it went (policy.rs, "Why a
    /// VIP went away"): the reason, since when, and whether it went in a
    /// mass disappearance.
    remembered: Option<Memory>,
    /// Drained (the Node cordoned or excluded): since when, while the
    /// stability layer holds it so; when it last stopped being (back, or a
    /// new process). (8).
    drain_mark: Option<Duration>,
    drain_end: Option<Duration>,
}

/// What the Kubernetes policy remembers of a VIP that went.
#[derive(Clone, Copy, Debug)]
struct Memory {
    reason: Absence,
    since: Duration,
    mass: bool,
}

/// The reasons the stability layer holds a VIP for (hold-down, damping)
/// rather than withdrawing it at its reason's fixed delay.
fn damped(why: Absence) -> bool {
    matches!(why, Absence::Vanished | Absence::NoLocalEndpoint)
}

/// The reasons whose withdrawals the mass-withdrawal guard paces.
fn guarded(why: Absence) -> bool {
    matches!(why, Absence::Vanished | Absence::Deleted)
}

fn vip_ip(i: usize) -> IpAddr {
    if i < V4_VIPS {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + i as u8))
    } else {
        IpAddr::V6(Ipv6Addr::new(
            0x2001,
            0xdb8,
            0x100,
            0,
            0,
            0,
            0,
            1 + (i - V4_VIPS) as u16,
        ))
    }
}

fn vip_prefix(i: usize) -> IpNet {
    IpNet::from(vip_ip(i))
}

fn probed(i: usize) -> bool {
    i % 2 == 1
}

fn index_of(p: &IpNet) -> Option<usize> {
    (0..VIPS).find(|&i| vip_prefix(i) == *p)
}

// --- the source side: a model cluster, or a VIP file ---

/// Whether Service i has `externalTrafficPolicy: Local`: its VIP is
/// advertised only while this node has a ready endpoint of it.
fn local(i: usize) -> bool {
    i % 3 == 2
}

/// This node's endpoint of a Service, as the Service's EndpointSlice shows
/// it (the slice always has a ready endpoint on another node too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Endpoint {
    Ready,
    /// `conditions.ready: false`.
    NotReady,
    /// `conditions.terminating: true`, `ready` unset (which alone would
    /// read as ready).
    Terminating,
    /// Only on other nodes: the watcher keeps nothing of the slice.
    Elsewhere,
}

impl Endpoint {
    const ALL: [Endpoint; 4] = [
        Endpoint::Ready,
        Endpoint::NotReady,
        Endpoint::Terminating,
        Endpoint::Elsewhere,
    ];
}

/// A slice as the watcher keeps it: nothing when this node has no endpoint
/// in it (records.rs, `SliceRecord::of`).
fn kept(slice: Option<Endpoint>) -> Option<Endpoint> {
    slice.filter(|e| *e != Endpoint::Elsewhere)
}

/// The objects of the model cluster, by VIP (Service i gives VIP i): what
/// the API server holds, or what the watchers hold of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Objects {
    /// Service `default/svc-i`, type LoadBalancer: absent, or with VIP i in
    /// its `status.loadBalancer.ingress` (`true`) or that list empty.
    services: [Option<bool>; VIPS],
    /// Its EndpointSlice: absent, or this node's endpoint in it.
    slices: [Option<Endpoint>; VIPS],
    /// The Node: `spec.unschedulable`, and the exclude label.
    cordoned: bool,
    excluded: bool,
}

impl Objects {
    fn node_problem(&self) -> bool {
        self.cordoned || self.excluded
    }

    /// The model of the policy's rules (policy.rs, "Which addresses"; rules
    /// 1–4 take every Service here): VIP i is advertised when its Service
    /// lists it, has a ready local endpoint if its traffic policy is Local
    /// (5), and the Node is neither cordoned nor excluded (6).
    fn wants(&self, i: usize) -> bool {
        self.services[i] == Some(true)
            && (!local(i) || kept(self.slices[i]) == Some(Endpoint::Ready))
            && !self.node_problem()
    }

    /// Why VIP i went, as its Service judges it (policy.rs, "Why a VIP
    /// went away"): `missing` when the Service is not listed.
    fn fate(&self, i: usize, missing: Absence) -> Absence {
        if self.node_problem() {
            Absence::Drained
        } else if self.services[i].is_none() {
            missing
        } else if local(i) && kept(self.slices[i]) != Some(Endpoint::Ready) {
            Absence::NoLocalEndpoint
        } else {
            Absence::Vanished
        }
    }
}

/// The watchers' records of every state of every object, made once from
/// the Kubernetes objects as a watch delivers them (`ServiceRecord::of`,
/// `SliceRecord::of`): what the policy reads.
struct Records {
    /// Service i's record, its ingress list empty and with VIP i.
    services: Vec<[Arc<ServiceRecord>; 2]>,
    /// Service i's slice's record by [`Endpoint`] (`None`: not kept).
    slices: Vec<[Option<Arc<SliceRecord>>; 4]>,
    /// The Node: as is, cordoned, excluded, both.
    nodes: [Node; 4],
}

impl Records {
    fn get() -> &'static Records {
        static RECORDS: std::sync::OnceLock<Records> = std::sync::OnceLock::new();
        RECORDS.get_or_init(Records::make)
    }

    fn make() -> Records {
        let services = (0..VIPS)
            .map(|i| {
                let ip = vip_ip(i).to_string();
                [&[][..], &[ip.as_str()][..]].map(|ingress| {
                    let mut svc = load_balancer_service("default", &format!("svc-{i}"), ingress);
                    svc.metadata.uid = Some(format!("uid-{i}"));
                    let tier = if probed(i) { "probed" } else { "public" };
                    svc.metadata.labels = Some(BTreeMap::from([("tier".into(), tier.into())]));
                    if local(i) {
                        let spec = svc.spec.as_mut().expect("a spec");
                        spec.external_traffic_policy = Some("Local".into());
                    }
                    Arc::new(ServiceRecord::of(svc))
                })
            })
            .collect();
        let slices = (0..VIPS)
            .map(|i| {
                Endpoint::ALL.map(|e| {
                    let here = match e {
                        Endpoint::Elsewhere => "node-3",
                        _ => NODE,
                    };
                    let mut endpoint = SliceEndpoint::ready("10.244.0.10", here);
                    endpoint.ready = e != Endpoint::NotReady;
                    let mut slice = endpoint_slice(
                        "default",
                        &format!("svc-{i}"),
                        &format!("svc-{i}-x1"),
                        &[endpoint, SliceEndpoint::ready("10.244.1.10", "node-2")],
                    );
                    if e == Endpoint::Terminating {
                        let ep = &mut slice.endpoints.as_mut().expect("endpoints")[0];
                        let c = ep.conditions.as_mut().expect("conditions");
                        (c.ready, c.serving, c.terminating) = (None, Some(true), Some(true));
                    }
                    SliceRecord::of(slice, NODE).map(Arc::new)
                })
            })
            .collect();
        let nodes = [(false, false), (true, false), (false, true), (true, true)].map(
            |(cordoned, excluded)| {
                let labels: &[(&str, &str)] = if excluded {
                    &[(EXCLUDE_LABEL, "true")]
                } else {
                    &[]
                };
                let mut node = kube_standin::fixtures::node(NODE, "192.0.2.2", labels);
                node.spec.as_mut().expect("a spec").unschedulable = cordoned.then_some(true);
                node
            },
        );
        Records {
            services,
            slices,
            nodes,
        }
    }

    fn service(&self, i: usize, state: Option<bool>) -> Option<Arc<ServiceRecord>> {
        state.map(|with_vip| self.services[i][usize::from(with_vip)].clone())
    }

    fn slice(&self, i: usize, state: Option<Endpoint>) -> Option<Arc<SliceRecord>> {
        let e = state?;
        let at = Endpoint::ALL
            .iter()
            .position(|x| *x == e)
            .expect("an endpoint");
        self.slices[i][at].clone()
    }

    fn node(&self, o: &Objects) -> &Node {
        &self.nodes[usize::from(o.cordoned) + 2 * usize::from(o.excluded)]
    }
}

fn service_key(i: usize) -> ServiceKey {
    ServiceKey {
        namespace: "default".into(),
        name: format!("svc-{i}"),
    }
}

/// The Kubernetes source of the node's current process: the model
/// cluster, the watchers' store, their links, and the policy's last
/// evaluation, mirroring the watcher layer (watch.rs):
///
/// - A watch event that changes a record (a Service, or this node's part
///   of its EndpointSlice) is evaluated at once by `policy::update`, for
///   the Services it names; the Node's changes, a re-list, the end of an
///   outage, a reload and a process's first evaluation by
///   `policy::evaluate`. (The 50 ms debounce is the driver's timing, not
///   simulated: each change is evaluated when it happens.)
/// - While a link is not live (an outage: the API server unreachable; a
///   410 Gone: re-listing) the source is unhealthy, evaluates nothing and
///   publishes its last evaluation with `healthy: false` (`synced` once it
///   has evaluated, never before): the store is frozen. When every link is
///   live again the store is the API server's and one full evaluation
///   follows.
/// - A re-list that answers no Service is believed (the links are live, the
///   source healthy): the Services are gone from the store until the next
///   re-list; watch events meanwhile bring back the objects they carry.
/// - A new process lists afresh: with the API server unreachable it has no
///   view at all (unhealthy, unsynced) until it is.
struct Kube {
    /// What the API server holds.
    cluster: Objects,
    /// This node's endpoint of each Service's pods, whether the Service
    /// exists or not (its slice is there while it does).
    endpoints: [Endpoint; VIPS],
    /// What the watchers hold.
    store: Objects,
    outage: bool,
    /// Re-listing after a 410 Gone, until then.
    relist_at: Option<Duration>,
    /// A re-list answered no Service; the next re-list, then.
    empty_until: Option<Duration>,
    eval: Evaluation,
    evaluated: bool,
    /// `Handle::node_facts`, as the last full evaluation left them.
    node_facts: Option<NodeFacts>,
}

impl Kube {
    fn new() -> Kube {
        let mut cluster = Objects {
            services: [None; VIPS],
            slices: [None; VIPS],
            cordoned: false,
            excluded: false,
        };
        // Half the VIPs are there from the start.
        for i in (0..VIPS).filter(|i| i % 4 < 2) {
            cluster.services[i] = Some(true);
        }
        let mut kube = Kube {
            cluster,
            endpoints: [Endpoint::Ready; VIPS],
            store: cluster,
            outage: false,
            relist_at: None,
            empty_until: None,
            eval: Evaluation::default(),
            evaluated: false,
            node_facts: None,
        };
        kube.sync_slices();
        kube.store = kube.cluster;
        kube
    }

    /// Each Service's slice follows it (the EndpointSlice controller).
    fn sync_slices(&mut self) {
        for i in 0..VIPS {
            self.cluster.slices[i] = self.cluster.services[i].map(|_| self.endpoints[i]);
        }
    }

    fn live(&self) -> bool {
        !self.outage && self.relist_at.is_none()
    }

    fn snapshot(&self) -> SourceSnapshot {
        let error = (!self.live()).then(|| {
            if self.outage {
                "services: simulated API outage".to_string()
            } else {
                "services: re-listing (410 Gone)".to_string()
            }
        });
        if self.evaluated {
            self.eval.snapshot(self.live(), true, error)
        } else {
            SourceSnapshot {
                error,
                ..SourceSnapshot::default()
            }
        }
    }

    /// A new process's source: nothing evaluated; its watchers list the
    /// API server's objects, if it answers.
    fn restart(&mut self) {
        self.eval = Evaluation::default();
        self.evaluated = false;
        self.node_facts = None;
        self.relist_at = None;
        self.empty_until = None;
        if !self.outage {
            self.store = self.cluster;
        }
    }
}

/// The VIP file of a seed with the file source: what it lists, how it is
/// broken, and the file source (`FileSource`) of the node's current
/// process, driven as `file::run` drives it: each edit is read at once
/// (the inotify settle, 3 ms, is the driver's timing, not simulated), and
/// while the source confirms an empty file it is read again
/// `EMPTY_SETTLE` later.
struct VipFile {
    /// The VIPs it lists.
    listed: [bool; VIPS],
    /// Broken: how ([`Ev::Unhealthy`]).
    broken: Option<u8>,
    /// Truncated by a writer that has not written yet (empty, valid),
    /// until it rewrites the file then.
    truncated: bool,
    rewrite_at: Option<Duration>,
    source: FileSource,
    /// The next check the source asked for.
    recheck_at: Option<Duration>,
    /// The model: since when reads have found the file valid and empty
    /// after a set with VIPs.
    empty_since: Option<Duration>,
}

impl VipFile {
    fn new(config: &holdfast::config::Config) -> VipFile {
        let settings = FileSettings::from_config(config).expect("the file source");
        VipFile {
            listed: std::array::from_fn(|i| i % 4 < 2),
            broken: None,
            truncated: false,
            rewrite_at: None,
            source: FileSource::new(settings),
            recheck_at: None,
            empty_since: None,
        }
    }

    /// The file's text, as a read finds it.
    fn text(&self) -> Result<String, String> {
        use std::fmt::Write;
        if self.broken == Some(3) {
            return Err(
                "vips.toml:1:1: error: cannot read file: No such file or directory (os error 2)"
                    .into(),
            );
        }
        let mut text = String::new();
        let listed = (0..VIPS).filter(|&i| self.listed[i] && !self.truncated);
        for i in listed {
            let _ = writeln!(
                text,
                "[[vip]]\naddress = \"{}\"\nservice = \"default/svc-{i}\"",
                vip_ip(i)
            );
            // The others take the default: the first advertisement.
            if probed(i) {
                text.push_str("advertisement = \"probed\"\n");
            }
            text.push('\n');
        }
        match self.broken {
            Some(0) => text.push_str("[[vip]\naddress = \"10.0.0.1\"\n"),
            Some(1) => {
                text.push_str("[[vip]]\naddress = \"10.0.0.99\"\nadvertisement = \"nope\"\n")
            }
            Some(2) => {
                let i = (0..VIPS).find(|&i| self.listed[i]).unwrap_or(0);
                let _ = write!(text, "[[vip]]\naddress = \"{}\"\n", vip_ip(i));
                let _ = write!(text, "[[vip]]\naddress = \"{}\"\n", vip_ip(i));
            }
            _ => {}
        }
        Ok(text)
    }
}

/// The node's exit under way: each peer's plan (`routes::drain::exit_plan`;
/// `None` for a peer the config in force lacks).
struct Exit {
    plans: Vec<Option<ExitPlan>>,
}

/// What a router is told of GRACEFUL_SHUTDOWN (RFC 8326 §3): every route
/// marked since, or none since.
#[derive(Clone, Copy, Debug)]
enum Gs {
    Marked(Duration),
    Clear(Duration),
}

/// One `Write` group: the messages of one input's outputs to one router.
#[derive(Default)]
struct Group {
    conn: Option<ConnId>,
    nlri: bool,
    initial_eor: bool,
    /// A ROUTE-REFRESH answer: BoRR/EoRR, or End-of-RIB after the first.
    refresh: bool,
    notification: bool,
}

// --- the node and its world ---

struct Sim {
    settings: Settings,
    /// Every peer of the config file (with the seed's MRAIs); `active`
    /// says which the config in force has.
    peers: Vec<holdfast::config::Peer>,
    active: Vec<bool>,
    config: Arc<holdfast::config::Config>,
    hold_down: Duration,
    seed: u64,
    t0: Instant,
    now: Duration,
    /// When the node's current process started.
    node_since: Duration,
    processes: u64,
    routes: Routes,
    last_routes_call: Duration,
    sessions: Vec<PeerSession>,
    names: Vec<String>,
    /// The last table handed to each session, and when.
    tables: Vec<Arc<PeerTable>>,
    table_changed_at: Vec<Duration>,
    routes_ready: bool,
    /// When the routes core said so (End-of-RIB then goes out).
    routes_ready_at: Option<Duration>,
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
    /// (2m) The last batch of route changes per connection, while the
    /// MRAI counts from it; connections that had End-of-RIB written.
    mrai_last: BTreeMap<ConnId, Duration>,
    eor_written: BTreeSet<ConnId>,
    vips: Vec<VipTruth>,
    /// The source: the model cluster read by the Kubernetes source, or
    /// the VIP file read by the file source (one of them).
    kube: Option<Kube>,
    file: Option<VipFile>,
    /// The last snapshot the source published in this process (the
    /// daemon's watch channel carries only changes).
    last_snapshot: Option<SourceSnapshot>,
    /// The model: the source of this process has a view (it has listed,
    /// or read a valid file), and is healthy.
    synced: bool,
    healthy: bool,
    /// When the source last turned unhealthy.
    unhealthy_since: Option<Duration>,
    /// When a reload last changed the hold-down.
    hold_down_changed_at: Duration,
    drained: bool,
    undrained_at: Option<Duration>,
    /// (8) GRACEFUL_SHUTDOWN per router.
    gs: Vec<Gs>,
    exit: Option<Exit>,
    /// The sessions are being stopped at the end of an exit.
    stopping: bool,
    /// A peer removed by a reload: when, and whether its session was
    /// established then.
    removed: Vec<Option<(Duration, bool)>>,
    reappear: BTreeMap<(Duration, usize), ()>,
    checks: u64,
    coverage: Coverage,
    violation: Option<String>,
    /// A digest of every octet written, for the replay check.
    digest: u64,
}

impl Sim {
    fn new(seed: u64) -> Self {
        let settings = settings(seed);
        let config = Arc::new(base_config(&settings));
        let peers = config.peers.clone();
        let t0 = Instant::now();
        let names: Vec<String> = peers.iter().map(|p| p.name.clone()).collect();
        let n = names.len();
        let active = vec![true; n];
        let kube = (settings.source == SourceKind::Kubernetes).then(Kube::new);
        let file = (settings.source == SourceKind::File).then(|| VipFile::new(&config));
        let (routes, sessions) = boot(&config, &peers, &active, t0, seed, false);
        let mut sim = Sim {
            settings,
            peers,
            active,
            config,
            hold_down: HOLD_DOWN,
            seed,
            t0,
            now: Duration::ZERO,
            node_since: Duration::ZERO,
            processes: 0,
            routes,
            last_routes_call: Duration::ZERO,
            sessions,
            names,
            tables: (0..n).map(|_| Arc::new(PeerTable::new())).collect(),
            table_changed_at: vec![Duration::ZERO; n],
            routes_ready: false,
            routes_ready_at: None,
            routers: Router::all(),
            net: BTreeMap::new(),
            lane_at: BTreeMap::new(),
            seq: 0,
            next_conn: 1,
            delay: vec![Duration::from_millis(1); n],
            connecting: vec![None; n],
            written: BTreeMap::new(),
            mrai_last: BTreeMap::new(),
            eor_written: BTreeSet::new(),
            vips: vec![VipTruth::default(); VIPS],
            kube,
            file,
            last_snapshot: None,
            synced: false,
            healthy: false,
            unhealthy_since: None,
            hold_down_changed_at: Duration::ZERO,
            drained: false,
            undrained_at: None,
            gs: vec![Gs::Clear(Duration::ZERO); n],
            exit: None,
            stopping: false,
            removed: vec![None; n],
            reappear: BTreeMap::new(),
            checks: 0,
            coverage: Coverage::default(),
            violation: None,
            digest: 0xcbf2_9ce4_8422_2325,
        };
        sim.start_node();
        sim
    }

    /// The node's source started (its first snapshot, its probes' first
    /// results), its sessions started.
    fn start_node(&mut self) {
        self.source_start();
        for r in 0..self.sessions.len() {
            self.node_input(r, Input::Start { bfd_up: false });
        }
        self.pump();
    }

    /// The holdfast process stops — each session as `how` says — and a new
    /// one starts from nothing: a new routes core, held-down VIPs and
    /// damping histories forgotten, probes unknown, no drain; with the R
    /// bit (`restarting`) in its OPENs to the peers with graceful restart
    /// until End-of-RIB has gone out.
    fn restart_node(&mut self, how: Vec<StopHow>, restarting: bool) {
        let at = self.at();
        self.stopping = true;
        for (r, how) in how.into_iter().enumerate() {
            if self.active[r] {
                let out = self.sessions[r].handle(at, Input::Stop(how));
                self.carry(r, out);
            }
            self.connecting[r] = None;
        }
        self.stopping = false;
        self.processes += 1;
        let (routes, sessions) = boot(
            &self.config,
            &self.peers,
            &self.active,
            self.t0 + self.now,
            self.seed ^ self.processes.wrapping_mul(0x2545_F491_4F6C_DD1D),
            restarting,
        );
        self.routes = routes;
        self.sessions = sessions;
        self.routes_ready = false;
        self.routes_ready_at = None;
        self.node_since = self.now;
        self.exit = None;
        self.tables = (0..self.sessions.len())
            .map(|_| Arc::new(PeerTable::new()))
            .collect();
        self.table_changed_at = vec![self.now; self.sessions.len()];
        self.written.clear();
        if self.drained {
            self.drained = false;
            self.undrained_at = Some(self.now);
        }
        self.gs = vec![Gs::Clear(self.now); self.sessions.len()];
        for (i, v) in self.vips.iter_mut().enumerate() {
            v.flap = Flap::default();
            // The new process's source remembers nothing, its probes know
            // nothing.
            v.remembered = None;
            v.probe_known = false;
            v.drain_mark = None;
            v.drain_end = None;
            if !v.present {
                // Held down in the old process only: the new one never
                // advertises it, and End-of-RIB sweeps it at the router.
                v.covered_since = None;
                v.gone = None;
                v.taken = false;
            } else if probed(i) {
                // Unknown until its first result (which follows at once).
                v.covered_since = (!v.probe_failing).then_some(self.now);
            }
        }
        for rt in &mut self.routers {
            // Its R bit is due until End-of-RIB (graceful restart peers).
            rt.node_restarting = restarting && rt.gr;
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

    /// Time a change of the node's table needs to reach router `r`: the
    /// network's, and the peer's MRAI (RFC 4271 §9.2.1.1).
    fn settle(&self, r: usize) -> Duration {
        SETTLE + self.settings.mrai[r]
    }

    // --- the source's truth ---

    /// When the stability layer advertises VIP `i` (it stays wanted): its
    /// advertise_delay after the stretch began, or after the process
    /// started (the new process's layer starts from nothing).
    fn due(&self, i: usize) -> Option<Duration> {
        self.vips[i]
            .covered_since
            .map(|c| c.max(self.node_since) + self.settings.advertise_delay)
    }

    /// The layer has VIP `i` advertised now, and present (an absence
    /// of it would be penalized).
    fn on_layer(&self, i: usize) -> bool {
        self.vips[i].present && self.due(i).is_some_and(|d| d <= self.now)
    }

    /// A VIP gone with no reason (or with no local endpoint): the earliest
    /// instant the layer may withdraw it — its hold-down (its
    /// `local_endpoint_delay`), and damping's episode (a lower bound: the
    /// guard, a source healthy again, only make it later).
    fn keep_until(&self, i: usize) -> Duration {
        let v = &self.vips[i];
        if !v.taken {
            return Duration::MAX;
        }
        let damped = self
            .settings
            .damping
            .and_then(|_| v.flap.keeps_until())
            .unwrap_or_default();
        v.hold_until.max(damped)
    }

    /// Whether VIP `i` is in the layer's table at `t` as far as the source
    /// goes (present, or absent and still held).
    fn held(&self, i: usize, t: Duration) -> bool {
        let v = &self.vips[i];
        match v.gone {
            None => v.present,
            Some((_, why)) if damped(why) => t < self.keep_until(i),
            Some(_) => false,
        }
    }

    /// Bound (2): the changes counted so far, and the withdrawal of a VIP
    /// absent with no reason (or no local endpoint) once the layer may
    /// have made it (never earlier than its hold-down and its damping
    /// episode).
    fn bound(&self, i: usize) -> u64 {
        let v = &self.vips[i];
        let withdrawn =
            v.gone.is_some_and(|(_, why)| damped(why)) && v.taken && self.now >= self.keep_until(i);
        v.transitions + u64::from(withdrawn)
    }

    /// A reason's own timer in the stability layer (its module doc).
    fn own_delay(&self, why: Absence) -> Duration {
        let s = &self.config.stability;
        match why {
            Absence::Vanished => self.hold_down,
            Absence::NoLocalEndpoint => s.local_endpoint_delay,
            Absence::Deleted => s.delete_delay,
            Absence::Drained => SHUTDOWN_WAIT,
            Absence::ProbeFailed => Duration::ZERO,
        }
    }

    /// (1w) The latest instant the stability layer may still advertise VIP
    /// `i`, gone from a healthy source: its reason's own timer, counted as
    /// the layer counts it (the hold-down from the absence or from when the
    /// source was last healthy again, or from the last reload of the
    /// hold-down; the other reasons' delays from when they were given or
    /// the source was last healthy again), or the damping episode in force
    /// when later, and the guard's pace for the reasons it paces. `None`:
    /// no bound (the source is unhealthy, or damping may keep it and the
    /// model cannot tell how long).
    fn withdraw_by(&self, i: usize) -> Option<Duration> {
        let v = &self.vips[i];
        let (_, why) = v.gone?;
        if v.present || !self.healthy || (damped(why) && !v.taken) {
            return None;
        }
        let own = match why {
            Absence::Vanished => (v.clock + self.hold_down).max(self.hold_down_changed_at),
            _ => v.reason_since + self.own_delay(why),
        };
        let damping = match self.settings.damping {
            Some(_) if damped(why) => {
                if !v.flap.exact {
                    return None;
                }
                v.flap.episode.map(|(_, end, _)| end + DAMPING_MARGIN)
            }
            _ => None,
        };
        let guard = if guarded(why) {
            GUARD_SLACK
        } else {
            Duration::ZERO
        };
        Some(own.max(damping.unwrap_or_default()) + guard)
    }

    fn appear_truth(&mut self, i: usize) {
        let now = self.now;
        if self.vips[i].present {
            return;
        }
        let gone_damped = self.vips[i].gone.is_some_and(|(_, why)| damped(why));
        let held = gone_damped && now < self.keep_until(i);
        let delay = !self.settings.advertise_delay.is_zero();
        let v = &mut self.vips[i];
        // Back from a drain, the route goes on without GRACEFUL_SHUTDOWN;
        // unless its fresh probe, failing, stays Unknown: then it is still
        // absent to the stability layer, for the reason it had (marked
        // until withdrawn after graceful_shutdown_wait).
        if v.drain_mark.is_some() && (!probed(i) || !v.probe_failing) {
            v.drain_end = Some(now);
            v.drain_mark = None;
        }
        v.remembered = None;
        if gone_damped && !held {
            // Withdrawn while away, after the hold-down (or not: the guard
            // or a source healthy again may have kept it, and then a
            // penalty of its next absence may escape the model).
            v.transitions += 1;
            if delay {
                v.flap.exact = false;
            }
        }
        if delay && v.gone.is_some_and(|(_, why)| !damped(why)) {
            // Back from a definitive absence the layer may not have
            // withdrawn yet (a drain's graceful_shutdown_wait, the guard):
            // advertised at once, not after advertise_delay, and a penalty
            // of its next absence may escape the model.
            v.flap.exact = false;
        }
        // A probed VIP whose datapath fails is not advertised: its fresh
        // probe fails (RFC-free: the probe's rule).
        let eligible = !probed(i) || !v.probe_failing;
        if !(held && v.covered_since.is_some()) {
            v.covered_since = eligible.then_some(now);
            v.transitions += 1;
        } else if !eligible {
            // Back while still held, its fresh probe failing (Unknown: not
            // advertised): still absent to the layer, held to the end of
            // its hold-down. A probe passing meanwhile brings it back at
            // once, not after advertise_delay, and a penalty of its next
            // absence may then escape the model.
            v.covered_since = None;
            v.transitions += 1;
            if delay {
                v.flap.exact = false;
            }
        }
        v.present = true;
        v.gone = None;
        v.taken = false;
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
        self.vips[i].probe_known = true;
        self.routes_call(|r, at| r.on_probe(at, ProbeResult { vip, result }));
    }

    /// VIP `i` leaves the source's view: the stability layer holds it
    /// (`damped` reasons: hold-down or `local_endpoint_delay`, and damping)
    /// or withdraws it after its reason's delay (deleted; drained: marked
    /// GRACEFUL_SHUTDOWN meanwhile, then withdrawn).
    fn vanish_truth(&mut self, i: usize, why: Absence) {
        if !self.vips[i].present {
            return;
        }
        let now = self.now;
        let on_layer = self.on_layer(i);
        let healthy = self.healthy;
        let (delay, damping) = (self.own_delay(why), self.settings.damping);
        let v = &mut self.vips[i];
        v.present = false;
        v.probe_known = false;
        v.gone = Some((now, why));
        v.clock = now;
        v.reason_since = now;
        match why {
            Absence::NoLocalEndpoint => self.coverage.no_local_endpoint += 1,
            Absence::Drained => self.coverage.drained_absences += 1,
            _ => {}
        }
        // A definitive absence is withdrawn after its delay (once the
        // source is healthy): one UPDATE, two when drained (the route
        // marked GRACEFUL_SHUTDOWN, then withdrawn). One with no reason, or
        // no local endpoint, only once it outlasts its hold-down (its
        // delay) and any damping episode (see `bound`).
        if !damped(why) {
            v.transitions += if why == Absence::Drained { 2 } else { 1 };
            v.covered_since = None;
            if why == Absence::Drained {
                v.drain_mark = Some(now);
            }
            return;
        }
        if !healthy {
            // Not taken: the layer keeps it as it was, and a pending one
            // goes on to be advertised (see `Ev::Healthy`).
            v.taken = false;
            return;
        }
        v.taken = true;
        v.hold_until = now + delay;
        if on_layer {
            if let Some(p) = &damping {
                v.flap.penalize(now, p);
            }
        } else {
            // Pending (never sent: dropped), or not in the layer at all (a
            // failed probe).
            v.covered_since = None;
        }
    }

    /// VIP `i`, gone, gets a stronger reason (policy.rs: reasons only
    /// escalate): the layer's timer for it runs from now.
    fn escalate(&mut self, i: usize, why: Absence) {
        let Some((at, old)) = self.vips[i].gone else {
            return;
        };
        if why <= old {
            return;
        }
        let now = self.now;
        let delay = self.own_delay(why);
        let v = &mut self.vips[i];
        v.gone = Some((at, why));
        v.reason_since = now;
        if damped(why) {
            // No local endpoint, after no reason: its delay from now, if
            // the layer still holds it (else it went at its hold-down).
            if v.taken {
                v.hold_until = v.hold_until.min(now + delay);
            }
            self.coverage.no_local_endpoint += 1;
            return;
        }
        v.transitions += if why == Absence::Drained { 2 } else { 1 };
        v.covered_since = None;
        if why == Absence::Drained {
            v.drain_mark = Some(now);
            self.coverage.drained_absences += 1;
        }
    }

    /// VIP `i` leaves the view of a new process's source, which never had
    /// it: nothing of it to take as absent.
    fn drop_silently(&mut self, i: usize) {
        let v = &mut self.vips[i];
        v.present = false;
        v.probe_known = false;
        v.gone = None;
        v.covered_since = None;
        v.taken = false;
    }

    /// The source is healthy again: the layer takes the absences it had
    /// not (RFC-free: measured from now), penalizing those it advertised,
    /// and measures every absence afresh from now.
    fn take_absences(&mut self) {
        let now = self.now;
        for i in 0..VIPS {
            let v = &mut self.vips[i];
            if v.gone.is_some() {
                v.clock = now;
                v.reason_since = now;
            }
            let v = &self.vips[i];
            let Some((_, why)) = v.gone else { continue };
            if v.taken || !damped(why) {
                continue;
            }
            let advertised = self.due(i).is_some_and(|d| d <= now);
            let (delay, damping) = (self.own_delay(why), self.settings.damping);
            let v = &mut self.vips[i];
            v.taken = true;
            v.hold_until = now + delay;
            if advertised {
                if let Some(p) = &damping {
                    v.flap.penalize(now, p);
                }
            } else {
                v.covered_since = None;
            }
        }
    }

    /// The model's word on the source's health (see `Kube`, `VipFile`).
    fn set_health(&mut self, healthy: bool) {
        if healthy && !self.healthy {
            self.healthy = true;
            self.take_absences();
        } else if !healthy && self.healthy {
            self.healthy = false;
            self.unhealthy_since = Some(self.now);
        }
    }

    /// The source of a new process has no view (the API server does not
    /// answer; the VIP file is broken): nothing is wanted until it has.
    fn model_unsynced(&mut self) {
        for i in 0..VIPS {
            if self.vips[i].present {
                self.drop_silently(i);
            }
        }
        self.synced = false;
        self.set_health(false);
    }

    // --- the source: the model cluster or the VIP file, read by the real
    // source code ---

    /// The source's snapshot to the routes core, as the daemon's watch
    /// channel carries it: only when it differs from the last one.
    fn send_snapshot(&mut self, snap: SourceSnapshot) {
        if self.last_snapshot.as_ref() == Some(&snap) {
            return;
        }
        self.last_snapshot = Some(snap.clone());
        self.routes_call(|r, at| r.on_snapshot(at, snap));
    }

    /// A new process's source starts: the Kubernetes source lists (when
    /// the API server answers), the file source reads the file; then each
    /// probed VIP's first result.
    fn source_start(&mut self) {
        self.last_snapshot = None;
        if let Some(k) = &mut self.kube {
            k.restart();
            if k.live() {
                self.kube_evaluate(None);
            } else {
                let snap = k.snapshot();
                self.model_unsynced();
                self.send_snapshot(snap);
            }
        }
        if let Some(f) = &mut self.file {
            f.source = FileSource::new(f.source.settings().clone());
            f.recheck_at = None;
            f.empty_since = None;
            self.file_read(true);
        }
        for i in 0..VIPS {
            self.report_probe(i);
        }
    }

    /// The Kubernetes source evaluates its store: `policy::update` for the
    /// Services of `touched` (as the watcher layer does for record
    /// changes), else (or when the policy asks for it) `policy::evaluate`;
    /// then the model's view, and the snapshot.
    fn kube_evaluate(&mut self, touched: Option<&[usize]>) {
        let at = self.at();
        let config = self.config.clone();
        let records = Records::get();
        let Some(k) = &mut self.kube else { return };
        let fresh = !k.evaluated;
        let slices: Vec<Arc<SliceRecord>> = (0..VIPS)
            .filter_map(|i| records.slice(i, k.store.slices[i]))
            .collect();
        let mut full = true;
        if let Some(touched) = touched.filter(|_| !fresh) {
            let services: Vec<(ServiceKey, Option<Arc<ServiceRecord>>)> = touched
                .iter()
                .map(|&i| (service_key(i), records.service(i, k.store.services[i])))
                .collect();
            let changes = Changes {
                services: &services,
                endpoint_slices: &slices,
                namespaces: None,
            };
            if !needs_full_evaluation(&k.eval, &config, &changes) {
                update(&mut k.eval, &config, &changes, at);
                self.coverage.policy_updates += 1;
                full = false;
            }
        }
        if full {
            let services: Vec<Arc<ServiceRecord>> = (0..VIPS)
                .filter_map(|i| records.service(i, k.store.services[i]))
                .collect();
            let node = records.node(&k.store);
            let cluster = Cluster {
                node_name: NODE,
                node: Some(node),
                services: &services,
                endpoint_slices: &slices,
                namespaces: None,
            };
            let next = evaluate(&k.eval, &config, &cluster, at);
            k.node_facts = Some(NodeFacts {
                drained: next.node_problem.clone(),
                ..node_facts(node)
            });
            k.eval = next;
            self.coverage.policy_evaluations += 1;
        }
        k.evaluated = true;
        let snap = k.snapshot();
        self.set_health(true);
        let appeared = self.model_kube(fresh);
        self.send_snapshot(snap);
        for i in appeared {
            self.report_probe(i);
        }
    }

    /// The model of the Kubernetes policy, from its module doc (not its
    /// code): which VIPs the store's objects ask for ([`Objects::wants`]),
    /// and why each one that went went — its Service's verdict
    /// ([`Objects::fate`]), never weaker than the reason remembered (reasons
    /// escalate; a reason is remembered for the hold-down, damping's
    /// ceiling, the longer of `delete_delay` and `local_endpoint_delay`, and
    /// a minute) — except that VIPs whose Services went missing from the
    /// list are held down rather than deleted when there are more of them
    /// than the guard lets go in one step, or more than one with no
    /// Service listed (a mass disappearance), and stay so. `fresh`: the
    /// first evaluation of a process, which remembers nothing. Answers the
    /// VIPs that came.
    fn model_kube(&mut self, fresh: bool) -> Vec<usize> {
        let Some(k) = &self.kube else {
            return Vec::new();
        };
        let store = k.store;
        let now = self.now;
        let c = &self.config.stability;
        let retention = c.withdraw_hold_down
            + self
                .settings
                .damping
                .map_or(Duration::ZERO, |d| d.max_suppress)
            + c.delete_delay.max(c.local_endpoint_delay)
            + REASON_MARGIN;
        let on_wire = self
            .vips
            .iter()
            .filter(|v| v.present || v.remembered.is_some_and(|m| m.reason < Absence::Deleted))
            .count();
        // (VIP, what it had gone for if it had, strict, lenient): the
        // verdict when a Service missing counts as deleted, and as absent.
        let mut judged: Vec<(usize, Option<Memory>, Absence, Absence)> = Vec::new();
        for i in (0..VIPS).filter(|&i| !fresh && !store.wants(i)) {
            let v = &self.vips[i];
            let before = match v.remembered {
                _ if v.present => None,
                Some(m) if now.saturating_sub(m.since) <= retention => Some(m),
                _ => continue,
            };
            let prior = before.map_or(Absence::Vanished, |m| m.reason);
            let lenient = prior.max(store.fate(i, Absence::Vanished));
            let strict = if before.is_some_and(|m| m.mass) {
                lenient
            } else {
                prior.max(store.fate(i, Absence::Deleted))
            };
            judged.push((i, before, strict, lenient));
        }
        let by_deletion = judged.iter().filter(|j| j.2 != j.3).count();
        let allowance = ((GUARD_FRACTION * on_wire as f64).floor() as usize).max(1);
        let none_listed = store.services.iter().all(Option::is_none);
        let mass = by_deletion > allowance || (none_listed && by_deletion > 1);
        if mass {
            self.coverage.mass_absences += by_deletion as u64;
        }
        let mut outcome: Vec<Option<Memory>> = vec![None; VIPS];
        for (i, before, strict, lenient) in judged {
            let (reason, was_mass) = if mass && strict != lenient {
                (lenient, true)
            } else {
                (strict, before.is_some_and(|m| m.mass))
            };
            let since = match before {
                Some(m) if m.reason == reason => m.since,
                _ => now,
            };
            outcome[i] = Some(Memory {
                reason,
                since,
                mass: was_mass,
            });
        }
        let mut appeared = Vec::new();
        for (i, memory) in outcome.into_iter().enumerate() {
            let present = self.vips[i].present;
            if store.wants(i) {
                if !present {
                    self.appear_truth(i);
                    appeared.push(i);
                }
            } else if let Some(m) = memory {
                if present {
                    self.vanish_truth(i, m.reason);
                } else {
                    self.escalate(i, m.reason);
                }
            } else if present {
                // A new process never had it.
                self.drop_silently(i);
            }
            self.vips[i].remembered = memory;
        }
        self.synced = true;
        appeared
    }

    /// Service i's objects (`touched`) changed at the API server: the
    /// watchers see it while their links are live (through an empty list
    /// too: the objects changed join the store), and the source evaluates
    /// what changed its records.
    fn kube_changed(&mut self, touched: &[usize]) {
        let Some(k) = &mut self.kube else { return };
        k.sync_slices();
        if !k.live() {
            return;
        }
        let mut changed = Vec::new();
        for &i in touched {
            let before = (k.store.services[i], kept(k.store.slices[i]));
            k.store.services[i] = k.cluster.services[i];
            k.store.slices[i] = k.cluster.slices[i];
            if before != (k.store.services[i], kept(k.store.slices[i])) {
                changed.push(i);
            }
        }
        if !changed.is_empty() {
            self.kube_evaluate(Some(&changed));
        }
    }

    /// The Node changed at the API server: evaluated across every Service.
    fn kube_node_changed(&mut self) {
        let Some(k) = &mut self.kube else { return };
        if !k.live() {
            return;
        }
        let before = (k.store.cordoned, k.store.excluded);
        (k.store.cordoned, k.store.excluded) = (k.cluster.cordoned, k.cluster.excluded);
        if before != (k.store.cordoned, k.store.excluded) {
            self.kube_evaluate(None);
        }
    }

    /// A link is no longer live: the source says so, with its last
    /// evaluation.
    fn kube_unhealthy(&mut self) {
        let Some(k) = &self.kube else { return };
        let snap = k.snapshot();
        self.set_health(false);
        self.send_snapshot(snap);
    }

    /// Every link is live again, through a (re-)list: the store is the API
    /// server's, evaluated in full.
    fn kube_relisted(&mut self) {
        let Some(k) = &mut self.kube else { return };
        k.store = k.cluster;
        k.empty_until = None;
        self.kube_evaluate(None);
    }

    /// The file source reads the file (`fresh`: the first read of a new
    /// process's source); the model's view follows, then the snapshot.
    fn file_read(&mut self, fresh: bool) {
        let now = self.now;
        let Some(f) = &mut self.file else { return };
        let text = f.text();
        let at = 1_700_000_000_000_000_000i128 + now.as_nanos() as i128;
        let snap = f.source.take_read(at, text);
        if f.source.confirming_empty() && f.recheck_at.is_none() {
            // `file::run`: read again once an emptiness seen now may be
            // believed.
            f.recheck_at = Some(now + EMPTY_SETTLE);
        }
        let appeared = self.model_file(fresh);
        if let Some(snap) = snap {
            self.send_snapshot(snap);
        }
        for i in appeared {
            self.report_probe(i);
        }
    }

    /// The model of the file source, from its module doc: a broken (or
    /// missing) file keeps the last good set, unhealthy (a new process has
    /// none: unsynced); a valid file is the set, except that one with no
    /// VIP after a set that had some is believed only once reads have
    /// found it so for `EMPTY_SETTLE` (nothing changes meanwhile, the
    /// health neither). Every absence is one with no reason. Answers the
    /// VIPs that came.
    fn model_file(&mut self, fresh: bool) -> Vec<usize> {
        let now = self.now;
        // The last good set had VIPs (a new process has none).
        let had = !fresh && self.synced && self.vips.iter().any(|v| v.present);
        let Some(f) = &mut self.file else {
            return Vec::new();
        };
        if f.broken.is_some() {
            f.empty_since = None;
            if fresh {
                self.model_unsynced();
            }
            self.set_health(false);
            return Vec::new();
        }
        let listed: [bool; VIPS] = std::array::from_fn(|i| f.listed[i] && !f.truncated);
        if had && !listed.contains(&true) {
            let since = *f.empty_since.get_or_insert(now);
            if now < since + EMPTY_SETTLE {
                self.coverage.empty_file_waits += 1;
                return Vec::new();
            }
        }
        f.empty_since = None;
        self.synced = true;
        self.set_health(true);
        let mut appeared = Vec::new();
        for (i, listed) in listed.into_iter().enumerate() {
            match (listed, self.vips[i].present) {
                (true, false) => {
                    self.appear_truth(i);
                    appeared.push(i);
                }
                (false, true) if fresh => self.drop_silently(i),
                (false, true) => self.vanish_truth(i, Absence::Vanished),
                _ => {}
            }
        }
        appeared
    }

    // --- what happens at the source ---

    /// Kubernetes: Service i has VIP i in its ingress list (created, or
    /// the list refilled); file: VIP i added.
    fn world_appear(&mut self, i: usize) {
        if let Some(k) = &mut self.kube {
            if k.cluster.services[i] != Some(true) {
                k.cluster.services[i] = Some(true);
                self.kube_changed(&[i]);
            }
        } else if let Some(f) = &mut self.file
            && !f.listed[i]
        {
            f.listed[i] = true;
            self.file_read(false);
        }
    }

    /// Kubernetes: Service i's ingress list emptied (`delete`: the Service
    /// deleted); file: VIP i removed. Answers whether anything changed.
    fn world_vanish(&mut self, i: usize, delete: bool) -> bool {
        if let Some(k) = &mut self.kube {
            let to = if delete { None } else { Some(false) };
            let was = k.cluster.services[i];
            if was.is_none() || was == to || (!delete && was != Some(true)) {
                return false;
            }
            k.cluster.services[i] = to;
            self.kube_changed(&[i]);
            true
        } else if let Some(f) = &mut self.file
            && f.listed[i]
        {
            f.listed[i] = false;
            self.file_read(false);
            true
        } else {
            false
        }
    }

    /// Kubernetes: every Service's ingress list emptied at once (one
    /// evaluation); file: every VIP removed.
    fn world_mass_vanish(&mut self) {
        if let Some(k) = &mut self.kube {
            let touched: Vec<usize> = (0..VIPS)
                .filter(|&i| k.cluster.services[i] == Some(true))
                .collect();
            for &i in &touched {
                k.cluster.services[i] = Some(false);
            }
            self.kube_changed(&touched);
        } else if let Some(f) = &mut self.file
            && f.listed.contains(&true)
        {
            f.listed = [false; VIPS];
            self.file_read(false);
        }
    }

    /// The API server unreachable; the VIP file broken.
    fn world_break(&mut self, how: u8) {
        if let Some(k) = &mut self.kube {
            if !k.outage {
                k.outage = true;
                self.kube_unhealthy();
            }
        } else if let Some(f) = &mut self.file
            && f.broken.is_none()
        {
            f.broken = Some(how % 4);
            self.coverage.file_breaks += 1;
            self.file_read(false);
        }
    }

    /// The API server answers again (the watchers catch up or re-list);
    /// the VIP file mended.
    fn world_mend(&mut self) {
        if let Some(k) = &mut self.kube {
            if !k.live() {
                k.outage = false;
                k.relist_at = None;
                self.kube_relisted();
            }
        } else if let Some(f) = &mut self.file
            && f.broken.is_some()
        {
            f.broken = None;
            self.file_read(false);
        }
    }

    /// The source's own deadlines: a re-list done, an empty list's end, a
    /// file rewritten, the file source's next check.
    fn source_deadline(&self) -> Option<Duration> {
        let kube = self
            .kube
            .as_ref()
            .map(|k| [k.relist_at, k.empty_until])
            .unwrap_or_default();
        let file = self
            .file
            .as_ref()
            .map(|f| [f.rewrite_at, f.recheck_at])
            .unwrap_or_default();
        kube.into_iter().chain(file).flatten().min()
    }

    /// Handles one source deadline due by now; answers whether there was
    /// one.
    fn source_due(&mut self) -> bool {
        let now = self.now;
        let due = |t: Option<Duration>| t.is_some_and(|t| t <= now);
        if let Some(k) = &mut self.kube {
            if due(k.relist_at) {
                k.relist_at = None;
                if !k.outage {
                    self.coverage.relists += 1;
                    self.kube_relisted();
                }
                return true;
            }
            if due(k.empty_until) {
                k.empty_until = None;
                if k.live() {
                    self.kube_relisted();
                }
                return true;
            }
        }
        if let Some(f) = &mut self.file {
            if due(f.rewrite_at) {
                f.rewrite_at = None;
                f.truncated = false;
                self.file_read(false);
                return true;
            }
            if due(f.recheck_at) {
                f.recheck_at = None;
                self.file_read(false);
                return true;
            }
        }
        false
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
        // probe, no local endpoint, a drained node); during an episode,
        // also the releases due since the last step, one per withdraw
        // interval (plus one for the boundary).
        let paced = |i: usize| {
            let v = &self.vips[i];
            !v.probe_failing && v.gone.is_none_or(|(_, why)| guarded(why))
        };
        let guarded = before
            .difference(&after)
            .filter(|p| index_of(p).is_none_or(paced))
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
            self.table_changed_at[r] = self.now;
            self.node_input(r, Input::Table(table));
        }
        if !self.routes_ready && self.routes.routes_ready() {
            self.routes_ready = true;
            self.routes_ready_at = Some(self.now);
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
        if !self.active[r] {
            return;
        }
        let mut input = Some(input);
        let mut rounds = 0;
        while let Some(i) = input.take() {
            rounds += 1;
            let at = self.at();
            let out = self.sessions[r].handle(at, i);
            let wrote = self.carry(r, out);
            // The socket takes everything at once: held back output may go.
            if let Some(conn) = wrote
                && let Some(&total) = self.written.get(&conn)
                && rounds < 16
            {
                input = Some(Input::Written { conn, total });
            }
        }
    }

    /// Carries out what one input to session `r` asked for; answers the
    /// connection written to.
    fn carry(&mut self, r: usize, out: Vec<Output>) -> Option<ConnId> {
        if out.len() > 10_000 {
            self.fail(format!("(7) {} outputs for one input", out.len()));
        }
        let mut wrote = None;
        let mut group = Group::default();
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
                        self.digest = (self.digest ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
                    }
                    *self.written.entry(conn).or_default() += bytes.len() as u64;
                    wrote = Some(conn);
                    group.conn = Some(conn);
                    let table = self.check_write(r, conn, &bytes, &mut group);
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
        self.check_mrai(r, &group);
        wrote
    }

    /// (2m) RFC 4271 §9.2.1.1: on a session with an MRAI, a batch of route
    /// changes goes out at least the MRAI after the previous one. The whole
    /// table before the session's End-of-RIB goes whatever the MRAI (RFC
    /// 4724 §4.1), and the MRAI then counts afresh; ROUTE-REFRESH answers
    /// and the withdrawal before a Cease are not route changes.
    fn check_mrai(&mut self, r: usize, g: &Group) {
        let mrai = self.settings.mrai[r];
        let Some(conn) = g.conn else { return };
        if mrai.is_zero() || g.notification {
            return;
        }
        if g.initial_eor {
            self.mrai_last.remove(&conn);
        } else if g.nlri && !g.refresh {
            self.checks += 1;
            self.coverage.mrai_batches += 1;
            if let Some(&last) = self.mrai_last.get(&conn)
                && self.now < last + mrai
            {
                return self.fail(format!(
                    "(2m) route changes to r{r} {:?} after the previous batch, MRAI {mrai:?}",
                    self.now - last
                ));
            }
            self.mrai_last.insert(conn, self.now);
        }
    }

    /// Checks one message the node writes; for End-of-RIB, answers the
    /// desired table's prefixes (checked by the router on arrival).
    fn check_write(
        &mut self,
        r: usize,
        conn: ConnId,
        bytes: &[u8],
        group: &mut Group,
    ) -> Option<BTreeSet<IpNet>> {
        let m = match Message::decode(bytes, &Context::default()) {
            Ok(m) => m,
            Err(e) => {
                self.fail(format!(
                    "the node wrote an undecodable message to r{r}: {e}"
                ));
                return None;
            }
        };
        let u = match m {
            Message::Update(u) => u,
            Message::RouteRefresh(_) => {
                group.refresh = true;
                return None;
            }
            Message::Notification(_) => {
                group.notification = true;
                return None;
            }
            _ => return None,
        };
        if u.end_of_rib_family().is_some() {
            if self.eor_written.insert(conn) || group.initial_eor {
                group.initial_eor = true;
                self.check_table_complete(r);
            } else {
                group.refresh = true;
            }
            return Some(self.tables[r].keys().copied().collect());
        }
        group.nlri = true;
        // (4) While the source is unhealthy, nothing it reports withdraws
        // a route: a withdrawal then is only for a failed probe, a drain
        // or the end of a planned exit — or one decided before, which the
        // peer's MRAI held back (for at most the MRAI).
        let mrai_held = self
            .unhealthy_since
            .is_some_and(|t| self.now <= t + self.settings.mrai[r]);
        if !self.healthy && !self.stopping && !mrai_held {
            self.checks += 1;
            for n in u.withdrawals() {
                self.coverage.unhealthy_withdrawals += 1;
                // (A probe that failed and passed again: the VIP waits for
                // its advertise_delay, and the withdrawal may go meanwhile.)
                let probe =
                    |v: &VipTruth| v.probe_failing || v.probe_failed_at >= self.unhealthy_since;
                let exempt =
                    self.drained || index_of(&n.prefix).is_some_and(|i| probe(&self.vips[i]));
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

    /// (6) End-of-RIB follows the whole table (RFC 4724 §4.1): when a
    /// session's first End-of-RIB is written, every VIP the source has had
    /// since the process started, or long enough for its advertise_delay,
    /// is in the table (unless drained).
    fn check_table_complete(&mut self, r: usize) {
        if self.drained {
            return;
        }
        let families = self.routers[r].families.clone();
        for i in 0..VIPS {
            let p = vip_prefix(i);
            if !families.contains(&family_of(&p)) {
                continue;
            }
            self.checks += 1;
            let v = &self.vips[i];
            let since_start = v.covered_since.is_some_and(|c| c <= self.node_since);
            let due = self.due(i).is_some_and(|d| d <= self.now);
            // (End-of-RIB does not wait for a probe's first result: a
            // probed VIP is in the table only once it has passed.)
            let probe_ok = !probed(i) || (!v.probe_failing && v.probe_known);
            if self.held(i, self.now)
                && (due || since_start)
                && probe_ok
                && !self.tables[r].contains_key(&p)
            {
                let v = v.clone();
                return self.fail(format!(
                    "(6) End-of-RIB to r{r} before {p} is in its table: {v:?}"
                ));
            }
        }
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
        // 4724 §2: End-of-RIB once per family, after the whole table.
        self.checks += 1;
        match m {
            Message::Open(open) => {
                if phase != Phase::Fresh {
                    return self.fail(format!("(6) r{r}: OPEN in phase {phase:?}"));
                }
                let rt = &mut self.routers[r];
                // (6) RFC 4724 §3, §4.1: R only after the node restarted,
                // until its End-of-RIB (on the current process's
                // connections).
                let r_bit = open
                    .graceful_restart()
                    .is_some_and(|c| c.flags & GrCap::RESTART_STATE != 0);
                if r_bit && !rt.node_restarting && conn.0 >= rt.first_conn {
                    return self.fail(format!("(6) r{r}: R bit with no restart under way"));
                }
                // RFC 4724 §4.2: stale routes of a family go at once when
                // the new OPEN has no graceful restart for it (or F is
                // clear).
                for f in rt.families.clone() {
                    let keeps = open.graceful_restart().is_some_and(|c| {
                        c.families
                            .iter()
                            .any(|g| g.family == f && g.flags & 0x80 != 0)
                    });
                    if !keeps {
                        rt.flush_stale(Some(f));
                    }
                }
                let theirs = open.multiprotocol();
                rt.session_families = rt
                    .families
                    .iter()
                    .copied()
                    .filter(|f| theirs.contains(f))
                    .collect();
                // RFC 7313 §3: enhanced route refresh when both offer it.
                rt.enhanced = rt.refresh == Refresh::Enhanced
                    && open
                        .capabilities()
                        .any(|c| matches!(c, Capability::EnhancedRouteRefresh));
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
                    let node_since = self.node_since;
                    let rt = &mut self.routers[r];
                    rt.phase = Phase::KeepaliveSeen;
                    rt.established_since = Some(now);
                    rt.session_node_since = node_since;
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
                if let Some(f) = u.end_of_rib_family() {
                    if rt.eors.contains(&f) {
                        // RFC 2918: a plain ROUTE-REFRESH is answered with
                        // the table, then End-of-RIB.
                        match rt.refresh_asked.get_mut(&f) {
                            Some(n) if *n > 0 && !rt.enhanced => {
                                *n -= 1;
                                rt.coverage.refreshes += 1;
                                return;
                            }
                            _ => {
                                return self.fail(format!("(6) r{r}: a second End-of-RIB for {f}"));
                            }
                        }
                    }
                    if !rt.session_families.contains(&f) {
                        return self.fail(format!("(6) r{r}: End-of-RIB for {f}, not negotiated"));
                    }
                    rt.eors.insert(f);
                    if rt.session_families.iter().all(|f| rt.eors.contains(f)) {
                        rt.phase = Phase::EndOfRibSeen;
                    }
                    rt.node_restarting &= conn.0 < rt.first_conn;
                    rt.coverage.end_of_ribs += 1;
                    rt.flush_stale(Some(f));
                    let of = |set: &BTreeSet<IpNet>| -> BTreeSet<IpNet> {
                        set.iter().copied().filter(|p| family_of(p) == f).collect()
                    };
                    if let Some(table) = table
                        && of(&table) != of(&rt.on_conn)
                    {
                        let (sent, table) = (of(&rt.on_conn), of(&table));
                        return self.fail(format!(
                            "(6) r{r}: End-of-RIB for {f} after {sent:?}, the table was {table:?}"
                        ));
                    }
                    return;
                }
                // (6) RFC 4271 §5.1.3 and RFC 2545 §3: the next hop is the
                // node's address (its global IPv6 one first).
                if !u.nlri.is_empty() && u.next_hop() != Some(NODE_V4) {
                    let nh = u.next_hop();
                    return self.fail(format!("(6) r{r}: IPv4 routes with next hop {nh:?}"));
                }
                if let Some(mp) = u.mp_reach()
                    && mp.next_hop.get(..16) != Some(&NODE_V6.octets()[..])
                {
                    let nh = mp.next_hop.clone();
                    return self.fail(format!(
                        "(6) r{r}: {} routes with next hop {nh:02x?}",
                        mp.family
                    ));
                }
                let gs = u.communities().contains(&Community(GRACEFUL_SHUTDOWN));
                for n in u.withdrawals() {
                    rt.coverage.withdrawn += 1;
                    rt.rib.remove(&n.prefix);
                    rt.on_conn.remove(&n.prefix);
                    *rt.updates.entry(n.prefix).or_default() += 1;
                }
                for n in u.announced() {
                    rt.coverage.announced += 1;
                    if matches!(n.prefix, IpNet::V6(_)) {
                        rt.coverage.announced_v6 += 1;
                    }
                    if gs {
                        rt.coverage.graceful_shutdown_routes += 1;
                    }
                    rt.rib.insert(
                        n.prefix,
                        RouteAt {
                            graceful_shutdown: gs,
                            ..RouteAt::default()
                        },
                    );
                    rt.on_conn.insert(n.prefix);
                    *rt.updates.entry(n.prefix).or_default() += 1;
                }
                if let Some(p) = rt
                    .on_conn
                    .iter()
                    .find(|p| index_of(p).is_none() || !rt.session_families.contains(&family_of(p)))
                {
                    let p = *p;
                    self.fail(format!(
                        "(7) r{r} got {p}, not a VIP of the session's families"
                    ));
                }
            }
            Message::RouteRefresh(rr) => {
                let f = rr.family;
                let rt = &mut self.routers[r];
                match rr.subtype {
                    // RFC 7313 §4: at BoRR the family's routes are stale
                    // until re-sent; at EoRR those not re-sent go.
                    RouteRefresh::BORR => {
                        if !rt.enhanced || rt.refresh_asked.get(&f).is_none_or(|n| *n == 0) {
                            return self.fail(format!("(6) r{r}: BoRR for {f} unasked"));
                        }
                        rt.in_refresh.insert(f);
                        for (p, route) in rt.rib.iter_mut() {
                            if family_of(p) == f && !route.stale {
                                route.refresh_stale = true;
                            }
                        }
                    }
                    RouteRefresh::EORR => {
                        if !rt.in_refresh.remove(&f) {
                            return self.fail(format!("(6) r{r}: EoRR for {f} without BoRR"));
                        }
                        let on_conn = &mut rt.on_conn;
                        rt.rib.retain(|p, route| {
                            let keep = !route.refresh_stale;
                            if !keep {
                                on_conn.remove(p);
                            }
                            keep
                        });
                        if let Some(n) = rt.refresh_asked.get_mut(&f) {
                            *n = n.saturating_sub(1);
                        }
                        rt.coverage.refreshes += 1;
                        rt.coverage.enhanced_refreshes += 1;
                    }
                    s => self.fail(format!("(6) r{r}: ROUTE-REFRESH subtype {s} from the node")),
                }
            }
            Message::Notification(n) => {
                let rt = &mut self.routers[r];
                if let Some((c, subcode)) = rt.expect_cease
                    && c == conn
                {
                    let n = n.encapsulated().unwrap_or(n);
                    if n.code == CEASE
                        && n.subcode == cease::ADMINISTRATIVE_SHUTDOWN
                        && subcode == n.subcode
                    {
                        rt.coverage.shutdown_ceases += 1;
                        // (8) RFC 8326 §3 then RFC 4486: every route
                        // withdrawn before the Cease.
                        if !rt.on_conn.is_empty() {
                            let left = rt.on_conn.clone();
                            return self.fail(format!(
                                "(8) r{r}: Cease/Administrative Shutdown with {left:?} still advertised"
                            ));
                        }
                    } else if n.code == CEASE
                        && n.subcode == cease::PEER_DECONFIGURED
                        && subcode == n.subcode
                    {
                        rt.coverage.deconfigured_ceases += 1;
                    } else {
                        let d = n.describe();
                        return self.fail(format!("(9) r{r}: {d}, not Cease subcode {subcode}"));
                    }
                }
                self.routers[r].drop_conn(now, true);
                self.send(Delivery::NodeClosed { r, conn });
            }
        }
    }

    /// The router drops its connection before the Cease the node sent
    /// on it arrived: a removed peer's routes are then only stale.
    fn cease_lost(&mut self, r: usize) {
        if self.routers[r].expect_cease.is_some()
            && let Some((at, _)) = self.removed[r]
        {
            self.removed[r] = Some((at, false));
        }
    }

    /// The router asks for its routes of a family again (RFC 2918), if it
    /// can and the session has the family.
    fn router_refresh(&mut self, r: usize, k: usize) {
        let rt = &mut self.routers[r];
        let Some(conn) = rt.conn else { return };
        let f = rt.families[k % rt.families.len()];
        if rt.refresh == Refresh::None
            || rt.phase < Phase::KeepaliveSeen
            || !rt.session_families.contains(&f)
        {
            return;
        }
        *rt.refresh_asked.entry(f).or_default() += 1;
        rt.refreshes += 1;
        let bytes = Message::RouteRefresh(RouteRefresh::new(f, RouteRefresh::NORMAL))
            .encode(&Context::default())
            .unwrap();
        self.send(Delivery::ToNode { r, conn, bytes });
    }

    fn router_timers(&mut self, r: usize) {
        let now = self.now;
        if self.routers[r].stale_until.is_some_and(|t| t <= now) {
            self.routers[r].coverage.stale_expired += 1;
            self.routers[r].flush_stale(None);
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
                let local = self.routers[r].local;
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
                    // (8), (9) The Cease was due before the close.
                    if let Some((c, subcode)) = self.routers[r].expect_cease
                        && c == conn
                    {
                        return self.fail(format!(
                            "(9) r{r}: the node closed the session without Cease subcode {subcode}"
                        ));
                    }
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
        for (s, _) in self.sessions.iter().zip(&self.active).filter(|(_, a)| **a) {
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
        next.extend(self.source_deadline());
        next.into_iter().min()
    }

    /// Everything due by now, in order of time, until nothing is.
    fn pump(&mut self) {
        for _ in 0..100_000 {
            let now = self.now;
            let at = self.at();
            if self.routes.next_deadline().is_some_and(|t| t <= at) {
                let mut stop = false;
                self.routes_call(|r, at| stop = r.poll(at));
                if stop {
                    // The exit's wait is over.
                    self.finish_exit();
                }
                continue;
            }
            if let Some(r) = (0..self.sessions.len()).find(|&r| {
                self.active[r] && self.sessions[r].next_deadline().is_some_and(|t| t <= at)
            }) {
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
                self.world_appear(key.1);
                continue;
            }
            if self.source_due() {
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

    // --- reloads and the exit ---

    /// The config in force: the file's, with the peers `active` says and
    /// the hold-down last set.
    fn current_config(&self) -> Arc<holdfast::config::Config> {
        let mut c = (*self.config).clone();
        c.peers = self
            .peers
            .iter()
            .zip(&self.active)
            .filter(|(_, a)| **a)
            .map(|(p, _)| p.clone())
            .collect();
        c.stability.withdraw_hold_down = self.hold_down;
        Arc::new(c)
    }

    /// A reload, as the daemon's: the routes core takes the new config,
    /// removed peers' sessions stop (Cease/Peer De-configured, RFC 4486 —
    /// a hard reset, RFC 8538), added ones start, and the tables are
    /// worked out again.
    fn reload(&mut self, ev: Ev) {
        if self.exit.is_some() {
            return;
        }
        match ev {
            Ev::HoldDown(secs) => {
                let new = Duration::from_secs(secs);
                if new == self.hold_down {
                    return;
                }
                // A held-down VIP goes at its absence + the new hold-down,
                // or now if that has passed (what the old one owed by now
                // went already).
                let now = self.now;
                for v in &mut self.vips {
                    if let Some((at, Absence::Vanished)) = v.gone
                        && v.taken
                        && v.hold_until > now
                    {
                        v.hold_until = now.max(at + new);
                    }
                }
                self.hold_down = new;
                self.hold_down_changed_at = now;
                self.coverage.hold_down_changes += 1;
            }
            Ev::RemovePeer(r) => {
                if !self.active[r] || self.active.iter().filter(|a| **a).count() == 1 {
                    return;
                }
                self.active[r] = false;
            }
            Ev::AddPeer(r) => {
                if self.active[r] {
                    return;
                }
                self.active[r] = true;
            }
            _ => unreachable!(),
        }
        self.config = self.current_config();
        let config = self.config.clone();
        self.routes_call(|rc, at| rc.set_config(at, config));
        match ev {
            Ev::RemovePeer(r) => {
                let name = self.names[r].clone();
                self.routes.detach(&name);
                let rt = &self.routers[r];
                let established = self.sessions[r].state() == State::Established
                    && rt.phase >= Phase::KeepaliveSeen;
                if established && let Some(conn) = rt.conn {
                    self.routers[r].expect_cease = Some((conn, cease::PEER_DECONFIGURED));
                }
                let at = self.at();
                // (active again for the stop's outputs)
                self.active[r] = true;
                let out = self.sessions[r].handle(at, Input::Stop(StopHow::Deconfigured));
                self.carry(r, out);
                self.active[r] = false;
                self.connecting[r] = None;
                self.removed[r] = Some((self.now, established));
                self.coverage.removals += 1;
            }
            Ev::AddPeer(r) => {
                let at = self.at();
                self.processes += 1;
                self.sessions[r] = session(
                    &self.peers[r],
                    at,
                    self.seed ^ self.processes.wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    r,
                    false,
                );
                self.routes.attach(&self.names[r]);
                self.tables[r] = Arc::new(PeerTable::new());
                self.table_changed_at[r] = self.now;
                self.removed[r] = None;
                self.coverage.additions += 1;
            }
            _ => {}
        }
        self.routes_call(|rc, at| rc.refresh(at));
        if let Ev::AddPeer(r) = ev {
            if self.routes_ready {
                self.node_input(r, Input::RoutesReady(true));
            }
            self.node_input(r, Input::Start { bfd_up: false });
        }
        // The Kubernetes source evaluates a new config at once, in full
        // (the file source's settings, the path and the advertisements, do
        // not change here).
        if self.kube.as_ref().is_some_and(|k| k.live() && k.evaluated) {
            self.kube_evaluate(None);
        }
    }

    /// SIGTERM (`holdfast run`'s exit, `routes::drain::exit_plan`): the
    /// peers whose routes do not outlive the process (no graceful restart,
    /// `--withdraw-on-exit`, a drained node) get them marked
    /// GRACEFUL_SHUTDOWN for `graceful_shutdown_wait` (RFC 8326 §3), then
    /// withdrawn and Cease; the others are closed for graceful restart. A
    /// second signal stops at once.
    fn begin_exit(&mut self, withdraw_on_exit: bool) {
        if self.exit.is_some() {
            return self.finish_exit();
        }
        let draining = self.routes.drain().drain.draining();
        // The Node's facts as the Kubernetes source's last full evaluation
        // left them (`daemon::exit`): a cordoned node withdraws.
        let node = self.kube.as_ref().and_then(|k| k.node_facts.clone());
        let plans: Vec<Option<ExitPlan>> = (0..self.peers.len())
            .map(|r| {
                self.active[r].then(|| {
                    exit_plan(
                        ExitReason::Signal,
                        self.peers[r].graceful_restart.enabled,
                        withdraw_on_exit,
                        draining,
                        node.as_ref(),
                    )
                })
            })
            .collect();
        let withdrawing: BTreeSet<String> = plans
            .iter()
            .zip(&self.names)
            .filter(|(p, _)| matches!(p, Some(ExitPlan::Withdraw(_))))
            .map(|(_, n)| n.clone())
            .collect();
        self.coverage.exits += 1;
        for (r, plan) in plans.iter().enumerate() {
            if matches!(plan, Some(ExitPlan::Withdraw(_)))
                && matches!(self.gs[r], Gs::Clear(_))
                && !draining
            {
                self.gs[r] = Gs::Marked(self.now);
            }
        }
        // GRACEFUL_SHUTDOWN, then the withdrawal (and back in the next
        // process).
        for v in &mut self.vips {
            v.transitions += 2;
        }
        self.exit = Some(Exit { plans });
        let mut done = false;
        self.routes_call(|rc, at| done = rc.begin_exit(at, withdrawing));
        if done {
            self.finish_exit();
        }
    }

    /// The exit's wait is over: the daemon's `shutdown`, then the next
    /// process (restarting if a peer keeps the routes through graceful
    /// restart).
    fn finish_exit(&mut self) {
        let Some(exit) = self.exit.take() else { return };
        let mut how = Vec::new();
        let mut keep = false;
        for (r, plan) in exit.plans.iter().enumerate() {
            match plan {
                Some(ExitPlan::Withdraw(_)) => {
                    let rt = &self.routers[r];
                    if self.sessions[r].state() == State::Established
                        && rt.phase >= Phase::KeepaliveSeen
                        && let Some(conn) = rt.conn
                    {
                        self.routers[r].expect_cease = Some((conn, cease::ADMINISTRATIVE_SHUTDOWN));
                    }
                    how.push(StopHow::Withdraw("node-1: holdfast shutting down".into()));
                }
                Some(ExitPlan::KeepThroughRestart) => {
                    keep = true;
                    how.push(StopHow::Graceful);
                }
                None => how.push(StopHow::Graceful),
            }
        }
        self.restart_node(how, keep);
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
            Ev::Appear(i) => self.world_appear(i),
            Ev::Flap(i, ms) => {
                if self.world_vanish(i, false) {
                    self.reappear
                        .insert((self.now + Duration::from_millis(ms), i), ());
                }
            }
            Ev::Vanish(i) => {
                self.world_vanish(i, false);
            }
            Ev::Delete(i) => {
                self.world_vanish(i, true);
            }
            Ev::MassVanish => self.world_mass_vanish(),
            Ev::Unhealthy(how) => self.world_break(how),
            Ev::Healthy => self.world_mend(),
            Ev::Endpoint(i, e) => {
                if let Some(k) = &mut self.kube
                    && k.endpoints[i] != e
                {
                    k.endpoints[i] = e;
                    self.kube_changed(&[i]);
                }
            }
            Ev::Cordon(excluded) => {
                if let Some(k) = &mut self.kube {
                    if excluded {
                        k.cluster.excluded = true;
                    } else {
                        k.cluster.cordoned = true;
                    }
                    self.kube_node_changed();
                }
            }
            Ev::Uncordon => {
                if let Some(k) = &mut self.kube {
                    (k.cluster.cordoned, k.cluster.excluded) = (false, false);
                    self.kube_node_changed();
                }
            }
            Ev::Relist(ms) => {
                if let Some(k) = &mut self.kube
                    && k.live()
                    && k.evaluated
                {
                    k.relist_at = Some(self.now + Duration::from_millis(ms));
                    self.kube_unhealthy();
                }
            }
            Ev::EmptyList(ms) => {
                let until = self.now + Duration::from_millis(ms);
                if let Some(k) = &mut self.kube {
                    if k.live() && k.evaluated {
                        k.store.services = [None; VIPS];
                        k.empty_until = Some(until);
                        self.coverage.empty_relists += 1;
                        self.kube_evaluate(None);
                    }
                } else if let Some(f) = &mut self.file
                    && !f.truncated
                {
                    f.truncated = true;
                    f.rewrite_at = Some(until);
                    self.file_read(false);
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
                        // GRACEFUL_SHUTDOWN to every peer (a drain during
                        // an exit keeps the exit's peers), then the
                        // withdrawal; or back, without it.
                        if self.exit.is_none() {
                            for gs in &mut self.gs {
                                *gs = match (*gs, on) {
                                    (Gs::Clear(_), true) => Gs::Marked(self.now),
                                    (Gs::Marked(_), false) => Gs::Clear(self.now),
                                    (same, _) => same,
                                };
                            }
                        }
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
                    if !pass {
                        v.probe_failed_at = Some(now);
                    }
                    // Present, it is advertised from now on (after its
                    // advertise_delay), or withdrawn at once; absent, its
                    // probe does not run.
                    if v.present {
                        v.covered_since = pass.then_some(now);
                        // Its probe no longer Unknown: back from a drain.
                        if pass && v.drain_mark.is_some() {
                            v.drain_mark = None;
                            v.drain_end = Some(now);
                        }
                    }
                    self.report_probe(i);
                }
            }
            Ev::Reset(r) => {
                self.cease_lost(r);
                if let Some(conn) = self.routers[r].conn {
                    self.routers[r].drop_conn(self.now, false);
                    self.send(Delivery::NodeClosed { r, conn });
                }
            }
            Ev::Restart(r, gr) => {
                self.cease_lost(r);
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
            Ev::NodeRestart(jitter) => {
                self.processes = self.processes.wrapping_add(jitter);
                let how = (0..self.sessions.len())
                    .map(|_| StopHow::Graceful)
                    .collect();
                self.restart_node(how, true);
            }
            Ev::Refresh(r, k) => self.router_refresh(r, k),
            Ev::RemovePeer(_) | Ev::AddPeer(_) | Ev::HoldDown(_) => self.reload(ev),
            Ev::Exit(withdraw_on_exit) => self.begin_exit(withdraw_on_exit),
        }
        self.pump();
    }

    // --- the invariants after each step ---

    fn check(&mut self) {
        let now = self.now;
        let mut checks = 0u64;
        let mut bad: Vec<String> = Vec::new();
        let advertise_delay = self.settings.advertise_delay;
        // (7) The routes core tracks a probe for each probed VIP the
        // source has, and for no other (nothing left behind).
        checks += 1;
        let probes: BTreeSet<IpAddr> = self.routes.probes().keys().copied().collect();
        let want: BTreeSet<IpAddr> = (0..VIPS)
            .filter(|&i| probed(i) && self.vips[i].present)
            .map(vip_ip)
            .collect();
        if probes != want {
            bad.push(format!(
                "(7) the routes core probes {probes:?}, the source has {want:?}"
            ));
        }
        for r in 0..self.routers.len() {
            let rt = &self.routers[r];
            let settle = self.settle(r);
            let active = self.active[r];
            let up = active
                && self.sessions[r].state() == State::Established
                && rt.established_since.is_some_and(|t| now >= t + SETTLE);
            let of_families = |p: &IpNet| rt.families.contains(&family_of(p));
            // (7) A router holds VIPs of its families only.
            checks += 1;
            let n_vips = (0..VIPS).filter(|&i| of_families(&vip_prefix(i))).count();
            if rt.rib.len() > n_vips {
                let n = rt.rib.len();
                bad.push(format!("(7) r{r} holds {n} routes of {n_vips} VIPs"));
            }
            // (9) A peer a reload removed is sent Cease/Peer De-configured
            // (a hard reset, RFC 8538 §3): from SETTLE after, its router
            // holds none of the node's routes (stale ones only if the
            // session was down then: they go at the restart time).
            if let Some((at, established)) = self.removed[r]
                && now >= at + SETTLE
            {
                checks += 1;
                let fresh = rt.rib.iter().find(|(_, s)| established || !s.stale);
                if let Some((p, s)) = fresh {
                    bad.push(format!(
                        "(9) r{r}, removed at {at:?}, still has {p} ({s:?})"
                    ));
                }
            }
            // (8) RFC 8326 §3: GRACEFUL_SHUTDOWN on every route the router
            // has from SETTLE after a drain or exit towards it began, on
            // none from SETTLE after it ended; and on the route of a VIP the
            // Node's cordon (or exclusion) drained, from SETTLE after, while
            // it waits out graceful_shutdown_wait — on no other for it.
            let marked = match self.gs[r] {
                Gs::Marked(t) if now >= t + settle => Some(true),
                Gs::Clear(t) if now >= t + settle => Some(false),
                _ => None,
            };
            // Some(true): marked for the Node; None: settling; Some(false):
            // not the Node's doing.
            let by_node = |i: usize| {
                let v = &self.vips[i];
                match v.drain_mark {
                    Some(t) => (now >= t + settle).then_some(true),
                    None if v.drain_end.is_some_and(|t| now < t + settle) => None,
                    None => Some(false),
                }
            };
            for (p, st) in rt.rib.iter().filter(|(_, st)| !st.stale) {
                let node = index_of(p).map_or(Some(false), by_node);
                let want = match (marked, node) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (_, None) => None,
                    (m, Some(false)) => m,
                };
                if let Some(want) = want {
                    checks += 1;
                    if st.graceful_shutdown != want {
                        let v = index_of(p).map(|i| self.vips[i].clone());
                        let state = self.routes.stability().state(p);
                        let desired = self.tables[r].get(p).cloned();
                        bad.push(format!(
                            "(8) r{r}: {p} with GRACEFUL_SHUTDOWN {}, the node's {:?}, the VIP {v:?}; stability {state:?}, desired {desired:?}",
                            !want, self.gs[r]
                        ));
                        break;
                    }
                }
            }
            // (1') Graceful restart (RFC 4724 §4.2): while a helping router
            // waits for the node's session to come back (within the restart
            // time, before End-of-RIB), every VIP (1) required before the
            // connection dropped is still in its table, as stale; so the
            // node's OPEN offered graceful restart for the family with F.
            if let Some((dropped, up_since, node_since)) = rt.helping
                && now < dropped + RESTART_TIME
                && dropped >= up_since + settle
                && !self.drained
                && self.undrained_at.is_none_or(|t| dropped >= t + settle)
            {
                for (i, v) in self.vips.iter().enumerate() {
                    let p = vip_prefix(i);
                    if !of_families(&p) || rt.eors.contains(&family_of(&p)) {
                        continue;
                    }
                    checks += 1;
                    // Wanted when the connection dropped: present, or held
                    // down then (what happened since does not matter; what
                    // went at that very instant may have gone first).
                    let held = match v.gone {
                        None => v.present,
                        Some((at, why)) if damped(why) => {
                            at > dropped || dropped < self.keep_until(i)
                        }
                        Some(_) => false,
                    };
                    let due = v.covered_since.map(|c| c.max(node_since) + advertise_delay);
                    let wanted = held && due.is_some_and(|t| dropped >= t + settle);
                    let probe_ok = !probed(i) || !v.probe_failing;
                    if wanted && probe_ok && !rt.rib.contains_key(&p) {
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
            // (1) A VIP the source wants (present, past its advertise_delay,
            // for the settle time: SETTLE and the peer's MRAI), or absent
            // with no reason while the stability layer must still hold it
            // (its hold-down, and any damping episode: RFC 2439 keeps a
            // flapping VIP advertised), is in every router's table that has
            // been Established for SETTLE and has its family — unless
            // drained (or undrained less than the settle time ago) or its
            // probe fails (a probed VIP is wanted from when its probe
            // passes while it is present, plus its advertise_delay).
            let drained = self.drained || self.undrained_at.is_some_and(|t| now < t + settle);
            if !drained {
                for i in 0..VIPS {
                    let p = vip_prefix(i);
                    if !of_families(&p) {
                        continue;
                    }
                    checks += 1;
                    let v = &self.vips[i];
                    let held = self.held(i, now);
                    let due = self.due(i);
                    let wanted = held && due.is_some_and(|t| now >= t + settle);
                    if held && v.gone.is_some() && v.taken && now >= v.hold_until {
                        self.coverage.damped_kept += 1;
                    }
                    if held
                        && due.is_some_and(|t| t > now)
                        && v.covered_since.is_some_and(|c| c < now)
                    {
                        self.coverage.delayed += 1;
                    }
                    let probe_ok = !probed(i) || !v.probe_failing;
                    if wanted && probe_ok && !rt.rib.contains_key(&p) {
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
            // (1w) A VIP gone from a healthy source is gone from the router
            // (its routes not stale) the settle time after the latest
            // instant the stability layer may hold it (`withdraw_by`: its
            // reason's timer — no local endpoint: `local_endpoint_delay`,
            // deleted: `delete_delay`, drained: graceful_shutdown_wait, none:
            // the hold-down —, a damping episode, the guard's pace).
            for i in 0..VIPS {
                let p = vip_prefix(i);
                if !of_families(&p) {
                    continue;
                }
                let Some(by) = self.withdraw_by(i) else {
                    continue;
                };
                checks += 1;
                self.coverage.withdrawn_checked += 1;
                if now >= by + settle && rt.rib.get(&p).is_some_and(|st| !st.stale) {
                    let v = self.vips[i].clone();
                    let state = self.routes.stability().state(&p);
                    bad.push(format!(
                        "(1w) {p} still at r{r}, due to go by {by:?}: {v:?}; stability {state:?}"
                    ));
                    break;
                }
            }
            // (2) UPDATEs for a prefix to a router ≤ the changes of what
            // the router should have for it (appearances, absences — a
            // withdrawal only once the hold-down and any damping episode
            // are over —, probe verdicts, 2 per drain or exit, 1 per
            // undrain) + the sessions established (each sends the whole
            // table) + the ROUTE-REFRESH requests (each answered with the
            // whole table at most once). An MRAI only batches: (2m).
            for (p, &n) in &rt.updates {
                checks += 1;
                if let Some(i) = index_of(p) {
                    let bound = self.bound(i) + rt.establishments + rt.refreshes;
                    if n > bound {
                        let v = self.vips[i].clone();
                        bad.push(format!(
                            "(2) r{r} got {n} UPDATEs for {p}, bound {bound} ({v:?}, {} sessions, {} refreshes)",
                            rt.establishments, rt.refreshes
                        ));
                        break;
                    }
                }
            }
            // (6) Once the routes are ready, an established session has had
            // End-of-RIB for each family (RFC 4724 §4.1) within SETTLE.
            checks += 1;
            if self.routes_ready_at.is_some_and(|t| now >= t + SETTLE)
                && rt.phase != Phase::EndOfRibSeen
            {
                bad.push(format!(
                    "(6) r{r} established with no End-of-RIB: {:?} of {:?}",
                    rt.eors, rt.session_families
                ));
                continue;
            }
            // (3) With nothing in flight to the router, its routes (not
            // stale) are what the session's status says it advertised, and
            // that is the desired table (of its families) once End-of-RIB
            // is out and the MRAI has let the last change go.
            let idle = !self.net.values().any(|d| d.lane() == (r, false));
            if idle {
                checks += 1;
                let fresh: BTreeSet<IpNet> = rt
                    .rib
                    .iter()
                    .filter(|(_, s)| !s.stale)
                    .map(|(p, _)| *p)
                    .collect();
                let status = self.sessions[r].status();
                let advertised: BTreeSet<IpNet> = status.advertised.keys().copied().collect();
                let desired: BTreeSet<IpNet> =
                    self.tables[r].keys().copied().filter(of_families).collect();
                let mrai_over = now >= self.table_changed_at[r] + self.settings.mrai[r];
                if fresh != advertised {
                    bad.push(format!(
                        "(3) r{r} has {fresh:?}, status says {advertised:?}"
                    ));
                } else if status.end_of_rib_sent && mrai_over && advertised != desired {
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

/// The session of peer `p` (router `r`), Idle until started.
fn session(
    p: &holdfast::config::Peer,
    at: Instant,
    seed: u64,
    r: usize,
    restarting: bool,
) -> PeerSession {
    let address = Router::all()[r].address;
    let spec = PeerSpec {
        peer: p.clone(),
        address,
        interface: None,
        local_asn: 65001,
        router_id: NODE_V4,
        hostname: "node-1".into(),
        restarting: restarting && p.graceful_restart.enabled,
    };
    PeerSession::with_jitter_seed(
        spec,
        at,
        Box::new(node_addresses),
        seed ^ (r as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1),
    )
}

/// A new node process: its stability layer, drain control, routes core
/// and one session per peer (`restarting`: the R bit for the peers with
/// graceful restart), at `at`; the peers the config in force lacks get a
/// session that never starts.
fn boot(
    config: &Arc<holdfast::config::Config>,
    peers: &[holdfast::config::Peer],
    active: &[bool],
    at: Instant,
    seed: u64,
    restarting: bool,
) -> (Routes, Vec<PeerSession>) {
    let stability = Stability::new(stability_params(config)).expect("valid parameters");
    let from_file = config.file_source().is_some();
    let mut routes = Routes::new(config.clone(), stability, !from_file, from_file);
    let mut sessions = Vec::new();
    for (r, p) in peers.iter().enumerate() {
        if active[r] {
            routes.attach(&p.name);
        }
        sessions.push(session(p, at, seed, r, restarting));
    }
    (routes, sessions)
}

/// The node's interface addresses: IPv4 and IPv6 on one link (the IPv6
/// next hops: the global address, and the link-local one for on-link
/// peers, RFC 2545 §3).
fn node_addresses() -> Vec<holdfast_sockopt::InterfaceAddress> {
    let addr = |address: IpAddr, prefix_len| holdfast_sockopt::InterfaceAddress {
        interface: "eth0".into(),
        address,
        prefix_len,
    };
    vec![
        addr(IpAddr::V4(NODE_V4), 24),
        addr(IpAddr::V6(NODE_V6), 64),
        addr("fe80::2".parse().unwrap(), 64),
    ]
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
            println!("seed {seed}: {:?}", settings(seed));
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

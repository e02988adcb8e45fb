//! The session driver: one tokio task per peer around the sans-IO FSM of
//! `bgp_proto::fsm`. It owns the sockets and the timers, feeds bytes and
//! instants to the FSM and carries out what it asks; and it keeps the
//! peer's Adj-RIB-Out in step with the desired table the daemon publishes,
//! replaying the whole table and End-of-RIB on every new session.

pub mod socket;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bgp_proto::capability::{GrFamily, GracefulRestart as GrCap, LlgrFamily};
use bgp_proto::consts::notify::cease;
use bgp_proto::fsm::{self, Action, ConnId, Direction, Event, Negotiated, Session, State};
use bgp_proto::{Capability, Family, Message, Notification, RouteRefresh, Update};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::bfd::driver::BfdStatus;
use crate::config;
use crate::logging::{self, DownLog, DownVerdict, Kind};
use crate::speaker::{self, AdjRibOut, EncodeParams, NextHops, PeerTable};
use socket::SocketOptions;

/// The output of a connection waiting in holdfast for the socket: while
/// more than this is queued, no new bulk output (UPDATEs of a route
/// change, answers to ROUTE-REFRESH) is produced; it waits, coalesced,
/// until the queue drains. What is queued is at most this plus one batch
/// (the whole table at worst).
pub const OUTPUT_LIMIT: usize = 4 << 20;

/// Reads of a connection waiting for the session (64 KiB each): beyond
/// them the reader stops reading and TCP flow control holds the peer back.
const READ_QUEUE: usize = 4;

/// Commands waiting for the session task.
const COMMAND_QUEUE: usize = 64;

/// RFC 9687 SendHoldTime: a connection whose writes make no progress for
/// this long is closed (twice the negotiated Hold Time; see
/// [`send_hold_time`]). Before the OPENs are exchanged, and with a Hold
/// Time of 0, twice the large hold time of RFC 4271 §8.2.2.
pub const DEFAULT_SEND_HOLD_TIME: Duration = Duration::from_secs(480);

/// RFC 9687 §3: the SendHoldTime, from the negotiated Hold Time: twice it,
/// so that a peer that is slow but reading is not cut off before its own
/// HoldTimer would have noticed anything; a Hold Time of 0 (no keepalives)
/// falls back to [`DEFAULT_SEND_HOLD_TIME`].
pub fn send_hold_time(hold_time: u16) -> Duration {
    if hold_time == 0 {
        DEFAULT_SEND_HOLD_TIME
    } else {
        Duration::from_secs(2 * u64::from(hold_time))
    }
}

/// Everything a session needs to know about its peer.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerSpec {
    pub peer: config::Peer,
    /// The address in use (a `default-gateway` peer's current gateway).
    pub address: IpAddr,
    /// The interface an IPv6 link-local `address` is on (its scope, RFC
    /// 4007 §6); `None` for every other address.
    pub interface: Option<Interface>,
    pub local_asn: u32,
    pub router_id: Ipv4Addr,
    /// Our name, in the FQDN capability and shutdown messages.
    pub hostname: String,
    /// Set the R bit of graceful restart (RFC 4724 §3): this process
    /// restarted and the restart is still in progress for this peer (the
    /// daemon decides, see `daemon::restart`). The session clears it itself
    /// once End-of-RIB has gone out (RFC 4724 §4.1), so that its own later
    /// reconnections send R=0.
    pub restarting: bool,
}

/// A network interface, by name and index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub index: u32,
}

impl PeerSpec {
    /// Where to connect: the address and port, with the interface as the
    /// scope id of a link-local address (RFC 4007 §11: a link-local
    /// address is ambiguous without its zone).
    pub fn socket_addr(&self) -> SocketAddr {
        match (self.address, &self.interface) {
            (IpAddr::V6(v6), Some(i)) => {
                SocketAddr::V6(SocketAddrV6::new(v6, self.peer.port, 0, i.index))
            }
            (ip, _) => SocketAddr::new(ip, self.peer.port),
        }
    }

    /// The address as shown: `fe80::1%eth0` for a link-local one.
    pub fn display_address(&self) -> String {
        match &self.interface {
            Some(i) => format!("{}%{}", self.address, i.name),
            None => self.address.to_string(),
        }
    }

    /// Whether a connection from `from` is from this peer: the address, and
    /// for a link-local one also the interface it came in on.
    pub fn is_from(&self, from: SocketAddr) -> bool {
        if socket::unmap(from.ip()) != self.address {
            return false;
        }
        match (&self.interface, from) {
            (Some(i), SocketAddr::V6(f)) => f.scope_id() == i.index,
            _ => true,
        }
    }

    pub fn families(&self) -> Vec<Family> {
        self.peer
            .families
            .iter()
            .map(|f| match f {
                config::Family::Ipv4Unicast => Family::IPV4_UNICAST,
                config::Family::Ipv6Unicast => Family::IPV6_UNICAST,
            })
            .collect()
    }

    /// iBGP as far as the config tells (`local_asn` is the AS presented to
    /// this peer); once up, the session follows the AS the OPEN gave.
    pub fn is_ibgp(&self) -> bool {
        self.peer.asn.is_internal(self.local_asn)
    }

    /// What we put in our OPEN: multiprotocol for each family,
    /// route refresh and enhanced route refresh, 4-octet AS (added by the
    /// FSM), graceful restart, extended message and FQDN.
    pub fn capabilities(&self) -> Vec<Capability> {
        let mut caps: Vec<Capability> = self
            .families()
            .into_iter()
            .map(Capability::Multiprotocol)
            .collect();
        caps.push(Capability::RouteRefresh);
        caps.push(Capability::EnhancedRouteRefresh);
        caps.push(Capability::FourOctetAs(self.local_asn));
        let gr = &self.peer.graceful_restart;
        if gr.enabled {
            let mut flags = 0;
            if self.restarting {
                flags |= GrCap::RESTART_STATE;
            }
            if gr.notification {
                flags |= GrCap::NOTIFICATION;
            }
            caps.push(Capability::GracefulRestart(GrCap {
                flags,
                restart_time: gr
                    .restart_time
                    .as_secs()
                    .min(u64::from(GrCap::MAX_RESTART_TIME)) as u16,
                families: self
                    .families()
                    .into_iter()
                    .map(|family| GrFamily {
                        family,
                        flags: if gr.forwarding_state {
                            GrFamily::FORWARDING
                        } else {
                            0
                        },
                    })
                    .collect(),
            }));
            // RFC 9494 §4.2: the long-lived capability goes only beside
            // the Graceful Restart one; §3: one stale time per family.
            if let Some(stale) = gr.long_lived_stale_time {
                caps.push(Capability::LongLivedGracefulRestart(
                    self.families()
                        .into_iter()
                        .map(|family| LlgrFamily {
                            family,
                            // The F bit (0x80), as in the GR capability.
                            flags: if gr.forwarding_state { 0x80 } else { 0 },
                            // 24 bits; the config checks the range.
                            stale_time: stale.as_secs().min(0x00ff_ffff) as u32,
                        })
                        .collect(),
                ));
            }
        }
        caps.push(Capability::ExtendedMessage);
        caps.push(Capability::fqdn(&self.hostname, ""));
        caps
    }

    pub fn fsm_config(&self) -> fsm::Config {
        let p = &self.peer;
        fsm::Config {
            local_asn: self.local_asn,
            peer_asn: match p.asn {
                config::PeerAsn::Exact(asn) => fsm::PeerAs::Is(asn),
                config::PeerAsn::External => fsm::PeerAs::External,
                config::PeerAsn::Internal => fsm::PeerAs::Internal,
            },
            router_id: self.router_id,
            hold_time: p.hold_time.as_secs().min(u64::from(u16::MAX)) as u16,
            keepalive: p.keepalive,
            connect_retry: p.connect_retry,
            passive: p.passive,
            capabilities: self.capabilities(),
            idle_hold_time: Duration::from_secs(1),
            max_idle_hold_time: Duration::from_secs(120),
            jitter_seed: seed(&p.name),
        }
    }

    pub fn socket_options(&self) -> SocketOptions {
        socket_options(&self.peer, self.local_asn)
    }
}

/// The socket-level settings of peer `p` of a speaker in AS `local_asn`.
pub fn socket_options(p: &config::Peer, local_asn: u32) -> SocketOptions {
    let ibgp = p.is_ibgp(local_asn);
    SocketOptions {
        source_address: p.source_address,
        // iBGP sessions are rarely one hop: TTL 255 unless configured.
        ttl: if ibgp && p.ebgp_multihop == 1 {
            255
        } else {
            p.ebgp_multihop
        },
        ttl_security_hops: if p.ttl_security {
            std::num::NonZeroU8::new(p.ebgp_multihop.max(1))
        } else {
            None
        },
        md5_key: p.md5_key().map(<[u8]>::to_vec),
    }
}

fn seed(name: &str) -> u64 {
    // FNV-1a of the name and the process id: different peers and runs get
    // different jitter.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(std::process::id());
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// How a session ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StopHow {
    /// Graceful restart (RFC 4724): close TCP without a NOTIFICATION, so the
    /// peer keeps our routes as stale while the datapath keeps forwarding.
    Graceful,
    /// Withdraw every route, then Cease/Administrative Shutdown with this
    /// RFC 9003 message.
    Withdraw(String),
    /// The peer was removed from the config (or its default gateway
    /// moved): Cease/Peer De-configured, as a hard reset.
    Deconfigured,
    /// The peer's settings changed: Cease/Other Configuration Change,
    /// which a graceful-restart peer with the N bit survives.
    Reconfigured,
}

impl StopHow {
    /// For the log.
    fn describe(&self) -> &'static str {
        match self {
            StopHow::Graceful => "graceful restart (no NOTIFICATION)",
            StopHow::Withdraw(_) => "routes withdrawn, Cease/Administrative Shutdown",
            StopHow::Deconfigured => "peer removed from the config",
            StopHow::Reconfigured => "peer settings changed",
        }
    }
}

/// A session end we cause ourselves.
enum Stopping {
    /// The daemon asked (shutdown, reload): it logs that itself.
    Planned,
    /// BFD went down (its diagnostic).
    Bfd(String),
}

enum Command {
    Incoming(TcpStream),
    /// The restart is over (its time passed): later OPENs go without R.
    EndRestart,
    Stop {
        how: StopHow,
        done: oneshot::Sender<()>,
    },
}

enum Io {
    Connected(TcpStream),
    ConnectFailed(String),
    Read(ConnId, Vec<u8>),
    Closed(ConnId, String),
    /// A write completed: output held back may go now.
    Written,
    /// No write progress for the SendHoldTime (RFC 9687).
    SendStalled(ConnId),
}

/// What the rest of the daemon can see of a session.
#[derive(Clone, Debug)]
pub struct PeerRuntime {
    pub state: State,
    pub state_since: Instant,
    pub established_since: Option<Instant>,
    /// When the session last left Established (None: it never was): the
    /// Up/Down of a peer that is down, like FRR's `show bgp summary`.
    pub down_since: Option<Instant>,
    pub stats: fsm::Stats,
    pub last_error: Option<String>,
    pub negotiated: Option<Negotiated>,
    pub local_address: Option<SocketAddr>,
    /// The Adj-RIB-Out (shared with the session, not a copy).
    pub advertised: Arc<PeerTable>,
    /// Prefixes in `advertised`, (IPv4, IPv6): what `/metrics` reads.
    pub advertised_counts: (usize, usize),
    /// End-of-RIB sent on the current session.
    pub end_of_rib_sent: bool,
    /// The R bit is still set in our OPENs: false once End-of-RIB has gone
    /// out on any session (or the daemon ended the restart).
    pub restarting: bool,
}

/// A running session.
pub struct PeerHandle {
    pub spec: PeerSpec,
    pub runtime: Arc<Mutex<PeerRuntime>>,
    cmd: mpsc::Sender<Command>,
    task: JoinHandle<()>,
}

impl PeerHandle {
    /// Hands an accepted connection from this peer to the session.
    /// A session whose command queue is full is not keeping up: the
    /// connection is closed unread (the peer retries).
    pub fn incoming(&self, stream: TcpStream) {
        if let Err(e) = self.cmd.try_send(Command::Incoming(stream)) {
            debug!(peer = %self.spec.peer.name, "connection dropped: the session is busy ({e})");
        }
    }

    /// The restart is over: the session's later OPENs go with R=0.
    pub fn end_restart(&mut self) {
        self.spec.restarting = false;
        if let Err(mpsc::error::TrySendError::Full(cmd)) = self.cmd.try_send(Command::EndRestart) {
            // Must not be lost: wait for room, off this thread.
            let tx = self.cmd.clone();
            tokio::spawn(async move {
                let _ = tx.send(cmd).await;
            });
        }
    }

    /// Ends the session and waits (at most `timeout`) until what had to be
    /// sent is sent.
    pub async fn stop(self, how: StopHow, timeout: Duration) {
        let (tx, rx) = oneshot::channel();
        if self.cmd.send(Command::Stop { how, done: tx }).await.is_ok() {
            let _ = tokio::time::timeout(timeout, rx).await;
        }
        self.task.abort();
    }

    pub fn snapshot(&self) -> PeerRuntime {
        self.runtime.lock().expect("peer runtime lock").clone()
    }
}

/// Starts the session task of one peer, following `table`. `routes_ready`
/// turns true once the table is complete (the source's first complete view
/// is in): End-of-RIB waits for it.
pub fn spawn(
    spec: PeerSpec,
    table: watch::Receiver<Arc<PeerTable>>,
    routes_ready: watch::Receiver<bool>,
    bfd: Option<watch::Receiver<BfdStatus>>,
) -> PeerHandle {
    let (cmd_tx, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
    let now = Instant::now();
    let runtime = Arc::new(Mutex::new(PeerRuntime {
        state: State::Idle,
        state_since: now,
        established_since: None,
        down_since: None,
        stats: fsm::Stats::default(),
        last_error: None,
        negotiated: None,
        local_address: None,
        advertised: Arc::default(),
        advertised_counts: (0, 0),
        end_of_rib_sent: false,
        restarting: spec.restarting,
    }));
    let mut driver = Driver::new(spec.clone(), table, routes_ready, runtime.clone());
    driver.bfd = bfd;
    let task = tokio::spawn(driver.run(cmd_rx));
    PeerHandle {
        spec,
        runtime,
        cmd: cmd_tx,
        task,
    }
}

struct ConnIo {
    /// Whole messages to write. Unbounded as a channel, bounded in bytes:
    /// bulk output is produced only while `queue.queued()` is under
    /// [`OUTPUT_LIMIT`].
    writer: mpsc::UnboundedSender<Vec<u8>>,
    queue: Arc<OutQueue>,
    reader: JoinHandle<()>,
    local: SocketAddr,
    flushed: Option<oneshot::Receiver<()>>,
}

/// What a connection's writer has been given and has written, in octets.
#[derive(Default)]
struct OutQueue {
    /// Queued by the session (counted when sent into the channel).
    enqueued: AtomicU64,
    /// Written to the socket.
    written: AtomicU64,
    /// The RFC 9687 SendHoldTime in milliseconds (0 until the session
    /// sets it: [`DEFAULT_SEND_HOLD_TIME`]).
    send_hold_ms: AtomicU64,
}

impl OutQueue {
    fn queued(&self) -> usize {
        let e = self.enqueued.load(Ordering::Relaxed);
        let w = self.written.load(Ordering::Relaxed);
        e.saturating_sub(w) as usize
    }

    fn send_hold(&self) -> Duration {
        match self.send_hold_ms.load(Ordering::Relaxed) {
            0 => DEFAULT_SEND_HOLD_TIME,
            ms => Duration::from_millis(ms),
        }
    }
}

/// NOTIFICATIONs written to the socket, as (code, subcode, count): counted
/// by the writers once the write succeeded, so that the counters say what
/// went out (one that could not be written — the peer stopped reading — is
/// not counted).
type Written = Arc<Mutex<Vec<(u8, u8, u64)>>>;

fn count_written(written: &Written, runtime: &Mutex<PeerRuntime>, code: u8, subcode: u8) {
    let list = {
        let mut w = written.lock().expect("written notifications lock");
        match w.iter_mut().find(|(c, s, _)| *c == code && *s == subcode) {
            Some(e) => e.2 += 1,
            None => w.push((code, subcode, 1)),
        }
        w.clone()
    };
    runtime
        .lock()
        .expect("peer runtime lock")
        .stats
        .notifications_sent = list;
}

struct Up {
    negotiated: Negotiated,
    params: EncodeParams,
    families: Vec<Family>,
}

struct Driver {
    spec: PeerSpec,
    /// The peer's BFD session, when it has one.
    bfd: Option<watch::Receiver<BfdStatus>>,
    /// ManualStart given (and not stopped by BFD since).
    started: bool,
    /// BFD was Up at its last change.
    bfd_was_up: bool,
    fsm: Session,
    rib: AdjRibOut,
    table: watch::Receiver<Arc<PeerTable>>,
    /// The daemon's table is complete: End-of-RIB may go out.
    routes_ready: watch::Receiver<bool>,
    /// The session is up but End-of-RIB waits for `routes_ready`.
    end_of_rib_pending: bool,
    runtime: Arc<Mutex<PeerRuntime>>,
    io_tx: mpsc::Sender<Io>,
    io_rx: mpsc::Receiver<Io>,
    conns: HashMap<ConnId, ConnIo>,
    next_conn: u64,
    connecting: Option<JoinHandle<()>>,
    /// Failures while the session is not up: the first is logged, then a
    /// summary every few minutes, so that a peer that stays unreachable
    /// does not fill the log every ConnectRetryTime.
    down_log: DownLog,
    /// Why the next Down happens, when we bring it about (the FSM only
    /// sees a ManualStop).
    stopping: Option<Stopping>,
    up: Option<Up>,
    /// Routes changed since the last sync.
    dirty: bool,
    /// MinRouteAdvertisementIntervalTimer (RFC 4271 §9.2.1.1).
    mrai_until: Option<Instant>,
    /// ROUTE-REFRESH requests not answered yet (the output queue was
    /// full), one per family: a repeated request adds nothing.
    refresh_pending: Vec<(Family, bool)>,
    /// The answer to a family's ROUTE-REFRESH ends at this octet of the
    /// connection's output: a request while it is still being written adds
    /// nothing either.
    refresh_until: HashMap<Family, u64>,
    /// NOTIFICATIONs written, shared with the writers.
    written: Written,
}

impl Driver {
    fn new(
        spec: PeerSpec,
        table: watch::Receiver<Arc<PeerTable>>,
        routes_ready: watch::Receiver<bool>,
        runtime: Arc<Mutex<PeerRuntime>>,
    ) -> Self {
        let (io_tx, io_rx) = mpsc::channel(READ_QUEUE * 2);
        Driver {
            fsm: Session::new(spec.fsm_config()),
            spec,
            bfd: None,
            started: false,
            bfd_was_up: false,
            rib: AdjRibOut::default(),
            table,
            routes_ready,
            end_of_rib_pending: false,
            runtime,
            io_tx,
            io_rx,
            conns: HashMap::new(),
            next_conn: 1,
            connecting: None,
            down_log: DownLog::new(crate::logging::DOWN_SUMMARY_EVERY),
            stopping: None,
            up: None,
            dirty: false,
            mrai_until: None,
            refresh_pending: Vec::new(),
            refresh_until: HashMap::new(),
            written: Written::default(),
        }
    }

    fn name(&self) -> &str {
        &self.spec.peer.name
    }

    async fn run(mut self, mut cmds: mpsc::Receiver<Command>) {
        info!(peer = %self.name(), address = %self.spec.display_address(), asn = %self.spec.peer.asn, "session starting");
        // BGP starts at once; BFD, once it has been up, decides from then
        // on (RFC 5882 §4.3). Waiting for BFD before the first session
        // would deadlock with routers that start BFD only for established
        // BGP sessions — FRR does for multihop peers, whose local address
        // it learns from the TCP connection.
        self.bfd_was_up = self
            .bfd
            .as_ref()
            .is_some_and(|b| b.borrow().state == crate::bfd::packet::State::Up);
        self.event(Event::ManualStart);
        self.started = true;
        loop {
            let deadline = [
                self.fsm.next_deadline(),
                self.mrai_until.filter(|_| self.dirty),
            ]
            .into_iter()
            .flatten()
            .min();
            let sleep = async {
                match deadline {
                    Some(d) => tokio::time::sleep_until(d.into()).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    Some(Command::Incoming(stream)) => self.incoming(stream),
                    Some(Command::EndRestart) => self.end_restart(),
                    Some(Command::Stop { how, done }) => {
                        self.stop(how).await;
                        let _ = done.send(());
                        return;
                    }
                    None => return,
                },
                Some(io) = self.io_rx.recv() => self.io(io),
                changed = self.table.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    self.dirty = true;
                }
                Ok(()) = self.routes_ready.changed(), if self.end_of_rib_pending => {
                    self.send_end_of_rib();
                }
                Some(changed) = async { match self.bfd.as_mut() { Some(b) => Some(b.changed().await), None => None } }, if self.bfd.is_some() => {
                    if changed.is_err() {
                        self.bfd = None;
                    }
                    self.follow_bfd();
                }
                () = sleep => self.event(Event::Tick),
            }
            self.sync_routes();
            self.send_end_of_rib();
            self.answer_refreshes();
        }
    }

    /// No BFD, or BFD Up.
    fn bfd_up(&self) -> bool {
        self.bfd
            .as_ref()
            .is_none_or(|b| b.borrow().state == crate::bfd::packet::State::Up)
    }

    /// BFD going down (from Up) tears the session down at once with
    /// Cease/BFD Down (RFC 9384), and BGP does not come back until BFD is up
    /// again (RFC 5882 §4.3).
    fn follow_bfd(&mut self) {
        let up = self.bfd_up();
        let was_up = std::mem::replace(&mut self.bfd_was_up, up);
        if up && !self.started {
            info!(peer = %self.name(), "BFD is up again: starting the BGP session");
            self.started = true;
            self.event(Event::ManualStart);
        } else if !up && was_up && self.started {
            let diag = self
                .bfd
                .as_ref()
                .map(|b| b.borrow().diag.as_str())
                .unwrap_or("gone");
            self.started = false;
            self.stopping = Some(Stopping::Bfd(diag.to_owned()));
            let n = Notification::cease(cease::BFD_DOWN);
            self.event(Event::ManualStop {
                notification: Some(n),
            });
            if let Some(Stopping::Bfd(_)) = self.stopping.take() {
                // Not Established: no Down line said it.
                warn!(peer = %self.name(), address = %self.spec.address, %diag, "BFD went down: BGP waits for it");
            }
            self.set_error(format!("BFD down ({diag}): waiting for BFD to come back"));
        }
    }

    fn event(&mut self, e: Event) {
        let actions = self.fsm.handle(Instant::now(), e);
        self.actions(actions);
    }

    fn incoming(&mut self, stream: TcpStream) {
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        // MD5 and the listener's TTL settings were checked by the kernel
        // on the handshake; the SYN's TTL against this peer's own minimum,
        // and its own TTL and minimum TTL from here on (RFC 5082 §3), are
        // checked and set before its OPEN is read. A connection that fails
        // (or where GTSM could not be set) is closed unread.
        if let Err(e) = socket::accepted(&stream, &self.spec.socket_options()) {
            if let Some(note) = logging::allow(Kind::Connection, self.name()) {
                warn!(peer = %self.name(), "connection from {peer} refused: {e}{note}");
            }
            return;
        }
        let id = self.register(stream);
        debug!(peer = %self.name(), conn = id.0, "connection from {peer}");
        self.event(Event::TcpConnected {
            conn: id,
            direction: Direction::Incoming,
        });
    }

    /// Starts the reader and writer tasks of a connection.
    fn register(&mut self, stream: TcpStream) -> ConnId {
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        let local = stream
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let (mut rd, mut wr) = stream.into_split();
        let io = self.io_tx.clone();
        let reader = tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            loop {
                match rd.read(&mut buf).await {
                    Ok(0) => {
                        let _ = io.send(Io::Closed(id, "closed by the peer".into())).await;
                        return;
                    }
                    Ok(n) => {
                        // Waits while the session is behind: TCP flow
                        // control then holds the peer back.
                        if io.send(Io::Read(id, buf[..n].to_vec())).await.is_err() {
                            return;
                        }
                    }
                    Err(e) => {
                        let _ = io.send(Io::Closed(id, e.to_string())).await;
                        return;
                    }
                }
            }
        });
        let (wtx, mut wrx) = mpsc::unbounded_channel::<Vec<u8>>();
        let (flushed_tx, flushed_rx) = oneshot::channel();
        let io = self.io_tx.clone();
        let queue = Arc::new(OutQueue::default());
        let q = queue.clone();
        let written = self.written.clone();
        let runtime = self.runtime.clone();
        tokio::spawn(async move {
            // Messages queued together go out in one write.
            let mut batch = Vec::with_capacity(65536);
            let mut notifications: Vec<(u8, u8)> = Vec::new();
            while let Some(first) = wrx.recv().await {
                batch.clear();
                notifications.clear();
                let add = |batch: &mut Vec<u8>, n: &mut Vec<(u8, u8)>, m: &[u8]| {
                    if m.len() >= 21 && m[18] == bgp_proto::consts::msg_type::NOTIFICATION {
                        n.push((m[19], m[20]));
                    }
                    batch.extend_from_slice(m);
                };
                add(&mut batch, &mut notifications, &first);
                while batch.len() < 65536 {
                    match wrx.try_recv() {
                        Ok(more) => add(&mut batch, &mut notifications, &more),
                        Err(_) => break,
                    }
                }
                match tokio::time::timeout(q.send_hold(), wr.write_all(&batch)).await {
                    Ok(Ok(())) => {
                        q.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        for &(code, subcode) in &notifications {
                            count_written(&written, &runtime, code, subcode);
                        }
                        let _ = io.try_send(Io::Written);
                    }
                    Ok(Err(e)) => {
                        let _ = io.send(Io::Closed(id, e.to_string())).await;
                        return;
                    }
                    Err(_) => {
                        // RFC 9687: the peer stopped reading. Its backlog is
                        // dropped as it comes (what the session still sends,
                        // its NOTIFICATION included, cannot be written
                        // either) until the session lets go.
                        let _ = io.send(Io::SendStalled(id)).await;
                        drop(batch);
                        while let Some(m) = wrx.recv().await {
                            q.written.fetch_add(m.len() as u64, Ordering::Relaxed);
                        }
                        return;
                    }
                }
            }
            // The session dropped its sender: everything queued is out.
            let _ = wr.shutdown().await;
            let _ = flushed_tx.send(());
        });
        self.conns.insert(
            id,
            ConnIo {
                writer: wtx,
                queue,
                reader,
                local,
                flushed: Some(flushed_rx),
            },
        );
        id
    }

    fn io(&mut self, io: Io) {
        match io {
            Io::Connected(stream) => {
                self.connecting = None;
                let id = self.register(stream);
                self.event(Event::TcpConnected {
                    conn: id,
                    direction: Direction::Outgoing,
                });
            }
            Io::ConnectFailed(why) => {
                self.connecting = None;
                self.connect_failed(why);
                self.event(Event::TcpConnectFailed);
            }
            Io::Read(conn, bytes) => {
                if self.conns.contains_key(&conn) {
                    self.event(Event::Data { conn, bytes });
                }
            }
            Io::Written => {}
            Io::SendStalled(conn) => {
                if self.conns.contains_key(&conn) {
                    self.set_error("the peer stopped reading (send hold timer expired)".into());
                    self.event(Event::SendHoldTimerExpired { conn });
                }
            }
            Io::Closed(conn, why) => {
                if self.conns.contains_key(&conn) {
                    debug!(peer = %self.name(), conn = conn.0, "connection closed: {why}");
                    self.close(conn);
                    if self.fsm.state() >= State::OpenSent {
                        self.set_error(format!("TCP connection lost: {why}"));
                    }
                    self.event(Event::TcpClosed { conn });
                }
            }
        }
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(c) = self.conns.remove(&conn) {
            // Dropping the writer's sender flushes what is queued and shuts
            // the socket down; the reader is no longer needed.
            drop(c.writer);
            c.reader.abort();
        }
    }

    /// An outgoing connection attempt failed: say why in the status, and
    /// in the log when the reason is new (a router that stays unreachable
    /// would otherwise fill the log every ConnectRetryTime).
    fn connect_failed(&mut self, why: String) {
        let why = format!("connect: {why}");
        self.failure(&why);
        self.set_error(why);
    }

    /// A failure while the session is not up (a connection attempt, an
    /// OPEN refused): the first of a run is logged, then a summary every
    /// few minutes while the peer stays down.
    fn failure(&mut self, why: &str) {
        let address = self.spec.address;
        match self.down_log.failure(Instant::now()) {
            DownVerdict::First => warn!(
                peer = %self.name(),
                %address,
                error = why,
                "session not established; retrying (repeats are summarised every {})",
                logging::duration(logging::DOWN_SUMMARY_EVERY)
            ),
            DownVerdict::Summary { failures, since } => warn!(
                peer = %self.name(),
                %address,
                failures,
                last_error = why,
                "peer still down: {failures} failed attempts in {}",
                logging::duration(Duration::from_secs(since.elapsed().as_secs()))
            ),
            DownVerdict::Quiet => debug!(peer = %self.name(), error = why, "peer still down"),
        }
    }

    fn set_error(&self, e: String) {
        self.runtime.lock().expect("peer runtime lock").last_error = Some(e);
    }

    fn actions(&mut self, actions: Vec<Action>) {
        // A NOTIFICATION that ends an Established session is said in its
        // Down line.
        let ends_session = actions.iter().any(|a| matches!(a, Action::Down { .. }));
        for a in actions {
            match a {
                Action::Connect => self.connect(),
                Action::AbortConnect => {
                    if let Some(h) = self.connecting.take() {
                        h.abort();
                        // Still trying (Connect or Active, not stopping or
                        // gone Idle): the ConnectRetryTimer expired with the
                        // attempt unanswered (RFC 4271 §8.2.2, Connect state,
                        // Event 9). No error ever reaches us then — a
                        // mis-signed (MD5) or low-TTL (GTSM) SYN is dropped
                        // silently — so this is the only place to say so.
                        if matches!(self.fsm.state(), State::Connect | State::Active) {
                            let why = socket::no_answer(
                                self.spec.socket_addr(),
                                self.spec.peer.connect_retry,
                                &self.spec.socket_options(),
                            );
                            self.connect_failed(why);
                        }
                    }
                }
                Action::Send { conn, bytes } => {
                    if let Some(c) = self.conns.get(&conn) {
                        let len = bytes.len() as u64;
                        if c.writer.send(bytes).is_ok() {
                            c.queue.enqueued.fetch_add(len, Ordering::Relaxed);
                        }
                    }
                }
                Action::Close { conn } => self.close(conn),
                Action::StateChange { from, to, reason } => {
                    // The steps are detail: the Up and Down lines are
                    // what an operator reads.
                    debug!(peer = %self.name(), %from, %to, %reason, "state change");
                    let mut rt = self.runtime.lock().expect("peer runtime lock");
                    rt.state = to;
                    rt.state_since = Instant::now();
                    rt.established_since = self.fsm.established_since();
                    if from == State::Established {
                        rt.down_since = Some(rt.state_since);
                    }
                    if to == State::Established {
                        rt.last_error = None;
                    }
                }
                Action::Up { conn, negotiated } => self.session_up(conn, *negotiated),
                Action::Down { reason } => {
                    let address = self.spec.address;
                    match self.stopping.take() {
                        Some(Stopping::Planned) => {
                            debug!(peer = %self.name(), %address, "session Down: stopped")
                        }
                        Some(Stopping::Bfd(diag)) => warn!(
                            peer = %self.name(),
                            %address,
                            reason = format!("BFD down ({diag})").as_str(),
                            "session Down"
                        ),
                        None => warn!(
                            peer = %self.name(),
                            %address,
                            reason = reason.to_string().as_str(),
                            "session Down"
                        ),
                    }
                    self.up = None;
                    self.end_of_rib_pending = false;
                    self.refresh_pending.clear();
                    self.refresh_until.clear();
                    self.rib.clear();
                    let mut rt = self.runtime.lock().expect("peer runtime lock");
                    rt.last_error = Some(reason.to_string());
                    rt.negotiated = None;
                    rt.advertised = Arc::default();
                    rt.advertised_counts = (0, 0);
                    rt.end_of_rib_sent = false;
                }
                Action::NotificationSent { notification } => {
                    let what = format!("sent NOTIFICATION: {}", notification.describe());
                    self.notification_line(ends_session, &notification, &what);
                }
                Action::NotificationReceived { notification } => {
                    let what = format!("received NOTIFICATION: {}", notification.describe());
                    self.notification_line(ends_session, &notification, &what);
                    self.set_error(format!("received NOTIFICATION {}", notification.describe()));
                }
                Action::UpdateReceived(u) => {
                    if let Some(action) = u.action
                        && let Some(note) = logging::allow(Kind::MalformedUpdate, self.name())
                    {
                        warn!(
                            peer = %self.name(),
                            %action,
                            errors = u.errors.join("; ").as_str(),
                            "malformed UPDATE from the peer (RFC 7606){note}"
                        );
                    }
                }
                Action::RouteRefresh { family, enhanced } => self.route_refresh(family, enhanced),
            }
        }
        // What the FSM counted, but NOTIFICATIONs as the writers counted
        // them: those written.
        let written = self
            .written
            .lock()
            .expect("written notifications lock")
            .clone();
        let mut rt = self.runtime.lock().expect("peer runtime lock");
        rt.stats = self.fsm.stats().clone();
        rt.stats.notifications_sent = written;
    }

    /// A NOTIFICATION sent or received: said by the Down line when it ends
    /// the session; a failure to reach the session when it is not up; and
    /// otherwise a line of its own, limited like anything a peer can
    /// repeat. Collision resolution (RFC 4271 §6.8) closing the second of
    /// two connections is routine: debug only.
    fn notification_line(&mut self, ends_session: bool, n: &Notification, what: &str) {
        let collision = n.code == bgp_proto::consts::notify::CEASE
            && n.subcode == cease::CONNECTION_COLLISION_RESOLUTION;
        if ends_session || collision {
            debug!(peer = %self.name(), "{what}");
        } else if self.up.is_none() {
            if self.stopping.is_none() {
                self.failure(what);
            }
        } else if let Some(note) = logging::allow(Kind::Notification, self.name()) {
            info!(peer = %self.name(), "{what}{note}");
        }
    }

    fn connect(&mut self) {
        let addr = self.spec.socket_addr();
        let opts = self.spec.socket_options();
        let timeout = self.spec.peer.connect_retry;
        let io = self.io_tx.clone();
        self.connecting = Some(tokio::spawn(async move {
            match socket::connect(addr, &opts, timeout).await {
                Ok(s) => {
                    let _ = io.send(Io::Connected(s)).await;
                }
                Err(e) => {
                    let _ = io.send(Io::ConnectFailed(e.to_string())).await;
                }
            }
        }));
    }

    fn session_up(&mut self, conn: ConnId, negotiated: Negotiated) {
        let local = self.conns.get(&conn).map(|c| c.local);
        let next_hops = local
            .map(|l| {
                next_hops(
                    l.ip(),
                    self.spec.address,
                    self.spec.interface.as_ref().map(|i| i.name.as_str()),
                )
            })
            .unwrap_or_default();
        let configured = self.spec.families();
        let families: Vec<Family> = negotiated
            .families
            .iter()
            .copied()
            .filter(|f| configured.contains(f))
            .collect();
        let failures = self.down_log.up();
        info!(
            peer = %self.name(),
            address = %self.spec.address,
            hold_time = negotiated.hold_time,
            families = %families.iter().map(|f| f.name()).collect::<Vec<_>>().join(","),
            peer_hostname = negotiated.peer_hostname.as_deref().map(tracing::field::display),
            failed_attempts = (failures > 0).then_some(failures),
            "session Up"
        );
        let params = EncodeParams {
            local_asn: self.spec.local_asn,
            // RFC 4271 §5.1.2, §5.1.5: internal or external as the peer's
            // OPEN turned out ("external" / "internal" peers are only
            // known then).
            ibgp: !negotiated.is_external(),
            ctx: negotiated.tx,
            next_hops,
        };
        if let Some(c) = self.conns.get(&conn) {
            let ms = send_hold_time(negotiated.hold_time).as_millis() as u64;
            c.queue.send_hold_ms.store(ms, Ordering::Relaxed);
        }
        self.refresh_pending.clear();
        self.refresh_until.clear();
        {
            let mut rt = self.runtime.lock().expect("peer runtime lock");
            rt.negotiated = Some(negotiated.clone());
            rt.local_address = local;
            rt.end_of_rib_sent = false;
        }
        self.up = Some(Up {
            negotiated,
            params,
            families,
        });
        // RFC 4724 §4.1: after (re)establishment, the whole table, then
        // End-of-RIB for each family.
        self.rib.clear();
        self.mrai_until = None;
        self.dirty = true;
        self.sync_routes();
        self.end_of_rib_pending = true;
        if *self.routes_ready.borrow() {
            self.send_end_of_rib();
        } else {
            // End-of-RIB says "this is all of it": after a restart the peer
            // then drops every stale route we did not send again (RFC 4724
            // §4.2). Until the source has given its first complete view,
            // our table is not all of it.
            info!(peer = %self.name(), "End-of-RIB waits for the source's first complete view");
        }
    }

    /// The whole table, then End-of-RIB for each family (RFC 4724 §4.1),
    /// once the table is complete.
    fn send_end_of_rib(&mut self) {
        if !self.end_of_rib_pending || !*self.routes_ready.borrow() || self.up.is_none() {
            return;
        }
        // End-of-RIB must follow the whole table, which waits while the
        // output is backlogged.
        if self.backlogged() {
            return;
        }
        self.end_of_rib_pending = false;
        self.mrai_until = None;
        self.dirty = true;
        self.sync_routes();
        let Some(up) = &self.up else { return };
        let eors: Vec<Vec<u8>> = up
            .families
            .iter()
            .filter_map(|f| {
                Message::Update(Update::end_of_rib(*f))
                    .encode(&up.negotiated.tx)
                    .ok()
            })
            .collect();
        debug!(peer = %self.name(), "End-of-RIB");
        self.event(Event::SendUpdates(eors));
        self.runtime
            .lock()
            .expect("peer runtime lock")
            .end_of_rib_sent = true;
        // RFC 4724 §4.1: the restart is over for this peer once it has our
        // End-of-RIB; later OPENs go without R.
        self.end_restart();
    }

    fn end_restart(&mut self) {
        if self.spec.restarting {
            self.spec.restarting = false;
            self.fsm.set_capabilities(self.spec.capabilities());
            self.runtime.lock().expect("peer runtime lock").restarting = false;
        }
    }

    /// Brings the Adj-RIB-Out to the desired table, unless the
    /// MinRouteAdvertisementInterval holds it back.
    fn sync_routes(&mut self) {
        if !self.dirty || self.up.is_none() {
            return;
        }
        // Backlogged: the change waits, and changes meanwhile coalesce in
        // the next diff of the Adj-RIB-Out.
        if self.backlogged() {
            return;
        }
        let now = Instant::now();
        if self.mrai_until.is_some_and(|t| now < t) {
            return;
        }
        self.dirty = false;
        let table = self.table.borrow_and_update().clone();
        let Some(up) = &self.up else { return };
        let mut delta = self.rib.diff(&table, &up.families);
        if delta.is_empty() {
            return;
        }
        let (messages, unsendable) = speaker::encode(&delta, &up.params);
        if !unsendable.is_empty() {
            warn!(peer = %self.name(), count = unsendable.len(), first = %unsendable[0], "routes not sent: no next hop of their family on this session");
            for p in &unsendable {
                delta
                    .announce
                    .values_mut()
                    .for_each(|v| v.retain(|q| q != p));
            }
            self.rib.forget(&unsendable);
        }
        debug!(peer = %self.name(), announced = delta.announced(), withdrawn = delta.withdraw.len(), messages = messages.len(), "UPDATEs");
        self.event(Event::SendUpdates(messages));
        let mrai = self.spec.peer.min_route_advertisement_interval;
        if !mrai.is_zero() {
            self.mrai_until = Some(now + mrai);
        }
        self.publish_rib();
    }

    fn publish_rib(&self) {
        let mut rt = self.runtime.lock().expect("peer runtime lock");
        rt.advertised = self.rib.table();
        rt.advertised_counts = self.rib.counts();
    }

    /// The established connection's output queue.
    fn out_queue(&self) -> Option<&Arc<OutQueue>> {
        let (conn, _) = self.fsm.established()?;
        self.conns.get(&conn).map(|c| &c.queue)
    }

    /// More than [`OUTPUT_LIMIT`] waits for the socket: no new bulk output.
    fn backlogged(&self) -> bool {
        self.out_queue().is_some_and(|q| q.queued() >= OUTPUT_LIMIT)
    }

    /// A ROUTE-REFRESH for `family` (RFC 2918). Answers coalesce: at most
    /// one waits per family, and a request while the previous answer is
    /// still waiting or being written adds nothing — that answer, and the
    /// UPDATEs of any change after it, already bring the peer up to date.
    /// A peer asking faster than it reads cannot make holdfast queue more.
    fn route_refresh(&mut self, family: Family, enhanced: bool) {
        if self.refresh_pending.iter().any(|(f, _)| *f == family) {
            return;
        }
        let written = self
            .out_queue()
            .map_or(0, |q| q.written.load(Ordering::Relaxed));
        if self
            .refresh_until
            .get(&family)
            .is_some_and(|&end| written < end)
        {
            return;
        }
        if self.backlogged() {
            self.refresh_pending.push((family, enhanced));
            return;
        }
        self.answer_refresh(family, enhanced);
    }

    /// The ROUTE-REFRESH answers held back, while the output has room.
    fn answer_refreshes(&mut self) {
        while !self.refresh_pending.is_empty() && !self.backlogged() {
            let (family, enhanced) = self.refresh_pending.remove(0);
            self.answer_refresh(family, enhanced);
        }
    }

    /// RFC 2918: the whole table of `family` again; RFC 7313 §4: between
    /// BoRR and EoRR when enhanced route refresh was negotiated.
    fn answer_refresh(&mut self, family: Family, enhanced: bool) {
        let Some(up) = &self.up else { return };
        let mut delta = self.rib.full();
        for v in delta.announce.values_mut() {
            v.retain(|p| match p {
                ipnet::IpNet::V4(_) => family == Family::IPV4_UNICAST,
                ipnet::IpNet::V6(_) => family == Family::IPV6_UNICAST,
            });
        }
        delta.announce.retain(|_, v| !v.is_empty());
        let (mut messages, _) = speaker::encode(&delta, &up.params);
        if enhanced {
            let rr = |subtype| {
                Message::RouteRefresh(RouteRefresh::new(family, subtype))
                    .encode(&up.negotiated.tx)
                    .ok()
            };
            messages.insert(0, rr(RouteRefresh::BORR).unwrap_or_default());
            messages.extend(rr(RouteRefresh::EORR));
        } else if let Ok(eor) =
            Message::Update(Update::end_of_rib(family)).encode(&up.negotiated.tx)
        {
            messages.push(eor);
        }
        if let Some(note) = logging::allow(Kind::RouteRefresh, self.name()) {
            info!(peer = %self.name(), family = %family, enhanced, "answering ROUTE-REFRESH{note}");
        }
        self.event(Event::SendUpdates(messages));
        if let Some(q) = self.out_queue() {
            let end = q.enqueued.load(Ordering::Relaxed);
            self.refresh_until.insert(family, end);
        }
    }

    async fn stop(&mut self, how: StopHow) {
        let notification = match &how {
            StopHow::Graceful => None,
            StopHow::Withdraw(message) => {
                // Withdraw everything first, then say why we leave.
                if let Some(up) = &self.up {
                    let delta = self.rib.withdraw_all();
                    let (messages, _) = speaker::encode(&delta, &up.params);
                    if !messages.is_empty() {
                        self.event(Event::SendUpdates(messages));
                    }
                    self.publish_rib();
                }
                Some(shutdown_notification(
                    self.up.as_ref().map(|u| &u.negotiated),
                    cease::ADMINISTRATIVE_SHUTDOWN,
                    message,
                ))
            }
            // The peer is gone from the config (or moved): its routes must
            // go too — a hard reset under RFC 8538.
            StopHow::Deconfigured => Some(hard_reset(
                self.up.as_ref().map(|u| &u.negotiated),
                Notification::cease(cease::PEER_DECONFIGURED),
            )),
            // Its settings changed: reconnect at once; with the N bit the
            // router keeps our routes as stale meanwhile (RFC 8538 §3), so
            // the reset costs the datapath nothing.
            StopHow::Reconfigured => Some(Notification::cease(cease::OTHER_CONFIGURATION_CHANGE)),
        };
        debug!(peer = %self.name(), how = how.describe(), "stopping session");
        self.stopping = Some(Stopping::Planned);
        let flushes: Vec<oneshot::Receiver<()>> = self
            .conns
            .values_mut()
            .filter_map(|c| c.flushed.take())
            .collect();
        self.event(Event::ManualStop { notification });
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        for f in flushes {
            let _ = tokio::time::timeout(Duration::from_secs(2), f).await;
        }
    }
}

/// Cease with an RFC 9003 message. With the N bit negotiated (RFC 8538
/// §3), a plain Cease would keep our routes as stale at the peer: a hard
/// reset is meant, so it goes as Cease/Hard Reset carrying the original
/// NOTIFICATION.
pub fn shutdown_notification(
    negotiated: Option<&Negotiated>,
    subcode: u8,
    message: &str,
) -> Notification {
    hard_reset(
        negotiated,
        Notification::cease_with_message(subcode, message),
    )
}

/// A Cease that must end graceful restart at the peer: with the N bit
/// negotiated, wrapped as Cease/Hard Reset (RFC 8538 §3) whose data is the
/// encapsulated NOTIFICATION — its error code, subcode and data; without
/// it, as it is. (FRR 8.4's bgpd aborts on a Hard Reset whose data is
/// shorter than the two octets of code and subcode.)
pub fn hard_reset(negotiated: Option<&Negotiated>, inner: Notification) -> Notification {
    if negotiated.is_some_and(|n| n.graceful_notification) {
        Notification::hard_reset(&inner)
    } else {
        inner
    }
}

/// The next hops of a session whose local address is `local`, towards
/// `peer` (over `interface` when the session runs between link-local
/// addresses), from the node's interface addresses.
pub fn next_hops(local: IpAddr, peer: IpAddr, interface: Option<&str>) -> NextHops {
    let addrs = holdfast_sockopt::interface_addresses().unwrap_or_default();
    pick_next_hops(&addrs, local, peer, interface)
}

/// The next hops of a session, given the node's interface addresses:
///
/// - `local` itself for its family, unless it is link-local: RFC 2545 §3
///   puts a global address in the next hop, so a session between link-local
///   addresses (an IPv6 default gateway) sends the node's global IPv6
///   address on that interface, or failing that its first global IPv6
///   address anywhere (an address on a loopback, as in unnumbered setups);
/// - for the other family, the node's address of that family on the same
///   interface;
/// - and, beside a global IPv6 next hop, the interface's link-local address
///   when the peer is on-link (RFC 2545 §3: "if and only if" the peer
///   shares the subnet) — `local` itself for a link-local session.
pub fn pick_next_hops(
    addrs: &[holdfast_sockopt::InterfaceAddress],
    local: IpAddr,
    peer: IpAddr,
    interface: Option<&str>,
) -> NextHops {
    let local = socket::unmap(local);
    let peer = socket::unmap(peer);
    let link_local_session = matches!(local, IpAddr::V6(v6) if is_link_local(v6));
    let interface: Option<String> = interface.map(str::to_string).or_else(|| {
        addrs
            .iter()
            .find(|a| a.address == local)
            .map(|a| a.interface.clone())
    });
    let on_link = link_local_session
        || addrs
            .iter()
            .any(|a| a.contains(peer) && Some(&a.interface) == interface.as_ref());
    let same_if = |pred: &dyn Fn(IpAddr) -> bool| {
        addrs
            .iter()
            .filter(|a| Some(&a.interface) == interface.as_ref())
            .map(|a| a.address)
            .find(|a| pred(*a))
    };
    let global6 =
        |a: IpAddr| matches!(a, IpAddr::V6(v6) if !is_link_local(v6) && !v6.is_loopback());
    let mut nh = NextHops::default();
    match local {
        IpAddr::V4(v4) => {
            nh.ipv4 = Some(v4);
            nh.ipv6 = same_if(&global6).and_then(as_v6);
        }
        IpAddr::V6(v6) => {
            nh.ipv6 = if link_local_session {
                same_if(&global6)
                    .or_else(|| addrs.iter().map(|a| a.address).find(|a| global6(*a)))
                    .and_then(as_v6)
            } else {
                Some(v6)
            };
            nh.ipv4 = same_if(&|a| a.is_ipv4()).and_then(|a| match a {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            });
        }
    }
    if on_link && nh.ipv6.is_some() {
        nh.ipv6_link_local = match local {
            IpAddr::V6(v6) if link_local_session => Some(v6),
            _ => same_if(&|a| matches!(a, IpAddr::V6(v6) if is_link_local(v6))).and_then(as_v6),
        };
    }
    nh
}

fn as_v6(a: IpAddr) -> Option<Ipv6Addr> {
    match a {
        IpAddr::V6(v6) => Some(v6),
        IpAddr::V4(_) => None,
    }
}

fn is_link_local(a: Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

#[cfg(test)]
mod tests;

//! One peer's BGP session: a sans-IO core and the tokio driver around it.
//!
//! [`PeerSession`] (`peer_session.rs`) makes every protocol decision: it
//! owns the FSM of `bgp_proto::fsm`, the peer's speaker
//! ([`crate::speaker::PeerSpeaker`]: the Adj-RIB-Out, MRAI, End-of-RIB and
//! route refresh) and the graceful-restart R bit; bytes, connection events,
//! the desired table, the daemon's commands, BFD's state and instants go
//! in as values, and what to write, which connection to open or close,
//! the status view and its next deadline come out. It logs through
//! `tracing`, and asks the node's interface addresses of a function it is
//! given; it touches no socket, task or clock.
//!
//! The driver here (one tokio task per peer, [`spawn`]) owns the IO and
//! decides nothing about BGP: the connection attempt, each connection's
//! reader and writer tasks with their bounded queues (the GTSM and TTL
//! checks of an accepted connection, the RFC 9687 SendHoldTime of its
//! writes, the linger after a close), the one timer — at the session's
//! next deadline —, the channels from the daemon, and the status it
//! publishes as a value on a `watch` after each input ([`PeerHandle::status`]).

mod deadline;
mod peer_session;
#[doc(hidden)]
pub mod selfcheck;
pub mod socket;
mod spec;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bgp_proto::Notification;
use bgp_proto::fsm::{self, ConnId, Direction, Negotiated, State};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, warn};

use crate::bfd::driver::BfdStatus;
use crate::report::logging::{self, Kind};
pub use crate::speaker::pick_next_hops;
use crate::speaker::{NextHops, PeerTable};
pub use peer_session::{Input, InterfaceAddresses, Output, PeerSession};
pub use spec::{Interface, PeerSpec, socket_options};

pub use crate::speaker::OUTPUT_LIMIT;

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
    /// A write completed on the connection: output held back may go now.
    Written(ConnId),
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
    /// The session's status, published by its task after each input (and
    /// by its connections' writers as NOTIFICATIONs go out); it stays
    /// readable after the session ends.
    pub status: watch::Receiver<PeerRuntime>,
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

    /// The session's status as it last published it.
    pub fn snapshot(&self) -> PeerRuntime {
        self.status.borrow().clone()
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
    spawn_with_bmp(spec, table, routes_ready, bfd, None)
}

/// [`spawn`], reporting to the BMP stations through `bmp` (RFC 7854):
/// the session only ever queues for them, never waits.
pub fn spawn_with_bmp(
    spec: PeerSpec,
    table: watch::Receiver<Arc<PeerTable>>,
    routes_ready: watch::Receiver<bool>,
    bfd: Option<watch::Receiver<BfdStatus>>,
    bmp: Option<crate::bmp::PeerTap>,
) -> PeerHandle {
    let (cmd_tx, cmd_rx) = mpsc::channel(COMMAND_QUEUE);
    let session = PeerSession::new(
        spec.clone(),
        Instant::now(),
        Box::new(|| holdfast_sockopt::interface_addresses().unwrap_or_default()),
    );
    let (status_tx, status) = watch::channel(session.status().clone());
    let mut driver = Driver::new(spec.clone(), session, table, routes_ready, status_tx);
    driver.bfd = bfd;
    driver.bmp = bmp;
    let task = tokio::spawn(driver.run(cmd_rx));
    PeerHandle {
        spec,
        status,
        cmd: cmd_tx,
        task,
    }
}

struct ConnIo {
    /// Whole messages to write. Unbounded as a channel, bounded in bytes:
    /// the session produces bulk output only while what it queued and
    /// the socket has not taken yet is under [`OUTPUT_LIMIT`].
    writer: mpsc::UnboundedSender<Queued>,
    queue: Arc<OutQueue>,
    /// Dropped when the session lets the connection go: its reader then
    /// stops handing octets to the session and lingers ([`read_loop`]).
    _release: oneshot::Sender<()>,
    flushed: Option<oneshot::Receiver<()>>,
    /// The peer's end of the connection (BMP's Peer Up).
    remote: Option<SocketAddr>,
}

/// One whole message for a connection's writer, and the code and subcode
/// of a NOTIFICATION (counted once it is written).
type Queued = (Vec<u8>, Option<(u8, u8)>);

/// What a connection's writer has written, in octets, and how long it
/// may wait for the socket.
#[derive(Default)]
struct OutQueue {
    /// Written to the socket.
    written: AtomicU64,
    /// The RFC 9687 SendHoldTime in milliseconds (0 until the session
    /// sets it: [`DEFAULT_SEND_HOLD_TIME`]).
    send_hold_ms: AtomicU64,
}

impl OutQueue {
    fn send_hold(&self) -> Duration {
        match self.send_hold_ms.load(Ordering::Relaxed) {
            0 => DEFAULT_SEND_HOLD_TIME,
            ms => Duration::from_millis(ms),
        }
    }
}

/// A NOTIFICATION written to the socket, counted in the published status
/// by the writer once the write succeeded, so that the counters say what
/// went out (one that could not be written — the peer stopped reading — is
/// not counted). The session's own publications keep this count
/// ([`Driver::publish`]).
fn count_written(status: &watch::Sender<PeerRuntime>, code: u8, subcode: u8) {
    status.send_modify(|rt| {
        let sent = &mut rt.stats.notifications_sent;
        match sent
            .iter_mut()
            .find(|(c, s, _)| *c == code && *s == subcode)
        {
            Some(e) => e.2 += 1,
            None => sent.push((code, subcode, 1)),
        }
    });
}

/// The IO around one [`PeerSession`]: its connections (reader and writer
/// tasks), the connection attempt, the timer, the channels from the
/// daemon, and the status view it publishes.
struct Driver {
    spec: PeerSpec,
    session: PeerSession,
    /// The peer's BFD session, when it has one.
    bfd: Option<watch::Receiver<BfdStatus>>,
    table: watch::Receiver<Arc<PeerTable>>,
    /// The daemon's table is complete: End-of-RIB may go out.
    routes_ready: watch::Receiver<bool>,
    /// Where the session's status is published.
    status: watch::Sender<PeerRuntime>,
    io_tx: mpsc::Sender<Io>,
    io_rx: mpsc::Receiver<Io>,
    conns: HashMap<ConnId, ConnIo>,
    next_conn: u64,
    connecting: Option<JoinHandle<()>>,
    /// The BMP stations' reporter, when there are stations.
    bmp: Option<crate::bmp::PeerTap>,
    /// The connection last written to (the established one, for BMP).
    last_written: Option<ConnId>,
}

impl Driver {
    fn new(
        spec: PeerSpec,
        session: PeerSession,
        table: watch::Receiver<Arc<PeerTable>>,
        routes_ready: watch::Receiver<bool>,
        status: watch::Sender<PeerRuntime>,
    ) -> Self {
        let (io_tx, io_rx) = mpsc::channel(READ_QUEUE * 2);
        Driver {
            spec,
            session,
            bfd: None,
            table,
            routes_ready,
            status,
            io_tx,
            io_rx,
            conns: HashMap::new(),
            next_conn: 1,
            connecting: None,
            bmp: None,
            last_written: None,
        }
    }

    fn name(&self) -> &str {
        &self.spec.peer.name
    }

    async fn run(mut self, mut cmds: mpsc::Receiver<Command>) {
        let bfd_up = self
            .bfd
            .as_ref()
            .is_some_and(|b| b.borrow().state == crate::bfd::packet::State::Up);
        self.step(Input::Start { bfd_up });
        let mut timer = deadline::Deadline::new();
        loop {
            let sleep = timer.until(self.session.next_deadline());
            tokio::select! {
                cmd = cmds.recv() => match cmd {
                    Some(Command::Incoming(stream)) => self.incoming(stream),
                    Some(Command::EndRestart) => self.step(Input::EndRestart),
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
                    let table = self.table.borrow_and_update().clone();
                    self.step(Input::Table(table));
                }
                Ok(()) = self.routes_ready.changed(), if self.session.end_of_rib_pending() => {
                    let ready = *self.routes_ready.borrow_and_update();
                    self.step(Input::RoutesReady(ready));
                }
                Some(changed) = async { match self.bfd.as_mut() { Some(b) => Some(b.changed().await), None => None } }, if self.bfd.is_some() => {
                    if changed.is_err() {
                        self.bfd = None;
                    }
                    // No BFD any more counts as up.
                    let (up, diag) = match &self.bfd {
                        Some(b) => {
                            let s = b.borrow();
                            (s.state == crate::bfd::packet::State::Up, s.diag.as_str().to_owned())
                        }
                        None => (true, "gone".to_owned()),
                    };
                    self.step(Input::Bfd { up, diag });
                }
                () = async { match self.bmp.as_mut() { Some(t) => t.resync_wanted().await, None => std::future::pending().await } } => self.bmp_resync(),
                () = sleep => self.step(Input::Timer),
            }
        }
    }

    /// Hands the session one input (after the latest table, whether it is
    /// complete, and how far each connection's writer has got), carries
    /// out what it asks, and publishes its status.
    fn step(&mut self, input: Input) {
        if self.table.has_changed().unwrap_or(false) {
            self.session
                .set_table(self.table.borrow_and_update().clone());
        }
        self.session.set_routes_ready(*self.routes_ready.borrow());
        for (&id, c) in &self.conns {
            self.session
                .set_written(id, c.queue.written.load(Ordering::Relaxed));
        }
        let by_peer = matches!(input, Input::Closed { .. });
        let received_before = self
            .bmp
            .is_some()
            .then(|| self.session.status().stats.notifications_received.clone());
        let out = self.session.handle(Instant::now(), input);
        let established = self.session.state() == State::Established;
        for o in out {
            match o {
                Output::Connect => self.connect(),
                Output::AbortConnect => {
                    if let Some(h) = self.connecting.take() {
                        h.abort();
                    }
                }
                Output::Write {
                    conn,
                    bytes,
                    notification,
                } => {
                    self.last_written = Some(conn);
                    if self.bmp.is_some() {
                        self.bmp_written(conn, established, &bytes);
                    }
                    if let Some(c) = self.conns.get(&conn) {
                        let _ = c.writer.send((bytes, notification));
                    }
                }
                // Dropping the writer's sender flushes what is queued and
                // shuts the socket's sending side down; the reader lingers.
                Output::Close { conn } => {
                    self.conns.remove(&conn);
                }
                Output::SendHoldTime { conn, time } => {
                    if let Some(c) = self.conns.get(&conn) {
                        c.queue
                            .send_hold_ms
                            .store(time.as_millis() as u64, Ordering::Relaxed);
                    }
                }
            }
        }
        if let Some(before) = received_before {
            self.bmp_after(established, by_peer, &before);
        }
        self.publish();
    }

    /// BMP: a message queued on `conn`; the Peer Up goes before the first
    /// UPDATE of an established session.
    fn bmp_written(&mut self, conn: ConnId, established: bool, bytes: &[u8]) {
        let up = self.bmp.as_ref().is_some_and(|t| t.is_up());
        if established && !up && crate::bmp::message::bgp_type(bytes) == Some(2) {
            self.bmp_up(conn);
        }
        if let Some(t) = self.bmp.as_mut() {
            t.written(bytes);
        }
    }

    /// BMP: the session's state after a step: Peer Up or Peer Down (with
    /// the NOTIFICATION the peer sent, when one ended it), and the
    /// Adj-RIB-Out's size.
    fn bmp_after(&mut self, established: bool, by_peer: bool, before: &[(u8, u8, u64)]) {
        let up = self.bmp.as_ref().is_some_and(|t| t.is_up());
        if established && !up {
            if let Some(conn) = self.last_written {
                self.bmp_up(conn);
            }
        } else if !established && up {
            let after = &self.session.status().stats.notifications_received;
            let received = after
                .iter()
                .find(|(c, s, n)| {
                    !before
                        .iter()
                        .any(|(bc, bs, bn)| bc == c && bs == s && bn == n)
                })
                .and_then(|&(code, subcode, _)| {
                    bgp_proto::Message::Notification(Notification {
                        code,
                        subcode,
                        data: Vec::new(),
                    })
                    .encode(&bgp_proto::Context::default())
                    .ok()
                });
            if let Some(t) = self.bmp.as_mut() {
                t.down(received, by_peer);
            }
        }
        let (v4, v6) = self.session.status().advertised_counts;
        if let Some(t) = self.bmp.as_mut() {
            t.counts(v4, v6);
        }
    }

    fn bmp_up(&mut self, conn: ConnId) {
        let st = self.session.status();
        let Some(n) = &st.negotiated else { return };
        let encode = |o: &bgp_proto::Open| {
            bgp_proto::Message::Open(o.clone())
                .encode(&n.tx)
                .unwrap_or_default()
        };
        let remote = self.conns.get(&conn).and_then(|c| c.remote);
        let up = crate::bmp::Up {
            peer_address: remote.map_or(self.spec.address, |r| r.ip()),
            peer_asn: n.peer_asn,
            peer_id: n.peer_id,
            four_octet_as: n.four_octet_as,
            local: st
                .local_address
                .unwrap_or_else(|| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0)),
            remote_port: remote.map_or(0, |r| r.port()),
            sent_open: encode(&n.local_open),
            received_open: encode(&n.peer_open),
        };
        if let Some(t) = self.bmp.as_mut() {
            t.up(up);
        }
    }

    /// BMP: a station (re)connected: it is sent this session's state.
    fn bmp_resync(&mut self) {
        let session = &self.session;
        if let Some(t) = self.bmp.as_mut() {
            t.resync(|| session.adj_rib_out_messages());
        }
    }

    /// Publishes the session's status, with the NOTIFICATIONs counted as
    /// the writers counted them: those written.
    fn publish(&self) {
        self.status.send_modify(|rt| {
            let written = std::mem::take(&mut rt.stats.notifications_sent);
            rt.clone_from(self.session.status());
            rt.stats.notifications_sent = written;
        });
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
        let (conn, local) = self.register(stream);
        debug!(peer = %self.name(), conn = conn.0, "connection from {peer}");
        self.step(Input::Connected {
            conn,
            direction: Direction::Incoming,
            local,
        });
    }

    /// Starts the reader and writer tasks of a connection.
    fn register(&mut self, stream: TcpStream) -> (ConnId, SocketAddr) {
        let id = ConnId(self.next_conn);
        self.next_conn += 1;
        let local = stream
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        let remote = stream.peer_addr().ok();
        let (rd, wr) = stream.into_split();
        let (release, released) = oneshot::channel();
        tokio::spawn(read_loop(id, rd, self.io_tx.clone(), released));
        let (wtx, wrx) = mpsc::unbounded_channel::<Queued>();
        let (flushed_tx, flushed_rx) = oneshot::channel();
        let queue = Arc::new(OutQueue::default());
        tokio::spawn(write_loop(
            id,
            wr,
            wrx,
            WriterShared {
                io: self.io_tx.clone(),
                queue: queue.clone(),
                status: self.status.clone(),
            },
            flushed_tx,
        ));
        self.conns.insert(
            id,
            ConnIo {
                writer: wtx,
                queue,
                _release: release,
                flushed: Some(flushed_rx),
                remote,
            },
        );
        (id, local)
    }

    fn io(&mut self, io: Io) {
        match io {
            Io::Connected(stream) => {
                self.connecting = None;
                let to = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let (conn, local) = self.register(stream);
                debug!(peer = %self.name(), conn = conn.0, "connected to {to}");
                self.step(Input::Connected {
                    conn,
                    direction: Direction::Outgoing,
                    local,
                });
            }
            Io::ConnectFailed(why) => {
                self.connecting = None;
                self.step(Input::ConnectFailed(why));
            }
            Io::Read(conn, bytes) => self.step(Input::Data { conn, bytes }),
            Io::Written(conn) => {
                let total = self
                    .conns
                    .get(&conn)
                    .map_or(0, |c| c.queue.written.load(Ordering::Relaxed));
                self.step(Input::Written { conn, total });
            }
            Io::SendStalled(conn) => self.step(Input::SendStalled { conn }),
            Io::Closed(conn, why) => self.step(Input::Closed { conn, why }),
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

    /// Ends the session as `how` says, then waits (at most 2 s for each)
    /// until the connections it had have written what was queued.
    async fn stop(&mut self, how: StopHow) {
        let flushes: Vec<oneshot::Receiver<()>> = self
            .conns
            .values_mut()
            .filter_map(|c| c.flushed.take())
            .collect();
        self.step(Input::Stop(how));
        if let Some(h) = self.connecting.take() {
            h.abort();
        }
        for f in flushes {
            let _ = tokio::time::timeout(Duration::from_secs(2), f).await;
        }
    }
}

/// What a connection's writer shares with the session.
struct WriterShared {
    io: mpsc::Sender<Io>,
    queue: Arc<OutQueue>,
    /// The session's status: the NOTIFICATIONs written are counted in it.
    status: watch::Sender<PeerRuntime>,
}

/// Reads a connection and hands the octets to the session, until the
/// peer closes it, it fails, or the session releases it (`released`).
async fn read_loop(
    id: ConnId,
    mut rd: tokio::net::tcp::OwnedReadHalf,
    io: mpsc::Sender<Io>,
    mut released: oneshot::Receiver<()>,
) {
    let mut buf = vec![0u8; 65536];
    loop {
        let read = tokio::select! {
            biased;
            _ = &mut released => break,
            read = rd.read(&mut buf) => read,
        };
        match read {
            Ok(0) => {
                let _ = io.send(Io::Closed(id, "closed by the peer".into())).await;
                return;
            }
            Ok(n) => {
                // Waits while the session is behind: TCP flow
                // control then holds the peer back.
                if io.send(Io::Read(id, buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
            Err(e) => {
                let _ = io.send(Io::Closed(id, e.to_string())).await;
                return;
            }
        }
    }
    linger(rd, &mut buf).await;
}

/// How long a released connection's reader waits for the peer to close
/// its side.
const LINGER: Duration = Duration::from_secs(5);

/// A connection the session let go of: the writer flushes what was queued
/// (a NOTIFICATION, RFC 4271 §6 and §8.2.1.2: sent, then the connection
/// closed) and sends FIN. What the peer still sends meanwhile — the
/// KEEPALIVE that answers our OPEN, say — is read and dropped until the
/// peer closes too, or for at most [`LINGER`]. Closing the socket with
/// octets unread, or while they still arrive, makes the kernel answer with
/// a reset: the peer may lose the NOTIFICATION it has not read yet, and
/// finds its socket gone (after a collision, FRR 8.4 then drops the
/// session it had kept, since it can no longer read the address of the
/// connection it closes).
async fn linger(mut rd: tokio::net::tcp::OwnedReadHalf, buf: &mut [u8]) {
    let until = tokio::time::Instant::now() + LINGER;
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, rd.read(buf)).await {
        if n == 0 {
            return;
        }
    }
}

/// Writes what the session queues for a connection, within the RFC 9687
/// SendHoldTime, and counts the NOTIFICATIONs that were written.
async fn write_loop(
    id: ConnId,
    mut wr: tokio::net::tcp::OwnedWriteHalf,
    mut wrx: mpsc::UnboundedReceiver<Queued>,
    shared: WriterShared,
    flushed_tx: oneshot::Sender<()>,
) {
    let WriterShared {
        io,
        queue: q,
        status,
    } = shared;
    // Messages queued together go out in one write.
    let mut batch = Vec::with_capacity(65536);
    let mut notifications: Vec<(u8, u8)> = Vec::new();
    while let Some(first) = wrx.recv().await {
        batch.clear();
        notifications.clear();
        let add = |batch: &mut Vec<u8>, n: &mut Vec<(u8, u8)>, (m, notification): &Queued| {
            n.extend(*notification);
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
                    count_written(&status, code, subcode);
                }
                let _ = io.try_send(Io::Written(id));
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
                while let Some((m, _)) = wrx.recv().await {
                    q.written.fetch_add(m.len() as u64, Ordering::Relaxed);
                }
                return;
            }
        }
    }
    // The session dropped its sender: everything queued is out.
    let _ = wr.shutdown().await;
    let _ = flushed_tx.send(());
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

#[cfg(test)]
mod tests;

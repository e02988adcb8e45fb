//! The session driver: one tokio task per peer around the sans-IO FSM of
//! `bgp_proto::fsm`. It owns the sockets and the timers, feeds bytes and
//! instants to the FSM and carries out what it asks, and feeds the peer's
//! speaker ([`crate::speaker::PeerSpeaker`], sans IO as well: the
//! Adj-RIB-Out, MRAI, End-of-RIB and route refresh) the desired table the
//! daemon publishes, handing what it outputs to the FSM to send.

mod deadline;
pub mod socket;
mod spec;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bgp_proto::consts::notify::cease;
use bgp_proto::fsm::{self, Action, ConnId, Direction, Event, Negotiated, Session, State};
use bgp_proto::{Family, Message, Notification};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::bfd::driver::BfdStatus;
use crate::logging::{self, DownLog, DownVerdict, Kind};
pub use crate::speaker::pick_next_hops;
use crate::speaker::{Budget, EncodeParams, NextHops, Output, PeerSpeaker, PeerTable, SessionUp};
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
    writer: mpsc::UnboundedSender<Queued>,
    queue: Arc<OutQueue>,
    /// Dropped when the session lets the connection go: its reader then
    /// stops handing octets to the session and lingers ([`read_loop`]).
    _release: oneshot::Sender<()>,
    local: SocketAddr,
    flushed: Option<oneshot::Receiver<()>>,
}

/// One whole message for a connection's writer, and the code and subcode
/// of a NOTIFICATION (counted once it is written).
type Queued = (Vec<u8>, Option<(u8, u8)>);

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

/// The established session, as the driver needs it.
struct Up {
    negotiated: Negotiated,
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
    /// What the peer is sent: Adj-RIB-Out, MRAI, End-of-RIB, route refresh.
    speaker: PeerSpeaker,
    table: watch::Receiver<Arc<PeerTable>>,
    /// The daemon's table is complete: End-of-RIB may go out.
    routes_ready: watch::Receiver<bool>,
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
            speaker: PeerSpeaker::new(spec.peer.min_route_advertisement_interval),
            spec,
            bfd: None,
            started: false,
            bfd_was_up: false,
            table,
            routes_ready,
            runtime,
            io_tx,
            io_rx,
            conns: HashMap::new(),
            next_conn: 1,
            connecting: None,
            down_log: DownLog::new(crate::logging::DOWN_SUMMARY_EVERY),
            stopping: None,
            up: None,
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
        let mut timer = deadline::Deadline::new();
        loop {
            let deadline = [self.fsm.next_deadline(), self.speaker.next_deadline()]
                .into_iter()
                .flatten()
                .min();
            let sleep = timer.until(deadline);
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
                    self.speaker.set_table(self.table.borrow_and_update().clone());
                }
                Ok(()) = self.routes_ready.changed(), if self.speaker.end_of_rib_pending() => {}
                Some(changed) = async { match self.bfd.as_mut() { Some(b) => Some(b.changed().await), None => None } }, if self.bfd.is_some() => {
                    if changed.is_err() {
                        self.bfd = None;
                    }
                    self.follow_bfd();
                }
                () = sleep => self.event(Event::Tick),
            }
            self.poll_speaker();
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
                written: self.written.clone(),
                runtime: self.runtime.clone(),
            },
            flushed_tx,
        ));
        self.conns.insert(
            id,
            ConnIo {
                writer: wtx,
                queue,
                _release: release,
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
                let to = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                let id = self.register(stream);
                debug!(peer = %self.name(), conn = id.0, "connected to {to}");
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

    /// Queues one whole message for the connection's writer; a
    /// NOTIFICATION's code and subcode go beside it, to be counted once
    /// written.
    fn write(&self, conn: ConnId, bytes: Vec<u8>, notification: Option<(u8, u8)>) {
        if let Some(c) = self.conns.get(&conn) {
            let len = bytes.len() as u64;
            if c.writer.send((bytes, notification)).is_ok() {
                c.queue.enqueued.fetch_add(len, Ordering::Relaxed);
            }
        }
    }

    fn close(&mut self, conn: ConnId) {
        // Dropping the writer's sender flushes what is queued and shuts
        // the socket's sending side down; the reader lingers.
        self.conns.remove(&conn);
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
                // The FSM's own messages are encoded here, at the edge.
                Action::Send { conn, message, ctx } => match message.encode(&ctx) {
                    Ok(bytes) => {
                        let notification = match &message {
                            Message::Notification(n) => Some((n.code, n.subcode)),
                            _ => None,
                        };
                        self.write(conn, bytes, notification);
                    }
                    // The FSM cuts a NOTIFICATION to fit, and an OPEN or
                    // KEEPALIVE fits 4096 octets: this cannot happen, and
                    // is not papered over if it does.
                    Err(e) => error!(peer = %self.name(), "{} not sent: {e}", message.name()),
                },
                Action::SendEncoded { conn, bytes } => self.write(conn, bytes, None),
                Action::Close { conn } => self.close(conn),
                Action::StateChange { from, to, reason } => self.state_changed(from, to, &reason),
                Action::Up { conn, negotiated } => self.session_up(conn, *negotiated),
                Action::Down { reason } => self.session_down(&reason),
                Action::NotificationSent { conn, notification } => {
                    let what = format!("sent NOTIFICATION: {}", notification.describe());
                    self.notification_line(Some(conn), ends_session, &notification, &what);
                }
                Action::NotificationReceived { notification } => {
                    let what = format!("received NOTIFICATION: {}", notification.describe());
                    self.notification_line(None, ends_session, &notification, &what);
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
                Action::RouteRefresh { family, enhanced } => {
                    let out = self.speaker.route_refresh(family, enhanced, self.budget());
                    self.speaker_output(out);
                }
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

    /// The FSM moved between states: the status view follows.
    fn state_changed(&mut self, from: State, to: State, reason: &fsm::Reason) {
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

    /// The session left Established: said in one line (why, when we
    /// brought it about), and nothing is advertised any more.
    fn session_down(&mut self, reason: &fsm::Reason) {
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
        self.speaker.down();
        let mut rt = self.runtime.lock().expect("peer runtime lock");
        rt.last_error = Some(reason.to_string());
        rt.negotiated = None;
        rt.advertised = Arc::default();
        rt.advertised_counts = (0, 0);
        rt.end_of_rib_sent = false;
    }

    /// A NOTIFICATION sent or received: said by the Down line when it ends
    /// the session; a failure to reach the session when it is not up; and
    /// otherwise a line of its own, limited like anything a peer can
    /// repeat. Collision resolution (RFC 4271 §6.8) closing the second of
    /// two connections is routine: debug only.
    /// `conn`: the connection a NOTIFICATION we sent went out on (which of
    /// two a collision closed is in the debug line).
    fn notification_line(
        &mut self,
        conn: Option<ConnId>,
        ends_session: bool,
        n: &Notification,
        what: &str,
    ) {
        let collision = n.code == bgp_proto::consts::notify::CEASE
            && n.subcode == cease::CONNECTION_COLLISION_RESOLUTION;
        if ends_session || collision {
            debug!(peer = %self.name(), conn = conn.map(|c| c.0), "{what}");
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
        let mut next_hops = local
            .map(|l| {
                next_hops(
                    l.ip(),
                    self.spec.address,
                    self.spec.interface.as_ref().map(|i| i.name.as_str()),
                )
            })
            .unwrap_or_default();
        next_hops.ipv4_via_ipv6 = negotiated.ipv4_over_ipv6_next_hop;
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
        {
            let mut rt = self.runtime.lock().expect("peer runtime lock");
            rt.negotiated = Some(negotiated.clone());
            rt.local_address = local;
            rt.end_of_rib_sent = false;
        }
        self.up = Some(Up { negotiated });
        self.follow_table();
        let out = self.speaker.up(
            Instant::now(),
            SessionUp { params, families },
            self.budget(),
        );
        self.speaker_output(out);
    }

    /// The desired table, if the daemon published a new one, and whether
    /// it is complete.
    fn follow_table(&mut self) {
        if self.table.has_changed().unwrap_or(false) {
            self.speaker
                .set_table(self.table.borrow_and_update().clone());
        }
        self.speaker.set_routes_ready(*self.routes_ready.borrow());
    }

    /// What the speaker may send now (held back changes whose MRAI
    /// expired, End-of-RIB once the table is complete, ROUTE-REFRESH
    /// answers that waited for room).
    fn poll_speaker(&mut self) {
        self.follow_table();
        let out = self.speaker.poll(Instant::now(), self.budget());
        self.speaker_output(out);
    }

    /// Hands the speaker's messages to the FSM, in order, and says what
    /// they were.
    fn speaker_output(&mut self, out: Vec<Output>) {
        for o in out {
            match &o {
                Output::Updates {
                    messages,
                    announced,
                    withdrawn,
                    unsendable,
                } => {
                    if let Some(first) = unsendable.first() {
                        warn!(peer = %self.name(), count = unsendable.len(), %first, "routes not sent: no next hop of their family on this session");
                    }
                    debug!(peer = %self.name(), announced, withdrawn, messages = messages.len(), "UPDATEs");
                }
                Output::EndOfRib { .. } => debug!(peer = %self.name(), "End-of-RIB"),
                Output::EndOfRibWaits => {
                    info!(peer = %self.name(), "End-of-RIB waits for the source's first complete view");
                    continue;
                }
                Output::Refresh {
                    family, enhanced, ..
                } => {
                    if let Some(note) = logging::allow(Kind::RouteRefresh, self.name()) {
                        info!(peer = %self.name(), family = %family, enhanced, "answering ROUTE-REFRESH{note}");
                    }
                }
            }
            let eor = matches!(o, Output::EndOfRib { .. });
            self.event(Event::SendUpdates(o.into_messages()));
            if eor {
                self.runtime
                    .lock()
                    .expect("peer runtime lock")
                    .end_of_rib_sent = true;
                // RFC 4724 §4.1: the restart is over for this peer once it
                // has our End-of-RIB; later OPENs go without R.
                self.end_restart();
            }
        }
        self.publish_rib();
    }

    fn end_restart(&mut self) {
        if self.spec.restarting {
            self.spec.restarting = false;
            self.fsm.set_capabilities(self.spec.capabilities());
            self.runtime.lock().expect("peer runtime lock").restarting = false;
        }
    }

    fn publish_rib(&self) {
        let mut rt = self.runtime.lock().expect("peer runtime lock");
        rt.advertised = self.speaker.advertised();
        rt.advertised_counts = self.speaker.advertised_counts();
    }

    /// How far the established connection's output has got.
    fn budget(&self) -> Budget {
        self.fsm
            .established()
            .and_then(|(conn, _)| self.conns.get(&conn))
            .map_or_else(Budget::default, |c| Budget {
                enqueued: c.queue.enqueued.load(Ordering::Relaxed),
                written: c.queue.written.load(Ordering::Relaxed),
            })
    }

    async fn stop(&mut self, how: StopHow) {
        let notification = match &how {
            StopHow::Graceful => None,
            StopHow::Withdraw(message) => {
                // Withdraw everything first, then say why we leave.
                if let Some(messages) = self.speaker.withdraw_all() {
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

/// What a connection's writer shares with the session.
struct WriterShared {
    io: mpsc::Sender<Io>,
    queue: Arc<OutQueue>,
    written: Written,
    runtime: Arc<Mutex<PeerRuntime>>,
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
        written,
        runtime,
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

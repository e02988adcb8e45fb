//! One peer's session, sans IO: the FSM (`bgp_proto::fsm::Session`), the
//! peer's speaker ([`PeerSpeaker`]: Adj-RIB-Out, MRAI, End-of-RIB, route
//! refresh) and the graceful-restart R bit, with every decision between
//! them — which families go on a session, internal or external encoding,
//! the next hops, the whole table then End-of-RIB on each new session, the
//! R bit cleared once End-of-RIB is out, what a stop or BFD going down
//! sends, what each FSM `Action` becomes.
//!
//! No tokio, no sockets, no clock: the driver ([`super`]) hands it
//! [`Input`]s with the current `Instant` — bytes read from a connection,
//! connections up, failed or closed, the desired table, the daemon's
//! commands, BFD's state, the timer — and carries out the [`Output`]s it
//! returns: connect, write these bytes on that connection, close it. What
//! the rest of the daemon sees of the session is [`PeerSession::status`],
//! which the driver publishes after each input, and the driver's timer
//! waits for [`PeerSession::next_deadline`].
//!
//! Two things reach beyond plain values, both on purpose:
//! - log lines are written here through `tracing` (side effects only; the
//!   rate limit of lines a peer can repeat, `logging::allow`, reads the
//!   process clock for its token buckets and decides nothing else);
//! - the node's interface addresses, from which a session's next hops are
//!   picked when it comes up (RFC 2545 §3), are asked of the
//!   [`InterfaceAddresses`] given at construction: the driver gives the
//!   kernel's, a test or a simulation its own.
//!
//! ```text
//!  Start / Bfd / EndRestart / Stop ─┐                      ┌─▶ Output::Connect / AbortConnect
//!  Connected / ConnectFailed ───────┤                      ├─▶ Output::Write { conn, bytes }
//!  Data / Closed / SendStalled ─────┼─▶ PeerSession ───────┼─▶ Output::Close { conn }
//!  Written (octets out) ────────────┤   (now)              ├─▶ Output::SendHoldTime
//!  Table / RoutesReady / Timer ─────┘                      └─▶ status(), next_deadline()
//! ```

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::consts::notify::cease;
use bgp_proto::fsm::{self, Action, ConnId, Direction, Event, Negotiated, Session, State};
use bgp_proto::{Family, Message, Notification};
use tracing::{debug, error, info, warn};

/// The log target of the session's lines: the session module's, as the
/// documented log lines and `--log holdfast::session=debug` name it, although
/// they are written here.
const LOG_TARGET: &str = "holdfast::session";

use super::{PeerRuntime, PeerSpec, StopHow, hard_reset, send_hold_time, shutdown_notification};
use crate::report::logging::{self, DownLog, DownVerdict, Kind};
use crate::speaker::{
    Budget, EncodeParams, Output as SpeakerOutput, PeerSpeaker, PeerTable, SessionUp,
    pick_next_hops,
};

/// Where a session finds the node's interface addresses when it comes up
/// (its next hops are picked from them).
pub type InterfaceAddresses = Box<dyn Fn() -> Vec<holdfast_sockopt::InterfaceAddress> + Send>;

/// What happened, as plain values.
#[derive(Debug)]
pub enum Input {
    /// The session starts (ManualStart); `bfd_up`: the peer has a BFD
    /// session and it is Up now.
    Start { bfd_up: bool },
    /// A TCP connection is up (ours, or one the peer opened that passed
    /// the socket checks), with the local address it is bound to. `conn`
    /// is the driver's name for it, new for each connection.
    Connected {
        conn: ConnId,
        direction: Direction,
        local: SocketAddr,
    },
    /// Our connection attempt failed.
    ConnectFailed(String),
    /// Octets read from a connection.
    Data { conn: ConnId, bytes: Vec<u8> },
    /// The peer closed the connection, or it failed.
    Closed { conn: ConnId, why: String },
    /// No write progress on the connection for the SendHoldTime (RFC 9687).
    SendStalled { conn: ConnId },
    /// Octets written to the connection's socket so far (all of them, not
    /// the increase): held back output may go.
    Written { conn: ConnId, total: u64 },
    /// A new desired table from the daemon.
    Table(Arc<PeerTable>),
    /// Whether the source's first complete view is in (End-of-RIB waits).
    RoutesReady(bool),
    /// BFD's state changed (`up`: no BFD any more counts as up) with its
    /// diagnostic.
    Bfd { up: bool, diag: String },
    /// The restart is over (its time passed): later OPENs go without R.
    EndRestart,
    /// The daemon ends the session.
    Stop(StopHow),
    /// The deadline the driver waited for ([`PeerSession::next_deadline`]).
    Timer,
}

/// What the driver does, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Open a TCP connection to the peer (the spec's address, port and
    /// socket options, for at most its ConnectRetryTime); answer with
    /// [`Input::Connected`] or [`Input::ConnectFailed`].
    Connect,
    /// Give up the connection attempt in progress.
    AbortConnect,
    /// Queue one whole message on the connection; `notification`: the code
    /// and subcode of a NOTIFICATION, counted once written.
    Write {
        conn: ConnId,
        bytes: Vec<u8>,
        notification: Option<(u8, u8)>,
    },
    /// Flush what is queued on the connection, then close it.
    Close { conn: ConnId },
    /// RFC 9687 SendHoldTime of the connection from now on.
    SendHoldTime { conn: ConnId, time: Duration },
}

/// A session end we cause ourselves.
enum Stopping {
    /// The daemon asked (shutdown, reload): it logs that itself.
    Planned,
    /// BFD went down (its diagnostic).
    Bfd(String),
}

/// A connection as the session counts it.
struct Conn {
    local: SocketAddr,
    /// Octets queued on it (every [`Output::Write`]).
    enqueued: u64,
    /// Octets written to its socket ([`Input::Written`]).
    written: u64,
}

/// One peer's session, sans IO.
pub struct PeerSession {
    spec: PeerSpec,
    fsm: Session,
    /// What the peer is sent: Adj-RIB-Out, MRAI, End-of-RIB, route refresh.
    speaker: PeerSpeaker,
    addresses: InterfaceAddresses,
    /// ManualStart given (and not stopped by BFD since).
    started: bool,
    /// BFD was Up at its last change.
    bfd_was_up: bool,
    /// A connection attempt is in progress (Connect sent, not answered).
    connecting: bool,
    conns: HashMap<ConnId, Conn>,
    /// Failures while the session is not up: the first is logged, then a
    /// summary every few minutes, so that a peer that stays unreachable
    /// does not fill the log every ConnectRetryTime.
    down_log: DownLog,
    /// Why the next Down happens, when we bring it about (the FSM only
    /// sees a ManualStop).
    stopping: Option<Stopping>,
    /// What the established session negotiated.
    up: Option<Negotiated>,
    status: PeerRuntime,
    /// The instant of the input being handled.
    now: Instant,
    out: Vec<Output>,
}

impl PeerSession {
    /// The session of `spec`'s peer, Idle until [`Input::Start`].
    pub fn new(spec: PeerSpec, now: Instant, addresses: InterfaceAddresses) -> Self {
        let seed = spec.fsm_config().jitter_seed;
        Self::with_jitter_seed(spec, now, addresses, seed)
    }

    /// As [`PeerSession::new`], with the seed of the FSM's RFC 4271 §10
    /// jitter given rather than taken from the peer's name and the process
    /// id: a simulation replays a run with the same timers.
    pub fn with_jitter_seed(
        spec: PeerSpec,
        now: Instant,
        addresses: InterfaceAddresses,
        jitter_seed: u64,
    ) -> Self {
        PeerSession {
            fsm: Session::new(bgp_proto::fsm::Config {
                jitter_seed,
                ..spec.fsm_config()
            }),
            speaker: PeerSpeaker::new(spec.peer.min_route_advertisement_interval),
            status: PeerRuntime {
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
            },
            spec,
            addresses,
            started: false,
            bfd_was_up: false,
            connecting: false,
            conns: HashMap::new(),
            down_log: DownLog::new(logging::DOWN_SUMMARY_EVERY),
            stopping: None,
            up: None,
            now,
            out: Vec::new(),
        }
    }

    fn name(&self) -> &str {
        &self.spec.peer.name
    }

    /// Handles one input at `now`: what the driver is to do, in order.
    /// After every input but [`Input::Stop`], the speaker says what may go
    /// now (changes the MRAI held back, End-of-RIB once the table is
    /// complete, ROUTE-REFRESH answers that waited for room).
    pub fn handle(&mut self, now: Instant, input: Input) -> Vec<Output> {
        self.now = now;
        let mut poll = true;
        match input {
            Input::Start { bfd_up } => self.start(bfd_up),
            Input::Connected {
                conn,
                direction,
                local,
            } => {
                if direction == Direction::Outgoing {
                    self.connecting = false;
                }
                self.conns.insert(
                    conn,
                    Conn {
                        local,
                        enqueued: 0,
                        written: 0,
                    },
                );
                self.event(Event::TcpConnected { conn, direction });
            }
            Input::ConnectFailed(why) => {
                self.connecting = false;
                self.connect_failed(why);
                self.event(Event::TcpConnectFailed);
            }
            Input::Data { conn, bytes } => {
                if self.conns.contains_key(&conn) {
                    self.event(Event::Data { conn, bytes });
                }
            }
            Input::Closed { conn, why } => {
                if self.conns.contains_key(&conn) {
                    debug!(target: LOG_TARGET, peer = %self.name(), conn = conn.0, "connection closed: {why}");
                    self.close(conn);
                    if self.fsm.state() >= State::OpenSent {
                        self.set_error(format!("TCP connection lost: {why}"));
                    }
                    self.event(Event::TcpClosed { conn });
                }
            }
            Input::SendStalled { conn } => {
                if self.conns.contains_key(&conn) {
                    self.set_error("the peer stopped reading (send hold timer expired)".into());
                    self.event(Event::SendHoldTimerExpired { conn });
                }
            }
            Input::Written { conn, total } => self.set_written(conn, total),
            Input::Table(table) => self.set_table(table),
            Input::RoutesReady(ready) => self.set_routes_ready(ready),
            Input::Bfd { up, diag } => self.follow_bfd(up, &diag),
            Input::EndRestart => self.end_restart(),
            Input::Stop(how) => {
                self.stop(how);
                poll = false;
            }
            Input::Timer => self.event(Event::Tick),
        }
        if poll {
            let out = self.speaker.poll(self.now, self.budget());
            self.speaker_output(out);
        }
        self.status.stats = self.fsm.stats().clone();
        std::mem::take(&mut self.out)
    }

    /// A new desired table, without an input of its own: it goes out with
    /// the next [`PeerSession::handle`] (the driver hands over the latest
    /// one before each input, so that a session coming up sends it).
    pub fn set_table(&mut self, table: Arc<PeerTable>) {
        self.speaker.set_table(table);
    }

    /// Whether the source's first complete view is in, without an input
    /// of its own (as [`PeerSession::set_table`]).
    pub fn set_routes_ready(&mut self, ready: bool) {
        self.speaker.set_routes_ready(ready);
    }

    /// Octets written on `conn` so far, without an input of its own (as
    /// [`PeerSession::set_table`]).
    pub fn set_written(&mut self, conn: ConnId, total: u64) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.written = total;
        }
    }

    /// When [`Input::Timer`] is due: the FSM's next timer or the MRAI's.
    pub fn next_deadline(&self) -> Option<Instant> {
        [self.fsm.next_deadline(), self.speaker.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// The Adj-RIB-Out as UPDATEs, then End-of-RIB (for a BMP station that
    /// connects while the session is up); changes nothing.
    pub fn adj_rib_out_messages(&self) -> Vec<Vec<u8>> {
        self.speaker.adj_rib_out_messages()
    }

    /// What the rest of the daemon sees of the session. `stats` counts
    /// the NOTIFICATIONs the FSM sent; the driver replaces them by those
    /// its writers got onto the wire.
    pub fn status(&self) -> &PeerRuntime {
        &self.status
    }

    /// The session is up and End-of-RIB waits (for the table to be
    /// complete, or for room in the output).
    pub fn end_of_rib_pending(&self) -> bool {
        self.speaker.end_of_rib_pending()
    }

    /// The FSM's state.
    pub fn state(&self) -> State {
        self.fsm.state()
    }

    /// The FSM itself, for the fuzz target's checks of what it holds
    /// ([`super::selfcheck`]).
    pub(crate) fn fsm(&self) -> &Session {
        &self.fsm
    }

    fn start(&mut self, bfd_up: bool) {
        info!(target: LOG_TARGET, peer = %self.name(), address = %self.spec.display_address(), asn = %self.spec.peer.asn, "session starting");
        // BGP starts at once; BFD, once it has been up, decides from then
        // on (RFC 5882 §4.3). Waiting for BFD before the first session
        // would deadlock with routers that start BFD only for established
        // BGP sessions — FRR does for multihop peers, whose local address
        // it learns from the TCP connection.
        self.bfd_was_up = bfd_up;
        self.event(Event::ManualStart);
        self.started = true;
    }

    /// BFD going down (from Up) tears the session down at once with
    /// Cease/BFD Down (RFC 9384), and BGP does not come back until BFD is up
    /// again (RFC 5882 §4.3).
    fn follow_bfd(&mut self, up: bool, diag: &str) {
        let was_up = std::mem::replace(&mut self.bfd_was_up, up);
        if up && !self.started {
            info!(target: LOG_TARGET, peer = %self.name(), "BFD is up again: starting the BGP session");
            self.started = true;
            self.event(Event::ManualStart);
        } else if !up && was_up && self.started {
            self.started = false;
            self.stopping = Some(Stopping::Bfd(diag.to_owned()));
            let n = Notification::cease(cease::BFD_DOWN);
            self.event(Event::ManualStop {
                notification: Some(n),
            });
            if let Some(Stopping::Bfd(_)) = self.stopping.take() {
                // Not Established: no Down line said it.
                warn!(target: LOG_TARGET, peer = %self.name(), address = %self.spec.address, %diag, "BFD went down: BGP waits for it");
            }
            self.set_error(format!("BFD down ({diag}): waiting for BFD to come back"));
        }
    }

    fn event(&mut self, e: Event) {
        let actions = self.fsm.handle(self.now, e);
        self.actions(actions);
    }

    /// Queues one whole message on a connection (counted into its budget).
    fn write(&mut self, conn: ConnId, bytes: Vec<u8>, notification: Option<(u8, u8)>) {
        if let Some(c) = self.conns.get_mut(&conn) {
            c.enqueued += bytes.len() as u64;
            self.out.push(Output::Write {
                conn,
                bytes,
                notification,
            });
        }
    }

    fn close(&mut self, conn: ConnId) {
        if self.conns.remove(&conn).is_some() {
            self.out.push(Output::Close { conn });
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
        match self.down_log.failure(self.now) {
            DownVerdict::First => warn!(target: LOG_TARGET,
                peer = %self.name(),
                %address,
                error = why,
                "session not established; retrying (repeats are summarised every {})",
                logging::duration(logging::DOWN_SUMMARY_EVERY)
            ),
            DownVerdict::Summary { failures, since } => warn!(target: LOG_TARGET,
                peer = %self.name(),
                %address,
                failures,
                last_error = why,
                "peer still down: {failures} failed attempts in {}",
                logging::duration(Duration::from_secs(
                    self.now.saturating_duration_since(since).as_secs()
                ))
            ),
            DownVerdict::Quiet => {
                debug!(target: LOG_TARGET, peer = %self.name(), error = why, "peer still down")
            }
        }
    }

    fn set_error(&mut self, e: String) {
        self.status.last_error = Some(e);
    }

    fn actions(&mut self, actions: Vec<Action>) {
        // A NOTIFICATION that ends an Established session is said in its
        // Down line.
        let ends_session = actions.iter().any(|a| matches!(a, Action::Down { .. }));
        for a in actions {
            match a {
                Action::Connect => {
                    self.connecting = true;
                    self.out.push(Output::Connect);
                }
                Action::AbortConnect => {
                    if std::mem::take(&mut self.connecting) {
                        self.out.push(Output::AbortConnect);
                        // Still trying (Connect or Active, not stopping or
                        // gone Idle): the ConnectRetryTimer expired with the
                        // attempt unanswered (RFC 4271 §8.2.2, Connect state,
                        // Event 9). No error ever reaches us then — a
                        // mis-signed (MD5) or low-TTL (GTSM) SYN is dropped
                        // silently — so this is the only place to say so.
                        if matches!(self.fsm.state(), State::Connect | State::Active) {
                            let why = super::socket::no_answer(
                                self.spec.socket_addr(),
                                self.spec.peer.connect_retry,
                                &self.spec.socket_options(),
                            );
                            self.connect_failed(why);
                        }
                    }
                }
                // The FSM's own messages are encoded here.
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
                    Err(e) => {
                        error!(target: LOG_TARGET, peer = %self.name(), "{} not sent: {e}", message.name())
                    }
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
                        warn!(target: LOG_TARGET,
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
    }

    /// The FSM moved between states: the status view follows.
    fn state_changed(&mut self, from: State, to: State, reason: &fsm::Reason) {
        // The steps are detail: the Up and Down lines are
        // what an operator reads.
        debug!(target: LOG_TARGET, peer = %self.name(), %from, %to, %reason, "state change");
        let rt = &mut self.status;
        rt.state = to;
        rt.state_since = self.now;
        rt.established_since = self.fsm.established_since();
        if from == State::Established {
            rt.down_since = Some(rt.state_since);
        }
        if to == State::Established {
            rt.last_error = None;
        }
    }

    fn session_up(&mut self, conn: ConnId, negotiated: Negotiated) {
        let local = self.conns.get(&conn).map(|c| c.local);
        let mut next_hops = local
            .map(|l| {
                pick_next_hops(
                    &(self.addresses)(),
                    l.ip(),
                    self.spec.address,
                    self.spec.interface.as_ref().map(|i| i.name.as_str()),
                )
            })
            .unwrap_or_default();
        next_hops.ipv4_via_ipv6 = negotiated.ipv4_over_ipv6_next_hop;
        // The families both sides negotiated that the peer is configured
        // for (RFC 4760 §8).
        let configured = self.spec.families();
        let families: Vec<Family> = negotiated
            .families
            .iter()
            .copied()
            .filter(|f| configured.contains(f))
            .collect();
        let failures = self.down_log.up();
        info!(target: LOG_TARGET,
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
        if self.conns.contains_key(&conn) {
            self.out.push(Output::SendHoldTime {
                conn,
                time: send_hold_time(negotiated.hold_time),
            });
        }
        self.status.negotiated = Some(negotiated.clone());
        self.status.local_address = local;
        self.status.end_of_rib_sent = false;
        self.up = Some(negotiated);
        let out = self
            .speaker
            .up(self.now, SessionUp { params, families }, self.budget());
        self.speaker_output(out);
    }

    /// Hands the speaker's messages to the FSM, in order, and says what
    /// they were.
    fn speaker_output(&mut self, out: Vec<SpeakerOutput>) {
        for o in out {
            match &o {
                SpeakerOutput::Updates {
                    messages,
                    announced,
                    withdrawn,
                    unsendable,
                } => {
                    if let Some(first) = unsendable.first() {
                        warn!(target: LOG_TARGET, peer = %self.name(), count = unsendable.len(), %first, "routes not sent: no next hop of their family on this session");
                    }
                    debug!(target: LOG_TARGET, peer = %self.name(), announced, withdrawn, messages = messages.len(), "UPDATEs");
                }
                SpeakerOutput::EndOfRib { .. } => {
                    debug!(target: LOG_TARGET, peer = %self.name(), "End-of-RIB")
                }
                SpeakerOutput::EndOfRibWaits => {
                    info!(target: LOG_TARGET, peer = %self.name(), "End-of-RIB waits for the source's first complete view");
                    continue;
                }
                SpeakerOutput::Refresh {
                    family, enhanced, ..
                } => {
                    if let Some(note) = logging::allow(Kind::RouteRefresh, self.name()) {
                        info!(target: LOG_TARGET, peer = %self.name(), family = %family, enhanced, "answering ROUTE-REFRESH{note}");
                    }
                }
            }
            let eor = matches!(o, SpeakerOutput::EndOfRib { .. });
            self.event(Event::SendUpdates(o.into_messages()));
            if eor {
                self.status.end_of_rib_sent = true;
                // RFC 4724 §4.1: the restart is over for this peer once it
                // has our End-of-RIB; later OPENs go without R.
                self.end_restart();
            }
        }
        self.publish_rib();
    }

    /// Later OPENs go without the R bit (RFC 4724 §3).
    fn end_restart(&mut self) {
        if self.spec.restarting {
            self.spec.restarting = false;
            self.fsm.set_capabilities(self.spec.capabilities());
            self.status.restarting = false;
        }
    }

    fn publish_rib(&mut self) {
        self.status.advertised = self.speaker.advertised();
        self.status.advertised_counts = self.speaker.advertised_counts();
    }

    /// How far the established connection's output has got.
    fn budget(&self) -> Budget {
        self.fsm
            .established()
            .and_then(|(conn, _)| self.conns.get(&conn))
            .map_or_else(Budget::default, |c| Budget {
                enqueued: c.enqueued,
                written: c.written,
            })
    }

    fn stop(&mut self, how: StopHow) {
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
                    self.up.as_ref(),
                    cease::ADMINISTRATIVE_SHUTDOWN,
                    message,
                ))
            }
            // The peer is gone from the config (or moved): its routes must
            // go too — a hard reset under RFC 8538.
            StopHow::Deconfigured => Some(hard_reset(
                self.up.as_ref(),
                Notification::cease(cease::PEER_DECONFIGURED),
            )),
            // Its settings changed: reconnect at once; with the N bit the
            // router keeps our routes as stale meanwhile (RFC 8538 §3), so
            // the reset costs the datapath nothing.
            StopHow::Reconfigured => Some(Notification::cease(cease::OTHER_CONFIGURATION_CHANGE)),
        };
        debug!(target: LOG_TARGET, peer = %self.name(), how = how.describe(), "stopping session");
        self.stopping = Some(Stopping::Planned);
        self.event(Event::ManualStop { notification });
        if std::mem::take(&mut self.connecting) {
            self.out.push(Output::AbortConnect);
        }
    }

    /// The session left Established: said in one line (why, when we
    /// brought it about), and nothing is advertised any more.
    fn session_down(&mut self, reason: &fsm::Reason) {
        let address = self.spec.address;
        match self.stopping.take() {
            Some(Stopping::Planned) => {
                debug!(target: LOG_TARGET, peer = %self.name(), %address, "session Down: stopped")
            }
            Some(Stopping::Bfd(diag)) => warn!(target: LOG_TARGET,
                peer = %self.name(),
                %address,
                reason = format!("BFD down ({diag})").as_str(),
                "session Down"
            ),
            None => warn!(target: LOG_TARGET,
                peer = %self.name(),
                %address,
                reason = reason.to_string().as_str(),
                "session Down"
            ),
        }
        self.up = None;
        self.speaker.down();
        let rt = &mut self.status;
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
            debug!(target: LOG_TARGET, peer = %self.name(), conn = conn.map(|c| c.0), "{what}");
        } else if self.up.is_none() {
            if self.stopping.is_none() {
                self.failure(what);
            }
        } else if let Some(note) = logging::allow(Kind::Notification, self.name()) {
            info!(target: LOG_TARGET, peer = %self.name(), "{what}{note}");
        }
    }
}

#[cfg(test)]
#[path = "peer_session_tests.rs"]
mod tests;

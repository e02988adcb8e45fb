//! The RFC 4271 §8 session FSM, sans IO.
//!
//! Time and bytes go in as [`Event`]s with the current instant; what to do
//! comes out as [`Action`]s (open or close a TCP connection, send this
//! message — typed, encoded by the driver — the session went up or down). [`Session::next_deadline`] says
//! when to come back with [`Event::Tick`]. Nothing here reads a clock,
//! touches a socket or sleeps, so every test runs on simulated time.
//!
//! ```text
//!            ManualStart                 TcpConnected / send OPEN
//!  Idle ──────────────────▶ Connect ─────────────────────────────▶ OpenSent
//!   ▲  ◀── IdleHoldTimer ──┐  │ ▲ ConnectRetry                        │ OPEN ok / send KEEPALIVE
//!   │       (DampPeer-     │  ▼ │                                     ▼
//!   │       Oscillations)  └ Active ◀── TCP fails ─────────────── OpenConfirm
//!   │                                                                 │ KEEPALIVE
//!   └──────────── any error: NOTIFICATION, close ◀── Established ◀────┘
//! ```
//!
//! Two connections to the same peer may exist at once (ours and theirs);
//! connection collision detection (§6.8) keeps one. With
//! AllowAutomaticStart (§8.1.1), a session that failed returns to Idle
//! and starts again by itself after the IdleHoldTimer, which doubles with
//! each consecutive failure (DampPeerOscillations) up to a ceiling.

mod negotiate;
mod timer;

use std::fmt;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

pub use negotiate::{Negotiated, PeerAs, negotiate};

use crate::capability::Capability;
use crate::consts::{MAX_MESSAGE_LEN, notify};
use crate::context::{Context, Family};
use crate::error::Action as Rfc7606;
use crate::message::{Message, check_header};
use crate::notification::Notification;
use crate::open::Open;
use timer::{Jitter, Timer};

/// RFC 4271 §8.2.2: "the HoldTimer ... is set to a large value ... A
/// HoldTimer value of 4 minutes is suggested" while waiting for OPEN.
pub const LARGE_HOLD_TIME: Duration = Duration::from_secs(240);

/// What the session is configured with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Our AS number (RFC 4271 §4.2 My Autonomous System; above 65535 it is
    /// sent as AS_TRANS there and in full in the 4-octet AS capability, RFC
    /// 6793 §3).
    pub local_asn: u32,
    /// The AS we accept in the peer's OPEN (RFC 4271 §6.2 Bad Peer AS
    /// otherwise): one number, or any AS but ours, or ours.
    pub peer_asn: PeerAs,
    /// Our BGP Identifier, sent in OPEN (RFC 4271 §4.2, RFC 6286).
    pub router_id: Ipv4Addr,
    /// Proposed Hold Time in seconds: 0, or at least 3 (RFC 4271 §4.2).
    pub hold_time: u16,
    /// KeepaliveTime (RFC 4271 §10): the interval between KEEPALIVEs; the
    /// session uses at most a third of the negotiated Hold Time (§4.4).
    pub keepalive: Duration,
    /// ConnectRetryTime (RFC 4271 §10): the wait between outgoing connection
    /// attempts, jittered (§10).
    pub connect_retry: Duration,
    /// Never initiate a connection; wait for the peer's (§8.1.1 PassiveTcpEstablishment).
    pub passive: bool,
    /// Sent in our OPEN; the 4-octet AS capability is added if absent.
    pub capabilities: Vec<Capability>,
    /// DampPeerOscillations (§8.1.1): the first IdleHoldTime, doubled on
    /// each consecutive failure up to `max_idle_hold_time`.
    pub idle_hold_time: Duration,
    /// The ceiling of the doubling IdleHoldTime (DampPeerOscillations,
    /// §8.1.1).
    pub max_idle_hold_time: Duration,
    /// Seed of the RFC 4271 §10 jitter.
    pub jitter_seed: u64,
}

impl Config {
    /// The OPEN this configuration sends (RFC 4271 §4.2).
    pub fn open(&self) -> Open {
        Open::new(
            self.local_asn,
            self.hold_time,
            self.router_id,
            self.capabilities.clone(),
        )
    }
}

/// The RFC 4271 §8.2.2 states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Refuses connections and waits for ManualStart, or for the
    /// IdleHoldTimer to trigger AutomaticStart.
    Idle,
    /// Waiting for our outgoing TCP connection to complete.
    Connect,
    /// Listening for the peer's connection; the ConnectRetryTimer triggers
    /// the next outgoing attempt (a passive session stays here).
    Active,
    /// Our OPEN is sent; waiting for the peer's.
    OpenSent,
    /// The peer's OPEN is accepted and our KEEPALIVE sent; waiting for the
    /// peer's KEEPALIVE.
    OpenConfirm,
    /// The session is up: UPDATE, KEEPALIVE and NOTIFICATION messages flow.
    Established,
}

impl State {
    /// The state's name as RFC 4271 §8.2.2 spells it (the `Display` form).
    pub fn as_str(self) -> &'static str {
        match self {
            State::Idle => "Idle",
            State::Connect => "Connect",
            State::Active => "Active",
            State::OpenSent => "OpenSent",
            State::OpenConfirm => "OpenConfirm",
            State::Established => "Established",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A TCP connection, numbered by the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Who opened the connection (RFC 4271 §6.8 keeps the one opened by the
/// speaker with the higher BGP Identifier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// We opened it (Event 16, Tcp_CR_Acked).
    Outgoing,
    /// The peer opened it and we accepted (Event 17, TcpConnectionConfirmed).
    Incoming,
}

/// Inputs (RFC 4271 §8.1). Message events (§8.1.4, Events 19–28) come from
/// decoding `Data`; timer events (§8.1.3) from `Tick`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Event 1, ManualStart — with AllowAutomaticStart: after a failure the
    /// session restarts by itself (Event 3, AutomaticStart).
    ManualStart,
    /// Event 2, ManualStop. `notification`: what to send on an open
    /// connection (typically Cease/Administrative Shutdown); `None` closes
    /// TCP without one, which a graceful-restart helper treats as a restart
    /// (RFC 4724 §4.2).
    ManualStop {
        /// Sent on each open connection before it closes.
        notification: Option<Notification>,
    },
    /// Event 16, Tcp_CR_Acked (our connection) / Event 17,
    /// TcpConnectionConfirmed (theirs).
    TcpConnected {
        /// The driver's number for the new connection.
        conn: ConnId,
        /// Who opened it.
        direction: Direction,
    },
    /// Event 18, TcpConnectionFails — the outgoing attempt failed.
    TcpConnectFailed,
    /// Event 18, TcpConnectionFails — an open connection closed.
    TcpClosed {
        /// The connection that closed.
        conn: ConnId,
    },
    /// Octets read from a connection.
    Data {
        /// The connection the octets were read from.
        conn: ConnId,
        /// The octets in the order read; message boundaries need not
        /// fall anywhere in particular.
        bytes: Vec<u8>,
    },
    /// UPDATE messages to send on the established connection, encoded in
    /// [`Negotiated::tx`].
    SendUpdates(Vec<Vec<u8>>),
    /// RFC 9687 §4, SendHoldTimer_Expires: the driver could not write to
    /// `conn` for the SendHoldTime — the peer stopped reading.
    SendHoldTimerExpired {
        /// The connection whose writes stalled.
        conn: ConnId,
    },
    /// Time has passed: Event 9 ConnectRetryTimer_Expires, Event 10
    /// HoldTimer_Expires, Event 11 KeepaliveTimer_Expires, Event 13
    /// IdleHoldTimer_Expires.
    Tick,
}

/// Why the state changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// Event 1, ManualStart.
    ManualStart,
    /// IdleHoldTimer expired: AutomaticStart.
    AutomaticStart,
    /// Event 2, ManualStop.
    ManualStop,
    /// Event 9, ConnectRetryTimer_Expires.
    ConnectRetryTimerExpired,
    /// Event 16, Tcp_CR_Acked, or Event 17, TcpConnectionConfirmed.
    TcpConnected,
    /// Event 18, TcpConnectionFails: the outgoing attempt failed.
    TcpConnectFailed,
    /// Event 18, TcpConnectionFails: an open connection closed.
    TcpClosed,
    /// Event 19, BGPOpen: the peer's OPEN was accepted.
    OpenReceived,
    /// Event 26, KeepAliveMsg, in OpenConfirm.
    KeepaliveReceived,
    /// Event 10, HoldTimer_Expires: we sent Hold Timer Expired.
    HoldTimerExpired,
    /// RFC 9687: the peer stopped reading what we sent.
    SendHoldTimerExpired,
    /// We sent this NOTIFICATION because of an error we found.
    ErrorSent(Notification),
    /// Event 25, NotifMsg (or 24, NotifMsgVerErr): the peer sent this
    /// NOTIFICATION.
    NotificationReceived(Notification),
    /// Connection collision resolution (§6.8) closed a connection.
    Collision,
    /// The peer opened a new session while ours was established and it
    /// had graceful restart: it restarted (RFC 4724 §4.2).
    PeerRestarted,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::ManualStart => f.write_str("started"),
            Reason::AutomaticStart => f.write_str("automatic restart"),
            Reason::ManualStop => f.write_str("stopped"),
            Reason::ConnectRetryTimerExpired => f.write_str("connect retry timer expired"),
            Reason::TcpConnected => f.write_str("TCP connection up"),
            Reason::TcpConnectFailed => f.write_str("TCP connection attempt failed"),
            Reason::TcpClosed => f.write_str("TCP connection closed"),
            Reason::OpenReceived => f.write_str("OPEN received"),
            Reason::KeepaliveReceived => f.write_str("KEEPALIVE received"),
            Reason::HoldTimerExpired => f.write_str("hold timer expired"),
            Reason::SendHoldTimerExpired => f.write_str("send hold timer expired"),
            Reason::ErrorSent(n) => write!(f, "sent NOTIFICATION {n}"),
            Reason::NotificationReceived(n) => write!(f, "received NOTIFICATION {n}"),
            Reason::Collision => f.write_str("connection collision resolution"),
            Reason::PeerRestarted => f.write_str("peer restarted (graceful restart)"),
        }
    }
}

/// What a received UPDATE held, and what RFC 7606 says to do with it. The
/// routes themselves are dropped: holdfast only originates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpdateReceived {
    /// Prefixes announced, in the NLRI field and in MP_REACH_NLRI.
    pub announced: usize,
    /// Prefixes withdrawn, in Withdrawn Routes and in MP_UNREACH_NLRI.
    pub withdrawn: usize,
    /// The family whose End-of-RIB marker this UPDATE is (RFC 4724 §2).
    pub end_of_rib: Option<Family>,
    /// The RFC 7606 approach taken, if the UPDATE was malformed (never a
    /// session reset: that ends the session instead).
    pub action: Option<Rfc7606>,
    /// Each attribute error found, as text for the log.
    pub errors: Vec<String>,
    /// Families to disable (RFC 4760 §7) when the action is AFI/SAFI
    /// disable.
    pub disabled_families: Vec<Family>,
}

/// Outputs, in the order to carry them out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a TCP connection to the peer, then report `TcpConnected` with
    /// `Direction::Outgoing` or `TcpConnectFailed`.
    Connect,
    /// Give up the pending outgoing attempt.
    AbortConnect,
    /// Encode this message in `ctx` ([`Message::encode`]) and write it to
    /// the connection: the OPEN, KEEPALIVE and NOTIFICATION messages the FSM
    /// itself builds. They go out typed, so that what is sent reads as what
    /// it is (in tests and logs too), and are encoded at the edge, by the
    /// driver. A NOTIFICATION has already been cut to fit `ctx`'s maximum
    /// message size.
    Send {
        /// The connection to write to.
        conn: ConnId,
        /// The message.
        message: Message,
        /// What to encode it in: the connection's negotiated context once
        /// the OPENs are exchanged, [`Context::default`] before.
        ctx: Context,
    },
    /// Write these octets, one whole message, to the connection: the
    /// UPDATE and ROUTE-REFRESH messages handed over already encoded in
    /// [`Event::SendUpdates`], passed through as they are. They stay bytes
    /// because the speaker packs them against the negotiated maximum size
    /// and counts their octets against its output budget before they reach
    /// the FSM: decoding them into types here would only be undone again.
    SendEncoded {
        /// The connection to write to.
        conn: ConnId,
        /// One whole encoded message.
        bytes: Vec<u8>,
    },
    /// Close after the sends before it.
    Close {
        /// The connection to close.
        conn: ConnId,
    },
    /// The session moved between RFC 4271 §8.2.2 states.
    StateChange {
        /// The state before the event.
        from: State,
        /// The state after it.
        to: State,
        /// The event that moved it.
        reason: Reason,
    },
    /// The session is established: send the whole table, then End-of-RIB.
    Up {
        /// The established connection.
        conn: ConnId,
        /// What the two OPENs agreed (boxed: it is large, and `Up` rare).
        negotiated: Box<Negotiated>,
    },
    /// The session left Established.
    Down {
        /// Why it went down.
        reason: Reason,
    },
    /// A NOTIFICATION was sent, for logs and counters (its octets go out in
    /// a `Send` before this).
    NotificationSent {
        /// The connection it went out on.
        conn: ConnId,
        /// The NOTIFICATION sent.
        notification: Notification,
    },
    /// The peer sent a NOTIFICATION (Event 25, NotifMsg); the connection
    /// closes.
    NotificationReceived {
        /// The NOTIFICATION received.
        notification: Notification,
    },
    /// An UPDATE arrived on the established connection and was checked
    /// (RFC 7606).
    UpdateReceived(UpdateReceived),
    /// The peer asked for our routes again (RFC 2918; RFC 7313 when
    /// `enhanced`): answer with the table, within BoRR/EoRR if enhanced.
    RouteRefresh {
        /// The AFI/SAFI whose routes the peer asked for.
        family: Family,
        /// Both sides have Enhanced Route Refresh (RFC 7313 §4): send BoRR
        /// before the table and EoRR after it.
        enhanced: bool,
    },
}

/// Counters per session, for metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Messages received, of every type.
    pub messages_received: u64,
    /// Messages sent, of every type.
    pub messages_sent: u64,
    /// UPDATE messages received.
    pub updates_received: u64,
    /// UPDATE messages sent.
    pub updates_sent: u64,
    /// Prefixes announced in the UPDATEs received (withdrawals not counted).
    pub prefixes_received: u64,
    /// NOTIFICATIONs sent, as (error code, error subcode, count).
    pub notifications_sent: Vec<(u8, u8, u64)>,
    /// NOTIFICATIONs received, as (error code, error subcode, count).
    pub notifications_received: Vec<(u8, u8, u64)>,
    /// How many times the session entered Established.
    pub established_transitions: u64,
}

impl Stats {
    fn count(list: &mut Vec<(u8, u8, u64)>, n: &Notification) {
        match list
            .iter_mut()
            .find(|(c, s, _)| *c == n.code && *s == n.subcode)
        {
            Some(e) => e.2 += 1,
            None => list.push((n.code, n.subcode, 1)),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum ConnState {
    OpenSent,
    OpenConfirm,
    Established,
}

impl ConnState {
    fn state(self) -> State {
        match self {
            ConnState::OpenSent => State::OpenSent,
            ConnState::OpenConfirm => State::OpenConfirm,
            ConnState::Established => State::Established,
        }
    }
}

#[derive(Debug)]
struct Conn {
    id: ConnId,
    direction: Direction,
    state: ConnState,
    rx: Vec<u8>,
    hold: Timer,
    keepalive: Timer,
    negotiated: Option<Negotiated>,
    since: Instant,
}

/// An established connection as it crosses a hand-off between processes
/// ([`Session::to_resume`], [`Session::resume`]): the timers as what is
/// left of them, never as `Instant`s (another process's clock).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    /// The new process's number for the connection.
    pub conn: ConnId,
    /// Who opened the connection (RFC 4271 §6.8 still applies to a later
    /// collision).
    pub direction: Direction,
    /// Our OPEN as it was sent.
    pub local_open: Open,
    /// The peer's OPEN as it was received.
    pub peer_open: Open,
    /// Octets read and not yet framed.
    pub unparsed: Vec<u8>,
    /// What is left of the HoldTimer (RFC 4271 §4.4).
    pub hold_remaining: Duration,
    /// What is left of the KeepaliveTimer (RFC 4271 §4.4).
    pub keepalive_remaining: Duration,
    /// The counters so far: they go on counting.
    pub stats: Stats,
}

/// When no connection has reached OpenSent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Connect,
    Active,
}

/// One BGP session with one peer.
#[derive(Debug)]
pub struct Session {
    config: Config,
    local_open: Open,
    phase: Phase,
    conns: Vec<Conn>,
    connecting: bool,
    /// ManualStart given and no ManualStop since: AllowAutomaticStart.
    enabled: bool,
    connect_retry: Timer,
    idle_hold: Timer,
    idle_hold_time: Duration,
    /// §8: ConnectRetryCounter.
    connect_retry_counter: u32,
    jitter: Jitter,
    state: State,
    stats: Stats,
    established_at: Option<Instant>,
}

/// Incoming connections kept at once (each until its OPEN resolves §6.8).
const MAX_INCOMING: usize = 2;

/// A session that stayed established this long resets the
/// DampPeerOscillations back-off.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// A second connection's OPEN arriving within this long of the first
/// becoming Established is part of the same collision (§6.8); later, it is
/// a restarted peer (RFC 4724 §4.2) or an unwanted duplicate.
pub const COLLISION_WINDOW: Duration = Duration::from_secs(5);

impl Session {
    /// A session in Idle: nothing happens until [`Event::ManualStart`].
    pub fn new(config: Config) -> Self {
        let local_open = config.open();
        let jitter = Jitter::new(config.jitter_seed);
        let idle_hold_time = config.idle_hold_time;
        Session {
            config,
            local_open,
            phase: Phase::Idle,
            conns: Vec::new(),
            connecting: false,
            enabled: false,
            connect_retry: Timer::default(),
            idle_hold: Timer::default(),
            idle_hold_time,
            connect_retry_counter: 0,
            jitter,
            state: State::Idle,
            stats: Stats::default(),
            established_at: None,
        }
    }

    /// A session already in Established on one connection, taken over
    /// from another process (a live hand-off): nothing is sent — no OPEN,
    /// the peer knows none was — and the session goes on from the handed
    /// state. The negotiated values are derived again from the two OPENs
    /// as they were exchanged (refused as [`negotiate`] would refuse the
    /// peer's OPEN under this `config`). The HoldTimer and the
    /// KeepaliveTimer (RFC 4271 §4.4, §10) start at what was left of
    /// them, so the peer sees KEEPALIVEs on schedule; both stay stopped
    /// when the negotiated Hold Time is 0. `unparsed` is what was read but
    /// not yet framed (a message cut by the hand-off): the next octets
    /// continue it. Behaves afterwards as a session established by
    /// ManualStart (AllowAutomaticStart, §8.1.1).
    pub fn resume(config: Config, now: Instant, r: Resumed) -> Result<Self, crate::error::Error> {
        let negotiated = negotiate(&config, &r.local_open, &r.peer_open)?;
        let mut s = Session::new(config);
        s.local_open = r.local_open;
        s.enabled = true;
        s.phase = if s.config.passive {
            Phase::Active
        } else {
            Phase::Connect
        };
        let mut c = Conn {
            id: r.conn,
            direction: r.direction,
            state: ConnState::Established,
            rx: r.unparsed,
            hold: Timer::default(),
            keepalive: Timer::default(),
            negotiated: None,
            since: now,
        };
        if negotiated.hold_time != 0 {
            c.hold.start(now, r.hold_remaining);
            if !negotiated.keepalive.is_zero() {
                c.keepalive.start(now, r.keepalive_remaining);
            }
        }
        c.negotiated = Some(negotiated);
        s.conns.push(c);
        s.state = State::Established;
        s.established_at = Some(now);
        s.stats = r.stats;
        Ok(s)
    }

    /// What [`Session::resume`] needs of an established connection to go
    /// on: see [`Resumed`]. `None` without one.
    pub fn to_resume(&self, now: Instant) -> Option<Resumed> {
        let c = self
            .conns
            .iter()
            .find(|c| c.state == ConnState::Established)?;
        let n = c.negotiated.as_ref()?;
        let left = |t: &Timer| {
            t.deadline()
                .map_or(Duration::ZERO, |d| d.saturating_duration_since(now))
        };
        Some(Resumed {
            conn: c.id,
            direction: c.direction,
            local_open: n.local_open.clone(),
            peer_open: n.peer_open.clone(),
            unparsed: c.rx.clone(),
            hold_remaining: left(&c.hold),
            keepalive_remaining: left(&c.keepalive),
            stats: self.stats.clone(),
        })
    }

    /// The RFC 4271 §8.2.2 state: that of the most advanced connection while
    /// §6.8 collision detection keeps two.
    pub fn state(&self) -> State {
        self.state
    }

    /// The configuration, with the capabilities last set by
    /// [`Session::set_capabilities`].
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The session's counters.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// ConnectRetryCounter (RFC 4271 §8): sessions that failed since the last
    /// ManualStart or ManualStop.
    pub fn connect_retry_counter(&self) -> u32 {
        self.connect_retry_counter
    }

    /// The OPEN we send.
    pub fn local_open(&self) -> &Open {
        &self.local_open
    }

    /// Replaces the capabilities of the OPENs sent from now on (the R bit
    /// of graceful restart clears once the restart is over).
    pub fn set_capabilities(&mut self, caps: Vec<Capability>) {
        self.config.capabilities = caps;
        self.local_open = self.config.open();
    }

    /// The established connection and what it negotiated.
    pub fn established(&self) -> Option<(ConnId, &Negotiated)> {
        self.conns
            .iter()
            .find(|c| c.state == ConnState::Established)
            .and_then(|c| c.negotiated.as_ref().map(|n| (c.id, n)))
    }

    /// When the session entered Established, while it stays there.
    pub fn established_since(&self) -> Option<Instant> {
        self.established_at
    }

    /// The IdleHoldTime the next failure would wait.
    pub fn idle_hold_time(&self) -> Duration {
        self.idle_hold_time
    }

    /// For each open connection: the octets read and not yet consumed as
    /// whole messages, and the largest message it accepts (RFC 4271 §4.1,
    /// RFC 8654 §4 once negotiated). A header is checked as soon as it is
    /// complete, so a peer can make us hold less than one message per
    /// connection, whatever it sends.
    pub fn receive_buffers(&self) -> impl Iterator<Item = (ConnId, usize, usize)> + '_ {
        self.conns.iter().map(|c| {
            let max = c
                .negotiated
                .as_ref()
                .map_or(MAX_MESSAGE_LEN, |n| n.rx.max_message_len);
            (c.id, c.rx.len(), max)
        })
    }

    /// The earliest instant at which `Event::Tick` has work to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let conn_timers = self
            .conns
            .iter()
            .flat_map(|c| [c.hold.deadline(), c.keepalive.deadline()]);
        [self.connect_retry.deadline(), self.idle_hold.deadline()]
            .into_iter()
            .chain(conn_timers)
            .flatten()
            .min()
    }

    /// Feeds one event in at `now`; returns what to do, in order.
    pub fn handle(&mut self, now: Instant, event: Event) -> Vec<Action> {
        let mut out = Vec::new();
        let reason = self.dispatch(now, event, &mut out);
        // `data` records the state change of each message as it goes, so
        // `self.state` may already be past where this event began.
        self.update_state(self.state, reason, now, &mut out);
        out
    }

    fn update_state(
        &mut self,
        before: State,
        reason: Option<Reason>,
        now: Instant,
        out: &mut Vec<Action>,
    ) {
        let after = self
            .conns
            .iter()
            .map(|c| c.state.state())
            .max()
            .unwrap_or(match self.phase {
                Phase::Idle => State::Idle,
                Phase::Connect => State::Connect,
                Phase::Active => State::Active,
            });
        self.state = after;
        if after != before {
            if before == State::Established {
                self.established_at = None;
            }
            if after == State::Established {
                self.established_at = Some(now);
                self.stats.established_transitions += 1;
            }
            out.push(Action::StateChange {
                from: before,
                to: after,
                reason: reason.unwrap_or(Reason::TcpClosed),
            });
        }
    }

    fn dispatch(&mut self, now: Instant, event: Event, out: &mut Vec<Action>) -> Option<Reason> {
        match event {
            Event::ManualStart => {
                if self.enabled {
                    return None;
                }
                self.enabled = true;
                self.connect_retry_counter = 0;
                self.start(now, out);
                Some(Reason::ManualStart)
            }
            Event::ManualStop { notification } => {
                self.enabled = false;
                self.idle_hold.stop();
                self.connect_retry.stop();
                // §8.2.2 ManualStop: "sets the ConnectRetryCounter to zero".
                self.connect_retry_counter = 0;
                if std::mem::take(&mut self.connecting) {
                    out.push(Action::AbortConnect);
                }
                let was_up = self.state == State::Established;
                for c in std::mem::take(&mut self.conns) {
                    if let Some(n) = &notification {
                        self.send_notification(&c, n.clone(), out);
                    }
                    out.push(Action::Close { conn: c.id });
                }
                self.phase = Phase::Idle;
                if was_up {
                    out.push(Action::Down {
                        reason: Reason::ManualStop,
                    });
                }
                Some(Reason::ManualStop)
            }
            Event::TcpConnected { conn, direction } => {
                self.tcp_connected(now, conn, direction, out)
            }
            Event::TcpConnectFailed => {
                if !std::mem::take(&mut self.connecting) {
                    return None;
                }
                // §8.2.2 Connect state, TcpConnectionFails: with the
                // DelayOpenTimer running the RFC "restarts the
                // ConnectRetryTimer ... and changes its state to Active";
                // without it, it goes to Idle. We take the Active path in
                // both cases, as FRR and BIRD do: the ConnectRetryTimer
                // (jittered, as configured) paces the next attempt, and
                // Idle's growing IdleHoldTimer is kept for sessions that
                // failed after the connection was up.
                if self.conns.is_empty() && self.phase == Phase::Connect {
                    self.phase = Phase::Active;
                }
                Some(Reason::TcpConnectFailed)
            }
            Event::TcpClosed { conn } => {
                let idx = self.conns.iter().position(|c| c.id == conn)?;
                let c = self.conns.remove(idx);
                self.connection_lost(now, c, Reason::TcpClosed, false, out);
                Some(Reason::TcpClosed)
            }
            Event::Data { conn, bytes } => self.data(now, conn, bytes, out),
            Event::SendUpdates(messages) => {
                let c = self
                    .conns
                    .iter_mut()
                    .find(|c| c.state == ConnState::Established)?;
                for bytes in messages {
                    self.stats.messages_sent += 1;
                    self.stats.updates_sent += 1;
                    out.push(Action::SendEncoded { conn: c.id, bytes });
                }
                // RFC 4271 §4.4: KEEPALIVEs are needed only when nothing
                // else is sent; restart the timer.
                if let Some(ka) = c
                    .negotiated
                    .as_ref()
                    .map(|n| n.keepalive)
                    .filter(|k| !k.is_zero())
                {
                    c.keepalive.start(now, ka);
                }
                None
            }
            Event::SendHoldTimerExpired { conn } => {
                // RFC 9687 §4: "send the NOTIFICATION message with the Send
                // Hold Timer Expired error code (if possible), drop the TCP
                // connection, release all BGP resources, increment the
                // ConnectRetryCounter, (optionally) perform peer oscillation
                // damping, and change its state to Idle" — as for the
                // HoldTimer (RFC 4271 §8.2.2 Event 10).
                let idx = self.conns.iter().position(|c| c.id == conn)?;
                let c = self.conns.remove(idx);
                let n = Notification::new(notify::SEND_HOLD_TIMER_EXPIRED, 0, Vec::new());
                self.send_notification(&c, n, out);
                out.push(Action::Close { conn: c.id });
                self.connection_lost(now, c, Reason::SendHoldTimerExpired, true, out);
                Some(Reason::SendHoldTimerExpired)
            }
            Event::Tick => self.tick(now, out),
        }
    }

    /// ManualStart or AutomaticStart in Idle (§8.2.2): initiate a
    /// connection (or, passive, listen: Active).
    fn start(&mut self, now: Instant, out: &mut Vec<Action>) {
        let retry = self.jitter.apply(self.config.connect_retry);
        self.connect_retry.start(now, retry);
        if self.config.passive {
            self.phase = Phase::Active;
        } else {
            self.phase = Phase::Connect;
            if !self.connecting {
                self.connecting = true;
                out.push(Action::Connect);
            }
        }
    }

    fn tick(&mut self, now: Instant, out: &mut Vec<Action>) -> Option<Reason> {
        let mut reason = None;
        if self.idle_hold.expired(now)
            && self.enabled
            && self.phase == Phase::Idle
            && self.conns.is_empty()
        {
            // Event 13 IdleHoldTimer_Expires → Event 3 AutomaticStart.
            self.start(now, out);
            reason = Some(Reason::AutomaticStart);
        }
        if self.connect_retry.expired(now) && self.enabled {
            // Event 9: in Connect, drop the attempt and try again; in
            // Active, initiate a connection (§8.2.2).
            if !self.config.passive {
                if std::mem::take(&mut self.connecting) {
                    out.push(Action::AbortConnect);
                }
                if self.conns.is_empty() {
                    self.phase = Phase::Connect;
                }
                self.connecting = true;
                out.push(Action::Connect);
            }
            let retry = self.jitter.apply(self.config.connect_retry);
            self.connect_retry.start(now, retry);
            reason = reason.or(Some(Reason::ConnectRetryTimerExpired));
        }
        let mut i = 0;
        while i < self.conns.len() {
            if self.conns[i].hold.expired(now) {
                // Event 10: "sends a NOTIFICATION message with the error
                // code Hold Timer Expired" and drops the connection.
                let c = self.conns.remove(i);
                let n = Notification::new(notify::HOLD_TIMER_EXPIRED, 0, Vec::new());
                self.send_notification(&c, n, out);
                out.push(Action::Close { conn: c.id });
                self.connection_lost(now, c, Reason::HoldTimerExpired, true, out);
                reason = Some(Reason::HoldTimerExpired);
                continue;
            }
            let c = &mut self.conns[i];
            if c.keepalive.expired(now) {
                // Event 11: send KEEPALIVE, restart the timer.
                let ka = c
                    .negotiated
                    .as_ref()
                    .map(|n| n.keepalive)
                    .unwrap_or_default();
                if !ka.is_zero() {
                    let next = self.jitter.apply(ka);
                    c.keepalive.start(now, next);
                }
                out.push(Action::Send {
                    conn: c.id,
                    message: Message::Keepalive,
                    ctx: Context::default(),
                });
                self.stats.messages_sent += 1;
            }
            i += 1;
        }
        reason
    }

    fn tcp_connected(
        &mut self,
        now: Instant,
        conn: ConnId,
        direction: Direction,
        out: &mut Vec<Action>,
    ) -> Option<Reason> {
        if direction == Direction::Outgoing {
            let pending = std::mem::take(&mut self.connecting);
            if !pending || !self.enabled {
                out.push(Action::Close { conn });
                return None;
            }
        } else {
            if self.enabled && self.phase == Phase::Idle && self.conns.is_empty() {
                if self.idle_hold.expired(now) {
                    // The IdleHoldTimer is due (Event 13): AutomaticStart
                    // first, then this connection as in Active.
                    self.start(now, out);
                } else {
                    // §8.2.2 Idle: "any other event ... the local system
                    // refuses the connection" — also while the IdleHoldTimer
                    // of DampPeerOscillations (§8.1.1) runs, or a peer that
                    // keeps failing would be answered at once every time.
                    out.push(Action::Close { conn });
                    return None;
                }
            }
            if !self.enabled {
                out.push(Action::Close { conn });
                return None;
            }
            // A second incoming connection is kept through OPEN and §6.8
            // decides: refusing it would let a silent connection from the
            // peer's address (or a half-dead old one) lock the real peer
            // out for the large hold time. Beyond that, the oldest incoming
            // connection still without an OPEN gives way.
            let incoming = || {
                self.conns
                    .iter()
                    .filter(|c| c.direction == Direction::Incoming)
            };
            if incoming().count() >= MAX_INCOMING {
                let silent = incoming()
                    .filter(|c| c.state == ConnState::OpenSent)
                    .min_by_key(|c| c.since)
                    .map(|c| c.id);
                let Some(silent) = silent else {
                    out.push(Action::Close { conn });
                    return None;
                };
                let idx = self.conns.iter().position(|c| c.id == silent)?;
                let c = self.conns.remove(idx);
                let n = Notification::cease(notify::cease::CONNECTION_COLLISION_RESOLUTION);
                self.send_notification(&c, n, out);
                out.push(Action::Close { conn: c.id });
            }
        }
        // Ours and MAX_INCOMING of theirs at most.
        if self.conns.len() > MAX_INCOMING {
            out.push(Action::Close { conn });
            return None;
        }
        // §8.2.2 Connect/Active, Tcp_CR_Acked / TcpConnectionConfirmed:
        // "stops the ConnectRetryTimer ..., completes BGP initialization,
        // sends an OPEN message to its peer, sets the HoldTimer to a large
        // value, and changes its state to OpenSent."
        // An outgoing attempt still pending goes on: if it completes too,
        // §6.8 decides which connection stays.
        self.connect_retry.stop();
        let mut c = Conn {
            id: conn,
            direction,
            state: ConnState::OpenSent,
            rx: Vec::new(),
            hold: Timer::default(),
            keepalive: Timer::default(),
            negotiated: None,
            since: now,
        };
        c.hold.start(now, LARGE_HOLD_TIME);
        out.push(Action::Send {
            conn,
            message: Message::Open(self.local_open.clone()),
            ctx: Context::default(),
        });
        self.stats.messages_sent += 1;
        self.conns.push(c);
        Some(Reason::TcpConnected)
    }

    /// Sends `n` on `c`, its data cut to the connection's maximum message
    /// size (RFC 4271 §4.5; RFC 8654 once extended messages are
    /// negotiated, 4096 octets before): a NOTIFICATION is always sent.
    fn send_notification(&mut self, c: &Conn, n: Notification, out: &mut Vec<Action>) {
        let ctx = c
            .negotiated
            .as_ref()
            .map_or_else(Context::default, |neg| neg.tx);
        let n = n.fit(ctx.max_message_len);
        out.push(Action::Send {
            conn: c.id,
            message: Message::Notification(n.clone()),
            ctx,
        });
        self.stats.messages_sent += 1;
        Stats::count(&mut self.stats.notifications_sent, &n);
        out.push(Action::NotificationSent {
            conn: c.id,
            notification: n,
        });
    }

    /// A connection is gone. `error`: it failed (rather than the peer
    /// closing TCP on an OpenSent connection, which §8.2.2 answers with
    /// Active).
    fn connection_lost(
        &mut self,
        now: Instant,
        c: Conn,
        reason: Reason,
        error: bool,
        out: &mut Vec<Action>,
    ) {
        if c.state == ConnState::Established {
            out.push(Action::Down {
                reason: reason.clone(),
            });
            if now.saturating_duration_since(c.since) >= STABLE_AFTER {
                // The session was stable: this failure starts the
                // DampPeerOscillations back-off afresh.
                self.idle_hold_time = self.config.idle_hold_time;
            }
        }
        if !self.conns.is_empty() {
            // The other connection carries on.
            return;
        }
        if !self.enabled {
            self.phase = Phase::Idle;
            return;
        }
        if c.state != ConnState::Established
            && matches!(&reason, Reason::NotificationReceived(n)
                if n.code == notify::CEASE
                    && n.subcode == notify::cease::CONNECTION_COLLISION_RESOLUTION)
        {
            // §6.8, RFC 4486 §4: the peer closed this connection to keep
            // the one it opened to us, which may not have reached us yet
            // (accepted by the listener, still on its way to the session).
            // Listen for it in Active, as after a TCP close in OpenSent:
            // refusing it in Idle would close the session the peer kept
            // and start the whole exchange again.
            let retry = self.jitter.apply(self.config.connect_retry);
            self.connect_retry.start(now, retry);
            self.phase = Phase::Active;
            return;
        }
        if c.state == ConnState::OpenSent && !error && matches!(reason, Reason::TcpClosed) {
            // §8.2.2 OpenSent, TcpConnectionFails: "closes the BGP
            // connection, restarts the ConnectRetryTimer, continues to
            // listen for a connection that may be initiated by the remote
            // BGP peer, and changes its state to Active."
            let retry = self.jitter.apply(self.config.connect_retry);
            self.connect_retry.start(now, retry);
            self.phase = Phase::Active;
            return;
        }
        self.go_idle(now, out);
    }

    /// Everything else that ends a session: "releases all BGP resources,
    /// drops the TCP connection, increments the ConnectRetryCounter by 1,
    /// (optionally) performs peer oscillation damping, and changes its
    /// state to Idle" (§8.2.2). AutomaticStart follows after the
    /// IdleHoldTimer.
    fn go_idle(&mut self, now: Instant, out: &mut Vec<Action>) {
        self.connect_retry_counter += 1;
        self.connect_retry.stop();
        if std::mem::take(&mut self.connecting) {
            out.push(Action::AbortConnect);
        }
        self.phase = Phase::Idle;
        self.idle_hold.start(now, self.idle_hold_time);
        self.idle_hold_time = (self.idle_hold_time * 2).min(self.config.max_idle_hold_time);
    }

    /// Sends `n` on `c`, closes it and handles the loss.
    fn fail(&mut self, now: Instant, c: Conn, n: Notification, out: &mut Vec<Action>) -> Reason {
        self.send_notification(&c, n.clone(), out);
        out.push(Action::Close { conn: c.id });
        let reason = Reason::ErrorSent(n);
        self.connection_lost(now, c, reason.clone(), true, out);
        reason
    }

    fn data(
        &mut self,
        now: Instant,
        conn: ConnId,
        bytes: Vec<u8>,
        out: &mut Vec<Action>,
    ) -> Option<Reason> {
        let idx = self.conns.iter().position(|c| c.id == conn)?;
        self.conns[idx].rx.extend_from_slice(&bytes);
        let mut reason = None;
        // The messages are taken from `done` on and the buffer shifted once
        // at the end: shifting it after each message would cost time
        // quadratic in the read (thousands of 23-octet ROUTE-REFRESHes).
        let mut done = 0;
        while let Some(idx) = self.conns.iter().position(|c| c.id == conn) {
            let c = &mut self.conns[idx];
            let max = c
                .negotiated
                .as_ref()
                .map_or(MAX_MESSAGE_LEN, |n| n.rx.max_message_len);
            let rest = &c.rx[done..];
            let len = match check_header(rest, max) {
                Ok(Some(len)) if rest.len() >= len => len,
                Ok(_) => break,
                Err(e) => {
                    let c = self.conns.remove(idx);
                    reason = Some(self.fail(now, c, e.to_notification(), out));
                    break;
                }
            };
            let msg: Vec<u8> = rest[..len].to_vec();
            done += len;
            self.stats.messages_received += 1;
            // Each message is an event of its own (§8.1.4): one read that
            // holds OPEN and KEEPALIVE goes OpenSent → OpenConfirm →
            // Established, and both changes are reported with their reason.
            let before = self.state;
            let r = self.message(now, idx, &msg, out);
            self.update_state(before, r.clone(), now, out);
            if r.is_some() {
                reason = r;
            }
        }
        if let Some(c) = self.conns.iter_mut().find(|c| c.id == conn) {
            c.rx.drain(..done);
        }
        reason
    }

    /// One whole message on connection `idx`.
    fn message(
        &mut self,
        now: Instant,
        idx: usize,
        bytes: &[u8],
        out: &mut Vec<Action>,
    ) -> Option<Reason> {
        let c = &self.conns[idx];
        let ctx = c
            .negotiated
            .as_ref()
            .map_or_else(Context::default, |n| n.rx);
        let state = c.state;
        let msg = match Message::decode(bytes, &ctx) {
            Ok(m) => m,
            Err(e) => {
                // BGPHeaderErr / BGPOpenMsgErr / UpdateMsgErr (Events 21,
                // 22, 28): NOTIFICATION, then Idle.
                let c = self.conns.remove(idx);
                return Some(self.fail(now, c, e.to_notification(), out));
            }
        };
        match (state, msg) {
            (_, Message::Notification(n)) => {
                // Event 25 NotifMsg (or 24 NotifMsgVerErr): drop the
                // connection; no NOTIFICATION is sent back.
                let c = self.conns.remove(idx);
                Stats::count(&mut self.stats.notifications_received, &n);
                out.push(Action::NotificationReceived {
                    notification: n.clone(),
                });
                out.push(Action::Close { conn: c.id });
                let reason = Reason::NotificationReceived(n);
                self.connection_lost(now, c, reason.clone(), true, out);
                Some(reason)
            }
            (ConnState::OpenSent, Message::Open(open)) => self.open_received(now, idx, open, out),
            (ConnState::OpenConfirm, Message::Keepalive) => {
                // Event 26 in OpenConfirm: "restarts the HoldTimer and
                // changes its state to Established".
                if let Some(r) = self.collision_on_established(idx, out) {
                    return Some(r);
                }
                let c = &mut self.conns[idx];
                c.state = ConnState::Established;
                c.since = now;
                let id = c.id;
                // The session is up: a connection that has waited longer
                // than a collision takes for its OPEN is a silent one, and
                // goes (a younger one may still bring a colliding OPEN,
                // §6.8).
                let mut i = 0;
                while i < self.conns.len() {
                    let o = &self.conns[i];
                    if o.id != id
                        && o.state == ConnState::OpenSent
                        && now.saturating_duration_since(o.since) >= COLLISION_WINDOW
                    {
                        let c = self.conns.remove(i);
                        let n = Notification::cease(notify::cease::CONNECTION_COLLISION_RESOLUTION);
                        self.send_notification(&c, n, out);
                        out.push(Action::Close { conn: c.id });
                    } else {
                        i += 1;
                    }
                }
                let idx = self.conns.iter().position(|c| c.id == id)?;
                let c = &mut self.conns[idx];
                let hold = c.negotiated.as_ref().map_or(0, |n| n.hold_time);
                if hold != 0 {
                    c.hold.start(now, Duration::from_secs(u64::from(hold)));
                }
                let id = c.id;
                let negotiated = Box::new(c.negotiated.clone().expect("negotiated in OpenConfirm"));
                out.push(Action::Up {
                    conn: id,
                    negotiated,
                });
                Some(Reason::KeepaliveReceived)
            }
            (ConnState::Established, Message::Keepalive) => {
                self.restart_hold(now, idx);
                None
            }
            (ConnState::Established, Message::Update(u)) => {
                self.restart_hold(now, idx);
                self.update_received(now, idx, u, out)
            }
            (ConnState::Established, Message::RouteRefresh(rr)) => {
                self.restart_hold(now, idx);
                let n = self.conns[idx]
                    .negotiated
                    .as_ref()
                    .expect("negotiated in Established");
                // RFC 2918 §4: a ROUTE-REFRESH for a family not negotiated
                // is ignored; RFC 7313 §4: so are subtypes other than 0
                // (BoRR/EoRR from the peer concern its own routes).
                if rr.subtype == 0 && n.families.contains(&rr.family) {
                    out.push(Action::RouteRefresh {
                        family: rr.family,
                        enhanced: n.enhanced_route_refresh,
                    });
                }
                None
            }
            (state, _) => {
                // Any other message: Finite State Machine Error with the
                // RFC 6608 subcode of the state it arrived in.
                let sub = match state {
                    ConnState::OpenSent => notify::fsm::UNEXPECTED_MESSAGE_IN_OPENSENT,
                    ConnState::OpenConfirm => notify::fsm::UNEXPECTED_MESSAGE_IN_OPENCONFIRM,
                    ConnState::Established => notify::fsm::UNEXPECTED_MESSAGE_IN_ESTABLISHED,
                };
                let c = self.conns.remove(idx);
                Some(self.fail(
                    now,
                    c,
                    Notification::new(notify::FSM_ERROR, sub, Vec::new()),
                    out,
                ))
            }
        }
    }

    fn restart_hold(&mut self, now: Instant, idx: usize) {
        let c = &mut self.conns[idx];
        let hold = c.negotiated.as_ref().map_or(0, |n| n.hold_time);
        if hold != 0 {
            c.hold.start(now, Duration::from_secs(u64::from(hold)));
        }
    }

    fn update_received(
        &mut self,
        now: Instant,
        idx: usize,
        u: crate::update::Update,
        out: &mut Vec<Action>,
    ) -> Option<Reason> {
        let ctx = self.conns[idx]
            .negotiated
            .as_ref()
            .map(|n| n.rx)
            .unwrap_or_default();
        let verdict = u.validate(&ctx);
        self.stats.updates_received += 1;
        if let Some(e) = verdict.reset_error() {
            // RFC 7606 "session reset": the NOTIFICATION of the error.
            let n = e.to_notification();
            let c = self.conns.remove(idx);
            return Some(self.fail(now, c, n, out));
        }
        let announced = u.announced().count();
        self.stats.prefixes_received += announced as u64;
        out.push(Action::UpdateReceived(UpdateReceived {
            announced,
            withdrawn: u.withdrawals().count(),
            end_of_rib: u.end_of_rib_family(),
            action: verdict.action,
            errors: verdict.errors.iter().map(|e| e.to_string()).collect(),
            disabled_families: verdict.disabled_families,
        }));
        None
    }

    fn open_received(
        &mut self,
        now: Instant,
        idx: usize,
        open: Open,
        out: &mut Vec<Action>,
    ) -> Option<Reason> {
        let negotiated = match negotiate(&self.config, &self.local_open, &open) {
            Ok(n) => n,
            Err(e) => {
                // Event 22 BGPOpenMsgErr.
                let c = self.conns.remove(idx);
                return Some(self.fail(now, c, e.to_notification(), out));
            }
        };
        let id = self.conns[idx].id;
        // §6.8 collision detection against the other connection.
        // Of the others, the most advanced: one still in OpenSent has no
        // Identifier to compare yet.
        let other = (0..self.conns.len())
            .filter(|&i| self.conns[i].id != id)
            .max_by_key(|&i| self.conns[i].state);
        if let Some(other) = other {
            let o = &self.conns[other];
            let established_for = now.saturating_duration_since(o.since);
            let peer_restarted = o.state == ConnState::Established
                && established_for >= COLLISION_WINDOW
                && o.negotiated
                    .as_ref()
                    .is_some_and(|n| n.peer_graceful_restart.is_some());
            if peer_restarted {
                // RFC 4724 §4.2: a new OPEN from a graceful-restart peer
                // while its session is established means the peer
                // restarted: the old session ends, the new one goes on.
                let old = self.conns.remove(other);
                out.push(Action::Close { conn: old.id });
                out.push(Action::Down {
                    reason: Reason::PeerRestarted,
                });
            } else if o.state == ConnState::Established && established_for >= COLLISION_WINDOW {
                // "If a connection collision occurs with an existing BGP
                // connection that is in the Established state, then the BGP
                // speaker unconditionally closes off the newly created
                // connection."
                let c = self.conns.remove(idx);
                let n = Notification::cease(notify::cease::CONNECTION_COLLISION_RESOLUTION);
                self.send_notification(&c, n, out);
                out.push(Action::Close { conn: c.id });
                return Some(Reason::Collision);
            } else if o.state >= ConnState::OpenConfirm {
                // "compare the BGP Identifiers ... If the value of the local
                // BGP Identifier is less than the remote one, the local
                // system closes the BGP connection that already exists ...
                // and accepts the BGP connection initiated by the remote
                // system. Otherwise, the local system closes the newly
                // created BGP connection": the connection opened by the
                // speaker with the higher Identifier survives. A connection
                // that became Established an instant before the other's OPEN
                // arrived is still part of the same collision, so the same
                // rule applies — the peer applies it too.
                let keep = if u32::from(self.config.router_id) > u32::from(open.bgp_id) {
                    Direction::Outgoing
                } else {
                    Direction::Incoming
                };
                let loser = if self.conns[idx].direction == keep {
                    other
                } else {
                    idx
                };
                let c = self.conns.remove(loser);
                let n = Notification::cease(notify::cease::CONNECTION_COLLISION_RESOLUTION);
                self.send_notification(&c, n, out);
                out.push(Action::Close { conn: c.id });
                if c.state == ConnState::Established {
                    out.push(Action::Down {
                        reason: Reason::Collision,
                    });
                }
                if c.id == id {
                    return Some(Reason::Collision);
                }
            }
        }
        let idx = self.conns.iter().position(|c| c.id == id)?;
        // §8.2.2 OpenSent, BGPOpen: "sends a KEEPALIVE message, sets a
        // KeepaliveTimer, sets the HoldTimer according to the negotiated
        // value, and changes its state to OpenConfirm."
        let c = &mut self.conns[idx];
        c.state = ConnState::OpenConfirm;
        if negotiated.hold_time == 0 {
            c.hold.stop();
            c.keepalive.stop();
        } else {
            c.hold
                .start(now, Duration::from_secs(u64::from(negotiated.hold_time)));
            let ka = self.jitter.apply(negotiated.keepalive);
            c.keepalive.start(now, ka);
        }
        c.negotiated = Some(negotiated);
        out.push(Action::Send {
            conn: id,
            message: Message::Keepalive,
            ctx: Context::default(),
        });
        self.stats.messages_sent += 1;
        Some(Reason::OpenReceived)
    }

    /// Before a connection becomes Established, the other one may have
    /// become Established first (both OPENs crossed); keep the first.
    fn collision_on_established(&mut self, idx: usize, out: &mut Vec<Action>) -> Option<Reason> {
        let id = self.conns[idx].id;
        if self
            .conns
            .iter()
            .any(|c| c.id != id && c.state == ConnState::Established)
        {
            let c = self.conns.remove(idx);
            let n = Notification::cease(notify::cease::CONNECTION_COLLISION_RESOLUTION);
            self.send_notification(&c, n, out);
            out.push(Action::Close { conn: c.id });
            return Some(Reason::Collision);
        }
        None
    }
}

#[cfg(test)]
mod tests;

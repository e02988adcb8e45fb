//! One BFD session in asynchronous mode (RFC 5880 §6), sans IO: packets
//! and instants in, packets and state changes out, the next deadline on
//! request — in the style of the BGP FSM in `bgp_proto::fsm`.
//!
//! ```text
//!                             +--+
//!                             |  | UP, ADMIN DOWN, TIMER
//!                             |  V
//!                     DOWN  +------+  INIT
//!              +------------|      |------------+
//!              |            | DOWN |            |
//!              |  +-------->|      |<--------+  |
//!              |  |         +------+         |  |
//!              |  |                          |  |
//!              |  |               ADMIN DOWN,|  |
//!              |  |ADMIN DOWN,          DOWN,|  |
//!              |  |TIMER                TIMER|  |
//!              V  |                          |  V
//!            +------+                      +------+
//!       +----|      |                      |      |----+
//!   DOWN|    | INIT |--------------------->|  UP  |    |INIT, UP
//!       +--->|      | INIT, UP             |      |<---+
//!            +------+                      +------+
//! ```
//! (RFC 5880 §6.2.)

use std::time::{Duration, Instant};

use super::auth::{self, Key, Rejected};
use super::packet::{Diag, Packet, Received, State};

/// RFC 5880 §6.8.3: "When bfd.SessionState is not Up, the system MUST set
/// bfd.DesiredMinTxInterval to a value of not less than one second".
pub const SLOW_TX: Duration = Duration::from_secs(1);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub desired_min_tx: Duration,
    pub required_min_rx: Duration,
    pub detect_mult: u8,
    /// bfd.LocalDiscr: unique and non-zero.
    pub local_discriminator: u32,
    pub jitter_seed: u64,
    /// Authentication (RFC 5880 §6.7); none: bfd.AuthType 0.
    pub auth: Option<AuthConfig>,
}

/// bfd.AuthType and its key, and where the sequence numbers start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    pub key: Key,
    /// bfd.XmitAuthSeq's first value: §6.8.1 "MUST be initialized to a
    /// random 32 bit value" (the driver draws it).
    pub initial_sequence: u32,
}

/// What the driver must do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    Send(Packet),
    StateChange {
        from: State,
        to: State,
        diag: Diag,
    },
    /// A received packet failed authentication and was discarded.
    Discarded(Rejected),
}

/// A session's state as it crosses a hand-off between processes
/// ([`Session::to_resume`], [`Session::resume`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resumed {
    pub state: State,
    pub remote_state: State,
    pub remote_discr: u32,
    pub local_diag: Diag,
    pub remote_min_rx: Duration,
    pub remote_desired_min_tx: Duration,
    pub remote_detect_mult: u8,
    /// Until the next Control packet is due (§6.8.7).
    pub next_tx_in: Option<Duration>,
    /// What is left of the Detection Time (§6.8.4).
    pub detect_in: Option<Duration>,
    pub polling: bool,
    /// How long the session has been in its state.
    pub in_state_for: Duration,
    /// bfd.XmitAuthSeq (§6.8.1): it must go on growing, or an
    /// authenticated peer discards what follows (§6.7.3).
    pub xmit_auth_seq: u32,
    pub rcv_auth_seq: Option<u32>,
    pub auth_seq_known_for: Option<Duration>,
}

#[derive(Clone, Debug)]
pub struct Session {
    config: Config,
    state: State,
    remote_state: State,
    remote_discr: u32,
    local_diag: Diag,
    remote_min_rx: Duration,
    remote_desired_min_tx: Duration,
    remote_detect_mult: u8,
    next_tx: Option<Instant>,
    detect_at: Option<Instant>,
    /// A Poll Sequence is running (§6.5): P set until F comes back.
    polling: bool,
    rng: u64,
    since: Instant,
    /// bfd.XmitAuthSeq (§6.8.1).
    xmit_auth_seq: u32,
    /// bfd.RcvAuthSeq, when bfd.AuthSeqKnown is 1 (§6.8.1).
    rcv_auth_seq: Option<u32>,
    /// When bfd.AuthSeqKnown falls back to 0: §6.8.1 "if no packets have
    /// been received on this session for at least twice the Detection
    /// Time".
    auth_seq_known_until: Option<Instant>,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

impl Session {
    pub fn new(config: Config, now: Instant) -> Self {
        let rng = config.jitter_seed | 1;
        let xmit_auth_seq = config.auth.as_ref().map_or(0, |a| a.initial_sequence);
        Session {
            config,
            state: State::Down,
            remote_state: State::Down,
            remote_discr: 0,
            local_diag: Diag::None,
            // §6.8.1: bfd.RemoteMinRxInterval "MUST be initialized to 1".
            remote_min_rx: Duration::from_micros(1),
            remote_desired_min_tx: Duration::ZERO,
            remote_detect_mult: 0,
            next_tx: Some(now),
            detect_at: None,
            polling: false,
            rng,
            since: now,
            xmit_auth_seq,
            rcv_auth_seq: None,
            auth_seq_known_until: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn since(&self) -> Instant {
        self.since
    }

    pub fn diag(&self) -> Diag {
        self.local_diag
    }

    pub fn remote_discriminator(&self) -> u32 {
        self.remote_discr
    }

    pub fn local_discriminator(&self) -> u32 {
        self.config.local_discriminator
    }

    /// bfd.DesiredMinTxInterval in force: at least 1 s unless Up.
    fn desired_min_tx(&self) -> Duration {
        if self.state == State::Up {
            self.config.desired_min_tx
        } else {
            self.config.desired_min_tx.max(SLOW_TX)
        }
    }

    /// §6.8.4: "the Detection Time ... is equal to the value of Detect
    /// Mult received from the remote system, multiplied by the agreed
    /// transmit interval of the remote system (the greater of
    /// bfd.RequiredMinRxInterval and the last received Desired Min TX
    /// Interval)".
    pub fn detection_time(&self) -> Option<Duration> {
        (self.remote_detect_mult > 0).then(|| {
            self.config.required_min_rx.max(self.remote_desired_min_tx)
                * u32::from(self.remote_detect_mult)
        })
    }

    /// §6.8.7: the interval is the greater of bfd.DesiredMinTxInterval and
    /// bfd.RemoteMinRxInterval, reduced by 0–25% jitter (10–25% with a
    /// Detect Mult of 1).
    fn tx_interval(&mut self) -> Option<Duration> {
        if self.remote_min_rx.is_zero() {
            // "the system MUST NOT periodically transmit BFD Control
            // packets" when the remote asked for a zero RequiredMinRx.
            return None;
        }
        let base = self.desired_min_tx().max(self.remote_min_rx);
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let factor = if self.config.detect_mult == 1 {
            0.75 + 0.15 * u
        } else {
            0.75 + 0.25 * u
        };
        Some(base.mul_f64(factor))
    }

    /// The next packet to send, signed when authentication is in use.
    fn packet(&mut self, final_: bool) -> Packet {
        let p = Packet {
            diag: self.local_diag,
            state: self.state,
            poll: self.polling && !final_,
            final_,
            control_plane_independent: false,
            demand: false,
            detect_mult: self.config.detect_mult,
            my_discriminator: self.config.local_discriminator,
            your_discriminator: self.remote_discr,
            desired_min_tx: micros(self.desired_min_tx()),
            required_min_rx: micros(self.config.required_min_rx),
            required_min_echo_rx: 0,
            auth: None,
        };
        let Some(a) = &self.config.auth else {
            return p;
        };
        // §6.7.3/§6.7.4: bfd.XmitAuthSeq goes into the packet; the
        // Meticulous variants MUST increment it for every packet, the
        // others MAY: it grows by one per packet for all.
        let seq = self.xmit_auth_seq;
        self.xmit_auth_seq = seq.wrapping_add(1);
        auth::sign(p, &a.key, seq)
    }

    /// The authentication of a received packet (§6.8.6, §6.7), sequence
    /// numbers included; bfd.RcvAuthSeq follows what it accepts.
    fn authenticate(&mut self, now: Instant, r: &Received) -> Result<(), Rejected> {
        let Some(a) = &self.config.auth else {
            return match r.packet.auth {
                None => Ok(()),
                Some(_) => Err(Rejected::UnexpectedAuth),
            };
        };
        auth::verify(r, &a.key)?;
        let Some(section) = r.packet.auth else {
            return Err(Rejected::Unauthenticated);
        };
        if a.key.auth_type.digest_len().is_none() {
            // §6.7.2: the Simple Password has no sequence number.
            return Ok(());
        }
        if self.auth_seq_known_until.is_some_and(|t| now >= t) {
            self.rcv_auth_seq = None;
        }
        if let Some(last) = self.rcv_auth_seq {
            // §6.7.3/§6.7.4: in the unsigned 32-bit circular space, from
            // bfd.RcvAuthSeq (Meticulous: bfd.RcvAuthSeq + 1) to
            // bfd.RcvAuthSeq + 3 × Detect Mult inclusive.
            let ahead = section.sequence.wrapping_sub(last);
            let least = u32::from(a.key.auth_type.meticulous());
            let most = 3 * u32::from(self.config.detect_mult);
            if ahead < least || ahead > most {
                return Err(Rejected::BadSequence);
            }
        }
        // Otherwise bfd.AuthSeqKnown becomes 1 with this sequence number.
        self.rcv_auth_seq = Some(section.sequence);
        Ok(())
    }

    fn set_state(&mut self, now: Instant, to: State, diag: Diag, out: &mut Vec<Output>) {
        if to == self.state {
            return;
        }
        let from = self.state;
        self.state = to;
        self.local_diag = diag;
        self.since = now;
        out.push(Output::StateChange { from, to, diag });
        // The transmit interval changes with Up (1 s floor on or off):
        // §6.8.3 — a Poll Sequence announces it.
        if from == State::Up || to == State::Up {
            self.polling = true;
        }
        // Send the news at once rather than at the next interval.
        self.next_tx = Some(now);
    }

    /// A received packet, already through [`Packet::decode`]'s checks and
    /// demultiplexed to this session.
    pub fn receive(&mut self, now: Instant, r: &Received) -> Vec<Output> {
        let p = &r.packet;
        let mut out = Vec::new();
        if self.state == State::AdminDown {
            return out;
        }
        // §6.8.6: "If the Your Discriminator field is zero and the State
        // field is not Down or AdminDown, the packet MUST be discarded."
        if p.your_discriminator == 0 && !matches!(p.state, State::Down | State::AdminDown) {
            return out;
        }
        if p.your_discriminator != 0 && p.your_discriminator != self.config.local_discriminator {
            return out;
        }
        // §6.8.6: the A bit against bfd.AuthType, then §6.7's rules.
        if let Err(why) = self.authenticate(now, r) {
            out.push(Output::Discarded(why));
            return out;
        }
        self.remote_discr = p.my_discriminator;
        self.remote_state = p.state;
        self.remote_desired_min_tx = Duration::from_micros(u64::from(p.desired_min_tx));
        self.remote_detect_mult = p.detect_mult;
        let new_min_rx = Duration::from_micros(u64::from(p.required_min_rx));
        if new_min_rx != self.remote_min_rx {
            self.remote_min_rx = new_min_rx;
            // A slower peer: honour it from the next packet on.
            self.next_tx = Some(now.min(self.next_tx.unwrap_or(now)));
        }
        // §6.8.6: "If the Final (F) bit is set ... the Poll Sequence is
        // terminated."
        if p.final_ {
            self.polling = false;
        }
        self.detect_at = self.detection_time().map(|d| now + d);
        if self.config.auth.is_some() {
            self.auth_seq_known_until = self.detection_time().map(|d| now + 2 * d);
        }
        if p.state == State::AdminDown {
            if self.state != State::Down {
                self.set_state(
                    now,
                    State::Down,
                    Diag::NeighborSignaledSessionDown,
                    &mut out,
                );
            }
        } else {
            match (self.state, p.state) {
                (State::Down, State::Down) => {
                    self.set_state(now, State::Init, Diag::None, &mut out)
                }
                (State::Down, State::Init) => self.set_state(now, State::Up, Diag::None, &mut out),
                (State::Init, State::Init | State::Up) => {
                    self.set_state(now, State::Up, Diag::None, &mut out)
                }
                (State::Up, State::Down) => self.set_state(
                    now,
                    State::Down,
                    Diag::NeighborSignaledSessionDown,
                    &mut out,
                ),
                _ => {}
            }
        }
        // §6.8.7: "If a BFD Control packet is received with the Poll (P)
        // bit set to 1, the receiving system MUST transmit a BFD Control
        // packet with the Poll (P) bit clear and the Final (F) bit set as
        // soon as practicable, without respect to the transmission timer".
        if p.poll {
            out.push(Output::Send(self.packet(true)));
        }
        out
    }

    /// Timers: transmission and detection.
    pub fn poll(&mut self, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        if self.detect_at.is_some_and(|t| now >= t) {
            self.detect_at = None;
            // §6.8.1: bfd.RemoteDiscr "MUST be set to zero if the Detection
            // Time expires"; §6.8.4: the session goes Down with diag 1.
            self.remote_discr = 0;
            self.remote_detect_mult = 0;
            self.remote_min_rx = Duration::from_micros(1);
            if matches!(self.state, State::Init | State::Up) {
                self.set_state(
                    now,
                    State::Down,
                    Diag::ControlDetectionTimeExpired,
                    &mut out,
                );
            }
        }
        if self.state != State::AdminDown && self.next_tx.is_some_and(|t| now >= t) {
            out.push(Output::Send(self.packet(false)));
            self.next_tx = self.tx_interval().map(|d| now + d);
        }
        out
    }

    pub fn next_deadline(&self) -> Option<Instant> {
        [self.next_tx, self.detect_at].into_iter().flatten().min()
    }

    /// The session's state variables (RFC 5880 §6.8.1) to go on in
    /// another process (a live hand-off): the timers as what is left of
    /// them, never as `Instant`s.
    pub fn to_resume(&self, now: Instant) -> Resumed {
        let left = |t: Option<Instant>| t.map(|t| t.saturating_duration_since(now));
        Resumed {
            state: self.state,
            remote_state: self.remote_state,
            remote_discr: self.remote_discr,
            local_diag: self.local_diag,
            remote_min_rx: self.remote_min_rx,
            remote_desired_min_tx: self.remote_desired_min_tx,
            remote_detect_mult: self.remote_detect_mult,
            next_tx_in: left(self.next_tx),
            detect_in: left(self.detect_at),
            polling: self.polling,
            in_state_for: now.saturating_duration_since(self.since),
            xmit_auth_seq: self.xmit_auth_seq,
            rcv_auth_seq: self.rcv_auth_seq,
            auth_seq_known_for: left(self.auth_seq_known_until),
        }
    }

    /// A session that goes on from `r` (handed by another process) under
    /// `config`, which must keep bfd.LocalDiscr (the peer knows it as
    /// Your Discriminator, §6.8.6). Nothing is sent until the next
    /// transmission falls due, and the Detection Time goes on where it was
    /// (§6.8.4): the peer sees no change.
    pub fn resume(config: Config, now: Instant, r: Resumed) -> Self {
        let at = |d: Option<Duration>| d.map(|d| now + d);
        Session {
            rng: config.jitter_seed | 1,
            config,
            state: r.state,
            remote_state: r.remote_state,
            remote_discr: r.remote_discr,
            local_diag: r.local_diag,
            remote_min_rx: r.remote_min_rx,
            remote_desired_min_tx: r.remote_desired_min_tx,
            remote_detect_mult: r.remote_detect_mult,
            next_tx: at(r.next_tx_in),
            detect_at: at(r.detect_in),
            polling: r.polling,
            since: now.checked_sub(r.in_state_for).unwrap_or(now),
            xmit_auth_seq: r.xmit_auth_seq,
            rcv_auth_seq: r.rcv_auth_seq,
            auth_seq_known_until: at(r.auth_seq_known_for),
        }
    }

    /// AdminDown (§6.8.16): tell the peer, stop.
    pub fn admin_down(&mut self, now: Instant) -> Vec<Output> {
        let mut out = Vec::new();
        self.set_state(now, State::AdminDown, Diag::AdministrativelyDown, &mut out);
        out.push(Output::Send(self.packet(false)));
        self.next_tx = None;
        self.detect_at = None;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfd::packet::AuthType;

    fn cfg(discr: u32) -> Config {
        Config {
            desired_min_tx: Duration::from_millis(100),
            required_min_rx: Duration::from_millis(100),
            detect_mult: 3,
            local_discriminator: discr,
            jitter_seed: u64::from(discr),
            auth: None,
        }
    }

    /// A packet as the other side's driver hands it over.
    fn rx(p: &Packet) -> Received {
        Received::decode(p.encode().as_bytes()).expect("decodes")
    }

    /// Two sessions wired back to back on simulated time.
    struct Pair {
        a: Session,
        b: Session,
        now: Instant,
        link_up: bool,
        changes: Vec<(char, State, State, Diag)>,
        /// (the session that discarded, why).
        discarded: Vec<(char, Rejected)>,
    }

    impl Pair {
        fn new() -> Pair {
            Pair::with(cfg(1), cfg(2))
        }

        fn with(a: Config, b: Config) -> Pair {
            let now = Instant::now();
            Pair {
                a: Session::new(a, now),
                b: Session::new(b, now),
                now,
                link_up: true,
                changes: Vec::new(),
                discarded: Vec::new(),
            }
        }

        fn deliver(&mut self, from: char, outs: Vec<Output>) {
            for o in outs {
                match o {
                    Output::Send(p) if self.link_up => {
                        let reply = if from == 'a' {
                            self.b.receive(self.now, &rx(&p))
                        } else {
                            self.a.receive(self.now, &rx(&p))
                        };
                        self.deliver(if from == 'a' { 'b' } else { 'a' }, reply);
                    }
                    Output::Send(_) => {}
                    Output::StateChange { from: f, to, diag } => {
                        self.changes.push((from, f, to, diag))
                    }
                    Output::Discarded(why) => self.discarded.push((from, why)),
                }
            }
        }

        /// Runs until `until`, stepping to each deadline.
        fn run(&mut self, until: Instant) {
            loop {
                let next = [self.a.next_deadline(), self.b.next_deadline()]
                    .into_iter()
                    .flatten()
                    .min();
                match next {
                    Some(t) if t <= until => {
                        self.now = t.max(self.now);
                        let oa = self.a.poll(self.now);
                        self.deliver('a', oa);
                        let ob = self.b.poll(self.now);
                        self.deliver('b', ob);
                    }
                    _ => {
                        self.now = until;
                        return;
                    }
                }
            }
        }
    }

    #[test]
    fn a_session_handed_over_goes_on_unseen_by_the_peer() {
        for t in [None, Some(AuthType::MeticulousKeyedSha1)] {
            let conf = |d| match t {
                Some(t) => keyed(d, t, b"key-1", 1000),
                None => cfg(d),
            };
            let mut p = Pair::with(conf(1), conf(2));
            let t0 = p.now;
            p.run(t0 + Duration::from_secs(3));
            assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
            let changes = p.changes.len();
            // `a` handed over with 20 ms of silence before the new
            // process resumes it (well under the 300 ms detection time).
            let r = p.a.to_resume(p.now);
            assert_eq!(r.state, State::Up);
            let pause = Duration::from_millis(20);
            p.a = Session::resume(conf(1), p.now + pause, r);
            p.now += pause;
            p.run(p.now + Duration::from_secs(5));
            assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up), "{t:?}");
            assert_eq!(p.changes.len(), changes, "no state change: {:?}", p.changes);
            assert_eq!(p.discarded, vec![], "{t:?}: the sequence went on growing");
        }
    }

    #[test]
    fn a_handed_over_session_still_detects_silence_at_the_handed_deadline() {
        let mut p = Pair::new();
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(3));
        let r = p.a.to_resume(p.now);
        let detect = r.detect_in.expect("a detection deadline while Up");
        let mut a = Session::resume(cfg(1), p.now, r);
        let late = a.poll(p.now + detect - Duration::from_micros(1));
        assert_eq!(a.state(), State::Up, "{late:?}");
        let out = a.poll(p.now + detect);
        assert!(out.contains(&Output::StateChange {
            from: State::Up,
            to: State::Down,
            diag: Diag::ControlDetectionTimeExpired
        }));
    }

    #[test]
    fn three_way_handshake_to_up() {
        let mut p = Pair::new();
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(3));
        assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
        assert!(
            p.changes
                .contains(&('a', State::Down, State::Init, Diag::None))
                || p.changes
                    .contains(&('a', State::Down, State::Up, Diag::None))
        );
        // Up: the agreed interval is 100 ms, the detection time 300 ms.
        assert_eq!(p.a.detection_time(), Some(Duration::from_millis(300)));
    }

    #[test]
    fn silence_brings_it_down_within_the_detection_time() {
        let mut p = Pair::new();
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(3));
        p.link_up = false;
        let cut = p.now;
        p.run(cut + Duration::from_secs(1));
        let down: Vec<_> = p.changes.iter().filter(|c| c.2 == State::Down).collect();
        assert_eq!(down.len(), 2, "{:?}", p.changes);
        assert!(
            down.iter()
                .all(|c| c.3 == Diag::ControlDetectionTimeExpired)
        );
        assert!(
            p.a.since() - cut <= Duration::from_millis(300),
            "{:?}",
            p.a.since() - cut
        );
        // And back up when the link returns.
        p.link_up = true;
        let back = p.now;
        p.run(back + Duration::from_secs(4));
        assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up));
    }

    #[test]
    fn the_peer_signals_down_and_admin_down() {
        let mut p = Pair::new();
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(3));
        let outs = p.b.admin_down(p.now);
        p.deliver('b', outs);
        assert_eq!(p.a.state(), State::Down);
        assert_eq!(p.a.diag(), Diag::NeighborSignaledSessionDown);
        assert_eq!(p.b.state(), State::AdminDown);
    }

    #[test]
    fn poll_is_answered_with_final_and_ends_the_sequence() {
        let now = Instant::now();
        let mut a = Session::new(cfg(1), now);
        let probe = Packet {
            poll: true,
            ..a.packet(false)
        };
        let probe = Packet {
            my_discriminator: 9,
            your_discriminator: 1,
            state: State::Down,
            ..probe
        };
        let out = a.receive(now, &rx(&probe));
        assert!(
            out.iter()
                .any(|o| matches!(o, Output::Send(p) if p.final_ && !p.poll)),
            "{out:?}"
        );
        a.polling = true;
        let fin = Packet {
            poll: false,
            final_: true,
            ..probe
        };
        a.receive(now, &rx(&fin));
        assert!(!a.polling);
    }

    #[test]
    fn slow_until_up_and_jittered() {
        let now = Instant::now();
        let mut a = Session::new(cfg(1), now);
        a.poll(now);
        let d = a.next_deadline().unwrap() - now;
        // Down: 1 s floor, 75–100% jitter.
        assert!(
            d >= Duration::from_millis(750) && d <= Duration::from_secs(1),
            "{d:?}"
        );
    }

    #[test]
    fn zero_your_discriminator_is_only_for_down() {
        let now = Instant::now();
        let mut a = Session::new(cfg(1), now);
        let p = Packet {
            state: State::Up,
            your_discriminator: 0,
            my_discriminator: 5,
            ..a.packet(false)
        };
        assert!(a.receive(now, &rx(&p)).is_empty());
        assert_eq!(a.remote_discriminator(), 0);
    }

    fn keyed(discr: u32, t: AuthType, secret: &[u8], seq: u32) -> Config {
        Config {
            auth: Some(AuthConfig {
                key: Key::new(t, 1, secret).expect("key"),
                initial_sequence: seq,
            }),
            ..cfg(discr)
        }
    }

    #[test]
    fn authenticated_sessions_come_up_and_sign_every_packet() {
        for t in AuthType::ALL {
            let mut p = Pair::with(
                keyed(1, t, b"key-1", u32::MAX - 2),
                keyed(2, t, b"key-1", 77),
            );
            let t0 = p.now;
            p.run(t0 + Duration::from_secs(3));
            assert_eq!((p.a.state(), p.b.state()), (State::Up, State::Up), "{t:?}");
            assert_eq!(p.discarded, vec![], "{t:?}");
            // §6.7.3/§6.7.4: bfd.XmitAuthSeq grows by one per packet, in
            // the circular space (a started 3 below the wrap).
            let sent = |s: &mut Session, now| {
                s.poll(now + Duration::from_secs(1))
                    .into_iter()
                    .find_map(|o| match o {
                        Output::Send(p) => p.auth,
                        _ => None,
                    })
                    .expect("a signed packet")
            };
            let now = p.now;
            let first = sent(&mut p.a, now);
            let second = sent(&mut p.a, now + Duration::from_secs(1));
            assert_eq!(first.auth_type, t);
            if t != AuthType::SimplePassword {
                assert_eq!(second.sequence, first.sequence.wrapping_add(1), "{t:?}");
            }
        }
    }

    #[test]
    fn a_wrong_key_or_none_keeps_the_session_down() {
        let t = AuthType::MeticulousKeyedSha1;
        let mut p = Pair::with(keyed(1, t, b"right", 1), keyed(2, t, b"wrong", 1));
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(5));
        assert_eq!((p.a.state(), p.b.state()), (State::Down, State::Down));
        assert!(p.changes.is_empty(), "{:?}", p.changes);
        assert!(
            p.discarded.contains(&('a', Rejected::BadDigest)),
            "{:?}",
            p.discarded
        );
        assert!(
            p.discarded.contains(&('b', Rejected::BadDigest)),
            "{:?}",
            p.discarded
        );

        // One side unauthenticated: §6.8.6 discards in both directions.
        let mut p = Pair::with(keyed(1, t, b"right", 1), cfg(2));
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(5));
        assert_eq!((p.a.state(), p.b.state()), (State::Down, State::Down));
        assert!(p.discarded.contains(&('a', Rejected::Unauthenticated)));
        assert!(p.discarded.contains(&('b', Rejected::UnexpectedAuth)));

        // Another Key ID for the same secret: not our key.
        let other_id = Config {
            auth: Some(AuthConfig {
                key: Key::new(t, 2, b"right").unwrap(),
                initial_sequence: 1,
            }),
            ..cfg(2)
        };
        let mut p = Pair::with(keyed(1, t, b"right", 1), other_id);
        let t0 = p.now;
        p.run(t0 + Duration::from_secs(5));
        assert_eq!(p.a.state(), State::Down);
        assert!(p.discarded.contains(&('a', Rejected::WrongKey)));
    }

    /// A packet from discriminator 9, signed with sequence `seq`.
    fn from_peer(t: AuthType, seq: u32) -> Received {
        let p = Packet::first_from(9, 100_000);
        rx(&auth::sign(p, &Key::new(t, 1, b"k").unwrap(), seq))
    }

    /// Feeds `seqs` in order at `now`; what each came to.
    fn judge(
        s: &mut Session,
        t: AuthType,
        now: Instant,
        seqs: &[u32],
    ) -> Vec<Result<(), Rejected>> {
        seqs.iter()
            .map(|&seq| {
                let out = s.receive(now, &from_peer(t, seq));
                match out.iter().find_map(|o| match o {
                    Output::Discarded(why) => Some(*why),
                    _ => None,
                }) {
                    Some(why) => Err(why),
                    None => Ok(()),
                }
            })
            .collect()
    }

    #[test]
    fn keyed_sequence_window_is_last_to_three_detect_mult_ahead() {
        let t = AuthType::KeyedSha1;
        let now = Instant::now();
        let mut a = Session::new(keyed(1, t, b"k", 0), now);
        let bad = Err(Rejected::BadSequence);
        // §6.7.4: unknown at first (any sequence is learned), then from
        // bfd.RcvAuthSeq to bfd.RcvAuthSeq + 3 × Detect Mult (9) inclusive.
        assert_eq!(
            judge(&mut a, t, now, &[1000, 1000, 1009, 1008, 1019, 1018]),
            vec![Ok(()), Ok(()), Ok(()), bad, bad, Ok(())]
        );
        // Circular: across the 32-bit wrap.
        let mut a = Session::new(keyed(1, t, b"k", 0), now);
        assert_eq!(
            judge(&mut a, t, now, &[u32::MAX - 1, 3, u32::MAX]),
            vec![Ok(()), Ok(()), bad]
        );
    }

    #[test]
    fn meticulous_sequence_numbers_must_grow() {
        let t = AuthType::MeticulousKeyedMd5;
        let now = Instant::now();
        let mut a = Session::new(keyed(1, t, b"k", 0), now);
        let bad = Err(Rejected::BadSequence);
        // §6.7.3: from bfd.RcvAuthSeq + 1 to + 3 × Detect Mult inclusive:
        // a replay (the same number) is refused.
        assert_eq!(
            judge(&mut a, t, now, &[50, 50, 51, 60, 70, 69, 61]),
            vec![Ok(()), bad, Ok(()), Ok(()), bad, Ok(()), bad]
        );
    }

    #[test]
    fn a_forged_packet_does_not_move_the_window() {
        let t = AuthType::MeticulousKeyedSha1;
        let now = Instant::now();
        let mut a = Session::new(keyed(1, t, b"k", 0), now);
        assert_eq!(judge(&mut a, t, now, &[100]), vec![Ok(())]);
        // Within the window but signed with another key.
        let forged = Packet {
            auth: None,
            ..from_peer(t, 105).packet
        };
        let forged = rx(&auth::sign(forged, &Key::new(t, 1, b"x").unwrap(), 105));
        assert_eq!(
            a.receive(now, &forged),
            vec![Output::Discarded(Rejected::BadDigest)]
        );
        // bfd.RcvAuthSeq is still 100: 101 passes.
        assert_eq!(judge(&mut a, t, now, &[101]), vec![Ok(())]);
    }

    #[test]
    fn the_sequence_is_forgotten_after_twice_the_detection_time() {
        let t = AuthType::MeticulousKeyedSha1;
        let t0 = Instant::now();
        let mut a = Session::new(keyed(1, t, b"k", 0), t0);
        assert_eq!(judge(&mut a, t, t0, &[100]), vec![Ok(())]);
        // Detection Time: 3 × max(100 ms, 100 ms) = 300 ms.
        assert_eq!(a.detection_time(), Some(Duration::from_millis(300)));
        let bad = Err(Rejected::BadSequence);
        // §6.8.1: bfd.AuthSeqKnown stays 1 until no packet for twice the
        // Detection Time (a restarted peer's new numbers are learned then).
        let before = t0 + Duration::from_millis(600) - Duration::from_micros(1);
        assert_eq!(judge(&mut a, t, before, &[5000]), vec![bad]);
        // A rejected packet does not count as received.
        let at = t0 + Duration::from_millis(600);
        assert_eq!(
            judge(&mut a, t, at, &[5000, 5000, 5001]),
            vec![Ok(()), bad, Ok(())]
        );
    }
}

//! The FSM on simulated time: every state × event cell of RFC 4271 §8.2.2
//! that applies to a speaker like ours, OPEN checks, hold-time negotiation,
//! collision detection and DampPeerOscillations.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use super::*;
use crate::attribute::{AttrValue, PathAttribute};
use crate::capability::{Capability, GrFamily, GracefulRestart};
use crate::consts::AS_TRANS;
use crate::open::OptParam;
use crate::update::Update;

const OUT: ConnId = ConnId(1);
const IN: ConnId = ConnId(2);

fn config() -> Config {
    Config {
        local_asn: 65001,
        peer_asn: PeerAs::Is(65000),
        router_id: Ipv4Addr::new(192, 0, 2, 2),
        hold_time: 9,
        keepalive: Duration::from_secs(3),
        connect_retry: Duration::from_secs(5),
        passive: false,
        capabilities: vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::Multiprotocol(Family::IPV6_UNICAST),
            Capability::RouteRefresh,
            Capability::EnhancedRouteRefresh,
        ],
        idle_hold_time: Duration::from_secs(1),
        max_idle_hold_time: Duration::from_secs(120),
        jitter_seed: 7,
    }
}

fn peer_open(asn: u32, hold: u16, id: [u8; 4]) -> Open {
    Open::new(
        asn,
        hold,
        Ipv4Addr::from(id),
        vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::RouteRefresh,
            Capability::EnhancedRouteRefresh,
        ],
    )
}

fn bytes(m: Message) -> Vec<u8> {
    m.encode(&Context::default()).unwrap()
}

fn open_bytes(o: Open) -> Vec<u8> {
    bytes(Message::Open(o))
}

fn keepalive() -> Vec<u8> {
    bytes(Message::Keepalive)
}

/// A session and a clock.
struct T {
    s: Session,
    now: Instant,
}

impl T {
    fn new(config: Config) -> Self {
        T {
            s: Session::new(config),
            now: Instant::now(),
        }
    }
    fn ev(&mut self, e: Event) -> Vec<Action> {
        self.s.handle(self.now, e)
    }
    fn after(&mut self, d: Duration) -> Vec<Action> {
        self.now += d;
        self.ev(Event::Tick)
    }
    fn data(&mut self, conn: ConnId, b: Vec<u8>) -> Vec<Action> {
        self.ev(Event::Data { conn, bytes: b })
    }
    /// Idle → Established over our outgoing connection.
    fn establish(&mut self) -> Vec<Action> {
        self.ev(Event::ManualStart);
        self.ev(Event::TcpConnected {
            conn: OUT,
            direction: Direction::Outgoing,
        });
        self.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
        let a = self.data(OUT, keepalive());
        assert_eq!(self.s.state(), State::Established);
        a
    }
}

/// The messages sent, as the peer would decode them: a typed one is
/// encoded in the context the FSM gave (as the driver does) and decoded
/// again, so that what goes out must encode.
fn sent(actions: &[Action]) -> Vec<Message> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Send { message, ctx, .. } => {
                let bytes = message.encode(ctx).expect("a sent message encodes");
                let decoded = Message::decode(&bytes, &Context::default()).unwrap();
                assert_eq!(&decoded, message, "sent as typed");
                Some(decoded)
            }
            Action::SendEncoded { bytes, .. } => {
                Some(Message::decode(bytes, &Context::default()).unwrap())
            }
            _ => None,
        })
        .collect()
}

fn notification(actions: &[Action]) -> Option<(u8, u8)> {
    sent(actions).into_iter().find_map(|m| match m {
        Message::Notification(n) => Some((n.code, n.subcode)),
        _ => None,
    })
}

fn has(actions: &[Action], f: impl Fn(&Action) -> bool) -> bool {
    actions.iter().any(f)
}

// ---- Idle ----

#[test]
fn idle_manual_start_connects() {
    let mut t = T::new(config());
    let a = t.ev(Event::ManualStart);
    assert!(has(&a, |a| *a == Action::Connect));
    assert_eq!(t.s.state(), State::Connect);
    assert!(has(&a, |a| matches!(
        a,
        Action::StateChange {
            from: State::Idle,
            to: State::Connect,
            reason: Reason::ManualStart
        }
    )));
}

#[test]
fn idle_passive_start_waits_in_active() {
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    let a = t.ev(Event::ManualStart);
    assert!(!has(&a, |a| *a == Action::Connect));
    assert_eq!(t.s.state(), State::Active);
    // The connect retry timer never makes a passive session connect.
    let a = t.after(Duration::from_secs(10));
    assert!(!has(&a, |a| *a == Action::Connect));
}

#[test]
fn idle_refuses_connections_and_ignores_the_rest() {
    let mut t = T::new(config());
    let a = t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    assert_eq!(a, vec![Action::Close { conn: IN }]);
    assert!(t.data(IN, keepalive()).is_empty());
    assert!(t.after(Duration::from_secs(100)).is_empty());
    assert!(
        t.ev(Event::ManualStop { notification: None }).is_empty() || t.s.state() == State::Idle
    );
    assert_eq!(t.s.state(), State::Idle);
    assert_eq!(t.s.next_deadline(), None);
}

// ---- Connect ----

#[test]
fn connect_retry_timer_retries_with_jitter() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    let d = t.s.next_deadline().unwrap() - t.now;
    // RFC 4271 §10: 0.75–1.0 of ConnectRetryTime.
    assert!(
        d >= Duration::from_millis(3750) && d <= Duration::from_secs(5),
        "{d:?}"
    );
    t.now += d;
    let a = t.ev(Event::Tick);
    assert_eq!(&a[..2], &[Action::AbortConnect, Action::Connect]);
    assert_eq!(t.s.state(), State::Connect);
}

#[test]
fn connect_tcp_up_sends_open() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    let a = t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    let m = sent(&a);
    let Message::Open(o) = &m[0] else {
        panic!("{m:?}")
    };
    assert_eq!((o.my_as, o.hold_time, o.asn()), (65001, 9, 65001));
    assert_eq!(t.s.state(), State::OpenSent);
    // The HoldTimer waits the suggested 4 minutes for the OPEN.
    assert_eq!(t.s.next_deadline(), Some(t.now + LARGE_HOLD_TIME));
}

#[test]
fn connect_tcp_failure_goes_active_then_retries() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnectFailed);
    assert_eq!(t.s.state(), State::Active);
    let a = t.after(Duration::from_secs(5));
    assert!(has(&a, |a| *a == Action::Connect));
    assert_eq!(t.s.state(), State::Connect);
}

#[test]
fn connect_accepts_the_peers_connection() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    let a = t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    assert!(matches!(sent(&a)[0], Message::Open(_)));
    assert_eq!(t.s.state(), State::OpenSent);
}

#[test]
fn connect_manual_stop() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    let a = t.ev(Event::ManualStop { notification: None });
    assert!(has(&a, |a| *a == Action::AbortConnect));
    assert_eq!(t.s.state(), State::Idle);
    assert_eq!(t.s.next_deadline(), None);
}

#[test]
fn late_outgoing_connection_after_stop_is_closed() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    t.ev(Event::ManualStop { notification: None });
    let a = t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    assert_eq!(a, vec![Action::Close { conn: OUT }]);
}

// ---- Active ----

#[test]
fn active_accepts_incoming_and_stops() {
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    assert_eq!(t.s.state(), State::OpenSent);
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::ManualStop { notification: None });
    assert_eq!(t.s.state(), State::Idle);
}

/// Peers often send OPEN and KEEPALIVE back to back, so one read holds
/// both. Each message is its own event (RFC 4271 §8.1.4): two state
/// changes, OpenSent → OpenConfirm and OpenConfirm → Established, each
/// with its reason — the logs must show every one.
#[test]
fn open_and_keepalive_in_one_read_are_two_state_changes() {
    let mut t = open_sent();
    let mut both = open_bytes(peer_open(65000, 9, [192, 0, 2, 1]));
    both.extend(keepalive());
    let a = t.data(OUT, both);
    let changes: Vec<(State, State, Reason)> = a
        .iter()
        .filter_map(|a| match a {
            Action::StateChange { from, to, reason } => Some((*from, *to, reason.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        [
            (State::OpenSent, State::OpenConfirm, Reason::OpenReceived),
            (
                State::OpenConfirm,
                State::Established,
                Reason::KeepaliveReceived
            ),
        ]
    );
    assert_eq!(t.s.state(), State::Established);
    assert_eq!(t.s.stats().established_transitions, 1);
}

// ---- OpenSent ----

fn open_sent() -> T {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t
}

#[test]
fn open_sent_valid_open_goes_open_confirm() {
    let mut t = open_sent();
    let a = t.data(OUT, open_bytes(peer_open(65000, 90, [192, 0, 2, 1])));
    assert_eq!(sent(&a), vec![Message::Keepalive]);
    assert_eq!(t.s.state(), State::OpenConfirm);
    // Hold time min(9, 90) = 9; keepalive min(3, 9/3) = 3, jittered.
    let d = t.s.next_deadline().unwrap() - t.now;
    assert!(
        d >= Duration::from_millis(2250) && d <= Duration::from_secs(3),
        "{d:?}"
    );
}

#[test]
fn open_sent_hold_timer_expires() {
    let mut t = open_sent();
    let a = t.after(LARGE_HOLD_TIME);
    assert_eq!(notification(&a), Some((4, 0)));
    assert!(has(&a, |a| *a == Action::Close { conn: OUT }));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn open_sent_tcp_closed_goes_active() {
    let mut t = open_sent();
    t.ev(Event::TcpClosed { conn: OUT });
    assert_eq!(t.s.state(), State::Active);
    let a = t.after(Duration::from_secs(5));
    assert!(has(&a, |a| *a == Action::Connect));
}

#[test]
fn open_sent_unexpected_messages_are_fsm_errors() {
    for m in [Message::Keepalive, Message::Update(Update::default())] {
        let mut t = open_sent();
        let a = t.data(OUT, bytes(m));
        // RFC 6608: Receive Unexpected Message in OpenSent State.
        assert_eq!(notification(&a), Some((5, 1)));
        assert_eq!(t.s.state(), State::Idle);
    }
}

#[test]
fn open_sent_notification_received_closes_without_reply() {
    let mut t = open_sent();
    let a = t.data(
        OUT,
        bytes(Message::Notification(Notification::new(2, 2, vec![]))),
    );
    assert_eq!(notification(&a), None);
    assert!(has(&a, |a| matches!(
        a,
        Action::NotificationReceived { .. }
    )));
    assert_eq!(t.s.state(), State::Idle);
    assert_eq!(t.s.stats().notifications_received, vec![(2, 2, 1)]);
}

#[test]
fn open_sent_manual_stop_sends_cease() {
    let mut t = open_sent();
    let n = Notification::cease_with_message(notify::cease::ADMINISTRATIVE_SHUTDOWN, "node-1");
    let a = t.ev(Event::ManualStop {
        notification: Some(n),
    });
    assert_eq!(notification(&a), Some((6, 2)));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn header_errors_get_their_notification_at_once() {
    // Length 18: answered as soon as the length field is in.
    let mut t = open_sent();
    let mut b = vec![0xff; 16];
    b.extend_from_slice(&[0, 18]);
    let a = t.data(OUT, b);
    assert_eq!(notification(&a), Some((1, 2)));
    let mut t = open_sent();
    let a = t.data(OUT, vec![0xff, 0xff, 0x00]);
    assert_eq!(notification(&a), Some((1, 1)));
    let mut t = open_sent();
    let mut b = vec![0xff; 16];
    b.extend_from_slice(&[0, 19, 9]);
    assert_eq!(notification(&t.data(OUT, b)), Some((1, 3)));
}

#[test]
fn messages_split_across_reads_are_framed() {
    let mut t = open_sent();
    let mut b = open_bytes(peer_open(65000, 90, [192, 0, 2, 1]));
    b.extend(keepalive());
    for chunk in b.chunks(7) {
        t.data(OUT, chunk.to_vec());
    }
    assert_eq!(t.s.state(), State::Established);
}

fn open_error(o: Open) -> (u8, u8, Vec<u8>) {
    let mut t = open_sent();
    let a = t.data(OUT, open_bytes(o));
    assert_eq!(t.s.state(), State::Idle);
    sent(&a)
        .into_iter()
        .find_map(|m| match m {
            Message::Notification(n) => Some((n.code, n.subcode, n.data)),
            _ => None,
        })
        .expect("a NOTIFICATION")
}

#[test]
fn open_checks() {
    // Bad peer AS.
    assert_eq!(open_error(peer_open(65099, 90, [192, 0, 2, 1])).1, 2);
    // AS_TRANS without the 4-octet capability.
    let mut o = peer_open(65000, 90, [192, 0, 2, 1]);
    o.my_as = AS_TRANS;
    o.params = vec![OptParam::Capabilities(vec![Capability::Multiprotocol(
        Family::IPV4_UNICAST,
    )])];
    assert_eq!(open_error(o).1, 2);
    // Hold time 1 and 2.
    assert_eq!(open_error(peer_open(65000, 1, [192, 0, 2, 1])).1, 6);
    assert_eq!(open_error(peer_open(65000, 2, [192, 0, 2, 1])).1, 6);
    // BGP Identifier 0.
    assert_eq!(open_error(peer_open(65000, 90, [0, 0, 0, 0])).1, 3);
    // Unsupported optional parameter (the deprecated authentication one).
    let mut o = peer_open(65000, 90, [192, 0, 2, 1]);
    o.params.push(OptParam::Unknown {
        param_type: 1,
        value: vec![0],
    });
    assert_eq!(open_error(o).1, 4);
    // No family in common: 2/7 with our multiprotocol capabilities.
    let o = Open::new(
        65000,
        90,
        Ipv4Addr::new(192, 0, 2, 1),
        vec![Capability::Multiprotocol(Family::new(
            crate::context::Afi(25),
            crate::context::Safi(65),
        ))],
    );
    let (code, sub, data) = open_error(o);
    assert_eq!((code, sub), (2, 7));
    assert_eq!(data, vec![1, 4, 0, 1, 0, 1, 1, 4, 0, 2, 0, 1]);
    // Version 3: 2/1 with data 0x0004.
    let mut v3 = open_bytes(peer_open(65000, 90, [192, 0, 2, 1]));
    v3[19] = 3;
    let mut t = open_sent();
    let a = t.data(OUT, v3);
    assert_eq!(notification(&a), Some((2, 1)));
}

#[test]
fn four_octet_peer_as_through_as_trans() {
    let mut t = T::new(Config {
        peer_asn: PeerAs::Is(4_200_000_001),
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    let o = peer_open(4_200_000_001, 90, [192, 0, 2, 1]);
    assert_eq!(o.my_as, AS_TRANS);
    t.data(OUT, open_bytes(o));
    assert_eq!(t.s.state(), State::OpenConfirm);
}

#[test]
fn same_router_id_is_an_error_only_for_ibgp() {
    let ibgp = Config {
        peer_asn: PeerAs::Is(65001),
        ..config()
    };
    let mut t = T::new(ibgp);
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    let a = t.data(OUT, open_bytes(peer_open(65001, 90, [192, 0, 2, 2])));
    assert_eq!(notification(&a), Some((2, 3)));
    let mut t = open_sent();
    t.data(OUT, open_bytes(peer_open(65000, 90, [192, 0, 2, 2])));
    assert_eq!(t.s.state(), State::OpenConfirm);
}

#[test]
fn hold_time_zero_means_no_keepalives() {
    let mut t = open_sent();
    t.data(OUT, open_bytes(peer_open(65000, 0, [192, 0, 2, 1])));
    t.data(OUT, keepalive());
    assert_eq!(t.s.state(), State::Established);
    let (_, n) = t.s.established().unwrap();
    assert_eq!((n.hold_time, n.keepalive), (0, Duration::ZERO));
    assert_eq!(t.s.next_deadline(), None);
    assert!(t.after(Duration::from_secs(3600)).is_empty());
}

#[test]
fn smaller_peer_hold_time_wins_and_scales_keepalive() {
    let mut t = open_sent();
    t.data(OUT, open_bytes(peer_open(65000, 3, [192, 0, 2, 1])));
    let a = t.data(OUT, keepalive());
    let Some(Action::Up { negotiated, .. }) = a.iter().find(|a| matches!(a, Action::Up { .. }))
    else {
        panic!()
    };
    assert_eq!(
        (negotiated.hold_time, negotiated.keepalive),
        (3, Duration::from_secs(1))
    );
}

// ---- OpenConfirm ----

fn open_confirm() -> T {
    let mut t = open_sent();
    t.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    t
}

#[test]
fn open_confirm_keepalive_establishes() {
    let mut t = open_confirm();
    let a = t.data(OUT, keepalive());
    assert!(has(&a, |a| matches!(a, Action::Up { conn: OUT, .. })));
    assert!(has(&a, |a| matches!(
        a,
        Action::StateChange {
            from: State::OpenConfirm,
            to: State::Established,
            ..
        }
    )));
    assert_eq!(t.s.stats().established_transitions, 1);
}

#[test]
fn open_confirm_keepalive_timer_sends_keepalive() {
    let mut t = open_confirm();
    let a = t.after(Duration::from_secs(3));
    assert_eq!(sent(&a), vec![Message::Keepalive]);
    assert_eq!(t.s.state(), State::OpenConfirm);
}

#[test]
fn open_confirm_hold_timer_expires() {
    let mut t = open_confirm();
    t.after(Duration::from_secs(3));
    t.after(Duration::from_secs(3));
    assert_eq!(t.s.state(), State::OpenConfirm);
    let a = t.after(Duration::from_secs(3));
    assert_eq!(notification(&a), Some((4, 0)));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn open_confirm_unexpected_and_failures() {
    let mut t = open_confirm();
    assert_eq!(
        notification(&t.data(OUT, bytes(Message::Update(Update::default())))),
        Some((5, 2))
    );
    assert_eq!(t.s.state(), State::Idle);
    let mut t = open_confirm();
    assert_eq!(
        notification(&t.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])))),
        Some((5, 2))
    );
    let mut t = open_confirm();
    t.ev(Event::TcpClosed { conn: OUT });
    assert_eq!(t.s.state(), State::Idle);
    let mut t = open_confirm();
    t.data(OUT, bytes(Message::Notification(Notification::cease(2))));
    assert_eq!(t.s.state(), State::Idle);
    let mut t = open_confirm();
    assert_eq!(
        notification(&t.ev(Event::ManualStop {
            notification: Some(Notification::cease(2))
        })),
        Some((6, 2))
    );
}

// ---- Established ----

#[test]
fn established_keepalives_and_updates_restart_the_hold_timer() {
    let mut t = T::new(config());
    t.establish();
    for _ in 0..10 {
        t.now += Duration::from_secs(8);
        t.data(OUT, keepalive());
        t.ev(Event::Tick);
    }
    assert_eq!(t.s.state(), State::Established);
    t.now += Duration::from_secs(8);
    t.data(
        OUT,
        bytes(Message::Update(Update::end_of_rib(Family::IPV4_UNICAST))),
    );
    t.after(Duration::from_secs(8));
    assert_eq!(t.s.state(), State::Established);
    let a = t.after(Duration::from_secs(1));
    assert_eq!(notification(&a), Some((4, 0)));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::HoldTimerExpired
        }));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn established_keepalive_timer_and_updates_sent() {
    let mut t = T::new(config());
    t.establish();
    let a = t.after(Duration::from_secs(3));
    assert_eq!(sent(&a), vec![Message::Keepalive]);
    // Sending UPDATEs restarts the keepalive timer.
    let eor = bytes(Message::Update(Update::end_of_rib(Family::IPV4_UNICAST)));
    let a = t.ev(Event::SendUpdates(vec![eor.clone()]));
    assert_eq!(
        a,
        vec![Action::SendEncoded {
            conn: OUT,
            bytes: eor
        }]
    );
    assert_eq!(t.s.next_deadline().unwrap() - t.now, Duration::from_secs(3));
}

#[test]
fn updates_are_only_sent_when_established() {
    let mut t = open_confirm();
    assert!(t.ev(Event::SendUpdates(vec![vec![1, 2, 3]])).is_empty());
}

#[test]
fn established_received_updates_are_counted_and_dropped() {
    let mut t = T::new(config());
    t.establish();
    let u = crate::hex::decode("ffffffffffffffffffffffffffffffff0037020000001b4001010040020602010000fde8400304c0000201c00804fde9006420c633640a").unwrap();
    let a = t.data(OUT, u);
    let Some(Action::UpdateReceived(r)) = a.iter().find(|a| matches!(a, Action::UpdateReceived(_)))
    else {
        panic!("{a:?}")
    };
    assert_eq!((r.announced, r.withdrawn, r.action), (1, 0, None));
    assert_eq!(t.s.stats().prefixes_received, 1);
}

/// A well-formed IPv4 UPDATE plus `extra`, encoded as is.
fn update_with(extra: PathAttribute) -> Vec<u8> {
    use crate::aspath::AsPath;
    use crate::attribute::Origin;
    let u = Update {
        attributes: vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65000]))),
            PathAttribute::new(AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1))),
            extra,
        ],
        nlri: vec![crate::nlri::Nlri::new("198.51.100.10/32".parse().unwrap())],
        ..Update::default()
    };
    bytes(Message::Update(u))
}

#[test]
fn established_malformed_updates_get_their_rfc7606_action() {
    // A bad optional attribute (COMMUNITIES of 3 octets): treat-as-withdraw,
    // the session stays.
    let mut t = T::new(config());
    t.establish();
    let bad_optional = update_with(PathAttribute {
        flags: 0xc0,
        type_code: 8,
        value: AttrValue::Unknown(vec![0xfd, 0xe9, 0]),
    });
    let a = t.data(OUT, bad_optional);
    let Some(Action::UpdateReceived(r)) = a.iter().find(|a| matches!(a, Action::UpdateReceived(_)))
    else {
        panic!("{a:?}")
    };
    assert_eq!(r.action, Some(Rfc7606::TreatAsWithdraw));
    assert_eq!(t.s.state(), State::Established);
    // An unrecognized well-known attribute: session reset, 3/2.
    let mut t = T::new(config());
    t.establish();
    let bad_mandatory = update_with(PathAttribute {
        flags: 0x40,
        type_code: 0x63,
        value: AttrValue::Unknown(vec![0]),
    });
    let a = t.data(OUT, bad_mandatory);
    assert_eq!(notification(&a), Some((3, 2)));
    assert!(has(&a, |a| matches!(a, Action::Down { .. })));
    assert_eq!(t.s.state(), State::Idle);
    let mut t = T::new(config());
    t.establish();
    // A syntactically incorrect NLRI field (prefix length 33): 3/10.
    let mut bad_nlri = update_with(PathAttribute::new(AttrValue::MultiExitDisc(0)));
    let at = bad_nlri.len() - 5;
    bad_nlri[at] = 33;
    assert_eq!(notification(&t.data(OUT, bad_nlri)), Some((3, 10)));
}

#[test]
fn established_open_is_an_fsm_error() {
    let mut t = T::new(config());
    t.establish();
    let a = t.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    assert_eq!(notification(&a), Some((5, 3)));
}

#[test]
fn established_route_refresh() {
    let mut t = T::new(config());
    t.establish();
    let rr = |f: Family, st: u8| {
        bytes(Message::RouteRefresh(
            crate::route_refresh::RouteRefresh::new(f, st),
        ))
    };
    let a = t.data(OUT, rr(Family::IPV4_UNICAST, 0));
    assert!(has(&a, |a| *a
        == Action::RouteRefresh {
            family: Family::IPV4_UNICAST,
            enhanced: true
        }));
    // A family not negotiated (the peer did not offer IPv6) is ignored.
    assert!(t.data(OUT, rr(Family::IPV6_UNICAST, 0)).is_empty());
    // BoRR from the peer concerns its routes, not ours.
    assert!(t.data(OUT, rr(Family::IPV4_UNICAST, 1)).is_empty());
}

#[test]
fn established_notification_and_tcp_close_bring_the_session_down() {
    let mut t = T::new(config());
    t.establish();
    let n = Notification::cease_with_message(2, "maintenance");
    let a = t.data(OUT, bytes(Message::Notification(n.clone())));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::NotificationReceived(n.clone())
        }));
    let mut t = T::new(config());
    t.establish();
    let a = t.ev(Event::TcpClosed { conn: OUT });
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::TcpClosed
        }));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn established_manual_stop_with_and_without_notification() {
    let mut t = T::new(config());
    t.establish();
    let a = t.ev(Event::ManualStop {
        notification: Some(Notification::cease_with_message(2, "node-1 shutting down")),
    });
    assert_eq!(notification(&a), Some((6, 2)));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::ManualStop
        }));
    // Graceful restart: close without a NOTIFICATION.
    let mut t = T::new(config());
    t.establish();
    let a = t.ev(Event::ManualStop { notification: None });
    assert_eq!(notification(&a), None);
    assert!(has(&a, |a| *a == Action::Close { conn: OUT }));
    assert_eq!(t.s.state(), State::Idle);
    // And it does not come back by itself.
    assert!(t.after(Duration::from_secs(600)).is_empty());
}

// ---- automatic restart and DampPeerOscillations ----

#[test]
fn failures_restart_automatically_with_growing_idle_hold() {
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    let mut waits = Vec::new();
    for _ in 0..9 {
        // Connect, then fail in OpenSent with a bad OPEN.
        t.ev(Event::TcpConnected {
            conn: OUT,
            direction: Direction::Outgoing,
        });
        t.data(OUT, open_bytes(peer_open(65099, 90, [192, 0, 2, 1])));
        assert_eq!(t.s.state(), State::Idle);
        let d = t.s.next_deadline().unwrap() - t.now;
        waits.push(d.as_secs());
        t.now += d;
        let a = t.ev(Event::Tick);
        assert!(has(&a, |a| *a == Action::Connect), "automatic start");
        assert!(has(&a, |a| matches!(
            a,
            Action::StateChange {
                reason: Reason::AutomaticStart,
                ..
            }
        )));
    }
    assert_eq!(waits, vec![1, 2, 4, 8, 16, 32, 64, 120, 120]);
    assert_eq!(t.s.connect_retry_counter(), 9);
}

#[test]
fn a_stable_session_resets_the_back_off() {
    let mut t = T::new(config());
    t.establish();
    t.ev(Event::TcpClosed { conn: OUT });
    assert_eq!(t.s.next_deadline().unwrap() - t.now, Duration::from_secs(1));
    t.now += Duration::from_secs(1);
    t.ev(Event::Tick);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t.data(OUT, open_bytes(peer_open(65000, 0, [192, 0, 2, 1])));
    t.data(OUT, keepalive());
    // Quick failure: 2 s next.
    t.ev(Event::TcpClosed { conn: OUT });
    assert_eq!(t.s.next_deadline().unwrap() - t.now, Duration::from_secs(2));
    t.now += Duration::from_secs(2);
    t.ev(Event::Tick);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t.data(OUT, open_bytes(peer_open(65000, 0, [192, 0, 2, 1])));
    t.data(OUT, keepalive());
    // Up for longer than STABLE_AFTER: back to 1 s.
    t.now += STABLE_AFTER;
    t.ev(Event::TcpClosed { conn: OUT });
    assert_eq!(t.s.next_deadline().unwrap() - t.now, Duration::from_secs(1));
}

// ---- collisions (§6.8) ----

fn both_connected(local_id: [u8; 4]) -> T {
    let mut t = T::new(Config {
        router_id: Ipv4Addr::from(local_id),
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t
}

#[test]
fn collision_higher_local_id_keeps_our_connection() {
    let mut t = both_connected([192, 0, 2, 9]);
    let peer = || open_bytes(peer_open(65000, 9, [192, 0, 2, 1]));
    t.data(IN, peer());
    let a = t.data(OUT, peer());
    // The incoming one (opened by the lower Identifier) is closed.
    assert!(has(&a, |a| *a == Action::Close { conn: IN }));
    assert_eq!(notification(&a), Some((6, 7)));
    t.data(OUT, keepalive());
    assert_eq!(t.s.established().map(|(c, _)| c), Some(OUT));
}

#[test]
fn collision_lower_local_id_keeps_their_connection() {
    for order in [[IN, OUT], [OUT, IN]] {
        let mut t = both_connected([192, 0, 2, 1]);
        let peer = || open_bytes(peer_open(65000, 9, [192, 0, 2, 9]));
        t.data(order[0], peer());
        let a = t.data(order[1], peer());
        assert!(
            has(&a, |a| *a == Action::Close { conn: OUT }),
            "{order:?}: {a:?}"
        );
        t.data(IN, keepalive());
        assert_eq!(t.s.established().map(|(c, _)| c), Some(IN));
        assert_eq!(t.s.state(), State::Established);
    }
}

#[test]
fn a_collision_cease_on_our_only_connection_waits_for_theirs() {
    // The peer (higher Identifier) resolved the collision before its own
    // connection reached us: our connection gets Cease/7 while it is the
    // only one. Theirs then arrives and must be taken, not refused in Idle.
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 9])));
    t.data(
        OUT,
        bytes(Message::Notification(Notification::cease(
            notify::cease::CONNECTION_COLLISION_RESOLUTION,
        ))),
    );
    assert_eq!(t.s.state(), State::Active);
    let a = t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    assert!(!has(&a, |a| *a == Action::Close { conn: IN }), "{a:?}");
    t.data(IN, open_bytes(peer_open(65000, 9, [192, 0, 2, 9])));
    t.data(IN, keepalive());
    assert_eq!(t.s.established().map(|(c, _)| c), Some(IN));
}

#[test]
fn collision_with_a_just_established_connection_uses_the_same_rule() {
    // Our connection reaches Established; the peer's OPEN on its own
    // connection arrives an instant later. Lower local ID: theirs stays.
    let mut t = both_connected([192, 0, 2, 1]);
    t.data(OUT, open_bytes(peer_open(65000, 9, [192, 0, 2, 9])));
    t.data(OUT, keepalive());
    assert_eq!(t.s.state(), State::Established);
    let a = t.data(IN, open_bytes(peer_open(65000, 9, [192, 0, 2, 9])));
    assert!(has(&a, |a| *a == Action::Close { conn: OUT }));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::Collision
        }));
    t.data(IN, keepalive());
    assert_eq!(t.s.established().map(|(c, _)| c), Some(IN));
}

#[test]
fn a_late_second_connection_to_an_established_session_is_closed() {
    let mut t = T::new(config());
    t.establish();
    t.now += COLLISION_WINDOW;
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    let a = t.data(IN, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    assert!(has(&a, |a| *a == Action::Close { conn: IN }));
    assert_eq!(t.s.established().map(|(c, _)| c), Some(OUT));
}

#[test]
fn a_graceful_restart_peer_reconnecting_replaces_the_old_session() {
    let gr_open = || {
        Open::new(
            65000,
            9,
            Ipv4Addr::new(192, 0, 2, 1),
            vec![
                Capability::Multiprotocol(Family::IPV4_UNICAST),
                Capability::GracefulRestart(GracefulRestart {
                    flags: GracefulRestart::RESTART_STATE,
                    restart_time: 120,
                    families: vec![GrFamily {
                        family: Family::IPV4_UNICAST,
                        flags: 0x80,
                    }],
                }),
            ],
        )
    };
    let mut t = T::new(config());
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    t.data(OUT, open_bytes(gr_open()));
    t.data(OUT, keepalive());
    t.now += Duration::from_secs(30);
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    let a = t.data(IN, open_bytes(gr_open()));
    assert!(has(&a, |a| *a == Action::Close { conn: OUT }));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::PeerRestarted
        }));
    let a = t.data(IN, keepalive());
    assert!(has(&a, |a| matches!(a, Action::Up { conn: IN, .. })));
}

#[test]
fn a_silent_incoming_connection_does_not_lock_the_peer_out() {
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    // A connection from the peer's address that never sends an OPEN...
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    // ...does not keep the real one out: it gets our OPEN too.
    t.now += COLLISION_WINDOW;
    let real = ConnId(3);
    let a = t.ev(Event::TcpConnected {
        conn: real,
        direction: Direction::Incoming,
    });
    assert!(matches!(sent(&a)[..], [Message::Open(_)]), "{a:?}");
    t.data(real, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    let a = t.data(real, keepalive());
    assert!(has(
        &a,
        |a| matches!(a, Action::Up { conn, .. } if *conn == real)
    ));
    // Established, the silent one can only lose (§6.8).
    assert_eq!(notification(&a), Some((6, 7)));
    assert!(has(&a, |a| *a == Action::Close { conn: IN }));
    assert_eq!(t.s.established().map(|(c, _)| c), Some(real));
}

#[test]
fn more_incoming_connections_replace_the_oldest_silent_one() {
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    for (i, conn) in [IN, ConnId(3)].into_iter().enumerate() {
        t.now += Duration::from_secs(i as u64 + 1);
        t.ev(Event::TcpConnected {
            conn,
            direction: Direction::Incoming,
        });
    }
    // Two are kept; a third replaces the oldest without an OPEN.
    let a = t.ev(Event::TcpConnected {
        conn: ConnId(4),
        direction: Direction::Incoming,
    });
    assert!(has(&a, |a| *a == Action::Close { conn: IN }));
    assert!(!has(&a, |a| *a == Action::Close { conn: ConnId(4) }));
    assert!(
        matches!(sent(&a)[..], [Message::Notification(_), Message::Open(_)]),
        "{a:?}"
    );
    // One that has sent its OPEN is not the one replaced.
    t.data(ConnId(3), open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    let a = t.ev(Event::TcpConnected {
        conn: ConnId(5),
        direction: Direction::Incoming,
    });
    assert!(has(&a, |a| *a == Action::Close { conn: ConnId(4) }));
    assert!(!has(&a, |a| *a == Action::Close { conn: ConnId(3) }));
}

#[test]
fn idle_hold_refuses_incoming_connections_too() {
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    t.data(IN, open_bytes(peer_open(65000, 9, [192, 0, 2, 1])));
    t.data(IN, keepalive());
    // The peer resets the session: Idle, the IdleHoldTimer runs (1 s).
    t.data(IN, bytes(Message::Notification(Notification::cease(4))));
    assert_eq!(t.s.state(), State::Idle);
    // DampPeerOscillations (§8.1.1): its reconnection is refused until
    // the IdleHoldTimer expires.
    let a = t.ev(Event::TcpConnected {
        conn: ConnId(3),
        direction: Direction::Incoming,
    });
    assert_eq!(a, vec![Action::Close { conn: ConnId(3) }]);
    t.now += Duration::from_secs(1);
    let a = t.ev(Event::TcpConnected {
        conn: ConnId(4),
        direction: Direction::Incoming,
    });
    assert!(matches!(sent(&a)[..], [Message::Open(_)]), "{a:?}");
    assert_eq!(t.s.state(), State::OpenSent);
}

#[test]
fn a_passive_graceful_restart_peer_reconnecting_replaces_the_old_session() {
    let gr_open = || {
        Open::new(
            65000,
            9,
            Ipv4Addr::new(192, 0, 2, 1),
            vec![
                Capability::Multiprotocol(Family::IPV4_UNICAST),
                Capability::GracefulRestart(GracefulRestart {
                    flags: GracefulRestart::RESTART_STATE,
                    restart_time: 120,
                    families: vec![GrFamily {
                        family: Family::IPV4_UNICAST,
                        flags: 0x80,
                    }],
                }),
            ],
        )
    };
    let mut t = T::new(Config {
        passive: true,
        ..config()
    });
    t.ev(Event::ManualStart);
    t.ev(Event::TcpConnected {
        conn: IN,
        direction: Direction::Incoming,
    });
    t.data(IN, open_bytes(gr_open()));
    t.data(IN, keepalive());
    t.now += Duration::from_secs(30);
    // The peer restarted (kill -9): its new connection comes in while the
    // old one still looks Established. RFC 4724 §4.2: the old one closes.
    let new = ConnId(3);
    t.ev(Event::TcpConnected {
        conn: new,
        direction: Direction::Incoming,
    });
    let a = t.data(new, open_bytes(gr_open()));
    assert!(has(&a, |a| *a == Action::Close { conn: IN }));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::PeerRestarted
        }));
    let a = t.data(new, keepalive());
    assert!(has(
        &a,
        |a| matches!(a, Action::Up { conn, .. } if *conn == new)
    ));
}

#[test]
fn send_hold_timer_expiry_sends_its_notification_and_goes_idle() {
    let mut t = T::new(config());
    t.establish();
    let a = t.ev(Event::SendHoldTimerExpired { conn: OUT });
    // RFC 9687 §4: NOTIFICATION 8 (Send Hold Timer Expired), close, Idle.
    assert_eq!(notification(&a), Some((8, 0)));
    assert!(has(&a, |a| *a == Action::Close { conn: OUT }));
    assert!(has(&a, |a| *a
        == Action::Down {
            reason: Reason::SendHoldTimerExpired
        }));
    assert_eq!(t.s.state(), State::Idle);
    assert_eq!(t.s.stats().notifications_sent, vec![(8, 0, 1)]);
    // A stale report for a connection already gone changes nothing.
    assert!(t.ev(Event::SendHoldTimerExpired { conn: OUT }).is_empty());
}

#[test]
fn an_oversized_borr_gets_7_1_cut_to_fit_the_message_size() {
    let mut t = T::new(config());
    t.establish();
    // RFC 7313 §5: a BoRR (subtype 1) whose length is not 4 is answered
    // with 7/1 carrying the whole message; a 4096-octet BoRR as data would
    // make a 4117-octet NOTIFICATION, so the data is cut to fit 4096.
    let mut borr = vec![0xff; 16];
    borr.extend_from_slice(&4096u16.to_be_bytes());
    borr.extend_from_slice(&[5, 0, 1, 1, 1]);
    borr.resize(4096, 0xee);
    let a = t.data(OUT, borr.clone());
    let bytes = a
        .iter()
        .find_map(|a| match a {
            Action::Send { message, ctx, .. } => Some(message.encode(ctx).unwrap()),
            _ => None,
        })
        .expect("a NOTIFICATION is sent");
    assert_eq!(bytes.len(), 4096);
    assert_eq!(&bytes[16..21], &[0x10, 0x00, 3, 7, 1]);
    assert_eq!(bytes[21..], borr[..4096 - 21]);
    assert_eq!(t.s.stats().notifications_sent, vec![(7, 1, 1)]);
    assert_eq!(t.s.state(), State::Idle);
}

/// RFC 4271 §6.2 with a flexible peer AS: what `negotiate` accepts, and
/// which side of EBGP/IBGP the session then is on.
fn negotiate_with(peer_asn: PeerAs, their_as: u32) -> Result<Negotiated, crate::error::Error> {
    let c = Config {
        peer_asn,
        ..config()
    };
    negotiate(&c, &c.open(), &peer_open(their_as, 90, [192, 0, 2, 1]))
}

#[test]
fn external_peer_as_accepts_any_other_as_and_is_external() {
    for asn in [65000, 65010, 4_200_000_001] {
        let n = negotiate_with(PeerAs::External, asn)
            .unwrap_or_else(|e| panic!("AS {asn} refused: {e}"));
        assert_eq!(n.peer_asn, asn);
        assert!(n.is_external(), "AS {asn} against our 65001");
    }
    // Our own AS is not external: Bad Peer AS (2/2).
    let e = negotiate_with(PeerAs::External, 65001).expect_err("our own AS");
    assert!(
        matches!(e, crate::error::Error::BadPeerAs { asn: 65001 }),
        "{e:?}"
    );
}

#[test]
fn internal_peer_as_accepts_only_our_as_and_is_internal() {
    let n = negotiate_with(PeerAs::Internal, 65001).expect("our own AS");
    assert!(!n.is_external());
    let e = negotiate_with(PeerAs::Internal, 65000).expect_err("another AS");
    assert!(
        matches!(e, crate::error::Error::BadPeerAs { asn: 65000 }),
        "{e:?}"
    );
}

#[test]
fn a_fixed_peer_as_refuses_any_other() {
    assert!(negotiate_with(PeerAs::Is(65000), 65000).is_ok());
    let e = negotiate_with(PeerAs::Is(65000), 65010).expect_err("another AS");
    assert!(
        matches!(e, crate::error::Error::BadPeerAs { asn: 65010 }),
        "{e:?}"
    );
}

#[test]
fn the_fsm_sends_its_messages_typed_in_the_context_to_encode_them_in() {
    let mut c = config();
    c.capabilities.push(Capability::ExtendedMessage);
    let mut t = T::new(c);
    t.ev(Event::ManualStart);
    let a = t.ev(Event::TcpConnected {
        conn: OUT,
        direction: Direction::Outgoing,
    });
    // RFC 4271 §4.2: the OPEN goes before anything is negotiated.
    assert!(matches!(
        &a[..],
        [Action::Send { conn: OUT, message: Message::Open(_), ctx }, ..] if *ctx == Context::default()
    ));
    let o = Open::new(
        65000,
        9,
        Ipv4Addr::new(192, 0, 2, 1),
        vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::ExtendedMessage,
        ],
    );
    t.data(OUT, open_bytes(o));
    t.data(OUT, keepalive());
    assert_eq!(t.s.state(), State::Established);
    // RFC 8654 §4: a NOTIFICATION on the session goes in what was
    // negotiated — up to 65535 octets — so the driver must encode it there.
    let a = t.ev(Event::ManualStop {
        notification: Some(Notification::cease(2)),
    });
    let ctx = a
        .iter()
        .find_map(|a| match a {
            Action::Send {
                message: Message::Notification(_),
                ctx,
                ..
            } => Some(*ctx),
            _ => None,
        })
        .expect("a NOTIFICATION is sent");
    assert_eq!(ctx.max_message_len, crate::consts::MAX_EXTENDED_MESSAGE_LEN);
    assert!(ctx.four_octet_as);
}

/// A session established here, handed over `at` into it: the state a new
/// process resumes from.
fn handed_over(at: Duration) -> (T, Resumed) {
    let mut t = T::new(config());
    t.establish();
    t.now += at;
    t.ev(Event::Tick);
    let r = t.s.to_resume(t.now).expect("established");
    (t, r)
}

#[test]
fn a_resumed_session_sends_nothing_and_keeps_the_timers_it_was_handed() {
    // Established at 0 (hold 9 s, keepalive 3 s jittered to 2.25–3 s,
    // RFC 4271 §10); handed over at 2 s: the HoldTimer has 7 s left, the
    // KeepaliveTimer what its jittered deadline leaves.
    let (old, r) = handed_over(Duration::from_secs(2));
    let ka_due = old.s.next_deadline().unwrap();
    assert_eq!(r.keepalive_remaining, ka_due - old.now);
    assert!(r.keepalive_remaining <= Duration::from_secs(1));
    assert_eq!(r.hold_remaining, Duration::from_secs(7));
    assert_eq!(r.stats.established_transitions, 1);
    let now = old.now + Duration::from_millis(20);
    let left = r.keepalive_remaining;
    let mut t = T {
        s: Session::resume(config(), now, r.clone()).unwrap(),
        now,
    };
    assert_eq!(t.s.state(), State::Established);
    let (conn, n) = t.s.established().unwrap();
    assert_eq!(conn, OUT);
    assert_eq!(n.hold_time, 9);
    assert_eq!(t.s.stats().established_transitions, 1, "not a new session");
    assert_eq!(t.s.next_deadline(), Some(now + left));
    // Nothing before the keepalive deadline; then a KEEPALIVE (RFC 4271
    // §4.4), on schedule: no OPEN ever.
    let a = t.after(left - Duration::from_millis(1));
    assert!(sent(&a).is_empty(), "{a:?}");
    let a = t.after(Duration::from_millis(1));
    assert_eq!(sent(&a), vec![Message::Keepalive]);
    // The peer's KEEPALIVE restarts the HoldTimer as usual.
    t.now += Duration::from_secs(5);
    t.data(OUT, keepalive());
    t.after(Duration::from_secs(8));
    assert_eq!(t.s.state(), State::Established);
    let a = t.after(Duration::from_secs(1));
    assert_eq!(notification(&a), Some((4, 0)), "HoldTimer expired");
}

#[test]
fn a_resumed_session_expires_at_the_handed_hold_deadline() {
    let (old, r) = handed_over(Duration::from_secs(2));
    let mut t = T {
        s: Session::resume(config(), old.now, r).unwrap(),
        now: old.now,
    };
    // Nothing from the peer: 7 s left of the HoldTimer, not 9.
    t.now += Duration::from_millis(6999);
    t.ev(Event::Tick);
    assert_eq!(t.s.state(), State::Established);
    let a = t.after(Duration::from_millis(1));
    assert_eq!(notification(&a), Some((4, 0)));
    assert_eq!(t.s.state(), State::Idle);
}

#[test]
fn a_message_cut_by_the_hand_off_is_completed_by_the_next_octets() {
    let (old, mut r) = handed_over(Duration::from_secs(1));
    let ka = keepalive();
    r.unparsed = ka[..7].to_vec();
    let mut t = T {
        s: Session::resume(config(), old.now, r).unwrap(),
        now: old.now,
    };
    t.now += Duration::from_secs(1);
    let a = t.data(OUT, ka[7..].to_vec());
    assert!(notification(&a).is_none(), "{a:?}");
    assert_eq!(
        t.s.stats().messages_received,
        old.s.stats().messages_received + 1
    );
    // The KEEPALIVE restarted the HoldTimer: 9 s from now.
    t.after(Duration::from_millis(8999));
    assert_eq!(t.s.state(), State::Established);
}

#[test]
fn a_resumed_open_is_checked_against_the_new_config() {
    let (_, r) = handed_over(Duration::from_secs(1));
    let mut other = config();
    other.peer_asn = PeerAs::Is(65099);
    assert!(Session::resume(other, Instant::now(), r).is_err());
}

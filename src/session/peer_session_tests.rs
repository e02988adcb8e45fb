//! The session core on simulated time: no sockets, no tasks, no clock —
//! instants chosen by the test, octets handed in, the octets it wants
//! written decoded and checked.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::capability::GracefulRestart as GrCap;
use bgp_proto::fsm::{ConnId, Direction, State};
use bgp_proto::open::Open;
use bgp_proto::{Capability, Context, Family, Message};
use ipnet::IpNet;

use super::{Input, Output, PeerSession};
use crate::config;
use crate::session::PeerSpec;
use crate::speaker::{self, PeerTable, Route};

const CONN: ConnId = ConnId(1);

/// Peer "tor" (AS 65000 at 192.0.2.1, IPv4 unicast, hold time 9 s) of
/// a speaker in AS 65001, and the config it comes from.
fn spec(restarting: bool) -> (config::Config, PeerSpec) {
    crate::session::tests::peer_spec("address = \"192.0.2.1\"", restarting)
}

/// The node has 192.0.2.2/24 on eth0: the IPv4 next hop.
fn session(spec: PeerSpec, t0: Instant) -> PeerSession {
    PeerSession::new(
        spec,
        t0,
        Box::new(|| {
            vec![holdfast_sockopt::InterfaceAddress {
                interface: "eth0".into(),
                address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)),
                prefix_len: 24,
            }]
        }),
    )
}

/// The table that announces `prefixes` to "tor".
fn table(config: &config::Config, prefixes: &[&str]) -> Arc<PeerTable> {
    let route = Route::new(Arc::new(BTreeSet::from(["public".to_string()])), None, None);
    let nets: Vec<IpNet> = prefixes.iter().map(|p| p.parse().unwrap()).collect();
    let tables = speaker::peer_tables(config, nets.iter().map(|p| (p, &route)));
    Arc::new(tables["tor"].clone())
}

/// The messages written on `conn`, decoded, in order.
fn written(out: &[Output], conn: ConnId) -> Vec<Message> {
    out.iter()
        .filter_map(|o| match o {
            Output::Write { conn: c, bytes, .. } if *c == conn => {
                Some(Message::decode(bytes, &Context::default()).expect("a valid message"))
            }
            _ => None,
        })
        .collect()
}

/// The router's OPEN (AS 65000, hold time 9 s, 4-octet AS, IPv4 unicast)
/// and its KEEPALIVE, as octets.
fn router_open_and_keepalive() -> Vec<u8> {
    let open = Message::Open(Open::new(
        65000,
        9,
        Ipv4Addr::new(192, 0, 2, 1),
        vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::FourOctetAs(65000),
        ],
    ));
    let mut bytes = open.encode(&Context::default()).unwrap();
    bytes.extend(Message::Keepalive.encode(&Context::default()).unwrap());
    bytes
}

fn local() -> SocketAddr {
    "192.0.2.2:40000".parse().unwrap()
}

/// Started and connected at `t0`: the OPEN it sent.
fn connect(s: &mut PeerSession, t0: Instant) -> Open {
    let out = s.handle(t0, Input::Start { bfd_up: false });
    assert_eq!(out, vec![Output::Connect], "a connection attempt at once");
    let out = s.handle(
        t0,
        Input::Connected {
            conn: CONN,
            direction: Direction::Outgoing,
            local: local(),
        },
    );
    match written(&out, CONN).as_slice() {
        [Message::Open(open)] => open.clone(),
        other => panic!("one OPEN, got {other:?}"),
    }
}

/// Connected, then the router's OPEN and KEEPALIVE: what it wrote then.
fn establish(s: &mut PeerSession, t0: Instant) -> Vec<Message> {
    connect(s, t0);
    let out = s.handle(
        t0,
        Input::Data {
            conn: CONN,
            bytes: router_open_and_keepalive(),
        },
    );
    assert_eq!(s.state(), State::Established);
    written(&out, CONN)
}

/// RFC 4271 §8.2.2: once the connection is up (Connect state, Event 16),
/// the OPEN goes out: our AS, the configured hold time, our identifier.
#[test]
fn a_connection_up_sends_our_open() {
    let t0 = Instant::now();
    let (_, spec) = spec(false);
    let mut s = session(spec, t0);
    let open = connect(&mut s, t0);
    assert_eq!(open.asn(), 65001);
    assert_eq!(open.hold_time, 9);
    assert_eq!(open.bgp_id, Ipv4Addr::new(192, 0, 2, 2));
    assert_eq!(s.state(), State::OpenSent);
    assert_eq!(s.status().state, State::OpenSent, "the status follows");
}

/// RFC 4724 §4.1 and RFC 4271 §9.1: a session that comes up is sent the
/// whole table, then End-of-RIB for each family (RFC 4724 §2: an UPDATE
/// with nothing in it) — last, after every route.
#[test]
fn established_sends_the_whole_table_then_end_of_rib() {
    let t0 = Instant::now();
    let (config, spec) = spec(false);
    let mut s = session(spec, t0);
    s.set_table(table(&config, &["198.51.100.1/32", "198.51.100.2/32"]));
    s.set_routes_ready(true);
    let messages = establish(&mut s, t0);
    let Some((Message::Keepalive, rest)) = messages.split_first() else {
        panic!("the KEEPALIVE that answers the OPEN first: {messages:?}");
    };
    let Some((Message::Update(eor), updates)) = rest.split_last() else {
        panic!("End-of-RIB last: {rest:?}");
    };
    assert_eq!(eor.end_of_rib_family(), Some(Family::IPV4_UNICAST));
    let mut announced = Vec::new();
    for m in updates {
        let Message::Update(u) = m else {
            panic!("only UPDATEs between: {m:?}")
        };
        assert_eq!(u.end_of_rib_family(), None, "End-of-RIB before the table");
        announced.extend(u.announced().map(|n| n.prefix.to_string()));
    }
    announced.sort();
    assert_eq!(announced, ["198.51.100.1/32", "198.51.100.2/32"]);
    assert!(s.status().end_of_rib_sent);
    assert_eq!(s.status().advertised_counts, (2, 0));
}

/// RFC 4271 §8.2.2 (Established, Event 10) and §6.5: with no message from
/// the peer for the negotiated Hold Time, a NOTIFICATION Hold Timer
/// Expired (4/0), then the connection closed — not a moment earlier.
#[test]
fn hold_timer_expiry_sends_notification_4_0_and_closes() {
    let t0 = Instant::now();
    let (_, spec) = spec(false);
    let mut s = session(spec, t0);
    s.set_routes_ready(true);
    establish(&mut s, t0);
    let mut fired = None;
    while let Some(at) = s.next_deadline() {
        assert!(at <= t0 + Duration::from_secs(9), "idle past the hold time");
        let out = s.handle(at, Input::Timer);
        let notifications: Vec<_> = written(&out, CONN)
            .into_iter()
            .filter_map(|m| match m {
                Message::Notification(n) => Some(n),
                _ => None,
            })
            .collect();
        if notifications.is_empty() {
            continue;
        }
        assert_eq!(
            (notifications[0].code, notifications[0].subcode),
            (4, 0),
            "Hold Timer Expired"
        );
        let write = out.iter().position(|o| {
            matches!(
                o,
                Output::Write {
                    notification: Some((4, 0)),
                    ..
                }
            )
        });
        let close = out.iter().position(|o| *o == Output::Close { conn: CONN });
        assert!(
            write.is_some() && close > write,
            "the NOTIFICATION, then the close: {out:?}"
        );
        fired = Some(at);
        break;
    }
    assert_eq!(fired, Some(t0 + Duration::from_secs(9)));
    assert_ne!(s.state(), State::Established);
    assert_eq!(s.status().negotiated, None);
}

/// RFC 4271 §9.2: a change of the desired table after End-of-RIB goes
/// out as one UPDATE with just the change.
#[test]
fn a_desired_table_change_sends_one_update() {
    let t0 = Instant::now();
    let (config, spec) = spec(false);
    let mut s = session(spec, t0);
    s.set_table(table(&config, &["198.51.100.1/32"]));
    s.set_routes_ready(true);
    establish(&mut s, t0);
    let t1 = t0 + Duration::from_secs(1);
    let out = s.handle(
        t1,
        Input::Table(table(&config, &["198.51.100.1/32", "198.51.100.3/32"])),
    );
    let messages = written(&out, CONN);
    let [Message::Update(u)] = messages.as_slice() else {
        panic!("one UPDATE: {messages:?}")
    };
    let announced: Vec<String> = u.announced().map(|n| n.prefix.to_string()).collect();
    assert_eq!(announced, ["198.51.100.3/32"]);
    assert_eq!(u.withdrawals().count(), 0);
    assert_eq!(s.status().advertised_counts, (1 + 1, 0));
}

/// RFC 4724 §3, §4.1: started as restarted, our OPEN carries the R bit;
/// once End-of-RIB has gone out the restart is over, and the OPEN of the
/// next connection goes without it. Not restarted: never.
#[test]
fn restart_bit_set_when_started_as_restarted_until_end_of_rib() {
    let restart_bit = |open: &Open| {
        open.graceful_restart().expect("the GR capability").flags & GrCap::RESTART_STATE != 0
    };
    let t0 = Instant::now();
    let (_, not_restarted) = spec(false);
    let open = connect(&mut session(not_restarted, t0), t0);
    assert!(!restart_bit(&open), "R bit without a restart");

    let (_, restarted) = spec(true);
    let mut s = session(restarted, t0);
    let open = connect(&mut s, t0);
    assert!(restart_bit(&open), "no R bit after a restart");
    assert!(s.status().restarting);
    // Up, but the source's view is not complete: End-of-RIB waits, and so
    // does the end of the restart.
    s.handle(
        t0,
        Input::Data {
            conn: CONN,
            bytes: router_open_and_keepalive(),
        },
    );
    assert!(s.status().restarting, "restart over before End-of-RIB");
    let out = s.handle(t0, Input::RoutesReady(true));
    let messages = written(&out, CONN);
    let [Message::Update(eor)] = messages.as_slice() else {
        panic!("one UPDATE: {messages:?}");
    };
    assert_eq!(eor.end_of_rib_family(), Some(Family::IPV4_UNICAST));
    assert!(!s.status().restarting, "restart still on after End-of-RIB");
    // The connection goes; the next one's OPEN has R=0.
    s.handle(
        t0,
        Input::Closed {
            conn: CONN,
            why: "closed by the peer".into(),
        },
    );
    // Idle a while (IdleHoldTimer after a failure), then a new attempt.
    let mut at = t0;
    while !s.handle(at, Input::Timer).contains(&Output::Connect) {
        at = s.next_deadline().expect("a timer while Idle");
        assert!(at < t0 + Duration::from_secs(300), "never reconnected");
    }
    let next = ConnId(2);
    let out = s.handle(
        at,
        Input::Connected {
            conn: next,
            direction: Direction::Outgoing,
            local: local(),
        },
    );
    let messages = written(&out, next);
    let [Message::Open(open)] = messages.as_slice() else {
        panic!("one OPEN: {messages:?}");
    };
    assert!(!restart_bit(open), "R bit on a later connection");
}

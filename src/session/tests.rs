//! The session driver against a scripted BGP peer on loopback: real
//! sockets, the real driver, generous deadlines.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;

use bgp_proto::Context;
use bgp_proto::capability::GracefulRestart as GrCap;
use bgp_proto::consts::notify::cease;
use bgp_proto::message::check_header;
use bgp_proto::open::Open;
use bgp_proto::{Family, Message};
use tokio::net::TcpListener;

use super::*;
use crate::config;
use crate::speaker::{self, Route};
use bgp_proto::Capability;
use std::net::Ipv6Addr;
use std::net::SocketAddrV6;

/// Generous: these are real sockets on a machine that may be busy.
const DEADLINE: Duration = Duration::from_secs(20);

async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    loop {
        if let Some(len) = check_header(buf, 65535).expect("a valid header")
            && buf.len() >= len
        {
            let msg: Vec<u8> = buf.drain(..len).collect();
            return Message::decode(&msg, &Context::default()).expect("a valid message");
        }
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(DEADLINE, stream.read(&mut chunk))
            .await
            .expect("a message before the deadline")
            .expect("read");
        assert!(n > 0, "the driver closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The next message that is not a KEEPALIVE.
async fn next_non_keepalive(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    loop {
        match read_message(stream, buf).await {
            Message::Keepalive => continue,
            m => return m,
        }
    }
}

/// A listening socket standing in for the router, and the spec of a peer
/// Peer "tor" (AS 65000, IPv4 unicast, hold time 9 s) of a speaker in AS
/// 65001 as node-1, and the config it comes from; `peer_keys` (its
/// `address` among them) are added to its `[[peer]]` table.
pub(crate) fn peer_spec(peer_keys: &str, restarting: bool) -> (config::Config, PeerSpec) {
    let text = format!(
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n\
         [[peer]]\nname = \"tor\"\nasn = 65000\n\
         hold_time = \"9s\"\nconnect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\
         {peer_keys}\n\
         [source]\nkind = \"file\"\npath = \"vips.toml\"\n\n\
         [[advertisement]]\nname = \"public\"\n"
    );
    let config = config::parse(Path::new("test.toml"), &text).expect("a valid config");
    let spec = PeerSpec {
        peer: config.peers[0].clone(),
        address: match config.peers[0].address {
            config::PeerAddress::Ip(ip) => ip,
            ref other => panic!("a fixed address, got {other:?}"),
        },
        interface: None,
        local_asn: 65001,
        router_id: Ipv4Addr::new(192, 0, 2, 2),
        hostname: "node-1".into(),
        restarting,
    };
    (config, spec)
}

/// "tor" (AS 65000, IPv4 unicast) that connects to it, with the config it
/// comes from; `peer_keys` are added to its `[[peer]]` table.
async fn scripted_peer(
    peer_keys: &str,
    restarting: bool,
) -> (TcpListener, config::Config, PeerSpec) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (config, spec) = peer_spec(
        &format!("address = \"127.0.0.1\"\nport = {port}\n{peer_keys}"),
        restarting,
    );
    (listener, config, spec)
}

/// The driver of `spec` (tables from `table`, the source's view complete
/// as `ready` says) connected to the scripted router `listener`, and the
/// OPEN it sent first: the router's socket, the driver, that OPEN and the
/// router's read buffer.
async fn connected(
    listener: &TcpListener,
    spec: PeerSpec,
    table: watch::Receiver<Arc<PeerTable>>,
    ready: watch::Receiver<bool>,
) -> (TcpStream, PeerHandle, Open, Vec<u8>) {
    let handle = spawn(spec, table, ready, None);
    let (mut peer, _) = tokio::time::timeout(DEADLINE, listener.accept())
        .await
        .expect("the driver connects")
        .unwrap();
    let mut buf = Vec::new();
    let Message::Open(open) = read_message(&mut peer, &mut buf).await else {
        panic!("OPEN first");
    };
    (peer, handle, open, buf)
}

/// The scripted router's OPEN: AS `asn`, hold time 9 s, BGP Identifier
/// 192.0.2.1, IPv4 unicast and `more` capabilities.
fn router_open(asn: u32, more: Vec<Capability>) -> Message {
    let mut capabilities = vec![Capability::Multiprotocol(Family::IPV4_UNICAST)];
    capabilities.extend(more);
    Message::Open(Open::new(asn, 9, Ipv4Addr::new(192, 0, 2, 1), capabilities))
}

/// RFC 4724 §4.1/§4.2: after a restart, End-of-RIB tells the helper that
/// our routes are all there, and it then drops every stale route we did not
/// send again. So a session that comes up before the source's first
/// complete view sends the routes it has, but End-of-RIB only once the
/// daemon says the table is complete — and its OPEN carries the R bit.
#[tokio::test]
async fn end_of_rib_waits_until_the_table_is_complete() {
    let (listener, config, spec) = scripted_peer("", true).await;
    let (table_tx, table_rx) = watch::channel(Arc::new(PeerTable::new()));
    let (ready_tx, ready_rx) = watch::channel(false);
    let (mut peer, handle, open, mut buf) = connected(&listener, spec, table_rx, ready_rx).await;
    let gr = open.graceful_restart().expect("the GR capability");
    assert_ne!(gr.flags & GrCap::RESTART_STATE, 0, "R bit after a restart");
    let ours = router_open(65000, vec![Capability::FourOctetAs(65000)]);
    for m in [ours, Message::Keepalive] {
        peer.write_all(&m.encode(&Context::default()).unwrap())
            .await
            .unwrap();
    }

    // The source's view arrives after the session is up: the route goes
    // out, End-of-RIB does not.
    let start = Instant::now();
    while handle.snapshot().state != State::Established {
        assert!(start.elapsed() < DEADLINE, "the session never came up");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let route = Route::new(BTreeSet::from(["public".to_string()]).into(), None, None);
    let prefix: ipnet::IpNet = "198.51.100.10/32".parse().unwrap();
    let tables = speaker::peer_tables(&config, [(&prefix, &route)].into_iter());
    table_tx.send_replace(Arc::new(tables["tor"].clone()));
    let Message::Update(u) = next_non_keepalive(&mut peer, &mut buf).await else {
        panic!("an UPDATE");
    };
    assert_eq!(
        u.end_of_rib_family(),
        None,
        "End-of-RIB before the table is complete"
    );
    let announced: Vec<_> = u.announced().map(|n| n.prefix).collect();
    assert_eq!(announced, vec![prefix]);

    ready_tx.send_replace(true);
    let Message::Update(u) = next_non_keepalive(&mut peer, &mut buf).await else {
        panic!("an UPDATE");
    };
    assert_eq!(u.end_of_rib_family(), Some(Family::IPV4_UNICAST));
    assert!(handle.snapshot().end_of_rib_sent);
    handle.stop(StopHow::Graceful, DEADLINE).await;
}

/// RFC 8538 §3.1: the Hard Reset's data carries the whole inner
/// NOTIFICATION — error code, subcode, data — so the peer can decode and
/// show the RFC 9003 message inside.
#[test]
fn hard_reset_carries_the_inner_code_subcode_and_data() {
    let inner = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "node-1: bye");
    let n = Notification::hard_reset(&inner);
    assert_eq!((n.code, n.subcode), (6, 9));
    let mut expected = vec![6, 2, 11];
    expected.extend_from_slice(b"node-1: bye");
    assert_eq!(n.data, expected);
    // Without the N bit, a plain Cease/Administrative Shutdown.
    assert_eq!(
        shutdown_notification(None, cease::ADMINISTRATIVE_SHUTDOWN, "node-1: bye"),
        inner
    );
}

/// RFC 4271 §6.2 and §8.2.1.2: a NOTIFICATION is sent, then the connection
/// closed — and it must reach the peer. The peer may still be sending (the
/// KEEPALIVE that answers our OPEN crosses our NOTIFICATION): the driver
/// closes its side with FIN and reads on until the peer closes too.
/// Closing the socket at once made the kernel answer those octets with a
/// reset, which can destroy the NOTIFICATION before the peer reads it and
/// leaves the peer's socket without an address (FRR 8.4 then dropped the
/// session it kept after a connection collision).
#[tokio::test]
async fn a_closed_connection_ends_with_fin_not_reset_while_the_peer_still_sends() {
    let (listener, _config, spec) = scripted_peer("", false).await;
    let (_table_tx, table_rx) = watch::channel(Arc::new(PeerTable::new()));
    let (_ready_tx, ready_rx) = watch::channel(true);
    let (mut peer, handle, _, mut buf) = connected(&listener, spec, table_rx, ready_rx).await;
    // The wrong AS: OPEN Message Error / Bad Peer AS, and the close.
    let wrong = router_open(65099, Vec::new());
    let keepalive = Message::Keepalive.encode(&Context::default()).unwrap();
    peer.write_all(&wrong.encode(&Context::default()).unwrap())
        .await
        .unwrap();
    let Message::Notification(n) = read_message(&mut peer, &mut buf).await else {
        panic!("a NOTIFICATION")
    };
    assert_eq!((n.code, n.subcode), (2, 2), "Bad Peer AS");
    let mut rest = [0u8; 64];
    let n = tokio::time::timeout(DEADLINE, peer.read(&mut rest))
        .await
        .expect("the close before the deadline")
        .expect("FIN, not a reset");
    assert_eq!(n, 0, "nothing after the NOTIFICATION but the close");
    // The peer, not yet aware, still sends: the driver's side must take it.
    for _ in 0..3 {
        peer.write_all(&keepalive)
            .await
            .expect("the driver reset the connection");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        peer.peer_addr().is_ok(),
        "the driver reset the connection: the peer's socket has no address left"
    );
    assert!(
        peer.write_all(&keepalive).await.is_ok(),
        "reset by the driver"
    );
    drop(peer);
    handle.stop(StopHow::Graceful, DEADLINE).await;
}

/// RFC 4271 §9.2.1.1: with a MinRouteAdvertisementInterval, a burst of
/// changes after an UPDATE waits out the interval and goes out together.
#[tokio::test]
async fn min_route_advertisement_interval_batches_a_burst() {
    let (listener, config, spec) =
        scripted_peer("min_route_advertisement_interval = \"1s\"\n", false).await;
    let (table_tx, table_rx) = watch::channel(Arc::new(PeerTable::new()));
    let (_ready_tx, ready_rx) = watch::channel(true);
    let (mut peer, handle, _, mut buf) = connected(&listener, spec, table_rx, ready_rx).await;
    for m in [router_open(65000, Vec::new()), Message::Keepalive] {
        peer.write_all(&m.encode(&Context::default()).unwrap())
            .await
            .unwrap();
    }
    // The (empty) table's End-of-RIB.
    let Message::Update(u) = next_non_keepalive(&mut peer, &mut buf).await else {
        panic!("an UPDATE")
    };
    assert_eq!(u.end_of_rib_family(), Some(Family::IPV4_UNICAST));

    let route = Route::new(Arc::new(BTreeSet::from(["public".to_string()])), None, None);
    let mut prefixes: Vec<ipnet::IpNet> = Vec::new();
    let mut send = |n: usize| {
        prefixes.push(format!("198.51.100.{n}/32").parse().unwrap());
        let tables = speaker::peer_tables(&config, prefixes.iter().map(|p| (p, &route)));
        table_tx.send_replace(Arc::new(tables["tor"].clone()));
    };
    // The first change goes out at once and starts the interval...
    send(1);
    let Message::Update(first) = next_non_keepalive(&mut peer, &mut buf).await else {
        panic!("an UPDATE")
    };
    assert_eq!(first.announced().count(), 1);
    let sent_at = Instant::now();
    // ...the burst that follows within it waits, and goes out as one.
    for n in 2..=5 {
        send(n);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let Message::Update(batch) = next_non_keepalive(&mut peer, &mut buf).await else {
        panic!("an UPDATE")
    };
    let waited = sent_at.elapsed();
    assert_eq!(
        batch.announced().count(),
        4,
        "the four changes in one UPDATE"
    );
    assert!(
        waited >= Duration::from_millis(900),
        "sent after {waited:?}, within the interval"
    );
    handle.stop(StopHow::Graceful, DEADLINE).await;
}

fn ifaddr(interface: &str, cidr: &str) -> holdfast_sockopt::InterfaceAddress {
    let net: ipnet::IpNet = cidr.parse().unwrap();
    holdfast_sockopt::InterfaceAddress {
        interface: interface.into(),
        address: net.addr(),
        prefix_len: net.prefix_len(),
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// RFC 2545 §3: the next hop is a global address, followed by the
/// link-local one if and only if the peer is on-link.
#[test]
fn next_hops_of_sessions_over_global_and_link_local_addresses() {
    let addrs = [
        ifaddr("lo", "2001:db8:ff::2/128"),
        ifaddr("eth0", "fe80::2/64"),
        ifaddr("eth0", "2001:db8::2/64"),
        ifaddr("eth0", "192.0.2.2/24"),
        ifaddr("eth1", "fe80::b/64"),
    ];
    let v6 = |s: &str| Some(s.parse::<Ipv6Addr>().unwrap());
    // Between link-local addresses (a default gateway fe80::1 on eth0):
    // the global address of eth0, then our link-local one.
    let nh = pick_next_hops(&addrs, ip("fe80::2"), ip("fe80::1"), Some("eth0"));
    assert_eq!(nh.ipv6, v6("2001:db8::2"));
    assert_eq!(nh.ipv6_link_local, v6("fe80::2"));
    assert_eq!(nh.ipv4, Some(Ipv4Addr::new(192, 0, 2, 2)));
    // On eth1 there is no global address: the node's global address on lo
    // (unnumbered), no IPv4 next hop.
    let nh = pick_next_hops(&addrs, ip("fe80::b"), ip("fe80::1"), Some("eth1"));
    assert_eq!(nh.ipv6, v6("2001:db8:ff::2"));
    assert_eq!(nh.ipv6_link_local, v6("fe80::b"));
    assert_eq!(nh.ipv4, None);
    // No global IPv6 address at all (an unnumbered link): the link-local
    // address alone, 16 octets (RFC 8950 §3).
    let nh = pick_next_hops(&addrs[1..2], ip("fe80::2"), ip("fe80::1"), Some("eth0"));
    assert_eq!((nh.ipv6, nh.ipv6_link_local), (None, v6("fe80::2")));
    assert_eq!(nh.for_ipv6(), Some(vec![ip("fe80::2")]));
    // IPv4 routes on such a session, once the extended next hop encoding
    // is negotiated, take the same next hop; without it, none.
    assert_eq!(nh.for_ipv4(), None);
    let ext = crate::speaker::NextHops {
        ipv4_via_ipv6: true,
        ..nh
    };
    assert_eq!(ext.for_ipv4(), Some(vec![ip("fe80::2")]));
    // A global session on-link: our address, then eth0's link-local.
    let nh = pick_next_hops(&addrs, ip("2001:db8::2"), ip("2001:db8::1"), None);
    assert_eq!(nh.ipv6, v6("2001:db8::2"));
    assert_eq!(nh.ipv6_link_local, v6("fe80::2"));
    // Not on-link (multihop): the global address alone.
    let nh = pick_next_hops(&addrs, ip("2001:db8::2"), ip("2001:db8:1::2"), None);
    assert_eq!(nh.ipv6, v6("2001:db8::2"));
    assert_eq!(nh.ipv6_link_local, None);
    // IPv4 session: IPv6 routes get eth0's global and link-local addresses.
    let nh = pick_next_hops(&addrs, ip("192.0.2.2"), ip("192.0.2.1"), None);
    assert_eq!(nh.ipv4, Some(Ipv4Addr::new(192, 0, 2, 2)));
    assert_eq!(nh.ipv6, v6("2001:db8::2"));
    assert_eq!(nh.ipv6_link_local, v6("fe80::2"));
}

#[tokio::test]
async fn a_link_local_peer_is_reached_on_its_interface() {
    let (_listener, _, mut spec) = scripted_peer("", false).await;
    spec.address = ip("fe80::1");
    spec.interface = Some(Interface {
        name: "eth0".into(),
        index: 7,
    });
    assert_eq!(
        spec.socket_addr().to_string(),
        format!("[fe80::1%7]:{}", spec.peer.port)
    );
    assert_eq!(spec.display_address(), "fe80::1%eth0");
    let from = |scope| {
        SocketAddr::V6(SocketAddrV6::new(
            "fe80::1".parse().unwrap(),
            40000,
            0,
            scope,
        ))
    };
    assert!(spec.is_from(from(7)));
    assert!(!spec.is_from(from(8)), "the same address on another link");
}

/// RFC 9494 §4.2: the long-lived capability goes with the GR one, one
/// stale time per configured family (§3); never without GR.
#[test]
fn long_lived_graceful_restart_capability_follows_the_config() {
    use bgp_proto::capability::LlgrFamily;
    let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\
                [[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
                graceful_restart = { restart_time = \"5s\", long_lived_stale_time = \"60s\", forwarding_state = false }\n\
                [source]\nkind = \"file\"\npath = \"vips.toml\"\n\
                [[advertisement]]\nname = \"public\"\n";
    let config = config::parse(Path::new("test.toml"), text).expect("a valid config");
    let mut spec = PeerSpec {
        peer: config.peers[0].clone(),
        address: "192.0.2.1".parse().unwrap(),
        interface: None,
        local_asn: 65001,
        router_id: Ipv4Addr::new(192, 0, 2, 2),
        hostname: "node-1".into(),
        restarting: false,
    };
    let llgr = |spec: &PeerSpec| {
        spec.capabilities().into_iter().find_map(|c| match c {
            Capability::LongLivedGracefulRestart(l) => Some(l),
            _ => None,
        })
    };
    assert_eq!(
        llgr(&spec),
        Some(vec![
            LlgrFamily {
                family: Family::IPV4_UNICAST,
                flags: 0,
                stale_time: 60
            },
            LlgrFamily {
                family: Family::IPV6_UNICAST,
                flags: 0,
                stale_time: 60
            },
        ])
    );
    spec.peer.graceful_restart.long_lived_stale_time = None;
    assert_eq!(llgr(&spec), None);
    spec.peer.graceful_restart.long_lived_stale_time = Some(Duration::from_secs(60));
    spec.peer.graceful_restart.enabled = false;
    assert_eq!(llgr(&spec), None, "LLGR without GR");
}

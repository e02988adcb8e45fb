//! The BMP driver on loopback: what a new connection is sent, in order;
//! a station that stops reading never holds a session back.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

use super::message::{self, decode, flags, msg_type};
use super::*;

/// An IPv4 End-of-RIB: the smallest UPDATE (RFC 4724 §2).
fn eor() -> Vec<u8> {
    let mut m = vec![0xff; 16];
    m.extend_from_slice(&[0, 23, 2, 0, 0, 0, 0]);
    m
}

fn station(port: u16, queue_limit: u64) -> BmpStation {
    BmpStation {
        name: "test".into(),
        address: IpAddr::V4(Ipv4Addr::LOCALHOST),
        port,
        stats_interval: Duration::ZERO,
        queue_limit,
    }
}

fn up() -> Up {
    Up {
        peer_address: IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)),
        peer_asn: 65000,
        peer_id: Ipv4Addr::new(192, 0, 2, 1),
        four_octet_as: true,
        local: SocketAddr::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2)), 50000),
        remote_port: 179,
        sent_open: vec![1; 29],
        received_open: vec![2; 29],
    }
}

/// Reads whole BMP messages from `s` until `n` are in.
async fn read_messages(s: &mut TcpStream, n: usize) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    while out.len() < n {
        while let Ok((_, used)) = decode(&buf) {
            out.push(buf.drain(..used).collect());
        }
        if out.len() >= n {
            break;
        }
        let k = tokio::time::timeout(Duration::from_secs(5), s.read(&mut chunk))
            .await
            .expect("the station is sent more")
            .expect("read");
        assert!(k > 0, "closed after {} messages", out.len());
        buf.extend_from_slice(&chunk[..k]);
    }
    out
}

/// RFC 7854 §4.3: Initiation first; then the session's state (RFC 8671
/// §4, RFC 7854 §5): Peer Up, the Adj-RIB-Out as Route Monitoring with O
/// and L set, End-of-RIB; then what is written live.
#[tokio::test]
async fn a_new_station_gets_initiation_peer_up_the_table_then_live_updates() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hub = Hub::start(&[station(port, 1 << 20)], "node-a");
    let mut tap = hub.tap("tor1").expect("a tap");
    tap.up(up());
    let (mut s, _) = listener.accept().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), tap.resync_wanted())
        .await
        .expect("the station's connection asks for the state");
    let table = vec![eor()];
    tap.resync(|| table.clone());
    tap.written(&eor());
    let got = read_messages(&mut s, 4).await;
    let types: Vec<u8> = got.iter().map(|m| m[5]).collect();
    assert_eq!(
        types,
        vec![
            msg_type::INITIATION,
            msg_type::PEER_UP,
            msg_type::ROUTE_MONITORING,
            msg_type::ROUTE_MONITORING
        ]
    );
    let (init, _) = decode(&got[0]).unwrap();
    assert!(
        message::tlvs(init.body)
            .unwrap()
            .contains(&(message::info_type::SYS_NAME, &b"node-a"[..]))
    );
    let (rm, _) = decode(&got[2]).unwrap();
    let peer = rm.peer.unwrap();
    assert_eq!(peer.flags, flags::O | flags::L, "RFC 8671 §4: O and L");
    assert_eq!(peer.asn, 65000);
    assert_eq!(rm.body, &eor()[..]);
    // A second resync for the same connection sends nothing.
    tap.resync(|| panic!("the table is not wanted again"));
    tap.down(None, true);
    let got = read_messages(&mut s, 1).await;
    let (down, _) = decode(&got[0]).unwrap();
    assert_eq!(down.msg_type, msg_type::PEER_DOWN);
    assert_eq!(
        down.body,
        &[4u8][..],
        "RFC 7854 §4.9: remote closed, no data"
    );
    hub.terminate().await;
    let got = read_messages(&mut s, 1).await;
    assert_eq!(got[0][5], msg_type::TERMINATION);
}

/// A session's writes only ever queue: with a station that never reads,
/// 20 MB of UPDATEs are handed over without waiting; the queue's bound
/// drops the connection (counted), and the station is connected again.
#[tokio::test]
async fn a_station_that_stops_reading_is_dropped_and_never_waited_for() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hub = Hub::start(&[station(port, 64 << 10)], "node-a");
    let mut tap = hub.tap("tor1").expect("a tap");
    tap.up(up());
    let (_held, _) = listener.accept().await.unwrap();
    tap.resync_wanted().await;
    tap.resync(Vec::new);
    let mut update = eor();
    update.resize(4096, 0);
    let started = Instant::now();
    let mut slowest = Duration::ZERO;
    for _ in 0..5000 {
        let t = Instant::now();
        tap.written(&update);
        slowest = slowest.max(t.elapsed());
        tokio::task::yield_now().await;
    }
    assert!(
        slowest < Duration::from_millis(50),
        "one write took {slowest:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while hub.status()[0].dropped == 0 {
        assert!(
            Instant::now() < deadline,
            "never dropped: {:?}",
            hub.status()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Back after the back-off, and sent the state again.
    let (_again, _) = tokio::time::timeout(Duration::from_secs(5), listener.accept())
        .await
        .expect("the station is connected again")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), tap.resync_wanted())
        .await
        .expect("the new connection asks for the state");
    hub.terminate().await;
}

/// What a connection takes: a peer's Route Monitoring and Peer Down only
/// between its Peer Up and Peer Down; a second Peer Up (live, then in the
/// state sent on connect) once.
#[test]
fn admit_keeps_each_peer_between_up_and_down() {
    let h = header(&up());
    let item = |kind: Kind| Item {
        peer: Arc::from("tor1"),
        kind,
        bytes: Vec::new(),
    };
    let mut upset = HashMap::new();
    assert!(!admit(&mut upset, &item(Kind::Route)));
    assert!(!admit(&mut upset, &item(Kind::Down)));
    assert!(admit(&mut upset, &item(Kind::Up(h.clone()))));
    assert!(!admit(&mut upset, &item(Kind::Up(h.clone()))));
    assert!(admit(&mut upset, &item(Kind::Route)));
    assert!(admit(&mut upset, &item(Kind::Down)));
    assert!(!admit(&mut upset, &item(Kind::Route)));
}

/// RFC 7854 §4.2: A is set when the session's AS_PATH is in 2-octet form.
#[test]
fn two_octet_sessions_set_the_a_flag() {
    let mut u = up();
    assert_eq!(header(&u).flags, flags::O | flags::L);
    u.four_octet_as = false;
    assert_eq!(header(&u).flags, flags::O | flags::L | flags::A);
}

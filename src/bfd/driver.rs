//! The BFD driver: UDP sockets and timers around [`Session`].
//!
//! Receiving: one socket per port (3784 single-hop, 4784 multihop) on
//! `[::]` (IPv4 peers arrive as mapped addresses). Single-hop packets must
//! arrive with TTL 255 (RFC 5881 §5, GTSM): the kernel drops the rest
//! (`IP_MINTTL`/`IPV6_MINHOPCOUNT`). Packets go to their session by Your
//! Discriminator, or by source address while that is still zero.
//!
//! Sending: one socket per session, bound to a source port in
//! 49152..=65535 (RFC 5881 §4) and sending with TTL 255.
//!
//! Between the receiving socket and a session's task is that session's
//! [`Inbox`], bounded: a flood toward one session costs at most its
//! inbox, never blocks the socket's reader, and leaves the other sessions
//! their packets.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::auth::{Key, Rejected};
use super::packet::{Diag, MAX_LEN, Received, State};
use super::session::{AuthConfig, Config, Output, Session};
use crate::model::net::unmap;

pub const SINGLE_HOP_PORT: u16 = 3784;
pub const MULTIHOP_PORT: u16 = 4784;

/// Received packets one session's inbox holds at most.
pub const INBOX_LEN: usize = 8;

/// The UDP ports of BFD: RFC 5881 §4's 3784 and RFC 5883 §5's 4784 (the
/// driver's tests use others on loopback).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ports {
    pub single_hop: u16,
    pub multihop: u16,
}

impl Ports {
    pub const STANDARD: Ports = Ports {
        single_hop: SINGLE_HOP_PORT,
        multihop: MULTIHOP_PORT,
    };
}

/// What BGP and the status API see of a BFD session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BfdStatus {
    pub state: State,
    pub since: Instant,
    pub diag: Diag,
    pub detection_time: Option<Duration>,
}

/// One BFD session to set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BfdSpec {
    pub peer: IpAddr,
    pub local: Option<IpAddr>,
    /// The interface index (scope id) of a link-local `peer`, without
    /// which it is ambiguous (RFC 4007 §6): an unnumbered peer.
    pub scope_id: Option<u32>,
    pub multihop: bool,
    pub desired_min_tx: Duration,
    pub required_min_rx: Duration,
    pub detect_mult: u8,
    /// Authentication (RFC 5880 §6.7); none: packets go unsigned and a
    /// signed one is discarded.
    pub auth: Option<Key>,
}

/// The received packets waiting for one session's task.
///
/// Bounded at [`INBOX_LEN`]; when full, the OLDEST packet goes. A BFD
/// Control packet carries the sender's whole state, so the newest one
/// supersedes those before it (RFC 5880 §6.8.6 takes each packet's fields
/// whole): dropping the newest would keep stale state and could lose the
/// peer's Down or the Final that ends a Poll Sequence. Skipped packets
/// only leave gaps in an authenticated peer's sequence numbers, which the
/// receive window allows (§6.7.3, §6.7.4). Pushing never waits: the
/// socket's reader serves every session.
#[derive(Default)]
pub struct Inbox {
    queue: Mutex<VecDeque<Received>>,
    ready: Notify,
}

impl Inbox {
    /// Queues `r`; true when the oldest packet had to go to make room.
    fn push(&self, r: Received) -> bool {
        let mut q = self.queue.lock().expect("BFD inbox lock");
        let dropped = q.len() >= INBOX_LEN && q.pop_front().is_some();
        q.push_back(r);
        drop(q);
        self.ready.notify_one();
        dropped
    }

    /// The oldest queued packet, waiting for one.
    async fn pop(&self) -> Received {
        loop {
            if let Some(r) = self.queue.lock().expect("BFD inbox lock").pop_front() {
                return r;
            }
            self.ready.notified().await;
        }
    }

    pub fn len(&self) -> usize {
        self.queue.lock().expect("BFD inbox lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What one session discarded, by reason; read by the status API.
#[derive(Debug, Default)]
pub struct BfdCounters {
    /// By [`Rejected`], in the order of [`Rejected::ALL`].
    rejected: [AtomicU64; Rejected::ALL.len()],
    /// Dropped from a full [`Inbox`].
    inbox_full: AtomicU64,
}

impl BfdCounters {
    fn reject(&self, why: Rejected) {
        let i = Rejected::ALL.iter().position(|r| *r == why).unwrap_or(0);
        self.rejected[i].fetch_add(1, Ordering::Relaxed);
    }

    /// Each reason's count (the `reason` label and its value), every
    /// reason listed.
    pub fn discarded(&self) -> Vec<(&'static str, u64)> {
        Rejected::ALL
            .iter()
            .zip(&self.rejected)
            .map(|(r, n)| (r.as_str(), n.load(Ordering::Relaxed)))
            .chain([("inbox-full", self.inbox_full.load(Ordering::Relaxed))])
            .collect()
    }
}

struct Entry {
    inbox: Arc<Inbox>,
    counters: Arc<BfdCounters>,
    discriminator: u32,
    multihop: bool,
}

type Table = Arc<Mutex<HashMap<IpAddr, Entry>>>;

/// The BFD service of the daemon.
pub struct Bfd {
    sessions: Table,
    receivers: Vec<JoinHandle<()>>,
    next_discr: u32,
    /// Where the peers listen.
    peer_ports: Ports,
}

fn rx_socket(port: u16, single_hop: bool) -> io::Result<UdpSocket> {
    let sock = Socket::new(Domain::IPV6, Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_only_v6(false)?;
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    if single_hop {
        holdfast_sockopt::set_min_ttl(&sock, 255).map_err(io::Error::from)?;
    }
    sock.bind(&SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), port).into())?;
    UdpSocket::from_std(sock.into())
}

fn tx_socket(peer: IpAddr, local: Option<IpAddr>, seed: u32) -> io::Result<UdpSocket> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::DGRAM, Some(Protocol::UDP))?;
    sock.set_nonblocking(true)?;
    holdfast_sockopt::set_ttl(&sock, 255).map_err(io::Error::from)?;
    let ip = local.unwrap_or(if peer.is_ipv4() {
        IpAddr::from([0, 0, 0, 0])
    } else {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    });
    // RFC 5881 §4: "The source port MUST be in the range 49152 through
    // 65535." Try ports from a per-session starting point.
    let mut last = None;
    for i in 0..16384u32 {
        let port = 49152 + ((seed.wrapping_add(i * 7919)) % 16384) as u16;
        match sock.bind(&SocketAddr::new(ip, port).into()) {
            Ok(()) => return UdpSocket::from_std(sock.into()),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free BFD source port")))
}

/// Where the session's packets go: UDP 3784 single hop (RFC 5881 §4) or
/// 4784 multihop (RFC 5883 §5); a link-local peer on its interface, so that
/// the kernel sends from that interface's link-local address (RFC 5881 §4:
/// the source is an address of the interface the peer is reached on).
fn destination(spec: &BfdSpec, ports: Ports) -> SocketAddr {
    let port = if spec.multihop {
        ports.multihop
    } else {
        ports.single_hop
    };
    match (spec.peer, spec.scope_id) {
        (IpAddr::V6(v6), Some(scope)) => SocketAddr::V6(SocketAddrV6::new(v6, port, 0, scope)),
        (ip, _) => SocketAddr::new(ip, port),
    }
}

fn receiver(sock: UdpSocket, table: Table, multihop: bool) -> JoinHandle<()> {
    tokio::spawn(async move {
        // Room for more than the longest packet: a longer datagram reads
        // as longer than MAX_LEN and is refused, never cut to fit.
        let mut buf = [0u8; 2 * MAX_LEN];
        loop {
            let (n, from) = match sock.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    warn!("BFD receive: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let received = match Received::decode(&buf[..n]) {
                Ok(r) => r,
                Err(why) => {
                    debug!(%from, "BFD packet discarded: {why}");
                    continue;
                }
            };
            let packet = &received.packet;
            let src = unmap(from.ip());
            let t = table.lock().expect("BFD table lock");
            // §6.8.6: by Your Discriminator when set, else by the source.
            let entry = if packet.your_discriminator != 0 {
                t.values().find(|e| {
                    e.discriminator == packet.your_discriminator && e.multihop == multihop
                })
            } else {
                t.get(&src).filter(|e| e.multihop == multihop)
            };
            match entry {
                Some(e) => {
                    if e.inbox.push(received) {
                        e.counters.inbox_full.fetch_add(1, Ordering::Relaxed);
                    }
                }
                None => debug!(%from, "BFD packet for no session"),
            }
        }
    })
}

impl Bfd {
    /// Binds the receive sockets.
    pub fn start() -> io::Result<Bfd> {
        Bfd::start_on(Ports::STANDARD, Ports::STANDARD).map(|(bfd, _)| bfd)
    }

    /// Listens on `listen` (0: any free port) and sends to `peer_ports`;
    /// returns the ports bound.
    fn start_on(listen: Ports, peer_ports: Ports) -> io::Result<(Bfd, Ports)> {
        let sessions: Table = Arc::new(Mutex::new(HashMap::new()));
        let single = rx_socket(listen.single_hop, true)?;
        let multi = rx_socket(listen.multihop, false)?;
        let bound = Ports {
            single_hop: single.local_addr()?.port(),
            multihop: multi.local_addr()?.port(),
        };
        let receivers = vec![
            receiver(single, sessions.clone(), false),
            receiver(multi, sessions.clone(), true),
        ];
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = std::process::id().wrapping_mul(2_654_435_761) ^ nanos;
        Ok((
            Bfd {
                sessions,
                receivers,
                next_discr: seed | 1,
                peer_ports,
            },
            bound,
        ))
    }

    /// Starts a session; its status follows on the returned channel. The
    /// session ends when the returned handle is dropped.
    pub fn add(&mut self, name: &str, spec: BfdSpec) -> io::Result<BfdSession> {
        // Discriminators: distinct, non-zero (§6.8.1).
        self.next_discr = self
            .next_discr
            .wrapping_mul(1_103_515_245)
            .wrapping_add(12345)
            | 1;
        let discr = self.next_discr;
        let sock = tx_socket(spec.peer, spec.local, discr)?;
        let inbox = Arc::new(Inbox::default());
        let counters = Arc::new(BfdCounters::default());
        self.sessions.lock().expect("BFD table lock").insert(
            spec.peer,
            Entry {
                inbox: inbox.clone(),
                counters: counters.clone(),
                discriminator: discr,
                multihop: spec.multihop,
            },
        );
        let now = Instant::now();
        let mut session = Session::new(
            Config {
                desired_min_tx: spec.desired_min_tx,
                required_min_rx: spec.required_min_rx,
                detect_mult: spec.detect_mult,
                local_discriminator: discr,
                jitter_seed: u64::from(discr),
                auth: spec.auth.clone().map(|key| AuthConfig {
                    key,
                    initial_sequence: random_u32().unwrap_or(discr),
                }),
            },
            now,
        );
        let (status_tx, status_rx) = watch::channel(BfdStatus {
            state: State::Down,
            since: now,
            diag: Diag::None,
            detection_time: None,
        });
        let dest = destination(&spec, self.peer_ports);
        let name = name.to_string();
        let table = self.sessions.clone();
        let peer = spec.peer;
        let task_counters = counters.clone();
        let task = tokio::spawn(async move {
            info!(peer = %name, address = %peer, "BFD session starting");
            loop {
                let deadline = session.next_deadline();
                let sleep = async {
                    match deadline {
                        Some(t) => tokio::time::sleep_until(t.into()).await,
                        None => std::future::pending().await,
                    }
                };
                let outs = tokio::select! {
                    r = inbox.pop() => session.receive(Instant::now(), &r),
                    () = sleep => session.poll(Instant::now()),
                };
                for o in outs {
                    match o {
                        Output::Send(p) => {
                            if let Err(e) = sock.send_to(p.encode().as_bytes(), dest).await {
                                debug!(peer = %name, "BFD send: {e}");
                            }
                        }
                        Output::Discarded(why) => {
                            task_counters.reject(why);
                            debug!(peer = %name, reason = why.as_str(), "BFD packet discarded");
                        }
                        Output::StateChange { from, to, diag } => {
                            info!(peer = %name, %from, %to, diag = %diag.as_str(), "BFD state change");
                            let _ = status_tx.send(BfdStatus {
                                state: to,
                                since: Instant::now(),
                                diag,
                                detection_time: session.detection_time(),
                            });
                        }
                    }
                }
                // The detection time also changes without a state change:
                // when the poll sequence ends the 1 s slow start (RFC 5880
                // §6.8.3) after Up, or the peer changes its intervals.
                let detection_time = session.detection_time();
                status_tx.send_if_modified(|s| {
                    let changed = s.detection_time != detection_time;
                    s.detection_time = detection_time;
                    changed
                });
            }
        });
        Ok(BfdSession {
            status: status_rx,
            counters,
            task,
            table,
            peer,
        })
    }
}

/// A random 32-bit value (bfd.XmitAuthSeq's start, RFC 5880 §6.8.1).
fn random_u32() -> Option<u32> {
    use ring::rand::SecureRandom;
    let mut b = [0u8; 4];
    ring::rand::SystemRandom::new().fill(&mut b).ok()?;
    Some(u32::from_be_bytes(b))
}

impl Drop for Bfd {
    fn drop(&mut self) {
        for r in &self.receivers {
            r.abort();
        }
    }
}

/// A running BFD session.
pub struct BfdSession {
    pub status: watch::Receiver<BfdStatus>,
    counters: Arc<BfdCounters>,
    task: JoinHandle<()>,
    table: Table,
    peer: IpAddr,
}

impl BfdSession {
    /// What the status API reads.
    pub fn view(&self) -> BfdView {
        BfdView {
            status: self.status.clone(),
            counters: self.counters.clone(),
        }
    }
}

/// A session's state and counters, for the status API.
#[derive(Clone)]
pub struct BfdView {
    status: watch::Receiver<BfdStatus>,
    counters: Arc<BfdCounters>,
}

impl BfdView {
    pub fn borrow(&self) -> watch::Ref<'_, BfdStatus> {
        self.status.borrow()
    }

    pub fn counters(&self) -> &BfdCounters {
        &self.counters
    }
}

impl Drop for BfdSession {
    fn drop(&mut self) {
        self.task.abort();
        self.table
            .lock()
            .expect("BFD table lock")
            .remove(&self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(peer: &str, scope_id: Option<u32>, multihop: bool) -> BfdSpec {
        BfdSpec {
            peer: peer.parse().unwrap(),
            local: None,
            scope_id,
            multihop,
            desired_min_tx: Duration::from_millis(300),
            required_min_rx: Duration::from_millis(300),
            detect_mult: 3,
            auth: None,
        }
    }

    #[test]
    fn a_link_local_peer_is_reached_on_its_interface() {
        assert_eq!(
            destination(&spec("fe80::1", Some(7), false), Ports::STANDARD).to_string(),
            "[fe80::1%7]:3784"
        );
        assert_eq!(
            destination(&spec("192.0.2.1", None, false), Ports::STANDARD).to_string(),
            "192.0.2.1:3784"
        );
        assert_eq!(
            destination(&spec("2001:db8::1", None, true), Ports::STANDARD).to_string(),
            "[2001:db8::1]:4784"
        );
    }

    #[test]
    fn a_full_inbox_drops_the_oldest() {
        let inbox = Inbox::default();
        let packet = |n: u32| {
            let p = crate::bfd::packet::Packet::first_from(n, 1_000_000);
            Received::decode(p.encode().as_bytes()).expect("decodes")
        };
        let dropped = (1..=1000).filter(|n| inbox.push(packet(*n))).count();
        assert_eq!(dropped, 1000 - INBOX_LEN);
        assert_eq!(inbox.len(), INBOX_LEN);
        let kept: Vec<u32> = std::iter::from_fn(|| {
            inbox
                .queue
                .lock()
                .unwrap()
                .pop_front()
                .map(|r| r.packet.my_discriminator)
        })
        .collect();
        assert_eq!(kept, (1001 - INBOX_LEN as u32..=1000).collect::<Vec<_>>());
    }

    /// Polls `f` every 20 ms until it is true; false after `limit`.
    async fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        f()
    }

    /// Two BFD services on loopback with one session between them; a third
    /// address floods the first service with packets for a session whose
    /// task never reads them. The flood stays within that session's inbox
    /// (the newest packets kept), and the session between the two stays Up
    /// throughout. Real sockets: generous bounds, no timing claims.
    #[tokio::test]
    async fn a_flood_toward_one_session_is_bounded_and_spares_the_others() {
        let any = Ports {
            single_hop: 0,
            multihop: 0,
        };
        let (mut a, a_ports) = Bfd::start_on(any, any).expect("bind on loopback");
        let (mut b, b_ports) = Bfd::start_on(any, a_ports).expect("bind on loopback");
        a.peer_ports = b_ports;
        let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
        let spec = |peer: &str, local: &str| BfdSpec {
            local: Some(ip(local)),
            // Detection Time 3 s: far beyond any scheduling delay.
            desired_min_tx: Duration::from_millis(300),
            required_min_rx: Duration::from_millis(300),
            detect_mult: 10,
            ..super::tests::spec(peer, None, false)
        };
        let a_to_b = a.add("b", spec("127.0.0.2", "127.0.0.1")).expect("session");
        let _b_to_a = b.add("a", spec("127.0.0.1", "127.0.0.2")).expect("session");
        let up = |s: &BfdSession| s.status.borrow().state == State::Up;
        assert!(
            eventually(Duration::from_secs(30), || up(&a_to_b)).await,
            "the loopback session came Up: {:?}",
            *a_to_b.status.borrow()
        );
        let up_since = a_to_b.status.borrow().since;

        // A session for 127.0.0.3 whose task never reads its inbox.
        let flooded = Arc::new(Inbox::default());
        let counters = Arc::new(BfdCounters::default());
        a.sessions.lock().unwrap().insert(
            ip("127.0.0.3"),
            Entry {
                inbox: flooded.clone(),
                counters: counters.clone(),
                discriminator: 0x5eed,
                multihop: false,
            },
        );
        let flooder = std::net::UdpSocket::bind("127.0.0.3:0").expect("bind 127.0.0.3");
        flooder.set_ttl(255).expect("TTL 255 (RFC 5881 §5)");
        let to = SocketAddr::new(ip("127.0.0.1"), a_ports.single_hop);
        let packet = |n: u32| crate::bfd::packet::Packet::first_from(n, 1_000_000).encode();
        const FLOOD: u32 = 20_000;
        let sender = {
            let flooder = flooder.try_clone().expect("clone");
            std::thread::spawn(move || {
                for n in 1..=FLOOD {
                    // A full socket buffer drops at the kernel: fine.
                    let _ = flooder.send_to(packet(n).as_bytes(), to);
                }
            })
        };
        // While the flood runs, the inbox never holds more than its bound.
        let mut most = 0;
        while !sender.is_finished() {
            most = most.max(flooded.len());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        sender.join().expect("flood sent");
        assert!(most <= INBOX_LEN, "the inbox held {most} during the flood");
        assert!(
            eventually(Duration::from_secs(10), || {
                counters.inbox_full.load(Ordering::Relaxed) > 0
            })
            .await,
            "the flood reached the inbox"
        );
        // Then one more packet: the newest is kept, the oldest went. (Sent
        // again while unseen: the kernel may drop it while the socket's
        // buffer is still full of the flood.)
        let marker = FLOOD + 1;
        let newest = || {
            flooded
                .queue
                .lock()
                .unwrap()
                .back()
                .map(|r| r.packet.my_discriminator)
        };
        let mut seen = false;
        for _ in 0..20 {
            flooder
                .send_to(packet(marker).as_bytes(), to)
                .expect("send marker");
            if eventually(Duration::from_millis(500), || newest() == Some(marker)).await {
                seen = true;
                break;
            }
        }
        assert!(seen, "the newest packet is in the inbox: {:?}", newest());
        most = most.max(flooded.len());
        assert_eq!(flooded.len(), INBOX_LEN);
        assert!(most <= INBOX_LEN, "the inbox held {most}");
        let full = counters.inbox_full.load(Ordering::Relaxed);
        assert!(
            full > 0 && full <= u64::from(FLOOD) + 1 - INBOX_LEN as u64,
            "{full}"
        );
        assert_eq!(
            counters
                .discarded()
                .into_iter()
                .find(|(r, _)| *r == "inbox-full"),
            Some(("inbox-full", full))
        );
        // The other session never left Up.
        let after = a_to_b.status.borrow().clone();
        assert_eq!(
            (after.state, after.since),
            (State::Up, up_since),
            "{after:?}"
        );
        // And it still hears its peer: Up a while later, same since.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let later = a_to_b.status.borrow().clone();
        assert_eq!(
            (later.state, later.since),
            (State::Up, up_since),
            "{later:?}"
        );
    }
}

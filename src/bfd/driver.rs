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

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use super::packet::{Diag, Packet, State};
use super::session::{Config, Output, Session};
use crate::net::unmap;

pub const SINGLE_HOP_PORT: u16 = 3784;
pub const MULTIHOP_PORT: u16 = 4784;

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
}

struct Entry {
    tx: mpsc::UnboundedSender<Packet>,
    discriminator: u32,
    multihop: bool,
}

type Table = Arc<Mutex<HashMap<IpAddr, Entry>>>;

/// The BFD service of the daemon.
pub struct Bfd {
    sessions: Table,
    receivers: Vec<JoinHandle<()>>,
    next_discr: u32,
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
fn destination(spec: &BfdSpec) -> SocketAddr {
    let port = if spec.multihop {
        MULTIHOP_PORT
    } else {
        SINGLE_HOP_PORT
    };
    match (spec.peer, spec.scope_id) {
        (IpAddr::V6(v6), Some(scope)) => SocketAddr::V6(SocketAddrV6::new(v6, port, 0, scope)),
        (ip, _) => SocketAddr::new(ip, port),
    }
}

fn receiver(sock: UdpSocket, table: Table, multihop: bool) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = [0u8; 128];
        loop {
            let (n, from) = match sock.recv_from(&mut buf).await {
                Ok(x) => x,
                Err(e) => {
                    warn!("BFD receive: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let packet = match Packet::decode(&buf[..n]) {
                Ok(p) => p,
                Err(why) => {
                    debug!(%from, "BFD packet discarded: {why}");
                    continue;
                }
            };
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
                    let _ = e.tx.send(packet);
                }
                None => debug!(%from, "BFD packet for no session"),
            }
        }
    })
}

impl Bfd {
    /// Binds the receive sockets.
    pub fn start() -> io::Result<Bfd> {
        let sessions: Table = Arc::new(Mutex::new(HashMap::new()));
        let receivers = vec![
            receiver(rx_socket(SINGLE_HOP_PORT, true)?, sessions.clone(), false),
            receiver(rx_socket(MULTIHOP_PORT, false)?, sessions.clone(), true),
        ];
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let seed = std::process::id().wrapping_mul(2_654_435_761) ^ nanos;
        Ok(Bfd {
            sessions,
            receivers,
            next_discr: seed | 1,
        })
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
        let (tx, mut rx) = mpsc::unbounded_channel();
        self.sessions.lock().expect("BFD table lock").insert(
            spec.peer,
            Entry {
                tx,
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
            },
            now,
        );
        let (status_tx, status_rx) = watch::channel(BfdStatus {
            state: State::Down,
            since: now,
            diag: Diag::None,
            detection_time: None,
        });
        let dest = destination(&spec);
        let name = name.to_string();
        let table = self.sessions.clone();
        let peer = spec.peer;
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
                    p = rx.recv() => match p {
                        Some(p) => session.receive(Instant::now(), &p),
                        None => return,
                    },
                    () = sleep => session.poll(Instant::now()),
                };
                for o in outs {
                    match o {
                        Output::Send(p) => {
                            if let Err(e) = sock.send_to(&p.encode(), dest).await {
                                debug!(peer = %name, "BFD send: {e}");
                            }
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
            task,
            table,
            peer,
        })
    }
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
    task: JoinHandle<()>,
    table: Table,
    peer: IpAddr,
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
        }
    }

    #[test]
    fn a_link_local_peer_is_reached_on_its_interface() {
        assert_eq!(
            destination(&spec("fe80::1", Some(7), false)).to_string(),
            "[fe80::1%7]:3784"
        );
        assert_eq!(
            destination(&spec("192.0.2.1", None, false)).to_string(),
            "192.0.2.1:3784"
        );
        assert_eq!(
            destination(&spec("2001:db8::1", None, true)).to_string(),
            "[2001:db8::1]:4784"
        );
    }
}

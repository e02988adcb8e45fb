//! Opening BGP's TCP connections with the options the peer's config asks
//! for: source address, TTL (ebgp_multihop), GTSM (RFC 5082) and TCP MD5
//! (RFC 2385), all set before the SYN leaves.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU8;
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::{TcpSocket, TcpStream};

/// The socket-level settings of one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketOptions {
    pub source_address: Option<IpAddr>,
    /// TTL of what we send (1 for a directly connected eBGP peer).
    pub ttl: u8,
    /// GTSM: send with TTL 255 and accept only 256 − hops and above.
    pub ttl_security_hops: Option<NonZeroU8>,
    pub md5_key: Option<Vec<u8>>,
}

impl SocketOptions {
    /// The TTL of what we send: 255 with GTSM (RFC 5082 §3), else `ttl`.
    pub fn sent_ttl(&self) -> u8 {
        if self.ttl_security_hops.is_some() {
            u8::MAX
        } else {
            self.ttl
        }
    }

    /// The lowest TTL we accept: 256 − hops with GTSM (RFC 5082 §3), else
    /// 0 (no check).
    pub fn min_ttl(&self) -> u8 {
        self.ttl_security_hops
            .map_or(0, |hops| (256 - u16::from(hops.get())) as u8)
    }

    /// Applies TTL/GTSM and MD5 for `peer` to a connecting socket.
    pub fn apply(&self, sock: &Socket, peer: IpAddr) -> io::Result<()> {
        match self.ttl_security_hops {
            Some(hops) => holdfast_sockopt::set_ttl_security(sock, hops)?,
            None => holdfast_sockopt::set_ttl(sock, self.ttl)?,
        }
        if let Some(key) = &self.md5_key {
            holdfast_sockopt::set_md5_key(sock, peer, key)?;
        }
        Ok(())
    }
}

/// Connects to `peer`, giving up after `timeout`.
pub async fn connect(
    peer: SocketAddr,
    opts: &SocketOptions,
    timeout: Duration,
) -> io::Result<TcpStream> {
    let domain = if peer.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_tcp_nodelay(true)?;
    opts.apply(&sock, peer.ip())?;
    if let Some(src) = opts.source_address {
        sock.bind(&SocketAddr::new(src, 0).into())?;
    }
    let std: std::net::TcpStream = sock.into();
    let sock = TcpSocket::from_std_stream(std);
    match tokio::time::timeout(timeout, sock.connect(peer)).await {
        Ok(Err(e)) if e.kind() == io::ErrorKind::HostUnreachable => Err(host_unreachable(e, opts)),
        Ok(r) => r,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            no_answer(peer, timeout, opts),
        )),
    }
}

/// EHOSTUNREACH is also how Linux reports an ICMP Time Exceeded answering
/// our SYN: with a small TTL (ebgp_multihop), a router further away than
/// that many hops looks exactly like this.
fn host_unreachable(e: io::Error, opts: &SocketOptions) -> io::Error {
    if opts.ttl_security_hops.is_some() || opts.ttl == u8::MAX {
        return e;
    }
    let hops = opts.ttl;
    io::Error::new(
        e.kind(),
        format!(
            "{e} (we send with TTL {hops}: a router more than {hops} hop(s) away looks like this, as the TTL runs out on the way; see ebgp_multihop)"
        ),
    )
}

/// Why a connection attempt to `peer` went unanswered for `waited`, with
/// what the socket options suggest: TCP MD5 (RFC 2385 §2: a segment with a
/// wrong or missing signature is dropped) and GTSM (RFC 5082 §3: a packet
/// below the minimum TTL is dropped) fail without a word, so a password or
/// TTL mismatch is indistinguishable from a router that is not there.
pub fn no_answer(peer: SocketAddr, waited: Duration, opts: &SocketOptions) -> String {
    let mut why = format!("no answer from {peer} within {}s", waited.as_secs_f64());
    if opts.md5_key.is_some() {
        why.push_str(
            " (TCP MD5 configured: a password mismatch looks like this, as the router drops SYNs signed with another key)",
        );
    }
    if let Some(hops) = opts.ttl_security_hops {
        why.push_str(&format!(
            " (GTSM configured: a router not set up for it (ttl-security hops {hops}) looks like this, as its replies arrive with a TTL below {})",
            256 - u16::from(hops.get())
        ));
    }
    why
}

/// The TTL settings of the listening socket (`speaker.listen`), which
/// apply to every handshake: the SYN-ACK goes out with the listener's TTL,
/// and a SYN below its minimum TTL is dropped by the kernel before any
/// connection exists (RFC 5082 §3). Accepted connections inherit both.
///
/// Linux has one `IP_MINTTL`/`IP_TTL` per socket, not per remote address
/// (unlike TCP MD5 keys), and one listener serves every peer. So:
///
/// - TTL: the largest any peer needs (255 if one uses GTSM or is iBGP), so
///   every peer's handshake completes — a SYN-ACK with more TTL than the
///   peer's `ebgp_multihop` reaches no further than the peer's own SYN came
///   from;
/// - minimum TTL: when every peer uses GTSM, the lowest of their minimums
///   (the strictest check that still admits each of them); when any does
///   not, none — its router sends with an ordinary TTL (FRR: 1 to a direct
///   eBGP neighbour), which a minimum would drop.
///
/// So that each peer's handshake is still held against its own minimum,
/// the listener keeps every SYN's headers (`TCP_SAVE_SYN`): before the
/// first byte of an accepted connection is read, [`accepted`] compares the
/// TTL its SYN arrived with to the peer's minimum and closes it if it is
/// below — nothing the peer sent is ever seen. It then sets the peer's own
/// TTL and minimum TTL on the connection for everything after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerTtl {
    pub ttl: u8,
    pub min_ttl: u8,
}

impl ListenerTtl {
    /// For the peers the listener serves; with none, the most restrictive
    /// settings (nothing would be accepted anyway).
    pub fn for_peers<'a>(peers: impl IntoIterator<Item = &'a SocketOptions>) -> Self {
        let mut ttl = None::<u8>;
        let mut min_ttl = None::<u8>;
        for p in peers {
            ttl = Some(ttl.map_or(p.sent_ttl(), |t| t.max(p.sent_ttl())));
            min_ttl = Some(min_ttl.map_or(p.min_ttl(), |m| m.min(p.min_ttl())));
        }
        ListenerTtl {
            ttl: ttl.unwrap_or(1),
            min_ttl: min_ttl.unwrap_or(u8::MAX),
        }
    }

    /// Sets both on a socket (the listener, before or after it listens).
    pub fn apply(&self, sock: impl std::os::fd::AsFd) -> io::Result<()> {
        let fd = sock.as_fd();
        holdfast_sockopt::set_ttl(fd, self.ttl)?;
        holdfast_sockopt::set_min_ttl(fd, self.min_ttl)?;
        Ok(())
    }
}

/// An accepted connection, before anything is read from it: its SYN must
/// have arrived with at least the peer's minimum TTL (RFC 5082 §3: GTSM
/// applies from the first packet), and it gets its peer's own TTL and
/// minimum TTL, replacing what it inherited from the listener. An error
/// means the connection must not be used.
pub fn accepted(stream: &TcpStream, opts: &SocketOptions) -> io::Result<()> {
    let min = opts.min_ttl();
    let syn = holdfast_sockopt::saved_syn_ttl(stream)?;
    check_syn_ttl(syn, min)?;
    holdfast_sockopt::set_ttl(stream, opts.sent_ttl())?;
    holdfast_sockopt::set_min_ttl(stream, opts.min_ttl())?;
    Ok(())
}

/// The TTL an accepted connection's SYN arrived with (`None`: the kernel
/// kept none) against the peer's minimum (0: no check).
fn check_syn_ttl(syn: Option<u8>, min: u8) -> io::Result<()> {
    match syn {
        _ if min == 0 => Ok(()),
        Some(ttl) if ttl >= min => Ok(()),
        Some(ttl) => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "GTSM: the SYN arrived with TTL {ttl}, below the minimum {min} (the router is {} hops away, more than ttl_security allows with ebgp_multihop = {})",
                256 - u16::from(ttl),
                256 - u16::from(min)
            ),
        )),
        None => Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "GTSM: the kernel kept no SYN headers to check the TTL against",
        )),
    }
}

/// Binds the passive side (`speaker.listen`), with an MD5 key for every
/// peer that has one: the kernel then drops unsigned or mis-signed SYNs
/// from those peers before we ever see them; and with the TTL settings of
/// [`ListenerTtl`], set before `listen`, so the first handshake is already
/// TTL-checked.
pub fn listen(
    addr: SocketAddr,
    keys: &[(IpAddr, Vec<u8>)],
    ttl: ListenerTtl,
) -> io::Result<tokio::net::TcpListener> {
    let domain = if addr.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    };
    let sock = Socket::new(domain, Type::STREAM, Some(Protocol::TCP))?;
    sock.set_nonblocking(true)?;
    sock.set_reuse_address(true)?;
    if addr.is_ipv6() {
        // [::] accepts IPv4 peers too (as mapped addresses).
        sock.set_only_v6(false)?;
    }
    for (peer, key) in keys {
        holdfast_sockopt::set_md5_key(&sock, *peer, key)?;
    }
    ttl.apply(&sock)?;
    holdfast_sockopt::set_save_syn(&sock)?;
    bind_service_port(&sock, addr)?;
    sock.listen(64)?;
    tokio::net::TcpListener::from_std(sock.into())
}

/// Binds `sock` to `addr`. A port below 1024 (BGP's own, 179) needs
/// `CAP_NET_BIND_SERVICE` when it is bound, and only then: the calling
/// thread raises it from the permitted set (the image's binary carries it
/// as a file capability, permitted only) for the bind, and lowers it again.
/// Without it (the base DaemonSet grants none) the error says what is
/// missing and which overlay grants it.
fn bind_service_port(sock: &Socket, addr: SocketAddr) -> io::Result<()> {
    use holdfast_sockopt::caps::{self, Capability};
    let raised = (addr.port() < 1024).then(|| caps::raise(Capability::NetBindService));
    sock.bind(&addr.into()).map_err(|e| {
        if e.kind() != io::ErrorKind::PermissionDenied || addr.port() >= 1024 {
            return e;
        }
        let why = match &raised {
            Some(Err(r)) => format!(" ({r})"),
            _ => String::new(),
        };
        io::Error::new(
            e.kind(),
            format!(
                "{e}: binding port {} needs {}{why} (docs: Install, Listening on port 179; \
                 deploy/overlays/listen-179 grants it)",
                addr.port(),
                Capability::NetBindService.name()
            ),
        )
    })
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (the one rule,
/// in `crate::model::net`).
pub use crate::model::net::unmap;

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> SocketOptions {
        SocketOptions {
            source_address: None,
            ttl: 1,
            ttl_security_hops: None,
            md5_key: None,
        }
    }

    #[test]
    fn no_answer_names_the_silent_droppers_that_are_configured() {
        let peer: SocketAddr = "192.0.2.1:179".parse().unwrap();
        let plain = no_answer(peer, Duration::from_secs(5), &opts());
        assert_eq!(plain, "no answer from 192.0.2.1:179 within 5s");

        let md5 = SocketOptions {
            md5_key: Some(b"k".to_vec()),
            ..opts()
        };
        let text = no_answer(peer, Duration::from_millis(1500), &md5);
        assert!(text.starts_with("no answer from 192.0.2.1:179 within 1.5s (TCP MD5 configured: a password mismatch looks like this"), "{text}");
        assert!(!text.contains("GTSM"), "{text}");

        let gtsm = SocketOptions {
            ttl_security_hops: NonZeroU8::new(2),
            ..opts()
        };
        let text = no_answer(peer, Duration::from_secs(1), &gtsm);
        assert!(
            text.contains("ttl-security hops 2") && text.contains("TTL below 254"),
            "{text}"
        );
        assert!(!text.contains("MD5"), "{text}");
    }

    #[test]
    fn listener_ttl_admits_every_peer_and_checks_only_when_all_use_gtsm() {
        let gtsm = |hops| SocketOptions {
            ttl_security_hops: NonZeroU8::new(hops),
            ..opts()
        };
        let plain = |ttl| SocketOptions { ttl, ..opts() };
        let l = |peers: &[SocketOptions]| ListenerTtl::for_peers(peers);
        // One GTSM peer: exactly its settings (RFC 5082 §3).
        assert_eq!(
            l(&[gtsm(1)]),
            ListenerTtl {
                ttl: 255,
                min_ttl: 255
            }
        );
        // Several: the lowest minimum, so the peer 2 hops away gets in.
        assert_eq!(
            l(&[gtsm(1), gtsm(2)]),
            ListenerTtl {
                ttl: 255,
                min_ttl: 254
            }
        );
        // A peer without GTSM: no minimum; the largest TTL.
        assert_eq!(
            l(&[gtsm(1), plain(1)]),
            ListenerTtl {
                ttl: 255,
                min_ttl: 0
            }
        );
        assert_eq!(l(&[plain(1), plain(2)]), ListenerTtl { ttl: 2, min_ttl: 0 });
        assert_eq!(
            l(&[]),
            ListenerTtl {
                ttl: 1,
                min_ttl: 255
            }
        );
    }

    #[test]
    fn the_syn_of_an_accepted_gtsm_connection_must_reach_the_minimum() {
        assert!(check_syn_ttl(Some(255), 255).is_ok());
        assert!(check_syn_ttl(Some(254), 254).is_ok());
        let e = check_syn_ttl(Some(254), 255).unwrap_err().to_string();
        assert!(
            e.contains("TTL 254, below the minimum 255")
                && e.contains("2 hops away")
                && e.contains("ebgp_multihop = 1"),
            "{e}"
        );
        // Fail closed when nothing can be checked.
        assert!(check_syn_ttl(None, 255).is_err());
        // No GTSM: nothing to check.
        assert!(check_syn_ttl(Some(1), 0).is_ok());
        assert!(check_syn_ttl(None, 0).is_ok());
    }

    #[test]
    fn host_unreachable_suggests_ebgp_multihop_when_the_ttl_is_small() {
        let e = || io::Error::from(io::ErrorKind::HostUnreachable);
        let text = host_unreachable(e(), &opts()).to_string();
        assert!(
            text.contains("TTL 1") && text.contains("ebgp_multihop"),
            "{text}"
        );
        // TTL 255 (iBGP) or GTSM: the TTL is not the problem.
        let ibgp = SocketOptions { ttl: 255, ..opts() };
        assert_eq!(host_unreachable(e(), &ibgp).to_string(), e().to_string());
        let gtsm = SocketOptions {
            ttl_security_hops: NonZeroU8::new(1),
            ..opts()
        };
        assert_eq!(host_unreachable(e(), &gtsm).to_string(), e().to_string());
    }
}

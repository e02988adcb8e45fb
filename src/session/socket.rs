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
    /// Applies TTL/GTSM and MD5 for `peer` to a socket (connecting or
    /// accepted).
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

/// Binds the passive side (`speaker.listen`), with an MD5 key for every
/// peer that has one: the kernel then drops unsigned or mis-signed SYNs
/// from those peers before we ever see them.
pub fn listen(addr: SocketAddr, keys: &[(IpAddr, Vec<u8>)]) -> io::Result<tokio::net::TcpListener> {
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
    sock.bind(&addr.into())?;
    sock.listen(64)?;
    tokio::net::TcpListener::from_std(sock.into())
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is (the one rule,
/// in `crate::net`).
pub use crate::net::unmap;

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

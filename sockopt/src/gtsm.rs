//! The Generalized TTL Security Mechanism (GTSM, RFC 5082).
//!
//! RFC 5082 §3: a peer sends with TTL 255 and its neighbour discards what
//! arrives with a TTL below 255 minus the number of hops between them, so a
//! packet forged farther away than that cannot reach the BGP session at all.
//! Linux does the discarding itself, before the TCP handshake, with
//! `IP_MINTTL` (IPv4) and `IPV6_MINHOPCOUNT` (IPv6); drops are counted as
//! `TCPMinTTLDrop` in `TcpExt` of `/proc/net/netstat`.
//!
//! An IPv6 socket may carry IPv4 traffic (IPv4-mapped addresses on a
//! dual-stack socket). That traffic is IPv4 on the wire: the kernel checks
//! it against `IP_MINTTL` and sends it with `IP_TTL`, both of which an IPv6
//! socket accepts. So on an IPv6 socket the functions here set the IPv4 and
//! the IPv6 option.

use std::num::NonZeroU8;
use std::os::fd::{AsFd, BorrowedFd};

use socket2::SockRef;

use crate::Error;
use crate::family::{Family, family_of};
use crate::sys;

// libc has both options: IP_MINTTL = 21 (linux/in.h, Linux 2.6.34) and
// IPV6_MINHOPCOUNT = 73 (linux/in6.h, Linux 2.6.35).
use libc::{IP_MINTTL, IPV6_MINHOPCOUNT};

/// Discards, in the kernel, every packet of this socket that arrives with a
/// TTL (IPv4) or hop limit (IPv6) below `min_ttl`; 0 turns the check off.
///
/// On a listening socket it applies to the SYNs of new connections, so a
/// peer too many hops away never completes the handshake; accepted
/// connections inherit it. On an IPv6 socket both `IPV6_MINHOPCOUNT` and
/// `IP_MINTTL` are set (IPv4-mapped connections are checked against the
/// latter).
pub fn set_min_ttl(sock: impl AsFd, min_ttl: u8) -> Result<(), Error> {
    let fd = sock.as_fd();
    let value = libc::c_int::from(min_ttl);
    let family = family_of(fd, &|| format!("setting the minimum TTL to {min_ttl}"))?;
    if family == Family::Ipv6 {
        set_int(fd, libc::IPPROTO_IPV6, IPV6_MINHOPCOUNT, value, || {
            format!("setting IPV6_MINHOPCOUNT to {min_ttl}")
        })?;
    }
    set_int(fd, libc::IPPROTO_IP, IP_MINTTL, value, || {
        format!("setting IP_MINTTL to {min_ttl}")
    })
}

/// Sets the TTL (IPv4) or hop limit (IPv6) of what the socket sends; 1 to
/// 255. On an IPv6 socket both the hop limit and the IPv4 TTL are set, for
/// IPv4-mapped connections.
pub fn set_ttl(sock: impl AsFd, ttl: u8) -> Result<(), Error> {
    let fd = sock.as_fd();
    let family = family_of(fd, &|| format!("setting the TTL to {ttl}"))?;
    let socket = SockRef::from(&fd);
    if family == Family::Ipv6 {
        socket
            .set_unicast_hops_v6(u32::from(ttl))
            .map_err(|e| Error::os(format!("setting IPV6_UNICAST_HOPS to {ttl}"), e))?;
    }
    socket
        .set_ttl_v4(u32::from(ttl))
        .map_err(|e| Error::os(format!("setting IP_TTL to {ttl}"), e))
}

/// GTSM for a peer `hops` IP hops away (RFC 5082 §3), as FRR's
/// `neighbor X ttl-security hops N`: send with TTL 255, accept only
/// TTL ≥ 256 − `hops` (255 for a directly connected peer).
pub fn set_ttl_security(sock: impl AsFd, hops: NonZeroU8) -> Result<(), Error> {
    let fd = sock.as_fd();
    set_ttl(fd, 255)?;
    // hops ≥ 1, so 256 - hops is in 1..=255.
    set_min_ttl(fd, (256 - u16::from(hops.get())) as u8)
}

fn set_int(
    fd: BorrowedFd<'_>,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
    doing: impl FnOnce() -> String,
) -> Result<(), Error> {
    sys::setsockopt(fd, level, name, &value).map_err(|e| Error::os(doing(), e))
}

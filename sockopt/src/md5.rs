//! TCP MD5 signatures (RFC 2385) through Linux's `TCP_MD5SIG`.
//!
//! The kernel keeps keys per socket and per peer address (the port is not
//! part of it). A key set on a listening socket is inherited by the
//! connections it accepts; a key set on a connecting socket must be there
//! before `connect()`, because the SYN is already signed (RFC 2385 §2:
//! every segment of the connection carries the option). Segments from a
//! peer that has a key but arrive unsigned or wrongly signed, and signed
//! segments from a peer that has none, are dropped silently (RFC 2385 §2.0,
//! "the segment MUST be discarded"; counted in `TcpExt` of
//! `/proc/net/netstat` as `TCPMD5NotFound`, `TCPMD5Failure`,
//! `TCPMD5Unexpected`).

use std::net::IpAddr;
use std::os::fd::{AsFd, BorrowedFd};

use crate::Error;
use crate::family::{Family, family_of};
use crate::sys;

/// The longest key the kernel accepts: `TCP_MD5SIG_MAXKEYLEN` in
/// linux/tcp.h. RFC 2385 itself sets no limit; 80 bytes is what Linux (and
/// so FRR and BIRD on Linux) can use.
pub const MD5_MAX_KEY_LEN: usize = 80;

// libc names the same limit; if the two ever disagree the kernel's ABI
// changed and this crate must be looked at.
const _: () = assert!(MD5_MAX_KEY_LEN == libc::TCP_MD5SIG_MAXKEYLEN);

/// `struct __kernel_sockaddr_storage` (linux/socket.h): 128 bytes, aligned
/// like a pointer. Filled in by hand (see [`SockaddrStorage::new`]) so that
/// building it needs no unsafe code.
#[repr(C)]
struct SockaddrStorage {
    _align: [usize; 0],
    bytes: [u8; 128],
}

impl SockaddrStorage {
    /// A `sockaddr_in` (linux/in.h) or `sockaddr_in6` (linux/in6.h) with
    /// port 0 — the kernel only looks at the family and the address.
    ///
    /// ```text
    /// sockaddr_in:  family(2, host order) port(2) addr(4)      zero(8)
    /// sockaddr_in6: family(2, host order) port(2) flowinfo(4) addr(16) scope_id(4)
    /// ```
    fn new(addr: IpAddr) -> SockaddrStorage {
        let mut bytes = [0u8; 128];
        match addr {
            IpAddr::V4(v4) => {
                bytes[0..2].copy_from_slice(&(libc::AF_INET as libc::sa_family_t).to_ne_bytes());
                bytes[4..8].copy_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                bytes[0..2].copy_from_slice(&(libc::AF_INET6 as libc::sa_family_t).to_ne_bytes());
                bytes[8..24].copy_from_slice(&v6.octets());
            }
        }
        SockaddrStorage { _align: [], bytes }
    }
}

/// `struct tcp_md5sig` (linux/tcp.h). With plain `TCP_MD5SIG` (not
/// `TCP_MD5SIG_EXT`) the kernel ignores flags, prefix length and ifindex.
#[repr(C)]
pub(crate) struct TcpMd5Sig {
    addr: SockaddrStorage,
    flags: u8,
    prefixlen: u8,
    keylen: u16,
    ifindex: libc::c_int,
    key: [u8; MD5_MAX_KEY_LEN],
}

// The layout the kernel expects, with no padding (sys::OptionValue requires
// every byte to be initialised): 128 + 1 + 1 + 2 + 4 + 80 = 216 bytes.
const _: () = {
    assert!(size_of::<SockaddrStorage>() == 128);
    assert!(align_of::<SockaddrStorage>() == align_of::<*const u8>());
    assert!(std::mem::offset_of!(TcpMd5Sig, flags) == 128);
    assert!(std::mem::offset_of!(TcpMd5Sig, keylen) == 130);
    assert!(std::mem::offset_of!(TcpMd5Sig, ifindex) == 132);
    assert!(std::mem::offset_of!(TcpMd5Sig, key) == 136);
    assert!(size_of::<TcpMd5Sig>() == 216);
};

impl TcpMd5Sig {
    /// `key` is at most [`MD5_MAX_KEY_LEN`] bytes (checked by the caller);
    /// an empty key deletes the peer's key.
    fn new(addr: IpAddr, key: &[u8]) -> TcpMd5Sig {
        let mut bytes = [0u8; MD5_MAX_KEY_LEN];
        for (to, from) in bytes.iter_mut().zip(key) {
            *to = *from;
        }
        TcpMd5Sig {
            addr: SockaddrStorage::new(addr),
            flags: 0,
            prefixlen: 0,
            // At most MD5_MAX_KEY_LEN: always fits.
            keylen: key.len().min(MD5_MAX_KEY_LEN) as u16,
            ifindex: 0,
            key: bytes,
        }
    }
}

/// Sets the TCP MD5 key (RFC 2385) for segments to and from `peer`.
///
/// On a listening socket: one key per peer, as many peers as needed (each
/// key takes about 136 bytes of the socket's option memory,
/// `net.core.optmem_max`); accepted connections inherit the keys. On a
/// connecting socket: call it before `connect()`. Setting a key again
/// replaces it.
///
/// `peer` may be given in either family: on an IPv6 socket an IPv4 peer is
/// written as its IPv4-mapped address (`::ffff:a.b.c.d`), which is how the
/// kernel keys a dual-stack socket's IPv4 connections; on an IPv4 socket an
/// IPv4-mapped IPv6 peer is unmapped.
///
/// The key must be 1 to [`MD5_MAX_KEY_LEN`] bytes; that is checked before
/// any system call. No privilege is needed (no `CAP_NET_ADMIN`).
pub fn set_md5_key(sock: impl AsFd, peer: IpAddr, key: &[u8]) -> Result<(), Error> {
    if key.is_empty() {
        return Err(Error::EmptyMd5Key { peer });
    }
    if key.len() > MD5_MAX_KEY_LEN {
        return Err(Error::Md5KeyTooLong {
            peer,
            len: key.len(),
        });
    }
    apply(sock.as_fd(), "setting", peer, key)
}

/// Deletes the TCP MD5 key for `peer` (the kernel's "key length 0"). A peer
/// that has no key is an error with `ENOENT`.
pub fn clear_md5_key(sock: impl AsFd, peer: IpAddr) -> Result<(), Error> {
    apply(sock.as_fd(), "clearing", peer, &[])
}

fn apply(fd: BorrowedFd<'_>, verb: &str, peer: IpAddr, key: &[u8]) -> Result<(), Error> {
    let doing = || format!("{verb} TCP_MD5SIG for peer {peer}");
    let family = family_of(fd, &doing)?;
    let addr = address_for(family, peer).ok_or(Error::PeerFamilyMismatch { peer })?;
    sys::setsockopt(
        fd,
        libc::IPPROTO_TCP,
        libc::TCP_MD5SIG,
        &TcpMd5Sig::new(addr, key),
    )
    .map_err(|e| {
        let doing = if addr == peer {
            doing()
        } else {
            format!(
                "{} (as {addr} on an IPv{} socket)",
                doing(),
                family_digit(family)
            )
        };
        Error::os(doing, e)
    })
}

/// The peer's address in the socket's family. The kernel wants the
/// sockaddr's family to be the socket's (EINVAL otherwise): a dual-stack
/// IPv6 socket keys an IPv4 peer by its IPv4-mapped address. An IPv4 socket
/// cannot reach a true IPv6 peer: `None`.
fn address_for(family: Family, peer: IpAddr) -> Option<IpAddr> {
    match (family, peer) {
        (Family::Ipv4, IpAddr::V4(_)) | (Family::Ipv6, IpAddr::V6(_)) => Some(peer),
        (Family::Ipv6, IpAddr::V4(v4)) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
        (Family::Ipv4, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4),
    }
}

fn family_digit(family: Family) -> u8 {
    match family {
        Family::Ipv4 => 4,
        Family::Ipv6 => 6,
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn ipv4_peers_on_ipv6_sockets_are_mapped_and_back() {
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
        let mapped = IpAddr::V6("::ffff:192.0.2.1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(address_for(Family::Ipv6, v4), Some(mapped));
        assert_eq!(address_for(Family::Ipv4, mapped), Some(v4));
        assert_eq!(address_for(Family::Ipv4, v4), Some(v4));
        assert_eq!(address_for(Family::Ipv6, mapped), Some(mapped));
        let v6 = IpAddr::V6("2001:db8::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(address_for(Family::Ipv4, v6), None);
        assert_eq!(address_for(Family::Ipv6, v6), Some(v6));
    }

    #[test]
    fn sockaddr_layout_matches_the_kernel_headers() {
        let v4 = SockaddrStorage::new(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1)));
        assert_eq!(v4.bytes[0..2], (libc::AF_INET as u16).to_ne_bytes());
        assert_eq!(v4.bytes[2..8], [0, 0, 192, 0, 2, 1]);
        assert!(v4.bytes[8..].iter().all(|b| *b == 0));

        let v6 = SockaddrStorage::new(IpAddr::V6("2001:db8::7".parse().unwrap()));
        assert_eq!(v6.bytes[0..2], (libc::AF_INET6 as u16).to_ne_bytes());
        assert_eq!(v6.bytes[2..8], [0; 6]);
        assert_eq!(
            v6.bytes[8..24],
            [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]
        );
        assert!(v6.bytes[24..].iter().all(|b| *b == 0));
    }

    #[test]
    fn key_is_copied_with_its_length() {
        let sig = TcpMd5Sig::new(IpAddr::V4(Ipv4Addr::LOCALHOST), b"secret");
        assert_eq!(sig.keylen, 6);
        assert_eq!(&sig.key[..6], b"secret");
        assert!(sig.key[6..].iter().all(|b| *b == 0));
        assert_eq!(
            TcpMd5Sig::new(IpAddr::V4(Ipv4Addr::LOCALHOST), &[]).keylen,
            0
        );
    }
}

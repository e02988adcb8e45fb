//! Receiving ICMPv6 with the hop limit it arrived with: Neighbor Discovery
//! messages are only valid with a hop limit of 255 (RFC 4861 §6.1.2, §7.1.1),
//! which proves they were not forwarded by a router.

use std::io;
use std::net::SocketAddrV6;
use std::os::fd::AsFd;

/// One datagram: its length in the buffer, where it came from (with the
/// scope id of a link-local source), and its IPv6 hop limit when the socket
/// has IPV6_RECVHOPLIMIT set (`socket2::Socket::set_recv_hoplimit_v6`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    pub len: usize,
    pub source: SocketAddrV6,
    pub hop_limit: Option<u8>,
}

/// Receives one datagram on an IPv6 socket (a raw ICMPv6 one: the buffer
/// gets the ICMPv6 message without the IPv6 header), blocking as the socket
/// does.
pub fn recv_with_hop_limit(socket: impl AsFd, buf: &mut [u8]) -> io::Result<Received> {
    let r = crate::sys::recvmsg_hop_limit(socket.as_fd(), buf)?;
    Ok(Received {
        len: r.len,
        source: r.source,
        hop_limit: r.hop_limit,
    })
}

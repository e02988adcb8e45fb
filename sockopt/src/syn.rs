//! The TTL of the SYN that opened an accepted connection, through Linux's
//! `TCP_SAVE_SYN` / `TCP_SAVED_SYN` (Linux 4.2).
//!
//! One listening socket serves every BGP peer, but `IP_MINTTL` is one value
//! per socket: a listener whose peers need different minimum TTLs (GTSM,
//! RFC 5082 §3) can only check the most permissive one on the handshake.
//! With `TCP_SAVE_SYN` on the listener the kernel keeps the IP and TCP
//! headers of each connection's SYN, and the accepting side can read the
//! TTL (IPv4) or hop limit (IPv6) the SYN arrived with and hold it against
//! that peer's own minimum before reading a byte.

use std::os::fd::AsFd;

use crate::Error;
use crate::sys;

use libc::{TCP_SAVE_SYN, TCP_SAVED_SYN};

/// Makes a listening socket keep the headers of every SYN it accepts, for
/// [`saved_syn_ttl`] on the accepted connections.
pub fn set_save_syn(listener: impl AsFd) -> Result<(), Error> {
    sys::setsockopt(
        listener.as_fd(),
        libc::IPPROTO_TCP,
        TCP_SAVE_SYN,
        &libc::c_int::from(1u8),
    )
    .map_err(|e| Error::os("setting TCP_SAVE_SYN".to_string(), e))
}

/// The TTL (IPv4) or hop limit (IPv6) of the SYN of an accepted connection
/// whose listener had [`set_save_syn`]; `None` when the kernel kept no SYN
/// (the listener did not ask, or it was read before: the kernel hands it
/// out once). An IPv4-mapped connection on an IPv6 listener gives its IPv4
/// header's TTL.
pub fn saved_syn_ttl(stream: impl AsFd) -> Result<Option<u8>, Error> {
    // An IPv6 header (40) and a TCP header with every option (60).
    let mut buf = [0u8; 128];
    let n = match sys::getsockopt_bytes(stream.as_fd(), libc::IPPROTO_TCP, TCP_SAVED_SYN, &mut buf)
    {
        Ok(n) => n,
        Err(e) => return Err(Error::os("reading TCP_SAVED_SYN".to_string(), e)),
    };
    Ok(header_ttl(&buf[..n]))
}

/// The TTL or hop limit in an IP header (RFC 791 §3.1: octet 8; RFC 8200
/// §3: octet 7).
fn header_ttl(header: &[u8]) -> Option<u8> {
    match header.first()? >> 4 {
        4 => header.get(8).copied(),
        6 => header.get(7).copied(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::header_ttl;

    #[test]
    fn ttl_and_hop_limit_from_the_header() {
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[8] = 254;
        assert_eq!(header_ttl(&v4), Some(254));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[7] = 253;
        assert_eq!(header_ttl(&v6), Some(253));
        assert_eq!(header_ttl(&[]), None);
        assert_eq!(header_ttl(&[0x45, 0, 0]), None);
        assert_eq!(header_ttl(&[0x20; 40]), None);
    }
}

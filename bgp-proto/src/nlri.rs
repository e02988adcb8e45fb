//! NLRI: IPv4 and IPv6 prefixes (RFC 4271 §4.3, RFC 4760 §5), with the
//! RFC 7911 Path Identifier when ADD-PATH is negotiated.
//!
//! ```text
//! +---------------------------+
//! |   Path Identifier (4)     |   only with ADD-PATH (RFC 7911 §3)
//! +---------------------------+
//! |   Length (1 octet, bits)  |
//! +---------------------------+
//! |   Prefix (variable)       |   ceil(Length / 8) octets
//! +---------------------------+
//! ```
//!
//! Bits past the prefix length in the last octet are kept as received (the
//! address inside `IpNet` is not masked), so re-encoding is lossless.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use crate::context::{Afi, Family};
use crate::wire;

/// One route: a prefix and, with ADD-PATH, its path identifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Nlri {
    /// The Path Identifier (RFC 7911 §3), present when the NLRI was decoded
    /// with ADD-PATH or built with one.
    pub path_id: Option<u32>,
    /// The prefix; host bits are kept as received.
    pub prefix: IpNet,
}

impl Nlri {
    /// A route without a Path Identifier.
    pub fn new(prefix: IpNet) -> Self {
        Nlri {
            path_id: None,
            prefix,
        }
    }

    /// A route with the ADD-PATH Path Identifier `path_id`.
    pub fn with_path_id(prefix: IpNet, path_id: u32) -> Self {
        Nlri {
            path_id: Some(path_id),
            prefix,
        }
    }

    /// The unicast family of the prefix's address family.
    pub fn family(&self) -> Family {
        match self.prefix {
            IpNet::V4(_) => Family::IPV4_UNICAST,
            IpNet::V6(_) => Family::IPV6_UNICAST,
        }
    }

    /// Octets this NLRI takes on the wire.
    pub fn wire_len(&self, add_path: bool) -> usize {
        let path = if add_path { 4 } else { 0 };
        path + 1 + usize::from(self.prefix.prefix_len()).div_ceil(8)
    }

    /// Writes the NLRI; with `add_path`, the Path Identifier first (0 when
    /// there is none).
    #[inline]
    pub fn encode(&self, add_path: bool, out: &mut Vec<u8>) {
        if add_path {
            out.extend_from_slice(&self.path_id.unwrap_or(0).to_be_bytes());
        }
        let len = self.prefix.prefix_len();
        out.push(len);
        // The whole address is written and cut to the octets the length
        // needs: a fixed-size copy is a few moves where a copy of
        // `octets` octets was a memcpy call per prefix.
        let end = out.len() + usize::from(len).div_ceil(8);
        match self.prefix {
            IpNet::V4(p) => out.extend_from_slice(&p.addr().octets()),
            IpNet::V6(p) => out.extend_from_slice(&p.addr().octets()),
        }
        out.truncate(end);
    }
}

impl fmt::Display for Nlri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.path_id {
            Some(id) => write!(f, "{} (path-id {id})", self.prefix),
            None => write!(f, "{}", self.prefix),
        }
    }
}

/// Why an NLRI field is "syntactically incorrect" (RFC 7606 §5.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NlriError {
    /// "The length of any of the included NLRI is greater than the length
    /// of the field as specified (e.g., > 32 for IPv4)."
    PrefixTooLong,
    /// "The length of the field (as computed from enclosed NLRI lengths)
    /// does not match the length of the field" — the last prefix runs past
    /// the end.
    Truncated,
}

impl NlriError {
    /// The error in words, for the log.
    pub fn reason(self) -> &'static str {
        match self {
            NlriError::PrefixTooLong => "prefix length exceeds the address length",
            NlriError::Truncated => "prefix runs past the end of the field",
        }
    }
}

/// The prefix octets, zero-padded to an address. Copied octet by octet:
/// `copy_from_slice` of a length known only at run time was a memcpy call
/// per prefix.
#[inline]
fn padded<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    for (to, from) in a.iter_mut().zip(bytes) {
        *to = *from;
    }
    a
}

fn one(input: &[u8], afi: Afi, add_path: bool) -> Result<(&[u8], Nlri), NlriError> {
    let (input, path_id) = if add_path {
        let (rest, id) = wire::u32(input).map_err(|_| NlriError::Truncated)?;
        (rest, Some(id))
    } else {
        (input, None)
    };
    let (input, len) = wire::u8(input).map_err(|_| NlriError::Truncated)?;
    let max = if afi == Afi::IPV6 { 128 } else { 32 };
    if len > max {
        return Err(NlriError::PrefixTooLong);
    }
    let octets = usize::from(len).div_ceil(8);
    let (rest, bytes) = wire::take(octets)(input).map_err(|_| NlriError::Truncated)?;
    let prefix = if afi == Afi::IPV6 {
        Ipv6Net::new(Ipv6Addr::from(padded(bytes)), len).map(IpNet::V6)
    } else {
        Ipv4Net::new(Ipv4Addr::from(padded(bytes)), len).map(IpNet::V4)
    }
    .map_err(|_| NlriError::PrefixTooLong)?;
    Ok((rest, Nlri { path_id, prefix }))
}

/// Decodes a whole NLRI (or Withdrawn Routes) field of one address family.
pub fn decode_list(mut input: &[u8], afi: Afi, add_path: bool) -> Result<Vec<Nlri>, NlriError> {
    // Most UPDATEs have no Withdrawn Routes, and an End-of-RIB no NLRI:
    // no allocation for an empty field.
    if input.is_empty() {
        return Ok(Vec::new());
    }
    // A /24 takes 4 octets: a cheap, never-too-small-for-long estimate.
    let mut out = Vec::with_capacity(input.len() / 4 + 1);
    while !input.is_empty() {
        let (rest, n) = one(input, afi, add_path)?;
        out.push(n);
        input = rest;
    }
    Ok(out)
}

/// Writes every NLRI of `list` back to back, as one NLRI or Withdrawn
/// Routes field.
pub fn encode_list(list: &[Nlri], add_path: bool, out: &mut Vec<u8>) {
    for n in list {
        n.encode(add_path, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn ipv4_prefixes_both_ways() {
        let bytes = [24, 198, 51, 100, 32, 203, 0, 113, 7, 0];
        let list = decode_list(&bytes, Afi::IPV4, false).unwrap();
        assert_eq!(
            list,
            vec![
                Nlri::new(net("198.51.100.0/24")),
                Nlri::new(net("203.0.113.7/32")),
                Nlri::new(net("0.0.0.0/0")),
            ]
        );
        let mut out = Vec::new();
        encode_list(&list, false, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn ipv6_with_path_id_both_ways() {
        let bytes = [0, 0, 0, 7, 64, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1];
        let list = decode_list(&bytes, Afi::IPV6, true).unwrap();
        assert_eq!(list, vec![Nlri::with_path_id(net("2001:db8:0:1::/64"), 7)]);
        let mut out = Vec::new();
        encode_list(&list, true, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn host_bits_past_the_length_survive() {
        // /23 whose last octet has the bit past the prefix set.
        let bytes = [23, 10, 0, 1];
        let list = decode_list(&bytes, Afi::IPV4, false).unwrap();
        assert_eq!(list[0].prefix.to_string(), "10.0.1.0/23");
        let mut out = Vec::new();
        encode_list(&list, false, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn malformed_fields() {
        assert_eq!(
            decode_list(&[33, 1, 2, 3, 4, 5], Afi::IPV4, false),
            Err(NlriError::PrefixTooLong)
        );
        assert_eq!(
            decode_list(&[129], Afi::IPV6, false),
            Err(NlriError::PrefixTooLong)
        );
        assert_eq!(
            decode_list(&[24, 10, 0], Afi::IPV4, false),
            Err(NlriError::Truncated)
        );
        assert_eq!(
            decode_list(&[0, 0, 1], Afi::IPV4, true),
            Err(NlriError::Truncated)
        );
    }
}

//! Address rules every layer applies the same way; the lowest layer, so
//! that config, sources and sessions all import it downward.
//!
//! An IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, RFC 4291 §2.5.5.2) is
//! how a dual-stack socket shows an IPv4 peer; it is the IPv4 address, not
//! a second address. Where holdfast meets one:
//!
//! | where | rule |
//! |---|---|
//! | config: `[[peer]] address`, `source_address`, `[speaker] listen`, `api` | refused, naming the IPv4 form to write instead |
//! | the VIP file, Kubernetes Service addresses | read as the IPv4 address (so duplicates are found) |
//! | an accepted BGP connection, a BFD packet's source | taken as the IPv4 address |

use std::net::{IpAddr, Ipv4Addr};

/// An IPv4-mapped IPv6 address as the IPv4 address it is; any other address
/// unchanged. (`::192.0.2.1`, the deprecated IPv4-compatible form, is left
/// alone: RFC 4291 §2.5.5.1 retired it, and it names no IPv4 peer.)
pub fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The IPv4 address an IPv4-mapped IPv6 address stands for; `None` for any
/// other address.
pub fn v4_mapped(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
        IpAddr::V4(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("test address")
    }

    #[test]
    fn a_mapped_address_is_the_ipv4_address() {
        assert_eq!(unmap(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(unmap(ip("::ffff:c000:201")), ip("192.0.2.1"));
        assert_eq!(
            v4_mapped(ip("::ffff:192.0.2.1")),
            Some("192.0.2.1".parse().expect("v4"))
        );
        for other in ["192.0.2.1", "2001:db8::1", "::192.0.2.1", "::1", "::"] {
            assert_eq!(unmap(ip(other)), ip(other), "{other}");
            assert_eq!(v4_mapped(ip(other)), None, "{other}");
        }
    }
}

//! The node's default gateway, for `address = "default-gateway"` peers:
//! read from the kernel's routing tables in /proc, followed as it changes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::AddressFamily;

/// The IPv4 default gateway from `/proc/net/route` text: the lowest-metric
/// route to 0.0.0.0/0 with a gateway.
pub fn parse_ipv4(route: &str) -> Option<Ipv4Addr> {
    let mut best: Option<(u32, Ipv4Addr)> = None;
    for line in route.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
        if f.len() < 8 || f[1] != "00000000" || f[7] != "00000000" {
            continue;
        }
        let (Ok(gw), Ok(flags), Ok(metric)) = (
            u32::from_str_radix(f[2], 16),
            u32::from_str_radix(f[3], 16),
            f[6].parse::<u32>(),
        ) else {
            continue;
        };
        // RTF_UP | RTF_GATEWAY; the fields are in host (little-endian) order.
        if flags & 0x3 != 0x3 || gw == 0 {
            continue;
        }
        let addr = Ipv4Addr::from(gw.swap_bytes());
        if best.is_none_or(|(m, _)| metric < m) {
            best = Some((metric, addr));
        }
    }
    best.map(|(_, a)| a)
}

/// The IPv6 default gateway from `/proc/net/ipv6_route` text.
pub fn parse_ipv6(route: &str) -> Option<Ipv6Addr> {
    let mut best: Option<(u32, Ipv6Addr)> = None;
    for line in route.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        // dest plen src plen nexthop metric refcnt use flags iface
        if f.len() < 10 || f[0] != "00000000000000000000000000000000" || f[1] != "00" {
            continue;
        }
        let (Ok(nh), Ok(metric), Ok(flags)) = (
            u128::from_str_radix(f[4], 16),
            u32::from_str_radix(f[5], 16),
            u32::from_str_radix(f[8], 16),
        ) else {
            continue;
        };
        if flags & 0x3 != 0x3 || nh == 0 {
            continue;
        }
        let addr = Ipv6Addr::from(nh);
        if best.is_none_or(|(m, _)| metric < m) {
            best = Some((metric, addr));
        }
    }
    best.map(|(_, a)| a)
}

/// The current default gateway of a family. An IPv6 gateway is usually
/// link-local, which needs an interface to be reached; holdfast peers with
/// global addresses only, so a link-local gateway is not used.
pub fn default_gateway(family: AddressFamily) -> Option<IpAddr> {
    match family {
        AddressFamily::Ipv4 => {
            parse_ipv4(&std::fs::read_to_string("/proc/net/route").ok()?).map(IpAddr::V4)
        }
        AddressFamily::Ipv6 => parse_ipv6(&std::fs::read_to_string("/proc/net/ipv6_route").ok()?)
            .filter(|a| (a.segments()[0] & 0xffc0) != 0xfe80)
            .map(IpAddr::V6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_default_route() {
        let text = "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n\
eth1\t00000000\t090200C0\t0003\t0\t0\t50\t00000000\t0\t0\t0\n\
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n";
        assert_eq!(parse_ipv4(text), Some(Ipv4Addr::new(192, 0, 2, 9)));
        assert_eq!(parse_ipv4("Iface\n"), None);
    }

    #[test]
    fn ipv6_default_route() {
        let text = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 20010db8000000000000000000000001 00000400 00000001 00000000 00000003 eth0\n\
20010db8000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001 eth0\n";
        assert_eq!(parse_ipv6(text), Some("2001:db8::1".parse().unwrap()));
    }
}

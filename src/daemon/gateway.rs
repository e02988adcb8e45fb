//! The node's default gateway, for `address = "default-gateway"` peers:
//! read from the kernel's routing tables in /proc, followed as it changes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::config::AddressFamily;
use crate::session::Interface;

/// A default gateway: its address, and for an IPv6 link-local one the
/// interface it is reached on (without which the address is ambiguous,
/// RFC 4007 §6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gateway {
    pub address: IpAddr,
    pub interface: Option<Interface>,
}

/// `192.0.2.1`, or `fe80::1%eth0` for a link-local gateway (RFC 4007 §11).
impl std::fmt::Display for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.interface {
            Some(i) => write!(f, "{}%{}", self.address, i.name),
            None => write!(f, "{}", self.address),
        }
    }
}

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

/// The IPv6 default gateway from `/proc/net/ipv6_route` text, and the
/// interface of its route.
pub fn parse_ipv6(route: &str) -> Option<(Ipv6Addr, String)> {
    let mut best: Option<(u32, Ipv6Addr, String)> = None;
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
        if best.as_ref().is_none_or(|(m, _, _)| metric < *m) {
            best = Some((metric, addr, f[9].to_string()));
        }
    }
    best.map(|(_, a, i)| (a, i))
}

/// The index of interface `name` from `/proc/net/if_inet6` text (address,
/// index, prefix length, scope, flags, name; hex numbers). Every interface
/// with an IPv6 address is listed, and one that reaches a link-local
/// gateway has at least its own link-local address.
pub fn parse_if_index(if_inet6: &str, name: &str) -> Option<u32> {
    if_inet6.lines().find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() >= 6 && f[5] == name)
            .then(|| u32::from_str_radix(f[1], 16).ok())
            .flatten()
    })
}

fn is_link_local(a: Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

/// The current default gateway of a family, or why there is none. An IPv6
/// gateway is usually link-local (routers advertise themselves with their
/// link-local address, RFC 4861 §6.1.2): it comes with its interface.
pub fn default_gateway(family: AddressFamily) -> Result<Gateway, String> {
    let read =
        |path: &str| std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"));
    match family {
        AddressFamily::Ipv4 => parse_ipv4(&read("/proc/net/route")?)
            .map(|a| Gateway {
                address: IpAddr::V4(a),
                interface: None,
            })
            .ok_or_else(|| "waiting for a default gateway (Ipv4)".to_string()),
        AddressFamily::Ipv6 => {
            let (address, ifname) = parse_ipv6(&read("/proc/net/ipv6_route")?)
                .ok_or_else(|| "waiting for a default gateway (Ipv6)".to_string())?;
            if !is_link_local(address) {
                return Ok(Gateway {
                    address: IpAddr::V6(address),
                    interface: None,
                });
            }
            let index = parse_if_index(&read("/proc/net/if_inet6")?, &ifname).ok_or_else(|| {
                format!(
                    "the default gateway {address} is link-local on {ifname}, which has no IPv6 address of its own: waiting"
                )
            })?;
            Ok(Gateway {
                address: IpAddr::V6(address),
                interface: Some(Interface {
                    name: ifname,
                    index,
                }),
            })
        }
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
        assert_eq!(
            parse_ipv6(text),
            Some(("2001:db8::1".parse().unwrap(), "eth0".to_string()))
        );
    }

    #[test]
    fn ipv6_link_local_default_route_and_its_interface() {
        // As the kernel lists a route learnt from a router advertisement
        // (RTF_ADDRCONF | RTF_DEFAULT | RTF_GATEWAY | RTF_UP) beside a
        // static one with a higher metric.
        let text = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 fe800000000000000000000000000001 00000400 00000001 00000000 00450003 to-router
00000000000000000000000000000000 00 00000000000000000000000000000000 00 20010db8000000000000000000000009 00000800 00000001 00000000 00000003 eth1
";
        assert_eq!(
            parse_ipv6(text),
            Some(("fe80::1".parse().unwrap(), "to-router".to_string()))
        );
        let if_inet6 = "00000000000000000000000000000001 01 80 10 80       lo
fe800000000000000000000000000002 1f 40 20 80 to-router
20010db8000000000000000000000002 1f 40 00 80 to-router
";
        assert_eq!(parse_if_index(if_inet6, "to-router"), Some(31));
        assert_eq!(parse_if_index(if_inet6, "lo"), Some(1));
        assert_eq!(parse_if_index(if_inet6, "eth9"), None);
    }
}

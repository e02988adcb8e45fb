//! Where a peer without a fixed address is:
//!
//! - the node's default gateway, for `address = "default-gateway"` peers:
//!   read from the kernel's routing tables in /proc, followed as it changes;
//! - the router on the other end of an interface, for `interface = "eth1"`
//!   (unnumbered) peers: the link-local source of the IPv6 router
//!   advertisements it sends on that link (RFC 4861 §4.2), solicited at
//!   once (§4.1) and followed as it changes (a replaced top-of-rack switch).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddrV6};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::config::{AddressFamily, IfName};
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

// ---- Unnumbered: the router of a link, from its router advertisements ----

/// ICMPv6 types of Neighbor Discovery (RFC 4861 §4.1, §4.2).
const ROUTER_SOLICITATION: u8 = 133;
const ROUTER_ADVERTISEMENT: u8 = 134;
/// RFC 4861 §6.1.2 / §6.1.1: Neighbor Discovery messages are sent, and only
/// accepted, with hop limit 255: a forwarded one (from off the link) has
/// been decremented.
pub const ND_HOP_LIMIT: u8 = 255;

/// A valid router advertisement: who sent it, and its Router Lifetime (0:
/// not a default router, RFC 4861 §4.2; still a router of the link, which
/// is what an unnumbered BGP peer is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterAdvert {
    pub router: Ipv6Addr,
    pub lifetime: u16,
}

/// Checks an ICMPv6 message (as a raw ICMPv6 socket returns it: without
/// the IPv6 header; the kernel has verified the checksum) from `source`
/// against RFC 4861 §6.1.2 and returns the router advertisement in it.
/// Other ICMPv6 messages (echo, neighbour solicitations, …) are
/// `Err("not a router advertisement")`.
pub fn parse_router_advert(
    source: Ipv6Addr,
    hop_limit: Option<u8>,
    icmp: &[u8],
) -> Result<RouterAdvert, &'static str> {
    if icmp.first() != Some(&ROUTER_ADVERTISEMENT) {
        return Err("not a router advertisement");
    }
    // RFC 4861 §6.1.2: "IP Source Address is a link-local address. Routers
    // must use their link-local address as the source for Router
    // Advertisement ... messages".
    if !is_link_local(source) {
        return Err("router advertisement from a non-link-local address");
    }
    // §6.1.2: "The IP Hop Limit field has a value of 255".
    if hop_limit != Some(ND_HOP_LIMIT) {
        return Err("router advertisement without hop limit 255 (forwarded)");
    }
    // §6.1.2: "ICMP Code is 0", "ICMP length ... is 16 or more octets".
    if icmp[1] != 0 {
        return Err("router advertisement with a non-zero code");
    }
    if icmp.len() < 16 {
        return Err("router advertisement shorter than 16 octets");
    }
    // §6.1.2: "All included options have a length that is greater than
    // zero." Options are type (1), length in units of 8 octets (1), data
    // (§4.6); one that runs past the message is as bad.
    let mut opts = &icmp[16..];
    while !opts.is_empty() {
        let units = usize::from(*opts.get(1).ok_or("router advertisement option cut short")?);
        if units == 0 {
            return Err("router advertisement option of length zero");
        }
        opts = opts
            .get(units * 8..)
            .ok_or("router advertisement option runs past the message")?;
    }
    // §4.2: Type, Code, Checksum, Cur Hop Limit, M/O flags, Router Lifetime.
    Ok(RouterAdvert {
        router: source,
        lifetime: u16::from_be_bytes([icmp[6], icmp[7]]),
    })
}

/// A Router Solicitation (RFC 4861 §4.1): type 133, code 0, checksum (the
/// kernel fills it in on a raw ICMPv6 socket), 4 reserved octets. Without
/// the Source Link-Layer Address option, which is optional; the router
/// answers to all nodes or learns our address by neighbour discovery.
pub fn router_solicitation() -> [u8; 8] {
    [ROUTER_SOLICITATION, 0, 0, 0, 0, 0, 0, 0]
}

/// Our own Router Advertisement (RFC 4861 §4.2) with Router Lifetime 0: "A
/// Lifetime of 0 indicates that the router is not a default router and
/// SHOULD NOT appear on the default router list". It only tells the router
/// of the link our link-local address — FRR's `neighbor IF interface`
/// learns its peer from the advertisements it receives, as BGP unnumbered
/// routers advertise to each other. No hop limit, no timers (0:
/// unspecified), no prefixes.
pub fn router_advertisement() -> [u8; 16] {
    let mut ra = [0u8; 16];
    ra[0] = ROUTER_ADVERTISEMENT;
    ra
}

/// The router of one link: the sender of the latest valid advertisement.
/// An unnumbered link is point to point, with one router at the other end;
/// when that router is replaced, the new one advertises a different
/// link-local address and becomes the neighbour at once.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LinkRouter {
    pub current: Option<Ipv6Addr>,
    /// Advertisements from a sender other than the current one.
    pub changes: u64,
}

impl LinkRouter {
    /// Takes one advertisement; true when the neighbour changed.
    pub fn heard(&mut self, ra: RouterAdvert) -> bool {
        if self.current == Some(ra.router) {
            return false;
        }
        if self.current.is_some() {
            self.changes += 1;
        }
        self.current = Some(ra.router);
        true
    }
}

/// What the listener of one interface knows, shared with the daemon.
#[derive(Clone, Debug, Default)]
struct Link {
    router: LinkRouter,
    index: Option<u32>,
    /// Why there is no router yet (the interface is missing, the socket
    /// failed, nothing heard).
    why: Option<String>,
}

type Links = Mutex<HashMap<IfName, Arc<Mutex<Link>>>>;

fn links() -> &'static Links {
    static LINKS: OnceLock<Links> = OnceLock::new();
    LINKS.get_or_init(Default::default)
}

/// How often the listener re-sends its solicitation while no router has
/// answered (RFC 4861 §10 RTR_SOLICITATION_INTERVAL, 4 s), and its own
/// advertisement (the 10 s FRR uses on unnumbered interfaces).
const SOLICIT_EVERY: Duration = Duration::from_secs(4);
const ADVERTISE_EVERY: Duration = Duration::from_secs(10);

/// The router of an unnumbered peer's interface, or why there is none yet.
/// The first call for an interface starts its listener (a thread for the
/// life of the process: a removed and re-added peer finds it running).
pub fn link_router(name: IfName) -> Result<Gateway, String> {
    let link = {
        let mut map = links().lock().expect("links lock");
        map.entry(name)
            .or_insert_with(|| {
                let link = Arc::new(Mutex::new(Link::default()));
                let shared = link.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("nd-{name}"))
                    .spawn(move || listen(name, shared));
                if let Err(e) = spawned {
                    link.lock().expect("link lock").why =
                        Some(format!("cannot start the listener: {e}"));
                }
                link
            })
            .clone()
    };
    let l = link.lock().expect("link lock");
    match (l.router.current, l.index) {
        (Some(address), Some(index)) => Ok(Gateway {
            address: IpAddr::V6(address),
            interface: Some(Interface {
                name: name.to_string(),
                index,
            }),
        }),
        _ => Err(l
            .why
            .clone()
            .unwrap_or_else(|| format!("waiting for a router advertisement on {name}"))),
    }
}

/// The listener of one interface: opens a raw ICMPv6 socket bound to it,
/// solicits, advertises, and records every advertising router. Failures
/// (no such interface yet, no IPv6 on it) are recorded and retried.
fn listen(name: IfName, link: Arc<Mutex<Link>>) {
    let set_why = |why: String| link.lock().expect("link lock").why = Some(why);
    loop {
        match listen_once(name, &link) {
            Ok(()) => {}
            Err(e) => set_why(e),
        }
        std::thread::sleep(SOLICIT_EVERY);
    }
}

fn listen_once(name: IfName, link: &Arc<Mutex<Link>>) -> Result<(), String> {
    use holdfast_sockopt::caps::Capability;
    use socket2::{Domain, Protocol, Socket, Type};
    let if_inet6 = std::fs::read_to_string("/proc/net/if_inet6")
        .map_err(|e| format!("cannot read /proc/net/if_inet6: {e}"))?;
    let index = parse_if_index(&if_inet6, name.as_str()).ok_or_else(|| {
        format!("interface {name} does not exist or has no IPv6 link-local address: waiting")
    })?;
    // A raw socket needs CAP_NET_RAW when it is opened, and only then: this
    // thread raises it from the permitted set (the binary's file
    // capability) for the opening and the set-up, and lowers it again.
    let raised = holdfast_sockopt::caps::raise(Capability::NetRaw);
    let socket = Socket::new(Domain::IPV6, Type::RAW, Some(Protocol::ICMPV6)).map_err(|e| {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            let why = raised
                .as_ref()
                .err()
                .map(|r| format!(" ({r})"))
                .unwrap_or_default();
            format!(
                "cannot open an ICMPv6 socket: {e}: unnumbered peering needs {}{why} \
                 (docs: Configuration, Unnumbered peering; deploy/components/unnumbered grants it)",
                Capability::NetRaw.name()
            )
        } else {
            format!("cannot open an ICMPv6 socket: {e}")
        }
    })?;
    let setup = || -> std::io::Result<()> {
        socket.bind_device(Some(name.as_str().as_bytes()))?;
        socket.set_recv_hoplimit_v6(true)?;
        socket.set_multicast_hops_v6(u32::from(ND_HOP_LIMIT))?;
        socket.set_unicast_hops_v6(u32::from(ND_HOP_LIMIT))?;
        socket.set_multicast_if_v6(index)?;
        socket.set_multicast_loop_v6(false)?;
        socket.set_read_timeout(Some(Duration::from_secs(1)))
    };
    setup().map_err(|e| format!("ICMPv6 socket on {name}: {e}"))?;
    drop(raised);
    link.lock().expect("link lock").index = Some(index);
    let all_routers = SocketAddrV6::new("ff02::2".parse().expect("ff02::2"), 0, 0, index);
    let all_nodes = SocketAddrV6::new("ff02::1".parse().expect("ff02::1"), 0, 0, index);
    let mut last_solicit: Option<Instant> = None;
    let mut last_advert: Option<Instant> = None;
    let mut buf = [0u8; 1500];
    loop {
        let heard = link.lock().expect("link lock").router.current.is_some();
        if !heard && last_solicit.is_none_or(|t| t.elapsed() >= SOLICIT_EVERY) {
            // RFC 4861 §6.3.7: a solicitation makes routers answer at once
            // rather than at their next periodic advertisement.
            socket
                .send_to(&router_solicitation(), &all_routers.into())
                .map_err(|e| format!("router solicitation on {name}: {e}"))?;
            last_solicit = Some(Instant::now());
        }
        if last_advert.is_none_or(|t| t.elapsed() >= ADVERTISE_EVERY) {
            socket
                .send_to(&router_advertisement(), &all_nodes.into())
                .map_err(|e| format!("router advertisement on {name}: {e}"))?;
            last_advert = Some(Instant::now());
        }
        match holdfast_sockopt::recv_with_hop_limit(&socket, &mut buf) {
            Ok(r) => {
                if let Ok(ra) = parse_router_advert(*r.source.ip(), r.hop_limit, &buf[..r.len]) {
                    let mut l = link.lock().expect("link lock");
                    if l.router.heard(ra) {
                        tracing::info!(interface = %name, router = %ra.router, "router of the link");
                        // A new router learns our address now rather than
                        // at our next periodic advertisement.
                        last_advert = None;
                    }
                    l.why = None;
                }
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(format!("ICMPv6 on {name}: {e}")),
        }
        // The interface may have been deleted and re-created with another
        // index (the socket is then bound to nothing).
        let now = std::fs::read_to_string("/proc/net/if_inet6").unwrap_or_default();
        if parse_if_index(&now, name.as_str()) != Some(index) {
            return Err(format!("interface {name} went away: waiting"));
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

    // A router advertisement as FRR sends it on an unnumbered interface:
    // hop limit 64, no flags, lifetime 1800 s, then a source link-layer
    // address option (type 1, 1 unit) and an MTU option (type 5, 1 unit).
    const FRR_RA: &str = "86000000400007080000000000000000\
                          0101020000000001\
                          05010000000005dc";

    fn ra_bytes() -> Vec<u8> {
        bgp_proto::hex::decode(FRR_RA).unwrap()
    }

    #[test]
    fn router_advertisement_gives_its_link_local_sender() {
        let fe80_1: Ipv6Addr = "fe80::1".parse().unwrap();
        assert_eq!(
            parse_router_advert(fe80_1, Some(255), &ra_bytes()),
            Ok(RouterAdvert {
                router: fe80_1,
                lifetime: 1800
            })
        );
        // Our own advertisement parses back, lifetime 0 (not a default
        // router, RFC 4861 §4.2).
        assert_eq!(
            parse_router_advert(fe80_1, Some(255), &router_advertisement()),
            Ok(RouterAdvert {
                router: fe80_1,
                lifetime: 0
            })
        );
    }

    #[test]
    fn invalid_router_advertisements_are_refused() {
        // Each RFC 4861 §6.1.2 check, one at a time.
        let ll: Ipv6Addr = "fe80::1".parse().unwrap();
        let ra = ra_bytes();
        let refused = |src: &str, hop: Option<u8>, b: &[u8]| {
            parse_router_advert(src.parse().unwrap(), hop, b).unwrap_err()
        };
        assert_eq!(
            refused("2001:db8::1", Some(255), &ra),
            "router advertisement from a non-link-local address"
        );
        assert_eq!(
            refused("fe80::1", Some(254), &ra),
            "router advertisement without hop limit 255 (forwarded)"
        );
        assert_eq!(
            refused("fe80::1", None, &ra),
            "router advertisement without hop limit 255 (forwarded)"
        );
        let mut code = ra.clone();
        code[1] = 1;
        assert_eq!(
            refused("fe80::1", Some(255), &code),
            "router advertisement with a non-zero code"
        );
        assert_eq!(
            refused("fe80::1", Some(255), &ra[..15]),
            "router advertisement shorter than 16 octets"
        );
        let mut zero = ra.clone();
        zero[17] = 0;
        assert_eq!(
            refused("fe80::1", Some(255), &zero),
            "router advertisement option of length zero"
        );
        let mut long = ra.clone();
        long[25] = 2;
        assert_eq!(
            refused("fe80::1", Some(255), &long),
            "router advertisement option runs past the message"
        );
        assert_eq!(
            parse_router_advert(ll, Some(255), &router_solicitation()),
            Err("not a router advertisement")
        );
    }

    #[test]
    fn the_link_router_follows_a_replaced_router() {
        let ra = |a: &str| RouterAdvert {
            router: a.parse().unwrap(),
            lifetime: 1800,
        };
        let mut link = LinkRouter::default();
        assert!(link.heard(ra("fe80::1")));
        // Periodic advertisements of the same router change nothing.
        assert!(!link.heard(ra("fe80::1")));
        assert_eq!(link.current, Some("fe80::1".parse().unwrap()));
        // The switch is replaced: its successor has another link-local.
        assert!(link.heard(ra("fe80::2")));
        assert_eq!(link.current, Some("fe80::2".parse().unwrap()));
        assert_eq!(link.changes, 1);
    }
}

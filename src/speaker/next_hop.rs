//! Which next hops a session offers (RFC 4271 §5.1.3, RFC 2545 §3), from
//! the node's interface addresses: a pure function, so that the session
//! driver only reads the addresses.

use std::net::{IpAddr, Ipv6Addr};

use super::NextHops;
use crate::model::net::unmap;

/// The next hops of a session, given the node's interface addresses:
///
/// - `local` itself for its family, unless it is link-local: RFC 2545 §3
///   puts a global address in the next hop, so a session between link-local
///   addresses (an IPv6 default gateway) sends the node's global IPv6
///   address on that interface, or failing that its first global IPv6
///   address anywhere (an address on a loopback, as in unnumbered setups);
/// - for the other family, the node's address of that family on the same
///   interface;
/// - and, beside a global IPv6 next hop, the interface's link-local address
///   when the peer is on-link (RFC 2545 §3: "if and only if" the peer
///   shares the subnet) — `local` itself for a link-local session.
pub fn pick_next_hops(
    addrs: &[holdfast_sockopt::InterfaceAddress],
    local: IpAddr,
    peer: IpAddr,
    interface: Option<&str>,
) -> NextHops {
    let local = unmap(local);
    let peer = unmap(peer);
    let link_local_session = matches!(local, IpAddr::V6(v6) if is_link_local(v6));
    let interface: Option<String> = interface.map(str::to_string).or_else(|| {
        addrs
            .iter()
            .find(|a| a.address == local)
            .map(|a| a.interface.clone())
    });
    let on_link = link_local_session
        || addrs
            .iter()
            .any(|a| a.contains(peer) && Some(&a.interface) == interface.as_ref());
    let same_if = |pred: &dyn Fn(IpAddr) -> bool| {
        addrs
            .iter()
            .filter(|a| Some(&a.interface) == interface.as_ref())
            .map(|a| a.address)
            .find(|a| pred(*a))
    };
    let global6 =
        |a: IpAddr| matches!(a, IpAddr::V6(v6) if !is_link_local(v6) && !v6.is_loopback());
    let mut nh = NextHops::default();
    match local {
        IpAddr::V4(v4) => {
            nh.ipv4 = Some(v4);
            nh.ipv6 = same_if(&global6).and_then(as_v6);
        }
        IpAddr::V6(v6) => {
            nh.ipv6 = if link_local_session {
                same_if(&global6)
                    .or_else(|| addrs.iter().map(|a| a.address).find(|a| global6(*a)))
                    .and_then(as_v6)
            } else {
                Some(v6)
            };
            nh.ipv4 = same_if(&|a| a.is_ipv4()).and_then(|a| match a {
                IpAddr::V4(v4) => Some(v4),
                IpAddr::V6(_) => None,
            });
        }
    }
    // RFC 8950 §3 / RFC 2545 §3: a link-local session always offers its
    // link-local address, alone when the node has no global one (an
    // unnumbered link: the routes still have a usable next hop).
    if on_link && (nh.ipv6.is_some() || link_local_session) {
        nh.ipv6_link_local = match local {
            IpAddr::V6(v6) if link_local_session => Some(v6),
            _ => same_if(&|a| matches!(a, IpAddr::V6(v6) if is_link_local(v6))).and_then(as_v6),
        };
    }
    nh
}

fn as_v6(a: IpAddr) -> Option<Ipv6Addr> {
    match a {
        IpAddr::V6(v6) => Some(v6),
        IpAddr::V4(_) => None,
    }
}

fn is_link_local(a: Ipv6Addr) -> bool {
    (a.segments()[0] & 0xffc0) == 0xfe80
}

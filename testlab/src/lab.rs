//! Ready-made topologies for the common tests: a node (where holdfast runs)
//! and a router (FRR, BIRD, …), directly connected or two hops apart.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::Afi;
use crate::link::{Link, veth};
use crate::netns::Netns;

/// Addresses of [`Lab::pair`]: one link, 192.0.2.0/24 and 2001:db8::/64.
pub mod pair {
    use std::net::{Ipv4Addr, Ipv6Addr};

    pub const ROUTER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    pub const NODE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    pub const PREFIX_LEN_V4: u8 = 24;
    pub const ROUTER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    pub const NODE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    pub const PREFIX_LEN_V6: u8 = 64;
    /// Interface names: the router's end and the node's end of the link.
    pub const ROUTER_IF: &str = "to-node";
    pub const NODE_IF: &str = "to-router";
}

/// Addresses of [`Lab::routed_pair`]: node — mid — router.
///
/// - node—mid: 192.0.2.0/25 (mid .1, node .2) and 2001:db8::/64 (mid ::1,
///   node ::2) — the node keeps the addresses it has in [`pair`];
/// - mid—router: 192.0.2.128/25 (mid .129, router .130) and 2001:db8:1::/64
///   (mid ::1, router ::2).
pub mod routed {
    use std::net::{Ipv4Addr, Ipv6Addr};

    pub const NODE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
    pub const MID_NODE_SIDE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    pub const NODE_NET_V4: &str = "192.0.2.0/25";
    pub const MID_ROUTER_SIDE_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 129);
    pub const ROUTER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 130);
    pub const ROUTER_NET_V4: &str = "192.0.2.128/25";
    pub const PREFIX_LEN_V4: u8 = 25;

    pub const NODE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);
    pub const MID_NODE_SIDE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
    pub const NODE_NET_V6: &str = "2001:db8::/64";
    pub const MID_ROUTER_SIDE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 1);
    pub const ROUTER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 1, 0, 0, 0, 0, 2);
    pub const ROUTER_NET_V6: &str = "2001:db8:1::/64";
    pub const PREFIX_LEN_V6: u8 = 64;

    pub const NODE_IF: &str = "to-mid";
    pub const MID_NODE_IF: &str = "to-node";
    pub const MID_ROUTER_IF: &str = "to-router";
    pub const ROUTER_IF: &str = "to-mid";
}

/// A router namespace and a node namespace, directly connected or through a
/// forwarding `mid` namespace. Dropping it deletes the namespaces and kills
/// what runs in them; drop the daemons first (declare them after the lab).
#[derive(Debug)]
pub struct Lab {
    /// Where the upstream router (FRR, BIRD, …) runs.
    pub router: Netns,
    /// Where the speaker under test (holdfast, or a second router) runs.
    pub node: Netns,
    /// The forwarding hop of [`Lab::routed_pair`].
    pub mid: Option<Netns>,
    /// The node's link: to the router ([`Lab::pair`]) or to mid
    /// ([`Lab::routed_pair`]). End `a` is the node's.
    pub node_link: Link,
    /// [`Lab::routed_pair`] only: mid — router, end `a` is mid's.
    pub router_link: Option<Link>,
    pub router_v4: Ipv4Addr,
    pub router_v6: Ipv6Addr,
    pub node_v4: Ipv4Addr,
    pub node_v6: Ipv6Addr,
}

impl Lab {
    /// router (192.0.2.1/24, 2001:db8::1/64) — node (192.0.2.2/24,
    /// 2001:db8::2/64) over one veth; see [`pair`].
    pub fn pair() -> Lab {
        Lab::pair_with(
            pair::ROUTER_V4,
            pair::NODE_V4,
            pair::ROUTER_V6,
            pair::NODE_V6,
        )
    }

    /// Like [`Lab::pair`] with other addresses on the same /24 and /64 sizes.
    pub fn pair_with(
        router_v4: Ipv4Addr,
        node_v4: Ipv4Addr,
        router_v6: Ipv6Addr,
        node_v6: Ipv6Addr,
    ) -> Lab {
        let router = Netns::new("router");
        let node = Netns::new("node");
        let node_link = veth(&node, pair::NODE_IF, &router, pair::ROUTER_IF);
        let (len4, len6) = (pair::PREFIX_LEN_V4, pair::PREFIX_LEN_V6);
        router.add_address(pair::ROUTER_IF, &format!("{router_v4}/{len4}"));
        router.add_address(pair::ROUTER_IF, &format!("{router_v6}/{len6}"));
        node.add_address(pair::NODE_IF, &format!("{node_v4}/{len4}"));
        node.add_address(pair::NODE_IF, &format!("{node_v6}/{len6}"));
        Lab {
            router,
            node,
            mid: None,
            node_link,
            router_link: None,
            router_v4,
            router_v6,
            node_v4,
            node_v6,
        }
    }

    /// node — mid — router, mid forwarding, static routes both ways: node and
    /// router are two IP hops apart (a packet sent with TTL 255 arrives with
    /// 254), for `ebgp_multihop = 2` and GTSM tests. See [`routed`].
    pub fn routed_pair() -> Lab {
        use routed::*;
        let router = Netns::new("router");
        let mid = Netns::new("mid");
        let node = Netns::new("node");
        mid.enable_forwarding();
        let node_link = veth(&node, NODE_IF, &mid, MID_NODE_IF);
        let router_link = veth(&mid, MID_ROUTER_IF, &router, ROUTER_IF);
        let (len4, len6) = (PREFIX_LEN_V4, PREFIX_LEN_V6);
        node.add_address(NODE_IF, &format!("{NODE_V4}/{len4}"));
        node.add_address(NODE_IF, &format!("{NODE_V6}/{len6}"));
        mid.add_address(MID_NODE_IF, &format!("{MID_NODE_SIDE_V4}/{len4}"));
        mid.add_address(MID_NODE_IF, &format!("{MID_NODE_SIDE_V6}/{len6}"));
        mid.add_address(MID_ROUTER_IF, &format!("{MID_ROUTER_SIDE_V4}/{len4}"));
        mid.add_address(MID_ROUTER_IF, &format!("{MID_ROUTER_SIDE_V6}/{len6}"));
        router.add_address(ROUTER_IF, &format!("{ROUTER_V4}/{len4}"));
        router.add_address(ROUTER_IF, &format!("{ROUTER_V6}/{len6}"));
        node.add_route(ROUTER_NET_V4, &MID_NODE_SIDE_V4.to_string());
        node.add_route(ROUTER_NET_V6, &MID_NODE_SIDE_V6.to_string());
        router.add_route(NODE_NET_V4, &MID_ROUTER_SIDE_V4.to_string());
        router.add_route(NODE_NET_V6, &MID_ROUTER_SIDE_V6.to_string());
        Lab {
            router,
            node,
            mid: Some(mid),
            node_link,
            router_link: Some(router_link),
            router_v4: ROUTER_V4,
            router_v6: ROUTER_V6,
            node_v4: NODE_V4,
            node_v6: NODE_V6,
        }
    }

    /// Names of the lab's namespaces (to check they are gone after drop).
    pub fn netns_names(&self) -> Vec<String> {
        let mut names = vec![self.router.name().to_owned(), self.node.name().to_owned()];
        names.extend(self.mid.as_ref().map(|mid| mid.name().to_owned()));
        names
    }

    /// The router's address of one family.
    pub fn router_addr(&self, afi: Afi) -> IpAddr {
        match afi {
            Afi::Ipv4 => self.router_v4.into(),
            Afi::Ipv6 => self.router_v6.into(),
        }
    }

    /// The node's address of one family.
    pub fn node_addr(&self, afi: Afi) -> IpAddr {
        match afi {
            Afi::Ipv4 => self.node_v4.into(),
            Afi::Ipv6 => self.node_v6.into(),
        }
    }
}

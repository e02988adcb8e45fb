//! What the BIRD, GoBGP and ExaBGP interop tests share: the addresses and
//! AS numbers of the lab, holdfast's config for it, and counters of its
//! status.

use serde_json::Value;
use testlab::Lab;

use super::{Advertisement, Config, Peer};

/// 4-octet AS numbers on both sides (RFC 6793): neither fits in the OPEN's
/// two-octet My Autonomous System field, which carries AS_TRANS instead.
pub const ROUTER_ASN: u32 = 4_200_000_001;
pub const NODE_ASN: u32 = 4_200_000_002;

pub const VIP4: &str = "198.51.100.10";
pub const VIP6: &str = "2001:db8:100::10";
pub const VIP4_PREFIX: &str = "198.51.100.10/32";
pub const VIP6_PREFIX: &str = "2001:db8:100::10/128";

/// Communities are 16:16 bits, so a 4-octet AS cannot appear in one; the
/// large community carries it (RFC 8092).
pub const COMMUNITY: &str = "65001:100";
pub const LARGE_COMMUNITY: &str = "4200000002:1:100";
pub const LOCAL_PREF: u32 = 200;

/// The advertisement of every interop test: a community, a large
/// community and LOCAL_PREF.
pub fn advertisement() -> Advertisement {
    Advertisement::public(COMMUNITY)
        .large_communities(&[LARGE_COMMUNITY])
        .local_pref(LOCAL_PREF)
}

/// holdfast's config for the node of `lab`: peers `tor-v4` (the router's
/// IPv4 address) and `tor-v6` (its IPv6 address), both in `router_asn`,
/// each carrying IPv4 and IPv6 unicast.
pub fn dual_transport_conf(lab: &Lab, local_asn: u32, router_asn: u32) -> String {
    Config::node(local_asn, &lab.node_v4.to_string())
        .peer(Peer::new("tor-v4", lab.router_v4, router_asn).fast())
        .peer(Peer::new("tor-v6", lab.router_v6, router_asn).fast())
        .advertisement(advertisement())
        .to_toml()
}

/// holdfast's config with one peer, `tor`, at `router` in `router_asn`.
pub fn single_peer_conf(lab: &Lab, router: &str, local_asn: u32, router_asn: u32) -> String {
    Config::node(local_asn, &lab.node_v4.to_string())
        .peer(Peer::new("tor", router, router_asn).fast())
        .advertisement(advertisement())
        .to_toml()
}

/// A counter of a peer's status (`updates_received`, `messages_sent`, …);
/// panics with the status when it is missing: a counter that is not there
/// must never read as 0.
pub fn counter(peer: &Value, key: &str) -> u64 {
    peer[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {key:?} in holdfast's peer status: {peer}"))
}

/// UPDATEs holdfast received from the peer, by its status.
pub fn updates_received(peer: &Value) -> u64 {
    counter(peer, "updates_received")
}

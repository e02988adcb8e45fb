//! Checking the peer's OPEN (RFC 4271 §6.2, RFC 5492, RFC 6793, RFC 6286)
//! and what the two OPENs negotiate.

use std::net::Ipv4Addr;
use std::time::Duration;

use crate::capability::{Capability, ExtendedNextHop, GracefulRestart};
use crate::consts::{AS_TRANS, MAX_EXTENDED_MESSAGE_LEN, MAX_MESSAGE_LEN, cap};
use crate::context::{Context, Family, FamilySet};
use crate::error::Error;
use crate::open::{Open, OptParam};

use super::Config;

/// Which AS the peer's OPEN may carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerAs {
    /// Exactly this AS.
    Is(u32),
    /// Any AS other than our own (`local_asn`): the session is external.
    External,
    /// Our own AS (`local_asn`): the session is internal.
    Internal,
}

impl PeerAs {
    /// Whether a peer in AS `peer` is acceptable to a speaker presenting
    /// AS `local`.
    pub fn accepts(self, peer: u32, local: u32) -> bool {
        match self {
            PeerAs::Is(asn) => peer == asn,
            PeerAs::External => peer != local,
            PeerAs::Internal => peer == local,
        }
    }
}

impl From<u32> for PeerAs {
    fn from(asn: u32) -> Self {
        PeerAs::Is(asn)
    }
}

/// What a session agreed on, from our OPEN and the peer's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    /// The peer's AS: from its 4-octet AS capability if it sent one (RFC
    /// 6793 §4.1), else My Autonomous System.
    pub peer_asn: u32,
    /// The peer's BGP Identifier (RFC 4271 §4.2, RFC 6286).
    pub peer_id: Ipv4Addr,
    /// Seconds; 0 means no hold timer and no KEEPALIVEs (RFC 4271 §4.2).
    pub hold_time: u16,
    /// The KEEPALIVE interval: the configured one, at most a third of
    /// `hold_time`, zero when `hold_time` is 0 (RFC 4271 §4.4).
    pub keepalive: Duration,
    /// Families both sides support (RFC 4760 §8); IPv4 unicast is implied
    /// for a speaker that advertises no multiprotocol capability.
    pub families: Vec<Family>,
    /// Both sides sent the 4-octet AS capability: AS numbers in AS_PATH and
    /// AGGREGATOR are four octets (RFC 6793 §3).
    pub four_octet_as: bool,
    /// Both sides sent the Route Refresh capability (RFC 2918 §2).
    pub route_refresh: bool,
    /// Both sides sent the Enhanced Route Refresh capability (RFC 7313 §3.1).
    pub enhanced_route_refresh: bool,
    /// Both sides sent the Extended Message capability: messages up to 65535
    /// octets (RFC 8654 §4).
    pub extended_message: bool,
    /// The peer's graceful restart capability, if it sent one (RFC 4724).
    pub peer_graceful_restart: Option<GracefulRestart>,
    /// Both sides set the N bit (RFC 8538 §2): every NOTIFICATION but
    /// Cease/Hard Reset keeps the routes as stale at the receiver.
    pub graceful_notification: bool,
    /// IPv4 unicast routes may go to the peer with an IPv6 next hop, in
    /// MP_REACH_NLRI (RFC 8950 §3): both OPENs carry the Extended Next Hop
    /// Encoding capability with the tuple AFI 1 / SAFI 1 / Nexthop AFI 2.
    pub ipv4_over_ipv6_next_hop: bool,
    /// The peer's hostname from its FQDN capability.
    pub peer_hostname: Option<String>,
    /// Decoding what the peer sends.
    pub rx: Context,
    /// Encoding what we send.
    pub tx: Context,
    /// The OPEN we sent.
    pub local_open: Open,
    /// The OPEN the peer sent.
    pub peer_open: Open,
}

impl Negotiated {
    /// The peer is external (EBGP): its AS differs from ours.
    pub fn is_external(&self) -> bool {
        self.rx.external == Some(true)
    }
}

fn mp_families(open: &Open) -> Vec<Family> {
    let list = open.multiprotocol();
    // RFC 4760 §8 / RFC 5492: a speaker that advertises no multiprotocol
    // capability speaks IPv4 unicast only.
    if list.is_empty() && !open.has(cap::MULTIPROTOCOL) {
        vec![Family::IPV4_UNICAST]
    } else {
        list
    }
}

/// Checks the peer's OPEN against our configuration and our own OPEN.
/// Each failure is the NOTIFICATION RFC 4271 §6.2 prescribes.
pub fn negotiate(config: &Config, local: &Open, peer: &Open) -> Result<Negotiated, Error> {
    // Version: checked while decoding (2/1 before anything else is read).

    // RFC 4271 §6.2: "If the Hold Time field of the OPEN message is
    // unacceptable, then the Error Subcode MUST be set to Unacceptable Hold
    // Time. An implementation MUST reject Hold Time values of one or two
    // seconds."
    if peer.hold_time == 1 || peer.hold_time == 2 {
        return Err(Error::UnacceptableHoldTime {
            hold_time: peer.hold_time,
        });
    }

    // RFC 6793 §4.1: the 4-octet capability carries the AS; AS_TRANS in
    // My Autonomous System without it is an error. RFC 4271 §6.2: "If the
    // Autonomous System field of the OPEN message is unacceptable, then the
    // Error Subcode MUST be set to Bad Peer AS."
    let peer_asn = peer.asn();
    if peer.four_octet_as().is_none() && peer.my_as == AS_TRANS {
        return Err(Error::BadPeerAs { asn: peer_asn });
    }
    if !config.peer_asn.accepts(peer_asn, config.local_asn) {
        return Err(Error::BadPeerAs { asn: peer_asn });
    }
    // RFC 4271 §1.1 (EBGP, IBGP): external when the peer's AS, as its OPEN
    // gave it, differs from the AS we present; with `PeerAs::External` or
    // `Internal` that is only known now.
    let external = peer_asn != config.local_asn;

    // RFC 6286 §2.2: the BGP Identifier is a non-zero 4-octet unsigned
    // integer, and must differ from ours for an internal peer.
    let id = u32::from(peer.bgp_id);
    if id == 0 || (!external && peer.bgp_id == config.router_id) {
        return Err(Error::BadBgpIdentifier { id });
    }

    // RFC 4271 §6.2: "If one of the Optional Parameters in the OPEN message
    // is not recognized, then the Error Subcode MUST be set to Unsupported
    // Optional Parameters."
    if let Some(OptParam::Unknown { param_type, .. }) = peer
        .params
        .iter()
        .find(|p| matches!(p, OptParam::Unknown { .. }))
    {
        return Err(Error::UnsupportedOptionalParameter {
            param_type: *param_type,
        });
    }

    let ours = mp_families(local);
    let theirs = mp_families(peer);
    let families: Vec<Family> = ours
        .iter()
        .copied()
        .filter(|f| theirs.contains(f))
        .collect();
    if families.is_empty() {
        // RFC 5492 §5: a capability we need and the peer lacks → 2/7 with
        // that capability as data.
        let mut data = Vec::new();
        for f in &ours {
            Capability::Multiprotocol(*f).encode(&mut data);
        }
        return Err(Error::UnsupportedCapability { capabilities: data });
    }

    let both = |code: u8| local.has(code) && peer.has(code);
    let four_octet_as = local.four_octet_as().is_some() && peer.four_octet_as().is_some();
    let extended_message = both(cap::EXTENDED_MESSAGE);
    let hold_time = local.hold_time.min(peer.hold_time);
    // The keepalive is the configured one, but never more than a third of
    // the negotiated hold time (RFC 4271 §4.4, §10).
    let keepalive = if hold_time == 0 {
        Duration::ZERO
    } else {
        config
            .keepalive
            .min(Duration::from_secs(u64::from(hold_time)) / 3)
    };
    let peer_graceful_restart = peer.graceful_restart().cloned();
    let graceful_notification = local.graceful_restart().is_some_and(|g| g.notification())
        && peer_graceful_restart
            .as_ref()
            .is_some_and(|g| g.notification());
    let ctx = Context {
        four_octet_as,
        add_path: FamilySet::EMPTY,
        max_message_len: if extended_message {
            MAX_EXTENDED_MESSAGE_LEN
        } else {
            MAX_MESSAGE_LEN
        },
        external: Some(external),
    };
    Ok(Negotiated {
        peer_asn,
        peer_id: peer.bgp_id,
        hold_time,
        keepalive,
        families,
        four_octet_as,
        route_refresh: both(cap::ROUTE_REFRESH),
        enhanced_route_refresh: both(cap::ENHANCED_ROUTE_REFRESH),
        extended_message,
        peer_graceful_restart,
        graceful_notification,
        // RFC 8950 §4: "A BGP speaker MUST only advertise to a BGP peer the
        // IPv4 ... NLRI with an IPv6 Next Hop if the BGP speaker has first
        // ascertained via BGP Capability Advertisement that the BGP peer
        // supports the Extended Next Hop Encoding capability for the
        // relevant AFI/SAFI pair." We also require our own, so that only peers configured
        // for it (unnumbered) get IPv4 routes with an IPv6 next hop.
        ipv4_over_ipv6_next_hop: local.extended_next_hop(ExtendedNextHop::IPV4_UNICAST_OVER_IPV6)
            && peer.extended_next_hop(ExtendedNextHop::IPV4_UNICAST_OVER_IPV6),
        peer_hostname: peer.hostname(),
        rx: ctx,
        tx: ctx,
        local_open: local.clone(),
        peer_open: peer.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        Config {
            local_asn: 65001,
            peer_asn: PeerAs::Is(65000),
            router_id: Ipv4Addr::new(192, 0, 2, 2),
            hold_time: 90,
            keepalive: Duration::from_secs(30),
            connect_retry: Duration::from_secs(5),
            passive: false,
            capabilities: vec![],
            idle_hold_time: Duration::from_secs(1),
            max_idle_hold_time: Duration::from_secs(60),
            jitter_seed: 0,
        }
    }

    fn open(asn: u32, extra: Vec<Capability>) -> Open {
        let mut caps = vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::Multiprotocol(Family::IPV6_UNICAST),
        ];
        caps.extend(extra);
        Open::new(asn, 90, Ipv4Addr::new(192, 0, 2, 9), caps)
    }

    #[test]
    fn ipv4_over_ipv6_next_hop_needs_the_tuple_in_both_opens() {
        let enh = |t: Vec<ExtendedNextHop>| vec![Capability::ExtendedNextHop(t)];
        let v4_over_v6 = ExtendedNextHop::IPV4_UNICAST_OVER_IPV6;
        // IPv4 multicast over IPv6: another tuple, not this one.
        let other = ExtendedNextHop {
            nlri_afi: 1,
            nlri_safi: 2,
            next_hop_afi: 2,
        };
        let run = |local: Vec<Capability>, peer: Vec<Capability>| {
            negotiate(&config(), &open(65001, local), &open(65000, peer))
                .unwrap()
                .ipv4_over_ipv6_next_hop
        };
        assert!(run(enh(vec![v4_over_v6]), enh(vec![other, v4_over_v6])));
        // RFC 8950 §4: only once the peer has shown it supports the pair.
        assert!(!run(enh(vec![v4_over_v6]), vec![]));
        assert!(!run(enh(vec![v4_over_v6]), enh(vec![other])));
        // Not configured here (a numbered peer): never, whatever the peer says.
        assert!(!run(vec![], enh(vec![v4_over_v6])));
    }
}

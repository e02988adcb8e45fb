//! From a route's attributes to the path attributes on the wire, per peer
//! (RFC 4271 §5.1).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bgp_proto::{
    AsPath, AttrValue, Community, Context, ExtCommunity, LargeCommunity, Origin, PathAttribute,
};

use crate::model::RouteAttrs;

impl RouteAttrs {
    /// The same route marked for a planned withdrawal: RFC 8326 §3 has the
    /// initiator re-advertise its paths with the GRACEFUL_SHUTDOWN community
    /// (65535:0, §5) before it withdraws them, so that receivers move
    /// traffic to other paths while this one still works; towards internal
    /// peers the paths also carry LOCAL_PREF 0 (RFC 8326 Appendix C.1), for
    /// routers that do not act on the community. LOCAL_PREF is only ever
    /// sent to iBGP peers (RFC 4271 §5.1.5), so eBGP peers get the
    /// community alone.
    pub fn graceful_shutdown(&self) -> Self {
        let mut out = self.clone();
        out.communities
            .push(bgp_proto::community::well_known::GRACEFUL_SHUTDOWN);
        out.local_pref = Some(0);
        out.canonical()
    }
}

/// The next hops a session offers (RFC 4271 §5.1.3; RFC 2545 §3 for IPv6:
/// the global address, plus the link-local one when the peer is on-link).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NextHops {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    pub ipv6_link_local: Option<Ipv6Addr>,
    /// The session negotiated the extended next hop encoding for IPv4
    /// unicast (RFC 8950 §4): IPv4 routes go with the IPv6 next hop.
    pub ipv4_via_ipv6: bool,
}

impl NextHops {
    /// The IPv6 next hop field: the global address and, for an on-link
    /// peer, the link-local one (RFC 2545 §3); the link-local address alone
    /// when the node has no global IPv6 address, as on an unnumbered link
    /// (RFC 8950 §3 lets the next hop be 16 octets, which FRR and BIRD read
    /// as link-local when it is one).
    pub fn for_ipv6(&self) -> Option<Vec<IpAddr>> {
        match (self.ipv6, self.ipv6_link_local) {
            (Some(g), ll) => {
                let mut v = vec![IpAddr::V6(g)];
                v.extend(ll.map(IpAddr::V6));
                Some(v)
            }
            (None, Some(ll)) => Some(vec![IpAddr::V6(ll)]),
            (None, None) => None,
        }
    }

    /// The next hop of IPv4 routes: the IPv4 address, or on a session with
    /// the extended next hop encoding the IPv6 one (RFC 8950 §3: carried
    /// in MP_REACH_NLRI with AFI 1 / SAFI 1) — the session runs over IPv6
    /// link-local addresses and there is no IPv4 address on the link.
    pub fn for_ipv4(&self) -> Option<Vec<IpAddr>> {
        if self.ipv4_via_ipv6 {
            self.for_ipv6()
        } else {
            self.ipv4.map(|a| vec![IpAddr::V4(a)])
        }
    }
}

/// Per-session facts the encoding depends on.
#[derive(Clone, Debug)]
pub struct EncodeParams {
    pub local_asn: u32,
    /// iBGP: empty AS_PATH and LOCAL_PREF; eBGP: our AS and no LOCAL_PREF.
    pub ibgp: bool,
    pub ctx: Context,
    pub next_hops: NextHops,
}

impl EncodeParams {
    /// ORIGIN, AS_PATH (and AS4_PATH towards a 2-octet speaker when our AS
    /// needs 4 octets, RFC 6793 §4.2.2), MED, LOCAL_PREF and the
    /// communities — everything but the next hop and the NLRI.
    pub fn path_attributes(&self, a: &RouteAttrs) -> Vec<PathAttribute> {
        // RFC 4271 §5.1.1: we originate: ORIGIN IGP.
        let mut out = vec![PathAttribute::new(AttrValue::Origin(Origin::Igp))];
        // RFC 4271 §5.1.2: towards an external peer, our AS prepended to an
        // empty path; towards an internal one, the path stays empty.
        // A prepend only lengthens the path towards external peers: an
        // internal peer would see its own AS in the path and drop the route
        // as a loop (RFC 4271 §9.1.2), and a locally originated route goes to
        // internal peers with an empty path (§5.1.2).
        let path = if self.ibgp {
            AsPath::default()
        } else {
            AsPath::sequence(vec![self.local_asn; 1 + usize::from(a.as_path_prepend)])
        };
        let needs_as4 = !self.ctx.four_octet_as && path.needs_four_octets();
        out.push(PathAttribute::new(AttrValue::AsPath(path.clone())));
        if let Some(med) = a.med {
            out.push(PathAttribute::new(AttrValue::MultiExitDisc(med)));
        }
        if self.ibgp {
            // RFC 4271 §5.1.5: LOCAL_PREF to internal peers (100 when no
            // advertisement sets one, the common default).
            out.push(PathAttribute::new(AttrValue::LocalPref(
                a.local_pref.unwrap_or(100),
            )));
        }
        if !a.communities.is_empty() {
            out.push(PathAttribute::new(AttrValue::Communities(
                a.communities.iter().map(|&c| Community(c)).collect(),
            )));
        }
        if !a.extended_communities.is_empty() || a.link_bandwidth.is_some() {
            // draft-ietf-idr-link-bandwidth §3: one link-bandwidth
            // community in the EXTENDED_COMMUNITIES attribute.
            let bandwidth = a.link_bandwidth.map(|units| {
                crate::model::link_bandwidth::link_bandwidth_community(self.local_asn, units)
            });
            out.push(PathAttribute::new(AttrValue::ExtendedCommunities(
                a.extended_communities
                    .iter()
                    .chain(bandwidth.iter())
                    .map(|&c| ExtCommunity(c))
                    .collect(),
            )));
        }
        if needs_as4 {
            // The 2-octet AS_PATH carries AS_TRANS in its place (the
            // encoder maps ASNs above 65535), AS4_PATH the real one.
            out.push(PathAttribute::new(AttrValue::As4Path(path)));
        }
        if !a.large_communities.is_empty() {
            out.push(PathAttribute::new(AttrValue::LargeCommunities(
                a.large_communities
                    .iter()
                    .map(|&(g, l1, l2)| LargeCommunity {
                        global: g,
                        local1: l1,
                        local2: l2,
                    })
                    .collect(),
            )));
        }
        out
    }
}

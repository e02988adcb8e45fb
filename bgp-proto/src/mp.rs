//! MP_REACH_NLRI and MP_UNREACH_NLRI (RFC 4760 §3, §4).
//!
//! ```text
//! MP_REACH_NLRI                         MP_UNREACH_NLRI
//! +---------------------------------+   +---------------------------------+
//! | AFI (2)          | SAFI (1)     |   | AFI (2)          | SAFI (1)     |
//! +---------------------------------+   +---------------------------------+
//! | Length of Next Hop (1)          |   | Withdrawn Routes (variable)     |
//! +---------------------------------+   +---------------------------------+
//! | Next Hop (variable)             |
//! +---------------------------------+
//! | Reserved (1)                    |
//! +---------------------------------+
//! | NLRI (variable)                 |
//! +---------------------------------+
//! ```
//!
//! NLRI of IPv4/IPv6 unicast and multicast are parsed; those of every other
//! family (VPN, flowspec, EVPN, …) are kept as opaque bytes so that an UPDATE
//! carrying them still decodes and re-encodes byte for byte.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::context::{Afi, Context, Family, Safi};
use crate::nlri::{self, Nlri};

/// The NLRI (or Withdrawn Routes) field of an MP attribute.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MpNlri {
    /// IPv4/IPv6 unicast or multicast prefixes, parsed (RFC 4760 §5).
    Prefixes(Vec<Nlri>),
    /// Any other family's field, as received.
    Opaque(Vec<u8>),
}

impl MpNlri {
    /// The parsed prefixes; none for an opaque field.
    pub fn prefixes(&self) -> &[Nlri] {
        match self {
            MpNlri::Prefixes(p) => p,
            MpNlri::Opaque(_) => &[],
        }
    }

    /// The field holds nothing: an UPDATE whose only attribute is such an
    /// MP_UNREACH_NLRI is the End-of-RIB of its family (RFC 4724 §2).
    pub fn is_empty(&self) -> bool {
        match self {
            MpNlri::Prefixes(p) => p.is_empty(),
            MpNlri::Opaque(b) => b.is_empty(),
        }
    }

    fn decode(family: Family, input: &[u8], ctx: &Context) -> Result<MpNlri, &'static str> {
        if family.has_prefix_nlri() {
            nlri::decode_list(input, family.afi, ctx.add_path.contains(family))
                .map(MpNlri::Prefixes)
                .map_err(|e| e.reason())
        } else {
            Ok(MpNlri::Opaque(input.to_vec()))
        }
    }

    fn encode(&self, family: Family, ctx: &Context, out: &mut Vec<u8>) {
        match self {
            MpNlri::Prefixes(p) => nlri::encode_list(p, ctx.add_path.contains(family), out),
            MpNlri::Opaque(b) => out.extend_from_slice(b),
        }
    }
}

/// MP_REACH_NLRI (RFC 4760 §3): routes of one family and their next hop.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpReach {
    /// AFI and SAFI of the routes.
    pub family: Family,
    /// The Next Hop field as sent: 4 (IPv4), 16 (IPv6 global), 32 (global
    /// + link-local, RFC 2545 §3), or a VPN/other family's form.
    pub next_hop: Vec<u8>,
    /// RFC 4760 §3: "Reserved ... MUST be set to 0, and SHOULD be ignored
    /// upon receipt" — kept for lossless re-encoding.
    pub reserved: u8,
    /// The routes announced.
    pub nlri: MpNlri,
}

/// MP_UNREACH_NLRI (RFC 4760 §4): withdrawn routes of one family.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MpUnreach {
    /// AFI and SAFI of the routes.
    pub family: Family,
    /// The routes withdrawn.
    pub withdrawn: MpNlri,
}

/// A malformed MP attribute: the reason and, when AFI/SAFI could be read,
/// the family to disable (RFC 7606 §7.11, RFC 4760 §7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MpError {
    /// What is wrong, for the log.
    pub reason: &'static str,
    /// The AFI/SAFI, when the attribute was long enough to hold it.
    pub family: Option<Family>,
}

fn family_of(value: &[u8]) -> Option<Family> {
    if value.len() < 3 {
        return None;
    }
    Some(Family::new(
        Afi(u16::from_be_bytes([value[0], value[1]])),
        Safi(value[2]),
    ))
}

impl MpReach {
    /// Announces `nlri` of `family` via `next_hop`: one address, or an IPv6
    /// global and link-local pair (RFC 2545 §3), concatenated.
    pub fn new(family: Family, next_hop: &[IpAddr], nlri: Vec<Nlri>) -> Self {
        let mut nh = Vec::with_capacity(32);
        for a in next_hop {
            match a {
                IpAddr::V4(v4) => nh.extend_from_slice(&v4.octets()),
                IpAddr::V6(v6) => nh.extend_from_slice(&v6.octets()),
            }
        }
        MpReach {
            family,
            next_hop: nh,
            reserved: 0,
            nlri: MpNlri::Prefixes(nlri),
        }
    }

    /// Decodes the attribute value; a Length of Next Hop Network Address that
    /// does not fit the family is malformed (RFC 7606 §7.11).
    pub fn decode(value: &[u8], ctx: &Context) -> Result<MpReach, MpError> {
        let family = family_of(value).ok_or(MpError {
            reason: "MP_REACH_NLRI too short to hold AFI/SAFI",
            family: None,
        })?;
        let err = |reason| MpError {
            reason,
            family: Some(family),
        };
        let nh_len = *value
            .get(3)
            .ok_or(err("MP_REACH_NLRI ends before the next hop length"))?
            as usize;
        let nh = value
            .get(4..4 + nh_len)
            .ok_or(err("MP_REACH_NLRI next hop runs past the attribute"))?;
        let reserved = *value
            .get(4 + nh_len)
            .ok_or(err("MP_REACH_NLRI ends before the reserved octet"))?;
        // RFC 7606 §7.11: "If the Length of Next Hop Network Address field
        // of the MP_REACH attribute is inconsistent with that which was
        // expected, the attribute is considered malformed."
        if family.has_prefix_nlri() {
            let ok = match family.afi {
                // RFC 8950 allows an IPv6 next hop for IPv4 NLRI.
                Afi::IPV4 => matches!(nh_len, 4 | 16 | 32),
                _ => matches!(nh_len, 16 | 32),
            };
            if !ok {
                return Err(err(
                    "MP_REACH_NLRI next hop length is inconsistent with the family",
                ));
            }
        }
        let nlri = MpNlri::decode(family, &value[5 + nh_len..], ctx).map_err(err)?;
        Ok(MpReach {
            family,
            next_hop: nh.to_vec(),
            reserved,
            nlri,
        })
    }

    /// Writes the attribute value (without the attribute header).
    pub fn encode(&self, ctx: &Context, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.family.afi.0.to_be_bytes());
        out.push(self.family.safi.0);
        out.push(self.next_hop.len() as u8);
        out.extend_from_slice(&self.next_hop);
        out.push(self.reserved);
        self.nlri.encode(self.family, ctx, out);
    }

    /// The global next hop and, for a 32-octet IPv6 next hop, the
    /// link-local one (RFC 2545 §3).
    pub fn next_hops(&self) -> (Option<IpAddr>, Option<Ipv6Addr>) {
        let nh = &self.next_hop;
        match nh.len() {
            4 => (
                Some(IpAddr::V4(Ipv4Addr::new(nh[0], nh[1], nh[2], nh[3]))),
                None,
            ),
            16 | 32 => {
                let mut g = [0u8; 16];
                g.copy_from_slice(&nh[..16]);
                let ll = (nh.len() == 32).then(|| {
                    let mut l = [0u8; 16];
                    l.copy_from_slice(&nh[16..]);
                    Ipv6Addr::from(l)
                });
                (Some(IpAddr::V6(Ipv6Addr::from(g))), ll)
            }
            _ => (None, None),
        }
    }
}

impl MpUnreach {
    /// Withdraws `withdrawn` of `family`. Empty, and alone in an UPDATE, it
    /// is the End-of-RIB marker of `family` (RFC 4724 §2).
    pub fn new(family: Family, withdrawn: Vec<Nlri>) -> Self {
        MpUnreach {
            family,
            withdrawn: MpNlri::Prefixes(withdrawn),
        }
    }

    /// Decodes the attribute value.
    pub fn decode(value: &[u8], ctx: &Context) -> Result<MpUnreach, MpError> {
        let family = family_of(value).ok_or(MpError {
            reason: "MP_UNREACH_NLRI too short to hold AFI/SAFI",
            family: None,
        })?;
        let withdrawn = MpNlri::decode(family, &value[3..], ctx).map_err(|reason| MpError {
            reason,
            family: Some(family),
        })?;
        Ok(MpUnreach { family, withdrawn })
    }

    /// Writes the attribute value (without the attribute header).
    pub fn encode(&self, ctx: &Context, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.family.afi.0.to_be_bytes());
        out.push(self.family.safi.0);
        self.withdrawn.encode(self.family, ctx, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        crate::hex::decode(s).unwrap()
    }

    fn v4(p: &str) -> Nlri {
        Nlri::new(p.parse().unwrap())
    }

    #[test]
    fn ipv4_routes_with_an_ipv6_global_and_link_local_next_hop() {
        // RFC 8950 §3: AFI 1 / SAFI 1, Length of Next Hop 32 for a global
        // and a link-local IPv6 address (as RFC 2545 §3 has for IPv6), then
        // the IPv4 prefixes as usual.
        let reach = MpReach::new(
            Family::IPV4_UNICAST,
            &["2001:db8::2".parse().unwrap(), "fe80::2".parse().unwrap()],
            vec![v4("198.51.100.7/32")],
        );
        let wire = hex(concat!(
            "0001",
            "01",
            "20",
            "20010db8000000000000000000000002",
            "fe800000000000000000000000000002",
            "00",
            "20c6336407",
        ));
        let mut out = Vec::new();
        reach.encode(&Context::default(), &mut out);
        assert_eq!(out, wire, "encode");
        let back = MpReach::decode(&wire, &Context::default()).unwrap();
        assert_eq!(back, reach, "decode");
        assert_eq!(
            back.next_hops(),
            (
                Some("2001:db8::2".parse().unwrap()),
                Some("fe80::2".parse().unwrap())
            )
        );
    }

    #[test]
    fn ipv4_routes_with_a_link_local_only_next_hop() {
        // RFC 8950 §3 (and RFC 2545 §3): an unnumbered link with no global
        // address sends the link-local address alone, 16 octets.
        let reach = MpReach::new(
            Family::IPV4_UNICAST,
            &["fe80::2".parse().unwrap()],
            vec![v4("198.51.100.7/32")],
        );
        let wire = hex(
            "00010110fe80000000000000000000000000000200", /* reserved */
        );
        let mut out = Vec::new();
        reach.encode(&Context::default(), &mut out);
        assert_eq!(&out[..wire.len()], &wire[..], "encode");
        let back = MpReach::decode(&out, &Context::default()).unwrap();
        assert_eq!(back, reach, "decode");
        assert_eq!(back.next_hops(), (Some("fe80::2".parse().unwrap()), None));
    }

    #[test]
    fn ipv4_next_hop_lengths_other_than_4_16_32_are_malformed() {
        // RFC 7606 §7.11: an inconsistent Length of Next Hop Network Address
        // makes the attribute malformed; RFC 8950 §3 adds 16 and 32 for AFI 1.
        for len in [0usize, 8, 12, 24] {
            let mut wire = vec![0, 1, 1, len as u8];
            wire.extend(std::iter::repeat_n(0xfe, len));
            wire.extend([0, 32, 198, 51, 100, 7]);
            let e = MpReach::decode(&wire, &Context::default()).unwrap_err();
            assert_eq!(
                e.reason, "MP_REACH_NLRI next hop length is inconsistent with the family",
                "length {len}"
            );
        }
    }
}

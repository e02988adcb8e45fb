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

//! Path attributes (RFC 4271 §4.3, §5), one table row per known type in the
//! manner of BIRD's attribute table: expected flags, decoder, and the
//! RFC 7606 approach for a malformed value.
//!
//! ```text
//! +---------------+---------------+-------------------------------+
//! | Attr. Flags   | Attr. Type    | Length (1, or 2 if Extended   |
//! | O T P E 0000  | Code          | Length) | Value (variable)    |
//! +---------------+---------------+-------------------------------+
//! ```
//!
//! Decoding is lossless: the flags octet is kept whole (Extended Length and
//! Partial bits included), attributes keep their order, and an attribute
//! that cannot be read is kept as bytes together with its error, so that
//! re-encoding any decoded UPDATE yields the bytes received.

use std::net::Ipv4Addr;

use crate::aspath::AsPath;
use crate::community::{Community, ExtCommunity, Ipv6ExtCommunity, LargeCommunity};
use crate::consts::{attr, attr_flags};
use crate::context::{Context, Family};
use crate::error::{Action, AttrError, Error};
use crate::mp::{MpReach, MpUnreach};

/// ORIGIN values (RFC 4271 §4.3 (a)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// IGP: the NLRI is interior to the originating AS.
    Igp = 0,
    /// EGP: the NLRI was learned by the EGP protocol (RFC 904).
    Egp = 1,
    /// INCOMPLETE: the NLRI was learned by some other means.
    Incomplete = 2,
}

impl Origin {
    /// The value's name in lower case, as shown in logs and the API.
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Igp => "igp",
            Origin::Egp => "egp",
            Origin::Incomplete => "incomplete",
        }
    }
}

/// AGGREGATOR and AS4_AGGREGATOR (RFC 4271 §4.3 (g), RFC 6793 §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Aggregator {
    /// The AS of the speaker that formed the aggregate route (AS_TRANS in a
    /// 2-octet AGGREGATOR whose AS needs four octets, RFC 6793 §4.2.2).
    pub asn: u32,
    /// The IP address of that speaker (RFC 4271 §5.1.7: it SHOULD be its
    /// BGP Identifier).
    pub address: Ipv4Addr,
}

/// An attribute that could not be read, kept as its value bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Malformed {
    /// The attribute's value octets as received, written back unchanged.
    pub raw: Vec<u8>,
    /// What is wrong, and the RFC 7606 approach for it.
    pub error: AttrError,
    /// For MP_REACH/MP_UNREACH: the family to disable, when it was legible.
    pub family: Option<Family>,
}

impl std::hash::Hash for AttrError {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.error.code().hash(state);
        self.error.subcode().hash(state);
        self.action.hash(state);
    }
}

/// A path attribute's value, decoded by type code (IANA "BGP Path
/// Attributes").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// 1 — ORIGIN (RFC 4271 §4.3 (a), §5.1.1).
    Origin(Origin),
    /// 2 — AS_PATH (RFC 4271 §4.3 (b), §5.1.2).
    AsPath(AsPath),
    /// 3 — NEXT_HOP: the IPv4 address of the router to forward to (RFC 4271
    /// §4.3 (c), §5.1.3).
    NextHop(Ipv4Addr),
    /// 4 — MULTI_EXIT_DISC: lower is preferred among entry points to a
    /// neighbouring AS (RFC 4271 §4.3 (d), §5.1.4).
    MultiExitDisc(u32),
    /// 5 — LOCAL_PREF: higher is preferred; internal peers only (RFC 4271
    /// §4.3 (e), §5.1.5).
    LocalPref(u32),
    /// 6 — ATOMIC_AGGREGATE, no value (RFC 4271 §4.3 (f), §5.1.6).
    AtomicAggregate,
    /// 7 — AGGREGATOR (RFC 4271 §4.3 (g), §5.1.7); 2- or 4-octet AS as
    /// negotiated (RFC 6793 §3).
    Aggregator(Aggregator),
    /// 8 — COMMUNITIES (RFC 1997).
    Communities(Vec<Community>),
    /// 9 — ORIGINATOR_ID: the BGP Identifier of the route's originator in the
    /// AS (RFC 4456 §8).
    OriginatorId(Ipv4Addr),
    /// 10 — CLUSTER_LIST: the route reflection clusters the route passed
    /// through (RFC 4456 §8).
    ClusterList(Vec<Ipv4Addr>),
    /// 14 — MP_REACH_NLRI (RFC 4760 §3).
    MpReach(MpReach),
    /// 15 — MP_UNREACH_NLRI (RFC 4760 §4).
    MpUnreach(MpUnreach),
    /// 16 — EXTENDED COMMUNITIES (RFC 4360 §2).
    ExtendedCommunities(Vec<ExtCommunity>),
    /// 17 — AS4_PATH: the path with 4-octet AS numbers, beside a 2-octet
    /// AS_PATH (RFC 6793 §3).
    As4Path(AsPath),
    /// 18 — AS4_AGGREGATOR: the 4-octet AS of the aggregator (RFC 6793 §3).
    As4Aggregator(Aggregator),
    /// 25 — IPv6 Address Specific Extended Community (RFC 5701 §2).
    Ipv6ExtendedCommunities(Vec<Ipv6ExtCommunity>),
    /// 32 — LARGE_COMMUNITY (RFC 8092 §3).
    LargeCommunities(Vec<LargeCommunity>),
    /// 35 — Only to Customer: the AS that marked the route (RFC 9234 §5).
    Otc(u32),
    /// An optional attribute we do not know: kept with its flags (RFC 4271
    /// §5: "If an optional attribute is not recognized ... it MUST be
    /// quietly ignored" — and passed on if transitive; we only read).
    Unknown(Vec<u8>),
    /// Boxed: the rare case, and the largest; inline, it would make every
    /// attribute of every UPDATE a third bigger to move and store.
    Malformed(Box<Malformed>),
}

/// One path attribute as it appears in an UPDATE (RFC 4271 §4.3): flags,
/// type code and value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PathAttribute {
    /// The whole flags octet as received, or the canonical one for
    /// attributes we build.
    pub flags: u8,
    /// The Attribute Type Code (IANA "BGP Path Attributes").
    pub type_code: u8,
    /// The decoded value; [`AttrValue::Unknown`] or [`AttrValue::Malformed`]
    /// when it could not be decoded.
    pub value: AttrValue,
}

/// The attribute as it sat on the wire, for decoders and error data.
pub(crate) struct RawAttr<'a> {
    pub flags: u8,
    pub code: u8,
    pub value: &'a [u8],
}

impl RawAttr<'_> {
    /// RFC 4271 §6.3: NOTIFICATION data is "the erroneous attribute (type,
    /// length, and value)" — we send it as it was received, flags included.
    pub(crate) fn tlv(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.value.len() + 4);
        out.push(self.flags);
        out.push(self.code);
        if self.flags & attr_flags::EXTENDED_LENGTH != 0 {
            out.extend_from_slice(&(self.value.len() as u16).to_be_bytes());
        } else {
            out.push(self.value.len() as u8);
        }
        out.extend_from_slice(self.value);
        out
    }

    fn length_error(&self, action: Action) -> AttrError {
        AttrError::new(
            Error::AttributeLengthError {
                attribute: self.tlv(),
            },
            action,
        )
    }
}

type Decoder = fn(&RawAttr<'_>, &Context) -> Result<AttrValue, (AttrError, Option<Family>)>;

/// One row per known attribute.
pub(crate) struct Spec {
    pub code: u8,
    pub name: &'static str,
    /// Expected Optional and Transitive bits.
    pub flags: u8,
    decode: Decoder,
    /// The RFC 7606 approach when the value (or the flags) is malformed.
    pub malformed: Action,
}

const WELL_KNOWN: u8 = attr_flags::TRANSITIVE;
const OPT_TRANS: u8 = attr_flags::OPTIONAL | attr_flags::TRANSITIVE;
const OPT_NON_TRANS: u8 = attr_flags::OPTIONAL;

use Action::{AfiSafiDisable, AttributeDiscard, TreatAsWithdraw};

static TABLE: [Spec; 18] = [
    // RFC 7606 §7.1
    Spec {
        code: attr::ORIGIN,
        name: "ORIGIN",
        flags: WELL_KNOWN,
        decode: dec_origin,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.2
    Spec {
        code: attr::AS_PATH,
        name: "AS_PATH",
        flags: WELL_KNOWN,
        decode: dec_as_path,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.3
    Spec {
        code: attr::NEXT_HOP,
        name: "NEXT_HOP",
        flags: WELL_KNOWN,
        decode: dec_next_hop,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.4
    Spec {
        code: attr::MULTI_EXIT_DISC,
        name: "MULTI_EXIT_DISC",
        flags: OPT_NON_TRANS,
        decode: dec_med,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.5
    Spec {
        code: attr::LOCAL_PREF,
        name: "LOCAL_PREF",
        flags: WELL_KNOWN,
        decode: dec_local_pref,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.6: "... attribute discard"
    Spec {
        code: attr::ATOMIC_AGGREGATE,
        name: "ATOMIC_AGGREGATE",
        flags: WELL_KNOWN,
        decode: dec_atomic_aggregate,
        malformed: AttributeDiscard,
    },
    // RFC 7606 §7.7: "... attribute discard"
    Spec {
        code: attr::AGGREGATOR,
        name: "AGGREGATOR",
        flags: OPT_TRANS,
        decode: dec_aggregator,
        malformed: AttributeDiscard,
    },
    // RFC 7606 §7.8
    Spec {
        code: attr::COMMUNITIES,
        name: "COMMUNITIES",
        flags: OPT_TRANS,
        decode: dec_communities,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.9
    Spec {
        code: attr::ORIGINATOR_ID,
        name: "ORIGINATOR_ID",
        flags: OPT_NON_TRANS,
        decode: dec_originator_id,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.10
    Spec {
        code: attr::CLUSTER_LIST,
        name: "CLUSTER_LIST",
        flags: OPT_NON_TRANS,
        decode: dec_cluster_list,
        malformed: TreatAsWithdraw,
    },
    // RFC 7606 §7.11, RFC 4760 §7
    Spec {
        code: attr::MP_REACH_NLRI,
        name: "MP_REACH_NLRI",
        flags: OPT_NON_TRANS,
        decode: dec_mp_reach,
        malformed: AfiSafiDisable,
    },
    // RFC 7606 §7.12, RFC 4760 §7
    Spec {
        code: attr::MP_UNREACH_NLRI,
        name: "MP_UNREACH_NLRI",
        flags: OPT_NON_TRANS,
        decode: dec_mp_unreach,
        malformed: AfiSafiDisable,
    },
    // RFC 7606 §7.14
    Spec {
        code: attr::EXTENDED_COMMUNITIES,
        name: "EXTENDED_COMMUNITIES",
        flags: OPT_TRANS,
        decode: dec_ext_communities,
        malformed: TreatAsWithdraw,
    },
    // RFC 6793 §6: a malformed AS4_PATH or AS4_AGGREGATOR is discarded.
    Spec {
        code: attr::AS4_PATH,
        name: "AS4_PATH",
        flags: OPT_TRANS,
        decode: dec_as4_path,
        malformed: AttributeDiscard,
    },
    Spec {
        code: attr::AS4_AGGREGATOR,
        name: "AS4_AGGREGATOR",
        flags: OPT_TRANS,
        decode: dec_as4_aggregator,
        malformed: AttributeDiscard,
    },
    // RFC 7606 §7.15
    Spec {
        code: attr::IPV6_EXTENDED_COMMUNITIES,
        name: "IPV6_EXTENDED_COMMUNITIES",
        flags: OPT_TRANS,
        decode: dec_ipv6_ext_communities,
        malformed: TreatAsWithdraw,
    },
    // RFC 8092 §6
    Spec {
        code: attr::LARGE_COMMUNITY,
        name: "LARGE_COMMUNITY",
        flags: OPT_TRANS,
        decode: dec_large_communities,
        malformed: TreatAsWithdraw,
    },
    // RFC 9234 §5
    Spec {
        code: attr::OTC,
        name: "OTC",
        flags: OPT_TRANS,
        decode: dec_otc,
        malformed: TreatAsWithdraw,
    },
];

/// `TABLE`'s row for each type code, plus one (0: no row), so that a
/// lookup costs one load for every attribute of every UPDATE instead of a
/// scan of the table.
static ROW: [u8; 256] = {
    let mut row = [0u8; 256];
    let mut i = 0;
    while i < TABLE.len() {
        row[TABLE[i].code as usize] = i as u8 + 1;
        i += 1;
    }
    row
};

pub(crate) fn spec(code: u8) -> Option<&'static Spec> {
    let row = ROW[usize::from(code)];
    (row != 0).then(|| &TABLE[usize::from(row - 1)])
}

/// The attribute's name, or `ATTR_<code>` for one we do not know.
pub fn name(code: u8) -> String {
    spec(code).map_or_else(|| format!("ATTR_{code}"), |s| s.name.to_string())
}

type DecResult = Result<AttrValue, (AttrError, Option<Family>)>;

fn exact_len(a: &RawAttr<'_>, n: usize, action: Action) -> Result<(), (AttrError, Option<Family>)> {
    if a.value.len() == n {
        Ok(())
    } else {
        Err((a.length_error(action), None))
    }
}

/// "a non-zero multiple of n" (RFC 7606 §7.8, §7.10, §7.14, §7.15; RFC 8092 §6).
fn multiple_len(
    a: &RawAttr<'_>,
    n: usize,
    action: Action,
) -> Result<(), (AttrError, Option<Family>)> {
    if !a.value.is_empty() && a.value.len().is_multiple_of(n) {
        Ok(())
    } else {
        Err((a.length_error(action), None))
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn dec_origin(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 1, TreatAsWithdraw)?;
    Ok(AttrValue::Origin(match a.value[0] {
        0 => Origin::Igp,
        1 => Origin::Egp,
        2 => Origin::Incomplete,
        // RFC 4271 §6.3: "If the ORIGIN attribute has an undefined value,
        // then the Error Subcode MUST be set to Invalid Origin Attribute."
        _ => {
            return Err((
                AttrError::new(
                    Error::InvalidOriginAttribute { attribute: a.tlv() },
                    TreatAsWithdraw,
                ),
                None,
            ));
        }
    }))
}

fn dec_as_path(a: &RawAttr<'_>, ctx: &Context) -> DecResult {
    AsPath::decode(a.value, ctx.four_octet_as)
        .map(AttrValue::AsPath)
        .map_err(|e| {
            (
                AttrError::new(
                    Error::MalformedAsPath { reason: e.reason() },
                    TreatAsWithdraw,
                ),
                None,
            )
        })
}

fn dec_next_hop(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::NextHop(Ipv4Addr::from(be32(a.value))))
}

fn dec_med(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::MultiExitDisc(be32(a.value)))
}

fn dec_local_pref(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::LocalPref(be32(a.value)))
}

fn dec_atomic_aggregate(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 0, AttributeDiscard)?;
    Ok(AttrValue::AtomicAggregate)
}

fn dec_aggregator(a: &RawAttr<'_>, ctx: &Context) -> DecResult {
    // RFC 7606 §7.7: length 6 with 2-octet AS, 8 with 4-octet AS.
    if ctx.four_octet_as {
        exact_len(a, 8, AttributeDiscard)?;
        Ok(AttrValue::Aggregator(Aggregator {
            asn: be32(a.value),
            address: Ipv4Addr::from(be32(&a.value[4..])),
        }))
    } else {
        exact_len(a, 6, AttributeDiscard)?;
        Ok(AttrValue::Aggregator(Aggregator {
            asn: u32::from(u16::from_be_bytes([a.value[0], a.value[1]])),
            address: Ipv4Addr::from(be32(&a.value[2..])),
        }))
    }
}

fn dec_communities(a: &RawAttr<'_>, _: &Context) -> DecResult {
    multiple_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::Communities(
        a.value
            .chunks_exact(4)
            .map(|c| Community(be32(c)))
            .collect(),
    ))
}

fn dec_originator_id(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::OriginatorId(Ipv4Addr::from(be32(a.value))))
}

fn dec_cluster_list(a: &RawAttr<'_>, _: &Context) -> DecResult {
    multiple_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::ClusterList(
        a.value
            .chunks_exact(4)
            .map(|c| Ipv4Addr::from(be32(c)))
            .collect(),
    ))
}

/// RFC 7606 §7.11: "the 'session reset' or 'AFI/SAFI disable' approach
/// MUST be used"; without a legible AFI/SAFI only a reset is possible.
fn mp_failure(a: &RawAttr<'_>, e: crate::mp::MpError) -> (AttrError, Option<Family>) {
    let action = if e.family.is_some() {
        AfiSafiDisable
    } else {
        Action::SessionReset
    };
    (
        AttrError::new(
            Error::OptionalAttributeError {
                attribute: a.tlv(),
                reason: e.reason,
            },
            action,
        ),
        e.family,
    )
}

fn dec_mp_reach(a: &RawAttr<'_>, ctx: &Context) -> DecResult {
    MpReach::decode(a.value, ctx)
        .map(AttrValue::MpReach)
        .map_err(|e| mp_failure(a, e))
}

fn dec_mp_unreach(a: &RawAttr<'_>, ctx: &Context) -> DecResult {
    MpUnreach::decode(a.value, ctx)
        .map(AttrValue::MpUnreach)
        .map_err(|e| mp_failure(a, e))
}

fn dec_ext_communities(a: &RawAttr<'_>, _: &Context) -> DecResult {
    multiple_len(a, 8, TreatAsWithdraw)?;
    Ok(AttrValue::ExtendedCommunities(
        a.value
            .chunks_exact(8)
            .map(|c| {
                let mut b = [0u8; 8];
                b.copy_from_slice(c);
                ExtCommunity(b)
            })
            .collect(),
    ))
}

fn dec_ipv6_ext_communities(a: &RawAttr<'_>, _: &Context) -> DecResult {
    multiple_len(a, 20, TreatAsWithdraw)?;
    Ok(AttrValue::Ipv6ExtendedCommunities(
        a.value
            .chunks_exact(20)
            .map(|c| {
                let mut b = [0u8; 20];
                b.copy_from_slice(c);
                Ipv6ExtCommunity(b)
            })
            .collect(),
    ))
}

fn dec_as4_path(a: &RawAttr<'_>, _: &Context) -> DecResult {
    AsPath::decode(a.value, true)
        .map(AttrValue::As4Path)
        .map_err(|e| {
            (
                AttrError::new(
                    Error::MalformedAsPath { reason: e.reason() },
                    AttributeDiscard,
                ),
                None,
            )
        })
}

fn dec_as4_aggregator(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 8, AttributeDiscard)?;
    Ok(AttrValue::As4Aggregator(Aggregator {
        asn: be32(a.value),
        address: Ipv4Addr::from(be32(&a.value[4..])),
    }))
}

fn dec_large_communities(a: &RawAttr<'_>, _: &Context) -> DecResult {
    multiple_len(a, 12, TreatAsWithdraw)?;
    Ok(AttrValue::LargeCommunities(
        a.value
            .chunks_exact(12)
            .map(|c| LargeCommunity {
                global: be32(c),
                local1: be32(&c[4..]),
                local2: be32(&c[8..]),
            })
            .collect(),
    ))
}

fn dec_otc(a: &RawAttr<'_>, _: &Context) -> DecResult {
    exact_len(a, 4, TreatAsWithdraw)?;
    Ok(AttrValue::Otc(be32(a.value)))
}

impl PathAttribute {
    /// Decodes one attribute whose TLV framing has been read already.
    // Inlined into the attribute loop, for the reason given at
    // `Update::decode`: the attribute is then built in place rather than
    // copied out of a returned value.
    #[inline]
    pub(crate) fn decode(raw: &RawAttr<'_>, ctx: &Context) -> PathAttribute {
        let malformed = |error: AttrError, family| PathAttribute {
            flags: raw.flags,
            type_code: raw.code,
            value: AttrValue::Malformed(Box::new(Malformed {
                raw: raw.value.to_vec(),
                error,
                family,
            })),
        };
        let Some(spec) = spec(raw.code) else {
            if raw.flags & attr_flags::OPTIONAL == 0 {
                // RFC 4271 §6.3: "If any of the well-known mandatory
                // attributes are not recognized, then the Error Subcode
                // MUST be set to Unrecognized Well-known Attribute." RFC
                // 7606 leaves this a session reset.
                return malformed(
                    AttrError::new(
                        Error::UnrecognizedWellKnownAttribute {
                            attribute: raw.tlv(),
                        },
                        Action::SessionReset,
                    ),
                    None,
                );
            }
            return PathAttribute {
                flags: raw.flags,
                type_code: raw.code,
                value: AttrValue::Unknown(raw.value.to_vec()),
            };
        };
        // RFC 7606 §3 (a): "If the value of either the Optional or
        // Transitive bits in the Attribute Flags is in conflict with their
        // specified values, then the attribute MUST be treated as malformed
        // and the 'treat-as-withdraw' approach used" — for MP_REACH and
        // MP_UNREACH, whose NLRI a withdrawal would need, the family is
        // disabled instead.
        if raw.flags & (attr_flags::OPTIONAL | attr_flags::TRANSITIVE) != spec.flags {
            let family = (spec.malformed == AfiSafiDisable).then(|| {
                (raw.value.len() >= 3).then(|| {
                    Family::new(
                        crate::context::Afi(u16::from_be_bytes([raw.value[0], raw.value[1]])),
                        crate::context::Safi(raw.value[2]),
                    )
                })
            });
            let family = family.flatten();
            let action = match spec.malformed {
                AfiSafiDisable if family.is_none() => Action::SessionReset,
                AfiSafiDisable => AfiSafiDisable,
                _ => TreatAsWithdraw,
            };
            return malformed(
                AttrError::new(
                    Error::AttributeFlagsError {
                        attribute: raw.tlv(),
                    },
                    action,
                ),
                family,
            );
        }
        match (spec.decode)(raw, ctx) {
            Ok(value) => PathAttribute {
                flags: raw.flags,
                type_code: raw.code,
                value,
            },
            Err((error, family)) => malformed(error, family),
        }
    }

    /// Writes flags, type, length and value. The length takes two octets
    /// when the Extended Length bit is set, or when the value needs it (the
    /// bit is then set in what is written).
    pub fn encode(&self, ctx: &Context, out: &mut Vec<u8>) {
        match &self.value {
            AttrValue::Origin(o) => self.encode_fixed([*o as u8], out),
            AttrValue::AsPath(p) => self.encode_with(out, |out| p.encode(ctx.four_octet_as, out)),
            AttrValue::NextHop(a) | AttrValue::OriginatorId(a) => {
                self.encode_fixed(a.octets(), out)
            }
            AttrValue::MultiExitDisc(v) | AttrValue::LocalPref(v) | AttrValue::Otc(v) => {
                self.encode_fixed(v.to_be_bytes(), out)
            }
            AttrValue::AtomicAggregate => self.encode_fixed([], out),
            AttrValue::Aggregator(a) if !ctx.four_octet_as => {
                // RFC 6793 §4.2.2: AS_TRANS for an AS that needs 4 octets.
                let [a0, a1] = u16::try_from(a.asn)
                    .unwrap_or(crate::consts::AS_TRANS)
                    .to_be_bytes();
                let [b0, b1, b2, b3] = a.address.octets();
                self.encode_fixed([a0, a1, b0, b1, b2, b3], out)
            }
            AttrValue::Aggregator(a) | AttrValue::As4Aggregator(a) => {
                let [a0, a1, a2, a3] = a.asn.to_be_bytes();
                let [b0, b1, b2, b3] = a.address.octets();
                self.encode_fixed([a0, a1, a2, a3, b0, b1, b2, b3], out)
            }
            AttrValue::Communities(list) => self.encode_with(out, |out| {
                for c in list {
                    out.extend_from_slice(&c.0.to_be_bytes());
                }
            }),
            AttrValue::ClusterList(list) => self.encode_with(out, |out| {
                for a in list {
                    out.extend_from_slice(&a.octets());
                }
            }),
            AttrValue::MpReach(m) => self.encode_with(out, |out| m.encode(ctx, out)),
            AttrValue::MpUnreach(m) => self.encode_with(out, |out| m.encode(ctx, out)),
            AttrValue::ExtendedCommunities(list) => self.encode_with(out, |out| {
                for c in list {
                    out.extend_from_slice(&c.0);
                }
            }),
            AttrValue::Ipv6ExtendedCommunities(list) => self.encode_with(out, |out| {
                for c in list {
                    out.extend_from_slice(&c.0);
                }
            }),
            AttrValue::As4Path(p) => self.encode_with(out, |out| p.encode(true, out)),
            AttrValue::LargeCommunities(list) => self.encode_with(out, |out| {
                for c in list {
                    out.extend_from_slice(&c.global.to_be_bytes());
                    out.extend_from_slice(&c.local1.to_be_bytes());
                    out.extend_from_slice(&c.local2.to_be_bytes());
                }
            }),
            AttrValue::Unknown(raw) => self.encode_with(out, |out| out.extend_from_slice(raw)),
            AttrValue::Malformed(m) => self.encode_with(out, |out| out.extend_from_slice(&m.raw)),
        }
    }

    /// A value whose size is known before it is written (most attributes
    /// of most UPDATEs): header and value go out at once, with no length
    /// to fill in afterwards.
    fn encode_fixed<const N: usize>(&self, value: [u8; N], out: &mut Vec<u8>) {
        if self.flags & attr_flags::EXTENDED_LENGTH != 0 {
            out.extend_from_slice(&[self.flags, self.type_code, 0, N as u8]);
        } else {
            out.extend_from_slice(&[self.flags, self.type_code, N as u8]);
        }
        out.extend_from_slice(&value);
    }

    /// A value of variable size, written by `value`: its length is filled
    /// in afterwards.
    fn encode_with(&self, out: &mut Vec<u8>, value: impl FnOnce(&mut Vec<u8>)) {
        let start = out.len();
        let ext = self.flags & attr_flags::EXTENDED_LENGTH != 0;
        // The length field takes the size the flags give; a value that
        // turns out longer than one octet can count is the rare case, and
        // only it pays for moving the value to widen the field.
        if ext {
            out.extend_from_slice(&[self.flags, self.type_code, 0, 0]);
        } else {
            out.extend_from_slice(&[self.flags, self.type_code, 0]);
        }
        let value_at = out.len();
        value(out);
        let len = out.len() - value_at;
        fill_value_length(out, start, len);
    }

    /// An attribute we build, with the canonical flags for its type
    /// (Extended Length is added by the encoder only when needed).
    pub fn new(value: AttrValue) -> PathAttribute {
        let type_code = match &value {
            AttrValue::Origin(_) => attr::ORIGIN,
            AttrValue::AsPath(_) => attr::AS_PATH,
            AttrValue::NextHop(_) => attr::NEXT_HOP,
            AttrValue::MultiExitDisc(_) => attr::MULTI_EXIT_DISC,
            AttrValue::LocalPref(_) => attr::LOCAL_PREF,
            AttrValue::AtomicAggregate => attr::ATOMIC_AGGREGATE,
            AttrValue::Aggregator(_) => attr::AGGREGATOR,
            AttrValue::Communities(_) => attr::COMMUNITIES,
            AttrValue::OriginatorId(_) => attr::ORIGINATOR_ID,
            AttrValue::ClusterList(_) => attr::CLUSTER_LIST,
            AttrValue::MpReach(_) => attr::MP_REACH_NLRI,
            AttrValue::MpUnreach(_) => attr::MP_UNREACH_NLRI,
            AttrValue::ExtendedCommunities(_) => attr::EXTENDED_COMMUNITIES,
            AttrValue::As4Path(_) => attr::AS4_PATH,
            AttrValue::As4Aggregator(_) => attr::AS4_AGGREGATOR,
            AttrValue::Ipv6ExtendedCommunities(_) => attr::IPV6_EXTENDED_COMMUNITIES,
            AttrValue::LargeCommunities(_) => attr::LARGE_COMMUNITY,
            AttrValue::Otc(_) => attr::OTC,
            // Unknown and malformed values carry no type: build them with
            // a struct literal instead.
            AttrValue::Unknown(_) | AttrValue::Malformed(_) => 0,
        };
        let flags = spec(type_code).map_or(OPT_TRANS, |s| s.flags);
        PathAttribute {
            flags,
            type_code,
            value,
        }
    }

    /// The RFC 7606 problem this attribute carries, if any.
    pub fn error(&self) -> Option<&AttrError> {
        match &self.value {
            AttrValue::Malformed(m) => Some(&m.error),
            _ => None,
        }
    }

    /// The attribute's name, or `ATTR_<code>` for one we do not know.
    pub fn name(&self) -> String {
        name(self.type_code)
    }
}

/// Fills in the length of the attribute written at `start` (flags, type,
/// a length field of the size its flags give, then `len` octets of value).
/// A value longer than one octet can count has its length field widened
/// and Extended Length set (RFC 4271 §4.3), moving the value by one octet.
pub(crate) fn fill_value_length(out: &mut Vec<u8>, start: usize, len: usize) {
    let ext = out[start] & attr_flags::EXTENDED_LENGTH != 0;
    if !ext && len <= 255 {
        out[start + 2] = len as u8;
        return;
    }
    if !ext {
        out.insert(start + 3, 0);
        out[start] |= attr_flags::EXTENDED_LENGTH;
    }
    out[start + 2..start + 4]
        .copy_from_slice(&(len.min(usize::from(u16::MAX)) as u16).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// Decodes one attribute TLV in `ctx`, checks the value, and re-encodes
    /// it byte for byte.
    fn both_ways(ctx: &Context, tlv: &str, value: AttrValue) {
        let bytes = hex::decode(tlv).unwrap();
        let (attrs, trailing) = crate::update::decode_attributes(&bytes, ctx);
        assert!(trailing.is_none(), "{tlv}: trailing bytes");
        assert_eq!(attrs.len(), 1, "{tlv}");
        assert_eq!(attrs[0].value, value, "{tlv}: decode");
        let mut out = Vec::new();
        attrs[0].encode(ctx, &mut out);
        assert_eq!(hex::encode(&out), hex::encode(&bytes), "{tlv}: encode");
        // Built canonically, the same value gives the same bytes when the
        // received flags were canonical.
        let built = PathAttribute::new(value);
        if built.flags == bytes[0] {
            let mut out = Vec::new();
            built.encode(ctx, &mut out);
            assert_eq!(out, bytes, "{tlv}: canonical encode");
        }
    }

    fn malformed(ctx: &Context, tlv: &str) -> AttrError {
        let bytes = hex::decode(tlv).unwrap();
        let (attrs, _) = crate::update::decode_attributes(&bytes, ctx);
        let a = &attrs[0];
        let mut out = Vec::new();
        a.encode(ctx, &mut out);
        assert_eq!(out, bytes, "malformed attributes re-encode as received");
        a.error()
            .cloned()
            .unwrap_or_else(|| panic!("{tlv}: expected an error, got {:?}", a.value))
    }

    fn four() -> Context {
        Context::default()
    }
    fn two() -> Context {
        Context::two_octet_as()
    }

    #[test]
    fn vectors_for_every_attribute_type() {
        use crate::aspath::{Segment, SegmentType};
        both_ways(&four(), "40 01 01 00", AttrValue::Origin(Origin::Igp));
        both_ways(
            &four(),
            "40 01 01 02",
            AttrValue::Origin(Origin::Incomplete),
        );
        both_ways(
            &four(),
            "40 02 0a 02 02 0000fde9 fa56ea01",
            AttrValue::AsPath(AsPath::sequence(vec![65001, 4_200_000_001])),
        );
        both_ways(
            &two(),
            "40 02 06 02 02 fde9 5ba0",
            AttrValue::AsPath(AsPath::sequence(vec![65001, 23456])),
        );
        both_ways(&four(), "40 02 00", AttrValue::AsPath(AsPath::default()));
        both_ways(
            &four(),
            "40 03 04 c0000201",
            AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 1)),
        );
        both_ways(&four(), "80 04 04 00000064", AttrValue::MultiExitDisc(100));
        both_ways(&four(), "40 05 04 000000c8", AttrValue::LocalPref(200));
        both_ways(&four(), "40 06 00", AttrValue::AtomicAggregate);
        both_ways(
            &four(),
            "c0 07 08 0000fde9 c0000201",
            AttrValue::Aggregator(Aggregator {
                asn: 65001,
                address: Ipv4Addr::new(192, 0, 2, 1),
            }),
        );
        both_ways(
            &two(),
            "c0 07 06 fde9 c0000201",
            AttrValue::Aggregator(Aggregator {
                asn: 65001,
                address: Ipv4Addr::new(192, 0, 2, 1),
            }),
        );
        both_ways(
            &four(),
            "c0 08 08 fde90064 ffffff01",
            AttrValue::Communities(vec![Community(0xfde9_0064), Community(0xffff_ff01)]),
        );
        both_ways(
            &four(),
            "80 09 04 0a000001",
            AttrValue::OriginatorId(Ipv4Addr::new(10, 0, 0, 1)),
        );
        both_ways(
            &four(),
            "80 0a 08 0a000001 0a000002",
            AttrValue::ClusterList(vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)]),
        );
        both_ways(
            &four(),
            "80 0e 1e 0002 01 10 20010db8000000000000000000000001 00 40 20010db800000001",
            AttrValue::MpReach(MpReach::new(
                Family::IPV6_UNICAST,
                &["2001:db8::1".parse().unwrap()],
                vec![crate::nlri::Nlri::new("2001:db8:0:1::/64".parse().unwrap())],
            )),
        );
        both_ways(
            &four(),
            "90 0f 0007 0001 01 18 c63364",
            AttrValue::MpUnreach(MpUnreach::new(
                Family::IPV4_UNICAST,
                vec![crate::nlri::Nlri::new("198.51.100.0/24".parse().unwrap())],
            )),
        );
        both_ways(
            &four(),
            "c0 10 08 0002fde900000064",
            AttrValue::ExtendedCommunities(vec![ExtCommunity::route_target(65001, 100)]),
        );
        both_ways(
            &two(),
            "c0 11 0a 02 02 fa56ea01 0000fde9",
            AttrValue::As4Path(AsPath {
                segments: vec![Segment {
                    kind: SegmentType::Sequence,
                    asns: vec![4_200_000_001, 65001],
                }],
            }),
        );
        both_ways(
            &two(),
            "c0 12 08 fa56ea01 c0000201",
            AttrValue::As4Aggregator(Aggregator {
                asn: 4_200_000_001,
                address: Ipv4Addr::new(192, 0, 2, 1),
            }),
        );
        both_ways(
            &four(),
            "c0 19 14 0002 20010db8000000000000000000000001 0064",
            AttrValue::Ipv6ExtendedCommunities(vec![Ipv6ExtCommunity(
                hex::decode("000220010db80000000000000000000000010064")
                    .unwrap()
                    .try_into()
                    .unwrap(),
            )]),
        );
        both_ways(
            &four(),
            "c0 20 0c 0000fde9 00000001 00000064",
            AttrValue::LargeCommunities(vec![LargeCommunity {
                global: 65001,
                local1: 1,
                local2: 100,
            }]),
        );
        both_ways(&four(), "c0 23 04 0000fde9", AttrValue::Otc(65001));
        both_ways(
            &four(),
            "e0 99 03 010203",
            AttrValue::Unknown(vec![1, 2, 3]),
        );
    }

    #[test]
    fn wire_details_survive() {
        // Extended Length on a short value, and the Partial bit.
        both_ways(&four(), "50 01 0001 00", AttrValue::Origin(Origin::Igp));
        both_ways(
            &four(),
            "e0 08 04 fde90064",
            AttrValue::Communities(vec![Community(0xfde9_0064)]),
        );
    }

    #[test]
    fn long_values_get_extended_length() {
        let list: Vec<Community> = (0..100).map(Community).collect();
        let a = PathAttribute::new(AttrValue::Communities(list));
        let mut out = Vec::new();
        a.encode(&four(), &mut out);
        assert_eq!(out[0], 0xd0);
        assert_eq!(u16::from_be_bytes([out[2], out[3]]), 400);
    }

    #[test]
    fn rfc7606_actions_per_attribute() {
        let c = four();
        let ebgp = Context {
            external: Some(true),
            ..four()
        };
        let check = |ctx: &Context, tlv: &str, code: u8, sub: u8, action: Action| {
            let e = malformed(ctx, tlv);
            assert_eq!(
                (e.error.code(), e.error.subcode(), e.action),
                (code, sub, action),
                "{tlv}"
            );
        };
        // §7.1 ORIGIN: wrong length, undefined value.
        check(&c, "40 01 02 0000", 3, 5, TreatAsWithdraw);
        check(&c, "40 01 01 03", 3, 6, TreatAsWithdraw);
        // §7.2 AS_PATH: overrun, underrun, zero-length segment, bad type.
        check(&c, "40 02 04 02 02 0000", 3, 11, TreatAsWithdraw);
        check(&c, "40 02 07 02 01 0000fde9 02", 3, 11, TreatAsWithdraw);
        check(&c, "40 02 02 02 00", 3, 11, TreatAsWithdraw);
        check(&c, "40 02 06 07 01 0000fde9", 3, 11, TreatAsWithdraw);
        // §7.3 NEXT_HOP, §7.4 MED, §7.5 LOCAL_PREF, §7.9 ORIGINATOR_ID.
        check(&c, "40 03 05 c000020100", 3, 5, TreatAsWithdraw);
        check(&c, "80 04 03 000064", 3, 5, TreatAsWithdraw);
        check(&c, "40 05 00", 3, 5, TreatAsWithdraw);
        check(&c, "80 09 03 0a0000", 3, 5, TreatAsWithdraw);
        // §7.6 ATOMIC_AGGREGATE and §7.7 AGGREGATOR: attribute discard.
        check(&c, "40 06 01 00", 3, 5, AttributeDiscard);
        check(&c, "c0 07 06 fde9 c0000201", 3, 5, AttributeDiscard);
        check(&two(), "c0 07 08 0000fde9 c0000201", 3, 5, AttributeDiscard);
        // §7.8 COMMUNITIES, §7.10 CLUSTER_LIST, §7.14, §7.15, RFC 8092, RFC 9234.
        check(&c, "c0 08 03 fde900", 3, 5, TreatAsWithdraw);
        check(&c, "c0 08 00", 3, 5, TreatAsWithdraw);
        check(&c, "80 0a 05 0a00000100", 3, 5, TreatAsWithdraw);
        check(&c, "c0 10 07 0002fde9000000", 3, 5, TreatAsWithdraw);
        check(
            &c,
            "c0 19 10 00000000000000000000000000000000",
            3,
            5,
            TreatAsWithdraw,
        );
        check(&c, "c0 20 08 0000fde900000001", 3, 5, TreatAsWithdraw);
        check(&c, "c0 23 02 0001", 3, 5, TreatAsWithdraw);
        // RFC 6793 §6: AS4_PATH / AS4_AGGREGATOR malformed → discard.
        check(&two(), "c0 11 03 02 01 00", 3, 11, AttributeDiscard);
        check(&two(), "c0 12 06 fde9 c0000201", 3, 5, AttributeDiscard);
        // RFC 7606 §3 (a): flags in conflict → treat-as-withdraw.
        check(&c, "c0 01 01 00", 3, 4, TreatAsWithdraw);
        check(&c, "40 08 04 fde90064", 3, 4, TreatAsWithdraw);
        // Unrecognized well-known attribute → session reset (RFC 4271 §6.3).
        check(&c, "40 63 01 00", 3, 2, Action::SessionReset);
        // MP_REACH / MP_UNREACH: zero length and truncation.
        check(&c, "80 0e 00", 3, 9, Action::SessionReset);
        check(&c, "80 0f 02 0001", 3, 9, Action::SessionReset);
        check(&c, "80 0e 04 0002 01 10", 3, 9, AfiSafiDisable);
        check(
            &c,
            "80 0e 0b 0002 01 05 2001 0db8 00 00 00",
            3,
            9,
            AfiSafiDisable,
        );
        check(&c, "80 0f 05 0001 01 21 0a", 3, 9, AfiSafiDisable);
        check(
            &c,
            "80 0e 0a 0001 01 04 c0000201 00 19",
            3,
            9,
            AfiSafiDisable,
        );
        // The session-type rules are applied by UPDATE validation, not here.
        assert!(malformed_or_none(&ebgp, "40 05 04 00000064").is_none());
    }

    fn malformed_or_none(ctx: &Context, tlv: &str) -> Option<AttrError> {
        let bytes = hex::decode(tlv).unwrap();
        let (attrs, _) = crate::update::decode_attributes(&bytes, ctx);
        attrs[0].error().cloned()
    }
}

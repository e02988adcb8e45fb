//! UPDATE (RFC 4271 §4.3) and its RFC 7606 validation.
//!
//! ```text
//! +-----------------------------------------------------+
//! |   Withdrawn Routes Length (2 octets)                |
//! +-----------------------------------------------------+
//! |   Withdrawn Routes (variable)                       |
//! +-----------------------------------------------------+
//! |   Total Path Attribute Length (2 octets)            |
//! +-----------------------------------------------------+
//! |   Path Attributes (variable)                        |
//! +-----------------------------------------------------+
//! |   Network Layer Reachability Information (variable) |
//! +-----------------------------------------------------+
//! ```
//!
//! Decoding yields what arrived — every attribute, readable or not, in the
//! order received. `Update::validate` then turns it into what a speaker acts
//! on: the strongest RFC 7606 approach and the errors behind it. Only
//! errors that make the message impossible to delimit fail `decode`.

use std::net::Ipv4Addr;

use crate::aspath::AsPath;
use crate::attribute::{self, AttrValue, PathAttribute, RawAttr};
use crate::community::{Community, ExtCommunity, LargeCommunity};
use crate::consts::{attr, attr_flags};
use crate::context::{Afi, Context, Family};
use crate::error::{Action, AttrError, Error};
use crate::mp::{MpReach, MpUnreach};
use crate::nlri::{self, Nlri};
use crate::wire;

/// Attribute octets that could not be framed (RFC 7606 §4): kept as bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TrailingAttributes {
    /// The octets from the first attribute that could not be framed to the
    /// end of the Path Attributes field.
    pub raw: Vec<u8>,
    /// Why they could not be framed, and the RFC 7606 approach.
    pub error: AttrError,
}

/// An UPDATE message (RFC 4271 §4.3), decoded losslessly.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Update {
    /// IPv4 unicast withdrawals in the Withdrawn Routes field.
    pub withdrawn: Vec<Nlri>,
    /// The path attributes, in the order received.
    pub attributes: Vec<PathAttribute>,
    /// Boxed for the same reason as `AttrValue::Malformed`: rare, and
    /// inline it would double the size of every decoded UPDATE.
    pub trailing: Option<Box<TrailingAttributes>>,
    /// IPv4 unicast announcements in the NLRI field.
    pub nlri: Vec<Nlri>,
}

/// What a speaker does with a received UPDATE (RFC 7606 §3 (d): "the
/// approach with the strongest action MUST be used").
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `None`: the UPDATE is well-formed.
    pub action: Option<Action>,
    /// Every problem found, in the order found.
    pub errors: Vec<AttrError>,
    /// Families to disable (RFC 4760 §7) when the action is AFI/SAFI disable.
    pub disabled_families: Vec<Family>,
}

impl Verdict {
    fn add(&mut self, error: AttrError) {
        self.action = self.action.max(Some(error.action));
        self.errors.push(error);
    }

    /// The error whose NOTIFICATION resets the session, when the verdict
    /// is a session reset.
    pub fn reset_error(&self) -> Option<&Error> {
        if self.action != Some(Action::SessionReset) {
            return None;
        }
        self.errors
            .iter()
            .find(|e| e.action == Action::SessionReset)
            .map(|e| &e.error)
    }
}

/// Decodes the Path Attributes field. Returns the attributes and, when the
/// field ends inside an attribute, the unframeable rest (RFC 7606 §4).
pub(crate) fn decode_attributes(
    mut input: &[u8],
    ctx: &Context,
) -> (Vec<PathAttribute>, Option<Box<TrailingAttributes>>) {
    // Room for a typical UPDATE's attributes; none for an End-of-RIB or a
    // withdrawal, which often have no attributes at all.
    let mut attrs = Vec::with_capacity(if input.is_empty() { 0 } else { 8 });
    let mut seen = [0u64; 4];
    while !input.is_empty() {
        let header = |i| -> wire::Res<'_, (u8, u8, usize)> {
            let (i, flags) = wire::u8(i)?;
            let (i, code) = wire::u8(i)?;
            let (i, len) = if flags & attr_flags::EXTENDED_LENGTH != 0 {
                let (i, l) = wire::u16(i)?;
                (i, usize::from(l))
            } else {
                let (i, l) = wire::u8(i)?;
                (i, usize::from(l))
            };
            Ok((i, (flags, code, len)))
        };
        let framed = header(input).ok().and_then(|(rest, (flags, code, len))| {
            wire::take(len)(rest)
                .ok()
                .map(|(after, value)| (after, RawAttr { flags, code, value }))
        });
        let Some((after, raw)) = framed else {
            // RFC 7606 §4: fewer octets remain than an attribute header
            // needs, or the last attribute's length runs past the Total
            // Attribute Length: "the 'treat-as-withdraw' approach MUST be
            // used ... and the Total Attribute Length MUST be relied upon to
            // enable the beginning of the NLRI field to be located." If the
            // attribute cut short is MP_REACH or MP_UNREACH, its NLRI cannot
            // be treated as withdrawn: RFC 7606 §3 (f) falls back to a
            // session reset.
            let mp = matches!(
                input.get(1),
                Some(&attr::MP_REACH_NLRI) | Some(&attr::MP_UNREACH_NLRI)
            );
            let action = if mp {
                Action::SessionReset
            } else {
                Action::TreatAsWithdraw
            };
            let error = AttrError::new(
                Error::AttributeLengthError {
                    attribute: input.to_vec(),
                },
                action,
            );
            return (
                attrs,
                Some(Box::new(TrailingAttributes {
                    raw: input.to_vec(),
                    error,
                })),
            );
        };
        let slot = usize::from(raw.code / 64);
        let bit = 1u64 << (raw.code % 64);
        let decoded = if seen[slot] & bit != 0 {
            // RFC 7606 §3 (c): a repeated MP_REACH or MP_UNREACH → session
            // reset with Malformed Attribute List; "If any other attribute
            // ... appears more than once ... all the occurrences of the
            // attribute other than the first one SHALL be discarded".
            let action = if matches!(raw.code, attr::MP_REACH_NLRI | attr::MP_UNREACH_NLRI) {
                Action::SessionReset
            } else {
                Action::AttributeDiscard
            };
            PathAttribute {
                flags: raw.flags,
                type_code: raw.code,
                value: AttrValue::Malformed(Box::new(attribute::Malformed {
                    raw: raw.value.to_vec(),
                    error: AttrError::new(
                        Error::MalformedAttributeList {
                            reason: "attribute appears more than once",
                        },
                        action,
                    ),
                    family: None,
                })),
            }
        } else {
            PathAttribute::decode(&raw, ctx)
        };
        seen[slot] |= bit;
        attrs.push(decoded);
        input = after;
    }
    (attrs, None)
}

impl Update {
    // Inlined into `Message::decode`, so that the decoded UPDATE is built
    // where the caller keeps it: returned through the stack, its copies
    // were the most expensive instructions of decoding (loads of
    // just-stored fields) in the profile of the codec benchmark.
    #[inline]
    pub(crate) fn decode(body: &[u8], ctx: &Context) -> Result<Update, Error> {
        let too_large = Error::MalformedAttributeList {
            reason: "Withdrawn Routes Length or Total Attribute Length exceeds the message",
        };
        // RFC 4271 §6.3: "If the Withdrawn Routes Length or Total Attribute
        // Length is too large (i.e., if Withdrawn Routes Length + Total
        // Attribute Length + 23 exceeds the message Length), then the Error
        // Subcode MUST be set to Malformed Attribute List."
        let (rest, wlen) = wire::u16(body).map_err(|_| too_large.clone())?;
        let (rest, withdrawn) =
            wire::take(usize::from(wlen))(rest).map_err(|_| too_large.clone())?;
        let (rest, alen) = wire::u16(rest).map_err(|_| too_large.clone())?;
        let (nlri_field, attr_field) =
            wire::take(usize::from(alen))(rest).map_err(|_| too_large)?;

        let add_path = ctx.add_path.contains(Family::IPV4_UNICAST);
        // RFC 7606 §5.3: a syntactically incorrect Withdrawn Routes or NLRI
        // field → "session reset" (subcode per RFC 4271 §6.3).
        let field = |bytes: &[u8]| {
            nlri::decode_list(bytes, Afi::IPV4, add_path)
                .map_err(|e| Error::InvalidNetworkField { reason: e.reason() })
        };
        let withdrawn = field(withdrawn)?;
        let nlri = field(nlri_field)?;
        let (attributes, trailing) = decode_attributes(attr_field, ctx);
        Ok(Update {
            withdrawn,
            attributes,
            trailing,
            nlri,
        })
    }

    pub(crate) fn encode_body(&self, ctx: &Context, out: &mut Vec<u8>) {
        let add_path = ctx.add_path.contains(Family::IPV4_UNICAST);
        let at = wire::length_placeholder(out);
        nlri::encode_list(&self.withdrawn, add_path, out);
        wire::fill_length(out, at);
        let at = wire::length_placeholder(out);
        for a in &self.attributes {
            a.encode(ctx, out);
        }
        if let Some(t) = &self.trailing {
            out.extend_from_slice(&t.raw);
        }
        wire::fill_length(out, at);
        nlri::encode_list(&self.nlri, add_path, out);
    }

    /// The End-of-RIB marker (RFC 4724 §2): an empty UPDATE for IPv4
    /// unicast; an UPDATE with only an empty MP_UNREACH_NLRI otherwise.
    pub fn end_of_rib(family: Family) -> Update {
        if family == Family::IPV4_UNICAST {
            return Update::default();
        }
        Update {
            attributes: vec![PathAttribute::new(AttrValue::MpUnreach(MpUnreach::new(
                family,
                Vec::new(),
            )))],
            ..Update::default()
        }
    }

    /// Which family this UPDATE marks the End-of-RIB of, if it is one.
    pub fn end_of_rib_family(&self) -> Option<Family> {
        if !self.withdrawn.is_empty() || !self.nlri.is_empty() || self.trailing.is_some() {
            return None;
        }
        match self.attributes.as_slice() {
            [] => Some(Family::IPV4_UNICAST),
            [a] => match &a.value {
                AttrValue::MpUnreach(m) if m.withdrawn.is_empty() => Some(m.family),
                _ => None,
            },
            _ => None,
        }
    }

    fn find<'a, T>(&'a self, f: impl Fn(&'a AttrValue) -> Option<T>) -> Option<T> {
        self.attributes.iter().find_map(|a| f(&a.value))
    }

    /// The ORIGIN value (RFC 4271 §5.1.1), if present (a malformed one counts as absent).
    pub fn origin(&self) -> Option<attribute::Origin> {
        self.find(|v| match v {
            AttrValue::Origin(o) => Some(*o),
            _ => None,
        })
    }
    /// The AS_PATH (RFC 4271 §5.1.2), if present (a malformed one counts as absent).
    pub fn as_path(&self) -> Option<&AsPath> {
        self.find(|v| match v {
            AttrValue::AsPath(p) => Some(p),
            _ => None,
        })
    }
    /// The AS4_PATH (RFC 6793 §3), if present (a malformed one counts as absent).
    pub fn as4_path(&self) -> Option<&AsPath> {
        self.find(|v| match v {
            AttrValue::As4Path(p) => Some(p),
            _ => None,
        })
    }
    /// The NEXT_HOP (RFC 4271 §5.1.3), if present (a malformed one counts as absent).
    pub fn next_hop(&self) -> Option<Ipv4Addr> {
        self.find(|v| match v {
            AttrValue::NextHop(a) => Some(*a),
            _ => None,
        })
    }
    /// The MULTI_EXIT_DISC (RFC 4271 §5.1.4), if present (a malformed one counts as absent).
    pub fn med(&self) -> Option<u32> {
        self.find(|v| match v {
            AttrValue::MultiExitDisc(m) => Some(*m),
            _ => None,
        })
    }
    /// The LOCAL_PREF (RFC 4271 §5.1.5), if present (a malformed one counts as absent).
    pub fn local_pref(&self) -> Option<u32> {
        self.find(|v| match v {
            AttrValue::LocalPref(m) => Some(*m),
            _ => None,
        })
    }
    /// The COMMUNITIES (RFC 1997); none if absent or malformed.
    pub fn communities(&self) -> &[Community] {
        self.find(|v| match v {
            AttrValue::Communities(c) => Some(c.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
    }
    /// The LARGE_COMMUNITY values (RFC 8092); none if absent or malformed.
    pub fn large_communities(&self) -> &[LargeCommunity] {
        self.find(|v| match v {
            AttrValue::LargeCommunities(c) => Some(c.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
    }
    /// The EXTENDED COMMUNITIES (RFC 4360); none if absent or malformed.
    pub fn extended_communities(&self) -> &[ExtCommunity] {
        self.find(|v| match v {
            AttrValue::ExtendedCommunities(c) => Some(c.as_slice()),
            _ => None,
        })
        .unwrap_or(&[])
    }
    /// The MP_REACH_NLRI (RFC 4760 §3), if present (a malformed one counts as absent).
    pub fn mp_reach(&self) -> Option<&MpReach> {
        self.find(|v| match v {
            AttrValue::MpReach(m) => Some(m),
            _ => None,
        })
    }
    /// The MP_UNREACH_NLRI (RFC 4760 §4), if present (a malformed one counts as absent).
    pub fn mp_unreach(&self) -> Option<&MpUnreach> {
        self.find(|v| match v {
            AttrValue::MpUnreach(m) => Some(m),
            _ => None,
        })
    }

    /// Every announced prefix, from the NLRI field and MP_REACH_NLRI.
    pub fn announced(&self) -> impl Iterator<Item = &Nlri> {
        self.nlri
            .iter()
            .chain(self.mp_reach().map(|m| m.nlri.prefixes()).unwrap_or(&[]))
    }

    /// Every withdrawn prefix, from Withdrawn Routes and MP_UNREACH_NLRI.
    pub fn withdrawals(&self) -> impl Iterator<Item = &Nlri> {
        self.withdrawn.iter().chain(
            self.mp_unreach()
                .map(|m| m.withdrawn.prefixes())
                .unwrap_or(&[]),
        )
    }

    /// RFC 7606 validation: the strongest approach over every problem in
    /// this UPDATE, given what the session negotiated.
    pub fn validate(&self, ctx: &Context) -> Verdict {
        let mut v = Verdict::default();
        for a in &self.attributes {
            if let AttrValue::Malformed(m) = &a.value {
                v.add(m.error.clone());
                if m.error.action == Action::AfiSafiDisable {
                    v.disabled_families.extend(m.family);
                }
            }
        }
        if let Some(t) = &self.trailing {
            v.add(t.error.clone());
        }
        let has_nlri = !self.nlri.is_empty() || self.mp_reach().is_some_and(|m| !m.nlri.is_empty());
        let present = |code: u8| self.attributes.iter().any(|a| a.type_code == code);
        if has_nlri {
            // RFC 7606 §3 (d): "If any of the well-known mandatory
            // attributes are not present in an UPDATE message, then
            // 'treat-as-withdraw' MUST be used." NEXT_HOP is needed only
            // for the NLRI field (RFC 4760 §3, RFC 7606 §5.2).
            let mut required = vec![attr::ORIGIN, attr::AS_PATH];
            if !self.nlri.is_empty() {
                required.push(attr::NEXT_HOP);
            }
            for code in required {
                if !present(code) {
                    v.add(AttrError::new(
                        Error::MissingWellKnownAttribute { type_code: code },
                        Action::TreatAsWithdraw,
                    ));
                }
            }
        }
        if !self.nlri.is_empty()
            && let Some(nh) = self.next_hop()
        {
            // RFC 4271 §6.3: a NEXT_HOP that is not a valid host address is
            // semantically incorrect; RFC 7606 §7.3: treat-as-withdraw.
            if nh.is_unspecified() || nh.is_broadcast() || nh.is_multicast() {
                let a = self
                    .attributes
                    .iter()
                    .find(|a| a.type_code == attr::NEXT_HOP);
                let mut data = Vec::new();
                if let Some(a) = a {
                    a.encode(ctx, &mut data);
                }
                v.add(AttrError::new(
                    Error::InvalidNextHopAttribute { attribute: data },
                    Action::TreatAsWithdraw,
                ));
            }
        }
        // RFC 7607 §2: AS 0 in AS_PATH is malformed (treat-as-withdraw);
        // in AGGREGATOR, AS4_PATH or AS4_AGGREGATOR it is discarded.
        if self.as_path().is_some_and(|p| p.asns().any(|a| a == 0)) {
            v.add(AttrError::new(
                Error::MalformedAsPath {
                    reason: "AS_PATH contains AS 0 (RFC 7607)",
                },
                Action::TreatAsWithdraw,
            ));
        }
        for a in &self.attributes {
            let discard = |reason: &'static str| {
                let mut data = Vec::new();
                a.encode(ctx, &mut data);
                AttrError::new(
                    Error::OptionalAttributeError {
                        attribute: data,
                        reason,
                    },
                    Action::AttributeDiscard,
                )
            };
            match &a.value {
                AttrValue::Aggregator(g) | AttrValue::As4Aggregator(g) if g.asn == 0 => {
                    v.add(discard("aggregator AS 0 (RFC 7607)"));
                }
                AttrValue::As4Path(p) if p.asns().any(|a| a == 0) => {
                    v.add(discard("AS4_PATH contains AS 0 (RFC 7607)"))
                }
                // RFC 6793 §3: between two NEW speakers AS4_PATH and
                // AS4_AGGREGATOR are not sent; received, they are ignored.
                AttrValue::As4Path(_) | AttrValue::As4Aggregator(_) if ctx.four_octet_as => {
                    v.add(discard(
                        "AS4 attribute from a 4-octet AS speaker (RFC 6793 §3)",
                    ));
                }
                // RFC 7606 §7.5, §7.9, §7.10: LOCAL_PREF, ORIGINATOR_ID and
                // CLUSTER_LIST from an external peer SHALL be discarded.
                AttrValue::LocalPref(_) if ctx.external == Some(true) => {
                    v.add(discard("LOCAL_PREF from an external peer"))
                }
                AttrValue::OriginatorId(_) if ctx.external == Some(true) => {
                    v.add(discard("ORIGINATOR_ID from an external peer"))
                }
                AttrValue::ClusterList(_) if ctx.external == Some(true) => {
                    v.add(discard("CLUSTER_LIST from an external peer"))
                }
                _ => {}
            }
        }
        v.disabled_families.sort();
        v.disabled_families.dedup();
        v
    }
}

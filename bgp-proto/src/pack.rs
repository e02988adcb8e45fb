//! Packing routes into as few UPDATE messages as the negotiated maximum
//! size allows (RFC 4271 §4.3, §9.2; RFC 8654 §4), never exceeding it.
//!
//! Announcements that share path attributes go out together: IPv4 unicast
//! in the NLRI field with a NEXT_HOP attribute, every other family (and
//! IPv4 over an IPv6 next hop, RFC 8950) in MP_REACH_NLRI, which is put
//! first (RFC 7606 §5.1: "the MP_REACH_NLRI or MP_UNREACH_NLRI attribute (if
//! present) SHALL be encoded as the very first path attribute"). Withdrawals
//! of IPv4 go in the Withdrawn Routes field, others in MP_UNREACH_NLRI; both
//! may share one message.

use std::net::IpAddr;

use crate::attribute::{AttrValue, PathAttribute};
use crate::consts::{HEADER_LEN, attr};
use crate::context::{Context, Family};
use crate::mp::{MpReach, MpUnreach};
use crate::nlri::Nlri;
use crate::update::Update;

/// Header + Withdrawn Routes Length + Total Path Attribute Length.
const UPDATE_OVERHEAD: usize = HEADER_LEN + 2 + 2;

fn attr_header(value_len: usize) -> usize {
    if value_len > 255 { 4 } else { 3 }
}

fn encoded_len(attrs: &[PathAttribute], ctx: &Context) -> usize {
    let mut buf = Vec::with_capacity(64);
    for a in attrs {
        a.encode(ctx, &mut buf);
    }
    buf.len()
}

/// Greedily cuts `prefixes` into runs whose wire size fits `room(bytes)`.
/// `room` says whether a run of that many NLRI octets still fits.
fn runs(prefixes: &[Nlri], add_path: bool, fits: impl Fn(usize) -> bool) -> Vec<&[Nlri]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = 0;
    for (i, n) in prefixes.iter().enumerate() {
        let len = n.wire_len(add_path);
        if i > start && !fits(bytes + len) {
            out.push(&prefixes[start..i]);
            start = i;
            bytes = 0;
        }
        bytes += len;
    }
    if start < prefixes.len() {
        out.push(&prefixes[start..]);
    }
    out
}

/// Announces `prefixes` of `family` with `attributes` (ORIGIN, AS_PATH,
/// communities, … — without NEXT_HOP or MP attributes) and `next_hop` (one
/// address, or an IPv6 global + link-local pair). Returns the UPDATEs, each
/// at most `ctx.max_message_len` octets when encoded in `ctx`.
///
/// Panics never; if even one prefix cannot fit beside the attributes, that
/// prefix is skipped and reported in the second return value.
pub fn announcements(
    ctx: &Context,
    family: Family,
    attributes: &[PathAttribute],
    next_hop: &[IpAddr],
    prefixes: &[Nlri],
) -> (Vec<Update>, Vec<Nlri>) {
    let add_path = ctx.add_path.contains(family);
    let (attrs, ipv4_field) = beside_nlri(family, attributes, next_hop);
    let mut updates = Vec::new();
    let mut too_big = Vec::new();
    if ipv4_field {
        let fixed = UPDATE_OVERHEAD + encoded_len(&attrs, ctx);
        let room = ctx.max_message_len.saturating_sub(fixed);
        for run in runs(prefixes, add_path, |b| b <= room) {
            if run.len() == 1 && run[0].wire_len(add_path) > room {
                too_big.push(run[0]);
                continue;
            }
            updates.push(Update {
                attributes: attrs.clone(),
                nlri: run.to_vec(),
                ..Update::default()
            });
        }
    } else {
        let nh_len: usize = next_hop
            .iter()
            .map(|a| if a.is_ipv4() { 4 } else { 16 })
            .sum();
        // AFI (2) + SAFI (1) + NH length (1) + NH + Reserved (1).
        let mp_fixed = 5 + nh_len;
        let fixed = UPDATE_OVERHEAD + encoded_len(&attrs, ctx);
        let fits =
            |b: usize| fixed + attr_header(mp_fixed + b) + mp_fixed + b <= ctx.max_message_len;
        for run in runs(prefixes, add_path, fits) {
            if run.len() == 1 && !fits(run[0].wire_len(add_path)) {
                too_big.push(run[0]);
                continue;
            }
            let mut list = Vec::with_capacity(attrs.len() + 1);
            list.push(PathAttribute::new(AttrValue::MpReach(MpReach::new(
                family,
                next_hop,
                run.to_vec(),
            ))));
            list.extend(attrs.iter().cloned());
            updates.push(Update {
                attributes: list,
                ..Update::default()
            });
        }
    }
    (updates, too_big)
}

/// The attributes an announcement carries beside its routes: `attributes`
/// without NEXT_HOP and the MP attributes, and NEXT_HOP (in type-code
/// order) when the routes go in the IPv4 NLRI field — which the second
/// value says.
fn beside_nlri(
    family: Family,
    attributes: &[PathAttribute],
    next_hop: &[IpAddr],
) -> (Vec<PathAttribute>, bool) {
    let mut attrs: Vec<PathAttribute> = attributes
        .iter()
        .filter(|a| {
            !matches!(
                a.type_code,
                attr::NEXT_HOP | attr::MP_REACH_NLRI | attr::MP_UNREACH_NLRI
            )
        })
        .cloned()
        .collect();
    let ipv4_field = family == Family::IPV4_UNICAST && matches!(next_hop, [IpAddr::V4(_)]);
    if let (true, [IpAddr::V4(nh)]) = (ipv4_field, next_hop) {
        let at = attrs
            .iter()
            .position(|a| a.type_code > attr::NEXT_HOP)
            .unwrap_or(attrs.len());
        attrs.insert(at, PathAttribute::new(AttrValue::NextHop(*nh)));
    }
    (attrs, ipv4_field)
}

/// The UPDATEs [`announcements`] packs, the same octets in the same
/// messages, written straight onto the wire: no list of NLRI is built or
/// copied per message, and each message is allocated once, at the size it
/// will reach (the last one sized by the upper bound of `prefixes`' size
/// hint). A first sync of 100k routes spent most of its encoding in those
/// copies and in growing the messages. `prefixes` is walked once.
pub fn announcement_messages(
    ctx: &Context,
    family: Family,
    attributes: &[PathAttribute],
    next_hop: &[IpAddr],
    prefixes: impl Iterator<Item = Nlri>,
) -> (Vec<Vec<u8>>, Vec<Nlri>) {
    let add_path = ctx.add_path.contains(family);
    let (attrs, ipv4_field) = beside_nlri(family, attributes, next_hop);
    // The message without routes, as the codec writes it. In the IPv4
    // field the routes follow it; in MP_REACH_NLRI, the first attribute
    // (RFC 7606 §5.1), they end that attribute's value and the other
    // attributes follow them.
    let list = if ipv4_field {
        attrs
    } else {
        let reach = PathAttribute::new(AttrValue::MpReach(MpReach::new(
            family,
            next_hop,
            Vec::new(),
        )));
        std::iter::once(reach).chain(attrs).collect()
    };
    let empty = Update {
        attributes: list,
        ..Update::default()
    };
    let Ok(template) = crate::Message::Update(empty).encode(ctx) else {
        // The attributes alone exceed the message size: no route fits.
        return (Vec::new(), prefixes.collect());
    };
    let mut w = if ipv4_field {
        Writer::new(template, None)
    } else {
        // The attribute's flags, type, length (one octet, or two with
        // Extended Length) and fixed value (AFI, SAFI, next hop).
        let at = UPDATE_OVERHEAD;
        let extended = template[at] & crate::consts::attr_flags::EXTENDED_LENGTH != 0;
        let (header, value) = if extended {
            (
                4,
                usize::from(u16::from_be_bytes([template[at + 2], template[at + 3]])),
            )
        } else {
            (3, usize::from(template[at + 2]))
        };
        let split = at + header + value;
        let tail = template[split..].to_vec();
        let mut head = template;
        head.truncate(split);
        Writer::new(head, Some((tail, extended, value)))
    };
    let room = |w: &Writer, bytes: usize| w.len_with(bytes) <= ctx.max_message_len;
    let mut out = Vec::new();
    let mut too_big = Vec::new();
    let mut left = prefixes.size_hint().1.unwrap_or(0);
    for n in prefixes {
        left = left.saturating_sub(1);
        let len = n.wire_len(add_path);
        if !room(&w, w.nlri + len) {
            w.finish(&mut out);
            if !room(&w, len) {
                too_big.push(n);
                continue;
            }
        }
        if w.nlri == 0 {
            // Room for the rest (each the longest NLRI of the family:
            // path identifier, length, whole address), up to the message
            // size.
            let address = if family.afi == crate::Afi::IPV6 {
                16
            } else {
                4
            };
            let most = 4 * usize::from(add_path) + 1 + address;
            let size = w
                .len_with((left + 1).saturating_mul(most))
                .min(ctx.max_message_len);
            w.start(size);
        }
        n.encode(add_path, &mut w.message);
        w.nlri += len;
    }
    w.finish(&mut out);
    (out, too_big)
}

/// One family's announcements under one set of attributes, written a
/// message at a time (see [`announcement_messages`]).
struct Writer {
    /// The message up to its first route.
    head: Vec<u8>,
    /// In MP_REACH_NLRI: the attributes after it, whether its length has
    /// two octets already, and its value's length without routes.
    mp: Option<(Vec<u8>, bool, usize)>,
    /// The message being written, and the octets of routes in it.
    message: Vec<u8>,
    nlri: usize,
}

impl Writer {
    fn new(head: Vec<u8>, mp: Option<(Vec<u8>, bool, usize)>) -> Writer {
        Writer {
            head,
            mp,
            message: Vec::new(),
            nlri: 0,
        }
    }

    /// The message's length with `nlri` octets of routes in it: in
    /// MP_REACH_NLRI, a value over 255 octets takes a two-octet length
    /// (the Extended Length bit, RFC 4271 §4.3), as the codec writes it.
    fn len_with(&self, nlri: usize) -> usize {
        let base = self.head.len() + nlri;
        match &self.mp {
            None => base,
            Some((tail, extended, value)) => {
                base + tail.len() + usize::from(!extended && value + nlri > 255)
            }
        }
    }

    fn start(&mut self, capacity: usize) {
        self.message = Vec::with_capacity(capacity);
        self.message.extend_from_slice(&self.head);
    }

    /// Ends the message being written, if it has a route, into `out`.
    fn finish(&mut self, out: &mut Vec<Vec<u8>>) {
        if self.nlri == 0 {
            return;
        }
        let mut m = std::mem::take(&mut self.message);
        if let Some((tail, _, value)) = &self.mp {
            crate::attribute::fill_value_length(&mut m, UPDATE_OVERHEAD, value + self.nlri);
            m.extend_from_slice(tail);
            // Total Path Attribute Length: everything after its field.
            let attrs = (m.len() - UPDATE_OVERHEAD) as u16;
            m[UPDATE_OVERHEAD - 2..UPDATE_OVERHEAD].copy_from_slice(&attrs.to_be_bytes());
        }
        let total = m.len() as u16;
        m[16..18].copy_from_slice(&total.to_be_bytes());
        out.push(m);
        self.nlri = 0;
    }
}

/// Withdraws `prefixes` (any mix of families): IPv4 unicast in the
/// Withdrawn Routes field, the others in MP_UNREACH_NLRI, one family per
/// MP_UNREACH (RFC 4760 §4) and at most one MP_UNREACH per message (RFC
/// 7606 §3 (c)). IPv4 withdrawals and one other family share messages.
pub fn withdrawals(ctx: &Context, prefixes: &[(Family, Nlri)]) -> Vec<Update> {
    let room = ctx.max_message_len - UPDATE_OVERHEAD;
    let mut v4: Vec<Nlri> = Vec::new();
    let mut others: Vec<(Family, Vec<Nlri>)> = Vec::new();
    for (f, n) in prefixes {
        if *f == Family::IPV4_UNICAST {
            v4.push(*n);
        } else if let Some((_, list)) = others.iter_mut().find(|(g, _)| g == f) {
            list.push(*n);
        } else {
            others.push((*f, vec![*n]));
        }
    }
    let v4_add_path = ctx.add_path.contains(Family::IPV4_UNICAST);
    let mut updates: Vec<Update> = runs(&v4, v4_add_path, |b| b <= room)
        .into_iter()
        .map(|run| Update {
            withdrawn: run.to_vec(),
            ..Update::default()
        })
        .collect();
    for (family, list) in others {
        let add_path = ctx.add_path.contains(family);
        let mp_size = |b: usize| attr_header(3 + b) + 3 + b;
        // First top up the last message if it has no MP_UNREACH yet.
        let mut rest: &[Nlri] = &list;
        if let Some(last) = updates.last_mut().filter(|u| u.attributes.is_empty()) {
            let used: usize = last.withdrawn.iter().map(|n| n.wire_len(v4_add_path)).sum();
            let free = room - used;
            let mut take = 0;
            let mut bytes = 0;
            for n in rest {
                if mp_size(bytes + n.wire_len(add_path)) > free {
                    break;
                }
                bytes += n.wire_len(add_path);
                take += 1;
            }
            if take > 0 {
                last.attributes
                    .push(PathAttribute::new(AttrValue::MpUnreach(MpUnreach::new(
                        family,
                        rest[..take].to_vec(),
                    ))));
                rest = &rest[take..];
            }
        }
        for run in runs(rest, add_path, |b| mp_size(b) <= room) {
            updates.push(Update {
                attributes: vec![PathAttribute::new(AttrValue::MpUnreach(MpUnreach::new(
                    family,
                    run.to_vec(),
                )))],
                ..Update::default()
            });
        }
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aspath::AsPath;
    use crate::attribute::Origin;
    use crate::message::Message;

    fn base() -> Vec<PathAttribute> {
        vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65001]))),
        ]
    }

    fn v4(n: u32) -> Vec<Nlri> {
        (0..n)
            .map(|i| {
                Nlri::new(
                    format!("198.18.{}.{}/32", i / 256, i % 256)
                        .parse()
                        .unwrap(),
                )
            })
            .collect()
    }

    #[test]
    fn ten_thousand_slash_32s_fill_messages() {
        let ctx = Context::default();
        let prefixes = v4(10_000);
        let (updates, skipped) = announcements(
            &ctx,
            Family::IPV4_UNICAST,
            &base(),
            &["192.0.2.2".parse().unwrap()],
            &prefixes,
        );
        assert!(skipped.is_empty());
        // 5 octets per /32: (4096 - 23 - 20 attribute octets) / 5 = 810.
        assert_eq!(updates[0].nlri.len(), 810);
        assert_eq!(updates.len(), 10_000usize.div_ceil(810));
        for u in &updates {
            let bytes = Message::Update(u.clone()).encode(&ctx).unwrap();
            assert!(bytes.len() <= 4096);
        }
        let first = Message::Update(updates[0].clone()).encode(&ctx).unwrap();
        assert!(first.len() > 4090, "messages are filled: {}", first.len());
    }

    #[test]
    fn extended_messages_take_more() {
        let ctx = Context::default().with_extended_messages();
        let (updates, _) = announcements(
            &ctx,
            Family::IPV4_UNICAST,
            &base(),
            &["192.0.2.2".parse().unwrap()],
            &v4(20_000),
        );
        assert_eq!(updates.len(), 2);
    }

    #[test]
    fn ipv6_goes_in_mp_reach_first() {
        let ctx = Context::default();
        let p: Vec<Nlri> = (0..3)
            .map(|i| Nlri::new(format!("2001:db8:{i}::1/128").parse().unwrap()))
            .collect();
        let (updates, _) = announcements(
            &ctx,
            Family::IPV6_UNICAST,
            &base(),
            &["2001:db8::2".parse().unwrap(), "fe80::2".parse().unwrap()],
            &p,
        );
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].attributes[0].type_code, attr::MP_REACH_NLRI);
        let mp = updates[0].mp_reach().unwrap();
        assert_eq!(mp.next_hop.len(), 32);
        assert_eq!(mp.nlri.prefixes(), p.as_slice());
    }

    #[test]
    fn ipv4_with_an_ipv6_next_hop_goes_in_mp_reach_without_next_hop() {
        // RFC 8950 §3: IPv4 NLRI with an IPv6 next hop are carried in
        // MP_REACH_NLRI (AFI 1, SAFI 1); the NEXT_HOP attribute and the
        // UPDATE's own NLRI field stay empty.
        let ctx = Context::default();
        let p = v4(3);
        let (updates, skipped) = announcements(
            &ctx,
            Family::IPV4_UNICAST,
            &base(),
            &["fe80::2".parse().unwrap()],
            &p,
        );
        assert!(skipped.is_empty());
        assert_eq!(updates.len(), 1);
        let u = &updates[0];
        assert!(u.nlri.is_empty());
        assert!(u.attributes.iter().all(|a| a.type_code != attr::NEXT_HOP));
        let mp = u.mp_reach().unwrap();
        assert_eq!(mp.family, Family::IPV4_UNICAST);
        assert_eq!(
            mp.next_hop,
            "fe80::2".parse::<std::net::Ipv6Addr>().unwrap().octets()
        );
        assert_eq!(mp.nlri.prefixes(), p.as_slice());
    }

    #[test]
    fn withdrawals_share_messages() {
        let ctx = Context::default();
        let mut list: Vec<(Family, Nlri)> = v4(3)
            .into_iter()
            .map(|n| (Family::IPV4_UNICAST, n))
            .collect();
        list.push((
            Family::IPV6_UNICAST,
            Nlri::new("2001:db8::1/128".parse().unwrap()),
        ));
        let updates = withdrawals(&ctx, &list);
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].withdrawn.len(), 3);
        assert_eq!(
            updates[0].mp_unreach().unwrap().withdrawn.prefixes().len(),
            1
        );
    }
}

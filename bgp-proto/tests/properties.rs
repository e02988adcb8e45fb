//! Property tests: decode(encode(m)) == m for generated messages, and
//! packing never exceeds the maximum size and never loses or duplicates a
//! prefix.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use bgp_proto::attribute::Aggregator;
use bgp_proto::capability::{ExtendedNextHop, LlgrFamily};
use bgp_proto::community::{Ipv6ExtCommunity, LargeCommunity};
use bgp_proto::consts::attr_flags;
use bgp_proto::pack;
use bgp_proto::{
    AddPathMode, AsPath, AttrValue, Capability, Community, Context, ExtCommunity, Family, GrFamily,
    GracefulRestart, Message, MpReach, MpUnreach, Nlri, Notification, Open, OptParam, Origin,
    PathAttribute, RouteRefresh, Segment, SegmentType, Update,
};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use proptest::collection::vec;
use proptest::prelude::*;

fn ctx_strategy() -> impl Strategy<Value = Context> {
    (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()).prop_map(
        |(four, ap4, ap6, ext)| {
            let mut c = if four {
                Context::default()
            } else {
                Context::two_octet_as()
            };
            if ap4 {
                c = c.with_add_path(Family::IPV4_UNICAST);
            }
            if ap6 {
                c = c.with_add_path(Family::IPV6_UNICAST);
            }
            if ext {
                c = c.with_extended_messages();
            }
            c
        },
    )
}

fn v4_prefix() -> impl Strategy<Value = IpNet> {
    (any::<u32>(), 0u8..=32)
        .prop_map(|(a, l)| IpNet::V4(Ipv4Net::new(Ipv4Addr::from(a), l).unwrap()))
}

fn v6_prefix() -> impl Strategy<Value = IpNet> {
    (any::<u128>(), 0u8..=128)
        .prop_map(|(a, l)| IpNet::V6(Ipv6Net::new(Ipv6Addr::from(a), l).unwrap()))
}

/// NLRI as they come back from the wire: only the octets the length
/// covers survive, so the generator clears the rest.
fn wire_prefix(p: IpNet) -> IpNet {
    let octets = usize::from(p.prefix_len()).div_ceil(8);
    match p {
        IpNet::V4(n) => {
            let mut b = n.addr().octets();
            b[octets..].fill(0);
            IpNet::V4(Ipv4Net::new(Ipv4Addr::from(b), n.prefix_len()).unwrap())
        }
        IpNet::V6(n) => {
            let mut b = n.addr().octets();
            b[octets..].fill(0);
            IpNet::V6(Ipv6Net::new(Ipv6Addr::from(b), n.prefix_len()).unwrap())
        }
    }
}

fn nlri_list(v6: bool, add_path: bool, max: usize) -> BoxedStrategy<Vec<Nlri>> {
    let p = if v6 {
        v6_prefix().boxed()
    } else {
        v4_prefix().boxed()
    };
    vec((p, any::<u32>()), 0..max)
        .prop_map(move |list| {
            list.into_iter()
                .map(|(p, id)| Nlri {
                    path_id: add_path.then_some(id),
                    prefix: wire_prefix(p),
                })
                .collect()
        })
        .boxed()
}

fn as_path(four: bool) -> impl Strategy<Value = AsPath> {
    let asn = if four {
        any::<u32>().boxed()
    } else {
        any::<u16>().prop_map(u32::from).boxed()
    };
    vec((1u8..=4, vec(asn, 1..6)), 0..4).prop_map(|segs| AsPath {
        segments: segs
            .into_iter()
            .map(|(k, asns)| Segment {
                kind: match k {
                    1 => SegmentType::Set,
                    2 => SegmentType::Sequence,
                    3 => SegmentType::ConfedSequence,
                    _ => SegmentType::ConfedSet,
                },
                asns,
            })
            .collect(),
    })
}

fn attr_value(ctx: Context) -> BoxedStrategy<AttrValue> {
    let four = ctx.four_octet_as;
    let agg_asn = if four {
        any::<u32>().boxed()
    } else {
        any::<u16>().prop_map(u32::from).boxed()
    };
    prop_oneof![
        prop_oneof![
            Just(Origin::Igp),
            Just(Origin::Egp),
            Just(Origin::Incomplete)
        ]
        .prop_map(AttrValue::Origin),
        as_path(four).prop_map(AttrValue::AsPath),
        any::<u32>().prop_map(|a| AttrValue::NextHop(Ipv4Addr::from(a))),
        any::<u32>().prop_map(AttrValue::MultiExitDisc),
        any::<u32>().prop_map(AttrValue::LocalPref),
        Just(AttrValue::AtomicAggregate),
        (agg_asn, any::<u32>()).prop_map(|(asn, a)| AttrValue::Aggregator(Aggregator {
            asn,
            address: Ipv4Addr::from(a)
        })),
        vec(any::<u32>().prop_map(Community), 1..80).prop_map(AttrValue::Communities),
        any::<u32>().prop_map(|a| AttrValue::OriginatorId(Ipv4Addr::from(a))),
        vec(any::<u32>().prop_map(Ipv4Addr::from), 1..5).prop_map(AttrValue::ClusterList),
        vec(any::<[u8; 8]>().prop_map(ExtCommunity), 1..5).prop_map(AttrValue::ExtendedCommunities),
        as_path(true).prop_map(AttrValue::As4Path),
        (any::<u32>(), any::<u32>()).prop_map(|(asn, a)| AttrValue::As4Aggregator(Aggregator {
            asn,
            address: Ipv4Addr::from(a)
        })),
        vec(any::<[u8; 20]>().prop_map(Ipv6ExtCommunity), 1..3)
            .prop_map(AttrValue::Ipv6ExtendedCommunities),
        vec(
            (any::<u32>(), any::<u32>(), any::<u32>()).prop_map(|(g, a, b)| LargeCommunity {
                global: g,
                local1: a,
                local2: b
            }),
            1..30
        )
        .prop_map(AttrValue::LargeCommunities),
        any::<u32>().prop_map(AttrValue::Otc),
    ]
    .boxed()
}

fn mp_attr(ctx: Context) -> BoxedStrategy<AttrValue> {
    let v6 = nlri_list(true, ctx.add_path.contains(Family::IPV6_UNICAST), 20);
    let v4 = nlri_list(false, ctx.add_path.contains(Family::IPV4_UNICAST), 20);
    prop_oneof![
        (
            v6.clone(),
            any::<u128>(),
            proptest::option::of(any::<u128>())
        )
            .prop_map(|(n, g, ll)| {
                let mut nh = vec![IpAddr::V6(Ipv6Addr::from(g))];
                nh.extend(ll.map(|l| IpAddr::V6(Ipv6Addr::from(l))));
                AttrValue::MpReach(MpReach::new(Family::IPV6_UNICAST, &nh, n))
            }),
        // RFC 8950: IPv4 NLRI over an IPv6 next hop.
        (v4, any::<u128>()).prop_map(|(n, g)| AttrValue::MpReach(MpReach::new(
            Family::IPV4_UNICAST,
            &[IpAddr::V6(Ipv6Addr::from(g))],
            n
        ))),
        v6.prop_map(|n| AttrValue::MpUnreach(MpUnreach::new(Family::IPV6_UNICAST, n))),
        // An opaque family (VPNv4) with arbitrary NLRI bytes.
        vec(any::<u8>(), 0..40).prop_map(|b| AttrValue::MpUnreach(MpUnreach {
            family: Family::new(bgp_proto::Afi(1), bgp_proto::Safi(128)),
            withdrawn: bgp_proto::MpNlri::Opaque(b)
        })),
    ]
    .boxed()
}

/// The encoder sets Extended Length when a value needs it; so does the
/// generator, so that what is generated is what comes back.
fn with_needed_ext_len(mut a: PathAttribute, ctx: &Context) -> PathAttribute {
    let mut buf = Vec::new();
    a.encode(ctx, &mut buf);
    if buf.len() > 255 + 3 {
        a.flags |= attr_flags::EXTENDED_LENGTH;
    }
    a
}

fn attribute(ctx: Context) -> BoxedStrategy<PathAttribute> {
    prop_oneof![
        8 => (attr_value(ctx), any::<bool>(), any::<bool>()).prop_map(|(v, ext, partial)| {
            let mut a = PathAttribute::new(v);
            if ext {
                a.flags |= attr_flags::EXTENDED_LENGTH;
            }
            if partial && a.flags & attr_flags::OPTIONAL != 0 && a.flags & attr_flags::TRANSITIVE != 0 {
                a.flags |= attr_flags::PARTIAL;
            }
            a
        }),
        1 => mp_attr(ctx).prop_map(PathAttribute::new),
        1 => (200u8..=250, vec(any::<u8>(), 0..300), any::<bool>()).prop_map(|(code, value, transitive)| PathAttribute {
            flags: attr_flags::OPTIONAL | if transitive { attr_flags::TRANSITIVE } else { 0 },
            type_code: code,
            value: AttrValue::Unknown(value),
        }),
    ]
    .prop_map(move |a| with_needed_ext_len(a, &ctx))
    .boxed()
}

/// An attribute list with each type at most once (a repeat is kept as a
/// discarded copy, which is lossless too but not equal to the typed value).
fn attributes(ctx: Context) -> impl Strategy<Value = Vec<PathAttribute>> {
    vec(attribute(ctx), 0..10).prop_map(|list| {
        let mut seen = std::collections::BTreeSet::new();
        list.into_iter()
            .filter(|a| seen.insert(a.type_code))
            .collect()
    })
}

fn update(ctx: Context) -> impl Strategy<Value = Update> {
    let ap = ctx.add_path.contains(Family::IPV4_UNICAST);
    (
        nlri_list(false, ap, 30),
        attributes(ctx),
        nlri_list(false, ap, 30),
    )
        .prop_map(|(withdrawn, attributes, nlri)| Update {
            withdrawn,
            attributes,
            trailing: None,
            nlri,
        })
}

fn capability() -> impl Strategy<Value = Capability> {
    let family =
        (1u16..=2, 1u8..=2).prop_map(|(a, s)| Family::new(bgp_proto::Afi(a), bgp_proto::Safi(s)));
    prop_oneof![
        family.clone().prop_map(Capability::Multiprotocol),
        Just(Capability::RouteRefresh),
        Just(Capability::ExtendedMessage),
        Just(Capability::EnhancedRouteRefresh),
        any::<u8>().prop_map(Capability::Role),
        any::<u32>().prop_map(Capability::FourOctetAs),
        vec((any::<u16>(), any::<u16>(), any::<u16>()), 0..4).prop_map(|l| {
            Capability::ExtendedNextHop(
                l.into_iter()
                    .map(|(a, b, c)| ExtendedNextHop {
                        nlri_afi: a,
                        nlri_safi: b,
                        next_hop_afi: c,
                    })
                    .collect(),
            )
        }),
        (
            0u8..16,
            0u16..4096,
            vec((family.clone(), any::<u8>()), 0..4)
        )
            .prop_map(
                |(flags, t, f)| Capability::GracefulRestart(GracefulRestart {
                    flags,
                    restart_time: t,
                    families: f
                        .into_iter()
                        .map(|(family, flags)| GrFamily { family, flags })
                        .collect()
                })
            ),
        vec(
            (
                family.clone(),
                prop_oneof![
                    Just(AddPathMode::Receive),
                    Just(AddPathMode::Send),
                    Just(AddPathMode::Both)
                ]
            ),
            0..4
        )
        .prop_map(Capability::AddPath),
        vec((family, any::<u8>(), 0u32..(1 << 24)), 0..4).prop_map(|l| {
            Capability::LongLivedGracefulRestart(
                l.into_iter()
                    .map(|(family, flags, stale_time)| LlgrFamily {
                        family,
                        flags,
                        stale_time,
                    })
                    .collect(),
            )
        }),
        (vec(any::<u8>(), 0..30), vec(any::<u8>(), 0..30)).prop_map(|(h, d)| Capability::Fqdn {
            hostname: h,
            domain: d
        }),
        (100u8..=200, vec(any::<u8>(), 0..20))
            .prop_map(|(code, value)| Capability::Unknown { code, value }),
    ]
}

fn open() -> impl Strategy<Value = Open> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        vec(
            prop_oneof![
                vec(capability(), 0..8).prop_map(OptParam::Capabilities),
                (3u8..=254, vec(any::<u8>(), 0..10)).prop_map(|(t, v)| OptParam::Unknown {
                    param_type: t,
                    value: v
                })
            ],
            0..4,
        ),
        any::<bool>(),
    )
        .prop_map(|(my_as, hold_time, id, params, extended)| {
            let mut o = Open {
                version: 4,
                my_as,
                hold_time,
                bgp_id: Ipv4Addr::from(id),
                params,
                extended_params: None,
            };
            // The classic format only when it fits (RFC 9072 §2); the
            // extended one may always be used. An empty parameter list has
            // no format to choose.
            let body = Message::Open(o.clone())
                .encode(&Context::default().with_extended_messages())
                .unwrap()
                .len()
                - 29;
            if !o.params.is_empty()
                && (extended || body > 255 || o.params.iter().any(|p| param_len(p) > 255))
            {
                o.extended_params = Some(255);
            }
            o
        })
}

fn param_len(p: &OptParam) -> usize {
    match p {
        OptParam::Capabilities(c) => {
            let mut v = Vec::new();
            for cap in c {
                cap.encode(&mut v);
            }
            v.len()
        }
        OptParam::Unknown { value, .. } => value.len(),
    }
}

fn message(ctx: Context) -> impl Strategy<Value = Message> {
    prop_oneof![
        3 => update(ctx).prop_map(Message::Update),
        1 => open().prop_map(Message::Open),
        1 => (any::<u8>(), any::<u8>(), vec(any::<u8>(), 0..50)).prop_map(|(c, s, d)| Message::Notification(Notification::new(c, s, d))),
        1 => Just(Message::Keepalive),
        1 => (any::<u16>(), 0u8..=2, any::<u8>()).prop_map(|(a, st, s)| Message::RouteRefresh(RouteRefresh::new(Family::new(bgp_proto::Afi(a), bgp_proto::Safi(s)), st))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn decode_of_encode_is_identity((ctx, m) in ctx_strategy().prop_flat_map(|c| (Just(c), message(c)))) {
        // Messages over the negotiated size are refused by the encoder; the
        // packer's property below covers that they are never produced.
        if let Ok(bytes) = m.encode(&ctx) {
            let back = Message::decode(&bytes, &ctx).map_err(|e| TestCaseError::fail(format!("{e}: {}", bgp_proto::hex::encode(&bytes))))?;
            prop_assert_eq!(&back, &m);
            prop_assert_eq!(back.encode(&ctx).unwrap(), bytes);
        }
    }

    #[test]
    fn packing_fits_and_loses_nothing(
        ctx in ctx_strategy(),
        v4 in nlri_list(false, false, 3000),
        v6 in nlri_list(true, false, 1500),
        communities in vec(any::<u32>(), 0..200),
        withdraw_v4 in nlri_list(false, false, 2000),
        withdraw_v6 in nlri_list(true, false, 2000),
    ) {
        let fix = |mut l: Vec<Nlri>, f: Family| { if ctx.add_path.contains(f) { for n in &mut l { n.path_id = Some(1); } } l };
        let (v4, v6) = (fix(v4, Family::IPV4_UNICAST), fix(v6, Family::IPV6_UNICAST));
        let (withdraw_v4, withdraw_v6) = (fix(withdraw_v4, Family::IPV4_UNICAST), fix(withdraw_v6, Family::IPV6_UNICAST));
        let mut attrs = vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65001]))),
        ];
        if !communities.is_empty() {
            attrs.push(PathAttribute::new(AttrValue::Communities(communities.into_iter().map(Community).collect())));
        }
        let mut announced = Vec::new();
        let mut withdrawn = Vec::new();
        let mut messages = Vec::new();
        let (u4, skipped4) = pack::announcements(&ctx, Family::IPV4_UNICAST, &attrs, &["192.0.2.2".parse().unwrap()], &v4);
        let (u6, skipped6) = pack::announcements(&ctx, Family::IPV6_UNICAST, &attrs, &["2001:db8::2".parse().unwrap(), "fe80::2".parse().unwrap()], &v6);
        prop_assert!(skipped4.is_empty() && skipped6.is_empty());
        let w: Vec<(Family, Nlri)> = withdraw_v4.iter().map(|n| (Family::IPV4_UNICAST, *n)).chain(withdraw_v6.iter().map(|n| (Family::IPV6_UNICAST, *n))).collect();
        let uw = pack::withdrawals(&ctx, &w);
        for u in u4.iter().chain(&u6).chain(&uw) {
            let bytes = Message::Update(u.clone()).encode(&ctx).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(bytes.len() <= ctx.max_message_len);
            let Message::Update(back) = Message::decode(&bytes, &ctx).unwrap() else { unreachable!() };
            prop_assert_eq!(back.validate(&ctx).action, None);
            announced.extend(back.announced().copied());
            withdrawn.extend(back.withdrawals().copied());
            messages.push(bytes.len());
        }
        let mut expected: Vec<Nlri> = v4.iter().chain(&v6).copied().collect();
        expected.sort();
        announced.sort();
        prop_assert_eq!(announced, expected);
        let mut expected_w: Vec<Nlri> = withdraw_v4.iter().chain(&withdraw_v6).copied().collect();
        expected_w.sort();
        withdrawn.sort();
        prop_assert_eq!(withdrawn, expected_w);
        // As few messages as the size allows: every message but the last of
        // each kind is too full to take the next prefix (at most 17 octets
        // with a path identifier, plus a possible attribute-length octet).
        let full = |u: &[Update]| u.iter().rev().skip(1).all(|u| Message::Update(u.clone()).encode(&ctx).unwrap().len() + 22 > ctx.max_message_len);
        prop_assert!(full(&u4) && full(&u6));
    }

    /// The wire packer writes what the structured one packs, octet for
    /// octet: the same messages, the same prefixes skipped — over both
    /// families, both kinds of next hop, ADD-PATH, both message sizes, and
    /// attributes that leave room for all, some or none of the routes.
    #[test]
    fn wire_packing_is_the_structured_packing_encoded(
        ctx in ctx_strategy(),
        next_hop in 0u8..3,
        list in (any::<bool>()).prop_flat_map(|v6| nlri_list(v6, false, 3000).prop_map(move |l| (v6, l))),
        communities in prop_oneof![vec(any::<u32>(), 0..50), vec(any::<u32>(), 1000..1030), vec(any::<u32>(), 16_370..16_390)],
    ) {
        let (list_v6, mut list) = list;
        let family = if list_v6 { Family::IPV6_UNICAST } else { Family::IPV4_UNICAST };
        if ctx.add_path.contains(family) {
            for (i, n) in list.iter_mut().enumerate() { n.path_id = Some(i as u32); }
        }
        let nh: Vec<IpAddr> = match next_hop {
            0 => vec!["192.0.2.2".parse().unwrap()],
            1 => vec!["2001:db8::2".parse().unwrap()],
            _ => vec!["2001:db8::2".parse().unwrap(), "fe80::2".parse().unwrap()],
        };
        let mut attrs = vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65001]))),
        ];
        if !communities.is_empty() {
            attrs.push(PathAttribute::new(AttrValue::Communities(communities.into_iter().map(Community).collect())));
        }
        let (updates, skipped) = pack::announcements(&ctx, family, &attrs, &nh, &list);
        let expected: Vec<Vec<u8>> = updates.into_iter().map(|u| Message::Update(u).encode(&ctx).unwrap()).collect();
        let (messages, too_big) = pack::announcement_messages(&ctx, family, &attrs, &nh, list.iter().copied());
        prop_assert_eq!(too_big, skipped);
        prop_assert_eq!(messages.len(), expected.len());
        for (m, e) in messages.iter().zip(&expected) {
            prop_assert!(m == e, "{} != {}", bgp_proto::hex::encode(m), bgp_proto::hex::encode(e));
        }
    }
}

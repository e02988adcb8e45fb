//! Hex vectors in both directions for every message type, and malformed
//! inputs for each known CVE class, each asserting the exact NOTIFICATION
//! or RFC 7606 approach.

use std::net::Ipv4Addr;

use bgp_proto::consts::notify::cease;
use bgp_proto::{
    Action, AsPath, AttrValue, Capability, Context, Family, GrFamily, GracefulRestart, Message,
    Nlri, Notification, Open, OptParam, Origin, PathAttribute, RouteRefresh, Update, check_header,
    hex,
};

const M: &str = "ffffffffffffffffffffffffffffffff";

fn msg(len_type_body: &str) -> Vec<u8> {
    hex::decode(&format!("{M}{len_type_body}")).unwrap()
}

fn both_ways(ctx: &Context, bytes: &[u8], expected: &Message) {
    let decoded =
        Message::decode(bytes, ctx).unwrap_or_else(|e| panic!("{}: {e}", hex::encode(bytes)));
    assert_eq!(&decoded, expected, "decode");
    assert_eq!(
        hex::encode(&expected.encode(ctx).unwrap()),
        hex::encode(bytes),
        "encode"
    );
}

fn err(ctx: &Context, bytes: &[u8]) -> (u8, u8, Vec<u8>) {
    let e = Message::decode(bytes, ctx).expect_err("expected an error");
    (e.code(), e.subcode(), e.data())
}

fn verdict(ctx: &Context, bytes: &[u8]) -> (Option<Action>, Vec<(u8, u8)>) {
    let Message::Update(u) = Message::decode(bytes, ctx).unwrap() else {
        panic!("not an UPDATE")
    };
    // Whatever the verdict, the message re-encodes as received.
    assert_eq!(Message::Update(u.clone()).encode(ctx).unwrap(), bytes);
    let v = u.validate(ctx);
    (
        v.action,
        v.errors
            .iter()
            .map(|e| (e.error.code(), e.error.subcode()))
            .collect(),
    )
}

#[test]
fn keepalive() {
    both_ways(&Context::default(), &msg("0013 04"), &Message::Keepalive);
}

#[test]
fn open_with_capabilities() {
    let open = Open {
        version: 4,
        my_as: 23456,
        hold_time: 90,
        bgp_id: Ipv4Addr::new(192, 0, 2, 2),
        params: vec![OptParam::Capabilities(vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::Multiprotocol(Family::IPV6_UNICAST),
            Capability::RouteRefresh,
            Capability::EnhancedRouteRefresh,
            Capability::FourOctetAs(4_200_000_001),
            Capability::GracefulRestart(GracefulRestart {
                flags: GracefulRestart::NOTIFICATION,
                restart_time: 120,
                families: vec![GrFamily {
                    family: Family::IPV4_UNICAST,
                    flags: 0x80,
                }],
            }),
            Capability::ExtendedMessage,
            Capability::fqdn("node-1", ""),
        ])],
        extended_params: None,
    };
    let body = "04 5ba0 005a c0000202 2c 02 2a 0104 00010001 0104 00020001 0200 4600 4104 fa56ea01 4006 4078 00010180 0600 4908 066e6f64652d3100";
    let len = 19 + hex::decode(body).unwrap().len();
    both_ways(
        &Context::default(),
        &msg(&format!("{len:04x} 01 {body}")),
        &Message::Open(open.clone()),
    );
    assert_eq!(open.asn(), 4_200_000_001);
    // Open::new builds the same thing: AS_TRANS + the 4-octet capability.
    let built = Open::new(
        4_200_000_001,
        90,
        Ipv4Addr::new(192, 0, 2, 2),
        match &open.params[0] {
            OptParam::Capabilities(c) => c.clone(),
            _ => unreachable!(),
        },
    );
    assert_eq!(built, open);
}

#[test]
fn open_rfc9072_extended_parameters() {
    // Non-Ext OP Len 255, Non-Ext OP Type 255, Extended Opt. Parm. Length,
    // then parameters with 2-octet lengths.
    let body = "04 fde9 00b4 c0000202 ff ff 0009 02 0006 4104 0000fde9";
    let bytes = msg(&format!(
        "{:04x} 01 {body}",
        19 + hex::decode(body).unwrap().len()
    ));
    let Message::Open(o) = Message::decode(&bytes, &Context::default()).unwrap() else {
        panic!()
    };
    assert_eq!(o.extended_params, Some(255));
    assert_eq!(o.four_octet_as(), Some(65001));
    assert_eq!(
        Message::Open(o.clone())
            .encode(&Context::default())
            .unwrap(),
        bytes
    );
    // Our own OPEN switches to the extended format only past 255 octets.
    let many: Vec<Capability> = (0..40)
        .map(|i| Capability::Unknown {
            code: 200,
            value: vec![i; 5],
        })
        .collect();
    let big = Open::new(65001, 90, Ipv4Addr::new(192, 0, 2, 2), many);
    assert_eq!(big.extended_params, Some(255));
    let bytes = Message::Open(big.clone())
        .encode(&Context::default())
        .unwrap();
    assert_eq!(
        Message::decode(&bytes, &Context::default()).unwrap(),
        Message::Open(big)
    );
}

#[test]
fn open_errors() {
    let c = Context::default();
    // Version 3: 2/1 with the largest supported version (4) as data.
    assert_eq!(
        err(&c, &msg("001d 01 03 fde9 00b4 c0000202 00")),
        (2, 1, vec![0, 4])
    );
    // An OPEN ending inside an optional parameter: 2/0 (RFC 4271 §6.2).
    assert_eq!(
        err(&c, &msg("0020 01 04 fde9 00b4 c0000202 03 02 05 41")).0,
        2
    );
    assert_eq!(
        err(&c, &msg("0020 01 04 fde9 00b4 c0000202 03 02 05 41")).1,
        0
    );
    // Opt Parm Len beyond the message.
    assert_eq!(err(&c, &msg("001f 01 04 fde9 00b4 c0000202 09 02 00")).1, 0);
    // RFC 9072 traps: extended length past the end, truncated extended
    // header, and a parameter length past the extended length.
    assert_eq!(
        err(&c, &msg("0021 01 04 fde9 00b4 c0000202 ff ff 0010 02")).1,
        0
    );
    assert_eq!(err(&c, &msg("001f 01 04 fde9 00b4 c0000202 ff ff 00")).1, 0);
    assert_eq!(
        err(&c, &msg("0023 01 04 fde9 00b4 c0000202 ff ff 0003 02 0009")).1,
        0
    );
    // Wrong capability lengths: GR, LLGR, FQDN → 2/0 with the capability.
    let (code, sub, data) = err(&c, &msg("0022 01 04 fde9 00b4 c0000202 05 02 03 4001 00"));
    assert_eq!((code, sub, data), (2, 0, vec![0x40, 1, 0]));
    assert_eq!(
        err(
            &c,
            &msg("0025 01 04 fde9 00b4 c0000202 08 02 06 4704 00010180")
        )
        .1,
        0
    );
    assert_eq!(
        err(
            &c,
            &msg("0025 01 04 fde9 00b4 c0000202 08 02 06 4904 05616263")
        )
        .1,
        0
    );
    // An OPEN shorter than 29 octets is a header error (RFC 4271 §6.1).
    assert_eq!(
        err(&c, &msg("001c 01 04 fde9 00b4 c0000202")),
        (1, 2, vec![0, 0x1c])
    );
}

#[test]
fn update_ipv4_both_ways() {
    let u = Update {
        withdrawn: vec![Nlri::new("203.0.113.0/24".parse().unwrap())],
        attributes: vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![65001]))),
            PathAttribute::new(AttrValue::NextHop(Ipv4Addr::new(192, 0, 2, 2))),
            PathAttribute::new(AttrValue::Communities(vec!["65001:100".parse().unwrap()])),
            PathAttribute::new(AttrValue::LargeCommunities(vec![
                "65001:1:100".parse().unwrap(),
            ])),
        ],
        trailing: None,
        nlri: vec![Nlri::new("198.51.100.10/32".parse().unwrap())],
    };
    let body = "0004 18cb0071 002a 400101 00 40020602010000fde9 400304c0000202 c00804fde90064 c0200c0000fde90000000100000064 20c633640a";
    both_ways(
        &Context::default(),
        &msg(&format!(
            "{:04x} 02 {body}",
            19 + hex::decode(body).unwrap().len()
        )),
        &Message::Update(u),
    );
}

#[test]
fn end_of_rib_both_families() {
    let c = Context::default();
    let v4 = msg("0017 02 0000 0000");
    both_ways(
        &c,
        &v4,
        &Message::Update(Update::end_of_rib(Family::IPV4_UNICAST)),
    );
    let v6 = msg("001d 02 0000 0006 800f03 000201");
    both_ways(
        &c,
        &v6,
        &Message::Update(Update::end_of_rib(Family::IPV6_UNICAST)),
    );
    let Message::Update(u) = Message::decode(&v6, &c).unwrap() else {
        panic!()
    };
    assert_eq!(u.end_of_rib_family(), Some(Family::IPV6_UNICAST));
    // ExaBGP's form, with the Extended Length bit, is recognised too.
    let Message::Update(u) = Message::decode(&msg("001e 02 0000 0007 900f0003000201"), &c).unwrap()
    else {
        panic!()
    };
    assert_eq!(u.end_of_rib_family(), Some(Family::IPV6_UNICAST));
}

#[test]
fn notification_and_shutdown_message() {
    let c = Context::default();
    let n = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "node-1");
    both_ways(
        &c,
        &msg("001c 03 0602 06 6e6f64652d31"),
        &Message::Notification(n.clone()),
    );
    assert_eq!(n.describe(), "Cease / Administrative Shutdown: \"node-1\"");
    both_ways(
        &c,
        &msg("0015 03 0400"),
        &Message::Notification(Notification::new(4, 0, vec![])),
    );
    // Below 21 octets: Bad Message Length.
    assert_eq!(err(&c, &msg("0014 03 06")), (1, 2, vec![0, 0x14]));
}

#[test]
fn route_refresh_and_enhanced() {
    let c = Context::default();
    both_ways(
        &c,
        &msg("0017 05 0001 00 01"),
        &Message::RouteRefresh(RouteRefresh::new(Family::IPV4_UNICAST, 0)),
    );
    both_ways(
        &c,
        &msg("0017 05 0002 01 01"),
        &Message::RouteRefresh(RouteRefresh::new(Family::IPV6_UNICAST, 1)),
    );
    both_ways(
        &c,
        &msg("0017 05 0002 02 01"),
        &Message::RouteRefresh(RouteRefresh::new(Family::IPV6_UNICAST, 2)),
    );
    // RFC 7313 §5: BoRR/EoRR of the wrong length → 7/1 with the message.
    let bad = msg("0018 05 0001 01 01 00");
    assert_eq!(err(&c, &bad), (7, 1, bad.clone()));
}

#[test]
fn header_errors() {
    let c = Context::default();
    // Marker: caught at the first wrong octet.
    assert_eq!(check_header(&[0xff, 0xfe], 4096).unwrap_err().subcode(), 1);
    // A length below 19 is answered from the 18 octets in hand, not waited
    // on: the type octet has not even arrived.
    let short = hex::decode(&format!("{M}0012")).unwrap();
    let e = check_header(&short, 4096).unwrap_err();
    assert_eq!((e.code(), e.subcode(), e.data()), (1, 2, vec![0, 0x12]));
    // Above the maximum: 4097 without extended messages, fine with them.
    let long = hex::decode(&format!("{M}1001 02")).unwrap();
    assert_eq!(
        check_header(&long, 4096).unwrap_err().data(),
        vec![0x10, 0x01]
    );
    assert_eq!(check_header(&long, 65535), Ok(Some(4097)));
    // Unknown type: 1/3 with the type.
    assert_eq!(err(&c, &msg("0013 06")), (1, 3, vec![6]));
    // KEEPALIVE must be 19; UPDATE at least 23.
    assert_eq!(err(&c, &msg("0014 04 00")), (1, 2, vec![0, 0x14]));
    assert_eq!(err(&c, &msg("0016 02 000000")), (1, 2, vec![0, 0x16]));
    // Incomplete header: keep reading.
    assert_eq!(check_header(&hex::decode(M).unwrap(), 4096), Ok(None));
}

/// A minimal well-formed attribute list: ORIGIN, AS_PATH, NEXT_HOP.
const BASE: &str = "400101 00 40020602010000fde9 400304c0000202";

fn update(attrs: &str, nlri: &str) -> Vec<u8> {
    let a = hex::decode(attrs).unwrap();
    let n = hex::decode(nlri).unwrap();
    let body = format!("0000 {:04x} {attrs} {nlri}", a.len());
    msg(&format!("{:04x} 02 {body}", 19 + 4 + a.len() + n.len()))
}

#[test]
fn cve_class_attribute_length_past_the_end() {
    let c = Context::default();
    // COMMUNITIES claims 8 octets, 4 remain before the NLRI: RFC 7606 §4,
    // treat-as-withdraw, and the NLRI is still located.
    let bytes = update(&format!("{BASE} c00808 fde90064"), "20c633640a");
    let Message::Update(u) = Message::decode(&bytes, &c).unwrap() else {
        panic!()
    };
    assert_eq!(u.nlri.len(), 1);
    assert_eq!(
        verdict(&c, &bytes),
        (Some(Action::TreatAsWithdraw), vec![(3, 5)])
    );
    // Fewer octets than an attribute header.
    assert_eq!(
        verdict(&c, &update(&format!("{BASE} c0"), "20c633640a")),
        (Some(Action::TreatAsWithdraw), vec![(3, 5)])
    );
    // Total Attribute Length beyond the message: 3/1, session reset.
    assert_eq!(err(&c, &msg("001a 02 0000 00ff 400100")), (3, 1, vec![]));
    // Withdrawn Routes Length beyond the message.
    assert_eq!(err(&c, &msg("0017 02 0010 0000")), (3, 1, vec![]));
}

#[test]
fn cve_class_zero_length_or_truncated_mp_attributes() {
    let c = Context::default();
    // Zero-length MP_REACH_NLRI: no AFI/SAFI → session reset, 3/9.
    assert_eq!(
        verdict(&c, &update(&format!("{BASE} 800e00"), "")),
        (Some(Action::SessionReset), vec![(3, 9)])
    );
    assert_eq!(
        verdict(&c, &update("800f00", "")),
        (Some(Action::SessionReset), vec![(3, 9)])
    );
    // Truncated next hop / NLRI: the family is disabled (RFC 7606 §7.11).
    let (a, e) = verdict(
        &c,
        &update(&format!("800e08 0002 01 10 20010db8 {BASE}"), ""),
    );
    assert_eq!((a, e), (Some(Action::AfiSafiDisable), vec![(3, 9)]));
    let Message::Update(u) = Message::decode(&update("800f06 0002 01 80 2001", ""), &c).unwrap()
    else {
        panic!()
    };
    assert_eq!(u.validate(&c).disabled_families, vec![Family::IPV6_UNICAST]);
    // An MP_REACH cut off by the Total Attribute Length: session reset.
    assert_eq!(
        verdict(&c, &update("800e20 0002 01 10", "")).0,
        Some(Action::SessionReset)
    );
}

#[test]
fn cve_class_as4_path_before_malformed_as_path() {
    let c = Context::two_octet_as();
    // AS4_PATH first, then an AS_PATH whose segment overruns: the AS_PATH
    // error wins (treat-as-withdraw); nothing merges the two.
    let bytes = update(
        "c0110a 0202 fa56ea01 0000fde9 400101 00 400206 0205 fde9 5ba0 400304c0000202",
        "20c633640a",
    );
    let (action, errors) = verdict(&c, &bytes);
    assert_eq!(action, Some(Action::TreatAsWithdraw));
    assert!(errors.contains(&(3, 11)), "{errors:?}");
}

#[test]
fn cve_class_duplicated_attributes() {
    let c = Context::default();
    // A second ORIGIN is discarded (RFC 7606 §3 (c)).
    let (a, e) = verdict(&c, &update(&format!("{BASE} 400101 02"), "20c633640a"));
    assert_eq!((a, e), (Some(Action::AttributeDiscard), vec![(3, 1)]));
    let Message::Update(u) =
        Message::decode(&update(&format!("{BASE} 400101 02"), "20c633640a"), &c).unwrap()
    else {
        panic!()
    };
    assert_eq!(u.origin(), Some(Origin::Igp), "the first occurrence stands");
    // A second MP_REACH_NLRI: session reset, Malformed Attribute List.
    let mp = "800e0e 0002 01 10 20010db8000000000000000000000001 00";
    let mp = mp.replace("0e 0002", "15 0002");
    let (a, e) = verdict(
        &c,
        &update(&format!("{mp} {mp} 400101 00 40020602010000fde9"), ""),
    );
    assert_eq!(a, Some(Action::SessionReset));
    assert!(e.contains(&(3, 1)));
}

#[test]
fn cve_class_missing_mandatory_attributes() {
    let c = Context::default();
    // NLRI without AS_PATH and NEXT_HOP: treat-as-withdraw, 3/3 each.
    let (a, e) = verdict(&c, &update("400101 00", "20c633640a"));
    assert_eq!(
        (a, e),
        (Some(Action::TreatAsWithdraw), vec![(3, 3), (3, 3)])
    );
    // A withdrawal-only UPDATE needs no attributes.
    let w = msg("001c 02 0005 20c633640a 0000");
    assert_eq!(verdict(&c, &w), (None, vec![]));
}

#[test]
fn invalid_network_field_is_a_reset() {
    let c = Context::default();
    // RFC 7606 §5.3: prefix length 33 in the NLRI field.
    assert_eq!(err(&c, &update(BASE, "21c633640a00")).0, 3);
    assert_eq!(err(&c, &update(BASE, "21c633640a00")).1, 10);
    // A prefix running past the end of the Withdrawn Routes field.
    assert_eq!(err(&c, &msg("0019 02 0002 18c6 0000")), (3, 10, vec![]));
}

#[test]
fn session_type_rules() {
    let ebgp = Context {
        external: Some(true),
        ..Context::default()
    };
    let ibgp = Context {
        external: Some(false),
        ..Context::default()
    };
    let bytes = update(&format!("{BASE} 40050400000064"), "20c633640a");
    assert_eq!(
        verdict(&ebgp, &bytes),
        (Some(Action::AttributeDiscard), vec![(3, 9)])
    );
    assert_eq!(verdict(&ibgp, &bytes), (None, vec![]));
}

#[test]
fn add_path_nlri_in_update() {
    let c = Context::default().with_add_path(Family::IPV4_UNICAST);
    let bytes = update(BASE, "00000007 20c633640a");
    let Message::Update(u) = Message::decode(&bytes, &c).unwrap() else {
        panic!()
    };
    assert_eq!(
        u.nlri,
        vec![Nlri::with_path_id("198.51.100.10/32".parse().unwrap(), 7)]
    );
    assert_eq!(Message::Update(u).encode(&c).unwrap(), bytes);
}

#[test]
fn oversized_messages_are_never_encoded() {
    let c = Context::default();
    let u = Update {
        nlri: (0..1000)
            .map(|i| {
                Nlri::new(
                    format!("198.18.{}.{}/32", i / 256, i % 256)
                        .parse()
                        .unwrap(),
                )
            })
            .collect(),
        ..Update::default()
    };
    assert!(Message::Update(u.clone()).encode(&c).is_err());
    assert!(
        Message::Update(u)
            .encode(&c.with_extended_messages())
            .is_ok()
    );
}

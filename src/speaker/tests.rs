use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::path::Path;
use std::sync::Arc;

use bgp_proto::{Context, Family, Message};
use ipnet::IpNet;

use super::*;

fn config() -> Config {
    crate::config::parse(
        Path::new("t.toml"),
        r#"
[speaker]
asn = 65001
[[peer]]
name = "tor1"
address = "192.0.2.1"
asn = 65000
[[peer]]
name = "rr"
address = "192.0.2.9"
asn = 65001
[source]
kind = "file"
path = "vips.toml"
[[advertisement]]
name = "public"
communities = ["65001:100"]
large_communities = ["65001:1:100"]
local_pref = 200
[[advertisement]]
name = "extra"
peers = ["tor1"]
communities = ["65001:200", "65001:100"]
med = 10
"#,
    )
    .unwrap()
}

fn route(ads: &[&str]) -> Route {
    Route::new(
        ads.iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
            .into(),
        None,
        None,
    )
}

/// A delta's announcements as lists of prefixes by attributes.
fn lists(d: &Delta) -> std::collections::BTreeMap<Arc<RouteAttrs>, Vec<IpNet>> {
    d.announcements()
        .map(|(a, ps)| (a.clone(), ps.copied().collect()))
        .collect()
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

#[test]
fn tables_follow_advertisements_and_peers() {
    let c = config();
    let routes = [
        (net("198.51.100.10/32"), route(&["public"])),
        (net("198.51.100.11/32"), route(&["public", "extra"])),
        (net("198.51.100.12/32"), route(&["extra"])),
    ];
    let t = peer_tables(&c, routes.iter().map(|(p, r)| (p, r)));
    assert_eq!(t["tor1"].len(), 3);
    assert_eq!(t["rr"].len(), 2, "'extra' is for tor1 only");
    let merged = &t["tor1"][&net("198.51.100.11/32")];
    assert_eq!(merged.communities, vec![0xfde9_0064, 0xfde9_00c8]);
    assert_eq!((merged.local_pref, merged.med), (Some(200), Some(10)));
    // Equal attributes are one allocation.
    let a = &t["rr"][&net("198.51.100.10/32")];
    let b = &t["rr"][&net("198.51.100.11/32")];
    assert!(Arc::ptr_eq(a, b));
}

fn table(entries: &[(&str, RouteAttrs)]) -> PeerTable {
    entries
        .iter()
        .map(|(p, a)| (net(p), Arc::new(a.clone())))
        .collect()
}

fn with_community(c: u32) -> RouteAttrs {
    RouteAttrs {
        communities: vec![c],
        ..RouteAttrs::default()
    }
}

/// Announcements are grouped by attributes — whichever allocation holds
/// them, in whatever runs they come — each group's prefixes in order; the
/// whole Adj-RIB-Out (ROUTE-REFRESH) the same.
#[test]
fn announcements_are_grouped_by_attributes() {
    let (a, b) = (with_community(1), with_community(2));
    let shared = Arc::new(a.clone());
    let table: PeerTable = [
        ("198.51.100.1/32", shared.clone()),
        ("198.51.100.2/32", shared.clone()),
        ("198.51.100.3/32", Arc::new(b.clone())),
        // Equal to `a`, another allocation.
        ("198.51.100.4/32", Arc::new(a.clone())),
        ("198.51.100.5/32", shared.clone()),
    ]
    .into_iter()
    .map(|(p, attrs)| (net(p), attrs))
    .collect();
    let nets = |ps: &[&str]| ps.iter().map(|p| net(p)).collect::<Vec<_>>();
    let expected = std::collections::BTreeMap::from([
        (
            Arc::new(a),
            nets(&[
                "198.51.100.1/32",
                "198.51.100.2/32",
                "198.51.100.4/32",
                "198.51.100.5/32",
            ]),
        ),
        (Arc::new(b), nets(&["198.51.100.3/32"])),
    ]);
    let mut rib = AdjRibOut::default();
    let d = rib.diff(&Arc::new(table), &[Family::IPV4_UNICAST]);
    assert_eq!(lists(&d), expected);
    assert_eq!(lists(&rib.full()), expected);
}

#[test]
fn adj_rib_out_diff() {
    let both = [Family::IPV4_UNICAST, Family::IPV6_UNICAST];
    let (a, b) = (with_community(1), with_community(2));
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[
            ("198.51.100.10/32", a.clone()),
            ("2001:db8::10/128", a.clone()),
        ])),
        &both,
    );
    assert_eq!((d.announced(), d.withdraw.len()), (2, 0));
    // Nothing changed: nothing to send.
    assert!(
        rib.diff(
            &Arc::new(table(&[
                ("198.51.100.10/32", a.clone()),
                ("2001:db8::10/128", a.clone())
            ])),
            &both
        )
        .is_empty()
    );
    // An attribute change is one announcement, no withdrawal.
    let d = rib.diff(
        &Arc::new(table(&[
            ("198.51.100.10/32", b.clone()),
            ("2001:db8::10/128", a.clone()),
        ])),
        &both,
    );
    assert_eq!((d.announced(), d.withdraw.len()), (1, 0));
    // A family the session did not negotiate is withdrawn from the RIB.
    let d = rib.diff(
        &Arc::new(table(&[
            ("198.51.100.10/32", b.clone()),
            ("2001:db8::10/128", a.clone()),
        ])),
        &[Family::IPV4_UNICAST],
    );
    assert_eq!(d.withdraw, vec![net("2001:db8::10/128")]);
    let d = rib.withdraw_all();
    assert_eq!(d.withdraw, vec![net("198.51.100.10/32")]);
    assert!(rib.is_empty());
}

fn params(ibgp: bool, ctx: Context) -> EncodeParams {
    EncodeParams {
        local_asn: 4_200_000_001,
        ibgp,
        ctx,
        next_hops: NextHops {
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 2)),
            ipv6: Some("2001:db8::2".parse().unwrap()),
            ipv6_link_local: Some("fe80::2".parse().unwrap()),
            ipv4_via_ipv6: false,
        },
    }
}

fn decode_all(bytes: &[Vec<u8>], ctx: &Context) -> Vec<bgp_proto::Update> {
    bytes
        .iter()
        .map(|b| match Message::decode(b, ctx).unwrap() {
            Message::Update(u) => u,
            m => panic!("{m:?}"),
        })
        .collect()
}

#[test]
fn ebgp_and_ibgp_attributes() {
    let a = RouteAttrs {
        communities: vec![0xfde9_0064],
        large_communities: vec![(65001, 1, 100)],
        local_pref: Some(200),
        ..RouteAttrs::default()
    };
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[
            ("198.51.100.10/32", a.clone()),
            ("2001:db8::10/128", a.clone()),
        ])),
        &[Family::IPV4_UNICAST, Family::IPV6_UNICAST],
    );
    let ctx = Context::default();
    let (msgs, skipped) = encode(&d, &params(false, ctx));
    assert!(skipped.is_empty());
    let ups = decode_all(&msgs, &ctx);
    assert_eq!(ups.len(), 2);
    let v4 = ups.iter().find(|u| !u.nlri.is_empty()).unwrap();
    assert_eq!(v4.as_path().unwrap().to_string(), "4200000001");
    assert_eq!(v4.local_pref(), None, "no LOCAL_PREF to eBGP peers");
    assert_eq!(v4.next_hop(), Some(Ipv4Addr::new(192, 0, 2, 2)));
    assert_eq!(v4.communities()[0].to_string(), "65001:100");
    let v6 = ups.iter().find(|u| u.mp_reach().is_some()).unwrap();
    assert_eq!(
        v6.mp_reach().unwrap().next_hop.len(),
        32,
        "global + link-local"
    );
    // iBGP: empty AS_PATH, LOCAL_PREF.
    let (msgs, _) = encode(&d, &params(true, ctx));
    let ups = decode_all(&msgs, &ctx);
    assert!(
        ups.iter()
            .all(|u| u.as_path().unwrap().segments.is_empty() && u.local_pref() == Some(200))
    );
}

#[test]
fn two_octet_peer_gets_as_trans_and_as4_path() {
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[("198.51.100.10/32", RouteAttrs::default())])),
        &[Family::IPV4_UNICAST],
    );
    let ctx = Context::two_octet_as();
    let (msgs, _) = encode(&d, &params(false, ctx));
    let u = &decode_all(&msgs, &ctx)[0];
    assert_eq!(u.as_path().unwrap().to_string(), "23456");
    assert_eq!(u.as4_path().unwrap().to_string(), "4200000001");
}

#[test]
fn ten_thousand_routes_pack_into_few_messages() {
    let mut rib = AdjRibOut::default();
    let desired: PeerTable = (0..10_000u32)
        .map(|i| {
            (
                net(&format!("198.18.{}.{}/32", i / 256, i % 256)),
                Arc::new(RouteAttrs::default()),
            )
        })
        .collect();
    let d = rib.diff(&Arc::new(desired), &[Family::IPV4_UNICAST]);
    let (msgs, _) = encode(&d, &params(false, Context::default()));
    assert!(msgs.len() <= 13, "{} messages", msgs.len());
    assert!(msgs.iter().all(|m| m.len() <= 4096));
}

#[test]
fn routes_without_a_next_hop_of_their_family_are_not_sent() {
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[("2001:db8::10/128", RouteAttrs::default())])),
        &[Family::IPV6_UNICAST],
    );
    let mut p = params(false, Context::default());
    p.next_hops.ipv6 = None;
    p.next_hops.ipv6_link_local = None;
    let (msgs, skipped) = encode(&d, &p);
    assert!(msgs.is_empty());
    assert_eq!(skipped, vec![net("2001:db8::10/128")]);
}

fn service_config(allow: &str) -> Config {
    crate::config::parse(
        Path::new("t.toml"),
        &format!(
            "[speaker]\nasn = 65001\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
             [source]\nkind = \"file\"\npath = \"vips.toml\"\n\
             [[advertisement]]\nname = \"public\"\ncommunities = [\"65001:100\"]\nlocal_pref = 200\nmed = 50\n{allow}\n"
        ),
    )
    .unwrap()
}

fn asked() -> crate::model::ServiceAttributes {
    crate::model::ServiceAttributes {
        communities: vec![0xfde9_00c8],
        large_communities: vec![(65001, 9, 9)],
        local_pref: Some(300),
        med: Some(7),
        as_path_prepend: Some(2),
        ..Default::default()
    }
}

#[test]
fn service_attributes_merge_where_allowed() {
    // All allowed: communities add up, LOCAL_PREF and MED replace, the
    // prepend is the Service's.
    let c = service_config(
        "allow_service_attributes = [\"communities\", \"large-communities\", \"local-pref\", \"med\", \"as-path-prepend\"]",
    );
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&asked())).unwrap();
    assert_eq!(a.communities, vec![0xfde9_0064, 0xfde9_00c8]);
    assert_eq!(a.large_communities, vec![(65001, 9, 9)]);
    assert_eq!(
        (a.local_pref, a.med, a.as_path_prepend),
        (Some(300), Some(7), 2)
    );
    // Only MED allowed: the rest stays the advertisement's.
    let c = service_config("allow_service_attributes = [\"med\"]");
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&asked())).unwrap();
    assert_eq!(a.communities, vec![0xfde9_0064]);
    assert!(a.large_communities.is_empty());
    assert_eq!(
        (a.local_pref, a.med, a.as_path_prepend),
        (Some(200), Some(7), 0)
    );
    // Nothing allowed (the default).
    let c = service_config("");
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&asked())).unwrap();
    assert_eq!(
        a,
        attrs_for_peer("tor1", c.advertisements.iter(), None).unwrap()
    );
}

#[test]
fn a_route_with_service_attributes_gets_its_own_attributes_in_the_table() {
    let c = service_config("allow_service_attributes = [\"med\"]");
    let plain = route(&["public"]);
    let mut steered = route(&["public"]);
    steered.make_mut().attributes = Some(Arc::new(asked()));
    let p1: IpNet = "198.51.100.1/32".parse().unwrap();
    let p2: IpNet = "198.51.100.2/32".parse().unwrap();
    let tables = peer_tables(&c, [(&p1, &plain), (&p2, &steered)].into_iter());
    assert_eq!(tables["tor1"][&p1].med, Some(50));
    assert_eq!(tables["tor1"][&p2].med, Some(7));
}

/// The traffic policy is part of a route (it decides aggregation), not of
/// its path attributes: a Service switching between Cluster and Local
/// changes the route the stability layer holds, and the wire hears nothing.
#[test]
fn a_change_of_traffic_policy_alone_sends_no_update() {
    let c = config();
    let cluster = route(&["public"]);
    let mut local = route(&["public"]);
    local.make_mut().local_traffic = true;
    assert_ne!(cluster, local);
    let p: IpNet = "198.51.100.1/32".parse().unwrap();
    let fams = [Family::IPV4_UNICAST];
    let mut rib = AdjRibOut::default();
    let before = peer_tables(&c, [(&p, &cluster)].into_iter());
    assert_eq!(
        rib.diff(&Arc::new(before["tor1"].clone()), &fams)
            .announced(),
        1
    );
    let after = peer_tables(&c, [(&p, &local)].into_iter());
    let d = rib.diff(&Arc::new(after["tor1"].clone()), &fams);
    assert!(d.is_empty(), "{d:?}");
}

#[test]
fn an_attribute_change_is_one_announcement_and_no_withdrawal() {
    // RFC 4271 §3.1: the new attributes replace the old ones implicitly.
    let old = RouteAttrs {
        med: Some(50),
        ..RouteAttrs::default()
    };
    let new = RouteAttrs {
        med: Some(7),
        ..RouteAttrs::default()
    };
    let mut rib = AdjRibOut::default();
    let fams = [Family::IPV4_UNICAST];
    rib.diff(&Arc::new(table(&[("198.51.100.10/32", old)])), &fams);
    let d = rib.diff(&Arc::new(table(&[("198.51.100.10/32", new)])), &fams);
    assert!(d.withdraw.is_empty(), "{d:?}");
    assert_eq!(d.announced(), 1, "{d:?}");
}

#[test]
fn the_prepend_lengthens_the_path_to_ebgp_peers_only() {
    let a = RouteAttrs {
        as_path_prepend: 2,
        ..RouteAttrs::default()
    };
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[("198.51.100.10/32", a)])),
        &[Family::IPV4_UNICAST],
    );
    let ctx = Context::default();
    let (msgs, _) = encode(&d, &params(false, ctx));
    let ups = decode_all(&msgs, &ctx);
    assert_eq!(
        ups[0].as_path().unwrap().to_string(),
        "4200000001 4200000001 4200000001"
    );
    // RFC 4271 §9.1.2: an iBGP peer would see its own AS and drop it.
    let (msgs, _) = encode(&d, &params(true, ctx));
    let ups = decode_all(&msgs, &ctx);
    assert!(ups[0].as_path().unwrap().segments.is_empty());
}

fn steering_config() -> Config {
    service_config(
        "link_bandwidth = \"per-endpoint\"\ndegraded = { med = 1000, as_path_prepend = 3, communities = [\"65001:666\"] }\n\
         allow_service_attributes = [\"as-path-prepend\"]",
    )
}

#[test]
fn a_degraded_route_carries_the_degraded_attributes_on_top_of_its_own() {
    let c = steering_config();
    let healthy = crate::model::ServiceAttributes {
        as_path_prepend: Some(1),
        ..Default::default()
    };
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&healthy)).unwrap();
    assert_eq!((a.med, a.as_path_prepend), (Some(50), 1));
    assert_eq!(a.communities, vec![0xfde9_0064]);
    let degraded = crate::model::ServiceAttributes {
        degraded: true,
        ..healthy
    };
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&degraded)).unwrap();
    assert_eq!(
        (a.med, a.as_path_prepend),
        (Some(1000), 4),
        "MED replaced, prepend added to the route's own"
    );
    assert_eq!(a.communities, vec![0xfde9_0064, 0xfde9_029a]);
    // Without `degraded` in the advertisement the flag changes nothing.
    let plain = service_config("");
    assert_eq!(
        attrs_for_peer("tor1", plain.advertisements.iter(), Some(&degraded)),
        attrs_for_peer("tor1", plain.advertisements.iter(), None)
    );
}

#[test]
fn the_endpoint_count_goes_out_as_the_link_bandwidth_community() {
    let c = steering_config();
    let counted = crate::model::ServiceAttributes {
        endpoints: Some(3),
        ..Default::default()
    };
    let a = attrs_for_peer("tor1", c.advertisements.iter(), Some(&counted)).unwrap();
    assert_eq!(a.link_bandwidth, Some(3));
    // An advertisement without link_bandwidth sends none.
    let plain = service_config("");
    let b = attrs_for_peer("tor1", plain.advertisements.iter(), Some(&counted)).unwrap();
    assert_eq!(b.link_bandwidth, None);

    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[("198.51.100.10/32", a)])),
        &[Family::IPV4_UNICAST],
    );
    let ctx = Context::default();
    let mut p = params(false, ctx);
    p.local_asn = 65001;
    let (msgs, _) = encode(&d, &p);
    let ups = decode_all(&msgs, &ctx);
    let ext: Vec<[u8; 8]> = ups[0].extended_communities().iter().map(|c| c.0).collect();
    assert_eq!(
        ext,
        vec![crate::model::link_bandwidth::link_bandwidth_community(
            65001, 3
        )]
    );
}

#[test]
fn unnumbered_ipv4_routes_go_with_the_ipv6_next_hop() {
    // RFC 8950 §3: with the extended next hop encoding negotiated, IPv4
    // routes are sent in MP_REACH_NLRI (AFI 1 / SAFI 1) with the IPv6 next
    // hop, here the link-local address alone (no global one on the link).
    let mut rib = AdjRibOut::default();
    let d = rib.diff(
        &Arc::new(table(&[("198.51.100.10/32", RouteAttrs::default())])),
        &[Family::IPV4_UNICAST],
    );
    let mut p = params(false, Context::default());
    p.next_hops = NextHops {
        ipv4: None,
        ipv6: None,
        ipv6_link_local: Some("fe80::2".parse().unwrap()),
        ipv4_via_ipv6: true,
    };
    let (msgs, skipped) = encode(&d, &p);
    assert!(skipped.is_empty());
    let ups = decode_all(&msgs, &Context::default());
    assert_eq!(ups.len(), 1);
    assert!(ups[0].nlri.is_empty() && ups[0].next_hop().is_none());
    let mp = ups[0].mp_reach().unwrap();
    assert_eq!(mp.family, Family::IPV4_UNICAST);
    assert_eq!(mp.next_hops(), (Some("fe80::2".parse().unwrap()), None));
    assert_eq!(mp.nlri.prefixes()[0].prefix, net("198.51.100.10/32"));
}

/// The per-family counts the status view reads are kept by every change to
/// the Adj-RIB-Out, and match the table itself.
#[test]
fn adj_rib_out_counts_follow_the_table() {
    let both = [Family::IPV4_UNICAST, Family::IPV6_UNICAST];
    let a = RouteAttrs::default();
    let desired = Arc::new(table(&[
        ("198.51.100.10/32", a.clone()),
        ("198.51.100.11/32", a.clone()),
        ("2001:db8::10/128", a.clone()),
    ]));
    let matches_table = |rib: &AdjRibOut| {
        let t = rib.table();
        let v4 = t.keys().filter(|p| matches!(p, IpNet::V4(_))).count();
        assert_eq!(rib.counts(), (v4, t.len() - v4));
    };
    let mut rib = AdjRibOut::default();
    assert_eq!(rib.counts(), (0, 0));
    rib.diff(&desired, &both);
    assert_eq!(rib.counts(), (2, 1));
    matches_table(&rib);
    // Only IPv6 negotiated: the IPv4 routes leave the table and the count.
    rib.diff(&desired, &[Family::IPV6_UNICAST]);
    assert_eq!(rib.counts(), (0, 1));
    matches_table(&rib);
    rib.diff(&desired, &both);
    rib.forget(&[net("198.51.100.11/32"), net("192.0.2.99/32")]);
    assert_eq!(rib.counts(), (1, 1));
    matches_table(&rib);
    rib.withdraw_all();
    assert_eq!(rib.counts(), (0, 0));
    rib.diff(&desired, &both);
    rib.clear();
    assert_eq!(rib.counts(), (0, 0));
}

/// A table far larger than one packing slice comes out exactly as if each
/// attribute group had been packed whole: the same messages, as full, in
/// the same order — 4096-octet and extended (RFC 8654) messages, both
/// families, two attribute groups.
#[test]
fn packing_a_large_table_a_slice_at_a_time_is_packing_it_whole() {
    let other = Arc::new(RouteAttrs {
        communities: vec![0xfde9_0064],
        ..RouteAttrs::default()
    });
    let plain = Arc::new(RouteAttrs::default());
    let mut desired = PeerTable::new();
    for i in 0..70_000u32 {
        let a = if i % 7 == 0 { &other } else { &plain };
        let v4 = net(&format!(
            "198.{}.{}.{}/32",
            18 + i / 65536,
            (i / 256) % 256,
            i % 256
        ));
        desired.insert(v4, a.clone());
        if i % 3 == 0 {
            let v6 = net(&format!("2001:db8::{:x}:{:x}/128", i / 65536, i % 65536));
            desired.insert(v6, a.clone());
        }
    }
    for ctx in [
        Context::default(),
        Context {
            max_message_len: 65535,
            ..Context::default()
        },
    ] {
        let p = params(false, ctx);
        let mut rib = AdjRibOut::default();
        let d = rib.diff(
            &Arc::new(desired.clone()),
            &[Family::IPV4_UNICAST, Family::IPV6_UNICAST],
        );
        let (msgs, skipped) = encode(&d, &p);
        assert!(skipped.is_empty());
        let mut whole = Vec::new();
        for (attrs, prefixes) in lists(&d) {
            let attrs = &attrs;
            let base = p.path_attributes(attrs);
            for (fam, nh) in [
                (Family::IPV4_UNICAST, p.next_hops.for_ipv4().unwrap()),
                (Family::IPV6_UNICAST, p.next_hops.for_ipv6().unwrap()),
            ] {
                let list: Vec<bgp_proto::Nlri> = prefixes
                    .iter()
                    .filter(|n| matches!(n, IpNet::V4(_)) == (fam == Family::IPV4_UNICAST))
                    .map(|n| bgp_proto::Nlri::new(*n))
                    .collect();
                let (ups, _) = bgp_proto::pack::announcements(&ctx, fam, &base, &nh, &list);
                whole.extend(
                    ups.into_iter()
                        .map(|u| Message::Update(u).encode(&ctx).unwrap()),
                );
            }
        }
        assert_eq!(msgs.len(), whole.len(), "max {}", ctx.max_message_len);
        assert!(
            msgs == whole,
            "the messages differ (max {})",
            ctx.max_message_len
        );
    }
}

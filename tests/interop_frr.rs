//! holdfast against FRR's bgpd, in network namespaces.

mod common;

use common::*;

#[test]
fn ebgp_over_ipv4_and_ipv6_transport_with_communities() {
    testlab::require_root();
    let (lab, frr) = Tor::new().zebra().ipv6_session().start();
    let conf = Config::node(65001, "192.0.2.2")
        .peer(Peer::new("tor-v4", "192.0.2.1", 65000).fast())
        .peer(Peer::new("tor-v6", "2001:db8::1", 65000).fast())
        .advertisement(
            Advertisement::public("65001:100")
                .large_communities(&["65001:1:100"])
                .local_pref(200),
        );
    let node = Holdfast::start(
        &lab.node,
        &conf.to_toml(),
        &vips(&["198.51.100.10", "2001:db8:100::10"]),
    );
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    frr.wait_established("2001:db8::2".parse().unwrap(), LONG);
    let v4 = frr.wait_prefix("198.51.100.10/32", LONG);
    let v6 = frr.wait_prefix("2001:db8:100::10/128", LONG);
    for route in [&v4, &v6] {
        let paths = route["paths"].as_array().unwrap();
        assert_eq!(paths.len(), 2, "one path per session: {route}");
        for p in paths {
            assert_eq!(p["community"]["string"], "65001:100", "{p}");
            assert_eq!(p["largeCommunity"]["string"], "65001:1:100", "{p}");
            assert_eq!(p["aspath"]["string"], "65001", "{p}");
            assert!(
                p.get("locPrf").is_none() || p["locPrf"] == 100,
                "no LOCAL_PREF over eBGP: {p}"
            );
        }
    }
    let status = node.status();
    assert!(
        status["peers"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["state"] == "Established"),
        "{status}"
    );
}

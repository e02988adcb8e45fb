//! Routing policy per Service and per node, end to end: the holdfast
//! daemon with its Kubernetes source against a real API server,
//! FRR as the router. Per-Service attributes from annotations (and their
//! refusal), aggregation with eTP Cluster and Local Services, PodCIDR and
//! interface advertisements.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Node, Service};
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};
use serde_json::{Value, json};
use testlab::{Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

/// Every attribute a Service's annotations may set.
const ALLOW_ALL: &[&str] = &[
    "communities",
    "large-communities",
    "local-pref",
    "med",
    "as-path-prepend",
];

struct Cluster<'a> {
    kube: cluster::KubeApi,
    frr: Frr,
    node: Holdfast<'a>,
}

/// holdfast (AS 65001) with one peer, FRR, in AS `router_asn` (65001:
/// iBGP), and these advertisements.
fn start<'a>(lab: &'a Lab, router_asn: u32, advertisements: &[Advertisement]) -> Cluster<'a> {
    testlab::require_root();
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, &[]);
    let frr = Tor::new().asn(router_asn).zebra().on(lab);
    let config = Config::node(65001, NODE)
        .peer(
            Peer::new("tor1", TOR, router_asn)
                .hold_time("9s")
                .connect_retry("1s"),
        )
        .kubernetes_source()
        .hold_down("3s");
    let config = advertisements
        .iter()
        .cloned()
        .fold(config, Config::advertisement);
    let node = k.holdfast(&lab.node, "node-1", &config.to_toml());
    frr.wait_established(NODE.parse().unwrap(), LONG);
    Cluster { kube: k, frr, node }
}

fn annotated(name: &str, ips: &[&str], annotations: &[(&str, &str)]) -> Service {
    let mut svc = load_balancer_service("demo", name, ips);
    svc.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    svc
}

/// The one path FRR has for `prefix`, once it satisfies `ok`.
fn path_when(c: &Cluster<'_>, prefix: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    let mut last = Value::Null;
    let found = testlab::wait::wait_until_opt(LONG, || {
        let p = c.frr.prefix(prefix)?;
        let path = p["paths"][0].clone();
        last = path.clone();
        ok(&path).then_some(path)
    });
    match found {
        Some(p) => p,
        None => panic!("FRR's path for {prefix} never had {what}; last: {last}"),
    }
}

/// A string field of FRR's JSON that must be there.
fn field<'v>(path: &'v Value, pointer: &str) -> &'v str {
    path.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("FRR's path has no {pointer}: {path}"))
}

/// A number field of FRR's JSON that must be there.
fn number(path: &Value, pointer: &str) -> u64 {
    path.pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("FRR's path has no {pointer}: {path}"))
}

impl Cluster<'_> {
    /// UPDATEs FRR received from the node; the counter must be there.
    fn updates(&self) -> u64 {
        self.frr.updates_received(NODE.parse().unwrap())
    }

    fn settled_updates(&self) -> u64 {
        let mut last = self.updates();
        wait_until(LONG, "FRR's UPDATE count to settle", || {
            std::thread::sleep(Duration::from_millis(400));
            let now = self.updates();
            let same = now == last;
            last = now;
            same.then_some(now)
        })
    }

    fn annotate(&self, name: &str, key: &str, value: &str) {
        self.kube
            .api
            .patch::<Service>(
                Some("demo"),
                name,
                &json!({ "metadata": { "annotations": { key: value } } }),
            )
            .unwrap();
    }
}

#[test]
fn annotations_are_seen_at_frr_over_ebgp() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        65000,
        &[Advertisement::public("65001:100").allow_service_attributes(ALLOW_ALL)],
    );
    c.kube
        .api
        .create(&annotated(
            "web",
            &["198.51.100.10"],
            &[
                ("holdfast.dev/communities", "65001:200,65001:300"),
                ("holdfast.dev/large-communities", "65001:1:2"),
                ("holdfast.dev/med", "7"),
                ("holdfast.dev/as-path-prepend", "2"),
                // Not sent over eBGP (RFC 4271 §5.1.5).
                ("holdfast.dev/local-pref", "250"),
            ],
        ))
        .unwrap();
    let path = path_when(&c, "198.51.100.10/32", "the annotations", |p| {
        p.pointer("/community/string").is_some()
    });
    assert_eq!(
        field(&path, "/community/string"),
        "65001:100 65001:200 65001:300",
        "{path}"
    );
    assert_eq!(
        field(&path, "/largeCommunity/string"),
        "65001:1:2",
        "{path}"
    );
    assert_eq!(number(&path, "/metric"), 7, "MED: {path}");
    assert_eq!(
        field(&path, "/aspath/string"),
        "65001 65001 65001",
        "{path}"
    );
    // FRR prints locPrf only for a route that carries LOCAL_PREF.
    assert!(
        path.get("locPrf").is_none(),
        "no LOCAL_PREF over eBGP: {path}"
    );
    assert_eq!(field(&path, "/peer/type"), "external", "{path}");
    let (code, text) = c.node.explain("198.51.100.10");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("attributes from the annotations of demo/web: communities 65001:200,65001:300, large communities 65001:1:2, local-pref 250 (iBGP peers), med 7, as-path-prepend 2 (eBGP peers)"),
        "{text}"
    );
}

#[test]
fn the_local_pref_annotation_reaches_an_ibgp_peer() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        65001,
        &[Advertisement::new("public")
            .local_pref(150)
            .allow_service_attributes(ALLOW_ALL)],
    );
    c.kube
        .api
        .create(&annotated(
            "web",
            &["198.51.100.10"],
            &[
                ("holdfast.dev/local-pref", "250"),
                // RFC 4271 §9.1.2: never towards an internal peer.
                ("holdfast.dev/as-path-prepend", "2"),
            ],
        ))
        .unwrap();
    let path = path_when(&c, "198.51.100.10/32", "LOCAL_PREF 250", |p| {
        p["locPrf"] == 250
    });
    assert_eq!(field(&path, "/peer/type"), "internal", "{path}");
    // FRR writes an empty AS_PATH as "Local".
    assert_eq!(
        number(&path, "/aspath/length"),
        0,
        "no prepend over iBGP: {path}"
    );
    // The annotation goes: the advertisement's LOCAL_PREF is back.
    c.kube
        .api
        .patch::<Service>(
            Some("demo"),
            "web",
            &json!({ "metadata": { "annotations": { "holdfast.dev/local-pref": null } } }),
        )
        .unwrap();
    path_when(&c, "198.51.100.10/32", "LOCAL_PREF 150", |p| {
        p["locPrf"] == 150
    });
}

#[test]
fn a_disallowed_annotation_is_refused_with_an_event_and_explain() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        65000,
        &[Advertisement::public("65001:100").allow_service_attributes(&["med"])],
    );
    c.kube
        .api
        .create(&annotated(
            "web",
            &["198.51.100.10"],
            &[
                ("holdfast.dev/communities", "65001:666"),
                ("holdfast.dev/med", "7"),
            ],
        ))
        .unwrap();
    // The allowed MED applies, the refused community does not.
    let path = path_when(&c, "198.51.100.10/32", "MED 7", |p| p["metric"] == 7);
    assert_eq!(field(&path, "/community/string"), "65001:100", "{path}");
    let event = wait_until(Duration::from_secs(20), "the Warning Event", || {
        c.kube
            .api
            .events()
            .into_iter()
            .find(|e| e["reason"] == "AttributesRefused")
    });
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["regarding"]["name"], "web", "{event}");
    let note = event["note"].as_str().expect("a note");
    assert!(
        note.contains("holdfast.dev/communities is not allowed by advertisement \"public\""),
        "{note}"
    );
    let (_, text) = c.node.explain("198.51.100.10");
    assert!(
        text.contains("refused: holdfast.dev/communities is not allowed by advertisement \"public\" (allow_service_attributes does not list \"communities\"); the route keeps the advertisement's attributes"),
        "{text}"
    );
    // A value that does not parse is refused too.
    c.annotate("web", "holdfast.dev/med", "lots");
    path_when(&c, "198.51.100.10/32", "no MED", |p| {
        p.get("metric").is_none()
    });
    wait_until(Duration::from_secs(20), "the second Warning Event", || {
        c.kube.api.events().into_iter().find(|e| {
            e["reason"] == "AttributesRefused"
                && e["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("holdfast.dev/med is \"lots\""))
        })
    });
}

#[test]
fn an_annotation_change_is_one_update_and_no_withdrawal() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        65000,
        &[Advertisement::new("public").allow_service_attributes(ALLOW_ALL)],
    );
    c.kube
        .api
        .create(&annotated(
            "web",
            &["198.51.100.10"],
            &[("holdfast.dev/med", "7")],
        ))
        .unwrap();
    path_when(&c, "198.51.100.10/32", "MED 7", |p| p["metric"] == 7);
    let before = c.settled_updates();
    c.annotate("web", "holdfast.dev/med", "8");
    // Sampled every 20 ms until the new MED shows: the route is never gone.
    let deadline = Instant::now() + LONG;
    loop {
        let p = c
            .frr
            .prefix("198.51.100.10/32")
            .expect("the route stays at FRR through the change");
        if p["paths"][0]["metric"] == 8 {
            break;
        }
        assert!(Instant::now() < deadline, "MED 8 never showed: {p}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let after = c.settled_updates();
    assert_eq!(
        after - before,
        1,
        "one UPDATE re-announces the route (RFC 4271 §3.1), no withdrawal first"
    );
}

#[test]
fn aggregation_with_a_mix_of_etp_cluster_and_local_services() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        65000,
        &[Advertisement::new("public")
            .aggregation_length(24)
            .aggregation_length_v6(64)],
    );
    c.kube
        .api
        .create(&load_balancer_service(
            "demo",
            "web-a",
            &["198.51.100.10", "2001:db8:100::10"],
        ))
        .unwrap();
    c.kube
        .api
        .create(&load_balancer_service(
            "demo",
            "web-b",
            &["198.51.100.11", "2001:db8:100::11"],
        ))
        .unwrap();
    let mut local =
        load_balancer_service("demo", "web-local", &["198.51.100.12", "2001:db8:100::12"]);
    local.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    c.kube.api.create(&local).unwrap();
    c.kube
        .api
        .create(&endpoint_slice(
            "demo",
            "web-local",
            "web-local-1",
            &[SliceEndpoint::ready("10.0.0.6", "node-1")],
        ))
        .unwrap();
    c.frr.wait_prefix("198.51.100.0/24", LONG);
    c.frr.wait_prefix("198.51.100.12/32", LONG);
    c.frr.wait_prefix("2001:db8:100::/64", LONG);
    c.frr.wait_prefix("2001:db8:100::12/128", LONG);
    assert!(c.frr.prefix("2001:db8:100::10/128").is_none());
    assert!(
        c.frr.prefix("198.51.100.10/32").is_none(),
        "eTP Cluster VIPs are in the aggregate"
    );
    assert!(c.frr.prefix("198.51.100.11/32").is_none());
    let (code, text) = c.node.explain("198.51.100.10");
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("advertisement \"public\" announces it as the aggregate 198.51.100.0/24, which covers 198.51.100.10, 198.51.100.11"),
        "{text}"
    );
    let (_, text) = c.node.explain("198.51.100.12");
    assert!(text.contains("never in an aggregate"), "{text}");

    // One covered VIP goes: the aggregate stays, FRR hears nothing.
    let before = c.settled_updates();
    c.kube.api.delete::<Service>(Some("demo"), "web-a").unwrap();
    std::thread::sleep(Duration::from_secs(5));
    assert!(c.frr.prefix("198.51.100.0/24").is_some());
    assert_eq!(c.settled_updates(), before, "the aggregate did not change");
    // The last one goes: held down (3s), then withdrawn.
    let gone = Instant::now();
    c.kube.api.delete::<Service>(Some("demo"), "web-b").unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.frr.prefix("198.51.100.0/24").is_some(), "held down");
    c.frr.wait_no_prefix("198.51.100.0/24", LONG);
    assert!(
        gone.elapsed() >= Duration::from_secs(3),
        "{:?}",
        gone.elapsed()
    );
    assert!(
        c.frr.prefix("198.51.100.12/32").is_some(),
        "the eTP Local VIP stays"
    );
}

#[test]
fn pod_cidr_and_an_interface_address_are_seen_at_frr() {
    let lab = Lab::pair();
    lab.node.ip(&["addr", "add", "203.0.113.9/32", "dev", "lo"]);
    let c = start(
        &lab,
        65000,
        &[
            Advertisement::new("public"),
            Advertisement::new("pods")
                .addresses(&["PodCIDR"])
                .communities(&["65001:300"]),
            Advertisement::new("loopback")
                .interface("lo")
                .communities(&["65001:400"]),
        ],
    );
    c.kube.api
        .patch::<Node>(
            None,
            "node-1",
            &json!({ "spec": { "podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "2001:db8:244::/64"] } }),
        )
        .unwrap();
    let pods = c.frr.wait_prefix("10.244.1.0/24", LONG);
    c.frr.wait_prefix("2001:db8:244::/64", LONG);
    assert_eq!(
        field(&pods["paths"][0], "/community/string"),
        "65001:300",
        "{pods}"
    );
    let lo = c.frr.wait_prefix("203.0.113.9/32", LONG);
    assert_eq!(
        field(&lo["paths"][0], "/community/string"),
        "65001:400",
        "{lo}"
    );
    assert!(
        c.frr.prefix("127.0.0.1/32").is_none(),
        "loopback addresses are not global"
    );
    // An address added to the interface is announced; one removed is
    // held down, then withdrawn.
    lab.node
        .ip(&["addr", "add", "203.0.113.10/32", "dev", "lo"]);
    c.frr.wait_prefix("203.0.113.10/32", LONG);
    lab.node.ip(&["addr", "del", "203.0.113.9/32", "dev", "lo"]);
    c.frr.wait_no_prefix("203.0.113.9/32", LONG);
    let (_, text) = c.node.explain("203.0.113.10");
    assert!(
        text.contains("interface lo has it: announced under advertisement \"loopback\""),
        "{text}"
    );
}

/// A MetalLB setup migrated without relabelling: two IPAddressPools become
/// two advertisements with `vip_ranges`, one per peer. Two Services without
/// labels go to different peers by their address alone; one in neither
/// range goes nowhere, and `explain` says why.
#[test]
fn vip_ranges_send_unlabelled_services_to_different_peers_by_address() {
    let lab = Lab::pair();
    testlab::require_root();
    // A second session between the same two namespaces: the node's
    // 192.0.2.4 to the router's 192.0.2.3.
    lab.router.add_address("to-node", "192.0.2.3/24");
    lab.node.add_address("to-router", "192.0.2.4/24");
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, &[]);
    let frr = Tor::new()
        .zebra()
        .neighbor("192.0.2.4", 65001)
        .lines(" neighbor 192.0.2.4 update-source 192.0.2.3\n")
        .on(&lab);
    let peer = |name: &str, addr: &str, from: &str| {
        Peer::new(name, addr, 65000)
            .source_address(from)
            .hold_time("9s")
            .connect_retry("1s")
    };
    let config = Config::node(65001, NODE)
        .peer(peer("tor", TOR, NODE))
        .peer(peer("internal", "192.0.2.3", "192.0.2.4"))
        .kubernetes_source()
        .advertisement(
            Advertisement::new("public")
                .vip_ranges(&["203.0.113.0/24"])
                .peers(&["tor"])
                .communities(&["65001:100"]),
        )
        .advertisement(
            Advertisement::new("internal")
                .vip_ranges(&["10.96.200.0/24"])
                .peers(&["internal"]),
        );
    let node = k.holdfast(&lab.node, "node-1", &config.to_toml());
    frr.wait_established(NODE.parse().unwrap(), LONG);
    frr.wait_established("192.0.2.4".parse().unwrap(), LONG);
    for (name, ip) in [
        ("web", "203.0.113.10"),
        ("db", "10.96.200.10"),
        ("stray", "198.51.100.10"),
    ] {
        k.api
            .create(&load_balancer_service("demo", name, &[ip]))
            .unwrap();
    }
    let from = |prefix: &str| -> Vec<(String, String)> {
        let p = frr.wait_prefix(prefix, LONG);
        p["paths"]
            .as_array()
            .expect("paths")
            .iter()
            .map(|path| {
                (
                    field(path, "/peer/peerId").to_string(),
                    path.pointer("/community/string")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                )
            })
            .collect()
    };
    let web = from("203.0.113.10/32");
    let db = from("10.96.200.10/32");
    // Both are in; give any wrong copy time to arrive, then look again.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(web, from("203.0.113.10/32"));
    assert_eq!(db, from("10.96.200.10/32"));
    assert_eq!(
        web,
        [(NODE.to_string(), "65001:100".to_string())],
        "the public VIP from the node's session to the ToR only, with its community"
    );
    assert_eq!(
        db,
        [("192.0.2.4".to_string(), String::new())],
        "the internal VIP from the internal session only"
    );
    assert!(
        frr.prefix("198.51.100.10/32").is_none(),
        "an address in no range goes nowhere"
    );
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(
        code, 1,
        "explain exits 1 for an address not advertised: {text}"
    );
    assert!(
        text.contains("demo/stray: advertisement \"public\": 198.51.100.10 is not in its vip_ranges [\"203.0.113.0/24\"]")
            && text.contains("demo/stray: advertisement \"internal\": 198.51.100.10 is not in its vip_ranges [\"10.96.200.0/24\"]"),
        "{text}"
    );
}

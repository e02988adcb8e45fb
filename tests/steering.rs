//! Steering traffic between nodes without withdrawing: two holdfast nodes
//! behind one FRR (zebra, ECMP with `maximum-paths`, `bgp bestpath
//! bandwidth`).
//!
//! - ECMP weighted by endpoints: through a real API server, node-1
//!   with 1 ready endpoint of an eTP Local Service and node-2 with 3; FRR
//!   weights the two next hops 25/75 from the link-bandwidth community;
//!   scaling node-1 to 3, pod by pod, makes it 50/50 with one UPDATE from
//!   node-1.
//! - Degrade before withdrawing: a failing probe with `on_failure =
//!   "degrade"` re-announces node-1's route with a high MED, so FRR uses
//!   node-2 alone, and nothing is withdrawn; the probe's disable file does
//!   the same; removing it restores ECMP.

mod common;

use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};
use serde_json::Value;
use testlab::{Frr, LabDir, Netns, wait_until};

const VIP: &str = "198.51.100.10";
const PREFIX: &str = "198.51.100.10/32";

/// The ToR and two nodes, each on its own /30.
struct Fabric {
    router: Netns,
    nodes: [Netns; 2],
    _links: Vec<testlab::Link>,
}

/// (router's address, node's address) of each node's link.
const LINKS: [(&str, &str); 2] = [("192.0.2.1", "192.0.2.2"), ("192.0.2.5", "192.0.2.6")];

impl Fabric {
    fn new() -> Fabric {
        testlab::require_root();
        let router = Netns::new("router");
        let nodes = [Netns::new("node1"), Netns::new("node2")];
        let mut links = Vec::new();
        for (i, node) in nodes.iter().enumerate() {
            let router_if = format!("to-n{}", i + 1);
            links.push(testlab::veth(node, "to-router", &router, &router_if));
            router.add_address(&router_if, &format!("{}/30", LINKS[i].0));
            node.add_address("to-router", &format!("{}/30", LINKS[i].1));
        }
        Fabric {
            router,
            nodes,
            _links: links,
        }
    }
}

/// FRR with zebra, and with bgpd's routes in zebra's RIB: testlab starts
/// bgpd with `-n` (`bgp no-rib`), and the weights of weighted ECMP exist
/// only in the RIB bgpd hands to zebra (`show ip route json`). The routes
/// go into the router namespace's kernel, nowhere else.
fn start_frr(router: &Netns) -> Frr {
    let frr = Frr::start_with_zebra(router, &frr_conf());
    frr.configure(&["no bgp no-rib"]);
    frr
}

/// FRR as the ToR: both nodes as eBGP neighbours in AS 65001, ECMP over
/// them weighted by link bandwidth, UPDATEs logged.
fn frr_conf() -> String {
    let mut c = String::from(
        "debug bgp updates in\nfrr defaults datacenter\nrouter bgp 65000\n bgp router-id 192.0.2.1\n no bgp ebgp-requires-policy\n \
         bgp bestpath bandwidth skip-missing\n",
    );
    for (_, node) in LINKS {
        c.push_str(&format!(
            " neighbor {node} remote-as 65001\n neighbor {node} timers connect 1\n neighbor {node} timers 3 9\n"
        ));
    }
    c.push_str(" address-family ipv4 unicast\n  maximum-paths 8\n");
    for (_, node) in LINKS {
        c.push_str(&format!("  neighbor {node} activate\n"));
    }
    c.push_str(" exit-address-family\nexit\n");
    c
}

fn neighbor_ip(i: usize) -> std::net::IpAddr {
    LINKS[i].1.parse().unwrap()
}

/// UPDATEs FRR received from node `i`; the field must be there.
fn updates_from(frr: &Frr, i: usize) -> u64 {
    let n = frr.neighbor(neighbor_ip(i));
    match n["messageStats"]["updatesRecv"].as_u64() {
        Some(v) => v,
        None => panic!(
            "FRR reports no messageStats.updatesRecv for {}: {n}",
            LINKS[i].1
        ),
    }
}

/// Withdrawals of the VIP FRR logged (`debug bgp updates in`), from anyone.
fn withdrawals(frr: &Frr) -> usize {
    frr.log()
        .matches(&format!(
            "rcvd UPDATE about {PREFIX} IPv4 unicast -- withdrawn"
        ))
        .count()
}

/// The VIP's next hops in FRR's RIB (`show ip route json`, zebra): each
/// node's address with its weight. The route and its nexthops must be
/// there.
fn rib_nexthops(frr: &Frr) -> Option<Vec<(String, Option<u64>)>> {
    let json = frr.json(&format!("show ip route {PREFIX} json"));
    let routes = json.get(PREFIX)?.as_array()?;
    let route = routes.iter().find(|r| r["protocol"] == "bgp")?;
    let mut hops: Vec<(String, Option<u64>)> = route["nexthops"]
        .as_array()?
        .iter()
        .filter(|h| h["active"] == true)
        .map(|h| {
            (
                h["ip"].as_str().unwrap_or("").to_string(),
                h["weight"].as_u64(),
            )
        })
        .collect();
    hops.sort();
    Some(hops)
}

/// Waits until FRR's RIB has exactly these next hops and weights.
fn wait_weights(frr: &Frr, want: &[(&str, Option<u64>)], what: &str) -> Vec<(String, Option<u64>)> {
    let want: Vec<(String, Option<u64>)> = want.iter().map(|(a, w)| (a.to_string(), *w)).collect();
    let found = std::cell::RefCell::new(None);
    let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_until(LONG, what, || {
            let hops = rib_nexthops(frr);
            *found.borrow_mut() = hops.clone();
            (hops.as_ref() == Some(&want)).then_some(())
        })
    }));
    if done.is_err() {
        panic!(
            "{what}: FRR's next hops stayed {:?}, wanted {want:?}\n{}\n{}\n{}",
            found.borrow(),
            frr.vtysh("show ip route"),
            frr.vtysh(&format!("show bgp ipv4 unicast {PREFIX}")),
            frr.vtysh("show running-config")
        );
    }
    want
}

/// node `i`'s path to the VIP in `show bgp ipv4 unicast PREFIX json`.
fn path_from(frr: &Frr, i: usize) -> Option<Value> {
    let json = frr.json(&format!("show bgp ipv4 unicast {PREFIX} json"));
    json["paths"]
        .as_array()?
        .iter()
        .find(|p| p["peer"]["peerId"] == LINKS[i].1)
        .cloned()
}

/// Counts settle: no new UPDATE from node `i` for 3 s (longer than
/// holdfast's 2 s link-bandwidth settle time).
fn settled_updates(frr: &Frr, i: usize) -> u64 {
    let mut last = updates_from(frr, i);
    wait_until(LONG, "FRR's UPDATE count to settle", || {
        std::thread::sleep(Duration::from_secs(3));
        let now = updates_from(frr, i);
        let same = now == last;
        last = now;
        same.then_some(now)
    })
}

// ----- ECMP weighted by endpoints (Kubernetes source) -----

struct Kube<'a> {
    cluster: cluster::KubeApi,
    frr: Frr,
    nodes: Vec<Holdfast<'a>>,
}

/// Node `i` (0 or 1): node-1 or node-2 peering with the ToR on its link,
/// a 3 s hold-down.
fn node_config(i: usize) -> Config {
    let (tor, me) = LINKS[i];
    Config::new()
        .speaker(65001, me)
        .hostname(&format!("node-{}", i + 1))
        .peer(
            Peer::new("tor", tor, 65000)
                .hold_time("9s")
                .connect_retry("1s"),
        )
}

fn kube_config(i: usize) -> String {
    node_config(i)
        .kubernetes_source()
        .hold_down("3s")
        .advertisement(Advertisement::new("public").link_bandwidth("per-endpoint"))
        .to_toml()
}

fn start_kube(fabric: &Fabric) -> Kube<'_> {
    let cluster = cluster::KubeApi::start();
    let frr = start_frr(&fabric.router);
    for (i, ns) in fabric.nodes.iter().enumerate() {
        cluster.add_node(ns, &format!("node-{}", i + 1), LINKS[i].1, &[]);
    }
    let nodes: Vec<Holdfast<'_>> = fabric
        .nodes
        .iter()
        .enumerate()
        .map(|(i, ns)| cluster.holdfast(ns, &format!("node-{}", i + 1), &kube_config(i)))
        .collect();
    for i in 0..2 {
        frr.wait_established(neighbor_ip(i), LONG);
    }
    Kube {
        cluster,
        frr,
        nodes,
    }
}

/// The Service's one slice with `n1` ready endpoints on node-1 and `n2` on
/// node-2.
fn slice(n1: usize, n2: usize) -> EndpointSlice {
    let endpoints: Vec<SliceEndpoint> = (0..n1)
        .map(|k| SliceEndpoint::ready(&format!("10.0.1.{}", k + 1), "node-1"))
        .chain((0..n2).map(|k| SliceEndpoint::ready(&format!("10.0.2.{}", k + 1), "node-2")))
        .collect();
    endpoint_slice("demo", "web", "web-1", &endpoints)
}

/// A link-bandwidth community of `gbps` Gbit/s, as FRR prints it.
fn bandwidth_of(path: &Value) -> String {
    path["extendedCommunity"]["string"]
        .as_str()
        .unwrap_or_else(|| panic!("no extended community on the path: {path}"))
        .to_string()
}

#[test]
fn frr_weights_ecmp_by_ready_endpoints_and_a_scale_up_is_one_update() {
    let fabric = Fabric::new();
    let k = start_kube(&fabric);
    let mut svc: Service = load_balancer_service("demo", "web", &[VIP]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    k.cluster.api.create(&svc).unwrap();
    k.cluster.api.create(&slice(1, 3)).unwrap();

    wait_weights(
        &k.frr,
        &[("192.0.2.2", Some(25)), ("192.0.2.6", Some(75))],
        "FRR to weight node-1 25 and node-2 75",
    );
    let p1 = path_from(&k.frr, 0).expect("node-1's path");
    let p2 = path_from(&k.frr, 1).expect("node-2's path");
    assert_eq!(bandwidth_of(&p1), "LB:65001:125000000 (1.000 Gbps)", "{p1}");
    assert_eq!(bandwidth_of(&p2), "LB:65001:375000000 (3.000 Gbps)", "{p2}");
    let status = k.nodes[1].status();
    let route = status["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["prefix"] == PREFIX)
        .unwrap_or_else(|| panic!("node-2's status lists {PREFIX}: {status}"));
    assert_eq!(route["link_bandwidth"], 3, "{route}");

    let before = settled_updates(&k.frr, 0);
    let withdrawn_before = withdrawals(&k.frr);
    // Scale node-1 up to 3 ready endpoints as a Deployment does: the pods
    // become ready one by one, 300 ms apart (two slice updates, each its
    // own evaluation: the source's debounce is 50 ms).
    let asked = Instant::now();
    for n1 in [2, 3] {
        let mut scaled = slice(n1, 3);
        let current = k
            .cluster
            .api
            .get::<EndpointSlice>(Some("demo"), "web-1")
            .expect("the slice");
        scaled.metadata.resource_version = current.metadata.resource_version.clone();
        k.cluster.api.replace(&scaled).unwrap();
        std::thread::sleep(Duration::from_millis(300));
    }
    wait_weights(
        &k.frr,
        &[("192.0.2.2", Some(50)), ("192.0.2.6", Some(50))],
        "FRR to weight node-1 and node-2 50/50",
    );
    let took = asked.elapsed();
    let after = settled_updates(&k.frr, 0);
    assert_eq!(
        after - before,
        1,
        "the burst 1 -> 2 -> 3 is one UPDATE from node-1 ({before} -> {after})"
    );
    assert_eq!(
        withdrawals(&k.frr),
        withdrawn_before,
        "nothing withdrawn:\n{}",
        k.frr.log()
    );
    let p1 = path_from(&k.frr, 0).expect("node-1's path");
    assert_eq!(bandwidth_of(&p1), "LB:65001:375000000 (3.000 Gbps)", "{p1}");
    eprintln!("scale-up to FRR's new weights: {took:?}");
    let (_, why) = k.nodes[0].explain(VIP);
    assert!(
        why.contains("link bandwidth: 3 endpoint unit(s) announced"),
        "{why}"
    );
}

// ----- degrade before withdrawing (file source, TCP probes) -----

/// A node whose API answers on every address (so the probe of VIP:9179,
/// with the VIP on `lo`, reaches holdfast itself), the VIP from a file,
/// node-1 with the degrading probe and a disable file.
fn probe_config(i: usize, disable_file: &str) -> String {
    let mut ad = Advertisement::new("default").med(10);
    if i == 0 {
        ad = ad
            .degraded(Degraded::new().med(1000).communities(&["65001:666"]))
            .probe(
                Probe::tcp(9179)
                    .interval("1s")
                    .timeout("500ms")
                    .fail_after(2)
                    .recover_after(2)
                    .on_failure("degrade")
                    .disable_file(disable_file),
            );
    }
    node_config(i)
        .api("0.0.0.0:9179")
        .file_source()
        .hold_down("3s")
        .advertisement(ad)
        .to_toml()
}

/// Both next hops, unweighted (zebra shows weight 1 when bgpd gave none).
fn both_ecmp(frr: &Frr, what: &str) {
    wait_weights(frr, &[("192.0.2.2", Some(1)), ("192.0.2.6", Some(1))], what);
}

fn only_node2(frr: &Frr, what: &str) -> Value {
    wait_weights(frr, &[("192.0.2.6", Some(1))], what);
    let p1 = path_from(frr, 0).expect("node-1's path is still there: not withdrawn");
    assert_eq!(p1["metric"], 1000, "{p1}");
    assert!(
        p1["multipath"].is_null() && p1["bestpath"].is_null(),
        "{p1}"
    );
    p1
}

#[test]
fn a_degraded_or_disabled_probe_steers_traffic_away_without_a_withdrawal() {
    let fabric = Fabric::new();
    let frr = start_frr(&fabric.router);
    let dir = LabDir::new("maintenance");
    let disable = dir.join("down");
    let disable_text = disable.display().to_string();
    for ns in &fabric.nodes {
        ns.ip(&["addr", "add", &format!("{VIP}/32"), "dev", "lo"]);
    }
    let node1 = Holdfast::start(
        &fabric.nodes[0],
        &probe_config(0, &disable_text),
        &vips(&[VIP]),
    );
    let _node2 = Holdfast::start(&fabric.nodes[1], &probe_config(1, ""), &vips(&[VIP]));
    for i in 0..2 {
        frr.wait_established(neighbor_ip(i), LONG);
    }
    both_ecmp(&frr, "ECMP over both nodes");
    let withdrawn_before = withdrawals(&frr);
    let p1 = path_from(&frr, 0).unwrap();
    assert_eq!(p1["metric"], 10, "{p1}");

    // The datapath on node-1 breaks: the probe fails, node-1 degrades.
    fabric.nodes[0].ip(&["addr", "del", &format!("{VIP}/32"), "dev", "lo"]);
    let p1 = only_node2(&frr, "FRR to prefer node-2 over the degraded node-1");
    assert!(
        p1["community"]["string"]
            .as_str()
            .is_some_and(|c| c.contains("65001:666")),
        "{p1}"
    );
    let status = node1.status();
    let route = &status["routes"][0];
    assert_eq!(route["steering"], "degraded", "{status}");
    let (code, why) = node1.explain(VIP);
    assert_eq!(code, 0, "still advertised: {why}");
    assert!(
        why.contains("announced with the advertisement's degraded attributes"),
        "{why}"
    );

    // It heals: recover_after successes bring the normal attributes back.
    fabric.nodes[0].ip(&["addr", "add", &format!("{VIP}/32"), "dev", "lo"]);
    both_ecmp(&frr, "ECMP over both nodes again");

    // Maintenance: the disable file degrades at once; removing it restores.
    std::fs::write(&disable, "").unwrap();
    only_node2(
        &frr,
        "FRR to prefer node-2 while node-1's disable file exists",
    );
    let text = node1.status_text();
    assert!(
        text.contains(&format!("disabled: {disable_text} exists")),
        "{text}"
    );
    let (_, why) = node1.explain(VIP);
    assert!(
        why.contains(&format!("the disable file {disable_text} exists")),
        "{why}"
    );
    std::fs::remove_file(&disable).unwrap();
    both_ecmp(&frr, "ECMP over both nodes after the disable file went");

    assert_eq!(
        withdrawals(&frr),
        withdrawn_before,
        "never withdrawn:\n{}",
        frr.log()
    );
}

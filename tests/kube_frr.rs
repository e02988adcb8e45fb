//! The Kubernetes source end to end (issue 4/7): kube-rs in the holdfast
//! daemon, unmodified, against the in-process API stand-in (reached from
//! the node namespace through a bridge), and FRR as the router.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_standin::StandIn;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service, node};
use serde_json::json;
use testlab::{Bridge, Frr, Lab, LabDir, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const API_PORT: u16 = 6443;

struct Cluster<'a> {
    api: StandIn,
    frr: Frr,
    node: Holdfast<'a>,
    _bridge: Bridge,
    _dir: LabDir,
}

fn config(hold_down: &str, extra: &str) -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"node-1\"\ngraceful_shutdown_wait = \"2s\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"{hold_down}\"\n\n\
         [[advertisement]]\nname = \"public\"\ncommunities = [\"65001:100\"]\n{extra}"
    )
}

fn start<'a>(
    lab: &'a Lab,
    hold_down: &str,
    extra: &str,
    node_labels: &[(&str, &str)],
) -> Cluster<'a> {
    testlab::require_root();
    let api = StandIn::start().expect("the API stand-in");
    api.create(&node("node-1", NODE, node_labels)).unwrap();
    let bridge = testlab::tcp_into_netns(&lab.node, API_PORT, api.addr());
    let dir = LabDir::new("kube");
    let kubeconfig: PathBuf = dir.write(
        "kubeconfig",
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: http://127.0.0.1:{API_PORT}\n\
             users:\n- name: standin\n  user: {{}}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n\
             current-context: standin\n"
        ),
    );
    // With zebra: bgpd alone refuses IPv6 next hops that carry a
    // link-local address (testlab/README.md), which an on-link node sends.
    let frr = Frr::start_with_zebra(&lab.router, &frr_conf(65000, TOR, &[(NODE, 65001)], ""));
    let kc = kubeconfig.display().to_string();
    let node = Holdfast::start_env(
        &lab.node,
        &config(hold_down, extra),
        "",
        &[],
        &[("KUBECONFIG", &kc), ("NODE_NAME", "node-1")],
    );
    frr.wait_established(NODE.parse().unwrap(), LONG);
    wait_until(LONG, "the Kubernetes source to sync", || {
        (node.status()["source"]["synced"] == true).then_some(())
    });
    Cluster {
        api,
        frr,
        node,
        _bridge: bridge,
        _dir: dir,
    }
}

impl Cluster<'_> {
    fn updates(&self) -> u64 {
        self.frr.updates_received(NODE.parse().unwrap())
    }

    fn set_ingress(&self, name: &str, ips: &[&str]) {
        let ingress: Vec<_> = ips
            .iter()
            .map(|ip| json!({ "ip": ip, "ipMode": "VIP" }))
            .collect();
        self.api
            .patch_status::<Service>(
                Some("demo"),
                name,
                &json!({ "loadBalancer": { "ingress": ingress } }),
            )
            .unwrap();
    }

    fn patch_service(&self, name: &str, patch: serde_json::Value) {
        self.api
            .patch::<Service>(Some("demo"), name, &patch)
            .unwrap();
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
}

fn service(name: &str, ips: &[&str]) -> Service {
    load_balancer_service("demo", name, ips)
}

#[test]
fn the_reported_lb_ipam_flap_costs_frr_nothing() {
    let lab = Lab::pair();
    let c = start(&lab, "3s", "", &[]);
    c.api.create(&service("web", &["198.51.100.10"])).unwrap();
    c.frr.wait_prefix("198.51.100.10/32", LONG);
    let before = c.settled_updates();
    // status.loadBalancer.ingress alternates between the address and
    // empty every second, as the LB-IPAM bug does.
    let start = Instant::now();
    let mut present = true;
    let mut next = start;
    while start.elapsed() < Duration::from_secs(12) {
        if Instant::now() >= next {
            present = !present;
            c.set_ingress("web", if present { &["198.51.100.10"] } else { &[] });
            next += Duration::from_secs(1);
        }
        assert!(
            c.frr.prefix("198.51.100.10/32").is_some(),
            "withdrawn after {:?}\n{}",
            start.elapsed(),
            c.node.log()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    c.set_ingress("web", &["198.51.100.10"]);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        c.updates(),
        before,
        "no UPDATE reached FRR while the address flapped"
    );
    let status = c.node.status();
    assert!(
        status["counters"]["withdrawals_absorbed"].as_u64().unwrap() >= 4,
        "{status}"
    );
    // One Advertised Event for the route, none Withdrawn.
    let events = c.api.events();
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    assert!(reasons.contains(&"Advertised"), "{events:?}");
    assert!(!reasons.contains(&"Withdrawn"), "{events:?}");
}

#[test]
fn events_when_a_route_starts_and_stops() {
    let lab = Lab::pair();
    let c = start(&lab, "2s", "", &[]);
    c.api.create(&service("web", &["198.51.100.10"])).unwrap();
    c.frr.wait_prefix("198.51.100.10/32", LONG);
    // Deleted: a definitive removal, withdrawn at once (delete_delay 0).
    c.api.delete::<Service>(Some("demo"), "web").unwrap();
    c.frr
        .wait_no_prefix("198.51.100.10/32", Duration::from_secs(5));
    let events = wait_until(Duration::from_secs(10), "both Events", || {
        let ev = c.api.events();
        let has = |r: &str| ev.iter().any(|e| e["reason"] == r);
        (has("Advertised") && has("Withdrawn")).then_some(ev)
    });
    let adv = events.iter().find(|e| e["reason"] == "Advertised").unwrap();
    let note = adv["note"]
        .as_str()
        .or(adv["message"].as_str())
        .unwrap_or_default();
    assert!(
        note.contains("node-1") && note.contains("198.51.100.10") && note.contains("tor1"),
        "{adv}"
    );
}

#[test]
fn etp_local_follows_ready_local_endpoints() {
    let lab = Lab::pair();
    let c = start(&lab, "2s", "", &[]);
    let mut svc = service("web", &["198.51.100.10"]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    c.api.create(&svc).unwrap();
    // An endpoint on another node: never advertised here.
    c.api
        .create(&endpoint_slice(
            "demo",
            "web",
            "web-1",
            &[SliceEndpoint::ready("10.0.0.5", "node-2")],
        ))
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.frr.prefix("198.51.100.10/32").is_none());
    let (code, text) = c.node.explain("198.51.100.10");
    assert_eq!(code, 1);
    assert!(text.to_lowercase().contains("local"), "{text}");
    // A terminating local endpoint: not either.
    let mut slice = endpoint_slice(
        "demo",
        "web",
        "web-1",
        &[SliceEndpoint::ready("10.0.0.6", "node-1")],
    );
    let cond = slice.endpoints.as_mut().unwrap()[0]
        .conditions
        .as_mut()
        .unwrap();
    cond.ready = Some(false);
    cond.serving = Some(true);
    cond.terminating = Some(true);
    c.api.replace(&slice_with_rv(&c, slice)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.frr.prefix("198.51.100.10/32").is_none());
    // A ready local endpoint: advertised.
    c.api
        .replace(&slice_with_rv(
            &c,
            endpoint_slice(
                "demo",
                "web",
                "web-1",
                &[SliceEndpoint::ready("10.0.0.6", "node-1")],
            ),
        ))
        .unwrap();
    c.frr.wait_prefix("198.51.100.10/32", LONG);
    // It goes: withdrawn after the hold-down.
    let gone = Instant::now();
    c.api
        .delete::<EndpointSlice>(Some("demo"), "web-1")
        .unwrap();
    c.frr
        .wait_no_prefix("198.51.100.10/32", Duration::from_secs(10));
    assert!(
        gone.elapsed() >= Duration::from_secs(2),
        "held down first: {:?}",
        gone.elapsed()
    );
}

fn slice_with_rv(c: &Cluster<'_>, mut s: EndpointSlice) -> EndpointSlice {
    let cur: EndpointSlice = c
        .api
        .get(Some("demo"), s.metadata.name.as_deref().unwrap())
        .unwrap();
    s.metadata.resource_version = cur.metadata.resource_version;
    s
}

#[test]
fn load_balancer_class_decides() {
    let lab = Lab::pair();
    let c = start(&lab, "2s", "", &[]);
    let mut other = service("other", &["198.51.100.20"]);
    other.spec.as_mut().unwrap().load_balancer_class = Some("example.com/other".into());
    c.api.create(&other).unwrap();
    let mut ours = service("ours", &["198.51.100.21"]);
    ours.spec.as_mut().unwrap().load_balancer_class = Some("holdfast.dev/bgp".into());
    c.api.create(&ours).unwrap();
    c.frr.wait_prefix("198.51.100.21/32", LONG);
    assert!(c.frr.prefix("198.51.100.20/32").is_none());
    let (_, text) = c.node.explain("198.51.100.20");
    assert!(text.contains("example.com/other"), "{text}");
    // A change of class is definitive: withdrawn at once, no hold-down.
    c.patch_service(
        "ours",
        json!({ "spec": { "loadBalancerClass": "example.com/other" } }),
    );
    c.frr
        .wait_no_prefix("198.51.100.21/32", Duration::from_secs(5));
}

#[test]
fn service_selector_decides() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        "2s",
        "service_selector = { match_labels = { bgp = \"on\" } }\n",
        &[],
    );
    let mut on = service("on", &["198.51.100.30"]);
    on.metadata.labels = Some(BTreeMap::from([("bgp".to_string(), "on".to_string())]));
    c.api.create(&on).unwrap();
    c.api.create(&service("off", &["198.51.100.31"])).unwrap();
    c.frr.wait_prefix("198.51.100.30/32", LONG);
    assert!(c.frr.prefix("198.51.100.31/32").is_none());
    let (_, text) = c.node.explain("198.51.100.31");
    assert!(
        text.contains("bgp"),
        "the explanation names the label: {text}"
    );
}

#[test]
fn the_opt_out_annotation_withdraws() {
    let lab = Lab::pair();
    let c = start(&lab, "30s", "", &[]);
    c.api.create(&service("web", &["198.51.100.40"])).unwrap();
    c.frr.wait_prefix("198.51.100.40/32", LONG);
    c.patch_service(
        "web",
        json!({ "metadata": { "annotations": { "holdfast.dev/advertise": "false" } } }),
    );
    // Definitive: withdrawn without the 30 s hold-down.
    c.frr
        .wait_no_prefix("198.51.100.40/32", Duration::from_secs(5));
}

#[test]
fn an_excluded_node_advertises_nothing() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        "2s",
        "",
        &[(
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "",
        )],
    );
    c.api.create(&service("web", &["198.51.100.50"])).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(c.frr.prefix("198.51.100.50/32").is_none());
    let (code, text) = c.node.explain("198.51.100.50");
    assert_eq!(code, 1);
    assert!(text.contains("exclude"), "{text}");
    // The label goes: advertised.
    c.api.patch::<Node>(None, "node-1", &json!({ "metadata": { "labels": { "node.kubernetes.io/exclude-from-external-load-balancers": null } } })).unwrap();
    c.frr.wait_prefix("198.51.100.50/32", LONG);
}

#[test]
fn a_cordoned_node_shuts_down_gracefully_without_the_hold_down() {
    let lab = Lab::pair();
    let c = start(&lab, "30s", "", &[]);
    c.api.create(&service("web", &["198.51.100.60"])).unwrap();
    c.frr.wait_prefix("198.51.100.60/32", LONG);
    let cordoned = std::time::Instant::now();
    c.api
        .patch::<Node>(
            None,
            "node-1",
            &json!({ "spec": { "unschedulable": true } }),
        )
        .unwrap();
    // RFC 8326: first GRACEFUL_SHUTDOWN, the route still there...
    testlab::wait_for(LONG, "the route marked GRACEFUL_SHUTDOWN", || {
        let route = c.frr.prefix("198.51.100.60/32").ok_or("no route")?;
        let list = &route["paths"][0]["community"]["list"];
        if list
            .as_array()
            .is_some_and(|l| l.iter().any(|x| x == "gracefulShutdown"))
        {
            Ok(())
        } else {
            Err(format!("{route}"))
        }
    });
    // ...then withdrawn after graceful_shutdown_wait (2 s), not the 30 s
    // hold-down: a drain is deliberate.
    c.frr
        .wait_no_prefix("198.51.100.60/32", Duration::from_secs(10));
    assert!(
        cordoned.elapsed() >= Duration::from_secs(2),
        "withdrawn {:?} after the cordon",
        cordoned.elapsed()
    );
    assert!(cordoned.elapsed() < Duration::from_secs(30));
    let (_, text) = c.node.explain("198.51.100.60");
    assert!(text.contains("cordon"), "{text}");
    c.api
        .patch::<Node>(
            None,
            "node-1",
            &json!({ "spec": { "unschedulable": false } }),
        )
        .unwrap();
    c.frr.wait_prefix("198.51.100.60/32", LONG);
}

#[test]
fn an_api_outage_and_410_touch_no_route() {
    let lab = Lab::pair();
    let c = start(&lab, "2s", "", &[]);
    c.api.create(&service("web", &["198.51.100.70"])).unwrap();
    c.api.create(&service("api", &["198.51.100.71"])).unwrap();
    c.frr.wait_prefix("198.51.100.70/32", LONG);
    c.frr.wait_prefix("198.51.100.71/32", LONG);
    let before = c.settled_updates();
    // The API server goes away (connections refused, streams cut)...
    c.api.refuse();
    c.api.drop_watches();
    wait_until(LONG, "the source to report itself unhealthy", || {
        (c.node.status()["source"]["healthy"] == false).then_some(())
    });
    // ...well past the hold-down; the routes stay.
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        c.frr.prefix("198.51.100.70/32").is_some() && c.frr.prefix("198.51.100.71/32").is_some()
    );
    // It comes back having compacted its history: the watches get 410
    // Gone and re-list.
    c.api.compact();
    c.api.resume();
    wait_until(
        Duration::from_secs(240),
        "the source to be healthy again",
        || (c.node.status()["source"]["healthy"] == true).then_some(()),
    );
    assert!(
        c.frr.prefix("198.51.100.70/32").is_some() && c.frr.prefix("198.51.100.71/32").is_some()
    );
    assert_eq!(
        c.settled_updates(),
        before,
        "nothing changed, so FRR received nothing"
    );
    // And /readyz stayed ready all along: the routes were right.
    assert!(
        c.node.metrics().contains("holdfast_source_synced"),
        "metrics answer"
    );
}

#[test]
fn a_dual_stack_service_gives_both_routes() {
    let lab = Lab::pair();
    let c = start(&lab, "2s", "", &[]);
    c.api
        .create(&service("web", &["198.51.100.80", "2001:db8:100::80"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.80/32", LONG);
    c.frr.wait_prefix("2001:db8:100::80/128", LONG);
}

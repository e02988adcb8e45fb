//! The Kubernetes source end to end: kube-rs in the holdfast daemon,
//! unmodified, against a real kube-apiserver and etcd (scripts/kube-api.sh:
//! RBAC enforced, holdfast holding the ServiceAccount token deploy/cluster
//! binds), reached from the node namespace through a bridge, the cluster
//! changed with the real kubectl, and FRR as the router. The two tests of
//! a Service list served empty by a healthy server run against
//! kube-standin, since a real server cannot be made to do that.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::*;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};
use serde_json::{Value, json};
use testlab::{Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

struct Cluster<'a> {
    kube: cluster::KubeApi,
    frr: Frr,
    node: Holdfast<'a>,
}

/// holdfast's config: peer `tor1`, the Kubernetes source, a 2 s
/// graceful shutdown, the withdrawal `hold_down`, advertisement `public`.
fn config(hold_down: &str) -> Config {
    Config::node(65001, NODE)
        .graceful_shutdown_wait("2s")
        .peer(
            Peer::new("tor1", TOR, 65000)
                .hold_time("9s")
                .connect_retry("1s"),
        )
        .kubernetes_source()
        .hold_down(hold_down)
        .advertisement(Advertisement::public("65001:100"))
}

/// The real API server with Node node-1 (`node_labels`), FRR, and holdfast
/// with `config`.
fn start<'a>(lab: &'a Lab, config: Config, node_labels: &[(&str, &str)]) -> Cluster<'a> {
    testlab::require_root();
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, node_labels);
    launch(lab, k, config)
}

/// `start` against kube-standin (no node labels).
fn start_standin<'a>(lab: &'a Lab, config: Config) -> Cluster<'a> {
    testlab::require_root();
    let k = cluster::KubeApi::standin_for_node(&lab.node, "node-1", NODE, &[]);
    launch(lab, k, config)
}

fn launch<'a>(lab: &'a Lab, k: cluster::KubeApi, config: Config) -> Cluster<'a> {
    // With zebra: bgpd alone refuses IPv6 next hops that carry a
    // link-local address (testlab/README.md), which an on-link node sends.
    let frr = Tor::new().zebra().on(lab);
    let node = k.holdfast(&lab.node, "node-1", &config.to_toml());
    frr.wait_established(NODE.parse().unwrap(), LONG);
    Cluster { kube: k, frr, node }
}

impl Cluster<'_> {
    /// The real `kubectl cordon` (or uncordon) of node-1.
    fn cordon(&self, on: bool) {
        let verb = if on { "cordon" } else { "uncordon" };
        self.kube.api.kubectl(&[verb, "node-1"]);
    }

    /// FRR's path for `prefix` carries GRACEFUL_SHUTDOWN (RFC 8326).
    fn wait_marked_graceful_shutdown(&self, prefix: &str) {
        testlab::wait_for(LONG, "the route marked GRACEFUL_SHUTDOWN", || {
            let route = self.frr.prefix(prefix).ok_or("no route")?;
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
    }

    /// UPDATEs FRR received from the node (`messageStats.updatesRecv`). The
    /// field must be there: a router that reports nothing fails the test
    /// instead of counting as "no UPDATE".
    fn updates(&self) -> u64 {
        let neighbor = self.frr.neighbor(NODE.parse().unwrap());
        match neighbor["messageStats"]["updatesRecv"].as_u64() {
            Some(n) => n,
            None => panic!("FRR reports no messageStats.updatesRecv for {NODE}: {neighbor}"),
        }
    }

    /// Waits until FRR has no route for `prefix`, polling every 20 ms, and
    /// returns how long that took from `since`.
    fn time_until_withdrawn(&self, prefix: &str, since: Instant, timeout: Duration) -> Duration {
        wait_until(timeout, &format!("FRR to drop {prefix}"), || {
            let gone = self.frr.prefix(prefix).is_none().then(|| since.elapsed());
            if gone.is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            gone
        })
    }

    fn set_local_endpoint(&self, ready: bool) {
        let mut slice = endpoint_slice(
            "demo",
            "web",
            "web-1",
            &[SliceEndpoint::ready("10.0.0.6", "node-1")],
        );
        slice.endpoints.as_mut().unwrap()[0]
            .conditions
            .as_mut()
            .unwrap()
            .ready = Some(ready);
        if self
            .kube
            .api
            .get::<EndpointSlice>(Some("demo"), "web-1")
            .is_some()
        {
            self.kube.api.replace(&slice_with_rv(self, slice)).unwrap();
        } else {
            self.kube.api.create(&slice).unwrap();
        }
    }

    /// Node node-1's taints become `taints` (key, effect), by the real
    /// `kubectl taint`: those it has and should not are removed (`key:E-`),
    /// the missing ones added.
    fn set_taints(&self, taints: &[(&str, &str)]) {
        let node: Node = self.kube.api.get(None, "node-1").expect("node-1");
        let current: Vec<(String, String)> = node
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| (t.key, t.effect))
            .collect();
        let mut args = vec!["taint".to_string(), "nodes".into(), "node-1".into()];
        for (key, effect) in &current {
            if !taints.iter().any(|(k, e)| k == key && e == effect) {
                args.push(format!("{key}:{effect}-"));
            }
        }
        for (key, effect) in taints {
            if !current.iter().any(|(k, e)| k == key && e == effect) {
                args.push(format!("{key}:{effect}"));
            }
        }
        if args.len() > 3 {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            self.kube.api.kubectl(&args);
        }
    }

    fn set_ingress(&self, name: &str, ips: &[&str]) {
        let ingress: Vec<_> = ips
            .iter()
            .map(|ip| json!({ "ip": ip, "ipMode": "VIP" }))
            .collect();
        self.kube
            .api
            .patch_status::<Service>(
                Some("demo"),
                name,
                &json!({ "loadBalancer": { "ingress": ingress } }),
            )
            .unwrap();
    }

    fn patch_service(&self, name: &str, patch: serde_json::Value) {
        self.kube
            .api
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
    let c = start(&lab, config("3s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.10"]))
        .unwrap();
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
    let events = c.kube.api.events();
    let reasons: Vec<&str> = events.iter().filter_map(|e| e["reason"].as_str()).collect();
    assert!(reasons.contains(&"Advertised"), "{events:?}");
    assert!(!reasons.contains(&"Withdrawn"), "{events:?}");
}

#[test]
fn events_when_a_route_starts_and_stops() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.10"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.10/32", LONG);
    // Deleted: a definitive removal, withdrawn at once (delete_delay 0).
    c.kube.api.delete::<Service>(Some("demo"), "web").unwrap();
    c.frr
        .wait_no_prefix("198.51.100.10/32", Duration::from_secs(5));
    let events = wait_until(Duration::from_secs(10), "both Events", || {
        let ev = c.kube.api.events();
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
    let c = start(&lab, config("30s"), &[]);
    let mut svc = service("web", &["198.51.100.10"]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    c.kube.api.create(&svc).unwrap();
    // An endpoint on another node: never advertised here.
    c.kube
        .api
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
    c.kube.api.replace(&slice_with_rv(&c, slice)).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.frr.prefix("198.51.100.10/32").is_none());
    // A ready local endpoint: advertised.
    c.kube
        .api
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
    // Its slice is deleted: this node's datapath has nothing to send the
    // traffic to, so the route goes after local_endpoint_delay (0s), not
    // after the 30 s hold-down.
    let gone = Instant::now();
    c.kube
        .api
        .delete::<EndpointSlice>(Some("demo"), "web-1")
        .unwrap();
    let took = c.time_until_withdrawn("198.51.100.10/32", gone, Duration::from_secs(40));
    println!("slice deleted -> withdrawn at FRR in {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "withdrawn {took:?} after the slice was deleted, not at once"
    );
}

#[test]
fn etp_local_last_endpoint_not_ready_is_withdrawn_at_once_not_after_the_hold_down() {
    let lab = Lab::pair();
    // The default [stability] but for a 30 s hold-down, which makes "at
    // once" and "after the hold-down" impossible to confuse.
    let c = start(&lab, config("30s"), &[]);
    let mut svc = service("web", &["198.51.100.11"]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    c.kube.api.create(&svc).unwrap();
    c.set_local_endpoint(true);
    c.frr.wait_prefix("198.51.100.11/32", LONG);
    let changed = Instant::now();
    c.set_local_endpoint(false);
    let took = c.time_until_withdrawn("198.51.100.11/32", changed, Duration::from_secs(40));
    println!("last local endpoint not ready -> withdrawn at FRR in {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "withdrawn {took:?} after the last local endpoint went not ready\n{}",
        c.node.log()
    );
    let (code, text) = c.node.explain("198.51.100.11");
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains(
            "no ready local endpoint on node \"node-1\": withdrawn after stability.local_endpoint_delay 0s"
        ),
        "explain names the rule: {text}"
    );
    // Ready again: advertised again.
    c.set_local_endpoint(true);
    c.frr.wait_prefix("198.51.100.11/32", LONG);
}

fn slice_with_rv(c: &Cluster<'_>, mut s: EndpointSlice) -> EndpointSlice {
    let cur: EndpointSlice = c
        .kube
        .api
        .get(Some("demo"), s.metadata.name.as_deref().unwrap())
        .unwrap();
    s.metadata.resource_version = cur.metadata.resource_version;
    s
}

#[test]
fn load_balancer_class_decides() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s"), &[]);
    let mut other = service("other", &["198.51.100.20"]);
    other.spec.as_mut().unwrap().load_balancer_class = Some("example.com/other".into());
    c.kube.api.create(&other).unwrap();
    let mut ours = service("ours", &["198.51.100.21"]);
    ours.spec.as_mut().unwrap().load_balancer_class = Some("holdfast.dev/bgp".into());
    c.kube.api.create(&ours).unwrap();
    c.frr.wait_prefix("198.51.100.21/32", LONG);
    assert!(c.frr.prefix("198.51.100.20/32").is_none());
    let (_, text) = c.node.explain("198.51.100.20");
    assert!(text.contains("example.com/other"), "{text}");
    // The API server refuses a change of class ("may not change once
    // set"); the class goes only with the type. That is definitive:
    // withdrawn at once, no hold-down.
    let refused = c.kube.api.patch::<Service>(
        Some("demo"),
        "ours",
        &json!({ "spec": { "loadBalancerClass": "example.com/other" } }),
    );
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.contains("may not change once set")),
        "{refused:?}"
    );
    c.patch_service("ours", json!({ "spec": { "type": "ClusterIP" } }));
    c.frr
        .wait_no_prefix("198.51.100.21/32", Duration::from_secs(5));
}

#[test]
fn service_selector_decides() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        config("2s").with_advertisement("public", |a| {
            a.service_selector(Selector::labels(&[("bgp", "on")]))
        }),
        &[],
    );
    // "off" is created first: the Services watch delivers in order, so once
    // "on" is advertised holdfast has seen "off" too, and explain can be
    // asked without racing the watch.
    c.kube
        .api
        .create(&service("off", &["198.51.100.31"]))
        .unwrap();
    let mut on = service("on", &["198.51.100.30"]);
    on.metadata.labels = Some(BTreeMap::from([("bgp".to_string(), "on".to_string())]));
    c.kube.api.create(&on).unwrap();
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
    let c = start(&lab, config("30s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.40"]))
        .unwrap();
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
        config("2s"),
        &[(
            "node.kubernetes.io/exclude-from-external-load-balancers",
            "",
        )],
    );
    c.kube
        .api
        .create(&service("web", &["198.51.100.50"]))
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(c.frr.prefix("198.51.100.50/32").is_none());
    let (code, text) = c.node.explain("198.51.100.50");
    assert_eq!(code, 1);
    assert!(text.contains("exclude"), "{text}");
    // The label goes (the real `kubectl label ... KEY-`): advertised.
    c.kube.api.kubectl(&[
        "label",
        "node",
        "node-1",
        "node.kubernetes.io/exclude-from-external-load-balancers-",
    ]);
    c.frr.wait_prefix("198.51.100.50/32", LONG);
}

#[test]
fn a_cordoned_node_shuts_down_gracefully_without_the_hold_down() {
    let lab = Lab::pair();
    let c = start(&lab, config("30s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.60"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.60/32", LONG);
    let cordoned = std::time::Instant::now();
    c.cordon(true);
    // RFC 8326: first GRACEFUL_SHUTDOWN, the route still there...
    c.wait_marked_graceful_shutdown("198.51.100.60/32");
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
    c.cordon(false);
    c.frr.wait_prefix("198.51.100.60/32", LONG);
}

/// SIGTERM inside the cordon's graceful_shutdown_wait: the routes were on
/// their way out, so the exit withdraws them (then Cease) instead of
/// leaving them stale at FRR, still marked GRACEFUL_SHUTDOWN, for
/// restart_time.
#[test]
fn sigterm_during_a_cordon_withdraws_instead_of_keeping_stale_routes() {
    let lab = Lab::pair();
    let mut c = start(&lab, config("30s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.61"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.61/32", LONG);
    c.cordon(true);
    c.wait_marked_graceful_shutdown("198.51.100.61/32");
    c.node.kill(testlab::Signal::Term);
    assert!(c.node.wait_exit().success(), "{}", c.node.log());
    // Kept through graceful restart, the path would stay (stale) for 120 s.
    testlab::wait_for(Duration::from_secs(10), "FRR to hold no path", || {
        match c.frr.prefix("198.51.100.61/32") {
            None => Ok(()),
            Some(route) => {
                assert_ne!(
                    route["paths"][0]["stale"], true,
                    "kept stale through graceful restart: {route}"
                );
                Err(format!("{route}"))
            }
        }
    });
    c.frr
        .wait_state_not(NODE.parse().unwrap(), "Established", LONG);
    let n = c.frr.neighbor(NODE.parse().unwrap());
    assert_eq!(
        n["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{n}"
    );
    let log = c.node.log();
    assert!(
        log.contains("exit: routes withdrawn after graceful shutdown (RFC 8326): this node advertises nothing"),
        "{log}"
    );
}

#[test]
fn etp_local_endpoint_delay_keeps_the_route_that_long_and_explain_says_so() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        config("30s").stability(
            Stability::new()
                .withdraw_hold_down("30s")
                .local_endpoint_delay("4s"),
        ),
        &[],
    );
    let mut svc = service("web", &["198.51.100.12"]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    c.kube.api.create(&svc).unwrap();
    c.set_local_endpoint(true);
    c.frr.wait_prefix("198.51.100.12/32", LONG);
    let changed = Instant::now();
    c.set_local_endpoint(false);
    // Within the delay: still advertised, and explain says until when.
    let text = wait_until(
        Duration::from_secs(3),
        "explain to name local_endpoint_delay",
        || {
            let (code, text) = c.node.explain("198.51.100.12");
            (code == 0 && text.contains("no ready local endpoint is left on this node: withdrawn after stability.local_endpoint_delay 4s, in "))
            .then_some(text)
        },
    );
    assert!(
        text.contains("gone from demo/web: no ready local endpoint on node \"node-1\""),
        "{text}"
    );
    let took = c.time_until_withdrawn("198.51.100.12/32", changed, Duration::from_secs(40));
    println!(
        "last local endpoint not ready, local_endpoint_delay 4s -> withdrawn at FRR in {took:?}"
    );
    assert!(
        took >= Duration::from_secs(4) && took < Duration::from_secs(7),
        "withdrawn {took:?} after the change, want the 4 s delay (and not the 30 s hold-down)"
    );
}

#[test]
fn the_automatic_not_ready_taints_keep_the_route_and_a_configured_taint_withdraws_it() {
    let lab = Lab::pair();
    let c = start(
        &lab,
        config("30s").drain_taints(&["example.com/maintenance"]),
        &[],
    );
    c.kube
        .api
        .create(&service("web", &["198.51.100.65"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.65/32", LONG);
    let before = c.settled_updates();
    // What the node lifecycle controller adds on its own when the kubelet
    // stops reporting.
    c.set_taints(&[
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
    ]);
    wait_until(LONG, "the source to see the taints", || {
        let node: Node = c.kube.api.get(None, "node-1")?;
        (node.spec?.taints?.len() == 2).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        c.frr.prefix("198.51.100.65/32").is_some(),
        "an automatic taint withdrew the route\n{}",
        c.node.log()
    );
    assert_eq!(c.updates(), before, "FRR received an UPDATE for a taint");
    let (code, text) = c.node.explain("198.51.100.65");
    assert_eq!(code, 0, "{text}");
    // The operator's own taint: a deliberate drain, withdrawn at once.
    let tainted = Instant::now();
    c.set_taints(&[
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("example.com/maintenance", "NoExecute"),
    ]);
    let took = c.time_until_withdrawn("198.51.100.65/32", tainted, Duration::from_secs(40));
    println!("configured taint -> withdrawn at FRR in {took:?}");
    assert!(took < Duration::from_secs(3), "withdrawn after {took:?}");
    let (code, text) = c.node.explain("198.51.100.65");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("speaker.drain_taints"), "{text}");
    c.set_taints(&[]);
    c.frr.wait_prefix("198.51.100.65/32", LONG);
}

#[test]
fn a_vip_shared_by_two_services_stays_until_both_are_deleted() {
    let lab = Lab::pair();
    let c = start(&lab, config("30s"), &[]);
    for name in ["web-tcp", "web-udp"] {
        let mut svc = service(name, &["198.51.100.90"]);
        // How MetalLB lets two Services share one address; holdfast needs
        // no annotation, the address is simply given twice.
        svc.metadata.annotations = Some(BTreeMap::from([(
            "metallb.universe.tf/allow-shared-ip".to_string(),
            "web".to_string(),
        )]));
        c.kube.api.create(&svc).unwrap();
    }
    c.frr.wait_prefix("198.51.100.90/32", LONG);
    let before = c.settled_updates();
    c.kube
        .api
        .delete::<Service>(Some("demo"), "web-tcp")
        .unwrap();
    // Until the daemon has taken the deletion in: the route names the
    // other Service, or is no longer plainly advertised.
    let route = wait_until(LONG, "the daemon to take the deletion in", || {
        let status = c.node.status();
        let route = status["routes"]
            .as_array()?
            .iter()
            .find(|r| r["prefix"] == "198.51.100.90/32")
            .cloned()
            .unwrap_or_default();
        (route["service"] == "demo/web-udp" || route["state"] != "advertised").then_some(route)
    });
    assert_eq!(route["state"], "advertised", "{route}");
    assert_eq!(route["service"], "demo/web-udp", "{route}");
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.frr.prefix("198.51.100.90/32").is_some());
    assert_eq!(
        c.updates(),
        before,
        "deleting one of two Services sent FRR an UPDATE"
    );
    // Both gone: a definitive removal, withdrawn at once (delete_delay 0),
    // not after the 30 s hold-down.
    let deleted = Instant::now();
    c.kube
        .api
        .delete::<Service>(Some("demo"), "web-udp")
        .unwrap();
    let took = c.time_until_withdrawn("198.51.100.90/32", deleted, Duration::from_secs(40));
    println!("both Services deleted -> withdrawn at FRR in {took:?}");
    assert!(took < Duration::from_secs(3), "withdrawn after {took:?}");
    assert_eq!(c.updates(), before + 1, "one UPDATE: the withdrawal");
}

#[test]
fn an_api_outage_and_410_touch_no_route() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.70"]))
        .unwrap();
    c.kube
        .api
        .create(&service("api", &["198.51.100.71"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.70/32", LONG);
    c.frr.wait_prefix("198.51.100.71/32", LONG);
    let before = c.settled_updates();
    // The API server goes away (connections refused, streams cut)...
    c.kube.api.outage();
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
    c.kube.api.restore_compacted();
    wait_until(
        Duration::from_secs(240),
        "the source to be healthy again",
        || (c.node.status()["source"]["healthy"] == true).then_some(()),
    );
    // Every watcher was told so by the real server, and listed again.
    let log = c.node.log();
    for watcher in ["services", "endpointslices", "node \"node-1\""] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("watcher={watcher} "))
                    && l.contains("too old resource version")),
            "no 410 Gone for the {watcher} watcher:\n{log}"
        );
    }
    assert!(
        c.frr.prefix("198.51.100.70/32").is_some() && c.frr.prefix("198.51.100.71/32").is_some()
    );
    assert_eq!(
        c.settled_updates(),
        before,
        "nothing changed, so FRR received nothing"
    );
    // And the daemon is ready again, its source synced and healthy.
    let (code, body) = c.node.http_get("/readyz");
    assert_eq!(
        (code, body.trim()),
        (200, "ready"),
        "/readyz after the outage"
    );
    assert_eq!(c.node.metric("holdfast_source_synced", &[]), 1.0);
    assert_eq!(c.node.metric("holdfast_source_healthy", &[]), 1.0);
}

#[test]
fn a_dual_stack_service_gives_both_routes() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s"), &[]);
    c.kube
        .api
        .create(&service("web", &["198.51.100.80", "2001:db8:100::80"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.80/32", LONG);
    c.frr.wait_prefix("2001:db8:100::80/128", LONG);
}

/// Makes the daemon's watchers re-list: the versions they hold become too
/// old (410 Gone).
fn force_relist(c: &Cluster<'_>) {
    c.kube.api.restore_compacted();
}

const FOUR: [&str; 4] = [
    "198.51.100.101",
    "198.51.100.102",
    "198.51.100.103",
    "198.51.100.104",
];

/// Four Services, one VIP each, at FRR.
fn four_services(c: &Cluster<'_>) {
    for (i, vip) in FOUR.iter().enumerate() {
        c.kube
            .api
            .create(&service(&format!("s{i}"), &[vip]))
            .unwrap();
    }
    for vip in FOUR {
        c.frr.wait_prefix(&format!("{vip}/32"), LONG);
    }
}

/// Waits until `holdfast status` lists each of the four VIPs in `state`;
/// returns their routes.
fn wait_four_in_state(c: &Cluster<'_>, state: &str) -> Vec<serde_json::Value> {
    wait_until(LONG, &format!("the four routes {state}"), || {
        let status = c.node.status();
        let routes: Vec<serde_json::Value> = status["routes"]
            .as_array()?
            .iter()
            .filter(|r| {
                FOUR.iter()
                    .any(|v| r["prefix"] == format!("{v}/32").as_str())
            })
            .cloned()
            .collect();
        (routes.len() == 4 && routes.iter().all(|r| r["state"] == state)).then_some(routes)
    })
}

fn frr_has_all_four(c: &Cluster<'_>) -> bool {
    FOUR.iter()
        .all(|v| c.frr.prefix(&format!("{v}/32")).is_some())
}

#[test]
fn an_empty_service_list_or_a_missing_node_holds_every_route_down_instead_of_withdrawing() {
    let lab = Lab::pair();
    // A long hold-down: what the test sees is the hold-down, not a race.
    let c = start_standin(&lab, config("20m"));
    four_services(&c);
    let before = c.settled_updates();

    // An etcd restore, the wrong cluster: the API server lists no Service
    // and says it is healthy. Every VIP is held down, not deleted.
    let standin = c
        .kube
        .api
        .standin("a Service list served empty by a healthy server");
    standin.serve_empty::<Service>();
    force_relist(&c);
    let routes = wait_four_in_state(&c, "held-down");
    for r in &routes {
        assert_eq!(r["absence"], "vanished", "{r}");
    }
    assert!(
        c.node
            .log()
            .contains("went missing from the API server at once"),
        "{}",
        c.node.log()
    );
    assert!(frr_has_all_four(&c), "a route left FRR");
    // The Services are listed again: nothing was ever sent.
    standin.serve_stored::<Service>();
    force_relist(&c);
    wait_four_in_state(&c, "advertised");
    assert!(frr_has_all_four(&c));
    assert_eq!(c.settled_updates(), before, "FRR received an UPDATE");

    // This node's Node object deleted: an absence too, not a drain (no
    // GRACEFUL_SHUTDOWN, no withdrawal).
    c.kube.api.delete::<Node>(None, "node-1").unwrap();
    let routes = wait_four_in_state(&c, "held-down");
    for r in &routes {
        assert_eq!(r["absence"], "vanished", "{r}");
    }
    assert!(frr_has_all_four(&c), "a route left FRR");
    c.kube
        .api
        .create(&kube_standin::fixtures::node("node-1", NODE, &[]))
        .unwrap();
    wait_four_in_state(&c, "advertised");
    assert!(frr_has_all_four(&c));
    assert_eq!(c.settled_updates(), before, "FRR received an UPDATE");
}

#[test]
fn an_empty_service_list_is_withdrawn_after_the_hold_down_through_the_guard() {
    let lab = Lab::pair();
    let c = start_standin(
        &lab,
        config("2s").stability(
            Stability::new()
                .withdraw_hold_down("2s")
                .withdraw_rate("2/s"),
        ),
    );
    four_services(&c);
    c.kube
        .api
        .standin("a Service list served empty by a healthy server")
        .serve_empty::<Service>();
    force_relist(&c);
    for vip in FOUR {
        c.time_until_withdrawn(&format!("{vip}/32"), Instant::now(), LONG);
    }
    // The hold-down ran out for all four at once: the guard let two go
    // (max_withdraw_fraction 0.5) and held two back.
    assert_eq!(
        c.node.metric("holdfast_withdrawals_deferred_total", &[]),
        2.0
    );
}

#[test]
fn a_node_shutting_down_then_deleted_stays_withdrawn() {
    let lab = Lab::pair();
    let c = start(&lab, config("30s"), &[]);
    four_services(&c);
    // kubelet's graceful node shutdown marks the Node: the daemon drains
    // (GRACEFUL_SHUTDOWN for graceful_shutdown_wait, 2 s, then withdrawn).
    c.kube
        .api
        .patch_status::<Node>(
            None,
            "node-1",
            &json!({ "conditions": [{
                "type": "Ready",
                "status": "False",
                "reason": "KubeletNotReady",
                "message": "node is shutting down",
            }] }),
        )
        .unwrap();
    for vip in FOUR {
        c.time_until_withdrawn(&format!("{vip}/32"), Instant::now(), LONG);
    }
    // The Node object is then deleted: its VIPs are held down at the
    // source, but the drain the node started stays, so nothing comes back.
    c.kube.api.delete::<Node>(None, "node-1").unwrap();
    wait_four_in_state(&c, "held-down");
    // Several of the main loop's one-second ticks, which follow the Node.
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        c.node.status()["drain"]["state"],
        "drained",
        "the drain the node started ended"
    );
    for vip in FOUR {
        assert!(
            c.frr.prefix(&format!("{vip}/32")).is_none(),
            "{vip} came back at FRR"
        );
    }
}

// ----- RBAC least privilege -----
//
// holdfast runs with the token of the ServiceAccount that deploy/cluster
// binds, so the shipped ClusterRole is all it may do. Each verb on each
// resource of that role is taken away in turn while holdfast runs with a
// route at FRR; what holdfast does with that permission is then made to
// happen (the API server restarts, so every watch lists again; a Service
// comes, goes and comes back, so Events are created and patched; the
// BGPNodeStatus is deleted, so it is applied again). holdfast must say
// which permission it lacks, pointing at the file that grants it, and keep
// its route. A permission whose absence holdfast never notices is one the
// role grants beyond what the code uses: the test fails on it.

/// One permission: API group, resource (or resource/subresource), verb.
type Permission = (String, String, String);

/// Every (group, resource, verb) the role grants, in its order.
fn permissions(role: &Value) -> Vec<Permission> {
    let mut all = Vec::new();
    for rule in role["rules"].as_array().expect("rules") {
        let strings = |key: &str| -> Vec<String> {
            rule[key]
                .as_array()
                .unwrap_or_else(|| panic!("rule without {key}: {rule}"))
                .iter()
                .map(|v| v.as_str().expect("a string").to_string())
                .collect()
        };
        for group in strings("apiGroups") {
            for resource in strings("resources") {
                for verb in strings("verbs") {
                    all.push((group.clone(), resource.clone(), verb.clone()));
                }
            }
        }
    }
    all
}

/// The role with every permission but `without`, one rule per permission.
fn role_without(shipped: &Value, without: &Permission) -> Value {
    let rules: Vec<Value> = permissions(shipped)
        .into_iter()
        .filter(|p| p != without)
        .map(|(group, resource, verb)| {
            serde_json::json!({ "apiGroups": [group], "resources": [resource], "verbs": [verb] })
        })
        .collect();
    let mut role = shipped.clone();
    role["rules"] = Value::Array(rules);
    role
}

fn apply_role(k: &cluster::KubeApi, role: &Value) {
    let mut role = role.clone();
    for key in [
        "resourceVersion",
        "uid",
        "creationTimestamp",
        "managedFields",
    ] {
        role["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove(key);
    }
    k.api
        .real()
        .server
        .kubectl_in(&["replace", "-f", "-"], &role.to_string());
}

/// The node's BGPNodeStatus says `advertised` routes.
fn node_status_advertises(k: &cluster::KubeApi, advertised: u64) -> bool {
    let out = k
        .api
        .real()
        .server
        .try_kubectl_in(&["get", "bgpnodestatus", "node-1", "-o", "json"], "");
    out.ok()
        .and_then(|o| serde_json::from_str::<Value>(&o).ok())
        .is_some_and(|o| o["status"]["routes"]["advertised"] == advertised)
}

#[test]
fn every_permission_of_the_shipped_role_is_used_and_its_absence_is_reported_with_routes_kept() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s"), &[]);
    let (k, frr, node) = (&c.kube, &c.frr, &c.node);
    const VIP: &str = "198.51.100.10";
    k.api.create(&service("web", &[VIP])).unwrap();
    frr.wait_prefix(&format!("{VIP}/32"), LONG);

    let shipped: Value =
        serde_json::from_str(
            &k.api
                .kubectl(&["get", "clusterrole", "holdfast", "-o", "json"]),
        )
        .expect("the ClusterRole as JSON");
    let all = permissions(&shipped);
    println!("the shipped ClusterRole grants {} permissions", all.len());
    assert!(all.len() >= 10, "{shipped}");
    let mut unused = Vec::new();
    for (i, permission) in all.iter().enumerate() {
        let (group, resource, verb) = permission;
        let flap = format!("flap-{i}");
        let flap_vip = format!("198.51.100.{}", 100 + i);
        apply_role(k, &role_without(&shipped, permission));
        let from = node.log().len();

        // Everything holdfast does with the API, made to happen again: the
        // restart makes every watch list again. (A restarted server refuses
        // requests for a moment whatever the role says, its RBAC cache not
        // filled yet; a refusal of this permission then still shows that
        // holdfast asks for it, which is what is tested.)
        k.api.restore_compacted();
        k.api
            .kubectl(&["delete", "bgpnodestatus", "node-1", "--ignore-not-found"]);
        // Advertised (an Event created), deleted (Withdrawn, created),
        // back (Advertised again: the first Event's series patched). Where
        // the permission taken away hides the Service, nothing reaches
        // FRR: the waits are bounded and their outcome is not the test's.
        let flap_prefix = format!("{flap_vip}/32");
        let flapping = service(&flap, &[&flap_vip]);
        k.api.create(&flapping).unwrap();
        testlab::wait::wait_until_opt(Duration::from_secs(5), || {
            frr.prefix(&flap_prefix).map(drop)
        });
        k.api.delete::<Service>(Some("demo"), &flap).unwrap();
        testlab::wait::wait_until_opt(Duration::from_secs(5), || {
            frr.prefix(&flap_prefix).is_none().then_some(())
        });
        k.api.create(&flapping).unwrap();

        // The API server's own words name the verb and the resource; the
        // rest of the line says where the grant lives.
        let want = format!("cannot {verb} resource \\\"{resource}\\\"");
        let want_plain = format!("cannot {verb} resource \"{resource}\"");
        // The node status writer writes only a status that changed (and
        // retries 30 s after a failure): every 10 s a second Service comes
        // or goes, so that its route count keeps changing until the
        // refusal shows.
        let nudge = service(&format!("nudge-{i}"), &[&format!("198.51.100.{}", 200 + i)]);
        let mut nudged = false;
        let mut found = None;
        for _ in 0..9 {
            found = testlab::wait::wait_until_opt(Duration::from_secs(10), || {
                let log = node.log();
                log.get(from..)?
                    .lines()
                    .find(|l| {
                        l.contains("holdfast::") && (l.contains(&want) || l.contains(&want_plain))
                    })
                    .map(str::to_owned)
            });
            if found.is_some() {
                break;
            }
            if nudged {
                k.api
                    .delete::<Service>(Some("demo"), &format!("nudge-{i}"))
                    .unwrap();
            } else {
                k.api.create(&nudge).unwrap();
            }
            nudged = !nudged;
        }
        if nudged {
            k.api
                .delete::<Service>(Some("demo"), &format!("nudge-{i}"))
                .unwrap();
        }
        match found {
            None => unused.push(format!("{verb} {resource} (group {group:?})")),
            Some(line) => {
                println!("without {verb} {resource}: {line}");
                assert!(
                    line.contains("deploy/cluster/rbac.yaml"),
                    "the message does not say where the permission is granted: {line}"
                );
            }
        }
        assert!(
            frr.prefix(&format!("{VIP}/32")).is_some(),
            "{VIP} left FRR while holdfast lacked {verb} {resource}\n{}",
            node.log()
        );

        // The permission back: holdfast recovers on its own.
        apply_role(k, &shipped);
        k.api.restore_compacted();
        wait_until(
            Duration::from_secs(120),
            &format!("holdfast to recover after {verb} {resource} came back"),
            || {
                let status = node.status();
                (status["source"]["healthy"] == true
                    && frr.prefix(&format!("{flap_vip}/32")).is_some()
                    && node_status_advertises(k, 2))
                .then_some(())
            },
        );
        k.api.delete::<Service>(Some("demo"), &flap).unwrap();
        frr.wait_no_prefix(&format!("{flap_vip}/32"), LONG);
    }
    assert!(
        unused.is_empty(),
        "the shipped ClusterRole grants what holdfast never uses (no request of it was refused when it was taken away): {unused:?}"
    );
    assert!(frr.prefix(&format!("{VIP}/32")).is_some());
}

/// Two sources at once, each with its own health: the API server away
/// never touches the VIP file's routes, a broken VIP file never touches
/// the Services'.
/// Whether the source `name` is healthy, as `holdfast status` says.
fn healthy(status: &Value, name: &str) -> Option<bool> {
    status["sources"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == name)?["healthy"]
        .as_bool()
}

#[test]
fn two_sources_at_once_one_broken_leaves_the_other_followed() {
    let lab = Lab::pair();
    let c = start(&lab, config("2s").and_file_source("apiserver"), &[]);
    c.node.write_vips("[[vip]]\naddress = \"198.51.100.80\"\n");
    c.kube
        .api
        .create(&service("web", &["198.51.100.81"]))
        .unwrap();
    c.frr.wait_prefix("198.51.100.80/32", LONG);
    c.frr.wait_prefix("198.51.100.81/32", LONG);
    let status = c.node.status();
    let route_source = |status: &Value, prefix: &str| {
        status["routes"]
            .as_array()
            .and_then(|r| r.iter().find(|r| r["prefix"] == prefix))
            .map(|r| r["source"].clone())
    };
    assert_eq!(
        route_source(&status, "198.51.100.80/32"),
        Some(json!("apiserver"))
    );
    assert_eq!(
        route_source(&status, "198.51.100.81/32"),
        Some(json!("kubernetes"))
    );

    // The API server goes away: the Kubernetes source is unhealthy, the
    // file is not.
    c.kube.api.outage();
    wait_until(
        LONG,
        "the Kubernetes source to report itself unhealthy",
        || {
            let s = c.node.status();
            (healthy(&s, "kubernetes") == Some(false) && healthy(&s, "apiserver") == Some(true))
                .then_some(())
        },
    );
    // The file drops its VIP: withdrawn after the 2 s hold-down...
    c.node.write_vips("");
    c.frr.wait_no_prefix("198.51.100.80/32", LONG);
    // ...while the Service's stands, well past it.
    std::thread::sleep(Duration::from_secs(4));
    assert!(c.frr.prefix("198.51.100.81/32").is_some());
    let (_, why) = c.node.explain("198.51.100.81");
    assert!(
        why.contains("its source \"kubernetes\" is unhealthy"),
        "{why}"
    );

    // The reverse: the API back, the VIP file broken.
    c.kube.api.restore_compacted();
    wait_until(
        Duration::from_secs(240),
        "the Kubernetes source to be healthy",
        || (healthy(&c.node.status(), "kubernetes") == Some(true)).then_some(()),
    );
    c.node.write_vips("[[vip]]\naddress = \"198.51.100.80\"\n");
    c.frr.wait_prefix("198.51.100.80/32", LONG);
    c.node.write_vips("[[vip]\naddress = \"198.51.100.80\"\n");
    wait_until(LONG, "the file source to report itself unhealthy", || {
        (healthy(&c.node.status(), "apiserver") == Some(false)).then_some(())
    });
    // The Service goes: withdrawn (delete_delay 0)...
    c.kube.api.delete::<Service>(Some("demo"), "web").unwrap();
    c.frr.wait_no_prefix("198.51.100.81/32", LONG);
    // ...while the broken file's VIP stands.
    std::thread::sleep(Duration::from_secs(4));
    assert!(c.frr.prefix("198.51.100.80/32").is_some());
}

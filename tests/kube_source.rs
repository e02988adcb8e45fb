//! The Kubernetes source against kube-standin: kube-rs runs unmodified
//! against an in-process API server that speaks the real list/watch
//! protocol (resourceVersions, chunked watch streams, bookmarks, 410 Gone,
//! dropped and stalled connections). Loopback only; no root.

mod common;

use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use holdfast::config::{self, Config};
use holdfast::model::Absence;
use holdfast::model::SourceSnapshot;
use holdfast::source::kubernetes::{
    self, ADVERTISE_ANNOTATION, EXCLUDE_LABEL, EventLimits, Handle, Options,
};
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_standin::StandIn;
use kube_standin::fixtures::{self, SliceEndpoint};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use common::config::{Advertisement, Config as Toml, Peer, Selector};

const NODE: &str = "n1";
/// Generous: real sockets on a shared two-core machine.
const DEADLINE: Duration = Duration::from_secs(30);

fn ip(text: &str) -> IpAddr {
    text.parse().expect("test address")
}

/// The config of these tests, parsed: AS 65001, the Kubernetes source,
/// peer tor1; `more` adds to it.
fn cfg(more: impl FnOnce(Toml) -> Toml) -> Arc<Config> {
    let text = more(Toml::new().asn(65001).kubernetes_source().peer(Peer::new(
        "tor1",
        "192.0.2.1",
        65000,
    )))
    .to_toml();
    match config::parse(Path::new("t.toml"), &text) {
        Ok(c) => Arc::new(c),
        Err(diags) => panic!("test config invalid: {diags:?}"),
    }
}

/// Test timers: a 2 s read timeout, bookmarks every 300 ms, short backoff.
fn options() -> Options {
    Options {
        read_timeout: Duration::from_secs(2),
        watch_timeout: Duration::from_secs(60),
        backoff_min: Duration::from_millis(100),
        backoff_max: Duration::from_millis(500),
        ..Options::new(NODE)
    }
}

struct Harness {
    standin: StandIn,
    source: Handle,
    config: watch::Sender<Arc<Config>>,
    snapshots: mpsc::UnboundedReceiver<SourceSnapshot>,
    _dir: tempfile::TempDir,
}

/// A stand-in holding node n1 and whatever `setup` creates, and the source
/// watching it.
async fn start(config: Arc<Config>, options: Options, setup: impl FnOnce(&StandIn)) -> Harness {
    let standin = StandIn::start().expect("stand-in starts");
    standin.set_bookmark_interval(Duration::from_millis(300));
    standin
        .create(&fixtures::node(NODE, "192.0.2.11", &[]))
        .expect("node");
    setup(&standin);
    let dir = tempfile::tempdir().expect("temp dir");
    let path = standin.kubeconfig(dir.path()).expect("kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("kubeconfig parses");
    let client_config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kube config");
    let client =
        kube::Client::try_from(kubernetes::client_config(client_config, &options)).expect("client");
    let (config_tx, config_rx) = watch::channel(config);
    let (snapshot_tx, mut snapshot_rx) = watch::channel(SourceSnapshot::default());
    let source = kubernetes::spawn(client, options, config_rx, snapshot_tx);
    // Every snapshot the source sends, in order (watch keeps only the
    // latest: this task reads each as it comes).
    let (tx, snapshots) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while snapshot_rx.changed().await.is_ok() {
            let snapshot = snapshot_rx.borrow_and_update().clone();
            if tx.send(snapshot).is_err() {
                return;
            }
        }
    });
    Harness {
        standin,
        source,
        config: config_tx,
        snapshots,
        _dir: dir,
    }
}

impl Harness {
    /// Waits for the first snapshot `pred` accepts; returns it and the ones
    /// before it.
    async fn until(
        &mut self,
        what: &str,
        mut pred: impl FnMut(&SourceSnapshot) -> bool,
    ) -> (SourceSnapshot, Vec<SourceSnapshot>) {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut skipped = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, self.snapshots.recv()).await {
                Ok(Some(s)) if pred(&s) => return (s, skipped),
                Ok(Some(s)) => skipped.push(s),
                Ok(None) => panic!("snapshots ended while waiting for {what}"),
                Err(_) => panic!("no snapshot with {what} within {DEADLINE:?}; saw {skipped:#?}"),
            }
        }
    }

    /// The first healthy snapshot whose VIPs are exactly `want`.
    async fn vips(&mut self, want: &[&str]) -> SourceSnapshot {
        let want: Vec<IpAddr> = want.iter().map(|a| ip(a)).collect();
        let (s, skipped) = self
            .until(&format!("VIPs {want:?}"), |s| {
                s.healthy && s.synced && s.vips.keys().copied().collect::<Vec<_>>() == want
            })
            .await;
        for earlier in &skipped {
            assert!(
                earlier.synced || earlier.vips.is_empty(),
                "unsynced snapshot with VIPs: {earlier:#?}"
            );
        }
        s
    }

    /// Everything sent within `window`.
    async fn collect_for(&mut self, window: Duration) -> Vec<SourceSnapshot> {
        let deadline = tokio::time::Instant::now() + window;
        let mut out = Vec::new();
        while let Ok(Some(s)) = tokio::time::timeout_at(deadline, self.snapshots.recv()).await {
            out.push(s);
        }
        out
    }

    fn set_ingress(&self, name: &str, ips: &[&str]) {
        let ingress: Vec<Value> = ips.iter().map(|ip| json!({"ip": ip})).collect();
        self.standin
            .patch_status::<Service>(
                Some("default"),
                name,
                &json!({"loadBalancer": {"ingress": ingress}}),
            )
            .expect("patch status");
    }

    fn patch_service(&self, name: &str, patch: Value) {
        self.standin
            .patch::<Service>(Some("default"), name, &patch)
            .expect("patch service");
    }

    fn patch_node(&self, patch: Value) {
        self.standin
            .patch::<Node>(None, NODE, &patch)
            .expect("patch node");
    }
}

fn absences(s: &SourceSnapshot) -> Vec<(IpAddr, Absence)> {
    s.absences.iter().map(|(k, v)| (*k, *v)).collect()
}

fn lb(name: &str, ips: &[&str]) -> Service {
    fixtures::load_balancer_service("default", name, ips)
}

/// Services web (198.51.100.7) and api (198.51.100.8), both advertised:
/// the harness and its snapshot with the two VIPs.
async fn start_with_web_and_api() -> (Harness, SourceSnapshot) {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
        s.create(&lb("api", &["198.51.100.8"])).expect("api");
    })
    .await;
    let both = h.vips(&["198.51.100.7", "198.51.100.8"]).await;
    (h, both)
}

/// The API server stops answering; returns once the source says it is
/// unhealthy.
async fn api_server_away(h: &mut Harness) {
    h.standin.pause();
    h.until("an unhealthy snapshot", |s| !s.healthy).await;
}

/// While the API server is away: api deleted, new (198.51.100.9) created,
/// and the history compacted, so the watchers must re-list.
fn api_replaced_by_new(standin: &StandIn) {
    standin
        .delete::<Service>(Some("default"), "api")
        .expect("delete");
    standin
        .create(&lb("new", &["198.51.100.9"]))
        .expect("create");
    standin.compact();
}

// ----- listing -----

#[tokio::test]
async fn the_initial_list_gives_one_synced_snapshot_with_every_vip_dual_stack_included() {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7", "2001:db8::7"]))
            .expect("web");
        s.create(&lb("api", &["203.0.113.8"])).expect("api");
    })
    .await;
    let (first, before) = h.until("a synced snapshot", |s| s.synced).await;
    assert!(
        before.iter().all(|s| s.vips.is_empty() && !s.synced),
        "{before:#?}"
    );
    assert!(first.healthy && first.error.is_none());
    assert_eq!(
        first.vips.keys().copied().collect::<Vec<_>>(),
        [ip("198.51.100.7"), ip("203.0.113.8"), ip("2001:db8::7")]
    );
    assert_eq!(
        first.vips[&ip("2001:db8::7")].route.service.as_deref(),
        Some("default/web")
    );
    assert!(first.absences.is_empty());
    // The watches asked for what the source needs, and no more. The
    // snapshot goes out as soon as every list is in; the watches that
    // follow the lists may open a moment later.
    let watched = |h: &Harness| -> Vec<(String, String)> {
        h.standin
            .requests()
            .into_iter()
            .filter(|r| r.is_watch())
            .map(|r| {
                (
                    r.path.clone(),
                    r.param("labelSelector")
                        .or(r.param("fieldSelector"))
                        .unwrap_or_default(),
                )
            })
            .collect()
    };
    let wanted = [
        ("/api/v1/services".to_string(), String::new()),
        (
            "/apis/discovery.k8s.io/v1/endpointslices".to_string(),
            kubernetes::SERVICE_NAME_LABEL.to_string(),
        ),
        ("/api/v1/nodes".to_string(), format!("metadata.name={NODE}")),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !wanted.iter().all(|w| watched(&h).contains(w)) && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let watches = watched(&h);
    for want in wanted {
        assert!(watches.contains(&want), "no watch {want:?} in {watches:?}");
    }
    assert!(
        !watches.iter().any(|(p, _)| p.contains("namespaces")),
        "{watches:?}"
    );
    // Nothing else is sent while nothing changes.
    assert_eq!(
        h.collect_for(Duration::from_secs(1)).await,
        Vec::<SourceSnapshot>::new()
    );
}

// ----- the reported scenario: the LB-IPAM flap -----

#[tokio::test]
async fn an_ingress_that_alternates_with_empty_vanishes_without_a_reason_each_time() {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    h.vips(&["198.51.100.7"]).await;
    for round in 0..5 {
        h.set_ingress("web", &[]);
        let gone = h.vips(&[]).await;
        assert!(
            gone.absences.is_empty(),
            "round {round}: a flap has no reason: {gone:#?}"
        );
        assert_eq!(
            gone.excluded.get(&ip("198.51.100.7")),
            None,
            "the address is simply not there"
        );
        h.set_ingress("web", &["198.51.100.7"]);
        let back = h.vips(&["198.51.100.7"]).await;
        assert!(back.absences.is_empty());
    }
}

// ----- definitive removals -----

#[tokio::test]
async fn deletion_class_change_type_change_and_opt_out_are_deleted_absences() {
    let mut h = start(cfg(|c| c), options(), |s| {
        for (name, vip) in [
            ("a", "198.51.100.1"),
            ("b", "198.51.100.2"),
            ("c", "198.51.100.3"),
            ("d", "198.51.100.4"),
        ] {
            s.create(&lb(name, &[vip])).expect("service");
        }
    })
    .await;
    h.vips(&[
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
    ])
    .await;

    h.standin
        .delete::<Service>(Some("default"), "a")
        .expect("delete");
    let s = h
        .vips(&["198.51.100.2", "198.51.100.3", "198.51.100.4"])
        .await;
    assert_eq!(absences(&s), [(ip("198.51.100.1"), Absence::Deleted)]);

    h.patch_service("b", json!({"spec": {"loadBalancerClass": "io.cilium/bgp"}}));
    let s = h.vips(&["198.51.100.3", "198.51.100.4"]).await;
    assert_eq!(
        absences(&s),
        [
            (ip("198.51.100.1"), Absence::Deleted),
            (ip("198.51.100.2"), Absence::Deleted)
        ]
    );
    assert_eq!(
        s.excluded[&ip("198.51.100.2")],
        [
            "default/b: spec.loadBalancerClass \"io.cilium/bgp\" is not one of source.load_balancer_classes [\"holdfast.dev/bgp\"]"
        ]
    );

    h.patch_service("c", json!({"spec": {"type": "NodePort"}}));
    let s = h.vips(&["198.51.100.4"]).await;
    assert_eq!(s.absences.get(&ip("198.51.100.3")), Some(&Absence::Deleted));

    h.patch_service(
        "d",
        json!({"metadata": {"annotations": {ADVERTISE_ANNOTATION: "false"}}}),
    );
    let s = h.vips(&[]).await;
    assert_eq!(s.absences.get(&ip("198.51.100.4")), Some(&Absence::Deleted));
    assert_eq!(
        s.excluded[&ip("198.51.100.4")],
        ["default/d: the annotation holdfast.dev/advertise is \"false\""]
    );
    assert_eq!(
        h.source.explain(ip("198.51.100.4")),
        [
            "gone from default/d: deleted, opted out, or no longer selected: withdrawn after stability.delete_delay 0s",
            "not advertised: default/d: the annotation holdfast.dev/advertise is \"false\""
        ]
    );
}

// ----- externalTrafficPolicy: Local -----

fn local_slice(endpoints: &[(&str, bool, bool)]) -> EndpointSlice {
    // (node, ready, terminating)
    let mut slice = fixtures::endpoint_slice(
        "default",
        "web",
        "web-abc",
        &endpoints
            .iter()
            .map(|(node, ready, _)| SliceEndpoint {
                address: "10.0.0.1".into(),
                node_name: Some((*node).to_string()),
                ready: *ready,
            })
            .collect::<Vec<_>>(),
    );
    for (e, (_, ready, terminating)) in slice.endpoints.iter_mut().flatten().zip(endpoints) {
        if let Some(c) = e.conditions.as_mut() {
            c.terminating = Some(*terminating);
            // A terminating endpoint still serves while it drains.
            c.serving = Some(*ready || *terminating);
        }
    }
    slice
}

#[tokio::test]
async fn local_traffic_policy_follows_this_nodes_ready_endpoints() {
    let mut h = start(cfg(|c| c), options(), |s| {
        let mut svc = lb("web", &["198.51.100.7"]);
        if let Some(spec) = svc.spec.as_mut() {
            spec.external_traffic_policy = Some("Local".into());
        }
        s.create(&svc).expect("web");
    })
    .await;
    let (s, _) = h.until("a synced snapshot", |s| s.synced).await;
    assert!(s.vips.is_empty());
    assert_eq!(
        s.excluded[&ip("198.51.100.7")],
        [
            "default/web: externalTrafficPolicy is Local and node \"n1\" has no ready, non-terminating endpoint of it"
        ]
    );

    // An endpoint on another node: still nothing.
    h.standin
        .create(&local_slice(&[("n2", true, false)]))
        .expect("slice");
    let quiet = h.collect_for(Duration::from_millis(500)).await;
    assert!(quiet.iter().all(|s| s.vips.is_empty()), "{quiet:#?}");

    // A ready endpoint here: advertised.
    h.standin
        .apply(&local_slice(&[("n2", true, false), (NODE, true, false)]))
        .expect("slice");
    h.vips(&["198.51.100.7"]).await;
    // Not ready: gone, for want of a local endpoint (local_endpoint_delay,
    // not the hold-down).
    let lost = [(ip("198.51.100.7"), Absence::NoLocalEndpoint)];
    h.standin
        .apply(&local_slice(&[("n2", true, false), (NODE, false, false)]))
        .expect("slice");
    assert_eq!(absences(&h.vips(&[]).await), lost);
    h.standin
        .apply(&local_slice(&[(NODE, true, false)]))
        .expect("slice");
    h.vips(&["198.51.100.7"]).await;
    // Terminating (still serving): gone.
    h.standin
        .apply(&local_slice(&[(NODE, false, true)]))
        .expect("slice");
    assert_eq!(absences(&h.vips(&[]).await), lost);
    h.standin
        .apply(&local_slice(&[(NODE, true, false)]))
        .expect("slice");
    h.vips(&["198.51.100.7"]).await;
    // The slice deleted.
    h.standin
        .delete::<EndpointSlice>(Some("default"), "web-abc")
        .expect("delete slice");
    assert_eq!(absences(&h.vips(&[]).await), lost);
    assert_eq!(
        h.source.explain(ip("198.51.100.7"))[0],
        "gone from default/web: no ready local endpoint on node \"n1\": withdrawn after stability.local_endpoint_delay 0s"
    );
}

// ----- the node -----

#[tokio::test]
async fn a_cordon_or_a_configured_taint_drains_every_vip_and_undoing_it_restores_them() {
    let mut h = start(
        cfg(|c| c.drain_taints(&["example.com/maintenance"])),
        options(),
        |s| {
            s.create(&lb("web", &["198.51.100.7", "2001:db8::7"]))
                .expect("web");
        },
    )
    .await;
    h.vips(&["198.51.100.7", "2001:db8::7"]).await;
    h.patch_node(json!({"spec": {"unschedulable": true}}));
    let s = h.vips(&[]).await;
    assert_eq!(
        absences(&s),
        [
            (ip("198.51.100.7"), Absence::Drained),
            (ip("2001:db8::7"), Absence::Drained)
        ]
    );
    assert_eq!(
        s.excluded[&ip("198.51.100.7")],
        ["node \"n1\" is cordoned (spec.unschedulable) and speaker.drain_on_cordon is true"]
    );
    h.patch_node(json!({"spec": {"unschedulable": null}}));
    let s = h.vips(&["198.51.100.7", "2001:db8::7"]).await;
    assert!(s.absences.is_empty());
    // The lifecycle controller's own taints: no drain, no new snapshot.
    h.patch_node(json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    ]}}));
    let quiet = h.collect_for(Duration::from_millis(800)).await;
    assert!(
        quiet.is_empty(),
        "an automatic taint changed the snapshot: {quiet:#?}"
    );
    h.patch_node(json!({"spec": {"taints": [
        {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"},
        {"key": "example.com/maintenance", "value": "kernel", "effect": "NoSchedule"}
    ]}}));
    let s = h.vips(&[]).await;
    assert_eq!(s.absences.get(&ip("198.51.100.7")), Some(&Absence::Drained));
    assert_eq!(
        s.excluded[&ip("198.51.100.7")],
        [
            "node \"n1\" has the taint example.com/maintenance=kernel:NoSchedule, which speaker.drain_taints lists"
        ]
    );
    h.patch_node(json!({"spec": {"taints": null}}));
    h.vips(&["198.51.100.7", "2001:db8::7"]).await;
}

#[tokio::test]
async fn a_deleted_node_is_an_absence_not_a_drain_and_is_explained() {
    let (mut h, _) = start_with_web_and_api().await;
    h.standin.delete::<Node>(None, NODE).expect("delete node");
    let s = h.vips(&[]).await;
    // No reason: the stability layer holds them down, then paces them
    // through the mass-withdrawal guard; a drain would withdraw at once.
    assert_eq!(absences(&s), []);
    assert_eq!(
        h.source.explain(ip("198.51.100.7")),
        [
            "gone from default/web: node \"n1\" is missing from the API server, which is taken as an absence, not a drain: the hold-down applies (stability.withdraw_hold_down 30s), then the mass-withdrawal guard",
            "not advertised: node \"n1\" does not exist in the API server (is NODE_NAME right?)"
        ]
    );
    // The labels last seen stay (a missing Node is no relabelling).
    assert!(h.source.node_labels().borrow().is_some());
    h.standin
        .create(&fixtures::node(NODE, "192.0.2.11", &[]))
        .expect("node back");
    h.vips(&["198.51.100.7", "198.51.100.8"]).await;
}

#[tokio::test]
async fn the_exclude_label_drains_the_node() {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    h.vips(&["198.51.100.7"]).await;
    h.patch_node(json!({"metadata": {"labels": {EXCLUDE_LABEL: "true"}}}));
    let s = h.vips(&[]).await;
    assert_eq!(absences(&s), [(ip("198.51.100.7"), Absence::Drained)]);
}

#[tokio::test]
async fn the_node_selector_decides_whether_this_node_advertises() {
    let mut h = start(
        cfg(|c| c.node_selector(Selector::labels(&[("holdfast.dev/bgp", "on")]))),
        options(),
        |s| {
            s.create(&lb("web", &["198.51.100.7"])).expect("web");
        },
    )
    .await;
    let (s, _) = h.until("a synced snapshot", |s| s.synced).await;
    assert!(s.vips.is_empty());
    assert_eq!(
        s.excluded[&ip("198.51.100.7")],
        [
            "node \"n1\" does not match speaker.node_selector: label \"holdfast.dev/bgp\" is missing, want \"on\""
        ]
    );
    h.patch_node(json!({"metadata": {"labels": {"holdfast.dev/bgp": "on"}}}));
    h.vips(&["198.51.100.7"]).await;
    h.patch_node(json!({"metadata": {"labels": {"holdfast.dev/bgp": "off"}}}));
    let s = h.vips(&[]).await;
    assert_eq!(absences(&s), [(ip("198.51.100.7"), Absence::Drained)]);
}

// ----- config reloads -----

#[tokio::test]
async fn a_config_change_is_evaluated_and_one_that_needs_namespace_labels_starts_a_namespace_watch()
{
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
        s.create(&fixtures::load_balancer_service("prod", "web", &["198.51.100.8"])).expect("prod/web");
        s.create(&json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "prod", "labels": {"tier": "prod"}}}))
            .expect("namespace");
    })
    .await;
    h.vips(&["198.51.100.7", "198.51.100.8"]).await;
    h.config
        .send(cfg(|c| {
            c.advertisement(
                Advertisement::new("prod")
                    .namespace_selector(Selector::labels(&[("tier", "prod")])),
            )
        }))
        .expect("source running");
    let s = h.vips(&["198.51.100.8"]).await;
    assert_eq!(absences(&s), [(ip("198.51.100.7"), Absence::Deleted)]);
    // The watch opens after the list the evaluation used: it may come a
    // little after the snapshot.
    let watched = || {
        h.standin
            .requests()
            .iter()
            .any(|r| r.is_watch() && r.path == "/api/v1/namespaces")
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !watched() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(watched(), "namespaces are watched for their labels");
}

#[tokio::test]
async fn source_namespaces_limit_the_watches_to_those_namespaces() {
    let mut h = start(cfg(|c| c.namespaces(&["prod", "edge"])), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"]))
            .expect("default/web");
        s.create(&fixtures::load_balancer_service(
            "prod",
            "web",
            &["198.51.100.8"],
        ))
        .expect("prod/web");
        s.create(&fixtures::load_balancer_service(
            "edge",
            "web",
            &["198.51.100.9"],
        ))
        .expect("edge/web");
    })
    .await;
    h.vips(&["198.51.100.8", "198.51.100.9"]).await;
    // The snapshot goes out as soon as every list is in; the watches that
    // follow the lists may open a moment later.
    let watched = |h: &Harness| -> Vec<String> {
        h.standin
            .requests()
            .into_iter()
            .filter(|r| r.is_watch())
            .map(|r| r.path)
            .collect()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let expected = [
        "/api/v1/namespaces/prod/services",
        "/apis/discovery.k8s.io/v1/namespaces/edge/endpointslices",
    ];
    while !expected.iter().all(|e| watched(&h).iter().any(|p| p == e))
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let paths = watched(&h);
    assert!(
        paths.contains(&"/api/v1/namespaces/prod/services".to_string()),
        "{paths:?}"
    );
    assert!(
        paths.contains(&"/apis/discovery.k8s.io/v1/namespaces/edge/endpointslices".to_string()),
        "{paths:?}"
    );
    assert!(
        !paths.contains(&"/api/v1/services".to_string()),
        "{paths:?}"
    );
}

// ----- API outages -----

#[tokio::test]
async fn a_stalled_api_server_then_410_gone_keeps_every_vip_and_ends_with_the_same_snapshot() {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
        s.create(&lb("api", &["2001:db8::8"])).expect("api");
    })
    .await;
    let before = h.vips(&["198.51.100.7", "2001:db8::8"]).await;
    let lists_before = h
        .standin
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && !r.is_watch())
        .count();

    h.standin.pause();
    let (down, _) = h.until("an unhealthy snapshot", |s| !s.healthy).await;
    assert_eq!(down.vips, before.vips, "an outage never empties the set");
    assert!(down.synced, "still synced: the routes are right");
    let error = down.error.clone().unwrap_or_default();
    assert!(!error.is_empty(), "the outage is explained");
    // The outage goes on: still unhealthy, same VIPs.
    let during = h.collect_for(Duration::from_secs(3)).await;
    for s in &during {
        assert!(!s.healthy && s.vips == before.vips, "{s:#?}");
    }
    // Every resourceVersion handed out so far becomes too old: the watches
    // get 410 Gone when the server answers again, and the watchers re-list.
    h.standin.compact();
    h.standin.resume();
    let (after, between) = h.until("a healthy snapshot", |s| s.healthy).await;
    for s in &between {
        assert!(!s.healthy && s.vips == before.vips, "{s:#?}");
    }
    assert_eq!(
        after, before,
        "nothing changed: the same snapshot as before the outage"
    );
    let lists_after = h
        .standin
        .requests()
        .iter()
        .filter(|r| r.method == "GET" && !r.is_watch())
        .count();
    assert!(
        lists_after >= lists_before + 3,
        "the three watchers re-listed ({lists_before} → {lists_after})"
    );
    assert_eq!(
        h.collect_for(Duration::from_secs(1)).await,
        Vec::<SourceSnapshot>::new()
    );
}

#[tokio::test]
async fn changes_made_during_an_outage_are_picked_up_by_the_re_list() {
    let (mut h, before) = start_with_web_and_api().await;
    api_server_away(&mut h).await;
    api_replaced_by_new(&h.standin);
    h.standin.resume();
    let (after, between) = h.until("a healthy snapshot", |s| s.healthy).await;
    for s in &between {
        assert_eq!(s.vips, before.vips, "nothing moves while unhealthy: {s:#?}");
    }
    assert_eq!(
        after.vips.keys().copied().collect::<Vec<_>>(),
        [ip("198.51.100.7"), ip("198.51.100.9")]
    );
    assert_eq!(absences(&after), [(ip("198.51.100.8"), Absence::Deleted)]);
}

/// Makes every watcher re-list: the versions they hold become too old.
fn force_relist(standin: &StandIn) {
    standin.pause();
    standin.compact();
    standin.drop_watches();
    standin.resume();
}

#[tokio::test]
async fn an_empty_service_list_from_a_healthy_api_server_is_an_absence_not_deletions() {
    let four = [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "198.51.100.4",
    ];
    let mut h = start(cfg(|c| c), options(), |s| {
        for (i, vip) in four.iter().enumerate() {
            s.create(&lb(&format!("s{i}"), &[vip])).expect("service");
        }
    })
    .await;
    h.vips(&four).await;
    // An etcd restore, the wrong cluster: the API server lists no Service
    // and says nothing is wrong.
    h.standin.serve_empty::<Service>();
    force_relist(&h.standin);
    let s = h.vips(&[]).await;
    assert_eq!(
        absences(&s),
        [],
        "no VIP goes as deleted: the hold-down, then the guard, apply"
    );
    assert!(
        h.source.explain(ip("198.51.100.1"))[0].contains("a mass disappearance"),
        "{:?}",
        h.source.explain(ip("198.51.100.1"))
    );
    // The Services are listed again: every VIP is back.
    h.standin.serve_stored::<Service>();
    force_relist(&h.standin);
    h.vips(&four).await;
    // One Service deleted alone is a deletion, as before.
    h.standin
        .delete::<Service>(Some("default"), "s0")
        .expect("delete");
    let s = h.vips(&four[1..]).await;
    assert_eq!(absences(&s), [(ip("198.51.100.1"), Absence::Deleted)]);
}

#[tokio::test]
async fn a_resync_during_an_outage_counts_no_change_the_re_list_brings_as_a_repair() {
    let (mut h, _) = start_with_web_and_api().await;
    api_server_away(&mut h).await;
    // The daemon's periodic reconcile asks while the API is away; the
    // cluster changes meanwhile; the re-list brings the changes.
    h.source.resync();
    api_replaced_by_new(&h.standin);
    h.standin.resume();
    let s = h.vips(&["198.51.100.7", "198.51.100.9"]).await;
    assert_eq!(
        s.reconcile_repairs, 0,
        "changes the watchers delivered are not repairs"
    );
}

#[tokio::test]
async fn a_change_evaluated_together_with_a_resync_is_not_a_repair() {
    // A long debounce window: a change and a resync asked for within it
    // are one evaluation.
    let opts = Options {
        debounce: Duration::from_secs(3),
        ..options()
    };
    let mut h = start(cfg(|c| c), opts, |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    h.vips(&["198.51.100.7"]).await;
    // The first change after a quiet spell is evaluated at once and opens
    // the window...
    h.standin.create(&lb("a", &["198.51.100.8"])).expect("a");
    h.vips(&["198.51.100.7", "198.51.100.8"]).await;
    // ...in which another change and a resync arrive.
    h.standin.create(&lb("b", &["198.51.100.9"])).expect("b");
    h.source.resync();
    let s = h
        .vips(&["198.51.100.7", "198.51.100.8", "198.51.100.9"])
        .await;
    assert_eq!(
        s.reconcile_repairs, 0,
        "a change the watch delivered is not a repair"
    );
}

#[tokio::test]
async fn a_refusing_api_server_is_noticed_at_once_and_forgiven_after_a_quiet_period() {
    let opts = options();
    let quiet = opts.quiet_period();
    let mut h = start(cfg(|c| c), opts, |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    let before = h.vips(&["198.51.100.7"]).await;
    h.standin.refuse();
    let (down, _) = h.until("an unhealthy snapshot", |s| !s.healthy).await;
    assert_eq!(down.vips, before.vips);
    h.standin.resume();
    let resumed = Instant::now();
    // The watches resume from where they were (no 410, no re-list, no
    // event): health returns once no error has come for the quiet period.
    let (after, _) = h.until("a healthy snapshot", |s| s.healthy).await;
    assert!(
        resumed.elapsed() < quiet + Duration::from_secs(10),
        "{:?}",
        resumed.elapsed()
    );
    assert_eq!(after, before);
}

// ----- Events -----

fn route_events(standin: &StandIn) -> Vec<Value> {
    standin
        .events()
        .into_iter()
        .filter(|e| e["reportingController"] == "holdfast")
        .collect()
}

#[tokio::test]
async fn advertised_and_withdrawn_events_are_recorded_on_the_service() {
    let mut h = start(cfg(|c| c), options(), |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    h.vips(&["198.51.100.7"]).await;
    let uid = h
        .standin
        .get::<Service>(Some("default"), "web")
        .and_then(|s| s.metadata.uid)
        .expect("uid");
    let peers = vec!["tor1".to_string(), "tor2".to_string()];
    h.source.events().advertised(ip("198.51.100.7"), &peers);
    wait_for("the Advertised event", || {
        route_events(&h.standin).len() == 1
    })
    .await;
    let ev = &route_events(&h.standin)[0];
    assert_eq!(ev["reason"], "Advertised");
    assert_eq!(ev["action"], "Advertise");
    assert_eq!(ev["type"], "Normal");
    assert_eq!(ev["reportingInstance"], NODE);
    assert_eq!(
        ev["note"],
        "node n1 advertises 198.51.100.7/32 to peers tor1, tor2"
    );
    assert_eq!(ev["regarding"]["kind"], "Service");
    assert_eq!(ev["regarding"]["namespace"], "default");
    assert_eq!(ev["regarding"]["name"], "web");
    assert_eq!(ev["regarding"]["uid"], uid.as_str());
    // The same again within minutes continues the Event as a series.
    h.source.events().advertised(ip("198.51.100.7"), &peers);
    wait_for("the series", || {
        route_events(&h.standin)[0]["series"]["count"] == 2
    })
    .await;
    assert_eq!(route_events(&h.standin).len(), 1);

    // The Service is deleted; the withdrawal still finds it.
    h.standin
        .delete::<Service>(Some("default"), "web")
        .expect("delete");
    h.vips(&[]).await;
    h.source.events().withdrawn(ip("198.51.100.7"), &peers[..1]);
    wait_for("the Withdrawn event", || {
        route_events(&h.standin).len() == 2
    })
    .await;
    let ev = &route_events(&h.standin)[1];
    assert_eq!(ev["reason"], "Withdrawn");
    assert_eq!(
        ev["note"],
        "node n1 withdrew 198.51.100.7/32 from peer tor1"
    );
    assert_eq!(ev["regarding"]["name"], "web");

    // An address no Service has: no Event.
    h.source.events().advertised(ip("192.0.2.99"), &peers);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(route_events(&h.standin).len(), 2);
}

#[tokio::test]
async fn a_flapping_service_gets_a_burst_of_events_then_one_summary_per_refill() {
    let opts = Options {
        event_limits: EventLimits {
            burst: 3,
            refill: Duration::from_secs(1),
        },
        ..options()
    };
    let mut h = start(cfg(|c| c), opts, |s| {
        s.create(&lb("web", &["198.51.100.7"])).expect("web");
    })
    .await;
    h.vips(&["198.51.100.7"]).await;
    let peers = vec!["tor1".to_string()];
    let started = Instant::now();
    for i in 0..10 {
        if i % 2 == 0 {
            h.source.events().advertised(ip("198.51.100.7"), &peers);
        } else {
            h.source.events().withdrawn(ip("198.51.100.7"), &peers);
        }
    }
    let writes = |standin: &StandIn| {
        standin
            .requests()
            .into_iter()
            .filter(|r| r.path.contains("/events") && (r.method == "POST" || r.method == "PATCH"))
            .count()
    };
    wait_for("the burst", || writes(&h.standin) == 3).await;
    // The fourth write waits for a token (polled every 25 ms: an early one
    // would be seen early).
    wait_for("the summary", || writes(&h.standin) >= 4).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    let events = route_events(&h.standin);
    let summary = events
        .iter()
        .find(|e| e["note"].as_str().is_some_and(|n| n.contains("suppressed")))
        .expect("a summary event");
    assert_eq!(
        summary["reason"], "Withdrawn",
        "the last change is told: {summary:#}"
    );
    assert_eq!(
        summary["note"],
        "node n1 withdrew 198.51.100.7/32 from peer tor1; … and 6 more changes suppressed (Events are rate-limited per Service)"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(writes(&h.standin), 4, "nothing was left waiting");
}

// ----- scale -----

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .expect("VmRSS in /proc/self/status")
}

#[tokio::test]
async fn a_thousand_services_and_slices_make_one_snapshot() {
    const N: u32 = 1000;
    let vip = |i: u32| format!("198.18.{}.{}", i / 256, i % 256);
    let rss_start = rss_kib();
    let standin_setup = |s: &StandIn| {
        for i in 0..N {
            let name = format!("svc-{i:04}");
            let mut svc = fixtures::load_balancer_service("default", &name, &[&vip(i)]);
            if i % 2 == 0
                && let Some(spec) = svc.spec.as_mut()
            {
                spec.external_traffic_policy = Some("Local".into());
            }
            s.create(&svc).expect("service");
            let node = if i % 4 == 0 { NODE } else { "n2" };
            s.create(&fixtures::endpoint_slice(
                "default",
                &name,
                &format!("{name}-x"),
                &[SliceEndpoint::ready("10.0.0.1", node)],
            ))
            .expect("slice");
        }
    };
    let created = Instant::now();
    let mut h = start(cfg(|c| c), options(), standin_setup).await;
    let spawned = Instant::now();
    let rss_before = rss_kib();
    let (first, before) = h.until("a synced snapshot", |s| s.synced).await;
    let to_first = spawned.elapsed();
    let rss_after = rss_kib();
    assert!(before.iter().all(|s| s.vips.is_empty()));
    // eTP Cluster: the odd half; eTP Local: the quarter with an endpoint here.
    assert_eq!(first.vips.len(), 750);
    assert!(first.healthy);
    assert_eq!(
        h.collect_for(Duration::from_millis(500)).await,
        Vec::<SourceSnapshot>::new(),
        "one snapshot"
    );
    eprintln!(
        "scale: {N} Services + {N} EndpointSlices: created in {:?}; first snapshot {:?} after spawn; RSS {} KiB at start, {} KiB with the stand-in filled, {} KiB after the source synced (+{} KiB)",
        spawned - created,
        to_first,
        rss_start,
        rss_before,
        rss_after,
        rss_after.saturating_sub(rss_before)
    );
    assert!(to_first < Duration::from_secs(20), "{to_first:?}");
    // One change among a thousand: how long until its snapshot (the 50 ms
    // debounce included).
    let changed = Instant::now();
    h.set_ingress("svc-0001", &[]);
    let (s, _) = h
        .until("svc-0001's VIP gone", |s| {
            !s.vips.contains_key(&ip(&vip(1)))
        })
        .await;
    let to_change = changed.elapsed();
    assert_eq!(s.vips.len(), 749);
    eprintln!("scale: one change → snapshot in {to_change:?}");
}

/// Polls a condition with a deadline.
async fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !cond() {
        assert!(Instant::now() < deadline, "not within {DEADLINE:?}: {what}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

//! The rules of `policy::evaluate`, one test each, on plain objects.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Service, Taint};
use k8s_openapi::api::discovery::v1::{EndpointConditions, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube_standin::fixtures::{self, SliceEndpoint};

use super::records::{ServiceRecord, SliceRecord};
use super::*;
use crate::config::{self, Config};
use crate::model::Absence;

const NODE: &str = "n1";

fn ip(text: &str) -> IpAddr {
    text.parse().expect("test address")
}

/// A config with `speaker` lines in [speaker], `source` lines in [source],
/// and `rest` after the one peer.
fn cfg(speaker: &str, source: &str, rest: &str) -> Config {
    let text = format!(
        "[speaker]\nasn = 65001\n{speaker}\n[source]\nkind = \"kubernetes\"\n{source}\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n{rest}"
    );
    match config::parse(Path::new("t.toml"), &text) {
        Ok(c) => c,
        Err(diags) => panic!("test config invalid: {diags:?}\n{text}"),
    }
}

fn default_cfg() -> Config {
    cfg("", "", "")
}

fn lb(name: &str, ips: &[&str]) -> Service {
    fixtures::load_balancer_service("default", name, ips)
}

fn with_labels(mut svc: Service, labels: &[(&str, &str)]) -> Service {
    svc.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect(),
    );
    svc
}

fn with_annotation(mut svc: Service, key: &str, value: &str) -> Service {
    svc.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_string(), value.to_string());
    svc
}

fn with_class(mut svc: Service, class: &str) -> Service {
    if let Some(spec) = svc.spec.as_mut() {
        spec.load_balancer_class = Some(class.to_string());
    }
    svc
}

fn with_spec(
    mut svc: Service,
    f: impl FnOnce(&mut k8s_openapi::api::core::v1::ServiceSpec),
) -> Service {
    if let Some(spec) = svc.spec.as_mut() {
        f(spec);
    }
    svc
}

fn local(svc: Service) -> Service {
    with_spec(svc, |s| s.external_traffic_policy = Some("Local".into()))
}

fn node(labels: &[(&str, &str)]) -> Node {
    fixtures::node(NODE, "192.0.2.11", labels)
}

fn slice(service: &str, name: &str, endpoints: &[SliceEndpoint]) -> EndpointSlice {
    fixtures::endpoint_slice("default", service, name, endpoints)
}

/// Objects for one evaluation.
#[derive(Clone)]
struct World {
    node: Option<Node>,
    services: Vec<Arc<ServiceRecord>>,
    slices: Vec<Arc<SliceRecord>>,
    namespaces: Option<Vec<Arc<Namespace>>>,
}

impl World {
    fn new(services: Vec<Service>) -> World {
        World {
            node: Some(node(&[])),
            services: services
                .into_iter()
                .map(|s| Arc::new(ServiceRecord::of(s)))
                .collect(),
            slices: Vec::new(),
            namespaces: None,
        }
    }

    fn slices(mut self, slices: Vec<EndpointSlice>) -> World {
        // What the watcher keeps of them on this node.
        self.slices = slices
            .into_iter()
            .filter_map(|s| SliceRecord::of(s, NODE).map(Arc::new))
            .collect();
        self
    }

    fn node(mut self, node: Option<Node>) -> World {
        self.node = node;
        self
    }

    fn eval(&self, prev: &Evaluation, config: &Config, now: Instant) -> Evaluation {
        let cluster = Cluster {
            node_name: NODE,
            node: self.node.as_ref(),
            services: &self.services,
            endpoint_slices: &self.slices,
            namespaces: self.namespaces.as_deref(),
        };
        evaluate(prev, config, &cluster, now)
    }
}

fn once(config: &Config, world: &World) -> Evaluation {
    world.eval(&Evaluation::default(), config, Instant::now())
}

fn vips(e: &Evaluation) -> Vec<IpAddr> {
    e.vips.keys().copied().collect()
}

fn reasons(e: &Evaluation, address: &str) -> Vec<String> {
    e.excluded.get(&ip(address)).cloned().unwrap_or_default()
}

fn advertisements(e: &Evaluation, address: &str) -> Vec<String> {
    e.vips[&ip(address)]
        .route
        .advertisements
        .iter()
        .cloned()
        .collect()
}

// ----- which addresses -----

#[test]
fn a_load_balancer_ip_is_advertised_under_the_default_advertisement() {
    let e = once(
        &default_cfg(),
        &World::new(vec![lb("web", &["198.51.100.7"])]),
    );
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
    let vip = &e.vips[&ip("198.51.100.7")];
    assert_eq!(vip.route.service.as_deref(), Some("default/web"));
    assert_eq!(advertisements(&e, "198.51.100.7"), ["default"]);
    assert!(e.absences.is_empty() && e.excluded.is_empty() && e.warnings.is_empty());
    assert_eq!(e.node_problem, None);
    let snap = e.snapshot(true, true, None);
    assert_eq!(snap.vips, e.vips);
    assert!(snap.healthy && snap.synced);
}

#[test]
fn a_dual_stack_service_gives_both_addresses() {
    let e = once(
        &default_cfg(),
        &World::new(vec![lb("web", &["198.51.100.7", "2001:db8::7"])]),
    );
    assert_eq!(vips(&e), [ip("198.51.100.7"), ip("2001:db8::7")]);
}

#[test]
fn an_ipv4_mapped_address_is_the_ipv4_vip_once() {
    // Ingress as a dual-stack controller may write it, and the same VIP
    // again as an external IP: one IPv4 VIP, advertised as its /32.
    let svc = with_spec(lb("web", &["::ffff:198.51.100.7"]), |s| {
        s.external_ips = Some(vec!["198.51.100.7".into()]);
    });
    let e = once(&default_cfg(), &World::new(vec![svc]));
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
}

#[test]
fn a_hostname_only_ingress_entry_is_skipped_with_a_warning() {
    let mut svc = lb("web", &["198.51.100.7"]);
    let ingress = svc
        .status
        .as_mut()
        .and_then(|s| s.load_balancer.as_mut())
        .and_then(|l| l.ingress.as_mut())
        .expect("fixture has ingress");
    ingress.push(k8s_openapi::api::core::v1::LoadBalancerIngress {
        hostname: Some("lb.example.com".into()),
        ..Default::default()
    });
    let e = once(&default_cfg(), &World::new(vec![svc]));
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
    assert_eq!(
        e.warnings.iter().collect::<Vec<_>>(),
        [
            "default/web: status.loadBalancer.ingress[1] has only the hostname \"lb.example.com\"; a hostname cannot be advertised as a route, skipped"
        ]
    );
}

#[test]
fn a_malformed_address_is_skipped_with_a_warning() {
    let svc = with_spec(lb("web", &["198.51.100.300"]), |s| {
        s.external_ips = Some(vec!["203.0.113.9".into()]);
    });
    let e = once(&default_cfg(), &World::new(vec![svc]));
    assert_eq!(vips(&e), [ip("203.0.113.9")]);
    assert_eq!(
        e.warnings.iter().collect::<Vec<_>>(),
        [
            "default/web: status.loadBalancer.ingress[0].ip is \"198.51.100.300\", not an IP address; skipped"
        ]
    );
}

#[test]
fn external_ips_are_advertised_whatever_the_type_but_stale_ingress_of_a_non_load_balancer_is_not() {
    let svc = with_spec(lb("web", &["198.51.100.7"]), |s| {
        s.type_ = Some("ClusterIP".into());
        s.external_ips = Some(vec!["203.0.113.9".into(), "2001:db8::9".into()]);
    });
    let e = once(&default_cfg(), &World::new(vec![svc]));
    assert_eq!(vips(&e), [ip("203.0.113.9"), ip("2001:db8::9")]);
    assert_eq!(
        reasons(&e, "198.51.100.7"),
        [
            "default/web: is type ClusterIP, not LoadBalancer, so its status.loadBalancer.ingress is not advertised"
        ]
    );
}

#[test]
fn an_advertisement_takes_only_the_kinds_it_lists() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"lb-only\"\naddresses = [\"LoadBalancerIP\"]\n",
    );
    let svc = with_spec(lb("web", &["198.51.100.7"]), |s| {
        s.external_ips = Some(vec!["203.0.113.9".into()]);
    });
    let e = once(&config, &World::new(vec![svc]));
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
    assert_eq!(
        reasons(&e, "203.0.113.9"),
        ["default/web: no [[advertisement]] lists \"ExternalIP\" in its addresses"]
    );
}

#[test]
fn cluster_ips_are_opt_in_and_headless_services_have_none() {
    let svc = with_spec(lb("web", &[]), |s| {
        s.cluster_ip = Some("10.96.0.10".into());
        s.cluster_ips = Some(vec!["10.96.0.10".into(), "fd00::10".into()]);
    });
    let headless = with_spec(lb("db", &[]), |s| {
        s.type_ = Some("ClusterIP".into());
        s.cluster_ip = Some("None".into());
        s.cluster_ips = Some(vec!["None".into()]);
    });
    let world = World::new(vec![svc, headless]);
    // Not asked for: neither advertised nor even listed for explain.
    let e = once(&default_cfg(), &world);
    assert!(e.vips.is_empty() && e.excluded.is_empty(), "{e:#?}");
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"internal\"\naddresses = [\"ClusterIP\"]\n",
    );
    let e = once(&config, &world);
    assert_eq!(vips(&e), [ip("10.96.0.10"), ip("fd00::10")]);
    assert!(e.warnings.is_empty(), "{:?}", e.warnings);
}

// ----- which Services -----

#[test]
fn the_load_balancer_class_must_be_unset_or_listed() {
    let world = World::new(vec![
        lb("plain", &["198.51.100.1"]),
        with_class(lb("ours", &["198.51.100.2"]), "holdfast.dev/bgp"),
        with_class(lb("theirs", &["198.51.100.3"]), "io.cilium/bgp"),
    ]);
    let e = once(&default_cfg(), &world);
    assert_eq!(vips(&e), [ip("198.51.100.1"), ip("198.51.100.2")]);
    assert_eq!(
        reasons(&e, "198.51.100.3"),
        [
            "default/theirs: spec.loadBalancerClass \"io.cilium/bgp\" is not one of source.load_balancer_classes [\"holdfast.dev/bgp\"]"
        ]
    );

    let strict = cfg("", "require_class = true", "");
    let e = once(&strict, &world);
    assert_eq!(vips(&e), [ip("198.51.100.2")]);
    assert_eq!(
        reasons(&e, "198.51.100.1"),
        ["default/plain: has no spec.loadBalancerClass and source.require_class is true"]
    );

    let listed = cfg("", "load_balancer_classes = [\"io.cilium/bgp\"]", "");
    let e = once(&listed, &world);
    assert_eq!(vips(&e), [ip("198.51.100.1"), ip("198.51.100.3")]);
}

#[test]
fn the_service_selector_picks_services_and_a_miss_names_the_label() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nservice_selector = { match_labels = { bgp = \"on\" }, match_expressions = [{ key = \"tier\", operator = \"In\", values = [\"web\", \"api\"] }] }\n",
    );
    let world = World::new(vec![
        with_labels(
            lb("a", &["198.51.100.1"]),
            &[("bgp", "on"), ("tier", "web")],
        ),
        with_labels(lb("b", &["198.51.100.2"]), &[("tier", "web")]),
        with_labels(
            lb("c", &["198.51.100.3"]),
            &[("bgp", "off"), ("tier", "web")],
        ),
        with_labels(lb("d", &["198.51.100.4"]), &[("bgp", "on"), ("tier", "db")]),
    ]);
    let e = once(&config, &world);
    assert_eq!(vips(&e), [ip("198.51.100.1")]);
    assert_eq!(
        reasons(&e, "198.51.100.2"),
        [
            "default/b: advertisement \"public\": service_selector does not match: label \"bgp\" is missing, want \"on\""
        ]
    );
    assert_eq!(
        reasons(&e, "198.51.100.3"),
        [
            "default/c: advertisement \"public\": service_selector does not match: label \"bgp\" is \"off\", want \"on\""
        ]
    );
    assert_eq!(
        reasons(&e, "198.51.100.4"),
        [
            "default/d: advertisement \"public\": service_selector does not match: label \"tier\" is \"db\", want one of [\"web\", \"api\"]"
        ]
    );
}

#[test]
fn a_vip_is_advertised_under_every_advertisement_that_selects_it() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"all\"\n[[advertisement]]\nname = \"public\"\nservice_selector = { match_labels = { bgp = \"on\" } }\n",
    );
    let world = World::new(vec![
        with_labels(lb("a", &["198.51.100.1"]), &[("bgp", "on")]),
        lb("b", &["198.51.100.2"]),
    ]);
    let e = once(&config, &world);
    assert_eq!(advertisements(&e, "198.51.100.1"), ["all", "public"]);
    assert_eq!(advertisements(&e, "198.51.100.2"), ["all"]);
}

/// The MetalLB migration: two pools become two advertisements with
/// `vip_ranges`, and Services without labels go by their address.
fn two_pools() -> Config {
    cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.0/24\", \"2001:db8:113::/64\"]\ncommunities = [\"65001:100\"]\n\
         [[advertisement]]\nname = \"internal\"\nvip_ranges = [\"10.96.200.10-10.96.200.20\"]\n",
    )
}

#[test]
fn vip_ranges_split_services_without_labels_by_their_address() {
    let svc = with_spec(lb("both", &["203.0.113.11", "10.96.200.11"]), |s| {
        s.external_ips = Some(vec!["10.96.200.21".into(), "2001:db8:113::5".into()]);
    });
    let world = World::new(vec![
        lb("web", &["203.0.113.10"]),
        lb("db", &["10.96.200.10"]),
        lb("stray", &["192.0.2.50"]),
        svc,
    ]);
    let e = once(&two_pools(), &world);
    assert_eq!(
        vips(&e),
        [
            ip("10.96.200.10"),
            ip("10.96.200.11"),
            ip("203.0.113.10"),
            ip("203.0.113.11"),
            ip("2001:db8:113::5"),
        ]
    );
    assert_eq!(advertisements(&e, "203.0.113.10"), ["public"]);
    assert_eq!(advertisements(&e, "203.0.113.11"), ["public"]);
    assert_eq!(advertisements(&e, "2001:db8:113::5"), ["public"]);
    assert_eq!(advertisements(&e, "10.96.200.10"), ["internal"]);
    assert_eq!(advertisements(&e, "10.96.200.11"), ["internal"]);
    // Each advertisement says why it does not take the address.
    assert_eq!(
        reasons(&e, "192.0.2.50"),
        [
            "default/stray: advertisement \"public\": 192.0.2.50 is not in its vip_ranges [\"203.0.113.0/24\", \"2001:db8:113::/64\"]",
            "default/stray: advertisement \"internal\": 192.0.2.50 is not in its vip_ranges [\"10.96.200.10-10.96.200.20\"]",
        ]
    );
    // One past the end of the inclusive range.
    assert_eq!(
        reasons(&e, "10.96.200.21"),
        [
            "default/both: advertisement \"public\": 10.96.200.21 is not in its vip_ranges [\"203.0.113.0/24\", \"2001:db8:113::/64\"]",
            "default/both: advertisement \"internal\": 10.96.200.21 is not in its vip_ranges [\"10.96.200.10-10.96.200.20\"]",
        ]
    );
    let explained = e.explain(ip("192.0.2.50"));
    assert_eq!(
        explained[0],
        "not advertised: default/stray: advertisement \"public\": 192.0.2.50 is not in its vip_ranges [\"203.0.113.0/24\", \"2001:db8:113::/64\"]"
    );
}

#[test]
fn the_range_is_checked_before_the_selectors_and_both_must_hold() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.0/24\"]\nservice_selector = { match_labels = { bgp = \"on\" } }\n",
    );
    let world = World::new(vec![
        with_labels(lb("in-labelled", &["203.0.113.1"]), &[("bgp", "on")]),
        lb("in-plain", &["203.0.113.2"]),
        with_labels(lb("out-labelled", &["198.51.100.3"]), &[("bgp", "on")]),
        lb("out-plain", &["198.51.100.4"]),
    ]);
    let e = once(&config, &world);
    assert_eq!(vips(&e), [ip("203.0.113.1")]);
    assert_eq!(
        reasons(&e, "203.0.113.2"),
        [
            "default/in-plain: advertisement \"public\": service_selector does not match: label \"bgp\" is missing, want \"on\""
        ]
    );
    for (name, address) in [
        ("out-labelled", "198.51.100.3"),
        ("out-plain", "198.51.100.4"),
    ] {
        assert_eq!(
            reasons(&e, address),
            [format!(
                "default/{name}: advertisement \"public\": {address} is not in its vip_ranges [\"203.0.113.0/24\"]"
            )]
        );
    }
}

#[test]
fn a_config_change_that_puts_a_vip_out_of_range_is_definitive() {
    let world = World::new(vec![
        lb("web", &["203.0.113.10"]),
        lb("db", &["10.96.200.10"]),
    ]);
    let t = Instant::now();
    let first = world.eval(&Evaluation::default(), &two_pools(), t);
    assert_eq!(vips(&first).len(), 2);
    let narrowed = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nvip_ranges = [\"203.0.113.128/25\"]\n\
         [[advertisement]]\nname = \"internal\"\nvip_ranges = [\"10.96.200.10-10.96.200.20\"]\n",
    );
    let second = world.eval(&first, &narrowed, t);
    assert_eq!(vips(&second), [ip("10.96.200.10")]);
    assert_eq!(absences(&second), [(ip("203.0.113.10"), Absence::Deleted)]);
}

#[test]
fn the_namespace_selector_reads_the_name_label_without_watching_namespaces() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"prod\"\nnamespace_selector = { match_expressions = [{ key = \"kubernetes.io/metadata.name\", operator = \"In\", values = [\"prod\"] }] }\n",
    );
    assert!(!needs_namespace_labels(&config));
    let world = World::new(vec![
        fixtures::load_balancer_service("prod", "web", &["198.51.100.1"]),
        fixtures::load_balancer_service("dev", "web", &["198.51.100.2"]),
    ]);
    let e = once(&config, &world);
    assert_eq!(vips(&e), [ip("198.51.100.1")]);
    assert_eq!(
        reasons(&e, "198.51.100.2"),
        [
            "dev/web: advertisement \"prod\": namespace_selector does not match namespace \"dev\": label \"kubernetes.io/metadata.name\" is \"dev\", want one of [\"prod\"]"
        ]
    );
}

#[test]
fn other_namespace_labels_come_from_watched_namespaces() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"team\"\nnamespace_selector = { match_labels = { team = \"a\" } }\n",
    );
    assert!(needs_namespace_labels(&config));
    let namespace = |name: &str, team: &str| {
        Arc::new(Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([("team".to_string(), team.to_string())])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        })
    };
    let mut world = World::new(vec![
        fixtures::load_balancer_service("a1", "web", &["198.51.100.1"]),
        fixtures::load_balancer_service("b1", "web", &["198.51.100.2"]),
        fixtures::load_balancer_service("unknown", "web", &["198.51.100.3"]),
    ]);
    world.namespaces = Some(vec![namespace("a1", "a"), namespace("b1", "b")]);
    let e = once(&config, &world);
    assert_eq!(vips(&e), [ip("198.51.100.1")]);
    assert_eq!(
        reasons(&e, "198.51.100.3"),
        [
            "unknown/web: advertisement \"team\": namespace_selector does not match namespace \"unknown\": label \"team\" is missing, want \"a\""
        ]
    );
}

#[test]
fn only_the_exact_opt_out_value_false_opts_out() {
    let world = World::new(vec![
        with_annotation(lb("out", &["198.51.100.1"]), ADVERTISE_ANNOTATION, "false"),
        with_annotation(lb("typo", &["198.51.100.2"]), ADVERTISE_ANNOTATION, "no"),
        with_annotation(lb("in", &["198.51.100.3"]), ADVERTISE_ANNOTATION, "true"),
    ]);
    let e = once(&default_cfg(), &world);
    assert_eq!(vips(&e), [ip("198.51.100.2"), ip("198.51.100.3")]);
    assert_eq!(
        reasons(&e, "198.51.100.1"),
        ["default/out: the annotation holdfast.dev/advertise is \"false\""]
    );
}

// ----- traffic policy -----

fn slice_with(
    service: &str,
    name: &str,
    node: Option<&str>,
    conditions: EndpointConditions,
) -> EndpointSlice {
    let mut s = slice(
        service,
        name,
        &[SliceEndpoint {
            address: "10.0.0.1".into(),
            node_name: node.map(str::to_string),
            ready: true,
        }],
    );
    if let Some(endpoints) = s.endpoints.as_mut() {
        endpoints[0].conditions = Some(conditions);
    }
    s
}

fn conditions(
    ready: Option<bool>,
    serving: Option<bool>,
    terminating: Option<bool>,
) -> EndpointConditions {
    EndpointConditions {
        ready,
        serving,
        terminating,
    }
}

#[test]
fn local_traffic_policy_needs_a_ready_non_terminating_endpoint_on_this_node() {
    let svc = local(lb("web", &["198.51.100.7"]));
    let case = |slices: Vec<EndpointSlice>| {
        once(
            &default_cfg(),
            &World::new(vec![svc.clone()]).slices(slices),
        )
    };
    let no_endpoint = "default/web: externalTrafficPolicy is Local and node \"n1\" has no ready, non-terminating endpoint of it";

    let e = case(vec![]);
    assert!(e.vips.is_empty());
    assert_eq!(reasons(&e, "198.51.100.7"), [no_endpoint]);

    let ready = conditions(Some(true), Some(true), Some(false));
    assert_eq!(
        vips(&case(vec![slice_with(
            "web",
            "web-1",
            Some(NODE),
            ready.clone()
        )])),
        [ip("198.51.100.7")]
    );
    // Another node's endpoint, or one with no node, does not count.
    assert!(
        case(vec![slice_with("web", "web-1", Some("n2"), ready.clone())])
            .vips
            .is_empty()
    );
    assert!(
        case(vec![slice_with("web", "web-1", None, ready.clone())])
            .vips
            .is_empty()
    );
    // Not ready.
    assert!(
        case(vec![slice_with(
            "web",
            "web-1",
            Some(NODE),
            conditions(Some(false), Some(false), Some(false))
        )])
        .vips
        .is_empty()
    );
    // Terminating but still serving: excluded (docs: the route starts to go
    // when the last local pod starts to terminate).
    assert!(
        case(vec![slice_with(
            "web",
            "web-1",
            Some(NODE),
            conditions(Some(false), Some(true), Some(true))
        )])
        .vips
        .is_empty()
    );
    // A terminating endpoint wrongly marked ready is still excluded.
    assert!(
        case(vec![slice_with(
            "web",
            "web-1",
            Some(NODE),
            conditions(Some(true), Some(true), Some(true))
        )])
        .vips
        .is_empty()
    );
    // Unknown readiness reads as ready, as the API says.
    assert_eq!(
        vips(&case(vec![slice_with(
            "web",
            "web-1",
            Some(NODE),
            conditions(None, None, None)
        )])),
        [ip("198.51.100.7")]
    );
    // Another Service's slice, or the same name in another namespace, does not count.
    assert!(
        case(vec![slice_with("api", "api-1", Some(NODE), ready.clone())])
            .vips
            .is_empty()
    );
    let mut elsewhere = slice_with("web", "web-1", Some(NODE), ready.clone());
    elsewhere.metadata.namespace = Some("other".into());
    assert!(case(vec![elsewhere]).vips.is_empty());
    // Any slice of the Service will do (one per address family, or many).
    let e = case(vec![
        slice_with("web", "web-1", Some("n2"), ready.clone()),
        slice_with("web", "web-2", Some(NODE), ready),
    ]);
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
}

#[test]
fn cluster_traffic_policy_ignores_endpoints() {
    let e = once(
        &default_cfg(),
        &World::new(vec![lb("web", &["198.51.100.7"])]),
    );
    assert_eq!(vips(&e), [ip("198.51.100.7")]);
}

#[test]
fn cluster_ips_follow_the_internal_traffic_policy() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"internal\"\naddresses = [\"ClusterIP\"]\n",
    );
    let svc = with_spec(local(lb("web", &[])), |s| {
        s.cluster_ips = Some(vec!["10.96.0.10".into()]);
    });
    // externalTrafficPolicy does not apply to cluster IPs.
    assert_eq!(
        vips(&once(&config, &World::new(vec![svc.clone()]))),
        [ip("10.96.0.10")]
    );
    let svc = with_spec(svc, |s| s.internal_traffic_policy = Some("Local".into()));
    let e = once(&config, &World::new(vec![svc]));
    assert!(e.vips.is_empty());
    assert_eq!(
        reasons(&e, "10.96.0.10"),
        [
            "default/web: internalTrafficPolicy is Local and node \"n1\" has no ready, non-terminating endpoint of it"
        ]
    );
}

// ----- which nodes -----

fn cordoned(mut n: Node) -> Node {
    n.spec.get_or_insert_with(Default::default).unschedulable = Some(true);
    n
}

fn tainted(n: Node, effect: &str) -> Node {
    tainted_with(n, "node.kubernetes.io/unreachable", effect)
}

fn tainted_with(mut n: Node, key: &str, effect: &str) -> Node {
    n.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(Taint {
            key: key.into(),
            effect: effect.into(),
            value: None,
            time_added: None,
        });
    n
}

const MAINTENANCE: &str = "drain_taints = [\"example.com/maintenance\"]";

#[test]
fn a_node_that_is_excluded_deselected_cordoned_tainted_or_missing_advertises_nothing() {
    let services = vec![lb("web", &["198.51.100.7"])];
    let selecting = cfg(
        "node_selector = { match_labels = { bgp = \"yes\" } }",
        "",
        "",
    );
    let cases: Vec<(Config, Option<Node>, &str)> = vec![
        (
            default_cfg(),
            Some(node(&[(EXCLUDE_LABEL, "")])),
            "node \"n1\" is excluded: it has the label node.kubernetes.io/exclude-from-external-load-balancers=\"\"",
        ),
        (
            selecting.clone(),
            Some(node(&[])),
            "node \"n1\" does not match speaker.node_selector: label \"bgp\" is missing, want \"yes\"",
        ),
        (
            default_cfg(),
            Some(cordoned(node(&[]))),
            "node \"n1\" is cordoned (spec.unschedulable) and speaker.drain_on_cordon is true",
        ),
        (
            cfg(MAINTENANCE, "", ""),
            Some(tainted_with(
                node(&[]),
                "example.com/maintenance",
                "NoExecute",
            )),
            "node \"n1\" has the taint example.com/maintenance:NoExecute, which speaker.drain_taints lists",
        ),
        (
            default_cfg(),
            None,
            "node \"n1\" does not exist in the API server (is NODE_NAME right?)",
        ),
    ];
    for (config, n, why) in cases {
        let e = once(&config, &World::new(services.clone()).node(n));
        assert!(e.vips.is_empty(), "{why}");
        assert_eq!(e.node_problem.as_deref(), Some(why));
        assert_eq!(reasons(&e, "198.51.100.7"), [why]);
    }
    // Selected, or only NoSchedule-tainted: advertises.
    let ok = World::new(services.clone()).node(Some(node(&[("bgp", "yes")])));
    assert_eq!(vips(&once(&selecting, &ok)), [ip("198.51.100.7")]);
    let ok = World::new(services.clone()).node(Some(tainted(node(&[]), "NoSchedule")));
    assert_eq!(vips(&once(&default_cfg(), &ok)), [ip("198.51.100.7")]);
}

#[test]
fn the_lifecycle_controllers_automatic_taints_never_drain_and_only_listed_taints_do() {
    let world = World::new(vec![lb("web", &["198.51.100.7"])]);
    let with = |n: Node| world.clone().node(Some(n));
    let automatic = tainted_with(
        tainted_with(node(&[]), "node.kubernetes.io/not-ready", "NoExecute"),
        "node.kubernetes.io/unreachable",
        "NoExecute",
    );
    for config in [default_cfg(), cfg(MAINTENANCE, "", "")] {
        let e = once(&config, &with(automatic.clone()));
        assert_eq!(vips(&e), [ip("198.51.100.7")], "not-ready/unreachable");
        assert_eq!(e.node_problem, None);
        // Any other NoExecute taint the config does not name: not a drain.
        let other = tainted_with(node(&[]), "example.com/other", "NoExecute");
        assert_eq!(vips(&once(&config, &with(other))), [ip("198.51.100.7")]);
    }
    // A listed taint drains whatever its effect and value, also on top of
    // the automatic ones.
    let config = cfg(MAINTENANCE, "", "");
    let mut listed = tainted_with(automatic, "example.com/maintenance", "NoSchedule");
    listed
        .spec
        .as_mut()
        .and_then(|s| s.taints.as_mut())
        .expect("taints")[2]
        .value = Some("kernel".into());
    let e = once(&config, &with(listed));
    assert!(e.vips.is_empty());
    assert_eq!(
        e.node_problem.as_deref(),
        Some(
            "node \"n1\" has the taint example.com/maintenance=kernel:NoSchedule, which speaker.drain_taints lists"
        )
    );
    // The drain is a Drained absence: withdrawn at once.
    let es = run(
        &config,
        &[
            world.clone(),
            with(tainted_with(
                node(&[]),
                "example.com/maintenance",
                "NoExecute",
            )),
        ],
    );
    assert_eq!(absences(&es[1]), [(ip("198.51.100.7"), Absence::Drained)]);
    // The automatic taints arriving on an advertising node change nothing.
    let es = run(
        &config,
        &[world.clone(), with(tainted(node(&[]), "NoExecute")), world],
    );
    assert!(
        es.iter()
            .all(|e| vips(e) == [ip("198.51.100.7")] && e.absences.is_empty())
    );
}

#[test]
fn the_automatic_taints_cannot_be_listed_and_taint_keys_are_checked() {
    for (key, message) in [
        (
            "node.kubernetes.io/not-ready",
            "taint node.kubernetes.io/not-ready is added by the node lifecycle controller on its own",
        ),
        (
            "node.kubernetes.io/unreachable",
            "taint node.kubernetes.io/unreachable is added by the node lifecycle controller on its own",
        ),
        ("bad key!", "taint key \"bad key!\" is invalid"),
    ] {
        let text = format!(
            "[speaker]\nasn = 65001\ndrain_taints = [\"{key}\"]\n[source]\nkind = \"kubernetes\"\n[[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n"
        );
        let diags = config::parse(Path::new("t.toml"), &text).expect_err(key);
        let printed: Vec<String> = diags.iter().map(|d| d.message.clone()).collect();
        assert!(
            printed.iter().any(|m| m.contains(message)),
            "{key}: {printed:?}"
        );
    }
    assert_eq!(
        cfg(MAINTENANCE, "", "").speaker.drain_taints,
        ["example.com/maintenance"]
    );
    assert!(default_cfg().speaker.drain_taints.is_empty());
}

#[test]
fn without_drain_on_cordon_a_cordoned_node_keeps_advertising_but_exclusion_still_applies() {
    let config = cfg("drain_on_cordon = false", "", "");
    let world = World::new(vec![lb("web", &["198.51.100.7"])]);
    let w = world
        .clone()
        .node(Some(tainted(cordoned(node(&[])), "NoExecute")));
    assert_eq!(vips(&once(&config, &w)), [ip("198.51.100.7")]);
    let w = world.node(Some(cordoned(node(&[(EXCLUDE_LABEL, "true")]))));
    assert!(once(&config, &w).vips.is_empty());
}

// ----- transient versus definitive -----

/// Evaluates a sequence of worlds, one second apart.
fn run(config: &Config, worlds: &[World]) -> Vec<Evaluation> {
    let t = Instant::now();
    let mut prev = Evaluation::default();
    let mut out = Vec::new();
    for (i, world) in worlds.iter().enumerate() {
        prev = world.eval(&prev, config, t + Duration::from_secs(i as u64));
        out.push(prev.clone());
    }
    out
}

fn absences(e: &Evaluation) -> Vec<(IpAddr, Absence)> {
    e.absences.iter().map(|(k, v)| (*k, *v)).collect()
}

#[test]
fn an_emptied_address_list_is_a_plain_vanish_with_no_reason() {
    let up = World::new(vec![lb("web", &["198.51.100.7"])]);
    let down = World::new(vec![lb("web", &[])]);
    let es = run(&default_cfg(), &[up.clone(), down.clone(), up, down]);
    for (i, e) in es.iter().enumerate() {
        assert_eq!(e.vips.is_empty(), i % 2 == 1, "step {i}");
        assert!(e.absences.is_empty(), "step {i}: {:?}", e.absences);
    }
}

#[test]
fn losing_the_last_local_endpoint_is_a_no_local_endpoint_absence_however_it_goes() {
    let vip = ip("198.51.100.7");
    let svc = local(lb("web", &["198.51.100.7"]));
    let ready = conditions(Some(true), Some(true), Some(false));
    let up = World::new(vec![svc.clone()]).slices(vec![slice_with(
        "web",
        "w",
        Some(NODE),
        ready.clone(),
    )]);
    let after = |slices: Vec<EndpointSlice>| World::new(vec![svc.clone()]).slices(slices);
    let cases: Vec<(&str, World)> = vec![
        (
            "not ready",
            after(vec![slice_with(
                "web",
                "w",
                Some(NODE),
                conditions(Some(false), Some(false), Some(false)),
            )]),
        ),
        (
            "terminating",
            after(vec![slice_with(
                "web",
                "w",
                Some(NODE),
                conditions(Some(false), Some(true), Some(true)),
            )]),
        ),
        ("slice deleted", after(vec![])),
        (
            "moved to another node",
            after(vec![slice_with("web", "w", Some("n2"), ready.clone())]),
        ),
    ];
    for (what, world) in cases {
        let es = run(&default_cfg(), &[up.clone(), world]);
        assert_eq!(vips(&es[0]), [vip], "{what}");
        assert!(es[1].vips.is_empty(), "{what}");
        assert_eq!(
            absences(&es[1]),
            [(vip, Absence::NoLocalEndpoint)],
            "{what}"
        );
    }
    // The traffic policy turning Local with no endpoint here: the same.
    let cluster = World::new(vec![lb("web", &["198.51.100.7"])]);
    let es = run(&default_cfg(), &[cluster, after(vec![])]);
    assert_eq!(absences(&es[1]), [(vip, Absence::NoLocalEndpoint)]);
}

#[test]
fn an_emptied_address_list_of_a_local_service_with_its_endpoint_ready_is_a_plain_vanish() {
    let ready = conditions(Some(true), Some(true), Some(false));
    let slices = vec![slice_with("web", "w", Some(NODE), ready)];
    let es = run(
        &default_cfg(),
        &[
            World::new(vec![local(lb("web", &["198.51.100.7"]))]).slices(slices.clone()),
            World::new(vec![local(lb("web", &[]))]).slices(slices.clone()),
            // Then the endpoint goes too: escalated, the hold-down no
            // longer applies.
            World::new(vec![local(lb("web", &[]))]),
            // Ready again but the list still empty: reasons never step back.
            World::new(vec![local(lb("web", &[]))]).slices(slices),
        ],
    );
    assert!(es[1].vips.is_empty() && es[1].absences.is_empty());
    assert_eq!(
        absences(&es[2]),
        [(ip("198.51.100.7"), Absence::NoLocalEndpoint)]
    );
    assert_eq!(
        absences(&es[3]),
        [(ip("198.51.100.7"), Absence::NoLocalEndpoint)]
    );
}

#[test]
fn a_vip_shared_with_a_service_whose_list_emptied_keeps_the_hold_down() {
    let vip = ip("198.51.100.7");
    let ready = conditions(Some(true), Some(true), Some(false));
    let slices = vec![slice_with("web", "w", Some(NODE), ready)];
    let both = World::new(vec![
        local(lb("web", &["198.51.100.7"])),
        lb("api", &["198.51.100.7"]),
    ])
    .slices(slices);
    // web loses its endpoint while api's list empties: api may be back in a
    // second, so no reason.
    let es = run(
        &default_cfg(),
        &[
            both.clone(),
            World::new(vec![local(lb("web", &["198.51.100.7"])), lb("api", &[])]),
        ],
    );
    assert!(es[1].vips.is_empty() && es[1].absences.is_empty());
    // web loses its endpoint while api is deleted: no local endpoint.
    let es = run(
        &default_cfg(),
        &[
            both.clone(),
            World::new(vec![local(lb("web", &["198.51.100.7"]))]),
        ],
    );
    assert_eq!(absences(&es[1]), [(vip, Absence::NoLocalEndpoint)]);
    // api still gives it: advertised, whatever web's endpoints do.
    let es = run(
        &default_cfg(),
        &[
            both,
            World::new(vec![
                local(lb("web", &["198.51.100.7"])),
                lb("api", &["198.51.100.7"]),
            ]),
        ],
    );
    assert_eq!(vips(&es[1]), [vip]);
}

#[test]
fn a_no_local_endpoint_vip_whose_service_is_then_deleted_escalates_to_deleted() {
    let svc = local(lb("web", &["198.51.100.7"]));
    let ready = conditions(Some(true), Some(true), Some(false));
    let es = run(
        &default_cfg(),
        &[
            World::new(vec![svc.clone()]).slices(vec![slice_with("web", "w", Some(NODE), ready)]),
            World::new(vec![svc]),
            World::new(vec![]),
        ],
    );
    assert_eq!(
        absences(&es[1]),
        [(ip("198.51.100.7"), Absence::NoLocalEndpoint)]
    );
    assert_eq!(absences(&es[2]), [(ip("198.51.100.7"), Absence::Deleted)]);
}

#[test]
fn deletion_class_or_type_change_opt_out_and_deselection_are_definitive() {
    let vip = ip("198.51.100.7");
    let svc = with_labels(lb("web", &["198.51.100.7"]), &[("bgp", "on")]);
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nservice_selector = { match_labels = { bgp = \"on\" } }\n",
    );
    let changed: Vec<(&str, Vec<Service>)> = vec![
        ("deleted", vec![]),
        (
            "class changed",
            vec![with_class(svc.clone(), "io.cilium/bgp")],
        ),
        (
            "type changed",
            vec![with_spec(svc.clone(), |s| {
                s.type_ = Some("NodePort".into())
            })],
        ),
        (
            "opted out",
            vec![with_annotation(svc.clone(), ADVERTISE_ANNOTATION, "false")],
        ),
        (
            "deselected",
            vec![with_labels(svc.clone(), &[("bgp", "off")])],
        ),
    ];
    for (what, services) in changed {
        let es = run(
            &config,
            &[World::new(vec![svc.clone()]), World::new(services)],
        );
        assert_eq!(vips(&es[0]), [vip], "{what}");
        assert!(es[1].vips.is_empty(), "{what}");
        assert_eq!(absences(&es[1]), [(vip, Absence::Deleted)], "{what}");
    }
}

#[test]
fn a_config_change_that_deselects_a_vip_is_definitive() {
    let world = World::new(vec![lb("web", &["198.51.100.7"])]);
    let t = Instant::now();
    let first = world.eval(&Evaluation::default(), &default_cfg(), t);
    let strict = cfg("", "require_class = true", "");
    let second = world.eval(&first, &strict, t);
    assert_eq!(absences(&second), [(ip("198.51.100.7"), Absence::Deleted)]);
}

#[test]
fn a_cordon_drains_every_vip_including_one_held_down_after_a_flap() {
    let world = World::new(vec![
        lb("web", &["198.51.100.7"]),
        lb("api", &["198.51.100.8"]),
    ]);
    let flapped = World::new(vec![lb("web", &["198.51.100.7"]), lb("api", &[])]);
    let drained = flapped.clone().node(Some(cordoned(node(&[]))));
    let back = flapped.clone();
    let es = run(&default_cfg(), &[world, flapped, drained, back]);
    assert_eq!(vips(&es[1]), [ip("198.51.100.7")]);
    assert!(es[1].absences.is_empty(), "the flap gives no reason");
    assert!(es[2].vips.is_empty());
    assert_eq!(
        absences(&es[2]),
        [
            (ip("198.51.100.7"), Absence::Drained),
            (ip("198.51.100.8"), Absence::Drained)
        ]
    );
    // Uncordoned: .7 is back (its reason cleared); .8, still gone, keeps
    // the reason it was withdrawn for.
    assert_eq!(vips(&es[3]), [ip("198.51.100.7")]);
    assert_eq!(absences(&es[3]), [(ip("198.51.100.8"), Absence::Drained)]);
}

#[test]
fn a_vanished_vip_whose_service_is_then_deleted_escalates_to_deleted() {
    let es = run(
        &default_cfg(),
        &[
            World::new(vec![lb("web", &["198.51.100.7"])]),
            World::new(vec![lb("web", &[])]),
            World::new(vec![]),
        ],
    );
    assert!(es[1].absences.is_empty());
    assert_eq!(absences(&es[2]), [(ip("198.51.100.7"), Absence::Deleted)]);
}

// ----- mass disappearances -----

fn four() -> Vec<Service> {
    ["a", "b", "c", "d"]
        .iter()
        .enumerate()
        .map(|(i, name)| lb(name, &[&format!("198.51.100.{}", i + 1)]))
        .collect()
}

fn all_four() -> Vec<IpAddr> {
    (1..=4).map(|i| ip(&format!("198.51.100.{i}"))).collect()
}

/// Each of `ips` absent as deleted, as [`absences`] lists them.
fn deleted(ips: &[IpAddr]) -> Vec<(IpAddr, Absence)> {
    ips.iter().map(|ip| (*ip, Absence::Deleted)).collect()
}

#[test]
fn an_empty_service_list_is_an_absence_not_a_deletion_of_every_service() {
    let config = default_cfg();
    let t = Instant::now();
    let listed = World::new(four());
    let empty = World::new(vec![]);
    let e0 = listed.eval(&Evaluation::default(), &config, t);
    assert_eq!(vips(&e0), all_four());
    assert_eq!(e0.mass_absence, None);
    // The API server answers with no Service at all: every VIP goes, as
    // an absence (no reason: the hold-down, then the guard).
    let e1 = empty.eval(&e0, &config, t + Duration::from_secs(1));
    assert!(e1.vips.is_empty());
    assert_eq!(absences(&e1), [], "no VIP goes as deleted");
    assert_eq!(e1.mass_absence, Some((4, 4)));
    assert_eq!(
        e1.explain(ip("198.51.100.1")),
        [
            "gone from default/a: its Service went missing from the API server together with too many others (a mass disappearance), which is taken as an absence, not a deletion: the hold-down applies (stability.withdraw_hold_down 30s), then the mass-withdrawal guard"
        ]
    );
    // Still missing later: still an absence, never escalated to deleted,
    // and no new mass disappearance is reported.
    let e2 = empty.eval(&e1, &config, t + Duration::from_secs(20));
    assert_eq!(absences(&e2), []);
    assert_eq!(e2.mass_absence, None);
    // The list comes back: every VIP with it.
    let e3 = listed.eval(&e2, &config, t + Duration::from_secs(25));
    assert_eq!(vips(&e3), all_four());
    assert_eq!(absences(&e3), []);
}

#[test]
fn deletions_within_the_guards_allowance_are_deletions_and_more_at_once_are_an_absence() {
    let config = default_cfg();
    let t = Instant::now();
    let e0 = World::new(four()).eval(&Evaluation::default(), &config, t);
    // Of 4 VIPs the guard lets 2 go in one step (max_withdraw_fraction
    // 0.5): one or two Services deleted at once are deletions.
    for kept in [3, 2] {
        let world = World::new(four()[..kept].to_vec());
        let e = world.eval(&e0, &config, t);
        assert_eq!(absences(&e), deleted(&all_four()[kept..]), "{kept} kept");
        assert_eq!(e.mass_absence, None);
    }
    // Three at once: a mass disappearance.
    let e = World::new(four()[..1].to_vec()).eval(&e0, &config, t);
    assert_eq!(vips(&e), [ip("198.51.100.1")]);
    assert_eq!(absences(&e), []);
    assert_eq!(e.mass_absence, Some((3, 4)));
    // A Service deleted alone afterwards is a deletion again.
    let later = World::new(vec![]).eval(&e, &config, t + Duration::from_secs(1));
    assert_eq!(absences(&later), [(ip("198.51.100.1"), Absence::Deleted)]);
    assert_eq!(later.mass_absence, None);
}

#[test]
fn vips_held_down_count_in_the_base_a_mass_disappearance_is_measured_against() {
    let config = default_cfg();
    let t = Instant::now();
    let e0 = World::new(four()).eval(&Evaluation::default(), &config, t);
    // Two address lists empty (held down by the stability layer)...
    let mut flapped = four();
    flapped[2] = lb("c", &[]);
    flapped[3] = lb("d", &[]);
    let e1 = World::new(flapped).eval(&e0, &config, t);
    assert_eq!(vips(&e1), all_four()[..2]);
    assert_eq!(absences(&e1), []);
    // ...then those two Services are deleted: 2 of the 4 routes that may
    // be on the wire, within the guard's share: deletions.
    let e2 = World::new(four()[..2].to_vec()).eval(&e1, &config, t);
    assert_eq!(
        absences(&e2),
        [
            (ip("198.51.100.3"), Absence::Deleted),
            (ip("198.51.100.4"), Absence::Deleted)
        ]
    );
    assert_eq!(e2.mass_absence, None);
}

#[test]
fn services_deselected_at_once_are_deletions_whatever_their_number() {
    // A deliberate change (here the config's): not a disappearance.
    let t = Instant::now();
    let world = World::new(four());
    let e0 = world.eval(&Evaluation::default(), &default_cfg(), t);
    let e1 = world.eval(&e0, &cfg("", "require_class = true", ""), t);
    assert!(e1.vips.is_empty());
    assert_eq!(absences(&e1), deleted(&all_four()));
    assert_eq!(e1.mass_absence, None);
}

#[test]
fn services_of_a_namespace_no_longer_watched_are_deletions_whatever_their_number() {
    let t = Instant::now();
    let mut services = four();
    let other = fixtures::load_balancer_service("other", "e", &["198.51.100.5"]);
    services.push(other.clone());
    let all = cfg("", "namespaces = [\"default\", \"other\"]", "");
    let e0 = World::new(services).eval(&Evaluation::default(), &all, t);
    assert_eq!(vips(&e0).len(), 5);
    // A reload watches only "other": the four of "default" are no longer
    // listed, on purpose.
    let only_other = cfg("", "namespaces = [\"other\"]", "");
    let e1 = World::new(vec![other]).eval(&e0, &only_other, t);
    assert_eq!(vips(&e1), [ip("198.51.100.5")]);
    assert_eq!(absences(&e1), deleted(&all_four()));
    assert_eq!(e1.mass_absence, None);
}

#[test]
fn with_the_guard_off_only_an_empty_list_is_a_mass_disappearance() {
    let config = cfg("", "", "[stability]\nmax_withdraw_fraction = 1.0\n");
    let t = Instant::now();
    let e0 = World::new(four()).eval(&Evaluation::default(), &config, t);
    let e = World::new(four()[..1].to_vec()).eval(&e0, &config, t);
    assert_eq!(absences(&e).len(), 3, "three deletions");
    assert_eq!(e.mass_absence, None);
    let e = World::new(vec![]).eval(&e0, &config, t);
    assert_eq!(absences(&e), []);
    assert_eq!(e.mass_absence, Some((4, 4)));
    // One VIP whose only Service is deleted: a deletion, list empty or not.
    let one = World::new(four()[..1].to_vec()).eval(&Evaluation::default(), &config, t);
    let e = World::new(vec![]).eval(&one, &config, t);
    assert_eq!(absences(&e), [(ip("198.51.100.1"), Absence::Deleted)]);
}

#[test]
fn the_incremental_update_finds_the_same_mass_disappearance() {
    let config = default_cfg();
    let t = Instant::now();
    let world = World::new(four());
    let mut eval = world.eval(&Evaluation::default(), &config, t);
    let gone: Vec<(ServiceKey, Option<Arc<ServiceRecord>>)> = world.services[1..]
        .iter()
        .map(|s| (s.key.clone(), None))
        .collect();
    let changes = Changes {
        services: &gone,
        endpoint_slices: &[],
        namespaces: None,
    };
    update(&mut eval, &config, &changes, t);
    let full = World::new(four()[..1].to_vec()).eval(
        &world.eval(&Evaluation::default(), &config, t),
        &config,
        t,
    );
    assert_eq!(eval.mass_absence, Some((3, 4)));
    assert_eq!(absences(&eval), []);
    assert_eq!(eval, full);
}

#[test]
fn a_missing_node_is_an_absence_not_a_drain() {
    let config = default_cfg();
    let t = Instant::now();
    let world = World::new(four());
    let e0 = world.eval(&Evaluation::default(), &config, t);
    let missing = world.clone().node(None);
    let e1 = missing.eval(&e0, &config, t + Duration::from_secs(1));
    assert!(e1.vips.is_empty());
    assert!(e1.node_missing);
    assert_eq!(absences(&e1), [], "held down, not drained");
    assert_eq!(
        e1.explain(ip("198.51.100.1")),
        [
            "gone from default/a: node \"n1\" is missing from the API server, which is taken as an absence, not a drain: the hold-down applies (stability.withdraw_hold_down 30s), then the mass-withdrawal guard",
            "not advertised: node \"n1\" does not exist in the API server (is NODE_NAME right?)"
        ]
    );
    // A Service deleted while the Node is missing: still an absence.
    let e2 =
        World::new(four()[1..].to_vec())
            .node(None)
            .eval(&e1, &config, t + Duration::from_secs(2));
    assert_eq!(absences(&e2), []);
    // Back: everything back. A cordon, by contrast, drains.
    let e3 = world.eval(&e2, &config, t + Duration::from_secs(3));
    assert_eq!(vips(&e3), all_four());
    let cordon = world.clone().node(Some(cordoned(node(&[]))));
    let e4 = cordon.eval(&e3, &config, t + Duration::from_secs(4));
    assert_eq!(absences(&e4).len(), 4);
    assert!(absences(&e4).iter().all(|(_, a)| *a == Absence::Drained));
}

#[test]
fn reasons_are_repeated_until_the_vip_returns_and_forgotten_once_no_timer_can_need_them() {
    let config = default_cfg();
    let retention = config.stability.withdraw_hold_down
        + config.stability.delete_delay
        + Duration::from_secs(60);
    let t = Instant::now();
    let present = World::new(vec![lb("web", &["198.51.100.7"])]);
    let deleted = World::new(vec![]);
    let e0 = present.eval(&Evaluation::default(), &config, t);
    let e1 = deleted.eval(&e0, &config, t);
    let e2 = deleted.eval(&e1, &config, t + retention);
    assert_eq!(absences(&e2), [(ip("198.51.100.7"), Absence::Deleted)]);
    assert_eq!(e2, e1, "nothing changed: an identical evaluation");
    let e3 = deleted.eval(&e2, &config, t + retention + Duration::from_nanos(1));
    assert!(e3.absences.is_empty());
    assert!(e3.services_of(ip("198.51.100.7")).is_empty());
    // Coming back clears the reason.
    let e4 = present.eval(&e2, &config, t + Duration::from_secs(1));
    assert!(e4.absences.is_empty());
    assert_eq!(vips(&e4), [ip("198.51.100.7")]);
}

#[test]
fn a_vip_shared_by_two_services_goes_only_with_both_and_definitively_only_if_both_went_for_good() {
    let vip = ip("198.51.100.7");
    let tcp = lb("web-tcp", &["198.51.100.7"]);
    let udp = lb("web-udp", &["198.51.100.7"]);
    let both = World::new(vec![udp.clone(), tcp.clone()]);
    let es = run(
        &default_cfg(),
        &[both.clone(), World::new(vec![udp.clone()])],
    );
    assert_eq!(
        es[0].vips[&vip].route.service.as_deref(),
        Some("default/web-tcp")
    );
    assert_eq!(vips(&es[1]), [vip], "one Service still gives it");
    assert_eq!(
        es[1].vips[&vip].route.service.as_deref(),
        Some("default/web-udp")
    );

    // One deleted, the other's list emptied: a flap is possible, so no reason.
    let es = run(
        &default_cfg(),
        &[both.clone(), World::new(vec![lb("web-udp", &[])])],
    );
    assert!(es[1].vips.is_empty() && es[1].absences.is_empty());
    // Both deleted.
    let es = run(&default_cfg(), &[both, World::new(vec![])]);
    assert_eq!(absences(&es[1]), [(vip, Absence::Deleted)]);
    assert_eq!(
        es[1].services_of(vip),
        [
            ServiceKey::parse("default/web-tcp").expect("key"),
            ServiceKey::parse("default/web-udp").expect("key")
        ]
    );
}

// ----- determinism and explain -----

#[test]
fn the_order_of_objects_does_not_matter() {
    let services: Vec<Service> = (0..50u8)
        .map(|i| {
            with_spec(
                lb(&format!("s{i}"), &[&format!("198.51.100.{}", i % 20)]),
                |s| {
                    s.external_ips = Some(vec![format!("203.0.113.{i}")]);
                },
            )
        })
        .collect();
    let mut reversed = services.clone();
    reversed.reverse();
    let t = Instant::now();
    let a = World::new(services).eval(&Evaluation::default(), &default_cfg(), t);
    let b = World::new(reversed).eval(&Evaluation::default(), &default_cfg(), t);
    assert_eq!(a, b);
    assert_eq!(a.vips.len(), 70);
    assert_eq!(
        a.vips[&ip("198.51.100.0")].route.service.as_deref(),
        Some("default/s0")
    );
}

#[test]
fn explain_says_what_gives_a_vip_why_an_address_is_not_advertised_and_why_one_went() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nservice_selector = { match_labels = { bgp = \"on\" } }\n",
    );
    let on = with_labels(lb("web", &["198.51.100.7"]), &[("bgp", "on")]);
    let off = with_labels(lb("api", &["198.51.100.8"]), &[("bgp", "off")]);
    let t = Instant::now();
    let e = World::new(vec![on, off]).eval(&Evaluation::default(), &config, t);
    assert_eq!(
        e.explain(ip("198.51.100.7")),
        [
            "wanted: LoadBalancerIP of default/web (status.loadBalancer.ingress), under advertisement \"public\""
        ]
    );
    assert_eq!(
        e.explain(ip("198.51.100.8")),
        [
            "not advertised: default/api: advertisement \"public\": service_selector does not match: label \"bgp\" is \"off\", want \"on\""
        ]
    );
    assert_eq!(
        e.explain(ip("192.0.2.99")),
        [
            "no watched Service has the address 192.0.2.99 (in status.loadBalancer.ingress, spec.externalIPs, or spec.clusterIPs when an advertisement lists ClusterIP)"
        ]
    );
    let gone = World::new(vec![]).eval(&e, &config, t);
    assert_eq!(
        gone.explain(ip("198.51.100.7")),
        [
            "gone from default/web: deleted, opted out, or no longer selected: withdrawn after stability.delete_delay 0s"
        ]
    );
    let snap = gone.snapshot(false, true, Some("services: read timed out".into()));
    assert_eq!(
        snap.absences,
        BTreeMap::from([(ip("198.51.100.7"), Absence::Deleted)])
    );
    assert!(!snap.healthy);
    assert_eq!(snap.error.as_deref(), Some("services: read timed out"));
    assert!(gone.warnings.is_empty());
}

#[test]
fn explain_says_which_rule_applied_to_a_vip_that_went() {
    let config = cfg(
        "",
        "",
        "[stability]\nwithdraw_hold_down = \"30s\"\nlocal_endpoint_delay = \"2s\"\n",
    );
    let ready = conditions(Some(true), Some(true), Some(false));
    let slices = vec![slice_with("web", "w", Some(NODE), ready)];
    let up = World::new(vec![local(lb("web", &["198.51.100.7"]))]).slices(slices.clone());
    let es = run(
        &config,
        &[
            up.clone(),
            World::new(vec![local(lb("web", &["198.51.100.7"]))]),
        ],
    );
    let no_endpoint = "not advertised: default/web: externalTrafficPolicy is Local and node \"n1\" has no ready, non-terminating endpoint of it";
    assert_eq!(
        es[1].explain(ip("198.51.100.7")),
        [
            "gone from default/web: no ready local endpoint on node \"n1\": withdrawn after stability.local_endpoint_delay 2s",
            no_endpoint,
        ]
    );
    let es = run(
        &config,
        &[up, World::new(vec![local(lb("web", &[]))]).slices(slices)],
    );
    assert_eq!(
        es[1].explain(ip("198.51.100.7")),
        [
            "gone from default/web: address list emptied: the hold-down applies (stability.withdraw_hold_down 30s)"
        ]
    );
}

#[test]
fn reasons_are_kept_as_long_as_the_longer_of_delete_delay_and_local_endpoint_delay() {
    let config = cfg(
        "",
        "",
        "[stability]\nwithdraw_hold_down = \"30s\"\ndelete_delay = \"5s\"\nlocal_endpoint_delay = \"20s\"\n",
    );
    let retention = Duration::from_secs(30 + 20 + 60);
    let ready = conditions(Some(true), Some(true), Some(false));
    let t = Instant::now();
    let up = World::new(vec![local(lb("web", &["198.51.100.7"]))]).slices(vec![slice_with(
        "web",
        "w",
        Some(NODE),
        ready,
    )]);
    let lost = World::new(vec![local(lb("web", &["198.51.100.7"]))]);
    let e0 = up.eval(&Evaluation::default(), &config, t);
    let e1 = lost.eval(&e0, &config, t);
    let e2 = lost.eval(&e1, &config, t + retention);
    assert_eq!(
        absences(&e2),
        [(ip("198.51.100.7"), Absence::NoLocalEndpoint)]
    );
    let e3 = lost.eval(&e2, &config, t + retention + Duration::from_nanos(1));
    assert!(e3.absences.is_empty());
}

#[test]
fn uids_are_kept_for_the_events_of_gone_services() {
    let mut svc = lb("web", &["198.51.100.7"]);
    svc.metadata.uid = Some("u-1".into());
    let es = run(&default_cfg(), &[World::new(vec![svc]), World::new(vec![])]);
    let key = ServiceKey::parse("default/web").expect("key");
    assert_eq!(es[0].uid_of(&key), Some("u-1"));
    assert_eq!(es[1].uid_of(&key), Some("u-1"));
}

#[test]
fn service_keys_parse_and_print_as_namespace_slash_name() {
    let key = ServiceKey::parse("prod/web").expect("valid");
    assert_eq!(key.to_string(), "prod/web");
    for bad in ["web", "/web", "prod/", "a/b/c"] {
        assert_eq!(ServiceKey::parse(bad), None, "{bad}");
    }
}

// Per-Service attributes (policy_attrs), PodCIDRs.

const ALLOW_ALL: &str = "[[advertisement]]\nname = \"public\"\ncommunities = [\"65001:100\"]\nallow_service_attributes = [\"communities\", \"large-communities\", \"local-pref\", \"med\", \"as-path-prepend\"]\n";

fn annotated(pairs: &[(&str, &str)]) -> Service {
    let mut svc = lb("web", &["198.51.100.10"]);
    for (k, v) in pairs {
        svc = with_annotation(svc, k, v);
    }
    svc
}

#[test]
fn annotations_parse_into_service_attributes() {
    let svc = annotated(&[
        ("holdfast.dev/communities", "65001:200, 65001:300,65001:200"),
        ("holdfast.dev/large-communities", "65001:1:2"),
        ("holdfast.dev/local-pref", "250"),
        ("holdfast.dev/med", " 7 "),
        ("holdfast.dev/as-path-prepend", "3"),
    ]);
    let r = policy_attrs::requested(&ServiceRecord::of(svc));
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert_eq!(r.present.len(), 5);
    assert_eq!(
        r.values,
        crate::model::ServiceAttributes {
            communities: vec![(65001 << 16) | 200, (65001 << 16) | 300],
            large_communities: vec![(65001, 1, 2)],
            local_pref: Some(250),
            med: Some(7),
            as_path_prepend: Some(3),
            ..Default::default()
        }
    );
}

#[test]
fn bad_annotations_are_refused_one_by_one() {
    let svc = annotated(&[
        ("holdfast.dev/communities", "65001:200,nonsense"),
        ("holdfast.dev/large-communities", ""),
        ("holdfast.dev/local-pref", "-1"),
        ("holdfast.dev/med", "4294967296"),
        ("holdfast.dev/as-path-prepend", "11"),
    ]);
    let r = policy_attrs::requested(&ServiceRecord::of(svc));
    assert!(r.present.is_empty(), "{:?}", r.present);
    assert_eq!(r.problems.len(), 5, "{:?}", r.problems);
    assert!(
        r.problems[0].starts_with("holdfast.dev/communities is \"65001:200,nonsense\""),
        "{:?}",
        r.problems
    );
    assert!(r.problems[4].contains("0..=10"), "{:?}", r.problems);
}

#[test]
fn allowed_annotations_reach_the_vip_and_explain() {
    let config = cfg("", "", ALLOW_ALL);
    let w = World::new(vec![annotated(&[
        ("holdfast.dev/med", "7"),
        ("holdfast.dev/communities", "65001:200"),
    ])]);
    let e = w.eval(&Evaluation::default(), &config, Instant::now());
    let vip = &e.vips[&ip("198.51.100.10")];
    let a = vip.route.attributes.as_deref().expect("attributes");
    assert_eq!(a.med, Some(7));
    assert_eq!(a.communities, vec![(65001 << 16) | 200]);
    assert!(e.refused.is_empty(), "{:?}", e.refused);
    let lines = e.explain(ip("198.51.100.10"));
    assert!(
        lines
            .iter()
            .any(|l| l
                == "attributes from the annotations of default/web: communities 65001:200, med 7"),
        "{lines:?}"
    );
}

#[test]
fn disallowed_annotations_are_refused_and_the_vip_keeps_the_advertisement_attributes() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nallow_service_attributes = [\"med\"]\n",
    );
    let w = World::new(vec![annotated(&[
        ("holdfast.dev/med", "7"),
        ("holdfast.dev/local-pref", "300"),
    ])]);
    let e = w.eval(&Evaluation::default(), &config, Instant::now());
    let a = e.vips[&ip("198.51.100.10")]
        .route
        .attributes
        .as_deref()
        .expect("the allowed med");
    assert_eq!((a.med, a.local_pref), (Some(7), None));
    let key = ServiceKey::parse("default/web").unwrap();
    assert_eq!(
        e.refused[&key],
        vec![
            "holdfast.dev/local-pref is not allowed by advertisement \"public\" (allow_service_attributes does not list \"local-pref\")"
                .to_string()
        ]
    );
    let lines = e.explain(ip("198.51.100.10"));
    assert!(
        lines.iter().any(
            |l| l.starts_with("refused: holdfast.dev/local-pref is not allowed")
                && l.ends_with("the route keeps the advertisement's attributes")
        ),
        "{lines:?}"
    );

    // Nothing allowed (the default): no attributes at all.
    let none = w.eval(&Evaluation::default(), &default_cfg(), Instant::now());
    assert_eq!(none.vips[&ip("198.51.100.10")].route.attributes, None);
    assert_eq!(none.refused[&key].len(), 2, "{:?}", none.refused);
}

#[test]
fn etp_local_vips_are_marked_for_the_aggregation() {
    let w = World::new(vec![
        local(lb("local", &["198.51.100.20"])),
        lb("cluster", &["198.51.100.21"]),
    ])
    .slices(vec![slice(
        "local",
        "local-1",
        &[SliceEndpoint::ready("10.0.0.1", NODE)],
    )]);
    let e = w.eval(&Evaluation::default(), &default_cfg(), Instant::now());
    assert!(e.vips[&ip("198.51.100.20")].route.local_traffic);
    assert!(!e.vips[&ip("198.51.100.21")].route.local_traffic);
}

fn with_pod_cidrs(mut n: Node, cidrs: &[&str]) -> Node {
    n.spec.get_or_insert_with(Default::default).pod_cidrs =
        Some(cidrs.iter().map(|c| c.to_string()).collect());
    n
}

#[test]
fn a_pod_cidr_goes_only_under_advertisements_whose_ranges_hold_all_of_it() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"pods\"\naddresses = [\"PodCIDR\"]\nvip_ranges = [\"10.244.0.0/16\"]\n\
         [[advertisement]]\nname = \"narrow\"\naddresses = [\"PodCIDR\"]\nvip_ranges = [\"10.244.1.0-10.244.1.127\", \"fd00:1::/48\"]\n",
    );
    let w = World::new(vec![]).node(Some(with_pod_cidrs(
        node(&[]),
        &["10.244.1.0/24", "fd00:1::/64", "fd00:2::/64"],
    )));
    let e = w.eval(&Evaluation::default(), &config, Instant::now());
    let got: Vec<(String, Vec<String>)> = e
        .prefixes
        .iter()
        .map(|(p, v)| {
            (
                p.to_string(),
                v.route.advertisements.iter().cloned().collect(),
            )
        })
        .collect();
    // 10.244.1.0/24 is wholly in "pods" but only half in "narrow".
    assert_eq!(
        got,
        [
            ("10.244.1.0/24".to_string(), vec!["pods".to_string()]),
            ("fd00:1::/64".to_string(), vec!["narrow".to_string()]),
        ]
    );
    assert_eq!(
        e.warnings.iter().collect::<Vec<_>>(),
        [
            "node spec.podCIDRs has fd00:2::/64, which is not wholly inside the vip_ranges of any advertisement that lists \"PodCIDR\" (\"pods\" [\"10.244.0.0/16\"], \"narrow\" [\"10.244.1.0/25\", \"fd00:1::/48\"]); not advertised"
        ]
    );
}

#[test]
fn pod_cidrs_are_announced_when_an_advertisement_lists_them() {
    let config = cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\n[[advertisement]]\nname = \"pods\"\naddresses = [\"PodCIDR\"]\n",
    );
    let w = World::new(vec![]).node(Some(with_pod_cidrs(
        node(&[]),
        &["10.244.1.0/24", "fd00:1::/64", "bad"],
    )));
    let e = w.eval(&Evaluation::default(), &config, Instant::now());
    let keys: Vec<String> = e.prefixes.keys().map(ToString::to_string).collect();
    assert_eq!(keys, ["10.244.1.0/24", "fd00:1::/64"]);
    let ads: Vec<&String> = e
        .prefixes
        .values()
        .next()
        .unwrap()
        .route
        .advertisements
        .iter()
        .collect();
    assert_eq!(ads, ["pods"]);
    assert!(
        e.warnings
            .iter()
            .any(|w| w.contains("\"bad\", not a prefix")),
        "{:?}",
        e.warnings
    );
    // Not listed: nothing.
    let none = w.eval(&Evaluation::default(), &default_cfg(), Instant::now());
    assert!(none.prefixes.is_empty());
    // A drained node withdraws them at once.
    let mut cordoned = with_pod_cidrs(node(&[]), &["10.244.1.0/24"]);
    cordoned.spec.as_mut().unwrap().unschedulable = Some(true);
    let d = World::new(vec![])
        .node(Some(cordoned))
        .eval(&e, &config, Instant::now());
    assert!(d.prefixes.is_empty());
    assert_eq!(
        d.prefix_absences.get(&"10.244.1.0/24".parse().unwrap()),
        Some(&Absence::Drained)
    );
}

// ----- link bandwidth (steering) -----

fn weighted_cfg() -> Config {
    cfg(
        "",
        "",
        "[[advertisement]]\nname = \"public\"\nlink_bandwidth = \"per-endpoint\"\n",
    )
}

fn endpoints_of(e: &Evaluation, address: &str) -> Option<u32> {
    e.vips[&ip(address)].route.attributes.as_ref()?.endpoints
}

fn ready_on(n: usize, node: &str) -> Vec<SliceEndpoint> {
    (0..n)
        .map(|i| SliceEndpoint::ready(&format!("10.0.0.{}", i + 1), node))
        .collect()
}

#[test]
fn link_bandwidth_counts_ready_local_endpoints_of_a_local_service() {
    let c = weighted_cfg();
    let mut eps = ready_on(3, NODE);
    eps.push(SliceEndpoint::ready("10.0.1.1", "other-node"));
    eps.push(SliceEndpoint {
        ready: false,
        ..SliceEndpoint::ready("10.0.0.9", NODE)
    });
    let w = World::new(vec![local(lb("web", &["198.51.100.10"]))])
        .slices(vec![slice("web", "web-1", &eps)]);
    let e = once(&c, &w);
    assert_eq!(
        endpoints_of(&e, "198.51.100.10"),
        Some(3),
        "other nodes' and unready ones not counted"
    );

    // A dual-stack Service: the IPv6 slice names the same pods, not more.
    let mut v6 = slice("web", "web-v6", &ready_on(3, NODE));
    v6.address_type = "IPv6".into();
    let w = w.clone().slices(vec![slice("web", "web-1", &eps), v6]);
    assert_eq!(endpoints_of(&once(&c, &w), "198.51.100.10"), Some(3));

    // Two slices of one family add up.
    let w = World::new(vec![local(lb("web", &["198.51.100.10"]))]).slices(vec![
        slice("web", "web-1", &ready_on(1, NODE)),
        slice("web", "web-2", &ready_on(2, NODE)),
    ]);
    assert_eq!(endpoints_of(&once(&c, &w), "198.51.100.10"), Some(3));
}

#[test]
fn link_bandwidth_is_one_unit_for_a_cluster_service_and_absent_without_the_key() {
    let w = World::new(vec![lb("web", &["198.51.100.10"])]).slices(vec![slice(
        "web",
        "web-1",
        &ready_on(3, NODE),
    )]);
    assert_eq!(
        endpoints_of(&once(&weighted_cfg(), &w), "198.51.100.10"),
        Some(1)
    );
    assert_eq!(
        endpoints_of(&once(&default_cfg(), &w), "198.51.100.10"),
        None
    );
}

#[test]
fn a_scale_up_burst_reaches_the_route_once_it_settles() {
    let c = weighted_cfg();
    let svc = vec![local(lb("web", &["198.51.100.10"]))];
    let at =
        |n: usize| World::new(svc.clone()).slices(vec![slice("web", "web-1", &ready_on(n, NODE))]);
    let t0 = Instant::now();
    let e0 = at(1).eval(&Evaluation::default(), &c, t0);
    assert_eq!(
        endpoints_of(&e0, "198.51.100.10"),
        Some(1),
        "a first count at once"
    );
    assert_eq!(e0.bandwidth_due(), None);
    let e1 = at(2).eval(&e0, &c, t0 + Duration::from_millis(300));
    let e2 = at(3).eval(&e1, &c, t0 + Duration::from_millis(600));
    assert_eq!(
        endpoints_of(&e2, "198.51.100.10"),
        Some(1),
        "still settling"
    );
    assert_eq!(
        e2.bandwidth_due(),
        Some(t0 + Duration::from_millis(600) + crate::model::link_bandwidth::SETTLE)
    );
    assert!(
        e2.explain(ip("198.51.100.10"))
            .iter()
            .any(|l| l.contains("1 endpoint unit(s) announced, 3 waiting")),
        "{:?}",
        e2.explain(ip("198.51.100.10"))
    );
    let e3 = at(3).eval(&e2, &c, e2.bandwidth_due().unwrap());
    assert_eq!(
        endpoints_of(&e3, "198.51.100.10"),
        Some(3),
        "1 -> 3 in one step"
    );
    assert_eq!(e3.bandwidth_due(), None);
}

/// The incremental path (`update`) against the full evaluation, over
/// random sequences of changes to Services, EndpointSlices and the Node.
mod incremental {
    use proptest::prelude::*;

    use super::*;
    use crate::source::kubernetes::records::{EndpointState, Ingress};

    const ADDRESSES: [&str; 4] = [
        "198.51.100.1",
        "198.51.100.2",
        "198.51.100.3",
        "2001:db8::1",
    ];

    fn config() -> Config {
        cfg(
            "",
            "",
            "[stability]\nwithdraw_hold_down = \"10s\"\ndelete_delay = \"5s\"\nlocal_endpoint_delay = \"5s\"\n\
             [[advertisement]]\nname = \"all\"\naddresses = [\"LoadBalancerIP\", \"ExternalIP\"]\n\
             [[advertisement]]\nname = \"public\"\nservice_selector = { match_labels = { bgp = \"on\" } }\n\
             vip_ranges = [\"198.51.100.1-198.51.100.2\", \"2001:db8::/64\"]\n",
        )
    }

    /// A Service as the test draws it.
    #[derive(Debug, Clone)]
    struct Shape {
        ingress: Vec<usize>,
        external: Vec<usize>,
        local: bool,
        bgp: bool,
        opted_out: bool,
        load_balancer: bool,
        hostname: bool,
    }

    #[derive(Debug, Clone)]
    enum Step {
        Service(usize, Option<Shape>),
        /// This node's endpoint of Service `i`'s slice: (ready, terminating),
        /// or none here.
        Slice(usize, Option<(bool, bool)>),
        /// The Node excluded from load balancers, or not; `None`: missing.
        Node(Option<bool>),
    }

    fn shape() -> impl Strategy<Value = Shape> {
        (
            proptest::collection::vec(0..ADDRESSES.len(), 0..3),
            proptest::collection::vec(0..ADDRESSES.len(), 0..2),
            any::<bool>(),
            any::<bool>(),
            prop::bool::weighted(0.15),
            prop::bool::weighted(0.85),
            prop::bool::weighted(0.15),
        )
            .prop_map(
                |(ingress, external, local, bgp, opted_out, load_balancer, hostname)| Shape {
                    ingress,
                    external,
                    local,
                    bgp,
                    opted_out,
                    load_balancer,
                    hostname,
                },
            )
    }

    fn step() -> impl Strategy<Value = (Step, u64)> {
        let step = prop_oneof![
            5 => (0..5usize, proptest::option::weighted(0.8, shape()))
                .prop_map(|(i, s)| Step::Service(i, s)),
            4 => (0..5usize, proptest::option::weighted(0.7, (any::<bool>(), prop::bool::weighted(0.2))))
                .prop_map(|(i, e)| Step::Slice(i, e)),
            1 => proptest::option::weighted(0.8, any::<bool>()).prop_map(Step::Node),
        ];
        // Seconds before the step: past the reasons' retention (75 s) now
        // and then.
        (step, prop_oneof![3 => 0..3u64, 1 => 0..100u64])
    }

    fn key(i: usize) -> ServiceKey {
        ServiceKey {
            namespace: "default".into(),
            name: format!("s{i}"),
        }
    }

    fn record(i: usize, shape: &Shape) -> ServiceRecord {
        let mut r = ServiceRecord::of(lb(&format!("s{i}"), &[]));
        r.uid = Some(format!("uid-{i}"));
        r.ingress = shape
            .ingress
            .iter()
            .map(|&a| Ingress {
                ip: Some(ADDRESSES[a].into()),
                hostname: None,
            })
            .collect();
        if shape.hostname {
            r.ingress.push(Ingress {
                ip: None,
                hostname: Some(format!("s{i}.example")),
            });
        }
        r.external_ips = shape
            .external
            .iter()
            .map(|&a| ADDRESSES[a].into())
            .collect();
        if shape.local {
            r.external_traffic_policy = Some("Local".into());
        }
        if shape.bgp {
            r.labels.insert("bgp".into(), "on".into());
        }
        if shape.opted_out {
            r.annotations
                .insert(ADVERTISE_ANNOTATION.into(), "false".into());
        }
        if !shape.load_balancer {
            r.type_ = Some("ClusterIP".into());
        }
        r
    }

    fn apply(world: &mut World, step: &Step) -> Option<ServiceKey> {
        match step {
            Step::Service(i, shape) => {
                world.services.retain(|s| s.key != key(*i));
                if let Some(shape) = shape {
                    world.services.push(Arc::new(record(*i, shape)));
                }
                Some(key(*i))
            }
            Step::Slice(i, endpoint) => {
                world.slices.retain(|s| s.service != key(*i));
                if let Some((ready, terminating)) = endpoint {
                    world.slices.push(Arc::new(SliceRecord {
                        service: key(*i),
                        address_type: "IPv4".into(),
                        local: vec![EndpointState {
                            ready: Some(*ready),
                            serving: Some(*ready),
                            terminating: Some(*terminating),
                        }],
                    }));
                }
                Some(key(*i))
            }
            Step::Node(None) => {
                world.node = None;
                None
            }
            Step::Node(Some(excluded)) => {
                let labels: &[(&str, &str)] = if *excluded {
                    &[(
                        "node.kubernetes.io/exclude-from-external-load-balancers",
                        "",
                    )]
                } else {
                    &[]
                };
                world.node = Some(node(labels));
                None
            }
        }
    }

    proptest! {
        #[test]
        fn the_incremental_evaluation_is_the_full_one(
            steps in proptest::collection::vec(step(), 1..40),
        ) {
            let config = config();
            let mut world = World::new(Vec::new());
            let mut now = Instant::now();
            let mut full = world.eval(&Evaluation::default(), &config, now);
            let mut incremental = full.clone();
            for (step, secs) in &steps {
                now += Duration::from_secs(*secs);
                let changed = apply(&mut world, step);
                full = world.eval(&full, &config, now);
                match changed {
                    // The Node changed: the watcher layer judges everything.
                    None => incremental = world.eval(&incremental, &config, now),
                    Some(key) => {
                        let record = world.services.iter().find(|s| s.key == key).cloned();
                        let services = [(key, record)];
                        let changes = Changes {
                            services: &services,
                            endpoint_slices: &world.slices,
                            namespaces: None,
                        };
                        prop_assert!(!needs_full_evaluation(&incremental, &config, &changes));
                        update(&mut incremental, &config, &changes, now);
                    }
                }
                prop_assert_eq!(&incremental, &full, "after {:?}", step);
            }
        }
    }
}

/// A Service of a tenant's namespace whose advertisement names a peer the
/// tenant may not reach: refused for that peer (a Warning Event's text in
/// `tenant_refused`), said by `explain`; the tenant's own Service whose
/// advertisement stays within its peers is not refused; a Service of no
/// tenant is as before.
#[test]
fn a_tenants_service_asking_for_another_tenants_peer_is_refused() {
    let config = cfg(
        "",
        "",
        "[[peer]]\nname = \"tor2\"\naddress = \"192.0.2.5\"\nasn = 65000\n[[advertisement]]\nname = \"both\"\npeers = [\"tor1\", \"tor2\"]\n[[tenant]]\nname = \"acme\"\nnamespaces = [\"default\"]\npeers = [\"tor1\"]\n",
    );
    let mine = lb("web", &["198.51.100.7"]);
    let other = fixtures::load_balancer_service("other", "web", &["198.51.100.8"]);
    let t = Instant::now();
    let e = World::new(vec![mine, other]).eval(&Evaluation::default(), &config, t);
    assert!(
        e.vips.contains_key(&ip("198.51.100.7")),
        "still advertised to tor1"
    );
    let key = ServiceKey::parse("default/web").unwrap();
    assert_eq!(
        e.tenant_refused.get(&key).map(Vec::as_slice),
        Some(
            &[
                "advertisement \"both\" names peer tor2 that tenant \"acme\" may not reach"
                    .to_string()
            ][..]
        )
    );
    assert_eq!(
        e.explain(ip("198.51.100.7"))[1..],
        [
            "tenant \"acme\" (namespace default): sent only to its peers tor1",
            "refused: advertisement \"both\" names peer tor2 that tenant \"acme\" may not reach; not sent there",
        ]
    );
    assert_eq!(e.tenant_refused.len(), 1, "other/web belongs to no tenant");
}

/// A tenant chosen by namespace labels (`namespace_selector`): Namespaces
/// are then watched; the VIP of a Service in a labelled namespace carries
/// the tenant's name, which the speaker's tenant gate reads, so it reaches
/// the tenant's peers only; a namespace a tenant's `namespaces` lists stays
/// that tenant's whatever its labels; an unlabelled one belongs to none.
#[test]
fn a_namespace_label_names_the_tenant() {
    let config = cfg(
        "",
        "",
        "[[peer]]\nname = \"tor2\"\naddress = \"192.0.2.5\"\nasn = 65000\n\
         [[tenant]]\nname = \"acme\"\nnamespace_selector = { match_labels = { \"holdfast.dev/tenant\" = \"acme\" } }\npeers = [\"tor1\"]\n\
         [[tenant]]\nname = \"globex\"\nnamespaces = [\"listed\"]\npeers = [\"tor2\"]\n",
    );
    assert!(needs_namespace_labels(&config));
    let labelled = |name: &str| {
        Arc::new(Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(
                    "holdfast.dev/tenant".to_string(),
                    "acme".to_string(),
                )])),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        })
    };
    let mut world = World::new(vec![
        fixtures::load_balancer_service("shop", "web", &["198.51.100.1"]),
        fixtures::load_balancer_service("listed", "web", &["198.51.100.2"]),
        fixtures::load_balancer_service("plain", "web", &["198.51.100.3"]),
    ]);
    world.namespaces = Some(vec![labelled("shop"), labelled("listed")]);
    let e = once(&config, &world);
    let tenant = |a: &str| e.vips.get(&ip(a)).and_then(|v| v.route.tenant.clone());
    assert_eq!(tenant("198.51.100.1").as_deref(), Some("acme"));
    assert_eq!(tenant("198.51.100.2").as_deref(), Some("globex"));
    assert_eq!(tenant("198.51.100.3"), None);
    assert_eq!(
        e.explain(ip("198.51.100.1"))[1..],
        ["tenant \"acme\" (namespace shop): sent only to its peers tor1"]
    );
    // What each peer is sent.
    let routes: Vec<(ipnet::IpNet, crate::model::Route)> = e
        .vips
        .iter()
        .map(|(a, v)| (ipnet::IpNet::from(*a), v.route.clone()))
        .collect();
    let tables = crate::speaker::peer_tables(&config, routes.iter().map(|(p, r)| (p, r)));
    let sent =
        |peer: &str| -> Vec<String> { tables[peer].keys().map(ToString::to_string).collect() };
    assert_eq!(sent("tor1"), ["198.51.100.1/32", "198.51.100.3/32"]);
    assert_eq!(sent("tor2"), ["198.51.100.2/32", "198.51.100.3/32"]);
}

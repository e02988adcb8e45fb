//! Tenants from Kubernetes namespaces, end to end: holdfast with its
//! Kubernetes source against a real API server, two FRR routers (tor-a
//! eBGP on the pair's link, tor-b iBGP on a second link). Each tenant's
//! Services reach only its router; a tenant's Service whose advertisement
//! names the other router is refused there, with a Warning Event and an
//! `explain` line; a namespace labelled for a tenant (its
//! `namespace_selector`) is that tenant's. Needs root (namespaces, FRR,
//! the API server).

mod common;

use std::net::IpAddr;
use std::time::Duration;

use common::*;
use kube_standin::fixtures::load_balancer_service;
use testlab::{Frr, Netns, wait_until};

const NODE: &str = "192.0.2.2";
const NODE_B: &str = "198.18.0.2";

fn ip(s: &str) -> IpAddr {
    s.parse().expect("an address")
}

#[test]
fn each_tenants_services_reach_only_its_router_and_a_foreign_peer_is_refused() {
    testlab::require_root();
    let (lab, frr_a) = Tor::new().start();
    let router2 = Netns::new("router2");
    let _link = testlab::veth(&lab.node, "to-router2", &router2, "to-node");
    lab.node.add_address("to-router2", "198.18.0.2/30");
    router2.add_address("to-node", "198.18.0.1/30");
    let frr_b = Frr::start(
        &router2,
        &testlab::frr::bgpd_conf(65001, "198.18.0.1".parse().unwrap(), &[(ip(NODE_B), 65001)]),
    );
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, &[]);
    for ns in ["acme", "globex", "initech"] {
        k.api.kubectl(&["create", "namespace", ns]);
    }
    k.api.kubectl(&[
        "label",
        "namespace",
        "initech",
        "holdfast.dev/tenant=globex",
    ]);
    // A tenant chosen by namespace labels needs Namespaces watched: the
    // grant the RBAC page shows, beside the shipped ClusterRole.
    k.api.kubectl(&[
        "create",
        "clusterrole",
        "holdfast-namespaces",
        "--verb=list,watch",
        "--resource=namespaces",
    ]);
    k.api.kubectl(&[
        "create",
        "clusterrolebinding",
        "holdfast-namespaces",
        "--clusterrole=holdfast-namespaces",
        "--serviceaccount=holdfast:holdfast",
    ]);
    let config = Config::node(65001, NODE)
        .peer(Peer::new("tor-a", "192.0.2.1", 65000).fast())
        .peer(Peer::new("tor-b", "198.18.0.1", 65001).fast())
        .kubernetes_source()
        .advertisement(Advertisement::public("65001:100"))
        .advertisement(
            Advertisement::new("pinned")
                .peers(&["tor-b"])
                .service_selector(Selector::labels(&[("pin", "b")])),
        )
        .tenant(Tenant::new("acme", &["tor-a"]).namespaces(&["acme"]))
        .tenant(
            Tenant::new("globex", &["tor-b"])
                .namespaces(&["globex"])
                .namespace_selector(Selector::labels(&[("holdfast.dev/tenant", "globex")])),
        );
    let node = k.holdfast(&lab.node, "node-1", &config.to_toml());
    frr_a.wait_established(ip(NODE), LONG);
    frr_b.wait_established(ip(NODE_B), LONG);

    k.api
        .create(&load_balancer_service("acme", "web", &["198.51.100.1"]))
        .unwrap();
    k.api
        .create(&load_balancer_service("globex", "web", &["198.51.100.2"]))
        .unwrap();
    let mut pinned = load_balancer_service("acme", "pinned", &["198.51.100.3"]);
    pinned.metadata.labels = Some([("pin".to_string(), "b".to_string())].into());
    k.api.create(&pinned).unwrap();
    k.api
        .create(&load_balancer_service("initech", "web", &["198.51.100.4"]))
        .unwrap();

    frr_a.wait_prefix("198.51.100.1/32", LONG);
    frr_a.wait_prefix("198.51.100.3/32", LONG);
    frr_b.wait_prefix("198.51.100.2/32", LONG);
    frr_b.wait_prefix("198.51.100.4/32", LONG);
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        frr_a.prefix("198.51.100.2/32").is_none(),
        "globex's VIP at tor-a"
    );
    assert!(
        frr_a.prefix("198.51.100.4/32").is_none(),
        "the VIP of a namespace labelled for globex at tor-a"
    );
    assert!(
        frr_b.prefix("198.51.100.1/32").is_none(),
        "acme's VIP at tor-b"
    );
    assert!(
        frr_b.prefix("198.51.100.3/32").is_none(),
        "acme's pinned VIP at tor-b, which acme may not reach"
    );

    let event = wait_until(Duration::from_secs(20), "the Warning Event", || {
        k.api
            .events()
            .into_iter()
            .find(|e| e["reason"] == "TenantPeersRefused")
    });
    assert_eq!(event["type"], "Warning", "{event}");
    assert_eq!(event["regarding"]["name"], "pinned", "{event}");
    assert_eq!(event["regarding"]["namespace"], "acme", "{event}");
    let note = event["note"].as_str().expect("a note");
    assert!(
        note.contains(
            "advertisement \"pinned\" names peer tor-b that tenant \"acme\" may not reach"
        ),
        "{note}"
    );
    let (_, text) = node.explain("198.51.100.3");
    assert!(
        text.contains("refused: advertisement \"pinned\" names peer tor-b that tenant \"acme\" may not reach; not sent there"),
        "{text}"
    );
    assert!(
        text.contains("tenant \"acme\" may not reach this peer"),
        "{text}"
    );
}

//! `holdfast cluster status` / `cluster explain VIP`, run by the real
//! `kubectl` as its plugin (`kubectl holdfast …`), over three real daemons
//! writing their `BGPNodeStatus` to a real API server (deploy/cluster
//! applied: its CRD's schema must keep every field the view reads), each
//! node peering with FRR: one node announces the VIP, one is drained, one
//! has no local endpoint of the Service (traffic policy Local).

mod common;

use std::os::unix::fs::symlink;
use std::process::Command;

use common::*;
use k8s_openapi::api::core::v1::Service;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service};
use serde_json::Value;
use testlab::{Netns, wait_until};

const VIP: &str = "198.51.100.10";
/// (router's address, node's address) of each node's link.
const LINKS: [(&str, &str); 3] = [
    ("192.0.2.1", "192.0.2.2"),
    ("192.0.2.5", "192.0.2.6"),
    ("192.0.2.9", "192.0.2.10"),
];

#[test]
fn kubectl_holdfast_cluster_explain_tells_each_node_s_part() {
    testlab::require_root();
    let router = Netns::new("router");
    let nodes = [
        Netns::new("node1"),
        Netns::new("node2"),
        Netns::new("node3"),
    ];
    let mut links = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        let router_if = format!("to-n{}", i + 1);
        links.push(testlab::veth(node, "to-router", &router, &router_if));
        router.add_address(&router_if, &format!("{}/30", LINKS[i].0));
        node.add_address("to-router", &format!("{}/30", LINKS[i].1));
    }
    let nodes_as: Vec<_> = LINKS
        .iter()
        .map(|(_, node)| (node.parse().unwrap(), 65001))
        .collect();
    let frr = testlab::Frr::start(
        &router,
        &testlab::frr::bgpd_conf(65000, LINKS[0].0.parse().unwrap(), &nodes_as),
    );
    let k = cluster::KubeApi::start();
    for (i, node) in nodes.iter().enumerate() {
        k.add_node(node, &format!("node-{}", i + 1), LINKS[i].1, &[]);
    }
    // The Service: traffic policy Local, its endpoints on node-1 and node-2.
    let mut svc: Service = load_balancer_service("demo", "web", &[VIP]);
    svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
    k.api.create(&svc).unwrap();
    k.api
        .create(&endpoint_slice(
            "demo",
            "web",
            "web-1",
            &[
                SliceEndpoint::ready("10.244.1.5", "node-1"),
                SliceEndpoint::ready("10.244.2.5", "node-2"),
            ],
        ))
        .unwrap();
    let daemons: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let config = Config::node(65001, LINKS[i].1)
                .peer(
                    Peer::new("tor1", LINKS[i].0, 65000)
                        .hold_time("9s")
                        .connect_retry("1s"),
                )
                .kubernetes_source()
                .advertisement(Advertisement::new("public"));
            k.holdfast(node, &format!("node-{}", i + 1), &config.to_toml())
        })
        .collect();
    // node-1 and node-2 announce it; node-3 has no local endpoint.
    wait_until(LONG, "both paths of the VIP at FRR", || {
        let paths = frr.json(&format!("show ip bgp {VIP}/32 json"));
        (paths["paths"].as_array().map_or(0, Vec::len) == 2).then_some(())
    });
    // node-2 drained.
    let out = daemons[1].cli("drain");
    assert!(out.status.success(), "{out:?}");

    // kubectl finds the plugin on its PATH as kubectl-holdfast.
    let host = tempfile::tempdir().expect("temp dir");
    symlink(BIN, host.path().join("kubectl-holdfast")).expect("the plugin link");
    let path = format!(
        "{}:{}",
        host.path().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubeconfig = k.api.real().server.admin_kubeconfig();
    let kubectl = |args: &[&str]| {
        let out = Command::new("kubectl")
            .args(args)
            .env("PATH", &path)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", host.path())
            .output()
            .expect("kubectl runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (plugins_code, plugins, _) = kubectl(&["plugin", "list"]);
    assert!(
        plugins_code == 0 && plugins.contains("kubectl-holdfast"),
        "kubectl plugin list: {plugins}"
    );
    // The objects carry it within their write interval.
    let answer: Value = wait_until(
        LONG,
        "kubectl holdfast cluster explain: node-1 announcing to tor1, node-2 drained, node-3 without endpoint",
        || {
            let (_, json, _) = kubectl(&["holdfast", "cluster", "explain", VIP, "--json"]);
            let v: Value = serde_json::from_str(&json).ok()?;
            let n = |i: usize| &v["nodes"][i];
            let why = |i: usize| n(i)["why"].to_string();
            (v["announcedBy"] == 1
                && n(0)["node"] == "node-1"
                && n(0)["announces"] == true
                && n(0)["peers"] == serde_json::json!(["tor1"])
                && n(1)["announces"] == false
                && why(1).contains("drain")
                && n(2)["announces"] == false
                && why(2).contains("endpoint"))
            .then_some(v)
        },
    );
    println!("{}", serde_json::to_string_pretty(&answer).unwrap());
    let (code, text, err) = kubectl(&["holdfast", "cluster", "explain", VIP]);
    println!("kubectl holdfast cluster explain {VIP}:\n{text}{err}");
    assert_eq!(code, 0, "some node announces it: exit 0");
    assert!(
        text.starts_with(&format!("{VIP}: announced by 1 of 3 nodes\n")),
        "{text}"
    );
    // The drain's change is on record on node-2.
    assert!(
        answer["nodes"][1]["lastChange"]
            .as_str()
            .is_some_and(|c| c.starts_with("withdrawn at ")),
        "{answer}"
    );
    let (code, text, err) = kubectl(&["holdfast", "cluster", "status"]);
    println!("kubectl holdfast cluster status:\n{text}{err}");
    assert_eq!(code, 0, "{err}");
    let rows: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(rows[0][..3], ["NODE", "ASN", "PEERS"], "{text}");
    assert_eq!(rows.len(), 4, "{text}");
    assert_eq!(rows[1][..5], ["node-1", "65001", "1/1", "1", "0"], "{text}");
    // The drained node announces nothing; node-3 withholds the VIP.
    assert_eq!(rows[2][..5], ["node-2", "65001", "1/1", "0", "0"], "{text}");
    assert_eq!(rows[3][..5], ["node-3", "65001", "1/1", "0", "1"], "{text}");
    // A VIP no node has: exit 1.
    let (code, text, _) = kubectl(&["holdfast", "cluster", "explain", "203.0.113.7"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("announced by 0 of 3"), "{text}");
    drop(daemons);
    drop(links);
}

//! RBAC least privilege, proven against a real API server
//! (scripts/kube-api.sh): holdfast runs with the token of the
//! ServiceAccount that deploy/cluster binds, so the shipped ClusterRole is
//! all it may do. Each verb on each resource of that role is taken away in
//! turn while holdfast runs with a route at FRR; what holdfast does with
//! that permission is then made to happen (the API server restarts, so
//! every watch lists again; a Service comes, goes and comes back, so
//! Events are created and patched; the BGPNodeStatus is deleted, so it is
//! applied again). holdfast must say which permission it lacks, pointing at
//! the file that grants it, and keep its route. A permission whose absence
//! holdfast never notices is one the role grants beyond what the code uses:
//! the test fails on it.

mod common;

use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Service;
use kube_standin::fixtures::load_balancer_service;
use serde_json::Value;
use testlab::{Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const VIP: &str = "198.51.100.10";

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

fn config() -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"node-1\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"2s\"\n\n\
         [[advertisement]]\nname = \"public\"\n"
    )
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
    testlab::require_root();
    let lab = Lab::pair();
    let k = cluster::KubeApi::for_node(&lab.node, "node-1", NODE, &[]);
    let frr = Frr::start(&lab.router, &frr_conf(65000, TOR, &[(NODE, 65001)], ""));
    let node = k.holdfast(&lab.node, "node-1", &config());
    k.api
        .create(&load_balancer_service("demo", "web", &[VIP]))
        .unwrap();
    frr.wait_established(NODE.parse().unwrap(), LONG);
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
        apply_role(&k, &role_without(&shipped, permission));
        let from = node.log().len();

        // Everything holdfast does with the API, made to happen again.
        k.api.restore_compacted();
        k.api
            .kubectl(&["delete", "bgpnodestatus", "node-1", "--ignore-not-found"]);
        // Advertised (an Event created), deleted (Withdrawn, created),
        // back (Advertised again: the first Event's series patched). Where
        // the permission taken away hides the Service, nothing reaches
        // FRR: the waits are bounded and their outcome is not the test's.
        let flap_prefix = format!("{flap_vip}/32");
        let service = load_balancer_service("demo", &flap, &[&flap_vip]);
        k.api.create(&service).unwrap();
        testlab::wait::wait_until_opt(Duration::from_secs(5), || {
            frr.prefix(&flap_prefix).map(drop)
        });
        k.api.delete::<Service>(Some("demo"), &flap).unwrap();
        testlab::wait::wait_until_opt(Duration::from_secs(5), || {
            frr.prefix(&flap_prefix).is_none().then_some(())
        });
        k.api.create(&service).unwrap();

        // The API server's own words name the verb and the resource; the
        // rest of the line says where the grant lives.
        let want = format!("cannot {verb} resource \\\"{resource}\\\"");
        let want_plain = format!("cannot {verb} resource \"{resource}\"");
        let found = testlab::wait::wait_until_opt(Duration::from_secs(45), || {
            let log = node.log();
            log.get(from..)?
                .lines()
                .find(|l| l.contains(&want) || l.contains(&want_plain))
                .map(str::to_owned)
        });
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
        apply_role(&k, &shipped);
        k.api.restore_compacted();
        wait_until(
            Duration::from_secs(120),
            &format!("holdfast to recover after {verb} {resource} came back"),
            || {
                let status = node.status();
                (status["source"]["healthy"] == true
                    && frr.prefix(&format!("{flap_vip}/32")).is_some()
                    && node_status_advertises(&k, 2))
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

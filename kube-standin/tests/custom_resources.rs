//! Custom resources: a CustomResourceDefinition created with the real
//! `kubectl create -f` makes its resource appear (discovery, paths), the
//! status subresource and server-side apply behave as on an API server, and
//! the real `kubectl get` prints the CRD's printer columns from the
//! stand-in's Table. The CRD is holdfast's own, from deploy/cluster.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::cluster;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

fn crd_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/cluster/bgpnodestatus-crd.yaml")
}

/// The real kubectl against the stand-in; a missing kubectl fails the test.
fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl runs (kubectl 1.32 is installed on these machines)");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn node_statuses(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("holdfast.dev", "v1alpha1", "BGPNodeStatus");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "bgpnodestatuses"),
    )
}

fn apply() -> PatchParams {
    PatchParams::apply("holdfast").force()
}

#[tokio::test]
async fn a_crd_made_with_kubectl_serves_its_resource_and_printer_columns() {
    let c = cluster().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = c.standin.kubeconfig(dir.path()).expect("kubeconfig");
    let cache = dir.path().join("cache");
    let api = node_statuses(&c.client);

    // No CRD, no resource: kubectl says so, and the path is 404.
    let (ok, _, err) = kubectl(&kubeconfig, &cache, &["get", "bgpnodestatuses"]);
    assert!(!ok, "kubectl get before the CRD exists");
    assert!(
        err.contains("doesn't have a resource type \"bgpnodestatuses\""),
        "{err}"
    );
    let e = api.get("n1").await.expect_err("no resource yet");
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );

    let crd = crd_file().display().to_string();
    let (ok, out, err) = kubectl(
        &kubeconfig,
        &cache,
        &["create", "--validate=false", "-f", &crd],
    );
    assert!(ok, "kubectl create -f {crd}: {out}{err}");
    assert!(
        out.contains(
            "customresourcedefinition.apiextensions.k8s.io/bgpnodestatuses.holdfast.dev created"
        ),
        "{out}"
    );

    // Server-side apply creates the object; the status in its body is not
    // written through the main resource, only through /status.
    let object = json!({
        "apiVersion": "holdfast.dev/v1alpha1",
        "kind": "BGPNodeStatus",
        "metadata": {"name": "n1"},
        "status": {"asn": 1},
    });
    let created = api
        .patch("n1", &apply(), &Patch::Apply(&object))
        .await
        .expect("apply creates");
    assert_eq!(created.data.get("status"), None, "{created:?}");
    let status = json!({
        "apiVersion": "holdfast.dev/v1alpha1",
        "kind": "BGPNodeStatus",
        "metadata": {"name": "n1"},
        "status": {
            "asn": 65001, "peersEstablished": 1, "peersConfigured": 2,
            "routes": {"advertised": 3, "heldDown": 1, "damped": 0, "deferred": 0},
            "source": "Healthy",
        },
    });
    api.patch_status("n1", &apply(), &Patch::Apply(&status))
        .await
        .expect("status apply");
    // /status of a missing object is 404, even with apply: it never creates.
    let e = api
        .patch_status("n2", &apply(), &Patch::Apply(&status))
        .await
        .expect_err("no n2");
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 404),
        "{e:?}"
    );

    let (ok, out, err) = kubectl(&kubeconfig, &cache, &["get", "bgpnodestatuses"]);
    assert!(ok, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        lines[0],
        [
            "NAME",
            "ASN",
            "PEERS UP",
            "PEERS",
            "ADVERTISED",
            "HELD",
            "AGE"
        ],
        "{out}"
    );
    assert_eq!(&lines[1][..6], ["n1", "65001", "1", "2", "3", "1"], "{out}");
    assert!(lines[1][6].ends_with('s'), "an age in seconds: {out}");
    println!("kubectl get bgpnodestatuses:\n{out}");

    // -o wide adds the priority-1 columns; the short name works.
    let (ok, out, err) = kubectl(&kubeconfig, &cache, &["get", "bgpns", "-o", "wide"]);
    assert!(ok, "{err}");
    assert!(
        out.lines()
            .next()
            .is_some_and(|h| h.contains("DAMPED") && h.contains("SOURCE")),
        "{out}"
    );
    assert!(out.contains("Healthy"), "{out}");

    // -o json is the object itself, not the table.
    let (ok, out, err) = kubectl(
        &kubeconfig,
        &cache,
        &["get", "bgpnodestatus", "n1", "-o", "json"],
    );
    assert!(ok, "{err}");
    let obj: Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(obj["status"]["routes"]["advertised"], 3);
}

#[tokio::test]
async fn a_crd_must_be_named_plural_dot_group() {
    let c = cluster().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "wrong.holdfast.dev"},
        "spec": {"group": "holdfast.dev", "names": {"plural": "bgpnodestatuses", "kind": "BGPNodeStatus"}, "scope": "Cluster", "versions": []},
    });
    let crds: Api<DynamicObject> = Api::all_with(
        c.client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(crd).expect("an object");
    let e = crds
        .create(&Default::default(), &crd)
        .await
        .expect_err("misnamed CRD");
    assert!(
        matches!(e, kube::Error::Api(ref s) if s.code == 422),
        "{e:?}"
    );
    // And without its CRD, the resource is not served.
    let api = node_statuses(&c.client);
    assert!(api.list(&Default::default()).await.is_err());
}

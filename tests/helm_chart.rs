//! The Helm chart (deploy/helm/holdfast) against the kustomize manifests
//! it mirrors: the real helm (scripts/helm.sh builds it from its Go
//! module) lints it and renders it, the real `kubectl kustomize` renders
//! deploy/, and the two must be the same objects, field for field, but
//! for the two labels Helm puts on every object it manages. Both
//! renderings then go to a real API server (scripts/kube-api.sh) with
//! `kubectl apply --dry-run=server`, the CRDs installed (holdfast's, and
//! the Prometheus Operator's PodMonitor and PrometheusRule, from its Go
//! module pinned in tools/prometheus-operator/).

mod common;
// Only its rendering and YAML helpers are used here.
#[allow(dead_code)]
mod deploy;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// Every rack's overlay, and the chart's values that make the same rack.
fn racks() -> Vec<(&'static str, Value)> {
    let config = |dir: &str| {
        std::fs::read_to_string(
            root()
                .join("deploy/overlays")
                .join(dir)
                .join("holdfast.toml"),
        )
        .unwrap_or_else(|e| panic!("deploy/overlays/{dir}/holdfast.toml: {e}"))
    };
    vec![
        (
            "rack-a",
            json!({
                "name": "a",
                "config": config("rack-a"),
                "md5Secret": { "name": "holdfast-md5-rack-a", "keys": ["tor-a1", "tor-a2"] },
                "podMonitor": true,
            }),
        ),
        ("rack-b", json!({ "name": "b", "config": config("rack-b") })),
        (
            "listen-179",
            json!({ "name": "c", "config": config("listen-179"), "listen179": true }),
        ),
        (
            "unnumbered",
            json!({ "name": "d", "config": config("unnumbered"), "unnumbered": true }),
        ),
    ]
}

/// The labels Helm adds to what it manages: on the chart's objects'
/// metadata only, never in a selector or a pod template.
const HELM_LABELS: [&str; 2] = ["helm.sh/chart", "app.kubernetes.io/managed-by"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("deploy/helm/holdfast")
}

/// scripts/helm.sh ARGS: helm's stdout, or its stderr as the error.
fn helm(args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(root().join("scripts/helm.sh"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/helm.sh: {e}"));
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "helm {}: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

/// `helm template` of the chart in namespace holdfast with `values`
/// (written to a file, as a user's values.yaml would be).
fn template(values: &Value) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("values.yaml");
    std::fs::write(&file, values.to_string()).expect("values file");
    helm(&[
        "template",
        "holdfast",
        &chart().display().to_string(),
        "--namespace",
        "holdfast",
        "--include-crds",
        "-f",
        &file.display().to_string(),
    ])
}

/// The objects of a rendering by (apiVersion, kind, namespace, name);
/// a name twice is an error.
fn objects(text: &str, origin: &str) -> BTreeMap<String, Value> {
    let mut map = BTreeMap::new();
    for o in deploy::documents(text, origin).unwrap_or_else(|e| panic!("{e}")) {
        let key = format!(
            "{} {} {}/{}",
            o["apiVersion"].as_str().unwrap_or(""),
            o["kind"].as_str().unwrap_or(""),
            o["metadata"]["namespace"].as_str().unwrap_or(""),
            o["metadata"]["name"].as_str().unwrap_or("")
        );
        assert!(
            map.insert(key.clone(), o).is_none(),
            "{origin}: {key} twice"
        );
    }
    map
}

/// The chart's objects with Helm's own labels taken off (each must carry
/// them: a chart object without them would not be Helm's to upgrade).
fn without_helm_labels(mut objects: BTreeMap<String, Value>) -> BTreeMap<String, Value> {
    for (key, o) in &mut objects {
        if o["kind"] == "CustomResourceDefinition" {
            // crds/ is applied as it is: Helm neither templates nor labels it.
            continue;
        }
        let labels = o["metadata"]["labels"]
            .as_object_mut()
            .unwrap_or_else(|| panic!("{key} has no labels"));
        for label in HELM_LABELS {
            assert!(
                labels.remove(label).is_some(),
                "{key} lacks the label {label}"
            );
        }
    }
    objects
}

fn kustomized(dirs: &[PathBuf]) -> BTreeMap<String, Value> {
    let mut all = BTreeMap::new();
    for dir in dirs {
        let text = deploy::kustomize(dir).unwrap_or_else(|e| panic!("{e}"));
        for (k, v) in objects(&text, &format!("kubectl kustomize {}", dir.display())) {
            assert!(all.insert(k.clone(), v).is_none(), "{k} rendered twice");
        }
    }
    all
}

/// Panics with every difference between the two renderings.
fn assert_same(helm: &BTreeMap<String, Value>, kustomize: &BTreeMap<String, Value>, what: &str) {
    let mut problems = Vec::new();
    for key in kustomize.keys().filter(|k| !helm.contains_key(*k)) {
        problems.push(format!("only kustomize renders {key}"));
    }
    for key in helm.keys().filter(|k| !kustomize.contains_key(*k)) {
        problems.push(format!("only the chart renders {key}"));
    }
    for (key, h) in helm {
        if let Some(k) = kustomize.get(key)
            && h != k
        {
            problems.push(format!(
                "{key} differs:\n  chart:     {h}\n  kustomize: {k}"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "{what}: the chart and kustomize disagree:\n{}",
        problems.join("\n")
    );
}

fn all_racks_values() -> Value {
    json!({
        "namespace": { "create": true },
        "alerts": { "enabled": true },
        "racks": racks().into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
    })
}

#[test]
fn helm_lint_passes_with_the_defaults_and_with_every_rack() {
    let chart = chart().display().to_string();
    let out = helm(&["lint", "--strict", &chart]).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("0 chart(s) failed"), "{out}");
    let dir = tempfile::tempdir().expect("temp dir");
    let values = dir.path().join("values.yaml");
    std::fs::write(&values, all_racks_values().to_string()).unwrap();
    let out = helm(&[
        "lint",
        "--strict",
        &chart,
        "-f",
        &values.display().to_string(),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("0 chart(s) failed"), "{out}");
}

#[test]
fn the_chart_renders_the_objects_kustomize_renders_for_the_same_racks() {
    let rendered = template(&all_racks_values()).unwrap_or_else(|e| panic!("{e}"));
    let helm = without_helm_labels(objects(&rendered, "helm template"));
    let mut dirs = vec![
        root().join("deploy/cluster"),
        root().join("deploy/cluster/monitoring"),
    ];
    dirs.extend(
        racks()
            .into_iter()
            .map(|(dir, _)| root().join("deploy/overlays").join(dir)),
    );
    assert_same(&helm, &kustomized(&dirs), "the cluster part and every rack");
    // The chart's ConfigMap names are kustomize's, hash included: a
    // config change renames it either way, and the DaemonSet rolls.
    assert!(
        helm.keys()
            .any(|k| k.starts_with("v1 ConfigMap holdfast/holdfast-config-rack-a-")),
        "{:?}",
        helm.keys().collect::<Vec<_>>()
    );
}

#[test]
fn talos_kube_prism_is_the_component_of_the_same_name() {
    // A rack with components/talos-kubeprism, as a user's overlay adds it.
    // kustomize takes relative paths only: up to / from the temporary
    // directory, then down to the repository.
    let dir = tempfile::tempdir().expect("temp dir");
    let up = "../".repeat(dir.path().components().count() - 1);
    let from_root = |p: &str| {
        format!(
            "{up}{}",
            root().join(p).display().to_string().trim_start_matches('/')
        )
    };
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\ncomponents:\n  - {}\n",
            from_root("deploy/overlays/rack-b"),
            from_root("deploy/components/talos-kubeprism"),
        ),
    )
    .unwrap();
    let (_, rack_b) = racks().into_iter().find(|(d, _)| *d == "rack-b").unwrap();
    let values = json!({
        "cluster": { "create": false },
        "talos": { "kubePrism": true },
        "racks": [rack_b],
    });
    let rendered = template(&values).unwrap_or_else(|e| panic!("{e}"));
    let mut helm = without_helm_labels(objects(&rendered, "helm template"));
    // crds/ comes with every release; the overlay has none.
    helm.retain(|_, o| o["kind"] != "CustomResourceDefinition");
    assert_same(
        &helm,
        &kustomized(&[dir.path().to_path_buf()]),
        "rack-b with talos-kubeprism",
    );
}

#[test]
fn the_schema_refuses_what_the_chart_cannot_render() {
    let config = "[speaker]\nasn = 65001\n";
    for (values, want) in [
        (json!({ "racks": [{ "name": "a" }] }), "config"),
        (
            json!({ "racks": [{ "name": "Rack A", "config": config }] }),
            "name",
        ),
        (
            json!({ "racks": [{ "name": "a", "config": config, "listen": true }] }),
            "listen",
        ),
        (
            json!({ "image": { "pullPolicy": "Sometimes" } }),
            "pullPolicy",
        ),
        (json!({ "replicas": 3 }), "replicas"),
    ] {
        let error = template(&values).expect_err(&format!("{values} was accepted"));
        assert!(
            error.contains("values don't meet the specifications of the schema")
                && error.contains(want),
            "{values}: {error}"
        );
    }
    let twice = json!({ "racks": [
        { "name": "a", "config": config },
        { "name": "a", "config": config },
    ] });
    let error = template(&twice).expect_err("two racks named a were accepted");
    assert!(error.contains("appears twice"), "{error}");
}

/// The Prometheus Operator's CRDs for PodMonitor and PrometheusRule, from
/// its Go module (pinned, checked against go.sum by `go mod download`).
fn prometheus_operator_crds() -> Vec<PathBuf> {
    let tools = root().join("tools/prometheus-operator");
    let module = std::fs::read_to_string(tools.join("go.mod")).expect("its go.mod");
    let version = module
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("require github.com/prometheus-operator/prometheus-operator ")
        })
        .and_then(|rest| rest.split_whitespace().next())
        .expect("the pinned version in tools/prometheus-operator/go.mod")
        .to_string();
    let out = Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            &format!("github.com/prometheus-operator/prometheus-operator@{version}"),
        ])
        .current_dir(&tools)
        .output()
        .expect("go runs (it builds the API server and helm too)");
    assert!(
        out.status.success(),
        "go mod download: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let info: Value = serde_json::from_slice(&out.stdout).expect("go mod download -json");
    let dir = Path::new(info["Dir"].as_str().expect("Dir")).join("example/prometheus-operator-crd");
    ["podmonitors", "prometheusrules"]
        .iter()
        .map(|r| dir.join(format!("monitoring.coreos.com_{r}.yaml")))
        .collect()
}

#[test]
fn both_renderings_pass_a_server_side_dry_run_on_a_real_api_server() {
    let k = common::cluster::KubeApi::start();
    let server = &k.api.real().server;
    for crd in prometheus_operator_crds() {
        server.kubectl(&["apply", "--server-side", "-f", &crd.display().to_string()]);
    }
    server.kubectl(&[
        "wait",
        "--for",
        "condition=established",
        "crd/podmonitors.monitoring.coreos.com",
        "crd/prometheusrules.monitoring.coreos.com",
    ]);
    let chart = template(&all_racks_values()).unwrap_or_else(|e| panic!("{e}"));
    let out = server.kubectl_in(
        &["apply", "--dry-run=server", "--server-side", "-f", "-"],
        &chart,
    );
    println!("the chart, server dry run:\n{out}");
    let mut dirs = vec![
        "deploy/cluster".to_string(),
        "deploy/cluster/monitoring".to_string(),
    ];
    dirs.extend(
        racks()
            .into_iter()
            .map(|(d, _)| format!("deploy/overlays/{d}")),
    );
    for dir in dirs {
        let text = deploy::kustomize(&root().join(&dir)).unwrap_or_else(|e| panic!("{e}"));
        let out = server.kubectl_in(
            &["apply", "--dry-run=server", "--server-side", "-f", "-"],
            &text,
        );
        assert!(
            out.contains("serverside-applied (server dry run)"),
            "{dir}: {out}"
        );
    }
    assert!(
        out.lines().count() >= 12,
        "every object of the chart was sent: {out}"
    );
}

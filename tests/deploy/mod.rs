//! Support for tests/deploy_manifests.rs: rendering with the real
//! `kubectl kustomize` (kustomize is built into kubectl), reading its YAML
//! with a maintained YAML crate, and loading the objects into k8s-openapi's
//! types.

use std::path::Path;
use std::process::Command;

use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The objects of one rendered kustomization (the cluster part, or a
/// rack's overlay), typed.
#[derive(Default)]
pub struct Rendered {
    pub namespaces: Vec<Namespace>,
    pub service_accounts: Vec<ServiceAccount>,
    pub cluster_roles: Vec<ClusterRole>,
    pub cluster_role_bindings: Vec<ClusterRoleBinding>,
    pub daemon_sets: Vec<DaemonSet>,
    pub config_maps: Vec<ConfigMap>,
    pub custom_resource_definitions: Vec<CustomResourceDefinition>,
    pub pod_monitors: Vec<PodMonitor>,
    /// Prometheus Operator's PrometheusRule, as written (its rules are
    /// checked by promtool in tests/monitoring.rs).
    pub prometheus_rules: Vec<Value>,
    /// Every object's identity, in the order rendered: what `kubectl apply
    /// -k` creates or replaces and `kubectl delete -k` deletes.
    pub ids: Vec<ObjectId>,
}

/// What identifies an object to the API server: `apiVersion`'s group and
/// the kind, the namespace (empty for cluster-scoped kinds) and the name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectId {
    pub group_kind: String,
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ObjectId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}/{}", self.group_kind, self.namespace, self.name)
    }
}

fn object_id(o: &Value) -> ObjectId {
    let api_version = o["apiVersion"].as_str().unwrap_or("");
    // `apps/v1` → `apps`; `v1` → the core group, "".
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    ObjectId {
        group_kind: format!("{group}/{}", o["kind"].as_str().unwrap_or("")),
        namespace: o["metadata"]["namespace"]
            .as_str()
            .unwrap_or("")
            .to_string(),
        name: o["metadata"]["name"].as_str().unwrap_or("").to_string(),
    }
}

/// The part of the Prometheus Operator's PodMonitor the deployment uses;
/// any other field (a misspelt one) is an error.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodMonitor {
    pub api_version: String,
    pub kind: String,
    pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    pub spec: PodMonitorSpec,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodMonitorSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_label: Option<String>,
    pub selector: k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
    pub pod_metrics_endpoints: Vec<PodMetricsEndpoint>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PodMetricsEndpoint {
    pub port: String,
    pub path: String,
    pub interval: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub relabelings: Vec<Relabeling>,
}

#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Relabeling {
    pub source_labels: Vec<String>,
    pub target_label: String,
}

/// Deserializes `value` as `T` and serializes it back: k8s-openapi ignores
/// fields it does not know, so a misspelt field (`readOnlyRootFilesytem`)
/// would vanish silently; here it is an error naming where it was.
pub fn typed<T: DeserializeOwned + Serialize>(value: &Value, origin: &str) -> Result<T, String> {
    let t: T = serde_json::from_value(value.clone())
        .map_err(|e| format!("{origin}: not a valid {}: {e}", value["kind"]))?;
    let back = serde_json::to_value(&t).map_err(|e| format!("{origin}: {e}"))?;
    if let Some(difference) = first_difference(value, &back, "") {
        return Err(format!(
            "{origin}: {} {}: {difference}",
            value["kind"], value["metadata"]["name"]
        ));
    }
    Ok(t)
}

fn first_difference(written: &Value, typed: &Value, path: &str) -> Option<String> {
    match (written, typed) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                let p = format!("{path}/{k}");
                match b.get(k) {
                    None => {
                        return Some(format!(
                            "{p} is not a field of this object (misspelt or misplaced?)"
                        ));
                    }
                    Some(w) => {
                        if let Some(d) = first_difference(v, w, &p) {
                            return Some(d);
                        }
                    }
                }
            }
            b.keys()
                .find(|k| !a.contains_key(*k))
                .map(|k| format!("{path}/{k} appeared in the typed object"))
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(x, y, &format!("{path}/{i}"))),
        (a, b) if a == b => None,
        (a, b) => Some(format!("{path}: written {a}, read as {b}")),
    }
}

/// Every YAML document of `text`, as JSON values; empty documents left out.
pub fn documents(text: &str, origin: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    for doc in yaml_serde::Deserializer::from_str(text) {
        let v = Value::deserialize(doc).map_err(|e| format!("{origin}: {e}"))?;
        if !v.is_null() {
            docs.push(v);
        }
    }
    Ok(docs)
}

/// `kubectl kustomize DIR`: what `kubectl apply -k DIR` would send.
/// kubectl is part of the test toolchain (kustomize v5 is built into it,
/// and it renders without a cluster); without it the test fails, saying so.
pub fn kustomize(dir: &Path) -> Result<String, String> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(dir)
        .output()
        .map_err(|e| {
            format!(
                "cannot run kubectl ({e}): the manifest tests render deploy/ with the real \
                 `kubectl kustomize`; install kubectl 1.32 or newer (it has kustomize built in) \
                 and put it on PATH"
            )
        })?;
    if !out.status.success() {
        return Err(format!(
            "kubectl kustomize {}: {}{}",
            dir.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    String::from_utf8(out.stdout).map_err(|e| format!("kubectl kustomize {}: {e}", dir.display()))
}

/// Renders `dir` and loads every object into its k8s-openapi type; a kind
/// the deployment has no business creating is an error.
pub fn render(dir: &Path) -> Result<Rendered, String> {
    let origin = format!("kubectl kustomize {}", dir.display());
    let mut r = Rendered::default();
    for o in documents(&kustomize(dir)?, &origin)? {
        let origin = &origin;
        r.ids.push(object_id(&o));
        match o["kind"].as_str().unwrap_or("") {
            "Namespace" => r.namespaces.push(typed(&o, origin)?),
            "ServiceAccount" => r.service_accounts.push(typed(&o, origin)?),
            "ClusterRole" => r.cluster_roles.push(typed(&o, origin)?),
            "ClusterRoleBinding" => r.cluster_role_bindings.push(typed(&o, origin)?),
            "DaemonSet" => r.daemon_sets.push(typed(&o, origin)?),
            "ConfigMap" => r.config_maps.push(typed(&o, origin)?),
            "CustomResourceDefinition" => r.custom_resource_definitions.push(typed(&o, origin)?),
            "PodMonitor" => r.pod_monitors.push(typed(&o, origin)?),
            "PrometheusRule" => r.prometheus_rules.push(o),
            other => return Err(format!("{origin}: unexpected kind {other:?}")),
        }
    }
    Ok(r)
}

/// A Secret manifest file (the MD5 example of an overlay).
pub fn secret_file(path: &Path) -> Result<Secret, String> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{origin}: {e}"))?;
    let docs = documents(&text, &origin)?;
    let [doc] = docs.as_slice() else {
        return Err(format!("{origin}: expected one document"));
    };
    typed(doc, &origin)
}

/// A kustomization in the target directory's temporary directory that
/// adds `components` (paths under `deploy/`) to the overlay `resource`
/// (also under `deploy/`): what an operator writes to add an optional
/// component to a rack. It names them by relative paths (kustomize takes
/// no absolute ones), wherever the target directory is. Removed when the
/// returned directory is dropped.
pub fn with_components(repo: &Path, resource: &str, components: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a temporary directory");
    let deploy = relative(dir.path(), &repo.join("deploy"));
    let list = components
        .iter()
        .map(|c| format!("  - {deploy}/{c}\n"))
        .collect::<String>();
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {deploy}/{resource}\ncomponents:\n{list}"
        ),
    )
    .expect("write the kustomization");
    dir
}

/// `to` as a path relative to the directory `from` (both made absolute
/// and free of symbolic links first).
fn relative(from: &Path, to: &Path) -> String {
    let from = from.canonicalize().expect("the temporary directory");
    let to = to.canonicalize().expect("the repository's deploy/");
    let common = from
        .components()
        .zip(to.components())
        .take_while(|(a, b)| a == b)
        .count();
    let up = from.components().skip(common).map(|_| "..".to_string());
    let down = to
        .components()
        .skip(common)
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    up.chain(down).collect::<Vec<_>>().join("/")
}

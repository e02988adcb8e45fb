//! The Kubernetes manifests in `deploy/`: the cluster part, every rack's
//! overlay (and the base) are rendered by the real `kubectl kustomize`
//! (what `kubectl apply -k` sends; the test fails, saying what to install,
//! without kubectl), read with yaml_serde, every object is loaded into its
//! k8s-openapi type with nothing lost, and the promises of
//! deploy/README.md are checked: the cluster-wide objects in the cluster
//! part only, racks that never share an object nor select each other's
//! pods or nodes, RBAC exactly as the Kubernetes source needs it, the
//! pod's network, identity, probes, resources and lockdown, a capability
//! (still UID 65532) only where the rack's config needs it, the metrics
//! listener wherever a PodMonitor scrapes, the Talos examples (KubePrism,
//! the kubelet's graceful shutdown) agreeing with the DaemonSet, and every
//! embedded holdfast.toml passing the real `holdfast check`. The Grafana
//! dashboard is checked against the metric families holdfast declares.

mod deploy;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use deploy::Rendered;
use holdfast::config::{self, AddressFamily, Config, Family, PeerAddress};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const BIN: &str = env!("CARGO_BIN_EXE_holdfast");

/// Every rack's overlay (`deploy/overlays/NAME`) and its rack: the value
/// of [`RACK_LABEL`] on its objects, in its DaemonSet's selector and pod
/// template, and on the Nodes it runs on.
const OVERLAYS: &[(&str, &str)] = &[
    ("rack-a", "a"),
    ("rack-b", "b"),
    ("listen-179", "c"),
    ("unnumbered", "d"),
];

/// The Node label that decides a node's rack, and the label of each rack's
/// objects.
const RACK_LABEL: &str = "holdfast.dev/rack";

/// The cluster-wide part, applied once before any rack.
const CLUSTER: &str = "deploy/cluster";
/// Its monitoring part (the alerts), applied once too.
const CLUSTER_MONITORING: &str = "deploy/cluster/monitoring";

/// The kinds that exist once per cluster: only the cluster parts may
/// render them, so that no rack's `kubectl delete -k` deletes them.
const CLUSTER_WIDE_KINDS: &[&str] = &[
    "/Namespace",
    "/ServiceAccount",
    "rbac.authorization.k8s.io/ClusterRole",
    "rbac.authorization.k8s.io/ClusterRoleBinding",
    "rbac.authorization.k8s.io/Role",
    "rbac.authorization.k8s.io/RoleBinding",
    "apiextensions.k8s.io/CustomResourceDefinition",
    "monitoring.coreos.com/PrometheusRule",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn render(dir: &str) -> Rendered {
    deploy::render(&root().join(dir)).unwrap_or_else(|e| panic!("rendering {dir}: {e}"))
}

fn overlay(name: &str) -> Rendered {
    render(&format!("deploy/overlays/{name}"))
}

fn overlay_names() -> impl Iterator<Item = &'static str> {
    OVERLAYS.iter().map(|(name, _)| *name)
}

fn the<'a, T>(items: &'a [T], what: &str, dir: &str) -> &'a T {
    match items {
        [one] => one,
        _ => panic!("{dir}: expected exactly one {what}, found {}", items.len()),
    }
}

fn pod(ds: &DaemonSet) -> &PodSpec {
    ds.spec
        .template
        .spec
        .as_ref()
        .expect("DaemonSet has a pod template spec")
}

fn container(ds: &DaemonSet) -> &Container {
    let p = pod(ds);
    assert_eq!(p.containers.len(), 1, "one container");
    &p.containers[0]
}

/// The holdfast.toml the overlay's ConfigMap carries, and its parsed form
/// (password files not read: they live on the node).
fn embedded_config(r: &Rendered, dir: &str) -> (String, Config) {
    let cm = the(&r.config_maps, "ConfigMap", dir);
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get("holdfast.toml"))
        .unwrap_or_else(|| panic!("{dir}: the ConfigMap has no holdfast.toml"))
        .clone();
    let config =
        config::parse(Path::new("/etc/holdfast/holdfast.toml"), &text).unwrap_or_else(|d| {
            let lines: Vec<String> = d.iter().map(ToString::to_string).collect();
            panic!("{dir}: holdfast.toml:\n{}", lines.join("\n"))
        });
    (text, config)
}

#[test]
fn every_part_renders_into_typed_objects() {
    // The cluster part: what every rack shares, once.
    let cluster = render(CLUSTER);
    the(&cluster.namespaces, "Namespace", CLUSTER);
    the(&cluster.service_accounts, "ServiceAccount", CLUSTER);
    the(&cluster.cluster_roles, "ClusterRole", CLUSTER);
    the(
        &cluster.cluster_role_bindings,
        "ClusterRoleBinding",
        CLUSTER,
    );
    the(
        &cluster.custom_resource_definitions,
        "CustomResourceDefinition",
        CLUSTER,
    );
    assert_eq!(cluster.ids.len(), 5, "{:?}", cluster.ids);
    // Its alerts, once: a PrometheusRule per rack would fire each alert
    // once per rack.
    let monitoring = render(CLUSTER_MONITORING);
    the(
        &monitoring.prometheus_rules,
        "PrometheusRule",
        CLUSTER_MONITORING,
    );
    assert_eq!(monitoring.ids.len(), 1, "{:?}", monitoring.ids);
    // The base: the DaemonSet every rack starts from, and nothing else.
    let base = render("deploy/base");
    the(&base.daemon_sets, "DaemonSet", "deploy/base");
    assert_eq!(
        base.ids.len(),
        1,
        "the base carries no rack's config and nothing cluster-wide: {:?}",
        base.ids
    );
    // A rack: its DaemonSet, its ConfigMap, its PodMonitor if scraped.
    // Every overlay in deploy/overlays is one, and is in OVERLAYS.
    let mut dirs: Vec<String> = std::fs::read_dir(root().join("deploy/overlays"))
        .expect("deploy/overlays")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    dirs.sort();
    let mut listed: Vec<String> = overlay_names().map(String::from).collect();
    listed.sort();
    assert_eq!(dirs, listed, "deploy/overlays and OVERLAYS");
    for name in overlay_names() {
        let r = overlay(name);
        let dir = format!("overlays/{name}");
        the(&r.daemon_sets, "DaemonSet", &dir);
        the(&r.config_maps, "ConfigMap", &dir);
        assert!(r.pod_monitors.len() <= 1, "{dir}");
        assert_eq!(
            r.ids.len(),
            2 + r.pod_monitors.len(),
            "{dir}: a rack renders its own objects only: {:?}",
            r.ids
        );
    }
}

/// The BGPNodeStatus CRD is what holdfast writes and README.md documents:
/// cluster-scoped, v1alpha1 with a status subresource, and printer columns
/// reading fields the writer fills in.
#[test]
fn the_node_status_crd_matches_what_holdfast_writes() {
    use holdfast::report::node_status::{self, NodeStatusBody};
    let r = render(CLUSTER);
    let crd = the(
        &r.custom_resource_definitions,
        "CustomResourceDefinition",
        CLUSTER,
    );
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("bgpnodestatuses.holdfast.dev")
    );
    assert_eq!(crd.spec.group, node_status::GROUP);
    assert_eq!(crd.spec.scope, "Cluster");
    assert_eq!(crd.spec.names.kind, node_status::KIND);
    assert_eq!(crd.spec.names.plural, node_status::PLURAL);
    let [version] = crd.spec.versions.as_slice() else {
        panic!("one version")
    };
    assert_eq!(version.name, node_status::VERSION);
    assert!(version.served && version.storage);
    assert!(
        version
            .subresources
            .as_ref()
            .is_some_and(|s| s.status.is_some()),
        "the status subresource"
    );
    // Every column reads a field of the written object.
    let written = serde_json::json!({
        "metadata": {"creationTimestamp": "x"},
        "status": NodeStatusBody::default(),
    });
    let columns = version
        .additional_printer_columns
        .as_deref()
        .unwrap_or_default();
    assert!(columns.len() >= 5, "{columns:?}");
    for c in columns {
        let pointer = c.json_path.replace('.', "/");
        assert!(
            written.pointer(&pointer).is_some(),
            "printer column {} reads {}, which holdfast does not write",
            c.name,
            c.json_path
        );
    }
    // And the schema has every field holdfast writes, nested ones too: an
    // API server prunes fields its schema lacks, silently.
    let schema = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("status"))
        .expect("a status schema");
    let status: holdfast::report::status::Status =
        serde_json::from_str(include_str!("fixtures/api/status.json")).expect("the fixture");
    let full = node_status::build(&status, k8s_openapi::jiff::Timestamp::UNIX_EPOCH, None);
    let full = serde_json::to_value(&full).expect("JSON");
    assert!(full["peers"][1]["lastError"].is_string() && full["peers"][0]["bfd"].is_string());
    schema_covers(schema, &full, "status");
}

type Schema = k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps;

fn schema_covers(schema: &Schema, value: &serde_json::Value, path: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray;
    let declared = schema.type_.as_deref().unwrap_or("?");
    match value {
        serde_json::Value::Object(map) => {
            assert_eq!(declared, "object", "{path}");
            let props = schema
                .properties
                .as_ref()
                .unwrap_or_else(|| panic!("{path}: no properties"));
            for (k, v) in map {
                let sub = props
                    .get(k)
                    .unwrap_or_else(|| panic!("{path}.{k} is written but not in the CRD's schema"));
                schema_covers(sub, v, &format!("{path}.{k}"));
            }
        }
        serde_json::Value::Array(items) => {
            assert_eq!(declared, "array", "{path}");
            let Some(JSONSchemaPropsOrArray::Schema(item)) = schema.items.as_ref() else {
                panic!("{path}: no items schema")
            };
            for v in items {
                schema_covers(item, v, &format!("{path}[]"));
            }
        }
        serde_json::Value::String(_) => assert_eq!(declared, "string", "{path}"),
        serde_json::Value::Number(_) => assert_eq!(declared, "integer", "{path}"),
        serde_json::Value::Bool(_) => assert_eq!(declared, "boolean", "{path}"),
        serde_json::Value::Null => {}
    }
}

#[test]
fn rbac_grants_exactly_what_the_kubernetes_source_needs() {
    // What the code uses, each proven against a real API server by
    // tests/kube_frr.rs (every_permission_...): the watchers list and
    // watch; the node status writer gets the Node for its uid.
    let mut expected = BTreeSet::new();
    for (group, resource) in [
        ("", "services"),
        ("", "nodes"),
        ("discovery.k8s.io", "endpointslices"),
    ] {
        for verb in ["list", "watch"] {
            expected.insert((group.to_string(), resource.to_string(), verb.to_string()));
        }
    }
    expected.insert(("".into(), "nodes".into(), "get".into()));
    // The recorder writes events.k8s.io/v1 Events only.
    for group in ["events.k8s.io"] {
        for verb in ["create", "patch"] {
            expected.insert((group.to_string(), "events".to_string(), verb.to_string()));
        }
    }
    // This node's BGPNodeStatus: server-side apply of it (a PATCH, for
    // which the API server also asks "create" when it creates the object)
    // and of its status (a PATCH).
    for (resource, verb) in [
        ("bgpnodestatuses", "create"),
        ("bgpnodestatuses", "patch"),
        ("bgpnodestatuses/status", "patch"),
    ] {
        expected.insert(("holdfast.dev".into(), resource.into(), verb.into()));
    }
    let r = render(CLUSTER);
    let dir = CLUSTER;
    let role = the(&r.cluster_roles, "ClusterRole", dir);
    let mut granted = BTreeSet::new();
    for rule in role.rules.as_deref().unwrap_or_default() {
        assert!(
            rule.resource_names.is_none() && rule.non_resource_urls.is_none(),
            "{dir}: {rule:?}"
        );
        for g in rule.api_groups.as_deref().unwrap_or_default() {
            for res in rule.resources.as_deref().unwrap_or_default() {
                for v in &rule.verbs {
                    granted.insert((g.clone(), res.clone(), v.clone()));
                }
            }
        }
    }
    assert_eq!(
        granted, expected,
        "{dir}: the ClusterRole grants exactly this"
    );

    let binding = the(&r.cluster_role_bindings, "ClusterRoleBinding", dir);
    assert_eq!(binding.role_ref.kind, "ClusterRole");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let sa = the(&r.service_accounts, "ServiceAccount", dir);
    let ns = the(&r.namespaces, "Namespace", dir);
    let subjects = binding.subjects.as_deref().unwrap_or_default();
    assert_eq!(subjects.len(), 1, "{dir}: one subject");
    assert_eq!(subjects[0].kind, "ServiceAccount");
    assert_eq!(Some(&subjects[0].name), sa.metadata.name.as_ref());
    assert_eq!(subjects[0].namespace, sa.metadata.namespace);
    assert_eq!(sa.metadata.namespace, ns.metadata.name);
    // Every rack's pods run as that ServiceAccount, in that namespace: the
    // racks render neither (kustomize leaves references to objects it does
    // not render as written, so the name suffix does not reach it).
    for name in overlay_names() {
        let dir = format!("overlays/{name}");
        let r = overlay(name);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        assert_eq!(ds.metadata.namespace, ns.metadata.name, "{dir}");
        assert_eq!(pod(ds).service_account_name, sa.metadata.name, "{dir}");
        for cm in &r.config_maps {
            assert_eq!(cm.metadata.namespace, ns.metadata.name, "{dir}");
        }
        for pm in &r.pod_monitors {
            assert_eq!(pm.metadata.namespace, ns.metadata.name, "{dir}");
        }
    }
}

/// Pod Security admission on the namespace: `privileged` enforced, which
/// hostNetwork needs (`baseline` refuses it, and Talos enforces
/// `baseline` by default); `baseline` warned and audited, so what each
/// rack's pods have beyond it shows in `kubectl apply` and the audit log.
#[test]
fn the_namespace_allows_host_network_and_warns_at_baseline() {
    let r = render(CLUSTER);
    let ns = the(&r.namespaces, "Namespace", CLUSTER);
    let labels = ns.metadata.labels.clone().unwrap_or_default();
    for (mode, level) in [
        ("enforce", "privileged"),
        ("audit", "baseline"),
        ("warn", "baseline"),
    ] {
        assert_eq!(
            labels
                .get(&format!("pod-security.kubernetes.io/{mode}"))
                .map(String::as_str),
            Some(level),
            "{CLUSTER}: {mode}"
        );
    }
}

/// Kubernetes' toleration rule (core/v1 Toleration.ToleratesTaint).
fn tolerates(tolerations: &[Toleration], key: &str, value: &str, effect: &str) -> bool {
    tolerations.iter().any(|t| {
        let effect_ok = t
            .effect
            .as_deref()
            .is_none_or(|e| e.is_empty() || e == effect);
        let key_ok = match t.key.as_deref() {
            None | Some("") => t.operator.as_deref() == Some("Exists"),
            Some(k) => k == key,
        };
        let value_ok = match t.operator.as_deref() {
            Some("Exists") => true,
            None | Some("Equal") => t.value.as_deref().unwrap_or("") == value,
            Some(_) => false,
        };
        effect_ok && key_ok && value_ok
    })
}

/// `"10m"` → 10 (millicores); `"16Mi"` → bytes.
fn millicores(q: &str) -> u64 {
    match q.strip_suffix('m') {
        Some(m) => m.parse().expect("millicores"),
        None => q.parse::<u64>().expect("cores") * 1000,
    }
}

fn bytes(q: &str) -> u64 {
    for (suffix, factor) in [("Ki", 1u64 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30)] {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<u64>().expect("quantity") * factor;
        }
    }
    q.parse().expect("quantity in bytes")
}

fn limits_memory(res: &k8s_openapi::api::core::v1::ResourceRequirements) -> String {
    res.limits
        .as_ref()
        .and_then(|l| l.get("memory"))
        .map(|q| q.0.clone())
        .expect("a memory limit")
}

#[test]
fn the_daemonset_keeps_its_promises_in_every_overlay() {
    for (name, rack) in OVERLAYS {
        let dir = format!("overlays/{name}");
        let r = overlay(name);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        let (_, config) = embedded_config(&r, &dir);
        let p = pod(ds);
        let c = container(ds);

        // The node's network and cluster DNS.
        assert_eq!(p.host_network, Some(true), "{dir}");
        assert_eq!(
            p.dns_policy.as_deref(),
            Some("ClusterFirstWithHostNet"),
            "{dir}"
        );
        assert_eq!(
            p.priority_class_name.as_deref(),
            Some("system-node-critical"),
            "{dir}"
        );

        // NODE_NAME and NODE_IP from the downward API.
        for (var, field) in [("NODE_NAME", "spec.nodeName"), ("NODE_IP", "status.hostIP")] {
            let env = c
                .env
                .as_deref()
                .unwrap_or_default()
                .iter()
                .find(|e| e.name == var)
                .unwrap_or_else(|| panic!("{dir}: no {var}"));
            let from = env
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .unwrap_or_else(|| panic!("{dir}: {var} is not from the downward API"));
            assert_eq!(from.field_path, field, "{dir}: {var}");
        }

        // The command line names the mounted config and the state volume.
        let args = c.args.clone().unwrap_or_default();
        let arg = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .and_then(|i| args.get(i + 1))
                .unwrap_or_else(|| panic!("{dir}: no {flag} in {args:?}"))
                .clone()
        };
        assert_eq!(args.first().map(String::as_str), Some("run"), "{dir}");
        let config_path = arg("--config");
        let state_dir = arg("--state-dir");
        let mounts = c.volume_mounts.as_deref().unwrap_or_default();
        let volumes = p.volumes.as_deref().unwrap_or_default();
        let volume_at = |path: &str| {
            let m = mounts
                .iter()
                .find(|m| m.mount_path == path)
                .unwrap_or_else(|| panic!("{dir}: nothing mounted at {path}"));
            volumes
                .iter()
                .find(|v| v.name == m.name)
                .unwrap_or_else(|| panic!("{dir}: no volume {}", m.name))
        };
        assert_eq!(config_path, "/etc/holdfast/holdfast.toml");
        let config_volume = volume_at("/etc/holdfast");
        let sources = config_volume
            .projected
            .as_ref()
            .and_then(|pr| pr.sources.clone())
            .unwrap_or_else(|| panic!("{dir}: /etc/holdfast is not a projected volume"));
        // Written `defaultMode: 0440` (YAML 1.1 octal, as kubectl reads it):
        // the keys readable by the group fsGroup gives them, nobody else.
        assert_eq!(
            config_volume
                .projected
                .as_ref()
                .and_then(|p| p.default_mode),
            Some(0o440),
            "{dir}: the config volume's defaultMode"
        );
        let cm_name = sources
            .iter()
            .find_map(|s| s.config_map.as_ref())
            .map(|cm| cm.name.clone())
            .unwrap_or_else(|| panic!("{dir}: no ConfigMap in the config volume"));
        let cm = the(&r.config_maps, "ConfigMap", &dir);
        assert_eq!(
            Some(&cm_name),
            cm.metadata.name.as_ref(),
            "{dir}: the volume names the generated ConfigMap"
        );
        assert!(
            cm_name.starts_with(&format!("holdfast-config-rack-{rack}-")),
            "{dir}: the rack's name suffix, then the hash suffix: {cm_name}"
        );
        let state = volume_at(&state_dir);
        assert!(
            state.empty_dir.is_some(),
            "{dir}: the state dir is an emptyDir (survives container restarts)"
        );
        // `kubectl exec POD -- holdfast drain` looks for the API socket in
        // the default state directory: the daemon's must be that one, and
        // writable (the socket is made there).
        assert_eq!(
            state_dir,
            holdfast::api::local::DEFAULT_STATE_DIR,
            "{dir}: --state-dir is not where holdfast drain looks by default"
        );
        let state_mount = mounts
            .iter()
            .find(|m| m.mount_path == state_dir)
            .expect("checked above");
        assert_ne!(
            state_mount.read_only,
            Some(true),
            "{dir}: the state dir must be writable (the API socket is made there)"
        );

        // Every password_file is a key of the Secret projected at md5/.
        let secret_items: Vec<(String, String, String)> = sources
            .iter()
            .filter_map(|s| s.secret.as_ref())
            .flat_map(|s| {
                s.items
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|i| (s.name.clone(), i.key, format!("/etc/holdfast/{}", i.path)))
            })
            .collect();
        for peer in &config.peers {
            if let Some(pw) = &peer.password {
                let file = pw.file.display().to_string();
                assert!(
                    secret_items.iter().any(|(_, _, path)| *path == file),
                    "{dir}: peer {}'s password_file {file} is not projected from a Secret: {secret_items:?}",
                    peer.name
                );
            }
        }

        // Probes on the API, which the kubelet reaches on the node's loopback.
        let api = config.speaker.api;
        assert!(
            api.ip().is_loopback() || api.ip().is_unspecified(),
            "{dir}: speaker.api {api} must answer on 127.0.0.1 for the probes"
        );
        for (probe, path) in [
            (c.liveness_probe.as_ref(), "/healthz"),
            (c.readiness_probe.as_ref(), "/readyz"),
        ] {
            let get = probe
                .and_then(|p| p.http_get.as_ref())
                .unwrap_or_else(|| panic!("{dir}: no httpGet probe on {path}"));
            assert_eq!(get.path.as_deref(), Some(path), "{dir}");
            assert_eq!(get.host.as_deref(), Some("127.0.0.1"), "{dir}: {path}");
            // Where `holdfast check` expects the probes (its api warning).
            let probed = holdfast::config::PROBED_API;
            assert_eq!(get.host.as_deref(), Some(probed.ip().to_string().as_str()));
            assert_eq!(
                get.port,
                IntOrString::Int(i32::from(probed.port())),
                "{dir}"
            );
            assert_eq!(
                get.port,
                IntOrString::Int(i32::from(api.port())),
                "{dir}: {path} probes speaker.api's port"
            );
        }

        // Small requests, above the measured RSS; a memory limit with room
        // for 10,000 Services. Measured with the Kubernetes source: 21 MiB
        // at 1,000 Services, 119 MiB at 10,000 (deploy/base/daemonset.yaml).
        let res = c.resources.as_ref().expect("resources");
        let requests = res.requests.clone().unwrap_or_default();
        let cpu = millicores(&requests["cpu"].0);
        let mem = bytes(&requests["memory"].0);
        assert!((5..=50).contains(&cpu), "{dir}: cpu request {cpu}m");
        assert!(
            ((21 << 20) + (21 << 19)..=(64 << 20)).contains(&mem),
            "{dir}: memory request {mem}: 21 MiB measured at 1k Services, plus half as headroom"
        );
        let limit = bytes(&limits_memory(res));
        assert!(
            limit >= 2 * (119 << 20),
            "{dir}: memory limit {limit}: 119 MiB measured at 10k Services, twice that"
        );
        assert!(limit >= mem, "{dir}: memory limit below the request");

        // The lockdown.
        let sc = c
            .security_context
            .as_ref()
            .expect("container securityContext");
        let psc = p.security_context.as_ref().expect("pod securityContext");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{dir}");
        assert_ne!(sc.privileged, Some(true), "{dir}");
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(
            caps.drop.as_deref(),
            Some(&["ALL".to_string()][..]),
            "{dir}"
        );
        // seccomp RuntimeDefault for the whole pod, and nothing weaker for
        // the container.
        assert_eq!(
            psc.seccomp_profile.as_ref().map(|s| s.type_.as_str()),
            Some("RuntimeDefault"),
            "{dir}: the pod's seccomp profile"
        );
        assert!(
            sc.seccomp_profile
                .as_ref()
                .is_none_or(|s| s.type_ == "RuntimeDefault"),
            "{dir}: the container's seccomp profile {:?}",
            sc.seccomp_profile
        );
        // Never root: UID and GID 65532 everywhere, runAsNonRoot.
        for (what, uid, gid, non_root) in [
            (
                "pod",
                psc.run_as_user,
                psc.run_as_group,
                psc.run_as_non_root,
            ),
            (
                "container",
                sc.run_as_user,
                sc.run_as_group,
                sc.run_as_non_root,
            ),
        ] {
            assert_eq!(uid, Some(65532), "{dir}: the {what}'s runAsUser");
            assert_eq!(gid, Some(65532), "{dir}: the {what}'s runAsGroup");
            assert_eq!(non_root, Some(true), "{dir}: the {what}'s runAsNonRoot");
        }
        // A capability exactly where the rack's config needs one, and then
        // privilege escalation allowed, which is what lets the binary's
        // file capability (permitted only) take effect: no no_new_privs.
        let added: BTreeSet<String> = caps.add.clone().unwrap_or_default().into_iter().collect();
        let needed = needed_capabilities(&config);
        assert_eq!(added, needed, "{dir}: capabilities.add");
        assert_eq!(
            sc.allow_privilege_escalation,
            Some(!needed.is_empty()),
            "{dir}: allowPrivilegeEscalation (file capabilities need it; nothing else does)"
        );
        assert_eq!(
            psc.fs_group,
            Some(65532),
            "{dir}: the keys are group-readable"
        );

        // Placement: every taint tolerated (the daemon drains itself).
        let tolerations = p.tolerations.as_deref().unwrap_or_default();
        for (key, value, effect) in [
            ("node-role.kubernetes.io/control-plane", "", "NoSchedule"),
            ("node.kubernetes.io/unschedulable", "", "NoSchedule"),
            ("node.kubernetes.io/unreachable", "", "NoExecute"),
            ("example.com/maintenance", "true", "NoExecute"),
        ] {
            assert!(
                tolerates(tolerations, key, value, effect),
                "{dir}: {key}={value}:{effect} is not tolerated"
            );
        }
        // The rack's nodes: the Node label, with the rack's value.
        let selector = p.node_selector.clone().unwrap_or_default();
        assert_eq!(
            selector.get(RACK_LABEL).map(String::as_str),
            Some(*rack),
            "{dir}"
        );
        assert_eq!(
            selector.get("kubernetes.io/os").map(String::as_str),
            Some("linux"),
            "{dir}"
        );

        // One node at a time, long enough to stop every session.
        let spec = &ds.spec;
        let rolling = spec
            .update_strategy
            .as_ref()
            .filter(|u| u.type_.as_deref() == Some("RollingUpdate"))
            .and_then(|u| u.rolling_update.as_ref())
            .unwrap_or_else(|| panic!("{dir}: RollingUpdate"));
        assert_eq!(rolling.max_unavailable, Some(IntOrString::Int(1)), "{dir}");
        assert_eq!(rolling.max_surge, Some(IntOrString::Int(0)), "{dir}");
        // The daemon first waits graceful_shutdown_wait with the routes
        // marked GRACEFUL_SHUTDOWN (RFC 8326; peers without graceful
        // restart), then stops sessions one by one, up to 3 s each, then
        // the API within 2 s (src/daemon).
        let wait = config.speaker.graceful_shutdown_wait.as_secs() as i64;
        let needed = wait + 3 * config.peers.len() as i64 + 2;
        let grace = p.termination_grace_period_seconds.unwrap_or(30);
        assert!(grace >= needed, "{dir}: {grace} s < {needed} s");
        // The grace period `holdfast check` warns against.
        assert_eq!(
            grace,
            holdfast::config::SHIPPED_GRACE_PERIOD.as_secs() as i64,
            "{dir}: change SHIPPED_GRACE_PERIOD (src/config/warnings.rs) with it"
        );

        // The image is this version's; the operator's registry is the
        // operator's to add (`images:` newName, deploy/README.md).
        assert_eq!(
            c.image.as_deref(),
            Some(format!("holdfast:{}", env!("CARGO_PKG_VERSION")).as_str()),
            "{dir}"
        );
    }
}

/// The capabilities a rack's config needs, each raised by holdfast only
/// in the thread that uses it, from the binary's file capabilities
/// (`cap_net_raw,cap_net_bind_service+p`): NET_BIND_SERVICE to listen
/// below 1024 (`speaker.listen`), NET_RAW for unnumbered peering's
/// Neighbor Discovery (a `[[peer]]` by `interface`).
fn needed_capabilities(config: &Config) -> BTreeSet<String> {
    let mut needed = BTreeSet::new();
    if config.speaker.listen.is_some_and(|l| l.port() < 1024) {
        needed.insert("NET_BIND_SERVICE".to_string());
    }
    if config
        .peers
        .iter()
        .any(|p| matches!(p.address, PeerAddress::Interface(_)))
    {
        needed.insert("NET_RAW".to_string());
    }
    needed
}

/// Which manifests grant a capability at all: the base none, and of the
/// racks only the one that listens on 179 and the unnumbered one, each
/// its own; every variant that grants one exists as an overlay (so the
/// tests above check it whole).
#[test]
fn capabilities_appear_in_the_listen_and_unnumbered_racks_only() {
    let mut with = Vec::new();
    for dir in ["deploy/base"]
        .into_iter()
        .map(String::from)
        .chain(overlay_names().map(|o| format!("deploy/overlays/{o}")))
    {
        let r = render(&dir);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        let sc = container(ds).security_context.clone().unwrap_or_default();
        let added = sc.capabilities.and_then(|c| c.add).unwrap_or_default();
        if !added.is_empty() {
            with.push((dir, added, sc.allow_privilege_escalation));
        } else {
            assert_eq!(sc.allow_privilege_escalation, Some(false), "{dir}");
        }
    }
    assert_eq!(
        with,
        [
            (
                "deploy/overlays/listen-179".to_string(),
                vec!["NET_BIND_SERVICE".to_string()],
                Some(true)
            ),
            (
                "deploy/overlays/unnumbered".to_string(),
                vec!["NET_RAW".to_string()],
                Some(true)
            ),
        ]
    );
}

/// No rack but listen-179 listens for BGP at all (`speaker.listen`
/// absent): holdfast connects out and binds no BGP port, so it shares a
/// node with another speaker that owns TCP 179 there, such as Talos's
/// native BGP (docs/src/install/talos-native.md). The one that listens
/// says so in its name and docs/src/install/port-179.md.
#[test]
fn only_the_listen_179_rack_binds_a_bgp_port() {
    let listening: Vec<(String, String)> = overlay_names()
        .filter_map(|name| {
            let dir = format!("overlays/{name}");
            let (_, config) = embedded_config(&overlay(name), &dir);
            config.speaker.listen.map(|l| (dir, l.to_string()))
        })
        .collect();
    assert_eq!(
        listening,
        [("overlays/listen-179".to_string(), "[::]:179".to_string())]
    );
}

/// `deploy/components/unnumbered`, added to a rack: NET_RAW in the
/// bounding set and privilege escalation allowed (so that the image's
/// `cap_net_raw+p` file capability takes effect), and nothing else of the
/// base's lockdown changed: still UID 65532, every other capability
/// dropped, read-only root, seccomp.
#[test]
fn the_unnumbered_component_grants_net_raw_and_nothing_else() {
    let dir = deploy::with_components(&root(), "overlays/rack-a", &["components/unnumbered"]);
    let with = deploy::render(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let without = overlay("rack-a");
    let ds = the(&with.daemon_sets, "DaemonSet", "rack-a + unnumbered");
    let sc = container(ds)
        .security_context
        .clone()
        .expect("a securityContext");
    let caps = sc.capabilities.clone().expect("capabilities");
    assert_eq!(caps.add, Some(vec!["NET_RAW".to_string()]), "{sc:?}");
    assert_eq!(caps.drop, Some(vec!["ALL".to_string()]), "{sc:?}");
    assert_eq!(sc.allow_privilege_escalation, Some(true), "{sc:?}");
    assert_eq!(sc.run_as_user, Some(65532), "{sc:?}");
    assert_eq!(sc.run_as_non_root, Some(true), "{sc:?}");
    // Everything else is the rack's DaemonSet as it was.
    let mut base = the(&without.daemon_sets, "DaemonSet", "rack-a").clone();
    let mut patched = ds.clone();
    for d in [&mut base, &mut patched] {
        let c = &mut d.spec.template.spec.as_mut().unwrap().containers[0];
        let sc = c.security_context.as_mut().unwrap();
        sc.allow_privilege_escalation = None;
        sc.capabilities.as_mut().unwrap().add = None;
    }
    assert_eq!(
        serde_json::to_value(&base).unwrap(),
        serde_json::to_value(&patched).unwrap(),
        "the component changes more than NET_RAW and privilege escalation"
    );
}

#[test]
fn namespace_selectors_need_no_permission_on_namespaces() {
    // The Kubernetes source watches Namespaces only for a namespace_selector
    // on labels other than kubernetes.io/metadata.name, and the ClusterRole
    // grants nothing on namespaces: such a selector would leave the source
    // unhealthy forever.
    for name in overlay_names() {
        let dir = format!("overlays/{name}");
        let (_, config) = embedded_config(&overlay(name), &dir);
        for a in &config.advertisements {
            if let Some(sel) = &a.namespace_selector {
                let keys = sel
                    .match_labels
                    .keys()
                    .chain(sel.match_expressions.iter().map(|e| &e.key));
                for key in keys {
                    assert_eq!(
                        key, "kubernetes.io/metadata.name",
                        "{dir}: advertisement {} selects namespaces by {key}",
                        a.name
                    );
                }
            }
        }
    }
}

#[test]
fn the_dual_stack_example_peers_over_both_families() {
    let r = overlay("rack-b");
    let (_, config) = embedded_config(&r, "overlays/rack-b");
    // One session over IPv4 carrying IPv4 routes, one over IPv6 carrying
    // IPv6 routes.
    let has = |transport: AddressFamily, family: Family| {
        config
            .peers
            .iter()
            .any(|p| p.address.family() == transport && p.families == [family])
    };
    assert!(
        has(AddressFamily::Ipv4, Family::Ipv4Unicast),
        "{:?}",
        config.peers
    );
    assert!(
        has(AddressFamily::Ipv6, Family::Ipv6Unicast),
        "{:?}",
        config.peers
    );
}

fn check(config: &Path, extra: &[&str]) -> (bool, String) {
    // Warnings fail too: what the deploy ships is what operators copy.
    let out = Command::new(BIN)
        .arg("check")
        .arg("--config")
        .arg(config)
        .arg("--deny-warnings")
        .args(extra)
        .output()
        .expect("run holdfast check");
    (
        out.status.success() && out.stdout.is_empty(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn every_embedded_config_passes_holdfast_check() {
    for name in overlay_names() {
        let dir = format!("overlays/{name}");
        let r = overlay(name);
        let (text, config) = embedded_config(&r, &dir);
        let tmp = tempfile::tempdir().unwrap();

        // As shipped, the key files aside (they live on the node).
        let shipped = tmp.path().join("holdfast.toml");
        std::fs::write(&shipped, &text).unwrap();
        let (ok, out) = check(&shipped, &["--skip-password-files"]);
        assert!(ok, "{dir}: holdfast check --skip-password-files:\n{out}");

        // And whole, with the example Secret's keys where the pod would
        // find them: every key file named exists in the example.
        let files: Vec<String> = config
            .peers
            .iter()
            .filter_map(|p| p.password.as_ref())
            .map(|pw| pw.file.display().to_string())
            .collect();
        if files.is_empty() {
            let (ok, out) = check(&shipped, &[]);
            assert!(ok, "{dir}: holdfast check:\n{out}");
            continue;
        }
        let example = root().join(format!("deploy/overlays/{name}/md5-secret.example.yaml"));
        let secret = deploy::secret_file(&example).unwrap_or_else(|e| panic!("{e}"));
        let data = secret.string_data.clone().unwrap_or_default();
        let node_root = tmp.path().join("node");
        for file in &files {
            let key = file
                .strip_prefix("/etc/holdfast/md5/")
                .unwrap_or_else(|| panic!("{dir}: {file} is not under /etc/holdfast/md5/"));
            let value = data
                .get(key)
                .unwrap_or_else(|| panic!("{dir}: the example Secret has no key {key}"));
            let path = node_root.join("md5").join(key);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, value).unwrap();
        }
        let whole = node_root.join("holdfast.toml");
        let rewritten = text.replace("\"/etc/holdfast/", &format!("\"{}/", node_root.display()));
        std::fs::write(&whole, rewritten).unwrap();
        let (ok, out) = check(&whole, &[]);
        assert!(ok, "{dir}: holdfast check with the example keys:\n{out}");
    }
}

/// Kubernetes' label selector rule (LabelSelectorAsSelector): every
/// `matchLabels` pair and every `matchExpressions` requirement holds.
fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let pairs = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let requirements = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" => labels.get(&e.key).is_some_and(|v| values.contains(v)),
            "NotIn" => labels.get(&e.key).is_none_or(|v| !values.contains(v)),
            "Exists" => labels.contains_key(&e.key),
            "DoesNotExist" => !labels.contains_key(&e.key),
            other => panic!("selector operator {other}"),
        }
    });
    pairs && requirements
}

fn template_labels(ds: &DaemonSet) -> BTreeMap<String, String> {
    ds.spec
        .template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default()
}

fn is_cluster_part(dir: &str) -> bool {
    dir == CLUSTER || dir == CLUSTER_MONITORING
}

/// Every rack applied to one cluster after the cluster part, in any order:
/// no object is in two renders (applying one rack would replace another's
/// object, deleting one would delete it), the cluster-wide objects are in
/// the cluster part and nowhere else (so `kubectl delete -k` of a rack
/// deletes no namespace, CRD or RBAC), every rack's DaemonSet selects its
/// own pods and no other rack's (a DaemonSet adopts and deletes the pods
/// its selector matches), and each runs on the nodes with its own value of
/// the rack Node label only.
#[test]
fn racks_share_no_object_and_select_only_their_own_pods_and_nodes() {
    let mut parts: Vec<(String, Rendered)> = [CLUSTER, CLUSTER_MONITORING]
        .into_iter()
        .map(|d| (d.to_string(), render(d)))
        .collect();
    for name in overlay_names() {
        parts.push((format!("deploy/overlays/{name}"), overlay(name)));
    }

    // (a) Every object in one render only; cluster-wide ones in the
    // cluster part only, and the cluster part nothing else.
    let mut owner: BTreeMap<&deploy::ObjectId, &str> = BTreeMap::new();
    for (dir, r) in &parts {
        assert!(!r.ids.is_empty(), "{dir}: renders nothing");
        for id in &r.ids {
            if let Some(other) = owner.insert(id, dir) {
                panic!(
                    "{id} is rendered by {other} and by {dir}: applying one replaces the other's, deleting one deletes the other's"
                );
            }
            assert_eq!(
                CLUSTER_WIDE_KINDS.contains(&id.group_kind.as_str()),
                is_cluster_part(dir),
                "{dir}: {id}: the cluster-wide objects belong in {CLUSTER}, and only they"
            );
        }
    }

    // (b) Each DaemonSet's selector matches its own pod template and no
    // other rack's; so does its PodMonitor's.
    let racks: Vec<(&str, &str, &Rendered)> = OVERLAYS
        .iter()
        .zip(parts.iter().filter(|(dir, _)| !is_cluster_part(dir)))
        .map(|((name, rack), (_, r))| (*name, *rack, r))
        .collect();
    assert_eq!(racks.len(), OVERLAYS.len());
    for (name, rack, r) in &racks {
        let ds = the(&r.daemon_sets, "DaemonSet", name);
        let own = template_labels(ds);
        assert_eq!(
            own.get(RACK_LABEL).map(String::as_str),
            Some(*rack),
            "{name}: the pod template's rack label"
        );
        let selector = &ds.spec.selector;
        assert_eq!(
            selector
                .match_labels
                .as_ref()
                .and_then(|l| l.get(RACK_LABEL))
                .map(String::as_str),
            Some(*rack),
            "{name}: the rack label in the DaemonSet's selector"
        );
        assert!(
            selects(selector, &own),
            "{name}: the DaemonSet's selector {selector:?} does not match its pod template {own:?}"
        );
        for pm in &r.pod_monitors {
            assert!(
                selects(&pm.spec.selector, &own),
                "{name}: the PodMonitor does not select the rack's pods"
            );
        }
        for (other, _, o) in racks.iter().filter(|(n, _, _)| n != name) {
            let theirs = template_labels(the(&o.daemon_sets, "DaemonSet", other));
            assert!(
                !selects(selector, &theirs),
                "{name}'s DaemonSet selects {other}'s pods {theirs:?}"
            );
            for pm in &r.pod_monitors {
                assert!(
                    !selects(&pm.spec.selector, &theirs),
                    "{name}'s PodMonitor selects {other}'s pods: they would be scraped twice"
                );
            }
        }
    }

    // (c) Each on the nodes labelled with its own rack: a node of one
    // rack is selected by that rack's DaemonSet and no other's.
    let mut values = BTreeSet::new();
    for (name, rack, r) in &racks {
        let node_selector = pod(the(&r.daemon_sets, "DaemonSet", name))
            .node_selector
            .clone()
            .unwrap_or_default();
        let value = node_selector
            .get(RACK_LABEL)
            .unwrap_or_else(|| panic!("{name}: no {RACK_LABEL} in the nodeSelector"));
        assert_eq!(value, rack, "{name}: the nodeSelector's rack");
        assert!(values.insert(value.clone()), "{name}: rack {value} twice");
        let node: BTreeMap<String, String> = [
            ("kubernetes.io/os".to_string(), "linux".to_string()),
            (RACK_LABEL.to_string(), rack.to_string()),
        ]
        .into();
        for (other, _, o) in &racks {
            let theirs = pod(the(&o.daemon_sets, "DaemonSet", other))
                .node_selector
                .clone()
                .unwrap_or_default();
            let runs = theirs.iter().all(|(k, v)| node.get(k) == Some(v));
            assert_eq!(
                runs,
                other == name,
                "a node of {name} ({RACK_LABEL}={rack}) and {other}'s nodeSelector {theirs:?}"
            );
        }
    }

    // And the Secrets a rack mounts (created by hand, not rendered) are
    // the rack's own too.
    let mut secrets = BTreeSet::new();
    for (name, rack, r) in &racks {
        let ds = the(&r.daemon_sets, "DaemonSet", name);
        for v in pod(ds).volumes.as_deref().unwrap_or_default() {
            let sources = v.projected.as_ref().and_then(|p| p.sources.clone());
            let names = sources
                .unwrap_or_default()
                .into_iter()
                .filter_map(|s| s.secret.map(|s| s.name))
                .chain(v.secret.as_ref().and_then(|s| s.secret_name.clone()));
            for secret in names {
                assert!(
                    secret.ends_with(&format!("-rack-{rack}")),
                    "{name}: Secret {secret} is not named after the rack"
                );
                assert!(
                    secrets.insert(secret.clone()),
                    "{name}: Secret {secret} is another rack's too"
                );
            }
        }
    }
}

/// A rack that Prometheus scrapes (components/monitoring: its PodMonitor)
/// has holdfast's metrics listener where the PodMonitor asks: the
/// `metrics` port 9180, and `speaker.metrics` on it in the rack's
/// holdfast.toml, on every address (the pod scraped is the node's).
/// Every target gets job="holdfast", which the alerts read; rack-a is
/// scraped.
#[test]
fn every_scraped_rack_serves_metrics_where_its_pod_monitor_scrapes() {
    let rules =
        std::fs::read_to_string(root().join(CLUSTER_MONITORING).join("prometheusrule.yaml"))
            .expect("the PrometheusRule");
    let mut scraped = Vec::new();
    for (name, rack) in OVERLAYS {
        let dir = format!("overlays/{name}");
        let r = overlay(name);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        let (_, config) = embedded_config(&r, &dir);
        let ports = container(ds).ports.clone().unwrap_or_default();
        let port = ports.iter().find(|p| p.name.as_deref() == Some("metrics"));
        let [pm] = r.pod_monitors.as_slice() else {
            assert!(r.pod_monitors.is_empty(), "{dir}: one PodMonitor per rack");
            assert!(port.is_none(), "{dir}: a metrics port and no PodMonitor");
            continue;
        };
        scraped.push(*name);
        assert_eq!(
            pm.metadata.name.as_deref(),
            Some(format!("holdfast-rack-{rack}").as_str()),
            "{dir}"
        );
        let listen = config.speaker.metrics.unwrap_or_else(|| {
            panic!("{dir}: its PodMonitor scrapes the metrics port, but holdfast.toml sets no speaker.metrics: nothing listens there")
        });
        assert!(
            listen.ip().is_unspecified(),
            "{dir}: speaker.metrics {listen}: the PodMonitor scrapes the node's address"
        );
        let port = port.unwrap_or_else(|| panic!("{dir}: no container port named metrics"));
        assert_eq!(port.container_port, 9180, "{dir}");
        assert_eq!(
            port.container_port,
            i32::from(listen.port()),
            "{dir}: the metrics port is speaker.metrics' port"
        );
        let [endpoint] = pm.spec.pod_metrics_endpoints.as_slice() else {
            panic!("{dir}: one endpoint")
        };
        assert_eq!(endpoint.port, "metrics", "{dir}");
        assert_eq!(endpoint.path, "/metrics", "{dir}");
        // job = the value of the pods' label named by jobLabel.
        let job_label = pm.spec.job_label.as_deref().expect("a jobLabel");
        let job = template_labels(ds)
            .get(job_label)
            .cloned()
            .unwrap_or_else(|| panic!("{dir}: the pods have no label {job_label}"));
        assert!(
            rules.contains(&format!("up{{job=\"{job}\"}}")),
            "{dir}: the alerts do not read job=\"{job}\""
        );
    }
    assert!(scraped.contains(&"rack-a"), "{scraped:?}");
}

/// deploy/components/talos-kubeprism, added to a rack: kube's in-cluster
/// configuration (`kube::Config::infer`, as client-go: no kubeconfig, so
/// https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT with the
/// service account's token and CA) reaches KubePrism, Talos' API load
/// balancer on the node's loopback, which the pod shares (hostNetwork).
/// Nothing else of the rack changes.
#[test]
fn the_talos_kubeprism_component_points_the_api_client_at_kubeprism() {
    let dir = deploy::with_components(&root(), "overlays/rack-b", &["components/talos-kubeprism"]);
    let with = deploy::render(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let ds = the(&with.daemon_sets, "DaemonSet", "rack-b + talos-kubeprism");
    let env: BTreeMap<String, Option<String>> = container(ds)
        .env
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|e| (e.name, e.value))
        .collect();
    let host = env.get("KUBERNETES_SERVICE_HOST").cloned().flatten();
    let port = env.get("KUBERNETES_SERVICE_PORT").cloned().flatten();
    assert_eq!(host.as_deref(), Some("localhost"), "{env:?}");
    assert_eq!(
        port.as_deref().map(str::parse::<u16>),
        Some(Ok(7445)),
        "KubePrism's port, as kube parses it: {env:?}"
    );
    assert_eq!(pod(ds).host_network, Some(true), "localhost is the node's");
    assert_ne!(
        pod(ds).automount_service_account_token,
        Some(false),
        "the token and CA kube reads"
    );

    let without = overlay("rack-b");
    let mut base = the(&without.daemon_sets, "DaemonSet", "rack-b").clone();
    let mut patched = ds.clone();
    for d in [&mut base, &mut patched] {
        let c = &mut d.spec.template.spec.as_mut().unwrap().containers[0];
        if let Some(env) = c.env.as_mut() {
            env.retain(|e| !e.name.starts_with("KUBERNETES_SERVICE_"));
        }
    }
    assert_eq!(
        serde_json::to_value(&base).unwrap(),
        serde_json::to_value(&patched).unwrap(),
        "the component changes more than the API server's address"
    );
}

/// deploy/talos/kubelet-graceful-shutdown.yaml, the Talos machine config
/// patch for the kubelet's graceful node shutdown, agrees with every
/// rack's DaemonSet: holdfast is a critical pod (system-node-critical), so
/// it gets at most shutdownGracePeriodCriticalPods of its
/// terminationGracePeriodSeconds, which must all fit, with 5 s for the
/// kubelet to report; and the regular pods' part before it covers each
/// rack's graceful_shutdown_wait, so the drain that "node is shutting
/// down" starts has withdrawn the routes before holdfast is stopped.
#[test]
fn the_talos_kubelet_patch_gives_holdfast_its_whole_grace_period() {
    let path = root().join("deploy/talos/kubelet-graceful-shutdown.yaml");
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(&path).expect("the Talos patch");
    let docs = deploy::documents(&text, &origin).unwrap_or_else(|e| panic!("{e}"));
    let [patch] = docs.as_slice() else {
        panic!("{origin}: one document")
    };
    // A machine config patch of the kubelet's configuration, and only that.
    for (at, value, key) in [
        ("the patch", patch, "machine"),
        ("machine", &patch["machine"], "kubelet"),
        (
            "machine.kubelet",
            &patch["machine"]["kubelet"],
            "extraConfig",
        ),
    ] {
        assert_eq!(
            value
                .as_object()
                .map(|o| o.keys().map(String::as_str).collect::<Vec<_>>()),
            Some(vec![key]),
            "{origin}: {at} sets {key} only"
        );
    }
    let extra = &patch["machine"]["kubelet"]["extraConfig"];
    let keys: BTreeSet<&str> = extra
        .as_object()
        .unwrap_or_else(|| panic!("{origin}: no machine.kubelet.extraConfig"))
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        BTreeSet::from(["shutdownGracePeriod", "shutdownGracePeriodCriticalPods"]),
        "{origin}"
    );
    let duration = |key: &str| {
        let text = extra[key]
            .as_str()
            .unwrap_or_else(|| panic!("{origin}: {key} is not a duration string"));
        config::parse_duration(text).unwrap_or_else(|e| panic!("{origin}: {key}: {e}"))
    };
    let total = duration("shutdownGracePeriod");
    let critical = duration("shutdownGracePeriodCriticalPods");
    assert!(
        !critical.is_zero() && critical < total,
        "{origin}: the kubelet needs both, critical pods' the smaller: {critical:?} of {total:?}"
    );
    for name in overlay_names() {
        let dir = format!("overlays/{name}");
        let r = overlay(name);
        let p = pod(the(&r.daemon_sets, "DaemonSet", &dir));
        let (_, config) = embedded_config(&r, &dir);
        assert_eq!(
            p.priority_class_name.as_deref(),
            Some("system-node-critical"),
            "{dir}: stopped with the critical pods"
        );
        let grace = u64::try_from(p.termination_grace_period_seconds.unwrap_or(30)).unwrap();
        assert!(
            critical.as_secs() >= grace + 5,
            "{dir}: shutdownGracePeriodCriticalPods {critical:?} cuts terminationGracePeriodSeconds {grace} (and 5 s to report)"
        );
        let wait = config.speaker.graceful_shutdown_wait;
        assert!(
            total - critical >= wait,
            "{dir}: the regular pods' {:?} of the shutdown do not cover graceful_shutdown_wait {wait:?}",
            total - critical
        );
    }
}

/// The metric families holdfast declares: those /metrics can carry, and
/// the ones the generated metrics reference (docs/src/reference/metrics.md)
/// lists.
fn documented_metrics() -> BTreeSet<String> {
    holdfast::api::metrics::FAMILIES
        .iter()
        .map(|f| f.name.to_string())
        .collect()
}

fn metric_names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("holdfast_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

fn panels(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    for p in v["panels"].as_array().into_iter().flatten() {
        out.push(p.clone());
        panels(p, out);
    }
}

#[test]
fn the_grafana_dashboard_uses_documented_metrics() {
    let documented = documented_metrics();
    assert!(documented.len() > 20, "{documented:?}");
    let path = root().join("deploy/grafana/holdfast.json");
    let dash: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut all = Vec::new();
    panels(&dash, &mut all);
    let mut used = BTreeSet::new();
    let mut ids = BTreeSet::new();
    for p in &all {
        let id = p["id"].as_i64().expect("every panel has an id");
        assert!(ids.insert(id), "panel id {id} twice");
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().expect("a PromQL expr");
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "panel {}: the datasource is the dashboard's variable",
                p["title"]
            );
            for m in metric_names(expr) {
                let base = m.strip_suffix("_bucket").unwrap_or(&m).to_string();
                assert!(
                    documented.contains(&base),
                    "panel {}: {m} is not a metric holdfast has (docs/src/reference/metrics.md)",
                    p["title"]
                );
                used.insert(base);
            }
        }
    }
    for needed in [
        "holdfast_peer_state",
        "holdfast_peer_established",
        "holdfast_peer_updates_sent_total",
        "holdfast_peer_updates_received_total",
        "holdfast_peer_prefixes_advertised",
        "holdfast_routes_advertised",
        "holdfast_routes_held_down",
        "holdfast_withdrawals_absorbed_total",
        "holdfast_source_healthy",
    ] {
        assert!(used.contains(needed), "the dashboard shows no {needed}");
    }
}

/// The control-plane config (deploy/control-plane, embedded the same in
/// deploy/talos/control-plane.yaml) passes `holdfast check
/// --deny-warnings` on a node: its VIP file and a cluster CA where it
/// names them.
#[test]
fn the_control_plane_config_passes_holdfast_check() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = root().join("deploy/control-plane");
    let text = std::fs::read_to_string(dir.join("holdfast.toml")).unwrap();
    std::fs::copy(dir.join("vips.toml"), tmp.path().join("vips.toml")).unwrap();
    let ca = tmp.path().join("ca.crt");
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", "/CN=kubernetes"])
        .arg("-keyout")
        .arg(tmp.path().join("ca.key"))
        .arg("-out")
        .arg(&ca)
        .output()
        .expect("openssl (scripts/test.sh installs it)");
    assert!(made.status.success(), "{made:?}");
    let on_node = text
        .replace("\"/etc/holdfast/", &format!("\"{}/", tmp.path().display()))
        .replace("/etc/kubernetes/pki/ca.crt", &ca.display().to_string());
    assert_ne!(on_node, text, "the paths the test moves are in the config");
    let config = tmp.path().join("holdfast.toml");
    std::fs::write(&config, on_node).unwrap();
    let (ok, out) = check(&config, &[]);
    assert!(
        ok,
        "deploy/control-plane/holdfast.toml: holdfast check:\n{out}"
    );
}

//! The Kubernetes manifests in `deploy/`: every overlay (and the base) is
//! rendered by the real `kubectl kustomize` (what `kubectl apply -k`
//! sends; the test fails, saying what to install, without kubectl), read
//! with yaml_serde, every object is loaded into its k8s-openapi type with
//! nothing lost, and the promises of
//! deploy/README.md are checked: RBAC exactly as the Kubernetes source
//! needs it, the pod's network, identity, probes, resources and lockdown,
//! NET_BIND_SERVICE only where holdfast listens below 1024, placement per
//! rack, and every embedded holdfast.toml passing the real `holdfast check`.
//! The Grafana dashboard is checked against README.md's metrics table.

mod deploy;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use deploy::Rendered;
use holdfast::config::{self, AddressFamily, Config, Family};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Container, PodSpec, Toleration};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

const BIN: &str = env!("CARGO_BIN_EXE_holdfast");
const OVERLAYS: &[&str] = &["rack-a", "rack-b", "listen-179"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn render(dir: &str) -> Rendered {
    deploy::render(&root().join(dir)).unwrap_or_else(|e| panic!("rendering {dir}: {e}"))
}

fn overlay(name: &str) -> Rendered {
    render(&format!("deploy/overlays/{name}"))
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
fn every_overlay_and_the_base_render_into_typed_objects() {
    let base = render("deploy/base");
    assert_eq!(base.namespaces.len(), 1);
    assert_eq!(base.daemon_sets.len(), 1);
    assert!(
        base.config_maps.is_empty(),
        "the base carries no rack's config"
    );
    for name in OVERLAYS {
        let r = overlay(name);
        let dir = format!("overlays/{name}");
        the(&r.namespaces, "Namespace", &dir);
        the(&r.service_accounts, "ServiceAccount", &dir);
        the(&r.cluster_roles, "ClusterRole", &dir);
        the(&r.cluster_role_bindings, "ClusterRoleBinding", &dir);
        the(&r.daemon_sets, "DaemonSet", &dir);
        the(&r.config_maps, "ConfigMap", &dir);
        the(
            &r.custom_resource_definitions,
            "CustomResourceDefinition",
            &dir,
        );
    }
}

/// The BGPNodeStatus CRD is what holdfast writes and README.md documents:
/// cluster-scoped, v1alpha1 with a status subresource, and printer columns
/// reading fields the writer fills in.
#[test]
fn the_node_status_crd_matches_what_holdfast_writes() {
    use holdfast::source::kubernetes::node_status::{self, NodeStatusBody};
    let r = render("deploy/base");
    let crd = the(
        &r.custom_resource_definitions,
        "CustomResourceDefinition",
        "deploy/base",
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
    let status: holdfast::status::Status =
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
    let mut expected = BTreeSet::new();
    for (group, resource) in [
        ("", "services"),
        ("", "nodes"),
        ("discovery.k8s.io", "endpointslices"),
    ] {
        for verb in ["get", "list", "watch"] {
            expected.insert((group.to_string(), resource.to_string(), verb.to_string()));
        }
    }
    // The recorder writes events.k8s.io/v1 Events only.
    for group in ["events.k8s.io"] {
        for verb in ["create", "patch"] {
            expected.insert((group.to_string(), "events".to_string(), verb.to_string()));
        }
    }
    // This node's BGPNodeStatus: server-side apply of it and its status.
    for resource in ["bgpnodestatuses", "bgpnodestatuses/status"] {
        for verb in ["get", "create", "patch"] {
            expected.insert(("holdfast.dev".into(), resource.into(), verb.into()));
        }
    }
    for dir in ["deploy/base"]
        .into_iter()
        .map(String::from)
        .chain(OVERLAYS.iter().map(|o| format!("deploy/overlays/{o}")))
    {
        let r = render(&dir);
        let role = the(&r.cluster_roles, "ClusterRole", &dir);
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

        let binding = the(&r.cluster_role_bindings, "ClusterRoleBinding", &dir);
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
        let sa = the(&r.service_accounts, "ServiceAccount", &dir);
        let ns = the(&r.namespaces, "Namespace", &dir);
        let subjects = binding.subjects.as_deref().unwrap_or_default();
        assert_eq!(subjects.len(), 1, "{dir}: one subject");
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(Some(&subjects[0].name), sa.metadata.name.as_ref());
        assert_eq!(subjects[0].namespace, sa.metadata.namespace);
        assert_eq!(sa.metadata.namespace, ns.metadata.name);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        assert_eq!(ds.metadata.namespace, ns.metadata.name);
        assert_eq!(pod(ds).service_account_name, sa.metadata.name);
    }
}

#[test]
fn the_namespace_allows_host_network_under_pod_security() {
    for dir in ["deploy/base"]
        .into_iter()
        .map(String::from)
        .chain(OVERLAYS.iter().map(|o| format!("deploy/overlays/{o}")))
    {
        let r = render(&dir);
        let ns = the(&r.namespaces, "Namespace", &dir);
        let labels = ns.metadata.labels.clone().unwrap_or_default();
        for mode in ["enforce", "audit", "warn"] {
            assert_eq!(
                labels
                    .get(&format!("pod-security.kubernetes.io/{mode}"))
                    .map(String::as_str),
                Some("privileged"),
                "{dir}: {mode}"
            );
        }
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
    for name in OVERLAYS {
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
            cm_name.starts_with("holdfast-config-"),
            "{dir}: hash suffix: {cm_name}"
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
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{dir}");
        assert_ne!(sc.privileged, Some(true), "{dir}");
        let caps = sc.capabilities.as_ref().expect("capabilities");
        assert_eq!(
            caps.drop.as_deref(),
            Some(&["ALL".to_string()][..]),
            "{dir}"
        );
        let seccomp = sc
            .seccomp_profile
            .as_ref()
            .or(psc.seccomp_profile.as_ref())
            .map(|s| s.type_.as_str());
        assert_eq!(seccomp, Some("RuntimeDefault"), "{dir}");

        // NET_BIND_SERVICE exactly when holdfast listens below 1024, and
        // then as UID 0: Kubernetes gives added capabilities to root only
        // (no ambient capabilities), so a non-root process could not use it.
        let added: Vec<String> = caps.add.clone().unwrap_or_default();
        let listens_low = config.speaker.listen.is_some_and(|l| l.port() < 1024);
        let uid = sc.run_as_user.or(psc.run_as_user);
        let non_root = sc.run_as_non_root.or(psc.run_as_non_root);
        if listens_low {
            assert_eq!(added, ["NET_BIND_SERVICE"], "{dir}");
            assert_eq!(uid, Some(0), "{dir}: the capability only reaches root");
            assert_eq!(non_root, Some(false), "{dir}");
        } else {
            assert!(added.is_empty(), "{dir}: no capability: {added:?}");
            assert_eq!(uid, Some(65532), "{dir}");
            assert_eq!(non_root, Some(true), "{dir}");
        }
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
        let rack = match *name {
            "rack-a" => "a",
            _ => "b",
        };
        let selector = p.node_selector.clone().unwrap_or_default();
        assert_eq!(
            selector.get("rack").map(String::as_str),
            Some(rack),
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

        // The image is this version, from the overlay's registry.
        assert_eq!(
            c.image.as_deref(),
            Some(
                format!(
                    "registry.example.com/holdfast:{}",
                    env!("CARGO_PKG_VERSION")
                )
                .as_str()
            ),
            "{dir}"
        );
    }
}

#[test]
fn net_bind_service_appears_in_the_listen_overlay_only() {
    let mut with = Vec::new();
    for dir in ["deploy/base"]
        .into_iter()
        .map(String::from)
        .chain(OVERLAYS.iter().map(|o| format!("deploy/overlays/{o}")))
    {
        let r = render(&dir);
        let ds = the(&r.daemon_sets, "DaemonSet", &dir);
        let added = container(ds)
            .security_context
            .as_ref()
            .and_then(|s| s.capabilities.as_ref())
            .and_then(|c| c.add.clone())
            .unwrap_or_default();
        if !added.is_empty() {
            with.push((dir, added));
        }
    }
    assert_eq!(
        with,
        [(
            "deploy/overlays/listen-179".to_string(),
            vec!["NET_BIND_SERVICE".to_string()]
        )]
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
    for name in OVERLAYS {
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
    for name in OVERLAYS {
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

/// Metric names in README.md's metrics table.
fn documented_metrics() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("README.md")).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix("| `holdfast_"))
        .filter_map(|l| l.split('`').next())
        .map(|n| format!("holdfast_{n}"))
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
                    "panel {}: {m} is not in README.md's metrics table",
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

//! A Kubernetes API as a node's holdfast sees it, reached from each node's
//! namespace through a bridge at the same port, with a kubeconfig that
//! points there.
//!
//! Two back ends behind one set of calls ([`Api`]):
//!
//! - [`Api::Real`]: kube-apiserver and etcd of a pinned release
//!   (`scripts/kube-api.sh`), RBAC enforced: holdfast runs with the token
//!   of the ServiceAccount that `deploy/cluster` binds, and the test writes
//!   through the real `kubectl` as the admin. What every end-to-end test
//!   uses unless it needs a fault a real server cannot show on demand.
//! - [`Api::StandIn`]: kube-standin, for those faults only: a list served
//!   empty while the server is healthy, a dropped watch event, a stalled
//!   response ([`Api::standin`] says which test needs it).

use std::cell::RefCell;
use std::path::PathBuf;

use k8s_openapi::Resource;
use kube_standin::StandIn;
use kube_standin::fixtures::node;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use testlab::{Bridge, KubeApiServer, LabDir, Netns, wait_until};

use super::{Holdfast, LONG};

/// The port the stand-in answers on inside every node namespace.
pub const API_PORT: u16 = 6443;

/// The API server behind a test.
pub enum Api {
    Real(RealApi),
    StandIn(StandIn),
}

/// The real API server, written to with the real kubectl.
pub struct RealApi {
    pub server: KubeApiServer,
}

pub struct KubeApi {
    pub api: Api,
    /// For holdfast inside a node namespace.
    pub kubeconfig: PathBuf,
    bridges: RefCell<Vec<Bridge>>,
    _dir: LabDir,
}

impl KubeApi {
    /// A real API server (kube-apiserver and etcd), `deploy/cluster`
    /// applied, namespace `demo` created; no Node and no bridge yet.
    pub fn start() -> KubeApi {
        let server = KubeApiServer::start();
        server.kubectl(&["create", "namespace", "demo"]);
        KubeApi {
            kubeconfig: server.holdfast_kubeconfig(),
            api: Api::Real(RealApi { server }),
            bridges: RefCell::new(Vec::new()),
            _dir: LabDir::new("kube"),
        }
    }

    /// The stand-in, with no Node and no bridge yet: for the faults only
    /// it can show.
    pub fn start_standin() -> KubeApi {
        let api = StandIn::start().expect("the API stand-in");
        let dir = LabDir::new("kube");
        let kubeconfig = dir.write_kubeconfig(API_PORT);
        KubeApi {
            api: Api::StandIn(api),
            kubeconfig,
            bridges: RefCell::new(Vec::new()),
            _dir: dir,
        }
    }

    /// The real API server holding Node `name` (InternalIP `addr`,
    /// `labels`), reachable from `ns`: the usual one-node cluster.
    pub fn for_node(ns: &Netns, name: &str, addr: &str, labels: &[(&str, &str)]) -> KubeApi {
        let k = KubeApi::start();
        k.add_node(ns, name, addr, labels);
        k
    }

    /// [`KubeApi::for_node`] on the stand-in.
    pub fn standin_for_node(
        ns: &Netns,
        name: &str,
        addr: &str,
        labels: &[(&str, &str)],
    ) -> KubeApi {
        let k = KubeApi::start_standin();
        k.add_node(ns, name, addr, labels);
        k
    }

    /// Creates Node `name` and bridges the API into its namespace.
    pub fn add_node(&self, ns: &Netns, name: &str, addr: &str, labels: &[(&str, &str)]) {
        self.api.create(&node(name, addr, labels)).unwrap();
        self.bridge_into(ns);
    }

    /// Makes the API reachable from `ns` at the port its kubeconfig names.
    pub fn bridge_into(&self, ns: &Netns) {
        let bridge = match &self.api {
            Api::Real(r) => testlab::tcp_into_netns(ns, r.server.port(), r.server.addr()),
            Api::StandIn(s) => testlab::tcp_into_netns(ns, API_PORT, s.addr()),
        };
        self.bridges.borrow_mut().push(bridge);
    }

    /// holdfast in `ns` as Node `name`'s, with the Kubernetes source
    /// pointed at the API; returns once the source has synced.
    pub fn holdfast<'a>(&self, ns: &'a Netns, name: &str, config: &str) -> Holdfast<'a> {
        let kc = self.kubeconfig.display().to_string();
        let mut h = Holdfast::start_env(
            ns,
            config,
            "",
            &[],
            &[("KUBECONFIG", &kc), ("NODE_NAME", name)],
        );
        h.wait_synced();
        h
    }
}

/// `services`, or `endpointslices.discovery.k8s.io`: what kubectl takes.
fn resource<K: Resource>() -> String {
    if K::GROUP.is_empty() {
        K::URL_PATH_SEGMENT.to_string()
    } else {
        format!("{}.{}", K::URL_PATH_SEGMENT, K::GROUP)
    }
}

fn namespace_args(namespace: Option<&str>) -> Vec<String> {
    match namespace {
        Some(ns) => vec!["-n".into(), ns.into()],
        None => Vec::new(),
    }
}

fn parse<K: DeserializeOwned>(json: &str) -> Result<K, String> {
    serde_json::from_str(json).map_err(|e| format!("kubectl's output: {e}: {json}"))
}

impl RealApi {
    fn kubectl(&self, args: &[String], stdin: &str) -> Result<String, String> {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.server.try_kubectl_in(&args, stdin)
    }

    /// Writes `obj` with kubectl `verb` (create, replace), then its
    /// `.status` through the status subresource, which create and replace
    /// ignore (a controller writes it so).
    fn write<K: Resource + Serialize + DeserializeOwned>(
        &self,
        verb: &str,
        obj: &K,
    ) -> Result<K, String> {
        let mut value = serde_json::to_value(obj).map_err(|e| e.to_string())?;
        let status = value.as_object_mut().and_then(|o| o.remove("status"));
        let stored = self.kubectl(
            &[
                verb.into(),
                "-f".into(),
                "-".into(),
                "-o".into(),
                "json".into(),
            ],
            &value.to_string(),
        )?;
        match status {
            Some(status) if status != json!({}) && !status.is_null() => {
                let name = value["metadata"]["name"].as_str().unwrap_or_default();
                let namespace = value["metadata"]["namespace"].as_str();
                self.patch_status::<K>(namespace, name, &status)
            }
            _ => parse(&stored),
        }
    }

    fn patch_as<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
        subresource: Option<&str>,
    ) -> Result<K, String> {
        let mut args = vec!["patch".into(), resource::<K>(), name.into()];
        args.extend(namespace_args(namespace));
        if let Some(sub) = subresource {
            args.push(format!("--subresource={sub}"));
        }
        args.extend([
            "--type=merge".into(),
            "-p".into(),
            patch.to_string(),
            "-o".into(),
            "json".into(),
        ]);
        parse(&self.kubectl(&args, "")?)
    }

    fn patch_status<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
        status: &Value,
    ) -> Result<K, String> {
        self.patch_as::<K>(
            namespace,
            name,
            &json!({ "status": status }),
            Some("status"),
        )
    }
}

/// What a test does to the cluster, the same on either back end. Errors
/// are what kubectl (or the stand-in) said.
impl Api {
    pub fn create<K: Resource + Serialize + DeserializeOwned>(&self, obj: &K) -> Result<K, String> {
        match self {
            Api::Real(r) => r.write("create", obj),
            Api::StandIn(s) => s.create(obj).map_err(|e| format!("{e:?}")),
        }
    }

    /// Replaces an existing object (its resourceVersion, if set, must be
    /// current on the real server).
    pub fn replace<K: Resource + Serialize + DeserializeOwned>(
        &self,
        obj: &K,
    ) -> Result<K, String> {
        match self {
            Api::Real(r) => r.write("replace", obj),
            Api::StandIn(s) => s.replace(obj).map_err(|e| format!("{e:?}")),
        }
    }

    /// A JSON merge patch (RFC 7386) of the object.
    pub fn patch<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
        patch: &Value,
    ) -> Result<K, String> {
        match self {
            Api::Real(r) => r.patch_as::<K>(namespace, name, patch, None),
            Api::StandIn(s) => s
                .patch::<K>(namespace, name, patch)
                .map_err(|e| format!("{e:?}")),
        }
    }

    /// A merge patch of `.status` through the status subresource.
    pub fn patch_status<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
        status: &Value,
    ) -> Result<K, String> {
        match self {
            Api::Real(r) => r.patch_status::<K>(namespace, name, status),
            Api::StandIn(s) => s
                .patch_status::<K>(namespace, name, status)
                .map_err(|e| format!("{e:?}")),
        }
    }

    pub fn delete<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<(), String> {
        match self {
            Api::Real(r) => {
                let mut args = vec!["delete".into(), resource::<K>(), name.into()];
                args.extend(namespace_args(namespace));
                args.push("--wait=false".into());
                r.kubectl(&args, "").map(drop)
            }
            Api::StandIn(s) => s
                .delete::<K>(namespace, name)
                .map(drop)
                .map_err(|e| format!("{e:?}")),
        }
    }

    pub fn get<K: Resource + DeserializeOwned>(
        &self,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<K> {
        match self {
            Api::Real(r) => {
                let mut args = vec!["get".into(), resource::<K>(), name.into()];
                args.extend(namespace_args(namespace));
                args.extend(["--ignore-not-found".into(), "-o".into(), "json".into()]);
                let out = r
                    .kubectl(&args, "")
                    .unwrap_or_else(|e| panic!("kubectl get: {e}"));
                (!out.trim().is_empty()).then(|| parse(&out).unwrap())
            }
            Api::StandIn(s) => s.get::<K>(namespace, name),
        }
    }

    /// Every Event, oldest first. (The real server keeps one kind of
    /// object behind both APIs: it is listed as events.k8s.io/v1, the API
    /// holdfast writes.)
    pub fn events(&self) -> Vec<Value> {
        match self {
            Api::Real(r) => {
                let args = ["get", "events.events.k8s.io", "-A", "-o", "json"].map(String::from);
                let out = r
                    .kubectl(&args, "")
                    .unwrap_or_else(|e| panic!("kubectl get events: {e}"));
                let list: Value = parse(&out).unwrap();
                let mut events = list["items"].as_array().cloned().unwrap_or_default();
                events.sort_by_key(|e| {
                    e.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string()
                });
                events
            }
            Api::StandIn(s) => s.events(),
        }
    }

    /// The API server goes away: connections refused, every watch cut.
    pub fn outage(&self) {
        match self {
            Api::Real(r) => r.server.outage(),
            Api::StandIn(s) => {
                s.refuse();
                s.drop_watches();
            }
        }
    }

    /// It comes back having compacted its history: a watch resumed from
    /// before gets 410 Gone and re-lists. Works without an outage too
    /// (the real server restarts).
    pub fn restore_compacted(&self) {
        match self {
            Api::Real(r) => r.server.restore_compacted(),
            Api::StandIn(s) => {
                s.pause();
                s.compact();
                s.drop_watches();
                s.resume();
            }
        }
    }

    /// The stand-in, for a fault only it can show (`what` says which, for
    /// the message if the test runs on the real server).
    pub fn standin(&self, what: &str) -> &StandIn {
        match self {
            Api::StandIn(s) => s,
            Api::Real(_) => panic!("{what} needs kube-standin: start the test with the stand-in"),
        }
    }

    /// The real server, for what only it has (kubectl as the admin, RBAC).
    pub fn real(&self) -> &RealApi {
        match self {
            Api::Real(r) => r,
            Api::StandIn(_) => panic!("this needs the real API server, not kube-standin"),
        }
    }

    /// `kubectl ARGS` as the admin (the real server only).
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.real().server.kubectl(args)
    }
}

impl Holdfast<'_> {
    /// Waits until `status` says the source has synced (the API may not
    /// answer yet right after the start).
    pub fn wait_synced(&mut self) {
        wait_until(LONG, "the Kubernetes source to sync", || {
            if let Some(p) = self.process.as_mut() {
                p.assert_running("waiting for the Kubernetes source to sync");
            }
            let out = self.exec(&[super::BIN, "status", "--json"]);
            let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            (out.status.success() && status["source"]["synced"] == true).then_some(())
        });
    }
}

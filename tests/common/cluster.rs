//! The Kubernetes API stand-in as a node's holdfast sees it: a real
//! list/watch server in the test process, bridged into each node's
//! namespace at the same port, and a kubeconfig that points there.

use std::path::PathBuf;

use kube_standin::StandIn;
use kube_standin::fixtures::node;
use testlab::{Bridge, LabDir, Netns, wait_until};

use super::{Holdfast, LONG};

/// The port the stand-in answers on inside every node namespace.
pub const API_PORT: u16 = 6443;

pub struct KubeApi {
    pub api: StandIn,
    /// For holdfast inside a node namespace (`https://127.0.0.1:API_PORT`).
    pub kubeconfig: PathBuf,
    bridges: Vec<Bridge>,
    _dir: LabDir,
}

impl KubeApi {
    /// The stand-in, with no Node and no bridge yet.
    pub fn start() -> KubeApi {
        let api = StandIn::start().expect("the API stand-in");
        let dir = LabDir::new("kube");
        let kubeconfig = dir.write_kubeconfig(API_PORT);
        KubeApi {
            api,
            kubeconfig,
            bridges: Vec::new(),
            _dir: dir,
        }
    }

    /// The stand-in holding Node `name` (InternalIP `addr`, `labels`),
    /// reachable from `ns`: the usual one-node cluster.
    pub fn for_node(ns: &Netns, name: &str, addr: &str, labels: &[(&str, &str)]) -> KubeApi {
        let mut k = KubeApi::start();
        k.add_node(ns, name, addr, labels);
        k
    }

    /// Creates Node `name` and bridges the API into its namespace.
    pub fn add_node(&mut self, ns: &Netns, name: &str, addr: &str, labels: &[(&str, &str)]) {
        self.api.create(&node(name, addr, labels)).unwrap();
        self.bridges
            .push(testlab::tcp_into_netns(ns, API_PORT, self.api.addr()));
    }

    /// holdfast in `ns` as Node `name`'s, with the Kubernetes source
    /// pointed at the stand-in; returns once the source has synced.
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

impl Holdfast<'_> {
    /// Waits until `status` says the source has synced (the API may not
    /// answer yet right after the start).
    pub fn wait_synced(&mut self) {
        wait_until(LONG, "the Kubernetes source to sync", || {
            if let Some(p) = self.process.as_mut() {
                p.assert_running("waiting for the Kubernetes source to sync");
            }
            let out = self.ns.exec(&[super::BIN, "status", "--json"]);
            let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
            (out.status.success() && status["source"]["synced"] == true).then_some(())
        });
    }
}

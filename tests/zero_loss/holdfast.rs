//! holdfast's side of the zero-loss scenarios (testlab::traffic): each
//! node runs holdfast with the Kubernetes source against the in-process
//! API stand-in (bridged into the node's namespace), which holds a
//! LoadBalancer Service for the VIP with externalTrafficPolicy Local and one
//! endpoint per node. Shared, by path, by `tests/zero_loss.rs` and the
//! benchmark harness (`bench/src/traffic.rs`), so both run the same code.
//!
//! Besides driving holdfast, the operations check what FRR sees at each
//! step (a restart keeps the path as stale; a shutdown marks it
//! GRACEFUL_SHUTDOWN, then withdraws it and sends Cease).

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_standin::StandIn;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service, node};
use serde_json::{Value, json};
use testlab::traffic::{EcmpLab, NODE_ASN, Operations, TOR_ASN, VIP};
use testlab::{Bridge, Frr, LabDir, Netns, NsProcess, Signal, wait_for};

pub const PREFIX: &str = "198.51.100.10/32";
/// holdfast's `graceful_shutdown_wait` in the scenarios.
pub const WAIT: Duration = Duration::from_secs(3);
const API_PORT: u16 = 6443;
const LONG: Duration = Duration::from_secs(60);
/// How long FRR may take to act on what it has already been sent or seen
/// (a withdrawal, a closed connection): far less than restart_time.
const SETTLE: Duration = Duration::from_secs(10);

/// One node's holdfast.
pub struct Daemon {
    ns_name: String,
    dir: LabDir,
    argv: Vec<String>,
    env: Vec<(String, String)>,
    process: Option<NsProcess>,
    runs: usize,
}

impl Daemon {
    fn start(&mut self, ns: &Netns) {
        let log = self.dir.join(&format!("holdfast-{}.log", self.runs));
        self.runs += 1;
        let argv: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.process = Some(NsProcess::start_logged(ns, "holdfast", &argv, &env, &log));
    }

    /// Every run's log, in order.
    pub fn log(&self) -> String {
        (0..self.runs)
            .map(|n| {
                std::fs::read_to_string(self.dir.join(&format!("holdfast-{n}.log")))
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// `GET path` on holdfast's API inside `ns`: (status code, body).
fn http_get(ns: &Netns, path: &str) -> Option<(u16, String)> {
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
    );
    let out = ns.exec(&["bash", "-c", &script]);
    let answer = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

pub struct HoldfastOps<'a> {
    pub lab: &'a EcmpLab,
    pub api: StandIn,
    pub frr: Frr,
    pub daemons: Vec<Daemon>,
    bin: PathBuf,
    _bridges: Vec<Bridge>,
    _dir: LabDir,
}

fn config(addr: Ipv4Addr, tor: Ipv4Addr, hostname: &str) -> String {
    format!(
        "[speaker]\nasn = {NODE_ASN}\nrouter_id = \"{addr}\"\nhostname = \"{hostname}\"\ngraceful_shutdown_wait = \"{}s\"\n\n\
         [[peer]]\nname = \"tor\"\naddress = \"{tor}\"\nasn = {TOR_ASN}\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"2s\"\n\n\
         [[advertisement]]\nname = \"public\"\n",
        WAIT.as_secs()
    )
}

/// The EndpointSlice of Service demo/web: one endpoint per node, node-1's
/// ready as given.
fn slice(node1_ready: bool) -> EndpointSlice {
    let mut one = SliceEndpoint::ready("10.0.0.1", "node-1");
    one.ready = node1_ready;
    endpoint_slice(
        "demo",
        "web",
        "web-1",
        &[one, SliceEndpoint::ready("10.0.0.2", "node-2")],
    )
}

impl<'a> HoldfastOps<'a> {
    /// The API stand-in, FRR forwarding on the ToR, holdfast on every node
    /// (`bin`), each ready.
    pub fn start(lab: &'a EcmpLab, bin: &Path) -> HoldfastOps<'a> {
        testlab::require_root();
        let api = StandIn::start().expect("the API stand-in");
        let dir = LabDir::new("kube");
        let kubeconfig = dir.write_kubeconfig(API_PORT);
        let mut svc = load_balancer_service("demo", "web", &[VIP]);
        svc.spec.as_mut().expect("a spec").external_traffic_policy = Some("Local".into());
        api.create(&svc).expect("the Service");
        api.create(&slice(true)).expect("the EndpointSlice");
        let frr = Frr::start_forwarding(&lab.tor, &lab.tor_conf(""));
        let mut ops = HoldfastOps {
            lab,
            api,
            frr,
            daemons: Vec::new(),
            bin: bin.to_path_buf(),
            _bridges: Vec::new(),
            _dir: dir,
        };
        for (i, n) in lab.nodes.iter().enumerate() {
            let hostname = format!("node-{}", i + 1);
            ops.api
                .create(&node(&hostname, &n.addr.to_string(), &[]))
                .expect("the Node");
            ops._bridges
                .push(testlab::tcp_into_netns(&n.ns, API_PORT, ops.api.addr()));
            let hdir = LabDir::new("holdfast");
            let conf = hdir.write("holdfast.toml", &config(n.addr, n.tor_addr, &hostname));
            let argv = vec![
                ops.bin.display().to_string(),
                "run".into(),
                "--config".into(),
                conf.display().to_string(),
                "--state-dir".into(),
                hdir.join("state").display().to_string(),
                "--log".into(),
                "info,holdfast=debug".into(),
            ];
            let mut d = Daemon {
                ns_name: n.ns.name().to_owned(),
                dir: hdir,
                argv,
                env: vec![
                    ("KUBECONFIG".into(), kubeconfig.display().to_string()),
                    ("NODE_NAME".into(), hostname.clone()),
                ],
                process: None,
                runs: 0,
            };
            d.start(&n.ns);
            ops.daemons.push(d);
        }
        for i in 0..lab.nodes.len() {
            ops.frr
                .wait_established(IpAddr::V4(lab.nodes[i].addr), LONG);
            ops.readyz(i);
        }
        ops
    }

    fn ns(&self, i: usize) -> &'a Netns {
        &self.lab.nodes[i].ns
    }

    fn addr(&self, i: usize) -> Ipv4Addr {
        self.lab.nodes[i].addr
    }

    /// `/readyz` answers 200 (BGP-tied readiness: synced, End-of-RIB sent).
    pub fn readyz(&mut self, i: usize) {
        let ns = self.ns(i);
        let d = &mut self.daemons[i];
        wait_for(LONG, "holdfast's /readyz to answer 200", || {
            if let Some(p) = d.process.as_mut() {
                p.assert_running("waiting for /readyz");
            }
            match http_get(ns, "/readyz") {
                Some((200, _)) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
    }

    /// SIGTERM; holdfast exits cleanly.
    pub fn sigterm(&mut self, i: usize) {
        let d = &mut self.daemons[i];
        let mut p = d.process.take().expect("holdfast is running");
        p.kill(Signal::Term);
        let status = p.wait_exit(Duration::from_secs(30));
        assert!(
            status.success(),
            "holdfast on {} exited {status}",
            d.ns_name
        );
    }

    /// `holdfast drain` or `undrain` on node `i`, on its daemon's socket.
    fn cli(&self, i: usize, command: &str) {
        let bin = self.bin.display().to_string();
        let state = self.daemons[i].dir.join("state").display().to_string();
        let out = self.ns(i).exec(&[&bin, command, "--state-dir", &state]);
        assert!(
            out.status.success(),
            "holdfast {command}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// FRR's paths for the VIP that came from node `i`.
    pub fn paths_from(&self, i: usize) -> Vec<Value> {
        let Some(route) = self.frr.prefix(PREFIX) else {
            return Vec::new();
        };
        let peer = self.addr(i).to_string();
        route["paths"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p["peer"]["peerId"] == peer.as_str())
            .collect()
    }

    /// Graceful restart: FRR keeps node `i`'s path and marks it stale once
    /// it sees the connection close (a moment after the process exits).
    /// A path that disappears was withdrawn: that fails at once.
    fn assert_kept_stale(&self, i: usize, when: &str) {
        wait_for(SETTLE, "FRR to mark the path stale", || {
            let kept = self.paths_from(i);
            assert!(
                kept.len() == 1,
                "{when}: FRR must keep node{}'s path (graceful restart): {kept:?}",
                i + 1
            );
            if kept[0]["stale"] == true {
                Ok(())
            } else {
                Err(format!("{kept:?}"))
            }
        });
    }

    /// Node `i`'s path at FRR carries GRACEFUL_SHUTDOWN (65535:0).
    pub fn wait_marked_graceful_shutdown(&self, i: usize) {
        wait_for(LONG, "the path marked GRACEFUL_SHUTDOWN", || {
            let p = self.paths_from(i);
            let marked = p.iter().any(|p| {
                p["community"]["list"]
                    .as_array()
                    .is_some_and(|l| l.iter().any(|c| c == "gracefulShutdown"))
            });
            if marked {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        });
    }

    fn wait_fresh(&self, i: usize) {
        wait_for(LONG, "the path fresh again", || {
            let p = self.paths_from(i);
            if p.len() == 1 && p[0]["stale"] != true {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        });
    }
}

impl Operations for HoldfastOps<'_> {
    fn name(&self) -> String {
        "holdfast".into()
    }

    fn restart(&mut self, i: usize) {
        self.pod_stop(i);
        self.pod_start(i);
    }

    fn drain(&mut self, i: usize) {
        self.cli(i, "drain");
        self.wait_marked_graceful_shutdown(i);
        // RFC 8326: the traffic leaves while the path is still there.
        let rest: Vec<Ipv4Addr> = (0..self.lab.nodes.len())
            .filter(|&k| k != i)
            .map(|k| self.addr(k))
            .collect();
        self.lab.wait_next_hops(&rest, LONG);
        let p = self.paths_from(i);
        assert!(
            p.len() == 1,
            "the traffic must leave before the path is withdrawn: {p:?}"
        );
    }

    fn undrain(&mut self, i: usize) {
        self.cli(i, "undrain");
    }

    fn endpoint_not_ready(&mut self, i: usize) {
        assert_eq!(i, 0, "the slice's first endpoint is node-1's");
        self.api.apply(&slice(false)).expect("the EndpointSlice");
    }

    fn endpoint_ready(&mut self, i: usize) {
        assert_eq!(i, 0, "the slice's first endpoint is node-1's");
        self.api.apply(&slice(true)).expect("the EndpointSlice");
    }

    fn pod_stop(&mut self, i: usize) {
        self.sigterm(i);
        // No withdrawal: the exit kept the routes through graceful restart.
        self.assert_kept_stale(i, "after a pod's SIGTERM");
    }

    fn pod_start(&mut self, i: usize) {
        let ns = self.ns(i);
        self.daemons[i].start(ns);
        self.readyz(i);
        self.wait_fresh(i);
    }

    fn node_shutdown(&mut self, i: usize) {
        let hostname = format!("node-{}", i + 1);
        let node_addr = IpAddr::V4(self.addr(i));
        let before = self.frr.neighbor(node_addr)["lastNotificationReason"].clone();
        assert_ne!(
            before, "Cease/Administrative Shutdown",
            "no Cease before the shutdown (the restarts were graceful)"
        );
        // kubelet's graceful node shutdown marks the Node...
        self.api
            .patch_status::<Node>(
                None,
                &hostname,
                &json!({ "conditions": [{
                    "type": "Ready",
                    "status": "False",
                    "reason": "KubeletNotReady",
                    "message": "node is shutting down",
                }] }),
            )
            .expect("the Node's status");
        // ...holdfast drains at once...
        self.wait_marked_graceful_shutdown(i);
        let rest: Vec<Ipv4Addr> = (0..self.lab.nodes.len())
            .filter(|&k| k != i)
            .map(|k| self.addr(k))
            .collect();
        self.lab.wait_next_hops(&rest, LONG);
        // ...and kubelet's SIGTERM ends it with a withdrawal, not a restart.
        self.sigterm(i);
        // FRR may still be processing the withdrawal when the process has
        // exited; a path kept by graceful restart would stay (stale) for
        // restart_time (120 s), far beyond this bound.
        wait_for(SETTLE, "FRR to hold no path from the stopped node", || {
            let p = self.paths_from(i);
            assert!(
                !p.iter().any(|p| p["stale"] == true),
                "after the node's holdfast stopped, FRR kept its path through graceful restart: {p:?}"
            );
            if p.is_empty() {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        });
        self.frr.wait_state_not(node_addr, "Established", LONG);
        let n = self.frr.neighbor(node_addr);
        assert_eq!(
            n["lastNotificationReason"], "Cease/Administrative Shutdown",
            "{n}"
        );
        let log = self.daemons[i].log();
        assert!(
            log.contains(
                "exit: routes withdrawn after graceful shutdown (RFC 8326): this node is going away"
            ),
            "{log}"
        );
    }
}

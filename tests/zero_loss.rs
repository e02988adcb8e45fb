//! Zero-loss operations, proven with traffic: two nodes behind one FRR ToR
//! that spreads a shared VIP over them by ECMP (testlab::traffic), each
//! node with a TCP listener on the VIP and holdfast (the Kubernetes source,
//! against the in-process API stand-in bridged into each node's
//! namespace), and a client behind the ToR opening a new connection every
//! 20 ms. Every planned operation must cost no connection:
//!
//! 1. rolling restart: node1's holdfast restarted (SIGTERM, graceful
//!    restart), `/readyz` awaited, then node2's;
//! 2. `holdfast drain` on node1, its listener stopped after the wait;
//! 3. eTP Local: node1's endpoint not ready, then its listener stops;
//! 4. a pod restart: SIGTERM with graceful restart, the listener kept (the
//!    datapath stays up), holdfast started again;
//! 5. node1 shutting down (kubelet's graceful node shutdown marks its
//!    Node): the routes leave gracefully (GRACEFUL_SHUTDOWN, withdrawn,
//!    Cease), then the listener stops.
//!
//! Before each scenario both nodes must be serving (a test that only ever
//! reached node2 would prove nothing); in 2, 3 and 5 the traffic must have
//! left node1 before its listener stops.

mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

use common::*;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube_standin::StandIn;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service, node};
use serde_json::{Value, json};
use testlab::traffic::{Client, EcmpLab, Server, Tally, VIP, now_ms};
use testlab::{Bridge, Frr, LabDir, Signal, wait_for};

const PREFIX: &str = "198.51.100.10/32";
const API_PORT: u16 = 6443;
/// Generous: the client's attempts end within its 2 s timeout.
const SETTLE: Duration = Duration::from_secs(15);

fn holdfast_conf(n: &testlab::traffic::EcmpNode, hostname: &str) -> String {
    format!(
        "[speaker]\nasn = {asn}\nrouter_id = \"{addr}\"\nhostname = \"{hostname}\"\ngraceful_shutdown_wait = \"3s\"\n\n\
         [[peer]]\nname = \"tor\"\naddress = \"{tor}\"\nasn = {tor_asn}\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"2s\"\n\n\
         [[advertisement]]\nname = \"public\"\n",
        asn = testlab::traffic::NODE_ASN,
        addr = n.addr,
        tor = n.tor_addr,
        tor_asn = testlab::traffic::TOR_ASN,
    )
}

/// The slice of Service demo/web: one endpoint per node, node-1's ready as
/// given.
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

/// FRR's paths for the VIP that came from `peer`.
fn paths_from(frr: &Frr, peer: Ipv4Addr) -> Vec<Value> {
    let Some(route) = frr.prefix(PREFIX) else {
        return Vec::new();
    };
    route["paths"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p["peer"]["peerId"] == peer.to_string())
        .collect()
}

fn readyz(h: &Holdfast<'_>) {
    wait_for(LONG, "holdfast's /readyz to answer 200", || {
        let (code, body) = h.http_get("/readyz");
        if code == 200 {
            Ok(())
        } else {
            Err(format!("{code} {body}"))
        }
    });
}

struct Bench<'a> {
    lab: &'a EcmpLab,
    api: StandIn,
    frr: Frr,
    client: Client,
    servers: Vec<Option<Server>>,
    nodes: Vec<Holdfast<'a>>,
    _bridges: Vec<Bridge>,
    _dir: LabDir,
}

impl<'a> Bench<'a> {
    fn start(lab: &'a EcmpLab) -> Bench<'a> {
        testlab::require_root();
        let api = StandIn::start().expect("the API stand-in");
        let dir = LabDir::new("kube");
        let kubeconfig: PathBuf = dir.write(
            "kubeconfig",
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: http://127.0.0.1:{API_PORT}\n\
                 users:\n- name: standin\n  user: {{}}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n\
                 current-context: standin\n"
            ),
        );
        let kc = kubeconfig.display().to_string();
        let mut svc = load_balancer_service("demo", "web", &[VIP]);
        svc.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
        api.create(&svc).unwrap();
        api.create(&slice(true)).unwrap();
        let frr = Frr::start_forwarding(&lab.tor, &lab.tor_conf(""));
        let mut bridges = Vec::new();
        let mut servers = Vec::new();
        let mut nodes = Vec::new();
        for (i, n) in lab.nodes.iter().enumerate() {
            let hostname = format!("node-{}", i + 1);
            api.create(&node(&hostname, &n.addr.to_string(), &[]))
                .unwrap();
            bridges.push(testlab::tcp_into_netns(&n.ns, API_PORT, api.addr()));
            servers.push(Some(Server::start(&n.ns, &n.name)));
            nodes.push(Holdfast::start_env(
                &n.ns,
                &holdfast_conf(n, &hostname),
                "",
                &[],
                &[("KUBECONFIG", &kc), ("NODE_NAME", &hostname)],
            ));
        }
        for n in &lab.nodes {
            frr.wait_established(IpAddr::V4(n.addr), LONG);
        }
        for h in &nodes {
            readyz(h);
        }
        let addrs: Vec<Ipv4Addr> = lab.nodes.iter().map(|n| n.addr).collect();
        lab.wait_next_hops(&addrs, LONG);
        let client = Client::start(
            &lab.client,
            Duration::from_millis(20),
            Duration::from_secs(2),
        );
        Bench {
            lab,
            api,
            frr,
            client,
            servers,
            nodes,
            _bridges: bridges,
            _dir: dir,
        }
    }

    fn addr(&self, i: usize) -> Ipv4Addr {
        self.lab.nodes[i].addr
    }

    fn both_next_hops(&self) {
        self.lab.wait_next_hops(&[self.addr(0), self.addr(1)], LONG);
    }

    /// Both nodes answer connections (and nothing fails) over 1.5 s.
    fn assert_both_serve(&mut self, before: &str) {
        self.both_next_hops();
        let from = now_ms();
        std::thread::sleep(Duration::from_millis(1500));
        let t = self.client.tally(from, now_ms(), SETTLE);
        assert!(
            t.served_by("node1") > 0 && t.served_by("node2") > 0 && t.failures.is_empty(),
            "before {before}, both nodes must serve the VIP: {t:?}"
        );
    }

    /// Waits, then counts what node1 served over 1 s: nothing, once the
    /// traffic has moved.
    fn assert_moved_off_node1(&mut self, during: &str) {
        self.lab.wait_next_hops(&[self.addr(1)], LONG);
        // Connections already in flight to node1 end well within this.
        std::thread::sleep(Duration::from_millis(300));
        let from = now_ms();
        std::thread::sleep(Duration::from_millis(1000));
        let t = self.client.tally(from, now_ms(), SETTLE);
        assert!(
            t.served_by("node1") == 0 && t.served_by("node2") > 0,
            "during {during}, the traffic must have left node1: {t:?}"
        );
    }

    /// node1's path at FRR carries GRACEFUL_SHUTDOWN (65535:0).
    fn wait_marked_graceful_shutdown(&self) {
        wait_for(LONG, "node1's path marked GRACEFUL_SHUTDOWN", || {
            let p = paths_from(&self.frr, self.addr(0));
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

    fn stop_server(&mut self, i: usize) {
        self.servers[i].take().expect("a running listener").stop();
    }

    fn start_server(&mut self, i: usize) {
        let n = &self.lab.nodes[i];
        self.servers[i] = Some(Server::start(&n.ns, &n.name));
    }

    /// SIGTERM: holdfast exits (cleanly).
    fn sigterm(&mut self, i: usize) {
        self.nodes[i].kill(Signal::Term);
        let status = self.nodes[i].wait_exit();
        assert!(
            status.success(),
            "holdfast on node{} exited {status}\n{}",
            i + 1,
            self.nodes[i].log()
        );
    }

    fn restart_holdfast(&mut self, i: usize) {
        self.nodes[i].run(&[]);
        readyz(&self.nodes[i]);
    }

    fn set_node1_ready(&self, status: &str, message: &str) {
        self.api
            .patch_status::<Node>(
                None,
                "node-1",
                &json!({ "conditions": [{
                    "type": "Ready",
                    "status": status,
                    "reason": if status == "True" { "KubeletReady" } else { "KubeletNotReady" },
                    "message": message,
                }] }),
            )
            .unwrap();
    }

    /// Runs `scenario` between two marks of the client's record and
    /// returns what the client saw meanwhile.
    fn window(&mut self, scenario: impl FnOnce(&mut Self)) -> Tally {
        let from = now_ms();
        scenario(self);
        // Traffic goes on a little after the scenario's last step.
        std::thread::sleep(Duration::from_millis(500));
        self.client.tally(from, now_ms(), SETTLE)
    }
}

#[test]
fn planned_operations_cost_no_connection() {
    let lab = EcmpLab::new(2);
    let mut b = Bench::start(&lab);
    let mut results: Vec<(&str, Tally)> = Vec::new();

    // 1. Rolling restart: node1, readiness, then node2.
    b.assert_both_serve("the rolling restart");
    let t = b.window(|b| {
        for i in 0..2 {
            b.sigterm(i);
            // Graceful restart: FRR keeps the path as stale meanwhile.
            let kept = paths_from(&b.frr, b.addr(i));
            assert!(
                kept.len() == 1 && kept[0]["stale"] == true,
                "node{}'s path while its holdfast restarts: {kept:?}",
                i + 1
            );
            b.restart_holdfast(i);
            b.both_next_hops();
        }
    });
    results.push(("1 rolling restart", t));

    // 2. holdfast drain on node1, its listener stopped after the wait.
    b.assert_both_serve("the drain");
    let t = b.window(|b| {
        let out = b.lab.nodes[0].ns.exec(&[BIN, "drain"]);
        assert!(out.status.success(), "holdfast drain: {out:?}");
        b.wait_marked_graceful_shutdown();
        // RFC 8326: the traffic leaves while the path is still there.
        b.lab.wait_next_hops(&[b.addr(1)], LONG);
        let p = paths_from(&b.frr, b.addr(0));
        assert!(
            p.len() == 1,
            "the traffic must leave node1 before its path is withdrawn: {p:?}"
        );
        b.assert_moved_off_node1("the drain");
        wait_for(LONG, "node1's path withdrawn", || {
            let p = paths_from(&b.frr, b.addr(0));
            if p.is_empty() {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        });
        b.stop_server(0);
        std::thread::sleep(Duration::from_secs(1));
        b.start_server(0);
        let out = b.lab.nodes[0].ns.exec(&[BIN, "undrain"]);
        assert!(out.status.success(), "holdfast undrain: {out:?}");
        b.both_next_hops();
    });
    results.push(("2 holdfast drain", t));

    // 3. eTP Local: node1's endpoint not ready, then its listener stops.
    b.assert_both_serve("the endpoint going not ready");
    let t = b.window(|b| {
        b.api.apply(&slice(false)).unwrap();
        b.assert_moved_off_node1("eTP Local's endpoint going not ready");
        b.stop_server(0);
        std::thread::sleep(Duration::from_secs(1));
        b.start_server(0);
        b.api.apply(&slice(true)).unwrap();
        b.both_next_hops();
    });
    results.push(("3 eTP Local endpoint not ready", t));

    // 4. Pod restart: SIGTERM with graceful restart, the listener kept.
    b.assert_both_serve("the pod restart");
    let t = b.window(|b| {
        b.sigterm(0);
        // No withdrawal: FRR keeps node1's path as stale, and node1 keeps
        // serving while no holdfast runs there (the datapath stays up).
        let kept = paths_from(&b.frr, b.addr(0));
        assert!(
            kept.len() == 1 && kept[0]["stale"] == true,
            "node1's path during the pod restart: {kept:?}"
        );
        b.both_next_hops();
        let from = now_ms();
        std::thread::sleep(Duration::from_secs(1));
        let gap = b.client.tally(from, now_ms(), SETTLE);
        assert!(
            gap.served_by("node1") > 0,
            "node1 must keep serving while holdfast is down: {gap:?}"
        );
        b.restart_holdfast(0);
        wait_for(LONG, "node1's path fresh again", || {
            let p = paths_from(&b.frr, b.addr(0));
            if p.len() == 1 && p[0]["stale"] != true {
                Ok(())
            } else {
                Err(format!("{p:?}"))
            }
        });
    });
    results.push(("4 pod restart (SIGTERM, GR)", t));

    // 5. Node1 shutting down: kubelet marks the Node, the drain starts at
    // once; SIGTERM then ends holdfast with a withdrawal, not a restart.
    b.assert_both_serve("the node shutdown");
    let node1 = IpAddr::V4(b.addr(0));
    let before = b.frr.neighbor(node1)["lastNotificationReason"].clone();
    assert_ne!(
        before, "Cease/Administrative Shutdown",
        "no Cease before the shutdown (restarts are graceful)"
    );
    let t = b.window(|b| {
        b.set_node1_ready("False", "node is shutting down");
        b.wait_marked_graceful_shutdown();
        b.assert_moved_off_node1("the node shutdown");
        b.sigterm(0);
        // Withdrawn, not kept stale for restart_time.
        let p = paths_from(&b.frr, b.addr(0));
        assert!(
            p.is_empty(),
            "node1's paths after its holdfast stopped: {p:?}"
        );
        b.stop_server(0);
        std::thread::sleep(Duration::from_secs(1));
    });
    let log = b.nodes[0].log();
    assert!(
        log.contains(
            "exit: routes withdrawn after graceful shutdown (RFC 8326): this node is going away"
        ),
        "{log}"
    );
    b.frr.wait_state_not(node1, "Established", LONG);
    let n = b.frr.neighbor(node1);
    assert_eq!(
        n["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{n}"
    );
    results.push(("5 node shutting down", t));

    println!("scenario | attempts | node1 | node2 | failed | slowest ms");
    for (name, t) in &results {
        println!(
            "{name} | {} | {} | {} | {} | {}",
            t.attempts(),
            t.served_by("node1"),
            t.served_by("node2"),
            t.failures.len(),
            t.slowest_ms
        );
    }
    for (name, t) in &results {
        // At 20 ms a connection, even the shortest scenario (a restart
        // takes about a second) sees dozens.
        assert!(t.attempts() > 25, "{name}: too few attempts counted: {t:?}");
        assert!(
            t.failures.is_empty(),
            "{name}: {} failed connections: {:?}",
            t.failures.len(),
            t.failures
        );
    }
}

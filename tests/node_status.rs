//! `BGPNodeStatus`: holdfast's writer against kube-standin (which serves the
//! CRD from deploy/cluster, created with the real `kubectl create -f`), for
//! the count of its writes the stand-in records; and the real daemon
//! writing it against a real API server (deploy/cluster applied: the CRD's
//! OpenAPI schema validates every server-side apply, RBAC grants only the
//! shipped rules) while FRR peers with it, read back with the real
//! `kubectl get bgpnodestatuses`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use holdfast::report::NodeStatusWriter;
use holdfast::report::status::Status;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube_standin::StandIn;
use kube_standin::fixtures::{load_balancer_service, node};
use serde_json::Value;
use testlab::{Lab, wait_until};

const STATUS_PATH: &str = "/apis/holdfast.dev/v1alpha1/bgpnodestatuses/n1/status";

fn crd_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/cluster/bgpnodestatus-crd.yaml")
}

/// The real kubectl; a missing kubectl fails the test.
fn kubectl(kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .args(args)
        .output()
        .expect("kubectl runs (kubectl 1.32 is installed on these machines)");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Installs the shipped CRD the way a cluster admin would.
fn install_crd(kubeconfig: &Path, cache: &Path) {
    let crd = crd_file().display().to_string();
    let out = kubectl(
        kubeconfig,
        cache,
        &["create", "--validate=false", "-f", &crd],
    );
    assert!(
        out.contains("bgpnodestatuses.holdfast.dev created"),
        "{out}"
    );
}

fn fixture() -> Status {
    serde_json::from_str(include_str!("fixtures/api/status.json")).expect("the status fixture")
}

fn node_statuses(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("holdfast.dev", "v1alpha1", "BGPNodeStatus");
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(&gvk, "bgpnodestatuses"),
    )
}

async fn client(kubeconfig: &Path) -> kube::Client {
    let kc = Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .expect("kube config");
    kube::Client::try_from(config).expect("kube client")
}

async fn eventually<T>(what: &str, mut f: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "not within 30 s: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn status_writes(standin: &StandIn) -> usize {
    standin
        .requests()
        .iter()
        .filter(|r| r.method == "PATCH" && r.path == STATUS_PATH)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_creates_its_object_owned_by_the_node_and_writes_only_changes_rate_limited() {
    let standin = StandIn::start().expect("stand-in");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = standin.kubeconfig(dir.path()).expect("kubeconfig");
    let cache = dir.path().join("cache");
    install_crd(&kubeconfig, &cache);
    let n1 = standin
        .create(&node("n1", "192.0.2.2", &[]))
        .expect("the Node");
    let client = client(&kubeconfig).await;
    let api = node_statuses(&client);

    let shared = Arc::new(Mutex::new(fixture()));
    let view = Arc::clone(&shared);
    let interval = Duration::from_millis(500);
    let _writer = NodeStatusWriter::spawn(
        client.clone(),
        "n1".into(),
        interval,
        Arc::new(move || {
            let now = view.lock().unwrap().clone();
            Box::pin(std::future::ready(Some((now, None))))
        }),
    );

    let obj = eventually("the BGPNodeStatus with its status", async || {
        api.get("n1")
            .await
            .ok()
            .filter(|o| o.data.get("status").is_some())
    })
    .await;
    let owner = &obj.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("Node", "n1"));
    assert_eq!(Some(&owner.uid), n1.metadata.uid.as_ref());
    let status = &obj.data["status"];
    assert_eq!(status["peersEstablished"], 1);
    assert_eq!(status["peersConfigured"], 3);
    assert_eq!(status["routes"]["advertised"], 6);
    assert_eq!(status["peers"][0]["state"], "Established");
    assert_eq!(status["peers"][0]["bfd"], "Up");

    // Quiet: nothing changes, nothing is written.
    standin.clear_requests();
    tokio::time::sleep(interval * 4).await;
    assert_eq!(status_writes(&standin), 0, "writes while nothing changed");

    // A peer flapping every 50 ms for 3 s: at most one write per interval.
    let flapping = Duration::from_secs(3);
    let start = Instant::now();
    let mut up = true;
    while start.elapsed() < flapping {
        {
            let mut s = shared.lock().unwrap();
            up = !up;
            s.peers[0].state = if up { "Established" } else { "Idle" }.into();
            s.peers[0].state_seconds = 0;
            s.peers[0].established_transitions += u64::from(up);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let writes = status_writes(&standin);
    let bound = (flapping.as_millis() / interval.as_millis()) as usize + 2;
    println!("{writes} status writes in {flapping:?} of a peer flapping every 50 ms");
    assert!(
        (2..=bound).contains(&writes),
        "{writes} status writes in {flapping:?} of flapping (60 changes); at most {bound}"
    );
    // The last state is the one that stays.
    shared.lock().unwrap().peers[0].state = "Active".into();
    eventually("the final state", async || {
        let o = api.get("n1").await.ok()?;
        (o.data["status"]["peers"][0]["state"] == "Active").then_some(())
    })
    .await;

    // Deleted by hand: the next change brings it back, owner and all.
    api.delete("n1", &DeleteParams::default())
        .await
        .expect("deleted");
    shared.lock().unwrap().peers[1].state = "Connect".into();
    let back = eventually("the BGPNodeStatus again", async || {
        api.get("n1")
            .await
            .ok()
            .filter(|o| o.data["status"]["peers"][1]["state"] == "Connect")
    })
    .await;
    assert!(back.metadata.owner_references.is_some());
}

/// The daemon with the Kubernetes source, peering with FRR, writes its
/// node's status; `kubectl get bgpnodestatuses` shows the session and the
/// route.
#[test]
fn the_daemon_writes_its_node_status_for_kubectl_get() {
    testlab::require_root();
    const TOR: &str = "192.0.2.1";
    const NODE: &str = "192.0.2.2";
    let lab = Lab::pair();
    // The CRD comes with deploy/cluster, applied by scripts/kube-api.sh.
    let k = cluster::KubeApi::start();
    let host_dir = tempfile::tempdir().expect("temp dir");
    let host_kubeconfig = k.api.real().server.admin_kubeconfig();
    let cache = host_dir.path().join("cache");
    k.add_node(&lab.node, "node-1", NODE, &[]);
    let frr = Tor::new().on(&lab);
    let config = Config::node(65001, NODE)
        .peer(
            Peer::new("tor1", TOR, 65000)
                .hold_time("9s")
                .connect_retry("1s"),
        )
        .kubernetes_source()
        .advertisement(Advertisement::new("public"));
    let holdfast = k.holdfast(&lab.node, "node-1", &config.to_toml());
    let api = &k.api;
    api.create(&load_balancer_service("demo", "web", &["198.51.100.10"]))
        .unwrap();
    frr.wait_prefix("198.51.100.10/32", LONG);

    // The object as kubectl reads it; None until it exists.
    let read = || -> Option<Value> {
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&host_kubeconfig)
            .arg("--cache-dir")
            .arg(&cache)
            .args(["get", "bgpnodestatus", "node-1", "-o", "json"])
            .output()
            .ok()?;
        serde_json::from_slice(&out.stdout).ok()
    };
    let obj = wait_until(
        LONG,
        "the BGPNodeStatus of node-1 with tor1 Established and the route",
        || {
            read().filter(|o| {
                o["status"]["peers"][0]["state"] == "Established"
                    && o["status"]["routes"]["advertised"] == 1
            })
        },
    );
    let status = &obj["status"];
    assert_eq!(status["asn"], 65001);
    assert_eq!(status["routerID"], NODE);
    assert_eq!(status["source"], "Healthy");
    let peer = &status["peers"][0];
    assert_eq!(peer["name"], "tor1");
    assert_eq!(peer["address"], TOR);
    assert_eq!(peer["asn"], 65000);
    assert_eq!(peer["prefixesAdvertised"]["ipv4"], 1);
    assert!(
        peer["since"].as_str().is_some_and(|s| s.ends_with('Z')),
        "{peer}"
    );
    assert_eq!(obj["metadata"]["ownerReferences"][0]["kind"], "Node");

    let table = kubectl(&host_kubeconfig, &cache, &["get", "bgpnodestatuses"]);
    println!("kubectl get bgpnodestatuses:\n{table}");
    let rows: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        rows[0],
        [
            "NAME",
            "ASN",
            "PEERS UP",
            "PEERS",
            "ADVERTISED",
            "HELD",
            "AGE"
        ],
        "{table}"
    );
    assert_eq!(
        &rows[1][..6],
        ["node-1", "65001", "1", "1", "1", "0"],
        "{table}"
    );
    let wide = kubectl(&host_kubeconfig, &cache, &["get", "bgpns", "-o", "wide"]);
    println!("kubectl get bgpns -o wide:\n{wide}");
    assert!(wide.contains("Healthy"), "{wide}");

    // The session goes down: the status says so.
    frr.configure(&["router bgp 65000", &format!("neighbor {NODE} shutdown")]);
    wait_until(
        LONG,
        "tor1 no longer Established in the BGPNodeStatus",
        || {
            read().filter(|o| {
                o["status"]["peers"][0]["state"] != "Established"
                    && o["status"]["peersEstablished"] == 0
            })
        },
    );
    let table = kubectl(&host_kubeconfig, &cache, &["get", "bgpnodestatuses"]);
    println!("after the session went down:\n{table}");
    drop(holdfast);
}

/// With the file source the daemon has no cluster: even with a KUBECONFIG
/// in its environment it never talks to the API server.
#[test]
fn the_file_source_writes_no_node_status() {
    let standin = StandIn::start().expect("stand-in");
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = standin.kubeconfig(dir.path()).expect("kubeconfig");
    let cache = dir.path().join("cache");
    install_crd(&kubeconfig, &cache);
    standin.create(&node("n1", "192.0.2.2", &[])).unwrap();
    standin.clear_requests();
    let config = Config::new()
        .speaker(65001, "192.0.2.2")
        .hostname("n1")
        .peer(
            Peer::new("tor1", "127.0.0.1", 65000)
                .port(free_port())
                .connect_retry("1s"),
        )
        .file_source();
    let mut h = Holdfast::local_unstarted(&config, "[[vip]]\naddress = \"198.51.100.10\"\n");
    h.log_filter = None;
    h.env = vec![
        ("KUBECONFIG".into(), kubeconfig.display().to_string()),
        ("NODE_NAME".into(), "n1".into()),
    ];
    h.run(&[]);
    let api = h.api;
    // Nothing listens at the peer's port: ready once the peer wait is over
    // (twice connect_retry, at least 10 s), well inside the bound. With the
    // default connect_retry that wait was 60 s, the bound itself.
    let ready = wait_until(LONG, "holdfast ready", || {
        let mut s = std::net::TcpStream::connect(api).ok()?;
        use std::io::{Read, Write};
        s.write_all(b"GET /readyz HTTP/1.0\r\n\r\n").ok()?;
        let mut text = String::new();
        s.read_to_string(&mut text).ok()?;
        (text.split_whitespace().nth(1) == Some("200")).then_some(text)
    });
    assert!(ready.contains("ready"));
    // Two write intervals of the Kubernetes source's writer.
    std::thread::sleep(holdfast::report::node_status::DEFAULT_INTERVAL * 2);
    h.kill(testlab::Signal::Kill);
    h.wait_exit();
    let requests = standin.requests();
    assert!(
        requests.is_empty(),
        "the file source reached the API server: {:?}",
        requests
            .iter()
            .map(|r| format!("{} {}", r.method, r.path))
            .collect::<Vec<_>>()
    );
}

//! holdfast with the Kubernetes source, against the in-process API
//! stand-in (reached from the node namespace through a bridge), at each of
//! `--kube-sizes`: N LoadBalancer Services (one ingress IP each) and N
//! EndpointSlices of 5 endpoints each spread over 50 nodes; holdfast runs
//! as node 0. Per N: RSS after load and at its peak, CPU seconds and wall
//! time from start to all routes at FRR. At 10 k (or the only size), the
//! one-VIP latency trials: a Service's status.loadBalancer.ingress patched
//! → the route at FRR.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube_standin::StandIn;
use kube_standin::fixtures::{SliceEndpoint, endpoint_slice, load_balancer_service, node};
use serde_json::json;
use testlab::LabDir;

use crate::report::{KubeFootprint, Latency};
use crate::speakers::{NODE, TOR, bulk_addr, start_holdfast};
use crate::{Args, Lcg, Receiver, percentiles, procstat, wait_count, wait_prefix};

const API_PORT: u16 = 6443;
/// The cluster's nodes; this one is `node-0`.
pub const NODES: usize = 50;
pub const ENDPOINTS_PER_SLICE: usize = 5;
/// The size the latency trials run at (when it is among the sizes).
pub const LATENCY_AT: usize = 10_000;

fn config() -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"node-0\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\n\
         keepalive = \"3s\"\nconnect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"30s\"\n\n\
         [[advertisement]]\nname = \"public\"\n"
    )
}

/// Service `i`: odd ones have `externalTrafficPolicy: Cluster` (every node
/// advertises them), even ones `Local` (advertised where an endpoint is).
fn local_policy(i: usize) -> bool {
    i.is_multiple_of(2)
}

/// The nodes of slice `i`'s endpoints: `i % 10`, `i % 10 + 10`, …, so each
/// node holds an endpoint of one slice in ten, and node 0 of slices
/// 0, 10, 20, ….
fn slice_nodes(i: usize) -> impl Iterator<Item = usize> {
    (0..ENDPOINTS_PER_SLICE).map(move |k| (i % 10 + 10 * k) % NODES)
}

/// How many of the first `n` Services node 0 advertises.
fn advertised(n: usize) -> usize {
    (0..n)
        .filter(|&i| !local_policy(i) || slice_nodes(i).any(|node| node == 0))
        .count()
}

fn populate(api: &StandIn, n: usize) {
    api.create(&node("node-0", NODE, &[])).unwrap();
    for k in 1..NODES {
        api.create(&node(&format!("node-{k}"), &format!("10.9.0.{k}"), &[]))
            .unwrap();
    }
    for i in 0..n {
        let a = bulk_addr(i);
        let ip = format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
        let name = format!("svc-{i}");
        let mut service = load_balancer_service("bench", &name, &[&ip]);
        if local_policy(i) {
            service.spec.as_mut().unwrap().external_traffic_policy = Some("Local".into());
        }
        api.create(&service).unwrap();
        let endpoints: Vec<SliceEndpoint> = slice_nodes(i)
            .enumerate()
            .map(|(k, node)| {
                let e = i * ENDPOINTS_PER_SLICE + k;
                SliceEndpoint::ready(
                    &format!("10.{}.{}.{}", 64 + (e >> 16), (e >> 8) & 255, e & 255),
                    &format!("node-{node}"),
                )
            })
            .collect();
        api.create(&endpoint_slice(
            "bench",
            &name,
            &format!("{name}-abcde"),
            &endpoints,
        ))
        .unwrap();
    }
}

pub fn run(rx: &mut Receiver, args: &Args) -> (Option<Latency>, Vec<KubeFootprint>) {
    let mut latency = None;
    let mut footprints = Vec::new();
    let latency_at = if args.kube_sizes.contains(&LATENCY_AT) {
        Some(LATENCY_AT)
    } else {
        args.kube_sizes.first().copied()
    };
    for &n in &args.kube_sizes {
        let trials = args.wants("latency") && Some(n) == latency_at;
        let (l, f) = run_size(rx, args, n, trials);
        latency = latency.or(l);
        footprints.push(f);
    }
    (latency, footprints)
}

fn run_size(
    rx: &mut Receiver,
    args: &Args,
    n: usize,
    trials: bool,
) -> (Option<Latency>, KubeFootprint) {
    rx.wait_empty();
    let api = StandIn::start().expect("the API stand-in");
    populate(&api, n);
    let routes = advertised(n);
    let bridge = testlab::tcp_into_netns(&rx.lab.node, API_PORT, api.addr());
    let dir = LabDir::new("kube");
    let kubeconfig = dir.write_kubeconfig(API_PORT);
    let config = dir.write("holdfast.toml", &config());
    let kc = kubeconfig.display().to_string();
    let env = [("KUBECONFIG", kc.as_str()), ("NODE_NAME", "node-0")];
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let t0 = Instant::now();
    let mut process = start_holdfast(&rx.lab.node, &args.holdfast, &dir, &config, &env);
    let pid = process.pid();
    wait_count(rx, routes as u64);
    let loaded = t0.elapsed();
    let cpu = procstat::cpu_seconds(pid);
    rx.settled_updates(Duration::from_secs(2));
    let (_, at_frr) = rx.summary();
    assert_eq!(
        at_frr, routes as u64,
        "FRR has other than the advertised routes"
    );
    std::thread::sleep(Duration::from_secs(10));
    let footprint = KubeFootprint {
        services: n,
        slices: n,
        endpoints: n * ENDPOINTS_PER_SLICE,
        routes,
        rss_kib: procstat::rss_kib(pid),
        rss_anon_kib: procstat::rss_anon_kib(pid),
        peak_rss_kib: procstat::peak_rss_kib(pid),
        cpu_secs: cpu,
        load_secs: loaded.as_secs_f64(),
        loadavg: load
            .split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    };
    eprintln!("kube footprint: {footprint:?}");

    let latency = trials.then(|| {
        // Services for the trials, without an address yet.
        for i in 0..args.trials {
            api.create(&load_balancer_service("bench", &format!("lat-{i}"), &[]))
                .unwrap();
        }
        std::thread::sleep(Duration::from_secs(2));
        let mut rng = Lcg(11);
        let mut samples = Vec::new();
        for i in 0..args.trials {
            let ip = format!("198.51.100.{}", i % 254 + 1);
            let t0 = Instant::now();
            api.patch_status::<Service>(
                Some("bench"),
                &format!("lat-{i}"),
                &json!({ "loadBalancer": { "ingress": [{ "ip": ip, "ipMode": "VIP" }] } }),
            )
            .unwrap();
            wait_prefix(rx, &format!("{ip}/32"), t0);
            samples.push(t0.elapsed().as_secs_f64() * 1000.0);
            std::thread::sleep(Duration::from_millis(rng.next_ms(50, 250)));
        }
        let l = percentiles(samples);
        eprintln!("latency kube at {n}: {l:?}");
        l
    });
    process.stop();
    drop(bridge);
    (latency, footprint)
}

//! holdfast with the Kubernetes source, against the in-process API
//! stand-in (reached from the node namespace through a bridge): RSS with
//! 1,000 Services and 1,000 EndpointSlices, then one-VIP latency trials
//! (a Service's status.loadBalancer.ingress patched → the route at FRR).

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
pub const SERVICES: usize = 1_000;

fn config() -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"node-1\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\n\
         keepalive = \"3s\"\nconnect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\n\
         [source]\nkind = \"kubernetes\"\n\n\
         [stability]\nwithdraw_hold_down = \"30s\"\n\n\
         [[advertisement]]\nname = \"public\"\n"
    )
}

pub fn run(rx: &mut Receiver, args: &Args) -> (Option<Latency>, Option<KubeFootprint>) {
    rx.wait_empty();
    let api = StandIn::start().expect("the API stand-in");
    api.create(&node("node-1", NODE, &[])).unwrap();
    for i in 0..SERVICES {
        let a = bulk_addr(i);
        let ip = format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
        let name = format!("svc-{i}");
        api.create(&load_balancer_service("bench", &name, &[&ip]))
            .unwrap();
        let endpoint = format!("192.0.2.{}", 10 + i % 200);
        api.create(&endpoint_slice(
            "bench",
            &name,
            &format!("{name}-abcde"),
            &[SliceEndpoint::ready(&endpoint, "node-1")],
        ))
        .unwrap();
    }
    let bridge = testlab::tcp_into_netns(&rx.lab.node, API_PORT, api.addr());
    let dir = LabDir::new("kube");
    let kubeconfig = dir.write_kubeconfig(API_PORT);
    let config = dir.write("holdfast.toml", &config());
    let kc = kubeconfig.display().to_string();
    let env = [("KUBECONFIG", kc.as_str()), ("NODE_NAME", "node-1")];
    let t0 = Instant::now();
    let mut process = start_holdfast(&rx.lab.node, &args.holdfast, &dir, &config, &env);
    wait_count(rx, SERVICES as u64);
    let loaded = t0.elapsed();
    rx.settled_updates(Duration::from_secs(2));
    let pid = process.pid();
    std::thread::sleep(Duration::from_secs(10));
    let footprint = KubeFootprint {
        services: SERVICES,
        slices: SERVICES,
        rss_kib: procstat::rss_kib(pid),
        rss_anon_kib: procstat::rss_anon_kib(pid),
        peak_rss_kib: procstat::peak_rss_kib(pid),
        load_secs: loaded.as_secs_f64(),
    };
    eprintln!("kube footprint: {footprint:?}");

    let latency = args.wants("latency").then(|| {
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
        eprintln!("latency kube: {l:?}");
        l
    });
    process.stop();
    drop(bridge);
    (latency, Some(footprint))
}

//! Idle wake-ups of holdfast with two peers: two neighbors of one FRR
//! bgpd (the node's two addresses, one session each, like bench/scrape.sh
//! --idle), N routes loaded into both, then nothing changes. Run once
//! with the benchmark's 3 s keepalives (hold 9 s) and once with
//! holdfast's defaults (keepalive 30 s, hold 90 s); each run counts the
//! context switches of every thread, so the report says which one wakes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use testlab::{Frr, Lab, LabDir};

use crate::speakers::{bulk_prefixes, start_holdfast, vip_entries};
use crate::{Args, procstat};

/// The N of the two-peer idle run.
pub const N: usize = 1_000;

/// The node's second address and the router's, for the second session.
const NODE2: &str = "192.0.2.4";
const TOR2: &str = "192.0.2.3";

#[derive(Debug)]
pub struct TwoPeers {
    /// Keepalive and hold time, seconds (both ends).
    pub keepalive: u64,
    pub hold: u64,
    pub secs: u64,
    pub wakeups_per_sec: f64,
    pub cpu_percent: f64,
    /// Wake-ups per second by thread name (threads of the same name
    /// summed, threads that ended during the run included).
    pub by_thread: BTreeMap<String, f64>,
    /// Threads at the end, and threads seen at all during the run.
    pub threads_end: u64,
    pub threads_seen: usize,
}

fn frr_conf(keepalive: u64, hold: u64) -> String {
    let mut c = "frr defaults datacenter\nrouter bgp 65000\n bgp router-id 192.0.2.1\n \
                 no bgp ebgp-requires-policy\n no bgp network import-check\n"
        .to_string();
    for node in ["192.0.2.2", NODE2] {
        c.push_str(&format!(
            " neighbor {node} remote-as 65001\n neighbor {node} timers {keepalive} {hold}\n \
             neighbor {node} timers connect 1\n neighbor {node} graceful-restart-disable\n"
        ));
    }
    c.push_str("exit\n");
    c
}

fn holdfast_conf(vips: &std::path::Path, keepalive: u64, hold: u64) -> String {
    let mut c = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nhostname = \"bench-node\"\n\n"
        .to_string();
    for (name, tor, node) in [("tor1", "192.0.2.1", "192.0.2.2"), ("tor2", TOR2, NODE2)] {
        c.push_str(&format!(
            "[[peer]]\nname = \"{name}\"\naddress = \"{tor}\"\nsource_address = \"{node}\"\n\
             asn = 65000\nhold_time = \"{hold}s\"\nkeepalive = \"{keepalive}s\"\n\
             connect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\n"
        ));
    }
    c.push_str(&format!(
        "[source]\nkind = \"file\"\npath = \"{}\"\n\n[[advertisement]]\nname = \"public\"\n",
        vips.display()
    ));
    c
}

/// (thread name, context switches) of every thread of `pid` now, by TID.
fn per_thread(pid: u32) -> BTreeMap<u32, (String, u64)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let Ok(status) = std::fs::read_to_string(t.path().join("status")) else {
            // Ended between the listing and the read.
            continue;
        };
        let switches: u64 = status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        out.insert(tid, (comm.trim().to_owned(), switches));
    }
    out
}

/// One run: both sessions up with N routes in FRR from each, 3 s of rest,
/// then `args.idle_secs` of counting.
fn run_one(args: &Args, keepalive: u64, hold: u64) -> TwoPeers {
    let lab = Lab::pair();
    lab.node
        .add_address(testlab::lab::pair::NODE_IF, &format!("{NODE2}/24"));
    lab.router
        .add_address(testlab::lab::pair::ROUTER_IF, &format!("{TOR2}/24"));
    let frr = Frr::start(&lab.router, &frr_conf(keepalive, hold));
    let dir = LabDir::new("holdfast-idle");
    let vips = dir.write("vips.toml", &vip_entries(&bulk_prefixes(N)));
    let config = dir.write("holdfast.toml", &holdfast_conf(&vips, keepalive, hold));
    let process = start_holdfast(&lab.node, &args.holdfast, &dir, &config, &[]);
    let pid = process.pid();
    testlab::wait_until(
        Duration::from_secs(120),
        "N routes in FRR from both sessions",
        || {
            let j = frr.json("show bgp ipv4 unicast summary json");
            let peers = j.get("ipv4Unicast").unwrap_or(&j)["peers"]
                .as_object()?
                .clone();
            let full = peers.len() == 2
                && peers
                    .values()
                    .all(|p| p["pfxRcd"].as_u64() == Some(N as u64));
            full.then_some(())
        },
    );
    std::thread::sleep(Duration::from_secs(3));
    let first = per_thread(pid);
    let (c0, x0, t0) = (
        procstat::cpu_seconds(pid),
        procstat::context_switches(pid),
        Instant::now(),
    );
    // Sampled every 100 ms so that a thread that ends during the run
    // (tokio's blocking-pool threads do after 10 s idle) still counts.
    let mut last = first.clone();
    let end = t0 + Duration::from_secs(args.idle_secs);
    // Threads that ended: their last sample stands, and the switches
    // after it are lost (the exit itself is one, counted here).
    let mut ended = std::collections::BTreeSet::new();
    while Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
        let now = per_thread(pid);
        for tid in last.keys() {
            if !now.contains_key(tid) {
                ended.insert(*tid);
            }
        }
        for (tid, v) in now {
            last.insert(tid, v);
        }
    }
    let lost_at_exit = ended.len() as u64;
    let dt = t0.elapsed().as_secs_f64();
    let total_now = procstat::context_switches(pid);
    let cpu = procstat::cpu_seconds(pid) - c0;
    let mut by_thread: BTreeMap<String, f64> = BTreeMap::new();
    for (tid, (comm, n)) in &last {
        let before = first.get(tid).map_or(0, |(_, b)| *b);
        let d = n.saturating_sub(before);
        if d > 0 {
            *by_thread.entry(comm.clone()).or_default() += d as f64 / dt;
        }
    }
    let summed: f64 = by_thread.values().sum::<f64>() * dt;
    // The live threads' total (procstat) misses the ended threads; the
    // per-thread samples miss their last switches: report the larger.
    let live = total_now.saturating_sub(x0) as f64;
    let wakeups = live.max(summed + lost_at_exit as f64) / dt;
    let r = TwoPeers {
        keepalive,
        hold,
        secs: args.idle_secs,
        wakeups_per_sec: wakeups,
        cpu_percent: cpu / dt * 100.0,
        by_thread,
        threads_end: procstat::threads(pid),
        threads_seen: last.len(),
    };
    eprintln!("idle, holdfast with two peers, timers {keepalive}/{hold} s: {r:?}");
    drop(process);
    drop(frr);
    r
}

/// Both timer settings: the benchmark's (3/9 s) and holdfast's defaults
/// (30/90 s).
pub fn run(args: &Args) -> Vec<TwoPeers> {
    vec![run_one(args, 3, 9), run_one(args, 30, 90)]
}

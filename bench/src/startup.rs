//! Start to first route: holdfast spawned with N VIPs (what a pod restart
//! costs before the graceful-restart refresh), its session's first packets
//! timed on the wire at FRR's end against the spawn, on one clock
//! (CLOCK_REALTIME: tcpdump's timestamps and `SystemTime::now()`).
//!
//! FRR is passive for the neighbor, so the connection is holdfast's own
//! and its SYN marks when holdfast was ready to talk. The marks: SYN, OPEN
//! sent, OPEN received (FRR's, which may come first: FRR sends it as soon
//! as it accepts, RFC 4271 §8.2.2 Active), Established (FRR's first
//! KEEPALIVE, which moves holdfast OpenConfirm → Established, RFC 4271
//! §8.2.2), first UPDATE, End-of-RIB (RFC 4724 §2).

use std::fmt::Write;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use testlab::lab::pair::ROUTER_IF;
use testlab::{Frr, Lab, LabDir};

use crate::capture::{self, Capture, Message, Segment, now_ns};
use crate::speakers::{self, NODE, TOR};
use crate::{Args, percentiles};

/// The marks (OPEN received may precede OPEN sent).
pub const MARKS: [&str; 6] = [
    "TCP SYN",
    "OPEN sent",
    "OPEN received",
    "Established",
    "first UPDATE",
    "End-of-RIB",
];

#[derive(Debug)]
pub struct Startup {
    pub routes: usize,
    /// Per trial, milliseconds from the spawn to each of [`MARKS`].
    pub trials: Vec<[f64; 6]>,
    pub load: String,
}

fn frr_conf() -> String {
    format!(
        "frr defaults datacenter\nrouter bgp 65000\n bgp router-id {TOR}\n \
         no bgp ebgp-requires-policy\n no bgp network import-check\n \
         neighbor {NODE} remote-as 65001\n neighbor {NODE} timers 3 9\n neighbor {NODE} passive\n\
         exit\n"
    )
}

/// Milliseconds from `spawn` to each mark, from the capture.
fn marks(spawn: u64, segments: &[Segment], messages: &[Message]) -> [f64; 6] {
    let node: std::net::Ipv4Addr = NODE.parse().unwrap();
    let ms = |ns: u64| (ns as f64 - spawn as f64) / 1e6;
    let syn = segments
        .iter()
        .find(|s| s.src == node && s.syn && !s.ack)
        .map(|s| s.ns)
        .unwrap_or_else(|| {
            panic!(
                "no SYN from holdfast among the {} segments captured: {:?}",
                segments.len(),
                &segments[..segments.len().min(5)]
            )
        });
    let from = |src_node: bool, kind: u8, after: u64| {
        messages
            .iter()
            .find(|m| (m.src == node) == src_node && m.kind == kind && m.ns >= after)
            .map(|m| m.ns)
    };
    let open_sent = from(true, capture::OPEN, syn).expect("no OPEN from holdfast");
    let open_rcvd = from(false, capture::OPEN, syn).expect("no OPEN from FRR");
    let established =
        from(false, capture::KEEPALIVE, open_rcvd).expect("no KEEPALIVE from FRR after its OPEN");
    let first_update = messages
        .iter()
        .find(|m| m.src == node && m.kind == capture::UPDATE && !m.is_end_of_rib())
        .map(|m| m.ns)
        .expect("no UPDATE with routes from holdfast");
    let eor = messages
        .iter()
        .find(|m| m.src == node && m.is_end_of_rib())
        .map(|m| m.ns)
        .expect("no End-of-RIB from holdfast");
    assert!(
        !messages.iter().any(|m| m.kind == capture::NOTIFICATION),
        "a NOTIFICATION during the start"
    );
    [
        ms(syn),
        ms(open_sent),
        ms(open_rcvd),
        ms(established),
        ms(first_update),
        ms(eor),
    ]
}

pub fn run(args: &Args) -> Startup {
    let n = args.start_size;
    let lab = Lab::pair();
    let frr = Frr::start(&lab.router, &frr_conf());
    let node: IpAddr = NODE.parse().unwrap();
    let dir = LabDir::new("holdfast-start");
    let vips = dir.write(
        "vips.toml",
        &speakers::vip_entries(&speakers::bulk_prefixes(n)),
    );
    let config = dir.write("holdfast.toml", &speakers::holdfast_config(&vips));
    let mut trials = Vec::new();
    for trial in 0..args.start_trials {
        // FRR has seen the last session end and waits for the next.
        frr.wait_state_not(node, "Established", Duration::from_secs(60));
        std::thread::sleep(Duration::from_secs(1));
        // A fresh state directory each time: nothing carried over.
        let run_dir = LabDir::new("holdfast-start-run");
        let cap = Capture::start(&lab.router, ROUTER_IF);
        let spawn = now_ns();
        let mut holdfast =
            speakers::start_holdfast(&lab.node, &args.holdfast, &run_dir, &config, &[]);
        let t0 = Instant::now();
        loop {
            holdfast.assert_running("starting with its routes");
            let v = frr.json("show bgp ipv4 unicast summary json");
            if v["peers"][NODE]["pfxRcd"].as_u64() == Some(n as u64) {
                break;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "FRR never held the {n} routes: {v}\n{}",
                holdfast.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The End-of-RIB follows the last UPDATE at once.
        std::thread::sleep(Duration::from_millis(500));
        let (segments, messages) = cap.stop();
        drop(holdfast);
        let m = marks(spawn, &segments, &messages);
        eprintln!("start trial {trial}: {m:?} ms from the spawn");
        trials.push(m);
    }
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    drop(frr);
    drop(lab);
    Startup {
        routes: n,
        trials,
        load,
    }
}

pub fn target_rows(st: &Startup) -> Vec<(String, String, Option<bool>)> {
    if st.trials.is_empty() {
        return Vec::new();
    }
    let first = percentiles(st.trials.iter().map(|t| t[4]).collect());
    vec![(
        format!(
            "start → first UPDATE at {} VIPs: measured and reported",
            crate::report::n_label(st.routes)
        ),
        format!(
            "p50 {:.0} ms, max {:.0} ms ({} trials)",
            first.p50_ms, first.max_ms, first.trials
        ),
        Some(true),
    )]
}

pub fn render(s: &mut String, st: &Startup) {
    if st.trials.is_empty() {
        return;
    }
    writeln!(
        s,
        "\n## Start to first route\n\n\
         holdfast spawned (`ip netns exec` in the node namespace, a fresh state directory) with {} VIPs \
         and one peer; FRR is passive for the neighbor, so the connection is holdfast's. Each mark is \
         the kernel timestamp of the packet at FRR's end of the link (`tcpdump`, CLOCK_REALTIME) minus \
         the harness's CLOCK_REALTIME just before the spawn: TCP SYN (holdfast connects), OPEN sent, \
         OPEN received (FRR's), Established (FRR's first KEEPALIVE: holdfast OpenConfirm → Established, \
         RFC 4271 §8.2.2), first UPDATE with routes, End-of-RIB (RFC 4724 §2); a message's time is that of the segment \
         carrying its first octet, so messages written together share one. FRR sends its OPEN as soon \
         as it accepts, so \"OPEN received\" can precede \"OPEN sent\". The spawn includes \
         `ip netns exec`'s own start. {} trials, load average {} at the end. No target: reported.\n",
        st.routes,
        st.trials.len(),
        st.load
    )
    .unwrap();
    writeln!(s, "| mark | p50 | max |\n|---|---|---|").unwrap();
    for (i, mark) in MARKS.iter().enumerate() {
        let l = percentiles(st.trials.iter().map(|t| t[i]).collect());
        writeln!(s, "| {mark} | {:.1} ms | {:.1} ms |", l.p50_ms, l.max_ms).unwrap();
    }
}

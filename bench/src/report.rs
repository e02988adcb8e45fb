//! The results, and BENCHMARKS.md made from them.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::Args;
use crate::speakers::Kind;

#[derive(Debug, Default)]
pub struct Results {
    pub machine: BTreeMap<&'static str, String>,
    pub command: String,
    /// (speaker, N) → figures.
    pub bulk: BTreeMap<(String, usize), Bulk>,
    pub latency_file: Option<Latency>,
    pub latency_kube: Option<Latency>,
    pub kube_footprints: Vec<KubeFootprint>,
    pub codec: Option<Codec>,
    pub scrapes: Option<crate::scrapes::Figures>,
    pub startup: Option<crate::startup::Startup>,
    /// holdfast idle with two peers, by timers (bench/src/idle.rs).
    pub idle_two_peers: Vec<crate::idle::TwoPeers>,
}

#[derive(Debug)]
pub struct Bulk {
    pub established: Option<Duration>,
    pub all: Option<Duration>,
    pub updates: u64,
    pub bytes: u64,
    pub rss_kib: u64,
    pub rss_anon_kib: u64,
    pub peak_rss_kib: u64,
    pub cpu_to_load: f64,
    pub idle: Option<Idle>,
    pub churn_updates: Option<u64>,
    /// Every run's time to all routes, when the cell ran more than once
    /// (the row's other figures are those of the median run).
    pub runs: Vec<Option<Duration>>,
}

impl Bulk {
    /// The run with the median time to all routes (a run that never got
    /// there counts as the slowest), its figures for the row; the peak RSS
    /// is the largest of all runs', and the idle and churn figures are the
    /// first run's, the one that measured them.
    pub fn median_of(mut runs: Vec<Bulk>) -> Bulk {
        assert!(!runs.is_empty(), "a bulk cell without a run");
        let times: Vec<Option<Duration>> = runs.iter().map(|b| b.all).collect();
        let peak = runs.iter().map(|b| b.peak_rss_kib).max().unwrap_or(0);
        let idle = runs[0].idle.take();
        let churn = runs[0].churn_updates.take();
        let mut order: Vec<usize> = (0..runs.len()).collect();
        order.sort_by_key(|&i| runs[i].all.unwrap_or(Duration::MAX));
        let mut median = runs.swap_remove(order[order.len() / 2]);
        median.peak_rss_kib = peak;
        median.idle = idle;
        median.churn_updates = churn;
        if times.len() > 1 {
            median.runs = times;
        }
        median
    }

    /// "66–122 ms of 5" for a cell run more than once.
    fn spread(&self) -> Option<String> {
        if self.runs.is_empty() {
            return None;
        }
        let lo = self
            .runs
            .iter()
            .min_by_key(|t| t.unwrap_or(Duration::MAX))?;
        let hi = self
            .runs
            .iter()
            .max_by_key(|t| t.unwrap_or(Duration::MAX))?;
        Some(format!(
            "{}–{} of {}",
            secs(*lo),
            secs(*hi),
            self.runs.len()
        ))
    }
}

#[derive(Debug)]
pub struct Idle {
    pub cpu_percent: f64,
    pub wakeups_per_sec: f64,
    pub rss_kib: u64,
    pub threads: u64,
}

#[derive(Debug)]
pub struct Latency {
    pub trials: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
}

#[derive(Debug)]
pub struct KubeFootprint {
    pub services: usize,
    pub slices: usize,
    pub endpoints: usize,
    /// The Services this node advertises: routes at FRR.
    pub routes: usize,
    pub rss_kib: u64,
    pub rss_anon_kib: u64,
    pub peak_rss_kib: u64,
    /// utime + stime from start to all routes at FRR.
    pub cpu_secs: f64,
    pub load_secs: f64,
    /// /proc/loadavg (1, 5, 15 min) when holdfast started.
    pub loadavg: String,
}

#[derive(Debug)]
pub struct Codec {
    pub messages: u64,
    pub bytes: u64,
    pub excluded: u64,
    /// Which crate refused how many (an error, or a panic).
    pub refused: String,
    /// (operation, crate) → mean nanoseconds per pass over the corpus.
    pub ns_per_pass: BTreeMap<(String, String), f64>,
}

pub const CRATES: [&str; 3] = ["bgp-proto", "bgpkit-parser", "zettabgp"];

/// Criterion's estimates (`codec/OP/CRATE/new/estimates.json`) and the
/// corpus facts the bench wrote (`codec-corpus.json`).
pub fn read_codec(dir: &Path) -> Option<Codec> {
    let corpus: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("codec-corpus.json")).ok()?).ok()?;
    let mut ns = BTreeMap::new();
    for op in ["decode", "encode"] {
        for krate in CRATES {
            let path = dir
                .join("codec")
                .join(op)
                .join(krate)
                .join("new/estimates.json");
            let Ok(text) = std::fs::read_to_string(&path) else {
                eprintln!("no {}", path.display());
                continue;
            };
            let v: Value = serde_json::from_str(&text).ok()?;
            if let Some(mean) = v["mean"]["point_estimate"].as_f64() {
                ns.insert((op.to_owned(), krate.to_owned()), mean);
            }
        }
    }
    Some(Codec {
        messages: corpus["messages"].as_u64()?,
        bytes: corpus["bytes"].as_u64()?,
        excluded: corpus["excluded"].as_u64()?,
        refused: corpus["refused_by"]
            .as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default(),
        ns_per_pass: ns,
    })
}

fn secs(d: Option<Duration>) -> String {
    d.map_or("—".into(), |d| {
        if d < Duration::from_secs(1) {
            format!("{:.0} ms", d.as_secs_f64() * 1000.0)
        } else {
            format!("{:.2} s", d.as_secs_f64())
        }
    })
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn ratio(ours: f64, theirs: f64) -> String {
    if theirs <= 0.0 || ours <= 0.0 {
        return "—".into();
    }
    format!("{:.2}×", ours / theirs)
}

/// The bulk table's name for `k`: holdfast's rows say which build ran.
fn label(k: Kind, args: &Args) -> &'static str {
    match k {
        Kind::Holdfast if args.holdfast_static => "holdfast (musl)",
        k => k.name(),
    }
}

pub fn n_label(n: usize) -> String {
    if n >= 1000 && n.is_multiple_of(1000) {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

pub fn render(r: &Results, args: &Args) -> String {
    let mut s = String::new();
    let m = |k: &str| r.machine.get(k).cloned().unwrap_or_default();
    writeln!(s, "# Benchmarks\n").unwrap();
    writeln!(
        s,
        "Produced by `{}` on {}. Every figure below comes from that one run, on one machine, \
         into one FRR bgpd in a network namespace; ratios are holdfast's figure divided by the other's \
         (below 1× means holdfast is faster or smaller). How to run it and what each figure means: \
         docs/src/development/benchmarks.md.\n",
        if r.command.is_empty() { "bench/run.sh" } else { &r.command },
        m("date")
    )
    .unwrap();
    writeln!(s, "## Machine\n\n| | |\n|---|---|").unwrap();
    for k in [
        "nproc",
        "cpu",
        "memory",
        "kernel",
        "load before",
        "load after",
        "frr",
        "bird",
        "gobgpd",
        "exabgp",
        "holdfast",
        "rustc",
    ] {
        writeln!(s, "| {k} | {} |", m(k)).unwrap();
    }
    writeln!(
        s,
        "\nThe machine is a 2-core VM shared with other work; the load averages above \
         (1, 5, 15 min) were taken at the start and the end of the run.\n"
    )
    .unwrap();

    let get = |k: Kind, n: usize| r.bulk.get(&(k.name().to_owned(), n));
    targets(&mut s, r, args);
    if !r.bulk.is_empty() {
        writeln!(
            s,
            "## Bulk: N /32 routes into FRR\n\n\
             Time from the speaker's start (process spawned; for gobgpd including `gobgp mrt inject`) \
             until FRR's `pfxRcd` for the neighbor holds all N + 1 routes (N in 198.18.0.0/15 and the \
             churn VIP). \"session\" is when FRR first showed the session Established. UPDATEs: FRR's \
             `messageStats.updatesRecv` delta (End-of-RIB included), after the counter stayed still for 2 s. \
             Octets: received on FRR's end of the link (`/proc/net/dev`: BGP, TCP/IP headers and ACKs \
             included, OPEN and KEEPALIVEs too). \"× floor\": time to all routes over that of the floor, \
             `holdfast-floor` (bench/src/bin): every UPDATE built before it connects, packed full, and written \
             with End-of-RIB in one go — the least work a speaker can do, so what is left is FRR's. \
             RSS: `VmRSS` once loaded, and in brackets its `RssAnon` part (heap and stacks; the rest is the binary and libraries mapped from files). \
             holdfast's builds (the static PIE the image ships, glibc linked in, and the static build linked at a fixed address, \
             no PIE, which shows what address randomisation costs) and the floor load each size {} times, interleaved (holdfast, glibc, no PIE, floor, holdfast, …), since FRR's own time \
             into the table varies by ±15 % from run to run: their row is the run with the median time, \
             \"all routes\" gives the range over the runs in brackets, \"peak RSS\" the largest of the runs; \
             the other speakers load once.\n",
            args.bulk_runs
        )
        .unwrap();
        writeln!(s, "| N | speaker | session | all routes | × floor | UPDATEs | octets | RSS loaded (anon) | peak RSS | CPU to load |").unwrap();
        writeln!(s, "|---|---|---|---|---|---|---|---|---|---|").unwrap();
        for &n in &args.sizes {
            // "× floor": time to all routes over the floor speaker's.
            let floor = get(Kind::Floor, n).and_then(|f| f.all);
            for k in Kind::ALL {
                if let Some(b) = get(k, n) {
                    let x_floor = match (b.all, floor) {
                        (Some(a), Some(f)) => ratio(a.as_secs_f64(), f.as_secs_f64()),
                        _ => "—".into(),
                    };
                    writeln!(
                        s,
                        "| {} | {} | {} | {} | {} | {} | {} | {} ({}) | {} | {:.2} s |",
                        n_label(n),
                        label(k, args),
                        secs(b.established),
                        match b.spread() {
                            Some(range) => format!("{} ({range})", secs(b.all)),
                            None => secs(b.all),
                        },
                        x_floor,
                        b.updates,
                        b.bytes,
                        mib(b.rss_kib),
                        mib(b.rss_anon_kib),
                        mib(b.peak_rss_kib),
                        b.cpu_to_load
                    )
                    .unwrap();
                }
            }
        }
        writeln!(
            s,
            "\nholdfast's ratios to each (time to all routes / RSS loaded / UPDATEs / octets):\n"
        )
        .unwrap();
        writeln!(
            s,
            "| N | vs BIRD | vs gobgpd | vs ExaBGP |\n|---|---|---|---|"
        )
        .unwrap();
        for &n in &args.sizes {
            let Some(h) = get(Kind::Holdfast, n) else {
                continue;
            };
            let mut row = format!("| {} |", n_label(n));
            for k in [Kind::Bird, Kind::Gobgp, Kind::ExaBgp] {
                match get(k, n) {
                    Some(o) => {
                        let t = match (h.all, o.all) {
                            (Some(a), Some(b)) => ratio(a.as_secs_f64(), b.as_secs_f64()),
                            _ => "—".into(),
                        };
                        write!(
                            row,
                            " {t} / {} / {} / {} |",
                            ratio(h.rss_kib as f64, o.rss_kib as f64),
                            ratio(h.updates as f64, o.updates as f64),
                            ratio(h.bytes as f64, o.bytes as f64)
                        )
                        .unwrap();
                    }
                    None => row.push_str(" — |"),
                }
            }
            writeln!(s, "{row}").unwrap();
        }
    }

    let idle_rows: Vec<_> = r.bulk.iter().filter(|(_, b)| b.idle.is_some()).collect();
    if !idle_rows.is_empty() {
        writeln!(
            s,
            "\n## Footprint when idle\n\n\
             After loading N routes and 3 s of rest, over {} s of idling (session up, keepalives every 3 s): \
             CPU = Δ(utime+stime) of the process (all threads) / wall time; wake-ups = Δ(voluntary + \
             nonvoluntary context switches) summed over all threads / wall time; RSS = `VmRSS` at the end. \
             ExaBGP: the exabgp Python process alone (its API helper is not counted).\n",
            args.idle_secs
        )
        .unwrap();
        writeln!(
            s,
            "| N | speaker | RSS | CPU | wake-ups/s | threads |\n|---|---|---|---|---|---|"
        )
        .unwrap();
        for &n in &args.idle_sizes {
            for k in Kind::ALL {
                if let Some(i) = get(k, n).and_then(|b| b.idle.as_ref()) {
                    writeln!(
                        s,
                        "| {} | {} | {} | {:.3} % | {:.1} | {} |",
                        n_label(n),
                        k.name(),
                        mib(i.rss_kib),
                        i.cpu_percent,
                        i.wakeups_per_sec,
                        i.threads
                    )
                    .unwrap();
                }
            }
        }
    }

    if !r.idle_two_peers.is_empty() {
        two_peers_idle(&mut s, &r.idle_two_peers);
    }

    let churn: Vec<_> = Kind::ALL
        .iter()
        .filter_map(|k| {
            get(*k, args.churn_size)
                .and_then(|b| b.churn_updates)
                .map(|c| (*k, c))
        })
        .collect();
    if !churn.is_empty() {
        writeln!(
            s,
            "\n## Churn: the reported flap\n\n\
             With {} routes loaded, the churn VIP (198.51.100.99/32) is removed at every whole second and \
             re-added half a second later, for {} s ({} removals, {} re-adds), each speaker through its own \
             interface: holdfast's VIP file rewritten (rename-over), `birdc disable/enable` of a static \
             protocol holding the route, `gobgp global rib del/add`, ExaBGP API `withdraw/announce route`. \
             UPDATEs received by FRR from the first removal until 3 s after the last re-add (counter settled). \
             holdfast runs with `withdraw_hold_down = \"30s\"` (its default).\n",
            args.churn_size, args.churn_secs, args.churn_secs, args.churn_secs
        )
        .unwrap();
        writeln!(s, "| speaker | UPDATEs during churn |\n|---|---|").unwrap();
        for (k, c) in churn {
            writeln!(s, "| {} | {c} |", k.name()).unwrap();
        }
    }

    if r.latency_file.is_some() || r.latency_kube.is_some() {
        writeln!(
            s,
            "\n## Latency: one VIP appears → in FRR's RIB\n\n\
             Each trial adds one new VIP and polls bgpd over its vty socket (every 0.2 ms, no vtysh fork) \
             until `show bgp ipv4 unicast VIP/32` has a path; trials are 50–250 ms apart (pseudo-random, \
             so they do not fall into step with any timer). VIP file: the file rewritten with one more \
             `[[vip]]` (new file renamed over), with 101 VIPs in it at the start. Kubernetes: a Service's \
             `status.loadBalancer.ingress` patched on the API stand-in (in the benchmark process; \
             holdfast reaches it through a TCP bridge into the node namespace), with {} Services and \
             EndpointSlices in the cluster.\n",
            crate::kube::LATENCY_AT
        )
        .unwrap();
        writeln!(
            s,
            "| source | trials | p50 | p99 | min | max |\n|---|---|---|---|---|---|"
        )
        .unwrap();
        for (name, l) in [
            ("VIP file", &r.latency_file),
            ("Kubernetes", &r.latency_kube),
        ] {
            if let Some(l) = l {
                writeln!(
                    s,
                    "| {name} | {} | {:.1} ms | {:.1} ms | {:.1} ms | {:.1} ms |",
                    l.trials, l.p50_ms, l.p99_ms, l.min_ms, l.max_ms
                )
                .unwrap();
            }
        }
    }

    if !r.kube_footprints.is_empty() {
        writeln!(
            s,
            "\n## Kubernetes source footprint\n\n\
             holdfast with `[source] kind = \"kubernetes\"` as node 0 of {} against the API stand-in holding N \
             LoadBalancer Services (one ingress IP each; odd ones `externalTrafficPolicy: Cluster`, even ones \
             `Local`) and N EndpointSlices of {} ready endpoints each, spread over the nodes so that one slice \
             in ten has an endpoint on this node. Routes: the Services this node advertises (the `Cluster` \
             ones and the `Local` ones with an endpoint here). RSS 10 s after FRR had all routes; peak RSS is \
             VmHWM; CPU is utime + stime from start to all routes at FRR.\n\n\
             | Services | endpoints | routes | RSS (anon) | peak RSS | CPU to load | start → all routes at FRR | load avg at start |\n\
             |---|---|---|---|---|---|---|---|",
            crate::kube::NODES,
            crate::kube::ENDPOINTS_PER_SLICE,
        )
        .unwrap();
        for f in &r.kube_footprints {
            writeln!(
                s,
                "| {} | {} | {} | {} ({}) | {} | {:.2} s | {:.2} s | {} |",
                n_label(f.services),
                n_label(f.endpoints),
                f.routes,
                mib(f.rss_kib),
                mib(f.rss_anon_kib),
                mib(f.peak_rss_kib),
                f.cpu_secs,
                f.load_secs,
                f.loadavg
            )
            .unwrap();
        }
    }

    if let Some(f) = &r.scrapes {
        crate::scrapes::render(&mut s, f);
    }
    if let Some(st) = &r.startup {
        crate::startup::render(&mut s, st);
    }

    if let Some(c) = &r.codec {
        writeln!(
            s,
            "\n## Codec\n\n\
             criterion, one run (`cargo bench --bench codec` in bench/): a pass decodes (or encodes) every \
             UPDATE of the corpus — the ExaBGP test vectors and the UPDATEs of the mrtparse sample dumps \
             that all three crates handle: bgp-proto decodes and re-encodes it byte for byte, bgpkit-parser \
             decodes it, zettabgp decodes and encodes it, none with an error or a panic ({} messages, {} octets; \
             {} left out — refused by {}; ADD-PATH sessions are not in it). Decode: wire bytes → each crate's \
             message value; encode: that value → wire bytes. Mean time per pass; the figures move by ±20 % \
             from run to run on this VM.\n",
            c.messages, c.bytes, c.excluded, c.refused
        )
        .unwrap();
        writeln!(s, "| operation | crate | per pass | messages/s | MB/s | bgp-proto's ratio |\n|---|---|---|---|---|---|").unwrap();
        for op in ["decode", "encode"] {
            let ours = c
                .ns_per_pass
                .get(&(op.to_owned(), "bgp-proto".to_owned()))
                .copied();
            for krate in CRATES {
                if let Some(ns) = c.ns_per_pass.get(&(op.to_owned(), krate.to_owned())) {
                    let per_sec = 1e9 / ns;
                    writeln!(
                        s,
                        "| {op} | {krate} | {:.1} µs | {:.2} M | {:.0} | {} |",
                        ns / 1000.0,
                        c.messages as f64 * per_sec / 1e6,
                        c.bytes as f64 * per_sec / 1e6,
                        ours.map_or("—".into(), |o| ratio(o, *ns).replace('×', "× the time"))
                    )
                    .unwrap();
                }
            }
        }
    }
    s
}

/// Time at the floor in the shipped build, and memory at most BIRD's (once
/// loaded and at the peak during the load) in each build measured.
fn build_targets(rows: &mut Vec<(String, String, Option<bool>)>, r: &Results, args: &Args) {
    let get = |k: Kind, n: usize| r.bulk.get(&(k.name().to_owned(), n));
    for &n in &args.sizes {
        if let (Some(h), Some(f)) = (get(Kind::Holdfast, n), get(Kind::Floor, n))
            && n >= 10_000
        {
            let x = h
                .all
                .zip(f.all)
                .map(|(a, b)| a.as_secs_f64() / b.as_secs_f64());
            rows.push((
                format!(
                    "{}: {} ≤ 1.1× the floor (start → all routes)",
                    n_label(n),
                    label(Kind::Holdfast, args)
                ),
                format!(
                    "{} vs {} ({})",
                    secs(h.all),
                    secs(f.all),
                    x.map_or("—".into(), |x| format!("{x:.2}×"))
                ),
                x.map(|x| x <= 1.1),
            ));
        }
        if let (Some(h), Some(x)) = (get(Kind::Holdfast, n), get(Kind::HoldfastFixed, n)) {
            // What address randomisation costs: the same build linked at a
            // fixed address (no PIE) against the shipped static PIE.
            let d = |a: u64, b: u64| format!("{:+.1} MiB", (a as f64 - b as f64) / 1024.0);
            rows.push((
                format!(
                    "{}: RSS cost of PIE (ASLR), {} vs {} (reported, no target)",
                    n_label(n),
                    label(Kind::Holdfast, args),
                    Kind::HoldfastFixed.name()
                ),
                format!(
                    "{} loaded ({} vs {}), {} peak",
                    d(h.rss_kib, x.rss_kib),
                    mib(h.rss_kib),
                    mib(x.rss_kib),
                    d(h.peak_rss_kib, x.peak_rss_kib)
                ),
                None,
            ));
        }
        let Some(b) = get(Kind::Bird, n) else {
            continue;
        };
        for k in [Kind::Holdfast, Kind::HoldfastGlibc] {
            let Some(h) = get(k, n) else {
                continue;
            };
            let who = label(k, args);
            if k != Kind::Holdfast {
                // The first build's loaded row is the generic one below.
                rows.push((
                    format!("{}: {who} no larger than BIRD (RSS loaded)", n_label(n)),
                    format!("{} vs {}", mib(h.rss_kib), mib(b.rss_kib)),
                    Some(h.rss_kib <= b.rss_kib),
                ));
            }
            rows.push((
                format!("{}: {who} peak RSS during the load ≤ BIRD's", n_label(n)),
                format!("{} vs {}", mib(h.peak_rss_kib), mib(b.peak_rss_kib)),
                Some(h.peak_rss_kib <= b.peak_rss_kib),
            ));
            if n == 100_000 {
                rows.push((
                    format!("100k: {who} peak RSS ≤ 16 MiB (aim)"),
                    mib(h.peak_rss_kib),
                    Some(h.peak_rss_kib <= 16 * 1024),
                ));
            }
        }
    }
}

/// "holdfast idle with two peers": per timer setting, the total and the
/// threads that woke.
fn two_peers_idle(s: &mut String, runs: &[crate::idle::TwoPeers]) {
    writeln!(
        s,
        "\n### holdfast idle with two peers\n\n\
         Two sessions (two neighbors of one FRR bgpd, the node's two addresses), {} routes in both \
         Adj-RIBs-Out, then {} s of idling after 3 s of rest; both ends use the timers shown. \
         Wake-ups = context switches (voluntary and not) of every thread / wall time; threads are \
         sampled every 100 ms, so one that ends during the run counts up to its last sample. A \
         keepalive received is a wake-up, one sent is another (they coincide only by chance): each \
         peer costs up to 2 per keepalive interval, so with 3 s keepalives two peers cost about 4/3 per second, \
         2/3 of them receiving alone. The main thread (named after the binary) runs every task; \
         `tokio-rt-worker` threads are tokio's blocking pool (file system calls), which exit after 10 s unused.\n",
        n_label(crate::idle::N),
        runs.first().map_or(0, |r| r.secs)
    )
    .unwrap();
    writeln!(
        s,
        "| timers (keepalive/hold) | wake-ups/s | CPU | by thread (wake-ups/s) | threads (end / seen) |\n|---|---|---|---|---|"
    )
    .unwrap();
    for r in runs {
        let threads: Vec<String> = r
            .by_thread
            .iter()
            .map(|(name, w)| format!("{name} {w:.2}"))
            .collect();
        writeln!(
            s,
            "| {}/{} s | {:.2} | {:.3} % | {} | {} / {} |",
            r.keepalive,
            r.hold,
            r.wakeups_per_sec,
            r.cpu_percent,
            if threads.is_empty() {
                "none".to_owned()
            } else {
                threads.join(", ")
            },
            r.threads_end,
            r.threads_seen
        )
        .unwrap();
    }
}

/// The benchmark targets, each against what this run measured.
fn targets(s: &mut String, r: &Results, args: &Args) {
    let get = |k: Kind, n: usize| r.bulk.get(&(k.name().to_owned(), n));
    let mut rows: Vec<(String, String, Option<bool>)> = Vec::new();
    for &n in &args.sizes {
        if let (Some(h), Some(b)) = (get(Kind::Holdfast, n), get(Kind::Bird, n)) {
            let (ht, bt) = (
                h.all.map(|d| d.as_secs_f64()),
                b.all.map(|d| d.as_secs_f64()),
            );
            rows.push((
                format!("{}: no slower than BIRD (start → all routes)", n_label(n)),
                format!("{} vs {}", secs(h.all), secs(b.all)),
                ht.zip(bt).map(|(h, b)| h <= b),
            ));
            rows.push((
                format!("{}: no larger than BIRD (RSS loaded)", n_label(n)),
                format!("{} vs {}", mib(h.rss_kib), mib(b.rss_kib)),
                Some(h.rss_kib <= b.rss_kib),
            ));
        }
    }
    build_targets(&mut rows, r, args);
    for f in &r.kube_footprints {
        let limit_mib = match f.services {
            1_000 => 20,
            10_000 => 40,
            _ => continue,
        };
        rows.push((
            format!(
                "Kubernetes source, {} Services + {} EndpointSlices: RSS ≤ {limit_mib} MiB",
                n_label(f.services),
                n_label(f.slices)
            ),
            mib(f.rss_kib),
            Some(f.rss_kib <= limit_mib * 1024),
        ));
    }
    if let Some(l) = &r.latency_kube
        && r.kube_footprints
            .iter()
            .any(|f| f.services == crate::kube::LATENCY_AT)
    {
        rows.push((
            format!(
                "Kubernetes source, {} Services: status change → FRR RIB p50 ≤ 15 ms",
                n_label(crate::kube::LATENCY_AT)
            ),
            format!("{:.1} ms (p99 {:.1} ms)", l.p50_ms, l.p99_ms),
            Some(l.p50_ms <= 15.0),
        ));
    }
    for (name, l) in [
        ("VIP file", &r.latency_file),
        ("Kubernetes", &r.latency_kube),
    ] {
        if let Some(l) = l {
            rows.push((
                format!("latency p50 ≤ 20 ms ({name})"),
                format!("{:.1} ms", l.p50_ms),
                Some(l.p50_ms <= 20.0),
            ));
        }
    }
    if let Some(d) = r.idle_two_peers.iter().find(|t| t.keepalive == 30) {
        let fast = r.idle_two_peers.iter().find(|t| t.keepalive == 3);
        rows.push((
            format!(
                "idle: ≤ 1 wake-up/s, 2 peers, {} routes (holdfast's default timers: keepalive 30 s, hold 90 s)",
                n_label(crate::idle::N)
            ),
            match fast {
                Some(f) => format!(
                    "{:.2}/s (with 3 s keepalives: {:.2}/s, of which receiving alone is 2 × 1/3)",
                    d.wakeups_per_sec, f.wakeups_per_sec
                ),
                None => format!("{:.2}/s", d.wakeups_per_sec),
            },
            Some(d.wakeups_per_sec <= 1.0),
        ));
    }
    if let Some(c) = get(Kind::Holdfast, args.churn_size).and_then(|b| b.churn_updates) {
        rows.push((
            "churn: at most one UPDATE".into(),
            c.to_string(),
            Some(c <= 1),
        ));
    }
    if let Some(c) = &r.codec {
        for op in ["decode", "encode"] {
            let t = |k: &str| c.ns_per_pass.get(&(op.to_owned(), k.to_owned())).copied();
            if let (Some(ours), Some(a), Some(b)) =
                (t("bgp-proto"), t("bgpkit-parser"), t("zettabgp"))
            {
                let best = a.min(b);
                rows.push((
                    format!("codec {op}: at least as fast as the faster crate"),
                    format!(
                        "{:.1} µs vs {:.1} µs per pass",
                        ours / 1000.0,
                        best / 1000.0
                    ),
                    Some(ours <= best),
                ));
            }
        }
    }
    rows.extend(r.scrapes.iter().flat_map(crate::scrapes::target_rows));
    rows.extend(r.startup.iter().flat_map(crate::startup::target_rows));
    if rows.is_empty() {
        return;
    }
    writeln!(
        s,
        "## Targets\n\n| target | measured (holdfast vs reference) | met |\n|---|---|---|"
    )
    .unwrap();
    for (what, measured, met) in rows {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        writeln!(s, "| {what} | {measured} | {met} |").unwrap();
    }
    writeln!(s).unwrap();
}

pub fn to_json(r: &Results) -> String {
    let d = |d: Option<Duration>| d.map(|d| d.as_secs_f64());
    let bulk: Vec<Value> = r
        .bulk
        .iter()
        .map(|((k, n), b)| {
            json!({
                "speaker": k, "n": n, "established_s": d(b.established), "all_s": d(b.all),
                "updates": b.updates, "bytes": b.bytes, "rss_kib": b.rss_kib, "peak_rss_kib": b.peak_rss_kib,
                "cpu_to_load_s": b.cpu_to_load,
                "all_runs_s": b.runs.iter().map(|t| d(*t)).collect::<Vec<_>>(),
                "idle": b.idle.as_ref().map(|i| json!({"cpu_percent": i.cpu_percent, "wakeups_per_sec": i.wakeups_per_sec, "rss_kib": i.rss_kib})),
                "churn_updates": b.churn_updates,
            })
        })
        .collect();
    let lat = |l: &Option<Latency>| {
        l.as_ref().map(|l| json!({"p50_ms": l.p50_ms, "p99_ms": l.p99_ms, "min_ms": l.min_ms, "max_ms": l.max_ms}))
    };
    serde_json::to_string_pretty(&json!({
        "machine": r.machine,
        "bulk": bulk,
        "latency_file": lat(&r.latency_file),
        "latency_kube": lat(&r.latency_kube),
        "kube": r.kube_footprints.iter().map(|f| json!({
            "services": f.services, "routes": f.routes, "rss_kib": f.rss_kib,
            "peak_rss_kib": f.peak_rss_kib, "cpu_s": f.cpu_secs, "load_s": f.load_secs,
        })).collect::<Vec<_>>(),
    }))
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ms: Option<u64>, peak: u64, churn: Option<u64>) -> Bulk {
        Bulk {
            established: None,
            all: ms.map(Duration::from_millis),
            updates: ms.unwrap_or(0),
            bytes: 0,
            rss_kib: 0,
            rss_anon_kib: 0,
            peak_rss_kib: peak,
            cpu_to_load: 0.0,
            idle: None,
            churn_updates: churn,
            runs: Vec::new(),
        }
    }

    #[test]
    fn a_cell_is_its_median_run_with_the_largest_peak_and_the_first_runs_churn() {
        let m = Bulk::median_of(vec![
            run(Some(30), 5, Some(1)),
            run(None, 9, None),
            run(Some(10), 7, None),
            run(Some(20), 6, None),
            run(Some(40), 4, None),
        ]);
        // 10, 20, 30, 40, never: the median is 30 ms, the first run.
        assert_eq!(m.all, Some(Duration::from_millis(30)));
        assert_eq!(m.updates, 30, "the row is the median run's");
        assert_eq!(m.peak_rss_kib, 9);
        assert_eq!(m.churn_updates, Some(1));
        assert_eq!(m.spread().as_deref(), Some("10 ms–— of 5"));
        let one = Bulk::median_of(vec![run(Some(20), 6, None)]);
        assert_eq!(
            (one.all, one.spread()),
            (Some(Duration::from_millis(20)), None)
        );
    }
}

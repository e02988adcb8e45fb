//! Traffic through a lab: two (or more) nodes behind one forwarding ToR
//! that spreads a shared VIP over them by ECMP, a TCP listener on each node
//! that answers with its name, and a client behind the ToR that opens a new
//! connection every few milliseconds and records which node answered or
//! why it failed. Shared by `tests/zero_loss.rs` and the benchmark harness
//! (`bench/`), so that holdfast and the other speakers are judged by the
//! same traffic.
//!
//! ```text
//!  node1 (192.0.2.2) ──┐
//!                      ├── tor (FRR + zebra, ECMP) ── client (192.0.2.10)
//!  node2 (192.0.2.6) ──┘
//! ```
//!
//! Every node holds the VIP on `lo`; the ToR learns it over BGP from the
//! nodes' speakers and installs the multipath route into its kernel.
//! `net.ipv4.fib_multipath_hash_policy = 1` (layer 4) makes new
//! connections (new source ports) spread over the paths.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::dir::LabDir;
use crate::link::{Link, veth};
use crate::netns::Netns;
use crate::process::{NsProcess, Signal};
use crate::require::require_tools;
use crate::wait::wait_for;

const SERVER: &str = include_str!("traffic_server.py");
const CLIENT: &str = include_str!("traffic_client.py");

/// The shared VIP every node serves.
pub const VIP: &str = "198.51.100.10";
/// The port of the nodes' listeners.
pub const PORT: u16 = 8080;
/// The ToR's AS; the nodes are in [`NODE_ASN`].
pub const TOR_ASN: u32 = 65000;
pub const NODE_ASN: u32 = 65001;

/// One node of an [`EcmpLab`].
#[derive(Debug)]
pub struct EcmpNode {
    pub name: String,
    pub ns: Netns,
    /// The node's address on its link to the ToR (its BGP address).
    pub addr: Ipv4Addr,
    /// The ToR's address on that link.
    pub tor_addr: Ipv4Addr,
    pub link: Link,
}

/// The topology of the module's doc.
#[derive(Debug)]
pub struct EcmpLab {
    pub tor: Netns,
    pub client: Netns,
    pub client_addr: Ipv4Addr,
    pub nodes: Vec<EcmpNode>,
    _client_link: Link,
}

impl EcmpLab {
    /// `count` nodes (node1 192.0.2.2, node2 192.0.2.6, …, each on a /30
    /// with the ToR at .1, .5, …), the client on 192.0.2.248/30 (.250,
    /// ToR .249). The nodes' default route and the client's go to the ToR.
    pub fn new(count: usize) -> EcmpLab {
        assert!((1..=60).contains(&count), "1..=60 nodes");
        let tor = Netns::new("tor");
        tor.enable_forwarding();
        // Layer 4 hash: each new connection (a new source port) picks a
        // path of its own.
        tor.sysctl("net.ipv4.fib_multipath_hash_policy", "1");
        let client = Netns::new("client");
        let client_link = veth(&client, "to-tor", &tor, "to-client");
        client.add_address("to-tor", "192.0.2.250/30");
        tor.add_address("to-client", "192.0.2.249/30");
        client.ip(&["route", "add", "default", "via", "192.0.2.249"]);
        let nodes = (0..count)
            .map(|i| {
                let name = format!("node{}", i + 1);
                let ns = Netns::new(&name);
                let tor_if = format!("to-{name}");
                let link = veth(&ns, "to-tor", &tor, &tor_if);
                let base = 4 * i as u8;
                let tor_addr = Ipv4Addr::new(192, 0, 2, base + 1);
                let addr = Ipv4Addr::new(192, 0, 2, base + 2);
                ns.add_address("to-tor", &format!("{addr}/30"));
                tor.add_address(&tor_if, &format!("{tor_addr}/30"));
                ns.ip(&["route", "add", "default", "via", &tor_addr.to_string()]);
                ns.add_address("lo", &format!("{VIP}/32"));
                EcmpNode {
                    name,
                    ns,
                    addr,
                    tor_addr,
                    link,
                }
            })
            .collect();
        EcmpLab {
            tor,
            client,
            client_addr: Ipv4Addr::new(192, 0, 2, 250),
            nodes,
            _client_link: client_link,
        }
    }

    /// An FRR config for the ToR: every node an eBGP neighbor in
    /// [`NODE_ASN`], ECMP over up to 8 paths, fast timers, graceful
    /// restart (helper). `extra` goes under `router bgp`.
    pub fn tor_conf(&self, extra: &str) -> String {
        let mut c = format!(
            "frr defaults datacenter\nrouter bgp {TOR_ASN}\n bgp router-id 192.0.2.249\n no bgp ebgp-requires-policy\n bgp graceful-restart\n"
        );
        for n in &self.nodes {
            c.push_str(&format!(
                " neighbor {a} remote-as {NODE_ASN}\n neighbor {a} timers connect 1\n neighbor {a} timers 3 9\n",
                a = n.addr
            ));
        }
        c.push_str(extra);
        c.push_str(" address-family ipv4 unicast\n  maximum-paths 8\n");
        for n in &self.nodes {
            c.push_str(&format!("  neighbor {} activate\n", n.addr));
        }
        c.push_str(" exit-address-family\nexit\n");
        c
    }

    /// The next hops of the VIP in the ToR's kernel (`ip route get` would
    /// hash; this lists the route's `nexthop via` entries, or its single
    /// `via`).
    pub fn kernel_next_hops(&self) -> Vec<Ipv4Addr> {
        let out = self.tor.ip(&["-4", "route", "show", &format!("{VIP}/32")]);
        let words: Vec<&str> = out.split_whitespace().collect();
        words
            .windows(2)
            .filter(|w| w[0] == "via")
            .filter_map(|w| w[1].parse().ok())
            .collect()
    }

    /// Waits until the ToR's kernel forwards the VIP to exactly `addrs`.
    pub fn wait_next_hops(&self, addrs: &[Ipv4Addr], timeout: Duration) {
        let mut want = addrs.to_vec();
        want.sort();
        wait_for(
            timeout,
            &format!("the ToR's kernel route to {VIP} via {want:?}"),
            || {
                let mut now = self.kernel_next_hops();
                now.sort();
                if now == want {
                    Ok(())
                } else {
                    Err(format!("via {now:?}"))
                }
            },
        );
    }
}

/// A node's TCP listener on the VIP: answers every connection with its
/// name.
#[derive(Debug)]
pub struct Server {
    process: NsProcess,
    _dir: LabDir,
}

impl Server {
    pub fn start(ns: &Netns, name: &str) -> Server {
        require_tools(&["python3"]);
        let dir = LabDir::new("server");
        let script = dir.write("server.py", SERVER);
        let script = script.display().to_string();
        let port = PORT.to_string();
        let mut process = NsProcess::start_with_env(
            ns,
            &format!("server-{name}"),
            &["python3", "-u", &script, VIP, &port, name],
            &[],
        );
        wait_for(
            Duration::from_secs(20),
            &format!("the listener of {name}"),
            || {
                process.assert_running("starting");
                if process.log().contains("listening") {
                    Ok(())
                } else {
                    Err("not yet".into())
                }
            },
        );
        Server { process, _dir: dir }
    }

    /// Stops the listener: new connections to this node are refused.
    pub fn stop(mut self) {
        self.process.kill(Signal::Kill);
        let _ = self.process.wait_exit(Duration::from_secs(10));
    }
}

/// What the client saw in a window.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Connections answered, by the name of the node that answered.
    pub served: BTreeMap<String, u64>,
    /// Failed connections: why, each.
    pub failures: Vec<String>,
    /// The slowest successful connection, in milliseconds.
    pub slowest_ms: u64,
}

impl Tally {
    pub fn attempts(&self) -> u64 {
        self.served.values().sum::<u64>() + self.failures.len() as u64
    }

    pub fn served_by(&self, node: &str) -> u64 {
        self.served.get(node).copied().unwrap_or(0)
    }
}

/// The connecting client (see the module's doc).
#[derive(Debug)]
pub struct Client {
    process: NsProcess,
    out: PathBuf,
    _dir: LabDir,
}

/// A point in the client's record (wall-clock milliseconds, the clock the
/// client writes).
pub type Mark = u64;

pub fn now_ms() -> Mark {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("a clock after 1970")
        .as_millis() as u64
}

impl Client {
    /// A new connection to [`VIP`]:[`PORT`] every `interval`, each bounded
    /// by `timeout`.
    pub fn start(ns: &Netns, interval: Duration, timeout: Duration) -> Client {
        require_tools(&["python3"]);
        let dir = LabDir::new("client");
        let script = dir.write("client.py", CLIENT).display().to_string();
        let out = dir.join("attempts.log");
        let (interval, timeout) = (
            interval.as_millis().to_string(),
            format!("{:.3}", timeout.as_secs_f64()),
        );
        let process = NsProcess::start_with_env(
            ns,
            "client",
            &[
                "python3",
                "-u",
                &script,
                VIP,
                &PORT.to_string(),
                &interval,
                &timeout,
                &out.display().to_string(),
            ],
            &[],
        );
        Client {
            process,
            out,
            _dir: dir,
        }
    }

    /// The attempts that started in `[from, to)`, once each has ended
    /// (waits up to `settle` for the last ones).
    pub fn tally(&mut self, from: Mark, to: Mark, settle: Duration) -> Tally {
        let (out, process) = (&self.out, &mut self.process);
        wait_for(settle, "the client's attempts to end", || {
            process.assert_running("counting connections");
            tally_of(&std::fs::read_to_string(out).unwrap_or_default(), from, to)
        })
    }
}

/// Parses the client's record; `Err` while an attempt that started in the
/// window has not ended.
fn tally_of(text: &str, from: Mark, to: Mark) -> Result<Tally, String> {
    let mut started: BTreeMap<u64, u64> = BTreeMap::new();
    let mut ended: BTreeMap<u64, (u64, bool, String)> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        match f.as_slice() {
            ["S", seq, at] => {
                if let (Ok(seq), Ok(at)) = (seq.parse(), at.parse()) {
                    started.insert(seq, at);
                }
            }
            ["E", seq, at, result, what] => {
                if let (Ok(seq), Ok(at)) = (seq.parse(), at.parse()) {
                    ended.insert(seq, (at, *result == "ok", (*what).to_string()));
                }
            }
            _ => {}
        }
    }
    let mut t = Tally::default();
    for (seq, at) in started {
        if at < from || at >= to {
            continue;
        }
        let Some((end, ok, what)) = ended.get(&seq) else {
            return Err(format!("attempt {seq} (started at {at})"));
        };
        if *ok {
            *t.served.entry(what.clone()).or_default() += 1;
            t.slowest_ms = t.slowest_ms.max(end.saturating_sub(at));
        } else {
            // Start and length: a reset long after the start is a
            // connection queued at a listener that then stopped.
            t.failures.push(format!(
                "attempt {seq} at {at} (ended {} ms later): {what}",
                end.saturating_sub(at)
            ));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_what_started_in_it_and_waits_for_open_attempts() {
        let text = "S 0 100\nS 1 120\nE 0 110 ok node1\nS 2 140\nE 1 125 fail ConnectionRefusedError\nS 3 160\n";
        assert!(tally_of(text, 100, 150).is_err(), "attempt 2 is open");
        let text = format!("{text}E 2 150 ok node2\n");
        let t = tally_of(&text, 100, 150).unwrap();
        assert_eq!(t.served_by("node1"), 1);
        assert_eq!(t.served_by("node2"), 1);
        assert_eq!(t.failures.len(), 1);
        assert_eq!(t.attempts(), 3);
        assert_eq!(t.slowest_ms, 10);
    }
}

/// What a speaker does in each zero-loss scenario, on node `i` of an
/// [`EcmpLab`]. [`run_scenarios`] drives the listeners and counts; the
/// speaker only reacts the way it would in production. A speaker that
/// simply withdraws (BIRD, gobgpd) has a natural equivalent of each step.
pub trait Operations {
    /// The speaker's name, for the report.
    fn name(&self) -> String;
    /// Rolling restart: stop node `i`'s speaker (SIGTERM) and start it
    /// again; returns once it is ready (holdfast: `/readyz`).
    fn restart(&mut self, i: usize);
    /// A planned drain of node `i` (`holdfast drain`).
    fn drain(&mut self, i: usize);
    fn undrain(&mut self, i: usize);
    /// Node `i`'s local endpoint becomes not ready (eTP Local).
    fn endpoint_not_ready(&mut self, i: usize);
    fn endpoint_ready(&mut self, i: usize);
    /// A pod restart: the speaker stops (SIGTERM), the datapath stays.
    fn pod_stop(&mut self, i: usize);
    /// The restarted pod's speaker starts; returns once it is ready.
    fn pod_start(&mut self, i: usize);
    /// Node `i` shuts down: returns once its speaker has stopped, as the
    /// machine's shutdown would stop it (holdfast: kubelet marks the Node,
    /// then SIGTERM); the listener stops right after.
    fn node_shutdown(&mut self, i: usize);
}

/// What a scenario cost.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub scenario: &'static str,
    /// Every attempt from the scenario's first step to its end.
    pub tally: Tally,
    /// Scenarios 2, 3, 5: the second after the ToR's kernel forwarded the
    /// VIP to node2 only, before node1's listener stopped (node1 must serve
    /// nothing in it).
    pub after_move: Option<Tally>,
    /// Scenario 4: one second while node1's speaker was down (a datapath
    /// that stays up keeps serving).
    pub during_gap: Option<Tally>,
}

/// Attempts every 20 ms, 2 s each.
pub const INTERVAL: Duration = Duration::from_millis(20);
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Generous: every attempt ends within [`CONNECT_TIMEOUT`].
const SETTLE: Duration = Duration::from_secs(15);

/// The lab, its listeners and its client.
#[derive(Debug)]
pub struct Traffic<'a> {
    pub lab: &'a EcmpLab,
    pub servers: Vec<Option<Server>>,
    pub client: Client,
}

impl<'a> Traffic<'a> {
    /// A listener on every node, then the client.
    pub fn start(lab: &'a EcmpLab) -> Traffic<'a> {
        let servers = lab
            .nodes
            .iter()
            .map(|n| Some(Server::start(&n.ns, &n.name)))
            .collect();
        let client = Client::start(&lab.client, INTERVAL, CONNECT_TIMEOUT);
        Traffic {
            lab,
            servers,
            client,
        }
    }

    fn addrs(&self) -> Vec<Ipv4Addr> {
        self.lab.nodes.iter().map(|n| n.addr).collect()
    }

    /// Both nodes answer connections (and nothing fails) over 1.5 s.
    pub fn assert_all_serve(&mut self, before: &str, timeout: Duration) {
        self.lab.wait_next_hops(&self.addrs(), timeout);
        let t = self.over(Duration::from_millis(1500));
        let all = self.lab.nodes.iter().all(|n| t.served_by(&n.name) > 0);
        assert!(
            all && t.failures.is_empty(),
            "before {before}, every node must serve the VIP: {t:?}"
        );
    }

    /// What the client saw over the next `d`.
    pub fn over(&mut self, d: Duration) -> Tally {
        let from = now_ms();
        std::thread::sleep(d);
        self.client.tally(from, now_ms(), SETTLE)
    }

    fn stop_server(&mut self, i: usize) {
        self.servers[i].take().expect("a running listener").stop();
    }

    fn start_server(&mut self, i: usize) {
        let n = &self.lab.nodes[i];
        self.servers[i] = Some(Server::start(&n.ns, &n.name));
    }

    /// node1 out of the ToR's route, then a second of traffic.
    fn moved_off_first(&mut self, timeout: Duration) -> Tally {
        let rest: Vec<Ipv4Addr> = self.addrs()[1..].to_vec();
        self.lab.wait_next_hops(&rest, timeout);
        // Connections already under way to node1 end well within this.
        std::thread::sleep(Duration::from_millis(300));
        self.over(Duration::from_secs(1))
    }
}

/// A scenario's own windows: (after the move, during the gap).
type Checks = (Option<Tally>, Option<Tally>);

/// The five scenarios of the zero-loss test, on node1 (index 0) of a
/// two-node lab, with `wait` the speaker's graceful-shutdown wait (the
/// listener stops no sooner after a drain). `timeout` bounds every wait
/// for the routers.
pub fn run_scenarios(
    t: &mut Traffic<'_>,
    ops: &mut dyn Operations,
    wait: Duration,
    timeout: Duration,
) -> Vec<Outcome> {
    let mut out = Vec::new();
    let all = t.addrs();
    let mut window = |t: &mut Traffic<'_>,
                      scenario: &'static str,
                      run: &mut dyn FnMut(&mut Traffic<'_>) -> Checks| {
        t.assert_all_serve(scenario, timeout);
        let from = now_ms();
        let (after_move, during_gap) = run(t);
        std::thread::sleep(Duration::from_millis(500));
        let tally = t.client.tally(from, now_ms(), SETTLE);
        out.push(Outcome {
            scenario,
            tally,
            after_move,
            during_gap,
        });
    };

    window(t, "1 rolling restart", &mut |t| {
        for i in 0..t.lab.nodes.len() {
            ops.restart(i);
            t.lab.wait_next_hops(&all, timeout);
        }
        (None, None)
    });
    window(t, "2 drain, listener stopped after the wait", &mut |t| {
        let start = std::time::Instant::now();
        ops.drain(0);
        let moved = t.moved_off_first(timeout);
        if let Some(left) = wait.checked_sub(start.elapsed()) {
            std::thread::sleep(left);
        }
        t.stop_server(0);
        std::thread::sleep(Duration::from_secs(1));
        t.start_server(0);
        ops.undrain(0);
        t.lab.wait_next_hops(&all, timeout);
        (Some(moved), None)
    });
    window(t, "3 eTP Local endpoint not ready", &mut |t| {
        ops.endpoint_not_ready(0);
        let moved = t.moved_off_first(timeout);
        t.stop_server(0);
        std::thread::sleep(Duration::from_secs(1));
        t.start_server(0);
        ops.endpoint_ready(0);
        t.lab.wait_next_hops(&all, timeout);
        (Some(moved), None)
    });
    window(t, "4 pod restart, datapath kept", &mut |t| {
        ops.pod_stop(0);
        let gap = t.over(Duration::from_secs(1));
        ops.pod_start(0);
        t.lab.wait_next_hops(&all, timeout);
        (None, Some(gap))
    });
    window(t, "5 node shutting down", &mut |t| {
        ops.node_shutdown(0);
        t.stop_server(0);
        // The node is gone: the others carry everything.
        let rest: Vec<Ipv4Addr> = all[1..].to_vec();
        t.lab.wait_next_hops(&rest, timeout);
        std::thread::sleep(Duration::from_secs(1));
        (None, None)
    });
    out
}

/// The outcomes as a Markdown table's rows: scenario, attempts, served by
/// each node, failed, slowest.
pub fn outcome_rows(speaker: &str, outcomes: &[Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .map(|o| {
            let t = &o.tally;
            format!(
                "| {} | {speaker} | {} | {} | {} | **{}** | {} ms |",
                o.scenario,
                t.attempts(),
                t.served_by("node1"),
                t.served_by("node2"),
                t.failures.len(),
                t.slowest_ms
            )
        })
        .collect()
}

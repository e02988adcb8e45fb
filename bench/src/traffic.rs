//! The zero-loss scenarios (testlab::traffic::run_scenarios) with holdfast
//! (the same operations as `tests/zero_loss.rs`, shared by path) and with a
//! speaker that simply withdraws: BIRD 2 on each node, the VIP from
//! `protocol static`. For BIRD each step is its natural equivalent:
//!
//! - restart, pod restart: SIGTERM (BIRD closes with Cease; FRR withdraws),
//!   then BIRD started again;
//! - drain, endpoint not ready: the static protocol disabled (`birdc
//!   disable vip`): the route is withdrawn at once; enabled again after;
//! - node shutdown: SIGTERM to BIRD as the machine stops, the listener
//!   stopping with it.
//!
//! Failed connections are counted, not asserted: the figures go to
//! BENCHMARKS.md side by side.

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use testlab::traffic::{
    EcmpLab, NODE_ASN, Operations, Outcome, TOR_ASN, Traffic, VIP, outcome_rows, run_scenarios,
};
use testlab::{Bird, Frr, Signal, wait_for};

use crate::zero_loss_holdfast::{HoldfastOps, WAIT};

const LONG: Duration = Duration::from_secs(60);

struct BirdOps<'a> {
    lab: &'a EcmpLab,
    frr: Frr,
    birds: Vec<Option<Bird>>,
}

impl<'a> BirdOps<'a> {
    fn start(lab: &'a EcmpLab) -> BirdOps<'a> {
        let frr = Frr::start_forwarding(&lab.tor, &lab.tor_conf(""));
        let mut ops = BirdOps {
            lab,
            frr,
            birds: Vec::new(),
        };
        for i in 0..lab.nodes.len() {
            ops.birds.push(None);
            ops.start_bird(i);
        }
        ops
    }

    fn conf(&self, i: usize) -> String {
        let n = &self.lab.nodes[i];
        format!(
            "router id {addr};\nprotocol device {{}}\n\
             protocol static vip {{ ipv4; route {VIP}/32 blackhole; }}\n\
             protocol bgp tor {{\n  local {addr} as {NODE_ASN};\n  neighbor {tor} as {TOR_ASN};\n  \
             hold time 9;\n  connect delay time 1;\n  connect retry time 2;\n  \
             error wait time 1, 5;\n  ipv4 {{ import none; export all; }};\n}}\n",
            addr = n.addr,
            tor = n.tor_addr,
        )
    }

    fn has_path(&self, i: usize) -> bool {
        let peer = self.lab.nodes[i].addr.to_string();
        self.frr.prefix(&format!("{VIP}/32")).is_some_and(|r| {
            r["paths"]
                .as_array()
                .is_some_and(|ps| ps.iter().any(|p| p["peer"]["peerId"] == peer.as_str()))
        })
    }

    fn wait_path(&self, i: usize, present: bool) {
        wait_for(LONG, "FRR's path from the BIRD node", || {
            if self.has_path(i) == present {
                Ok(())
            } else {
                Err(format!("present: {}", !present))
            }
        });
    }

    fn start_bird(&mut self, i: usize) {
        let conf = self.conf(i);
        self.birds[i] = Some(Bird::start(&self.lab.nodes[i].ns, &conf));
        self.frr
            .wait_established(IpAddr::V4(self.lab.nodes[i].addr), LONG);
        self.wait_path(i, true);
    }

    fn stop_bird(&mut self, i: usize) {
        let mut bird = self.birds[i].take().expect("BIRD is running");
        bird.process().kill(Signal::Term);
        bird.process().wait_exit(Duration::from_secs(30));
    }

    fn birdc(&self, i: usize, command: &str) {
        self.birds[i].as_ref().expect("BIRD is running").birdc(command);
    }
}

impl Operations for BirdOps<'_> {
    fn name(&self) -> String {
        "BIRD".into()
    }
    fn restart(&mut self, i: usize) {
        self.stop_bird(i);
        self.start_bird(i);
    }
    fn drain(&mut self, i: usize) {
        self.birdc(i, "disable vip");
    }
    fn undrain(&mut self, i: usize) {
        self.birdc(i, "enable vip");
        self.wait_path(i, true);
    }
    fn endpoint_not_ready(&mut self, i: usize) {
        self.drain(i);
    }
    fn endpoint_ready(&mut self, i: usize) {
        self.undrain(i);
    }
    fn pod_stop(&mut self, i: usize) {
        self.stop_bird(i);
    }
    fn pod_start(&mut self, i: usize) {
        self.start_bird(i);
    }
    fn node_shutdown(&mut self, i: usize) {
        // As the machine stops: BIRD's SIGTERM, and the listener goes at
        // the same time (the runner stops it when this returns).
        let bird = self.birds[i].as_mut().expect("BIRD is running");
        bird.process().kill(Signal::Term);
    }
}

/// Every speaker's outcomes, in a fresh lab each.
pub fn run(holdfast: &Path) -> Vec<(String, Vec<Outcome>)> {
    let mut all = Vec::new();
    {
        let lab = EcmpLab::new(2);
        let mut ops = HoldfastOps::start(&lab, holdfast);
        let mut traffic = Traffic::start(&lab);
        let outcomes = run_scenarios(&mut traffic, &mut ops, WAIT, LONG);
        eprintln!("traffic holdfast: {:#?}", summary(&outcomes));
        all.push((ops.name(), outcomes));
    }
    {
        let lab = EcmpLab::new(2);
        let mut ops = BirdOps::start(&lab);
        let mut traffic = Traffic::start(&lab);
        let outcomes = run_scenarios(&mut traffic, &mut ops, WAIT, LONG);
        eprintln!("traffic BIRD: {:#?}", summary(&outcomes));
        all.push((ops.name(), outcomes));
    }
    all
}

fn summary(outcomes: &[Outcome]) -> Vec<(&'static str, u64, usize)> {
    outcomes
        .iter()
        .map(|o| (o.scenario, o.tally.attempts(), o.tally.failures.len()))
        .collect()
}

pub const BEGIN: &str = "<!-- zero-loss: written by bench/run.sh --only traffic -->";
pub const END: &str = "<!-- /zero-loss -->";

/// The BENCHMARKS.md section.
pub fn section(results: &[(String, Vec<Outcome>)], command: &str, machine: &str) -> String {
    let mut s = format!(
        "{BEGIN}\n## Zero-loss operations: failed connections\n\n\
         Two nodes behind one FRR ToR doing ECMP to a shared VIP \
         (`fib_multipath_hash_policy=1`), a TCP listener on each node, a client \
         opening a new connection every 20 ms (2 s timeout each; a failure is a \
         refused, reset or timed-out connection or one that gave no answer). \
         The scenarios are those of `tests/zero_loss.rs`, run by the same code \
         (testlab::traffic); BIRD does the natural equivalent of each step \
         (bench/src/traffic.rs): it withdraws at once on a drain or a not-ready \
         endpoint, closes with Cease on SIGTERM (no graceful restart), and is \
         stopped with the node's listener on a node shutdown. `node1`/`node2`: \
         connections each node answered during the scenario (in 4, a speaker \
         without graceful restart moves the traffic away while it restarts).\n\n\
         Command: `{command}`. {machine} The machine was shared with other \
         builds: the failure counts do not depend on its speed, the times do.\n\n\
         | scenario | speaker | attempts | node1 | node2 | failed | slowest |\n|---|---|---|---|---|---|---|\n"
    );
    let n = results.first().map_or(0, |(_, o)| o.len());
    for k in 0..n {
        for (name, outcomes) in results {
            if let Some(row) = outcome_rows(name, &outcomes[k..=k]).pop() {
                s.push_str(&row);
                s.push('\n');
            }
        }
    }
    s.push('\n');
    s.push_str(END);
    s.push('\n');
    s
}

/// `md` with the section between [`BEGIN`] and [`END`] replaced by
/// `section`, or `section` appended.
pub fn splice(md: &str, section: &str) -> String {
    match (md.find(BEGIN), md.find(END)) {
        (Some(b), Some(e)) if e > b => {
            let after = &md[e + END.len()..];
            format!(
                "{}{}{}",
                &md[..b],
                section.trim_end(),
                after
            )
        }
        _ => format!("{}\n\n{section}", md.trim_end()),
    }
}

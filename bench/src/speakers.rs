//! The four speakers, each started in the node namespace with N /32 routes
//! given the way it takes them fastest, and each able to withdraw and
//! re-announce one route (the churn VIP) through its own interface.

use std::path::{Path, PathBuf};

use testlab::{Bird, ExaBgp, Gobgp, LabDir, Netns, NsProcess};

use crate::mrt;

pub const NODE: &str = "192.0.2.2";
pub const TOR: &str = "192.0.2.1";
/// The VIP every speaker carries besides the bulk routes, removed and
/// re-added during the churn run.
pub const CHURN_VIP: &str = "198.51.100.99";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The binary given with `--holdfast` (bench/run.sh: the static musl
    /// build the image ships).
    Holdfast,
    /// The binary given with `--holdfast-glibc` (bench/run.sh: `cargo build
    /// --release`, docs/src/install/build.md); bulk only, like the floor.
    HoldfastGlibc,
    /// The binary given with `--holdfast-fixed` (bench/run.sh: the static
    /// build linked at a fixed address, no PIE): bulk only, to show what
    /// address randomisation costs in RSS.
    HoldfastFixed,
    Bird,
    Gobgp,
    ExaBgp,
    /// `holdfast-floor`: pre-built packed UPDATEs written in one go, the
    /// least work a speaker can do (bulk only: no churn, no idle run).
    Floor,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::Holdfast,
        Kind::HoldfastGlibc,
        Kind::HoldfastFixed,
        Kind::Bird,
        Kind::Gobgp,
        Kind::ExaBgp,
        Kind::Floor,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Holdfast => "holdfast",
            Kind::HoldfastGlibc => "holdfast (glibc)",
            Kind::HoldfastFixed => "holdfast (musl, no PIE)",
            Kind::Bird => "BIRD",
            Kind::Gobgp => "gobgpd",
            Kind::ExaBgp => "ExaBGP",
            Kind::Floor => "floor",
        }
    }

    /// Whether the bulk section loads this speaker more than once: the
    /// figures the "× floor" targets compare (the others take seconds a
    /// run and are compared by far larger ratios).
    pub fn repeats_bulk(self) -> bool {
        matches!(
            self,
            Kind::Holdfast | Kind::HoldfastGlibc | Kind::HoldfastFixed | Kind::Floor
        )
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| {
            k.name().eq_ignore_ascii_case(s)
                || (*k == Kind::HoldfastGlibc && s == "glibc")
                || (*k == Kind::HoldfastFixed && s == "fixed")
        })
    }
}

/// Whether the ELF binary at `bin` is statically linked (no program
/// interpreter, i.e. no PT_INTERP header, whose path names the dynamic
/// loader near the start of the file).
pub fn is_static(bin: &Path) -> bool {
    let head = std::fs::read(bin)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()))
        .into_iter()
        .take(4096)
        .collect::<Vec<u8>>();
    !head.windows(3).any(|w| w == b"ld-")
}

/// The i-th bulk route: 198.18.0.0/15 counted up.
pub fn bulk_addr(i: usize) -> [u8; 4] {
    let i = i as u32;
    [198, 18 + (i >> 16) as u8, (i >> 8) as u8, i as u8]
}

pub fn bulk_prefixes(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let a = bulk_addr(i);
            format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3])
        })
        .collect()
}

pub enum Daemon {
    Holdfast {
        process: NsProcess,
        _dir: LabDir,
        vips: PathBuf,
        bulk: String,
    },
    Bird(Bird),
    Gobgp(Gobgp),
    ExaBgp(ExaBgp),
    Floor {
        process: NsProcess,
        _dir: LabDir,
    },
}

pub struct Speaker {
    pub daemon: Daemon,
}

pub fn holdfast_config(vips: &Path) -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"{NODE}\"\nhostname = \"bench-node\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"{TOR}\"\nasn = 65000\nhold_time = \"9s\"\n\
         keepalive = \"3s\"\nconnect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\n\
         [source]\nkind = \"file\"\npath = \"{}\"\n\n\
         [stability]\nwithdraw_hold_down = \"30s\"\n\n\
         [[advertisement]]\nname = \"public\"\n",
        vips.display()
    )
}

pub fn vip_entries(addrs: &[String]) -> String {
    let mut s = String::with_capacity(addrs.len() * 30);
    for a in addrs {
        s.push_str("[[vip]]\naddress = \"");
        s.push_str(a);
        s.push_str("\"\n");
    }
    s
}

/// Replaces `path` the way editors and config management do: a new file
/// renamed over it.
pub fn write_atomically(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the new file");
    std::fs::rename(&tmp, path).expect("rename it over the old one");
}

/// `holdfast run` in `ns` with `config`, its state directory and log in
/// `dir`.
pub fn start_holdfast(
    ns: &Netns,
    bin: &Path,
    dir: &LabDir,
    config: &Path,
    env: &[(&str, &str)],
) -> NsProcess {
    let (bin, config) = (bin.display().to_string(), config.display().to_string());
    let state = dir.join("state").display().to_string();
    let argv = [
        bin.as_str(),
        "run",
        "--config",
        &config,
        "--state-dir",
        &state,
    ];
    NsProcess::start_logged(ns, "holdfast", &argv, env, &dir.join("holdfast.log"))
}

impl Speaker {
    /// Starts `kind` in `ns` with the N bulk routes and the churn VIP.
    pub fn start(kind: Kind, ns: &Netns, n: usize, holdfast_bin: &Path) -> Speaker {
        let prefixes = bulk_prefixes(n);
        let daemon = match kind {
            Kind::Holdfast | Kind::HoldfastGlibc | Kind::HoldfastFixed => {
                let dir = LabDir::new("holdfast");
                let bulk = vip_entries(&prefixes);
                let vips = dir.write(
                    "vips.toml",
                    &format!("{bulk}{}", vip_entries(&[CHURN_VIP.into()])),
                );
                let config = dir.write("holdfast.toml", &holdfast_config(&vips));
                let process = start_holdfast(ns, holdfast_bin, &dir, &config, &[]);
                Daemon::Holdfast {
                    process,
                    _dir: dir,
                    vips,
                    bulk,
                }
            }
            Kind::Floor => {
                // Built beside the harness (bench/src/bin/holdfast-floor.rs).
                let bin = std::env::current_exe()
                    .expect("the harness's path")
                    .with_file_name("holdfast-floor");
                let (bin, n) = (bin.display().to_string(), n.to_string());
                let dir = LabDir::new("floor");
                let argv = [bin.as_str(), NODE, TOR, "65001", &n, CHURN_VIP];
                let process = NsProcess::start_logged(
                    ns,
                    "holdfast-floor",
                    &argv,
                    &[],
                    &dir.join("floor.log"),
                );
                Daemon::Floor { process, _dir: dir }
            }
            Kind::Bird => {
                let mut routes = String::with_capacity(n * 40);
                for p in &prefixes {
                    routes.push_str("  route ");
                    routes.push_str(p);
                    routes.push_str("/32 blackhole;\n");
                }
                let conf = format!(
                    "router id {NODE};\n\
                     protocol device {{}}\n\
                     protocol static bulk {{\n  ipv4;\n{routes}}}\n\
                     protocol static churn {{ ipv4; route {CHURN_VIP}/32 blackhole; }}\n\
                     protocol bgp tor {{\n  local {NODE} as 65001;\n  neighbor {TOR} as 65000;\n  \
                     hold time 9;\n  connect delay time 1;\n  connect retry time 2;\n  \
                     error wait time 1, 5;\n  ipv4 {{ import none; export all; }};\n}}\n"
                );
                Daemon::Bird(Bird::start(ns, &conf))
            }
            Kind::Gobgp => {
                let conf = format!(
                    "[global.config]\n  as = 65001\n  router-id = \"{NODE}\"\n  local-address-list = [\"{NODE}\"]\n\
                     [[neighbors]]\n  [neighbors.config]\n    neighbor-address = \"{TOR}\"\n    peer-as = 65000\n\
                     [neighbors.timers.config]\n    connect-retry = 1\n    hold-time = 9\n    keepalive-interval = 3\n\
                     [global.apply-policy.config]\n  export-policy-list = [\"no-padding\"]\n  default-export-policy = \"accept-route\"\n\
                     [[defined-sets.prefix-sets]]\n  prefix-set-name = \"padding\"\n  [[defined-sets.prefix-sets.prefix-list]]\n    \
                     ip-prefix = \"198.19.248.0/21\"\n    masklength-range = \"21..32\"\n\
                     [[policy-definitions]]\n  name = \"no-padding\"\n  [[policy-definitions.statements]]\n    name = \"drop\"\n    \
                     [policy-definitions.statements.conditions.match-prefix-set]\n      prefix-set = \"padding\"\n    \
                     [policy-definitions.statements.actions]\n      route-disposition = \"reject-route\"\n"
                );
                let gobgp = Gobgp::start(ns, &conf);
                let mut addrs: Vec<[u8; 4]> = (0..n).map(bulk_addr).collect();
                addrs.push([198, 51, 100, 99]);
                let dump = mrt::table_dump(&addrs, 2048, [192, 0, 2, 2], [192, 0, 2, 2]);
                let path = gobgp.dir().join("bulk.mrt");
                std::fs::write(&path, dump).expect("write the MRT dump");
                gobgp.cli(&["mrt", "inject", "global", &path.display().to_string()]);
                Daemon::Gobgp(gobgp)
            }
            Kind::ExaBgp => {
                let mut routes = String::with_capacity(n * 50);
                for p in prefixes
                    .iter()
                    .chain(std::iter::once(&CHURN_VIP.to_string()))
                {
                    routes.push_str("        route ");
                    routes.push_str(p);
                    routes.push_str("/32 next-hop self;\n");
                }
                let conf = format!(
                    "neighbor {TOR} {{\n    router-id {NODE};\n    local-address {NODE};\n    local-as 65001;\n    \
                     peer-as 65000;\n    hold-time 9;\n    family {{ ipv4 unicast; }}\n    \
                     api {{ processes [ testlab ]; }}\n    static {{\n{routes}    }}\n}}\n"
                );
                Daemon::ExaBgp(ExaBgp::start(ns, &[NODE.parse().unwrap()], &conf))
            }
        };
        Speaker { daemon }
    }

    pub fn pid(&mut self) -> u32 {
        match &mut self.daemon {
            Daemon::Holdfast { process, .. } => process.pid(),
            Daemon::Bird(b) => b.process().pid(),
            Daemon::Gobgp(g) => g.process().pid(),
            Daemon::ExaBgp(e) => e.process().pid(),
            Daemon::Floor { process, .. } => process.pid(),
        }
    }

    /// The fallback when FRR stops receiving before it has everything:
    /// adds to gobgpd's RIB, one by one, the routes `gobgp mrt inject`
    /// lost (see [`mrt::table_dump`] for why it loses any).
    pub fn complete_injection(&mut self, expected: usize) {
        let Daemon::Gobgp(g) = &self.daemon else {
            return;
        };
        let rib = g.rib(testlab::Afi::Ipv4);
        let have: std::collections::HashSet<String> = rib
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let mut all = bulk_prefixes(expected - 1);
        all.push(CHURN_VIP.into());
        let mut added = 0;
        for p in all {
            let p = format!("{p}/32");
            if !have.contains(&p) {
                g.cli(&["global", "rib", "add", &p, "-a", "ipv4"]);
                added += 1;
            }
        }
        eprintln!("gobgpd: added {added} routes that gobgp mrt inject lost");
    }

    /// Takes the churn VIP away (`present = false`) or brings it back.
    pub fn set_churn_vip(&mut self, present: bool) {
        let route = format!("{CHURN_VIP}/32");
        match &mut self.daemon {
            Daemon::Holdfast { vips, bulk, .. } => {
                let text = if present {
                    format!("{bulk}{}", vip_entries(&[CHURN_VIP.into()]))
                } else {
                    bulk.clone()
                };
                write_atomically(vips, &text);
            }
            Daemon::Bird(b) => {
                b.birdc(if present {
                    "enable churn"
                } else {
                    "disable churn"
                });
            }
            Daemon::Gobgp(g) => {
                let verb = if present { "add" } else { "del" };
                g.cli(&["global", "rib", verb, &route, "-a", "ipv4"]);
            }
            Daemon::ExaBgp(e) => {
                let r = format!("{route} next-hop self");
                if present {
                    e.announce(&r);
                } else {
                    e.withdraw(&r);
                }
            }
            // The harness runs no churn with it (main.rs, bulk_run).
            Daemon::Floor { .. } => {
                panic!("the floor speaker sends its routes once and nothing else")
            }
        }
    }

    pub fn assert_running(&mut self) {
        let doing = "loading routes";
        match &mut self.daemon {
            Daemon::Holdfast { process, .. } => process.assert_running(doing),
            Daemon::Bird(b) => b.process().assert_running(doing),
            Daemon::Gobgp(g) => g.process().assert_running(doing),
            Daemon::ExaBgp(e) => e.process().assert_running(doing),
            Daemon::Floor { process, .. } => process.assert_running(doing),
        }
    }

    pub fn log_tail(&mut self) -> String {
        match &mut self.daemon {
            Daemon::Holdfast { process, .. } => process.log_tail(40),
            Daemon::Bird(b) => b.process().log_tail(40),
            Daemon::Gobgp(g) => g.process().log_tail(40),
            Daemon::ExaBgp(e) => e.process().log_tail(40),
            Daemon::Floor { process, .. } => process.log_tail(40),
        }
    }
}

//! The integration tests' kit: holdfast's config built typed
//! ([`config::Config`]), the daemon of a test in a network namespace or on
//! loopback ([`daemon::Holdfast`]), the usual lab with FRR as the ToR
//! ([`tor::Tor`]), and what FRR and the VIP file look like. CONTRIBUTING.md
//! ("Writing a test") shows them together.
#![allow(dead_code, unused_imports)]

pub mod cluster;
pub mod config;
pub mod daemon;
pub mod peers;
pub mod tor;

use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use testlab::Netns;

pub use config::{
    Advertisement, Bfd, Config, Damping, Degraded, ExportRule, GracefulRestart, NodeOverride, Peer,
    PeerAsn, Probe, Selector, Stability, Tenant,
};
pub use daemon::{Container, Holdfast, free_port, metric_value};
pub use tor::Tor;

pub const BIN: &str = env!("CARGO_BIN_EXE_holdfast");

/// A generous bound for anything that crosses real sockets.
pub const LONG: Duration = Duration::from_secs(60);

/// The config of a daemon on loopback ([`Holdfast::local`]): AS 65001,
/// router ID 192.0.2.254, one peer `tor1` at 127.0.0.2 port 9, where
/// nothing listens (the session stays down and nothing leaves the
/// machine; a connection attempt every 30 s), and the file source.
pub fn loopback_config() -> Config {
    Config::new()
        .speaker(65001, "192.0.2.254")
        .peer(
            Peer::new("tor1", "127.0.0.2", 65000)
                .port(9)
                .connect_retry("30s"),
        )
        .file_source()
}

/// A minimal VIP file.
pub fn vips(list: &[&str]) -> String {
    list.iter()
        .map(|a| format!("[[vip]]\naddress = \"{a}\"\nservice = \"demo/web\"\n\n"))
        .collect()
}

/// FRR as the ToR: one eBGP neighbor (or more), IPv4 and IPv6 unicast
/// activated for each, fast timers.
pub fn frr_conf(asn: u32, router_id: &str, neighbors: &[(&str, u32)], extra: &str) -> String {
    let remotes: Vec<(&str, String)> = neighbors
        .iter()
        .map(|(addr, remote)| (*addr, remote.to_string()))
        .collect();
    frr_conf_remote(asn, router_id, &remotes, " bgp graceful-restart\n", extra)
}

/// `frr_conf` with each neighbor's `remote-as` as written (`"external"`,
/// `"internal"` or a number) and `router` lines of its own in place of
/// graceful restart (`""` for none).
pub fn frr_conf_remote(
    asn: u32,
    router_id: &str,
    neighbors: &[(&str, impl std::fmt::Display)],
    router: &str,
    extra: &str,
) -> String {
    let mut c = format!(
        "frr defaults datacenter\nrouter bgp {asn}\n bgp router-id {router_id}\n no bgp ebgp-requires-policy\n no bgp network import-check\n{router}"
    );
    for (addr, remote) in neighbors {
        c.push_str(&format!(" neighbor {addr} remote-as {remote}\n neighbor {addr} timers connect 1\n neighbor {addr} timers 3 9\n"));
    }
    c.push_str(extra);
    for fam in ["ipv4", "ipv6"] {
        c.push_str(&format!(" address-family {fam} unicast\n"));
        for (addr, _) in neighbors {
            c.push_str(&format!("  neighbor {addr} activate\n"));
        }
        c.push_str(" exit-address-family\n");
    }
    c.push_str("exit\n");
    c
}

/// A `TcpExt:` counter of namespace `ns` (`/proc/net/netstat`); a
/// missing counter fails.
pub fn tcp_ext(ns: &Netns, name: &str) -> u64 {
    let text = ns.run(&["cat", "/proc/net/netstat"]);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (
        lines.next().expect("a TcpExt header"),
        lines.next().expect("TcpExt values"),
    );
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(n, _)| *n == name)
        .unwrap_or_else(|| panic!("no {name} in /proc/net/netstat:\n{text}"))
        .1
        .parse()
        .expect("a number")
}

/// Makes a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Runs `holdfast ARGS` to the end, or fails the test after `within`
/// (a hang is a failure, not a stuck test): exit status, stdout, stderr,
/// and how long it took.
pub fn run_within(args: &[&str], within: Duration) -> (ExitStatus, String, String, Duration) {
    use std::io::Read;
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("holdfast starts");
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            let mut out = String::new();
            let mut err = String::new();
            child.stdout.take().map(|mut s| s.read_to_string(&mut out));
            child.stderr.take().map(|mut s| s.read_to_string(&mut err));
            return (status, out, err, started.elapsed());
        }
        if started.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("holdfast {args:?} did not finish within {within:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A probe test's node (192.0.2.2, AS 65001): peer tor1 (192.0.2.1, AS
/// 65000, fast timers), a 30 s hold-down (a probe's verdict never waits
/// for it), these advertisements.
pub fn probe_node(ads: &[Advertisement]) -> String {
    ads.iter()
        .cloned()
        .fold(
            Config::node(65001, "192.0.2.2")
                .peer(Peer::new("tor1", "192.0.2.1", 65000).fast())
                .hold_down("30s"),
            Config::advertisement,
        )
        .to_toml()
}

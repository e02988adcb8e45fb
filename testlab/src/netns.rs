//! Network namespaces: one per simulated host.
//!
//! A namespace is named `tl-PID-SERIAL-ROLE`: unique among the threads of one
//! test process (serial) and among concurrent test processes (pid). Interface
//! names never derive from it — veth ends are created directly inside their
//! namespaces (`ip -n NS link add …`), so they never meet in the root
//! namespace and need no unique names.
//!
//! Dropping a [`Netns`] SIGKILLs every process still inside it and deletes
//! it, also while a test panics. A test process killed outright (SIGKILL,
//! timeout) cannot clean up; the first lab of the next test process removes
//! namespaces and directories whose creator pid is gone (set
//! `TESTLAB_NO_SWEEP` to disable that).

use std::net::{IpAddr, SocketAddr};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::require::{require_root, require_tools};

/// Prefix of every namespace this crate creates.
pub const NETNS_PREFIX: &str = "tl-";

/// Environment variable that disables the sweep of stale namespaces and
/// directories left by killed test processes.
pub const NO_SWEEP_ENV: &str = "TESTLAB_NO_SWEEP";

static SERIAL: AtomicU64 = AtomicU64::new(0);

/// A process-wide counter for unique names.
pub(crate) fn next_serial() -> u64 {
    SERIAL.fetch_add(1, Ordering::Relaxed)
}

/// Runs a command, panicking with its stderr when it cannot start or fails.
pub(crate) fn run_checked(cmd: &mut Command, what: &str) -> Output {
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    if !output.status.success() {
        panic!(
            "{what}: {cmd:?} failed ({})\nstdout:\n{}\nstderr:\n{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output
}

/// What a TCP connection attempt from inside a namespace ran into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TcpProbe {
    /// The three-way handshake completed.
    Connected,
    /// The peer answered with a RST: reachable, nothing listening.
    Refused,
    /// No answer within the timeout (black hole, link down, filtered).
    TimedOut,
    /// Anything else, e.g. "Network is unreachable" (no route).
    Failed(String),
}

impl TcpProbe {
    /// True when the far end answered at all (connected or refused).
    pub fn answered(&self) -> bool {
        matches!(self, TcpProbe::Connected | TcpProbe::Refused)
    }
}

/// A network namespace with `lo` up, IPv6 addresses kept across link down
/// and no duplicate address detection. Deleted (with everything running in
/// it) on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates a namespace; `role` (e.g. `router`) is part of its name so that
    /// `ip netns list` and panic messages say which host is which.
    pub fn new(role: &str) -> Netns {
        require_root();
        require_tools(&["ip", "sysctl", "kill"]);
        sweep_stale_once();
        let pid = std::process::id();
        let name = loop {
            let name = format!("{NETNS_PREFIX}{pid}-{}-{role}", next_serial());
            let output = Command::new("ip")
                .args(["netns", "add", &name])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run ip netns add: {e}"));
            if output.status.success() {
                break name;
            }
            let stderr = String::from_utf8_lossy(&output.stderr);
            // Left by an earlier process with the same pid: take the next serial.
            if !stderr.contains("File exists") {
                panic!("ip netns add {name} failed: {stderr}");
            }
        };
        let ns = Netns { name };
        ns.ip(&["link", "set", "dev", "lo", "up"]);
        // keep_addr_on_down: without it the kernel drops IPv6 addresses when a
        // link goes down, and a link-flap test would come back without them.
        // accept_dad=0: link-local addresses of veths created later are usable
        // at once instead of tentative for a second (FRR with zebra waits for
        // one).
        ns.sysctls(&[
            ("net.ipv6.conf.all.disable_ipv6", "0"),
            ("net.ipv6.conf.default.disable_ipv6", "0"),
            ("net.ipv6.conf.all.keep_addr_on_down", "1"),
            ("net.ipv6.conf.default.keep_addr_on_down", "1"),
            ("net.ipv6.conf.all.accept_dad", "0"),
            ("net.ipv6.conf.default.accept_dad", "0"),
        ]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A `Command` that runs `argv` inside the namespace (`ip netns exec`),
    /// for callers that need their own stdio or environment. The program
    /// inherits this process's environment plus whatever is set on the
    /// returned command.
    pub fn command(&self, argv: &[&str]) -> Command {
        assert!(!argv.is_empty(), "Netns::command needs a program");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(argv);
        cmd
    }

    /// Runs `argv` inside the namespace and returns its output, whatever the
    /// exit status.
    pub fn exec(&self, argv: &[&str]) -> Output {
        self.command(argv)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {argv:?} in {}: {e}", self.name))
    }

    /// Runs `argv` inside the namespace; panics with stdout and stderr unless
    /// it succeeds. Returns stdout.
    pub fn run(&self, argv: &[&str]) -> String {
        let output = run_checked(&mut self.command(argv), &format!("in netns {}", self.name));
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Starts `argv` inside the namespace with stdio discarded. Use
    /// [`crate::NsProcess`] to keep its output. The namespace's drop kills it
    /// if the caller has not.
    pub fn spawn(&self, argv: &[&str]) -> Child {
        self.command(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {argv:?} in {}: {e}", self.name))
    }

    /// Runs `ip -n NS ARGS…` (no `ip netns exec` needed for `ip` itself);
    /// panics on failure, returns stdout.
    ///
    /// Always name interfaces with `dev NAME` / `name NAME`: `ip` accepts
    /// abbreviations, so an interface called `a` in `ip link set a up` is
    /// read as `address`.
    pub fn ip(&self, args: &[&str]) -> String {
        let output = run_checked(
            Command::new("ip").args(["-n", &self.name]).args(args),
            &format!("in netns {}", self.name),
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// Sets one sysctl inside the namespace (`net.*` keys are per namespace).
    pub fn sysctl(&self, key: &str, value: &str) {
        self.sysctls(&[(key, value)]);
    }

    /// Sets several sysctls with one `sysctl -w` call.
    pub fn sysctls(&self, settings: &[(&str, &str)]) {
        let assignments: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut argv = vec!["sysctl", "-q", "-w"];
        argv.extend(assignments.iter().map(String::as_str));
        self.run(&argv);
    }

    /// Turns the namespace into a router for IPv4 and IPv6.
    pub fn enable_forwarding(&self) {
        self.sysctls(&[
            ("net.ipv4.ip_forward", "1"),
            ("net.ipv6.conf.all.forwarding", "1"),
            ("net.ipv6.conf.default.forwarding", "1"),
        ]);
    }

    /// Adds an address (`192.0.2.1/24`, `2001:db8::1/64`) to an interface.
    /// IPv6 addresses get `nodad` so they are usable at once.
    pub fn add_address(&self, ifname: &str, cidr: &str) {
        if cidr.contains(':') {
            self.ip(&["-6", "addr", "add", cidr, "dev", ifname, "nodad"]);
        } else {
            self.ip(&["addr", "add", cidr, "dev", ifname]);
        }
    }

    /// Adds a static route `dest via gateway`.
    pub fn add_route(&self, dest: &str, via: &str) {
        let family = if dest.contains(':') { "-6" } else { "-4" };
        self.ip(&[family, "route", "add", dest, "via", via]);
    }

    pub fn set_link_up(&self, ifname: &str) {
        self.ip(&["link", "set", "dev", ifname, "up"]);
    }

    pub fn set_link_down(&self, ifname: &str) {
        self.ip(&["link", "set", "dev", ifname, "down"]);
    }

    /// Pids of every process inside the namespace.
    pub fn pids(&self) -> Vec<u32> {
        netns_pids(&self.name)
    }

    /// TCP ports something listens on inside the namespace (`ss -ltn`).
    pub fn listening_tcp_ports(&self) -> Vec<u16> {
        let out = self.run(&["ss", "-H", "-l", "-t", "-n"]);
        out.lines()
            .filter_map(|line| line.split_whitespace().nth(3))
            .filter_map(|local| local.rsplit(':').next()?.parse().ok())
            .collect()
    }

    /// TCP sockets of the namespace in one `state` (as `ss` names them:
    /// `established`, `syn-sent`, …), each as (local, peer) address, from
    /// `ss -Htn state STATE`. IPv4 peers of a dual-stack socket show as
    /// IPv4-mapped IPv6 addresses.
    pub fn tcp_sockets(&self, state: &str) -> Vec<(SocketAddr, SocketAddr)> {
        let out = self.run(&["ss", "-H", "-t", "-n", "state", state]);
        out.lines()
            .filter_map(|line| {
                // With one state asked for, ss leaves the State column out:
                // Recv-Q Send-Q Local Peer [Process].
                let fields: Vec<&str> = line.split_whitespace().collect();
                let local = fields.get(2)?.parse().ok()?;
                let peer = fields.get(3)?.parse().ok()?;
                Some((local, peer))
            })
            .collect()
    }

    /// Tries a TCP connection from inside the namespace (bash's /dev/tcp, so
    /// no extra tool is needed). A closed port still proves reachability: the
    /// far end answers with a RST ([`TcpProbe::Refused`]).
    pub fn tcp_probe(&self, addr: IpAddr, port: u16, timeout: Duration) -> TcpProbe {
        require_tools(&["bash", "timeout"]);
        let secs = format!("{:.1}", timeout.as_secs_f64());
        let script = format!("exec 3<>/dev/tcp/{addr}/{port}");
        let output = self.exec(&["timeout", &secs, "bash", "-c", &script]);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        match output.status.code() {
            Some(0) => TcpProbe::Connected,
            Some(124) => TcpProbe::TimedOut,
            _ if stderr.contains("Connection refused") => TcpProbe::Refused,
            _ if stderr.contains("timed out") => TcpProbe::TimedOut,
            _ => TcpProbe::Failed(stderr.trim().to_owned()),
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        remove_netns(&self.name);
    }
}

/// Names of all namespaces on the host (`ip netns list`).
pub fn list_netns() -> Vec<String> {
    let output = Command::new("ip")
        .args(["netns", "list"])
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| line.split_whitespace().next())
            .map(str::to_owned)
            .collect(),
        Err(_) => Vec::new(),
    }
}

fn netns_pids(name: &str) -> Vec<u32> {
    let output = Command::new("ip")
        .args(["netns", "pids", name])
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(out) => String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// Kills everything inside a namespace, waits until it is empty and deletes
/// it. Never panics: it runs from `Drop`, possibly during a panic.
fn remove_netns(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let pids = netns_pids(name);
        if pids.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            eprintln!("testlab: processes {pids:?} in netns {name} survive SIGKILL");
            break;
        }
        let mut kill = Command::new("kill");
        kill.arg("-KILL").args(pids.iter().map(u32::to_string));
        let _ = kill
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        std::thread::sleep(Duration::from_millis(50));
    }
    for attempt in 0..5 {
        let output = Command::new("ip")
            .args(["netns", "del", name])
            .stdin(Stdio::null())
            .output();
        match output {
            Ok(out) if out.status.success() => return,
            Ok(out) if attempt == 4 => eprintln!(
                "testlab: ip netns del {name} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(e) if attempt == 4 => eprintln!("testlab: cannot run ip netns del {name}: {e}"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// The creator pid encoded in a name `PREFIXPID-…`, if it has that form.
fn creator_pid(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.split('-').next()?.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Once per process: removes namespaces and lab directories whose creating
/// test process no longer exists.
pub(crate) fn sweep_stale_once() {
    static SWEEP: Once = Once::new();
    SWEEP.call_once(|| {
        if std::env::var_os(NO_SWEEP_ENV).is_some() {
            return;
        }
        for name in list_netns() {
            if creator_pid(&name, NETNS_PREFIX).is_some_and(|pid| !pid_alive(pid)) {
                remove_netns(&name);
            }
        }
        // Directories kept for inspection (TESTLAB_KEEP) stay until the
        // variable is unset.
        if std::env::var_os(crate::dir::KEEP_ENV).is_some() {
            return;
        }
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for entry in entries.flatten() {
            let file_name = entry.file_name();
            let Some(name) = file_name.to_str() else {
                continue;
            };
            if creator_pid(name, crate::dir::DIR_PREFIX).is_some_and(|pid| !pid_alive(pid)) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creator_pid_reads_the_pid_after_the_prefix() {
        assert_eq!(creator_pid("tl-4242-7-router", NETNS_PREFIX), Some(4242));
        assert_eq!(creator_pid("testlab-99-0-frr", "testlab-"), Some(99));
        assert_eq!(creator_pid("tl-router", NETNS_PREFIX), None);
        assert_eq!(creator_pid("other-4242-1", NETNS_PREFIX), None);
    }
}

//! GoBGP inside a namespace: 3.10 (Debian `gobgpd`) by default, or other
//! binaries ([`Gobgp::start_binaries`]: GoBGP v4, built by
//! `scripts/gobgp4.sh`). Its gRPC API listens on a loopback port of the
//! namespace, so the `gobgp` CLI must run inside the namespace too
//! (`ip netns exec NS gobgp -p PORT …`).

use std::net::IpAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use serde_json::Value;

use crate::Afi;
use crate::dir::LabDir;
use crate::netns::Netns;
use crate::process::NsProcess;
use crate::require::{require_root, require_tools};
use crate::wait::wait_for;

const START_TIMEOUT: Duration = Duration::from_secs(15);

/// API ports are handed out from here on, one per instance in this process,
/// skipping ports already listening in the namespace.
static NEXT_API_PORT: AtomicU16 = AtomicU16::new(50051);

/// A running gobgpd. Dropping it kills it (and prints its log if the test
/// is panicking).
#[derive(Debug)]
pub struct Gobgp {
    process: NsProcess,
    dir: LabDir,
    netns: String,
    port: u16,
    /// The `gobgp` CLI: a name on PATH or a path.
    cli: String,
}

impl Gobgp {
    /// Starts gobgpd with a TOML config (`[global.config]`, `[[neighbors]]`
    /// …). The API listens on 127.0.0.1:PORT inside the namespace, PORT
    /// chosen free; pprof is disabled (it would take localhost:6060 in every
    /// instance).
    pub fn start(ns: &Netns, toml_conf: &str) -> Gobgp {
        require_tools(&["gobgpd", "gobgp"]);
        Gobgp::start_binaries(ns, toml_conf, "gobgpd", "gobgp")
    }

    /// [`Gobgp::start`] with these binaries of gobgpd and its CLI (paths,
    /// or names on PATH) instead of the distribution's.
    pub fn start_binaries(ns: &Netns, toml_conf: &str, gobgpd: &str, cli: &str) -> Gobgp {
        require_root();
        let dir = LabDir::new("gobgp");
        let conf = dir.write("gobgpd.toml", toml_conf);
        let port = free_api_port(ns);
        let api = format!("127.0.0.1:{port}");
        let conf = conf.to_string_lossy().into_owned();
        let argv = [
            gobgpd,
            "-f",
            &conf,
            "-t",
            "toml",
            "--api-hosts",
            &api,
            "--pprof-disable",
            // Plain text log lines instead of JSON ones.
            "-p",
        ];
        let process = NsProcess::start_logged(ns, "gobgpd", &argv, &[], &dir.join("gobgpd.log"));
        let mut gobgp = Gobgp {
            process,
            dir,
            netns: ns.name().to_owned(),
            port,
            cli: cli.to_owned(),
        };
        wait_for(START_TIMEOUT, "gobgpd to answer on its API port", || {
            gobgp.process.assert_running("starting (config error?)");
            let out = gobgp.try_cli(&["global"]);
            if out.status.success() {
                Ok(())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).into_owned())
            }
        });
        gobgp
    }

    /// The gRPC API port inside the namespace.
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn log(&self) -> String {
        self.process.log()
    }

    pub fn process(&mut self) -> &mut NsProcess {
        &mut self.process
    }

    fn try_cli(&self, args: &[&str]) -> std::process::Output {
        let port = self.port.to_string();
        let mut cmd = std::process::Command::new("ip");
        cmd.args(["netns", "exec", &self.netns, &self.cli, "-p", &port])
            .args(args);
        cmd.stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run gobgp: {e}"))
    }

    /// Runs `gobgp -p PORT ARGS…` inside the namespace; panics (with
    /// gobgpd's log) unless it succeeds. Returns stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        let out = self.try_cli(args);
        if !out.status.success() {
            panic!(
                "gobgp {args:?} failed ({}):\n{}{}\ngobgpd log:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr),
                self.process.log_tail(60)
            );
        }
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Runs a CLI command with `-j` and parses the JSON.
    pub fn cli_json(&self, args: &[&str]) -> Value {
        let mut args = args.to_vec();
        args.push("-j");
        let out = self.cli(&args);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("gobgp {args:?} did not print JSON ({e}):\n{out}"))
    }

    /// The neighbor's session state in lower case: `idle`, `connect`,
    /// `active`, `opensent`, `openconfirm`, `established` (`unknown` when
    /// gobgpd reports none).
    pub fn neighbor_state(&self, addr: IpAddr) -> String {
        let json = self.cli_json(&["neighbor", &addr.to_string()]);
        let state = &json["state"]["session_state"];
        // gobgp 3 prints the protobuf enum as its number.
        let name = match state.as_u64() {
            Some(1) => "idle",
            Some(2) => "connect",
            Some(3) => "active",
            Some(4) => "opensent",
            Some(5) => "openconfirm",
            Some(6) => "established",
            _ => state.as_str().unwrap_or("unknown"),
        };
        name.to_ascii_lowercase()
    }

    /// Waits until the session with `addr` is established.
    pub fn wait_established(&self, addr: IpAddr, timeout: Duration) {
        wait_for(
            timeout,
            &format!("gobgpd neighbor {addr} to be established"),
            || {
                let state = self.neighbor_state(addr);
                if state == "established" {
                    Ok(())
                } else {
                    Err(state)
                }
            },
        );
    }

    /// The global RIB of a family (`global rib -a AFI -j`): an object from
    /// prefix to a list of paths (`best`, `attrs` with numeric types:
    /// `{"type":8,"communities":[…]}` is COMMUNITIES, each a u32).
    pub fn rib(&self, afi: Afi) -> Value {
        self.cli_json(&["global", "rib", "-a", afi.as_str()])
    }

    /// The paths of one exact prefix in the global RIB, if any.
    pub fn rib_lookup(&self, prefix: &str) -> Option<Value> {
        assert!(
            prefix.contains('/'),
            "Gobgp::rib_lookup needs PREFIX/LEN, got {prefix:?}"
        );
        let afi = Afi::of(prefix);
        let json = self.cli_json(&["global", "rib", "-a", afi.as_str(), prefix]);
        json.get(prefix).cloned()
    }

    /// Waits until the global RIB has `prefix` and returns its paths.
    pub fn wait_route(&self, prefix: &str, timeout: Duration) -> Value {
        wait_for(
            timeout,
            &format!("gobgpd to have a route for {prefix}"),
            || self.rib_lookup(prefix).ok_or_else(|| "no route".to_owned()),
        )
    }

    /// Routes received from a neighbor before policy (`neighbor ADDR adj-in`).
    pub fn adj_in(&self, addr: IpAddr, afi: Afi) -> Value {
        self.cli_json(&["neighbor", &addr.to_string(), "adj-in", "-a", afi.as_str()])
    }

    /// Originates a route: `global rib add -a AFI PREFIX EXTRA…`, e.g.
    /// `extra = ["community", "65001:100"]`. The next hop defaults to the
    /// session's local address for eBGP.
    pub fn add_route(&self, prefix: &str, extra: &[&str]) {
        let afi = Afi::of(prefix).as_str();
        let mut args = vec!["global", "rib", "add", "-a", afi, prefix];
        args.extend_from_slice(extra);
        self.cli(&args);
    }

    /// Withdraws a route originated with [`Gobgp::add_route`].
    pub fn del_route(&self, prefix: &str) {
        let afi = Afi::of(prefix).as_str();
        self.cli(&["global", "rib", "del", "-a", afi, prefix]);
    }
}

/// A loopback port nobody listens on inside `ns`, unique within this
/// process (so two instances started in parallel in one namespace differ).
fn free_api_port(ns: &Netns) -> u16 {
    let busy = ns.listening_tcp_ports();
    loop {
        let port = NEXT_API_PORT.fetch_add(1, Ordering::Relaxed);
        assert!(port < 60000, "ran out of gobgp API ports");
        if !busy.contains(&port) {
            return port;
        }
    }
}

//! A holdfast daemon in a network namespace, for the interop tests: its
//! config, its VIP file, its process and its API.
#![allow(dead_code)]

pub mod cluster;
pub mod peers;

use std::path::PathBuf;
use std::time::Duration;

use testlab::{LabDir, Netns, NsProcess, Signal};

pub const BIN: &str = env!("CARGO_BIN_EXE_holdfast");

/// A generous bound for anything that crosses real sockets.
pub const LONG: Duration = Duration::from_secs(60);

pub struct Holdfast<'a> {
    pub ns: &'a Netns,
    pub dir: LabDir,
    pub config: PathBuf,
    pub vips: PathBuf,
    pub process: Option<NsProcess>,
    pub env: Vec<(String, String)>,
    /// The command line before holdfast's own (e.g. `setpriv …` to run it
    /// as another user), and the binary: [`BIN`] unless a test gives
    /// another (a copy with file capabilities).
    pub wrapper: Vec<String>,
    pub bin: String,
    /// In a container (tests/image): `wrapper` is `podman run … IMAGE`,
    /// these are the container's arguments (the DaemonSet's), and the
    /// container is removed with the daemon.
    pub container_args: Option<Vec<String>>,
    pub container: Option<Container>,
}

/// A podman container removed when dropped (after the `podman run`
/// process, which a test's end kills, is gone).
pub struct Container {
    pub podman: Vec<String>,
    pub conf: PathBuf,
    pub name: String,
}

impl Container {
    fn podman(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(&self.podman[0])
            .args(&self.podman[1..])
            .args(args)
            .env("CONTAINERS_CONF", &self.conf)
            .output()
            .expect("podman")
    }

    /// The container's first process (holdfast), as the host sees it.
    pub fn pid(&self) -> u32 {
        let out = self.podman(&["inspect", "--format", "{{.State.Pid}}", &self.name]);
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no pid for container {}: {out:?}", self.name))
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        let _ = self.podman(&["rm", "--force", "--time", "0", &self.name]);
    }
}

impl<'a> Holdfast<'a> {
    /// Writes `config` (with `VIPS` replaced by the VIP file's path and
    /// `STATE` by a state directory) and `vips`, and starts the daemon.
    pub fn start(ns: &'a Netns, config: &str, vips: &str) -> Holdfast<'a> {
        Self::start_with(ns, config, vips, &[])
    }

    pub fn start_with(ns: &'a Netns, config: &str, vips: &str, args: &[&str]) -> Holdfast<'a> {
        Self::start_env(ns, config, vips, args, &[])
    }

    /// Also with environment variables (KUBECONFIG, NODE_NAME).
    pub fn start_env(
        ns: &'a Netns,
        config: &str,
        vips: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Holdfast<'a> {
        let mut h = Self::unstarted(ns, config, vips);
        h.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        h.run(args);
        h
    }

    /// Its directory with `config` (`VIPS` replaced) and `vips` written,
    /// not started yet.
    pub fn unstarted(ns: &'a Netns, config: &str, vips: &str) -> Holdfast<'a> {
        let dir = LabDir::new("holdfast");
        let vips_path = dir.write("vips.toml", vips);
        let config = config.replace("VIPS", &vips_path.display().to_string());
        let config_path = dir.write("holdfast.toml", &config);
        Holdfast {
            ns,
            dir,
            config: config_path,
            vips: vips_path,
            process: None,
            env: Vec::new(),
            wrapper: Vec::new(),
            bin: BIN.to_string(),
            container_args: None,
            container: None,
        }
    }

    /// Started as `wrapper… bin run …`: `bin` instead of [`BIN`], under a
    /// command that sets up its process (user, capabilities) and execs it.
    /// The state directory is made first and handed to `owner` (uid:gid),
    /// the user the wrapper runs holdfast as.
    pub fn start_wrapped(
        ns: &'a Netns,
        config: &str,
        vips: &str,
        wrapper: &[&str],
        bin: &str,
        owner: (u32, u32),
    ) -> Holdfast<'a> {
        let mut h = Self::unstarted(ns, config, vips);
        let state = h.dir.join("state");
        std::fs::create_dir(&state).expect("the state directory");
        std::os::unix::fs::chown(&state, Some(owner.0), Some(owner.1))
            .expect("chown the state directory");
        h.wrapper = wrapper.iter().map(|w| w.to_string()).collect();
        h.bin = bin.to_string();
        h.run(&[]);
        h
    }

    /// The daemon's `--state-dir` (its API socket is `api.sock` in it).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// `holdfast drain` or `undrain` (or any command taking
    /// `--state-dir`) inside the namespace, on this daemon's socket: its
    /// output, whatever the exit.
    pub fn cli(&self, command: &str) -> std::process::Output {
        let state = self.state_dir().display().to_string();
        self.ns.exec(&[BIN, command, "--state-dir", &state])
    }

    /// Like [`Holdfast::start`], with the config (`VIPS` replaced) written
    /// to `write_to` and read by the daemon at `read_from`: the same file
    /// seen through another file system (a FUSE mount of `write_to`'s
    /// directory). [`Holdfast::write_config`] does not reach it; the caller
    /// edits `write_to`.
    pub fn start_config_at(
        ns: &'a Netns,
        config: &str,
        vips: &str,
        write_to: &std::path::Path,
        read_from: &std::path::Path,
    ) -> Holdfast<'a> {
        let mut h = Self::unstarted(ns, config, vips);
        let config = std::fs::read_to_string(&h.config).expect("the config just written");
        std::fs::write(write_to, config)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", write_to.display()));
        h.config = read_from.to_path_buf();
        h.run(&[]);
        h
    }

    /// Started as `wrapper… args…` (a container: tests/image).
    pub fn start_argv(&mut self, wrapper: Vec<String>, args: Vec<String>) {
        self.wrapper = wrapper;
        self.container_args = Some(args);
        self.run(&[]);
    }

    /// (Re)starts the process with the same files.
    pub fn run(&mut self, extra: &[&str]) {
        let state = self.state_dir();
        let config = self.config.display().to_string();
        let state = state.display().to_string();
        let mut argv: Vec<&str> = self.wrapper.iter().map(String::as_str).collect();
        match &self.container_args {
            Some(args) => argv.extend(args.iter().map(String::as_str)),
            None => argv.extend([
                self.bin.as_str(),
                "run",
                "--config",
                &config,
                "--state-dir",
                &state,
                "--log",
                "info,holdfast=debug",
            ]),
        }
        argv.extend_from_slice(extra);
        let log = self.dir.join(&format!("holdfast-{}.log", self.next_log()));
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.process = Some(if self.container.is_some() {
            // podman joins the namespace itself (--network ns:…).
            NsProcess::start_logged_here("holdfast", &argv, &env, &log)
        } else {
            NsProcess::start_logged(self.ns, "holdfast", &argv, &env, &log)
        });
        // `holdfast status` right after the start must not race the API's
        // bind.
        testlab::wait_for(LONG, "holdfast's API on 127.0.0.1:9179", || {
            if let Some(p) = self.process.as_mut() {
                p.assert_running("waiting for its API");
            }
            match self.ns.tcp_probe(
                "127.0.0.1".parse().expect("an address"),
                9179,
                Duration::from_secs(1),
            ) {
                testlab::TcpProbe::Connected => Ok(()),
                other => Err(format!("{other:?}")),
            }
        });
    }

    fn next_log(&self) -> usize {
        std::fs::read_dir(self.dir.path())
            .map(|d| {
                d.filter(|e| {
                    e.as_ref()
                        .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("holdfast-"))
                })
                .count()
            })
            .unwrap_or(0)
    }

    /// The log of every run so far (also after the process exited), in
    /// order.
    pub fn log(&self) -> String {
        (0..self.next_log())
            .map(|n| {
                std::fs::read_to_string(self.dir.join(&format!("holdfast-{n}.log")))
                    .unwrap_or_default()
            })
            .collect()
    }

    pub fn kill(&mut self, signal: Signal) {
        if let Some(p) = self.process.as_mut() {
            p.kill(signal);
        }
    }

    /// Waits for the process to exit and forgets it.
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let mut p = self.process.take().expect("holdfast is running");
        p.wait_exit(Duration::from_secs(20))
    }

    /// Rewrites the VIP file the way editors do: a new file renamed over.
    pub fn write_vips(&self, text: &str) {
        let tmp = self.dir.join("vips.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.vips).unwrap();
    }

    pub fn write_config(&self, text: &str) {
        let text = text.replace("VIPS", &self.vips.display().to_string());
        let tmp = self.dir.join("holdfast.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.config).unwrap();
    }

    /// `holdfast status --json`, run inside the namespace.
    pub fn status(&self) -> serde_json::Value {
        let out = self.ns.exec(&[BIN, "status", "--json"]);
        assert!(
            out.status.success(),
            "holdfast status: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        serde_json::from_slice(&out.stdout).expect("status JSON")
    }

    /// `holdfast status` as text.
    pub fn status_text(&self) -> String {
        String::from_utf8_lossy(&self.ns.exec(&[BIN, "status"]).stdout).into_owned()
    }

    /// `holdfast explain VIP`: (exit code, text).
    pub fn explain(&self, vip: &str) -> (i32, String) {
        let out = self.ns.exec(&[BIN, "explain", vip]);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    pub fn metrics(&self) -> String {
        let out = self.ns.exec(&["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `GET path` on the API (127.0.0.1:9179 in the namespace): the status
    /// code and the body. Panics if the answer is not HTTP.
    pub fn http_get(&self, path: &str) -> (u16, String) {
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET {path} HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3"
        );
        let out = self.ns.exec(&["bash", "-c", &script]);
        let answer = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("GET {path}: no HTTP answer: {answer:?}"));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("GET {path}: no status code in {head:?}"));
        (code, body.to_owned())
    }

    /// `POST path` on the API (127.0.0.1:9179 in the namespace), with
    /// these header lines (each ending in CR LF): the status code and the
    /// body. Panics if the answer is not HTTP.
    pub fn http_post(&self, path: &str, headers: &str) -> (u16, String) {
        let script = format!(
            "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'POST {path} HTTP/1.0\\r\\n{headers}Content-Length: 0\\r\\n\\r\\n' >&3; cat <&3"
        );
        let out = self.ns.exec(&["bash", "-c", &script]);
        let answer = String::from_utf8_lossy(&out.stdout).into_owned();
        let (head, body) = answer
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("POST {path}: no HTTP answer: {answer:?}"));
        let code = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("POST {path}: no status code in {head:?}"));
        (code, body.to_owned())
    }

    /// The parsed `/metrics` exposition.
    pub fn exposition(&self) -> testlab::exposition::Exposition {
        let (code, body) = self.http_get("/metrics");
        assert_eq!(code, 200, "GET /metrics: {body}");
        testlab::exposition::parse(&body)
            .unwrap_or_else(|e| panic!("/metrics does not parse ({e}):\n{body}"))
    }

    /// The value of the one series of `name` whose labels include
    /// `labels`. Panics with the whole family when there is none or more
    /// than one: a metric that is missing never reads as 0.
    pub fn metric(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        metric_value(&self.exposition(), name, labels)
    }
}

/// The value of the one series of `name` in `e` whose labels include
/// `labels`; panics when there is not exactly one.
pub fn metric_value(
    e: &testlab::exposition::Exposition,
    name: &str,
    labels: &[(&str, &str)],
) -> f64 {
    let matching: Vec<_> = e
        .samples()
        .filter(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.iter().any(|(lk, lv)| lk == k && lv == v))
        })
        .collect();
    match matching.as_slice() {
        [one] => one.value,
        _ => panic!(
            "{} series of {name} with labels {labels:?}; the samples of {name}: {:?}",
            matching.len(),
            e.samples().filter(|s| s.name == name).collect::<Vec<_>>()
        ),
    }
}

impl Holdfast<'_> {
    /// The session state of peer `name`; panics if the status has no such
    /// peer (an absent peer is not "not Established").
    pub fn peer_state(&self, name: &str) -> String {
        let s = self.status();
        s["peers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .and_then(|p| p["state"].as_str())
            .unwrap_or_else(|| panic!("no peer {name} with a state in holdfast status: {s}"))
            .to_string()
    }
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

/// A holdfast config for a node peering with one router.
pub fn node_conf(
    asn: u32,
    router_id: &str,
    peers: &[(&str, &str, u32)],
    advertisement: &str,
    stability: &str,
) -> String {
    let mut c =
        format!("[speaker]\nasn = {asn}\nrouter_id = \"{router_id}\"\nhostname = \"node-1\"\n\n");
    for (name, addr, remote) in peers {
        c.push_str(&format!(
            "[[peer]]\nname = \"{name}\"\naddress = \"{addr}\"\nasn = {remote}\nhold_time = \"9s\"\nkeepalive = \"3s\"\nconnect_retry = \"1s\"\n\n"
        ));
    }
    c.push_str("[source]\nkind = \"file\"\npath = \"VIPS\"\n\n");
    c.push_str(&format!("[stability]\n{stability}\n\n"));
    c.push_str(advertisement);
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

//! The holdfast daemon of a test: its directory (config, VIP file, state
//! directory, one log per run), its process (`holdfast run`, in a network
//! namespace or in the test's own), its API and its status. Dropped, it
//! kills the daemon (and removes a container) and then its directory,
//! which a failing test keeps (`TESTLAB_KEEP=1` keeps every one).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testlab::{LabDir, Netns, NsProcess, Signal, wait_for};

use super::config::Config;
use super::{BIN, LONG};

/// The API's address inside a namespace: `speaker.api`'s default.
pub const NS_API: &str = "127.0.0.1:9179";

/// The log filter of every run unless a test sets [`Holdfast::log_filter`].
pub const LOG_FILTER: &str = "info,holdfast=debug";

pub struct Holdfast<'a> {
    // Dropped in this order: the process, its container, its directory.
    pub process: Option<NsProcess>,
    pub container: Option<Container>,
    /// The namespace it runs in; `None`: the test's own (loopback only).
    pub ns: Option<&'a Netns>,
    pub dir: LabDir,
    pub config: PathBuf,
    pub vips: PathBuf,
    /// Its TCP API (`speaker.api`): [`NS_API`] in a namespace, a free
    /// loopback port in the test's own unless the config names one.
    pub api: SocketAddr,
    pub env: Vec<(String, String)>,
    /// `--log`'s value (`None`: no `--log`, and no `HOLDFAST_LOG` from the
    /// test's environment: the daemon's default).
    pub log_filter: Option<String>,
    /// Whether [`Holdfast::run`] waits for the API to answer.
    pub wait_ready: bool,
    /// The command line before holdfast's own (e.g. `setpriv …` to run it
    /// as another user), and the binary: [`BIN`] unless a test gives
    /// another (a copy with file capabilities).
    pub wrapper: Vec<String>,
    pub bin: String,
    /// In a container (tests/image): `wrapper` is `podman run … IMAGE`,
    /// these are the container's arguments (the DaemonSet's), and the
    /// container is removed with the daemon.
    pub container_args: Option<Vec<String>>,
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

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl<'a> Holdfast<'a> {
    // ------------------------------------------------ in a network namespace

    /// Writes `config` (with `VIPS` replaced by the VIP file's path) and
    /// `vips`, starts the daemon in `ns` and waits for its API.
    pub fn start(ns: &'a Netns, config: &str, vips: &str) -> Holdfast<'a> {
        Self::start_with(ns, config, vips, &[])
    }

    /// Also with `args` after holdfast's own.
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
        h.set_env(env);
        h.run(args);
        h
    }

    /// Its directory with `config` (`VIPS` replaced) and `vips` written,
    /// not started yet.
    pub fn unstarted(ns: &'a Netns, config: &str, vips: &str) -> Holdfast<'a> {
        let mut h = Self::files(config, vips);
        h.ns = Some(ns);
        h
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

    /// Like [`Holdfast::start`], with the config (`VIPS` replaced) written
    /// to `write_to` and read by the daemon at `read_from`: the same file
    /// seen through another file system (a FUSE mount of `write_to`'s
    /// directory). [`Holdfast::write_config`] does not reach it; the caller
    /// edits `write_to`.
    pub fn start_config_at(
        ns: &'a Netns,
        config: &str,
        vips: &str,
        write_to: &Path,
        read_from: &Path,
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

    fn files(config: &str, vips: &str) -> Holdfast<'a> {
        let dir = LabDir::new("holdfast");
        let vips_path = dir.write("vips.toml", vips);
        let config = config.replace("VIPS", &vips_path.display().to_string());
        let config_path = dir.write("holdfast.toml", &config);
        Holdfast {
            process: None,
            container: None,
            ns: None,
            dir,
            config: config_path,
            vips: vips_path,
            api: NS_API.parse().expect("an address"),
            env: Vec::new(),
            log_filter: Some(LOG_FILTER.to_owned()),
            wait_ready: true,
            wrapper: Vec::new(),
            bin: BIN.to_string(),
            container_args: None,
        }
    }

    fn set_env(&mut self, env: &[(&str, &str)]) {
        self.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    }
}

impl Holdfast<'static> {
    // ------------------------------------------------- in the test's own

    /// The daemon in the test's own network namespace, for what needs no
    /// router: `config` with its API on a free loopback port (unless it
    /// names one), `--log info`, started, `/healthz` answered.
    pub fn local(config: &Config, vips: &str) -> Holdfast<'static> {
        let mut h = Self::local_unstarted(config, vips);
        h.run(&[]);
        h
    }

    /// [`Holdfast::local`], not started yet: write files beside the
    /// config (`h.dir`), set `env` or `log_filter`, then
    /// [`Holdfast::run`].
    pub fn local_unstarted(config: &Config, vips: &str) -> Holdfast<'static> {
        let config = match config.api_addr() {
            Some(_) => config.clone(),
            None => config.clone().api(format!("127.0.0.1:{}", free_port())),
        };
        let api: SocketAddr = config
            .api_addr()
            .expect("an api address")
            .parse()
            .expect("speaker.api is an address");
        let mut h = Self::files(&config.to_toml(), vips);
        h.api = api;
        h.log_filter = Some("info".to_owned());
        // Port 0: nobody can know where it answers.
        h.wait_ready = api.port() != 0;
        h
    }

    /// [`Holdfast::local`] with environment variables.
    pub fn local_env(config: &Config, vips: &str, env: &[(&str, &str)]) -> Holdfast<'static> {
        let mut h = Self::local_unstarted(config, vips);
        h.set_env(env);
        h.run(&[]);
        h
    }
}

impl Holdfast<'_> {
    /// (Re)starts the process with the same files, `extra` arguments
    /// after holdfast's own, and waits for its API (unless
    /// [`Holdfast::wait_ready`] is off).
    pub fn run(&mut self, extra: &[&str]) {
        let state = self.state_dir();
        let config = self.config.display().to_string();
        let state = state.display().to_string();
        let mut argv: Vec<&str> = Vec::new();
        if self.log_filter.is_none() && self.container_args.is_none() {
            argv.extend(["env", "-u", "HOLDFAST_LOG"]);
        }
        argv.extend(self.wrapper.iter().map(String::as_str));
        match &self.container_args {
            Some(args) => argv.extend(args.iter().map(String::as_str)),
            None => {
                argv.extend([
                    self.bin.as_str(),
                    "run",
                    "--config",
                    &config,
                    "--state-dir",
                    &state,
                ]);
                if let Some(filter) = &self.log_filter {
                    argv.extend(["--log", filter.as_str()]);
                }
            }
        }
        argv.extend_from_slice(extra);
        let log = self.dir.join(&format!("holdfast-{}.log", self.runs()));
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.process = Some(match self.ns {
            // podman joins the namespace itself (--network ns:…).
            Some(ns) if self.container.is_none() => {
                NsProcess::start_logged(ns, "holdfast", &argv, &env, &log)
            }
            _ => NsProcess::start_logged_here("holdfast", &argv, &env, &log),
        });
        if self.wait_ready {
            self.wait_api();
        }
    }

    /// Waits until the API answers: its TCP port inside a namespace (so
    /// that `holdfast status` right after the start does not race the
    /// bind), `/healthz` with 200 in the test's own.
    fn wait_api(&mut self) {
        let what = format!("holdfast's API on {}", self.api);
        testlab::wait_for(LONG, &what, || {
            if let Some(p) = self.process.as_mut() {
                p.assert_running("waiting for its API");
            }
            match self.ns {
                Some(ns) => {
                    match ns.tcp_probe(self.api.ip(), self.api.port(), Duration::from_secs(1)) {
                        testlab::TcpProbe::Connected => Ok(()),
                        other => Err(format!("{other:?}")),
                    }
                }
                None => match self.get("/healthz") {
                    Ok(r) if r.status == 200 => Ok(()),
                    Ok(r) => Err(format!("/healthz: {}", r.status)),
                    Err(e) => Err(format!("{e:?}")),
                },
            }
        });
    }

    /// How many runs have written a log so far.
    fn runs(&self) -> usize {
        std::fs::read_dir(self.dir.path())
            .map(|d| {
                d.filter(|e| {
                    e.as_ref().is_ok_and(|e| {
                        let name = e.file_name();
                        let name = name.to_string_lossy();
                        name.starts_with("holdfast-") && name.ends_with(".log")
                    })
                })
                .count()
            })
            .unwrap_or(0)
    }

    /// The daemon's `--state-dir` (its API socket is `api.sock` in it).
    pub fn state_dir(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The log of every run so far (also after the process exited), in
    /// order.
    pub fn log(&self) -> String {
        (0..self.runs())
            .map(|n| {
                std::fs::read_to_string(self.dir.join(&format!("holdfast-{n}.log")))
                    .unwrap_or_default()
            })
            .collect()
    }

    /// The logs of every run (the same as [`Holdfast::log`]).
    pub fn all_logs(&self) -> String {
        self.log()
    }

    /// Lines of [`Holdfast::log`].
    pub fn log_lines(&self) -> usize {
        self.log().lines().count()
    }

    /// Waits until a line of the logs (every run) contains every one of
    /// `needles`; returns that line. Fails at once, with the log, when
    /// there is no such line and the daemon has exited.
    pub fn wait_log_line(&self, needles: &[&str], timeout: Duration) -> String {
        wait_for(
            timeout,
            &format!("holdfast to log a line with {needles:?}"),
            || {
                let log = self.log();
                if let Some(line) = log
                    .lines()
                    .find(|line| needles.iter().all(|n| line.contains(n)))
                {
                    return Ok(line.to_owned());
                }
                if self.exited() {
                    panic!("holdfast exited without logging a line with {needles:?}:\n{log}");
                }
                Err("no such line yet".to_owned())
            },
        )
    }

    /// Whether the process started last has exited (a zombie not yet
    /// reaped counts); `false` when the test has already waited for it.
    fn exited(&self) -> bool {
        let Some(p) = self.process.as_ref() else {
            return false;
        };
        match std::fs::read_to_string(format!("/proc/{}/stat", p.pid())) {
            // The state follows the command's closing parenthesis.
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
            Err(_) => true,
        }
    }

    /// Waits until `done`, failing the test with the log after `within`.
    pub fn wait_for(&self, what: &str, within: Duration, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + within;
        while !done() {
            assert!(
                Instant::now() < deadline,
                "no {what} within {within:?}; the log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `signal` by the process ID, for a test holding the daemon
    /// shared (a closure borrows it); [`Holdfast::kill`] otherwise.
    pub fn signal(&self, signal: Signal) {
        let sent = Command::new("kill")
            .args(["-s", signal.name(), &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -s {}", signal.name());
    }

    pub fn kill(&mut self, signal: Signal) {
        if let Some(p) = self.process.as_mut() {
            p.kill(signal);
        }
    }

    /// Waits for the process to exit (20 s at most) and forgets it.
    pub fn wait_exit(&mut self) -> ExitStatus {
        self.wait_exit_within(Duration::from_secs(20))
    }

    /// Waits for the process to exit (`within` at most) and forgets it.
    pub fn wait_exit_within(&mut self, within: Duration) -> ExitStatus {
        let mut p = self.process.take().expect("holdfast is running");
        p.wait_exit(within)
    }

    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.is_running())
    }

    /// The process ID (of the command started: `setpriv`, `env` and
    /// `ip netns exec` exec holdfast, so it is holdfast's).
    pub fn pid(&self) -> u32 {
        self.process.as_ref().expect("holdfast is running").pid()
    }

    /// The daemon's resident memory, in KiB (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        let pid = self.pid();
        let status =
            std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// Rewrites the VIP file the way editors do: a new file renamed over.
    pub fn write_vips(&self, text: &str) {
        let tmp = self.dir.join("vips.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.vips).unwrap();
    }

    /// Rewrites the config the same way (`VIPS` replaced by the VIP
    /// file's path).
    pub fn write_config(&self, text: &str) {
        let text = text.replace("VIPS", &self.vips.display().to_string());
        let tmp = self.dir.join("holdfast.toml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &self.config).unwrap();
    }

    // ------------------------------------------------------------ its API

    /// Runs `argv` where the daemon runs (its namespace, or the test's
    /// own): its output, whatever the exit.
    pub fn exec(&self, argv: &[&str]) -> Output {
        match self.ns {
            Some(ns) => ns.exec(argv),
            None => Command::new(argv[0])
                .args(&argv[1..])
                .stdin(Stdio::null())
                .output()
                .unwrap_or_else(|e| panic!("cannot run {argv:?}: {e}")),
        }
    }

    /// `holdfast COMMAND ARGS…` on this daemon's API: `--api` in the
    /// test's own namespace; inside one, the default address is the
    /// daemon's.
    fn holdfast_cli(&self, command: &[&str]) -> Output {
        let api = self.api.to_string();
        let mut argv = vec![BIN];
        argv.extend_from_slice(command);
        if self.ns.is_none() {
            argv.extend(["--api", &api]);
        }
        self.exec(&argv)
    }

    /// `holdfast drain` or `undrain` (or any command taking
    /// `--state-dir`) on this daemon's socket: its output, whatever the
    /// exit.
    pub fn cli(&self, command: &str) -> Output {
        let state = self.state_dir().display().to_string();
        self.exec(&[BIN, command, "--state-dir", &state])
    }

    /// `holdfast status --json`.
    pub fn status(&self) -> Value {
        let out = self.holdfast_cli(&["status", "--json"]);
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
        String::from_utf8_lossy(&self.holdfast_cli(&["status"]).stdout).into_owned()
    }

    /// `holdfast explain VIP`: (exit code, text).
    pub fn explain(&self, vip: &str) -> (i32, String) {
        let out = self.holdfast_cli(&["explain", vip]);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    }

    /// [`Holdfast::api`] as `--api` takes it.
    pub fn api(&self) -> String {
        self.api.to_string()
    }

    /// `GET path` from the test process (its own namespace only): the
    /// daemon's answer, parsed by holdfast's own client.
    pub fn get(
        &self,
        path: &str,
    ) -> Result<holdfast::cli::http::Response, holdfast::cli::http::Error> {
        assert!(
            self.ns.is_none(),
            "GET {path}: the test process cannot reach a namespace's loopback; use http_get"
        );
        holdfast::cli::http::get(&self.api.to_string(), path)
    }

    /// `GET /v1/status`, parsed into holdfast's own type.
    pub fn status_typed(&self) -> holdfast::report::status::Status {
        let r = self.get("/v1/status").expect("/v1/status answers");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        serde_json::from_slice(&r.body).expect("a status")
    }

    /// One HTTP/1.0 exchange with the API, by bash where the daemon runs:
    /// the raw answer.
    fn http(&self, request: &str) -> String {
        let script = format!(
            "exec 3<>/dev/tcp/{}/{}; printf '{request}' >&3; cat <&3",
            self.api.ip(),
            self.api.port()
        );
        let out = self.exec(&["bash", "-c", &script]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The `/metrics` answer, headers and all.
    pub fn metrics(&self) -> String {
        self.http("GET /metrics HTTP/1.0\\r\\n\\r\\n")
    }

    /// `GET path` on the API: the status code and the body. Panics if the
    /// answer is not HTTP.
    pub fn http_get(&self, path: &str) -> (u16, String) {
        let answer = self.http(&format!("GET {path} HTTP/1.0\\r\\n\\r\\n"));
        split_answer(&format!("GET {path}"), &answer)
    }

    /// `POST path` on the API, with these header lines (each ending in CR
    /// LF): the status code and the body. Panics if the answer is not HTTP.
    pub fn http_post(&self, path: &str, headers: &str) -> (u16, String) {
        let answer = self.http(&format!(
            "POST {path} HTTP/1.0\\r\\n{headers}Content-Length: 0\\r\\n\\r\\n"
        ));
        split_answer(&format!("POST {path}"), &answer)
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

    // ----------------------------------------------------------- its peers

    /// The status JSON of peer `name`; panics if there is no such peer (an
    /// absent peer is not "not Established").
    pub fn peer_status(&self, name: &str) -> Value {
        let status = self.status();
        status["peers"]
            .as_array()
            .and_then(|peers| peers.iter().find(|p| p["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no peer {name} in holdfast status: {status}"))
    }

    /// The session state of peer `name`.
    pub fn peer_state(&self, name: &str) -> String {
        let p = self.peer_status(name);
        p["state"]
            .as_str()
            .unwrap_or_else(|| panic!("no state for peer {name} in holdfast status: {p}"))
            .to_string()
    }

    /// Waits until peer `name` is in `state`; returns its status.
    pub fn wait_peer_state(&self, name: &str, state: &str, timeout: Duration) -> Value {
        self.wait_peer_status(
            name,
            timeout,
            &format!("holdfast peer {name} to be {state}"),
            |p| p["state"] == state,
        )
    }

    /// Waits until peer `name` is Established; returns its status.
    pub fn wait_peer_established(&self, name: &str, timeout: Duration) -> Value {
        self.wait_peer_state(name, "Established", timeout)
    }

    /// Waits until peer `name`'s status satisfies `check`; returns it.
    pub fn wait_peer_status(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(timeout, what, || {
            let peer = self.peer_status(name);
            if check(&peer) {
                Ok(peer)
            } else {
                Err(peer.to_string())
            }
        })
    }
}

/// (status code, body) of an HTTP answer; panics if it is not one.
fn split_answer(request: &str, answer: &str) -> (u16, String) {
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("{request}: no HTTP answer: {answer:?}"));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("{request}: no status code in {head:?}"));
    (code, body.to_owned())
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

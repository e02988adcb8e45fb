//! A holdfast daemon on loopback only (no namespace, no router): its
//! config in a temporary directory, its process, its log and its API.
//! The one peer is 127.0.0.2 port 9, where nothing listens: the session
//! stays down, and nothing leaves the machine.
#![allow(dead_code)]

use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_holdfast");

/// A generous bound for a real process and real sockets.
pub const LONG: Duration = Duration::from_secs(60);

/// A free loopback port (bound, read, released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A config with a file source at `vips`, the API on `api`, and `peer`
/// lines added to the one peer.
pub fn config(api: SocketAddr, vips: &Path, peer: &str) -> String {
    format!(
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.254\"\napi = \"{api}\"\n\n[[peer]]\nname = \"tor1\"\naddress = \"127.0.0.2\"\nport = 9\nasn = 65000\nconnect_retry = \"30s\"\n{peer}\n[source]\nkind = \"file\"\npath = \"{}\"\n",
        vips.display()
    )
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

/// A running daemon; killed when dropped.
pub struct Daemon {
    pub dir: tempfile::TempDir,
    pub config: PathBuf,
    pub vips: PathBuf,
    pub api: SocketAddr,
    pub log: PathBuf,
    child: Child,
}

impl Daemon {
    /// Writes the VIP file (`vips`) and the config (`peer` lines added to
    /// the peer), starts `holdfast run` and waits for `/healthz`.
    pub fn start(vips: &str, peer: &str) -> Daemon {
        let dir = tempfile::tempdir().expect("tempdir");
        let vips_path = dir.path().join("vips.toml");
        std::fs::write(&vips_path, vips).expect("write VIP file");
        Self::start_in(dir, vips_path, peer)
    }

    /// As [`Daemon::start`], with the VIP file already at `vips` (which
    /// need not be in `dir`).
    pub fn start_in(dir: tempfile::TempDir, vips: PathBuf, peer: &str) -> Daemon {
        Self::start_with_speaker(dir, vips, peer, "")
    }

    /// As [`Daemon::start_in`], with `speaker` lines added to `[speaker]`.
    pub fn start_with_speaker(
        dir: tempfile::TempDir,
        vips: PathBuf,
        peer: &str,
        speaker: &str,
    ) -> Daemon {
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().expect("addr");
        let config = dir.path().join("holdfast.toml");
        let text = self::config(api, &vips, peer).replacen(
            "\n\n[[peer]]",
            &format!("\n{speaker}\n[[peer]]"),
            1,
        );
        std::fs::write(&config, text).expect("write config");
        let log = dir.path().join("holdfast.log");
        let state = dir.path().join("state");
        let child = Command::new(BIN)
            .arg("run")
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .arg("--log")
            .arg("info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("holdfast run starts");
        let d = Daemon {
            dir,
            config,
            vips,
            api,
            log,
            child,
        };
        d.wait_for("/healthz 200", LONG, || {
            d.get("/healthz").is_ok_and(|r| r.status == 200)
        });
        d
    }

    pub fn api(&self) -> String {
        self.api.to_string()
    }

    pub fn get(
        &self,
        path: &str,
    ) -> Result<holdfast::cli::http::Response, holdfast::cli::http::Error> {
        holdfast::cli::http::get(&self.api(), path)
    }

    /// The status, parsed.
    pub fn status(&self) -> holdfast::report::status::Status {
        let r = self.get("/v1/status").expect("/v1/status answers");
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
        serde_json::from_slice(&r.body).expect("a status")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("kill runs");
        assert!(sent.success(), "kill -{signal}");
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

    /// The daemon's resident memory, in KiB (VmRSS).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("/proc/PID/status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    /// The daemon's `--state-dir`.
    pub fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The process ID.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Still running?
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

//! A program running inside a namespace with its output kept in a log file
//! (the holdfast binary in interop tests, and every router daemon).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::dir::LabDir;
use crate::netns::Netns;

/// How many log lines a panicking test prints per process.
const LOG_TAIL_ON_PANIC: usize = 120;

/// Signals a test sends to a process (`kill -s NAME`, so no unsafe code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Hup,
    Int,
    Kill,
    Term,
    Usr1,
    Usr2,
    Stop,
    Cont,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Hup => "HUP",
            Signal::Int => "INT",
            Signal::Kill => "KILL",
            Signal::Term => "TERM",
            Signal::Usr1 => "USR1",
            Signal::Usr2 => "USR2",
            Signal::Stop => "STOP",
            Signal::Cont => "CONT",
        }
    }
}

/// A child process started with `ip netns exec`, stdout and stderr appended
/// to one log file. Dropping it SIGKILLs and reaps it; if the thread is
/// panicking, the tail of its log is printed (cargo test shows it under the
/// failed test).
#[derive(Debug)]
pub struct NsProcess {
    label: String,
    child: Child,
    log_path: PathBuf,
    status: Option<ExitStatus>,
    /// The directory holding the log when the process owns it.
    _dir: Option<LabDir>,
}

impl NsProcess {
    /// Starts `argv` in `ns`, logging to `LABDIR/LABEL.log` in a directory of
    /// its own. `label` names it in messages.
    pub fn start(ns: &Netns, label: &str, argv: &[&str]) -> NsProcess {
        NsProcess::start_with_env(ns, label, argv, &[])
    }

    /// Like [`NsProcess::start`], with extra environment variables.
    pub fn start_with_env(
        ns: &Netns,
        label: &str,
        argv: &[&str],
        env: &[(&str, &str)],
    ) -> NsProcess {
        let dir = LabDir::new(label);
        let log_path = dir.join(&format!("{label}.log"));
        let mut process = NsProcess::start_logged(ns, label, argv, env, &log_path);
        process._dir = Some(dir);
        process
    }

    /// Starts `argv` in `ns` with stdout and stderr appended to `log_path`
    /// and the log's directory as working directory.
    pub fn start_logged(
        ns: &Netns,
        label: &str,
        argv: &[&str],
        env: &[(&str, &str)],
        log_path: &Path,
    ) -> NsProcess {
        NsProcess::start_command(ns.command(argv), label, env, log_path, ns.name())
    }

    /// Starts `argv` in the test's own namespaces, logged the same way: a
    /// program that joins a namespace by itself (`podman run --network
    /// ns:PATH`, which needs the host's /sys and its cgroup mounts, which
    /// `ip netns exec` replaces).
    pub fn start_logged_here(
        label: &str,
        argv: &[&str],
        env: &[(&str, &str)],
        log_path: &Path,
    ) -> NsProcess {
        let mut cmd = std::process::Command::new(argv[0]);
        cmd.args(&argv[1..]);
        NsProcess::start_command(cmd, label, env, log_path, "(the test's own)")
    }

    fn start_command(
        mut cmd: std::process::Command,
        label: &str,
        env: &[(&str, &str)],
        log_path: &Path,
        where_: &str,
    ) -> NsProcess {
        let log = open_log(log_path);
        let log_for_stderr = log
            .try_clone()
            .unwrap_or_else(|e| panic!("cannot duplicate {}: {e}", log_path.display()));
        cmd.stdin(Stdio::null()).stdout(log).stderr(log_for_stderr);
        if let Some(parent) = log_path.parent() {
            cmd.current_dir(parent);
        }
        for (key, value) in env {
            cmd.env(key, value);
        }
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {label} ({cmd:?}) in netns {where_}: {e}"));
        NsProcess {
            label: label.to_owned(),
            child,
            log_path: log_path.to_path_buf(),
            status: None,
            _dir: None,
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// Everything the process has written so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    pub fn log_tail(&self, lines: usize) -> String {
        tail(&self.log(), lines)
    }

    /// The exit status, if the process has exited (reaps it).
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            match self.child.try_wait() {
                Ok(status) => self.status = status,
                Err(e) => panic!("cannot poll {} (pid {}): {e}", self.label, self.child.id()),
            }
        }
        self.status
    }

    pub fn is_running(&mut self) -> bool {
        self.exit_status().is_none()
    }

    /// Sends a signal. Panics (with the log) if the process has already
    /// exited, except for `Kill`, which is then a no-op.
    pub fn kill(&mut self, signal: Signal) {
        if let Some(status) = self.exit_status() {
            if signal == Signal::Kill {
                return;
            }
            panic!(
                "cannot send SIG{} to {}: it already exited ({status})\n{}",
                signal.name(),
                self.label,
                self.log_tail(LOG_TAIL_ON_PANIC)
            );
        }
        // Not reaped yet, so the pid is still ours even if the process just
        // died.
        let status = std::process::Command::new("kill")
            .args(["-s", signal.name(), &self.child.id().to_string()])
            .stdin(Stdio::null())
            .status()
            .unwrap_or_else(|e| panic!("cannot run kill: {e}"));
        assert!(
            status.success(),
            "kill -s {} {} failed",
            signal.name(),
            self.child.id()
        );
    }

    /// Waits for the process to exit; panics with the log after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.exit_status() {
                return status;
            }
            if Instant::now() >= deadline {
                panic!(
                    "{} (pid {}) still running after {:.1}s\n{}",
                    self.label,
                    self.child.id(),
                    timeout.as_secs_f64(),
                    self.log_tail(LOG_TAIL_ON_PANIC)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILLs the process (if running) and reaps it. Idempotent.
    pub fn stop(&mut self) {
        if self.status.is_some() {
            return;
        }
        let _ = self.child.kill();
        if let Ok(status) = self.child.wait() {
            self.status = Some(status);
        }
    }

    /// Panics with the process's log unless it is still running. Launchers
    /// call this while waiting for a daemon to come up.
    pub fn assert_running(&mut self, doing: &str) {
        if let Some(status) = self.exit_status() {
            panic!(
                "{} exited ({status}) while {doing}; its log ({}):\n{}",
                self.label,
                self.log_path.display(),
                self.log_tail(LOG_TAIL_ON_PANIC)
            );
        }
    }
}

impl Drop for NsProcess {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "---- testlab: {} log ({}), last {LOG_TAIL_ON_PANIC} lines ----\n{}\n---- end of {} log ----",
                self.label,
                self.log_path.display(),
                self.log_tail(LOG_TAIL_ON_PANIC),
                self.label
            );
        }
    }
}

fn open_log(path: &Path) -> File {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("cannot open log {}: {e}", path.display()))
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// A field of `/proc/PID/status` (`Uid`, `NoNewPrivs`, `Seccomp`,
/// `CapEff`, …), its value trimmed.
pub fn proc_status(pid: u32, field: &str) -> String {
    let path = format!("/proc/{pid}/status");
    let s = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    s.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {path}"))
        .trim()
        .to_owned()
}

/// A capability set of process `pid` (`CapEff`, `CapPrm`, `CapBnd`,
/// `CapAmb`, `CapInh`) as a number: bit N is capability N
/// (linux/capability.h).
pub fn cap_set(pid: u32, field: &str) -> u64 {
    let v = proc_status(pid, field);
    u64::from_str_radix(&v, 16).unwrap_or_else(|_| panic!("{field} of {pid}: {v:?}"))
}

/// `CAP_NET_BIND_SERVICE`'s bit in a capability set.
pub const CAP_NET_BIND_SERVICE: u64 = 1 << 10;
/// `CAP_NET_RAW`'s bit in a capability set.
pub const CAP_NET_RAW: u64 = 1 << 13;

/// A copy of the binary `bin` carrying the file capabilities `caps`
/// (`setcap` syntax, e.g. `cap_net_raw+p`), as an image's binary does: its
/// directory (removed when dropped) and its path.
pub fn with_file_caps(bin: &str, caps: &str) -> (LabDir, String) {
    let dir = LabDir::new("bin");
    let copy = dir.join("holdfast");
    std::fs::copy(bin, &copy).unwrap_or_else(|e| panic!("copy {bin}: {e}"));
    let copy = copy.display().to_string();
    let out = std::process::Command::new("setcap")
        .args([caps, &copy])
        .output()
        .expect("setcap (libcap2-bin)");
    assert!(out.status.success(), "setcap {caps}: {out:?}");
    (dir, copy)
}

//! A real Kubernetes API server (kube-apiserver and etcd) for a test, run
//! by `scripts/kube-api.sh` on the test's own loopback at free ports, and
//! the real `kubectl` as its client.
//!
//! The script builds the binaries when they are missing (scripts/test.sh
//! builds them first, so a test never waits for that), applies
//! `deploy/cluster` and writes two kubeconfigs: the admin's and the
//! holdfast ServiceAccount's (its token, bound by the shipped RBAC and
//! nothing else). A node namespace reaches the API through a
//! [`crate::Bridge`] at the same port, so one kubeconfig serves both.
//!
//! Dropping it stops both servers (SIGTERM to the script, which stops its
//! children) before the directory goes.

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::{NsProcess, Signal};
use crate::{LabDir, require_tools, wait_until};

/// How long the script may take to print `ready`: certificates, etcd, the
/// API server's post-start hooks, deploy/cluster applied, on a busy
/// two-core machine (the binaries are built already).
const READY: Duration = Duration::from_secs(180);

/// The repository's `scripts/kube-api.sh`.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/kube-api.sh")
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("a free port on 127.0.0.1");
    l.local_addr().expect("its address").port()
}

/// One API server with its etcd, for one test.
#[derive(Debug)]
pub struct KubeApiServer {
    process: RefCell<NsProcess>,
    port: u16,
    readies: Cell<usize>,
    dir: LabDir,
}

impl KubeApiServer {
    /// Starts the script and waits until it prints `ready`.
    pub fn start() -> KubeApiServer {
        require_tools(&["kubectl", "openssl", "curl", "go"]);
        let dir = LabDir::new("kube-api");
        let (port, etcd, peer) = (free_port(), free_port(), free_port());
        let script = script();
        let data = dir.join("data");
        let mut process = NsProcess::start_logged_here(
            "kube-api",
            &[
                "bash",
                &script.display().to_string(),
                &data.display().to_string(),
            ],
            &[
                ("KUBE_API_PORT", &port.to_string()),
                ("ETCD_PORT", &etcd.to_string()),
                ("ETCD_PEER_PORT", &peer.to_string()),
            ],
            &dir.join("kube-api.log"),
        );
        process.assert_running("starting the API server");
        let server = KubeApiServer {
            process: RefCell::new(process),
            port,
            readies: Cell::new(0),
            dir,
        };
        server.wait_ready();
        server
    }

    fn script_lines(&self, line: &str) -> usize {
        self.process
            .borrow()
            .log()
            .lines()
            .filter(|l| *l == line)
            .count()
    }

    fn wait_ready(&self) {
        let want = self.readies.get() + 1;
        wait_until(READY, "the Kubernetes API server to be ready", || {
            self.process
                .borrow_mut()
                .assert_running("waiting for the API server to be ready");
            (self.script_lines("ready") >= want).then_some(())
        });
        self.readies.set(want);
    }

    /// 127.0.0.1 and the API's port.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// system:masters.
    pub fn admin_kubeconfig(&self) -> PathBuf {
        self.dir.join("data/admin.kubeconfig")
    }

    /// The holdfast ServiceAccount's token, as a pod of the DaemonSet has it.
    pub fn holdfast_kubeconfig(&self) -> PathBuf {
        self.dir.join("data/holdfast.kubeconfig")
    }

    /// The API server's own log.
    pub fn server_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("data/kube-apiserver.log")).unwrap_or_default()
    }

    /// `kubectl ARGS` as the admin, `stdin` fed; stdout, or a panic with
    /// what kubectl said.
    pub fn kubectl_in(&self, args: &[&str], stdin: &str) -> String {
        match self.try_kubectl_in(args, stdin) {
            Ok(out) => out,
            Err(e) => panic!("kubectl {}: {e}", args.join(" ")),
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_in(args, "")
    }

    /// Like [`KubeApiServer::kubectl_in`], kubectl's stderr as the error.
    pub fn try_kubectl_in(&self, args: &[&str], stdin: &str) -> Result<String, String> {
        let kubeconfig = self.admin_kubeconfig();
        let cache = self.dir.join("kubectl-cache");
        let mut child = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run kubectl: {e}"));
        {
            use std::io::Write;
            let mut input = child.stdin.take().expect("kubectl's stdin");
            input
                .write_all(stdin.as_bytes())
                .unwrap_or_else(|e| panic!("writing kubectl's stdin: {e}"));
        }
        let out = child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for kubectl: {e}"));
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
        }
    }

    /// Stops kube-apiserver (etcd keeps the data): connections are
    /// refused and every watch stream ends, as when the control plane goes
    /// away.
    pub fn outage(&self) {
        let before = self.script_lines("stopped");
        self.process.borrow_mut().kill(Signal::Usr1);
        wait_until(Duration::from_secs(60), "the API server to stop", || {
            self.process
                .borrow_mut()
                .assert_running("stopping the API server");
            (self.script_lines("stopped") > before).then_some(())
        });
    }

    /// Compacts etcd past every revision a client holds and starts
    /// kube-apiserver again (after [`KubeApiServer::outage`], or while it
    /// runs: then it is restarted); a watch resumed from before gets 410
    /// Gone.
    pub fn restore_compacted(&self) {
        self.process.borrow_mut().kill(Signal::Usr2);
        self.wait_ready();
    }
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        let process = self.process.get_mut();
        if process.is_running() {
            process.kill(Signal::Term);
            // The script stops etcd and the API server before it exits.
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while process.is_running() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if std::thread::panicking() {
            let log = self.server_log();
            let tail: Vec<&str> = log.lines().rev().take(30).collect();
            eprintln!(
                "---- kube-apiserver log, last lines ----\n{}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
    }
}

//! A file system whose reads hang, on demand: the files of a directory
//! served read-only through FUSE by `hang_fs.py` (the kernel's protocol
//! on `/dev/fuse`, no library), until [`HangingFs::hang`] makes every
//! request wait unanswered — a dead NFS server, a stuck Secret volume.
//! The kernel caches nothing of it, so every stat, open and read of a
//! file under the mount reaches the server and hangs with it.
//!
//! Drop answers the held requests with EIO, unmounts (lazily) and ends
//! the server, whose exit closes `/dev/fuse`: the kernel then fails
//! anything still pending. Also when the test panics.
//!
//! Mount it before starting a daemon in a namespace: `ip netns exec`
//! gives the daemon a copy of the mounts as they are then.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use crate::dir::LabDir;
use crate::require::{require_root, require_tools};

const SERVER: &str = include_str!("hang_fs.py");

/// A mounted [`HangingFs`]; see the module's doc.
pub struct HangingFs {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    mountpoint: PathBuf,
    /// Holds the mount point and the server's script; removed last.
    _dir: LabDir,
}

impl HangingFs {
    /// Serves the regular files of `backing` (read at each request: write
    /// them there, never through the mount) at a fresh mount point.
    pub fn mount(backing: &Path) -> HangingFs {
        require_root();
        require_tools(&["python3", "mount", "umount"]);
        assert!(
            Path::new("/dev/fuse").exists(),
            "this test needs FUSE: /dev/fuse is missing (modprobe fuse)"
        );
        let dir = LabDir::new("fuse");
        let script = dir.write("hang_fs.py", SERVER);
        let mountpoint = dir.join("mnt");
        std::fs::create_dir(&mountpoint)
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", mountpoint.display()));
        let mut child = Command::new("python3")
            .arg(&script)
            .arg(backing)
            .arg(&mountpoint)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start python3 {}: {e}", script.display()));
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut fs = HangingFs {
            child,
            stdin,
            stdout,
            mountpoint,
            _dir: dir,
        };
        let first = fs.answer();
        assert_eq!(first, "mounted", "the FUSE server did not mount");
        fs
    }

    /// Where the files are.
    pub fn path(&self) -> &Path {
        &self.mountpoint
    }

    /// From now on, every request waits unanswered.
    pub fn hang(&mut self) {
        assert_eq!(self.command("hang"), "ok");
    }

    /// Answers the held requests and every later one.
    pub fn serve(&mut self) {
        assert_eq!(self.command("serve"), "ok");
    }

    /// How many requests wait unanswered now.
    pub fn held(&mut self) -> usize {
        let n = self.command("held");
        n.parse()
            .unwrap_or_else(|_| panic!("the FUSE server answered {n:?} to held"))
    }

    fn command(&mut self, line: &str) -> String {
        let stdin = self.stdin.as_mut().expect("the FUSE server runs");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .unwrap_or_else(|e| panic!("the FUSE server: {e}"));
        self.answer()
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        let n = self
            .stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("the FUSE server: {e}"));
        if n == 0 {
            let status = self.child.wait();
            panic!("the FUSE server exited: {status:?}");
        }
        line.trim().to_owned()
    }
}

impl Drop for HangingFs {
    fn drop(&mut self) {
        // "stop", or end of input if it cannot be written.
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "stop");
        }
        let started = std::time::Instant::now();
        while started.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Whatever the server managed: not mounted any more.
        let _ = Command::new("umount")
            .arg("-l")
            .arg(&self.mountpoint)
            .stderr(Stdio::null())
            .status();
    }
}

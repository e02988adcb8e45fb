//! Private working directories for daemons: configs, sockets, pid files, logs.

use std::fs;
use std::path::{Path, PathBuf};

use crate::netns::{next_serial, sweep_stale_once};

/// Environment variable: when set (to anything), directories are kept after
/// the test instead of being removed. Directories of a panicking test are
/// always kept, and their path is printed.
pub const KEEP_ENV: &str = "TESTLAB_KEEP";

/// Prefix of every directory this crate creates under the temp dir. The pid
/// that follows lets a later run remove what a killed run left behind.
pub(crate) const DIR_PREFIX: &str = "testlab-";

/// A directory `$TMPDIR/testlab-PID-SERIAL-KIND`, removed on drop unless the
/// thread is panicking or `TESTLAB_KEEP` is set.
#[derive(Debug)]
pub struct LabDir {
    path: PathBuf,
}

impl LabDir {
    /// Creates a fresh directory; `kind` (e.g. `frr`) only makes it readable.
    pub fn new(kind: &str) -> LabDir {
        sweep_stale_once();
        let path = std::env::temp_dir().join(format!(
            "{DIR_PREFIX}{}-{}-{kind}",
            std::process::id(),
            next_serial()
        ));
        fs::create_dir(&path)
            .unwrap_or_else(|e| panic!("cannot create lab directory {}: {e}", path.display()));
        LabDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `contents` to `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.join(name);
        fs::write(&path, contents)
            .unwrap_or_else(|e| panic!("cannot write {}: {e}", path.display()));
        path
    }

    /// A kubeconfig (file `kubeconfig`) for the in-process API stand-in
    /// reached at 127.0.0.1:`port`, no credentials.
    pub fn write_kubeconfig(&self, port: u16) -> PathBuf {
        self.write(
            "kubeconfig",
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: standin\n  cluster:\n    server: http://127.0.0.1:{port}\n\
                 users:\n- name: standin\n  user: {{}}\ncontexts:\n- name: standin\n  context:\n    cluster: standin\n    user: standin\n\
                 current-context: standin\n"
            ),
        )
    }

    /// Reads a file of the directory; empty when it does not exist (yet).
    pub fn read(&self, name: &str) -> String {
        fs::read_to_string(self.join(name)).unwrap_or_default()
    }

    /// Gives the directory and everything in it to a system user (FRR's
    /// daemons drop to user `frr` and must create their sockets and pid
    /// files here).
    pub fn chown_to(&self, user: &str) {
        let (uid, gid) = user_ids(user);
        chown_recursive(&self.path, uid, gid);
    }
}

fn chown_recursive(path: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .unwrap_or_else(|e| panic!("cannot chown {} to {uid}:{gid}: {e}", path.display()));
    if path.is_dir() {
        let entries =
            fs::read_dir(path).unwrap_or_else(|e| panic!("cannot list {}: {e}", path.display()));
        for entry in entries.flatten() {
            chown_recursive(&entry.path(), uid, gid);
        }
    }
}

/// uid and primary gid of a user, from /etc/passwd.
pub fn user_ids(user: &str) -> (u32, u32) {
    let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.first() == Some(&user))
        .and_then(|fields| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))
        .unwrap_or_else(|| {
            panic!(
                "user {user:?} does not exist (it comes with its package, e.g. apt-get install frr)"
            )
        })
}

impl Drop for LabDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("testlab: kept {} for inspection", self.path.display());
            return;
        }
        if std::env::var_os(KEEP_ENV).is_some() {
            return;
        }
        if let Err(e) = fs::remove_dir_all(&self.path) {
            eprintln!("testlab: cannot remove {}: {e}", self.path.display());
        }
    }
}

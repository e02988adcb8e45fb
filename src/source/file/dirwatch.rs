//! inotify on the directories a path lives in: the VIP file's and the
//! config file's. Its own directory, and — when the path is a symlink —
//! the directory of each target it points through (a Kubernetes ConfigMap
//! volume: `vips.toml -> ..data/vips.toml`, `..data -> ..2026_12_01…`), so
//! an edit anywhere along the way wakes the owner. The watches follow the
//! chain: the owner calls [`PathWatch::rewatch`] after each check, and a
//! swapped `..data` moves the watch to the new directory.
//!
//! When every directory of the chain is watched ([`PathWatch::complete`])
//! the owner need not poll at all: nothing is armed while nothing changes.
//! When one cannot be watched (it does not exist, no inotify, a watched
//! directory was deleted or moved) the owner polls, and retries the watch
//! at each poll.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

/// Symlinks followed from the path at most (the kernel's own limit for
/// one lookup is 40; a longer chain is left to polling).
const MAX_HOPS: usize = 8;

/// What wakes the owner in a watched directory: anything that can change
/// what the path resolves to or what it holds, and the directory itself
/// going away.
fn mask() -> WatchMask {
    WatchMask::MODIFY
        | WatchMask::CLOSE_WRITE
        | WatchMask::ATTRIB
        | WatchMask::CREATE
        | WatchMask::DELETE
        | WatchMask::MOVED_FROM
        | WatchMask::MOVED_TO
        | WatchMask::DELETE_SELF
        | WatchMask::MOVE_SELF
}

/// The directories `path` depends on — its own, then each symlink
/// target's, in order, without repeats; `complete` is false when the chain
/// is longer than [`MAX_HOPS`] — with, for each, the names in it that the
/// path resolves through: the file (or link) itself, and the first
/// component of a relative link target that goes through a subdirectory
/// (`..data` of `..data/vips.toml`). Only an event on one of those names
/// can change what the path holds; another file written in the same
/// directory (a log, an editor's swap file before its rename) cannot.
fn chain(path: &Path) -> (Vec<(PathBuf, Vec<OsString>)>, bool) {
    let parent = |p: &Path| match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut out: Vec<(PathBuf, Vec<OsString>)> = Vec::new();
    let mut note = |dir: &Path, name: Option<&OsStr>| {
        let i = match out.iter().position(|(d, _)| d == dir) {
            Some(i) => i,
            None => {
                out.push((dir.to_path_buf(), Vec::new()));
                out.len() - 1
            }
        };
        if let Some(name) = name
            && !out[i].1.iter().any(|n| n == name)
        {
            out[i].1.push(name.to_os_string());
        }
    };
    let mut p = path.to_path_buf();
    for _ in 0..MAX_HOPS {
        let dir = parent(&p);
        note(&dir, p.file_name());
        match std::fs::read_link(&p) {
            Ok(target) if target.is_absolute() => p = target,
            Ok(target) => {
                let mut parts = target.components();
                if let (Some(first), Some(_)) = (parts.next(), parts.next()) {
                    note(&dir, Some(first.as_os_str()));
                }
                p = dir.join(target);
            }
            // Not a symlink (or not there): the chain ends here.
            Err(_) => return (out, true),
        }
    }
    (out, false)
}

/// The watches on one path's directories.
pub struct PathWatch {
    events: inotify::EventStream<Vec<u8>>,
    path: PathBuf,
    /// The watched directories, by descriptor, with the names in each
    /// that the path resolves through.
    watching: BTreeMap<WatchDescriptor, (PathBuf, Vec<OsString>)>,
    /// Every directory of the chain is watched.
    complete: bool,
}

impl PathWatch {
    /// Watches `path`'s directories; `Err` when inotify is unavailable.
    pub fn new(path: &Path) -> std::io::Result<PathWatch> {
        let events = Inotify::init()?.into_event_stream(vec![0u8; 4096])?;
        let mut w = PathWatch {
            events,
            path: path.to_path_buf(),
            watching: BTreeMap::new(),
            complete: false,
        };
        w.rewatch();
        Ok(w)
    }

    /// Watches another path instead.
    pub fn set_path(&mut self, path: &Path) {
        if path != self.path {
            self.path = path.to_path_buf();
            self.rewatch();
        }
    }

    /// Whether every directory the path depends on is watched: then a
    /// change of the path shows as an event, and polling finds nothing
    /// more.
    pub fn complete(&self) -> bool {
        self.complete
    }

    /// Whether at least one directory of the chain is watched.
    pub fn watches_any(&self) -> bool {
        !self.watching.is_empty()
    }

    /// Resolves the chain again and moves the watches to it. Cheap when
    /// nothing moved: adding a watch on an inode already watched answers
    /// the same descriptor.
    pub fn rewatch(&mut self) {
        let (dirs, mut complete) = chain(&self.path);
        let mut watches = self.events.watches();
        let mut now: BTreeMap<WatchDescriptor, (PathBuf, Vec<OsString>)> = BTreeMap::new();
        for (dir, names) in dirs {
            match watches.add(&dir, mask()) {
                Ok(wd) => match now.get_mut(&wd) {
                    // Two directories of the chain are one inode (a link
                    // to a directory already watched): one watch, both
                    // sets of names.
                    Some((_, known)) => known.extend(names),
                    None => {
                        now.insert(wd, (dir, names));
                    }
                },
                Err(_) => complete = false,
            }
        }
        for (old, _) in std::mem::take(&mut self.watching) {
            if !now.contains_key(&old) {
                // Gone already if the directory was deleted.
                let _ = watches.remove(old);
            }
        }
        self.watching = now;
        self.complete = complete;
    }

    /// The next change in a watched directory that can concern the path:
    /// an event on a name the path resolves through, or on the directory
    /// itself. A watch the kernel ended (its directory deleted, moved or
    /// unmounted) makes the set incomplete until the next
    /// [`PathWatch::rewatch`]; a lost event (queue overflow) is a change.
    /// `Err` when inotify itself failed.
    pub async fn changed(&mut self) -> std::io::Result<()> {
        use futures::StreamExt;
        loop {
            let Some(event) = self.events.next().await else {
                return Err(std::io::Error::other("the inotify stream ended"));
            };
            let event = event?;
            if event.mask.contains(EventMask::IGNORED) {
                // Removed by `rewatch` (no longer ours): nothing changed.
                if self.watching.remove(&event.wd).is_none() {
                    continue;
                }
                self.complete = false;
            } else if event
                .mask
                .intersects(EventMask::DELETE_SELF | EventMask::MOVE_SELF)
            {
                self.complete = false;
            } else if let (Some(name), Some((_, names))) =
                (event.name.as_deref(), self.watching.get(&event.wd))
                && !names.iter().any(|n| n == name)
            {
                // Another file of the directory.
                continue;
            }
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn directories(path: &Path) -> (Vec<PathBuf>, bool) {
        let (chain, complete) = chain(path);
        (chain.into_iter().map(|(dir, _)| dir).collect(), complete)
    }

    #[test]
    fn a_plain_file_depends_on_its_directory_alone() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("vips.toml");
        std::fs::write(&f, "").unwrap();
        assert_eq!(directories(&f), (vec![dir.path().to_path_buf()], true));
    }

    #[test]
    fn a_configmap_volume_depends_on_the_data_directory_too() {
        // vips.toml -> ..data/vips.toml, ..data -> ..v1 (what the kubelet
        // writes).
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("..v1")).unwrap();
        std::fs::write(d.join("..v1/vips.toml"), "").unwrap();
        std::os::unix::fs::symlink("..v1", d.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/vips.toml", d.join("vips.toml")).unwrap();
        let (dirs, complete) = directories(&d.join("vips.toml"));
        assert!(complete);
        assert_eq!(dirs, vec![d.to_path_buf(), d.join("..data")]);
        // The kubelet swaps `..data`; the file itself lives under it.
        let (chain, _) = chain(&d.join("vips.toml"));
        let names =
            |i: usize| -> Vec<&str> { chain[i].1.iter().map(|n| n.to_str().unwrap()).collect() };
        assert_eq!(names(0), ["vips.toml", "..data"]);
        assert_eq!(names(1), ["vips.toml"]);
    }

    #[tokio::test]
    async fn another_file_written_in_the_directory_wakes_nobody() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("vips.toml");
        std::fs::write(&f, "").unwrap();
        let mut w = PathWatch::new(&f).unwrap();
        assert!(w.complete());
        for i in 0..3 {
            std::fs::write(dir.path().join("holdfast.log"), format!("line {i}\n")).unwrap();
        }
        std::fs::rename(dir.path().join("holdfast.log"), dir.path().join("old.log")).unwrap();
        // Delivered at once if it were: half a second is plenty.
        let woke = tokio::time::timeout(Duration::from_millis(500), w.changed()).await;
        assert!(woke.is_err(), "woken by another file of the directory");
        std::fs::write(&f, "[[vip]]\n").unwrap();
        tokio::time::timeout(Duration::from_secs(10), w.changed())
            .await
            .expect("an edit of the file itself wakes the owner")
            .unwrap();
    }

    #[test]
    fn a_symlink_into_another_directory_depends_on_both() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        std::fs::write(b.path().join("real.toml"), "").unwrap();
        std::os::unix::fs::symlink(b.path().join("real.toml"), a.path().join("vips.toml")).unwrap();
        let (dirs, complete) = directories(&a.path().join("vips.toml"));
        assert!(complete);
        assert_eq!(dirs, vec![a.path().to_path_buf(), b.path().to_path_buf()]);
    }

    #[test]
    fn a_symlink_loop_is_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::os::unix::fs::symlink("b", d.join("a")).unwrap();
        std::os::unix::fs::symlink("a", d.join("b")).unwrap();
        let (dirs, complete) = directories(&d.join("a"));
        assert!(!complete);
        assert_eq!(dirs, vec![d.to_path_buf()]);
    }
}

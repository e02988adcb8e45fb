//! `[source] kind = "file"`: the VIP file, re-read when it changes.
//!
//! The file lists `[[vip]]` entries (`config::parse_vip_file` checks them
//! against the config's advertisements); the source publishes them as a
//! [`SourceSnapshot`] and publishes again whenever the parsed set, its
//! health or its error changes — never the same snapshot twice.
//!
//! # Noticing edits
//!
//! Watched; polled only where the watch cannot see. The directories the
//! path depends on are watched with inotify ([`PathWatch`]): the file's
//! own, and when the path is a symlink, each target's (a ConfigMap's
//! `..data/`, a file linked from elsewhere). Any change in one (a write, a
//! create, a rename, the `..data` symlink of a ConfigMap swapped) wakes
//! the source, which checks the file once the directory has been quiet for
//! [`SETTLE`] (3 ms) — an edit reaches the speaker in a few milliseconds —
//! and moves the watches if the chain moved. While every directory of the
//! chain is watched, nothing else is armed: an idle daemon is never woken
//! for the file. Polling takes over where a directory cannot be watched
//! (it does not exist yet, it was deleted or moved, a symlink loop, a
//! kernel without inotify): every second while inotify watches part of
//! the chain, four times a second without inotify, retrying the watch at
//! each poll. What inotify cannot see at all (a symlinked parent directory
//! re-pointed, a network file system written from another host) is left
//! to the periodic reconcile (`[source] resync`), which reads the file
//! from scratch.
//!
//! Every check, woken or polled (250 ms in the daemon), stats the path
//! *following symlinks*, and the file is read when what the stat says
//! (device, inode, size, mtime, ctime) differs from the last read. That one
//! rule covers every way files get replaced:
//!
//! - edited in place: size, mtime and ctime change;
//! - a new file written and renamed over the old one (vim, `sed -i`,
//!   configuration management): the path now names another inode;
//! - a Kubernetes ConfigMap volume (`vips.toml -> ..data/vips.toml`, with
//!   `..data` a symlink that the kubelet swaps atomically to a new
//!   timestamped directory): the path resolves to another inode;
//! - deleted and re-created: the stat fails in between, then finds a file.
//!
//! Three rules keep the source from acting on states nobody meant:
//!
//! - **Settle.** An editor's intermediate states (a file truncated and not
//!   yet rewritten, the moment between vim renaming the old file away and
//!   writing the new one) last microseconds; they must not be taken for the
//!   operator's intent, nor a missing file flap the source's health. A
//!   check woken by inotify runs only after [`SETTLE`] without any event in
//!   the directory, so what it sees has stood still that long. A polled
//!   check acts on a change once the stat has shown it at two checks in a
//!   row, one poll apart (within two poll intervals: 2 s in the daemon
//!   while inotify watches part of the chain, 0.5 s without it). Until the first snapshot is published nothing waits:
//!   there is no set to protect.
//! - **Empty is confirmed.** A file truncated and rewritten in place (`>`
//!   in a shell, a program that opens with `O_TRUNC` and then spends time
//!   producing 400k lines) is empty, and valid, for as long as the writer
//!   takes before its first write — far longer than [`SETTLE`]. Believing
//!   it would count every VIP as absent (hold-down, damping, counters,
//!   status) for nothing. So a valid file with no VIP after a set that had
//!   some is believed only once it has stayed so for [`EMPTY_SETTLE`]
//!   (re-read until then); the last good set stands meanwhile.
//! - **Consistent read.** The file is stat'ed again after reading; when it
//!   changed while being read, the read is discarded and the next check
//!   starts over.
//! - **Racy timestamps.** Timestamps have a granularity (a clock tick; up
//!   to 2 s on some file systems), so a file rewritten with the same size
//!   within the tick of the last read shows the same stat. While the file's
//!   last change lies within [`RACY_WINDOW`] of the last read, it is read
//!   again at every poll (git's "racily clean" index entries, same answer).
//!   A read whose text is unchanged publishes nothing.
//!
//! # Health
//!
//! | situation | `vips` | `healthy` | `synced` | `error` |
//! |---|---|---|---|---|
//! | before the first check | empty | false | false | none |
//! | the file parses | its VIPs | true | true | none |
//! | broken or missing after a good read | the last good set | false | true | `path:line:col: message` lines |
//! | broken or missing since start | empty | false | false | `path:line:col: message` lines |
//!
//! A broken file never empties the set: the stability layer keeps every
//! route of an unhealthy source, so while the file is broken nothing it
//! dropped is withdrawn (a VIP whose TCP probe fails still is: the probe is
//! no word of the file's), and what the broken file would have dropped is
//! not even counted as absent. A VIP removed from a *valid* file is simply left out
//! of the snapshot, and the stability layer holds it down like any
//! vanished VIP.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::{self, MissedTickBehavior};
use tracing::{info, warn};

pub mod dirwatch;
pub mod parse;

pub use parse::{VipEntry, load_vip_file, parse_vip_file, parse_vip_file_into};

use super::SnapshotSink;
use crate::config::{self, Config, Diagnostic};
use crate::model::{Interner, Route, SourceSnapshot, Vip, VipMap};
use dirwatch::PathWatch;

#[cfg(test)]
mod tests;

/// How often the daemon checks the VIP file without being woken.
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_millis(250);

/// While inotify watches part of the file's directories, polls are this
/// many times further apart (1 s in the daemon); while it watches all of
/// them, there are none.
pub const WATCHED_POLL_FACTOR: u32 = 4;

/// How long the VIP file's directory must be quiet after an inotify event
/// before the file is checked: an editor's save (write a temporary file,
/// rename it over) is a burst of events microseconds apart, and the check
/// should see its end, not its middle.
pub const SETTLE: Duration = Duration::from_millis(3);

/// How long a VIP file that turned empty must stay empty before the source
/// believes it (see "Empty is confirmed" in the module doc). Emptying the
/// file on purpose withdraws everything only after the hold-down anyway;
/// one more second costs nothing.
pub const EMPTY_SETTLE: Duration = Duration::from_secs(1);

/// While the file's last change is this close to the last read, the stat
/// cannot be trusted to show a further change, and the file is read at
/// every poll. Covers timestamp granularity up to 2 s (FAT; ext3 with small
/// inodes has 1 s) and a little clock skew on network file systems.
pub const RACY_WINDOW: Duration = Duration::from_secs(3);

/// A VIP file larger than this is refused rather than read: it is not a
/// VIP file (the path is wrong), and reading it 4 times a second would hurt.
pub const MAX_FILE_LEN: u64 = config::MAX_VIP_FILE_LEN;

/// What the file source needs from the config; a reload that changes it
/// takes effect without restarting the source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSettings {
    /// The VIP file, as configured (diagnostics name it this way).
    pub path: PathBuf,
    /// The config's advertisements in order, with their `vip_ranges`; the
    /// first is the default for entries that name none (see
    /// `Config::vip_file_advertisements`).
    pub advertisements: Vec<config::VipFileAdvertisement>,
}

impl FileSettings {
    /// The settings of a `kind = "file"` config; `None` for other kinds.
    pub fn from_config(config: &Config) -> Option<Self> {
        config.file_source().map(|path| FileSettings {
            path: path.to_path_buf(),
            advertisements: config.vip_file_advertisements(),
        })
    }
}

/// The VIP file source: what it last saw of the file and last published.
///
/// [`run`] drives it; [`FileSource::check`] is one poll, for callers that
/// want to drive it themselves.
#[derive(Debug)]
pub struct FileSource {
    settings: FileSettings,
    /// What the previous check's stat found (the settle rule compares).
    last_stat: Option<Result<Stamp, String>>,
    /// The last read; `None` before the first, after a stat failure and
    /// after the path changed.
    last_read: Option<LastRead>,
    /// The last set that parsed; `None` until one has.
    last_good: Option<Arc<VipMap>>,
    /// Why the file is unusable now.
    error: Option<String>,
    /// The last snapshot published.
    published: Option<SourceSnapshot>,
    /// VIPs on which resyncs found the set in force wrong, so far.
    repairs: u64,
    /// The next stat is taken as settled: inotify showed the directory
    /// quiet for [`SETTLE`].
    trust_next_stat: bool,
    /// When a read first found the file valid and empty after a set with
    /// VIPs; the emptiness is believed [`EMPTY_SETTLE`] later.
    empty_since: Option<Nanos>,
    /// The first check's stat and read, done before the source's task
    /// first ran ([`FirstRead`]); the next check takes them instead of
    /// its own.
    first_read: Option<(Result<Stamp, String>, Option<Read>)>,
}

/// A read that began at `.0`, prepared into `.1`, the file stat'ed as
/// `.2` after it.
type Read = (Nanos, Prepared, Result<Stamp, String>);

/// Nanoseconds since the Unix epoch (negative before it), as file
/// timestamps are kept.
type Nanos = i128;

/// What a stat says about the file, compared to notice changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Nanos,
    /// The inode change time: moves on every write, and unlike mtime
    /// cannot be set back by `touch` or `cp -p`.
    changed: Nanos,
}

impl Stamp {
    fn latest_change(&self) -> Nanos {
        self.modified.max(self.changed)
    }
}

#[derive(Debug)]
struct LastRead {
    stamp: Stamp,
    /// When the read began.
    at: Nanos,
    /// What the text was (its digest), or why it could not be read (not
    /// UTF-8, permissions). Only the digest is kept: the text of a file of
    /// 100k VIPs is megabytes, and it is needed only to tell whether a
    /// read found anything new.
    text: Result<Digest, String>,
}

/// The length and a 64-bit hash of a file's text (foldhash, fixed seed:
/// the same text always gives the same digest). Two different texts of
/// the same length with the same hash would make an edit go unnoticed
/// until the next one; the odds are about 2^-64 per edit. The first read
/// is on the way to the first UPDATE: foldhash digests a file of 100k
/// VIPs (3.4 MB) in 0.15–0.4 ms, where std's SipHash took 0.7–1.5 ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Digest {
    len: usize,
    hash: u64,
}

impl Digest {
    fn of(text: &str) -> Digest {
        use std::hash::BuildHasher;
        Digest {
            len: text.len(),
            hash: foldhash::quality::FixedState::with_seed(0x686f_6c64_6661_7374)
                .hash_one(text.as_bytes()),
        }
    }
}

/// What a read yields, worked out beside it on the blocking pool: the
/// text's digest, and the text parsed — unless the read is to be discarded
/// anyway (the file changed while read) or its text is the last read's,
/// which publishes nothing ([`FileSource::after_prepared`] decides).
#[derive(Debug)]
struct Prepared {
    digest: Result<Digest, String>,
    /// `None`: not parsed (see above).
    parsed: Option<Result<VipMap, String>>,
}

impl Prepared {
    /// `text`, read from `path` stat'ed as `stamp` before and `after`
    /// after the read; `last`: the digest of the last read.
    fn of(
        path: &Path,
        advertisements: &[config::VipFileAdvertisement],
        stamp: Stamp,
        text: Result<String, String>,
        after: &Result<Stamp, String>,
        last: Option<&Result<Digest, String>>,
    ) -> Prepared {
        let digest = text.as_deref().map(Digest::of).map_err(Clone::clone);
        let wanted = after.as_ref() == Ok(&stamp) && last != Some(&digest);
        let parsed = wanted.then(|| text.and_then(|t| parse(path, t, advertisements)));
        Prepared { digest, parsed }
    }
}

/// Reads `path`, stat'ed as `stamp` just before, then stats it again and
/// prepares what was read (blocking): when the read began, what it
/// yields, and the second stat. `last`: the digest of the last read.
fn read_prepared(
    path: &Path,
    advertisements: &[config::VipFileAdvertisement],
    stamp: Stamp,
    last: Option<&Result<Digest, String>>,
) -> Read {
    let at = now();
    let text = read_text(path);
    let after = stat(path);
    let prepared = Prepared::of(path, advertisements, stamp, text, &after, last);
    (at, prepared, after)
}

/// Whether a file last changed at `stamp` may have changed again, after a
/// read that began `read_at`, without its stat showing it.
fn racy(stamp: &Stamp, read_at: Nanos) -> bool {
    stamp.latest_change() >= read_at - RACY_WINDOW.as_nanos() as Nanos
}

/// What a check does after its stat.
#[derive(Debug, PartialEq)]
enum AfterStat {
    /// Nothing more this poll; maybe a snapshot to publish.
    Done(Option<SourceSnapshot>),
    /// Read the file, which the stat showed as this.
    Read(Stamp),
}

impl FileSource {
    /// A source that has not looked at the file yet.
    pub fn new(settings: FileSettings) -> Self {
        FileSource {
            settings,
            last_stat: None,
            last_read: None,
            last_good: None,
            error: None,
            published: None,
            repairs: 0,
            trust_next_stat: false,
            empty_since: None,
            first_read: None,
        }
    }

    /// The file was read as empty and that is not believed yet: the source
    /// wants another check within [`EMPTY_SETTLE`].
    pub fn confirming_empty(&self) -> bool {
        self.empty_since.is_some()
    }

    /// The settings in force.
    pub fn settings(&self) -> &FileSettings {
        &self.settings
    }

    /// The source's view now: the last snapshot published, or before the
    /// first, an empty, unhealthy, unsynced one.
    pub fn snapshot(&self) -> SourceSnapshot {
        let synced = self.last_good.is_some();
        SourceSnapshot {
            vips: self.last_good.clone().unwrap_or_default(),
            healthy: synced && self.error.is_none(),
            synced,
            error: self.error.clone(),
            reconcile_repairs: self.repairs,
            ..SourceSnapshot::default()
        }
    }

    /// Reads and parses the file once, blocking, with none of the state of
    /// the source: the set, or the `path:line:col: message` lines.
    pub fn read(&self) -> Result<VipMap, String> {
        let path = &self.settings.path;
        stat(path)?;
        let text = read_text(path)?;
        parse(path, text, &self.settings.advertisements)
    }

    /// Applies a config reload; answers whether the file should be read
    /// again at once. New advertisement names or `vip_ranges` take effect
    /// at once: the file is read again and parsed with them (a VIP naming
    /// an advertisement that is gone, or outside its new ranges, makes the
    /// file unusable: the last good set stands). A new path is read at the next checks, under the settle
    /// rule.
    pub fn reconfigure(&mut self, settings: FileSettings) -> bool {
        if settings == self.settings {
            return false;
        }
        let same_path = settings.path == self.settings.path;
        self.settings = settings;
        self.last_read = None;
        // Begun with the old settings: its result is not this file's.
        self.first_read = None;
        if !same_path {
            self.last_stat = None;
            return false;
        }
        true
    }

    /// A check after inotify showed the directory quiet for [`SETTLE`]:
    /// what the stat shows is acted on at once, without waiting for a
    /// second check to agree.
    pub async fn check_settled(&mut self) -> Option<SourceSnapshot> {
        self.trust_next_stat = true;
        self.check().await
    }

    /// One poll: stats the file, reads it if needed, and returns the
    /// snapshot to publish if it differs from the last one published. The
    /// file system is touched on tokio's blocking pool.
    pub async fn check(&mut self) -> Option<SourceSnapshot> {
        let path = self.settings.path.clone();
        let (stat_result, early) = match self.first_read.take() {
            Some((stat, read)) => (stat, read),
            None => {
                let stat_path = path.clone();
                let stat = tokio::task::spawn_blocking(move || stat(&stat_path))
                    .await
                    .unwrap_or_else(|join| {
                        Err(file_problem(&path, format!("cannot stat file: {join}")))
                    });
                (stat, None)
            }
        };
        let stamp = match self.after_stat(stat_result) {
            AfterStat::Done(snapshot) => return snapshot,
            AfterStat::Read(stamp) => stamp,
        };
        if let Some((at, prepared, after)) = early {
            // Read right after the stat the decision was made on, with no
            // last read to compare: what this check would have read.
            return self.after_prepared(stamp, at, prepared, after);
        }
        // The text is digested and parsed where it is read, on the
        // blocking pool: a file of 100k VIPs takes tens of milliseconds to
        // parse, which on the runtime's one thread would hold back every
        // session (keepalives, the OPEN exchange) meanwhile.
        let last = self.last_read.as_ref().map(|r| r.text.clone());
        let names = self.settings.advertisements.clone();
        let read =
            tokio::task::spawn_blocking(move || read_prepared(&path, &names, stamp, last.as_ref()))
                .await;
        match read {
            Ok((at, prepared, after)) => self.after_prepared(stamp, at, prepared, after),
            Err(_) => {
                // The read was cancelled or panicked: start over next poll.
                self.last_stat = None;
                None
            }
        }
    }

    /// The decision after a stat (no IO).
    fn after_stat(&mut self, stat: Result<Stamp, String>) -> AfterStat {
        let trusted = std::mem::take(&mut self.trust_next_stat);
        let settled = trusted || self.published.is_none() || self.last_stat.as_ref() == Some(&stat);
        self.last_stat = Some(stat.clone());
        if !settled {
            return AfterStat::Done(None);
        }
        match stat {
            Err(problem) => {
                self.last_read = None;
                AfterStat::Done(self.observe(Err(problem)))
            }
            Ok(stamp) => match &self.last_read {
                Some(last) if last.stamp == stamp && !racy(&last.stamp, last.at) => {
                    AfterStat::Done(None)
                }
                _ => AfterStat::Read(stamp),
            },
        }
    }

    /// The decision after a read that began at `at`, of a file stat'ed as
    /// `stamp` before and `after` after it (no IO): [`Prepared::of`] and
    /// [`Self::after_prepared`] in one, as the tests drive it.
    #[cfg(test)]
    fn after_read(
        &mut self,
        stamp: Stamp,
        at: Nanos,
        text: Result<String, String>,
        after: Result<Stamp, String>,
    ) -> Option<SourceSnapshot> {
        let last = self.last_read.as_ref().map(|r| r.text.clone());
        let prepared = Prepared::of(
            &self.settings.path,
            &self.settings.advertisements,
            stamp,
            text,
            &after,
            last.as_ref(),
        );
        self.after_prepared(stamp, at, prepared, after)
    }

    /// One check whose stat showed the file changed and whose read, begun
    /// at `at` (nanoseconds since the Unix epoch), found `text` (or could
    /// not read it): what [`Self::check`] decides after its read — the
    /// digest (an unchanged text publishes nothing), the parse, "empty is
    /// confirmed", the last good set and the health — with no IO and no
    /// clock. The snapshot to publish, if it differs from the last one.
    /// For a driver on a clock of its own: the deterministic simulation
    /// (tests/simulation.rs) edits and breaks a VIP file through it.
    pub fn take_read(&mut self, at: i128, text: Result<String, String>) -> Option<SourceSnapshot> {
        // The stat of a file that changed, the same before and after the
        // read: the read stands.
        let stamp = Stamp {
            device: 0,
            inode: 0,
            len: text.as_ref().map_or(0, |t| t.len() as u64),
            modified: at,
            changed: at,
        };
        let last = self.last_read.as_ref().map(|r| r.text.clone());
        let prepared = Prepared::of(
            &self.settings.path,
            &self.settings.advertisements,
            stamp,
            text,
            &Ok(stamp),
            last.as_ref(),
        );
        self.after_prepared(stamp, at, prepared, Ok(stamp))
    }

    /// The decision after a read that began at `at`, of a file stat'ed as
    /// `stamp` before and `after` after it, whose text was digested and
    /// parsed into `prepared` (no IO).
    fn after_prepared(
        &mut self,
        stamp: Stamp,
        at: Nanos,
        prepared: Prepared,
        after: Result<Stamp, String>,
    ) -> Option<SourceSnapshot> {
        if after.as_ref() != Ok(&stamp) {
            // Written while read: what was read may be half of it. The next
            // check sees the new stat settled (or not) and reads again.
            self.last_stat = Some(after);
            return None;
        }
        let Prepared { digest, parsed } = prepared;
        let unchanged = self
            .last_read
            .as_ref()
            .is_some_and(|last| last.text == digest);
        let read = LastRead {
            stamp,
            at,
            text: digest,
        };
        if unchanged {
            self.last_read = Some(read);
            return None;
        }
        let Some(parsed) = parsed else {
            // Prepared against another last read (cannot happen while the
            // check holds the source): start over at the next check.
            self.last_read = None;
            self.last_stat = None;
            return None;
        };
        let had_vips = self.last_good.as_ref().is_some_and(|g| !g.is_empty());
        if had_vips && parsed.as_ref().is_ok_and(VipMap::is_empty) {
            let since = *self.empty_since.get_or_insert(at);
            if at - since < EMPTY_SETTLE.as_nanos() as Nanos {
                // Not believed yet: no `last_read`, so the next check reads
                // it again rather than taking it as already seen.
                self.last_read = None;
                return None;
            }
        }
        self.empty_since = None;
        self.last_read = Some(read);
        self.observe(parsed)
    }

    /// Takes in the outcome of a read; returns the snapshot to publish if
    /// it differs from the last one published (no IO).
    /// A resync's fresh read of the file (`vips`): when it differs from
    /// the set in force — a change the watch and the polls missed — it is
    /// applied, logged and counted (`reconcile_repairs` of the snapshots
    /// from now on), and the next check starts from scratch.
    pub fn repair(&mut self, vips: VipMap) -> Option<SourceSnapshot> {
        let n = crate::model::set_differences(self.last_good.as_deref()?, &vips);
        if n == 0 {
            return None;
        }
        warn!(
            differences = n,
            path = %self.settings.path.display(),
            "resync: the VIP file differs from the set in force (a missed change): applying it"
        );
        self.repairs += n as u64;
        self.last_read = None;
        self.last_stat = None;
        self.observe(Ok(vips))
    }

    fn observe(&mut self, outcome: Result<VipMap, String>) -> Option<SourceSnapshot> {
        match outcome {
            Ok(vips) => {
                self.last_good = Some(Arc::new(vips));
                self.error = None;
            }
            // The last good set stands; only the error and health change.
            Err(problem) => self.error = Some(problem),
        }
        let snapshot = self.snapshot();
        if self.published.as_ref() == Some(&snapshot) {
            return None;
        }
        log_change(&self.settings.path, self.published.as_ref(), &snapshot);
        self.published = Some(snapshot.clone());
        Some(snapshot)
    }
}

/// The first check's IO — the stat, and the read and parse that follow it
/// whatever that check decides, since before the first snapshot nothing
/// waits (see "Settle") — done before the source's task first runs. At
/// start the daemon does it on the thread that has just read the config,
/// so the VIP file is being parsed while the runtime binds the API and
/// the sessions connect, rather than after.
///
/// The directories the file's path depends on are watched first, so that
/// an edit made after the read shows as an event: no second read is
/// needed to find one (a racily clean file would be read whole again,
/// beside the first read's set, at the peak of the load).
pub struct FirstRead {
    watch: std::io::Result<PathWatch>,
    stat: Result<Stamp, String>,
    read: Option<Read>,
}

impl FirstRead {
    /// Watches the directories of the path `settings` name, then stats and
    /// reads the file (blocking; on a thread of the runtime's blocking
    /// pool, which the watch registers with).
    pub fn of(settings: &FileSettings) -> FirstRead {
        let watch = PathWatch::new(&settings.path);
        let stat = stat(&settings.path);
        let read = match &stat {
            Ok(stamp) => Some(read_prepared(
                &settings.path,
                &settings.advertisements,
                *stamp,
                None,
            )),
            Err(_) => None,
        };
        FirstRead { watch, stat, read }
    }
}

/// The watch made, or `None` (logged) when inotify is unavailable.
fn watch_or_poll(watch: std::io::Result<PathWatch>) -> Option<PathWatch> {
    watch
        .map_err(|e| warn!("inotify unavailable ({e}): the VIP file is polled only"))
        .ok()
}

/// The file source as the daemon starts it: its settings, and either the
/// directories the path depends on watched or the first read to come,
/// which brings its watch.
pub struct Start {
    source: FileSource,
    directory: Option<PathWatch>,
    first: Option<oneshot::Receiver<FirstRead>>,
    resyncs: Option<mpsc::UnboundedReceiver<()>>,
}

impl Start {
    /// Watches the file's directories now, or, given `first` (made with
    /// `settings`), takes its watch and read when it comes.
    pub fn begin(settings: FileSettings, first: Option<oneshot::Receiver<FirstRead>>) -> Start {
        let source = FileSource::new(settings);
        let directory = match first {
            Some(_) => None,
            None => watch_or_poll(PathWatch::new(&source.settings().path)),
        };
        Start {
            source,
            directory,
            first,
            resyncs: None,
        }
    }

    /// The periodic reconcile (`[source] resync`): each `()` sent makes
    /// the source read the file from scratch, whatever its watch and polls
    /// saw, and apply it if it differs from the set in force
    /// ([`FileSource::repair`]).
    pub fn with_resyncs(mut self, resyncs: mpsc::UnboundedReceiver<()>) -> Start {
        self.resyncs = Some(resyncs);
        self
    }
}

/// A file changed this recently is left to the watch and the polls at a
/// resync: they are still on it.
pub const RESYNC_QUIET: Duration = Duration::from_secs(5);

/// Runs the file source until `shutdown` completes or nobody receives
/// snapshots any more. Checks the file [`SETTLE`] after inotify reports a
/// change in a directory it depends on (its own, and each symlink
/// target's: [`PathWatch`]). While every one of those is watched nothing
/// else is armed: an idle daemon is not woken for the file. Else it polls:
/// every `poll` (the daemon uses [`DEFAULT_POLL_INTERVAL`]) without
/// inotify, every [`WATCHED_POLL_FACTOR`] × `poll` while inotify watches
/// part of the chain, retrying the rest at each poll. Starts from `start`;
/// takes config reloads from `settings` (when its sender is dropped, the
/// settings in force stay).
pub async fn run(
    start: Start,
    mut settings: watch::Receiver<FileSettings>,
    mut sink: impl SnapshotSink,
    poll: Duration,
    shutdown: impl Future<Output = ()>,
) {
    let Start {
        mut source,
        mut directory,
        first,
        mut resyncs,
    } = start;
    let mut shutdown = pin!(shutdown);
    if let Some(first) = first {
        let first = tokio::select! {
            biased;
            () = &mut shutdown => return,
            first = first => first,
        };
        match first {
            Ok(FirstRead { watch, stat, read }) => {
                directory = watch_or_poll(watch);
                source.first_read = Some((stat, read));
            }
            // Lost (the thread that read it failed): a watch, and a
            // first check, of its own.
            Err(_) => {
                directory = watch_or_poll(PathWatch::new(&source.settings().path));
            }
        }
    }
    if *settings.borrow_and_update() != source.settings {
        // Settings sent since the start: taken as a reload.
        settings.mark_changed();
    }
    // When the directory has been quiet for SETTLE since the last event.
    let mut settled_at: Option<time::Instant> = None;
    // A zero period would make the interval panic.
    let poll = poll.max(Duration::from_millis(1));
    let period_now = |directory: &Option<PathWatch>| match directory {
        Some(d) if d.complete() => None,
        Some(d) if d.watches_any() => Some(poll * WATCHED_POLL_FACTOR),
        _ => Some(poll),
    };
    // The file is read at start, whatever watches it.
    settled_at.get_or_insert_with(time::Instant::now);
    let mut period = period_now(&directory);
    let mut ticks = period.map(interval_from_now);
    let mut reloads = true;
    loop {
        if period_now(&directory) != period {
            period = period_now(&directory);
            ticks = period.map(interval_from_now);
        }
        let snapshot = tokio::select! {
            biased;
            () = &mut shutdown => return,
            () = sink.closed() => return,
            changed = settings.changed(), if reloads => {
                if changed.is_err() {
                    reloads = false;
                    continue;
                }
                let new = settings.borrow_and_update().clone();
                let moved = new.path != source.settings().path;
                if let Some(d) = directory.as_mut() {
                    d.set_path(&new.path);
                }
                if source.reconfigure(new) {
                    // Read the file again now, with the new names.
                    settled_at = Some(time::Instant::now());
                } else if moved {
                    // A new path: read once the watch on it stood SETTLE
                    // (no poll may be coming).
                    settled_at = Some(time::Instant::now() + SETTLE);
                }
                continue;
            }
            event = next_event(&mut directory) => {
                match event {
                    Ok(()) => settled_at = Some(time::Instant::now() + SETTLE),
                    Err(e) => {
                        warn!("inotify failed ({e}): the VIP file is polled only");
                        directory = None;
                    }
                }
                continue;
            }
            resync = next_resync(&mut resyncs) => {
                if resync.is_none() {
                    resyncs = None;
                    continue;
                }
                // An unhealthy source reports its own problem; a resync
                // reads only a file that parsed before.
                if !source.snapshot().healthy {
                    continue;
                }
                let settings = source.settings().clone();
                let fresh = tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    fresh = tokio::task::spawn_blocking(move || fresh_read(settings)) => fresh,
                };
                match fresh {
                    Ok(Some(Ok(vips))) => source.repair(vips),
                    _ => None,
                }
            }
            () = crate::sleep::until(settled_at), if settled_at.is_some() => {
                settled_at = None;
                let snapshot = tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    snapshot = source.check_settled() => snapshot,
                };
                // The chain may have moved (a ConfigMap's `..data` swapped).
                if let Some(d) = directory.as_mut() {
                    d.rewatch();
                }
                snapshot
            }
            _ = next_tick(&mut ticks) => {
                let snapshot = tokio::select! {
                    biased;
                    () = &mut shutdown => return,
                    snapshot = source.check() => snapshot,
                };
                // Polling because part of the chain is not watched: try
                // again (the directory may be back). Once it is all
                // watched no poll follows, so what changed before the
                // watch began is checked now.
                if let Some(d) = directory.as_mut() {
                    d.rewatch();
                    if d.complete() {
                        settled_at = Some(time::Instant::now() + SETTLE);
                    }
                }
                snapshot
            }
        };
        if source.confirming_empty() && settled_at.is_none() {
            // Read it again once an emptiness seen now may be believed.
            settled_at = Some(time::Instant::now() + EMPTY_SETTLE);
        }
        if let Some(snapshot) = snapshot
            && !sink.publish(snapshot)
        {
            return;
        }
    }
}

/// The next resync request; never, without a sender.
async fn next_resync(resyncs: &mut Option<mpsc::UnboundedReceiver<()>>) -> Option<()> {
    match resyncs {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// A resync's read (blocking): the file read and parsed from scratch, or
/// `None` when it changed in the last [`RESYNC_QUIET`] (the watch and the
/// polls are still on it).
fn fresh_read(settings: FileSettings) -> Option<Result<VipMap, String>> {
    let recent = std::fs::metadata(&settings.path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_none_or(|age| age < RESYNC_QUIET);
    (!recent).then(|| FileSource::new(settings).read())
}

/// A poll every `period`, the first one `period` from now.
fn interval_from_now(period: Duration) -> time::Interval {
    let mut ticks = time::interval_at(time::Instant::now() + period, period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    ticks
}

/// The next poll, or never while nothing polls.
async fn next_tick(ticks: &mut Option<time::Interval>) {
    match ticks {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The next inotify change, or never without a watch.
async fn next_event(directory: &mut Option<PathWatch>) -> std::io::Result<()> {
    match directory {
        Some(d) => d.changed().await,
        None => std::future::pending().await,
    }
}

fn file_problem(path: &Path, message: String) -> String {
    Diagnostic {
        path: path.to_path_buf(),
        line: 1,
        col: 1,
        message,
        severity: crate::config::Severity::Error,
    }
    .to_string()
}

/// Stats the file (following symlinks) and checks it is one worth reading.
fn stat(path: &Path) -> Result<Stamp, String> {
    let meta = std::fs::metadata(path)
        .map_err(|err| file_problem(path, format!("cannot read file: {err}")))?;
    // The rule every read applies (config::read_regular_file), here
    // before the read so that a FIFO or a huge file is never opened.
    config::read::check(&meta, MAX_FILE_LEN)
        .map_err(|problem| file_problem(path, problem.describe("VIP file", MAX_FILE_LEN)))?;
    Ok(stamp_of(&meta))
}

#[cfg(unix)]
fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let nanos = |secs: i64, nsecs: i64| Nanos::from(secs) * 1_000_000_000 + Nanos::from(nsecs);
    Stamp {
        device: meta.dev(),
        inode: meta.ino(),
        len: meta.len(),
        modified: nanos(meta.mtime(), meta.mtime_nsec()),
        changed: nanos(meta.ctime(), meta.ctime_nsec()),
    }
}

#[cfg(not(unix))]
fn stamp_of(meta: &std::fs::Metadata) -> Stamp {
    let modified = meta.modified().map_or(0, since_epoch);
    Stamp {
        device: 0,
        inode: 0,
        len: meta.len(),
        modified,
        changed: modified,
    }
}

fn since_epoch(t: SystemTime) -> Nanos {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => Nanos::try_from(d.as_nanos()).unwrap_or(Nanos::MAX),
        Err(e) => -Nanos::try_from(e.duration().as_nanos()).unwrap_or(Nanos::MAX),
    }
}

fn now() -> Nanos {
    since_epoch(SystemTime::now())
}

fn read_text(path: &Path) -> Result<String, String> {
    config::read_text(path, "VIP file", MAX_FILE_LEN).map_err(|d| join(&d))
}

/// The VIP map of `text`. Takes the text to drop it before the map is
/// built: with 100k VIPs the text (3 MB), the parsed records and the map's
/// nodes were all held at the peak of the load.
fn parse(
    path: &Path,
    text: String,
    advertisements: &[config::VipFileAdvertisement],
) -> Result<VipMap, String> {
    let mut interner = Interner::default();
    let vips = parse::parse_vip_file_into(
        path,
        &text,
        advertisements,
        |address, service, advertisement, tenant| {
            let mut route = match service {
                None => interner.plain(advertisement),
                Some(s) => Route::new(interner.one(advertisement), Some(s.into()), None),
            };
            if let Some(t) = tenant {
                // One allocation per entry naming a tenant: such VIPs
                // do not share the plain route of their advertisement.
                route.make_mut().tenant = Some(t.into());
            }
            let vip = Vip::of(route);
            (address, vip)
        },
    )
    .map_err(|d| join(&d))?;
    drop(text);
    // The list becomes the map: sorted in place only when the file is
    // out of order.
    Ok(VipMap::from_vec(vips))
}

/// The first problems and a count of the rest: the message goes into the
/// log, `/v1/status` and `/readyz`.
fn join(diagnostics: &[Diagnostic]) -> String {
    config::list_diagnostics(diagnostics)
}

fn log_change(path: &Path, before: Option<&SourceSnapshot>, after: &SourceSnapshot) {
    let path = path.display();
    if let Some(error) = &after.error {
        if before.and_then(|b| b.error.as_ref()) != Some(error) {
            warn!(
                %path,
                kept = after.vips.len(),
                "VIP file unusable; the last good set stands until it is fixed:\n{error}"
            );
        }
        return;
    }
    let (added, removed, changed) = match before.map(|b| &*b.vips) {
        Some(old) if !old.is_empty() => (
            after.vips.keys().filter(|a| !old.contains_key(a)).count(),
            old.keys().filter(|a| !after.vips.contains_key(a)).count(),
            after
                .vips
                .iter()
                .filter(|(a, vip)| old.get(a).is_some_and(|o| o != *vip))
                .count(),
        ),
        // The first read (or one after an empty set): all of it is new,
        // counted without three walks of a set of maybe 100k VIPs on the
        // way to the first UPDATE.
        _ => (after.vips.len(), 0, 0),
    };
    info!(
        %path,
        vips = after.vips.len(),
        added,
        removed,
        changed,
        "VIP file read"
    );
}

//! The file source: its decisions on made-up stats and reads (no IO, no
//! clock), then the running source on real files in a temporary directory,
//! edited the ways editors, `sed -i` and the kubelet edit them.

use crate::model::ServiceName;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use super::*;

// ---------------------------------------------------------------------------
// Helpers

fn names(list: &[&str]) -> Vec<config::VipFileAdvertisement> {
    list.iter()
        .map(|s| config::VipFileAdvertisement::named(s))
        .collect()
}

fn settings(path: &Path) -> FileSettings {
    FileSettings {
        path: path.to_path_buf(),
        advertisements: names(&["public", "private"]),
    }
}

/// The expected set: (address, advertisement, service).
fn set(entries: &[(&str, &str, Option<&str>)]) -> crate::model::VipMap {
    entries
        .iter()
        .map(|(address, advertisement, service)| {
            let address: IpAddr = address.parse().expect("test address");
            let vip = Vip::of(Route::new(
                BTreeSet::from([advertisement.to_string()]).into(),
                service.map(ServiceName::from),
                None,
            ));
            (address, vip)
        })
        .collect()
}

const ONE: &str = "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"demo/web\"\n";

fn one() -> crate::model::VipMap {
    set(&[("198.51.100.10", "public", Some("demo/web"))])
}

const TWO: &str = "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"demo/web\"\n\n\
                   [[vip]]\naddress = \"2001:db8:100::10\"\nadvertisement = \"private\"\n";

fn two() -> crate::model::VipMap {
    set(&[
        ("198.51.100.10", "public", Some("demo/web")),
        ("2001:db8:100::10", "private", None),
    ])
}

fn healthy(vips: crate::model::VipMap) -> SourceSnapshot {
    SourceSnapshot {
        vips: vips.into(),
        healthy: true,
        synced: true,
        ..SourceSnapshot::default()
    }
}

// ---------------------------------------------------------------------------
// Decisions, on made-up stats (no IO, no clock)

const SEC: Nanos = 1_000_000_000;
/// A made-up "now", far from the epoch.
const T0: Nanos = 1_700_000_000 * SEC;

fn stamp(inode: u64, len: u64, changed: Nanos) -> Stamp {
    Stamp {
        device: 1,
        inode,
        len,
        modified: changed,
        changed,
    }
}

fn pure_source() -> FileSource {
    FileSource::new(settings(Path::new("/etc/holdfast/vips.toml")))
}

/// Runs one check's decisions: the stat, and if it asks for a read, a read
/// at `at` of `text`, with the file unchanged while read.
fn check_with(
    source: &mut FileSource,
    stat: Result<Stamp, String>,
    at: Nanos,
    text: &str,
) -> Option<SourceSnapshot> {
    match source.after_stat(stat) {
        AfterStat::Done(snapshot) => snapshot,
        AfterStat::Read(stamp) => source.after_read(stamp, at, Ok(text.to_string()), Ok(stamp)),
    }
}

/// What the blocking pool hands back for a read of `text` of a file
/// stat'ed `stamp` before and `after` after, the last read's digest `last`.
fn prepared(
    stamp: Stamp,
    text: &str,
    after: Stamp,
    last: Option<&Result<Digest, String>>,
) -> Prepared {
    let s = settings(Path::new("/etc/holdfast/vips.toml"));
    Prepared::of(
        &s.path,
        &s.advertisements,
        stamp,
        Ok(text.to_string()),
        &Ok(after),
        last,
    )
}

#[test]
fn a_read_is_parsed_beside_it_unless_it_is_discarded_or_its_text_was_seen() {
    let s = stamp(7, ONE.len() as u64, T0);
    let fresh = prepared(s, ONE, s, None);
    assert_eq!(fresh.digest, Ok(Digest::of(ONE)));
    assert_eq!(fresh.parsed, Some(Ok(one())));
    // The text of the last read: nothing to parse, nothing will publish.
    let seen = prepared(s, ONE, s, Some(&Ok(Digest::of(ONE))));
    assert_eq!(seen.parsed, None);
    // Another text than the last read's: parsed.
    let other = prepared(s, TWO, s, Some(&Ok(Digest::of(ONE))));
    assert_eq!(other.parsed, Some(Ok(two())));
    // Written while read: discarded, so not parsed either.
    let later = stamp(7, TWO.len() as u64, T0 + SEC);
    assert_eq!(prepared(s, ONE, later, None).parsed, None);
    // And the source takes a prepared read as it takes the read itself.
    let mut source = pure_source();
    assert_eq!(source.after_stat(Ok(s)), AfterStat::Read(s));
    assert_eq!(
        source.after_prepared(s, T0 + SEC, fresh, Ok(s)),
        Some(healthy(one()))
    );
}

const MISSING: &str =
    "/etc/holdfast/vips.toml:1:1: cannot read file: No such file or directory (os error 2)";

#[test]
fn before_the_first_check_the_snapshot_is_empty_unhealthy_and_unsynced() {
    let source = pure_source();
    assert_eq!(source.snapshot(), SourceSnapshot::default());
}

#[test]
fn the_first_read_is_published_at_once_and_never_twice() {
    let mut source = pure_source();
    let s = stamp(7, ONE.len() as u64, T0);
    assert_eq!(
        check_with(&mut source, Ok(s), T0 + SEC, ONE),
        Some(healthy(one()))
    );
    // Within the racy window the same stamp is read again, the same text
    // publishes nothing.
    assert_eq!(source.after_stat(Ok(s)), AfterStat::Read(s));
    assert_eq!(
        check_with(&mut source, Ok(s), T0 + 2 * SEC, ONE),
        None,
        "an unchanged re-read must publish nothing"
    );
}

#[test]
fn a_stamp_is_trusted_once_the_racy_window_is_over() {
    let mut source = pure_source();
    let s = stamp(7, ONE.len() as u64, T0);
    check_with(&mut source, Ok(s), T0, ONE);
    // Read at T0, changed at T0: racy, read again.
    assert_eq!(source.after_stat(Ok(s)), AfterStat::Read(s));
    // Read 3 s after the change: exactly the window, still racy (a change
    // in the same tick as the read could hide behind a 2 s granularity).
    let window = RACY_WINDOW.as_nanos() as Nanos;
    assert_eq!(
        source.after_read(s, T0 + window, Ok(ONE.to_string()), Ok(s)),
        None
    );
    assert_eq!(source.after_stat(Ok(s)), AfterStat::Read(s));
    // Read 1 ns past the window: the stat is trusted.
    assert_eq!(
        source.after_read(s, T0 + window + 1, Ok(ONE.to_string()), Ok(s)),
        None
    );
    assert_eq!(source.after_stat(Ok(s)), AfterStat::Done(None));
    assert!(racy(&s, T0 + window));
    assert!(!racy(&s, T0 + window + 1));
    // A timestamp in the future (touch -d, clock stepped back) is racy.
    assert!(racy(&stamp(7, 1, T0 + 3600 * SEC), T0));
}

#[test]
fn a_change_is_acted_on_once_two_checks_in_a_row_agree() {
    let mut source = pure_source();
    let old = stamp(7, ONE.len() as u64, T0);
    check_with(&mut source, Ok(old), T0 + 10 * SEC, ONE);
    let new = stamp(8, TWO.len() as u64, T0 + 20 * SEC);
    // First sight of the new stat: wait.
    assert_eq!(source.after_stat(Ok(new)), AfterStat::Done(None));
    // Same again one poll later: read.
    assert_eq!(source.after_stat(Ok(new)), AfterStat::Read(new));
    assert_eq!(
        source.after_read(new, T0 + 30 * SEC, Ok(TWO.to_string()), Ok(new)),
        Some(healthy(two()))
    );
}

#[test]
fn an_intermediate_state_seen_once_is_never_acted_on() {
    let mut source = pure_source();
    let old = stamp(7, ONE.len() as u64, T0);
    check_with(&mut source, Ok(old), T0 + 10 * SEC, ONE);
    // vim's write: the old file renamed away, the new one not there yet.
    assert_eq!(
        source.after_stat(Err(MISSING.to_string())),
        AfterStat::Done(None)
    );
    // A truncated file being rewritten in place.
    let truncated = stamp(9, 0, T0 + 20 * SEC);
    assert_eq!(source.after_stat(Ok(truncated)), AfterStat::Done(None));
    let new = stamp(9, TWO.len() as u64, T0 + 20 * SEC);
    assert_eq!(source.after_stat(Ok(new)), AfterStat::Done(None));
    assert_eq!(
        check_with(&mut source, Ok(new), T0 + 30 * SEC, TWO),
        Some(healthy(two())),
        "the first snapshot after the burst is its final state"
    );
}

#[test]
fn a_file_written_while_read_is_read_again() {
    let mut source = pure_source();
    let old = stamp(7, ONE.len() as u64, T0);
    check_with(&mut source, Ok(old), T0 + 10 * SEC, ONE);
    let new = stamp(7, TWO.len() as u64, T0 + 20 * SEC);
    source.after_stat(Ok(new));
    assert_eq!(source.after_stat(Ok(new)), AfterStat::Read(new));
    // Caught half-written: the stat after the read differs. "[[vi" would
    // be a syntax error, but it is never parsed.
    let later = stamp(7, TWO.len() as u64 + 1, T0 + 21 * SEC);
    assert_eq!(
        source.after_read(new, T0 + 21 * SEC, Ok("[[vi".to_string()), Ok(later)),
        None
    );
    assert_eq!(source.snapshot(), healthy(one()));
    // The next check sees the later stat settled, and reads.
    assert_eq!(source.after_stat(Ok(later)), AfterStat::Read(later));
}

#[test]
fn a_missing_file_keeps_the_last_good_set_unhealthy_and_comes_back() {
    let mut source = pure_source();
    check_with(&mut source, Ok(stamp(7, 1, T0)), T0 + 10 * SEC, TWO);
    assert_eq!(
        source.after_stat(Err(MISSING.to_string())),
        AfterStat::Done(None)
    );
    let broken = SourceSnapshot {
        vips: two().into(),
        healthy: false,
        synced: true,
        error: Some(MISSING.to_string()),
        ..SourceSnapshot::default()
    };
    assert_eq!(
        source.after_stat(Err(MISSING.to_string())),
        AfterStat::Done(Some(broken))
    );
    assert_eq!(
        source.after_stat(Err(MISSING.to_string())),
        AfterStat::Done(None),
        "the same problem is published once"
    );
    // Re-created: even with the same inode and the same text, it is read
    // and the source is healthy again.
    let back = stamp(7, 1, T0 + 20 * SEC);
    assert_eq!(source.after_stat(Ok(back)), AfterStat::Done(None));
    assert_eq!(
        check_with(&mut source, Ok(back), T0 + 30 * SEC, TWO),
        Some(healthy(two()))
    );
}

/// `take_read`, the decisions after a read on a driver's own clock: a
/// broken text keeps the last good set (unhealthy), the same text twice
/// publishes nothing, an empty file after a set with VIPs is believed only
/// [`EMPTY_SETTLE`] after the first read that found it so.
#[test]
fn take_read_keeps_the_last_good_set_and_confirms_an_empty_file() {
    let mut source = pure_source();
    assert_eq!(source.take_read(T0, Ok(ONE.into())), Some(healthy(one())));
    assert_eq!(source.take_read(T0 + SEC, Ok(ONE.into())), None);
    let broken = source
        .take_read(T0 + 2 * SEC, Ok("[[vi".into()))
        .expect("the health changes");
    assert_eq!(*broken.vips, one());
    assert!(!broken.healthy && broken.synced && broken.error.is_some());
    assert_eq!(
        source.take_read(T0 + 3 * SEC, Ok(TWO.into())),
        Some(healthy(two()))
    );
    // Emptied: not believed within EMPTY_SETTLE, believed at it.
    let empty = EMPTY_SETTLE.as_nanos() as Nanos;
    assert_eq!(source.take_read(T0 + 4 * SEC, Ok(String::new())), None);
    assert!(source.confirming_empty());
    assert_eq!(
        source.take_read(T0 + 4 * SEC + empty - 1, Ok(String::new())),
        None
    );
    let believed = source.take_read(T0 + 4 * SEC + empty, Ok(String::new()));
    assert_eq!(believed, Some(healthy(crate::model::VipMap::default())));
    assert!(!source.confirming_empty());
}

#[test]
fn a_file_broken_from_the_start_is_empty_unhealthy_and_unsynced() {
    let mut source = pure_source();
    let snapshot = check_with(
        &mut source,
        Ok(stamp(7, 9, T0)),
        T0 + 10 * SEC,
        "[[vip]]\nx",
    );
    let snapshot = snapshot.expect("the first check publishes");
    assert!(snapshot.vips.is_empty());
    assert!(!snapshot.healthy);
    assert!(!snapshot.synced);
    let error = snapshot.error.expect("an error");
    assert!(
        error.starts_with("/etc/holdfast/vips.toml:2:"),
        "error names path and line: {error}"
    );
    // Fixed: healthy and synced.
    let fixed = stamp(8, 1, T0 + 20 * SEC);
    source.after_stat(Ok(fixed));
    assert_eq!(
        check_with(&mut source, Ok(fixed), T0 + 30 * SEC, ONE),
        Some(healthy(one()))
    );
}

#[test]
fn a_file_missing_from_the_start_is_reported_at_once() {
    let mut source = pure_source();
    assert_eq!(
        source.after_stat(Err(MISSING.to_string())),
        AfterStat::Done(Some(SourceSnapshot {
            error: Some(MISSING.to_string()),
            ..SourceSnapshot::default()
        }))
    );
}

// ---------------------------------------------------------------------------
// Real files

/// Generous: the machine is shared with builds.
const PATIENCE: Duration = Duration::from_secs(10);
/// Polls fast so the tests are quick; the latency test uses the daemon's.
const FAST: Duration = Duration::from_millis(50);

/// A running file source on a file in a temporary directory, with every
/// snapshot it publishes.
struct Running {
    dir: tempfile::TempDir,
    path: PathBuf,
    snapshots: mpsc::UnboundedReceiver<SourceSnapshot>,
    settings: watch::Sender<FileSettings>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Running {
    /// Writes `text` (if any) to `vips.toml` in a new directory and starts a
    /// source on it.
    fn start(text: Option<&str>, poll: Duration) -> Running {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("vips.toml");
        if let Some(text) = text {
            std::fs::write(&path, text).expect("write the VIP file");
        }
        Running::start_on(dir, path, poll)
    }

    fn start_on(dir: tempfile::TempDir, path: PathBuf, poll: Duration) -> Running {
        let start = Start::begin(self::settings(&path), None);
        Running::from_start(dir, path, start, poll)
    }

    /// Runs the source begun as `start`, with the test's settings.
    fn from_start(dir: tempfile::TempDir, path: PathBuf, start: Start, poll: Duration) -> Running {
        let (settings, settings_rx) = watch::channel(self::settings(&path));
        let (tx, snapshots) = mpsc::unbounded_channel();
        let (stop, stop_rx) = oneshot::channel::<()>();
        let shutdown = async move {
            let _ = stop_rx.await;
        };
        // tokio::spawn also proves the source's future is Send.
        let task = tokio::spawn(run(start, settings_rx, tx, poll, shutdown));
        Running {
            dir,
            path,
            snapshots,
            settings,
            stop: Some(stop),
            task,
        }
    }

    /// The next snapshot published.
    async fn next(&mut self) -> SourceSnapshot {
        self.next_within(PATIENCE).await
    }

    /// The next snapshot published, waiting at most `patience`.
    async fn next_within(&mut self, patience: Duration) -> SourceSnapshot {
        match time::timeout(patience, self.snapshots.recv()).await {
            Ok(Some(snapshot)) => snapshot,
            Ok(None) => panic!("the source stopped"),
            Err(_) => panic!("no snapshot within {patience:?}"),
        }
    }

    /// Asserts that nothing is published for `d`.
    async fn quiet(&mut self, d: Duration, why: &str) {
        if let Ok(Some(snapshot)) = time::timeout(d, self.snapshots.recv()).await {
            panic!("{why}, but the source published {snapshot:?}");
        }
    }

    fn error_prefix(&self, line: usize, col: usize) -> String {
        format!("{}:{line}:{col}: ", self.path.display())
    }
}

/// Writes a new file next to `path` and renames it over (what `sed -i`,
/// vim's default write and configuration management do).
fn write_and_rename(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write the new file");
    std::fs::rename(&tmp, path).expect("rename it over the old one");
}

#[tokio::test]
async fn the_file_is_read_at_start() {
    let mut running = Running::start(Some(TWO), FAST);
    assert_eq!(running.next().await, healthy(two()));
    running
        .quiet(Duration::from_millis(500), "nothing changed")
        .await;
}

#[tokio::test]
async fn an_edit_in_place_is_picked_up() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(&running.path, TWO).expect("edit");
    assert_eq!(running.next().await, healthy(two()));
    // Removing a VIP leaves it out of the snapshot (the stability layer
    // holds it down).
    std::fs::write(&running.path, ONE).expect("edit");
    assert_eq!(running.next().await, healthy(one()));
}

#[tokio::test]
async fn a_new_file_renamed_over_the_old_one_is_picked_up() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    write_and_rename(&running.path, TWO);
    assert_eq!(running.next().await, healthy(two()));
    write_and_rename(&running.path, ONE);
    assert_eq!(running.next().await, healthy(one()));
}

#[tokio::test]
async fn a_vim_style_write_publishes_no_error() {
    // vim with `backupcopy=no`: rename the file to a backup, write a new
    // one, delete the backup. The file is missing for a moment.
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    let backup = running.path.with_extension("toml~");
    std::fs::rename(&running.path, &backup).expect("rename to the backup");
    std::fs::write(&running.path, TWO).expect("write the new file");
    std::fs::remove_file(&backup).expect("remove the backup");
    assert_eq!(running.next().await, healthy(two()));
}

/// The kubelet's atomic writer: `vips.toml -> ..data/vips.toml`, `..data ->
/// ..<timestamp>`; an update writes a new timestamped directory, points a
/// new symlink at it, renames that over `..data` and removes the old
/// directory.
#[tokio::test]
async fn a_configmap_symlink_swap_is_picked_up() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("temporary directory");
    let root = dir.path();
    let first = root.join("..2025_01_01_00_00_00.000000001");
    std::fs::create_dir(&first).expect("mkdir");
    std::fs::write(first.join("vips.toml"), ONE).expect("write");
    symlink("..2025_01_01_00_00_00.000000001", root.join("..data")).expect("symlink ..data");
    symlink("..data/vips.toml", root.join("vips.toml")).expect("symlink vips.toml");
    let path = root.join("vips.toml");
    let mut running = Running::start_on(dir, path, FAST);
    assert_eq!(running.next().await, healthy(one()));

    let mut previous = first;
    for (i, (text, expected)) in [(TWO, two()), (ONE, one()), (TWO, two())]
        .into_iter()
        .enumerate()
    {
        let root = running.dir.path();
        let name = format!("..2025_01_01_00_00_0{i}.000000002");
        let next = root.join(&name);
        std::fs::create_dir(&next).expect("mkdir");
        std::fs::write(next.join("vips.toml"), text).expect("write");
        symlink(&name, root.join("..data_tmp")).expect("symlink ..data_tmp");
        std::fs::rename(root.join("..data_tmp"), root.join("..data")).expect("swap ..data");
        std::fs::remove_dir_all(&previous).expect("remove the old directory");
        previous = next;
        assert_eq!(running.next().await, healthy(expected), "swap {i}");
    }
}

#[tokio::test]
async fn a_deleted_file_keeps_the_set_until_it_is_recreated() {
    let mut running = Running::start(Some(TWO), FAST);
    assert_eq!(running.next().await, healthy(two()));
    std::fs::remove_file(&running.path).expect("delete");
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, two(), "the last good set stands");
    assert!(!snapshot.healthy && snapshot.synced, "{snapshot:?}");
    let error = snapshot.error.expect("an error");
    assert!(
        error.starts_with(&format!("{}cannot read file:", running.error_prefix(1, 1))),
        "{error}"
    );
    running
        .quiet(Duration::from_millis(500), "the file is still missing")
        .await;
    std::fs::write(&running.path, ONE).expect("re-create");
    assert_eq!(running.next().await, healthy(one()));
}

#[tokio::test]
async fn a_broken_edit_keeps_the_last_good_set_until_fixed() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    // An unterminated string on line 5.
    write_and_rename(
        &running.path,
        "[[vip]]\naddress = \"198.51.100.10\"\n\n[[vip]]\naddress = \"198.51.100.11\n",
    );
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, one(), "the last good set stands");
    assert!(!snapshot.healthy && snapshot.synced, "{snapshot:?}");
    // Where the closing quote is missing: the end of line 5.
    assert_eq!(
        snapshot.error,
        Some(format!(
            "{}TOML syntax error: invalid basic string, expected `\"`",
            running.error_prefix(5, 25)
        ))
    );
    // Fixed, with a different set than before it broke.
    write_and_rename(&running.path, TWO);
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn an_unknown_advertisement_keeps_the_last_good_set() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(
        &running.path,
        "[[vip]]\naddress = \"198.51.100.10\"\nadvertisement = \"publik\"\n",
    )
    .expect("edit");
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, one());
    assert!(!snapshot.healthy && snapshot.synced);
    assert_eq!(
        snapshot.error,
        Some(format!(
            "{}unknown advertisement \"publik\" (did you mean \"public\"?)",
            running.error_prefix(3, 17)
        ))
    );
}

#[tokio::test]
async fn a_burst_of_edits_publishes_only_its_final_state() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    // Five writes in a row, in place and renamed, one of them broken: the
    // source sees at most one poll of it.
    std::fs::write(&running.path, TWO).expect("edit");
    std::fs::write(&running.path, "[[vip]]\naddress = ").expect("edit");
    write_and_rename(&running.path, ONE);
    std::fs::write(&running.path, "").expect("edit");
    let last = "[[vip]]\naddress = \"203.0.113.7\"\n";
    write_and_rename(&running.path, last);
    assert_eq!(
        running.next().await,
        healthy(set(&[("203.0.113.7", "public", None)]))
    );
    running
        .quiet(Duration::from_millis(500), "the burst is over")
        .await;
}

#[tokio::test]
async fn rewriting_the_same_text_publishes_nothing() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    // Same text, new mtime, in place.
    std::fs::write(&running.path, ONE).expect("rewrite");
    running
        .quiet(Duration::from_millis(400), "the text is the same")
        .await;
    // Same text, new inode.
    write_and_rename(&running.path, ONE);
    running
        .quiet(Duration::from_millis(400), "the text is the same")
        .await;
    // An mtime set back (cp -p, touch -d) with the same text.
    let file = std::fs::File::options()
        .write(true)
        .open(&running.path)
        .expect("open");
    file.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000))
        .expect("set mtime");
    drop(file);
    running
        .quiet(Duration::from_millis(400), "the text is the same")
        .await;
    // A real change is still the very next snapshot.
    std::fs::write(&running.path, TWO).expect("edit");
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn an_edit_is_published_within_a_second() {
    // The daemon's poll interval; the docs (docs/src/configuration/vip-file.md) promise edits are picked up
    // within a second. The settle rule makes it at most two polls.
    let mut running = Running::start(Some(ONE), DEFAULT_POLL_INTERVAL);
    assert_eq!(running.next().await, healthy(one()));
    let mut slowest = Duration::ZERO;
    for (i, (text, expected)) in [(TWO, two()), (ONE, one()), (TWO, two()), (ONE, one())]
        .into_iter()
        .enumerate()
    {
        let began = Instant::now();
        if i % 2 == 0 {
            std::fs::write(&running.path, text).expect("edit");
        } else {
            write_and_rename(&running.path, text);
        }
        assert_eq!(running.next().await, healthy(expected));
        let took = began.elapsed();
        println!("edit {i} published after {took:?}");
        slowest = slowest.max(took);
    }
    println!("slowest: {slowest:?}");
    // Two polls are 0.5 s; the bound leaves room for a loaded machine.
    assert!(
        slowest < Duration::from_secs(2),
        "an edit took {slowest:?} to be published"
    );
}

#[tokio::test]
async fn a_file_missing_at_start_is_reported_and_picked_up_when_created() {
    let mut running = Running::start(None, FAST);
    let snapshot = running.next().await;
    assert!(snapshot.vips.is_empty());
    assert!(!snapshot.healthy && !snapshot.synced, "{snapshot:?}");
    let error = snapshot.error.expect("an error");
    assert!(
        error.starts_with(&format!("{}cannot read file:", running.error_prefix(1, 1))),
        "{error}"
    );
    write_and_rename(&running.path, ONE);
    assert_eq!(running.next().await, healthy(one()));
}

#[tokio::test]
async fn a_file_broken_at_start_is_reported_and_picked_up_when_fixed() {
    let mut running = Running::start(Some("[[vip]]\naddress = \"198.51.100.300\"\n"), FAST);
    let snapshot = running.next().await;
    assert!(snapshot.vips.is_empty());
    assert!(!snapshot.healthy && !snapshot.synced, "{snapshot:?}");
    let error = snapshot.error.expect("an error");
    assert!(error.starts_with(&running.error_prefix(2, 11)), "{error}");
    std::fs::write(&running.path, ONE).expect("fix");
    assert_eq!(running.next().await, healthy(one()));
}

#[tokio::test]
async fn a_directory_is_not_a_vip_file() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    std::fs::create_dir(&path).expect("mkdir");
    let mut running = Running::start_on(dir, path, FAST);
    let snapshot = running.next().await;
    assert_eq!(
        snapshot.error,
        Some(format!(
            "{}not a regular file but a directory; a VIP file must be a regular file of at most {} bytes",
            running.error_prefix(1, 1),
            super::MAX_FILE_LEN
        ))
    );
    assert!(!snapshot.healthy && !snapshot.synced);
}

#[tokio::test]
async fn a_file_that_is_not_utf8_keeps_the_last_good_set() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(&running.path, b"[[vip]]\naddress = \"\xff\"\n").expect("edit");
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, one());
    assert!(!snapshot.healthy && snapshot.synced);
    assert_eq!(
        snapshot.error,
        Some(format!(
            "{}file is not valid UTF-8 (TOML must be UTF-8): invalid byte at offset 19",
            running.error_prefix(1, 1)
        ))
    );
    std::fs::write(&running.path, TWO).expect("fix");
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn a_reload_applies_new_advertisements_and_a_new_path() {
    let mut running = Running::start(Some(TWO), FAST);
    assert_eq!(running.next().await, healthy(two()));
    let path = running.path.clone();
    running.settings.send_replace(FileSettings {
        path: path.clone(),
        advertisements: names(&["public"]),
    });
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, two());
    assert!(!snapshot.healthy && snapshot.synced);
    let error = snapshot.error.expect("an error");
    assert!(
        error.starts_with(&format!(
            "{}unknown advertisement \"private\"",
            running.error_prefix(7, 17)
        )),
        "{error}"
    );
    running.settings.send_replace(settings(&path));
    assert_eq!(running.next().await, healthy(two()));
    // The file is read again with the new names (only a digest of its
    // text is kept): a new default applies to entries that name none.
    running.settings.send_replace(FileSettings {
        path: path.clone(),
        advertisements: names(&["private", "public"]),
    });
    assert_eq!(
        running.next().await,
        healthy(set(&[
            ("198.51.100.10", "private", Some("demo/web")),
            ("2001:db8:100::10", "private", None),
        ]))
    );
    running.settings.send_replace(FileSettings {
        path: path.clone(),
        advertisements: names(&["private", "public"]),
    });
    running
        .quiet(Duration::from_millis(300), "the settings did not change")
        .await;
    running.settings.send_replace(settings(&path));
    assert_eq!(running.next().await, healthy(two()));

    let other = running.dir.path().join("other.toml");
    std::fs::write(&other, ONE).expect("write");
    running.settings.send_replace(settings(&other));
    assert_eq!(running.next().await, healthy(one()));
    // The old file is no longer watched; the new one is.
    std::fs::write(&path, ONE).expect("edit the old file");
    std::fs::write(&other, TWO).expect("edit the new file");
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn a_reload_that_puts_a_vip_outside_its_advertisements_vip_ranges_keeps_the_last_good_set() {
    let mut running = Running::start(Some(TWO), FAST);
    assert_eq!(running.next().await, healthy(two()));
    let path = running.path.clone();
    let ranged = |ranges: &[&str]| FileSettings {
        path: path.clone(),
        advertisements: vec![
            config::VipFileAdvertisement {
                name: "public".into(),
                vip_ranges: Some(
                    ranges
                        .iter()
                        .map(|r| config::parse_vip_range(r).expect("range"))
                        .collect(),
                ),
            },
            config::VipFileAdvertisement::named("private"),
        ],
    };
    // Ranges that hold the VIP: the same set, nothing new to publish.
    running
        .settings
        .send_replace(ranged(&["198.51.100.0/24", "203.0.113.0/24"]));
    running
        .quiet(Duration::from_millis(300), "the set did not change")
        .await;
    // Narrowed past it: the file is read again and refused; the last good
    // set stands.
    running.settings.send_replace(ranged(&["203.0.113.0/24"]));
    let snapshot = running.next().await;
    assert_eq!(*snapshot.vips, two());
    assert!(!snapshot.healthy && snapshot.synced);
    let error = snapshot.error.expect("an error");
    assert!(
        error.starts_with(&format!(
            "{}VIP 198.51.100.10 is not in the vip_ranges [\"203.0.113.0/24\"] of advertisement \"public\" (the default: the entry names no advertisement)",
            running.error_prefix(2, 11)
        )),
        "{error}"
    );
    // Widened again: healthy.
    running
        .settings
        .send_replace(ranged(&["198.51.100.10-198.51.100.10"]));
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn the_source_stops_on_shutdown_and_when_nobody_listens() {
    let mut running = Running::start(Some(ONE), FAST);
    running.next().await;
    running.stop.take();
    time::timeout(PATIENCE, &mut running.task)
        .await
        .expect("stops on shutdown")
        .expect("no panic");

    let running = Running::start(Some(ONE), FAST);
    let Running {
        snapshots, task, ..
    } = running;
    drop(snapshots);
    time::timeout(PATIENCE, task)
        .await
        .expect("stops when nobody listens")
        .expect("no panic");
}

#[tokio::test]
async fn the_source_keeps_running_when_reloads_stop() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    let (dropped, _) = watch::channel(settings(&running.path));
    drop(std::mem::replace(&mut running.settings, dropped));
    std::fs::write(&running.path, TWO).expect("edit");
    assert_eq!(running.next().await, healthy(two()));
}

#[tokio::test]
async fn the_daemon_sink_is_a_watch_channel() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    std::fs::write(&path, ONE).expect("write");
    let start = Start::begin(settings(&path), None);
    let (_settings, settings_rx) = watch::channel(settings(&path));
    let (tx, mut rx) = watch::channel(SourceSnapshot::default());
    let task = tokio::spawn(run(start, settings_rx, tx, FAST, std::future::pending()));
    time::timeout(PATIENCE, rx.wait_for(|s| s.synced))
        .await
        .expect("a synced snapshot in time")
        .expect("the source runs");
    assert_eq!(*rx.borrow(), healthy(one()));
    drop(rx);
    time::timeout(PATIENCE, task)
        .await
        .expect("stops when the receiver is dropped")
        .expect("no panic");
}

/// A first read made before the source runs, as the daemon makes it on
/// the thread that read the config.
fn first_read(settings: FileSettings) -> oneshot::Receiver<FirstRead> {
    let (tx, rx) = oneshot::channel();
    let _ = tx.send(FirstRead::of(&settings));
    rx
}

/// The first read watches the directories before it reads: an edit made
/// after it, before the source runs, shows as an event the source takes.
#[tokio::test]
async fn an_edit_after_the_first_read_is_published() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    std::fs::write(&path, ONE).expect("write");
    let first = first_read(settings(&path));
    std::fs::write(&path, TWO).expect("edit");
    let start = Start::begin(settings(&path), Some(first));
    // A poll far away: only the watch made with the first read sees TWO.
    let mut running = Running::from_start(dir, path, start, Duration::from_secs(3600));
    assert_eq!(running.next().await, healthy(one()));
    assert_eq!(running.next().await, healthy(two()));
}

/// Settings sent between [`Start::begin`] and the task's first run are a
/// reload: the first snapshot is the file read with them, never the
/// early read made with the old ones.
#[tokio::test]
async fn settings_sent_before_the_source_runs_replace_those_of_its_first_read() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    // TWO names the advertisement "private", which the start's settings lack.
    std::fs::write(&path, TWO).expect("write");
    let old = FileSettings {
        path: path.clone(),
        advertisements: names(&["public"]),
    };
    let start = Start::begin(old.clone(), Some(first_read(old)));
    let mut running = Running::from_start(dir, path, start, FAST);
    assert_eq!(running.next().await, healthy(two()));
}

/// A first read that never comes (its thread failed) costs nothing but
/// itself: the first check stats and reads the file on its own.
#[tokio::test]
async fn a_lost_first_read_is_replaced_by_a_read_of_its_own() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    std::fs::write(&path, ONE).expect("write");
    let (lost, rx) = oneshot::channel::<FirstRead>();
    drop(lost);
    let start = Start::begin(settings(&path), Some(rx));
    let mut running = Running::from_start(dir, path, start, Duration::from_secs(3600));
    assert_eq!(running.next().await, healthy(one()));
}

#[test]
fn read_once_and_settings_from_config() {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("vips.toml"), TWO).expect("write");
    let config_path = dir.path().join("holdfast.toml");
    let config = config::parse(
        &config_path,
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n\
         [[peer]]\nname = \"tor\"\naddress = \"192.0.2.1\"\nasn = 65000\n\n\
         [source]\nkind = \"file\"\npath = \"vips.toml\"\n\n\
         [[advertisement]]\nname = \"public\"\n\n[[advertisement]]\nname = \"private\"\n",
    )
    .expect("a valid config");
    let settings = FileSettings::from_config(&config).expect("a file source");
    assert_eq!(settings, self::settings(&dir.path().join("vips.toml")));
    let source = FileSource::new(settings);
    assert_eq!(source.read(), Ok(two()));
    // read() keeps no state: the source has seen nothing yet.
    assert_eq!(source.snapshot(), SourceSnapshot::default());
    let missing = FileSource::new(self::settings(&dir.path().join("gone.toml")));
    let error = missing.read().expect_err("missing");
    assert!(
        error.contains("gone.toml:1:1: cannot read file:"),
        "{error}"
    );
}

/// A VIP file of `lines` lines: `[[vip]]` and an address, from 198.18.0.0/15.
fn big_file(lines: usize) -> String {
    let mut text = String::with_capacity(lines * 20);
    for i in 0..lines / 2 {
        let [_, _, a, b] = (i as u32).to_be_bytes();
        let c = (i >> 16) as u8;
        text.push_str(&format!("[[vip]]\naddress = \"198.{}.{a}.{b}\"\n", 18 + c));
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_file_truncated_and_rewritten_in_place_is_never_read_as_empty() {
    use std::io::Write;
    const LINES: usize = 400_000;
    let text = big_file(LINES);
    // A debug build reads and parses 200,000 entries in well under a
    // second natively, but under qemu-user (the aarch64 unit tests) on a
    // busy machine one read took over 10 s: the waits are generous.
    const BIG_PATIENCE: Duration = Duration::from_secs(120);
    let mut running = Running::start(Some(&text), FAST);
    let first = running.next_within(BIG_PATIENCE).await;
    assert_eq!(first.vips.len(), LINES / 2, "the whole file at start");
    // What the routes see: the stability layer fed every snapshot.
    let mut stability: crate::stability::Stability<IpAddr, ()> =
        crate::stability::Stability::new(crate::stability::Params::default()).expect("defaults");
    let present = |s: &SourceSnapshot| {
        s.vips
            .keys()
            .map(|ip| (*ip, ()))
            .collect::<BTreeMap<_, _>>()
    };
    stability.update(Instant::now(), present(&first), &BTreeMap::new(), true);

    // Truncated in place (`>` in a shell, O_TRUNC), then the writer takes
    // its time before the first write: longer than SETTLE and several polls.
    let mut file = std::fs::File::create(&running.path).expect("truncate");
    std::thread::sleep(Duration::from_millis(400));
    let rewritten = format!("{text}[[vip]]\naddress = \"203.0.113.7\"\n");
    file.write_all(rewritten.as_bytes()).expect("rewrite");
    drop(file);

    let next = running.next_within(BIG_PATIENCE).await;
    assert_eq!(
        next.vips.len(),
        LINES / 2 + 1,
        "the next snapshot is the rewritten file (never the empty one in between)"
    );
    stability.update(Instant::now(), present(&next), &BTreeMap::new(), true);
    running
        .quiet(Duration::from_millis(500), "the rewrite is over")
        .await;
    let c = stability.counters();
    assert_eq!(
        (c.held_down, c.absorbed_by_hold_down, c.withdrawals),
        (0, 0, 0),
        "no VIP was ever absent: {c:?}"
    );
}

#[tokio::test]
async fn a_file_emptied_on_purpose_is_believed_once_it_stays_empty() {
    let mut running = Running::start(Some(ONE), FAST);
    assert_eq!(running.next().await, healthy(one()));
    let began = Instant::now();
    std::fs::write(&running.path, "").expect("empty it");
    let snapshot = running.next().await;
    assert!(snapshot.vips.is_empty() && snapshot.healthy, "{snapshot:?}");
    let took = began.elapsed();
    assert!(
        took >= EMPTY_SETTLE,
        "an empty file was believed after {took:?}, before EMPTY_SETTLE"
    );
}

/// Longer than any test: a source started with it is never woken by a
/// poll, only by its inotify watches.
const NEVER: Duration = Duration::from_secs(3600);

#[tokio::test]
async fn edits_are_seen_without_any_poll_while_the_directory_is_watched() {
    let mut running = Running::start(Some(ONE), NEVER);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(&running.path, TWO).expect("edit in place");
    assert_eq!(running.next().await, healthy(two()));
    write_and_rename(&running.path, ONE);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::remove_file(&running.path).expect("delete");
    assert!(!running.next().await.healthy, "a deleted file is unhealthy");
    std::fs::write(&running.path, TWO).expect("re-create");
    assert_eq!(running.next().await, healthy(two()));
}

/// `vips.toml` a symlink to a file in another directory, edited there in
/// place: only a watch on the target's directory sees it.
#[tokio::test]
async fn an_edit_of_a_symlink_target_elsewhere_is_seen_without_any_poll() {
    let elsewhere = tempfile::tempdir().expect("temporary directory");
    let target = elsewhere.path().join("real.toml");
    std::fs::write(&target, ONE).expect("write");
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("vips.toml");
    std::os::unix::fs::symlink(&target, &path).expect("symlink");
    let mut running = Running::start_on(dir, path.clone(), NEVER);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(&target, TWO).expect("edit the target in place");
    assert_eq!(running.next().await, healthy(two()));
    // The link re-pointed at a third file: the watch follows it.
    let third = elsewhere.path().join("third.toml");
    std::fs::write(&third, ONE).expect("write");
    let tmp = running.dir.path().join("vips.tmp");
    std::os::unix::fs::symlink(&third, &tmp).expect("symlink");
    std::fs::rename(&tmp, &path).expect("re-point");
    assert_eq!(running.next().await, healthy(one()));
    std::fs::write(&third, TWO).expect("edit the new target in place");
    assert_eq!(running.next().await, healthy(two()));
}

/// The file's directory deleted and made again: its watch ended with it,
/// so the source polls (and watches the new directory once it is there).
#[tokio::test]
async fn a_directory_deleted_and_recreated_is_followed() {
    let top = tempfile::tempdir().expect("temporary directory");
    let sub = top.path().join("vips");
    std::fs::create_dir(&sub).expect("mkdir");
    let path = sub.join("vips.toml");
    std::fs::write(&path, ONE).expect("write");
    let mut running = Running::start_on(top, path.clone(), FAST);
    assert_eq!(running.next().await, healthy(one()));
    std::fs::remove_dir_all(&sub).expect("remove the directory");
    assert!(!running.next().await.healthy, "the file is gone");
    std::fs::create_dir(&sub).expect("mkdir again");
    std::fs::write(&path, TWO).expect("write again");
    assert_eq!(running.next().await, healthy(two()));
    std::fs::write(&path, ONE).expect("edit");
    assert_eq!(running.next().await, healthy(one()));
}

/// The VIPs of a file that name the same advertisement and no Service hold
/// one shared route, and a VIP with a Service its own.
#[test]
fn vips_without_a_service_share_their_route() {
    let text = "[[vip]]\naddress = \"198.51.100.1\"\n\n\
                [[vip]]\naddress = \"198.51.100.2\"\n\n\
                [[vip]]\naddress = \"198.51.100.3\"\nservice = \"demo/web\"\n\n\
                [[vip]]\naddress = \"198.51.100.4\"\nadvertisement = \"private\"\n";
    let vips = super::parse(
        Path::new("vips.toml"),
        text.to_string(),
        &names(&["public", "private"]),
    )
    .expect("a valid file");
    let route = |ip: &str| &vips[&ip.parse::<IpAddr>().unwrap()].route;
    assert!(route("198.51.100.1").ptr_eq(route("198.51.100.2")));
    assert!(!route("198.51.100.3").ptr_eq(route("198.51.100.1")));
    assert_eq!(route("198.51.100.3").service.as_deref(), Some("demo/web"));
    assert_eq!(
        *route("198.51.100.4").advertisements,
        BTreeSet::from(["private".to_string()])
    );
    assert!(route("198.51.100.1").service.is_none());
}

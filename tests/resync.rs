//! The periodic reconcile (`[source] resync`) of a real daemon against FRR:
//! it runs every period, finds nothing to repair while the source and the
//! sessions keep up — through edits of the VIP file — and says so in its
//! counter; and a change no watch can see (the VIP file's symlinked parent
//! directory re-pointed) is found by it alone, repaired at the router and
//! counted once.

mod common;

use std::net::IpAddr;

use common::*;
use testlab::wait_until;

fn conf() -> String {
    conf_with_path("VIPS")
}

/// Peer `tor` (IPv4 unicast), the VIP file at `path` resynced every
/// second, no hold-down.
fn conf_with_path(path: &str) -> String {
    Config::node(65001, "192.0.2.2")
        .peer(
            Peer::new("tor", "192.0.2.1", 65000)
                .fast()
                .families(&["ipv4-unicast"]),
        )
        .vip_file(path)
        .resync("1s")
        .hold_down("0s")
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

/// The value of an unlabelled metric; absent fails the test.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Resyncs that found nothing to repair, as logged so far.
fn clean_runs(log: &str) -> usize {
    log.matches("resync: every peer's routes match the source")
        .count()
}

#[test]
fn resync_runs_every_period_and_repairs_nothing_when_nothing_was_missed() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    let node = Holdfast::start(
        &lab.node,
        &conf(),
        &vips(&["198.51.100.60", "198.51.100.61"]),
    );
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.61/32", LONG);
    // Edits between resyncs: one added, one removed.
    node.write_vips(&vips(&["198.51.100.60", "198.51.100.62"]));
    frr.wait_prefix("198.51.100.62/32", LONG);
    wait_until(LONG, "198.51.100.61 withdrawn", || {
        frr.prefix("198.51.100.61/32").is_none().then_some(())
    });
    // Several resyncs with nothing to repair.
    let before = clean_runs(&node.log());
    wait_until(LONG, "three more resyncs", || {
        let log = node.log();
        assert!(!log.contains("resync: the"), "a repair was logged:\n{log}");
        (clean_runs(&log) >= before + 3).then_some(())
    });
    assert!(
        !node.log().contains("resync: the"),
        "a repair was logged:\n{}",
        node.log()
    );
    assert_eq!(
        metric(&node.metrics(), "holdfast_reconcile_repairs_total"),
        0
    );
    assert!(frr.prefix("198.51.100.60/32").is_some());
}

#[test]
fn a_change_no_watch_sees_is_repaired_by_the_resync_alone_and_counted_once() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    // The VIP file's directory is a symlink (`cur -> a`): the file source
    // watches the directory it resolves to, not the link's own.
    let files = testlab::LabDir::new("resync-vips");
    let (a, b) = (files.join("a"), files.join("b"));
    std::fs::create_dir(&a).unwrap();
    std::fs::create_dir(&b).unwrap();
    std::fs::write(
        a.join("vips.toml"),
        vips(&["198.51.100.60", "198.51.100.61"]),
    )
    .unwrap();
    // The new directory's file, old enough for the reconcile to read it
    // (it leaves a file changed in the last 5 s to the source).
    let newer = b.join("vips.toml");
    std::fs::write(
        &newer,
        vips(&["198.51.100.60", "198.51.100.61", "198.51.100.63"]),
    )
    .unwrap();
    std::fs::File::options()
        .write(true)
        .open(&newer)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    std::os::unix::fs::symlink(&a, files.join("cur")).unwrap();
    let path = files.join("cur").join("vips.toml");
    let node = Holdfast::start(&lab.node, &conf_with_path(&path.display().to_string()), "");
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.61/32", LONG);
    let before = clean_runs(&node.log());
    wait_until(LONG, "a resync with nothing to repair", || {
        (clean_runs(&node.log()) > before).then_some(())
    });
    assert_eq!(
        metric(&node.metrics(), "holdfast_reconcile_repairs_total"),
        0
    );
    // Re-point the link at once (rename over it): no watched directory
    // changes, so the file source sees nothing.
    std::os::unix::fs::symlink(&b, files.join("cur.new")).unwrap();
    std::fs::rename(files.join("cur.new"), files.join("cur")).unwrap();
    frr.wait_prefix("198.51.100.63/32", LONG);
    let log = node.log();
    assert!(
        log.contains("resync: the VIP file differs from the set in force"),
        "the reconcile did not say it repaired:\n{log}"
    );
    // Later resyncs find nothing more: the repair is counted once, and
    // the session's own catching up is no second repair.
    let after = clean_runs(&log);
    wait_until(LONG, "two more resyncs with nothing to repair", || {
        (clean_runs(&node.log()) >= after + 2).then_some(())
    });
    assert_eq!(
        node.metric("holdfast_reconcile_repairs_total", &[]),
        1.0,
        "one VIP repaired"
    );
    assert!(frr.prefix("198.51.100.60/32").is_some());
}

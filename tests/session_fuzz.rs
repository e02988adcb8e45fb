//! The `session` fuzz target's seeds (fuzz/seeds/session/) and every input
//! a fuzzer ever crashed on (fuzz/regressions/session/), run through the
//! same checks as the fuzz target: `holdfast::session::selfcheck`, one
//! peer's `PeerSession` driven by a script of inputs.

use std::path::PathBuf;

use holdfast::session::selfcheck::{self, Reached};

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn seed(name: &str) -> Reached {
    let path = fuzz_dir().join("seeds/session").join(name);
    selfcheck::session(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// Every seed and regression passes the checks.
#[test]
fn seeds_and_regressions_pass() {
    let mut inputs = Vec::new();
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(fuzz_dir().join(dir).join("session")) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            inputs.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    assert!(
        inputs.len() >= 19,
        "only {} inputs — are fuzz/seeds/session there?",
        inputs.len()
    );
    let mut failed = Vec::new();
    for (path, data) in inputs {
        if std::panic::catch_unwind(|| selfcheck::session(&data)).is_err() {
            failed.push(path.display().to_string());
        }
    }
    assert!(failed.is_empty(), "failing the session checks: {failed:?}");
}

/// The seeds reach what they are named after: a fuzzer starting from them
/// explores Established, the backlog and the errors, not only the OPEN
/// exchange.
#[test]
fn seeds_reach_their_states() {
    let r = seed("established-ebgp");
    assert_eq!(r.established, 1, "{r:?}");
    assert!(r.updates_sent >= 3, "the table and End-of-RIB: {r:?}");
    assert_eq!(r.end_of_ribs_sent, 1, "{r:?}");
    assert_eq!(r.updates_received, 1, "{r:?}");
    assert_eq!(
        r.notifications_sent,
        [(6, 2)],
        "Administrative Shutdown: {r:?}"
    );

    let r = seed("collision");
    assert_eq!(r.established, 1, "one connection survives: {r:?}");
    assert!(r.notifications_sent.contains(&(6, 7)), "{r:?}");

    let r = seed("bfd-flap");
    assert_eq!(r.established, 2, "{r:?}");
    assert_eq!(
        r.notifications_sent,
        [(6, 10), (6, 6)],
        "BFD Down, then the reconfiguration: {r:?}"
    );

    // 4096 /32s in 200 attribute sets: some 200 UPDATEs.
    let r = seed("big-table-4096");
    assert!(r.updates_sent >= 200, "{r:?}");

    let r = seed("hold-expires");
    assert_eq!(r.established, 1, "{r:?}");
    assert_eq!(r.notifications_sent, [(4, 0)], "Hold Timer Expired: {r:?}");

    for (name, notification) in [
        ("garbage-after-open", (1, 3)),
        ("oversized-header", (1, 2)),
        ("corrupt-keepalive", (1, 1)),
        ("bad-open-version", (2, 1)),
        ("malformed-update", (3, 1)),
    ] {
        let r = seed(name);
        assert_eq!(r.notifications_sent, [notification], "{name}: {r:?}");
    }

    let r = seed("notification-refresh");
    assert_eq!(r.established, 2, "{r:?}");
    assert!(r.refreshes_answered >= 1, "{r:?}");

    let r = seed("backlog");
    assert!(
        r.backlogged_inputs > 0 && r.most_queued >= holdfast::session::OUTPUT_LIMIT as u64,
        "the output limit reached: {r:?}"
    );

    let r = seed("graceful-restart");
    assert_eq!(r.end_of_ribs_sent, 1, "{r:?}");
    assert!(r.notifications_sent.is_empty(), "{r:?}");

    let r = seed("passive-ibgp-v6");
    assert_eq!(r.established, 1, "{r:?}");
}

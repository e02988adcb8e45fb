//! The fuzz seeds (fuzz/seeds/) and every input a fuzzer ever crashed on
//! (fuzz/regressions/), run through the same checks as the fuzz targets.

use std::path::PathBuf;

fn inputs(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let mut out = Vec::new();
    for dir in ["seeds", "regressions"] {
        let d = root.join(dir).join(target);
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
    out
}

fn run(target: &str, check: fn(&[u8]), at_least: usize) {
    let list = inputs(target);
    assert!(
        list.len() >= at_least,
        "{target}: only {} inputs — are fuzz/seeds there?",
        list.len()
    );
    for (path, data) in list {
        let r = std::panic::catch_unwind(|| check(&data));
        assert!(r.is_ok(), "{} fails the {target} checks", path.display());
    }
}

#[test]
fn framing() {
    run("framing", bgp_proto::selfcheck::framing, 100);
}

#[test]
fn message() {
    run("message", bgp_proto::selfcheck::message, 300);
}

#[test]
fn attributes() {
    run("attributes", bgp_proto::selfcheck::attributes, 200);
}

#[test]
fn session() {
    run(
        "session",
        |d| {
            bgp_proto::selfcheck::session(d);
        },
        11,
    );
}

/// The session seeds reach the states they are named after: a fuzzer
/// starting from them explores Established, not only the OPEN exchange.
#[test]
fn session_seeds_reach_established() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/session");
    let stats =
        |name: &str| bgp_proto::selfcheck::session(&std::fs::read(root.join(name)).unwrap());
    let s = stats("established-ebgp");
    assert_eq!(s.established_transitions, 1, "{s:?}");
    assert!(s.updates_sent >= 2, "table and End-of-RIB sent: {s:?}");
    assert_eq!(s.updates_received, 1, "{s:?}");
    let s = stats("collision");
    assert_eq!(
        s.established_transitions, 1,
        "one connection survives: {s:?}"
    );
    let s = stats("stop-start");
    assert_eq!(s.established_transitions, 2, "{s:?}");
    // 2000 /32s (10000 octets of NLRI) need three 4096-octet UPDATEs.
    let s = stats("big-table-4096");
    assert!(s.updates_sent >= 4, "End-of-RIB and the table: {s:?}");
    let s = stats("hold-expires");
    assert_eq!(s.established_transitions, 1, "{s:?}");
    assert!(
        s.notifications_sent.iter().any(|&(code, _, _)| code == 4),
        "Hold Timer Expired sent: {s:?}"
    );
}

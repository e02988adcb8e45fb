//! The fuzz seeds (fuzz/seeds/) and every input a fuzzer ever crashed on
//! (fuzz/regressions/), run through the same checks as the fuzz targets.
//! The `session` target's are replayed by holdfast's own
//! `tests/session_fuzz.rs`: it drives holdfast's session core.

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

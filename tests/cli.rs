//! The `holdfast` binary's tools, run as a user would: `decode` over the
//! ExaBGP corpus with `--verify`, and `check` on the example configs and on
//! every bad-config fixture.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn holdfast() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_holdfast"));
    c.current_dir(env!("CARGO_MANIFEST_DIR"));
    c
}

#[test]
fn decode_verifies_the_exabgp_corpus() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpora/exabgp-qa/vectors.jsonl");
    let text =
        std::fs::read_to_string(&corpus).unwrap_or_else(|e| panic!("{}: {e}", corpus.display()));
    // The plain 4-octet-AS, no-ADD-PATH messages (the others need flags).
    let mut input = String::new();
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let info = &v["conf_info"];
        if v["kind"] == "message" && info["asn4"] != false && info["add_path_capability"].is_null()
        {
            input.push_str(v["hex"].as_str().unwrap());
            input.push('\n');
            n += 1;
        }
    }
    let mut child = holdfast()
        .args(["decode", "--verify"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "decode --verify failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), n);
    assert!(
        lines.iter().all(|l| l["verified"] == true),
        "every message re-encodes byte for byte"
    );
    assert!(
        lines.iter().any(|l| l["type"] == "OPEN")
            && lines.iter().any(|l| l["type"] == "NOTIFICATION")
    );
}

#[test]
fn decode_verify_exits_non_zero_on_a_message_that_does_not_decode() {
    let mut child = holdfast()
        .args(["decode", "--verify"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A valid KEEPALIVE, then one whose length field says 18.
    child
        .stdin
        .take()
        .unwrap()
        .write_all(
            b"ffffffffffffffffffffffffffffffff001304\nffffffffffffffffffffffffffffffff001204\n",
        )
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "decode --verify must fail");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("line 2: does not decode"),
        "stderr: {stderr}"
    );
}

#[test]
fn decode_reports_the_notification_an_error_causes() {
    let mut child = holdfast()
        .args(["decode"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"ffffffffffffffffffffffffffffffff001204\n0000\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["error"]["name"],
        "Message Header Error / Bad Message Length"
    );
    assert_eq!(first["error"]["data"], "0012");
    let second: serde_json::Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        second["error"]["name"],
        "Message Header Error / Connection Not Synchronized"
    );
}

#[test]
fn check_accepts_every_example_config() {
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("config")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let out = holdfast()
                .arg("check")
                .arg("--config")
                .arg(&path)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(out.stdout.is_empty());
        }
    }
}

#[test]
fn check_prints_every_problem_of_each_bad_config() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-config");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let rel = path.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap();
        let out = holdfast()
            .arg("check")
            .arg("--config")
            .arg(rel)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", rel.display());
        let expected = std::fs::read_to_string(path.with_extension("expected")).unwrap();
        assert_eq!(
            String::from_utf8(out.stdout).unwrap(),
            expected,
            "{}",
            rel.display()
        );
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn check_skip_password_files_checks_the_rest_without_reading_keys() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("holdfast.toml");
    std::fs::write(
        &config,
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
         password_file = \"/nonexistent/holdfast/md5/tor1\"\n\n\
         [source]\nkind = \"kubernetes\"\n",
    )
    .unwrap();
    let check = |extra: &[&str]| {
        holdfast()
            .arg("check")
            .arg("--config")
            .arg(&config)
            .args(extra)
            .output()
            .unwrap()
    };
    // Without the flag the missing key file is a problem at its line...
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(":9:17: cannot read password_file /nonexistent/holdfast/md5/tor1"),
        "{text}"
    );
    // ...with it the config checks clean,
    let out = check(&["--skip-password-files"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty());
    // and everything else is still checked.
    std::fs::write(
        &config,
        std::fs::read_to_string(&config)
            .unwrap()
            .replace("asn = 65000", "asn = 0"),
    )
    .unwrap();
    let out = check(&["--skip-password-files"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8(out.stdout).unwrap().contains(":8:7: "),
        "the invalid peer asn is reported"
    );
}

#[test]
fn check_accepts_the_lab_configs_and_compose_matches_them() {
    let lab = Path::new(env!("CARGO_MANIFEST_DIR")).join("frr-lab");
    let compose = std::fs::read_to_string(lab.join("docker-compose.yml")).unwrap();
    for node in ["node1", "node2"] {
        let config = lab.join("holdfast").join(node).join("holdfast.toml");
        let out = holdfast()
            .arg("check")
            .arg("--config")
            .arg(&config)
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stdout.is_empty(),
            "{}: {}",
            config.display(),
            String::from_utf8_lossy(&out.stdout)
        );
        // lab.sh and docker-compose.yml build one topology: every router
        // the node peers with, and the node itself, have their addresses
        // in the compose file too.
        let text = std::fs::read_to_string(&config).unwrap();
        for line in text.lines() {
            if let Some(v) = line
                .strip_prefix("address = \"")
                .or_else(|| line.strip_prefix("router_id = \""))
            {
                let addr = v.split('"').next().unwrap();
                assert!(
                    compose.contains(&format!("ipv4_address: {addr},"))
                        || compose.contains(&format!("ipv6_address: \"{addr}\"")),
                    "{addr} of {} is not in docker-compose.yml",
                    config.display()
                );
            }
        }
    }
}

//! The `holdfast` binary's tools, run as a user would: `decode` over the
//! ExaBGP corpus with `--verify`, and `check` on the example configs, on
//! every bad-config fixture and on every warnings fixture.

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
            // No error, and no warning either.
            let out = holdfast()
                .arg("check")
                .arg("--config")
                .arg(&path)
                .arg("--deny-warnings")
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

/// Runs `holdfast check` with `args` (from `dir`), `stdin` on its input:
/// (exit code, stdout).
fn check_with(dir: &Path, args: &[&str], stdin: &[u8]) -> (Option<i32>, String) {
    let mut child = holdfast()
        .current_dir(dir)
        .arg("check")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8(out.stdout).unwrap())
}

/// Each warnings fixture is accepted (exit 0) with exactly the warnings
/// its `.expected` file holds, refused with them under `--deny-warnings`,
/// and read from standard input (`--config -`) gives the same lines,
/// named `<stdin>`.
#[test]
fn check_prints_every_warning_of_each_warnings_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/fixtures/warnings");
    let mut n = 0;
    let mut lines = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let expected = std::fs::read_to_string(path.with_extension("expected")).unwrap();
        assert!(
            !expected.is_empty() && expected.lines().all(|l| l.contains(": warning: ")),
            "{rel}: {expected}"
        );
        lines += expected.lines().count();
        let (code, out) = check_with(root, &["--config", &rel], b"");
        assert_eq!((code, out.as_str()), (Some(0), expected.as_str()), "{rel}");
        let (code, out) = check_with(root, &["--config", &rel, "--deny-warnings"], b"");
        assert_eq!((code, out.as_str()), (Some(1), expected.as_str()), "{rel}");
        // From standard input, in the fixture's directory (relative paths
        // are taken from the current directory).
        let text = std::fs::read(&path).unwrap();
        let from_stdin = expected.replace(&rel, "<stdin>");
        let (code, out) = check_with(&dir, &["--config", "-"], &text);
        assert_eq!(
            (code, out.as_str()),
            (Some(0), from_stdin.as_str()),
            "{rel}"
        );
        let (code, out) = check_with(&dir, &["--config", "-", "--deny-warnings"], &text);
        assert_eq!((code, out), (Some(1), from_stdin), "{rel}");
        n += 1;
    }
    assert!(n >= 5 && lines >= 30, "{n} fixtures, {lines} warnings");
}

#[test]
fn check_reads_standard_input_with_every_option() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n\
         [[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\
         password_file = \"/nonexistent/holdfast/md5/tor1\"\n\n\
         [source]\nkind = \"kubernetes\"\n";
    // The key file is read, as for a file...
    let (code, out) = check_with(root, &["--config", "-"], config.as_bytes());
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("<stdin>:9:17: cannot read password_file /nonexistent/holdfast/md5/tor1"),
        "{out}"
    );
    // ...unless --skip-password-files says not to.
    let (code, out) = check_with(
        root,
        &["--config", "-", "--skip-password-files", "--deny-warnings"],
        config.as_bytes(),
    );
    assert_eq!((code, out.as_str()), (Some(0), ""));
    // An example config through a pipe checks as it does from its file;
    // a file source's VIP file is found from the current directory.
    let lab = std::fs::read(root.join("config/lab.toml")).unwrap();
    let (code, out) = check_with(
        &root.join("config"),
        &["--config", "-", "--deny-warnings"],
        &lab,
    );
    assert_eq!((code, out.as_str()), (Some(0), ""));
    let (code, out) = check_with(root, &["--config", "-"], &lab);
    assert_eq!(code, Some(1));
    assert!(out.starts_with("vips/lab.toml:1:1: "), "{out}");
    // Empty input is a config without its tables.
    let (code, out) = check_with(root, &["--config", "-"], b"");
    assert_eq!(code, Some(1));
    assert!(
        out.starts_with("<stdin>:1:1: missing required table [speaker]"),
        "{out}"
    );
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
            .arg("--deny-warnings")
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

/// The value that starts at LINE:COL (1-based) of `text`: a quoted string
/// or a bare token up to the next delimiter.
fn value_at(text: &str, line: usize, col: usize) -> (usize, usize) {
    let start: usize = text
        .lines()
        .take(line - 1)
        .map(|l| l.len() + 1)
        .sum::<usize>()
        + col
        - 1;
    let rest = &text[start..];
    let len = if let Some(quoted) = rest.strip_prefix('"') {
        quoted.find('"').expect("a closing quote") + 2
    } else {
        rest.find([' ', ',', '}', ']', '\n']).unwrap_or(rest.len())
    };
    (start, start + len)
}

#[test]
fn every_hint_check_gives_is_a_value_the_key_takes() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-config/hints.toml");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = |text: &str| {
        let path = dir.path().join("holdfast.toml");
        std::fs::write(&path, text).unwrap();
        let out = holdfast()
            .arg("check")
            .arg("--config")
            .arg(&path)
            .output()
            .unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(String::from)
            .collect::<Vec<_>>()
    };
    // check's lines are "PATH:LINE:COL: message".
    let path = dir.path().join("holdfast.toml").display().to_string();
    let mut tried = 0;
    let out = holdfast()
        .arg("check")
        .arg("--config")
        .arg(&fixture)
        .output()
        .unwrap();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let Some((_, tail)) = line.split_once("e.g. ") else {
            continue;
        };
        let location: Vec<usize> = line
            .strip_prefix(&format!("{}:", fixture.display()))
            .unwrap()
            .splitn(3, ':')
            .take(2)
            .map(|n| n.parse().unwrap())
            .collect();
        let (start, end) = value_at(&text, location[0], location[1]);
        for example in tail.split(';').next().unwrap().split(" or ") {
            let fixed = format!("{}{}{}", &text[..start], example.trim(), &text[end..]);
            let at = format!("{path}:{}:{}:", location[0], location[1]);
            let problems = run(&fixed);
            assert!(
                !problems.iter().any(|p| p.starts_with(&at)),
                "{line}\nwritten back as {example}, check says:\n{}",
                problems.join("\n")
            );
            tried += 1;
        }
    }
    assert!(
        tried >= 6,
        "only {tried} hints found in the fixture's output"
    );
}

/// What bash offers for the words typed so far, with the script
/// `holdfast completions bash` printed loaded as a user's shell would.
fn bash_completions(script: &Path, words: &[&str]) -> Vec<String> {
    let words_quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let current = words.len() - 1;
    let program = format!(
        "source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD={current}\nCOMP_LINE='{}'\nCOMP_POINT=${{#COMP_LINE}}\n_holdfast holdfast '{}' '{}'\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n",
        script.display(),
        words_quoted.join(" "),
        words.join(" "),
        words[current],
        words[current.saturating_sub(1)],
    );
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", &program])
        .output()
        .expect("bash (the completions test needs it: apt-get install bash)");
    assert!(
        out.status.success(),
        "bash: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
fn bash_completes_commands_and_their_options() {
    let out = holdfast().args(["completions", "bash"]).output().unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("holdfast.bash");
    std::fs::write(&script, &out.stdout).unwrap();

    let commands = bash_completions(&script, &["holdfast", ""]);
    for c in [
        "run",
        "check",
        "status",
        "explain",
        "decode",
        "completions",
        "man",
    ] {
        assert!(commands.iter().any(|w| w == c), "{c} not in {commands:?}");
    }
    assert_eq!(bash_completions(&script, &["holdfast", "sta"]), ["status"]);
    let explain = bash_completions(&script, &["holdfast", "explain", "--"]);
    for o in ["--api", "--json"] {
        assert!(explain.iter().any(|w| w == o), "{o} not in {explain:?}");
    }
    let shells = bash_completions(&script, &["holdfast", "completions", ""]);
    for s in ["bash", "zsh", "fish"] {
        assert!(shells.iter().any(|w| w == s), "{s} not in {shells:?}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = holdfast().args(["completions", shell]).output().unwrap();
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }
}

/// A man page rendered by man(1) itself, as plain text.
fn man_text(page: &Path) -> String {
    let out = Command::new("man")
        .arg("-l")
        .arg(page)
        .env("MANWIDTH", "100")
        .env("MANPAGER", "cat")
        .env("PAGER", "cat")
        .output()
        .expect("man (the man page test needs it: apt-get install man-db)");
    assert!(
        out.status.success(),
        "man -l {}: {}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    // man marks bold and underline with backspaces when not on a terminal.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut plain = String::new();
    for c in text.chars() {
        if c == '\u{8}' {
            plain.pop();
        } else {
            plain.push(c);
        }
    }
    plain
}

#[test]
fn the_man_pages_render_and_name_every_command() {
    let out = holdfast().arg("man").output().unwrap();
    assert!(out.status.success());
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("holdfast.1");
    std::fs::write(&page, &out.stdout).unwrap();
    let text = man_text(&page);
    assert!(text.contains("holdfast - A BGP speaker"), "{text}");
    for c in [
        "run",
        "check",
        "status",
        "explain",
        "decode",
        "completions",
        "man",
    ] {
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("holdfast-{c}("))),
            "holdfast(1) does not list {c}:\n{text}"
        );
    }

    let pages = dir.path().join("man1");
    let out = holdfast()
        .arg("man")
        .arg("--dir")
        .arg(&pages)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explain = man_text(&pages.join("holdfast-explain.1"));
    for text in ["--json", "--api", "Print the API's JSON as it is"] {
        assert!(
            explain.contains(text),
            "holdfast-explain(1) lacks {text}:\n{explain}"
        );
    }
}

/// `--version` prints what `holdfast version` prints, the program's name
/// once; `-V` the one line.
#[test]
fn version_flag_and_command_agree() {
    let run = |args: &[&str]| {
        let out = holdfast().args(args).output().expect("holdfast runs");
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).expect("UTF-8")
    };
    let command = run(&["version"]);
    let flag = run(&["--version"]);
    assert_eq!(flag.trim_end(), command.trim_end());
    let first = command.lines().next().expect("a first line");
    assert_eq!(
        first,
        format!("holdfast {}", env!("CARGO_PKG_VERSION")),
        "{command}"
    );
    let short = run(&["-V"]);
    assert!(
        short.starts_with(&format!("holdfast {} (", env!("CARGO_PKG_VERSION")))
            && short.lines().count() == 1,
        "{short}"
    );
}

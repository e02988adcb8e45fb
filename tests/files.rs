//! Operator files that are not what they should be — a FIFO, /dev/zero, a
//! directory, an enormous error list — against the real binary: `check`
//! and `run` answer at once with an error naming the file, a reload keeps
//! the running config, and the daemon keeps answering.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Config, Holdfast, LONG, Peer, free_port, loopback_config, mkfifo, run_within};
use testlab::Signal;

/// The loopback daemon's config with its API at `api`, the VIP file at
/// `vips` and peer `tor1`'s `password_file` (line 12) if any.
fn config(api: &str, vips: &Path, password_file: Option<&Path>) -> String {
    let mut c: Config = loopback_config().api(api).vip_file(vips);
    if let Some(key) = password_file {
        c = c.with_peer("tor1", |p| p.md5(key));
    }
    c.to_toml()
}

/// Anything that answers at all answers well within this.
const AT_ONCE: Duration = Duration::from_secs(5);
/// `run_within`'s bound: past it, the command hangs (and the test fails).
const HANGS: Duration = Duration::from_secs(20);

#[test]
fn check_and_run_refuse_a_fifo_password_file_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fifo = dir.path().join("tor1.md5");
    mkfifo(&fifo);
    let vips = dir.path().join("vips.toml");
    std::fs::write(&vips, "").expect("write");
    let path = dir.path().join("holdfast.toml");
    let api = format!("127.0.0.1:{}", free_port());
    std::fs::write(&path, config(&api, &vips, Some(&fifo))).expect("write");
    let why = format!(
        "password_file {} is a FIFO (named pipe), not a regular file; it must be a regular file of at most 82 bytes",
        fifo.display()
    );
    let config = path.to_str().expect("utf-8 path");

    let (status, out, _, took) = run_within(&["check", "--config", config], HANGS);
    println!("check with a FIFO password_file: {took:?}");
    assert_eq!(status.code(), Some(1), "{out}");
    assert_eq!(out, format!("{config}:12:17: {why}\n"));
    assert!(took < AT_ONCE, "{took:?}");

    let state = dir.path().join("state");
    let (status, _, err, took) = run_within(
        &[
            "run",
            "--config",
            config,
            "--state-dir",
            state.to_str().expect("utf-8"),
        ],
        HANGS,
    );
    println!("run with a FIFO password_file: {took:?}");
    assert!(!status.success(), "run must refuse: {err}");
    assert!(err.contains(&why), "{err}");
    assert!(took < AT_ONCE, "{took:?}");
}

#[test]
fn check_refuses_dev_zero_as_password_and_as_vip_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let api = "127.0.0.1:9179";
    let path = dir.path().join("holdfast.toml");
    let config_text = config(api, Path::new("/dev/zero"), Some(Path::new("/dev/zero")));
    std::fs::write(&path, &config_text).expect("write");
    let config_path = path.to_str().expect("utf-8");
    let (status, out, _, took) = run_within(&["check", "--config", config_path], HANGS);
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        out,
        format!(
            "{config_path}:12:17: password_file /dev/zero is a character device, not a regular file; it must be a regular file of at most 82 bytes\n"
        )
    );
    assert!(took < AT_ONCE, "{took:?}");

    // Without the password, check goes on to the VIP file.
    std::fs::write(&path, config(api, Path::new("/dev/zero"), None)).expect("write");
    let (status, out, _, took) = run_within(&["check", "--config", config_path], HANGS);
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        out,
        format!(
            "/dev/zero:1:1: not a regular file but a character device; a VIP file must be a regular file of at most {} bytes\n",
            holdfast::config::MAX_VIP_FILE_LEN
        )
    );
    assert!(took < AT_ONCE, "{took:?}");

    // The config itself: a directory.
    let (status, out, _, _) = run_within(
        &["check", "--config", dir.path().to_str().expect("utf-8")],
        LONG,
    );
    assert_eq!(status.code(), Some(1));
    assert_eq!(
        out,
        format!(
            "{}:1:1: not a regular file but a directory; a config file must be a regular file of at most 1048576 bytes\n",
            dir.path().display()
        )
    );
}

#[test]
fn a_vip_file_that_is_dev_zero_leaves_the_daemon_answering_and_unready() {
    let mut d = Holdfast::local(&loopback_config().vip_file("/dev/zero"), "");
    d.wait_for("/readyz naming /dev/zero", LONG, || {
        d.get("/readyz").is_ok_and(|r| {
            r.status == 503
                && String::from_utf8_lossy(&r.body)
                    .contains("/dev/zero:1:1: not a regular file but a character device")
        })
    });
    let status = d.status_typed();
    assert!(!status.source.healthy && !status.source.synced);
    assert!(d.alive());
}

#[test]
fn a_fifo_swapped_in_by_a_reload_keeps_the_daemon_answering_and_the_old_config() {
    let dir = tempfile::tempdir().expect("tempdir");
    let key = dir.path().join("tor1.md5");
    std::fs::write(&key, "s3cret\n").expect("write key");
    let vips = dir.path().join("vips.toml");
    std::fs::write(&vips, "[[vip]]\naddress = \"198.51.100.10\"\n").expect("write");
    let config = loopback_config()
        .vip_file(vips.as_path())
        .with_peer("tor1", |p| p.md5(key.as_path()));
    let mut d = Holdfast::local(&config, "");
    d.wait_for("the VIP", LONG, || d.status_typed().source.vips == 1);
    assert_eq!(d.status_typed().config_error, None);

    // The key becomes a FIFO that nobody writes, and the config gains a
    // second peer; then SIGHUP.
    std::fs::remove_file(&key).expect("rm key");
    mkfifo(&key);
    let mut text = std::fs::read_to_string(&d.config).expect("config");
    text.push_str(
        &Config::new()
            .peer(Peer::new("tor2", "127.0.0.3", 65000).port(9))
            .to_toml(),
    );
    std::fs::write(&d.config, text).expect("write config");
    d.signal(Signal::Hup);

    let why = format!(
        "password_file {} is a FIFO (named pipe), not a regular file",
        key.display()
    );
    d.wait_for("the failed reload in the status", LONG, || {
        d.status_typed()
            .config_error
            .is_some_and(|e| e.contains(&why))
    });
    // Throughout, /healthz answers at once; the old config stays in force.
    let mut slowest = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        let asked = Instant::now();
        let r = d.get("/healthz").expect("/healthz answers");
        slowest = slowest.max(asked.elapsed());
        assert_eq!(r.status, 200);
        std::thread::sleep(Duration::from_millis(50));
    }
    println!("/healthz after a reload with a FIFO password_file: slowest {slowest:?}");
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    let status = d.status_typed();
    let peers: Vec<&str> = status.peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(peers, ["tor1"], "the old config stays in force");
    assert!(
        d.log()
            .contains("config reload refused, the running config stays"),
        "{}",
        d.log()
    );
    assert!(d.alive());
}

/// 400,000 lines, each a problem: an unknown key at the top of the file.
fn bad_vip_file(lines: usize) -> String {
    (0..lines).map(|i| format!("bad{i} = 1\n")).collect()
}

#[test]
fn a_vip_file_of_400k_bad_lines_is_a_short_error_logged_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let vips = dir.path().join("vips.toml");
    std::fs::write(&vips, bad_vip_file(400_000)).expect("write");
    let first = format!("{}:1:1: unknown key \"bad0\"", vips.display());
    let summary = format!(
        "{}: … and 399980 more problems (the first 20 are listed)",
        vips.display()
    );

    // check: the first 20 and a count.
    let path = dir.path().join("holdfast.toml");
    std::fs::write(&path, config("127.0.0.1:9179", &vips, None)).expect("write");
    let (status, out, _, took) =
        run_within(&["check", "--config", path.to_str().expect("utf-8")], LONG);
    println!(
        "check, 400k bad lines: {} bytes of output in {took:?}",
        out.len()
    );
    assert_eq!(status.code(), Some(1));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 21, "{out}");
    assert!(lines[0].starts_with(&first), "{}", lines[0]);
    assert_eq!(lines[20], summary);
    assert!(out.len() < 8 * 1024, "{} bytes", out.len());

    // run: the same in the status and /readyz, and once in the log.
    let d = Holdfast::local(&loopback_config().vip_file(vips.as_path()), "");
    d.wait_for("the VIP file's error", LONG, || {
        d.status_typed()
            .source
            .error
            .is_some_and(|e| e.ends_with(&summary))
    });
    let error = d.status_typed().source.error.expect("an error");
    let ready = d.get("/readyz").expect("/readyz");
    println!(
        "run, 400k bad lines: source error {} bytes, /readyz {} bytes",
        error.len(),
        ready.body.len()
    );
    assert!(error.len() < 8 * 1024, "{} bytes", error.len());
    assert_eq!(ready.status, 503);
    assert!(ready.body.len() < 8 * 1024, "{} bytes", ready.body.len());
    // Polls go on (4 a second); the error is not logged again.
    std::thread::sleep(Duration::from_secs(3));
    let log = d.log();
    println!("log: {} bytes", log.len());
    assert_eq!(log.matches(&first).count(), 1, "{log}");
    assert_eq!(log.matches(&summary).count(), 1, "{log}");
    assert!(log.len() < 16 * 1024, "{} bytes of log", log.len());
}

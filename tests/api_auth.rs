//! Who may change a running daemon's state: the real daemon on loopback
//! (no root, no router). The state-changing calls (drain, undrain) are
//! served on the Unix socket in the state directory (owner-only), and over
//! TCP only with `speaker.api_token_file`'s token; a second daemon with the
//! same state directory does not take the socket of a live one that
//! cannot hand over.

mod common;

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{BIN, Holdfast, LONG, free_port, loopback_config};
use testlab::Signal;

const VIPS: &str = "[[vip]]\naddress = \"198.51.100.10\"\n";
const TOKEN: &str = "c2VjcmV0LXRva2VuLWZvci10ZXN0cw==";

/// `holdfast ARGS` with this environment, to the end.
fn holdfast(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args).env_remove("HOLDFAST_API_TOKEN");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("holdfast runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The drain state as the daemon's TCP status shows it: `None` when it is
/// not draining.
fn drain_state(d: &Holdfast) -> Option<String> {
    d.status_typed().drain.map(|s| s.state)
}

/// A `POST path` over TCP with these header lines: (status, body).
fn post(d: &Holdfast, path: &str, headers: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(d.api).expect("connect to the API");
    s.set_read_timeout(Some(LONG)).unwrap();
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: x\r\n{headers}Content-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let r = holdfast::cli::http::parse_response(&raw).expect("an HTTP answer");
    (r.status, text(&r.body))
}

/// Without a token configured, TCP refuses drain and undrain (403, the
/// answer pointing at the socket) and nothing changes; `holdfast drain`
/// goes to the state directory's socket, which is owner-only, and drains.
#[test]
fn tcp_refuses_to_drain_without_a_token_and_the_cli_drains_over_the_socket() {
    let d = Holdfast::local(&loopback_config(), VIPS);
    let state = d.state_dir().display().to_string();
    let api = d.api();

    let refused = |path: &str| {
        let (code, body) = post(&d, path, "");
        assert_eq!(code, 403, "POST {path}: {body}");
        assert!(
            body.contains("not served over TCP without a token"),
            "{body}"
        );
        // A token is no use when none is configured.
        let (code, _) = post(&d, path, &format!("Authorization: Bearer {TOKEN}\r\n"));
        assert_eq!(code, 403, "POST {path} with a token nobody configured");
    };
    refused("/v1/drain");
    assert_eq!(drain_state(&d), None, "a refused drain changed the state");
    // The CLI over TCP is refused the same way, and says why.
    let out = holdfast(&["drain", "--api", &api], &[("HOLDFAST_API_TOKEN", TOKEN)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stdout));
    assert!(
        text(&out.stderr).contains(&format!("holdfast at {api} answered 403")),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(drain_state(&d), None, "a refused drain changed the state");

    // The socket: a socket, owner-only.
    let socket = d.state_dir().join("api.sock");
    let m = std::fs::symlink_metadata(&socket).expect("the API socket");
    assert!(
        m.file_type().is_socket(),
        "{} is not a socket",
        socket.display()
    );
    assert_eq!(m.mode() & 0o777, 0o600, "the socket's mode");

    // holdfast drain on it drains; status and explain read there too.
    let out = holdfast(&["drain", "--state-dir", &state], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).starts_with("draining: routes carry GRACEFUL_SHUTDOWN"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(drain_state(&d).as_deref(), Some("draining"));
    // TCP cannot end it either.
    refused("/v1/undrain");
    assert_eq!(drain_state(&d).as_deref(), Some("draining"));
    let out = holdfast(&["status", "--json", "--state-dir", &state], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(status["drain"]["state"], "draining", "{status}");
    let out = holdfast(&["undrain", "--socket", &socket.display().to_string()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(drain_state(&d), None);

    // No daemon at a state directory: said plainly.
    let out = holdfast(&["drain", "--state-dir", "/nonexistent-holdfast"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("cannot reach holdfast at /nonexistent-holdfast/api.sock: no such socket"),
        "{}",
        text(&out.stderr)
    );
}

/// With `speaker.api_token_file`: a missing or wrong token is 401 and
/// changes nothing; the right one drains over TCP. A new token applies on
/// SIGHUP, and the old one stops working.
#[test]
fn tcp_drains_with_the_right_token_only() {
    let mut d = Holdfast::local_unstarted(&loopback_config().api_token_file("api-token"), VIPS);
    d.dir.write("api-token", &format!("{TOKEN}\n"));
    d.run(&[]);
    let api = d.api();

    let (code, body) = post(&d, "/v1/drain", "");
    assert_eq!(code, 401, "{body}");
    let wrong = "d3JvbmctdG9rZW4td3JvbmctdG9rZW4=";
    let (code, body) = post(
        &d,
        "/v1/drain",
        &format!("Authorization: Bearer {wrong}\r\n"),
    );
    assert_eq!(code, 401, "{body}");
    let out = holdfast(&["drain", "--api", &api], &[("HOLDFAST_API_TOKEN", wrong)]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("answered 401"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(drain_state(&d), None, "a wrong token drained");

    let token_path = d.dir.path().join("api-token").display().to_string();
    let out = holdfast(&["drain", "--api", &api, "--token-file", &token_path], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(drain_state(&d).as_deref(), Some("draining"));
    let out = holdfast(
        &["undrain", "--api", &api],
        &[("HOLDFAST_API_TOKEN", TOKEN)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(drain_state(&d), None);

    // A new token, reloaded: the old one is refused, the new one works.
    let new = "bmV3LXRva2VuLW5ldy10b2tlbi1uZXc=";
    std::fs::write(d.dir.path().join("api-token"), new).unwrap();
    d.signal(Signal::Hup);
    d.wait_for("the new token to apply", LONG, || {
        post(
            &d,
            "/v1/drain",
            &format!("Authorization: Bearer {TOKEN}\r\n"),
        )
        .0 == 401
    });
    let (code, body) = post(&d, "/v1/drain", &format!("Authorization: Bearer {new}\r\n"));
    assert_eq!(code, 200, "{body}");
    assert_eq!(drain_state(&d).as_deref(), Some("draining"));
}

/// A second `holdfast run` with the state directory of a live one is
/// refused and leaves its socket alone; once the first is killed (its
/// socket left behind), the next one replaces the stale socket.
#[test]
fn a_second_daemon_does_not_take_a_live_socket() {
    let mut first = Holdfast::local(&loopback_config(), VIPS);
    let state = first.state_dir();
    let socket = state.join("api.sock");
    let inode = std::fs::symlink_metadata(&socket).unwrap().ino();
    let vips = first.vips.clone();
    // A running holdfast that cannot hand over (one from before the
    // hand-off, which has no handoff.sock): the second is refused. (One
    // that can hands over and exits: tests/handoff.rs.)
    std::fs::remove_file(state.join("handoff.sock")).expect("the first daemon's handoff.sock");

    let second_dir = tempfile::tempdir().unwrap();
    let run_second = |log: &str| {
        let api = format!("127.0.0.1:{}", free_port());
        let config = second_dir.path().join("holdfast.toml");
        std::fs::write(
            &config,
            loopback_config()
                .vip_file(vips.as_path())
                .api(&api)
                .to_toml(),
        )
        .unwrap();
        let child = Command::new(BIN)
            .args(["run", "--config"])
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(second_dir.path().join(log)).unwrap())
            .spawn()
            .expect("holdfast run starts");
        (child, api)
    };
    let (mut second, _) = run_second("second.log");
    let started = Instant::now();
    let status = loop {
        if let Some(s) = second.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > LONG {
            let _ = second.kill();
            panic!("a second daemon with the same --state-dir kept running");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let said = std::fs::read_to_string(second_dir.path().join("second.log")).unwrap();
    assert_eq!(status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!(
            "another holdfast (pid {}) is running with it",
            first.pid()
        )),
        "{said}"
    );
    // The first one's socket is the same file, and still answers it.
    assert_eq!(std::fs::symlink_metadata(&socket).unwrap().ino(), inode);
    let out = holdfast(&["drain", "--state-dir", &state.display().to_string()], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(drain_state(&first).as_deref(), Some("draining"));

    // Killed, the first leaves its socket; the next daemon replaces it.
    first.signal(Signal::Kill);
    let killed = Instant::now();
    while first.alive() {
        assert!(
            killed.elapsed() < LONG,
            "SIGKILL did not end the first daemon"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(socket.exists(), "a killed daemon leaves its socket");
    let (mut third, third_api) = run_second("third.log");
    let up = Instant::now();
    while !holdfast::cli::http::get(&third_api, "/healthz").is_ok_and(|r| r.status == 200) {
        if let Some(s) = third.try_wait().unwrap() {
            panic!(
                "the next daemon exited {s}: {}",
                std::fs::read_to_string(second_dir.path().join("third.log")).unwrap()
            );
        }
        assert!(up.elapsed() < LONG, "the next daemon's API never answered");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The stale socket was replaced: the status below reaches the third
    // daemon through it (a stale one refuses the connection). Its inode
    // number proves nothing here: the file system may give the new socket
    // the number the removed one had.
    let out = holdfast(
        &[
            "status",
            "--json",
            "--state-dir",
            &state.display().to_string(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let _ = third.kill();
    let _ = third.wait();
}

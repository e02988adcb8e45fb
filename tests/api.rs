//! The HTTP API served for real on 127.0.0.1 (port 0), read by the real
//! `holdfast status` / `holdfast explain` binaries and by raw TCP. The
//! daemon's state is a fixed [`StateView`] built from
//! tests/fixtures/api/status.json: these tests are about the HTTP layer
//! and the CLI. `/readyz` and metric values of the real daemon, whose
//! readiness follows its source, are asserted in tests/frr_wire.rs
//! (`readiness_and_end_of_rib_wait_for_the_sources_first_complete_view`).

use std::io::{Read, Write};
use std::net::{IpAddr, Shutdown, SocketAddr, TcpStream};
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use holdfast::api::{Answer, StateView, answer, serve_listener};
use holdfast::cli::http;
use holdfast::cli::status::render_status;
use holdfast::report::status::{Explanation, PeerExplanation, Status};
use testlab::exposition;

const ADVERTISED_VIP: &str = "198.51.100.10";

fn fixture() -> Status {
    serde_json::from_str(include_str!("fixtures/api/status.json")).unwrap()
}

struct Daemon {
    status: Status,
    ready: Mutex<Result<(), String>>,
}

impl StateView for Daemon {
    fn status(&self) -> Answer<Status> {
        answer(self.status.clone())
    }
    fn explain(&self, vip: IpAddr) -> Answer<Explanation> {
        let advertised = vip.to_string() == ADVERTISED_VIP;
        answer(Explanation {
            vip: vip.to_string(),
            advertised,
            summary: if advertised {
                format!("{vip} is advertised to tor1.")
            } else {
                format!("{vip} is not advertised: no source has it.")
            },
            reasons: vec![format!(
                "the VIP file {} {vip}",
                if advertised { "lists" } else { "does not list" }
            )],
            peers: vec![PeerExplanation {
                peer: "tor1".into(),
                advertised,
                why: if advertised {
                    "in its Adj-RIB-Out".into()
                } else {
                    "nothing to advertise".into()
                },
            }],
        })
    }
    fn ready(&self) -> Result<(), String> {
        self.ready.lock().unwrap().clone()
    }
}

/// The API server on its own runtime thread, stopped on drop.
struct Server {
    addr: SocketAddr,
    daemon: Arc<Daemon>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<std::io::Result<()>>>,
}

impl Server {
    fn start() -> Server {
        let daemon = Arc::new(Daemon {
            status: fixture(),
            ready: Mutex::new(Ok(())),
        });
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let view: Arc<dyn StateView> = daemon.clone();
        let thread = std::thread::spawn(move || {
            rt.block_on(serve_listener(listener, view, async {
                let _ = stopped.await;
            }))
        });
        Server {
            addr,
            daemon,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    fn api(&self) -> String {
        self.addr.to_string()
    }

    /// Stops the server and waits (with a deadline) for `serve` to return.
    fn shut_down(&mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let thread = self.thread.take().expect("running");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !thread.is_finished() {
            assert!(
                Instant::now() < deadline,
                "serve did not return after shutdown"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        thread.join().expect("the server thread panicked")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.shut_down();
        }
    }
}

fn holdfast(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_holdfast"))
        .args(args)
        .output()
        .expect("run holdfast")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

/// Sends raw bytes, half-closes, and reads whatever comes back until the
/// server closes (or 10 s pass).
fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may close before taking all of it; that is its right.
    let _ = s.write_all(bytes);
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

fn assert_serving(addr: SocketAddr) {
    let r = http::get(&addr.to_string(), "/healthz").expect("the server still answers");
    assert_eq!((r.status, text(&r.body).as_str()), (200, "ok\n"));
}

#[test]
fn holdfast_status_prints_the_daemons_tables() {
    let server = Server::start();
    let api = server.api();
    let out = holdfast(&["status", "--api", &api]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout, render_status(&fixture()));
    for line in [
        "BGP router identifier 192.0.2.11, local AS number 65001\n",
        "withdrawals absorbed by hold-down: 519\n",
        "198.51.100.11/32      held down, withdraws in 12s ",
    ] {
        assert!(stdout.contains(line), "{line:?} not in\n{stdout}");
    }

    let out = holdfast(&["status", "--json", "--api", &api]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let status: Status = serde_json::from_slice(&out.stdout).expect("--json prints JSON");
    assert_eq!(status, fixture());
}

#[test]
fn holdfast_explain_exits_by_the_answer() {
    let server = Server::start();
    let api = server.api();

    let out = holdfast(&["explain", ADVERTISED_VIP, "--api", &api]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "198.51.100.10 is advertised to tor1.\n\nBecause:\n  - the VIP file lists 198.51.100.10\n\n\
         Peers:\n  tor1  advertised  in its Adj-RIB-Out\n"
    );
    // The /32 form `holdfast status` prints is taken too.
    let out = holdfast(&["explain", "198.51.100.10/32", "--api", &api]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let out = holdfast(&["explain", "198.51.100.99", "--api", &api]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("198.51.100.99 is not advertised: no source has it.\n"));

    let out = holdfast(&["explain", "web.demo", "--api", &api]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "holdfast: \"web.demo\" is not an IP address\n"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_cli_says_plainly_when_no_daemon_is_there() {
    // A port that was just free: nothing listens there now.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let api = format!("127.0.0.1:{port}");
    let want = format!(
        "holdfast: cannot reach holdfast at {api}: connection refused — is the daemon running? (--api ADDR)\n"
    );
    for args in [
        vec!["status", "--api", &api],
        vec!["status", "--json", "--api", &api],
        vec!["explain", ADVERTISED_VIP, "--api", &api],
    ] {
        let out = holdfast(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert_eq!(text(&out.stderr), want, "{args:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn the_cli_rejects_an_answer_that_is_not_holdfasts() {
    // Something else on the port: it answers, but not in HTTP.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let api = listener.local_addr().unwrap().to_string();
    let other = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut s, _) = listener.accept().unwrap();
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.6\r\n");
        }
    });
    for args in [
        vec!["status", "--api", &api],
        vec!["explain", ADVERTISED_VIP, "--api", &api],
    ] {
        let out = holdfast(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!(
                "holdfast: holdfast at {api} gave no usable answer: "
            )),
            "{err}"
        );
    }
    other.join().unwrap();
}

#[test]
fn every_endpoint_over_http() {
    let server = Server::start();
    let api = server.api();

    let r = http::get(&api, "/metrics").unwrap();
    assert_eq!(r.status, 200);
    let ctype = r.content_type.unwrap();
    assert!(ctype.starts_with("text/plain; version=0.0.4"), "{ctype}");
    let e = exposition::parse(&text(&r.body)).unwrap();
    assert_eq!(
        e.value("holdfast_withdrawals_absorbed_total", &[]),
        Some(519.0)
    );
    assert_eq!(
        e.value(
            "holdfast_peer_state",
            &[
                ("peer", "tor1"),
                ("address", "192.0.2.1"),
                ("state", "Established")
            ]
        ),
        Some(1.0)
    );

    let r = http::get(&api, "/healthz").unwrap();
    assert_eq!((r.status, text(&r.body).as_str()), (200, "ok\n"));
    let r = http::get(&api, "/readyz").unwrap();
    assert_eq!((r.status, text(&r.body).as_str()), (200, "ready\n"));

    *server.daemon.ready.lock().unwrap() = Err("source kubernetes has not synced".into());
    let r = http::get(&api, "/readyz").unwrap();
    assert_eq!(
        (r.status, text(&r.body).as_str()),
        (503, "not ready: source kubernetes has not synced\n")
    );
    // Not ready is not dead: liveness and status still answer.
    assert_eq!(http::get(&api, "/healthz").unwrap().status, 200);
    assert_eq!(holdfast(&["status", "--api", &api]).status.code(), Some(0));

    let r = http::get(&api, "/v1/status").unwrap();
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    assert_eq!(
        serde_json::from_slice::<Status>(&r.body).unwrap(),
        fixture()
    );

    let r = http::get(&api, "/v1/explain/2001:db8::10").unwrap();
    assert_eq!(r.status, 200);
    let ex: Explanation = serde_json::from_slice(&r.body).unwrap();
    assert_eq!((ex.vip.as_str(), ex.advertised), ("2001:db8::10", false));

    let r = http::get(&api, "/v1/explain/tor1").unwrap();
    assert_eq!(r.status, 400);
    assert_eq!(r.content_type.as_deref(), Some("application/json"));
    assert_eq!(r.error_message(), "\"tor1\" is not an IP address");

    let r = http::get(&api, "/v1/nothing").unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(r.error_message(), "no such endpoint: /v1/nothing");

    let answer = raw(
        server.addr,
        b"POST /v1/status HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
    );
    assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("\r\nallow: get, head\r\n"),
        "{answer}"
    );

    let answer = raw(
        server.addr,
        b"HEAD /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "HEAD has no body: {answer:?}");
}

#[test]
fn malformed_requests_do_not_kill_the_server() {
    let server = Server::start();
    // What hyper cannot parse it answers with 400 and a close.
    let unparsable: [&[u8]; 8] = [
        b"GARBAGE\r\n\r\n",
        b"GET\r\n\r\n",
        b"GET /healthz HTTP/9.9\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 a TLS ClientHello",
        b"\x00\x00\x00\x00\xff\xff\xff\xff\r\n\r\n",
        b"GET /v1/explain/\xff\xfe HTTP/1.1\r\nHost: x\r\n\r\n",
    ];
    for bytes in unparsable {
        let answer = raw(server.addr, bytes);
        assert!(
            answer.starts_with("HTTP/1.1 400 "),
            "{bytes:?} got {answer:?}"
        );
        assert_serving(server.addr);
    }
    // A request cut short, or none at all: nothing to answer.
    for bytes in [&b"GET /heal"[..], b""] {
        assert_eq!(raw(server.addr, bytes), "", "{bytes:?}");
        assert_serving(server.addr);
    }

    // A request head far past any sane size.
    let mut huge = b"GET /healthz HTTP/1.1\r\nX-Filler: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 1 << 20));
    huge.extend_from_slice(b"\r\n\r\n");
    let answer = raw(server.addr, &huge);
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer:?}");
    assert_serving(server.addr);

    // Keep-alive: two requests on one connection, two answers.
    let answer = raw(
        server.addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 2, "{answer}");
    assert!(answer.ends_with("ready\n"), "{answer}");

    // Many clients at once, some of them leaving mid-request.
    let api = server.api();
    let clients: Vec<_> = (0..32)
        .map(|i| {
            let api = api.clone();
            let addr = server.addr;
            std::thread::spawn(move || {
                if i % 4 == 0 {
                    let mut s = TcpStream::connect(addr).unwrap();
                    let _ = s.write_all(b"GET /metrics HT");
                    return;
                }
                let r = http::get(&api, "/metrics").unwrap();
                assert_eq!(r.status, 200);
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    assert_serving(server.addr);
}

#[test]
fn a_flood_of_idle_connections_is_bounded_and_passes() {
    let server = Server::start();
    let idle: Vec<TcpStream> = (0..holdfast::api::MAX_CONNECTIONS)
        .map(|_| TcpStream::connect(server.addr).unwrap())
        .collect();
    // Every slot taken: the next connection is accepted and closed at once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = raw(server.addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
        if answer.is_empty() {
            break;
        }
        // The server may not have accepted all the idle ones yet.
        assert!(
            Instant::now() < deadline,
            "never refused past {} connections",
            holdfast::api::MAX_CONNECTIONS
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(idle);
    // The slots come back as those clients leave.
    let deadline = Instant::now() + Duration::from_secs(10);
    while http::get(&server.api(), "/healthz").map(|r| r.status).ok() != Some(200) {
        assert!(Instant::now() < deadline, "no slot came back");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn shutdown_stops_the_server_and_frees_the_port() {
    let mut server = Server::start();
    assert_serving(server.addr);
    // A client that connected and sends nothing must not hold the shutdown
    // up past the grace period.
    let idle = TcpStream::connect(server.addr).unwrap();
    let started = Instant::now();
    server.shut_down().expect("serve returns Ok");
    // Idle connections close at once; only requests in flight get the
    // 5 s grace.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    drop(idle);
    let e = TcpStream::connect(server.addr).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
}

//! The HTTP API of a real daemon (loopback, file source) against clients
//! that do not play fair: `/healthz` keeps answering while 130 clients
//! pipeline requests and never read, and `/v1/status` with 400,000 VIPs
//! stays under 1 MB an answer. The figures are printed (`--nocapture`).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{BIN, Holdfast, LONG, loopback_config};

/// Clients that hold connections: more than every slot there is.
const HOSTILE: usize = 130;
/// How long the probes go on: longer than the write timeout, so the
/// hostile connections are closed and come back at least once.
const ATTACK: Duration = Duration::from_secs(20);
/// A hostile client whose connection was closed connects again after
/// this (a client's usual retry; a tighter loop is a connection flood,
/// which no number of slots withstands).
const RECONNECT: Duration = Duration::from_secs(1);

/// A connection that sends requests and never reads: a small receive
/// window, so that the server's answers back up at once.
fn hostile(addr: SocketAddr) -> Option<TcpStream> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    socket.set_recv_buffer_size(4096).ok()?;
    socket
        .connect_timeout(&addr.into(), Duration::from_secs(1))
        .ok()?;
    let stream: TcpStream = socket.into();
    stream.set_nonblocking(true).ok()?;
    Some(stream)
}

/// One probe as the kubelet sends it: a new connection, one request.
fn probe(addr: SocketAddr) -> Result<Duration, String> {
    let started = Instant::now();
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect: {e}"))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| e.to_string())?;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: kubelet\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    s.read_to_end(&mut answer)
        .map_err(|e| format!("read: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    if answer.starts_with("HTTP/1.1 200 ") && answer.ends_with("ok\n") {
        Ok(started.elapsed())
    } else {
        Err(format!("answer {answer:?}"))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn health_checks_answer_while_130_clients_pipeline_and_never_read() {
    let vips: String = (0..50)
        .map(|i| format!("[[vip]]\naddress = \"198.51.100.{i}\"\nservice = \"demo/web-{i}\"\n"))
        .collect();
    let d = Holdfast::local(&loopback_config(), &vips);
    d.wait_for("the VIPs", LONG, || d.status_typed().source.vips == 50);
    let addr = d.api;

    // The hostile clients: each connection is sent pipelined requests
    // for as long as it takes them and never read; one the server closes
    // is opened again a second later.
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let hostile_side = {
        let stop = stop.clone();
        let opened = opened.clone();
        std::thread::spawn(move || {
            let requests: Vec<u8> = [
                "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            ]
            .iter()
            .cycle()
            .take(300)
            .flat_map(|r| r.bytes())
            .collect();
            // Each client: its connection, or when it may connect again.
            let mut conns: Vec<Result<TcpStream, Instant>> =
                (0..HOSTILE).map(|_| Err(Instant::now())).collect();
            while !stop.load(Ordering::Relaxed) {
                for slot in conns.iter_mut() {
                    if let Err(at) = slot
                        && *at <= Instant::now()
                    {
                        match hostile(addr) {
                            Some(s) => {
                                opened.fetch_add(1, Ordering::Relaxed);
                                *slot = Ok(s);
                            }
                            None => *slot = Err(Instant::now() + RECONNECT),
                        }
                    }
                    let Ok(s) = slot else { continue };
                    match s.write(&requests) {
                        Ok(n) if n > 0 => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        _ => *slot = Err(Instant::now() + RECONNECT),
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            conns.iter().filter(|c| c.is_ok()).count()
        })
    };
    // Let them take every slot first.
    std::thread::sleep(Duration::from_secs(1));

    let mut latencies = Vec::new();
    let mut failures = Vec::new();
    let until = Instant::now() + ATTACK;
    while Instant::now() < until {
        match probe(addr) {
            Ok(t) => latencies.push(t),
            Err(e) => failures.push(e),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, Ordering::Relaxed);
    let still_open = hostile_side.join().expect("hostile clients");

    latencies.sort();
    let (p50, p99, max) = (
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
    );
    println!(
        "{HOSTILE} hostile clients ({} connections opened in all, {still_open} open at the end): {} probes of /healthz, {} failed; p50 {p50:?}, p99 {p99:?}, max {max:?}",
        opened.load(Ordering::Relaxed),
        latencies.len() + failures.len(),
        failures.len(),
    );
    let log = d.log();
    println!(
        "daemon log (last lines):\n{}",
        log.lines().rev().take(15).collect::<Vec<_>>().join("\n")
    );
    assert!(
        failures.is_empty(),
        "failed probes: {:?}",
        &failures[..failures.len().min(10)]
    );
    assert!(max < Duration::from_secs(1), "slowest probe {max:?}");
    // The hostile clients did hold connections (and were closed and came
    // back: the write timeout works).
    assert!(
        opened.load(Ordering::Relaxed) > HOSTILE,
        "opened {}",
        opened.load(Ordering::Relaxed)
    );
    // Afterwards everything is served as before.
    assert_eq!(d.status_typed().source.vips, 50);
}

#[test]
fn status_with_400k_vips_is_under_a_megabyte_per_answer() {
    // 198.18.0.0/15 holds 131,072 addresses; the rest are IPv6
    // documentation addresses.
    let vips: String = (0..400_000u32)
        .map(|i| {
            let address = if i < 131_072 {
                format!("198.{}.{}.{}", 18 + i / 65536, i / 256 % 256, i % 256)
            } else {
                format!("2001:db8::{:x}:{:x}", i / 65536, i % 65536)
            };
            format!("[[vip]]\naddress = \"{address}\"\nservice = \"bulk/svc-{i}\"\n")
        })
        .collect::<String>();
    println!("VIP file of 400k VIPs: {} bytes", vips.len());
    assert!((vips.len() as u64) < holdfast::config::MAX_VIP_FILE_LEN);
    let d = Holdfast::local(&loopback_config(), &vips);
    d.wait_for("400k VIPs", Duration::from_secs(300), || {
        d.get("/readyz").is_ok_and(|r| r.status == 200)
    });

    let mut largest = 0;
    for (path, offset) in [
        ("/v1/status", 0),
        ("/v1/status?offset=200000&limit=1000", 200_000),
        ("/v1/status?offset=399500", 399_500),
    ] {
        let asked = Instant::now();
        let r = d.get(path).expect("status answers");
        let took = asked.elapsed();
        assert_eq!(r.status, 200, "{path}");
        let s: holdfast::report::status::Status =
            serde_json::from_slice(&r.body).expect("a status");
        println!(
            "{path}: {} bytes, {} routes of {:?}, in {took:?}",
            r.body.len(),
            s.routes.len(),
            s.routes_total
        );
        largest = largest.max(r.body.len());
        assert!(r.body.len() < 1024 * 1024, "{path}: {} bytes", r.body.len());
        assert_eq!(s.source.vips, 400_000);
        assert_eq!(s.routes_total, Some(400_000));
        assert_eq!(s.routes_offset, Some(offset));
        assert_eq!(
            s.routes.len() + s.routes_truncated.expect("marked as a page"),
            400_000 - offset
        );
    }
    println!("largest /v1/status answer with 400k VIPs: {largest} bytes");

    // 8 clients that ask for the status again and again and never read
    // (this took the daemon to 1.76 GB when each answer was the whole
    // list): what they cost is bounded by the page and the send buffer.
    let before = d.rss_kib();
    let slow: Vec<TcpStream> = (0..8)
        .map(|_| {
            let mut s = hostile(d.api).expect("connect");
            let requests = "GET /v1/status HTTP/1.1\r\nHost: x\r\n\r\n".repeat(50);
            let _ = s.write(requests.as_bytes());
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    let during = d.rss_kib();
    let healthz = Instant::now();
    assert_eq!(d.get("/healthz").expect("/healthz").status, 200);
    println!(
        "8 slow readers of /v1/status with 400k VIPs: RSS {} MiB before, {} MiB with them; /healthz then in {:?}",
        before / 1024,
        during / 1024,
        healthz.elapsed()
    );
    assert!(
        during < before + 64 * 1024,
        "RSS grew from {before} KiB to {during} KiB"
    );
    drop(slow);

    // holdfast status still works, and says the list goes on.
    let out = std::process::Command::new(BIN)
        .args(["status", "--api", &d.api()])
        .output()
        .expect("holdfast status runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    println!("holdfast status with 400k VIPs: {} bytes", text.len());
    assert!(
        text.contains(
            "… and 399000 more routes (1000 of 400000 shown); the API lists them page by page: /v1/status?offset=1000"
        ),
        "{}",
        &text[text.len().saturating_sub(400)..]
    );
}

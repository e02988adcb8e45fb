//! HTTP GETs from the harness to holdfast's API inside a lab namespace: the
//! calling thread joins the namespace (setns), so a request costs what it
//! costs a client on the node — no `ip netns exec curl` fork in the timing.

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use testlab::Netns;

/// Runs `f` on a thread of its own that has joined `ns`'s network
/// namespace (the harness's other threads stay where they are).
pub fn in_netns<T: Send>(ns: &Netns, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{}", ns.name());
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            // SAFETY: setns on a valid namespace descriptor affects only the
            // calling thread's network namespace.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns({path}): {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("the thread in the lab namespace panicked")
    })
}

/// One answer: how long from connect to its last octet, its status and
/// its body.
pub struct Answer {
    pub elapsed: Duration,
    pub status: u16,
    pub body: Vec<u8>,
}

/// `GET path` on a new connection (as curl or Prometheus do), read to the
/// end. Must run inside the namespace (see [`in_netns`]).
pub fn get(api: SocketAddr, path: &str) -> Answer {
    try_get(api, path).unwrap_or_else(|e| panic!("GET {path} from {api}: {e}"))
}

/// [`get`], with a failed connection or read returned (the API may not be
/// listening yet).
pub fn try_get(api: SocketAddr, path: &str) -> std::io::Result<Answer> {
    let t0 = Instant::now();
    let mut stream = TcpStream::connect(api)?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {api}\r\nConnection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw)?;
    let elapsed = t0.elapsed();
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("GET {path}: no end of headers in {} octets", raw.len()));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("GET {path}: no status in {head:?}"));
    let mut body = raw[end + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = dechunk(&body);
    }
    Ok(Answer {
        elapsed,
        status,
        body,
    })
}

/// The body of a chunked answer (RFC 9112 §7.1).
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    loop {
        let line = raw
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&raw[..line])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next()?.trim(), 16).ok())
            .expect("a hexadecimal chunk size");
        raw = &raw[line + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&raw[..size]);
        raw = &raw[size + 2..];
    }
}

//! A minimal HTTP/1.1 GET (and bodiless POST) over a blocking TCP stream
//! or the daemon's Unix socket, for `holdfast status`, `explain`, `drain`
//! and `undrain`: one request, `Connection: close`, the answer read to the
//! end. No runtime, no pool; bounded in time and size.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;

/// The daemon's API address when `--api` is not given.
pub const DEFAULT_API: &str = "127.0.0.1:9179";

/// Where a command finds the daemon's API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `speaker.api` (`HOST:PORT`), and the token to send
    /// (`Authorization: Bearer`) for a state-changing call.
    Tcp { api: String, token: Option<String> },
    /// The Unix socket in the daemon's state directory.
    Socket(PathBuf),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Tcp { api, .. } => f.write_str(api),
            Target::Socket(path) => write!(f, "{}", path.display()),
        }
    }
}
/// Connecting, sending and each read get this long.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// A status of a thousand peers and routes is well under this.
const MAX_RESPONSE: u64 = 64 << 20;

#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

impl Response {
    /// The `error` of a JSON error body, else the body as text.
    pub fn error_message(&self) -> String {
        let text = String::from_utf8_lossy(&self.body);
        serde_json::from_slice::<serde_json::Value>(&self.body)
            .ok()
            .and_then(|v| v.get("error")?.as_str().map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string())
    }
}

#[derive(Debug)]
pub enum Error {
    /// `--api` is not `HOST:PORT`, or the host has no address.
    BadAddress { api: String, reason: String },
    /// No connection: the daemon is not there.
    Unreachable { api: String, reason: String },
    /// No connection to the socket: no daemon, another state directory, or
    /// not allowed.
    SocketUnreachable { path: String, reason: String },
    /// Connected, but no sensible answer.
    BadAnswer { api: String, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadAddress { api, reason } => {
                write!(
                    f,
                    "--api {api}: {reason} (expected HOST:PORT, e.g. {DEFAULT_API})"
                )
            }
            Error::Unreachable { api, reason } => write!(
                f,
                "cannot reach holdfast at {api}: {reason} — is the daemon running? (--api ADDR)"
            ),
            Error::SocketUnreachable { path, reason } => write!(
                f,
                "cannot reach holdfast at {path}: {reason} — is the daemon running with this state directory? (--state-dir DIR or --socket PATH; or --api ADDR)"
            ),
            Error::BadAnswer { api, reason } => {
                write!(f, "holdfast at {api} gave no usable answer: {reason}")
            }
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        io::Error::other(e.to_string())
    }
}

/// An I/O error in the words an operator expects ("connection refused"),
/// without Rust's "(os error 111)".
fn reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer within {}s", TIMEOUT.as_secs())
        }
        io::ErrorKind::ConnectionReset => "connection reset".into(),
        io::ErrorKind::HostUnreachable => "host unreachable".into(),
        io::ErrorKind::NetworkUnreachable => "network unreachable".into(),
        io::ErrorKind::AddrNotAvailable => "address not available".into(),
        _ => e.to_string(),
    }
}

/// The reason a socket could not be reached, in an operator's words.
fn socket_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => "no such socket".into(),
        io::ErrorKind::PermissionDenied => {
            "permission denied: the socket is its owner's only (mode 0600); run as the daemon's user, or root".into()
        }
        io::ErrorKind::ConnectionRefused => {
            "connection refused: the socket of a daemon that stopped".into()
        }
        _ => reason(e),
    }
}

/// `GET path` from the API at `api` (`host:port`).
pub fn get(api: &str, path: &str) -> Result<Response, Error> {
    request(api, "GET", path, None)
}

/// `POST path` (no body) to the API at `api`.
pub fn post(api: &str, path: &str) -> Result<Response, Error> {
    request(api, "POST", path, None)
}

/// `method path` (no body) to the API at `target`.
pub fn call(target: &Target, method: &str, path: &str) -> Result<Response, Error> {
    match target {
        Target::Tcp { api, token } => request(api, method, path, token.as_deref()),
        Target::Socket(socket) => {
            let shown = socket.display().to_string();
            let addr = socket2::SockAddr::unix(socket).map_err(|e| Error::SocketUnreachable {
                path: shown.clone(),
                reason: e.to_string(),
            })?;
            let connected =
                socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM, None)
                    .and_then(|s| s.connect_timeout(&addr, TIMEOUT).map(|()| s));
            let stream: std::os::unix::net::UnixStream = connected
                .map_err(|e| Error::SocketUnreachable {
                    path: shown.clone(),
                    reason: socket_reason(&e),
                })?
                .into();
            exchange(stream, &shown, "localhost", method, path, None)
        }
    }
}

fn request(api: &str, method: &str, path: &str, token: Option<&str>) -> Result<Response, Error> {
    let unreachable = |reason: String| Error::Unreachable {
        api: api.to_string(),
        reason,
    };
    let bad_address = |reason: String| Error::BadAddress {
        api: api.to_string(),
        reason,
    };
    let addrs: Vec<SocketAddr> = api
        .to_socket_addrs()
        .map_err(|e| bad_address(e.to_string()))?
        .collect();
    let mut last = None;
    let mut stream = None;
    for a in &addrs {
        match TcpStream::connect_timeout(a, TIMEOUT) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = match (stream, last) {
        (Some(s), _) => s,
        (None, Some(e)) => return Err(unreachable(reason(&e))),
        (None, None) => return Err(bad_address("the name has no address".into())),
    };
    exchange(stream, api, api, method, path, token)
}

/// A connected stream the request can be sent on.
trait Stream: Read + Write {
    fn set_timeouts(&self, t: Duration) -> io::Result<()>;
}

impl Stream for TcpStream {
    fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))?;
        self.set_write_timeout(Some(t))
    }
}

impl Stream for std::os::unix::net::UnixStream {
    fn set_timeouts(&self, t: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(t))?;
        self.set_write_timeout(Some(t))
    }
}

/// Sends the request on `stream` and reads the answer; `shown` names the
/// daemon in errors. A `token` (checked as a bearer token by whoever took
/// it: no line breaks) goes in `Authorization`.
fn exchange(
    mut stream: impl Stream,
    shown: &str,
    host: &str,
    method: &str,
    path: &str,
    token: Option<&str>,
) -> Result<Response, Error> {
    let bad = |reason: String| Error::BadAnswer {
        api: shown.to_string(),
        reason,
    };
    let io_err = |e: io::Error| bad(reason(&e));
    stream.set_timeouts(TIMEOUT).map_err(io_err)?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: holdfast/{}\r\nAccept: */*\r\n{authorization}Content-Length: 0\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION")
    );
    stream.write_all(request.as_bytes()).map_err(io_err)?;
    let mut raw = Vec::new();
    (&mut stream)
        .take(MAX_RESPONSE + 1)
        .read_to_end(&mut raw)
        .map_err(io_err)?;
    if raw.len() as u64 > MAX_RESPONSE {
        return Err(bad(format!("answer longer than {MAX_RESPONSE} bytes")));
    }
    parse_response(&raw).map_err(bad)
}

/// Splits a whole HTTP/1.1 response (the connection closed after it) into
/// status, content type and body, undoing chunked transfer coding
/// (RFC 9112 §7.1).
pub fn parse_response(raw: &[u8]) -> Result<Response, String> {
    if raw.is_empty() {
        return Err("the connection closed without an answer".into());
    }
    let head_end = find(raw, b"\r\n\r\n").ok_or("the answer has no complete header")?;
    let head = std::str::from_utf8(&raw[..head_end]).map_err(|_| "header is not text")?;
    let rest = &raw[head_end + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(format!("not an HTTP/1 answer: {status_line:?}"));
    }
    let status = parts
        .next()
        .and_then(|s| s.parse::<u16>().ok())
        .filter(|s| (100..=999).contains(s))
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let mut content_type = None;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines {
        let (name, value) = line
            .split_once(':')
            .ok_or_else(|| format!("bad header line {line:?}"))?;
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-type" => content_type = Some(value.to_string()),
            "content-length" => {
                content_length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| format!("bad Content-Length {value:?}"))?,
                )
            }
            "transfer-encoding" => chunked = value.to_ascii_lowercase().ends_with("chunked"),
            _ => {}
        }
    }
    let body = if chunked {
        dechunk(rest)?
    } else if let Some(n) = content_length {
        rest.get(..n)
            .ok_or_else(|| format!("the answer ended after {} of {n} body bytes", rest.len()))?
            .to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        content_type,
        body,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn dechunk(mut data: &[u8]) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    loop {
        let line_end = find(data, b"\r\n").ok_or("a chunk size line without its end")?;
        let line = std::str::from_utf8(&data[..line_end]).map_err(|_| "bad chunk size")?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| format!("bad chunk size {size_text:?}"))?;
        data = &data[line_end + 2..];
        if size == 0 {
            return Ok(body); // trailers, if any, are of no interest
        }
        let chunk = data.get(..size).ok_or("the answer ended inside a chunk")?;
        body.extend_from_slice(chunk);
        data = data
            .get(size..)
            .and_then(|d| d.strip_prefix(b"\r\n"))
            .ok_or("a chunk without its CRLF")?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_length_and_chunked_answers() {
        let r = parse_response(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
        )
        .unwrap();
        assert_eq!(
            (r.status, r.content_type.as_deref(), &r.body[..]),
            (200, Some("application/json"), &b"{}"[..])
        );
        let r = parse_response(
            b"HTTP/1.1 400 Bad Request\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\n{\"er\r\nC\r\nror\":\"nope\"}\r\n0\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.status, 400);
        assert_eq!(r.error_message(), "nope");
        let r = parse_response(b"HTTP/1.0 503 x\r\n\r\nnot ready: syncing\n").unwrap();
        assert_eq!(r.error_message(), "not ready: syncing");
    }

    #[test]
    fn rejects_broken_answers() {
        for (raw, why) in [
            (&b""[..], "without an answer"),
            (b"HTTP/1.1 200 OK\r\n", "no complete header"),
            (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1"),
            (b"HTTP/1.1 abc\r\n\r\n", "bad status line"),
            (b"HTTP/1.1 200 OK\r\nnocolon\r\n\r\n", "bad header line"),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nabc",
                "after 3 of 9",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                "bad chunk size",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nab",
                "inside a chunk",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabcd",
                "without its CRLF",
            ),
        ] {
            let e = parse_response(raw).unwrap_err();
            assert!(e.contains(why), "{e:?} lacks {why:?}");
        }
    }

    #[test]
    fn a_closed_port_reads_as_unreachable() {
        // Bind then drop: the port is (for this moment) closed on loopback.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let api = format!("127.0.0.1:{port}");
        let e = get(&api, "/v1/status").unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "cannot reach holdfast at {api}: connection refused — is the daemon running? (--api ADDR)"
            )
        );
        let e = get("no-port-here", "/").unwrap_err();
        assert!(matches!(e, Error::BadAddress { .. }), "{e}");
        assert!(e.to_string().starts_with("--api no-port-here: "), "{e}");
    }
}

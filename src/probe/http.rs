//! HTTP(S) probes (`probe = { url = "https://127.0.0.1:6443/readyz" }`):
//! one HTTP/1.1 GET per probe, on a new connection, which passes when the
//! server's status line says 2xx. Only the status line is read (and the
//! headers of interim 1xx responses, RFC 9110 §15.2, which come before it);
//! the connection is then dropped.
//!
//! Everything is bounded. The caller gives the whole exchange — CA file,
//! name lookup, connect, TLS handshake, request, status line — one
//! `timeout`; a line is read into a buffer of [`LINE_MAX`] bytes and at
//! most [`HEAD_MAX`] bytes are read in all, so a server that sends an
//! endless line or endless interim responses fails the probe instead of
//! growing memory, and one that sends nothing fails it when `timeout` is
//! up. File reads go to tokio's blocking pool; nothing blocks the runtime.
//!
//! TLS is rustls on ring, the stack kube's client uses. The server's
//! certificate is verified against the probe's `ca_file`, read before
//! every probe (the TLS configuration is rebuilt only when its contents
//! change), or else against the system's roots, loaded once per process.
//! The name verified, and sent as SNI, is the URL's host: an IP host must
//! be an IP address SAN of the certificate (and no SNI is sent, RFC 6066
//! §3).

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{CertificateError, ClientConfig, RootCertStore};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::config::{HttpUrl, UrlHost, format_duration, http_probe};

/// The longest status line (or interim response header line) read.
pub const LINE_MAX: usize = 1024;
/// The most bytes read before the final status line is complete.
pub const HEAD_MAX: usize = 8 * 1024;

/// The system's roots as a TLS configuration, once loaded.
static SYSTEM_ROOTS: Mutex<Option<Arc<ClientConfig>>> = Mutex::new(None);

/// The HTTP prober of one VIP: its URL and the TLS configuration built
/// from the last CA file it read.
pub struct HttpProbe {
    url: HttpUrl,
    ca_file: Option<PathBuf>,
    /// The SHA-256 of the CA file at the last probe, and the
    /// configuration built from it (a digest, not the bytes: each probed
    /// VIP keeps its own).
    cached: Option<([u8; 32], Arc<ClientConfig>)>,
}

/// Where an exchange is, for the message of one that times out.
#[derive(Clone, Copy, Debug)]
enum Stage {
    CaFile,
    SystemRoots,
    Resolve,
    Connect(SocketAddr),
    Handshake,
    Send,
    StatusLine,
}

impl HttpProbe {
    pub fn new(url: HttpUrl, ca_file: Option<PathBuf>) -> HttpProbe {
        HttpProbe {
            url,
            ca_file,
            cached: None,
        }
    }

    /// One probe: `Ok` for a 2xx status line within `timeout`, else what
    /// went wrong.
    pub async fn probe(&mut self, timeout: Duration) -> Result<(), String> {
        let mut stage = Stage::Resolve;
        let result = tokio::time::timeout(timeout, self.exchange(&mut stage)).await;
        match result {
            Ok(r) => r,
            Err(_) => Err(format!(
                "timed out after {} {}",
                format_duration(timeout),
                self.waiting(stage)
            )),
        }
    }

    /// What the probe was doing when its time ran out.
    fn waiting(&self, stage: Stage) -> String {
        match stage {
            Stage::CaFile => format!(
                "reading ca_file {}",
                self.ca_file
                    .as_deref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default()
            ),
            Stage::SystemRoots => "loading the system's root certificates".to_string(),
            Stage::Resolve => format!("resolving {}", self.url.host),
            Stage::Connect(addr) => format!("connecting to {addr}"),
            Stage::Handshake => "in the TLS handshake".to_string(),
            Stage::Send => "sending the request".to_string(),
            Stage::StatusLine => "waiting for the status line".to_string(),
        }
    }

    /// Whom the server's certificate must chain to, in words.
    fn roots(&self) -> String {
        match &self.ca_file {
            Some(p) => format!("ca_file {}", p.display()),
            None => "the system's roots".to_string(),
        }
    }

    async fn exchange(&mut self, stage: &mut Stage) -> Result<(), String> {
        let tls = if self.url.https {
            Some(match self.ca_file.clone() {
                Some(path) => {
                    *stage = Stage::CaFile;
                    self.ca_config(&path).await?
                }
                None => {
                    *stage = Stage::SystemRoots;
                    system_config().await?
                }
            })
        } else {
            None
        };
        *stage = Stage::Resolve;
        let port = self.url.port;
        let addrs: Vec<SocketAddr> = match &self.url.host {
            UrlHost::Ip(ip) => vec![SocketAddr::new(*ip, port)],
            UrlHost::Name(name) => tokio::net::lookup_host((name.as_str(), port))
                .await
                .map_err(|e| format!("resolve {name}: {e}"))?
                .collect(),
        };
        let tcp = connect(&addrs, stage).await?;
        let Some(config) = tls else {
            return request(tcp, &self.url, stage)
                .await
                .map_err(|e| e.words(None));
        };
        *stage = Stage::Handshake;
        let name = match &self.url.host {
            UrlHost::Ip(ip) => ServerName::IpAddress((*ip).into()),
            UrlHost::Name(n) => ServerName::try_from(n.clone())
                .map_err(|e| format!("TLS: {n} is not a server name: {e}"))?,
        };
        let roots = self.roots();
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| tls_failure(&e, &roots))?;
        request(tls, &self.url, stage)
            .await
            .map_err(|e| e.words(Some(&roots)))
    }

    /// The TLS configuration of the CA file as it is now.
    async fn ca_config(&mut self, path: &Path) -> Result<Arc<ClientConfig>, String> {
        let owned = path.to_path_buf();
        let bytes = tokio::task::spawn_blocking(move || http_probe::read_ca_file(&owned))
            .await
            .map_err(|e| format!("reading ca_file {}: {e}", path.display()))??;
        let mut digest = [0u8; 32];
        digest.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref());
        if let Some((seen, config)) = &self.cached
            && *seen == digest
        {
            return Ok(config.clone());
        }
        let config = client_config(http_probe::ca_roots(path, &bytes)?)?;
        self.cached = Some((digest, config.clone()));
        Ok(config)
    }
}

/// The TLS configuration of the system's roots (rustls-native-certs: the
/// distribution's bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), loaded on
/// the blocking pool at the first probe that needs it; a load that finds
/// none is tried again at the next probe.
async fn system_config() -> Result<Arc<ClientConfig>, String> {
    if let Some(c) = SYSTEM_ROOTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
    {
        return Ok(c);
    }
    let roots = tokio::task::spawn_blocking(|| {
        let found = rustls_native_certs::load_native_certs();
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(found.certs);
        if roots.is_empty() {
            let why: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
            return Err(format!(
                "TLS: no system root certificates found{}; give the probe a ca_file",
                if why.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", why.join("; "))
                }
            ));
        }
        Ok(roots)
    })
    .await
    .map_err(|e| format!("loading the system's root certificates: {e}"))??;
    let config = client_config(roots)?;
    *SYSTEM_ROOTS.lock().unwrap_or_else(|e| e.into_inner()) = Some(config.clone());
    Ok(config)
}

/// A client configuration that trusts `roots`, offers HTTP/1.1 by ALPN and
/// sends no client certificate.
fn client_config(roots: RootCertStore) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// A connection to the first of `addrs` that accepts.
async fn connect(addrs: &[SocketAddr], stage: &mut Stage) -> Result<TcpStream, String> {
    let mut last = None;
    for addr in addrs {
        *stage = Stage::Connect(*addr);
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => last = Some(format!("connect to {addr}: {}", io_words(&e))),
        }
    }
    Err(last.unwrap_or_else(|| "the host resolves to no address".to_string()))
}

/// Why an exchange failed after the connect: the transport, or what the
/// server said.
enum Failure {
    Io(io::Error),
    Http(String),
}

impl Failure {
    /// In words; `tls`: the roots of a TLS connection, whose alerts (a
    /// server that wants a client certificate says so after the
    /// handshake) are TLS failures.
    fn words(self, tls: Option<&str>) -> String {
        match (self, tls) {
            (Failure::Http(s), _) => s,
            (Failure::Io(e), Some(roots))
                if e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) =>
            {
                tls_failure(&e, roots)
            }
            (Failure::Io(e), _) => io_words(&e),
        }
    }
}

/// Sends the GET and reads the answer's status line.
async fn request<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    url: &HttpUrl,
    stage: &mut Stage,
) -> Result<(), Failure> {
    *stage = Stage::Send;
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: holdfast/{}\r\nAccept: */*\r\nConnection: close\r\n\r\n",
        url.target,
        url.host_header(),
        env!("CARGO_PKG_VERSION")
    );
    s.write_all(request.as_bytes()).await.map_err(Failure::Io)?;
    s.flush().await.map_err(Failure::Io)?;
    *stage = Stage::StatusLine;
    let mut lines = Lines::new(s);
    loop {
        let line = lines.next(LineKind::Status).await?;
        let (code, reason) = status(&line).map_err(Failure::Http)?;
        // Interim responses (100 Continue, 103 Early Hints) come before
        // the final one, each with its headers (RFC 9110 §15.2).
        if (100..200).contains(&code) && code != 101 {
            while !lines.next(LineKind::Header).await?.is_empty() {}
            continue;
        }
        if (200..300).contains(&code) {
            return Ok(());
        }
        return Err(Failure::Http(match reason {
            Some(r) => format!("HTTP {code} {r}"),
            None => format!("HTTP {code}"),
        }));
    }
}

#[derive(Clone, Copy)]
enum LineKind {
    Status,
    Header,
}

/// Lines of the answer, from a fixed buffer.
struct Lines<S> {
    s: S,
    buf: [u8; LINE_MAX],
    len: usize,
    read: usize,
}

impl<S: AsyncRead + Unpin> Lines<S> {
    fn new(s: S) -> Self {
        Lines {
            s,
            buf: [0; LINE_MAX],
            len: 0,
            read: 0,
        }
    }

    /// The next line without its CR LF.
    async fn next(&mut self, kind: LineKind) -> Result<Vec<u8>, Failure> {
        let what = match kind {
            LineKind::Status => "status line",
            LineKind::Header => "header line",
        };
        loop {
            if let Some(end) = self.buf[..self.len].iter().position(|b| *b == b'\n') {
                let mut line = self.buf[..end].to_vec();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                self.buf.copy_within(end + 1..self.len, 0);
                self.len -= end + 1;
                return Ok(line);
            }
            if self.len == LINE_MAX {
                return Err(Failure::Http(format!(
                    "the server's {what} is longer than {LINE_MAX} bytes"
                )));
            }
            if self.read >= HEAD_MAX {
                return Err(Failure::Http(format!(
                    "no final status line in the first {HEAD_MAX} bytes of the answer"
                )));
            }
            let room = (LINE_MAX - self.len).min(HEAD_MAX - self.read);
            let n = match self.s.read(&mut self.buf[self.len..self.len + room]).await {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => 0,
                Err(e) => return Err(Failure::Io(e)),
            };
            if n == 0 {
                return Err(Failure::Http(if self.len == 0 && self.read == 0 {
                    "the server closed the connection without answering".to_string()
                } else {
                    format!("the server closed the connection in the {what}")
                }));
            }
            self.len += n;
            self.read += n;
        }
    }
}

/// The code and reason phrase of a status line (RFC 9112 §4:
/// `HTTP/1.1 200 OK`).
fn status(line: &[u8]) -> Result<(u16, Option<String>), String> {
    let not_http = || {
        let shown: String = String::from_utf8_lossy(&line[..line.len().min(40)]).into_owned();
        format!("not an HTTP response: it begins {shown:?}")
    };
    let rest = line.strip_prefix(b"HTTP/").ok_or_else(not_http)?;
    let version_ok = rest.len() >= 4
        && rest[0].is_ascii_digit()
        && rest[1] == b'.'
        && rest[2].is_ascii_digit()
        && rest[3] == b' ';
    if !version_ok {
        return Err(not_http());
    }
    let rest = &rest[4..];
    if rest.len() < 3
        || !rest[..3].iter().all(u8::is_ascii_digit)
        || rest.get(3).is_some_and(|b| *b != b' ')
    {
        return Err(not_http());
    }
    let code = rest[..3]
        .iter()
        .fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    let reason: String = rest
        .get(4..)
        .unwrap_or_default()
        .iter()
        .take(64)
        .map(|b| {
            if b.is_ascii_graphic() || *b == b' ' {
                *b as char
            } else {
                '?'
            }
        })
        .collect();
    let reason = reason.trim();
    Ok((code, (!reason.is_empty()).then(|| reason.to_string())))
}

/// A TLS failure (or one of the transport under it) in words.
fn tls_failure(e: &io::Error, roots: &str) -> String {
    match e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        Some(rustls::Error::InvalidCertificate(c)) => format!(
            "TLS: certificate verify failed: {}",
            certificate_words(c, roots)
        ),
        Some(other) => format!("TLS: {other}"),
        None => format!("TLS handshake: {}", io_words(e)),
    }
}

fn certificate_words(c: &CertificateError, roots: &str) -> String {
    match c {
        CertificateError::UnknownIssuer => {
            format!("unknown issuer: the server's chain does not lead to a CA of {roots}")
        }
        CertificateError::BadSignature => "a certificate of the chain has a bad signature".into(),
        CertificateError::NotValidForName => "the certificate does not name the URL's host".into(),
        CertificateError::Expired => "the certificate has expired".into(),
        CertificateError::NotValidYet => "the certificate is not valid yet".into(),
        CertificateError::Revoked => "the certificate is revoked".into(),
        CertificateError::BadEncoding => "the certificate is not valid DER".into(),
        other => other.to_string(),
    }
}

/// A transport error in words: "refused", not "Connection refused (os
/// error 111)".
fn io_words(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "refused".into(),
        io::ErrorKind::ConnectionReset => "reset by the server".into(),
        io::ErrorKind::UnexpectedEof => "closed by the server".into(),
        io::ErrorKind::HostUnreachable => "host unreachable".into(),
        io::ErrorKind::NetworkUnreachable => "network unreachable".into(),
        io::ErrorKind::AddrNotAvailable => "address not available".into(),
        _ => e.to_string(),
    }
}

#[cfg(test)]
mod tests;

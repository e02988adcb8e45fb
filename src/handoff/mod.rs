//! Live hand-off between two holdfasts sharing a state directory
//! (`holdfast run --state-dir DIR` started while another runs with it).
//!
//! The running daemon (the old side) listens on `DIR/handoff.sock`
//! (owner-only, like the API's socket; each connecting process's
//! credentials are checked with `SO_PEERCRED`: the same user, or root). A
//! second holdfast that finds the directory held connects there instead
//! of giving up, says `Hello` in its protocol version, and the old side
//! answers:
//!
//! - `Transfer`, the state and its descriptors (`SCM_RIGHTS`), which the
//!   new side confirms with `Received` before the old one stops without a
//!   word; or
//! - `Fallback` with a reason: the old side exits as on SIGTERM
//!   (graceful restart, RFC 4724, where the exit plan keeps the routes),
//!   and the new side takes the state directory once it is released and
//!   starts fresh with the restart marker (the R bit).
//!
//! An incompatible version is always a fallback: the frames' header is the
//! same in every version ([`wire`]), so each side can name the other's
//! version in its log. This module is the protocol and its IO; the daemon
//! decides what to answer (`daemon::start`).

pub mod wire;

use std::io::{self, Read, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use wire::{DecodeError, Fallback, Hello, Message, Transfer};

/// The hand-off socket's name in the state directory.
pub const SOCKET_NAME: &str = "handoff.sock";

/// Testing only: the protocol version this process speaks, instead of
/// [`wire::VERSION`] (an incompatible pair is made with it).
pub const VERSION_ENV: &str = "HOLDFAST_HANDOFF_VERSION";

/// How long either side waits for the other's next frame.
pub const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);

/// The hand-off socket of the state directory `dir`.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// The protocol version this process speaks.
pub fn version() -> u16 {
    std::env::var(VERSION_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(wire::VERSION)
}

/// This build, as the other side logs it.
pub fn build() -> String {
    format!(
        "{} ({})",
        env!("CARGO_PKG_VERSION"),
        crate::build_info::COMMIT
    )
}

/// What went wrong in an exchange.
#[derive(Debug)]
pub enum Error {
    Io(io::Error),
    Decode(DecodeError),
    Encode(wire::EncodeError),
    /// The other process is not ours to deal with.
    Credentials(String),
    /// The other side closed before a whole frame.
    Closed,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::Decode(e) => write!(f, "{e}"),
            Error::Encode(e) => write!(f, "{e}"),
            Error::Credentials(e) => write!(f, "{e}"),
            Error::Closed => write!(f, "the other holdfast closed the connection"),
        }
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

/// Whether a process with these credentials may take part: the same user
/// as this one, or root.
pub fn allowed(peer: holdfast_sockopt::PeerCredentials, own_uid: u32) -> Result<(), String> {
    if peer.uid == own_uid || peer.uid == 0 {
        Ok(())
    } else {
        Err(format!(
            "process {} of uid {} is neither root nor this holdfast's user (uid {own_uid})",
            peer.pid, peer.uid
        ))
    }
}

fn check_peer(s: &UnixStream) -> Result<(), Error> {
    let creds = holdfast_sockopt::peer_credentials(s)?;
    allowed(creds, holdfast_sockopt::effective_uid()).map_err(Error::Credentials)
}

/// Writes one frame, its descriptors on its first octet.
pub fn write_frame(
    s: &UnixStream,
    message: &Message,
    fds: &[BorrowedFd<'_>],
    version: u16,
) -> Result<(), Error> {
    let frame = wire::encode(message, version).map_err(Error::Encode)?;
    let sent = holdfast_sockopt::send_with_fds(s, &frame, fds)?;
    let mut w = s;
    w.write_all(&frame[sent..])?;
    Ok(())
}

/// Reads one frame: the header (and any descriptors), then the body, read
/// as it arrives (a header that announces a large body allocates nothing
/// until the octets come; [`wire::MAX_BODY`] bounds it).
pub fn read_frame(s: &UnixStream, ours: u16) -> Result<(Message, Vec<OwnedFd>), Error> {
    let mut header = [0u8; wire::HEADER_LEN];
    let mut have = 0;
    let mut fds = Vec::new();
    while have < header.len() {
        let r = holdfast_sockopt::recv_with_fds(
            s,
            &mut header[have..],
            usize::from(wire::MAX_FDS) - fds.len(),
        )?;
        if r.len == 0 {
            return Err(Error::Closed);
        }
        have += r.len;
        fds.extend(r.fds);
    }
    let h = wire::parse_header(&header).map_err(Error::Decode)?;
    let mut body = Vec::new();
    s.take(u64::from(h.body_len)).read_to_end(&mut body)?;
    // Another version's frame is read whole (the next frame starts after
    // it) but not decoded.
    if h.version != ours {
        return Err(Error::Decode(DecodeError::Version {
            theirs: h.version,
            ours,
        }));
    }
    let message = wire::decode_body(&h, &body, fds.len(), ours).map_err(Error::Decode)?;
    Ok((message, fds))
}

/// What the new side learnt by asking.
#[derive(Debug)]
pub enum Asked {
    /// Nobody answers on the hand-off socket (an older holdfast, or none).
    NoAnswer(String),
    /// The old side exits by the usual path: wait for the directory.
    Fallback(String),
    /// The old side's state and descriptors; it waits for `Received`.
    Transfer {
        transfer: Transfer,
        fds: Vec<OwnedFd>,
        stream: UnixStream,
    },
}

/// The new side: asks the holdfast holding `dir` to hand over (blocking,
/// each step at most [`EXCHANGE_TIMEOUT`]).
pub fn ask(dir: &Path, version: u16) -> Asked {
    let path = socket_path(dir);
    let s = match UnixStream::connect(&path) {
        Ok(s) => s,
        Err(e) => return Asked::NoAnswer(format!("{}: {e}", path.display())),
    };
    let exchange = || -> Result<Asked, Error> {
        check_peer(&s)?;
        s.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
        s.set_write_timeout(Some(EXCHANGE_TIMEOUT))?;
        let hello = Message::Hello(Hello {
            pid: std::process::id(),
            build: build(),
        });
        write_frame(&s, &hello, &[], version)?;
        match read_frame(&s, version) {
            Ok((Message::Fallback(f), _)) => {
                // The old side stops only once we confirm: if this
                // process dies first, it goes on.
                write_frame(&s, &Message::Received, &[], version)?;
                Ok(Asked::Fallback(f.reason))
            }
            Ok((Message::Transfer(transfer), fds)) => Ok(Asked::Transfer {
                transfer,
                fds,
                stream: s.try_clone()?,
            }),
            Ok((other, _)) => Ok(Asked::NoAnswer(format!(
                "unexpected {:?} frame",
                other.kind()
            ))),
            // The old side refuses our version as we refuse its: it
            // falls back (its Fallback frame is in its own version) and
            // waits for our confirmation, in its version: that frame's
            // header and empty body are the same in every version.
            Err(Error::Decode(DecodeError::Version { theirs, ours })) => {
                write_frame(&s, &Message::Received, &[], theirs)?;
                Ok(Asked::Fallback(
                    DecodeError::Version { theirs, ours }.to_string(),
                ))
            }
            Err(e) => Err(e),
        }
    };
    match exchange() {
        Ok(asked) => asked,
        Err(e) => Asked::NoAnswer(e.to_string()),
    }
}

/// A request to take over, as the old side read it.
#[derive(Debug)]
pub enum Request {
    /// A holdfast of this protocol version.
    Compatible(Hello),
    /// A holdfast of another version: a fallback, with the reason.
    Incompatible(String),
}

/// The old side: reads the first frame of a connection to the hand-off
/// socket (blocking, at most [`EXCHANGE_TIMEOUT`]). `Err` is a connection
/// that is no hand-off request: it is closed and nothing changes.
pub fn read_request(s: &UnixStream, version: u16) -> Result<Request, Error> {
    check_peer(s)?;
    s.set_read_timeout(Some(EXCHANGE_TIMEOUT))?;
    s.set_write_timeout(Some(EXCHANGE_TIMEOUT))?;
    match read_frame(s, version) {
        Ok((Message::Hello(h), _)) => Ok(Request::Compatible(h)),
        Ok((other, _)) => Err(Error::Decode(DecodeError::UnknownKind(other.kind() as u8))),
        Err(Error::Decode(e @ DecodeError::Version { .. })) => {
            Ok(Request::Incompatible(e.to_string()))
        }
        Err(e) => Err(e),
    }
}

/// The old side's fallback answer.
pub fn answer_fallback(s: &UnixStream, reason: &str, version: u16) -> Result<(), Error> {
    write_frame(
        s,
        &Message::Fallback(Fallback {
            reason: reason.to_string(),
        }),
        &[],
        version,
    )
}

/// Binds the hand-off socket in `dir` (which the caller holds: its lock)
/// owner-only, replacing one a stopped holdfast left. Removed when the
/// returned guard drops, if it is still the one bound here.
pub fn bind(dir: &Path) -> io::Result<(std::os::unix::net::UnixListener, Bound)> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let path = socket_path(dir);
    // The directory is ours (its lock is held): a socket here is stale.
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        use std::os::unix::fs::FileTypeExt;
        if m.file_type().is_socket() {
            std::fs::remove_file(&path)?;
        } else {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket", path.display()),
            ));
        }
    }
    // Bound under a private name, made owner-only, then moved into place:
    // never reachable with another mode.
    let staged = dir.join(format!(".{SOCKET_NAME}.{}", std::process::id()));
    let _ = std::fs::remove_file(&staged);
    let listener = std::os::unix::net::UnixListener::bind(&staged)?;
    let placed = std::fs::set_permissions(&staged, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| std::fs::rename(&staged, &path));
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&staged);
        return Err(e);
    }
    listener.set_nonblocking(true)?;
    let m = std::fs::symlink_metadata(&path)?;
    Ok((
        listener,
        Bound {
            path,
            id: (m.dev(), m.ino()),
        },
    ))
}

/// The hand-off socket as bound: removed when dropped.
#[derive(Debug)]
pub struct Bound {
    path: PathBuf,
    id: (u64, u64),
}

impl Drop for Bound {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = std::fs::symlink_metadata(&self.path)
            && (m.dev(), m.ino()) == self.id
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// What the main loop answers a request with.
#[derive(Debug)]
pub enum Answer {
    /// No hand-off: the daemon exits as on SIGTERM once the new side has
    /// confirmed it read this (and stays if it never does).
    Fallback(String),
}

/// What the hand-off socket tells the daemon's main loop.
#[derive(Debug)]
pub enum Event {
    /// A holdfast asks to take over: answer on `reply`.
    Request {
        request: Request,
        reply: tokio::sync::oneshot::Sender<Answer>,
    },
    /// The new side confirmed the answer: it waits for this process to
    /// stop. Carries the answer's reason.
    Confirmed(String),
    /// The new side went away before confirming: this process goes on as
    /// if nothing happened.
    Abandoned(String),
}

/// The old side's end of one exchange, after the request was read: the
/// answer written, the confirmation awaited.
fn finish(s: &UnixStream, answer: &Answer, version: u16) -> Result<(), Error> {
    match answer {
        Answer::Fallback(reason) => answer_fallback(s, reason, version)?,
    }
    match read_frame(s, version)? {
        (Message::Received, _) => Ok(()),
        (other, _) => Err(Error::Decode(DecodeError::UnknownKind(other.kind() as u8))),
    }
}

/// Serves the hand-off socket: each connection's exchange runs off the
/// runtime thread; its request goes to `to` (the daemon's main loop) with
/// a channel for the answer, and whether the new side confirmed the answer
/// follows as another event. One exchange at a time: a second holdfast
/// asking meanwhile waits in the socket's backlog. Connections that are
/// no requests are closed and logged.
pub async fn serve(
    listener: std::os::unix::net::UnixListener,
    version: u16,
    to: tokio::sync::mpsc::Sender<Event>,
) {
    let listener = match tokio::net::UnixListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            tracing::warn!("hand-off socket: {e}: no live hand-off to this holdfast");
            return;
        }
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let read = tokio::task::spawn_blocking(move || {
            let stream = stream.into_std()?;
            stream.set_nonblocking(false)?;
            let request = read_request(&stream, version)?;
            Ok::<_, Error>((request, stream))
        })
        .await;
        let (request, stream) = match read {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!("hand-off socket: a connection that is no hand-off request: {e}");
                continue;
            }
            Err(e) => {
                tracing::warn!("hand-off socket: {e}");
                continue;
            }
        };
        let (reply, answer) = tokio::sync::oneshot::channel();
        if to.send(Event::Request { request, reply }).await.is_err() {
            return;
        }
        let Ok(answer) = answer.await else {
            continue;
        };
        let done = tokio::task::spawn_blocking(move || {
            let reason = match &answer {
                Answer::Fallback(r) => r.clone(),
            };
            (finish(&stream, &answer, version), reason)
        })
        .await;
        let event = match done {
            Ok((Ok(()), reason)) => Event::Confirmed(reason),
            Ok((Err(e), _)) => Event::Abandoned(e.to_string()),
            Err(e) => Event::Abandoned(e.to_string()),
        };
        if to.send(event).await.is_err() {
            return;
        }
    }
}

/// An Adj-RIB-Out (a peer's table as sent) as it crosses
/// ([`wire::RibOut`]): routes that share one allocation of attributes
/// share one entry of its list.
pub fn rib_out(table: &RibTable) -> wire::RibOut {
    let mut attrs: Vec<crate::model::RouteAttrs> = Vec::new();
    let mut index: std::collections::HashMap<*const crate::model::RouteAttrs, u32> =
        std::collections::HashMap::new();
    let mut routes = Vec::with_capacity(table.len() * 24);
    let mut last: Option<(*const crate::model::RouteAttrs, u32)> = None;
    for (prefix, a) in table.iter() {
        let ptr = std::sync::Arc::as_ptr(a);
        // Routes come in runs sharing attributes: the map only at a run's
        // start.
        let i = match last {
            Some((p, i)) if p == ptr => i,
            _ => {
                let i = *index.entry(ptr).or_insert_with(|| {
                    attrs.push(a.as_ref().clone());
                    (attrs.len() - 1) as u32
                });
                last = Some((ptr, i));
                i
            }
        };
        push_hex(&mut routes, &i.to_be_bytes());
        match prefix {
            ipnet::IpNet::V4(n) => {
                push_hex(&mut routes, &[4, n.prefix_len()]);
                push_hex(&mut routes, &n.addr().octets());
            }
            ipnet::IpNet::V6(n) => {
                push_hex(&mut routes, &[6, n.prefix_len()]);
                push_hex(&mut routes, &n.addr().octets());
            }
        }
    }
    // Hex digits only: valid UTF-8.
    let routes = String::from_utf8(routes).unwrap_or_default();
    wire::RibOut { attrs, routes }
}

fn push_hex(out: &mut Vec<u8>, octets: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for o in octets {
        out.push(DIGITS[usize::from(o >> 4)]);
        out.push(DIGITS[usize::from(o & 0xf)]);
    }
}

/// `n` octets from the hex at `*at`, which moves past them.
fn take_hex<const N: usize>(hex: &[u8], at: &mut usize) -> Result<[u8; N], String> {
    let digits = hex
        .get(*at..*at + 2 * N)
        .ok_or_else(|| format!("Adj-RIB-Out: cut short at octet {}", *at / 2))?;
    let nibble = |d: u8| match d {
        b'0'..=b'9' => Ok(d - b'0'),
        b'a'..=b'f' => Ok(d - b'a' + 10),
        _ => Err(format!("Adj-RIB-Out: {:?} is not a hex digit", d as char)),
    };
    let mut out = [0u8; N];
    for (k, o) in out.iter_mut().enumerate() {
        *o = nibble(digits[2 * k])? << 4 | nibble(digits[2 * k + 1])?;
    }
    *at += 2 * N;
    Ok(out)
}

/// A peer's table: prefixes and their attributes.
pub type RibTable =
    crate::model::sorted::SortedMap<ipnet::IpNet, std::sync::Arc<crate::model::RouteAttrs>>;

/// The table of [`rib_out`] again, each set of attributes one allocation.
/// Anything malformed (odd hex, an unknown family or index, a prefix
/// length past the address) refuses the state: it is not taken over.
pub fn rib_table(rib: wire::RibOut) -> Result<RibTable, String> {
    let attrs: Vec<std::sync::Arc<crate::model::RouteAttrs>> =
        rib.attrs.into_iter().map(std::sync::Arc::new).collect();
    let hex = rib.routes.as_bytes();
    let mut at = 0;
    let mut entries = Vec::with_capacity(hex.len() / 20);
    while at < hex.len() {
        let i = u32::from_be_bytes(take_hex::<4>(hex, &mut at)?) as usize;
        let a = attrs
            .get(i)
            .ok_or_else(|| format!("Adj-RIB-Out: attributes {i} of {}", attrs.len()))?;
        let [family, len] = take_hex::<2>(hex, &mut at)?;
        let net =
            match family {
                4 => ipnet::Ipv4Net::new(take_hex::<4>(hex, &mut at)?.into(), len)
                    .map(ipnet::IpNet::V4),
                6 => ipnet::Ipv6Net::new(take_hex::<16>(hex, &mut at)?.into(), len)
                    .map(ipnet::IpNet::V6),
                f => return Err(format!("Adj-RIB-Out: family {f}")),
            }
            .map_err(|e| format!("Adj-RIB-Out: {e}"))?;
        entries.push((net, a.clone()));
    }
    Ok(crate::model::sorted::SortedMap::from_vec(entries))
}

#[cfg(test)]
mod tests;

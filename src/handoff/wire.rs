//! The hand-off protocol's frames, pure: a message to octets and back,
//! with no socket, clock or descriptor in sight.
//!
//! A frame is a fixed header and a JSON body. The header's layout is the
//! same in every version, so that two holdfasts of any versions can read
//! each other's version and refuse with a reason instead of misreading:
//!
//! ```text
//!  0      4        6      7       8         10         12             16
//!  +------+--------+------+-------+---------+----------+--------------+
//!  | HFHO | version| kind | flags | fds     | reserved | body length  |
//!  +------+--------+------+-------+---------+----------+--------------+
//!   magic   u16 BE   u8     u8 (0)  u16 BE    u16 (0)    u32 BE
//! ```
//!
//! `fds` is how many descriptors travel with the frame (`SCM_RIGHTS` on
//! its first octet): the receiver checks it against the descriptors that
//! arrived and against the body's own list of what each one is. The body
//! is bounded by [`MAX_BODY`]; nothing a peer sends makes the decoder
//! allocate more than that, or panic.

use serde::{Deserialize, Serialize};

/// The first four octets of every frame.
pub const MAGIC: [u8; 4] = *b"HFHO";
/// The header's length, in every version.
pub const HEADER_LEN: usize = 16;
/// This build's protocol version. A frame of another version is refused
/// (see [`DecodeError::Version`]): the two sides fall back to a restart.
pub const VERSION: u16 = 1;
/// The largest body accepted: the state of many sessions with large
/// Adj-RIBs-Out fits; a header announcing more is refused before anything
/// is read or allocated.
pub const MAX_BODY: u32 = 256 * 1024 * 1024;
/// The most descriptors one frame may carry (Linux's `SCM_MAX_FD`).
pub const MAX_FDS: u16 = 253;

/// A frame's kind (its header's third field).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// New → old: take over from you.
    Hello = 1,
    /// Old → new: no hand-off; I exit as on SIGTERM (graceful restart),
    /// take the state directory when I am gone.
    Fallback = 2,
    /// Old → new: the state and its descriptors.
    Transfer = 3,
    /// New → old: everything received; stop without a word.
    Received = 4,
}

impl Kind {
    fn from_u8(k: u8) -> Option<Kind> {
        Some(match k {
            1 => Kind::Hello,
            2 => Kind::Fallback,
            3 => Kind::Transfer,
            4 => Kind::Received,
            _ => return None,
        })
    }
}

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    pub kind: u8,
    /// Zero in version 1; a later version may give them a meaning.
    pub flags: u8,
    pub fds: u16,
    pub reserved: u16,
    pub body_len: u32,
}

/// New → old: the process that asks to take over.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub pid: u32,
    /// Its build (version and commit), for the old side's log.
    pub build: String,
}

/// Old → new: why there is no hand-off this time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fallback {
    pub reason: String,
}

/// What one handed descriptor is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "role", content = "peer")]
pub enum FdRole {
    /// The state directory's lock (flock is per open file: it stays held).
    Lock,
    /// The API's Unix socket in the state directory.
    LocalApi,
    /// `speaker.api`.
    Api,
    /// `speaker.metrics`.
    Metrics,
    /// `speaker.listen`.
    BgpListener,
    /// An established session's TCP connection (its MD5 key and TTL
    /// settings are on the socket).
    Session(String),
    /// A peer's BFD socket.
    Bfd(String),
}

/// A duration as milliseconds: a deadline crosses the hand-off as what is
/// left of it, never as an `Instant` (another process's clock origin).
pub type Millis = u64;

/// One established session at a message boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionState {
    pub peer: String,
    /// The peer's OPEN as received (the negotiated capabilities follow
    /// from it and ours).
    pub peer_open: Vec<u8>,
    /// Our OPEN as sent.
    pub local_open: Vec<u8>,
    /// Octets read but not yet parsed (a partial message).
    pub unparsed: Vec<u8>,
    /// RFC 4271 §4.4 / §10: what is left of the HoldTimer and of the
    /// KeepaliveTimer.
    pub hold_remaining: Millis,
    pub keepalive_remaining: Millis,
    /// The Adj-RIB-Out: what was sent, so the next process diffs against
    /// exactly what the peer has.
    pub adj_rib_out: RibOut,
    /// End-of-RIB went out on this session.
    pub end_of_rib_sent: bool,
}

/// An Adj-RIB-Out, compact: each set of attributes once, then the routes
/// in prefix order as hex, each route `attrs index (u32) · family (4 or
/// 6) · prefix length · address (4 or 16 octets)` — 100k routes in about
/// 2 MB, read without parsing addresses as text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RibOut {
    pub attrs: Vec<crate::model::RouteAttrs>,
    pub routes: String,
}

/// One BFD session (RFC 5880 §6.8.1's state variables).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BfdState {
    pub peer: String,
    pub local_discr: u32,
    pub remote_discr: u32,
    /// bfd.SessionState (RFC 5880 §4.1: 0 AdminDown … 3 Up).
    pub state: u8,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub remote_min_rx_us: u32,
    pub detect_mult: u8,
    /// What is left of the Detection Time (§6.8.4).
    pub detect_remaining: Millis,
    /// bfd.XmitAuthSeq (§6.7.3) for authenticated sessions.
    pub auth_seq: Option<u32>,
}

/// Old → new: everything the next process needs to go on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    pub build: String,
    /// One entry per descriptor, in the order they travel.
    pub fds: Vec<FdRole>,
    pub sessions: Vec<SessionState>,
    pub bfd: Vec<BfdState>,
}

/// A message with its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    Hello(Hello),
    Fallback(Fallback),
    Transfer(Transfer),
    Received,
}

impl Message {
    pub fn kind(&self) -> Kind {
        match self {
            Message::Hello(_) => Kind::Hello,
            Message::Fallback(_) => Kind::Fallback,
            Message::Transfer(_) => Kind::Transfer,
            Message::Received => Kind::Received,
        }
    }

    /// How many descriptors travel with it.
    pub fn fd_count(&self) -> usize {
        match self {
            Message::Transfer(t) => t.fds.len(),
            _ => 0,
        }
    }
}

/// Why a frame could not be built.
#[derive(Debug, PartialEq, Eq)]
pub enum EncodeError {
    TooLarge(usize),
    TooManyFds(usize),
}

impl std::fmt::Display for EncodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EncodeError::TooLarge(n) => {
                write!(
                    f,
                    "the state is {n} octets, more than the {MAX_BODY} a frame carries"
                )
            }
            EncodeError::TooManyFds(n) => {
                write!(
                    f,
                    "{n} descriptors, more than the {MAX_FDS} a frame carries"
                )
            }
        }
    }
}

/// Why a frame was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not a hand-off frame.
    Magic([u8; 4]),
    /// Another protocol version: the two processes cannot hand over.
    Version {
        theirs: u16,
        ours: u16,
    },
    /// Fewer octets than the header or its body length say.
    Truncated {
        need: usize,
        have: usize,
    },
    /// More octets than the header says.
    Trailing(usize),
    TooLarge(u32),
    UnknownKind(u8),
    /// Nonzero flags or reserved octets (what a later version may mean).
    Reserved,
    /// The header, the descriptors that arrived and the body's list of
    /// them disagree.
    FdCount {
        header: u16,
        received: usize,
        listed: usize,
    },
    Body(String),
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Magic(m) => write!(f, "not a hand-off frame (magic {m:02x?})"),
            DecodeError::Version { theirs, ours } => write!(
                f,
                "incompatible hand-off protocol: the other holdfast speaks version {theirs}, this one {ours}"
            ),
            DecodeError::Truncated { need, have } => {
                write!(f, "truncated frame: {have} of {need} octets")
            }
            DecodeError::Trailing(n) => write!(f, "{n} octets after the frame"),
            DecodeError::TooLarge(n) => {
                write!(f, "a body of {n} octets, more than the {MAX_BODY} allowed")
            }
            DecodeError::UnknownKind(k) => write!(f, "unknown frame kind {k}"),
            DecodeError::Reserved => write!(f, "reserved header fields are not zero"),
            DecodeError::FdCount {
                header,
                received,
                listed,
            } => write!(
                f,
                "descriptor count mismatch: the header says {header}, {received} arrived, the state lists {listed}"
            ),
            DecodeError::Body(e) => write!(f, "malformed body: {e}"),
        }
    }
}

/// The frame of `message` in `version` (the header, then the body). The
/// descriptors go beside it: [`Message::fd_count`] of them.
pub fn encode(message: &Message, version: u16) -> Result<Vec<u8>, EncodeError> {
    let body = match message {
        Message::Hello(h) => serde_json::to_vec(h),
        Message::Fallback(f) => serde_json::to_vec(f),
        Message::Transfer(t) => serde_json::to_vec(t),
        Message::Received => Ok(b"{}".to_vec()),
    }
    // Serialising plain structs of strings and integers cannot fail.
    .unwrap_or_default();
    let len = u32::try_from(body.len())
        .ok()
        .filter(|&n| n <= MAX_BODY)
        .ok_or(EncodeError::TooLarge(body.len()))?;
    let fds = u16::try_from(message.fd_count())
        .ok()
        .filter(|&n| n <= MAX_FDS)
        .ok_or(EncodeError::TooManyFds(message.fd_count()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&version.to_be_bytes());
    out.push(message.kind() as u8);
    out.push(0);
    out.extend_from_slice(&fds.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Reads a header. Its version is not judged here (the caller learns the
/// other side's version either way; [`decode_body`] refuses another one).
pub fn parse_header(bytes: &[u8]) -> Result<Header, DecodeError> {
    let Some(h) = bytes.get(..HEADER_LEN) else {
        return Err(DecodeError::Truncated {
            need: HEADER_LEN,
            have: bytes.len(),
        });
    };
    let magic = [h[0], h[1], h[2], h[3]];
    if magic != MAGIC {
        return Err(DecodeError::Magic(magic));
    }
    let header = Header {
        version: u16::from_be_bytes([h[4], h[5]]),
        kind: h[6],
        flags: h[7],
        fds: u16::from_be_bytes([h[8], h[9]]),
        reserved: u16::from_be_bytes([h[10], h[11]]),
        body_len: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
    };
    if header.body_len > MAX_BODY {
        return Err(DecodeError::TooLarge(header.body_len));
    }
    if header.fds > MAX_FDS {
        return Err(DecodeError::FdCount {
            header: header.fds,
            received: 0,
            listed: 0,
        });
    }
    Ok(header)
}

/// The message of a frame whose header is `header` and body `body`, with
/// `received` descriptors beside it, for a process speaking `ours`.
pub fn decode_body(
    header: &Header,
    body: &[u8],
    received: usize,
    ours: u16,
) -> Result<Message, DecodeError> {
    if header.version != ours {
        return Err(DecodeError::Version {
            theirs: header.version,
            ours,
        });
    }
    if header.flags != 0 || header.reserved != 0 {
        return Err(DecodeError::Reserved);
    }
    let kind = Kind::from_u8(header.kind).ok_or(DecodeError::UnknownKind(header.kind))?;
    let need = header.body_len as usize;
    if body.len() < need {
        return Err(DecodeError::Truncated {
            need: HEADER_LEN + need,
            have: HEADER_LEN + body.len(),
        });
    }
    if body.len() > need {
        return Err(DecodeError::Trailing(body.len() - need));
    }
    fn json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, DecodeError> {
        serde_json::from_slice(body).map_err(|e| DecodeError::Body(e.to_string()))
    }
    let message = match kind {
        Kind::Hello => Message::Hello(json(body)?),
        Kind::Fallback => Message::Fallback(json(body)?),
        Kind::Transfer => Message::Transfer(json(body)?),
        Kind::Received => {
            let _: serde_json::Map<String, serde_json::Value> = json(body)?;
            Message::Received
        }
    };
    let listed = message.fd_count();
    if usize::from(header.fds) != received || listed != received {
        return Err(DecodeError::FdCount {
            header: header.fds,
            received,
            listed,
        });
    }
    Ok(message)
}

/// A whole frame (header and body) with `received` descriptors beside it.
pub fn decode(frame: &[u8], received: usize, ours: u16) -> Result<Message, DecodeError> {
    let header = parse_header(frame)?;
    decode_body(&header, &frame[HEADER_LEN..], received, ours)
}

#[cfg(test)]
mod tests;

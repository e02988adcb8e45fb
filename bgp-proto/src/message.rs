//! The BGP message and its 19-octet header (RFC 4271 §4.1).
//!
//! ```text
//! +---------------------------------------------------------------+
//! |                                                               |
//! |                     Marker (16 octets, all ones)              |
//! |                                                               |
//! +-------------------------------+---------------+---------------+
//! |          Length (2)           |   Type (1)    |
//! +-------------------------------+---------------+
//! ```

use std::fmt;

use crate::consts::{HEADER_LEN, MARKER, msg_type};
use crate::context::Context;
use crate::error::Error;
use crate::notification::Notification;
use crate::open::Open;
use crate::route_refresh::RouteRefresh;
use crate::update::Update;

/// A BGP message, by the Type field of its header (RFC 4271 §4.1).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Message {
    /// 1 — OPEN (RFC 4271 §4.2).
    Open(Open),
    /// 2 — UPDATE (RFC 4271 §4.3).
    Update(Update),
    /// 3 — NOTIFICATION (RFC 4271 §4.5).
    Notification(Notification),
    /// 4 — KEEPALIVE: the header alone (RFC 4271 §4.4).
    Keepalive,
    /// 5 — ROUTE-REFRESH (RFC 2918 §3, RFC 7313 §3.2).
    RouteRefresh(RouteRefresh),
}

/// Why a message could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncodeError {
    /// The message would exceed the negotiated maximum (RFC 4271 §4.1,
    /// RFC 8654 §4): it is never sent.
    TooLong {
        /// The encoded length, header included, in octets.
        len: usize,
        /// The maximum: 4096, or 65535 with extended messages.
        max: usize,
    },
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::TooLong { len, max } => {
                write!(f, "message of {len} octets exceeds the maximum of {max}")
            }
        }
    }
}

impl std::error::Error for EncodeError {}

/// RFC 4271 §6.1 minimum lengths per type (header included).
fn min_len(ty: u8) -> usize {
    match ty {
        msg_type::OPEN => 29,
        msg_type::UPDATE => 23,
        msg_type::NOTIFICATION => 21,
        msg_type::KEEPALIVE => 19,
        // RFC 2918 §3: AFI (2) + Reserved/Subtype (1) + SAFI (1).
        msg_type::ROUTE_REFRESH => 23,
        _ => HEADER_LEN,
    }
}

/// Checks the header of the bytes received so far, before the body is
/// awaited. Returns `Ok(Some(length))` once the whole header is in and
/// valid, `Ok(None)` while more header octets are needed, and an error as
/// soon as the octets in hand are wrong — a marker octet that is not 0xff,
/// or a length outside 19..=max (RFC 4271 §6.1), is answered at once rather
/// than waited on.
pub fn check_header(buf: &[u8], max_len: usize) -> Result<Option<usize>, Error> {
    // Once all 16 octets are in, one fixed-size comparison (this runs for
    // every message received); before that, the octets in hand.
    let marker_ok = match buf.first_chunk::<16>() {
        Some(marker) => *marker == MARKER,
        None => buf.iter().all(|&b| b == 0xff),
    };
    if !marker_ok {
        // RFC 4271 §6.1: "If the Marker field of the message header is not
        // as expected, then a synchronization error has occurred and the
        // Error Subcode MUST be set to Connection Not Synchronized."
        return Err(Error::ConnectionNotSynchronized);
    }
    if buf.len() < 18 {
        return Ok(None);
    }
    let length = u16::from_be_bytes([buf[16], buf[17]]);
    let len = usize::from(length);
    // RFC 4271 §6.1: "if the Length field of the message header is less
    // than 19 or greater than 4096 [RFC 8654: the negotiated maximum] ...
    // the Error Subcode MUST be set to Bad Message Length. The Data field
    // MUST contain the erroneous Length field."
    if len < HEADER_LEN || len > max_len {
        return Err(Error::BadMessageLength { length });
    }
    let Some(&ty) = buf.get(18) else {
        return Ok(None);
    };
    if !(msg_type::OPEN..=msg_type::ROUTE_REFRESH).contains(&ty) {
        // RFC 4271 §6.1: "If the Type field of the message header is not
        // recognized, then the Error Subcode MUST be set to Bad Message
        // Type. The Data field MUST contain the erroneous Type field."
        return Err(Error::BadMessageType { message_type: ty });
    }
    // RFC 4271 §6.1: per-type minimum lengths; a KEEPALIVE is exactly 19.
    if len < min_len(ty) || (ty == msg_type::KEEPALIVE && len != HEADER_LEN) {
        return Err(Error::BadMessageLength { length });
    }
    Ok(Some(len))
}

impl Message {
    /// Decodes one whole message (header included) in the session's
    /// context.
    pub fn decode(msg: &[u8], ctx: &Context) -> Result<Message, Error> {
        let len = match check_header(msg, ctx.max_message_len)? {
            Some(len) => len,
            None => {
                return Err(Error::BadMessageLength {
                    length: msg.len() as u16,
                });
            }
        };
        if len != msg.len() {
            return Err(Error::BadMessageLength { length: len as u16 });
        }
        let body = &msg[HEADER_LEN..];
        Ok(match msg[18] {
            msg_type::OPEN => Message::Open(Open::decode(body)?),
            msg_type::UPDATE => Message::Update(Update::decode(body, ctx)?),
            msg_type::NOTIFICATION => Message::Notification(Notification::decode(body)?),
            msg_type::KEEPALIVE => Message::Keepalive,
            _ => Message::RouteRefresh(RouteRefresh::decode(body, msg)?),
        })
    }

    /// The Type field of the header.
    pub fn message_type(&self) -> u8 {
        match self {
            Message::Open(_) => msg_type::OPEN,
            Message::Update(_) => msg_type::UPDATE,
            Message::Notification(_) => msg_type::NOTIFICATION,
            Message::Keepalive => msg_type::KEEPALIVE,
            Message::RouteRefresh(_) => msg_type::ROUTE_REFRESH,
        }
    }

    /// The message type's name, as the RFCs spell it (`ROUTE-REFRESH`).
    pub fn name(&self) -> &'static str {
        match self {
            Message::Open(_) => "OPEN",
            Message::Update(_) => "UPDATE",
            Message::Notification(_) => "NOTIFICATION",
            Message::Keepalive => "KEEPALIVE",
            Message::RouteRefresh(_) => "ROUTE-REFRESH",
        }
    }

    /// Appends the encoded message to `out`. Nothing is appended when the
    /// message would exceed `ctx.max_message_len`.
    pub fn encode_into(&self, ctx: &Context, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        out.extend_from_slice(&MARKER);
        out.extend_from_slice(&[0, 0, self.message_type()]);
        match self {
            Message::Open(m) => m.encode_body(out),
            Message::Update(m) => m.encode_body(ctx, out),
            Message::Notification(m) => m.encode_body(out),
            Message::Keepalive => {}
            Message::RouteRefresh(m) => m.encode_body(out),
        }
        let len = out.len() - start;
        if len > ctx.max_message_len {
            out.truncate(start);
            return Err(EncodeError::TooLong {
                len,
                max: ctx.max_message_len,
            });
        }
        out[start + 16..start + 18].copy_from_slice(&(len as u16).to_be_bytes());
        Ok(())
    }

    /// The encoded message, header included, as [`Message::encode_into`]
    /// writes it.
    pub fn encode(&self, ctx: &Context) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(64);
        self.encode_into(ctx, &mut out)?;
        Ok(out)
    }
}

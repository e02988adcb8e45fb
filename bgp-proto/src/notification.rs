//! NOTIFICATION (RFC 4271 §4.5), with every registered code and subcode
//! decoded to words, and the RFC 9003 shutdown communication.
//!
//! ```text
//! +---------------+---------------+------------------------------+
//! | Error code    | Error subcode |   Data (variable)            |
//! +---------------+---------------+------------------------------+
//! ```

use std::fmt;

use crate::consts::notify::{self, cease};
use crate::error::Error;
use crate::wire;

/// A NOTIFICATION message (RFC 4271 §4.5): the error that closes the
/// connection.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Notification {
    /// Error Code (see [`crate::consts::notify`]).
    pub code: u8,
    /// Error Subcode; 0 (Unspecific) when none applies.
    pub subcode: u8,
    /// Data: what the error concerns, laid out per code (RFC 4271 §6).
    pub data: Vec<u8>,
}

/// The header (RFC 4271 §4.1) and the error code and subcode (§4.5): what
/// a NOTIFICATION takes besides its data.
pub const HEADER_AND_CODES: usize = crate::consts::HEADER_LEN + 2;

/// RFC 9003 §2: the shutdown communication is at most 255 octets of UTF-8.
pub const MAX_SHUTDOWN_MESSAGE_LEN: usize = 255;

impl Notification {
    /// The NOTIFICATION `code`/`subcode` with `data`.
    pub fn new(code: u8, subcode: u8, data: Vec<u8>) -> Self {
        Notification {
            code,
            subcode,
            data,
        }
    }

    /// Cease with an RFC 9003 shutdown communication: subcode 2
    /// (Administrative Shutdown) or 4 (Administrative Reset). The message is
    /// cut at a UTF-8 boundary to fit 255 octets.
    pub fn cease_with_message(subcode: u8, message: &str) -> Self {
        let mut end = message.len().min(MAX_SHUTDOWN_MESSAGE_LEN);
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        let text = &message.as_bytes()[..end];
        let mut data = Vec::with_capacity(1 + text.len());
        data.push(text.len() as u8);
        data.extend_from_slice(text);
        Notification::new(notify::CEASE, subcode, data)
    }

    /// Cease (RFC 4271 §6.7) with the RFC 4486 `subcode` and no data.
    pub fn cease(subcode: u8) -> Self {
        Notification::new(notify::CEASE, subcode, Vec::new())
    }

    /// RFC 9003 §2: for Cease/Administrative Shutdown and Administrative
    /// Reset, the data may hold a length octet and a UTF-8 message. Returns
    /// it when the data is so formed; a malformed one is not an error ("the
    /// receiver ... MUST NOT treat it as an error" beyond logging), so this
    /// just returns `None`.
    pub fn shutdown_message(&self) -> Option<String> {
        if self.code != notify::CEASE
            || !matches!(
                self.subcode,
                cease::ADMINISTRATIVE_SHUTDOWN | cease::ADMINISTRATIVE_RESET
            )
        {
            return None;
        }
        let (&len, rest) = self.data.split_first()?;
        let text = rest.get(..usize::from(len))?;
        String::from_utf8(text.to_vec()).ok()
    }

    /// Cease/Hard Reset (RFC 8538 §3) around `inner`: the data is the
    /// encapsulated NOTIFICATION's error code, subcode and data.
    pub fn hard_reset(inner: &Notification) -> Self {
        let mut data = Vec::with_capacity(inner.data.len() + 2);
        data.push(inner.code);
        data.push(inner.subcode);
        data.extend_from_slice(&inner.data);
        Notification::new(notify::CEASE, cease::HARD_RESET, data)
    }

    /// The NOTIFICATION a Cease/Hard Reset carries (RFC 8538 §3), if this
    /// is one with at least a code and subcode inside.
    pub fn encapsulated(&self) -> Option<Notification> {
        if !self.is_hard_reset() || self.data.len() < 2 {
            return None;
        }
        Some(Notification::new(
            self.data[0],
            self.data[1],
            self.data[2..].to_vec(),
        ))
    }

    /// "Cease / Administrative Shutdown: \"maintenance\"", for logs.
    pub fn describe(&self) -> String {
        let words = describe_code(self.code, self.subcode);
        if let Some(inner) = self.encapsulated() {
            return format!("{words} ({})", inner.describe());
        }
        if let Some(msg) = self.shutdown_message() {
            return format!("{words}: \"{}\"", msg.escape_debug());
        }
        if self.data.is_empty() {
            words
        } else {
            let hex: String = self.data.iter().map(|b| format!("{b:02x}")).collect();
            format!("{words} (data {hex})")
        }
    }

    /// True when the NOTIFICATION is a Cease/Hard Reset (RFC 8538 §3), or
    /// any NOTIFICATION the receiver must treat as one: with the N bit
    /// negotiated, every NOTIFICATION other than Cease/Hard Reset keeps
    /// graceful restart in force.
    pub fn is_hard_reset(&self) -> bool {
        self.code == notify::CEASE && self.subcode == cease::HARD_RESET
    }

    /// This NOTIFICATION with its data cut so that the whole message fits
    /// `max_message_len` octets (4096, or 65535 with RFC 8654 extended
    /// messages). RFC 4271 §4.5 sizes the data by the message length, and
    /// the NOTIFICATION must go out whatever it reports: an error about a
    /// message near the limit (RFC 7313 §5: an oversized BoRR is returned
    /// as the data of 7/1; RFC 4271 §6.3: a faulty attribute as the data
    /// of 3/x) would otherwise not fit. The data's first octets are kept:
    /// they say most about the error.
    pub fn fit(mut self, max_message_len: usize) -> Self {
        let room = max_message_len.saturating_sub(HEADER_AND_CODES);
        self.data.truncate(room);
        self
    }

    pub(crate) fn decode(body: &[u8]) -> Result<Self, Error> {
        let parse = |i| -> wire::Res<'_, (u8, u8)> {
            let (i, code) = wire::u8(i)?;
            let (i, subcode) = wire::u8(i)?;
            Ok((i, (code, subcode)))
        };
        // The header check guarantees ≥ 2 octets (RFC 4271 §6.1 minimum 21).
        let (data, (code, subcode)) = parse(body).map_err(|_| Error::BadMessageLength {
            length: (body.len() + crate::consts::HEADER_LEN) as u16,
        })?;
        Ok(Notification::new(code, subcode, data.to_vec()))
    }

    pub(crate) fn encode_body(&self, out: &mut Vec<u8>) {
        out.push(self.code);
        out.push(self.subcode);
        out.extend_from_slice(&self.data);
    }
}

impl fmt::Display for Notification {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The name of an error code (IANA "BGP Error (Notification) Codes").
pub fn code_name(code: u8) -> &'static str {
    match code {
        notify::MESSAGE_HEADER_ERROR => "Message Header Error",
        notify::OPEN_MESSAGE_ERROR => "OPEN Message Error",
        notify::UPDATE_MESSAGE_ERROR => "UPDATE Message Error",
        notify::HOLD_TIMER_EXPIRED => "Hold Timer Expired",
        notify::FSM_ERROR => "Finite State Machine Error",
        notify::CEASE => "Cease",
        notify::ROUTE_REFRESH_MESSAGE_ERROR => "ROUTE-REFRESH Message Error",
        notify::SEND_HOLD_TIMER_EXPIRED => "Send Hold Timer Expired",
        _ => "Unknown Error Code",
    }
}

/// The name of a subcode within its code (IANA "BGP Error Subcodes"), or
/// `None` for an unregistered one.
pub fn subcode_name(code: u8, subcode: u8) -> Option<&'static str> {
    Some(match (code, subcode) {
        (notify::MESSAGE_HEADER_ERROR, 1) => "Connection Not Synchronized",
        (notify::MESSAGE_HEADER_ERROR, 2) => "Bad Message Length",
        (notify::MESSAGE_HEADER_ERROR, 3) => "Bad Message Type",
        (notify::OPEN_MESSAGE_ERROR, 0) => "Unspecific",
        (notify::OPEN_MESSAGE_ERROR, 1) => "Unsupported Version Number",
        (notify::OPEN_MESSAGE_ERROR, 2) => "Bad Peer AS",
        (notify::OPEN_MESSAGE_ERROR, 3) => "Bad BGP Identifier",
        (notify::OPEN_MESSAGE_ERROR, 4) => "Unsupported Optional Parameter",
        (notify::OPEN_MESSAGE_ERROR, 5) => "Authentication Failure (deprecated)",
        (notify::OPEN_MESSAGE_ERROR, 6) => "Unacceptable Hold Time",
        (notify::OPEN_MESSAGE_ERROR, 7) => "Unsupported Capability",
        (notify::OPEN_MESSAGE_ERROR, 8..=10) => "Deprecated",
        (notify::OPEN_MESSAGE_ERROR, 11) => "Role Mismatch",
        (notify::UPDATE_MESSAGE_ERROR, 0) => "Unspecific",
        (notify::UPDATE_MESSAGE_ERROR, 1) => "Malformed Attribute List",
        (notify::UPDATE_MESSAGE_ERROR, 2) => "Unrecognized Well-known Attribute",
        (notify::UPDATE_MESSAGE_ERROR, 3) => "Missing Well-known Attribute",
        (notify::UPDATE_MESSAGE_ERROR, 4) => "Attribute Flags Error",
        (notify::UPDATE_MESSAGE_ERROR, 5) => "Attribute Length Error",
        (notify::UPDATE_MESSAGE_ERROR, 6) => "Invalid ORIGIN Attribute",
        (notify::UPDATE_MESSAGE_ERROR, 7) => "AS Routing Loop (deprecated)",
        (notify::UPDATE_MESSAGE_ERROR, 8) => "Invalid NEXT_HOP Attribute",
        (notify::UPDATE_MESSAGE_ERROR, 9) => "Optional Attribute Error",
        (notify::UPDATE_MESSAGE_ERROR, 10) => "Invalid Network Field",
        (notify::UPDATE_MESSAGE_ERROR, 11) => "Malformed AS_PATH",
        (notify::HOLD_TIMER_EXPIRED, 0) => "Unspecific",
        (notify::FSM_ERROR, 0) => "Unspecified Error",
        (notify::FSM_ERROR, 1) => "Receive Unexpected Message in OpenSent State",
        (notify::FSM_ERROR, 2) => "Receive Unexpected Message in OpenConfirm State",
        (notify::FSM_ERROR, 3) => "Receive Unexpected Message in Established State",
        (notify::CEASE, 0) => "Unspecific",
        (notify::CEASE, 1) => "Maximum Number of Prefixes Reached",
        (notify::CEASE, 2) => "Administrative Shutdown",
        (notify::CEASE, 3) => "Peer De-configured",
        (notify::CEASE, 4) => "Administrative Reset",
        (notify::CEASE, 5) => "Connection Rejected",
        (notify::CEASE, 6) => "Other Configuration Change",
        (notify::CEASE, 7) => "Connection Collision Resolution",
        (notify::CEASE, 8) => "Out of Resources",
        (notify::CEASE, 9) => "Hard Reset",
        (notify::CEASE, 10) => "BFD Down",
        (notify::ROUTE_REFRESH_MESSAGE_ERROR, 0) => "Reserved",
        (notify::ROUTE_REFRESH_MESSAGE_ERROR, 1) => "Invalid Message Length",
        (notify::SEND_HOLD_TIMER_EXPIRED, 0) => "Unspecific",
        _ => return None,
    })
}

/// "Cease / Administrative Shutdown" — code and subcode in words.
pub fn describe_code(code: u8, subcode: u8) -> String {
    match subcode_name(code, subcode) {
        Some(sub) => format!("{} / {}", code_name(code), sub),
        None => format!("{} / subcode {}", code_name(code), subcode),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutdown_communication_round_trip() {
        let n = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "node-1 draining");
        assert_eq!(n.data[0], 15);
        assert_eq!(n.shutdown_message().as_deref(), Some("node-1 draining"));
        assert_eq!(
            n.describe(),
            "Cease / Administrative Shutdown: \"node-1 draining\""
        );
    }

    #[test]
    fn shutdown_message_is_cut_at_a_char_boundary() {
        let long = "é".repeat(200); // 400 octets
        let n = Notification::cease_with_message(cease::ADMINISTRATIVE_RESET, &long);
        assert_eq!(n.data[0], 254);
        assert_eq!(n.shutdown_message().unwrap().chars().count(), 127);
    }

    #[test]
    fn malformed_shutdown_message_is_just_data() {
        let n = Notification::new(6, 2, vec![9, b'a']);
        assert_eq!(n.shutdown_message(), None);
        assert_eq!(n.describe(), "Cease / Administrative Shutdown (data 0961)");
    }

    #[test]
    fn hard_reset_encapsulates_code_subcode_and_data() {
        let inner = Notification::cease_with_message(cease::ADMINISTRATIVE_SHUTDOWN, "bye");
        let hr = Notification::hard_reset(&inner);
        assert_eq!((hr.code, hr.subcode), (6, 9));
        assert_eq!(hr.data, vec![6, 2, 3, b'b', b'y', b'e']);
        assert_eq!(hr.encapsulated(), Some(inner));
        assert_eq!(
            hr.describe(),
            "Cease / Hard Reset (Cease / Administrative Shutdown: \"bye\")"
        );
        assert_eq!(Notification::new(6, 9, vec![6]).encapsulated(), None);
    }

    #[test]
    fn fit_cuts_the_data_to_the_message_size() {
        use crate::context::Context;
        use crate::message::Message;
        // A 7/1 carrying a 5000-octet BoRR (RFC 7313 §5): 21 + 5000 octets
        // would not fit 4096; cut, it fills the message exactly.
        let borr: Vec<u8> = (0..5000u32).map(|i| i as u8).collect();
        let n = Notification::new(7, 1, borr.clone()).fit(4096);
        assert_eq!(n.data.len(), 4096 - 21);
        assert_eq!(n.data[..], borr[..4096 - 21]);
        let bytes = Message::Notification(n)
            .encode(&Context::default())
            .unwrap();
        assert_eq!(bytes.len(), 4096);
        assert_eq!(&bytes[16..21], &[0x10, 0x00, 3, 7, 1]);
        // With extended messages (RFC 8654) up to 65535 octets fit.
        let big = vec![0xab; 70_000];
        assert_eq!(
            Notification::new(3, 2, big).fit(65535).data.len(),
            65535 - 21
        );
        // Data that fits is left alone.
        let small = Notification::new(3, 2, vec![1, 2, 3]);
        assert_eq!(small.clone().fit(4096), small);
        assert_eq!(
            Notification::new(6, 0, vec![1]).fit(21).data,
            Vec::<u8>::new()
        );
    }

    #[test]
    fn every_registered_code_has_words() {
        assert_eq!(
            describe_code(1, 2),
            "Message Header Error / Bad Message Length"
        );
        assert_eq!(describe_code(2, 11), "OPEN Message Error / Role Mismatch");
        assert_eq!(
            describe_code(3, 11),
            "UPDATE Message Error / Malformed AS_PATH"
        );
        assert_eq!(describe_code(6, 9), "Cease / Hard Reset");
        assert_eq!(
            describe_code(7, 1),
            "ROUTE-REFRESH Message Error / Invalid Message Length"
        );
        assert_eq!(describe_code(6, 99), "Cease / subcode 99");
    }
}

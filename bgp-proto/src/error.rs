//! The codec's one error type. Every variant maps onto a NOTIFICATION
//! code, subcode and data (RFC 4271 §4.5, §6), and every problem found in a
//! path attribute carries the RFC 7606 approach that handles it.

use std::fmt;

use crate::consts::notify;
use crate::notification::Notification;

/// RFC 7606 §2 error-handling approaches, weakest first, so that `max`
/// implements RFC 7606 §3 (d): "the approach with the strongest action MUST
/// be used".
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    /// "attribute discard": drop the attribute, keep the routes.
    AttributeDiscard,
    /// "treat-as-withdraw": the UPDATE's routes are treated as withdrawn.
    TreatAsWithdraw,
    /// "AFI/SAFI disable" (RFC 4760 §7): ignore this family for the rest of
    /// the session.
    AfiSafiDisable,
    /// "session reset": send the NOTIFICATION and close the session.
    SessionReset,
}

impl Action {
    /// The approach's name, as RFC 7606 §2 writes it with hyphens (the
    /// `Display` form).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::AttributeDiscard => "attribute-discard",
            Action::TreatAsWithdraw => "treat-as-withdraw",
            Action::AfiSafiDisable => "afi-safi-disable",
            Action::SessionReset => "session-reset",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A decoding or validation error, named after the NOTIFICATION it causes.
///
/// Variants that RFC 4271 §6 gives data carry that data (the offending
/// length, type, attribute or message), so the NOTIFICATION we send tells the
/// peer exactly what we objected to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// 1/1 — the marker is not all ones (RFC 4271 §6.1).
    ConnectionNotSynchronized,
    /// 1/2 — data: the erroneous Length field (RFC 4271 §6.1).
    BadMessageLength {
        /// The Length field as received.
        length: u16,
    },
    /// 1/3 — data: the erroneous Type field (RFC 4271 §6.1).
    BadMessageType {
        /// The Type field as received.
        message_type: u8,
    },

    /// 2/1 — data: the largest supported version, 2 octets (RFC 4271 §6.2).
    UnsupportedVersionNumber {
        /// The Version the peer's OPEN bid.
        version: u8,
    },
    /// 2/2 (RFC 4271 §6.2, RFC 6793 §4.1).
    BadPeerAs {
        /// The AS the peer's OPEN announced.
        asn: u32,
    },
    /// 2/3 (RFC 4271 §6.2, RFC 6286).
    BadBgpIdentifier {
        /// The BGP Identifier the peer's OPEN carried.
        id: u32,
    },
    /// 2/4 (RFC 4271 §6.2).
    UnsupportedOptionalParameter {
        /// The Parameter Type we do not know.
        param_type: u8,
    },
    /// 2/6 (RFC 4271 §6.2).
    UnacceptableHoldTime {
        /// The Hold Time the peer proposed, in seconds.
        hold_time: u16,
    },
    /// 2/7 — data: the capabilities we do not support (RFC 5492 §5).
    UnsupportedCapability {
        /// The capability TLVs (code, length, value), encoded back to back.
        capabilities: Vec<u8>,
    },
    /// 2/11 (RFC 9234 §4.2).
    RoleMismatch,
    /// 2/0 — "If one of the Optional Parameters in the OPEN message is
    /// recognized, but is malformed, then the Error Subcode MUST be set to 0
    /// (Unspecific)" (RFC 4271 §6.2). Data: the offending bytes.
    MalformedOpen {
        /// What is wrong, for the log.
        reason: &'static str,
        /// The malformed optional parameter or capability.
        data: Vec<u8>,
    },

    /// 3/1 (RFC 4271 §6.3, RFC 7606 §3 (c)).
    MalformedAttributeList {
        /// What is wrong, for the log.
        reason: &'static str,
    },
    /// 3/2 — data: the unrecognized attribute (RFC 4271 §6.3).
    UnrecognizedWellKnownAttribute {
        /// The attribute: flags, type, length and value as received.
        attribute: Vec<u8>,
    },
    /// 3/3 — data: the missing attribute's type code (RFC 4271 §6.3).
    MissingWellKnownAttribute {
        /// The type code of the missing attribute.
        type_code: u8,
    },
    /// 3/4 — data: the erroneous attribute (RFC 4271 §6.3).
    AttributeFlagsError {
        /// The attribute: flags, type, length and value as received.
        attribute: Vec<u8>,
    },
    /// 3/5 — data: the erroneous attribute (RFC 4271 §6.3).
    AttributeLengthError {
        /// The attribute: flags, type, length and value as received (when
        /// its length runs past the list, the rest of the list from it).
        attribute: Vec<u8>,
    },
    /// 3/6 — data: the erroneous attribute (RFC 4271 §6.3).
    InvalidOriginAttribute {
        /// The attribute: flags, type, length and value as received.
        attribute: Vec<u8>,
    },
    /// 3/8 — data: the erroneous attribute (RFC 4271 §6.3).
    InvalidNextHopAttribute {
        /// The attribute: flags, type, length and value as received.
        attribute: Vec<u8>,
    },
    /// 3/9 — data: the erroneous attribute (RFC 4271 §6.3, RFC 4760 §7).
    OptionalAttributeError {
        /// The attribute: flags, type, length and value as received.
        attribute: Vec<u8>,
        /// What is wrong, for the log.
        reason: &'static str,
    },
    /// 3/10 (RFC 4271 §6.3, RFC 7606 §5.3).
    InvalidNetworkField {
        /// What is wrong, for the log.
        reason: &'static str,
    },
    /// 3/11 (RFC 4271 §6.3).
    MalformedAsPath {
        /// What is wrong, for the log.
        reason: &'static str,
    },

    /// 7/1 — data: the whole ROUTE-REFRESH message (RFC 7313 §5).
    RouteRefreshInvalidLength {
        /// The ROUTE-REFRESH message as received, header included.
        message: Vec<u8>,
    },
}

impl Error {
    /// The NOTIFICATION Error Code (RFC 4271 §4.5).
    pub fn code(&self) -> u8 {
        use Error::*;
        match self {
            ConnectionNotSynchronized | BadMessageLength { .. } | BadMessageType { .. } => {
                notify::MESSAGE_HEADER_ERROR
            }
            UnsupportedVersionNumber { .. }
            | BadPeerAs { .. }
            | BadBgpIdentifier { .. }
            | UnsupportedOptionalParameter { .. }
            | UnacceptableHoldTime { .. }
            | UnsupportedCapability { .. }
            | RoleMismatch
            | MalformedOpen { .. } => notify::OPEN_MESSAGE_ERROR,
            MalformedAttributeList { .. }
            | UnrecognizedWellKnownAttribute { .. }
            | MissingWellKnownAttribute { .. }
            | AttributeFlagsError { .. }
            | AttributeLengthError { .. }
            | InvalidOriginAttribute { .. }
            | InvalidNextHopAttribute { .. }
            | OptionalAttributeError { .. }
            | InvalidNetworkField { .. }
            | MalformedAsPath { .. } => notify::UPDATE_MESSAGE_ERROR,
            RouteRefreshInvalidLength { .. } => notify::ROUTE_REFRESH_MESSAGE_ERROR,
        }
    }

    /// The NOTIFICATION Error Subcode (RFC 4271 §4.5, §6).
    pub fn subcode(&self) -> u8 {
        use Error::*;
        use notify::{header as h, open as o, update as u};
        match self {
            ConnectionNotSynchronized => h::CONNECTION_NOT_SYNCHRONIZED,
            BadMessageLength { .. } => h::BAD_MESSAGE_LENGTH,
            BadMessageType { .. } => h::BAD_MESSAGE_TYPE,
            UnsupportedVersionNumber { .. } => o::UNSUPPORTED_VERSION_NUMBER,
            BadPeerAs { .. } => o::BAD_PEER_AS,
            BadBgpIdentifier { .. } => o::BAD_BGP_IDENTIFIER,
            UnsupportedOptionalParameter { .. } => o::UNSUPPORTED_OPTIONAL_PARAMETER,
            UnacceptableHoldTime { .. } => o::UNACCEPTABLE_HOLD_TIME,
            UnsupportedCapability { .. } => o::UNSUPPORTED_CAPABILITY,
            RoleMismatch => o::ROLE_MISMATCH,
            MalformedOpen { .. } => o::UNSPECIFIC,
            MalformedAttributeList { .. } => u::MALFORMED_ATTRIBUTE_LIST,
            UnrecognizedWellKnownAttribute { .. } => u::UNRECOGNIZED_WELL_KNOWN_ATTRIBUTE,
            MissingWellKnownAttribute { .. } => u::MISSING_WELL_KNOWN_ATTRIBUTE,
            AttributeFlagsError { .. } => u::ATTRIBUTE_FLAGS_ERROR,
            AttributeLengthError { .. } => u::ATTRIBUTE_LENGTH_ERROR,
            InvalidOriginAttribute { .. } => u::INVALID_ORIGIN_ATTRIBUTE,
            InvalidNextHopAttribute { .. } => u::INVALID_NEXT_HOP_ATTRIBUTE,
            OptionalAttributeError { .. } => u::OPTIONAL_ATTRIBUTE_ERROR,
            InvalidNetworkField { .. } => u::INVALID_NETWORK_FIELD,
            MalformedAsPath { .. } => u::MALFORMED_AS_PATH,
            RouteRefreshInvalidLength { .. } => notify::route_refresh::INVALID_MESSAGE_LENGTH,
        }
    }

    /// The NOTIFICATION's Data field, as RFC 4271 §6 prescribes for each case.
    pub fn data(&self) -> Vec<u8> {
        use Error::*;
        match self {
            BadMessageLength { length } => length.to_be_bytes().to_vec(),
            BadMessageType { message_type } => vec![*message_type],
            // "the Data field is a 2-octet unsigned integer, which indicates
            // the largest, locally-supported version number" (§6.2).
            UnsupportedVersionNumber { .. } => {
                u16::from(crate::consts::BGP_VERSION).to_be_bytes().to_vec()
            }
            UnsupportedCapability { capabilities } => capabilities.clone(),
            MalformedOpen { data, .. } => data.clone(),
            UnrecognizedWellKnownAttribute { attribute }
            | AttributeFlagsError { attribute }
            | AttributeLengthError { attribute }
            | InvalidOriginAttribute { attribute }
            | InvalidNextHopAttribute { attribute }
            | OptionalAttributeError { attribute, .. } => attribute.clone(),
            MissingWellKnownAttribute { type_code } => vec![*type_code],
            RouteRefreshInvalidLength { message } => message.clone(),
            ConnectionNotSynchronized
            | BadPeerAs { .. }
            | BadBgpIdentifier { .. }
            | UnsupportedOptionalParameter { .. }
            | UnacceptableHoldTime { .. }
            | RoleMismatch
            | MalformedAttributeList { .. }
            | InvalidNetworkField { .. }
            | MalformedAsPath { .. } => Vec::new(),
        }
    }

    /// The NOTIFICATION this error causes when it resets the session.
    pub fn to_notification(&self) -> Notification {
        Notification {
            code: self.code(),
            subcode: self.subcode(),
            data: self.data(),
        }
    }

    /// True for errors in the 19-octet header (RFC 4271 §6.1).
    pub fn is_header_error(&self) -> bool {
        self.code() == notify::MESSAGE_HEADER_ERROR
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Error::*;
        let words = crate::notification::describe_code(self.code(), self.subcode());
        match self {
            BadMessageLength { length } => write!(f, "{words} (length {length})"),
            BadMessageType { message_type } => write!(f, "{words} (type {message_type})"),
            UnsupportedVersionNumber { version } => write!(f, "{words} (version {version})"),
            BadPeerAs { asn } => write!(f, "{words} (AS {asn})"),
            BadBgpIdentifier { id } => {
                write!(f, "{words} ({})", std::net::Ipv4Addr::from(*id))
            }
            UnsupportedOptionalParameter { param_type } => {
                write!(f, "{words} (type {param_type})")
            }
            UnacceptableHoldTime { hold_time } => write!(f, "{words} ({hold_time}s)"),
            MalformedOpen { reason, .. }
            | MalformedAttributeList { reason }
            | OptionalAttributeError { reason, .. }
            | InvalidNetworkField { reason }
            | MalformedAsPath { reason } => write!(f, "{words}: {reason}"),
            MissingWellKnownAttribute { type_code } => {
                write!(f, "{words} (type {type_code})")
            }
            UnrecognizedWellKnownAttribute { attribute }
            | AttributeFlagsError { attribute }
            | AttributeLengthError { attribute }
            | InvalidOriginAttribute { attribute }
            | InvalidNextHopAttribute { attribute } => match attribute.get(1) {
                Some(t) => write!(f, "{words} (attribute type {t})"),
                None => f.write_str(&words),
            },
            _ => f.write_str(&words),
        }
    }
}

impl std::error::Error for Error {}

/// A problem found in one path attribute (or in the attribute list as a
/// whole), with the RFC 7606 approach that handles it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrError {
    /// The error, with the NOTIFICATION it causes under session reset.
    pub error: Error,
    /// The RFC 7606 approach that handles it.
    pub action: Action,
}

impl AttrError {
    /// `error`, handled by `action`.
    pub fn new(error: Error, action: Action) -> Self {
        AttrError { error, action }
    }
}

impl fmt::Display for AttrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {}", self.error, self.action)
    }
}

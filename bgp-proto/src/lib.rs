//! bgp-proto: a lossless BGP-4 codec and a sans-IO RFC 4271 session FSM.
//!
//! No sockets, no clocks, no async runtime: bytes and instants go in,
//! messages, actions and bytes come out.
//!
//! - Decoding takes a [`Context`] — what the session negotiated (4-octet
//!   AS, ADD-PATH, extended messages). [`check_header`] validates the
//!   19-octet header before a body is awaited.
//! - Decoding is lossless: for every well-formed message,
//!   `encode(decode(bytes)) == bytes` — attribute order, the Extended
//!   Length flag and the Partial bit included. Messages built by the
//!   crate's constructors are canonical.
//! - Errors: one [`Error`] type whose variants map onto NOTIFICATION
//!   code/subcode/data; attribute problems carry their RFC 7606
//!   [`Action`], and [`Update::validate`] reports the strongest one.

#![warn(missing_docs, unreachable_pub)]

pub mod aspath;
pub mod attribute;
pub mod capability;
pub mod community;
pub mod consts;
pub mod context;
pub mod error;
pub mod fsm;
pub mod hex;
pub mod message;
pub mod mp;
pub mod nlri;
pub mod notification;
pub mod open;
pub mod pack;
pub mod route_refresh;
#[doc(hidden)]
pub mod selfcheck;
pub mod update;
mod wire;

pub use aspath::{AsPath, Segment, SegmentType};
pub use attribute::{Aggregator, AttrValue, Origin, PathAttribute};
pub use capability::{AddPathMode, Capability, GrFamily, GracefulRestart};
pub use community::{Community, ExtCommunity, LargeCommunity};
pub use context::{Afi, Context, Family, FamilySet, Safi};
pub use error::{Action, AttrError, Error};
pub use message::{EncodeError, Message, check_header};
pub use mp::{MpNlri, MpReach, MpUnreach};
pub use nlri::Nlri;
pub use notification::Notification;
pub use open::{Open, OptParam};
pub use route_refresh::RouteRefresh;
pub use update::{Update, Verdict};

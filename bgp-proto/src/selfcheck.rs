//! The properties the fuzz targets check, kept here so that the fuzz seeds
//! and every crash ever found run as ordinary tests too
//! (`bgp-proto/tests/fuzz_regressions.rs`).
//!
//! Each function takes arbitrary bytes and panics only when the codec
//! breaks a promise: decoding never panics; whatever decodes re-encodes to
//! the same bytes; validation never panics. (The `session` target drives
//! holdfast's whole session core, the FSM with the speaker: its checks
//! live with it, in `holdfast::session::selfcheck`.)

use crate::context::{Context, Family};
use crate::message::{Message, check_header};

/// Picks a session context from one octet, so that fuzzers explore 2- and
/// 4-octet AS, ADD-PATH and extended messages.
pub fn context_from(byte: u8) -> Context {
    let mut ctx = if byte & 1 != 0 {
        Context::two_octet_as()
    } else {
        Context::default()
    };
    if byte & 2 != 0 {
        ctx = ctx.with_add_path(Family::IPV4_UNICAST);
    }
    if byte & 4 != 0 {
        ctx = ctx.with_add_path(Family::IPV6_UNICAST);
    }
    if byte & 8 != 0 {
        ctx = ctx.with_extended_messages();
    }
    if byte & 16 != 0 {
        ctx.external = Some(byte & 32 != 0);
    }
    ctx
}

fn round_trip(msg: &[u8], ctx: &Context) {
    if let Ok(m) = Message::decode(msg, ctx) {
        let again = m
            .encode(ctx)
            .expect("a decoded message fits the size it arrived in");
        assert_eq!(again, msg, "decode then encode must return the same bytes");
        if let Message::Update(u) = &m {
            let _ = u.validate(ctx);
            let _ = u.end_of_rib_family();
        }
    }
}

/// A stream of messages arriving in pieces: frame with `check_header`, the
/// way the session driver does, and decode each message.
pub fn framing(data: &[u8]) {
    let Some((&first, stream)) = data.split_first() else {
        return;
    };
    let ctx = context_from(first);
    let mut buf: &[u8] = stream;
    loop {
        match check_header(buf, ctx.max_message_len) {
            Ok(Some(len)) => {
                assert!((19..=ctx.max_message_len).contains(&len));
                if buf.len() < len {
                    return;
                }
                round_trip(&buf[..len], &ctx);
                buf = &buf[len..];
            }
            Ok(None) => {
                assert!(buf.len() < 19);
                return;
            }
            Err(e) => {
                assert!(e.is_header_error());
                let _ = e.to_notification();
                return;
            }
        }
    }
}

/// One whole message.
pub fn message(data: &[u8]) {
    let Some((&first, msg)) = data.split_first() else {
        return;
    };
    round_trip(msg, &context_from(first));
}

/// A path attributes field, wrapped into an UPDATE with a fixed NLRI.
pub fn attributes(data: &[u8]) {
    let Some((&first, attrs)) = data.split_first() else {
        return;
    };
    let ctx = context_from(first);
    let Ok(alen) = u16::try_from(attrs.len()) else {
        return;
    };
    let mut msg = Vec::with_capacity(attrs.len() + 32);
    msg.extend_from_slice(&crate::consts::MARKER);
    let total = 19 + 4 + attrs.len() + 5;
    let Ok(total16) = u16::try_from(total) else {
        return;
    };
    if total > ctx.max_message_len {
        return;
    }
    msg.extend_from_slice(&total16.to_be_bytes());
    msg.push(2);
    msg.extend_from_slice(&[0, 0]);
    msg.extend_from_slice(&alen.to_be_bytes());
    msg.extend_from_slice(attrs);
    msg.extend_from_slice(&[32, 198, 51, 100, 10]);
    if ctx.add_path.contains(Family::IPV4_UNICAST) {
        // The fixed NLRI then needs a path identifier.
        msg.truncate(msg.len() - 5);
        let total = total + 4;
        msg[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        msg.extend_from_slice(&[0, 0, 0, 1, 32, 198, 51, 100, 10]);
        if total > ctx.max_message_len {
            return;
        }
    }
    round_trip(&msg, &ctx);
}

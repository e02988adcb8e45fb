//! GoBGP's fuzzer-found inputs with broken length fields: each yields a
//! Message Header Error as soon as the offending octets are in — fed whole
//! or one octet at a time — and never a panic.

mod common;

use bgp_proto::{Context, Message, check_header};

#[test]
fn every_input_is_a_header_error() {
    let dir = common::corpora().join("gobgp-bad-len");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if name.contains('.') || name.starts_with("LICENSE") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        for ctx in [
            Context::default(),
            Context::default().with_extended_messages(),
        ] {
            let err = Message::decode(&bytes, &ctx).expect_err(&name);
            assert!(err.is_header_error(), "{name}: {err}");
            // Framing octet by octet: the error comes before the body is
            // awaited (no input here has a valid marker, so at octet 1).
            let at = (1..=bytes.len())
                .find(|&k| check_header(&bytes[..k], ctx.max_message_len).is_err())
                .unwrap_or_else(|| panic!("{name}: header accepted"));
            assert!(at <= 19, "{name}: error only after {at} octets");
            let e = check_header(&bytes[..at], ctx.max_message_len).unwrap_err();
            assert_eq!((e.code(), e.subcode()), (1, 1), "{name}: {e}");
        }
        n += 1;
    }
    assert_eq!(n, 11, "expected the 11 GoBGP inputs");
}

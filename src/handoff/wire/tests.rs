use super::*;

fn transfer() -> Message {
    Message::Transfer(Transfer {
        build: "0.1.0 abc".into(),
        fds: vec![
            FdRole::Lock,
            FdRole::LocalApi,
            FdRole::BgpListener,
            FdRole::Session("tor-a".into()),
            FdRole::Bfd("tor-a".into()),
        ],
        sessions: vec![SessionState {
            peer: "tor-a".into(),
            peer_open: vec![0xff; 29],
            local_open: vec![0xff; 45],
            unparsed: vec![0xff, 0xff, 0, 0x13],
            hold_remaining: 87_500,
            keepalive_remaining: 12_250,
            adj_rib_out: RibOut {
                attrs: vec![crate::model::RouteAttrs {
                    communities: vec![65001 << 16 | 100],
                    med: Some(10),
                    ..Default::default()
                }],
                routes: "0000000004201234567800".into(),
            },
            end_of_rib_sent: true,
        }],
        bfd: vec![BfdState {
            peer: "tor-a".into(),
            local_discr: 7,
            remote_discr: 0x1234_5678,
            state: 3,
            desired_min_tx_us: 300_000,
            required_min_rx_us: 300_000,
            remote_min_rx_us: 250_000,
            detect_mult: 3,
            detect_remaining: 640,
            auth_seq: Some(u32::MAX),
        }],
    })
}

fn all() -> Vec<Message> {
    vec![
        Message::Hello(Hello {
            pid: 42,
            build: "0.1.0 abc".into(),
        }),
        Message::Fallback(Fallback {
            reason: "a reason with \"quotes\" and ünïcode".into(),
        }),
        transfer(),
        Message::Received,
    ]
}

#[test]
fn every_message_round_trips() {
    for m in all() {
        let frame = encode(&m, VERSION).unwrap();
        assert_eq!(&frame[..4], &MAGIC);
        let h = parse_header(&frame).unwrap();
        assert_eq!(h.version, VERSION);
        assert_eq!(h.kind, m.kind() as u8);
        assert_eq!(usize::from(h.fds), m.fd_count());
        assert_eq!(h.body_len as usize, frame.len() - HEADER_LEN);
        assert_eq!(decode(&frame, m.fd_count(), VERSION), Ok(m));
    }
}

#[test]
fn another_version_is_refused_with_both_versions_named() {
    let frame = encode(&all()[0], 2).unwrap();
    // The header reads in any version: the other side's version is known.
    assert_eq!(parse_header(&frame).unwrap().version, 2);
    let e = decode(&frame, 0, VERSION).unwrap_err();
    assert_eq!(e, DecodeError::Version { theirs: 2, ours: 1 });
    let text = e.to_string();
    assert!(
        text.contains("version 2") && text.contains("this one 1"),
        "{text}"
    );
}

#[test]
fn every_truncation_is_an_error_never_a_panic() {
    for m in all() {
        let frame = encode(&m, VERSION).unwrap();
        for cut in 0..frame.len() {
            let e = decode(&frame[..cut], m.fd_count(), VERSION).unwrap_err();
            assert!(
                matches!(e, DecodeError::Truncated { .. }),
                "{cut} of {}: {e}",
                frame.len()
            );
        }
        let mut long = frame.clone();
        long.push(0);
        assert_eq!(
            decode(&long, m.fd_count(), VERSION),
            Err(DecodeError::Trailing(1))
        );
    }
}

#[test]
fn descriptor_counts_must_agree() {
    let m = transfer();
    let frame = encode(&m, VERSION).unwrap();
    // Fewer arrived than the header and the state say.
    assert_eq!(
        decode(&frame, 4, VERSION),
        Err(DecodeError::FdCount {
            header: 5,
            received: 4,
            listed: 5
        })
    );
    // A header that lies about the count, with the state's list right.
    let mut lying = frame.clone();
    lying[8..10].copy_from_slice(&6u16.to_be_bytes());
    assert!(matches!(
        decode(&lying, 6, VERSION),
        Err(DecodeError::FdCount {
            header: 6,
            received: 6,
            listed: 5
        })
    ));
    // A header that lies while what arrived matches the state's list.
    assert_eq!(
        decode(&lying, 5, VERSION),
        Err(DecodeError::FdCount {
            header: 6,
            received: 5,
            listed: 5
        })
    );
    // Descriptors beside a message that carries none.
    let hello = encode(&all()[0], VERSION).unwrap();
    assert!(matches!(
        decode(&hello, 1, VERSION),
        Err(DecodeError::FdCount { .. })
    ));
    // More than one frame may carry is refused before anything is read.
    lying[8..10].copy_from_slice(&(MAX_FDS + 1).to_be_bytes());
    assert!(matches!(
        parse_header(&lying),
        Err(DecodeError::FdCount { .. })
    ));
}

#[test]
fn a_huge_body_is_refused_from_the_header_alone() {
    let mut frame = encode(&Message::Received, VERSION).unwrap();
    frame[12..16].copy_from_slice(&(MAX_BODY + 1).to_be_bytes());
    assert_eq!(
        parse_header(&frame[..HEADER_LEN]),
        Err(DecodeError::TooLarge(MAX_BODY + 1))
    );
}

#[test]
fn malformed_headers_and_bodies() {
    let frame = encode(&all()[0], VERSION).unwrap();
    let mut bad = frame.clone();
    bad[0] = b'X';
    assert!(matches!(
        decode(&bad, 0, VERSION),
        Err(DecodeError::Magic(_))
    ));
    let mut bad = frame.clone();
    bad[6] = 99;
    assert_eq!(decode(&bad, 0, VERSION), Err(DecodeError::UnknownKind(99)));
    let mut bad = frame.clone();
    bad[7] = 1;
    assert_eq!(decode(&bad, 0, VERSION), Err(DecodeError::Reserved));
    let mut bad = frame.clone();
    bad[11] = 1;
    assert_eq!(decode(&bad, 0, VERSION), Err(DecodeError::Reserved));
    // A body of the right length that is not the kind's JSON.
    let mut bad = frame[..HEADER_LEN].to_vec();
    let body = br#"{"pid":"x"}"#;
    bad[12..16].copy_from_slice(&(body.len() as u32).to_be_bytes());
    bad.extend_from_slice(body);
    assert!(matches!(
        decode(&bad, 0, VERSION),
        Err(DecodeError::Body(_))
    ));
}

#[test]
fn arbitrary_octets_never_panic() {
    // A small deterministic generator: every octet string decodes to a
    // message or an error.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let base = encode(&transfer(), VERSION).unwrap();
    for _ in 0..2000 {
        let mut f = base.clone();
        for _ in 0..(next() % 8) {
            let i = (next() as usize) % f.len();
            f[i] = next() as u8;
        }
        f.truncate((next() as usize) % (f.len() + 1));
        let _ = decode(&f, (next() % 8) as usize, VERSION);
    }
}

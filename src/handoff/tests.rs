use super::*;
use std::os::fd::AsFd;
use std::os::unix::fs::PermissionsExt;

/// The old side in a thread: answers the first request with a fallback,
/// waits for the confirmation, and reports what it read.
fn old_side(dir: &Path, version: u16) -> std::thread::JoinHandle<Result<Request, String>> {
    let (listener, bound) = bind(dir).unwrap();
    listener.set_nonblocking(false).unwrap();
    std::thread::spawn(move || {
        let _bound = bound;
        let (s, _) = listener.accept().map_err(|e| e.to_string())?;
        let request = read_request(&s, version).map_err(|e| e.to_string())?;
        let reason = match &request {
            Request::Compatible(_) => "no transfer in this test".to_string(),
            Request::Incompatible(why) => why.clone(),
        };
        finish(&s, &Answer::Fallback(reason), version).map_err(|e| e.to_string())?;
        Ok(request)
    })
}

#[test]
fn the_socket_is_owner_only_and_removed_with_its_guard() {
    let dir = tempfile::tempdir().unwrap();
    let (_l, bound) = bind(dir.path()).unwrap();
    let m = std::fs::metadata(socket_path(dir.path())).unwrap();
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    drop(bound);
    assert!(!socket_path(dir.path()).exists());
    // Something that is not a socket is left alone.
    std::fs::write(socket_path(dir.path()), "x").unwrap();
    assert!(bind(dir.path()).is_err());
}

#[test]
fn a_compatible_request_is_answered() {
    let dir = tempfile::tempdir().unwrap();
    let old = old_side(dir.path(), wire::VERSION);
    match ask(dir.path(), wire::VERSION) {
        Asked::Fallback(reason) => assert_eq!(reason, "no transfer in this test"),
        other => panic!("{other:?}"),
    }
    match old.join().unwrap().unwrap() {
        Request::Compatible(h) => {
            assert_eq!(h.pid, std::process::id());
            assert_eq!(h.build, build());
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_incompatible_pair_falls_back_on_both_sides_with_the_versions_named() {
    let dir = tempfile::tempdir().unwrap();
    let old = old_side(dir.path(), wire::VERSION);
    match ask(dir.path(), wire::VERSION + 1) {
        Asked::Fallback(reason) => {
            assert!(reason.contains("version 1, this one 2"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    match old.join().unwrap().unwrap() {
        Request::Incompatible(why) => assert!(why.contains("version 2, this one 1"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn nobody_listening_is_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(ask(dir.path(), wire::VERSION), Asked::NoAnswer(_)));
}

#[test]
fn descriptors_travel_with_a_transfer() {
    let (a, b) = UnixStream::pair().unwrap();
    let file = tempfile::tempfile().unwrap();
    let t = Message::Transfer(Transfer {
        build: build(),
        fds: vec![wire::FdRole::Lock, wire::FdRole::LocalApi],
        sessions: vec![],
        bfd: vec![],
    });
    write_frame(&a, &t, &[file.as_fd(), file.as_fd()], wire::VERSION).unwrap();
    let (m, fds) = read_frame(&b, wire::VERSION).unwrap();
    assert_eq!(m, t);
    assert_eq!(fds.len(), 2);
    // One descriptor short of what the state lists: refused.
    write_frame(&a, &t, &[file.as_fd()], wire::VERSION).unwrap();
    assert!(matches!(
        read_frame(&b, wire::VERSION),
        Err(Error::Decode(DecodeError::FdCount { .. }))
    ));
}

#[test]
fn a_frame_cut_short_by_the_peer_closing() {
    let (a, b) = UnixStream::pair().unwrap();
    let frame = wire::encode(
        &Message::Fallback(Fallback {
            reason: "long enough".into(),
        }),
        wire::VERSION,
    )
    .unwrap();
    (&a).write_all(&frame[..frame.len() - 3]).unwrap();
    drop(a);
    assert!(matches!(
        read_frame(&b, wire::VERSION),
        Err(Error::Decode(DecodeError::Truncated { .. }))
    ));
}

#[test]
fn only_the_same_user_or_root_may_take_part() {
    let c = |uid| holdfast_sockopt::PeerCredentials {
        pid: 1,
        uid,
        gid: 0,
    };
    assert!(allowed(c(1000), 1000).is_ok());
    assert!(allowed(c(0), 1000).is_ok());
    let e = allowed(c(1001), 1000).unwrap_err();
    assert!(e.contains("uid 1001"), "{e}");
}

#[test]
fn a_new_side_that_leaves_before_confirming_is_abandoned() {
    let (old, new) = UnixStream::pair().unwrap();
    write_frame(
        &new,
        &Message::Hello(Hello {
            pid: 1,
            build: build(),
        }),
        &[],
        wire::VERSION,
    )
    .unwrap();
    assert!(matches!(
        read_request(&old, wire::VERSION),
        Ok(Request::Compatible(_))
    ));
    // The new side reads nothing and goes away.
    drop(new);
    assert!(
        finish(&old, &Answer::Fallback("x".into()), wire::VERSION).is_err(),
        "no confirmation: the old side must not stop"
    );
}

#[test]
fn an_adj_rib_out_crosses_compact_and_comes_back_equal() {
    use crate::model::RouteAttrs;
    use std::sync::Arc;
    let plain = Arc::new(RouteAttrs::default());
    let tagged = Arc::new(RouteAttrs {
        communities: vec![65001 << 16 | 7],
        local_pref: Some(200),
        ..Default::default()
    });
    let table: crate::model::sorted::SortedMap<ipnet::IpNet, Arc<RouteAttrs>> = [
        ("198.51.100.1/32", &plain),
        ("198.51.100.2/32", &tagged),
        ("198.51.100.3/32", &plain),
        ("2001:db8::5/128", &tagged),
    ]
    .into_iter()
    .map(|(p, a)| (p.parse().unwrap(), a.clone()))
    .collect();
    let groups = rib_out(&table);
    assert_eq!(groups.attrs.len(), 2, "each set of attributes once");
    let back = rib_table(groups.clone()).unwrap();
    assert_eq!(
        back.iter().collect::<Vec<_>>(),
        table.iter().collect::<Vec<_>>()
    );
    // Through a frame, too.
    let frame = wire::encode(
        &Message::Transfer(Transfer {
            build: build(),
            fds: vec![],
            sessions: vec![wire::SessionState {
                peer: "tor".into(),
                peer_open: vec![],
                local_open: vec![],
                unparsed: vec![],
                hold_remaining: 0,
                keepalive_remaining: 0,
                adj_rib_out: groups,
                end_of_rib_sent: true,
            }],
            bfd: vec![],
        }),
        wire::VERSION,
    )
    .unwrap();
    let Ok(Message::Transfer(t)) = wire::decode(&frame, 0, wire::VERSION) else {
        panic!("a transfer");
    };
    let again = rib_table(t.sessions[0].adj_rib_out.clone()).unwrap();
    assert_eq!(again.len(), 4);
    // Anything malformed refuses the state.
    let good = rib_out(&table).routes;
    let with = |routes: String| {
        rib_table(wire::RibOut {
            attrs: rib_out(&table).attrs,
            routes,
        })
    };
    assert!(
        with(good[..good.len() - 1].to_string()).is_err(),
        "cut short"
    );
    assert!(
        with(format!("{good}0000000204")).is_err(),
        "unknown attributes"
    );
    assert!(
        with(format!("{good}0000000005200a000001")).is_err(),
        "family 5"
    );
    assert!(
        with(format!("{good}00000000042a0a000001")).is_err(),
        "a /42 in IPv4"
    );
    assert!(
        with(format!("{good}00000000zz200a000001")).is_err(),
        "not hex"
    );
}

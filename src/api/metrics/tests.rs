use super::*;
use crate::report::status::{BfdStatus, PeerStatus};
use testlab::exposition::{self, Exposition};

fn fixture() -> Status {
    serde_json::from_str(include_str!("../../../tests/fixtures/api/status.json"))
        .expect("tests/fixtures/api/status.json is a Status")
}

fn parsed(s: &Status) -> Exposition {
    let text = render_metrics(s);
    exposition::parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

#[test]
fn the_exposition_is_valid_and_named_by_convention() {
    let e = parsed(&fixture());
    for f in &e.families {
        assert!(f.name.starts_with("holdfast_"), "{}", f.name);
        assert!(
            f.help.as_deref().is_some_and(|h| !h.is_empty()),
            "{} has no HELP",
            f.name
        );
        match f.kind.as_str() {
            // Prometheus naming: counters end in _total, gauges do not.
            "counter" => assert!(f.name.ends_with("_total"), "{}", f.name),
            "gauge" => assert!(!f.name.ends_with("_total"), "{}", f.name),
            k => panic!("{}: unexpected type {k}", f.name),
        }
        assert!(!f.samples.is_empty(), "{} is empty", f.name);
    }
}

#[test]
fn values_follow_the_status() {
    let e = parsed(&fixture());
    let tor1 = [("peer", "tor1"), ("address", "192.0.2.1")];
    let tor2 = [
        ("peer", "tor2-rack7-row3-dc1.example.net"),
        ("address", "default-gateway (ipv4)"),
    ];
    let tor3 = [("peer", "tor3"), ("address", "2001:db8::1")];
    let with = |base: &[(&'static str, &'static str)], extra: &[(&'static str, &'static str)]| {
        let mut v = base.to_vec();
        v.extend_from_slice(extra);
        v
    };
    let v = |name: &str, labels: &[(&str, &str)]| {
        e.value(name, labels)
            .unwrap_or_else(|| panic!("no series {name}{labels:?}"))
    };

    // One series per RFC state, 1 on the current one only.
    for (peer, current) in [(&tor1, "Established"), (&tor2, "Active"), (&tor3, "Idle")] {
        for state in PEER_STATES {
            let want = if state == current { 1.0 } else { 0.0 };
            assert_eq!(
                v("holdfast_peer_state", &with(peer, &[("state", state)])),
                want
            );
        }
    }
    assert_eq!(e.family("holdfast_peer_state").unwrap().samples.len(), 18);
    assert_eq!(v("holdfast_peer_established", &tor1), 1.0);
    assert_eq!(v("holdfast_peer_established", &tor2), 0.0);
    assert_eq!(v("holdfast_peer_uptime_seconds", &tor1), 3723.0);
    assert_eq!(v("holdfast_peer_uptime_seconds", &tor2), 0.0);
    assert_eq!(v("holdfast_peer_messages_sent_total", &tor1), 1240.0);
    assert_eq!(v("holdfast_peer_messages_received_total", &tor1), 1234.0);
    assert_eq!(v("holdfast_peer_updates_sent_total", &tor2), 3.0);
    assert_eq!(v("holdfast_peer_updates_received_total", &tor1), 2.0);
    assert_eq!(
        v(
            "holdfast_peer_prefixes_advertised",
            &with(&tor1, &[("family", "ipv4")])
        ),
        4.0
    );
    assert_eq!(
        v(
            "holdfast_peer_prefixes_advertised",
            &with(&tor1, &[("family", "ipv6")])
        ),
        1.0
    );
    assert_eq!(v("holdfast_peer_prefixes_received_total", &tor3), 0.0);
    assert_eq!(
        v(
            "holdfast_peer_notifications_sent_total",
            &with(
                &tor2,
                &[
                    ("code", "4"),
                    ("subcode", "0"),
                    ("name", "Hold Timer Expired")
                ]
            )
        ),
        3.0
    );
    assert_eq!(
        v(
            "holdfast_peer_notifications_received_total",
            &with(
                &tor1,
                &[
                    ("code", "6"),
                    ("subcode", "2"),
                    ("name", "Cease / Administrative Shutdown")
                ]
            )
        ),
        1.0
    );
    assert_eq!(v("holdfast_peer_established_transitions_total", &tor1), 2.0);
    assert_eq!(v("holdfast_peer_bfd_up", &tor1), 1.0);
    assert_eq!(v("holdfast_peer_bfd_up", &tor2), 0.0);
    assert_eq!(
        v(
            "holdfast_peer_bfd_discarded_total",
            &with(&tor1, &[("reason", "bad-digest")])
        ),
        4.0
    );
    assert_eq!(
        e.value("holdfast_peer_bfd_up", &tor3),
        None,
        "tor3 has no BFD"
    );

    assert_eq!(v("holdfast_routes_advertised", &[]), 6.0);
    assert_eq!(v("holdfast_routes_held_down", &[]), 4.0);
    assert_eq!(v("holdfast_withdrawals_absorbed_total", &[]), 519.0);
    assert_eq!(v("holdfast_damping_absorbed_total", &[]), 3.0);
    assert_eq!(v("holdfast_damping_suppressions_total", &[]), 1.0);
    assert_eq!(v("holdfast_route_advertisements_total", &[]), 30.0);
    assert_eq!(v("holdfast_route_withdrawals_total", &[]), 2.0);
    assert_eq!(v("holdfast_withdrawals_deferred", &[]), 3.0);
    assert_eq!(v("holdfast_withdrawals_deferred_total", &[]), 40.0);
    assert_eq!(v("holdfast_source_healthy", &[("kind", "kubernetes")]), 1.0);
    assert_eq!(v("holdfast_source_synced", &[("kind", "kubernetes")]), 1.0);
    assert_eq!(v("holdfast_source_vips", &[("kind", "kubernetes")]), 4.0);
    assert_eq!(v("holdfast_config_reload_error", &[]), 0.0);
    assert_eq!(
        v(
            "holdfast_build_info",
            &[("version", "0.1.0"), ("commit", crate::build_info::COMMIT)]
        ),
        1.0
    );
    assert_eq!(v("holdfast_uptime_seconds", &[]), 273906.0);
}

#[test]
fn label_values_are_escaped() {
    let mut s = fixture();
    s.peers[0].name = "a\"b\\c\nd".into();
    s.peers[0].notifications_sent.push(NotificationCount {
        code: 3,
        subcode: 1,
        name: "UPDATE \"Malformed\" \\ Attribute\nList".into(),
        count: 7,
    });
    let text = render_metrics(&s);
    assert!(
        text.contains(r#"holdfast_peer_established{peer="a\"b\\c\nd",address="192.0.2.1"} 1"#),
        "{text}"
    );
    let e = parsed(&s);
    let peer = ("peer", "a\"b\\c\nd");
    assert_eq!(
        e.value(
            "holdfast_peer_established",
            &[peer, ("address", "192.0.2.1")]
        ),
        Some(1.0)
    );
    assert_eq!(
        e.value(
            "holdfast_peer_notifications_sent_total",
            &[
                peer,
                ("address", "192.0.2.1"),
                ("code", "3"),
                ("subcode", "1"),
                ("name", "UPDATE \"Malformed\" \\ Attribute\nList"),
            ]
        ),
        Some(7.0)
    );
}

#[test]
fn no_duplicate_series_whatever_the_status() {
    let mut s = fixture();
    // Two peers alike in name and address, and the same NOTIFICATION
    // counted twice: still one series each (a duplicate would make
    // Prometheus reject the whole scrape).
    s.peers.push(s.peers[0].clone());
    s.peers[0].notifications_received.push(NotificationCount {
        code: 6,
        subcode: 2,
        name: "Cease / Administrative Shutdown".into(),
        count: 4,
    });
    let e = parsed(&s);
    assert_eq!(
        e.value(
            "holdfast_peer_notifications_received_total",
            &[
                ("peer", "tor1"),
                ("address", "192.0.2.1"),
                ("code", "6"),
                ("subcode", "2"),
                ("name", "Cease / Administrative Shutdown"),
            ]
        ),
        Some(5.0)
    );
    assert_eq!(
        e.family("holdfast_peer_established").unwrap().samples.len(),
        3
    );
}

#[test]
fn an_unknown_state_still_shows_and_empty_families_are_left_out() {
    let s = Status {
        peers: vec![PeerStatus {
            name: "tor1".into(),
            configured_address: "192.0.2.1".into(),
            state: "Deleted".into(),
            bfd: Some(BfdStatus::default()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let e = parsed(&s);
    let labels = |state| [("peer", "tor1"), ("address", "192.0.2.1"), ("state", state)];
    assert_eq!(
        e.value("holdfast_peer_state", &labels("Deleted")),
        Some(1.0)
    );
    assert_eq!(e.value("holdfast_peer_state", &labels("Idle")), Some(0.0));
    assert_eq!(
        e.value("holdfast_peer_bfd_up", &labels("Deleted")[..2]),
        Some(0.0)
    );
    assert!(e.family("holdfast_peer_notifications_sent_total").is_none());
    // The running binary's version when the daemon left it out.
    assert_eq!(
        e.value(
            "holdfast_build_info",
            &[
                ("version", env!("CARGO_PKG_VERSION")),
                ("commit", crate::build_info::COMMIT)
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        e.value("holdfast_source_healthy", &[("kind", "")]),
        Some(0.0)
    );

    let e = parsed(&Status::default());
    assert!(e.family("holdfast_peer_state").is_none());
    assert_eq!(e.value("holdfast_uptime_seconds", &[]), Some(0.0));
}

/// The fixture, as a process that took over from another would show it.
fn with_handoff(pause: Option<u64>) -> Status {
    let mut s = fixture();
    s.handoff = Some(crate::report::status::HandoffStatus {
        result: if pause.is_some() {
            "completed"
        } else {
            "fallback"
        }
        .into(),
        reason: pause.is_none().then(|| "incompatible".into()),
        at_unix_seconds: 1_700_000_000,
        pause_milliseconds: pause,
    });
    s
}

#[test]
fn a_hand_off_is_counted_by_result_with_its_pause() {
    let e = parsed(&with_handoff(Some(12)));
    assert_eq!(
        e.value("holdfast_handoff_total", &[("result", "completed")]),
        Some(1.0)
    );
    assert_eq!(
        e.value("holdfast_handoff_pause_milliseconds", &[]),
        Some(12.0)
    );
    let e = parsed(&with_handoff(None));
    assert_eq!(
        e.value("holdfast_handoff_total", &[("result", "fallback")]),
        Some(1.0)
    );
    assert!(e.family("holdfast_handoff_pause_milliseconds").is_none());
    // A process that started alone shows neither.
    let e = parsed(&fixture());
    assert!(e.family("holdfast_handoff_total").is_none());
}

#[test]
fn large_counters_keep_every_digit() {
    let mut s = fixture();
    s.peers[0].messages_sent = u64::MAX;
    let text = render_metrics(&s);
    assert!(
        text.contains(r#"holdfast_peer_messages_sent_total{peer="tor1",address="192.0.2.1"} 18446744073709551615"#),
        "{text}"
    );
}

/// [`FAMILIES`], from which the reference page is generated, declares
/// exactly the families /metrics has, in its order, with their type, help
/// and label names (the fixture has every kind of peer, so every family
/// appears).
#[test]
fn every_family_is_declared_and_every_declared_family_exists() {
    let e = parsed(&with_handoff(Some(12)));
    let emitted: Vec<&str> = e.families.iter().map(|f| f.name.as_str()).collect();
    let declared: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
    assert_eq!(emitted, declared, "/metrics against FAMILIES, in order");
    for (f, doc) in e.families.iter().zip(FAMILIES) {
        assert_eq!(f.kind, doc.kind.as_str(), "{}", f.name);
        assert_eq!(f.help.as_deref(), Some(doc.help), "{}", f.name);
        for sample in &f.samples {
            let names: Vec<&str> = sample.labels.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(names, doc.labels, "labels of {}", f.name);
        }
    }
}

/// Each `[[bmp]]` station: connected, messages written by type, and
/// connections dropped because it fell behind.
#[test]
fn bmp_stations_are_labelled_by_name() {
    let e = parsed(&fixture());
    assert_eq!(
        e.value("holdfast_bmp_up", &[("station", "collector")]),
        Some(1.0)
    );
    assert_eq!(
        e.value(
            "holdfast_bmp_messages_total",
            &[("station", "collector"), ("type", "route_monitoring")]
        ),
        Some(120.0)
    );
    assert_eq!(
        e.value("holdfast_bmp_dropped_total", &[("station", "collector")]),
        Some(2.0)
    );
    assert!(
        parsed(&Status::default())
            .family("holdfast_bmp_up")
            .is_none()
    );
}

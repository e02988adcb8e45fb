use super::*;
use crate::report::status::{BfdStatus, SourceStatus};

fn fixture() -> Status {
    serde_json::from_str(include_str!("../../../tests/fixtures/api/status.json"))
        .expect("tests/fixtures/api/status.json is a Status")
}

fn route(state: &str) -> RouteStatus {
    RouteStatus {
        prefix: "198.51.100.10/32".into(),
        state: state.into(),
        ..Default::default()
    }
}

#[test]
fn a_deferred_route_says_the_guard_paces_it() {
    let r = RouteStatus {
        absence: Some("vanished".into()),
        ..route("deferred")
    };
    assert_eq!(
        route_state(&r),
        "deferred (vanished): the mass-withdrawal guard paces its withdrawal"
    );
}

#[test]
fn a_steered_route_says_how() {
    let r = RouteStatus {
        steering: Some("disabled: /run/holdfast/down exists".into()),
        ..route("advertised")
    };
    assert_eq!(
        route_state(&r),
        "advertised (disabled: /run/holdfast/down exists)"
    );
}

#[test]
fn the_whole_status_reads_as_expected() {
    let expected = "\
holdfast 0.1.0 on node worker-1, up 3d04h05m
BGP router identifier 192.0.2.11, local AS number 65001
config /etc/holdfast/holdfast.toml
source kubernetes: healthy, synced, 4 VIPs
routes advertised: 6, held down: 4
withdrawals absorbed by hold-down: 519
absences absorbed by damping: 3, damping suppressions: 1
route advertisements: 30, withdrawals: 2
mass-withdrawal guard: 3 withdrawals deferred (stability.max_withdraw_fraction)

Neighbor                         Address                         AS  MsgRcvd  MsgSent   Up/Down  State/PfxSnt
tor1                             192.0.2.1                    65000     1234     1240  01:02:03             5
tor2-rack7-row3-dc1.example.net  default-gateway (ipv4)       65000       60       57  00:02:05        Active
tor3                             2001:db8::1             4200000001        0        0     never          Idle

Total number of neighbors 3, established 1
tor2-rack7-row3-dc1.example.net: last error: Hold Timer Expired (sent NOTIFICATION 4/0)
tor2-rack7-row3-dc1.example.net: BFD Down (Control Detection Time Expired)

Route                 State                                                   Service      Peers
198.51.100.10/32      advertised                                              demo/web     tor1
198.51.100.11/32      held down, withdraws in 12s                             demo/api     tor1
198.51.100.12/32      damped, figure of merit 2351, withdraws in about 5m00s  demo/flappy  tor1
198.51.100.13/32      pending, advertises in 2s                               demo/new     -
198.51.100.14/32      draining (deleted), withdraws in 20s                    demo/old     tor1
2001:db8:100::10/128  held down, no withdrawal while the source is unhealthy  -            tor1
203.0.113.5/32        draining (probe failed)                                 edge/lb      tor1
";
    assert_eq!(render_status(&fixture()), expected);
}

/// Where each header word starts (left-aligned columns) or ends
/// (right-aligned ones), checked against every row.
fn assert_aligned(table: &str, left: &[&str], right: &[&str]) {
    let mut lines = table.lines();
    let header = lines.next().expect("a header line");
    for line in lines.take_while(|l| !l.is_empty()) {
        assert!(!line.ends_with(' '), "trailing space in {line:?}");
        for word in left {
            let at = header.find(word).expect("column in header");
            assert!(
                at == 0 || line[..at].ends_with("  "),
                "{word} column: {line:?}"
            );
            assert_ne!(line.as_bytes()[at], b' ', "{word} column: {line:?}");
        }
        for word in right {
            let end = header.find(word).expect("column in header") + word.len();
            assert_ne!(line.as_bytes()[end - 1], b' ', "{word} column: {line:?}");
            assert!(
                end == line.len() || line[end..].starts_with("  "),
                "{word} column: {line:?}"
            );
        }
    }
}

#[test]
fn the_peer_table_lines_up_with_a_long_peer_name() {
    let mut s = fixture();
    s.peers[2].name = "a-very-long-peer-name-that-goes-on.rack7.row3.dc1.example.net".into();
    let peers = render_peers(&s.peers);
    assert_aligned(
        &peers,
        &["Neighbor", "Address"],
        &["AS", "MsgRcvd", "MsgSent", "Up/Down", "State/PfxSnt"],
    );
    assert!(
        peers.lines().nth(3).unwrap().starts_with(
            "a-very-long-peer-name-that-goes-on.rack7.row3.dc1.example.net  2001:db8::1"
        ),
        "{peers}"
    );
    assert_aligned(
        &render_routes(&s.routes),
        &["Route", "State", "Service", "Peers"],
        &[],
    );
}

#[test]
fn the_state_column_shows_prefixes_sent_only_when_established() {
    let mut p = fixture().peers[0].clone();
    let established = render_peers(std::slice::from_ref(&p));
    let row = established.lines().nth(1).unwrap();
    assert!(row.ends_with("01:02:03             5"), "{row}");
    for state in ["Idle", "Connect", "Active", "OpenSent", "OpenConfirm"] {
        p.state = state.into();
        p.down_seconds = Some(90_000);
        let t = render_peers(std::slice::from_ref(&p));
        let row = t.lines().nth(1).unwrap();
        assert!(row.ends_with(&format!("1d01h00m  {state:>12}")), "{row}");
    }
    p.down_seconds = None;
    let t = render_peers(std::slice::from_ref(&p));
    assert!(t.lines().nth(1).unwrap().contains(" never "), "{t}");
}

#[test]
fn every_route_state_in_words() {
    let cases = [
        (route("advertised"), "advertised"),
        (route("pending"), "pending"),
        (
            RouteStatus {
                seconds_left: Some(0.2),
                ..route("pending")
            },
            "pending, advertises in 1s",
        ),
        (
            RouteStatus {
                seconds_left: Some(12.0),
                absence: Some("vanished".into()),
                ..route("held-down")
            },
            "held down, withdraws in 12s",
        ),
        (
            RouteStatus {
                seconds_left: Some(125.0),
                ..route("held-down")
            },
            "held down, withdraws in 2m05s",
        ),
        (
            route("held-down"),
            "held down, no withdrawal while the source is unhealthy",
        ),
        (
            RouteStatus {
                figure_of_merit: Some(1999.4),
                ..route("damped")
            },
            "damped, figure of merit 1999",
        ),
        (
            RouteStatus {
                figure_of_merit: Some(3000.0),
                seconds_left: Some(3600.0 * 2.0 + 60.0),
                ..route("damped")
            },
            "damped, figure of merit 3000, withdraws in about 2h01m",
        ),
        (route("damped"), "damped"),
        (
            RouteStatus {
                absence: Some("drained".into()),
                ..route("draining")
            },
            "draining (drained)",
        ),
        (
            RouteStatus {
                absence: Some("deleted".into()),
                seconds_left: Some(9.5),
                ..route("draining")
            },
            "draining (deleted), withdraws in 10s",
        ),
        (route("draining"), "draining"),
        // A state this holdfast does not know (a newer daemon) still shows.
        (
            RouteStatus {
                absence: Some("probe-failed".into()),
                ..route("quarantined")
            },
            "quarantined (probe failed)",
        ),
        (route(""), "-"),
    ];
    for (r, want) in cases {
        assert_eq!(route_state(&r), want, "{r:?}");
    }
}

#[test]
fn an_empty_status_and_a_troubled_daemon() {
    let empty = render_status(&Status::default());
    assert!(empty.contains("\nNo BGP peers configured.\n"), "{empty}");
    assert!(empty.ends_with("\nNo routes.\n"), "{empty}");
    assert!(
        empty.starts_with("holdfast - on node -, up 00:00:00\n"),
        "{empty}"
    );

    let s = Status {
        config_error: Some("/etc/h.toml:3:1: unknown key `foo`\n/etc/h.toml:9:5: bad".into()),
        source: SourceStatus {
            name: "file".into(),
            kind: "file".into(),
            healthy: false,
            synced: true,
            error: Some("/etc/vips.toml:2:11: not an IP address\n".into()),
            vips: 1,
        },
        peers: vec![PeerStatus {
            name: "tor1".into(),
            state: "Established".into(),
            uptime_seconds: Some(5),
            bfd: Some(BfdStatus {
                state: "Init".into(),
                ..Default::default()
            }),
            last_error: Some("shown only while the session is down".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    let text = render_status(&s);
    for want in [
        "config reload FAILED, running the previous config:\n  /etc/h.toml:3:1: unknown key `foo`\n  /etc/h.toml:9:5: bad\n",
        "source file: UNHEALTHY (the last known VIPs stand), synced, 1 VIP\n",
        "source error: /etc/vips.toml:2:11: not an IP address\n",
        "tor1: BFD Init\n",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert!(!text.contains("shown only"), "{text}");
}

#[test]
fn a_page_of_routes_says_how_many_more_there_are() {
    let s = Status {
        routes: vec![route("advertised"); 2],
        routes_total: Some(5),
        routes_offset: Some(0),
        routes_truncated: Some(3),
        ..Default::default()
    };
    let text = render_status(&s);
    assert!(
        text.ends_with(
            "… and 3 more routes (2 of 5 shown); the API lists them page by page: /v1/status?offset=2\n"
        ),
        "{text}"
    );
    let whole = Status {
        routes: vec![route("advertised"); 2],
        ..Default::default()
    };
    assert!(!render_status(&whole).contains("more route"));
}

#[test]
fn probes_that_do_not_pass_are_listed_with_their_target_and_error() {
    let mut s = fixture();
    s.probes = vec![
        crate::report::status::ProbeStatus {
            vip: "198.51.100.10".into(),
            target: "https://127.0.0.1:6443/readyz".into(),
            state: "failing".into(),
            consecutive_failures: 4,
            last_error: Some("TLS: certificate verify failed: unknown issuer".into()),
        },
        crate::report::status::ProbeStatus {
            vip: "198.51.100.11".into(),
            target: "port 443".into(),
            state: "not-passed-yet".into(),
            consecutive_failures: 0,
            last_error: None,
        },
    ];
    s.probes_not_listed = Some(7);
    let text = render_status(&s);
    let tail = text
        .split_once("\nProbed VIP")
        .map(|(_, t)| format!("Probed VIP{t}"))
        .expect("a probe table");
    assert_eq!(
        tail,
        "\
Probed VIP     Probe                          State                Last error
198.51.100.10  https://127.0.0.1:6443/readyz  failing, 4 in a row  TLS: certificate verify failed: unknown issuer
198.51.100.11  port 443                       not passed yet       -
… and 7 more probes that do not pass
"
    );
    // None listed: no table.
    assert!(!render_status(&fixture()).contains("Probed VIP"));
}

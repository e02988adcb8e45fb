//! The routes core on simulated time: every input carries an `Instant`
//! made from a fixed origin plus a duration, nothing sleeps, and each
//! timer is checked at the instant just before it is due and at the
//! instant it is due.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::community::well_known::GRACEFUL_SHUTDOWN;

use super::*;
use crate::model::Vip;

const MS: Duration = Duration::from_millis(1);

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Peers `tor1` and `rr`; the advertisement `public` goes to both, `tor1`
/// only to tor1, `probed` to both and only while its TCP probe passes,
/// `degrading` to both, with MED 1000 while its probe fails.
/// `extra` is added to the `[stability]` section.
fn config(speaker_extra: &str, stability_extra: &str) -> Arc<Config> {
    let text = format!(
        r#"
[speaker]
asn = 65001
router_id = "192.0.2.2"
{speaker_extra}
[[peer]]
name = "tor1"
address = "192.0.2.1"
asn = 65000
[[peer]]
name = "rr"
address = "192.0.2.9"
asn = 65001
[source]
kind = "kubernetes"
[stability]
{stability_extra}
[[advertisement]]
name = "public"
communities = ["65001:100"]
[[advertisement]]
name = "tor1"
peers = ["tor1"]
[[advertisement]]
name = "probed"
probe = {{ port = 443, fail_after = 2 }}
[[advertisement]]
name = "degrading"
probe = {{ port = 443, fail_after = 2, on_failure = "degrade" }}
degraded = {{ med = 1000 }}
"#
    );
    Arc::new(crate::config::parse(Path::new("t.toml"), &text).expect("a valid config"))
}

/// A core for `config` with both peers' sessions attached, recording
/// Events (as with the Kubernetes source).
fn core(config: Arc<Config>) -> Routes {
    let stability = Stability::new(stability_params(&config)).expect("valid parameters");
    let mut r = Routes::new(config, stability, true, false);
    r.attach("tor1");
    r.attach("rr");
    r
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// A complete, healthy snapshot of these VIPs and their advertisements.
fn snapshot(vips: &[(&str, &str)]) -> SourceSnapshot {
    let vips: crate::model::VipMap = vips
        .iter()
        .map(|(addr, ad)| {
            (
                ip(addr),
                Vip::of(Route::new(
                    Arc::new(BTreeSet::from([ad.to_string()])),
                    Some("default/web".into()),
                    None,
                )),
            )
        })
        .collect();
    SourceSnapshot {
        vips: Arc::new(vips),
        healthy: true,
        synced: true,
        ..SourceSnapshot::default()
    }
}

/// The prefixes of a peer's table, as addresses.
fn routes_of(r: &Routes, peer: &str) -> Vec<IpAddr> {
    r.table(peer)
        .expect("an attached peer")
        .keys()
        .map(|p| p.addr())
        .collect()
}

/// The changed tables, by peer name, as prefix lists.
fn changed(r: &mut Routes) -> BTreeMap<String, Vec<IpAddr>> {
    r.take_changed_tables()
        .into_iter()
        .map(|(name, t)| (name, t.keys().map(|p| p.addr()).collect()))
        .collect()
}

#[test]
fn a_snapshot_gives_each_peer_the_routes_its_advertisements_send_it() {
    let mut r = core(config("", ""));
    let t0 = Instant::now();
    r.on_snapshot(
        t0,
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.11", "tor1")]),
    );
    assert_eq!(routes_of(&r, "tor1"), [ip("192.0.2.10"), ip("192.0.2.11")]);
    assert_eq!(routes_of(&r, "rr"), [ip("192.0.2.10")]);
    assert_eq!(
        changed(&mut r),
        BTreeMap::from([
            ("rr".to_string(), vec![ip("192.0.2.10")]),
            ("tor1".to_string(), vec![ip("192.0.2.10"), ip("192.0.2.11")]),
        ])
    );
    // One Event per VIP, naming the peers whose tables hold it.
    assert_eq!(
        r.take_events(),
        [
            Event::Advertised {
                vip: ip("192.0.2.10"),
                peers: vec!["rr".into(), "tor1".into()]
            },
            Event::Advertised {
                vip: ip("192.0.2.11"),
                peers: vec!["tor1".into()]
            },
        ]
    );
    // The same snapshot again changes nothing and tells nobody.
    r.on_snapshot(
        t0 + secs(1),
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.11", "tor1")]),
    );
    assert!(changed(&mut r).is_empty());
    assert!(r.take_events().is_empty());
}

#[test]
fn a_vanished_vip_stays_in_the_tables_until_the_hold_down_instant() {
    let mut r = core(config("", "withdraw_hold_down = \"30s\""));
    let t0 = Instant::now();
    r.on_snapshot(
        t0,
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.11", "public")]),
    );
    r.take_changed_tables();
    r.take_events();

    let t1 = t0 + secs(5);
    r.on_snapshot(t1, snapshot(&[("192.0.2.10", "public")]));
    assert!(
        changed(&mut r).is_empty(),
        "held down: nothing changes on the wire"
    );
    assert_eq!(r.next_deadline(), Some(t1 + secs(30)));

    assert!(!r.poll(t1 + secs(30) - MS));
    assert!(changed(&mut r).is_empty(), "not yet due");

    assert!(!r.poll(t1 + secs(30)));
    assert_eq!(
        changed(&mut r),
        BTreeMap::from([
            ("rr".to_string(), vec![ip("192.0.2.10")]),
            ("tor1".to_string(), vec![ip("192.0.2.10")]),
        ])
    );
    assert_eq!(
        r.take_events(),
        [Event::Withdrawn {
            vip: ip("192.0.2.11"),
            peers: vec!["rr".into(), "tor1".into()]
        }]
    );
    assert_eq!(r.next_deadline(), None, "nothing left to wait for");
}

#[test]
fn a_probed_vip_is_advertised_once_its_probe_passes_and_withdrawn_at_once_when_it_fails() {
    let mut r = core(config("", "withdraw_hold_down = \"30s\""));
    let vip = ip("192.0.2.20");
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&[("192.0.2.20", "probed")]));
    assert!(
        r.take_probes_changed(),
        "the driver is told to start a probe"
    );
    assert_eq!(r.probes().keys().copied().collect::<Vec<_>>(), [vip]);
    assert!(routes_of(&r, "tor1").is_empty(), "no probe result yet");

    let result = |result| probe::ProbeResult { vip, result };
    r.on_probe(t0 + secs(1), result(probe::Observation::Probed(Ok(()))));
    assert_eq!(routes_of(&r, "tor1"), [vip]);
    assert_eq!(routes_of(&r, "rr"), [vip]);

    r.on_probe(
        t0 + secs(3),
        result(probe::Observation::Probed(Err("refused".into()))),
    );
    assert_eq!(
        routes_of(&r, "tor1"),
        [vip],
        "one failure of fail_after = 2"
    );
    r.on_probe(
        t0 + secs(5),
        result(probe::Observation::Probed(Err("refused".into()))),
    );
    // A datapath fact: no hold-down.
    assert!(routes_of(&r, "tor1").is_empty());
    assert!(routes_of(&r, "rr").is_empty());
    assert!(!r.take_probes_changed(), "the VIP is still probed");

    // The VIP gone from the source: its probe stops.
    r.on_snapshot(t0 + secs(6), snapshot(&[]));
    assert!(r.take_probes_changed());
    assert!(r.probes().is_empty());
}

/// One probe round's result.
fn probed(vip: IpAddr, ok: bool) -> probe::ProbeResult {
    let result = if ok {
        Ok(())
    } else {
        Err("connection refused".to_string())
    };
    probe::ProbeResult {
        vip,
        result: probe::Observation::Probed(result),
    }
}

#[test]
fn a_failing_probe_withdraws_or_degrades_while_the_source_is_unhealthy() {
    let mut r = core(config("", "withdraw_hold_down = \"30s\""));
    let (plain, withdrawing, degrading) = (ip("192.0.2.10"), ip("192.0.2.20"), ip("192.0.2.21"));
    let t0 = Instant::now();
    r.on_snapshot(
        t0,
        snapshot(&[
            ("192.0.2.10", "public"),
            ("192.0.2.20", "probed"),
            ("192.0.2.21", "degrading"),
        ]),
    );
    for vip in [withdrawing, degrading] {
        r.on_probe(t0 + secs(1), probed(vip, true));
    }
    assert_eq!(routes_of(&r, "tor1"), [plain, withdrawing, degrading]);

    // The source breaks (a VIP file made invalid, the API server gone) and
    // its snapshot lacks `plain`: the last known set stands.
    let mut broken = snapshot(&[("192.0.2.20", "probed"), ("192.0.2.21", "degrading")]);
    broken.healthy = false;
    r.on_snapshot(t0 + secs(2), broken);
    assert_eq!(routes_of(&r, "tor1"), [plain, withdrawing, degrading]);

    // Both probes fail fail_after (2) times: the datapath does not serve
    // them, whatever the source says.
    for vip in [withdrawing, degrading] {
        r.on_probe(t0 + secs(3), probed(vip, false));
    }
    assert_eq!(routes_of(&r, "tor1"), [plain, withdrawing, degrading]);
    for vip in [withdrawing, degrading] {
        r.on_probe(t0 + secs(4), probed(vip, false));
    }
    assert_eq!(
        routes_of(&r, "tor1"),
        [plain, degrading],
        "the failed probe withdraws at once; the source's absence waits"
    );
    assert_eq!(routes_of(&r, "rr"), [plain, degrading]);
    let med = |peer: &str, vip: IpAddr| {
        r.table(peer)
            .expect("attached")
            .get(&IpNet::from(vip))
            .expect("advertised")
            .med
    };
    assert_eq!(
        med("tor1", degrading),
        Some(1000),
        "degraded, not withdrawn"
    );
    assert_eq!(
        r.take_events().last(),
        Some(&Event::Withdrawn {
            vip: withdrawing,
            peers: vec!["rr".into(), "tor1".into()]
        })
    );
    // `plain`'s absence has no timer while the source is unhealthy.
    assert_eq!(r.next_deadline(), None);
    assert!(!r.poll(t0 + secs(600)));
    assert_eq!(routes_of(&r, "tor1"), [plain, degrading]);

    // The probe passes again (recover_after, 2): back, still unhealthy.
    for at in [secs(601), secs(602)] {
        r.on_probe(t0 + at, probed(withdrawing, true));
    }
    assert_eq!(routes_of(&r, "tor1"), [plain, withdrawing, degrading]);
}

#[test]
fn the_probes_views_say_what_the_trackers_hold_when_asked() {
    let mut r = core(config("", ""));
    let (a, b) = (ip("192.0.2.20"), ip("192.0.2.21"));
    let probed_set = |r: &Routes| r.probes().keys().copied().collect::<Vec<_>>();
    let t0 = Instant::now();
    let base = [
        ("192.0.2.10", "public"),
        ("192.0.2.20", "probed"),
        ("192.0.2.21", "probed"),
    ];
    r.on_snapshot(t0, snapshot(&base));
    assert_eq!(probed_set(&r), [a, b], "one per probed VIP");
    assert_eq!(r.probe_view(&ip("192.0.2.10")), None, "not probed");

    // A probe's first success: its verdict, that VIP only.
    r.on_probe(t0 + secs(1), probed(a, true));
    assert_eq!(r.probe_view(&a).unwrap().verdict, probe::Verdict::Passing);
    assert_eq!(r.probe_view(&b).unwrap().verdict, probe::Verdict::Unknown);
    // A failure: its count and error.
    r.on_probe(t0 + secs(3), probed(a, false));
    let view = r.probe_view(&a).unwrap();
    assert_eq!(
        (view.failures, view.error.as_deref(), &view.target),
        (
            1,
            Some("connection refused"),
            &config::ProbeTarget::Tcp { port: 443 }
        )
    );

    // Events that leave the probed set as it is keep each probe's state:
    // a snapshot that adds an unprobed VIP, the same snapshot again, a
    // timer, a drain, the tables published again, a refresh.
    let mut more = base.to_vec();
    more.push(("192.0.2.11", "public"));
    r.on_snapshot(t0 + secs(4), snapshot(&more));
    r.on_snapshot(t0 + secs(5), snapshot(&more));
    r.poll(t0 + secs(6));
    r.set_drain(t0 + secs(7), true).expect("a drain");
    r.publish_tables();
    r.refresh(t0 + secs(8));
    assert_eq!(r.probe_view(&a), Some(view.clone()));
    assert_eq!(probed_set(&r), [a, b]);

    // One probed VIP gone: its view goes, the other's state is kept.
    r.on_snapshot(
        t0 + secs(9),
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.20", "probed")]),
    );
    assert_eq!(probed_set(&r), [a]);
    assert_eq!(r.probe_view(&b), None);
    assert_eq!(r.probe_view(&a).unwrap().failures, 1, "its state kept");
}

#[test]
fn the_guard_paces_a_mass_withdrawal_over_time() {
    let mut r = core(config(
        "",
        "withdraw_hold_down = \"0s\"\nmax_withdraw_fraction = 0.5\nwithdraw_rate = \"1/s\"",
    ));
    let vips: Vec<String> = (10..20).map(|i| format!("192.0.2.{i}")).collect();
    let all: Vec<(&str, &str)> = vips.iter().map(|v| (v.as_str(), "public")).collect();
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&all));
    assert_eq!(routes_of(&r, "rr").len(), 10);

    // Everything gone in one step: half goes at once, the rest one a second.
    let t1 = t0 + secs(1);
    r.on_snapshot(t1, snapshot(&[]));
    assert_eq!(routes_of(&r, "rr").len(), 5);
    for k in 1..=5u32 {
        let due = t1 + secs(1) * k;
        assert_eq!(r.next_deadline(), Some(due), "release {k}");
        r.poll(due - MS);
        assert_eq!(
            routes_of(&r, "rr").len(),
            5 - k as usize + 1,
            "before release {k}"
        );
        r.poll(due);
        assert_eq!(
            routes_of(&r, "rr").len(),
            5 - k as usize,
            "after release {k}"
        );
    }
    assert_eq!(r.next_deadline(), None);
}

#[test]
fn a_drain_marks_graceful_shutdown_then_withdraws_after_the_wait() {
    let mut r = core(config("graceful_shutdown_wait = \"15s\"", ""));
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&[("192.0.2.10", "public")]));
    r.take_changed_tables();
    let gshut = |r: &Routes, peer: &str| {
        r.table(peer)
            .expect("an attached peer")
            .values()
            .all(|a| a.communities.contains(&GRACEFUL_SHUTDOWN))
    };
    assert!(!gshut(&r, "tor1"));

    let t1 = t0 + secs(2);
    r.set_drain(t1, true).expect("a drain starts");
    // RFC 8326 §3: re-advertised with GRACEFUL_SHUTDOWN, still on the wire.
    assert_eq!(routes_of(&r, "tor1"), [ip("192.0.2.10")]);
    assert!(gshut(&r, "tor1") && gshut(&r, "rr"));
    assert_eq!(changed(&mut r).len(), 2);
    assert_eq!(r.next_deadline(), Some(t1 + secs(15)));

    assert!(!r.poll(t1 + secs(15) - MS));
    assert_eq!(routes_of(&r, "tor1"), [ip("192.0.2.10")]);
    assert!(!r.poll(t1 + secs(15)), "a drain is no exit");
    assert!(routes_of(&r, "tor1").is_empty());
    assert!(routes_of(&r, "rr").is_empty());

    // Undrained: back, without the community.
    r.set_drain(t1 + secs(20), false).expect("undrain");
    assert_eq!(routes_of(&r, "tor1"), [ip("192.0.2.10")]);
    assert!(!gshut(&r, "tor1"));
}

#[test]
fn an_exit_drains_only_the_peers_that_lose_the_routes_then_stops() {
    let mut r = core(config("graceful_shutdown_wait = \"15s\"", ""));
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&[("192.0.2.10", "public")]));
    let t1 = t0 + secs(1);
    assert!(!r.begin_exit(t1, BTreeSet::from(["rr".to_string()])));
    let community = |peer: &str| {
        r.table(peer)
            .expect("attached")
            .values()
            .next()
            .expect("a route")
            .communities
            .contains(&GRACEFUL_SHUTDOWN)
    };
    assert!(community("rr"), "rr loses the routes: GRACEFUL_SHUTDOWN");
    assert!(!community("tor1"), "tor1 keeps them by graceful restart");
    assert_eq!(r.next_deadline(), Some(t1 + secs(15)));
    assert!(!r.poll(t1 + secs(15) - MS));
    assert!(r.poll(t1 + secs(15)), "the wait is over: stop");
}

#[test]
fn routes_are_ready_only_after_the_first_complete_snapshot_and_its_advertise_delay() {
    let mut r = core(config("", "advertise_delay = \"5s\""));
    let t0 = Instant::now();
    let mut partial = snapshot(&[("192.0.2.10", "public")]);
    partial.synced = false;
    r.on_snapshot(t0, partial);
    assert!(!r.routes_ready());
    assert!(
        !r.poll(t0 + secs(60)) && !r.routes_ready(),
        "not without a complete view"
    );

    let t1 = t0 + secs(61);
    r.on_snapshot(t1, snapshot(&[("192.0.2.10", "public")]));
    assert!(!r.routes_ready());
    assert_eq!(r.next_deadline(), Some(t1 + secs(5)));
    r.poll(t1 + secs(5) - MS);
    assert!(!r.routes_ready());
    r.poll(t1 + secs(5));
    assert!(r.routes_ready());
    assert_eq!(routes_of(&r, "rr"), [ip("192.0.2.10")]);
}

#[test]
fn next_deadline_is_the_next_due_instant_and_none_when_idle() {
    let mut r = core(config(
        "",
        "withdraw_hold_down = \"30s\"\ndelete_delay = \"10s\"",
    ));
    let t0 = Instant::now();
    assert_eq!(r.next_deadline(), None, "idle: no tick");
    r.on_snapshot(
        t0,
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.11", "public")]),
    );
    assert_eq!(r.next_deadline(), None, "advertised, nothing pending");

    // One vanished (hold-down 30 s), one deleted 3 s later (delete_delay
    // 10 s): the deleted one is due first.
    let t1 = t0 + secs(1);
    r.on_snapshot(t1, snapshot(&[("192.0.2.10", "public")]));
    assert_eq!(r.next_deadline(), Some(t1 + secs(30)));
    let t2 = t1 + secs(3);
    let mut deleted = snapshot(&[]);
    deleted
        .absences
        .insert(ip("192.0.2.10"), crate::model::Absence::Deleted);
    r.on_snapshot(t2, deleted);
    assert_eq!(r.next_deadline(), Some(t2 + secs(10)));
    r.poll(t2 + secs(10));
    assert_eq!(routes_of(&r, "rr"), [ip("192.0.2.11")]);
    assert_eq!(r.next_deadline(), Some(t1 + secs(30)));
    r.poll(t1 + secs(30));
    assert!(routes_of(&r, "rr").is_empty());
    assert_eq!(r.next_deadline(), None);
}

#[test]
fn a_detached_peer_gets_no_table_and_a_reattached_one_starts_full() {
    let mut r = core(config("", ""));
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&[("192.0.2.10", "public")]));
    r.take_changed_tables();
    r.detach("rr");
    r.on_snapshot(
        t0 + secs(1),
        snapshot(&[("192.0.2.10", "public"), ("192.0.2.12", "public")]),
    );
    assert_eq!(changed(&mut r).keys().collect::<Vec<_>>(), ["tor1"]);
    // A reset session: attached again, empty, filled by the next publish.
    r.attach("rr");
    assert!(routes_of(&r, "rr").is_empty());
    r.publish_tables();
    assert_eq!(
        changed(&mut r),
        BTreeMap::from([("rr".to_string(), vec![ip("192.0.2.10"), ip("192.0.2.12")])])
    );
}

#[test]
fn a_drained_node_keeps_its_routes_marked_graceful_shutdown_until_the_wait_is_over() {
    let mut r = core(config("graceful_shutdown_wait = \"15s\"", ""));
    let t0 = Instant::now();
    r.on_snapshot(t0, snapshot(&[("192.0.2.10", "public")]));
    r.take_changed_tables();
    // The node cordoned: the source reports its VIPs absent, drained.
    let t1 = t0 + secs(3);
    let mut drained = snapshot(&[]);
    drained
        .absences
        .insert(ip("192.0.2.10"), crate::model::Absence::Drained);
    r.on_snapshot(t1, drained.clone());
    // RFC 8326 §3: still advertised, now with GRACEFUL_SHUTDOWN.
    let marked = |r: &Routes, peer: &str| {
        r.table(peer)
            .expect("attached")
            .values()
            .map(|a| a.communities.contains(&GRACEFUL_SHUTDOWN))
            .collect::<Vec<_>>()
    };
    assert_eq!(marked(&r, "tor1"), [true]);
    assert_eq!(marked(&r, "rr"), [true]);
    assert_eq!(changed(&mut r).len(), 2);
    assert_eq!(r.next_deadline(), Some(t1 + secs(15)));
    // The same facts again: nothing new to send.
    r.on_snapshot(t1 + secs(1), drained);
    assert!(changed(&mut r).is_empty());
    r.poll(t1 + secs(15) - MS);
    assert_eq!(marked(&r, "tor1"), [true]);
    r.poll(t1 + secs(15));
    assert!(routes_of(&r, "tor1").is_empty());
    assert!(routes_of(&r, "rr").is_empty());
}

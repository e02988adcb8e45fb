//! What the unit tests prove on scripted peers, shown again against FRR's
//! bgpd in network namespaces: MED on the wire, one UPDATE beyond 4096
//! octets after extended messages are negotiated (RFC 8654), routes kept
//! stale after a Cease that is not a Hard Reset (RFC 8538), a damped VIP
//! kept past the hold-down, End-of-RIB and readiness waiting for the
//! source's first complete view, and MRAI batching (RFC 4271 §9.2.1.1).
//! Every count read from FRR or holdfast must be present: a missing one
//! fails the test.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use testlab::{Afi, Frr, Lab, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

fn node_ip() -> IpAddr {
    NODE.parse().unwrap()
}

/// holdfast's config: one eBGP peer `tor1` (fast timers), the VIP file,
/// and the advertisement `public`; a test adds to them.
fn conf() -> Config {
    conf_with(Advertisement::public("65001:100"))
}

/// [`conf`] with this advertisement.
fn conf_with(ad: Advertisement) -> Config {
    Config::node(65001, NODE)
        .peer(Peer::new("tor1", TOR, 65000).fast())
        .stability(Stability::new())
        .advertisement(ad)
}

/// The lab, FRR (zebra and bgpd, graceful restart helper) with
/// `preamble` lines before its config (e.g. `debug bgp updates in`).
/// zebra, because our IPv6 routes carry a link-local next hop beside the
/// global one, which bgpd without zebra rejects.
fn frr_lab(preamble: &str) -> (Lab, Frr) {
    Tor::new().zebra().preamble(preamble).start()
}

/// Waits until FRR's UPDATE count from the node stays the same for a
/// second; returns it.
fn settled_updates(frr: &Frr) -> u64 {
    let mut last = frr.updates_received(node_ip());
    wait_until(LONG, "FRR's UPDATE count to settle", || {
        std::thread::sleep(Duration::from_secs(1));
        let now = frr.updates_received(node_ip());
        let settled = now == last;
        last = now;
        settled.then_some(now)
    })
}

/// `gracefulRestartInfo.ipv4Unicast.endOfRibStatus.endOfRibRecv` of the
/// node at FRR: whether FRR has received our IPv4 End-of-RIB on this
/// session. Panics if FRR does not say (a missing field is not "no").
fn end_of_rib_received(frr: &Frr) -> bool {
    let n = frr.neighbor(node_ip());
    n["gracefulRestartInfo"]["ipv4Unicast"]["endOfRibStatus"]["endOfRibRecv"]
        .as_bool()
        .unwrap_or_else(|| {
            panic!("FRR shows no gracefulRestartInfo.ipv4Unicast.endOfRibStatus.endOfRibRecv: {n}")
        })
}

/// Whether every path FRR has for `prefix` is stale; panics if it has none.
fn stale(frr: &Frr, prefix: &str) -> bool {
    let route = frr
        .prefix(prefix)
        .unwrap_or_else(|| panic!("FRR has no route for {prefix}"));
    let paths = route["paths"].as_array().expect("paths");
    assert!(!paths.is_empty(), "{route}");
    paths.iter().all(|p| p["stale"] == true)
}

// ----------------------------------------------------------------------- MED

/// The advertisement's `med` reaches FRR as MULTI_EXIT_DISC (RFC 4271
/// §5.1.4), beside the communities.
#[test]
fn med_reaches_frr() {
    testlab::require_root();
    let (lab, frr) = frr_lab("");
    let _node = Holdfast::start(
        &lab.node,
        &conf_with(Advertisement::public("65001:100").med(4242)).to_toml(),
        &vips(&["198.51.100.10", "2001:db8:100::10"]),
    );
    frr.wait_established(node_ip(), LONG);
    for prefix in ["198.51.100.10/32", "2001:db8:100::10/128"] {
        let route = frr.wait_prefix(prefix, LONG);
        let path = &route["paths"][0];
        assert_eq!(path["metric"], 4242, "MED of {prefix}: {route}");
        assert_eq!(path["community"]["string"], "65001:100", "{route}");
    }
}

// ------------------------------------------------------- extended messages

/// RFC 8654: both sides advertise the Extended Message capability, so an
/// UPDATE may reach 65535 octets. 3000 new /32s with one set of
/// attributes need 3000 × 5 = 15,000 octets of NLRI: four UPDATEs of at
/// most 4096 octets, one extended UPDATE. FRR takes it and has every
/// prefix.
#[test]
fn one_update_beyond_4096_octets_after_extended_messages() {
    testlab::require_root();
    let (lab, frr) = frr_lab("");
    let node = Holdfast::start(&lab.node, &conf().to_toml(), &vips(&["198.51.100.10"]));
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let n = frr.neighbor(node_ip());
    assert_eq!(
        n["neighborCapabilities"]["extendedMessage"], "advertisedAndReceived",
        "{n}"
    );
    let before = settled_updates(&frr);
    const BULK: u32 = 3000;
    let mut text = vips(&["198.51.100.10"]);
    for i in 0..BULK {
        text.push_str(&format!(
            "[[vip]]\naddress = \"198.18.{}.{}\"\n",
            i / 256,
            i % 256
        ));
    }
    node.write_vips(&text);
    wait_until(LONG, "3001 routes at FRR", || {
        (frr.count(Afi::Ipv4) == BULK as usize + 1).then_some(())
    });
    let updates = settled_updates(&frr) - before;
    // At most 4096 octets: 19 header + 2 + 2 + attributes (ORIGIN 4,
    // AS_PATH 9, NEXT_HOP 7, COMMUNITIES 7) leave 4046 octets, 809 /32s.
    let packed_at_4096 = u64::from(BULK).div_ceil(809);
    assert_eq!(packed_at_4096, 4);
    assert!(
        updates < packed_at_4096,
        "{updates} UPDATEs for {BULK} prefixes: not larger than 4096 octets"
    );
    assert_eq!(updates, 1, "one extended UPDATE");
    assert_eq!(
        node.metric(
            "holdfast_peer_prefixes_advertised",
            &[("peer", "tor1"), ("family", "ipv4")]
        ),
        f64::from(BULK + 1)
    );
}

// ------------------------------------------------------------- the N bit

/// RFC 8538: with the N bit negotiated, a NOTIFICATION other than Cease/
/// Hard Reset starts graceful restart at the receiver. A config reload
/// that changes the peer (here its port, so that the session cannot come
/// back) resets the session with Cease/Other Configuration Change, not
/// wrapped in a Hard Reset: FRR keeps our routes, marked stale, for as
/// long as we stay away, and clears the marks at End-of-RIB when the
/// session returns. The routes never leave FRR's table.
#[test]
fn frr_keeps_routes_stale_after_a_cease_without_hard_reset() {
    testlab::require_root();
    let (lab, frr) = frr_lab("debug bgp graceful-restart\n");
    let prefixes = ["198.51.100.20/32", "2001:db8:100::20/128"];
    let node = Holdfast::start(
        &lab.node,
        &conf().to_toml(),
        &vips(&["198.51.100.20", "2001:db8:100::20"]),
    );
    frr.wait_established(node_ip(), LONG);
    for p in prefixes {
        frr.wait_prefix(p, LONG);
    }
    let n = frr.neighbor(node_ip());
    assert_eq!(n["gracefulRestartInfo"]["nBit"], true, "N bit: {n}");
    wait_until(LONG, "End-of-RIB, no stale paths", || {
        (end_of_rib_received(&frr) && prefixes.iter().all(|p| !stale(&frr, p))).then_some(())
    });

    // The peer changes: its port. Reset with Cease/6, then our new
    // connection is refused (nothing listens on 1179).
    node.write_config(&conf().with_peer("tor1", |p| p.port(1179)).to_toml());
    frr.wait_state_not(node_ip(), "Established", LONG);
    let n = frr.neighbor(node_ip());
    assert_eq!(
        n["lastNotificationReason"], "Cease/Other Configuration Change",
        "{n}"
    );
    assert_eq!(n["lastNotificationHardReset"], false, "{n}");
    // Stale, and kept: well past the moment a hard reset would have
    // removed them.
    wait_until(LONG, "FRR to mark our routes stale", || {
        prefixes.iter().all(|p| stale(&frr, p)).then_some(())
    });
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        for p in prefixes {
            assert!(stale(&frr, p), "{p} not stale while we are away");
        }
        assert_ne!(frr.state(node_ip()), "Established");
        std::thread::sleep(Duration::from_millis(200));
    }
    // Back: the session returns, the table and End-of-RIB clear the marks.
    node.write_config(&conf().to_toml());
    frr.wait_established(node_ip(), LONG);
    wait_until(LONG, "End-of-RIB to clear the stale marks", || {
        (end_of_rib_received(&frr) && prefixes.iter().all(|p| !stale(&frr, p))).then_some(())
    });
    let log = frr.log();
    assert!(!log.contains("withdrawn"), "FRR withdrew something:\n{log}");
}

// ------------------------------------------------------------------ damping

/// `[stability.damping]`: a VIP that keeps vanishing from the VIP file
/// collects penalties; above the suppress threshold its next absence does
/// not end in a withdrawal at the hold-down. It stays at FRR past
/// `withdraw_hold_down`, shown as damped, and goes once the penalty has
/// decayed below the reuse threshold. Nothing reaches FRR meanwhile.
#[test]
fn a_damped_vip_stays_at_frr_past_the_hold_down() {
    testlab::require_root();
    let (lab, frr) = frr_lab("");
    let stability = Stability::new().withdraw_hold_down("3s").damping(
        Damping::new()
            .half_life("10s")
            .penalty(1000)
            .suppress_threshold(2000)
            .reuse_threshold(750)
            .max_suppress("60s"),
    );
    let with = vips(&["198.51.100.30", "198.51.100.31"]);
    let without = vips(&["198.51.100.31"]);
    let node = Holdfast::start(&lab.node, &conf().stability(stability).to_toml(), &with);
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.30/32", LONG);
    let before = settled_updates(&frr);

    // Three absences of 1.2 s, each shorter than the hold-down: penalties
    // 1000, ~1850, ~2560 — the third crosses the suppress threshold.
    for _ in 0..3 {
        node.write_vips(&without);
        std::thread::sleep(Duration::from_millis(1200));
        node.write_vips(&with);
        std::thread::sleep(Duration::from_millis(1200));
    }
    assert_eq!(
        node.metric("holdfast_damping_suppressions_total", &[]),
        1.0,
        "one damping episode began"
    );
    // Gone for good now.
    node.write_vips(&without);
    let removed = Instant::now();
    let damped = wait_until(Duration::from_secs(5), "holdfast to show it damped", || {
        node.status()["routes"]
            .as_array()?
            .iter()
            .find(|r| r["prefix"] == "198.51.100.30/32" && r["state"] == "damped")
            .cloned()
    });
    assert!(
        damped["figure_of_merit"]
            .as_f64()
            .is_some_and(|f| f > 2000.0),
        "{damped}"
    );
    // Past the hold-down (3 s) by as much again: still at FRR.
    while removed.elapsed() < Duration::from_secs(6) {
        assert!(
            frr.prefix("198.51.100.30/32").is_some(),
            "withdrawn {:?} after the removal, while damped\n{}",
            removed.elapsed(),
            node.log()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(frr.updates_received(node_ip()), before, "no UPDATE so far");
    let (code, text) = node.explain("198.51.100.30");
    assert_eq!(code, 0, "{text}");
    // The penalty (about 3200) decays to 750 in about two half-lives.
    frr.wait_no_prefix("198.51.100.30/32", Duration::from_secs(60));
    let gone = removed.elapsed();
    assert!(gone > Duration::from_secs(10), "withdrawn after {gone:?}");
    assert!(frr.prefix("198.51.100.31/32").is_some());
    assert_eq!(
        frr.updates_received(node_ip()),
        before + 1,
        "one withdrawal"
    );
}

// ------------------------------------- readiness and End-of-RIB at start

/// A holdfast whose VIP file is broken at start: the session comes up but
/// End-of-RIB waits (RFC 4724 §4.1: End-of-RIB says the table is complete,
/// and it is not); `/readyz` answers 503 and the source metrics say why.
/// When the file is fixed, the routes reach FRR before End-of-RIB does,
/// `/readyz` turns 200 and the metrics carry the new values.
#[test]
fn readiness_and_end_of_rib_wait_for_the_sources_first_complete_view() {
    testlab::require_root();
    let (lab, frr) = frr_lab("debug bgp updates in\n");
    let node = Holdfast::start(
        &lab.node,
        &conf().to_toml(),
        "[[vip]]\naddress = \"198.51.100.40\n",
    );
    frr.wait_established(node_ip(), LONG);
    // Established, and it stays without End-of-RIB and without UPDATEs.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(4) {
        assert!(!end_of_rib_received(&frr), "End-of-RIB before the source");
        assert_eq!(frr.updates_received(node_ip()), 0);
        std::thread::sleep(Duration::from_millis(250));
    }
    let (code, body) = node.http_get("/readyz");
    assert_eq!(code, 503, "{body}");
    assert!(
        body.starts_with("not ready: waiting for the source's first complete view: ")
            && body.contains("vips.toml:"),
        "{body}"
    );
    let (code, _) = node.http_get("/healthz");
    assert_eq!(code, 200, "alive though not ready");
    let e = node.exposition();
    for (name, value) in [
        ("holdfast_source_synced", 0.0),
        ("holdfast_source_healthy", 0.0),
        ("holdfast_source_vips", 0.0),
    ] {
        assert_eq!(metric_value(&e, name, &[("kind", "file")]), value, "{name}");
    }
    assert_eq!(
        metric_value(&e, "holdfast_peer_established", &[("peer", "tor1")]),
        1.0
    );
    assert_eq!(
        metric_value(&e, "holdfast_peer_updates_sent_total", &[("peer", "tor1")]),
        0.0
    );

    // Fixed.
    node.write_vips(&vips(&["198.51.100.40", "198.51.100.41"]));
    frr.wait_prefix("198.51.100.40/32", LONG);
    frr.wait_prefix("198.51.100.41/32", LONG);
    wait_until(LONG, "End-of-RIB at FRR", || {
        end_of_rib_received(&frr).then_some(())
    });
    let log = frr.log();
    let end_of_rib = log
        .find("rcvd End-of-RIB")
        .unwrap_or_else(|| panic!("FRR logged no End-of-RIB:\n{log}"));
    for p in ["198.51.100.40/32", "198.51.100.41/32"] {
        let route = log
            .find(&format!("rcvd {p} "))
            .unwrap_or_else(|| panic!("FRR logged no {p}:\n{log}"));
        assert!(route < end_of_rib, "{p} after End-of-RIB:\n{log}");
    }
    let (code, body) = wait_until(LONG, "/readyz to answer 200", || {
        let (code, body) = node.http_get("/readyz");
        (code == 200).then_some((code, body))
    });
    assert_eq!((code, body.as_str()), (200, "ready\n"));
    let e = node.exposition();
    for (name, value) in [
        ("holdfast_source_synced", 1.0),
        ("holdfast_source_healthy", 1.0),
        ("holdfast_source_vips", 2.0),
    ] {
        assert_eq!(metric_value(&e, name, &[("kind", "file")]), value, "{name}");
    }
    assert_eq!(
        metric_value(
            &e,
            "holdfast_peer_prefixes_advertised",
            &[("peer", "tor1"), ("family", "ipv4")]
        ),
        2.0
    );
    // What holdfast counts as sent is what FRR counts as received: the
    // routes (one UPDATE) and the End-of-RIB of each family.
    let sent = metric_value(&e, "holdfast_peer_updates_sent_total", &[("peer", "tor1")]);
    assert_eq!(sent, frr.updates_received(node_ip()) as f64);
    assert_eq!(sent, 3.0, "one UPDATE with both routes, two End-of-RIBs");
}

// --------------------------------------------------------------------- MRAI

/// MinRouteAdvertisementIntervalTimer (RFC 4271 §9.2.1.1) of 8 s: the
/// first of five VIPs added one after another goes out at once, the other
/// four, added within the next 2 s, wait for the timer and go out
/// together, in one UPDATE, about 8 s after the first.
#[test]
fn mrai_batches_a_burst_into_one_update() {
    testlab::require_root();
    const MRAI: Duration = Duration::from_secs(8);
    let (lab, frr) = frr_lab("");
    let mut list = vec!["198.51.100.50"];
    let node = Holdfast::start(
        &lab.node,
        &conf().with_peer("tor1", |p| p.mrai("8s")).to_toml(),
        &vips(&list),
    );
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.50/32", LONG);
    wait_until(LONG, "End-of-RIB at FRR", || {
        end_of_rib_received(&frr).then_some(())
    });
    let before = settled_updates(&frr);
    // Past the interval started by the initial table.
    std::thread::sleep(MRAI);
    let burst = [
        "198.51.100.51",
        "198.51.100.52",
        "198.51.100.53",
        "198.51.100.54",
        "198.51.100.55",
    ];
    node.write_vips(&vips(&[list.as_slice(), &burst[..1]].concat()));
    frr.wait_prefix("198.51.100.51/32", Duration::from_secs(5));
    // The first went at once; from here the timer runs.
    let first = Instant::now();
    list.push(burst[0]);
    for vip in &burst[1..] {
        std::thread::sleep(Duration::from_millis(500));
        list.push(vip);
        node.write_vips(&vips(&list));
    }
    std::thread::sleep(Duration::from_secs(1));
    // Everything so far well inside the interval (the batch is due about
    // 8 s after the first UPDATE).
    assert!(
        first.elapsed() < MRAI - Duration::from_secs(3),
        "the burst took {:?}",
        first.elapsed()
    );
    assert_eq!(
        frr.updates_received(node_ip()),
        before + 1,
        "the rest waits for the MRAI timer"
    );
    for vip in &burst[1..] {
        assert!(
            frr.prefix(&format!("{vip}/32")).is_none(),
            "{vip} went early"
        );
    }
    for vip in &burst[1..] {
        frr.wait_prefix(&format!("{vip}/32"), LONG);
    }
    let late = first.elapsed();
    assert!(
        late >= MRAI - Duration::from_secs(2),
        "the batch came {late:?} after the first UPDATE, MRAI is {MRAI:?}"
    );
    assert_eq!(
        settled_updates(&frr),
        before + 2,
        "one UPDATE at once, one for the four held back"
    );
}

//! RFC 8326 graceful shutdown against FRR's bgpd, in network namespaces:
//! `holdfast drain` / `undrain`, and SIGTERM without graceful restart.

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testlab::{Frr, Lab};
const VIP: &str = "198.51.100.10";
const PREFIX: &str = "198.51.100.10/32";

/// A node peering with the router at 192.0.2.1, with this
/// `graceful_shutdown_wait`.
fn conf(node_asn: u32, router_asn: u32, wait: &str) -> Config {
    conf_with(node_asn, router_asn, wait, |p| p)
}

/// [`conf`] with more to the peer.
fn conf_with(
    node_asn: u32,
    router_asn: u32,
    wait: &str,
    peer: impl FnOnce(Peer) -> Peer,
) -> Config {
    Config::node(node_asn, "192.0.2.2")
        .graceful_shutdown_wait(wait)
        .peer(peer(Peer::new("tor", "192.0.2.1", router_asn).fast()))
        .stability(Stability::new())
        .advertisement(Advertisement::public("65001:100").local_pref(200))
}

/// FRR at 192.0.2.1 in AS `router_asn`, peering with the node at
/// 192.0.2.2 (AS 65001) and logging the UPDATEs it receives.
fn frr_logging_updates(lab: &Lab, router_asn: u32) -> Frr {
    Tor::new()
        .asn(router_asn)
        .zebra()
        .preamble("debug bgp updates in\n")
        .on(lab)
}

/// iBGP between FRR and the node, with a `graceful_shutdown_wait` of 10
/// min: FRR, the node, and FRR's path for the VIP once it arrived with its
/// community.
fn ibgp_advertised(lab: &Lab) -> (Frr, Holdfast<'_>, Value) {
    let frr = frr_logging_updates(lab, 65001);
    let node = Holdfast::start(
        &lab.node,
        &conf(65001, 65001, "10m").to_toml(),
        &vips(&[VIP]),
    );
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    let normal = wait_path(&frr, "the VIP advertised", |p| !p.is_null());
    assert_eq!(communities(&normal), "65001:100", "{normal}");
    (frr, node, normal)
}

/// `holdfast drain` or `undrain` inside the node's namespace, on the
/// daemon's Unix socket: its output.
fn cli(node: &Holdfast, command: &str) -> String {
    let out = node.cli(command);
    assert!(
        out.status.success(),
        "holdfast {command}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The one path FRR has for the VIP, waited for until `pick` accepts it.
fn wait_path(frr: &Frr, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    testlab::wait_for(LONG, what, || {
        let route = frr.prefix(PREFIX).ok_or("no route")?;
        let path = route["paths"][0].clone();
        if pick(&path) {
            Ok(path)
        } else {
            Err(format!("{path}"))
        }
    })
}

fn communities(path: &Value) -> String {
    path["community"]["string"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// FRR 8.4 names GRACEFUL_SHUTDOWN (65535:0): `graceful-shutdown` in
/// `community.string`, `gracefulShutdown` in `community.list`.
fn gshut(path: &Value) -> bool {
    path["community"]["list"]
        .as_array()
        .is_some_and(|l| l.iter().any(|c| c == "gracefulShutdown"))
}

/// How many withdrawals of the VIP FRR has logged (`debug bgp updates in`).
fn withdrawals(frr: &Frr) -> usize {
    frr.log()
        .matches(&format!(
            "rcvd UPDATE about {PREFIX} IPv4 unicast -- withdrawn"
        ))
        .count()
}

/// iBGP: the drain re-advertises with GRACEFUL_SHUTDOWN and LOCAL_PREF 0;
/// undrain inside the wait puts the normal attributes back with one UPDATE
/// and nothing is ever withdrawn.
#[test]
fn undrain_inside_the_wait_restores_the_route_without_a_withdrawal() {
    testlab::require_root();
    let lab = Lab::pair();
    let (frr, node, normal) = ibgp_advertised(&lab);
    assert_eq!(normal["locPrf"], 200, "{normal}");

    let said = cli(&node, "drain");
    assert!(
        said.starts_with("draining: routes carry GRACEFUL_SHUTDOWN"),
        "{said}"
    );
    let drained = wait_path(&frr, "the VIP marked GRACEFUL_SHUTDOWN", gshut);
    // RFC 8326: the advertisement's own community stays; LOCAL_PREF 0 for
    // an internal peer.
    assert_eq!(
        communities(&drained),
        "65001:100 graceful-shutdown",
        "{drained}"
    );
    assert_eq!(drained["locPrf"], 0, "{drained}");
    let status = node.status();
    assert_eq!(status["drain"]["state"], "draining", "{status}");
    assert!(
        status["drain"]["seconds_left"].as_f64().unwrap() > 60.0,
        "{status}"
    );
    assert!(
        node.status_text()
            .contains("draining: routes carry GRACEFUL_SHUTDOWN")
    );
    let (code, why) = node.explain(VIP);
    assert_eq!(code, 0, "still advertised while draining: {why}");
    assert!(why.contains("this node is draining"), "{why}");

    let said = cli(&node, "undrain");
    assert_eq!(said.trim(), "not draining: routes advertised normally");
    let back = wait_path(&frr, "the VIP without GRACEFUL_SHUTDOWN", |p| !gshut(p));
    assert_eq!(communities(&back), "65001:100", "{back}");
    assert_eq!(back["locPrf"], 200, "{back}");
    assert_eq!(withdrawals(&frr), 0, "never withdrawn:\n{}", frr.log());
    assert!(node.status()["drain"].is_null());
}

/// Over TCP, without a token configured, `POST /v1/drain` and
/// `/v1/undrain` are refused and the route stays as it was at the router;
/// `holdfast drain`, on the daemon's Unix socket, drains.
#[test]
fn a_tcp_drain_without_a_token_is_refused_and_the_route_stays() {
    testlab::require_root();
    let lab = Lab::pair();
    let (frr, node, _) = ibgp_advertised(&lab);

    let refused = |path: &str| {
        for headers in ["", "Authorization: Bearer c2VjcmV0LXRva2VuLTE2Yg==\\r\\n"] {
            let (code, body) = node.http_post(path, headers);
            assert_eq!(code, 403, "POST {path} ({headers:?}): {body}");
            assert!(
                body.contains("not served over TCP without a token"),
                "{body}"
            );
        }
    };
    refused("/v1/drain");
    // Nothing changed: no drain, the route as it was, never withdrawn.
    let status = node.status();
    assert!(status["drain"].is_null(), "{status}");
    let path = frr.prefix(PREFIX).expect("the VIP at the router")["paths"][0].clone();
    assert!(!gshut(&path), "{path}");
    assert_eq!(communities(&path), "65001:100", "{path}");
    assert_eq!(path["locPrf"], 200, "{path}");
    assert_eq!(withdrawals(&frr), 0, "{}", frr.log());

    // The socket is the way.
    let said = cli(&node, "drain");
    assert!(
        said.starts_with("draining: routes carry GRACEFUL_SHUTDOWN"),
        "{said}"
    );
    wait_path(&frr, "the VIP marked GRACEFUL_SHUTDOWN", gshut);
    // And TCP cannot end it either.
    refused("/v1/undrain");
    let status = node.status();
    assert_eq!(status["drain"]["state"], "draining", "{status}");
}

/// eBGP: after graceful_shutdown_wait the route is withdrawn; undrain
/// advertises it again, without the community.
#[test]
fn drain_withdraws_after_the_wait_and_undrain_brings_the_route_back() {
    testlab::require_root();
    const WAIT: Duration = Duration::from_secs(3);
    let lab = Lab::pair();
    let frr = frr_logging_updates(&lab, 65000);
    let node = Holdfast::start(
        &lab.node,
        &conf(65001, 65000, "3s").to_toml(),
        &vips(&[VIP]),
    );
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    wait_path(&frr, "the VIP advertised", |p| !p.is_null() && !gshut(p));

    let before = Instant::now();
    cli(&node, "drain");
    let drained = wait_path(&frr, "the VIP marked GRACEFUL_SHUTDOWN", gshut);
    // holdfast sends no LOCAL_PREF over eBGP (RFC 4271 §5.1.5)...
    let log = frr.log();
    let update = log
        .lines()
        .find(|l| l.contains("rcvd UPDATE w/ attr") && l.contains("graceful-shutdown"))
        .unwrap_or_else(|| panic!("FRR logged no UPDATE with the community:\n{log}"));
    assert!(!update.contains("localpref"), "{update}");
    // ...and FRR 8.4, the receiver, lowers the path to LOCAL_PREF 0 itself
    // (RFC 8326 §3's receiver side), no route-map needed.
    assert_eq!(drained["locPrf"], 0, "{drained}");
    frr.wait_no_prefix(PREFIX, LONG);
    assert!(
        before.elapsed() >= WAIT,
        "withdrawn {:?} after the drain, before graceful_shutdown_wait",
        before.elapsed()
    );
    assert_eq!(withdrawals(&frr), 1, "{}", frr.log());
    let status = node.status();
    assert_eq!(status["drain"]["state"], "drained", "{status}");
    assert_eq!(frr.state("192.0.2.2".parse().unwrap()), "Established");

    cli(&node, "undrain");
    let back = wait_path(&frr, "the VIP advertised again", |p| !p.is_null());
    assert_eq!(communities(&back), "65001:100", "{back}");
}

/// SIGTERM with graceful restart off: GRACEFUL_SHUTDOWN first, the route
/// withdrawn after the wait, then the session closes with
/// Cease/Administrative Shutdown.
#[test]
fn sigterm_without_graceful_restart_shuts_down_gracefully() {
    testlab::require_root();
    const WAIT: Duration = Duration::from_secs(3);
    let lab = Lab::pair();
    let frr = frr_logging_updates(&lab, 65000);
    let mut node = Holdfast::start(
        &lab.node,
        &conf_with(65001, 65000, "3s", |p| {
            p.graceful_restart(GracefulRestart::new().enabled(false))
        })
        .to_toml(),
        &vips(&[VIP]),
    );
    let neighbor = "192.0.2.2".parse().unwrap();
    frr.wait_established(neighbor, LONG);
    wait_path(&frr, "the VIP advertised", |p| !p.is_null() && !gshut(p));

    let before = Instant::now();
    node.kill(testlab::Signal::Term);
    wait_path(&frr, "the VIP marked GRACEFUL_SHUTDOWN", gshut);
    assert_eq!(
        frr.state(neighbor),
        "Established",
        "the session stays for the wait"
    );
    let status = node.status();
    assert_eq!(status["drain"]["exiting"], true, "{status}");
    frr.wait_no_prefix(PREFIX, LONG);
    assert!(
        before.elapsed() >= WAIT,
        "withdrawn after {:?}",
        before.elapsed()
    );
    assert!(node.wait_exit().success(), "{}", node.log());
    frr.wait_state_not(neighbor, "Established", LONG);
    let n = frr.neighbor(neighbor);
    assert_eq!(
        n["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{n}"
    );
    // The withdrawal came as an UPDATE before the NOTIFICATION.
    let log = frr.log();
    let withdrawn = log
        .find(&format!(
            "rcvd UPDATE about {PREFIX} IPv4 unicast -- withdrawn"
        ))
        .unwrap_or_else(|| panic!("FRR logged no withdrawal:\n{log}"));
    let notification = log
        .find("%NOTIFICATION")
        .unwrap_or_else(|| panic!("FRR logged no NOTIFICATION:\n{log}"));
    assert!(withdrawn < notification, "{log}");
}

/// The mass-withdrawal guard in the daemon: a VIP file emptied at once
/// withdraws half the routes, holds the rest back, and says so in explain,
/// status and /metrics; FRR keeps the held-back routes.
#[test]
fn an_emptied_vip_file_is_withdrawn_progressively() {
    testlab::require_root();
    let (lab, frr) = Tor::new().zebra().start();
    let all = [
        "198.51.100.20",
        "198.51.100.21",
        "198.51.100.22",
        "198.51.100.23",
    ];
    // One held-back withdrawal an hour: the test sees the guard hold.
    let conf = conf(65001, 65000, "0s").stability(
        Stability::new()
            .withdraw_hold_down("0s")
            .max_withdraw_fraction(0.5)
            .withdraw_rate("1/h"),
    );
    let node = Holdfast::start(&lab.node, &conf.to_toml(), &vips(&all));
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    for a in all {
        frr.wait_prefix(&format!("{a}/32"), LONG);
    }
    node.write_vips("");
    // Prefix order: the first two go at once, the last two are held back.
    for a in &all[..2] {
        frr.wait_no_prefix(&format!("{a}/32"), LONG);
    }
    let (code, why) = node.explain(all[3]);
    assert_eq!(code, 0, "still advertised: {why}");
    assert!(
        why.contains(
            "withdrawal deferred by the mass-withdrawal guard: 4 of 4 routes would go at once"
        ),
        "{why}"
    );
    let status = node.status();
    assert_eq!(status["counters"]["withdrawals_deferred"], 2, "{status}");
    let states: Vec<&str> = status["routes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, ["deferred", "deferred"], "{status}");
    let metrics = node.metrics();
    assert!(
        metrics.contains("\nholdfast_withdrawals_deferred 2\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("\nholdfast_withdrawals_deferred_total 2\n"),
        "{metrics}"
    );
    for a in &all[2..] {
        assert!(frr.prefix(&format!("{a}/32")).is_some(), "{a} kept at FRR");
    }
    // Back in the file: the held-back ones cost nothing, the others return.
    node.write_vips(&vips(&all));
    for a in all {
        frr.wait_prefix(&format!("{a}/32"), LONG);
    }
    testlab::wait_for(LONG, "nothing deferred", || {
        let s = node.status();
        if s["counters"]["withdrawals_deferred"] == 0 {
            Ok(())
        } else {
            Err(format!("{}", s["counters"]))
        }
    });
}

/// The file source's signal for a node going away: `holdfast drain` before
/// the stop (a shutdown-only systemd unit's ExecStop). SIGTERM during the
/// drain then finishes it and withdraws, with graceful restart enabled:
/// the router is not left holding stale routes for restart_time. Without
/// the drain the same SIGTERM keeps them (the pod-restart path).
#[test]
fn a_drain_before_sigterm_withdraws_even_with_graceful_restart() {
    testlab::require_root();
    let (lab, frr) = Tor::new().zebra().start();
    let mut node = Holdfast::start(
        &lab.node,
        &conf(65001, 65000, "3s").to_toml(),
        &vips(&[VIP]),
    );
    let neighbor = "192.0.2.2".parse().unwrap();
    frr.wait_established(neighbor, LONG);
    wait_path(&frr, "the VIP advertised", |p| !p.is_null() && !gshut(p));

    // A pod restart first: kept as stale, no NOTIFICATION.
    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success(), "{}", node.log());
    wait_path(&frr, "the VIP kept as stale", |p| p["stale"] == true);
    assert!(
        node.log()
            .contains("exit: routes kept through graceful restart (RFC 4724)"),
        "{}",
        node.log()
    );
    node.run(&[]);
    wait_path(&frr, "the VIP fresh again", |p| {
        !p.is_null() && p["stale"] != true
    });

    // Then the node going away: drain, SIGTERM inside the wait.
    cli(&node, "drain");
    wait_path(&frr, "the VIP marked GRACEFUL_SHUTDOWN", gshut);
    node.kill(testlab::Signal::Term);
    frr.wait_no_prefix(PREFIX, LONG);
    assert!(node.wait_exit().success(), "{}", node.log());
    frr.wait_state_not(neighbor, "Established", LONG);
    assert!(frr.prefix(PREFIX).is_none(), "nothing left stale at FRR");
    let n = frr.neighbor(neighbor);
    assert_eq!(
        n["lastNotificationReason"], "Cease/Administrative Shutdown",
        "{n}"
    );
    assert!(
        node.log().contains(
            "exit: routes withdrawn after graceful shutdown (RFC 8326): this node is drained"
        ),
        "{}",
        node.log()
    );
}

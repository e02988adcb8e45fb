//! Peers that misbehave on purpose, against the real daemon in network
//! namespaces: memory stays flat whatever a peer sends, and a peer that
//! stops reading is closed after the RFC 9687 send hold time.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testlab::{Lab, LabDir};

const MIB: u64 = 1 << 20;
const FLOOD: u64 = 100 * MIB;

/// VmRSS of `pid` in octets, from /proc/PID/status.
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("/proc/{pid}/status: {e}"));
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status:\n{status}"))
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .expect("VmRSS in kB");
    kib * 1024
}

/// holdfast listening, with one passive peer at the router (IPv4 unicast;
/// `more` adds to it).
fn passive_conf(lab: &Lab, name: &str, more: impl FnOnce(Peer) -> Peer) -> String {
    Config::node(65001, &lab.node_v4.to_string())
        .listen("0.0.0.0:179")
        .peer(more(Peer::new(name, lab.router_v4, 65000).passive()).families(&["ipv4-unicast"]))
        .stability(Stability::new())
        .advertisement(Advertisement::new("public"))
        .to_toml()
}

/// `GET /healthz` inside the node namespace: the status line.
fn healthz(node: &Holdfast) -> String {
    let out = node.exec(&[
        "timeout",
        "5",
        "bash",
        "-c",
        "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3; head -n1 <&3",
    ]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn a_route_refresh_flood_from_a_peer_that_never_reads_keeps_memory_flat() {
    let lab = Lab::pair();
    let (node_addr, router_addr) = (lab.node_v4.to_string(), lab.router_v4.to_string());
    // Hold time 15 s: the peer's keepalives keep the session up, and the
    // send hold time (twice it, 30 s) outlasts the flood.
    let conf = passive_conf(&lab, "hostile", |p| p.hold_time("15s").keepalive("5s"));
    // Enough VIPs that each answer is tens of kilobytes: the socket
    // buffers fill and the output queue reaches its bound.
    let vip_list: Vec<String> = (0..4000)
        .map(|i| format!("198.18.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let vip_refs: Vec<&str> = vip_list.iter().map(String::as_str).collect();
    let node = Holdfast::start(&lab.node, &conf, &vips(&vip_refs));
    let pid = node.pid();
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "holdfast", "the pid sampled is the daemon's");

    let dir = LabDir::new("flood-peer");
    let script = dir.write(
        "flood_peer.py",
        include_str!("fixtures/peers/flood_peer.py"),
    );
    let result = dir.join("result.json");
    let log = std::fs::File::create(dir.join("peer.log")).unwrap();
    let mut peer = lab
        .router
        .command(&[
            "python3",
            &script.display().to_string(),
            &node_addr,
            "65000",
            &router_addr,
            "15",
            &FLOOD.to_string(),
            &result.display().to_string(),
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("python3 runs the scripted peer");

    let before = rss(pid);
    let mut max = before;
    let mut flooded_at = None;
    let mut last_health = Instant::now() - Duration::from_secs(10);
    let mut health_checks = 0;
    let started = Instant::now();
    let status = loop {
        if let Some(status) = peer.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "the scripted peer is still running after 5 minutes:\n{}",
            node.log()
        );
        max = max.max(rss(pid));
        if flooded_at.is_none() && dir.join("result.json.flooded").exists() {
            flooded_at = Some(Instant::now());
        }
        if last_health.elapsed() >= Duration::from_secs(1) {
            let line = healthz(&node);
            assert!(line.contains(" 200"), "/healthz during the flood: {line:?}");
            health_checks += 1;
            last_health = Instant::now();
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let peer_log = dir.read("peer.log");
    assert!(status.success(), "scripted peer: {status}\n{peer_log}");
    let r: serde_json::Value = serde_json::from_str(&dir.read("result.json")).unwrap();
    println!("scripted peer: {r}");
    println!(
        "RSS before {:.1} MiB, max {:.1} MiB during {} MiB of ROUTE-REFRESH in {:.1} s; \
         closed {:?} s after the flood ({}); {health_checks} /healthz answered",
        before as f64 / MIB as f64,
        max as f64 / MIB as f64,
        r["sent"].as_u64().unwrap_or(0) / MIB,
        r["flood_secs"].as_f64().unwrap_or(0.0),
        r["closed_after"],
        r["close_error"],
    );
    assert!(
        max < 64 * MIB,
        "RSS reached {:.1} MiB (before: {:.1} MiB)",
        max as f64 / MIB as f64,
        before as f64 / MIB as f64
    );
    // holdfast read all of it: the reader keeps going while the writer is
    // stuck, and the peer's ROUTE-REFRESHes all arrived.
    assert_eq!(r["flood_error"], serde_json::Value::Null, "{r}");
    assert!(r["sent"].as_u64().unwrap() >= FLOOD, "{r}");
    // Then holdfast closed the session: the peer never read, so the send
    // hold timer (RFC 9687, 30 s here) expired.
    assert!(
        r["closed_after"].is_f64(),
        "holdfast never closed the session: {r}\n{}",
        node.log()
    );
    let st = node.status();
    let hostile = st["peers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "hostile")
        .expect("the peer in status")
        .clone();
    let why = hostile["last_error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("send hold timer expired"),
        "last error: {hostile}"
    );
    // Its NOTIFICATION could not be written (nothing was read): the
    // counter says what went out, so no 8/0 is counted.
    let metrics = node.metrics();
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("holdfast_peer_notifications_sent_total")
                && l.contains("code=\"8\"")),
        "{metrics}"
    );
    assert!(healthz(&node).contains(" 200"));
    assert!(health_checks >= 3, "{health_checks} /healthz checks");
}

#[test]
fn an_oversized_borr_is_answered_with_7_1_cut_to_4096_octets() {
    let lab = Lab::pair();
    let (node_addr, router_addr) = (lab.node_v4.to_string(), lab.router_v4.to_string());
    let conf = passive_conf(&lab, "borr", |p| p);
    let node = Holdfast::start(&lab.node, &conf, &vips(&["198.51.100.10"]));
    let dir = LabDir::new("borr-peer");
    let script = dir.write("borr_peer.py", include_str!("fixtures/peers/borr_peer.py"));
    let result = dir.join("result.json");
    // 4096 octets in all: within the message size, so it passes the
    // header check and reaches the RFC 7313 §5 length check; as data of a
    // NOTIFICATION it would make 4117 octets.
    let out = lab.router.exec(&[
        "timeout",
        "60",
        "python3",
        &script.display().to_string(),
        &node_addr,
        "65000",
        &router_addr,
        "4096",
        &result.display().to_string(),
    ]);
    assert!(
        out.status.success(),
        "scripted peer: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        node.log()
    );
    let r: serde_json::Value = serde_json::from_str(&dir.read("result.json")).unwrap();
    println!("scripted peer: {r}");
    let n = &r["notification"];
    assert!(
        n.is_object(),
        "no NOTIFICATION reached the peer: {r}\n{}",
        node.log()
    );
    assert_eq!(
        (n["code"].as_u64(), n["subcode"].as_u64()),
        (Some(7), Some(1)),
        "{r}"
    );
    assert_eq!(n["length"], 4096, "{r}");
    assert_eq!(n["header_length"], 4096, "{r}");
    assert_eq!(n["data_is_the_borr"], true, "{r}");
    // The counter says it went out, once.
    testlab::wait_for(LONG, "the 7/1 counted", || {
        let metrics = node.metrics();
        let line = metrics
            .lines()
            .find(|l| {
                l.starts_with("holdfast_peer_notifications_sent_total")
                    && l.contains("code=\"7\"")
                    && l.contains("subcode=\"1\"")
            })
            .map(str::to_string);
        match line {
            Some(l) if l.ends_with(" 1") => Ok(()),
            other => Err(format!("{other:?}")),
        }
    });
}

#[test]
fn a_silent_connection_from_a_passive_peers_address_does_not_lock_it_out() {
    let lab = Lab::pair();
    let (node_addr, router_addr) = (lab.node_v4.to_string(), lab.router_v4.to_string());
    let conf = passive_conf(&lab, "tor", |p| p);
    let node = Holdfast::start(&lab.node, &conf, &vips(&["198.51.100.10"]));
    let dir = LabDir::new("silent-peer");
    let script = dir.write(
        "silent_then_real.py",
        include_str!("fixtures/peers/silent_then_real.py"),
    );
    let log = std::fs::File::create(dir.join("peer.log")).unwrap();
    let mut peer = lab
        .router
        .command(&[
            "python3",
            &script.display().to_string(),
            &node_addr,
            "65000",
            &router_addr,
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("python3 runs the scripted peer");
    // Well before the 240 s a silent connection used to hold the slot.
    testlab::wait_for(Duration::from_secs(20), "the real peer established", || {
        if let Some(status) = peer.try_wait().unwrap() {
            panic!("scripted peer ended: {status}\n{}", dir.read("peer.log"));
        }
        match node.peer_state("tor").as_str() {
            "Established" => Ok(()),
            other => Err(other.to_string()),
        }
    });
    let _ = peer.kill();
    let _ = peer.wait();
}

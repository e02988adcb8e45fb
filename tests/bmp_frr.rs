//! BMP (RFC 7854) with RFC 8671's Adj-RIB-Out, against pmacct's pmbmpd
//! as the monitoring station, with FRR's bgpd as the ToR in network
//! namespaces: what holdfast sends FRR is what the station is told, and a
//! station that stops reading holds no session back.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testlab::{LabDir, Netns, NsProcess, Signal, wait_until};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const STATION_PORT: u16 = 1790;

fn node_ip() -> IpAddr {
    NODE.parse().unwrap()
}

/// holdfast's config: one eBGP peer `tor1` (fast timers), and `stations`
/// as `[[bmp]]` tables (TOML).
fn conf(stations: &str) -> String {
    let c = Config::node(65001, NODE)
        .peer(Peer::new("tor1", TOR, 65000).fast())
        .stability(Stability::new())
        .advertisement(Advertisement::public("65001:100"));
    format!("{}\n{stations}", c.to_toml())
}

fn station_toml(name: &str, port: u16, extra: &str) -> String {
    format!("[[bmp]]\nname = \"{name}\"\naddress = \"127.0.0.1\"\nport = {port}\n{extra}\n")
}

/// pmbmpd in `ns`, on 127.0.0.1:`port`, logging every BMP message it
/// decodes as one JSON object a line.
struct Pmbmpd {
    dir: LabDir,
    _process: NsProcess,
}

impl Pmbmpd {
    fn start(ns: &Netns, port: u16) -> Pmbmpd {
        testlab::require_tools(&["pmbmpd"]);
        let dir = LabDir::new("pmbmpd");
        let log = dir.join("bmp.json");
        let conf = dir.write(
            "pmbmpd.conf",
            &format!(
                "bmp_daemon_ip: 127.0.0.1\nbmp_daemon_port: {port}\nbmp_daemon_msglog_file: {}\nbmp_daemon_msglog_output: json\n",
                log.display()
            ),
        );
        let process = NsProcess::start(ns, "pmbmpd", &["pmbmpd", "-f", conf.to_str().unwrap()]);
        wait_until(LONG, "pmbmpd to listen", || {
            ns.listening_tcp_ports().contains(&port).then_some(())
        });
        Pmbmpd {
            dir,
            _process: process,
        }
    }

    /// Every message logged so far.
    fn messages(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.dir.join("bmp.json")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits for a logged message `pick` accepts; returns it.
    fn wait(&self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        wait_until(LONG, what, || {
            std::thread::sleep(Duration::from_millis(200));
            self.messages().into_iter().find(|m| pick(m))
        })
    }
}

fn is(m: &Value, key: &str, value: &str) -> bool {
    m[key].as_str() == Some(value)
}

fn of_type<'a>(messages: &'a [Value], t: &str) -> impl Iterator<Item = &'a Value> {
    messages.iter().filter(move |m| is(m, "bmp_msg_type", t))
}

/// A Route Monitoring of `prefix` as `log_type` (`update`, `withdraw`),
/// of the post-policy Adj-RIB-Out (pmbmpd's `is_out` and `is_post`: the
/// per-peer header's O and L flags, RFC 8671 §4, RFC 7854 §4.2) towards
/// FRR.
fn route(m: &Value, log_type: &str, prefix: &str) -> bool {
    is(m, "bmp_msg_type", "route_monitor")
        && is(m, "log_type", log_type)
        && is(m, "ip_prefix", prefix)
        && is(m, "peer_ip", TOR)
        && m["is_out"] == 1
        && m["is_post"] == 1
}

/// RFC 7854 §4.3 Initiation with sysName, §4.10 Peer Up with both OPENs'
/// addresses, §4.6 Route Monitoring of the Adj-RIB-Out (RFC 8671 §4: O and
/// L set) with the attributes FRR got, a withdrawal, §4.8 Stats Reports
/// (RFC 8671 §5 type 15), §4.9 Peer Down with the peer's NOTIFICATION, and
/// §4.5 Termination at exit — as pmacct's pmbmpd decodes them.
#[test]
fn pmbmpd_sees_initiation_peer_up_adj_rib_out_withdrawal_peer_down() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let station = Pmbmpd::start(&lab.node, STATION_PORT);
    let mut node = Holdfast::start(
        &lab.node,
        &conf(&station_toml(
            "pmbmpd",
            STATION_PORT,
            "stats_interval = \"1s\"",
        )),
        &vips(&["198.51.100.10", "198.51.100.11"]),
    );
    frr.wait_established(node_ip(), LONG);
    let at_frr = frr.wait_prefix("198.51.100.11/32", LONG);
    let init = station.wait("Initiation", |m| is(m, "bmp_msg_type", "init"));
    assert_eq!(init["bmp_init_info_sysname"], "node-1", "{init}");
    assert!(
        init["bmp_init_info_sysdescr"]
            .as_str()
            .is_some_and(|d| d.starts_with("holdfast ")),
        "{init}"
    );
    let up = station.wait("Peer Up", |m| is(m, "bmp_msg_type", "peer_up"));
    assert_eq!(up["peer_ip"], TOR, "{up}");
    assert_eq!(up["peer_asn"], 65000, "{up}");
    assert_eq!(up["local_ip"], NODE, "{up}");
    assert_eq!(up["remote_port"], 179, "{up}");
    for prefix in ["198.51.100.10/32", "198.51.100.11/32"] {
        let m = station.wait(&format!("Route Monitoring of {prefix}"), |m| {
            route(m, "update", prefix)
        });
        assert_eq!(m["as_path"], "65001", "{m}");
        assert_eq!(m["comms"], "65001:100", "{m}");
        assert_eq!(m["bgp_nexthop"], NODE, "{m}");
        assert_eq!(at_frr["paths"][0]["community"]["string"], "65001:100");
    }
    let stats = station.wait("Stats Report of the Adj-RIB-Out", |m| {
        is(m, "bmp_msg_type", "stats") && m["counter_type"] == 15 && m["is_out"] == 1
    });
    assert_eq!(stats["counter_value"], 2, "{stats}");

    // A withdrawal.
    node.write_vips(&vips(&["198.51.100.10"]));
    frr.wait_no_prefix("198.51.100.11/32", LONG);
    station.wait("the withdrawal of 198.51.100.11/32", |m| {
        route(m, "withdraw", "198.51.100.11/32")
    });
    assert!(
        !station
            .messages()
            .iter()
            .any(|m| route(m, "withdraw", "198.51.100.10/32")),
        "only the VIP that went is withdrawn"
    );

    // FRR shuts the session: Peer Down, the peer's NOTIFICATION (reason 3).
    frr.configure(&["router bgp 65000", &format!("neighbor {NODE} shutdown")]);
    let down = station.wait("Peer Down", |m| is(m, "bmp_msg_type", "peer_down"));
    assert_eq!(down["peer_ip"], TOR, "{down}");
    assert_eq!(down["reason_type"], 3, "{down}");

    // A clean exit: Termination.
    node.kill(Signal::Term);
    node.wait_exit();
    let term = station.wait("Termination", |m| is(m, "bmp_msg_type", "term"));
    assert_eq!(
        term["bmp_term_info_reason"], "Session administratively closed",
        "{term}"
    );
    let all = station.messages();
    assert_eq!(of_type(&all, "init").count(), 1);
    assert_eq!(of_type(&all, "peer_up").count(), 1);
}

/// A station that goes away and comes back is sent the whole state again
/// on its new connection (RFC 7854 §5): Peer Up and every route of the
/// Adj-RIB-Out, with no change at the peer.
#[test]
fn a_station_that_comes_back_gets_the_whole_adj_rib_out() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let first = Pmbmpd::start(&lab.node, STATION_PORT);
    let node = Holdfast::start(
        &lab.node,
        &conf(&station_toml(
            "pmbmpd",
            STATION_PORT,
            "stats_interval = \"0s\"",
        )),
        &vips(&["198.51.100.10", "198.51.100.11"]),
    );
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.11/32", LONG);
    first.wait("the first station's routes", |m| {
        route(m, "update", "198.51.100.11/32")
    });
    let updates = frr.updates_received(node_ip());
    drop(first);
    let second = Pmbmpd::start(&lab.node, STATION_PORT);
    for prefix in ["198.51.100.10/32", "198.51.100.11/32"] {
        second.wait(&format!("{prefix} again"), |m| route(m, "update", prefix));
    }
    let all = second.messages();
    assert_eq!(of_type(&all, "init").count(), 1, "{all:?}");
    assert_eq!(of_type(&all, "peer_up").count(), 1, "{all:?}");
    assert!(
        of_type(&all, "stats").next().is_none(),
        "stats_interval = \"0s\": no Stats Reports"
    );
    assert_eq!(
        frr.updates_received(node_ip()),
        updates,
        "the peer is sent nothing new"
    );
    let metrics = node.exposition();
    assert_eq!(
        metric_value(&metrics, "holdfast_bmp_up", &[("station", "pmbmpd")]),
        1.0
    );
    assert!(
        metric_value(
            &metrics,
            "holdfast_bmp_messages_total",
            &[("station", "pmbmpd"), ("type", "initiation")]
        ) >= 2.0
    );
}

/// `count` VIPs from 198.18.0.0/15, as a VIP file.
fn bulk_vips(count: u32) -> String {
    let list: Vec<String> = (0..count)
        .map(|i| format!("198.{}.{}.{}", 18 + i / 65536, (i / 256) % 256, i % 256))
        .collect();
    let refs: Vec<&str> = list.iter().map(String::as_str).collect();
    vips(&refs)
}

/// A BMP "station" that accepts every connection and never reads a byte,
/// with a small receive buffer: on 127.0.0.1:`port` in `ns`.
fn stuck_station(ns: &Netns, port: u16) -> std::process::Child {
    let script = format!(
        "import socket\n\
         s = socket.socket()\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)\n\
         s.bind(('127.0.0.1', {port}))\n\
         s.listen(16)\n\
         held = []\n\
         while True:\n    c, _ = s.accept()\n    held.append(c)\n"
    );
    let child = ns.spawn(&["python3", "-c", &script]);
    wait_until(LONG, "the stuck station to listen", || {
        ns.listening_tcp_ports().contains(&port).then_some(())
    });
    child
}

/// What FRR saw of holdfast's KEEPALIVEs over a window from Established
/// (`messageStats.keepalivesRecv`, polled every 50 ms).
#[derive(Clone, Copy, Debug)]
struct Keepalives {
    /// Seconds from the window's start until FRR had every route.
    loaded: Option<f64>,
    /// Seconds from `loaded` to the first KEEPALIVE after it (none go
    /// while UPDATEs do: each restarts the KeepaliveTimer, RFC 4271 §4.4).
    first_after_load: Option<f64>,
    /// The intervals between KEEPALIVEs, and the last one to the window's
    /// end (a session that stops sending shows it): count, mean, max.
    gaps: usize,
    mean: f64,
    max: f64,
}

fn keepalives(frr: &testlab::Frr, window: Duration, routes: usize) -> Keepalives {
    let start = Instant::now();
    let mut last = frr.message_stat(node_ip(), "keepalivesRecv");
    let mut last_at: Option<Instant> = None;
    let mut gaps = Vec::new();
    let (mut loaded, mut first_after_load) = (None, None);
    while start.elapsed() < window {
        std::thread::sleep(Duration::from_millis(50));
        let now = frr.message_stat(node_ip(), "keepalivesRecv");
        if now > last {
            let t = Instant::now();
            if let Some(prev) = last_at {
                gaps.push((t - prev).as_secs_f64());
            }
            last_at = Some(t);
            last = now;
            if let (Some(l), None) = (loaded, first_after_load) {
                first_after_load = Some(start.elapsed().as_secs_f64() - l);
            }
        }
        if loaded.is_none() && frr.count(testlab::Afi::Ipv4) >= routes {
            loaded = Some(start.elapsed().as_secs_f64());
        }
    }
    gaps.push(last_at.unwrap_or(start).elapsed().as_secs_f64());
    Keepalives {
        loaded,
        first_after_load,
        gaps: gaps.len(),
        mean: gaps.iter().sum::<f64>() / gaps.len() as f64,
        max: gaps.iter().copied().fold(0.0, f64::max),
    }
}

/// A station that accepts and never reads while 100k routes go to FRR:
/// holdfast's KEEPALIVEs to FRR keep their pace (RFC 4271 §4.4, keepalive
/// 3 s here), as without any station; the station is dropped when its
/// queue is full (`holdfast_bmp_dropped_total`) and tried again.
#[test]
fn a_station_that_stops_reading_leaves_keepalives_to_frr_alone() {
    testlab::require_root();
    const ROUTES: u32 = 100_000;
    const WINDOW: Duration = Duration::from_secs(30);
    let file = bulk_vips(ROUTES);
    let mut figures = Vec::new();
    for stuck in [false, true] {
        let (lab, frr) = Tor::new().start();
        let _station = stuck.then(|| stuck_station(&lab.node, STATION_PORT));
        let stations = if stuck {
            station_toml("stuck", STATION_PORT, "queue_limit = 65536")
        } else {
            String::new()
        };
        let node = Holdfast::start(&lab.node, &conf(&stations), &file);
        frr.wait_established(node_ip(), LONG);
        let k = keepalives(&frr, WINDOW, ROUTES as usize);
        eprintln!("stuck station: {stuck}: {k:?}");
        assert!(k.loaded.is_some(), "FRR never had the {ROUTES} routes");
        if stuck {
            let e = node.exposition();
            let dropped = metric_value(&e, "holdfast_bmp_dropped_total", &[("station", "stuck")]);
            eprintln!("the stuck station was dropped {dropped} times");
            assert!(dropped >= 1.0, "the stuck station was never dropped");
        }
        figures.push(k);
    }
    let (without, with) = (figures[0], figures[1]);
    // RFC 4271 §4.4: every 3 s, jittered below it (§10); a poll of 50 ms.
    for k in [without, with] {
        assert!(k.max < 4.0, "a gap of {:.2} s: {k:?}", k.max);
        assert!(
            k.first_after_load.is_some_and(|f| f < 4.0),
            "no KEEPALIVE soon after the table: {k:?}"
        );
    }
    assert!(
        with.max <= without.max + 1.0,
        "gaps: max {:.2} s with the stuck station, {:.2} s without",
        with.max,
        without.max
    );
    assert!(
        (with.mean - without.mean).abs() < 0.75,
        "mean interval {:.2} s with the stuck station, {:.2} s without",
        with.mean,
        without.mean
    );
    assert!(
        with.gaps + 2 >= without.gaps,
        "fewer keepalives: {with:?} vs {without:?}"
    );
}

//! What the daemon's log says, counted on the real daemon: floods a remote
//! party can cause make a bounded number of lines (loopback, a scripted
//! client or peer), the JSON format parses, and against FRR in network
//! namespaces a session change is one line, a peer that stays down does
//! not repeat itself, withdrawals name their Service and reason, and a
//! planned stop is one INFO line.

mod common;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use bgp_proto::message::check_header;
use bgp_proto::open::Open;
use bgp_proto::{Capability, Context, Family, GracefulRestart, Message, RouteRefresh};
use common::{Advertisement, Config, Holdfast, LONG, Peer, Tor, free_port, vips};
use testlab::{Signal, require_root, wait_for};

/// The daemon on loopback in this namespace, logging at its default
/// level (no `--log`, no `HOLDFAST_LOG`) with `args`; its API on port 0,
/// so nothing waits for it: a test waits for log lines.
fn start(config: &Config, args: &[&str]) -> Holdfast<'static> {
    let mut d = Holdfast::local_unstarted(config, VIP_FILE);
    d.log_filter = None;
    d.run(args);
    d
}

/// The number after `key=` in `line`.
fn number(line: &str, key: &str) -> Option<u64> {
    let at = line.find(key)? + key.len();
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// Events of a kind accounted for in the log: lines written for them
/// (`written` in each), the "(N similar suppressed)" notes on those lines,
/// and the "suppressed N similar lines" summaries of `kind`.
fn accounted(log: &str, written: &str, kind: &str) -> u64 {
    let mut n = 0;
    for line in log.lines() {
        if line.contains(written) {
            n += 1;
            if let Some(at) = line.find(" similar suppressed)") {
                let before = &line[..at];
                let start = before.rfind('(').expect("the note's parenthesis") + 1;
                n += before[start..].parse::<u64>().expect("the note's count");
            }
        } else if line.contains("similar lines") && line.contains(&format!("kind={kind}")) {
            n += number(line, "suppressed=").expect("the summary's count");
        }
    }
    n
}

const VIP_FILE: &str = "[[vip]]\naddress = \"198.51.100.10\"\nservice = \"demo/web\"\n";

/// A passive peer at 127.0.0.2 and the BGP listener on `port`.
fn listener_config(port: u16) -> Config {
    Config::node(65001, "192.0.2.2")
        .api("127.0.0.1:0")
        .listen(&format!("127.0.0.1:{port}"))
        .peer(Peer::new("tor", "127.0.0.2", 65000).passive())
        .advertisement(Advertisement::new("public"))
}

/// The issue measured 5000 WARN lines in 0.8 s for 5000 connections from
/// an address that is not a peer: now the first few, then one summary.
#[test]
fn a_flood_of_connections_from_a_non_peer_makes_at_most_ten_lines() {
    let port = free_port();
    let d = start(&listener_config(port), &[]);
    d.wait_log_line(&["accepting BGP connections"], LONG);
    d.wait_log_line(&["first complete view"], LONG);
    let before = d.log_lines();

    let target: SocketAddr = (Ipv4Addr::LOCALHOST, port).into();
    let from: SocketAddr = (Ipv4Addr::new(127, 0, 0, 3), 0).into();
    let start = Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..1250 {
                    let s =
                        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                            .expect("a socket");
                    s.bind(&from.into()).expect("bind 127.0.0.3");
                    s.connect_timeout(&target.into(), LONG)
                        .expect("the listener accepts");
                }
            })
        })
        .collect();
    for c in clients {
        c.join().expect("a client thread");
    }
    let took = start.elapsed();

    // Every connection is accounted for — written or counted in a summary
    // (which waits for the source's next token: up to a minute) — and that
    // took at most ten lines.
    let log = wait_for(3 * LONG, "all 5000 connections in the log", || {
        let log = d.log();
        match accounted(&log, "not a configured peer", "not-a-peer") {
            5000 => Ok(log),
            n => Err(format!("{n} accounted for")),
        }
    });
    let lines = log.lines().count() - before;
    eprintln!("5000 connections in {took:?}: {lines} lines");
    assert!(lines <= 10, "{lines} lines:\n{log}");
    assert!(
        log.contains("suppressed") && log.contains("source=127.0.0.3"),
        "{log}"
    );
}

/// Reads one BGP message (blocking).
fn read_message(s: &mut TcpStream, buf: &mut Vec<u8>) -> Message {
    loop {
        if let Some(len) = check_header(buf, 65535).expect("a valid header")
            && buf.len() >= len
        {
            let msg: Vec<u8> = buf.drain(..len).collect();
            return Message::decode(&msg, &Context::default()).expect("a valid message");
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "holdfast closed the connection");
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A scripted router on 127.0.0.1 that holdfast connects to: it answers
/// the OPEN (IPv4 unicast, route refresh) and leaves the session up.
/// Returns the connection, and a thread that reads and drops everything
/// holdfast sends from then on.
fn scripted_session(listener: &TcpListener) -> (TcpStream, std::thread::JoinHandle<u64>) {
    listener
        .set_nonblocking(false)
        .expect("a blocking listener");
    let (mut s, _) = listener.accept().expect("holdfast connects");
    s.set_read_timeout(Some(LONG)).unwrap();
    let mut buf = Vec::new();
    let Message::Open(_) = read_message(&mut s, &mut buf) else {
        panic!("OPEN first");
    };
    let ours = Open::new(
        65000,
        90,
        Ipv4Addr::new(192, 0, 2, 1),
        vec![
            Capability::Multiprotocol(Family::IPV4_UNICAST),
            Capability::RouteRefresh,
            Capability::FourOctetAs(65000),
            // A helper (RFC 4724 §3: no families): SIGTERM closes the
            // session for graceful restart, as towards a router.
            Capability::GracefulRestart(GracefulRestart {
                flags: 0,
                restart_time: 120,
                families: Vec::new(),
            }),
        ],
    );
    for m in [Message::Open(ours), Message::Keepalive] {
        s.write_all(&m.encode(&Context::default()).unwrap())
            .unwrap();
    }
    let mut reader = s.try_clone().expect("a second handle");
    let drain = std::thread::spawn(move || {
        let mut total = 0u64;
        let mut chunk = vec![0u8; 65536];
        while let Ok(n) = reader.read(&mut chunk) {
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        total
    });
    (s, drain)
}

/// Peer `tor` at 127.0.0.1 `port`, IPv4 unicast, a connection attempt
/// every second.
fn peer_config(port: u16) -> Config {
    Config::node(65001, "192.0.2.2")
        .api("127.0.0.1:0")
        .peer(
            Peer::new("tor", "127.0.0.1", 65000)
                .port(port)
                .connect_retry("1s")
                .families(&["ipv4-unicast"]),
        )
        .advertisement(Advertisement::new("public"))
}

/// The issue measured an INFO line per ROUTE-REFRESH (4.5 M lines in
/// 30 s): a configured peer's flood now makes a handful.
#[test]
fn a_flood_of_route_refresh_from_a_peer_makes_a_bounded_number_of_lines() {
    const REQUESTS: u64 = 20_000;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let d = start(&peer_config(port), &[]);
    let (mut s, _drain) = scripted_session(&listener);
    d.wait_log_line(&["session Up", "peer=tor"], LONG);
    let before = d.log_lines();

    // RFC 2918 §3: a ROUTE-REFRESH for IPv4 unicast, many times over.
    let one = Message::RouteRefresh(RouteRefresh::new(
        Family::IPV4_UNICAST,
        RouteRefresh::NORMAL,
    ))
    .encode(&Context::default())
    .unwrap();
    let batch: Vec<u8> = one.repeat(1000);
    for _ in 0..REQUESTS / 1000 {
        s.write_all(&batch).expect("holdfast reads");
    }

    // Answers coalesce (at most one waits per family), so the answers are
    // fewer than the requests; each answer is a log site the limiter
    // covers. Wait for the answers to stop, then past a summary period.
    let mut seen = 0;
    let mut still_since = Instant::now();
    let log = wait_for(3 * LONG, "the ROUTE-REFRESH answers to settle", || {
        let log = d.log();
        let n = accounted(&log, "answering ROUTE-REFRESH", "route-refresh");
        if n != seen {
            seen = n;
            still_since = Instant::now();
        }
        if n >= 1 && still_since.elapsed() > Duration::from_secs(12) {
            Ok(log)
        } else {
            Err(format!("{n} answers accounted for"))
        }
    });
    let lines = log.lines().count() - before;
    eprintln!("{REQUESTS} ROUTE-REFRESH: {seen} answers, {lines} lines");
    assert!(seen <= REQUESTS, "more answers than requests: {seen}");
    assert!(lines <= 10, "{lines} lines:\n{log}");
}

/// The issue measured 26 MB of malformed UPDATEs becoming 132 MB of log:
/// now a configured peer's stream of them makes a handful of lines.
#[test]
fn a_flood_of_malformed_updates_from_a_peer_makes_a_bounded_number_of_lines() {
    const UPDATES: u64 = 20_000;
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let d = start(&peer_config(port), &[]);
    let (mut s, _drain) = scripted_session(&listener);
    d.wait_log_line(&["session Up", "peer=tor"], LONG);
    let before = d.log_lines();

    // An UPDATE for 198.51.100.0/24 whose LARGE_COMMUNITY is 5 octets
    // long: RFC 8092 §6 and RFC 7606 make it treat-as-withdraw, the
    // session stays up.
    let attrs: &[u8] = &[
        0x40, 1, 1, 0, // ORIGIN IGP
        0x40, 2, 6, 2, 1, 0, 0, 0xfd, 0xe8, // AS_PATH 65000
        0x40, 3, 4, 127, 0, 0, 1, // NEXT_HOP
        0xc0, 32, 5, 1, 2, 3, 4, 5, // LARGE_COMMUNITY, malformed
    ];
    let nlri: &[u8] = &[24, 198, 51, 100];
    let mut one = vec![0xff; 16];
    let len = 19 + 2 + 2 + attrs.len() + nlri.len();
    one.extend_from_slice(&(len as u16).to_be_bytes());
    one.push(2);
    one.extend_from_slice(&[0, 0]);
    one.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
    one.extend_from_slice(attrs);
    one.extend_from_slice(nlri);
    let batch: Vec<u8> = one.repeat(1000);
    for _ in 0..UPDATES / 1000 {
        s.write_all(&batch).expect("holdfast reads");
    }

    // The summary waits for the peer's next token: up to a minute.
    let log = wait_for(3 * LONG, "every malformed UPDATE in the log", || {
        let log = d.log();
        match accounted(&log, "malformed UPDATE from the peer", "malformed-update") {
            UPDATES => Ok(log),
            n => Err(format!("{n} accounted for")),
        }
    });
    let lines = log.lines().count() - before;
    eprintln!(
        "{UPDATES} malformed UPDATEs ({} bytes): {lines} lines, {} bytes of log",
        UPDATES * one.len() as u64,
        log.len()
    );
    assert!(lines <= 10, "{lines} lines:\n{log}");
    assert!(
        log.contains("Attribute Length Error (attribute type 32)"),
        "{log}"
    );
    assert!(!log.contains("session Down"), "{log}");
}

/// A reload that shortens the hold-down withdraws what has been held
/// longer than the new one: that line too names the Service and why.
#[test]
fn a_withdrawal_caused_by_a_shorter_hold_down_names_its_service_and_reason() {
    let port = free_port();
    let config = |hold: &str| listener_config(port).hold_down(hold);
    let d = start(&config("1h"), &[]);
    d.wait_log_line(&["advertised", "prefix=198.51.100.10/32"], LONG);
    d.write_vips("");
    d.wait_log_line(&["VIP file read", "removed=1"], LONG);
    std::thread::sleep(Duration::from_secs(2));
    assert!(!d.log().contains("withdrawn"), "{}", d.log());
    // The daemon notices the config file's change by itself.
    d.write_config(&config("1s").to_toml());
    let line = d.wait_log_line(&["withdrawn", "prefix=198.51.100.10/32"], LONG);
    assert!(line.contains("service=demo/web"), "{line}");
    assert!(
        line.contains("reason=\"removed from the VIP file, hold-down 1s elapsed\""),
        "{line}"
    );
}

/// `--log-format json`: every line is a JSON object with the timestamp,
/// level, message and fields at the top level, values plain. (Without a
/// hold-down, a VIP removed from the file is withdrawn by the snapshot
/// that drops it: its line too has the Service and the reason.)
#[test]
fn json_log_lines_parse_with_their_fields() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = peer_config(port).hold_down("0s");
    let mut d = start(&config, &["--log-format", "json"]);
    let (_s, _drain) = scripted_session(&listener);
    d.wait_log_line(&["session Up"], LONG);
    d.wait_log_line(&["advertised"], LONG);
    d.write_vips("");
    d.wait_log_line(&["withdrawn"], LONG);
    d.kill(Signal::Term);
    d.wait_exit_within(LONG);

    let log = d.log();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let find = |message: &str| {
        lines
            .iter()
            .find(|l| l["message"] == message)
            .unwrap_or_else(|| panic!("no {message:?} line in:\n{log}"))
    };
    let up = find("session Up");
    assert_eq!(up["level"], "INFO");
    assert_eq!(up["target"], "holdfast::session");
    assert_eq!(up["peer"], "tor");
    assert_eq!(up["address"], "127.0.0.1");
    assert_eq!(up["hold_time"], 90);
    assert_eq!(up["families"], "ipv4-unicast");
    assert!(
        up["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{up}"
    );
    let advertised = find("advertised");
    assert_eq!(advertised["prefix"], "198.51.100.10/32");
    assert_eq!(advertised["service"], "demo/web");
    let withdrawn = find("withdrawn");
    assert_eq!(withdrawn["prefix"], "198.51.100.10/32");
    assert_eq!(withdrawn["service"], "demo/web");
    assert_eq!(
        withdrawn["reason"],
        "removed from the VIP file, no hold-down"
    );
    let stopped = find("holdfast stopped");
    assert_eq!(stopped["signal"], "SIGTERM");
    assert_eq!(stopped["sessions_closed_for_graceful_restart"], 1);
    eprintln!(
        "sample: {}",
        log.lines().find(|l| l.contains("session Up")).unwrap()
    );
}

fn count(log: &str, needle: &str) -> usize {
    log.lines().filter(|l| l.contains(needle)).count()
}

/// Against FRR: each drop is one `session Down` line and each return one
/// `session Up` (no separate NOTIFICATION or state lines above debug); a
/// peer that stays down is said once, not per retry; a withdrawal names
/// its Service and reason; text values are plain; SIGTERM is one INFO
/// line and no WARN.
#[test]
fn session_changes_withdrawals_and_shutdown_read_as_one_line_each() {
    require_root();
    let (lab, frr) = Tor::new().start();
    let config = Config::node(65001, &lab.node_v4.to_string())
        .peer(Peer::new("tor", lab.router_v4, 65000).fast())
        .hold_down("2s")
        .advertisement(Advertisement::new("public"));
    let mut h = Holdfast::start(&lab.node, &config.to_toml(), &vips(&["198.51.100.10"]));
    frr.wait_established(lab.node_v4.into(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let up = |h: &Holdfast, n: usize| {
        wait_for(LONG, &format!("{n} session Up lines"), || {
            let log = h.log();
            match count(&log, "session Up") {
                c if c >= n => Ok(()),
                c => Err(format!("{c}")),
            }
        })
    };
    up(&h, 1);

    // Three resets from the router's side: Cease/Administrative Reset.
    for i in 1..=3 {
        frr.vtysh("clear bgp *");
        up(&h, i + 1);
        let log = h.log();
        assert_eq!(count(&log, "session Down"), i, "{log}");
        frr.wait_established(lab.node_v4.into(), LONG);
    }
    let log = h.log();
    let downs: Vec<&str> = log.lines().filter(|l| l.contains("session Down")).collect();
    for d in &downs {
        assert!(
            d.contains(" WARN ") && d.contains("peer=tor") && d.contains("Administrative Reset"),
            "{d}"
        );
    }
    // The NOTIFICATION and the FSM steps are in the Down line, not beside it.
    let above_debug = |l: &&str| !l.contains(" DEBUG ");
    let beside: Vec<&str> = log
        .lines()
        .filter(above_debug)
        .filter(|l| !l.contains("session Down"))
        .filter(|l| l.contains("NOTIFICATION") || l.contains("state change"))
        .collect();
    assert!(beside.is_empty(), "{beside:#?}");

    // The link goes: one Down, then one line for the failed retries
    // (connect_retry is 1 s), however long it stays down.
    let before = h.log().lines().count();
    lab.node_link.set_down();
    wait_for(LONG, "a fourth session Down", || {
        match count(&h.log(), "session Down") {
            4 => Ok(()),
            c => Err(format!("{c}")),
        }
    });
    // Every failed retry is a line at some level (the first at WARN, the
    // others at debug — holdfast=debug here).
    wait_for(LONG, "retries while the link is down", || {
        let log = h.log();
        match count(&log, "peer still down") + count(&log, "session not established") {
            c if c >= 10 => Ok(()),
            c => Err(format!("{c} retries")),
        }
    });
    let log = h.log();
    let during: Vec<&str> = log.lines().skip(before).filter(above_debug).collect();
    assert!(during.len() <= 2, "{during:#?}");
    lab.node_link.set_up();
    up(&h, 5);

    // A VIP removed from the file: withdrawn after the hold-down, with its
    // Service and why.
    h.write_vips("");
    let line = h.wait_log_line(&["withdrawn", "prefix=198.51.100.10/32"], LONG);
    assert!(line.contains("service=demo/web"), "{line}");
    assert!(
        line.contains("reason=\"removed from the VIP file, hold-down 2s elapsed\""),
        "{line}"
    );
    let log = h.log();
    assert!(!log.contains("Some("), "{log}");
    assert!(!log.contains("None"), "{log}");

    // SIGTERM with graceful restart: the exit decision and the stop, one
    // INFO line each, no WARN.
    let before = h.log().lines().count();
    h.kill(Signal::Term);
    h.wait_exit();
    let log = h.log();
    let after: Vec<&str> = log.lines().skip(before).filter(above_debug).collect();
    assert_eq!(after.len(), 2, "{after:#?}");
    assert!(
        after[0].contains(" INFO ")
            && after[0].contains("exit: routes kept through graceful restart"),
        "{after:#?}"
    );
    assert!(
        after[1].contains(" INFO ") && after[1].contains("holdfast stopped"),
        "{after:#?}"
    );
}

//! Config reloads of a real daemon: the same judgement of a file by
//! `check`, `run` and a reload; a reload applies everything or nothing
//! (the listener's MD5 keys included), loses no edit made while it runs,
//! resets only the sessions it must and keeps every peer's counters. The
//! daemon peers with FRR's bgpd in network namespaces.

mod common;

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use testlab::{Frr, Lab, Signal};

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";

fn node_ip() -> IpAddr {
    NODE.parse().unwrap()
}

/// A config whose `[stability]` the stability layer refuses, and the
/// `LINE:COL` of the value to blame.
const REFUSED: &[(&str, &str)] = &[
    ("withdraw_hold_down = \"8761h\"\n", "15:22"),
    ("delete_delay = \"8761h\"\n", "15:16"),
    (
        "[stability.damping]\nhalf_life = \"1ms\"\nmax_suppress = \"1000h\"\n",
        "17:16",
    ),
];

/// The node peering with the ToR as `tor1` (fast timers), advertisement
/// `public`.
fn conf() -> Config {
    conf_with(|p| p)
}

/// [`conf`] with more to peer `tor1`.
fn conf_with(tor1: impl FnOnce(Peer) -> Peer) -> Config {
    Config::node(65001, NODE)
        .peer(tor1(Peer::new("tor1", TOR, 65000).fast()))
        .stability(Stability::new())
        .advertisement(Advertisement::new("public"))
}

/// Lines 1–14 of the configs whose refusal is judged by `LINE:COL`, by
/// hand: `[stability]` is line 14.
fn base_conf() -> String {
    "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nhostname = \"node-1\"\n\n\
     [[peer]]\nname = \"tor1\"\naddress = \"192.0.2.1\"\nasn = 65000\n\n\
     [source]\nkind = \"file\"\npath = \"VIPS\"\n[stability]\n"
        .to_string()
}

#[test]
fn check_and_run_refuse_the_same_stability_values_at_the_same_place() {
    let dir = tempfile::tempdir().unwrap();
    let vips = dir.path().join("vips.toml");
    std::fs::write(&vips, "").unwrap();
    for (stability, at) in REFUSED {
        let path = dir.path().join("holdfast.toml");
        let text = base_conf().replace("VIPS", &vips.display().to_string()) + stability;
        std::fs::write(&path, &text).unwrap();
        let check = Command::new(BIN)
            .args(["check", "--config"])
            .arg(&path)
            .output()
            .unwrap();
        let check_out = String::from_utf8_lossy(&check.stdout).into_owned();
        assert_eq!(check.status.code(), Some(1), "check accepted:\n{text}");
        let expected = format!("{}:{at}: ", path.display());
        assert!(
            check_out.starts_with(&expected) && check_out.lines().count() == 1,
            "check should name {expected}:\n{check_out}"
        );
        let run = Command::new(BIN)
            .args(["run", "--config"])
            .arg(&path)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(1), "run did not refuse:\n{text}");
        let run_err = String::from_utf8_lossy(&run.stderr);
        let run_lines: Vec<&str> = run_err
            .lines()
            .filter(|l| l.starts_with(&path.display().to_string()))
            .collect();
        assert_eq!(
            run_lines,
            check_out.lines().collect::<Vec<_>>(),
            "run must refuse with check's lines; run said:\n{run_err}"
        );
    }
}

/// `name{...peer="tor1"...} value` from a scrape; panics when absent.
fn peer_metric(scrape: &str, name: &str, peer: &str) -> f64 {
    scrape
        .lines()
        .find(|l| l.starts_with(&format!("{name}{{")) && l.contains(&format!("peer=\"{peer}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} for {peer} in:\n{scrape}"))
}

/// An unlabelled metric; panics when absent.
fn metric(scrape: &str, name: &str) -> f64 {
    scrape
        .lines()
        .find(|l| l.starts_with(&format!("{name} ")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{scrape}"))
}

/// FRR on the router peering with the node, signing with `key` (RFC 2385).
fn frr_signing(lab: &Lab, key: &str) -> Frr {
    Tor::new()
        .lines(&format!(" neighbor {NODE} password {key}\n"))
        .on(lab)
}

fn log_lines(node: &Holdfast, needle: &str) -> usize {
    node.log().lines().filter(|l| l.contains(needle)).count()
}

#[test]
fn a_refused_reload_keeps_the_old_config_sets_the_metric_and_logs_one_line() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let good = conf().hold_down("1s").to_toml();
    let mut node = Holdfast::start(&lab.node, &good, &vips(&["198.51.100.10", "198.51.100.11"]));
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(LONG, "FRR has both VIPs", || {
        (frr.prefix("198.51.100.10/32").is_some() && frr.prefix("198.51.100.11/32").is_some())
            .then_some(())
    });
    assert_eq!(metric(&node.metrics(), "holdfast_config_reload_error"), 0.0);

    for (stability, at) in REFUSED {
        let bad = base_conf() + stability;
        // Only what this round logs.
        let from = node.log().len();
        node.write_config(&bad);
        node.kill(Signal::Hup);
        testlab::wait_until(LONG, "the reload refused", || {
            node.log()[from..]
                .contains("config reload refused")
                .then_some(())
        });
        testlab::wait_until(LONG, "the reload-error metric at 1", || {
            (metric(&node.metrics(), "holdfast_config_reload_error") == 1.0).then_some(())
        });
        let expected = format!("{}:{at}: ", node.config.display());
        let status = node.status();
        assert!(
            status["config_error"]
                .as_str()
                .is_some_and(|e| e.starts_with(&expected)),
            "status names {expected}: {status}"
        );
        // Give the poller its turn too, then count: one line per reload.
        std::thread::sleep(Duration::from_millis(1500));
        let log = node.log()[from..].to_string();
        let refused: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("config reload refused"))
            .collect();
        let attempts = log
            .lines()
            .filter(|l| {
                l.contains("SIGHUP: reloading") || l.contains("config file changed: reloading")
            })
            .count();
        assert_eq!(
            refused.len(),
            attempts,
            "one line per refused reload:\n{log}"
        );
        assert!(
            refused.iter().all(|l| l.contains(&expected)),
            "every refusal names {expected}:\n{log}"
        );
        assert!(
            !log.contains("config reloaded"),
            "a refused config was reported as reloaded:\n{log}"
        );
        // Back to the good config before the next bad one.
        node.write_config(&good);
        node.kill(Signal::Hup);
        testlab::wait_until(LONG, "the reload-error metric back at 0", || {
            (metric(&node.metrics(), "holdfast_config_reload_error") == 0.0).then_some(())
        });
    }
    // The old stability parameters are still in force: a VIP removed now
    // goes after the old 1 s hold-down, not after 8761 h.
    let bad = base_conf() + REFUSED[0].0;
    node.write_config(&bad);
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "the reload-error metric at 1", || {
        (metric(&node.metrics(), "holdfast_config_reload_error") == 1.0).then_some(())
    });
    node.write_vips(&vips(&["198.51.100.10"]));
    testlab::wait_until(
        LONG,
        "FRR loses 198.51.100.11 after the old hold-down",
        || frr.prefix("198.51.100.11/32").is_none().then_some(()),
    );
    assert!(frr.prefix("198.51.100.10/32").is_some());
}

#[test]
fn a_passive_peer_with_md5_added_by_a_reload_connects_without_a_restart() {
    testlab::require_root();
    let lab = Lab::pair();
    // FRR connects to us, signed (RFC 2385): the kernel drops its SYNs
    // unless the listening socket has the key for 192.0.2.1.
    let frr = frr_signing(&lab, "s3cret-key");
    let elsewhere = Config::node(65001, "192.0.2.2")
        .listen("0.0.0.0:179")
        .peer(Peer::new("elsewhere", "192.0.2.99", 65099).connect_retry("1s"));
    let mut node = Holdfast::start(&lab.node, &elsewhere.to_toml(), &vips(&["198.51.100.10"]));
    let key = node.dir.write("tor1.key", "s3cret-key\n");
    std::thread::sleep(Duration::from_secs(2));
    assert_ne!(frr.state(node_ip()), "Established", "no peer for FRR yet");
    node.write_config(
        &elsewhere
            .peer(
                Peer::new("tor1", TOR, 65000)
                    .passive()
                    .md5(key.as_path())
                    .hold_time("9s")
                    .keepalive("3s"),
            )
            .to_toml(),
    );
    node.kill(Signal::Hup);
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(LONG, "FRR has the VIP", || {
        frr.prefix("198.51.100.10/32").map(|_| ())
    });
    assert_eq!(node.peer_state("tor1"), "Established");
}

#[test]
fn an_edit_made_while_a_reload_runs_is_applied() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    // A reload that resets four peers rebuilds every peer's table four
    // times: with 60k VIPs, long enough to edit the file meanwhile.
    const VIPS: usize = 60_000;
    let peers = |hold: &str| {
        [
            ("tor1", TOR, 65000),
            ("spare1", "192.0.2.51", 65051),
            ("spare2", "192.0.2.52", 65052),
            ("spare3", "192.0.2.53", 65053),
        ]
        .into_iter()
        .fold(Config::node(65001, "192.0.2.2"), |c, (name, addr, asn)| {
            c.peer(Peer::new(name, addr, asn).fast().hold_time(hold))
        })
    };
    let list: Vec<String> = (0..VIPS)
        .map(|i| format!("198.18.{}.{}", i / 256, i % 256))
        .collect();
    let list: Vec<&str> = list.iter().map(String::as_str).collect();
    let mut node = Holdfast::start(&lab.node, &peers("9s").to_toml(), &vips(&list));
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(Duration::from_secs(180), "the VIP file read", || {
        (log_lines(&node, &format!("vips={VIPS}")) > 0).then_some(())
    });

    // The first edit resets every peer; the second, written while that
    // reload runs, adds a peer.
    node.write_config(&peers("12s").to_toml());
    node.kill(Signal::Hup);
    let began = Instant::now();
    testlab::wait_until(LONG, "the first reload resetting peers", || {
        (log_lines(&node, "peer changed: resetting its session") > 0).then_some(())
    });
    let late = Peer::new("late", "192.0.2.54", 65054);
    node.write_config(&peers("12s").peer(late).to_toml());
    let resets = log_lines(&node, "peer changed: resetting its session");
    let reloaded = log_lines(&node, "config reloaded");
    println!(
        "second edit written {:?} after SIGHUP, {resets} of 4 resets logged",
        began.elapsed()
    );
    assert!(
        resets < 4 && reloaded == 1,
        "the first reload was over before the second edit ({resets} resets): the test needs a slower reload"
    );
    testlab::wait_until(
        Duration::from_secs(30),
        "the second edit applied (peer late added)",
        || {
            node.log()
                .lines()
                .any(|l| l.contains("peer added") && l.contains("late"))
                .then_some(())
        },
    );
}

#[test]
fn a_connect_retry_change_resets_nothing_and_counters_survive_a_reset() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let conf =
        |hold: &str, retry: &str| conf_with(|p| p.hold_time(hold).connect_retry(retry)).to_toml();
    let node = Holdfast::start(&lab.node, &conf("9s", "1s"), &vips(&["198.51.100.10"]));
    frr.wait_established(node_ip(), LONG);
    testlab::wait_until(LONG, "FRR has the VIP", || {
        frr.prefix("198.51.100.10/32").map(|_| ())
    });
    let connections = || {
        frr.neighbor(node_ip())["connectionsEstablished"]
            .as_u64()
            .expect("FRR's connectionsEstablished")
    };
    assert_eq!(connections(), 1);
    let scrape = node.metrics();
    let sent = peer_metric(&scrape, "holdfast_peer_updates_sent_total", "tor1");
    assert!(sent > 0.0, "updates sent before the reload: {sent}");
    assert_eq!(
        peer_metric(
            &scrape,
            "holdfast_peer_established_transitions_total",
            "tor1"
        ),
        1.0
    );

    // connect_retry only: nothing to reset.
    node.write_config(&conf("9s", "2s"));
    testlab::wait_until(LONG, "the connect_retry reload", || {
        (log_lines(&node, "config reloaded") == 1).then_some(())
    });
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(connections(), 1, "FRR saw the session reset");
    assert_eq!(
        log_lines(&node, "resetting its session"),
        0,
        "{}",
        node.log()
    );
    let scrape = node.metrics();
    assert!(peer_metric(&scrape, "holdfast_peer_updates_sent_total", "tor1") >= sent);
    assert_eq!(
        peer_metric(
            &scrape,
            "holdfast_peer_established_transitions_total",
            "tor1"
        ),
        1.0
    );

    // hold_time is negotiated in OPEN (RFC 4271 §4.2): a reset, after
    // which the counters go on from where they were.
    node.write_config(&conf("12s", "2s"));
    testlab::wait_until(LONG, "FRR's second connection", || {
        (connections() == 2 && frr.state(node_ip()) == "Established").then_some(())
    });
    testlab::wait_until(LONG, "holdfast Established again", || {
        (node.peer_state("tor1") == "Established").then_some(())
    });
    testlab::wait_until(LONG, "the VIP sent again on the new session", || {
        let scrape = node.metrics();
        let now = peer_metric(&scrape, "holdfast_peer_updates_sent_total", "tor1");
        (now > sent).then_some(())
    });
    let scrape = node.metrics();
    assert_eq!(
        peer_metric(
            &scrape,
            "holdfast_peer_established_transitions_total",
            "tor1"
        ),
        2.0,
        "established transitions of both sessions"
    );
}

#[test]
fn a_reload_moves_the_api_and_the_listening_address() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let mut node = Holdfast::start(
        &lab.node,
        &conf().listen("0.0.0.0:179").to_toml(),
        &vips(&["198.51.100.10"]),
    );
    frr.wait_established(node_ip(), LONG);
    let localhost: IpAddr = "127.0.0.1".parse().unwrap();
    let probe = |port: u16| lab.node.tcp_probe(localhost, port, Duration::from_secs(1));
    assert_eq!(probe(9179), testlab::TcpProbe::Connected);

    node.write_config(
        &conf()
            .listen("192.0.2.2:1179")
            .api("127.0.0.1:9180")
            .to_toml(),
    );
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "the API on 127.0.0.1:9180", || {
        (probe(9180) == testlab::TcpProbe::Connected).then_some(())
    });
    testlab::wait_until(LONG, "the API gone from 127.0.0.1:9179", || {
        (probe(9179) != testlab::TcpProbe::Connected).then_some(())
    });
    let node_addr = node_ip();
    testlab::wait_until(LONG, "BGP accepted on 192.0.2.2:1179", || {
        (lab.router
            .tcp_probe(node_addr, 1179, Duration::from_secs(1))
            == testlab::TcpProbe::Connected)
            .then_some(())
    });
    testlab::wait_until(LONG, "BGP no longer accepted on port 179", || {
        (lab.router.tcp_probe(node_addr, 179, Duration::from_secs(1))
            != testlab::TcpProbe::Connected)
            .then_some(())
    });
    assert_eq!(
        frr.neighbor(node_ip())["connectionsEstablished"].as_u64(),
        Some(1),
        "moving the listener reset no session"
    );
}

/// An edit of the config file, no SIGHUP: the daemon sees it by its watch
/// of the file's directory. The edit adds the first `interface`
/// advertisement: the interface driver, idle until then (no advertisement
/// read the addresses), starts following them.
#[test]
fn an_edit_adding_an_interface_advertisement_is_followed_without_a_signal() {
    testlab::require_root();
    let lab = Lab::pair();
    lab.node.ip(&["addr", "add", "203.0.113.9/32", "dev", "lo"]);
    let frr = Tor::new().on(&lab);
    let node = Holdfast::start(&lab.node, &conf().to_toml(), &vips(&["198.51.100.10"]));
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    assert!(
        frr.prefix("203.0.113.9/32").is_none(),
        "no interface advertisement yet"
    );

    let edited = Instant::now();
    node.write_config(
        &conf()
            .advertisement(Advertisement::new("loopback").interface("lo"))
            .to_toml(),
    );
    frr.wait_prefix("203.0.113.9/32", LONG);
    println!(
        "interface address announced {:?} after the edit",
        edited.elapsed()
    );
    // Followed from then on: an address added to lo is announced.
    lab.node
        .ip(&["addr", "add", "203.0.113.10/32", "dev", "lo"]);
    frr.wait_prefix("203.0.113.10/32", LONG);
    assert!(
        log_lines(&node, "config reloaded") >= 1,
        "the edit was applied as a reload:\n{}",
        node.log()
    );
}

/// `GET /healthz` on the API, given 5 s to answer: the HTTP status line,
/// or why there is none. (A daemon whose one thread is stuck still
/// completes the TCP handshake, in the kernel; only the answer needs it.)
fn api_answer(node: &Holdfast) -> Result<String, String> {
    let out = node.exec(&[
        "timeout",
        "5",
        "bash",
        "-c",
        "exec 3<>/dev/tcp/127.0.0.1/9179; printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
    ]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    match text.lines().next() {
        Some(line) if out.status.success() && line.starts_with("HTTP/1.") => Ok(line.to_owned()),
        _ => Err(format!("no answer within 5 s ({}): {text:?}", out.status)),
    }
}

/// Where the operator's file lies on the file system that hangs.
#[derive(Clone, Copy, Debug)]
enum OnTheHangingMount {
    PasswordFile,
    Config,
}

/// A reload whose files lie on a file system that stops answering (a
/// FUSE mount here; a dead NFS server or a stuck Secret volume in
/// life): the daemon reads them off its thread, gives up after 10 s and
/// refuses the reload whole, while its sessions (keepalives) and API go
/// on. The daemon peers with FRR with a TCP MD5 key (RFC 2385) read from
/// `password_file`.
fn a_reload_reading_a_hanging_file(what: OnTheHangingMount) {
    testlab::require_root();
    let lab = Lab::pair();
    let backing = testlab::LabDir::new("backing");
    let key = "s3cret-key";
    std::fs::write(backing.join("tor1.key"), format!("{key}\n")).unwrap();
    // Declared before the file system, so dropped after it: a process
    // with a read in flight on a FUSE mount is not reaped until the read
    // is answered, which the file system's drop does.
    let mut node;
    let mut fs = testlab::HangingFs::mount(backing.path());
    let frr = frr_signing(&lab, key);
    let conf = |key_path: &std::path::Path| conf_with(|p| p.md5(key_path)).to_toml();
    let vip_file = vips(&["198.51.100.10"]);
    node = match what {
        OnTheHangingMount::PasswordFile => {
            Holdfast::start(&lab.node, &conf(&fs.path().join("tor1.key")), &vip_file)
        }
        OnTheHangingMount::Config => {
            // The key read directly, not through the mount.
            let local_key = backing.write("local.key", &format!("{key}\n"));
            Holdfast::start_config_at(
                &lab.node,
                &conf(&local_key),
                &vip_file,
                &backing.join("holdfast.toml"),
                &fs.path().join("holdfast.toml"),
            )
        }
    };
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let connections = || {
        frr.neighbor(node_ip())["connectionsEstablished"]
            .as_u64()
            .expect("FRR's connectionsEstablished")
    };
    assert_eq!(connections(), 1);
    assert_eq!(metric(&node.metrics(), "holdfast_config_reload_error"), 0.0);

    // The file system stops answering; the operator asks for a reload.
    fs.hang();
    let keepalives = frr.message_stat(node_ip(), "keepalivesRecv");
    let from = node.log().len();
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "the daemon's read held by the file system", || {
        (fs.held() > 0).then_some(())
    });
    // While the read hangs: the API answers, the session stays up.
    let refused = testlab::wait_for(LONG, "the reload refused for its time limit", || {
        if let Err(e) = api_answer(&node) {
            panic!(
                "the API stopped answering while the reload's read hangs: {e}\n{}",
                node.log()
            );
        }
        assert_eq!(
            frr.state(node_ip()),
            "Established",
            "the session went down while the reload's read hangs:\n{}",
            node.log()
        );
        node.log()[from..]
            .lines()
            .find(|l| l.contains("config reload refused"))
            .map(str::to_owned)
            .ok_or_else(|| "not refused yet".to_owned())
    });
    assert!(
        refused.contains("were not read within 10s; is the file system hanging?"),
        "{refused}"
    );
    assert!(
        fs.held() > 0,
        "the read returned: the file system did not hang"
    );
    // Keepalives flowed all along (3 s apart; the refusal came after 10 s),
    // on the same connection.
    let sent = frr.message_stat(node_ip(), "keepalivesRecv") - keepalives;
    assert!(sent >= 2, "FRR got {sent} keepalives while the read hung");
    assert_eq!(connections(), 1, "the session was reset");
    // What the operator sees: the metric and the status.
    assert_eq!(metric(&node.metrics(), "holdfast_config_reload_error"), 1.0);
    let status = node.status();
    assert!(
        status["config_error"]
            .as_str()
            .is_some_and(|e| e.contains("not read within 10s")),
        "{status}"
    );
    // Another reload while the first read still hangs is refused at once:
    // one stuck thread at most.
    let from = node.log().len();
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "the second reload refused", || {
        node.log()[from..]
            .lines()
            .find(|l| l.contains("config reload refused"))
            .map(str::to_owned)
    });
    assert!(
        node.log()[from..].contains("has not returned yet"),
        "{}",
        &node.log()[from..]
    );
    assert!(api_answer(&node).is_ok());

    match what {
        OnTheHangingMount::PasswordFile => {
            // The file system answers again: the next reload goes through.
            // The held read returns first, on the daemon's reading thread;
            // a SIGHUP that comes before it has is refused like the one
            // above (one read at a time), so ask again until one is taken.
            fs.serve();
            testlab::wait_until(LONG, "the reload-error metric back at 0", || {
                if metric(&node.metrics(), "holdfast_config_reload_error") == 0.0 {
                    return Some(());
                }
                node.kill(Signal::Hup);
                std::thread::sleep(Duration::from_millis(500));
                None
            });
            assert_eq!(frr.state(node_ip()), "Established");
            assert_eq!(connections(), 1, "the session was reset");
        }
        OnTheHangingMount::Config => {
            // SIGTERM while the read still hangs: the daemon stops as
            // usual and its main thread exits; its hanging thread does not
            // hold the exit. (The kernel reaps the process once the read
            // is answered: a read FUSE has handed to its server cannot be
            // killed.)
            let pid = node.process.as_ref().expect("running").pid();
            node.kill(Signal::Term);
            testlab::wait_until(LONG, "holdfast stopped", || {
                node.log().contains("holdfast stopped").then_some(())
            });
            testlab::wait_for(LONG, "the daemon's main thread to exit", || {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/stat"))
                    .unwrap_or_default();
                // The state follows the command's closing parenthesis.
                match stat
                    .rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
                {
                    Some('Z') | None => Ok(()),
                    state => Err(format!("main thread in state {state:?}")),
                }
            });
            fs.serve();
            let status = node.wait_exit();
            assert!(status.success(), "{status}: {}", node.log());
        }
    }
}

#[test]
fn a_reload_whose_password_file_hangs_is_refused_and_the_daemon_runs_on() {
    a_reload_reading_a_hanging_file(OnTheHangingMount::PasswordFile);
}

#[test]
fn a_reload_whose_config_file_hangs_is_refused_and_the_daemon_runs_on() {
    a_reload_reading_a_hanging_file(OnTheHangingMount::Config);
}

/// `speaker.metrics` follows a reload: the new address is bound before
/// the old one closes; one that cannot be bound refuses the reload whole
/// (the other changes of the same edit are not applied either). A
/// `source.kind` change is refused whole too: switching the source is a
/// restart's job.
#[test]
fn a_reload_moves_the_metrics_listener_and_refuses_what_it_cannot_apply() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let metrics = |addr: &str| conf().metrics(addr);
    let late = Peer::new("late", "192.0.2.54", 65054);
    let mut node = Holdfast::start(
        &lab.node,
        &metrics("127.0.0.1:9190").to_toml(),
        &vips(&["198.51.100.10"]),
    );
    frr.wait_established(node_ip(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let localhost: IpAddr = "127.0.0.1".parse().unwrap();
    let open = |port: u16| {
        lab.node.tcp_probe(localhost, port, Duration::from_secs(1)) == testlab::TcpProbe::Connected
    };
    let has_peer = |node: &Holdfast, name: &str| {
        node.status()["peers"]
            .as_array()
            .expect("peers")
            .iter()
            .any(|p| p["name"] == name)
    };
    assert!(open(9190));

    // Moved.
    node.write_config(&metrics("127.0.0.1:9191").to_toml());
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "metrics on 127.0.0.1:9191", || {
        open(9191).then_some(())
    });
    testlab::wait_until(LONG, "metrics gone from 127.0.0.1:9190", || {
        (!open(9190)).then_some(())
    });
    let scrape = lab.node.exec(&[
        "bash",
        "-c",
        "exec 3<>/dev/tcp/127.0.0.1/9191; printf 'GET /metrics HTTP/1.0\\r\\n\\r\\n' >&3; cat <&3",
    ]);
    assert!(
        String::from_utf8_lossy(&scrape.stdout).contains("holdfast_config_reload_error 0"),
        "the new listener serves the metrics"
    );

    // An address this node does not have: nothing of the edit applies.
    let from = node.log().len();
    node.write_config(&metrics("192.0.2.99:9192").peer(late.clone()).to_toml());
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "the reload-error metric at 1", || {
        (metric(&node.metrics(), "holdfast_config_reload_error") == 1.0).then_some(())
    });
    let refused = node.log()[from..]
        .lines()
        .find(|l| l.contains("config reload refused"))
        .map(str::to_owned)
        .expect("a refusal logged");
    assert!(refused.contains("speaker.metrics"), "{refused}");
    assert!(open(9191), "the old metrics listener stays");
    assert!(!has_peer(&node, "late"), "a refused reload added a peer");

    // source.kind: refused whole, whatever else the edit holds.
    let from = node.log().len();
    node.write_config(
        &metrics("127.0.0.1:9191")
            .peer(late)
            .kubernetes_source()
            .to_toml(),
    );
    node.kill(Signal::Hup);
    let refused = testlab::wait_until(LONG, "the source.kind change refused", || {
        node.log()[from..]
            .lines()
            .find(|l| l.contains("config reload refused"))
            .map(str::to_owned)
    });
    assert!(
        refused.contains(
            "the sources changed from [file] to [kubernetes]: a reload cannot switch sources"
        ),
        "{refused}"
    );
    assert_eq!(metric(&node.metrics(), "holdfast_config_reload_error"), 1.0);
    assert!(!has_peer(&node, "late"), "a refused reload added a peer");
    assert!(frr.prefix("198.51.100.10/32").is_some());

    // Removed.
    node.write_config(&conf().to_toml());
    node.kill(Signal::Hup);
    testlab::wait_until(LONG, "metrics gone from 127.0.0.1:9191", || {
        (!open(9191)).then_some(())
    });
    assert_eq!(metric(&node.metrics(), "holdfast_config_reload_error"), 0.0);
}

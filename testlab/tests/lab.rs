//! The lab's own mechanics: namespaces, links, black holes, processes,
//! cleanup. Needs root (fails loudly without it).

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use testlab::lab::routed;
use testlab::netns::list_netns;
use testlab::{Afi, Lab, Netns, NsProcess, Signal, TcpProbe, wait_until};

const PROBE: Duration = Duration::from_secs(2);
/// A port nothing listens on: an answer is a RST.
const CLOSED_PORT: u16 = 9;

fn assert_gone(names: &[String]) {
    let left = list_netns();
    for name in names {
        assert!(
            !left.contains(name),
            "namespace {name} still exists: {left:?}"
        );
    }
}

#[test]
fn dropping_a_lab_kills_its_processes_and_deletes_its_namespaces() {
    let lab = Lab::routed_pair();
    let names = lab.netns_names();
    assert_eq!(names.len(), 3);
    let listed = list_netns();
    for name in &names {
        assert!(
            listed.contains(name),
            "{name} missing from ip netns list: {listed:?}"
        );
    }
    // Left running on purpose: the namespace's drop must kill it.
    let mut child = lab.router.spawn(&["sleep", "1000"]);
    wait_until(
        Duration::from_secs(5),
        "sleep to run inside the router namespace",
        || lab.router.pids().contains(&child.id()).then_some(()),
    );
    drop(lab);
    assert_gone(&names);
    let status = child.wait().expect("reap sleep");
    assert!(
        !status.success(),
        "sleep should have been killed, exited {status}"
    );
}

#[test]
fn a_panicking_test_still_deletes_its_namespaces_and_keeps_its_logs() {
    let (tx, rx) = mpsc::channel();
    let result = std::thread::spawn(move || {
        let lab = Lab::pair();
        let daemon = NsProcess::start(&lab.node, "sleeper", &["sleep", "1000"]);
        let log_dir = daemon.log_path().parent().expect("log dir").to_path_buf();
        tx.send((lab.netns_names(), log_dir)).expect("send names");
        panic!("deliberate failure inside a lab test");
    })
    .join();
    assert!(result.is_err(), "the lab thread should have panicked");
    let (names, log_dir) = rx.recv().expect("the lab thread sent its namespace names");
    assert_gone(&names);
    // Kept for inspection (and swept by a later test process once this one
    // has exited); removed here to leave nothing behind.
    assert!(
        log_dir.join("sleeper.log").exists(),
        "{} was not kept",
        log_dir.display()
    );
    std::fs::remove_dir_all(&log_dir).expect("remove the kept directory");
}

#[test]
fn parallel_namespaces_get_distinct_names() {
    let threads: Vec<_> = (0..6)
        .map(|_| std::thread::spawn(|| Netns::new("par")))
        .collect();
    let namespaces: Vec<Netns> = threads
        .into_iter()
        .map(|t| t.join().expect("thread"))
        .collect();
    let names: HashSet<&str> = namespaces.iter().map(Netns::name).collect();
    assert_eq!(names.len(), namespaces.len(), "duplicate names: {names:?}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with(&format!("tl-{}-", std::process::id())))
    );
}

#[test]
fn pair_connects_router_and_node_over_ipv4_and_ipv6() {
    let lab = Lab::pair();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        let probe = lab.node.tcp_probe(lab.router_addr(afi), CLOSED_PORT, PROBE);
        assert_eq!(probe, TcpProbe::Refused, "node -> router over {afi:?}");
        let probe = lab.router.tcp_probe(lab.node_addr(afi), CLOSED_PORT, PROBE);
        assert_eq!(probe, TcpProbe::Refused, "router -> node over {afi:?}");
    }
}

#[test]
fn blackhole_silently_drops_both_directions_until_restored() {
    let lab = Lab::pair();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        assert!(
            lab.node
                .tcp_probe(lab.router_addr(afi), CLOSED_PORT, PROBE)
                .answered()
        );
    }
    lab.node_link.blackhole();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        let short = Duration::from_secs(1);
        assert_eq!(
            lab.node.tcp_probe(lab.router_addr(afi), CLOSED_PORT, short),
            TcpProbe::TimedOut,
            "node -> router over {afi:?} while black-holed"
        );
        assert_eq!(
            lab.router.tcp_probe(lab.node_addr(afi), CLOSED_PORT, short),
            TcpProbe::TimedOut,
            "router -> node over {afi:?} while black-holed"
        );
    }
    // The link itself stays up: only frames vanish.
    let link = lab
        .node
        .ip(&["-o", "link", "show", "dev", &lab.node_link.a.ifname]);
    assert!(link.contains("LOWER_UP"), "link lost carrier: {link}");
    lab.node_link.restore();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        wait_until(PROBE * 3, &format!("{afi:?} traffic after restore"), || {
            lab.node
                .tcp_probe(lab.router_addr(afi), CLOSED_PORT, PROBE)
                .answered()
                .then_some(())
        });
    }
}

#[test]
fn link_down_stops_traffic_and_link_up_brings_it_back_with_its_addresses() {
    let lab = Lab::pair();
    lab.node_link.set_down();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        let probe = lab
            .node
            .tcp_probe(lab.router_addr(afi), CLOSED_PORT, Duration::from_secs(1));
        assert!(
            !probe.answered(),
            "node reached router over {afi:?} with the link down: {probe:?}"
        );
    }
    lab.node_link.set_up();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        wait_until(PROBE * 3, &format!("{afi:?} traffic after link up"), || {
            lab.node
                .tcp_probe(lab.router_addr(afi), CLOSED_PORT, PROBE)
                .answered()
                .then_some(())
        });
    }
}

#[test]
fn routed_pair_reaches_the_router_through_mid() {
    let lab = Lab::routed_pair();
    for afi in [Afi::Ipv4, Afi::Ipv6] {
        let router = lab.router_addr(afi);
        assert_eq!(
            lab.node.tcp_probe(router, CLOSED_PORT, PROBE),
            TcpProbe::Refused
        );
        assert_eq!(
            lab.router.tcp_probe(lab.node_addr(afi), CLOSED_PORT, PROBE),
            TcpProbe::Refused
        );
        let gateway: IpAddr = match afi {
            Afi::Ipv4 => routed::MID_NODE_SIDE_V4.into(),
            Afi::Ipv6 => routed::MID_NODE_SIDE_V6.into(),
        };
        let route = lab.node.ip(&["route", "get", &router.to_string()]);
        assert!(
            route.contains(&format!("via {gateway}")),
            "node's route to {router}: {route}"
        );
    }
    // Without mid forwarding the router is out of reach: the hop is real.
    let mid = lab.mid.as_ref().expect("routed pair has mid");
    mid.sysctl("net.ipv4.ip_forward", "0");
    let probe = lab
        .node
        .tcp_probe(lab.router_v4.into(), CLOSED_PORT, Duration::from_secs(1));
    assert!(
        !probe.answered(),
        "router answered with forwarding off: {probe:?}"
    );
}

#[test]
fn ns_process_runs_inside_the_namespace_logs_output_and_takes_signals() {
    let lab = Lab::pair();
    let script = "ip -o link show; echo to-stderr >&2; exec sleep 1000";
    let mut process = NsProcess::start(&lab.node, "shell", &["sh", "-c", script]);
    wait_until(
        Duration::from_secs(5),
        "the shell's output in its log",
        || {
            let log = process.log();
            (log.contains("to-stderr") && log.contains("to-router")).then_some(())
        },
    );
    assert!(
        !process.log().contains("to-node"),
        "the router's interface is visible from the node"
    );
    assert!(process.is_running());
    let start = Instant::now();
    process.kill(Signal::Term);
    let status = process.wait_exit(Duration::from_secs(5));
    assert!(
        !status.success(),
        "sleep exited successfully after SIGTERM: {status}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
#[should_panic(expected = "timed out after 0.3s waiting for the impossible; last seen: still no")]
fn wait_for_names_what_never_happened() {
    testlab::wait_for(Duration::from_millis(300), "the impossible", || {
        Err::<(), _>("still no".to_owned())
    });
}

#[test]
#[should_panic(expected = "missing /nonexistent/bgpd: apt-get install frr")]
fn require_tools_says_which_package_to_install() {
    testlab::require_tools(&["sh", "/nonexistent/bgpd"]);
}

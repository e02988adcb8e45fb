//! The periodic reconcile (`[source] resync`) of a real daemon against FRR:
//! it runs every period, finds nothing to repair while the source and the
//! sessions keep up — through edits of the VIP file — and says so in its
//! counter. (A missed event cannot be produced from outside: the file source
//! sees every edit and the session follows every table; the repair
//! decisions are unit-tested in `source::resync`.)

mod common;

use std::net::IpAddr;

use common::*;
use testlab::{Frr, Lab, wait_until};

fn conf() -> String {
    "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nhostname = \"node-1\"\n\n\
     [[peer]]\nname = \"tor\"\naddress = \"192.0.2.1\"\nasn = 65000\nhold_time = \"9s\"\n\
     keepalive = \"3s\"\nconnect_retry = \"1s\"\nfamilies = [\"ipv4-unicast\"]\n\n\
     [source]\nkind = \"file\"\npath = \"VIPS\"\nresync = \"1s\"\n\n\
     [stability]\nwithdraw_hold_down = \"0s\"\n\n\
     [[advertisement]]\nname = \"public\"\n"
        .to_string()
}

/// The value of an unlabelled metric; absent fails the test.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
        .trim()
        .parse()
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

#[test]
fn resync_runs_every_period_and_repairs_nothing_when_nothing_was_missed() {
    testlab::require_root();
    let lab = Lab::pair();
    let neighbor: IpAddr = "192.0.2.2".parse().unwrap();
    let frr = Frr::start(
        &lab.router,
        &frr_conf(65000, "192.0.2.1", &[("192.0.2.2", 65001)], ""),
    );
    let node = Holdfast::start(
        &lab.node,
        &conf(),
        &vips(&["198.51.100.60", "198.51.100.61"]),
    );
    frr.wait_established(neighbor, LONG);
    frr.wait_prefix("198.51.100.61/32", LONG);
    // Edits between resyncs: one added, one removed.
    node.write_vips(&vips(&["198.51.100.60", "198.51.100.62"]));
    frr.wait_prefix("198.51.100.62/32", LONG);
    wait_until(LONG, "198.51.100.61 withdrawn", || {
        frr.prefix("198.51.100.61/32").is_none().then_some(())
    });
    // Several resyncs with nothing to repair.
    let runs = |log: &str| {
        log.matches("resync: every peer's routes match the source")
            .count()
    };
    let before = runs(&node.log());
    wait_until(LONG, "three more resyncs", || {
        let log = node.log();
        assert!(!log.contains("resync: the"), "a repair was logged:\n{log}");
        (runs(&log) >= before + 3).then_some(())
    });
    assert!(
        !node.log().contains("resync: the"),
        "a repair was logged:\n{}",
        node.log()
    );
    assert_eq!(
        metric(&node.metrics(), "holdfast_reconcile_repairs_total"),
        0
    );
    assert!(frr.prefix("198.51.100.60/32").is_some());
}

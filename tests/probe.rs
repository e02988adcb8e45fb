//! TCP-probe gating: a VIP is advertised only while a TCP
//! connect from the node to VIP:port succeeds.

mod common;

use std::time::{Duration, Instant};

use common::*;
use testlab::{Frr, Lab, NsProcess, Signal, wait_until};

const NODE: &str = "192.0.2.2";
const LISTENER: &str = "import socket,sys\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\ns.bind(('198.51.100.10', 8080))\ns.listen(64)\nwhile True:\n    c,_=s.accept()\n    c.close()\n";

fn listener(ns: &testlab::Netns) -> NsProcess {
    NsProcess::start(ns, "listener", &["python3", "-c", LISTENER])
}

/// Advertisement `web`, probed on port 8080 every 500 ms.
fn web() -> Advertisement {
    Advertisement::new("web").probe(
        Probe::tcp(8080)
            .interval("500ms")
            .timeout("300ms")
            .fail_after(3)
            .recover_after(2),
    )
}

/// The node with 198.51.100.10 local to it (as kube-proxy or Cilium make
/// it), and FRR on the router peering with it.
fn lab_with_a_local_vip() -> (Lab, Frr) {
    let lab = Lab::pair();
    lab.node
        .ip(&["addr", "add", "198.51.100.10/32", "dev", "lo"]);
    let frr = Tor::new().on(&lab);
    (lab, frr)
}

#[test]
fn a_vip_is_advertised_only_while_its_tcp_probe_passes() {
    testlab::require_root();
    testlab::require_tools(&["python3"]);
    let (lab, frr) = lab_with_a_local_vip();
    let node = Holdfast::start(&lab.node, &probe_node(&[web()]), &vips(&["198.51.100.10"]));
    frr.wait_established(NODE.parse().unwrap(), LONG);
    // Nothing listens yet: never advertised.
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        frr.prefix("198.51.100.10/32").is_none(),
        "advertised without a passing probe"
    );
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 1);
    assert!(text.contains("has not succeeded yet"), "{text}");
    // A listener: advertised after the first successful probe.
    let mut l = listener(&lab.node);
    frr.wait_prefix("198.51.100.10/32", Duration::from_secs(10));
    // Stop it: withdrawn after fail_after (3) failed probes, without the
    // 30 s hold-down.
    l.kill(Signal::Kill);
    let stopped = Instant::now();
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(10));
    let took = stopped.elapsed();
    assert!(
        took >= Duration::from_millis(1000) && took <= Duration::from_secs(4),
        "withdrawn after {took:?}"
    );
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 1);
    assert!(
        text.contains("failed 3 times") && text.contains("without the hold-down"),
        "{text}"
    );
    // Start it again: back after recover_after (2) good probes.
    let _l = listener(&lab.node);
    frr.wait_prefix("198.51.100.10/32", Duration::from_secs(10));
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("probe to port 8080 passes"), "{text}");
}

/// While the source is unhealthy (the VIP file made invalid) the last known
/// set stands, but a probe is this node's own look at its datapath: a VIP
/// whose probe fails goes from the router all the same, and the others
/// stay.
#[test]
fn a_failing_probe_withdraws_its_vip_while_the_vip_file_is_broken() {
    testlab::require_root();
    testlab::require_tools(&["python3"]);
    let (lab, frr) = lab_with_a_local_vip();
    // `web` is probed; `plain` is not.
    let conf = probe_node(&[web(), Advertisement::new("plain")]);
    let good = format!(
        "{}[[vip]]\naddress = \"198.51.100.20\"\nadvertisement = \"plain\"\n",
        vips(&["198.51.100.10"])
    );
    let mut l = listener(&lab.node);
    let node = Holdfast::start(&lab.node, &conf, &good);
    frr.wait_established(NODE.parse().unwrap(), LONG);
    frr.wait_prefix("198.51.100.10/32", Duration::from_secs(10));
    frr.wait_prefix("198.51.100.20/32", Duration::from_secs(10));

    // The file broken: the source is unhealthy and keeps its last good set.
    node.write_vips("[[vip]]\naddress = \"not an address\"\n");
    wait_until(LONG, "the source unhealthy", || {
        (node.status()["source"]["healthy"] == false).then_some(())
    });
    assert!(frr.prefix("198.51.100.10/32").is_some());
    assert!(frr.prefix("198.51.100.20/32").is_some());

    // The probed port closes: withdrawn after fail_after (3) failures,
    // however long the file stays broken.
    l.kill(Signal::Kill);
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(10));
    let (code, text) = node.explain("198.51.100.10");
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("failed 3 times"), "{text}");
    // The unprobed VIP stays: the broken file no longer lists it, but the
    // source keeps its last good set and its word waits for a healthy
    // source.
    assert!(
        frr.prefix("198.51.100.20/32").is_some(),
        "{}",
        node.status_text()
    );
    assert_eq!(node.status()["source"]["healthy"], false);
}

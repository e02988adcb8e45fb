//! `address = "default-gateway"`: the node peers with its default gateway
//! and follows it when it changes (issue 2/7).

mod common;

use std::time::Duration;

use common::*;
use testlab::{Frr, Lab, wait_until};

#[test]
fn peers_with_the_default_gateway_and_follows_it() {
    testlab::require_root();
    let lab = Lab::pair();
    lab.node
        .ip(&["route", "add", "default", "via", "192.0.2.1"]);
    let frr = Frr::start(
        &lab.router,
        &frr_conf(65000, "192.0.2.1", &[("192.0.2.2", 65001)], ""),
    );
    let conf = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nhostname = \"node-1\"\n\n\
                [[peer]]\nname = \"gw\"\naddress = \"default-gateway\"\nfamily = \"ipv4\"\nasn = 65000\nhold_time = \"9s\"\nconnect_retry = \"1s\"\n\n\
                [source]\nkind = \"file\"\npath = \"VIPS\"\n";
    let node = Holdfast::start(&lab.node, conf, &vips(&["198.51.100.10"]));
    frr.wait_established("192.0.2.2".parse().unwrap(), LONG);
    frr.wait_prefix("198.51.100.10/32", LONG);
    let peer = |node: &Holdfast| node.status()["peers"][0].clone();
    assert_eq!(peer(&node)["address"], "192.0.2.1");
    assert_eq!(peer(&node)["configured_address"], "default-gateway (IPv4)");
    // The gateway moves: the session follows it (to an address nobody
    // answers on), and FRR loses the session.
    lab.node
        .ip(&["route", "replace", "default", "via", "192.0.2.3"]);
    wait_until(
        Duration::from_secs(15),
        "the peer to follow the gateway",
        || (peer(&node)["address"] == "192.0.2.3").then_some(()),
    );
    frr.wait_no_prefix("198.51.100.10/32", Duration::from_secs(15));
    // And back.
    lab.node
        .ip(&["route", "replace", "default", "via", "192.0.2.1"]);
    frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(peer(&node)["state"], "Established");
}

//! Runtime routes against FRR: `holdfast route announce` puts a prefix
//! with its attributes on the wire, `withdraw` takes it off, and both
//! outlive a restart of holdfast (the state directory keeps them).

mod common;

use std::net::IpAddr;
use std::process::Output;

use common::*;
use serde_json::Value;

const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
const PREFIX: &str = "198.51.100.0/24";

/// `holdfast route ARGS… --state-dir DIR` on `node`'s socket.
fn route(node: &Holdfast, args: &[&str]) -> Output {
    let state = node.state_dir().display().to_string();
    let mut argv = vec![BIN, "route"];
    argv.extend_from_slice(args);
    argv.extend(["--state-dir", &state]);
    node.exec(&argv)
}

fn ok(out: Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// FRR's path for PREFIX: its communities and MED, once it has one.
fn path(frr: &testlab::Frr) -> Value {
    frr.wait_prefix(PREFIX, LONG)["paths"][0].clone()
}

#[test]
fn a_runtime_route_is_announced_withdrawn_and_kept_across_restarts() {
    testlab::require_root();
    let (lab, frr) = Tor::new().start();
    let config = Config::node(65001, NODE)
        .peer(Peer::new("tor1", TOR, 65000).fast())
        .advertisement(
            Advertisement::public("65001:100")
                .vip_ranges(&["198.51.100.0/24"])
                .allow_service_attributes(&["communities", "med"]),
        )
        .to_toml();
    let mut node = Holdfast::start(&lab.node, &config, "");
    let node_ip: IpAddr = NODE.parse().unwrap();
    frr.wait_established(node_ip, LONG);

    let listed = ok(route(
        &node,
        &["announce", PREFIX, "--community", "65001:7", "--med", "20"],
    ));
    assert!(
        listed
            .contains("198.51.100.0/24 under the first advertisement, communities 65001:7, med 20"),
        "{listed}"
    );
    let p = path(&frr);
    assert_eq!(p["metric"], 20, "MED {p}");
    assert_eq!(p["community"]["string"], "65001:7 65001:100", "{p}");
    // Status names the source; explain says who has it.
    let status = node.status();
    let row = status["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["prefix"] == PREFIX)
        .cloned()
        .unwrap_or_else(|| panic!("no {PREFIX} in {status}"));
    assert_eq!(row["source"], "runtime", "{row}");

    // What the advertisement does not let through is refused, and nothing
    // changes.
    let refused = route(&node, &["announce", "198.51.100.9", "--local-pref", "5"]);
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("does not let local-pref through"), "{said}");
    let refused = route(&node, &["announce", "203.0.113.0/24"]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("not within the vip_ranges"),
        "{refused:?}"
    );

    // A restart: the route is announced again from what the state
    // directory kept, with its attributes.
    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success(), "{}", node.log());
    node.run(&[]);
    frr.wait_established(node_ip, LONG);
    testlab::wait_for(LONG, "the kept route with its MED", || {
        let p = frr.prefix(PREFIX).ok_or("no route")?;
        if p["paths"][0]["metric"] == 20 {
            Ok(())
        } else {
            Err(format!("{p}"))
        }
    });
    assert!(
        node.log().contains("runtime routes kept from the last run"),
        "{}",
        node.log()
    );

    // Withdrawn: gone from FRR, and it stays gone after a restart.
    let listed = ok(route(&node, &["withdraw", PREFIX]));
    assert!(listed.contains("no runtime routes"), "{listed}");
    frr.wait_no_prefix(PREFIX, LONG);
    let again = route(&node, &["withdraw", PREFIX]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("no runtime route for 198.51.100.0/24"),
        "{again:?}"
    );
    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success(), "{}", node.log());
    node.run(&[]);
    frr.wait_established(node_ip, LONG);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        frr.prefix(PREFIX).is_none(),
        "withdrawn, and kept withdrawn"
    );
    assert_eq!(ok(route(&node, &["list", "--json"])).trim(), "[]");
}

//! Listening on BGP's port 179 as an unprivileged user, as the
//! `listen-179` overlay runs holdfast: UID 65532, `NET_BIND_SERVICE` the
//! only capability in the bounding set, privilege escalation allowed, and
//! the image's binary carrying `cap_net_bind_service+p` (permitted, not
//! effective). Only the thread that binds the listening socket raises it,
//! for the `bind` call. Without it (the base DaemonSet: no capability,
//! no_new_privs), the daemon stops, naming the capability and the overlay.
//! (tests/release.rs runs the release image the same two ways.)

mod common;

use common::*;
use testlab::Lab;
use testlab::process::{CAP_NET_BIND_SERVICE, cap_set, proc_status};

/// holdfast listening on the node's 179 for its passive peer, which FRR
/// (the router) connects to.
fn conf(lab: &Lab) -> String {
    Config::node(65001, &lab.node_v4.to_string())
        .listen("0.0.0.0:179")
        .peer(
            Peer::new("tor", lab.router_v4, 65000)
                .passive()
                .hold_time("9s"),
        )
        .to_toml()
}

/// The binary as the image has it: a copy with the file capability.
fn image_binary() -> (testlab::LabDir, String) {
    testlab::process::with_file_caps(BIN, "cap_net_bind_service+p")
}

const USER: [&str; 5] = [
    "setpriv",
    "--reuid=65532",
    "--regid=65532",
    "--clear-groups",
    "--inh-caps=-all",
];

#[test]
fn an_unprivileged_daemon_listens_on_179_with_the_overlay_s_one_capability() {
    testlab::require_root();
    testlab::require_tools(&["/usr/lib/frr/bgpd", "setcap", "setpriv"]);
    let (lab, frr) = Tor::new()
        .lines(&format!(
            " neighbor {} port 179\n",
            testlab::lab::pair::NODE_V4
        ))
        .start();
    let (_bin_dir, bin) = image_binary();
    let overlay: Vec<&str> = USER
        .iter()
        .copied()
        .chain(["--bounding-set=-all,+net_bind_service", "--"])
        .collect();
    let holdfast = Holdfast::start_wrapped(
        &lab.node,
        &conf(&lab),
        &vips(&["198.51.100.10"]),
        &overlay,
        &bin,
        (65532, 65532),
    );
    let pid = holdfast.process.as_ref().expect("running").pid();
    assert!(
        proc_status(pid, "Uid")
            .split_whitespace()
            .all(|u| u == "65532")
    );
    assert_eq!(cap_set(pid, "CapBnd"), CAP_NET_BIND_SERVICE, "bounding set");
    assert_eq!(
        cap_set(pid, "CapPrm"),
        CAP_NET_BIND_SERVICE,
        "permitted set"
    );
    assert_eq!(
        cap_set(pid, "CapEff"),
        0,
        "the main thread holds a capability"
    );
    // The router connected to port 179 and has the VIP.
    let route = frr.wait_prefix("198.51.100.10/32", LONG);
    assert_eq!(route["paths"][0]["valid"], true, "{route}");
    let n = frr.json(&format!("show bgp neighbors {} json", lab.node_v4));
    assert_eq!(n[lab.node_v4.to_string()]["portForeign"], 179, "{n}");
    // Every thread lowered it again (tasks listed in /proc/PID/task).
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).expect("tasks") {
        let tid: u32 = task.unwrap().file_name().to_string_lossy().parse().unwrap();
        assert_eq!(cap_set(tid, "CapEff"), 0, "thread {tid} holds a capability");
    }
}

#[test]
fn without_the_capability_the_daemon_says_what_it_needs() {
    testlab::require_root();
    testlab::require_tools(&["setcap", "setpriv"]);
    let lab = Lab::pair();
    let (_bin_dir, bin) = image_binary();
    let dir = testlab::LabDir::new("holdfast");
    let config = dir.write(
        "holdfast.toml",
        &conf(&lab).replace("VIPS", &dir.join("vips.toml").display().to_string()),
    );
    dir.write("vips.toml", &vips(&["198.51.100.10"]));
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::os::unix::fs::chown(&state, Some(65532), Some(65532)).unwrap();
    // The base DaemonSet: no capability, no_new_privs.
    let mut argv: Vec<String> = USER.iter().map(|s| s.to_string()).collect();
    argv.extend(
        [
            "--bounding-set=-all",
            "--no-new-privs",
            "--",
            &bin,
            "run",
            "--config",
        ]
        .map(String::from),
    );
    argv.push(config.display().to_string());
    argv.push("--state-dir".into());
    argv.push(state.display().to_string());
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let out = lab.node.exec(&argv);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("CAP_NET_BIND_SERVICE") && said.contains("listen-179"),
        "{said}"
    );
}

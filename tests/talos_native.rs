//! holdfast as a workload speaker behind Talos's native BGP (Talos 1.14's
//! `BGPInstanceConfig`: GoBGP v4, embedded in machined), in the topology
//! Talos documents for Cilium and MetalLB:
//!
//! ```text
//!  tor: FRR, AS 65000 ............................ 192.0.2.1/25
//!   |
//!  node: the host's network namespace ........... 192.0.2.2/25
//!   - GoBGP v4, instance "fabric" (AS 65001): owns TCP 179, peers with
//!     FRR, imports the workload instance's best paths inside
//!     198.51.100.0/24 (`importRoutes`)
//!   - holdfast (AS 4200000003), as its host-network pod runs: no BGP
//!     listener, it connects out from veth-workload ... 192.0.2.128/31
//!   |
//!  vrf: Talos's VRF "vrf-workload" ............... veth-router 192.0.2.129/31
//!   - GoBGP v4, instance "workload" (AS 4200000002): passive, one
//!     neighbor (holdfast), `installRoutes: false`
//! ```
//!
//! Two stand-ins, both said where they are used:
//!
//! - **The VRF is a network namespace.** These machines' kernels have no
//!   `CONFIG_NET_VRF`. What Talos gets from the VRF — the workload
//!   instance's listener and routes live apart from the host's main table
//!   and its port 179 — a namespace gives as well; the veth crosses from
//!   the host's domain into it as it does into the VRF.
//! - **The import is the test's.** machined moves routes between its two
//!   GoBGP servers itself (it is not a GoBGP feature): it takes each best
//!   path the workload instance learned from a neighbor and that a selector
//!   contains, and adds it to the fabric instance as a local path with
//!   every attribute but the next hop, which it leaves unspecified so that
//!   GoBGP puts its own address on it per peer; it deletes it when the
//!   source path goes. [`Import`] does the same through the `gobgp` CLI,
//!   polling every 100 ms (machined reacts to GoBGP's best-path events).
//!
//! Both GoBGP instances are configured with what Talos's controller gives
//! GoBGP for these documents and nothing more: the global ASN, router ID
//! and port 179; per neighbor its address and ASN, IPv4 and IPv6 unicast,
//! passive mode when asked, the hold time and a third of it as keepalive.
//! No graceful restart, no policy, no peer group, no dynamic neighbors.
//! The GoBGP binaries are v4, built by `scripts/gobgp4.sh`.

mod common;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use serde_json::Value;
use testlab::{Frr, Gobgp, Netns, veth, wait_for};

const TOR_ASN: u32 = 65000;
const FABRIC_ASN: u32 = 65001;
const WORKLOAD_ASN: u32 = 4_200_000_002;
const HOLDFAST_ASN: u32 = 4_200_000_003;

/// The ToR's and the node's ends of the fabric link.
const TOR: &str = "192.0.2.1";
const NODE: &str = "192.0.2.2";
/// The veth: holdfast's end in the host's domain, Talos's in the VRF.
const HOLDFAST: &str = "192.0.2.128";
const TALOS_WORKLOAD: &str = "192.0.2.129";

/// `importRoutes` of the fabric instance.
const IMPORT_SELECTOR: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 51, 100, 0), 24);

const VIP_A: &str = "198.51.100.10";
const VIP_B: &str = "198.51.100.11";
/// Outside the import selector: the workload instance learns it, the
/// fabric never advertises it.
const VIP_OUTSIDE: &str = "203.0.113.10";

const COMMUNITY: &str = "65001:100";
const LARGE_COMMUNITY: &str = "4200000003:1:100";
const MED: u32 = 50;

// ------------------------------------------------------------------ GoBGP v4

/// gobgpd and gobgp v4, from `scripts/gobgp4.sh` (which builds them once
/// and prints their directory). A missing Go, a failed build or a wrong
/// version fails the test: it never falls back to Debian's GoBGP 3.
fn gobgp4() -> &'static (String, String) {
    static BINARIES: OnceLock<(String, String)> = OnceLock::new();
    BINARIES.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gobgp4.sh");
        let out = Command::new("bash")
            .arg(&script)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(
            out.status.success(),
            "scripts/gobgp4.sh failed: GoBGP v4 is missing and could not be built (it needs Go \
             and the Go module proxy):\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let bin = |name: &str| {
            let path = dir.join(name);
            assert!(
                path.is_file(),
                "scripts/gobgp4.sh printed {} but there is no {name} in it",
                dir.display()
            );
            path.display().to_string()
        };
        let (gobgpd, cli) = (bin("gobgpd"), bin("gobgp"));
        let version = Command::new(&gobgpd)
            .arg("--version")
            .output()
            .expect("gobgpd --version");
        let version = String::from_utf8_lossy(&version.stdout).into_owned();
        assert!(
            version.starts_with("gobgpd version 4."),
            "{gobgpd} is not GoBGP v4: {version}"
        );
        (gobgpd, cli)
    })
}

/// One GoBGP instance as Talos's controller configures it: `StartBgp`
/// with the instance's ASN, router ID and port 179; `AddPeer` per
/// neighbor with its address and ASN, IPv4 and IPv6 unicast enabled,
/// passive mode if set, and with `holdTime` the hold time and a third of
/// it as keepalive. `graceful_restart` adds what Talos never sets (the
/// last test only).
fn talos_instance(asn: u32, neighbors: &[(&str, u32, bool)], graceful_restart: bool) -> String {
    let mut c = format!("[global.config]\n  as = {asn}\n  router-id = \"{NODE}\"\n  port = 179\n");
    for (address, peer_asn, passive) in neighbors {
        c.push_str(&format!(
            r#"[[neighbors]]
  [neighbors.config]
    neighbor-address = "{address}"
    peer-as = {peer_asn}
  [neighbors.transport.config]
    passive-mode = {passive}
  [neighbors.timers.config]
    hold-time = 9
    keepalive-interval = 3
"#
        ));
        if graceful_restart {
            c.push_str(
                "  [neighbors.graceful-restart.config]\n    enabled = true\n    restart-time = 120\n",
            );
        }
        for family in ["ipv4-unicast", "ipv6-unicast"] {
            c.push_str(&format!(
                "  [[neighbors.afi-safis]]\n    [neighbors.afi-safis.config]\n      afi-safi-name = \"{family}\"\n"
            ));
            if graceful_restart {
                c.push_str(
                    "    [neighbors.afi-safis.mp-graceful-restart.config]\n      enabled = true\n",
                );
            }
        }
    }
    c
}

// -------------------------------------------------------------- the import

/// What machined's `importRoutes` does, between two gobgpd: a thread that
/// copies the workload instance's best paths inside [`IMPORT_SELECTOR`]
/// into the fabric instance's RIB as local paths (attributes kept, next
/// hop unspecified) and deletes them when they go. Stopped when dropped.
struct Import {
    stop: Arc<AtomicBool>,
    state: Arc<Mutex<ImportState>>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct ImportState {
    /// Prefix → the `gobgp global rib add` arguments it was imported with.
    imported: BTreeMap<String, Vec<String>>,
    /// Completed passes over the workload RIB.
    rounds: u64,
    /// The first failure; [`Import::check`] fails the test with it.
    error: Option<String>,
}

/// `gobgp -p PORT ARGS` in namespace `ns`: stdout, or the failure.
fn gobgp_cli(ns: &str, port: u16, args: &[&str]) -> Result<String, String> {
    let (_, cli) = gobgp4();
    let port = port.to_string();
    let out = Command::new("ip")
        .args(["netns", "exec", ns, cli, "-p", &port])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run gobgp: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "gobgp {args:?} in {ns}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Import {
    fn start(workload: (&Netns, u16), fabric: (&Netns, u16)) -> Import {
        let stop = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Mutex::new(ImportState::default()));
        let (src, dst) = (
            (workload.0.name().to_owned(), workload.1),
            (fabric.0.name().to_owned(), fabric.1),
        );
        let thread = {
            let (stop, state) = (stop.clone(), state.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Err(e) = import_round(&src, &dst, &state) {
                        let mut s = state.lock().unwrap();
                        s.error.get_or_insert(e);
                    }
                    state.lock().unwrap().rounds += 1;
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Import {
            stop,
            state,
            thread: Some(thread),
        }
    }

    /// Fails the test if a pass failed.
    fn check(&self) {
        if let Some(e) = &self.state.lock().unwrap().error {
            panic!("the import (machined's importRoutes, here the test's) failed: {e}");
        }
    }

    /// The prefixes imported now.
    fn imported(&self) -> Vec<String> {
        self.check();
        self.state
            .lock()
            .unwrap()
            .imported
            .keys()
            .cloned()
            .collect()
    }

    /// Waits for two more complete passes: whatever the workload RIB held
    /// before the call has been acted on.
    fn settle(&self) {
        let start = self.state.lock().unwrap().rounds;
        wait_for(LONG, "two passes of the import", || {
            self.check();
            let now = self.state.lock().unwrap().rounds;
            if now >= start + 2 {
                Ok(())
            } else {
                Err(format!("{now} passes"))
            }
        });
    }
}

impl Drop for Import {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether `prefix` (`A.B.C.D/N`) is contained by [`IMPORT_SELECTOR`]
/// (as Talos matches: same family, at least as long, inside it).
fn selected(prefix: &str) -> bool {
    let Some((addr, len)) = prefix.split_once('/') else {
        return false;
    };
    let (Ok(addr), Ok(len)) = (addr.parse::<Ipv4Addr>(), len.parse::<u8>()) else {
        return false;
    };
    let (net, bits) = IMPORT_SELECTOR;
    let mask = u32::MAX << (32 - u32::from(bits));
    len >= bits && u32::from(addr) & mask == u32::from(net) & mask
}

/// The `gobgp global rib add` arguments that re-create `path`'s attributes
/// but its next hop; an attribute the CLI cannot write fails the import
/// rather than being dropped.
fn attribute_args(path: &Value) -> Result<Vec<String>, String> {
    let mut args = Vec::new();
    for attr in path["attrs"].as_array().into_iter().flatten() {
        let number = |key: &str| {
            attr[key]
                .as_u64()
                .ok_or_else(|| format!("attribute without {key}: {attr}"))
        };
        match attr["type"].as_u64() {
            Some(1) => {
                let origin = match number("value")? {
                    0 => "igp",
                    1 => "egp",
                    _ => "incomplete",
                };
                args.extend(["origin".into(), origin.into()]);
            }
            Some(2) => {
                let mut segments = Vec::new();
                for segment in attr["as_paths"].as_array().into_iter().flatten() {
                    let asns: Vec<String> = segment["asns"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|a| a.to_string())
                        .collect();
                    match segment["segment_type"].as_u64() {
                        Some(2) => segments.push(asns.join(" ")),
                        Some(1) => segments.push(format!("{{{}}}", asns.join(","))),
                        _ => return Err(format!("an AS_PATH segment of another type: {attr}")),
                    }
                }
                args.extend(["aspath".into(), segments.join(" ")]);
            }
            // NEXT_HOP, MP_REACH_NLRI: machined drops them; GoBGP sets its
            // own per peer.
            Some(3) | Some(14) => {}
            Some(4) => args.extend(["med".into(), number("metric")?.to_string()]),
            Some(5) => args.extend(["local-pref".into(), number("value")?.to_string()]),
            Some(8) => {
                let list: Vec<String> = attr["communities"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|c| c.to_string())
                    .collect();
                args.extend(["community".into(), list.join(",")]);
            }
            Some(32) => {
                let mut list = Vec::new();
                for c in attr["value"].as_array().into_iter().flatten() {
                    list.push(format!(
                        "{}:{}:{}",
                        c["ASN"], c["LocalData1"], c["LocalData2"]
                    ));
                }
                args.extend(["large-community".into(), list.join(",")]);
            }
            _ => {
                return Err(format!(
                    "an attribute the gobgp CLI cannot carry: {attr} in {path}"
                ));
            }
        }
    }
    Ok(args)
}

/// One pass: the workload's IPv4 RIB (the selector's only family) against
/// what is imported.
fn import_round(
    (src_ns, src_port): &(String, u16),
    (dst_ns, dst_port): &(String, u16),
    state: &Mutex<ImportState>,
) -> Result<(), String> {
    let rib = gobgp_cli(src_ns, *src_port, &["global", "rib", "-a", "ipv4", "-j"])?;
    let rib: Value = serde_json::from_str(rib.trim())
        .map_err(|e| format!("the workload RIB is not JSON ({e}): {rib}"))?;
    let mut desired = BTreeMap::new();
    for (prefix, paths) in rib.as_object().into_iter().flatten() {
        if !selected(prefix) {
            continue;
        }
        // The best path learned from a neighbor (not one originated here).
        let best = paths.as_array().into_iter().flatten().find(|p| {
            p["best"] == true && p.get("peer-address").is_some() && p["withdrawal"] != true
        });
        if let Some(path) = best {
            desired.insert(prefix.clone(), attribute_args(path)?);
        }
    }
    let imported = state.lock().unwrap().imported.clone();
    for (prefix, args) in &imported {
        if desired.get(prefix) != Some(args) {
            gobgp_cli(
                dst_ns,
                *dst_port,
                &["global", "rib", "del", "-a", "ipv4", prefix],
            )?;
            state.lock().unwrap().imported.remove(prefix);
        }
    }
    for (prefix, args) in desired {
        if imported.get(&prefix) == Some(&args) {
            continue;
        }
        let mut argv = vec!["global", "rib", "add", "-a", "ipv4", &prefix];
        argv.extend(args.iter().map(String::as_str));
        gobgp_cli(dst_ns, *dst_port, &argv)?;
        state.lock().unwrap().imported.insert(prefix, args);
    }
    Ok(())
}

// ---------------------------------------------------------------- the lab

/// The namespaces, FRR, both GoBGP instances and the import. Fields drop
/// in declaration order: the import and the daemons before their
/// namespaces.
struct TalosLab {
    import: Import,
    workload: Gobgp,
    fabric: Gobgp,
    frr: Frr,
    _vrf: Netns,
    node: Netns,
    _tor: Netns,
}

impl TalosLab {
    fn start(workload_graceful_restart: bool) -> TalosLab {
        testlab::require_root();
        let (gobgpd, cli) = gobgp4();
        let tor = Netns::new("tor");
        let node = Netns::new("node");
        let vrf = Netns::new("vrf");
        veth(&node, "to-tor", &tor, "to-node");
        veth(&node, "veth-workload", &vrf, "veth-router");
        tor.add_address("to-node", &format!("{TOR}/25"));
        node.add_address("to-tor", &format!("{NODE}/25"));
        node.add_address("veth-workload", &format!("{HOLDFAST}/31"));
        vrf.add_address("veth-router", &format!("{TALOS_WORKLOAD}/31"));

        let frr = Frr::start(&tor, &frr_conf(TOR_ASN, TOR, &[(NODE, FABRIC_ASN)], ""));
        let fabric = Gobgp::start_binaries(
            &node,
            &talos_instance(FABRIC_ASN, &[(TOR, TOR_ASN, false)], false),
            gobgpd,
            cli,
        );
        let workload = Gobgp::start_binaries(
            &vrf,
            &talos_instance(
                WORKLOAD_ASN,
                &[(HOLDFAST, HOLDFAST_ASN, true)],
                workload_graceful_restart,
            ),
            gobgpd,
            cli,
        );
        let import = Import::start((&vrf, workload.port()), (&node, fabric.port()));
        TalosLab {
            import,
            workload,
            fabric,
            frr,
            _vrf: vrf,
            node,
            _tor: tor,
        }
    }

    fn holdfast_ip() -> IpAddr {
        HOLDFAST.parse().unwrap()
    }

    /// FRR's route for `vip`, waited for.
    fn wait_at_frr(&self, vip: &str) -> Value {
        let prefix = format!("{vip}/32");
        wait_for(LONG, &format!("FRR to have {prefix}"), || {
            self.import.check();
            self.frr.prefix(&prefix).ok_or_else(|| {
                format!(
                    "imported {:?}, workload RIB {}",
                    self.import
                        .state
                        .lock()
                        .unwrap()
                        .imported
                        .keys()
                        .collect::<Vec<_>>(),
                    self.workload.rib(testlab::Afi::Ipv4)
                )
            })
        })
    }
}

/// holdfast in the host's namespace, peering with the workload instance
/// across the veth: no `listen` (GoBGP owns 179), fast timers, one
/// advertisement with a community, a large community and a MED.
fn holdfast_conf() -> Config {
    Config::node(HOLDFAST_ASN, HOLDFAST)
        .peer(Peer::new("talos", TALOS_WORKLOAD, WORKLOAD_ASN).fast())
        .hold_down("1s")
        .graceful_shutdown_wait("3s")
        .advertisement(
            Advertisement::public(COMMUNITY)
                .large_communities(&[LARGE_COMMUNITY])
                .med(MED),
        )
}

/// The one path FRR has in `route` (from the fabric instance).
fn only_path(route: &Value) -> &Value {
    let paths = route["paths"].as_array().expect("paths");
    assert_eq!(
        paths.len(),
        1,
        "one path, from the fabric instance: {route}"
    );
    &paths[0]
}

/// The TCP listeners of `ns` with their processes (`ss -Htlnp`).
fn listeners(ns: &Netns) -> Vec<String> {
    ns.run(&["ss", "-H", "-t", "-l", "-n", "-p"])
        .lines()
        .map(str::to_owned)
        .collect()
}

// -------------------------------------------------------------- the tests

/// holdfast's VIPs reach the ToR through both instances: the AS path is
/// the fabric's ASN then holdfast's (the workload instance does not
/// export: machined copies the path, AS_PATH included), the next hop the
/// fabric instance's address on the ToR's link, and holdfast's
/// communities, large community and MED survive the copy. A VIP outside
/// the import selector stays in the workload instance. A VIP removed from
/// holdfast's file is withdrawn at the ToR after the hold-down.
#[test]
fn vips_reach_the_tor_through_the_workload_and_fabric_instances() {
    let lab = TalosLab::start(false);
    let node = Holdfast::start(
        &lab.node,
        &holdfast_conf().to_toml(),
        &vips(&[VIP_A, VIP_B, VIP_OUTSIDE]),
    );
    lab.workload.wait_established(TalosLab::holdfast_ip(), LONG);
    lab.fabric.wait_established(TOR.parse().unwrap(), LONG);
    let peer = node.wait_peer_established("talos", LONG);
    // Talos's GoBGP offers no graceful restart.
    assert_eq!(peer["graceful_restart"], false, "{peer}");

    for vip in [VIP_A, VIP_B] {
        let route = lab.wait_at_frr(vip);
        let path = only_path(&route);
        assert_eq!(
            path["aspath"]["string"],
            format!("{FABRIC_ASN} {HOLDFAST_ASN}"),
            "{path}"
        );
        assert_eq!(path["nexthops"][0]["ip"], NODE, "{path}");
        assert_eq!(path["community"]["string"], COMMUNITY, "{path}");
        assert_eq!(path["largeCommunity"]["string"], LARGE_COMMUNITY, "{path}");
        assert_eq!(path["metric"], MED, "{path}");
    }

    // The workload instance has the VIP outside the selector; neither the
    // fabric instance nor FRR ever do.
    lab.workload.wait_route(&format!("{VIP_OUTSIDE}/32"), LONG);
    lab.import.settle();
    assert_eq!(
        lab.import.imported(),
        [format!("{VIP_A}/32"), format!("{VIP_B}/32")]
    );
    assert!(
        lab.fabric
            .rib_lookup(&format!("{VIP_OUTSIDE}/32"))
            .is_none()
    );
    assert!(lab.frr.prefix(&format!("{VIP_OUTSIDE}/32")).is_none());

    // GoBGP owns TCP 179 in the host's namespace; holdfast listens on its
    // API only (no `listen`: it connects out).
    let listening = listeners(&lab.node);
    assert!(
        listening
            .iter()
            .any(|l| l.contains(":179 ") && l.contains("\"gobgpd\"")),
        "{listening:#?}"
    );
    let holdfast: Vec<&String> = listening
        .iter()
        .filter(|l| l.contains("\"holdfast\""))
        .collect();
    assert!(
        !holdfast.is_empty() && holdfast.iter().all(|l| l.contains("127.0.0.1:9179 ")),
        "holdfast listens on its API only: {listening:#?}"
    );

    // A VIP removed from the file: withdrawn at FRR after the 1 s
    // hold-down, the other one untouched.
    let removed = Instant::now();
    node.write_vips(&vips(&[VIP_A, VIP_OUTSIDE]));
    lab.frr.wait_no_prefix(&format!("{VIP_B}/32"), LONG);
    let took = removed.elapsed();
    assert!(
        took >= Duration::from_secs(1),
        "withdrawn after {took:?}, inside the hold-down"
    );
    eprintln!("VIP removed from the file: gone at FRR after {took:?}");
    assert!(lab.frr.prefix(&format!("{VIP_A}/32")).is_some());
    assert_eq!(lab.import.imported(), [format!("{VIP_A}/32")]);
}

/// Talos gives GoBGP no graceful restart, so holdfast's SIGTERM is a
/// planned withdrawal (RFC 8326): its routes carry GRACEFUL_SHUTDOWN for
/// `graceful_shutdown_wait` — which the import carries on to the ToR —
/// then go, at the workload instance and so at the ToR. After the
/// restart they come back.
#[test]
fn a_holdfast_restart_withdraws_at_the_tor_after_graceful_shutdown() {
    let lab = TalosLab::start(false);
    let mut node = Holdfast::start(&lab.node, &holdfast_conf().to_toml(), &vips(&[VIP_A]));
    let prefix = format!("{VIP_A}/32");
    let before = only_path(&lab.wait_at_frr(VIP_A)).clone();
    assert_eq!(before["community"]["string"], COMMUNITY, "{before}");

    let stopped = Instant::now();
    node.kill(testlab::Signal::Term);
    let drained = wait_for(LONG, "FRR's path to carry GRACEFUL_SHUTDOWN", || match lab
        .frr
        .prefix(&prefix)
    {
        Some(route) if gshut(only_path(&route)) => Ok(only_path(&route).clone()),
        other => Err(format!("{other:?}")),
    });
    assert_eq!(
        drained["community"]["string"],
        format!("{COMMUNITY} graceful-shutdown"),
        "{drained}"
    );
    // FRR 8.4 honours the community on receipt (RFC 8326 §3): the path
    // is least preferred while it lasts.
    assert_eq!(drained["locPrf"], 0, "{drained}");
    lab.frr.wait_no_prefix(&prefix, LONG);
    let gone = stopped.elapsed();
    assert!(gone >= Duration::from_secs(3), "withdrawn after {gone:?}");
    assert!(node.wait_exit().success(), "{}", node.log());
    let log = node.log();
    assert!(
        log.contains("exit: routes withdrawn after graceful shutdown (RFC 8326)"),
        "{log}"
    );
    eprintln!("SIGTERM: GRACEFUL_SHUTDOWN at FRR, withdrawn after {gone:?}");

    node.run(&[]);
    let back = only_path(&lab.wait_at_frr(VIP_A)).clone();
    assert_eq!(back["community"]["string"], COMMUNITY, "{back}");
    eprintln!(
        "restart: back at FRR {:?} after the SIGTERM",
        stopped.elapsed()
    );
}

/// What the withdrawal above depends on: were graceful restart enabled on
/// the workload instance (Talos does not set it; GoBGP can), the same
/// SIGTERM would close holdfast's session without a NOTIFICATION (RFC 4724
/// §4), GoBGP would keep its paths as stale, the import would keep
/// copying them, and the ToR would never see the VIP go.
#[test]
fn with_graceful_restart_on_the_workload_instance_a_restart_keeps_the_route() {
    let lab = TalosLab::start(true);
    let mut node = Holdfast::start(&lab.node, &holdfast_conf().to_toml(), &vips(&[VIP_A]));
    let prefix = format!("{VIP_A}/32");
    lab.wait_at_frr(VIP_A);
    let peer = node.wait_peer_established("talos", LONG);
    assert_eq!(peer["graceful_restart"], true, "{peer}");

    node.kill(testlab::Signal::Term);
    assert!(node.wait_exit().success(), "{}", node.log());
    assert!(
        node.log()
            .contains("exit: routes kept through graceful restart (RFC 4724)"),
        "{}",
        node.log()
    );
    // Stale at the workload instance, still at FRR, for a while.
    wait_for(LONG, "the workload instance to mark the path stale", || {
        let paths = lab.workload.rib_lookup(&prefix).unwrap_or_default();
        if paths[0]["stale"] == true {
            Ok(())
        } else {
            Err(paths.to_string())
        }
    });
    let down = Instant::now();
    while down.elapsed() < Duration::from_secs(3) {
        assert!(
            lab.frr.prefix(&prefix).is_some(),
            "FRR lost {prefix} while holdfast was down"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    node.run(&[]);
    wait_for(LONG, "the stale mark to clear after End-of-RIB", || {
        let paths = lab.workload.rib_lookup(&prefix).unwrap_or_default();
        if paths[0]["stale"] == false {
            Ok(())
        } else {
            Err(paths.to_string())
        }
    });
    assert!(lab.frr.prefix(&prefix).is_some());
}

/// FRR names GRACEFUL_SHUTDOWN (65535:0) `gracefulShutdown` in
/// `community.list`.
fn gshut(path: &Value) -> bool {
    path["community"]["list"]
        .as_array()
        .is_some_and(|l| l.iter().any(|c| c == "gracefulShutdown"))
}

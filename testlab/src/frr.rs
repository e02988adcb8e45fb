//! FRR 8.4 (Debian `frr`): bgpd alone, bgpd + zebra, or zebra + bfdd +
//! bgpd, inside a namespace, each with a private directory for configs,
//! sockets and pid files.
//!
//! Every daemon runs in the foreground as a child of the test (`--log
//! stdout`, captured to `DAEMON.log`), drops to user `frr`, has its TCP vty
//! disabled (`-P 0`) and finds its siblings through `DIR/zserv.api`. vtysh
//! reaches them through the unix sockets in `DIR` (`--vty_socket`), which
//! needs no `ip netns exec`.

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::Afi;
use crate::dir::LabDir;
use crate::netns::Netns;
use crate::process::{NsProcess, tail};
use crate::require::{require_root, require_tools};
use crate::wait::wait_for;

const ZEBRA: &str = "/usr/lib/frr/zebra";
const BFDD: &str = "/usr/lib/frr/bfdd";
const BGPD: &str = "/usr/lib/frr/bgpd";

/// How long a daemon gets to open its vty socket.
const START_TIMEOUT: Duration = Duration::from_secs(15);

/// A bfdd configuration with a profile `fast`: 100 ms intervals, multiplier
/// 3, so a dead path is detected in about 300 ms. Use it with
/// `neighbor X bfd profile fast` in bgpd.
pub const BFD_FAST_PROFILE: &str = "\
bfd
 profile fast
  receive-interval 100
  transmit-interval 100
  detect-multiplier 3
 exit
exit
";

/// Which daemons run beside bgpd.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Daemons {
    /// bgpd with `-Z`: no zebra, so no interfaces, no nexthop tracking, no
    /// routes installed; every nexthop counts as reachable.
    BgpdOnly,
    /// zebra + bgpd: bgpd knows interfaces (needed to accept IPv6 link-local
    /// nexthops) and resolves nexthops; routes still stay out of the kernel
    /// (`bgpd -n`).
    Zebra,
    /// zebra + bgpd without `-n`: best routes installed in the kernel.
    ZebraFib,
    /// zebra + bfdd + bgpd: bgpd registers BFD sessions with bfdd through
    /// zebra.
    ZebraBfd,
}

/// Running FRR daemons. Dropping it kills them (and prints their logs if
/// the test is panicking).
#[derive(Debug)]
pub struct Frr {
    /// bgpd first: dropped (killed) before the daemons it talks to.
    daemons: Vec<NsProcess>,
    dir: LabDir,
    netns: String,
}

impl Frr {
    /// bgpd alone (`-Z`, no zebra) with the given bgpd.conf. Enough for BGP
    /// sessions and route exchange. It rejects UPDATEs whose IPv6 next hop
    /// includes a link-local address ("no peer interface information"); use
    /// [`Frr::start_with_zebra`] when the peer sends one (BIRD does on a
    /// direct session).
    pub fn start(ns: &Netns, bgpd_conf: &str) -> Frr {
        Frr::launch(ns, bgpd_conf, None, Daemons::BgpdOnly)
    }

    /// zebra + bgpd.
    pub fn start_with_zebra(ns: &Netns, bgpd_conf: &str) -> Frr {
        Frr::launch(ns, bgpd_conf, None, Daemons::Zebra)
    }

    /// zebra + bgpd without `-n`: bgpd hands its best routes to zebra, which
    /// installs them in the namespace's kernel table (`ip route` shows
    /// them, e.g. an IPv4 route `via inet6 fe80::…` learnt over an
    /// unnumbered session).
    pub fn start_with_zebra_fib(ns: &Netns, bgpd_conf: &str) -> Frr {
        Frr::launch(ns, bgpd_conf, None, Daemons::ZebraFib)
    }

    /// zebra + bfdd + bgpd, for `neighbor X bfd`. `bfdd_conf` may be empty
    /// or define profiles (e.g. [`BFD_FAST_PROFILE`]).
    pub fn start_with_bfd(ns: &Netns, bgpd_conf: &str, bfdd_conf: &str) -> Frr {
        Frr::launch(ns, bgpd_conf, Some(bfdd_conf), Daemons::ZebraBfd)
    }

    fn launch(ns: &Netns, bgpd_conf: &str, bfdd_conf: Option<&str>, daemons: Daemons) -> Frr {
        require_root();
        let mut tools = vec![BGPD, "vtysh"];
        if daemons != Daemons::BgpdOnly {
            tools.push(ZEBRA);
        }
        if daemons == Daemons::ZebraBfd {
            tools.push(BFDD);
        }
        require_tools(&tools);

        let dir = LabDir::new("frr");
        dir.write("bgpd.conf", bgpd_conf);
        if daemons != Daemons::BgpdOnly {
            dir.write("zebra.conf", "");
        }
        if let Some(conf) = bfdd_conf {
            dir.write("bfdd.conf", conf);
        }
        // The daemons drop to user frr before they create sockets and pid
        // files, and read their configs as frr.
        dir.chown_to("frr");

        let mut frr = Frr {
            daemons: Vec::new(),
            dir,
            netns: ns.name().to_owned(),
        };
        // zebra first: bfdd and bgpd connect to its zserv socket at start.
        if daemons != Daemons::BgpdOnly {
            frr.start_daemon(ns, "zebra", ZEBRA, &[]);
            frr.wait_for_file("zserv.api", "zebra");
        }
        if daemons == Daemons::ZebraBfd {
            // bfdd's control socket defaults to /var/run/frr/bfdd.sock, shared
            // by every bfdd on the host: give each its own.
            let bfdctl = frr.dir.join("bfdd.sock");
            let bfdctl = bfdctl.to_string_lossy().into_owned();
            frr.start_daemon(ns, "bfdd", BFDD, &["--bfdctl", &bfdctl]);
        }
        // -n: never install routes into the kernel; -Z: no zebra at all.
        let bgpd_args: &[&str] = match daemons {
            Daemons::BgpdOnly => &["-n", "-Z"],
            Daemons::ZebraFib => &[],
            _ => &["-n"],
        };
        frr.start_daemon(ns, "bgpd", BGPD, bgpd_args);

        let names: Vec<String> = frr.daemons.iter().map(|d| d.label().to_owned()).collect();
        for name in &names {
            frr.wait_for_file(&format!("{name}.vty"), name);
        }
        // Answered only after the daemons have read their configs.
        frr.vtysh("show version");
        frr.check_config_errors();
        // Newest first, so the Vec drops (kills) bgpd before bfdd and zebra.
        frr.daemons.reverse();
        frr
    }

    fn start_daemon(&mut self, ns: &Netns, name: &str, binary: &str, extra: &[&str]) {
        let path = |file: &str| self.dir.join(file).to_string_lossy().into_owned();
        let (conf, pid, zserv) = (
            path(&format!("{name}.conf")),
            path(&format!("{name}.pid")),
            path("zserv.api"),
        );
        let vty_dir = self.dir.path().to_string_lossy().into_owned();
        let mut argv = vec![
            binary,
            "-f",
            &conf,
            "-i",
            &pid,
            "-z",
            &zserv,
            "--vty_socket",
            &vty_dir,
            // No TCP vty: two daemons in one namespace would fight over 2605.
            "-P",
            "0",
            "--log",
            "stdout",
            // Shows whatever `debug bgp …` lines a test config turns on.
            "--log-level",
            "debug",
        ];
        argv.extend_from_slice(extra);
        let log = self.dir.join(&format!("{name}.log"));
        let process = NsProcess::start_logged(ns, name, &argv, &[], &log);
        self.daemons.push(process);
    }

    fn wait_for_file(&mut self, file: &str, daemon: &str) {
        let path = self.dir.join(file);
        let what = format!("FRR {daemon} to create {}", path.display());
        wait_for(START_TIMEOUT, &what, || {
            for process in &mut self.daemons {
                process.assert_running(&format!("waiting for {}", path.display()));
            }
            if path.exists() {
                Ok(())
            } else {
                Err("not there yet".into())
            }
        });
    }

    /// FRR logs config lines it cannot parse and carries on; a test with a
    /// typo in its config should fail here rather than time out later.
    fn check_config_errors(&self) {
        let errors: Vec<String> = self
            .daemons
            .iter()
            .flat_map(|d| {
                d.log()
                    .lines()
                    .filter(|line| line.contains("config line"))
                    .map(|line| format!("{}: {line}", d.label()))
                    .collect::<Vec<_>>()
            })
            .collect();
        if !errors.is_empty() {
            panic!(
                "FRR rejected lines of its configuration:\n{}",
                errors.join("\n")
            );
        }
    }

    /// The private directory (configs, sockets, logs).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// All daemon logs, each under a header.
    pub fn log(&self) -> String {
        self.daemons
            .iter()
            .map(|d| format!("==== {} ====\n{}", d.label(), d.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The daemon processes (to signal one, e.g. SIGSTOP bgpd).
    pub fn daemon(&mut self, name: &str) -> &mut NsProcess {
        self.daemons
            .iter_mut()
            .find(|d| d.label() == name)
            .unwrap_or_else(|| panic!("no FRR daemon {name} in this lab"))
    }

    /// Runs vtysh commands (`-c` each, in order) and returns the output;
    /// panics with the output and the daemons' logs if vtysh fails.
    pub fn vtysh_all(&self, commands: &[&str]) -> String {
        let mut cmd = Command::new("vtysh");
        cmd.arg("--vty_socket").arg(self.dir.path());
        for command in commands {
            cmd.args(["-c", command]);
        }
        let output = cmd
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run vtysh: {e}"));
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if !output.status.success() {
            panic!(
                "vtysh {commands:?} failed ({}):\n{stdout}{}\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr),
                tail(&self.log(), 80)
            );
        }
        stdout
    }

    /// Runs one vtysh command.
    pub fn vtysh(&self, command: &str) -> String {
        self.vtysh_all(&[command])
    }

    /// Applies configuration lines in `configure terminal` (enter
    /// `router bgp ASN` first when they belong there).
    pub fn configure(&self, lines: &[&str]) {
        let mut commands = vec!["configure terminal"];
        commands.extend_from_slice(lines);
        commands.push("end");
        self.vtysh_all(&commands);
    }

    /// Runs a `… json` command and parses its output.
    pub fn json(&self, command: &str) -> Value {
        let out = self.vtysh(command);
        serde_json::from_str(&out)
            .unwrap_or_else(|e| panic!("vtysh {command:?} did not print JSON ({e}):\n{out}"))
    }

    /// `show bgp neighbors ADDR json`, the neighbor's object. Panics if the
    /// neighbor is not configured.
    pub fn neighbor(&self, addr: IpAddr) -> Value {
        let json = self.json(&format!("show bgp neighbors {addr} json"));
        match json.get(addr.to_string()) {
            Some(neighbor) => neighbor.clone(),
            None => panic!("FRR has no neighbor {addr}: {json}"),
        }
    }

    /// The neighbor's `bgpState`: `Idle`, `Connect`, `Active`, `OpenSent`,
    /// `OpenConfirm`, `Established`, `Clearing`, `Deleted`.
    pub fn state(&self, addr: IpAddr) -> String {
        self.neighbor(addr)["bgpState"]
            .as_str()
            .unwrap_or("(no bgpState)")
            .to_owned()
    }

    /// UPDATE messages received from the neighbor (`messageStats.updatesRecv`).
    /// Panics with the neighbor's JSON if FRR does not report the counter:
    /// a missing counter must never read as "no UPDATEs".
    pub fn updates_received(&self, addr: IpAddr) -> u64 {
        self.message_stat(addr, "updatesRecv")
    }

    /// UPDATE messages sent to the neighbor (`messageStats.updatesSent`);
    /// panics like [`Frr::updates_received`].
    pub fn updates_sent(&self, addr: IpAddr) -> u64 {
        self.message_stat(addr, "updatesSent")
    }

    /// One counter of the neighbor's `messageStats`; panics with the JSON
    /// FRR printed when it is not there or not a number.
    pub fn message_stat(&self, addr: IpAddr, key: &str) -> u64 {
        let neighbor = self.neighbor(addr);
        neighbor["messageStats"][key].as_u64().unwrap_or_else(|| {
            panic!("FRR reports no messageStats.{key} for neighbor {addr}: {neighbor}")
        })
    }

    /// `show bgp ipv4|ipv6 unicast PREFIX json` for an exact prefix
    /// (`198.51.100.10/32`); `None` when FRR has no such route. The family
    /// follows from the prefix. Paths are in `["paths"]`, e.g.
    /// `paths[0].community.string`, `paths[0].largeCommunity.string`,
    /// `paths[0].stale`.
    pub fn prefix(&self, prefix: &str) -> Option<Value> {
        // Without a length FRR does a longest-match lookup and may answer
        // with a covering route.
        assert!(
            prefix.contains('/'),
            "Frr::prefix needs PREFIX/LEN, got {prefix:?}"
        );
        let afi = Afi::of(prefix).as_str();
        let json = self.json(&format!("show bgp {afi} unicast {prefix} json"));
        json.get("paths").is_some().then_some(json)
    }

    /// Prefixes in the BGP table of one family.
    pub fn table(&self, afi: Afi) -> Vec<String> {
        let json = self.json(&format!("show bgp {} unicast json", afi.as_str()));
        match json.get("routes").and_then(Value::as_object) {
            Some(routes) => routes.keys().cloned().collect(),
            None => Vec::new(),
        }
    }

    /// Number of prefixes in the BGP table of one family: `totalPrefixes` of
    /// `show bgp AFI unicast statistics json`, cheap even for large tables.
    /// (The summary's `ribCount` is not it: it counts radix-tree nodes,
    /// glue nodes included.)
    pub fn count(&self, afi: Afi) -> usize {
        let command = format!("show bgp {} unicast statistics json", afi.as_str());
        let json = self.json(&command);
        let key = format!("{}Unicast", afi.as_str());
        json[key.as_str()][0]["totalPrefixes"]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or_else(|| panic!("no {key}[0].totalPrefixes in {command}: {json}"))
    }

    /// `show bfd peers json` (needs [`Frr::start_with_bfd`]).
    pub fn bfd_peers(&self) -> Vec<Value> {
        match self.json("show bfd peers json") {
            Value::Array(peers) => peers,
            other => panic!("show bfd peers json is not a list: {other}"),
        }
    }

    /// BFD session status with a peer (`up`, `down`, `init`, …), if bfdd has
    /// a session with it.
    pub fn bfd_status(&self, peer: IpAddr) -> Option<String> {
        let peer = peer.to_string();
        self.bfd_peers()
            .into_iter()
            .find(|p| p["peer"].as_str() == Some(peer.as_str()))
            .and_then(|p| p["status"].as_str().map(str::to_owned))
    }

    /// Waits until the session with `addr` is Established.
    pub fn wait_established(&self, addr: IpAddr, timeout: Duration) {
        self.wait_state(addr, "Established", timeout);
    }

    /// Waits until the neighbor's `bgpState` is `state`.
    pub fn wait_state(&self, addr: IpAddr, state: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("FRR neighbor {addr} to be {state}"),
            || {
                let now = self.state(addr);
                if now == state {
                    Ok(())
                } else {
                    Err(format!("bgpState {now}"))
                }
            },
        );
    }

    /// Waits until the neighbor's `bgpState` is anything but `state` and
    /// returns the new state.
    pub fn wait_state_not(&self, addr: IpAddr, state: &str, timeout: Duration) -> String {
        wait_for(
            timeout,
            &format!("FRR neighbor {addr} to leave {state}"),
            || {
                let now = self.state(addr);
                if now != state {
                    Ok(now)
                } else {
                    Err(format!("bgpState {now}"))
                }
            },
        )
    }

    /// Waits until FRR has a route for `prefix` and returns it.
    pub fn wait_prefix(&self, prefix: &str, timeout: Duration) -> Value {
        wait_for(
            timeout,
            &format!("FRR to have a route for {prefix}"),
            || {
                self.prefix(prefix)
                    .ok_or_else(|| format!("table: {:?}", self.table(Afi::of(prefix))))
            },
        )
    }

    /// Waits until FRR has no route for `prefix`.
    pub fn wait_no_prefix(&self, prefix: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("FRR to drop its route for {prefix}"),
            || match self.prefix(prefix) {
                None => Ok(()),
                Some(route) => Err(route.to_string()),
            },
        );
    }

    /// Waits until bfdd reports `status` for the session with `peer`.
    pub fn wait_bfd_status(&self, peer: IpAddr, status: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("FRR BFD session with {peer} to be {status}"),
            || match self.bfd_status(peer) {
                Some(now) if now == status => Ok(()),
                now => Err(format!("status {now:?}")),
            },
        );
    }
}

/// A bgpd.conf for the common case: `frr defaults datacenter` (3 s
/// keepalive, 9 s hold time, log neighbor changes, no advertisement
/// delay), no eBGP policy required, `network` statements announced without
/// an IGP route (`no bgp network import-check`), one `neighbor ADDR
/// remote-as ASN` per peer retrying its connection every second, IPv6 peers
/// activated for IPv6 unicast. More lines for the same
/// instance can follow in a second `router bgp ASN` block.
pub fn bgpd_conf(asn: u32, router_id: Ipv4Addr, neighbors: &[(IpAddr, u32)]) -> String {
    let mut conf = format!(
        "frr defaults datacenter\n\
         router bgp {asn}\n \
         bgp router-id {router_id}\n \
         no bgp ebgp-requires-policy\n \
         no bgp network import-check\n"
    );
    for (addr, remote_as) in neighbors {
        conf.push_str(&format!(" neighbor {addr} remote-as {remote_as}\n"));
        conf.push_str(&format!(" neighbor {addr} timers connect 1\n"));
    }
    let v6: Vec<_> = neighbors
        .iter()
        .filter(|(addr, _)| addr.is_ipv6())
        .collect();
    if !v6.is_empty() {
        conf.push_str(" address-family ipv6 unicast\n");
        for (addr, _) in v6 {
            conf.push_str(&format!("  neighbor {addr} activate\n"));
        }
        conf.push_str(" exit-address-family\n");
    }
    conf.push_str("exit\n");
    conf
}

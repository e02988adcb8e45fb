//! Point-to-point links between namespaces (veth pairs), link failure and
//! black holes.

use std::process::Command;

use crate::netns::{Netns, run_checked};
use crate::require::require_tools;

/// Linux's IFNAMSIZ is 16 including the terminating NUL.
pub const MAX_IFNAME: usize = 15;

/// The down veth that black-holed traffic is redirected to (see
/// [`Link::blackhole`]).
const SINK_IF: &str = "tl-sink";
const SINK_PEER_IF: &str = "tl-sink-peer";

/// One end of a link: a namespace and an interface in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub netns: String,
    pub ifname: String,
}

impl Endpoint {
    fn ip(&self, args: &[&str]) -> String {
        ip_in(&self.netns, args)
    }

    fn tc(&self, args: &[&str]) -> String {
        let output = run_checked(
            Command::new("ip")
                .args(["netns", "exec", &self.netns, "tc"])
                .args(args),
            &format!("tc in netns {}", self.netns),
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }
}

fn ip_in(netns: &str, args: &[&str]) -> String {
    let output = run_checked(
        Command::new("ip").args(["-n", netns]).args(args),
        &format!("in netns {netns}"),
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A veth pair joining two namespaces. It refers to them by name, so it
/// must not outlive them (its methods then fail with "Cannot open network
/// namespace").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub a: Endpoint,
    pub b: Endpoint,
}

/// Joins `a` and `b` with a veth pair: interface `a_if` in `a`, `b_if` in `b`,
/// both up, no addresses. Interface names are per namespace, so the same
/// names can be used in every lab.
pub fn veth(a: &Netns, a_if: &str, b: &Netns, b_if: &str) -> Link {
    for ifname in [a_if, b_if] {
        assert!(
            !ifname.is_empty() && ifname.len() <= MAX_IFNAME,
            "interface name {ifname:?} must be 1..={MAX_IFNAME} bytes (IFNAMSIZ)"
        );
    }
    // Created inside `a` with the peer placed straight into `b`: the pair
    // never exists in the root namespace, where names could collide.
    a.ip(&[
        "link",
        "add",
        "name",
        a_if,
        "type",
        "veth",
        "peer",
        "name",
        b_if,
        "netns",
        b.name(),
    ]);
    a.set_link_up(a_if);
    b.set_link_up(b_if);
    Link {
        a: Endpoint {
            netns: a.name().to_owned(),
            ifname: a_if.to_owned(),
        },
        b: Endpoint {
            netns: b.name().to_owned(),
            ifname: b_if.to_owned(),
        },
    }
}

impl Link {
    /// Takes end `a` administratively down. The veth peer loses carrier too,
    /// so both ends stop passing traffic; sockets see no error until their
    /// own timers fire (a bgpd without zebra notices nothing until its hold
    /// timer expires).
    pub fn set_down(&self) {
        self.a.ip(&["link", "set", "dev", &self.a.ifname, "down"]);
    }

    /// Brings end `a` (and so the pair) back up. Addresses stay (the
    /// namespaces keep IPv6 addresses on link down).
    pub fn set_up(&self) {
        self.a.ip(&["link", "set", "dev", &self.a.ifname, "up"]);
    }

    /// Silently drops every frame in both directions while the link stays
    /// up, like a cable that still has carrier but no longer delivers: no
    /// RST, no ICMP, no carrier loss. Only timers (BFD, hold timer, TCP
    /// retransmission) notice.
    ///
    /// How: on end `a`, a clsact qdisc with u32 match-all filters on ingress
    /// and egress that redirect (act_mirred) every frame to a veth that is
    /// down, where the kernel drops it. This needs only `ip`/`tc` and
    /// sch_ingress + cls_u32 + act_mirred — sch_netem ("loss 100%"),
    /// act_gact ("action drop"), nftables and iptables are all missing on
    /// some of the machines this runs on.
    pub fn blackhole(&self) {
        require_tools(&["tc"]);
        let end = &self.a;
        let links = end.ip(&["-o", "link", "show"]);
        if !links.contains(&format!(" {SINK_IF}@")) {
            end.ip(&[
                "link",
                "add",
                "name",
                SINK_IF,
                "type",
                "veth",
                "peer",
                "name",
                SINK_PEER_IF,
            ]);
        }
        end.tc(&["qdisc", "add", "dev", &end.ifname, "clsact"]);
        for hook in ["ingress", "egress"] {
            end.tc(&[
                "filter",
                "add",
                "dev",
                &end.ifname,
                hook,
                "protocol",
                "all",
                "u32",
                "match",
                "u32",
                "0",
                "0",
                "action",
                "mirred",
                "egress",
                "redirect",
                "dev",
                SINK_IF,
            ]);
        }
    }

    /// Undoes [`Link::blackhole`]: frames flow again.
    pub fn restore(&self) {
        let end = &self.a;
        end.tc(&["qdisc", "del", "dev", &end.ifname, "clsact"]);
    }
}

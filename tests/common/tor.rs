//! The lab most tests run in: a node namespace and a router namespace
//! (`testlab::Lab`), and FRR on the router as the ToR, peering with the
//! node with IPv4 and IPv6 unicast activated on every session, fast timers
//! and graceful restart (see [`super::frr_conf`]). Dropped, FRR goes first,
//! then the namespaces with whatever still runs in them.
//!
//! ```ignore
//! let (lab, frr) = Tor::new().zebra().ipv6_session().start();
//! let node = Holdfast::start(&lab.node, &config.to_toml(), &vips(&[VIP]));
//! frr.wait_established(lab.node_v4.into(), LONG);
//! ```
//!
//! Declare the daemon after the pair, so that it is dropped first.

use testlab::{Frr, Lab};

use super::frr_conf_remote;

/// Which FRR daemons run beside bgpd.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Daemons {
    /// bgpd alone.
    Bgpd,
    /// zebra too: bgpd alone refuses an IPv6 next hop that carries a
    /// link-local address, which an on-link node sends.
    Zebra,
    /// zebra and bfdd, with this bfdd.conf.
    Bfd(&'static str),
}

/// The router of the lab, built up and then started with [`Tor::start`].
#[derive(Clone, Debug)]
pub struct Tor {
    lab: Option<fn() -> Lab>,
    asn: u32,
    router_id: Option<String>,
    node_asn: String,
    ipv4_session: bool,
    ipv6_session: bool,
    more: Vec<(String, String)>,
    lines: String,
    preamble: String,
    graceful_restart: bool,
    daemons: Daemons,
}

impl Default for Tor {
    fn default() -> Tor {
        Tor::new()
    }
}

impl Tor {
    /// FRR in AS 65000 on [`Lab::pair`] (router 192.0.2.1, node
    /// 192.0.2.2), one session with the node's IPv4 address, the node in
    /// AS 65001; bgpd alone.
    pub fn new() -> Tor {
        Tor {
            lab: None,
            asn: 65000,
            router_id: None,
            node_asn: "65001".to_owned(),
            ipv4_session: true,
            ipv6_session: false,
            more: Vec::new(),
            lines: String::new(),
            preamble: String::new(),
            graceful_restart: true,
            daemons: Daemons::Bgpd,
        }
    }

    /// On [`Lab::routed_pair`] instead: node and router two IP hops apart.
    pub fn routed(mut self) -> Tor {
        self.lab = Some(Lab::routed_pair);
        self
    }

    /// FRR's AS (65000 unless set; the node's for iBGP).
    pub fn asn(mut self, asn: u32) -> Tor {
        self.asn = asn;
        self
    }

    /// FRR's router ID (the router's IPv4 address unless set).
    pub fn router_id(mut self, id: &str) -> Tor {
        self.router_id = Some(id.to_owned());
        self
    }

    /// The AS FRR expects of the node (65001 unless set).
    pub fn node_asn(mut self, asn: u32) -> Tor {
        self.node_asn = asn.to_string();
        self
    }

    /// The node's `remote-as` as FRR writes it: a number, `external` or
    /// `internal`.
    pub fn node_remote_as(mut self, remote: &str) -> Tor {
        self.node_asn = remote.to_owned();
        self
    }

    /// A second session, with the node's IPv6 address: IPv4 and IPv6
    /// transport, both families on each.
    pub fn ipv6_session(mut self) -> Tor {
        self.ipv6_session = true;
        self
    }

    /// The session with the node's IPv6 address alone.
    pub fn ipv6_only(mut self) -> Tor {
        self.ipv4_session = false;
        self.ipv6_session = true;
        self
    }

    /// One more neighbor, `remote` as `remote-as` writes it (a number,
    /// `external`, `internal`).
    pub fn neighbor(mut self, addr: &str, remote: impl ToString) -> Tor {
        self.more.push((addr.to_owned(), remote.to_string()));
        self
    }

    /// Lines inside `router bgp` after the neighbors (each starting with a
    /// space and ending in a newline: `" neighbor 192.0.2.2 password k\n"`).
    pub fn lines(mut self, lines: &str) -> Tor {
        self.lines.push_str(lines);
        self
    }

    /// Lines before `router bgp` (`"debug bgp updates in\n"`).
    pub fn preamble(mut self, lines: &str) -> Tor {
        self.preamble.push_str(lines);
        self
    }

    /// Without `bgp graceful-restart` (an AS change must not leave stale
    /// paths).
    pub fn without_graceful_restart(mut self) -> Tor {
        self.graceful_restart = false;
        self
    }

    /// zebra beside bgpd.
    pub fn zebra(mut self) -> Tor {
        self.daemons = Daemons::Zebra;
        self
    }

    /// zebra and bfdd beside bgpd, bfdd with `bfdd_conf` (e.g.
    /// `testlab::frr::BFD_FAST_PROFILE`).
    pub fn bfd(mut self, bfdd_conf: &'static str) -> Tor {
        self.daemons = Daemons::Bfd(bfdd_conf);
        self
    }

    /// bgpd.conf for a lab with these addresses.
    pub fn bgpd_conf(&self, lab: &Lab) -> String {
        let router_id = self
            .router_id
            .clone()
            .unwrap_or_else(|| lab.router_v4.to_string());
        let mut neighbors = Vec::new();
        if self.ipv4_session {
            neighbors.push((lab.node_v4.to_string(), self.node_asn.clone()));
        }
        if self.ipv6_session {
            neighbors.push((lab.node_v6.to_string(), self.node_asn.clone()));
        }
        neighbors.extend(self.more.iter().cloned());
        let neighbors: Vec<(&str, &str)> = neighbors
            .iter()
            .map(|(a, r)| (a.as_str(), r.as_str()))
            .collect();
        let conf = frr_conf_remote(
            self.asn,
            &router_id,
            &neighbors,
            if self.graceful_restart {
                " bgp graceful-restart\n"
            } else {
                ""
            },
            &self.lines,
        );
        format!("{}{conf}", self.preamble)
    }

    /// A new lab, FRR started on its router.
    pub fn start(self) -> (Lab, Frr) {
        let lab = self.lab.unwrap_or(Lab::pair)();
        let frr = self.on(&lab);
        (lab, frr)
    }

    /// FRR started on the router of `lab`, a lab the test built and
    /// changed itself (an address, a route, a daemon started first).
    pub fn on(self, lab: &Lab) -> Frr {
        let conf = self.bgpd_conf(lab);
        match self.daemons {
            Daemons::Bgpd => Frr::start(&lab.router, &conf),
            Daemons::Zebra => Frr::start_with_zebra(&lab.router, &conf),
            Daemons::Bfd(bfdd) => Frr::start_with_bfd(&lab.router, &conf, bfdd),
        }
    }
}

//! What the BIRD, GoBGP and ExaBGP interop tests share: the addresses and
//! AS numbers of the lab, holdfast's config for it, and waits on holdfast's
//! status and log.

use std::time::Duration;

use serde_json::Value;
use testlab::{Lab, wait_for};

use super::{Holdfast, node_conf};

/// 4-octet AS numbers on both sides (RFC 6793): neither fits in the OPEN's
/// two-octet My Autonomous System field, which carries AS_TRANS instead.
pub const ROUTER_ASN: u32 = 4_200_000_001;
pub const NODE_ASN: u32 = 4_200_000_002;

pub const VIP4: &str = "198.51.100.10";
pub const VIP6: &str = "2001:db8:100::10";
pub const VIP4_PREFIX: &str = "198.51.100.10/32";
pub const VIP6_PREFIX: &str = "2001:db8:100::10/128";

/// Communities are 16:16 bits, so a 4-octet AS cannot appear in one; the
/// large community carries it (RFC 8092).
pub const COMMUNITY: &str = "65001:100";
pub const LARGE_COMMUNITY: &str = "4200000002:1:100";
pub const LOCAL_PREF: u32 = 200;

pub const ADVERTISEMENT: &str = "[[advertisement]]\nname = \"public\"\ncommunities = [\"65001:100\"]\nlarge_communities = [\"4200000002:1:100\"]\nlocal_pref = 200\n";

/// holdfast's config for the node of `lab`: peers `tor-v4` (the router's
/// IPv4 address) and `tor-v6` (its IPv6 address), both in `router_asn`,
/// each carrying IPv4 and IPv6 unicast.
pub fn dual_transport_conf(lab: &Lab, local_asn: u32, router_asn: u32) -> String {
    let v4 = lab.router_v4.to_string();
    let v6 = lab.router_v6.to_string();
    node_conf(
        local_asn,
        &lab.node_v4.to_string(),
        &[("tor-v4", &v4, router_asn), ("tor-v6", &v6, router_asn)],
        ADVERTISEMENT,
        "",
    )
}

/// holdfast's config with one peer, `tor`, at `router` in `router_asn`.
pub fn single_peer_conf(lab: &Lab, router: &str, local_asn: u32, router_asn: u32) -> String {
    node_conf(
        local_asn,
        &lab.node_v4.to_string(),
        &[("tor", router, router_asn)],
        ADVERTISEMENT,
        "",
    )
}

impl Holdfast<'_> {
    /// The status JSON of peer `name`.
    pub fn peer_status(&self, name: &str) -> Value {
        let status = self.status();
        status["peers"]
            .as_array()
            .and_then(|peers| peers.iter().find(|p| p["name"] == name))
            .cloned()
            .unwrap_or_else(|| panic!("no peer {name} in holdfast status: {status}"))
    }

    /// Waits until holdfast's session `name` is Established; returns its
    /// status.
    pub fn wait_peer_established(&self, name: &str, timeout: Duration) -> Value {
        wait_for(
            timeout,
            &format!("holdfast peer {name} to be Established"),
            || {
                let peer = self.peer_status(name);
                if peer["state"] == "Established" {
                    Ok(peer)
                } else {
                    Err(peer.to_string())
                }
            },
        )
    }

    /// Waits until peer `name`'s status satisfies `check`; returns it.
    pub fn wait_peer_status(
        &self,
        name: &str,
        timeout: Duration,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        wait_for(timeout, what, || {
            let peer = self.peer_status(name);
            if check(&peer) {
                Ok(peer)
            } else {
                Err(peer.to_string())
            }
        })
    }

    /// The logs of every run of this holdfast so far, oldest first (also
    /// after the process has exited).
    pub fn all_logs(&self) -> String {
        let mut runs: Vec<(usize, std::path::PathBuf)> = std::fs::read_dir(self.dir.path())
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| {
                        let name = e.file_name().to_string_lossy().into_owned();
                        let n = name
                            .strip_prefix("holdfast-")?
                            .strip_suffix(".log")?
                            .parse()
                            .ok()?;
                        Some((n, e.path()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        runs.sort();
        runs.iter()
            .map(|(_, path)| std::fs::read_to_string(path).unwrap_or_default())
            .collect()
    }

    /// Waits until a line of holdfast's logs (every run) contains every
    /// one of `needles`; returns that line.
    pub fn wait_log_line(&self, needles: &[&str], timeout: Duration) -> String {
        wait_for(
            timeout,
            &format!("holdfast to log a line with {needles:?}"),
            || {
                self.all_logs()
                    .lines()
                    .find(|line| needles.iter().all(|n| line.contains(n)))
                    .map(str::to_owned)
                    .ok_or_else(|| "no such line yet".to_owned())
            },
        )
    }
}

/// A counter of a peer's status (`updates_received`, `messages_sent`, …);
/// panics with the status when it is missing: a counter that is not there
/// must never read as 0.
pub fn counter(peer: &Value, key: &str) -> u64 {
    peer[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no counter {key:?} in holdfast's peer status: {peer}"))
}

/// UPDATEs holdfast received from the peer, by its status.
pub fn updates_received(peer: &Value) -> u64 {
    counter(peer, "updates_received")
}

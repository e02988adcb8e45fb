//! What a session is told about its peer: the config turned into the
//! FSM's configuration, the capabilities of our OPEN and the socket
//! options. Plain data; the driver in `mod.rs` uses it.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV6};
use std::time::Duration;

use bgp_proto::capability::{GrFamily, GracefulRestart as GrCap, LlgrFamily};
use bgp_proto::{Capability, Family, fsm};

use super::socket::{self, SocketOptions};
use crate::config;

/// Everything a session needs to know about its peer.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerSpec {
    pub peer: config::Peer,
    /// The address in use (a `default-gateway` peer's current gateway).
    pub address: IpAddr,
    /// The interface an IPv6 link-local `address` is on (its scope, RFC
    /// 4007 §6); `None` for every other address.
    pub interface: Option<Interface>,
    pub local_asn: u32,
    pub router_id: Ipv4Addr,
    /// Our name, in the FQDN capability and shutdown messages.
    pub hostname: String,
    /// Set the R bit of graceful restart (RFC 4724 §3): this process
    /// restarted and the restart is still in progress for this peer (the
    /// daemon decides, see `daemon::restart`). The session clears it itself
    /// once End-of-RIB has gone out (RFC 4724 §4.1), so that its own later
    /// reconnections send R=0.
    pub restarting: bool,
}

/// A network interface, by name and index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    pub index: u32,
}

impl PeerSpec {
    /// Where to connect: the address and port, with the interface as the
    /// scope id of a link-local address (RFC 4007 §11: a link-local
    /// address is ambiguous without its zone).
    pub fn socket_addr(&self) -> SocketAddr {
        match (self.address, &self.interface) {
            (IpAddr::V6(v6), Some(i)) => {
                SocketAddr::V6(SocketAddrV6::new(v6, self.peer.port, 0, i.index))
            }
            (ip, _) => SocketAddr::new(ip, self.peer.port),
        }
    }

    /// The address as shown: `fe80::1%eth0` for a link-local one.
    pub fn display_address(&self) -> String {
        match &self.interface {
            Some(i) => format!("{}%{}", self.address, i.name),
            None => self.address.to_string(),
        }
    }

    /// Whether a connection from `from` is from this peer: the address, and
    /// for a link-local one also the interface it came in on.
    pub fn is_from(&self, from: SocketAddr) -> bool {
        if socket::unmap(from.ip()) != self.address {
            return false;
        }
        match (&self.interface, from) {
            (Some(i), SocketAddr::V6(f)) => f.scope_id() == i.index,
            _ => true,
        }
    }

    pub fn families(&self) -> Vec<Family> {
        self.peer
            .families
            .iter()
            .map(|f| match f {
                config::Family::Ipv4Unicast => Family::IPV4_UNICAST,
                config::Family::Ipv6Unicast => Family::IPV6_UNICAST,
            })
            .collect()
    }

    /// iBGP as far as the config tells (`local_asn` is the AS presented to
    /// this peer); once up, the session follows the AS the OPEN gave.
    pub fn is_ibgp(&self) -> bool {
        self.peer.asn.is_internal(self.local_asn)
    }

    /// What we put in our OPEN: multiprotocol for each family,
    /// route refresh and enhanced route refresh, 4-octet AS (added by the
    /// FSM), graceful restart, extended message and FQDN.
    pub fn capabilities(&self) -> Vec<Capability> {
        let mut caps: Vec<Capability> = self
            .families()
            .into_iter()
            .map(Capability::Multiprotocol)
            .collect();
        caps.push(Capability::RouteRefresh);
        caps.push(Capability::EnhancedRouteRefresh);
        caps.push(Capability::FourOctetAs(self.local_asn));
        let gr = &self.peer.graceful_restart;
        if gr.enabled {
            let mut flags = 0;
            if self.restarting {
                flags |= GrCap::RESTART_STATE;
            }
            if gr.notification {
                flags |= GrCap::NOTIFICATION;
            }
            caps.push(Capability::GracefulRestart(GrCap {
                flags,
                restart_time: gr
                    .restart_time
                    .as_secs()
                    .min(u64::from(GrCap::MAX_RESTART_TIME)) as u16,
                families: self
                    .families()
                    .into_iter()
                    .map(|family| GrFamily {
                        family,
                        flags: if gr.forwarding_state {
                            GrFamily::FORWARDING
                        } else {
                            0
                        },
                    })
                    .collect(),
            }));
            // RFC 9494 §4.2: the long-lived capability goes only beside
            // the Graceful Restart one; §3: one stale time per family.
            if let Some(stale) = gr.long_lived_stale_time {
                caps.push(Capability::LongLivedGracefulRestart(
                    self.families()
                        .into_iter()
                        .map(|family| LlgrFamily {
                            family,
                            // The F bit (0x80), as in the GR capability.
                            flags: if gr.forwarding_state { 0x80 } else { 0 },
                            // 24 bits; the config checks the range.
                            stale_time: stale.as_secs().min(0x00ff_ffff) as u32,
                        })
                        .collect(),
                ));
            }
        }
        if matches!(self.peer.address, config::PeerAddress::Interface(_)) {
            // RFC 8950 §4: an unnumbered link has no IPv4 address, so IPv4
            // routes can only go with an IPv6 next hop.
            caps.push(Capability::ExtendedNextHop(vec![
                bgp_proto::capability::ExtendedNextHop::IPV4_UNICAST_OVER_IPV6,
            ]));
        }
        caps.push(Capability::ExtendedMessage);
        caps.push(Capability::fqdn(&self.hostname, ""));
        caps
    }

    pub fn fsm_config(&self) -> fsm::Config {
        let p = &self.peer;
        fsm::Config {
            local_asn: self.local_asn,
            peer_asn: match p.asn {
                config::PeerAsn::Exact(asn) => fsm::PeerAs::Is(asn),
                config::PeerAsn::External => fsm::PeerAs::External,
                config::PeerAsn::Internal => fsm::PeerAs::Internal,
            },
            router_id: self.router_id,
            hold_time: p.hold_time.as_secs().min(u64::from(u16::MAX)) as u16,
            keepalive: p.keepalive,
            connect_retry: p.connect_retry,
            passive: p.passive,
            capabilities: self.capabilities(),
            idle_hold_time: Duration::from_secs(1),
            max_idle_hold_time: Duration::from_secs(120),
            jitter_seed: seed(&p.name),
        }
    }

    pub fn socket_options(&self) -> SocketOptions {
        socket_options(&self.peer, self.local_asn)
    }
}

/// The socket-level settings of peer `p` of a speaker in AS `local_asn`.
pub fn socket_options(p: &config::Peer, local_asn: u32) -> SocketOptions {
    let ibgp = p.is_ibgp(local_asn);
    SocketOptions {
        source_address: p.source_address,
        // iBGP sessions are rarely one hop: TTL 255 unless configured.
        ttl: if ibgp && p.ebgp_multihop == 1 {
            255
        } else {
            p.ebgp_multihop
        },
        ttl_security_hops: if p.ttl_security {
            std::num::NonZeroU8::new(p.ebgp_multihop.max(1))
        } else {
            None
        },
        md5_key: p.md5_key().map(<[u8]>::to_vec),
    }
}

fn seed(name: &str) -> u64 {
    // FNV-1a of the name and the process id: different peers and runs get
    // different jitter.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ u64::from(std::process::id());
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

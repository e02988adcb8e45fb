//! `[speaker]`: this node's BGP identity and local endpoints.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::selector::{LabelSelector, dns_subdomain_problem, parse_selector};
use super::tree::{self, Table, Value};

/// The default address of the metrics/health/status API.
pub const DEFAULT_API: &str = "127.0.0.1:9179";

/// `[speaker]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Speaker {
    /// Our autonomous system number (4-octet, RFC 6793). Required.
    pub asn: u32,
    /// BGP Identifier (RFC 4271 §4.2); "auto" picks $NODE_IP, else the
    /// first global IPv4 address of the node.
    pub router_id: RouterId,
    /// Address of the HTTP API (metrics, health, status).
    pub api: SocketAddr,
    /// Address to accept BGP connections on (the passive side); none means
    /// holdfast only connects out.
    pub listen: Option<SocketAddr>,
    /// This node's name; none means $NODE_NAME, else the system hostname
    /// (resolved by the daemon).
    pub hostname: Option<String>,
    /// Only nodes whose labels match advertise anything; none means every
    /// node.
    pub node_selector: Option<LabelSelector>,
    /// Withdraw everything at once, without hold-down, when the node is
    /// cordoned or has a NoExecute taint (a drain is deliberate),
    /// so traffic drains before maintenance.
    pub drain_on_cordon: bool,
    /// RFC 8326: before a planned withdrawal (`holdfast drain`, a cordon,
    /// SIGTERM without graceful restart) the routes carry GRACEFUL_SHUTDOWN
    /// this long; zero withdraws at once.
    pub graceful_shutdown_wait: Duration,
}

/// `graceful_shutdown_wait`'s default.
pub const DEFAULT_GRACEFUL_SHUTDOWN_WAIT: Duration = Duration::from_secs(15);
/// The longest `graceful_shutdown_wait`: a drain is minutes at most, and the
/// DaemonSet's terminationGracePeriodSeconds has to cover it.
pub const MAX_GRACEFUL_SHUTDOWN_WAIT: Duration = Duration::from_secs(3600);

/// How the BGP Identifier is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterId {
    /// $NODE_IP if it is IPv4, else the first global IPv4 address.
    Auto,
    /// This address.
    Fixed(Ipv4Addr),
}

pub(crate) const KEYS: &[&str] = &[
    "asn",
    "router_id",
    "api",
    "listen",
    "hostname",
    "node_selector",
    "drain_on_cordon",
    "graceful_shutdown_wait",
];

/// Reads an AS number, 1..=4294967295. AS 0 is reserved (RFC 7607) and
/// must not be used in an OPEN.
pub(crate) fn asn(value: &Value<'_>, key: &str, d: &mut Diagnostics) -> Option<u32> {
    tree::integer_in(value, key, 1, i128::from(u32::MAX), d)
}

pub(crate) fn parse_speaker(table: &Table<'_, '_>, d: &mut Diagnostics) -> Option<Speaker> {
    table.reject_unknown_keys(KEYS, d);
    let context = table.context.clone();

    let asn = table.required("asn", d).and_then(|v| asn(v, "asn", d));

    let router_id = match table.get("router_id") {
        None => Some(RouterId::Auto),
        Some(v) => tree::string(v, "router_id", d).and_then(|text| {
            if text == "auto" {
                return Some(RouterId::Auto);
            }
            match text.parse::<Ipv4Addr>() {
                // RFC 6286 §2.1: the BGP Identifier is a non-zero 32-bit value.
                Ok(ip) if ip.is_unspecified() => {
                    d.error(&v.span(), "router_id must not be 0.0.0.0 (RFC 6286 §2.1)");
                    None
                }
                Ok(ip) => Some(RouterId::Fixed(ip)),
                Err(_) => {
                    d.error(
                        &v.span(),
                        format!("router_id must be \"auto\" or an IPv4 address, got \"{text}\""),
                    );
                    None
                }
            }
        }),
    };

    let api = match table.get("api") {
        None => DEFAULT_API.parse().ok(),
        Some(v) => tree::socket_address(v, "api", d),
    };

    let listen = match table.get("listen") {
        None => Some(None),
        Some(v) => tree::socket_address(v, "listen", d).map(Some),
    };

    let hostname = match table.get("hostname") {
        None => Some(None),
        Some(v) => tree::string(v, "hostname", d).and_then(|text| {
            // Kubernetes node names are DNS subdomains.
            match dns_subdomain_problem(text) {
                Some(why) => {
                    d.error(&v.span(), format!("hostname \"{text}\" {why}"));
                    None
                }
                None => Some(Some(text.to_string())),
            }
        }),
    };

    let node_selector = match table.get("node_selector") {
        None => Some(None),
        Some(v) => parse_selector(v, "node_selector", &context, d).map(Some),
    };

    let drain_on_cordon = match table.get("drain_on_cordon") {
        None => Some(true),
        Some(v) => tree::boolean(v, "drain_on_cordon", d),
    };

    let graceful_shutdown_wait = match table.get("graceful_shutdown_wait") {
        None => Some(DEFAULT_GRACEFUL_SHUTDOWN_WAIT),
        Some(v) => tree::duration(v, "graceful_shutdown_wait", d).and_then(|t| {
            if t > MAX_GRACEFUL_SHUTDOWN_WAIT {
                d.error(
                    &v.span(),
                    "graceful_shutdown_wait must be at most 1h (\"0s\" skips the wait)",
                );
                return None;
            }
            Some(t)
        }),
    };

    Some(Speaker {
        asn: asn?,
        router_id: router_id?,
        api: api?,
        listen: listen?,
        hostname: hostname?,
        node_selector: node_selector?,
        drain_on_cordon: drain_on_cordon?,
        graceful_shutdown_wait: graceful_shutdown_wait?,
    })
}

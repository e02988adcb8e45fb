//! `[[advertisement]]`: which VIPs go to which peers, with which path
//! attributes.

use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::http_probe::HttpUrl;
use super::peer::name_problem;
use super::schema::{
    DefaultValue, IntRange, Key, PORT, POSITIVE_U32, Range, Section, U32, duration,
};
use super::selector::{LabelSelector, parse_selector};
use super::tree::{self, Table, Value};
use super::vip_range::{VipRange, in_ranges, parse_vip_range};
use crate::model::RouteAttrs;
use crate::model::community::{
    ExtendedCommunity, format_community, parse_community, parse_extended_community,
    parse_large_community,
};

/// The label the API server sets on every namespace (immutable, equal to
/// its name). It is all holdfast knows of a namespace it does not watch:
/// a `namespace_selector` on any other label needs Namespaces watched.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// Name of the advertisement that exists when the config has none.
pub const DEFAULT_ADVERTISEMENT: &str = "default";

/// `[[advertisement]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Advertisement {
    /// Unique name; VIP file entries refer to it.
    pub name: String,
    /// Which addresses of a Service are advertised.
    pub addresses: Vec<AddressKind>,
    /// Only Services whose labels match; none means every Service.
    pub service_selector: Option<LabelSelector>,
    /// Only Services in namespaces whose labels match; none means every
    /// namespace.
    pub namespace_selector: Option<LabelSelector>,
    /// Only addresses in one of these ranges (MetalLB's IPAddressPool
    /// `addresses`); none means every address. A PodCIDR must lie wholly
    /// in one; an interface's addresses are filtered alike.
    pub vip_ranges: Option<Vec<VipRange>>,
    /// Peers that receive these routes, by name; none means all peers.
    pub peers: Option<Vec<String>>,
    /// COMMUNITIES attribute values (RFC 1997).
    pub communities: Vec<u32>,
    /// LARGE_COMMUNITY attribute values (RFC 8092): (global, local 1, local 2).
    pub large_communities: Vec<(u32, u32, u32)>,
    /// EXTENDED_COMMUNITIES attribute values (RFC 4360).
    pub extended_communities: Vec<ExtendedCommunity>,
    /// LOCAL_PREF (RFC 4271 §5.1.5), sent to iBGP peers only.
    pub local_pref: Option<u32>,
    /// MULTI_EXIT_DISC (RFC 4271 §5.1.4).
    pub med: Option<u32>,
    /// Advertise a VIP only while its probe (a TCP connect to it, or an
    /// HTTP(S) GET) succeeds; a failing probe withdraws it at once, without
    /// the hold-down (src/probe/).
    pub probe: Option<Probe>,
    /// Which Service annotations (`holdfast.dev/communities`, ...) may
    /// change the attributes of this advertisement's routes. None by
    /// default: tenants do not steer the fabric unless the operator says so.
    pub allow_service_attributes: Vec<ServiceAttribute>,
    /// eTP Cluster IPv4 VIPs are announced as their covering prefix of this
    /// length instead of /32 (src/routes/desired.rs).
    pub aggregation_length: Option<u8>,
    /// The same for IPv6 VIPs (instead of /128).
    pub aggregation_length_v6: Option<u8>,
    /// `addresses` lists "PodCIDR": the Node's `spec.podCIDRs` are
    /// announced (Kubernetes source).
    pub pod_cidr: bool,
    /// The global addresses of this interface are announced as host routes.
    pub interface: Option<String>,
    /// `link_bandwidth = "per-endpoint"`: the routes carry the
    /// link-bandwidth extended community, proportional to this node's ready
    /// local endpoints (src/model/link_bandwidth.rs).
    pub link_bandwidth: Option<LinkBandwidth>,
    /// What a VIP whose probe has `on_failure = "degrade"` is re-announced
    /// with while the probe fails, instead of being withdrawn.
    pub degraded: Option<Degraded>,
}

/// `link_bandwidth`: how the link-bandwidth extended community is valued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkBandwidth {
    /// One unit per ready local endpoint (eTP Local), one per node (eTP
    /// Cluster).
    PerEndpoint,
}

/// `degraded = { med = N, as_path_prepend = N, communities = [...] }`: the
/// attributes of a degraded route. `med` replaces the route's MED, the
/// prepend is added to its own, the communities to its own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Degraded {
    /// MULTI_EXIT_DISC while degraded (RFC 4271 §5.1.4: lower is
    /// preferred, so a high one steers traffic away).
    pub med: Option<u32>,
    /// Our AS this many more times towards eBGP peers.
    pub as_path_prepend: u8,
    /// COMMUNITIES added while degraded (RFC 1997).
    pub communities: Vec<u32>,
}

/// Longest `degraded.as_path_prepend`: as long as the per-Service
/// annotation allows (a longer path only ever loses).
pub const MAX_DEGRADED_PREPEND: u8 = crate::model::attributes::MAX_PREPEND;

/// A per-Service path attribute an advertisement may honour
/// (`allow_service_attributes`): a row of the per-Service attribute table.
pub use crate::model::ServiceAttribute;

impl Advertisement {
    /// The advertisement in force when the config has none: every peer, no
    /// communities, LoadBalancer and external IPs.
    pub fn implicit_default() -> Self {
        Advertisement {
            name: DEFAULT_ADVERTISEMENT.to_string(),
            addresses: DEFAULT_ADDRESSES.to_vec(),
            service_selector: None,
            namespace_selector: None,
            vip_ranges: None,
            peers: None,
            communities: Vec::new(),
            large_communities: Vec::new(),
            extended_communities: Vec::new(),
            local_pref: None,
            med: None,
            probe: None,
            allow_service_attributes: Vec::new(),
            aggregation_length: None,
            aggregation_length_v6: None,
            pod_cidr: false,
            interface: None,
            link_bandwidth: None,
            degraded: None,
        }
    }

    /// True when this advertisement lets a Service's value of `attribute`
    /// onto its routes: an annotation's when `allow_service_attributes`
    /// lists it, the endpoint count when `link_bandwidth` is set.
    pub fn allows(&self, attribute: ServiceAttribute) -> bool {
        if attribute == ServiceAttribute::LinkBandwidth {
            return self.link_bandwidth.is_some();
        }
        self.allow_service_attributes.contains(&attribute)
    }

    /// The path attributes its own keys give every route it carries,
    /// before a Service's (`model::attributes::with_service`).
    pub fn own_attributes(&self) -> RouteAttrs {
        RouteAttrs {
            communities: self.communities.clone(),
            large_communities: self.large_communities.clone(),
            extended_communities: self
                .extended_communities
                .iter()
                .map(ExtendedCommunity::to_bytes)
                .collect(),
            local_pref: self.local_pref,
            med: self.med,
            ..RouteAttrs::default()
        }
    }

    /// The covering prefix length for a VIP of this address family, when
    /// this advertisement aggregates.
    pub fn aggregation_for(&self, ip: std::net::IpAddr) -> Option<u8> {
        match ip {
            std::net::IpAddr::V4(_) => self.aggregation_length,
            std::net::IpAddr::V6(_) => self.aggregation_length_v6,
        }
    }

    /// True when its `namespace_selector` reads a namespace label other
    /// than [`NAMESPACE_NAME_LABEL`]: the Kubernetes source must then
    /// watch Namespaces (and have RBAC to list and watch them).
    pub fn reads_namespace_labels(&self) -> bool {
        self.namespace_label_read().is_some()
    }

    /// The first namespace label other than [`NAMESPACE_NAME_LABEL`] its
    /// `namespace_selector` reads.
    pub fn namespace_label_read(&self) -> Option<&str> {
        let s = self.namespace_selector.as_ref()?;
        s.match_labels
            .keys()
            .map(String::as_str)
            .chain(s.match_expressions.iter().map(|e| e.key.as_str()))
            .find(|k| *k != NAMESPACE_NAME_LABEL)
    }

    /// True when this advertisement may carry `ip` (its `vip_ranges`).
    pub fn allows_address(&self, ip: std::net::IpAddr) -> bool {
        in_ranges(self.vip_ranges.as_deref(), ip)
    }

    /// True when this advertisement may carry every address of `prefix`.
    pub fn allows_prefix(&self, prefix: &ipnet::IpNet) -> bool {
        self.vip_ranges
            .as_ref()
            .is_none_or(|rs| rs.iter().any(|r| r.covers(prefix)))
    }

    /// True when routes of this advertisement go to the peer called `peer`.
    pub fn applies_to_peer(&self, peer: &str) -> bool {
        self.peers
            .as_ref()
            .is_none_or(|names| names.iter().any(|n| n == peer))
    }
}

/// Which address of a Service an advertisement covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressKind {
    /// `status.loadBalancer.ingress[].ip`: "LoadBalancerIP".
    LoadBalancerIp,
    /// `spec.externalIPs`: "ExternalIP".
    ExternalIp,
    /// `spec.clusterIPs`: "ClusterIP".
    ClusterIp,
}

impl AddressKind {
    /// The name the config writes it with ("LoadBalancerIP").
    pub fn as_str(&self) -> &'static str {
        match self {
            AddressKind::LoadBalancerIp => "LoadBalancerIP",
            AddressKind::ExternalIp => "ExternalIP",
            AddressKind::ClusterIp => "ClusterIP",
        }
    }
}

/// Addresses advertised when `addresses` is not given.
pub const DEFAULT_ADDRESSES: [AddressKind; 2] =
    [AddressKind::LoadBalancerIp, AddressKind::ExternalIp];

/// What a failing probe does to its VIP.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnFailure {
    /// Withdrawn at once (the default).
    #[default]
    Withdraw,
    /// Re-announced with the advertisement's `degraded` attributes.
    Degrade,
}

impl OnFailure {
    /// The name the config writes it with.
    pub fn as_str(&self) -> &'static str {
        match self {
            OnFailure::Withdraw => "withdraw",
            OnFailure::Degrade => "degrade",
        }
    }
}

/// Health probe gating an advertisement: the VIP is advertised only while
/// its probe succeeds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What is probed: `port` or `url`.
    pub target: ProbeTarget,
    /// Time between probes.
    pub interval: Duration,
    /// Time a probe may take (a connect; the whole HTTP exchange); less
    /// than `interval`.
    pub timeout: Duration,
    /// Consecutive failures before the VIP counts as absent.
    pub fail_after: u32,
    /// Consecutive successes before it counts as present again.
    pub recover_after: u32,
    /// Withdraw, or re-announce with `degraded` attributes.
    pub on_failure: OnFailure,
    /// While this file exists the probe counts as failed (a maintenance
    /// switch, like ExaBGP healthcheck's `--disable`).
    pub disable_file: Option<std::path::PathBuf>,
}

/// What a probe tries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeTarget {
    /// `port`: a TCP connect to VIP:port.
    Tcp {
        /// The TCP port connected to on the VIP.
        port: u16,
    },
    /// `url`: an HTTP(S) GET of this URL, whatever the VIP; a 2xx status
    /// passes.
    Http {
        /// The URL GET asks for.
        url: HttpUrl,
        /// `ca_file`: the CAs an `https://` server's certificate must chain
        /// to, instead of the system's roots. Read before each probe.
        ca_file: Option<std::path::PathBuf>,
    },
}

impl ProbeTarget {
    /// "TCP probe to port 443", "HTTP probe of https://127.0.0.1:6443/readyz".
    pub fn describe(&self) -> String {
        match self {
            ProbeTarget::Tcp { port } => format!("TCP probe to port {port}"),
            ProbeTarget::Http { url, .. } => format!("HTTP probe of {url}"),
        }
    }
}

impl std::fmt::Display for ProbeTarget {
    /// What is probed, as `status` shows it: "port 443", or the URL.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeTarget::Tcp { port } => write!(f, "port {port}"),
            ProbeTarget::Http { url, .. } => write!(f, "{url}"),
        }
    }
}

/// `aggregation_length`: an IPv4 prefix length.
pub(crate) const AGGREGATION_LENGTH: IntRange = IntRange { min: 1, max: 32 };
/// `aggregation_length_v6`: an IPv6 prefix length.
pub(crate) const AGGREGATION_LENGTH_V6: IntRange = IntRange { min: 1, max: 128 };
/// `degraded.as_path_prepend` when left out.
pub const DEFAULT_DEGRADED_PREPEND: u8 = 0;
/// `degraded.as_path_prepend`.
pub(crate) const DEGRADED_PREPEND: IntRange = IntRange {
    min: 0,
    max: MAX_DEGRADED_PREPEND as i128,
};
/// `probe.interval` when left out.
pub const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(2);
/// `probe.timeout` when left out.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// `probe.fail_after` when left out.
pub const DEFAULT_PROBE_FAIL_AFTER: u32 = 3;
/// `probe.recover_after` when left out.
pub const DEFAULT_PROBE_RECOVER_AFTER: u32 = 2;

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "Unique name; VIP file entries refer to it.",
    },
    Key {
        name: "addresses",
        kind: "array of strings",
        default: DefaultValue::Text(
            "`[\"LoadBalancerIP\", \"ExternalIP\"]` (none when `interface` is set)",
        ),
        range: Range::Any,
        meaning: "Which Service addresses: `\"LoadBalancerIP\"` (`status.loadBalancer.ingress`), `\"ExternalIP\"` (`spec.externalIPs`), `\"ClusterIP\"` (`spec.clusterIPs`); and `\"PodCIDR\"`: the Node's `spec.podCIDRs`, announced as they are (Kubernetes source; see *PodCIDR and interface advertisements*).",
    },
    Key {
        name: "service_selector",
        kind: "label selector",
        default: DefaultValue::Text("none (all)"),
        range: Range::Any,
        meaning: "Only Services whose labels match.",
    },
    Key {
        name: "namespace_selector",
        kind: "label selector",
        default: DefaultValue::Text("none (all)"),
        range: Range::Any,
        meaning: "Only Services in namespaces whose labels match. A selector on `kubernetes.io/metadata.name` alone needs no extra RBAC; any other label makes holdfast watch Namespaces (RBAC: get/list/watch namespaces). See *The Kubernetes source*.",
    },
    Key {
        name: "peers",
        kind: "array of strings",
        default: DefaultValue::Text("all peers"),
        range: Range::Any,
        meaning: "Peer names that receive these routes; each must name a `[[peer]]`; not empty.",
    },
    Key {
        name: "communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "COMMUNITIES (RFC 1997): `\"ASN:N\"` (each 0..=65535) or `\"no-export\"`, `\"no-advertise\"`, `\"no-export-subconfed\"`, `\"blackhole\"` (RFC 7999), `\"graceful-shutdown\"` (RFC 8326).",
    },
    Key {
        name: "large_communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "LARGE_COMMUNITY (RFC 8092): `\"GLOBAL:LOCAL1:LOCAL2\"`, each 0..=4294967295.",
    },
    Key {
        name: "extended_communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "Route target `\"rt:ASN:N\"` / route origin `\"ro:ASN:N\"` (RFC 4360). ASN < 65536 uses the two-octet-AS form (N up to 4294967295), larger ASNs the four-octet-AS form (RFC 5668, N up to 65535).",
    },
    Key {
        name: "local_pref",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(U32),
        meaning: "LOCAL_PREF; sent to iBGP peers only (RFC 4271 §5.1.5).",
    },
    Key {
        name: "med",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(U32),
        meaning: "MULTI_EXIT_DISC.",
    },
    Key {
        name: "probe",
        kind: "table",
        default: DefaultValue::Text("none (no probe)"),
        range: Range::Any,
        meaning: "Probe gating (a TCP connect to the VIP, or an HTTP(S) GET): an inline table whose keys are in the probe section.",
    },
    Key {
        name: "allow_service_attributes",
        kind: "array of strings",
        default: DefaultValue::Text("`[]` (none)"),
        range: Range::Any,
        meaning: "Which Service annotations may change this advertisement's routes: `\"communities\"`, `\"large-communities\"`, `\"local-pref\"`, `\"med\"`, `\"as-path-prepend\"` (see *Per-Service attributes*). Tenants do not steer the fabric unless listed here.",
    },
    Key {
        name: "aggregation_length",
        kind: "integer",
        default: DefaultValue::Text("none (/32)"),
        range: Range::Int(AGGREGATION_LENGTH),
        meaning: "Announce eTP Cluster IPv4 VIPs as their covering prefix of this length while at least one of them is present; eTP Local VIPs stay /32 (see *Aggregation*).",
    },
    Key {
        name: "aggregation_length_v6",
        kind: "integer",
        default: DefaultValue::Text("none (/128)"),
        range: Range::Int(AGGREGATION_LENGTH_V6),
        meaning: "The same for IPv6.",
    },
    Key {
        name: "interface",
        kind: "string",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "Also announce this interface's global addresses (not loopback, link-local or multicast) as /32 and /128 routes, read every second while such an advertisement exists (see *PodCIDR and interface advertisements*).",
    },
    Key {
        name: "link_bandwidth",
        kind: "string",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "`\"per-endpoint\"`: the routes carry the link-bandwidth extended community, 1 Gbit/s per ready local endpoint of the Service on this node (eTP Local), 1 Gbit/s for eTP Cluster; a changed count is one UPDATE once it has settled for 2 s (at most 10 s while it keeps changing). Kubernetes source (see *ECMP weighted by endpoints*).",
    },
    Key {
        name: "degraded",
        kind: "table",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "The attributes of a degraded route (see `probe.on_failure`): an inline table with at least one key, e.g. `degraded = { med = 1000, as_path_prepend = 3, communities = [\"65001:666\"] }`; its keys are in the degraded section.",
    },
    Key {
        name: "vip_ranges",
        kind: "array of strings",
        default: DefaultValue::Text("none (every address)"),
        range: Range::Any,
        meaning: "Only addresses in one of these, as MetalLB's IPAddressPool `addresses`: prefixes (`\"203.0.113.0/24\"`, `\"2001:db8:1::/64\"`, no host bits) or inclusive ranges (`\"198.51.100.10-198.51.100.20\"`, one family); overlapping entries are a union, the same addresses twice an error. In addition to `addresses` and the selectors: a Service address outside them is not selected (`explain` names the ranges); a PodCIDR must lie wholly inside one; an interface's addresses are filtered alike; a VIP file entry outside its advertisement's ranges makes the file invalid. Not empty (leave the key out to take every address).",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[[advertisement]]` (zero or more)",
    intro: "With no `[[advertisement]]`, one implicit advertisement named `\"default\"` applies: all peers, no communities, `addresses = [\"LoadBalancerIP\", \"ExternalIP\"]`.",
    keys: KEYS,
};

/// Keys of `degraded`.
pub(crate) const DEGRADED_KEYS: &[Key] = &[
    Key {
        name: "med",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(U32),
        meaning: "MULTI_EXIT_DISC of a degraded route (replaces `med`).",
    },
    Key {
        name: "as_path_prepend",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_DEGRADED_PREPEND.to_string()),
        range: Range::Int(DEGRADED_PREPEND),
        meaning: "Our AS this many more times towards eBGP peers while degraded (added to a Service's own prepend).",
    },
    Key {
        name: "communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "COMMUNITIES added while degraded (same forms as `communities`).",
    },
];

/// The reference's section for these keys.
pub(crate) const DEGRADED_SECTION: Section = Section {
    title: "`[[advertisement]] degraded`",
    intro: "The attributes a route carries while its probe fails with `on_failure = \"degrade\"`; an inline table with at least one key.",
    keys: DEGRADED_KEYS,
};

/// Longest interface name Linux accepts (IFNAMSIZ less the NUL).
const IFNAMSIZ: usize = 15;

/// An entry of `addresses`: a kind of Service address, or the Node's
/// PodCIDRs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listed {
    Service(AddressKind),
    PodCidr,
}

/// Advertisement names seen so far, for duplicate detection.
#[derive(Default)]
pub(crate) struct AdvertisementRegistry {
    names: Vec<(String, usize)>,
}

/// Keys of `probe`.
pub(crate) const PROBE_KEYS: &[Key] = &[
    Key {
        name: "port",
        kind: "integer",
        default: DefaultValue::Text("none; one of `port` and `url` is required"),
        range: Range::Int(PORT),
        meaning: "TCP port to connect to on the VIP. The VIP is advertised only while a TCP connect from this node to VIP:port succeeds: first after one success, withdrawn at once (no hold-down: a datapath fact) after `fail_after` failures, back after `recover_after` successes (see *TCP-probe gating*). Not with `url`.",
    },
    Key {
        name: "url",
        kind: "string",
        default: DefaultValue::Text("none; one of `port` and `url` is required"),
        range: Range::Text(|| "an `http://` or `https://` URL".to_string()),
        meaning: "Instead of `port`: an HTTP/1.1 GET of this URL, e.g. `\"https://127.0.0.1:6443/readyz\"`; a probe passes when a 2xx status line arrives within `timeout` (connect, TLS handshake, request and status line together), and anything else fails it (`\"HTTP 503 Service Unavailable\"`, a refused connect, a certificate that does not verify). The URL names the target whatever the VIP (the node's own API server for a control-plane VIP). Host: an IPv4 address, a bracketed IPv6 address or a DNS name (resolved before each probe); port 80 or 443 unless given; path `/` unless given; no user info or fragment. With `https://` the server's certificate must chain to `ca_file` (or the system's roots) and name the host (an IP host as an IP address SAN). No client certificate is sent: the endpoint must answer unauthenticated requests (see *HTTP(S) probes*).",
    },
    Key {
        name: "ca_file",
        kind: "string (path)",
        default: DefaultValue::Text("none (the system's roots)"),
        range: Range::Any,
        meaning: "For an `https://` `url` only: a PEM file of one or more CA certificates that the server's certificate must chain to, instead of the system's roots (e.g. `\"/etc/kubernetes/pki/ca.crt\"`). Relative to the config file's directory. Read before every probe, so a rotated CA is used without a reload; a file that cannot be read or holds no certificate fails the probe with that reason, and `holdfast check` and the config load warn about it.",
    },
    Key {
        name: "interval",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_PROBE_INTERVAL)),
        range: Range::Text(|| "above 0".to_string()),
        meaning: "Time between probes.",
    },
    Key {
        name: "timeout",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_PROBE_TIMEOUT)),
        range: Range::Text(|| "above 0 and below interval".to_string()),
        meaning: "How long one probe may take: the TCP connect, or for `url` the whole exchange (name lookup, connect, TLS handshake, request, status line).",
    },
    Key {
        name: "fail_after",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_PROBE_FAIL_AFTER.to_string()),
        range: Range::Int(POSITIVE_U32),
        meaning: "Consecutive failures before the VIP is withdrawn.",
    },
    Key {
        name: "recover_after",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_PROBE_RECOVER_AFTER.to_string()),
        range: Range::Int(POSITIVE_U32),
        meaning: "Consecutive successes before it is advertised again (also after the disable file goes).",
    },
    Key {
        name: "on_failure",
        kind: "string",
        default: DefaultValue::Text("`\"withdraw\"`"),
        range: Range::Text(|| "\"withdraw\" or \"degrade\"".to_string()),
        meaning: "`\"withdraw\"`: a failing probe withdraws the VIP. `\"degrade\"`: it is re-announced with this advertisement's `degraded` attributes instead (one UPDATE, no withdrawal), and back with its own after `recover_after` successes; needs `degraded` (see *Degrade before withdrawing*).",
    },
    Key {
        name: "disable_file",
        kind: "string (absolute path)",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "While this file exists the probe counts as failed at once (no `fail_after` wait): a maintenance switch, ExaBGP healthcheck's `--disable`. Shown by `holdfast status` and `explain`. Checked before each probe; a stat that fails or takes longer than `timeout` counts as no file.",
    },
];

/// The reference's section for these keys.
pub(crate) const PROBE_SECTION: Section = Section {
    title: "`[[advertisement]] probe`",
    intro: "Probe gating, an inline table of an `[[advertisement]]` with `port` or `url`: the VIP is advertised only while its probe succeeds — a TCP connect from this node to VIP:`port`, or an HTTP(S) GET of `url` answering 2xx: first after one success, withdrawn at once (no hold-down: a datapath fact) after `fail_after` failures, back after `recover_after` successes.",
    keys: PROBE_KEYS,
};

pub(crate) fn parse_advertisement(
    value: &Value<'_>,
    peer_names: &[String],
    config_dir: &std::path::Path,
    registry: &mut AdvertisementRegistry,
    d: &mut Diagnostics,
) -> Option<Advertisement> {
    let context = "[[advertisement]]";
    let table = Table::from_value(value, "each [[advertisement]]", context.to_string(), d)?;
    table.reject_unknown_keys(KEYS, d);

    let name = table.required("name", d).and_then(|v| {
        let text = tree::string(v, "name", d)?;
        if let Some(why) = name_problem(text) {
            d.error(&v.span(), format!("advertisement name \"{text}\" {why}"));
            return None;
        }
        let line = d.line_of(v.span().start);
        if let Some((_, first)) = registry.names.iter().find(|(n, _)| n == text) {
            d.error(
                &v.span(),
                format!("duplicate advertisement name \"{text}\" (first used on line {first})"),
            );
            return None;
        }
        registry.names.push((text.to_string(), line));
        Some(text.to_string())
    });

    let has_interface = table.get("interface").is_some();
    let listed = match table.get("addresses") {
        // An interface advertisement announces the interface alone unless
        // it lists addresses too.
        None if has_interface => Some(Vec::new()),
        None => Some(DEFAULT_ADDRESSES.iter().map(|k| Listed::Service(*k)).collect()),
        Some(v) => tree::unique_list(v, "addresses", d, |item, d| {
            tree::keyword(
                item,
                "each of addresses",
                "unknown address kind",
                &[
                    ("LoadBalancerIP", Listed::Service(AddressKind::LoadBalancerIp)),
                    ("ExternalIP", Listed::Service(AddressKind::ExternalIp)),
                    ("ClusterIP", Listed::Service(AddressKind::ClusterIp)),
                    ("PodCIDR", Listed::PodCidr),
                ],
                d,
            )
        }, |kind| match kind {
            Listed::Service(k) => format!("\"{}\"", k.as_str()),
            Listed::PodCidr => "\"PodCIDR\"".to_string(),
        })
        .and_then(|kinds| {
            if kinds.is_empty() {
                d.error(
                    &v.span(),
                    "addresses is empty; list at least one of \"LoadBalancerIP\", \"ExternalIP\", \"ClusterIP\", \"PodCIDR\"",
                );
                return None;
            }
            Some(kinds)
        }),
    };
    let pod_cidr = listed
        .as_ref()
        .is_some_and(|l| l.contains(&Listed::PodCidr));
    let addresses = listed.map(|l| {
        l.into_iter()
            .filter_map(|k| match k {
                Listed::Service(k) => Some(k),
                Listed::PodCidr => None,
            })
            .collect::<Vec<_>>()
    });

    let selector = |key: &str, d: &mut Diagnostics| match table.get(key) {
        None => Some(None),
        Some(v) => parse_selector(v, key, context, d).map(Some),
    };
    let service_selector = selector("service_selector", d);
    let namespace_selector = selector("namespace_selector", d);

    let vip_ranges = match table.get("vip_ranges") {
        None => Some(None),
        Some(v) => tree::unique_list(
            v,
            "vip_ranges",
            d,
            |item, d| {
                let text = tree::string(item, "each of vip_ranges", d)?;
                parse_vip_range(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |r| format!("vip range \"{r}\""),
        )
        .and_then(|ranges| {
            if ranges.is_empty() {
                d.error(
                    &v.span(),
                    "vip_ranges is empty, so no address would be advertised; remove the key to allow every address",
                );
                return None;
            }
            Some(Some(ranges))
        }),
    };

    let peers = match table.get("peers") {
        None => Some(None),
        Some(v) => tree::unique_list(v, "peers", d, |item, d| {
            let text = tree::string(item, "each of peers", d)?;
            if peer_names.iter().any(|n| n == text) {
                return Some(text.to_string());
            }
            let known: Vec<&str> = peer_names.iter().map(String::as_str).collect();
            let hint = match tree::did_you_mean(text, &known) {
                Some(s) => format!(" (did you mean \"{s}\"?)"),
                None if known.is_empty() => String::new(),
                None => format!("; expected {}", tree::quoted_list(&known)),
            };
            d.error(
                &item.span(),
                format!("unknown peer \"{text}\": no [[peer]] has that name{hint}"),
            );
            None
        }, |name| format!("peer \"{name}\""))
        .and_then(|names| {
            if names.is_empty() {
                d.error(
                    &v.span(),
                    "peers is empty, so these routes would go nowhere; remove the key to use all peers",
                );
                return None;
            }
            Some(Some(names))
        }),
    };

    let communities = match table.get("communities") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "communities",
            d,
            |item, d| {
                let text = tree::string(item, "each of communities", d)?;
                parse_community(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |c| format!("community {}", format_community(*c)),
        ),
    };
    let large_communities = match table.get("large_communities") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "large_communities",
            d,
            |item, d| {
                let text = tree::string(item, "each of large_communities", d)?;
                parse_large_community(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |(a, b, c)| format!("large community {a}:{b}:{c}"),
        ),
    };
    let extended_communities = match table.get("extended_communities") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "extended_communities",
            d,
            |item, d| {
                let text = tree::string(item, "each of extended_communities", d)?;
                parse_extended_community(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |e| format!("extended community \"{e}\""),
        ),
    };

    let local_pref = match table.get("local_pref") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "local_pref", U32, d).map(Some),
    };
    let med = match table.get("med") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "med", U32, d).map(Some),
    };
    let probe = match table.get("probe") {
        None => Some(None),
        Some(v) => parse_probe(v, config_dir, d).map(Some),
    };
    let allow_service_attributes = match table.get("allow_service_attributes") {
        None => Some(Vec::new()),
        Some(v) => {
            let choices: Vec<(&str, ServiceAttribute)> = ServiceAttribute::annotated()
                .map(|(a, _)| (a.as_str(), a))
                .collect();
            tree::unique_list(
                v,
                "allow_service_attributes",
                d,
                |item, d| {
                    tree::keyword(
                        item,
                        "each of allow_service_attributes",
                        "unknown Service attribute",
                        &choices,
                        d,
                    )
                },
                |a| format!("\"{}\"", a.as_str()),
            )
        }
    };
    let aggregation_length = match table.get("aggregation_length") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "aggregation_length", AGGREGATION_LENGTH, d).map(Some),
    };
    let aggregation_length_v6 = match table.get("aggregation_length_v6") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "aggregation_length_v6", AGGREGATION_LENGTH_V6, d).map(Some),
    };
    let interface = match table.get("interface") {
        None => Some(None),
        Some(v) => tree::string(v, "interface", d).and_then(|name| {
            if name.is_empty()
                || name.len() > IFNAMSIZ
                || name.contains(['/', ' ', '\0'])
                || name == "."
                || name == ".."
            {
                d.error(
                    &v.span(),
                    format!(
                        "interface \"{name}\" is not an interface name (1 to {IFNAMSIZ} characters, no '/' or spaces)"
                    ),
                );
                return None;
            }
            Some(Some(name.to_string()))
        }),
    };

    let link_bandwidth = match table.get("link_bandwidth") {
        None => Some(None),
        Some(v) => tree::keyword(
            v,
            "link_bandwidth",
            "unknown link_bandwidth",
            &[("per-endpoint", LinkBandwidth::PerEndpoint)],
            d,
        )
        .map(Some),
    };
    let degraded = match table.get("degraded") {
        None => Some(None),
        Some(v) => parse_degraded(v, d).map(Some),
    };
    if let (Some(Some(p)), Some(None)) = (&probe, &degraded)
        && p.on_failure == OnFailure::Degrade
    {
        let at = table.get("probe").map_or(table.span(), |v| v.span());
        d.error(
            &at,
            "probe.on_failure is \"degrade\" but the advertisement has no degraded = { ... } attributes to degrade to",
        );
        return None;
    }

    Some(Advertisement {
        name: name?,
        addresses: addresses?,
        service_selector: service_selector?,
        namespace_selector: namespace_selector?,
        vip_ranges: vip_ranges?,
        peers: peers?,
        communities: communities?,
        large_communities: large_communities?,
        extended_communities: extended_communities?,
        local_pref: local_pref?,
        med: med?,
        probe: probe?,
        allow_service_attributes: allow_service_attributes?,
        aggregation_length: aggregation_length?,
        aggregation_length_v6: aggregation_length_v6?,
        pod_cidr,
        interface: interface?,
        link_bandwidth: link_bandwidth?,
        degraded: degraded?,
    })
}

fn parse_degraded(value: &Value<'_>, d: &mut Diagnostics) -> Option<Degraded> {
    let table = Table::from_value(
        value,
        "degraded",
        "[[advertisement]] degraded".to_string(),
        d,
    )?;
    table.reject_unknown_keys(DEGRADED_KEYS, d);
    if DEGRADED_KEYS.iter().all(|k| table.get(k.name).is_none()) {
        d.error(
            &table.span(),
            "degraded is empty; give at least one of med, as_path_prepend, communities",
        );
        return None;
    }
    let med = match table.get("med") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "degraded.med", U32, d).map(Some),
    };
    let as_path_prepend = match table.get("as_path_prepend") {
        None => Some(DEFAULT_DEGRADED_PREPEND),
        Some(v) => tree::integer_in(v, "degraded.as_path_prepend", DEGRADED_PREPEND, d),
    };
    let communities = match table.get("communities") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "degraded.communities",
            d,
            |item, d| {
                let text = tree::string(item, "each of degraded.communities", d)?;
                parse_community(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |c| format!("community {}", format_community(*c)),
        ),
    };
    Some(Degraded {
        med: med?,
        as_path_prepend: as_path_prepend?,
        communities: communities?,
    })
}

fn parse_probe(
    value: &Value<'_>,
    config_dir: &std::path::Path,
    d: &mut Diagnostics,
) -> Option<Probe> {
    let table = Table::from_value(value, "probe", "[[advertisement]] probe".to_string(), d)?;
    table.reject_unknown_keys(PROBE_KEYS, d);
    let target = probe_target(&table, config_dir, d);
    let positive = |key: &str, default: Duration, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::duration_checked(v, key, d, |t| {
            if t.is_zero() {
                return Err(format!("{key} must be more than 0s"));
            }
            Ok(())
        }),
    };
    let interval = positive("interval", DEFAULT_PROBE_INTERVAL, d);
    let timeout = positive("timeout", DEFAULT_PROBE_TIMEOUT, d);
    let count = |key: &str, default: u32, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::integer_in(v, key, POSITIVE_U32, d),
    };
    let fail_after = count("fail_after", DEFAULT_PROBE_FAIL_AFTER, d);
    let recover_after = count("recover_after", DEFAULT_PROBE_RECOVER_AFTER, d);
    let on_failure = match table.get("on_failure") {
        None => Some(OnFailure::Withdraw),
        Some(v) => tree::keyword(
            v,
            "on_failure",
            "unknown on_failure",
            &[
                ("withdraw", OnFailure::Withdraw),
                ("degrade", OnFailure::Degrade),
            ],
            d,
        ),
    };
    let disable_file = match table.get("disable_file") {
        None => Some(None),
        Some(v) => tree::string(v, "disable_file", d).and_then(|text| {
            if !text.starts_with('/') {
                d.error(
                    &v.span(),
                    format!("disable_file \"{text}\" must be an absolute path"),
                );
                return None;
            }
            Some(Some(std::path::PathBuf::from(text)))
        }),
    };
    if let (Some(interval), Some(timeout)) = (interval, timeout)
        && timeout >= interval
    {
        let at = table
            .get("timeout")
            .or(table.get("interval"))
            .map_or(table.span(), |v| v.span());
        d.error(
            &at,
            format!(
                "timeout ({}) must be less than interval ({}), so probes do not overlap",
                format_duration(timeout),
                format_duration(interval)
            ),
        );
        return None;
    }
    Some(Probe {
        target: target?,
        interval: interval?,
        timeout: timeout?,
        fail_after: fail_after?,
        recover_after: recover_after?,
        on_failure: on_failure?,
        disable_file: disable_file?,
    })
}

/// `port`, or `url` with its `ca_file`: exactly one of `port` and `url`.
fn probe_target(
    table: &Table<'_, '_>,
    config_dir: &std::path::Path,
    d: &mut Diagnostics,
) -> Option<ProbeTarget> {
    let ca_file = table.get("ca_file").map(|v| {
        (
            v,
            tree::string(v, "ca_file", d).and_then(|text| {
                if text.is_empty() {
                    d.error(
                        &v.span(),
                        "ca_file is empty; give the path of a PEM file of CA certificates, or remove the key to use the system's roots",
                    );
                    return None;
                }
                Some(config_dir.join(text))
            }),
        )
    });
    match (table.get("port"), table.get("url")) {
        (Some(_), Some(url)) => {
            d.error(
                &url.span(),
                "probe has both port and url; give one: port for a TCP connect to the VIP, url for an HTTP(S) GET",
            );
            None
        }
        (None, None) => {
            d.error(
                &table.span(),
                "probe needs port (a TCP connect to the VIP) or url (an HTTP(S) GET, e.g. url = \"https://127.0.0.1:6443/readyz\")",
            );
            None
        }
        (Some(port), None) => {
            let port = tree::integer_in(port, "port", PORT, d);
            if let Some((v, _)) = ca_file {
                d.error(
                    &v.span(),
                    "ca_file is for a probe with an https:// url; a port probe only connects",
                );
                return None;
            }
            Some(ProbeTarget::Tcp { port: port? })
        }
        (None, Some(v)) => {
            let url = tree::string(v, "url", d).and_then(|text| {
                HttpUrl::parse(text)
                    .map_err(|why| d.error(&v.span(), why))
                    .ok()
            });
            let ca_file = match ca_file {
                None => Some(None),
                Some((at, path)) => match (&url, path) {
                    (Some(u), Some(_)) if !u.https => {
                        d.error(
                            &at.span(),
                            format!(
                                "ca_file is for https:// urls; url \"{u}\" is plain HTTP, which has no certificate to verify"
                            ),
                        );
                        None
                    }
                    (_, path) => path.map(Some),
                },
            };
            Some(ProbeTarget::Http {
                url: url?,
                ca_file: ca_file?,
            })
        }
    }
}

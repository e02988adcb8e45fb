//! `[[peer]]`: one BGP session to an upstream router.

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::export::{ExportPolicy, PolicySpans};
use super::read::{FileProblem, MAX_PASSWORD_FILE_LEN};
use super::schema::{
    DefaultValue, IntRange, Key, PORT, Range, Section, duration, list, quoted, seconds,
};
use super::speaker::asn;
use super::tree::{self, Table, Value};
pub use crate::bfd::auth::Key as BfdKey;
use crate::bfd::packet::AuthType;

/// Default BGP port (RFC 4271 §8.2.1).
pub const DEFAULT_PORT: u16 = 179;
/// Default hold time: the value RFC 4271 §10 suggests.
pub const DEFAULT_HOLD_TIME: Duration = Duration::from_secs(90);
/// Default ConnectRetryTimer: RFC 4271 §10's suggested 120s is long for a
/// node that just booted; 30s reconnects sooner without hammering the router.
pub const DEFAULT_CONNECT_RETRY: Duration = Duration::from_secs(30);
/// Largest TCP MD5 key Linux accepts (TCP_MD5SIG_MAXKEYLEN).
pub const MD5_KEY_MAX_LEN: usize = 80;
/// Largest hold time: the OPEN field is 16 bits of seconds (RFC 4271 §4.2).
pub const MAX_HOLD_TIME: Duration = Duration::from_secs(65_535);
/// Smallest non-zero hold time (RFC 4271 §4.2).
pub const MIN_HOLD_TIME: Duration = Duration::from_secs(3);

/// `[[peer]]`: one BGP neighbor.
#[derive(Debug, Clone, PartialEq)]
pub struct Peer {
    /// Unique name, used in logs, metrics, status and `advertisement.peers`.
    pub name: String,
    /// Where the router is.
    pub address: PeerAddress,
    /// The router's AS: a number, or `"external"` (any AS but the one we
    /// present to it) or `"internal"` (the one we present). Equal to the AS
    /// we present ([`Peer::local_as`]) makes the session iBGP.
    pub asn: PeerAsn,
    /// The AS we present to this router, in OPEN and AS_PATH, instead of
    /// `speaker.asn` (RFC 7705's local AS); none: `speaker.asn`.
    pub local_asn: Option<u32>,
    /// TCP port of the router.
    pub port: u16,
    /// TCP MD5 signature key (RFC 2385), if any.
    pub password: Option<PeerPassword>,
    /// Hold time we propose in OPEN (RFC 4271 §4.2): 0 (no keepalives) or
    /// 3s..=65535s, whole seconds.
    pub hold_time: Duration,
    /// Interval between KEEPALIVEs; at most `hold_time`, 0 only with a hold
    /// time of 0.
    pub keepalive: Duration,
    /// ConnectRetryTimer (RFC 4271 §8): wait between connection attempts.
    pub connect_retry: Duration,
    /// IP TTL of our packets (1 = directly connected).
    pub ebgp_multihop: u8,
    /// GTSM (RFC 5082): send with TTL 255 and accept only packets whose TTL
    /// is at least 256 - `ebgp_multihop`.
    pub ttl_security: bool,
    /// Local address to connect from; none lets the kernel choose.
    pub source_address: Option<IpAddr>,
    /// Address families (AFI/SAFI) to negotiate (RFC 4760).
    pub families: Vec<Family>,
    /// Only accept the router's connection, never connect out; needs
    /// `speaker.listen`.
    pub passive: bool,
    /// MinRouteAdvertisementIntervalTimer (RFC 4271 §9.2.1.1): least time
    /// between two UPDATEs for the same prefix; 0 sends at once.
    pub min_route_advertisement_interval: Duration,
    /// Graceful restart (RFC 4724) as advertised in our OPEN.
    pub graceful_restart: GracefulRestart,
    /// BFD (RFC 5880/5881/5883) liveness detection; none when disabled.
    pub bfd: Option<Bfd>,
    /// `[[peer.export]]` and `export_default`: what of the routes this
    /// peer is sent, with which changes (RFC 4271 §9.1.3). A change of it
    /// alone resets no session.
    pub export: ExportPolicy,
}

impl Peer {
    /// The AS this peer sees us in: `local_asn`, else the speaker's.
    pub fn local_as(&self, speaker_asn: u32) -> u32 {
        self.local_asn.unwrap_or(speaker_asn)
    }

    /// True when this is an iBGP session for a speaker in `speaker_asn`
    /// (compared with the AS presented to this peer, [`Peer::local_as`]).
    pub fn is_ibgp(&self, speaker_asn: u32) -> bool {
        self.asn.is_internal(self.local_as(speaker_asn))
    }

    /// The TCP MD5 key, once read by `load`.
    pub fn md5_key(&self) -> Option<&[u8]> {
        self.password
            .as_ref()
            .and_then(|p| p.key.as_ref())
            .map(Md5Key::as_bytes)
    }
}

/// `[[peer]] asn`: which AS the router may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PeerAsn {
    /// Exactly this AS.
    Exact(u32),
    /// `"external"`: any AS other than the one we present (eBGP).
    External,
    /// `"internal"`: the AS we present (iBGP).
    Internal,
}

impl PeerAsn {
    /// The configured number, if the config names one.
    pub fn exact(&self) -> Option<u32> {
        match self {
            PeerAsn::Exact(asn) => Some(*asn),
            PeerAsn::External | PeerAsn::Internal => None,
        }
    }

    /// Whether a session with this peer is internal for a speaker that
    /// presents AS `local`. Known from the config alone: `"external"` is
    /// never internal and `"internal"` always is.
    pub fn is_internal(&self, local: u32) -> bool {
        match self {
            PeerAsn::Exact(asn) => *asn == local,
            PeerAsn::External => false,
            PeerAsn::Internal => true,
        }
    }
}

impl fmt::Display for PeerAsn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAsn::Exact(asn) => write!(f, "{asn}"),
            PeerAsn::External => f.write_str("external"),
            PeerAsn::Internal => f.write_str("internal"),
        }
    }
}

/// Where a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerAddress {
    /// A fixed address.
    Ip(IpAddr),
    /// The node's default gateway of this family, looked up by the daemon
    /// (the usual top-of-rack router).
    DefaultGateway(AddressFamily),
    /// Unnumbered: the router on the other end of this interface, at the
    /// IPv6 link-local address it advertises itself with (RFC 4861 §4.2).
    Interface(IfName),
}

/// A Linux interface name, as the kernel accepts it (`dev_valid_name`):
/// 1 to 15 bytes (IFNAMSIZ less the NUL), no `/`, `:` or white space, not
/// `.` or `..`. Small enough to keep [`PeerAddress`] `Copy`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IfName {
    bytes: [u8; IfName::MAX_LEN],
    len: u8,
}

impl IfName {
    /// IFNAMSIZ (16) less the terminating NUL.
    pub const MAX_LEN: usize = 15;

    /// The name, or why the kernel would refuse it.
    pub fn new(name: &str) -> Result<IfName, &'static str> {
        if name.is_empty() {
            return Err("is empty");
        }
        if name.len() > Self::MAX_LEN {
            return Err("is longer than 15 bytes (Linux IFNAMSIZ)");
        }
        if name == "." || name == ".." {
            return Err("is not a valid interface name");
        }
        if name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace())
        {
            return Err("must not contain '/', ':' or white space");
        }
        let mut bytes = [0u8; Self::MAX_LEN];
        bytes[..name.len()].copy_from_slice(name.as_bytes());
        Ok(IfName {
            bytes,
            len: name.len() as u8,
        })
    }

    /// The name as written.
    pub fn as_str(&self) -> &str {
        // Built from a &str in `new`, so always UTF-8.
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for IfName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl PeerAddress {
    /// The family of the transport address.
    pub fn family(&self) -> AddressFamily {
        match self {
            PeerAddress::Ip(IpAddr::V4(_)) => AddressFamily::Ipv4,
            PeerAddress::Ip(IpAddr::V6(_)) => AddressFamily::Ipv6,
            PeerAddress::DefaultGateway(family) => *family,
            // Sessions run between IPv6 link-local addresses.
            PeerAddress::Interface(_) => AddressFamily::Ipv6,
        }
    }
}

impl fmt::Display for PeerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PeerAddress::Ip(ip) => write!(f, "{ip}"),
            PeerAddress::DefaultGateway(AddressFamily::Ipv4) => write!(f, "default-gateway (IPv4)"),
            PeerAddress::DefaultGateway(AddressFamily::Ipv6) => write!(f, "default-gateway (IPv6)"),
            PeerAddress::Interface(i) => write!(f, "interface {i}"),
        }
    }
}

/// IPv4 or IPv6, for transport addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddressFamily {
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
}

/// A negotiated address family (AFI/SAFI, RFC 4760).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// AFI 1, SAFI 1: "ipv4-unicast".
    Ipv4Unicast,
    /// AFI 2, SAFI 1: "ipv6-unicast".
    Ipv6Unicast,
}

impl Family {
    /// The config spelling.
    pub fn as_str(&self) -> &'static str {
        match self {
            Family::Ipv4Unicast => "ipv4-unicast",
            Family::Ipv6Unicast => "ipv6-unicast",
        }
    }
}

/// The TCP MD5 password of a peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerPassword {
    /// The file holding the key, relative paths resolved against the
    /// config file's directory.
    pub file: PathBuf,
    /// The key: read by `load`; `None` after `parse`, which never touches
    /// the file system. Comparing peers compares keys, so a changed key
    /// restarts the session on reload.
    pub key: Option<Md5Key>,
}

/// A TCP MD5 key, 1..=80 bytes. Its Debug output hides the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct Md5Key(Vec<u8>);

impl Md5Key {
    /// A key from a password file's contents, trailing newlines removed.
    pub fn from_file_contents(contents: &[u8]) -> Result<Self, String> {
        let key = super::read::without_line_breaks(contents);
        if key.is_empty() {
            return Err(format!(
                "is empty; a TCP MD5 key needs 1 to {MD5_KEY_MAX_LEN} bytes"
            ));
        }
        if key.len() > MD5_KEY_MAX_LEN {
            return Err(format!(
                "holds a key of {} bytes; TCP MD5 keys are at most {MD5_KEY_MAX_LEN} bytes (TCP_MD5SIG_MAXKEYLEN)",
                key.len()
            ));
        }
        Ok(Md5Key(key.to_vec()))
    }

    /// The key bytes, for the TCP_MD5SIG socket option.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for Md5Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Md5Key(<{} bytes>)", self.0.len())
    }
}

/// Graceful restart (RFC 4724) as we advertise it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GracefulRestart {
    /// Advertise the Graceful Restart capability.
    pub enabled: bool,
    /// Restart Time: how long the router keeps our routes while we restart
    /// (RFC 4724 §3, 12 bits of seconds: at most 4095s).
    pub restart_time: Duration,
    /// N bit (RFC 8538): graceful restart also covers NOTIFICATIONs.
    pub notification: bool,
    /// F bit (RFC 4724 §3): forwarding state preserved across a restart.
    pub forwarding_state: bool,
    /// Long-lived graceful restart (RFC 9494): once `restart_time` has run
    /// out, the router keeps our routes this much longer as LLGR_STALE.
    /// `None`: the capability is not advertised.
    pub long_lived_stale_time: Option<Duration>,
}

impl Default for GracefulRestart {
    fn default() -> Self {
        GracefulRestart {
            enabled: true,
            restart_time: Duration::from_secs(120),
            notification: true,
            forwarding_state: true,
            long_lived_stale_time: None,
        }
    }
}

/// BFD session parameters (RFC 5880 §6.8.1 variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bfd {
    /// Required Min RX Interval: fastest rate we accept packets at.
    pub min_rx: Duration,
    /// Desired Min TX Interval: fastest rate we send packets at.
    pub min_tx: Duration,
    /// Detect Mult: missed packets before the session is declared down.
    pub multiplier: u8,
    /// Multihop BFD (RFC 5883) instead of single-hop (RFC 5881).
    pub multihop: bool,
    /// Authentication (RFC 5880 §6.7).
    pub authentication: BfdAuthentication,
}

impl Default for Bfd {
    fn default() -> Self {
        Bfd {
            min_rx: Duration::from_millis(300),
            min_tx: Duration::from_millis(300),
            multiplier: 3,
            multihop: false,
            authentication: BfdAuthentication::None,
        }
    }
}

/// `bfd.authentication` (RFC 5880 §6.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BfdAuthentication {
    /// None: the default for single-hop, whose TTL 255 check (RFC 5881 §5)
    /// keeps off-link senders out; multihop only when stated.
    None,
    /// An Auth Type with the key in `key_file`.
    Key {
        /// Keyed MD5 or SHA1, meticulous or not, or the Simple Password.
        auth_type: AuthType,
        /// Auth Key ID (RFC 5880 §4.1): the router's ID for the same key.
        key_id: u8,
        /// Relative paths resolved against the config file's directory.
        file: PathBuf,
        /// Read by `load`; `None` after `parse`. Comparing peers compares
        /// keys, so a changed key restarts the session on reload.
        key: Option<BfdKey>,
    },
}

impl BfdAuthentication {
    /// The key, once read by `load`.
    pub fn key(&self) -> Option<&BfdKey> {
        match self {
            BfdAuthentication::None => None,
            BfdAuthentication::Key { key, .. } => key.as_ref(),
        }
    }
}

/// The longest `bfd.key_file` read: a Keyed SHA1 key (20 bytes, RFC 5880
/// §6.7.4) and its line break (CR LF at most).
pub const MAX_BFD_KEY_FILE_LEN: u64 = 22;

/// `ebgp_multihop` when left out: directly connected.
pub const DEFAULT_EBGP_MULTIHOP: u8 = 1;
/// `ebgp_multihop`: an IP TTL.
pub(crate) const EBGP_MULTIHOP: IntRange = IntRange { min: 1, max: 255 };
/// `ttl_security` when left out.
pub const DEFAULT_TTL_SECURITY: bool = false;
/// `passive` when left out.
pub const DEFAULT_PASSIVE: bool = false;
/// `families` when left out.
pub const DEFAULT_FAMILIES: [Family; 2] = [Family::Ipv4Unicast, Family::Ipv6Unicast];
/// `min_route_advertisement_interval` when left out: send at once.
pub const DEFAULT_MIN_ROUTE_ADVERTISEMENT_INTERVAL: Duration = Duration::ZERO;
/// The shortest `connect_retry`.
pub const MIN_CONNECT_RETRY: Duration = Duration::from_secs(1);
/// The longest `graceful_restart.restart_time`: 12 bits of seconds (RFC
/// 4724 §3).
pub const MAX_RESTART_TIME: Duration = Duration::from_secs(4095);
/// `bfd.enabled` when left out: a `bfd` table means BFD.
pub const DEFAULT_BFD_ENABLED: bool = true;
/// The longest BFD interval: 32 bits of microseconds (RFC 5880 §4.1).
pub const MAX_BFD_INTERVAL: Duration = Duration::from_micros(u32::MAX as u64);
/// `bfd.multiplier`: Detect Mult, one octet, not zero (RFC 5880 §6.8.1).
pub(crate) const BFD_MULTIPLIER: IntRange = IntRange { min: 1, max: 255 };
/// `bfd.key_id` when left out: BIRD's first key.
pub const DEFAULT_BFD_KEY_ID: u8 = 1;
/// `bfd.key_id`: the Auth Key ID, one octet (RFC 5880 §4.1).
pub(crate) const BFD_KEY_ID: IntRange = IntRange { min: 0, max: 255 };

/// The size of `bfd.key_file` and of the key in it, for each type.
fn bfd_key_file_range() -> String {
    let keys: Vec<String> = AuthType::ALL
        .iter()
        .map(|t| format!("1..={} for \"{}\"", t.max_key_len(), t.as_str()))
        .collect();
    format!(
        "a regular file of at most {MAX_BFD_KEY_FILE_LEN} bytes, holding a key of {} bytes",
        keys.join(", ")
    )
}

/// `"none"` and the keyed types, as `bfd.authentication` takes them.
fn bfd_authentication_choices() -> String {
    let mut all = vec![quoted("none")];
    all.extend(AuthType::ALL.iter().map(|t| quoted(t.as_str())));
    format!("one of {}", all.join(", "))
}

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "Unique name (letters, digits, `-`, `_`, `.`; at most 64) used in logs, metrics, status and `advertisement.peers`.",
    },
    Key {
        name: "address",
        kind: "string",
        default: DefaultValue::Text("required, unless `interface` is set"),
        range: Range::Any,
        meaning: "The router: an IPv4/IPv6 address, or `\"default-gateway\"` for the node's default gateway (looked up by the daemon; an IPv6 gateway may be link-local, and is then peered with on its interface). A link-local address cannot be written here (it needs an interface); use `\"default-gateway\"`. An IPv4-mapped address is refused: write the IPv4 address.",
    },
    Key {
        name: "interface",
        kind: "string",
        default: DefaultValue::Text("none (use `address`)"),
        range: Range::Any,
        meaning: "Instead of `address`: BGP unnumbered over this interface. The router is the sender of the IPv6 router advertisements on it (link-local, followed when it changes); IPv4 routes go with an IPv6 next hop (RFC 8950 extended next hop). Exactly one of `address` and `interface`. See *Unnumbered peering*.",
    },
    Key {
        name: "family",
        kind: "string",
        default: DefaultValue::Text("`\"ipv4\"`"),
        range: Range::Any,
        meaning: "Only with `address = \"default-gateway\"`: which gateway, `\"ipv4\"` or `\"ipv6\"`. An error with an IP address.",
    },
    Key {
        name: "asn",
        kind: "integer or string",
        default: DefaultValue::Required,
        range: Range::Text(|| {
            format!(
                "{}, or \"external\" or \"internal\"",
                super::speaker::asn_range()
            )
        }),
        meaning: "The router's AS number; or `\"external\"`: any AS but the one we present (eBGP with whatever AS the router's OPEN gives, like frr-k8s `dynamicASN: external`), or `\"internal\"`: the AS we present (iBGP). Any other AS in the router's OPEN is refused with NOTIFICATION 2/2 Bad Peer AS (RFC 4271 §6.2). Equal to the AS we present (`local_asn`, else `speaker.asn`) makes the session iBGP: LOCAL_PREF sent, empty AS_PATH, TTL 255 unless `ebgp_multihop` says otherwise. `holdfast status` shows the AS the OPEN gave (`peer_asn`; the AS column reads `65010 (external)`).",
    },
    Key {
        name: "local_asn",
        kind: "integer",
        default: DefaultValue::Text("`speaker.asn`"),
        range: Range::Text(super::speaker::asn_range),
        meaning: "The AS we present to this router, in OPEN (My Autonomous System and the 4-octet AS capability) and in AS_PATH, instead of `speaker.asn` (RFC 7705's local AS, for a router that expects another AS of us; same range as `asn`). holdfast only originates routes, so its AS_PATH towards an eBGP router is just `local_asn`: `speaker.asn` appears nowhere on this session (what other implementations call `no-prepend replace-as`). iBGP or eBGP is decided against `local_asn`.",
    },
    Key {
        name: "port",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_PORT.to_string()),
        range: Range::Int(PORT),
        meaning: "The router's TCP port. Two peers may not share address and port.",
    },
    Key {
        name: "password_file",
        kind: "path",
        default: DefaultValue::Text("none"),
        range: Range::Text(|| {
            format!(
                "a regular file of at most {} bytes, holding a key of 1..={MD5_KEY_MAX_LEN} bytes",
                super::read::MAX_PASSWORD_FILE_LEN
            )
        }),
        meaning: "TCP MD5 signature (RFC 2385) key file, read when the config is loaded; trailing newlines are stripped; the longest key is Linux's `TCP_MD5SIG_MAXKEYLEN`. A changed key restarts just that session on reload, and the listening socket (`speaker.listen`) gets the new key at once. For a peer addressed by `default-gateway` or `interface`, the listening socket holds the key for the address the peer resolves to, and moves it when that address changes (a new default gateway, a router learnt on the link), so a `passive` one can connect signed.",
    },
    Key {
        name: "hold_time",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_HOLD_TIME)),
        range: Range::Text(|| {
            format!(
                "\"0s\" or {}..={}, whole seconds",
                seconds(MIN_HOLD_TIME),
                seconds(MAX_HOLD_TIME)
            )
        }),
        meaning: "Hold time proposed in OPEN: `\"0s\"` means no keepalives (RFC 4271 §4.2).",
    },
    Key {
        name: "keepalive",
        kind: "duration",
        default: DefaultValue::Text("`hold_time / 3`"),
        range: Range::Any,
        meaning: "KEEPALIVE interval. Must not exceed `hold_time`; `\"0s\"` if and only if `hold_time` is `\"0s\"` (RFC 4271 §4.4).",
    },
    Key {
        name: "connect_retry",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_CONNECT_RETRY)),
        range: Range::Text(|| format!("at least {}", duration(MIN_CONNECT_RETRY))),
        meaning: "ConnectRetryTimer (RFC 4271 §8): wait between connection attempts (jittered by the daemon). A reload that changes only this key resets nothing: the running session stays up, and the new value applies from the peer's next session.",
    },
    Key {
        name: "ebgp_multihop",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_EBGP_MULTIHOP.to_string()),
        range: Range::Int(EBGP_MULTIHOP),
        meaning: "IP TTL of our packets (1 = directly connected); also on connections the router opens to `speaker.listen`.",
    },
    Key {
        name: "ttl_security",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_TTL_SECURITY.to_string()),
        range: Range::Any,
        meaning: "GTSM (RFC 5082): send with TTL 255 and accept only packets with TTL ≥ 256 − `ebgp_multihop` (so with `ebgp_multihop = N`, the router may be N hops away). Allowed with `passive`: the router's SYN is checked too (see *the passive side* under TCP MD5, GTSM, multihop).",
    },
    Key {
        name: "source_address",
        kind: "IP address",
        default: DefaultValue::Text("none (kernel's choice)"),
        range: Range::Any,
        meaning: "Local address to connect from; same family as `address`; not IPv4-mapped.",
    },
    Key {
        name: "families",
        kind: "array of strings",
        default: DefaultValue::Value(|| list(DEFAULT_FAMILIES.iter().map(|f| f.as_str()))),
        range: Range::Any,
        meaning: "Address families to negotiate (RFC 4760). Only these two are supported; at least one, each once.",
    },
    Key {
        name: "passive",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_PASSIVE.to_string()),
        range: Range::Any,
        meaning: "Never connect out, only accept the router's connection; needs `speaker.listen`.",
    },
    Key {
        name: "min_route_advertisement_interval",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_MIN_ROUTE_ADVERTISEMENT_INTERVAL)),
        range: Range::Any,
        meaning: "MinRouteAdvertisementIntervalTimer (RFC 4271 §9.2.1.1): least time between UPDATEs for one prefix; 0 sends at once.",
    },
    Key {
        name: "graceful_restart",
        kind: "table",
        default: DefaultValue::Text("every key at its default"),
        range: Range::Any,
        meaning: "Graceful restart (RFC 4724): an inline table, `graceful_restart = { enabled = true, restart_time = \"120s\" }`; its keys are in the next section.",
    },
    Key {
        name: "bfd",
        kind: "table",
        default: DefaultValue::Text("none (no BFD)"),
        range: Range::Any,
        meaning: "BFD liveness detection (RFC 5880): an inline table, `bfd = { min_rx = \"100ms\", min_tx = \"100ms\", multiplier = 3 }`; present means enabled unless `enabled = false`. Its keys are in the BFD section.",
    },
    Key {
        name: "export",
        kind: "array of tables",
        default: DefaultValue::Text("none (every route, as its advertisements make it)"),
        range: Range::Any,
        meaning: "This peer's export policy: `[[peer.export]]` rules, tried in order after the advertisements and the Service's own attributes (RFC 4271 §9.1.3); their keys are in the `[[peer.export]]` section.",
    },
    Key {
        name: "export_default",
        kind: "string",
        default: DefaultValue::Text("`\"accept\"`"),
        range: Range::Text(|| "\"accept\" or \"reject\"".to_string()),
        meaning: "What happens to a route no `accept` or `reject` rule of `[[peer.export]]` matched: `\"accept\"` sends it (with what matching rules set), `\"reject\"` keeps it from this peer.",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[[peer]]` (one or more)",
    intro: "",
    keys: KEYS,
};

/// What peer parsing needs to know from outside the `[[peer]]` table.
pub(crate) struct PeerContext<'a> {
    /// `[speaker]` sets `listen` (passive peers need it).
    pub speaker_listens: bool,
    /// Relative paths are relative to this directory.
    pub config_dir: &'a Path,
    /// Read password files (`load`) or leave them (`parse`).
    pub read_passwords: bool,
}

/// Names and transport endpoints seen so far, to report duplicates at the
/// later definition.
#[derive(Default)]
pub(crate) struct PeerRegistry {
    names: Vec<(String, usize)>,
    endpoints: Vec<((PeerAddress, u16), usize)>,
    /// Each peer's export policy's names and LOCAL_PREF keys, by peer
    /// name, for the checks that need the whole file.
    pub(crate) policies: Vec<(String, PolicySpans)>,
}

impl PeerRegistry {
    pub(crate) fn names(&self) -> Vec<String> {
        self.names.iter().map(|(name, _)| name.clone()).collect()
    }
}

/// Peer and advertisement names go into logs, metrics labels and status
/// output: keep them to a plain, shell- and label-safe alphabet.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!ok).then_some("must be 1 to 64 letters, digits, '-', '_' or '.'")
}

pub(crate) fn parse_peer(
    value: &Value<'_>,
    cx: &PeerContext<'_>,
    registry: &mut PeerRegistry,
    d: &mut Diagnostics,
) -> Option<Peer> {
    let table = Table::from_value(value, "each [[peer]]", "[[peer]]".to_string(), d)?;
    table.reject_unknown_keys(KEYS, d);

    let name = table.required("name", d).and_then(|v| {
        let text = tree::string(v, "name", d)?;
        let line = d.line_of(v.span().start);
        if let Some((_, first)) = registry.names.iter().find(|(n, _)| n == text) {
            d.error(
                &v.span(),
                format!("duplicate peer name \"{text}\" (first used on line {first})"),
            );
            return None;
        }
        // Registered even if malformed, so that advertisements naming it
        // are not also reported as naming an unknown peer.
        registry.names.push((text.to_string(), line));
        if let Some(why) = name_problem(text) {
            d.error(&v.span(), format!("peer name \"{text}\" {why}"));
            return None;
        }
        Some(text.to_string())
    });

    let address = match (table.get("address"), table.get("interface")) {
        (Some(_), Some(i)) => {
            d.error(
                &i.span(),
                "a peer has either address or interface (unnumbered), not both",
            );
            None
        }
        (None, Some(i)) => peer_interface(&table, i, d),
        _ => table
            .required("address", d)
            .and_then(|v| peer_address(&table, v, d)),
    };

    let asn = table.required("asn", d).and_then(|v| peer_asn(v, d));
    let local_asn = match table.get("local_asn") {
        None => Some(None),
        Some(v) => super::speaker::asn(v, "local_asn", d).map(Some),
    };

    let port = match table.get("port") {
        None => Some(DEFAULT_PORT),
        Some(v) => tree::integer_in(v, "port", PORT, d),
    };

    if let (Some(address), Some(port)) = (address, port) {
        let at = table
            .get("address")
            .or_else(|| table.get("interface"))
            .map_or(table.span(), |v| v.span());
        let line = d.line_of(at.start);
        if let Some((_, first)) = registry
            .endpoints
            .iter()
            .find(|(e, _)| *e == (address, port))
        {
            d.error(
                &at,
                format!(
                    "another [[peer]] (line {first}) already uses address {address} port {port}"
                ),
            );
        } else {
            registry.endpoints.push(((address, port), line));
        }
    }

    let password = match table.get("password_file") {
        None => Some(None),
        Some(v) => password(v, cx, d).map(Some),
    };

    let (hold_time, keepalive) = timers(&table, d);

    let connect_retry = match table.get("connect_retry") {
        None => Some(DEFAULT_CONNECT_RETRY),
        Some(v) => tree::duration_checked(v, "connect_retry", d, |t| {
            if t < MIN_CONNECT_RETRY {
                return Err(format!(
                    "connect_retry must be at least {}, got {}",
                    format_duration(MIN_CONNECT_RETRY),
                    format_duration(t)
                ));
            }
            Ok(())
        }),
    };

    let ebgp_multihop = match table.get("ebgp_multihop") {
        None => Some(DEFAULT_EBGP_MULTIHOP),
        Some(v) => tree::integer_in(v, "ebgp_multihop", EBGP_MULTIHOP, d),
    };

    let ttl_security = match table.get("ttl_security") {
        None => Some(DEFAULT_TTL_SECURITY),
        Some(v) => tree::boolean(v, "ttl_security", d),
    };

    let source_address = match table.get("source_address") {
        None => Some(None),
        Some(v) => tree::ip_address(v, "source_address", d).and_then(|ip| {
            if let Some(v4) = crate::model::net::v4_mapped(ip) {
                d.error(
                    &v.span(),
                    format!(
                        "source_address {ip} is an IPv4-mapped IPv6 address; write the IPv4 address \"{v4}\""
                    ),
                );
                return None;
            }
            let family = PeerAddress::Ip(ip).family();
            match address {
                Some(peer) if peer.family() != family => {
                    d.error(
                        &v.span(),
                        format!(
                            "source_address {ip} is {} but the peer address {peer} is {}",
                            family_word(family),
                            family_word(peer.family())
                        ),
                    );
                    None
                }
                _ => Some(Some(ip)),
            }
        }),
    };

    let families = match table.get("families") {
        None => Some(DEFAULT_FAMILIES.to_vec()),
        Some(v) => families(v, d),
    };

    let passive = match table.get("passive") {
        None => Some(DEFAULT_PASSIVE),
        Some(v) => tree::boolean(v, "passive", d).and_then(|passive| {
            if passive && !cx.speaker_listens {
                d.error(
                    &v.span(),
                    "passive = true needs listen in [speaker] (the address to accept the router's connection on)",
                );
                return None;
            }
            Some(passive)
        }),
    };

    let min_route_advertisement_interval = match table.get("min_route_advertisement_interval") {
        None => Some(DEFAULT_MIN_ROUTE_ADVERTISEMENT_INTERVAL),
        Some(v) => tree::duration(v, "min_route_advertisement_interval", d),
    };

    let graceful_restart = match table.get("graceful_restart") {
        None => Some(GracefulRestart::default()),
        Some(v) => graceful_restart(v, d),
    };

    let bfd = match table.get("bfd") {
        None => Some(None),
        Some(v) => bfd(v, cx, d),
    };

    let mut spans = PolicySpans::default();
    let export = super::export::parse_policy(&table, &mut spans, d);
    if let Some(n) = &name {
        registry.policies.push((n.clone(), spans));
    }

    Some(Peer {
        name: name?,
        address: address?,
        asn: asn?,
        local_asn: local_asn?,
        port: port?,
        password: password?,
        hold_time: hold_time?,
        keepalive: keepalive?,
        connect_retry: connect_retry?,
        ebgp_multihop: ebgp_multihop?,
        ttl_security: ttl_security?,
        source_address: source_address?,
        families: families?,
        passive: passive?,
        min_route_advertisement_interval: min_route_advertisement_interval?,
        graceful_restart: graceful_restart?,
        bfd: bfd?,
        export: export?,
    })
}

/// `asn`: a number, `"external"` or `"internal"`.
fn peer_asn(v: &Value<'_>, d: &mut Diagnostics) -> Option<PeerAsn> {
    if let toml::de::DeValue::String(text) = v.get_ref() {
        return match text.as_ref() {
            "external" => Some(PeerAsn::External),
            "internal" => Some(PeerAsn::Internal),
            other => {
                d.error(
                    &v.span(),
                    format!(
                        "asn must be an AS number, \"external\" or \"internal\", got \"{other}\""
                    ),
                );
                None
            }
        };
    }
    asn(v, "asn", d).map(PeerAsn::Exact)
}

pub(crate) fn family_word(family: AddressFamily) -> &'static str {
    match family {
        AddressFamily::Ipv4 => "IPv4",
        AddressFamily::Ipv6 => "IPv6",
    }
}

/// `interface`: an unnumbered peer, found on that interface by the daemon.
/// Whether the interface exists is the daemon's business (it may appear
/// later, and `check` may run on another machine); the name must be one
/// the kernel could have.
fn peer_interface(
    table: &Table<'_, '_>,
    v: &Value<'_>,
    d: &mut Diagnostics,
) -> Option<PeerAddress> {
    let text = tree::string(v, "interface", d)?;
    if let Some(f) = table.get("family") {
        d.error(
            &f.span(),
            "family applies only to address = \"default-gateway\"; an interface peer is always reached over IPv6 link-local",
        );
    }
    match IfName::new(text) {
        Ok(name) => Some(PeerAddress::Interface(name)),
        Err(why) => {
            d.error(&v.span(), format!("interface name \"{text}\" {why}"));
            None
        }
    }
}

/// `address`, with `family` (only meaningful for "default-gateway").
pub(crate) fn peer_address(
    table: &Table<'_, '_>,
    v: &Value<'_>,
    d: &mut Diagnostics,
) -> Option<PeerAddress> {
    let text = tree::string(v, "address", d)?;
    let family = table.get("family");
    if text == "default-gateway" {
        let family = match family {
            None => Some(AddressFamily::Ipv4),
            Some(f) => tree::keyword(
                f,
                "family",
                "unknown family",
                &[("ipv4", AddressFamily::Ipv4), ("ipv6", AddressFamily::Ipv6)],
                d,
            ),
        };
        return family.map(PeerAddress::DefaultGateway);
    }
    if let Some(f) = family {
        d.error(
            &f.span(),
            "family applies only to address = \"default-gateway\"; an IP address already has a family",
        );
    }
    let Ok(ip) = text.parse::<IpAddr>() else {
        let hint = if text.contains('/') {
            " (a single address, not a prefix)"
        } else if text.parse::<std::net::SocketAddr>().is_ok() {
            " (put the port in port, not in the address)"
        } else {
            ""
        };
        d.error(
            &v.span(),
            format!(
                "address must be an IPv4 or IPv6 address or \"default-gateway\"{hint}, got \"{text}\""
            ),
        );
        return None;
    };
    // One spelling per address (crate::model::net): the listener sees an IPv4
    // router as its IPv4 address, and a mapped one here would never match.
    if let Some(v4) = crate::model::net::v4_mapped(ip) {
        d.error(
            &v.span(),
            format!(
                "peer address {ip} is an IPv4-mapped IPv6 address; write the IPv4 address \"{v4}\""
            ),
        );
        return None;
    }
    let unusable = match ip {
        IpAddr::V4(v4) => {
            if v4.is_unspecified() || v4.is_multicast() || v4.is_broadcast() {
                Some("is not a unicast address")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_unspecified() || v6.is_multicast() {
                Some("is not a unicast address")
            } else if v6.is_unicast_link_local() {
                Some(
                    "is link-local and would need an interface; use address = \"default-gateway\" with family = \"ipv6\", or a global address",
                )
            } else {
                None
            }
        }
    };
    if let Some(why) = unusable {
        d.error(&v.span(), format!("peer address {ip} {why}"));
        return None;
    }
    Some(PeerAddress::Ip(ip))
}

fn password(v: &Value<'_>, cx: &PeerContext<'_>, d: &mut Diagnostics) -> Option<PeerPassword> {
    let file = tree::secret_file_path(v, "password_file", "key", cx.config_dir, d)?;
    if !cx.read_passwords {
        return Some(PeerPassword { file, key: None });
    }
    match super::read::read_regular_file(&file, MAX_PASSWORD_FILE_LEN) {
        Err(problem) => {
            let shown = file.display();
            let message = match problem {
                FileProblem::Io(err) => format!("cannot read password_file {shown}: {err}"),
                FileProblem::NotRegular(kind) => format!(
                    "password_file {shown} is {kind}, not a regular file; it must be a regular file of at most {MAX_PASSWORD_FILE_LEN} bytes"
                ),
                FileProblem::TooLarge(_) => format!(
                    "password_file {shown} is larger than {MAX_PASSWORD_FILE_LEN} bytes; it holds one TCP MD5 key of 1 to {MD5_KEY_MAX_LEN} bytes and a line break"
                ),
            };
            d.error(&v.span(), message);
            None
        }
        Ok(contents) => match Md5Key::from_file_contents(&contents) {
            Ok(key) => Some(PeerPassword {
                file,
                key: Some(key),
            }),
            Err(why) => {
                d.error(&v.span(), format!("password_file {} {why}", file.display()));
                None
            }
        },
    }
}

/// `hold_time` and `keepalive`, checked together.
fn timers(table: &Table<'_, '_>, d: &mut Diagnostics) -> (Option<Duration>, Option<Duration>) {
    let hold_time = match table.get("hold_time") {
        None => Some(DEFAULT_HOLD_TIME),
        Some(v) => tree::duration_checked(v, "hold_time", d, |t| {
            let text = format_duration(t);
            if t.subsec_nanos() != 0 {
                Err(format!(
                    "hold_time must be whole seconds (OPEN carries seconds, RFC 4271 §4.2), got {text}"
                ))
            } else if !t.is_zero() && t < MIN_HOLD_TIME {
                // RFC 4271 §4.2: "The Hold Time MUST be either zero or at
                // least three seconds."
                Err(format!(
                    "hold_time must be 0s or at least 3s (RFC 4271 §4.2), got {text}"
                ))
            } else if t > MAX_HOLD_TIME {
                Err(format!(
                    "hold_time must be at most 65535s (16 bits in OPEN, RFC 4271 §4.2), got {text}"
                ))
            } else {
                Ok(())
            }
        }),
    };

    let keepalive = match table.get("keepalive") {
        // RFC 4271 §10 suggests one third of the hold time.
        None => hold_time.map(|h| h / 3),
        Some(v) => tree::duration_checked(v, "keepalive", d, |k| {
            // Without a valid hold_time there is nothing to check against
            // (its own error is reported).
            let Some(h) = hold_time else { return Ok(()) };
            let (k_text, h_text) = (format_duration(k), format_duration(h));
            if h.is_zero() && !k.is_zero() {
                // RFC 4271 §4.4: with a zero hold time, periodic
                // KEEPALIVE messages MUST NOT be sent.
                Err(format!(
                    "keepalive ({k_text}) must be 0s when hold_time is 0s (RFC 4271 §4.4: no KEEPALIVEs without a hold time)"
                ))
            } else if k > h {
                Err(format!(
                    "keepalive ({k_text}) must not exceed hold_time ({h_text})"
                ))
            } else if k.is_zero() && !h.is_zero() {
                Err(format!(
                    "keepalive 0s would let the router's hold timer ({h_text}) expire; 0s is only allowed with hold_time 0s"
                ))
            } else {
                Ok(())
            }
        }),
    };
    (hold_time, keepalive)
}

fn families(v: &Value<'_>, d: &mut Diagnostics) -> Option<Vec<Family>> {
    let describe = |f: &Family| format!("\"{}\"", f.as_str());
    let families = tree::unique_list(
        v,
        "families",
        d,
        |item, d| {
            let text = tree::string(item, "each of families", d)?;
            let family = match text {
                "ipv4-unicast" => Family::Ipv4Unicast,
                "ipv6-unicast" => Family::Ipv6Unicast,
                _ => {
                    let known = ["ipv4-unicast", "ipv6-unicast"];
                    let hint = match tree::did_you_mean(text, &known) {
                        Some(s) => format!("; did you mean \"{s}\"?"),
                        None => format!("; supported: {}", tree::quoted_list(&known)),
                    };
                    d.error(&item.span(), format!("unsupported family \"{text}\"{hint}"));
                    return None;
                }
            };
            Some(family)
        },
        describe,
    )?;
    if families.is_empty() {
        d.error(
            &v.span(),
            "families is empty; list at least one of \"ipv4-unicast\", \"ipv6-unicast\" (or remove the key for both)",
        );
        return None;
    }
    Some(families)
}

/// RFC 9494 §3: the Long-Lived Stale Time field is 24 bits of seconds.
pub const LLGR_MAX_STALE_TIME: u64 = 0x00ff_ffff;

/// Keys of `graceful_restart`.
pub(crate) const GRACEFUL_RESTART_KEYS: &[Key] = &[
    Key {
        name: "enabled",
        kind: "boolean",
        default: DefaultValue::Value(|| GracefulRestart::default().enabled.to_string()),
        range: Range::Any,
        meaning: "Advertise the Graceful Restart capability (RFC 4724). After every (re)establishment the routes are sent at once, and End-of-RIB once the source has given its first complete view and its VIPs have had their `advertise_delay`: a restarted holdfast never makes the router drop its stale routes early.",
    },
    Key {
        name: "restart_time",
        kind: "duration",
        default: DefaultValue::Value(|| duration(GracefulRestart::default().restart_time)),
        range: Range::Text(|| {
            format!(
                "{}..={}, whole seconds",
                seconds(Duration::ZERO),
                seconds(MAX_RESTART_TIME)
            )
        }),
        meaning: "How long the router should keep our routes while we restart (a 12-bit field, RFC 4724 §3).",
    },
    Key {
        name: "notification",
        kind: "boolean",
        default: DefaultValue::Value(|| GracefulRestart::default().notification.to_string()),
        range: Range::Any,
        meaning: "N bit (RFC 8538): graceful restart also applies after a NOTIFICATION.",
    },
    Key {
        name: "forwarding_state",
        kind: "boolean",
        default: DefaultValue::Value(|| GracefulRestart::default().forwarding_state.to_string()),
        range: Range::Any,
        meaning: "F bit (RFC 4724 §3): forwarding state is preserved across our restart.",
    },
    Key {
        name: "long_lived_stale_time",
        kind: "duration",
        default: DefaultValue::Text("none (no LLGR)"),
        range: Range::Text(|| format!("\"1s\"..=\"{LLGR_MAX_STALE_TIME}s\", whole seconds")),
        meaning: "Long-lived graceful restart (RFC 9494): advertise the LLGR capability (code 71) for each family with this stale time, whole seconds 1s..=16777215s (24 bits, §3). When `restart_time` runs out before holdfast is back, a router that supports LLGR keeps our routes this much longer, marked LLGR_STALE (community 65535:6) and least preferred (§4.3), instead of dropping them. Needs graceful restart (§4.2: an error with `enabled = false`). See *Long-lived graceful restart*.",
    },
];

/// The reference's section for these keys.
pub(crate) const GRACEFUL_RESTART_SECTION: Section = Section {
    title: "`[[peer]] graceful_restart`",
    intro: "Graceful restart (RFC 4724), an inline table of a `[[peer]]`: `graceful_restart = { enabled = true, restart_time = \"120s\" }`. Left out: every key at its default.",
    keys: GRACEFUL_RESTART_KEYS,
};

/// Keys of `bfd`.
pub(crate) const BFD_KEYS: &[Key] = &[
    Key {
        name: "enabled",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_BFD_ENABLED.to_string()),
        range: Range::Any,
        meaning: "Run BFD for this peer.",
    },
    Key {
        name: "min_rx",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Bfd::default().min_rx)),
        range: Range::Text(|| format!("above 0, at most {}µs", MAX_BFD_INTERVAL.as_micros())),
        meaning: "Required Min RX Interval (a 32-bit count of microseconds, RFC 5880 §4.1).",
    },
    Key {
        name: "min_tx",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Bfd::default().min_tx)),
        range: Range::Text(|| format!("above 0, at most {}µs", MAX_BFD_INTERVAL.as_micros())),
        meaning: "Desired Min TX Interval.",
    },
    Key {
        name: "multiplier",
        kind: "integer",
        default: DefaultValue::Value(|| Bfd::default().multiplier.to_string()),
        range: Range::Int(BFD_MULTIPLIER),
        meaning: "Detect Mult (RFC 5880 §6.8.1: not zero).",
    },
    Key {
        name: "multihop",
        kind: "boolean",
        default: DefaultValue::Value(|| Bfd::default().multihop.to_string()),
        range: Range::Any,
        meaning: "Multihop BFD (RFC 5883) instead of single-hop (RFC 5881). Needs `bfd.authentication`: a keyed type, or `\"none\"` stated (see *BFD*); without it `check` and `run` refuse the config at this key.",
    },
    Key {
        name: "authentication",
        kind: "string",
        default: DefaultValue::Text("none"),
        range: Range::Text(bfd_authentication_choices),
        meaning: "BFD authentication (RFC 5880 §6.7): `\"meticulous-keyed-sha1\"`, `\"keyed-sha1\"`, `\"meticulous-keyed-md5\"`, `\"keyed-md5\"`, `\"simple-password\"`, or `\"none\"`. With a keyed type every packet holdfast sends is signed with the key of `key_file`, and a received packet without the Authentication Section, with another Auth Type or Key ID, a wrong digest or a sequence number outside the window (§6.7.3/§6.7.4: up to 3 × `multiplier` ahead; meticulous: strictly increasing) is discarded and counted (`holdfast_peer_bfd_discarded_total`). Absent means none, which only single-hop BFD may leave unsaid.",
    },
    Key {
        name: "key_id",
        kind: "integer",
        default: DefaultValue::Value(|| DEFAULT_BFD_KEY_ID.to_string()),
        range: Range::Int(BFD_KEY_ID),
        meaning: "Auth Key ID: the router's ID for the same key (BIRD numbers a session's passwords from 1). Only with a keyed `authentication`.",
    },
    Key {
        name: "key_file",
        kind: "path",
        default: DefaultValue::Text("none"),
        range: Range::Text(bfd_key_file_range),
        meaning: "The file holding the key; required with a keyed `authentication`. Read like `password_file` (trailing newlines stripped). A changed key restarts just that peer on reload.",
    },
];

/// The reference's section for these keys.
pub(crate) const BFD_SECTION: Section = Section {
    title: "`[[peer]] bfd`",
    intro: "BFD liveness detection (RFC 5880), an inline table of a `[[peer]]`: `bfd = { min_rx = \"100ms\", min_tx = \"100ms\", multiplier = 3 }`, `bfd = { multihop = true, authentication = \"meticulous-keyed-sha1\", key_file = \"bfd/tor1\" }`. Present means enabled unless `enabled = false`.",
    keys: BFD_KEYS,
};

fn graceful_restart(v: &Value<'_>, d: &mut Diagnostics) -> Option<GracefulRestart> {
    let table = Table::from_value(
        v,
        "graceful_restart",
        "[[peer]] graceful_restart".to_string(),
        d,
    )?;
    table.reject_unknown_keys(GRACEFUL_RESTART_KEYS, d);
    let defaults = GracefulRestart::default();
    let flag = |key: &str, default: bool, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::boolean(v, key, d),
    };
    let enabled = flag("enabled", defaults.enabled, d);
    let notification = flag("notification", defaults.notification, d);
    let forwarding_state = flag("forwarding_state", defaults.forwarding_state, d);
    let restart_time = match table.get("restart_time") {
        None => Some(defaults.restart_time),
        Some(v) => tree::duration_checked(v, "restart_time", d, |t| {
            // RFC 4724 §3: Restart Time is a 12-bit count of seconds.
            if t.subsec_nanos() != 0 || t > MAX_RESTART_TIME {
                return Err(format!(
                    "restart_time must be whole seconds in 0s..={}s (12 bits, RFC 4724 §3), got {}",
                    MAX_RESTART_TIME.as_secs(),
                    format_duration(t)
                ));
            }
            Ok(())
        }),
    };
    let long_lived_stale_time = match table.get("long_lived_stale_time") {
        None => Some(None),
        Some(v) => tree::duration_checked(v, "long_lived_stale_time", d, |t| {
            // RFC 9494 §3: the Long-Lived Stale Time is 24 bits of seconds.
            if t.subsec_nanos() != 0 || t.is_zero() || t.as_secs() > LLGR_MAX_STALE_TIME {
                return Err(format!(
                    "long_lived_stale_time must be whole seconds in 1s..={LLGR_MAX_STALE_TIME}s (24 bits, RFC 9494 §3), got {}",
                    format_duration(t)
                ));
            }
            Ok(())
        })
        .map(Some),
    };
    // RFC 9494 §4.2: LLGR is advertised only together with the Graceful
    // Restart capability.
    if let (Some(false), Some(Some(_)), Some(v)) = (
        enabled,
        long_lived_stale_time,
        table.get("long_lived_stale_time"),
    ) {
        d.error(
            &v.span(),
            "long_lived_stale_time needs graceful restart: RFC 9494 §4.2 sends the long-lived capability only beside the Graceful Restart one (enabled = false here)",
        );
        return None;
    }
    Some(GracefulRestart {
        enabled: enabled?,
        restart_time: restart_time?,
        notification: notification?,
        forwarding_state: forwarding_state?,
        long_lived_stale_time: long_lived_stale_time?,
    })
}

fn bfd(v: &Value<'_>, cx: &PeerContext<'_>, d: &mut Diagnostics) -> Option<Option<Bfd>> {
    let table = Table::from_value(v, "bfd", "[[peer]] bfd".to_string(), d)?;
    table.reject_unknown_keys(BFD_KEYS, d);
    let defaults = Bfd::default();
    let enabled = match table.get("enabled") {
        None => Some(DEFAULT_BFD_ENABLED),
        Some(v) => tree::boolean(v, "enabled", d),
    };
    // RFC 5880 §4.1: intervals are 32-bit microsecond counts; zero
    // Required Min RX would mean "send me nothing".
    let interval = |key: &str, default: Duration, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::duration_checked(v, key, d, |t| {
            if t.is_zero() || t > MAX_BFD_INTERVAL {
                return Err(format!(
                    "{key} must be more than 0s and at most 4294s (32 bits of microseconds, RFC 5880 §4.1), got {}",
                    format_duration(t)
                ));
            }
            Ok(())
        }),
    };
    let min_rx = interval("min_rx", defaults.min_rx, d);
    let min_tx = interval("min_tx", defaults.min_tx, d);
    // RFC 5880 §6.8.1: bfd.DetectMult is non-zero.
    let multiplier = match table.get("multiplier") {
        None => Some(defaults.multiplier),
        Some(v) => tree::integer_in(v, "multiplier", BFD_MULTIPLIER, d),
    };
    let multihop = match table.get("multihop") {
        None => Some(defaults.multihop),
        Some(v) => tree::boolean(v, "multihop", d),
    };
    let authentication = bfd_authentication(&table, cx, d);
    // RFC 5883 has no TTL check (RFC 5881 §5's GTSM is single-hop's): any
    // host that reaches UDP 4784 could forge this session's packets, and
    // so take the BGP session down or hold it up. Unauthenticated only
    // when the operator says so.
    if let (Some(true), Some(None), Some(m)) = (multihop, &authentication, table.get("multihop")) {
        d.error(
            &m.span(),
            "multihop BFD without authentication: multihop BFD (RFC 5883) has no TTL check, so anyone who reaches UDP 4784 can forge its packets and take the BGP session down or hold it up; set authentication = \"meticulous-keyed-sha1\" and key_file (RFC 5880 §6.7), or state authentication = \"none\" to run it unauthenticated",
        );
        return None;
    }
    let bfd = Bfd {
        min_rx: min_rx?,
        min_tx: min_tx?,
        multiplier: multiplier?,
        multihop: multihop?,
        authentication: authentication?.unwrap_or(BfdAuthentication::None),
    };
    Some(enabled?.then_some(bfd))
}

/// `authentication`, `key_id` and `key_file` of `bfd`: `Some(None)` when
/// `authentication` is absent.
fn bfd_authentication(
    table: &Table<'_, '_>,
    cx: &PeerContext<'_>,
    d: &mut Diagnostics,
) -> Option<Option<BfdAuthentication>> {
    let known: Vec<&str> = std::iter::once("none")
        .chain(AuthType::ALL.iter().map(|t| t.as_str()))
        .collect();
    let auth_type = match table.get("authentication") {
        None => None,
        Some(v) => {
            let text = tree::string(v, "authentication", d)?;
            match AuthType::ALL.into_iter().find(|t| t.as_str() == text) {
                Some(t) => Some(Some(t)),
                None if text == "none" => Some(None),
                None => {
                    let hint = match tree::did_you_mean(text, &known) {
                        Some(s) => format!("; did you mean \"{s}\"?"),
                        None => format!("; one of {}", tree::quoted_list(&known)),
                    };
                    d.error(
                        &v.span(),
                        format!("unknown BFD authentication \"{text}\"{hint}"),
                    );
                    return None;
                }
            }
        }
    };
    let Some(Some(auth_type)) = auth_type else {
        // No key: key_id and key_file have nothing to do.
        for key in ["key_id", "key_file"] {
            if let Some(v) = table.get(key) {
                d.error(
                    &v.span(),
                    format!(
                        "{key} needs authentication set to a keyed type ({})",
                        tree::quoted_list(&known[1..])
                    ),
                );
                return None;
            }
        }
        return Some(auth_type.map(|_| BfdAuthentication::None));
    };
    // RFC 5880 §4.1: the Auth Key ID is one octet. 1 is BIRD's first key.
    let key_id = match table.get("key_id") {
        None => Some(DEFAULT_BFD_KEY_ID),
        Some(v) => tree::integer_in(v, "key_id", BFD_KEY_ID, d),
    };
    let Some(v) = table.get("key_file") else {
        let at = table
            .get("authentication")
            .map_or(table.span(), |v| v.span());
        d.error(
            &at,
            format!(
                "authentication = \"{}\" needs key_file, the file holding the key (1 to {} bytes)",
                auth_type.as_str(),
                auth_type.max_key_len()
            ),
        );
        return None;
    };
    let file = tree::secret_file_path(v, "key_file", "key", cx.config_dir, d)?;
    let key = if cx.read_passwords {
        let limit = MAX_BFD_KEY_FILE_LEN;
        let contents = match super::read::read_regular_file(&file, limit) {
            Ok(c) => c,
            Err(problem) => {
                d.error(
                    &v.span(),
                    format!(
                        "key_file {}: {}",
                        file.display(),
                        problem.describe("BFD key file", limit)
                    ),
                );
                return None;
            }
        };
        match BfdKey::new(
            auth_type,
            key_id?,
            super::read::without_line_breaks(&contents),
        ) {
            Ok(k) => Some(k),
            Err(why) => {
                d.error(&v.span(), format!("key_file {} {why}", file.display()));
                return None;
            }
        }
    } else {
        None
    };
    Some(Some(BfdAuthentication::Key {
        auth_type,
        key_id: key_id?,
        file,
        key,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_key_strips_newlines_and_checks_length() {
        assert_eq!(
            Md5Key::from_file_contents(b"s3cret\n").map(|k| k.as_bytes().to_vec()),
            Ok(b"s3cret".to_vec())
        );
        assert_eq!(
            Md5Key::from_file_contents(b"s3cret\r\n").map(|k| k.as_bytes().to_vec()),
            Ok(b"s3cret".to_vec())
        );
        assert!(Md5Key::from_file_contents(b"\n").is_err());
        assert!(Md5Key::from_file_contents(&[b'k'; 80]).is_ok());
        assert!(Md5Key::from_file_contents(&[b'k'; 81]).is_err());
    }

    #[test]
    fn md5_key_debug_hides_the_key() {
        let key = Md5Key::from_file_contents(b"hunter2").expect("valid key");
        assert_eq!(format!("{key:?}"), "Md5Key(<7 bytes>)");
    }
}

//! `[speaker]`: this node's BGP identity and local endpoints.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::read::FileProblem;
use super::schema::{DefaultValue, IntRange, Key, Range, Section, duration, quoted};
use super::selector::{LabelSelector, dns_subdomain_problem, label_key_problem, parse_selector};
use super::tree::{self, Table, Value};

/// The default address of the metrics/health/status API.
pub const DEFAULT_API: &str = "127.0.0.1:9179";

/// `[speaker]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Speaker {
    /// Our autonomous system number (4-octet, RFC 6793). Required.
    pub asn: u32,
    /// BGP Identifier (RFC 4271 §4.2); "auto" picks $NODE_IP, else the
    /// first global IPv4 address of the node, else (an IPv6-only node) one
    /// derived from the node name ([`super::derived_router_id`]).
    pub router_id: RouterId,
    /// Address of the HTTP API (metrics, health, status).
    pub api: SocketAddr,
    /// The token that lets a TCP client of `api` make state-changing calls
    /// (drain, undrain); without one they are served only on the Unix
    /// socket in the state directory.
    pub api_token: Option<ApiToken>,
    /// A second listener with `/metrics` and health only, so a scraper on
    /// the network needs no access to status and explain.
    pub metrics: Option<SocketAddr>,
    /// Address to accept BGP connections on (the passive side); none means
    /// holdfast only connects out.
    pub listen: Option<SocketAddr>,
    /// This node's name where `$NODE_NAME` is not set; none means the
    /// system hostname ([`node_name`] is the rule).
    pub hostname: Option<String>,
    /// Only nodes whose labels match advertise anything; none means every
    /// node.
    pub node_selector: Option<LabelSelector>,
    /// Withdraw everything at once, without hold-down, when the node is
    /// cordoned (a drain is deliberate), so traffic drains before
    /// maintenance.
    pub drain_on_cordon: bool,
    /// Taint keys that drain the node like a cordon, whatever their value
    /// and effect: the operator's own maintenance signals. Taints not
    /// listed never drain (the node lifecycle controller's automatic
    /// `not-ready` and `unreachable` cannot be listed).
    pub drain_taints: Vec<String>,
    /// RFC 8326: before a planned withdrawal (`holdfast drain`, a cordon,
    /// SIGTERM without graceful restart) the routes carry GRACEFUL_SHUTDOWN
    /// this long; zero withdraws at once.
    pub graceful_shutdown_wait: Duration,
}

/// NoExecute taints the node lifecycle controller adds on its own when a
/// node stops reporting. They say nothing about the datapath (a kubelet
/// that lost the API server still forwards), so they never drain; pods that
/// really go away are seen through their endpoints.
pub const AUTOMATIC_TAINTS: &[&str] = &[
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
];

/// `graceful_shutdown_wait`'s default.
pub const DEFAULT_GRACEFUL_SHUTDOWN_WAIT: Duration = Duration::from_secs(15);
/// The longest `graceful_shutdown_wait`: a drain is minutes at most, and the
/// DaemonSet's terminationGracePeriodSeconds has to cover it.
pub const MAX_GRACEFUL_SHUTDOWN_WAIT: Duration = Duration::from_secs(3600);

/// `api_token_file`: the file, and the token it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiToken {
    /// The file, relative paths resolved against the config file's
    /// directory.
    pub file: PathBuf,
    /// The token: read by `load`; `None` after `parse`, which never
    /// touches the file system. A changed token is a changed config, so a
    /// reload (SIGHUP) applies it.
    pub token: Option<BearerToken>,
}

/// The largest `api_token_file` read: a token and its line break.
pub const MAX_API_TOKEN_FILE_LEN: u64 = 4096;
/// The shortest token taken: a guessable token is no lock.
pub const MIN_API_TOKEN_LEN: usize = 16;

/// A bearer token (RFC 6750 §2.1, `b64token`): letters, digits and
/// `-._~+/`, then optional `=` padding. Its Debug output hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct BearerToken(Vec<u8>);

impl BearerToken {
    /// A token from a token file's contents: one line, its line break
    /// (LF or CR LF) removed. The rules are those of the
    /// `Authorization: Bearer` header (RFC 6750 §2.1), so whatever the file
    /// holds can be sent as it is.
    pub fn from_file_contents(contents: &[u8]) -> Result<Self, String> {
        let token = contents
            .strip_suffix(b"\r\n")
            .or_else(|| contents.strip_suffix(b"\n"))
            .unwrap_or(contents);
        if token.is_empty() {
            return Err(
                "is empty; it must hold one token (e.g. from `openssl rand -base64 32`)".into(),
            );
        }
        let body_end = token.len() - token.iter().rev().take_while(|&&b| b == b'=').count();
        let bad = token.iter().enumerate().find(|&(i, &b)| {
            let b64 =
                b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/');
            !(b64 && i < body_end || b == b'=' && i >= body_end)
        });
        if let Some((i, &b)) = bad {
            let shown = if b.is_ascii_graphic() {
                format!("'{}'", b as char)
            } else {
                format!("byte 0x{b:02x}")
            };
            return Err(format!(
                "holds {shown} at offset {i}; a token is one line of letters, digits and -._~+/ with optional = padding at the end (RFC 6750 §2.1), as `openssl rand -base64 32` writes"
            ));
        }
        if body_end == 0 {
            return Err("holds only '=' padding; it must hold a token".into());
        }
        if token.len() < MIN_API_TOKEN_LEN {
            return Err(format!(
                "holds a token of {} characters; it must be at least {MIN_API_TOKEN_LEN} (e.g. from `openssl rand -base64 32`)",
                token.len()
            ));
        }
        Ok(BearerToken(token.to_vec()))
    }

    /// The token, as sent after `Bearer `.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BearerToken(<{} bytes>)", self.0.len())
    }
}

/// Reads a token file with the operator-file rules (`read_regular_file`:
/// a regular file, bounded, never a blocking read); the error says what is
/// wrong in words that follow the file's name.
pub fn read_token_file(file: &Path) -> Result<BearerToken, String> {
    match super::read::read_regular_file(file, MAX_API_TOKEN_FILE_LEN) {
        Err(FileProblem::Io(e)) => Err(format!("cannot be read: {e}")),
        Err(FileProblem::NotRegular(kind)) => Err(format!(
            "is {kind}, not a regular file; it must be a regular file of at most {MAX_API_TOKEN_FILE_LEN} bytes"
        )),
        Err(FileProblem::TooLarge(_)) => Err(format!(
            "is larger than {MAX_API_TOKEN_FILE_LEN} bytes; it holds one token and a line break"
        )),
        Ok(contents) => BearerToken::from_file_contents(&contents),
    }
}

/// How the BGP Identifier is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouterId {
    /// $NODE_IP if it is IPv4, else the first global IPv4 address, else
    /// one derived from the node name.
    Auto,
    /// This address.
    Fixed(Ipv4Addr),
}

/// `drain_on_cordon` when left out.
pub const DEFAULT_DRAIN_ON_CORDON: bool = true;

/// An AS number: 1..=4294967295 (4-octet, RFC 6793); 0 is reserved (RFC
/// 7607).
pub(crate) const ASN: IntRange = IntRange {
    min: 1,
    max: u32::MAX as i128,
};

/// "1..=4294967295, not 23456": the AS numbers [`asn`] takes.
pub(crate) fn asn_range() -> String {
    format!(
        "{}..={}, not {} (AS_TRANS)",
        ASN.min,
        ASN.max,
        bgp_proto::consts::AS_TRANS
    )
}

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "asn",
        kind: "integer",
        default: DefaultValue::Required,
        range: Range::Text(asn_range),
        meaning: "Our AS number (4-octet, RFC 6793). AS_TRANS, the placeholder for a 4-octet AS in 2-octet fields (RFC 6793 §9), is not an AS.",
    },
    Key {
        name: "router_id",
        kind: "string",
        default: DefaultValue::Text("`\"auto\"`"),
        range: Range::Any,
        meaning: "BGP Identifier: an IPv4 address (not 0.0.0.0, RFC 6286), or `\"auto\"` for `$NODE_IP`, else the node's first global IPv4 address, else (a node without IPv4: IPv6-only clusters) an ID derived from the node name — see *Router IDs without IPv4*.",
    },
    Key {
        name: "api",
        kind: "address:port",
        default: DefaultValue::Value(|| quoted(DEFAULT_API)),
        range: Range::Any,
        meaning: "HTTP API: metrics, health, status and explain. IPv6 as `\"[::1]:9179\"`. Not IPv4-mapped. In Kubernetes it must answer on 127.0.0.1:9179, where the shipped DaemonSet's probes call: the default (or a wildcard `\"0.0.0.0:9179\"` / `\"[::]:9179\"`), not the node's own address nor another port, unless an overlay moves the probes too (a warning otherwise). Keep it on loopback (a warning otherwise: status and explain tell whoever reaches them every peer and route): on TCP the state-changing calls (`POST /v1/drain`, `/v1/undrain`) are refused (403) unless `api_token_file` is set; `holdfast drain` uses the state directory's Unix socket instead (see *The API socket and the token*). To scrape from the network, use `metrics`, not `api`.",
    },
    Key {
        name: "api_token_file",
        kind: "path",
        default: DefaultValue::Text("none"),
        range: Range::Text(|| {
            format!(
                "a regular file of at most {MAX_API_TOKEN_FILE_LEN} bytes, holding a token of at least {MIN_API_TOKEN_LEN} characters"
            )
        }),
        meaning: "A file holding a bearer token (one line; letters, digits, `-._~+/`, optional `=` padding, RFC 6750 §2.1; e.g. `openssl rand -base64 32`). With it, a TCP client of `api` that sends `Authorization: Bearer TOKEN` may drain and undrain; without it, only the Unix socket can. Relative paths are resolved against the config file's directory. Read with the config, like a `password_file`, at start and on every reload: SIGHUP applies a new token. See *The API socket and the token*.",
    },
    Key {
        name: "metrics",
        kind: "address:port",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "A second listener serving `/metrics`, `/healthz` and `/readyz` only (status and explain answer 404 there), so Prometheus can scrape from the network while `api` stays on loopback: `\"0.0.0.0:9180\"`. Must differ from `api`; `api`, `metrics` and `listen` may not share a port where one address covers the other (`0.0.0.0:9179` covers `127.0.0.1:9179`, and `[::]` covers IPv4 too): the daemon could not bind both. A reload that moves it binds the new address before the old one closes (one that cannot be bound refuses the reload); one that removes it closes it.",
    },
    Key {
        name: "listen",
        kind: "address:port",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "Accept BGP connections here (the passive side). Without it holdfast only connects out. Required if any peer is `passive`. Not IPv4-mapped (`\"[::ffff:192.0.2.10]:179\"` is written `\"192.0.2.10:179\"`).",
    },
    Key {
        name: "hostname",
        kind: "string",
        default: DefaultValue::Text("the system hostname"),
        range: Range::Any,
        meaning: "This node's name (a DNS subdomain) where `$NODE_NAME` is not set: `$NODE_NAME` comes first (see *The node's name*). For running outside Kubernetes; with the Kubernetes source a warning.",
    },
    Key {
        name: "node_selector",
        kind: "label selector",
        default: DefaultValue::Text("none (every node)"),
        range: Range::Any,
        meaning: "Only nodes whose labels match advertise anything.",
    },
    Key {
        name: "drain_on_cordon",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_DRAIN_ON_CORDON.to_string()),
        range: Range::Any,
        meaning: "When the node is cordoned (`spec.unschedulable`), withdraw everything without hold-down (after `graceful_shutdown_wait` with GRACEFUL_SHUTDOWN): a drain is deliberate. See *Which nodes*.",
    },
    Key {
        name: "drain_taints",
        kind: "array of taint keys",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "Taints that drain the node like a cordon, whatever their value and effect: your own maintenance signals, e.g. `[\"example.com/maintenance\"]`. Taints not listed never drain, `NoExecute` or not; `node.kubernetes.io/not-ready` and `node.kubernetes.io/unreachable` (added by the node lifecycle controller on its own) are refused. Independent of `drain_on_cordon`.",
    },
    Key {
        name: "graceful_shutdown_wait",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_GRACEFUL_SHUTDOWN_WAIT)),
        range: Range::Text(|| format!("at most {}", duration(MAX_GRACEFUL_SHUTDOWN_WAIT))),
        meaning: "RFC 8326 graceful shutdown: before a planned withdrawal (`holdfast drain`, the node cordoned or excluded, SIGTERM when graceful restart will not keep the routes) the routes are re-advertised with GRACEFUL_SHUTDOWN (65535:0), and LOCAL_PREF 0 to iBGP peers, for this long, then withdrawn. `\"0s\"` withdraws at once.",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[speaker]` (required)",
    intro: "",
    keys: KEYS,
};

/// True when sockets bound to `a` and `b` would conflict: the same port
/// (not 0, which the kernel picks) and the same address, or a wildcard
/// covering the other (IPv4's covers IPv4 addresses; IPv6's, dual-stack as
/// Linux binds it by default, every address).
fn sockets_overlap(a: SocketAddr, b: SocketAddr) -> bool {
    let covers =
        |w: SocketAddr, o: SocketAddr| w.ip().is_unspecified() && (w.is_ipv6() || o.is_ipv4());
    a.port() == b.port() && a.port() != 0 && (a.ip() == b.ip() || covers(a, b) || covers(b, a))
}

/// Reads an AS number, 1..=4294967295. AS 0 is reserved (RFC 7607) and
/// must not be used in an OPEN; AS_TRANS is not an AS either.
pub(crate) fn asn(value: &Value<'_>, key: &str, d: &mut Diagnostics) -> Option<u32> {
    let asn = tree::integer_in(value, key, ASN, d)?;
    // RFC 6793 §9: AS_TRANS (23456) is the placeholder a 4-octet AS number
    // is written as in 2-octet fields; as a speaker's or peer's own AS it
    // would be indistinguishable from that placeholder.
    if asn == u32::from(bgp_proto::consts::AS_TRANS) {
        d.error(
            &value.span(),
            format!(
                "{key} must not be {}: that is AS_TRANS, the placeholder for a 4-octet AS number in 2-octet fields (RFC 6793 §9), not an AS",
                bgp_proto::consts::AS_TRANS
            ),
        );
        return None;
    }
    Some(asn)
}

/// Reads `router_id`: "auto" or a non-zero IPv4 address.
pub(crate) fn router_id(v: &Value<'_>, d: &mut Diagnostics) -> Option<RouterId> {
    let text = tree::string(v, "router_id", d)?;
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
}

/// `[speaker]`; `config_dir` is the base of relative paths, and the token
/// file is read only with `read_files`.
pub(crate) fn parse_speaker(
    table: &Table<'_, '_>,
    config_dir: &Path,
    read_files: bool,
    d: &mut Diagnostics,
) -> Option<Speaker> {
    table.reject_unknown_keys(KEYS, d);
    let context = table.context.clone();

    let asn = table.required("asn", d).and_then(|v| asn(v, "asn", d));

    let router_id = match table.get("router_id") {
        None => Some(RouterId::Auto),
        Some(v) => router_id(v, d),
    };

    let api = match table.get("api") {
        None => DEFAULT_API.parse().ok(),
        Some(v) => tree::socket_address(v, "api", d),
    };

    let api_token = match table.get("api_token_file") {
        None => Some(None),
        Some(v) => api_token(v, config_dir, read_files, d).map(Some),
    };

    let metrics = match table.get("metrics") {
        None => Some(None),
        Some(v) => tree::socket_address(v, "metrics", d).and_then(|addr| {
            // One socket cannot serve both: the daemon would fail to bind.
            if api.is_some_and(|api| api == addr) {
                d.error(
                    &v.span(),
                    format!(
                        "metrics must differ from api ({addr}): api already serves /metrics; leave metrics out, or give it another port"
                    ),
                );
                return None;
            }
            Some(Some(addr))
        }),
    };

    let listen = match table.get("listen") {
        None => Some(None),
        Some(v) => tree::socket_address(v, "listen", d).map(Some),
    };
    // The daemon binds all three; two that take the same port on
    // overlapping addresses cannot both be bound, and `run` would refuse.
    let sockets = [
        ("api", api, table.get("api")),
        ("metrics", metrics.flatten(), table.get("metrics")),
        ("listen", listen.flatten(), table.get("listen")),
    ];
    for (i, (key, addr, value)) in sockets.iter().enumerate() {
        let (Some(addr), Some(value)) = (addr, value) else {
            continue;
        };
        if let Some((other, other_addr, _)) = sockets[..i]
            .iter()
            .find(|(_, o, _)| o.is_some_and(|o| sockets_overlap(o, *addr)))
        {
            let other_addr = other_addr.map(|a| a.to_string()).unwrap_or_default();
            d.error(
                &value.span(),
                format!(
                    "{key} {addr} and {other} {other_addr} cannot both be bound: same port, and one address covers the other (a wildcard takes the port on every address of its family, and [::] on IPv4 too); give {key} another port"
                ),
            );
        }
    }

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
        None => Some(DEFAULT_DRAIN_ON_CORDON),
        Some(v) => tree::boolean(v, "drain_on_cordon", d),
    };

    let drain_taints = match table.get("drain_taints") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "drain_taints",
            d,
            |item, d| {
                let text = tree::string(item, "each of drain_taints", d)?;
                if let Some(why) = label_key_problem(text) {
                    d.error(
                        &item.span(),
                        format!("taint key \"{text}\" is invalid: {why}"),
                    );
                    return None;
                }
                if AUTOMATIC_TAINTS.contains(&text) {
                    d.error(
                        &item.span(),
                        format!(
                            "taint {text} is added by the node lifecycle controller on its own, not by an operator, and cannot drain: a node that stops reporting keeps forwarding, and pods that really go away are seen through their endpoints"
                        ),
                    );
                    return None;
                }
                Some(text.to_string())
            },
            |n| format!("\"{n}\""),
        ),
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
        api_token: api_token?,
        metrics: metrics?,
        listen: listen?,
        hostname: hostname?,
        node_selector: node_selector?,
        drain_on_cordon: drain_on_cordon?,
        drain_taints: drain_taints?,
        graceful_shutdown_wait: graceful_shutdown_wait?,
    })
}

/// Where this node's name came from ([`node_name`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeNameFrom {
    /// `$NODE_NAME` (in Kubernetes, the downward API's `spec.nodeName`).
    Env,
    /// `speaker.hostname`.
    Hostname,
    /// The kernel's hostname (`/proc/sys/kernel/hostname`).
    Kernel,
    /// None of them: the fixed name `holdfast`.
    Fallback,
}

/// This node's name, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeName {
    /// The name.
    pub name: String,
    /// Which source gave it.
    pub from: NodeNameFrom,
    /// `speaker.hostname` when it is set but `$NODE_NAME` won: the daemon
    /// logs that it is not used.
    pub ignored_hostname: Option<String>,
}

/// The one rule for this node's name, used for everything a name is used
/// for: the Node object the Kubernetes source follows (its labels, cordon,
/// taints, and which endpoints are local), `[[node_override]] names`, the
/// router ID derived on a node without IPv4, the FQDN capability, status
/// and log lines. First `$NODE_NAME` (`env_node_name`), else
/// `speaker.hostname`, else the kernel's hostname, else `holdfast`; an
/// empty or blank value counts as absent.
///
/// `$NODE_NAME` comes first because in Kubernetes it is the authority (the
/// name of the Node the pod runs on), while one config file serves a whole
/// rack: a `hostname` in it would give every node the same name, and every
/// node would follow one Node's cordon and count its endpoints as local.
/// `speaker.hostname` is for running outside Kubernetes, where a name
/// other than the kernel's is wanted.
pub fn node_name(
    hostname: Option<&str>,
    env_node_name: Option<&str>,
    kernel_hostname: Option<&str>,
) -> NodeName {
    fn present(s: Option<&str>) -> Option<&str> {
        s.map(str::trim).filter(|s| !s.is_empty())
    }
    let hostname = present(hostname);
    if let Some(env) = present(env_node_name) {
        return NodeName {
            name: env.to_string(),
            from: NodeNameFrom::Env,
            ignored_hostname: hostname.filter(|h| *h != env).map(str::to_string),
        };
    }
    let (name, from) = match (hostname, present(kernel_hostname)) {
        (Some(h), _) => (h, NodeNameFrom::Hostname),
        (None, Some(k)) => (k, NodeNameFrom::Kernel),
        (None, None) => ("holdfast", NodeNameFrom::Fallback),
    };
    NodeName {
        name: name.to_string(),
        from,
        ignored_hostname: None,
    }
}

/// `api_token_file`: the path, and (with `read_files`) the token in it.
fn api_token(
    v: &Value<'_>,
    config_dir: &Path,
    read_files: bool,
    d: &mut Diagnostics,
) -> Option<ApiToken> {
    let file = tree::secret_file_path(v, "api_token_file", "token", config_dir, d)?;
    if !read_files {
        return Some(ApiToken { file, token: None });
    }
    match read_token_file(&file) {
        Ok(token) => Some(ApiToken {
            file,
            token: Some(token),
        }),
        Err(why) => {
            d.error(
                &v.span(),
                format!("api_token_file {} {why}", file.display()),
            );
            None
        }
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    #[test]
    fn a_token_is_one_b64token_line() {
        let ok = |c: &[u8]| BearerToken::from_file_contents(c).map(|t| t.as_bytes().to_vec());
        let t = b"AbCdEfGhIjKlMnOp0123456789-._~+/==";
        assert_eq!(ok(t), Ok(t.to_vec()));
        assert_eq!(ok(b"0123456789abcdef\n"), Ok(b"0123456789abcdef".to_vec()));
        assert_eq!(
            ok(b"0123456789abcdef\r\n"),
            Ok(b"0123456789abcdef".to_vec())
        );
        for (bad, why) in [
            (&b""[..], "is empty"),
            (b"\n", "is empty"),
            (b"0123456789abcde", "at least 16"),
            (b"0123456789abcdef\n\n", "byte 0x0a at offset 16"),
            (b"0123456789 abcdef", "byte 0x20 at offset 10"),
            (b"0123456789abcdef\r\nX", "byte 0x0d"),
            (b"0123456789=abcdef", "'=' at offset 10"),
            (b"0123456789abcdef:", "':' at offset 16"),
            (b"================", "only '=' padding"),
        ] {
            let e = ok(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let key = BearerToken::from_file_contents(b"0123456789abcdefSECRET").unwrap();
        assert_eq!(format!("{key:?}"), "BearerToken(<22 bytes>)");
    }
}

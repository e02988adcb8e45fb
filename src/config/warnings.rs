//! Warnings: what a valid config says that is very likely not what was
//! meant. Each is a [`Severity::Warning`](super::Severity) diagnostic at
//! the value it is about (`PATH:LINE:COL: warning: ...`); the file is still
//! accepted. `holdfast check` prints them (and fails on them with
//! `--deny-warnings`); `holdfast run` logs them at start and on every
//! reload it applies.
//!
//! They are looked for once the file has no errors, on the parsed
//! [`Config`], with the TOML tree at hand for positions. The thresholds are
//! the constants below; the docs' Warnings page (docs/src/configuration/warnings.md) lists each with its
//! reason.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use toml::de::DeValue;

use super::Config;
use super::advertisement::{Advertisement, NAMESPACE_NAME_LABEL, ServiceAttribute};
use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::node_override::NodeMatch;
use super::peer::Peer;
use super::tree::{Table, Value};

/// Where the shipped DaemonSet's liveness and readiness probes ask
/// (`deploy/base/daemonset.yaml`: `httpGet` host 127.0.0.1, port 9179).
pub const PROBED_API: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9179);

/// The shipped DaemonSet's `terminationGracePeriodSeconds`.
pub const SHIPPED_GRACE_PERIOD: Duration = Duration::from_secs(45);
/// What a shutdown takes besides `graceful_shutdown_wait`, at most: each
/// session stops within 3 s, one after another, then the API within 2 s
/// (docs/src/concepts/graceful-restart.md).
pub const SESSION_STOP: Duration = Duration::from_secs(3);
/// See [`SESSION_STOP`].
pub const API_STOP: Duration = Duration::from_secs(2);

/// GTSM (RFC 5082) accepts packets whose TTL is at least 256 −
/// `ebgp_multihop`: from more than this many hops away it admits most of a
/// network, and at 255 every packet.
pub const GTSM_MAX_HOPS: u8 = 16;

/// The shortest BFD detection time (multiplier × interval) that holdfast's
/// BFD, in user space on the one thread every session and the API share,
/// can keep without false downs: 3 × 50 ms.
pub const BFD_MIN_DETECTION: Duration = Duration::from_millis(150);

/// Aggregates shorter than these cover more addresses than a pool of VIPs
/// plausibly holds (65,536 for IPv4, a /48 site for IPv6).
pub const MIN_AGGREGATE_V4: u8 = 16;
/// See [`MIN_AGGREGATE_V4`].
pub const MIN_AGGREGATE_V6: u8 = 48;

/// Durations longer than these are almost certainly a slip of the unit
/// (`"8760h"`, `"30m"` for `"30s"`): (key, longest sane value, what the
/// value costs).
pub const LONGEST: &[(&str, Duration, &str)] = &[
    (
        "withdraw_hold_down",
        Duration::from_secs(3600),
        "a VIP whose Service or endpoints are really gone stays advertised that long, and its traffic is dropped",
    ),
    (
        "advertise_delay",
        Duration::from_secs(600),
        "a new VIP stays unreachable that long",
    ),
    (
        "delete_delay",
        Duration::from_secs(3600),
        "a deleted Service's VIP keeps attracting traffic that long",
    ),
    (
        "local_endpoint_delay",
        Duration::from_secs(300),
        "a node without a ready local endpoint keeps attracting traffic it drops that long",
    ),
    (
        "half_life",
        Duration::from_secs(2 * 3600),
        "a VIP that flapped stays penalised for many times that long",
    ),
    (
        "max_suppress",
        Duration::from_secs(6 * 3600),
        "a VIP that flapped can stay withdrawn that long after it is back",
    ),
    (
        "hold_time",
        Duration::from_secs(600),
        "a router that dies silently is noticed only after that long (unless BFD is on)",
    ),
    (
        "connect_retry",
        Duration::from_secs(600),
        "a router that comes back waits up to that long for holdfast to connect again",
    ),
    (
        "min_route_advertisement_interval",
        Duration::from_secs(300),
        "every change of a route waits up to that long before the router hears of it",
    ),
    (
        "interval",
        Duration::from_secs(60),
        "a dead backend stays advertised for fail_after probes of that interval",
    ),
    (
        "resync",
        Duration::from_secs(24 * 3600),
        "a route the watch missed stays wrong that long before the reconcile repairs it",
    ),
];

/// One step of a path into the TOML tree.
#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}
use Step::{Index, Key};

/// The value at `path` from the top level, if it is written.
fn value_at<'t, 'i>(root: &Table<'t, 'i>, path: &[Step<'_>]) -> Option<&'t Value<'i>> {
    let (first, rest) = path.split_first()?;
    let Key(first) = first else { return None };
    let mut at = root.get(first)?;
    for step in rest {
        at = match (at.get_ref(), step) {
            (DeValue::Table(t), Key(k)) => t.get(*k)?,
            (DeValue::Array(a), Index(i)) => a.get(*i)?,
            _ => return None,
        };
    }
    Some(at)
}

/// True when `path` is written in the file (not a default).
fn written(root: &Table<'_, '_>, path: &[Step<'_>]) -> bool {
    value_at(root, path).is_some()
}

/// The span of the deepest value on `path` that is written (the whole
/// file's start when not even the first step is).
fn span(root: &Table<'_, '_>, path: &[Step<'_>]) -> Range<usize> {
    (1..=path.len())
        .rev()
        .find_map(|n| value_at(root, &path[..n]))
        .map_or(0..0, |v| v.span())
}

/// Records every warning the config deserves.
pub(crate) fn find(config: &Config, root: &Table<'_, '_>, d: &mut Diagnostics) {
    speaker(config, root, d);
    for (i, peer) in config.peers.iter().enumerate() {
        peer_warnings(config, i, peer, root, d);
    }
    // The implicit default advertisement is not in the file.
    if root.contains("advertisement") {
        for (i, adv) in config.advertisements.iter().enumerate() {
            advertisement(config, i, adv, root, d);
        }
    }
    stability(root, d);
    too_long(
        "resync",
        config.resync,
        &[Key("source"), Key("resync")],
        root,
        d,
    );
    if config.kubernetes_source().is_none() {
        for (i, o) in config.node_overrides.iter().enumerate() {
            if let NodeMatch::Selector(_) = o.matcher {
                let at = span(
                    root,
                    &[Key("node_override"), Index(i), Key("node_selector")],
                );
                d.warning(
                    &at,
                    "this node_override selects nodes by label, which the file source does not know: it never applies; pick the nodes with names = [...]",
                );
            }
        }
    }
}

/// Reads each probe's `ca_file` (the config load does when it reads the
/// `password_file`s: `holdfast check` without `--skip-password-files`, and
/// `holdfast run` at start and on reload): one that cannot be used is a
/// warning, not an error, since the probe reads it again before each
/// request and fails with the same reason until it is fixed (a CA that
/// appears or is rotated later is picked up without a reload).
pub(crate) fn ca_files(config: &Config, root: &Table<'_, '_>, d: &mut Diagnostics) {
    if !root.contains("advertisement") {
        return;
    }
    for (i, a) in config.advertisements.iter().enumerate() {
        let Some(super::Probe {
            target:
                super::ProbeTarget::Http {
                    ca_file: Some(path),
                    ..
                },
            ..
        }) = &a.probe
        else {
            continue;
        };
        if let Err(why) = super::http_probe::load_ca_file(path) {
            let at = span(
                root,
                &[Key("advertisement"), Index(i), Key("probe"), Key("ca_file")],
            );
            d.warning(
                &at,
                format!(
                    "{why}; its probe fails with this reason until the file is fixed (it is read again before every probe)"
                ),
            );
        }
    }
}

fn too_long(
    key: &str,
    value: Duration,
    path: &[Step<'_>],
    root: &Table<'_, '_>,
    d: &mut Diagnostics,
) {
    let Some((_, limit, cost)) = LONGEST.iter().find(|(k, _, _)| *k == key) else {
        return;
    };
    if value > *limit && written(root, path) {
        d.warning(
            &span(root, path),
            format!(
                "{key} {} is longer than {}: {cost}; is the unit right?",
                format_duration(value),
                format_duration(*limit)
            ),
        );
    }
}

fn speaker(config: &Config, root: &Table<'_, '_>, d: &mut Diagnostics) {
    let s = &config.speaker;
    let kubernetes = config.kubernetes_source().is_some();
    let at = |key: &str| span(root, &[Key("speaker"), Key(key)]);
    let api = s.api;
    if !api.ip().is_loopback() {
        d.warning(
            &at("api"),
            format!(
                "api {api} is not a loopback address: anyone who can reach it reads /v1/status (every peer with its address, AS and session state, every route and why it is or is not advertised, the config's errors) and /v1/explain; keep api on 127.0.0.1 and give a scraper speaker.metrics, which serves /metrics and health only"
            ),
        );
    }
    // With hostNetwork the kubelet's probes reach 127.0.0.1:9179 on the
    // node: a wildcard address of either family (the IPv6 one is
    // dual-stack unless net.ipv6.bindv6only is set) serves it too.
    let probed = api.port() == PROBED_API.port()
        && (api.ip() == PROBED_API.ip() || api.ip().is_unspecified());
    if kubernetes && !probed {
        d.warning(
            &at("api"),
            format!(
                "api {api} is not where the shipped DaemonSet's probes ask (http://{PROBED_API}/healthz and /readyz, deploy/base/daemonset.yaml): the pod never becomes ready and the kubelet restarts it after three failed liveness probes; change the probes' host and port with an overlay patch too, or keep api on {PROBED_API}"
            ),
        );
    }
    if kubernetes {
        let peers = u32::try_from(config.peers.len()).unwrap_or(u32::MAX);
        let needed = s.graceful_shutdown_wait + SESSION_STOP * peers + API_STOP;
        if needed > SHIPPED_GRACE_PERIOD {
            let place = if written(root, &[Key("speaker"), Key("graceful_shutdown_wait")]) {
                at("graceful_shutdown_wait")
            } else {
                span(root, &[Key("speaker")])
            };
            d.warning(
                &place,
                format!(
                    "a shutdown can take graceful_shutdown_wait ({}) + {} per peer × {peers} + {} = {}, longer than the shipped DaemonSet's terminationGracePeriodSeconds ({}s): the kubelet kills holdfast before its routes are withdrawn; raise terminationGracePeriodSeconds with an overlay patch, or shorten graceful_shutdown_wait",
                    format_duration(s.graceful_shutdown_wait),
                    format_duration(SESSION_STOP),
                    format_duration(API_STOP),
                    format_duration(needed),
                    SHIPPED_GRACE_PERIOD.as_secs()
                ),
            );
        }
        if let Some(h) = &s.hostname {
            d.warning(
                &at("hostname"),
                format!(
                    "hostname \"{h}\" is not used where $NODE_NAME is set, as the shipped DaemonSet sets it (spec.nodeName): $NODE_NAME names the node; where it is not set, every node reading this file takes the name \"{h}\" and follows that one Node"
                ),
            );
        }
    } else if s.node_selector.is_some() {
        d.warning(
            &at("node_selector"),
            "node_selector has no effect with the file source, which knows no node labels: every node advertises",
        );
    }
}

/// True when the session with `peer` is iBGP on some node: with the
/// speaker's AS, or with an AS a `[[node_override]]` sets.
fn ibgp_somewhere(config: &Config, peer: &Peer) -> bool {
    peer.is_ibgp(config.speaker.asn)
        || config.node_overrides.iter().any(|o| {
            o.asn
                .is_some_and(|asn| peer.local_asn.is_none() && peer.asn.is_internal(asn))
        })
}

fn peer_warnings(config: &Config, i: usize, p: &Peer, root: &Table<'_, '_>, d: &mut Diagnostics) {
    let path = |key: &'static str| [Key("peer"), Index(i), Key(key)];
    let at = |key: &'static str| span(root, &path(key));
    let (h, k) = (p.hold_time, p.keepalive);
    let name = &p.name;
    if !h.is_zero() && k * 2 >= h {
        let third = format_duration(h / 3);
        let message = if k >= h {
            format!(
                "keepalive ({}) equals hold_time ({}): the router's hold timer runs out just as the next KEEPALIVE is due, so one late or lost KEEPALIVE resets the session; RFC 4271 §10 suggests keepalive = hold_time / 3 ({third})",
                format_duration(k),
                format_duration(h)
            )
        } else {
            format!(
                "keepalive ({}) is half of hold_time ({}) or more: one lost KEEPALIVE lets the router's hold timer expire; RFC 4271 §10 suggests keepalive = hold_time / 3 ({third})",
                format_duration(k),
                format_duration(h)
            )
        };
        d.warning(&at("keepalive"), message);
    }
    if h.is_zero() && p.bfd.is_none() {
        d.warning(
            &at("hold_time"),
            format!(
                "hold_time 0s turns off KEEPALIVEs and the hold timer (RFC 4271 §4.4): without BFD, a router that dies silently is never noticed and peer \"{name}\" keeps its routes pointing at it"
            ),
        );
    }
    if p.bfd.is_none() {
        too_long("hold_time", h, &path("hold_time"), root, d);
    }
    if let (Some(addr), Some(_)) = (p.source_address, config.kubernetes_source())
        && written(root, &path("source_address"))
    {
        d.warning(
            &at("source_address"),
            format!(
                "source_address {addr} is one address for every node reading this file (one file serves a rack, the Kubernetes source runs on each node): only the node that has it can connect to peer \"{name}\", the others fail to bind; leave it out (the kernel picks the node's address on the link), or set it per node in a [[node_override]]"
            ),
        );
    }
    too_long(
        "connect_retry",
        p.connect_retry,
        &path("connect_retry"),
        root,
        d,
    );
    too_long(
        "min_route_advertisement_interval",
        p.min_route_advertisement_interval,
        &path("min_route_advertisement_interval"),
        root,
        d,
    );
    if p.ttl_security && p.ebgp_multihop > GTSM_MAX_HOPS {
        let n = p.ebgp_multihop;
        let message = if n == 255 {
            "ttl_security with ebgp_multihop 255 checks nothing: GTSM accepts a TTL of at least 256 − 255 = 1, which every packet has (RFC 5082 §3); give the real number of hops".to_string()
        } else {
            format!(
                "ttl_security with ebgp_multihop {n} accepts packets with a TTL of at least {}, from anywhere within {} hops: GTSM (RFC 5082) protects little beyond {GTSM_MAX_HOPS}; give the real number of hops",
                256 - u16::from(n),
                n - 1
            )
        };
        d.warning(&at("ebgp_multihop"), message);
    }
    let gr = &p.graceful_restart;
    if gr.enabled && gr.restart_time.is_zero() {
        d.warning(
            &span(root, &[Key("peer"), Index(i), Key("graceful_restart"), Key("restart_time")]),
            "restart_time 0s with graceful restart enabled: the router drops this node's routes the moment the session goes (RFC 4724 §4.2), so a restart is not graceful; set the seconds holdfast needs to come back (120s by default), or enabled = false",
        );
    }
    if let Some(bfd) = &p.bfd {
        let bfd_at = span(root, &[Key("peer"), Index(i), Key("bfd")]);
        let interval = bfd.min_rx.min(bfd.min_tx);
        let detection = interval * u32::from(bfd.multiplier);
        if detection < BFD_MIN_DETECTION {
            d.warning(
                &bfd_at,
                format!(
                    "BFD detection time multiplier × interval = {} × {} = {} is below {}: holdfast runs BFD in user space, on one thread shared with every session and the API, so a scheduling delay that long (a busy node, CPU pressure) declares the router down and resets the BGP session with it; use at least 50ms × 3",
                    bfd.multiplier,
                    format_duration(interval),
                    format_duration(detection),
                    format_duration(BFD_MIN_DETECTION)
                ),
            );
        } else if bfd.multiplier == 1 {
            d.warning(
                &span(root, &[Key("peer"), Index(i), Key("bfd"), Key("multiplier")]),
                "BFD multiplier 1: a single lost BFD packet declares the router down (RFC 5880 §6.8.4) and resets the BGP session with it; use 3",
            );
        }
        let slowest = bfd.min_rx.max(bfd.min_tx) * u32::from(bfd.multiplier);
        if !h.is_zero() && slowest >= h {
            d.warning(
                &bfd_at,
                format!(
                    "BFD detects a dead router after {} at the earliest, no sooner than hold_time ({}): it adds a session per peer and detects nothing sooner; shorten its intervals",
                    format_duration(slowest),
                    format_duration(h)
                ),
            );
        }
    }
}

fn advertisement(
    config: &Config,
    i: usize,
    a: &Advertisement,
    root: &Table<'_, '_>,
    d: &mut Diagnostics,
) {
    let at = |key: &str| span(root, &[Key("advertisement"), Index(i), Key(key)]);
    let reached: Vec<&Peer> = config
        .peers
        .iter()
        .filter(|p| a.applies_to_peer(&p.name))
        .collect();
    let names = || {
        reached
            .iter()
            .map(|p| format!("\"{}\"", p.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let all_ebgp = !reached.iter().any(|p| ibgp_somewhere(config, p));
    let all_ibgp = reached.iter().all(|p| p.is_ibgp(config.speaker.asn));
    if all_ebgp {
        if let Some(lp) = a.local_pref {
            d.warning(
                &at("local_pref"),
                format!(
                    "local_pref {lp} is never sent: every peer these routes go to ({}) is eBGP, and LOCAL_PREF goes to iBGP peers only (RFC 4271 §5.1.5); steer an eBGP router with med or communities its policy matches",
                    names()
                ),
            );
        }
        if a.allows(ServiceAttribute::LocalPref) {
            d.warning(
                &at("allow_service_attributes"),
                format!(
                    "allow_service_attributes lists \"local-pref\", but every peer these routes go to ({}) is eBGP, and LOCAL_PREF goes to iBGP peers only (RFC 4271 §5.1.5): the annotation holdfast.dev/local-pref changes nothing",
                    names()
                ),
            );
        }
    }
    if let Some(deg) = &a.degraded
        && all_ibgp
        && deg.med.is_none()
        && deg.communities.is_empty()
    {
        d.warning(
            &at("degraded"),
            format!(
                "degraded sets only as_path_prepend, which holdfast adds towards eBGP peers only (RFC 4271 §5.1.2: the AS_PATH is not changed towards iBGP peers); every peer these routes go to ({}) is iBGP, so a degraded route looks like a healthy one; add med or communities",
                names()
            ),
        );
    }
    for (key, len, min, family) in [
        (
            "aggregation_length",
            a.aggregation_length,
            MIN_AGGREGATE_V4,
            "IPv4",
        ),
        (
            "aggregation_length_v6",
            a.aggregation_length_v6,
            MIN_AGGREGATE_V6,
            "IPv6",
        ),
    ] {
        if let Some(len) = len
            && len < min
        {
            d.warning(
                &at(key),
                format!(
                    "{key} {len} announces an {family} /{len} for each VIP, shorter than /{min}: every node advertising it attracts the traffic of every address in it, VIP or not, and hides more specific routes elsewhere; aggregate to the VIP pool's own prefix"
                ),
            );
        }
    }
    if let Some(probe) = &a.probe {
        too_long(
            "interval",
            probe.interval,
            &[
                Key("advertisement"),
                Index(i),
                Key("probe"),
                Key("interval"),
            ],
            root,
            d,
        );
    }
    let selectors = [
        ("service_selector", a.service_selector.is_some()),
        ("namespace_selector", a.namespace_selector.is_some()),
    ];
    match config.kubernetes_source() {
        None => {
            for (key, set) in selectors {
                if set {
                    d.warning(
                        &at(key),
                        format!(
                            "{key} has no effect with the file source: it selects Services, and the VIP file names its VIPs itself"
                        ),
                    );
                }
            }
        }
        Some(k) => {
            let Some(sel) = &a.namespace_selector else {
                return;
            };
            if let Some(label) = a.namespace_label_read() {
                d.warning(
                    &at("namespace_selector"),
                    format!(
                        "namespace_selector reads the namespace label \"{label}\", so holdfast must list and watch Namespaces: the shipped ClusterRole (deploy/cluster/rbac.yaml) does not grant that, and without it the Namespace watcher keeps failing and the Kubernetes source stays unhealthy (no VIP is added or withdrawn); select on \"{NAMESPACE_NAME_LABEL}\" (no extra RBAC), or grant get, list and watch on namespaces (docs: Kubernetes, RBAC)"
                    ),
                );
            } else if !k.namespaces.is_empty()
                && !k.namespaces.iter().any(|ns| {
                    sel.matches(&std::collections::BTreeMap::from([(
                        NAMESPACE_NAME_LABEL.to_string(),
                        ns.clone(),
                    )]))
                })
            {
                d.warning(
                    &at("namespace_selector"),
                    format!(
                        "namespace_selector matches none of the namespaces source.namespaces watches ({}): this advertisement never selects a Service",
                        k.namespaces
                            .iter()
                            .map(|n| format!("\"{n}\""))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                );
            }
        }
    }
}

fn stability(root: &Table<'_, '_>, d: &mut Diagnostics) {
    for key in [
        "withdraw_hold_down",
        "advertise_delay",
        "delete_delay",
        "local_endpoint_delay",
    ] {
        duration_at(key, &[Key("stability"), Key(key)], root, d);
    }
    for key in ["half_life", "max_suppress"] {
        duration_at(key, &[Key("stability"), Key("damping"), Key(key)], root, d);
    }
}

/// [`too_long`] for a duration as written (the tree says which were).
fn duration_at(key: &str, path: &[Step<'_>], root: &Table<'_, '_>, d: &mut Diagnostics) {
    if let Some(DeValue::String(s)) = value_at(root, path).map(|v| v.get_ref())
        && let Ok(t) = super::parse_duration(s)
    {
        too_long(key, t, path, root, d);
    }
}

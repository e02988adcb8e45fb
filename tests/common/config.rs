//! holdfast's config, built typed: one method per key the tests set, and
//! [`Config::to_toml`] writes it. Only what a test sets is written (every
//! other key keeps the daemon's default), so a test reads as the config it
//! runs. A file source's `path` is `"VIPS"` unless a test names a file:
//! [`super::Holdfast`] writes the VIP file and puts its path there.
//!
//! The key names live here and only here: `tests/testkit.rs` checks that
//! `holdfast check` accepts a config using every method.
//!
//! A test about how the daemon reads TOML (a syntax error, a refused
//! value at a given line) writes its text by hand instead.

use std::fmt::{self, Display, Write};
use std::path::Path;

/// A TOML value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Array(Vec<Value>),
    /// An inline table, `{ key = value, ... }`, in this order.
    Inline(Vec<(&'static str, Value)>),
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Value {
        Value::Str(s)
    }
}

impl From<&Path> for Value {
    fn from(p: &Path) -> Value {
        Value::Str(p.display().to_string())
    }
}

impl From<i64> for Value {
    fn from(n: i64) -> Value {
        Value::Int(n)
    }
}

impl From<u32> for Value {
    fn from(n: u32) -> Value {
        Value::Int(n.into())
    }
}

impl From<u16> for Value {
    fn from(n: u16) -> Value {
        Value::Int(n.into())
    }
}

impl From<u8> for Value {
    fn from(n: u8) -> Value {
        Value::Int(n.into())
    }
}

impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Float(x)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Value {
        Value::Bool(b)
    }
}

impl From<&[&str]> for Value {
    fn from(list: &[&str]) -> Value {
        Value::Array(list.iter().map(|s| Value::from(*s)).collect())
    }
}

impl<const N: usize> From<[&str; N]> for Value {
    fn from(list: [&str; N]) -> Value {
        Value::from(&list[..])
    }
}

impl Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Str(s) => {
                f.write_char('"')?;
                for c in s.chars() {
                    match c {
                        '"' => f.write_str("\\\"")?,
                        '\\' => f.write_str("\\\\")?,
                        '\n' => f.write_str("\\n")?,
                        c => f.write_char(c)?,
                    }
                }
                f.write_char('"')
            }
            Value::Int(n) => write!(f, "{n}"),
            Value::Float(x) if x.fract() == 0.0 => write!(f, "{x:.1}"),
            Value::Float(x) => write!(f, "{x}"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Array(items) => {
                f.write_char('[')?;
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_char(']')
            }
            Value::Inline(keys) => {
                f.write_str("{ ")?;
                for (i, (k, v)) in keys.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{} = {v}", Key(k))?;
                }
                f.write_str(" }")
            }
        }
    }
}

/// A key as TOML writes it: bare when it can be, else quoted
/// (`"kubernetes.io/metadata.name"`).
struct Key<'a>(&'a str);

impl Display for Key<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare = !self.0.is_empty()
            && self
                .0
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if bare {
            f.write_str(self.0)
        } else {
            write!(f, "{}", Value::from(self.0))
        }
    }
}

/// The keys of one table, in the order first set; setting a key again
/// replaces its value.
#[derive(Clone, Debug, Default, PartialEq)]
struct Keys(Vec<(&'static str, Value)>);

impl Keys {
    fn set(&mut self, key: &'static str, value: impl Into<Value>) {
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    fn write(&self, out: &mut String) {
        for (k, v) in &self.0 {
            let _ = writeln!(out, "{} = {v}", Key(k));
        }
    }

    fn inline(self) -> Value {
        Value::Inline(self.0)
    }
}

/// A whole config: `[speaker]`, `[[peer]]`s, `[source]`, `[stability]`,
/// `[[advertisement]]`s and `[[node_override]]`s, written in that order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    speaker: Keys,
    peers: Vec<Peer>,
    source: Option<Keys>,
    stability: Option<Keys>,
    damping: Option<Keys>,
    advertisements: Vec<Advertisement>,
    node_overrides: Vec<NodeOverride>,
}

impl Config {
    /// Nothing at all: every table comes from a method.
    pub fn new() -> Config {
        Config::default()
    }

    /// What most tests start from: `[speaker]` with `asn`, `router_id`
    /// and hostname `node-1`, and the file source at the test's VIP file.
    /// No peer, no `[stability]`, no advertisement (the implicit
    /// `"default"` one).
    pub fn node(asn: u32, router_id: &str) -> Config {
        Config::new()
            .speaker(asn, router_id)
            .hostname("node-1")
            .file_source()
    }

    /// `[speaker]` `asn` and `router_id` (`"auto"` allowed).
    pub fn speaker(mut self, asn: u32, router_id: &str) -> Config {
        self.speaker.set("asn", asn);
        self.speaker.set("router_id", router_id);
        self
    }

    /// `[speaker]` with `asn` only (no `router_id`: the daemon's default).
    pub fn asn(mut self, asn: u32) -> Config {
        self.speaker.set("asn", asn);
        self
    }

    pub fn router_id(mut self, id: &str) -> Config {
        self.speaker.set("router_id", id);
        self
    }

    pub fn hostname(mut self, name: &str) -> Config {
        self.speaker.set("hostname", name);
        self
    }

    /// `speaker.listen`: the BGP listening address (`"0.0.0.0:179"`).
    pub fn listen(mut self, addr: &str) -> Config {
        self.speaker.set("listen", addr);
        self
    }

    /// `speaker.api`: the HTTP API's address.
    pub fn api(mut self, addr: impl Display) -> Config {
        self.speaker.set("api", addr.to_string());
        self
    }

    pub fn api_token_file(mut self, path: impl Into<Value>) -> Config {
        self.speaker.set("api_token_file", path);
        self
    }

    /// `speaker.metrics`: the metrics-only listener.
    pub fn metrics(mut self, addr: impl Display) -> Config {
        self.speaker.set("metrics", addr.to_string());
        self
    }

    pub fn graceful_shutdown_wait(mut self, wait: &str) -> Config {
        self.speaker.set("graceful_shutdown_wait", wait);
        self
    }

    /// `speaker.node_selector`: Node labels this node must carry.
    pub fn node_selector(mut self, selector: Selector) -> Config {
        self.speaker.set("node_selector", selector.0.inline());
        self
    }

    pub fn drain_taints(mut self, taints: &[&str]) -> Config {
        self.speaker.set("drain_taints", taints);
        self
    }

    pub fn peer(mut self, peer: Peer) -> Config {
        self.peers.push(peer);
        self
    }

    /// `[source]` `kind = "file"` at the test's VIP file (`path = "VIPS"`,
    /// which [`super::Holdfast`] replaces).
    pub fn file_source(self) -> Config {
        self.vip_file("VIPS")
    }

    /// `[source]` `kind = "file"` at `path`.
    pub fn vip_file(mut self, path: impl Into<Value>) -> Config {
        let mut source = Keys::default();
        source.set("kind", "file");
        source.set("path", path);
        self.source = Some(source);
        self
    }

    /// `[source]` `kind = "kubernetes"`.
    pub fn kubernetes_source(mut self) -> Config {
        let mut source = Keys::default();
        source.set("kind", "kubernetes");
        self.source = Some(source);
        self
    }

    /// `source.resync`, for either kind.
    pub fn resync(mut self, every: &str) -> Config {
        self.source_keys().set("resync", every);
        self
    }

    /// `source.namespaces` (Kubernetes).
    pub fn namespaces(mut self, names: &[&str]) -> Config {
        self.source_keys().set("namespaces", names);
        self
    }

    fn source_keys(&mut self) -> &mut Keys {
        self.source
            .as_mut()
            .expect("choose the source (file_source, kubernetes_source) first")
    }

    /// `[stability]` with these keys (an empty `[stability]` leaves every
    /// default, as no table does).
    pub fn stability(mut self, stability: Stability) -> Config {
        self.stability = Some(stability.keys);
        self.damping = stability.damping;
        self
    }

    /// `stability.withdraw_hold_down` alone, the key most tests set.
    pub fn hold_down(self, hold_down: &str) -> Config {
        self.stability(Stability::new().withdraw_hold_down(hold_down))
    }

    pub fn advertisement(mut self, ad: Advertisement) -> Config {
        self.advertisements.push(ad);
        self
    }

    pub fn node_override(mut self, o: NodeOverride) -> Config {
        self.node_overrides.push(o);
        self
    }

    /// The peer called `name`, to change one key of a config built
    /// elsewhere; panics if there is none.
    pub fn with_peer(mut self, name: &str, change: impl FnOnce(Peer) -> Peer) -> Config {
        let at = self
            .peers
            .iter()
            .position(|p| p.name() == name)
            .unwrap_or_else(|| panic!("no peer {name} in the config"));
        let peer = self.peers.remove(at);
        self.peers.insert(at, change(peer));
        self
    }

    /// The advertisement called `name`, to change it in a config built
    /// elsewhere; panics if there is none.
    pub fn with_advertisement(
        mut self,
        name: &str,
        change: impl FnOnce(Advertisement) -> Advertisement,
    ) -> Config {
        let at = self
            .advertisements
            .iter()
            .position(|a| a.keys.0[0].1 == Value::from(name))
            .unwrap_or_else(|| panic!("no advertisement {name} in the config"));
        let ad = self.advertisements.remove(at);
        self.advertisements.insert(at, change(ad));
        self
    }

    /// `speaker.api`, if set.
    pub fn api_addr(&self) -> Option<String> {
        self.speaker.0.iter().find_map(|(k, v)| match (*k, v) {
            ("api", Value::Str(addr)) => Some(addr.clone()),
            _ => None,
        })
    }

    /// The peers, in order.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }

    /// The config as TOML.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        if !self.speaker.0.is_empty() {
            out.push_str("[speaker]\n");
            self.speaker.write(&mut out);
            out.push('\n');
        }
        for p in &self.peers {
            out.push_str("[[peer]]\n");
            p.keys.write(&mut out);
            out.push('\n');
        }
        if let Some(source) = &self.source {
            out.push_str("[source]\n");
            source.write(&mut out);
            out.push('\n');
        }
        if let Some(stability) = &self.stability {
            out.push_str("[stability]\n");
            stability.write(&mut out);
            out.push('\n');
        }
        if let Some(damping) = &self.damping {
            out.push_str("[stability.damping]\n");
            damping.write(&mut out);
            out.push('\n');
        }
        for a in &self.advertisements {
            out.push_str("[[advertisement]]\n");
            a.keys.write(&mut out);
            out.push('\n');
        }
        for o in &self.node_overrides {
            out.push_str("[[node_override]]\n");
            o.keys.write(&mut out);
            for (name, keys) in &o.peers {
                let _ = writeln!(out, "[node_override.peer.{}]", Key(name));
                keys.write(&mut out);
            }
            out.push('\n');
        }
        out
    }
}

impl Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_toml())
    }
}

/// A peer's `asn`: a number, or `"external"` / `"internal"`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PeerAsn {
    Number(u32),
    External,
    Internal,
}

impl From<u32> for PeerAsn {
    fn from(n: u32) -> PeerAsn {
        PeerAsn::Number(n)
    }
}

impl From<PeerAsn> for Value {
    fn from(a: PeerAsn) -> Value {
        match a {
            PeerAsn::Number(n) => n.into(),
            PeerAsn::External => "external".into(),
            PeerAsn::Internal => "internal".into(),
        }
    }
}

/// One `[[peer]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Peer {
    keys: Keys,
}

impl Peer {
    /// Peer `name` at `address` (an IP address or `"default-gateway"`) in
    /// AS `asn`; every other key at its default.
    pub fn new(name: &str, address: impl Display, asn: impl Into<PeerAsn>) -> Peer {
        let mut keys = Keys::default();
        keys.set("name", name);
        keys.set("address", address.to_string());
        keys.set("asn", asn.into());
        Peer { keys }
    }

    /// BGP unnumbered: peer `name` on `interface`, in AS `asn`.
    pub fn on_interface(name: &str, interface: &str, asn: impl Into<PeerAsn>) -> Peer {
        let mut keys = Keys::default();
        keys.set("name", name);
        keys.set("interface", interface);
        keys.set("asn", asn.into());
        Peer { keys }
    }

    /// The lab's timers: hold time 9 s, keepalive 3 s, a connection
    /// attempt every second (the defaults are 90 s, 30 s and 30 s).
    pub fn fast(self) -> Peer {
        self.hold_time("9s").keepalive("3s").connect_retry("1s")
    }

    pub fn name(&self) -> &str {
        match &self.keys.0[0] {
            ("name", Value::Str(name)) => name,
            other => panic!("a peer starts with its name, not {other:?}"),
        }
    }

    /// `family`, with `address = "default-gateway"`: `"ipv4"` or `"ipv6"`.
    pub fn family(mut self, family: &str) -> Peer {
        self.keys.set("family", family);
        self
    }

    pub fn local_asn(mut self, asn: u32) -> Peer {
        self.keys.set("local_asn", asn);
        self
    }

    pub fn port(mut self, port: u16) -> Peer {
        self.keys.set("port", port);
        self
    }

    /// `password_file`: the TCP MD5 key's file (RFC 2385).
    pub fn md5(mut self, key_file: impl Into<Value>) -> Peer {
        self.keys.set("password_file", key_file);
        self
    }

    pub fn hold_time(mut self, hold: &str) -> Peer {
        self.keys.set("hold_time", hold);
        self
    }

    pub fn keepalive(mut self, every: &str) -> Peer {
        self.keys.set("keepalive", every);
        self
    }

    pub fn connect_retry(mut self, every: &str) -> Peer {
        self.keys.set("connect_retry", every);
        self
    }

    pub fn ebgp_multihop(mut self, ttl: u8) -> Peer {
        self.keys.set("ebgp_multihop", ttl);
        self
    }

    /// `ttl_security = true` (GTSM, RFC 5082).
    pub fn ttl_security(mut self) -> Peer {
        self.keys.set("ttl_security", true);
        self
    }

    pub fn source_address(mut self, addr: impl Display) -> Peer {
        self.keys.set("source_address", addr.to_string());
        self
    }

    /// `families`, e.g. `&["ipv4-unicast"]`.
    pub fn families(mut self, families: &[&str]) -> Peer {
        self.keys.set("families", families);
        self
    }

    /// `passive = true`: never connects (needs `speaker.listen`).
    pub fn passive(mut self) -> Peer {
        self.keys.set("passive", true);
        self
    }

    /// `min_route_advertisement_interval` (MRAI).
    pub fn mrai(mut self, interval: &str) -> Peer {
        self.keys.set("min_route_advertisement_interval", interval);
        self
    }

    pub fn graceful_restart(mut self, gr: GracefulRestart) -> Peer {
        self.keys.set("graceful_restart", gr.0.inline());
        self
    }

    pub fn bfd(mut self, bfd: Bfd) -> Peer {
        self.keys.set("bfd", bfd.0.inline());
        self
    }
}

/// A peer's `graceful_restart = { ... }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GracefulRestart(Keys);

impl GracefulRestart {
    pub fn new() -> GracefulRestart {
        GracefulRestart::default()
    }

    pub fn enabled(mut self, on: bool) -> GracefulRestart {
        self.0.set("enabled", on);
        self
    }

    pub fn restart_time(mut self, time: &str) -> GracefulRestart {
        self.0.set("restart_time", time);
        self
    }

    /// RFC 9494's long-lived stale time.
    pub fn long_lived_stale_time(mut self, time: &str) -> GracefulRestart {
        self.0.set("long_lived_stale_time", time);
        self
    }
}

/// A peer's `bfd = { ... }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Bfd(Keys);

impl Bfd {
    /// `min_rx`, `min_tx` and `multiplier`.
    pub fn new(min_rx: &str, min_tx: &str, multiplier: u8) -> Bfd {
        let mut keys = Keys::default();
        keys.set("min_rx", min_rx);
        keys.set("min_tx", min_tx);
        keys.set("multiplier", multiplier);
        Bfd(keys)
    }

    pub fn multihop(mut self) -> Bfd {
        self.0.set("multihop", true);
        self
    }

    /// `authentication`: `"none"` or a keyed type, e.g. `"keyed-sha1"`.
    pub fn authentication(mut self, how: &str) -> Bfd {
        self.0.set("authentication", how);
        self
    }

    pub fn key(mut self, key_id: u8, key_file: impl Into<Value>) -> Bfd {
        self.0.set("key_id", key_id);
        self.0.set("key_file", key_file);
        self
    }
}

/// `[stability]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stability {
    keys: Keys,
    damping: Option<Keys>,
}

impl Stability {
    pub fn new() -> Stability {
        Stability::default()
    }

    pub fn withdraw_hold_down(mut self, d: &str) -> Stability {
        self.keys.set("withdraw_hold_down", d);
        self
    }

    pub fn advertise_delay(mut self, d: &str) -> Stability {
        self.keys.set("advertise_delay", d);
        self
    }

    pub fn local_endpoint_delay(mut self, d: &str) -> Stability {
        self.keys.set("local_endpoint_delay", d);
        self
    }

    pub fn max_withdraw_fraction(mut self, f: f64) -> Stability {
        self.keys.set("max_withdraw_fraction", f);
        self
    }

    /// `withdraw_rate`, e.g. `"1/h"`.
    pub fn withdraw_rate(mut self, rate: &str) -> Stability {
        self.keys.set("withdraw_rate", rate);
        self
    }

    /// `[stability.damping]`.
    pub fn damping(mut self, damping: Damping) -> Stability {
        self.damping = Some(damping.0);
        self
    }
}

/// `[stability.damping]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Damping(Keys);

impl Damping {
    pub fn new() -> Damping {
        Damping::default()
    }

    pub fn half_life(mut self, d: &str) -> Damping {
        self.0.set("half_life", d);
        self
    }

    pub fn penalty(mut self, n: u32) -> Damping {
        self.0.set("penalty", n);
        self
    }

    pub fn suppress_threshold(mut self, n: u32) -> Damping {
        self.0.set("suppress_threshold", n);
        self
    }

    pub fn reuse_threshold(mut self, n: u32) -> Damping {
        self.0.set("reuse_threshold", n);
        self
    }

    pub fn max_suppress(mut self, d: &str) -> Damping {
        self.0.set("max_suppress", d);
        self
    }
}

/// One `[[advertisement]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Advertisement {
    keys: Keys,
}

impl Advertisement {
    pub fn new(name: &str) -> Advertisement {
        let mut keys = Keys::default();
        keys.set("name", name);
        Advertisement { keys }
    }

    /// `advertisement "public"` with `communities = [community]`: what
    /// most tests advertise with.
    pub fn public(community: &str) -> Advertisement {
        Advertisement::new("public").communities(&[community])
    }

    pub fn addresses(mut self, addresses: &[&str]) -> Advertisement {
        self.keys.set("addresses", addresses);
        self
    }

    pub fn peers(mut self, peers: &[&str]) -> Advertisement {
        self.keys.set("peers", peers);
        self
    }

    pub fn communities(mut self, communities: &[&str]) -> Advertisement {
        self.keys.set("communities", communities);
        self
    }

    pub fn large_communities(mut self, communities: &[&str]) -> Advertisement {
        self.keys.set("large_communities", communities);
        self
    }

    pub fn local_pref(mut self, pref: u32) -> Advertisement {
        self.keys.set("local_pref", pref);
        self
    }

    pub fn med(mut self, med: u32) -> Advertisement {
        self.keys.set("med", med);
        self
    }

    pub fn service_selector(mut self, selector: Selector) -> Advertisement {
        self.keys.set("service_selector", selector.0.inline());
        self
    }

    pub fn namespace_selector(mut self, selector: Selector) -> Advertisement {
        self.keys.set("namespace_selector", selector.0.inline());
        self
    }

    /// `allow_service_attributes`, e.g. `&["communities", "med"]`.
    pub fn allow_service_attributes(mut self, attributes: &[&str]) -> Advertisement {
        self.keys.set("allow_service_attributes", attributes);
        self
    }

    pub fn aggregation_length(mut self, len: u8) -> Advertisement {
        self.keys.set("aggregation_length", len);
        self
    }

    pub fn aggregation_length_v6(mut self, len: u8) -> Advertisement {
        self.keys.set("aggregation_length_v6", len);
        self
    }

    /// `interface`: advertise this interface's addresses.
    pub fn interface(mut self, name: &str) -> Advertisement {
        self.keys.set("interface", name);
        self
    }

    /// `link_bandwidth`, e.g. `"10G"` or `"auto"`.
    pub fn link_bandwidth(mut self, bandwidth: &str) -> Advertisement {
        self.keys.set("link_bandwidth", bandwidth);
        self
    }

    pub fn vip_ranges(mut self, ranges: &[&str]) -> Advertisement {
        self.keys.set("vip_ranges", ranges);
        self
    }

    pub fn probe(mut self, probe: Probe) -> Advertisement {
        self.keys.set("probe", probe.0.inline());
        self
    }

    /// `degraded = { ... }`: the attributes of a degraded route.
    pub fn degraded(mut self, degraded: Degraded) -> Advertisement {
        self.keys.set("degraded", degraded.0.inline());
        self
    }
}

/// An advertisement's `probe = { ... }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Probe(Keys);

impl Probe {
    /// A TCP probe of `port`.
    pub fn tcp(port: u16) -> Probe {
        let mut keys = Keys::default();
        keys.set("port", port);
        Probe(keys)
    }

    pub fn interval(mut self, d: &str) -> Probe {
        self.0.set("interval", d);
        self
    }

    pub fn timeout(mut self, d: &str) -> Probe {
        self.0.set("timeout", d);
        self
    }

    pub fn fail_after(mut self, n: u32) -> Probe {
        self.0.set("fail_after", n);
        self
    }

    pub fn recover_after(mut self, n: u32) -> Probe {
        self.0.set("recover_after", n);
        self
    }

    /// `on_failure`: `"withdraw"` or `"degrade"`.
    pub fn on_failure(mut self, what: &str) -> Probe {
        self.0.set("on_failure", what);
        self
    }

    pub fn disable_file(mut self, path: impl Into<Value>) -> Probe {
        self.0.set("disable_file", path);
        self
    }
}

/// An advertisement's `degraded = { ... }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Degraded(Keys);

impl Degraded {
    pub fn new() -> Degraded {
        Degraded::default()
    }

    pub fn med(mut self, med: u32) -> Degraded {
        self.0.set("med", med);
        self
    }

    pub fn communities(mut self, communities: &[&str]) -> Degraded {
        self.0.set("communities", communities);
        self
    }
}

/// A label selector, `{ match_labels = { ... } }`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Selector(Keys);

impl Selector {
    /// `match_labels` of these `(key, value)` pairs.
    pub fn labels(labels: &[(&'static str, &str)]) -> Selector {
        let mut m = Keys::default();
        for (k, v) in labels {
            m.set(k, *v);
        }
        let mut keys = Keys::default();
        keys.set("match_labels", m.inline());
        Selector(keys)
    }
}

/// One `[[node_override]]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeOverride {
    keys: Keys,
    peers: Vec<(String, Keys)>,
}

impl NodeOverride {
    /// For the Nodes called `names`.
    pub fn names(names: &[&str]) -> NodeOverride {
        let mut keys = Keys::default();
        keys.set("names", names);
        NodeOverride {
            keys,
            peers: Vec::new(),
        }
    }

    /// For the Nodes `selector` selects.
    pub fn selecting(selector: Selector) -> NodeOverride {
        let mut keys = Keys::default();
        keys.set("node_selector", selector.0.inline());
        NodeOverride {
            keys,
            peers: Vec::new(),
        }
    }

    pub fn asn(mut self, asn: u32) -> NodeOverride {
        self.keys.set("asn", asn);
        self
    }

    pub fn router_id(mut self, id: &str) -> NodeOverride {
        self.keys.set("router_id", id);
        self
    }

    /// `[node_override.peer.NAME]`: peer `name`'s `address` and
    /// `source_address` on those nodes.
    pub fn peer_addresses(
        mut self,
        name: &str,
        address: &str,
        source_address: &str,
    ) -> NodeOverride {
        let mut keys = Keys::default();
        keys.set("address", address);
        keys.set("source_address", source_address);
        self.peers.push((name.to_owned(), keys));
        self
    }
}

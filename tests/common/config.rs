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

/// One setter per key, in a table of `name(TYPE) => "key"` lines: the
/// setter takes a TYPE that converts into a [`Value`] and sets the key of
/// the struct's `FIELD` (`keys!(Struct.FIELD { ... })`). Setting a key
/// again replaces its value. The key names of the tests live here.
macro_rules! keys {
    ($ty:ident . $field:ident { $( $(#[$doc:meta])* $name:ident($arg:ty) => $key:literal; )* }) => {
        impl $ty {
            $(
                $(#[$doc])*
                pub fn $name(mut self, value: $arg) -> $ty {
                    self.$field.set($key, value);
                    self
                }
            )*
        }
    };
}

/// A whole config: `[speaker]`, `[[peer]]`s, `[source]`, `[stability]`,
/// `[[advertisement]]`s and `[[node_override]]`s, written in that order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    speaker: Keys,
    peers: Vec<Peer>,
    source: Option<Keys>,
    /// Sources after the first: then every source is a `[[source]]`.
    more_sources: Vec<Keys>,
    stability: Option<Stability>,
    advertisements: Vec<Advertisement>,
    node_overrides: Vec<NodeOverride>,
    tenants: Vec<Tenant>,
}

keys!(Config.speaker {
    /// `[speaker]` `asn` (alone: no `router_id`, the daemon's default).
    asn(u32) => "asn";
    /// `router_id`: an IPv4 address or `"auto"`.
    router_id(&str) => "router_id";
    hostname(&str) => "hostname";
    /// `listen`: the BGP listening address (`"0.0.0.0:179"`).
    listen(&str) => "listen";
    api_token_file(impl Into<Value>) => "api_token_file";
    graceful_shutdown_wait(&str) => "graceful_shutdown_wait";
    /// `node_selector`: Node labels this node must carry.
    node_selector(Selector) => "node_selector";
    drain_taints(&[&str]) => "drain_taints";
});

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

    /// `[speaker]` `asn` and `router_id`.
    pub fn speaker(self, asn: u32, router_id: &str) -> Config {
        self.asn(asn).router_id(router_id)
    }

    /// `speaker.api`: the HTTP API's address.
    pub fn api(mut self, addr: impl Display) -> Config {
        self.speaker.set("api", addr.to_string());
        self
    }

    /// `speaker.metrics`: the metrics-only listener.
    pub fn metrics(mut self, addr: impl Display) -> Config {
        self.speaker.set("metrics", addr.to_string());
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

    /// A second source, `kind = "file"` named `name` at the test's VIP
    /// file (`path = "VIPS"`): every source is then a `[[source]]`.
    pub fn and_file_source(mut self, name: &str) -> Config {
        let mut source = Keys::default();
        source.set("name", name);
        source.set("kind", "file");
        source.set("path", "VIPS");
        self.more_sources.push(source);
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
        self.stability = Some(stability);
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

    /// One more `[[tenant]]`.
    pub fn tenant(mut self, t: Tenant) -> Config {
        self.tenants.push(t);
        self
    }

    pub fn node_override(mut self, o: NodeOverride) -> Config {
        self.node_overrides.push(o);
        self
    }

    /// The peer called `name`, to change one key of a config built
    /// elsewhere; panics if there is none.
    pub fn with_peer(mut self, name: &str, change: impl FnOnce(Peer) -> Peer) -> Config {
        let at = position(&self.peers, |p| &p.keys, name);
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
        let at = position(&self.advertisements, |a| &a.keys, name);
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

    /// The config as TOML.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        if !self.speaker.0.is_empty() {
            table(&mut out, "[speaker]", &self.speaker);
        }
        for p in &self.peers {
            table(&mut out, "[[peer]]", &p.keys);
        }
        if let Some(source) = &self.source {
            if self.more_sources.is_empty() {
                table(&mut out, "[source]", source);
            } else {
                table(&mut out, "[[source]]", source);
            }
        }
        for source in &self.more_sources {
            table(&mut out, "[[source]]", source);
        }
        if let Some(stability) = &self.stability {
            table(&mut out, "[stability]", &stability.keys);
            if let Some(damping) = &stability.damping {
                table(&mut out, "[stability.damping]", &damping.keys);
            }
        }
        for a in &self.advertisements {
            table(&mut out, "[[advertisement]]", &a.keys);
        }
        for t in &self.tenants {
            table(&mut out, "[[tenant]]", &t.keys);
        }
        for o in &self.node_overrides {
            out.push_str("[[node_override]]\n");
            o.keys.write(&mut out);
            for (name, peer) in &o.peers {
                let _ = writeln!(out, "[node_override.peer.{}]", Key(name));
                peer.write(&mut out);
            }
            out.push('\n');
        }
        out
    }
}

/// `header`, the keys, a blank line.
fn table(out: &mut String, header: &str, keys: &Keys) {
    let _ = writeln!(out, "{header}");
    keys.write(out);
    out.push('\n');
}

/// Where the table called `name` is in `tables`; panics if it is not.
fn position<T>(tables: &[T], keys: impl Fn(&T) -> &Keys, name: &str) -> usize {
    tables
        .iter()
        .position(|t| keys(t).0.first() == Some(&("name", Value::from(name))))
        .unwrap_or_else(|| panic!("no table named {name} in the config"))
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

    /// `ttl_security = true` (GTSM, RFC 5082).
    pub fn ttl_security(mut self) -> Peer {
        self.keys.set("ttl_security", true);
        self
    }

    /// `passive = true`: never connects (needs `speaker.listen`).
    pub fn passive(mut self) -> Peer {
        self.keys.set("passive", true);
        self
    }

    pub fn source_address(mut self, addr: impl Display) -> Peer {
        self.keys.set("source_address", addr.to_string());
        self
    }
}

keys!(Peer.keys {
    /// `family`, with `address = "default-gateway"`: `"ipv4"` or `"ipv6"`.
    family(&str) => "family";
    local_asn(u32) => "local_asn";
    port(u16) => "port";
    /// `password_file`: the TCP MD5 key's file (RFC 2385).
    md5(impl Into<Value>) => "password_file";
    hold_time(&str) => "hold_time";
    keepalive(&str) => "keepalive";
    connect_retry(&str) => "connect_retry";
    ebgp_multihop(u8) => "ebgp_multihop";
    /// `families`, e.g. `&["ipv4-unicast"]`.
    families(&[&str]) => "families";
    /// `min_route_advertisement_interval` (MRAI).
    mrai(&str) => "min_route_advertisement_interval";
    graceful_restart(GracefulRestart) => "graceful_restart";
    bfd(Bfd) => "bfd";
    /// `export_default`: `"accept"` or `"reject"`.
    export_default(&str) => "export_default";
});

/// An inline table's builder: a struct of [`Keys`] written as
/// `{ key = value, ... }`.
macro_rules! inline_table {
    ($(#[$doc:meta])* $ty:ident) => {
        $(#[$doc])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $ty {
            keys: Keys,
        }

        impl From<$ty> for Value {
            fn from(t: $ty) -> Value {
                Value::Inline(t.keys.0)
            }
        }
    };
}

inline_table!(
    /// A peer's `graceful_restart = { ... }`.
    GracefulRestart
);

impl GracefulRestart {
    pub fn new() -> GracefulRestart {
        GracefulRestart::default()
    }
}

keys!(GracefulRestart.keys {
    enabled(bool) => "enabled";
    restart_time(&str) => "restart_time";
    /// RFC 9494's long-lived stale time.
    long_lived_stale_time(&str) => "long_lived_stale_time";
});

inline_table!(
    /// A peer's `bfd = { ... }`.
    Bfd
);

impl Bfd {
    /// `min_rx`, `min_tx` and `multiplier`.
    pub fn new(min_rx: &str, min_tx: &str, multiplier: u8) -> Bfd {
        Bfd::default()
            .min_rx(min_rx)
            .min_tx(min_tx)
            .multiplier(multiplier)
    }

    pub fn multihop(mut self) -> Bfd {
        self.keys.set("multihop", true);
        self
    }

    pub fn key(self, key_id: u8, key_file: impl Into<Value>) -> Bfd {
        self.key_id(key_id).key_file(key_file)
    }
}

keys!(Bfd.keys {
    min_rx(&str) => "min_rx";
    min_tx(&str) => "min_tx";
    multiplier(u8) => "multiplier";
    /// `authentication`: `"none"` or a keyed type, e.g. `"keyed-sha1"`.
    authentication(&str) => "authentication";
    key_id(u8) => "key_id";
    key_file(impl Into<Value>) => "key_file";
});

/// `[stability]`, and `[stability.damping]` in it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stability {
    keys: Keys,
    damping: Option<Damping>,
}

impl Stability {
    pub fn new() -> Stability {
        Stability::default()
    }

    /// `[stability.damping]`.
    pub fn damping(mut self, damping: Damping) -> Stability {
        self.damping = Some(damping);
        self
    }
}

keys!(Stability.keys {
    withdraw_hold_down(&str) => "withdraw_hold_down";
    advertise_delay(&str) => "advertise_delay";
    local_endpoint_delay(&str) => "local_endpoint_delay";
    max_withdraw_fraction(f64) => "max_withdraw_fraction";
    /// `withdraw_rate`, e.g. `"1/h"`.
    withdraw_rate(&str) => "withdraw_rate";
});

/// `[stability.damping]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Damping {
    keys: Keys,
}

impl Damping {
    pub fn new() -> Damping {
        Damping::default()
    }
}

keys!(Damping.keys {
    half_life(&str) => "half_life";
    penalty(u32) => "penalty";
    suppress_threshold(u32) => "suppress_threshold";
    reuse_threshold(u32) => "reuse_threshold";
    max_suppress(&str) => "max_suppress";
});

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
}

keys!(Advertisement.keys {
    /// `addresses`, e.g. `&["PodCIDR"]`.
    addresses(&[&str]) => "addresses";
    peers(&[&str]) => "peers";
    communities(&[&str]) => "communities";
    large_communities(&[&str]) => "large_communities";
    local_pref(u32) => "local_pref";
    med(u32) => "med";
    service_selector(Selector) => "service_selector";
    namespace_selector(Selector) => "namespace_selector";
    /// `allow_service_attributes`, e.g. `&["communities", "med"]`.
    allow_service_attributes(&[&str]) => "allow_service_attributes";
    aggregation_length(u8) => "aggregation_length";
    aggregation_length_v6(u8) => "aggregation_length_v6";
    /// `interface`: advertise this interface's addresses.
    interface(&str) => "interface";
    /// `link_bandwidth`, e.g. `"per-endpoint"`.
    link_bandwidth(&str) => "link_bandwidth";
    vip_ranges(&[&str]) => "vip_ranges";
    probe(Probe) => "probe";
    /// `degraded = { ... }`: the attributes of a degraded route.
    degraded(Degraded) => "degraded";
});

inline_table!(
    /// An advertisement's `probe = { ... }`.
    Probe
);

impl Probe {
    /// A TCP probe of `port`.
    pub fn tcp(port: u16) -> Probe {
        Probe::default().port(port)
    }

    /// An HTTP(S) probe: a GET of `url`.
    pub fn http(url: &str) -> Probe {
        Probe::default().url(url)
    }
}

keys!(Probe.keys {
    port(u16) => "port";
    url(&str) => "url";
    /// `ca_file`: the CAs an `https://` url's server must chain to.
    ca_file(impl Into<Value>) => "ca_file";
    interval(&str) => "interval";
    timeout(&str) => "timeout";
    fail_after(u32) => "fail_after";
    recover_after(u32) => "recover_after";
    /// `on_failure`: `"withdraw"` or `"degrade"`.
    on_failure(&str) => "on_failure";
    disable_file(impl Into<Value>) => "disable_file";
});

inline_table!(
    /// An advertisement's `degraded = { ... }`.
    Degraded
);

impl Degraded {
    pub fn new() -> Degraded {
        Degraded::default()
    }
}

keys!(Degraded.keys {
    med(u32) => "med";
    communities(&[&str]) => "communities";
});

inline_table!(
    /// A label selector, `{ match_labels = { ... } }`.
    Selector
);

impl Selector {
    /// `match_labels` of these `(key, value)` pairs.
    pub fn labels(labels: &[(&'static str, &str)]) -> Selector {
        let mut m = Keys::default();
        for (k, v) in labels {
            m.set(k, *v);
        }
        let mut keys = Keys::default();
        keys.set("match_labels", m.inline());
        Selector { keys }
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
        keys.set("node_selector", selector);
        NodeOverride {
            keys,
            peers: Vec::new(),
        }
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

keys!(NodeOverride.keys {
    asn(u32) => "asn";
    router_id(&str) => "router_id";
});

impl Peer {
    /// `export = [ {...}, ... ]`: the peer's `[[peer.export]]` rules, in
    /// order (written inline).
    pub fn export(mut self, rules: &[ExportRule]) -> Peer {
        self.keys.set(
            "export",
            Value::Array(rules.iter().cloned().map(Value::from).collect()),
        );
        self
    }
}

inline_table!(
    /// One `[[peer.export]]` rule.
    ExportRule
);

impl ExportRule {
    pub fn new() -> ExportRule {
        ExportRule::default()
    }
}

keys!(ExportRule.keys {
    name(&str) => "name";
    /// `prefixes`, e.g. `&["198.51.100.0/24 le 32"]`.
    prefixes(&[&str]) => "prefixes";
    advertisements(&[&str]) => "advertisements";
    namespaces(&[&str]) => "namespaces";
    tenants(&[&str]) => "tenants";
    communities(&[&str]) => "communities";
    sources(&[&str]) => "sources";
    set_add_communities(&[&str]) => "set_add_communities";
    set_remove_communities(&[&str]) => "set_remove_communities";
    set_add_large_communities(&[&str]) => "set_add_large_communities";
    set_local_pref(u32) => "set_local_pref";
    set_med(u32) => "set_med";
    set_prepend(u8) => "set_prepend";
    /// `action`: `"continue"`, `"accept"` or `"reject"`.
    action(&str) => "action";
});

/// One `[[tenant]]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tenant {
    keys: Keys,
}

impl Tenant {
    /// Tenant `name`, whose routes may reach `peers`.
    pub fn new(name: &str, peers: &[&str]) -> Tenant {
        let mut keys = Keys::default();
        keys.set("name", name);
        keys.set("peers", peers);
        Tenant { keys }
    }
}

keys!(Tenant.keys {
    namespaces(&[&str]) => "namespaces";
    namespace_selector(Selector) => "namespace_selector";
});

//! `[[node_override]]`: per-node values in a per-rack file, and the router
//! ID of a node without IPv4.
//!
//! One config file serves a rack whose nodes differ a little (another AS,
//! a fixed router ID, another source address towards a router). Each
//! override picks nodes by name (`names`) or by label (`node_selector`)
//! and sets some of `asn`, `router_id`, and per peer `address` /
//! `source_address`.
//!
//! [`resolve`] turns the file's config, the node's name and its labels
//! into the config that node runs: a pure function. The daemon applies
//! its result like a reload, so a label that changes at runtime resets only
//! the sessions whose settings change (all of them when the AS or the
//! router ID changes, since both are in every OPEN).
//!
//! Overlap: two overrides that can match one node and set the same field
//! are an error, reported at the later one with the position of the
//! earlier. Two `names` lists overlap when they share a name (certain);
//! a selector can match any node whose labels are not known yet, so it
//! overlaps a `names` list, and another selector unless the two exclude
//! each other (one label required with different values, `Exists` against
//! `DoesNotExist`, a value one requires and the other's `NotIn` lists).
//! The check is thus conservative: at most one override ever sets a field
//! of a node, and the order of overrides never matters.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

use super::Config;
use super::diagnostic::Diagnostics;
use super::peer::{self, Peer, PeerAddress};
use super::schema::{DefaultValue, Key, Range, Section};
use super::selector::{LabelSelector, SelectorOperator, dns_subdomain_problem, parse_selector};
use super::speaker::{RouterId, asn, router_id};
use super::tree::{self, Table, Value};

/// One `[[node_override]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOverride {
    /// `PATH:LINE:COL` of its `names` or `node_selector`: how messages,
    /// status and explain name it.
    pub position: String,
    /// Which nodes it applies to.
    pub matcher: NodeMatch,
    /// `speaker.asn` on those nodes.
    pub asn: Option<u32>,
    /// `speaker.router_id` on those nodes.
    pub router_id: Option<RouterId>,
    /// `[node_override.peer.NAME]`: per-peer values, by peer name.
    pub peers: BTreeMap<String, PeerOverride>,
}

/// How an override picks its nodes.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeMatch {
    /// `names = [...]`: these node names.
    Names(Vec<String>),
    /// `node_selector = {...}`: nodes whose labels match (the Kubernetes
    /// source only: the file source knows no labels).
    Selector(LabelSelector),
}

impl NodeMatch {
    fn key(&self) -> &'static str {
        match self {
            NodeMatch::Names(_) => "names",
            NodeMatch::Selector(_) => "node_selector",
        }
    }

    /// Whether node `node` with `labels` (`None`: not known) is picked.
    pub fn matches(&self, node: &str, labels: Option<&BTreeMap<String, String>>) -> bool {
        match self {
            NodeMatch::Names(names) => names.iter().any(|n| n == node),
            NodeMatch::Selector(s) => labels.is_some_and(|l| s.matches(l)),
        }
    }
}

/// `[node_override.peer.NAME]`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PeerOverride {
    /// The peer's `address` on those nodes.
    pub address: Option<PeerAddress>,
    /// The peer's `source_address` on those nodes.
    pub source_address: Option<IpAddr>,
}

impl NodeOverride {
    /// The fields it sets, as `asn`, `router_id`, `peer.NAME.address`.
    pub fn fields(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.asn.is_some() {
            out.push("asn".to_string());
        }
        if self.router_id.is_some() {
            out.push("router_id".to_string());
        }
        for (name, p) in &self.peers {
            if p.address.is_some() {
                out.push(format!("peer.{name}.address"));
            }
            if p.source_address.is_some() {
                out.push(format!("peer.{name}.source_address"));
            }
        }
        out
    }
}

/// An override in force on this node, for status and explain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppliedOverride {
    /// `PATH:LINE:COL` of its `names` / `node_selector`.
    pub position: String,
    /// "names" or "node_selector".
    pub matched_by: &'static str,
    /// What it set here ("asn", "peer.tor1.address"…).
    pub fields: Vec<String>,
}

impl fmt::Display for AppliedOverride {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[[node_override]] at {} (by {}): {}",
            self.position,
            self.matched_by,
            self.fields.join(", ")
        )
    }
}

/// The config node `node` runs, given its labels (`None` while they are
/// not known, or with the file source: then only `names` overrides
/// apply). Starts from `config` as read from the file; every override that
/// matches sets its fields, and [`Config::applied_overrides`] lists them.
/// `load` has refused overlapping overrides, so no field is set twice (if
/// it were, the first in file order would stand).
pub fn resolve(config: &Config, node: &str, labels: Option<&BTreeMap<String, String>>) -> Config {
    let mut out = config.clone();
    out.applied_overrides.clear();
    let mut set: BTreeSet<String> = BTreeSet::new();
    for o in &config.node_overrides {
        if !o.matcher.matches(node, labels) {
            continue;
        }
        let mut fields = Vec::new();
        let mut take = |field: String, set: &mut BTreeSet<String>| {
            let fresh = set.insert(field.clone());
            if fresh {
                fields.push(field);
            }
            fresh
        };
        if let Some(asn) = o.asn
            && take("asn".into(), &mut set)
        {
            out.speaker.asn = asn;
        }
        if let Some(id) = o.router_id
            && take("router_id".into(), &mut set)
        {
            out.speaker.router_id = id;
        }
        for (name, po) in &o.peers {
            let Some(p) = out.peers.iter_mut().find(|p| &p.name == name) else {
                continue;
            };
            if let Some(a) = po.address
                && take(format!("peer.{name}.address"), &mut set)
            {
                p.address = a;
            }
            if let Some(s) = po.source_address
                && take(format!("peer.{name}.source_address"), &mut set)
            {
                p.source_address = Some(s);
            }
        }
        out.applied_overrides.push(AppliedOverride {
            position: o.position.clone(),
            matched_by: o.matcher.key(),
            fields,
        });
    }
    out
}

/// The first octets a derived router ID may start with: unicast, not
/// "this network" (0/8), not loopback (127/8), not multicast or reserved
/// (224/3). Some routers refuse a class D or E BGP Identifier.
fn usable_first_octet(n: u8) -> bool {
    (1..=223).contains(&n) && n != 127
}

/// The router ID of a node without IPv4 (`router_id = "auto"` in an
/// IPv6-only cluster): a hash of the node name, as an IPv4 address that is
/// never 0.0.0.0, loopback, multicast or reserved. RFC 6286 §2.1 asks only
/// for a non-zero 4-octet value, unique within the AS (§2.2); the same name
/// gives the same ID on every start and every version (FNV-1a, 64 bits,
/// folded). Two names can collide (about one chance in 2^31 per pair):
/// set `router_id` per node with a `[[node_override]]` where that matters.
pub fn derived_router_id(node: &str) -> Ipv4Addr {
    // FNV-1a 64 (offset basis and prime from the FNV reference).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in node.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let folded = ((h >> 32) ^ h) as u32;
    let [a, b, c, d] = folded.to_be_bytes();
    // Map the first octet onto the usable ones (222 of them), keeping the
    // other 24 bits: never 0.0.0.0.
    let usable: Vec<u8> = (0..=255u8).filter(|n| usable_first_octet(*n)).collect();
    let first = usable[usize::from(a) % usable.len()];
    Ipv4Addr::new(first, b, c, d)
}

/// Keys of one `[[node_override]]`.
pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "names",
        kind: "array of node names",
        default: DefaultValue::Text("exactly one of `names` and `node_selector`"),
        range: Range::Any,
        meaning: "The nodes this override is for, by the node's name: `$NODE_NAME`, else `speaker.hostname`, else the system hostname. Works with both sources. Exactly one of `names` and `node_selector`.",
    },
    Key {
        name: "node_selector",
        kind: "label selector",
        default: DefaultValue::Text("exactly one of `names` and `node_selector`"),
        range: Range::Any,
        meaning: "The nodes whose labels match (the Kubernetes source only: the file source knows no labels, so such an override never applies there; a warning).",
    },
    Key {
        name: "asn",
        kind: "integer",
        default: DefaultValue::Text("`speaker.asn`"),
        range: Range::Text(super::speaker::asn_range),
        meaning: "`speaker.asn` on those nodes.",
    },
    Key {
        name: "router_id",
        kind: "string",
        default: DefaultValue::Text("`speaker.router_id`"),
        range: Range::Any,
        meaning: "`speaker.router_id` on those nodes (an IPv4 address or `\"auto\"`).",
    },
    Key {
        name: "peer",
        kind: "table of tables",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "Per-peer overrides, `[node_override.peer.NAME]` where `NAME` must be a `[[peer]]`; their keys are in the next section.",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[[node_override]]` (zero or more)",
    intro: "One file serves a rack whose nodes differ a little: another AS, a fixed router ID, another router address or source address. Each override picks nodes by name or by label and sets some of these keys on them; the other nodes run the file's values.

Overlaps are errors: two overrides that can match one node and set the same key are refused by `holdfast check` (and by a reload), at the later one, naming the earlier one's `PATH:LINE:COL`. So at most one override sets any key of a node, and their order never matters.",
    keys: KEYS,
};
/// Keys of `[node_override.peer.NAME]`.
pub(crate) const PEER_KEYS: &[Key] = &[
    Key {
        name: "address",
        kind: "string",
        default: DefaultValue::Text("the peer's"),
        range: Range::Any,
        meaning: "`address` of peer `NAME` on those nodes (an IP address, or `\"default-gateway\"` with `family`). `NAME` must be a `[[peer]]`.",
    },
    Key {
        name: "family",
        kind: "string",
        default: DefaultValue::Text("`\"ipv4\"`"),
        range: Range::Any,
        meaning: "With `peer.NAME.address = \"default-gateway\"`, as in `[[peer]]`.",
    },
    Key {
        name: "source_address",
        kind: "IP address",
        default: DefaultValue::Text("the peer's"),
        range: Range::Any,
        meaning: "`source_address` of peer `NAME` on those nodes; the peer's address family.",
    },
];

/// The reference's section for these keys.
pub(crate) const PEER_SECTION: Section = Section {
    title: "`[node_override.peer.NAME]`",
    intro: "What an override changes of peer `NAME` (a `[[peer]]`) on its nodes.",
    keys: PEER_KEYS,
};

/// Reads `[[node_override]]` and checks the overrides against each other
/// and against the peers (`peers`: the parsed ones, for address families;
/// `peer_names`: every name defined, parsed or not).
pub(crate) fn parse_node_overrides(
    list: &Value<'_>,
    peers: Option<&[Peer]>,
    peer_names: &[String],
    d: &mut Diagnostics,
) -> Option<Vec<NodeOverride>> {
    let items = tree::array_of_tables(list, "node_override", d)?;
    let mut out = Vec::with_capacity(items.len());
    let mut spans = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        match parse_one(item, peers, peer_names, d) {
            Some((o, span)) => {
                out.push(o);
                spans.push(span);
            }
            None => ok = false,
        }
    }
    for j in 0..out.len() {
        for i in 0..j {
            let (a, b) = (&out[i], &out[j]);
            let b_fields = b.fields();
            let shared: Vec<String> = a
                .fields()
                .into_iter()
                .filter(|f| b_fields.contains(f))
                .collect();
            if shared.is_empty() {
                continue;
            }
            if let Some(why) = overlap(&a.matcher, &b.matcher) {
                let it = if shared.len() == 1 { "it" } else { "them" };
                let fix = match (&a.matcher, &b.matcher) {
                    (NodeMatch::Names(_), NodeMatch::Names(_)) => {
                        "name the node in only one of them".to_string()
                    }
                    _ => format!(
                        "make the selectors exclude each other (one label with different values), or set {it} in only one of them"
                    ),
                };
                d.error(
                    &spans[j],
                    format!(
                        "this [[node_override]] and the one at {} can match the same node ({why}) and both set {}; at most one override may set a key of a node: {fix}",
                        a.position,
                        shared.join(", "),
                    ),
                );
                ok = false;
            }
        }
    }
    ok.then_some(out)
}

fn parse_one(
    value: &Value<'_>,
    peers: Option<&[Peer]>,
    peer_names: &[String],
    d: &mut Diagnostics,
) -> Option<(NodeOverride, std::ops::Range<usize>)> {
    let table = Table::from_value(
        value,
        "each [[node_override]]",
        "[[node_override]]".to_string(),
        d,
    )?;
    table.reject_unknown_keys(KEYS, d);
    let (matcher, span) = match (table.get("names"), table.get("node_selector")) {
        (Some(_), Some(s)) => {
            d.error(
                &s.span(),
                "a [[node_override]] has either names or node_selector, not both",
            );
            return None;
        }
        (None, None) => {
            d.error(
                &table.span(),
                "[[node_override]] needs names = [...] or node_selector = { match_labels = {...} } to say which nodes it is for",
            );
            return None;
        }
        (Some(v), None) => (names(v, d).map(NodeMatch::Names), v.span()),
        (None, Some(v)) => (
            parse_selector(v, "node_selector", "[[node_override]]", d).map(NodeMatch::Selector),
            v.span(),
        ),
    };
    let asn = match table.get("asn") {
        None => Some(None),
        Some(v) => asn(v, "asn", d).map(Some),
    };
    let router_id = match table.get("router_id") {
        None => Some(None),
        Some(v) => router_id(v, d).map(Some),
    };
    let peer_overrides = match table.get("peer") {
        None => Some(BTreeMap::new()),
        Some(v) => peer_overrides(v, peers, peer_names, d),
    };
    let o = NodeOverride {
        position: d.position(span.start),
        matcher: matcher?,
        asn: asn?,
        router_id: router_id?,
        peers: peer_overrides?,
    };
    if o.fields().is_empty() {
        d.error(
            &span,
            "this [[node_override]] sets nothing: give asn, router_id or [node_override.peer.NAME] address / source_address",
        );
        return None;
    }
    Some((o, span))
}

fn names(v: &Value<'_>, d: &mut Diagnostics) -> Option<Vec<String>> {
    let names = tree::unique_list(
        v,
        "names",
        d,
        |item, d| {
            let text = tree::string(item, "each of names", d)?;
            // Kubernetes node names are DNS subdomains.
            if let Some(why) = dns_subdomain_problem(text) {
                d.error(&item.span(), format!("node name \"{text}\" {why}"));
                return None;
            }
            Some(text.to_string())
        },
        |n| format!("\"{n}\""),
    )?;
    if names.is_empty() {
        d.error(
            &v.span(),
            "names is empty: list the nodes this override is for",
        );
        return None;
    }
    Some(names)
}

fn peer_overrides(
    v: &Value<'_>,
    peers: Option<&[Peer]>,
    peer_names: &[String],
    d: &mut Diagnostics,
) -> Option<BTreeMap<String, PeerOverride>> {
    let table = Table::from_value(v, "peer", "[[node_override]] peer".to_string(), d)?;
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (key, value) in table.entries() {
        let name: &str = key.get_ref();
        if !peer_names.iter().any(|n| n == name) {
            let known: Vec<&str> = peer_names.iter().map(String::as_str).collect();
            let hint = match tree::did_you_mean(name, &known) {
                Some(s) => format!(" (did you mean \"{s}\"?)"),
                None => format!("; the peers are {}", tree::quoted_list(&known)),
            };
            d.error(
                &key.span(),
                format!("node_override names peer \"{name}\", which no [[peer]] defines{hint}"),
            );
            ok = false;
            continue;
        }
        let base = peers.and_then(|ps| ps.iter().find(|p| p.name == name));
        match peer_override(value, name, base, d) {
            Some(po) => {
                out.insert(name.to_string(), po);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn peer_override(
    v: &Value<'_>,
    name: &str,
    base: Option<&Peer>,
    d: &mut Diagnostics,
) -> Option<PeerOverride> {
    let table = Table::from_value(
        v,
        &format!("peer.{name}"),
        format!("[node_override.peer.{name}]"),
        d,
    )?;
    table.reject_unknown_keys(PEER_KEYS, d);
    if table.get("family").is_some() && table.get("address").is_none() {
        d.error(
            &table.get("family").map_or(table.span(), |f| f.span()),
            "family goes with address = \"default-gateway\"",
        );
        return None;
    }
    let address = match table.get("address") {
        None => Some(None),
        Some(a) => peer::peer_address(&table, a, d).map(Some),
    };
    let source_address = match table.get("source_address") {
        None => Some(None),
        Some(s) => tree::ip_address(s, "source_address", d).map(Some),
    };
    let (address, source_address) = (address?, source_address?);
    // The peer as it ends up on those nodes must still be one family.
    let family_of = |a: Option<PeerAddress>| a.or(base.map(|b| b.address)).map(|a| a.family());
    let source = source_address.or(base.and_then(|b| b.source_address));
    if let (Some(peer_family), Some(src)) = (family_of(address), source) {
        let src_family = PeerAddress::Ip(src).family();
        if src_family != peer_family {
            let at = table
                .get("source_address")
                .or(table.get("address"))
                .map_or(table.span(), |v| v.span());
            d.error(
                &at,
                format!(
                    "with this override peer \"{name}\" would have a {} source_address ({src}) and an {} address",
                    peer::family_word(src_family),
                    peer::family_word(peer_family)
                ),
            );
            return None;
        }
    }
    Some(PeerOverride {
        address,
        source_address,
    })
}

/// Why two matchers can pick the same node, or `None` when they cannot.
fn overlap(a: &NodeMatch, b: &NodeMatch) -> Option<String> {
    match (a, b) {
        (NodeMatch::Names(x), NodeMatch::Names(y)) => x
            .iter()
            .find(|n| y.contains(n))
            .map(|n| format!("both name node \"{n}\"")),
        (NodeMatch::Names(x), NodeMatch::Selector(_))
        | (NodeMatch::Selector(_), NodeMatch::Names(x)) => Some(format!(
            "node \"{}\" may carry labels the node_selector matches",
            x[0]
        )),
        (NodeMatch::Selector(x), NodeMatch::Selector(y)) => (!selectors_exclude(x, y))
            .then(|| "a node can carry labels both selectors match".to_string()),
    }
}

/// What a selector demands of one label key.
#[derive(Debug, Clone, Default)]
struct KeyRule {
    /// Must the label be there (`Some(true)`) or absent (`Some(false)`)?
    present: Option<bool>,
    /// The values it may have; `None`: any.
    allowed: Option<BTreeSet<String>>,
    /// Values it must not have (`NotIn`).
    excluded: BTreeSet<String>,
}

impl KeyRule {
    /// Both rules at once, or `None` when no label satisfies both.
    fn and(&self, other: &KeyRule) -> Option<KeyRule> {
        let present = match (self.present, other.present) {
            (Some(a), Some(b)) if a != b => return None,
            (a, b) => a.or(b),
        };
        let allowed = match (&self.allowed, &other.allowed) {
            (Some(a), Some(b)) => Some(a.intersection(b).cloned().collect()),
            (a, b) => a.clone().or_else(|| b.clone()),
        };
        let excluded: BTreeSet<String> = self.excluded.union(&other.excluded).cloned().collect();
        let rule = KeyRule {
            present,
            allowed,
            excluded,
        };
        rule.satisfiable().then_some(rule)
    }

    fn satisfiable(&self) -> bool {
        match &self.allowed {
            // Some listed value must survive the exclusions.
            Some(values) => {
                self.present != Some(false) && values.difference(&self.excluded).next().is_some()
            }
            // Absent satisfies NotIn; present has infinitely many values.
            None => true,
        }
    }
}

fn rules(s: &LabelSelector) -> BTreeMap<String, KeyRule> {
    let mut out: BTreeMap<String, KeyRule> = BTreeMap::new();
    let mut add = |key: &str, rule: KeyRule| {
        let merged = match out.get(key) {
            // A selector that contradicts itself matches nothing; kept as
            // the stricter rule, its pairs never overlap.
            Some(cur) => cur.and(&rule).unwrap_or(KeyRule {
                present: Some(true),
                allowed: Some(BTreeSet::new()),
                excluded: BTreeSet::new(),
            }),
            None => rule,
        };
        out.insert(key.to_string(), merged);
    };
    for (k, v) in &s.match_labels {
        add(
            k,
            KeyRule {
                present: Some(true),
                allowed: Some(BTreeSet::from([v.clone()])),
                ..KeyRule::default()
            },
        );
    }
    for r in &s.match_expressions {
        let values: BTreeSet<String> = r.values.iter().cloned().collect();
        let rule = match r.operator {
            SelectorOperator::In => KeyRule {
                present: Some(true),
                allowed: Some(values),
                ..KeyRule::default()
            },
            SelectorOperator::NotIn => KeyRule {
                excluded: values,
                ..KeyRule::default()
            },
            SelectorOperator::Exists => KeyRule {
                present: Some(true),
                ..KeyRule::default()
            },
            SelectorOperator::DoesNotExist => KeyRule {
                present: Some(false),
                ..KeyRule::default()
            },
        };
        add(&r.key, rule);
    }
    out
}

/// True when no set of labels matches both selectors.
fn selectors_exclude(a: &LabelSelector, b: &LabelSelector) -> bool {
    let (ra, rb) = (rules(a), rules(b));
    let unsatisfiable = |r: &KeyRule| !r.satisfiable();
    if ra.values().any(unsatisfiable) || rb.values().any(unsatisfiable) {
        return true;
    }
    ra.iter()
        .any(|(k, r)| rb.get(k).is_some_and(|other| r.and(other).is_none()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_router_ids_are_stable_usable_and_spread() {
        // Pinned: the ID of a name must not change between versions (a
        // change would reset every IPv6-only session on upgrade).
        assert_eq!(derived_router_id("node-1"), derived_router_id("node-1"));
        let pinned = derived_router_id("worker-v6-1");
        assert_eq!(pinned, PINNED_WORKER_V6_1, "the derivation changed");
        let mut seen = BTreeSet::new();
        for i in 0..20_000 {
            let id = derived_router_id(&format!("node-{i}"));
            let [a, ..] = id.octets();
            assert!(!id.is_unspecified(), "{id} for node-{i}");
            assert!(
                usable_first_octet(a)
                    && !id.is_loopback()
                    && !id.is_multicast()
                    && !id.is_broadcast(),
                "{id} for node-{i}"
            );
            seen.insert(id);
        }
        // 20,000 names in about 2^31.8 values: a collision or two at most.
        assert!(seen.len() >= 19_995, "only {} distinct IDs", seen.len());
        assert!(!derived_router_id("").is_unspecified());
    }

    /// `derived_router_id("worker-v6-1")`, computed once and kept.
    const PINNED_WORKER_V6_1: Ipv4Addr = Ipv4Addr::new(148, 201, 143, 233);
}

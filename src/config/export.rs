//! `[[peer.export]]` and `[[peer]] export_default`: a peer's export policy
//! (RFC 4271 §9.1.3, Phase 3: Route Dissemination), an ordered list of
//! match → set rules applied to each route after its advertisements and
//! the Service's own attributes. The rules are read and checked here; the
//! pure evaluation is `speaker::export`.
//!
//! Semantics, like an FRR route-map whose entries `continue`:
//! rules are tried in file order. A rule matches when every match key it
//! gives matches (a key left out matches anything; a list matches when any
//! of its values does). A matching rule applies its `set_*` keys to the
//! route, then its `action` decides: `"continue"` (the default) goes on to
//! the next rule, `"accept"` sends the route with what the rules so far
//! set, `"reject"` keeps it from this peer. The first matching rule whose
//! action is `accept` or `reject` is the last one tried; when none is,
//! `export_default` decides (`"accept"`: sent with what the matching rules
//! set; `"reject"`: not sent).

use std::ops::Range as Span;

use ipnet::IpNet;

use super::diagnostic::Diagnostics;
use super::schema::{DefaultValue, IntRange, Key, Range, Section, U32};
use super::tree::{self, Table, Value};
use crate::model::community::{format_community, parse_community, parse_large_community};

/// What happens to a route a rule matches, or that no terminal rule did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExportAction {
    /// Go on with the next rule (a rule's default).
    #[default]
    Continue,
    /// Send the route with what the rules so far set.
    Accept,
    /// Keep the route from this peer.
    Reject,
}

impl ExportAction {
    /// Its word in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportAction::Continue => "continue",
            ExportAction::Accept => "accept",
            ExportAction::Reject => "reject",
        }
    }

    /// Whether it ends the evaluation.
    pub fn is_terminal(self) -> bool {
        self != ExportAction::Continue
    }
}

/// `"198.51.100.0/24 le 32"`: the prefixes inside `prefix` whose length is
/// in `ge..=le` (without `ge`/`le`: exactly `prefix`; `le N` alone:
/// `prefix`'s length to N; `ge N` alone: N to the family's longest), as
/// FRR's and Cisco's prefix lists read them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixRange {
    /// The covering prefix.
    pub prefix: IpNet,
    /// Shortest length matched.
    pub ge: u8,
    /// Longest length matched.
    pub le: u8,
}

impl PrefixRange {
    /// Parses `"P"`, `"P le N"`, `"P ge N"`, `"P ge N le M"`.
    pub fn parse(text: &str) -> Result<PrefixRange, String> {
        let mut words = text.split_whitespace();
        let first = words.next().ok_or("an empty prefix range")?;
        let prefix: IpNet = first
            .parse()
            .map_err(|_| format!("\"{first}\" is not a prefix (ADDRESS/LENGTH)"))?;
        if prefix.trunc() != prefix {
            return Err(format!(
                "{prefix} has bits set past its length; write \"{}\"",
                prefix.trunc()
            ));
        }
        let max = prefix.max_prefix_len();
        let len = prefix.prefix_len();
        let (mut ge, mut le) = (None, None);
        while let Some(word) = words.next() {
            let slot = match word {
                "ge" if ge.is_none() && le.is_none() => &mut ge,
                "le" if le.is_none() => &mut le,
                _ => {
                    return Err(format!(
                        "\"{text}\": expected \"PREFIX\", \"PREFIX le N\", \"PREFIX ge N\" or \"PREFIX ge N le M\""
                    ));
                }
            };
            let n: u8 = words
                .next()
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("\"{text}\": {word} needs a length"))?;
            *slot = Some(n);
        }
        let ge_v = ge.unwrap_or(len);
        let le_v = le.unwrap_or(if ge.is_some() { max } else { len });
        if le_v > max {
            return Err(format!(
                "\"{text}\": le {le_v} is longer than an {} prefix can be ({max})",
                if prefix.addr().is_ipv4() {
                    "IPv4"
                } else {
                    "IPv6"
                }
            ));
        }
        if ge_v < len {
            return Err(format!(
                "\"{text}\": ge {ge_v} is shorter than the prefix's own length {len}"
            ));
        }
        if ge_v > le_v {
            return Err(format!(
                "\"{text}\": ge {ge_v} is greater than le {le_v}: the range is empty"
            ));
        }
        Ok(PrefixRange {
            prefix,
            ge: ge_v,
            le: le_v,
        })
    }

    /// Whether `p` is in the range.
    pub fn contains(&self, p: &IpNet) -> bool {
        let len = p.prefix_len();
        (self.ge..=self.le).contains(&len) && self.prefix.contains(p)
    }

    /// Whether every prefix of `other` is in `self`.
    pub fn covers(&self, other: &PrefixRange) -> bool {
        self.prefix.contains(&other.prefix) && self.ge <= other.ge && other.le <= self.le
    }
}

impl std::fmt::Display for PrefixRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let len = self.prefix.prefix_len();
        write!(f, "{}", self.prefix)?;
        if self.ge != len {
            write!(f, " ge {}", self.ge)?;
        }
        if self.le != len || self.ge != len {
            write!(f, " le {}", self.le)?;
        }
        Ok(())
    }
}

/// What a rule matches: every key it gives; an empty list is "any".
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportMatch {
    /// The route's prefix is in one of these ranges.
    pub prefixes: Vec<PrefixRange>,
    /// The route is under one of these `[[advertisement]]`s.
    pub advertisements: Vec<String>,
    /// The Service's namespace is one of these.
    pub namespaces: Vec<String>,
    /// The route's tenant is one of these `[[tenant]]`s.
    pub tenants: Vec<String>,
    /// The route carries one of these communities (after the rules before).
    pub communities: Vec<u32>,
    /// The route came from one of these sources (`[[source]]` names).
    pub sources: Vec<String>,
}

impl ExportMatch {
    /// Matches every route.
    pub fn is_any(&self) -> bool {
        *self == ExportMatch::default()
    }

    /// Whether every route `other` matches, `self` matches too, as far as
    /// can be told list by list (a `false` may still be a subset).
    pub fn covers(&self, other: &ExportMatch) -> bool {
        fn names<T: PartialEq>(mine: &[T], theirs: &[T]) -> bool {
            mine.is_empty() || (!theirs.is_empty() && theirs.iter().all(|t| mine.contains(t)))
        }
        let prefixes = self.prefixes.is_empty()
            || (!other.prefixes.is_empty()
                && other
                    .prefixes
                    .iter()
                    .all(|o| self.prefixes.iter().any(|s| s.covers(o))));
        prefixes
            && names(&self.advertisements, &other.advertisements)
            && names(&self.namespaces, &other.namespaces)
            && names(&self.tenants, &other.tenants)
            && names(&self.communities, &other.communities)
            && names(&self.sources, &other.sources)
    }
}

/// What a matching rule changes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportSet {
    /// COMMUNITIES added.
    pub add_communities: Vec<u32>,
    /// COMMUNITIES taken off.
    pub remove_communities: Vec<u32>,
    /// LARGE_COMMUNITY values added.
    pub add_large_communities: Vec<(u32, u32, u32)>,
    /// Replaces LOCAL_PREF (sent to iBGP peers only, RFC 4271 §5.1.5).
    pub local_pref: Option<u32>,
    /// Replaces MULTI_EXIT_DISC.
    pub med: Option<u32>,
    /// Our AS this many more times (added to the route's prepend).
    pub prepend: Option<u8>,
}

impl ExportSet {
    /// Sets nothing.
    pub fn is_empty(&self) -> bool {
        *self == ExportSet::default()
    }

    /// In words, for `explain`: "add communities 65001:1, med 10".
    pub fn describe(&self) -> String {
        let mut out = Vec::new();
        let list = |c: &[u32]| {
            c.iter()
                .map(|c| format_community(*c))
                .collect::<Vec<_>>()
                .join(" ")
        };
        if !self.add_communities.is_empty() {
            out.push(format!("add communities {}", list(&self.add_communities)));
        }
        if !self.remove_communities.is_empty() {
            out.push(format!(
                "remove communities {}",
                list(&self.remove_communities)
            ));
        }
        if !self.add_large_communities.is_empty() {
            let l: Vec<String> = self
                .add_large_communities
                .iter()
                .map(|(a, b, c)| format!("{a}:{b}:{c}"))
                .collect();
            out.push(format!("add large communities {}", l.join(" ")));
        }
        if let Some(lp) = self.local_pref {
            out.push(format!("local-pref {lp}"));
        }
        if let Some(med) = self.med {
            out.push(format!("med {med}"));
        }
        if let Some(p) = self.prepend {
            out.push(format!("prepend {p}"));
        }
        out.join(", ")
    }
}

/// One `[[peer.export]]` rule.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ExportRule {
    /// Its name, for `explain` and logs (else its 1-based index).
    pub name: Option<String>,
    /// What it matches.
    pub matches: ExportMatch,
    /// What it sets on a match.
    pub set: ExportSet,
    /// What follows a match.
    pub action: ExportAction,
}

/// A peer's export policy: `[[peer.export]]` in order, then
/// `export_default`. The default (no rules, accept) sends every route
/// as its advertisements made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportPolicy {
    /// `[[peer.export]]`, in file order.
    pub rules: Vec<ExportRule>,
    /// `export_default`: `Accept` or `Reject`.
    pub default: ExportAction,
}

impl Default for ExportPolicy {
    fn default() -> Self {
        ExportPolicy {
            rules: Vec::new(),
            default: ExportAction::Accept,
        }
    }
}

impl ExportPolicy {
    /// Leaves every route as it is.
    pub fn is_pass_through(&self) -> bool {
        self.rules.is_empty() && self.default == ExportAction::Accept
    }
}

/// Longest `set_prepend`: as the per-Service prepend.
pub const MAX_EXPORT_PREPEND: u8 = crate::model::attributes::MAX_PREPEND;
const EXPORT_PREPEND: IntRange = IntRange {
    min: 1,
    max: MAX_EXPORT_PREPEND as i128,
};

/// A name a rule refers to, checked once the whole file is read.
#[derive(Debug, Clone)]
pub(crate) struct NameRef {
    /// "advertisement", "tenant", "source".
    pub kind: &'static str,
    pub name: String,
    pub span: Span<usize>,
}

/// What the cross-checks of a peer's policy need beyond the policy.
#[derive(Debug, Clone, Default)]
pub(crate) struct PolicySpans {
    /// Names of advertisements, tenants and sources the rules use.
    pub names: Vec<NameRef>,
    /// Where a rule sets LOCAL_PREF (warned about on an eBGP peer).
    pub local_pref: Vec<Span<usize>>,
}

/// Keys of each `[[peer.export]]` rule.
pub(crate) const RULE_KEYS: &[Key] = &[
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Text("none (`explain` shows the rule's number, from 1)"),
        range: Range::Any,
        meaning: "A name for the rule, shown by `explain`; unique within the peer.",
    },
    Key {
        name: "prefixes",
        kind: "array of strings",
        default: DefaultValue::Text("any prefix"),
        range: Range::Any,
        meaning: "Prefix ranges, as prefix lists write them: `\"198.51.100.0/24\"` (that prefix alone), `\"198.51.100.0/24 le 32\"` (it and everything inside it up to /32), `\"198.51.100.0/24 ge 28 le 32\"`, `\"2001:db8::/32 ge 64\"` (64 up to 128). `ge` is at least the prefix's length, `ge` ≤ `le` ≤ the family's longest (32 or 128). The rule matches a route in any of them.",
    },
    Key {
        name: "advertisements",
        kind: "array of strings",
        default: DefaultValue::Text("any"),
        range: Range::Any,
        meaning: "The route is advertised under one of these `[[advertisement]]`s.",
    },
    Key {
        name: "namespaces",
        kind: "array of strings",
        default: DefaultValue::Text("any"),
        range: Range::Any,
        meaning: "The route's Service is in one of these namespaces (routes without a Service, as the VIP file's, match none).",
    },
    Key {
        name: "tenants",
        kind: "array of strings",
        default: DefaultValue::Text("any"),
        range: Range::Any,
        meaning: "The route belongs to one of these `[[tenant]]`s (routes of no tenant match none).",
    },
    Key {
        name: "communities",
        kind: "array of strings",
        default: DefaultValue::Text("any"),
        range: Range::Any,
        meaning: "The route carries one of these communities, as the rules before this one left it (same forms as `[[advertisement]] communities`).",
    },
    Key {
        name: "sources",
        kind: "array of strings",
        default: DefaultValue::Text("any"),
        range: Range::Any,
        meaning: "The route came from one of these sources (`[[source]]` names, `\"runtime\"` for `holdfast route`).",
    },
    Key {
        name: "set_add_communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "COMMUNITIES added to the route.",
    },
    Key {
        name: "set_remove_communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "COMMUNITIES taken off the route (after the adds of earlier rules); not also in `set_add_communities` of the same rule.",
    },
    Key {
        name: "set_add_large_communities",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "LARGE_COMMUNITY values added to the route (`\"GLOBAL:LOCAL1:LOCAL2\"`).",
    },
    Key {
        name: "set_local_pref",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(U32),
        meaning: "Replaces LOCAL_PREF. Sent to iBGP peers only (RFC 4271 §5.1.5): `check` warns about it on an eBGP peer, where it has no effect.",
    },
    Key {
        name: "set_med",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(U32),
        meaning: "Replaces MULTI_EXIT_DISC.",
    },
    Key {
        name: "set_prepend",
        kind: "integer",
        default: DefaultValue::Text("none"),
        range: Range::Int(EXPORT_PREPEND),
        meaning: "Our AS this many more times in the AS_PATH, added to the route's own prepend (eBGP only, like every prepend).",
    },
    Key {
        name: "action",
        kind: "string",
        default: DefaultValue::Text("`\"continue\"`"),
        range: Range::Text(|| "\"continue\", \"accept\" or \"reject\"".to_string()),
        meaning: "After a match: `\"continue\"` to the next rule, `\"accept\"` (send the route with what the rules so far set; no later rule is tried) or `\"reject\"` (keep it from this peer; no later rule is tried).",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[[peer.export]]`",
    intro: "A peer's export policy (RFC 4271 §9.1.3): ordered rules, each a match (every key given must match; a list matches when one of its values does) and what to set. Rules are tried in order; a matching rule applies its `set_*` keys, then `action`: `\"continue\"` goes on, `\"accept\"` or `\"reject\"` ends it. When no rule ends it, `[[peer]] export_default` decides. `check` reports a rule that can never be tried (after an earlier `accept` or `reject` rule whose match covers it). A change of the rules alone re-sends what changed to that peer, with no session reset.",
    keys: RULE_KEYS,
};

fn communities(
    table: &Table<'_, '_>,
    key: &str,
    d: &mut Diagnostics,
) -> Option<Vec<(u32, Span<usize>)>> {
    let Some(v) = table.get(key) else {
        return Some(Vec::new());
    };
    let items = tree::array(v, key, d)?;
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let parsed = tree::string(item, key, d).and_then(|text| {
            parse_community(text)
                .map_err(|why| d.error(&item.span(), why))
                .ok()
        });
        match parsed {
            Some(c) => out.push((c, item.span())),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn names(
    table: &Table<'_, '_>,
    key: &str,
    kind: Option<&'static str>,
    spans: &mut PolicySpans,
    d: &mut Diagnostics,
) -> Option<Vec<String>> {
    let Some(v) = table.get(key) else {
        return Some(Vec::new());
    };
    let out = tree::unique_list(
        v,
        key,
        d,
        |item, d| {
            let text = tree::string(item, key, d)?;
            if let Some(kind) = kind {
                spans.names.push(NameRef {
                    kind,
                    name: text.to_string(),
                    span: item.span(),
                });
            }
            Some(text.to_string())
        },
        |n| format!("\"{n}\""),
    )?;
    if out.is_empty() {
        d.error(
            &v.span(),
            format!("{key} is empty: leave it out to match any"),
        );
        return None;
    }
    Some(out)
}

fn parse_rule(
    value: &Value<'_>,
    index: usize,
    spans: &mut PolicySpans,
    d: &mut Diagnostics,
) -> Option<ExportRule> {
    let table = Table::from_value(value, "export", "[[peer.export]]".to_string(), d)?;
    table.reject_unknown_keys(RULE_KEYS, d);
    let name = match table.get("name") {
        None => Some(None),
        Some(v) => tree::string(v, "name", d).and_then(|n| {
            if let Some(why) = super::peer::name_problem(n) {
                d.error(&v.span(), format!("export rule name \"{n}\" {why}"));
                return None;
            }
            Some(Some(n.to_string()))
        }),
    };
    let prefixes = match table.get("prefixes") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "prefixes",
            d,
            |item, d| {
                let text = tree::string(item, "prefixes", d)?;
                PrefixRange::parse(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |r| format!("prefix range \"{r}\""),
        ),
    };
    let advertisements = names(&table, "advertisements", Some("advertisement"), spans, d);
    let namespaces = names(&table, "namespaces", None, spans, d);
    let tenants = names(&table, "tenants", Some("tenant"), spans, d);
    let sources = names(&table, "sources", Some("source"), spans, d);
    let match_communities = communities(&table, "communities", d);
    let add = communities(&table, "set_add_communities", d);
    let remove = communities(&table, "set_remove_communities", d);
    if let (Some(add), Some(remove)) = (&add, &remove) {
        for (c, span) in remove {
            if add.iter().any(|(a, _)| a == c) {
                d.error(
                    span,
                    format!(
                        "community {} is both added and removed by this rule: a contradiction; keep one",
                        format_community(*c)
                    ),
                );
            }
        }
    }
    let large = match table.get("set_add_large_communities") {
        None => Some(Vec::new()),
        Some(v) => tree::unique_list(
            v,
            "set_add_large_communities",
            d,
            |item, d| {
                let text = tree::string(item, "set_add_large_communities", d)?;
                parse_large_community(text)
                    .map_err(|why| d.error(&item.span(), why))
                    .ok()
            },
            |(a, b, c)| format!("large community {a}:{b}:{c}"),
        ),
    };
    let local_pref = match table.get("set_local_pref") {
        None => Some(None),
        Some(v) => {
            spans.local_pref.push(v.span());
            tree::integer_in(v, "set_local_pref", U32, d).map(Some)
        }
    };
    let med = match table.get("set_med") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "set_med", U32, d).map(Some),
    };
    let prepend = match table.get("set_prepend") {
        None => Some(None),
        Some(v) => tree::integer_in(v, "set_prepend", EXPORT_PREPEND, d).map(Some),
    };
    let action = match table.get("action") {
        None => Some(ExportAction::Continue),
        Some(v) => tree::keyword(
            v,
            "action",
            "action",
            &[
                ("continue", ExportAction::Continue),
                ("accept", ExportAction::Accept),
                ("reject", ExportAction::Reject),
            ],
            d,
        ),
    };
    let strip = |v: Option<Vec<(u32, Span<usize>)>>| v.map(|v| v.into_iter().map(|(c, _)| c));
    let rule = ExportRule {
        name: name?,
        matches: ExportMatch {
            prefixes: prefixes?,
            advertisements: advertisements?,
            namespaces: namespaces?,
            tenants: tenants?,
            communities: strip(match_communities)?.collect(),
            sources: sources?,
        },
        set: ExportSet {
            add_communities: strip(add.clone())?.collect(),
            remove_communities: strip(remove.clone())?.collect(),
            add_large_communities: large?,
            local_pref: local_pref?,
            med: med?,
            prepend: prepend?,
        },
        action: action?,
    };
    if add.is_some_and(|a| {
        remove.is_some_and(|r| r.iter().any(|(c, _)| a.iter().any(|(x, _)| x == c)))
    }) {
        return None;
    }
    if rule.action == ExportAction::Continue && rule.set.is_empty() {
        d.warning(
            &table.span(),
            format!(
                "export rule {} sets nothing and neither accepts nor rejects: it has no effect",
                rule.name.clone().unwrap_or_else(|| (index + 1).to_string())
            ),
        );
    }
    Some(rule)
}

/// `[[peer.export]]` and `export_default` of one `[[peer]]` table.
pub(crate) fn parse_policy(
    table: &Table<'_, '_>,
    spans: &mut PolicySpans,
    d: &mut Diagnostics,
) -> Option<ExportPolicy> {
    let default = match table.get("export_default") {
        None => Some(ExportAction::Accept),
        Some(v) => tree::keyword(
            v,
            "export_default",
            "export_default",
            &[
                ("accept", ExportAction::Accept),
                ("reject", ExportAction::Reject),
            ],
            d,
        ),
    };
    let Some(list) = table.get("export") else {
        return Some(ExportPolicy {
            rules: Vec::new(),
            default: default?,
        });
    };
    let items = tree::array_of_tables(list, "peer.export", d)?;
    let mut rules = Vec::with_capacity(items.len());
    let mut ok = true;
    let mut seen_names: Vec<(String, usize)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match parse_rule(item, i, spans, d) {
            Some(rule) => {
                if let Some(name) = &rule.name {
                    if let Some((_, first)) = seen_names.iter().find(|(n, _)| n == name) {
                        d.error(
                            &item.span(),
                            format!(
                                "duplicate export rule name \"{name}\" (first used by rule {first})"
                            ),
                        );
                        ok = false;
                    }
                    seen_names.push((name.clone(), i + 1));
                }
                rules.push((rule, item.span()));
            }
            None => ok = false,
        }
    }
    // Rules that can never be tried: after an earlier terminal rule whose
    // match covers theirs.
    for (j, (rule, span)) in rules.iter().enumerate() {
        if let Some((i, _)) = rules[..j].iter().enumerate().find(|(_, (earlier, _))| {
            earlier.action.is_terminal() && earlier.matches.covers(&rule.matches)
        }) {
            let earlier = &rules[i].0;
            let why = if earlier.matches.is_any() {
                "matches every route"
            } else {
                "matches every route this one does"
            };
            d.warning(
                span,
                format!(
                    "export rule {} is never tried: rule {} before it {why} and ends with action \"{}\"",
                    label(rule, j),
                    label(earlier, i),
                    earlier.action.as_str()
                ),
            );
        }
    }
    Some(ExportPolicy {
        rules: if ok {
            rules.into_iter().map(|(r, _)| r).collect()
        } else {
            return None;
        },
        default: default?,
    })
}

/// A rule as `explain` and `check` name it: its name, else its number
/// from 1.
pub fn label(rule: &ExportRule, index: usize) -> String {
    match &rule.name {
        Some(n) => format!("{} (\"{n}\")", index + 1),
        None => (index + 1).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_ranges_read_as_prefix_lists_do() {
        let r = PrefixRange::parse("198.51.100.0/24 le 32").unwrap();
        assert_eq!((r.ge, r.le), (24, 32));
        assert!(r.contains(&"198.51.100.7/32".parse().unwrap()));
        assert!(!r.contains(&"198.51.0.0/16".parse().unwrap()));
        let exact = PrefixRange::parse("198.51.100.0/24").unwrap();
        assert!(!exact.contains(&"198.51.100.7/32".parse().unwrap()));
        let ge = PrefixRange::parse("2001:db8::/32 ge 64").unwrap();
        assert_eq!((ge.ge, ge.le), (64, 128));
        assert_eq!(ge.to_string(), "2001:db8::/32 ge 64 le 128");
        assert_eq!(r.to_string(), "198.51.100.0/24 le 32");
        for (bad, says) in [
            ("198.51.100.0/24 ge 30 le 28", "greater than le"),
            ("198.51.100.0/24 le 33", "longer than an IPv4 prefix"),
            ("198.51.100.0/24 ge 16", "shorter than the prefix"),
            ("198.51.100.1/24", "bits set"),
            ("198.51.100.0/24 le", "needs a length"),
            ("198.51.100.0/24 le 30 ge 28", "expected"),
            ("nonsense", "not a prefix"),
        ] {
            let e = PrefixRange::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn coverage_is_list_by_list() {
        let any = ExportMatch::default();
        let some = ExportMatch {
            namespaces: vec!["a".into()],
            ..Default::default()
        };
        assert!(any.covers(&some));
        assert!(!some.covers(&any));
        let wide = ExportMatch {
            prefixes: vec![PrefixRange::parse("198.51.100.0/24 le 32").unwrap()],
            ..Default::default()
        };
        let narrow = ExportMatch {
            prefixes: vec![PrefixRange::parse("198.51.100.128/25 ge 32").unwrap()],
            namespaces: vec!["a".into()],
            ..Default::default()
        };
        assert!(wide.covers(&narrow));
        assert!(!narrow.covers(&wide));
    }
}

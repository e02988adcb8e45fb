//! `[[tenant]]`: a tenant's namespaces and the peers its VIPs may reach.
//!
//! A route belongs to a tenant when the VIP file names the tenant in its
//! entry (`tenant = "NAME"`), or when its Service's namespace is one of
//! the tenant's `namespaces`. A tenant's route goes only to the tenant's
//! `peers` (before any export policy: a peer's `[[peer.export]]` can keep
//! a route from it, never send one its tenant may not reach). A route of
//! no tenant goes where its advertisements say, as before tenants.

use super::diagnostic::Diagnostics;
use super::schema::{DefaultValue, Key, Range, Section};
use super::tree::{self, Table, Value};

/// One `[[tenant]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tenant {
    /// Unique name, as `tenant = "NAME"` in the VIP file and
    /// `[[peer.export]] tenants` name it.
    pub name: String,
    /// Kubernetes namespaces whose Services are the tenant's; a namespace
    /// is in at most one tenant.
    pub namespaces: Vec<String>,
    /// Namespaces whose labels match are the tenant's too (a namespace
    /// labelled `holdfast.dev/tenant: acme`, say), unless `namespaces` of
    /// some tenant lists them: the config's list comes first.
    pub namespace_selector: Option<super::selector::LabelSelector>,
    /// The peers the tenant's routes may reach; at least one.
    pub peers: Vec<String>,
}

impl Tenant {
    /// Whether its `namespace_selector` reads a namespace label other than
    /// `kubernetes.io/metadata.name` (then Namespaces are watched).
    pub fn reads_namespace_labels(&self) -> bool {
        self.namespace_selector.as_ref().is_some_and(|s| {
            s.match_labels
                .keys()
                .chain(s.match_expressions.iter().map(|e| &e.key))
                .any(|k| k != super::NAMESPACE_NAME_LABEL)
        })
    }

    /// Whether its routes may go to `peer`.
    pub fn reaches(&self, peer: &str) -> bool {
        self.peers.iter().any(|p| p == peer)
    }
}

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "Unique name (letters, digits, `-`, `_`, `.`; at most 64): what a VIP file entry's `tenant` and `[[peer.export]] tenants` name.",
    },
    Key {
        name: "namespaces",
        kind: "array of strings",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "Kubernetes namespaces whose Services belong to this tenant; a namespace belongs to at most one tenant. Services of namespaces of no tenant go where their advertisements say.",
    },
    Key {
        name: "namespace_selector",
        kind: "table",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "`{ match_labels = {...}, match_expressions = [...] }`: namespaces whose labels match are this tenant's too, e.g. `{ match_labels = { \"holdfast.dev/tenant\" = \"acme\" } }`. A namespace a tenant's `namespaces` lists stays that tenant's; one matched by several selectors is the first such tenant's. A selector on labels other than `kubernetes.io/metadata.name` makes holdfast watch Namespaces (RBAC: list and watch on namespaces).",
    },
    Key {
        name: "peers",
        kind: "array of strings",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "The `[[peer]]`s this tenant's routes may reach (not empty): a tenant's route is sent to no other peer, whatever its advertisements say; `explain` says so per peer.",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[[tenant]]` (any number)",
    intro: "Tenants: which peers a tenant's VIPs may reach. A VIP is a tenant's when its VIP file entry says `tenant = \"NAME\"` or its Service's namespace is in the tenant's `namespaces` or matches its `namespace_selector`.",
    keys: KEYS,
};

/// Every `[[tenant]]`, checked against the peers' names; and the names
/// read, even of tenants with problems (so that rules naming them are not
/// also reported as naming an unknown tenant).
pub(crate) fn parse_tenants(
    list: &Value<'_>,
    peer_names: &[String],
    d: &mut Diagnostics,
) -> (Option<Vec<Tenant>>, Vec<String>) {
    let mut names_read = Vec::new();
    let Some(items) = tree::array_of_tables(list, "tenant", d) else {
        return (None, names_read);
    };
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    let mut namespaces_seen: Vec<(String, String)> = Vec::new();
    for item in items {
        let Some(table) = Table::from_value(item, "each [[tenant]]", "[[tenant]]".into(), d) else {
            ok = false;
            continue;
        };
        table.reject_unknown_keys(KEYS, d);
        let name = table.required("name", d).and_then(|v| {
            let text = tree::string(v, "name", d)?;
            if let Some(why) = super::peer::name_problem(text) {
                d.error(&v.span(), format!("tenant name \"{text}\" {why}"));
                return None;
            }
            if names_read.iter().any(|n| n == text) {
                d.error(&v.span(), format!("duplicate tenant name \"{text}\""));
                return None;
            }
            names_read.push(text.to_string());
            Some(text.to_string())
        });
        let namespaces = match table.get("namespaces") {
            None => Some(Vec::new()),
            Some(v) => tree::unique_list(
                v,
                "namespaces",
                d,
                |item, d| {
                    let ns = tree::string(item, "namespaces", d)?;
                    if let Some((_, other)) = namespaces_seen.iter().find(|(n, _)| n == ns) {
                        d.error(
                            &item.span(),
                            format!(
                                "namespace \"{ns}\" already belongs to tenant \"{other}\": a namespace belongs to at most one tenant"
                            ),
                        );
                        return None;
                    }
                    Some(ns.to_string())
                },
                |n| format!("namespace \"{n}\""),
            ),
        };
        if let (Some(name), Some(namespaces)) = (&name, &namespaces) {
            for ns in namespaces {
                namespaces_seen.push((ns.clone(), name.clone()));
            }
        }
        let namespace_selector = match table.get("namespace_selector") {
            None => Some(None),
            Some(v) => {
                super::selector::parse_selector(v, "namespace_selector", "[[tenant]]", d).map(Some)
            }
        };
        let peers = table.required("peers", d).and_then(|v| {
            let list = tree::unique_list(
                v,
                "peers",
                d,
                |item, d| {
                    let p = tree::string(item, "peers", d)?;
                    if !peer_names.iter().any(|n| n == p) {
                        let known: Vec<&str> = peer_names.iter().map(String::as_str).collect();
                        let mut m = format!("tenant peer \"{p}\" is not a [[peer]] name");
                        if let Some(s) = tree::did_you_mean(p, &known) {
                            m.push_str(&format!(" (did you mean \"{s}\"?)"));
                        }
                        d.error(&item.span(), m);
                        return None;
                    }
                    Some(p.to_string())
                },
                |n| format!("peer \"{n}\""),
            )?;
            if list.is_empty() {
                d.error(
                    &v.span(),
                    "peers is empty: a tenant reaches at least one peer",
                );
                return None;
            }
            Some(list)
        });
        match (name, namespaces, namespace_selector, peers) {
            (Some(name), Some(namespaces), Some(namespace_selector), Some(peers)) => {
                out.push(Tenant {
                    name,
                    namespaces,
                    namespace_selector,
                    peers,
                });
            }
            _ => ok = false,
        }
    }
    (ok.then_some(out), names_read)
}

//! A peer's export policy and its tenant gate, applied to one route's
//! attributes (RFC 4271 §9.1.3, Phase 3: Route Dissemination: the policy
//! that decides which routes go to which peer, with which attributes).
//! Pure: the same config, peer, prefix, route and attributes give the same
//! answer. Applied after the advertisements and the Service's own
//! attributes (`attrs_for_peer`), per peer, while the peers' tables are
//! built (`peer_tables`); `explain` asks the same functions why.
//!
//! The rules' semantics are written beside their config
//! (`config::export`): in order; a match applies its sets, then
//! `continue` goes on, `accept` sends, `reject` does not; no terminal
//! match: `export_default`.

use ipnet::IpNet;

use crate::config::{Config, ExportAction, ExportPolicy, ExportRule, Peer};
use crate::model::{Route, RouteAttrs};

/// What the rules look at besides the attributes.
#[derive(Clone, Copy, Debug)]
pub struct Subject<'a> {
    /// The route's prefix.
    pub prefix: &'a IpNet,
    /// The route (its advertisements, Service, tenant and source).
    pub route: &'a Route,
    /// Its tenant: the VIP file's `tenant`, else its namespace's.
    pub tenant: Option<&'a str>,
    /// The name of its source.
    pub source: &'a str,
}

impl<'a> Subject<'a> {
    /// The facts of `route` at `prefix` under `config`.
    pub fn new(config: &'a Config, prefix: &'a IpNet, route: &'a Route) -> Subject<'a> {
        Subject {
            prefix,
            route,
            tenant: tenant_of(config, route),
            source: config.source_name(route.source),
        }
    }

    fn namespace(&self) -> Option<&'a str> {
        let service: &'a str = self.route.service.as_deref()?;
        service.split_once('/').map(|(ns, _)| ns)
    }
}

/// The route's tenant: the one its VIP file entry names, else the one
/// whose `namespaces` hold its Service's namespace.
pub fn tenant_of<'a>(config: &'a Config, route: &'a Route) -> Option<&'a str> {
    if let Some(t) = route.tenant.as_deref() {
        return Some(t);
    }
    let service: &str = route.service.as_deref()?;
    let (ns, _) = service.split_once('/')?;
    config.tenant_of_namespace(ns).map(|t| t.name.as_str())
}

/// What decided a route's fate at one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No policy, no tenant: sent as the advertisements made it.
    PassThrough,
    /// The route's tenant may not reach this peer (`[[tenant]] peers`).
    Tenant(String),
    /// This rule (index in the peer's rules) matched with `accept` or
    /// `reject`.
    Rule(usize, ExportAction),
    /// No terminal rule matched: `export_default`.
    Default(ExportAction),
}

/// The policy's answer for one route at one peer, with the rules that
/// matched (for `explain`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The attributes to send, or `None`: not sent.
    pub attrs: Option<RouteAttrs>,
    /// The rules that matched, in order (indices into the peer's rules).
    pub matched: Vec<usize>,
    /// What decided.
    pub decision: Decision,
}

fn rule_matches(rule: &ExportRule, s: &Subject<'_>, attrs: &RouteAttrs) -> bool {
    let m = &rule.matches;
    (m.prefixes.is_empty() || m.prefixes.iter().any(|r| r.contains(s.prefix)))
        && (m.advertisements.is_empty()
            || m.advertisements
                .iter()
                .any(|a| s.route.advertisements.contains(a)))
        && (m.namespaces.is_empty()
            || s.namespace()
                .is_some_and(|ns| m.namespaces.iter().any(|n| n == ns)))
        && (m.tenants.is_empty() || s.tenant.is_some_and(|t| m.tenants.iter().any(|n| n == t)))
        && (m.communities.is_empty() || m.communities.iter().any(|c| attrs.communities.contains(c)))
        && (m.sources.is_empty() || m.sources.iter().any(|n| n == s.source))
}

fn apply_set(rule: &ExportRule, attrs: &mut RouteAttrs) {
    let set = &rule.set;
    attrs
        .communities
        .extend(set.add_communities.iter().copied());
    attrs
        .communities
        .retain(|c| !set.remove_communities.contains(c));
    attrs
        .large_communities
        .extend(set.add_large_communities.iter().copied());
    if set.local_pref.is_some() {
        attrs.local_pref = set.local_pref;
    }
    if set.med.is_some() {
        attrs.med = set.med;
    }
    if let Some(p) = set.prepend {
        attrs.as_path_prepend = attrs.as_path_prepend.saturating_add(p);
    }
}

/// `policy` applied to a route whose advertisements give `attrs`.
pub fn apply(policy: &ExportPolicy, s: &Subject<'_>, mut attrs: RouteAttrs) -> Verdict {
    let mut matched = Vec::new();
    for (i, rule) in policy.rules.iter().enumerate() {
        if !rule_matches(rule, s, &attrs) {
            continue;
        }
        matched.push(i);
        match rule.action {
            ExportAction::Reject => {
                return Verdict {
                    attrs: None,
                    matched,
                    decision: Decision::Rule(i, ExportAction::Reject),
                };
            }
            action => {
                apply_set(rule, &mut attrs);
                if action == ExportAction::Accept {
                    return Verdict {
                        attrs: Some(attrs.canonical()),
                        matched,
                        decision: Decision::Rule(i, action),
                    };
                }
            }
        }
    }
    Verdict {
        attrs: (policy.default == ExportAction::Accept).then(|| attrs.canonical()),
        matched,
        decision: Decision::Default(policy.default),
    }
}

/// The tenant gate, then `peer`'s policy, for a route that its
/// advertisements send to `peer` with `attrs`. A tenant the config does
/// not define reaches no peer.
pub fn for_peer(config: &Config, peer: &Peer, s: &Subject<'_>, attrs: RouteAttrs) -> Verdict {
    if let Some(t) = s.tenant
        && !config.tenant(t).is_some_and(|t| t.reaches(&peer.name))
    {
        return Verdict {
            attrs: None,
            matched: Vec::new(),
            decision: Decision::Tenant(t.to_string()),
        };
    }
    if peer.export.is_pass_through() {
        return Verdict {
            attrs: Some(attrs),
            matched: Vec::new(),
            decision: Decision::PassThrough,
        };
    }
    apply(&peer.export, s, attrs)
}

/// The words of `explain` for a verdict at `peer`.
pub fn describe(peer: &Peer, v: &Verdict) -> String {
    let rules = &peer.export.rules;
    let effects: Vec<String> = v
        .matched
        .iter()
        .filter(|&&i| rules[i].action != ExportAction::Reject && !rules[i].set.is_empty())
        .map(|&i| {
            format!(
                "export rule {} set {}",
                crate::config::export::label(&rules[i], i),
                rules[i].set.describe()
            )
        })
        .collect();
    let end = match &v.decision {
        Decision::PassThrough => return String::new(),
        Decision::Tenant(t) => {
            return format!("tenant \"{t}\" may not reach this peer ([[tenant]] peers)");
        }
        Decision::Rule(i, a) => format!(
            "export rule {} {}",
            crate::config::export::label(&rules[*i], *i),
            if *a == ExportAction::Reject {
                "rejects it"
            } else {
                "accepts it"
            }
        ),
        Decision::Default(a) => format!("export_default {}", a.as_str()),
    };
    if effects.is_empty() {
        end
    } else {
        format!("{}; {end}", effects.join("; "))
    }
}

#[cfg(test)]
#[path = "export_tests.rs"]
mod tests;

//! Per-Service path attributes from annotations (`holdfast.dev/communities`,
//! `holdfast.dev/large-communities`, `holdfast.dev/local-pref`,
//! `holdfast.dev/med`, `holdfast.dev/as-path-prepend`): read, checked, and
//! kept only where an advertisement of the VIP allows them
//! (`allow_service_attributes`). Pure: the watcher layer turns the problems
//! into Warning Events, `explain` quotes them.
//!
//! Values are comma-separated lists (communities) or one number written as
//! a string (`"200"`). A value that does not parse, or that no
//! advertisement of the VIP allows, is refused: the route keeps the
//! advertisement's attributes for that attribute, and the other
//! annotations still apply.

use std::collections::BTreeSet;

use super::records::ServiceRecord;

use crate::config::{
    Advertisement, ServiceAttribute, format_community, parse_community, parse_large_community,
};
use crate::model::ServiceAttributes;

/// Longest prepend accepted: a longer path only ever loses, and a long one
/// makes the route look broken to operators and some routers' limits.
pub const MAX_PREPEND: u8 = 10;

/// What a Service's annotations ask for, before the advertisements have a
/// say: the parsed values and, per attribute, why its annotation could not
/// be read.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Requested {
    pub values: ServiceAttributes,
    /// The attributes whose annotation is present and parsed.
    pub present: BTreeSet<ServiceAttribute>,
    /// One line per annotation that did not parse.
    pub problems: Vec<String>,
}

fn number<T: std::str::FromStr>(text: &str, max: u64) -> Option<T> {
    let t = text.trim();
    let n: u64 = t.parse().ok()?;
    (n <= max).then(|| t.parse().ok()).flatten()
}

/// True when `service` carries any of the attribute annotations.
pub(crate) fn annotated(service: &ServiceRecord) -> bool {
    ServiceAttribute::ALL
        .iter()
        .any(|attr| service.annotations.contains_key(attr.annotation()))
}

/// Reads the attribute annotations of `service`.
pub(crate) fn requested(service: &ServiceRecord) -> Requested {
    let mut out = Requested::default();
    let annotations = &service.annotations;
    for attr in ServiceAttribute::ALL {
        let name = attr.annotation();
        let Some(text) = annotations.get(name) else {
            continue;
        };
        let problem = match attr {
            ServiceAttribute::Communities => {
                list(text, parse_community).map(|v| out.values.communities = v)
            }
            ServiceAttribute::LargeCommunities => {
                list(text, parse_large_community).map(|v| out.values.large_communities = v)
            }
            ServiceAttribute::LocalPref => number(text, u64::from(u32::MAX))
                .map(|n| out.values.local_pref = Some(n))
                .ok_or_else(|| "expected a number in 0..=4294967295".to_string()),
            ServiceAttribute::Med => number(text, u64::from(u32::MAX))
                .map(|n| out.values.med = Some(n))
                .ok_or_else(|| "expected a number in 0..=4294967295".to_string()),
            ServiceAttribute::AsPathPrepend => number(text, u64::from(MAX_PREPEND))
                .map(|n| out.values.as_path_prepend = Some(n))
                .ok_or_else(|| format!("expected a count in 0..={MAX_PREPEND}")),
        };
        match problem {
            Ok(()) => {
                out.present.insert(attr);
            }
            Err(why) => out.problems.push(format!("{name} is \"{text}\": {why}")),
        }
    }
    out
}

/// A comma-separated list, every element parsed; an empty list is an error
/// (the annotation says something is wanted and names nothing).
fn list<T: Ord>(text: &str, parse: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            continue;
        }
        out.push(parse(item)?);
    }
    if out.is_empty() {
        return Err("the list is empty".to_string());
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// What the VIP carries once its advertisements have had their say, and
/// what was refused (one line each, naming the annotation and why).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Verdict {
    /// `None` when nothing is honoured.
    pub attributes: Option<ServiceAttributes>,
    /// Attributes honoured, by at least one of the advertisements.
    pub honoured: Vec<ServiceAttribute>,
    pub refused: Vec<String>,
}

/// Keeps of `requested` what at least one of `advertisements` allows.
pub(crate) fn judge<'a>(
    requested: &Requested,
    advertisements: impl Iterator<Item = &'a Advertisement> + Clone,
) -> Verdict {
    let mut verdict = Verdict {
        refused: requested.problems.clone(),
        ..Verdict::default()
    };
    let mut kept = requested.values.clone();
    for attr in &requested.present {
        if advertisements.clone().any(|a| a.allows(*attr)) {
            verdict.honoured.push(*attr);
            continue;
        }
        let names: Vec<String> = advertisements
            .clone()
            .map(|a| format!("\"{}\"", a.name))
            .collect();
        verdict.refused.push(format!(
            "{} is not allowed by advertisement {} (allow_service_attributes does not list \"{}\")",
            attr.annotation(),
            names.join(", "),
            attr.as_str()
        ));
        match attr {
            ServiceAttribute::Communities => kept.communities.clear(),
            ServiceAttribute::LargeCommunities => kept.large_communities.clear(),
            ServiceAttribute::LocalPref => kept.local_pref = None,
            ServiceAttribute::Med => kept.med = None,
            ServiceAttribute::AsPathPrepend => kept.as_path_prepend = None,
        }
    }
    if !kept.is_empty() {
        verdict.attributes = Some(kept);
    }
    verdict
}

/// The honoured attributes in words, for `explain`.
pub(crate) fn describe(a: &ServiceAttributes) -> String {
    let mut parts = Vec::new();
    if !a.communities.is_empty() {
        let c: Vec<String> = a.communities.iter().map(|c| format_community(*c)).collect();
        parts.push(format!("communities {}", c.join(",")));
    }
    if !a.large_communities.is_empty() {
        let c: Vec<String> = a
            .large_communities
            .iter()
            .map(|(x, y, z)| format!("{x}:{y}:{z}"))
            .collect();
        parts.push(format!("large communities {}", c.join(",")));
    }
    if let Some(lp) = a.local_pref {
        parts.push(format!("local-pref {lp} (iBGP peers)"));
    }
    if let Some(med) = a.med {
        parts.push(format!("med {med}"));
    }
    if let Some(n) = a.as_path_prepend {
        parts.push(format!("as-path-prepend {n} (eBGP peers)"));
    }
    parts.join(", ")
}

//! Per-Service path attributes from annotations (`holdfast.dev/communities`
//! and the others of the per-Service attribute table,
//! `model::attributes::TABLE`, which says how each parses): read, checked,
//! and kept only where an advertisement of the VIP allows them
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

use crate::config::{Advertisement, ServiceAttribute};
use crate::model::ServiceAttributes;

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

/// True when `service` carries any of the attribute annotations.
pub(crate) fn annotated(service: &ServiceRecord) -> bool {
    ServiceAttribute::annotated().any(|(_, a)| service.annotations.contains_key(a.name))
}

/// Reads the attribute annotations of `service`, each as its row of the
/// table says (`model::attributes::TABLE`).
pub(crate) fn requested(service: &ServiceRecord) -> Requested {
    let mut out = Requested::default();
    for (attr, annotation) in ServiceAttribute::annotated() {
        let name = annotation.name;
        let Some(text) = service.annotations.get(name) else {
            continue;
        };
        match (annotation.parse)(text, &mut out.values) {
            Ok(()) => {
                out.present.insert(attr);
            }
            Err(why) => out.problems.push(format!("{name} is \"{text}\": {why}")),
        }
    }
    out
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
            attr.annotation().unwrap_or_default(),
            names.join(", "),
            attr.as_str()
        ));
        (attr.row().clear)(&mut kept);
    }
    if !kept.is_empty() {
        verdict.attributes = Some(kept);
    }
    verdict
}

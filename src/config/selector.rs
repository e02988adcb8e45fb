//! Kubernetes-style label selectors (`matchLabels` + `matchExpressions`),
//! used to pick nodes, Services and namespaces.

use std::collections::BTreeMap;
use std::fmt;

use super::diagnostic::Diagnostics;
use super::schema::{DefaultValue, Key, Range, Section};
use super::tree::{self, Table, Value};

/// A label selector with the semantics of Kubernetes' `LabelSelector`: every
/// `match_labels` pair and every `match_expressions` requirement must hold.
/// An empty selector matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    /// Labels that must be present with exactly these values.
    pub match_labels: BTreeMap<String, String>,
    /// Further requirements, all of which must hold.
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// One `match_expressions` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelectorRequirement {
    /// The label key the requirement is about.
    pub key: String,
    /// How the label's value is compared with `values`.
    pub operator: SelectorOperator,
    /// Non-empty for `In`/`NotIn`, empty for `Exists`/`DoesNotExist`.
    pub values: Vec<String>,
}

/// The operators Kubernetes defines for label selector requirements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectorOperator {
    /// The label is present and its value is one of `values`.
    In,
    /// The label is absent, or its value is none of `values`.
    NotIn,
    /// The label is present (any value).
    Exists,
    /// The label is absent.
    DoesNotExist,
}

impl SelectorOperator {
    /// Every operator, in the order Kubernetes documents them.
    pub const ALL: [SelectorOperator; 4] = [
        SelectorOperator::In,
        SelectorOperator::NotIn,
        SelectorOperator::Exists,
        SelectorOperator::DoesNotExist,
    ];

    /// The name the config (and Kubernetes) writes it with.
    pub fn as_str(&self) -> &'static str {
        match self {
            SelectorOperator::In => "In",
            SelectorOperator::NotIn => "NotIn",
            SelectorOperator::Exists => "Exists",
            SelectorOperator::DoesNotExist => "DoesNotExist",
        }
    }
}

/// Why a selector did not match: the first label that missed. For
/// `holdfast explain` ("label \"bgp\" is \"off\", want \"on\"").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SelectorMismatch {
    /// A `match_labels` key, or an `In`/`Exists` key, is absent.
    Missing {
        /// The label key.
        key: String,
        /// What the selector wanted, as text ("\"on\"", "one of [\"a\", \"b\"]", "any value").
        wanted: String,
    },
    /// A label is present with a value the selector does not accept.
    WrongValue {
        /// The label key.
        key: String,
        /// The value the object has.
        value: String,
        /// What the selector wanted, as text.
        wanted: String,
    },
    /// A `DoesNotExist` key is present.
    Present {
        /// The label key.
        key: String,
        /// The value the object has.
        value: String,
    },
}

impl fmt::Display for SelectorMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SelectorMismatch::Missing { key, wanted } => {
                write!(f, "label \"{key}\" is missing, want {wanted}")
            }
            SelectorMismatch::WrongValue { key, value, wanted } => {
                write!(f, "label \"{key}\" is \"{value}\", want {wanted}")
            }
            SelectorMismatch::Present { key, value } => {
                write!(f, "label \"{key}\" is \"{value}\", want it absent")
            }
        }
    }
}

fn quoted_values(values: &[String]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("\"{v}\"")).collect();
    format!("[{}]", quoted.join(", "))
}

impl LabelSelector {
    /// True when every label and requirement holds for `labels`.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.first_mismatch(labels).is_none()
    }

    /// The first label that keeps this selector from matching `labels`, or
    /// `None` when it matches. `match_labels` are checked first (in key
    /// order), then `match_expressions` in the order written.
    pub fn first_mismatch(&self, labels: &BTreeMap<String, String>) -> Option<SelectorMismatch> {
        for (key, want) in &self.match_labels {
            match labels.get(key) {
                None => {
                    return Some(SelectorMismatch::Missing {
                        key: key.clone(),
                        wanted: format!("\"{want}\""),
                    });
                }
                Some(value) if value != want => {
                    return Some(SelectorMismatch::WrongValue {
                        key: key.clone(),
                        value: value.clone(),
                        wanted: format!("\"{want}\""),
                    });
                }
                Some(_) => {}
            }
        }
        for requirement in &self.match_expressions {
            if let Some(miss) = requirement.mismatch(labels) {
                return Some(miss);
            }
        }
        None
    }
}

impl LabelSelectorRequirement {
    fn mismatch(&self, labels: &BTreeMap<String, String>) -> Option<SelectorMismatch> {
        let key = self.key.clone();
        let value = labels.get(&self.key);
        match (self.operator, value) {
            (SelectorOperator::In, None) => Some(SelectorMismatch::Missing {
                key,
                wanted: format!("one of {}", quoted_values(&self.values)),
            }),
            (SelectorOperator::In, Some(v)) if !self.values.contains(v) => {
                Some(SelectorMismatch::WrongValue {
                    key,
                    value: v.clone(),
                    wanted: format!("one of {}", quoted_values(&self.values)),
                })
            }
            (SelectorOperator::NotIn, Some(v)) if self.values.contains(v) => {
                Some(SelectorMismatch::WrongValue {
                    key,
                    value: v.clone(),
                    wanted: format!("none of {}", quoted_values(&self.values)),
                })
            }
            (SelectorOperator::Exists, None) => Some(SelectorMismatch::Missing {
                key,
                wanted: "any value".to_string(),
            }),
            (SelectorOperator::DoesNotExist, Some(v)) => Some(SelectorMismatch::Present {
                key,
                value: v.clone(),
            }),
            _ => None,
        }
    }
}

/// Checks a label key: an optional DNS-subdomain prefix and "/", then a
/// name of 1..=63 characters (Kubernetes' "qualified name").
pub(crate) fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    if let Some(prefix) = prefix
        && let Some(why) = dns_subdomain_problem(prefix)
    {
        return Some(format!("its prefix \"{prefix}\" {why}"));
    }
    label_name_problem(name).map(|why| format!("its name \"{name}\" {why}"))
}

/// Checks a label value: empty, or a name of at most 63 characters.
pub(crate) fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    label_name_problem(value)
}

/// 1..=63 characters of letters, digits, '-', '_' and '.', beginning and
/// ending with a letter or digit.
fn label_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_string());
    }
    if name.len() > 63 {
        return Some(format!(
            "is {} characters long; at most 63 are allowed",
            name.len()
        ));
    }
    let ok_inner = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let first_last_ok = name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !name.chars().all(ok_inner) || !first_last_ok {
        return Some(
            "must be letters, digits, '-', '_' or '.', beginning and ending with a letter or digit"
                .to_string(),
        );
    }
    None
}

/// Lower-case DNS subdomain (RFC 1123): dot-separated labels of
/// [a-z0-9-], at most 253 characters.
pub(crate) fn dns_subdomain_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("is empty".to_string());
    }
    if name.len() > 253 {
        return Some(format!(
            "is {} characters long; at most 253 are allowed",
            name.len()
        ));
    }
    for label in name.split('.') {
        if let Some(why) = dns_label_problem(label) {
            return Some(format!("is not a DNS name: \"{label}\" {why}"));
        }
    }
    None
}

/// Lower-case RFC 1123 label: 1..=63 of [a-z0-9-], not starting or ending
/// with '-'. Kubernetes namespace names follow this rule.
pub(crate) fn dns_label_problem(label: &str) -> Option<String> {
    if label.is_empty() {
        return Some("is empty".to_string());
    }
    if label.len() > 63 {
        return Some(format!(
            "is {} characters long; at most 63 are allowed",
            label.len()
        ));
    }
    let ok = label
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !ok || label.starts_with('-') || label.ends_with('-') {
        return Some(
            "must be lower-case letters, digits and '-', not beginning or ending with '-'"
                .to_string(),
        );
    }
    None
}

/// The keys of a label selector.
pub(crate) const SELECTOR_KEYS: &[Key] = &[
    Key {
        name: "match_labels",
        kind: "table of strings",
        default: DefaultValue::Text("`{}`"),
        range: Range::Any,
        meaning: "Labels that must be present with exactly these values: `{ \"topology.kubernetes.io/rack\" = \"b\" }`.",
    },
    Key {
        name: "match_expressions",
        kind: "array of tables",
        default: DefaultValue::Text("`[]`"),
        range: Range::Any,
        meaning: "Requirements that must all hold; each a table of the next section.",
    },
];

/// The reference's section for a label selector.
pub(crate) const SELECTOR_SECTION: Section = Section {
    title: "Label selectors",
    intro: "`node_selector`, `service_selector` and `namespace_selector` are label selectors with Kubernetes semantics, written as inline tables: `{ match_labels = { key = \"value\" }, match_expressions = [{ key = \"k\", operator = \"In\", values = [\"a\"] }] }`. Everything listed must hold; an empty selector matches everything.",
    keys: SELECTOR_KEYS,
};

/// The keys of one `match_expressions` entry.
pub(crate) const REQUIREMENT_KEYS: &[Key] = &[
    Key {
        name: "key",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Any,
        meaning: "The label key (a Kubernetes label name, optionally with a DNS subdomain prefix).",
    },
    Key {
        name: "operator",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Text(operator_choices),
        meaning: "`In` and `NotIn` need a non-empty `values`; `Exists` and `DoesNotExist` take no `values`.",
    },
    Key {
        name: "values",
        kind: "array of strings",
        default: DefaultValue::Text("none"),
        range: Range::Any,
        meaning: "The label values `In` and `NotIn` compare with.",
    },
];

/// The reference's section for a `match_expressions` entry.
pub(crate) const REQUIREMENT_SECTION: Section = Section {
    title: "Label selector `match_expressions` entries",
    intro: "",
    keys: REQUIREMENT_KEYS,
};

/// The operators, as `operator` takes them.
fn operator_choices() -> String {
    let all: Vec<String> = SelectorOperator::ALL
        .iter()
        .map(|o| format!("\"{}\"", o.as_str()))
        .collect();
    format!("one of {}", all.join(", "))
}

/// Reads `key = { match_labels = {...}, match_expressions = [...] }`.
pub(crate) fn parse_selector(
    value: &Value<'_>,
    key: &str,
    context: &str,
    d: &mut Diagnostics,
) -> Option<LabelSelector> {
    let table = Table::from_value(value, key, format!("{context} {key}"), d)?;
    table.reject_unknown_keys(SELECTOR_KEYS, d);
    let mut ok = true;

    let mut match_labels = BTreeMap::new();
    if let Some(labels) = table.get("match_labels") {
        let labels_context = format!("{context} {key}.match_labels");
        match Table::from_value(labels, "match_labels", labels_context, d) {
            Some(labels) => {
                for (label, value) in labels.entries() {
                    let name: &str = label.get_ref();
                    if let Some(why) = label_key_problem(name) {
                        d.error(
                            &label.span(),
                            format!("label key \"{name}\" is invalid: {why}"),
                        );
                        ok = false;
                    }
                    match tree::string(value, name, d) {
                        Some(text) => {
                            if let Some(why) = label_value_problem(text) {
                                d.error(
                                    &value.span(),
                                    format!("label value \"{text}\" is invalid: it {why}"),
                                );
                                ok = false;
                            }
                            match_labels.insert(name.to_string(), text.to_string());
                        }
                        None => ok = false,
                    }
                }
            }
            None => ok = false,
        }
    }

    let match_expressions = match table.get("match_expressions") {
        None => Some(Vec::new()),
        Some(list) => tree::each(list, "match_expressions", d, |item, d| {
            parse_requirement(item, &format!("{context} {key}.match_expressions"), d)
        }),
    };

    let match_expressions = match_expressions?;
    ok.then_some(LabelSelector {
        match_labels,
        match_expressions,
    })
}

fn parse_requirement(
    value: &Value<'_>,
    context: &str,
    d: &mut Diagnostics,
) -> Option<LabelSelectorRequirement> {
    let table = Table::from_value(
        value,
        "each match_expressions entry",
        context.to_string(),
        d,
    )?;
    table.reject_unknown_keys(REQUIREMENT_KEYS, d);

    let key = table.required("key", d).and_then(|v| {
        let text = tree::string(v, "key", d)?;
        if let Some(why) = label_key_problem(text) {
            d.error(&v.span(), format!("label key \"{text}\" is invalid: {why}"));
            return None;
        }
        Some(text.to_string())
    });
    let operator_value = table.required("operator", d);
    let operator = operator_value.and_then(|v| {
        let choices = SelectorOperator::ALL.map(|o| (o.as_str(), o));
        tree::keyword(v, "operator", "unknown operator", &choices, d)
    });
    let values = match table.get("values") {
        None => Some(Vec::new()),
        Some(list) => tree::each(list, "values", d, |item, d| {
            let text = tree::string(item, "each of values", d)?;
            if let Some(why) = label_value_problem(text) {
                d.error(
                    &item.span(),
                    format!("label value \"{text}\" is invalid: it {why}"),
                );
                return None;
            }
            Some(text.to_string())
        }),
    };

    let (key, operator, values) = (key?, operator?, values?);
    // Kubernetes: "If the operator is In or NotIn, the values array must be
    // non-empty. If the operator is Exists or DoesNotExist, the values array
    // must be empty."
    match operator {
        SelectorOperator::In | SelectorOperator::NotIn if values.is_empty() => {
            d.error(
                &table.span(),
                format!(
                    "operator \"{}\" needs a non-empty values list",
                    operator.as_str()
                ),
            );
            return None;
        }
        SelectorOperator::Exists | SelectorOperator::DoesNotExist if !values.is_empty() => {
            let at = table.get("values").map_or(table.span(), |v| v.span());
            d.error(
                &at,
                format!(
                    "operator \"{}\" takes no values; remove values",
                    operator.as_str()
                ),
            );
            return None;
        }
        _ => {}
    }
    Some(LabelSelectorRequirement {
        key,
        operator,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn requirement(
        key: &str,
        operator: SelectorOperator,
        values: &[&str],
    ) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_string(),
            operator,
            values: values.iter().map(ToString::to_string).collect(),
        }
    }

    #[test]
    fn empty_selector_matches_everything() {
        assert!(LabelSelector::default().matches(&labels(&[])));
        assert!(LabelSelector::default().matches(&labels(&[("a", "b")])));
    }

    #[test]
    fn match_labels_explains_the_first_miss() {
        let selector = LabelSelector {
            match_labels: labels(&[("bgp", "on"), ("rack", "a")]),
            match_expressions: vec![],
        };
        assert!(selector.matches(&labels(&[("bgp", "on"), ("rack", "a"), ("x", "y")])));
        assert_eq!(
            selector
                .first_mismatch(&labels(&[("bgp", "off"), ("rack", "a")]))
                .map(|m| m.to_string()),
            Some("label \"bgp\" is \"off\", want \"on\"".to_string())
        );
        assert_eq!(
            selector
                .first_mismatch(&labels(&[("bgp", "on")]))
                .map(|m| m.to_string()),
            Some("label \"rack\" is missing, want \"a\"".to_string())
        );
    }

    #[test]
    fn each_operator() {
        let with = |r: LabelSelectorRequirement| LabelSelector {
            match_labels: BTreeMap::new(),
            match_expressions: vec![r],
        };
        let r#in = with(requirement("tier", SelectorOperator::In, &["web", "api"]));
        assert!(r#in.matches(&labels(&[("tier", "api")])));
        assert!(!r#in.matches(&labels(&[("tier", "db")])));
        assert!(!r#in.matches(&labels(&[])));

        let not_in = with(requirement("tier", SelectorOperator::NotIn, &["db"]));
        assert!(not_in.matches(&labels(&[("tier", "api")])));
        assert!(not_in.matches(&labels(&[])));
        assert_eq!(
            not_in
                .first_mismatch(&labels(&[("tier", "db")]))
                .map(|m| m.to_string()),
            Some("label \"tier\" is \"db\", want none of [\"db\"]".to_string())
        );

        let exists = with(requirement("bgp", SelectorOperator::Exists, &[]));
        assert!(exists.matches(&labels(&[("bgp", "")])));
        assert!(!exists.matches(&labels(&[])));

        let absent = with(requirement("bgp", SelectorOperator::DoesNotExist, &[]));
        assert!(absent.matches(&labels(&[])));
        assert_eq!(
            absent
                .first_mismatch(&labels(&[("bgp", "on")]))
                .map(|m| m.to_string()),
            Some("label \"bgp\" is \"on\", want it absent".to_string())
        );
    }

    #[test]
    fn label_syntax() {
        assert_eq!(label_key_problem("holdfast.dev/bgp"), None);
        assert_eq!(label_key_problem("kubernetes.io/hostname"), None);
        assert_eq!(label_key_problem("rack"), None);
        assert!(label_key_problem("").is_some());
        assert!(label_key_problem("Bad_Prefix/x").is_some());
        assert!(label_key_problem("-x").is_some());
        assert!(label_key_problem(&"a".repeat(64)).is_some());
        assert_eq!(label_value_problem(""), None);
        assert_eq!(label_value_problem("v1.2_x-y"), None);
        assert!(label_value_problem("has space").is_some());
    }
}

//! Label and field selectors, as `labelSelector=` and `fieldSelector=` carry them.

use crate::error::ApiError;
use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelRequirement {
    /// `key=value` or `key==value`
    Equals(String, String),
    /// `key!=value`: also matches objects without the label.
    NotEquals(String, String),
    /// `key in (a,b)`
    In(String, Vec<String>),
    /// `key notin (a,b)`: also matches objects without the label.
    NotIn(String, Vec<String>),
    /// `key`
    Exists(String),
    /// `!key`
    DoesNotExist(String),
}

/// A parsed label selector; all requirements must hold (they are ANDed).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<LabelRequirement>);

impl LabelSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for term in split_top_level(text) {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            reqs.push(parse_label_term(term).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "unable to parse requirement: found {term:?} in label selector {text:?}"
                ))
            })?);
        }
        Ok(LabelSelector(reqs))
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        self.0.iter().all(|req| match req {
            LabelRequirement::Equals(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEquals(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::DoesNotExist(k) => label(k).is_none(),
        })
    }
}

/// Splits at commas that are not inside `( )`.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_key(key: &str) -> bool {
    !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

fn valid_value(value: &str) -> bool {
    value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_label_term(term: &str) -> Option<LabelRequirement> {
    if let Some(key) = term.strip_prefix('!') {
        let key = key.trim();
        return valid_key(key).then(|| LabelRequirement::DoesNotExist(key.to_string()));
    }
    if let Some(open) = term.find('(') {
        let close = term.rfind(')')?;
        if close + 1 != term.len() || close < open {
            return None;
        }
        let mut head = term[..open].split_whitespace();
        let key = head.next()?;
        let op = head.next()?;
        if head.next().is_some() || !valid_key(key) {
            return None;
        }
        let values: Vec<String> = term[open + 1..close]
            .split(',')
            .map(|v| v.trim().to_string())
            .collect();
        if !values.iter().all(|v| valid_value(v)) {
            return None;
        }
        return match op {
            "in" => Some(LabelRequirement::In(key.to_string(), values)),
            "notin" => Some(LabelRequirement::NotIn(key.to_string(), values)),
            _ => None,
        };
    }
    for (op, ctor) in [
        (
            "!=",
            LabelRequirement::NotEquals as fn(String, String) -> LabelRequirement,
        ),
        ("==", LabelRequirement::Equals),
        ("=", LabelRequirement::Equals),
    ] {
        if let Some((k, v)) = term.split_once(op) {
            let (k, v) = (k.trim(), v.trim());
            return (valid_key(k) && valid_value(v)).then(|| ctor(k.to_string(), v.to_string()));
        }
    }
    valid_key(term).then(|| LabelRequirement::Exists(term.to_string()))
}

/// A parsed field selector: `path=value`, `path==value` or `path!=value`
/// terms, ANDed. Any dotted path into the object is accepted (the real API
/// server accepts only a few per resource; `metadata.name` and
/// `metadata.namespace` everywhere). A missing field reads as `""`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(Vec<String>, bool, String)>);

impl FieldSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let mut terms = Vec::new();
        for term in text.split(',') {
            let term = term.trim();
            if term.is_empty() {
                continue;
            }
            let (path, equal, value) = if let Some((p, v)) = term.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = term.split_once("==") {
                (p, true, v)
            } else if let Some((p, v)) = term.split_once('=') {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: {text:?}; can't understand {term:?}"
                )));
            };
            let path: Vec<String> = path.trim().split('.').map(str::to_string).collect();
            if path.iter().any(String::is_empty) {
                return Err(ApiError::bad_request(format!(
                    "invalid field selector {text:?}: empty field name"
                )));
            }
            terms.push((path, equal, value.trim().to_string()));
        }
        Ok(FieldSelector(terms))
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let found = path.iter().try_fold(object, |v, seg| v.get(seg));
            let text = match found {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (text == *want) == *equal
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns", "labels": labels}, "spec": {"nodeName": "a"}})
    }

    #[test]
    fn label_selectors() {
        let o = obj(json!({"app": "web", "tier": "front", "kubernetes.io/service-name": "svc"}));
        let yes = [
            "",
            "app=web",
            "app==web",
            "app=web,tier=front",
            "tier in (front, back)",
            "tier notin (back)",
            "missing!=x",
            "app",
            "!missing",
            "kubernetes.io/service-name=svc",
            "app=web, tier in (front,back), !gone",
        ];
        let no = [
            "app=db",
            "app!=web",
            "tier in (back)",
            "tier notin (front)",
            "missing",
            "!app",
        ];
        for s in yes {
            assert!(
                LabelSelector::parse(s).expect(s).matches(&o),
                "{s} should match"
            );
        }
        for s in no {
            assert!(
                !LabelSelector::parse(s).expect(s).matches(&o),
                "{s} should not match"
            );
        }
        // No labels at all.
        let bare = json!({"metadata": {"name": "x"}});
        assert!(
            LabelSelector::parse("app!=web")
                .expect("parses")
                .matches(&bare)
        );
        assert!(!LabelSelector::parse("app").expect("parses").matches(&bare));
    }

    #[test]
    fn bad_label_selectors_are_400() {
        for s in ["app in (a", "=x", "a=b=c", "tier inn (a)", "a b"] {
            let err = LabelSelector::parse(s).expect_err(s);
            assert_eq!(err.code(), 400, "{s}");
        }
    }

    #[test]
    fn field_selectors() {
        let o = obj(json!({}));
        for s in [
            "metadata.name=n1",
            "metadata.name==n1,metadata.namespace=ns",
            "spec.nodeName!=b",
            "spec.missing=",
        ] {
            assert!(
                FieldSelector::parse(s).expect(s).matches(&o),
                "{s} should match"
            );
        }
        for s in ["metadata.name=n2", "metadata.name!=n1", "spec.nodeName=b"] {
            assert!(
                !FieldSelector::parse(s).expect(s).matches(&o),
                "{s} should not match"
            );
        }
        for s in ["metadata.name", "metadata..name=x"] {
            assert_eq!(
                FieldSelector::parse(s).map_err(|e| e.code()),
                Err(400),
                "{s}"
            );
        }
    }
}

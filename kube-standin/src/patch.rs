//! The patch formats clients send with PATCH.
//!
//! - JSON merge patch (RFC 7386), `application/merge-patch+json`.
//! - Strategic merge patch, `application/strategic-merge-patch+json`: applied
//!   as a JSON merge patch. The difference is lists: the API server merges
//!   some lists by key (e.g. `ports` by `port`), this stand-in replaces them.
//! - Server-side apply, `application/apply-patch+yaml`: kube-rs sends JSON; it
//!   is applied as a merge patch that may create the object. Field ownership
//!   is not tracked.
//! - JSON patch (RFC 6902), `application/json-patch+json`: `add`, `remove`,
//!   `replace`, `test`, `move`, `copy`.

use crate::error::ApiError;
use serde_json::{Map, Value};

/// The kind of patch, from the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchKind {
    Merge,
    StrategicMerge,
    Apply,
    Json,
}

impl PatchKind {
    pub(crate) fn from_content_type(ct: &str) -> Result<Self, ApiError> {
        let mime = ct.split(';').next().unwrap_or("").trim();
        match mime {
            "application/merge-patch+json" => Ok(PatchKind::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchKind::StrategicMerge),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchKind::Apply),
            "application/json-patch+json" => Ok(PatchKind::Json),
            other => Err(ApiError::new(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (got {other:?})"
                ),
            )),
        }
    }
}

/// RFC 7386 §2: `null` removes a member, objects merge recursively, any
/// other value replaces the target.
pub(crate) fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(t) = target {
        for (key, value) in patch {
            if value.is_null() {
                t.remove(key);
            } else {
                merge(t.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// RFC 6902 §4: apply each operation in order; any failure leaves the
/// target unchanged and yields 422, as the API server answers.
pub(crate) fn json_patch(target: &Value, ops: &Value) -> Result<Value, ApiError> {
    let Value::Array(ops) = ops else {
        return Err(ApiError::bad_request(
            "a JSON patch must be an array of operations",
        ));
    };
    let mut doc = target.clone();
    for op in ops {
        apply_op(&mut doc, op).map_err(|why| ApiError::invalid(format!("JSON patch: {why}")))?;
    }
    Ok(doc)
}

fn apply_op(doc: &mut Value, op: &Value) -> Result<(), String> {
    let name = op
        .get("op")
        .and_then(Value::as_str)
        .ok_or("operation without \"op\"")?;
    let path = op
        .get("path")
        .and_then(Value::as_str)
        .ok_or("operation without \"path\"")?;
    let value = || {
        op.get("value")
            .cloned()
            .ok_or(format!("{name} {path}: no \"value\""))
    };
    let from = || {
        op.get("from")
            .and_then(Value::as_str)
            .ok_or(format!("{name} {path}: no \"from\""))
    };
    match name {
        "add" => add(doc, path, value()?),
        "remove" => remove(doc, path).map(drop),
        "replace" => {
            remove(doc, path)?;
            add(doc, path, value()?)
        }
        "test" => {
            let found = doc
                .pointer(path)
                .ok_or(format!("test {path}: no such path"))?;
            if *found == value()? {
                Ok(())
            } else {
                Err(format!("test {path}: value differs"))
            }
        }
        "move" => {
            let moved = remove(doc, from()?)?;
            add(doc, path, moved)
        }
        "copy" => {
            let copied = doc
                .pointer(from()?)
                .cloned()
                .ok_or(format!("copy {path}: no source"))?;
            add(doc, path, copied)
        }
        other => Err(format!("unknown operation {other:?}")),
    }
}

/// Splits a JSON pointer (RFC 6901) into its parent pointer and last token.
fn split_pointer(path: &str) -> Result<(&str, String), String> {
    let idx = path
        .rfind('/')
        .ok_or(format!("{path:?} is not a JSON pointer"))?;
    let (parent, last) = path.split_at(idx);
    let token = last
        .get(1..)
        .unwrap_or("")
        .replace("~1", "/")
        .replace("~0", "~");
    Ok((parent, token))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, token) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.insert(token, value);
            Ok(())
        }
        Some(Value::Array(list)) => {
            let idx = if token == "-" {
                list.len()
            } else {
                token
                    .parse::<usize>()
                    .map_err(|_| format!("{path}: bad array index"))?
            };
            if idx > list.len() {
                return Err(format!("{path}: index out of range"));
            }
            list.insert(idx, value);
            Ok(())
        }
        _ => Err(format!("{path}: parent does not exist")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, token) = split_pointer(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(map)) => map.remove(&token).ok_or(format!("{path}: no such member")),
        Some(Value::Array(list)) => {
            let idx = token
                .parse::<usize>()
                .map_err(|_| format!("{path}: bad array index"))?;
            if idx < list.len() {
                Ok(list.remove(idx))
            } else {
                Err(format!("{path}: index out of range"))
            }
        }
        _ => Err(format!("{path}: parent does not exist")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The examples of RFC 7386 Appendix A.
    #[test]
    fn rfc7386_examples() {
        let cases = [
            (json!({"a":"b"}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"b"}), json!({"b":"c"}), json!({"a":"b","b":"c"})),
            (json!({"a":"b"}), json!({"a":null}), json!({})),
            (
                json!({"a":"b","b":"c"}),
                json!({"a":null}),
                json!({"b":"c"}),
            ),
            (json!({"a":["b"]}), json!({"a":"c"}), json!({"a":"c"})),
            (json!({"a":"c"}), json!({"a":["b"]}), json!({"a":["b"]})),
            (
                json!({"a":{"b":"c"}}),
                json!({"a":{"b":"d","c":null}}),
                json!({"a":{"b":"d"}}),
            ),
            (json!({"a":[{"b":"c"}]}), json!({"a":[1]}), json!({"a":[1]})),
            (json!(["a", "b"]), json!(["c", "d"]), json!(["c", "d"])),
            (json!({"a":"b"}), json!(["c"]), json!(["c"])),
            (json!({"a":"foo"}), json!(null), json!(null)),
            (json!({"a":"foo"}), json!("bar"), json!("bar")),
            (json!({"e":null}), json!({"a":1}), json!({"e":null,"a":1})),
            (json!([1, 2]), json!({"a":"b","c":null}), json!({"a":"b"})),
            (
                json!({}),
                json!({"a":{"bb":{"ccc":null}}}),
                json!({"a":{"bb":{}}}),
            ),
        ];
        for (target, patch, want) in cases {
            let mut got = target.clone();
            merge(&mut got, &patch);
            assert_eq!(got, want, "merge {target} with {patch}");
        }
    }

    #[test]
    fn json_patch_ops() {
        let doc = json!({"metadata":{"labels":{"a":"1"}},"list":[1,2]});
        let ops = json!([
            {"op":"add","path":"/metadata/labels/b~1c","value":"2"},
            {"op":"replace","path":"/metadata/labels/a","value":"9"},
            {"op":"add","path":"/list/-","value":3},
            {"op":"remove","path":"/list/0"},
            {"op":"test","path":"/list","value":[2,3]},
            {"op":"copy","from":"/list","path":"/copy"},
            {"op":"move","from":"/copy","path":"/moved"},
        ]);
        let got = json_patch(&doc, &ops).expect("patch applies");
        assert_eq!(
            got,
            json!({"metadata":{"labels":{"a":"9","b/c":"2"}},"list":[2,3],"moved":[2,3]})
        );
    }

    #[test]
    fn json_patch_failures_are_422() {
        let doc = json!({"a":1});
        for ops in [
            json!([{"op":"remove","path":"/b"}]),
            json!([{"op":"test","path":"/a","value":2}]),
            json!([{"op":"frobnicate","path":"/a"}]),
            json!([{"op":"add","path":"/x/y","value":1}]),
        ] {
            let err = json_patch(&doc, &ops).expect_err("must fail");
            assert_eq!(err.code(), 422, "{ops}");
        }
        assert_eq!(json_patch(&doc, &json!({})).map_err(|e| e.code()), Err(400));
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Ok(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Ok(PatchKind::Apply)
        );
        assert_eq!(
            PatchKind::from_content_type("text/plain").map_err(|e| e.code()),
            Err(415)
        );
    }
}

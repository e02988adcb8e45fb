//! Server-side printing for custom resources: the `meta.k8s.io/v1` `Table`
//! that `kubectl get` asks for (`Accept: application/json;as=Table;v=v1;
//! g=meta.k8s.io, ...`), built from the CRD's `additionalPrinterColumns` the
//! way the API server's custom-resource table convertor does: a `Name`
//! column first, then one column per printer column, cells read by their
//! `jsonPath`, `date` cells turned into an age ("5m10s"), and a row's
//! `object` the item's `PartialObjectMetadata`.
//!
//! JSONPath here is the dotted-field subset (`.status.routes.advertised`);
//! a path it cannot read gives an empty cell, which kubectl prints as
//! `<none>`, as it does for a field that is absent.

use serde_json::{Value, json};

use crate::timefmt;

/// One printer column of a CRD version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// The printer columns of `version` in a CRD object; without any, the API
/// server prints `Age` from `.metadata.creationTimestamp`.
pub(crate) fn columns(crd: &Value, version: &str) -> Vec<Column> {
    let listed: Vec<Column> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|vs| {
            vs.iter()
                .find(|v| v.get("name").and_then(Value::as_str) == Some(version))
        })
        .and_then(|v| v.get("additionalPrinterColumns"))
        .and_then(Value::as_array)
        .map(|cols| {
            cols.iter()
                .map(|c| {
                    let text = |k: &str| {
                        c.get(k)
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string()
                    };
                    Column {
                        name: text("name"),
                        type_: text("type"),
                        format: text("format"),
                        description: text("description"),
                        priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                        json_path: text("jsonPath"),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed;
    }
    vec![Column {
        name: "Age".into(),
        type_: "date".into(),
        format: String::new(),
        description: String::new(),
        priority: 0,
        json_path: ".metadata.creationTimestamp".into(),
    }]
}

/// The value at a dotted JSONPath (`.a.b.c`, optionally wrapped in `{}`).
fn read<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim();
    let path = path
        .strip_prefix('{')
        .and_then(|p| p.strip_suffix('}'))
        .unwrap_or(path);
    let rest = path.strip_prefix('.')?;
    let mut at = obj;
    for field in rest.split('.') {
        if field.is_empty() || field.contains(['[', ']', '*', '@', '?']) {
            return None;
        }
        at = at.get(field)?;
    }
    Some(at)
}

/// apimachinery's `duration.HumanDuration`: how kubectl shows an age.
pub(crate) fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        return match seconds % 60 {
            0 => format!("{minutes}m"),
            s => format!("{minutes}m{s}s"),
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        return match minutes % 60 {
            0 => format!("{hours}h"),
            m => format!("{hours}h{m}m"),
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return match hours % 24 {
            0 => format!("{}d", hours / 24),
            h => format!("{}d{h}h", hours / 24),
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return match (hours / 24) % 365 {
            0 => format!("{}y", hours / 24 / 365),
            d => format!("{}y{d}d", hours / 24 / 365),
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn cell(obj: &Value, column: &Column, now: u64) -> Value {
    let Some(v) = read(obj, &column.json_path) else {
        return Value::Null;
    };
    match (column.type_.as_str(), v) {
        ("date", Value::String(s)) => match timefmt::parse_rfc3339(s) {
            Some(t) => json!(human_duration(now as i64 - t as i64)),
            None => json!("<unknown>"),
        },
        (_, Value::Object(_) | Value::Array(_)) => json!(v.to_string()),
        _ => v.clone(),
    }
}

/// The Table of `items` (objects of a custom resource), with `list_meta` as
/// its `metadata` (resourceVersion, continue).
pub(crate) fn table(columns: &[Column], items: &[Value], list_meta: Value, now: u64) -> Value {
    let mut definitions = vec![json!({
        "name": "Name",
        "type": "string",
        "format": "name",
        "description": "Name must be unique within a namespace.",
        "priority": 0,
    })];
    definitions.extend(columns.iter().map(|c| {
        json!({
            "name": c.name,
            "type": c.type_,
            "format": c.format,
            "description": c.description,
            "priority": c.priority,
        })
    }));
    let rows: Vec<Value> = items
        .iter()
        .map(|obj| {
            let mut cells = vec![
                obj.pointer("/metadata/name")
                    .cloned()
                    .unwrap_or(Value::Null),
            ];
            cells.extend(columns.iter().map(|c| cell(obj, c, now)));
            json!({
                "cells": cells,
                "object": {
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
                },
            })
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    })
}

/// Whether an `Accept` header asks for a `meta.k8s.io` Table.
pub(crate) fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|media| {
        let params: Vec<&str> = media.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (310, "5m10s"),
            (3600, "60m"),
            (3 * 3600 + 5 * 60, "3h5m"),
            (30 * 3600, "30h"),
            (50 * 3600, "2d2h"),
            (400 * 86_400, "400d"),
            (3 * 365 * 86_400, "3y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn cells_follow_the_printer_columns() {
        let crd = json!({"spec": {"versions": [{"name": "v1alpha1", "additionalPrinterColumns": [
            {"name": "Up", "type": "integer", "jsonPath": ".status.up"},
            {"name": "Odd", "type": "string", "jsonPath": ".status.list[0]"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ]}]}});
        let cols = columns(&crd, "v1alpha1");
        assert_eq!(cols.len(), 3);
        let obj = json!({"metadata": {"name": "n1", "creationTimestamp": "1970-01-01T00:00:00Z"},
                         "status": {"up": 2}});
        let t = table(&cols, &[obj], json!({"resourceVersion": "7"}), 310);
        assert_eq!(t["rows"][0]["cells"], json!(["n1", 2, null, "5m10s"]));
        assert_eq!(t["columnDefinitions"][0]["name"], "Name");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "n1");
        // No printer columns: Age.
        assert_eq!(columns(&json!({}), "v1")[0].name, "Age");
    }

    #[test]
    fn kubectl_s_accept_header_asks_for_a_table() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json"));
    }
}

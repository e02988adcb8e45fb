//! `kustomize build`, for the subset of kustomize that `deploy/` uses
//! (kustomize and kubectl cannot be installed where the tests run).
//!
//! Supported, with kustomize's meaning:
//! - `resources`: files (one or more YAML documents) and directories
//!   holding a `kustomization.yaml` (built recursively);
//! - `configMapGenerator`: `name`, `namespace`, `behavior` (`create`,
//!   `replace`, `merge`) and `files` (`path` or `key=path`, inside the
//!   kustomization's directory); the generated name gets a content-hash
//!   suffix and references to it in pod templates are rewritten — the
//!   suffix is a stand-in (FNV-1a), not kustomize's own hash;
//! - `patches` with `path` and `target` (`kind`, `name`) whose file is a
//!   JSON 6902 patch (a list of operations: `add`, `remove`, `replace`,
//!   `test`);
//! - `images`: `name`, `newName`, `newTag`.
//!
//! Any other field is an error, so a manifest that strays outside the
//! subset fails the test instead of being rendered differently from
//! kustomize.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::yaml;

/// One rendered object and where it came from (for messages).
#[derive(Debug, Clone)]
pub struct Object {
    pub value: Value,
    pub origin: String,
    /// Made by a configMapGenerator: its name gets the hash suffix.
    generated: bool,
}

impl Object {
    pub fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or("")
    }
    pub fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or("")
    }
}

/// `kustomize build DIR`.
pub fn build(dir: &Path) -> Result<Vec<Object>, String> {
    let mut objects = build_level(dir)?;
    // Generated names get their hash suffix once everything is patched,
    // and every reference to them in a pod template follows.
    let mut renamed = Vec::new();
    for o in objects.iter_mut().filter(|o| o.generated) {
        let name = o.name().to_string();
        let hashed = format!("{name}-{}", content_hash(&o.value));
        o.value["metadata"]["name"] = Value::String(hashed.clone());
        renamed.push((o.kind().to_string(), name, hashed));
    }
    for o in &mut objects {
        if let Some(spec) = o.value.pointer_mut("/spec/template/spec") {
            rename_references(spec, &renamed);
        }
    }
    Ok(objects)
}

fn build_level(dir: &Path) -> Result<Vec<Object>, String> {
    let file = dir.join("kustomization.yaml");
    let origin = file.display().to_string();
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{origin}: {e}"))?;
    let docs = yaml::parse_documents(&origin, &text)?;
    let [k] = docs.as_slice() else {
        return Err(format!("{origin}: expected one document"));
    };
    let k = k
        .as_object()
        .ok_or_else(|| format!("{origin}: not a mapping"))?;
    for key in k.keys() {
        if ![
            "apiVersion",
            "kind",
            "resources",
            "configMapGenerator",
            "patches",
            "images",
        ]
        .contains(&key.as_str())
        {
            return Err(format!(
                "{origin}: `{key}` is outside the kustomize subset tests/deploy/kustomize.rs implements"
            ));
        }
    }
    if k.get("kind").and_then(Value::as_str) != Some("Kustomization") {
        return Err(format!("{origin}: kind must be Kustomization"));
    }

    let mut objects = Vec::new();
    for r in list(k, "resources", &origin)? {
        let r = r
            .as_str()
            .ok_or_else(|| format!("{origin}: resources entries are paths"))?;
        let path = dir.join(r);
        if path.is_dir() {
            objects.extend(build_level(&path)?);
        } else {
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(&path).map_err(|e| format!("{origin}: {e}"))?;
            for value in yaml::parse_documents(&origin, &text)? {
                objects.push(Object {
                    value,
                    origin: origin.clone(),
                    generated: false,
                });
            }
        }
    }

    for g in list(k, "configMapGenerator", &origin)? {
        generate_config_map(dir, &origin, g, &mut objects)?;
    }

    for p in list(k, "patches", &origin)? {
        apply_patch(dir, &origin, p, &mut objects)?;
    }

    for i in list(k, "images", &origin)? {
        set_image(&origin, i, &mut objects)?;
    }

    // Two objects of one kind, namespace and name are an error in kustomize.
    let mut seen = std::collections::BTreeSet::new();
    for o in &objects {
        let id = (
            o.kind().to_string(),
            o.value["metadata"]["namespace"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            o.name().to_string(),
        );
        if !seen.insert(id.clone()) {
            return Err(format!("{origin}: {id:?} is defined twice"));
        }
    }
    Ok(objects)
}

fn list<'a>(k: &'a Map<String, Value>, key: &str, origin: &str) -> Result<&'a [Value], String> {
    match k.get(key) {
        None => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err(format!("{origin}: {key} must be a list")),
    }
}

fn fields<'a>(
    v: &'a Value,
    allowed: &[&str],
    what: &str,
    origin: &str,
) -> Result<&'a Map<String, Value>, String> {
    let m = v
        .as_object()
        .ok_or_else(|| format!("{origin}: each {what} entry is a mapping"))?;
    for key in m.keys() {
        if !allowed.contains(&key.as_str()) {
            return Err(format!(
                "{origin}: {what}.{key} is outside the kustomize subset tests/deploy/kustomize.rs implements"
            ));
        }
    }
    Ok(m)
}

fn string<'a>(m: &'a Map<String, Value>, key: &str, origin: &str) -> Result<&'a str, String> {
    m.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("{origin}: {key} must be a string"))
}

/// A file named by a kustomization: relative, inside its directory (the
/// default load restrictor of kustomize).
fn local_file(dir: &Path, name: &str, origin: &str) -> Result<PathBuf, String> {
    let p = Path::new(name);
    if p.is_absolute() || p.components().any(|c| c == std::path::Component::ParentDir) {
        return Err(format!(
            "{origin}: {name}: files must lie inside the kustomization's directory"
        ));
    }
    Ok(dir.join(p))
}

fn generate_config_map(
    dir: &Path,
    origin: &str,
    g: &Value,
    objects: &mut Vec<Object>,
) -> Result<(), String> {
    let g = fields(
        g,
        &["name", "namespace", "behavior", "files"],
        "configMapGenerator",
        origin,
    )?;
    let name = string(g, "name", origin)?;
    let namespace = g.get("namespace").and_then(Value::as_str);
    let behavior = g
        .get("behavior")
        .and_then(Value::as_str)
        .unwrap_or("create");
    let mut data = Map::new();
    for f in list(g, "files", origin)? {
        let f = f
            .as_str()
            .ok_or_else(|| format!("{origin}: files entries are strings"))?;
        let (key, path) = match f.split_once('=') {
            Some((k, p)) => (k.to_string(), p),
            None => (
                Path::new(f)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .ok_or_else(|| format!("{origin}: {f}: no file name"))?,
                f,
            ),
        };
        let path = local_file(dir, path, origin)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("{origin}: {}: {e}", path.display()))?;
        if data.insert(key.clone(), Value::String(text)).is_some() {
            return Err(format!("{origin}: {name}: key {key} twice"));
        }
    }
    let existing = objects.iter_mut().find(|o| {
        o.kind() == "ConfigMap"
            && o.name() == name
            && o.value["metadata"]["namespace"].as_str() == namespace
    });
    match (behavior, existing) {
        ("create", None) => {
            let mut metadata = Map::new();
            metadata.insert("name".into(), Value::String(name.into()));
            if let Some(ns) = namespace {
                metadata.insert("namespace".into(), Value::String(ns.into()));
            }
            let mut cm = Map::new();
            cm.insert("apiVersion".into(), Value::String("v1".into()));
            cm.insert("kind".into(), Value::String("ConfigMap".into()));
            cm.insert("metadata".into(), Value::Object(metadata));
            cm.insert("data".into(), Value::Object(data));
            objects.push(Object {
                value: Value::Object(cm),
                origin: origin.to_string(),
                generated: true,
            });
        }
        ("create", Some(_)) => {
            return Err(format!(
                "{origin}: ConfigMap {name} exists already (behavior: replace or merge?)"
            ));
        }
        ("replace", Some(o)) => {
            o.value["data"] = Value::Object(data);
            o.origin = origin.to_string();
        }
        ("merge", Some(o)) => {
            let current = o.value["data"]
                .as_object_mut()
                .ok_or_else(|| format!("{origin}: ConfigMap {name} has no data to merge into"))?;
            current.extend(data);
        }
        (b @ ("replace" | "merge"), None) => {
            return Err(format!(
                "{origin}: behavior {b}: no ConfigMap {name} to {b}"
            ));
        }
        (b, _) => return Err(format!("{origin}: unknown behavior {b}")),
    }
    Ok(())
}

fn apply_patch(dir: &Path, origin: &str, p: &Value, objects: &mut [Object]) -> Result<(), String> {
    let p = fields(p, &["path", "target"], "patches", origin)?;
    let path = local_file(dir, string(p, "path", origin)?, origin)?;
    let target = fields(
        p.get("target")
            .ok_or_else(|| format!("{origin}: patches need a target"))?,
        &["kind", "name"],
        "patches.target",
        origin,
    )?;
    let (kind, name) = (
        string(target, "kind", origin)?,
        string(target, "name", origin)?,
    );
    let patch_origin = path.display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{patch_origin}: {e}"))?;
    let docs = yaml::parse_documents(&patch_origin, &text)?;
    let [Value::Array(ops)] = docs.as_slice() else {
        return Err(format!(
            "{patch_origin}: a JSON 6902 patch (one list of operations) is the only patch form in the subset"
        ));
    };
    let mut matched = 0;
    for o in objects
        .iter_mut()
        .filter(|o| o.kind() == kind && o.name() == name)
    {
        matched += 1;
        for (i, op) in ops.iter().enumerate() {
            json_patch(&mut o.value, op)
                .map_err(|e| format!("{patch_origin}: operation {}: {e}", i + 1))?;
        }
    }
    if matched == 0 {
        return Err(format!(
            "{origin}: patch target {kind}/{name} matches nothing"
        ));
    }
    Ok(())
}

/// One RFC 6902 operation.
fn json_patch(doc: &mut Value, op: &Value) -> Result<(), String> {
    let op = op.as_object().ok_or("an operation is a mapping")?;
    for key in op.keys() {
        if !["op", "path", "value"].contains(&key.as_str()) {
            return Err(format!("field {key} is outside the subset"));
        }
    }
    let kind = op.get("op").and_then(Value::as_str).ok_or("no op")?;
    let path = op.get("path").and_then(Value::as_str).ok_or("no path")?;
    let value = || {
        op.get("value")
            .cloned()
            .ok_or(format!("{kind} {path}: no value"))
    };
    // RFC 6901: the parent, and the last reference token unescaped.
    let (parent, last) = path
        .rsplit_once('/')
        .ok_or(format!("{path}: a path starts with /"))?;
    let last = last.replace("~1", "/").replace("~0", "~");
    let missing = || format!("{kind} {path}: {parent} does not exist");
    match kind {
        "add" => {
            let value = value()?;
            match doc.pointer_mut(parent).ok_or_else(missing)? {
                Value::Object(m) => {
                    m.insert(last, value);
                }
                Value::Array(a) => {
                    if last == "-" {
                        a.push(value);
                    } else {
                        let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
                        if i > a.len() {
                            return Err(format!("{path}: index out of range"));
                        }
                        a.insert(i, value);
                    }
                }
                _ => return Err(format!("add {path}: {parent} is a scalar")),
            }
        }
        "replace" => {
            let value = value()?;
            let target = doc
                .pointer_mut(path)
                .ok_or(format!("replace {path}: nothing there to replace"))?;
            *target = value;
        }
        "remove" => match doc.pointer_mut(parent).ok_or_else(missing)? {
            Value::Object(m) => {
                m.remove(&last)
                    .ok_or(format!("remove {path}: nothing there"))?;
            }
            Value::Array(a) => {
                let i: usize = last.parse().map_err(|_| format!("{path}: bad index"))?;
                if i >= a.len() {
                    return Err(format!("remove {path}: index out of range"));
                }
                a.remove(i);
            }
            _ => return Err(format!("remove {path}: {parent} is a scalar")),
        },
        "test" => {
            let expected = value()?;
            if doc.pointer(path) != Some(&expected) {
                return Err(format!("test {path}: not {expected}"));
            }
        }
        other => return Err(format!("op {other} is outside the subset")),
    }
    Ok(())
}

fn set_image(origin: &str, i: &Value, objects: &mut [Object]) -> Result<(), String> {
    let i = fields(i, &["name", "newName", "newTag"], "images", origin)?;
    let name = string(i, "name", origin)?;
    for o in objects.iter_mut() {
        let Some(spec) = o.value.pointer_mut("/spec/template/spec") else {
            continue;
        };
        for list in ["containers", "initContainers"] {
            let Some(Value::Array(containers)) = spec.get_mut(list) else {
                continue;
            };
            for c in containers {
                let Some(image) = c["image"].as_str() else {
                    continue;
                };
                // A tag is what follows the last ':' after the last '/'
                // (a registry may have a port).
                let slash = image.rfind('/').map_or(0, |i| i + 1);
                let (base, tag) = match image[slash..].rfind(':') {
                    Some(colon) => (&image[..slash + colon], Some(&image[slash + colon + 1..])),
                    None => (image, None),
                };
                if base != name {
                    continue;
                }
                let new_base = i.get("newName").and_then(Value::as_str).unwrap_or(base);
                let new_tag = i.get("newTag").and_then(Value::as_str).or(tag);
                c["image"] = Value::String(match new_tag {
                    Some(t) => format!("{new_base}:{t}"),
                    None => new_base.to_string(),
                });
            }
        }
    }
    Ok(())
}

/// ConfigMap references in a pod spec: volumes (plain and projected).
fn rename_references(spec: &mut Value, renamed: &[(String, String, String)]) {
    let rename = |r: &mut Value| {
        if let Some(name) = r.get("name").and_then(Value::as_str)
            && let Some((_, _, hashed)) = renamed
                .iter()
                .find(|(kind, from, _)| kind == "ConfigMap" && from == name)
        {
            r["name"] = Value::String(hashed.clone());
        }
    };
    let Some(Value::Array(volumes)) = spec.get_mut("volumes") else {
        return;
    };
    for v in volumes {
        if let Some(cm) = v.get_mut("configMap") {
            rename(cm);
        }
        if let Some(Value::Array(sources)) = v.pointer_mut("/projected/sources") {
            for s in sources {
                if let Some(cm) = s.get_mut("configMap") {
                    rename(cm);
                }
            }
        }
    }
}

/// A stand-in for kustomize's content hash: 10 characters of FNV-1a over
/// the object's JSON.
fn content_hash(v: &Value) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in v.to_string().bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    const ALPHABET: &[u8] = b"bcdfghkmt2456789";
    (0..10)
        .map(|i| ALPHABET[((h >> (i * 4)) & 0xf) as usize] as char)
        .collect()
}

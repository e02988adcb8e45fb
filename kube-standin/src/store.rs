//! The object store: a small multi-version store in the manner of etcd.
//!
//! Every write takes the next value of one global revision counter, which is
//! the `metadata.resourceVersion` clients see. Old versions of each object
//! and a log of changes are kept back to the compaction point, so that
//! - a paginated list is a consistent snapshot at the revision of its first
//!   page, and a list at an exact resourceVersion can be served;
//! - a watch can start at any revision not older than the compaction point
//!   and replays every change after it, in order;
//! - asking for anything older than the compaction point is answered with
//!   410 Gone (`Expired`), as the real API server does after etcd compacts.

use crate::error::ApiError;
use crate::resources::{RESOURCES, ResourceId, ResourceType};
use crate::timefmt;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::ops::Bound;

/// Where an object lives: its resource, namespace (`""` for cluster-scoped
/// objects) and name. The ordering is the order lists are returned in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct ObjectKey {
    pub resource: ResourceId,
    pub namespace: String,
    pub name: String,
}

/// One version of one object; `None` marks its deletion.
#[derive(Debug, Clone)]
struct Version {
    rv: u64,
    object: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One entry of the change log that watches replay.
#[derive(Debug, Clone)]
pub(crate) struct Change {
    pub rv: u64,
    pub key: ObjectKey,
    pub kind: ChangeType,
    /// The object before the change (for label-selector transitions).
    pub old: Option<Value>,
    /// The object after the change; for a deletion, its last state with
    /// `resourceVersion` set to the deletion's revision, as the API server
    /// sends in a `DELETED` event.
    pub new: Value,
}

#[derive(Debug)]
pub(crate) struct Store {
    rv: u64,
    /// Reads and watches from a resourceVersion below this get 410 Gone.
    compacted: u64,
    /// The newest change the log has dropped; a watch stream that has not
    /// yet sent a change this new has lost events and must end with 410.
    discarded_upto: u64,
    objects: BTreeMap<ObjectKey, Vec<Version>>,
    changes: Vec<Change>,
    uid_seed: u32,
    uid_counter: u64,
}

fn meta_str<'a>(obj: &'a Value, field: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(field)?.as_str()
}

fn set_meta(obj: &mut Value, field: &str, value: Value) {
    if let Value::Object(map) = obj
        && !map.get("metadata").is_some_and(Value::is_object)
    {
        map.insert("metadata".into(), Value::Object(Map::new()));
    }
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        meta.insert(field.to_string(), value);
    }
}

/// The object without `metadata` and `status`: what `metadata.generation`
/// counts changes of.
fn desired_state(obj: &Value) -> Value {
    let mut copy = obj.clone();
    if let Value::Object(map) = &mut copy {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

/// The object with the fields the server owns blanked, to tell a no-op write.
fn comparable(obj: &Value) -> Value {
    let mut copy = obj.clone();
    if let Some(Value::Object(meta)) = copy.get_mut("metadata") {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    copy
}

/// Checks a name the way a URL path segment needs it.
pub(crate) fn check_name(plural: &str, name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 253
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | ':'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "{plural} {name:?} is invalid: metadata.name: Invalid value: {name:?}: must consist of alphanumerics, '-' and '.', at most 253 characters"
        )))
    }
}

impl Store {
    pub(crate) fn new(uid_seed: u32) -> Self {
        Store {
            rv: 1,
            compacted: 0,
            discarded_upto: 0,
            objects: BTreeMap::new(),
            changes: Vec::new(),
            uid_seed,
            uid_counter: 0,
        }
    }

    /// The current revision: the resourceVersion of the newest write.
    pub(crate) fn rv(&self) -> u64 {
        self.rv
    }

    pub(crate) fn compacted(&self) -> u64 {
        self.compacted
    }

    pub(crate) fn discarded_upto(&self) -> u64 {
        self.discarded_upto
    }

    /// The current state of an object.
    pub(crate) fn get(&self, key: &ObjectKey) -> Option<&Value> {
        self.objects.get(key)?.last()?.object.as_ref()
    }

    /// Objects of one resource (and namespace, if given) as they were at
    /// revision `at`, in key order, starting after `after`.
    pub(crate) fn snapshot<'a>(
        &'a self,
        resource: ResourceId,
        namespace: Option<&'a str>,
        at: u64,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Value)> + 'a {
        let first = ObjectKey {
            resource,
            namespace: namespace.unwrap_or("").to_string(),
            name: String::new(),
        };
        let start = match after {
            Some(k) if *k >= first => Bound::Excluded(k.clone()),
            _ => Bound::Included(first),
        };
        self.objects
            .range((start, Bound::Unbounded))
            .take_while(move |(k, _)| {
                k.resource == resource && namespace.is_none_or(|ns| k.namespace == ns)
            })
            .filter_map(move |(k, versions)| {
                let version = versions.iter().rev().find(|v| v.rv <= at)?;
                Some((k, version.object.as_ref()?))
            })
    }

    /// The changes after revision `rv`, oldest first.
    pub(crate) fn changes_after(&self, rv: u64) -> &[Change] {
        let idx = self.changes.partition_point(|c| c.rv <= rv);
        self.changes.get(idx..).unwrap_or(&[])
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn next_uid(&mut self) -> String {
        self.uid_counter += 1;
        format!(
            "{:08x}-0000-4000-8000-{:012x}",
            self.uid_seed, self.uid_counter
        )
    }

    fn record(&mut self, key: ObjectKey, kind: ChangeType, old: Option<Value>, new: Value) {
        let rv = self.rv;
        let stored = match kind {
            ChangeType::Deleted => None,
            ChangeType::Added | ChangeType::Modified => Some(new.clone()),
        };
        self.objects
            .entry(key.clone())
            .or_default()
            .push(Version { rv, object: stored });
        self.changes.push(Change {
            rv,
            key,
            kind,
            old,
            new,
        });
    }

    /// Creates an object. `obj` must already carry `apiVersion`, `kind`,
    /// `metadata.name` and (for namespaced resources) `metadata.namespace`.
    /// The server-owned metadata is filled in.
    pub(crate) fn create(
        &mut self,
        resource: ResourceId,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let key = self.key_of(resource, &obj)?;
        let plural = plural(resource);
        if self.get(&key).is_some() {
            return Err(ApiError::already_exists(plural, &key.name));
        }
        let rv = self.next_rv();
        let uid = self.next_uid();
        set_meta(&mut obj, "uid", json!(uid));
        set_meta(&mut obj, "creationTimestamp", json!(timefmt::now_rfc3339()));
        set_meta(&mut obj, "generation", json!(1));
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        self.record(key, ChangeType::Added, None, obj.clone());
        Ok(obj)
    }

    /// Replaces an existing object. The server-owned metadata (uid,
    /// creationTimestamp, generation) is kept; generation counts changes to
    /// anything but metadata and status. A write that changes nothing does
    /// not take a revision, as with the real API server.
    pub(crate) fn update(
        &mut self,
        resource: ResourceId,
        mut obj: Value,
    ) -> Result<Value, ApiError> {
        let key = self.key_of(resource, &obj)?;
        let Some(old) = self.get(&key).cloned() else {
            return Err(ApiError::not_found(plural(resource), &key.name));
        };
        for field in ["uid", "creationTimestamp", "generation", "resourceVersion"] {
            match old.get("metadata").and_then(|m| m.get(field)) {
                Some(v) => set_meta(&mut obj, field, v.clone()),
                None => {
                    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
                        meta.remove(field);
                    }
                }
            }
        }
        if comparable(&obj) == comparable(&old) {
            return Ok(old);
        }
        if desired_state(&obj) != desired_state(&old) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            set_meta(&mut obj, "generation", json!(generation + 1));
        }
        let rv = self.next_rv();
        set_meta(&mut obj, "resourceVersion", json!(rv.to_string()));
        self.record(key, ChangeType::Modified, Some(old), obj.clone());
        Ok(obj)
    }

    /// Deletes an object at once (no finalizers, no grace period) and returns
    /// its last state.
    pub(crate) fn delete(&mut self, key: &ObjectKey) -> Result<Value, ApiError> {
        let Some(old) = self.get(key).cloned() else {
            return Err(ApiError::not_found(plural(key.resource), &key.name));
        };
        let rv = self.next_rv();
        let mut last = old.clone();
        set_meta(&mut last, "resourceVersion", json!(rv.to_string()));
        self.record(key.clone(), ChangeType::Deleted, Some(old), last.clone());
        Ok(last)
    }

    /// Compacts the history: writes one empty revision (as if an object of
    /// some other kind had changed in the cluster) and forgets everything
    /// before it. Every resourceVersion handed out so far is then too old to
    /// list at exactly or to watch from.
    pub(crate) fn compact(&mut self) -> u64 {
        let point = self.next_rv();
        self.compacted = point;
        let keep_from = self.changes.partition_point(|c| c.rv <= point);
        if let Some(last) = keep_from.checked_sub(1).and_then(|i| self.changes.get(i)) {
            self.discarded_upto = self.discarded_upto.max(last.rv);
        }
        self.changes.drain(..keep_from);
        self.objects.retain(|_, versions| {
            // Keep the newest version at or before the point, and all after.
            let newer = versions.partition_point(|v| v.rv <= point);
            let drop = newer.saturating_sub(1);
            versions.drain(..drop);
            versions.iter().any(|v| v.object.is_some() || v.rv > point)
        });
        point
    }

    /// The key an object belongs at, from its `metadata`.
    pub(crate) fn key_of(&self, resource: ResourceId, obj: &Value) -> Result<ObjectKey, ApiError> {
        let rt = RESOURCES
            .get(resource)
            .ok_or_else(|| ApiError::bad_request("unknown resource"))?;
        let name = meta_str(obj, "name").unwrap_or("");
        check_name(rt.plural, name)?;
        let namespace = if rt.namespaced {
            let ns = meta_str(obj, "namespace").unwrap_or("");
            if ns.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{} {name:?} is invalid: metadata.namespace: Required value",
                    rt.plural
                )));
            }
            check_name("namespaces", ns)?;
            ns.to_string()
        } else {
            String::new()
        };
        Ok(ObjectKey {
            resource,
            namespace,
            name: name.to_string(),
        })
    }
}

fn plural(resource: ResourceId) -> &'static str {
    RESOURCES
        .get(resource)
        .map_or("objects", |r: &ResourceType| r.plural)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::by_kind;

    fn svc(name: &str, port: u16) -> Value {
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"ports": [{"port": port}]}})
    }

    fn names(store: &Store, at: u64) -> Vec<String> {
        let svc = by_kind("v1", "Service").expect("served");
        store
            .snapshot(svc, None, at, None)
            .map(|(k, _)| k.name.clone())
            .collect()
    }

    #[test]
    fn revisions_and_generations() {
        let id = by_kind("v1", "Service").expect("served");
        let mut store = Store::new(7);
        let a = store.create(id, svc("a", 80)).expect("created");
        assert_eq!(a.pointer("/metadata/resourceVersion"), Some(&json!("2")));
        assert_eq!(a.pointer("/metadata/generation"), Some(&json!(1)));
        assert!(a.pointer("/metadata/uid").is_some());
        assert_eq!(
            store.create(id, svc("a", 80)).map_err(|e| e.reason()),
            Err("AlreadyExists")
        );

        // Status-only change: new revision, same generation.
        let mut with_status = a.clone();
        with_status["status"] = json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.1"}]}});
        let b = store.update(id, with_status.clone()).expect("updated");
        assert_eq!(b.pointer("/metadata/resourceVersion"), Some(&json!("3")));
        assert_eq!(b.pointer("/metadata/generation"), Some(&json!(1)));
        // Same again: no-op, no revision.
        let c = store.update(id, with_status).expect("no-op");
        assert_eq!(c.pointer("/metadata/resourceVersion"), Some(&json!("3")));
        assert_eq!(store.rv(), 3);
        // Spec change: generation 2.
        let d = store.update(id, svc("a", 443)).expect("updated");
        assert_eq!(d.pointer("/metadata/generation"), Some(&json!(2)));
        assert_eq!(d.pointer("/metadata/uid"), a.pointer("/metadata/uid"));

        let gone = store
            .delete(&store.key_of(id, &a).expect("key"))
            .expect("deleted");
        assert_eq!(gone.pointer("/metadata/resourceVersion"), Some(&json!("5")));
        let kinds: Vec<_> = store
            .changes_after(0)
            .iter()
            .map(|c| (c.rv, c.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                (2, ChangeType::Added),
                (3, ChangeType::Modified),
                (4, ChangeType::Modified),
                (5, ChangeType::Deleted)
            ]
        );
        assert_eq!(store.changes_after(3).len(), 2);
    }

    #[test]
    fn snapshots_and_compaction() {
        let id = by_kind("v1", "Service").expect("served");
        let mut store = Store::new(7);
        store.create(id, svc("a", 1)).expect("a"); // rv 2
        store.create(id, svc("b", 1)).expect("b"); // rv 3
        let key_a = store.key_of(id, &svc("a", 1)).expect("key");
        store.delete(&key_a).expect("delete a"); // rv 4
        store.create(id, svc("c", 1)).expect("c"); // rv 5
        assert_eq!(names(&store, 2), ["a"]);
        assert_eq!(names(&store, 3), ["a", "b"]);
        assert_eq!(names(&store, 4), ["b"]);
        assert_eq!(names(&store, 5), ["b", "c"]);

        let point = store.compact();
        assert_eq!(point, 6);
        assert_eq!(store.rv(), 6);
        assert_eq!(store.compacted(), 6);
        assert_eq!(store.discarded_upto(), 5);
        assert!(store.changes_after(0).is_empty());
        assert_eq!(names(&store, 6), ["b", "c"]);
        // The tombstone of `a` is gone with the history.
        assert!(!store.objects.contains_key(&key_a));
        store.create(id, svc("d", 1)).expect("d"); // rv 7
        assert_eq!(store.changes_after(6).len(), 1);
        assert_eq!(names(&store, 7), ["b", "c", "d"]);
    }

    #[test]
    fn bad_names_are_refused() {
        let id = by_kind("v1", "Service").expect("served");
        let mut store = Store::new(7);
        for name in ["", "a/b", "x%2F"] {
            let err = store.create(id, svc(name, 1)).expect_err(name);
            assert_eq!(err.code(), 422, "{name:?}");
        }
        let mut no_ns = svc("a", 1);
        no_ns["metadata"]
            .as_object_mut()
            .map(|m| m.remove("namespace"));
        assert_eq!(store.create(id, no_ns).map_err(|e| e.code()), Err(422));
    }
}

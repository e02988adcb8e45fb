//! The HTTP/1.1 side: accepting connections, routing paths the way the API
//! server lays them out, and answering list, get, create, replace, patch and
//! delete. Watches are handed to [`crate::watch`].

use crate::body::Body;
use crate::error::ApiError;
use crate::patch::{self, PatchKind};
use crate::query;
use crate::resources::{self, RESOURCES, ResourceId, ResourceType};
use crate::state::{Availability, RequestRecord, Shared, State};
use crate::store::ObjectKey;
use crate::table;
use crate::watch::{self, WatchSpec};
use http_body_util::BodyExt;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::io;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Request bodies larger than this are refused (the API server's limit is 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// The version `/version` reports: the newest the `latest` feature of
/// k8s-openapi describes.
const VERSION_MINOR: &str = "37";

pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of file descriptors and the like: let it pass.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        if shared.lock().availability == Availability::Refusing {
            drop(stream);
            continue;
        }
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let service = service_fn(move |req| handle(Arc::clone(&shared), req));
            // A client that goes away mid-request is no concern of ours.
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// Answers one request. An `Err` makes hyper close the connection without
/// an answer, which is how `refuse()` looks to the client.
async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Response<Body>, io::Error> {
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let raw_query = req.uri().query().unwrap_or("").to_string();
    let content_type = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let accept = req
        .headers()
        .get(hyper::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    shared.lock().requests.push(RequestRecord {
        method: method.clone(),
        path: path.clone(),
        query: raw_query.clone(),
    });
    wait_until_serving(&shared).await?;

    let body = match http_body_util::Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
    {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            return Ok(error_response(&ApiError::new(
                413,
                "RequestEntityTooLarge",
                format!("request body unreadable or over {MAX_BODY} bytes: {e}"),
            )));
        }
    };
    let request = ApiRequest {
        method: &method,
        path: &path,
        params: query::parse(&raw_query),
        content_type: &content_type,
        accept: &accept,
        body: &body,
    };
    Ok(route(&shared, &request).unwrap_or_else(|e| error_response(&e)))
}

/// Holds a request while the server is stalled; fails it when refusing.
async fn wait_until_serving(shared: &Shared) -> Result<(), io::Error> {
    let mut signal = shared.subscribe();
    loop {
        match shared.lock().availability {
            Availability::Serving => return Ok(()),
            Availability::Refusing => {
                return Err(io::Error::other("stand-in is refusing requests"));
            }
            Availability::Stalled => {}
        }
        if signal.changed().await.is_err() {
            return Err(io::Error::other("stand-in is shutting down"));
        }
    }
}

struct ApiRequest<'a> {
    method: &'a str,
    path: &'a str,
    params: Vec<(String, String)>,
    content_type: &'a str,
    accept: &'a str,
    body: &'a Bytes,
}

/// What a path names.
#[derive(Debug, PartialEq, Eq)]
enum Target {
    Version,
    CoreVersions,
    GroupList,
    ResourceList {
        group: String,
        version: String,
    },
    Collection {
        resource: ResourceId,
        namespace: Option<String>,
    },
    Object {
        key: ObjectKey,
        subresource: Option<String>,
    },
}

fn not_found_path() -> ApiError {
    ApiError::new(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// Maps a path onto what it names, as the API server lays out its URL space:
/// `/api/v1/...` for the core group, `/apis/GROUP/VERSION/...` for others,
/// then `[namespaces/NS/]PLURAL[/NAME[/SUBRESOURCE]]`. A `watch/` segment
/// before the rest (the deprecated watch paths) sets the second value.
fn parse_path(path: &str) -> Result<(Target, bool), ApiError> {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(query::decode)
        .collect();
    let segs: Vec<&str> = segments.iter().map(String::as_str).collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Ok((Target::Version, false)),
        ["api"] => return Ok((Target::CoreVersions, false)),
        ["apis"] => return Ok((Target::GroupList, false)),
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(not_found_path()),
    };
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let lookup = |plural: &str| resources::by_path(group, version, plural);
    let scoped = |id: ResourceId, namespaced: bool| {
        RESOURCES
            .get(id)
            .filter(|r| r.namespaced == namespaced)
            .map(|_| id)
            .ok_or_else(not_found_path)
    };
    let object = |resource, namespace: &str, name: &str, sub: Option<&str>| Target::Object {
        key: ObjectKey {
            resource,
            namespace: namespace.to_string(),
            name: name.to_string(),
        },
        subresource: sub.map(str::to_string),
    };
    let target = match rest {
        [] => Target::ResourceList {
            group: group.to_string(),
            version: version.to_string(),
        },
        ["namespaces", ns, plural, tail @ ..] if lookup(plural).is_some() => {
            let id = scoped(lookup(plural).ok_or_else(not_found_path)?, true)?;
            match tail {
                [] => Target::Collection {
                    resource: id,
                    namespace: Some((*ns).to_string()),
                },
                [name] => object(id, ns, name, None),
                [name, sub] => object(id, ns, name, Some(sub)),
                _ => return Err(not_found_path()),
            }
        }
        [plural, tail @ ..] => {
            let id = lookup(plural).ok_or_else(not_found_path)?;
            match tail {
                [] => Target::Collection {
                    resource: id,
                    namespace: None,
                },
                [name] => object(scoped(id, false)?, "", name, None),
                [name, sub] => object(scoped(id, false)?, "", name, Some(sub)),
                _ => return Err(not_found_path()),
            }
        }
    };
    Ok((target, watch))
}

/// The CRD object that defines `resource`, if it is a custom resource
/// whose CRD exists.
fn definition(st: &State, resource: ResourceId) -> Option<Value> {
    let rt = RESOURCES.get(resource).filter(|r| r.custom)?;
    let key = ObjectKey {
        resource: resources::crds()?,
        namespace: String::new(),
        name: rt.crd_name(),
    };
    st.store.get(&key).cloned()
}

/// Whether the server has `resource` now: a custom resource only while its
/// CRD exists, as on a real API server.
fn served(st: &State, resource: ResourceId) -> bool {
    match RESOURCES.get(resource) {
        Some(r) if r.custom => definition(st, resource).is_some(),
        Some(_) => true,
        None => false,
    }
}

/// The answer to a GET of a custom resource as a `Table`, when the client
/// asked for one (`kubectl get`).
fn as_table(st: &State, resource: ResourceId, req: &ApiRequest<'_>, body: &Value) -> Option<Value> {
    if !table::wants_table(req.accept) {
        return None;
    }
    let crd = definition(st, resource)?;
    let rt = RESOURCES.get(resource)?;
    let columns = table::columns(&crd, rt.version);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (items, meta) = match body.get("items").and_then(Value::as_array) {
        Some(items) => (
            items.clone(),
            body.get("metadata").cloned().unwrap_or_default(),
        ),
        None => (
            vec![body.clone()],
            json!({"resourceVersion": body.pointer("/metadata/resourceVersion").cloned().unwrap_or_default()}),
        ),
    };
    Some(table::table(&columns, &items, meta, now))
}

fn route(shared: &Arc<Shared>, req: &ApiRequest<'_>) -> Result<Response<Body>, ApiError> {
    let (target, watch_path) = parse_path(req.path)?;
    let not_allowed = || ApiError::method_not_allowed(req.method, req.path);
    match &target {
        Target::Collection { resource, .. }
        | Target::Object {
            key: ObjectKey { resource, .. },
            ..
        } if !served(&shared.lock(), *resource) => {
            return Err(not_found_path());
        }
        _ => {}
    }
    match (target, req.method) {
        (Target::Version, "GET") => Ok(json_response(200, &version_info())),
        (Target::CoreVersions, "GET") => Ok(json_response(
            200,
            &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
        )),
        (Target::GroupList, "GET") => Ok(json_response(200, &group_list(&shared.lock()))),
        (Target::ResourceList { group, version }, "GET") => {
            resource_list(&shared.lock(), &group, &version)
        }
        (
            Target::Collection {
                resource,
                namespace,
            },
            "GET",
        ) => {
            if watch_path || query::truthy(query::get(&req.params, "watch")) {
                let spec = WatchSpec::parse(resource, namespace, &req.params)?;
                Ok(stream_response(watch::start(shared, spec)))
            } else {
                let st = shared.lock();
                let listed = list(&st, resource, namespace.as_deref(), &req.params)?;
                let answer = as_table(&st, resource, req, &listed).unwrap_or(listed);
                Ok(json_response(200, &answer))
            }
        }
        (
            Target::Collection {
                resource,
                namespace,
            },
            "POST",
        ) if !watch_path => {
            let obj = parse_body(req.body)?;
            let created = shared.update(|st| create(st, resource, namespace.as_deref(), obj))?;
            Ok(json_response(201, &created))
        }
        (Target::Object { key, subresource }, method) if !watch_path => {
            let status_only = match subresource.as_deref() {
                None => false,
                Some("status") if RESOURCES.get(key.resource).is_some_and(|r| r.has_status) => true,
                Some(_) => return Err(not_found_path()),
            };
            match method {
                "GET" => {
                    let st = shared.lock();
                    let obj = st.store.get(&key).ok_or_else(|| not_found(&key))?;
                    match as_table(&st, key.resource, req, obj) {
                        Some(t) if !status_only => Ok(json_response(200, &t)),
                        _ => Ok(json_response(200, obj)),
                    }
                }
                "PUT" => {
                    let obj = parse_body(req.body)?;
                    let updated = shared.update(|st| replace(st, &key, obj, status_only))?;
                    Ok(json_response(200, &updated))
                }
                "PATCH" => {
                    let kind = PatchKind::from_content_type(req.content_type)?;
                    let patch = parse_body(req.body).map_err(|e| {
                        if kind == PatchKind::Apply {
                            ApiError::new(
                                415,
                                "UnsupportedMediaType",
                                "the stand-in takes server-side apply patches in JSON form only",
                            )
                        } else {
                            e
                        }
                    })?;
                    let (code, obj) =
                        shared.update(|st| apply_patch(st, &key, kind, &patch, status_only))?;
                    Ok(json_response(code, &obj))
                }
                "DELETE" if !status_only => {
                    let gone = shared.update(|st| st.store.delete(&key))?;
                    Ok(json_response(200, &gone))
                }
                _ => Err(not_allowed()),
            }
        }
        _ => Err(not_allowed()),
    }
}

fn not_found(key: &ObjectKey) -> ApiError {
    let plural = RESOURCES.get(key.resource).map_or("objects", |r| r.plural);
    ApiError::not_found(plural, &key.name)
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))?;
    Ok(value)
}

/// Checks that `obj` is an object of `resource`, filling in `apiVersion` and
/// `kind` where missing, and puts it in the request's namespace.
pub(crate) fn conform(
    resource: ResourceId,
    namespace: Option<&str>,
    obj: &mut Value,
) -> Result<(), ApiError> {
    let rt: &ResourceType = RESOURCES
        .get(resource)
        .ok_or_else(|| ApiError::bad_request("unknown resource"))?;
    let Value::Object(map) = obj else {
        return Err(ApiError::bad_request(
            "the request body must be a JSON object",
        ));
    };
    let api_version = rt.api_version();
    for (field, want) in [("apiVersion", api_version.as_str()), ("kind", rt.kind)] {
        match map.get(field).and_then(Value::as_str) {
            None | Some("") => {
                map.insert(field.to_string(), json!(want));
            }
            Some(got) if got == want => {}
            Some(got) => {
                return Err(ApiError::bad_request(format!(
                    "the API version in the data ({got}) does not match the expected API version ({want} {})",
                    rt.kind
                )));
            }
        }
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".to_string(), json!({}));
    }
    if let (true, Some(ns), Some(Value::Object(meta))) =
        (rt.namespaced, namespace, map.get_mut("metadata"))
    {
        match meta.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                meta.insert("namespace".to_string(), json!(ns));
            }
            Some(got) if got == ns => {}
            Some(_) => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
    }
    Ok(())
}

/// POST: create, as a client does it. `generateName` is honoured.
fn create(
    st: &mut State,
    resource: ResourceId,
    namespace: Option<&str>,
    mut obj: Value,
) -> Result<Value, ApiError> {
    let namespaced = RESOURCES.get(resource).is_some_and(|r| r.namespaced);
    if namespaced && namespace.is_none() {
        return Err(ApiError::method_not_allowed(
            "POST",
            "a namespaced collection across namespaces",
        ));
    }
    conform(resource, namespace, &mut obj)?;
    if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
        // Server-owned fields a client may not set on create.
        for field in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
            meta.remove(field);
        }
        let has_name = meta
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| !n.is_empty());
        if let (false, Some(prefix)) = (has_name, meta.get("generateName").and_then(Value::as_str))
        {
            let name = format!("{prefix}{}", generated_suffix(st.store.rv()));
            meta.insert("name".to_string(), json!(name));
        }
    }
    if resources::is_event(resource) {
        validate_event(resource, &obj)?;
    }
    if Some(resource) == resources::crds() {
        validate_crd(&obj)?;
    }
    // A custom resource with the status subresource starts without a
    // status: the API server's strategy drops it on create (a client writes
    // it through /status afterwards).
    if let (true, Value::Object(map)) =
        (RESOURCES.get(resource).is_some_and(|r| r.custom), &mut obj)
    {
        map.remove("status");
    }
    st.store.create(resource, obj)
}

/// Five characters from the Kubernetes name-suffix alphabet (no vowels).
fn generated_suffix(seed: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (0..5)
        .map(|_| {
            let c = ALPHABET
                .get((n % ALPHABET.len() as u64) as usize)
                .copied()
                .unwrap_or(b'x');
            n /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}

/// The fields the API server requires of an `events.k8s.io/v1` Event
/// (`ValidateEventCreate`): a client that leaves them out gets 422 there too.
fn validate_event(resource: ResourceId, obj: &Value) -> Result<(), ApiError> {
    let new_api = RESOURCES
        .get(resource)
        .is_some_and(|r| r.group == "events.k8s.io");
    if !new_api {
        return Ok(());
    }
    let mut missing = Vec::new();
    for field in [
        "eventTime",
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
    ] {
        if obj
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
        {
            missing.push(format!("{field}: Required value"));
        }
    }
    match obj.get("type").and_then(Value::as_str) {
        Some("Normal" | "Warning") => {}
        other => missing.push(format!(
            "type: Unsupported value: {other:?}: supported values: \"Normal\", \"Warning\""
        )),
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(format!(
            "Event is invalid: {}",
            missing.join(", ")
        )))
    }
}

/// The API server's first rule for a CRD: its name is `PLURAL.GROUP`.
fn validate_crd(obj: &Value) -> Result<(), ApiError> {
    let text = |p: &str| obj.pointer(p).and_then(Value::as_str).unwrap_or("");
    let (name, plural, group) = (
        text("/metadata/name"),
        text("/spec/names/plural"),
        text("/spec/group"),
    );
    if plural.is_empty() || group.is_empty() || name != format!("{plural}.{group}") {
        return Err(ApiError::invalid(format!(
            "CustomResourceDefinition.apiextensions.k8s.io {name:?} is invalid: metadata.name: Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"
        )));
    }
    Ok(())
}

/// Rejects a write whose `metadata.resourceVersion` is set but stale: the
/// API server's optimistic concurrency.
fn check_precondition(current: &Value, written: &Value, key: &ObjectKey) -> Result<(), ApiError> {
    let asked = written
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    let now = current
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str);
    match asked {
        Some(rv) if !rv.is_empty() && Some(rv) != now => Err(ApiError::conflict(
            RESOURCES.get(key.resource).map_or("objects", |r| r.plural),
            &key.name,
        )),
        _ => Ok(()),
    }
}

/// Keeps `.status` from one side: writes to the main resource leave the
/// status alone, writes to `/status` change nothing but the status.
fn split_status(
    resource: ResourceId,
    current: &Value,
    mut written: Value,
    status_only: bool,
) -> Value {
    let has_status = RESOURCES.get(resource).is_some_and(|r| r.has_status);
    if !has_status {
        return written;
    }
    if status_only {
        let mut out = current.clone();
        match written.get_mut("status").map(Value::take) {
            Some(status) => out["status"] = status,
            None => {
                if let Value::Object(map) = &mut out {
                    map.remove("status");
                }
            }
        }
        return out;
    }
    match (current.get("status"), &mut written) {
        (Some(status), Value::Object(map)) => {
            map.insert("status".to_string(), status.clone());
        }
        (None, Value::Object(map)) => {
            map.remove("status");
        }
        _ => {}
    }
    written
}

fn same_identity(key: &ObjectKey, obj: &Value) -> Result<(), ApiError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != key.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            key.name
        )));
    }
    Ok(())
}

/// PUT.
fn replace(
    st: &mut State,
    key: &ObjectKey,
    mut obj: Value,
    status_only: bool,
) -> Result<Value, ApiError> {
    let namespace = Some(key.namespace.as_str()).filter(|ns| !ns.is_empty());
    conform(key.resource, namespace, &mut obj)?;
    same_identity(key, &obj)?;
    let current = st.store.get(key).ok_or_else(|| not_found(key))?.clone();
    check_precondition(&current, &obj, key)?;
    let obj = split_status(key.resource, &current, obj, status_only);
    st.store.update(key.resource, obj)
}

/// PATCH; an apply patch may create the object (201).
fn apply_patch(
    st: &mut State,
    key: &ObjectKey,
    kind: PatchKind,
    patch: &Value,
    status_only: bool,
) -> Result<(u16, Value), ApiError> {
    let namespace = Some(key.namespace.as_str()).filter(|ns| !ns.is_empty());
    let Some(current) = st.store.get(key).cloned() else {
        if kind == PatchKind::Apply && !status_only {
            let mut obj = patch.clone();
            conform(key.resource, namespace, &mut obj)?;
            same_identity(key, &obj)?;
            return Ok((201, create(st, key.resource, namespace, obj)?));
        }
        return Err(not_found(key));
    };
    let mut patched = match kind {
        PatchKind::Merge | PatchKind::StrategicMerge | PatchKind::Apply => {
            check_precondition(&current, patch, key)?;
            let mut obj = current.clone();
            patch::merge(&mut obj, patch);
            obj
        }
        PatchKind::Json => patch::json_patch(&current, patch)?,
    };
    conform(key.resource, namespace, &mut patched)?;
    same_identity(key, &patched)?;
    let obj = split_status(key.resource, &current, patched, status_only);
    Ok((200, st.store.update(key.resource, obj)?))
}

/// GET on a collection: the list at the resourceVersion the query asks for,
/// a page at a time when `limit` is given.
fn list(
    st: &State,
    resource: ResourceId,
    namespace: Option<&str>,
    params: &[(String, String)],
) -> Result<Value, ApiError> {
    let rt = RESOURCES.get(resource).ok_or_else(not_found_path)?;
    let label_text = query::get(params, "labelSelector").unwrap_or("");
    let field_text = query::get(params, "fieldSelector").unwrap_or("");
    let labels = crate::selector::LabelSelector::parse(label_text)?;
    let fields = crate::selector::FieldSelector::parse(field_text)?;
    let limit = match query::get(params, "limit") {
        None | Some("") => None,
        Some(l) => match l.parse::<usize>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => return Err(ApiError::bad_request(format!("invalid limit {l:?}"))),
        },
    };
    let (at, after) = list_revision(st, params, limit.is_some(), resource)?;

    let emptied = st.emptied.contains(&resource);
    let matching = st
        .store
        .snapshot(resource, namespace, at, after.as_ref())
        .filter(|_| !emptied)
        .filter(|(_, obj)| labels.matches(obj) && fields.matches(obj));
    let mut items = Vec::new();
    let mut last_key = None;
    let mut more = false;
    for (key, obj) in matching {
        if limit.is_some_and(|l| items.len() >= l) {
            more = true;
            break;
        }
        items.push(obj.clone());
        last_key = Some(key.clone());
    }
    let mut metadata = json!({"resourceVersion": at.to_string()});
    if let (true, Some(key)) = (more, last_key.as_ref()) {
        metadata["continue"] = json!(continue_token(at, key));
        if label_text.is_empty() && field_text.is_empty() {
            let remaining = st
                .store
                .snapshot(resource, namespace, at, Some(key))
                .count();
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    Ok(json!({
        "kind": rt.list_kind(),
        "apiVersion": rt.api_version(),
        "metadata": metadata,
        "items": items,
    }))
}

/// The continue token: the snapshot revision and the last key sent, in a
/// form that needs no escaping. Clients treat it as opaque.
fn continue_token(at: u64, key: &ObjectKey) -> String {
    format!(
        "{at}-{}-{}",
        query::hex_encode(&key.namespace),
        query::hex_encode(&key.name)
    )
}

/// Which revision a list reads at, and after which key it continues, from
/// `resourceVersion`, `resourceVersionMatch` and `continue`, with the
/// semantics the Kubernetes API concepts document gives them.
fn list_revision(
    st: &State,
    params: &[(String, String)],
    paged: bool,
    resource: ResourceId,
) -> Result<(u64, Option<ObjectKey>), ApiError> {
    let current = st.store.rv();
    let compacted = st.store.compacted();
    let rv = query::get(params, "resourceVersion").filter(|v| !v.is_empty());
    let version_match = query::get(params, "resourceVersionMatch").filter(|v| !v.is_empty());
    if let Some(token) = query::get(params, "continue").filter(|t| !t.is_empty()) {
        if rv.is_some() {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        let bad = || ApiError::bad_request(format!("continue key is not valid: {token:?}"));
        let mut parts = token.splitn(3, '-');
        let at = parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .ok_or_else(bad)?;
        let namespace = parts.next().and_then(query::hex_decode).ok_or_else(bad)?;
        let name = parts.next().and_then(query::hex_decode).ok_or_else(bad)?;
        if at < compacted {
            return Err(ApiError::expired(
                "The provided continue parameter is too old to display a consistent list result. \
                 You can start a new list without the continue parameter.",
            ));
        }
        return Ok((
            at,
            Some(ObjectKey {
                resource,
                namespace,
                name,
            }),
        ));
    }
    let Some(v) = rv else {
        return match version_match {
            None => Ok((current, None)),
            Some(_) => Err(ApiError::invalid(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
            )),
        };
    };
    let exact = match (v, version_match) {
        (_, Some(other)) if other != "Exact" && other != "NotOlderThan" => {
            return Err(ApiError::invalid(format!(
                "resourceVersionMatch: Unsupported value: {other:?}: supported values: \"Exact\", \"NotOlderThan\""
            )));
        }
        ("0", Some("Exact")) => {
            return Err(ApiError::invalid(
                "resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
            ));
        }
        // "Any": the current state serves.
        ("0", _) => return Ok((current, None)),
        (_, Some(m)) => m == "Exact",
        // Legacy, without resourceVersionMatch: exact when paged, else
        // not-older-than.
        (_, None) => paged,
    };
    let asked = v
        .parse::<u64>()
        .map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")))?;
    if asked > current {
        return Err(ApiError::new(
            504,
            "Timeout",
            format!("Too large resource version: {asked}, current: {current}"),
        ));
    }
    if !exact {
        return Ok((current, None));
    }
    if asked < compacted {
        return Err(ApiError::expired(format!(
            "too old resource version: {asked} ({compacted})"
        )));
    }
    Ok((asked, None))
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": VERSION_MINOR,
        "gitVersion": format!("v1.{VERSION_MINOR}.0-standin"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "1970-01-01T00:00:00Z",
        "goVersion": "none",
        "compiler": "rustc",
        "platform": "linux/amd64",
    })
}

fn group_list(st: &State) -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(g, v)| resources::in_group_version(g, v).any(|r| !r.custom || served_type(st, r)))
        .map(|(g, v)| {
            let gv = json!({"groupVersion": format!("{g}/{v}"), "version": v});
            json!({"name": g, "versions": [gv], "preferredVersion": gv})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn served_type(st: &State, r: &ResourceType) -> bool {
    resources::by_path(r.group, r.version, r.plural).is_some_and(|id| served(st, id))
}

fn resource_list(st: &State, group: &str, version: &str) -> Result<Response<Body>, ApiError> {
    let mut list: Vec<Value> = Vec::new();
    for r in resources::in_group_version(group, version).filter(|r| served_type(st, r)) {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.kind.to_lowercase(),
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        });
        // A custom resource's names come from its CRD.
        let names = resources::by_path(r.group, r.version, r.plural)
            .and_then(|id| definition(st, id))
            .and_then(|crd| crd.pointer("/spec/names").cloned());
        if let Some(names) = names {
            for (from, to) in [
                ("singular", "singularName"),
                ("shortNames", "shortNames"),
                ("categories", "categories"),
            ] {
                if let Some(v) = names.get(from) {
                    entry[to] = v.clone();
                }
            }
        }
        list.push(entry);
        if r.has_status {
            list.push(json!({
                "name": format!("{}/status", r.plural),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": r.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if list.is_empty() {
        return Err(not_found_path());
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Ok(json_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}),
    ))
}

fn json_response(code: u16, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    let mut resp = Response::new(Body::Full(Some(Bytes::from(bytes))));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

fn error_response(err: &ApiError) -> Response<Body> {
    json_response(err.code(), &err.to_status())
}

fn stream_response(body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(plural: &str) -> ResourceId {
        resources::by_path("", "v1", plural)
            .or_else(|| resources::by_path("discovery.k8s.io", "v1", plural))
            .expect("served")
    }

    #[test]
    fn paths() {
        let coll = |p: &str| parse_path(p).map(|(t, _)| t);
        assert_eq!(
            coll("/api/v1/services"),
            Ok(Target::Collection {
                resource: id("services"),
                namespace: None
            })
        );
        assert_eq!(
            coll("/api/v1/namespaces/kube-system/services"),
            Ok(Target::Collection {
                resource: id("services"),
                namespace: Some("kube-system".into())
            })
        );
        assert_eq!(
            coll("/apis/discovery.k8s.io/v1/namespaces/a/endpointslices/s-1"),
            Ok(Target::Object {
                key: ObjectKey {
                    resource: id("endpointslices"),
                    namespace: "a".into(),
                    name: "s-1".into()
                },
                subresource: None
            })
        );
        assert_eq!(
            coll("/api/v1/nodes/n1/status"),
            Ok(Target::Object {
                key: ObjectKey {
                    resource: id("nodes"),
                    namespace: String::new(),
                    name: "n1".into()
                },
                subresource: Some("status".into())
            })
        );
        // A namespace object, and its status, are cluster-scoped.
        assert_eq!(
            coll("/api/v1/namespaces/default"),
            Ok(Target::Object {
                key: ObjectKey {
                    resource: id("namespaces"),
                    namespace: String::new(),
                    name: "default".into()
                },
                subresource: None
            })
        );
        assert_eq!(
            coll("/api/v1/namespaces/default/status"),
            Ok(Target::Object {
                key: ObjectKey {
                    resource: id("namespaces"),
                    namespace: String::new(),
                    name: "default".into()
                },
                subresource: Some("status".into())
            })
        );
        assert_eq!(parse_path("/api/v1/watch/nodes").map(|(_, w)| w), Ok(true));
        for bad in [
            "/",
            "/api/v1/widgets",
            "/api/v1/nodes/a/b/c",
            "/api/v1/services/x",
            "/healthz",
            "/api/v1/namespaces/a/nodes",
        ] {
            assert_eq!(coll(bad).map_err(|e| e.code()), Err(404), "{bad}");
        }
    }

    #[test]
    fn generated_names_use_the_alphabet() {
        let s = generated_suffix(12345);
        assert_eq!(s.len(), 5);
        assert!(
            s.bytes()
                .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b))
        );
        assert_ne!(generated_suffix(1), generated_suffix(2));
    }
}

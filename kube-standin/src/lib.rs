//! An in-process stand-in for the Kubernetes API server, for tests.
//!
//! It speaks the real list/watch protocol over plain HTTP/1.1 on
//! `127.0.0.1`, so kube-rs (and a `holdfast` child process given
//! [`StandIn::kubeconfig`]) run against it unmodified: paginated lists at a
//! consistent resourceVersion, watches that replay from a resourceVersion,
//! BOOKMARK events, 410 Gone after compaction, label and field selectors.
//! Tests drive the cluster's state through the methods of [`StandIn`] and
//! inject faults: [`StandIn::drop_watches`], [`StandIn::pause`],
//! [`StandIn::refuse`], [`StandIn::compact`].
//!
//! # Threads
//!
//! [`StandIn::start`] is synchronous: the server runs on a thread of its own
//! with its own tokio runtime. It keeps answering while the test thread
//! blocks (waiting on a child process, say), whatever runtime the test uses,
//! or none. Every method is synchronous and returns at once (it takes a
//! short lock), so it can be called from plain and from async tests alike.
//! Dropping the [`StandIn`] stops the server and closes its connections.
//!
//! # Differences from a real API server
//!
//! No authentication, admission, defaulting or schema validation (the
//! required fields of `events.k8s.io/v1` Events are checked). Deletion is
//! immediate (no finalizers). Strategic merge patches are applied as JSON
//! merge patches (lists are replaced, not merged by key). Field selectors
//! accept any dotted path. Namespaces need not exist. See kube-standin/README.md.

mod body;
mod error;
pub mod fixtures;
mod patch;
mod query;
mod resources;
mod selector;
mod server;
mod state;
mod store;
mod table;
mod timefmt;
mod watch;

pub use error::ApiError;
pub use state::RequestRecord;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use state::{Availability, Shared};
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use store::{ObjectKey, Store};

/// A running stand-in API server. See the [crate docs](crate).
pub struct StandIn {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl StandIn {
    /// Binds `127.0.0.1` on a free port and starts serving on a thread of
    /// its own.
    pub fn start() -> io::Result<StandIn> {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        // A per-server tag in every uid, so objects of two stand-ins differ.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() ^ (u32::from(addr.port()) << 16));
        let shared = Shared::new(Store::new(seed));
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let server_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name(format!("kube-standin-{}", addr.port()))
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            eprintln!("kube-standin: cannot serve on {addr}: {e}");
                            return;
                        }
                    };
                    tokio::select! {
                        () = server::serve(listener, server_shared) => {}
                        _ = stopped => {}
                    }
                });
                // Dropping the runtime here cancels every connection task.
            })?;
        Ok(StandIn {
            shared,
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The address it listens on (`127.0.0.1:PORT`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Writes `DIR/kubeconfig`: one cluster at [`StandIn::url`], no
    /// credentials, namespace `default`. Point `KUBECONFIG` at it.
    pub fn kubeconfig(&self, dir: &Path) -> io::Result<PathBuf> {
        let path = dir.join("kubeconfig");
        let text = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: standin\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: standin\n  user: {{}}\n\
             contexts:\n\
             - name: standin\n  context:\n    cluster: standin\n    user: standin\n    namespace: default\n\
             current-context: standin\n",
            url = self.url()
        );
        std::fs::write(&path, text)?;
        Ok(path)
    }

    // ----- the cluster's state -----

    /// Creates an object, as a controller would: `obj` names its own
    /// `apiVersion` and `kind` (typed k8s-openapi objects always do). A
    /// namespaced object without a namespace goes to `default`. Returns the
    /// object as stored, with uid, creationTimestamp, generation and
    /// resourceVersion filled in.
    pub fn create<K: Serialize + DeserializeOwned>(&self, obj: &K) -> Result<K, ApiError> {
        let (resource, value) = typed_value(obj)?;
        let stored = self.shared.update(|st| st.store.create(resource, value))?;
        from_value(stored)
    }

    /// Replaces an existing object wholesale, status included. Its
    /// resourceVersion, if set, is ignored.
    pub fn replace<K: Serialize + DeserializeOwned>(&self, obj: &K) -> Result<K, ApiError> {
        let (resource, value) = typed_value(obj)?;
        let stored = self.shared.update(|st| st.store.update(resource, value))?;
        from_value(stored)
    }

    /// Creates the object, or replaces it if it exists.
    pub fn apply<K: Serialize + DeserializeOwned>(&self, obj: &K) -> Result<K, ApiError> {
        let (resource, value) = typed_value(obj)?;
        let stored = self.shared.update(|st| {
            let key = st.store.key_of(resource, &value)?;
            if st.store.get(&key).is_some() {
                st.store.update(resource, value)
            } else {
                st.store.create(resource, value)
            }
        })?;
        from_value(stored)
    }

    /// Applies a JSON merge patch (RFC 7386) to an object, status included.
    /// `namespace` is ignored for cluster-scoped kinds.
    pub fn patch<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
        merge_patch: &Value,
    ) -> Result<K, ApiError>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let key = key_for::<K>(namespace, name)?;
        let stored = self.shared.update(|st| {
            let mut obj = st
                .store
                .get(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(K::URL_PATH_SEGMENT, name))?;
            patch::merge(&mut obj, merge_patch);
            // The patch may not move the object.
            obj["metadata"]["name"] = json!(key.name);
            if !key.namespace.is_empty() {
                obj["metadata"]["namespace"] = json!(key.namespace);
            }
            st.store.update(key.resource, obj)
        })?;
        from_value(stored)
    }

    /// Sets an object's `.status` by merge patch, as a controller writing
    /// the status subresource does: e.g. for a Service,
    /// `json!({"loadBalancer": {"ingress": [{"ip": "198.51.100.7"}]}})`, or
    /// `json!({"loadBalancer": {"ingress": []}})` to empty it.
    pub fn patch_status<K>(
        &self,
        namespace: Option<&str>,
        name: &str,
        status: &Value,
    ) -> Result<K, ApiError>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        self.patch::<K>(namespace, name, &json!({"status": status}))
    }

    /// Deletes an object at once and returns its last state.
    pub fn delete<K>(&self, namespace: Option<&str>, name: &str) -> Result<K, ApiError>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let key = key_for::<K>(namespace, name)?;
        let gone = self.shared.update(|st| st.store.delete(&key))?;
        from_value(gone)
    }

    /// The current state of an object, if it exists.
    pub fn get<K>(&self, namespace: Option<&str>, name: &str) -> Option<K>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let key = key_for::<K>(namespace, name).ok()?;
        let obj = self.shared.lock().store.get(&key).cloned()?;
        serde_json::from_value(obj).ok()
    }

    /// All objects of a kind (in one namespace, if given), in name order.
    pub fn list<K>(&self, namespace: Option<&str>) -> Vec<K>
    where
        K: k8s_openapi::Resource + DeserializeOwned,
    {
        let Some(resource) = resources::by_kind(K::API_VERSION, K::KIND) else {
            return Vec::new();
        };
        let st = self.shared.lock();
        let at = st.store.rv();
        st.store
            .snapshot(resource, namespace, at, None)
            .filter_map(|(_, obj)| serde_json::from_value(obj.clone()).ok())
            .collect()
    }

    /// The current resourceVersion of the whole store (the newest write).
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().store.rv()
    }

    /// Every Event in the store, of both APIs (`v1` and
    /// `events.k8s.io/v1`), in the order they were created. Clients create
    /// and patch them; the objects are as the last write left them.
    pub fn events(&self) -> Vec<Value> {
        let st = self.shared.lock();
        let at = st.store.rv();
        let mut events: Vec<Value> = resources::RESOURCES
            .iter()
            .enumerate()
            .filter(|(id, _)| resources::is_event(*id))
            .flat_map(|(id, _)| {
                st.store
                    .snapshot(id, None, at, None)
                    .map(|(_, v)| v.clone())
            })
            .collect();
        // uids carry a creation counter in their last group.
        events.sort_by(|a, b| {
            let uid = |v: &Value| {
                v.pointer("/metadata/uid")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            uid(a).cmp(&uid(b))
        });
        events
    }

    /// Every HTTP request received so far, in order, including those
    /// answered with an error, held by [`StandIn::pause`], or cut on a
    /// connection that was open before [`StandIn::refuse`]. (Connections
    /// made while refusing are closed before a request is read: not logged.)
    pub fn requests(&self) -> Vec<RequestRecord> {
        self.shared.lock().requests.clone()
    }

    /// Forgets the requests received so far.
    pub fn clear_requests(&self) {
        self.shared.lock().requests.clear();
    }

    /// How many watch streams are open right now.
    pub fn open_watches(&self) -> usize {
        self.shared.lock().open_watches
    }

    // ----- faults -----

    /// Cuts every open watch stream abruptly: the connection is closed
    /// without the end of the chunked body, as when an API server dies.
    /// Streams opened afterwards are not affected.
    pub fn drop_watches(&self) {
        self.shared.update(|st| st.drop_epoch += 1);
    }

    /// Ends every open watch stream cleanly, as when its `timeoutSeconds`
    /// runs out.
    pub fn close_watches(&self) {
        self.shared.update(|st| st.close_epoch += 1);
    }

    /// Stops answering, as a partitioned API server looks to a client: new
    /// requests are held without an answer and open watch streams send
    /// nothing (no events, no bookmarks, no end), until [`StandIn::resume`].
    /// The store keeps changing if the test changes it; held requests and
    /// streams then catch up. A client only notices through its own
    /// timeouts (kube-rs's watcher: `timeoutSeconds` + 5 s of silence).
    pub fn pause(&self) {
        self.shared
            .update(|st| st.availability = Availability::Stalled);
    }

    /// Refuses service, as a crashed API server looks to a client: new
    /// connections are closed at once, requests on open connections get the
    /// connection closed instead of an answer, and open watch streams are
    /// cut. Clients see errors straight away. Undo with [`StandIn::resume`].
    pub fn refuse(&self) {
        self.shared
            .update(|st| st.availability = Availability::Refusing);
    }

    /// Serves again after [`StandIn::pause`] or [`StandIn::refuse`].
    pub fn resume(&self) {
        self.shared
            .update(|st| st.availability = Availability::Serving);
    }

    /// Compacts the history, as etcd does: writes one empty revision and
    /// forgets everything before it, so every resourceVersion handed out so
    /// far is too old. A watch started from one then gets an `ERROR` event
    /// with a 410 `Expired` Status, and an exact list at one or a `continue`
    /// token from before gets 410. Open watch streams that have sent every
    /// change go on. Returns the compaction point.
    pub fn compact(&self) -> u64 {
        self.shared.update(|st| st.store.compact())
    }

    /// Serves kind `K` as if it had no object, as an API server restored
    /// from an old etcd backup, or one of the wrong cluster, looks to a
    /// client that says nothing is wrong: every list of it answers no
    /// items (at the current resourceVersion), a watch's initial state has
    /// none, and watch streams send no event of it (bookmarks still go).
    /// The store keeps its objects; [`StandIn::serve_stored`] shows them
    /// again. A client learns of either only when it lists again: follow
    /// with [`StandIn::compact`] to make its watchers re-list.
    pub fn serve_empty<K: k8s_openapi::Resource>(&self) {
        if let Some(id) = resources::by_kind(K::API_VERSION, K::KIND) {
            self.shared.update(|st| st.emptied.insert(id));
        }
    }

    /// Serves kind `K` from the store again after
    /// [`StandIn::serve_empty`].
    pub fn serve_stored<K: k8s_openapi::Resource>(&self) {
        if let Some(id) = resources::by_kind(K::API_VERSION, K::KIND) {
            self.shared.update(|st| st.emptied.remove(&id));
        }
    }

    /// Sets how often open watch streams that asked for bookmarks
    /// (`allowWatchBookmarks=true`) get a BOOKMARK event. Default 1 s (the
    /// real API server: about a minute).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        self.shared.update(|st| st.bookmark_interval = interval);
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

/// The resource an object belongs to, from its `apiVersion` and `kind`, and
/// the object as JSON put in the `default` namespace if it needs one.
fn typed_value<K: Serialize>(obj: &K) -> Result<(resources::ResourceId, Value), ApiError> {
    let mut value = serde_json::to_value(obj)
        .map_err(|e| ApiError::bad_request(format!("object does not serialize: {e}")))?;
    let api_version = value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
    let resource = resources::by_kind(api_version, kind).ok_or_else(|| {
        ApiError::new(
            404,
            "NotFound",
            format!("the stand-in serves no kind {kind:?} in {api_version:?}"),
        )
    })?;
    let namespace = Some("default").filter(|_| {
        resources::RESOURCES
            .get(resource)
            .is_some_and(|r| r.namespaced)
    });
    let ns = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|ns| !ns.is_empty())
        .map(str::to_string);
    server::conform(resource, ns.as_deref().or(namespace), &mut value)?;
    Ok((resource, value))
}

fn key_for<K: k8s_openapi::Resource>(
    namespace: Option<&str>,
    name: &str,
) -> Result<ObjectKey, ApiError> {
    let resource = resources::by_kind(K::API_VERSION, K::KIND).ok_or_else(|| {
        ApiError::new(
            404,
            "NotFound",
            format!(
                "the stand-in serves no kind {:?} in {:?}",
                K::KIND,
                K::API_VERSION
            ),
        )
    })?;
    let namespaced = resources::RESOURCES
        .get(resource)
        .is_some_and(|r| r.namespaced);
    let namespace = if namespaced {
        namespace.unwrap_or("default").to_string()
    } else {
        String::new()
    };
    Ok(ObjectKey {
        resource,
        namespace,
        name: name.to_string(),
    })
}

fn from_value<K: DeserializeOwned>(value: Value) -> Result<K, ApiError> {
    serde_json::from_value(value).map_err(|e| {
        ApiError::new(
            500,
            "InternalError",
            format!("stored object does not deserialize: {e}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_is_shareable_across_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<StandIn>();
    }

    #[test]
    fn test_side_errors_match_the_api() {
        let s = StandIn::start().expect("start");
        let svc = fixtures::load_balancer_service("default", "web", &[]);
        s.create(&svc).expect("create");
        assert_eq!(
            s.create(&svc).map_err(|e| e.reason()).err(),
            Some("AlreadyExists")
        );
        let missing = s.delete::<k8s_openapi::api::core::v1::Service>(None, "nope");
        assert_eq!(missing.map_err(|e| e.code()).err(), Some(404));
        let unserved =
            json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}});
        assert_eq!(s.create(&unserved).map_err(|e| e.code()).err(), Some(404));
        // Namespaced objects without a namespace go to `default`.
        let mut bare = fixtures::load_balancer_service("x", "bare", &[]);
        bare.metadata.namespace = None;
        let made = s.create(&bare).expect("create");
        assert_eq!(made.metadata.namespace.as_deref(), Some("default"));
        // apply: create, then replace.
        let node = fixtures::node("n1", "192.0.2.1", &[("rack", "r1")]);
        let first = s.apply(&node).expect("apply creates");
        let second = s
            .apply(&fixtures::node("n1", "192.0.2.1", &[("rack", "r2")]))
            .expect("apply replaces");
        assert_eq!(first.metadata.uid, second.metadata.uid);
        let rv = |n: &k8s_openapi::api::core::v1::Node| {
            n.metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse::<u64>().ok())
        };
        assert!(rv(&second) > rv(&first));
        assert_eq!(s.list::<k8s_openapi::api::core::v1::Node>(None).len(), 1);
    }
}

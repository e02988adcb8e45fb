//! What the server threads and the test thread share.

use crate::store::Store;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;

/// How the server answers, for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Availability {
    Serving,
    /// Requests are held unanswered and open watch streams send nothing, as
    /// a partitioned API server looks to a client: no error, no progress.
    Stalled,
    /// New connections are closed at once, requests on open connections get
    /// the connection closed instead of an answer, and open watch streams
    /// are cut: the client sees errors straight away.
    Refusing,
}

/// One HTTP request as it arrived, for tests to assert on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The path, e.g. `/api/v1/namespaces/default/services`.
    pub path: String,
    /// The raw query string without the `?`, still percent-encoded.
    pub query: String,
}

impl RequestRecord {
    /// The decoded query parameters, in order.
    pub fn params(&self) -> Vec<(String, String)> {
        crate::query::parse(&self.query)
    }

    /// The decoded value of one query parameter (the last, if repeated).
    pub fn param(&self, name: &str) -> Option<String> {
        crate::query::get(&self.params(), name).map(str::to_string)
    }

    /// Whether this request opened a watch stream (`?watch=true` or `1`).
    pub fn is_watch(&self) -> bool {
        crate::query::truthy(self.param("watch").as_deref()) || self.path.contains("/watch/")
    }
}

pub(crate) struct State {
    pub store: Store,
    pub availability: Availability,
    /// Bumped by `drop_watches`: streams opened before end abruptly.
    pub drop_epoch: u64,
    /// Bumped by `close_watches`: streams opened before end cleanly.
    pub close_epoch: u64,
    pub bookmark_interval: Duration,
    pub requests: Vec<RequestRecord>,
    pub open_watches: usize,
    /// Resources served as if they had no object (`serve_empty`): lists
    /// answer no items, watches send no event of them.
    pub emptied: std::collections::BTreeSet<crate::resources::ResourceId>,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// Bumped after every change to `state` that a waiting request or watch
    /// stream may care about.
    signal: watch::Sender<u64>,
}

/// The default interval between BOOKMARK events on a watch stream that asked
/// for them. The real API server sends one about a minute apart; tests want
/// them sooner.
pub(crate) const DEFAULT_BOOKMARK_INTERVAL: Duration = Duration::from_secs(1);

impl Shared {
    pub(crate) fn new(store: Store) -> Arc<Self> {
        Arc::new(Shared {
            state: Mutex::new(State {
                store,
                availability: Availability::Serving,
                drop_epoch: 0,
                close_epoch: 0,
                bookmark_interval: DEFAULT_BOOKMARK_INTERVAL,
                requests: Vec::new(),
                open_watches: 0,
                emptied: std::collections::BTreeSet::new(),
            }),
            signal: watch::Sender::new(0),
        })
    }

    /// Locks the state. A panic while the lock was held (a failed assertion
    /// in a test thread, say) does not make the server unusable.
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Wakes every waiting request and watch stream to look at the state again.
    pub(crate) fn notify(&self) {
        self.signal.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.signal.subscribe()
    }

    /// Runs `f` on the state under the lock, then wakes the waiters.
    pub(crate) fn update<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let out = f(&mut self.lock());
        self.notify();
        out
    }
}

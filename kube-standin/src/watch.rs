//! Watch streams: `?watch=true` answered with a chunked stream of JSON lines
//! `{"type":"ADDED|MODIFIED|DELETED|BOOKMARK|ERROR","object":{...}}`.
//!
//! Each stream is a task that wakes on every store change, sends the changes
//! after the last revision it sent that match its namespace and selectors,
//! BOOKMARKs when asked for, and ends when `timeoutSeconds` runs out.

use crate::body::Body;
use crate::error::ApiError;
use crate::query;
use crate::resources::{RESOURCES, ResourceId};
use crate::selector::{FieldSelector, LabelSelector};
use crate::state::{Availability, Shared, State};
use crate::store::{Change, ChangeType};
use hyper::body::Bytes;
use serde_json::{Value, json};
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// When `timeoutSeconds` is absent the API server picks a timeout between
/// its `--min-request-timeout` (1800 s) and twice that; this takes the low end.
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// What one watch request asked for.
#[derive(Debug, Clone)]
pub(crate) struct WatchSpec {
    resource: ResourceId,
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    bookmarks: bool,
    timeout: Duration,
    start: Start,
    /// `sendInitialEvents=true`: the initial state is followed by a BOOKMARK
    /// annotated `k8s.io/initial-events-end` (a "streaming list").
    send_initial_events: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Start {
    /// No resourceVersion, `0`, or a streaming list: synthetic ADDED events
    /// for the current state, then changes.
    CurrentState,
    /// Changes after this resourceVersion.
    After(u64),
}

impl WatchSpec {
    pub(crate) fn parse(
        resource: ResourceId,
        namespace: Option<String>,
        params: &[(String, String)],
    ) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(query::get(params, "labelSelector").unwrap_or(""))?;
        let fields = FieldSelector::parse(query::get(params, "fieldSelector").unwrap_or(""))?;
        let bookmarks = query::truthy(query::get(params, "allowWatchBookmarks"));
        let send_initial_events = query::truthy(query::get(params, "sendInitialEvents"));
        let timeout = match query::get(params, "timeoutSeconds") {
            None | Some("") => DEFAULT_WATCH_TIMEOUT,
            Some(t) => Duration::from_secs(
                t.parse::<u64>()
                    .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
            ),
        };
        let version_match = query::get(params, "resourceVersionMatch").filter(|m| !m.is_empty());
        if send_initial_events {
            if version_match != Some("NotOlderThan") {
                return Err(ApiError::invalid(
                    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
        } else if version_match.is_some() {
            return Err(ApiError::invalid(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
            ));
        }
        let start =
            match query::get(params, "resourceVersion") {
                None | Some("" | "0") => Start::CurrentState,
                Some(_) if send_initial_events => Start::CurrentState,
                Some(rv) => Start::After(rv.parse::<u64>().map_err(|_| {
                    ApiError::bad_request(format!("invalid resource version: {rv:?}"))
                })?),
            };
        Ok(WatchSpec {
            resource,
            namespace,
            labels,
            fields,
            bookmarks,
            timeout,
            start,
            send_initial_events,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }

    /// The event a change makes on this stream, if any. An object that
    /// starts or stops matching the selectors is ADDED or DELETED, as the
    /// API server's watch cache reports it.
    fn event_for<'c>(&self, change: &'c Change) -> Option<(&'static str, &'c Value)> {
        if change.key.resource != self.resource
            || self
                .namespace
                .as_ref()
                .is_some_and(|ns| *ns != change.key.namespace)
        {
            return None;
        }
        let now = self.matches(&change.new);
        match change.kind {
            ChangeType::Added => now.then_some(("ADDED", &change.new)),
            ChangeType::Deleted => now.then_some(("DELETED", &change.new)),
            ChangeType::Modified => {
                let before = change.old.as_ref().is_some_and(|o| self.matches(o));
                match (before, now) {
                    (true, true) => Some(("MODIFIED", &change.new)),
                    (false, true) => Some(("ADDED", &change.new)),
                    (true, false) => Some(("DELETED", &change.new)),
                    (false, false) => None,
                }
            }
        }
    }
}

fn frame(kind: &str, object: &Value) -> Bytes {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object}))
        .unwrap_or_else(|_| b"{}".to_vec());
    line.push(b'\n');
    Bytes::from(line)
}

fn bookmark(resource: ResourceId, rv: u64, initial_events_end: bool) -> Bytes {
    let (kind, api_version) = RESOURCES
        .get(resource)
        .map_or(("Unknown".to_string(), "v1".to_string()), |r| {
            (r.kind.to_string(), r.api_version())
        });
    let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    frame(
        "BOOKMARK",
        &json!({"kind": kind, "apiVersion": api_version, "metadata": metadata}),
    )
}

fn too_old(asked: u64, compacted: u64) -> Bytes {
    // The message the API server's watch cache gives (etcd3 watcher:
    // "too old resource version: %d (%d)").
    frame(
        "ERROR",
        &ApiError::expired(format!("too old resource version: {asked} ({compacted})")).to_status(),
    )
}

/// Counts the stream among the open ones while it lives.
struct OpenWatch(Arc<Shared>);

impl OpenWatch {
    fn new(shared: &Arc<Shared>) -> Self {
        shared.update(|st| st.open_watches += 1);
        OpenWatch(Arc::clone(shared))
    }
}

impl Drop for OpenWatch {
    fn drop(&mut self) {
        self.0
            .update(|st| st.open_watches = st.open_watches.saturating_sub(1));
    }
}

/// Starts the stream's task and returns the body it feeds.
pub(crate) fn start(shared: &Arc<Shared>, spec: WatchSpec) -> Body {
    let (tx, rx) = mpsc::unbounded_channel();
    let guard = OpenWatch::new(shared);
    // The stream belongs to the epochs current when it was opened, not when
    // its task first runs: a `drop_watches` in between must cut it.
    let epochs = {
        let st = shared.lock();
        (st.drop_epoch, st.close_epoch)
    };
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let _guard = guard;
        run(&shared, &spec, epochs, &tx).await;
    });
    Body::Stream(rx)
}

type Tx = mpsc::UnboundedSender<Result<Bytes, io::Error>>;

enum Step {
    /// Cut the connection without finishing the chunked body.
    Abort,
    /// Finish the body cleanly.
    End,
    /// Say nothing for now.
    Stalled,
    Send(Vec<Bytes>),
    /// Send these, then finish the body.
    SendLast(Vec<Bytes>),
}

async fn run(shared: &Shared, spec: &WatchSpec, (drop_epoch, close_epoch): (u64, u64), tx: &Tx) {
    let mut signal = shared.subscribe();
    let opened = Instant::now();
    let deadline = opened + spec.timeout;
    let mut last_bookmark = opened;

    // The first batch: the initial state or the 410 for a compacted start.
    let mut cursor = {
        let st = shared.lock();
        let mut frames = Vec::new();
        let cursor = match spec.start {
            Start::After(rv) if rv < st.store.compacted() => {
                let _ = tx.send(Ok(too_old(rv, st.store.compacted())));
                return;
            }
            Start::After(rv) => rv,
            Start::CurrentState => {
                let now = st.store.rv();
                let ns = spec.namespace.as_deref();
                let emptied = st.emptied.contains(&spec.resource);
                for (_, obj) in st.store.snapshot(spec.resource, ns, now, None) {
                    if spec.matches(obj) && !emptied {
                        frames.push(frame("ADDED", obj));
                    }
                }
                if spec.send_initial_events && spec.bookmarks {
                    frames.push(bookmark(spec.resource, now, true));
                }
                now
            }
        };
        if send_all(tx, frames).is_err() {
            return;
        }
        cursor
    };

    loop {
        let mut stalled = false;
        let step = {
            let st = shared.lock();
            next_step(
                &st,
                spec,
                drop_epoch,
                close_epoch,
                &mut cursor,
                &mut last_bookmark,
                deadline,
            )
        };
        match step {
            Step::Abort => {
                let _ = tx.send(Err(io::Error::other("stand-in: watch stream dropped")));
                return;
            }
            Step::End => return,
            Step::Stalled => stalled = true,
            Step::Send(frames) => {
                if send_all(tx, frames).is_err() {
                    return;
                }
            }
            Step::SendLast(frames) => {
                let _ = send_all(tx, frames);
                return;
            }
        }
        let interval = shared.lock().bookmark_interval;
        let wake = if stalled {
            None
        } else if spec.bookmarks {
            Some(deadline.min(last_bookmark + interval))
        } else {
            Some(deadline)
        };
        tokio::select! {
            changed = signal.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = sleep_until(wake) => {}
            () = tx.closed() => return,
        }
    }
}

/// Queues frames for the client; fails once the client has gone.
fn send_all(tx: &Tx, frames: Vec<Bytes>) -> Result<(), ()> {
    for f in frames {
        tx.send(Ok(f)).map_err(drop)?;
    }
    Ok(())
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn next_step(
    st: &State,
    spec: &WatchSpec,
    drop_epoch: u64,
    close_epoch: u64,
    cursor: &mut u64,
    last_bookmark: &mut Instant,
    deadline: Instant,
) -> Step {
    if st.availability == Availability::Refusing || st.drop_epoch != drop_epoch {
        return Step::Abort;
    }
    if st.close_epoch != close_epoch {
        return Step::End;
    }
    if st.availability == Availability::Stalled {
        return Step::Stalled;
    }
    if *cursor < st.store.discarded_upto() {
        // Compaction removed changes this stream had not sent yet.
        return Step::SendLast(vec![too_old(*cursor, st.store.compacted())]);
    }
    let mut frames: Vec<Bytes> = st
        .store
        .changes_after(*cursor)
        .iter()
        .filter(|_| !st.emptied.contains(&spec.resource))
        .filter_map(|c| spec.event_for(c))
        .map(|(kind, obj)| frame(kind, obj))
        .collect();
    *cursor = st.store.rv();
    let now = Instant::now();
    if now >= deadline {
        return Step::SendLast(frames);
    }
    if spec.bookmarks && now >= *last_bookmark + st.bookmark_interval {
        // Every change up to `cursor` that matches has been sent above, so
        // a client may resume from here.
        frames.push(bookmark(spec.resource, *cursor, false));
        *last_bookmark = now;
    }
    Step::Send(frames)
}

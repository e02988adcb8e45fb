//! Kubernetes Events on a Service when this node starts or stops
//! advertising one of its addresses (reasons `Advertised`, `Withdrawn`), so
//! `kubectl describe service` shows which nodes carry it and since when.
//!
//! The daemon calls [`EventRecorder::advertised`] and
//! [`EventRecorder::withdrawn`] as the speaker sends a route or its
//! withdrawal; they never block. The Services are found from the address
//! (the Services that give it, or last gave it), rate-limited per Service
//! ([`EventLimits`]), and published by a task through kube-runtime's
//! `Recorder` (`events.k8s.io/v1`: create, then merge patches of a series).
//! A failure to publish is logged and forgotten: Events are informative.

use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::Notify;

use super::limit::{EventLimits, Limiter, Notice};
use super::service::ServiceKey;

/// The reporting controller named in Events.
pub const REPORTING_CONTROLLER: &str = "holdfast";

/// At most this many peers are named in one message (a note is at most 1 kB).
const MAX_PEERS_NAMED: usize = 16;

/// Which way a route changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteChange {
    /// This node started advertising the address.
    Advertised,
    /// This node withdrew the address.
    Withdrawn,
}

/// Finds the Services (with uids, when known) behind an address.
pub type Resolver = dyn Fn(IpAddr) -> Vec<ObjectReference> + Send + Sync;

#[derive(Debug, Clone)]
pub(crate) struct Payload {
    regarding: ObjectReference,
    change: RouteChange,
    peers: Vec<String>,
}

struct State {
    limiter: Limiter<ServiceKey, Payload>,
    outbox: Vec<Notice<Payload>>,
}

struct Inner {
    node: String,
    limits: EventLimits,
    resolve: Box<Resolver>,
    state: Mutex<State>,
    /// Shared with the task, which holds only a weak reference to the rest.
    wake: Arc<Notify>,
}

impl Drop for Inner {
    /// The last recorder is gone: let the task see it and stop.
    fn drop(&mut self) {
        self.wake.notify_one();
    }
}

/// Records Events about this node's routes. Cheap to clone; the publishing
/// task stops when the last clone is dropped.
#[derive(Clone)]
pub struct EventRecorder {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("node", &self.inner.node)
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

/// The reference to a Service that Events are about.
pub fn service_reference(key: &ServiceKey, uid: Option<String>) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_string()),
        kind: Some("Service".to_string()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        uid,
        ..ObjectReference::default()
    }
}

/// The text of an Event.
pub(crate) fn note(
    node: &str,
    address: IpAddr,
    change: RouteChange,
    peers: &[String],
    suppressed: u32,
) -> String {
    let prefix = match address {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    };
    let mut text = match change {
        RouteChange::Advertised => format!("node {node} advertises {address}/{prefix}"),
        RouteChange::Withdrawn => format!("node {node} withdrew {address}/{prefix}"),
    };
    let verb = match change {
        RouteChange::Advertised => "to",
        RouteChange::Withdrawn => "from",
    };
    match peers.len() {
        0 => {
            let _ = write!(text, " (no BGP session is established)");
        }
        n => {
            let named: Vec<&str> = peers
                .iter()
                .take(MAX_PEERS_NAMED)
                .map(String::as_str)
                .collect();
            let word = if n == 1 { "peer" } else { "peers" };
            let _ = write!(text, " {verb} {word} {}", named.join(", "));
            if n > MAX_PEERS_NAMED {
                let _ = write!(text, " and {} more", n - MAX_PEERS_NAMED);
            }
        }
    }
    if suppressed > 0 {
        let word = if suppressed == 1 { "change" } else { "changes" };
        let _ = write!(
            text,
            "; … and {suppressed} more {word} suppressed (Events are rate-limited per Service)"
        );
    }
    text
}

impl EventRecorder {
    /// Starts the publishing task (on the current tokio runtime).
    /// `node` names this node in messages and is the reporting instance;
    /// `resolve` finds the Services behind an address.
    pub fn spawn(
        client: Client,
        node: String,
        limits: EventLimits,
        resolve: Box<Resolver>,
    ) -> EventRecorder {
        let inner = Arc::new(Inner {
            node: node.clone(),
            limits,
            resolve,
            state: Mutex::new(State {
                limiter: Limiter::new(limits),
                outbox: Vec::new(),
            }),
            wake: Arc::new(Notify::new()),
        });
        let recorder = Recorder::new(
            client,
            Reporter {
                controller: REPORTING_CONTROLLER.to_string(),
                instance: Some(node),
            },
        );
        tokio::spawn(publish(
            Arc::downgrade(&inner),
            Arc::clone(&inner.wake),
            recorder,
        ));
        EventRecorder { inner }
    }

    /// This node started advertising `address` to `peers` (names of the
    /// `[[peer]]`s whose sessions carry it).
    pub fn advertised(&self, address: IpAddr, peers: &[String]) {
        self.offer(address, RouteChange::Advertised, peers);
    }

    /// This node withdrew `address` from `peers`.
    pub fn withdrawn(&self, address: IpAddr, peers: &[String]) {
        self.offer(address, RouteChange::Withdrawn, peers);
    }

    fn offer(&self, address: IpAddr, change: RouteChange, peers: &[String]) {
        let references = (self.inner.resolve)(address);
        if references.is_empty() {
            tracing::debug!(%address, ?change, "no Service known for the address; no Event");
            return;
        }
        let now = Instant::now();
        {
            let Ok(mut state) = self.inner.state.lock() else {
                return;
            };
            for regarding in references {
                let key = ServiceKey {
                    namespace: regarding.namespace.clone().unwrap_or_default(),
                    name: regarding.name.clone().unwrap_or_default(),
                };
                let payload = Payload {
                    regarding,
                    change,
                    peers: peers.to_vec(),
                };
                let ready = state.limiter.offer(&key, address, payload, now);
                state.outbox.extend(ready);
            }
        }
        // Wake the task either way: a change that waits moves its deadline.
        self.inner.wake.notify_one();
    }
}

/// The publishing task: sends what the limiter lets out, sleeps until the
/// next token otherwise.
async fn publish(inner: std::sync::Weak<Inner>, wake: Arc<Notify>, recorder: Recorder) {
    loop {
        let Some(strong) = inner.upgrade() else {
            return;
        };
        let (batch, deadline) = {
            let Ok(mut state) = strong.state.lock() else {
                return;
            };
            let due = state.limiter.due(Instant::now());
            state.outbox.extend(due);
            (
                std::mem::take(&mut state.outbox),
                state.limiter.next_deadline(),
            )
        };
        for notice in batch {
            let Notice {
                address,
                payload,
                suppressed,
            } = notice;
            let (reason, action) = match payload.change {
                RouteChange::Advertised => ("Advertised", "Advertise"),
                RouteChange::Withdrawn => ("Withdrawn", "Withdraw"),
            };
            let event = Event {
                type_: EventType::Normal,
                reason: reason.to_string(),
                note: Some(note(
                    &strong.node,
                    address,
                    payload.change,
                    &payload.peers,
                    suppressed,
                )),
                action: action.to_string(),
                secondary: None,
            };
            if let Err(error) = recorder.publish(&event, &payload.regarding).await {
                tracing::warn!(
                    service = ?payload.regarding.name,
                    namespace = ?payload.regarding.namespace,
                    %address,
                    %error,
                    "could not record the Event (it needs create and patch on events.k8s.io events)"
                );
            }
        }
        drop(strong);
        // A notification sent since the batch was taken is kept as a
        // permit, so this returns at once then.
        let notified = wake.notified();
        match deadline {
            Some(at) => {
                let at = tokio::time::Instant::from_std(at);
                tokio::select! {
                    () = notified => {}
                    () = tokio::time::sleep_until(at) => {}
                }
            }
            None => notified.await,
        }
    }
}

//! Kubernetes Events on a Service when this node starts or stops
//! advertising one of its addresses (reasons `Advertised`, `Withdrawn`), so
//! `kubectl describe service` shows which nodes carry it and since when.
//!
//! The daemon calls [`EventRecorder::advertised`] and
//! [`EventRecorder::withdrawn`] as the speaker sends a route or its
//! withdrawal; they never block. The Services are found from the address
//! (the Services that give it, or last gave it), rate-limited per Service
//! ([`EventLimits`]), and published by a task as `events.k8s.io/v1` Events.
//! An Event identical to one published in the last 6 minutes (same Service,
//! reason and note) is counted in that Event's `series` by a merge patch
//! instead of created again, as client-go's recorder does. (kube-runtime's
//! `Recorder` would also fold Events with a different note into a series
//! and keep the first note, losing the peers and the suppression summary.)
//! A failure to publish is logged and forgotten: Events are informative.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::Notify;

mod limit;

use crate::source::kubernetes::service::ServiceKey;
pub use limit::EventLimits;
use limit::{Limiter, Notice};

/// The reporting controller named in Events.
pub const REPORTING_CONTROLLER: &str = "holdfast";

/// At most this many peers are named in one message (a note is at most 1 kB).
const MAX_PEERS_NAMED: usize = 16;

/// How long an Event is continued as a series (client-go and the API
/// server's own aggregation use 6 minutes too).
const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

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
    /// A Warning instead: the Service's attribute annotations were refused,
    /// or peers its tenant may not reach (the text says which and why).
    refused: Option<(Refusal, String)>,
}

/// What a Warning Event refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Attribute annotations ([`ATTRIBUTES_REFUSED`]).
    Attributes,
    /// Peers the Service's tenant may not reach ([`TENANT_PEERS_REFUSED`]).
    TenantPeers,
}

/// The reason of the Warning Event about refused attribute annotations.
pub const ATTRIBUTES_REFUSED: &str = "AttributesRefused";
/// The reason of the Warning Event about a Service whose advertisement
/// names peers its tenant may not reach (`[[tenant]] peers`).
pub const TENANT_PEERS_REFUSED: &str = "TenantPeersRefused";

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

/// The text of a Warning about refused annotations or tenant peers (at
/// most 1 kB).
pub(crate) fn refused_note(node: &str, address: IpAddr, refusal: Refusal, why: &str) -> String {
    let mut text = match refusal {
        Refusal::Attributes => {
            format!("node {node} announces {address} with its advertisement's attributes: {why}")
        }
        Refusal::TenantPeers => {
            format!("node {node} announces {address} only to its tenant's peers: {why}")
        }
    };
    if text.len() > 1000 {
        let mut cut = 997;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
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
        let writer = Writer {
            client,
            node,
            series: HashMap::new(),
        };
        tokio::spawn(publish(
            Arc::downgrade(&inner),
            Arc::clone(&inner.wake),
            writer,
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

    /// A Warning Event on the Service: some of its attribute annotations
    /// are refused (`why`), and `address` keeps its advertisement's
    /// attributes. Called when the refusal first appears or changes, so it
    /// bypasses the per-Service rate limit (which keeps only the latest
    /// change per address and would drop it behind a route change).
    pub fn refused(&self, regarding: ObjectReference, address: IpAddr, why: String) {
        self.refuse(regarding, address, Refusal::Attributes, why);
    }

    /// A Warning Event on the Service: its advertisement names peers its
    /// tenant may not reach (`why`), and `address` goes to the tenant's
    /// peers only. Sent like [`EventRecorder::refused`].
    pub fn tenant_refused(&self, regarding: ObjectReference, address: IpAddr, why: String) {
        self.refuse(regarding, address, Refusal::TenantPeers, why);
    }

    fn refuse(&self, regarding: ObjectReference, address: IpAddr, refusal: Refusal, why: String) {
        {
            let Ok(mut state) = self.inner.state.lock() else {
                return;
            };
            state.outbox.push(Notice {
                address,
                payload: Payload {
                    regarding,
                    change: RouteChange::Advertised,
                    peers: Vec::new(),
                    refused: Some((refusal, why)),
                },
                suppressed: 0,
            });
        }
        self.inner.wake.notify_one();
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
                    refused: None,
                };
                let ready = state.limiter.offer(&key, address, payload, now);
                state.outbox.extend(ready);
            }
        }
        // Wake the task either way: a change that waits moves its deadline.
        self.inner.wake.notify_one();
    }
}

/// What makes two Events the same: the Service, the reason and the note.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SeriesKey {
    namespace: String,
    name: String,
    reason: &'static str,
    note: String,
}

/// An Event written, continued by identical ones.
#[derive(Debug)]
struct Series {
    event_name: String,
    count: i32,
    last_written: Instant,
}

/// Writes Events, continuing series of identical ones.
struct Writer {
    client: Client,
    node: String,
    series: HashMap<SeriesKey, Series>,
}

impl Writer {
    async fn write(&mut self, notice: Notice<Payload>) -> Result<(), kube::Error> {
        let Notice {
            address,
            payload,
            suppressed,
        } = notice;
        let (reason, action, type_) = match (&payload.refused, payload.change) {
            (Some((Refusal::Attributes, _)), _) => (ATTRIBUTES_REFUSED, "Advertise", "Warning"),
            (Some((Refusal::TenantPeers, _)), _) => (TENANT_PEERS_REFUSED, "Advertise", "Warning"),
            (None, RouteChange::Advertised) => ("Advertised", "Advertise", "Normal"),
            (None, RouteChange::Withdrawn) => ("Withdrawn", "Withdraw", "Normal"),
        };
        let note = match &payload.refused {
            Some((refusal, why)) => refused_note(&self.node, address, *refusal, why),
            None => note(
                &self.node,
                address,
                payload.change,
                &payload.peers,
                suppressed,
            ),
        };
        let regarding = payload.regarding;
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".to_string());
        let name = regarding.name.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Instant::now();
        self.series
            .retain(|_, s| now.saturating_duration_since(s.last_written) < SERIES_WINDOW);
        let key = SeriesKey {
            namespace: namespace.clone(),
            name: name.clone(),
            reason,
            note: note.clone(),
        };
        let stamp = Timestamp::now();
        if let Some(series) = self.series.get_mut(&key) {
            let count = series.count.saturating_add(1);
            let patch = serde_json::json!({
                "series": EventSeries { count, last_observed_time: MicroTime(stamp) },
            });
            api.patch(
                &series.event_name,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
            series.count = count;
            series.last_written = now;
            return Ok(());
        }
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", stamp.as_nanosecond())),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            action: Some(action.to_string()),
            reason: Some(reason.to_string()),
            note: Some(note),
            event_time: Some(MicroTime(stamp)),
            regarding: Some(regarding),
            reporting_controller: Some(REPORTING_CONTROLLER.to_string()),
            reporting_instance: Some(self.node.clone()),
            type_: Some(type_.to_string()),
            ..Event::default()
        };
        let created = api.create(&PostParams::default(), &event).await?;
        if let Some(event_name) = created.metadata.name {
            self.series.insert(
                key,
                Series {
                    event_name,
                    count: 1,
                    last_written: now,
                },
            );
        }
        Ok(())
    }
}

/// The publishing task: sends what the limiter lets out, sleeps until the
/// next token otherwise.
async fn publish(inner: std::sync::Weak<Inner>, wake: Arc<Notify>, mut writer: Writer) {
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
        drop(strong);
        for notice in batch {
            let address = notice.address;
            let service = notice.payload.regarding.name.clone().unwrap_or_default();
            if let Err(error) = writer.write(notice).await {
                tracing::warn!(
                    %service,
                    %address,
                    error = %crate::source::kubernetes::forbidden::describe(&error),
                    "could not record the Event (it needs create and patch on events.k8s.io events)"
                );
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn peers(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("tor{i}")).collect()
    }

    #[test]
    fn notes_name_the_node_the_prefix_and_the_peers() {
        let v4: IpAddr = "198.51.100.7".parse().expect("v4");
        let v6: IpAddr = "2001:db8::7".parse().expect("v6");
        assert_eq!(
            note("n1", v4, RouteChange::Advertised, &peers(2), 0),
            "node n1 advertises 198.51.100.7/32 to peers tor1, tor2"
        );
        assert_eq!(
            note("n1", v6, RouteChange::Withdrawn, &peers(1), 0),
            "node n1 withdrew 2001:db8::7/128 from peer tor1"
        );
        assert_eq!(
            note("n1", v4, RouteChange::Advertised, &[], 0),
            "node n1 advertises 198.51.100.7/32 (no BGP session is established)"
        );
        assert_eq!(
            note("n1", v4, RouteChange::Withdrawn, &peers(1), 1),
            "node n1 withdrew 198.51.100.7/32 from peer tor1; … and 1 more change suppressed (Events are rate-limited per Service)"
        );
        let many = note("n1", v4, RouteChange::Advertised, &peers(40), 7);
        assert!(many.contains("tor16 and 24 more;"), "{many}");
        assert!(!many.contains("tor17"), "{many}");
        assert!(many.len() < 1024, "a note is at most 1 kB");
    }
}

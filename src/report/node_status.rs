//! The `BGPNodeStatus` of this node (`holdfast.dev/v1alpha1`, cluster-scoped,
//! named after the node, owned by its Node): its sessions and route counts,
//! so `kubectl get bgpnodestatuses` shows the whole cluster like
//! `show bgp summary`. The CRD is deploy/cluster/bgpnodestatus-crd.yaml.
//!
//! - [`build`] is the pure part: the daemon's [`Status`] → the object's
//!   `status`.
//! - [`NodeStatusWriter`] is the thin driver: every `interval` it builds
//!   the status and, only if it differs from the last one written, writes
//!   it by server-side apply of the status subresource. So a change costs
//!   one write, a flapping peer at most one write per interval, and a quiet
//!   node none. The object itself (name, owner reference to the Node) is
//!   applied first, once, and again if the status write finds it gone; an
//!   unchanged status is rewritten every [`RESYNC`]. A
//!   failure is logged once per streak and retried after
//!   [`RETRY_AFTER`]: the status is informative and never holds up routing.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::task::JoinHandle;

use crate::report::status::Status;

pub const GROUP: &str = "holdfast.dev";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "BGPNodeStatus";
pub const PLURAL: &str = "bgpnodestatuses";
/// The field manager of holdfast's server-side applies.
pub const FIELD_MANAGER: &str = "holdfast";
/// Default time between two writes at most.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(5);
/// After a failed write, the next attempt waits this long at least.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);
/// An unchanged status is written again after this long, so an object
/// deleted by hand comes back even on a quiet node.
pub const RESYNC: Duration = Duration::from_secs(300);

/// The object's `status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusBody {
    pub asn: u32,
    #[serde(rename = "routerID")]
    pub router_id: String,
    pub version: String,
    /// `Healthy`, `Syncing`, or the source's problem in words.
    pub source: String,
    pub peers_established: u32,
    pub peers_configured: u32,
    pub peers: Vec<NodePeer>,
    pub routes: RouteCounts,
}

/// One `[[peer]]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePeer {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    pub asn: u32,
    pub state: String,
    /// When the session entered `state`, RFC 3339 to the second.
    pub since: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub prefixes_advertised: Families,
    /// BFD state (RFC 5880 §4.1); absent for a peer without BFD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bfd: Option<String>,
    /// Not written: tells a session that went down and up again between two
    /// builds from one that stayed up, so its `since` is not carried over.
    #[serde(skip)]
    pub transitions: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Families {
    pub ipv4: u64,
    pub ipv6: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RouteCounts {
    pub advertised: u64,
    /// Advertised although the source no longer has them: held down, damped
    /// or draining (as `holdfast_routes_held_down`).
    pub held_down: u64,
    /// Of those, kept by damping.
    pub damped: u64,
    /// Withdrawals the mass-withdrawal guard holds back now (as
    /// `holdfast_withdrawals_deferred`).
    pub deferred: u64,
}

/// The instant `seconds` before `now`, to the second.
fn seconds_before(now: Timestamp, seconds: u64) -> String {
    let at = now
        .as_second()
        .saturating_sub(i64::try_from(seconds).unwrap_or(i64::MAX));
    Timestamp::from_second(at)
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

/// The status of this node at `now`, from `status`'s peers and counters
/// (its route list, if any, is not read: the writer asks for none). A peer whose state (and count of
/// Established transitions) is what `previous` had keeps `previous`'s
/// `since`: recomputed from "seconds in state" it would wobble by a second
/// between builds and turn every build into a write.
pub fn build(status: &Status, now: Timestamp, previous: Option<&NodeStatusBody>) -> NodeStatusBody {
    let peers: Vec<NodePeer> = status
        .peers
        .iter()
        .map(|p| {
            let kept = previous
                .and_then(|prev| prev.peers.iter().find(|q| q.name == p.name))
                .filter(|q| q.state == p.state && q.transitions == p.established_transitions)
                .map(|q| q.since.clone());
            NodePeer {
                name: p.name.clone(),
                address: p.address.clone(),
                asn: p.asn,
                state: p.state.clone(),
                since: kept.unwrap_or_else(|| seconds_before(now, p.state_seconds)),
                last_error: p.last_error.clone(),
                prefixes_advertised: Families {
                    ipv4: p.prefixes_advertised_ipv4,
                    ipv6: p.prefixes_advertised_ipv6,
                },
                bfd: p.bfd.as_ref().map(|b| b.state.clone()),
                transitions: p.established_transitions,
            }
        })
        .collect();
    let source = if !status.source.healthy {
        status
            .source
            .error
            .clone()
            .unwrap_or_else(|| "Unhealthy".to_string())
    } else if !status.source.synced {
        "Syncing".to_string()
    } else {
        "Healthy".to_string()
    };
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    NodeStatusBody {
        asn: status.asn,
        router_id: status.router_id.clone(),
        version: status.version.clone(),
        source,
        peers_established: count(peers.iter().filter(|p| p.state == "Established").count()),
        peers_configured: count(peers.len()),
        routes: RouteCounts {
            advertised: status.counters.routes_advertised,
            held_down: status.counters.routes_held_down,
            damped: status.counters.routes_damped,
            deferred: status.counters.withdrawals_deferred,
        },
        peers,
    }
}

/// The object without its status, as applied: the name, and the Node as
/// owner (garbage collection deletes it with the Node).
pub fn object(node: &str, node_uid: &str) -> serde_json::Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {
            "name": node,
            "labels": {"app.kubernetes.io/name": "holdfast"},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Node",
                "name": node,
                "uid": node_uid,
            }],
        },
    })
}

/// The status patch, as applied to the status subresource.
pub fn status_patch(node: &str, body: &NodeStatusBody) -> serde_json::Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": node},
        "status": body,
    })
}

/// What the writer reads: the daemon's status, as `/v1/status` has it;
/// its counts and peers are enough (the daemon gives no route list).
/// The daemon's status as the writer asks for it: an answer to come (the
/// main loop builds it), or none when the daemon did not answer in time —
/// the writer then tries again at its next interval.
pub type AskStatus =
    dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Option<Status>> + Send>> + Send + Sync;

/// Writes this node's `BGPNodeStatus`. The task stops when this is dropped.
#[derive(Debug)]
pub struct NodeStatusWriter {
    task: JoinHandle<()>,
}

impl Drop for NodeStatusWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl NodeStatusWriter {
    /// Starts the writer on the current tokio runtime: at most one write
    /// per `interval`, none while nothing changes; the status asked for at
    /// each interval.
    pub fn spawn(
        client: Client,
        node: String,
        interval: Duration,
        status: Arc<AskStatus>,
    ) -> NodeStatusWriter {
        let writer = Writer {
            api: Api::all_with(
                client.clone(),
                &ApiResource::from_gvk_with_plural(
                    &GroupVersionKind::gvk(GROUP, VERSION, KIND),
                    PLURAL,
                ),
            ),
            nodes: Api::all(client),
            node,
            owned: false,
        };
        NodeStatusWriter {
            task: tokio::spawn(writer.run(interval.max(Duration::from_millis(100)), status)),
        }
    }
}

struct Writer {
    api: Api<DynamicObject>,
    nodes: Api<Node>,
    node: String,
    /// The object (with its owner reference) has been applied.
    owned: bool,
}

impl Writer {
    async fn run(mut self, interval: Duration, status: Arc<AskStatus>) {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut written: Option<NodeStatusBody> = None;
        let mut written_at = tokio::time::Instant::now();
        // The last error told, while writes fail: each new one is told
        // once, so that a streak neither floods the log nor hides a
        // different cause behind the first (a 403 after a 404).
        let mut failing: Option<String> = None;
        let mut not_before = tokio::time::Instant::now();
        loop {
            tick.tick().await;
            let now = tokio::time::Instant::now();
            if now < not_before {
                continue;
            }
            let Some(now_status) = status().await else {
                continue;
            };
            let body = build(&now_status, Timestamp::now(), written.as_ref());
            // Unchanged since the last write: nothing to do, unless the
            // last attempt failed (the object may be gone, or the write
            // refused, whatever body it carried).
            if failing.is_none()
                && written.as_ref() == Some(&body)
                && now.duration_since(written_at) < RESYNC
            {
                continue;
            }
            match self.write(&body).await {
                Ok(()) => {
                    if failing.take().is_some() {
                        tracing::info!(node = %self.node, "BGPNodeStatus written again");
                    }
                    written = Some(body);
                    written_at = now;
                }
                Err(error) => {
                    // Once per cause: a cluster without the CRD must not
                    // get a warning every interval.
                    let told = crate::source::kubernetes::forbidden::describe(&error);
                    if failing.as_deref() == Some(told.as_str()) {
                        tracing::debug!(node = %self.node, error = %told, "BGPNodeStatus not written");
                    } else {
                        tracing::warn!(
                            node = %self.node,
                            error = %told,
                            "could not write this node's BGPNodeStatus (it needs the CRD bgpnodestatuses.holdfast.dev, get on nodes, create and patch on bgpnodestatuses, patch on bgpnodestatuses/status); retrying every {}s",
                            RETRY_AFTER.as_secs()
                        );
                    }
                    failing = Some(told);
                    not_before = tokio::time::Instant::now() + RETRY_AFTER;
                }
            }
        }
    }

    async fn write(&mut self, body: &NodeStatusBody) -> Result<(), kube::Error> {
        match self.try_write(body).await {
            // Deleted behind our back: apply the object again, at once.
            Err(kube::Error::Api(e)) if e.code == 404 && self.owned => {
                self.owned = false;
                self.try_write(body).await
            }
            other => other,
        }
    }

    async fn try_write(&mut self, body: &NodeStatusBody) -> Result<(), kube::Error> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        if !self.owned {
            let node = self.nodes.get(&self.node).await?;
            let uid = node.metadata.uid.unwrap_or_default();
            self.api
                .patch(&self.node, &params, &Patch::Apply(object(&self.node, &uid)))
                .await?;
            self.owned = true;
        }
        let patch = status_patch(&self.node, body);
        self.api
            .patch_status(&self.node, &params, &Patch::Apply(&patch))
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> Status {
        serde_json::from_str(include_str!("../../tests/fixtures/api/status.json"))
            .expect("tests/fixtures/api/status.json is a Status")
    }

    fn at(text: &str) -> Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn the_status_follows_the_daemon_s_view() {
        let s = fixture();
        let b = build(&s, at("2026-12-01T10:00:00Z"), None);
        assert_eq!(b.asn, s.asn);
        assert_eq!(b.router_id, s.router_id);
        assert_eq!(b.source, "Healthy");
        assert_eq!((b.peers_established, b.peers_configured), (1, 3));
        assert_eq!(
            b.routes,
            RouteCounts {
                advertised: 6,
                held_down: 4,
                damped: 1,
                deferred: 3
            }
        );
        let tor1 = &b.peers[0];
        assert_eq!(tor1.name, "tor1");
        assert_eq!(tor1.address.as_deref(), Some("192.0.2.1"));
        assert_eq!(tor1.state, "Established");
        // 3723 s in state before 10:00:00.
        assert_eq!(tor1.since, "2026-12-01T08:57:57Z");
        assert_eq!(tor1.prefixes_advertised, Families { ipv4: 4, ipv6: 1 });
        assert_eq!(tor1.bfd.as_deref(), Some("Up"));
        let tor2 = &b.peers[1];
        assert_eq!(tor2.state, "Active");
        assert_eq!(
            tor2.last_error.as_deref(),
            Some("Hold Timer Expired (sent NOTIFICATION 4/0)")
        );
        assert_eq!(b.peers[2].bfd, None);
        // The written form: camelCase, no empty optionals, no transitions.
        let v = serde_json::to_value(&b).expect("JSON");
        assert_eq!(v["routerID"], s.router_id.as_str());
        assert_eq!(v["routes"]["heldDown"], 4);
        assert_eq!(v["peers"][1]["prefixesAdvertised"]["ipv4"], 0);
        assert!(v["peers"][2].get("lastError").is_none(), "{v}");
        assert!(v["peers"][2].get("bfd").is_none(), "{v}");
        assert!(v["peers"][0].get("transitions").is_none(), "{v}");
    }

    #[test]
    fn damped_and_deferred_are_the_counters_not_a_count_of_the_route_list() {
        // What the writer reads: the counts without the route list.
        let mut s = fixture();
        s.routes.clear();
        s.counters.routes_damped = 2;
        s.counters.withdrawals_deferred = 5;
        let b = build(&s, at("2026-12-01T10:00:00Z"), None);
        assert_eq!((b.routes.damped, b.routes.deferred), (2, 5));
        assert_eq!(b.routes.held_down, s.counters.routes_held_down);
        let v = serde_json::to_value(&b).expect("JSON");
        assert_eq!(v["routes"]["deferred"], 5);
    }

    #[test]
    fn since_is_kept_while_the_state_is_and_moves_when_it_changes() {
        let mut s = fixture();
        let first = build(&s, at("2026-12-01T10:00:00Z"), None);
        // A second later the seconds-in-state rounding says 3725: unchanged.
        s.peers[0].state_seconds = 3725;
        let again = build(&s, at("2026-12-01T10:00:01Z"), Some(&first));
        assert_eq!(again, first, "nothing changed, nothing to write");
        // Down and up again between two builds: a new since.
        s.peers[0].state_seconds = 2;
        s.peers[0].established_transitions += 1;
        let bounced = build(&s, at("2026-12-01T10:00:05Z"), Some(&first));
        assert_eq!(bounced.peers[0].since, "2026-12-01T10:00:03Z");
        assert_ne!(bounced, first);
        // A new state: a new since.
        s.peers[1].state = "Connect".into();
        s.peers[1].state_seconds = 0;
        let moved = build(&s, at("2026-12-01T10:00:06Z"), Some(&bounced));
        assert_eq!(moved.peers[1].since, "2026-12-01T10:00:06Z");
    }

    #[test]
    fn the_source_column_says_what_is_wrong() {
        let mut s = fixture();
        s.source.synced = false;
        assert_eq!(build(&s, Timestamp::UNIX_EPOCH, None).source, "Syncing");
        s.source.healthy = false;
        s.source.error = Some("services: 403 Forbidden".into());
        assert_eq!(
            build(&s, Timestamp::UNIX_EPOCH, None).source,
            "services: 403 Forbidden"
        );
    }

    #[test]
    fn the_object_is_owned_by_its_node() {
        let o = object("n1", "u-1");
        assert_eq!(o["apiVersion"], "holdfast.dev/v1alpha1");
        assert_eq!(o["kind"], "BGPNodeStatus");
        assert_eq!(o["metadata"]["name"], "n1");
        let owner = &o["metadata"]["ownerReferences"][0];
        assert_eq!(
            (
                &owner["apiVersion"],
                &owner["kind"],
                &owner["name"],
                &owner["uid"]
            ),
            (&json!("v1"), &json!("Node"), &json!("n1"), &json!("u-1"))
        );
        assert!(o.get("status").is_none());
        let p = status_patch("n1", &NodeStatusBody::default());
        assert_eq!(p["status"]["routes"]["deferred"], 0);
    }
}

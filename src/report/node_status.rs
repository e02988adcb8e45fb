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

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ipnet::IpNet;

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
    /// The drain (`holdfast drain`, a cordon's withdrawal): its state,
    /// absent while the node is not draining.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<String>,
    /// What the node announces to which peers: the prefixes in each peer's
    /// Adj-RIB-Out, grouped by the set of peers that have them, runs of
    /// consecutive host routes written as `FIRST-LAST`. At most
    /// [`PREFIXES_LISTED`] entries in all; the rest only counted in
    /// `announcedNotListed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub announced: Vec<Announced>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub announced_not_listed: u64,
    /// VIPs the node knows of and does not announce now (or announces only
    /// until a timer ends), with why: at most [`WITHHELD_LISTED`], the
    /// rest counted in `withheldNotListed`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<Withheld>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub withheld_not_listed: u64,
    /// The last changes to what the node announces, newest first, at most
    /// [`CHANGES_LISTED`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Entries of `announced` an object lists at most (each a prefix or a run
/// of consecutive host routes, at most 80 bytes).
pub const PREFIXES_LISTED: usize = 1000;
/// VIPs of `withheld` an object lists at most.
pub const WITHHELD_LISTED: usize = 200;
/// Reasons one withheld VIP lists at most, each cut to [`REASON_BYTES`].
pub const REASONS_LISTED: usize = 3;
pub const REASON_BYTES: usize = 200;
/// Changes an object keeps.
pub const CHANGES_LISTED: usize = 20;

/// Prefixes announced to the same peers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Announced {
    pub peers: Vec<String>,
    /// `198.51.100.10/32`, or a run `198.51.100.10-198.51.100.99` of
    /// host routes.
    pub prefixes: Vec<String>,
}

/// A VIP the node does not announce now, or only until a timer ends.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Withheld {
    pub prefix: String,
    /// `not-selected` (the source has it, this node does not want it),
    /// or the stability state: `pending`, `held-down`, `damped`,
    /// `draining`, `deferred`.
    pub state: String,
    pub reasons: Vec<String>,
}

/// One change to what the node announces.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub prefix: String,
    /// `announced` or `withdrawn`.
    pub change: String,
    /// When the writer saw it, RFC 3339 to the second.
    pub at: String,
}

/// The route part of a node's status as the main loop reads it, before it
/// is cut to an object's bounds ([`NodeRoutes::apply`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeRoutes {
    /// The configured peers' names, in config order.
    pub peers: Vec<String>,
    /// Each prefix in some peer's Adj-RIB-Out, in prefix order, with the
    /// indices (into `peers`) of the peers that have it.
    pub announced: Vec<(IpNet, Vec<u16>)>,
    /// Prefixes not announced now (or only until a timer ends), in prefix
    /// order, with their state and reasons.
    pub withheld: Vec<(IpNet, String, Vec<String>)>,
}

impl NodeRoutes {
    /// Writes the route part into `body`: grouped, compacted and cut to
    /// the bounds; `changes` are the writer's (see [`changes_between`]).
    pub fn apply(&self, body: &mut NodeStatusBody) {
        let mut groups: BTreeMap<&[u16], Vec<IpNet>> = BTreeMap::new();
        for (prefix, peers) in &self.announced {
            groups.entry(peers.as_slice()).or_default().push(*prefix);
        }
        let mut listed = 0;
        let mut not_listed = 0u64;
        body.announced = groups
            .into_iter()
            .map(|(peers, prefixes)| {
                let mut runs = runs(&prefixes);
                let room = PREFIXES_LISTED.saturating_sub(listed);
                for (_, n) in runs.iter().skip(room) {
                    not_listed += n;
                }
                runs.truncate(room);
                listed += runs.len();
                Announced {
                    peers: peers
                        .iter()
                        .filter_map(|i| self.peers.get(usize::from(*i)).cloned())
                        .collect(),
                    prefixes: runs.into_iter().map(|(text, _)| text).collect(),
                }
            })
            .filter(|a| !a.prefixes.is_empty())
            .collect();
        body.announced_not_listed = not_listed;
        body.withheld = self
            .withheld
            .iter()
            .take(WITHHELD_LISTED)
            .map(|(prefix, state, reasons)| Withheld {
                prefix: prefix.to_string(),
                state: state.clone(),
                reasons: reasons
                    .iter()
                    .take(REASONS_LISTED)
                    .map(|r| cut(r, REASON_BYTES))
                    .collect(),
            })
            .collect();
        body.withheld_not_listed = self.withheld.len().saturating_sub(WITHHELD_LISTED) as u64;
    }

    /// The announced prefixes, for the writer's next [`changes_between`].
    pub fn announced_set(&self) -> BTreeSet<IpNet> {
        self.announced.iter().map(|(p, _)| *p).collect()
    }
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Sorted prefixes as runs: consecutive host routes (/32, /128) as
/// `FIRST-LAST`, anything else alone; with how many prefixes each holds.
fn runs(prefixes: &[IpNet]) -> Vec<(String, u64)> {
    let host = |p: &IpNet| p.prefix_len() == p.max_prefix_len();
    let next = |a: &IpNet, b: &IpNet| match (a.addr(), b.addr()) {
        (IpAddr::V4(a), IpAddr::V4(b)) => u32::from(a).checked_add(1) == Some(u32::from(b)),
        (IpAddr::V6(a), IpAddr::V6(b)) => u128::from(a).checked_add(1) == Some(u128::from(b)),
        _ => false,
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < prefixes.len() {
        let first = prefixes[i];
        let mut j = i;
        while host(&first)
            && j + 1 < prefixes.len()
            && host(&prefixes[j + 1])
            && next(&prefixes[j], &prefixes[j + 1])
        {
            j += 1;
        }
        let text = if j == i {
            first.to_string()
        } else {
            format!("{}-{}", first.addr(), prefixes[j].addr())
        };
        out.push((text, (j - i + 1) as u64));
        i = j + 1;
    }
    out
}

/// What changed from `before` to `now` (announced or withdrawn), newest
/// first, prepended to `kept` and cut to [`CHANGES_LISTED`].
pub fn changes_between(
    before: &BTreeSet<IpNet>,
    now: &BTreeSet<IpNet>,
    at: Timestamp,
    kept: &[Change],
) -> Vec<Change> {
    let at = Timestamp::from_second(at.as_second())
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string();
    let change = |p: &IpNet, what: &str| Change {
        prefix: p.to_string(),
        change: what.to_string(),
        at: at.clone(),
    };
    let mut out: Vec<Change> = now
        .difference(before)
        .map(|p| change(p, "announced"))
        .chain(before.difference(now).map(|p| change(p, "withdrawn")))
        .take(CHANGES_LISTED)
        .collect();
    out.extend(kept.iter().cloned());
    out.truncate(CHANGES_LISTED);
    out
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
        drain: status.drain.as_ref().map(|d| d.state.clone()),
        ..NodeStatusBody::default()
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
/// With the status's counts comes the route part ([`NodeRoutes`]) when
/// the daemon gives one.
pub type AskStatus = dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = Option<(Status, Option<NodeRoutes>)>> + Send>>
    + Send
    + Sync;

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
        // The announced prefixes at the last build, and the changes seen
        // since the writer started (the object's `changes`).
        let mut announced: Option<BTreeSet<IpNet>> = None;
        let mut changes: Vec<Change> = Vec::new();
        loop {
            tick.tick().await;
            let now = tokio::time::Instant::now();
            if now < not_before {
                continue;
            }
            let Some((now_status, routes)) = status().await else {
                continue;
            };
            let at = Timestamp::now();
            let mut body = build(&now_status, at, written.as_ref());
            if let Some(routes) = routes {
                routes.apply(&mut body);
                let set = routes.announced_set();
                if let Some(before) = announced.as_ref().filter(|b| **b != set) {
                    changes = changes_between(before, &set, at, &changes);
                }
                announced = Some(set);
                body.changes = changes.clone();
            }
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

    fn net(text: &str) -> IpNet {
        text.parse().expect("a prefix")
    }

    #[test]
    fn announced_prefixes_are_grouped_by_peers_and_runs_collapse() {
        let routes = NodeRoutes {
            peers: vec!["tor1".into(), "tor2".into()],
            announced: vec![
                (net("10.0.0.0/24"), vec![0, 1]),
                (net("198.51.100.10/32"), vec![0, 1]),
                (net("198.51.100.11/32"), vec![0, 1]),
                (net("198.51.100.12/32"), vec![0, 1]),
                (net("198.51.100.14/32"), vec![0, 1]),
                (net("198.51.100.15/32"), vec![0]),
                (net("2001:db8::1/128"), vec![0, 1]),
                (net("2001:db8::2/128"), vec![0, 1]),
            ],
            withheld: vec![(
                net("198.51.100.20/32"),
                "not-selected".into(),
                vec!["no ready endpoint on this node".into()],
            )],
        };
        let mut body = NodeStatusBody::default();
        routes.apply(&mut body);
        assert_eq!(
            body.announced,
            [
                Announced {
                    peers: vec!["tor1".into()],
                    prefixes: vec!["198.51.100.15/32".into()],
                },
                Announced {
                    peers: vec!["tor1".into(), "tor2".into()],
                    prefixes: vec![
                        "10.0.0.0/24".into(),
                        "198.51.100.10-198.51.100.12".into(),
                        "198.51.100.14/32".into(),
                        "2001:db8::1-2001:db8::2".into(),
                    ],
                },
            ]
        );
        assert_eq!(body.announced_not_listed, 0);
        assert_eq!(body.withheld[0].state, "not-selected");
        let v = serde_json::to_value(&body).expect("JSON");
        assert!(v.get("announcedNotListed").is_none(), "{v}");
        assert_eq!(v["withheld"][0]["prefix"], "198.51.100.20/32");
    }

    #[test]
    fn an_object_stays_bounded_whatever_the_node_has() {
        // 50,000 scattered VIPs (no two consecutive), as many withheld,
        // each with long reasons: the object stays within its bounds.
        let scattered =
            |i: u32, base: u32| IpNet::from(IpAddr::from(std::net::Ipv4Addr::from(base + 2 * i)));
        let routes = NodeRoutes {
            peers: vec!["tor1".into(), "tor2".into()],
            announced: (0..50_000)
                .map(|i| (scattered(i, 0x0a00_0000), vec![0, 1]))
                .collect(),
            withheld: (0..50_000)
                .map(|i| {
                    (
                        scattered(i, 0x0b00_0000),
                        "not-selected".to_string(),
                        vec!["é".repeat(400); 10],
                    )
                })
                .collect(),
        };
        let mut body = NodeStatusBody::default();
        routes.apply(&mut body);
        let listed: usize = body.announced.iter().map(|a| a.prefixes.len()).sum();
        assert_eq!(listed, PREFIXES_LISTED);
        assert_eq!(body.announced_not_listed, 50_000 - PREFIXES_LISTED as u64);
        assert_eq!(body.withheld.len(), WITHHELD_LISTED);
        assert_eq!(body.withheld_not_listed, 50_000 - WITHHELD_LISTED as u64);
        assert!(body.withheld[0].reasons.len() == REASONS_LISTED);
        assert!(body.withheld[0].reasons[0].len() <= REASON_BYTES);
        let bytes = serde_json::to_vec(&body).expect("JSON").len();
        assert!(bytes < 200_000, "{bytes} bytes");
    }

    #[test]
    fn changes_are_newest_first_and_bounded() {
        let a: BTreeSet<IpNet> = [net("198.51.100.1/32"), net("198.51.100.2/32")].into();
        let b: BTreeSet<IpNet> = [net("198.51.100.2/32"), net("198.51.100.3/32")].into();
        let first = changes_between(&a, &b, at("2026-12-01T10:00:00.7Z"), &[]);
        assert_eq!(
            first
                .iter()
                .map(|c| (c.prefix.as_str(), c.change.as_str(), c.at.as_str()))
                .collect::<Vec<_>>(),
            [
                ("198.51.100.3/32", "announced", "2026-12-01T10:00:00Z"),
                ("198.51.100.1/32", "withdrawn", "2026-12-01T10:00:00Z"),
            ]
        );
        let second = changes_between(&b, &a, at("2026-12-01T10:01:00Z"), &first);
        assert_eq!(second.len(), 4);
        assert_eq!(second[0].at, "2026-12-01T10:01:00Z");
        assert_eq!(second[3], first[1]);
        let many: BTreeSet<IpNet> = (0..100u32)
            .map(|i| IpNet::from(IpAddr::from(std::net::Ipv4Addr::from(i))))
            .collect();
        let lots = changes_between(&BTreeSet::new(), &many, at("2026-12-01T10:02:00Z"), &second);
        assert_eq!(lots.len(), CHANGES_LISTED);
    }
}

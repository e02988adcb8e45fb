//! The Kubernetes source: the VIPs of Services, as this node should
//! advertise them, from kube-runtime watchers on Services, EndpointSlices
//! and this node. docs/src/kubernetes/ is the operator's account of the
//! rules; this is how they are built:
//!
//! - `policy`: the pure core. [`evaluate`] turns the watched objects and
//!   the config into an [`Evaluation`]: the VIPs, the definitive absences
//!   (`Deleted`, `Drained`), and why every other address seen is not
//!   advertised (for `holdfast explain`).
//! - `records`: what is kept of each Service and EndpointSlice (compact
//!   records made at the watch boundary).
//! - `service`, `node`, `endpoints`: what is read off each kind of object.
//! - `watch`: the watchers, their link health, debouncing, and the
//!   snapshots ([`spawn`], [`Handle`]).
//! - `events`, `limit`: Kubernetes Events about this node's routes,
//!   rate-limited per Service ([`EventRecorder`]).
//! - `node_status`: this node's `BGPNodeStatus` object, for `kubectl get
//!   bgpnodestatuses` ([`NodeStatusWriter`]).
//! - `forbidden`: what a request the API server's RBAC refused is told as
//!   (the permission, and the file that grants it).
//!
//! Starting it, in the daemon:
//!
//! ```no_run
//! # async fn start(config: std::sync::Arc<holdfast::config::Config>) -> Result<(), String> {
//! use holdfast::model::SourceSnapshot;
//! use holdfast::source::kubernetes::{self, Options};
//! use tokio::sync::watch;
//!
//! let options = Options::new(std::env::var("NODE_NAME").map_err(|e| e.to_string())?);
//! let client = kubernetes::connect(&options).await?;
//! let (config_tx, config_rx) = watch::channel(config);
//! let (snapshot_tx, mut snapshots) = watch::channel(SourceSnapshot::default());
//! let source = kubernetes::spawn(client, options, config_rx, snapshot_tx);
//! while snapshots.changed().await.is_ok() {
//!     let snapshot = snapshots.borrow_and_update().clone();
//!     // ... policy, stability; on a route change:
//!     // source.events().advertised(address, &peers);
//! }
//! # drop(config_tx);
//! # Ok(())
//! # }
//! ```

mod backoff;
mod endpoints;
pub(crate) mod forbidden;
mod link;
mod node;
mod policy;
mod policy_attrs;
mod records;
pub(crate) mod service;
mod watch;

#[cfg(test)]
mod policy_tests;

pub use crate::report::events::EventLimits;
pub use endpoints::SERVICE_NAME_LABEL;
pub use node::{EXCLUDE_LABEL, NodeFacts, OUT_OF_SERVICE_TAINT, SHUTTING_DOWN_MESSAGE, node_facts};
pub use policy::{
    Changes, Cluster, Evaluation, Giver, NAMESPACE_NAME_LABEL, evaluate, needs_full_evaluation,
    needs_namespace_labels, update,
};
pub use records::{EndpointState, Ingress, ServiceRecord, SliceRecord};
pub use service::{ADVERTISE_ANNOTATION, ServiceKey};
pub use watch::{Handle, NodeLabels, Options, client_config, connect, spawn};

//! What the node reports about itself: the status and explain views
//! (`status`), its logs (`logging`: the rate limiter and the down-peer
//! summary), and, under Kubernetes, the Events on Services (`events`) and
//! the node's `BGPNodeStatus` (`node_status`). Reports read the layers'
//! values; no layer reads a report.

pub mod events;
pub mod logging;
pub mod node_status;
pub mod status;

pub use events::{EventRecorder, REPORTING_CONTROLLER, RouteChange, service_reference};
pub use node_status::NodeStatusWriter;

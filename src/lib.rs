//! holdfast: a BGP speaker for Kubernetes nodes that keeps Service VIP routes
//! steady. See ARCHITECTURE.md for the flow: source → policy → stability → speaker
//! → sessions.

pub mod api;
pub mod bfd;
pub mod build_info;
pub mod cli;
#[deny(missing_docs)]
pub mod config;
pub mod daemon;
pub mod docs;
pub mod logging;
pub mod model;
pub mod net;
pub mod probe;
pub mod routes;
pub mod session;
pub mod sleep;
pub mod sorted;
pub mod source;
pub mod speaker;
pub mod stability;
pub mod status;
pub mod steering;
mod suggest;

//! holdfast: a BGP speaker for Kubernetes nodes that keeps Service VIP routes
//! steady. See ARCHITECTURE.md for the flow: source → policy → stability → speaker
//! → sessions.

pub mod api;
pub mod bfd;
pub mod bmp;
pub mod build_info;
pub mod cli;
#[deny(missing_docs)]
pub mod config;
pub mod daemon;
pub mod docs;
pub mod handoff;
pub mod model;
pub mod probe;
pub mod report;
pub mod routes;
pub mod session;
pub mod sleep;
pub mod source;
pub mod speaker;
pub mod stability;
mod suggest;

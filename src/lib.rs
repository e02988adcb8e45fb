//! holdfast: a BGP speaker for Kubernetes nodes that keeps Service VIP routes
//! steady. See DESIGN.md for the flow: source → policy → stability → speaker
//! → sessions.

pub mod cli;
#[deny(missing_docs)]
pub mod config;
pub mod model;
pub mod source;
pub mod stability;
pub mod status;

//! The command-line front ends of `holdfast`.

pub mod args;
pub mod check;
pub mod cluster;
pub mod decode;
pub mod drain;
pub mod explain;
pub mod http;
pub mod route;
pub mod status;
mod table;

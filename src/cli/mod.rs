//! The command-line front ends of `holdfast`.

pub mod check;
pub mod decode;

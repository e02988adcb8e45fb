//! Socket options a BGP session needs that `socket2` does not offer:
//!
//! - TCP MD5 signatures (RFC 2385) through Linux's `TCP_MD5SIG`:
//!   [`set_md5_key`], [`clear_md5_key`];
//! - the Generalized TTL Security Mechanism (GTSM, RFC 5082) through
//!   `IP_MINTTL` / `IPV6_MINHOPCOUNT`: [`set_min_ttl`], with [`set_ttl`] for
//!   the outgoing TTL and [`set_ttl_security`] for both at once;
//! - the TTL of an accepted connection's SYN, through `TCP_SAVE_SYN` /
//!   `TCP_SAVED_SYN`: [`set_save_syn`], [`saved_syn_ttl`] (per-peer GTSM
//!   on a listener shared by peers with different minimums);
//! - the hop limit of a received ICMPv6 message (`IPV6_HOPLIMIT`), which
//!   Neighbor Discovery checks (RFC 4861 §6.1.2): [`recv_with_hop_limit`];
//! - a one-shot kernel timer ([`TimerFd`], `timerfd_create(2)`), for the
//!   session timers: woken once at the deadline;
//! - a capability raised by one thread for one operation ([`caps`],
//!   `capget(2)`/`capset(2)`): `CAP_NET_RAW` for unnumbered peering's raw
//!   ICMPv6 socket, from the binary's file capabilities;
//! - open descriptors sent to another process (`SCM_RIGHTS`) and the
//!   credentials of a Unix socket's peer (`SO_PEERCRED`): [`send_with_fds`],
//!   [`recv_with_fds`], [`peer_credentials`] (a live session hand-off).
//!
//! Every function takes anything that lends its file descriptor
//! ([`AsFd`](std::os::fd::AsFd)): a `socket2::Socket`, a std or tokio
//! `TcpListener`, `TcpSocket` or `TcpStream`, or a `BorrowedFd`. The socket's
//! address family is read from the kernel (`SO_DOMAIN`), so an IPv6 socket
//! that carries IPv4 traffic through IPv4-mapped addresses gets the options
//! that traffic needs too.
//!
//! Everything the rest of socket-level BGP needs (`TCP_NODELAY`,
//! `SO_REUSEADDR`, `IPV6_V6ONLY`, binding before connect, `IP_TOS` /
//! `IPV6_TCLASS`, `TCP_USER_TIMEOUT`, `SO_BINDTODEVICE`) is in `socket2`.
//!
//! This is the only crate of holdfast with unsafe code, and all of it is in
//! the private module `sys`: the `setsockopt(2)`, `getsockopt(2)` and
//! `getifaddrs(3)` calls, glibc's `mallopt(3)` ([`malloc`]), and
//! `capget(2)`/`capset(2)` ([`caps`]).

pub mod caps;
mod error;
mod family;
mod fdpass;
mod gtsm;
mod icmpv6;
mod ifaddr;
pub mod malloc;
mod md5;
mod syn;
mod timer;

// The single exception to the workspace's "no unsafe code": the raw
// setsockopt(2), getsockopt(2), recvmsg(2), sendmsg(2) with SCM_RIGHTS,
// getifaddrs(3), mallopt(3), timerfd, geteuid(2) and capget/capset calls. Everything else in
// this crate is safe.
#[allow(unsafe_code)]
mod sys;

pub use error::Error;
pub use fdpass::{
    MAX_FDS, PeerCredentials, ReceivedFds, effective_uid, peer_credentials, recv_with_fds,
    send_with_fds,
};
pub use gtsm::{set_min_ttl, set_ttl, set_ttl_security};
pub use icmpv6::{Received, recv_with_hop_limit};
pub use ifaddr::{InterfaceAddress, interface_addresses};
pub use md5::{MD5_MAX_KEY_LEN, clear_md5_key, set_md5_key};
pub use syn::{saved_syn_ttl, set_save_syn};
pub use timer::TimerFd;

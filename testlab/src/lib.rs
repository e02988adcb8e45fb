//! Test support for holdfast: labs built from Linux network namespaces with
//! real routers from the distribution's packages (FRR, BIRD 2, GoBGP,
//! ExaBGP). Nothing here fakes a BGP peer.
//!
//! Everything is blocking `std::process`; every helper panics with a message
//! that says what was being done and includes the daemon's log, because a
//! lab test that cannot run must fail loudly, never skip.
//!
//! Cleanup is tied to `Drop`: daemons are killed before their namespace, and
//! a namespace kills everything still inside it before it is deleted — also
//! when the test panics. Namespaces and directories left behind by a test
//! process that was killed outright are swept by the next one (see
//! [`netns`]).
//!
//! See `testlab/README.md` for the recipes and the quirks behind them.

pub mod bird;
pub mod bridge;
pub mod dir;
pub mod exabgp;
pub mod exposition;
pub mod frr;
pub mod fuse;
pub mod gobgp;
pub mod kube_api;
pub mod lab;
pub mod link;
pub mod netns;
pub mod process;
pub mod require;
pub mod traffic;
pub mod wait;

pub use bird::Bird;
pub use bridge::{Bridge, tcp_into_netns};
pub use dir::LabDir;
pub use exabgp::ExaBgp;
pub use frr::Frr;
pub use fuse::HangingFs;
pub use gobgp::Gobgp;
pub use kube_api::KubeApiServer;
pub use lab::Lab;
pub use link::{Link, veth};
pub use netns::{Netns, TcpProbe};
pub use process::{NsProcess, Signal};
pub use require::{require_root, require_tools};
pub use wait::{wait_for, wait_until};

/// An address family, as the routers' CLIs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Afi {
    Ipv4,
    Ipv6,
}

impl Afi {
    /// The family of an address or prefix written as text.
    pub fn of(addr_or_prefix: &str) -> Afi {
        if addr_or_prefix.contains(':') {
            Afi::Ipv6
        } else {
            Afi::Ipv4
        }
    }

    /// `ipv4` / `ipv6`, as in `show bgp ipv4 unicast` and `gobgp -a ipv4`.
    pub fn as_str(self) -> &'static str {
        match self {
            Afi::Ipv4 => "ipv4",
            Afi::Ipv6 => "ipv6",
        }
    }
}

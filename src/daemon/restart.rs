//! Graceful restart's Restart State bit (R, RFC 4724 §3): which OPENs carry
//! it. Pure: the daemon feeds it the peers, the End-of-RIBs and the time.
//!
//! RFC 4724 §3 defines R as "the BGP speaker has restarted"; §4.1 has the
//! restarting speaker set it when it re-establishes its sessions, and the
//! restart ends for a peer once the speaker has sent it End-of-RIB. So R is
//! set only in OPENs sent while the restart is in progress for that peer:
//!
//! - the process found the restart marker (it restarted), and
//! - the peer was configured when the process started (its routes are the
//!   ones the router keeps as stale; a peer added later has none), and
//! - End-of-RIB has not yet gone out to it on any session since, and
//! - the peer's `restart_time` has not passed since the start: by then the
//!   router has dropped our stale routes (RFC 4724 §4.2), there is nothing
//!   left to recover.
//!
//! Every later session (a peer reset, a config reload, a new default
//! gateway) sends R=0. Once no peer is left in restart, the restart is over
//! for good.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::config;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restart {
    /// When the restarted process started; `None` for a fresh start or once
    /// the restart is over for every peer.
    since: Option<Instant>,
    /// The peers (by name) still in restart: configured at the start, no
    /// End-of-RIB sent to them yet.
    pending: BTreeSet<String>,
}

impl Restart {
    /// `restarted`: the process found the restart marker.
    pub fn new(restarted: bool, now: Instant, peers: &[config::Peer]) -> Self {
        let mut r = Restart {
            since: restarted.then_some(now),
            pending: if restarted {
                peers
                    .iter()
                    .filter(|p| p.graceful_restart.enabled)
                    .map(|p| p.name.clone())
                    .collect()
            } else {
                BTreeSet::new()
            },
        };
        r.settle(now, peers);
        r
    }

    /// Whether an OPEN sent to `peer` at `now` sets R.
    pub fn restarting(&self, peer: &config::Peer, now: Instant) -> bool {
        let Some(since) = self.since else {
            return false;
        };
        peer.graceful_restart.enabled
            && self.pending.contains(&peer.name)
            && now.saturating_duration_since(since) < peer.graceful_restart.restart_time
    }

    /// End-of-RIB went out to `peer`: its restart is over (RFC 4724 §4.1).
    pub fn end_of_rib_sent(&mut self, peer: &str) {
        self.pending.remove(peer);
    }

    /// Forgets peers that are gone from `peers`, or whose restart time has
    /// passed; once none is left, the restart is over. Returns whether it
    /// is still in progress for some peer.
    pub fn settle(&mut self, now: Instant, peers: &[config::Peer]) -> bool {
        let keep: BTreeSet<String> = peers
            .iter()
            .filter(|p| self.restarting(p, now))
            .map(|p| p.name.clone())
            .collect();
        self.pending = keep;
        if self.pending.is_empty() {
            self.since = None;
        }
        self.since.is_some()
    }

    /// The restart is in progress for some peer.
    pub fn in_progress(&self) -> bool {
        self.since.is_some()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use super::*;

    /// Peers "a" (restart_time 120s), "b" (restart_time 30s) and "c"
    /// (graceful restart disabled).
    fn peers() -> Vec<config::Peer> {
        let text = "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\n\n\
             [[peer]]\nname = \"a\"\naddress = \"192.0.2.1\"\nasn = 65000\n\n\
             [[peer]]\nname = \"b\"\naddress = \"192.0.2.3\"\nasn = 65000\n\
             graceful_restart = { restart_time = \"30s\" }\n\n\
             [[peer]]\nname = \"c\"\naddress = \"192.0.2.4\"\nasn = 65000\n\
             graceful_restart = { enabled = false }\n\n\
             [source]\nkind = \"file\"\npath = \"vips.toml\"\n";
        config::parse(Path::new("test.toml"), text)
            .expect("a valid config")
            .peers
    }

    fn find<'a>(peers: &'a [config::Peer], name: &str) -> &'a config::Peer {
        peers.iter().find(|p| p.name == name).expect("a peer")
    }

    #[test]
    fn a_fresh_start_never_sets_r() {
        let t0 = Instant::now();
        let ps = peers();
        let r = Restart::new(false, t0, &ps);
        assert!(!r.in_progress());
        for p in &ps {
            assert!(!r.restarting(p, t0), "{}", p.name);
        }
    }

    #[test]
    fn r_until_end_of_rib_went_out_to_that_peer() {
        let t0 = Instant::now();
        let ps = peers();
        let mut r = Restart::new(true, t0, &ps);
        assert!(r.restarting(find(&ps, "a"), t0));
        assert!(r.restarting(find(&ps, "b"), t0));
        // No graceful restart capability, no R bit.
        assert!(!r.restarting(find(&ps, "c"), t0));

        let t1 = t0 + Duration::from_secs(5);
        r.end_of_rib_sent("a");
        assert!(r.settle(t1, &ps), "b is still in restart");
        // A later session to a (peer reset, reload, new gateway): R=0.
        assert!(!r.restarting(find(&ps, "a"), t1));
        assert!(r.restarting(find(&ps, "b"), t1));

        r.end_of_rib_sent("b");
        assert!(!r.settle(t1, &ps), "every peer got End-of-RIB");
        assert!(!r.in_progress());
        for p in &ps {
            assert!(!r.restarting(p, t1), "{}", p.name);
        }
    }

    #[test]
    fn r_ends_when_the_restart_time_has_passed() {
        let t0 = Instant::now();
        let ps = peers();
        let mut r = Restart::new(true, t0, &ps);
        // b's restart time (30s) has passed: the router dropped our stale
        // routes, there is no restart left to signal; a's (120s) has not.
        let t1 = t0 + Duration::from_secs(30);
        assert!(!r.restarting(find(&ps, "b"), t1));
        assert!(r.restarting(find(&ps, "a"), t1));
        assert!(r.settle(t1, &ps));
        let t2 = t0 + Duration::from_secs(120);
        assert!(!r.restarting(find(&ps, "a"), t2));
        assert!(!r.settle(t2, &ps), "the restart is over");
        assert!(!r.restarting(find(&ps, "a"), t0), "and stays over");
    }

    #[test]
    fn peers_added_later_get_no_r_and_removed_ones_are_not_waited_for() {
        let t0 = Instant::now();
        let ps = peers();
        let mut r = Restart::new(true, t0, &ps[..1]);
        // b was not configured at the start: it has no stale routes of ours.
        assert!(!r.restarting(find(&ps, "b"), t0));
        // a is removed from the config: nobody is left in restart.
        assert!(!r.settle(t0, &ps[1..]));
        assert!(!r.restarting(find(&ps, "a"), t0));
    }
}

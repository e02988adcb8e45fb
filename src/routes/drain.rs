//! The daemon's side of `holdfast drain` / `undrain` and of a shutdown
//! without graceful restart: the drain state the routes core owns, changed
//! by the API's requests and the signals, both handled by the main loop.
//! The sequence itself is [`crate::speaker::Drain`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::report::status::DrainStatus;
use crate::speaker::{Drain, DrainPhase, PeerTable};

/// Which peers a drain applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `holdfast drain`: every peer.
    All,
    /// A shutdown: the peers whose routes will not outlive it (no graceful
    /// restart, or `--withdraw-on-exit`). Peers kept by graceful restart
    /// keep their routes as they are.
    Peers(BTreeSet<String>),
}

/// Owned by the routes core (`routes::Routes`): the API starts and ends
/// drains with requests the main loop hands to it, and the core runs the
/// timer and shapes the tables.
#[derive(Debug)]
pub struct Control {
    pub drain: Drain,
    pub scope: Scope,
    /// `speaker.graceful_shutdown_wait` as of the last config (re)load; a
    /// drain under way keeps the wait it started with.
    pub wait: Duration,
    /// SIGTERM came: the daemon exits once the drain has run its course.
    pub exiting: bool,
    /// The drain under way was started because the node is going away
    /// ([`Control::follow_node`]), not by an operator.
    pub by_node: bool,
    /// The exit, once decided: what each peer's session does.
    pub exit: Option<BTreeMap<String, ExitPlan>>,
}

impl Control {
    /// No drain, `wait` the `speaker.graceful_shutdown_wait` in force.
    pub fn new(wait: Duration) -> Self {
        Control {
            drain: Drain::default(),
            scope: Scope::All,
            wait,
            exiting: false,
            by_node: false,
            exit: None,
        }
    }

    /// The API's `drain` (`on`) and `undrain`.
    pub fn set(&mut self, on: bool, now: Instant) -> Result<DrainStatus, String> {
        // From now on the drain is the operator's.
        if !self.exiting {
            self.by_node = false;
        }
        if on {
            if self.drain.start(now, self.wait) {
                self.scope = Scope::All;
            } else if !self.exiting {
                // Already draining: every peer now, the timer as it runs.
                self.scope = Scope::All;
            }
        } else if self.exiting {
            return Err(
                "holdfast is shutting down: its routes are being withdrawn and cannot be undrained"
                    .into(),
            );
        } else {
            self.drain.stop();
        }
        Ok(self.status(now))
    }

    pub fn status(&self, now: Instant) -> DrainStatus {
        let (state, left) = match self.drain.phase() {
            DrainPhase::Active => ("active", None),
            DrainPhase::GracefulShutdown { until, .. } => (
                "draining",
                Some(until.saturating_duration_since(now).as_secs_f64()),
            ),
            DrainPhase::Withdrawn { .. } => ("drained", None),
        };
        DrainStatus {
            state: state.into(),
            seconds_left: left,
            exiting: self.exiting,
        }
    }

    /// What `peer` is told, given its desired table.
    pub fn shape(&self, peer: &str, table: PeerTable) -> PeerTable {
        let applies = match &self.scope {
            Scope::All => true,
            Scope::Peers(peers) => peers.contains(peer),
        };
        if applies {
            self.drain.shape(table)
        } else {
            table
        }
    }
}

/// Why the daemon is exiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitReason {
    /// SIGTERM or SIGINT: a planned stop (a pod restart, a rollout, a
    /// node going away).
    Signal,
    /// The daemon cannot go on (its source stopped): a restart follows,
    /// as after a crash.
    Failure,
}

/// What a peer's session does at exit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitPlan {
    /// Close without a NOTIFICATION (RFC 4724 §4): the peer keeps the
    /// routes as stale for `restart_time` while the datapath forwards, and
    /// the restarted process takes them over.
    KeepThroughRestart,
    /// Planned withdrawal (RFC 8326 §3): GRACEFUL_SHUTDOWN for
    /// `graceful_shutdown_wait`, then withdraw and Cease. The reason is
    /// logged.
    Withdraw(String),
}

/// The exit rule: keep a peer's routes through graceful restart, or
/// withdraw them. Pure: the daemon gathers the inputs.
///
/// - `peer_graceful_restart`: the peer's session has graceful restart;
///   without it nothing keeps the routes, so they are withdrawn.
/// - `withdraw_on_exit`: `holdfast run --withdraw-on-exit`.
/// - `draining`: a drain is under way or done (`holdfast drain`, or one
///   this daemon started because the node is going away). This is the
///   signal for a node going away with the file source: `holdfast drain`
///   run before the stop (a systemd unit's `ExecStop` that runs at
///   shutdown only). Leaving a drained node's routes stale at the peers
///   would bring them back for `restart_time`.
/// - `node`: what the Kubernetes API says about this node (`None` with
///   the file source, or before the first evaluation). A node being
///   deleted, shutting down (kubelet's graceful node shutdown), or out of
///   service is going away: its datapath will not outlive the process, so
///   stale routes would black-hole traffic for `restart_time`.
///
/// Everything else (a pod restart, a rollout, `systemctl restart`) keeps
/// the routes: the datapath stays up and the new process takes over.
/// A failure keeps them too unless a rule above says the node is going.
pub fn exit_plan(
    reason: ExitReason,
    peer_graceful_restart: bool,
    withdraw_on_exit: bool,
    draining: bool,
    node: Option<&crate::source::kubernetes::NodeFacts>,
) -> ExitPlan {
    if !peer_graceful_restart {
        return ExitPlan::Withdraw("the peer has no graceful restart".into());
    }
    if withdraw_on_exit {
        return ExitPlan::Withdraw("--withdraw-on-exit".into());
    }
    if let Some(why) = node.and_then(|n| n.going_away()) {
        return ExitPlan::Withdraw(format!("this node is going away: {why}"));
    }
    // Cordoned, tainted, excluded: the routes are being withdrawn (or are
    // gone) already; a restart would bring nothing back, and keeping them
    // through graceful restart would leave them stale at the peers for
    // restart_time (RFC 4724 §4.2) while still marked GRACEFUL_SHUTDOWN.
    if let Some(why) = node.and_then(|n| n.drained.as_deref()) {
        return ExitPlan::Withdraw(format!("this node advertises nothing: {why}"));
    }
    if draining {
        return ExitPlan::Withdraw(
            "this node is drained (holdfast drain): its routes do not come back".into(),
        );
    }
    match reason {
        ExitReason::Signal | ExitReason::Failure => ExitPlan::KeepThroughRestart,
    }
}

impl Control {
    /// The node is going away (`why`) while the daemon runs: the drain
    /// starts at once, before SIGTERM comes (kubelet stops critical pods
    /// last, which may leave less than `graceful_shutdown_wait`). Answers
    /// whether it started one. `None` ends a drain this started (a
    /// cancelled shutdown), never one an operator started.
    pub fn follow_node(&mut self, why: Option<&str>, now: Instant) -> bool {
        match why {
            Some(_) if !self.drain.draining() => {
                self.drain.start(now, self.wait);
                self.scope = Scope::All;
                self.by_node = true;
                true
            }
            None if self.by_node && !self.exiting => {
                self.by_node = false;
                self.drain.stop();
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::source::kubernetes::NodeFacts;

    fn keep(plan: ExitPlan) {
        assert_eq!(plan, ExitPlan::KeepThroughRestart);
    }

    fn withdraw(plan: ExitPlan, because: &str) {
        match plan {
            ExitPlan::Withdraw(why) => assert!(why.contains(because), "{why}"),
            other => panic!("{other:?}, expected a withdrawal because {because}"),
        }
    }

    #[test]
    fn a_pod_restart_keeps_the_routes_through_graceful_restart() {
        let ready = NodeFacts::default();
        keep(exit_plan(
            ExitReason::Signal,
            true,
            false,
            false,
            Some(&ready),
        ));
        keep(exit_plan(ExitReason::Signal, true, false, false, None));
        keep(exit_plan(ExitReason::Failure, true, false, false, None));
    }

    #[test]
    fn a_node_going_away_withdraws() {
        let shutting = NodeFacts {
            shutting_down: true,
            ..NodeFacts::default()
        };
        withdraw(
            exit_plan(ExitReason::Signal, true, false, false, Some(&shutting)),
            "shutting down",
        );
        let deleting = NodeFacts {
            deleting: true,
            ..NodeFacts::default()
        };
        withdraw(
            exit_plan(ExitReason::Signal, true, false, false, Some(&deleting)),
            "deleted",
        );
        let gone = NodeFacts {
            out_of_service: true,
            ..NodeFacts::default()
        };
        withdraw(
            exit_plan(ExitReason::Failure, true, false, false, Some(&gone)),
            "out-of-service",
        );
    }

    #[test]
    fn a_node_the_policy_drained_withdraws_at_exit() {
        let cordoned = NodeFacts {
            drained: Some("node \"node-1\" is cordoned".into()),
            ..NodeFacts::default()
        };
        withdraw(
            exit_plan(ExitReason::Signal, true, false, false, Some(&cordoned)),
            "advertises nothing: node \"node-1\" is cordoned",
        );
    }

    #[test]
    fn a_drain_before_the_stop_is_the_file_sources_signal() {
        withdraw(
            exit_plan(ExitReason::Signal, true, false, true, None),
            "drained",
        );
    }

    #[test]
    fn no_graceful_restart_or_withdraw_on_exit_always_withdraws() {
        withdraw(
            exit_plan(ExitReason::Signal, false, false, false, None),
            "no graceful restart",
        );
        withdraw(
            exit_plan(ExitReason::Signal, true, true, false, None),
            "--withdraw-on-exit",
        );
    }

    fn table() -> PeerTable {
        let attrs = std::sync::Arc::new(crate::speaker::RouteAttrs::default());
        [("198.51.100.10/32".parse().unwrap(), attrs)]
            .into_iter()
            .collect()
    }

    fn marked(t: &PeerTable) -> bool {
        t.values().all(|a| {
            a.communities
                .contains(&bgp_proto::community::well_known::GRACEFUL_SHUTDOWN)
        }) && !t.is_empty()
    }

    #[test]
    fn a_shutdown_drains_only_its_peers_on_simulated_time_and_cannot_be_undrained() {
        let t0 = Instant::now();
        let wait = Duration::from_secs(5);
        let mut c = Control::new(wait);
        // What begin_exit does for a peer without graceful restart.
        c.exiting = true;
        assert!(c.drain.start(t0, wait));
        c.scope = Scope::Peers(["no-gr".to_string()].into());
        assert!(marked(&c.shape("no-gr", table())));
        assert_eq!(c.shape("gr", table()), table(), "kept as it is");
        assert!(c.set(false, t0).is_err(), "no undrain once exiting");
        // `holdfast drain` meanwhile changes nothing: the exit was decided
        // at SIGTERM, and a peer kept through graceful restart must not be
        // left holding routes marked GRACEFUL_SHUTDOWN as stale.
        c.set(true, t0 + Duration::from_secs(1)).unwrap();
        assert_eq!(c.shape("gr", table()), table());
        assert_eq!(c.drain.deadline(), Some(t0 + wait));
        assert_eq!(
            c.status(t0 + Duration::from_secs(2)).seconds_left,
            Some(3.0)
        );
        assert!(!c.drain.poll(t0 + wait - Duration::from_millis(1)));
        assert!(c.drain.poll(t0 + wait));
        assert!(c.shape("no-gr", table()).is_empty());
        assert_eq!(c.status(t0 + wait).state, "drained");
    }

    #[test]
    fn a_node_shutting_down_starts_the_drain_and_a_cancelled_one_ends_it() {
        let t0 = Instant::now();
        let mut c = Control::new(Duration::from_secs(5));
        assert!(c.follow_node(Some("shutting down"), t0));
        assert!(matches!(
            c.drain.phase(),
            DrainPhase::GracefulShutdown { .. }
        ));
        assert_eq!(c.scope, Scope::All);
        // Still shutting down: the timer runs as it was.
        assert!(!c.follow_node(Some("shutting down"), t0 + Duration::from_secs(1)));
        assert!(c.follow_node(None, t0 + Duration::from_secs(2)));
        assert_eq!(c.drain.phase(), DrainPhase::Active);
        // An operator's drain is not ended by the node being fine.
        c.set(true, t0).unwrap();
        assert!(!c.follow_node(None, t0));
        assert!(c.drain.draining());
        // Nor taken over by a shutdown that then gets cancelled.
        assert!(!c.follow_node(Some("shutting down"), t0));
        assert!(!c.follow_node(None, t0));
        assert!(c.drain.draining());
    }
}

//! The daemon's exit and the Node's shutdown, as the daemon carries them
//! out: the plan per peer (`routes::drain::exit_plan`) decided once and
//! logged, and the drain started or ended as the Node shows it going away.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::routes::drain::{ExitPlan, ExitReason, exit_plan};

impl super::Daemon {
    /// [`exit_plan`] for every peer, from what the daemon knows now.
    pub(super) fn exit_plans(&self, reason: ExitReason) -> BTreeMap<String, ExitPlan> {
        let draining = self.routes.drain().drain.draining();
        let node = self.kube.as_ref().and_then(|k| k.node_facts());
        self.peers
            .values()
            .map(|p| {
                // The peer keeps our routes only if the session negotiated
                // graceful restart: the peer sent the capability (RFC 4724
                // §3; a helper sends it without families). A peer that did
                // not (Talos's embedded GoBGP, for one) drops them the
                // moment the session closes, so they are withdrawn in
                // order instead. A session not established now has nothing
                // to keep: the config decides.
                let negotiated = p
                    .handle
                    .as_ref()
                    .and_then(|h| h.snapshot().negotiated)
                    .map(|n| n.peer_graceful_restart.is_some());
                let plan = exit_plan(
                    reason,
                    p.config.graceful_restart.enabled && negotiated.unwrap_or(true),
                    self.opts.withdraw_on_exit,
                    draining,
                    node.as_ref(),
                );
                (p.config.name.clone(), plan)
            })
            .collect()
    }

    /// Decides the exit once (SIGTERM, or the failure that ends the main
    /// loop) and logs it; later calls answer the same plan.
    pub(super) fn decide_exit(&mut self, reason: ExitReason) -> BTreeMap<String, ExitPlan> {
        if let Some(plans) = self.routes.drain().exit.clone() {
            return plans;
        }
        let plans = self.exit_plans(reason);
        let mut by_why: BTreeMap<Option<&str>, Vec<&str>> = BTreeMap::new();
        for (peer, plan) in &plans {
            let why = match plan {
                ExitPlan::KeepThroughRestart => None,
                ExitPlan::Withdraw(why) => Some(why.as_str()),
            };
            by_why.entry(why).or_default().push(peer);
        }
        for (why, peers) in by_why {
            match why {
                None => tracing::info!(
                    ?peers,
                    "exit: routes kept through graceful restart (RFC 4724): the datapath stays up"
                ),
                Some(why) => tracing::info!(
                    ?peers,
                    "exit: routes withdrawn after graceful shutdown (RFC 8326): {why}"
                ),
            }
        }
        self.routes.set_exit(plans.clone());
        plans
    }

    /// Starts the drain when the Kubernetes API shows this node going
    /// away, and ends the drain it started if that stops being so. A Node
    /// missing from the API server changes nothing here: a drain it started
    /// stays (a Node deleted after its deletionTimestamp is gone for good),
    /// and its VIPs go as an absence (the policy: hold-down, then the
    /// mass-withdrawal guard), not through a drain.
    pub(super) fn follow_node(&mut self) {
        let Some(kube) = &self.kube else {
            return;
        };
        let Some(facts) = kube.node_facts() else {
            return;
        };
        let why = facts.going_away();
        let changed = self.routes.follow_node(why, Instant::now());
        if changed {
            match why {
                Some(why) => tracing::warn!(
                    "{why}: routes marked GRACEFUL_SHUTDOWN (RFC 8326), withdrawn after graceful_shutdown_wait"
                ),
                None => tracing::info!(
                    "this node is no longer going away: routes advertised normally again"
                ),
            }
        }
    }
}

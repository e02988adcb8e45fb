//! The mass-withdrawal guard: withdrawals that would take more than a share
//! of this node's routes off the wire in one step go out progressively.
//!
//! A namespace deleted by mistake, a selector edit, an API server that
//! serves an empty list while it says it is healthy: each makes many VIPs
//! disappear at once, and the hold-down only postpones the loss — 30 s
//! later every route goes in one step. The guard lets at most
//! `max_withdraw_fraction` of the routes on the wire go in one step and
//! holds the rest back, releasing them one every `withdraw_interval` (the
//! config's `withdraw_rate`) in prefix order. A route held back that comes
//! back at the source costs nothing: it never left the wire.
//!
//! What it covers: withdrawals whose absence is [`Absence::Vanished`] (the
//! hold-down ran out — the empty-list case) and [`Absence::Deleted`]. What
//! it lets through at once: [`Absence::Drained`] (a deliberate drain is not
//! slowed) and [`Absence::ProbeFailed`] (the datapath is broken: holding
//! the route would only blackhole traffic longer).
//!
//! An episode begins when one step's guarded withdrawals exceed the
//! allowance (`floor(fraction × routes on the wire)`, at least one); the
//! allowance goes at once, the rest is deferred. While the episode lasts,
//! every guarded withdrawal that falls due joins the queue, and the k-th
//! release is due at `start + k × withdraw_interval`. The episode ends
//! when the queue is empty; the next step is judged afresh. Nothing here
//! reads a clock.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::Absence;

/// `[stability] max_withdraw_fraction` and `withdraw_rate`.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardParams {
    /// The largest share of this node's routes withdrawn in one step;
    /// 1.0 turns the guard off. In (0, 1].
    pub max_withdraw_fraction: f64,
    /// Once the guard holds withdrawals back, one goes every this long
    /// (`withdraw_rate = "10/s"` is 100 ms). More than zero.
    pub withdraw_interval: Duration,
}

impl Default for GuardParams {
    fn default() -> Self {
        GuardParams {
            max_withdraw_fraction: DEFAULT_MAX_WITHDRAW_FRACTION,
            withdraw_interval: Duration::from_millis(100),
        }
    }
}

/// Half: everyday changes (a Service deleted, a few endpoints moving)
/// remove a small share of a node's routes; one step removing more than
/// half of them is almost always a fault upstream of holdfast.
pub const DEFAULT_MAX_WITHDRAW_FRACTION: f64 = 0.5;

impl GuardParams {
    /// False when `max_withdraw_fraction` is 1: every withdrawal goes when due.
    pub fn enabled(&self) -> bool {
        self.max_withdraw_fraction < 1.0
    }

    /// How many of `routes` may go in one step. The Kubernetes source
    /// measures a mass disappearance by the same share.
    pub fn allowance(&self, routes: usize) -> usize {
        // Routes fit f64 exactly far beyond any table; floor keeps the
        // step at or below the fraction. At least one: a node losing its
        // only route is not a mass withdrawal.
        ((self.max_withdraw_fraction * routes as f64).floor() as usize).max(1)
    }
}

/// Whether the guard paces withdrawals with this absence reason (see the
/// module doc).
pub(super) fn guards(reason: Absence) -> bool {
    match reason {
        Absence::Vanished | Absence::Deleted => true,
        // The node's datapath drops the traffic already (no ready local
        // endpoint, a failing probe): holding the route only blackholes
        // it longer. A drain is deliberate.
        Absence::NoLocalEndpoint | Absence::Drained | Absence::ProbeFailed => false,
    }
}

/// What the guard holds back now, for the status views.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardView {
    /// Withdrawals held back right now.
    pub deferred: usize,
    /// The step that began the episode: this many routes would have gone
    /// at once...
    pub would_go: usize,
    /// ...of this many on the wire.
    pub routes: usize,
    /// When the next held-back withdrawal goes.
    pub next_release: Option<Instant>,
}

#[derive(Debug, Clone)]
struct Episode {
    started: Instant,
    /// Released at the rate since `started` (the first step's allowance
    /// not included).
    released: u128,
    would_go: usize,
    routes: usize,
}

#[derive(Debug, Clone)]
pub(super) struct Guard<K> {
    deferred: BTreeSet<K>,
    episode: Option<Episode>,
    /// Withdrawals ever held back.
    deferred_total: u64,
}

impl<K: Ord + Clone> Guard<K> {
    pub(super) fn new() -> Self {
        Guard {
            deferred: BTreeSet::new(),
            episode: None,
            deferred_total: 0,
        }
    }

    /// Nothing held back: no key needs looking up.
    pub(super) fn is_idle(&self) -> bool {
        self.deferred.is_empty()
    }

    pub(super) fn holds(&self, key: &K) -> bool {
        self.deferred.contains(key)
    }

    pub(super) fn deferred_total(&self) -> u64 {
        self.deferred_total
    }

    /// One step at `now`: `due` is every guarded withdrawal due now, held
    /// back or not, in key order; `routes` how many prefixes were on the
    /// wire before the step. Returns the keys to withdraw now. A key held
    /// back that is not in `due` any more (back at the source, drained,
    /// its hold-down restarted) is let go of.
    pub(super) fn step(
        &mut self,
        params: &GuardParams,
        now: Instant,
        due: Vec<K>,
        routes: usize,
    ) -> Vec<K> {
        if !params.enabled() {
            self.deferred.clear();
            self.episode = None;
            return due;
        }
        if !self.deferred.is_empty() {
            let due: BTreeSet<&K> = due.iter().collect();
            self.deferred.retain(|k| due.contains(k));
        }
        if self.deferred.is_empty() {
            self.episode = None;
        }
        match &mut self.episode {
            None => {
                let allowance = params.allowance(routes);
                if due.len() <= allowance {
                    return due;
                }
                let would_go = due.len();
                let mut due = due.into_iter();
                let now_going: Vec<K> = due.by_ref().take(allowance).collect();
                self.deferred = due.collect();
                self.deferred_total += self.deferred.len() as u64;
                self.episode = Some(Episode {
                    started: now,
                    released: 0,
                    would_go,
                    routes,
                });
                now_going
            }
            Some(episode) => {
                for key in due {
                    if !self.deferred.contains(&key) {
                        self.deferred.insert(key);
                        self.deferred_total += 1;
                    }
                }
                let earned = now.saturating_duration_since(episode.started).as_nanos()
                    / params.withdraw_interval.as_nanos().max(1);
                let mut going = Vec::new();
                while episode.released < earned {
                    let Some(key) = self.deferred.pop_first() else {
                        break;
                    };
                    going.push(key);
                    episode.released += 1;
                }
                if self.deferred.is_empty() {
                    self.episode = None;
                }
                going
            }
        }
    }

    /// When the next held-back withdrawal is due.
    pub(super) fn next_release(&self, params: &GuardParams) -> Option<Instant> {
        let episode = self.episode.as_ref()?;
        let next = u32::try_from(episode.released + 1).ok()?;
        episode
            .started
            .checked_add(params.withdraw_interval.checked_mul(next)?)
    }

    pub(super) fn view(&self, params: &GuardParams) -> Option<GuardView> {
        let episode = self.episode.as_ref()?;
        Some(GuardView {
            deferred: self.deferred.len(),
            would_go: episode.would_go,
            routes: episode.routes,
            next_release: self.next_release(params),
        })
    }
}

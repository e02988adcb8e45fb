//! What the stability layer shows to the status API and `holdfast explain`.

use std::time::Instant;

use super::Absence;

/// Where one prefix stands, as of the last call that passed a time (call
/// `poll(now)` first for a view as of `now`). Times that are `None` are not
/// scheduled: the source is unhealthy, so no absence timer runs.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyState {
    /// Present at the source and advertised.
    Advertised,
    /// Present at the source, not yet advertised: waiting out
    /// `advertise_delay`. Nothing has been sent for it.
    PendingAdvertise { until: Option<Instant> },
    /// Vanished from the source, still advertised: withdrawn at `until`
    /// unless it comes back first (then nothing is sent at all).
    HeldDown {
        since: Instant,
        until: Option<Instant>,
    },
    /// Gone from the source, still advertised because it has been
    /// flapping: damping keeps it up past the hold-down (or, for
    /// `NoLocalEndpoint`, past `local_endpoint_delay`), until
    /// `until_estimate` (exact unless it flaps again or the config changes).
    Damped {
        reason: Absence,
        since: Instant,
        figure_of_merit: f64,
        until_estimate: Option<Instant>,
    },
    /// Gone from the source for a definitive reason (a deleted Service with
    /// a `delete_delay`, no local endpoint left with a
    /// `local_endpoint_delay`), still advertised until `until`.
    Draining {
        reason: Absence,
        since: Instant,
        until: Option<Instant>,
    },
}

impl KeyState {
    /// Why the source no longer has this prefix, when it does not.
    pub fn absence(&self) -> Option<Absence> {
        match self {
            KeyState::Advertised | KeyState::PendingAdvertise { .. } => None,
            KeyState::HeldDown { .. } => Some(Absence::Vanished),
            KeyState::Damped { reason, .. } | KeyState::Draining { reason, .. } => Some(*reason),
        }
    }
}

/// What the layer did and absorbed since it was created; `held_down` is a
/// gauge of the moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Absences that ended with the prefix back at the source before its
    /// withdrawal was due, with nothing sent: a withdraw/advertise pair the
    /// routers never saw. (Absences that only damping carried past the
    /// hold-down count in `absorbed_by_damping` instead.)
    pub absorbed_by_hold_down: u64,
    /// Absences that outlasted the hold-down, were carried by damping, and
    /// ended with the prefix back at the source.
    pub absorbed_by_damping: u64,
    /// Damping episodes begun: the figure of merit crossed
    /// `suppress_threshold`.
    pub suppressions: u64,
    /// `Change::Advertise` emitted (first advertisements and replacements).
    pub advertisements: u64,
    /// `Change::Withdraw` emitted.
    pub withdrawals: u64,
    /// Prefixes advertised right now although the source does not have
    /// them (held down, damped or draining).
    pub held_down: u64,
    /// Of those, the prefixes damping keeps advertised past their own
    /// timer right now ([`KeyState::Damped`]; a gauge).
    pub damped: u64,
    /// Withdrawals the mass-withdrawal guard holds back right now (a gauge;
    /// also counted in `held_down`).
    pub withdrawals_deferred: u64,
    /// Withdrawals the guard has ever held back.
    pub withdrawals_deferred_total: u64,
}

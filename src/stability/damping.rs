//! RFC 2439 route flap damping, turned inside out.
//!
//! Classic damping (RFC 2439) runs on a router receiving routes: every flap
//! of a route adds a penalty to its figure of merit, and while the figure is
//! high the router *suppresses* the route — it stops using and propagating
//! it — because an unstable path is worse than none.
//!
//! Here the flapping thing is not a path but the VIP's presence at the
//! source: LB-IPAM empties a Service's address list for a second or two and
//! refills it, while the datapath stays fine. An absence is the "flap", and
//! what we damp is the *withdrawal*: while the figure of merit is high, the
//! prefix is kept advertised through absences, even past the hold-down.
//! The same arithmetic (penalty per event, exponential decay, suppress and
//! reuse thresholds with hysteresis, a ceiling) yields the opposite
//! action, because here instability is the source's noise, not the route's:
//! the stable answer for the routers is "still reachable".
//!
//! Time is never read here: every method takes the instant it is about.

use std::time::{Duration, Instant};

use super::params::DampingParams;

/// The damping history of one prefix: its figure of merit and, when the
/// figure crossed `suppress_threshold`, the damping episode it started.
#[derive(Debug, Clone)]
pub(crate) struct FlapHistory {
    /// The figure of merit at `updated`, before decay.
    figure: f64,
    updated: Instant,
    suppression: Option<Suppression>,
}

/// One damping episode: it began when a penalty lifted the figure above
/// `suppress_threshold`, and ends at `until`.
#[derive(Debug, Clone, Copy)]
struct Suppression {
    since: Instant,
    until: Instant,
    /// `until` is the `max_suppress` ceiling (`since + max_suppress`), not
    /// the instant the figure decays to `reuse_threshold`. At such an end the
    /// figure is lowered to `reuse_threshold` (see [`FlapHistory::figure_at`]).
    by_ceiling: bool,
}

impl FlapHistory {
    pub(crate) fn new(now: Instant) -> Self {
        FlapHistory {
            figure: 0.0,
            updated: now,
            suppression: None,
        }
    }

    /// The figure of merit at `t` (not before the last penalty).
    ///
    /// RFC 2439 §4.2: the figure decays exponentially, halving every
    /// `half_life`: `f(t) = f(t0) * 2^(-(t - t0) / half_life)`.
    ///
    /// Two rules on top of the plain decay:
    /// - when a damping episode ended at its `max_suppress` ceiling, the
    ///   figure is lowered to `reuse_threshold` at that instant, so that the
    ///   next episode needs a fresh crossing of `suppress_threshold` and the
    ///   ceiling is a real bound on an episode;
    /// - below half of `reuse_threshold` the history is forgotten (the figure
    ///   reads 0). RFC 2439 lets an implementation drop a history that has
    ///   decayed to insignificance ("decay memory limit", §4.2); doing it at
    ///   a threshold of the figure, not at a moment we happen to look, keeps
    ///   the result independent of when the driver polls.
    pub(crate) fn figure_at(&self, t: Instant, p: &DampingParams) -> f64 {
        let (figure, from) = match self.suppression {
            Some(s) if s.by_ceiling && s.until <= t => {
                let at_end = decay(
                    self.figure,
                    s.until.saturating_duration_since(self.updated),
                    p,
                );
                (at_end.min(f64::from(p.reuse_threshold)), s.until)
            }
            _ => (self.figure, self.updated),
        };
        let figure = decay(figure, t.saturating_duration_since(from), p);
        if figure < f64::from(p.reuse_threshold) / 2.0 {
            0.0
        } else {
            figure
        }
    }

    /// When the current damping episode ends (or ended). The withdrawal of
    /// an absent prefix waits for this as well as for the hold-down.
    pub(crate) fn suppression_end(&self) -> Option<Instant> {
        self.suppression.map(|s| s.until)
    }

    /// The end of the damping episode in force at `t`, if one is.
    pub(crate) fn damped_until(&self, t: Instant) -> Option<Instant> {
        self.suppression.filter(|s| s.until > t).map(|s| s.until)
    }

    /// True once nothing of this history can affect the future: no episode
    /// in force and the figure forgotten.
    pub(crate) fn is_forgotten(&self, t: Instant, p: &DampingParams) -> bool {
        self.damped_until(t).is_none() && self.figure_at(t, p) == 0.0
    }

    /// One absence began at `now`: add the penalty, as RFC 2439 does for a
    /// withdrawal, capped at the ceiling (§4.4). Returns true
    /// when this starts a damping episode (the figure crossed
    /// `suppress_threshold`).
    pub(crate) fn penalize(&mut self, now: Instant, p: &DampingParams) -> bool {
        let in_force = self.damped_until(now).and(self.suppression);
        let figure = (self.figure_at(now, p) + f64::from(p.penalty)).min(p.ceiling());
        self.figure = figure;
        self.updated = now;
        match in_force {
            // Still damped: the episode goes on, and its end moves to where
            // the new figure decays to reuse, but never past the ceiling
            // measured from when the episode began.
            Some(s) => {
                self.suppression = Some(episode(s.since, now, figure, p));
                false
            }
            None if figure > f64::from(p.suppress_threshold) => {
                self.suppression = Some(episode(now, now, figure, p));
                true
            }
            None => {
                self.suppression = None;
                false
            }
        }
    }

    /// The damping parameters change at `now` from `old` to `new`: carry the
    /// figure over as it stands, and re-derive the end of an episode in force
    /// under the new thresholds. A reload never starts an episode; only an
    /// absence can.
    pub(crate) fn rebase(&mut self, now: Instant, old: &DampingParams, new: &DampingParams) {
        let in_force = self.damped_until(now).and(self.suppression);
        let figure = self.figure_at(now, old).min(new.ceiling());
        self.figure = figure;
        self.updated = now;
        self.suppression = in_force.map(|s| episode(s.since, now, figure, new));
        // An episode the new parameters end already ends now; apply its end
        // (including the ceiling's lowering of the figure) at once.
        if let Some(s) = self.suppression
            && s.until <= now
        {
            self.figure = self.figure_at(now, new);
            self.suppression = None;
        }
    }
}

/// The episode that began at `since`, with figure `figure` at `now`: it ends
/// when the figure decays to `reuse_threshold`, or at the `max_suppress`
/// ceiling after `since`, whichever comes first.
fn episode(since: Instant, now: Instant, figure: f64, p: &DampingParams) -> Suppression {
    let reuse = f64::from(p.reuse_threshold);
    // Solve figure * 2^(-x / half_life) = reuse for x. The figure is capped at
    // the ceiling, so x is at most max_suppress; a figure at or below reuse
    // gives x = 0.
    let secs = (p.half_life.as_secs_f64() * libm::log2(figure / reuse)).max(0.0);
    let to_reuse = Duration::try_from_secs_f64(secs).unwrap_or(p.max_suppress);
    let reuse_at = later(now, to_reuse);
    let ceiling_at = later(since, p.max_suppress);
    if ceiling_at < reuse_at {
        Suppression {
            since,
            until: ceiling_at,
            by_ceiling: true,
        }
    } else {
        Suppression {
            since,
            until: reuse_at,
            by_ceiling: false,
        }
    }
}

/// `figure` decayed over `elapsed` (RFC 2439 §4.2).
fn decay(figure: f64, elapsed: Duration, p: &DampingParams) -> f64 {
    figure * libm::exp2(-(elapsed.as_secs_f64() / p.half_life.as_secs_f64()))
}

/// `t + d`. Durations are validated to at most `MAX_TIMER`, so this only
/// fails for an `Instant` within a year of the end of its range; then the
/// end of an episode saturates at `t`, which shortens it (and only it).
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d).unwrap_or(t)
}

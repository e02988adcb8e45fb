//! A timer is a deadline or nothing; the session computes its next
//! deadline from its timers, and the driver calls back at that instant.

use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timer(Option<Instant>);

impl Timer {
    /// Arms the timer to fire `after` from `now`, replacing any deadline.
    pub(crate) fn start(&mut self, now: Instant, after: Duration) {
        self.0 = Some(now + after);
    }

    /// Disarms the timer: no deadline until it is started again.
    pub(crate) fn stop(&mut self) {
        self.0 = None;
    }

    /// The instant the timer fires, or `None` while it is stopped.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.0
    }

    /// True (once) when the deadline has been reached; the timer stops.
    pub(crate) fn expired(&mut self, now: Instant) -> bool {
        match self.0 {
            Some(t) if now >= t => {
                self.0 = None;
                true
            }
            _ => false,
        }
    }
}

/// RFC 4271 §10: "jitter should be applied to the timers associated with
/// MinASOriginationInterval, KeepAlive, MinRouteAdvertisementInterval, and
/// ConnectRetry ... multiplying the base value ... by a random factor which
/// is uniformly distributed in the range from 0.75 to 1.0". A small
/// xorshift keeps the session deterministic for a given seed.
#[derive(Clone, Debug)]
pub(crate) struct Jitter(u64);

impl Jitter {
    /// A jitter source for one session; the low bit is forced on because
    /// xorshift never leaves the all-zero state.
    pub(crate) fn new(seed: u64) -> Self {
        Jitter(seed | 1)
    }

    /// `base` scaled by the next factor drawn from [0.75, 1.0).
    pub(crate) fn apply(&mut self, base: Duration) -> Duration {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        // 0.75 + 0.25 × u, u in [0, 1).
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        base.mul_f64(0.75 + 0.25 * u)
    }
}

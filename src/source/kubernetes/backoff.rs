//! The retry backoff of the watchers.
//!
//! kube-runtime's watcher has none of its own: without one it retries a
//! refused connection on every poll (kube-standin's README measured 1685
//! errors in a second). Its `default_backoff` jitters up to twice its
//! 30 s ceiling, which would make the link health's quiet period
//! (read timeout + longest backoff) a minute longer. This one doubles from
//! `min` to `max` and adds at most a quarter of jitter, derived from a seed
//! (the node name), so nodes spread their retries without a random number
//! generator, and the longest wait is known: [`RetryBackoff::longest`].

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

use kube::runtime::utils::Backoff;

/// Exponential backoff with bounded, seeded jitter.
#[derive(Debug, Clone)]
pub(crate) struct RetryBackoff {
    min: Duration,
    max: Duration,
    next: Duration,
    seed: u64,
    attempt: u64,
}

impl RetryBackoff {
    pub(crate) fn new(min: Duration, max: Duration, seed: &str) -> Self {
        let mut hasher = DefaultHasher::new();
        seed.hash(&mut hasher);
        RetryBackoff {
            min,
            max: max.max(min),
            next: min,
            seed: hasher.finish(),
            attempt: 0,
        }
    }

    /// The longest single wait this backoff can produce.
    pub(crate) fn longest(max: Duration) -> Duration {
        max.saturating_add(max / 4)
    }
}

impl Iterator for RetryBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let base = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        let mut hasher = DefaultHasher::new();
        (self.seed, self.attempt).hash(&mut hasher);
        self.attempt = self.attempt.wrapping_add(1);
        // A jitter fraction in [0, 1/4).
        let fraction = (hasher.finish() % 1024) as u32;
        Some(base.saturating_add(base * fraction / 4096))
    }
}

impl Backoff for RetryBackoff {
    fn reset(&mut self) {
        self.next = self.min;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_ceiling_with_bounded_jitter_and_resets() {
        let min = Duration::from_millis(800);
        let max = Duration::from_secs(30);
        let mut b = RetryBackoff::new(min, max, "node-1");
        let waits: Vec<Duration> = b.by_ref().take(10).collect();
        let mut base = min;
        for wait in &waits {
            assert!(
                *wait >= base && *wait < base + base / 4,
                "{wait:?} vs {base:?}"
            );
            assert!(*wait <= RetryBackoff::longest(max));
            base = (base * 2).min(max);
        }
        b.reset();
        let first = b.next().expect("endless");
        assert!(first >= min && first < min + min / 4);
        // Different nodes jitter differently.
        let other: Vec<Duration> = RetryBackoff::new(min, max, "node-2").take(10).collect();
        assert_ne!(waits, other);
    }
}

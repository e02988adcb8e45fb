//! Periodic checks on one shared grid. The daemon's pollers (the main
//! loop's one-second tick, the interface addresses, the VIP file) each
//! woke the process on a phase of their own: three wake-ups a second where
//! one does. Ticks made here fall on whole multiples of their period
//! counted from one process-wide epoch, so pollers of the same (or a
//! dividing) period fire in the same timer-driver turn — one wake-up.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::{Instant, Interval, MissedTickBehavior};

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// The first instant after `now` that is a whole number of `period`s after
/// `epoch`. A zero period is taken as 1 ms.
pub fn next_on_grid(epoch: Instant, now: Instant, period: Duration) -> Instant {
    let period = period.max(Duration::from_millis(1));
    let since = now.saturating_duration_since(epoch).as_nanos();
    let p = period.as_nanos();
    let steps = since / p + 1;
    let offset = u64::try_from(steps * p).unwrap_or(u64::MAX);
    epoch + Duration::from_nanos(offset)
}

/// The next tick of `period` on the process's grid.
pub fn next_tick(period: Duration) -> Instant {
    next_on_grid(epoch(), Instant::now(), period)
}

/// An interval whose ticks fall on the process's grid, the first one at
/// the next grid point. A tick missed (the runtime was busy) is skipped,
/// not made up late, so the ticks stay on the grid.
pub fn interval(period: Duration) -> Interval {
    let period = period.max(Duration::from_millis(1));
    let mut i = tokio::time::interval_at(next_tick(period), period);
    i.set_missed_tick_behavior(MissedTickBehavior::Skip);
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_multiples_of_the_period_from_the_epoch() {
        let e = Instant::now();
        let s = Duration::from_secs(1);
        assert_eq!(next_on_grid(e, e, s), e + s);
        assert_eq!(next_on_grid(e, e + Duration::from_millis(1), s), e + s);
        assert_eq!(
            next_on_grid(e, e + Duration::from_millis(2_999), s),
            e + 3 * s
        );
        // On a grid point: the next one, never the same instant again.
        assert_eq!(next_on_grid(e, e + 3 * s, s), e + 4 * s);
        // A period that divides another shares its grid points.
        let q = Duration::from_millis(250);
        let t = e + Duration::from_millis(1_700);
        assert_eq!(next_on_grid(e, t, q), e + Duration::from_millis(1_750));
        assert_eq!(next_on_grid(e, t, s), e + 2 * s);
        assert_eq!(next_on_grid(e, e, Duration::ZERO), e + Duration::from_millis(1));
    }

    /// Two intervals made at different moments tick on the same grid
    /// points. (What is checked is the scheduled instant `tick` returns, so
    /// a loaded machine that runs the test late changes nothing.)
    #[tokio::test]
    async fn intervals_made_apart_tick_on_the_same_grid() {
        let period = Duration::from_millis(40);
        let mut a = interval(period);
        tokio::time::sleep(Duration::from_millis(17)).await;
        let mut b = interval(period);
        let on_grid = |t: Instant| t.duration_since(epoch()).as_nanos() % period.as_nanos();
        for _ in 0..3 {
            let (ta, tb) = (a.tick().await, b.tick().await);
            assert_eq!((on_grid(ta), on_grid(tb)), (0, 0), "{ta:?} {tb:?}");
        }
    }
}

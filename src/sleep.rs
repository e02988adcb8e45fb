//! Sleeping until an instant on tokio's timer, as the drivers' loops do
//! for their next deadline.

use tokio::time::Instant;

/// Completes at `at`; never when `None`. An instant already passed
/// completes at once: tokio's timer rounds a deadline up to its next 1 ms
/// slot and fires it only when its driver next turns, so a sleep until
/// "now" cost up to a millisecond — the VIP file's first read, due at
/// start, waited on one. Takes tokio's instants and std's alike.
pub async fn until(at: Option<impl Into<Instant>>) {
    match at.map(Into::into) {
        Some(at) if at <= Instant::now() => {}
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};
    use std::time::Duration;

    use super::*;

    fn poll_once(f: impl Future<Output = ()>) -> Poll<()> {
        pin!(f)
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
    }

    #[tokio::test]
    async fn a_deadline_passed_is_ready_at_once_and_others_wait() {
        let now = Instant::now();
        // Ready on the first poll: no turn of the timer's driver.
        assert_eq!(poll_once(until(Some(now))), Poll::Ready(()));
        assert_eq!(
            poll_once(until(Some(now - Duration::from_secs(1)))),
            Poll::Ready(())
        );
        assert_eq!(
            poll_once(until(Some(Instant::now() + Duration::from_secs(60)))),
            Poll::Pending
        );
        assert_eq!(poll_once(until(None::<Instant>)), Poll::Pending);
        // And one ahead completes when its time comes, not before.
        let at = Instant::now() + Duration::from_millis(20);
        until(Some(at)).await;
        assert!(Instant::now() >= at);
    }
}

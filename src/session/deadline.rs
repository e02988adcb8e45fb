//! The session's one timer (its FSM's and speaker's next deadline) on a
//! kernel timerfd instead of tokio's timer wheel. tokio files a sleep in a
//! wheel of levels (1 ms slots, 64 ms, 4 s, 4.4 min, ...) and wakes its
//! driver at the start of each slot on the way down to re-file it: a
//! keepalive 30 s ahead costs three wake-ups, one 3 s ahead two. Keepalives
//! are all an idle session does, so its timer is the kernel's, which wakes
//! the thread once, at the deadline. Without timerfd (it cannot be
//! created), tokio's sleep does the same job.

use std::time::Instant;

use holdfast_sockopt::TimerFd;
use tokio::io::unix::AsyncFd;

pub(crate) enum Deadline {
    Kernel {
        fd: AsyncFd<TimerFd>,
        /// The deadline the timer is armed for.
        armed: Option<Instant>,
    },
    Tokio,
}

impl Deadline {
    pub(crate) fn new() -> Deadline {
        // `AsyncFd::new` is deprecated for types that may close their
        // descriptor while registered; `TimerFd` owns its `OwnedFd` and
        // closes it only when dropped, after the AsyncFd deregistered it.
        // The replacement (`register`) is unsafe, which this crate forbids.
        #[allow(deprecated)]
        let registered = TimerFd::new().and_then(AsyncFd::new);
        match registered {
            Ok(fd) => Deadline::Kernel { fd, armed: None },
            Err(e) => {
                tracing::debug!("timerfd unavailable ({e}): session timers on tokio's");
                Deadline::Tokio
            }
        }
    }

    /// Completes at `at`; never when `None`. Cancel-safe: dropped and
    /// called again with the same deadline, it waits on the same arming.
    pub(crate) async fn until(&mut self, at: Option<Instant>) {
        let Some(at) = at else {
            return std::future::pending().await;
        };
        match self {
            Deadline::Tokio => tokio::time::sleep_until(at.into()).await,
            Deadline::Kernel { fd, armed } => {
                if *armed != Some(at) {
                    // Re-arming replaces the old deadline (and clears an
                    // expiration not read yet).
                    let _ = fd.get_ref().expired();
                    if fd
                        .get_ref()
                        .arm(at.saturating_duration_since(Instant::now()))
                        .is_err()
                    {
                        return tokio::time::sleep_until(at.into()).await;
                    }
                    *armed = Some(at);
                }
                loop {
                    let Ok(mut ready) = fd.readable().await else {
                        return tokio::time::sleep_until(at.into()).await;
                    };
                    match ready.get_inner().expired() {
                        Ok(true) => {
                            *armed = None;
                            return;
                        }
                        Ok(false) => ready.clear_ready(),
                        Err(_) => {
                            *armed = None;
                            return tokio::time::sleep_until(at.into()).await;
                        }
                    }
                }
            }
        }
    }
}

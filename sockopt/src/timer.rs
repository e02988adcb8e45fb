//! A one-shot kernel timer (`timerfd_create(2)`, `CLOCK_MONOTONIC`): the
//! thread waiting on it is woken at the instant, once. An event loop
//! registers its descriptor (it is non-blocking) and reads it when it
//! turns readable.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::sys;

/// A timerfd armed for at most one expiration at a time.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A new, disarmed timer.
    pub fn new() -> io::Result<TimerFd> {
        Ok(TimerFd {
            fd: sys::timerfd_create()?,
        })
    }

    /// Arms it to expire `after` from now, replacing any earlier arming
    /// (a zero `after` is taken as one nanosecond: zero would disarm).
    pub fn arm(&self, after: Duration) -> io::Result<()> {
        sys::timerfd_settime(self.fd.as_fd(), after.max(Duration::from_nanos(1)))
    }

    /// Disarms it.
    pub fn disarm(&self) -> io::Result<()> {
        sys::timerfd_settime(self.fd.as_fd(), Duration::ZERO)
    }

    /// Whether it expired since the last call (consumes the expiration);
    /// `Ok(false)` while it has not.
    pub fn expired(&self) -> io::Result<bool> {
        match sys::timerfd_read(self.fd.as_fd()) {
            Ok(n) => Ok(n > 0),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}

impl AsFd for TimerFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn it_expires_once_after_its_time_and_not_before() {
        let t = TimerFd::new().unwrap();
        assert!(!t.expired().unwrap(), "not armed");
        t.arm(Duration::from_millis(20)).unwrap();
        assert!(!t.expired().unwrap(), "not yet");
        std::thread::sleep(Duration::from_millis(60));
        assert!(t.expired().unwrap());
        assert!(!t.expired().unwrap(), "one expiration, read once");
        t.arm(Duration::from_millis(20)).unwrap();
        t.disarm().unwrap();
        std::thread::sleep(Duration::from_millis(60));
        assert!(!t.expired().unwrap(), "disarmed");
    }
}

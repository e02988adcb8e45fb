//! Polling with a deadline. Real daemons take real time; tests poll for the
//! outcome and fail with a message that says what never happened.

use std::time::{Duration, Instant};

/// How often conditions are re-checked.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// Calls `check` until it returns `Some`, and returns that value. Panics after
/// `timeout` with "timed out after …s waiting for {what}".
pub fn wait_until<T>(timeout: Duration, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    wait_for(timeout, what, || check().ok_or_else(String::new))
}

/// Like [`wait_until`], but `check` explains why it is not done yet
/// (`Err("state is Active")`); the last explanation is part of the panic
/// message.
pub fn wait_for<T>(
    timeout: Duration,
    what: &str,
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let start = Instant::now();
    loop {
        let last = match check() {
            Ok(value) => return value,
            Err(why) => why,
        };
        if start.elapsed() >= timeout {
            if last.is_empty() {
                panic!(
                    "timed out after {:.1}s waiting for {what}",
                    timeout.as_secs_f64()
                );
            }
            panic!(
                "timed out after {:.1}s waiting for {what}; last seen: {last}",
                timeout.as_secs_f64()
            );
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Calls `check` until it returns `Some` or `timeout` passes: `None` then.
/// For a test that must tell "never happened" apart from a failure.
pub fn wait_until_opt<T>(timeout: Duration, mut check: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return Some(value);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

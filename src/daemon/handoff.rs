//! The live hand-off as the daemon carries it out (the protocol and its IO
//! are `crate::handoff`): the new side asks when the state directory is
//! held, the old side answers from its main loop.
//!
//! This build hands no session over: every request is answered with a
//! fallback (the old process exits as on SIGTERM, graceful restart where
//! the exit plan keeps the routes; the new one waits for the state
//! directory and starts with the restart marker, so its OPENs set the R
//! bit, RFC 4724 §4.1). docs/src/development/handoff.md says what the transfer of the
//! sessions still needs.

use std::path::Path;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::handoff::{self, Answer, Asked, Event, Request};
use crate::report::status::HandoffStatus;

use super::Flow;

/// How long the new side waits, after a fallback, for the old one to stop
/// and release the state directory (its exit may first drain: RFC 8326
/// graceful shutdown before withdrawing).
pub(super) const RELEASE_WAIT: Duration = Duration::from_secs(300);

/// Why the old side falls back to a restart even when the versions agree.
pub(super) const NO_TRANSFER: &str =
    "the running holdfast cannot hand its sessions over (this build does not transfer them yet)";

/// The state directory, as [`crate::api::local::claim`] gives it.
type Claimed = (std::os::unix::net::UnixListener, crate::api::local::Claim);

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The new side: the state directory is held (`refused` says so). Asks
/// the holdfast holding it to hand over; on a fallback, waits for it to
/// release the directory and claims it. Without an answer (an older
/// holdfast, or a stale socket), the refusal stands.
pub(super) async fn take_over(
    dir: &Path,
    refused: String,
) -> Result<(Claimed, HandoffStatus), String> {
    if !handoff::socket_path(dir).exists() {
        return Err(refused);
    }
    let owned = dir.to_path_buf();
    let version = handoff::version();
    info!(state_dir = %dir.display(), version, "the state directory is held: asking the running holdfast to hand over");
    let asked = tokio::task::spawn_blocking(move || handoff::ask(&owned, version))
        .await
        .map_err(|e| format!("{refused} (hand-off: {e})"))?;
    let reason = match asked {
        Asked::NoAnswer(why) => return Err(format!("{refused} (no hand-off: {why})")),
        // Dropped unconfirmed: the old side goes on as if nothing happened.
        Asked::Transfer { transfer, .. } => {
            return Err(format!(
                "{refused} (the running holdfast, {}, offered its sessions; this build cannot take them over, so it keeps them)",
                transfer.build
            ));
        }
        Asked::Fallback(reason) => reason,
    };
    warn!(%reason, "hand-off: falling back to a restart: the running holdfast exits by its usual path (graceful restart where its exit plan keeps the routes), this one starts once it is gone");
    let until = Instant::now() + RELEASE_WAIT;
    loop {
        match crate::api::local::claim(dir) {
            Ok(claimed) => {
                info!("hand-off: the previous holdfast is gone, starting");
                return Ok((
                    claimed,
                    HandoffStatus {
                        result: "fallback".into(),
                        reason: Some(reason),
                        at_unix_seconds: unix_now(),
                        pause_milliseconds: None,
                    },
                ));
            }
            Err(e) if Instant::now() >= until => {
                return Err(format!(
                    "hand-off fell back ({reason}), but the running holdfast did not release the state directory within {RELEASE_WAIT:?}: {e}"
                ));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

impl super::Daemon {
    /// The old side: an event of the hand-off socket. A request is
    /// answered with a fallback; once the new side confirms it, the
    /// daemon exits as on SIGTERM (once: a later request is answered the
    /// same and changes nothing). A new side that leaves before
    /// confirming changes nothing.
    pub(super) fn on_handoff(&mut self, event: Event) -> Flow {
        match event {
            Event::Request { request, reply } => {
                let reason = match request {
                    Request::Compatible(hello) => {
                        info!(pid = hello.pid, build = %hello.build, "hand-off requested by a new holdfast");
                        NO_TRANSFER.to_string()
                    }
                    Request::Incompatible(why) => why,
                };
                let _ = reply.send(Answer::Fallback(reason));
                Flow::Continue
            }
            Event::Abandoned(why) => {
                warn!("hand-off: the new holdfast left before confirming ({why}): running on");
                Flow::Continue
            }
            Event::Confirmed(reason) => {
                if self.routes.exiting() {
                    return Flow::Continue;
                }
                warn!(%reason, "hand-off: falling back: exiting as on SIGTERM so that the new holdfast can start");
                self.on_signal()
            }
        }
    }
}

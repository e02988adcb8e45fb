//! The daemon's side of `holdfast drain` / `undrain` and of a shutdown
//! without graceful restart: the drain state the API changes and the main
//! loop follows. The sequence itself is [`crate::speaker::Drain`].

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::speaker::{Drain, DrainPhase, PeerTable};
use crate::status::DrainStatus;

/// Which peers a drain applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// `holdfast drain`: every peer.
    All,
    /// A shutdown: the peers whose routes will not outlive it (no graceful
    /// restart, or `--withdraw-on-exit`). Peers kept by graceful restart
    /// keep their routes as they are.
    Peers(BTreeSet<String>),
}

/// Shared between the API (which starts and ends drains) and the main loop
/// (which runs the timer and publishes the tables).
#[derive(Debug)]
pub struct Control {
    pub drain: Drain,
    pub scope: Scope,
    /// `speaker.graceful_shutdown_wait` as of the last config (re)load; a
    /// drain under way keeps the wait it started with.
    pub wait: Duration,
    /// SIGTERM came: the daemon exits once the drain has run its course.
    pub exiting: bool,
}

pub type SharedControl = Arc<(Mutex<Control>, Notify)>;

pub fn shared(wait: Duration) -> SharedControl {
    Arc::new((
        Mutex::new(Control {
            drain: Drain::default(),
            scope: Scope::All,
            wait,
            exiting: false,
        }),
        Notify::new(),
    ))
}

impl Control {
    /// The API's `drain` (`on`) and `undrain`.
    pub fn set(&mut self, on: bool, now: Instant) -> Result<DrainStatus, String> {
        if on {
            if self.drain.start(now, self.wait) {
                self.scope = Scope::All;
            } else if !self.exiting {
                // Already draining: every peer now, the timer as it runs.
                self.scope = Scope::All;
            }
        } else if self.exiting {
            return Err(
                "holdfast is shutting down: its routes are being withdrawn and cannot be undrained"
                    .into(),
            );
        } else {
            self.drain.stop();
        }
        Ok(self.status(now))
    }

    pub fn status(&self, now: Instant) -> DrainStatus {
        let (state, left) = match self.drain.phase() {
            DrainPhase::Active => ("active", None),
            DrainPhase::GracefulShutdown { until, .. } => (
                "draining",
                Some(until.saturating_duration_since(now).as_secs_f64()),
            ),
            DrainPhase::Withdrawn { .. } => ("drained", None),
        };
        DrainStatus {
            state: state.into(),
            seconds_left: left,
            exiting: self.exiting,
        }
    }

    /// What `peer` is told, given its desired table.
    pub fn shape(&self, peer: &str, table: PeerTable) -> PeerTable {
        let applies = match &self.scope {
            Scope::All => true,
            Scope::Peers(peers) => peers.contains(peer),
        };
        if applies {
            self.drain.shape(table)
        } else {
            table
        }
    }
}

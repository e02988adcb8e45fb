//! The planned withdrawal of this node's routes (RFC 8326): first the routes
//! are re-advertised with GRACEFUL_SHUTDOWN (and LOCAL_PREF 0 towards iBGP
//! peers), so the routers move traffic to the other nodes while this one
//! still forwards it; after `graceful_shutdown_wait` they are withdrawn.
//!
//! ```text
//!            drain                       wait over
//!   Active ─────────▶ GracefulShutdown ─────────────▶ Withdrawn
//!     ▲    (wait 0s: straight to Withdrawn) │              │
//!     └──────────── undrain ────────────────┴──────────────┘
//! ```
//!
//! Undrain, at any point, goes back to the normal attributes: one UPDATE
//! per attribute set (BGP's implicit replace, RFC 4271 §3.1), never a
//! withdrawal first. Draining again while draining keeps the timer that
//! runs. A pure state machine: time comes in, nothing reads a clock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{PeerTable, RouteAttrs};

/// Where the drain stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DrainPhase {
    /// Routes are advertised normally.
    Active,
    /// Routes carry GRACEFUL_SHUTDOWN until `until`, then go.
    GracefulShutdown { since: Instant, until: Instant },
    /// Routes are withdrawn.
    Withdrawn { since: Instant },
}

/// The drain of this node's routes.
#[derive(Debug, Clone)]
pub struct Drain {
    phase: DrainPhase,
}

impl Default for Drain {
    fn default() -> Self {
        Drain {
            phase: DrainPhase::Active,
        }
    }
}

impl Drain {
    pub fn phase(&self) -> DrainPhase {
        self.phase
    }

    /// Not [`DrainPhase::Active`].
    pub fn draining(&self) -> bool {
        self.phase != DrainPhase::Active
    }

    /// Starts a drain at `now` with this wait; answers whether anything
    /// changed (a drain under way keeps its timer). A wait too long for
    /// `Instant` waits for ever, which keeps the routes: the safe side.
    pub fn start(&mut self, now: Instant, wait: Duration) -> bool {
        if self.draining() {
            return false;
        }
        self.phase = if wait.is_zero() {
            DrainPhase::Withdrawn { since: now }
        } else {
            match now.checked_add(wait) {
                Some(until) => DrainPhase::GracefulShutdown { since: now, until },
                None => DrainPhase::GracefulShutdown {
                    since: now,
                    until: now + Duration::from_secs(365 * 24 * 3600),
                },
            }
        };
        true
    }

    /// Ends a drain; answers whether one was under way.
    pub fn stop(&mut self) -> bool {
        let was = self.draining();
        self.phase = DrainPhase::Active;
        was
    }

    /// Moves on if the wait is over by `now`; answers whether it did.
    pub fn poll(&mut self, now: Instant) -> bool {
        match self.phase {
            DrainPhase::GracefulShutdown { until, .. } if until <= now => {
                self.phase = DrainPhase::Withdrawn { since: until };
                true
            }
            _ => false,
        }
    }

    /// When [`Self::poll`] next has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        match self.phase {
            DrainPhase::GracefulShutdown { until, .. } => Some(until),
            _ => None,
        }
    }

    /// What a peer is told in this phase: its table as is, marked for
    /// graceful shutdown, or nothing.
    pub fn shape(&self, table: PeerTable) -> PeerTable {
        match self.phase {
            DrainPhase::Active => table,
            DrainPhase::GracefulShutdown { .. } => mark_graceful_shutdown(table, |_| true),
            DrainPhase::Withdrawn { .. } => PeerTable::new(),
        }
    }
}

/// `table` with the routes `which` picks marked for graceful shutdown
/// ([`RouteAttrs::graceful_shutdown`]). Equal attributes still share one
/// allocation, so the UPDATEs stay packed.
pub fn mark_graceful_shutdown(
    table: PeerTable,
    which: impl Fn(&ipnet::IpNet) -> bool,
) -> PeerTable {
    let mut marked: BTreeMap<*const RouteAttrs, Arc<RouteAttrs>> = BTreeMap::new();
    table
        .into_iter()
        .map(|(prefix, attrs)| {
            if !which(&prefix) {
                return (prefix, attrs);
            }
            let gs = marked
                .entry(Arc::as_ptr(&attrs))
                .or_insert_with(|| Arc::new(attrs.graceful_shutdown()))
                .clone();
            (prefix, gs)
        })
        .collect()
}

#[cfg(test)]
mod tests;

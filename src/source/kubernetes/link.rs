//! The health of one watcher's link to the API server, told from outside
//! kube-runtime's watcher.
//!
//! ```text
//!            Init                      InitDone
//!   ──▶ Listing ◀──────── any ─────── Live ◀──────── Listing
//!         │ ▲ errors keep it here      │ ▲  Apply/Delete, or `quiet` without errors
//!         │ └──────────                ▼ │
//!         └───── InitDone ──▶ Live   Broken ── errors restart the quiet timer
//! ```
//!
//! The watcher yields no event when a watch it re-opens after an error
//! succeeds (bookmarks are consumed inside it), so a broken link is taken
//! as live again when either an object event arrives, or `quiet` passes
//! without another error. `quiet` is the client's read timeout plus the
//! longest retry backoff: a retry that hangs (a partitioned API server)
//! fails within the read timeout, one that is refused fails at once, so a
//! link that stays silent that long has a watch open and reading bookmarks.
//! A 410 Gone resets the watcher (`Init`): the link is listing again until
//! the fresh list is complete.

use std::time::{Duration, Instant};

/// What a watcher task reports about its stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Signal {
    /// A (re-)list begins (kube's `Event::Init`).
    Init,
    /// The list is complete and the store swapped (`Event::InitDone`).
    InitDone,
    /// An object was added, modified or deleted.
    Changed,
    /// An object event that changed nothing kept (an EndpointSlice with no
    /// endpoint on this node, a Service edited in fields holdfast does not
    /// read): it proves the watch open like `Changed`, and needs no
    /// evaluation.
    Unchanged,
    /// The watcher yielded an error (list or watch failed, 410 Gone).
    Error(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Listing,
    Live,
    Broken { since: Instant },
}

/// One watcher's link.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    /// What it watches, for messages ("services", "node \"n1\"").
    pub name: String,
    state: State,
    /// It has completed a list at least once: its store is complete.
    synced: bool,
    last_error: Option<String>,
}

impl Link {
    pub(crate) fn new(name: String) -> Link {
        Link {
            name,
            state: State::Listing,
            synced: false,
            last_error: None,
        }
    }

    /// Applies a signal; true when the store changed (an evaluation is due).
    pub(crate) fn on(&mut self, signal: Signal, now: Instant) -> bool {
        match signal {
            Signal::Init => {
                self.state = State::Listing;
                false
            }
            Signal::InitDone => {
                self.state = State::Live;
                self.synced = true;
                self.last_error = None;
                true
            }
            Signal::Changed | Signal::Unchanged => {
                // Events flowing prove the watch is open again.
                if matches!(self.state, State::Broken { .. }) {
                    self.state = State::Live;
                    self.last_error = None;
                }
                matches!(signal, Signal::Changed)
            }
            Signal::Error(message) => {
                self.last_error = Some(message);
                if self.state != State::Listing {
                    self.state = State::Broken { since: now };
                }
                false
            }
        }
    }

    /// Moves a link that has been quiet long enough back to live; true
    /// when it did.
    pub(crate) fn tick(&mut self, now: Instant, quiet: Duration) -> bool {
        match self.deadline(quiet) {
            Some(at) if at <= now => {
                self.state = State::Live;
                self.last_error = None;
                true
            }
            _ => false,
        }
    }

    /// When [`Link::tick`] has something to do.
    pub(crate) fn deadline(&self, quiet: Duration) -> Option<Instant> {
        match self.state {
            State::Broken { since } => since.checked_add(quiet),
            State::Listing | State::Live => None,
        }
    }

    pub(crate) fn live(&self) -> bool {
        self.state == State::Live
    }

    #[cfg(test)]
    pub(crate) fn synced(&self) -> bool {
        self.synced
    }

    /// What is wrong, when the link is not live.
    pub(crate) fn problem(&self) -> Option<String> {
        match (&self.state, &self.last_error) {
            (State::Live, _) => None,
            (_, Some(error)) => Some(format!("{}: {error}", self.name)),
            (State::Listing, None) if self.synced => Some(format!("{}: re-listing", self.name)),
            (State::Listing, None) => Some(format!("{}: listing", self.name)),
            (State::Broken { .. }, None) => Some(format!("{}: disconnected", self.name)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QUIET: Duration = Duration::from_secs(10);

    #[test]
    fn a_link_is_live_once_its_first_list_is_done() {
        let t = Instant::now();
        let mut link = Link::new("services".into());
        assert!(!link.live() && !link.synced());
        assert!(!link.on(Signal::Init, t));
        assert_eq!(link.problem().as_deref(), Some("services: listing"));
        assert!(link.on(Signal::InitDone, t));
        assert!(link.live() && link.synced());
        assert_eq!(link.problem(), None);
    }

    #[test]
    fn errors_while_listing_keep_it_listing_and_never_schedule_a_recovery() {
        let t = Instant::now();
        let mut link = Link::new("services".into());
        assert!(!link.on(Signal::Error("403 Forbidden".into()), t));
        assert!(!link.live());
        assert_eq!(link.deadline(QUIET), None);
        assert!(!link.tick(t + QUIET * 100, QUIET));
        assert_eq!(link.problem().as_deref(), Some("services: 403 Forbidden"));
    }

    #[test]
    fn a_broken_link_recovers_after_a_quiet_period_measured_from_the_last_error() {
        let t = Instant::now();
        let mut link = Link::new("services".into());
        link.on(Signal::InitDone, t);
        link.on(Signal::Error("read timed out".into()), t);
        assert!(!link.live());
        assert_eq!(link.deadline(QUIET), Some(t + QUIET));
        // Another error restarts the quiet period.
        link.on(
            Signal::Error("connection refused".into()),
            t + Duration::from_secs(5),
        );
        assert!(!link.tick(t + QUIET, QUIET));
        assert!(!link.live());
        assert!(!link.tick(t + Duration::from_secs(15) - Duration::from_nanos(1), QUIET));
        assert!(link.tick(t + Duration::from_secs(15), QUIET));
        assert!(link.live());
        assert_eq!(link.deadline(QUIET), None);
    }

    #[test]
    fn an_object_event_proves_a_broken_link_live() {
        let t = Instant::now();
        let mut link = Link::new("services".into());
        link.on(Signal::InitDone, t);
        link.on(Signal::Error("read timed out".into()), t);
        assert!(link.on(Signal::Changed, t));
        assert!(link.live());
    }

    #[test]
    fn an_event_that_changes_no_record_proves_the_link_live_and_asks_no_evaluation() {
        let t = Instant::now();
        let mut link = Link::new("endpointslices".into());
        link.on(Signal::InitDone, t);
        assert!(!link.on(Signal::Unchanged, t));
        link.on(Signal::Error("read timed out".into()), t);
        assert!(!link.live());
        assert!(!link.on(Signal::Unchanged, t));
        assert!(link.live());
        assert_eq!(link.problem(), None);
    }

    #[test]
    fn a_410_resets_to_listing_until_the_fresh_list_is_done() {
        let t = Instant::now();
        let mut link = Link::new("services".into());
        link.on(Signal::InitDone, t);
        link.on(Signal::Error("410 Gone".into()), t);
        link.on(Signal::Init, t);
        // The quiet period no longer applies: only InitDone makes it live.
        assert_eq!(link.deadline(QUIET), None);
        assert!(!link.tick(t + QUIET * 2, QUIET));
        assert!(!link.live());
        assert!(link.synced(), "still synced: the old store is complete");
        assert!(link.on(Signal::InitDone, t + QUIET * 2));
        assert!(link.live());
    }
}

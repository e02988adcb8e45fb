//! The stability layer: what the routers are told, and when.
//!
//! The source (Kubernetes, a file) reports the set of VIPs this node should
//! advertise; policy turns it into `{prefix → attributes}`. That set is
//! noisy: an LB-IPAM bug empties a Service's `status.loadBalancer.ingress`
//! every second or two and refills it, while the datapath never stops
//! working. Passed straight on, each blink is a withdraw and an advertise at
//! every router. This layer sits between policy and the speaker and decides
//! what goes on the wire:
//!
//! ```text
//!                 present                        advertise_delay over
//!   (unknown) ────────────────▶ PendingAdvertise ─────────────────────▶ Advertised ◀─┐
//!       ▲                           │ absent: dropped, nothing sent      │ ▲          │ attrs change:
//!       │                           ▼                                    │ │          │ Advertise(new)
//!       │                       (unknown)                        absent  │ │ present ─┘
//!       │                                                                ▼ │ (nothing sent)
//!       └──────── Withdraw ◀── hold-down over, not damped ◀── HeldDown / Damped / Draining
//! ```
//!
//! - **Appearance** → `Advertise` after `advertise_delay` (0: in the same
//!   step). A prefix that vanishes before the delay is over was never sent.
//! - **Vanished** (the address list emptied; also any absence the source
//!   gives no reason for) → the prefix stays advertised until it has been
//!   continuously absent for `withdraw_hold_down`. Coming back inside the
//!   window sends nothing at all. Boundary: absent for *exactly* the
//!   hold-down is withdrawn at that instant; a call 1 ns earlier keeps it.
//! - **NoLocalEndpoint** (traffic policy `Local` and this node's last ready
//!   endpoint went) → withdrawn after `local_endpoint_delay` (default 0: at
//!   once). The node's datapath drops the Service's traffic from then on,
//!   so the hold-down, which exists for the address list's flapping, would
//!   only prolong a blackhole. Damping still applies: an endpoint whose
//!   readiness keeps flapping is held like a flapping address.
//! - **Deleted** (Service deleted, class or type changed, opt-out
//!   annotation) → withdrawn after `delete_delay` (default 0: at once).
//! - **Drained** (node cordoned or excluded) → withdrawn after
//!   `graceful_shutdown_wait` (RFC 8326: the speaker marks such prefixes
//!   GRACEFUL_SHUTDOWN meanwhile; 0 withdraws at once); **ProbeFailed**
//!   (the datapath is broken) → withdrawn at once. No hold-down, no
//!   damping, no mass-withdrawal guard for either.
//! - **Attribute change** of an advertised prefix → one `Advertise` with the
//!   new attributes (BGP's implicit replace, RFC 4271 §3.1), never a
//!   withdraw first. A prefix held down that comes back with other
//!   attributes is re-advertised with them.
//! - **Damping** (optional): RFC 2439's figure of merit, counted over
//!   absences, keeps a flapping prefix advertised even when an absence
//!   outlasts the hold-down; see "Damping" below, and the `damping` module
//!   for why this is classic damping inside out.
//! - **Unhealthy source**: the last known set stands. While the source is
//!   unhealthy, a prefix missing from its snapshot is not taken as absent
//!   (nothing new starts to be held down), no absence timer runs and nothing
//!   is withdrawn for any reason the source gives (Vanished,
//!   NoLocalEndpoint, Deleted, Drained): a source that cannot see its input
//!   has no word on what went. New prefixes and attribute changes in the
//!   snapshot are still applied, since they only add (so a probe's
//!   `on_failure = "degrade"` re-announces its VIP degraded either way).
//!   **ProbeFailed** is not the source's word but this node's own connect
//!   to the VIP: it withdraws at once whatever the source's health (see
//!   [`Absence::waits_for_healthy_source`]). When
//!   the source is healthy again, every absence is measured afresh from that
//!   moment: an absence that had run 25 s of a 30 s hold-down before the
//!   outage gets a full 30 s after it. (Restarting rather than resuming errs
//!   on the side of keeping routes, which is the point of this layer.)
//!
//! Edge cases, as implemented:
//! - A prefix both present and listed as absent: present wins.
//! - An absence reason is sticky: a source may report it once, when the
//!   prefix goes, and then just leave the prefix out. A later, different
//!   reason replaces it, and its timer (`delete_delay`) runs from the
//!   moment it was reported; Drained or ProbeFailed arriving for a prefix
//!   that was held down withdraws it at once.
//! - Each call that passes `now` first carries out every transition due at
//!   or before `now` (as if `poll(now)` had been called), then applies its
//!   own input. The resulting state therefore does not depend on whether
//!   the driver polled in between; only the grouping of changes into calls
//!   does. The output of one call is the net change per
//!   prefix: a withdrawal due at `now` followed by the prefix reappearing in
//!   the same `update(now)` cancels out (same attributes: nothing sent;
//!   other attributes: one `Advertise`).
//! - Time never runs backwards: an instant earlier than one already seen
//!   is taken as the latest instant seen.
//! - Config reload (`set_params`) never sends anything for a prefix that is
//!   present and advertised; it returns only what is due at `now` — under
//!   the old timers (it was owed already) or the new (a shorter hold-down).
//!
//! # Damping
//!
//! With `[stability.damping]`, each absence of an advertised prefix (reason
//! Vanished or NoLocalEndpoint) adds `penalty` to the prefix's figure of merit, which halves
//! every `half_life` (RFC 2439 §4.2). When a penalty lifts the figure above
//! `suppress_threshold`, a damping episode begins; it lasts until the figure
//! decays to `reuse_threshold`, and never longer than `max_suppress` after it
//! began (the RFC 2439 §4.4 ceiling, taken from the start of the episode;
//! the figure is also capped at `reuse * 2^(max_suppress / half_life)` as the
//! RFC does). During an episode an absent prefix is not withdrawn, even past
//! the hold-down (or `local_endpoint_delay`); it is withdrawn once the
//! episode is over *and* its own timer has passed. Pending prefixes (never sent) earn no penalty, and
//! neither do definitive absences: they are not noise. An episode ended by
//! the ceiling lowers the figure to `reuse_threshold`, so the next episode
//! needs a fresh crossing; a figure below half of `reuse_threshold` is
//! forgotten (reads 0), which lets the history of a withdrawn prefix go.
//!
//! # Driving it
//!
//! The driver calls [`Stability::update`] with every new snapshot,
//! [`Stability::poll`] at [`Stability::next_deadline`], and applies each
//! returned [`Change`] to the speaker's RIB in order. The `_with` forms
//! (`update_with`, `poll_with`, `set_params_with`) hand each change to a
//! closure by reference instead of collecting them: the daemon uses them,
//! since a bulk load's changes are every route and it only logs and counts
//! them (it rebuilds the peers' tables from [`Stability::advertised`]). Nothing here reads a
//! clock, spawns or does IO: tests run on simulated time.

mod damping;
mod guard;
mod params;
mod view;

#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Instant;

use damping::FlapHistory;

pub use guard::{DEFAULT_MAX_WITHDRAW_FRACTION, GuardParams, GuardView};
pub use params::{DampingParams, MAX_TIMER, Params, ParamsError};
pub use view::{Counters, KeyState};

use crate::model::sorted::SortedMap;
use crate::model::{Absence, SourceId, SourceSet};

/// One change for the speaker's RIB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<K, V> {
    /// Advertise the prefix with these attributes; if it is already
    /// advertised, this replaces its attributes (RFC 4271 §3.1: a new
    /// route for the same prefix implicitly withdraws the old one).
    Advertise(K, V),
    /// Withdraw the prefix.
    Withdraw(K),
}

/// Which source a route came from: its health decides whether the
/// route's absence counts ([`Health`]). Types with no source (the tests'
/// attributes) take the default, source 0.
pub trait Sourced {
    fn source(&self) -> SourceId {
        SourceId::default()
    }
}

impl Sourced for crate::model::Route {
    fn source(&self) -> SourceId {
        self.source
    }
}
impl Sourced for () {}
impl Sourced for u8 {}
impl Sourced for u32 {}
impl Sourced for &'static str {}

/// The sources' health as a snapshot gives it: the unhealthy ones. With
/// one source, `true` (healthy) or `false` converts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Health {
    pub unhealthy: SourceSet,
}

impl From<bool> for Health {
    fn from(healthy: bool) -> Health {
        Health {
            unhealthy: if healthy {
                SourceSet::NONE
            } else {
                SourceSet::ALL
            },
        }
    }
}

impl From<SourceSet> for Health {
    fn from(unhealthy: SourceSet) -> Health {
        Health { unhealthy }
    }
}

/// The stability state machine over prefixes `K` with attributes `V`.
#[derive(Debug, Clone)]
pub struct Stability<K, V> {
    params: Params,
    /// One sorted list (crate::model::sorted): built at its final size on a
    /// bulk load, walked on every call.
    entries: SortedMap<K, Entry<V>>,
    /// The sources that were unhealthy at the last snapshot.
    unhealthy: SourceSet,
    /// The latest instant passed in; views are as of this instant.
    now: Option<Instant>,
    counters: Counters,
    /// Paces mass withdrawals (`guard` module).
    guard: guard::Guard<K>,
    /// How many entries are in each phase, as of the last call: the status
    /// view and `/metrics` read these instead of walking every prefix.
    tally: Tally,
    /// The damping histories ([`Histories`]); a history goes with its
    /// entry.
    histories: Histories<K>,
}

/// Entries by phase, counted where the table changes ([`Stability::finish`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    pending: usize,
    advertised: usize,
    absent: usize,
    /// Of `absent`, those damping keeps past their own timer
    /// ([`KeyState::Damped`]).
    damped: usize,
}

#[cfg(test)]
thread_local! {
    /// Walks over every prefix begun on this thread (tests check that a
    /// scrape begins none).
    static WALKS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Walks over the whole table begun on this thread so far.
#[cfg(test)]
pub(crate) fn walks() -> usize {
    WALKS.with(std::cell::Cell::get)
}

fn walked() {
    #[cfg(test)]
    WALKS.with(|w| w.set(w.get() + 1));
}

#[derive(Debug, Clone)]
struct Entry<V> {
    phase: Phase<V>,
}

/// Damping histories by prefix: only with damping, and only for prefixes
/// that have been absent. Held beside the table, not in each entry: few
/// prefixes have one, and a slot in every entry was 8 octets (with the
/// key's padding, 0.8 MB at 100k) of room for none.
type Histories<K> = BTreeMap<K, FlapHistory>;

#[derive(Debug, Clone)]
enum Phase<V> {
    /// Present at the source since `since`; nothing sent yet.
    Pending { attrs: V, since: Instant },
    /// Present and advertised with `attrs`.
    Advertised { attrs: V },
    /// Advertised with `attrs`, absent at the source.
    Absent {
        attrs: V,
        absence: Box<AbsenceRecord>,
    },
    /// Neither present nor advertised; kept only for its damping history.
    Withdrawn,
}

#[derive(Debug, Clone, Copy)]
struct AbsenceRecord {
    reason: Absence,
    /// When the prefix went missing (for the views).
    since: Instant,
    /// Where the hold-down counts from: `since`, or the moment the source
    /// last became healthy, whichever is later.
    clock: Instant,
    /// When the current `reason` was reported (or the source last became
    /// healthy, whichever is later); `delete_delay` counts from here.
    reason_since: Instant,
}

impl Absence {
    /// Whether damping may carry an absence of this kind past its own
    /// timer: the kinds that can be noise (an address list or an
    /// endpoint's readiness that keeps flapping), not a decision.
    fn damped(self) -> bool {
        matches!(self, Absence::Vanished | Absence::NoLocalEndpoint)
    }

    /// Whether an absence of this kind is the source's word, which stands
    /// only while the source is healthy: while it is not, such an absence
    /// is not taken and its timer does not run (the last known set
    /// stands). A failed probe is not the source's word: it is this node's
    /// own connect to the VIP, as true during an API outage or with a
    /// broken VIP file as at any other time, so it withdraws regardless.
    pub(crate) fn waits_for_healthy_source(self) -> bool {
        match self {
            Absence::Vanished | Absence::NoLocalEndpoint | Absence::Deleted | Absence::Drained => {
                true
            }
            Absence::ProbeFailed => false,
        }
    }
}

impl AbsenceRecord {
    /// The end of the damping episode that keeps this absence's prefix
    /// advertised past its own timer at `now`, if one does (then the
    /// prefix shows as [`KeyState::Damped`]).
    fn damped_past_own_timer(
        &self,
        history: Option<&FlapHistory>,
        params: &Params,
        now: Instant,
    ) -> Option<Instant> {
        if !self.reason.damped() || params.damping.is_none() {
            return None;
        }
        let own_end = self.own_end(params);
        history?
            .damped_until(now)
            .filter(|end| own_end.is_some_and(|own_end| *end > own_end))
    }

    /// When the absence's own timer ends, damping aside; `None` beyond what
    /// `Instant` can represent.
    fn own_end(&self, params: &Params) -> Option<Instant> {
        match self.reason {
            Absence::Vanished => self.clock.checked_add(params.withdraw_hold_down),
            Absence::NoLocalEndpoint => self.reason_since.checked_add(params.local_endpoint_delay),
            Absence::Deleted => self.reason_since.checked_add(params.delete_delay),
            // RFC 8326 §3: a planned withdrawal waits while the routes
            // carry GRACEFUL_SHUTDOWN (the speaker adds it).
            Absence::Drained => self.reason_since.checked_add(params.graceful_shutdown_wait),
            Absence::ProbeFailed => Some(self.reason_since),
        }
    }
}

impl<V> Entry<V> {
    /// A prefix the source has just shown for the first time.
    fn pending(attrs: V, since: Instant) -> Self {
        Entry {
            phase: Phase::Pending { attrs, since },
        }
    }

    /// What the routers currently hold for this prefix.
    fn wire(&self) -> Option<&V> {
        match &self.phase {
            Phase::Advertised { attrs } | Phase::Absent { attrs, .. } => Some(attrs),
            Phase::Pending { .. } | Phase::Withdrawn => None,
        }
    }

    /// When this prefix's next transition is due; `None` when none is
    /// scheduled (or it lies beyond what `Instant` can represent, which
    /// keeps the route: the safe side).
    fn deadline<K: Ord>(
        &self,
        key: &K,
        histories: &Histories<K>,
        params: &Params,
        unhealthy: SourceSet,
    ) -> Option<Instant>
    where
        V: Sourced,
    {
        match &self.phase {
            Phase::Pending { since, .. } => since.checked_add(params.advertise_delay),
            Phase::Advertised { .. } | Phase::Withdrawn => None,
            // The last known set stands while its source is unhealthy
            // (a failed probe's absence excepted).
            Phase::Absent { attrs, absence }
                if unhealthy.contains(attrs.source())
                    && absence.reason.waits_for_healthy_source() =>
            {
                None
            }
            Phase::Absent { absence, .. } => {
                let own_end = absence.own_end(params)?;
                if !absence.reason.damped() {
                    return Some(own_end);
                }
                match histories.get(key).and_then(FlapHistory::suppression_end) {
                    Some(damped_end) => Some(own_end.max(damped_end)),
                    None => Some(own_end),
                }
            }
        }
    }
}

/// The wire state of each prefix touched by one call, before the call; the
/// call's output is the difference to the wire state after it.
///
/// Lists, not a map: every walk over the table notes its prefixes in key
/// order, so a bulk load appends (a B-tree grown by 100k lookups and
/// in-order inserts was a fifth of the load's CPU). Notes out of order (a
/// second walk in the same call, the guard's hand-back) are sorted once at
/// the end, keeping each prefix's first note.
///
/// A note is its key; the attributes on the wire before the call, for the
/// prefixes that had any, are kept apart. Most notes of a bulk load are of
/// new prefixes, with nothing on the wire: with 100k VIPs, a slot with
/// room for attributes in every note was 6 MB of the daemon's peak.
struct Delta<K, V> {
    keys: Vec<K>,
    /// (index in `keys`, what was on the wire), in the order of `keys`.
    held: Vec<(usize, V)>,
    /// `keys` is in strictly ascending order.
    sorted: bool,
}

/// What the call changed on the wire for one noted prefix, from its wire
/// state before the call and after it.
fn change_of<'a, K, V: PartialEq>(
    key: &'a K,
    before: Option<V>,
    after: Option<&'a V>,
) -> Option<Change<&'a K, &'a V>> {
    match (before, after) {
        (None, Some(attrs)) => Some(Change::Advertise(key, attrs)),
        (Some(sent), Some(attrs)) if sent != *attrs => Some(Change::Advertise(key, attrs)),
        (Some(_), None) => Some(Change::Withdraw(key)),
        _ => None,
    }
}

impl<K: Clone, V: Clone> Change<&K, &V> {
    /// The change with its key and attributes cloned.
    pub fn to_owned(&self) -> Change<K, V> {
        match self {
            Change::Advertise(k, v) => Change::Advertise((*k).clone(), (*v).clone()),
            Change::Withdraw(k) => Change::Withdraw((*k).clone()),
        }
    }
}

/// `key`, which has `entry`, is present at the source with `attrs`.
#[allow(clippy::too_many_arguments)]
fn appear<K: Ord + Clone, V: Clone + Eq + Sourced>(
    entry: &mut Entry<V>,
    params: &Params,
    counters: &mut Counters,
    unhealthy: SourceSet,
    now: Instant,
    key: &K,
    attrs: V,
    histories: &Histories<K>,
    delta: &mut Delta<K, V>,
) {
    match &mut entry.phase {
        // The delay runs from the first appearance; the attributes sent
        // will be the latest.
        Phase::Pending { attrs: pending, .. } => {
            if *pending != attrs {
                *pending = attrs;
            }
        }
        Phase::Advertised { attrs: sent } => {
            if *sent != attrs {
                delta.note(key, Some(sent));
                *sent = attrs;
            }
        }
        Phase::Absent {
            attrs: sent,
            absence,
        } => {
            // Back before its withdrawal was due: nothing was sent for
            // the absence. Count who carried it.
            let past_own_timer = absence.own_end(params).is_some_and(|end| now >= end);
            let damped = histories
                .get(key)
                .and_then(|h| h.damped_until(now))
                .is_some();
            let source_healthy = !unhealthy.contains(sent.source());
            if absence.reason.damped() && source_healthy && past_own_timer && damped {
                counters.absorbed_by_damping += 1;
            } else {
                counters.absorbed_by_hold_down += 1;
            }
            delta.note(key, Some(sent));
            entry.phase = Phase::Advertised { attrs };
        }
        Phase::Withdrawn => {
            entry.phase = Phase::Pending { attrs, since: now };
        }
    }
}

impl<K: Ord + Clone, V: Clone + Eq> Delta<K, V> {
    fn new() -> Self {
        Delta {
            keys: Vec::new(),
            held: Vec::new(),
            sorted: true,
        }
    }

    /// Only the first note of a key counts: it is the state before the call.
    fn note(&mut self, key: &K, wire: Option<&V>) {
        if let Some(last) = self.keys.last() {
            match last.cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => return,
                std::cmp::Ordering::Greater => self.sorted = false,
            }
        }
        if let Some(v) = wire {
            self.held.push((self.keys.len(), v.clone()));
        }
        self.keys.push(key.clone());
    }

    /// The notes in key order, one per key (its first), and the wire
    /// states before the call, indexed by note.
    fn into_sorted(self) -> (Vec<K>, Vec<(usize, V)>) {
        if self.sorted {
            return (self.keys, self.held);
        }
        let mut held = self.held.into_iter().peekable();
        let mut all: Vec<(K, Option<V>)> = self
            .keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, held.next_if(|(j, _)| *j == i).map(|(_, v)| v)))
            .collect();
        // Stable: of equal keys the first noted stays first, and dedup_by
        // keeps the first of each run.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all.dedup_by(|later, earlier| later.0 == earlier.0);
        let mut keys = Vec::with_capacity(all.len());
        let mut held = Vec::new();
        for (i, (k, v)) in all.into_iter().enumerate() {
            if let Some(v) = v {
                held.push((i, v));
            }
            keys.push(k);
        }
        (keys, held)
    }
}

impl<K: Ord + Clone, V: Clone + Eq + Sourced> Stability<K, V> {
    /// A state machine with nothing advertised. The source counts as healthy
    /// until an update says otherwise.
    pub fn new(params: Params) -> Result<Self, ParamsError> {
        params.validate()?;
        Ok(Stability {
            params,
            entries: SortedMap::new(),
            unhealthy: SourceSet::NONE,
            now: None,
            counters: Counters::default(),
            guard: guard::Guard::new(),
            tally: Tally::default(),
            histories: Histories::new(),
        })
    }

    /// The parameters in force.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Config reload. Timers are re-evaluated against the new values (a
    /// prefix held down since `t` is now withdrawn at `t + new hold-down`);
    /// damping histories carry over, re-derived under the new thresholds
    /// (all dropped if damping is turned off). Returns what is due at `now`;
    /// nothing is sent for a prefix that is present and advertised. On error
    /// nothing changes.
    pub fn set_params(
        &mut self,
        now: Instant,
        params: Params,
    ) -> Result<Vec<Change<K, V>>, ParamsError> {
        let mut changes = Vec::new();
        self.set_params_with(now, params, &mut |c| changes.push(c.to_owned()))?;
        Ok(changes)
    }

    /// [`Self::set_params`], each change handed to `out` as it is made
    /// rather than collected.
    pub fn set_params_with(
        &mut self,
        now: Instant,
        params: Params,
        out: &mut dyn FnMut(Change<&K, &V>),
    ) -> Result<(), ParamsError> {
        params.validate()?;
        let now = self.advance(now);
        let mut delta = Delta::new();
        // What the old timers owed by now is owed regardless of the reload.
        self.fire_due(now, &mut delta);
        if self.params.damping != params.damping {
            match (&self.params.damping, &params.damping) {
                (Some(old), Some(new)) => {
                    for history in self.histories.values_mut() {
                        history.rebase(now, old, new);
                    }
                }
                _ => self.histories.clear(),
            }
        }
        self.params = params;
        self.fire_due(now, &mut delta);
        self.finish(now, delta, out);
        Ok(())
    }

    /// A new snapshot from the source at `now`: `present` is the full set it
    /// wants advertised; `absences` gives, when known, why a prefix went
    /// away (a prefix missing from both is `Vanished`; entries for prefixes
    /// in `present` or never seen are ignored). Returns the changes to apply
    /// downstream, in prefix order, at most one per prefix.
    ///
    /// `present` comes in strictly ascending key order, one entry per key
    /// (a `BTreeMap`, or a sorted list), and is taken, not borrowed: the
    /// pass that reads it moves its routes into the table, so a bulk load
    /// never holds the snapshot's routes twice beside the changes it makes
    /// (with 100k VIPs the borrowed map was 4.7 MB of the daemon's peak).
    pub fn update(
        &mut self,
        now: Instant,
        present: impl IntoIterator<Item = (K, V)>,
        absences: &BTreeMap<K, Absence>,
        health: impl Into<Health>,
    ) -> Vec<Change<K, V>> {
        let mut changes = Vec::new();
        self.update_with(now, present, absences, health, &mut |c| {
            changes.push(c.to_owned())
        });
        changes
    }

    /// [`Self::update`], each change handed to `out` as it is made rather
    /// than collected: a bulk load's changes are every route, and a driver
    /// that only logs and counts them need not hold them all at once.
    pub fn update_with(
        &mut self,
        now: Instant,
        present: impl IntoIterator<Item = (K, V)>,
        absences: &BTreeMap<K, Absence>,
        health: impl Into<Health>,
        out: &mut dyn FnMut(Change<&K, &V>),
    ) {
        let unhealthy = health.into().unhealthy;
        let now = self.advance(now);
        let mut delta = Delta::new();
        // Transitions due by now happen first, under the health that held
        // until now: the outcome must not depend on whether the driver
        // polled at the deadline before bringing this snapshot.
        self.fire_due(now, &mut delta);

        let recovered = self.unhealthy.minus(unhealthy);
        if !recovered.is_empty() {
            // Healthy again: the absences of the sources that recovered
            // are measured from now (see module doc).
            for entry in self.entries.values_mut() {
                if let Phase::Absent { attrs, absence } = &mut entry.phase
                    && recovered.contains(attrs.source())
                {
                    absence.clock = now;
                    absence.reason_since = now;
                }
            }
        }
        self.unhealthy = unhealthy;

        if self.entries.is_empty() && self.params.advertise_delay.is_zero() {
            // The first load without an advertise delay: every prefix is
            // due at once, so it goes into the table advertised (what
            // `fire_due` would make of it in this step) and is reported in
            // one reading walk; noting each prefix and retaining the table
            // in `finish` were two more passes over a 100k load.
            self.entries = SortedMap::from_sorted(present.into_iter().map(|(k, attrs)| {
                let phase = Phase::Advertised { attrs };
                (k, Entry { phase })
            }));
            for (key, entry) in &self.entries {
                if let Some(attrs) = entry.wire() {
                    out(Change::Advertise(key, attrs));
                }
            }
            let advertised = self.entries.len();
            self.tally = Tally {
                advertised,
                ..Tally::default()
            };
            self.counters.advertisements += advertised as u64;
            return;
        }
        if self.entries.is_empty() {
            // The first load: every prefix is new, straight into the
            // table.
            self.entries = SortedMap::from_sorted(
                present
                    .into_iter()
                    .map(|(k, attrs)| (k, Entry::pending(attrs, now))),
            );
            self.fire_due(now, &mut delta);
            self.finish(now, delta, out);
            return;
        }
        let mut fresh = Vec::new();
        // One pass over the table and the snapshot together, both in key
        // order (a merge): each present prefix meets its entry, or has
        // none yet (fresh); each entry the snapshot lacks is absent. No
        // lookup per prefix: with 100k VIPs those searches were a fifth of
        // the load's CPU.
        let mut wanted = present.into_iter().peekable();
        let damping = self.params.damping.as_ref();
        for (key, entry) in self.entries.iter_mut() {
            while let Some((k, attrs)) = wanted.next_if(|(k, _)| k < key) {
                fresh.push((k, Entry::pending(attrs, now)));
            }
            if let Some((_, attrs)) = wanted.next_if(|(k, _)| k == key) {
                appear(
                    entry,
                    &self.params,
                    &mut self.counters,
                    unhealthy,
                    now,
                    key,
                    attrs,
                    &self.histories,
                    &mut delta,
                );
                continue;
            }
            let reported = absences.get(key).copied();
            // An unhealthy source's set is not taken as its word on what
            // went: only an absence that does not wait for it (a failed
            // probe) is.
            let source_unhealthy = match &entry.phase {
                Phase::Pending { attrs, .. }
                | Phase::Advertised { attrs }
                | Phase::Absent { attrs, .. } => unhealthy.contains(attrs.source()),
                Phase::Withdrawn => false,
            };
            if source_unhealthy && reported.is_none_or(Absence::waits_for_healthy_source) {
                continue;
            }
            match &mut entry.phase {
                // Never sent, so nothing to hold: coalesced away.
                Phase::Pending { .. } => entry.phase = Phase::Withdrawn,
                Phase::Advertised { attrs } => {
                    let reason = reported.unwrap_or(Absence::Vanished);
                    entry.phase = Phase::Absent {
                        attrs: attrs.clone(),
                        absence: Box::new(AbsenceRecord {
                            reason,
                            since: now,
                            clock: now,
                            reason_since: now,
                        }),
                    };
                    if let (true, Some(damping)) = (reason.damped(), damping) {
                        let history = self
                            .histories
                            .entry(key.clone())
                            .or_insert_with(|| FlapHistory::new(now));
                        if history.penalize(now, damping) {
                            self.counters.suppressions += 1;
                        }
                    }
                }
                Phase::Absent { absence, .. } => {
                    if let Some(reason) = reported
                        && reason != absence.reason
                    {
                        absence.reason = reason;
                        absence.reason_since = now;
                    }
                }
                Phase::Withdrawn => {}
            }
        }
        fresh.extend(wanted.map(|(k, attrs)| (k, Entry::pending(attrs, now))));
        // Prefixes seen for the first time join the table in one merge.
        self.entries.merge(fresh);

        // Immediate transitions of this snapshot: advertise_delay 0,
        // delete_delay 0, local_endpoint_delay 0, Drained, ProbeFailed, a
        // zero hold-down.
        self.fire_due(now, &mut delta);
        self.finish(now, delta, out);
    }

    /// Carries out the transitions due at or before `now`. Call it at
    /// [`Self::next_deadline`].
    pub fn poll(&mut self, now: Instant) -> Vec<Change<K, V>> {
        let mut changes = Vec::new();
        self.poll_with(now, &mut |c| changes.push(c.to_owned()));
        changes
    }

    /// [`Self::poll`], each change handed to `out` as it is made.
    pub fn poll_with(&mut self, now: Instant, out: &mut dyn FnMut(Change<&K, &V>)) {
        let now = self.advance(now);
        let mut delta = Delta::new();
        self.fire_due(now, &mut delta);
        self.finish(now, delta, out);
    }

    /// The earliest instant at which a transition is due, i.e. when `poll`
    /// next has something to do; `None` when nothing is scheduled. Always
    /// later than the last instant passed in. Every deadline changes the
    /// wire (an advertisement or a withdrawal is due then).
    pub fn next_deadline(&self) -> Option<Instant> {
        // Only pending and absent prefixes have a deadline; the tally,
        // current after every call, says whether there are any (a table of
        // advertised routes is not walked to find none).
        let entries = if self.tally.pending + self.tally.absent == 0 {
            None
        } else if self.guard.is_idle() {
            self.entries
                .iter()
                .filter_map(|(k, e)| e.deadline(k, &self.histories, &self.params, self.unhealthy))
                .min()
        } else {
            // A withdrawal the guard holds back is due already; it goes at
            // the guard's pace, not at its own deadline.
            self.entries
                .iter()
                .filter(|(k, _)| !self.guard.holds(k))
                .filter_map(|(k, e)| e.deadline(k, &self.histories, &self.params, self.unhealthy))
                .min()
        };
        match (entries, self.guard.next_release(&self.params.guard)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Prefixes still advertised whose node is drained: the speaker marks
    /// them GRACEFUL_SHUTDOWN until they go (RFC 8326 §3).
    pub fn drained(&self) -> impl Iterator<Item = &K> {
        walked();
        // Drained prefixes are absent ones: with none (the tally says so
        // without a walk), the table is not walked.
        let walk = if self.tally.absent == 0 {
            0
        } else {
            usize::MAX
        };
        self.entries
            .iter()
            .take(walk)
            .filter_map(|(k, e)| match &e.phase {
                Phase::Absent { absence, .. } if absence.reason == Absence::Drained => Some(k),
                _ => None,
            })
    }

    /// Whether the mass-withdrawal guard holds back the withdrawal of `key`.
    pub fn deferred(&self, key: &K) -> bool {
        self.guard.holds(key)
    }

    /// The mass-withdrawal guard's episode, when it holds withdrawals back.
    pub fn guard_view(&self) -> Option<GuardView> {
        self.guard.view(&self.params.guard)
    }

    /// What the routers should currently hold: every advertised prefix and
    /// its attributes, in prefix order. Applying every `Change` returned so
    /// far to an empty table yields exactly this.
    pub fn advertised(&self) -> impl Iterator<Item = (&K, &V)> + Clone {
        walked();
        self.entries
            .iter()
            .filter_map(|(k, e)| e.wire().map(|v| (k, v)))
    }

    /// What the routers hold for `key`, if anything.
    pub fn advertised_route(&self, key: &K) -> Option<&V> {
        self.entries.get(key).and_then(Entry::wire)
    }

    /// Where `key` stands, as of the last instant passed in; `None` if it is
    /// neither present nor advertised.
    pub fn state(&self, key: &K) -> Option<KeyState> {
        self.entries.get(key).and_then(|e| self.key_state(key, e))
    }

    /// [`Self::state`] for every prefix present or advertised, in prefix
    /// order.
    pub fn states(&self) -> impl Iterator<Item = (&K, KeyState)> {
        walked();
        self.entries
            .iter()
            .filter_map(|(k, e)| self.key_state(k, e).map(|s| (k, s)))
    }

    /// The damping figure of merit of `key` as of the last instant passed
    /// in; `None` when damping is off. A prefix without history reads 0.
    pub fn figure_of_merit(&self, key: &K) -> Option<f64> {
        let damping = self.params.damping.as_ref()?;
        let figure = match (self.histories.get(key), self.now) {
            (Some(history), Some(now)) => history.figure_at(now, damping),
            _ => 0.0,
        };
        Some(figure)
    }

    /// How many prefixes [`Self::states`] yields (present or advertised),
    /// without walking them.
    pub fn shown(&self) -> usize {
        self.tally.pending + self.tally.advertised + self.tally.absent
    }

    /// How many prefixes [`Self::advertised`] yields (on the wire now),
    /// without walking them.
    pub fn on_wire(&self) -> usize {
        self.tally.advertised + self.tally.absent
    }

    /// Counters since creation, and the `held_down` gauge. Costs nothing
    /// per prefix.
    pub fn counters(&self) -> Counters {
        Counters {
            held_down: u64::try_from(self.tally.absent).unwrap_or(u64::MAX),
            damped: u64::try_from(self.tally.damped).unwrap_or(u64::MAX),
            withdrawals_deferred: self
                .guard
                .view(&self.params.guard)
                .map_or(0, |v| v.deferred as u64),
            withdrawals_deferred_total: self.guard.deferred_total(),
            ..self.counters
        }
    }

    /// Records `now` as the current instant; time never runs backwards.
    fn advance(&mut self, now: Instant) -> Instant {
        let now = match self.now {
            Some(seen) => seen.max(now),
            None => now,
        };
        self.now = Some(now);
        now
    }

    /// Carries out every transition due at or before `now`. Each prefix has
    /// at most one due: Pending → Advertised, or Absent → Withdrawn. The
    /// withdrawals the mass-withdrawal guard covers go through it.
    fn fire_due(&mut self, now: Instant, delta: &mut Delta<K, V>) {
        let guarded = self.params.guard.enabled() || !self.guard.is_idle();
        let mut on_wire = 0usize;
        let mut guarded_due = Vec::new();
        for (key, entry) in self.entries.iter_mut() {
            let due = entry
                .deadline(key, &self.histories, &self.params, self.unhealthy)
                .is_some_and(|deadline| deadline <= now);
            if guarded && entry.wire().is_some() {
                on_wire += 1;
            }
            if !due {
                continue;
            }
            if guarded
                && let Phase::Absent { absence, .. } = &entry.phase
                && guard::guards(absence.reason)
            {
                guarded_due.push(key.clone());
                continue;
            }
            delta.note(key, entry.wire());
            entry.phase = match std::mem::replace(&mut entry.phase, Phase::Withdrawn) {
                Phase::Pending { attrs, .. } => Phase::Advertised { attrs },
                Phase::Absent { .. } => Phase::Withdrawn,
                other => other,
            };
        }
        if !guarded {
            return;
        }
        for key in self
            .guard
            .step(&self.params.guard, now, guarded_due, on_wire)
        {
            // Only what is still absent: the guard hands back keys it was
            // given as due in this very step.
            if let Some(entry) = self.entries.get_mut(&key)
                && matches!(entry.phase, Phase::Absent { .. })
            {
                delta.note(&key, entry.wire());
                entry.phase = Phase::Withdrawn;
            }
        }
    }

    /// Ends a call: forgets what no longer matters and hands `out` the
    /// call's changes, from the noted wire states, in key order.
    fn finish(&mut self, now: Instant, delta: Delta<K, V>, out: &mut dyn FnMut(Change<&K, &V>)) {
        let damping = self.params.damping.as_ref();
        // The pass that forgets also counts, so the views never walk.
        let mut tally = Tally::default();
        let (mut advertisements, mut withdrawals) = (0u64, 0u64);
        let mut emit = |change: Option<Change<&K, &V>>| match change {
            Some(c @ Change::Advertise(..)) => {
                advertisements += 1;
                out(c);
            }
            Some(c @ Change::Withdraw(_)) => {
                withdrawals += 1;
                out(c);
            }
            None => {}
        };
        // The changes come out of the same pass: the noted prefixes and the
        // table are both in key order, so each note meets its entry as the
        // pass reaches it (no lookup per prefix).
        let (keys, held) = delta.into_sorted();
        let mut held = held.into_iter().peekable();
        let mut next = 0;
        let histories = &self.histories;
        let params = &self.params;
        let mut gone = 0usize;
        self.entries.retain(|key, e| {
            // (A noted prefix without an entry has nothing on the wire.)
            while let Some(k) = keys.get(next)
                && k < key
            {
                let before = held.next_if(|(i, _)| *i == next).map(|(_, v)| v);
                emit(change_of(k, before, None));
                next += 1;
            }
            if keys.get(next) == Some(key) {
                let before = held.next_if(|(i, _)| *i == next).map(|(_, v)| v);
                emit(change_of(key, before, e.wire()));
                next += 1;
            }
            match e.phase {
                Phase::Withdrawn => {
                    let history = histories.get(key);
                    let keep = match (history, damping) {
                        (Some(history), Some(damping)) => !history.is_forgotten(now, damping),
                        _ => false,
                    };
                    if !keep && history.is_some() {
                        gone += 1;
                    }
                    keep
                }
                Phase::Pending { .. } => {
                    tally.pending += 1;
                    true
                }
                Phase::Advertised { .. } => {
                    tally.advertised += 1;
                    true
                }
                Phase::Absent { ref absence, .. } => {
                    tally.absent += 1;
                    if absence
                        .damped_past_own_timer(histories.get(key), params, now)
                        .is_some()
                    {
                        tally.damped += 1;
                    }
                    true
                }
            }
        });
        // Every note was taken from an entry, and entries go only in this
        // pass: each note met its entry.
        debug_assert!(next == keys.len(), "a noted prefix without an entry");
        if gone > 0 {
            // Their histories go with them.
            let entries = &self.entries;
            self.histories.retain(|k, _| entries.contains_key(k));
        }
        self.tally = tally;
        self.counters.advertisements += advertisements;
        self.counters.withdrawals += withdrawals;
    }

    fn key_state(&self, key: &K, entry: &Entry<V>) -> Option<KeyState> {
        let now = self.now?;
        match &entry.phase {
            Phase::Pending { since, .. } => Some(KeyState::PendingAdvertise {
                until: since.checked_add(self.params.advertise_delay),
            }),
            Phase::Advertised { .. } => Some(KeyState::Advertised),
            Phase::Withdrawn => None,
            Phase::Absent { attrs, absence } => {
                let runs = !self.unhealthy.contains(attrs.source())
                    || !absence.reason.waits_for_healthy_source();
                let scheduled = |t: Option<Instant>| if runs { t } else { None };
                let own_end = absence.own_end(&self.params);
                let history = self.histories.get(key);
                let damped = match (history, &self.params.damping) {
                    (Some(history), Some(damping)) => absence
                        .damped_past_own_timer(Some(history), &self.params, now)
                        .map(|end| (end, history.figure_at(now, damping))),
                    _ => None,
                };
                Some(match damped {
                    Some((end, figure_of_merit)) => KeyState::Damped {
                        reason: absence.reason,
                        since: absence.since,
                        figure_of_merit,
                        until_estimate: scheduled(Some(end)),
                    },
                    None if absence.reason == Absence::Vanished => KeyState::HeldDown {
                        since: absence.since,
                        until: scheduled(own_end),
                    },
                    None => KeyState::Draining {
                        reason: absence.reason,
                        since: absence.since,
                        until: scheduled(own_end),
                    },
                })
            }
        }
    }
}

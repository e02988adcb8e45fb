//! What keeps the log readable: its format, and limits on lines a remote
//! party can cause. A peer, a scanner or a client sends as fast as it likes;
//! the log must not grow with it. Everything here but [`allow`] and
//! [`flush`] (which read the clock and hold the process-wide table) is pure
//! and runs on the instants it is given.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::Hash;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// `holdfast run --log-format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// One human-readable line per event (tracing's default format).
    #[default]
    Text,
    /// One JSON object per line (tracing-subscriber's JSON format).
    Json,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            other => Err(format!("{other:?}: expected \"text\" or \"json\"")),
        }
    }
}

/// A token bucket's size and pace, and how many keys are tracked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Lines let through at once from a quiet key.
    pub burst: u32,
    /// One more line is let through per `refill`.
    pub refill: Duration,
    /// Keys tracked at most; a new key beyond this evicts the oldest.
    pub max_keys: usize,
}

/// What to do with one line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Write it; `suppressed` similar lines were dropped before it (since
    /// the last one written or summarised).
    Log { suppressed: u64 },
    /// Drop it (it is counted).
    Suppress,
}

/// A count of dropped lines to report: for `key`, or (`None`) for keys
/// evicted from the table before their count was reported.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary<K> {
    pub key: Option<K>,
    pub suppressed: u64,
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: u32,
    /// Where the next token's `refill` counts from.
    refilled: Instant,
    suppressed: u64,
}

impl Bucket {
    fn refill(&mut self, now: Instant, limits: &Limits) {
        if self.tokens >= limits.burst {
            self.refilled = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.refilled);
        let step = limits.refill.as_nanos().max(1);
        let new = elapsed.as_nanos() / step;
        if new == 0 {
            return;
        }
        let total = u128::from(self.tokens) + new;
        if total >= u128::from(limits.burst) {
            self.tokens = limits.burst;
            self.refilled = now;
        } else {
            self.tokens = total as u32;
            // Keep the remainder: the pace does not drift with the callers'.
            self.refilled += Duration::from_nanos((new * step).min(u128::from(u64::MAX)) as u64);
        }
    }
}

/// A token bucket per key, in a table of bounded size. Keys are evicted
/// oldest first (by when they entered the table), so a party that invents
/// keys (a scan from many addresses) costs at most `max_keys` entries.
#[derive(Debug)]
pub struct RateLimiter<K> {
    limits: Limits,
    buckets: HashMap<K, Bucket>,
    /// Insertion order of `buckets`' keys.
    order: VecDeque<K>,
    /// Suppressed lines of evicted keys, not yet reported.
    evicted: u64,
}

impl<K: Eq + Hash + Clone> RateLimiter<K> {
    pub fn new(limits: Limits) -> Self {
        RateLimiter {
            limits,
            buckets: HashMap::new(),
            order: VecDeque::new(),
            evicted: 0,
        }
    }

    /// Keys in the table.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    fn bucket(&mut self, key: &K, now: Instant) -> &mut Bucket {
        if !self.buckets.contains_key(key) {
            while self.buckets.len() >= self.limits.max_keys.max(1) {
                let Some(old) = self.order.pop_front() else {
                    break;
                };
                if let Some(b) = self.buckets.remove(&old) {
                    self.evicted += b.suppressed;
                }
            }
            self.order.push_back(key.clone());
            self.buckets.insert(
                key.clone(),
                Bucket {
                    tokens: self.limits.burst,
                    refilled: now,
                    suppressed: 0,
                },
            );
        }
        let limits = self.limits;
        let b = self.buckets.get_mut(key).expect("inserted above");
        b.refill(now, &limits);
        b
    }

    /// One line for `key` at `now`: write it if the key has a token.
    pub fn check(&mut self, key: &K, now: Instant) -> Verdict {
        let b = self.bucket(key, now);
        if b.tokens > 0 {
            b.tokens -= 1;
            Verdict::Log {
                suppressed: std::mem::take(&mut b.suppressed),
            }
        } else {
            b.suppressed += 1;
            Verdict::Suppress
        }
    }

    /// Whether any dropped line is not yet reported.
    pub fn has_suppressed(&self) -> bool {
        self.evicted > 0 || self.buckets.values().any(|b| b.suppressed > 0)
    }

    /// Counts a line for `key` as dropped (another limit refused it), and
    /// gives back the token `check` took for it.
    pub fn refund(&mut self, key: &K, suppressed_before: u64, now: Instant) {
        let burst = self.limits.burst;
        let b = self.bucket(key, now);
        b.tokens = (b.tokens + 1).min(burst);
        b.suppressed += suppressed_before + 1;
    }

    /// The counts due for a summary line: each key with dropped lines and a
    /// token to spend on saying so (the summary costs a token like any
    /// line, so a steady flood yields a summary per `refill` at most), and
    /// the evicted keys' total.
    pub fn flush(&mut self, now: Instant) -> Vec<Summary<K>> {
        let limits = self.limits;
        let mut out = Vec::new();
        for key in &self.order {
            let Some(b) = self.buckets.get_mut(key) else {
                continue;
            };
            if b.suppressed == 0 {
                continue;
            }
            b.refill(now, &limits);
            if b.tokens > 0 {
                b.tokens -= 1;
                out.push(Summary {
                    key: Some(key.clone()),
                    suppressed: std::mem::take(&mut b.suppressed),
                });
            }
        }
        if self.evicted > 0 {
            out.push(Summary {
                key: None,
                suppressed: std::mem::take(&mut self.evicted),
            });
        }
        out
    }
}

/// The lines a remote party can cause, each limited on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A connection to the BGP listener from an address that is not a
    /// configured peer.
    NotAPeer,
    /// An UPDATE the peer got wrong (RFC 7606 handling).
    MalformedUpdate,
    /// A ROUTE-REFRESH request answered.
    RouteRefresh,
    /// Trouble with a connection a peer opened.
    Connection,
    /// A NOTIFICATION on a session that stays up (collision resolution).
    Notification,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NotAPeer => "not-a-peer",
            Kind::MalformedUpdate => "malformed-update",
            Kind::RouteRefresh => "route-refresh",
            Kind::Connection => "connection",
            Kind::Notification => "notification",
        }
    }
}

/// Per (kind, source) — the everyday limit — and per kind, a ceiling for
/// a flood spread over many sources. Summaries of what was dropped come at
/// most every `summary_every`, one line per kind.
#[derive(Debug)]
pub struct LogLimiter {
    per_source: RateLimiter<(Kind, String)>,
    per_kind: RateLimiter<Kind>,
    summary_every: Duration,
    last_summary: Option<Instant>,
}

/// Per source: 5 lines at once, then one a minute (a summary included):
/// a flood that lasts an hour costs 65 lines, whatever its rate.
pub const PER_SOURCE: Limits = Limits {
    burst: 5,
    refill: Duration::from_secs(60),
    max_keys: 1024,
};

/// Per kind, over every source: 20 at once, then one per 5 s.
pub const PER_KIND: Limits = Limits {
    burst: 20,
    refill: Duration::from_secs(5),
    max_keys: 16,
};

/// How often the summaries of dropped lines are written at most.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// What was dropped of one kind (`None`: sources evicted from the table,
/// whose kind is not kept) since the last summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FloodSummary {
    pub kind: Option<Kind>,
    pub suppressed: u64,
    /// Sources it came from.
    pub sources: usize,
    /// The source with the most of it.
    pub top: Option<String>,
}

impl LogLimiter {
    pub fn new(per_source: Limits, per_kind: Limits, summary_every: Duration) -> Self {
        LogLimiter {
            per_source: RateLimiter::new(per_source),
            per_kind: RateLimiter::new(per_kind),
            summary_every,
            last_summary: None,
        }
    }

    pub fn check(&mut self, kind: Kind, source: &str, now: Instant) -> Verdict {
        let key = (kind, source.to_owned());
        match self.per_source.check(&key, now) {
            Verdict::Suppress => Verdict::Suppress,
            Verdict::Log { suppressed } => match self.per_kind.check(&kind, now) {
                Verdict::Log { .. } => Verdict::Log { suppressed },
                Verdict::Suppress => {
                    // Counted against the source, and reported with its
                    // next line or summary.
                    self.per_source.refund(&key, suppressed, now);
                    Verdict::Suppress
                }
            },
        }
    }

    /// Whether a summary is still to be written (every dropped line is
    /// counted per source): the daemon flushes only while this holds.
    pub fn pending(&self) -> bool {
        self.per_source.has_suppressed()
    }

    /// The summaries due at `now`, one per kind; nothing if the last ones
    /// were less than `summary_every` ago.
    pub fn flush(&mut self, now: Instant) -> Vec<FloodSummary> {
        if self
            .last_summary
            .is_some_and(|t| now.saturating_duration_since(t) < self.summary_every)
        {
            return Vec::new();
        }
        // Everything per kind is also counted per source.
        let _ = self.per_kind.flush(now);
        let mut by_kind: std::collections::BTreeMap<Option<Kind>, FloodSummary> =
            std::collections::BTreeMap::new();
        let mut top: HashMap<Option<Kind>, u64> = HashMap::new();
        for s in self.per_source.flush(now) {
            let kind = s.key.as_ref().map(|(k, _)| *k);
            let e = by_kind.entry(kind).or_insert(FloodSummary {
                kind,
                suppressed: 0,
                sources: 0,
                top: None,
            });
            e.suppressed += s.suppressed;
            if let Some((_, source)) = s.key {
                e.sources += 1;
                let best = top.entry(kind).or_insert(0);
                if s.suppressed > *best {
                    *best = s.suppressed;
                    e.top = Some(source);
                }
            }
        }
        if !by_kind.is_empty() {
            self.last_summary = Some(now);
        }
        by_kind.into_values().collect()
    }

    /// Sources tracked.
    pub fn sources(&self) -> usize {
        self.per_source.len()
    }
}

fn global() -> &'static Mutex<LogLimiter> {
    static LIMITER: OnceLock<Mutex<LogLimiter>> = OnceLock::new();
    LIMITER.get_or_init(|| Mutex::new(LogLimiter::new(PER_SOURCE, PER_KIND, SUMMARY_EVERY)))
}

/// The note a let-through line carries about the lines dropped before it:
/// nothing, or `" (N similar suppressed)"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Suppressed(pub u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} similar suppressed)"),
        }
    }
}

/// Whether a line of `kind` caused by `source` may be written now (the
/// process-wide table); `Some` carries the count dropped before it.
/// Use it at every log site a remote party can trigger.
pub fn allow(kind: Kind, source: &str) -> Option<Suppressed> {
    let mut l = global().lock().unwrap_or_else(|e| e.into_inner());
    let was_pending = l.pending();
    match l.check(kind, source, Instant::now()) {
        Verdict::Log { suppressed } => Some(Suppressed(suppressed)),
        Verdict::Suppress => {
            if !was_pending {
                // The daemon arms its summary timer only while a summary
                // is pending, and it may be asleep with none armed: the
                // first line dropped wakes it (a later one finds the timer
                // armed).
                SUMMARY_WANTED.notify_one();
            }
            None
        }
    }
}

/// Wakes the daemon's loop when a summary becomes pending.
static SUMMARY_WANTED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// Resolves when a line was dropped while no summary was pending (once
/// per such moment; a moment before the call is kept for it).
pub async fn summary_wanted() {
    SUMMARY_WANTED.notified().await;
}

/// Whether a "suppressed N similar" summary is still to be written.
pub fn pending() -> bool {
    global().lock().unwrap_or_else(|e| e.into_inner()).pending()
}

/// Writes the "suppressed N similar" summaries that are due. The daemon
/// calls it every second while [`pending`] says there is one.
pub fn flush() {
    let due = global()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush(Instant::now());
    for s in due {
        let n = s.suppressed;
        match (s.kind, s.top) {
            (Some(kind), Some(top)) if s.sources == 1 => tracing::warn!(
                kind = %kind.as_str(),
                source = %top,
                suppressed = n,
                "suppressed {n} similar lines"
            ),
            (Some(kind), top) => tracing::warn!(
                kind = %kind.as_str(),
                sources = s.sources,
                most_from = top.as_deref().map(tracing::field::display),
                suppressed = n,
                "suppressed {n} similar lines"
            ),
            (None, _) => tracing::warn!(
                suppressed = n,
                "suppressed {n} similar lines from sources no longer tracked"
            ),
        }
    }
}

/// What to log about a peer that cannot be reached or keeps failing before
/// its session is up: the first failure, then a summary at most every
/// `summary_every` with the count, until the session comes up.
#[derive(Clone, Debug)]
pub struct DownLog {
    summary_every: Duration,
    /// The first failure of this run of failures.
    since: Option<Instant>,
    failures: u64,
    /// When the last line was written.
    last_line: Option<Instant>,
}

/// What [`DownLog::failure`] says to do with one failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DownVerdict {
    /// The first one: write it.
    First,
    /// Write a summary: `failures` so far, the first at `since`.
    Summary { failures: u64, since: Instant },
    /// Only count it.
    Quiet,
}

/// A peer that stays down is summarised this often.
pub const DOWN_SUMMARY_EVERY: Duration = Duration::from_secs(300);

impl DownLog {
    pub fn new(summary_every: Duration) -> Self {
        DownLog {
            summary_every,
            since: None,
            failures: 0,
            last_line: None,
        }
    }

    pub fn failure(&mut self, now: Instant) -> DownVerdict {
        self.failures += 1;
        let (Some(since), Some(last)) = (self.since, self.last_line) else {
            self.since = Some(now);
            self.last_line = Some(now);
            return DownVerdict::First;
        };
        if now.saturating_duration_since(last) >= self.summary_every {
            self.last_line = Some(now);
            DownVerdict::Summary {
                failures: self.failures,
                since,
            }
        } else {
            DownVerdict::Quiet
        }
    }

    /// The session came up: the failures since the last time, and a fresh
    /// start for the next run of them.
    pub fn up(&mut self) -> u64 {
        self.since = None;
        self.last_line = None;
        std::mem::take(&mut self.failures)
    }
}

/// A duration as the config writes it: "30s", "1500ms", "5m".
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) && ms >= 60_000 {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}s", ms / 1000)
    }
}

#[cfg(test)]
mod tests;

/// Why a route is withdrawn, as the stability layer had it just before.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WithdrawCause {
    /// Gone from the source; the hold-down ran out (`damped`: and damping
    /// had kept it longer).
    HeldDown { damped: bool },
    /// Gone for this reason, withdrawn once its delay (if any) passed.
    Absence(crate::model::Absence),
}

impl WithdrawCause {
    /// From where the prefix stood before the withdrawal; `None` if it was
    /// not held (an immediate withdrawal).
    pub fn from_state(state: &crate::stability::KeyState) -> Option<Self> {
        use crate::stability::KeyState;
        match state {
            KeyState::HeldDown { .. } => Some(WithdrawCause::HeldDown { damped: false }),
            KeyState::Damped {
                reason: crate::model::Absence::Vanished,
                ..
            } => Some(WithdrawCause::HeldDown { damped: true }),
            // Damping kept it past its own delay; the reason is what counts.
            KeyState::Damped { reason, .. } => Some(WithdrawCause::Absence(*reason)),
            KeyState::Draining { reason, .. } => Some(WithdrawCause::Absence(*reason)),
            KeyState::Advertised | KeyState::PendingAdvertise { .. } => None,
        }
    }

    /// In words, with the timers as configured: `from_file` for the VIP
    /// file source, else Kubernetes.
    pub fn describe(self, params: &crate::stability::Params, from_file: bool) -> String {
        use crate::model::Absence;
        let gone = if from_file {
            "removed from the VIP file"
        } else {
            "gone from the Service's addresses"
        };
        let hold_down = duration(params.withdraw_hold_down);
        match self {
            WithdrawCause::HeldDown { damped: true } => {
                format!("{gone}, hold-down {hold_down} and damping elapsed")
            }
            WithdrawCause::HeldDown { damped: false }
            | WithdrawCause::Absence(Absence::Vanished) => {
                if params.withdraw_hold_down.is_zero() {
                    format!("{gone}, no hold-down")
                } else {
                    format!("{gone}, hold-down {hold_down} elapsed")
                }
            }
            WithdrawCause::Absence(Absence::Deleted) => {
                let what = if from_file {
                    "removed from the VIP file"
                } else {
                    "the Service was deleted or is no longer selected"
                };
                if params.delete_delay.is_zero() {
                    what.to_owned()
                } else {
                    format!(
                        "{what}, delete_delay {} elapsed",
                        duration(params.delete_delay)
                    )
                }
            }
            WithdrawCause::Absence(Absence::NoLocalEndpoint) => {
                let what = "no ready local endpoint on this node (traffic policy Local)";
                if params.local_endpoint_delay.is_zero() {
                    what.to_owned()
                } else {
                    format!(
                        "{what}, local_endpoint_delay {} elapsed",
                        duration(params.local_endpoint_delay)
                    )
                }
            }
            WithdrawCause::Absence(Absence::Drained) => "this node is drained or excluded".into(),
            WithdrawCause::Absence(Absence::ProbeFailed) => "its probe fails".into(),
        }
    }
}

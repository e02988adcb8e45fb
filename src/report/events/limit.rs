//! Rate limiting of Events, per Service: a token bucket, so a flapping
//! Service cannot flood the API server, and nothing is lost silently.
//!
//! Each Service has `burst` tokens, and gets one back every `refill`. An
//! Event takes a token. Without one, the change waits in the Service's
//! queue, one entry per address holding its latest change; a change that
//! replaces a waiting one is dropped and counted. When tokens come back the
//! queue goes out (in address order), and the first Event carries the count
//! of changes dropped since the last one ("… and 7 more changes
//! suppressed"). So the last Event about each address always tells its
//! final state. Pure: time is passed in.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// How many Events a Service may get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventLimits {
    /// Events a Service may get at once.
    pub burst: u32,
    /// One more Event is allowed per this interval.
    pub refill: Duration,
}

impl Default for EventLimits {
    /// 5 at once, then one every 12 s: at most 10 in the first minute, 5 a
    /// minute after that.
    fn default() -> Self {
        EventLimits {
            burst: 5,
            refill: Duration::from_secs(12),
        }
    }
}

/// One change of one address, to be told in an Event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notice<P> {
    pub address: IpAddr,
    /// What to tell (the change, its peers...).
    pub payload: P,
    /// Changes of this Service dropped before this one.
    pub suppressed: u32,
}

#[derive(Debug)]
struct Bucket<P> {
    tokens: u32,
    /// Tokens are counted as of this instant.
    counted_at: Instant,
    /// The changes waiting, by address; `None` when nothing waits. A
    /// BTreeMap emptied by `pop_first` keeps its node (room for 11 entries
    /// of `P`): on a node whose thousands of Services each just had one
    /// Event, that was most of the source's memory.
    queue: Option<BTreeMap<IpAddr, P>>,
    dropped: u32,
}

/// Token buckets per key (a Service).
#[derive(Debug)]
pub(crate) struct Limiter<K, P> {
    limits: EventLimits,
    buckets: BTreeMap<K, Bucket<P>>,
}

impl<P> Bucket<P> {
    fn refill(&mut self, limits: EventLimits, now: Instant) {
        if self.tokens >= limits.burst || limits.refill.is_zero() {
            self.tokens = limits.burst;
            self.counted_at = now;
            return;
        }
        let elapsed = now.saturating_duration_since(self.counted_at);
        let earned = elapsed.as_nanos() / limits.refill.as_nanos().max(1);
        let earned = u32::try_from(earned).unwrap_or(u32::MAX);
        if earned == 0 {
            return;
        }
        self.tokens = self.tokens.saturating_add(earned).min(limits.burst);
        self.counted_at = if self.tokens == limits.burst {
            now
        } else {
            self.counted_at + limits.refill * earned
        };
    }

    /// Sends what the tokens allow from the queue.
    fn drain(&mut self, out: &mut Vec<Notice<P>>) {
        while self.tokens > 0 {
            let Some((address, payload)) = self.queue.as_mut().and_then(BTreeMap::pop_first) else {
                break;
            };
            self.tokens -= 1;
            out.push(Notice {
                address,
                payload,
                suppressed: std::mem::take(&mut self.dropped),
            });
        }
        if self.queue.as_ref().is_some_and(BTreeMap::is_empty) {
            self.queue = None;
        }
    }

    fn waiting(&self) -> bool {
        self.queue.is_some()
    }
}

impl<K: Ord + Clone, P> Limiter<K, P> {
    pub(crate) fn new(limits: EventLimits) -> Self {
        Limiter {
            limits,
            buckets: BTreeMap::new(),
        }
    }

    /// A change of `address` for `key`: what may be sent now (waiting
    /// changes first, then this one), possibly nothing.
    pub(crate) fn offer(
        &mut self,
        key: &K,
        address: IpAddr,
        payload: P,
        now: Instant,
    ) -> Vec<Notice<P>> {
        let limits = self.limits;
        let bucket = self.buckets.entry(key.clone()).or_insert_with(|| Bucket {
            tokens: limits.burst,
            counted_at: now,
            queue: None,
            dropped: 0,
        });
        bucket.refill(limits, now);
        let queue = bucket.queue.get_or_insert_with(BTreeMap::new);
        if queue.insert(address, payload).is_some() {
            bucket.dropped = bucket.dropped.saturating_add(1);
        }
        let mut out = Vec::new();
        bucket.drain(&mut out);
        out
    }

    /// Waiting changes whose tokens have come back by `now`. Also forgets
    /// Services whose buckets are full again and have nothing waiting.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<Notice<P>> {
        let limits = self.limits;
        let mut out = Vec::new();
        self.buckets.retain(|_, bucket| {
            bucket.refill(limits, now);
            bucket.drain(&mut out);
            bucket.waiting() || bucket.tokens < limits.burst
        });
        out
    }

    /// When [`Limiter::due`] will have something to send.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.buckets
            .values()
            .filter(|b| b.waiting())
            .map(|b| b.counted_at + self.limits.refill)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([198, 51, 100, last])
    }

    const LIMITS: EventLimits = EventLimits {
        burst: 3,
        refill: Duration::from_secs(10),
    };

    #[test]
    fn a_burst_goes_out_then_changes_wait_and_the_latest_per_address_is_told_with_a_count() {
        let t = Instant::now();
        let mut l: Limiter<&str, &str> = Limiter::new(LIMITS);
        for (i, change) in ["up", "down", "up"].into_iter().enumerate() {
            let sent = l.offer(&"web", ip(7), change, t + Duration::from_millis(i as u64));
            assert_eq!(sent.len(), 1, "within the burst");
            assert_eq!(sent[0].suppressed, 0);
        }
        // The fourth to the tenth change: nothing goes out.
        for i in 0..7u64 {
            let change = if i % 2 == 0 { "down" } else { "up" };
            assert!(
                l.offer(&"web", ip(7), change, t + Duration::from_secs(1))
                    .is_empty()
            );
        }
        assert_eq!(l.next_deadline(), Some(t + LIMITS.refill));
        assert!(
            l.due(t + LIMITS.refill - Duration::from_nanos(1))
                .is_empty()
        );
        let sent = l.due(t + LIMITS.refill);
        assert_eq!(
            sent,
            vec![Notice {
                address: ip(7),
                payload: "down",
                suppressed: 6
            }],
            "the final state, with the 6 changes it replaced"
        );
        assert_eq!(l.next_deadline(), None);
    }

    #[test]
    fn services_have_their_own_buckets() {
        let t = Instant::now();
        let mut l: Limiter<&str, &str> = Limiter::new(LIMITS);
        for _ in 0..3 {
            assert_eq!(l.offer(&"web", ip(7), "up", t).len(), 1);
        }
        assert!(l.offer(&"web", ip(7), "down", t).is_empty());
        assert_eq!(l.offer(&"api", ip(8), "up", t).len(), 1);
    }

    #[test]
    fn a_quiet_service_gets_its_full_burst_back_and_is_forgotten() {
        let t = Instant::now();
        let mut l: Limiter<&str, &str> = Limiter::new(LIMITS);
        for _ in 0..3 {
            l.offer(&"web", ip(7), "up", t);
        }
        assert!(l.due(t + LIMITS.refill * 2).is_empty());
        assert_eq!(l.buckets.len(), 1, "one token still missing");
        assert!(l.due(t + LIMITS.refill * 3).is_empty());
        assert!(l.buckets.is_empty(), "full and idle: forgotten");
        let later = t + LIMITS.refill * 3;
        for _ in 0..3 {
            assert_eq!(l.offer(&"web", ip(7), "up", later).len(), 1);
        }
    }

    #[test]
    fn waiting_changes_go_before_a_new_one_and_the_count_is_told_once() {
        let t = Instant::now();
        let mut l: Limiter<&str, &str> = Limiter::new(LIMITS);
        for _ in 0..3 {
            l.offer(&"web", ip(7), "up", t);
        }
        assert!(l.offer(&"web", ip(7), "down", t).is_empty());
        assert!(l.offer(&"web", ip(7), "up", t).is_empty());
        assert!(l.offer(&"web", ip(9), "up", t).is_empty());
        // Two refills later, without a call to due(): a new change of .8
        // sends what waited (in address order) first.
        let sent = l.offer(&"web", ip(8), "up", t + LIMITS.refill * 2);
        assert_eq!(sent.len(), 2);
        assert_eq!(
            (sent[0].address, sent[0].payload, sent[0].suppressed),
            (ip(7), "up", 1)
        );
        assert_eq!((sent[1].address, sent[1].suppressed), (ip(8), 0));
        let sent = l.due(t + LIMITS.refill * 3);
        assert_eq!((sent[0].address, sent[0].suppressed), (ip(9), 0));
    }

    #[test]
    fn a_service_whose_events_all_went_out_keeps_no_queue() {
        let t = Instant::now();
        let mut l: Limiter<&str, &str> = Limiter::new(LIMITS);
        assert_eq!(l.offer(&"web", ip(7), "up", t).len(), 1);
        assert!(
            l.buckets[&"web"].queue.is_none(),
            "an emptied queue is dropped"
        );
        for i in 0..4u64 {
            l.offer(&"web", ip(7), "flap", t + Duration::from_millis(i));
        }
        assert!(l.buckets[&"web"].queue.is_some(), "one change waits");
        assert_eq!(l.due(t + LIMITS.refill).len(), 1);
        assert!(l.buckets[&"web"].queue.is_none());
    }
}

//! The limits on simulated time.

use std::time::{Duration, Instant};

use super::*;

const S: Duration = Duration::from_secs(1);

fn limits(burst: u32, refill: Duration, max_keys: usize) -> Limits {
    Limits {
        burst,
        refill,
        max_keys,
    }
}

fn logged(v: Verdict) -> bool {
    matches!(v, Verdict::Log { .. })
}

#[test]
fn a_flood_from_one_key_lets_the_burst_through_then_one_per_refill() {
    let mut l = RateLimiter::new(limits(5, 10 * S, 16));
    let t0 = Instant::now();
    let key = "192.0.2.9";
    // 5000 lines within 0.8 s.
    let through = (0..5000u64)
        .filter(|i| logged(l.check(&key, t0 + Duration::from_micros(i * 160))))
        .count();
    assert_eq!(through, 5);
    // After one refill period one more goes, carrying the count.
    assert_eq!(l.check(&key, t0 + 9 * S), Verdict::Suppress);
    assert_eq!(
        l.check(&key, t0 + 10 * S),
        Verdict::Log { suppressed: 4996 }
    );
    assert_eq!(l.check(&key, t0 + 11 * S), Verdict::Suppress);
}

#[test]
fn keys_are_limited_apart() {
    let mut l = RateLimiter::new(limits(2, 10 * S, 16));
    let t0 = Instant::now();
    for _ in 0..10 {
        l.check(&"a", t0);
    }
    assert!(logged(l.check(&"b", t0)));
    assert!(logged(l.check(&"b", t0)));
    assert_eq!(l.check(&"b", t0), Verdict::Suppress);
}

#[test]
fn a_quiet_key_gets_its_whole_burst_back_and_no_more() {
    let mut l = RateLimiter::new(limits(3, 10 * S, 16));
    let t0 = Instant::now();
    for _ in 0..3 {
        assert!(logged(l.check(&"a", t0)));
    }
    let later = t0 + 3600 * S;
    let through = (0..10).filter(|_| logged(l.check(&"a", later))).count();
    assert_eq!(through, 3);
}

#[test]
fn the_refill_pace_does_not_drift_with_the_callers() {
    // Drained, then called every 7 s with a 10 s refill: a token per 10 s,
    // not one per 14 s (two calls).
    let mut l = RateLimiter::new(limits(100, 10 * S, 16));
    let t0 = Instant::now();
    let drained = (0..100).filter(|_| logged(l.check(&"a", t0))).count();
    assert_eq!(drained, 100);
    let through = (1..=100u32)
        .filter(|i| logged(l.check(&"a", t0 + 7 * S * *i)))
        .count();
    assert_eq!(through, 70);
}

#[test]
fn the_key_table_is_bounded_and_evicts_the_oldest() {
    let mut l = RateLimiter::new(limits(1, 10 * S, 100));
    let t0 = Instant::now();
    for i in 0..100_000u32 {
        l.check(&i, t0);
        l.check(&i, t0); // one suppressed each
        assert!(l.len() <= 100);
    }
    assert_eq!(l.len(), 100);
    // The newest are kept: 99_999 is still limited, 0 starts afresh.
    assert_eq!(l.check(&99_999, t0), Verdict::Suppress);
    assert!(logged(l.check(&0, t0)));
    // What the evicted keys had suppressed is not lost.
    let summaries = l.flush(t0 + 10 * S);
    let evicted: u64 = summaries
        .iter()
        .filter(|s| s.key.is_none())
        .map(|s| s.suppressed)
        .sum();
    let kept: u64 = summaries
        .iter()
        .filter(|s| s.key.is_some())
        .map(|s| s.suppressed)
        .sum();
    assert_eq!(evicted + kept, 100_000 + 1);
}

#[test]
fn flush_reports_each_count_once_and_spends_a_token() {
    let mut l = RateLimiter::new(limits(2, 10 * S, 16));
    let t0 = Instant::now();
    for _ in 0..12 {
        l.check(&"a", t0);
    }
    // No token yet: nothing due.
    assert_eq!(l.flush(t0 + S), vec![]);
    assert_eq!(
        l.flush(t0 + 10 * S),
        vec![Summary {
            key: Some("a"),
            suppressed: 10
        }]
    );
    assert_eq!(l.flush(t0 + 100 * S), vec![]);
}

#[test]
fn many_sources_are_capped_per_kind() {
    let mut l = LogLimiter::new(limits(5, 10 * S, 1024), limits(20, 5 * S, 16), 10 * S);
    let t0 = Instant::now();
    // A scan: 5000 sources, one connection each, within a second.
    let through = (0..5000u64)
        .filter(|i| {
            logged(l.check(
                Kind::NotAPeer,
                &format!("source-{i}"),
                t0 + Duration::from_micros(i * 200),
            ))
        })
        .count();
    assert_eq!(through, 20);
    assert!(l.sources() <= 1024);
    // Another kind has its own ceiling.
    assert!(logged(l.check(Kind::RouteRefresh, "tor1", t0 + S)));
    // One summary line per kind; every dropped line is in one.
    let summaries = l.flush(t0 + 10 * S);
    assert_eq!(summaries.len(), 2, "{summaries:?}");
    let total: u64 = summaries.iter().map(|s| s.suppressed).sum();
    assert_eq!(total, 5000 - 20);
}

#[test]
fn summaries_come_at_most_every_summary_period() {
    let mut l = LogLimiter::new(limits(1, S, 16), limits(100, S, 16), 10 * S);
    let t0 = Instant::now();
    let mut lines = 0;
    let mut summaries = 0;
    for i in 0..600u32 {
        // Ten a second for a minute.
        let now = t0 + S / 10 * i;
        if logged(l.check(Kind::RouteRefresh, "tor1", now)) {
            lines += 1;
        }
        summaries += l.flush(now).len();
    }
    assert!(summaries <= 7, "{summaries} summaries in 60 s");
    assert!(lines <= 61, "{lines} lines in 60 s");
}

#[test]
fn suppressed_note_is_empty_when_nothing_was_dropped() {
    assert_eq!(Suppressed(0).to_string(), "");
    assert_eq!(Suppressed(7).to_string(), " (7 similar suppressed)");
}

#[test]
fn a_peer_that_stays_down_is_summarised_every_period() {
    let mut d = DownLog::new(300 * S);
    let t0 = Instant::now();
    let mut lines = Vec::new();
    // A retry every 5 s for an hour.
    for i in 0..720u32 {
        let now = t0 + 5 * S * i;
        match d.failure(now) {
            DownVerdict::Quiet => {}
            v => lines.push((i, v)),
        }
    }
    assert_eq!(lines[0], (0, DownVerdict::First));
    assert_eq!(
        lines[1],
        (
            60,
            DownVerdict::Summary {
                failures: 61,
                since: t0
            }
        )
    );
    assert_eq!(lines.len(), 12, "{lines:?}");
    assert_eq!(d.up(), 720);
    // The next run of failures starts with a line of its own.
    assert_eq!(d.failure(t0 + 4000 * S), DownVerdict::First);
}

#[test]
fn log_format_parses() {
    assert_eq!("text".parse::<Format>(), Ok(Format::Text));
    assert_eq!("json".parse::<Format>(), Ok(Format::Json));
    assert!("yaml".parse::<Format>().is_err());
}

#[test]
fn durations_read_like_the_config() {
    assert_eq!(duration(Duration::from_secs(30)), "30s");
    assert_eq!(duration(Duration::from_secs(300)), "5m");
    assert_eq!(duration(Duration::from_millis(1500)), "1500ms");
    assert_eq!(duration(Duration::ZERO), "0s");
}

#[test]
fn withdraw_causes_read_as_the_operator_configured_them() {
    use crate::model::Absence;
    use crate::stability::{KeyState, Params};
    let params = Params {
        withdraw_hold_down: Duration::from_secs(30),
        delete_delay: Duration::from_secs(5),
        ..Params::default()
    };
    let now = Instant::now();
    let held = KeyState::HeldDown {
        since: now,
        until: Some(now),
    };
    let cause = WithdrawCause::from_state(&held).expect("a held prefix has a cause");
    assert_eq!(
        cause.describe(&params, true),
        "removed from the VIP file, hold-down 30s elapsed"
    );
    assert_eq!(
        cause.describe(&params, false),
        "gone from the Service's addresses, hold-down 30s elapsed"
    );
    let damped = KeyState::Damped {
        reason: Absence::Vanished,
        since: now,
        figure_of_merit: 3000.0,
        until_estimate: Some(now),
    };
    assert_eq!(
        WithdrawCause::from_state(&damped)
            .unwrap()
            .describe(&params, true),
        "removed from the VIP file, hold-down 30s and damping elapsed"
    );
    let deleted = KeyState::Draining {
        reason: Absence::Deleted,
        since: now,
        until: Some(now),
    };
    assert_eq!(
        WithdrawCause::from_state(&deleted)
            .unwrap()
            .describe(&params, false),
        "the Service was deleted or is no longer selected, delete_delay 5s elapsed"
    );
    assert_eq!(
        WithdrawCause::Absence(Absence::ProbeFailed).describe(&params, false),
        "its probe fails"
    );
    assert_eq!(
        WithdrawCause::Absence(Absence::Drained).describe(&params, false),
        "this node is drained or excluded"
    );
    assert_eq!(WithdrawCause::from_state(&KeyState::Advertised), None);
}

#[test]
fn a_summary_waits_for_the_summary_period_even_with_tokens_to_spare() {
    let mut l = LogLimiter::new(limits(1, S, 16), limits(100, S, 16), 10 * S);
    let t0 = Instant::now();
    l.check(Kind::RouteRefresh, "tor1", t0);
    assert_eq!(l.check(Kind::RouteRefresh, "tor1", t0), Verdict::Suppress);
    let first = l.flush(t0 + S);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0].suppressed, 1);
    assert_eq!(first[0].top.as_deref(), Some("tor1"));
    assert!(logged(l.check(Kind::RouteRefresh, "tor1", t0 + 2 * S)));
    assert_eq!(
        l.check(Kind::RouteRefresh, "tor1", t0 + 2 * S),
        Verdict::Suppress
    );
    // The source has a token again at 3 s, but the last summary was 2 s ago.
    assert_eq!(l.flush(t0 + 3 * S), vec![]);
    let next = l.flush(t0 + 11 * S);
    assert_eq!(next.len(), 1, "{next:?}");
    assert_eq!(next[0].suppressed, 1);
}

/// The daemon arms its flush timer only while a summary is pending: none
/// before anything is dropped, one from the first line dropped until its
/// summary is written.
#[test]
fn a_summary_is_pending_from_a_dropped_line_until_it_is_written() {
    let mut l = LogLimiter::new(limits(1, S, 16), limits(100, S, 16), 10 * S);
    let t0 = Instant::now();
    assert!(!l.pending(), "nothing dropped yet");
    assert!(logged(l.check(Kind::RouteRefresh, "tor1", t0)));
    assert!(!l.pending(), "a line written is not pending");
    assert_eq!(l.check(Kind::RouteRefresh, "tor1", t0), Verdict::Suppress);
    assert!(l.pending(), "a dropped line is");
    assert_eq!(l.flush(t0 + S).len(), 1);
    assert!(!l.pending(), "its summary was written");
}

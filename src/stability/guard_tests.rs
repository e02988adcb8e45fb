//! The mass-withdrawal guard on simulated time: every instant is
//! `t0 + offset`, nothing sleeps.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use super::*;

const HOLD: Duration = Duration::from_secs(30);
const INTERVAL: Duration = Duration::from_millis(100);

fn params(fraction: f64) -> Params {
    Params {
        withdraw_hold_down: HOLD,
        guard: GuardParams {
            max_withdraw_fraction: fraction,
            withdraw_interval: INTERVAL,
        },
        ..Params::default()
    }
}

/// `n` bulk VIPs, 198.18.0.0 onwards.
fn keys(n: u32) -> Vec<IpNet> {
    (0..n)
        .map(|i| IpNet::from(std::net::IpAddr::V4(Ipv4Addr::from(0xC612_0000 + i))))
        .collect()
}

struct Node {
    s: Stability<IpNet, u32>,
    t0: Instant,
}

impl Node {
    /// A node advertising `n` routes since t0.
    fn with_routes(n: u32, params: Params) -> (Self, Vec<IpNet>) {
        let mut node = Node {
            s: Stability::new(params).expect("valid params"),
            t0: Instant::now(),
        };
        let keys = keys(n);
        let present: BTreeMap<IpNet, u32> = keys.iter().map(|k| (*k, 1)).collect();
        let out = node.s.update(node.t0, present, &BTreeMap::new(), true);
        assert_eq!(out.len(), n as usize);
        (node, keys)
    }

    fn at(&self, offset: Duration) -> Instant {
        self.t0 + offset
    }

    /// The source now has exactly `present`; `reason` for every other key.
    fn source(
        &mut self,
        offset: Duration,
        present: &[IpNet],
        gone: &[IpNet],
        reason: Option<Absence>,
        healthy: bool,
    ) -> Vec<Change<IpNet, u32>> {
        let present: BTreeMap<IpNet, u32> = present.iter().map(|k| (*k, 1)).collect();
        let absences: BTreeMap<IpNet, Absence> = match reason {
            Some(r) => gone.iter().map(|k| (*k, r)).collect(),
            None => BTreeMap::new(),
        };
        let now = self.at(offset);
        self.s.update(now, present, &absences, healthy)
    }

    fn poll(&mut self, offset: Duration) -> Vec<Change<IpNet, u32>> {
        let now = self.at(offset);
        self.s.poll(now)
    }

    fn deadline(&self) -> Option<Duration> {
        self.s.next_deadline().map(|d| d - self.t0)
    }
}

fn withdrawn(changes: &[Change<IpNet, u32>]) -> Vec<IpNet> {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Withdraw(k) => Some(*k),
            Change::Advertise(..) => None,
        })
        .collect()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

#[test]
fn a_node_losing_all_its_routes_withdraws_half_then_the_rest_at_the_rate() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    // An API server answers with an empty list while healthy: every VIP
    // vanishes, and nothing goes during the hold-down.
    assert!(node.source(secs(1), &[], &keys, None, true).is_empty());
    assert_eq!(node.deadline(), Some(secs(31)));

    let first = withdrawn(&node.poll(secs(31)));
    assert_eq!(
        first,
        keys[..50].to_vec(),
        "the first step withdraws the allowed half"
    );
    let c = node.s.counters();
    assert_eq!(c.withdrawals_deferred, 50);
    assert_eq!(c.withdrawals_deferred_total, 50);
    assert_eq!(
        node.s.guard_view(),
        Some(GuardView {
            deferred: 50,
            would_go: 100,
            routes: 100,
            next_release: Some(node.at(secs(31) + INTERVAL)),
        })
    );
    assert!(node.s.deferred(&keys[50]));
    assert!(!node.s.deferred(&keys[49]));

    // Then one every 100 ms, in prefix order, each at its own deadline.
    let mut released = Vec::new();
    for k in 1..=50u32 {
        let due = secs(31) + INTERVAL * k;
        assert_eq!(node.deadline(), Some(due), "release {k}");
        // Just before the deadline nothing goes.
        assert!(node.poll(due - Duration::from_nanos(1)).is_empty());
        let step = withdrawn(&node.poll(due));
        assert_eq!(step.len(), 1, "release {k}");
        released.extend(step);
    }
    assert_eq!(released, keys[50..].to_vec());
    assert_eq!(node.deadline(), None);
    assert_eq!(node.s.guard_view(), None);
    let c = node.s.counters();
    assert_eq!(c.withdrawals_deferred, 0);
    assert_eq!(c.withdrawals_deferred_total, 50);
    assert_eq!(c.withdrawals, 100);
    assert_eq!(node.s.advertised().count(), 0);
}

#[test]
fn a_late_poll_releases_what_the_rate_allows_by_then_and_no_more() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    node.source(secs(1), &[], &keys, Some(Absence::Deleted), true);
    // delete_delay 0: the deletions are due at once; half go.
    assert_eq!(node.s.counters().withdrawals_deferred, 50);
    // Polled 1.05 s late: ten intervals have passed, ten go, not a burst.
    let late = withdrawn(&node.poll(secs(1) + Duration::from_millis(1050)));
    assert_eq!(late, keys[50..60].to_vec());
    assert_eq!(node.deadline(), Some(secs(1) + INTERVAL * 11));
}

#[test]
fn a_small_loss_passes_at_once() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    // Exactly the allowed share (50 of 100) is not a mass withdrawal.
    let out = node.source(
        secs(1),
        &keys[50..],
        &keys[..50],
        Some(Absence::Deleted),
        true,
    );
    assert_eq!(withdrawn(&out), keys[..50].to_vec());
    assert_eq!(node.s.counters().withdrawals_deferred_total, 0);
    assert_eq!(node.s.guard_view(), None);

    // One Service deleted on a node with a single route goes at once too.
    let (mut single, only) = Node::with_routes(1, params(0.5));
    let out = single.source(secs(1), &[], &only, Some(Absence::Deleted), true);
    assert_eq!(withdrawn(&out), only);
    assert_eq!(single.s.counters().withdrawals_deferred_total, 0);
}

#[test]
fn one_more_than_the_share_is_held_back() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    let out = node.source(
        secs(1),
        &keys[51..],
        &keys[..51],
        Some(Absence::Deleted),
        true,
    );
    assert_eq!(withdrawn(&out), keys[..50].to_vec());
    assert_eq!(node.s.counters().withdrawals_deferred, 1);
    assert_eq!(withdrawn(&node.poll(secs(1) + INTERVAL)), vec![keys[50]]);
}

#[test]
fn a_drain_passes_at_once() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    let out = node.source(secs(1), &[], &keys, Some(Absence::Drained), true);
    assert_eq!(withdrawn(&out), keys);
    let c = node.s.counters();
    assert_eq!(c.withdrawals_deferred, 0);
    assert_eq!(c.withdrawals_deferred_total, 0);
}

#[test]
fn failing_probes_pass_at_once() {
    let (mut node, keys) = Node::with_routes(10, params(0.5));
    let out = node.source(secs(1), &[], &keys, Some(Absence::ProbeFailed), true);
    assert_eq!(withdrawn(&out), keys);
}

#[test]
fn a_drain_during_an_episode_takes_the_held_back_routes_at_once() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    node.source(secs(1), &[], &keys, Some(Absence::Deleted), true);
    assert_eq!(node.s.counters().withdrawals_deferred, 50);
    // The node is cordoned: Drained replaces Deleted for what is left.
    let out = node.source(
        secs(1) + Duration::from_millis(10),
        &[],
        &keys,
        Some(Absence::Drained),
        true,
    );
    assert_eq!(withdrawn(&out), keys[50..].to_vec());
    assert_eq!(node.s.counters().withdrawals_deferred, 0);
    assert_eq!(node.deadline(), None);
}

#[test]
fn a_vip_coming_back_while_deferred_costs_nothing() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    node.source(secs(1), &[], &keys, None, true);
    let first = withdrawn(&node.poll(secs(31)));
    assert_eq!(first.len(), 50);
    // The API server serves the full list again before the next release.
    let out = node.source(secs(31) + Duration::from_millis(50), &keys, &[], None, true);
    assert!(
        withdrawn(&out).is_empty(),
        "nothing withdrawn on the way back: {out:?}"
    );
    // Only the 50 that went are advertised again; the 50 held back never
    // left the wire, so nothing at all is sent for them.
    let advertised: Vec<IpNet> = out
        .iter()
        .filter_map(|c| match c {
            Change::Advertise(k, _) => Some(*k),
            Change::Withdraw(_) => None,
        })
        .collect();
    assert_eq!(advertised, keys[..50].to_vec());
    assert_eq!(node.s.counters().withdrawals_deferred, 0);
    assert_eq!(node.s.guard_view(), None);
    assert_eq!(node.s.state(&keys[99]), Some(KeyState::Advertised));
    assert_eq!(node.deadline(), None);
    assert!(node.poll(secs(40)).is_empty());
}

#[test]
fn withdrawals_due_during_an_episode_join_the_queue() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    // 60 deleted: 50 go, 10 held back.
    node.source(
        secs(1),
        &keys[60..],
        &keys[..60],
        Some(Absence::Deleted),
        true,
    );
    assert_eq!(node.s.counters().withdrawals_deferred, 10);
    // One more deleted 50 ms later: a small step, but the guard is still
    // pacing, so it waits its turn.
    let out = node.source(
        secs(1) + Duration::from_millis(50),
        &keys[61..],
        &keys[..61],
        Some(Absence::Deleted),
        true,
    );
    assert!(withdrawn(&out).is_empty());
    let c = node.s.counters();
    assert_eq!(c.withdrawals_deferred, 11);
    assert_eq!(c.withdrawals_deferred_total, 11);
    let mut offset = secs(1);
    let mut released = Vec::new();
    while let Some(due) = node.deadline() {
        assert_eq!(due, offset + INTERVAL);
        offset = due;
        released.extend(withdrawn(&node.poll(due)));
    }
    assert_eq!(released, keys[50..61].to_vec());
}

#[test]
fn an_unhealthy_source_stops_the_releases_and_a_healthy_one_starts_afresh() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    node.source(secs(1), &[], &keys, None, true);
    assert_eq!(withdrawn(&node.poll(secs(31))).len(), 50);
    // The source notices its API is broken: the last known set stands.
    let out = node.source(
        secs(31) + Duration::from_millis(10),
        &[],
        &keys,
        None,
        false,
    );
    assert!(withdrawn(&out).is_empty());
    assert_eq!(node.deadline(), None);
    assert!(node.poll(secs(60)).is_empty());
    assert_eq!(node.s.counters().withdrawals_deferred, 0);
    // Healthy again and still empty: a full hold-down, then the guard
    // judges the step afresh (25 of the 50 left).
    assert!(node.source(secs(70), &[], &keys, None, true).is_empty());
    assert_eq!(node.deadline(), Some(secs(100)));
    assert_eq!(withdrawn(&node.poll(secs(100))), keys[50..75].to_vec());
}

#[test]
fn fraction_one_turns_the_guard_off() {
    let (mut node, keys) = Node::with_routes(100, params(1.0));
    node.source(secs(1), &[], &keys, None, true);
    assert_eq!(withdrawn(&node.poll(secs(31))), keys);
    assert_eq!(node.s.counters().withdrawals_deferred_total, 0);
}

#[test]
fn turning_the_guard_off_by_reload_releases_what_it_held() {
    let (mut node, keys) = Node::with_routes(100, params(0.5));
    node.source(secs(1), &[], &keys, Some(Absence::Deleted), true);
    assert_eq!(node.s.counters().withdrawals_deferred, 50);
    let out = node
        .s
        .set_params(node.at(secs(2) + Duration::from_millis(1)), params(1.0))
        .expect("valid");
    // Released at the old pace up to the reload (10 by 2 s), then the rest.
    assert_eq!(withdrawn(&out), keys[50..].to_vec());
    assert_eq!(node.deadline(), None);
}

#[test]
fn the_guard_params_are_checked() {
    for fraction in [0.0, -0.1, 1.01, f64::NAN] {
        assert!(
            matches!(
                Stability::<IpNet, u32>::new(params(fraction)).err(),
                Some(ParamsError::Fraction { .. })
            ),
            "{fraction}"
        );
    }
    assert!(Stability::<IpNet, u32>::new(params(1.0)).is_ok());
    let zero = Params {
        guard: GuardParams {
            withdraw_interval: Duration::ZERO,
            ..GuardParams::default()
        },
        ..Params::default()
    };
    assert_eq!(
        Stability::<IpNet, u32>::new(zero).err(),
        Some(ParamsError::Zero {
            field: "stability.withdraw_rate"
        })
    );
}

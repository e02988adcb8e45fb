//! Property tests: random snapshots and polls at random times, checked
//! against a plain reference model and against invariants that need no
//! model at all.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

type Key = u8;
type Attrs = u8;

/// One call of the driver. Times move forward in steps of 50 ms so that
/// they often land exactly on a delay or a hold-down.
#[derive(Debug, Clone)]
enum Op {
    Update {
        step: u64,
        present: BTreeMap<Key, Attrs>,
        absences: BTreeMap<Key, Absence>,
        healthy: bool,
    },
    Poll {
        step: u64,
    },
    PollAtDeadline,
}

const STEP: Duration = Duration::from_millis(50);

fn absence() -> impl Strategy<Value = Absence> {
    prop_oneof![
        Just(Absence::Vanished),
        Just(Absence::NoLocalEndpoint),
        Just(Absence::Deleted),
        Just(Absence::Drained),
        Just(Absence::ProbeFailed),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let update = (
        0u64..=12,
        prop::collection::btree_map(0u8..5, 0u8..3, 0..=5),
        prop::collection::btree_map(0u8..5, absence(), 0..=2),
        prop::bool::weighted(0.8),
    )
        .prop_map(|(step, present, absences, healthy)| Op::Update {
            step,
            present,
            absences,
            healthy,
        });
    prop_oneof![
        6 => update,
        2 => (0u64..=30).prop_map(|step| Op::Poll { step }),
        2 => Just(Op::PollAtDeadline),
    ]
}

fn params() -> impl Strategy<Value = Params> {
    (
        prop::sample::select(vec![0u64, 100, 250]),
        prop::sample::select(vec![0u64, 100, 500, 1000]),
        prop::sample::select(vec![0u64, 150]),
        prop::sample::select(vec![0u64, 200]),
    )
        .prop_map(|(advertise, hold, delete, local)| Params {
            advertise_delay: Duration::from_millis(advertise),
            withdraw_hold_down: Duration::from_millis(hold),
            delete_delay: Duration::from_millis(delete),
            local_endpoint_delay: Duration::from_millis(local),
            damping: None,
            graceful_shutdown_wait: Duration::ZERO,
            // The model is of hold-down, delay and damping; the guard's
            // pacing has its own tests (`guard_tests`).
            guard: crate::stability::GuardParams {
                max_withdraw_fraction: 1.0,
                ..Default::default()
            },
        })
}

/// Damping fast enough to matter within a few seconds of simulated time.
fn damping() -> impl Strategy<Value = DampingParams> {
    (
        prop::sample::select(vec![500u64, 2000]),
        prop::sample::select(vec![1000u32, 1500]),
    )
        .prop_map(|(half_life, penalty)| DampingParams {
            half_life: Duration::from_millis(half_life),
            penalty,
            suppress_threshold: 2000,
            reuse_threshold: 750,
            max_suppress: Duration::from_millis(half_life * 4),
        })
}

/// The reference model: the same rules, stated directly, without deadlines,
/// damping, journals or history. Before each input, every transition whose
/// time has come is made.
#[derive(Debug)]
enum Held {
    Pending {
        attrs: Attrs,
        since: Instant,
    },
    Up {
        attrs: Attrs,
    },
    Gone {
        attrs: Attrs,
        reason: Absence,
        clock: Instant,
        reason_since: Instant,
    },
}

struct Model {
    params: Params,
    healthy: bool,
    keys: BTreeMap<Key, Held>,
}

impl Model {
    fn new(params: Params) -> Self {
        Model {
            params,
            healthy: true,
            keys: BTreeMap::new(),
        }
    }

    fn advance(&mut self, t: Instant) {
        let p = &self.params;
        let healthy = self.healthy;
        self.keys.retain(|_, held| match held {
            // An unhealthy source stops every timer but a failed probe's.
            Held::Gone {
                reason,
                clock,
                reason_since,
                ..
            } if healthy || *reason == Absence::ProbeFailed => {
                let withdraw_at = match reason {
                    Absence::Vanished => *clock + p.withdraw_hold_down,
                    Absence::NoLocalEndpoint => *reason_since + p.local_endpoint_delay,
                    Absence::Deleted => *reason_since + p.delete_delay,
                    Absence::Drained | Absence::ProbeFailed => *reason_since,
                };
                t < withdraw_at
            }
            _ => true,
        });
        for held in self.keys.values_mut() {
            if let Held::Pending { attrs, since } = held
                && *since + p.advertise_delay <= t
            {
                *held = Held::Up { attrs: *attrs };
            }
        }
    }

    fn update(
        &mut self,
        t: Instant,
        present: &BTreeMap<Key, Attrs>,
        absences: &BTreeMap<Key, Absence>,
        healthy: bool,
    ) {
        self.advance(t);
        if healthy && !self.healthy {
            for held in self.keys.values_mut() {
                if let Held::Gone {
                    clock,
                    reason_since,
                    ..
                } = held
                {
                    *clock = t;
                    *reason_since = t;
                }
            }
        }
        self.healthy = healthy;
        for (&key, &attrs) in present {
            let next = match self.keys.get(&key) {
                Some(Held::Pending { since, .. }) => Held::Pending {
                    attrs,
                    since: *since,
                },
                Some(Held::Up { .. } | Held::Gone { .. }) => Held::Up { attrs },
                None => Held::Pending { attrs, since: t },
            };
            self.keys.insert(key, next);
        }
        self.keys.retain(|key, held| {
            if present.contains_key(key) {
                return true;
            }
            let reported = absences.get(key).copied();
            // While the source is unhealthy only a failed probe counts
            // as an absence.
            if !healthy && reported != Some(Absence::ProbeFailed) {
                return true;
            }
            match held {
                Held::Pending { .. } => return false,
                Held::Up { attrs } => {
                    *held = Held::Gone {
                        attrs: *attrs,
                        reason: reported.unwrap_or(Absence::Vanished),
                        clock: t,
                        reason_since: t,
                    };
                }
                Held::Gone {
                    reason,
                    reason_since,
                    ..
                } => {
                    if let Some(new) = reported
                        && new != *reason
                    {
                        *reason = new;
                        *reason_since = t;
                    }
                }
            }
            true
        });
        self.advance(t);
    }

    fn advertised(&self) -> BTreeMap<Key, Attrs> {
        self.keys
            .iter()
            .filter_map(|(k, held)| match held {
                Held::Up { attrs } | Held::Gone { attrs, .. } => Some((*k, *attrs)),
                Held::Pending { .. } => None,
            })
            .collect()
    }
}

/// Drives one `Stability` and checks what needs no model: the changes are a
/// consistent delta, withdrawals are never early, and `next_deadline` is
/// exactly the next instant at which something happens.
struct Run {
    s: Stability<Key, Attrs>,
    now: Instant,
    hold_down: Duration,
    /// What the speaker would hold after applying every change.
    downstream: BTreeMap<Key, Attrs>,
    healthy: bool,
    /// Per prefix missing from the latest snapshot: the first snapshot that
    /// missed it.
    missing_since: BTreeMap<Key, Instant>,
    /// Prefixes missing for which a definitive reason was reported.
    definitive: BTreeSet<Key>,
}

impl Run {
    fn new(params: Params, t0: Instant) -> Self {
        Run {
            hold_down: params.withdraw_hold_down,
            s: Stability::new(params).expect("generated params are valid"),
            now: t0,
            downstream: BTreeMap::new(),
            healthy: true,
            missing_since: BTreeMap::new(),
            definitive: BTreeSet::new(),
        }
    }

    fn may_withdraw(&self, key: Key, t: Instant) -> bool {
        self.definitive.contains(&key)
            || self
                .missing_since
                .get(&key)
                .is_some_and(|since| *since + self.hold_down <= t)
    }

    /// The instant `op` happens at.
    fn time_of(&self, op: &Op) -> Instant {
        match op {
            Op::Update { step, .. } | Op::Poll { step } => {
                self.now + STEP * u32::try_from(*step).unwrap_or(0)
            }
            Op::PollAtDeadline => self.s.next_deadline().unwrap_or(self.now),
        }
    }

    fn apply(&mut self, op: &Op, t: Instant) -> Result<(), TestCaseError> {
        let (changes, allowed) = match op {
            Op::Update {
                present,
                absences,
                healthy,
                ..
            } => {
                let before: BTreeSet<Key> = (0..5).filter(|k| self.may_withdraw(*k, t)).collect();
                for key in 0..5u8 {
                    if present.contains_key(&key) {
                        self.missing_since.remove(&key);
                        self.definitive.remove(&key);
                    } else {
                        self.missing_since.entry(key).or_insert(t);
                        if absences.get(&key).is_some_and(|r| *r != Absence::Vanished) {
                            self.definitive.insert(key);
                        }
                    }
                }
                let changes = self.s.update(t, present.clone(), absences, *healthy);
                // A withdrawal that was due before this snapshot, or that
                // this snapshot makes due (a definitive reason).
                let allowed: BTreeSet<Key> = (0..5)
                    .filter(|k| before.contains(k) || self.may_withdraw(*k, t))
                    .collect();
                // Owed withdrawals may still come out of the update that
                // reports the source unhealthy; a poll while it is unhealthy
                // never withdraws.
                self.healthy = *healthy;
                (changes, allowed)
            }
            Op::Poll { .. } | Op::PollAtDeadline => {
                let changes = self.s.poll(t);
                if !self.healthy {
                    prop_assert!(
                        !changes.iter().any(|c| matches!(c, Change::Withdraw(_))),
                        "withdrawal while the source is unhealthy: {changes:?}"
                    );
                }
                let allowed: BTreeSet<Key> = (0..5).filter(|k| self.may_withdraw(*k, t)).collect();
                (changes, allowed)
            }
        };
        self.now = t;

        // The changes are a delta: sorted, one per prefix, never a no-op.
        let keys: Vec<Key> = changes
            .iter()
            .map(|c| match c {
                Change::Advertise(k, _) | Change::Withdraw(k) => *k,
            })
            .collect();
        prop_assert!(keys.windows(2).all(|w| w[0] < w[1]), "order: {changes:?}");
        for change in &changes {
            match change {
                Change::Advertise(k, v) => {
                    prop_assert_ne!(self.downstream.get(k), Some(v), "no-op advertise");
                    self.downstream.insert(*k, *v);
                }
                Change::Withdraw(k) => {
                    prop_assert!(self.downstream.remove(k).is_some(), "withdraw of {}", k);
                    prop_assert!(
                        allowed.contains(k),
                        "withdraw of {} before its hold-down at {:?}",
                        k,
                        t - self.missing_since.get(k).copied().unwrap_or(t)
                    );
                }
            }
        }
        let advertised: BTreeMap<Key, Attrs> = self.s.advertised().map(|(k, v)| (*k, *v)).collect();
        prop_assert_eq!(&advertised, &self.downstream, "delta vs advertised()");
        // The kept counts are what a walk over the table finds.
        prop_assert_eq!(self.s.on_wire(), advertised.len(), "on_wire()");
        prop_assert_eq!(self.s.shown(), self.s.states().count(), "shown()");
        let absent = self
            .s
            .states()
            .filter(|(_, st)| st.absence().is_some())
            .count();
        prop_assert_eq!(self.s.counters().held_down, absent as u64, "held_down");
        let damped = self
            .s
            .states()
            .filter(|(_, st)| matches!(st, KeyState::Damped { .. }))
            .count();
        prop_assert_eq!(self.s.counters().damped, damped as u64, "damped");

        // next_deadline is exactly the next instant with something to do.
        match self.s.next_deadline() {
            Some(deadline) => {
                prop_assert!(deadline > t, "deadline {deadline:?} not after {t:?}");
                let mut early = self.s.clone();
                prop_assert_eq!(early.poll(deadline - Duration::from_nanos(1)), vec![]);
                let mut on_time = self.s.clone();
                prop_assert!(
                    !on_time.poll(deadline).is_empty(),
                    "nothing at the deadline"
                );
                prop_assert!(on_time.next_deadline().is_none_or(|next| next > deadline));
            }
            None => {
                let mut later = self.s.clone();
                prop_assert_eq!(later.poll(t + Duration::from_secs(3600)), vec![]);
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn matches_the_reference_model(
        params in params(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let mut model = Model::new(params.clone());
        let mut run = Run::new(params, Instant::now());
        for op in &ops {
            let t = run.time_of(op);
            run.apply(op, t)?;
            match op {
                Op::Update { present, absences, healthy, .. } => {
                    model.update(t, present, absences, *healthy);
                }
                Op::Poll { .. } | Op::PollAtDeadline => model.advance(t),
            }
            prop_assert_eq!(&run.downstream, &model.advertised(), "after {:?}", op);
        }
    }

    /// Damping keeps routes longer, never shorter: on the same inputs, every
    /// prefix advertised without damping is advertised with it.
    #[test]
    fn damping_only_ever_keeps_more(
        params in params(),
        damping in damping(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        let t0 = Instant::now();
        let mut plain = Run::new(params.clone(), t0);
        let mut damped = Run::new(Params { damping: Some(damping), ..params }, t0);
        for op in &ops {
            // Deadline polls follow the damped instance's deadlines, so that
            // its episodes' ends are hit exactly.
            let t = damped.time_of(op);
            plain.apply(op, t)?;
            damped.apply(op, t)?;
            let missing: Vec<&Key> = plain
                .downstream
                .keys()
                .filter(|k| !damped.downstream.contains_key(k))
                .collect();
            prop_assert!(missing.is_empty(), "damping withdrew {:?} earlier, after {:?}", missing, op);
        }
    }
}

//! Scenario tests on simulated time: every instant is `t0 + offset`, nothing
//! sleeps.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use super::*;

type Attrs = &'static str;

const VIP: &str = "198.51.100.10/32";
const VIP2: &str = "203.0.113.7/32";
const VIP6: &str = "2001:db8::10/128";

fn vip(s: &str) -> IpNet {
    s.parse().expect("test VIP parses")
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn hold(hold_down: Duration) -> Params {
    Params {
        withdraw_hold_down: hold_down,
        ..Params::default()
    }
}

/// half-life 10 s, penalty 1000, suppress 2000, reuse 750, max 60 s.
fn damping() -> DampingParams {
    DampingParams {
        half_life: secs(10),
        penalty: 1000,
        suppress_threshold: 2000,
        reuse_threshold: 750,
        max_suppress: secs(60),
    }
}

fn damped(hold_down: Duration, damping: DampingParams) -> Params {
    Params {
        withdraw_hold_down: hold_down,
        damping: Some(damping),
        ..Params::default()
    }
}

/// A driver on simulated time: instants are offsets from `t0`.
struct Lab {
    s: Stability<IpNet, Attrs>,
    t0: Instant,
    present: BTreeMap<IpNet, Attrs>,
}

impl Lab {
    fn new(params: Params) -> Self {
        Lab {
            s: Stability::new(params).expect("test params are valid"),
            t0: Instant::now(),
            present: BTreeMap::new(),
        }
    }

    fn at(&self, offset: Duration) -> Instant {
        self.t0 + offset
    }

    /// The source now has `vip` with `attrs`.
    fn show(&mut self, offset: Duration, key: &str, attrs: Attrs) -> Vec<Change<IpNet, Attrs>> {
        self.present.insert(vip(key), attrs);
        self.push(offset, &BTreeMap::new(), true)
    }

    /// The source lost `vip`, with a reason or none.
    fn lose(
        &mut self,
        offset: Duration,
        key: &str,
        reason: Option<Absence>,
    ) -> Vec<Change<IpNet, Attrs>> {
        self.present.remove(&vip(key));
        let absences = reason.map(|r| (vip(key), r)).into_iter().collect();
        self.push(offset, &absences, true)
    }

    fn push(
        &mut self,
        offset: Duration,
        absences: &BTreeMap<IpNet, Absence>,
        healthy: bool,
    ) -> Vec<Change<IpNet, Attrs>> {
        let now = self.at(offset);
        let present = self.present.clone();
        self.s.update(now, present, absences, healthy)
    }

    fn poll(&mut self, offset: Duration) -> Vec<Change<IpNet, Attrs>> {
        let now = self.at(offset);
        self.s.poll(now)
    }

    fn deadline(&self) -> Option<Duration> {
        self.s.next_deadline().map(|d| d - self.t0)
    }

    fn state(&self, key: &str) -> Option<KeyState> {
        self.s.state(&vip(key))
    }
}

fn adv(key: &str, attrs: Attrs) -> Change<IpNet, Attrs> {
    Change::Advertise(vip(key), attrs)
}

fn wd(key: &str) -> Change<IpNet, Attrs> {
    Change::Withdraw(vip(key))
}

/// VIP's figure of merit (NaN without damping, so that any comparison fails).
fn fom(lab: &Lab) -> f64 {
    lab.s.figure_of_merit(&vip(VIP)).unwrap_or(f64::NAN)
}

fn assert_close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-6 * expected.abs().max(1.0),
        "figure of merit {actual} != expected {expected}"
    );
}

fn assert_instant_close(actual: Instant, expected: Instant) {
    let gap = if actual > expected {
        actual - expected
    } else {
        expected - actual
    };
    assert!(
        gap <= Duration::from_micros(1),
        "{actual:?} is {gap:?} from {expected:?}"
    );
}

// ---- appearance and the hold-down ----

#[test]
fn new_prefix_is_advertised_in_the_same_step() {
    let mut lab = Lab::new(Params::default());
    assert_eq!(lab.show(ms(0), VIP, "public"), vec![adv(VIP, "public")]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    assert_eq!(lab.deadline(), None);
    let advertised: Vec<_> = lab.s.advertised().collect();
    assert_eq!(advertised, vec![(&vip(VIP), &"public")]);
}

#[test]
fn flap_inside_the_window_sends_nothing() {
    let mut lab = Lab::new(hold(secs(30)));
    assert_eq!(lab.show(ms(0), VIP, "public"), vec![adv(VIP, "public")]);
    assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::HeldDown {
            since: lab.at(secs(1)),
            until: Some(lab.at(secs(31))),
        })
    );
    assert_eq!(lab.deadline(), Some(secs(31)));
    assert_eq!(lab.s.counters().held_down, 1);
    assert_eq!(lab.show(secs(2), VIP, "public"), vec![]);
    assert_eq!(lab.deadline(), None);
    assert_eq!(lab.poll(secs(100)), vec![]);
    let c = lab.s.counters();
    assert_eq!(
        (
            c.advertisements,
            c.withdrawals,
            c.absorbed_by_hold_down,
            c.held_down
        ),
        (1, 0, 1, 0)
    );
}

#[test]
fn absent_exactly_the_hold_down_is_withdrawn_at_that_instant() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(10), VIP, None);
    assert_eq!(
        lab.poll(secs(40) - ms(1)),
        vec![],
        "1 ms before the boundary"
    );
    assert_eq!(lab.poll(secs(40)), vec![wd(VIP)], "exactly at the boundary");
    assert_eq!(lab.state(VIP), None);
    assert_eq!(lab.s.advertised().count(), 0);
    assert_eq!(lab.deadline(), None);
}

#[test]
fn back_one_ms_before_the_boundary_sends_nothing_ever() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(10), VIP, None);
    assert_eq!(lab.show(secs(40) - ms(1), VIP, "public"), vec![]);
    assert_eq!(lab.poll(secs(40)), vec![]);
    assert_eq!(lab.poll(secs(1000)), vec![]);
    assert_eq!(lab.s.counters().withdrawals, 0);
    assert_eq!(lab.s.counters().absorbed_by_hold_down, 1);
}

#[test]
fn back_one_ms_after_the_boundary_was_withdrawn_and_is_advertised_again() {
    // A driver that polls at the deadline sees the withdrawal, then the
    // re-advertisement.
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(10), VIP, None);
    assert_eq!(lab.deadline(), Some(secs(40)));
    assert_eq!(lab.poll(secs(40)), vec![wd(VIP)]);
    assert_eq!(
        lab.show(secs(40) + ms(1), VIP, "public"),
        vec![adv(VIP, "public")]
    );
    let c = lab.s.counters();
    assert_eq!(
        (c.advertisements, c.withdrawals, c.absorbed_by_hold_down),
        (2, 1, 0)
    );
}

#[test]
fn back_at_or_after_the_boundary_without_a_poll_nets_out() {
    // Without the poll, the update first carries out the withdrawal that was
    // due, then the reappearance: the call's net change is nothing (same
    // attributes) or one Advertise (new attributes), never a withdrawal.
    for late in [ms(0), ms(1)] {
        let mut lab = Lab::new(hold(secs(30)));
        lab.show(ms(0), VIP, "public");
        lab.lose(secs(10), VIP, None);
        assert_eq!(
            lab.show(secs(40) + late, VIP, "public"),
            vec![],
            "late by {late:?}"
        );
        assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
        assert_eq!(
            lab.show(secs(41), VIP, "private"),
            vec![adv(VIP, "private")]
        );
    }
    // With an advertise_delay, the reappearance is a new prefix, so the
    // withdrawal stands and the advertisement waits for the delay.
    let mut lab = Lab::new(Params {
        advertise_delay: secs(1),
        ..hold(secs(30))
    });
    lab.show(ms(0), VIP, "public");
    lab.poll(secs(1));
    lab.lose(secs(10), VIP, None);
    assert_eq!(lab.show(secs(40), VIP, "public"), vec![wd(VIP)]);
    assert_eq!(lab.poll(secs(41)), vec![adv(VIP, "public")]);
}

#[test]
fn thousand_flaps_every_100ms_cost_one_advertisement() {
    let mut lab = Lab::new(hold(secs(2)));
    let mut sent = lab.show(ms(0), VIP, "public");
    for i in 1..=1000u64 {
        // Absent for 50 ms out of every 100 ms, with a driver that polls at
        // every deadline it is given.
        for (offset, present) in [(ms(i * 100), false), (ms(i * 100 + 50), true)] {
            while let Some(deadline) = lab.deadline().filter(|d| *d <= offset) {
                sent.extend(lab.poll(deadline));
                assert_ne!(
                    lab.deadline(),
                    Some(deadline),
                    "no progress at the deadline"
                );
            }
            sent.extend(if present {
                lab.show(offset, VIP, "public")
            } else {
                lab.lose(offset, VIP, None)
            });
        }
    }
    assert_eq!(sent, vec![adv(VIP, "public")]);
    let c = lab.s.counters();
    assert_eq!(
        (c.advertisements, c.withdrawals, c.absorbed_by_hold_down),
        (1, 0, 1000)
    );
    // Then it goes for good: one withdrawal, 2 s later.
    let end = ms(100_100);
    assert_eq!(lab.lose(end, VIP, None), vec![]);
    assert_eq!(lab.deadline(), Some(end + secs(2)));
    assert_eq!(lab.poll(end + secs(2)), vec![wd(VIP)]);
}

#[test]
fn zero_hold_down_withdraws_in_the_same_step() {
    let mut lab = Lab::new(hold(Duration::ZERO));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(ms(5), VIP, None), vec![wd(VIP)]);
}

#[test]
fn withdrawn_prefix_that_returns_is_advertised_again() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(1), VIP, None);
    assert_eq!(lab.poll(secs(31)), vec![wd(VIP)]);
    assert_eq!(lab.show(secs(60), VIP, "public"), vec![adv(VIP, "public")]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    // And the next vanish is held down afresh.
    assert_eq!(lab.lose(secs(70), VIP, None), vec![]);
    assert_eq!(lab.deadline(), Some(secs(100)));
}

// ---- advertise_delay ----

#[test]
fn appear_and_vanish_within_the_advertise_delay_sends_nothing() {
    let mut lab = Lab::new(Params {
        advertise_delay: ms(500),
        ..Params::default()
    });
    assert_eq!(lab.show(ms(0), VIP, "public"), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::PendingAdvertise {
            until: Some(lab.at(ms(500)))
        })
    );
    assert_eq!(lab.deadline(), Some(ms(500)));
    assert_eq!(lab.lose(ms(200), VIP, None), vec![]);
    assert_eq!(lab.state(VIP), None);
    assert_eq!(lab.deadline(), None);
    assert_eq!(lab.poll(secs(5)), vec![]);
    assert_eq!(lab.s.counters(), Counters::default());
}

#[test]
fn advertise_delay_runs_from_first_appearance_and_sends_the_latest_attributes() {
    let mut lab = Lab::new(Params {
        advertise_delay: ms(500),
        ..Params::default()
    });
    assert_eq!(lab.show(ms(0), VIP, "public"), vec![]);
    assert_eq!(lab.show(ms(300), VIP, "private"), vec![]);
    assert_eq!(lab.poll(ms(499)), vec![]);
    assert_eq!(lab.poll(ms(500)), vec![adv(VIP, "private")]);
    // A reappearance after a coalesced vanish starts the delay again.
    let mut lab = Lab::new(Params {
        advertise_delay: ms(500),
        ..Params::default()
    });
    lab.show(ms(0), VIP, "public");
    lab.lose(ms(100), VIP, None);
    assert_eq!(lab.show(ms(200), VIP, "public"), vec![]);
    assert_eq!(lab.poll(ms(500)), vec![]);
    assert_eq!(lab.poll(ms(700)), vec![adv(VIP, "public")]);
}

// ---- attributes ----

#[test]
fn attribute_change_is_one_advertise_never_a_withdraw() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.show(secs(1), VIP, "private"), vec![adv(VIP, "private")]);
    assert_eq!(lab.show(secs(2), VIP, "private"), vec![]);
    let c = lab.s.counters();
    assert_eq!((c.advertisements, c.withdrawals), (2, 0));
}

#[test]
fn held_down_prefix_back_with_new_attributes_is_readvertised_with_them() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
    assert_eq!(lab.show(secs(2), VIP, "private"), vec![adv(VIP, "private")]);
    let advertised: Vec<_> = lab.s.advertised().collect();
    assert_eq!(advertised, vec![(&vip(VIP), &"private")]);
    assert_eq!(lab.s.counters().withdrawals, 0);
}

// ---- absence reasons ----

#[test]
fn deleted_with_no_delay_is_withdrawn_at_once() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(
        lab.lose(secs(1), VIP, Some(Absence::Deleted)),
        vec![wd(VIP)]
    );
    assert_eq!(lab.state(VIP), None);
}

#[test]
fn deleted_with_a_delay_drains_then_withdraws() {
    let mut lab = Lab::new(Params {
        delete_delay: secs(5),
        ..hold(secs(30))
    });
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(secs(1), VIP, Some(Absence::Deleted)), vec![]);
    let draining = KeyState::Draining {
        reason: Absence::Deleted,
        since: lab.at(secs(1)),
        until: Some(lab.at(secs(6))),
    };
    assert_eq!(lab.state(VIP), Some(draining.clone()));
    assert_eq!(draining.absence(), Some(Absence::Deleted));
    // The reason is sticky: later snapshots need not repeat it.
    assert_eq!(lab.push(secs(2), &BTreeMap::new(), true), vec![]);
    assert_eq!(lab.state(VIP), Some(draining));
    assert_eq!(lab.poll(secs(6) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(6)), vec![wd(VIP)]);
}

#[test]
fn drained_and_probe_failed_withdraw_at_once() {
    for reason in [Absence::Drained, Absence::ProbeFailed] {
        let mut lab = Lab::new(damped(secs(30), damping()));
        lab.show(ms(0), VIP, "public");
        assert_eq!(
            lab.lose(secs(1), VIP, Some(reason)),
            vec![wd(VIP)],
            "{reason:?}"
        );
    }
}

#[test]
fn a_definitive_reason_for_a_held_down_prefix_withdraws_it() {
    for reason in [Absence::Deleted, Absence::Drained, Absence::ProbeFailed] {
        let mut lab = Lab::new(hold(secs(30)));
        lab.show(ms(0), VIP, "public");
        assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
        let absences = BTreeMap::from([(vip(VIP), reason)]);
        assert_eq!(
            lab.push(secs(5), &absences, true),
            vec![wd(VIP)],
            "{reason:?}"
        );
    }
}

#[test]
fn present_wins_over_a_reported_absence() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    let absences = BTreeMap::from([(vip(VIP), Absence::Drained), (vip(VIP2), Absence::Deleted)]);
    assert_eq!(lab.push(secs(1), &absences, true), vec![]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    assert_eq!(
        lab.state(VIP2),
        None,
        "an absence of a prefix never seen is ignored"
    );
}

fn local_delay(hold_down: Duration, delay: Duration) -> Params {
    Params {
        local_endpoint_delay: delay,
        ..hold(hold_down)
    }
}

#[test]
fn no_local_endpoint_is_withdrawn_at_once_by_default_whatever_the_hold_down() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(
        lab.lose(secs(1), VIP, Some(Absence::NoLocalEndpoint)),
        vec![wd(VIP)]
    );
    assert_eq!(lab.state(VIP), None);
    assert_eq!(lab.s.counters().withdrawals, 1);
}

#[test]
fn local_endpoint_delay_holds_exactly_that_long_and_a_return_inside_costs_nothing() {
    let mut lab = Lab::new(local_delay(secs(30), secs(5)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(
        lab.lose(secs(1), VIP, Some(Absence::NoLocalEndpoint)),
        vec![]
    );
    let draining = KeyState::Draining {
        reason: Absence::NoLocalEndpoint,
        since: lab.at(secs(1)),
        until: Some(lab.at(secs(6))),
    };
    assert_eq!(lab.state(VIP), Some(draining.clone()));
    assert_eq!(draining.absence(), Some(Absence::NoLocalEndpoint));
    assert_eq!(lab.deadline(), Some(secs(6)));
    // Sticky: later snapshots need not repeat the reason.
    assert_eq!(lab.push(secs(2), &BTreeMap::new(), true), vec![]);
    assert_eq!(lab.poll(secs(6) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(6)), vec![wd(VIP)]);

    // The endpoint ready again inside the delay: nothing was ever sent.
    let mut lab = Lab::new(local_delay(secs(30), secs(5)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(
        lab.lose(secs(1), VIP, Some(Absence::NoLocalEndpoint)),
        vec![]
    );
    assert_eq!(lab.show(secs(6) - ms(1), VIP, "public"), vec![]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    assert_eq!(lab.s.counters().absorbed_by_hold_down, 1);
    assert_eq!(lab.s.counters().withdrawals, 0);
}

#[test]
fn an_emptied_address_list_still_gets_the_hold_down_not_the_local_endpoint_delay() {
    let mut lab = Lab::new(local_delay(secs(30), secs(2)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::HeldDown {
            since: lab.at(secs(1)),
            until: Some(lab.at(secs(31))),
        })
    );
    assert_eq!(lab.poll(secs(3)), vec![]);
    assert_eq!(lab.poll(secs(31) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(31)), vec![wd(VIP)]);
}

#[test]
fn a_held_down_prefix_whose_last_local_endpoint_then_goes_is_withdrawn_after_the_delay() {
    let mut lab = Lab::new(local_delay(secs(30), secs(2)));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
    let absences = BTreeMap::from([(vip(VIP), Absence::NoLocalEndpoint)]);
    assert_eq!(lab.push(secs(5), &absences, true), vec![]);
    assert_eq!(
        lab.deadline(),
        Some(secs(7)),
        "the delay runs from the reason"
    );
    assert_eq!(lab.poll(secs(7)), vec![wd(VIP)]);
}

#[test]
fn an_endpoint_whose_readiness_flaps_is_damped_and_stays_advertised() {
    let mut lab = Lab::new(Params {
        local_endpoint_delay: Duration::ZERO,
        ..damped(secs(30), damping())
    });
    lab.show(ms(0), VIP, "public");
    let lost = Some(Absence::NoLocalEndpoint);
    // Below the suppress threshold each loss withdraws at once (1000, then
    // 1000·2^-0.1 + 1000 = 1933.0)...
    for i in 1..=2u64 {
        assert_eq!(lab.lose(secs(i), VIP, lost), vec![wd(VIP)], "loss {i}");
        assert_eq!(
            lab.show(secs(i) + ms(500), VIP, "public"),
            vec![adv(VIP, "public")]
        );
    }
    // ...the third crosses it (1933.0·2^-0.1 + 1000 = 2803.6): damped,
    // still advertised, until the figure decays to 750.
    assert_eq!(lab.lose(secs(3), VIP, lost), vec![]);
    assert_close(fom(&lab), 2803.5835548329314);
    assert_eq!(lab.s.counters().suppressions, 1);
    let reuse_at = lab.at(secs(3)) + Duration::from_secs_f64(19.023095661748542);
    let Some(KeyState::Damped {
        reason,
        until_estimate: Some(until),
        ..
    }) = lab.state(VIP)
    else {
        panic!("expected Damped, got {:?}", lab.state(VIP));
    };
    assert_eq!(reason, Absence::NoLocalEndpoint);
    assert_instant_close(until, reuse_at);
    assert_eq!(lab.poll(secs(20)), vec![]);
    assert_eq!(lab.s.poll(until - ms(1)), vec![]);
    assert_eq!(lab.s.poll(until), vec![wd(VIP)]);
}

#[test]
fn without_damping_a_flapping_endpoint_is_withdrawn_each_time() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    for i in 1..=5u64 {
        assert_eq!(
            lab.lose(secs(i), VIP, Some(Absence::NoLocalEndpoint)),
            vec![wd(VIP)],
            "loss {i}"
        );
        lab.show(secs(i) + ms(500), VIP, "public");
    }
}

// ---- source health ----

#[test]
fn unhealthy_source_never_withdraws_and_measures_absence_from_recovery() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    // The source breaks and reports an empty set: the last known set stands.
    lab.present.clear();
    assert_eq!(lab.push(secs(1), &BTreeMap::new(), false), vec![]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    assert_eq!(lab.deadline(), None);
    assert_eq!(lab.poll(secs(600)), vec![]);
    // Whatever reason it claims.
    let drained = BTreeMap::from([(vip(VIP), Absence::Drained)]);
    assert_eq!(lab.push(secs(601), &drained, false), vec![]);
    assert_eq!(lab.s.advertised().count(), 1);
    // Healthy again at 660 s and the VIP is still missing: held down from
    // then on.
    assert_eq!(lab.push(secs(660), &BTreeMap::new(), true), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::HeldDown {
            since: lab.at(secs(660)),
            until: Some(lab.at(secs(690))),
        })
    );
    assert_eq!(lab.poll(secs(690) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(690)), vec![wd(VIP)]);
}

#[test]
fn unhealthy_source_freezes_a_running_hold_down_and_recovery_restarts_it() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(10), VIP, None);
    assert_eq!(lab.push(secs(35), &BTreeMap::new(), false), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::HeldDown {
            since: lab.at(secs(10)),
            until: None,
        })
    );
    assert_eq!(lab.deadline(), None);
    assert_eq!(lab.poll(secs(300)), vec![]);
    // 25 s of the hold-down had run; after recovery a full 30 s runs again.
    assert_eq!(lab.push(secs(300), &BTreeMap::new(), true), vec![]);
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::HeldDown {
            since: lab.at(secs(10)),
            until: Some(lab.at(secs(330))),
        })
    );
    assert_eq!(lab.poll(secs(330) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(330)), vec![wd(VIP)]);
}

#[test]
fn unhealthy_source_still_adds_and_changes_and_absorbs() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(1), VIP, None);
    lab.present.insert(vip(VIP6), "public");
    lab.present.insert(vip(VIP), "private");
    assert_eq!(
        lab.push(secs(2), &BTreeMap::new(), false),
        vec![adv(VIP, "private"), adv(VIP6, "public")]
    );
    assert_eq!(lab.s.counters().absorbed_by_hold_down, 1);
}

#[test]
fn a_withdrawal_due_before_the_source_failed_still_happens() {
    // The hold-down ran out at 40 s; the snapshot that says "unhealthy"
    // arrives at 41 s, without a poll in between. The withdrawal was owed
    // while the source was healthy.
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(10), VIP, None);
    assert_eq!(lab.push(secs(41), &BTreeMap::new(), false), vec![wd(VIP)]);
}

#[test]
fn a_failed_probe_withdraws_while_the_source_is_unhealthy() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    lab.show(ms(0), VIP6, "public");
    // VIP2 vanished while the source was healthy: held down.
    lab.lose(secs(5), VIP2, None);
    // The source breaks (the last known set stands) and, in the same
    // snapshot, VIP's probe fails: a fact about this node's datapath,
    // not the source's word, so it goes at once.
    lab.present.remove(&vip(VIP));
    lab.present.remove(&vip(VIP6));
    let probe_failed = BTreeMap::from([(vip(VIP), Absence::ProbeFailed)]);
    assert_eq!(lab.push(secs(10), &probe_failed, false), vec![wd(VIP)]);
    assert_eq!(lab.state(VIP), None);
    // VIP6, missing from the unhealthy snapshot without a failed probe,
    // stands; VIP2's hold-down stays frozen.
    assert_eq!(lab.state(VIP6), Some(KeyState::Advertised));
    assert_eq!(lab.deadline(), None);
    // A held-down VIP whose probe then fails goes at once too.
    let probe_failed = BTreeMap::from([(vip(VIP2), Absence::ProbeFailed)]);
    assert_eq!(lab.push(secs(11), &probe_failed, false), vec![wd(VIP2)]);
    // Any other reason still waits for a healthy source.
    let deleted = BTreeMap::from([(vip(VIP6), Absence::Deleted)]);
    assert_eq!(lab.push(secs(12), &deleted, false), vec![]);
    assert_eq!(lab.state(VIP6), Some(KeyState::Advertised));
    assert_eq!(lab.poll(secs(600)), vec![]);
}

// ---- damping ----

#[test]
fn figure_of_merit_follows_rfc_2439_decay() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.s.figure_of_merit(&vip(VIP)), Some(0.0));
    lab.lose(secs(10), VIP, None);
    assert_close(fom(&lab), 1000.0);
    lab.show(secs(11), VIP, "public");
    // One half-life later: 1000 / 2 = 500, plus the new penalty.
    lab.lose(secs(20), VIP, None);
    assert_close(fom(&lab), 1500.0);
    lab.show(secs(21), VIP, "public");
    lab.lose(secs(30), VIP, None);
    assert_close(fom(&lab), 1750.0);
    // Decay alone: two half-lives later a quarter is left.
    lab.show(secs(31), VIP, "public");
    lab.poll(secs(50));
    assert_close(fom(&lab), 437.5);
    // 1750 · 2^-2.3 = 355.2: below half the reuse threshold (375), the
    // history is forgotten.
    lab.poll(secs(53));
    assert_eq!(lab.s.figure_of_merit(&vip(VIP)), Some(0.0));
    assert_eq!(lab.s.counters().suppressions, 0, "never above 2000");
    assert_eq!(Lab::new(hold(secs(2))).s.figure_of_merit(&vip(VIP)), None);
}

/// Absences at 1 s, 2 s and 3 s (back 0.5 s after each): the figure is
/// 1000, then 1000·2^-0.1 + 1000 = 1933.03…, then 2803.58… > 2000.
fn three_quick_absences(lab: &mut Lab) {
    lab.show(ms(0), VIP, "public");
    for i in 1..=3u64 {
        assert_eq!(lab.lose(secs(i), VIP, None), vec![]);
        if i < 3 {
            assert_eq!(lab.show(secs(i) + ms(500), VIP, "public"), vec![]);
        }
    }
}

#[test]
fn crossing_the_suppress_threshold_damps_until_reuse() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    three_quick_absences(&mut lab);
    let figure = fom(&lab);
    assert_close(figure, 2803.5835548329314);
    assert_eq!(lab.s.counters().suppressions, 1);
    // Damped until the figure decays to 750: 10 s · log2(2803.58 / 750)
    // = 19.0231 s after the penalty.
    let reuse_at = lab.at(secs(3)) + Duration::from_secs_f64(19.023095661748542);
    let Some(KeyState::Damped {
        reason: Absence::Vanished,
        since,
        figure_of_merit,
        until_estimate: Some(until),
    }) = lab.state(VIP)
    else {
        panic!("expected Damped, got {:?}", lab.state(VIP));
    };
    assert_eq!(since, lab.at(secs(3)));
    assert_close(figure_of_merit, 2803.5835548329314);
    assert_instant_close(until, reuse_at);
    assert_eq!(lab.s.next_deadline(), Some(until));
    // Inside its own hold-down (2 s, from 3 s) the prefix shows as damped
    // already: the episode ends later. The gauge counts it without a walk.
    assert_eq!(lab.s.counters().damped, 1);
    // The hold-down passes: still advertised.
    assert_eq!(lab.poll(secs(5)), vec![]);
    assert_eq!(lab.poll(secs(20)), vec![]);
    assert_eq!(lab.s.counters().damped, 1);
    assert_eq!(lab.s.poll(until - ms(1)), vec![]);
    assert_eq!(lab.s.poll(until), vec![wd(VIP)]);
    assert_eq!(lab.s.counters().withdrawals, 1);
    assert_eq!(lab.s.counters().damped, 0);
}

#[test]
fn below_the_suppress_threshold_the_hold_down_alone_decides() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(1), VIP, None);
    lab.show(secs(1) + ms(500), VIP, "public");
    lab.lose(secs(2), VIP, None);
    assert_close(fom(&lab), 1933.0329915368075);
    assert!(matches!(lab.state(VIP), Some(KeyState::HeldDown { .. })));
    assert_eq!(lab.poll(secs(4) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(4)), vec![wd(VIP)]);
}

#[test]
fn damping_has_hysteresis_between_reuse_and_suppress() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    three_quick_absences(&mut lab);
    lab.show(secs(4), VIP, "public");
    // At 18 s the figure is 2803.58·2^-1.5 + 1000 = 1991.2 < 2000, but the
    // episode (until 22.02 s) is in force, so it goes on: damped until
    // 18 s + 10 s · log2(1991.2 / 750) = 32.087 s.
    assert_eq!(lab.lose(secs(18), VIP, None), vec![]);
    assert_close(fom(&lab), 1991.2164716227264);
    let Some(KeyState::Damped {
        until_estimate: Some(until),
        ..
    }) = lab.state(VIP)
    else {
        panic!("expected Damped, got {:?}", lab.state(VIP));
    };
    assert_instant_close(until, lab.at(Duration::from_secs_f64(32.086_875_689_360_9)));
    assert_eq!(lab.s.counters().suppressions, 1, "the same episode");
    assert_eq!(lab.poll(secs(32)), vec![]);
    assert_eq!(lab.s.poll(until), vec![wd(VIP)]);
}

#[test]
fn absence_carried_by_damping_is_counted_as_absorbed_by_damping() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    three_quick_absences(&mut lab);
    // Back at 10 s: 7 s absent, past the 2 s hold-down.
    assert_eq!(lab.show(secs(10), VIP, "public"), vec![]);
    let c = lab.s.counters();
    assert_eq!((c.absorbed_by_hold_down, c.absorbed_by_damping), (2, 1));
    assert_eq!(c.withdrawals, 0);
}

#[test]
fn max_suppress_bounds_an_episode_from_its_start() {
    // half-life 10 s, max_suppress 30 s: ceiling 750 · 2^3 = 6000.
    let params = DampingParams {
        max_suppress: secs(30),
        ..damping()
    };
    let mut lab = Lab::new(damped(secs(2), params));
    lab.show(ms(0), VIP, "public");
    // An absence every second from 1 s; the episode begins at 3 s.
    for i in 1..=27u64 {
        assert_eq!(lab.lose(secs(i), VIP, None), vec![]);
        let figure = fom(&lab);
        assert!(figure <= 6000.0 + 1e-9, "figure {figure} above the ceiling");
        if i >= 8 {
            assert_close(figure, 6000.0);
        }
        if i < 27 {
            lab.show(secs(i) + ms(500), VIP, "public");
        }
    }
    assert_eq!(lab.s.counters().suppressions, 1);
    // Left alone at 6000 the figure would take 30 s from 27 s to reach
    // reuse; the episode began at 3 s, so it ends at 33 s.
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::Damped {
            reason: Absence::Vanished,
            since: lab.at(secs(27)),
            figure_of_merit: 6000.0,
            until_estimate: Some(lab.at(secs(33))),
        })
    );
    assert_eq!(lab.poll(secs(33) - ms(1)), vec![]);
    assert_eq!(lab.poll(secs(33)), vec![wd(VIP)]);
    // The ceiling lowered the figure to the reuse threshold at 33 s.
    assert_close(fom(&lab), 750.0);
    // So a later episode needs a fresh crossing: back at 40 s, gone at 41 s
    // (750·2^-0.8 + 1000 = 1430.8 < 2000): held down only.
    assert_eq!(lab.show(secs(40), VIP, "public"), vec![adv(VIP, "public")]);
    assert_eq!(lab.lose(secs(41), VIP, None), vec![]);
    assert_close(fom(&lab), 1430.761883123888);
    assert!(matches!(lab.state(VIP), Some(KeyState::HeldDown { .. })));
    assert_eq!(lab.poll(secs(43)), vec![wd(VIP)]);
}

#[test]
fn damping_history_survives_a_withdrawal() {
    // Absences longer than the hold-down: each is withdrawn, but the figure
    // keeps counting, so the third one is damped.
    let mut lab = Lab::new(damped(secs(2), damping()));
    lab.show(ms(0), VIP, "public");
    for start in [0u64, 4, 8] {
        assert_eq!(lab.lose(secs(start + 1), VIP, None), vec![]);
        if start < 8 {
            assert_eq!(lab.poll(secs(start + 3)), vec![wd(VIP)]);
            assert_eq!(
                lab.show(secs(start + 4), VIP, "public"),
                vec![adv(VIP, "public")]
            );
        }
    }
    // Absences 4 s apart: 1000, 1000·2^-0.4 + 1000 = 1757.9, then
    // 1757.9·2^-0.4 + 1000 = 2332.3 > 2000.
    assert_eq!(lab.s.counters().suppressions, 1);
    assert!(matches!(lab.state(VIP), Some(KeyState::Damped { .. })));
    assert_eq!(lab.poll(secs(11)), vec![]);
}

#[test]
fn damping_does_not_hold_definitive_absences() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    three_quick_absences(&mut lab);
    let drained = BTreeMap::from([(vip(VIP), Absence::Drained)]);
    assert_eq!(lab.push(secs(4), &drained, true), vec![wd(VIP)]);
}

// ---- config reload ----

#[test]
fn reload_with_the_same_params_changes_nothing() {
    let mut lab = Lab::new(damped(secs(30), damping()));
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    lab.lose(secs(1), VIP, None);
    assert_eq!(lab.poll(secs(2)), vec![]);
    let before = (lab.deadline(), lab.s.figure_of_merit(&vip(VIP)));
    let reload = lab
        .s
        .set_params(lab.at(secs(2)), damped(secs(30), damping()));
    assert_eq!(reload, Ok(vec![]));
    assert_eq!((lab.deadline(), lab.s.figure_of_merit(&vip(VIP))), before);
}

#[test]
fn reload_re_evaluates_the_hold_down() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    lab.lose(secs(1), VIP, None);
    lab.lose(secs(8), VIP2, None);
    // Longer: nothing sent, deadline moves.
    assert_eq!(
        lab.s.set_params(lab.at(secs(9)), hold(secs(60))),
        Ok(vec![])
    );
    assert_eq!(lab.deadline(), Some(secs(61)));
    // Shorter: VIP (absent 9 s) is past a 5 s hold-down, VIP2 (1 s) is not.
    assert_eq!(
        lab.s.set_params(lab.at(secs(9)), hold(secs(5))),
        Ok(vec![wd(VIP)])
    );
    assert_eq!(lab.deadline(), Some(secs(13)));
    assert_eq!(lab.s.counters().advertisements, 2);
}

#[test]
fn reload_turning_damping_off_ends_episodes() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    three_quick_absences(&mut lab);
    assert_eq!(lab.poll(secs(10)), vec![]);
    assert_eq!(
        lab.s.set_params(lab.at(secs(11)), hold(secs(2))),
        Ok(vec![wd(VIP)])
    );
    assert_eq!(lab.s.figure_of_merit(&vip(VIP)), None);
}

#[test]
fn invalid_reload_is_refused_and_changes_nothing() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(ms(0), VIP, "public");
    lab.lose(secs(1), VIP, None);
    let bad = Params {
        withdraw_hold_down: MAX_TIMER + secs(1),
        ..Params::default()
    };
    let err = lab.s.set_params(lab.at(secs(2)), bad);
    assert!(matches!(
        err,
        Err(ParamsError::TooLong {
            field: "stability.withdraw_hold_down",
            ..
        })
    ));
    assert_eq!(lab.s.params(), &hold(secs(30)));
    assert_eq!(lab.deadline(), Some(secs(31)));
}

#[test]
fn invalid_params_get_clear_errors() {
    let with = |d: DampingParams| Params {
        damping: Some(d),
        ..Params::default()
    };
    let cases: Vec<(Params, &str)> = vec![
        (
            Params {
                advertise_delay: MAX_TIMER + ms(1),
                ..Params::default()
            },
            "stability.advertise_delay",
        ),
        (
            with(DampingParams {
                half_life: Duration::ZERO,
                ..damping()
            }),
            "stability.damping.half_life must be greater than zero",
        ),
        (
            with(DampingParams {
                penalty: 0,
                ..damping()
            }),
            "stability.damping.penalty must be greater than zero",
        ),
        (
            with(DampingParams {
                reuse_threshold: 2000,
                ..damping()
            }),
            "reuse_threshold (2000) must be below",
        ),
        (
            // 750 · 2^(10 s / 10 s) = 1500: never above 2000.
            with(DampingParams {
                max_suppress: secs(10),
                ..damping()
            }),
            "= 1500",
        ),
        (
            with(DampingParams {
                half_life: Duration::from_nanos(1),
                ..damping()
            }),
            "must be finite",
        ),
    ];
    for (params, message) in cases {
        let err = match Stability::<IpNet, Attrs>::new(params.clone()) {
            Ok(_) => panic!("{params:?} accepted"),
            Err(err) => err,
        };
        assert!(err.to_string().contains(message), "{err} lacks {message:?}");
    }
    assert!(Params::default().validate().is_ok());
    assert!(DampingParams::default().validate().is_ok());
}

// ---- time, order, views ----

#[test]
fn time_never_runs_backwards() {
    let mut lab = Lab::new(hold(secs(30)));
    lab.show(secs(10), VIP, "public");
    lab.lose(secs(20), VIP, None);
    // An earlier instant is taken as the latest seen: no panic, no output,
    // and the absence is not shortened.
    assert_eq!(lab.poll(secs(5)), vec![]);
    assert_eq!(lab.lose(secs(1), VIP2, None), vec![]);
    assert_eq!(lab.deadline(), Some(secs(50)));
}

#[test]
fn output_is_in_prefix_order_one_change_per_prefix() {
    // All three at once would be a mass withdrawal: the guard (its own
    // tests in guard_tests) is off here.
    let mut lab = Lab::new(Params {
        guard: GuardParams {
            max_withdraw_fraction: 1.0,
            ..GuardParams::default()
        },
        ..hold(secs(1))
    });
    lab.present = BTreeMap::from([
        (vip(VIP6), "public"),
        (vip(VIP2), "public"),
        (vip(VIP), "public"),
    ]);
    assert_eq!(
        lab.push(ms(0), &BTreeMap::new(), true),
        vec![adv(VIP, "public"), adv(VIP2, "public"), adv(VIP6, "public")]
    );
    lab.present.clear();
    lab.push(ms(10), &BTreeMap::new(), true);
    assert_eq!(lab.deadline(), Some(ms(1010)));
    assert_eq!(lab.poll(secs(5)), vec![wd(VIP), wd(VIP2), wd(VIP6)]);
}

#[test]
fn next_deadline_is_the_earliest_across_prefixes() {
    let mut lab = Lab::new(Params {
        advertise_delay: secs(3),
        delete_delay: secs(7),
        ..hold(secs(10))
    });
    lab.show(ms(0), VIP, "public");
    lab.poll(secs(3));
    lab.show(secs(3), VIP2, "public");
    lab.lose(secs(4), VIP, None);
    assert_eq!(lab.deadline(), Some(secs(6)), "VIP2's advertise_delay");
    lab.poll(secs(6));
    assert_eq!(lab.deadline(), Some(secs(14)), "VIP's hold-down");
    lab.lose(secs(5 + 1), VIP2, Some(Absence::Deleted));
    assert_eq!(lab.deadline(), Some(secs(13)), "VIP2's delete_delay");
}

#[test]
fn states_list_every_prefix_present_or_advertised() {
    let mut lab = Lab::new(Params {
        advertise_delay: secs(1),
        delete_delay: secs(5),
        ..hold(secs(30))
    });
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    lab.poll(secs(1));
    lab.show(ms(2500), VIP6, "public");
    lab.lose(secs(3), VIP, None);
    lab.lose(secs(3), VIP2, Some(Absence::Deleted));
    let states: Vec<_> = lab.s.states().map(|(k, s)| (*k, s)).collect();
    assert_eq!(
        states,
        vec![
            (
                vip(VIP),
                KeyState::HeldDown {
                    since: lab.at(secs(3)),
                    until: Some(lab.at(secs(33)))
                }
            ),
            (
                vip(VIP2),
                KeyState::Draining {
                    reason: Absence::Deleted,
                    since: lab.at(secs(3)),
                    until: Some(lab.at(secs(8)))
                }
            ),
            (
                vip(VIP6),
                KeyState::PendingAdvertise {
                    until: Some(lab.at(ms(3500)))
                }
            ),
        ]
    );
    assert_eq!(lab.s.counters().held_down, 2);
    assert_eq!(KeyState::Advertised.absence(), None);
}

#[test]
fn a_drained_node_keeps_its_routes_for_the_graceful_shutdown_wait() {
    let mut lab = Lab::new(Params {
        graceful_shutdown_wait: secs(15),
        ..Params::default()
    });
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    // Cordoned at 1 s: still advertised (the speaker marks them
    // GRACEFUL_SHUTDOWN), withdrawn 15 s later, no hold-down on top.
    lab.present.clear();
    let drained = BTreeMap::from([(vip(VIP), Absence::Drained), (vip(VIP2), Absence::Drained)]);
    assert_eq!(lab.push(secs(1), &drained, true), vec![]);
    assert_eq!(
        lab.s.drained().copied().collect::<Vec<_>>(),
        vec![vip(VIP), vip(VIP2)]
    );
    assert_eq!(
        lab.state(VIP),
        Some(KeyState::Draining {
            reason: Absence::Drained,
            since: lab.at(secs(1)),
            until: Some(lab.at(secs(16))),
        })
    );
    assert_eq!(lab.deadline(), Some(secs(16)));
    assert_eq!(lab.poll(secs(16) - ms(1)), vec![]);
    // Both at once: a drain is not slowed by the mass-withdrawal guard.
    assert_eq!(lab.poll(secs(16)), vec![wd(VIP), wd(VIP2)]);
    assert_eq!(lab.s.drained().count(), 0);
}

#[test]
fn an_uncordoned_node_keeps_its_routes_without_an_update() {
    let mut lab = Lab::new(Params {
        graceful_shutdown_wait: secs(15),
        ..Params::default()
    });
    lab.show(ms(0), VIP, "public");
    assert_eq!(lab.lose(secs(1), VIP, Some(Absence::Drained)), vec![]);
    // Uncordoned inside the wait: nothing was withdrawn, nothing is sent.
    assert_eq!(lab.show(secs(5), VIP, "public"), vec![]);
    assert_eq!(lab.state(VIP), Some(KeyState::Advertised));
    assert_eq!(lab.s.drained().count(), 0);
}

/// A bulk load costs its routes no copy in this layer: the present set's
/// attributes move into the table, a new prefix is noted by its key alone
/// (nothing was on the wire), and `update_with` hands the changes out by
/// reference. Only what was on the wire before a change is kept (cloned)
/// for the call.
#[test]
fn a_bulk_load_copies_no_attributes() {
    use std::cell::Cell;
    thread_local! {
        static CLONES: Cell<usize> = const { Cell::new(0) };
    }
    #[derive(Debug, PartialEq, Eq)]
    struct Counted(u32);
    impl crate::stability::Sourced for Counted {}
    impl Clone for Counted {
        fn clone(&self) -> Self {
            CLONES.with(|c| c.set(c.get() + 1));
            Counted(self.0)
        }
    }
    let key = |i: u32| -> ipnet::IpNet {
        format!("198.18.{}.{}/32", i / 256, i % 256)
            .parse()
            .unwrap()
    };
    let mut s: Stability<ipnet::IpNet, Counted> = Stability::new(Params::default()).unwrap();
    let t0 = Instant::now();
    let present = |version: fn(u32) -> u32| -> BTreeMap<ipnet::IpNet, Counted> {
        (0..1000u32)
            .map(|i| (key(i), Counted(version(i))))
            .collect()
    };
    let run = |s: &mut Stability<ipnet::IpNet, Counted>, p, at| {
        CLONES.with(|c| c.set(0));
        let mut advertised = 0;
        s.update_with(at, p, &BTreeMap::new(), true, &mut |c| {
            assert!(matches!(c, Change::Advertise(..)), "{c:?}");
            advertised += 1;
        });
        (advertised, CLONES.with(Cell::get))
    };
    assert_eq!(run(&mut s, present(|_| 0), t0), (1000, 0), "the first load");
    assert_eq!(
        run(&mut s, present(|_| 0), t0 + ms(1)),
        (0, 0),
        "the same set"
    );
    // Ten routes with new attributes: what was on the wire for them is
    // kept for the call (to tell a change from none), nothing else.
    assert_eq!(
        run(&mut s, present(|i| u32::from(i < 10)), t0 + ms(2)),
        (10, 10),
        "ten changed"
    );
}

/// An entry of the table is held per prefix (100k of them with a 100k VIP
/// file): its size is a budget.
#[test]
fn an_entry_of_the_table_stays_small() {
    let size = std::mem::size_of::<Entry<crate::model::Route>>();
    assert!(size <= 24, "{size}");
    let pair = std::mem::size_of::<(IpNet, Entry<crate::model::Route>)>();
    assert!(pair <= 48, "{pair}");
}

/// A damping history outlives the withdrawal of its prefix, and goes with
/// the prefix once it is forgotten: neither stays behind.
#[test]
fn a_withdrawn_prefix_and_its_history_go_once_the_history_is_forgotten() {
    let mut lab = Lab::new(damped(secs(2), damping()));
    lab.show(ms(0), VIP, "public");
    lab.show(ms(0), VIP2, "public");
    assert_eq!(lab.lose(secs(1), VIP, None), vec![]);
    assert_eq!(lab.poll(secs(3)), vec![wd(VIP)]);
    assert_eq!(
        lab.s.histories.len(),
        1,
        "the history outlives the withdrawal"
    );
    assert_close(fom(&lab), 1000.0 * 2f64.powf(-0.2));
    // 1000 · 2^-1.9 = 268 at 20 s: below half the reuse threshold (375).
    assert_eq!(lab.poll(secs(20)), vec![]);
    assert!(lab.s.histories.is_empty(), "{:?}", lab.s.histories);
    assert_eq!(lab.s.entries.len(), 1, "only the present prefix is left");
    assert!(lab.state(VIP).is_none());
    assert_eq!(lab.state(VIP2), Some(KeyState::Advertised));
}

// ---- several sources ----

/// A route from source `id` (the attributes are the source here).
fn from_source(id: u8) -> crate::model::Route {
    crate::model::Route::new(Default::default(), None, None).from_source(crate::model::SourceId(id))
}

#[test]
fn an_unhealthy_source_keeps_its_routes_while_a_healthy_one_is_followed() {
    use crate::model::{Route, SourceId, SourceSet};
    let t0 = Instant::now();
    let mut s: Stability<IpNet, Route> = Stability::new(hold(secs(30))).unwrap();
    let (file, kube) = (from_source(0), from_source(1));
    let both = BTreeMap::from([(vip(VIP), file.clone()), (vip(VIP2), kube.clone())]);
    let none = BTreeMap::new();
    assert_eq!(s.update(t0, both.clone(), &none, SourceSet::NONE).len(), 2);
    // The Kubernetes source (1) breaks and its snapshot lacks VIP2; the
    // file (0), healthy, drops VIP: only VIP is held down.
    let mut kube_down = SourceSet::NONE;
    kube_down.insert(SourceId(1));
    assert_eq!(s.update(t0 + secs(1), [], &none, kube_down), vec![]);
    assert!(matches!(
        s.state(&vip(VIP)),
        Some(KeyState::HeldDown { .. })
    ));
    assert_eq!(s.state(&vip(VIP2)), Some(KeyState::Advertised));
    // The file's hold-down runs out and VIP goes; VIP2 stands however long
    // the outage lasts.
    assert_eq!(s.next_deadline(), Some(t0 + secs(31)));
    assert_eq!(s.poll(t0 + secs(31)), vec![Change::Withdraw(vip(VIP))]);
    assert_eq!(s.poll(t0 + secs(600)), vec![]);
    assert_eq!(s.state(&vip(VIP2)), Some(KeyState::Advertised));
    // Even a Deleted from the broken source waits for it.
    let deleted = BTreeMap::from([(vip(VIP2), Absence::Deleted)]);
    assert_eq!(s.update(t0 + secs(601), [], &deleted, kube_down), vec![]);
    // Healthy again without VIP2: its absence counts from now.
    assert_eq!(s.update(t0 + secs(700), [], &none, SourceSet::NONE), vec![]);
    assert!(matches!(
        s.state(&vip(VIP2)),
        Some(KeyState::HeldDown { .. })
    ));
    assert_eq!(s.poll(t0 + secs(729)), vec![]);
    assert_eq!(s.poll(t0 + secs(730)), vec![Change::Withdraw(vip(VIP2))]);
}

#[test]
fn a_source_recovering_restarts_only_its_own_hold_downs() {
    use crate::model::{Route, SourceId, SourceSet};
    let t0 = Instant::now();
    let mut s: Stability<IpNet, Route> = Stability::new(hold(secs(30))).unwrap();
    let both = BTreeMap::from([(vip(VIP), from_source(0)), (vip(VIP2), from_source(1))]);
    let none = BTreeMap::new();
    s.update(t0, both, &none, SourceSet::NONE);
    // Both VIPs vanish while both sources are healthy: two hold-downs.
    assert_eq!(s.update(t0 + secs(1), [], &none, SourceSet::NONE), vec![]);
    // Source 1 breaks at 10 s and recovers at 20 s: its VIP2's hold-down
    // stood still and starts again at 20 s; VIP's (source 0) runs on.
    let mut one_down = SourceSet::NONE;
    one_down.insert(SourceId(1));
    assert_eq!(s.update(t0 + secs(10), [], &none, one_down), vec![]);
    assert_eq!(s.update(t0 + secs(20), [], &none, SourceSet::NONE), vec![]);
    assert_eq!(s.poll(t0 + secs(31)), vec![Change::Withdraw(vip(VIP))]);
    assert_eq!(s.poll(t0 + secs(49)), vec![]);
    assert_eq!(s.poll(t0 + secs(50)), vec![Change::Withdraw(vip(VIP2))]);
}

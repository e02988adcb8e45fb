//! The reconcile decisions on simulated time.

use std::net::IpAddr;
use std::sync::Arc;

use super::*;
use crate::model::{Route, Vip, VipMap, set_differences};
use crate::speaker::{PeerTable, RouteAttrs};

fn p(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn attrs(community: u32) -> Arc<RouteAttrs> {
    Arc::new(RouteAttrs {
        communities: vec![community],
        ..RouteAttrs::default()
    })
}

fn table(routes: &[(&str, u32)]) -> PeerTable {
    routes.iter().map(|(s, c)| (p(s), attrs(*c))).collect()
}

const SETTLE: Duration = Duration::from_secs(2);
const OLD: Duration = Duration::from_secs(10);

#[test]
fn nothing_when_the_adj_rib_out_is_the_desired_table() {
    let t = table(&[("198.51.100.10/32", 1), ("2001:db8::10/128", 1)]);
    assert_eq!(
        check_peer(&t, &t.clone(), true, OLD, SETTLE),
        PeerCheck::InSync
    );
    assert_eq!(
        check_peer(&PeerTable::new(), &PeerTable::new(), true, OLD, SETTLE),
        PeerCheck::InSync
    );
}

#[test]
fn a_missing_route_is_sent_again() {
    let desired = table(&[("198.51.100.10/32", 1), ("198.51.100.11/32", 1)]);
    let advertised = table(&[("198.51.100.10/32", 1)]);
    assert_eq!(
        check_peer(&desired, &advertised, true, OLD, SETTLE),
        PeerCheck::Repair(Repair {
            announce: vec![p("198.51.100.11/32")],
            withdraw: vec![],
        })
    );
}

#[test]
fn an_extra_route_is_withdrawn() {
    let desired = table(&[("198.51.100.11/32", 1)]);
    let advertised = table(&[
        ("198.51.100.10/32", 1),
        ("198.51.100.11/32", 1),
        ("203.0.113.1/32", 1),
    ]);
    assert_eq!(
        check_peer(&desired, &advertised, true, OLD, SETTLE),
        PeerCheck::Repair(Repair {
            announce: vec![],
            withdraw: vec![p("198.51.100.10/32"), p("203.0.113.1/32")],
        })
    );
}

#[test]
fn a_route_with_other_attributes_is_sent_again() {
    let desired = table(&[("198.51.100.10/32", 2)]);
    let advertised = table(&[("198.51.100.10/32", 1)]);
    let PeerCheck::Repair(r) = check_peer(&desired, &advertised, true, OLD, SETTLE) else {
        panic!("a difference in attributes is a difference");
    };
    assert_eq!(r.announce, vec![p("198.51.100.10/32")]);
    assert_eq!(r.len(), 1);
}

#[test]
fn a_session_still_following_a_change_is_left_alone() {
    let desired = table(&[("198.51.100.11/32", 1)]);
    let advertised = PeerTable::new();
    // The table changed a second ago: the session may still be sending.
    assert_eq!(
        check_peer(&desired, &advertised, true, Duration::from_secs(1), SETTLE),
        PeerCheck::Skip
    );
    // No session with the whole table and End-of-RIB yet.
    assert_eq!(
        check_peer(&desired, &advertised, false, OLD, SETTLE),
        PeerCheck::Skip
    );
    assert!(matches!(
        check_peer(&desired, &advertised, true, SETTLE, SETTLE),
        PeerCheck::Repair(_)
    ));
}

#[test]
fn the_schedule_fires_every_period_and_never_when_off() {
    let t0 = Instant::now();
    let every = Duration::from_secs(300);
    let mut s = Schedule::new(every, t0);
    assert!(!s.due(t0));
    assert!(!s.due(t0 + Duration::from_secs(299)));
    assert!(s.due(t0 + every));
    assert!(!s.due(t0 + every), "once per period");
    // A late tick: the next one is a period after it.
    assert!(s.due(t0 + Duration::from_secs(700)));
    assert_eq!(s.next(), Some(t0 + Duration::from_secs(1000)));
    let mut off = Schedule::new(Duration::ZERO, t0);
    assert!(!off.due(t0 + Duration::from_secs(1_000_000)));
    assert_eq!(off.next(), None);
    off.set_every(Duration::from_secs(5), t0);
    assert!(off.due(t0 + Duration::from_secs(5)));
}

#[test]
fn differences_between_the_set_in_force_and_a_fresh_read() {
    let vip = |ip: &str, service: &str| {
        let address: IpAddr = ip.parse().unwrap();
        (
            address,
            Vip::of(Route::new(Default::default(), Some(service.into()), None)),
        )
    };
    let current: VipMap = [vip("198.51.100.10", "a/x"), vip("198.51.100.11", "a/y")]
        .into_iter()
        .collect();
    assert_eq!(set_differences(&current, &current.clone()), 0);
    // One missed (a VIP added while the watch was blind), one gone, one changed.
    let fresh: VipMap = [vip("198.51.100.10", "a/z"), vip("198.51.100.12", "a/w")]
        .into_iter()
        .collect();
    assert_eq!(set_differences(&current, &fresh), 3);
}

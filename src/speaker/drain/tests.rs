//! The drain sequence on simulated time, through the Adj-RIB-Out and the
//! encoder: what each kind of peer receives at each step.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::community::well_known::GRACEFUL_SHUTDOWN;
use bgp_proto::{Context, Family, Message};
use ipnet::IpNet;

use super::*;
use crate::speaker::{AdjRibOut, EncodeParams, NextHops, encode};

const WAIT: Duration = Duration::from_secs(15);

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn desired() -> PeerTable {
    let a = Arc::new(RouteAttrs {
        communities: vec![0xfde9_0064],
        local_pref: Some(200),
        ..RouteAttrs::default()
    });
    [
        (net("198.51.100.10/32"), a.clone()),
        (net("198.51.100.11/32"), a),
    ]
    .into_iter()
    .collect()
}

fn params(ibgp: bool) -> EncodeParams {
    EncodeParams {
        local_asn: 65001,
        ibgp,
        ctx: Context::default(),
        next_hops: NextHops {
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 2)),
            ..NextHops::default()
        },
    }
}

/// A peer's session: its Adj-RIB-Out and the UPDATEs each table costs.
struct Peer {
    rib: AdjRibOut,
    params: EncodeParams,
}

impl Peer {
    fn new(ibgp: bool) -> Self {
        Peer {
            rib: AdjRibOut::default(),
            params: params(ibgp),
        }
    }

    fn send(&mut self, table: PeerTable) -> Vec<bgp_proto::Update> {
        let delta = self.rib.diff(&Arc::new(table), &[Family::IPV4_UNICAST]);
        let (messages, _) = encode(&delta, &self.params);
        messages
            .iter()
            .map(|m| match Message::decode(m, &self.params.ctx).unwrap() {
                Message::Update(u) => u,
                m => panic!("{m:?}"),
            })
            .collect()
    }
}

fn has_gshut(u: &bgp_proto::Update) -> bool {
    u.communities().iter().any(|c| c.0 == GRACEFUL_SHUTDOWN)
}

#[test]
fn drain_marks_then_withdraws_after_the_wait() {
    let t0 = Instant::now();
    let mut drain = Drain::default();
    let mut ebgp = Peer::new(false);
    let mut ibgp = Peer::new(true);
    ebgp.send(drain.shape(desired()));
    ibgp.send(drain.shape(desired()));

    assert!(drain.start(t0, WAIT));
    assert_eq!(
        drain.phase(),
        DrainPhase::GracefulShutdown {
            since: t0,
            until: t0 + WAIT
        }
    );
    assert_eq!(drain.deadline(), Some(t0 + WAIT));
    // RFC 8326 §3: re-advertised with GRACEFUL_SHUTDOWN, one UPDATE for
    // both routes, nothing withdrawn; the advertisement's own community
    // stays.
    let ups = ebgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].nlri.len(), 2);
    assert!(ups[0].withdrawn.is_empty());
    assert!(has_gshut(&ups[0]));
    assert!(ups[0].communities().iter().any(|c| c.0 == 0xfde9_0064));
    assert_eq!(ups[0].local_pref(), None, "no LOCAL_PREF to eBGP peers");
    let ups = ibgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1);
    assert!(has_gshut(&ups[0]));
    assert_eq!(ups[0].local_pref(), Some(0), "LOCAL_PREF 0 to iBGP peers");

    // Not a moment early.
    assert!(!drain.poll(t0 + WAIT - Duration::from_nanos(1)));
    assert!(ebgp.send(drain.shape(desired())).is_empty());
    // Then withdrawn.
    assert!(drain.poll(t0 + WAIT));
    assert_eq!(drain.phase(), DrainPhase::Withdrawn { since: t0 + WAIT });
    assert_eq!(drain.deadline(), None);
    let ups = ebgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].withdrawn.len(), 2);
    assert!(ups[0].nlri.is_empty());
}

#[test]
fn undrain_mid_wait_is_one_update_back_to_normal() {
    let t0 = Instant::now();
    let mut drain = Drain::default();
    let mut ibgp = Peer::new(true);
    ibgp.send(drain.shape(desired()));
    drain.start(t0, WAIT);
    ibgp.send(drain.shape(desired()));
    // Draining again keeps the running timer.
    assert!(!drain.start(t0 + Duration::from_secs(5), WAIT));
    assert_eq!(drain.deadline(), Some(t0 + WAIT));

    assert!(drain.stop());
    assert_eq!(drain.phase(), DrainPhase::Active);
    assert_eq!(drain.deadline(), None);
    let ups = ibgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1, "one UPDATE, no withdrawal first");
    assert!(ups[0].withdrawn.is_empty());
    assert_eq!(ups[0].nlri.len(), 2);
    assert!(!has_gshut(&ups[0]));
    assert_eq!(ups[0].local_pref(), Some(200));
    // The old deadline does nothing any more.
    assert!(!drain.poll(t0 + WAIT));
    assert!(!drain.stop(), "undrain when not draining changes nothing");
}

#[test]
fn undrain_after_the_withdrawal_advertises_again() {
    let t0 = Instant::now();
    let mut drain = Drain::default();
    let mut ebgp = Peer::new(false);
    ebgp.send(drain.shape(desired()));
    drain.start(t0, WAIT);
    ebgp.send(drain.shape(desired()));
    drain.poll(t0 + WAIT);
    ebgp.send(drain.shape(desired()));
    drain.stop();
    let ups = ebgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].nlri.len(), 2);
    assert!(!has_gshut(&ups[0]));
}

#[test]
fn a_zero_wait_withdraws_at_once() {
    let t0 = Instant::now();
    let mut drain = Drain::default();
    let mut ebgp = Peer::new(false);
    ebgp.send(drain.shape(desired()));
    assert!(drain.start(t0, Duration::ZERO));
    assert_eq!(drain.phase(), DrainPhase::Withdrawn { since: t0 });
    assert_eq!(drain.deadline(), None);
    let ups = ebgp.send(drain.shape(desired()));
    assert_eq!(ups.len(), 1);
    assert_eq!(ups[0].withdrawn.len(), 2);
    assert!(ups.iter().all(|u| !has_gshut(u)));
}

#[test]
fn only_the_routes_picked_are_marked_and_equal_attributes_stay_shared() {
    let first = net("198.51.100.10/32");
    let marked = mark_graceful_shutdown(desired(), |p| *p == first);
    let a = &marked[&first];
    let b = &marked[&net("198.51.100.11/32")];
    assert!(a.communities.contains(&GRACEFUL_SHUTDOWN));
    assert_eq!(a.local_pref, Some(0));
    assert!(!b.communities.contains(&GRACEFUL_SHUTDOWN));
    let all = mark_graceful_shutdown(desired(), |_| true);
    let mut arcs = all.values();
    assert!(Arc::ptr_eq(arcs.next().unwrap(), arcs.next().unwrap()));
}

//! The per-peer speaker on simulated time: instants are made up, the
//! output budget is given, and every message is decoded to say what it is.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::{Context, Family, Message, RouteRefresh};
use ipnet::IpNet;

use super::*;
use crate::speaker::{EncodeParams, NextHops, PeerTable, RouteAttrs};

const V4: Family = Family::IPV4_UNICAST;
const V6: Family = Family::IPV6_UNICAST;

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

/// A table of these prefixes, all with the same attributes.
fn table(prefixes: &[&str]) -> Arc<PeerTable> {
    let attrs = Arc::new(RouteAttrs::default());
    Arc::new(prefixes.iter().map(|p| (net(p), attrs.clone())).collect())
}

fn session(families: &[Family]) -> SessionUp {
    SessionUp {
        params: EncodeParams {
            local_asn: 65001,
            ibgp: false,
            ctx: Context::default(),
            next_hops: NextHops {
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 2)),
                ipv6: Some("2001:db8::2".parse::<Ipv6Addr>().unwrap()),
                ipv6_link_local: None,
                ipv4_via_ipv6: false,
            },
        },
        families: families.to_vec(),
    }
}

/// One message as a line: `UPDATE +10.0.0.1/32 -10.0.0.2/32`,
/// `EoR ipv4-unicast`, `BoRR ipv4-unicast`, `EoRR ...`.
fn describe(bytes: &[u8]) -> String {
    match Message::decode(bytes, &Context::default()).expect("a valid message") {
        Message::Update(u) => {
            if let Some(f) = u.end_of_rib_family() {
                return format!("EoR {f}");
            }
            let mut s = String::from("UPDATE");
            for n in u.announced() {
                s += &format!(" +{}", n.prefix);
            }
            for n in u.withdrawals() {
                s += &format!(" -{}", n.prefix);
            }
            s
        }
        Message::RouteRefresh(rr) => {
            let kind = match rr.subtype {
                RouteRefresh::BORR => "BoRR",
                RouteRefresh::EORR => "EoRR",
                _ => "ROUTE-REFRESH",
            };
            format!("{kind} {}", rr.family)
        }
        m => m.name().to_string(),
    }
}

/// Every message of the outputs, in order, as lines.
fn lines(out: &[Output]) -> Vec<String> {
    out.iter()
        .flat_map(|o| o.messages().iter().map(|m| describe(m)))
        .collect()
}

/// The budget after the connection took everything in `out` on top of
/// `b` (queued and written).
fn drained(b: Budget, out: &[Output]) -> Budget {
    let n: u64 = out
        .iter()
        .flat_map(|o| o.messages())
        .map(|m| m.len() as u64)
        .sum();
    Budget {
        enqueued: b.enqueued + n,
        written: b.enqueued + n,
    }
}

fn ready_speaker(mrai: Duration, t: Arc<PeerTable>) -> PeerSpeaker {
    let mut s = PeerSpeaker::new(mrai);
    s.set_table(t);
    s.set_routes_ready(true);
    s
}

#[test]
fn a_new_session_gets_the_whole_table_then_end_of_rib_per_family() {
    let t0 = Instant::now();
    let mut s = ready_speaker(
        Duration::ZERO,
        table(&["10.0.0.1/32", "10.0.0.2/32", "2001:db8:1::/64"]),
    );
    let out = s.up(t0, session(&[V4, V6]), Budget::default());
    assert_eq!(
        lines(&out),
        [
            "UPDATE +10.0.0.1/32 +10.0.0.2/32",
            "UPDATE +2001:db8:1::/64",
            "EoR ipv4-unicast",
            "EoR ipv6-unicast",
        ]
    );
    assert!(matches!(out.last(), Some(Output::EndOfRib { .. })));
    assert!(s.end_of_rib_sent());
    assert_eq!(s.advertised().len(), 3);
    // Nothing more until something changes.
    assert!(s.poll(t0, drained(Budget::default(), &out)).is_empty());

    // A session that went down and came back gets all of it again.
    s.down();
    assert!(s.advertised().is_empty());
    assert!(!s.end_of_rib_sent());
    let again = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(
        lines(&again),
        ["UPDATE +10.0.0.1/32 +10.0.0.2/32", "EoR ipv4-unicast"],
        "only the negotiated families"
    );
}

#[test]
fn end_of_rib_waits_until_the_table_is_complete() {
    let t0 = Instant::now();
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_table(table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32"]);
    assert_eq!(out.last(), Some(&Output::EndOfRibWaits));
    assert!(s.end_of_rib_pending());
    let b = drained(Budget::default(), &out);

    // More routes arrive; still not complete.
    s.set_table(table(&["10.0.0.1/32", "10.0.0.3/32"]));
    let out = s.poll(t0, b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.3/32"]);
    let b = drained(b, &out);
    assert!(s.poll(t0, b).is_empty());
    assert!(!s.end_of_rib_sent());

    s.set_routes_ready(true);
    let out = s.poll(t0, b);
    assert_eq!(lines(&out), ["EoR ipv4-unicast"]);
    assert!(s.end_of_rib_sent());
    assert!(!s.end_of_rib_pending());
    // Once only.
    let b = drained(b, &out);
    assert!(s.poll(t0, b).is_empty());

    // A new session before the source is complete (a restart of ours, the
    // table not yet whole again) still gets the table, without End-of-RIB.
    s.down();
    s.set_routes_ready(false);
    let out = s.up(t0, session(&[V4]), b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32 +10.0.0.3/32"]);
    assert_eq!(out.last(), Some(&Output::EndOfRibWaits));
}

#[test]
fn end_of_rib_brings_the_changes_the_mrai_held_back_first() {
    let t0 = Instant::now();
    let mrai = Duration::from_secs(30);
    let mut s = PeerSpeaker::new(mrai);
    s.set_table(table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32"]);
    let b = drained(Budget::default(), &out);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32"]));
    assert!(s.poll(t0 + Duration::from_secs(1), b).is_empty());
    assert_eq!(s.next_deadline(), Some(t0 + mrai));

    // RFC 4724 §4.1: End-of-RIB follows the whole table, so what the MRAI
    // held back goes at once, right before it.
    s.set_routes_ready(true);
    let out = s.poll(t0 + Duration::from_secs(2), b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.2/32", "EoR ipv4-unicast"]);
}

#[test]
fn changes_within_the_mrai_go_out_together_when_it_expires() {
    let t0 = Instant::now();
    let mrai = Duration::from_secs(5);
    let mut s = ready_speaker(mrai, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32", "EoR ipv4-unicast"]);
    let b = drained(Budget::default(), &out);

    // End-of-RIB went right behind the table, so the interval starts with
    // the first change after it, which goes at once...
    let t1 = t0 + Duration::from_secs(1);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.9/32"]));
    assert_eq!(lines(&s.poll(t1, b)), ["UPDATE +10.0.0.9/32"]);
    // ...and RFC 4271 §9.2.1.1: the changes within the interval wait.
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32"]));
    assert!(s.poll(t1 + Duration::from_secs(1), b).is_empty());
    s.set_table(table(&["10.0.0.2/32", "10.0.0.3/32"]));
    assert!(s.poll(t1 + Duration::from_secs(3), b).is_empty());

    let out = s.poll(t1 + mrai, b);
    assert_eq!(
        lines(&out),
        [
            "UPDATE -10.0.0.1/32 -10.0.0.9/32",
            "UPDATE +10.0.0.2/32 +10.0.0.3/32"
        ],
        "one batch: the withdrawals together, and the two announcements in one UPDATE"
    );
    assert_eq!(out.len(), 1);
    let b = drained(b, &out);

    // That batch started a new interval.
    s.set_table(table(&["10.0.0.2/32"]));
    assert!(s.poll(t1 + mrai + Duration::from_secs(4), b).is_empty());
    assert_eq!(lines(&s.poll(t1 + 2 * mrai, b)), ["UPDATE -10.0.0.3/32"]);
}

#[test]
fn the_next_deadline_is_the_mrai_expiry_while_changes_wait() {
    let t0 = Instant::now();
    let mrai = Duration::from_millis(1500);
    let mut s = ready_speaker(mrai, table(&["10.0.0.1/32"]));
    assert_eq!(s.next_deadline(), None, "no session, nothing to time");
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);
    assert_eq!(s.next_deadline(), None, "nothing waits");

    // The first change goes at once and starts the interval.
    let t1 = t0 + Duration::from_millis(200);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.5/32"]));
    assert_eq!(lines(&s.poll(t1, b)), ["UPDATE +10.0.0.5/32"]);
    assert_eq!(s.next_deadline(), None, "nothing waits");

    let t2 = t1 + Duration::from_millis(300);
    s.set_table(table(&["10.0.0.2/32"]));
    assert!(s.poll(t2, b).is_empty());
    assert_eq!(s.next_deadline(), Some(t1 + mrai));
    // Not a nanosecond early.
    assert!(s.poll(t1 + mrai - Duration::from_nanos(1), b).is_empty());
    assert_eq!(s.next_deadline(), Some(t1 + mrai));
    assert_eq!(
        lines(&s.poll(t1 + mrai, b)),
        ["UPDATE -10.0.0.1/32 -10.0.0.5/32", "UPDATE +10.0.0.2/32"]
    );
    assert_eq!(s.next_deadline(), None, "sent: nothing waits any more");
}

/// A change held back by the MRAI when the session goes down leaves no
/// deadline behind: nothing can go until the next session (which sends the
/// whole table), and a deadline left in the past would wake the driver at
/// once, again and again.
#[test]
fn a_session_that_goes_down_leaves_no_mrai_deadline() {
    let t0 = Instant::now();
    let mrai = Duration::from_secs(30);
    let mut s = ready_speaker(mrai, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);
    s.set_table(table(&["10.0.0.2/32"]));
    assert_eq!(
        lines(&s.poll(t0, b)),
        ["UPDATE -10.0.0.1/32", "UPDATE +10.0.0.2/32"]
    );
    s.set_table(table(&["10.0.0.3/32"]));
    assert!(s.poll(t0, b).is_empty(), "held back by the MRAI");
    assert_eq!(s.next_deadline(), Some(t0 + mrai));

    s.down();
    assert_eq!(s.next_deadline(), None, "no session: nothing to time");
    s.set_table(table(&["10.0.0.4/32"]));
    assert!(s.poll(t0 + 2 * mrai, Budget::default()).is_empty());
    assert_eq!(
        s.next_deadline(),
        None,
        "a change while down waits for the session"
    );
}

/// While the output is backlogged, a change the MRAI has let go waits for
/// the output's progress (an input of its own), not for a deadline that
/// has passed.
#[test]
fn a_backlogged_change_leaves_no_past_deadline() {
    let t0 = Instant::now();
    let mrai = Duration::from_secs(30);
    let mut s = ready_speaker(mrai, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);
    s.set_table(table(&["10.0.0.2/32"]));
    assert_eq!(
        lines(&s.poll(t0, b)),
        ["UPDATE -10.0.0.1/32", "UPDATE +10.0.0.2/32"]
    );
    s.set_table(table(&["10.0.0.3/32"]));
    assert!(s.poll(t0, b).is_empty());
    assert_eq!(s.next_deadline(), Some(t0 + mrai));

    let full = Budget {
        enqueued: b.enqueued + OUTPUT_LIMIT as u64,
        written: b.enqueued,
    };
    let t1 = t0 + mrai;
    assert!(s.poll(t1, full).is_empty(), "backlogged");
    assert!(
        s.next_deadline().is_none_or(|d| d > t1),
        "a deadline at or before the poll: {:?}",
        s.next_deadline()
    );
    // The output drains: the change goes at once.
    assert_eq!(
        lines(&s.poll(t1, drained(full, &[]))),
        ["UPDATE -10.0.0.2/32", "UPDATE +10.0.0.3/32"]
    );
}

#[test]
fn a_session_gone_down_leaves_no_mrai_deadline() {
    // With no session nothing can go out: an MRAI deadline kept past the
    // session's end would be due for ever (the driver's timer would fire
    // again and again) while the table changes.
    let t0 = Instant::now();
    let mrai = Duration::from_secs(5);
    let mut s = ready_speaker(mrai, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);
    // A change starts the interval.
    let t1 = t0 + Duration::from_secs(1);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.5/32"]));
    let out = s.poll(t1, b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.5/32"]);
    let b = drained(b, &out);
    s.down();
    s.set_table(table(&["10.0.0.2/32"]));
    assert_eq!(s.next_deadline(), None);
    assert!(s.poll(t1 + mrai, b).is_empty());
    assert_eq!(s.next_deadline(), None);
    // The next session sends the table at once, whatever the last MRAI.
    let out = s.up(t1 + Duration::from_secs(1), session(&[V4]), b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.2/32", "EoR ipv4-unicast"]);
}

#[test]
fn a_removed_route_is_withdrawn_and_a_changed_one_announced_again() {
    let t0 = Instant::now();
    let mut s = ready_speaker(Duration::ZERO, table(&["10.0.0.1/32", "10.0.0.2/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);

    s.set_table(table(&["10.0.0.1/32"]));
    let out = s.poll(t0, b);
    assert_eq!(lines(&out), ["UPDATE -10.0.0.2/32"]);
    assert!(matches!(
        &out[..],
        [Output::Updates {
            announced: 0,
            withdrawn: 1,
            ..
        }]
    ));
    assert_eq!(
        s.advertised().keys().copied().collect::<Vec<_>>(),
        [net("10.0.0.1/32")]
    );
    let b = drained(b, &out);

    // New attributes: an implicit replace (RFC 4271 §3.1), no withdrawal.
    let mut changed = (*table(&["10.0.0.1/32"])).clone();
    changed.insert(
        net("10.0.0.1/32"),
        Arc::new(RouteAttrs {
            med: Some(7),
            ..RouteAttrs::default()
        }),
    );
    s.set_table(Arc::new(changed));
    assert_eq!(lines(&s.poll(t0, b)), ["UPDATE +10.0.0.1/32"]);

    // Shutdown with withdrawal: everything advertised.
    let w = s.withdraw_all().expect("the session is up");
    assert_eq!(
        w.iter().map(|m| describe(m)).collect::<Vec<_>>(),
        ["UPDATE -10.0.0.1/32"]
    );
    assert!(s.advertised().is_empty());
    s.down();
    assert_eq!(s.withdraw_all(), None);
}

#[test]
fn route_refresh_answers_with_the_family_between_borr_and_eorr() {
    let t0 = Instant::now();
    let mut s = ready_speaker(Duration::ZERO, table(&["10.0.0.1/32", "2001:db8:1::/64"]));
    let out = s.up(t0, session(&[V4, V6]), Budget::default());
    let b = drained(Budget::default(), &out);

    // RFC 7313 §4: BoRR, the family's routes, EoRR.
    let out = s.route_refresh(V6, true, b);
    assert_eq!(
        lines(&out),
        [
            "BoRR ipv6-unicast",
            "UPDATE +2001:db8:1::/64",
            "EoRR ipv6-unicast"
        ]
    );
    let b = drained(b, &out);

    // RFC 2918 without enhanced route refresh: the routes, then End-of-RIB.
    let out = s.route_refresh(V4, false, b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32", "EoR ipv4-unicast"]);
    assert!(matches!(
        &out[..],
        [Output::Refresh {
            family: V4,
            enhanced: false,
            ..
        }]
    ));
}

/// A ROUTE-REFRESH before End-of-RIB (the source's view not complete yet)
/// gets no answer of its own: the rest of the table and End-of-RIB answer
/// it. An answer would end with End-of-RIB on an incomplete table, which a
/// graceful-restart helper takes as the end of our restart, flushing the
/// stale routes not sent again yet (RFC 4724 §4.2).
#[test]
fn a_refresh_before_end_of_rib_is_answered_by_it() {
    let t0 = Instant::now();
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_table(table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32"]);
    let b = drained(Budget::default(), &out);
    assert!(
        s.route_refresh(V4, false, b).is_empty(),
        "no End-of-RIB yet"
    );
    assert!(s.route_refresh(V4, true, b).is_empty(), "no EoRR either");
    assert!(s.poll(t0, b).is_empty());

    s.set_routes_ready(true);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32"]));
    let out = s.poll(t0, b);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.2/32", "EoR ipv4-unicast"]);
    // Once End-of-RIB is out, a request is answered.
    let b = drained(b, &out);
    assert_eq!(
        lines(&s.route_refresh(V4, false, b)),
        ["UPDATE +10.0.0.1/32 +10.0.0.2/32", "EoR ipv4-unicast"]
    );
}

#[test]
fn a_refresh_while_the_last_answer_is_being_written_adds_nothing() {
    let t0 = Instant::now();
    let mut s = ready_speaker(Duration::ZERO, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);

    let answer = s.route_refresh(V4, true, b);
    assert_eq!(answer.len(), 1);
    let end = drained(b, &answer);
    // Queued but not all written: asking again adds nothing.
    let writing = Budget {
        enqueued: end.enqueued,
        written: end.enqueued - 1,
    };
    assert!(s.route_refresh(V4, true, writing).is_empty());
    assert!(
        s.poll(t0, writing).is_empty(),
        "and nothing is held back either"
    );
    // Another family is not held back by it.
    assert_eq!(s.route_refresh(V6, true, writing).len(), 1);
    // Once the answer is written, a new request is answered.
    let later = Budget {
        enqueued: end.enqueued + 500,
        written: end.enqueued + 500,
    };
    assert_eq!(
        lines(&s.route_refresh(V4, true, later)),
        [
            "BoRR ipv4-unicast",
            "UPDATE +10.0.0.1/32",
            "EoRR ipv4-unicast"
        ]
    );
}

#[test]
fn a_backlogged_output_holds_refreshes_and_changes_back_coalesced() {
    let t0 = Instant::now();
    let mut s = ready_speaker(Duration::ZERO, table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    let b = drained(Budget::default(), &out);
    let full = Budget {
        enqueued: b.enqueued + OUTPUT_LIMIT as u64,
        written: b.enqueued,
    };
    let almost = Budget {
        enqueued: b.enqueued + OUTPUT_LIMIT as u64 - 1,
        written: b.enqueued,
    };

    // Three requests and two changes while 4 MiB wait for the socket.
    for _ in 0..3 {
        assert!(s.route_refresh(V4, false, full).is_empty());
    }
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32"]));
    assert!(s.poll(t0, full).is_empty());
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"]));
    assert!(s.poll(t0, full).is_empty());

    // One octet under the limit: the changes go, in one diff; the answer
    // waits behind them, since they filled the output again.
    let out = s.poll(t0, almost);
    assert_eq!(lines(&out), ["UPDATE +10.0.0.2/32 +10.0.0.3/32"]);
    let still = Budget {
        enqueued: drained(almost, &out).enqueued,
        written: almost.written,
    };
    assert!(s.poll(t0, still).is_empty());
    // Written: one answer for the three requests.
    let out = s.poll(t0, drained(almost, &out));
    assert_eq!(
        lines(&out),
        [
            "UPDATE +10.0.0.1/32 +10.0.0.2/32 +10.0.0.3/32",
            "EoR ipv4-unicast"
        ]
    );
    assert_eq!(out.len(), 1);
    let b = drained(b, &out);
    assert!(
        s.poll(t0, b).is_empty(),
        "the other requests were coalesced"
    );
}

#[test]
fn end_of_rib_waits_behind_a_backlogged_table() {
    let t0 = Instant::now();
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_table(table(&["10.0.0.1/32"]));
    let out = s.up(t0, session(&[V4]), Budget::default());
    assert_eq!(lines(&out), ["UPDATE +10.0.0.1/32"]);
    let full = Budget {
        enqueued: OUTPUT_LIMIT as u64,
        written: 0,
    };
    s.set_routes_ready(true);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.2/32"]));
    assert!(s.poll(t0, full).is_empty());
    assert!(s.end_of_rib_pending());
    let out = s.poll(
        t0,
        Budget {
            enqueued: OUTPUT_LIMIT as u64,
            written: OUTPUT_LIMIT as u64,
        },
    );
    assert_eq!(lines(&out), ["UPDATE +10.0.0.2/32", "EoR ipv4-unicast"]);
}

/// A route with no next hop of its family on this session cannot be sent:
/// it is reported apart, counted in no announcement, and kept out of the
/// Adj-RIB-Out.
#[test]
fn a_route_without_a_next_hop_of_its_family_is_reported_not_announced() {
    let t0 = Instant::now();
    let mut s = ready_speaker(
        Duration::ZERO,
        table(&["10.0.0.1/32", "2001:db8:1::10/128", "10.0.0.2/32"]),
    );
    let mut up = session(&[V4, V6]);
    up.params.next_hops.ipv6 = None;
    let out = s.up(t0, up, Budget::default());
    let updates: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Updates {
                announced,
                withdrawn,
                unsendable,
                ..
            } => Some((*announced, *withdrawn, unsendable.clone())),
            _ => None,
        })
        .collect();
    // Reported once, with the table that wants it: End-of-RIB right after
    // finds the Adj-RIB-Out in step with the table and walks it no more.
    // Only the IPv4 routes are counted as announced.
    assert_eq!(
        updates,
        [(2, 0, vec![net("2001:db8:1::10/128")])],
        "{updates:?}"
    );
    assert_eq!(
        lines(&out)[0],
        "UPDATE +10.0.0.1/32 +10.0.0.2/32",
        "{:?}",
        lines(&out)
    );
    assert_eq!(s.advertised().len(), 2);
}

#[test]
fn a_session_taken_over_sends_only_what_differs_from_what_was_sent() {
    let t0 = Instant::now();
    let sent_before = table(&["10.0.0.1/32", "10.0.0.2/32", "2001:db8::1/128"]);
    // The same table: nothing at all, End-of-RIB having gone out.
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_routes_ready(true);
    s.set_table(sent_before.clone());
    let out = s.resume(
        t0,
        session(&[V4, V6]),
        sent_before.clone(),
        true,
        Budget::default(),
    );
    assert!(lines(&out).is_empty(), "{:?}", lines(&out));
    assert!(s.end_of_rib_sent() && !s.end_of_rib_pending());
    assert_eq!(s.advertised_counts(), (2, 1));
    // One VIP more and one less: exactly that.
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_routes_ready(true);
    s.set_table(table(&["10.0.0.1/32", "10.0.0.3/32", "2001:db8::1/128"]));
    let out = s.resume(
        t0,
        session(&[V4, V6]),
        sent_before.clone(),
        true,
        Budget::default(),
    );
    assert_eq!(lines(&out), ["UPDATE -10.0.0.2/32", "UPDATE +10.0.0.3/32"]);
    // Taken over before End-of-RIB: it follows, once.
    let mut s = PeerSpeaker::new(Duration::ZERO);
    s.set_routes_ready(true);
    s.set_table(sent_before.clone());
    let out = s.resume(
        t0,
        session(&[V4, V6]),
        sent_before,
        false,
        Budget::default(),
    );
    assert_eq!(lines(&out), ["EoR ipv4-unicast", "EoR ipv6-unicast"]);
    assert!(s.end_of_rib_sent());
}

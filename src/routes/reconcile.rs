//! Periodic reconcile (`[source] resync`). Events get lost — a watch event
//! that never arrived, an edit the file watch missed — and then the
//! desired set stays wrong until something else touches the Service. So
//! every `resync` the desired set is rebuilt from scratch from the source,
//! and each peer's Adj-RIB-Out is compared with its desired table; what
//! differs is repaired, logged once and counted
//! (`holdfast_reconcile_repairs_total`).
//!
//! The decisions here are pure (time comes in as an argument); the daemon
//! does the reading and the sending.

use std::time::{Duration, Instant};

use ipnet::IpNet;

/// When the next reconcile is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    every: Duration,
    next: Option<Instant>,
}

impl Schedule {
    /// Every `every` from `now`; zero: never.
    pub fn new(every: Duration, now: Instant) -> Self {
        Schedule {
            every,
            next: (!every.is_zero()).then(|| now + every),
        }
    }

    /// A new period (config reload): counted from `now`.
    pub fn set_every(&mut self, every: Duration, now: Instant) {
        if every != self.every {
            *self = Schedule::new(every, now);
        }
    }

    /// When the next one is due (`None`: resync is off).
    pub fn next(&self) -> Option<Instant> {
        self.next
    }

    /// Whether one is due at `now`; if so the next is scheduled a period
    /// after `now` (a late tick does not bunch them up).
    pub fn due(&mut self, now: Instant) -> bool {
        match self.next {
            Some(t) if now >= t => {
                self.next = Some(now + self.every);
                true
            }
            _ => false,
        }
    }
}

/// How a peer's Adj-RIB-Out differs from its desired table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repair {
    /// Desired but not advertised, or advertised with other attributes.
    pub announce: Vec<IpNet>,
    /// Advertised but not desired.
    pub withdraw: Vec<IpNet>,
}

impl Repair {
    pub fn is_empty(&self) -> bool {
        self.announce.is_empty() && self.withdraw.is_empty()
    }

    /// How many routes it puts right.
    pub fn len(&self) -> usize {
        self.announce.len() + self.withdraw.len()
    }
}

/// What a reconcile does for one peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerCheck {
    /// Not comparable now: no session with the whole table sent yet, or the
    /// table changed too recently for the session to have caught up (the
    /// MinRouteAdvertisementInterval may still hold an UPDATE back).
    Skip,
    InSync,
    Repair(Repair),
}

/// Compares a peer's Adj-RIB-Out with its desired table. `synced`: the
/// session is Established and has sent its whole table and End-of-RIB;
/// `table_age`: how long the desired table has been unchanged; `settle`:
/// how long a session may take to follow a change (its MRAI plus slack).
pub fn check_peer<'t, V: PartialEq + 't>(
    desired: impl IntoIterator<Item = (&'t IpNet, &'t V)>,
    advertised: impl IntoIterator<Item = (&'t IpNet, &'t V)>,
    synced: bool,
    table_age: Duration,
    settle: Duration,
) -> PeerCheck {
    if !synced || table_age < settle {
        return PeerCheck::Skip;
    }
    let repair = compare(desired, advertised);
    if repair.is_empty() {
        PeerCheck::InSync
    } else {
        PeerCheck::Repair(repair)
    }
}

/// The routes in which `advertised` differs from `desired`. Both come in
/// ascending prefix order: one merge walk.
pub fn compare<'t, V: PartialEq + 't>(
    desired: impl IntoIterator<Item = (&'t IpNet, &'t V)>,
    advertised: impl IntoIterator<Item = (&'t IpNet, &'t V)>,
) -> Repair {
    let mut r = Repair::default();
    let mut a = advertised.into_iter().peekable();
    for (prefix, attrs) in desired {
        while let Some((p, _)) = a.next_if(|(p, _)| *p < prefix) {
            r.withdraw.push(*p);
        }
        match a.next_if(|(p, _)| *p == prefix) {
            Some((_, sent)) if sent == attrs => {}
            _ => r.announce.push(*prefix),
        }
    }
    r.withdraw.extend(a.map(|(p, _)| *p));
    r
}

#[cfg(test)]
mod tests;

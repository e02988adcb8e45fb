//! The Adj-RIB-Out of one peer and the UPDATEs that bring it to a desired
//! table.

use std::collections::BTreeMap;
use std::sync::Arc;

use bgp_proto::{Family, Message, Nlri, pack};
use ipnet::IpNet;

use super::PeerTable;
use super::RouteAttrs;
use super::attrs::EncodeParams;

/// What changed: announcements grouped by their attributes, and
/// withdrawals.
///
/// An announced prefix is held as its position in the table it comes from
/// (four octets where the prefix is eighteen): a first sync announces the
/// whole table, and with 100k routes its lists of prefixes were 1.8 MB of
/// the daemon's peak.
#[derive(Clone, Debug, Default)]
pub struct Delta {
    announce: BTreeMap<Arc<RouteAttrs>, Vec<u32>>,
    /// The table the positions in `announce` are of.
    table: Arc<PeerTable>,
    pub withdraw: Vec<IpNet>,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.announce.is_empty() && self.withdraw.is_empty()
    }

    pub fn announced(&self) -> usize {
        self.announce.values().map(Vec::len).sum()
    }

    /// The announcements: each set of attributes with its prefixes, in
    /// prefix order.
    pub fn announcements(
        &self,
    ) -> impl Iterator<Item = (&Arc<RouteAttrs>, impl Iterator<Item = &IpNet> + Clone)> {
        self.announce.iter().map(|(attrs, at)| {
            let table = &self.table;
            (attrs, at.iter().map(move |i| table.key_at(*i as usize)))
        })
    }

    /// Keeps the announcements of the prefixes `keep` accepts.
    pub fn retain_announced(&mut self, mut keep: impl FnMut(&IpNet) -> bool) {
        let table = &self.table;
        for at in self.announce.values_mut() {
            at.retain(|i| keep(table.key_at(*i as usize)));
        }
        self.announce.retain(|_, at| !at.is_empty());
    }
}

/// Announcements grouped by attributes as they are found. Routes come in
/// runs that share one allocation of attributes (`peer_tables` shares
/// equal ones), so the current run is kept apart and goes into the map
/// when it ends: one map lookup (a deep compare of attributes) per run
/// rather than per prefix, which with 100k routes was a tenth of the
/// first sync.
#[derive(Default)]
struct Grouper<'t> {
    map: BTreeMap<Arc<RouteAttrs>, Vec<u32>>,
    run: Option<(&'t Arc<RouteAttrs>, Vec<u32>)>,
}

impl<'t> Grouper<'t> {
    /// The route at position `at` of the table, with `attrs`.
    fn push(&mut self, attrs: &'t Arc<RouteAttrs>, at: usize) {
        // A table holds far fewer than 2^32 routes (a route is tens of
        // octets); positions are kept in four.
        let at = at as u32;
        match &mut self.run {
            Some((a, run)) if Arc::ptr_eq(a, attrs) => run.push(at),
            _ => {
                self.flush();
                self.run = Some((attrs, vec![at]));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((attrs, run)) = self.run.take() {
            match self.map.entry(attrs.clone()) {
                std::collections::btree_map::Entry::Vacant(e) => {
                    e.insert(run);
                }
                std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().extend(run),
            }
        }
    }

    fn finish(mut self) -> BTreeMap<Arc<RouteAttrs>, Vec<u32>> {
        self.flush();
        self.map
    }
}

fn family(p: &IpNet) -> Family {
    match p {
        IpNet::V4(_) => Family::IPV4_UNICAST,
        IpNet::V6(_) => Family::IPV6_UNICAST,
    }
}

/// RFC 4271 §3.2: "Adj-RIBs-Out contains the routes for advertisement to
/// specific peers".
///
/// Held as the desired table it was last brought to, shared with the
/// daemon's copy (and with the status view) rather than copied: with 100k
/// routes, a map of its own per session was 5 MB that said nothing new. It
/// becomes a table of its own only when it differs from the desired one
/// (a family not negotiated, a route without a next hop of its family).
#[derive(Clone, Debug, Default)]
pub struct AdjRibOut {
    routes: Arc<PeerTable>,
    /// How many of `routes` are IPv4, kept as the table changes so that
    /// the status view and `/metrics` never count them.
    ipv4: usize,
}

impl AdjRibOut {
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// The routes, shared (for the status view).
    pub fn table(&self) -> Arc<PeerTable> {
        self.routes.clone()
    }

    /// Prefixes held: (IPv4, IPv6).
    pub fn counts(&self) -> (usize, usize) {
        (self.ipv4, self.routes.len() - self.ipv4)
    }

    /// Drops prefixes that could not be sent after all.
    pub fn forget(&mut self, prefixes: &[IpNet]) {
        if prefixes.is_empty() {
            return;
        }
        let ipv4 = &mut self.ipv4;
        Arc::make_mut(&mut self.routes).remove_all(prefixes, |p| {
            if matches!(p, IpNet::V4(_)) {
                *ipv4 -= 1;
            }
        });
    }

    /// What another process sent on a session it handed over: taken as
    /// sent, so that only a difference from it goes out.
    pub fn taken_over(routes: Arc<PeerTable>) -> Self {
        let ipv4 = routes
            .iter()
            .filter(|(p, _)| matches!(p, IpNet::V4(_)))
            .count();
        AdjRibOut { routes, ipv4 }
    }

    /// A session went down: nothing has been sent on the next one.
    pub fn clear(&mut self) {
        self.routes = Arc::default();
        self.ipv4 = 0;
    }

    /// The changes that bring this Adj-RIB-Out to `desired` (restricted to
    /// `families`), and applies them. A route whose attributes changed is
    /// announced again (an implicit replace, RFC 4271 §3.1), never withdrawn
    /// first.
    pub fn diff(&mut self, desired: &Arc<PeerTable>, families: &[Family]) -> Delta {
        let mut delta = Delta {
            table: desired.clone(),
            ..Delta::default()
        };
        let mut announce = Grouper::default();
        let wanted = |p: &IpNet| families.contains(&family(p));
        // Both tables are sorted by prefix: one walk over the two.
        let mut old = self.routes.iter().peekable();
        let (mut ipv4, mut unwanted) = (0, 0);
        for (at, (p, a)) in desired.iter().enumerate() {
            if !wanted(p) {
                unwanted += 1;
                continue;
            }
            if matches!(p, IpNet::V4(_)) {
                ipv4 += 1;
            }
            while let Some((q, _)) = old.next_if(|(q, _)| *q < p) {
                delta.withdraw.push(*q);
            }
            match old.next_if(|(q, _)| *q == p) {
                Some((_, b)) if Arc::ptr_eq(a, b) || a == b => {}
                _ => announce.push(a, at),
            }
        }
        delta.announce = announce.finish();
        delta.withdraw.extend(old.map(|(q, _)| *q));
        self.ipv4 = ipv4;
        self.routes = if unwanted == 0 {
            desired.clone()
        } else {
            Arc::new(
                desired
                    .iter()
                    .filter(|(p, _)| wanted(p))
                    .map(|(p, a)| (*p, a.clone()))
                    .collect(),
            )
        };
        delta
    }

    /// Everything in the Adj-RIB-Out as one delta (ROUTE-REFRESH, RFC 2918).
    pub fn full(&self) -> Delta {
        let mut announce = Grouper::default();
        for (at, (_, a)) in self.routes.iter().enumerate() {
            announce.push(a, at);
        }
        Delta {
            announce: announce.finish(),
            table: self.routes.clone(),
            ..Delta::default()
        }
    }

    /// Withdraws everything (shutdown with withdrawal).
    pub fn withdraw_all(&mut self) -> Delta {
        let withdraw = self.routes.keys().copied().collect();
        self.clear();
        Delta {
            withdraw,
            ..Delta::default()
        }
    }
}

/// The UPDATE messages of a delta, encoded for the session. Prefixes that
/// cannot be sent (no next hop of their family on this session) are
/// returned apart; the caller logs them and keeps them out of the
/// Adj-RIB-Out.
pub fn encode(delta: &Delta, p: &EncodeParams) -> (Vec<Vec<u8>>, Vec<IpNet>) {
    let mut out = Vec::new();
    let mut unsendable = Vec::new();
    if !delta.withdraw.is_empty() {
        let list: Vec<(Family, Nlri)> = delta
            .withdraw
            .iter()
            .map(|n| (family(n), Nlri::new(*n)))
            .collect();
        for u in pack::withdrawals(&p.ctx, &list) {
            match Message::Update(u).encode(&p.ctx) {
                Ok(bytes) => out.push(bytes),
                // Packing keeps every message within the negotiated size;
                // this cannot happen, and is not papered over if it does.
                Err(e) => tracing::error!("UPDATE not sent: {e}"),
            }
        }
    }
    for (attrs, prefixes) in delta.announcements() {
        let base = p.path_attributes(attrs);
        for (fam, nh) in [
            (Family::IPV4_UNICAST, p.next_hops.for_ipv4()),
            (Family::IPV6_UNICAST, p.next_hops.for_ipv6()),
        ] {
            let of_family = prefixes.clone().filter(|n| family(n) == fam);
            let Some(nh) = nh else {
                unsendable.extend(of_family);
                continue;
            };
            // Written straight into the messages (no list of NLRI per
            // message): a first sync announces the whole table at once.
            let (messages, too_big) = pack::announcement_messages(
                &p.ctx,
                fam,
                &base,
                &nh,
                of_family.map(|n| Nlri::new(*n)),
            );
            out.extend(messages);
            unsendable.extend(too_big.iter().map(|n| n.prefix));
        }
    }
    (out, unsendable)
}

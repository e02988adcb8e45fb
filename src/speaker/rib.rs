//! The Adj-RIB-Out of one peer and the UPDATEs that bring it to a desired
//! table.

use std::collections::BTreeMap;
use std::sync::Arc;

use bgp_proto::{Family, Message, Nlri, Update, pack};
use ipnet::IpNet;

use super::PeerTable;
use super::attrs::{EncodeParams, RouteAttrs};

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

/// Prefixes turned into NLRI and packed at a time: a whole table of 100k
/// as NLRI, and again inside the UPDATEs packed from them, was 6.5 MB of
/// the daemon's peak; a slice of this many is 0.5 MB.
const PACK_SLICE: usize = 16 * 1024;

/// The UPDATE messages of a delta, encoded for the session. Prefixes that
/// cannot be sent (no next hop of their family on this session) are
/// returned apart; the caller logs them and keeps them out of the
/// Adj-RIB-Out.
pub fn encode(delta: &Delta, p: &EncodeParams) -> (Vec<Vec<u8>>, Vec<IpNet>) {
    let mut out = Vec::new();
    let mut unsendable = Vec::new();
    let push = |u: Update, out: &mut Vec<Vec<u8>>| match Message::Update(u).encode(&p.ctx) {
        Ok(bytes) => out.push(bytes),
        // Packing keeps every message within the negotiated size; this
        // cannot happen, and is not papered over if it does.
        Err(e) => tracing::error!("UPDATE not sent: {e}"),
    };
    if !delta.withdraw.is_empty() {
        let list: Vec<(Family, Nlri)> = delta
            .withdraw
            .iter()
            .map(|n| (family(n), Nlri::new(*n)))
            .collect();
        for u in pack::withdrawals(&p.ctx, &list) {
            push(u, &mut out);
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
            let mut slices = Packer::default();
            for prefix in of_family {
                slices.pending.push(Nlri::new(*prefix));
                if slices.pending.len() >= PACK_SLICE {
                    slices.pack(p, fam, &base, &nh, false, &mut out, &mut unsendable, push);
                }
            }
            slices.pack(p, fam, &base, &nh, true, &mut out, &mut unsendable, push);
        }
    }
    (out, unsendable)
}

/// The announcements of one family and one set of attributes, packed a
/// slice at a time. The last UPDATE of a slice may have room left: its
/// NLRI go on into the next slice, so the messages are as full as if the
/// whole list had been packed at once.
#[derive(Default)]
struct Packer {
    pending: Vec<Nlri>,
}

impl Packer {
    #[allow(clippy::too_many_arguments)]
    fn pack(
        &mut self,
        p: &EncodeParams,
        fam: Family,
        base: &[bgp_proto::PathAttribute],
        nh: &[std::net::IpAddr],
        last: bool,
        out: &mut Vec<Vec<u8>>,
        unsendable: &mut Vec<IpNet>,
        push: impl Fn(Update, &mut Vec<Vec<u8>>),
    ) {
        if self.pending.is_empty() {
            return;
        }
        let (mut ups, skipped) = pack::announcements(&p.ctx, fam, base, nh, &self.pending);
        unsendable.extend(skipped.iter().map(|n| n.prefix));
        // The last message carries the slice's last prefixes (unless that
        // prefix was skipped as too big, which ends every message before).
        let ends_in_message = self
            .pending
            .last()
            .is_some_and(|n| !skipped.iter().any(|s| s == n));
        let carried = match ups.last() {
            Some(u) if !last && ends_in_message => {
                let n = u.announced().count();
                ups.pop();
                n
            }
            _ => 0,
        };
        for u in ups {
            push(u, out);
        }
        let keep = self.pending.len() - carried;
        self.pending.drain(..keep);
    }
}

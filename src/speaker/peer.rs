//! What one peer is sent, sans IO: the Adj-RIB-Out kept in step with the
//! desired table, the MinRouteAdvertisementInterval, End-of-RIB after the
//! table on every new session, and the answers to ROUTE-REFRESH.
//!
//! No sockets, no tasks, no clock: the session driver feeds it the desired
//! table, the session going up (with what was negotiated) or down, the
//! ROUTE-REFRESH requests the FSM decoded, whether the source has given its
//! first complete view, the instant, and how far the connection's output
//! has got ([`Budget`]); it answers with [`Output`]s — encoded UPDATE,
//! End-of-RIB and BoRR/EoRR messages for the established connection, in
//! order — and [`PeerSpeaker::next_deadline`] says when the MRAI lets held
//! back changes go. A drain (RFC 8326) reaches it as the table
//! [`super::Drain::shape`] made.
//!
//! ```text
//!  set_table ─┐                       ┌─▶ Output::Updates     (diff of the Adj-RIB-Out)
//!  up / down ─┤                       ├─▶ Output::EndOfRib    (after the whole table)
//!  refresh ───┼─▶ PeerSpeaker ────────┼─▶ Output::Refresh     (BoRR, table, EoRR)
//!  ready ─────┤   (now, Budget)       └─▶ next_deadline()     (MRAI)
//!  poll ──────┘
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::{Family, Message, RouteRefresh, Update};
use ipnet::IpNet;

use super::{AdjRibOut, EncodeParams, PeerTable, encode};

/// The output of a connection waiting for the socket: while more than
/// this is queued, no new bulk output (UPDATEs of a route change, answers
/// to ROUTE-REFRESH, End-of-RIB behind them) is produced; it waits,
/// coalesced, until the queue drains. What is queued is at most this plus
/// one batch (the whole table at worst).
pub const OUTPUT_LIMIT: usize = 4 << 20;

/// How far the established connection's output has got, in octets: what
/// the driver has queued for the socket, and what the socket has taken.
/// Every message the speaker outputs is queued on that connection in order,
/// so the speaker counts its own output into `enqueued` as it goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Budget {
    /// Octets queued on the connection (all messages, KEEPALIVEs too).
    pub enqueued: u64,
    /// Octets written to the socket.
    pub written: u64,
}

impl Budget {
    fn queued(&self) -> u64 {
        self.enqueued.saturating_sub(self.written)
    }

    /// More than [`OUTPUT_LIMIT`] waits for the socket: no new bulk output.
    fn backlogged(&self) -> bool {
        self.queued() >= OUTPUT_LIMIT as u64
    }

    fn add(&mut self, messages: &[Vec<u8>]) {
        self.enqueued += messages.iter().map(|m| m.len() as u64).sum::<u64>();
    }
}

/// A session that came up, as the speaker needs it.
#[derive(Clone, Debug)]
pub struct SessionUp {
    /// How routes are encoded on it (the negotiated context in `ctx`).
    pub params: EncodeParams,
    /// The families both sides negotiated and the peer is configured for.
    pub families: Vec<Family>,
}

/// What to send, encoded in the session's context, for the established
/// connection (each goes to the FSM as one `Event::SendUpdates`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// UPDATEs that bring the Adj-RIB-Out to the desired table. `messages`
    /// may be empty when every changed route was `unsendable`.
    Updates {
        messages: Vec<Vec<u8>>,
        announced: usize,
        withdrawn: usize,
        /// Routes not sent: no next hop of their family on this session.
        /// They are kept out of the Adj-RIB-Out.
        unsendable: Vec<IpNet>,
    },
    /// End-of-RIB for each family (RFC 4724 §2), after the whole table:
    /// the restart, if any, is over for this peer (RFC 4724 §4.1).
    EndOfRib { messages: Vec<Vec<u8>> },
    /// The session is up but End-of-RIB waits for the source's first
    /// complete view (said once per session).
    EndOfRibWaits,
    /// The answer to a ROUTE-REFRESH (RFC 2918): the family's table, then
    /// End-of-RIB; between BoRR and EoRR when `enhanced` (RFC 7313 §4).
    Refresh {
        family: Family,
        enhanced: bool,
        messages: Vec<Vec<u8>>,
    },
}

impl Output {
    /// The messages to send.
    pub fn messages(&self) -> &[Vec<u8>] {
        match self {
            Output::Updates { messages, .. }
            | Output::EndOfRib { messages }
            | Output::Refresh { messages, .. } => messages,
            Output::EndOfRibWaits => &[],
        }
    }

    /// The messages to send, owned.
    pub fn into_messages(self) -> Vec<Vec<u8>> {
        match self {
            Output::Updates { messages, .. }
            | Output::EndOfRib { messages }
            | Output::Refresh { messages, .. } => messages,
            Output::EndOfRibWaits => Vec::new(),
        }
    }
}

/// The speaker of one peer: its Adj-RIB-Out and what to send next.
#[derive(Debug)]
pub struct PeerSpeaker {
    /// MinRouteAdvertisementInterval (RFC 4271 §9.2.1.1); zero: none.
    mrai: Duration,
    /// The desired table, as last given.
    table: Arc<PeerTable>,
    /// The source's first complete view is in: End-of-RIB may go out.
    routes_ready: bool,
    rib: AdjRibOut,
    up: Option<SessionUp>,
    /// The table changed since the last sync.
    dirty: bool,
    /// The session is up but End-of-RIB has not gone out yet.
    end_of_rib_pending: bool,
    /// End-of-RIB went out on the current session.
    end_of_rib_sent: bool,
    /// MinRouteAdvertisementIntervalTimer (RFC 4271 §9.2.1.1).
    mrai_until: Option<Instant>,
    /// ROUTE-REFRESH requests not answered yet (the output was
    /// backlogged), one per family: a repeated request adds nothing.
    refresh_pending: Vec<(Family, bool)>,
    /// The answer to a family's ROUTE-REFRESH ends at this octet of the
    /// connection's output: a request while it is still being written adds
    /// nothing either.
    refresh_until: HashMap<Family, u64>,
}

impl PeerSpeaker {
    /// A speaker with this MinRouteAdvertisementInterval, nothing to send
    /// until a session is up.
    pub fn new(mrai: Duration) -> Self {
        PeerSpeaker {
            mrai,
            table: Arc::default(),
            routes_ready: false,
            rib: AdjRibOut::default(),
            up: None,
            dirty: false,
            end_of_rib_pending: false,
            end_of_rib_sent: false,
            mrai_until: None,
            refresh_pending: Vec::new(),
            refresh_until: HashMap::new(),
        }
    }

    /// A new desired table: it goes out at the next [`PeerSpeaker::poll`]
    /// the MRAI and the output budget allow.
    pub fn set_table(&mut self, table: Arc<PeerTable>) {
        self.table = table;
        self.dirty = true;
    }

    /// Whether the table is complete (the source's first complete view is
    /// in): End-of-RIB waits for it.
    pub fn set_routes_ready(&mut self, ready: bool) {
        self.routes_ready = ready;
    }

    /// The session is established: RFC 4724 §4.1, the whole table, then
    /// End-of-RIB for each family once the table is complete.
    pub fn up(&mut self, now: Instant, session: SessionUp, mut budget: Budget) -> Vec<Output> {
        let mut out = Vec::new();
        self.refresh_pending.clear();
        self.refresh_until.clear();
        self.end_of_rib_sent = false;
        self.up = Some(session);
        self.rib.clear();
        self.mrai_until = None;
        self.dirty = true;
        self.sync(now, &mut budget, &mut out);
        self.end_of_rib_pending = true;
        if self.routes_ready {
            self.end_of_rib(now, &mut budget, &mut out);
        } else {
            // End-of-RIB says "this is all of it": after a restart the peer
            // then drops every stale route we did not send again (RFC 4724
            // §4.2). Until the source has given its first complete view,
            // our table is not all of it.
            out.push(Output::EndOfRibWaits);
        }
        out
    }

    /// A session handed over by another process (a live hand-off),
    /// established there: `advertised` is what that process sent on it
    /// (its Adj-RIB-Out), taken as sent. Only what the desired table
    /// changes from it goes out — nothing when they agree —, and
    /// End-of-RIB only if it had not gone out yet (RFC 4724 §4.1: once
    /// per session).
    pub fn resume(
        &mut self,
        now: Instant,
        session: SessionUp,
        advertised: Arc<PeerTable>,
        end_of_rib_sent: bool,
        mut budget: Budget,
    ) -> Vec<Output> {
        let mut out = Vec::new();
        self.refresh_pending.clear();
        self.refresh_until.clear();
        self.up = Some(session);
        self.rib = AdjRibOut::taken_over(advertised);
        self.mrai_until = None;
        self.dirty = true;
        self.end_of_rib_sent = end_of_rib_sent;
        self.end_of_rib_pending = !end_of_rib_sent;
        self.sync(now, &mut budget, &mut out);
        self.end_of_rib(now, &mut budget, &mut out);
        out
    }

    /// The session left Established: nothing has been sent on the next one,
    /// and its MRAI interval is over (kept, it would be a deadline due for
    /// ever while the table changes with no session to send on).
    pub fn down(&mut self) {
        self.up = None;
        self.mrai_until = None;
        self.end_of_rib_pending = false;
        self.end_of_rib_sent = false;
        self.refresh_pending.clear();
        self.refresh_until.clear();
        self.rib.clear();
    }

    /// A ROUTE-REFRESH for `family` (RFC 2918). Answers coalesce: at most
    /// one waits per family, and a request while the previous answer is
    /// still waiting or being written adds nothing — that answer, and the
    /// UPDATEs of any change after it, already bring the peer up to date.
    /// A peer asking faster than it reads cannot make holdfast queue more.
    ///
    /// Before End-of-RIB (the source's view not complete yet) a request is
    /// not answered on its own: the rest of the table and End-of-RIB, still
    /// to come, answer it. An answer now would end with End-of-RIB (or EoRR,
    /// RFC 7313 §4) on an incomplete table, and a graceful-restart helper
    /// would take it as the end of our restart and flush the stale routes
    /// not sent again yet (RFC 4724 §4.2), routes the complete table still
    /// holds.
    pub fn route_refresh(&mut self, family: Family, enhanced: bool, budget: Budget) -> Vec<Output> {
        let mut out = Vec::new();
        if self.end_of_rib_pending {
            return out;
        }
        if self.refresh_pending.iter().any(|(f, _)| *f == family) {
            return out;
        }
        if self
            .refresh_until
            .get(&family)
            .is_some_and(|&end| budget.written < end)
        {
            return out;
        }
        if budget.backlogged() {
            self.refresh_pending.push((family, enhanced));
            return out;
        }
        let mut budget = budget;
        self.answer_refresh(family, enhanced, &mut budget, &mut out);
        out
    }

    /// What may go now: the changes of the table (unless the MRAI or the
    /// output budget holds them back), End-of-RIB once due, and the
    /// ROUTE-REFRESH answers held back while the output has room.
    pub fn poll(&mut self, now: Instant, mut budget: Budget) -> Vec<Output> {
        let mut out = Vec::new();
        self.sync(now, &mut budget, &mut out);
        self.end_of_rib(now, &mut budget, &mut out);
        while !self.refresh_pending.is_empty() && !budget.backlogged() {
            let (family, enhanced) = self.refresh_pending.remove(0);
            self.answer_refresh(family, enhanced, &mut budget, &mut out);
        }
        out
    }

    /// Withdraws everything sent on the session (a shutdown that withdraws
    /// first); `None` when no session is up.
    pub fn withdraw_all(&mut self) -> Option<Vec<Vec<u8>>> {
        let up = self.up.as_ref()?;
        let delta = self.rib.withdraw_all();
        Some(encode(&delta, &up.params).0)
    }

    /// When the MRAI lets changes held back go (then [`PeerSpeaker::poll`]):
    /// only while there are such changes.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.mrai_until.filter(|_| self.dirty)
    }

    /// The session is up and End-of-RIB has not gone out yet.
    pub fn end_of_rib_pending(&self) -> bool {
        self.end_of_rib_pending
    }

    /// End-of-RIB went out on the current session.
    pub fn end_of_rib_sent(&self) -> bool {
        self.end_of_rib_sent
    }

    /// The Adj-RIB-Out (shared, not a copy).
    pub fn advertised(&self) -> Arc<PeerTable> {
        self.rib.table()
    }

    /// The whole Adj-RIB-Out as the UPDATEs the session would send for it,
    /// then End-of-RIB for each family: what a monitoring station that
    /// connects is sent (BMP, RFC 8671 §4 with RFC 7854 §5). Empty when the
    /// session is not up. Changes nothing.
    pub fn adj_rib_out_messages(&self) -> Vec<Vec<u8>> {
        let Some(up) = &self.up else {
            return Vec::new();
        };
        let (mut messages, _) = encode(&self.rib.full(), &up.params);
        messages.extend(up.families.iter().filter_map(|f| {
            Message::Update(Update::end_of_rib(*f))
                .encode(&up.params.ctx)
                .ok()
        }));
        messages
    }

    /// Prefixes in the Adj-RIB-Out, (IPv4, IPv6), kept as it changes.
    pub fn advertised_counts(&self) -> (usize, usize) {
        self.rib.counts()
    }

    /// Brings the Adj-RIB-Out to the desired table, unless the
    /// MinRouteAdvertisementInterval or the output budget holds it back.
    fn sync(&mut self, now: Instant, budget: &mut Budget, out: &mut Vec<Output>) {
        let Some(up) = &self.up else { return };
        if !self.dirty {
            return;
        }
        // Backlogged: the change waits, and changes meanwhile coalesce in
        // the next diff of the Adj-RIB-Out. The output's progress polls
        // again (it is an input): an MRAI already run out is no deadline
        // to wake for meanwhile.
        if budget.backlogged() {
            if self.mrai_until.is_some_and(|t| t <= now) {
                self.mrai_until = None;
            }
            return;
        }
        // RFC 4271 §9.2.1.1: advertisements to a peer are at least
        // MinRouteAdvertisementIntervalTimer apart; what changes meanwhile
        // goes out together when it expires.
        if self.mrai_until.is_some_and(|t| now < t) {
            return;
        }
        self.dirty = false;
        let mut delta = self.rib.diff(&self.table, &up.families);
        if delta.is_empty() {
            return;
        }
        let (messages, unsendable) = encode(&delta, &up.params);
        if !unsendable.is_empty() {
            delta.retain_announced(|q| !unsendable.contains(q));
            self.rib.forget(&unsendable);
        }
        budget.add(&messages);
        out.push(Output::Updates {
            messages,
            announced: delta.announced(),
            withdrawn: delta.withdraw.len(),
            unsendable,
        });
        if !self.mrai.is_zero() {
            self.mrai_until = Some(now + self.mrai);
        }
    }

    /// The whole table, then End-of-RIB for each family (RFC 4724 §4.1),
    /// once the table is complete.
    fn end_of_rib(&mut self, now: Instant, budget: &mut Budget, out: &mut Vec<Output>) {
        if !self.end_of_rib_pending || !self.routes_ready || self.up.is_none() {
            return;
        }
        // End-of-RIB must follow the whole table, which waits while the
        // output is backlogged.
        if budget.backlogged() {
            return;
        }
        self.end_of_rib_pending = false;
        // The table goes out now, whatever the MRAI: End-of-RIB follows it.
        // What is not dirty has gone out already (the Adj-RIB-Out is the
        // table): a second walk of 100k routes would find nothing.
        self.mrai_until = None;
        self.sync(now, budget, out);
        let Some(up) = &self.up else { return };
        let messages: Vec<Vec<u8>> = up
            .families
            .iter()
            .filter_map(|f| {
                Message::Update(Update::end_of_rib(*f))
                    .encode(&up.params.ctx)
                    .ok()
            })
            .collect();
        budget.add(&messages);
        out.push(Output::EndOfRib { messages });
        self.end_of_rib_sent = true;
    }

    /// RFC 2918: the whole table of `family` again, then End-of-RIB; RFC
    /// 7313 §4: between BoRR and EoRR when enhanced route refresh was
    /// negotiated. Only after the session's own End-of-RIB
    /// ([`PeerSpeaker::route_refresh`] answers nothing before it).
    fn answer_refresh(
        &mut self,
        family: Family,
        enhanced: bool,
        budget: &mut Budget,
        out: &mut Vec<Output>,
    ) {
        let Some(up) = &self.up else { return };
        let mut delta = self.rib.full();
        delta.retain_announced(|p| match p {
            IpNet::V4(_) => family == Family::IPV4_UNICAST,
            IpNet::V6(_) => family == Family::IPV6_UNICAST,
        });
        let (mut messages, _) = encode(&delta, &up.params);
        let ctx = &up.params.ctx;
        if enhanced {
            let rr = |subtype| {
                Message::RouteRefresh(RouteRefresh::new(family, subtype))
                    .encode(ctx)
                    .ok()
            };
            messages.insert(0, rr(RouteRefresh::BORR).unwrap_or_default());
            messages.extend(rr(RouteRefresh::EORR));
        } else if let Ok(eor) = Message::Update(Update::end_of_rib(family)).encode(ctx) {
            messages.push(eor);
        }
        budget.add(&messages);
        self.refresh_until.insert(family, budget.enqueued);
        out.push(Output::Refresh {
            family,
            enhanced,
            messages,
        });
    }
}

#[cfg(test)]
#[path = "peer_tests.rs"]
mod tests;

//! The `session` fuzz target's checks: one peer's [`PeerSession`] — the
//! sans-IO core the daemon runs, FSM, speaker and R bit together — driven
//! by a script of arbitrary inputs, its outputs read the way the router at
//! the other end reads them. Kept in the crate (hidden from the docs) so
//! that the fuzz seeds and every input a fuzzer ever crashed on replay as
//! an ordinary test (`tests/session_fuzz.rs`).
//!
//! The input is a script. The first [`HEADER`] octets choose the peer's
//! configuration (families, AS, hold time, passive, graceful restart, the
//! R bit, MRAI, IPv4 or IPv6 peering, BFD, the jitter seed). Then each
//! step is an opcode octet and its arguments (missing octets read as 0),
//! each one [`Input`] or a few, as the driver (`super::Driver`) would hand
//! them: time passing (the timer fires when the deadline is due, as the
//! driver's does), our connection up or failed, the peer's connection
//! arriving or closing, the peer's octets — a well-formed OPEN, KEEPALIVE,
//! UPDATE, ROUTE-REFRESH or NOTIFICATION (so that deep states are
//! reached), one of them with an octet changed, or arbitrary octets, in
//! any chunks —, the writer's progress (`Written`), a new desired table or
//! an edit of it, the source's view complete, BFD up or down, the end of
//! the restart, a stalled writer and, last, the daemon's stop. The opcode
//! is read `% 20`:
//!
//! | op | input | op | input |
//! |---|---|---|---|
//! | 0 | time + 16 ms × u16, the timer if due | 10 | arbitrary octets (u16 long, repeated) |
//! | 1 | time to the next deadline, the timer | 11 | the writer took u16 × 64 octets (0: all) |
//! | 2 | time + 64 ms × u8, no timer yet | 12 | a new table |
//! | 3 | our connection up (if one is pending) | 13 | the table edited |
//! | 4 | the peer's connection | 14 | the source's view complete |
//! | 5 | our connection failed (if pending) | 15 | BFD up or down (with BFD) |
//! | 6 | a connection closed by the peer | 16 | the restart over |
//! | 7 | one message from the peer | 17 | the writer stalled (RFC 9687) |
//! | 8 | the peer's OPEN and KEEPALIVE | 18 | the peer's ROUTE-REFRESH and KEEPALIVE |
//! | 9 | one message with an octet changed | 19 | the daemon stops the session: the end |
//!
//! `fuzz/make-session-seeds.py` writes the seeds with these.
//!
//! Checked after every input (a violation panics):
//! - nothing panics;
//! - outputs name only connections that are open, and none after its
//!   `Close`; `Connect` only while no attempt is pending and never for a
//!   passive peer (RFC 4271 §8.1.1), `AbortConnect` only for one pending;
//! - every message written is one whole message that decodes with
//!   bgp-proto, in the context the two OPENs agree (`fsm::negotiate`, as
//!   the router works it out) and within its maximum size (RFC 4271 §4.1,
//!   RFC 8654 §4); an UPDATE also validates without error (RFC 7606) and
//!   carries only families both sides negotiated and the peer is
//!   configured for (RFC 4760 §8); OPEN first on a connection and once,
//!   UPDATE and ROUTE-REFRESH only once the OPENs and KEEPALIVEs are
//!   exchanged (RFC 4271 §8.2.2), ROUTE-REFRESH only BoRR/EoRR with
//!   Enhanced Route Refresh negotiated (RFC 7313 §4); a written
//!   NOTIFICATION is flagged as one, with its code and subcode;
//! - RFC 4271 §6: a connection that carried BGP is closed after a
//!   NOTIFICATION, written in the same input and last on it (§4.5), unless
//!   the peer closed it, the peer sent a NOTIFICATION (none goes back), the
//!   peer restarted (its OPEN on a new connection while its graceful-restart
//!   session is established, RFC 4724 §4.2), the writer stalled (RFC 9687 §4: nothing more can be written) or the stop
//!   is graceful (RFC 4724: the peer keeps our routes; that one sends no
//!   NOTIFICATION at all); after a stop, no connection is left;
//! - deadlines: after the timer fires at `now`, the next one is later (no
//!   busy loop); no input sets one already past unless one was already;
//!   none is further than the largest timer away; a started session idle
//!   with no connection still has one (it restarts by itself, RFC 4271
//!   §8.1.1); the `SendHoldTime` is RFC 9687's for the negotiated Hold
//!   Time;
//! - bounded resources: the FSM buffers less than one message per
//!   connection however the octets are chunked, and holds at most three
//!   (ours and two of theirs), exactly those the driver has open; while
//!   [`OUTPUT_LIMIT`] octets wait for the socket, no UPDATE or
//!   ROUTE-REFRESH is produced (but for the withdrawals of a stop), and
//!   what waits stays below twice that;
//! - End-of-RIB (RFC 4724 §4.1) only once the source's view is complete,
//!   with nothing advertised that is not in the table, once per family
//!   and connection — again only to end the answer to a plain
//!   ROUTE-REFRESH asked for that family (RFC 2918);
//! - the status view: its state is the FSM's, it has the negotiated
//!   values exactly while Established, and its Adj-RIB-Out is what the
//!   UPDATEs on the wire left the router with.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bgp_proto::consts::MAX_EXTENDED_MESSAGE_LEN;
use bgp_proto::fsm::{self, ConnId, Direction, Negotiated, State};
use bgp_proto::nlri::Nlri;
use bgp_proto::{
    AddPathMode, AsPath, AttrValue, Capability, Context, Family, GrFamily, GracefulRestart,
    Message, Notification, Open, Origin, PathAttribute, RouteRefresh, check_header, pack,
};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::{Input, OUTPUT_LIMIT, Output, PeerSession, PeerSpec, StopHow, send_hold_time};
use crate::config;
use crate::speaker::{PeerTable, RouteAttrs};

/// Octets of configuration before the first step.
pub const HEADER: usize = 17;

/// Steps per input: a script is a few hundred steps at most in practice.
const MAX_STEPS: usize = 4096;

/// Prefixes in a table at most: 4096 routes, each with some 500 octets of
/// attributes of its own at worst, are some 2 MiB of UPDATEs — under the
/// output limit, so that what waits for the socket stays below twice it.
const MAX_TABLE: usize = 4096;

/// The largest timer: the Hold Time (65535 s at most, RFC 4271 §4.2).
const MAX_TIMER: Duration = Duration::from_secs(65_536);

/// How deep a script went, for tests of the seeds.
#[derive(Clone, Debug, Default)]
pub struct Reached {
    /// Times the session entered Established.
    pub established: u64,
    /// UPDATEs written, End-of-RIB markers included.
    pub updates_sent: usize,
    /// End-of-RIB markers written (RFC 4724 §2).
    pub end_of_ribs_sent: usize,
    /// BoRR markers written (RFC 7313 §4).
    pub refreshes_answered: usize,
    /// UPDATEs the session took from the peer.
    pub updates_received: u64,
    /// The NOTIFICATIONs written, as (code, subcode), in order.
    pub notifications_sent: Vec<(u8, u8)>,
    /// Inputs handled while the output limit was reached.
    pub backlogged_inputs: usize,
    /// The most octets waiting for the socket on one connection.
    pub most_queued: u64,
}

struct Script<'a>(&'a [u8]);

impl Script<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        (u64::from(self.u32()) << 32) | u64::from(self.u32())
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
}

/// The peer's configuration, from the header.
struct Setup {
    spec: PeerSpec,
    /// The AS a well-formed OPEN from the peer carries.
    peer_asn: u32,
    ipv6_peering: bool,
    bfd: bool,
    /// BFD is up when the session starts.
    bfd_up: bool,
    routes_ready: bool,
    jitter_seed: u64,
}

const PEER_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
const LOCAL_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);
const PEER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1);
const LOCAL_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2);

/// The header: the peer's `[[peer]]` table, parsed by the config layer as
/// an operator's would be.
///
/// | octet | meaning |
/// |---|---|
/// | 0 | bit 0 IPv4 unicast, bit 1 IPv6 unicast (neither: IPv4), bit 2 passive, bit 3 graceful restart, bit 4 its N bit, bit 5 restarting (R), bit 6 long-lived GR (with bit 3), bit 7 BFD |
/// | 1 | the AS, by `% 6`: 65000, 65001 (ours: iBGP), "external", "internal", local_asn 4200000001 towards 65000, 4200000002 |
/// | 2–3 | hold time in seconds (1 and 2 read as 0) |
/// | 4 | keepalive: hold time / (1 + this % 4) |
/// | 5 | MRAI in seconds, `% 31` |
/// | 6 | bit 0 IPv6 peering (2001:db8::1), bit 1 the source's view complete from the start, bits 2–7 connect_retry - 1 in seconds |
/// | 7 | graceful restart's restart_time in seconds (0: 1) |
/// | 8–15 | the jitter seed (RFC 4271 §10) |
/// | 16 | bit 0: BFD is up at the start (with BFD) |
fn setup(s: &mut Script) -> Setup {
    let flags = s.u8();
    let asn_kind = s.u8() % 6;
    let hold = match s.u16() {
        1 | 2 => 0,
        h => h,
    };
    let keepalive = if hold == 0 {
        0
    } else {
        (hold / (1 + u16::from(s.u8() % 4))).max(1)
    };
    if hold == 0 {
        s.u8();
    }
    let mrai = s.u8() % 31;
    let more = s.u8();
    let restart_time = u16::from(s.u8()).max(1);
    let jitter_seed = s.u64();
    let bfd_up = s.u8() & 1 != 0;
    let ipv6_peering = more & 1 != 0;
    let connect_retry = 1 + u32::from(more >> 2);

    let mut families = Vec::new();
    if flags & 1 != 0 || flags & 2 == 0 {
        families.push("\"ipv4-unicast\"");
    }
    if flags & 2 != 0 {
        families.push("\"ipv6-unicast\"");
    }
    let (asn, local_asn, peer_asn) = match asn_kind {
        0 => ("65000", None, 65000),
        1 => ("65001", None, 65001),
        2 => ("\"external\"", None, 65000),
        3 => ("\"internal\"", None, 65001),
        4 => ("65000", Some(4_200_000_001u32), 65000),
        _ => ("4200000002", None, 4_200_000_002),
    };
    // Long-lived GR only beside GR (RFC 9494 §4.2: the config says so).
    let llgr = if flags & 0x48 == 0x48 {
        ", long_lived_stale_time = \"1h\""
    } else {
        ""
    };
    let text = format!(
        "[speaker]\nasn = 65001\nrouter_id = \"192.0.2.2\"\nlisten = \"0.0.0.0:179\"\n\n\
         [[peer]]\nname = \"r1\"\naddress = \"{address}\"\nasn = {asn}\n{local_asn}\
         hold_time = \"{hold}s\"\nkeepalive = \"{keepalive}s\"\nconnect_retry = \"{connect_retry}s\"\n\
         families = [{families}]\npassive = {passive}\n\
         min_route_advertisement_interval = \"{mrai}s\"\n\
         graceful_restart = {{ enabled = {gr}, notification = {n}, restart_time = \"{restart_time}s\"{llgr} }}\n\n\
         [source]\nkind = \"file\"\npath = \"vips.toml\"\n\n\
         [[advertisement]]\nname = \"public\"\n",
        address = if ipv6_peering {
            IpAddr::V6(PEER_V6)
        } else {
            IpAddr::V4(PEER_V4)
        },
        local_asn = local_asn.map_or(String::new(), |a| format!("local_asn = {a}\n")),
        families = families.join(", "),
        passive = flags & 0x04 != 0,
        gr = flags & 0x08 != 0,
        n = flags & 0x10 != 0,
    );
    let config = match config::parse(Path::new("selfcheck.toml"), &text) {
        Ok(c) => c,
        Err(e) => panic!("the selfcheck's config does not parse: {e:?}\n{text}"),
    };
    let peer = config.peers[0].clone();
    let spec = PeerSpec {
        address: if ipv6_peering {
            IpAddr::V6(PEER_V6)
        } else {
            IpAddr::V4(PEER_V4)
        },
        interface: None,
        local_asn: peer.local_as(65001),
        router_id: LOCAL_V4,
        hostname: "node-1".into(),
        restarting: flags & 0x20 != 0 && peer.graceful_restart.enabled,
        peer,
    };
    Setup {
        spec,
        peer_asn,
        ipv6_peering,
        bfd: flags & 0x80 != 0,
        bfd_up: flags & 0x80 != 0 && bfd_up,
        routes_ready: more & 2 != 0,
        jitter_seed,
    }
}

/// The peer's side of one connection's octets, cut into messages as the
/// router wrote them.
#[derive(Default)]
struct PeerStream {
    buf: Vec<u8>,
    /// A header that no BGP speaker accepts: what follows is not framed.
    broken: bool,
    /// The peer's OPEN, the first message if it decoded as one.
    open: Option<Open>,
    /// A KEEPALIVE after that OPEN.
    keepalive: bool,
    /// A NOTIFICATION, whole.
    notification: bool,
    /// Any message other than OPEN before the OPEN.
    first_not_open: bool,
    /// The families of its plain ROUTE-REFRESH requests (RFC 2918) not yet
    /// answered with End-of-RIB.
    refresh_asked: BTreeSet<Family>,
}

impl PeerStream {
    fn push(&mut self, bytes: &[u8]) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(bytes);
        let mut at = 0;
        loop {
            match check_header(&self.buf[at..], MAX_EXTENDED_MESSAGE_LEN) {
                Ok(Some(len)) if self.buf.len() - at >= len => {
                    let msg = &self.buf[at..at + len];
                    match msg[18] {
                        1 if self.open.is_none() && !self.first_not_open => {
                            match Message::decode(msg, &Context::default()) {
                                Ok(Message::Open(o)) => self.open = Some(o),
                                _ => self.first_not_open = true,
                            }
                        }
                        3 => self.notification = true,
                        5 => {
                            if let Ok(Message::RouteRefresh(rr)) =
                                Message::decode(msg, &Context::default())
                                && rr.subtype == 0
                            {
                                self.refresh_asked.insert(rr.family);
                            }
                        }
                        4 if self.open.is_some() => self.keepalive = true,
                        _ if self.open.is_none() => self.first_not_open = true,
                        _ => {}
                    }
                    at += len;
                }
                Ok(_) => break,
                Err(_) => {
                    self.broken = true;
                    break;
                }
            }
        }
        self.buf.drain(..at);
    }
}

/// One connection as the driver and the router see it.
struct Conn {
    /// What the router sent on it.
    theirs: PeerStream,
    /// Our OPEN, as written on it.
    ours: Option<Open>,
    /// Our KEEPALIVE after our OPEN.
    our_keepalive: bool,
    /// What the two OPENs agree, worked out as the router does.
    negotiated: Option<Negotiated>,
    /// Octets the session queued on it, and those the socket took.
    enqueued: u64,
    written: u64,
    /// A NOTIFICATION was written on it.
    notified: bool,
    /// The session gave it a SendHoldTime: it is the established one.
    established: bool,
    /// What our UPDATEs on it left the router with.
    rib: BTreeSet<IpNet>,
    /// The families we sent End-of-RIB for on it.
    end_of_rib: Vec<Family>,
}

impl Conn {
    fn queued(&self) -> u64 {
        self.enqueued - self.written
    }
}

/// What an input is, for the checks of its outputs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Timer,
    Connected(ConnId),
    Data(ConnId),
    Closed(ConnId),
    Stalled(ConnId),
    Stop { graceful: bool },
    Other,
}

struct Harness {
    session: PeerSession,
    fsm_config: fsm::Config,
    /// The families the peer is configured for.
    configured: Vec<Family>,
    passive: bool,
    base: Instant,
    now: Instant,
    conns: BTreeMap<ConnId, Conn>,
    next_conn: u64,
    connecting: bool,
    /// Start given and not stopped by BFD since.
    started: bool,
    bfd_up: bool,
    /// The source's view is complete: End-of-RIB may go.
    routes_ready: bool,
    table: Arc<PeerTable>,
    reached: Reached,
}

impl Harness {
    fn step(&mut self, input: Input) {
        let kind = match &input {
            Input::Timer => Kind::Timer,
            Input::Connected { conn, .. } => Kind::Connected(*conn),
            Input::Data { conn, .. } => Kind::Data(*conn),
            Input::Closed { conn, .. } => Kind::Closed(*conn),
            Input::SendStalled { conn } => Kind::Stalled(*conn),
            Input::Stop(how) => Kind::Stop {
                graceful: *how == StopHow::Graceful,
            },
            _ => Kind::Other,
        };
        match &input {
            Input::Connected {
                conn, direction, ..
            } => {
                if *direction == Direction::Outgoing {
                    assert!(self.connecting, "connected without an attempt");
                    self.connecting = false;
                }
                self.conns.insert(
                    *conn,
                    Conn {
                        theirs: PeerStream::default(),
                        ours: None,
                        our_keepalive: false,
                        negotiated: None,
                        enqueued: 0,
                        written: 0,
                        notified: false,
                        established: false,
                        rib: BTreeSet::new(),
                        end_of_rib: Vec::new(),
                    },
                );
            }
            Input::ConnectFailed(_) => self.connecting = false,
            Input::Data { conn, bytes } => {
                let c = self
                    .conns
                    .get_mut(conn)
                    .expect("data on an open connection");
                c.theirs.push(bytes);
                self.negotiate(*conn);
            }
            Input::Written { conn, total } => {
                self.conns
                    .get_mut(conn)
                    .expect("an open connection")
                    .written = *total;
            }
            Input::Table(t) => self.table = t.clone(),
            Input::RoutesReady(ready) => self.routes_ready = *ready,
            Input::Bfd { up, .. } => {
                let was = std::mem::replace(&mut self.bfd_up, *up);
                if *up && !self.started {
                    self.started = true;
                } else if !*up && was && self.started {
                    self.started = false;
                }
            }
            Input::Start { bfd_up } => {
                self.started = true;
                self.bfd_up = *bfd_up;
            }
            Input::Stop(_) => self.started = false,
            _ => {}
        }
        // The established connection's backlog before the session runs:
        // the budget it is given.
        let backlogged = self
            .conns
            .values()
            .find(|c| c.established)
            .is_some_and(|c| c.queued() >= OUTPUT_LIMIT as u64);
        if backlogged {
            self.reached.backlogged_inputs += 1;
        }
        let before = self.session.next_deadline();
        let out = self.session.handle(self.now, input);
        self.outputs(kind, backlogged, out);
        self.after(kind, before);
    }

    /// Both OPENs of `conn` known: what they agree, as the router sees it.
    fn negotiate(&mut self, conn: ConnId) {
        let c = self.conns.get_mut(&conn).expect("an open connection");
        if c.negotiated.is_none()
            && let (Some(ours), Some(theirs)) = (&c.ours, &c.theirs.open)
        {
            c.negotiated = fsm::negotiate(&self.fsm_config, ours, theirs).ok();
        }
    }

    fn outputs(&mut self, kind: Kind, backlogged: bool, out: Vec<Output>) {
        for o in out {
            match o {
                Output::Connect => {
                    assert!(
                        !self.passive,
                        "a passive session connects (RFC 4271 §8.1.1)"
                    );
                    assert!(!self.connecting, "a second connection attempt at once");
                    self.connecting = true;
                }
                Output::AbortConnect => {
                    assert!(self.connecting, "AbortConnect with no attempt pending");
                    self.connecting = false;
                }
                Output::Write {
                    conn,
                    bytes,
                    notification,
                } => self.written(kind, backlogged, conn, &bytes, notification),
                Output::Close { conn } => {
                    let Some(c) = self.conns.remove(&conn) else {
                        panic!("{conn:?} closed, but it is not open");
                    };
                    let exempt = match kind {
                        Kind::Closed(k) | Kind::Stalled(k) => k == conn,
                        Kind::Stop { graceful } => graceful,
                        // RFC 4724 §4.2: an OPEN on a new connection from a
                        // graceful-restart peer whose session is established
                        // says it restarted: the old connection is taken as
                        // closed by the peer.
                        Kind::Data(k) => {
                            k != conn
                                && c.established
                                && c.negotiated
                                    .as_ref()
                                    .is_some_and(|n| n.peer_graceful_restart.is_some())
                                && self.conns.get(&k).is_some_and(|n| n.theirs.open.is_some())
                        }
                        _ => false,
                    };
                    assert!(
                        c.notified || exempt || c.enqueued == 0 || c.theirs.notification,
                        "{conn:?} closed after {kind:?} with no NOTIFICATION (RFC 4271 §6)"
                    );
                }
                Output::SendHoldTime { conn, time } => {
                    let c = self
                        .conns
                        .get_mut(&conn)
                        .unwrap_or_else(|| panic!("SendHoldTime of {conn:?}, not open"));
                    let Some(n) = &c.negotiated else {
                        panic!("{conn:?} established before both OPENs were exchanged")
                    };
                    assert!(
                        c.our_keepalive && c.theirs.keepalive,
                        "{conn:?} established before both KEEPALIVEs (RFC 4271 §8.2.2)"
                    );
                    assert_eq!(time, send_hold_time(n.hold_time), "RFC 9687 SendHoldTime");
                    c.established = true;
                    self.reached.established += 1;
                }
            }
        }
        for (id, c) in &self.conns {
            assert!(
                !c.notified,
                "{id:?} is still open after its NOTIFICATION (RFC 4271 §4.5)"
            );
        }
        assert!(
            self.conns.values().filter(|c| c.established).count() <= 1,
            "two established connections"
        );
    }

    /// One message written on `conn`, read as the router reads it.
    fn written(
        &mut self,
        kind: Kind,
        backlogged: bool,
        conn: ConnId,
        bytes: &[u8],
        flagged: Option<(u8, u8)>,
    ) {
        let c = self
            .conns
            .get_mut(&conn)
            .unwrap_or_else(|| panic!("written on {conn:?}, not open"));
        assert!(
            !c.notified,
            "written on {conn:?} after its NOTIFICATION (RFC 4271 §4.5)"
        );
        assert!(bytes.len() >= 19, "{} octets: not a message", bytes.len());
        let ty = bytes[18];
        let ctx = match (ty, &c.negotiated) {
            // OPEN and KEEPALIVE before anything is negotiated (RFC 4271
            // §4.2; a KEEPALIVE is the header alone), a NOTIFICATION in
            // OpenSent too.
            (1 | 4, _) | (3, None) => Context::default(),
            (_, Some(n)) => n.tx,
            (_, None) => panic!("a message of type {ty} on {conn:?} before both OPENs"),
        };
        assert!(
            bytes.len() <= ctx.max_message_len,
            "{} octets written, the maximum is {} (RFC 4271 §4.1, RFC 8654 §4)",
            bytes.len(),
            ctx.max_message_len
        );
        let msg = match Message::decode(bytes, &ctx) {
            Ok(m) => m,
            Err(e) => panic!("we wrote a message of type {ty} that does not decode: {e:?}"),
        };
        c.enqueued += bytes.len() as u64;
        let notification = match &msg {
            Message::Notification(n) => Some((n.code, n.subcode)),
            _ => None,
        };
        assert_eq!(flagged, notification, "Write.notification");
        match msg {
            Message::Open(o) => {
                assert!(
                    c.ours.is_none() && c.enqueued == bytes.len() as u64,
                    "an OPEN on {conn:?} after other messages (RFC 4271 §8.2.2)"
                );
                c.ours = Some(o);
                self.negotiate(conn);
            }
            Message::Keepalive => {
                assert!(c.ours.is_some(), "a KEEPALIVE before our OPEN");
                c.our_keepalive = true;
            }
            Message::Notification(n) => {
                assert!(
                    kind != Kind::Stop { graceful: true } || !c.established,
                    "a graceful stop sent a NOTIFICATION (RFC 4724)"
                );
                c.notified = true;
                self.reached.notifications_sent.push((n.code, n.subcode));
            }
            Message::Update(u) => {
                Self::bulk(c, kind, backlogged);
                let n = c.negotiated.as_ref().expect("checked above");
                let v = u.validate(&ctx);
                assert!(
                    v.action.is_none() && v.errors.is_empty(),
                    "we wrote a malformed UPDATE (RFC 7606): {:?}",
                    v.errors
                );
                let family_of = |p: &IpNet| match p {
                    IpNet::V4(_) => Family::IPV4_UNICAST,
                    IpNet::V6(_) => Family::IPV6_UNICAST,
                };
                let families: Vec<Family> = u
                    .announced()
                    .chain(u.withdrawals())
                    .map(|n| family_of(&n.prefix))
                    .chain(u.end_of_rib_family())
                    .chain(u.mp_reach().map(|m| m.family))
                    .chain(u.mp_unreach().map(|m| m.family))
                    .collect();
                for f in families {
                    assert!(
                        n.families.contains(&f) && self.configured.contains(&f),
                        "an UPDATE of {f} on a session that has not negotiated it (RFC 4760 §8)"
                    );
                }
                for w in u.withdrawals() {
                    c.rib.remove(&w.prefix);
                }
                for a in u.announced() {
                    c.rib.insert(a.prefix);
                }
                self.reached.updates_sent += 1;
                if let Some(f) = u.end_of_rib_family() {
                    // RFC 4724 §4.1: after the whole table, once the
                    // table is the source's complete view; again only to
                    // end the answer to a plain ROUTE-REFRESH (RFC 2918).
                    assert!(
                        self.routes_ready,
                        "End-of-RIB before the source's view is complete"
                    );
                    assert!(
                        !c.end_of_rib.contains(&f) || c.theirs.refresh_asked.remove(&f),
                        "a second End-of-RIB for {f} on {conn:?}, no refresh asked"
                    );
                    c.end_of_rib.push(f);
                    for p in c.rib.iter().filter(|p| family_of(p) == f) {
                        assert!(
                            self.table.contains_key(p),
                            "End-of-RIB for {f} with {p} advertised, not in the table"
                        );
                    }
                    self.reached.end_of_ribs_sent += 1;
                }
            }
            Message::RouteRefresh(rr) => {
                Self::bulk(c, kind, backlogged);
                let n = c.negotiated.as_ref().expect("checked above");
                assert!(
                    n.enhanced_route_refresh && matches!(rr.subtype, 1 | 2),
                    "we wrote a ROUTE-REFRESH of subtype {} (RFC 7313 §4: BoRR and EoRR only, and only when negotiated)",
                    rr.subtype
                );
                if rr.subtype == 1 {
                    self.reached.refreshes_answered += 1;
                }
            }
        }
    }

    /// An UPDATE or ROUTE-REFRESH on `c`: only once established (RFC 4271
    /// §8.2.2), and no new bulk while the output limit is reached.
    fn bulk(c: &Conn, kind: Kind, backlogged: bool) {
        assert!(
            c.our_keepalive && c.theirs.keepalive,
            "an UPDATE before both KEEPALIVEs (RFC 4271 §8.2.2)"
        );
        assert!(
            !backlogged || matches!(kind, Kind::Stop { .. }),
            "bulk output after {kind:?} while {} octets wait for the socket",
            c.queued()
        );
    }

    fn after(&mut self, kind: Kind, before: Option<Instant>) {
        let s = &self.session;
        let state = s.state();
        let status = s.status();
        assert_eq!(status.state, state, "the status view's state");
        assert_eq!(
            status.negotiated.is_some(),
            state == State::Established,
            "the status view has the negotiated values exactly while Established"
        );
        // Bounded memory, and the connections the FSM holds are those
        // the driver has open.
        let mut held = BTreeSet::new();
        for (conn, len, max) in s.fsm().receive_buffers() {
            assert!(
                len < max,
                "{conn:?} buffers {len} octets (maximum message {max})"
            );
            assert!(max <= MAX_EXTENDED_MESSAGE_LEN);
            held.insert(conn);
        }
        assert!(held.len() <= 3, "{} connections held", held.len());
        let open: BTreeSet<ConnId> = self.conns.keys().copied().collect();
        assert_eq!(held, open, "the FSM's connections and the driver's");
        match s.fsm().established() {
            Some((conn, _)) => {
                let c = &self.conns[&conn];
                assert!(c.established, "{conn:?} established without SendHoldTime");
                assert!(
                    status.advertised.keys().eq(c.rib.iter()),
                    "the status view's Adj-RIB-Out is not what the UPDATEs said"
                );
            }
            None => assert!(
                self.conns.values().all(|c| !c.established),
                "a connection established while the session is not"
            ),
        }
        for c in self.conns.values() {
            self.reached.most_queued = self.reached.most_queued.max(c.queued());
            assert!(
                c.queued() < 2 * OUTPUT_LIMIT as u64,
                "{} octets wait for the socket",
                c.queued()
            );
        }
        // Deadlines.
        let next = s.next_deadline();
        let now = self.now;
        if let Some(d) = next {
            if kind == Kind::Timer {
                assert!(
                    d > now,
                    "the next deadline {:?} is not after the timer at {:?}",
                    d - self.base,
                    now - self.base
                );
            }
            assert!(
                d >= now || before.is_some_and(|b| b < now),
                "{kind:?} set a deadline already past"
            );
            assert!(
                d <= now + MAX_TIMER,
                "a deadline {:?} away",
                d.saturating_duration_since(now)
            );
        }
        if self.started && state == State::Idle && self.conns.is_empty() && !self.connecting {
            assert!(
                next.is_some(),
                "a started session sits in Idle with no timer (RFC 4271 §8.1.1)"
            );
        }
        if let Kind::Stop { .. } = kind {
            assert!(self.conns.is_empty(), "connections left after a stop");
            assert!(!self.connecting, "a connection attempt left after a stop");
        }
        self.reached.updates_received = s.status().stats.updates_received;
    }

    /// Time passes by `d`; when `fire`, the timer fires if due (the
    /// driver's would have), else the next input comes first.
    fn advance(&mut self, d: Duration, fire: bool) {
        self.now += d;
        if fire {
            self.fire();
        }
    }

    fn fire(&mut self) {
        // Once: after it, the deadline is later (checked).
        if self.session.next_deadline().is_some_and(|d| d <= self.now) {
            self.step(Input::Timer);
        }
    }

    fn conn(&self, pick: u8) -> Option<ConnId> {
        let open: Vec<ConnId> = self.conns.keys().copied().collect();
        (!open.is_empty()).then(|| open[usize::from(pick) % open.len()])
    }

    fn connected(&mut self, direction: Direction, ipv6: bool) {
        self.next_conn += 1;
        let conn = ConnId(self.next_conn);
        let port = 40_000 + (self.next_conn % 20_000) as u16;
        let local = if ipv6 {
            SocketAddr::new(IpAddr::V6(LOCAL_V6), port)
        } else {
            SocketAddr::new(IpAddr::V4(LOCAL_V4), port)
        };
        self.step(Input::Connected {
            conn,
            direction,
            local,
        });
    }

    /// The peer's octets on `conn`, in two reads cut at `split`.
    fn feed(&mut self, conn: ConnId, bytes: Vec<u8>, split: usize) {
        if split > 0 && split < bytes.len() {
            let (a, b) = bytes.split_at(split);
            let (a, b) = (a.to_vec(), b.to_vec());
            self.step(Input::Data { conn, bytes: a });
            if self.conns.contains_key(&conn) {
                self.step(Input::Data { conn, bytes: b });
            }
        } else {
            self.step(Input::Data { conn, bytes });
        }
    }

    /// How the router decodes what it is sent, and how we decode what it
    /// sends.
    fn rx(&self, conn: ConnId) -> Context {
        self.conns[&conn]
            .negotiated
            .as_ref()
            .map_or_else(Context::default, |n| n.rx)
    }
}

fn capabilities(flags: u8, asn: u32) -> Vec<Capability> {
    let mut caps = Vec::new();
    if flags & 0x01 == 0 {
        caps.push(Capability::Multiprotocol(Family::IPV4_UNICAST));
    }
    if flags & 0x02 != 0 {
        caps.push(Capability::Multiprotocol(Family::IPV6_UNICAST));
    }
    if flags & 0x04 == 0 {
        caps.push(Capability::FourOctetAs(asn));
    }
    if flags & 0x08 != 0 {
        caps.push(Capability::RouteRefresh);
        caps.push(Capability::EnhancedRouteRefresh);
    }
    if flags & 0x10 != 0 {
        caps.push(Capability::GracefulRestart(GracefulRestart {
            flags: GracefulRestart::NOTIFICATION,
            restart_time: 120,
            families: vec![GrFamily {
                family: Family::IPV4_UNICAST,
                flags: 0,
            }],
        }));
    }
    if flags & 0x20 != 0 {
        caps.push(Capability::ExtendedMessage);
    }
    if flags & 0x40 != 0 {
        caps.push(Capability::AddPath(vec![(
            Family::IPV4_UNICAST,
            AddPathMode::Both,
        )]));
        caps.push(Capability::ExtendedNextHop(vec![
            bgp_proto::capability::ExtendedNextHop::IPV4_UNICAST_OVER_IPV6,
        ]));
    }
    caps
}

/// `n` prefixes from a seed and a stride (IPv4 or IPv6, or both).
fn prefixes(s: &mut Script, n: usize) -> Vec<IpNet> {
    let fam = s.u8();
    let len = s.u8();
    let seed = s.u32();
    let stride = s.u32() | 1;
    (0..n)
        .map(|i| {
            let x = seed.wrapping_add(stride.wrapping_mul(i as u32));
            let v6 = match fam % 3 {
                0 => false,
                1 => true,
                _ => i % 2 == 1,
            };
            if v6 {
                let l = 16 + len % 113;
                let a = Ipv6Addr::from((0x2001_0db8u128 << 96) | (u128::from(x) << 64));
                IpNet::V6(Ipv6Net::new(a, l).expect("a prefix length").trunc())
            } else {
                let l = 8 + len % 25;
                IpNet::V4(
                    Ipv4Net::new(Ipv4Addr::from(x), l)
                        .expect("a prefix length")
                        .trunc(),
                )
            }
        })
        .collect()
}

/// Attribute sets for a table of `routes`: `kinds` of them, or one per
/// route (`flags` bit 7), each with its community; large communities (bit
/// 0), MED (bit 1), LOCAL_PREF (bit 2), a prepend (bits 3–5), and 48
/// communities and 24 large communities more (bit 6: some 500 octets, so
/// that a table of fat routes fills the output limit in a few steps).
fn attribute_sets(kinds: u8, flags: u8, routes: usize) -> Vec<Arc<RouteAttrs>> {
    let n = if flags & 0x80 != 0 {
        routes.max(1) as u32
    } else {
        u32::from(kinds.max(1))
    };
    let fat = flags & 0x40 != 0;
    (0..n)
        .map(|k| {
            let mut communities = vec![(65001 << 16) | (k & 0xffff)];
            let mut large_communities = Vec::new();
            if flags & 1 != 0 {
                large_communities.push((65001, k, 1));
            }
            if fat {
                communities.extend((1..=48).map(|i| (i << 16) | (k & 0xffff)));
                large_communities.extend((2..=25).map(|i| (65001, k, i)));
            }
            Arc::new(
                RouteAttrs {
                    communities,
                    large_communities,
                    med: (flags & 2 != 0).then_some(k),
                    local_pref: (flags & 4 != 0).then_some(100 + k),
                    as_path_prepend: (flags >> 3) & 7,
                    ..RouteAttrs::default()
                }
                .canonical(),
            )
        })
        .collect()
}

fn table(prefixes: Vec<IpNet>, sets: &[Arc<RouteAttrs>]) -> Arc<PeerTable> {
    Arc::new(PeerTable::from_vec(
        prefixes
            .into_iter()
            .enumerate()
            .map(|(i, p)| (p, sets[i % sets.len()].clone()))
            .collect(),
    ))
}

/// A message from the router on `conn`, well-formed: `what % 5` picks
/// OPEN, KEEPALIVE, UPDATE, ROUTE-REFRESH or NOTIFICATION.
fn peer_message(h: &Harness, s: &mut Script, conn: ConnId, what: u8, peer_asn: u32) -> Vec<u8> {
    match what % 5 {
        0 => {
            let f = s.u8();
            let hold = s.u16();
            let id = s.u32();
            let asn = if f & 0x80 != 0 { s.u32() } else { peer_asn };
            Message::Open(Open::new(
                asn,
                hold,
                Ipv4Addr::from(id),
                capabilities(f, asn),
            ))
            .encode(&Context::default())
            .expect("an OPEN fits")
        }
        1 => Message::Keepalive
            .encode(&Context::default())
            .expect("a KEEPALIVE fits"),
        2 => {
            let ctx = h.rx(conn);
            let n = usize::from(s.u16()) % 1024;
            let list = prefixes(s, n);
            let v6 = list.first().is_some_and(|p| p.addr().is_ipv6());
            let attrs = [
                PathAttribute::new(AttrValue::Origin(Origin::Egp)),
                PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![peer_asn]))),
            ];
            let (family, nh) = if v6 {
                (Family::IPV6_UNICAST, IpAddr::V6(PEER_V6))
            } else {
                (Family::IPV4_UNICAST, IpAddr::V4(PEER_V4))
            };
            let nlri: Vec<Nlri> = list
                .iter()
                .filter(|p| p.addr().is_ipv6() == v6)
                .map(|p| Nlri::new(*p))
                .collect();
            let mut bytes = Vec::new();
            for u in pack::announcements(&ctx, family, &attrs, &[nh], &nlri).0 {
                Message::Update(u)
                    .encode_into(&ctx, &mut bytes)
                    .expect("pack keeps UPDATEs within the maximum size");
            }
            if bytes.is_empty() {
                Message::Update(bgp_proto::Update::end_of_rib(family))
                    .encode_into(&ctx, &mut bytes)
                    .expect("End-of-RIB fits");
            }
            bytes
        }
        3 => {
            let family = if s.u8() & 1 != 0 {
                Family::IPV6_UNICAST
            } else {
                Family::IPV4_UNICAST
            };
            let subtype = s.u8() % 4;
            Message::RouteRefresh(RouteRefresh::new(family, subtype))
                .encode(&Context::default())
                .expect("a ROUTE-REFRESH fits")
        }
        _ => Message::Notification(Notification::new(s.u8(), s.u8(), Vec::new()))
            .encode(&Context::default())
            .expect("a NOTIFICATION fits"),
    }
}

/// Runs one script (see the module documentation); panics when the
/// session breaks one of the properties listed there. Returns how deep
/// the script went.
pub fn session(data: &[u8]) -> Reached {
    let mut s = Script(data);
    let setup = setup(&mut s);
    let base = Instant::now();
    let spec = setup.spec;
    let addresses: Vec<holdfast_sockopt::InterfaceAddress> = [
        (IpAddr::V4(LOCAL_V4), 24),
        (IpAddr::V6(LOCAL_V6), 64),
        (IpAddr::V6("fe80::2".parse().expect("an address")), 64),
    ]
    .into_iter()
    .map(|(address, prefix_len)| holdfast_sockopt::InterfaceAddress {
        interface: "eth0".into(),
        address,
        prefix_len,
    })
    .collect();
    let mut h = Harness {
        fsm_config: spec.fsm_config(),
        configured: spec.families(),
        passive: spec.peer.passive,
        session: PeerSession::with_jitter_seed(
            spec,
            base,
            Box::new(move || addresses.clone()),
            setup.jitter_seed,
        ),
        base,
        now: base,
        conns: BTreeMap::new(),
        next_conn: 0,
        connecting: false,
        started: false,
        bfd_up: false,
        routes_ready: setup.routes_ready,
        table: Arc::default(),
        reached: Reached::default(),
    };
    h.session.set_routes_ready(setup.routes_ready);
    h.step(Input::Start {
        bfd_up: setup.bfd_up,
    });
    let peer_asn = setup.peer_asn;
    for _ in 0..MAX_STEPS {
        if s.0.is_empty() {
            break;
        }
        match s.u8() % 20 {
            0 => {
                let d = Duration::from_millis(u64::from(s.u16()) * 16);
                h.advance(d, true);
            }
            1 => {
                // The driver wakes at the next deadline.
                let next = h
                    .session
                    .next_deadline()
                    .unwrap_or(h.now + Duration::from_secs(1));
                h.now = h.now.max(next);
                h.fire();
            }
            2 => {
                // Time passes while the driver is busy: the next input
                // comes before the timer.
                let d = Duration::from_millis(u64::from(s.u8()) * 64);
                h.advance(d, false);
            }
            3 => {
                if h.connecting {
                    h.connected(Direction::Outgoing, setup.ipv6_peering);
                }
            }
            4 => h.connected(Direction::Incoming, setup.ipv6_peering),
            5 => {
                if h.connecting {
                    h.step(Input::ConnectFailed("connection refused".into()));
                }
            }
            6 => {
                if let Some(conn) = h.conn(s.u8()) {
                    h.step(Input::Closed {
                        conn,
                        why: "closed by the peer".into(),
                    });
                }
            }
            7 => {
                // A well-formed message from the router.
                let pick = s.u8();
                let what = s.u8();
                let split = usize::from(s.u16());
                if let Some(conn) = h.conn(pick) {
                    let bytes = peer_message(&h, &mut s, conn, what, peer_asn);
                    h.feed(conn, bytes, split);
                }
            }
            8 => {
                // The router's OPEN then KEEPALIVE, in one read: the way
                // to Established.
                let pick = s.u8();
                if let Some(conn) = h.conn(pick) {
                    let mut bytes = peer_message(&h, &mut s, conn, 0, peer_asn);
                    bytes.extend(peer_message(&h, &mut s, conn, 1, peer_asn));
                    h.feed(conn, bytes, 0);
                }
            }
            9 => {
                // A well-formed message with one octet changed.
                let pick = s.u8();
                let what = s.u8();
                let at = usize::from(s.u16());
                let value = s.u8();
                if let Some(conn) = h.conn(pick) {
                    let mut bytes = peer_message(&h, &mut s, conn, what, peer_asn);
                    let i = at % bytes.len();
                    bytes[i] = value;
                    h.feed(conn, bytes, 0);
                }
            }
            10 => {
                // Arbitrary octets, the chunk repeated: large reads.
                let pick = s.u8();
                let len = usize::from(s.u16() % 4096);
                let times = usize::from(s.u8() % 16) + 1;
                let chunk = s.bytes(len);
                if let Some(conn) = h.conn(pick) {
                    h.step(Input::Data {
                        conn,
                        bytes: chunk.repeat(times),
                    });
                }
            }
            11 => {
                // The writer's progress.
                let pick = s.u8();
                let octets = u64::from(s.u16()) * 64;
                if let Some(conn) = h.conn(pick) {
                    let c = &h.conns[&conn];
                    let total = if octets == 0 {
                        c.enqueued
                    } else {
                        (c.written + octets).min(c.enqueued)
                    };
                    h.step(Input::Written { conn, total });
                }
            }
            12 => {
                // A new table.
                let n = usize::from(s.u16()) % (MAX_TABLE + 1);
                let kinds = s.u8();
                let flags = s.u8();
                let list = prefixes(&mut s, n);
                let t = table(list, &attribute_sets(kinds, flags, n));
                h.step(Input::Table(t));
            }
            13 => {
                // The table edited: every `m`th route goes, a few come.
                let m = usize::from(s.u8()).max(1);
                let r = usize::from(s.u8()) % m;
                let n = usize::from(s.u8());
                let kinds = s.u8();
                let flags = s.u8();
                let sets = attribute_sets(kinds, flags, n);
                let mut list: Vec<(IpNet, Arc<RouteAttrs>)> = h
                    .table
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % m != r)
                    .map(|(_, (p, a))| (*p, a.clone()))
                    .collect();
                for (i, p) in prefixes(&mut s, n).into_iter().enumerate() {
                    list.push((p, sets[i % sets.len()].clone()));
                }
                list.truncate(MAX_TABLE);
                h.step(Input::Table(Arc::new(PeerTable::from_vec(list))));
            }
            14 => h.step(Input::RoutesReady(true)),
            15 => {
                if setup.bfd {
                    let up = s.u8() & 1 != 0;
                    h.step(Input::Bfd {
                        up,
                        diag: if up {
                            "none"
                        } else {
                            "control detection time expired"
                        }
                        .into(),
                    });
                }
            }
            16 => h.step(Input::EndRestart),
            17 => {
                if let Some(conn) = h.conn(s.u8()) {
                    h.step(Input::SendStalled { conn });
                }
            }
            18 => {
                // A ROUTE-REFRESH and a KEEPALIVE from the router, the
                // common case of a refresh, in the peer's context.
                let pick = s.u8();
                if let Some(conn) = h.conn(pick) {
                    let mut bytes = peer_message(&h, &mut s, conn, 3, peer_asn);
                    bytes.extend(peer_message(&h, &mut s, conn, 1, peer_asn));
                    h.feed(conn, bytes, 0);
                }
            }
            _ => {
                // The daemon stops the session: the driver's last input.
                let how = match s.u8() % 4 {
                    0 => StopHow::Graceful,
                    1 => StopHow::Withdraw("node drained".into()),
                    2 => StopHow::Deconfigured,
                    _ => StopHow::Reconfigured,
                };
                h.step(Input::Stop(how));
                break;
            }
        }
    }
    h.reached
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every header is a configuration the config layer accepts (a script
    /// must never fail on its own harness).
    #[test]
    fn every_header_parses() {
        for flags in 0..=255u8 {
            for asn in 0..6u8 {
                // No hold time, IPv4; the largest, IPv6 and the longest
                // connect_retry.
                for (hold, more) in [(0u16, 0u8), (65535, 0xff)] {
                    let mut h = vec![flags, asn];
                    h.extend(hold.to_be_bytes());
                    h.extend([3, 30, more, 0xff]);
                    setup(&mut Script(&h));
                }
            }
        }
    }
}

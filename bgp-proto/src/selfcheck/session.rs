//! The `session` fuzz target: a whole BGP session driven by a script of
//! arbitrary steps.
//!
//! What runs is the sans-IO core of a holdfast session: the RFC 4271 §8 FSM
//! (`bgp_proto::fsm::Session`) and the speaker's UPDATE packing
//! (`bgp_proto::pack`, what `src/speaker` encodes the Adj-RIB-Out with).
//! The holdfast crate itself (its driver in `src/session` and the per-peer
//! speaker in `src/speaker/peer.rs`, which pull in tokio and kube) is not
//! linked; this harness plays them: it answers `Up` with the table and
//! End-of-RIB, `RouteRefresh` with BoRR/table/EoRR (RFC 7313 §4), hands
//! every UPDATE to the FSM through `Event::SendUpdates`, and encodes the
//! FSM's typed messages (`Action::Send`) in the context given, as the
//! driver does.
//!
//! The input is a script. The first 17 octets configure the session; then
//! each step is an opcode octet and its arguments (missing octets read as
//! 0): advance time, tick at the next deadline, TCP connected (ours or
//! theirs), TCP failed or closed, a well-formed OPEN / KEEPALIVE / UPDATE /
//! ROUTE-REFRESH / NOTIFICATION from the peer (so that deep states are
//! reached), arbitrary octets in arbitrary chunks (repeated, to make large
//! reads), manual start/stop, "send routes" (a table of prefixes derived
//! from the input, packed in the negotiated context), send hold timer
//! expiry.
//!
//! Checked after every event (a violation is a crash):
//! - nothing panics;
//! - every typed message goes out in the context it must (OPEN and
//!   KEEPALIVE in the default one, a NOTIFICATION on an established
//!   connection in the negotiated one) and encodes there;
//! - every message we send decodes again (an UPDATE also validates without
//!   error, RFC 7606) and fits the negotiated maximum message size (RFC
//!   4271 §4.1, RFC 8654 §4);
//! - what the FSM buffers per connection stays below that connection's
//!   maximum message size, however the octets are chunked, and at most
//!   three connections are held (ours and two of theirs): bounded memory;
//! - after a Tick at `now`, `next_deadline` is later than `now` (no busy
//!   loop), and a started session that sits in Idle without connections
//!   still has a deadline (it restarts by itself, RFC 4271 §8.1.1);
//! - the StateChange actions chain from the previous state to the current
//!   one, and the session is Established exactly when it reports an
//!   established connection.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, Instant};

use crate::consts::{MAX_EXTENDED_MESSAGE_LEN, MAX_MESSAGE_LEN};
use crate::fsm::{Action, Config, ConnId, Direction, Event, Negotiated, Session, State, Stats};
use crate::nlri::Nlri;
use crate::{
    AddPathMode, AsPath, AttrValue, Capability, Context, Family, GrFamily, GracefulRestart,
    Message, Notification, Open, Origin, PathAttribute, RouteRefresh, Update, pack,
};
use ipnet::{IpNet, Ipv4Net, Ipv6Net};

/// Steps per input: a script is a few hundred steps at most in practice.
const MAX_STEPS: usize = 4096;

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

fn capabilities(flags: u8, asn: u32) -> Vec<Capability> {
    let mut caps = vec![
        Capability::Multiprotocol(Family::IPV4_UNICAST),
        Capability::FourOctetAs(asn),
    ];
    if flags & 0x02 != 0 {
        caps.push(Capability::ExtendedMessage);
    }
    if flags & 0x04 != 0 {
        caps.push(Capability::Multiprotocol(Family::IPV6_UNICAST));
    }
    if flags & 0x08 != 0 {
        caps.push(Capability::RouteRefresh);
        caps.push(Capability::EnhancedRouteRefresh);
    }
    if flags & 0x10 != 0 {
        caps.push(Capability::GracefulRestart(GracefulRestart {
            flags: 0x4,
            restart_time: 120,
            families: vec![GrFamily {
                family: Family::IPV4_UNICAST,
                flags: 0,
            }],
        }));
    }
    if flags & 0x20 != 0 {
        caps.push(Capability::AddPath(vec![(
            Family::IPV4_UNICAST,
            AddPathMode::Both,
        )]));
    }
    caps
}

/// The harness's view of the session: what a driver knows.
struct Driver {
    session: Session,
    base: Instant,
    now: Instant,
    next_conn: u64,
    /// Connections reported connected, in order (steps pick among them).
    conns: Vec<ConnId>,
    /// What each connection negotiated, from its `Up`.
    negotiated: HashMap<ConnId, Negotiated>,
    /// ManualStart given, no ManualStop since.
    enabled: bool,
    /// Our OPEN offers Extended Message: a connection not yet up may carry
    /// messages up to 65535 octets once the peer's OPEN offered it too.
    local_extended: bool,
    state: State,
    /// The prefixes we originate (sent on Up and on ROUTE-REFRESH).
    table: Vec<IpNet>,
    as_path_len: usize,
    ibgp: bool,
    local_asn: u32,
}

impl Driver {
    fn conn(&self, pick: u8) -> ConnId {
        if self.conns.is_empty() {
            ConnId(u64::from(pick))
        } else {
            self.conns[usize::from(pick) % self.conns.len()]
        }
    }

    fn fresh_conn(&mut self) -> ConnId {
        self.next_conn += 1;
        let id = ConnId(self.next_conn);
        self.conns.push(id);
        if self.conns.len() > 8 {
            self.conns.remove(0);
        }
        id
    }

    /// The context messages to/from the established connection use.
    fn tx(&self) -> Option<Context> {
        self.session.established().map(|(_, n)| n.tx)
    }

    /// The UPDATEs announcing `prefixes` of the negotiated families, as
    /// `src/speaker` packs them.
    fn updates(&self, ctx: &Context, families: &[Family], prefixes: &[IpNet]) -> Vec<Vec<u8>> {
        let mut attrs = vec![
            PathAttribute::new(AttrValue::Origin(Origin::Igp)),
            PathAttribute::new(AttrValue::AsPath(AsPath::sequence(if self.ibgp {
                Vec::new()
            } else {
                vec![self.local_asn; self.as_path_len.max(1)]
            }))),
        ];
        if self.ibgp {
            // RFC 4271 §5.1.5: LOCAL_PREF in every UPDATE to an internal peer.
            attrs.push(PathAttribute::new(AttrValue::LocalPref(100)));
        }
        let (v4, v6): (Vec<Nlri>, Vec<Nlri>) = prefixes
            .iter()
            .map(|p| Nlri::new(*p))
            .partition(|n| matches!(n.prefix, IpNet::V4(_)));
        let mut out = Vec::new();
        let mut push = |ups: Vec<Update>| {
            for u in ups {
                out.push(
                    Message::Update(u)
                        .encode(ctx)
                        .expect("pack keeps UPDATEs within the maximum size"),
                );
            }
        };
        if families.contains(&Family::IPV4_UNICAST) && !v4.is_empty() {
            let nh = [IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1))];
            push(pack::announcements(ctx, Family::IPV4_UNICAST, &attrs, &nh, &v4).0);
        }
        if families.contains(&Family::IPV6_UNICAST) && !v6.is_empty() {
            let nh = [IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1))];
            push(pack::announcements(ctx, Family::IPV6_UNICAST, &attrs, &nh, &v6).0);
        }
        out
    }

    fn event(&mut self, event: Event) {
        let mut queue = vec![event];
        while !queue.is_empty() {
            let ev = queue.remove(0);
            let tick = ev == Event::Tick;
            let actions = self.session.handle(self.now, ev);
            for a in actions {
                self.action(a, &mut queue);
            }
            self.check(tick);
        }
    }

    fn action(&mut self, a: Action, queue: &mut Vec<Event>) {
        match a {
            Action::Send { conn, message, ctx } => {
                // The driver encodes it in the context given: it must be
                // the connection's, and the message must fit it.
                if let Some(want) = self.encoding_context(conn, &message) {
                    assert_eq!(ctx, want, "{} in the wrong context", message.name());
                }
                let bytes = match message.encode(&ctx) {
                    Ok(b) => b,
                    Err(e) => panic!("we sent a {} that does not encode: {e}", message.name()),
                };
                self.check_sent(conn, &bytes);
            }
            Action::SendEncoded { conn, bytes } => self.check_sent(conn, &bytes),
            Action::StateChange { from, to, .. } => {
                assert_eq!(from, self.state, "StateChange from a state we were not in");
                assert_ne!(from, to, "StateChange to the same state");
                self.state = to;
            }
            Action::Up { conn, negotiated } => {
                // The driver sends the table, then End-of-RIB for each
                // family (RFC 4724 §2).
                let mut msgs = self.updates(&negotiated.tx, &negotiated.families, &self.table);
                for f in &negotiated.families {
                    msgs.push(
                        Message::Update(Update::end_of_rib(*f))
                            .encode(&negotiated.tx)
                            .expect("End-of-RIB encodes"),
                    );
                }
                self.negotiated.insert(conn, *negotiated);
                queue.push(Event::SendUpdates(msgs));
            }
            Action::RouteRefresh { family, enhanced } => {
                let Some(ctx) = self.tx() else {
                    panic!("RouteRefresh while not established")
                };
                // RFC 7313 §4: BoRR, the table, EoRR.
                let rr = |subtype| {
                    Message::RouteRefresh(RouteRefresh::new(family, subtype))
                        .encode(&ctx)
                        .expect("ROUTE-REFRESH encodes")
                };
                let mut msgs = Vec::new();
                if enhanced {
                    msgs.push(rr(1));
                }
                msgs.extend(self.updates(&ctx, &[family], &self.table));
                if enhanced {
                    msgs.push(rr(2));
                }
                queue.push(Event::SendUpdates(msgs));
            }
            Action::Close { conn } => {
                self.negotiated.remove(&conn);
            }
            Action::Connect
            | Action::AbortConnect
            | Action::Down { .. }
            | Action::NotificationSent { .. }
            | Action::NotificationReceived { .. }
            | Action::UpdateReceived(_) => {}
        }
    }

    /// What a typed message must go out in, where the harness knows: OPEN
    /// and KEEPALIVE in the default context (RFC 4271 §4.2: before
    /// anything is negotiated; a KEEPALIVE is the header alone), a
    /// NOTIFICATION on an established connection in its negotiated one.
    /// (A NOTIFICATION in OpenConfirm uses what the OPENs agreed, which the
    /// harness learns only at `Up`: `check_sent` bounds its size.)
    fn encoding_context(&self, conn: ConnId, message: &Message) -> Option<Context> {
        match (message, self.negotiated.get(&conn)) {
            (Message::Notification(_), Some(n)) => Some(n.tx),
            (Message::Notification(_), None) => None,
            _ => Some(Context::default()),
        }
    }

    /// What we send is well-formed and fits the connection's maximum size.
    fn check_sent(&self, conn: ConnId, bytes: &[u8]) {
        let ctx = match self.negotiated.get(&conn) {
            Some(n) => n.tx,
            None => Context {
                max_message_len: if self.local_extended {
                    MAX_EXTENDED_MESSAGE_LEN
                } else {
                    MAX_MESSAGE_LEN
                },
                ..Context::default()
            },
        };
        assert!(
            bytes.len() <= ctx.max_message_len,
            "sent {} octets, maximum {}",
            bytes.len(),
            ctx.max_message_len
        );
        let msg = match Message::decode(bytes, &ctx) {
            Ok(m) => m,
            Err(e) => panic!("we sent a message that does not decode: {e:?}"),
        };
        if let Message::Update(u) = msg {
            let v = u.validate(&ctx);
            assert!(
                v.action.is_none() && v.errors.is_empty(),
                "we sent a malformed UPDATE: {:?}",
                v.errors
            );
        }
    }

    fn check(&self, after_tick: bool) {
        let state = self.session.state();
        assert_eq!(state, self.state, "state changed without a StateChange");
        assert_eq!(
            state == State::Established,
            self.session.established().is_some(),
            "Established without an established connection, or the reverse"
        );
        let mut held = 0;
        for (conn, len, max) in self.session.receive_buffers() {
            held += 1;
            // A complete header is checked at once, so less than one
            // message stays buffered after the event.
            assert!(
                len < max,
                "{conn:?} buffers {len} octets (max message {max})"
            );
            assert!(max <= MAX_EXTENDED_MESSAGE_LEN);
        }
        assert!(held <= 3, "{held} connections held");
        let deadline = self.session.next_deadline();
        if after_tick && let Some(d) = deadline {
            assert!(
                d > self.now,
                "next deadline {:?} is not after the tick at {:?}",
                d - self.base,
                self.now - self.base
            );
        }
        if self.enabled && state == State::Idle && held == 0 {
            assert!(
                deadline.is_some(),
                "a started session is stuck in Idle with no timer"
            );
        }
    }

    fn feed(&mut self, conn: ConnId, bytes: Vec<u8>, split: usize) {
        if split > 0 && split < bytes.len() {
            let (a, b) = bytes.split_at(split);
            let (a, b) = (a.to_vec(), b.to_vec());
            self.event(Event::Data { conn, bytes: a });
            self.event(Event::Data { conn, bytes: b });
        } else {
            self.event(Event::Data { conn, bytes });
        }
    }
}

fn prefixes(s: &mut Script, v6: bool) -> Vec<IpNet> {
    let n = usize::from(s.u16() % 2048);
    let len = s.u8();
    let seed = s.u32();
    let stride = s.u32() | 1;
    (0..n)
        .map(|i| {
            let x = seed.wrapping_add(stride.wrapping_mul(i as u32));
            if v6 {
                let l = 16 + len % 113;
                let a = Ipv6Addr::from((0x2001_0db8u128 << 96) | (u128::from(x) << 64));
                IpNet::V6(Ipv6Net::new(a, l).unwrap().trunc())
            } else {
                let l = 8 + len % 25;
                IpNet::V4(Ipv4Net::new(Ipv4Addr::from(x), l).unwrap().trunc())
            }
        })
        .collect()
}

/// Runs one script (see the module documentation); panics when the
/// session breaks one of the properties listed there. Returns the session's
/// counters, so that tests can tell how deep a script went.
pub fn session(data: &[u8]) -> Stats {
    let mut s = Script(data);
    let flags = s.u8();
    let hold = s.u16();
    let hold = if hold < 3 { 0 } else { hold };
    let connect_retry = Duration::from_secs(1 + u64::from(s.u8() % 120));
    let idle_hold = Duration::from_secs(1 + u64::from(s.u8() % 30));
    let router_id = Ipv4Addr::from(s.u32().max(1));
    let jitter_seed = s.u64();
    let local_asn = if flags & 0x80 != 0 {
        4_200_000_001
    } else {
        65001
    };
    let ibgp = flags & 0x40 != 0;
    let peer_asn = if ibgp { local_asn } else { 65002 };
    let config = Config {
        local_asn,
        peer_asn: peer_asn.into(),
        router_id,
        hold_time: hold,
        keepalive: Duration::from_secs(u64::from(hold / 3).max(1)),
        connect_retry,
        passive: flags & 0x01 != 0,
        capabilities: capabilities(flags, local_asn),
        idle_hold_time: idle_hold,
        max_idle_hold_time: idle_hold * 8,
        jitter_seed,
    };
    let base = Instant::now();
    let mut d = Driver {
        session: Session::new(config),
        base,
        now: base,
        next_conn: 0,
        conns: Vec::new(),
        negotiated: HashMap::new(),
        enabled: false,
        local_extended: flags & 0x02 != 0,
        state: State::Idle,
        table: Vec::new(),
        as_path_len: 1,
        ibgp,
        local_asn,
    };
    for _ in 0..MAX_STEPS {
        if s.0.is_empty() {
            break;
        }
        match s.u8() % 16 {
            0 => {
                d.now += Duration::from_millis(u64::from(s.u16()) * 16);
                d.event(Event::Tick);
            }
            1 => {
                // The driver wakes at the next deadline.
                let next = d
                    .session
                    .next_deadline()
                    .unwrap_or(d.now + Duration::from_secs(1));
                d.now = d.now.max(next);
                d.event(Event::Tick);
            }
            2 => {
                let conn = d.fresh_conn();
                d.event(Event::TcpConnected {
                    conn,
                    direction: Direction::Outgoing,
                });
            }
            3 => {
                let conn = d.fresh_conn();
                d.event(Event::TcpConnected {
                    conn,
                    direction: Direction::Incoming,
                });
            }
            4 => d.event(Event::TcpConnectFailed),
            5 => {
                let conn = d.conn(s.u8());
                d.event(Event::TcpClosed { conn });
            }
            6 => {
                // A well-formed OPEN from the peer.
                let conn = d.conn(s.u8());
                let f = s.u8();
                let hold = s.u16();
                let id = Ipv4Addr::from(s.u32());
                let split = usize::from(s.u8());
                let asn = if f & 0x80 != 0 { s.u32() } else { peer_asn };
                let open = Open::new(asn, hold, id, capabilities(f, asn));
                let bytes = Message::Open(open)
                    .encode(&Context::default())
                    .expect("OPEN encodes");
                d.feed(conn, bytes, split);
            }
            7 => {
                let conn = d.conn(s.u8());
                let bytes = Message::Keepalive.encode(&Context::default()).unwrap();
                d.event(Event::Data { conn, bytes });
            }
            8 => {
                // Arbitrary octets, the chunk repeated: large reads.
                let conn = d.conn(s.u8());
                let len = usize::from(s.u16() % 4096);
                let times = usize::from(s.u8() % 64) + 1;
                let chunk = s.bytes(len);
                d.event(Event::Data {
                    conn,
                    bytes: chunk.repeat(times),
                });
            }
            9 => {
                d.enabled = true;
                d.event(Event::ManualStart);
            }
            10 => {
                let n = (s.u8() & 1 != 0).then(|| Notification::cease(2));
                d.enabled = false;
                d.event(Event::ManualStop { notification: n });
            }
            11 => {
                // The table changes: withdraw the old one, announce the new.
                let v6 = s.u8() & 1 != 0;
                d.as_path_len = usize::from(s.u16() % 1200);
                let new = prefixes(&mut s, v6);
                let old = std::mem::replace(&mut d.table, new);
                if let Some((_, n)) = d.session.established() {
                    let (ctx, families) = (n.tx, n.families.clone());
                    let gone: Vec<(Family, Nlri)> = old
                        .iter()
                        .filter(|p| !d.table.contains(p))
                        .map(|p| {
                            let f = if p.addr().is_ipv4() {
                                Family::IPV4_UNICAST
                            } else {
                                Family::IPV6_UNICAST
                            };
                            (f, Nlri::new(*p))
                        })
                        .filter(|(f, _)| families.contains(f))
                        .collect();
                    let mut msgs: Vec<Vec<u8>> = pack::withdrawals(&ctx, &gone)
                        .into_iter()
                        .map(|u| Message::Update(u).encode(&ctx).expect("withdrawals fit"))
                        .collect();
                    msgs.extend(d.updates(&ctx, &families, &d.table));
                    d.event(Event::SendUpdates(msgs));
                } else {
                    // Not up: the FSM drops them.
                    let msgs = d.updates(&Context::default(), &[Family::IPV4_UNICAST], &d.table);
                    d.event(Event::SendUpdates(msgs));
                }
            }
            12 => {
                // A well-formed UPDATE from the peer, in the peer's context.
                let conn = d.conn(s.u8());
                let split = usize::from(s.u16());
                let ctx = d
                    .negotiated
                    .get(&conn)
                    .map_or_else(Context::default, |n| n.rx);
                let v6 = s.u8() & 1 != 0;
                let list = prefixes(&mut s, v6);
                let attrs = [
                    PathAttribute::new(AttrValue::Origin(Origin::Egp)),
                    PathAttribute::new(AttrValue::AsPath(AsPath::sequence(vec![peer_asn]))),
                ];
                let nlri: Vec<Nlri> = list.iter().map(|p| Nlri::new(*p)).collect();
                let nh = if v6 {
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 2))
                } else {
                    IpAddr::V4(Ipv4Addr::new(192, 0, 2, 2))
                };
                let family = if v6 {
                    Family::IPV6_UNICAST
                } else {
                    Family::IPV4_UNICAST
                };
                let mut bytes = Vec::new();
                for u in pack::announcements(&ctx, family, &attrs, &[nh], &nlri).0 {
                    Message::Update(u).encode_into(&ctx, &mut bytes).unwrap();
                }
                d.feed(conn, bytes, split);
            }
            13 => {
                let conn = d.conn(s.u8());
                d.event(Event::SendHoldTimerExpired { conn });
            }
            14 => {
                let conn = d.conn(s.u8());
                let family = if s.u8() & 1 != 0 {
                    Family::IPV6_UNICAST
                } else {
                    Family::IPV4_UNICAST
                };
                let subtype = s.u8() % 4;
                let bytes = Message::RouteRefresh(RouteRefresh::new(family, subtype))
                    .encode(&Context::default())
                    .unwrap();
                d.event(Event::Data { conn, bytes });
            }
            _ => {
                let conn = d.conn(s.u8());
                let n = Notification::new(s.u8(), s.u8(), Vec::new());
                let bytes = Message::Notification(n)
                    .encode(&Context::default())
                    .unwrap();
                d.event(Event::Data { conn, bytes });
            }
        }
    }
    d.session.stats().clone()
}

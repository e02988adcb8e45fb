//! BMP (RFC 7854): what holdfast sends each peer, reported to monitoring
//! stations as the peer's post-policy Adj-RIB-Out (RFC 8671).
//!
//! `message.rs` is the pure encoder. Here: the [`Hub`] (one per daemon:
//! the stations and their bounded queues), the [`PeerTap`] a session
//! reports through — it only ever pushes into a queue, never waits — and
//! each station's task: connect (exponential back-off), Initiation, then
//! what the sessions queue; a queue past its limit in octets drops the
//! connection (counted), and the next one starts from the whole state,
//! which each session sends again when it sees the station's generation
//! change (Peer Up, the Adj-RIB-Out, End-of-RIB: RFC 8671 §4, RFC 7854 §5).

pub mod message;
#[cfg(test)]
mod message_tests;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc, watch};
use tracing::{debug, info, warn};

use crate::config::BmpStation;
pub use message::DownReason;
use message::{PeerHeader, Stat, flags, msg_type};

/// Back-off between connection attempts: from this, doubling...
const BACKOFF_MIN: Duration = Duration::from_secs(1);
/// ...up to this.
const BACKOFF_MAX: Duration = Duration::from_secs(60);
/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the Termination may take at exit.
const TERMINATION_WAIT: Duration = Duration::from_secs(1);

/// What a queued message is, for the station's view of which peers are up
/// on its connection.
#[derive(Clone, Debug)]
enum Kind {
    /// Peer Up: the peer's header for its Stats Reports.
    Up(PeerHeader),
    Down,
    /// Route Monitoring (or anything else only sent while the peer is up).
    Route,
}

#[derive(Debug)]
struct Item {
    peer: Arc<str>,
    kind: Kind,
    bytes: Vec<u8>,
}

/// Counters of one station, as `/metrics` shows them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StationStatus {
    pub name: String,
    pub up: bool,
    /// Messages written, by type name ([`message::type_name`]).
    pub messages: Vec<(&'static str, u64)>,
    /// Connections dropped because the station fell behind.
    pub dropped: u64,
}

const TYPES: [u8; 6] = [
    msg_type::ROUTE_MONITORING,
    msg_type::STATISTICS_REPORT,
    msg_type::PEER_DOWN,
    msg_type::PEER_UP,
    msg_type::INITIATION,
    msg_type::TERMINATION,
];

/// One station, shared between its task and the sessions' taps.
struct Station {
    config: BmpStation,
    /// Connected and initiated: the taps queue only then.
    live: AtomicBool,
    /// The queue went past its limit: the task drops the connection.
    overflow: AtomicBool,
    /// Octets queued and not yet written.
    queued: AtomicU64,
    /// Bumped on each new connection: the sessions send their state again.
    generation: AtomicU64,
    tx: mpsc::UnboundedSender<Item>,
    wake: Notify,
    up: AtomicBool,
    messages: [AtomicU64; 6],
    dropped: AtomicU64,
}

impl Station {
    /// Queues `item`, never waiting: past the limit, marks the station as
    /// fallen behind and wakes its task instead.
    fn push(&self, item: Item) {
        if !self.live.load(Ordering::Acquire) || self.overflow.load(Ordering::Acquire) {
            return;
        }
        let n = item.bytes.len() as u64;
        let before = self.queued.fetch_add(n, Ordering::AcqRel);
        if before + n > self.config.queue_limit {
            self.queued.fetch_sub(n, Ordering::AcqRel);
            self.overflow.store(true, Ordering::Release);
            self.wake.notify_one();
            return;
        }
        if self.tx.send(item).is_err() {
            self.queued.fetch_sub(n, Ordering::AcqRel);
        }
    }

    fn count(&self, t: u8) {
        if let Some(i) = TYPES.iter().position(|x| *x == t) {
            self.messages[i].fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A peer's Adj-RIB-Out counts, read by the stations' Stats Reports.
#[derive(Default)]
struct Counts {
    ipv4: AtomicU64,
    ipv6: AtomicU64,
}

struct HubInner {
    stations: Vec<Arc<Station>>,
    /// Bumped with any station's generation: wakes the sessions.
    resync: watch::Sender<u64>,
    /// Each peer's counts (by name), for the Stats Reports.
    counts: Mutex<HashMap<Arc<str>, Arc<Counts>>>,
    stop: watch::Sender<bool>,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

/// The daemon's BMP stations. Cloning shares them.
#[derive(Clone)]
pub struct Hub {
    inner: Arc<HubInner>,
}

impl Hub {
    /// Starts one task per station; `sys_name` is the node's name.
    pub fn start(stations: &[BmpStation], sys_name: &str) -> Hub {
        let (hub, receivers) = Hub::new(stations);
        let descr = format!("holdfast {}", crate::build_info::VERSION);
        let tasks = hub
            .inner
            .stations
            .iter()
            .cloned()
            .zip(receivers)
            .map(|(s, rx)| {
                tokio::spawn(run_station(
                    hub.clone(),
                    s,
                    rx,
                    sys_name.to_string(),
                    descr.clone(),
                ))
            })
            .collect();
        *hub.inner.tasks.lock().unwrap_or_else(|e| e.into_inner()) = tasks;
        hub
    }

    /// The stations and their queues' receiving ends, no task started.
    fn new(stations: &[BmpStation]) -> (Hub, Vec<mpsc::UnboundedReceiver<Item>>) {
        let mut list = Vec::new();
        let mut receivers = Vec::new();
        for c in stations {
            let (tx, rx) = mpsc::unbounded_channel();
            list.push(Arc::new(Station {
                config: c.clone(),
                live: AtomicBool::new(false),
                overflow: AtomicBool::new(false),
                queued: AtomicU64::new(0),
                generation: AtomicU64::new(0),
                tx,
                wake: Notify::new(),
                up: AtomicBool::new(false),
                messages: Default::default(),
                dropped: AtomicU64::new(0),
            }));
            receivers.push(rx);
        }
        let hub = Hub {
            inner: Arc::new(HubInner {
                stations: list,
                resync: watch::channel(0).0,
                counts: Mutex::new(HashMap::new()),
                stop: watch::channel(false).0,
                tasks: Mutex::new(Vec::new()),
            }),
        };
        (hub, receivers)
    }

    /// No stations.
    pub fn is_empty(&self) -> bool {
        self.inner.stations.is_empty()
    }

    /// The tap of the peer called `name`, for its session.
    pub fn tap(&self, name: &str) -> Option<PeerTap> {
        if self.is_empty() {
            return None;
        }
        let peer: Arc<str> = Arc::from(name);
        let counts = Arc::new(Counts::default());
        self.inner
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(peer.clone(), counts.clone());
        Some(PeerTap {
            hub: self.inner.clone(),
            peer,
            counts,
            // What the stations connected now are sent from here on is
            // live: only a later connection needs this session's state.
            seen: self
                .inner
                .stations
                .iter()
                .map(|s| s.generation.load(Ordering::Acquire))
                .collect(),
            resync: self.inner.resync.subscribe(),
            up: None,
            sent_notification: None,
        })
    }

    /// Each station's counters.
    pub fn status(&self) -> Vec<StationStatus> {
        self.inner
            .stations
            .iter()
            .map(|s| StationStatus {
                name: s.config.name.clone(),
                up: s.up.load(Ordering::Relaxed),
                messages: TYPES
                    .iter()
                    .zip(&s.messages)
                    .map(|(t, n)| (message::type_name(*t), n.load(Ordering::Relaxed)))
                    .collect(),
                dropped: s.dropped.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Sends each connected station a Termination (RFC 7854 §4.5) after
    /// what is queued, and waits (briefly) for it to go out.
    pub async fn terminate(&self) {
        self.inner.stop.send_replace(true);
        let tasks =
            std::mem::take(&mut *self.inner.tasks.lock().unwrap_or_else(|e| e.into_inner()));
        for t in tasks {
            let _ = tokio::time::timeout(TERMINATION_WAIT * 2, t).await;
        }
    }
}

/// What a session that came up tells BMP.
#[derive(Clone, Debug)]
pub struct Up {
    pub peer_address: IpAddr,
    pub peer_asn: u32,
    pub peer_id: Ipv4Addr,
    /// Both sides use 4-octet AS numbers (RFC 6793): else the A flag.
    pub four_octet_as: bool,
    pub local: SocketAddr,
    pub remote_port: u16,
    /// The OPENs, whole BGP messages.
    pub sent_open: Vec<u8>,
    pub received_open: Vec<u8>,
}

/// A session's reporter: the session task calls it as it writes and as
/// its state changes. Every call only queues (never waits).
pub struct PeerTap {
    hub: Arc<HubInner>,
    peer: Arc<str>,
    counts: Arc<Counts>,
    /// The station generations this session has sent its state to.
    seen: Vec<u64>,
    resync: watch::Receiver<u64>,
    /// The session is up: how BMP names it.
    up: Option<(Up, PeerHeader)>,
    /// The NOTIFICATION we wrote last on the established session.
    sent_notification: Option<Vec<u8>>,
}

fn now() -> (u32, u32) {
    let t = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    (t.as_secs() as u32, t.subsec_micros())
}

/// RFC 8671 §4: O, the Adj-RIB-Out; L, post-policy (what is sent is what
/// holdfast's policy produced: there is no later stage); A when the
/// session's AS_PATH is in 2-octet form (RFC 7854 §4.2).
fn header(up: &Up) -> PeerHeader {
    let mut f = flags::O | flags::L;
    if !up.four_octet_as {
        f |= flags::A;
    }
    PeerHeader {
        peer_type: message::PEER_TYPE_GLOBAL,
        flags: f,
        distinguisher: 0,
        address: up.peer_address,
        asn: up.peer_asn,
        bgp_id: up.peer_id,
        seconds: 0,
        micros: 0,
    }
}

fn stamped(h: &PeerHeader) -> PeerHeader {
    let (seconds, micros) = now();
    PeerHeader {
        seconds,
        micros,
        ..h.clone()
    }
}

impl PeerTap {
    fn push_all(&self, kind: Kind, bytes: Vec<u8>, only: Option<usize>) {
        for (i, s) in self.hub.stations.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            s.push(Item {
                peer: self.peer.clone(),
                kind: kind.clone(),
                bytes: bytes.clone(),
            });
        }
    }

    /// The session is up.
    pub fn up(&mut self, up: Up) {
        let h = header(&up);
        self.sent_notification = None;
        let msg = peer_up_message(&up, &h);
        self.push_all(Kind::Up(h.clone()), msg, None);
        self.up = Some((up, h));
    }

    /// Whether the tap takes the session as up.
    pub fn is_up(&self) -> bool {
        self.up.is_some()
    }

    /// A message written on the established session (whole BGP message):
    /// an UPDATE becomes Route Monitoring (RFC 7854 §4.6), a NOTIFICATION
    /// is kept for the Peer Down.
    pub fn written(&mut self, bgp: &[u8]) {
        let Some((_, h)) = &self.up else { return };
        match message::bgp_type(bgp) {
            Some(2) => {
                let m = message::route_monitoring(&stamped(h), bgp);
                self.push_all(Kind::Route, m, None);
            }
            Some(3) => self.sent_notification = Some(bgp.to_vec()),
            _ => {}
        }
    }

    /// The session went down; `received`: the NOTIFICATION the peer sent,
    /// if that ended it; `by_peer`: the peer closed it.
    pub fn down(&mut self, received: Option<Vec<u8>>, by_peer: bool) {
        let Some((_, h)) = self.up.take() else {
            return;
        };
        let reason = match (self.sent_notification.take(), received) {
            (_, Some(n)) => DownReason::RemoteNotification(n),
            (Some(n), None) => DownReason::LocalNotification(n),
            (None, None) if by_peer => DownReason::RemoteNoData,
            (None, None) => DownReason::LocalNoNotification(0),
        };
        self.push_all(Kind::Down, message::peer_down(&stamped(&h), &reason), None);
        self.counts.ipv4.store(0, Ordering::Relaxed);
        self.counts.ipv6.store(0, Ordering::Relaxed);
    }

    /// The Adj-RIB-Out's size, for the Stats Reports.
    pub fn counts(&self, ipv4: usize, ipv6: usize) {
        self.counts.ipv4.store(ipv4 as u64, Ordering::Relaxed);
        self.counts.ipv6.store(ipv6 as u64, Ordering::Relaxed);
    }

    /// Completes when a station has (re)connected since this session last
    /// sent it its state: call [`PeerTap::resync`] then.
    pub async fn resync_wanted(&mut self) {
        let _ = self.resync.changed().await;
    }

    /// Sends each station that connected since the last call the
    /// session's state: Peer Up and `table()` (the Adj-RIB-Out as UPDATEs,
    /// then End-of-RIB) as Route Monitoring, when the session is up.
    pub fn resync(&mut self, table: impl FnOnce() -> Vec<Vec<u8>>) {
        self.resync.borrow_and_update();
        let mut table = Some(table);
        let mut messages: Option<Vec<Vec<u8>>> = None;
        for (i, s) in self.hub.stations.iter().enumerate() {
            let g = s.generation.load(Ordering::Acquire);
            if g == self.seen[i] {
                continue;
            }
            self.seen[i] = g;
            let Some((up, h)) = &self.up else { continue };
            self.push_all(Kind::Up(h.clone()), peer_up_message(up, h), Some(i));
            let list =
                messages.get_or_insert_with(|| table.take().map(|f| f()).unwrap_or_default());
            let h = stamped(h);
            for m in list.iter() {
                self.push_all(Kind::Route, message::route_monitoring(&h, m), Some(i));
            }
        }
    }
}

fn peer_up_message(up: &Up, h: &PeerHeader) -> Vec<u8> {
    message::peer_up(
        &stamped(h),
        up.local.ip(),
        up.local.port(),
        up.remote_port,
        &up.sent_open,
        &up.received_open,
    )
}

/// One station's task.
async fn run_station(
    hub: Hub,
    s: Arc<Station>,
    mut rx: mpsc::UnboundedReceiver<Item>,
    sys_name: String,
    descr: String,
) {
    let name = s.config.name.clone();
    let addr = SocketAddr::new(s.config.address, s.config.port);
    let mut stop = hub.inner.stop.subscribe();
    let mut backoff = BACKOFF_MIN;
    loop {
        if *stop.borrow() {
            return;
        }
        let conn = tokio::select! {
            c = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)) => c,
            _ = stop.changed() => return,
        };
        let mut sock = match conn {
            Ok(Ok(sock)) => sock,
            Ok(Err(e)) => {
                debug!(station = %name, "BMP station {addr}: {e}; again in {backoff:?}");
                if wait(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            Err(_) => {
                debug!(station = %name, "BMP station {addr}: no answer; again in {backoff:?}");
                if wait(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        let _ = sock.set_nodelay(true);
        // RFC 7854 §4.3: the Initiation is the first message.
        if sock
            .write_all(&message::initiation(&sys_name, &descr))
            .await
            .is_err()
        {
            if wait(&mut stop, backoff).await {
                return;
            }
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        s.count(msg_type::INITIATION);
        info!(station = %name, "BMP station {addr} connected");
        s.up.store(true, Ordering::Relaxed);
        // From here the sessions queue; each sends its whole state first.
        s.live.store(true, Ordering::Release);
        s.generation.fetch_add(1, Ordering::AcqRel);
        hub.inner.resync.send_modify(|g| *g += 1);
        let end = serve(&hub, &s, &mut sock, &mut rx, &mut stop).await;
        s.live.store(false, Ordering::Release);
        s.up.store(false, Ordering::Relaxed);
        // What was queued for this connection is void: the next one
        // starts from the whole state.
        while let Ok(item) = rx.try_recv() {
            s.queued
                .fetch_sub(item.bytes.len() as u64, Ordering::AcqRel);
        }
        s.overflow.store(false, Ordering::Release);
        match end {
            End::Stopped => {
                let _ = tokio::time::timeout(TERMINATION_WAIT, async {
                    if sock
                        .write_all(&message::termination("holdfast is stopping"))
                        .await
                        .is_ok()
                    {
                        s.count(msg_type::TERMINATION);
                        let _ = sock.shutdown().await;
                    }
                })
                .await;
                return;
            }
            End::Behind => {
                s.dropped.fetch_add(1, Ordering::Relaxed);
                warn!(station = %name, "BMP station {addr} fell {} octets behind: connection dropped; the next one is sent the whole state (in {backoff:?})", s.config.queue_limit);
                // A station that keeps falling behind is tried less and
                // less often: each try costs the sessions a whole table.
                if wait(&mut stop, backoff).await {
                    return;
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
            End::Failed(e) => {
                warn!(station = %name, "BMP station {addr}: {e}");
                backoff = BACKOFF_MIN;
            }
        }
        drop(sock);
        if wait(&mut stop, backoff).await {
            return;
        }
    }
}

/// Completes when the daemon stops.
async fn stopping(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Sleeps `d`; true if the daemon stops meanwhile.
async fn wait(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => false,
        _ = stopping(stop) => true,
    }
}

enum End {
    Stopped,
    Behind,
    Failed(String),
}

/// Writes what the sessions queue (and the Stats Reports) to one
/// connection until it fails, falls behind or the daemon stops.
async fn serve(
    hub: &Hub,
    s: &Station,
    sock: &mut TcpStream,
    rx: &mut mpsc::UnboundedReceiver<Item>,
    stop: &mut watch::Receiver<bool>,
) -> End {
    // The peers up on this connection, with their headers.
    let mut up: HashMap<Arc<str>, PeerHeader> = HashMap::new();
    let interval = s.config.stats_interval;
    let mut ticker = tokio::time::interval(if interval.is_zero() {
        Duration::from_secs(3600)
    } else {
        interval
    });
    ticker.tick().await;
    let mut batch: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut types: Vec<u8> = Vec::new();
    // RFC 7854 §3.3: a station sends nothing; what it sends is read and
    // dropped, and its end of the connection closing is noticed here.
    let (mut rd, mut wr) = sock.split();
    let mut scratch = [0u8; 512];
    loop {
        if s.overflow.load(Ordering::Acquire) {
            return End::Behind;
        }
        batch.clear();
        types.clear();
        tokio::select! {
            biased;
            _ = stopping(stop) => {
                // What is queued goes first (briefly), then the Termination.
                let _ = tokio::time::timeout(TERMINATION_WAIT, async {
                    while let Ok(item) = rx.try_recv() {
                        s.queued.fetch_sub(item.bytes.len() as u64, Ordering::AcqRel);
                        if admit(&mut up, &item) {
                            let _ = wr.write_all(&item.bytes).await;
                        }
                    }
                }).await;
                return End::Stopped;
            }
            _ = s.wake.notified() => continue,
            r = rd.read(&mut scratch) => match r {
                Ok(0) => return End::Failed("closed by the station".into()),
                Err(e) => return End::Failed(e.to_string()),
                Ok(_) => continue,
            },
            item = rx.recv() => {
                let Some(item) = item else { return End::Stopped };
                let mut next = Some(item);
                while let Some(item) = next.take() {
                    s.queued.fetch_sub(item.bytes.len() as u64, Ordering::AcqRel);
                    if admit(&mut up, &item) {
                        types.push(item.bytes[5]);
                        batch.extend_from_slice(&item.bytes);
                    }
                    if batch.len() < 1 << 16 {
                        next = rx.try_recv().ok();
                    }
                }
            }
            _ = ticker.tick(), if !interval.is_zero() => {
                let counts = hub.inner.counts.lock().unwrap_or_else(|e| e.into_inner()).clone();
                for (peer, h) in &up {
                    let Some(c) = counts.get(peer) else { continue };
                    let (v4, v6) = (c.ipv4.load(Ordering::Relaxed), c.ipv6.load(Ordering::Relaxed));
                    // RFC 8671 §5: type 15 in all, type 17 per AFI/SAFI.
                    let m = message::stats_report(&stamped(h), &[
                        Stat::Gauge(message::stat_type::ADJ_RIB_OUT_POST, v4 + v6),
                        Stat::PerFamily(message::stat_type::PER_AFI_SAFI_ADJ_RIB_OUT_POST, 1, 1, v4),
                        Stat::PerFamily(message::stat_type::PER_AFI_SAFI_ADJ_RIB_OUT_POST, 2, 1, v6),
                    ]);
                    types.push(msg_type::STATISTICS_REPORT);
                    batch.extend_from_slice(&m);
                }
            }
        }
        if batch.is_empty() {
            continue;
        }
        let written = tokio::select! {
            r = wr.write_all(&batch) => r,
            _ = s.wake.notified() => return End::Behind,
            _ = stopping(stop) => return End::Stopped,
        };
        if let Err(e) = written {
            return End::Failed(e.to_string());
        }
        for t in &types {
            s.count(*t);
        }
    }
}

/// Whether the station's connection takes `item`, keeping `up` (the peers
/// up on it): a Peer Up once, Route Monitoring and Peer Down only between
/// a Peer Up and its Peer Down (what was queued before the connection's
/// state was sent is in that state).
fn admit(up: &mut HashMap<Arc<str>, PeerHeader>, item: &Item) -> bool {
    match &item.kind {
        Kind::Up(h) => up.insert(item.peer.clone(), h.clone()).is_none(),
        Kind::Down => up.remove(&item.peer).is_some(),
        Kind::Route => up.contains_key(&item.peer),
    }
}

//! The HTTP API on `speaker.api` (default 127.0.0.1:9179): metrics, health,
//! status and explain, asked of the daemon through a [`StateView`].
//!
//! | endpoint | answer |
//! |---|---|
//! | `GET /metrics` | Prometheus text format 0.0.4 (every family: docs/src/reference/metrics.md, generated from `metrics::FAMILIES`) |
//! | `GET /healthz` | 200 `ok` while the process serves |
//! | `GET /readyz` | 200 `ready` (or `ready: NOTE`), or 503 `not ready: REASON` |
//! | `GET /v1/status` | JSON of [`Status`]: at most [`ROUTE_PAGE_MAX`] routes; `?offset=N&limit=M` pages them |
//! | `GET /v1/explain/{vip}` | JSON of [`Explanation`]; 400 `{"error": …}` when `{vip}` is not an IP address |
//! | `POST /v1/drain` | starts a planned withdrawal (RFC 8326 graceful shutdown, then withdraw); JSON of [`DrainStatus`] |
//! | `POST /v1/undrain` | ends it: the routes are advertised normally again; JSON of [`DrainStatus`], 409 while shutting down |
//! | `GET /v1/routes` | the runtime routes: a JSON list of [`RuntimeRoute`](crate::report::status::RuntimeRoute) |
//! | `POST /v1/routes/announce?prefix=P&…` | announces a runtime route (`advertisement`, `community`, `large_community`, `local_pref`, `med`, `as_path_prepend`); the list after it, 409 `{"error": …}` when refused |
//! | `POST /v1/routes/withdraw?prefix=P` | withdraws it; the list after it, 409 when there is none |
//!
//! # Who may change state
//!
//! The drain and runtime-route endpoints change what this node advertises, so they are not
//! served to whoever reaches a TCP port:
//!
//! - on the Unix socket in the state directory ([`local`],
//!   [`Surface::Local`]) they are served as they come: the socket's mode
//!   (owner only) decides who connects;
//! - on `speaker.api` ([`Surface::Full`]) only with
//!   `Authorization: Bearer TOKEN` (RFC 6750 §2.1), the token of
//!   `speaker.api_token_file` ([`StateView::api_token`]), compared in
//!   constant time; a missing or wrong token is 401 with
//!   `WWW-Authenticate: Bearer` (RFC 6750 §3), and without a configured
//!   token every such call is 403, saying to use the socket;
//! - on `speaker.metrics` they do not exist (404).
//!
//! `/metrics` ends with the standard `process_*` families ([`process`]).
//!
//! `speaker.metrics`, when set, is a second listener with
//! [`Surface::MetricsOnly`]: `/metrics`, `/healthz` and `/readyz`, and 404
//! for status, explain and drain, so a scraper on the network reaches
//! nothing else.
//!
//! # Sharing
//!
//! No client can starve the others, the kubelet's probes least of all:
//!
//! - [`MAX_CONNECTIONS`] connections are served at once, at most
//!   [`MAX_CONNECTIONS_PER_CLIENT`] of them from one address;
//! - past that, [`HEALTH_CONNECTIONS`] more are kept for health checks:
//!   one request each, answered if it is `/healthz` or `/readyz` (503
//!   otherwise), then closed; past those, a connection is closed at once;
//! - a client has [`HEADER_READ_TIMEOUT`] to send a request head (idle
//!   keep-alive connections included), and [`WRITE_TIMEOUT`] to take an
//!   answer: one that sends requests and never reads is closed;
//! - answers are bounded: `/v1/status` lists a page of routes, and the
//!   error lists it carries show their first problems and a count;
//! - the daemon answers a request with a value (its main loop builds it
//!   at that moment), and the request's own task serialises and sends it:
//!   a slow client holds up only itself. A daemon that cannot answer in
//!   time is a 503 with the reason ([`Unavailable`]), never a wait
//!   without end.
//!
//! HEAD is answered like GET (RFC 9110 §9.3.2: a server that supports GET
//! supports HEAD); the drain endpoints take POST only (they change state,
//! RFC 9110 §9.2.1); any other method on a known path is 405 with `Allow`,
//! and any other path 404. HTTP/1.1 only, over plain TCP on loopback by
//! default (the read-only answers carry nothing secret, and a node-local
//! scraper or `holdfast status` needs nothing more) and over the Unix
//! socket.

mod guard;
pub mod local;
pub mod metrics;
pub mod process;

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::AsFd;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderValue, WWW_AUTHENTICATE,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, UnixListener};

pub use metrics::render_metrics;

use crate::report::status::{DrainStatus, Explanation, ROUTE_PAGE_MAX, RoutePage, Status};

/// Why the daemon gave no answer: it did not answer in time, or it is
/// stopping. The API answers 503 with these words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable(pub String);

/// The daemon's answer to one request, to be awaited by the request's own
/// task: the value, or why there is none. It must complete in bounded time
/// (the daemon's view gives up with [`Unavailable`]).
pub type Answer<T> = Pin<Box<dyn Future<Output = Result<T, Unavailable>> + Send>>;

/// An answer that is already there (a view with fixed values).
pub fn answer<T: Send + 'static>(value: T) -> Answer<T> {
    Box::pin(std::future::ready(Ok(value)))
}

/// What the daemon shows the API. Each call gives a value — the daemon's
/// state at the moment of the request, a copy the API owns — or why
/// there is none; the API holds no state of its own and shares none. The
/// answers that need the daemon's routes (status, explain, metrics,
/// drain) are [`Answer`]s, which the daemon's main loop fulfils; readiness
/// and the token are read at once, and must not wait on anything (no I/O,
/// no lock another task holds for long). A panic in a call costs that
/// request a 500, nothing more.
pub trait StateView: Send + Sync + 'static {
    /// The whole state, every route included.
    fn status(&self) -> Answer<Status>;
    /// The state with one page of its routes, marked as a page when it is
    /// not the whole list (`/v1/status`; `/metrics` asks for no routes).
    /// A view that can build just the page should.
    fn status_page(&self, page: RoutePage) -> Answer<Status> {
        let whole = self.status();
        Box::pin(async move {
            let mut status = whole.await?;
            page.apply(&mut status);
            Ok(status)
        })
    }
    /// Why this node does or does not advertise `vip`.
    fn explain(&self, vip: IpAddr) -> Answer<Explanation>;
    /// `Ok` once the config is loaded and the source has synced; else why
    /// not, in words (`/readyz` answers 503 with it).
    fn ready(&self) -> Result<(), String>;
    /// Ready with an optional note (readiness did not wait for a peer that
    /// is down), or not ready and why. `/readyz` answers with it.
    fn readiness(&self) -> Result<Option<String>, String> {
        self.ready().map(|()| None)
    }
    /// `holdfast drain` (`on`) or `undrain`: the drain as it stands after
    /// the call, or why it was refused (a 409).
    fn drain(&self, on: bool) -> Answer<Result<DrainStatus, String>> {
        let _ = on;
        answer(Err("this daemon does not drain".into()))
    }
    /// The runtime routes after `change` (none: the list), or why it was
    /// refused (a 409).
    fn runtime_routes(
        &self,
        change: Option<crate::report::status::RuntimeChange>,
    ) -> Answer<Result<Vec<crate::report::status::RuntimeRoute>, String>> {
        let _ = change;
        answer(Err("this daemon has no runtime routes".into()))
    }
    /// The token a TCP client must send (`Authorization: Bearer …`) to
    /// call a state-changing endpoint: `speaker.api_token_file`'s, as the
    /// running config has it. `None`: those calls are not served over TCP.
    fn api_token(&self) -> Option<Vec<u8>> {
        None
    }
}

/// Connections served at once (see "Sharing" above). The API is for a
/// node-local scraper and a few operators, and a bound keeps a runaway
/// client from exhausting the daemon's file descriptors.
pub const MAX_CONNECTIONS: usize = 128;
/// Of [`MAX_CONNECTIONS`], the most one client address holds.
pub const MAX_CONNECTIONS_PER_CLIENT: usize = 64;
/// Connections kept for `/healthz` and `/readyz` once the others are
/// taken: the kubelet probes with a new connection each time, and a pod
/// whose probes fail is restarted.
pub const HEALTH_CONNECTIONS: usize = 32;
/// A client has this long to send its request head, the first and each
/// next one on a keep-alive connection (slowloris guard, idle timeout).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// On a health-lane connection, the request head must come sooner: the
/// lane is small.
const HEALTH_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(2);
/// A client has this long to take an answer (see `guard::WriteDeadline`).
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest request head read: enough for any request of this API.
const MAX_REQUEST_HEAD: usize = 16 * 1024;
/// The kernel's send buffer per connection (it doubles it): a page of
/// `/v1/status` goes out in a few round trips, and a client that never
/// reads stalls its connection after this much.
const SEND_BUFFER: usize = 64 * 1024;
/// On shutdown, requests in flight get this long to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// A connection that finds every slot taken waits this long for one to
/// free before it is closed: a burst of reconnections (clients whose
/// connections timed out together) fills the lanes for a moment, and a
/// health check arriving in that moment must not be refused for it.
const SLOT_WAIT: Duration = Duration::from_millis(500);
/// How often a waiting connection looks for a free slot.
const SLOT_POLL: Duration = Duration::from_millis(10);
/// At most this many connections wait for a slot; more are closed at once
/// (the wait must not become a backlog of its own).
const MAX_WAITING: usize = 64;

/// Which endpoints a listener serves, and to whom.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surface {
    /// Everything; the state-changing endpoints only with the token
    /// (`speaker.api`, TCP).
    Full,
    /// `/metrics`, `/healthz`, `/readyz` (`speaker.metrics`).
    MetricsOnly,
    /// Everything, the state-changing endpoints without a token: the Unix
    /// socket in the state directory, whose mode decides who connects.
    Local,
}

/// Who is on the other end of a connection, for the per-client slots and
/// the log.
#[derive(Clone, Copy, Debug)]
enum Client {
    Tcp(SocketAddr),
    /// The Unix socket: its clients share one set of slots.
    Unix,
}

impl Client {
    /// The key of its per-client slots.
    fn key(&self) -> IpAddr {
        match self {
            Client::Tcp(a) => a.ip(),
            Client::Unix => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        }
    }
}

impl std::fmt::Display for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Client::Tcp(a) => write!(f, "{a}"),
            Client::Unix => f.write_str("the API socket"),
        }
    }
}

/// A listening socket the API serves.
trait Listen: Send + 'static {
    type Stream: AsyncRead + AsyncWrite + AsFd + Unpin + Send + 'static;
    fn accept(&self) -> impl Future<Output = io::Result<(Self::Stream, Client)>> + Send;
}

impl Listen for TcpListener {
    type Stream = tokio::net::TcpStream;
    async fn accept(&self) -> io::Result<(Self::Stream, Client)> {
        TcpListener::accept(self)
            .await
            .map(|(s, a)| (s, Client::Tcp(a)))
    }
}

impl Listen for UnixListener {
    type Stream = tokio::net::UnixStream;
    async fn accept(&self) -> io::Result<(Self::Stream, Client)> {
        UnixListener::accept(self)
            .await
            .map(|(s, _)| (s, Client::Unix))
    }
}

/// Binds `addr`, with the address in the error.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .map_err(|e| io::Error::new(e.kind(), format!("API address {addr}: {e}")))
}

/// Binds `addr` and serves until `shutdown` completes.
pub async fn serve(
    addr: SocketAddr,
    view: Arc<dyn StateView>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_listener(bind(addr).await?, view, shutdown).await
}

/// Serves on a bound listener until `shutdown` completes, then gives
/// requests in flight [`SHUTDOWN_GRACE`] to finish. Errors of single
/// connections are logged and never end the server.
pub async fn serve_listener(
    listener: TcpListener,
    view: Arc<dyn StateView>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_surface(listener, view, shutdown, Surface::Full).await
}

/// A connection that found every slot taken: it waits up to [`SLOT_WAIT`]
/// for one (then goes back to the accept loop with it), or is closed.
/// Bounded by [`MAX_WAITING`]; beyond that it is closed at once.
fn wait_for_slot<S: Send + 'static>(
    slots: &Arc<guard::Slots>,
    waiting: &Arc<std::sync::atomic::AtomicUsize>,
    back: &tokio::sync::mpsc::Sender<(S, Client, guard::Slot)>,
    stream: S,
    remote: Client,
) {
    use std::sync::atomic::Ordering;
    if waiting.fetch_add(1, Ordering::Relaxed) >= MAX_WAITING {
        waiting.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let (slots, waiting, back) = (slots.clone(), waiting.clone(), back.clone());
    tokio::spawn(async move {
        let until = tokio::time::Instant::now() + SLOT_WAIT;
        let slot = loop {
            if let Some(slot) = slots.take(remote.key()) {
                break Some(slot);
            }
            if tokio::time::Instant::now() >= until {
                break None;
            }
            tokio::time::sleep(SLOT_POLL).await;
        };
        waiting.fetch_sub(1, Ordering::Relaxed);
        if let Some(slot) = slot {
            // The accept loop serves it; if it is gone (shutdown), so is
            // the connection.
            let _ = back.try_send((stream, remote, slot));
        }
    });
}

/// [`serve_listener`] for the endpoints of `surface` only.
pub async fn serve_surface(
    listener: TcpListener,
    view: Arc<dyn StateView>,
    shutdown: impl Future<Output = ()>,
    surface: Surface,
) -> io::Result<()> {
    serve_on(listener, view, shutdown, surface).await
}

/// Serves [`Surface::Local`] on the state directory's Unix socket
/// ([`local::claim`]) until `shutdown` completes; the same limits as on
/// TCP, its clients sharing one client's slots.
pub async fn serve_local(
    listener: std::os::unix::net::UnixListener,
    view: Arc<dyn StateView>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_on(
        UnixListener::from_std(listener)?,
        view,
        shutdown,
        Surface::Local,
    )
    .await
}

async fn serve_on<L: Listen>(
    listener: L,
    view: Arc<dyn StateView>,
    shutdown: impl Future<Output = ()>,
    surface: Surface,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let slots = guard::Slots::new(
        MAX_CONNECTIONS,
        MAX_CONNECTIONS_PER_CLIENT,
        HEALTH_CONNECTIONS,
    );
    let mut shutdown = std::pin::pin!(shutdown);
    let mut saturated = false;
    // Connections that found every slot taken and got one within SLOT_WAIT.
    let (waited_tx, mut waited_rx) =
        tokio::sync::mpsc::channel::<(L::Stream, Client, guard::Slot)>(MAX_WAITING);
    let waiting = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    loop {
        let accepted: Result<(_, _, Option<guard::Slot>), io::Error> = tokio::select! {
            () = &mut shutdown => break,
            Some((stream, remote, slot)) = waited_rx.recv() => Ok((stream, remote, Some(slot))),
            a = listener.accept() => a.map(|(stream, remote)| (stream, remote, None)),
        };
        let (stream, remote, slot) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // EMFILE and the like: back off rather than spin; the
                // listener itself stays good.
                tracing::warn!("API: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = slot.or_else(|| slots.take(remote.key())) else {
            // Once per episode, not once per connection: a flood must not
            // become a flood of log lines too.
            if !saturated {
                tracing::warn!(
                    "API: every connection slot taken, health checks' included; new connections wait up to {SLOT_WAIT:?} for one, then are closed (first from {remote})"
                );
                saturated = true;
            }
            wait_for_slot(&slots, &waiting, &waited_tx, stream, remote);
            continue;
        };
        let lane = slot.lane();
        if saturated && lane == guard::Lane::General {
            tracing::info!("API: accepting connections again");
            saturated = false;
        }
        // What a client that never reads can make the kernel hold for it
        // (autotuning grows a loopback send buffer to megabytes).
        if let Err(e) = socket2::SockRef::from(&stream.as_fd()).set_send_buffer_size(SEND_BUFFER) {
            tracing::debug!("API: connection from {remote}: SO_SNDBUF: {e}");
        }
        let view = view.clone();
        let service = service_fn(move |req: Request<Incoming>| {
            let view = view.clone();
            async move {
                // One request per turn: a client pipelining hundreds would
                // otherwise be answered all in one go while every other
                // connection, health checks included, waits. (A health
                // lane connection has one request: it goes first.)
                if lane == guard::Lane::General {
                    tokio::task::yield_now().await;
                }
                Ok::<_, Infallible>(match lane {
                    guard::Lane::General => respond_on(surface, &*view, &req).await,
                    guard::Lane::Health => respond_health_only(surface, &*view, &req).await,
                })
            }
        });
        let mut builder = http1::Builder::new();
        // half_close: a client may shut its sending side once the request
        // is out (`nc -N`, some probes) and still wants the answer.
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(match lane {
                guard::Lane::General => HEADER_READ_TIMEOUT,
                guard::Lane::Health => HEALTH_HEADER_READ_TIMEOUT,
            })
            .max_buf_size(MAX_REQUEST_HEAD)
            .keep_alive(lane == guard::Lane::General)
            .half_close(true);
        let io = TokioIo::new(guard::WriteDeadline::new(stream, WRITE_TIMEOUT));
        let conn = graceful.watch(builder.serve_connection(io, service));
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("API: connection from {remote}: {e}");
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::debug!("API: requests still in flight after {SHUTDOWN_GRACE:?}, closing");
        }
    }
    Ok(())
}

/// The endpoints, by path.
#[derive(Debug, PartialEq)]
enum Endpoint<'a> {
    Metrics,
    Healthz,
    Readyz,
    Status,
    Explain(&'a str),
    /// `/v1/drain` (true) and `/v1/undrain`.
    Drain(bool),
    /// `/v1/routes` (list), `/v1/routes/announce`, `/v1/routes/withdraw`.
    Routes(RoutesCall),
}

/// What a `/v1/routes` call does.
#[derive(Debug, PartialEq, Clone, Copy)]
enum RoutesCall {
    List,
    Announce,
    Withdraw,
}

fn route(path: &str, surface: Surface) -> Option<Endpoint<'_>> {
    let endpoint = match path {
        "/metrics" => Endpoint::Metrics,
        "/healthz" => Endpoint::Healthz,
        "/readyz" => Endpoint::Readyz,
        "/v1/status" => Endpoint::Status,
        "/v1/drain" => Endpoint::Drain(true),
        "/v1/undrain" => Endpoint::Drain(false),
        "/v1/routes" => Endpoint::Routes(RoutesCall::List),
        "/v1/routes/announce" => Endpoint::Routes(RoutesCall::Announce),
        "/v1/routes/withdraw" => Endpoint::Routes(RoutesCall::Withdraw),
        p => Endpoint::Explain(p.strip_prefix("/v1/explain/")?),
    };
    match (surface, &endpoint) {
        (
            Surface::MetricsOnly,
            Endpoint::Status | Endpoint::Explain(_) | Endpoint::Drain(_) | Endpoint::Routes(_),
        ) => None,
        _ => Some(endpoint),
    }
}

/// A response to come: the request's own task awaits it.
pub type Responding<'v> = Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send + 'v>>;

/// On a connection of the health lane: `/healthz` and `/readyz` as ever,
/// anything else 503 (the client may try again when the API is less busy).
fn respond_health_only<'v, B>(
    surface: Surface,
    view: &'v dyn StateView,
    req: &Request<B>,
) -> Responding<'v> {
    match route(req.uri().path(), surface) {
        Some(Endpoint::Healthz | Endpoint::Readyz) => respond_on(surface, view, req),
        _ => Box::pin(std::future::ready(json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the API is busy: every connection slot is taken, and the ones left answer only /healthz and /readyz",
        ))),
    }
}

/// The page of routes a `/v1/status` query asks for: `offset` (default 0)
/// and `limit` (default and most [`ROUTE_PAGE_MAX`]); other parameters
/// are ignored.
pub fn route_page(query: Option<&str>) -> Result<RoutePage, String> {
    let mut page = RoutePage::default();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let number = || {
            value
                .parse::<usize>()
                .map_err(|_| format!("{key} must be a whole number, got {value:?}"))
        };
        match key {
            "offset" => page.offset = number()?,
            "limit" => {
                page.limit = number()?;
                if page.limit > ROUTE_PAGE_MAX {
                    return Err(format!(
                        "limit must be at most {ROUTE_PAGE_MAX}, got {value}; page with offset"
                    ));
                }
            }
            _ => {}
        }
    }
    Ok(page)
}

/// One request, one response; never panics, whatever the request or the
/// view does.
pub fn respond<'v, B>(view: &'v dyn StateView, req: &Request<B>) -> Responding<'v> {
    respond_on(Surface::Full, view, req)
}

/// What a request asks of the daemon, once it has been routed and checked.
enum Ask {
    /// An answer needs nothing more of the daemon.
    Done(Response<Full<Bytes>>),
    Metrics,
    Status(RoutePage),
    Explain(IpAddr),
    Drain(bool),
    /// The runtime routes, after a change or not.
    Routes(Option<crate::report::status::RuntimeChange>),
}

/// The change a `/v1/routes/announce` or `/withdraw` query asks for:
/// `prefix=P` and, to announce, `advertisement=A`, `community=C` and
/// `large_community=L` (each may repeat), `local_pref=N`, `med=N`,
/// `as_path_prepend=N`. Values are percent-decoded.
fn routes_change(
    call: RoutesCall,
    query: &str,
) -> Result<crate::report::status::RuntimeChange, String> {
    use crate::report::status::RuntimeRoute;
    let mut route = RuntimeRoute::default();
    let mut prefix = None;
    let number = |key: &str, v: &str| -> Result<u32, String> {
        v.parse()
            .map_err(|_| format!("{key}={v} is not a number in 0..=4294967295"))
    };
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, raw) = pair.split_once('=').unwrap_or((pair, ""));
        let value = percent_decode(raw).ok_or_else(|| format!("{key}: bad percent-encoding"))?;
        match (call, key) {
            (_, "prefix") => prefix = Some(value),
            (RoutesCall::Announce, "advertisement") => route.advertisement = Some(value),
            (RoutesCall::Announce, "community") => route.communities.push(value),
            (RoutesCall::Announce, "large_community") => route.large_communities.push(value),
            (RoutesCall::Announce, "local_pref") => route.local_pref = Some(number(key, &value)?),
            (RoutesCall::Announce, "med") => route.med = Some(number(key, &value)?),
            (RoutesCall::Announce, "as_path_prepend") => {
                route.as_path_prepend =
                    Some(value.parse().map_err(|_| {
                        format!("as_path_prepend={value} is not a number in 0..=255")
                    })?)
            }
            _ => return Err(format!("unknown parameter \"{key}\"")),
        }
    }
    let prefix = prefix.ok_or("prefix=PREFIX is required")?;
    Ok(match call {
        RoutesCall::Withdraw => crate::report::status::RuntimeChange::Withdraw(prefix),
        _ => crate::report::status::RuntimeChange::Announce(RuntimeRoute { prefix, ..route }),
    })
}

/// [`respond`] for a listener serving `surface`. The request is read
/// before anything is awaited; the future holds only the view.
pub fn respond_on<'v, B>(
    surface: Surface,
    view: &'v dyn StateView,
    req: &Request<B>,
) -> Responding<'v> {
    // A panic in the daemon's view is a bug there; it costs this request a
    // 500, not the connection or the server.
    let ask = catch_unwind(AssertUnwindSafe(|| ask(surface, view, req)))
        .unwrap_or_else(|_| Ask::Done(panicked()));
    Box::pin(async move {
        AssertUnwindSafe(answer_to(view, ask))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| panicked())
    })
}

fn panicked() -> Response<Full<Bytes>> {
    json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the daemon's state view panicked (see its log)",
    )
}

/// Routes and checks a request: what it asks of the daemon, or the
/// answer already (an error, health, readiness).
fn ask<B>(surface: Surface, view: &dyn StateView, req: &Request<B>) -> Ask {
    let path = req.uri().path();
    let Some(endpoint) = route(path, surface) else {
        return Ask::Done(json_error(
            StatusCode::NOT_FOUND,
            &format!("no such endpoint: {path}"),
        ));
    };
    if matches!(
        endpoint,
        Endpoint::Drain(_) | Endpoint::Routes(RoutesCall::Announce | RoutesCall::Withdraw)
    ) {
        if req.method() != Method::POST {
            let mut r = json_error(
                StatusCode::METHOD_NOT_ALLOWED,
                &format!("{} is not allowed on {path}; use POST", req.method()),
            );
            r.headers_mut()
                .insert(ALLOW, HeaderValue::from_static("POST"));
            return Ask::Done(r);
        }
    } else if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = json_error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{} is not allowed on {path}; use GET", req.method()),
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Ask::Done(r);
    }
    match endpoint {
        // The metrics show no route one by one.
        Endpoint::Metrics => Ask::Metrics,
        Endpoint::Healthz => Ask::Done(text(StatusCode::OK, "ok\n".into())),
        // Never waits for the daemon's main loop: the kubelet's probe is
        // answered while it is busy.
        Endpoint::Readyz => Ask::Done(match view.readiness() {
            Ok(None) => text(StatusCode::OK, "ready\n".into()),
            Ok(Some(note)) => text(StatusCode::OK, format!("ready: {note}\n")),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        }),
        Endpoint::Status => match route_page(req.uri().query()) {
            Ok(page) => Ask::Status(page),
            Err(e) => Ask::Done(json_error(StatusCode::BAD_REQUEST, &e)),
        },
        Endpoint::Explain(raw) => match parse_vip(raw) {
            Ok(vip) => Ask::Explain(vip),
            Err(e) => Ask::Done(json_error(StatusCode::BAD_REQUEST, &e)),
        },
        Endpoint::Drain(on) => match refusal(surface, view, req) {
            Some(refused) => Ask::Done(refused),
            None => Ask::Drain(on),
        },
        Endpoint::Routes(RoutesCall::List) => Ask::Routes(None),
        Endpoint::Routes(call) => match refusal(surface, view, req) {
            Some(refused) => Ask::Done(refused),
            None => match routes_change(call, req.uri().query().unwrap_or("")) {
                Ok(change) => Ask::Routes(Some(change)),
                Err(e) => Ask::Done(json_error(StatusCode::BAD_REQUEST, &e)),
            },
        },
    }
}

/// Asks the daemon and turns its answer into the response: serialised
/// here, in the request's task. No answer in time is a 503 saying why.
async fn answer_to(view: &dyn StateView, ask: Ask) -> Response<Full<Bytes>> {
    let unavailable = |Unavailable(why)| json_error(StatusCode::SERVICE_UNAVAILABLE, &why);
    match ask {
        Ask::Done(response) => response,
        Ask::Metrics => match view.status_page(RoutePage::NONE).await {
            Ok(status) => response(
                StatusCode::OK,
                metrics::CONTENT_TYPE,
                render_metrics(&status) + &process::render_current(),
            ),
            Err(why) => unavailable(why),
        },
        Ask::Status(page) => match view.status_page(page).await {
            Ok(status) => json(&status),
            Err(why) => unavailable(why),
        },
        Ask::Explain(vip) => match view.explain(vip).await {
            Ok(explanation) => json(&explanation),
            Err(why) => unavailable(why),
        },
        Ask::Drain(on) => match view.drain(on).await {
            Ok(Ok(status)) => json(&status),
            Ok(Err(why)) => json_error(StatusCode::CONFLICT, &why),
            Err(why) => unavailable(why),
        },
        Ask::Routes(change) => match view.runtime_routes(change).await {
            Ok(Ok(routes)) => json(&routes),
            Ok(Err(why)) => json_error(StatusCode::CONFLICT, &why),
            Err(why) => unavailable(why),
        },
    }
}

/// Whether a state-changing request may be served on `surface`: `None`
/// always on the Unix socket, over TCP only with the configured token
/// (RFC 6750 §2.1); else the refusal to send. The metrics listener never
/// routes one here.
fn refusal<B>(
    surface: Surface,
    view: &dyn StateView,
    req: &Request<B>,
) -> Option<Response<Full<Bytes>>> {
    if surface == Surface::Local {
        return None;
    }
    let path = req.uri().path();
    let Some(token) = view.api_token() else {
        return Some(json_error(
            StatusCode::FORBIDDEN,
            &format!(
                "{path} changes this node's routes and is not served over TCP without a token: run holdfast drain or undrain on the node (they use the Unix socket in the daemon's state directory, {}/{} by default), or set speaker.api_token_file and send Authorization: Bearer TOKEN",
                local::DEFAULT_STATE_DIR,
                local::SOCKET_NAME
            ),
        ));
    };
    // RFC 6750 §3: a request without credentials gets the scheme alone; one
    // with a wrong token, error="invalid_token".
    let unauthorized = |challenge: &'static str, message: &str| {
        let mut r = json_error(StatusCode::UNAUTHORIZED, message);
        r.headers_mut()
            .insert(WWW_AUTHENTICATE, HeaderValue::from_static(challenge));
        r
    };
    match req
        .headers()
        .get(AUTHORIZATION)
        .map(|v| bearer(v.as_bytes()))
    {
        None => Some(unauthorized(
            "Bearer realm=\"holdfast\"",
            &format!(
                "{path} needs Authorization: Bearer TOKEN, the token of speaker.api_token_file"
            ),
        )),
        Some(Some(given)) if same_token(given, &token) => None,
        Some(_) => Some(unauthorized(
            "Bearer realm=\"holdfast\", error=\"invalid_token\"",
            "the token is not the one of speaker.api_token_file",
        )),
    }
}

/// The credentials of an `Authorization: Bearer TOKEN` header value; the
/// scheme's case does not matter (RFC 9110 §11.1). `None` for another
/// scheme.
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let (scheme, rest) = value.split_at_checked(6)?;
    if !scheme.eq_ignore_ascii_case(b"Bearer") || !rest.starts_with(b" ") {
        return None;
    }
    let token = rest.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// The token compared in constant time: how long a wrong guess takes says
/// nothing about how much of it was right.
fn same_token(given: &[u8], expected: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    given.ct_eq(expected).into()
}

/// The VIP in an explain request or on the command line: an IPv4 or IPv6
/// address, optionally as its host prefix (`/32`, `/128`) since that is how
/// `holdfast status` prints routes. Percent-escapes are decoded.
pub fn parse_vip(raw: &str) -> Result<IpAddr, String> {
    let text = percent_decode(raw).ok_or_else(|| format!("{raw:?} is not an IP address"))?;
    let (addr, len) = match text.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (text.as_str(), None),
    };
    let ip: IpAddr = addr
        .parse()
        .map_err(|_| format!("{text:?} is not an IP address"))?;
    let host_len = if ip.is_ipv4() { "32" } else { "128" };
    match len {
        None => Ok(ip),
        Some(l) if l == host_len => Ok(ip),
        Some(_) => Err(format!(
            "{text:?} is a prefix, not a VIP: give an address (or it as /{host_len})"
        )),
    }
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return None;
            }
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn response(status: StatusCode, content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    // Every answer is a snapshot of the moment.
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    response(status, "text/plain; charset=utf-8", body)
}

fn json<T: serde::Serialize>(value: &T) -> Response<Full<Bytes>> {
    match serde_json::to_string_pretty(value) {
        Ok(mut body) => {
            body.push('\n');
            response(StatusCode::OK, "application/json", body)
        }
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("internal error: cannot encode the answer: {e}"),
        ),
    }
}

fn json_error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({ "error": message }).to_string() + "\n";
    response(status, "application/json", body)
}

#[cfg(test)]
mod tests;

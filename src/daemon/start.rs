//! Wiring: `holdfast run` builds everything from a [`Config`] — the API,
//! the source, the peers' sessions, the passive side — spawns the tasks and
//! hands over to the main loop ([`Daemon::drive`]).

use super::*;
use crate::routes::stability_params;
use reload::stamp;
use tokio::sync::mpsc;

/// Options of `holdfast run`.
#[derive(Clone, Debug)]
pub struct Options {
    pub config: PathBuf,
    /// Withdraw every route and send Cease/Administrative Shutdown on exit,
    /// even with graceful restart enabled.
    pub withdraw_on_exit: bool,
    /// This daemon's state directory: the restart marker (graceful
    /// restart's R bit), the lock that keeps it to one daemon, and the API's
    /// Unix socket (the state-changing calls).
    pub state_dir: PathBuf,
}

/// This node's name, by the one rule ([`config::node_name`]):
/// `$NODE_NAME`, else `speaker.hostname`, else the kernel's hostname.
pub fn node_name(c: &Config) -> String {
    resolve_node_name(c).name
}

/// [`node_name`] with where the name came from.
pub(super) fn resolve_node_name(c: &Config) -> config::NodeName {
    let env = std::env::var("NODE_NAME").ok();
    let kernel = || std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    let hostname = c.speaker.hostname.as_deref();
    // The kernel's hostname is read only when it can matter.
    let kernel = match (&env, hostname) {
        (Some(e), _) if !e.trim().is_empty() => None,
        (_, Some(h)) if !h.trim().is_empty() => None,
        _ => kernel(),
    };
    config::node_name(hostname, env.as_deref(), kernel.as_deref())
}

/// Logs a config's warnings (`holdfast check` prints the same lines).
pub(super) fn log_warnings(c: &Config) {
    for w in &c.warnings {
        warn!("config: {w}");
    }
}

/// `router_id = "auto"`: `$NODE_IP` if it is IPv4, else the first global
/// IPv4 address of the node, else (an IPv6-only node) an ID derived from
/// the node name, never 0.0.0.0 (`config::derived_router_id`).
pub fn router_id(c: &Config) -> Result<Ipv4Addr, String> {
    match c.speaker.router_id {
        RouterId::Fixed(id) => Ok(id),
        RouterId::Auto => {
            if let Some(ip) = std::env::var("NODE_IP")
                .ok()
                .and_then(|s| s.parse::<Ipv4Addr>().ok())
            {
                return Ok(ip);
            }
            let found = holdfast_sockopt::interface_addresses()
                .map_err(|e| format!("router_id = \"auto\": cannot list interface addresses: {e}"))?
                .into_iter()
                .filter_map(|a| match a.address {
                    IpAddr::V4(v4)
                        if !v4.is_loopback() && !v4.is_link_local() && !v4.is_unspecified() =>
                    {
                        Some(v4)
                    }
                    _ => None,
                })
                .next();
            Ok(found.unwrap_or_else(|| {
                let node = node_name(c);
                let id = config::derived_router_id(&node);
                info!(%node, router_id = %id, "router_id = \"auto\": no IPv4 address on this node; the router ID is derived from the node name (set router_id in a [[node_override]] to choose it)");
                id
            }))
        }
    }
}

/// Reads the restart marker and leaves a fresh one: a process that finds
/// one was restarted (crash, or a graceful-restart exit) and sets the R bit
/// (RFC 4724 §3). A clean withdraw-on-exit removes it.
pub(super) fn restart_marker(dir: &Path) -> bool {
    let marker = dir.join("running");
    let existed = marker.exists();
    if let Err(e) = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::write(&marker, std::process::id().to_string()))
    {
        warn!(
            "cannot write the restart marker {}: {e} — graceful restart's R bit will not be set after a restart",
            marker.display()
        );
    }
    existed
}

/// The TTL settings the listening socket needs for the configured peers
/// (RFC 5082 §3; see `ListenerTtl` for the choice).
pub(super) fn listener_ttl(c: &Config) -> session::socket::ListenerTtl {
    let opts: Vec<session::socket::SocketOptions> = c
        .peers
        .iter()
        .map(|p| session::socket_options(p, c.speaker.asn))
        .collect();
    session::socket::ListenerTtl::for_peers(&opts)
}

/// A connection accepted by the passive side, with its source.
pub(super) type Accepted = (tokio::net::TcpStream, std::net::SocketAddr);

/// The passive side (`speaker.listen`) as it is bound now.
pub(super) struct Listener {
    pub(super) addr: std::net::SocketAddr,
    pub(super) socket: Arc<tokio::net::TcpListener>,
    /// The MD5 keys set on it (RFC 2385), by peer address.
    pub(super) keys: BTreeMap<IpAddr, Vec<u8>>,
    pub(super) accept: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// The HTTP API as it is bound now.
pub(super) struct Api {
    pub(super) addr: std::net::SocketAddr,
    pub(super) stop: watch::Sender<bool>,
    pub(super) task: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// Binds the passive side and starts handing its connections to `to`.
pub(super) fn bind_listener(
    addr: std::net::SocketAddr,
    keys: &BTreeMap<IpAddr, Vec<u8>>,
    ttl: session::socket::ListenerTtl,
    to: tokio::sync::mpsc::UnboundedSender<Accepted>,
) -> std::io::Result<Listener> {
    let list: Vec<(IpAddr, Vec<u8>)> = keys.iter().map(|(ip, k)| (*ip, k.clone())).collect();
    let socket = Arc::new(session::socket::listen(addr, &list, ttl)?);
    info!(listen = %addr, ttl = ttl.ttl, min_ttl = ttl.min_ttl, "accepting BGP connections from configured peers");
    let l = socket.clone();
    let accept = tokio::spawn(async move {
        loop {
            match l.accept().await {
                Ok(accepted) => {
                    if to.send(accepted).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    // Out of descriptors under a connection flood, say.
                    if let Some(note) = logging::allow(Kind::Connection, "listener") {
                        warn!("accept: {e}{note}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(Listener {
        addr,
        socket,
        keys: keys.clone(),
        accept,
    })
}

/// Serves `surface` on `listener` (the whole API on `speaker.api`,
/// `/metrics` and health only on `speaker.metrics`) until the daemon stops
/// or this server is replaced (a reload moved or removed its address).
pub(super) fn spawn_server(
    listener: tokio::net::TcpListener,
    addr: std::net::SocketAddr,
    view: Arc<View>,
    mut daemon_stops: watch::Receiver<bool>,
    surface: crate::api::Surface,
) -> Api {
    let (stop, mut replaced) = watch::channel(false);
    let task = tokio::spawn(crate::api::serve_surface(
        listener,
        view,
        async move {
            tokio::select! {
                _ = daemon_stops.wait_for(|stop| *stop) => {}
                _ = replaced.wait_for(|stop| *stop) => {}
            }
        },
        surface,
    ));
    Api { addr, stop, task }
}

/// Longest wait for the config and its password files to be read. The
/// reader refuses FIFOs and devices at once; this bounds what is left, a
/// file system that hangs (a dead NFS server).
pub(super) const CONFIG_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The first read of the VIP file, as [`load_config`] leaves it: closed
/// without a value when the config's source is not a file.
pub(super) type FirstRead = tokio::sync::oneshot::Receiver<crate::source::file::FirstRead>;

/// Reads and checks the config on the blocking pool, never on the
/// runtime's thread, through the reader a reload uses
/// ([`reload::FileReader`], at most [`CONFIG_READ_TIMEOUT`]): sessions
/// (their keepalives), the API and the sources keep running while it is
/// read, however the read goes. The config comes
/// back with this node's overrides by name applied (`config::resolve`).
/// When its source is a file, the same thread then reads the VIP file
/// (`file::FirstRead`) and hands it over as the second value: the parse
/// of a large file runs while the daemon binds its API and the sessions
/// connect, not after. The error is the diagnostics as `holdfast check`
/// lists them (the first few, and a count). The third value is the
/// file's identity taken before it was read.
pub(super) async fn load_config(
    path: &Path,
) -> Result<(config::Config, FirstRead, Option<reload::Stamp>), String> {
    let owned = path.to_path_buf();
    let (first_tx, first_rx) = tokio::sync::oneshot::channel();
    let read = reload::FileReader::default()
        .read(path, move |config_tx| {
            // The identity before the read: an edit during it is seen.
            let before = stamp(&owned);
            let loaded = reload::load_resolved(&owned, None);
            let settings = loaded
                .as_ref()
                .ok()
                .and_then(crate::source::file::FileSettings::from_config);
            // Sent first: the daemon goes on while the VIP file is read.
            if config_tx.send((before, loaded))
                && let Some(settings) = settings
            {
                let _ = first_tx.send(crate::source::file::FirstRead::of(&settings));
            }
        })
        .await;
    match read {
        Ok((before, Ok(config))) => Ok((config, first_rx, before)),
        Ok((_, Err(diagnostics))) => Err(config::list_diagnostics(&diagnostics)),
        Err(why) => Err(why.text()),
    }
}

/// The source's ends, as [`start_source`] leaves them.
struct Source {
    snapshots: watch::Receiver<SourceSnapshot>,
    file_settings: Option<watch::Sender<crate::source::file::FileSettings>>,
    file_resync: Option<tokio::sync::mpsc::UnboundedSender<()>>,
    kube: Option<Arc<crate::source::kubernetes::Handle>>,
    kube_config: Option<watch::Sender<Arc<Config>>>,
    node_status: Option<crate::report::NodeStatusWriter>,
    interfaces_wanted: watch::Sender<bool>,
}

/// A future that completes when the daemon stops.
fn until(stops: &watch::Receiver<bool>) -> impl std::future::Future<Output = ()> + use<> {
    let mut rx = stops.clone();
    async move {
        let _ = rx.wait_for(|stop| *stop).await;
    }
}

/// Starts the source the config names: the VIP file's task, or the
/// Kubernetes watchers and this node's BGPNodeStatus writer.
async fn start_source(
    config: &Arc<Config>,
    first_read: FirstRead,
    node: &str,
    view: &Arc<View>,
    stops: &watch::Receiver<bool>,
    runtime: Runtime,
) -> Result<Source, String> {
    let (snap_tx, snap_rx) = watch::channel(SourceSnapshot::default());
    // Interface addresses, for `[[advertisement]] interface`, read while
    // one is configured.
    let (interfaces_wanted, wanted_rx) = watch::channel(crate::source::interface::wanted(config));
    let snap_tx = crate::source::interface::follow(snap_tx, wanted_rx);
    let mut file_settings = None;
    let mut file_resync = None;
    let mut kube = None;
    let mut kube_config = None;
    let mut node_status = None;
    // Each source publishes to its own channel; the runtime routes are
    // the last source; the merge (`source::merge`) makes them one.
    let mut first_read = Some(first_read);
    let mut inputs = Vec::new();
    let mut channel = || {
        let (tx, rx) = watch::channel(SourceSnapshot::default());
        inputs.push(rx);
        tx
    };
    for entry in &config.sources {
        let snap_tx = channel();
        match &entry.kind {
            crate::config::Source::File { .. } => {
                let Some(settings) = crate::source::file::FileSettings::from_config(config) else {
                    continue;
                };
                let Some(first_read) = first_read.take() else {
                    continue;
                };
                let (resync_tx, resync_rx) = tokio::sync::mpsc::unbounded_channel();
                let start = crate::source::file::Start::begin(settings.clone(), Some(first_read))
                    .with_resyncs(resync_rx);
                file_resync = Some(resync_tx);
                let (tx, rx) = watch::channel(settings);
                tokio::spawn(crate::source::file::run(
                    start,
                    rx,
                    snap_tx,
                    crate::source::file::DEFAULT_POLL_INTERVAL,
                    until(stops),
                ));
                file_settings = Some(tx);
            }
            crate::config::Source::Kubernetes(_) => {
                use crate::source::kubernetes;
                // The Node is found by this node's name (`node_name`).
                let options = kubernetes::Options::new(node.to_string());
                let client = kubernetes::connect(&options).await?;
                // This node's BGPNodeStatus, for `kubectl get bgpnodestatuses`
                // (the Kubernetes source only: the file source has no cluster).
                let view = view.clone();
                node_status = Some(crate::report::NodeStatusWriter::spawn(
                    client.clone(),
                    options.node_name.clone(),
                    crate::report::node_status::DEFAULT_INTERVAL,
                    // The counts and the compact route part (no route rows:
                    // built every few seconds by the main loop).
                    Arc::new(move || {
                        let asked = view.node_status();
                        Box::pin(async move { asked.await.ok().map(|(s, r)| (s, Some(r))) })
                    }),
                ));
                let (tx, rx) = watch::channel(config.clone());
                kube = Some(Arc::new(kubernetes::spawn(client, options, rx, snap_tx)));
                kube_config = Some(tx);
            }
        }
    }
    let runtime_tx = channel();
    crate::source::runtime::spawn(
        runtime.state_dir,
        runtime.config,
        crate::model::SourceId(config.sources.len() as u8),
        runtime_tx,
        runtime.commands,
    );
    let names = config
        .sources
        .iter()
        .map(|s| (s.name.clone(), s.kind.kind_name()))
        .chain([(
            crate::source::runtime::NAME.to_string(),
            crate::source::runtime::NAME,
        )])
        .collect();
    crate::source::merge::follow(names, inputs, snap_tx);
    Ok(Source {
        snapshots: snap_rx,
        file_settings,
        file_resync,
        kube,
        kube_config,
        node_status,
        interfaces_wanted,
    })
}

/// What the runtime routes' source needs.
struct Runtime {
    state_dir: std::path::PathBuf,
    config: watch::Receiver<Arc<Config>>,
    commands: tokio::sync::mpsc::Receiver<crate::source::runtime::Command>,
}

/// How long the daemon waits at start for the Node's labels when an
/// override selects by label.
const NODE_LABELS_WAIT: Duration = Duration::from_secs(30);

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(opts: Options) -> Result<(), String> {
    // Overrides by name apply at once; by label once the Node is seen.
    let (config, first_read, config_stamp) = load_config(&opts.config).await?;
    log_warnings(&config);
    let named = resolve_node_name(&config);
    if let Some(ignored) = &named.ignored_hostname {
        warn!(node = %named.name, hostname = %ignored, "speaker.hostname is not used: $NODE_NAME names this node");
    }
    let node = named.name;
    let router_id = router_id(&config)?;
    // The state directory is this daemon's before anything in it is
    // touched: a second holdfast with the same --state-dir stops here.
    // One that finds it held asks the holdfast holding it to hand over
    // (`handoff`).
    let (local_listener, state_claim, handoff_received) =
        match crate::api::local::claim(&opts.state_dir) {
            Ok((l, c)) => (l, c, None),
            Err(refused) => {
                let ((l, c), status) = handoff::take_over(&opts.state_dir, refused).await?;
                (l, c, Some(status))
            }
        };
    // Where the next holdfast will ask.
    let (handoff_tx, handoff_rx) = tokio::sync::mpsc::channel(1);
    let handoff_socket = match crate::handoff::bind(&opts.state_dir) {
        Ok((listener, bound)) => {
            tokio::spawn(crate::handoff::serve(
                listener,
                crate::handoff::version(),
                handoff_tx,
            ));
            Some(bound)
        }
        Err(e) => {
            warn!(state_dir = %opts.state_dir.display(), "no hand-off socket ({e}): a holdfast started with this state directory will be refused");
            None
        }
    };
    let restarting = restart_marker(&opts.state_dir);
    let restart = restart::Restart::new(restarting, Instant::now(), &config.peers);
    info!(
        node = %node,
        asn = config.speaker.asn,
        router_id = %router_id,
        restarting,
        version = %env!("CARGO_PKG_VERSION"),
        commit = %crate::build_info::COMMIT,
        "holdfast starting"
    );
    let stability = Stability::new(stability_params(&config))
        .map_err(|e| format!("{}: stability: {e}", opts.config.display()))?;
    let config = Arc::new(config);
    let started = Instant::now();
    let (published, published_rx) = watch::channel(Published::initial(config.clone(), started));
    let (shutdown_tx, stops) = watch::channel(false);

    // The API first: /healthz answers while everything else starts; its
    // requests wait for the main loop (at most view::ANSWER_WAIT).
    let api_listener = crate::api::bind(config.speaker.api)
        .await
        .map_err(|e| e.to_string())?;
    info!(api = %config.speaker.api, "HTTP API listening");
    let (view, mut requests) = View::new(published_rx);
    let (runtime_commands, runtime_rx) =
        tokio::sync::mpsc::channel(crate::source::runtime::COMMAND_QUEUE);
    let (runtime_config, runtime_config_rx) = watch::channel(config.clone());
    let view = Arc::new(view.with_runtime(runtime_commands));
    let api = spawn_server(
        api_listener,
        config.speaker.api,
        view.clone(),
        stops.clone(),
        crate::api::Surface::Full,
    );
    info!(socket = %state_claim.socket().display(), "HTTP API on the Unix socket (drain and undrain, and everything read-only)");
    let local_api = tokio::spawn(crate::api::serve_local(
        local_listener,
        view.clone(),
        until(&stops),
    ));
    // The metrics-only listener: what a scraper on the network may reach.
    let metrics_api = match config.speaker.metrics {
        Some(addr) => {
            let listener = crate::api::bind(addr).await.map_err(|e| e.to_string())?;
            info!(metrics = %addr, "metrics listening (/metrics, /healthz, /readyz)");
            Some(spawn_server(
                listener,
                addr,
                view.clone(),
                stops.clone(),
                crate::api::Surface::MetricsOnly,
            ))
        }
        None => None,
    };

    // The source.
    let Source {
        snapshots: snap_rx,
        file_settings,
        file_resync,
        kube,
        kube_config,
        node_status,
        interfaces_wanted,
    } = start_source(
        &config,
        first_read,
        &node,
        &view,
        &stops,
        Runtime {
            state_dir: opts.state_dir.clone(),
            config: runtime_config_rx,
            commands: runtime_rx,
        },
    )
    .await?;

    let (probe_tx, probe_rx) = tokio::sync::mpsc::unbounded_channel();
    let (accept_tx, accept_rx) = tokio::sync::mpsc::unbounded_channel();
    // The drain control, the routes core's, is not kept across a restart:
    // a restarted holdfast advertises normally (docs/src/operations/drain.md).
    let routes = crate::routes::Routes::new(
        config.clone(),
        stability,
        kube.is_some(),
        file_settings.is_some(),
    );
    // BMP (RFC 7854): sysName is the node's name.
    let bmp = crate::bmp::Hub::start(&config.bmp, &node);
    let mut d = Daemon {
        opts: opts.clone(),
        started,
        config: config.clone(),
        config_error: None,
        node,
        router_id,
        node_labels: None,
        restart,
        routes,
        peers: BTreeMap::new(),
        published,
        file_settings,
        file_resync,
        bfd: None,
        kube,
        kube_config,
        runtime_config,
        interfaces_wanted,
        probe_tasks: BTreeMap::new(),
        probe_tx,
        routes_ready: watch::channel(false).0,
        listener: None,
        resync: crate::routes::reconcile::Schedule::new(config.resync, Instant::now()),
        reconcile_repairs: 0,
        accept_tx,
        api,
        metrics: metrics_api,
        view,
        shutdown: stops,
        config_stamp: None,
        config_reader: reload::FileReader::default(),
        bmp,
        handoff: handoff_received,
    };
    // Overrides by label: the sessions start with them, not with the
    // file's values and a reset a moment later. The API's requests are
    // answered meanwhile.
    let mut labels_rx = d.kube.as_ref().map(|k| k.node_labels());
    if let Some(rx) = labels_rx.as_mut()
        && config
            .node_overrides
            .iter()
            .any(|o| matches!(o.matcher, config::NodeMatch::Selector(_)))
    {
        let first = d
            .answering(
                &mut requests,
                tokio::time::timeout(NODE_LABELS_WAIT, rx.wait_for(Option::is_some)),
            )
            .await;
        match first.ok().and_then(|r| r.ok()).and_then(|l| l.clone()) {
            Some(labels) => d.on_node_labels(labels).await,
            None => warn!(
                "the Node's labels are not known after {NODE_LABELS_WAIT:?}: starting without the [[node_override]]s that select by label; they apply once the Node is seen"
            ),
        }
    }
    for p in d.config.peers.clone() {
        if !d.peers.contains_key(&p.name) {
            d.start_peer(&p);
        }
    }

    // The passive side.
    // Keyed for the addresses the peers have now, resolved ones included.
    if let Some(listen) = d.config.speaker.listen {
        let listener = bind_listener(
            listen,
            &d.listener_keys(),
            listener_ttl(&d.config),
            d.accept_tx.clone(),
        )
        .map_err(|e| format!("speaker.listen {listen}: {e}"))?;
        d.listener = Some(listener);
    }

    let signal = |kind| tokio::signal::unix::signal(kind).map_err(|e| e.to_string());
    use tokio::signal::unix::SignalKind;
    let inputs = Inputs {
        snapshots: snap_rx,
        probes: probe_rx,
        accepted: accept_rx,
        requests,
        sigterm: signal(SignalKind::terminate())?,
        sigint: signal(SignalKind::interrupt())?,
        sighup: signal(SignalKind::hangup())?,
        labels: labels_rx,
        config_watch: None,
        config_settled: None,
        chores: Chores::new(Instant::now()),
        handoff: handoff_rx,
    };
    d.config_stamp = config_stamp;
    d.publish();
    // The main loop; once it returns, its requests are dropped and the API
    // answers that holdfast is stopping.
    let signal = d.drive(inputs).await;
    let (graceful, withdrawn) = d.shutdown().await;
    // The sessions' Peer Downs, then RFC 7854 §4.5 Termination.
    d.bmp.terminate().await;
    let _ = shutdown_tx.send(true);
    drop(node_status);
    let _ = tokio::time::timeout(Duration::from_secs(2), d.api.task).await;
    if let Some(m) = d.metrics {
        let _ = tokio::time::timeout(Duration::from_secs(2), m.task).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), local_api).await;
    // The sockets removed, the lock released (last: the next holdfast
    // starts once it is).
    drop(handoff_socket);
    drop(state_claim);
    // A planned stop: one line, whatever the number of peers.
    info!(
        signal = signal.map(tracing::field::display),
        sessions_closed_for_graceful_restart = graceful,
        sessions_withdrawn = withdrawn,
        "holdfast stopped"
    );
    Ok(())
}

impl Daemon {
    /// Waits for `until`, answering the API's requests meanwhile (before
    /// the main loop runs).
    async fn answering<T>(
        &mut self,
        requests: &mut mpsc::Receiver<Request>,
        until: impl std::future::Future<Output = T>,
    ) -> T {
        let mut until = std::pin::pin!(until);
        loop {
            tokio::select! {
                out = &mut until => return out,
                Some(request) = requests.recv() => {
                    self.on_request(request);
                }
            }
        }
    }
}

//! Config reload (SIGHUP, or the file changed): prepared — everything that
//! can fail — then committed, everything or nothing.

use super::*;
use start::{CONFIG_READ_TIMEOUT, bind_listener, listener_ttl, spawn_server};

use std::sync::atomic::{AtomicBool, Ordering};

pub(super) fn config_identity(c: &Config) -> impl PartialEq + use<> {
    (
        c.speaker.asn,
        c.speaker.router_id,
        c.speaker.hostname.clone(),
    )
}

/// The file's identity for change detection.
pub(super) fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.modified().ok()?, m.ino()))
}

/// A file's identity for change detection: (length, mtime, inode).
pub(super) type Stamp = (u64, std::time::SystemTime, u64);

/// Reads the operator's files — the config and the `password_file`s it
/// names, or just the config's identity ([`stamp`]) — on tokio's blocking
/// pool, never on the runtime's one thread, and waits at most
/// [`CONFIG_READ_TIMEOUT`] for them: the start and every reload go
/// through it. `config::read_regular_file` refuses FIFOs and devices at
/// once; what is left is a file system whose reads hang (a dead NFS
/// server, a stuck FUSE daemon or Secret volume), and against that the
/// sessions' keepalives, BFD and the API must keep running. A read that
/// hangs keeps its thread until the file system answers; while it does,
/// the next read is refused at once rather than stacking up threads.
#[derive(Clone, Debug, Default)]
pub(super) struct FileReader {
    /// A read is under way (or hanging).
    busy: Arc<AtomicBool>,
}

/// Clears the reader's flag when its job has its value (or ends
/// without one, however it ends).
struct Busy(Arc<AtomicBool>);

/// Where a [`FileReader`] job sends its value.
pub(super) struct Reply<T> {
    tx: tokio::sync::oneshot::Sender<T>,
    busy: Busy,
}

impl<T> Reply<T> {
    /// Sends the value; the reader is free again before the waiting side
    /// has it, so the next read never finds this one still busy.
    pub(super) fn send(self, value: T) -> bool {
        drop(self.busy);
        self.tx.send(value).is_ok()
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Why [`FileReader::read`] has no value.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum ReadFailed {
    /// An earlier read has not returned yet: nothing was started.
    Busy(String),
    /// Not read within the time limit, or the reader stopped.
    Failed(String),
}

impl ReadFailed {
    pub(super) fn text(self) -> String {
        match self {
            ReadFailed::Busy(t) | ReadFailed::Failed(t) => t,
        }
    }
}

impl FileReader {
    /// Runs `job` on the blocking pool and waits for the value it sends,
    /// at most [`CONFIG_READ_TIMEOUT`]; `path` is the config, for the
    /// message. The reader is busy until the job sends (or returns
    /// without sending); the job may go on after it has sent (the start
    /// reads the VIP file then).
    pub(super) async fn read<T: Send + 'static>(
        &self,
        path: &Path,
        job: impl FnOnce(Reply<T>) + Send + 'static,
    ) -> Result<T, ReadFailed> {
        if self.busy.swap(true, Ordering::AcqRel) {
            return Err(ReadFailed::Busy(format!(
                "{}: an earlier read of the config or its password files has not returned yet; is the file system hanging?",
                path.display()
            )));
        }
        let busy = Busy(self.busy.clone());
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::task::spawn_blocking(move || job(Reply { tx, busy }));
        match tokio::time::timeout(CONFIG_READ_TIMEOUT, rx).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) => Err(ReadFailed::Failed(format!(
                "{}: reading the config failed: its reader stopped",
                path.display()
            ))),
            Err(_) => Err(ReadFailed::Failed(format!(
                "{}: the config and its password files were not read within {}s; is the file system hanging?",
                path.display(),
                CONFIG_READ_TIMEOUT.as_secs()
            ))),
        }
    }
}

/// The config at `path` as this node runs it: read and checked (its
/// password files too), with this node's overrides applied (by name, and
/// by `labels` when known). Blocking: only for [`FileReader::read`].
pub(super) fn load_resolved(
    path: &Path,
    labels: Option<&crate::source::kubernetes::NodeLabels>,
) -> Result<Config, Vec<config::Diagnostic>> {
    config::load(path).map(|c| config::resolve(&c, &super::start::node_name(&c), labels))
}

/// A reload that passed every check, ready to apply.
pub(super) struct Prepared {
    pub(super) config: Config,
    pub(super) router_id: Ipv4Addr,
    pub(super) identity_changed: bool,
    pub(super) api: Option<tokio::net::TcpListener>,
    /// `speaker.metrics` moved (`Some(Some(_))`, bound already) or was
    /// removed (`Some(None)`).
    pub(super) metrics: Option<Option<(std::net::SocketAddr, tokio::net::TcpListener)>>,
}

/// `source.kind` as the config file writes it.
/// The config's sources as a reload compares them: `[file]`, or
/// `[apiserver: file, kubernetes]` (a name other than the kind shown).
fn source_kinds(c: &config::Config) -> String {
    let each: Vec<String> = c
        .sources
        .iter()
        .map(|s| match s.kind.kind_name() {
            kind if kind == s.name => kind.to_string(),
            kind => format!("{}: {kind}", s.name),
        })
        .collect();
    format!("[{}]", each.join(", "))
}

/// Whether a peer's session must be reset for `new` to apply. Two keys
/// do not need one: `connect_retry` paces connection attempts (RFC 4271
/// §8.2.2, the ConnectRetryTimer) and nothing negotiated on an
/// established session depends on it; the export policy
/// (`[[peer.export]]`, `export_default`) only changes what the peer's
/// Adj-RIB-Out should hold (RFC 4271 §9.1.3), and the routes core's new
/// tables send just the difference as UPDATEs on the running session.
pub(super) fn needs_reset(old: &config::Peer, new: &config::Peer) -> bool {
    let mut same_session = new.clone();
    same_session.connect_retry = old.connect_retry;
    same_session.export = old.export.clone();
    same_session != *old
}

/// The MD5 keys the listening socket needs (RFC 2385 §2: the key is per
/// connection, so the listener needs one for every peer that may
/// connect): one per peer with a key, at the address it has now — its
/// literal `address`, or the one its `default-gateway` or `interface`
/// resolved to (`resolved`, by peer name; none while it is unresolved).
pub(super) fn listener_keys(
    c: &Config,
    resolved: impl Fn(&str) -> Option<IpAddr>,
) -> BTreeMap<IpAddr, Vec<u8>> {
    c.peers
        .iter()
        .filter_map(|p| {
            let key = p.md5_key()?;
            let ip = match p.address {
                PeerAddress::Ip(ip) => ip,
                PeerAddress::DefaultGateway(_) | PeerAddress::Interface(_) => resolved(&p.name)?,
            };
            Some((ip, key.to_vec()))
        })
        .collect()
}

impl Daemon {
    /// The config check (after a change in its directories, or every second
    /// while they are not all watched): the file changed since the last
    /// reload — or during it — reloads it.
    pub(super) async fn poll_config_file(&mut self) {
        let path = self.opts.config.clone();
        let now = self
            .config_reader
            .read(&self.opts.config, move |tx| {
                let _ = tx.send(stamp(&path));
            })
            .await;
        match now {
            // The identity is taken before the file is read: an edit
            // during the reload differs from it and triggers another.
            Ok(now) if now != self.config_stamp => {
                info!("config file changed: reloading");
                self.config_stamp = self.reload().await;
            }
            Ok(_) => {}
            // The hanging read was reported when it began.
            Err(ReadFailed::Busy(why)) => debug!("config file not checked: {why}"),
            Err(ReadFailed::Failed(why)) => {
                error!("config file not checked, the running config stays: {why}");
                self.config_error = Some(why);
                // Checked again, and reloaded, once the file system answers.
                self.config_stamp = None;
            }
        }
    }

    /// Config reload (SIGHUP or the file changed), everything or nothing:
    /// whatever can fail (reading and checking the file and its password
    /// files off the runtime thread within [`CONFIG_READ_TIMEOUT`],
    /// resolving the router ID, binding a new API, metrics or BGP
    /// listening address; a changed `source.kind` is refused) is done
    /// before anything changes, and a failure leaves the running config in
    /// force, logged in one line and shown by `holdfast_config_reload_error`.
    /// Then peers added, removed or changed are started, stopped or reset
    /// one by one; unchanged sessions stay up and send nothing unless their
    /// routes changed.
    ///
    /// Returns the file's identity as it was *before* it was read: an edit
    /// made while the reload ran then differs from it, and the poller
    /// reloads again.
    pub(super) async fn reload(&mut self) -> Option<Stamp> {
        let path = self.opts.config.clone();
        let labels = self.node_labels.clone();
        let read = self
            .config_reader
            .read(&self.opts.config, move |tx| {
                let before = stamp(&path);
                let _ = tx.send((before, load_resolved(&path, labels.as_ref())));
            })
            .await;
        let (before, loaded) = match read {
            Ok(read) => read,
            Err(why) => {
                let why = why.text();
                error!("config reload refused, the running config stays: {why}");
                self.config_error = Some(why);
                // No identity: the file is checked again, and reloaded, once
                // the file system answers.
                return None;
            }
        };
        match self.prepare(&self.opts.config.clone(), loaded).await {
            Ok(None) => self.config_error = None,
            Ok(Some(prepared)) => {
                self.config_error = None;
                self.commit(prepared).await;
            }
            Err(text) => {
                error!(
                    "config reload refused, the running config stays: {}",
                    text.replace('\n', "; ")
                );
                self.config_error = Some(text);
            }
        }
        before
    }

    /// Everything of a reload that can fail. `Ok(None)`: nothing changed.
    /// `loaded` is the file as [`load_resolved`] read it (off the runtime
    /// thread): the config this node runs, the file's with its overrides.
    pub(super) async fn prepare(
        &self,
        path: &Path,
        loaded: Result<Config, Vec<config::Diagnostic>>,
    ) -> Result<Option<Prepared>, String> {
        let new = loaded.map_err(|diags| {
            diags
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })?;
        if new == *self.config {
            return Ok(None);
        }
        // The source is the start of the flow (its task, its watchers,
        // the stability layer's view of it); switching it in a running
        // daemon is a restart's job.
        if source_kinds(&new) != source_kinds(&self.config) {
            return Err(format!(
                "{}: the sources changed from {} to {}: a reload cannot switch sources; restart holdfast to run with the new ones",
                path.display(),
                source_kinds(&self.config),
                source_kinds(&new),
            ));
        }
        let identity_changed = config_identity(&new) != config_identity(&self.config);
        let router_id = if identity_changed {
            router_id(&new)?
        } else {
            self.router_id
        };
        // Checked at load time already; the stability layer checks again
        // when it takes them, which must not be the first refusal.
        new.stability
            .validate()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let api = if new.speaker.api != self.api.addr {
            Some(
                crate::api::bind(new.speaker.api)
                    .await
                    .map_err(|e| format!("speaker.api: {e}"))?,
            )
        } else {
            None
        };
        // The new metrics listener is bound before anything changes: if
        // it cannot be, the old one keeps serving and nothing applies.
        let metrics = if new.speaker.metrics != self.metrics.as_ref().map(|m| m.addr) {
            match new.speaker.metrics {
                Some(addr) => Some(Some((
                    addr,
                    crate::api::bind(addr)
                        .await
                        .map_err(|e| format!("speaker.metrics: {e}"))?,
                ))),
                None => Some(None),
            }
        } else {
            None
        };
        Ok(Some(Prepared {
            config: new,
            router_id,
            identity_changed,
            api,
            metrics,
        }))
    }

    /// The node's labels changed (or are first known): its overrides are
    /// recomputed and applied like a reload, which resets only the peers
    /// whose settings change.
    pub(super) async fn on_node_labels(&mut self, labels: crate::source::kubernetes::NodeLabels) {
        if self.node_labels.as_ref() == Some(&labels) {
            return;
        }
        self.node_labels = Some(labels);
        if self.config.node_overrides.is_empty() {
            return;
        }
        info!("node labels changed: recomputing this node's [[node_override]]s");
        self.reload().await;
    }

    /// Applies a prepared reload.
    pub(super) async fn commit(&mut self, prepared: Prepared) {
        let Prepared {
            config: new,
            router_id,
            identity_changed,
            api,
            metrics,
        } = prepared;
        // The listening socket is rebound before anything else changes:
        // it is the last thing that can fail.
        let listener = if new.speaker.listen != self.config.speaker.listen {
            match self.rebind_listener(&new) {
                Ok(l) => Some(l),
                Err(e) => {
                    let text = format!("speaker.listen: {e}");
                    error!("config reload refused, the running config stays: {text}");
                    self.config_error = Some(text);
                    return;
                }
            }
        } else {
            None
        };
        info!("config reloaded from {}", self.opts.config.display());
        super::start::log_warnings(&new);
        let old = std::mem::replace(&mut self.config, Arc::new(new));
        if identity_changed {
            self.node = node_name(&self.config);
            self.router_id = router_id;
        }
        if let Some(l) = listener {
            self.listener = l;
        }
        if let Some(l) = api {
            let addr = self.config.speaker.api;
            info!(api = %addr, "HTTP API listening");
            let new_api = spawn_server(
                l,
                addr,
                self.view.clone(),
                self.shutdown.clone(),
                crate::api::Surface::Full,
            );
            let old_api = std::mem::replace(&mut self.api, new_api);
            let _ = old_api.stop.send(true);
        }
        if let Some(listener) = metrics {
            let new_metrics = listener.map(|(addr, l)| {
                info!(metrics = %addr, "metrics listening (/metrics, /healthz, /readyz)");
                spawn_server(
                    l,
                    addr,
                    self.view.clone(),
                    self.shutdown.clone(),
                    crate::api::Surface::MetricsOnly,
                )
            });
            if new_metrics.is_none() {
                info!("metrics listener closed (speaker.metrics removed)");
            }
            if let Some(old) = std::mem::replace(&mut self.metrics, new_metrics) {
                let _ = old.stop.send(true);
            }
        }
        // Stability parameters (validated in `prepare`) and the drain's
        // wait.
        self.routes.set_config(Instant::now(), self.config.clone());
        self.carry();
        self.follow_peers(identity_changed).await;
        // The listener's TTL settings follow the peers.
        if let Some(l) = &self.listener {
            let ttl = listener_ttl(&self.config);
            if ttl != listener_ttl(&old) {
                match ttl.apply(l.socket.as_ref()) {
                    Ok(()) => {
                        info!(
                            ttl = ttl.ttl,
                            min_ttl = ttl.min_ttl,
                            "listening socket's TTL settings changed"
                        )
                    }
                    Err(e) => error!("listening socket's TTL settings: {e}"),
                }
            }
        }
        // The sources follow the config.
        if let Some(tx) = &self.kube_config {
            let _ = tx.send(self.config.clone());
        }
        self.runtime_config.send_replace(self.config.clone());
        if let (Some(tx), Some(s)) = (
            &self.file_settings,
            crate::source::file::FileSettings::from_config(&self.config),
        ) {
            tx.send_if_modified(|cur| {
                if *cur == s {
                    false
                } else {
                    *cur = s;
                    true
                }
            });
        }
        self.routes.refresh(Instant::now());
        self.carry();
    }

    /// A reload's peers, one by one: removed ones stopped, changed ones
    /// reset (or, for `connect_retry` alone, just remembered), added ones
    /// started.
    async fn follow_peers(&mut self, identity_changed: bool) {
        // The listener's keys first, so that a peer
        // added or re-keyed can connect as soon as its session exists.
        self.follow_listener_keys();
        let new_peers: BTreeMap<String, config::Peer> = self
            .config
            .peers
            .iter()
            .map(|p| (p.name.clone(), p.clone()))
            .collect();
        let names: Vec<String> = self.peers.keys().cloned().collect();
        for name in names {
            let Some(cur) = self.peers.get(&name).map(|c| c.config.clone()) else {
                continue;
            };
            match new_peers.get(&name) {
                None => {
                    info!(peer = %name, "peer removed from the config");
                    self.stop_peer(&name, StopHow::Deconfigured).await;
                }
                Some(p) if identity_changed || needs_reset(&cur, p) => {
                    info!(peer = %name, "peer changed: resetting its session");
                    let how = if cur.address != p.address {
                        StopHow::Deconfigured
                    } else {
                        StopHow::Reconfigured
                    };
                    self.reset_peer(p, how).await;
                }
                Some(p) if cur != *p => {
                    // Only timers of the next connection attempt changed
                    // (connect_retry, RFC 4271 §8.2.2), or the export
                    // policy (the new tables, carried by `commit`, send
                    // only what changed): the running session keeps its
                    // TCP connection and its routes.
                    if cur.connect_retry != p.connect_retry {
                        info!(peer = %name, "peer's connect_retry changed: no reset; it applies to this peer's next session");
                    }
                    if cur.export != p.export {
                        info!(peer = %name, "peer's export policy changed: no reset; only the routes it changes are re-sent");
                    }
                    if let Some(cur) = self.peers.get_mut(&name) {
                        cur.config = p.clone();
                    }
                }
                Some(_) => {}
            }
        }
        for (name, p) in &new_peers {
            if !self.peers.contains_key(name) {
                info!(peer = %name, "peer added");
                self.start_peer(p);
            }
        }
    }

    /// The passive side for `new.speaker.listen`: `Ok(None)` when it no
    /// longer listens. A new address on the same port as the old one may
    /// need the old socket closed first (a wildcard and a specific address
    /// conflict); if the new one then fails, the old address is bound again.
    pub(super) fn rebind_listener(&mut self, new: &Config) -> Result<Option<Listener>, String> {
        let Some(addr) = new.speaker.listen else {
            info!("no longer accepting BGP connections (speaker.listen removed)");
            return Ok(None);
        };
        let keys = listener_keys(new, |name| self.resolved_address(name));
        let ttl = listener_ttl(new);
        match bind_listener(addr, &keys, ttl, self.accept_tx.clone()) {
            Ok(l) => Ok(Some(l)),
            Err(e)
                if self
                    .listener
                    .as_ref()
                    .is_some_and(|l| l.addr.port() == addr.port()) =>
            {
                let old = self.listener.take().expect("checked above");
                let (old_addr, old_keys) = (old.addr, old.keys.clone());
                drop(old);
                match bind_listener(addr, &keys, ttl, self.accept_tx.clone()) {
                    Ok(l) => Ok(Some(l)),
                    Err(e2) => {
                        let back = listener_ttl(&self.config);
                        self.listener =
                            bind_listener(old_addr, &old_keys, back, self.accept_tx.clone()).ok();
                        if self.listener.is_none() {
                            error!(listen = %old_addr, "cannot bind the old listening address again: no passive side until the next reload");
                        }
                        Err(format!("{addr}: {e2} (first try: {e})"))
                    }
                }
            }
            Err(e) => Err(format!("{addr}: {e}")),
        }
    }

    /// The address a peer's session has now (a `default-gateway` or
    /// `interface` peer's as resolved); none without a session.
    pub(super) fn resolved_address(&self, name: &str) -> Option<IpAddr> {
        let p = self.peers.get(name)?;
        p.handle.as_ref().map(|h| h.spec.address)
    }

    /// The MD5 keys the listening socket needs now ([`listener_keys`]).
    pub(super) fn listener_keys(&self) -> BTreeMap<IpAddr, Vec<u8>> {
        listener_keys(&self.config, |name| self.resolved_address(name))
    }

    /// The listener's MD5 keys (RFC 2385 §2) follow the peers: added,
    /// changed and removed ones, and the addresses `default-gateway` and
    /// `interface` peers resolve to (a new gateway, a router learnt on the
    /// link: its key moves with it). Called whenever a session starts or
    /// stops.
    pub(super) fn follow_listener_keys(&mut self) {
        if self.listener.is_none() {
            return;
        }
        let want = self.listener_keys();
        let Some(l) = self.listener.as_mut() else {
            return;
        };
        if l.keys == want {
            return;
        }
        for ip in l.keys.keys().filter(|ip| !want.contains_key(ip)) {
            match holdfast_sockopt::clear_md5_key(l.socket.as_ref(), *ip) {
                Ok(()) => info!(peer = %ip, "listening socket: MD5 key removed"),
                Err(e) => error!(peer = %ip, "listening socket: cannot remove the MD5 key: {e}"),
            }
        }
        for (ip, key) in &want {
            if l.keys.get(ip) != Some(key) {
                match holdfast_sockopt::set_md5_key(l.socket.as_ref(), *ip, key) {
                    Ok(()) => info!(peer = %ip, "listening socket: MD5 key set"),
                    Err(e) => error!(peer = %ip, "listening socket: cannot set the MD5 key: {e}"),
                }
            }
        }
        l.keys = want;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each read, once it has its value, leaves the reader free for the
    /// next one at once: a reload right after a check of the file is
    /// never refused as "an earlier read has not returned yet".
    #[tokio::test]
    async fn a_read_that_answered_never_holds_up_the_next() {
        let reader = FileReader::default();
        let path = Path::new("holdfast.toml");
        for n in 0..200u32 {
            let got = reader
                .read(path, move |reply| {
                    reply.send(n);
                    // The job goes on after it has sent.
                    std::thread::sleep(Duration::from_millis(1));
                })
                .await;
            assert_eq!(got, Ok(n));
        }
    }

    /// While a read hangs, the next is refused at once rather than
    /// starting another thread; once it returns, reads go on.
    #[tokio::test]
    async fn a_read_that_hangs_refuses_the_next_until_it_returns() {
        let reader = FileReader::default();
        let path = Path::new("holdfast.toml");
        let (release, hanging) = std::sync::mpsc::channel::<()>();
        let first = reader.clone();
        let first = tokio::spawn(async move {
            first
                .read(Path::new("holdfast.toml"), move |reply| {
                    let _ = hanging.recv();
                    reply.send(1);
                })
                .await
        });
        // The first read has begun (its job runs) before the second.
        while !reader.busy.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
        let second = reader.read(path, |reply| {
            reply.send(2);
        });
        match second.await {
            Err(ReadFailed::Busy(why)) => assert_eq!(
                why,
                "holdfast.toml: an earlier read of the config or its password files has not returned yet; is the file system hanging?"
            ),
            other => panic!("the second read was not refused: {other:?}"),
        }
        release.send(()).expect("the first read waits");
        assert_eq!(first.await.expect("joined"), Ok(1));
        assert_eq!(
            reader
                .read(path, |reply| {
                    reply.send(3);
                })
                .await,
            Ok(3)
        );
    }
}

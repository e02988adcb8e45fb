//! The watcher layer: kube-runtime watchers and reflectors on Services,
//! EndpointSlices, this node (and Namespaces when a selector needs their
//! labels), a link health per watcher, and the loop that evaluates the
//! stores and sends snapshots.
//!
//! - Snapshots are sent only when they differ from the last one
//!   (`send_if_modified`): a re-list that changes nothing wakes nobody.
//! - Changes are coalesced without delaying the first: the first change
//!   after a quiet spell is evaluated at once, and changes arriving within
//!   `debounce` of an evaluation wait for the end of that window and go
//!   into one evaluation together. A burst thus costs at most one
//!   evaluation per `debounce`, and a lone VIP reaches the speaker in
//!   well under a millisecond. Objects of an initial list only count at
//!   `InitDone`, so a list of a thousand Services makes one evaluation.
//! - While any link is not live (listing, or broken: see `link`), the
//!   source reports `healthy: false` and keeps its last good evaluation:
//!   it neither evaluates nor lets its VIP set shrink. Reflectors keep
//!   their old contents through a re-list and swap at `InitDone`, so when
//!   every link is live again the fresh stores are evaluated once; if
//!   nothing changed, the snapshot is the one from before the outage.
//! - The record stores note which Services changed (a Service, or the
//!   Service of an EndpointSlice): those alone are judged again
//!   (`policy::update`), in place in the evaluation the runner holds. The
//!   Node, a Namespace, the config, a (re-)list and a resync judge every
//!   Service (`policy::evaluate`).
//! - A config change is evaluated at once; if it changes what must be
//!   watched (`source.namespaces`, the need for Namespace labels), the
//!   watchers are restarted and the source is unhealthy until they have
//!   listed again.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::utils::WatchStreamExt;
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::backoff::RetryBackoff;
use super::endpoints::SERVICE_NAME_LABEL;
use super::link::{Link, Signal};
use super::policy::{
    Changes, Cluster, Evaluation, evaluate, needs_full_evaluation, needs_namespace_labels,
    source_settings, update,
};
use super::records::{ServiceRecord, SliceRecord};
use super::service::ServiceKey;
use crate::config::Config;
use crate::model::SourceSnapshot;
use crate::report::events::EventLimits;
use crate::report::events::{EventRecorder, service_reference};

/// How the source talks to the API server. [`Options::new`] gives the
/// defaults for production; tests shorten the timers.
#[derive(Debug, Clone)]
pub struct Options {
    /// This node's name (`NODE_NAME` from the downward API, or
    /// `speaker.hostname`).
    pub node_name: String,
    /// At most one evaluation per this long: changes arriving within it
    /// after an evaluation are evaluated together at its end. The first
    /// change after a quiet spell is evaluated at once. Default 50 ms.
    pub debounce: Duration,
    /// The server-side `timeoutSeconds` of each watch: the API server ends
    /// the stream cleanly after this long and the watcher re-opens it from
    /// where it was. Shorter than `read_timeout`, so a quiet watch is never
    /// taken for a dead one. Default 120 s.
    pub watch_timeout: Duration,
    /// The client's read timeout (set by [`client_config`]): a request
    /// that gets no bytes for this long fails. The API server sends
    /// watch bookmarks about every minute, and ends each watch after
    /// `watch_timeout`. Default 150 s.
    pub read_timeout: Duration,
    /// First retry delay after a watcher error. Default 800 ms.
    pub backoff_min: Duration,
    /// Longest retry delay (plus up to a quarter of jitter). Default 30 s.
    pub backoff_max: Duration,
    /// Event rate limits per Service.
    pub event_limits: EventLimits,
}

impl Options {
    /// The production defaults for node `node_name`.
    pub fn new(node_name: impl Into<String>) -> Options {
        Options {
            node_name: node_name.into(),
            debounce: Duration::from_millis(50),
            watch_timeout: Duration::from_secs(120),
            read_timeout: Duration::from_secs(150),
            backoff_min: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            event_limits: EventLimits::default(),
        }
    }

    /// How long a broken link must stay free of errors to count as live
    /// again (see the `link` module).
    pub fn quiet_period(&self) -> Duration {
        self.read_timeout
            .saturating_add(RetryBackoff::longest(self.backoff_max))
            .saturating_add(Duration::from_secs(1))
    }
}

/// Sets the timeouts the source relies on in a kube client configuration:
/// the read timeout (reset by every write, so a pooled connection's idle
/// time does not count against the next request).
pub fn client_config(mut config: kube::Config, options: &Options) -> kube::Config {
    config.read_timeout = Some(options.read_timeout);
    config.reset_reader_on_write = true;
    config
}

/// A client for the cluster this runs in: in-cluster configuration (the
/// service account), or `KUBECONFIG` / `~/.kube/config`, with
/// [`client_config`]'s timeouts.
pub async fn connect(options: &Options) -> Result<Client, String> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| format!("no Kubernetes API configuration (in-cluster or KUBECONFIG): {e}"))?;
    Client::try_from(client_config(config, options))
        .map_err(|e| format!("cannot build the Kubernetes client: {e}"))
}

/// The running source. Dropping it stops the watchers.
#[derive(Debug)]
pub struct Handle {
    latest: watch::Receiver<Arc<Evaluation>>,
    resync: mpsc::UnboundedSender<()>,
    /// This node's facts as of the last evaluation (`None` before the
    /// first, or while the Node is missing).
    node_facts: watch::Receiver<Option<super::NodeFacts>>,
    events: EventRecorder,
    /// This node's labels as last seen (empty when there is no such Node);
    /// `None` until the first evaluation.
    node_labels: watch::Receiver<Option<NodeLabels>>,
    task: JoinHandle<()>,
}

/// A Node's labels.
pub type NodeLabels = std::collections::BTreeMap<String, String>;

impl Drop for Handle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Handle {
    /// The last good evaluation (empty until the first one).
    pub fn evaluation(&self) -> Arc<Evaluation> {
        Arc::clone(&self.latest.borrow())
    }

    /// Why this node does or does not advertise `address`, as far as the
    /// Kubernetes source knows (see [`Evaluation::explain`]).
    pub fn explain(&self, address: std::net::IpAddr) -> Vec<String> {
        self.evaluation().explain(address)
    }

    /// Periodic reconcile: evaluate the stores afresh, as if every object
    /// had just changed.
    pub fn resync(&self) {
        let _ = self.resync.send(());
    }

    /// Whether this node is going away, as of the last evaluation.
    pub fn node_facts(&self) -> Option<super::NodeFacts> {
        self.node_facts.borrow().clone()
    }

    /// This node's labels, as the watchers last saw them: the daemon picks
    /// its `[[node_override]]`s by them.
    pub fn node_labels(&self) -> watch::Receiver<Option<NodeLabels>> {
        self.node_labels.clone()
    }

    /// The Event recorder for this node's route changes.
    pub fn events(&self) -> &EventRecorder {
        &self.events
    }
}

/// Starts the source on the current tokio runtime: it follows `config`
/// (the daemon sends reloaded configs there) and sends snapshots on
/// `snapshots`, only when they change.
///
/// `client` must have the read timeout of `options` ([`connect`], or a
/// config passed through [`client_config`]): the link health relies on a
/// request that gets no answer failing within it.
pub fn spawn(
    client: Client,
    options: Options,
    config: watch::Receiver<Arc<Config>>,
    snapshots: watch::Sender<SourceSnapshot>,
) -> Handle {
    let (latest_tx, latest) = watch::channel(Arc::<Evaluation>::default());
    let resolver_view = latest.clone();
    let events = EventRecorder::spawn(
        client.clone(),
        options.node_name.clone(),
        options.event_limits,
        Box::new(move |address| {
            let evaluation = Arc::clone(&resolver_view.borrow());
            evaluation
                .services_of(address)
                .iter()
                .map(|key| service_reference(key, evaluation.uid_of(key).map(str::to_string)))
                .collect()
        }),
    );
    let mut runner = Runner::new(client, options, config, snapshots, latest_tx);
    runner.events = Some(events.clone());
    let node_labels = runner.node_labels.subscribe();
    let (resync, resync_rx) = mpsc::unbounded_channel();
    let node_facts = runner.node_facts.subscribe();
    runner.resync_rx = Some(resync_rx);
    let task = tokio::spawn(runner.run());
    Handle {
        latest,
        resync,
        node_facts,
        events,
        node_labels,
        task,
    }
}

/// What must be watched for a config.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Plan {
    /// Empty: all namespaces.
    namespaces: Vec<String>,
    namespace_labels: bool,
}

impl Plan {
    fn of(config: &Config) -> Plan {
        Plan {
            namespaces: source_settings(config).namespaces.clone(),
            namespace_labels: needs_namespace_labels(config),
        }
    }
}

type Tx = mpsc::UnboundedSender<(u64, usize, Signal)>;

/// One generation of watchers and their stores.
struct Watchers {
    generation: u64,
    links: Vec<Link>,
    /// The links of `services` and `slices`: their changes name the
    /// Services to judge again, where any other change (the Node, a
    /// Namespace) is judged across every Service.
    records_links: Vec<usize>,
    services: Vec<Records<ServiceRecord>>,
    slices: Vec<Records<SliceRecord>>,
    node: Store<Node>,
    namespaces: Option<Store<Namespace>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Watchers {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Watchers {
    fn start(
        client: &Client,
        plan: &Plan,
        options: &Options,
        tx: &Tx,
        generation: u64,
    ) -> Watchers {
        let timeout = u32::try_from(options.watch_timeout.as_secs().max(1)).unwrap_or(u32::MAX);
        let base = watcher::Config::default().timeout(timeout);
        let mut w = Watchers {
            generation,
            links: Vec::new(),
            records_links: Vec::new(),
            services: Vec::new(),
            slices: Vec::new(),
            node: reflector::store::<Node>().0,
            namespaces: None,
            tasks: Vec::new(),
        };
        let scopes: Vec<Option<&str>> = if plan.namespaces.is_empty() {
            vec![None]
        } else {
            plan.namespaces.iter().map(|n| Some(n.as_str())).collect()
        };
        for scope in scopes {
            let within = scope
                .map(|ns| format!(" in namespace \"{ns}\""))
                .unwrap_or_default();
            let store = w.watch_records(
                format!("services{within}"),
                api::<Service>(client, scope),
                base.clone(),
                |service| Some(ServiceRecord::of(service)),
                options,
                tx,
            );
            w.services.push(store);
            // Slices without the label belong to no Service we could match.
            let node_name = options.node_name.clone();
            let store = w.watch_records(
                format!("endpointslices{within}"),
                api::<EndpointSlice>(client, scope),
                base.clone().labels(SERVICE_NAME_LABEL),
                move |slice| SliceRecord::of(slice, &node_name),
                options,
                tx,
            );
            w.slices.push(store);
        }
        w.node = w.watch(
            format!("node \"{}\"", options.node_name),
            Api::all(client.clone()),
            base.clone()
                .fields(&format!("metadata.name={}", options.node_name)),
            strip_node,
            options,
            tx,
        );
        if plan.namespace_labels {
            let store = w.watch(
                "namespaces".to_string(),
                Api::all(client.clone()),
                base,
                strip_namespace,
                options,
                tx,
            );
            w.namespaces = Some(store);
        }
        w
    }

    /// Starts one watcher feeding a reflector store, reporting to `tx`.
    fn watch<K>(
        &mut self,
        name: String,
        api: Api<K>,
        config: watcher::Config,
        strip: fn(&mut K),
        options: &Options,
        tx: &Tx,
    ) -> Store<K>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
        K::DynamicType: Default + Eq + Hash + Clone + Send + Sync,
    {
        let (store, writer) = reflector::store();
        let (id, backoff) = self.add_link(name, options);
        let generation = self.generation;
        let tx = tx.clone();
        let stream = watcher(api, config)
            .map_ok(move |event| event.modify(strip))
            .backoff(backoff);
        self.tasks.push(tokio::spawn(async move {
            let stream = reflector::reflector(writer, stream);
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                let signal = match item {
                    Ok(watcher::Event::Init) => Signal::Init,
                    Ok(watcher::Event::InitApply(_)) => continue,
                    Ok(watcher::Event::InitDone) => Signal::InitDone,
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Signal::Changed,
                    Err(error) => Signal::Error(super::forbidden::describe_watch(&error)),
                };
                if tx.send((generation, id, signal)).is_err() {
                    return;
                }
            }
        }));
        store
    }

    /// A new link (one watcher's health) and the backoff its watcher
    /// retries with; answers the link's index.
    fn add_link(&mut self, name: String, options: &Options) -> (usize, RetryBackoff) {
        let id = self.links.len();
        self.links.push(Link::new(name));
        let backoff =
            RetryBackoff::new(options.backoff_min, options.backoff_max, &options.node_name);
        (id, backoff)
    }

    /// Starts one watcher whose objects are kept as the records `convert`
    /// makes of them (`None`: nothing to keep), reporting to `tx`.
    fn watch_records<K, R>(
        &mut self,
        name: String,
        api: Api<K>,
        config: watcher::Config,
        convert: impl Fn(K) -> Option<R> + Send + 'static,
        options: &Options,
        tx: &Tx,
    ) -> Records<R>
    where
        K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
        R: PartialEq + Owner + Send + Sync + 'static,
    {
        let records = Records::default();
        let (id, backoff) = self.add_link(name, options);
        self.records_links.push(id);
        let generation = self.generation;
        let tx = tx.clone();
        let stream = watcher(api, config).backoff(backoff);
        let kept = records.clone();
        self.tasks.push(tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while let Some(item) = stream.next().await {
                let signal = match item {
                    Ok(event) => match kept.on(event, &convert) {
                        Some(signal) => signal,
                        None => continue,
                    },
                    Err(error) => Signal::Error(super::forbidden::describe_watch(&error)),
                };
                if tx.send((generation, id, signal)).is_err() {
                    return;
                }
            }
        }));
        records
    }

    fn all_live(&self) -> bool {
        self.links.iter().all(Link::live)
    }

    fn problems(&self) -> Option<String> {
        let problems: Vec<String> = self.links.iter().filter_map(Link::problem).collect();
        (!problems.is_empty()).then(|| problems.join("; "))
    }
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// What one watcher keeps: a record per object (records.rs), by namespace
/// and name. As a reflector does for whole objects, the objects of a
/// (re-)list are collected aside and replace the records at `InitDone`,
/// so the records in force stay whole through a re-list.
struct Records<R> {
    inner: Arc<Mutex<RecordsState<R>>>,
}

impl<R> Clone for Records<R> {
    fn clone(&self) -> Self {
        Records {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<R> Default for Records<R> {
    fn default() -> Self {
        Records {
            inner: Arc::new(Mutex::new(RecordsState {
                live: HashMap::new(),
                listing: None,
                touched: BTreeSet::new(),
                relisted: false,
            })),
        }
    }
}

/// An object's namespace and name.
type ObjectKey = (Option<String>, String);

struct RecordsState<R> {
    live: HashMap<ObjectKey, Arc<R>>,
    /// The records of the list in progress.
    listing: Option<HashMap<ObjectKey, Arc<R>>>,
    /// The Services whose records changed since the runner last looked.
    touched: BTreeSet<ServiceKey>,
    /// A list replaced every record since then.
    relisted: bool,
}

/// The Service a record belongs to.
pub(crate) trait Owner {
    fn owner(&self) -> &ServiceKey;
}

impl Owner for ServiceRecord {
    fn owner(&self) -> &ServiceKey {
        &self.key
    }
}

impl Owner for SliceRecord {
    fn owner(&self) -> &ServiceKey {
        &self.service
    }
}

impl<R: PartialEq + Owner> Records<R> {
    /// The Services touched since the last call, and whether a list
    /// replaced the records meanwhile; both are reset.
    fn take_touched(&self) -> (BTreeSet<ServiceKey>, bool) {
        self.inner
            .lock()
            .map(|mut s| {
                (
                    std::mem::take(&mut s.touched),
                    std::mem::take(&mut s.relisted),
                )
            })
            .unwrap_or((BTreeSet::new(), true))
    }

    /// The record of the object `key` names (a Service's record by its
    /// key).
    fn get(&self, key: &ServiceKey) -> Option<Arc<R>> {
        let state = self.inner.lock().ok()?;
        let named = |namespace: Option<String>| state.live.get(&(namespace, key.name.clone()));
        named(Some(key.namespace.clone()))
            // ServiceKey::of reads no namespace as "default".
            .or_else(|| (key.namespace == "default").then(|| named(None)).flatten())
            .cloned()
    }

    /// The records in force.
    fn state(&self) -> Vec<Arc<R>> {
        self.inner
            .lock()
            .map(|s| s.live.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Applies one watch event; the signal for the runner, `None` for an
    /// object of a list in progress (it counts at `InitDone`).
    fn on<K: Resource>(
        &self,
        event: watcher::Event<K>,
        convert: &impl Fn(K) -> Option<R>,
    ) -> Option<Signal> {
        let key = |k: &K| (k.namespace(), k.name_any());
        let Ok(mut state) = self.inner.lock() else {
            return Some(Signal::Error("the record store is poisoned".into()));
        };
        let state = &mut *state;
        match event {
            watcher::Event::Init => {
                state.listing = Some(HashMap::new());
                Some(Signal::Init)
            }
            watcher::Event::InitApply(object) => {
                let key = key(&object);
                if let (Some(listing), Some(record)) = (&mut state.listing, convert(object)) {
                    listing.insert(key, Arc::new(record));
                }
                None
            }
            watcher::Event::InitDone => {
                state.live = state.listing.take().unwrap_or_default();
                state.relisted = true;
                Some(Signal::InitDone)
            }
            watcher::Event::Apply(object) => {
                let key = key(&object);
                let changed = match convert(object) {
                    Some(record) => {
                        let same = state.live.get(&key).is_some_and(|r| **r == record);
                        if !same {
                            state.touched.insert(record.owner().clone());
                            if let Some(old) = state.live.insert(key, Arc::new(record)) {
                                state.touched.insert(old.owner().clone());
                            }
                        }
                        !same
                    }
                    None => match state.live.remove(&key) {
                        Some(old) => {
                            state.touched.insert(old.owner().clone());
                            true
                        }
                        None => false,
                    },
                };
                Some(if changed {
                    Signal::Changed
                } else {
                    Signal::Unchanged
                })
            }
            watcher::Event::Delete(object) => Some(match state.live.remove(&key(&object)) {
                Some(old) => {
                    state.touched.insert(old.owner().clone());
                    Signal::Changed
                }
                None => Signal::Unchanged,
            }),
        }
    }
}

fn strip_node(node: &mut Node) {
    node.metadata.managed_fields = None;
    node.metadata.annotations = None;
    // Images, addresses, heartbeats: nothing evaluation reads. The Ready
    // condition's status and message stay: they tell a graceful node
    // shutdown (`NodeFacts`).
    node.status = node.status.take().map(|status| {
        let ready = status
            .conditions
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ == "Ready")
            .map(|mut c| {
                c.last_heartbeat_time = None;
                c.last_transition_time = None;
                c
            })
            .collect();
        k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(ready),
            ..Default::default()
        }
    });
}

fn strip_namespace(namespace: &mut Namespace) {
    namespace.metadata.managed_fields = None;
    namespace.metadata.annotations = None;
    namespace.spec = None;
    namespace.status = None;
}

/// Says so when an evaluation took a mass disappearance as an absence.
fn warn_mass(evaluation: &Evaluation) {
    if let Some((vips, advertised)) = evaluation.mass_absence {
        tracing::warn!(
            vips,
            advertised,
            "the Services of {vips} of {advertised} VIPs went missing from the API server at once: taken as an absence (withdraw_hold_down, then the mass-withdrawal guard), not as deletions"
        );
    }
}

/// The next resync request; never without a channel.
async fn recv_resync(rx: &mut Option<mpsc::UnboundedReceiver<()>>) -> Option<()> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The loop behind [`spawn`].
struct Runner {
    client: Client,
    options: Options,
    config_rx: watch::Receiver<Arc<Config>>,
    config: Arc<Config>,
    plan: Plan,
    snapshots: watch::Sender<SourceSnapshot>,
    /// The last good evaluation, for `explain` and the Event recorder.
    latest: watch::Sender<Arc<Evaluation>>,
    tx: Tx,
    rx: mpsc::UnboundedReceiver<(u64, usize, Signal)>,
    watchers: Watchers,
    /// The last good evaluation.
    last: Arc<Evaluation>,
    /// At least one evaluation was made: the source is synced.
    evaluated: bool,
    /// An evaluation was made since every link was last live.
    fresh: bool,
    /// When the pending evaluation is due.
    due: Option<tokio::time::Instant>,
    /// When the last evaluation was made (the debounce window runs from it).
    last_evaluation: Option<tokio::time::Instant>,
    /// Resync requests from the daemon.
    resync_rx: Option<mpsc::UnboundedReceiver<()>>,
    /// The next evaluation answers a resync: it judges every Service, and
    /// counts what it corrects beyond what the watch events give.
    resync_pending: bool,
    /// The next evaluation judges every Service: the Node, a Namespace or
    /// the config changed, or a list replaced the records.
    full_pending: bool,
    /// VIPs on which resyncs found the last evaluation wrong, so far: sent
    /// in the snapshots (`SourceSnapshot::reconcile_repairs`).
    resync_repairs: u64,
    /// This node's facts as of the last evaluation.
    node_facts: watch::Sender<Option<super::NodeFacts>>,
    /// For Warning Events about refused attribute annotations.
    events: Option<EventRecorder>,
    /// This node's labels, sent when they change.
    node_labels: watch::Sender<Option<NodeLabels>>,
}

impl Runner {
    fn new(
        client: Client,
        options: Options,
        mut config_rx: watch::Receiver<Arc<Config>>,
        snapshots: watch::Sender<SourceSnapshot>,
        latest: watch::Sender<Arc<Evaluation>>,
    ) -> Runner {
        let config = Arc::clone(&config_rx.borrow_and_update());
        let plan = Plan::of(&config);
        let (tx, rx) = mpsc::unbounded_channel();
        let watchers = Watchers::start(&client, &plan, &options, &tx, 0);
        Runner {
            client,
            options,
            config_rx,
            config,
            plan,
            snapshots,
            latest,
            tx,
            rx,
            watchers,
            last: Arc::default(),
            evaluated: false,
            fresh: false,
            due: None,
            last_evaluation: None,
            resync_rx: None,
            resync_pending: false,
            full_pending: true,
            resync_repairs: 0,
            node_facts: watch::channel(None).0,
            events: None,
            node_labels: watch::channel(None).0,
        }
    }

    async fn run(mut self) {
        let mut config_open = true;
        self.publish();
        loop {
            let quiet = self.options.quiet_period();
            let link_deadline = self
                .watchers
                .links
                .iter()
                .filter_map(|l| l.deadline(quiet))
                .min()
                .map(tokio::time::Instant::from_std);
            let wake_at = match (self.due, link_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                message = self.rx.recv() => {
                    // The runner holds a sender: the channel never closes.
                    let Some((generation, id, signal)) = message else { return };
                    if generation == self.watchers.generation {
                        self.on_signal(id, signal);
                    }
                }
                changed = self.config_rx.changed(), if config_open => {
                    match changed {
                        Ok(()) => {
                            let config = Arc::clone(&self.config_rx.borrow_and_update());
                            self.on_config(config);
                        }
                        // The daemon dropped its sender: keep the last config.
                        Err(_) => config_open = false,
                    }
                }
                () = crate::sleep::until(wake_at), if wake_at.is_some() => self.on_tick(),
                Some(()) = recv_resync(&mut self.resync_rx) => {
                    // The stores are evaluated afresh, whatever the watch
                    // events said (a lost event left the last evaluation
                    // behind). Not `full_pending`: the evaluation tells
                    // what the watch events alone give from what only the
                    // fresh one finds.
                    self.resync_pending = true;
                    self.schedule();
                }
            }
            // An evaluation due now runs now, not at the timer's next tick.
            if self
                .due
                .is_some_and(|due| due <= tokio::time::Instant::now())
            {
                self.on_tick();
            }
            self.publish();
        }
    }

    fn on_signal(&mut self, id: usize, signal: Signal) {
        let now = Instant::now();
        let records_change = signal == Signal::Changed && self.watchers.records_links.contains(&id);
        let Some(link) = self.watchers.links.get_mut(id) else {
            return;
        };
        if let Signal::Error(error) = &signal {
            tracing::warn!(watcher = %link.name, %error, "Kubernetes watcher error; the last known VIPs stand");
        }
        let changed = link.on(signal, now);
        if changed && !records_change {
            self.full_pending = true;
        }
        if !link.live() {
            self.fresh = false;
        }
        if changed {
            self.schedule();
        }
        self.schedule_if_stale();
    }

    fn on_config(&mut self, config: Arc<Config>) {
        let plan = Plan::of(&config);
        self.config = config;
        if plan != self.plan {
            let namespaces = if plan.namespaces.is_empty() {
                "all".to_owned()
            } else {
                plan.namespaces.join(",")
            };
            tracing::info!(
                %namespaces,
                namespace_labels = plan.namespace_labels,
                "the config changes what is watched; restarting the watchers"
            );
            let generation = self.watchers.generation.wrapping_add(1);
            self.watchers =
                Watchers::start(&self.client, &plan, &self.options, &self.tx, generation);
            self.plan = plan;
            self.fresh = false;
        }
        self.full_pending = true;
        self.schedule();
    }

    fn on_tick(&mut self) {
        let now = Instant::now();
        let quiet = self.options.quiet_period();
        for link in &mut self.watchers.links {
            if link.tick(now, quiet) {
                tracing::info!(watcher = %link.name, "no watcher error for {quiet:?}: the link is taken as restored");
            }
        }
        self.schedule_if_stale();
        if self
            .due
            .is_some_and(|due| due <= tokio::time::Instant::now())
        {
            self.due = None;
            if self.watchers.all_live() {
                self.evaluate(now);
            }
        }
    }

    /// An evaluation now, or at the end of the debounce window of the last
    /// evaluation when that is still open.
    fn schedule(&mut self) {
        if self.due.is_none() {
            let now = tokio::time::Instant::now();
            let window_end = self
                .last_evaluation
                .map_or(now, |at| at + self.options.debounce);
            self.due = Some(window_end.max(now));
        }
    }

    /// Every link is live but the last evaluation predates that.
    fn schedule_if_stale(&mut self) {
        if self.watchers.all_live() && !self.fresh {
            self.schedule();
        }
    }

    fn evaluate(&mut self, now: Instant) {
        // What changed is taken before the records are read: a change that
        // lands in between is judged again next time, never lost.
        let mut touched: BTreeSet<ServiceKey> = BTreeSet::new();
        let mut relisted = false;
        for (t, r) in self
            .watchers
            .services
            .iter()
            .map(Records::take_touched)
            .chain(self.watchers.slices.iter().map(Records::take_touched))
        {
            touched.extend(t);
            relisted |= r;
        }
        // A resync evaluates every Service afresh; what it corrects is what
        // the watch events alone would have left wrong. When they call for
        // a full evaluation anyway, a resync corrects nothing: every change
        // then is an ordinary one.
        let resync = std::mem::take(&mut self.resync_pending);
        let full =
            std::mem::take(&mut self.full_pending) || relisted || !self.evaluated || !self.fresh;
        // With a resync: the VIPs the watch events alone give.
        let mut watched: Option<Arc<crate::model::VipMap>> = None;
        let w = &self.watchers;
        let nodes = w.node.state();
        let node = nodes
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(self.options.node_name.as_str()))
            .map(|n| &**n);
        // A Node missing from the API server keeps the labels last seen:
        // its absence is not a relabelling (the [[node_override]]s chosen
        // by label stay as they are).
        if let Some(node) = node {
            let labels = node.metadata.labels.clone().unwrap_or_default();
            self.node_labels.send_if_modified(|cur| {
                let changed = cur.as_ref() != Some(&labels);
                if changed {
                    *cur = Some(labels);
                }
                changed
            });
        }
        let namespaces = w.namespaces.as_ref().map(Store::state);
        let slices: Vec<Arc<SliceRecord>> = w.slices.iter().flat_map(Records::state).collect();
        if !full {
            let services: Vec<(ServiceKey, Option<Arc<ServiceRecord>>)> = touched
                .into_iter()
                .map(|key| {
                    let record = w.services.iter().find_map(|r| r.get(&key));
                    (key, record)
                })
                .collect();
            let changes = Changes {
                services: &services,
                endpoint_slices: &slices,
                namespaces: namespaces.as_deref(),
            };
            if resync && !needs_full_evaluation(&self.last, &self.config, &changes) {
                watched = Some(if services.is_empty() {
                    Arc::clone(&self.last.vips)
                } else {
                    let mut alone = (*self.last).clone();
                    update(&mut alone, &self.config, &changes, now);
                    alone.vips
                });
            } else if !needs_full_evaluation(&self.last, &self.config, &changes) {
                // In place: the copy `latest` holds is let go first (its
                // readers wait for the new one), so the tables are copied
                // only while a snapshot still shares them.
                let (last, config) = (&mut self.last, &self.config);
                self.latest.send_modify(|latest| {
                    *latest = Arc::default();
                    let eval = Arc::make_mut(last);
                    for warning in update(eval, config, &changes, now) {
                        tracing::warn!("{warning}");
                    }
                    *latest = Arc::clone(last);
                });
                warn_mass(&self.last);
                self.after_evaluation();
                return;
            }
        }
        let services: Vec<Arc<ServiceRecord>> =
            w.services.iter().flat_map(Records::state).collect();
        let cluster = Cluster {
            node_name: &self.options.node_name,
            node,
            services: &services,
            endpoint_slices: &slices,
            namespaces: namespaces.as_deref(),
        };
        let mut next = evaluate(&self.last, &self.config, &cluster, now);
        // Unchanged tables stay the ones the snapshots share: comparing them
        // is then a pointer's work.
        if next.vips == self.last.vips {
            next.vips = Arc::clone(&self.last.vips);
        }
        if next.excluded == self.last.excluded {
            next.excluded = Arc::clone(&self.last.excluded);
        }
        self.node_facts.send_replace(node.map(|n| super::NodeFacts {
            drained: next.node_problem.clone(),
            ..super::node_facts(n)
        }));
        if let Some(watched) = watched {
            let n = crate::model::set_differences(&watched, &next.vips);
            if n > 0 {
                tracing::warn!(
                    differences = n,
                    "resync: the evaluation in force was behind the watched objects (a missed event): corrected"
                );
                self.resync_repairs += n as u64;
            }
        }
        for warning in next.warnings.difference(&self.last.warnings) {
            tracing::warn!("{warning}");
        }
        self.warn_refused(&next);
        self.warn_tenant_refused(&next);
        warn_mass(&next);
        if next.node_missing && !self.last.node_missing && !self.last.vips.is_empty() {
            tracing::warn!(
                "this node's Node object is missing from the API server: its VIPs are taken as absent (withdraw_hold_down, then the mass-withdrawal guard), not drained"
            );
        }
        if next.node_problem != self.last.node_problem {
            match &next.node_problem {
                Some(problem) => tracing::warn!("this node advertises nothing: {problem}"),
                None => tracing::info!("this node advertises its VIPs"),
            }
        }
        let next = Arc::new(next);
        self.latest.send_replace(Arc::clone(&next));
        self.last = next;
        self.after_evaluation();
    }

    fn after_evaluation(&mut self) {
        let bandwidth_due = self.last.bandwidth_due();
        self.evaluated = true;
        self.fresh = true;
        self.last_evaluation = Some(tokio::time::Instant::now());
        // A waiting link-bandwidth count is published by the evaluation at
        // its due time (steering::Settle).
        if let Some(at) = bandwidth_due {
            let at = tokio::time::Instant::from_std(at);
            self.due = Some(self.due.map_or(at, |d| d.min(at)));
        }
    }

    /// A Warning Event on each Service whose refused attribute annotations
    /// are new or changed since the last evaluation.
    fn warn_refused(&self, next: &Evaluation) {
        for (key, address, why) in new_refusals(&self.last.refused, next, &next.refused) {
            tracing::warn!(service = %key, "attribute annotations refused: {why}");
            if let Some(events) = &self.events {
                let uid = next.uid_of(key).map(str::to_string);
                events.refused(service_reference(key, uid), address, why);
            }
        }
    }

    /// A Warning Event on each Service of a tenant whose advertisements
    /// name peers the tenant may not reach, when new or changed since the
    /// last evaluation.
    fn warn_tenant_refused(&self, next: &Evaluation) {
        let refusals = new_refusals(&self.last.tenant_refused, next, &next.tenant_refused);
        for (key, address, why) in refusals {
            tracing::warn!(service = %key, "peers refused to a tenant's Service: {why}");
            if let Some(events) = &self.events {
                let uid = next.uid_of(key).map(str::to_string);
                events.tenant_refused(service_reference(key, uid), address, why);
            }
        }
    }

    fn publish(&self) {
        let healthy = self.fresh && self.watchers.all_live();
        let error = if healthy {
            None
        } else {
            self.watchers.problems()
        };
        let snapshot = if self.evaluated {
            SourceSnapshot {
                reconcile_repairs: self.resync_repairs,
                ..self.last.snapshot(healthy, true, error)
            }
        } else {
            SourceSnapshot {
                error,
                ..SourceSnapshot::default()
            }
        };
        self.snapshots.send_if_modified(|current| {
            if *current == snapshot {
                return false;
            }
            *current = snapshot;
            true
        });
    }
}

/// The Services of `now` (a refusal map of `next`) whose refusal is new
/// or changed against `before`, each with an address of it (the Event's
/// subject) and the refusal in words; a Service with no VIP is skipped.
fn new_refusals<'a>(
    before: &'a std::collections::BTreeMap<ServiceKey, Vec<String>>,
    next: &'a Evaluation,
    now: &'a std::collections::BTreeMap<ServiceKey, Vec<String>>,
) -> impl Iterator<Item = (&'a ServiceKey, std::net::IpAddr, String)> + 'a {
    now.iter()
        .filter(move |(key, why)| before.get(*key) != Some(*why))
        .filter_map(move |(key, why)| {
            let name = key.to_string();
            let address = next
                .vips
                .iter()
                .find(|(_, v)| v.route.service.as_deref() == Some(name.as_str()))
                .map(|(ip, _)| *ip)?;
            Some((key, address, why.join("; ")))
        })
}

#[cfg(test)]
mod tests {
    use kube_standin::fixtures::{SliceEndpoint, endpoint_slice};

    use super::*;
    use crate::source::kubernetes::EndpointState;

    fn slice(name: &str, nodes: &[&str]) -> EndpointSlice {
        let endpoints: Vec<SliceEndpoint> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| SliceEndpoint::ready(&format!("10.0.0.{}", i + 1), n))
            .collect();
        endpoint_slice("shop", name, &format!("{name}-1"), &endpoints)
    }

    #[test]
    fn the_slice_store_keeps_only_this_nodes_endpoints() {
        let records: Records<SliceRecord> = Records::default();
        let convert = |s: EndpointSlice| SliceRecord::of(s, "n1");
        assert_eq!(
            records.on(watcher::Event::Init, &convert),
            Some(Signal::Init)
        );
        for s in [
            slice("web", &["n2", "n1", "n3"]),
            slice("db", &["n2", "n3"]),
        ] {
            assert_eq!(records.on(watcher::Event::InitApply(s), &convert), None);
        }
        // Nothing counts before the list is complete.
        assert!(records.state().is_empty());
        assert_eq!(
            records.on(watcher::Event::InitDone, &convert),
            Some(Signal::InitDone)
        );
        let kept = records.state();
        // The slice of "db" has no endpoint on n1: it is not kept at all;
        // of "web", only n1's endpoint is.
        assert_eq!(kept.len(), 1);
        assert_eq!(kept[0].service.name, "web");
        assert_eq!(
            kept[0].local,
            [EndpointState {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false)
            }]
        );
        // Another node's endpoints changing wakes no evaluation.
        assert_eq!(
            records.on(watcher::Event::Apply(slice("db", &["n4"])), &convert),
            Some(Signal::Unchanged)
        );
        assert_eq!(
            records.on(watcher::Event::Apply(slice("web", &["n2", "n1"])), &convert),
            Some(Signal::Unchanged)
        );
        // This node's leaving the slice removes it.
        assert_eq!(
            records.on(watcher::Event::Apply(slice("web", &["n2"])), &convert),
            Some(Signal::Changed)
        );
        assert!(records.state().is_empty());
    }

    fn shop(name: &str) -> BTreeSet<ServiceKey> {
        BTreeSet::from([ServiceKey {
            namespace: "shop".into(),
            name: name.into(),
        }])
    }

    #[test]
    fn a_slice_change_names_its_service_to_judge_again() {
        let records: Records<SliceRecord> = Records::default();
        let convert = |s: EndpointSlice| SliceRecord::of(s, "n1");
        records.on(watcher::Event::Init, &convert);
        records.on(watcher::Event::InitApply(slice("web", &["n1"])), &convert);
        records.on(watcher::Event::InitDone, &convert);
        // A list replaces every record: everything is judged again.
        assert_eq!(records.take_touched(), (BTreeSet::new(), true));
        assert_eq!(records.take_touched(), (BTreeSet::new(), false));
        // Another node's endpoints: nothing to judge.
        records.on(watcher::Event::Apply(slice("db", &["n2"])), &convert);
        assert_eq!(records.take_touched(), (BTreeSet::new(), false));
        // The slice gains an endpoint here, loses it, is deleted: each
        // time its Service is named.
        records.on(watcher::Event::Apply(slice("db", &["n1"])), &convert);
        assert_eq!(records.take_touched(), (shop("db"), false));
        records.on(watcher::Event::Apply(slice("web", &["n2"])), &convert);
        assert_eq!(records.take_touched(), (shop("web"), false));
        records.on(watcher::Event::Delete(slice("db", &["n1"])), &convert);
        assert_eq!(records.take_touched(), (shop("db"), false));
    }
}

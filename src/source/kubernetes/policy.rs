//! The pure core of the Kubernetes source: from the objects the watchers
//! hold to the VIPs this node advertises, why the others are not, and why
//! the ones that went away went.
//!
//! [`evaluate`] reads no clock and does no IO; the watcher layer calls it
//! with the reflectors' contents after every (debounced) change, passing the
//! previous [`Evaluation`] so it can tell what went away and why.
//!
//! [`update`] is the same evaluation at the cost of what changed: each
//! Service's verdict on each of its addresses is kept in the
//! [`Evaluation`], so a change to a few Services (or their EndpointSlices)
//! judges only those again and settles only their addresses, and gives
//! exactly what [`evaluate`] would. The rules that look at every Service at
//! once (the Node, the Namespaces, the config; attribute annotations and
//! link-bandwidth counts, see [`needs_full_evaluation`]) go through
//! [`evaluate`].
//!
//! # Which addresses
//!
//! For each Service, sorted by namespace/name, and each kind of address
//! some `[[advertisement]]` lists:
//!
//! 1. `holdfast.dev/advertise: "false"` → not advertised (definitive).
//! 2. `spec.loadBalancerClass` set and not in `source.load_balancer_classes`,
//!    or unset while `source.require_class` → not advertised (definitive).
//! 3. LoadBalancerIP on a Service whose type is not LoadBalancer → not
//!    advertised (definitive): the ingress list is stale.
//! 4. Advertisements that list the kind, whose `vip_ranges` (if any)
//!    contain the address, and whose `service_selector` and
//!    `namespace_selector` match → the VIP is advertised under each of them;
//!    none → not advertised (definitive). Each advertisement that lists the
//!    kind but does not take the address says why: the first of these
//!    three that fails.
//! 5. Traffic policy `Local` (`externalTrafficPolicy` for LoadBalancer and
//!    external IPs, `internalTrafficPolicy` for cluster IPs) and no ready,
//!    non-terminating endpoint on this node → not advertised (no local
//!    endpoint).
//! 6. This node excluded, deselected, cordoned or tainted with a taint of
//!    `speaker.drain_taints` → not advertised (drained).
//!
//! # Why a VIP went away
//!
//! A VIP advertised in the previous evaluation and missing now gets an
//! [`Absence`]: `Drained` when the node no longer advertises anything;
//! otherwise each Service that gave it is judged on its own, and the VIP
//! gets the weakest of their verdicts (it goes for a reason only when every
//! giver went for that reason or a stronger one):
//!
//! - `Deleted`: the Service is gone or now fails a definitive rule (1–4:
//!   deleted, class or type changed, opted out, deselected);
//! - `NoLocalEndpoint`: it still selects the address kind, its traffic
//!   policy is `Local`, and this node has no ready endpoint of it (not
//!   ready, terminating, or its slice deleted): the node's datapath now
//!   drops the Service's traffic, so the route goes after
//!   `local_endpoint_delay`, not the hold-down;
//! - otherwise `Vanished`, reported as no reason at all: the address list
//!   emptied (the LB-IPAM flap) and the hold-down applies.
//!
//! # What a mass disappearance is
//!
//! An API server that answers with too few Services (an etcd restore, a
//! kubeconfig pointing at the wrong cluster) says it is healthy, and every
//! Service missing from its list looks deleted. So one evaluation in which
//! more VIPs would go `Deleted` *because a Service is missing* than the
//! mass-withdrawal guard lets go in one step (`floor(max_withdraw_fraction
//! × the VIPs advertised or held down before)`, at least one), or in which no Service at
//! all is listed any more and more than one VIP would go so, is a mass
//! disappearance: those VIPs go `Vanished` instead (the hold-down, then the
//! guard), and stay so while their Services stay missing. A Service deleted
//! on its own (or a few, within the allowance) is still `Deleted`. Services
//! deselected or opted out are deliberate and always `Deleted`.
//!
//! This node's Node object missing from the API server (deleted, or the
//! wrong cluster) is an absence too: its VIPs go `Vanished`, not `Drained`.
//! Only what the Node says (cordoned, tainted, excluded, deselected) is a
//! deliberate drain.
//!
//! Reasons are remembered while the stability layer may still hold the
//! route (hold-down + damping ceiling + the longer of `delete_delay` and
//! `local_endpoint_delay`, plus a minute), so a snapshot the daemon skips
//! loses nothing, and a VIP held down after a flap still goes at once when
//! the node is cordoned, after `local_endpoint_delay` when its last local
//! endpoint then goes, or after `delete_delay` when its Service is then
//! deleted. Reasons only ever escalate (Vanished → NoLocalEndpoint →
//! Deleted → Drained); the VIP coming back clears them.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node};

use super::endpoints::LocalEndpoints;
use super::node::node_problem;
use super::policy_attrs;
use super::records::{ServiceRecord, SliceRecord};
use super::service::{
    ADVERTISE_ANNOTATION, ServiceKey, addresses, field_of, kind_name, load_balancer_class,
    local_traffic_policy, opted_out, service_type,
};
use crate::config::{
    AddressKind, Config, DEFAULT_LOAD_BALANCER_CLASS, KubernetesSource, LabelSelector,
    format_duration, format_ranges,
};
use crate::model::Absence;
use crate::model::{Route, SourceSnapshot, Vip, VipMap};

pub use crate::config::NAMESPACE_NAME_LABEL;

/// How long past the longest timer a reason is remembered.
const REASON_MARGIN: Duration = Duration::from_secs(60);

/// What the watchers hold, borrowed for one evaluation.
#[derive(Debug, Clone, Copy)]
pub struct Cluster<'a> {
    /// This node's name (`NODE_NAME`).
    pub node_name: &'a str,
    /// This node's object; `None` when the API server has no such node.
    pub node: Option<&'a Node>,
    /// Every Service watched (all namespaces, or `source.namespaces`).
    pub services: &'a [Arc<ServiceRecord>],
    /// The EndpointSlices watched (same namespaces) that have an endpoint
    /// on this node, with only those endpoints.
    pub endpoint_slices: &'a [Arc<SliceRecord>],
    /// The Namespaces, when watched (only when a `namespace_selector` needs
    /// labels other than `kubernetes.io/metadata.name`; see
    /// [`needs_namespace_labels`]). `None`, or a namespace missing here,
    /// means the namespace has just that one label.
    pub namespaces: Option<&'a [Arc<Namespace>]>,
}

/// One Service giving one VIP, through one kind of address.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Giver {
    /// The Service.
    pub service: ServiceKey,
    /// The field the address came from.
    pub kind: AddressKind,
}

/// A VIP that went away, remembered while the stability layer may still
/// hold its route.
#[derive(Debug, Clone, PartialEq)]
struct Gone {
    reason: Absence,
    /// When the current reason was first given (for forgetting it).
    since: Instant,
    givers: Givers,
    /// It went in a mass disappearance: a Service of it missing from the
    /// API server's list counts as `Vanished`, not `Deleted`, for as long
    /// as it is remembered.
    mass: bool,
}

/// The Givers of one VIP: a set, kept as a sorted Vec without duplicates.
/// Most VIPs have one giver, and a B-tree set would hold a node with room
/// for eleven for it, in every evaluation of every VIP.
type Givers = Vec<Giver>;

/// What `explain` quotes back about the rules that applied: this node's
/// name and the timers of `[stability]` in force at the evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
struct Words {
    node_name: String,
    withdraw_hold_down: Duration,
    delete_delay: Duration,
    local_endpoint_delay: Duration,
}

/// The result of one evaluation: what the source reports, and what the next
/// evaluation needs to know.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    /// The VIPs this node advertises, with their advertisements. Shared
    /// with the snapshots sent (an update copies it only when a snapshot
    /// still holds it).
    pub vips: Arc<VipMap>,
    /// VIPs that went away for a definitive reason (`Deleted`, `Drained`).
    /// A VIP that merely vanished is not listed: the hold-down applies.
    pub absences: BTreeMap<IpAddr, Absence>,
    /// Why addresses seen on Services are not advertised by this node, for
    /// `holdfast explain`. Only addresses not in `vips`. Shared like `vips`.
    pub excluded: Arc<BTreeMap<IpAddr, Vec<String>>>,
    /// Why this node advertises nothing, when it does not.
    pub node_problem: Option<String>,
    /// This node's Node object is missing from the API server: its VIPs
    /// went as an absence (`Vanished`), not drained.
    pub node_missing: bool,
    /// This evaluation found a mass disappearance (module doc): how many
    /// VIPs it took as an absence instead of as deleted, and how many were
    /// advertised before it.
    pub mass_absence: Option<(usize, usize)>,
    /// Things in the Services that could not be used (hostname-only
    /// ingress entries, malformed addresses), one line each.
    pub warnings: BTreeSet<String>,
    /// Attribute annotations refused, per Service (a Warning Event each;
    /// policy_attrs).
    pub refused: BTreeMap<ServiceKey, Vec<String>>,
    /// Services of a `[[tenant]]` whose advertisements name peers the
    /// tenant may not reach (a Warning Event each; `apply_tenants`).
    pub tenant_refused: BTreeMap<ServiceKey, Vec<String>>,
    /// The Node's PodCIDRs, when an advertisement lists "PodCIDR".
    pub prefixes: BTreeMap<ipnet::IpNet, Vip>,
    /// PodCIDRs that go at once: this node advertises nothing.
    pub prefix_absences: BTreeMap<ipnet::IpNet, Absence>,
    /// `explain` lines about a VIP's attributes (honoured or refused).
    attribute_notes: BTreeMap<IpAddr, Vec<String>>,
    givers: BTreeMap<IpAddr, Givers>,
    gone: BTreeMap<IpAddr, Gone>,
    /// `metadata.uid` of the Services in `givers`.
    uids: BTreeMap<ServiceKey, String>,
    /// `metadata.uid` of the Services in `gone` not in `givers`, as last
    /// seen.
    gone_uids: BTreeMap<ServiceKey, String>,
    words: Words,
    /// What [`update`] works from: the Services judged, by key.
    records: BTreeSet<ByKey>,
    /// Per address seen on a Service, each Service's verdict on it, sorted
    /// by Service then kind (the order of the full evaluation).
    offers: BTreeMap<IpAddr, Vec<Offer>>,
    /// The Services' warnings (counted where a Service gives the same line
    /// twice); `warnings` holds these and `node_warnings`.
    warning_counts: BTreeMap<String, u32>,
    node_warnings: BTreeSet<String>,
    /// How many Services carry attribute annotations.
    annotated: usize,
    /// The advertisement sets the offers share.
    interner: SharedSets,
    /// The endpoint counts the link-bandwidth community carries, and the
    /// changes waiting to be published (steering::Settle).
    bandwidth: crate::model::link_bandwidth::Settle,
}

impl Evaluation {
    /// The VIPs whose routes may be on the wire: those advertised, and
    /// those gone for a reason the stability layer holds them through (the
    /// base a mass disappearance is measured against).
    fn on_wire(&self) -> usize {
        let held = self
            .gone
            .values()
            .filter(|g| g.reason < Absence::Deleted)
            .count();
        self.vips.len() + held
    }

    /// When a waiting endpoint count is due: the watcher layer evaluates
    /// again then, though nothing else changed.
    pub fn bandwidth_due(&self) -> Option<Instant> {
        self.bandwidth.next_due()
    }

    /// The uid of a Service that gives or gave a VIP, as last seen.
    pub fn uid_of(&self, service: &ServiceKey) -> Option<&str> {
        self.uids
            .get(service)
            .or_else(|| self.gone_uids.get(service))
            .map(String::as_str)
    }

    /// The snapshot the source sends for this evaluation.
    pub fn snapshot(&self, healthy: bool, synced: bool, error: Option<String>) -> SourceSnapshot {
        SourceSnapshot {
            vips: Arc::clone(&self.vips),
            absences: self.absences.clone(),
            healthy,
            synced,
            error,
            excluded: Arc::clone(&self.excluded),
            prefixes: self.prefixes.clone(),
            prefix_absences: self.prefix_absences.clone(),
            interfaces: Default::default(),
            // The watcher adds the repairs its resyncs counted.
            reconcile_repairs: 0,
            unhealthy: Default::default(),
            sources: Default::default(),
        }
    }

    /// The Services that give `address` now or gave it last (for Events
    /// about it), sorted.
    pub fn services_of(&self, address: IpAddr) -> Vec<ServiceKey> {
        let givers = self
            .givers
            .get(&address)
            .or_else(|| self.gone.get(&address).map(|g| &g.givers));
        let mut services: Vec<ServiceKey> = givers
            .into_iter()
            .flatten()
            .map(|g| g.service.clone())
            .collect();
        services.dedup();
        services
    }

    /// Why this node does or does not advertise `address`, as far as the
    /// Kubernetes source knows (the stability layer adds hold-downs).
    pub fn explain(&self, address: IpAddr) -> Vec<String> {
        let mut lines = Vec::new();
        if let Some(vip) = self.vips.get(&address) {
            let advertisements: Vec<String> = vip
                .route
                .advertisements
                .iter()
                .map(|a| format!("\"{a}\""))
                .collect();
            for giver in self.givers.get(&address).into_iter().flatten() {
                lines.push(format!(
                    "wanted: {} of {} ({}), under advertisement {}",
                    kind_name(giver.kind),
                    giver.service,
                    field_of(giver.kind),
                    advertisements.join(", ")
                ));
            }
        }
        if let Some(gone) = self.gone.get(&address) {
            let services: Vec<String> = gone.givers.iter().map(|g| g.service.to_string()).collect();
            let w = &self.words;
            let why = match gone.reason {
                Absence::Vanished if self.node_missing => format!(
                    "node \"{}\" is missing from the API server, which is taken as an absence, not a drain: the hold-down applies (stability.withdraw_hold_down {}), then the mass-withdrawal guard",
                    w.node_name,
                    format_duration(w.withdraw_hold_down)
                ),
                Absence::Vanished if gone.mass => format!(
                    "its Service went missing from the API server together with too many others (a mass disappearance), which is taken as an absence, not a deletion: the hold-down applies (stability.withdraw_hold_down {}), then the mass-withdrawal guard",
                    format_duration(w.withdraw_hold_down)
                ),
                Absence::Vanished => format!(
                    "address list emptied: the hold-down applies (stability.withdraw_hold_down {})",
                    format_duration(w.withdraw_hold_down)
                ),
                Absence::NoLocalEndpoint => format!(
                    "no ready local endpoint on node \"{}\": withdrawn after stability.local_endpoint_delay {}",
                    w.node_name,
                    format_duration(w.local_endpoint_delay)
                ),
                Absence::Deleted => format!(
                    "deleted, opted out, or no longer selected: withdrawn after stability.delete_delay {}",
                    format_duration(w.delete_delay)
                ),
                Absence::Drained => "this node stopped advertising: withdrawn at once".into(),
                Absence::ProbeFailed => "probe failed: withdrawn at once".into(),
            };
            lines.push(format!("gone from {}: {why}", services.join(", ")));
        }
        lines.extend(
            self.attribute_notes
                .get(&address)
                .into_iter()
                .flatten()
                .cloned(),
        );
        if let Some(reasons) = self.excluded.get(&address) {
            lines.extend(reasons.iter().map(|r| format!("not advertised: {r}")));
        }
        if lines.is_empty() {
            lines.push(format!(
                "no watched Service has the address {address} (in status.loadBalancer.ingress, spec.externalIPs, or spec.clusterIPs when an advertisement lists ClusterIP)"
            ));
        }
        lines
    }
}

/// True when some `namespace_selector` looks at namespace labels other than
/// `kubernetes.io/metadata.name`: only then must the source watch
/// Namespaces (and have RBAC to list and watch them).
pub fn needs_namespace_labels(config: &Config) -> bool {
    config
        .advertisements
        .iter()
        .any(|a| a.reads_namespace_labels())
        || config.tenants.iter().any(|t| t.reads_namespace_labels())
}

/// The `[source]` settings that apply; the defaults when the config's
/// source is not Kubernetes (the daemon does not run this source then).
pub(crate) fn source_settings(config: &Config) -> Cow<'_, KubernetesSource> {
    match config.kubernetes_source() {
        Some(k) => Cow::Borrowed(k),
        None => Cow::Owned(KubernetesSource {
            namespaces: Vec::new(),
            load_balancer_classes: vec![DEFAULT_LOAD_BALANCER_CLASS.to_string()],
            require_class: false,
        }),
    }
}

/// How long a reason for a VIP's absence is remembered.
fn reason_retention(config: &Config) -> Duration {
    let s = &config.stability;
    let damping = s.damping.map_or(Duration::ZERO, |d| d.max_suppress);
    s.withdraw_hold_down
        .saturating_add(damping)
        .saturating_add(s.delete_delay.max(s.local_endpoint_delay))
        .saturating_add(REASON_MARGIN)
}

/// Namespace labels, looked up once per namespace.
struct NamespaceLabels<'a> {
    watched: Option<HashMap<&'a str, &'a BTreeMap<String, String>>>,
    cache: HashMap<String, BTreeMap<String, String>>,
}

impl<'a> NamespaceLabels<'a> {
    fn new(namespaces: Option<&'a [Arc<Namespace>]>) -> Self {
        let watched = namespaces.map(|list| {
            list.iter()
                .filter_map(|ns| Some((ns.metadata.name.as_deref()?, ns.metadata.labels.as_ref()?)))
                .collect()
        });
        NamespaceLabels {
            watched,
            cache: HashMap::new(),
        }
    }

    fn labels(&mut self, namespace: &str) -> &BTreeMap<String, String> {
        if !self.cache.contains_key(namespace) {
            let mut labels = self
                .watched
                .as_ref()
                .and_then(|w| w.get(namespace))
                .map(|l| (*l).clone())
                .unwrap_or_default();
            labels
                .entry(NAMESPACE_NAME_LABEL.to_string())
                .or_insert_with(|| namespace.to_string());
            self.cache.insert(namespace.to_string(), labels);
        }
        &self.cache[namespace]
    }
}

/// The definitive rules (1–4 in the module doc): the advertisements that
/// take the address `ip` of `kind` from this Service, or why none does.
fn selected_by(
    config: &Config,
    source: &KubernetesSource,
    service: &ServiceRecord,
    key: &ServiceKey,
    kind: AddressKind,
    ip: IpAddr,
    namespace_labels: &BTreeMap<String, String>,
) -> Result<BTreeSet<String>, Vec<String>> {
    if opted_out(service) {
        return Err(vec![format!(
            "{key}: the annotation {ADVERTISE_ANNOTATION} is \"false\""
        )]);
    }
    match load_balancer_class(service) {
        Some(class) if !source.load_balancer_classes.iter().any(|c| c == class) => {
            let listed: Vec<String> = source
                .load_balancer_classes
                .iter()
                .map(|c| format!("\"{c}\""))
                .collect();
            return Err(vec![format!(
                "{key}: spec.loadBalancerClass \"{class}\" is not one of source.load_balancer_classes [{}]",
                listed.join(", ")
            )]);
        }
        None if source.require_class => {
            return Err(vec![format!(
                "{key}: has no spec.loadBalancerClass and source.require_class is true"
            )]);
        }
        _ => {}
    }
    if kind == AddressKind::LoadBalancerIp && service_type(service) != "LoadBalancer" {
        return Err(vec![format!(
            "{key}: is type {}, not LoadBalancer, so its status.loadBalancer.ingress is not advertised",
            service_type(service)
        )]);
    }
    let mut selected = BTreeSet::new();
    let mut misses = Vec::new();
    let service_labels = &service.labels;
    for adv in config
        .advertisements
        .iter()
        .filter(|a| a.addresses.contains(&kind))
    {
        let miss = |selector: &Option<LabelSelector>, labels: &BTreeMap<String, String>| {
            selector.as_ref().and_then(|s| s.first_mismatch(labels))
        };
        if !adv.allows_address(ip) {
            misses.push(format!(
                "{key}: advertisement \"{}\": {ip} is not in its vip_ranges {}",
                adv.name,
                format_ranges(adv.vip_ranges.as_deref().unwrap_or_default())
            ));
        } else if let Some(m) = miss(&adv.service_selector, service_labels) {
            misses.push(format!(
                "{key}: advertisement \"{}\": service_selector does not match: {m}",
                adv.name
            ));
        } else if let Some(m) = miss(&adv.namespace_selector, namespace_labels) {
            misses.push(format!(
                "{key}: advertisement \"{}\": namespace_selector does not match namespace \"{}\": {m}",
                adv.name, key.namespace
            ));
        } else {
            selected.insert(adv.name.clone());
        }
    }
    if !selected.is_empty() {
        return Ok(selected);
    }
    if misses.is_empty() {
        misses.push(format!(
            "{key}: no [[advertisement]] lists \"{}\" in its addresses",
            kind_name(kind)
        ));
    }
    Err(misses)
}

/// Each VIP's Service attributes (policy_attrs): those of the Service the
/// VIP is named after (the first by namespace/name that gives it), kept
/// where one of the VIP's advertisements allows them.
fn apply_service_attributes(
    config: &Config,
    services: &[&Arc<ServiceRecord>],
    next: &mut Evaluation,
) {
    // Most clusters annotate no Service: then there is nothing to do, and
    // nothing is allocated per Service.
    if next.annotated == 0 {
        return;
    }
    let by_key: HashMap<String, &ServiceRecord> = services
        .iter()
        .map(|s| (s.key.to_string(), &***s))
        .collect();
    // One shared value per (Service, advertisements): its VIPs share it.
    type Key = (String, Arc<BTreeSet<String>>);
    let mut shared: HashMap<Key, Option<Arc<crate::model::ServiceAttributes>>> = HashMap::new();
    for (ip, vip) in Arc::make_mut(&mut next.vips).iter_mut() {
        let Some(name) = vip.route.service.clone() else {
            continue;
        };
        let Some(service) = by_key.get(&*name) else {
            continue;
        };
        let requested = policy_attrs::requested(service);
        if requested.present.is_empty() && requested.problems.is_empty() {
            continue;
        }
        let ads = config
            .advertisements
            .iter()
            .filter(|a| vip.route.advertisements.contains(&a.name));
        let verdict = policy_attrs::judge(&requested, ads);
        let notes = next.attribute_notes.entry(*ip).or_default();
        if let Some(a) = &verdict.attributes {
            notes.push(format!(
                "attributes from the annotations of {name}: {}",
                crate::model::attributes::describe(a)
            ));
        }
        for why in &verdict.refused {
            notes.push(format!(
                "refused: {why}; the route keeps the advertisement's attributes"
            ));
        }
        if !verdict.refused.is_empty()
            && let Some(key) = ServiceKey::parse(&name)
        {
            let list = next.refused.entry(key).or_default();
            for why in verdict.refused {
                if !list.contains(&why) {
                    list.push(why);
                }
            }
        }
        let ads = vip.route.advertisements.clone();
        vip.route.make_mut().attributes = shared
            .entry((name.to_string(), ads))
            .or_insert_with(|| verdict.attributes.map(Arc::new))
            .clone();
    }
}

/// The tenant of each VIP's Service (`[[tenant]] namespaces`): an
/// advertisement of the VIP that names peers the tenant may not reach is
/// refused for those peers — the speaker sends the route to the tenant's
/// peers only (`speaker::export`) — with a Warning Event on the Service
/// and a line for `explain`. An advertisement for all peers (no `peers`)
/// asks for none in particular: the tenant's peers get it, silently.
fn apply_tenants(config: &Config, namespaces: &mut NamespaceLabels, next: &mut Evaluation) {
    if config.tenants.is_empty() {
        return;
    }
    // Each tenant's VIP carries its tenant's name: the speaker's tenant
    // gate reads it there (a tenant chosen by namespace labels cannot be
    // found from the namespace's name alone).
    let vips = Arc::make_mut(&mut next.vips);
    for (ip, vip) in vips.iter_mut() {
        let Some(name) = vip.route.service.as_deref() else {
            continue;
        };
        let Some((namespace, _)) = name.split_once('/') else {
            continue;
        };
        let labels = namespaces.labels(namespace);
        let Some(tenant) = config.tenant_of_labelled_namespace(namespace, labels) else {
            continue;
        };
        let name = name.to_string();
        let namespace = namespace.to_string();
        if vip.route.tenant.as_deref() != Some(tenant.name.as_str()) {
            vip.route.make_mut().tenant = Some(Arc::from(tenant.name.as_str()));
        }
        let notes = next.attribute_notes.entry(*ip).or_default();
        notes.push(format!(
            "tenant \"{}\" (namespace {namespace}): sent only to its peers {}",
            tenant.name,
            tenant.peers.join(", ")
        ));
        let mut refused = Vec::new();
        for ad in config
            .advertisements
            .iter()
            .filter(|a| vip.route.advertisements.contains(&a.name))
        {
            let outside: Vec<&str> = ad
                .peers
                .iter()
                .flatten()
                .filter(|p| !tenant.reaches(p))
                .map(String::as_str)
                .collect();
            if !outside.is_empty() {
                refused.push(format!(
                    "advertisement \"{}\" names peer{} {} that tenant \"{}\" may not reach",
                    ad.name,
                    if outside.len() == 1 { "" } else { "s" },
                    outside.join(", "),
                    tenant.name
                ));
            }
        }
        for why in &refused {
            notes.push(format!("refused: {why}; not sent there"));
        }
        if !refused.is_empty()
            && let Some(key) = ServiceKey::parse(&name)
        {
            let list = next.tenant_refused.entry(key).or_default();
            for why in refused {
                if !list.contains(&why) {
                    list.push(why);
                }
            }
        }
    }
}

/// The endpoint count of each VIP under an advertisement with
/// `link_bandwidth` (src/model/link_bandwidth.rs): the ready local endpoints of the
/// Services with traffic policy Local that give it, added up; one for a
/// VIP only Services with policy Cluster give (each node serves all of
/// it). Counts pass the limiter before they reach the route's attributes.
fn apply_link_bandwidth(
    prev: &Evaluation,
    config: &Config,
    services: &[&Arc<ServiceRecord>],
    local: &LocalEndpoints,
    now: Instant,
    next: &mut Evaluation,
) {
    let weighted: BTreeSet<&str> = config
        .advertisements
        .iter()
        .filter(|a| a.link_bandwidth.is_some())
        .map(|a| a.name.as_str())
        .collect();
    if weighted.is_empty() {
        return;
    }
    let by_key: HashMap<&ServiceKey, &ServiceRecord> =
        services.iter().map(|s| (&s.key, &***s)).collect();
    let mut counts = BTreeMap::new();
    for (ip, vip) in next.vips.iter() {
        if !vip
            .route
            .advertisements
            .iter()
            .any(|a| weighted.contains(a.as_str()))
        {
            continue;
        }
        let count = if vip.route.local_traffic {
            let local_givers: BTreeSet<&ServiceKey> = next
                .givers
                .get(ip)
                .into_iter()
                .flatten()
                .filter(|g| {
                    by_key
                        .get(&g.service)
                        .is_some_and(|s| local_traffic_policy(s, g.kind))
                })
                .map(|g| &g.service)
                .collect();
            local_givers
                .into_iter()
                .map(|s| local.count(s))
                .fold(0u32, u32::saturating_add)
        } else {
            1
        };
        counts.insert(*ip, count);
    }
    next.bandwidth = prev.bandwidth.step(&counts, now);
    for (ip, vip) in Arc::make_mut(&mut next.vips).iter_mut() {
        let Some(published) = next.bandwidth.published(*ip) else {
            continue;
        };
        let mut a = vip.route.attributes.as_deref().cloned().unwrap_or_default();
        a.endpoints = Some(published);
        vip.route.make_mut().attributes = Some(Arc::new(a));
        let note = match next.bandwidth.pending(*ip) {
            Some(waiting) => format!(
                "link bandwidth: {published} endpoint unit(s) announced, {waiting} waiting to settle (a burst is one UPDATE)"
            ),
            None => format!("link bandwidth: {published} endpoint unit(s) announced"),
        };
        next.attribute_notes.entry(*ip).or_default().push(note);
    }
}

/// The Node's `spec.podCIDRs` under the advertisements that list "PodCIDR"
/// and whose `vip_ranges`, if any, hold the whole prefix (a PodCIDR that
/// none takes is skipped with a warning). A node that advertises nothing
/// (drained, excluded) withdraws them at once, as it does its VIPs; a
/// PodCIDR that merely disappears from the Node is held down like a
/// vanished VIP.
fn pod_cidrs(config: &Config, node: Option<&Node>, node_problem: bool, next: &mut Evaluation) {
    let listing: Vec<&crate::config::Advertisement> = config
        .advertisements
        .iter()
        .filter(|a| a.pod_cidr)
        .collect();
    if listing.is_empty() {
        return;
    }
    let cidrs = node
        .and_then(|n| n.spec.as_ref())
        .map(|spec| match (&spec.pod_cidrs, &spec.pod_cidr) {
            (Some(list), _) if !list.is_empty() => list.clone(),
            (_, Some(one)) => vec![one.clone()],
            _ => Vec::new(),
        })
        .unwrap_or_default();
    let mut sets = SharedSets::default();
    for text in cidrs {
        let Ok(prefix) = text.parse::<ipnet::IpNet>() else {
            next.node_warnings.insert(format!(
                "node spec.podCIDRs has \"{text}\", not a prefix; skipped"
            ));
            continue;
        };
        let prefix = prefix.trunc();
        let names: BTreeSet<String> = listing
            .iter()
            .filter(|a| a.allows_prefix(&prefix))
            .map(|a| a.name.clone())
            .collect();
        if names.is_empty() {
            let ranges: Vec<String> = listing
                .iter()
                .map(|a| {
                    format!(
                        "\"{}\" {}",
                        a.name,
                        format_ranges(a.vip_ranges.as_deref().unwrap_or_default())
                    )
                })
                .collect();
            next.node_warnings.insert(format!(
                "node spec.podCIDRs has {prefix}, which is not wholly inside the vip_ranges of any advertisement that lists \"PodCIDR\" ({}); not advertised",
                ranges.join(", ")
            ));
            continue;
        }
        if node_problem {
            next.prefix_absences.insert(prefix, Absence::Drained);
            continue;
        }
        next.prefixes
            .insert(prefix, Vip::new(sets.intern(Arc::new(names))));
    }
}

/// A Service record ordered and looked up by its key.
#[derive(Debug, Clone)]
struct ByKey(Arc<ServiceRecord>);

impl PartialEq for ByKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.key == other.0.key
    }
}

impl Eq for ByKey {}

impl PartialOrd for ByKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.key.cmp(&other.0.key)
    }
}

impl std::borrow::Borrow<ServiceKey> for ByKey {
    fn borrow(&self) -> &ServiceKey {
        &self.0.key
    }
}

/// One Service's verdict on one address it carries, through one kind of
/// address: the advertisements it is advertised under, or why not.
#[derive(Debug, Clone, PartialEq)]
struct Offer {
    record: Arc<ServiceRecord>,
    kind: AddressKind,
    verdict: Result<crate::model::Advertisements, Vec<String>>,
}

/// The advertisement sets in use, one shared value per distinct set
/// (model::Advertisements). A cache: two evaluations are equal whatever it
/// holds.
#[derive(Debug, Clone, Default)]
struct SharedSets(Vec<crate::model::Advertisements>);

impl PartialEq for SharedSets {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl SharedSets {
    fn intern(&mut self, set: crate::model::Advertisements) -> crate::model::Advertisements {
        if let Some(known) = self.0.iter().find(|s| Arc::ptr_eq(s, &set) || **s == set) {
            return Arc::clone(known);
        }
        self.0.push(Arc::clone(&set));
        set
    }
}

/// What judging one Service needs: the rules of the module doc that do not
/// depend on other Services.
struct Judge<'a> {
    config: &'a Config,
    source: Cow<'a, KubernetesSource>,
    /// The kinds some advertisement lists.
    kinds: BTreeSet<AddressKind>,
    /// The kinds looked at.
    seen_kinds: Vec<AddressKind>,
    /// Some advertisement has `vip_ranges`: a Service's addresses of one
    /// kind are judged one by one (else one verdict serves them all).
    ranged: bool,
    node_name: &'a str,
    node_problem: Option<String>,
    /// The Node object is missing: what went goes as an absence.
    node_missing: bool,
}

/// One Service judged alone.
struct Judged {
    /// Its verdict on each of its addresses, by kind then address order.
    offers: Vec<(IpAddr, Offer)>,
    warnings: Vec<String>,
}

impl<'a> Judge<'a> {
    fn new(
        config: &'a Config,
        node_name: &'a str,
        node_problem: Option<String>,
        node_missing: bool,
    ) -> Judge<'a> {
        let kinds: BTreeSet<AddressKind> = config
            .advertisements
            .iter()
            .flat_map(|a| a.addresses.iter().copied())
            .collect();
        // LoadBalancer and external IPs are always looked at, so `explain`
        // can say why one is not advertised; cluster IPs only when some
        // advertisement asks for them (otherwise every Service would be
        // listed).
        let seen_kinds: Vec<AddressKind> = [
            AddressKind::LoadBalancerIp,
            AddressKind::ExternalIp,
            AddressKind::ClusterIp,
        ]
        .into_iter()
        .filter(|k| *k != AddressKind::ClusterIp || kinds.contains(k))
        .collect();
        Judge {
            config,
            source: source_settings(config),
            kinds,
            seen_kinds,
            ranged: config.advertisements.iter().any(|a| a.vip_ranges.is_some()),
            node_name,
            node_problem,
            node_missing,
        }
    }

    fn judge(
        &self,
        service: &Arc<ServiceRecord>,
        namespaces: &mut NamespaceLabels<'_>,
        local: &LocalEndpoints,
        sets: &mut SharedSets,
    ) -> Judged {
        let key = &service.key;
        let mut judged = Judged {
            offers: Vec::new(),
            warnings: Vec::new(),
        };
        for &kind in &self.seen_kinds {
            let found = addresses(service, kind);
            if self.kinds.contains(&kind) {
                judged.warnings.extend(found.warnings);
            }
            if found.ips.is_empty() {
                continue;
            }
            let labels = namespaces.labels(&key.namespace);
            let mut shared = None;
            for ip in found.ips {
                let verdict = if self.ranged {
                    self.verdict(service, kind, ip, labels, local, sets)
                } else {
                    shared
                        .get_or_insert_with(|| self.verdict(service, kind, ip, labels, local, sets))
                        .clone()
                };
                judged.offers.push((
                    ip,
                    Offer {
                        record: Arc::clone(service),
                        kind,
                        verdict,
                    },
                ));
            }
        }
        judged
    }

    /// The verdict on one address of `kind` of a Service: rules 4 to 6 of
    /// the module doc.
    fn verdict(
        &self,
        service: &Arc<ServiceRecord>,
        kind: AddressKind,
        ip: IpAddr,
        labels: &BTreeMap<String, String>,
        local: &LocalEndpoints,
        sets: &mut SharedSets,
    ) -> Result<crate::model::Advertisements, Vec<String>> {
        let key = &service.key;
        selected_by(self.config, &self.source, service, key, kind, ip, labels).and_then(|advs| {
            if local_traffic_policy(service, kind) && !local.has(key) {
                let policy = match kind {
                    AddressKind::ClusterIp => "internalTrafficPolicy",
                    _ => "externalTrafficPolicy",
                };
                return Err(vec![format!(
                    "{key}: {policy} is Local and node \"{}\" has no ready, non-terminating endpoint of it",
                    self.node_name
                )]);
            }
            match &self.node_problem {
                Some(problem) => Err(vec![problem.clone()]),
                None => Ok(sets.intern(Arc::new(advs))),
            }
        })
    }

    /// Why a VIP whose givers no longer give it went: the weakest verdict
    /// of its givers (`lookup` finds a Service now). `missing`: what a
    /// Service missing from the list counts as (`Deleted`, or `Vanished`
    /// in a mass disappearance).
    fn fate<'r>(
        &self,
        ip: IpAddr,
        givers: &Givers,
        lookup: impl Fn(&ServiceKey) -> Option<&'r ServiceRecord>,
        namespaces: &mut NamespaceLabels<'_>,
        local: &LocalEndpoints,
        missing: Absence,
    ) -> Absence {
        if self.node_missing {
            return Absence::Vanished;
        }
        if self.node_problem.is_some() {
            return Absence::Drained;
        }
        let unwatched = |namespace: &str| {
            !self.source.namespaces.is_empty()
                && !self.source.namespaces.iter().any(|n| n == namespace)
        };
        let mut verdict = |g: &Giver| match lookup(&g.service) {
            // No longer watched (`source.namespaces` changed): deliberate.
            None if unwatched(&g.service.namespace) => Absence::Deleted,
            None => missing,
            Some(service) => {
                let labels = namespaces.labels(&g.service.namespace);
                if selected_by(
                    self.config,
                    &self.source,
                    service,
                    &g.service,
                    g.kind,
                    ip,
                    labels,
                )
                .is_err()
                {
                    Absence::Deleted
                } else if local_traffic_policy(service, g.kind) && !local.has(&g.service) {
                    Absence::NoLocalEndpoint
                } else {
                    Absence::Vanished
                }
            }
        };
        // The weakest verdict: a Service whose list merely emptied may be
        // back in a second, and then the route must still be there.
        givers
            .iter()
            .map(&mut verdict)
            .min()
            .unwrap_or(Absence::Vanished)
    }
}

/// Evaluates the cluster for this node. `prev` is the previous evaluation
/// (`Evaluation::default()` at first); `now` only dates the reasons for
/// absences, so they can be forgotten once no timer can need them.
pub fn evaluate(
    prev: &Evaluation,
    config: &Config,
    cluster: &Cluster<'_>,
    now: Instant,
) -> Evaluation {
    let node_problem = node_problem(&config.speaker, cluster.node_name, cluster.node);
    let node_missing = cluster.node.is_none();
    let judge = Judge::new(
        config,
        cluster.node_name,
        node_problem.clone(),
        node_missing,
    );
    let local = LocalEndpoints::index(cluster.endpoint_slices);
    let mut namespaces = NamespaceLabels::new(cluster.namespaces);

    let mut services: Vec<&Arc<ServiceRecord>> = cluster.services.iter().collect();
    services.sort_by(|a, b| a.key.cmp(&b.key));

    let mut next = Evaluation {
        node_problem: node_problem.clone(),
        node_missing,
        words: Words {
            node_name: cluster.node_name.to_string(),
            withdraw_hold_down: config.stability.withdraw_hold_down,
            delete_delay: config.stability.delete_delay,
            local_endpoint_delay: config.stability.local_endpoint_delay,
        },
        ..Evaluation::default()
    };
    let mut sets = SharedSets::default();
    let mut vips: BTreeMap<IpAddr, Vip> = BTreeMap::new();
    let mut reasons: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    for service in &services {
        let key = &service.key;
        let judged = judge.judge(service, &mut namespaces, &local, &mut sets);
        for warning in judged.warnings {
            *next.warning_counts.entry(warning.clone()).or_default() += 1;
            next.warnings.insert(warning);
        }
        if policy_attrs::annotated(service) {
            next.annotated += 1;
        }
        for (ip, offer) in judged.offers {
            match &offer.verdict {
                Ok(advertisements) => {
                    let vip = vips.entry(ip).or_insert_with(|| {
                        Vip::of(Route::new(
                            Default::default(),
                            // Services come sorted: the first is the smallest.
                            Some(key.to_string().into()),
                            None,
                        ))
                    });
                    // One Service with traffic policy Local keeps the VIP
                    // out of aggregates: the nodes without its endpoints do
                    // not announce it.
                    let facts = vip.route.make_mut();
                    facts.local_traffic |= local_traffic_policy(service, offer.kind);
                    Arc::make_mut(&mut facts.advertisements).extend(advertisements.iter().cloned());
                    let givers = next.givers.entry(ip).or_default();
                    let giver = Giver {
                        service: key.clone(),
                        kind: offer.kind,
                    };
                    if let Err(at) = givers.binary_search(&giver) {
                        givers.insert(at, giver);
                    }
                    if let Some(uid) = &service.uid {
                        next.uids.insert(key.clone(), uid.clone());
                    }
                }
                Err(why) => {
                    let list = reasons.entry(ip).or_default();
                    for line in why {
                        if !list.contains(line) {
                            list.push(line.clone());
                        }
                    }
                }
            }
            next.offers.entry(ip).or_default().push(offer);
        }
        next.records.insert(ByKey(Arc::clone(service)));
    }
    reasons.retain(|ip, _| !vips.contains_key(ip));
    next.excluded = Arc::new(reasons);
    next.vips = Arc::new(vips.into_iter().collect());
    apply_service_attributes(config, &services, &mut next);
    apply_tenants(config, &mut namespaces, &mut next);
    apply_link_bandwidth(prev, config, &services, &local, now, &mut next);
    pod_cidrs(config, cluster.node, node_problem.is_some(), &mut next);
    next.warnings.extend(next.node_warnings.iter().cloned());
    for givers in next.givers.values_mut() {
        givers.shrink_to_fit();
    }
    for offers in next.offers.values_mut() {
        offers.shrink_to_fit();
    }
    // One shared set per distinct list of advertisements
    // (model::Advertisements).
    for vip in Arc::make_mut(&mut next.vips).values_mut() {
        let facts = vip.route.make_mut();
        facts.advertisements = sets.intern(std::mem::take(&mut facts.advertisements));
    }
    next.interner = sets;

    // Why what went away went.
    let by_key: HashMap<&ServiceKey, &ServiceRecord> =
        services.iter().map(|s| (&s.key, &***s)).collect();
    let lookup = |k: &ServiceKey| by_key.get(k).copied();
    let retention = reason_retention(config);
    let mut judged = Vec::new();
    for (ip, givers) in &prev.givers {
        if next.vips.contains_key(ip) {
            continue;
        }
        judged.push(judge.gone(*ip, givers, None, &lookup, &mut namespaces, &local));
    }
    for (ip, gone) in &prev.gone {
        if next.vips.contains_key(ip) || prev.givers.contains_key(ip) {
            continue;
        }
        if now.saturating_duration_since(gone.since) > retention {
            continue;
        }
        judged.push(judge.gone(
            *ip,
            &gone.givers,
            Some(gone),
            &lookup,
            &mut namespaces,
            &local,
        ));
    }
    (next.gone, next.mass_absence) =
        settle(config, judged, prev.on_wire(), services.is_empty(), now);
    for giver in next.gone.values().flat_map(|g| &g.givers) {
        if !next.uids.contains_key(&giver.service)
            && let Some(uid) = prev.uid_of(&giver.service)
        {
            next.gone_uids
                .insert(giver.service.clone(), uid.to_string());
        }
    }
    next.absences = definitive_absences(&next.gone);
    next
}

/// One VIP that went (or had gone), as one evaluation judges it: its reason
/// if a Service missing from the list is a deletion (`strict`), and if it is
/// an absence (`lenient`). They differ only where a missing Service makes
/// the deletion.
struct JudgedGone {
    ip: IpAddr,
    givers: Givers,
    /// Its reason, since when, and its mass flag, when it had gone already.
    before: Option<(Absence, Instant, bool)>,
    strict: Absence,
    lenient: Absence,
}

impl Judge<'_> {
    /// Judges a VIP that went (`before`: how it had gone, if it had).
    /// Reasons only escalate.
    fn gone<'r>(
        &self,
        ip: IpAddr,
        givers: &Givers,
        before: Option<&Gone>,
        lookup: &impl Fn(&ServiceKey) -> Option<&'r ServiceRecord>,
        namespaces: &mut NamespaceLabels<'_>,
        local: &LocalEndpoints,
    ) -> JudgedGone {
        // The weakest reason: `max` with it changes nothing.
        let prior = before.map_or(Absence::Vanished, |g| g.reason);
        let lenient =
            prior.max(self.fate(ip, givers, lookup, namespaces, local, Absence::Vanished));
        let strict = if before.is_some_and(|g| g.mass) {
            lenient
        } else {
            prior.max(self.fate(ip, givers, lookup, namespaces, local, Absence::Deleted))
        };
        JudgedGone {
            ip,
            givers: givers.clone(),
            before: before.map(|g| (g.reason, g.since, g.mass)),
            strict,
            lenient,
        }
    }
}

/// The gone VIPs with their reasons, the mass rule applied (module doc):
/// `advertised` is how many VIPs may have been on the wire before this
/// evaluation ([`Evaluation::on_wire`]),
/// `none_listed` whether the list has no Service left. Also answers the
/// mass disappearance found, if one was.
fn settle(
    config: &Config,
    judged: Vec<JudgedGone>,
    advertised: usize,
    none_listed: bool,
    now: Instant,
) -> (BTreeMap<IpAddr, Gone>, Option<(usize, usize)>) {
    let by_deletion = judged.iter().filter(|j| j.strict != j.lenient).count();
    let mass = by_deletion > config.stability.guard.allowance(advertised)
        || (none_listed && by_deletion > 1);
    let mut gone = BTreeMap::new();
    for j in judged {
        let was_mass = j.before.is_some_and(|(_, _, m)| m);
        let (reason, mass_flag) = if mass && j.strict != j.lenient {
            (j.lenient, true)
        } else {
            (j.strict, was_mass)
        };
        let since = match j.before {
            Some((r, since, _)) if r == reason => since,
            _ => now,
        };
        gone.insert(
            j.ip,
            Gone {
                reason,
                since,
                givers: j.givers,
                mass: mass_flag,
            },
        );
    }
    (gone, mass.then_some((by_deletion, advertised)))
}

/// The gone VIPs that go for a definitive reason (a VIP that merely
/// vanished is not listed: the hold-down applies).
fn definitive_absences(gone: &BTreeMap<IpAddr, Gone>) -> BTreeMap<IpAddr, Absence> {
    gone.iter()
        .filter(|(_, g)| g.reason != Absence::Vanished)
        .map(|(ip, g)| (*ip, g.reason))
        .collect()
}

/// What changed since the evaluation [`update`] is given.
#[derive(Debug, Clone, Copy)]
pub struct Changes<'a> {
    /// Every Service that changed, and the Service of every EndpointSlice
    /// that changed, with its record now (`None`: it is gone).
    pub services: &'a [(ServiceKey, Option<Arc<ServiceRecord>>)],
    /// This node's EndpointSlices (only those of the Services above and of
    /// the givers of VIPs gone are read).
    pub endpoint_slices: &'a [Arc<SliceRecord>],
    /// The Namespaces, as for [`Cluster::namespaces`].
    pub namespaces: Option<&'a [Arc<Namespace>]>,
}

/// True when [`update`] cannot follow `changes` from `last` and the full
/// [`evaluate`] must run: attribute annotations and link-bandwidth counts
/// are judged across every VIP at once.
pub fn needs_full_evaluation(last: &Evaluation, config: &Config, changes: &Changes<'_>) -> bool {
    last.annotated > 0
        || !config.tenants.is_empty()
        || config
            .advertisements
            .iter()
            .any(|a| a.link_bandwidth.is_some())
        || changes
            .services
            .iter()
            .any(|(_, r)| r.as_deref().is_some_and(policy_attrs::annotated))
}

/// Brings `eval` up to date after `changes`, re-judging only the Services
/// named there: gives exactly what [`evaluate`] would from `eval` and the
/// cluster now, provided the Node, the Namespaces and the config are those
/// of the evaluation `eval` came from, and [`needs_full_evaluation`] is
/// false. Answers the warnings that are new.
pub fn update(
    eval: &mut Evaluation,
    config: &Config,
    changes: &Changes<'_>,
    now: Instant,
) -> Vec<String> {
    let node_name = eval.words.node_name.clone();
    let judge = Judge::new(
        config,
        &node_name,
        eval.node_problem.clone(),
        eval.node_missing,
    );
    let advertised = eval.on_wire();
    let mut namespaces = NamespaceLabels::new(changes.namespaces);
    // The endpoints of the Services re-judged here and of the givers the
    // gone VIPs are judged by.
    let wanted: BTreeSet<&ServiceKey> = changes
        .services
        .iter()
        .map(|(k, _)| k)
        .chain(
            eval.gone
                .values()
                .flat_map(|g| &g.givers)
                .map(|g| &g.service),
        )
        .chain(
            changes
                .services
                .iter()
                .flat_map(|(k, _)| eval.records.get(k))
                .flat_map(|r| service_addresses(&judge, &r.0))
                .flat_map(|ip| eval.givers.get(&ip).into_iter().flatten())
                .map(|g| &g.service),
        )
        .collect();
    let slices: Vec<Arc<SliceRecord>> = changes
        .endpoint_slices
        .iter()
        .filter(|s| wanted.contains(&s.service))
        .cloned()
        .collect();
    drop(wanted);
    let local = LocalEndpoints::index(&slices);

    let mut new_warnings = Vec::new();
    let mut touched: BTreeSet<IpAddr> = BTreeSet::new();
    let mut uids_before: BTreeMap<ServiceKey, String> = BTreeMap::new();
    let mut sets = std::mem::take(&mut eval.interner);
    for (key, now_record) in changes.services {
        // What the Service gave until now goes.
        if let Some(old) = eval.records.take(key) {
            let old = old.0;
            if policy_attrs::annotated(&old) {
                eval.annotated -= 1;
            }
            for kind in judge.seen_kinds.iter().copied() {
                let found = addresses(&old, kind);
                if judge.kinds.contains(&kind) {
                    for warning in found.warnings {
                        unwarn(eval, &warning);
                    }
                }
                for ip in found.ips {
                    if let Some(offers) = eval.offers.get_mut(&ip) {
                        offers.retain(|o| o.record.key != *key);
                        if offers.is_empty() {
                            eval.offers.remove(&ip);
                        }
                    }
                    touched.insert(ip);
                }
            }
        }
        if let Some(uid) = eval.uids.remove(key) {
            uids_before.insert(key.clone(), uid);
        }
        let Some(record) = now_record else {
            continue;
        };
        // What it gives now.
        let judged = judge.judge(record, &mut namespaces, &local, &mut sets);
        for warning in judged.warnings {
            let count = eval.warning_counts.entry(warning.clone()).or_default();
            *count += 1;
            if *count == 1 && eval.warnings.insert(warning.clone()) {
                new_warnings.push(warning);
            }
        }
        if policy_attrs::annotated(record) {
            eval.annotated += 1;
        }
        let mut gives = false;
        for (ip, offer) in judged.offers {
            gives |= offer.verdict.is_ok();
            let offers = eval.offers.entry(ip).or_default();
            let at = offers.partition_point(|o| (&o.record.key, o.kind) < (key, offer.kind));
            offers.insert(at, offer);
            touched.insert(ip);
        }
        if gives && let Some(uid) = &record.uid {
            eval.uids.insert(key.clone(), uid.clone());
        }
        eval.records.insert(ByKey(Arc::clone(record)));
    }

    // The addresses whose offers changed, settled again. The shared tables
    // are copied (snapshots hold them) only when one of their entries
    // changes.
    let mut was_given: BTreeMap<IpAddr, Givers> = BTreeMap::new();
    let mut settled: Vec<(IpAddr, Option<Vip>, Option<Vec<String>>)> = Vec::new();
    for ip in &touched {
        if let Some(givers) = eval.givers.remove(ip) {
            was_given.insert(*ip, givers);
        }
        let mut vip: Option<Vip> = None;
        let mut givers: Givers = Vec::new();
        let mut why: Vec<String> = Vec::new();
        for offer in eval.offers.get(ip).into_iter().flatten() {
            match &offer.verdict {
                Ok(advertisements) => {
                    let v = vip.get_or_insert_with(|| {
                        Vip::of(Route::new(
                            Arc::clone(advertisements),
                            Some(offer.record.key.to_string().into()),
                            None,
                        ))
                    });
                    if !Arc::ptr_eq(&v.route.advertisements, advertisements) {
                        let union: BTreeSet<String> = v
                            .route
                            .advertisements
                            .union(advertisements)
                            .cloned()
                            .collect();
                        v.route.make_mut().advertisements = sets.intern(Arc::new(union));
                    }
                    v.route.make_mut().local_traffic |=
                        local_traffic_policy(&offer.record, offer.kind);
                    let giver = Giver {
                        service: offer.record.key.clone(),
                        kind: offer.kind,
                    };
                    if let Err(at) = givers.binary_search(&giver) {
                        givers.insert(at, giver);
                    }
                }
                Err(lines) => {
                    for line in lines {
                        if !why.contains(line) {
                            why.push(line.clone());
                        }
                    }
                }
            }
        }
        if vip.is_some() {
            eval.givers.insert(*ip, givers);
        }
        let why = (vip.is_none() && !why.is_empty()).then_some(why);
        settled.push((*ip, vip, why));
    }
    if settled
        .iter()
        .any(|(ip, vip, _)| eval.vips.get(ip) != vip.as_ref())
    {
        // The map is one sorted list: the VIPs that went are taken out in
        // one pass and those that came merged in, however many.
        let vips = Arc::make_mut(&mut eval.vips);
        let mut came = Vec::new();
        let mut gone = Vec::new();
        for (ip, vip, _) in &mut settled {
            match vip.take() {
                Some(vip) => came.push((*ip, vip)),
                None => gone.push(*ip),
            }
        }
        vips.remove_all(&gone, |_| {});
        vips.merge(came);
    }
    if settled
        .iter()
        .any(|(ip, _, why)| eval.excluded.get(ip) != why.as_ref())
    {
        let excluded = Arc::make_mut(&mut eval.excluded);
        for (ip, _, why) in settled {
            match why {
                Some(why) => excluded.insert(ip, why),
                None => excluded.remove(&ip),
            };
        }
    }
    eval.interner = sets;

    // Why what went away went: the VIPs gone before are judged again (their
    // givers may have gone further), then those that went now.
    let records = &eval.records;
    let lookup = |k: &ServiceKey| records.get(k).map(|r| &*r.0);
    let retention = reason_retention(config);
    let mut judged = Vec::new();
    for (ip, g) in &eval.gone {
        if eval.vips.contains_key(ip) || now.saturating_duration_since(g.since) > retention {
            continue;
        }
        judged.push(judge.gone(*ip, &g.givers, Some(g), &lookup, &mut namespaces, &local));
    }
    for (ip, givers) in &was_given {
        if eval.vips.contains_key(ip) {
            continue;
        }
        judged.push(judge.gone(*ip, givers, None, &lookup, &mut namespaces, &local));
    }
    (eval.gone, eval.mass_absence) =
        settle(config, judged, advertised, eval.records.is_empty(), now);
    let mut gone_uids = BTreeMap::new();
    for giver in eval.gone.values().flat_map(|g| &g.givers) {
        if eval.uids.contains_key(&giver.service) {
            continue;
        }
        if let Some(uid) = uids_before
            .get(&giver.service)
            .or_else(|| eval.gone_uids.get(&giver.service))
        {
            gone_uids.insert(giver.service.clone(), uid.clone());
        }
    }
    eval.gone_uids = gone_uids;
    eval.absences = definitive_absences(&eval.gone);
    new_warnings
}

/// The addresses of every kind looked at that `service` carries.
fn service_addresses(judge: &Judge<'_>, service: &ServiceRecord) -> Vec<IpAddr> {
    judge
        .seen_kinds
        .iter()
        .flat_map(|&kind| addresses(service, kind).ips)
        .collect()
}

/// One occurrence of a Service warning is gone.
fn unwarn(eval: &mut Evaluation, warning: &str) {
    if let Some(count) = eval.warning_counts.get_mut(warning) {
        *count -= 1;
        if *count == 0 {
            eval.warning_counts.remove(warning);
            if !eval.node_warnings.contains(warning) {
                eval.warnings.remove(warning);
            }
        }
    }
}

//! The pure core of the Kubernetes source: from the objects the watchers
//! hold to the VIPs this node advertises, why the others are not, and why
//! the ones that went away went.
//!
//! [`evaluate`] reads no clock and does no IO; the watcher layer calls it
//! with the reflectors' contents after every (debounced) change, passing the
//! previous [`Evaluation`] so it can tell what went away and why.
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
//! 4. Advertisements that list the kind, and whose `service_selector` and
//!    `namespace_selector` match → the VIP is advertised under each of them;
//!    none → not advertised (definitive).
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
    AddressKind, Config, DEFAULT_LOAD_BALANCER_CLASS, KubernetesSource, LabelSelector, Source,
    format_duration,
};
use crate::model::Absence;
use crate::model::{SourceSnapshot, Vip};

/// The label the API server sets on every namespace (immutable, equal to
/// its name). It is all holdfast knows of a namespace it does not watch.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

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
    /// The VIPs this node advertises, with their advertisements.
    pub vips: BTreeMap<IpAddr, Vip>,
    /// VIPs that went away for a definitive reason (`Deleted`, `Drained`).
    /// A VIP that merely vanished is not listed: the hold-down applies.
    pub absences: BTreeMap<IpAddr, Absence>,
    /// Why addresses seen on Services are not advertised by this node, for
    /// `holdfast explain`. Only addresses not in `vips`.
    pub excluded: BTreeMap<IpAddr, Vec<String>>,
    /// Why this node advertises nothing, when it does not.
    pub node_problem: Option<String>,
    /// Things in the Services that could not be used (hostname-only
    /// ingress entries, malformed addresses), one line each.
    pub warnings: BTreeSet<String>,
    /// Attribute annotations refused, per Service (a Warning Event each;
    /// policy_attrs).
    pub refused: BTreeMap<ServiceKey, Vec<String>>,
    /// The Node's PodCIDRs, when an advertisement lists "PodCIDR".
    pub prefixes: BTreeMap<ipnet::IpNet, Vip>,
    /// PodCIDRs that go at once: this node advertises nothing.
    pub prefix_absences: BTreeMap<ipnet::IpNet, Absence>,
    /// `explain` lines about a VIP's attributes (honoured or refused).
    attribute_notes: BTreeMap<IpAddr, Vec<String>>,
    givers: BTreeMap<IpAddr, Givers>,
    gone: BTreeMap<IpAddr, Gone>,
    /// `metadata.uid` of the Services in `givers` and `gone`.
    uids: BTreeMap<ServiceKey, String>,
    words: Words,
    /// The endpoint counts the link-bandwidth community carries, and the
    /// changes waiting to be published (steering::Settle).
    bandwidth: crate::steering::Settle,
}

impl Evaluation {
    /// When a waiting endpoint count is due: the watcher layer evaluates
    /// again then, though nothing else changed.
    pub fn bandwidth_due(&self) -> Option<Instant> {
        self.bandwidth.next_due()
    }

    /// The uid of a Service that gives or gave a VIP, as last seen.
    pub fn uid_of(&self, service: &ServiceKey) -> Option<&str> {
        self.uids.get(service).map(String::as_str)
    }

    /// The snapshot the source sends for this evaluation.
    pub fn snapshot(&self, healthy: bool, synced: bool, error: Option<String>) -> SourceSnapshot {
        SourceSnapshot {
            vips: std::sync::Arc::new(self.vips.clone()),
            absences: self.absences.clone(),
            healthy,
            synced,
            error,
            excluded: self.excluded.clone(),
            prefixes: self.prefixes.clone(),
            prefix_absences: self.prefix_absences.clone(),
            interfaces: Default::default(),
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
        .filter_map(|a| a.namespace_selector.as_ref())
        .any(|s| {
            s.match_labels.keys().any(|k| k != NAMESPACE_NAME_LABEL)
                || s.match_expressions
                    .iter()
                    .any(|e| e.key != NAMESPACE_NAME_LABEL)
        })
}

/// The `[source]` settings that apply; the defaults when the config's
/// source is not Kubernetes (the daemon does not run this source then).
pub(crate) fn source_settings(config: &Config) -> Cow<'_, KubernetesSource> {
    match &config.source {
        Source::Kubernetes(k) => Cow::Borrowed(k),
        Source::File { .. } => Cow::Owned(KubernetesSource {
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
/// take addresses of `kind` from this Service, or why none does.
fn selected_by(
    config: &Config,
    source: &KubernetesSource,
    service: &ServiceRecord,
    key: &ServiceKey,
    kind: AddressKind,
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
        if let Some(m) = miss(&adv.service_selector, service_labels) {
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
    services: &[(ServiceKey, &ServiceRecord)],
    next: &mut Evaluation,
) {
    // Most clusters annotate no Service: then there is nothing to do, and
    // nothing is allocated per Service.
    if !services.iter().any(|(_, s)| policy_attrs::annotated(s)) {
        return;
    }
    let by_key: HashMap<String, &ServiceRecord> =
        services.iter().map(|(k, s)| (k.to_string(), *s)).collect();
    // One shared value per (Service, advertisements): its VIPs share it.
    type Key = (String, Arc<BTreeSet<String>>);
    let mut shared: HashMap<Key, Option<Arc<crate::model::ServiceAttributes>>> = HashMap::new();
    for vip in next.vips.values_mut() {
        let Some(name) = vip.service.clone() else {
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
            .filter(|a| vip.advertisements.contains(&a.name));
        let verdict = policy_attrs::judge(&requested, ads);
        let notes = next.attribute_notes.entry(vip.address).or_default();
        if let Some(a) = &verdict.attributes {
            notes.push(format!(
                "attributes from the annotations of {name}: {}",
                policy_attrs::describe(a)
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
        vip.attributes = shared
            .entry((name.to_string(), vip.advertisements.clone()))
            .or_insert_with(|| verdict.attributes.map(Arc::new))
            .clone();
    }
}

/// The endpoint count of each VIP under an advertisement with
/// `link_bandwidth` (src/steering.rs): the ready local endpoints of the
/// Services with traffic policy Local that give it, added up; one for a
/// VIP only Services with policy Cluster give (each node serves all of
/// it). Counts pass the limiter before they reach the route's attributes.
fn apply_link_bandwidth(
    prev: &Evaluation,
    config: &Config,
    services: &[(ServiceKey, &ServiceRecord)],
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
        services.iter().map(|(k, s)| (k, *s)).collect();
    let mut counts = BTreeMap::new();
    for (ip, vip) in &next.vips {
        if !vip
            .advertisements
            .iter()
            .any(|a| weighted.contains(a.as_str()))
        {
            continue;
        }
        let count = if vip.local_traffic {
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
    for (ip, vip) in next.vips.iter_mut() {
        let Some(published) = next.bandwidth.published(*ip) else {
            continue;
        };
        let mut a = vip.attributes.as_deref().cloned().unwrap_or_default();
        a.endpoints = Some(published);
        vip.attributes = Some(Arc::new(a));
        let note = match next.bandwidth.pending(*ip) {
            Some(waiting) => format!(
                "link bandwidth: {published} endpoint unit(s) announced, {waiting} waiting to settle (a burst is one UPDATE)"
            ),
            None => format!("link bandwidth: {published} endpoint unit(s) announced"),
        };
        next.attribute_notes.entry(*ip).or_default().push(note);
    }
}

/// The Node's `spec.podCIDRs` under the advertisements that list "PodCIDR".
/// A node that advertises nothing (drained, excluded) withdraws them at
/// once, as it does its VIPs; a PodCIDR that merely disappears from the
/// Node is held down like a vanished VIP.
fn pod_cidrs(config: &Config, node: Option<&Node>, node_problem: bool, next: &mut Evaluation) {
    let names: BTreeSet<String> = config
        .advertisements
        .iter()
        .filter(|a| a.pod_cidr)
        .map(|a| a.name.clone())
        .collect();
    if names.is_empty() {
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
    let advertisements = Arc::new(names);
    for text in cidrs {
        let Ok(prefix) = text.parse::<ipnet::IpNet>() else {
            next.warnings.insert(format!(
                "node spec.podCIDRs has \"{text}\", not a prefix; skipped"
            ));
            continue;
        };
        let prefix = prefix.trunc();
        if node_problem {
            next.prefix_absences.insert(prefix, Absence::Drained);
            continue;
        }
        next.prefixes.insert(
            prefix,
            Vip::new(prefix.network(), Arc::clone(&advertisements)),
        );
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
    let source = source_settings(config);
    let node_problem = node_problem(&config.speaker, cluster.node_name, cluster.node);
    let local = LocalEndpoints::index(cluster.endpoint_slices);
    let mut namespaces = NamespaceLabels::new(cluster.namespaces);
    let kinds: BTreeSet<AddressKind> = config
        .advertisements
        .iter()
        .flat_map(|a| a.addresses.iter().copied())
        .collect();
    // LoadBalancer and external IPs are always looked at, so `explain` can
    // say why one is not advertised; cluster IPs only when some
    // advertisement asks for them (otherwise every Service would be listed).
    let seen_kinds: Vec<AddressKind> = [
        AddressKind::LoadBalancerIp,
        AddressKind::ExternalIp,
        AddressKind::ClusterIp,
    ]
    .into_iter()
    .filter(|k| *k != AddressKind::ClusterIp || kinds.contains(k))
    .collect();

    let mut services: Vec<(ServiceKey, &ServiceRecord)> = cluster
        .services
        .iter()
        .map(|s| (s.key.clone(), &**s))
        .collect();
    services.sort_by(|a, b| a.0.cmp(&b.0));

    let mut next = Evaluation {
        node_problem: node_problem.clone(),
        words: Words {
            node_name: cluster.node_name.to_string(),
            withdraw_hold_down: config.stability.withdraw_hold_down,
            delete_delay: config.stability.delete_delay,
            local_endpoint_delay: config.stability.local_endpoint_delay,
        },
        ..Evaluation::default()
    };
    let mut reasons: BTreeMap<IpAddr, Vec<String>> = BTreeMap::new();
    for (key, service) in &services {
        for &kind in &seen_kinds {
            let found = addresses(service, kind);
            if kinds.contains(&kind) {
                next.warnings.extend(found.warnings);
            }
            if found.ips.is_empty() {
                continue;
            }
            let labels = namespaces.labels(&key.namespace);
            let verdict = selected_by(config, &source, service, key, kind, labels).and_then(|advs| {
                if local_traffic_policy(service, kind) && !local.has(key) {
                    let policy = match kind {
                        AddressKind::ClusterIp => "internalTrafficPolicy",
                        _ => "externalTrafficPolicy",
                    };
                    return Err(vec![format!(
                        "{key}: {policy} is Local and node \"{}\" has no ready, non-terminating endpoint of it",
                        cluster.node_name
                    )]);
                }
                match &node_problem {
                    Some(problem) => Err(vec![problem.clone()]),
                    None => Ok(advs),
                }
            });
            match verdict {
                Ok(advertisements) => {
                    for ip in found.ips {
                        let vip = next.vips.entry(ip).or_insert_with(|| Vip {
                            address: ip,
                            advertisements: Default::default(),
                            // Services come sorted: the first is the smallest.
                            service: Some(Arc::from(key.to_string())),
                            attributes: None,
                            local_traffic: false,
                        });
                        // One Service with traffic policy Local keeps the
                        // VIP out of aggregates: the nodes without its
                        // endpoints do not announce it.
                        vip.local_traffic |= local_traffic_policy(service, kind);
                        std::sync::Arc::make_mut(&mut vip.advertisements)
                            .extend(advertisements.iter().cloned());
                        let givers = next.givers.entry(ip).or_default();
                        let giver = Giver {
                            service: key.clone(),
                            kind,
                        };
                        if let Err(at) = givers.binary_search(&giver) {
                            givers.insert(at, giver);
                        }
                        if let Some(uid) = &service.uid {
                            next.uids.insert(key.clone(), uid.clone());
                        }
                    }
                }
                Err(why) => {
                    for ip in found.ips {
                        let list = reasons.entry(ip).or_default();
                        for line in &why {
                            if !list.contains(line) {
                                list.push(line.clone());
                            }
                        }
                    }
                }
            }
        }
    }
    reasons.retain(|ip, _| !next.vips.contains_key(ip));
    next.excluded = reasons;
    apply_service_attributes(config, &services, &mut next);
    apply_link_bandwidth(prev, config, &services, &local, now, &mut next);
    pod_cidrs(config, cluster.node, node_problem.is_some(), &mut next);
    // One shared set per distinct list of advertisements
    // (model::Advertisements).
    let mut interner = crate::model::Interner::default();
    for givers in next.givers.values_mut() {
        givers.shrink_to_fit();
    }
    for vip in next.vips.values_mut() {
        vip.advertisements = interner.intern(std::mem::take(&mut vip.advertisements));
    }

    // Why what went away went.
    let by_key: HashMap<&ServiceKey, &ServiceRecord> =
        services.iter().map(|(k, s)| (k, *s)).collect();
    let mut fate = |givers: &Givers| -> Absence {
        if node_problem.is_some() {
            return Absence::Drained;
        }
        let mut verdict = |g: &Giver| match by_key.get(&g.service) {
            None => Absence::Deleted,
            Some(service) => {
                let labels = namespaces.labels(&g.service.namespace);
                if selected_by(config, &source, service, &g.service, g.kind, labels).is_err() {
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
    };
    let retention = reason_retention(config);
    for (ip, givers) in &prev.givers {
        if next.vips.contains_key(ip) {
            continue;
        }
        next.gone.insert(
            *ip,
            Gone {
                reason: fate(givers),
                since: now,
                givers: givers.clone(),
            },
        );
    }
    for (ip, gone) in &prev.gone {
        if next.vips.contains_key(ip) || next.gone.contains_key(ip) {
            continue;
        }
        if now.saturating_duration_since(gone.since) > retention {
            continue;
        }
        let reason = gone.reason.max(fate(&gone.givers));
        next.gone.insert(
            *ip,
            Gone {
                reason,
                since: if reason == gone.reason {
                    gone.since
                } else {
                    now
                },
                givers: gone.givers.clone(),
            },
        );
    }
    for giver in next.gone.values().flat_map(|g| &g.givers) {
        if !next.uids.contains_key(&giver.service)
            && let Some(uid) = prev.uids.get(&giver.service)
        {
            next.uids.insert(giver.service.clone(), uid.clone());
        }
    }
    next.absences = next
        .gone
        .iter()
        .filter(|(_, g)| g.reason != Absence::Vanished)
        .map(|(ip, g)| (*ip, g.reason))
        .collect();
    next
}

//! What flows between the layers (ARCHITECTURE.md: source → policy → stability →
//! speaker → sessions): the shared vocabulary every layer imports from
//! here, downward; this module imports no layer.

pub mod attributes;
pub mod community;
pub mod link_bandwidth;
pub mod net;
pub mod sorted;

pub use attributes::{RouteAttrs, ServiceAttribute, ServiceAttributes};

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

/// One VIP a source wants this node to advertise, with the facts policy
/// and `explain` need. Its address is the key it is held under
/// ([`VipMap`]), not repeated here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vip {
    /// Its advertisements, Service, asked-for attributes and traffic
    /// policy: the route the stability layer will hold for it, shared with
    /// it (a clone is a reference count). One pointer: an entry of the
    /// snapshot is 32 octets.
    pub route: Route,
}

impl Vip {
    /// A VIP under `advertisements`, with no Service facts.
    pub fn new(advertisements: Advertisements) -> Vip {
        Vip::of(Route::new(advertisements, None, None))
    }

    /// A VIP whose route is `route`.
    pub fn of(route: Route) -> Vip {
        Vip { route }
    }
}

/// The names of the `[[advertisement]]`s a VIP is advertised under,
/// shared: VIPs by the thousand name the same one or two advertisements,
/// and a set of its own per VIP (a B-tree node of about 300 octets, plus
/// the names), copied into the snapshot, the stability layer and the status
/// view, was most of holdfast's memory with 100k VIPs. Sources hand out
/// one `Arc` per distinct set ([`Interner`]); a clone is a reference count.
pub type Advertisements = Arc<BTreeSet<String>>;

/// A Service's name ("namespace/name"), shared by every copy of its VIP's
/// route. One pointer wide where an `Arc<str>` is two: each VIP in the
/// snapshot and each entry of the stability layer is 8 octets smaller.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceName(Arc<String>);

impl std::ops::Deref for ServiceName {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl From<String> for ServiceName {
    fn from(name: String) -> ServiceName {
        ServiceName(Arc::new(name))
    }
}

impl From<&str> for ServiceName {
    fn from(name: &str) -> ServiceName {
        ServiceName::from(name.to_owned())
    }
}

impl std::fmt::Display for ServiceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self)
    }
}

impl std::fmt::Debug for ServiceName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self, f)
    }
}

/// Hands out one shared [`Advertisements`] per distinct set.
#[derive(Debug, Default)]
pub struct Interner {
    sets: Vec<Advertisements>,
    /// The name [`Interner::one`] was last asked for, and its set: a VIP
    /// file names the same advertisement (or none, the default) for VIP
    /// after VIP, and looking it up among the sets each time was a tenth
    /// of the file's parse.
    last_one: Option<(Box<str>, Advertisements)>,
    /// The routes [`Interner::plain`] handed out, one per set.
    plains: Vec<Route>,
}

impl Interner {
    /// The shared set equal to `set`.
    pub fn intern(&mut self, set: Advertisements) -> Advertisements {
        if let Some(known) = self
            .sets
            .iter()
            .find(|s| Arc::ptr_eq(s, &set) || **s == set)
        {
            return known.clone();
        }
        self.sets.push(set.clone());
        set
    }

    /// The shared set holding just `name`.
    pub fn one(&mut self, name: &str) -> Advertisements {
        if let Some((last, set)) = &self.last_one
            && **last == *name
        {
            return set.clone();
        }
        let known = self
            .sets
            .iter()
            .find(|s| s.len() == 1 && s.iter().next().is_some_and(|n| n == name))
            .cloned();
        let set = known.unwrap_or_else(|| {
            let set: Advertisements = Arc::new(BTreeSet::from([name.to_string()]));
            self.sets.push(set.clone());
            set
        });
        self.last_one = Some((name.into(), set.clone()));
        set
    }

    /// The shared route of a VIP under just `name`, with no Service facts:
    /// the VIPs of a file that name the same advertisement share one,
    /// whatever the order the names come in.
    pub fn plain(&mut self, name: &str) -> Route {
        let set = self.one(name);
        if let Some(route) = self
            .plains
            .iter()
            .find(|r| Arc::ptr_eq(&r.advertisements, &set))
        {
            return route.clone();
        }
        let route = Route::new(set, None, None);
        self.plains.push(route.clone());
        route
    }
}

/// A source's VIPs by address: one list sorted by address
/// (`crate::model::sorted`). The VIP file's parser hands over its list as it is,
/// with no tree built beside it.
pub type VipMap = crate::model::sorted::SortedMap<IpAddr, Vip>;

/// The full desired set of a source at one moment. Sources send whole
/// snapshots; the stability layer works out what changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SourceSnapshot {
    /// Shared: the source, the channel to the daemon and the daemon each
    /// hold the snapshot; with 100k VIPs each copy of the map was 10 MB.
    pub vips: Arc<VipMap>,
    /// VIPs that went away, when the source knows why (docs/src/kubernetes/outages.md:
    /// transient versus definitive). A VIP missing without a reason is
    /// taken as `Vanished` (held down).
    pub absences: BTreeMap<IpAddr, Absence>,
    /// An unhealthy source never causes a withdrawal: the last known set
    /// stands.
    pub healthy: bool,
    /// The source has delivered its first complete view (`/readyz`).
    pub synced: bool,
    /// The last problem, in words an operator can act on (a VIP file's
    /// `path:line:col: message`, an API server error).
    pub error: Option<String>,
    /// Why VIPs the source saw are not wanted here, for `explain`
    /// (Kubernetes: class mismatch, selector miss, no local endpoint…).
    pub excluded: Arc<BTreeMap<IpAddr, Vec<String>>>,
    /// Whole prefixes to announce (the Node's PodCIDRs), each under the
    /// advertisements that list "PodCIDR".
    pub prefixes: BTreeMap<ipnet::IpNet, Vip>,
    /// Prefixes that went away for a definitive reason (the node drained).
    pub prefix_absences: BTreeMap<ipnet::IpNet, Absence>,
    /// The node's global interface addresses by interface name
    /// (source::interface), for `[[advertisement]] interface`.
    pub interfaces: Arc<BTreeMap<String, Vec<IpAddr>>>,
    /// VIPs on which the source's own periodic reconcile found the set it
    /// had published wrong (a missed change), so far.
    pub reconcile_repairs: u64,
    /// With several sources (`source::merge`), the unhealthy ones (their
    /// routes stand); empty from a single source, whose `healthy` says it.
    pub unhealthy: SourceSet,
    /// With several sources, each one's state, in config order; empty from
    /// a single source.
    pub sources: Arc<Vec<SourceState>>,
}

impl SourceSnapshot {
    /// The unhealthy sources, as the stability layer takes them.
    pub fn unhealthy_sources(&self) -> SourceSet {
        match (self.healthy, self.unhealthy.is_empty()) {
            (true, _) => SourceSet::NONE,
            (false, true) => SourceSet::ALL,
            (false, false) => self.unhealthy,
        }
    }
}

/// One source's state within a combined snapshot (status, `explain`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceState {
    /// Its `name`.
    pub name: String,
    /// `"file"` or `"kubernetes"`.
    pub kind: &'static str,
    pub healthy: bool,
    pub synced: bool,
    pub error: Option<String>,
    /// The VIPs it has now (some may belong to an earlier source).
    pub vips: usize,
}

/// Why a prefix is no longer in the source's set, when the source knows.
/// The order is the order of escalation: a source that learns a stronger
/// reason for a prefix already gone reports it, never a weaker one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Absence {
    /// Transient: the Service's address list emptied. Held down, damped.
    /// Also what an absence without a reported reason is taken to be.
    Vanished,
    /// The Service's traffic policy is `Local` and this node has no ready
    /// endpoint of it left: its datapath now drops the Service's traffic,
    /// so the route goes after `local_endpoint_delay`, not the hold-down.
    /// Damped like `Vanished`: an endpoint whose readiness keeps flapping
    /// is held advertised while its damping episode lasts.
    NoLocalEndpoint,
    /// Definitive: Service deleted, class or type changed, opt-out
    /// annotation. Withdrawn after `delete_delay`.
    Deleted,
    /// This node is cordoned or excluded: withdrawn at once.
    Drained,
    /// A datapath probe failed: withdrawn at once, no hold-down.
    ProbeFailed,
}

/// A route as the stability layer holds it: which advertisements put it
/// there and for which Service. Two routes are equal when these are; the
/// attributes each peer sees follow from the advertisements.
///
/// One pointer wide, and shared: the snapshot's VIP and the stability
/// layer's entry hold the same allocation, and the VIPs of a file that name
/// the same advertisement and no Service share one. Held inline (three
/// pointers), it was 16 octets of every entry of both tables, 3.2 MB with
/// 100k VIPs.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route(Arc<RouteFacts>);

/// What a [`Route`] says.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RouteFacts {
    /// The `[[advertisement]]`s it is advertised under (at least one).
    pub advertisements: Advertisements,
    /// The Service ("namespace/name"), when known.
    pub service: Option<ServiceName>,
    /// Attributes the Service asks for through its annotations, already
    /// checked: only values that parsed and that at least one of
    /// `advertisements` allows. Each advertisement applies those it allows
    /// (speaker::attrs_for_peer). Part of the route's identity, so a
    /// changed annotation re-announces the route with its new attributes
    /// (one UPDATE, RFC 4271 §3.1).
    pub attributes: Option<Arc<ServiceAttributes>>,
    /// Traffic policy `Local` (eTP Local): the VIP is never aggregated,
    /// since only nodes with a local endpoint announce it. A change of it
    /// alone changes no path attribute, so no UPDATE goes out for it.
    pub local_traffic: bool,
    /// The `[[tenant]]` its VIP file entry names (`tenant = "NAME"`);
    /// a Service's tenant comes from its namespace instead
    /// (`speaker::export::tenant_of`).
    pub tenant: Option<Arc<str>>,
    /// The source it came from: its health decides whether the route's
    /// absence counts (an unhealthy source's routes stand). 0 with one
    /// source.
    pub source: SourceId,
}

/// The name of the runtime routes' source (`source::runtime`), the one
/// after the config's.
pub const RUNTIME_SOURCE: &str = "runtime";

/// A source of VIPs: its index among the config's sources (`[source]`
/// or each `[[source]]`, in file order).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(pub u8);

impl SourceId {
    /// At most this many sources (one of each kind today).
    pub const MAX: usize = 64;
}

/// A set of sources, e.g. the unhealthy ones.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SourceSet(u64);

impl SourceSet {
    /// No source.
    pub const NONE: SourceSet = SourceSet(0);
    /// Every source.
    pub const ALL: SourceSet = SourceSet(u64::MAX);

    pub fn contains(self, id: SourceId) -> bool {
        u32::from(id.0) < 64 && self.0 & (1 << id.0) != 0
    }

    pub fn insert(&mut self, id: SourceId) {
        if u32::from(id.0) < 64 {
            self.0 |= 1 << id.0;
        }
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The sources in `self` and not in `other`.
    pub fn minus(self, other: SourceSet) -> SourceSet {
        SourceSet(self.0 & !other.0)
    }
}

impl Route {
    pub fn new(
        advertisements: Advertisements,
        service: Option<ServiceName>,
        attributes: Option<Arc<ServiceAttributes>>,
    ) -> Route {
        Route(Arc::new(RouteFacts {
            advertisements,
            service,
            attributes,
            local_traffic: false,
            tenant: None,
            source: SourceId::default(),
        }))
    }

    /// The same route from source `id` (shares the allocation when it is
    /// from `id` already).
    pub fn from_source(mut self, id: SourceId) -> Route {
        if self.source != id {
            self.make_mut().source = id;
        }
        self
    }

    /// The facts to change in place; copied first when shared.
    pub fn make_mut(&mut self) -> &mut RouteFacts {
        Arc::make_mut(&mut self.0)
    }

    /// The allocation's address (an identity while `self` lives).
    pub fn as_ptr(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Whether `self` and `other` are one allocation (then equal): what
    /// the tests of sharing ask, and a cheap first answer to equality.
    pub fn ptr_eq(&self, other: &Route) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl std::ops::Deref for Route {
    type Target = RouteFacts;

    fn deref(&self) -> &RouteFacts {
        &self.0
    }
}

/// What a gate (the TCP probes) says about a VIP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// No probe, or it passes: the VIP is present.
    Pass,
    /// The probe fails with `on_failure = "degrade"`: present, with its
    /// advertisements' `degraded` attributes (one UPDATE replacing the
    /// route, never a withdrawal).
    Degraded,
    /// The probe failed: absent, withdrawn at once (`ProbeFailed`).
    Fail,
    /// The probe has not passed yet: absent, no reason.
    Unknown,
}

/// The VIPs on which a freshly read set differs from the one in force:
/// added, removed or changed.
pub fn set_differences(current: &VipMap, fresh: &VipMap) -> usize {
    let changed = fresh
        .iter()
        .filter(|(ip, v)| current.get(ip) != Some(v))
        .count();
    changed + current.keys().filter(|ip| !fresh.contains_key(ip)).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// With 100k VIPs every octet of these is 100 kB in the snapshot and
    /// as much again in the stability layer's table: the sizes are a
    /// budget, and a field that breaks it should be a decision.
    #[test]
    fn a_vip_and_a_route_stay_small() {
        assert_eq!(std::mem::size_of::<Option<ServiceName>>(), 8);
        // One pointer: the facts are shared, not held per table entry.
        assert_eq!(std::mem::size_of::<Route>(), 8);
        // A VIP's address is its key in the snapshot, not one of its
        // fields: each entry of a snapshot is 32 octets.
        assert_eq!(std::mem::size_of::<Vip>(), 8);
        assert!(std::mem::size_of::<(IpAddr, Vip)>() <= 32);
    }

    /// The VIPs of a file that name the same advertisement and no Service
    /// share one route: the snapshot and the stability layer hold a
    /// pointer per VIP, not an allocation.
    #[test]
    fn plain_routes_of_one_advertisement_are_one_allocation() {
        let mut interner = Interner::default();
        let a = interner.plain("public");
        let b = interner.plain("public");
        assert!(a.ptr_eq(&b));
        let other = interner.plain("private");
        assert!(!other.ptr_eq(&a));
        assert_eq!(
            *other.advertisements,
            BTreeSet::from(["private".to_string()])
        );
        let again = interner.plain("public");
        assert!(again.ptr_eq(&a), "names that alternate still share");
        assert_eq!(
            *again.advertisements,
            BTreeSet::from(["public".to_string()])
        );
    }

    /// One set per name, whatever the order the names come in: the set
    /// remembered for the last name is never handed out for another.
    #[test]
    fn the_interner_shares_one_set_per_name() {
        let mut i = Interner::default();
        let a = i.one("a");
        assert!(Arc::ptr_eq(&a, &i.one("a")));
        let b = i.one("b");
        assert_eq!(*b, BTreeSet::from(["b".to_string()]));
        assert!(Arc::ptr_eq(&a, &i.one("a")));
        assert!(Arc::ptr_eq(&b, &i.one("b")));
        let both = Arc::new(BTreeSet::from(["a".to_string(), "b".to_string()]));
        let both = i.intern(both);
        assert!(Arc::ptr_eq(&both, &i.intern(Arc::new((*both).clone()))));
        assert_eq!(*i.one("a"), BTreeSet::from(["a".to_string()]));
    }
}

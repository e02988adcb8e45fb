//! From a source snapshot to the routes the stability layer holds: the
//! policy step between the sources and the hold-down (ARCHITECTURE.md: source →
//! policy → stability). Pure: addresses in, routes out.
//!
//! - A VIP is a host route (/32, /128) under its advertisements.
//! - An advertisement with `aggregation_length` (`aggregation_length_v6`)
//!   announces its eTP Cluster VIPs as their covering prefix instead, for
//!   as long as at least one VIP it covers is present. eTP Local VIPs stay
//!   host routes: only the nodes with a local endpoint announce them, and
//!   an aggregate would draw their traffic to every node. Because the
//!   aggregate is what goes into the stability layer, the hold-down and
//!   damping apply to it: a VIP of the range flapping costs nothing while
//!   another VIP keeps the aggregate present, and the last VIP going holds
//!   the aggregate down like any vanished route.
//! - PodCIDRs (`addresses = ["PodCIDR"]`) are prefixes as they are.
//! - `interface = "NAME"` announces the interface's global addresses as
//!   host routes.
//!
//! Routes of the same prefix from several of these merge: their
//! advertisements add up (the speaker merges their attributes).
//!
//! Why a route went: a VIP's reason is the source's. An aggregate covers
//! VIPs the snapshot no longer names once they are gone, so it is withdrawn
//! at once only when the node drained (every absence in its range says
//! `Drained`); otherwise it is held down, the conservative choice.
//! PodCIDRs and interface addresses have no reason but `Drained` (from the
//! Kubernetes source) and are otherwise held down.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::Config;
use crate::model::Absence;
use crate::model::Route;
use crate::model::{Interner, SourceSnapshot, Vip, VipMap};

pub use crate::model::Gate;

/// The prefix a VIP is announced under by one advertisement: its
/// aggregate, or the host route.
fn placement(config: &Config, ip: IpAddr, vip: &Vip, advertisement: &str) -> IpNet {
    let host = IpNet::from(ip);
    if vip.route.local_traffic {
        return host;
    }
    match config
        .advertisement(advertisement)
        .and_then(|a| a.aggregation_for(ip))
    {
        Some(len) if len < host.prefix_len() => {
            IpNet::new(ip, len).map(|n| n.trunc()).unwrap_or(host)
        }
        _ => host,
    }
}

/// Adds `names` to the route of `prefix`, creating it from `make`.
fn merge(
    out: &mut BTreeMap<IpNet, (BTreeSet<String>, Option<Route>)>,
    prefix: IpNet,
    names: impl IntoIterator<Item = String>,
    make: impl FnOnce() -> Option<Route>,
) {
    let entry = out.entry(prefix).or_insert_with(|| (BTreeSet::new(), None));
    entry.0.extend(names);
    if entry.1.is_none() {
        entry.1 = make();
    }
}

/// The routes the stability layer is to hold, in strictly ascending prefix
/// order, one per prefix (see [`desired`]).
///
/// In the common case, VIPs and nothing else with no aggregation, each VIP
/// is its own host route, read from the snapshot as the stability layer
/// takes it: a list of them beside the snapshot was 5.6 MB and a tenth of
/// the runtime thread's CPU on a load of 100k VIPs, mostly the faulting in
/// and giving back of its pages. Otherwise the routes are gathered (merged
/// by prefix) into a list first.
pub enum Present<'s> {
    Hosts {
        vips: &'s VipMap,
        next: crate::model::sorted::Iter<'s, IpAddr, Vip>,
        gates: &'s BTreeMap<IpAddr, Gate>,
    },
    Gathered(std::vec::IntoIter<(IpNet, Route)>),
}

impl Present<'_> {
    /// Whether `prefix` is among the routes (those not yet taken).
    pub fn contains(&self, prefix: &IpNet) -> bool {
        match self {
            Present::Hosts { vips, gates, .. } => {
                let ip = prefix.addr();
                *prefix == IpNet::from(ip)
                    && vips.contains_key(&ip)
                    && matches!(gate(gates, ip), Gate::Pass | Gate::Degraded)
            }
            Present::Gathered(list) => list
                .as_slice()
                .binary_search_by(|(q, _)| q.cmp(prefix))
                .is_ok(),
        }
    }
}

impl Iterator for Present<'_> {
    type Item = (IpNet, Route);

    fn next(&mut self) -> Option<(IpNet, Route)> {
        match self {
            Present::Hosts { next, gates, .. } => next.find_map(|(ip, v)| {
                let route = match gate(gates, *ip) {
                    Gate::Pass => v.route.clone(),
                    Gate::Degraded => degraded(v.route.clone()),
                    Gate::Fail | Gate::Unknown => return None,
                };
                Some((IpNet::from(*ip), route))
            }),
            Present::Gathered(list) => list.next(),
        }
    }

    /// Exact when no probe gates a VIP: the stability layer's table is
    /// then allocated once, at its final size.
    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Present::Hosts { next, gates, .. } => {
                let left = next.len();
                (if gates.is_empty() { left } else { 0 }, Some(left))
            }
            Present::Gathered(list) => list.size_hint(),
        }
    }
}

/// What the probes say of `ip`: a VIP without a gate passes.
fn gate(gates: &BTreeMap<IpAddr, Gate>, ip: IpAddr) -> Gate {
    if gates.is_empty() {
        return Gate::Pass;
    }
    gates.get(&ip).copied().unwrap_or(Gate::Pass)
}

/// The routes the stability layer is to hold, and the reasons of those
/// that went, for `snapshot` under `config`; `gates` says what the probes
/// make of the VIPs they watch (a VIP not in it passes). The routes come
/// in prefix order, one per prefix, and are read once: the stability layer
/// takes them as they come.
pub fn desired<'s>(
    config: &Config,
    snapshot: &'s SourceSnapshot,
    gates: &'s BTreeMap<IpAddr, Gate>,
) -> (Present<'s>, BTreeMap<IpNet, Absence>) {
    let mut absences: BTreeMap<IpNet, Absence> = snapshot
        .absences
        .iter()
        .map(|(ip, a)| (IpNet::from(*ip), *a))
        .collect();
    absences.extend(snapshot.prefix_absences.iter().map(|(p, a)| (*p, *a)));
    // A VIP whose probe failed went for that reason.
    for (ip, _) in gates.iter().filter(|(_, g)| **g == Gate::Fail) {
        if snapshot.vips.contains_key(ip) {
            absences.insert(IpNet::from(*ip), Absence::ProbeFailed);
        }
    }
    let aggregating = config
        .advertisements
        .iter()
        .any(|a| a.aggregation_length.is_some() || a.aggregation_length_v6.is_some());
    let extra = !snapshot.prefixes.is_empty()
        || config.advertisements.iter().any(|a| a.interface.is_some());

    // The common case, no aggregation and nothing but VIPs: one route per
    // VIP, in the snapshot's order (an IPv4 address sorts before every
    // IPv6 one, as its host route does).
    if !aggregating && !extra {
        let present = Present::Hosts {
            vips: &snapshot.vips,
            next: snapshot.vips.iter(),
            gates,
        };
        return (present, absences);
    }

    let mut gathered: BTreeMap<IpNet, (BTreeSet<String>, Option<Route>)> = BTreeMap::new();
    for (ip, vip) in snapshot.vips.iter() {
        let is_degraded = match gate(gates, *ip) {
            Gate::Pass => false,
            Gate::Degraded => true,
            Gate::Fail | Gate::Unknown => continue,
        };
        let host = IpNet::from(*ip);
        for name in vip.route.advertisements.iter() {
            let prefix = placement(config, *ip, vip, name);
            let make = || {
                (prefix == host).then(|| {
                    let r = vip.route.clone();
                    if is_degraded { degraded(r) } else { r }
                })
            };
            merge(&mut gathered, prefix, [name.clone()], make);
        }
    }
    // A prefix keeps its route: its source, and the attributes a runtime
    // route asks for.
    for (prefix, vip) in &snapshot.prefixes {
        merge(
            &mut gathered,
            *prefix,
            vip.route.advertisements.iter().cloned(),
            || Some(vip.route.clone()),
        );
    }
    for ad in &config.advertisements {
        let Some(interface) = &ad.interface else {
            continue;
        };
        // `vip_ranges` filter the interface's addresses as they do VIPs.
        for ip in snapshot.interfaces.get(interface).into_iter().flatten() {
            if !ad.allows_address(*ip) {
                continue;
            }
            merge(&mut gathered, IpNet::from(*ip), [ad.name.clone()], || None);
        }
    }

    // Aggregates go only for a drained node; see the module doc.
    for (ip, reason) in &snapshot.absences {
        for ad in &config.advertisements {
            let Some(len) = ad.aggregation_for(*ip) else {
                continue;
            };
            let Ok(aggregate) = IpNet::new(*ip, len).map(|n| n.trunc()) else {
                continue;
            };
            if aggregate == IpNet::from(*ip) || gathered.contains_key(&aggregate) {
                continue;
            }
            let entry = absences.entry(aggregate).or_insert(*reason);
            if *entry != Absence::Drained || *reason != Absence::Drained {
                *entry = Absence::Vanished;
            }
        }
    }
    absences.retain(|p, _| !gathered.contains_key(p));

    let mut interner = Interner::default();
    let present = gathered
        .into_iter()
        .map(|(prefix, (names, route))| {
            let set = interner.intern(Arc::new(names));
            let route = match route {
                Some(mut r) => {
                    if r.advertisements != set {
                        r.make_mut().advertisements = set;
                    }
                    r
                }
                None => Route::new(set, None, None),
            };
            (prefix, route)
        })
        .collect::<Vec<_>>();
    (Present::Gathered(present.into_iter()), absences)
}

/// `route` marked degraded: the flag rides in its attributes, so the
/// speaker applies each advertisement's `degraded` values and the changed
/// attributes replace the route in one UPDATE.
fn degraded(mut route: Route) -> Route {
    let mut a = route.attributes.as_deref().cloned().unwrap_or_default();
    a.degraded = true;
    route.make_mut().attributes = Some(Arc::new(a));
    route
}

/// Where `ip` is announced, when not (only) as its own host route, in
/// words for `explain`, with the prefix whose state tells its fate.
pub fn explain(config: &Config, snapshot: &SourceSnapshot, ip: IpAddr) -> (IpNet, Vec<String>) {
    let host = IpNet::from(ip);
    let mut lines = Vec::new();
    let mut prefix = host;
    if let Some(vip) = snapshot.vips.get(&ip) {
        let mut host_too = false;
        for name in vip.route.advertisements.iter() {
            let p = placement(config, ip, vip, name);
            if p == host {
                host_too = true;
                continue;
            }
            let covered: Vec<String> = snapshot
                .vips
                .iter()
                .filter(|(ip, v)| p.contains(*ip) && placement(config, **ip, v, name) == p)
                .map(|(ip, _)| ip.to_string())
                .collect();
            lines.push(format!(
                "advertisement \"{name}\" announces it as the aggregate {p}, which covers {}",
                covered.join(", ")
            ));
            prefix = p;
        }
        if host_too {
            prefix = host;
        }
        if vip.route.local_traffic
            && vip.route.advertisements.iter().any(|n| {
                config
                    .advertisement(n)
                    .and_then(|a| a.aggregation_for(ip))
                    .is_some()
            })
        {
            lines.push(
                "its traffic policy is Local: announced as a host route, never in an aggregate"
                    .to_string(),
            );
        }
    }
    for ad in &config.advertisements {
        if let Some(interface) = &ad.interface
            && snapshot
                .interfaces
                .get(interface)
                .is_some_and(|ips| ips.contains(&ip))
        {
            lines.push(match &ad.vip_ranges {
                Some(ranges) if !ad.allows_address(ip) => format!(
                    "interface {interface} has it, but it is not in the vip_ranges {} of advertisement \"{}\": not announced under it",
                    crate::config::format_ranges(ranges),
                    ad.name
                ),
                _ => format!(
                    "interface {interface} has it: announced under advertisement \"{}\"",
                    ad.name
                ),
            });
        }
    }
    for (p, vip) in &snapshot.prefixes {
        if p.contains(&ip) {
            let names: Vec<&str> = vip
                .route
                .advertisements
                .iter()
                .map(String::as_str)
                .collect();
            lines.push(format!(
                "it is in this node's PodCIDR {p}, announced under advertisement {}",
                names.join(", ")
            ));
        }
    }
    (prefix, lines)
}

#[cfg(test)]
mod tests;

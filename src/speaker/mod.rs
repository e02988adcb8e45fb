//! The speaker: what each peer is told. Per peer, an Adj-RIB-Out (RFC 4271
//! §3.2) holds the routes last sent; the desired table is compared with it
//! and the difference goes out as packed UPDATEs — announcements grouped by
//! identical attributes, withdrawals together — and nothing at all when
//! nothing changed. [`PeerSpeaker`] decides, sans IO, what a peer is sent
//! and when (MRAI, End-of-RIB, route refresh, the output budget); the
//! session driver carries it out.

mod attrs;
pub mod drain;
pub mod export;
mod next_hop;
pub mod peer;
mod rib;

pub use attrs::{EncodeParams, NextHops};
pub use drain::{Drain, DrainPhase};
pub use next_hop::pick_next_hops;
pub use peer::{Budget, OUTPUT_LIMIT, Output, PeerSpeaker, SessionUp};
pub use rib::{AdjRibOut, Delta, encode};

use std::collections::BTreeMap;
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::{Advertisement, Config};
use crate::model::{ServiceAttributes, attributes};

/// The route the stability layer hands over (defined with the shared
/// vocabulary; also reachable here, where the session's tests name it).
pub use crate::model::Route;
/// What a peer is sent for a route (defined with the per-Service attribute
/// table, `model::attributes`).
pub use crate::model::RouteAttrs;

/// The desired routes of one peer.
pub type PeerTable = crate::model::sorted::SortedMap<IpNet, Arc<RouteAttrs>>;

/// The attributes a peer gets for a route under these advertisements, or
/// `None` when none of them is for this peer. Several advertisements for
/// the same peer merge ([`RouteAttrs::merge`]): communities add up, the
/// highest LOCAL_PREF, the lowest MED and the longest prepend win.
///
/// Within one advertisement, the Service's own attributes (`service`)
/// apply where the advertisement allows them, each as its row of the
/// per-Service attribute table says (`model::attributes::TABLE`): its
/// communities and large communities are added to the advertisement's,
/// its LOCAL_PREF and MED replace the advertisement's, its prepend is
/// added to the advertisement's (none), and under `link_bandwidth` its
/// endpoint count is sent (src/model/link_bandwidth.rs).
///
/// An advertisement with `degraded` adds its degraded attributes to a
/// route whose probe degrades it: its MED replaces the route's, its
/// prepend and communities add to them.
pub fn attrs_for_peer<'a>(
    peer: &str,
    ads: impl Iterator<Item = &'a Advertisement>,
    service: Option<&ServiceAttributes>,
) -> Option<RouteAttrs> {
    let mut out: Option<RouteAttrs> = None;
    for ad in ads.filter(|a| a.applies_to_peer(peer)) {
        let one = attributes::with_service(ad.own_attributes(), service, |attr| ad.allows(attr));
        let prepend = one.as_path_prepend;
        let a = out.get_or_insert_with(RouteAttrs::default);
        a.merge(one);
        // A degraded route (probe on_failure = "degrade") carries this
        // advertisement's degraded attributes on top of its own.
        if let Some(d) = ad
            .degraded
            .as_ref()
            .filter(|_| service.is_some_and(|s| s.degraded))
        {
            a.communities.extend(d.communities.iter().copied());
            a.as_path_prepend = a
                .as_path_prepend
                .max(prepend.saturating_add(d.as_path_prepend));
            if d.med.is_some() {
                a.med = match (a.med, d.med) {
                    // The degraded MED is to lose: the highest stands.
                    (Some(x), Some(y)) => Some(x.max(y)),
                    (x, y) => y.or(x),
                };
            }
        }
    }
    out.map(RouteAttrs::canonical)
}

/// The desired table of every peer, from the routes the stability layer
/// currently advertises. Equal attributes share one allocation, so that
/// grouping them into UPDATEs is cheap. `routes` is walked once per peer.
pub fn peer_tables<'a>(
    config: &Config,
    routes: impl Iterator<Item = (&'a IpNet, &'a Route)> + Clone,
) -> BTreeMap<String, PeerTable> {
    // The attributes of each set of advertisements (with the Service's
    // own) are worked out once per peer. Routes share a handful of such
    // sets, so a short list searched by value beats a map keyed by clones
    // of the set (a String and a BTreeSet allocated per route and peer,
    // 100k times for 100k routes).
    type Known<'r> = Vec<(
        (
            &'r crate::model::Advertisements,
            Option<&'r Arc<ServiceAttributes>>,
        ),
        Option<Arc<RouteAttrs>>,
    )>;
    let mut by_value: BTreeMap<RouteAttrs, Arc<RouteAttrs>> = BTreeMap::new();
    // What export policies made, shared the same way.
    let mut by_policy: BTreeMap<RouteAttrs, Arc<RouteAttrs>> = BTreeMap::new();
    let mut tables = BTreeMap::new();
    for peer in &config.peers {
        let mut known: Known = Vec::new();
        let mut attrs_by_value = |route: &'a Route| -> Option<Arc<RouteAttrs>> {
            if let Some((_, attrs)) = known.iter().find(|((ads, svc), _)| {
                (Arc::ptr_eq(ads, &route.advertisements) || **ads == route.advertisements)
                    && *svc == route.attributes.as_ref()
            }) {
                return attrs.clone();
            }
            let ads = config
                .advertisements
                .iter()
                .filter(|a| route.advertisements.contains(&a.name));
            let attrs = attrs_for_peer(&peer.name, ads, route.attributes.as_deref()).map(|a| {
                by_value
                    .entry(a.clone())
                    .or_insert_with(|| Arc::new(a))
                    .clone()
            });
            known.push((
                (&route.advertisements, route.attributes.as_ref()),
                attrs.clone(),
            ));
            attrs
        };
        // The last route seen and its attributes: a file's VIPs under one
        // advertisement share one route (crate::model::Interner), so most
        // routes are the one before, and a pointer compare answers them.
        let mut last: Option<(&'a Route, Option<Arc<RouteAttrs>>)> = None;
        let mut attrs_of = |route: &'a Route| -> Option<Arc<RouteAttrs>> {
            if let Some((r, attrs)) = &last
                && r.ptr_eq(route)
            {
                return attrs.clone();
            }
            let attrs = attrs_by_value(route);
            last = Some((route, attrs.clone()));
            attrs
        };
        // In prefix order, straight into the table (crate::model::sorted).
        let table = if peer.export.is_pass_through() && config.tenants.is_empty() {
            PeerTable::from_sorted(
                routes
                    .clone()
                    .filter_map(|(prefix, route)| Some((*prefix, attrs_of(route)?))),
            )
        } else {
            // The tenant gate and the export policy (RFC 4271 §9.1.3), on
            // what the advertisements give; equal results share one
            // allocation as above. Without prefix ranges in the rules the
            // verdict is the route's alone: the last route's answers the
            // routes that share its allocation (a file's VIPs do).
            let by_route = peer
                .export
                .rules
                .iter()
                .all(|r| r.matches.prefixes.is_empty());
            let mut last: Option<(&'a Route, Option<Arc<RouteAttrs>>)> = None;
            PeerTable::from_sorted(routes.clone().filter_map(|(prefix, route)| {
                if by_route
                    && let Some((r, attrs)) = &last
                    && r.ptr_eq(route)
                {
                    return Some((*prefix, attrs.clone()?));
                }
                let Some(base) = attrs_of(route) else {
                    if by_route {
                        last = Some((route, None));
                    }
                    return None;
                };
                let subject = export::Subject::new(config, prefix, route);
                let verdict = export::for_peer(config, peer, &subject, (*base).clone());
                let shared = verdict.attrs.map(|attrs| {
                    if attrs == *base {
                        return base;
                    }
                    by_policy
                        .entry(attrs.clone())
                        .or_insert_with(|| Arc::new(attrs))
                        .clone()
                });
                if by_route {
                    last = Some((route, shared.clone()));
                }
                Some((*prefix, shared?))
            }))
        };
        tables.insert(peer.name.clone(), table);
    }
    tables
}

#[cfg(test)]
mod tests;

/// What `peer`'s table holds for `route` at `prefix` and why, for
/// `explain`: `None` when no advertisement of the route is for the peer,
/// else the verdict of the tenant gate and the export policy.
pub fn export_verdict(
    config: &Config,
    peer: &crate::config::Peer,
    prefix: &IpNet,
    route: &Route,
) -> Option<export::Verdict> {
    let ads = config
        .advertisements
        .iter()
        .filter(|a| route.advertisements.contains(&a.name));
    let base = attrs_for_peer(&peer.name, ads, route.attributes.as_deref())?;
    let subject = export::Subject::new(config, prefix, route);
    Some(export::for_peer(config, peer, &subject, base))
}

//! Several sources at once (`[[source]]`): their snapshots made into the
//! one the routes core takes, each source keeping its own health.
//!
//! [`Merge`] is pure: it holds each source's latest snapshot and answers
//! the combined one. A VIP belongs to the first source, in config order,
//! that has it; its route carries that source's [`SourceId`], and the
//! combined snapshot names the unhealthy sources
//! ([`SourceSnapshot::unhealthy`]), so the stability layer keeps exactly
//! the routes of an unhealthy source as they were and goes on following
//! the healthy ones: an API server away never touches the VIP file's
//! routes, and a broken VIP file never touches the Services'. [`follow`]
//! is the thin driver: a task that merges the sources' watch channels.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use tokio::sync::watch;

use crate::model::{Route, SourceId, SourceSnapshot, SourceState, Vip, VipMap};

/// The sources' latest snapshots, and the combined one.
#[derive(Debug)]
pub struct Merge {
    /// Each source's name and kind, in config order.
    names: Vec<(String, &'static str)>,
    /// Each source's latest snapshot (`None` before its first).
    latest: Vec<Option<SourceSnapshot>>,
    /// The routes of sources other than the first, re-tagged with their
    /// source, by the address of the route the source gave (which the entry
    /// holds, so the address is not reused while the entry lives). Kept
    /// from one merge to the next: a source's unchanged routes are the
    /// same allocations snapshot after snapshot, so a merge re-tags only
    /// what changed.
    tagged: HashMap<usize, (Route, Route)>,
}

impl Merge {
    /// For the sources `names` (name, kind), in config order.
    pub fn new(names: Vec<(String, &'static str)>) -> Merge {
        let latest = vec![None; names.len()];
        Merge {
            names,
            latest,
            tagged: HashMap::new(),
        }
    }

    /// Takes source `id`'s new snapshot; answers the combined snapshot, or
    /// `None` while a source has sent none yet (nothing is passed on before
    /// every source has spoken: the routes core must not take one source's
    /// view for all).
    pub fn set(&mut self, id: SourceId, snap: SourceSnapshot) -> Option<SourceSnapshot> {
        *self.latest.get_mut(usize::from(id.0))? = Some(snap);
        if self.latest.iter().any(Option::is_none) {
            return None;
        }
        Some(self.combined())
    }

    fn combined(&mut self) -> SourceSnapshot {
        let latest: Vec<&SourceSnapshot> = self.latest.iter().flatten().collect();
        let mut vips: BTreeMap<std::net::IpAddr, Vip> = BTreeMap::new();
        let mut tagged = HashMap::with_capacity(self.tagged.len());
        let mut out = SourceSnapshot {
            healthy: true,
            synced: true,
            ..SourceSnapshot::default()
        };
        let mut absences = BTreeMap::new();
        let mut excluded: BTreeMap<std::net::IpAddr, Vec<String>> = BTreeMap::new();
        let mut errors = Vec::new();
        let mut sources = Vec::with_capacity(latest.len());
        let several = self
            .names
            .iter()
            .filter(|(_, kind)| *kind != super::runtime::NAME)
            .count()
            > 1;
        // The common case: only the first source has VIPs (the runtime
        // routes and any other source empty). Its map is taken as it is,
        // shared, not rebuilt: with 100k VIPs a rebuild per snapshot would
        // be the load's largest cost.
        let only_first = latest.iter().skip(1).all(|s| s.vips.is_empty());
        if only_first && let Some(first) = latest.first() {
            out.vips = Arc::clone(&first.vips);
        }
        for (i, snap) in latest.iter().enumerate() {
            let id = SourceId(i as u8);
            let (name, kind) = &self.names[i];
            // (Taken whole above when only the first source has VIPs.)
            let each = (!only_first).then(|| snap.vips.iter());
            for (ip, vip) in each.into_iter().flatten() {
                if vips.contains_key(ip) {
                    continue;
                }
                let route = if id == SourceId::default() {
                    vip.route.clone()
                } else {
                    let key = vip.route.as_ptr();
                    let (original, retagged) = self
                        .tagged
                        .remove(&key)
                        .unwrap_or_else(|| (vip.route.clone(), vip.route.clone().from_source(id)));
                    let route = retagged.clone();
                    tagged.insert(key, (original, retagged));
                    route
                };
                vips.insert(*ip, Vip::of(route));
            }
            for (ip, why) in &snap.absences {
                // The strongest reason a source gives (`Absence`'s order).
                absences
                    .entry(*ip)
                    .and_modify(|a| *a = std::cmp::max(*a, *why))
                    .or_insert(*why);
            }
            for (ip, why) in snap.excluded.iter() {
                excluded.entry(*ip).or_default().extend(why.iter().cloned());
            }
            for (prefix, vip) in &snap.prefixes {
                out.prefixes
                    .entry(*prefix)
                    .or_insert_with(|| Vip::of(vip.route.clone().from_source(id)));
            }
            for (prefix, why) in &snap.prefix_absences {
                out.prefix_absences.entry(*prefix).or_insert(*why);
            }
            if !snap.healthy {
                out.healthy = false;
                out.unhealthy.insert(id);
            }
            out.synced &= snap.synced;
            if let Some(e) = &snap.error {
                // Named when there is more than one to tell apart.
                errors.push(if several {
                    format!("{name}: {e}")
                } else {
                    e.clone()
                });
            }
            out.reconcile_repairs += snap.reconcile_repairs;
            sources.push(SourceState {
                name: name.clone(),
                kind,
                healthy: snap.healthy,
                synced: snap.synced,
                error: snap.error.clone(),
                vips: snap.vips.len(),
            });
        }
        self.tagged = tagged;
        if !only_first {
            out.vips = Arc::new(VipMap::from_vec(vips.into_iter().collect()));
        }
        out.absences = absences;
        out.excluded = Arc::new(excluded);
        out.error = (!errors.is_empty()).then(|| errors.join("; "));
        out.sources = Arc::new(sources);
        out
    }
}

/// Starts the merging task: each of `inputs` is one source's channel, in
/// config order; the combined snapshots go to `out` once every source has
/// sent its first. Ends when `out` has no receiver left.
pub fn follow(
    names: Vec<(String, &'static str)>,
    inputs: Vec<watch::Receiver<SourceSnapshot>>,
    out: watch::Sender<SourceSnapshot>,
) {
    tokio::spawn(async move {
        let mut merge = Merge::new(names);
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<SourceId>();
        for (i, input) in inputs.iter().enumerate() {
            let tx = tx.clone();
            let id = SourceId(i as u8);
            let mut input = input.clone();
            // Each new snapshot wakes the merger, which reads the latest
            // itself: a burst merges once or a few times, never queues
            // snapshots.
            tokio::spawn(async move {
                while input.changed().await.is_ok() {
                    if tx.send(id).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        loop {
            tokio::select! {
                () = out.closed() => return,
                id = rx.recv() => {
                    let Some(id) = id else { return };
                    let snap = inputs[usize::from(id.0)].borrow().clone();
                    if let Some(combined) = merge.set(id, snap) {
                        out.send_if_modified(|current| {
                            if *current == combined {
                                return false;
                            }
                            *current = combined;
                            true
                        });
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Absence, SourceSet};

    fn snap(ips: &[&str], healthy: bool) -> SourceSnapshot {
        let vips = ips
            .iter()
            .map(|ip| (ip.parse().unwrap(), Vip::new(Default::default())))
            .collect();
        SourceSnapshot {
            vips: Arc::new(VipMap::from_vec(vips)),
            healthy,
            synced: true,
            error: (!healthy).then(|| "away".to_string()),
            ..SourceSnapshot::default()
        }
    }

    fn two() -> Merge {
        Merge::new(vec![
            ("apiserver".into(), "file"),
            ("kubernetes".into(), "kubernetes"),
        ])
    }

    #[test]
    fn nothing_is_passed_on_before_every_source_has_spoken() {
        let mut m = two();
        assert_eq!(m.set(SourceId(1), snap(&["192.0.2.2"], true)), None);
        let out = m.set(SourceId(0), snap(&["192.0.2.1"], true)).unwrap();
        assert_eq!(out.vips.len(), 2);
        assert!(out.healthy && out.synced);
        assert_eq!(out.unhealthy_sources(), SourceSet::NONE);
    }

    #[test]
    fn a_vip_belongs_to_the_first_source_that_has_it() {
        let mut m = two();
        m.set(SourceId(0), snap(&["192.0.2.1"], true));
        let out = m
            .set(SourceId(1), snap(&["192.0.2.1", "192.0.2.2"], true))
            .unwrap();
        let source = |ip: &str| out.vips.get(&ip.parse().unwrap()).unwrap().route.source;
        assert_eq!(source("192.0.2.1"), SourceId(0));
        assert_eq!(source("192.0.2.2"), SourceId(1));
        // The file drops it: it is the Kubernetes source's now.
        let out = m.set(SourceId(0), snap(&[], true)).unwrap();
        let route = &out.vips.get(&"192.0.2.1".parse().unwrap()).unwrap().route;
        assert_eq!(route.source, SourceId(1));
    }

    #[test]
    fn the_unhealthy_source_is_named_and_its_error_carries_its_name() {
        let mut m = two();
        m.set(SourceId(0), snap(&["192.0.2.1"], true));
        let out = m.set(SourceId(1), snap(&[], false)).unwrap();
        assert!(!out.healthy);
        let mut kube = SourceSet::NONE;
        kube.insert(SourceId(1));
        assert_eq!(out.unhealthy_sources(), kube);
        assert_eq!(out.error.as_deref(), Some("kubernetes: away"));
        assert_eq!(out.sources[0].name, "apiserver");
        assert!(out.sources[0].healthy && !out.sources[1].healthy);
    }

    #[test]
    fn a_second_sources_routes_are_tagged_once_and_kept_across_merges() {
        let mut m = two();
        m.set(SourceId(0), snap(&[], true));
        let kube = snap(&["192.0.2.2"], true);
        let a = m.set(SourceId(1), kube.clone()).unwrap();
        let b = m.set(SourceId(1), kube).unwrap();
        let route = |s: &SourceSnapshot| {
            s.vips
                .get(&"192.0.2.2".parse().unwrap())
                .unwrap()
                .route
                .clone()
        };
        assert!(route(&a).ptr_eq(&route(&b)), "the tagged route is reused");
        assert_eq!(m.tagged.len(), 1);
        // Gone from the source: gone from the cache.
        m.set(SourceId(1), snap(&[], true));
        assert!(m.tagged.is_empty());
    }

    #[test]
    fn the_first_sources_map_is_shared_while_the_others_are_empty() {
        let mut m = two();
        let file = snap(&["192.0.2.1", "192.0.2.2"], true);
        m.set(SourceId(1), snap(&[], true));
        let out = m.set(SourceId(0), file.clone()).unwrap();
        assert!(Arc::ptr_eq(&out.vips, &file.vips));
        // Once the other has one, the map is built.
        let out = m.set(SourceId(1), snap(&["192.0.2.3"], true)).unwrap();
        assert_eq!(out.vips.len(), 3);
    }

    #[test]
    fn absences_keep_the_strongest_reason() {
        let mut m = two();
        let mut a = snap(&[], true);
        a.absences
            .insert("192.0.2.9".parse().unwrap(), Absence::Vanished);
        let mut b = snap(&[], true);
        b.absences
            .insert("192.0.2.9".parse().unwrap(), Absence::Deleted);
        m.set(SourceId(0), a);
        let out = m.set(SourceId(1), b).unwrap();
        assert_eq!(
            out.absences.get(&"192.0.2.9".parse().unwrap()),
            Some(&Absence::Deleted)
        );
    }
}

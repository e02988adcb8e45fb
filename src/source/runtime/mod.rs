//! Runtime routes: node-local prefixes an operator announces and withdraws
//! through the daemon's authenticated API (`holdfast route announce`,
//! `withdraw`, `list`), neither Services nor a file. They are one more
//! source, always the last (named `runtime`), merged with the config's
//! (`source::merge`), and kept across restarts in the state directory
//! ([`FILE_NAME`]).
//!
//! [`RuntimeRoutes`] is pure: the requests in, checked against the config
//! in force (the advertisement exists, the prefix is within its
//! `vip_ranges`, each attribute is one its `allow_service_attributes`
//! lets through — as a Service's annotation would be), the snapshot and the
//! file's text out. Writing the file is the daemon's (off its loop).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use crate::config::Config;
use crate::model::attributes::{ServiceAttribute, ServiceAttributes};
use crate::model::{Route, SourceId, SourceSnapshot, Vip, VipMap};
use crate::report::status::RuntimeRoute;

/// The file in the state directory that keeps them.
pub const FILE_NAME: &str = "runtime-routes.json";

/// Runtime routes at most: the API is for a few node-local prefixes, and
/// the bound keeps the file and the table small whatever a client sends.
pub const MAX_ROUTES: usize = 4096;

/// The runtime routes, by prefix.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeRoutes {
    routes: BTreeMap<IpNet, RuntimeRoute>,
}

/// The name this source has in status and `explain`.
pub const NAME: &str = crate::model::RUNTIME_SOURCE;

impl RuntimeRoutes {
    /// The routes a file kept, as its text; the first problem if it is not
    /// one this holdfast wrote.
    pub fn from_json(text: &str) -> Result<RuntimeRoutes, String> {
        let list: Vec<RuntimeRoute> =
            serde_json::from_str(text).map_err(|e| format!("not a list of runtime routes: {e}"))?;
        let mut routes = BTreeMap::new();
        for r in list {
            let prefix = parse_prefix(&r.prefix)?;
            routes.insert(
                prefix,
                RuntimeRoute {
                    prefix: prefix.to_string(),
                    ..r
                },
            );
        }
        Ok(RuntimeRoutes { routes })
    }

    /// The text of the file that keeps them.
    pub fn to_json(&self) -> String {
        let list: Vec<&RuntimeRoute> = self.routes.values().collect();
        serde_json::to_string_pretty(&list).unwrap_or_else(|_| "[]".into()) + "\n"
    }

    /// The routes, in prefix order.
    pub fn list(&self) -> Vec<RuntimeRoute> {
        self.routes.values().cloned().collect()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    /// Announces `route` (replacing the one of its prefix), once
    /// [`check`] accepts it under `config`.
    pub fn announce(&mut self, config: &Config, route: RuntimeRoute) -> Result<(), String> {
        let prefix = parse_prefix(&route.prefix)?;
        let route = RuntimeRoute {
            prefix: prefix.to_string(),
            ..route
        };
        check(config, prefix, &route)?;
        if !self.routes.contains_key(&prefix) && self.routes.len() >= MAX_ROUTES {
            return Err(format!(
                "{MAX_ROUTES} runtime routes already: withdraw one first"
            ));
        }
        self.routes.insert(prefix, route);
        Ok(())
    }

    /// Withdraws the route of `prefix`; an error when there is none.
    pub fn withdraw(&mut self, prefix: &str) -> Result<(), String> {
        let prefix = parse_prefix(prefix)?;
        match self.routes.remove(&prefix) {
            Some(_) => Ok(()),
            None => Err(format!("no runtime route for {prefix}")),
        }
    }

    /// The source's snapshot under `config`, as source `id`: host routes
    /// as VIPs, other prefixes as prefixes; a route the config in force
    /// refuses (its advertisement gone after a reload, say) is left out,
    /// with why, for `explain`.
    pub fn snapshot(&self, config: &Config, id: SourceId) -> SourceSnapshot {
        let mut vips = Vec::new();
        let mut snap = SourceSnapshot {
            healthy: true,
            synced: true,
            ..SourceSnapshot::default()
        };
        let mut excluded = BTreeMap::new();
        for (prefix, r) in &self.routes {
            let route = match check(config, *prefix, r) {
                Ok((name, attributes)) => Route::new(
                    Arc::new(std::collections::BTreeSet::from([name])),
                    None,
                    (!attributes.is_empty()).then(|| Arc::new(attributes)),
                )
                .from_source(id),
                Err(why) => {
                    excluded.insert(
                        prefix.addr(),
                        vec![format!(
                            "the runtime route {prefix} is not announced: {why}"
                        )],
                    );
                    continue;
                }
            };
            if prefix.prefix_len() == prefix.max_prefix_len() {
                vips.push((prefix.addr(), Vip::of(route)));
            } else {
                snap.prefixes.insert(*prefix, Vip::of(route));
            }
        }
        snap.vips = Arc::new(VipMap::from_vec(vips));
        snap.excluded = Arc::new(excluded);
        snap
    }
}

/// `198.51.100.10`, `198.51.100.0/24`, `2001:db8::/64`: a prefix in
/// canonical form (host bits must be zero).
fn parse_prefix(text: &str) -> Result<IpNet, String> {
    let prefix = match text.parse::<IpNet>() {
        Ok(p) => p,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(ip) => IpNet::from(ip),
            Err(_) => {
                return Err(format!(
                    "\"{text}\" is not a prefix (198.51.100.0/24, 2001:db8::/64) or an address"
                ));
            }
        },
    };
    if prefix.trunc() != prefix {
        return Err(format!(
            "{text} has host bits set: did you mean {}?",
            prefix.trunc()
        ));
    }
    Ok(prefix)
}

/// Whether `config` lets `route` be announced: its advertisement (the
/// first one when it names none), and the attributes it asks for.
fn check(
    config: &Config,
    prefix: IpNet,
    route: &RuntimeRoute,
) -> Result<(String, ServiceAttributes), String> {
    let advertisement = match &route.advertisement {
        Some(name) => config
            .advertisements
            .iter()
            .find(|a| a.name == *name)
            .ok_or_else(|| format!("no [[advertisement]] is named \"{name}\""))?,
        None => config
            .advertisements
            .first()
            .ok_or("the config has no advertisement")?,
    };
    if !advertisement.allows_prefix(&prefix) {
        return Err(format!(
            "{prefix} is not within the vip_ranges of advertisement \"{}\"",
            advertisement.name
        ));
    }
    // Each value read by the attribute table's own parser, as a Service's
    // annotation of it would be (bounds, community names, lists).
    let joined = |list: &[String]| (!list.is_empty()).then(|| list.join(","));
    let asked = [
        (ServiceAttribute::Communities, joined(&route.communities)),
        (
            ServiceAttribute::LargeCommunities,
            joined(&route.large_communities),
        ),
        (
            ServiceAttribute::LocalPref,
            route.local_pref.map(|v| v.to_string()),
        ),
        (ServiceAttribute::Med, route.med.map(|v| v.to_string())),
        (
            ServiceAttribute::AsPathPrepend,
            route.as_path_prepend.map(|v| v.to_string()),
        ),
    ];
    let mut attributes = ServiceAttributes::default();
    let mut asks = Vec::new();
    for (attribute, text) in asked {
        let (Some(text), Some(annotation)) = (text, attribute.row().annotation.as_ref()) else {
            continue;
        };
        (annotation.parse)(&text, &mut attributes)
            .map_err(|why| format!("{} {text}: {why}", attribute.as_str()))?;
        asks.push(attribute);
    }
    if let Some(refused) = asks.iter().find(|a| !advertisement.allows(**a)) {
        return Err(format!(
            "advertisement \"{}\" does not let {} through: add \"{}\" to its allow_service_attributes",
            advertisement.name,
            refused.as_str(),
            refused.as_str()
        ));
    }
    Ok((advertisement.name.clone(), attributes))
}

pub use crate::report::status::RuntimeChange as Change;

/// One request to the runtime source: a change (or none: the list), and
/// where its answer goes — the routes after it, or why it was refused.
#[derive(Debug)]
pub struct Command {
    pub change: Option<Change>,
    pub reply: tokio::sync::oneshot::Sender<Result<Vec<RuntimeRoute>, String>>,
}

/// Requests waiting for the runtime source at most.
pub const COMMAND_QUEUE: usize = 32;

/// Starts the runtime source: reads what `state_dir` kept, publishes its
/// snapshot on `snapshots` (as source `id`, following `config` through
/// reloads) and serves `commands`. A change is written to the state
/// directory (off the runtime's threads: `spawn_blocking`) before it is
/// published and answered, so an answered announce survives a restart.
/// A kept file that cannot be read is moved aside (`….unreadable`), said
/// in the log, and the source starts empty: nothing of it is lost, and
/// nothing half-read is announced.
pub fn spawn(
    state_dir: std::path::PathBuf,
    mut config: tokio::sync::watch::Receiver<Arc<Config>>,
    id: SourceId,
    snapshots: tokio::sync::watch::Sender<SourceSnapshot>,
    mut commands: tokio::sync::mpsc::Receiver<Command>,
) {
    let path = state_dir.join(FILE_NAME);
    tokio::spawn(async move {
        let read_path = path.clone();
        let kept = tokio::task::spawn_blocking(move || read_kept(&read_path))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        let mut routes = match kept {
            Ok(r) => r,
            Err(why) => {
                tracing::error!(file = %path.display(), "runtime routes: {why}; starting without them");
                RuntimeRoutes::default()
            }
        };
        if !routes.is_empty() {
            tracing::info!(routes = routes.routes.len(), file = %path.display(), "runtime routes kept from the last run");
        }
        let mut current = Arc::clone(&config.borrow_and_update());
        snapshots.send_replace(routes.snapshot(&current, id));
        loop {
            tokio::select! {
                changed = config.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    current = Arc::clone(&config.borrow_and_update());
                    snapshots.send_replace(routes.snapshot(&current, id));
                }
                command = commands.recv() => {
                    let Some(Command { change, reply }) = command else { return };
                    let Some(change) = change else {
                        let _ = reply.send(Ok(routes.list()));
                        continue;
                    };
                    let mut next = routes.clone();
                    let applied = match &change {
                        Change::Announce(r) => next.announce(&current, r.clone()),
                        Change::Withdraw(p) => next.withdraw(p),
                    };
                    if let Err(why) = applied {
                        let _ = reply.send(Err(why));
                        continue;
                    }
                    let (text, write_path) = (next.to_json(), path.clone());
                    let written = tokio::task::spawn_blocking(move || write_kept(&write_path, &text))
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()));
                    if let Err(why) = written {
                        let _ = reply.send(Err(format!(
                            "not changed: it could not be kept in {} ({why})",
                            path.display()
                        )));
                        continue;
                    }
                    match &change {
                        Change::Announce(r) => tracing::info!(prefix = %r.prefix, "runtime route announced"),
                        Change::Withdraw(p) => tracing::info!(prefix = %p, "runtime route withdrawn"),
                    }
                    routes = next;
                    snapshots.send_replace(routes.snapshot(&current, id));
                    let _ = reply.send(Ok(routes.list()));
                }
            }
        }
    });
}

/// Largest kept file read: far above [`MAX_ROUTES`] routes' worth.
const MAX_FILE_LEN: u64 = 4 << 20;

/// The routes `path` keeps; none when it does not exist. A file that
/// cannot be read as runtime routes is moved aside.
fn read_kept(path: &std::path::Path) -> Result<RuntimeRoutes, String> {
    use std::io::Read;
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RuntimeRoutes::default()),
        Err(e) => return Err(format!("cannot open {}: {e}", path.display())),
    };
    let mut text = String::new();
    let read = file
        .take(MAX_FILE_LEN + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())
        .and_then(|n| {
            if n as u64 > MAX_FILE_LEN {
                Err(format!("longer than {MAX_FILE_LEN} bytes"))
            } else {
                RuntimeRoutes::from_json(&text)
            }
        });
    read.map_err(|why| {
        let aside = path.with_extension("json.unreadable");
        match std::fs::rename(path, &aside) {
            Ok(()) => format!(
                "{} cannot be read ({why}): moved to {}",
                path.display(),
                aside.display()
            ),
            Err(e) => format!(
                "{} cannot be read ({why}) nor moved aside ({e})",
                path.display()
            ),
        }
    })
}

/// Writes `text` to `path` whole or not at all: a new file, synced, then
/// renamed over the old one, and the directory synced.
fn write_kept(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    let tmp = path.with_extension("json.new");
    let mut f = std::fs::File::create(&tmp).map_err(|e| e.to_string())?;
    f.write_all(text.as_bytes()).map_err(|e| e.to_string())?;
    f.sync_all().map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, path).map_err(|e| e.to_string())?;
    if let Some(dir) = path.parent()
        && let Ok(d) = std::fs::File::open(dir)
    {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests;

//! `[source]`: where the desired set of VIPs comes from.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::schema::{DefaultValue, Key, Range, Section, duration, list};
use super::selector::{dns_label_problem, label_key_problem};
use super::tree::{self, Table};

/// The LoadBalancer class holdfast answers to by default.
pub const DEFAULT_LOAD_BALANCER_CLASS: &str = "holdfast.dev/bgp";

/// `[source]`.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// `kind = "file"`: a VIP file, re-read when it changes.
    File {
        /// The VIP file; relative paths resolved against the config file's
        /// directory.
        path: PathBuf,
    },
    /// `kind = "kubernetes"`: Services from the API server.
    Kubernetes(KubernetesSource),
}

/// One source of VIPs: the `[source]` table, or one of `[[source]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceEntry {
    /// `name`, by default its kind (`"file"`, `"kubernetes"`): how status,
    /// `explain` and the logs name it.
    pub name: String,
    /// What it is and its settings.
    pub kind: Source,
}

impl Source {
    /// `"file"` or `"kubernetes"`.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Source::File { .. } => "file",
            Source::Kubernetes(_) => "kubernetes",
        }
    }
}

/// `[source] kind = "kubernetes"`.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesSource {
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Services with `spec.loadBalancerClass` set are handled only if it is
    /// one of these.
    pub load_balancer_classes: Vec<String>,
    /// Also skip Services that have no `loadBalancerClass`.
    pub require_class: bool,
}

/// `[source] resync` by default.
pub const DEFAULT_RESYNC: Duration = Duration::from_secs(300);

/// `[source] resync`: a duration, "0s" for never, else at least 1s.
pub(crate) fn parse_resync(table: &Table<'_, '_>, d: &mut Diagnostics) -> Option<Duration> {
    match table.get("resync") {
        None => Some(DEFAULT_RESYNC),
        Some(v) => tree::duration_checked(v, "resync", d, |t| {
            if !t.is_zero() && t < MIN_RESYNC {
                return Err(format!(
                    "resync must be \"0s\" (off) or at least {}, got {}",
                    super::format_duration(MIN_RESYNC),
                    super::format_duration(t)
                ));
            }
            Ok(())
        }),
    }
}

/// `require_class` when left out.
pub const DEFAULT_REQUIRE_CLASS: bool = false;

/// The shortest `resync` other than 0s (off).
pub const MIN_RESYNC: Duration = Duration::from_secs(1);

pub(crate) const KEYS: &[Key] = &[
    Key {
        name: "kind",
        kind: "string",
        default: DefaultValue::Required,
        range: Range::Text(|| "\"kubernetes\" or \"file\"".to_string()),
        meaning: "`\"kubernetes\"`: Services from the API server; `\"file\"`: a VIP file. At most one source of each kind. A reload cannot switch it: a changed `kind` (or a source added, removed or renamed) refuses the reload whole (`the sources changed from [file] to [kubernetes]: a reload cannot switch sources; restart holdfast to run with the new ones`); restart holdfast to change sources.",
    },
    Key {
        name: "name",
        kind: "string",
        default: DefaultValue::Text("the kind: `\"file\"` or `\"kubernetes\"`"),
        range: Range::Text(|| {
            "a DNS label (lower-case letters, digits, `-`), unique among the sources".to_string()
        }),
        meaning: "How status, `explain` and the logs name this source and its VIPs.",
    },
    Key {
        name: "resync",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_RESYNC)),
        range: Range::Text(|| format!("\"0s\" (off) or at least {}", duration(MIN_RESYNC))),
        meaning: "Periodic reconcile: this often the desired set is rebuilt from the source and every peer's Adj-RIB-Out compared with it; what differs is repaired, logged once and counted in `holdfast_reconcile_repairs_total`. With several sources one reconcile serves them all, at the shortest `resync` of theirs other than `\"0s\"` (off only when every one says `\"0s\"`).",
    },
    Key {
        name: "path",
        kind: "path",
        default: DefaultValue::Text("required with `kind = \"file\"`"),
        range: Range::Any,
        meaning: "The VIP file (its format is in the `[[vip]]` section). An error with `kind = \"kubernetes\"`.",
    },
    Key {
        name: "namespaces",
        kind: "array of strings",
        default: DefaultValue::Text("`[]` (all)"),
        range: Range::Any,
        meaning: "`kubernetes` only: namespaces to watch.",
    },
    Key {
        name: "load_balancer_classes",
        kind: "array of strings",
        default: DefaultValue::Value(|| list([DEFAULT_LOAD_BALANCER_CLASS])),
        range: Range::Any,
        meaning: "`kubernetes` only: a Service with `spec.loadBalancerClass` set is handled only if the class is listed.",
    },
    Key {
        name: "require_class",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_REQUIRE_CLASS.to_string()),
        range: Range::Any,
        meaning: "`kubernetes` only: also skip Services without a `loadBalancerClass`. With an empty `load_balancer_classes` this is an error (nothing could match).",
    },
];

/// The reference's section for these keys.
pub(crate) const SECTION: Section = Section {
    title: "`[source]` or `[[source]]` (required)",
    intro: "Where the VIPs come from: one `[source]` table, or several `[[source]]` tables (at most one of each kind), each with its own health. The VIPs of a source that is unhealthy (an API server away, a VIP file that does not parse) stay as they were, whatever the other sources do; each VIP belongs to the first source, in file order, that has it.",
    keys: KEYS,
};
const KUBERNETES_ONLY: &[&str] = &["namespaces", "load_balancer_classes", "require_class"];

#[derive(Clone, Copy)]
enum Kind {
    File,
    Kubernetes,
}

/// `[source]` or `[[source]]`: the sources and the resync in force.
pub(crate) fn parse_sources(
    value: &tree::Value<'_>,
    config_dir: &Path,
    d: &mut Diagnostics,
) -> (Option<Vec<SourceEntry>>, Option<Duration>) {
    let items: Vec<(Option<Table<'_, '_>>, String)> = match value.get_ref() {
        toml::de::DeValue::Table(_) => {
            vec![(
                Table::from_value(value, "source", "[source]".to_string(), d),
                "[source]".to_string(),
            )]
        }
        _ => match tree::array(value, "source", d) {
            Some([]) => {
                d.error(
                    &value.span(),
                    "source is empty: at least one [[source]] is required",
                );
                return (None, None);
            }
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    let what = format!("[[source]] #{}", i + 1);
                    (Table::from_value(item, "source", what.clone(), d), what)
                })
                .collect(),
            None => return (None, None),
        },
    };
    let mut sources = Vec::with_capacity(items.len());
    let mut resyncs = Vec::with_capacity(items.len());
    let mut ok = true;
    for (table, what) in &items {
        let Some(table) = table else {
            ok = false;
            continue;
        };
        resyncs.push(parse_resync(table, d));
        let name = match table.get("name") {
            None => None,
            Some(v) => match tree::string(v, "name", d) {
                Some(text) => match dns_label_problem(text) {
                    Some(why) => {
                        d.error(&v.span(), format!("source name \"{text}\" {why}"));
                        ok = false;
                        None
                    }
                    None => Some((text.to_string(), v.span())),
                },
                None => {
                    ok = false;
                    None
                }
            },
        };
        let Some(kind) = parse_source(table, config_dir, d) else {
            ok = false;
            continue;
        };
        let kind_span = table.get("kind").map(|v| v.span()).unwrap_or(0..0);
        if let Some(first) = sources
            .iter()
            .find(|s: &&SourceEntry| s.kind.kind_name() == kind.kind_name())
        {
            d.error(
                &kind_span,
                format!(
                    "a second kind = \"{}\" source in {what}: at most one source of each kind (the first is \"{}\")",
                    kind.kind_name(),
                    first.name
                ),
            );
            ok = false;
            continue;
        }
        let (name, name_span) = name.unwrap_or_else(|| (kind.kind_name().to_string(), kind_span));
        if sources.iter().any(|s: &SourceEntry| s.name == name) {
            d.error(
                &name_span,
                format!("source name \"{name}\" is used twice: each source needs its own"),
            );
            ok = false;
            continue;
        }
        sources.push(SourceEntry { name, kind });
    }
    let resync = resyncs
        .into_iter()
        .collect::<Option<Vec<Duration>>>()
        .map(|all| {
            all.iter()
                .copied()
                .filter(|r| !r.is_zero())
                .min()
                .unwrap_or(Duration::ZERO)
        });
    (ok.then_some(sources), resync)
}

pub(crate) fn parse_source(
    table: &Table<'_, '_>,
    config_dir: &Path,
    d: &mut Diagnostics,
) -> Option<Source> {
    table.reject_unknown_keys(KEYS, d);
    let kind = table.required("kind", d).and_then(|v| {
        tree::keyword(
            v,
            "kind",
            "unknown source kind",
            &[("file", Kind::File), ("kubernetes", Kind::Kubernetes)],
            d,
        )
    })?;
    match kind {
        Kind::File => {
            for key in KUBERNETES_ONLY {
                if let Some((k, _)) = table.entries().find(|(k, _)| k.get_ref() == key) {
                    d.error(
                        &k.span(),
                        format!("{key} applies only to kind = \"kubernetes\""),
                    );
                }
            }
            let path = table.required("path", d).and_then(|v| {
                let text = tree::string(v, "path", d)?;
                if text.is_empty() {
                    d.error(&v.span(), "path is empty; give the VIP file's path");
                    return None;
                }
                Some(config_dir.join(text))
            })?;
            Some(Source::File { path })
        }
        Kind::Kubernetes => {
            if let Some((k, _)) = table.entries().find(|(k, _)| k.get_ref() == "path") {
                d.error(
                    &k.span(),
                    "path applies only to kind = \"file\"; the kubernetes source reads Services from the API server",
                );
            }
            let namespaces = match table.get("namespaces") {
                None => Some(Vec::new()),
                Some(v) => tree::unique_list(
                    v,
                    "namespaces",
                    d,
                    |item, d| {
                        let text = tree::string(item, "each of namespaces", d)?;
                        if let Some(why) = dns_label_problem(text) {
                            d.error(&item.span(), format!("namespace \"{text}\" {why}"));
                            return None;
                        }
                        Some(text.to_string())
                    },
                    |n| format!("\"{n}\""),
                ),
            };
            let classes_value = table.get("load_balancer_classes");
            let load_balancer_classes = match classes_value {
                None => Some(vec![DEFAULT_LOAD_BALANCER_CLASS.to_string()]),
                Some(v) => tree::unique_list(
                    v,
                    "load_balancer_classes",
                    d,
                    |item, d| {
                        let text = tree::string(item, "each of load_balancer_classes", d)?;
                        // Kubernetes requires a label-style name ("example.com/lb").
                        if let Some(why) = label_key_problem(text) {
                            d.error(
                                &item.span(),
                                format!("load balancer class \"{text}\" is invalid: {why}"),
                            );
                            return None;
                        }
                        Some(text.to_string())
                    },
                    |n| format!("\"{n}\""),
                ),
            };
            let require_class = match table.get("require_class") {
                None => Some(DEFAULT_REQUIRE_CLASS),
                Some(v) => tree::boolean(v, "require_class", d),
            };
            if let (Some(classes), Some(true), Some(v)) =
                (&load_balancer_classes, require_class, classes_value)
                && classes.is_empty()
            {
                d.error(
                    &v.span(),
                    "load_balancer_classes is empty while require_class = true, so no Service would ever be selected",
                );
                return None;
            }
            Some(Source::Kubernetes(KubernetesSource {
                namespaces: namespaces?,
                load_balancer_classes: load_balancer_classes?,
                require_class: require_class?,
            }))
        }
    }
}

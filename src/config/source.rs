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

/// `[source]` with `kind = "kubernetes"`.
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
        meaning: "`\"kubernetes\"`: Services from the API server; `\"file\"`: a VIP file. A reload cannot switch it: a changed `kind` refuses the reload whole (`source.kind changed from \"file\" to \"kubernetes\": a reload cannot switch sources; restart holdfast to run with the new one`); restart holdfast to change sources.",
    },
    Key {
        name: "resync",
        kind: "duration",
        default: DefaultValue::Value(|| duration(DEFAULT_RESYNC)),
        range: Range::Text(|| format!("\"0s\" (off) or at least {}", duration(MIN_RESYNC))),
        meaning: "Periodic reconcile: this often the desired set is rebuilt from the source and every peer's Adj-RIB-Out compared with it; what differs is repaired, logged once and counted in `holdfast_reconcile_repairs_total`.",
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
    title: "`[source]` (required)",
    intro: "",
    keys: KEYS,
};
const KUBERNETES_ONLY: &[&str] = &["namespaces", "load_balancer_classes", "require_class"];

#[derive(Clone, Copy)]
enum Kind {
    File,
    Kubernetes,
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

//! The configuration layer: one TOML file per rack, checked as a whole.
//!
//! Reading never stops at the first problem. Every syntax error, type
//! error, unknown key, missing key, invalid value and cross-check failure
//! becomes one [`Diagnostic`] (`PATH:LINE:COL: message`), so a single
//! `holdfast check` run lists everything to fix.
//!
//! The tree comes from the toml crate's span-keeping parser (`DeTable`);
//! each section module reads its table with the helpers in `tree` and
//! returns `None` when it found a problem (already recorded).

pub(crate) mod advertisement;
mod bmp;
pub(crate) mod diagnostic;
mod duration;
pub mod export;
pub mod http_probe;
mod node_override;
mod peer;
pub mod read;
pub mod schema;
mod selector;
mod source;
mod speaker;
mod stability;
mod tenant;
pub(crate) mod tree;
pub(crate) mod vip_range;
mod warnings;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

use toml::de::DeTable;

pub use crate::model::community::{
    ExtendedCommunity, ExtendedCommunityKind, WELL_KNOWN_COMMUNITIES, format_community,
    parse_community, parse_extended_community, parse_large_community,
};
pub use advertisement::{
    AddressKind, Advertisement, DEFAULT_ADDRESSES, DEFAULT_ADVERTISEMENT, Degraded, LinkBandwidth,
    NAMESPACE_NAME_LABEL, OnFailure, Probe, ProbeTarget, ServiceAttribute,
};
pub use bmp::{BmpStation, DEFAULT_BMP_PORT, DEFAULT_QUEUE_LIMIT, DEFAULT_STATS_INTERVAL};
pub use diagnostic::{Diagnostic, MAX_LISTED, Severity, list as list_diagnostics};
pub use duration::{format_duration, parse_duration};
pub use export::{ExportAction, ExportMatch, ExportPolicy, ExportRule, ExportSet, PrefixRange};
pub use http_probe::{HttpUrl, UrlHost};
pub use node_override::{
    AppliedOverride, NodeMatch, NodeOverride, PeerOverride, derived_router_id, resolve,
};
pub use peer::{
    AddressFamily, Bfd, BfdAuthentication, BfdKey, DEFAULT_CONNECT_RETRY, DEFAULT_HOLD_TIME,
    DEFAULT_PORT, Family, GracefulRestart, IfName, MD5_KEY_MAX_LEN, Md5Key, Peer, PeerAddress,
    PeerAsn, PeerPassword,
};
pub use read::{
    FileProblem, MAX_CONFIG_LEN, MAX_PASSWORD_FILE_LEN, MAX_VIP_FILE_LEN, read_regular_file,
};
pub use selector::{LabelSelector, LabelSelectorRequirement, SelectorMismatch, SelectorOperator};
pub use source::{DEFAULT_LOAD_BALANCER_CLASS, KubernetesSource, Source, SourceEntry};
pub use speaker::{
    ApiToken, BearerToken, DEFAULT_API, MAX_API_TOKEN_FILE_LEN, MIN_API_TOKEN_LEN, NodeName,
    NodeNameFrom, RouterId, Speaker, node_name, read_token_file,
};
pub use stability::{Damping, Stability};
pub use tenant::Tenant;
pub use vip_range::{VipFileAdvertisement, VipRange, format_ranges, in_ranges, parse_vip_range};
pub use warnings::{PROBED_API, SHIPPED_GRACE_PERIOD};

use advertisement::{AdvertisementRegistry, parse_advertisement};
use diagnostic::Diagnostics;
pub(crate) use peer::name_problem;
use peer::{PeerContext, PeerRegistry, parse_peer};
use tree::Table;

/// A complete, checked configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it was read from (as given).
    pub path: PathBuf,
    /// `[speaker]`.
    pub speaker: Speaker,
    /// `[[peer]]`, in file order; at least one.
    pub peers: Vec<Peer>,
    /// `[source]`, or each `[[source]]` in file order: at least one, at
    /// most one of each kind.
    pub sources: Vec<SourceEntry>,
    /// `[source] resync`: how often the desired set is rebuilt from the
    /// sources and every Adj-RIB-Out checked against it; zero: never.
    /// With several sources, the shortest of theirs other than zero.
    pub resync: std::time::Duration,
    /// `[stability]` (all defaults when absent).
    pub stability: Stability,
    /// `[[advertisement]]`, in file order; when the file has none, the one
    /// implicit [`DEFAULT_ADVERTISEMENT`].
    pub advertisements: Vec<Advertisement>,
    /// `[[node_override]]`, in file order.
    pub node_overrides: Vec<NodeOverride>,
    /// `[[tenant]]`, in file order.
    pub tenants: Vec<Tenant>,
    /// The overrides [`resolve`] applied to make this config (empty in the
    /// config as read from the file).
    pub applied_overrides: Vec<AppliedOverride>,
    /// `[[bmp]]`, in file order: the BMP stations (none: no BMP).
    pub bmp: Vec<BmpStation>,
    /// What the file says that is valid but very likely not meant, each a
    /// [`Severity::Warning`] at its `PATH:LINE:COL`, in file order
    /// (`warnings.rs` says which and why). `check` prints them; `run`
    /// logs them at start and on each reload it applies. They describe the
    /// file, not what runs: two configs that differ only in their warnings
    /// (a comment moved a line) are equal.
    pub warnings: Vec<Diagnostic>,
}

impl PartialEq for Config {
    fn eq(&self, other: &Self) -> bool {
        // Destructured, so a new field cannot be forgotten here.
        let Config {
            path,
            speaker,
            peers,
            sources,
            resync,
            stability,
            advertisements,
            node_overrides,
            tenants,
            applied_overrides,
            bmp,
            warnings: _,
        } = self;
        *path == other.path
            && *speaker == other.speaker
            && *peers == other.peers
            && *sources == other.sources
            && *resync == other.resync
            && *stability == other.stability
            && *advertisements == other.advertisements
            && *node_overrides == other.node_overrides
            && *tenants == other.tenants
            && *applied_overrides == other.applied_overrides
            && *bmp == other.bmp
    }
}

impl Config {
    /// The VIP file, when a source is one.
    pub fn file_source(&self) -> Option<&Path> {
        self.sources.iter().find_map(|s| match &s.kind {
            Source::File { path } => Some(path.as_path()),
            Source::Kubernetes(_) => None,
        })
    }

    /// The Kubernetes source's settings, when a source is one.
    pub fn kubernetes_source(&self) -> Option<&KubernetesSource> {
        self.sources.iter().find_map(|s| match &s.kind {
            Source::Kubernetes(k) => Some(k),
            Source::File { .. } => None,
        })
    }

    /// The name of the source `id` (its index in [`Config::sources`]).
    /// The one after the config's is the runtime routes'.
    pub fn source_name(&self, id: crate::model::SourceId) -> &str {
        match self.sources.get(usize::from(id.0)) {
            Some(s) => s.name.as_str(),
            None if usize::from(id.0) == self.sources.len() => crate::model::RUNTIME_SOURCE,
            None => "?",
        }
    }

    /// Advertisement names in order, as [`parse_vip_file`] wants them.
    pub fn advertisement_names(&self) -> Vec<String> {
        self.advertisements.iter().map(|a| a.name.clone()).collect()
    }

    /// The advertisements in order with their `vip_ranges`, as
    /// [`parse_vip_file`] wants them.
    pub fn vip_file_advertisements(&self) -> Vec<VipFileAdvertisement> {
        self.advertisements
            .iter()
            .map(|a| VipFileAdvertisement {
                name: a.name.clone(),
                vip_ranges: a.vip_ranges.clone(),
            })
            .collect()
    }

    /// The peer called `name`.
    pub fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// The tenant called `name`.
    pub fn tenant(&self, name: &str) -> Option<&Tenant> {
        self.tenants.iter().find(|t| t.name == name)
    }

    /// The tenant whose `namespaces` hold `namespace`.
    pub fn tenant_of_namespace(&self, namespace: &str) -> Option<&Tenant> {
        self.tenants
            .iter()
            .find(|t| t.namespaces.iter().any(|n| n == namespace))
    }

    /// The tenant of a namespace with these labels: the one whose
    /// `namespaces` lists it, else the first whose `namespace_selector`
    /// matches its labels.
    pub fn tenant_of_labelled_namespace(
        &self,
        namespace: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Option<&Tenant> {
        self.tenant_of_namespace(namespace).or_else(|| {
            self.tenants.iter().find(|t| {
                t.namespace_selector
                    .as_ref()
                    .is_some_and(|s| s.matches(labels))
            })
        })
    }

    /// The advertisement called `name`.
    pub fn advertisement(&self, name: &str) -> Option<&Advertisement> {
        self.advertisements.iter().find(|a| a.name == name)
    }
}

/// Reads and checks the config file at `path`, and reads every
/// `password_file` it names (unreadable, empty or over-long keys are
/// diagnostics at the `password_file` value).
pub fn load(path: &Path) -> Result<Config, Vec<Diagnostic>> {
    let text = read_text(path, "config file", MAX_CONFIG_LEN)?;
    parse_with(path, &text, true)
}

/// Checks config text without touching the file system: password files are
/// resolved but not read (`PeerPassword::key` is `None`).
/// `path_for_messages` names the file in diagnostics, and its directory is
/// the base for relative paths.
pub fn parse(path_for_messages: &Path, text: &str) -> Result<Config, Vec<Diagnostic>> {
    parse_with(path_for_messages, text, false)
}

/// Checks config text and, like [`load`], reads every `password_file` it
/// names: for a config that is not in a file (`holdfast check --config -`
/// reads standard input). `path_for_messages` names it in diagnostics, and
/// its directory (none for a bare name such as `<stdin>`: the current
/// directory) is the base for relative paths.
pub fn parse_reading_passwords(
    path_for_messages: &Path,
    text: &str,
) -> Result<Config, Vec<Diagnostic>> {
    parse_with(path_for_messages, text, true)
}

/// Reads a config or VIP file (`what` names it in messages) with
/// [`read_regular_file`]'s rules: a regular file of at most `limit` bytes,
/// never a blocking read; problems are one diagnostic at line 1.
pub fn read_text(path: &Path, what: &str, limit: u64) -> Result<String, Vec<Diagnostic>> {
    let failure = |message: String| {
        vec![Diagnostic {
            path: path.to_path_buf(),
            line: 1,
            col: 1,
            message,
            severity: Severity::Error,
        }]
    };
    let bytes = read_regular_file(path, limit).map_err(|p| failure(p.describe(what, limit)))?;
    String::from_utf8(bytes).map_err(|err| {
        failure(format!(
            "file is not valid UTF-8 (TOML must be UTF-8): invalid byte at offset {}",
            err.utf8_error().valid_up_to()
        ))
    })
}

/// Records the toml parser's syntax errors. Only these are reported when
/// there are any: the recovered tree would yield confusing follow-on errors.
pub(crate) fn syntax_errors(errors: &[toml::de::Error], d: &mut Diagnostics) {
    for error in errors {
        let span = error.span().unwrap_or(0..0);
        let mut message = error.message().trim().replace('\n', "; ");
        // The parser's "duplicate key" does not say which one.
        if message == "duplicate key"
            && let Some(key) = d.snippet(&span).filter(|k| !k.is_empty())
        {
            let key = if key.starts_with(['"', '\'']) {
                key.to_string()
            } else {
                format!("\"{key}\"")
            };
            message = format!("duplicate key {key} (a key may appear only once per table)");
        }
        d.error(&span, format!("TOML syntax error: {message}"));
    }
}

/// The tables of a config file.
const TOP_LEVEL_KEYS: &[schema::Key] = &[
    schema::Key {
        name: "speaker",
        kind: "table",
        default: schema::DefaultValue::Required,
        range: schema::Range::Any,
        meaning: "This node as a BGP speaker: AS, router ID, API and drain behaviour.",
    },
    schema::Key {
        name: "peer",
        kind: "array of tables",
        default: schema::DefaultValue::Required,
        range: schema::Range::Any,
        meaning: "The routers, one `[[peer]]` each; at least one.",
    },
    schema::Key {
        name: "source",
        kind: "table",
        default: schema::DefaultValue::Required,
        range: schema::Range::Any,
        meaning: "Where the VIPs come from: Kubernetes Services or a VIP file.",
    },
    schema::Key {
        name: "stability",
        kind: "table",
        default: schema::DefaultValue::Text("every key at its default"),
        range: schema::Range::Any,
        meaning: "Hold-down, delays, damping and the mass-withdrawal guard.",
    },
    schema::Key {
        name: "advertisement",
        kind: "array of tables",
        default: schema::DefaultValue::Text("one implicit advertisement, `\"default\"`"),
        range: schema::Range::Any,
        meaning: "Which addresses go to which peers with which attributes.",
    },
    schema::Key {
        name: "node_override",
        kind: "array of tables",
        default: schema::DefaultValue::Text("none"),
        range: schema::Range::Any,
        meaning: "Per-node changes to a file that serves a whole rack.",
    },
    schema::Key {
        name: "bmp",
        kind: "array of tables",
        default: schema::DefaultValue::Text("none (no BMP)"),
        range: schema::Range::Any,
        meaning: "BMP monitoring stations (RFC 7854, RFC 8671), one `[[bmp]]` each.",
    },
    schema::Key {
        name: "tenant",
        kind: "array of tables",
        default: schema::DefaultValue::Text("none"),
        range: schema::Range::Any,
        meaning: "Tenants: the namespaces of each and the peers its VIPs may reach.",
    },
];

fn parse_with(path: &Path, text: &str, read_passwords: bool) -> Result<Config, Vec<Diagnostic>> {
    let mut d = Diagnostics::new(path, text);
    let (root, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        syntax_errors(&errors, &mut d);
        return Err(d.into_sorted());
    }
    let root = Table::root(root.get_ref());
    root.reject_unknown_keys(TOP_LEVEL_KEYS, &mut d);
    let config_dir = path.parent().unwrap_or(Path::new(""));

    let section = |key: &str, d: &mut Diagnostics| {
        root.get(key)
            .and_then(|v| Table::from_value(v, key, format!("[{key}]"), d))
    };

    let speaker_table = section("speaker", &mut d);
    let speaker = match &speaker_table {
        Some(table) => speaker::parse_speaker(table, config_dir, read_passwords, &mut d),
        None => {
            if !root.contains("speaker") {
                d.error(
                    &(0..0),
                    "missing required table [speaker] (with at least asn)",
                );
            }
            None
        }
    };

    let cx = PeerContext {
        speaker_listens: speaker_table.as_ref().is_some_and(|t| t.contains("listen")),
        config_dir,
        read_passwords,
    };
    let mut peer_registry = PeerRegistry::default();
    let peers = match root.get("peer") {
        None => {
            d.error(&(0..0), "missing [[peer]]: at least one peer is required");
            None
        }
        Some(list) => tree::array_of_tables(list, "peer", &mut d).and_then(|items| {
            if items.is_empty() {
                d.error(
                    &list.span(),
                    "peer is empty: at least one [[peer]] is required",
                );
                return None;
            }
            let mut peers = Vec::with_capacity(items.len());
            let mut ok = true;
            for item in items {
                match parse_peer(item, &cx, &mut peer_registry, &mut d) {
                    Some(peer) => peers.push(peer),
                    None => ok = false,
                }
            }
            ok.then_some(peers)
        }),
    };

    let (sources, resync) = match root.get("source") {
        Some(value) => source::parse_sources(value, config_dir, &mut d),
        None => {
            d.error(
                &(0..0),
                "missing required table [source] (kind = \"kubernetes\" or kind = \"file\")",
            );
            (None, None)
        }
    };

    let stability = match root.get("stability") {
        None => Some(Stability::default()),
        Some(_) => section("stability", &mut d)
            .and_then(|table| stability::parse_stability(&table, &mut d)),
    };

    let peer_names = peer_registry.names();
    let mut advertisement_registry = AdvertisementRegistry::default();
    let advertisements = match root.get("advertisement") {
        None => Some(vec![Advertisement::implicit_default()]),
        Some(list) => tree::array_of_tables(list, "advertisement", &mut d).map(|items| {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                if let Some(adv) = parse_advertisement(
                    item,
                    &peer_names,
                    config_dir,
                    &mut advertisement_registry,
                    &mut d,
                ) {
                    out.push(adv);
                }
            }
            if items.is_empty() {
                out.push(Advertisement::implicit_default());
            }
            out
        }),
    };

    let node_overrides = match root.get("node_override") {
        None => Some(Vec::new()),
        Some(list) => {
            node_override::parse_node_overrides(list, peers.as_deref(), &peer_names, &mut d)
        }
    };

    let bmp = match root.get("bmp") {
        None => Some(Vec::new()),
        Some(list) => bmp::parse_bmp(list, &mut d),
    };

    let (tenants, tenant_names) = match root.get("tenant") {
        None => (Some(Vec::new()), Vec::new()),
        Some(list) => tenant::parse_tenants(list, &peer_names, &mut d),
    };

    export_names(
        &peer_registry,
        speaker.as_ref(),
        peers.as_deref(),
        sources.as_deref(),
        advertisements.as_deref(),
        &tenant_names,
        &mut d,
    );

    match (
        speaker,
        peers,
        sources,
        stability,
        advertisements,
        resync,
        node_overrides,
        bmp,
        tenants,
    ) {
        (
            Some(speaker),
            Some(peers),
            Some(sources),
            Some(stability),
            Some(advertisements),
            Some(resync),
            Some(node_overrides),
            Some(bmp),
            Some(tenants),
        ) if d.is_empty() => {
            let mut config = Config {
                path: path.to_path_buf(),
                speaker,
                peers,
                sources,
                resync,
                stability,
                advertisements,
                node_overrides,
                tenants,
                applied_overrides: Vec::new(),
                bmp,
                warnings: Vec::new(),
            };
            // Looked for once the file is valid: most need the whole
            // config (the peers an advertisement reaches, the source).
            warnings::find(&config, &root, &mut d);
            if read_passwords {
                warnings::ca_files(&config, &root, &mut d);
            }
            config.warnings = d.into_sorted();
            Ok(config)
        }
        _ => Err(d.into_sorted()),
    }
}

/// The names `[[peer.export]]` rules use, checked against the file's
/// advertisements, tenants and sources; and a rule setting LOCAL_PREF on
/// an eBGP peer, where RFC 4271 §5.1.5 keeps LOCAL_PREF off the wire.
fn export_names(
    registry: &PeerRegistry,
    speaker: Option<&Speaker>,
    peers: Option<&[Peer]>,
    sources: Option<&[SourceEntry]>,
    advertisements: Option<&[Advertisement]>,
    tenants: &[String],
    d: &mut Diagnostics,
) {
    for (peer, spans) in &registry.policies {
        for r in &spans.names {
            let known: Option<Vec<&str>> = match r.kind {
                "advertisement" => {
                    advertisements.map(|a| a.iter().map(|a| a.name.as_str()).collect())
                }
                "tenant" => Some(tenants.iter().map(String::as_str).collect()),
                _ => sources.map(|s| {
                    s.iter()
                        .map(|s| s.name.as_str())
                        .chain([crate::model::RUNTIME_SOURCE])
                        .collect()
                }),
            };
            // A section that did not read has its own diagnostics.
            let Some(known) = known else { continue };
            if known.contains(&r.name.as_str()) {
                continue;
            }
            let mut m = format!(
                "export rule of peer \"{peer}\" names {} \"{}\", which the config does not define",
                r.kind, r.name
            );
            match tree::did_you_mean(&r.name, &known) {
                Some(s) => m.push_str(&format!(" (did you mean \"{s}\"?)")),
                None => m.push_str(&format!("; known: {}", tree::quoted_list(&known))),
            }
            d.error(&r.span, m);
        }
        let (Some(speaker), Some(peers)) = (speaker, peers) else {
            continue;
        };
        let Some(p) = peers.iter().find(|p| &p.name == peer) else {
            continue;
        };
        if !p.is_ibgp(speaker.asn) {
            for span in &spans.local_pref {
                d.warning(
                    span,
                    format!(
                        "set_local_pref on peer \"{peer}\", an eBGP peer: LOCAL_PREF is sent to iBGP peers only (RFC 4271 §5.1.5), so this has no effect"
                    ),
                );
            }
        }
    }
}

//! The configuration schema: every key each table accepts, with its type,
//! default, range and meaning.
//!
//! The parser rejects any key not listed here (`Table::reject_unknown_keys`
//! takes its names from a table's `&[Key]`), and the configuration
//! reference (docs/src/reference/config.md) is generated from the same
//! lists, so a key the parser accepts cannot be missing from the page.
//! Defaults and ranges are read from the constants and `Default` impls the
//! parser uses.

use std::fmt::Write as _;
use std::time::Duration;

use super::duration::format_duration;

/// One key of a table.
#[derive(Debug)]
pub struct Key {
    /// As written in the file.
    pub name: &'static str,
    /// The TOML type, in words: "string", "duration", "array of strings"...
    pub kind: &'static str,
    /// What applies when the key is left out.
    pub default: DefaultValue,
    /// The values accepted, beyond the type.
    pub range: Range,
    /// What it does (Markdown, one paragraph).
    pub meaning: &'static str,
}

/// What a key is when it is left out.
#[derive(Debug)]
pub enum DefaultValue {
    /// The table is incomplete without it.
    Required,
    /// Said in words: "none (no BFD)", "`hold_time / 3`".
    Text(&'static str),
    /// A value, written as in the file (from the parser's constant).
    Value(fn() -> String),
}

/// The values a key accepts, beyond its type.
#[derive(Debug)]
pub enum Range {
    /// Any value of the type.
    Any,
    /// An integer in `min..=max`.
    Int(IntRange),
    /// Said in words, from the parser's constants.
    Text(fn() -> String),
}

/// An inclusive integer range, read by the parser (`tree::integer_range`)
/// and shown by the reference.
#[derive(Debug, Clone, Copy)]
pub struct IntRange {
    /// The least value accepted.
    pub min: i128,
    /// The greatest value accepted.
    pub max: i128,
}

/// 0..=4294967295: a 32-bit field (LOCAL_PREF, MED).
pub(crate) const U32: IntRange = IntRange {
    min: 0,
    max: u32::MAX as i128,
};

/// 1..=4294967295: a count that is at least one.
pub(crate) const POSITIVE_U32: IntRange = IntRange {
    min: 1,
    max: u32::MAX as i128,
};

/// 1..=65535: a TCP port.
pub(crate) const PORT: IntRange = IntRange {
    min: 1,
    max: 65_535,
};

/// A table of the configuration: its keys, and what the reference says
/// before them.
#[derive(Debug)]
pub struct Section {
    /// The heading: "`[speaker]` (required)".
    pub title: &'static str,
    /// Paragraphs before the keys (Markdown; may be empty).
    pub intro: &'static str,
    /// Every key, in the order the parser lists them.
    pub keys: &'static [Key],
}

/// `"15s"`: a duration as written in the file.
pub(crate) fn duration(d: Duration) -> String {
    format!("\"{}\"", format_duration(d))
}

/// `"65535s"`: a duration in whole seconds, as a range's bound is best
/// read.
pub(crate) fn seconds(d: Duration) -> String {
    format!("\"{}s\"", d.as_secs())
}

/// `"text"`.
pub(crate) fn quoted(text: &str) -> String {
    format!("\"{text}\"")
}

/// `["a", "b"]`.
pub(crate) fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let items: Vec<String> = items.into_iter().map(quoted).collect();
    format!("[{}]", items.join(", "))
}

/// Every table of the config file, in the order the reference shows them
/// (the VIP file's table, `source::file::parse::VIP_SECTION`, follows them).
pub fn sections() -> Vec<Section> {
    vec![
        Section {
            title: "Top level",
            intro: "The tables a config file may have.",
            keys: super::TOP_LEVEL_KEYS,
        },
        super::speaker::SECTION,
        super::peer::SECTION,
        super::peer::GRACEFUL_RESTART_SECTION,
        super::peer::BFD_SECTION,
        super::export::SECTION,
        super::node_override::SECTION,
        super::node_override::PEER_SECTION,
        super::source::SECTION,
        super::stability::STABILITY_SECTION,
        super::stability::DAMPING_SECTION,
        super::advertisement::SECTION,
        super::tenant::SECTION,
        super::advertisement::PROBE_SECTION,
        super::advertisement::DEGRADED_SECTION,
        super::selector::SELECTOR_SECTION,
        super::selector::REQUIREMENT_SECTION,
        super::bmp::SECTION,
    ]
}

fn type_cell(key: &Key) -> String {
    let range = match &key.range {
        Range::Any => return key.kind.to_string(),
        Range::Int(r) => format!("{}..={}", r.min, r.max),
        Range::Text(f) => f(),
    };
    format!("{}, {range}", key.kind)
}

fn default_cell(key: &Key) -> String {
    match &key.default {
        DefaultValue::Required => "required".to_string(),
        DefaultValue::Text(text) => text.to_string(),
        DefaultValue::Value(f) => format!("`{}`", f()),
    }
}

const GENERAL_RULES: &str = "\
One TOML file per rack. `holdfast check --config PATH` validates it and prints one `PATH:LINE:COL: message` line for every problem found; the daemon refuses to start (or to reload) with any. A valid file can still say something that is very likely not meant (a `keepalive` equal to the `hold_time`, `local_pref` towards eBGP peers only): those are warnings, `PATH:LINE:COL: warning: message`, which do not stop anything (`--deny-warnings` makes `check` fail on them).

General rules:

- Unknown keys are errors (with a suggestion when the key looks like a typo).
- Durations are strings with units: `ms`, `s`, `m`, `h`, combinable largest first (`\"500ms\"`, `\"9s\"`, `\"1m30s\"`, `\"1h\"`). A bare number is an error.
- Relative paths (`password_file`, `bfd.key_file`, `api_token_file`, `source.path`, `probe.ca_file`) are relative to the directory of the config file.
- One spelling per address: an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) is refused in `address`, `source_address`, `listen`, `api` and `metrics`, with the IPv4 form to write instead.
- Label selectors (`node_selector`, `service_selector`, `namespace_selector`) are written `{ match_labels = { key = \"value\" }, match_expressions = [{ key = \"k\", operator = \"In\", values = [\"a\"] }] }` with Kubernetes semantics (see the label selector tables below).
";

/// docs/src/reference/config.md.
pub fn reference(sections: &[Section]) -> String {
    use crate::docs::inline;
    let mut out = crate::docs::header(
        "the configuration schema in src/config (schema.rs and the KEYS of each table)",
    );
    out.push_str("# Configuration reference\n\n");
    out.push_str(GENERAL_RULES);
    out.push('\n');
    for section in sections {
        let _ = writeln!(out, "## {}\n", section.title);
        // mdBook's `{{#include reference/config.md:ANCHOR}}` takes what is
        // between these lines: the configuration pages show their table's
        // keys from here, so the keys are written in one place.
        let anchor = anchor_name(section.title);
        let _ = writeln!(out, "<!-- ANCHOR: {anchor} -->");
        for paragraph in section.intro.split("\n\n").filter(|p| !p.trim().is_empty()) {
            let _ = writeln!(out, "{}\n", paragraph.trim());
        }
        out.push_str("| key | type | default | meaning |\n|---|---|---|---|\n");
        for key in section.keys {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                key.name,
                inline(&type_cell(key)),
                inline(&default_cell(key)),
                inline(key.meaning)
            );
        }
        let _ = writeln!(out, "<!-- ANCHOR_END: {anchor} -->");
        out.push('\n');
    }
    out
}

/// The mdBook include anchor of a section: the table's name as the file
/// writes it (the first code span of the title, else the title), in
/// lower case, every run of other characters one `_`:
/// "`[[peer]] graceful_restart`" → `peer_graceful_restart`.
pub fn anchor_name(title: &str) -> String {
    let name = title.split('`').nth(1).unwrap_or(title);
    let mut out = String::new();
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('_') {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_string()
}

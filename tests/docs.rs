//! The documentation cannot lie: every Markdown file people read is checked
//! against the code it describes.
//!
//! Read: `docs/src/**/*.md` (the mdBook), and every other `*.md` in the
//! repository (the top-level files, `deploy/**/README.md`, each crate's
//! README), except build output and vendored trees (see [`SKIPPED`]).
//!
//! Checked:
//!
//! - Code blocks, by their info string (mdBook passes `lang,attr,...`
//!   through; the first word picks the highlighting):
//!   - `toml,config`: a whole holdfast config. Written to a file, it must
//!     pass `holdfast check --skip-password-files --deny-warnings`;
//!     `toml,config,warnings` is a config that check warns about (it must
//!     warn, and have no errors). A `kind = "file"` source's VIP file is
//!     made empty when its path is relative; an absolute one that does not
//!     exist here is not read.
//!   - `toml,vipfile`: a whole VIP file; it must parse with no diagnostic
//!     (its advertisement names are not checked against a config).
//!   - `toml`: a holdfast fragment. It must be TOML, and holdfast must know
//!     every key and accept every value; only what a fragment leaves out
//!     (missing required keys and tables, peers and advertisements named
//!     but defined elsewhere) is forgiven. Keys outside any table are read
//!     as the inside of each section in turn (`[speaker]`, `[[peer]]`,
//!     `[source]`, `[stability]`, `[[advertisement]]`,
//!     `[[node_override]]`, `[[vip]]`) and must fit one of them.
//!   - `toml,other`: TOML for another program; only its syntax is checked.
//!   - `toml,nocheck`: deliberately wrong holdfast TOML (an example of what
//!     check rejects); not checked.
//!   - `console,run`: `$ ` lines are commands, run by `sh` in the tree's root
//!     with the `holdfast` this test built first on PATH; the lines up to
//!     the next `$ ` are the output expected (standard output and error
//!     together), where a line `...` stands for any number of lines. A
//!     command must exit 0: show a failure as `$ cmd; echo "exit $?"`.
//!     A line ending in `\` continues the command on the next line.
//!   - Other info strings (`sh`, `console` without `run`, `yaml`, `frr`,
//!     `conf`, ...) are not checked.
//! - Links: every relative link and image (inline, reference-style, with
//!   or without `#anchor`) names a file or directory that exists, and its
//!   anchor is the id of a heading in the target Markdown file (mdBook's
//!   and GitHub's rule: lowercased; whitespace to `-`; punctuation but `-`
//!   and `_` dropped; the second `x` is `x-1`); a `[text][label]` has its
//!   label defined. http(s) links are not fetched. A page of the book may
//!   not link outside docs/src: mdBook renders such a link as a broken
//!   one, so use the repository URL or move the content into the book.
//! - docs/src/SUMMARY.md lists every page of docs/src, and every page it
//!   lists exists.
//!
//! Every failure is `FILE:LINE: what is wrong`; all are reported together.
//! The fixture trees under tests/fixtures/docs prove each check can fail.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;
use std::fs;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use holdfast::config::{Diagnostic, Severity, VipFileAdvertisement};
use pulldown_cmark::{BrokenLink, CodeBlockKind, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Directories never read besides any `.git`, `target`, `node_modules` and
/// `vendor`: the rendered book, and these checks' own (deliberately
/// broken) fixtures.
const SKIPPED: &[&str] = &["docs/book", "tests/fixtures/docs"];

/// Whether the directory `rel` is not read: [`SKIPPED`], and `tools/*/`,
/// the Go module trees the test tools are built from (tools/README.md is
/// ours).
fn skipped(rel: &Path) -> bool {
    let text = rel.to_string_lossy();
    let vendored = ["target", "node_modules", "vendor", ".git"];
    SKIPPED.iter().any(|s| text == *s)
        || rel
            .file_name()
            .is_some_and(|n| vendored.iter().any(|v| n == *v))
        || (rel.starts_with("tools") && rel.components().count() == 2)
}

/// The Markdown files under `root` that people read, relative to it, sorted.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) {
        let mut entries: Vec<_> = fs::read_dir(root.join(rel))
            .unwrap_or_else(|e| panic!("reading {}: {e}", root.join(rel).display()))
            .map(|e| e.expect("directory entry"))
            .collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = rel.join(entry.file_name());
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                if !skipped(&path) {
                    walk(root, &path, out);
                }
            } else if path.extension().is_some_and(|e| e == "md") {
                // docs/ holds the book: only its sources are pages.
                if path.starts_with("docs") && !path.starts_with("docs/src") {
                    continue;
                }
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, Path::new(""), &mut out);
    out
}

/// Where failures are collected: file, line, message.
struct Report {
    failures: Vec<(PathBuf, usize, String)>,
}

impl Report {
    /// `message` at `file:line`; a message that starts with `COL: ` is at
    /// that column.
    fn fail(&mut self, file: &Path, line: usize, message: impl AsRef<str>) {
        let message = message.as_ref();
        let at_col = message
            .split_once(": ")
            .is_some_and(|(col, _)| col.parse::<usize>().is_ok());
        let message = if at_col {
            message.to_string()
        } else {
            format!(" {message}")
        };
        self.failures.push((file.to_path_buf(), line, message));
    }

    /// `FILE:LINE: message`, by file and line.
    fn into_lines(mut self) -> Vec<String> {
        self.failures.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        self.failures
            .into_iter()
            .map(|(file, line, message)| format!("{}:{line}:{message}", file.display()))
            .collect()
    }
}

/// Byte offset → 1-based line.
struct Lines(Vec<usize>);

impl Lines {
    fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
        Lines(starts)
    }
    fn of(&self, offset: usize) -> usize {
        self.0.partition_point(|&s| s <= offset)
    }
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// A heading's id as mdBook (and, for these rules, GitHub) makes it.
fn normalize_id(text: &str) -> String {
    text.trim()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap_or(c))
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// The ids of the headings of a Markdown text, with duplicates numbered.
fn heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut current: Option<(String, Option<String>)> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                current = Some((String::new(), id.map(|i| i.to_string())));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((content, _)) = &mut current {
                    content.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let Some((content, explicit)) = current.take() else {
                    continue;
                };
                let id = explicit.unwrap_or_else(|| normalize_id(&content));
                let n = counts.entry(id.clone()).or_insert(0);
                ids.insert(if *n == 0 { id } else { format!("{id}-{n}") });
                *n += 1;
            }
            _ => {}
        }
    }
    ids
}

/// One Markdown file's contents, read once.
struct Tree {
    root: PathBuf,
    texts: HashMap<PathBuf, String>,
    ids: HashMap<PathBuf, BTreeSet<String>>,
}

impl Tree {
    fn new(root: &Path) -> Self {
        Tree {
            root: root.to_path_buf(),
            texts: HashMap::new(),
            ids: HashMap::new(),
        }
    }

    fn text(&mut self, rel: &Path) -> &str {
        let root = &self.root;
        self.texts.entry(rel.to_path_buf()).or_insert_with(|| {
            fs::read_to_string(root.join(rel))
                .unwrap_or_else(|e| panic!("reading {}: {e}", rel.display()))
        })
    }

    /// The text as mdBook renders it: each `{{#include PATH}}` line (PATH
    /// relative to the file, as mdBook takes it) replaced by that file.
    fn rendered(&mut self, rel: &Path) -> String {
        let text = self.text(rel).to_string();
        let mut out = String::with_capacity(text.len());
        for line in text.lines() {
            let included = line
                .trim()
                .strip_prefix("{{#include ")
                .and_then(|rest| rest.strip_suffix("}}"))
                .map(|path| rel.parent().unwrap_or(Path::new("")).join(path.trim()))
                .and_then(|path| normalize(&path));
            match included {
                Some(path) if self.root.join(&path).is_file() => {
                    out.push_str(self.text(&path));
                }
                _ => out.push_str(line),
            }
            out.push('\n');
        }
        out
    }

    fn ids(&mut self, rel: &Path) -> &BTreeSet<String> {
        if !self.ids.contains_key(rel) {
            let ids = heading_ids(&self.rendered(rel));
            self.ids.insert(rel.to_path_buf(), ids);
        }
        &self.ids[rel]
    }
}

/// Checks everything under `root`; the failures, each `FILE:LINE: what`.
fn check_tree(root: &Path) -> Vec<String> {
    check_tree_but(root, &[])
}

/// [`check_tree`], without reading the files in `left_out` (their headings
/// are still link targets).
fn check_tree_but(root: &Path, left_out: &[&str]) -> Vec<String> {
    let mut report = Report {
        failures: Vec::new(),
    };
    let mut tree = Tree::new(root);
    let files = markdown_files(root);
    for file in files
        .iter()
        .filter(|f| !left_out.iter().any(|l| Path::new(l) == *f))
    {
        let text = tree.text(file).to_string();
        check_file(&mut tree, file, &text, &mut report);
    }
    if root.join("docs/src").is_dir() {
        check_summary(&mut tree, &files, &mut report);
    }
    report.into_lines()
}

fn check_file(tree: &mut Tree, file: &Path, text: &str, report: &mut Report) {
    let lines = Lines::new(text);
    let mut undefined = Vec::new();
    let mut callback = |link: BrokenLink<'_>| {
        // Only `[text][label]` is certainly meant as a link: `[x]` and
        // `[x][]` are often just brackets (`[speaker]`, `[[peer]]`).
        if link.link_type == LinkType::Reference {
            undefined.push((link.span.start, link.reference.to_string()));
        }
        None
    };
    let parser = Parser::new_with_broken_link_callback(text, options(), Some(&mut callback))
        .into_offset_iter();
    let mut block: Option<(String, usize, String)> = None;
    let mut links = Vec::new();
    let mut bad_fence = false;
    for (event, range) in parser {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = lines.of(range.start);
                check_fence_ends(file, line, &text[range.clone()], &mut bad_fence, report);
                block = Some((info.to_string(), line, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, _, body)) = &mut block {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((info, line, body)) = block.take() {
                    check_block(tree, file, line, &info, &body, report);
                }
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push((lines.of(range.start), dest_url.to_string()));
            }
            _ => {}
        }
    }
    for (offset, label) in undefined {
        report.fail(
            file,
            lines.of(offset),
            format!("reference link [{label}] has no definition ([{label}]: URL)"),
        );
    }
    for (line, dest) in links {
        check_link(tree, file, line, &dest, report);
    }
    check_metric_names(file, text, report);
}

/// Every metric the text names (`holdfast_…`, in prose, code spans and
/// PromQL alike) is one `/metrics` has; a name with `*` must match one.
fn check_metric_names(file: &Path, text: &str, report: &mut Report) {
    let known: Vec<&str> = holdfast::api::metrics::FAMILIES
        .iter()
        .map(|f| f.name)
        .collect();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("holdfast_") {
            let before = rest[..at].chars().next_back();
            let name: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "_*".contains(*c))
                .collect();
            rest = &rest[at + name.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                || NOT_METRICS.contains(&name.as_str())
            {
                continue; // part of another word (`.text.holdfast_hot`), or a crate
            }
            let found = if name.contains('*') {
                known.iter().any(|k| glob_matches(&name, k))
            } else {
                known.contains(&name.as_str())
            };
            if !found {
                report.fail(
                    file,
                    n + 1,
                    format!("metric {name} is not one /metrics has (src/api/metrics.rs FAMILIES)"),
                );
            }
        }
    }
}

/// Names that look like metrics and are not: the workspace's crates.
const NOT_METRICS: &[&str] = &["holdfast_sockopt"];

/// `*` matches any run of characters.
fn glob_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.starts_with(head)
                && (0..=name.len() - head.len())
                    .any(|i| glob_matches(tail, &name[head.len() + i..]))
        }
    }
}

/// A fence with text after it does not close a code block (CommonMark
/// §4.5: a closing fence has no info string): the block runs on to the next
/// bare fence, and the rest of the file is code and text swapped. Only the
/// first in a file is reported: the fences after it are read the wrong way
/// round.
fn check_fence_ends(
    file: &Path,
    fence_line: usize,
    source: &str,
    reported: &mut bool,
    report: &mut Report,
) {
    if *reported {
        return;
    }
    let opening = source.trim_start();
    let c = opening.chars().next().unwrap_or('`');
    let width = opening.chars().take_while(|&x| x == c).count();
    for (i, line) in source.lines().enumerate().skip(1) {
        let trimmed = line.trim_start();
        let run = trimmed.chars().take_while(|&x| x == c).count();
        let rest = trimmed[run * c.len_utf8()..].trim();
        if run >= width && !rest.is_empty() && line.len() - trimmed.len() < 4 {
            report.fail(
                file,
                fence_line + i,
                format!(
                    "this fence has text after it (\"{}\"), so it does not close the code \
                     block opened on line {fence_line}: put the text on its own line",
                    rest.chars().take(30).collect::<String>()
                ),
            );
            *reported = true;
            return;
        }
    }
}

// ---------------------------------------------------------------- links

fn check_link(tree: &mut Tree, file: &Path, line: usize, dest: &str, report: &mut Report) {
    let dest = dest.trim();
    if dest.is_empty() {
        // An mdBook draft chapter in SUMMARY.md: `- [Later]()`.
        if file.ends_with("docs/src/SUMMARY.md") || file == Path::new("docs/src/SUMMARY.md") {
            return;
        }
        report.fail(file, line, "link with an empty target");
        return;
    }
    if has_scheme(dest) || dest.starts_with("//") {
        return;
    }
    let (path_part, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (dest, None),
    };
    let path_part = path_part
        .split('?')
        .next()
        .unwrap_or("")
        .replace("%20", " ");
    let target = if path_part.is_empty() {
        Some(file.to_path_buf())
    } else if let Some(abs) = path_part.strip_prefix('/') {
        normalize(Path::new(abs))
    } else {
        normalize(&file.parent().unwrap_or(Path::new("")).join(&path_part))
    };
    let Some(target) = target else {
        report.fail(file, line, format!("link \"{dest}\" leaves the repository"));
        return;
    };
    if file.starts_with("docs/src") && !target.starts_with("docs/src") {
        report.fail(
            file,
            line,
            format!(
                "link \"{dest}\" leaves docs/src, which mdBook renders as a broken link: \
                 link the file's repository URL (https://github.com/...) or move the content into the book"
            ),
        );
        return;
    }
    let full = tree.root.join(&target);
    if !full.exists() {
        let hint = if target.extension().is_some_and(|e| e == "html") {
            " (link the .md page; mdBook makes the .html)"
        } else {
            ""
        };
        report.fail(
            file,
            line,
            format!("link \"{dest}\": {} does not exist{hint}", target.display()),
        );
        return;
    }
    let Some(anchor) = anchor else { return };
    if target.extension().is_none_or(|e| e != "md") || full.is_dir() {
        return; // #L10 in source files and the like: not headings.
    }
    let anchor = anchor.replace("%20", " ");
    let ids = tree.ids(&target);
    if !ids.contains(&anchor) {
        let near = ids
            .iter()
            .filter(|id| id.contains(&anchor) || anchor.contains(id.as_str()))
            .take(3)
            .map(|id| format!("#{id}"))
            .collect::<Vec<_>>();
        let hint = if near.is_empty() {
            String::new()
        } else {
            format!(" (near: {})", near.join(", "))
        };
        report.fail(
            file,
            line,
            format!(
                "link \"{dest}\": no heading in {} has the id \"{anchor}\"{hint}",
                target.display()
            ),
        );
    }
}

/// `scheme:` as in a URL (`https:`, `mailto:`), not a Windows drive.
fn has_scheme(dest: &str) -> bool {
    match dest.split_once(':') {
        Some((scheme, _)) => {
            scheme.len() > 1
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
                && !scheme.contains('/')
        }
        None => false,
    }
}

/// `a/b/../c` → `a/c`; `None` when it climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

// -------------------------------------------------------------- SUMMARY

fn check_summary(tree: &mut Tree, files: &[PathBuf], report: &mut Report) {
    let summary = PathBuf::from("docs/src/SUMMARY.md");
    if !tree.root.join(&summary).is_file() {
        report.fail(&summary, 1, "docs/src exists but has no SUMMARY.md");
        return;
    }
    let text = tree.text(&summary).to_string();
    let mut listed = BTreeSet::new();
    for event in Parser::new_ext(&text, options()) {
        if let Event::Start(Tag::Link { dest_url, .. }) = event
            && !dest_url.is_empty()
            && !has_scheme(&dest_url)
        {
            let path = dest_url.split('#').next().unwrap_or("");
            if let Some(p) = normalize(&Path::new("docs/src").join(path)) {
                listed.insert(p);
            }
        }
    }
    // Entries that do not exist are reported by the link check.
    for file in files {
        if file.starts_with("docs/src") && *file != summary && !listed.contains(file) {
            report.fail(
                file,
                1,
                "this page is not listed in docs/src/SUMMARY.md, so mdBook does not build it",
            );
        }
    }
}

// ---------------------------------------------------------- code blocks

fn check_block(
    tree: &Tree,
    file: &Path,
    fence_line: usize,
    info: &str,
    body: &str,
    report: &mut Report,
) {
    let words: Vec<&str> = info
        .split([',', ' ', '\t'])
        .map(str::trim)
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.iter().skip(1).any(|x| *x == w);
    let known = ["config", "vipfile", "warnings", "other", "nocheck"];
    match words.first().copied() {
        Some("toml") => {
            if let Some(bad) = words.iter().skip(1).find(|w| !known.contains(w)) {
                report.fail(
                    file,
                    fence_line,
                    format!(
                        "unknown marker \"{bad}\" on a toml block; \
                         known: config, config,warnings, vipfile, other, nocheck"
                    ),
                );
                return;
            }
            if has("nocheck") {
                return;
            }
            let block = Block {
                file,
                first_line: fence_line + 1,
                body,
            };
            if has("config") {
                check_config_block(&block, has("warnings"), report);
            } else if has("warnings") {
                report.fail(file, fence_line, "\"warnings\" goes with \"config\" only");
            } else if has("vipfile") {
                check_vip_block(&block, report);
            } else if has("other") {
                if let Err(e) = body.parse::<toml::Table>() {
                    report.fail(file, fence_line, format!("not TOML: {}", one_line(&e)));
                }
            } else {
                check_fragment(&block, report);
            }
        }
        Some("console") => {
            if let Some(bad) = words.iter().skip(1).find(|w| **w != "run") {
                report.fail(
                    file,
                    fence_line,
                    format!("unknown marker \"{bad}\" on a console block; known: run"),
                );
            } else if has("run") {
                check_console(tree, file, fence_line + 1, body, report);
            }
        }
        _ => {
            for (marker, lang) in [("config", "toml"), ("vipfile", "toml"), ("run", "console")] {
                if has(marker) {
                    report.fail(
                        file,
                        fence_line,
                        format!("\"{marker}\" marks {lang} blocks only (```{lang},{marker})"),
                    );
                }
            }
        }
    }
}

fn one_line(e: &impl std::fmt::Display) -> String {
    e.to_string()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// A code block: its file, the line of its first body line, its body.
struct Block<'a> {
    file: &'a Path,
    first_line: usize,
    body: &'a str,
}

impl Block<'_> {
    /// A diagnostic at `line` of the body (1-based), as `FILE:LINE`.
    fn fail_at(&self, report: &mut Report, line: usize, col: usize, message: &str) {
        report.fail(
            self.file,
            self.first_line + line.max(1) - 1,
            format!("{col}: {message}"),
        );
    }
}

/// Diagnostics a fragment has because it is one: what it leaves to the
/// rest of the config. Any other is a fault of what it says.
fn forgiven_in_fragment(message: &str) -> bool {
    message.starts_with("missing required ")
        || message.starts_with("missing [[peer]]")
        || message.starts_with("unknown peer \"")
        || message.contains(", which no [[peer]] defines")
        || message.starts_with("unknown advertisement \"")
        || message.starts_with("[[node_override]] needs names = [...] or node_selector")
}

const SECTIONS: &[&str] = &[
    "speaker",
    "peer",
    "source",
    "stability",
    "advertisement",
    "node_override",
];

/// The headers a fragment of bare keys is tried under.
const HEADERS: &[&str] = &[
    "[speaker]",
    "[[peer]]",
    "[source]",
    "[stability]",
    "[[advertisement]]",
    "[[node_override]]",
    "[[vip]]",
];

fn check_fragment(block: &Block<'_>, report: &mut Report) {
    let root: toml::Table = match block.body.parse() {
        Ok(t) => t,
        Err(e) => {
            let line = e.span().map_or(1, |s| Lines::new(block.body).of(s.start));
            block.fail_at(report, line, 1, &format!("not TOML: {}", one_line(&e)));
            return;
        }
    };
    // No section at the top: the keys are the inside of one.
    let bare_keys = !root
        .keys()
        .any(|k| SECTIONS.contains(&k.as_str()) || k == "vip");
    if bare_keys {
        // Tried under each section's header; when none fits, the faults
        // under the nearest (fewest faults) are reported.
        let mut best: Option<(&str, Vec<Diagnostic>)> = None;
        for header in HEADERS {
            let text = format!("{header}\n{}", block.body);
            let faults: Vec<Diagnostic> = fragment_faults(&text)
                .into_iter()
                .map(|mut d| {
                    d.line = d.line.saturating_sub(1);
                    d
                })
                .collect();
            if faults.is_empty() {
                return;
            }
            if best.as_ref().is_none_or(|(_, b)| faults.len() < b.len()) {
                best = Some((header, faults));
            }
        }
        let (header, faults) = best.expect("some header tried");
        for d in faults {
            block.fail_at(
                report,
                d.line,
                d.col,
                &format!(
                    "{} (this fragment has no holdfast section and fits inside none; \
                     read under {header}, the nearest; mark TOML for other programs toml,other)",
                    d.message
                ),
            );
        }
        return;
    }
    for d in fragment_faults(block.body) {
        block.fail_at(report, d.line, d.col, &d.message);
    }
}

/// A fragment's diagnostics that are not [`forgiven_in_fragment`]: as a
/// VIP file when it has `[[vip]]` and no config section, else as a config.
fn fragment_faults(text: &str) -> Vec<Diagnostic> {
    let path = Path::new("fragment.toml");
    let root: toml::Table = text.parse().unwrap_or_default();
    let diagnostics = if root.contains_key("vip") && !SECTIONS.iter().any(|s| root.contains_key(*s))
    {
        match holdfast::source::file::parse_vip_file(path, text, &advertisements_named(&root)) {
            Ok(_) => Vec::new(),
            Err(d) => d,
        }
    } else {
        match holdfast::config::parse(path, text) {
            // Warnings need the whole config to mean anything.
            Ok(_) => Vec::new(),
            Err(d) => d,
        }
    };
    diagnostics
        .into_iter()
        .filter(|d| d.severity == Severity::Error && !forgiven_in_fragment(&d.message))
        .collect()
}

/// The advertisements a VIP file's entries name: taken as defined, with
/// no `vip_ranges`.
fn advertisements_named(root: &toml::Table) -> Vec<VipFileAdvertisement> {
    let mut names = vec![holdfast::config::DEFAULT_ADVERTISEMENT.to_string()];
    if let Some(toml::Value::Array(vips)) = root.get("vip") {
        for vip in vips {
            if let Some(toml::Value::String(name)) = vip.get("advertisement")
                && !names.contains(name)
            {
                names.push(name.clone());
            }
        }
    }
    names
        .iter()
        .map(|name| VipFileAdvertisement::named(name))
        .collect()
}

fn check_vip_block(block: &Block<'_>, report: &mut Report) {
    let root: toml::Table = block.body.parse().unwrap_or_default();
    if let Err(diags) = holdfast::source::file::parse_vip_file(
        Path::new("vips.toml"),
        block.body,
        &advertisements_named(&root),
    ) {
        for d in diags {
            block.fail_at(report, d.line, d.col, &d.message);
        }
    }
}

fn holdfast_bin() -> &'static str {
    env!("CARGO_BIN_EXE_holdfast")
}

fn check_config_block(block: &Block<'_>, warnings: bool, report: &mut Report) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.toml");
    fs::write(&config, block.body).expect("write config");
    // A file source's VIP file: made (empty) beside the config when the
    // path is relative; an absolute one names the node's file, which this
    // machine need not have.
    let mut missing_vip_file = None;
    if let Ok(root) = block.body.parse::<toml::Table>()
        && let Some(toml::Value::Table(source)) = root.get("source")
        && source.get("kind").and_then(toml::Value::as_str) == Some("file")
        && let Some(path) = source.get("path").and_then(toml::Value::as_str)
    {
        let path = Path::new(path);
        if path.is_absolute() {
            if !path.exists() {
                missing_vip_file = Some(path.to_path_buf());
            }
        } else if let Some(p) = normalize(path) {
            let full = dir.path().join(p);
            fs::create_dir_all(full.parent().expect("parent")).expect("mkdir");
            fs::write(full, "").expect("write VIP file");
        }
    }
    let out = Command::new(holdfast_bin())
        .args(["check", "--skip-password-files", "--config"])
        .arg(&config)
        .output()
        .expect("run holdfast check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let prefix = format!("{}:", config.display());
    let mut saw_warning = false;
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        if let Some(vips) = &missing_vip_file
            && line.starts_with(&format!("{}:", vips.display()))
            && line.contains("cannot read file")
        {
            continue;
        }
        let Some(rest) = line.strip_prefix(&prefix) else {
            block.fail_at(report, 1, 1, &format!("holdfast check: {line}"));
            continue;
        };
        let mut parts = rest.splitn(3, ':');
        let line_no = parts.next().and_then(|l| l.parse().ok()).unwrap_or(1);
        let col = parts.next().and_then(|c| c.parse().ok()).unwrap_or(1);
        let message = parts.next().unwrap_or(rest).trim();
        if message.starts_with("warning:") {
            saw_warning = true;
            if warnings {
                continue;
            }
            block.fail_at(
                report,
                line_no,
                col,
                &format!("{message} (a whole config in the docs has no warnings unless marked toml,config,warnings)"),
            );
        } else {
            block.fail_at(report, line_no, col, message);
        }
    }
    if !out.stderr.is_empty() {
        block.fail_at(
            report,
            1,
            1,
            &format!(
                "holdfast check wrote to stderr: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
    }
    if warnings && !saw_warning {
        block.fail_at(
            report,
            1,
            1,
            "marked toml,config,warnings, but holdfast check warns about nothing: drop \"warnings\"",
        );
    }
}

// ------------------------------------------------------------- commands

fn check_console(tree: &Tree, file: &Path, first_line: usize, body: &str, report: &mut Report) {
    // (line, command, expected output lines)
    let mut commands: Vec<(usize, String, Vec<&str>)> = Vec::new();
    let mut continuing = false;
    for (i, line) in body.lines().enumerate() {
        if continuing && let Some((_, command, _)) = commands.last_mut() {
            command.push('\n');
            command.push_str(line);
            continuing = line.ends_with('\\');
        } else if let Some(command) = line.strip_prefix("$ ") {
            commands.push((first_line + i, command.to_string(), Vec::new()));
            continuing = command.ends_with('\\');
        } else if let Some((_, _, expected)) = commands.last_mut() {
            expected.push(line);
        } else if !line.trim().is_empty() {
            report.fail(
                file,
                first_line + i,
                "console,run block: output before the first `$ ` command",
            );
        }
    }
    let bin_dir = Path::new(holdfast_bin())
        .parent()
        .expect("binary directory");
    let path = match std::env::var_os("PATH") {
        Some(p) => {
            let mut dirs = vec![bin_dir.to_path_buf()];
            dirs.extend(std::env::split_paths(&p));
            std::env::join_paths(dirs).expect("PATH")
        }
        None => bin_dir.as_os_str().to_owned(),
    };
    for (line, command, expected) in commands {
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{{\n{command}\n}} 2>&1"))
            .current_dir(&tree.root)
            .env("PATH", &path)
            .env_remove("HOLDFAST_LOG")
            .output()
            .expect("run sh");
        let text = String::from_utf8_lossy(&out.stdout);
        let actual: Vec<&str> = text.lines().map(str::trim_end).collect();
        let expected: Vec<&str> = expected.iter().map(|l| l.trim_end()).collect();
        let mut expected = expected.as_slice();
        while expected.last().is_some_and(|l| l.is_empty()) {
            expected = &expected[..expected.len() - 1];
        }
        let mut problems = String::new();
        if !out.status.success() {
            let _ = write!(
                problems,
                "exited with {} (show a failing command as `$ cmd; echo \"exit $?\"`); ",
                out.status
                    .code()
                    .map_or_else(|| out.status.to_string(), |c| format!("status {c}"))
            );
        }
        if !lines_match(expected, &actual) {
            let _ = write!(
                problems,
                "output differs;\n--- expected (the block)\n{}\n--- actual\n{}\n---",
                expected.join("\n"),
                actual.join("\n")
            );
        }
        if !problems.is_empty() {
            report.fail(
                file,
                line,
                format!("`$ {command}`: {}", problems.trim_end_matches("; ")),
            );
        }
    }
}

/// Whether `actual` is `expected`, where a `...` line is any number of
/// lines.
fn lines_match(expected: &[&str], actual: &[&str]) -> bool {
    match expected.split_first() {
        None => actual.is_empty(),
        Some((&"...", rest)) => (0..=actual.len()).any(|skip| lines_match(rest, &actual[skip..])),
        Some((line, rest)) => actual.first() == Some(line) && lines_match(rest, &actual[1..]),
    }
}

// ---------------------------------------------------------------- tests

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures() -> PathBuf {
    repository().join("tests/fixtures/docs")
}

fn assert_clean(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} problem(s) in the docs:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// A tree that uses every marker and kind of link correctly passes.
#[test]
fn a_true_tree_passes() {
    assert_clean(&check_tree(&fixtures().join("good")));
}

#[test]
fn the_walk_skips_build_output_fixtures_and_vendored_trees() {
    let files = markdown_files(&repository());
    assert!(files.contains(&PathBuf::from("README.md")), "{files:?}");
    assert!(
        files.contains(&PathBuf::from("tools/README.md")),
        "{files:?}"
    );
    for file in &files {
        assert!(
            !(file.starts_with("target")
                || file.starts_with("tests/fixtures/docs")
                || (file.starts_with("tools") && file.components().count() > 2)),
            "{}",
            file.display()
        );
    }
}

#[test]
fn heading_ids_follow_mdbook() {
    let ids = heading_ids(
        "# The `[[peer]]` table\n## Quick start\n## Quick start\n## Quick start\n\
         ## BFD: RFC 5880 §6.7 (auth)\n## snake_case and-dash\n## Custom {#my-id}\n",
    );
    let want: BTreeSet<String> = [
        "the-peer-table",
        "quick-start",
        "quick-start-1",
        "quick-start-2",
        "bfd-rfc-5880-67-auth",
        "snake_case-and-dash",
        "my-id",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    assert_eq!(ids, want);
}

#[test]
fn wildcard_lines() {
    assert!(lines_match(&["a", "...", "d"], &["a", "b", "c", "d"]));
    assert!(lines_match(&["a", "...", "d"], &["a", "d"]));
    assert!(lines_match(&["..."], &[]));
    assert!(!lines_match(&["a", "...", "d"], &["a", "b"]));
    assert!(!lines_match(&["a"], &["a", "b"]));
}

/// Each lie in the bad tree is reported, at its line, with what is wrong;
/// and nothing else is.
#[test]
fn each_lie_is_reported_at_its_line() {
    let failures = check_tree(&fixtures().join("bad"));
    let expected: &[(&str, &str)] = &[
        (
            "README.md:3: ",
            "link \"kubernetes.md\": kubernetes.md does not exist",
        ),
        (
            "README.md:3: ",
            "link \"#no-such-heading\": no heading in README.md has the id \"no-such-heading\"",
        ),
        (
            "README.md:4: ",
            "link \"docs/src/page.md#nowhere\": no heading in docs/src/page.md has the id \"nowhere\"",
        ),
        (
            "README.md:5: ",
            "reference link [nolabel] has no definition",
        ),
        (
            "README.md:5: ",
            "link \"page.html\": page.html does not exist (link the .md page",
        ),
        (
            "README.md:12:1: ",
            "unknown key \"hold_tmie\" in [[peer]] (did you mean \"hold_time\"?)",
        ),
        ("README.md:19:7: ", "asn must be an integer, got a string"),
        (
            "README.md:25:1: ",
            "unknown key \"frobnicate\" in [speaker]",
        ),
        ("README.md:31:1: ", "not TOML: TOML parse error"),
        (
            "README.md:37: ",
            "unknown marker \"cofnig\" on a toml block",
        ),
        (
            "README.md:44: ",
            "`$ holdfast check --config missing.toml`: exited with status 1",
        ),
        (
            "README.md:45: ",
            "`$ echo hello`: output differs;\n--- expected (the block)\ngoodbye\n--- actual\nhello\n---",
        ),
        (
            "README.md:51: ",
            "unknown marker \"rnu\" on a console block",
        ),
        ("README.md:55: ", "\"config\" marks toml blocks only"),
        (
            "README.md:61: ",
            "this fence has text after it (\"and text after the fence, whic\"), so it does not close the code block opened on line 59",
        ),
        (
            "docs/src/SUMMARY.md:4: ",
            "link \"gone.md\": docs/src/gone.md does not exist",
        ),
        (
            "docs/src/orphan.md:1: ",
            "not listed in docs/src/SUMMARY.md",
        ),
        (
            "docs/src/page.md:3: ",
            "link \"../../config.toml\" leaves docs/src, which mdBook renders as a broken link: link the file's repository URL",
        ),
        (
            "docs/src/page.md:15:13: ",
            "warning: keepalive (9s) equals hold_time (9s)",
        ),
        (
            "docs/src/page.md:22:1: ",
            "marked toml,config,warnings, but holdfast check warns about nothing",
        ),
        (
            "docs/src/page.md:36:1: ",
            "missing [[peer]]: at least one peer is required",
        ),
        ("docs/src/page.md:36:1: ", "missing required table [source]"),
        (
            "docs/src/page.md:42:11: ",
            "address must be an IPv4 or IPv6 address (a single address, not a prefix)",
        ),
        (
            "docs/src/page.md:45: ",
            "metric holdfast_peers_down is not one /metrics has",
        ),
    ];
    let mut unmatched: Vec<&String> = failures.iter().collect();
    let mut missing = Vec::new();
    for (at, what) in expected {
        match unmatched
            .iter()
            .position(|f| f.starts_with(at) && f.contains(what))
        {
            Some(i) => {
                unmatched.remove(i);
            }
            None => missing.push(format!("{at}{what}")),
        }
    }
    assert!(
        missing.is_empty() && unmatched.is_empty(),
        "not reported:\n{}\n\nreported but not expected:\n{}\n\nall:\n{}",
        missing.join("\n"),
        unmatched
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        failures.join("\n")
    );
}

/// The repository's own Markdown: every check on every file people read.
#[test]
fn repository_docs_are_true() {
    assert_clean(&check_tree(&repository()));
}

//! docs/src/reference/rfc-tests.md, the tests listed by the RFC section
//! they cite, is generated from the source and up to date.
//!
//! A test cites a section when its doc comment, or a comment line in its
//! body, says "RFC", the RFC's number, then "§" and the section (a bare
//! "§" right after such a citation, in the same comment, belongs to the
//! same RFC). The page also lists, per RFC, the sections that the code
//! (not its tests) cites and no test does.
//!
//! After adding or changing such a test, or a citation in the code,
//! regenerate the page with
//! `HOLDFAST_BLESS=1 cargo test --test rfc_conformance` and commit it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const PAGE: &str = "docs/src/reference/rfc-tests.md";
const REGENERATE: &str = "HOLDFAST_BLESS=1 cargo test --test rfc_conformance";

/// Where tests live: every `#[test]` and `#[tokio::test]` function (proptest
/// blocks included) under these directories counts.
const TEST_ROOTS: &[&str] = &[
    "src",
    "tests",
    "bgp-proto/src",
    "bgp-proto/tests",
    "sockopt/src",
    "sockopt/tests",
    "testlab/src",
    "testlab/tests",
];

/// The code whose citations should each be shown by a test; test modules
/// and test functions inside it do not count as code.
const CODE_ROOTS: &[&str] = &["src", "bgp-proto/src", "sockopt/src"];

/// Titles for the headings; an RFC missing here is headed by its number.
const TITLES: &[(u32, &str)] = &[
    (791, "Internet Protocol"),
    (1997, "BGP Communities Attribute"),
    (
        2385,
        "Protection of BGP Sessions via the TCP MD5 Signature Option",
    ),
    (2439, "BGP Route Flap Damping"),
    (
        2545,
        "Use of BGP-4 Multiprotocol Extensions for IPv6 Inter-Domain Routing",
    ),
    (2918, "Route Refresh Capability for BGP-4"),
    (4007, "IPv6 Scoped Address Architecture"),
    (4271, "A Border Gateway Protocol 4 (BGP-4)"),
    (4291, "IP Version 6 Addressing Architecture"),
    (4360, "BGP Extended Communities Attribute"),
    (4456, "BGP Route Reflection"),
    (4486, "Subcodes for BGP Cease Notification Message"),
    (4724, "Graceful Restart Mechanism for BGP"),
    (4760, "Multiprotocol Extensions for BGP-4"),
    (4861, "Neighbor Discovery for IP version 6 (IPv6)"),
    (5065, "Autonomous System Confederations for BGP"),
    (5082, "The Generalized TTL Security Mechanism (GTSM)"),
    (5492, "Capabilities Advertisement with BGP-4"),
    (5668, "4-Octet AS Specific BGP Extended Community"),
    (
        5701,
        "IPv6 Address Specific BGP Extended Community Attribute",
    ),
    (5880, "Bidirectional Forwarding Detection (BFD)"),
    (5881, "BFD for IPv4 and IPv6 (Single Hop)"),
    (5882, "Generic Application of BFD"),
    (5883, "BFD for Multihop Paths"),
    (
        6286,
        "Autonomous-System-Wide Unique BGP Identifier for BGP-4",
    ),
    (
        6396,
        "Multi-Threaded Routing Toolkit (MRT) Routing Information Export Format",
    ),
    (6608, "Subcodes for BGP Finite State Machine Error"),
    (
        6750,
        "The OAuth 2.0 Authorization Framework: Bearer Token Usage",
    ),
    (
        6793,
        "BGP Support for Four-Octet Autonomous System (AS) Number Space",
    ),
    (7313, "Enhanced Route Refresh Capability for BGP-4"),
    (7606, "Revised Error Handling for BGP UPDATE Messages"),
    (7607, "Codification of AS 0 Processing"),
    (7911, "Advertisement of Multiple Paths in BGP"),
    (7999, "BLACKHOLE Community"),
    (
        8050,
        "MRT Routing Information Export Format with BGP Additional Path Extensions",
    ),
    (8092, "BGP Large Communities Attribute"),
    (8200, "Internet Protocol, Version 6 (IPv6) Specification"),
    (8326, "Graceful BGP Session Shutdown"),
    (
        8538,
        "Notification Message Support for BGP Graceful Restart",
    ),
    (8654, "Extended Message Support for BGP"),
    (8950, "Advertising IPv4 NLRI with an IPv6 Next Hop"),
    (9003, "Extended BGP Administrative Shutdown Communication"),
    (
        9072,
        "Extended Optional Parameters Length for BGP OPEN Message",
    ),
    (9110, "HTTP Semantics"),
    (9112, "HTTP/1.1"),
    (
        9234,
        "Route Leak Prevention and Detection Using Roles in UPDATE and OPEN Messages",
    ),
    (
        9384,
        "A BGP Cease NOTIFICATION Subcode for Bidirectional Forwarding Detection (BFD)",
    ),
    (9494, "Long-Lived Graceful Restart for BGP"),
    (9687, "Border Gateway Protocol 4 (BGP-4) Send Hold Timer"),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A section number such as 6.3 or 9.2.1.1, ordered numerically.
type Section = Vec<u32>;

fn show_section(s: &Section) -> String {
    let parts: Vec<String> = s.iter().map(u32::to_string).collect();
    format!("§{}", parts.join("."))
}

/// Every (RFC, section) a text cites, in order. "RFC 4271 §6.3 and §6.2"
/// gives both sections of RFC 4271; "RFC 4486" without a section only sets
/// the RFC a following bare "§" belongs to.
fn citations(text: &str) -> Vec<(u32, Section)> {
    citations_after(text, &mut None)
}

/// [`citations`], with `current` the RFC a bare "§" at the start belongs
/// to; on return, the last RFC the text named.
fn citations_after(text: &str, current: &mut Option<u32>) -> Vec<(u32, Section)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let digits = |from: usize| -> (String, usize) {
        let mut j = from;
        let mut s = String::new();
        while j < chars.len() && (chars[j].is_ascii_digit() || chars[j] == '.') {
            s.push(chars[j]);
            j += 1;
        }
        (s, j)
    };
    while i < chars.len() {
        let starts_rfc = chars[i..].starts_with(&['R', 'F', 'C', ' '])
            && (i == 0 || !chars[i - 1].is_alphanumeric());
        if starts_rfc {
            let (number, j) = digits(i + 4);
            if let Ok(n) = number.parse::<u32>() {
                *current = Some(n);
                i = j;
                continue;
            }
        }
        if chars[i] == '§' {
            let mut j = i + 1;
            if j < chars.len() && chars[j] == ' ' {
                j += 1;
            }
            let (number, end) = digits(j);
            let parts: Option<Section> = number
                .trim_end_matches('.')
                .split('.')
                .map(|p| p.parse().ok())
                .collect();
            if let (Some(rfc), Some(section)) = (*current, parts) {
                out.push((rfc, section));
            }
            i = end.max(i + 1);
            continue;
        }
        i += 1;
    }
    out
}

/// The first sentence of a comment: up to a full stop followed by the end
/// or by a space and a letter, digit, backtick or opening parenthesis (not
/// after "e.g", "i.e", "etc" or "vs").
fn first_sentence(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut end = chars.len();
    for (i, c) in chars.iter().enumerate() {
        if matches!(c, '.' | '!' | '?') {
            let next = chars.get(i + 1);
            let after = chars.get(i + 2);
            let ends = match next {
                None => true,
                Some(' ') => after.is_none_or(|a| a.is_alphanumeric() || matches!(a, '`' | '(')),
                _ => false,
            };
            // "e.g. X" and "i.e. X" do not end a sentence.
            let before = text_before(&chars, i);
            let abbreviation = matches!(&before[..], "e.g" | "i.e" | "etc" | " vs");
            if ends && !abbreviation {
                end = i + 1;
                break;
            }
        }
    }
    let sentence: String = chars[..end].iter().collect();
    const MAX: usize = 300;
    if sentence.chars().count() > MAX {
        let cut: String = sentence.chars().take(MAX).collect();
        format!("{}…", cut.trim_end())
    } else {
        sentence
    }
}

fn text_before(chars: &[char], i: usize) -> String {
    chars[i.saturating_sub(3)..i].iter().collect()
}

/// A markdown table cell: one line, no unescaped bar.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap()
        .to_string_lossy()
        .replace('\\', "/")
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// Contiguous full-line `//` comments (not doc comments), joined, with the
/// index of their first line.
fn comment_blocks(lines: &[&str]) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current = String::new();
    for line in lines {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("//")
            && !t.starts_with("///")
            && !t.starts_with("//!")
        {
            current.push(' ');
            current.push_str(rest.trim());
        } else if !current.is_empty() {
            blocks.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        blocks.push(current);
    }
    blocks.into_iter().map(|b| b.trim().to_owned()).collect()
}

struct Test {
    /// file::name
    id: String,
    /// The joined doc comment.
    doc: String,
    /// The joined `//` comment blocks in the body.
    body_comments: Vec<String>,
}

fn is_test_attribute(line: &str) -> bool {
    let t = line.trim();
    t == "#[test]" || t.starts_with("#[tokio::test")
}

/// The test functions of one file, and the line ranges they span.
fn tests_in(file: &str, text: &str) -> (Vec<Test>, Vec<(usize, usize)>) {
    let lines: Vec<&str> = text.lines().collect();
    let mut tests = Vec::new();
    let mut spans = Vec::new();
    for (at, line) in lines.iter().enumerate() {
        if !is_test_attribute(line) {
            continue;
        }
        // Back over attributes (one or several lines each) to the doc comment.
        let mut k = at;
        let mut doc_lines = Vec::new();
        while k > 0 {
            let t = lines[k - 1].trim();
            if let Some(rest) = t.strip_prefix("///") {
                doc_lines.push(rest.trim());
            } else if !(t.starts_with("#[") || t.ends_with(")]") || t.ends_with("\",")) {
                break;
            }
            k -= 1;
        }
        doc_lines.reverse();
        // Forward to the `fn` line, then to the closing brace at its indent.
        let Some(fn_at) = (at..lines.len()).find(|&j| {
            let t = lines[j].trim_start();
            t.starts_with("fn ") || t.starts_with("async fn ") || t.starts_with("pub fn ")
        }) else {
            continue;
        };
        let after_fn = lines[fn_at].split("fn ").nth(1).unwrap_or_default();
        let name: String = after_fn
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let closing = " ".repeat(indent(lines[fn_at])) + "}";
        let end = (fn_at + 1..lines.len())
            .find(|&j| lines[j].trim_end() == closing)
            .unwrap_or(lines.len() - 1);
        spans.push((k, end));
        tests.push(Test {
            id: format!("{file}::{name}"),
            doc: doc_lines.join(" ").trim().to_owned(),
            body_comments: comment_blocks(&lines[fn_at + 1..end]),
        });
    }
    (tests, spans)
}

/// Files that are test modules: `#[cfg(test)] mod name;` points at them.
fn test_module_files(files: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for pair in lines.windows(2) {
            if pair[0].trim() != "#[cfg(test)]" {
                continue;
            }
            let t = pair[1].trim();
            let Some(name) = t
                .strip_prefix("mod ")
                .or_else(|| t.strip_prefix("pub(crate) mod "))
                .and_then(|r| r.strip_suffix(';'))
            else {
                continue;
            };
            let dir = file.parent().unwrap();
            let stem = file.file_stem().unwrap().to_string_lossy();
            let base = if matches!(&stem[..], "mod" | "lib" | "main") {
                dir.to_path_buf()
            } else {
                dir.join(&*stem)
            };
            out.insert(base.join(format!("{name}.rs")));
            out.insert(base.join(name).join("mod.rs"));
        }
    }
    out
}

/// Where a test cites a section, and what it shows.
struct Row {
    test: String,
    shows: String,
}

struct Page {
    /// RFC → section → rows.
    tested: BTreeMap<u32, BTreeMap<Section, Vec<Row>>>,
    /// RFC → section → files of the code citing it.
    cited: BTreeMap<u32, BTreeMap<Section, BTreeSet<String>>>,
    tests: usize,
}

fn collect() -> Page {
    let mut files = Vec::new();
    for dir in TEST_ROOTS {
        rust_files(&root().join(dir), &mut files);
    }
    let test_modules = test_module_files(&files);
    let code_roots: Vec<PathBuf> = CODE_ROOTS.iter().map(|d| root().join(d)).collect();

    let mut tested: BTreeMap<u32, BTreeMap<Section, Vec<Row>>> = BTreeMap::new();
    let mut cited: BTreeMap<u32, BTreeMap<Section, BTreeSet<String>>> = BTreeMap::new();
    let mut citing_tests = BTreeSet::new();
    for path in &files {
        let file = relative(path);
        if file == "tests/rfc_conformance.rs" {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let (tests, spans) = tests_in(&file, &text);
        for test in tests {
            let mut seen = BTreeSet::new();
            let mut blocks = vec![test.doc.clone()];
            blocks.extend(test.body_comments.iter().cloned());
            // A bare "§" belongs to the RFC the test last named: in its
            // comments so far or, before any, in its name ("rfc7606_…").
            let name = test.id.rsplit("::").next().unwrap_or_default();
            let mut current = name
                .split('_')
                .find_map(|w| w.strip_prefix("rfc")?.parse().ok());
            for block in &blocks {
                for (rfc, section) in citations_after(block, &mut current) {
                    if !seen.insert((rfc, section.clone())) {
                        continue;
                    }
                    // What the test shows: its doc comment's first sentence,
                    // or, without one, the comment that cites the section.
                    let shows = if test.doc.is_empty() {
                        first_sentence(block)
                    } else {
                        first_sentence(&test.doc)
                    };
                    citing_tests.insert(test.id.clone());
                    tested
                        .entry(rfc)
                        .or_default()
                        .entry(section)
                        .or_default()
                        .push(Row {
                            test: test.id.clone(),
                            shows,
                        });
                }
            }
        }

        let is_code = code_roots.iter().any(|r| path.starts_with(r))
            && !test_modules.contains(path)
            && !file.ends_with("/tests.rs")
            && !file.ends_with("_tests.rs");
        if !is_code {
            continue;
        }
        // The code's citations: every line outside test functions and
        // `#[cfg(test)] mod name { … }` blocks; a comment block is one text.
        let lines: Vec<&str> = text.lines().collect();
        let mut skip = vec![false; lines.len()];
        for (from, to) in spans {
            skip[from..=to].iter_mut().for_each(|s| *s = true);
        }
        for (at, pair) in lines.windows(2).enumerate() {
            if pair[0].trim() == "#[cfg(test)]" && pair[1].trim_end().ends_with('{') {
                let closing = " ".repeat(indent(pair[1])) + "}";
                let end = (at + 2..lines.len())
                    .find(|&j| lines[j].trim_end() == closing)
                    .unwrap_or(lines.len() - 1);
                skip[at..=end].iter_mut().for_each(|s| *s = true);
            }
        }
        let mut block = String::new();
        let mut flush = |block: &mut String| {
            for (rfc, section) in citations(block) {
                cited
                    .entry(rfc)
                    .or_default()
                    .entry(section)
                    .or_default()
                    .insert(file.clone());
            }
            block.clear();
        };
        for (line, skipped) in lines.iter().zip(&skip) {
            let t = line.trim_start();
            if *skipped {
                flush(&mut block);
            } else if t.starts_with("//") {
                block.push(' ');
                block.push_str(t.trim_start_matches('/').trim_start_matches('!').trim());
            } else {
                flush(&mut block);
                block.push_str(t);
                flush(&mut block);
            }
        }
        flush(&mut block);
    }
    for sections in tested.values_mut() {
        for rows in sections.values_mut() {
            rows.sort_by(|a, b| a.test.cmp(&b.test));
        }
    }
    Page {
        tested,
        cited,
        tests: citing_tests.len(),
    }
}

/// A section the code cites is shown when a test cites it or one of its
/// subsections.
fn shown(tested: Option<&BTreeMap<Section, Vec<Row>>>, section: &Section) -> bool {
    tested.is_some_and(|t| t.keys().any(|s| s.starts_with(section)))
}

fn render(page: &Page) -> String {
    let mut out = String::new();
    let rows: usize = page
        .tested
        .values()
        .flat_map(|s| s.values())
        .map(Vec::len)
        .sum();
    let sections: usize = page.tested.values().map(BTreeMap::len).sum();
    let rfcs: BTreeSet<u32> = page
        .tested
        .keys()
        .chain(page.cited.keys())
        .copied()
        .collect();
    let gaps: Vec<(u32, usize)> = rfcs
        .iter()
        .map(|rfc| {
            let n = page.cited.get(rfc).map_or(0, |c| {
                c.keys().filter(|s| !shown(page.tested.get(rfc), s)).count()
            });
            (*rfc, n)
        })
        .collect();
    let gap_total: usize = gaps.iter().map(|g| g.1).sum();

    writeln!(
        out,
        "<!-- Generated from the tests' comments by tests/rfc_conformance.rs: do not edit; \
         regenerate with `{REGENERATE}`. -->"
    )
    .unwrap();
    out.push_str("# Tests by RFC section\n\n");
    out.push_str(
        "Every test whose doc comment, or a comment in its body, cites an RFC \
         section (\"RFC 4271 §6.3\"), listed by RFC and section: what the test \
         shows (the first sentence of its doc comment, or the citing comment when \
         it has none) and where it is. Tests are `#[test]` and `#[tokio::test]` \
         functions, proptest blocks included, under src/, tests/, bgp-proto/, \
         sockopt/ and testlab/. Some tests need root, network namespaces or a real \
         router (FRR, BIRD, GoBGP, ExaBGP): see [Tests](../development/tests.md).\n\n",
    );
    out.push_str(
        "Under each RFC, **Not shown by a test** lists the sections that the code \
         (src/, bgp-proto/src/, sockopt/src/, test modules excluded) cites and no \
         test cites, neither the section nor one of its subsections. A section \
         listed there may still be exercised by a test that does not name it; it is \
         not shown *by name*. Which RFCs holdfast implements, and what it leaves out \
         on purpose, is in [RFC conformance](rfc.md).\n\n",
    );
    writeln!(
        out,
        "{} RFCs; {} tests cite {} sections ({} rows); {} sections cited by the code \
         are not shown by a test.\n",
        rfcs.len(),
        page.tests,
        sections,
        rows,
        gap_total
    )
    .unwrap();
    for rfc in &rfcs {
        match TITLES.iter().find(|(n, _)| n == rfc) {
            Some((_, title)) => writeln!(out, "## RFC {rfc}: {title}\n").unwrap(),
            None => writeln!(out, "## RFC {rfc}\n").unwrap(),
        }
        if let Some(sections) = page.tested.get(rfc) {
            out.push_str("| Section | What the test shows | Test |\n|---|---|---|\n");
            for (section, rows) in sections {
                for row in rows {
                    writeln!(
                        out,
                        "| {} | {} | `{}` |",
                        show_section(section),
                        cell(&row.shows),
                        row.test
                    )
                    .unwrap();
                }
            }
            out.push('\n');
        } else {
            out.push_str("No test cites a section of this RFC.\n\n");
        }
        let missing: Vec<String> = page
            .cited
            .get(rfc)
            .into_iter()
            .flatten()
            .filter(|(s, _)| !shown(page.tested.get(rfc), s))
            .map(|(s, files)| {
                let files: Vec<String> = files.iter().map(|f| format!("`{f}`")).collect();
                format!("- {} (cited in {})", show_section(s), files.join(", "))
            })
            .collect();
        if !missing.is_empty() {
            out.push_str("**Not shown by a test:**\n\n");
            out.push_str(&missing.join("\n"));
            out.push_str("\n\n");
        }
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

/// The lines only the committed page has and those only the generated
/// one has (a few of each), so the failure says what went stale.
fn difference(old: &str, new: &str) -> String {
    let old_lines: BTreeSet<&str> = old.lines().collect();
    let new_lines: BTreeSet<&str> = new.lines().collect();
    let show = |sign: &str, from: &str, other: &BTreeSet<&str>| {
        let lines: Vec<&str> = from.lines().filter(|l| !other.contains(l)).collect();
        let mut text: Vec<String> = lines
            .iter()
            .take(6)
            .map(|l| format!("  {sign} {l}"))
            .collect();
        if lines.len() > 6 {
            text.push(format!("  {sign} … {} more", lines.len() - 6));
        }
        text.join("\n")
    };
    format!(
        "\n  in the page only:\n{}\n  generated now only:\n{}",
        show("-", old, &new_lines),
        show("+", new, &old_lines)
    )
}

#[test]
fn rfc_tests_page_is_up_to_date() {
    let page = render(&collect());
    let path = root().join(PAGE);
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    if on_disk == page {
        return;
    }
    if std::env::var_os("HOLDFAST_BLESS").is_some() {
        std::fs::write(&path, &page).unwrap();
        eprintln!("rewrote {PAGE}");
        return;
    }
    panic!(
        "{PAGE} is stale (or missing): {}\n\nIt is generated from the tests' comments; \
         regenerate it with\n  {REGENERATE}\nand commit the result.",
        difference(&on_disk, &page)
    );
}

/// The scanner finds what the page is for: the FSM's tests and the codec's
/// tests cite RFC 4271, and a test's body comment counts.
#[test]
fn the_scanner_finds_known_citations() {
    let page = collect();
    let r4271 = &page.tested[&4271];
    assert!(r4271.len() >= 15, "{} sections of RFC 4271", r4271.len());
    assert!(page.tests >= 70, "{} tests", page.tests);
    // rfc7606_actions_per_attribute names its RFC only in its name, and
    // its sections as "§7.1 ORIGIN" in its body.
    assert!(
        page.tested[&7606][&vec![7, 1]]
            .iter()
            .any(|r| r.test.ends_with("::rfc7606_actions_per_attribute")),
    );
    // The send hold timer test in bgp-proto/src/fsm/tests.rs cites its
    // section in a comment in its body.
    assert!(
        page.tested[&9687][&vec![4]]
            .iter()
            .any(|r| r.test.starts_with("bgp-proto/src/fsm/tests.rs::")),
    );
}

#[test]
fn citations_follow_bare_sections() {
    assert_eq!(
        citations("RFC 4271 §6.3 and §8.2.1.2; RFC 2545 §3. Then (RFC 4486) §4."),
        vec![
            (4271, vec![6, 3]),
            (4271, vec![8, 2, 1, 2]),
            (2545, vec![3]),
            (4486, vec![4]),
        ]
    );
    assert_eq!(citations("§6 alone has no RFC"), vec![]);
    assert_eq!(citations("NRFC 4271 §6"), vec![]);
}

#[test]
fn first_sentences() {
    assert_eq!(
        first_sentence("A, e.g. this. Then (more). And."),
        "A, e.g. this."
    );
    assert_eq!(
        first_sentence("Ends at 4.2 not before. X"),
        "Ends at 4.2 not before."
    );
    assert_eq!(first_sentence("One; two. holdfast then"), "One; two.");
}

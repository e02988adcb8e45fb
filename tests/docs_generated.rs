//! The reference pages generated from the code (src/docs.rs) are up to
//! date: each file under docs/ equals what the code generates now.
//!
//! After changing a command's help, a config key or a metric family,
//! regenerate them with `HOLDFAST_BLESS=1 cargo test --test docs_generated`
//! and commit the pages.

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The first line that differs, with a few lines of context, so the
/// failure says where the page went stale.
fn first_difference(old: &str, new: &str) -> String {
    let old_lines: Vec<&str> = old.lines().collect();
    let new_lines: Vec<&str> = new.lines().collect();
    let at = old_lines
        .iter()
        .zip(&new_lines)
        .position(|(a, b)| a != b)
        .unwrap_or(old_lines.len().min(new_lines.len()));
    let show = |lines: &[&str]| {
        lines
            .iter()
            .enumerate()
            .skip(at.saturating_sub(2))
            .take(5)
            .map(|(i, l)| format!("  {:>5} | {l}", i + 1))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "first difference at line {}:\n  in the file:\n{}\n  generated now:\n{}",
        at + 1,
        show(&old_lines),
        show(&new_lines)
    )
}

#[test]
fn generated_reference_pages_are_up_to_date() {
    let bless = std::env::var_os("HOLDFAST_BLESS").is_some();
    let mut stale = Vec::new();
    for page in holdfast::docs::pages() {
        let path = root().join(page.path);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        if on_disk == page.text {
            continue;
        }
        if bless {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &page.text).unwrap();
            eprintln!("rewrote {}", page.path);
        } else {
            stale.push(format!(
                "{} is stale (or missing): {}",
                page.path,
                first_difference(&on_disk, &page.text)
            ));
        }
    }
    assert!(
        stale.is_empty(),
        "{}\n\nThe pages are generated from the code; regenerate them with\n  {}\nand commit the result.",
        stale.join("\n\n"),
        holdfast::docs::REGENERATE
    );
}

/// Every page says it is generated, and how to regenerate it.
#[test]
fn every_page_says_it_is_generated() {
    for page in holdfast::docs::pages() {
        let first = page.text.lines().next().unwrap_or_default();
        assert!(
            first.starts_with("<!-- Generated from")
                && page.text.contains(holdfast::docs::REGENERATE),
            "{}: {first}",
            page.path
        );
    }
}

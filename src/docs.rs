//! The reference pages of the book that are generated from the code, so
//! that they cannot drift from it: the command line (from the clap command
//! tree), the configuration keys (from the parser's schema) and the metric
//! families (from the list `/metrics` renders).
//!
//! `tests/docs_generated.rs` compares each page under `docs/` with what
//! these functions return now, and rewrites them with
//! `HOLDFAST_BLESS=1 cargo test --test docs_generated`.

use std::fmt::Write as _;

use clap::{Arg, ArgAction, Command};

/// The command that rewrites every generated page.
pub const REGENERATE: &str = "HOLDFAST_BLESS=1 cargo test --test docs_generated";

/// A generated page: its path from the repository's root, and its text.
pub struct Page {
    /// E.g. `docs/src/reference/cli.md`.
    pub path: &'static str,
    /// The whole page, starting with the line that says it is generated.
    pub text: String,
}

/// Every generated page, in a stable order.
pub fn pages() -> Vec<Page> {
    vec![
        Page {
            path: "docs/src/reference/cli.md",
            text: cli(),
        },
        Page {
            path: "docs/src/reference/config.md",
            text: crate::config::schema::reference(&all_sections()),
        },
        Page {
            path: "docs/src/reference/metrics.md",
            text: crate::api::metrics::reference(),
        },
    ]
}

/// The first lines of every generated page: an HTML comment (invisible in
/// the book) that says where it comes from and how to regenerate it.
pub fn header(source: &str) -> String {
    format!(
        "<!-- Generated from {source} by src/docs.rs: do not edit by hand.\n     Regenerate with `{REGENERATE}`. -->\n\n"
    )
}

/// Markdown-safe text for a table cell or a list item: one line, `|`
/// escaped, and `<` escaped outside code spans (mdBook would take
/// `<stdin>` for an HTML tag).
pub fn inline(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out = String::with_capacity(one_line.len());
    let mut in_code = false;
    for c in one_line.chars() {
        match c {
            '`' => {
                in_code = !in_code;
                out.push(c);
            }
            '|' => out.push_str("\\|"),
            '<' if !in_code => out.push_str("&lt;"),
            _ => out.push(c),
        }
    }
    out
}

/// The CLI reference: one `##` section per command, in the order
/// `holdfast --help` lists them.
pub fn cli() -> String {
    let mut root = crate::cli::args::command();
    root.build();
    let mut out = header("the clap command tree in src/cli/args.rs");
    out.push_str("# Command-line reference\n\n");
    out.push_str(
        "Every command of `holdfast`, as `holdfast COMMAND --help` describes it. \
         The same command tree makes the manual pages (`holdfast man`) and the \
         shell completions (`holdfast completions SHELL`).\n\n",
    );
    command_section(&mut out, &mut root, "holdfast");
    let names: Vec<String> = root
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| c.get_name().to_string())
        .collect();
    for name in names {
        let sub = root
            .find_subcommand_mut(&name)
            .expect("a listed subcommand");
        command_section(&mut out, sub, &format!("holdfast {name}"));
    }
    out
}

fn command_section(out: &mut String, cmd: &mut Command, path: &str) {
    let _ = writeln!(out, "## `{path}`\n");
    let about = cmd
        .get_long_about()
        .or(cmd.get_about())
        .map(|s| s.to_string());
    if let Some(about) = about {
        for paragraph in about.trim().split("\n\n") {
            let _ = writeln!(out, "{}\n", inline(paragraph));
        }
    }
    let usage = cmd.render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    let _ = writeln!(out, "```text\n{usage}\n```\n");

    let args: Vec<Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .cloned()
        .collect();
    let (positionals, options): (Vec<&Arg>, Vec<&Arg>) =
        args.iter().partition(|a| a.is_positional());
    if !positionals.is_empty() {
        out.push_str("Arguments:\n\n");
        for arg in positionals {
            argument(out, cmd, arg);
        }
        out.push('\n');
    }
    if !options.is_empty() {
        out.push_str("Options:\n\n");
        for arg in options {
            argument(out, cmd, arg);
        }
        out.push('\n');
    }
    let subs: Vec<(String, String)> = cmd
        .get_subcommands()
        .filter(|c| !c.is_hide_set() && c.get_name() != "help")
        .map(|c| {
            let about = c.get_about().map(|s| s.to_string()).unwrap_or_default();
            (c.get_name().to_string(), about)
        })
        .collect();
    if !subs.is_empty() {
        out.push_str("Commands:\n\n");
        for (name, about) in subs {
            let _ = writeln!(out, "- `{path} {name}`: {}", inline(&about));
        }
        out.push('\n');
    }
}

/// One list item: how it is written, what it takes, its default and
/// help.
fn argument(out: &mut String, cmd: &Command, arg: &Arg) {
    let values: Vec<String> = arg
        .get_value_names()
        .map(|names| names.iter().map(|n| format!("<{n}>")).collect())
        .unwrap_or_else(|| vec![format!("<{}>", arg.get_id().as_str().to_uppercase())]);
    let takes_value = matches!(arg.get_action(), ArgAction::Set | ArgAction::Append);
    let mut spelled = if arg.is_positional() {
        values.join(" ")
    } else {
        let mut names = Vec::new();
        if let Some(s) = arg.get_short() {
            names.push(format!("-{s}"));
        }
        if let Some(l) = arg.get_long() {
            names.push(format!("--{l}"));
        }
        let mut s = names.join(", ");
        if takes_value {
            s.push(' ');
            s.push_str(&values.join(" "));
        }
        s
    };
    if matches!(arg.get_action(), ArgAction::Append) {
        spelled.push_str("...");
    }
    let mut facts = Vec::new();
    if arg.is_required_set() {
        facts.push("required".to_string());
    }
    if let Some(delimiter) = arg.get_value_delimiter() {
        facts.push(format!("several separated by `{delimiter}`"));
    }
    let possible: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !possible.is_empty() {
        facts.push(format!("one of {}", possible.join(", ")));
    }
    let defaults: Vec<String> = arg
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    if !defaults.is_empty() && takes_value {
        facts.push(format!("default {}", defaults.join(", ")));
    }
    let conflicts: Vec<String> = cmd
        .get_arg_conflicts_with(arg)
        .iter()
        .filter_map(|a| a.get_long().map(|l| format!("`--{l}`")))
        .collect();
    if !conflicts.is_empty() {
        facts.push(format!("not with {}", conflicts.join(", ")));
    }
    let help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|s| s.to_string())
        .unwrap_or_default();
    let _ = write!(out, "- `{spelled}`");
    if !facts.is_empty() {
        let _ = write!(out, " ({})", facts.join("; "));
    }
    let _ = writeln!(out, ": {}", inline(&help));
}

/// The tables of the configuration reference: the config file's, then the
/// VIP file's.
pub fn all_sections() -> Vec<crate::config::schema::Section> {
    let mut sections = crate::config::schema::sections();
    sections.push(crate::source::file::parse::VIP_SECTION);
    sections
}

//! Diagnostics: one `PATH:LINE:COL: message` line per problem found, and
//! `PATH:LINE:COL: warning: message` for what is valid but probably wrong.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// One problem found in a configuration or VIP file, at a 1-based line and
/// column (columns count characters, not bytes).
///
/// Displays as `path:line:col: message`, the form editors and CI logs
/// recognise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file the problem is in, as given to `load` or `parse`.
    pub path: PathBuf,
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, in characters.
    pub col: usize,
    /// What is wrong, and what is expected instead.
    pub message: String,
    /// An error refuses the file; a warning does not.
    pub severity: Severity,
}

/// How bad a [`Diagnostic`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// The file is refused: `check` exits 1, `run` does not start, a
    /// reload is not applied.
    Error,
    /// The file is accepted and does what it says, but what it says is
    /// very likely not what was meant (a foot-gun): `check` prints it and
    /// exits 0 (1 with `--deny-warnings`), `run` logs it at start and on
    /// every reload it applies.
    Warning,
}

impl Diagnostic {
    /// True for [`Severity::Warning`].
    pub fn is_warning(&self) -> bool {
        self.severity == Severity::Warning
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = match self.severity {
            Severity::Error => "",
            Severity::Warning => "warning: ",
        };
        write!(
            f,
            "{}:{}:{}: {tag}{}",
            self.path.display(),
            self.line,
            self.col,
            self.message
        )
    }
}

/// How many problems a message lists; the rest are counted. A VIP file of
/// 400,000 bad lines made a 46 MB message: in the log, in `/v1/status`,
/// in `/readyz`. Twenty are enough to see the pattern and fix it.
pub const MAX_LISTED: usize = 20;

/// The longest line of such a message, in characters (then "…").
pub const MAX_LINE: usize = 500;

/// The diagnostics as one message, a `path:line:col: message` line each:
/// the first [`MAX_LISTED`], then `path: … and N more problems` for the
/// rest.
pub fn list(diagnostics: &[Diagnostic]) -> String {
    let mut lines: Vec<String> = diagnostics
        .iter()
        .take(MAX_LISTED)
        .map(|d| {
            // A message quotes the value it is about, which may be a
            // megabyte of one string.
            let line = d.to_string();
            match line.char_indices().nth(MAX_LINE) {
                Some((cut, _)) => format!("{}…", &line[..cut]),
                None => line,
            }
        })
        .collect();
    if let Some(first_unlisted) = diagnostics.get(MAX_LISTED) {
        let more = diagnostics.len() - MAX_LISTED;
        lines.push(format!(
            "{}: … and {more} more problem{} (the first {MAX_LISTED} are listed)",
            first_unlisted.path.display(),
            if more == 1 { "" } else { "s" }
        ));
    }
    lines.join("\n")
}

/// Collects diagnostics for one file, turning byte offsets into line/column.
pub(crate) struct Diagnostics<'a> {
    path: &'a Path,
    text: &'a str,
    /// Byte offset at which each line starts.
    line_starts: Vec<usize>,
    found: Vec<Diagnostic>,
}

impl<'a> Diagnostics<'a> {
    pub(crate) fn new(path: &'a Path, text: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Diagnostics {
            path,
            text,
            line_starts,
            found: Vec::new(),
        }
    }

    /// Records a problem at the start of `span` (byte offsets into the text).
    pub(crate) fn error(&mut self, span: &Range<usize>, message: impl Into<String>) {
        self.record(span, message.into(), Severity::Error);
    }

    /// Records a warning at the start of `span`: valid, but probably not
    /// what was meant.
    pub(crate) fn warning(&mut self, span: &Range<usize>, message: impl Into<String>) {
        self.record(span, message.into(), Severity::Warning);
    }

    fn record(&mut self, span: &Range<usize>, message: String, severity: Severity) {
        let (line, col) = self.line_col(span.start);
        self.found.push(Diagnostic {
            path: self.path.to_path_buf(),
            line,
            col,
            message,
            severity,
        });
    }

    /// 1-based line of a byte offset, for messages that point back at an
    /// earlier definition ("first defined on line 12").
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        self.line_col(offset).0
    }

    /// `PATH:LINE:COL` of a byte offset, for messages that name a second
    /// place in the file.
    pub(crate) fn position(&self, offset: usize) -> String {
        let (line, col) = self.line_col(offset);
        format!("{}:{line}:{col}", self.path.display())
    }

    fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|&start| start <= offset);
        let start = self
            .line_starts
            .get(line.saturating_sub(1))
            .copied()
            .unwrap_or(0);
        // Snap to a character boundary so a span inside a multi-byte
        // character cannot make the slice below fail.
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let col = self.text.get(start..end).map_or(0, |s| s.chars().count()) + 1;
        (line.max(1), col)
    }

    /// The source text of a span, if the span is valid.
    pub(crate) fn snippet(&self, span: &Range<usize>) -> Option<&'a str> {
        self.text.get(span.clone())
    }

    /// True when no error was recorded (warnings do not count).
    pub(crate) fn is_empty(&self) -> bool {
        !self.found.iter().any(|d| d.severity == Severity::Error)
    }

    /// All diagnostics in file order (stable for equal positions, so problems
    /// found at one spot keep the order they were checked in), each once:
    /// the toml parser's error recovery can report one problem twice.
    pub(crate) fn into_sorted(mut self) -> Vec<Diagnostic> {
        self.found.sort_by_key(|d| (d.line, d.col));
        self.found.dedup();
        self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_first_problems_and_counts_the_rest() {
        let at = |line| Diagnostic {
            path: PathBuf::from("vips.toml"),
            line,
            col: 1,
            message: "bad".into(),
            severity: Severity::Error,
        };
        let few: Vec<Diagnostic> = (1..=MAX_LISTED).map(at).collect();
        assert_eq!(list(&few).lines().count(), MAX_LISTED);
        assert!(!list(&few).contains("more"));
        let many: Vec<Diagnostic> = (1..=400_000).map(at).collect();
        let text = list(&many);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), MAX_LISTED + 1);
        assert_eq!(lines[0], "vips.toml:1:1: bad");
        assert_eq!(lines[MAX_LISTED - 1], "vips.toml:20:1: bad");
        assert_eq!(
            lines[MAX_LISTED],
            "vips.toml: … and 399980 more problems (the first 20 are listed)"
        );
        let long = Diagnostic {
            message: "x".repeat(1 << 20),
            ..at(1)
        };
        let text = list(&[long]);
        assert_eq!(text.chars().count(), MAX_LINE + 1);
        assert!(text.starts_with("vips.toml:1:1: xxx") && text.ends_with("x…"));
        let one_more: Vec<Diagnostic> = (1..=MAX_LISTED + 1).map(at).collect();
        assert!(list(&one_more).ends_with("… and 1 more problem (the first 20 are listed)"));
    }

    #[test]
    fn positions_are_one_based_and_count_characters() {
        let text = "a = 1\nbé = \"x\"\n";
        let mut d = Diagnostics::new(Path::new("f.toml"), text);
        d.error(&(0..1), "first");
        // 'é' is two bytes; the '=' after it is the 4th character.
        let eq = text.rfind('=').expect("test text has an '='");
        d.error(&(eq..eq + 1), "second");
        d.error(&(text.len()..text.len()), "at end");
        let lines: Vec<String> = d.into_sorted().iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            vec![
                "f.toml:1:1: first",
                "f.toml:2:4: second",
                "f.toml:3:1: at end"
            ]
        );
    }
}

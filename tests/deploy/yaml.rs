//! A strict reader for the subset of YAML that `deploy/` is written in,
//! into `serde_json::Value`.
//!
//! The project takes no YAML crate (serde_yaml is unmaintained and no
//! successor is an established standard yet), and the manifests need very
//! little: block mappings and sequences, quoted and plain scalars, one-line
//! flow sequences of scalars, `{}`, comments and `---` between documents.
//! Everything else is an error naming the file and line — in particular
//! every plain scalar whose meaning differs between YAML 1.1 and 1.2 or
//! between parsers (`yes`, `on`, `0440`, `1:20`, floats), so what this
//! reads is what kubectl and kustomize read.

use serde_json::{Map, Value};

#[derive(Debug, Clone)]
struct Line {
    /// 1-based line number in the file.
    no: usize,
    indent: usize,
    text: String,
}

/// Every document of `text` (a file's contents), in order; `origin` names
/// the file in errors. Empty documents are left out.
pub fn parse_documents(origin: &str, text: &str) -> Result<Vec<Value>, String> {
    let mut docs = Vec::new();
    let mut current = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let err = |m: &str| format!("{origin}:{no}: {m}");
        if raw == "---" || raw.starts_with("--- ") {
            docs.push(std::mem::take(&mut current));
            continue;
        }
        if raw.starts_with("...") || raw.starts_with('%') {
            return Err(err(
                "directives and document end markers are outside the subset",
            ));
        }
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let rest = &raw[indent..];
        if rest.starts_with('\t') || (rest.trim().is_empty() && raw.contains('\t')) {
            return Err(err("tab in indentation"));
        }
        let text = strip_comment(rest).map_err(|m| err(&m))?;
        if text.is_empty() {
            continue;
        }
        current.push(Line {
            no,
            indent,
            text: text.to_string(),
        });
    }
    docs.push(current);
    let mut out = Vec::new();
    for lines in docs {
        if lines.is_empty() {
            continue;
        }
        let mut p = Parser {
            origin,
            lines,
            pos: 0,
        };
        let indent = p.lines[0].indent;
        if indent != 0 {
            return Err(p.err(0, "a document must start at column 1"));
        }
        let value = p.block(0)?;
        if p.pos < p.lines.len() {
            return Err(p.err(p.pos, "unexpected line (wrong indentation?)"));
        }
        out.push(value);
    }
    Ok(out)
}

/// The line without its comment and trailing blanks. A `#` starts a
/// comment at the start of the line or after a blank, outside quotes; a
/// quote only opens a quoted scalar where one can start.
fn strip_comment(line: &str) -> Result<&str, String> {
    let bytes = line.as_bytes();
    let mut quote: Option<u8> = None;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(b'"') if c == b'\\' => i += 1,
            Some(q) if c == q => {
                if q == b'\'' && bytes.get(i + 1) == Some(&b'\'') {
                    i += 1;
                } else {
                    quote = None;
                }
            }
            Some(_) => {}
            None => {
                let at_token_start = i == 0 || matches!(bytes[i - 1], b' ' | b'[' | b',');
                if (c == b'"' || c == b'\'') && at_token_start {
                    quote = Some(c);
                } else if c == b'#' && (i == 0 || bytes[i - 1] == b' ') {
                    return Ok(line[..i].trim_end());
                }
            }
        }
        i += 1;
    }
    if quote.is_some() {
        return Err(
            "unterminated quoted scalar (multi-line scalars are outside the subset)".into(),
        );
    }
    Ok(line.trim_end())
}

struct Parser<'a> {
    origin: &'a str,
    lines: Vec<Line>,
    pos: usize,
}

fn is_seq_item(text: &str) -> bool {
    text == "-" || text.starts_with("- ")
}

impl Parser<'_> {
    fn err(&self, at: usize, message: &str) -> String {
        let no = self.lines.get(at).map_or(0, |l| l.no);
        format!("{}:{no}: {message}", self.origin)
    }

    /// The block (mapping or sequence) whose lines start at `indent`.
    fn block(&mut self, indent: usize) -> Result<Value, String> {
        let line = &self.lines[self.pos];
        if line.indent != indent {
            return Err(self.err(self.pos, "unexpected indentation"));
        }
        if is_seq_item(&line.text) {
            self.sequence(indent)
        } else {
            self.mapping(indent)
        }
    }

    fn sequence(&mut self, indent: usize) -> Result<Value, String> {
        let mut items = Vec::new();
        while self.pos < self.lines.len() {
            let line = self.lines[self.pos].clone();
            if line.indent < indent || (line.indent == indent && !is_seq_item(&line.text)) {
                break;
            }
            if line.indent > indent {
                return Err(self.err(self.pos, "unexpected indentation in a sequence"));
            }
            let rest = line.text[1..].trim_start();
            if rest.is_empty() {
                self.pos += 1;
                match self.lines.get(self.pos) {
                    Some(next) if next.indent > indent => {
                        let i = next.indent;
                        items.push(self.block(i)?);
                    }
                    _ => items.push(Value::Null),
                }
            } else if key_split(rest).is_some() && !rest.starts_with(['"', '\'', '[', '{']) {
                // "- key: value": a mapping whose first entry sits on this
                // line, at the column after the dash.
                let col = line.indent + (line.text.len() - rest.len());
                self.lines[self.pos] = Line {
                    no: line.no,
                    indent: col,
                    text: rest.to_string(),
                };
                items.push(self.mapping(col)?);
            } else {
                self.pos += 1;
                items.push(inline(rest).map_err(|m| self.err(self.pos - 1, &m))?);
            }
        }
        Ok(Value::Array(items))
    }

    fn mapping(&mut self, indent: usize) -> Result<Value, String> {
        let mut map = Map::new();
        while self.pos < self.lines.len() {
            let line = self.lines[self.pos].clone();
            if line.indent < indent || (line.indent == indent && is_seq_item(&line.text)) {
                break;
            }
            if line.indent > indent {
                return Err(self.err(self.pos, "unexpected indentation in a mapping"));
            }
            let (key, rest) =
                key_split(&line.text).ok_or_else(|| self.err(self.pos, "expected `key: value`"))?;
            let key = match inline(key).map_err(|m| self.err(self.pos, &m))? {
                Value::String(s) => s,
                other => {
                    return Err(self.err(self.pos, &format!("key {other} is not a string")));
                }
            };
            if map.contains_key(&key) {
                return Err(self.err(self.pos, &format!("duplicate key {key:?}")));
            }
            self.pos += 1;
            let value = if rest.is_empty() {
                match self.lines.get(self.pos) {
                    Some(next) if next.indent > indent => {
                        let i = next.indent;
                        self.block(i)?
                    }
                    // A sequence may sit at its key's own indentation.
                    Some(next) if next.indent == indent && is_seq_item(&next.text) => {
                        self.sequence(indent)?
                    }
                    _ => Value::Null,
                }
            } else {
                inline(rest).map_err(|m| self.err(self.pos - 1, &m))?
            };
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

/// `key: rest` → (key, rest): the first `: ` (or a final `:`) outside
/// quotes.
fn key_split(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    if let Some(&q) = bytes.first().filter(|c| **c == b'"' || **c == b'\'') {
        i = 1;
        while i < bytes.len() {
            if bytes[i] == b'\\' && q == b'"' {
                i += 1;
            } else if bytes[i] == q {
                break;
            }
            i += 1;
        }
        i += 1;
    }
    while i < bytes.len() {
        if bytes[i] == b':' && (i + 1 == bytes.len() || bytes[i + 1] == b' ') {
            return Some((&text[..i], text[i + 1..].trim()));
        }
        i += 1;
    }
    None
}

/// A scalar, a one-line flow sequence of scalars, or `{}`.
fn inline(text: &str) -> Result<Value, String> {
    if text == "{}" {
        return Ok(Value::Object(Map::new()));
    }
    if let Some(inner) = text.strip_prefix('[') {
        let inner = inner
            .strip_suffix(']')
            .ok_or("a flow sequence must close on its line")?;
        let mut items = Vec::new();
        for part in split_flow(inner)? {
            let part = part.trim();
            if part.is_empty() {
                return Err(format!("empty item in flow sequence [{inner}]"));
            }
            items.push(scalar(part)?);
        }
        return Ok(Value::Array(items));
    }
    scalar(text)
}

fn split_flow(inner: &str) -> Result<Vec<&str>, String> {
    if inner.trim().is_empty() {
        return Ok(Vec::new());
    }
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in inner.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(q) if c == q => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == ',' => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            None if "[]{}".contains(c) => {
                return Err("nested flow collections are outside the subset".into());
            }
            None => {}
        }
    }
    parts.push(&inner[start..]);
    Ok(parts)
}

fn scalar(text: &str) -> Result<Value, String> {
    if let Some(body) = text.strip_prefix('"') {
        let body = body
            .strip_suffix('"')
            .ok_or_else(|| format!("text after a quoted scalar: {text}"))?;
        let mut out = String::new();
        let mut chars = body.chars();
        while let Some(c) = chars.next() {
            match c {
                '"' => return Err(format!("unescaped quote in {text}")),
                '\\' => out.push(match chars.next() {
                    Some('"') => '"',
                    Some('\\') => '\\',
                    Some('/') => '/',
                    Some('n') => '\n',
                    Some('t') => '\t',
                    other => {
                        return Err(format!(
                            "escape \\{} is outside the subset",
                            other.map(String::from).unwrap_or_default()
                        ));
                    }
                }),
                c => out.push(c),
            }
        }
        return Ok(Value::String(out));
    }
    if let Some(body) = text.strip_prefix('\'') {
        let body = body
            .strip_suffix('\'')
            .ok_or_else(|| format!("text after a quoted scalar: {text}"))?;
        if body.replace("''", "").contains('\'') {
            return Err(format!("unescaped quote in {text}"));
        }
        return Ok(Value::String(body.replace("''", "'")));
    }
    plain(text)
}

/// A plain (unquoted) scalar, resolved the way YAML 1.2's core schema and
/// go-yaml agree on; anything they could disagree on must be quoted.
fn plain(text: &str) -> Result<Value, String> {
    let quote_it = |why: &str| Err(format!("plain scalar {text:?} {why}: quote it"));
    if text.starts_with([
        '[', ']', '{', '}', ',', '#', '&', '*', '!', '|', '>', '%', '@', '`', '?', ':',
    ]) || text == "-"
        || text.starts_with("- ")
    {
        return quote_it("starts with a YAML indicator");
    }
    if text.contains(": ") || text.contains(" #") {
        return quote_it("contains `: ` or ` #`");
    }
    match text {
        "null" | "Null" | "NULL" | "~" => return Ok(Value::Null),
        "true" | "True" | "TRUE" => return Ok(Value::Bool(true)),
        "false" | "False" | "FALSE" => return Ok(Value::Bool(false)),
        _ => {}
    }
    let lower = text.to_ascii_lowercase();
    if ["yes", "no", "on", "off", "y", "n"].contains(&lower.as_str()) {
        return quote_it("is a boolean in YAML 1.1 and a string in YAML 1.2");
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if digits.len() > 1 && digits.starts_with('0') {
            return quote_it("is octal in YAML 1.1 and decimal in YAML 1.2");
        }
        let n: i64 = text
            .parse()
            .map_err(|e| format!("integer {text:?} out of range: {e}"))?;
        return Ok(Value::from(n));
    }
    if may_be_number(text) {
        return quote_it("may be read as a number (float, hex, octal, binary or base 60)");
    }
    Ok(Value::String(text.to_string()))
}

/// Forms some YAML parser reads as a number: floats (`1.5`, `1e3`,
/// `.inf`), `+5`, hex/octal/binary prefixes, digits with underscores and
/// YAML 1.1's base 60 (`1:20`). (`127.0.0.1` is none of these: a string.)
fn may_be_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let lower = unsigned.to_ascii_lowercase();
    let digits_or = |extra: u8| {
        !unsigned.is_empty() && unsigned.bytes().all(|b| b.is_ascii_digit() || b == extra)
    };
    let base60 = unsigned.contains(':')
        && unsigned.split(':').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b == b'.' || b == b'_')
        });
    text.parse::<f64>().is_ok()
        || ["0x", "0o", "0b"].iter().any(|p| lower.starts_with(p))
        || (unsigned.contains('_') && digits_or(b'_'))
        || base60
        || [".inf", ".nan"].contains(&lower.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(text: &str) -> Value {
        let mut docs = parse_documents("t.yaml", text).unwrap();
        assert_eq!(docs.len(), 1, "{docs:?}");
        docs.remove(0)
    }

    fn error(text: &str) -> String {
        parse_documents("t.yaml", text).unwrap_err()
    }

    #[test]
    fn block_mappings_sequences_and_scalars() {
        let v = one("# comment\n\
             a: 1\n\
             b: text with spaces # trailing comment\n\
             c:\n  d: true\n  e: null\n\
             f:\n- x\n- 'it''s'\n\
             g:\n  - name: n1\n    value: \"q # not a comment\"\n  - name: n2\n\
             h: [\"\", \"events.k8s.io\"]\n\
             i: {}\n\
             j: --config\n\
             k: 127.0.0.1\n\
             l: -5\n");
        assert_eq!(
            v,
            json!({
                "a": 1, "b": "text with spaces", "c": {"d": true, "e": null},
                "f": ["x", "it's"],
                "g": [{"name": "n1", "value": "q # not a comment"}, {"name": "n2"}],
                "h": ["", "events.k8s.io"], "i": {}, "j": "--config",
                "k": "127.0.0.1", "l": -5
            })
        );
    }

    #[test]
    fn documents_are_split_on_dashes() {
        let docs = parse_documents("t.yaml", "a: 1\n---\n# only a comment\n---\nb: 2\n").unwrap();
        assert_eq!(docs, vec![json!({"a": 1}), json!({"b": 2})]);
    }

    #[test]
    fn nested_sequence_items() {
        assert_eq!(one("-\n  - a\n  - b\n- c\n"), json!([["a", "b"], "c"]));
        // "- - b" (a sequence in a sequence on one line) is outside the
        // subset: refused, never read as the string "- b".
        let e = error("- - b\n");
        assert!(e.contains("indicator"), "{e}");
    }

    #[test]
    fn ambiguous_scalars_must_be_quoted() {
        for bad in [
            "yes", "On", "n", "0440", "1.5", "0x1F", "1:20", ".inf", "1e3",
        ] {
            let e = error(&format!("a: {bad}\n"));
            assert!(
                e.contains("quote it") && e.starts_with("t.yaml:1:"),
                "{bad}: {e}"
            );
        }
        assert_eq!(one("a: \"0440\"\n"), json!({"a": "0440"}));
        assert_eq!(one("a: 'yes'\n"), json!({"a": "yes"}));
    }

    #[test]
    fn structure_errors_name_the_line() {
        assert!(error("a: 1\na: 2\n").contains("t.yaml:2: duplicate key \"a\""));
        assert!(error("a:\n\tb: 1\n").contains("tab"));
        assert!(error("a: 1\n   b: 2\n").contains("t.yaml:2: unexpected indentation"));
        assert!(error("a: |\n  text\n").contains("quote it"));
        assert!(error("a: &anchor 1\n").contains("quote it"));
        assert!(error("a: [[1]]\n").contains("nested"));
        assert!(error("a: \"open\n").contains("unterminated"));
        assert!(error("just text\n").contains("expected `key: value`"));
    }
}

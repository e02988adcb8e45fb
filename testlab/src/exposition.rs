//! A strict reader of the Prometheus text exposition format 0.0.4, for
//! tests: it rejects what a Prometheus server would reject, and more (a
//! sample without a `# TYPE`), and hands back the samples so a test can
//! read a metric's value by name and labels.
//!
//! Rules checked: metric and label names match the format's grammar
//! (`[a-zA-Z_:][a-zA-Z0-9_:]*`, `[a-zA-Z_][a-zA-Z0-9_]*`, no label name
//! starting `__`); label values use only the `\\`, `\"`, `\n` escapes; help
//! text only `\\` and `\n`; `# TYPE` at most once per family and before its
//! samples; `# HELP` at most once; each family one contiguous group; no
//! series twice; values parse as floats (`NaN`, `+Inf`, `-Inf` included);
//! counters never negative; the text ends with a line feed.

use std::collections::{HashMap, HashSet};

#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
    pub timestamp_ms: Option<i64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Family {
    pub name: String,
    pub help: Option<String>,
    /// counter, gauge, histogram, summary or untyped.
    pub kind: String,
    pub samples: Vec<Sample>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct Exposition {
    pub families: Vec<Family>,
}

impl Exposition {
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families.iter().find(|f| f.name == name)
    }

    /// The value of the series with exactly these labels (in any order).
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Vec<(&str, &str)> = labels.to_vec();
        want.sort();
        self.families
            .iter()
            .flat_map(|f| &f.samples)
            .find(|s| {
                let mut have: Vec<(&str, &str)> = s
                    .labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                have.sort();
                s.name == name && have == want
            })
            .map(|s| s.value)
    }

    /// Every sample of every family, in order.
    pub fn samples(&self) -> impl Iterator<Item = &Sample> {
        self.families.iter().flat_map(|f| &f.samples)
    }
}

/// Reads a whole exposition; the error names the line.
pub fn parse(text: &str) -> Result<Exposition, String> {
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the last line does not end with a line feed".into());
    }
    let mut families: Vec<Family> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    // Families whose group of lines has ended: seeing them again is an error.
    let mut closed: HashSet<usize> = HashSet::new();
    let mut current: Option<usize> = None;
    let mut series: HashSet<(String, Vec<(String, String)>)> = HashSet::new();

    for (n, line) in text.lines().enumerate() {
        let at = |e: String| format!("line {}: {e}: {line:?}", n + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let mut words = rest.trim_start_matches([' ', '\t']).splitn(2, [' ', '\t']);
            let keyword = words.next().unwrap_or("");
            if keyword != "HELP" && keyword != "TYPE" {
                continue; // a plain comment
            }
            let rest = words.next().unwrap_or("").trim_start_matches([' ', '\t']);
            let (name, tail) = match rest.split_once([' ', '\t']) {
                Some((n, t)) => (n, t.trim_start_matches([' ', '\t'])),
                None => (rest, ""),
            };
            check_metric_name(name).map_err(at)?;
            let i = match index.get(name) {
                Some(&i) => {
                    if closed.contains(&i) || current != Some(i) {
                        return Err(at(format!("{name} appears in two separate groups")));
                    }
                    i
                }
                None => {
                    if let Some(c) = current {
                        closed.insert(c);
                    }
                    families.push(Family {
                        name: name.to_string(),
                        help: None,
                        kind: String::new(),
                        samples: Vec::new(),
                    });
                    index.insert(name.to_string(), families.len() - 1);
                    families.len() - 1
                }
            };
            current = Some(i);
            let family = &mut families[i];
            if keyword == "HELP" {
                if family.help.is_some() {
                    return Err(at(format!("second HELP for {name}")));
                }
                family.help = Some(unescape(tail, false).map_err(at)?);
            } else {
                if !family.kind.is_empty() {
                    return Err(at(format!("second TYPE for {name}")));
                }
                if !family.samples.is_empty() {
                    return Err(at(format!("TYPE for {name} after its samples")));
                }
                let kind = tail.trim_end_matches([' ', '\t']);
                if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                    return Err(at(format!("unknown metric type {kind:?}")));
                }
                family.kind = kind.to_string();
            }
            continue;
        }

        let sample = parse_sample(line).map_err(at)?;
        let i = family_of(&sample.name, &index, &families)
            .ok_or_else(|| at(format!("{} has no preceding TYPE line", sample.name)))?;
        if current != Some(i) {
            return Err(at(format!(
                "{} appears in two separate groups",
                families[i].name
            )));
        }
        let mut key_labels = sample.labels.clone();
        key_labels.sort();
        if key_labels.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(at("a label name appears twice".into()));
        }
        if !series.insert((sample.name.clone(), key_labels)) {
            return Err(at("duplicate series".into()));
        }
        if families[i].kind == "counter" && (sample.value.is_nan() || sample.value < 0.0) {
            return Err(at("a counter is negative or NaN".into()));
        }
        families[i].samples.push(sample);
    }
    Ok(Exposition { families })
}

/// The family a sample belongs to: its own name, or for histograms and
/// summaries the name without the `_bucket`/`_sum`/`_count` suffix.
fn family_of(name: &str, index: &HashMap<String, usize>, families: &[Family]) -> Option<usize> {
    if let Some(&i) = index.get(name)
        && !families[i].kind.is_empty()
    {
        return Some(i);
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && let Some(&i) = index.get(base)
        {
            let kind = families[i].kind.as_str();
            if kind == "histogram" || (kind == "summary" && suffix != "_bucket") {
                return Some(i);
            }
        }
    }
    None
}

fn check_metric_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
    if ok {
        Ok(())
    } else {
        Err(format!("invalid metric name {name:?}"))
    }
}

fn check_label_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(format!("invalid label name {name:?}"));
    }
    if name.starts_with("__") {
        return Err(format!("label name {name:?} is reserved"));
    }
    Ok(())
}

/// Undoes the escapes; `quotes`: label values, where `\"` is also valid.
fn unescape(s: &str, quotes: bool) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\\') => out.push('\\'),
            Some('n') => out.push('\n'),
            Some('"') if quotes => out.push('"'),
            Some(other) => return Err(format!("invalid escape \\{other}")),
            None => return Err("a lone backslash at the end".into()),
        }
    }
    Ok(out)
}

fn parse_value(s: &str) -> Result<f64, String> {
    match s {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => {
            // Rust would also take "inf", "infinity" and "nan" in any case;
            // the format does not.
            if s.chars()
                .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
            {
                return Err(format!("invalid value {s:?}"));
            }
            s.parse::<f64>().map_err(|_| format!("invalid value {s:?}"))
        }
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line
        .find(['{', ' ', '\t'])
        .ok_or("a sample without a value")?;
    let name = &line[..name_end];
    check_metric_name(name)?;
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut s = after;
        loop {
            s = s.trim_start_matches([' ', '\t']);
            if let Some(after) = s.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = s.find('=').ok_or("a label without '='")?;
            let label = s[..eq].trim_end_matches([' ', '\t']);
            check_label_name(label)?;
            s = s[eq + 1..].trim_start_matches([' ', '\t']);
            s = s.strip_prefix('"').ok_or("a label value without quotes")?;
            // The closing quote is the first one not escaped.
            let mut end = None;
            let mut escaped = false;
            for (i, c) in s.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let end = end.ok_or("an unterminated label value")?;
            labels.push((label.to_string(), unescape(&s[..end], true)?));
            s = s[end + 1..].trim_start_matches([' ', '\t']);
            if let Some(after) = s.strip_prefix(',') {
                s = after;
            } else if !s.starts_with('}') {
                return Err("labels not separated by ','".into());
            }
        }
    }
    if !rest.starts_with([' ', '\t']) {
        return Err("no space before the value".into());
    }
    let mut fields = rest.split([' ', '\t']).filter(|f| !f.is_empty());
    let value = parse_value(fields.next().ok_or("a sample without a value")?)?;
    let timestamp_ms = match fields.next() {
        None => None,
        Some(t) => Some(
            t.parse::<i64>()
                .map_err(|_| format!("invalid timestamp {t:?}"))?,
        ),
    };
    if fields.next().is_some() {
        return Err("text after the timestamp".into());
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
        timestamp_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_valid_exposition() {
        let text = "# HELP a_total Things, with \\\\ and \\n.\n# TYPE a_total counter\n\
                    a_total{x=\"q\\\"uote\",y=\"b\\\\s\\nl\"} 3\n\
                    a_total{x=\"2\"} 1e3 1700000000000\n\
                    # a comment\n\
                    # TYPE g gauge\ng -Inf\n\
                    # TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1.5\nh_count 2\n";
        let e = parse(text).unwrap();
        assert_eq!(e.families.len(), 3);
        assert_eq!(
            e.family("a_total").unwrap().help.as_deref(),
            Some("Things, with \\ and \n.")
        );
        assert_eq!(
            e.value("a_total", &[("y", "b\\s\nl"), ("x", "q\"uote")]),
            Some(3.0)
        );
        assert_eq!(e.value("a_total", &[("x", "2")]), Some(1000.0));
        assert_eq!(e.value("g", &[]), Some(f64::NEG_INFINITY));
        assert_eq!(e.value("h_count", &[]), Some(2.0));
        assert_eq!(e.value("a_total", &[]), None);
    }

    #[test]
    fn rejects_what_prometheus_would() {
        let bad = [
            ("x 1\n", "no preceding TYPE"),
            ("# TYPE x gauge\nx 1", "line feed"),
            ("# TYPE x gauge\n# TYPE x gauge\nx 1\n", "second TYPE"),
            ("# HELP x a\n# HELP x b\n# TYPE x gauge\n", "second HELP"),
            ("# TYPE x gauge\nx 1\n# TYPE x gauge\n", "second TYPE"),
            ("# TYPE x gauge\nx 1\nx 2\n", "duplicate series"),
            (
                "# TYPE x gauge\nx{a=\"1\",b=\"2\"} 1\nx{b=\"2\",a=\"1\"} 1\n",
                "duplicate series",
            ),
            (
                "# TYPE x gauge\n# TYPE y gauge\ny 1\nx 1\n",
                "two separate groups",
            ),
            (
                "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\n# HELP x again\n",
                "two separate groups",
            ),
            ("# TYPE 1x gauge\n", "invalid metric name"),
            ("# TYPE x-y gauge\n", "invalid metric name"),
            ("# TYPE x gauge\nx{1a=\"v\"} 1\n", "invalid label name"),
            ("# TYPE x gauge\nx{__name__=\"v\"} 1\n", "reserved"),
            ("# TYPE x gauge\nx{a=\"v\\t\"} 1\n", "invalid escape"),
            ("# TYPE x gauge\nx{a=\"v} 1\n", "unterminated"),
            ("# TYPE x gauge\nx{a=v} 1\n", "without quotes"),
            ("# TYPE x gauge\nx{a=\"1\" b=\"2\"} 1\n", "not separated"),
            ("# TYPE x gauge\nx{a=\"1\",a=\"2\"} 1\n", "appears twice"),
            ("# TYPE x gauge\nx one\n", "invalid value"),
            ("# TYPE x gauge\nx inf\n", "invalid value"),
            ("# TYPE x gauge\nx\n", "without a value"),
            ("# TYPE x gauge\nx 1 2 3\n", "after the timestamp"),
            ("# TYPE x gauge\nx 1 1.5\n", "invalid timestamp"),
            ("# TYPE x_total counter\nx_total -1\n", "negative"),
            ("# TYPE x frequency\n", "unknown metric type"),
            ("# TYPE x gauge\nx_sum 1\n", "no preceding TYPE"),
            ("# HELP x bad \\q\n", "invalid escape"),
        ];
        for (text, why) in bad {
            match parse(text) {
                Ok(_) => panic!("accepted {text:?}, expected an error with {why:?}"),
                Err(e) => assert!(e.contains(why), "{text:?}: {e:?} lacks {why:?}"),
            }
        }
    }
}

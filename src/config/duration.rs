//! Durations written as strings with units: "500ms", "9s", "5m", "1h",
//! and combinations such as "1m30s" (largest unit first, each unit once).

use std::time::Duration;

/// Units in the order they must appear, with their length in milliseconds.
const UNITS: [(&str, u64); 4] = [("h", 3_600_000), ("m", 60_000), ("s", 1_000), ("ms", 1)];

/// Parses a duration string. The error says what is wrong and what is
/// expected, ready to be prefixed with the key's name; its examples are
/// built from the value written.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_for(text, &|_| true)
}

/// Like [`parse_duration`], for a key that takes only some durations: every
/// example the error suggests passes `accept` (the key's own check), so
/// writing the suggestion back gives a value the key takes.
pub(crate) fn parse_duration_for(
    text: &str,
    accept: &dyn Fn(Duration) -> bool,
) -> Result<Duration, String> {
    let expected = format!(
        "expected a number with a unit (ms, s, m, h){}",
        examples(
            &[Duration::from_secs(9), Duration::from_secs(90)],
            accept,
            format_duration
        )
    );
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(format!("is empty; {expected}"));
    }
    if trimmed.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "\"{text}\" has no unit; add one{}",
            bare_number_examples(trimmed, accept)
        ));
    }
    let mut rest = trimmed;
    let mut total_ms: u64 = 0;
    // Index into UNITS of the last unit seen: each later part must use a
    // strictly smaller unit, so "30s1m" and "1s1s" are rejected.
    let mut last_unit: Option<usize> = None;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            if rest.starts_with('-') {
                return Err(format!("\"{text}\" is negative; durations are 0 or more"));
            }
            return Err(format!("\"{text}\" is not a duration; {expected}"));
        }
        let (number, after) = rest.split_at(digits);
        if after.starts_with('.') {
            return Err(fraction_error(text, accept));
        }
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!(
                "\"{text}\" has a number without a unit; {expected}"
            ));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(format!(
                "\"{text}\" has unknown unit \"{unit}\"; use ms, s, m or h"
            ));
        };
        if last_unit.is_some_and(|last| index <= last) {
            // The same length, written the way it must be ("30s1m" → "1m30s").
            let rewritten = lenient_ns(trimmed)
                .filter(|ns| ns.is_multiple_of(1_000_000))
                .and_then(|ns| u64::try_from(ns / 1_000_000).ok())
                .map(|ms| vec![Duration::from_millis(ms)])
                .unwrap_or_default();
            return Err(format!(
                "\"{text}\": write each unit once, largest first{}",
                examples(&rewritten, accept, format_duration)
            ));
        }
        last_unit = Some(index);
        let value: u64 = number
            .parse()
            .map_err(|_| format!("\"{text}\" is too large"))?;
        total_ms = value
            .checked_mul(UNITS[index].1)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(|| format!("\"{text}\" is too large"))?;
        rest = after;
    }
    Ok(Duration::from_millis(total_ms))
}

/// `", e.g. \"A\" or \"B\""` for the first two candidates the key
/// accepts, or nothing when it accepts none.
fn examples(
    candidates: &[Duration],
    accept: &dyn Fn(Duration) -> bool,
    format: fn(Duration) -> String,
) -> String {
    let written: Vec<(Duration, String)> = candidates.iter().map(|&c| (c, format(c))).collect();
    examples_written(&written, accept)
}

fn examples_written(
    candidates: &[(Duration, String)],
    accept: &dyn Fn(Duration) -> bool,
) -> String {
    let mut shown: Vec<&str> = Vec::new();
    for (c, text) in candidates {
        if accept(*c) && !shown.contains(&text.as_str()) && shown.len() < 2 {
            shown.push(text);
        }
    }
    match shown.as_slice() {
        [] => String::new(),
        [one] => format!(", e.g. \"{one}\""),
        [first, second, ..] => format!(", e.g. \"{first}\" or \"{second}\""),
    }
}

/// `", e.g. \"30s\" or \"30ms\""` for a bare number 30: the number with
/// a unit added (seconds, else milliseconds, else minutes), the readings
/// `accept` takes.
pub(crate) fn bare_number_examples(digits: &str, accept: &dyn Fn(Duration) -> bool) -> String {
    let Ok(n) = digits.parse::<u64>() else {
        return String::new();
    };
    let mut candidates = vec![
        (Duration::from_secs(n), format!("{n}s")),
        (Duration::from_millis(n), format!("{n}ms")),
    ];
    if let Some(secs) = n.checked_mul(60) {
        candidates.push((Duration::from_secs(secs), format!("{n}m")));
    }
    examples_written(&candidates, accept)
}

/// `"9.5s"`: the same length in whole numbers of a smaller unit
/// (`"9500ms"`), or, for a key that takes only whole seconds, the nearest
/// whole seconds.
fn fraction_error(text: &str, accept: &dyn Fn(Duration) -> bool) -> String {
    let Some(ns) = lenient_ns(text.trim()) else {
        return format!("\"{text}\" has a fraction; use whole numbers of a smaller unit");
    };
    // Whole milliseconds are the finest a duration is written in.
    let ms = (ns + 500_000) / 1_000_000;
    let Ok(ms) = u64::try_from(ms) else {
        return format!("\"{text}\" is too large");
    };
    let exact = Duration::from_millis(ms);
    if ns.is_multiple_of(1_000_000) && accept(exact) {
        return format!(
            "\"{text}\" has a fraction; use whole numbers of a smaller unit{}",
            examples(&[exact], accept, format_single_unit)
        );
    }
    let down = Duration::from_secs(ms / 1000);
    let up = Duration::from_secs(ms.div_ceil(1000));
    let rounded = examples(&[exact, down, up], accept, format_single_unit);
    if rounded.is_empty() {
        format!("\"{text}\" has a fraction; write whole numbers")
    } else {
        format!("\"{text}\" has a fraction; write whole numbers{rounded}")
    }
}

/// Reads `text` as a sum of decimal numbers with units, in any order and
/// with fractions — what the operator meant — in nanoseconds (fractions
/// below a nanosecond dropped). None if it is not even that.
fn lenient_ns(text: &str) -> Option<u128> {
    let mut rest = text;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int, after) = rest.split_at(int_len);
        let (frac, after) = match after.strip_prefix('.') {
            Some(f) => {
                let n = f.bytes().take_while(u8::is_ascii_digit).count();
                f.split_at(n)
            }
            None => ("", after),
        };
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        let unit_len = after.bytes().take_while(u8::is_ascii_alphabetic).count();
        let (unit, after) = after.split_at(unit_len);
        let unit_ns = u128::from(UNITS.iter().find(|(name, _)| *name == unit)?.1) * 1_000_000;
        let int: u128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let frac = &frac[..frac.len().min(18)];
        let frac_ns = if frac.is_empty() {
            0
        } else {
            frac.parse::<u128>().ok()? * unit_ns / 10u128.pow(frac.len() as u32)
        };
        total = total.checked_add(int.checked_mul(unit_ns)?.checked_add(frac_ns)?)?;
        rest = after;
    }
    Some(total)
}

/// A duration in the largest single unit that holds it whole ("90s",
/// "9500ms", "2h"), the way an example reads best.
fn format_single_unit(duration: Duration) -> String {
    let ms = duration.as_millis();
    for (name, unit_ms) in UNITS {
        let unit_ms = u128::from(unit_ms);
        if ms.is_multiple_of(unit_ms) && ms > 0 {
            return format!("{}{name}", ms / unit_ms);
        }
    }
    "0s".to_string()
}

/// Formats a duration the way it would be written in the config ("1m30s",
/// "500ms", "0s"), for messages that quote values back to the operator.
pub fn format_duration(duration: Duration) -> String {
    let mut ms = duration.as_millis();
    if ms == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    for (name, unit_ms) in UNITS {
        let unit_ms = u128::from(unit_ms);
        let count = ms / unit_ms;
        if count > 0 {
            out.push_str(&count.to_string());
            out.push_str(name);
            ms -= count * unit_ms;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn single_units() {
        assert_eq!(parse_duration("500ms"), Ok(ms(500)));
        assert_eq!(parse_duration("9s"), Ok(ms(9_000)));
        assert_eq!(parse_duration("5m"), Ok(ms(300_000)));
        assert_eq!(parse_duration("1h"), Ok(ms(3_600_000)));
        assert_eq!(parse_duration("0s"), Ok(ms(0)));
        assert_eq!(parse_duration("0ms"), Ok(ms(0)));
    }

    #[test]
    fn combinations_largest_unit_first() {
        assert_eq!(parse_duration("1m30s"), Ok(ms(90_000)));
        assert_eq!(parse_duration("1h30m"), Ok(ms(5_400_000)));
        assert_eq!(parse_duration("1h0m1s250ms"), Ok(ms(3_601_250)));
        // "m" followed by "s" must not be read as "ms".
        assert_eq!(parse_duration("2m5s"), Ok(ms(125_000)));
    }

    #[test]
    fn bare_number_asks_for_a_unit() {
        assert_eq!(
            parse_duration("30"),
            Err("\"30\" has no unit; add one, e.g. \"30s\" or \"30ms\"".to_string())
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "", " ", "s", "1x", "1.5s", "-1s", "30s1m", "1s1s", "1m 30s", "1d", "1 h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        assert_eq!(
            parse_duration("1.5s"),
            Err(
                "\"1.5s\" has a fraction; use whole numbers of a smaller unit, e.g. \"1500ms\""
                    .to_string()
            )
        );
        assert_eq!(
            parse_duration("30s1m"),
            Err("\"30s1m\": write each unit once, largest first, e.g. \"1m30s\"".to_string())
        );
        assert_eq!(
            parse_duration("3d"),
            Err("\"3d\" has unknown unit \"d\"; use ms, s, m or h".to_string())
        );
    }

    #[test]
    fn rejects_overflow_without_panicking() {
        assert!(parse_duration("99999999999999999999s").is_err());
        assert!(parse_duration("18446744073709551615h").is_err());
    }

    #[test]
    fn formats_back() {
        for text in ["0s", "500ms", "9s", "1m30s", "1h", "1h0m1s", "2h5m"] {
            let parsed = parse_duration(text).expect("valid duration");
            let expected = if text == "1h0m1s" { "1h1s" } else { text };
            assert_eq!(format_duration(parsed), expected);
        }
        assert_eq!(format_duration(Duration::from_micros(1_500)), "1ms");
    }
}

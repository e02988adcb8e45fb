//! Typed, position-aware reading of the TOML tree.
//!
//! The toml crate's `DeTable` keeps the byte span of every key and value.
//! These helpers read values out of it and, instead of stopping at the
//! first problem, record a diagnostic for each one and return `None`, so a
//! single `holdfast check` run lists everything that needs fixing.

use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::time::Duration;

use toml::Spanned;
use toml::de::{DeString, DeTable, DeValue};

use super::diagnostic::Diagnostics;
use super::duration::{bare_number_examples, parse_duration_for};
use super::schema::{IntRange, Key};
pub(crate) use crate::suggest::did_you_mean;

pub(crate) type Value<'i> = Spanned<DeValue<'i>>;

/// A table (a `[section]`, one `[[array]]` element or an inline table),
/// with the span to blame when a required key is missing and a human name
/// for messages ("[[peer]]", "[[peer]] graceful_restart").
pub(crate) struct Table<'t, 'i> {
    table: &'t DeTable<'i>,
    span: Range<usize>,
    pub(crate) context: String,
}

impl<'t, 'i> Table<'t, 'i> {
    pub(crate) fn root(table: &'t DeTable<'i>) -> Self {
        Table {
            table,
            span: 0..0,
            context: String::new(),
        }
    }

    /// Reads `value` as a table; reports a type error for `key` otherwise.
    pub(crate) fn from_value(
        value: &'t Value<'i>,
        key: &str,
        context: String,
        d: &mut Diagnostics,
    ) -> Option<Self> {
        match value.get_ref() {
            DeValue::Table(table) => Some(Table {
                table,
                span: value.span(),
                context,
            }),
            other => {
                d.error(
                    &value.span(),
                    format!("{key} must be a table, got {}", type_name(other)),
                );
                None
            }
        }
    }

    pub(crate) fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&'t Value<'i>> {
        self.table.get(key)
    }

    /// Every key and value, in key order.
    pub(crate) fn entries(
        &self,
    ) -> impl Iterator<Item = (&'t Spanned<DeString<'i>>, &'t Value<'i>)> + use<'t, 'i> {
        self.table.iter()
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.table.contains_key(key)
    }

    /// "in [[peer]]", or "at the top level" for the document itself.
    fn location(&self) -> String {
        if self.context.is_empty() {
            "at the top level".to_string()
        } else {
            format!("in {}", self.context)
        }
    }

    /// Reports every key not in `known`, at the key, with a suggestion when
    /// one of the known keys is a near miss.
    pub(crate) fn reject_unknown_keys(&self, schema: &[Key], d: &mut Diagnostics) {
        let known: Vec<&str> = schema.iter().map(|k| k.name).collect();
        let known = known.as_slice();
        for key in self.table.keys() {
            let name: &str = key.get_ref();
            if known.contains(&name) {
                continue;
            }
            let mut message = format!("unknown key \"{name}\" {}", self.location());
            match did_you_mean(name, known) {
                Some(suggestion) => message.push_str(&format!(" (did you mean \"{suggestion}\"?)")),
                None => message.push_str(&format!("; expected one of {}", quoted_list(known))),
            }
            d.error(&key.span(), message);
        }
    }

    /// The value of a required key, or a diagnostic at this table's header.
    pub(crate) fn required(&self, key: &str, d: &mut Diagnostics) -> Option<&'t Value<'i>> {
        let value = self.get(key);
        if value.is_none() {
            d.error(
                &self.span,
                format!("missing required key \"{key}\" {}", self.location()),
            );
        }
        value
    }
}

/// "a string", "an integer"... for type errors.
pub(crate) fn type_name(value: &DeValue<'_>) -> &'static str {
    match value {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date-time",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn type_error(value: &Value<'_>, key: &str, expected: &str, d: &mut Diagnostics) {
    d.error(
        &value.span(),
        format!(
            "{key} must be {expected}, got {}",
            type_name(value.get_ref())
        ),
    );
}

pub(crate) fn string<'t>(value: &'t Value<'_>, key: &str, d: &mut Diagnostics) -> Option<&'t str> {
    match value.get_ref() {
        DeValue::String(s) => Some(s.as_ref()),
        _ => {
            type_error(value, key, "a string", d);
            None
        }
    }
}

/// The path of a file holding a secret (`password_file`, a BFD
/// `key_file`, `api_token_file`): a non-empty string, relative to the
/// config file's directory. `holds` names the secret in the message.
pub(crate) fn secret_file_path(
    value: &Value<'_>,
    key: &str,
    holds: &str,
    config_dir: &std::path::Path,
    d: &mut Diagnostics,
) -> Option<std::path::PathBuf> {
    let text = string(value, key, d)?;
    if text.is_empty() {
        d.error(
            &value.span(),
            format!("{key} is empty; give the path of the file holding the {holds}"),
        );
        return None;
    }
    Some(config_dir.join(text))
}

pub(crate) fn boolean(value: &Value<'_>, key: &str, d: &mut Diagnostics) -> Option<bool> {
    match value.get_ref() {
        DeValue::Boolean(b) => Some(*b),
        _ => {
            type_error(value, key, "true or false", d);
            None
        }
    }
}

pub(crate) fn array<'t, 'i>(
    value: &'t Value<'i>,
    key: &str,
    d: &mut Diagnostics,
) -> Option<&'t [Value<'i>]> {
    match value.get_ref() {
        DeValue::Array(items) => Some(items),
        _ => {
            type_error(value, key, "an array", d);
            None
        }
    }
}

/// The elements of a `[[key]]` array of tables (or an inline array).
pub(crate) fn array_of_tables<'t, 'i>(
    value: &'t Value<'i>,
    key: &str,
    d: &mut Diagnostics,
) -> Option<&'t [Value<'i>]> {
    if let DeValue::Table(_) = value.get_ref() {
        d.error(
            &value.span(),
            format!("[{key}] must be an array of tables: write [[{key}]], one per entry"),
        );
        return None;
    }
    array(value, key, d)
}

/// An integer within `min..=max`, converted to `T`.
pub(crate) fn integer_in<T: TryFrom<i128>>(
    value: &Value<'_>,
    key: &str,
    range: IntRange,
    d: &mut Diagnostics,
) -> Option<T> {
    let IntRange { min, max } = range;
    let DeValue::Integer(int) = value.get_ref() else {
        type_error(value, key, "an integer", d);
        return None;
    };
    // The toml parser has already checked the digits; this can only fail for
    // numbers beyond i128, which are out of range anyway.
    let parsed = i128::from_str_radix(int.as_str(), int.radix()).ok();
    match parsed {
        Some(n) if (min..=max).contains(&n) => match T::try_from(n) {
            Ok(v) => Some(v),
            Err(_) => {
                d.error(
                    &value.span(),
                    format!("{key} must be in {min}..={max}, got {n}"),
                );
                None
            }
        },
        Some(n) => {
            d.error(
                &value.span(),
                format!("{key} must be in {min}..={max}, got {n}"),
            );
            None
        }
        None => {
            d.error(
                &value.span(),
                format!("{key} must be in {min}..={max}, got {int}"),
            );
            None
        }
    }
}

/// A duration written as a string with units.
pub(crate) fn duration(value: &Value<'_>, key: &str, d: &mut Diagnostics) -> Option<Duration> {
    duration_checked(value, key, d, |_| Ok(()))
}

/// A duration that must also pass `check`, the key's own rule (its error
/// is reported at the value). The examples a malformed value is answered
/// with pass `check` too, so a suggestion written back is taken.
pub(crate) fn duration_checked(
    value: &Value<'_>,
    key: &str,
    d: &mut Diagnostics,
    check: impl Fn(Duration) -> Result<(), String>,
) -> Option<Duration> {
    let accept = |t: Duration| check(t).is_ok();
    match value.get_ref() {
        DeValue::String(s) => match parse_duration_for(s, &accept) {
            Ok(duration) => match check(duration) {
                Ok(()) => Some(duration),
                Err(why) => {
                    d.error(&value.span(), why);
                    None
                }
            },
            Err(why) => {
                d.error(&value.span(), format!("{key}: {why}"));
                None
            }
        },
        DeValue::Integer(int) => {
            let examples = bare_number_examples(&int.to_string(), &accept);
            d.error(
                &value.span(),
                format!("{key} must be a string with a unit{examples}; a bare number has no unit"),
            );
            None
        }
        _ => {
            type_error(value, key, "a duration string such as \"9s\"", d);
            None
        }
    }
}

/// An IPv4 or IPv6 address (no prefix length, no port), as written: an
/// IPv4-mapped one stays IPv6 here; each caller applies its rule
/// (crate::model::net).
pub(crate) fn ip_address(value: &Value<'_>, key: &str, d: &mut Diagnostics) -> Option<IpAddr> {
    let text = string(value, key, d)?;
    match text.parse::<IpAddr>() {
        Ok(ip) => Some(ip),
        Err(_) => {
            let hint = if text.contains('/') {
                " (a single address, not a prefix)"
            } else {
                ""
            };
            d.error(
                &value.span(),
                format!("{key} must be an IPv4 or IPv6 address{hint}, got \"{text}\""),
            );
            None
        }
    }
}

/// An address and port: "127.0.0.1:9179" or "[::1]:9179"; an IPv4-mapped
/// address is refused (crate::model::net).
pub(crate) fn socket_address(
    value: &Value<'_>,
    key: &str,
    d: &mut Diagnostics,
) -> Option<SocketAddr> {
    let text = string(value, key, d)?;
    match text.parse::<SocketAddr>() {
        Ok(addr) => {
            let Some(v4) = crate::model::net::v4_mapped(addr.ip()) else {
                return Some(addr);
            };
            // One spelling per address (crate::model::net): a mapped address
            // here is the IPv4 one, which is what to write.
            d.error(
                &value.span(),
                format!(
                    "{key} {text} is an IPv4-mapped IPv6 address; write the IPv4 address and port \"{v4}:{}\"",
                    addr.port()
                ),
            );
            None
        }
        Err(_) => {
            d.error(
                &value.span(),
                format!(
                    "{key} must be an address and port such as \"127.0.0.1:9179\" or \"[::1]:9179\", got \"{text}\""
                ),
            );
            None
        }
    }
}

/// One string out of a fixed set of words, with a suggestion for near
/// misses. `what` names the thing in the message ("family", "kind").
pub(crate) fn keyword<T: Copy>(
    value: &Value<'_>,
    key: &str,
    what: &str,
    choices: &[(&str, T)],
    d: &mut Diagnostics,
) -> Option<T> {
    let text = string(value, key, d)?;
    if let Some((_, v)) = choices.iter().find(|(name, _)| *name == text) {
        return Some(*v);
    }
    let names: Vec<&str> = choices.iter().map(|(name, _)| *name).collect();
    let mut message = format!("{what} \"{text}\"");
    match did_you_mean(text, &names) {
        Some(suggestion) => message.push_str(&format!("; did you mean \"{suggestion}\"?")),
        None => message.push_str(&format!("; expected {}", quoted_list(&names))),
    }
    d.error(&value.span(), message);
    None
}

/// Reads every element of an array with `read`, keeping going past bad
/// elements; `None` if the array itself or any element was bad.
pub(crate) fn each<'t, 'i, T>(
    value: &'t Value<'i>,
    key: &str,
    d: &mut Diagnostics,
    mut read: impl FnMut(&'t Value<'i>, &mut Diagnostics) -> Option<T>,
) -> Option<Vec<T>> {
    let items = array(value, key, d)?;
    let mut out = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        match read(item, d) {
            Some(v) => out.push(v),
            None => ok = false,
        }
    }
    ok.then_some(out)
}

/// An array read element by element, continuing past bad elements, with
/// repeated elements reported at their second occurrence. `None` if the
/// array, any element, or any repetition was bad.
pub(crate) fn unique_list<'t, 'i, T: PartialEq>(
    value: &'t Value<'i>,
    key: &str,
    d: &mut Diagnostics,
    mut read: impl FnMut(&'t Value<'i>, &mut Diagnostics) -> Option<T>,
    describe: impl Fn(&T) -> String,
) -> Option<Vec<T>> {
    let items = array(value, key, d)?;
    let mut good: Vec<(T, Range<usize>)> = Vec::with_capacity(items.len());
    let mut ok = true;
    for item in items {
        match read(item, d) {
            Some(v) => good.push((v, item.span())),
            None => ok = false,
        }
    }
    // Checked even when some elements were bad, so one run shows both.
    let unique = reject_duplicates(&good, key, describe, d);
    (ok && unique).then(|| good.into_iter().map(|(v, _)| v).collect())
}

/// Reports the second and later occurrences of an element in a list.
fn reject_duplicates<T: PartialEq>(
    items: &[(T, Range<usize>)],
    key: &str,
    describe: impl Fn(&T) -> String,
    d: &mut Diagnostics,
) -> bool {
    let mut ok = true;
    for (i, (item, span)) in items.iter().enumerate() {
        if items[..i].iter().any(|(earlier, _)| earlier == item) {
            d.error(span, format!("{} is listed twice in {key}", describe(item)));
            ok = false;
        }
    }
    ok
}

/// `"a", "b" or "c"`.
pub(crate) fn quoted_list(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_choices_readably() {
        assert_eq!(quoted_list(&["a"]), "\"a\"");
        assert_eq!(quoted_list(&["a", "b", "c"]), "\"a\", \"b\" or \"c\"");
    }
}

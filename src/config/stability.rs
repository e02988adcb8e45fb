//! `[stability]`: how long a vanished VIP stays advertised, and damping.

use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::tree::{self, Table};
use crate::stability::ParamsError;

/// `[stability]`: the stability layer's own parameter type, so that each
/// value is defined and defaulted once (`stability::Params`). The config
/// layer fills it in and judges it with the layer's own `validate`, at the
/// offending line, so `check`, `run` and a reload refuse the same files.
pub use crate::stability::Params as Stability;

/// `[stability.damping]`: flap damping after RFC 2439 §4.2, applied to VIP
/// absences (`stability::DampingParams`).
pub use crate::stability::DampingParams as Damping;

/// `withdraw_rate`'s default, per second.
pub const DEFAULT_WITHDRAW_RATE: f64 = 10.0;

/// `withdraw_rate` bounds, per second: one an hour, a million a second.
const MIN_RATE: f64 = 1.0 / 3600.0;
const MAX_RATE: f64 = 1_000_000.0;

/// Keys of `[stability]`.
pub(crate) const STABILITY_KEYS: &[&str] = &[
    "withdraw_hold_down",
    "advertise_delay",
    "delete_delay",
    "local_endpoint_delay",
    "damping",
    "max_withdraw_fraction",
    "withdraw_rate",
];

/// Keys of `[stability.damping]`.
pub(crate) const DAMPING_KEYS: &[&str] = &[
    "enabled",
    "half_life",
    "penalty",
    "suppress_threshold",
    "reuse_threshold",
    "max_suppress",
];

pub(crate) fn parse_stability(table: &Table<'_, '_>, d: &mut Diagnostics) -> Option<Stability> {
    table.reject_unknown_keys(STABILITY_KEYS, d);
    let defaults = Stability::default();
    let duration = |key: &str, default: Duration, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::duration(v, key, d),
    };
    let withdraw_hold_down = duration("withdraw_hold_down", defaults.withdraw_hold_down, d);
    let advertise_delay = duration("advertise_delay", defaults.advertise_delay, d);
    let delete_delay = duration("delete_delay", defaults.delete_delay, d);
    let local_endpoint_delay = duration("local_endpoint_delay", defaults.local_endpoint_delay, d);
    let damping = match table.get("damping") {
        None => Some(None),
        Some(v) => parse_damping(v, d),
    };
    let max_withdraw_fraction = match table.get("max_withdraw_fraction") {
        None => Some(defaults.guard.max_withdraw_fraction),
        Some(v) => parse_fraction(v, d),
    };
    let withdraw_rate = match table.get("withdraw_rate") {
        None => Some(DEFAULT_WITHDRAW_RATE),
        Some(v) => parse_rate(v, d),
    };
    let params = Stability {
        withdraw_hold_down: withdraw_hold_down?,
        advertise_delay: advertise_delay?,
        delete_delay: delete_delay?,
        local_endpoint_delay: local_endpoint_delay?,
        damping: damping?,
        // The daemon fills it in from `speaker.graceful_shutdown_wait`.
        graceful_shutdown_wait: Duration::ZERO,
        guard: crate::stability::GuardParams {
            max_withdraw_fraction: max_withdraw_fraction?,
            // The parser keeps the rate within MIN_RATE..=MAX_RATE, so the
            // interval is at least 1 µs and at most an hour.
            withdraw_interval: Duration::from_secs_f64(1.0 / withdraw_rate?),
        },
    };
    // The one judgement of these values: the stability layer's own, so
    // nothing `check` accepts is refused later by `run` or a reload.
    match params.validate() {
        Ok(()) => Some(params),
        Err(e) => {
            let at = offending_span(table, &e);
            d.error(&at, e.to_string());
            None
        }
    }
}

/// Where in `[stability]` the value `e` complains about is written: the
/// key's value when the file sets it, else the table (a default is never
/// refused on its own, but a default next to a set value can be).
fn offending_span(table: &Table<'_, '_>, e: &ParamsError) -> std::ops::Range<usize> {
    let key = match e {
        ParamsError::TooLong { field, .. } | ParamsError::Zero { field } => *field,
        ParamsError::ReuseNotBelowSuppress { .. } => "stability.damping.reuse_threshold",
        ParamsError::UnusableCeiling { .. } => "stability.damping.max_suppress",
        ParamsError::Fraction { .. } => "stability.max_withdraw_fraction",
    };
    let mut path = key.split('.').skip(1);
    let span_in = |t: &Table<'_, '_>, k: &str| t.get(k).map(|v| v.span());
    match (path.next(), path.next()) {
        (Some("damping"), Some(inner)) => {
            let Some(damping) = table.get("damping") else {
                return table.span();
            };
            match damping.get_ref() {
                toml::de::DeValue::Table(t) => t.get(inner).map(|v| v.span()),
                _ => None,
            }
            .unwrap_or(damping.span())
        }
        (Some(k), None) => span_in(table, k).unwrap_or(table.span()),
        _ => table.span(),
    }
}

/// A number, integer or float.
fn number(value: &tree::Value<'_>) -> Option<f64> {
    match value.get_ref() {
        toml::de::DeValue::Float(f) => f.as_str().parse().ok(),
        toml::de::DeValue::Integer(i) => i.as_str().parse().ok(),
        _ => None,
    }
}

/// `max_withdraw_fraction`: a number in (0, 1].
fn parse_fraction(value: &tree::Value<'_>, d: &mut Diagnostics) -> Option<f64> {
    let key = "max_withdraw_fraction";
    match number(value) {
        Some(f) if f > 0.0 && f <= 1.0 => Some(f),
        Some(f) => {
            d.error(
                &value.span(),
                format!("{key} must be more than 0 and at most 1 (1 turns the guard off), got {f}"),
            );
            None
        }
        None => {
            d.error(
                &value.span(),
                format!("{key} must be a number such as 0.5, more than 0 and at most 1"),
            );
            None
        }
    }
}

/// `withdraw_rate`: `"10/s"`, `"30/m"`, `"100/h"`, or a number (per second).
fn parse_rate(value: &tree::Value<'_>, d: &mut Diagnostics) -> Option<f64> {
    let key = "withdraw_rate";
    let per_second = match value.get_ref() {
        toml::de::DeValue::String(s) => {
            let parsed = s.split_once('/').and_then(|(n, unit)| {
                let n: f64 = n.trim().parse().ok()?;
                let per = match unit.trim() {
                    "s" => 1.0,
                    "m" | "min" => 60.0,
                    "h" => 3600.0,
                    _ => return None,
                };
                Some(n / per)
            });
            let Some(rate) = parsed else {
                d.error(
                    &value.span(),
                    format!(
                        "{key} must be withdrawals per unit of time, such as \"10/s\", \"30/m\" or \"100/h\", got \"{}\"",
                        s.as_ref()
                    ),
                );
                return None;
            };
            rate
        }
        _ => match number(value) {
            Some(rate) => rate,
            None => {
                d.error(
                    &value.span(),
                    format!("{key} must be a string such as \"10/s\" or a number (per second)"),
                );
                return None;
            }
        },
    };
    if !(MIN_RATE..=MAX_RATE).contains(&per_second) {
        d.error(
            &value.span(),
            format!(
                "{key} must be more than 0: at least one withdrawal an hour (\"1/h\") and at most {MAX_RATE} a second"
            ),
        );
        return None;
    }
    Some(per_second)
}

fn parse_damping(value: &tree::Value<'_>, d: &mut Diagnostics) -> Option<Option<Damping>> {
    let table = Table::from_value(value, "damping", "[stability.damping]".to_string(), d)?;
    table.reject_unknown_keys(DAMPING_KEYS, d);
    let defaults = Damping::default();
    let enabled = match table.get("enabled") {
        None => Some(true),
        Some(v) => tree::boolean(v, "enabled", d),
    };
    let positive_duration = |key: &str, default: Duration, d: &mut Diagnostics| match table.get(key)
    {
        None => Some(default),
        Some(v) => tree::duration_checked(v, key, d, |t| {
            if t.is_zero() {
                return Err(format!("{key} must be more than 0s"));
            }
            Ok(())
        }),
    };
    let number = |key: &str, default: u32, d: &mut Diagnostics| match table.get(key) {
        None => Some(default),
        Some(v) => tree::integer_in(v, key, 1, i128::from(u32::MAX), d),
    };
    let half_life = positive_duration("half_life", defaults.half_life, d);
    let max_suppress = positive_duration("max_suppress", defaults.max_suppress, d);
    let penalty = number("penalty", defaults.penalty, d);
    let suppress_threshold = number("suppress_threshold", defaults.suppress_threshold, d);
    let reuse_threshold = number("reuse_threshold", defaults.reuse_threshold, d);

    let mut ok = true;
    if let (Some(reuse), Some(suppress)) = (reuse_threshold, suppress_threshold) {
        if reuse >= suppress {
            let at = table
                .get("reuse_threshold")
                .or(table.get("suppress_threshold"))
                .map_or(table.span(), |v| v.span());
            d.error(
                &at,
                format!(
                    "reuse_threshold ({reuse}) must be less than suppress_threshold ({suppress})"
                ),
            );
            ok = false;
        }
        // RFC 2439 §4.2: the penalty ceiling is reuse * 2^(max_suppress /
        // half_life). If it is not above the suppress threshold, damping
        // can never engage.
        if let (true, Some(half_life), Some(max_suppress)) = (ok, half_life, max_suppress) {
            let exponent = max_suppress.as_secs_f64() / half_life.as_secs_f64();
            let ceiling = f64::from(reuse) * libm::exp2(exponent);
            if ceiling <= f64::from(suppress) {
                let at = table
                    .get("max_suppress")
                    .or(table.get("half_life"))
                    .map_or(table.span(), |v| v.span());
                d.error(
                    &at,
                    format!(
                        "damping could never engage: the penalty ceiling reuse_threshold × 2^(max_suppress/half_life) = {ceiling:.0} does not exceed suppress_threshold ({suppress}) (RFC 2439 §4.2); raise max_suppress ({}) or lower half_life ({})",
                        format_duration(max_suppress),
                        format_duration(half_life)
                    ),
                );
                ok = false;
            }
        }
    }
    let damping = Damping {
        half_life: half_life?,
        penalty: penalty?,
        suppress_threshold: suppress_threshold?,
        reuse_threshold: reuse_threshold?,
        max_suppress: max_suppress?,
    };
    if !ok {
        return None;
    }
    Some(enabled?.then_some(damping))
}

//! `[stability]`: how long a vanished VIP stays advertised, and damping.

use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::schema::{DefaultValue, Key, POSITIVE_U32, Range, Section, duration};
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
/// `[stability.damping] enabled` when left out: present means enabled.
pub const DEFAULT_DAMPING_ENABLED: bool = true;

/// "at most 8760h", the bound of every `[stability]` duration.
fn max_timer() -> String {
    format!("at most {}", duration(crate::stability::MAX_TIMER))
}

pub(crate) const STABILITY_KEYS: &[Key] = &[
    Key {
        name: "withdraw_hold_down",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Stability::default().withdraw_hold_down)),
        range: Range::Text(max_timer),
        meaning: "A VIP that disappears stays advertised until it has been absent this long; reappearing inside the window costs no UPDATE.",
    },
    Key {
        name: "advertise_delay",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Stability::default().advertise_delay)),
        range: Range::Text(max_timer),
        meaning: "Wait after a VIP first appears before advertising it, so bursts go out together.",
    },
    Key {
        name: "delete_delay",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Stability::default().delete_delay)),
        range: Range::Text(max_timer),
        meaning: "Hold-down for definitive removals (Service deleted, opted out), which are not flaps.",
    },
    Key {
        name: "local_endpoint_delay",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Stability::default().local_endpoint_delay)),
        range: Range::Text(max_timer),
        meaning: "Traffic policy `Local`: how long a VIP stays advertised once this node has no ready endpoint of its Service left (not ready, terminating, or the EndpointSlice deleted). The node's datapath drops the Service's traffic meanwhile, so keep it short; the hold-down does not apply. Damping, when enabled, still holds a VIP whose endpoint keeps flapping.",
    },
    Key {
        name: "damping",
        kind: "table",
        default: DefaultValue::Text("none (no damping)"),
        range: Range::Any,
        meaning: "RFC 2439-style damping of VIP absences; present means enabled. Its keys are in the damping section.",
    },
    Key {
        name: "max_withdraw_fraction",
        kind: "number",
        default: DefaultValue::Value(|| {
            Stability::default().guard.max_withdraw_fraction.to_string()
        }),
        range: Range::Text(|| "more than 0, at most 1".to_string()),
        meaning: "Mass-withdrawal guard: at most this share of this node's routes is withdrawn in one step; the rest goes at `withdraw_rate`. `1` turns the guard off. See *The mass-withdrawal guard*.",
    },
    Key {
        name: "withdraw_rate",
        kind: "\"N/s\", \"N/m\", \"N/h\" or a number (per second)",
        default: DefaultValue::Value(|| format!("\"{DEFAULT_WITHDRAW_RATE}/s\"")),
        range: Range::Text(|| format!("\"{}/h\"..=\"{}/s\"", MIN_RATE * 3600.0, MAX_RATE)),
        meaning: "How fast the withdrawals the guard holds back go out.",
    },
];

/// The reference's section for these keys.
pub(crate) const STABILITY_SECTION: Section = Section {
    title: "`[stability]` (optional)",
    intro: "The mass-withdrawal guard (`max_withdraw_fraction`, `withdraw_rate`): one step that would withdraw more than `max_withdraw_fraction` of the routes this node has on the wire goes out progressively: the allowed share (`floor(fraction × routes)`, at least one) is withdrawn at once, the rest is held back and released at `withdraw_rate`, in prefix order. A drained node and a failing probe are never slowed.",
    keys: STABILITY_KEYS,
};

/// Keys of `[stability.damping]`.
pub(crate) const DAMPING_KEYS: &[Key] = &[
    Key {
        name: "enabled",
        kind: "boolean",
        default: DefaultValue::Value(|| DEFAULT_DAMPING_ENABLED.to_string()),
        range: Range::Any,
        meaning: "Turn damping off without deleting the table.",
    },
    Key {
        name: "half_life",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Damping::default().half_life)),
        range: Range::Text(|| format!("above 0, {}", max_timer())),
        meaning: "Time for the penalty to halve.",
    },
    Key {
        name: "penalty",
        kind: "integer",
        default: DefaultValue::Value(|| Damping::default().penalty.to_string()),
        range: Range::Int(POSITIVE_U32),
        meaning: "Penalty per absence.",
    },
    Key {
        name: "suppress_threshold",
        kind: "integer",
        default: DefaultValue::Value(|| Damping::default().suppress_threshold.to_string()),
        range: Range::Int(POSITIVE_U32),
        meaning: "Penalty above which the VIP is held advertised.",
    },
    Key {
        name: "reuse_threshold",
        kind: "integer",
        default: DefaultValue::Value(|| Damping::default().reuse_threshold.to_string()),
        range: Range::Int(POSITIVE_U32),
        meaning: "Penalty below which normal hold-down applies again; must be below `suppress_threshold`.",
    },
    Key {
        name: "max_suppress",
        kind: "duration",
        default: DefaultValue::Value(|| duration(Damping::default().max_suppress)),
        range: Range::Text(|| format!("above 0, {}", max_timer())),
        meaning: "Longest hold by damping; above 0. `reuse_threshold × 2^(max_suppress / half_life)` must exceed `suppress_threshold`, or damping could never engage, and must be a finite number (`half_life = \"1ms\"` with `max_suppress = \"1000h\"` is refused).",
    },
];

/// The reference's section for these keys.
pub(crate) const DAMPING_SECTION: Section = Section {
    title: "`[stability.damping]` (optional; present means enabled)",
    intro: "RFC 2439-style damping of VIP absences (the address list emptying, and the last local endpoint of an `externalTrafficPolicy: Local` Service going): each absence adds `penalty`, which halves every `half_life`. Above `suppress_threshold` a flapping VIP is held advertised through its absences until the penalty decays below `reuse_threshold` or `max_suppress` has passed.",
    keys: DAMPING_KEYS,
};

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
        None => Some(DEFAULT_DAMPING_ENABLED),
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
        Some(v) => tree::integer_in(v, key, POSITIVE_U32, d),
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

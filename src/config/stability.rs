//! `[stability]`: how long a vanished VIP stays advertised, and damping.

use std::time::Duration;

use super::diagnostic::Diagnostics;
use super::duration::format_duration;
use super::tree::{self, Table};

/// `[stability]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Stability {
    /// A VIP that disappears stays advertised until it has been absent this
    /// long; coming back within the window costs no UPDATE.
    pub withdraw_hold_down: Duration,
    /// Wait this long after a VIP first appears before advertising it, so
    /// bursts of changes go out together.
    pub advertise_delay: Duration,
    /// Hold-down for definitive removals (Service deleted, opted out), which
    /// cannot be flaps.
    pub delete_delay: Duration,
    /// Delay before withdrawing a VIP of a Service with traffic policy
    /// `Local` once this node has no ready endpoint of it (the datapath
    /// drops its traffic from then on).
    pub local_endpoint_delay: Duration,
    /// RFC 2439-style damping of VIPs that keep flapping; none when
    /// disabled.
    pub damping: Option<Damping>,
    /// Mass-withdrawal guard: at most this share of this node's routes is
    /// withdrawn in one step; the rest goes at `withdraw_rate`. 1.0 is off.
    pub max_withdraw_fraction: f64,
    /// Withdrawals per second once the guard holds them back.
    pub withdraw_rate: f64,
}

/// `withdraw_rate`'s default, per second.
pub const DEFAULT_WITHDRAW_RATE: f64 = 10.0;

impl Default for Stability {
    fn default() -> Self {
        Stability {
            withdraw_hold_down: Duration::from_secs(30),
            advertise_delay: Duration::ZERO,
            delete_delay: Duration::ZERO,
            local_endpoint_delay: Duration::ZERO,
            damping: None,
            max_withdraw_fraction: crate::stability::DEFAULT_MAX_WITHDRAW_FRACTION,
            withdraw_rate: DEFAULT_WITHDRAW_RATE,
        }
    }
}

impl Stability {
    /// The time between two withdrawals the guard has held back.
    pub fn withdraw_interval(&self) -> Duration {
        // The parser keeps the rate within MIN_RATE..=MAX_RATE, so the
        // interval is at least 1 µs and at most an hour.
        Duration::from_secs_f64(1.0 / self.withdraw_rate)
    }
}

/// `withdraw_rate` bounds, per second: one an hour, a million a second.
const MIN_RATE: f64 = 1.0 / 3600.0;
const MAX_RATE: f64 = 1_000_000.0;

/// Flap damping after RFC 2439 §4.2, applied to VIP absences: each absence
/// adds `penalty`; the penalty decays with `half_life`. Above
/// `suppress_threshold` the VIP is held advertised through absences until
/// the penalty decays below `reuse_threshold` (or `max_suppress` passes).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Damping {
    /// Time for the penalty to halve.
    pub half_life: Duration,
    /// Penalty added per absence.
    pub penalty: u32,
    /// Penalty above which the VIP is held advertised.
    pub suppress_threshold: u32,
    /// Penalty below which normal hold-down applies again; less than
    /// `suppress_threshold`.
    pub reuse_threshold: u32,
    /// Longest time a VIP is held by damping.
    pub max_suppress: Duration,
}

impl Default for Damping {
    /// RFC 2439 §4.2's example values.
    fn default() -> Self {
        Damping {
            half_life: Duration::from_secs(15 * 60),
            penalty: 1000,
            suppress_threshold: 2000,
            reuse_threshold: 750,
            max_suppress: Duration::from_secs(60 * 60),
        }
    }
}

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
        None => Some(defaults.max_withdraw_fraction),
        Some(v) => parse_fraction(v, d),
    };
    let withdraw_rate = match table.get("withdraw_rate") {
        None => Some(defaults.withdraw_rate),
        Some(v) => parse_rate(v, d),
    };
    Some(Stability {
        withdraw_hold_down: withdraw_hold_down?,
        advertise_delay: advertise_delay?,
        delete_delay: delete_delay?,
        local_endpoint_delay: local_endpoint_delay?,
        damping: damping?,
        max_withdraw_fraction: max_withdraw_fraction?,
        withdraw_rate: withdraw_rate?,
    })
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
            let ceiling = f64::from(reuse) * exponent.exp2();
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

//! The knobs of the stability layer: `[stability]` and `[stability.damping]`
//! in the config file. They are defined and defaulted here, once; the
//! config layer parses the file into them and calls [`Params::validate`] at
//! load time (with the offending line), so `holdfast check`, `run` and a
//! reload judge a file the same way.

use std::fmt;
use std::time::Duration;

use super::GuardParams;

/// The longest timer this layer accepts. Nothing operational needs a longer
/// hold-down or suppression, and the bound keeps every deadline (an input
/// instant plus at most a few such durations) far inside what `Instant` can
/// represent.
pub const MAX_TIMER: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// Timers of the stability layer (`[stability]`).
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    /// A prefix that newly appears is advertised only once it has been
    /// present this long, so that a burst of appear/vanish costs nothing.
    /// 0 (the default) advertises in the same step.
    pub advertise_delay: Duration,
    /// A prefix whose VIP vanished stays advertised until it has been
    /// continuously absent this long (default 30 s).
    pub withdraw_hold_down: Duration,
    /// A prefix whose Service was deleted (a definitive absence) is withdrawn
    /// after this long (default 0: at once).
    pub delete_delay: Duration,
    /// A prefix whose Service has traffic policy `Local` and no ready
    /// endpoint left on this node is withdrawn after this long (default 0:
    /// at once; the node's datapath drops the traffic meanwhile).
    pub local_endpoint_delay: Duration,
    /// Damping of absences (`[stability.damping]`); `None` turns it off.
    pub damping: Option<DampingParams>,
    /// A prefix whose node is drained (cordoned, excluded) stays advertised
    /// this long — the speaker marks it GRACEFUL_SHUTDOWN meanwhile (RFC
    /// 8326) — then goes. 0 (the default here; the daemon passes
    /// `speaker.graceful_shutdown_wait`) withdraws at once.
    pub graceful_shutdown_wait: Duration,
    /// The mass-withdrawal guard (`max_withdraw_fraction`, `withdraw_rate`).
    pub guard: GuardParams,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            advertise_delay: Duration::ZERO,
            withdraw_hold_down: Duration::from_secs(30),
            delete_delay: Duration::ZERO,
            local_endpoint_delay: Duration::ZERO,
            damping: None,
            graceful_shutdown_wait: Duration::ZERO,
            guard: GuardParams::default(),
        }
    }
}

/// RFC 2439 damping parameters (§4.2 "configuration parameters"), applied to
/// absences of a VIP rather than to routes received from a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DampingParams {
    /// The figure of merit halves every `half_life` (RFC 2439 "decay half
    /// life"). Default 15 min.
    pub half_life: Duration,
    /// Added to the figure of merit for every absence. Default 1000.
    pub penalty: u32,
    /// A figure of merit above this starts damping (RFC 2439 "cutoff
    /// threshold"). Default 2000.
    pub suppress_threshold: u32,
    /// Damping ends once the figure has decayed to this (RFC 2439 "reuse
    /// threshold"). Default 750.
    pub reuse_threshold: u32,
    /// No damping episode lasts longer than this after it began (RFC 2439
    /// "maximum hold down time"). Default 60 min.
    pub max_suppress: Duration,
}

impl Default for DampingParams {
    fn default() -> Self {
        DampingParams {
            half_life: Duration::from_secs(15 * 60),
            penalty: 1000,
            suppress_threshold: 2000,
            reuse_threshold: 750,
            max_suppress: Duration::from_secs(60 * 60),
        }
    }
}

impl DampingParams {
    /// The highest figure of merit kept, RFC 2439 §4.2/§4.4: the figure is
    /// capped so that, left alone, it decays to `reuse_threshold` within
    /// `max_suppress`: `reuse * 2^(max_suppress / half_life)`.
    pub fn ceiling(&self) -> f64 {
        f64::from(self.reuse_threshold)
            * libm::exp2(self.max_suppress.as_secs_f64() / self.half_life.as_secs_f64())
    }
}

/// Why a set of [`Params`] was refused. Field names are the config keys, so
/// the config layer can point at the offending line.
#[derive(Debug, Clone, PartialEq)]
pub enum ParamsError {
    /// A duration above [`MAX_TIMER`].
    TooLong {
        field: &'static str,
        value: Duration,
        max: Duration,
    },
    /// A value that must be positive is zero.
    Zero { field: &'static str },
    /// `reuse_threshold` must lie below `suppress_threshold`, or damping
    /// would end the moment it starts (RFC 2439 §4.2).
    ReuseNotBelowSuppress { reuse: u32, suppress: u32 },
    /// The ceiling `reuse * 2^(max_suppress / half_life)` is at or below
    /// `suppress_threshold` (damping could never start), or is not a finite
    /// number (`max_suppress` is absurdly long next to `half_life`).
    UnusableCeiling { ceiling: f64, suppress: u32 },
    /// `max_withdraw_fraction` outside (0, 1].
    Fraction { value: f64 },
}

impl fmt::Display for ParamsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamsError::TooLong { field, value, max } => write!(
                f,
                "{field} = {value:?} is longer than the maximum of {max:?}"
            ),
            ParamsError::Zero { field } => write!(f, "{field} must be greater than zero"),
            ParamsError::ReuseNotBelowSuppress { reuse, suppress } => write!(
                f,
                "stability.damping.reuse_threshold ({reuse}) must be below \
                 stability.damping.suppress_threshold ({suppress})"
            ),
            ParamsError::UnusableCeiling { ceiling, suppress } => write!(
                f,
                "stability.damping: the figure of merit is capped at \
                 reuse_threshold * 2^(max_suppress / half_life) = {ceiling}, which must be \
                 finite and above suppress_threshold ({suppress}); {}",
                if ceiling.is_finite() {
                    "raise max_suppress or lower half_life"
                } else {
                    "lower max_suppress or raise half_life"
                }
            ),
            ParamsError::Fraction { value } => write!(
                f,
                "stability.max_withdraw_fraction = {value} must be more than 0 and at most 1"
            ),
        }
    }
}

impl std::error::Error for ParamsError {}

impl Params {
    /// Checks that the state machine can run with these values.
    pub fn validate(&self) -> Result<(), ParamsError> {
        check_max("stability.advertise_delay", self.advertise_delay)?;
        check_max("stability.withdraw_hold_down", self.withdraw_hold_down)?;
        check_max("stability.delete_delay", self.delete_delay)?;
        check_max("stability.local_endpoint_delay", self.local_endpoint_delay)?;
        check_max(
            "speaker.graceful_shutdown_wait",
            self.graceful_shutdown_wait,
        )?;
        if let Some(damping) = &self.damping {
            damping.validate()?;
        }
        let fraction = self.guard.max_withdraw_fraction;
        if !(fraction > 0.0 && fraction <= 1.0) {
            return Err(ParamsError::Fraction { value: fraction });
        }
        check_max("stability.withdraw_rate", self.guard.withdraw_interval)?;
        if self.guard.withdraw_interval.is_zero() {
            return Err(ParamsError::Zero {
                field: "stability.withdraw_rate",
            });
        }
        Ok(())
    }
}

impl DampingParams {
    /// Checks that the figure of merit can be computed and can cross both
    /// thresholds.
    pub fn validate(&self) -> Result<(), ParamsError> {
        check_max("stability.damping.half_life", self.half_life)?;
        check_max("stability.damping.max_suppress", self.max_suppress)?;
        if self.half_life.is_zero() {
            return Err(ParamsError::Zero {
                field: "stability.damping.half_life",
            });
        }
        if self.max_suppress.is_zero() {
            return Err(ParamsError::Zero {
                field: "stability.damping.max_suppress",
            });
        }
        if self.penalty == 0 {
            return Err(ParamsError::Zero {
                field: "stability.damping.penalty",
            });
        }
        if self.reuse_threshold == 0 {
            return Err(ParamsError::Zero {
                field: "stability.damping.reuse_threshold",
            });
        }
        if self.reuse_threshold >= self.suppress_threshold {
            return Err(ParamsError::ReuseNotBelowSuppress {
                reuse: self.reuse_threshold,
                suppress: self.suppress_threshold,
            });
        }
        let ceiling = self.ceiling();
        if !ceiling.is_finite() || ceiling <= f64::from(self.suppress_threshold) {
            return Err(ParamsError::UnusableCeiling {
                ceiling,
                suppress: self.suppress_threshold,
            });
        }
        Ok(())
    }
}

fn check_max(field: &'static str, value: Duration) -> Result<(), ParamsError> {
    if value > MAX_TIMER {
        return Err(ParamsError::TooLong {
            field,
            value,
            max: MAX_TIMER,
        });
    }
    Ok(())
}

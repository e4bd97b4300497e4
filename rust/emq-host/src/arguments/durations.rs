//! Durations and times, read one way for every call: seconds (an `int` or a
//! `float`) or a `datetime.timedelta`, and a `datetime.datetime` or seconds
//! since the epoch; kept as the plans keep them (ms), by one rounding rule
//! (`Span::ms`).

use std::time::Duration;

use emq_plan::numbers::MAX_MS;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyFloat, PyInt, PyType};

use super::text::{refused, type_name};

/// The longest duration any call takes, in seconds (about 31,700 years):
/// a due time or a lease deadline past it would pass the latest time a plan
/// writes (`emq_plan::numbers::MAX_MS`).
pub const MAX_SECONDS: u64 = 999_999_999_999;

static TIMEDELTA: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static DATETIME: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// A duration as every call takes one: seconds as an `int` or a `float` (never
/// a `bool`), or a `datetime.timedelta`; finite, not negative, at most
/// [`MAX_SECONDS`]. The calls convert it with [`Span`]'s rules.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span(f64);

/// Which durations a call takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Least {
    /// Zero too (a delay, a retry, a spin).
    Zero,
    /// More than zero (a lease, a timeout, a beat).
    Positive,
}

/// The one reading of a duration (see [`Span`]); `most` (seconds) narrows the
/// longest one. One wording for every refusal.
pub fn duration(call: &str, name: &str, v: &Bound<'_, PyAny>, least: Least, most: Option<f64>) -> PyResult<Span> {
    let most = most.unwrap_or(MAX_SECONDS as f64);
    let wrong = |ty: Option<String>| {
        let least = if least == Least::Zero { "non-negative" } else { "positive" };
        let ty = ty.map(|t| format!(", not a {t}")).unwrap_or_default();
        refused(
            call,
            format_args!(
                "{name} must be a {least} duration of at most {most} seconds: seconds (an int or a float) or a datetime.timedelta{ty}"
            ),
        )
    };
    let secs = if v.is_instance_of::<PyFloat>() || (v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()) {
        v.extract::<f64>().ok()
    } else if v.is_instance(TIMEDELTA.import(v.py(), "datetime", "timedelta")?)? {
        Some(v.call_method0("total_seconds")?.extract::<f64>()?)
    } else {
        return Err(wrong(Some(type_name(v))));
    };
    match secs {
        Some(s) if s.is_finite() && s >= 0.0 && s <= most && (s > 0.0 || least == Least::Zero) => Ok(Span(s)),
        _ => Err(wrong(None)),
    }
}

/// `duration`, where `None` means none (no timeout, no retry delay of its own).
pub fn optional_duration(call: &str, name: &str, v: &Bound<'_, PyAny>, least: Least) -> PyResult<Option<Span>> {
    if v.is_none() {
        return Ok(None);
    }
    duration(call, name, v, least, None).map(Some)
}

/// Seconds to a count of `unit`s (1,000 a second: ms), rounded to the nearest
/// (a tie to the even one, as Python's `round`); a positive duration is never
/// rounded to 0, but to 1.
#[allow(clippy::cast_sign_loss, reason = "a duration is finite, at least 0 and at most MAX_SECONDS: whole units, and an `as` saturates")]
fn units(secs: f64, per_second: f64) -> u64 {
    let n = (secs * per_second).round_ties_even();
    if n < 1.0 && secs > 0.0 {
        1
    } else {
        n as u64
    }
}

impl Span {
    /// In milliseconds: rounded to the nearest (a tie to the even one), and a
    /// positive duration under half a millisecond is 1 ms, not 0 (a lease of
    /// 0.0001 s is a lease; a retry delay of 0.0001 s is a delay).
    pub fn ms(self) -> u64 {
        units(self.0, 1e3)
    }
    /// In microseconds, by the same rules as `ms`.
    pub fn micros(self) -> u64 {
        units(self.0, 1e6)
    }
    /// As a `Duration` (to the nanosecond).
    pub fn duration(self) -> Duration {
        Duration::from_secs_f64(self.0)
    }
    pub fn seconds(self) -> f64 {
        self.0
    }
}

/// A due time: a `datetime.datetime` (aware; a naive one is local time, as
/// `datetime.timestamp()` takes it) or seconds since the epoch (an `int` or a
/// `float`), from the epoch to [`MAX_SECONDS`] after it; in ms since the epoch,
/// rounded to the nearest (a tie to the even one).
pub fn instant(call: &str, name: &str, v: &Bound<'_, PyAny>) -> PyResult<i64> {
    let wrong = |ty: Option<String>| {
        let ty = ty.map(|t| format!(", not a {t}")).unwrap_or_default();
        refused(
            call,
            format_args!(
                "{name} must be a time from 1970 on: a datetime.datetime (naive: local time) or seconds since the epoch (an int or a float), at most {MAX_SECONDS}{ty}"
            ),
        )
    };
    let secs = if v.is_instance_of::<PyFloat>() || (v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()) {
        v.extract::<f64>().ok()
    } else if v.is_instance(DATETIME.import(v.py(), "datetime", "datetime")?)? {
        // A naive time that the local zone cannot place is refused as Python refuses it.
        Some(v.call_method0("timestamp").map_err(|_| wrong(None))?.extract::<f64>()?)
    } else {
        return Err(wrong(Some(type_name(v))));
    };
    match secs {
        Some(s) if s.is_finite() && (0.0..=MAX_SECONDS as f64).contains(&s) => Ok(((s * 1e3).round_ties_even() as i64).min(MAX_MS)),
        _ => Err(wrong(None)),
    }
}

/// `fail`'s retry delay: `None` (the backoff), or a duration (0: ready at once).
pub fn retry_in(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<u64>> {
    Ok(optional_duration(call, "retry_in", v, Least::Zero)?.map(Span::ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_round_to_the_nearest_unit_and_never_to_zero() {
        assert_eq!(Span(1.5).ms(), 1500);
        assert_eq!(Span(0.0).ms(), 0);
        assert_eq!(Span(0.0001).ms(), 1, "a positive duration is never 0 ms");
        assert_eq!(Span(0.0004).ms(), 1);
        assert_eq!(Span(0.0006).ms(), 1);
        assert_eq!(Span(0.0016).ms(), 2);
        assert_eq!(Span(0.0025).ms(), 2, "a tie goes to the even one, as Python's round");
        assert_eq!(Span(0.0035).ms(), 4);
        assert_eq!(Span(MAX_SECONDS as f64).ms(), MAX_SECONDS * 1000);
        assert!(MAX_SECONDS * 1000 <= MAX_MS as u64);
        assert_eq!(Span(0.000150).micros(), 150);
        assert_eq!(Span(0.0000001).micros(), 1);
        assert_eq!(Span(2.5).duration(), Duration::from_millis(2500));
    }
}

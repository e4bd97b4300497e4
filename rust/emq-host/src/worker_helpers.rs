//! The worker's helpers: its options checked as every call's arguments are
//! (`arguments`), and the backoff of its degraded beats.

use pyo3::prelude::*;

use crate::arguments::{self, Least};
use crate::jitter::Jitter;

/// A duration option (`arguments::duration`: seconds or a `timedelta`), in
/// seconds; `positive`: more than zero; `maximum` (s): narrows the longest.
#[pyfunction]
#[pyo3(signature = (call, name, value, *, positive, maximum))]
pub fn check_duration(call: &str, name: &str, value: &Bound<'_, PyAny>, positive: bool, maximum: Option<f64>) -> PyResult<f64> {
    let least = if positive { Least::Positive } else { Least::Zero };
    Ok(arguments::duration(call, name, value, least, maximum)?.seconds())
}

/// An integer option from `minimum` to `maximum`.
#[pyfunction]
pub fn check_integer(call: &str, name: &str, value: &Bound<'_, PyAny>, minimum: u64, maximum: u64) -> PyResult<u64> {
    arguments::integer(call, name, value, minimum, maximum)
}

/// Seconds to back off after `streak` failures in a row (a worker's degraded
/// beats, SPEC §8): `base_ms · 2^streak`, capped at `cap_ms`, half of it fixed
/// and half random (`emq_plan::backoff`, the randomness the core's own).
#[pyfunction]
pub fn backoff_s(streak: u64, base_ms: u64, cap_ms: u64) -> f64 {
    let attempt = u32::try_from(streak).unwrap_or(u32::MAX);
    emq_plan::backoff::backoff(attempt, base_ms, cap_ms, Jitter::new().unit()) / 1000.0
}

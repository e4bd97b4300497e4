//! Integer arguments: counts, and integers within bounds. An `int`, never a
//! `bool`.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use super::text::refused;

/// An `int` (never a `bool`) as `i64`, or `None` for any other value or one out of range.
fn int(v: &Bound<'_, PyAny>) -> Option<i64> {
    (v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()).then(|| v.extract::<i64>().ok()).flatten()
}

/// A positive (or, with `zero_ok`, non-negative) integer with no bound of its own.
pub fn count(call: &str, name: &str, v: &Bound<'_, PyAny>, zero_ok: bool) -> PyResult<u64> {
    let what = if zero_ok { "a non-negative integer" } else { "a positive integer" };
    match int(v).and_then(|n| u64::try_from(n).ok()) {
        Some(n) if n > 0 || zero_ok => Ok(n),
        _ => Err(refused(call, format_args!("{name} must be {what}"))),
    }
}

/// `count`, where `None` means none.
pub fn optional_count(call: &str, name: &str, v: &Bound<'_, PyAny>, zero_ok: bool) -> PyResult<Option<u64>> {
    if v.is_none() {
        return Ok(None);
    }
    count(call, name, v, zero_ok).map(Some)
}

/// An integer from `lo` to `hi`.
pub fn integer(call: &str, name: &str, v: &Bound<'_, PyAny>, lo: u64, hi: u64) -> PyResult<u64> {
    match int(v).and_then(|n| u64::try_from(n).ok()) {
        Some(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(refused(call, format_args!("{name} must be an integer from {lo} to {hi}"))),
    }
}

/// The longest a lane's limit or a retention's count may be: stored fields
/// are read to 15 digits.
pub const MAX_STORED: u64 = 999_999_999_999_999;

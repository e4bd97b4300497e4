//! The one capped exponential backoff, for every wait that grows with a streak
//! of failures: a failed job's retry delay (SPEC §7 fail, `settle`), a degraded
//! worker beat's pause (§8, the Python worker through `emq._core.backoff_s`),
//! and the pause before a call starts again after its `EXEC` aborted (§9, the
//! host's driver). Pure: the caller draws the randomness.

/// `base · 2^attempt`, capped at `cap`, half of it fixed and half drawn from
/// `unit` (in [0, 1), clamped there): "equal jitter", so a pause is never shorter
/// than half its step and retries still spread. In the unit of `base` and `cap`
/// (ms, µs, …). Computed in `f64`: no `attempt` overflows (past 63 it is 63).
pub fn backoff(attempt: u32, base: u64, cap: u64, unit: f64) -> f64 {
    let full = (base as f64 * 2f64.powi(attempt.min(63) as i32)).min(cap as f64);
    full / 2.0 + full / 2.0 * unit.clamp(0.0, 1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_then_caps_half_fixed_half_drawn() {
        assert_eq!(backoff(0, 100, 20_000, 0.0), 50.0);
        assert_eq!(backoff(0, 100, 20_000, 0.999), 50.0 + 50.0 * 0.999);
        assert_eq!(backoff(3, 100, 20_000, 0.5), 600.0);
        assert_eq!(backoff(8, 100, 20_000, 0.0), 10_000.0, "25,600 capped at 20,000");
        assert_eq!(backoff(u32::MAX, 100, 20_000, 1.0), 20_000.0);
        assert_eq!(backoff(u32::MAX, u64::MAX, u64::MAX, 0.0), u64::MAX as f64 / 2.0);
        assert_eq!(backoff(2, 50, 5000, -3.0), 100.0, "unit is clamped to [0, 1]");
    }
}

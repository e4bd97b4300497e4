//! Numbers as the plans read and write them: stored integer fields, count
//! arguments, and times in ms with the latest time a plan writes (SPEC §2's row
//! fields, §5 and §6's arguments). Everything here is total: server input that
//! does not fit gives `None` or saturates, never a panic or a wrap.

/// The latest time a plan writes (ms since the epoch, about the year 33,600):
/// due times and lease deadlines saturate here, so a score and the row's copy
/// of it stay equal (exact in a double) and readable as a stored field.
pub const MAX_MS: i64 = 999_999_999_999_999;

/// `now + ms`, saturating at `MAX_MS`.
pub fn later(now: i64, ms: u64) -> i64 {
    now.saturating_add(ms.min(i64::MAX as u64) as i64).min(MAX_MS)
}

/// A decimal integer as the plans and the Lua scripts both read a stored field:
/// an optional `-` and 1 to 15 digits; anything else counts as absent. Fifteen
/// digits stay exact in Lua's doubles (below 2^53), even after `+ 1`.
pub fn field_int(v: &[u8]) -> Option<i64> {
    let digits = v.strip_prefix(b"-").unwrap_or(v);
    if digits.is_empty() || digits.len() > 15 || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// A positive (or, with `zero_ok`, non-negative) integer argument in decimal:
/// digits only, at most 18 of them.
pub fn count_arg(v: &[u8], zero_ok: bool) -> Option<u64> {
    if v.is_empty() || v.len() > 18 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: u64 = std::str::from_utf8(v).ok()?.parse().ok()?;
    (n > 0 || zero_ok).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers() {
        assert_eq!(field_int(b"12"), Some(12));
        assert_eq!(field_int(b"-3"), Some(-3));
        assert_eq!(field_int(b"+3"), None);
        assert_eq!(field_int(b"1.5"), None);
        assert_eq!(field_int(b""), None);
        assert_eq!(field_int(b"999999999999999"), Some(999_999_999_999_999));
        assert_eq!(field_int(b"1000000000000000"), None, "16 digits: absent, as in Lua");
        assert_eq!(count_arg(b"100", false), Some(100));
        assert_eq!(count_arg(b"0", false), None);
        assert_eq!(count_arg(b"0", true), Some(0));
        assert_eq!(count_arg(b"-1", true), None);
        assert_eq!(count_arg(b"1e3", true), None);
        assert_eq!(count_arg(b"9999999999999999999", true), None);
    }

    #[test]
    fn later_saturates() {
        assert_eq!(later(1000, 5), 1005);
        assert_eq!(later(1000, u64::MAX), MAX_MS);
        assert_eq!(later(i64::MAX, 1), MAX_MS);
    }
}

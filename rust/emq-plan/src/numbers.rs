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
    if v.strip_prefix(b"-").unwrap_or(v).len() > 15 {
        return None;
    }
    signed_decimal(v)
}

/// One or more ASCII digits, nothing else.
fn digits(v: &[u8]) -> bool {
    !v.is_empty() && v.iter().all(u8::is_ascii_digit)
}

/// Digits alone (no sign, no space), as many as `T` holds.
pub fn decimal<T: std::str::FromStr>(v: &[u8]) -> Option<T> {
    if !digits(v) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// An optional `-` and digits, as many as an `i64` holds.
pub fn signed_decimal(v: &[u8]) -> Option<i64> {
    if !digits(v.strip_prefix(b"-").unwrap_or(v)) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// The digits of lowercase hex.
pub const HEX: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` in lowercase hex.
pub fn push_hex(out: &mut Vec<u8>, bytes: &[u8]) {
    for b in bytes {
        out.extend([HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
}

/// A positive (or, with `zero_ok`, non-negative) integer argument in decimal:
/// digits only, at most 18 of them.
pub fn count_arg(v: &[u8], zero_ok: bool) -> Option<u64> {
    let n: u64 = decimal(v).filter(|_| v.len() <= 18)?;
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
        assert_eq!(decimal::<u64>(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal::<u64>(b"18446744073709551616"), None);
        assert_eq!(decimal::<u64>(b"-1"), None);
        assert_eq!(signed_decimal(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(signed_decimal(b"9223372036854775808"), None);
        assert_eq!(signed_decimal(b"--1"), None);
        assert_eq!(signed_decimal(b"+1"), None);
        let mut hex = vec![];
        push_hex(&mut hex, &[0x00, 0x9f, 0xff]);
        assert_eq!(hex, b"009fff");
    }

    #[test]
    fn later_saturates() {
        assert_eq!(later(1000, 5), 1005);
        assert_eq!(later(1000, u64::MAX), MAX_MS);
        assert_eq!(later(i64::MAX, 1), MAX_MS);
    }
}

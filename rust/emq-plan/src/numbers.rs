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

/// An integer's decimal digits, made on the stack (`-` first where it is
/// negative): a command's integer argument or length without a string of its own.
#[derive(Clone, Copy)]
pub struct Decimal {
    buf: [u8; 20],
    /// Where the digits (and the sign) start in `buf`.
    at: u8,
}

impl Decimal {
    pub fn uint(mut n: u64) -> Self {
        let mut buf = [0u8; 20];
        let mut at = buf.len();
        loop {
            at -= 1;
            buf[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { buf, at: at as u8 }
    }

    pub fn int(n: i64) -> Self {
        let mut d = Decimal::uint(n.unsigned_abs());
        if n < 0 {
            // 19 digits at most for an i64: there is room for the sign.
            d.at -= 1;
            d.buf[usize::from(d.at)] = b'-';
        }
        d
    }

    pub fn count(n: usize) -> Self {
        Decimal::uint(n as u64)
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[usize::from(self.at)..]
    }
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
    fn decimals_are_the_integers_strings() {
        for n in [0i64, 1, 7, -7, 9, 10, 42, 99, 100, -100, 1000, 65535, 123_456_789, i64::MAX, i64::MIN] {
            assert_eq!(Decimal::int(n).as_bytes(), n.to_string().as_bytes(), "{n}");
        }
        for n in [0u64, 9, 10, 11, 99, 100, 101, 999, 1000, u64::MAX] {
            assert_eq!(Decimal::uint(n).as_bytes(), n.to_string().as_bytes(), "{n}");
        }
        assert_eq!(Decimal::count(usize::MAX).as_bytes(), usize::MAX.to_string().as_bytes());
    }

    #[test]
    fn later_saturates() {
        assert_eq!(later(1000, 5), 1005);
        assert_eq!(later(1000, u64::MAX), MAX_MS);
        assert_eq!(later(i64::MAX, 1), MAX_MS);
    }
}

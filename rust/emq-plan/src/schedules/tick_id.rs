//! A tick's job id, `schedule:<name>:<tick ms>`, and the schedule names that fit
//! it.
//!
//! The id is the whole of SPEC §14's exactly-once: two sweeps that enqueue the
//! same tick write the same id, and the second add finds it taken. The tick is
//! in decimal with no padding (`-` before a tick before 1970), so the id of a
//! tick is one string on every host, and the tick is read back after the last
//! `:` (a name may hold `:`).

use crate::names::id_problem;

const PREFIX: &[u8] = b"schedule:";

/// The longest tick in decimal: the calendar's first instant, year -9999, is
/// `-377705116800000` ms.
const TICK_MAX_DIGITS: usize = 16;

/// The longest schedule name, in bytes: a job id holds at most 256 (SPEC §1),
/// less `schedule:`, the `:` and the longest tick.
pub const SCHEDULE_NAME_MAX: usize = 256 - PREFIX.len() - 1 - TICK_MAX_DIGITS;

/// Why a schedule name is refused, or `None`: 1 to `SCHEDULE_NAME_MAX` (230)
/// bytes of UTF-8 with no control characters, so that every tick's id is a
/// good job id.
pub fn schedule_name_problem(name: &[u8]) -> Option<&'static str> {
    if name.is_empty() || name.len() > SCHEDULE_NAME_MAX {
        return Some("must be 1 to 230 bytes");
    }
    id_problem(name)
}

/// The job id of a schedule's tick: `schedule:<name>:<tick ms>`.
pub fn tick_id(name: &[u8], tick_ms: i64) -> Vec<u8> {
    let tick = tick_ms.to_string();
    let mut id = Vec::with_capacity(PREFIX.len() + name.len() + 1 + tick.len());
    id.extend_from_slice(PREFIX);
    id.extend_from_slice(name);
    id.push(b':');
    id.extend_from_slice(tick.as_bytes());
    id
}

/// The schedule name and the tick of a tick's job id, or `None` for an id that
/// `tick_id` did not make.
pub fn parse_tick_id(id: &[u8]) -> Option<(&[u8], i64)> {
    let rest = id.strip_prefix(PREFIX)?;
    let colon = rest.iter().rposition(|&b| b == b':')?;
    let (name, tick) = (&rest[..colon], &rest[colon + 1..]);
    let tick_ms: i64 = std::str::from_utf8(tick).ok()?.parse().ok()?;
    // Only the form `tick_id` writes: no `+`, no leading zeros.
    (tick_id(name, tick_ms) == id && schedule_name_problem(name).is_none()).then_some((name, tick_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_documented_form() {
        assert_eq!(tick_id(b"nightly", 1_767_225_600_000), b"schedule:nightly:1767225600000".to_vec());
        assert_eq!(tick_id(b"a:b", -1), b"schedule:a:b:-1".to_vec());
        assert_eq!(parse_tick_id(b"schedule:a:b:-1"), Some((&b"a:b"[..], -1)));
        assert_eq!(parse_tick_id(b"schedule:nightly:1767225600000"), Some((&b"nightly"[..], 1_767_225_600_000)));
        for bad in
            [&b"schedule:nightly:+5"[..], b"schedule:nightly:05", b"schedule::5", b"nightly:5", b"schedule:nightly", b"schedule:n:1e3"]
        {
            assert_eq!(parse_tick_id(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_longest_name_makes_good_ids_for_every_tick() {
        // A broken limit lets a long name make ids past SPEC §1's 256 bytes.
        assert_eq!(SCHEDULE_NAME_MAX, 230);
        let name = "é".repeat(115);
        assert_eq!(name.len(), 230);
        assert_eq!(schedule_name_problem(name.as_bytes()), None);
        let first = jiff::Timestamp::MIN.as_millisecond();
        let last = jiff::Timestamp::MAX.as_millisecond();
        assert_eq!(first.to_string().len(), TICK_MAX_DIGITS);
        assert!(last.to_string().len() <= TICK_MAX_DIGITS);
        for tick in [first, -1, 0, 1_767_225_600_000, last] {
            let id = tick_id(name.as_bytes(), tick);
            assert_eq!(id_problem(&id), None, "{}", String::from_utf8_lossy(&id));
            assert_eq!(parse_tick_id(&id), Some((name.as_bytes(), tick)));
        }
        assert_eq!(tick_id(name.as_bytes(), first).len(), 256, "the limit is tight");
    }

    #[test]
    fn names_refused() {
        assert_eq!(schedule_name_problem(b""), Some("must be 1 to 230 bytes"));
        assert_eq!(schedule_name_problem(&[b'a'; 231]), Some("must be 1 to 230 bytes"));
        assert_eq!(schedule_name_problem(b"a\nb"), Some("must have no control characters"));
        assert_eq!(schedule_name_problem(b"\xff"), Some("must be UTF-8"));
        assert_eq!(schedule_name_problem("nightly report: eu".as_bytes()), None);
    }
}

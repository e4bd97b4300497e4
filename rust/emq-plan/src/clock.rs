//! The one clock reading of a call (SPEC §4): the server's `TIME`, in ms, read
//! before anything is selected and used for everything the call decides and
//! writes. Never the client's clock.

use crate::numbers::MAX_MS;
use crate::protocol::reply::Reply;

/// `TIME` as milliseconds: `sec * 1000 + floor(usec / 1000)` (SPEC §4). `None`
/// (the call fails, writing nothing) when the reply is not two integers, when
/// the sum does not fit in an `i64`, or when it is at or past `MAX_MS` (about
/// the year 33,600): the plans write times that saturate there, and every time
/// a plan writes past `now` (a due time, a lease) must be later than `now`,
/// which the guard relies on (`guard`). No server gives such a reply.
pub fn parse_time(r: &Reply) -> Option<i64> {
    parse_clock(r).map(|(now, _)| now)
}

/// `parse_time`, with the µs the reading had run into its millisecond (0 to
/// 999): a worker that waits for a time the call saw counts from the reading
/// itself, not from the millisecond before it.
pub fn parse_clock(r: &Reply) -> Option<(i64, i64)> {
    let a = r.as_array()?;
    let (sec, usec) = (a.first()?.as_int()?, a.get(1)?.as_int()?);
    let now = sec.checked_mul(1000)?.checked_add(usec / 1000).filter(|&now| now < MAX_MS)?;
    Some((now, (usec % 1000).clamp(0, 999)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn time(sec: &str, usec: &str) -> Reply {
        Reply::Array(vec![Reply::Bulk(sec.as_bytes().to_vec()), Reply::Bulk(usec.as_bytes().to_vec())])
    }

    #[test]
    fn milliseconds() {
        assert_eq!(parse_time(&time("1700000000", "123456")), Some(1_700_000_000_123));
        assert_eq!(parse_time(&time("0", "999")), Some(0));
        assert_eq!(parse_time(&Reply::Array(vec![Reply::Int(2), Reply::Int(5000)])), Some(2005));
    }

    #[test]
    fn the_reading_keeps_its_microseconds() {
        assert_eq!(parse_clock(&time("1700000000", "123456")), Some((1_700_000_000_123, 456)));
        assert_eq!(parse_clock(&time("0", "999")), Some((0, 999)));
        assert_eq!(parse_clock(&time("5", "0")), Some((5000, 0)));
        assert_eq!(parse_clock(&time("5", "-1")), Some((5000, 0)), "a hostile usec never gives a negative fraction");
    }

    #[test]
    fn hostile_replies_give_none() {
        assert_eq!(parse_time(&time("9223372036854775807", "0")), None, "sec * 1000 overflows");
        assert_eq!(parse_time(&time("-9223372036854775808", "0")), None);
        assert_eq!(parse_time(&time("9223372036854775", "999999999")), None, "the sum overflows");
        assert_eq!(parse_time(&time("999999999999", "999999")), None, "MAX_MS itself");
        assert_eq!(parse_time(&time("999999999999", "998999")), Some(MAX_MS - 1));
        assert_eq!(parse_time(&time("x", "0")), None);
        assert_eq!(parse_time(&Reply::Array(vec![Reply::Int(1)])), None);
        assert_eq!(parse_time(&Reply::Nil), None);
    }
}

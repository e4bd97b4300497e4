//! The one clock reading of a call (SPEC §4): the server's `TIME`, in ms, read
//! before anything is selected and used for everything the call decides and
//! writes. Never the client's clock.

use crate::reply::Reply;

/// `TIME` as milliseconds: `sec * 1000 + floor(usec / 1000)` (SPEC §4). `None`
/// when the reply is not two integers, or when the sum does not fit in an `i64`
/// (a reply no server gives; the call then fails instead of wrapping).
pub fn parse_time(r: &Reply) -> Option<i64> {
    let a = r.as_array()?;
    let (sec, usec) = (a.first()?.as_int()?, a.get(1)?.as_int()?);
    sec.checked_mul(1000)?.checked_add(usec / 1000)
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
    fn hostile_replies_give_none() {
        assert_eq!(parse_time(&time("9223372036854775807", "0")), None, "sec * 1000 overflows");
        assert_eq!(parse_time(&time("-9223372036854775808", "0")), None);
        assert_eq!(parse_time(&time("9223372036854775", "999999999")), None, "the sum overflows");
        assert_eq!(parse_time(&time("x", "0")), None);
        assert_eq!(parse_time(&Reply::Array(vec![Reply::Int(1)])), None);
        assert_eq!(parse_time(&Reply::Nil), None);
    }
}

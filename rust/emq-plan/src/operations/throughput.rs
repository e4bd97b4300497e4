//! THROUGHPUT: the per-minute counters of settled jobs (`P stats:<minute>`,
//! `jobs::counters`) over the last minutes, read as the dashboard charts them.
//!
//! Two round trips, unwatched: `TIME` (the counters are named by the server's
//! clock), then one `HMGET P stats:<minute> completed retried dead cancelled
//! recovered` for each minute asked, pipelined. An hour is 60 small commands; a
//! day 1,440 (about 1 ms of server time: a minute's hash is five small fields).

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::counters::minute_of;
use crate::names::{kind, Keys};
use crate::numbers::{field_int, Decimal};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::Counted;

pub const THROUGHPUT: &str = "Queue.throughput";

/// The most minutes one read covers: the 25 hours the counters are kept.
pub const MAX_MINUTES: u64 = 25 * 60;

/// One minute's counts, in [`Counted::ALL`]'s order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Minute {
    /// The minute: server clock ms / 60,000.
    pub minute: i64,
    pub counts: [i64; 5],
}

/// What a read answers: the server clock it read and each minute, oldest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Minutes {
    pub now_ms: i64,
    pub minutes: Vec<Minute>,
}

pub struct Throughput {
    keys: Keys,
    minutes: u64,
    now: Option<i64>,
}

impl Throughput {
    /// The last `minutes` minutes (1 to [`MAX_MINUTES`]), the current one included.
    pub fn new(keys: Keys, minutes: u64) -> Result<Self> {
        if minutes == 0 || minutes > MAX_MINUTES {
            return Err(Error::argument(
                THROUGHPUT,
                "minutes",
                format_args!("must be 1 to {MAX_MINUTES} (the counters are kept 25 hours)"),
            ));
        }
        Ok(Throughput { keys, minutes, now: None })
    }

    fn first_minute(&self, now: i64) -> i64 {
        minute_of(now) - self.minutes as i64 + 1
    }

    fn key(&self, minute: i64) -> Vec<u8> {
        self.keys.parts(kind::STATS, Decimal::int(minute).as_bytes()).concat()
    }
}

impl Conversation for Throughput {
    type Out = Minutes;

    fn verb(&self) -> &'static str {
        THROUGHPUT
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Minutes> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME")] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Minutes>> {
        let Some(now) = self.now else {
            let now = replies.first().and_then(parse_time).ok_or_else(|| Error::server(THROUGHPUT, "TIME gave no clock"))?;
            self.now = Some(now);
            let first = self.first_minute(now);
            let fields = Counted::ALL.map(|c| c.field().as_str());
            let cmds = (0..self.minutes as i64).map(|i| Cmd::new("HMGET").arg(self.key(first + i)).args(fields)).collect();
            return Ok(Step::Read { watch: vec![], cmds });
        };
        if replies.len() as u64 != self.minutes {
            return Err(Error::server(THROUGHPUT, "wrong number of replies"));
        }
        let first = self.first_minute(now);
        let mut minutes = Vec::with_capacity(replies.len());
        for (i, r) in replies.iter().enumerate() {
            let minute = first + i as i64;
            check_error(THROUGHPUT, &self.key(minute), r)?;
            let f = r.fields();
            let mut counts = [0i64; 5];
            for (c, v) in counts.iter_mut().zip(&f) {
                *c = v.and_then(field_int).unwrap_or(0).max(0);
            }
            minutes.push(Minute { minute, counts });
        }
        Ok(Step::Done(Minutes { now_ms: now, minutes }))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Minutes> {
        Err(Error::server(THROUGHPUT, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    /// The clock first, then one HMGET a minute ending with the clock's own;
    /// absent or unreadable counts are 0. A broken read that started at the
    /// wrong minute would chart the hour shifted by one.
    #[test]
    fn a_read_takes_the_clock_then_one_hmget_a_minute() {
        let mut t = Throughput::new(Keys::new(b"q"), 3).unwrap();
        let Step::Read { cmds, .. } = t.start() else { panic!() };
        assert_eq!(cmds, vec![Cmd::from_args(["TIME"])]);
        // 1_700_000_039_999 ms is minute 28_333_333.
        let time = Reply::Array(vec![bulk("1700000039"), bulk("999000")]);
        let Step::Read { cmds, watch } = t.feed(&[time]).unwrap() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds.len(), 3);
        assert_eq!(cmds[0], Cmd::from_args(["HMGET", "emq:{q}:stats:28333331", "completed", "retried", "dead", "cancelled", "recovered"]));
        assert_eq!(cmds[2], Cmd::from_args(["HMGET", "emq:{q}:stats:28333333", "completed", "retried", "dead", "cancelled", "recovered"]));
        let nil = Reply::Array(vec![Reply::Nil; 5]);
        let some = Reply::Array(vec![bulk("7"), Reply::Nil, bulk("2"), bulk("x"), bulk("1")]);
        let Step::Done(out) = t.feed(&[nil.clone(), some, nil]).unwrap() else { panic!() };
        assert_eq!(out.now_ms, 1_700_000_039_999);
        assert_eq!(out.minutes[1], Minute { minute: 28_333_332, counts: [7, 0, 2, 0, 1] });
        assert_eq!(out.minutes[0].counts, [0; 5]);
    }

    #[test]
    fn minutes_out_of_range_are_refused_naming_the_argument() {
        for bad in [0, MAX_MINUTES + 1] {
            let e = Throughput::new(Keys::new(b"q"), bad).err().unwrap();
            assert!(e.message.starts_with("Queue.throughput: minutes must be 1 to 1500"), "{e}");
        }
    }
}

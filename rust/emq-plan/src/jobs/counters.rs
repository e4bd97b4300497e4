//! The per-minute counters of settled jobs (SPEC §17, `P stats:<minute>`): every
//! call that settles jobs adds, in its own transaction, how many it completed,
//! retried, made dead, cancelled or (the stalled check) recovered.
//!
//! A call writes one `HINCRBY` for each kind present in it, not one per job,
//! then one `PEXPIRE` of 25 hours ([`COUNTS_KEEP_MS`]): a group commit of 100
//! completes adds two commands, and a call that settles nothing adds none. The
//! key is only ever incremented and is never watched, so no guard involves it:
//! two calls in the same minute add to it in either order.

use crate::protocol::write::{Counted, Write};

pub use crate::protocol::write::COUNTS_KEEP_MS;

/// The minute a server clock reading (ms) falls in: `P stats:<minute>`'s name.
pub fn minute_of(now_ms: i64) -> i64 {
    now_ms.div_euclid(60_000)
}

/// How many jobs of each kind one call settled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub completed: i64,
    pub retried: i64,
    pub dead: i64,
    pub cancelled: i64,
    pub recovered: i64,
}

impl Tally {
    /// The count of `kind`.
    pub fn of(&self, kind: Counted) -> i64 {
        match kind {
            Counted::Completed => self.completed,
            Counted::Retried => self.retried,
            Counted::Dead => self.dead,
            Counted::Cancelled => self.cancelled,
            Counted::Recovered => self.recovered,
        }
    }

    /// Adds one job of `kind`.
    pub fn add(&mut self, kind: Counted) {
        match kind {
            Counted::Completed => self.completed += 1,
            Counted::Retried => self.retried += 1,
            Counted::Dead => self.dead += 1,
            Counted::Cancelled => self.cancelled += 1,
            Counted::Recovered => self.recovered += 1,
        }
    }

    /// Appends the counters' writes of a call whose clock read `now` (ms): one
    /// `HINCRBY` per kind present, in [`Counted::ALL`]'s order, then the
    /// `PEXPIRE`; nothing when the call settled nothing. Every settling plan
    /// ends its write list with these (the stalled check: each group's).
    pub fn writes(&self, now: i64, w: &mut Vec<Write>) {
        let minute = minute_of(now);
        let before = w.len();
        for kind in Counted::ALL {
            let by = self.of(kind);
            if by > 0 {
                w.push(Write::Count { minute, kind, by });
            }
        }
        if w.len() > before {
            w.push(Write::KeepCounts { minute });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::Keys;
    use crate::protocol::cmd::Cmd;
    use crate::protocol::write::to_cmds;

    /// A group commit of 100 completes is two commands, a mixed call one per
    /// kind plus the expiry, and an empty tally none: a broken tally that wrote
    /// per job would make the commands grow with the batch.
    #[test]
    fn a_call_writes_one_increment_per_kind_present_then_the_expiry() {
        let k = Keys::new(b"q");
        let now = 1_699_999_980_000 + 59_999;
        let mut w = vec![];
        Tally { completed: 100, ..Default::default() }.writes(now, &mut w);
        assert_eq!(
            to_cmds(&k, &w),
            vec![
                Cmd::from_args(["HINCRBY", "emq:{q}:stats:28333333", "completed", "100"]),
                Cmd::from_args(["PEXPIRE", "emq:{q}:stats:28333333", "90000000"]),
            ]
        );
        let mut w = vec![];
        Tally { retried: 2, dead: 1, cancelled: 3, recovered: 4, completed: 0 }.writes(now + 1, &mut w);
        let kinds: Vec<_> = w.iter().map(|x| (x.name(), x.to_cmd(&k))).collect();
        assert_eq!(kinds.len(), 5);
        assert_eq!(
            to_cmds(&k, &w),
            vec![
                Cmd::from_args(["HINCRBY", "emq:{q}:stats:28333334", "retried", "2"]),
                Cmd::from_args(["HINCRBY", "emq:{q}:stats:28333334", "dead", "1"]),
                Cmd::from_args(["HINCRBY", "emq:{q}:stats:28333334", "cancelled", "3"]),
                Cmd::from_args(["HINCRBY", "emq:{q}:stats:28333334", "recovered", "4"]),
                Cmd::from_args(["PEXPIRE", "emq:{q}:stats:28333334", "90000000"]),
            ],
            "the next millisecond is the next minute"
        );
        let mut w = vec![];
        Tally::default().writes(now, &mut w);
        assert!(w.is_empty(), "a call that settles nothing writes no counter");
    }

    #[test]
    fn minutes_are_the_clock_in_ms_over_60000_rounded_down() {
        assert_eq!((minute_of(0), minute_of(59_999), minute_of(60_000), minute_of(-1)), (0, 0, 1, -1));
    }
}

//! COUNTS: how many jobs each place of a queue holds (`Counts`), read at one
//! instant: the lanes read first (`LaneList`, the set `P lanes`), then every count in one
//! `MULTI`/`EXEC` (`Step::Snapshot`).

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::retention::{self, Retention};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::reads::lane_names::LaneList;

pub const COUNTS: &str = "EMQ.COUNTS";

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub schedule: i64,
    pub pending: i64,
    /// Each lane's list length, by name.
    pub lanes: Vec<(Vec<u8>, i64)>,
    pub active: i64,
    pub dead: i64,
    /// Done rows still kept: those in `P done` finished after `now - done_ms`
    /// (all of them when kept forever).
    pub done: i64,
    pub ring: i64,
    /// Cancelled rows still kept: those in `P cancelled` cancelled after
    /// `now - done_ms` (all of them when kept forever), as `done`.
    pub cancelled: i64,
}

/// The counts of every place, read in one `MULTI`/`EXEC` (one instant) once
/// the lanes are known: the clock and `done_ms` first, with the lanes' set.
pub struct CountsRead {
    keys: Keys,
    list: LaneList,
    /// The clock reading, once the first reads are in.
    now: Option<i64>,
    done_ms: i64,
    lanes: Vec<Vec<u8>>,
}

impl CountsRead {
    pub fn new(keys: Keys) -> Self {
        CountsRead { keys, list: LaneList::new(), now: None, done_ms: retention::DONE_MS, lanes: vec![] }
    }

    fn count_cmds(&mut self) -> Step<Counts> {
        let k = &self.keys;
        self.lanes = self.list.done();
        let kept = |key: Vec<u8>| {
            if self.done_ms >= 0 {
                let from = format!("({}", self.now.unwrap_or(0).saturating_sub(self.done_ms));
                Cmd::new("ZCOUNT").arg(key).arg(from).arg("+inf")
            } else {
                Cmd::new("ZCARD").arg(key)
            }
        };
        let (done, cancelled) = (kept(k.done()), kept(k.cancelled()));
        let mut cmds = vec![
            Cmd::new("ZCARD").arg(k.schedule()),
            Cmd::new("LLEN").arg(k.pending()),
            Cmd::new("ZCARD").arg(k.active()),
            Cmd::new("ZCARD").arg(k.dead()),
            done,
            Cmd::new("LLEN").arg(k.ring()),
            cancelled,
        ];
        cmds.extend(self.lanes.iter().map(|l| Cmd::new("LLEN").arg(k.lane(l))));
        Step::Snapshot(cmds)
    }
}

impl Conversation for CountsRead {
    type Out = Counts;

    fn verb(&self) -> &'static str {
        COUNTS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Counts> {
        self.list = LaneList::new();
        self.now = None;
        let mut cmds = vec![Cmd::new("TIME"), retention::read(&self.keys, &["done_ms"])];
        cmds.extend(LaneList::cmds(&self.keys));
        Step::Read { watch: vec![], cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Counts>> {
        let [time, policy, lanes] = replies else {
            return Err(Error::server(COUNTS, "wrong number of replies"));
        };
        self.now = Some(parse_time(time).ok_or_else(|| Error::server(COUNTS, "TIME gave no clock"))?);
        self.done_ms = Retention::from_reply(COUNTS, &self.keys, &["done_ms"], policy)?.done_ms;
        self.list.feed(COUNTS, &self.keys, std::slice::from_ref(lanes))?;
        Ok(self.count_cmds())
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Counts> {
        let k = &self.keys;
        let mut keys = vec![k.schedule(), k.pending(), k.active(), k.dead(), k.done(), k.ring(), k.cancelled()];
        keys.extend(self.lanes.iter().map(|l| k.lane(l)));
        if exec.len() != keys.len() {
            return Err(Error::server(COUNTS, "EXEC: wrong number of replies"));
        }
        let mut n = Vec::with_capacity(exec.len());
        for (key, r) in keys.iter().zip(exec) {
            check_error(COUNTS, key, r)?;
            n.push(r.as_int().ok_or_else(|| Error::server(COUNTS, "a count was not an integer"))?);
        }
        Ok(Counts {
            schedule: n[0],
            pending: n[1],
            active: n[2],
            dead: n[3],
            done: n[4],
            ring: n[5],
            cancelled: n[6],
            lanes: std::mem::take(&mut self.lanes).into_iter().zip(n[7..].iter().copied()).collect(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn members(names: &[&str]) -> Reply {
        Reply::Array(names.iter().map(|n| bulk(n)).collect())
    }

    fn wrongtype() -> Reply {
        Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() }
    }

    #[test]
    fn counts_read_done_rows_still_kept() {
        let mut c = CountsRead::new(Keys::new(b"q"));
        let Step::Read { cmds, .. } = c.start() else { panic!() };
        assert_eq!(cmds.len(), 3);
        assert_eq!(cmds[2], Cmd::from_args(["SMEMBERS", "emq:{q}:lanes"]));
        let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
        let step = c.feed(&[time, Reply::Array(vec![bulk("1000")]), members(&["L"])]).unwrap();
        let Step::Snapshot(cmds) = step else { panic!("{step:?}") };
        assert_eq!(cmds[4], Cmd::from_args(["ZCOUNT", "emq:{q}:done", "(1699999999123", "+inf"]));
        assert_eq!(cmds[6], Cmd::from_args(["ZCOUNT", "emq:{q}:cancelled", "(1699999999123", "+inf"]));
        assert_eq!(cmds[7], Cmd::from_args(["LLEN", "emq:{q}:lane:L"]));
        let counts = c.finish(&[1, 2, 3, 4, 5, 6, 8, 7].map(Reply::Int)).unwrap();
        let want = Counts { schedule: 1, pending: 2, active: 3, dead: 4, done: 5, ring: 6, cancelled: 8, lanes: vec![(b"L".to_vec(), 7)] };
        assert_eq!(counts, want);
    }

    #[test]
    fn counts_raise_error_replies() {
        let mut c = CountsRead::new(Keys::new(b"q"));
        c.start();
        let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
        c.feed(&[time, Reply::Array(vec![bulk("-1")]), members(&[])]).unwrap();
        let e =
            c.finish(&[Reply::Int(1), wrongtype(), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:pending"), "{e}");
    }
}

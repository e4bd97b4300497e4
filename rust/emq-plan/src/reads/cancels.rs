//! CANCELS: the running jobs asked to stop since a worker last looked (SPEC
//! §13): the ids `P cancels` lists with a time after the worker's cursor, and
//! the cursor for its next read (the clock reading of this one). One `TIME`
//! and one `ZRANGE … BYSCORE`, unwatched: a worker with jobs running reads it
//! once a beat.
//!
//! A cancel's entry is scored with its own clock reading, taken before its
//! `EXEC`; one whose transaction commits after this read, with an earlier
//! reading, would fall behind the cursor. So a read also takes the entries of
//! the [`CANCELS_OVERLAP_MS`] before its cursor: a request may be reported
//! twice (telling a job twice to stop is harmless), and none whose call takes
//! less than that between its clock reading and its `EXEC` is missed.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const CANCELS: &str = "EMQ.CANCELS";

/// How far before its cursor a read looks again (ms).
pub const CANCELS_OVERLAP_MS: i64 = 10_000;

/// The requests read: the ids (each once, oldest first) and the next cursor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CancelRequests {
    pub ids: Vec<Vec<u8>>,
    /// The clock reading of this read (ms): the next read's `since`.
    pub until: i64,
}

pub struct Cancels {
    keys: Keys,
    /// The cursor of the last read (`None`: every request still kept).
    since: Option<i64>,
}

impl Cancels {
    pub fn new(keys: Keys, since: Option<i64>) -> Self {
        Cancels { keys, since }
    }
}

impl Conversation for Cancels {
    type Out = CancelRequests;

    fn verb(&self) -> &'static str {
        CANCELS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<CancelRequests> {
        let from = match self.since {
            Some(s) => format!("({}", s.saturating_sub(CANCELS_OVERLAP_MS)),
            None => "-inf".to_string(),
        };
        let range = Cmd::new("ZRANGE").arg(self.keys.cancels()).arg(from).arg("+inf").arg("BYSCORE");
        Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME"), range] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<CancelRequests>> {
        let [time, range] = replies else { return Err(Error::server(CANCELS, "wrong number of replies")) };
        let until = parse_time(time).ok_or_else(|| Error::server(CANCELS, "TIME gave no clock"))?;
        check_error(CANCELS, &self.keys.cancels(), range)?;
        let items = range.as_array().ok_or_else(|| Error::server(CANCELS, "ZRANGE gave no array"))?;
        let ids = items.iter().map(|r| r.as_bytes().map(<[u8]>::to_vec)).collect::<Option<Vec<_>>>();
        let ids = ids.ok_or_else(|| Error::server(CANCELS, "ZRANGE gave no members"))?;
        Ok(Step::Done(CancelRequests { ids, until }))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<CancelRequests> {
        Err(Error::server(CANCELS, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    /// A read after a cursor looks back the overlap (a request whose `EXEC` came
    /// after the cursor with an earlier clock reading is not missed), and hands
    /// back its own clock reading as the next cursor.
    #[test]
    fn a_read_looks_back_the_overlap_and_gives_its_clock_as_the_cursor() {
        let mut c = Cancels::new(Keys::new(b"q"), Some(50_000));
        let Step::Read { watch, cmds } = c.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds[1], Cmd::from_args(["ZRANGE", "emq:{q}:cancels", "(40000", "+inf", "BYSCORE"]));
        let time = Reply::Array(vec![bulk("60"), bulk("5000")]);
        let Step::Done(out) = c.feed(&[time, Reply::Array(vec![bulk("a"), bulk("b")])]).unwrap() else { panic!() };
        assert_eq!(out, CancelRequests { ids: vec![b"a".to_vec(), b"b".to_vec()], until: 60_005 });
        let Step::Read { cmds, .. } = Cancels::new(Keys::new(b"q"), None).start() else { panic!() };
        assert_eq!(cmds[1].to_args()[2], b"-inf");
        let wrong = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let time = Reply::Array(vec![bulk("60"), bulk("0")]);
        assert_eq!(c.feed(&[time, wrong]).unwrap_err().kind, crate::error::ErrorKind::Layout);
    }
}

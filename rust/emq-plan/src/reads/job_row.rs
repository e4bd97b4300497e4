//! GET: a job's row as `Queue.get` gives it (`Get`, `JobRow`), one `HGETALL`,
//! unwatched; any error reply is an error here, never a value.

use crate::error::{Error, Result};
use crate::names::{id_problem, Keys};
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const GET: &str = "EMQ.GET";

/// A job's row as `Queue.get` gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRow {
    pub state: Option<Vec<u8>>,
    pub data: Vec<u8>,
    pub lane: Option<Vec<u8>>,
    pub attempts: i64,
    pub max_attempts: i64,
    pub token: Option<Vec<u8>>,
    pub lease: Option<i64>,
    pub due: Option<i64>,
    pub stalls: i64,
    pub error: Option<Vec<u8>>,
    pub finished: Option<i64>,
}

impl JobRow {
    /// From `HGETALL`'s field/value pairs.
    pub fn from_pairs(items: &[Reply]) -> Self {
        let mut row = JobRow::default();
        for pair in items.chunks_exact(2) {
            let (Some(f), Some(v)) = (pair[0].as_bytes(), pair[1].as_bytes()) else { continue };
            let int = || field_int(v);
            match f {
                b"state" => row.state = Some(v.to_vec()),
                b"data" => row.data = v.to_vec(),
                b"lane" => row.lane = Some(v.to_vec()),
                b"attempts" => row.attempts = int().unwrap_or(0),
                b"max_attempts" => row.max_attempts = int().unwrap_or(0),
                b"token" => row.token = Some(v.to_vec()),
                b"lease" => row.lease = int(),
                b"due" => row.due = int(),
                b"stalls" => row.stalls = int().unwrap_or(0),
                b"error" => row.error = Some(v.to_vec()),
                b"finished" => row.finished = int(),
                _ => {}
            }
        }
        row
    }
}

/// `HGETALL P job:ID`: the row, or `None` when there is none.
pub struct Get {
    keys: Keys,
    id: Vec<u8>,
}

impl Get {
    pub fn new(keys: Keys, id: Vec<u8>) -> Result<Self> {
        if let Some(why) = id_problem(&id) {
            return Err(Error::argument(GET, "id", why));
        }
        Ok(Get { keys, id })
    }
}

impl Conversation for Get {
    type Out = Option<JobRow>;

    fn verb(&self) -> &'static str {
        GET
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("HGETALL").arg(self.keys.job(&self.id))] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let [r] = replies else { return Err(Error::server(GET, "wrong number of replies")) };
        check_error(GET, &self.keys.job(&self.id), r)?;
        let items = r.as_array().ok_or_else(|| Error::server(GET, "HGETALL gave no array"))?;
        Ok(Step::Done((!items.is_empty()).then(|| JobRow::from_pairs(items))))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(GET, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn wrongtype() -> Reply {
        Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() }
    }

    #[test]
    fn get_reads_the_row_and_raises_errors() {
        let mut g = Get::new(Keys::new(b"q"), b"a".to_vec()).unwrap();
        let Step::Read { cmds, .. } = g.start() else { panic!() };
        assert_eq!(cmds, vec![Cmd::from_args(["HGETALL", "emq:{q}:job:a"])]);
        let row = Reply::Array(vec![
            bulk("state"),
            bulk("active"),
            bulk("attempts"),
            bulk("2"),
            bulk("lease"),
            bulk("17"),
            bulk("data"),
            bulk("\u{0}x"),
        ]);
        let Step::Done(Some(r)) = g.feed(&[row]).unwrap() else { panic!() };
        assert_eq!((r.state.as_deref(), r.attempts, r.lease, r.data.as_slice()), (Some(&b"active"[..]), 2, Some(17), &b"\x00x"[..]));
        assert_eq!(g.feed(&[Reply::Array(vec![])]).unwrap(), Step::Done(None));
        assert_eq!(g.feed(&[wrongtype()]).unwrap_err().kind, crate::error::ErrorKind::Layout);
        let e = g.feed(&[Reply::Error { code: "NOPERM".into(), message: "NOPERM no".into() }]).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (crate::error::ErrorKind::Server, "EMQ.GET: NOPERM no"));
        assert_eq!(Get::new(Keys::new(b"q"), vec![]).err().unwrap().kind, crate::error::ErrorKind::Argument);
    }
}

//! GET: a job's row as `Queue.get` gives it (`Get`, `JobRow`), one `HGETALL`,
//! unwatched; STATUS: many rows, one `HGETALL` each, pipelined (`Status`); any
//! error reply is an error here, never a value.

use crate::error::{Error, Result};
use crate::names::{id_problem, Keys};
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const GET: &str = "EMQ.GET";
pub const STATUS: &str = "EMQ.STATUS";

/// The most ids one status read (or registration) takes.
pub const STATUS_MAX: usize = 10_000;

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
    /// SPEC §13: what a complete returned, what a fail raised, how far it got.
    pub result: Option<Vec<u8>>,
    pub error_type: Option<Vec<u8>>,
    pub traceback: Option<Vec<u8>>,
    pub progress: Option<Vec<u8>>,
    /// When it was added and last claimed (ms, server clock).
    pub created: Option<i64>,
    pub claimed: Option<i64>,
    /// Asked to stop while it runs (`cancel 1`).
    pub cancel: bool,
    /// Its own retention (ms, `-1`: forever).
    pub keep: Option<i64>,
    /// The uniqueness key it was added under.
    pub unique: Option<Vec<u8>>,
    /// Its waiters' inboxes, space-separated.
    pub wait: Option<Vec<u8>>,
    /// Its priority level (SPEC §15; absent: 0).
    pub priority: u8,
}

/// Every field of a row but `data`: what a registration reads of each row.
pub const ROW_FIELDS: [&str; 21] = [
    "state",
    "lane",
    "attempts",
    "max_attempts",
    "token",
    "lease",
    "due",
    "stalls",
    "error",
    "finished",
    "result",
    "error_type",
    "traceback",
    "progress",
    "created",
    "claimed",
    "cancel",
    "keep",
    "unique",
    "wait",
    "digest",
];

impl JobRow {
    /// From `HGETALL`'s field/value pairs.
    pub fn from_pairs(items: &[Reply]) -> Self {
        let mut row = JobRow::default();
        for pair in items.chunks_exact(2) {
            let (Some(f), Some(v)) = (pair[0].as_bytes(), pair[1].as_bytes()) else { continue };
            row.set(f, v);
        }
        row
    }

    /// From an `HMGET` of `names`' values (absent: `None`).
    pub fn from_named(names: &[&str], values: &[Option<&[u8]>]) -> Self {
        let mut row = JobRow::default();
        for (name, v) in names.iter().zip(values) {
            if let Some(v) = v {
                row.set(name.as_bytes(), v);
            }
        }
        row
    }

    /// Whether the row has come to an outcome: `done`, `dead` or `cancelled`.
    pub fn ended(&self) -> bool {
        matches!(self.state.as_deref(), Some(b"done" | b"dead" | b"cancelled"))
    }

    fn set(&mut self, f: &[u8], v: &[u8]) {
        let row = self;
        let int = || field_int(v);
        {
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
                b"result" => row.result = Some(v.to_vec()),
                b"error_type" => row.error_type = Some(v.to_vec()),
                b"traceback" => row.traceback = Some(v.to_vec()),
                b"progress" => row.progress = Some(v.to_vec()),
                b"created" => row.created = int(),
                b"claimed" => row.claimed = int(),
                b"cancel" => row.cancel = v == b"1",
                b"keep" => row.keep = int(),
                b"unique" => row.unique = Some(v.to_vec()),
                b"wait" => row.wait = Some(v.to_vec()),
                b"priority" => row.priority = crate::lanes::offer::level(Some(v)),
                _ => {}
            }
        }
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

/// STATUS: the rows of many ids, one `HGETALL` each, pipelined and
/// unwatched; `None` for an id with no row.
pub struct Status {
    keys: Keys,
    ids: Vec<Vec<u8>>,
}

impl Status {
    pub fn new(keys: Keys, ids: Vec<Vec<u8>>) -> Result<Self> {
        if ids.len() > STATUS_MAX {
            return Err(Error::argument(STATUS, "ids", format!("at most {STATUS_MAX} a call")));
        }
        for id in &ids {
            if let Some(why) = id_problem(id) {
                return Err(Error::argument(STATUS, "id", why));
            }
        }
        Ok(Status { keys, ids })
    }
}

impl Conversation for Status {
    type Out = Vec<Option<JobRow>>;

    fn verb(&self) -> &'static str {
        STATUS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        if self.ids.is_empty() {
            return Step::Done(vec![]);
        }
        Step::Read { watch: vec![], cmds: self.ids.iter().map(|id| Cmd::new("HGETALL").arg(self.keys.job(id))).collect() }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if replies.len() != self.ids.len() {
            return Err(Error::server(STATUS, "wrong number of replies"));
        }
        let mut rows = Vec::with_capacity(replies.len());
        for (id, r) in self.ids.iter().zip(replies) {
            check_error(STATUS, &self.keys.job(id), r)?;
            let items = r.as_array().ok_or_else(|| Error::server(STATUS, "HGETALL gave no array"))?;
            rows.push((!items.is_empty()).then(|| JobRow::from_pairs(items)));
        }
        Ok(Step::Done(rows))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(STATUS, "a read has no EXEC"))
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

    /// Every field SPEC §13 adds reads back, and the outcome states count as ended.
    #[test]
    fn the_outcome_fields_read_back() {
        let pairs: Vec<Reply> = [
            ("state", "cancelled"),
            ("result", "{}"),
            ("error_type", "m.E"),
            ("traceback", "tb"),
            ("progress", "0.5"),
            ("created", "5"),
            ("claimed", "6"),
            ("cancel", "1"),
            ("keep", "-1"),
            ("unique", "k"),
            ("wait", "w1 w2"),
        ]
        .iter()
        .flat_map(|(f, v)| [bulk(f), bulk(v)])
        .collect();
        let r = JobRow::from_pairs(&pairs);
        assert!(r.ended() && r.cancel);
        assert_eq!(
            (r.result.as_deref(), r.error_type.as_deref(), r.traceback.as_deref()),
            (Some(&b"{}"[..]), Some(&b"m.E"[..]), Some(&b"tb"[..]))
        );
        assert_eq!((r.created, r.claimed, r.keep), (Some(5), Some(6), Some(-1)));
        assert_eq!(
            (r.progress.as_deref(), r.unique.as_deref(), r.wait.as_deref()),
            (Some(&b"0.5"[..]), Some(&b"k"[..]), Some(&b"w1 w2"[..]))
        );
        let named = JobRow::from_named(&["state", "result"], &[Some(b"active"), None]);
        assert!(!named.ended() && named.result.is_none());
    }

    #[test]
    fn status_reads_each_row_in_one_pipeline() {
        let mut s = Status::new(Keys::new(b"q"), vec![b"a".to_vec(), b"b".to_vec()]).unwrap();
        let Step::Read { watch, cmds } = s.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds, vec![Cmd::from_args(["HGETALL", "emq:{q}:job:a"]), Cmd::from_args(["HGETALL", "emq:{q}:job:b"])]);
        let Step::Done(rows) = s.feed(&[Reply::Array(vec![bulk("state"), bulk("done")]), Reply::Array(vec![])]).unwrap() else { panic!() };
        assert_eq!(rows.len(), 2);
        assert!(rows[0].as_ref().is_some_and(JobRow::ended) && rows[1].is_none());
        assert_eq!(s.feed(&[wrongtype(), Reply::Array(vec![])]).unwrap_err().kind, crate::error::ErrorKind::Layout);
        assert_eq!(Status::new(Keys::new(b"q"), vec![vec![]]).err().unwrap().kind, crate::error::ErrorKind::Argument);
        assert_eq!(Status::new(Keys::new(b"q"), vec![]).unwrap().start(), Step::Done(vec![]));
    }
}

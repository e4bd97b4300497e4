//! EXTEND for many jobs in one call (SPEC §7: a worker extends every
//! running job at once). Each job is answered as `settle`'s EXTEND would answer
//! it alone: extended while its row is `active` with its token, else refused
//! and left as it is; one clock reading and one transaction for all of them.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::ending::{Ending, ENDING_FIELDS};
use crate::jobs::settle::EXTEND;
use crate::names::Keys;
use crate::numbers::{field_int, later};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::lease_bucket;
use crate::protocol::reply::Reply;
use crate::protocol::write::{Members, RowFields, Write};

/// The most jobs one call extends (a worker's running jobs: its concurrency).
pub const EXTEND_MAX: usize = 10_000;

/// A job to extend: its id, the token of its claim, and its lane (as the worker
/// got it: a lane other than its row's is an argument error, as for EXTEND).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    pub id: Vec<u8>,
    pub token: Vec<u8>,
    pub lane: Option<Vec<u8>>,
}

pub struct ExtendMany {
    keys: Keys,
    jobs: Vec<Held>,
    lease_ms: u64,
    answers: Vec<bool>,
}

/// The row fields a batch call reads for each job.
const ROW: [&str; 4] = ["state", "token", "lane", "lease"];

/// The read of each job's row, in order (their replies go to [`held_rows`]).
pub fn row_reads<'a>(keys: &'a Keys, jobs: &'a [Held]) -> impl Iterator<Item = Cmd> + 'a {
    jobs.iter().map(move |j| Cmd::new("HMGET").arg(keys.job(&j.id)).args(ROW))
}

/// [`row_reads`] of a call that may end the jobs: each row's fields, then its
/// ending fields (`ending::ENDING_FIELDS`, at [`ENDING_AT`]).
pub fn ending_row_reads<'a>(keys: &'a Keys, jobs: &'a [Held]) -> impl Iterator<Item = Cmd> + 'a {
    jobs.iter().map(move |j| Cmd::new("HMGET").arg(keys.job(&j.id)).args(ROW).args(ENDING_FIELDS))
}

/// Where an [`ending_row_reads`] row's ending fields start.
pub const ENDING_AT: usize = ROW.len();

/// The ending fields of a row read by [`ending_row_reads`].
pub fn ending_of(reply: &Reply) -> Ending {
    let f = reply.fields();
    let field = |i: usize| f.get(ENDING_AT + i).copied().flatten();
    Ending::from_fields(field(0), field(1), field(2))
}

/// Each job's row as [`row_reads`] read it: whether the job is still held
/// (`active` with its token), and the second its lease ends in (whose mark the
/// call sets, `crate::protocol::guard`). As for the single calls, a row of the wrong type
/// is a layout error and a held job naming another lane than its row an
/// argument error.
pub fn held_rows(verb: &'static str, keys: &Keys, jobs: &[Held], replies: &[Reply]) -> Result<Vec<(bool, Option<i64>)>> {
    jobs.iter()
        .zip(replies)
        .map(|(j, r)| {
            if r.is_wrongtype() {
                return Err(Error::layout(verb, format!("{} has the wrong type", String::from_utf8_lossy(&keys.job(&j.id)))));
            }
            let f = r.fields();
            let field = |i: usize| f.get(i).copied().flatten();
            let held = field(0) == Some(b"active".as_slice()) && field(1) == Some(j.token.as_slice());
            if held && field(2) != j.lane.as_deref() {
                return Err(Error::argument(verb, "job", "names another lane than its row"));
            }
            Ok((held, field(3).and_then(field_int).map(|lease| lease_bucket(lease as f64))))
        })
        .collect()
}

/// The lease marks of `seconds`, each once, in order of first appearance.
pub fn lease_marks_of(seconds: impl IntoIterator<Item = i64>) -> Vec<Write> {
    let mut seen: Vec<i64> = vec![];
    for b in seconds {
        if !seen.contains(&b) {
            seen.push(b);
        }
    }
    seen.into_iter().map(|second| Write::MarkLease { second }).collect()
}

impl ExtendMany {
    /// Checks the call before anything is read: a positive lease, at most
    /// [`EXTEND_MAX`] jobs, each with an id. An id may come twice (a worker can
    /// run a job again after losing its lease: the old run's token is refused).
    pub fn new(keys: Keys, jobs: Vec<Held>, lease_ms: u64) -> Result<Self> {
        if lease_ms == 0 {
            return Err(Error::argument(EXTEND, "lease_ms", "must be a positive integer"));
        }
        if jobs.len() > EXTEND_MAX {
            return Err(Error::argument(EXTEND, "jobs", format!("at most {EXTEND_MAX} a call")));
        }
        if jobs.iter().any(|j| j.id.is_empty()) {
            return Err(Error::argument(EXTEND, "job", "has no id"));
        }
        Ok(ExtendMany { keys, jobs, lease_ms, answers: vec![] })
    }
}

impl Conversation for ExtendMany {
    type Out = Vec<bool>;

    fn verb(&self) -> &'static str {
        EXTEND
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The clock, every row (watched: a job's row is what its EXTEND decides
    /// on, SPEC §9) and `active`'s type.
    fn start(&mut self) -> Step<Self::Out> {
        let k = &self.keys;
        let watch = self.jobs.iter().map(|j| k.job(&j.id)).collect();
        let mut cmds = vec![Cmd::new("TIME")];
        cmds.extend(row_reads(k, &self.jobs));
        cmds.push(Cmd::new("ZCARD").arg(k.active()));
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let n = self.jobs.len();
        if replies.len() != n + 2 {
            return Err(Error::server(EXTEND, "wrong number of replies"));
        }
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(EXTEND, "TIME gave no clock"))?;
        if replies[n + 1].is_wrongtype() {
            return Err(Error::layout(EXTEND, "active has the wrong type"));
        }
        let k = &self.keys;
        let deadline = later(now, self.lease_ms);
        let mut extended = Members::with_capacity(n, self.jobs.iter().map(|j| j.id.len()).sum());
        let (mut rows, mut seconds): (Vec<Write>, Vec<i64>) = (vec![], vec![]);
        self.answers = Vec::with_capacity(n);
        for (j, (held, second)) in self.jobs.iter().zip(held_rows(EXTEND, k, &self.jobs, &replies[1..=n])?) {
            let again = held && self.jobs.iter().zip(&self.answers).any(|(o, &ok)| ok && o.id == j.id);
            self.answers.push(held);
            if !held || again {
                continue;
            }
            extended.push(&j.id);
            rows.push(Write::SetRow { id: j.id.clone(), fields: RowFields::Lease(deadline) });
            // The old lease's second: a stalled check that selected it watches it (`crate::protocol::guard`).
            seconds.extend(second);
        }
        if rows.is_empty() {
            return Ok(Step::Done(std::mem::take(&mut self.answers)));
        }
        let mut w = lease_marks_of(seconds);
        w.push(Write::ExtendLeases { deadline, ids: extended });
        w.extend(rows);
        Ok(Step::Exec(w))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(EXTEND, message));
        }
        Ok(std::mem::take(&mut self.answers))
    }
}

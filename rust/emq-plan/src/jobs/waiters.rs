//! AWAIT (SPEC §13): a waiter registers its inbox with jobs, so that the call
//! that brings each to an outcome pushes its id to `P inbox:W` (`ending`). For
//! each id: a row already come to an outcome is answered now (its fields), an
//! id with no row is unknown, and any other row gets the inbox added to its
//! `wait` (at most [`WAITERS_MAX`], the oldest dropped; nothing written when it
//! is listed already).
//!
//! The guard: every row, watched, read once; the writes in one `MULTI`/`EXEC`.
//! A settle that comes between the read and the `EXEC` writes the row and
//! aborts this call, which reads again and finds the outcome; a settle that
//! read the row before this call's `EXEC` watches it, is aborted by the write
//! of `wait`, and reads it again with the new inbox. So no outcome is lost
//! between a registration and a settle. A row in `active` also gets the mark
//! of its lease's second (`crate::protocol::guard`): a stalled check that
//! selected it watches the mark, not the row.

use crate::error::{Error, Result};
use crate::jobs::ending::{inbox_problem, inboxes_of, WAITERS_MAX};
use crate::names::{id_problem, Keys};
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::lease_bucket;
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{RowFields, Write};
use crate::reads::job_row::{JobRow, ROW_FIELDS, STATUS_MAX};

pub const AWAIT: &str = "EMQ.AWAIT";

/// What a registration found of one id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Watched {
    /// No row: never added, or no longer kept.
    Unknown,
    /// Come to an outcome already (`done`, `dead`, `cancelled`): its row.
    Ended(JobRow),
    /// Registered: the inbox gets its id when it comes to an outcome. Its row as read.
    Waiting(JobRow),
}

pub struct Await {
    keys: Keys,
    ids: Vec<Vec<u8>>,
    inbox: Vec<u8>,
    answers: Vec<Watched>,
}

impl Await {
    /// Checks the call: at most `STATUS_MAX` ids, each an id (none twice), and
    /// the inbox (`ending::inbox_problem`).
    pub fn new(keys: Keys, ids: Vec<Vec<u8>>, inbox: Vec<u8>) -> Result<Self> {
        if let Some(why) = inbox_problem(&inbox) {
            return Err(Error::argument(AWAIT, "inbox", why));
        }
        if ids.len() > STATUS_MAX {
            return Err(Error::argument(AWAIT, "ids", format!("at most {STATUS_MAX} a call")));
        }
        for (i, id) in ids.iter().enumerate() {
            if let Some(why) = id_problem(id) {
                return Err(Error::argument(AWAIT, "id", why));
            }
            if ids[..i].contains(id) {
                return Err(Error::argument(AWAIT, "ids", format!("{:?} is given twice", String::from_utf8_lossy(id))));
            }
        }
        Ok(Await { keys, ids, inbox, answers: vec![] })
    }
}

/// `wait` with `inbox` added at the end, at most [`WAITERS_MAX`] kept (the
/// oldest dropped); `None` when it lists `inbox` already.
pub fn with_waiter(wait: Option<&[u8]>, inbox: &[u8]) -> Option<Vec<u8>> {
    let mut listed: Vec<&[u8]> = wait.map(|w| inboxes_of(w).collect()).unwrap_or_default();
    if listed.contains(&inbox) {
        return None;
    }
    listed.push(inbox);
    let from = listed.len().saturating_sub(WAITERS_MAX);
    Some(listed[from..].join(&b' '))
}

impl Conversation for Await {
    type Out = Vec<Watched>;

    fn verb(&self) -> &'static str {
        AWAIT
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        if self.ids.is_empty() {
            return Step::Done(vec![]);
        }
        let k = &self.keys;
        let watch = self.ids.iter().map(|id| k.job(id)).collect();
        let cmds = self.ids.iter().map(|id| Cmd::new("HMGET").arg(k.job(id)).args(ROW_FIELDS)).collect();
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if replies.len() != self.ids.len() {
            return Err(Error::server(AWAIT, "wrong number of replies"));
        }
        let mut w = vec![];
        self.answers = Vec::with_capacity(self.ids.len());
        for (id, r) in self.ids.iter().zip(replies) {
            check_error(AWAIT, &self.keys.job(id), r)?;
            let values = r.fields();
            if values.len() != ROW_FIELDS.len() {
                return Err(Error::server(AWAIT, "HMGET gave no fields"));
            }
            let row = JobRow::from_named(&ROW_FIELDS, &values);
            if row.state.is_none() {
                // Every row emq writes has a state: none, no job.
                self.answers.push(Watched::Unknown);
                continue;
            }
            if row.ended() {
                self.answers.push(Watched::Ended(row));
                continue;
            }
            if let Some(wait) = with_waiter(row.wait.as_deref(), &self.inbox) {
                if row.state.as_deref() == Some(b"active") {
                    // The lease field as a stalled check reads it (`lease_bucket` of the score).
                    if let Some(lease) = values[5].and_then(field_int) {
                        w.push(Write::MarkLease { second: lease_bucket(lease as f64) });
                    }
                }
                w.push(Write::SetRow { id: id.clone(), fields: RowFields::Waiters(wait) });
            }
            self.answers.push(Watched::Waiting(row));
        }
        if w.is_empty() {
            return Ok(Step::Done(std::mem::take(&mut self.answers)));
        }
        Ok(Step::Exec(w))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(AWAIT, message));
        }
        Ok(std::mem::take(&mut self.answers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(state: Option<&str>, wait: Option<&str>, lease: Option<&str>) -> Reply {
        let mut values = vec![Reply::Nil; ROW_FIELDS.len()];
        let at = |f: &str| ROW_FIELDS.iter().position(|x| *x == f).unwrap();
        for (f, v) in [("state", state), ("wait", wait), ("lease", lease)] {
            if let Some(v) = v {
                values[at(f)] = Reply::Bulk(v.as_bytes().to_vec());
            }
        }
        Reply::Array(values)
    }

    fn registration(ids: &[&str]) -> Await {
        Await::new(Keys::new(b"q"), ids.iter().map(|i| i.as_bytes().to_vec()).collect(), b"w9".to_vec()).unwrap()
    }

    /// A row come to an outcome is answered at once and written nothing; no
    /// row is unknown; a waiting row gets the inbox added to its waiters (an
    /// active one also the mark of its lease's second, which a stalled check
    /// watches); a row that lists it already writes nothing. A broken
    /// registration that wrote `wait` to an ended row would wait for an outcome
    /// that came already; one that set no mark could lose a stalled check's
    /// outcome.
    #[test]
    fn a_registration_answers_outcomes_now_and_registers_the_rest() {
        let mut a = registration(&["done", "gone", "run", "ready", "again"]);
        let Step::Read { watch, cmds } = a.start() else { panic!() };
        assert_eq!(watch.len(), 5, "every row watched");
        assert_eq!(cmds[0].to_args()[..3], [&b"HMGET"[..], b"emq:{q}:job:done", b"state"]);
        let replies = [
            row(Some("done"), Some("w1"), None),
            row(None, None, None),
            row(Some("active"), Some("w1"), Some("1700000001500")),
            row(Some("pending"), None, None),
            row(Some("scheduled"), Some("w9"), None),
        ];
        let Step::Exec(w) = a.feed(&replies).unwrap() else { panic!("writes") };
        assert_eq!(
            w,
            vec![
                Write::MarkLease { second: 1_700_000_001 },
                Write::SetRow { id: b"run".to_vec(), fields: RowFields::Waiters(b"w1 w9".to_vec()) },
                Write::SetRow { id: b"ready".to_vec(), fields: RowFields::Waiters(b"w9".to_vec()) },
            ]
        );
        let out = a.finish(&[Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap();
        assert!(matches!(&out[0], Watched::Ended(r) if r.state.as_deref() == Some(b"done")));
        assert_eq!(out[1], Watched::Unknown);
        assert!(matches!(&out[2], Watched::Waiting(_)) && matches!(&out[4], Watched::Waiting(_)));
        let mut a = registration(&["x"]);
        a.start();
        assert!(matches!(a.feed(&[row(Some("dead"), None, None)]).unwrap(), Step::Done(v) if matches!(v[0], Watched::Ended(_))));
    }

    #[test]
    fn a_row_lists_at_most_16_waiters_the_oldest_dropped() {
        let full: Vec<String> = (0..16).map(|i| format!("w{i}")).collect();
        let got = with_waiter(Some(full.join(" ").as_bytes()), b"new").unwrap();
        let mut want: Vec<String> = full[1..].to_vec();
        want.push("new".into());
        assert_eq!(String::from_utf8(got).unwrap(), want.join(" "));
        assert_eq!(with_waiter(Some(b"a  b"), b"b"), None);
        assert_eq!(with_waiter(None, b"a"), Some(b"a".to_vec()));
    }

    #[test]
    fn bad_input_is_refused_before_anything_is_read() {
        let k = || Keys::new(b"q");
        assert!(Await::new(k(), vec![b"a".to_vec()], b"w 1".to_vec()).err().unwrap().message.contains("inbox"));
        assert!(Await::new(k(), vec![b"a".to_vec(), b"a".to_vec()], b"w".to_vec()).err().unwrap().message.contains("twice"));
        assert!(Await::new(k(), vec![vec![]], b"w".to_vec()).err().unwrap().message.contains("id"));
        assert_eq!(Await::new(k(), vec![], b"w".to_vec()).unwrap().start(), Step::Done(vec![]));
    }
}

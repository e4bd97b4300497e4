//! How a job's run ends (SPEC §13): its outcome told to the waiters its row
//! lists, a cancel asked of it while it ran honoured, and the limits on what a
//! settle writes. Shared by every call that may end a job: COMPLETE and FAIL
//! (`settle`), their batches (`batch`), the stalled check (`sweep::stalled`)
//! and CANCEL (`cancel`).
//!
//! An **outcome** is a job done, dead (a fail with no attempts left, or the
//! stalled check), or cancelled. A call that makes one reads the row's `wait`,
//! `cancel` and `keep` with the fields it reads anyway ([`ENDING_FIELDS`]: a
//! job nobody waits for costs three more fields of an `HMGET`, no command and
//! no round trip), and for each inbox `W` that `wait` lists pushes the job's id
//! to `P inbox:W` (`RPUSH`, then `PEXPIRE` of an hour), in the transaction that
//! settles it. A running job whose row says `cancel 1` is cancelled when it is
//! completed, failed or recovered by the stalled check, never retried.
//!
//! Only when a row has waiters or a cancel does the call read more, in one more
//! step under its watch ([`Extras`]): each inbox's type (a push to a key of
//! another type would fail inside `EXEC`, after writes that stand), and for a
//! cancel the retention of done rows (a cancelled row is kept as a done one
//! is) and `P cancelled`'s type.

use crate::error::{Error, Result};
use crate::jobs::retention::{self, ended_writes, Ended, Retention};
use crate::names::Keys;
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::Step;
use crate::protocol::reply::Reply;
use crate::protocol::write::{Members, RowFields, Write};

/// The row fields every call that may end a job reads beside its own.
pub const ENDING_FIELDS: [&str; 3] = ["wait", "cancel", "keep"];

/// The largest result a complete writes (512 KiB): a row is read whole by a
/// status read and the dashboard.
pub const RESULT_MAX: usize = 512 * 1024;
/// The largest traceback a fail writes (64 KiB): the caller bounds its text.
pub const TRACEBACK_MAX: usize = 64 * 1024;
/// The largest error type (an exception's qualified class name) a fail writes.
pub const ERROR_TYPE_MAX: usize = 1024;
/// The largest progress value a running job writes (64 KiB).
pub const PROGRESS_MAX: usize = 64 * 1024;
/// The most waiters a row lists: a registration past them drops the oldest.
pub const WAITERS_MAX: usize = 16;
/// The longest inbox id: 1 to 64 ASCII letters, digits, `-` or `_`.
pub const INBOX_MAX: usize = 64;
/// How long a request to stop a running job stays in `P cancels` (ms): a
/// worker reads it within a beat.
pub const CANCELS_KEEP_MS: i64 = 3_600_000;

/// Why an inbox id is refused, or `None`: 1 to [`INBOX_MAX`] ASCII letters,
/// digits, `-` or `_` (it is a word of the row's `wait` and part of a key).
pub fn inbox_problem(inbox: &[u8]) -> Option<&'static str> {
    if inbox.is_empty() || inbox.len() > INBOX_MAX {
        return Some("must be 1 to 64 characters");
    }
    if !inbox.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_') {
        return Some("must hold only ASCII letters, digits, '-' and '_'");
    }
    None
}

/// Refuses a value of more than `max` bytes, naming the argument.
pub fn check_size(verb: &str, name: &str, value: Option<&[u8]>, max: usize) -> Result<()> {
    match value {
        Some(v) if v.len() > max => {
            Err(Error::argument(verb, name, format!("is {} bytes, more than the limit of {max} ({} KiB)", v.len(), max / 1024)))
        }
        _ => Ok(()),
    }
}

/// What a settling call read of a row's ending fields ([`ENDING_FIELDS`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ending {
    /// The row's `wait`: its waiters' inboxes, space-separated.
    pub wait: Option<Vec<u8>>,
    /// The row says `cancel 1`: it was asked to stop while it ran.
    pub cancel: bool,
    /// The job's own retention (ms, `-1`: forever), when it has a readable one.
    pub keep: Option<i64>,
}

impl Ending {
    /// From the values of `wait`, `cancel` and `keep` as read (absent: `None`).
    pub fn from_fields(wait: Option<&[u8]>, cancel: Option<&[u8]>, keep: Option<&[u8]>) -> Self {
        Ending {
            wait: wait.filter(|w| inboxes_of(w).next().is_some()).map(<[u8]>::to_vec),
            cancel: cancel == Some(b"1".as_slice()),
            keep: keep.and_then(field_int).filter(|&k| k >= -1),
        }
    }

    /// The waiters' inboxes, each once, in the order the row lists them.
    pub fn inboxes(&self) -> Vec<&[u8]> {
        let mut out: Vec<&[u8]> = vec![];
        for w in self.wait.as_deref().map(inboxes_of).into_iter().flatten() {
            if !out.contains(&w) {
                out.push(w);
            }
        }
        out
    }

    /// How long the row is kept once it ends: its own `keep`, else the queue's `done_ms`.
    pub fn keep_or(&self, done_ms: i64) -> i64 {
        self.keep.unwrap_or(done_ms)
    }

    /// Whether the call must read more before it plans this row's ending ([`Extras`]).
    pub fn needs_more(&self) -> bool {
        self.wait.is_some() || self.cancel
    }
}

/// The inbox ids a `wait` field lists (words between spaces).
pub fn inboxes_of(wait: &[u8]) -> impl Iterator<Item = &[u8]> {
    wait.split(|b| *b == b' ').filter(|w| !w.is_empty())
}

/// The pushes that tell waiters of jobs come to an outcome: for each inbox, in
/// the order of its first job, one `RPUSH` of its jobs' ids (in the order they
/// came to their outcomes) and its `PEXPIRE`. The same lists as one push a job
/// and inbox, one after another.
#[derive(Default)]
pub struct Notices {
    by_inbox: Vec<(Vec<u8>, Vec<Vec<u8>>)>,
}

impl Notices {
    /// Job `id`, whose row read as `ending`, came to an outcome.
    pub fn add(&mut self, id: &[u8], ending: &Ending) {
        for inbox in ending.inboxes() {
            match self.by_inbox.iter_mut().find(|(w, _)| w == inbox) {
                Some((_, ids)) => ids.push(id.to_vec()),
                None => self.by_inbox.push((inbox.to_vec(), vec![id.to_vec()])),
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.by_inbox.is_empty()
    }

    pub fn writes(self, w: &mut Vec<Write>) {
        for (inbox, ids) in self.by_inbox {
            w.push(Write::Notify { inbox: inbox.clone(), ids: Members::of(&ids) });
            w.push(Write::KeepInbox { inbox });
        }
    }
}

/// What a call reads before it plans endings that need more ([`Ending::needs_more`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// The inboxes of the waiters it will tell, each once.
    pub inboxes: Vec<Vec<u8>>,
    /// Some job is cancelled: the retention of done rows and `P cancelled`'s type.
    pub cancels: bool,
}

/// What the extra step read: the queue's `done_ms`, when a cancel asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtrasRead {
    pub done_ms: i64,
}

impl Extras {
    /// The extras of the endings `rows` (those a call ends).
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a Ending>) -> Self {
        let mut e = Extras::default();
        for r in rows {
            e.cancels |= r.cancel;
            for inbox in r.inboxes() {
                if !e.inboxes.iter().any(|i| i == inbox) {
                    e.inboxes.push(inbox.to_vec());
                }
            }
        }
        e
    }

    pub fn needed(&self) -> bool {
        !self.inboxes.is_empty() || self.cancels
    }

    /// The step: `LLEN` of each inbox, then (for a cancel) `HMGET P retention
    /// done_ms` and `ZCARD P cancelled`. Under the call's watch, which it adds
    /// nothing to: the inboxes' and `P cancelled`'s types never change under emq,
    /// and the policy is read unwatched, as a complete reads it.
    pub fn step<T>(&self, keys: &Keys) -> Step<T> {
        let mut cmds: Vec<Cmd> = self.inboxes.iter().map(|w| Cmd::new("LLEN").arg(keys.inbox(w))).collect();
        if self.cancels {
            cmds.push(retention::read(keys, &["done_ms"]));
            cmds.push(Cmd::new("ZCARD").arg(keys.cancelled()));
        }
        Step::Read { watch: vec![], cmds }
    }

    /// The step's replies: a key of the wrong type is a layout error.
    pub fn parse(&self, verb: &str, keys: &Keys, replies: &[Reply]) -> Result<ExtrasRead> {
        if replies.len() != self.inboxes.len() + 2 * usize::from(self.cancels) {
            return Err(Error::server(verb, "endings: wrong number of replies"));
        }
        for (w, r) in self.inboxes.iter().zip(replies) {
            crate::protocol::reply::check_error(verb, &keys.inbox(w), r)?;
        }
        let mut done_ms = retention::DONE_MS;
        if self.cancels {
            let at = self.inboxes.len();
            done_ms = Retention::from_reply(verb, keys, &["done_ms"], &replies[at])?.done_ms;
            crate::protocol::reply::check_error(verb, &keys.cancelled(), &replies[at + 1])?;
        }
        Ok(ExtrasRead { done_ms })
    }
}

/// The writes of rows cancelled at `now`, each kept `keep` ms (`retention::ended_writes`).
pub fn cancelled_writes(rows: &[(&[u8], i64)], now: i64, lease: bool, w: &mut Vec<Write>) {
    let rows = rows.iter().map(|&(id, keep)| Ended { id, keep, fields: RowFields::Cancelled { finished: now } }).collect();
    ended_writes(rows, now, lease, |at, ids| Write::ListCancelled { at, ids }, |before| Write::TrimCancelled { before }, w);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(xs: &[&str]) -> Members {
        xs.iter().collect()
    }

    #[test]
    fn the_ending_fields_read_as_stored_or_not_at_all() {
        let e = Ending::from_fields(Some(b" w1  w2 w1"), Some(b"1"), Some(b"-1"));
        assert_eq!((e.inboxes(), e.cancel, e.keep), (vec![&b"w1"[..], b"w2"], true, Some(-1)));
        let e = Ending::from_fields(Some(b"  "), Some(b"yes"), Some(b"-2"));
        assert_eq!(e, Ending::default(), "blank waiters, a cancel not `1`, a keep below -1: none");
        assert!(!e.needs_more());
        assert_eq!(Ending::from_fields(None, None, Some(b"1000000000000000")).keep, None, "16 digits: unreadable");
        assert_eq!((Ending { keep: Some(5), ..Default::default() }.keep_or(9), Ending::default().keep_or(9)), (5, 9));
    }

    /// Waiters are told once per job and inbox, one push an inbox in the order
    /// of its first job: a broken notice that pushed per row would interleave
    /// nothing differently, but one that lost an inbox loses a waiter's outcome.
    #[test]
    fn notices_push_each_inbox_its_jobs_in_order() {
        let mut n = Notices::default();
        assert!(n.is_empty());
        n.add(b"a", &Ending::from_fields(Some(b"w1 w2"), None, None));
        n.add(b"b", &Ending::default());
        n.add(b"c", &Ending::from_fields(Some(b"w2"), None, None));
        let mut w = vec![];
        n.writes(&mut w);
        assert_eq!(
            w,
            vec![
                Write::Notify { inbox: b"w1".to_vec(), ids: members(&["a"]) },
                Write::KeepInbox { inbox: b"w1".to_vec() },
                Write::Notify { inbox: b"w2".to_vec(), ids: members(&["a", "c"]) },
                Write::KeepInbox { inbox: b"w2".to_vec() },
            ]
        );
    }

    #[test]
    fn extras_read_the_inboxes_and_for_a_cancel_the_retention() {
        let k = Keys::new(b"q");
        let rows = [Ending::from_fields(Some(b"w1"), None, None), Ending::from_fields(Some(b"w1 w2"), Some(b"1"), None)];
        let e = Extras::of(&rows);
        assert_eq!(e, Extras { inboxes: vec![b"w1".to_vec(), b"w2".to_vec()], cancels: true });
        let Step::<()>::Read { watch, cmds } = e.step(&k) else { panic!("a read") };
        assert!(watch.is_empty());
        assert_eq!(
            cmds,
            vec![
                Cmd::from_args(["LLEN", "emq:{q}:inbox:w1"]),
                Cmd::from_args(["LLEN", "emq:{q}:inbox:w2"]),
                Cmd::from_args(["HMGET", "emq:{q}:retention", "done_ms"]),
                Cmd::from_args(["ZCARD", "emq:{q}:cancelled"]),
            ]
        );
        let ok = [Reply::Int(0), Reply::Int(3), Reply::Array(vec![Reply::Bulk(b"50".to_vec())]), Reply::Int(0)];
        assert_eq!(e.parse("V", &k, &ok).unwrap(), ExtrasRead { done_ms: 50 });
        let wrong = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let mut bad = ok.clone();
        bad[1] = wrong.clone();
        let err = e.parse("V", &k, &bad).unwrap_err();
        assert!(err.message.contains("emq:{q}:inbox:w2"), "{err}");
        let mut bad = ok.clone();
        bad[3] = wrong;
        assert!(e.parse("V", &k, &bad).unwrap_err().message.contains("emq:{q}:cancelled"));
        assert!(!Extras::of(&[Ending::default()]).needed());
    }

    #[test]
    fn inbox_ids_are_short_words() {
        assert!(inbox_problem(b"0123abcdef-_Z").is_none());
        assert!(inbox_problem(&[b'a'; 64]).is_none());
        for bad in [&b""[..], &[b'a'; 65], b"a b", b"a:b", b"\xff", b"w*"] {
            assert!(inbox_problem(bad).is_some(), "{bad:?}");
        }
    }

    /// Cancelled rows are kept as done rows are: deleted at once when kept 0 ms,
    /// else expiring, listed in `P cancelled`, whose entries older than the
    /// longest keep are trimmed. A broken one that listed a deleted row would
    /// leave an entry nothing trims.
    #[test]
    fn cancelled_rows_are_kept_as_done_rows_are() {
        let c = |id: &str| Write::SetRow { id: id.as_bytes().to_vec(), fields: RowFields::Cancelled { finished: 100 } };
        let mut w = vec![];
        cancelled_writes(&[(b"a", 0), (b"b", 50), (b"c", -1), (b"d", 20)], 100, true, &mut w);
        let drop = |id: &str| Write::DropLease { id: id.as_bytes().to_vec() };
        let expire = |id: &str, at| Write::ExpireRow { id: id.as_bytes().to_vec(), at };
        assert_eq!(
            w,
            vec![
                Write::DeleteRows(members(&["a"])),
                c("b"),
                drop("b"),
                expire("b", 150),
                c("c"),
                drop("c"),
                c("d"),
                drop("d"),
                expire("d", 120),
                Write::ListCancelled { at: 100, ids: members(&["b", "c", "d"]) },
                Write::TrimCancelled { before: 50 },
            ]
        );
        let mut w = vec![];
        cancelled_writes(&[(b"a", -1)], 100, false, &mut w);
        assert_eq!(w, vec![c("a"), Write::ListCancelled { at: 100, ids: members(&["a"]) }], "forever: no expiry, no trim");
    }

    #[test]
    fn sizes_past_a_limit_are_refused_naming_the_argument() {
        let e = check_size("Queue.complete", "result", Some(&[0u8; RESULT_MAX + 1]), RESULT_MAX).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Argument);
        assert_eq!(e.message, "Queue.complete: result is 524289 bytes, more than the limit of 524288 (512 KiB)");
        assert!(check_size("V", "result", Some(&[0u8; RESULT_MAX]), RESULT_MAX).is_ok());
        assert!(check_size("V", "result", None, RESULT_MAX).is_ok());
    }
}

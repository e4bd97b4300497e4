//! CANCEL (SPEC §13): a job not yet claimed leaves whatever holds it and its
//! row says `cancelled`, in one transaction; a running job is asked to stop;
//! a job come to an outcome (or none) is left as it is, and the answer says so.
//!
//! The row's `state` says where the id is (I1):
//! - `scheduled`: `ZREM P schedule`, and `INCR P promotions`, as a promote that
//!   takes a member does: promoters watch that key, not the rows of `schedule`
//!   (`crate::protocol::guard`), and a promote planned before the cancel must
//!   not push the job to `pending` after it;
//! - `pending`: `LREM` of the id from `P pending` or its lane's list (count 1:
//!   the cost grows with its place in the list);
//! - then the row becomes `cancelled` (`finished`, `error cancelled`), kept as a
//!   done row is (its own `keep`, else the queue's `done_ms`) and listed in
//!   `P cancelled`, and its waiters are told (`ending`);
//! - `active`: `cancel 1` in the row and the id in `P cancels` (the last hour
//!   of requests, which workers read once a beat), with the mark of the row's
//!   lease second (a stalled check that selected it watches the mark); the job
//!   is cancelled when its worker settles it or its lease runs out.
//!
//! The guard: the row, watched (a promote, a claim or a settle of the job
//! writes it). The types of every key it may write are read first; the lane's
//! list and the waiters' inboxes, known once the row is read, in a second step.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::counters::Tally;
use crate::jobs::ending::{cancelled_writes, Ending, Extras, Notices, CANCELS_KEEP_MS};
use crate::jobs::retention::{self, Retention};
use crate::names::{id_problem, Keys};
use crate::numbers::{field_int, signed_decimal};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::lease_bucket;
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{Members, RowFields, Write};

pub const CANCEL: &str = "EMQ.CANCEL";

/// What a cancel did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelOutcome {
    /// Not yet claimed: taken out of `schedule` or its list; the row says `cancelled`.
    Cancelled,
    /// Running: asked to stop; cancelled when its worker settles it or its lease runs out.
    Stopping,
    /// Come to an outcome already (`done`, `dead`, `cancelled`): nothing changed.
    AlreadyDone,
    /// No row (never added, or no longer kept): nothing changed.
    Unknown,
}

/// The row fields a cancel reads.
const ROW: [&str; 7] = ["state", "lane", "lease", "wait", "cancel", "keep", "finished"];

pub struct Cancel {
    keys: Keys,
    id: Vec<u8>,
    out: Option<CancelOutcome>,
    /// The first read's replies, kept while the lane's list and the inboxes are read.
    first: Option<(Vec<Reply>, Extras, Option<Vec<u8>>)>,
}

impl Cancel {
    pub fn new(keys: Keys, id: Vec<u8>) -> Result<Self> {
        if let Some(why) = id_problem(&id) {
            return Err(Error::argument(CANCEL, "id", why));
        }
        Ok(Cancel { keys, id, out: None, first: None })
    }
}

impl Conversation for Cancel {
    type Out = CancelOutcome;

    fn verb(&self) -> &'static str {
        CANCEL
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The clock, the row (watched), the policy of done rows, and the types of
    /// `schedule`, `pending`, `cancelled`, `cancels` and `promotions`.
    fn start(&mut self) -> Step<CancelOutcome> {
        let k = &self.keys;
        let cmds = vec![
            Cmd::new("TIME"),
            Cmd::new("HMGET").arg(k.job(&self.id)).args(ROW),
            retention::read(k, &["done_ms"]),
            Cmd::new("ZCARD").arg(k.schedule()),
            Cmd::new("LLEN").arg(k.pending()),
            Cmd::new("ZCARD").arg(k.cancelled()),
            Cmd::new("ZCARD").arg(k.cancels()),
            Cmd::new("GET").arg(k.promotions()),
        ];
        Step::Read { watch: vec![k.job(&self.id)], cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<CancelOutcome>> {
        match self.first.take() {
            Some((first, extras, lane)) => {
                let (lane_reply, inbox_replies) = match &lane {
                    Some(_) => replies.split_last().map(|(l, rest)| (Some(l), rest)).unwrap_or((None, replies)),
                    None => (None, replies),
                };
                extras.parse(CANCEL, &self.keys, inbox_replies)?;
                if let (Some(l), Some(r)) = (&lane, lane_reply) {
                    check_error(CANCEL, &self.keys.lane(l), r)?;
                }
                self.plan(&first, true)
            }
            None => self.plan(replies, false),
        }
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<CancelOutcome> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(CANCEL, message));
        }
        self.out.ok_or_else(|| Error::server(CANCEL, "EXEC's replies were fed before a plan"))
    }
}

impl Cancel {
    /// The plan from the first read; `checked`, whether the second step (the
    /// lane's list, the inboxes) has been read.
    fn plan(&mut self, replies: &[Reply], checked: bool) -> Result<Step<CancelOutcome>> {
        let k = self.keys.clone();
        let [time, row, policy, schedule, pending, cancelled, cancels, promotions] = replies else {
            return Err(Error::server(CANCEL, "wrong number of replies"));
        };
        let now = parse_time(time).ok_or_else(|| Error::server(CANCEL, "TIME gave no clock"))?;
        check_error(CANCEL, &k.job(&self.id), row)?;
        let f = row.fields();
        let field = |i: usize| f.get(i).copied().flatten();
        let ending = Ending::from_fields(field(3), field(4), field(5));
        let lane = field(1).map(<[u8]>::to_vec);
        let state = field(0);
        let answer = |out| Ok(Step::Done(out));
        let ready = match state {
            None => return answer(CancelOutcome::Unknown),
            Some(b"done" | b"dead" | b"cancelled") => return answer(CancelOutcome::AlreadyDone),
            Some(b"active") => {
                check_error(CANCEL, &k.cancels(), cancels)?;
                let mut w: Vec<Write> =
                    field(2).and_then(field_int).map(|lease| Write::MarkLease { second: lease_bucket(lease as f64) }).into_iter().collect();
                w.push(Write::SetRow { id: self.id.clone(), fields: RowFields::AskStop });
                w.push(Write::AskToStop { at: now, ids: Members::one(&self.id) });
                w.push(Write::TrimCancels { before: now.saturating_sub(CANCELS_KEEP_MS) });
                self.out = Some(CancelOutcome::Stopping);
                return Ok(Step::Exec(w));
            }
            Some(b"scheduled") => false,
            Some(b"pending") => true,
            Some(other) => {
                return Err(Error::layout(
                    CANCEL,
                    format!(
                        "{} has the state {:?}, not one of emq's",
                        String::from_utf8_lossy(&k.job(&self.id)),
                        String::from_utf8_lossy(other)
                    ),
                ))
            }
        };
        // Not yet claimed: the lane's list and the waiters' inboxes are typed first.
        let extras = Extras { inboxes: ending.inboxes().into_iter().map(<[u8]>::to_vec).collect(), cancels: false };
        let list_of_lane = lane.clone().filter(|_| ready);
        if !checked && (extras.needed() || list_of_lane.is_some()) {
            let Step::Read { mut cmds, .. } = extras.step::<()>(&k) else { unreachable!("a read") };
            if let Some(l) = &list_of_lane {
                cmds.push(Cmd::new("LLEN").arg(k.lane(l)));
            }
            self.first = Some((replies.to_vec(), extras, list_of_lane));
            return Ok(Step::Read { watch: vec![], cmds });
        }
        let done_ms = Retention::from_reply(CANCEL, &k, &["done_ms"], policy)?.done_ms;
        let keep = ending.keep_or(done_ms);
        if keep != 0 {
            check_error(CANCEL, &k.cancelled(), cancelled)?;
        }
        let mut w = vec![];
        if ready {
            if lane.is_none() {
                check_error(CANCEL, &k.pending(), pending)?;
            }
            w.push(Write::Dequeue { lane, id: self.id.clone() });
        } else {
            check_error(CANCEL, &k.schedule(), schedule)?;
            check_error(CANCEL, &k.promotions(), promotions)?;
            if promotions.as_bytes().is_some_and(|p| signed_decimal(p).is_none()) {
                return Err(Error::layout(CANCEL, format!("{} is not a count", String::from_utf8_lossy(&k.promotions()))));
            }
            w.push(Write::Unschedule(Members::one(&self.id)));
            // Promoters watch this key (see the module doc).
            w.push(Write::CountPromotion);
        }
        cancelled_writes(&[(&self.id, keep)], now, false, &mut w);
        let mut notices = Notices::default();
        notices.add(&self.id, &ending);
        notices.writes(&mut w);
        Tally { cancelled: 1, ..Tally::default() }.writes(now, &mut w);
        self.out = Some(CancelOutcome::Cancelled);
        Ok(Step::Exec(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn time() -> Reply {
        Reply::Array(vec![bulk("1700000000"), bulk("123456")])
    }

    const NOW: i64 = 1_700_000_000_123;

    /// The first read's replies for a row of `fields` (in `ROW`'s order), a
    /// policy keeping done rows 50 ms and every key of its type.
    fn replies(fields: [Option<&str>; 7]) -> Vec<Reply> {
        let row = Reply::Array(fields.iter().map(|v| v.map_or(Reply::Nil, bulk)).collect());
        vec![time(), row, Reply::Array(vec![bulk("50")]), Reply::Int(1), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Nil]
    }

    fn cancel() -> Cancel {
        Cancel::new(Keys::new(b"q"), b"a".to_vec()).unwrap()
    }

    fn ids(xs: &[&str]) -> Members {
        xs.iter().collect()
    }

    fn cancelled(at: i64) -> Vec<Write> {
        vec![
            Write::SetRow { id: b"a".to_vec(), fields: RowFields::Cancelled { finished: at } },
            Write::ExpireRow { id: b"a".to_vec(), at: at + 50 },
            Write::ListCancelled { at, ids: ids(&["a"]) },
            Write::TrimCancelled { before: at - 50 },
        ]
    }

    /// The counters of one cancel that took effect at `NOW` (`jobs::counters`).
    fn one_cancel_counted() -> Vec<Write> {
        let minute = crate::jobs::counters::minute_of(NOW);
        vec![Write::Count { minute, kind: crate::protocol::write::Counted::Cancelled, by: 1 }, Write::KeepCounts { minute }]
    }

    /// A scheduled job leaves `schedule` and counts as a promote (promoters
    /// watch the count): a broken cancel that did not would let a promote
    /// planned before it push the cancelled job to `pending`.
    #[test]
    fn a_scheduled_job_leaves_schedule_and_aborts_promotes_in_flight() {
        let mut c = cancel();
        let Step::Read { watch, .. } = c.start() else { panic!() };
        assert_eq!(watch, vec![b"emq:{q}:job:a".to_vec()]);
        let Step::Exec(w) = c.feed(&replies([Some("scheduled"), None, None, None, None, None, None])).unwrap() else { panic!() };
        let mut want = vec![Write::Unschedule(ids(&["a"])), Write::CountPromotion];
        want.extend(cancelled(NOW));
        want.extend(one_cancel_counted());
        assert_eq!(w, want, "one cancel counted, in the cancel's transaction");
        assert_eq!(c.finish(&[]).unwrap(), CancelOutcome::Cancelled);
    }

    /// A pending job leaves its list (its lane's, whose type is read first) and
    /// its waiters are told; a running one is asked to stop, with the mark of
    /// its lease second; an ended or absent one writes nothing.
    #[test]
    fn pending_running_ended_and_absent_jobs() {
        let mut c = cancel();
        c.start();
        let Step::Read { cmds, .. } = c.feed(&replies([Some("pending"), Some("L"), None, Some("w1"), None, Some("-1"), None])).unwrap()
        else {
            panic!("the lane's list and the inbox are typed first")
        };
        assert_eq!(cmds, vec![Cmd::from_args(["LLEN", "emq:{q}:inbox:w1"]), Cmd::from_args(["LLEN", "emq:{q}:lane:L"])]);
        let Step::Exec(w) = c.feed(&[Reply::Int(0), Reply::Int(2)]).unwrap() else { panic!() };
        assert_eq!(
            w,
            vec![
                Write::Dequeue { lane: Some(b"L".to_vec()), id: b"a".to_vec() },
                Write::SetRow { id: b"a".to_vec(), fields: RowFields::Cancelled { finished: NOW } },
                Write::ListCancelled { at: NOW, ids: ids(&["a"]) },
                Write::Notify { inbox: b"w1".to_vec(), ids: ids(&["a"]) },
                Write::KeepInbox { inbox: b"w1".to_vec() },
                one_cancel_counted()[0].clone(),
                one_cancel_counted()[1].clone(),
            ],
            "kept forever (its own keep): no expiry"
        );
        let mut c = cancel();
        c.start();
        let Step::Exec(w) = c.feed(&replies([Some("active"), None, Some("1700000001500"), None, None, None, None])).unwrap() else {
            panic!()
        };
        assert_eq!(
            w,
            vec![
                Write::MarkLease { second: 1_700_000_001 },
                Write::SetRow { id: b"a".to_vec(), fields: RowFields::AskStop },
                Write::AskToStop { at: NOW, ids: ids(&["a"]) },
                Write::TrimCancels { before: NOW - CANCELS_KEEP_MS },
            ]
        );
        assert_eq!(c.finish(&[]).unwrap(), CancelOutcome::Stopping);
        for (state, out) in
            [(Some("done"), CancelOutcome::AlreadyDone), (Some("cancelled"), CancelOutcome::AlreadyDone), (None, CancelOutcome::Unknown)]
        {
            let mut c = cancel();
            c.start();
            assert_eq!(c.feed(&replies([state, None, None, None, None, None, None])).unwrap(), Step::Done(out));
        }
    }

    #[test]
    fn wrong_types_refuse_before_anything_is_written() {
        let wrong = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let mut r = replies([Some("scheduled"), None, None, None, None, None, None]);
        r[3] = wrong.clone();
        assert_eq!(cancel().plan(&r, true).unwrap_err().kind, crate::error::ErrorKind::Layout);
        let mut r = replies([Some("pending"), None, None, None, None, None, None]);
        r[4] = wrong;
        assert_eq!(cancel().plan(&r, true).unwrap_err().kind, crate::error::ErrorKind::Layout);
        let r = replies([Some("weird"), None, None, None, None, None, None]);
        assert_eq!(cancel().plan(&r, true).unwrap_err().kind, crate::error::ErrorKind::Layout);
        assert_eq!(Cancel::new(Keys::new(b"q"), vec![]).err().unwrap().kind, crate::error::ErrorKind::Argument);
    }
}

//! COMPLETE and FAIL for many held jobs in one call (SPEC §7, a worker's group
//! commit: it settles every job that finished since its last commit,
//! whether its handler returned or raised). Each job is answered as `settle`'s
//! COMPLETE or FAIL would answer it alone (refused, and left as it is, unless
//! its row is `active` with its token), under one clock reading, in one
//! transaction. The result is that of the single calls one after another in
//! the order given: a lane is offered when the job that frees its slot (or a
//! retry that makes its list non-empty) is reached, and a retry due before the
//! head of `schedule` as it stands by then wakes a parked worker. Results and
//! errors are written, outcomes told to their waiters, and jobs asked to stop
//! cancelled, as the single calls do (SPEC §13, `ending`).

use crate::batch::complete_many::{done_reads, lane_reads, lane_states, lane_writes, lanes_of};
use crate::batch::extend_many::{lease_marks_of, Held, EXTEND_MAX};
use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::counters::Tally;
use crate::jobs::ending::{cancelled_writes, Ending, Extras, ExtrasRead, Notices, ENDING_FIELDS};
use crate::jobs::retention::{self, DoneRow, Retention};
use crate::jobs::settle::{check_outcome, fail_writes, Fail, Failed, Settled, COMPLETE, FAIL};
use crate::lanes::offer::{level, schedule_head, Offers};
use crate::names::Keys;
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::{confirm_empty, lease_bucket, still_empty};
use crate::protocol::reply::Reply;
use crate::protocol::write::{Counted, ErrorDetail, Members, Write};

/// What a job's handler came to.
#[derive(Clone, Debug, PartialEq)]
pub enum Fate {
    /// As `settle::Action::Complete`, with its result.
    Complete { result: Option<Vec<u8>> },
    /// As `settle::Action::Fail`, with the job's own draw for the backoff's
    /// jitter (in [0, 1)), used when `retry_in_ms` is `None`; `retry: false`:
    /// dead now.
    Fail { error: Vec<u8>, retry_in_ms: Option<u64>, jitter: f64, detail: Option<Box<ErrorDetail>>, retry: bool },
}

impl Fate {
    /// A complete with no result.
    pub const COMPLETE: Fate = Fate::Complete { result: None };

    /// A fail with no error type or traceback.
    pub fn fail(error: &[u8], retry_in_ms: Option<u64>, jitter: f64) -> Fate {
        Fate::Fail { error: error.to_vec(), retry_in_ms, jitter, detail: None, retry: true }
    }

    fn verb(&self) -> &'static str {
        match self {
            Fate::Complete { .. } => COMPLETE,
            Fate::Fail { .. } => FAIL,
        }
    }
}

pub struct SettleMany {
    keys: Keys,
    jobs: Vec<(Held, Fate)>,
    /// The lanes the jobs name, in the order of their first job.
    lanes: Vec<Vec<u8>>,
    answers: Vec<Settled>,
    held: Option<Waiting>,
    /// The first read's replies, kept while the endings' extras are read.
    first: Option<(Vec<Reply>, Extras)>,
}

/// What a plan waits for before it is applied.
enum Waiting {
    /// Jobs made dead: the trim of `dead` (`retention::dead_step`), then the
    /// lane lists relied on being empty, if any.
    Dead { writes: Vec<Write>, now: i64, dying: Vec<Vec<u8>>, relied: Vec<Vec<u8>> },
    /// The lane lists relied on being empty (how many), watched and read again.
    Confirm(Vec<Write>, usize),
}

/// The row fields read for each job (FAIL's: the attempts decide retry or dead),
/// then its ending fields.
const ROW: [&str; 10] =
    ["state", "token", "lane", "attempts", "max_attempts", "lease", ENDING_FIELDS[0], ENDING_FIELDS[1], ENDING_FIELDS[2], "priority"];

/// Replies after the rows and lanes: ring, wake, active, the retention of done
/// rows, done, pending, the head of schedule, dead.
const TAIL: usize = 8;

impl SettleMany {
    /// Checks the call before anything is read: at most `EXTEND_MAX` jobs, each
    /// with an id, none twice (a job is settled once).
    pub fn new(keys: Keys, jobs: Vec<(Held, Fate)>) -> Result<Self> {
        let verb = verb_of(&jobs);
        if jobs.len() > EXTEND_MAX {
            return Err(Error::argument(verb, "jobs", format!("at most {EXTEND_MAX} a call")));
        }
        for (i, (j, f)) in jobs.iter().enumerate() {
            if j.id.is_empty() {
                return Err(Error::argument(f.verb(), "job", "has no id"));
            }
            if jobs[..i].iter().any(|(o, _)| o.id == j.id) {
                return Err(Error::argument(verb, "jobs", format!("{:?} is given twice", String::from_utf8_lossy(&j.id))));
            }
            match f {
                Fate::Complete { result } => check_outcome(COMPLETE, result.as_deref(), None)?,
                Fate::Fail { detail, .. } => check_outcome(FAIL, None, detail.as_deref())?,
            }
        }
        let lanes = lanes_of(jobs.iter().map(|(j, _)| j));
        Ok(SettleMany { keys, jobs, lanes, answers: vec![], held: None, first: None })
    }
}

/// A batch's verb: COMPLETE when every job completes, FAIL when any fails.
fn verb_of(jobs: &[(Held, Fate)]) -> &'static str {
    if jobs.iter().all(|(_, f)| matches!(f, Fate::Complete { .. })) {
        COMPLETE
    } else {
        FAIL
    }
}

impl Conversation for SettleMany {
    type Out = Vec<Settled>;

    fn verb(&self) -> &'static str {
        verb_of(&self.jobs)
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The clock, every row and the control of every lane named (watched, as the
    /// single calls watch them, SPEC §9), the lanes' lengths, and the type (or
    /// the head) of everything a complete or a fail may write.
    fn start(&mut self) -> Step<Self::Out> {
        let k = &self.keys;
        let mut watch: Vec<Vec<u8>> = self.jobs.iter().map(|(j, _)| k.job(&j.id)).collect();
        watch.extend(self.lanes.iter().map(|l| k.lanectl(l)));
        let mut cmds = vec![Cmd::new("TIME")];
        cmds.extend(self.jobs.iter().map(|(j, _)| Cmd::new("HMGET").arg(k.job(&j.id)).args(ROW)));
        lane_reads(k, &self.lanes, &mut cmds);
        done_reads(k, &mut cmds);
        cmds.push(Cmd::new("LLEN").arg(k.pending()));
        cmds.push(schedule_head(k));
        cmds.push(Cmd::new("ZCARD").arg(k.dead()));
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let verb = self.verb();
        match self.held.take() {
            Some(Waiting::Confirm(writes, lists)) => {
                if !still_empty(replies, lists) {
                    return Err(Error::conflict(verb, "a lane it found empty got work before the watch"));
                }
                return Ok(Step::Exec(writes));
            }
            Some(Waiting::Dead { mut writes, now, dying, relied }) => {
                writes.extend(retention::trim_from_replies(verb, &self.keys, now, &dying, replies)?);
                if relied.is_empty() {
                    return Ok(Step::Exec(writes));
                }
                self.held = Some(Waiting::Confirm(writes, relied.len()));
                return Ok(confirm_empty(&self.keys, &relied));
            }
            None => {}
        }
        if let Some((first, extras)) = self.first.take() {
            let read = extras.parse(verb, &self.keys, replies)?;
            return self.plan(&first, Some(read));
        }
        self.plan(replies, None)
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(self.verb(), message));
        }
        Ok(std::mem::take(&mut self.answers))
    }
}

impl SettleMany {
    /// The plan from the first read's `replies`; `extras`, what the endings'
    /// step read (`None`: not yet; rows with waiters or a cancel make that step first).
    fn plan(&mut self, replies: &[Reply], extras: Option<ExtrasRead>) -> Result<Step<Vec<Settled>>> {
        let verb = self.verb();
        let (n, nl) = (self.jobs.len(), self.lanes.len());
        if replies.len() != 1 + n + 2 * nl + TAIL {
            return Err(Error::server(verb, "wrong number of replies"));
        }
        let k = self.keys.clone();
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(verb, "TIME gave no clock"))?;
        let mut lanes = lane_states(verb, &k, &self.lanes, &replies[1 + n..1 + n + 2 * nl])?;
        let [ring, wake, active, retention, done, pending, schedule, dead] = &replies[1 + n + 2 * nl..] else {
            return Err(Error::server(verb, "wrong number of replies"));
        };
        if active.is_wrongtype() {
            return Err(Error::layout(verb, "active has the wrong type"));
        }
        // The head of `schedule` as each fail in turn would read it: its first
        // score, moved earlier by the retries before it (`offer::new_head`).
        let mut head: Option<f64> = schedule.as_array().and_then(|a| a.get(1)).and_then(Reply::as_score);
        // Each held row's ending fields; rows with waiters or a cancel first read their extras.
        let held = |(j, _): &(Held, Fate), r: &Reply| {
            let f = r.fields();
            f.first().copied().flatten() == Some(b"active".as_slice()) && f.get(1).copied().flatten() == Some(j.token.as_slice())
        };
        let endings: Vec<Ending> = self
            .jobs
            .iter()
            .zip(&replies[1..=n])
            .map(|(job, r)| {
                let f = r.fields();
                let field = |i: usize| f.get(i).copied().flatten();
                if held(job, r) {
                    Ending::from_fields(field(6), field(7), field(8))
                } else {
                    Ending::default()
                }
            })
            .collect();
        if extras.is_none() && endings.iter().any(Ending::needs_more) {
            let more = Extras::of(&endings);
            let step = more.step(&k);
            self.first = Some((replies.to_vec(), more));
            return Ok(step);
        }

        let mut w: Vec<Write> = vec![];
        let mut leaving: Vec<&[u8]> = vec![];
        // Each done row: its id, its own keep, its result.
        let mut done_rows: Vec<DoneRow<'_>> = vec![];
        let mut own_keeps: Vec<Option<i64>> = vec![];
        let mut cancelled: Vec<(&[u8], Option<i64>)> = vec![];
        let mut notices = Notices::default();
        let mut dying: Vec<Vec<u8>> = vec![];
        let mut seconds: Vec<i64> = vec![];
        let mut offers = Offers::default();
        let mut wakes = false;
        self.answers = Vec::with_capacity(n);
        for (((j, fate), r), ending) in self.jobs.iter().zip(&replies[1..=n]).zip(&endings) {
            if r.is_wrongtype() {
                return Err(Error::layout(fate.verb(), format!("{} has the wrong type", String::from_utf8_lossy(&k.job(&j.id)))));
            }
            let f = r.fields();
            let field = |i: usize| f.get(i).copied().flatten();
            if field(0) != Some(b"active".as_slice()) || field(1) != Some(j.token.as_slice()) {
                self.answers.push(Settled::Refused);
                continue;
            }
            if field(2) != j.lane.as_deref() {
                return Err(Error::argument(fate.verb(), "job", "names another lane than its row"));
            }
            seconds.extend(field(5).and_then(field_int).map(|lease| lease_bucket(lease as f64)));
            leaving.push(&j.id);
            let mut ready = false;
            let mut woke = false;
            match fate {
                _ if ending.cancel => {
                    cancelled.push((&j.id, ending.keep));
                    notices.add(&j.id, ending);
                    self.answers.push(Settled::Cancelled);
                }
                Fate::Complete { result } => {
                    done_rows.push(DoneRow { id: &j.id, keep: 0, result: result.as_deref() });
                    own_keeps.push(ending.keep);
                    notices.add(&j.id, ending);
                    self.answers.push(Settled::Completed);
                }
                Fate::Fail { error, retry_in_ms, jitter, detail, retry } => {
                    let fail = Fail { error, retry_in_ms: *retry_in_ms, jitter: *jitter, detail: detail.as_deref(), retry: *retry };
                    let tries = (field(3).and_then(field_int).unwrap_or(0), field(4).and_then(field_int).unwrap_or(0));
                    match fail_writes(&j.id, (j.lane.as_deref(), level(field(9))), &fail, tries, now, &mut w) {
                        Failed::Ready => {
                            if (j.lane.is_none() && pending.is_wrongtype()) || wake.is_wrongtype() {
                                return Err(Error::layout(FAIL, "pending or wake has the wrong type"));
                            }
                            ready = true;
                            self.answers.push(Settled::Retrying);
                        }
                        Failed::Later(due) => {
                            if schedule.is_wrongtype() {
                                return Err(Error::layout(FAIL, "schedule has the wrong type"));
                            }
                            woke = head.is_none_or(|h| (due as f64) < h);
                            head = Some(head.map_or(due as f64, |h| h.min(due as f64)));
                            self.answers.push(Settled::Retrying);
                        }
                        Failed::Dead => {
                            if dead.is_wrongtype() {
                                return Err(Error::layout(FAIL, "dead has the wrong type"));
                            }
                            dying.push(j.id.clone());
                            notices.add(&j.id, ending);
                            self.answers.push(Settled::Dead);
                        }
                    }
                }
            }
            // As its own call would: the lane gives back the job's slot, then offer(L).
            if let Some(l) = &j.lane {
                let i = self.lanes.iter().position(|x| x == l).expect("every job's lane was read");
                let (ctl, len, left) = &mut lanes[i];
                ctl.active = (ctl.active - 1).max(0);
                *left += 1;
                *len = len.saturating_add(i64::from(ready));
                offers.offer(l, *len, ctl);
            } else if ready {
                offers.wake_flat();
            }
            if woke {
                offers.wake_flat();
            }
            wakes |= ready || woke;
        }
        if leaving.is_empty() {
            return Ok(Step::Done(std::mem::take(&mut self.answers)));
        }
        // The retention of done rows, as a complete reads it (a fail does not).
        let done_ms = if done_rows.is_empty() { 0 } else { Retention::from_reply(COMPLETE, &k, &["done_ms"], retention)?.done_ms };
        for (d, keep) in done_rows.iter_mut().zip(own_keeps) {
            d.keep = keep.unwrap_or(done_ms);
        }
        if done_rows.iter().any(|d| d.keep != 0) && done.is_wrongtype() {
            return Err(retention::wrong_type(COMPLETE, &k.done()));
        }
        let cancel_done_ms = extras.map_or(retention::DONE_MS, |e| e.done_ms);
        let cancelled: Vec<(&[u8], i64)> = cancelled.into_iter().map(|(id, keep)| (id, keep.unwrap_or(cancel_done_ms))).collect();
        if offers.offered_any() && ring.is_wrongtype() {
            return Err(Error::layout(verb, "ring has the wrong type"));
        }
        if (offers.offered_any() || wakes) && wake.is_wrongtype() {
            return Err(Error::layout(verb, "wake has the wrong type"));
        }
        let mut plan = lease_marks_of(seconds);
        plan.push(Write::LeaveActive(Members::of(&leaving)));
        plan.append(&mut w);
        retention::many_done_writes(&done_rows, now, &mut plan);
        cancelled_writes(&cancelled, now, true, &mut plan);
        notices.writes(&mut plan);
        let relied = lane_writes(&self.lanes, lanes, &mut plan);
        if offers.offered_any() || wakes {
            offers.writes(&mut plan);
        }
        let mut tally = Tally::default();
        for a in &self.answers {
            match a {
                Settled::Completed => tally.add(Counted::Completed),
                Settled::Retrying => tally.add(Counted::Retried),
                Settled::Dead => tally.add(Counted::Dead),
                Settled::Cancelled => tally.add(Counted::Cancelled),
                Settled::Refused | Settled::Extended => {}
            }
        }
        tally.writes(now, &mut plan);
        if !dying.is_empty() {
            let d = dying.len();
            self.held = Some(Waiting::Dead { writes: plan, now, dying, relied });
            return Ok(retention::dead_step(&k, d));
        }
        if !relied.is_empty() {
            self.held = Some(Waiting::Confirm(plan, relied.len()));
            return Ok(confirm_empty(&k, &relied));
        }
        Ok(Step::Exec(plan))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(id: &str) -> Held {
        Held { id: id.as_bytes().to_vec(), token: b"t".to_vec(), lane: None }
    }

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    /// The replies of `start` for flat jobs all active with token `t` (one
    /// attempt left each), an empty `schedule` and nothing else.
    fn replies(n: usize) -> Vec<Reply> {
        let mut r = vec![Reply::Array(vec![bulk("1000"), bulk("0")])];
        r.extend((0..n).map(|_| Reply::Array(vec![bulk("active"), bulk("t"), Reply::Nil, bulk("1"), bulk("3"), bulk("2000")])));
        r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(n as i64), Reply::Array(vec![Reply::Nil]), Reply::Int(0)]);
        r.extend([Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]);
        r
    }

    fn wake_tokens(writes: &[Write]) -> usize {
        writes.iter().map(|w| if let Write::Wake(tokens) = w { tokens.len() } else { 0 }).sum()
    }

    /// A retry that becomes the new head of `schedule` wakes a worker; one due
    /// after the head the batch's earlier retry made does not, one due before it does.
    #[test]
    fn a_retry_wakes_when_it_is_the_head_as_the_calls_before_it_left_schedule() {
        let fail = |ms: u64| Fate::fail(b"e", Some(ms), 0.0);
        for (delays, tokens) in [(vec![5000, 9000], 1), (vec![5000, 3000], 2), (vec![5000, 5000], 1)] {
            let jobs: Vec<_> = delays.iter().enumerate().map(|(i, &d)| (held(&i.to_string()), fail(d))).collect();
            let mut c = SettleMany::new(Keys::new(b"q"), jobs).unwrap();
            let n = delays.len();
            assert!(matches!(c.start(), Step::Read { .. }));
            let Ok(Step::Exec(w)) = c.feed(&replies(n)) else { panic!("a plan") };
            assert_eq!(wake_tokens(&w), tokens, "{delays:?}");
            assert_eq!(c.finish(&[]).unwrap(), vec![Settled::Retrying; n]);
        }
    }

    #[test]
    fn refused_jobs_only_write_nothing() {
        let mut c = SettleMany::new(Keys::new(b"q"), vec![(Held { token: b"old".to_vec(), ..held("a") }, Fate::COMPLETE)]).unwrap();
        c.start();
        assert!(matches!(c.feed(&replies(1)), Ok(Step::Done(a)) if a == vec![Settled::Refused]));
    }

    #[test]
    fn a_job_given_twice_is_refused_before_anything_is_read() {
        let fail = Fate::fail(b"", None, 0.0);
        let e = SettleMany::new(Keys::new(b"q"), vec![(held("a"), Fate::COMPLETE), (held("a"), fail)]).err().unwrap();
        assert!(e.to_string().contains("EMQ.FAIL") && e.to_string().contains("twice"), "{e}");
    }
}

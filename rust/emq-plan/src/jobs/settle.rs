//! EXTEND, COMPLETE and FAIL (SPEC §7): only while the row is `active` with the
//! worker's token; otherwise nothing changes and the worker is told so (a sweep
//! recovered the job, and the late worker's word is refused). A complete writes
//! its result, a fail its error, error type and traceback; an outcome is told
//! to the row's waiters, and a job asked to stop is cancelled instead
//! (SPEC §13, `ending`).

use crate::backoff::backoff;
use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::counters::Tally;
use crate::jobs::ending::{
    cancelled_writes, check_size, Ending, Extras, ExtrasRead, Notices, ENDING_FIELDS, ERROR_TYPE_MAX, RESULT_MAX, TRACEBACK_MAX,
};
use crate::jobs::retention::{self, DoneRow, Retention};
use crate::lanes::offer::{level, new_head, schedule_head, LaneCtl, Offers, CTL_FIELDS};
use crate::names::Keys;
use crate::numbers::{field_int, later};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::{confirm_empty, lease_bucket, relies_on_empty, still_empty};
use crate::protocol::reply::Reply;
use crate::protocol::write::{Counted, ErrorDetail, LaneField, Members, RowFields, Scored, Write};

pub const EXTEND: &str = "EMQ.EXTEND";
pub const COMPLETE: &str = "EMQ.COMPLETE";
pub const FAIL: &str = "EMQ.FAIL";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Extend {
        lease_ms: u64,
    },
    /// `result`: the return value, written to the done row.
    Complete {
        result: Option<Vec<u8>>,
    },
    /// `retry_in_ms: None`: the backoff for this attempt (`retry_delay_ms`);
    /// `detail`: the error's type and traceback, written beside it; `retry:
    /// false`: dead now, attempts left or not (an error no retry mends).
    Fail {
        error: Vec<u8>,
        retry_in_ms: Option<u64>,
        detail: Option<Box<ErrorDetail>>,
        retry: bool,
    },
}

impl Action {
    /// A complete with no result.
    pub const COMPLETE: Action = Action::Complete { result: None };

    /// A fail with no error type or traceback.
    pub fn fail(error: &[u8], retry_in_ms: Option<u64>) -> Action {
        Action::Fail { error: error.to_vec(), retry_in_ms, detail: None, retry: true }
    }
}

/// Refuses a result or an error detail past its limit (`ending`), naming the argument.
pub fn check_outcome(verb: &str, result: Option<&[u8]>, detail: Option<&ErrorDetail>) -> Result<()> {
    check_size(verb, "result", result, RESULT_MAX)?;
    check_size(verb, "error_type", detail.and_then(|d| d.error_type.as_deref()), ERROR_TYPE_MAX)?;
    check_size(verb, "traceback", detail.and_then(|d| d.traceback.as_deref()), TRACEBACK_MAX)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Settled {
    /// The row was not active with this token: nothing changed.
    Refused,
    Extended,
    Completed,
    /// Failed, and back in `schedule` (or ready at once with no delay).
    Retrying,
    Dead,
    /// Asked to stop while it ran (`cancel 1`): cancelled instead, never retried.
    Cancelled,
}

/// A failed job's first retry delay (ms): each attempt doubles it.
pub const RETRY_BASE_MS: u64 = 1000;
/// The longest retry delay (ms): an hour.
pub const RETRY_CAP_MS: u64 = 3_600_000;

/// The retry delay (ms) of a job failed on its `attempts`-th attempt:
/// `RETRY_BASE_MS · 2^(attempts-1)`, capped at `RETRY_CAP_MS`, half of it fixed
/// and half drawn from `unit` (in [0, 1)): `backoff` with equal jitter.
#[allow(clippy::cast_sign_loss, reason = "backoff is at least 0 (and at most RETRY_CAP_MS): whole ms, as ever")]
pub fn retry_delay_ms(attempts: i64, unit: f64) -> u64 {
    let exponent = u32::try_from((attempts.max(1) - 1).min(63)).unwrap_or(63);
    backoff(exponent, RETRY_BASE_MS, RETRY_CAP_MS, unit) as u64
}

/// A FAIL's own arguments: the error, the retry delay (`None`: the backoff),
/// the draw for the backoff's jitter (in [0, 1)), the error's detail, and
/// whether it may be retried (`false`: dead now, whatever attempts are left).
pub struct Fail<'a> {
    pub error: &'a [u8],
    pub retry_in_ms: Option<u64>,
    pub jitter: f64,
    pub detail: Option<&'a ErrorDetail>,
    pub retry: bool,
}

/// Where a failed job went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failed {
    /// Retried at once: pushed to `pending` or its lane.
    Ready,
    /// Retried later: in `schedule`, due then.
    Later(i64),
    /// Its last attempt: in `dead`.
    Dead,
}

/// FAIL's writes for a held job (SPEC §7) once it has left `active`: the
/// lease's fields go, then a retry (ready at once with no delay, else due in
/// `schedule`) while attempts are left and the fail allows one, else `dead`. Where it went decides
/// which types the caller checks and whom it wakes. Shared by the single
/// call (`Settle`) and the batch (`settle_many`).
pub fn fail_writes(
    id: &[u8],
    (lane, level): (Option<&[u8]>, u8),
    fail: &Fail<'_>,
    (attempts, max_attempts): (i64, i64),
    now: i64,
    w: &mut Vec<Write>,
) -> Failed {
    w.push(Write::DropLease { id: id.to_vec() });
    let error = fail.error.to_vec();
    let detail = fail.detail.filter(|d| d.error_type.is_some() || d.traceback.is_some()).map(|d| Box::new(d.clone()));
    // The row's error type and traceback are this fail's, or none: never an earlier attempt's.
    if detail.as_ref().is_none_or(|d| d.error_type.is_none() || d.traceback.is_none()) {
        w.push(Write::DropErrorDetail { id: id.to_vec() });
    }
    if !fail.retry || attempts >= max_attempts {
        w.push(Write::Bury { at: now, ids: Members::one(id) });
        w.push(Write::SetRow { id: id.to_vec(), fields: RowFields::Dead { error, finished: now, detail } });
        return Failed::Dead;
    }
    let delay = fail.retry_in_ms.unwrap_or_else(|| retry_delay_ms(attempts, fail.jitter));
    let due = later(now, delay);
    w.push(Write::SetRow { id: id.to_vec(), fields: RowFields::Retry { ready: delay == 0, error, due, detail } });
    if delay == 0 {
        // Back at its own priority level (SPEC §15).
        if level > 0 {
            w.push(Write::ReadyAt { lane: lane.map(<[u8]>::to_vec), level, ids: Members::one(id) });
            w.push(Write::MarkLevel { lane: lane.map(<[u8]>::to_vec), level });
        } else {
            w.push(Write::MakeReady { lane: lane.map(<[u8]>::to_vec), ids: Members::one(id) });
        }
        Failed::Ready
    } else {
        w.push(Write::Schedule(Scored::from_iter([(due, id)])));
        Failed::Later(due)
    }
}

/// The counters' tally of one settled job (`jobs::counters`).
fn counted(out: Settled) -> Tally {
    let mut t = Tally::default();
    match out {
        Settled::Completed => t.add(Counted::Completed),
        Settled::Retrying => t.add(Counted::Retried),
        Settled::Dead => t.add(Counted::Dead),
        Settled::Cancelled => t.add(Counted::Cancelled),
        Settled::Refused | Settled::Extended => {}
    }
    t
}

pub struct Settle {
    keys: Keys,
    id: Vec<u8>,
    token: Vec<u8>,
    /// The lane the worker's job came from: its control is watched from the start.
    lane: Option<Vec<u8>>,
    action: Action,
    jitter: f64,
    result: Option<Settled>,
    /// The plan, held while a step it depends on is read.
    held: Option<Held>,
    /// The first read's replies, kept while the endings' extras are read (`ending::Extras`).
    first: Option<(Vec<Reply>, Extras)>,
}

/// What a plan waits for before it is applied.
enum Held {
    /// A FAIL that makes the job dead: the trim of `dead` (`retention::dead_step`),
    /// then, with `confirm`, the lane list it relies on being empty.
    Dead { writes: Vec<Write>, now: i64, confirm: Option<Vec<u8>> },
    /// The lane list it relies on being empty, watched and read again.
    Confirm(Vec<Write>),
}

const ROW: [&str; 6] = ["state", "token", "lane", "attempts", "max_attempts", "lease"];
/// A complete's and a fail's: the row's, then its ending fields (`ending::ENDING_FIELDS`),
/// then `priority` (the level a retry at once goes back to).
const ROW_ENDING: [&str; 10] =
    ["state", "token", "lane", "attempts", "max_attempts", "lease", ENDING_FIELDS[0], ENDING_FIELDS[1], ENDING_FIELDS[2], "priority"];

impl Settle {
    pub fn new(keys: Keys, id: Vec<u8>, token: Vec<u8>, lane: Option<Vec<u8>>, action: Action, jitter: f64) -> Result<Self> {
        let verb = verb(&action);
        if let Action::Extend { lease_ms: 0 } = action {
            return Err(Error::argument(verb, "lease_ms", "must be a positive integer"));
        }
        if id.is_empty() {
            return Err(Error::argument(verb, "job", "has no id"));
        }
        match &action {
            Action::Complete { result } => check_outcome(verb, result.as_deref(), None)?,
            Action::Fail { detail, .. } => check_outcome(verb, None, detail.as_deref())?,
            Action::Extend { .. } => {}
        }
        Ok(Settle { keys, id, token, lane, action, jitter, result: None, held: None, first: None })
    }
}

/// Which type reads an action needs beyond the row, its lane and `active`: the
/// ring and `wake` where it may offer (a lane job, or a fail that makes work
/// ready or a new head of `schedule`), `pending`, `schedule` and `dead` for a
/// fail, the retention and `done` for a complete.
#[derive(Clone, Copy)]
struct Reads {
    offers: bool,
    fails: bool,
    done: bool,
}

impl Reads {
    fn count(self) -> usize {
        1 + 2 * usize::from(self.offers) + 3 * usize::from(self.fails) + 2 * usize::from(self.done)
    }
}

impl Settle {
    fn reads(&self) -> Reads {
        let fails = matches!(self.action, Action::Fail { .. });
        let completes = matches!(self.action, Action::Complete { .. });
        Reads { offers: fails || (self.lane.is_some() && completes), fails, done: completes }
    }
}

pub fn verb(a: &Action) -> &'static str {
    match a {
        Action::Extend { .. } => EXTEND,
        Action::Complete { .. } => COMPLETE,
        Action::Fail { .. } => FAIL,
    }
}

impl Conversation for Settle {
    type Out = Settled;

    fn verb(&self) -> &'static str {
        verb(&self.action)
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Settled> {
        let k = &self.keys;
        let mut watch = vec![k.job(&self.id)];
        let row: &[&str] = if matches!(self.action, Action::Extend { .. }) { &ROW } else { &ROW_ENDING };
        let mut cmds = vec![Cmd::new("TIME"), Cmd::new("HMGET").arg(k.job(&self.id)).args(row)];
        if let Some(l) = &self.lane {
            watch.push(k.lanectl(l));
            cmds.push(Cmd::new("HMGET").arg(k.lanectl(l)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(k.lane(l)));
        }
        // The types of what this action may write, and nothing else (`Reads`).
        cmds.push(Cmd::new("ZCARD").arg(k.active()));
        let r = self.reads();
        if r.offers {
            cmds.push(Cmd::new("LLEN").arg(k.ring()));
            cmds.push(Cmd::new("LLEN").arg(k.wake()));
        }
        if r.fails {
            cmds.push(Cmd::new("LLEN").arg(k.pending()));
            // The head of `schedule` (its type too): a retry due before it wakes a parked worker.
            cmds.push(schedule_head(k));
            cmds.push(Cmd::new("ZCARD").arg(k.dead()));
        }
        if r.done {
            cmds.push(retention::read(k, &["done_ms"]));
            cmds.push(Cmd::new("ZCARD").arg(k.done()));
        }
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Settled>> {
        let verb = self.verb();
        match self.held.take() {
            Some(Held::Confirm(writes)) => {
                if !still_empty(replies, 1) {
                    return Err(Error::conflict(verb, "the job's lane got work before the watch"));
                }
                return Ok(Step::Exec(writes));
            }
            Some(Held::Dead { mut writes, now, confirm }) => {
                writes.extend(retention::trim_from_replies(verb, &self.keys, now, std::slice::from_ref(&self.id), replies)?);
                return Ok(match confirm {
                    Some(lane) => {
                        self.held = Some(Held::Confirm(writes));
                        confirm_empty(&self.keys, &[lane])
                    }
                    None => Step::Exec(writes),
                });
            }
            None => {}
        }
        if let Some((first, extras)) = self.first.take() {
            let read = extras.parse(verb, &self.keys, replies)?;
            return self.plan(&first, Some(read));
        }
        self.plan(replies, None)
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Settled> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(self.verb(), message));
        }
        self.result.ok_or_else(|| Error::server(self.verb(), "EXEC's replies were fed before a plan"))
    }
}

impl Settle {
    /// The plan from the first read's `replies`; `extras`, what the endings'
    /// step read (`None`: not yet; a row that needs it makes that step first).
    fn plan(&mut self, replies: &[Reply], extras: Option<ExtrasRead>) -> Result<Step<Settled>> {
        let verb = self.verb();
        let k = self.keys.clone();
        let lane_reads = if self.lane.is_some() { 2 } else { 0 };
        let r = self.reads();
        if replies.len() != 2 + lane_reads + r.count() {
            return Err(Error::server(verb, "wrong number of replies"));
        }
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(verb, "TIME gave no clock"))?;
        if replies[1].is_wrongtype() {
            return Err(Error::layout(verb, format!("{} has the wrong type", String::from_utf8_lossy(&k.job(&self.id)))));
        }
        let f = replies[1].fields();
        let field = |i: usize| f.get(i).copied().flatten();
        if field(0) != Some(b"active".as_slice()) || field(1) != Some(self.token.as_slice()) {
            return Ok(Step::Done(Settled::Refused));
        }
        if field(2) != self.lane.as_deref() {
            return Err(Error::argument(verb, "job", "names another lane than its row"));
        }
        let attempts = field(3).and_then(field_int).unwrap_or(0);
        let max_attempts = field(4).and_then(field_int).unwrap_or(0);
        let ending = if matches!(self.action, Action::Extend { .. }) {
            Ending::default()
        } else {
            Ending::from_fields(field(6), field(7), field(8))
        };
        if ending.needs_more() && extras.is_none() {
            let more = Extras::of([&ending]);
            let step = more.step(&k);
            self.first = Some((replies.to_vec(), more));
            return Ok(step);
        }
        let (ctl, lane_len) = match &self.lane {
            Some(l) => {
                if replies[2].is_wrongtype() || replies[3].is_wrongtype() {
                    return Err(Error::layout(verb, format!("{} or its control has the wrong type", String::from_utf8_lossy(&k.lane(l)))));
                }
                (LaneCtl::from_reply(&replies[2]), replies[3].as_int().unwrap_or(0))
            }
            None => (LaneCtl::default(), 0),
        };
        // The replies in `start`'s order; a read this action leaves out is `None`,
        // and passes as the right type (nothing this action writes is that key).
        let mut t = replies[2 + lane_reads..].iter();
        let mut next = |on: bool| if on { t.next() } else { None };
        let active = next(true);
        let (ring, wake) = (next(r.offers), next(r.offers));
        let (pending, schedule, dead) = (next(r.fails), next(r.fails), next(r.fails));
        let (retention, done) = (next(r.done), next(r.done));
        let ok = |reply: Option<&Reply>| reply.is_none_or(|r| !r.is_wrongtype());
        let (active_ok, ring_ok, wake_ok) = (ok(active), ok(ring), ok(wake));
        let (pending_ok, schedule_ok, dead_ok) = (ok(pending), ok(schedule), ok(dead));
        if !active_ok {
            return Err(Error::layout(verb, "active has the wrong type"));
        }

        // The row leaves its lease (or gets a new one): the mark of the second
        // it ended in tells a stalled check that selected it (`crate::protocol::guard`).
        let mut w: Vec<Write> =
            field(5).and_then(field_int).map(|lease| Write::MarkLease { second: lease_bucket(lease as f64) }).into_iter().collect();
        let out;
        let mut ready = false;
        // A retry that becomes the new head of `schedule` (SPEC §7, `offer::new_head`).
        let mut woke = false;
        let mut dies = false;
        let mut notices = Notices::default();
        match &self.action {
            Action::Extend { lease_ms } => {
                let deadline = later(now, *lease_ms);
                w.push(Write::ExtendLeases { deadline, ids: Members::one(&self.id) });
                w.push(Write::SetRow { id: self.id.clone(), fields: RowFields::Lease(deadline) });
                self.result = Some(Settled::Extended);
                return Ok(Step::Exec(w));
            }
            _ if ending.cancel => {
                // Asked to stop while it ran: cancelled, whatever the worker says (`ending`).
                let done_ms = extras.map_or(retention::DONE_MS, |e| e.done_ms);
                w.push(Write::LeaveActive(Members::one(&self.id)));
                cancelled_writes(&[(&self.id, ending.keep_or(done_ms))], now, true, &mut w);
                notices.add(&self.id, &ending);
                out = Settled::Cancelled;
            }
            Action::Complete { result } => {
                let (Some(retention), Some(done)) = (retention, done) else {
                    return Err(Error::server(verb, "the retention was not read"));
                };
                let done_ms = Retention::from_reply(verb, &k, &["done_ms"], retention)?.done_ms;
                let keep = ending.keep_or(done_ms);
                if keep != 0 && done.is_wrongtype() {
                    return Err(retention::wrong_type(verb, &k.done()));
                }
                w.push(Write::LeaveActive(Members::one(&self.id)));
                retention::many_done_writes(&[DoneRow { id: &self.id, keep, result: result.as_deref() }], now, &mut w);
                notices.add(&self.id, &ending);
                out = Settled::Completed;
            }
            Action::Fail { error, retry_in_ms, detail, retry } => {
                w.push(Write::LeaveActive(Members::one(&self.id)));
                let fail = Fail { error, retry_in_ms: *retry_in_ms, jitter: self.jitter, detail: detail.as_deref(), retry: *retry };
                let at = (self.lane.as_deref(), level(field(9)));
                match fail_writes(&self.id, at, &fail, (attempts, max_attempts), now, &mut w) {
                    Failed::Ready => {
                        if (self.lane.is_none() && !pending_ok) || !wake_ok {
                            return Err(Error::layout(verb, "pending or wake has the wrong type"));
                        }
                        ready = true;
                        out = Settled::Retrying;
                    }
                    Failed::Later(due) => {
                        if !schedule_ok {
                            return Err(Error::layout(verb, "schedule has the wrong type"));
                        }
                        woke = schedule.is_some_and(|head| new_head(head, std::iter::once(due)));
                        out = Settled::Retrying;
                    }
                    Failed::Dead => {
                        if !dead_ok {
                            return Err(Error::layout(verb, "dead has the wrong type"));
                        }
                        dies = true;
                        notices.add(&self.id, &ending);
                        out = Settled::Dead;
                    }
                }
            }
        }
        notices.writes(&mut w);
        // A lane job leaving `active` gives back its lane's slot, then offer(L).
        let mut offers = Offers::default();
        let mut relies_on_empty_lane = false;
        if let Some(l) = &self.lane {
            let active = (ctl.active - 1).max(0);
            w.push(Write::SetLane { lane: l.clone(), field: LaneField::Active(active) });
            let (len, ctl) = (lane_len.saturating_add(i64::from(ready)), LaneCtl { active, ..ctl });
            offers.offer(l, len, &ctl);
            relies_on_empty_lane = relies_on_empty(len, &ctl);
        } else if ready {
            offers.wake_flat();
        }
        if woke {
            offers.wake_flat();
        }
        if offers.offered_any() && !ring_ok {
            return Err(Error::layout(verb, "ring has the wrong type"));
        }
        if offers.offered_any() || ready || woke {
            if !wake_ok {
                return Err(Error::layout(verb, "wake has the wrong type"));
            }
            offers.writes(&mut w);
        }
        counted(out).writes(now, &mut w);
        self.result = Some(out);
        let confirm = relies_on_empty_lane.then(|| self.lane.clone().expect("a lane job"));
        if dies {
            self.held = Some(Held::Dead { writes: w, now, confirm });
            return Ok(retention::dead_step(&k, 1));
        }
        if let Some(lane) = confirm {
            self.held = Some(Held::Confirm(w));
            return Ok(confirm_empty(&k, &[lane]));
        }
        Ok(Step::Exec(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry delay as it was computed before `backoff` was shared: 1 s ·
    /// 2^(attempts-1), capped at 1 h, half fixed and half jittered, in whole ms.
    #[test]
    #[allow(clippy::cast_sign_loss, reason = "the old formula, as it was")]
    fn the_retry_delay_is_unchanged() {
        let before = |attempts: i64, unit: f64| -> u64 {
            let full = (1000.0 * 2f64.powi((attempts.max(1) - 1).min(40) as i32)).min(3_600_000.0);
            (full / 2.0 + full / 2.0 * unit.clamp(0.0, 1.0)) as u64
        };
        for attempts in [i64::MIN, -1, 0, 1, 2, 3, 12, 13, 40, 41, 63, 64, 1 << 40, i64::MAX] {
            for unit in [0.0, 1e-9, 0.25, 0.5, 0.999_999, 1.0, 7.0, f64::NAN] {
                assert_eq!(retry_delay_ms(attempts, unit), before(attempts, unit), "{attempts} {unit}");
            }
        }
        assert_eq!((retry_delay_ms(1, 0.0), retry_delay_ms(3, 1.0), retry_delay_ms(99, 0.0)), (500, 4000, 1_800_000));
    }
}

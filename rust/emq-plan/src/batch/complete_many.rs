//! COMPLETE for many jobs in one call (SPEC §7, a worker's group commit): each
//! job is answered as `settle`'s COMPLETE would answer it alone (done while its
//! row is `active` with its token, else refused and left as it is), under one
//! clock reading, in one transaction. The result is that of the completes one
//! after another in the order given (a lane is offered when the job that frees
//! its slot is reached): each done row gets its result, each outcome is told to
//! its waiters, and a job asked to stop is cancelled (SPEC §13, `ending`).

use crate::batch::extend_many::{ending_of, ending_row_reads, held_rows, lease_marks_of, Held, EXTEND_MAX};
use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::counters::Tally;
use crate::jobs::ending::{cancelled_writes, Ending, Extras, ExtrasRead, Notices};
use crate::jobs::retention::{self, DoneRow, Retention};
use crate::jobs::settle::{check_outcome, COMPLETE};
use crate::lanes::offer::{LaneCtl, Offers, CTL_FIELDS};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::{confirm_empty, relies_on_empty, still_empty};
use crate::protocol::reply::Reply;
use crate::protocol::write::{LaneField, Members, Write};

pub struct CompleteMany {
    keys: Keys,
    jobs: Vec<Held>,
    /// Each job's result (`None`: none), in the order of `jobs`.
    results: Vec<Option<Vec<u8>>>,
    /// The lanes the jobs name, in the order of their first job.
    lanes: Vec<Vec<u8>>,
    answers: Vec<bool>,
    /// The plan, held while the lane lists it relies on being empty (how many)
    /// are read again.
    held: Option<(Vec<Write>, usize)>,
    /// The first read's replies, kept while the endings' extras are read.
    first: Option<(Vec<Reply>, Extras)>,
}

impl CompleteMany {
    /// Completes with no results.
    pub fn new(keys: Keys, jobs: Vec<Held>) -> Result<Self> {
        CompleteMany::with_results(keys, jobs.into_iter().map(|j| (j, None)).collect())
    }

    /// Checks the call before anything is read: at most `EXTEND_MAX` jobs, each
    /// with an id, none twice (a job is completed once), each result within
    /// `ending::RESULT_MAX`.
    pub fn with_results(keys: Keys, jobs: Vec<(Held, Option<Vec<u8>>)>) -> Result<Self> {
        let (jobs, results): (Vec<Held>, Vec<Option<Vec<u8>>>) = jobs.into_iter().unzip();
        for r in &results {
            check_outcome(COMPLETE, r.as_deref(), None)?;
        }
        if jobs.len() > EXTEND_MAX {
            return Err(Error::argument(COMPLETE, "jobs", format!("at most {EXTEND_MAX} a call")));
        }
        for (i, j) in jobs.iter().enumerate() {
            if j.id.is_empty() {
                return Err(Error::argument(COMPLETE, "job", "has no id"));
            }
            if jobs[..i].iter().any(|o| o.id == j.id) {
                return Err(Error::argument(COMPLETE, "jobs", format!("{:?} is given twice", String::from_utf8_lossy(&j.id))));
            }
        }
        let lanes = lanes_of(&jobs);
        Ok(CompleteMany { keys, jobs, results, lanes, answers: vec![], held: None, first: None })
    }
}

/// The lanes `jobs` name, each once, in the order of its first job.
pub fn lanes_of<'a>(jobs: impl IntoIterator<Item = &'a Held>) -> Vec<Vec<u8>> {
    let mut lanes: Vec<Vec<u8>> = vec![];
    for l in jobs.into_iter().filter_map(|j| j.lane.as_ref()) {
        if !lanes.contains(l) {
            lanes.push(l.clone());
        }
    }
    lanes
}

/// What a complete may write besides the rows and lanes, read for its type (or
/// its policy): the ring, `wake`, `active`, the retention of done rows, `done`.
pub fn done_reads(keys: &Keys, cmds: &mut Vec<Cmd>) {
    cmds.push(Cmd::new("LLEN").arg(keys.ring()));
    cmds.push(Cmd::new("LLEN").arg(keys.wake()));
    cmds.push(Cmd::new("ZCARD").arg(keys.active()));
    cmds.push(retention::read(keys, &["done_ms"]));
    cmds.push(Cmd::new("ZCARD").arg(keys.done()));
}

/// The reads of each lane a batch names: its control and its list's length.
pub fn lane_reads(keys: &Keys, lanes: &[Vec<u8>], cmds: &mut Vec<Cmd>) {
    for l in lanes {
        cmds.push(Cmd::new("HMGET").arg(keys.lanectl(l)).args(CTL_FIELDS));
        cmds.push(Cmd::new("LLEN").arg(keys.lane(l)));
    }
}

/// The new `active` count of each lane some of whose jobs left `active`; the
/// lanes whose offer relied on their list being empty (`guard::relies_on_empty`).
pub fn lane_writes(lanes: &[Vec<u8>], states: Vec<(LaneCtl, i64, i64)>, w: &mut Vec<Write>) -> Vec<Vec<u8>> {
    let mut relied = vec![];
    for (l, (ctl, len, left)) in lanes.iter().zip(states) {
        if left == 0 {
            continue;
        }
        w.push(Write::SetLane { lane: l.clone(), field: LaneField::Active(ctl.active) });
        if relies_on_empty(len, &ctl) {
            relied.push(l.clone());
        }
    }
    relied
}

/// [`lane_reads`]' replies, two a lane: each lane's control, its list's length,
/// and the count of its jobs leaving `active` (0 to start with).
pub fn lane_states(verb: &str, keys: &Keys, lanes: &[Vec<u8>], replies: &[Reply]) -> Result<Vec<(LaneCtl, i64, i64)>> {
    lanes
        .iter()
        .zip(replies.chunks_exact(2))
        .map(|(l, pair)| {
            if pair[0].is_wrongtype() || pair[1].is_wrongtype() {
                return Err(Error::layout(verb, format!("{} or its control has the wrong type", String::from_utf8_lossy(&keys.lane(l)))));
            }
            Ok((LaneCtl::from_reply(&pair[0]), pair[1].as_int().unwrap_or(0), 0))
        })
        .collect()
}

impl Conversation for CompleteMany {
    type Out = Vec<bool>;

    fn verb(&self) -> &'static str {
        COMPLETE
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The clock, every row and the control of every lane named (watched, as
    /// COMPLETE watches them, SPEC §9), the lanes' lengths, the lists' types and
    /// the retention of done rows.
    fn start(&mut self) -> Step<Self::Out> {
        let k = &self.keys;
        let mut watch: Vec<Vec<u8>> = self.jobs.iter().map(|j| k.job(&j.id)).collect();
        watch.extend(self.lanes.iter().map(|l| k.lanectl(l)));
        let mut cmds = vec![Cmd::new("TIME")];
        cmds.extend(ending_row_reads(k, &self.jobs));
        lane_reads(k, &self.lanes, &mut cmds);
        done_reads(k, &mut cmds);
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if let Some((writes, lists)) = self.held.take() {
            if !still_empty(replies, lists) {
                return Err(Error::conflict(COMPLETE, "a lane it found empty got work before the watch"));
            }
            return Ok(Step::Exec(writes));
        }
        if let Some((first, extras)) = self.first.take() {
            let read = extras.parse(COMPLETE, &self.keys, replies)?;
            return self.plan(&first, Some(read));
        }
        self.plan(replies, None)
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(COMPLETE, message));
        }
        Ok(std::mem::take(&mut self.answers))
    }
}

impl CompleteMany {
    /// The plan from the first read's `replies`; `extras`, what the endings'
    /// step read (`None`: not yet; rows with waiters or a cancel make that step first).
    fn plan(&mut self, replies: &[Reply], extras: Option<ExtrasRead>) -> Result<Step<Vec<bool>>> {
        let (n, nl) = (self.jobs.len(), self.lanes.len());
        if replies.len() != 1 + n + 2 * nl + 5 {
            return Err(Error::server(COMPLETE, "wrong number of replies"));
        }
        let k = self.keys.clone();
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(COMPLETE, "TIME gave no clock"))?;
        let mut lanes = lane_states(COMPLETE, &k, &self.lanes, &replies[1 + n..1 + n + 2 * nl])?;
        let t = &replies[1 + n + 2 * nl..];
        let (ring_ok, wake_ok) = (!t[0].is_wrongtype(), !t[1].is_wrongtype());
        if t[2].is_wrongtype() {
            return Err(Error::layout(COMPLETE, "active has the wrong type"));
        }
        let done_ms = Retention::from_reply(COMPLETE, &k, &["done_ms"], &t[3])?.done_ms;
        let held = held_rows(COMPLETE, &k, &self.jobs, &replies[1..=n])?;
        let endings: Vec<Ending> =
            held.iter().zip(&replies[1..=n]).map(|((h, _), r)| if *h { ending_of(r) } else { Ending::default() }).collect();
        if extras.is_none() && endings.iter().any(Ending::needs_more) {
            let more = Extras::of(&endings);
            let step = more.step(&k);
            self.first = Some((replies.to_vec(), more));
            return Ok(step);
        }
        let cancel_done_ms = extras.map_or(done_ms, |e| e.done_ms);
        let mut leaving: Vec<&[u8]> = vec![];
        let mut done: Vec<DoneRow<'_>> = vec![];
        let mut cancelled: Vec<(&[u8], i64)> = vec![];
        let mut notices = Notices::default();
        let mut offers = Offers::default();
        let mut seconds: Vec<i64> = vec![];
        self.answers = Vec::with_capacity(n);
        for (((j, (held, second)), ending), result) in self.jobs.iter().zip(held).zip(&endings).zip(&self.results) {
            self.answers.push(held);
            if !held {
                continue;
            }
            leaving.push(&j.id);
            if ending.cancel {
                cancelled.push((&j.id, ending.keep_or(cancel_done_ms)));
            } else {
                done.push(DoneRow { id: &j.id, keep: ending.keep_or(done_ms), result: result.as_deref() });
            }
            notices.add(&j.id, ending);
            if let Some(l) = &j.lane {
                // As its own COMPLETE would: the lane gives back the job's slot, then offer(L).
                let i = self.lanes.iter().position(|x| x == l).expect("every job's lane was read");
                let (ctl, len, left) = &mut lanes[i];
                ctl.active = (ctl.active - 1).max(0);
                *left += 1;
                offers.offer(l, *len, ctl);
            }
            seconds.extend(second);
        }
        if leaving.is_empty() {
            return Ok(Step::Done(std::mem::take(&mut self.answers)));
        }
        if done.iter().any(|d| d.keep != 0) && t[4].is_wrongtype() {
            return Err(retention::wrong_type(COMPLETE, &k.done()));
        }
        let mut w = lease_marks_of(seconds);
        w.push(Write::LeaveActive(Members::of(&leaving)));
        retention::many_done_writes(&done, now, &mut w);
        cancelled_writes(&cancelled, now, true, &mut w);
        notices.writes(&mut w);
        let relied = lane_writes(&self.lanes, lanes, &mut w);
        if offers.offered_any() {
            if !ring_ok || !wake_ok {
                return Err(Error::layout(COMPLETE, "ring or wake has the wrong type"));
            }
            offers.writes(&mut w);
        }
        Tally { completed: done.len() as i64, cancelled: cancelled.len() as i64, ..Tally::default() }.writes(now, &mut w);
        if !relied.is_empty() {
            self.held = Some((w, relied.len()));
            return Ok(confirm_empty(&k, &relied));
        }
        Ok(Step::Exec(w))
    }
}

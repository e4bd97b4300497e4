//! RETRY, DELETE, PROMOTE.NOW: an operator's actions on chosen jobs (`Act`),
//! each one guarded conversation that answers for every id (`Answer`).
//!
//! 1. (`retry_dead` only) the head of `P dead`, oldest first: the ids chosen.
//! 2. `WATCH` the rows; read each row's `state` and `lane`, the clock, and the
//!    types of the places the plan writes (a wrong type refuses the call
//!    before anything is written).
//! 3. When jobs go to lanes: `WATCH` those lanes' control hashes and read them
//!    (offer(L), as a promote does).
//! 4. One `MULTI`/`EXEC`: the moves, the rows, the offers and wake.
//!
//! Why the rows are enough (SPEC §9): every emq operation that moves a job
//! writes its row, so a job that moved since step 2 aborts the `EXEC`. A
//! promote watches `P promotions` instead of the rows it takes from
//! `schedule`, so every action that takes a job out of `schedule` (promote
//! now, delete of a scheduled job) increments it in its transaction, as a
//! promote does. No action touches a job in `active` (delete refuses one:
//! cancel it), so the stalled check's lease marks are not involved.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::lanes::offer::{level, LaneCtl, Levels, Offers, CTL_FIELDS};
use crate::names::{id_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{Members, RowFields, Write};

pub const RETRY: &str = "EMQ.RETRY";
pub const DELETE: &str = "EMQ.DELETE";
pub const PROMOTE_NOW: &str = "EMQ.PROMOTE.NOW";

/// The most ids one transaction acts on; a host acts on more in batches of this.
pub const ACT_BATCH: usize = 500;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A dead or cancelled job back to ready: attempts and stalls reset to 0,
    /// its error kept; a cancelled one is no longer asked to stop, and its row
    /// is kept for good again (no expiry).
    Retry,
    /// A job deleted from wherever it waits (scheduled, ready, dead, done,
    /// cancelled), its row with it; an active job is refused.
    Delete,
    /// A scheduled job ready now.
    PromoteNow,
}

impl Action {
    pub fn verb(self) -> &'static str {
        match self {
            Action::Retry => RETRY,
            Action::Delete => DELETE,
            Action::PromoteNow => PROMOTE_NOW,
        }
    }
}

/// What an action did with one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Retried, deleted or promoted.
    Done,
    /// No such job (never added, or no longer kept).
    Missing,
    /// Not in a state the action takes: retry, not dead; promote now, not
    /// scheduled; delete, active (cancel it). Nothing changed for it.
    Refused,
}

enum Stage {
    Select,
    Rows,
    Lanes,
}

/// A job the plan moves: its id, its row's state and its lane.
type Moved = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// Which of the moved jobs a write lists, by state and lane.
type Pick<'a> = &'a dyn Fn(&[u8], Option<&[u8]>) -> bool;

/// What step 2 decided for the jobs the plan moves.
struct Chosen {
    now: i64,
    /// The jobs acted on, in order.
    jobs: Vec<Moved>,
    /// Each job's priority level (SPEC §15), as `jobs`.
    levels: Vec<u8>,
}

pub struct Act {
    keys: Keys,
    action: Action,
    /// The ids, each once, in the order given (or chosen, for `retry_dead`).
    ids: Vec<Vec<u8>>,
    /// `retry_dead`: how many of the oldest dead jobs to choose.
    select: Option<u64>,
    /// `retry_dead`: how many jobs `P dead` held when they were chosen.
    dead_then: Option<i64>,
    answers: Vec<Answer>,
    chosen: Option<Chosen>,
    /// The lanes jobs go to, in order of first use.
    lanes: Vec<Vec<u8>>,
    stage: Stage,
}

/// The places the action writes, read by `LLEN`/`ZCARD` for their types.
fn type_reads(k: &Keys) -> Vec<Cmd> {
    vec![
        Cmd::new("ZCARD").arg(k.schedule()),
        Cmd::new("LLEN").arg(k.pending()),
        Cmd::new("ZCARD").arg(k.dead()),
        Cmd::new("ZCARD").arg(k.done()),
        Cmd::new("ZCARD").arg(k.cancelled()),
        Cmd::new("LLEN").arg(k.ring()),
        Cmd::new("LLEN").arg(k.wake()),
        Cmd::new("ZCARD").arg(k.cancels()),
    ]
}

impl Act {
    /// The action on `ids` (each checked; repeated ones act once). At most
    /// [`ACT_BATCH`] distinct ids.
    pub fn new(keys: Keys, action: Action, ids: Vec<Vec<u8>>) -> Result<Self> {
        let verb = action.verb();
        let mut once: Vec<Vec<u8>> = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(why) = id_problem(&id) {
                return Err(Error::argument(verb, "ids", format_args!("each {why}")));
            }
            if !once.contains(&id) {
                once.push(id);
            }
        }
        if once.len() > ACT_BATCH {
            return Err(Error::argument(verb, "ids", format_args!("must be at most {ACT_BATCH} a transaction")));
        }
        Ok(Act::with(keys, action, once, None))
    }

    /// RETRY of up to `n` (1 to [`ACT_BATCH`]) of the oldest dead jobs.
    pub fn retry_dead(keys: Keys, n: u64) -> Result<Self> {
        if !(1..=ACT_BATCH as u64).contains(&n) {
            return Err(Error::argument(RETRY, "limit", format_args!("must be 1 to {ACT_BATCH} a transaction")));
        }
        Ok(Act::with(keys, Action::Retry, vec![], Some(n)))
    }

    fn with(keys: Keys, action: Action, ids: Vec<Vec<u8>>, select: Option<u64>) -> Self {
        Act { keys, action, ids, select, dead_then: None, answers: vec![], chosen: None, lanes: vec![], stage: Stage::Rows }
    }

    /// The ids acted on, in the order of the answers.
    pub fn ids(&self) -> &[Vec<u8>] {
        &self.ids
    }

    /// `retry_dead`: how many jobs `P dead` held when this call chose its own.
    pub fn dead_then(&self) -> Option<i64> {
        self.dead_then
    }

    fn read_rows(&mut self) -> Step<Vec<Answer>> {
        self.stage = Stage::Rows;
        let k = &self.keys;
        let watch: Vec<Vec<u8>> = self.ids.iter().map(|id| k.job(id)).collect();
        let mut cmds = vec![Cmd::new("TIME")];
        cmds.extend(type_reads(k));
        cmds.extend(watch.iter().map(|row| Cmd::new("HMGET").arg(row).arg("state").arg("lane").arg("priority")));
        Step::Read { watch, cmds }
    }

    /// Step 2's replies: each id's answer and the jobs to move.
    fn decide(&mut self, replies: &[Reply]) -> Result<Step<Vec<Answer>>> {
        let verb = self.action.verb();
        let k = &self.keys;
        let places = type_reads(k).len();
        if replies.len() != 1 + places + self.ids.len() {
            return Err(Error::server(verb, "wrong number of replies"));
        }
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(verb, "TIME gave no clock"))?;
        let keys = [k.schedule(), k.pending(), k.dead(), k.done(), k.cancelled(), k.ring(), k.wake(), k.cancels()];
        for (key, r) in keys.iter().zip(&replies[1..=places]) {
            check_error(verb, key, r)?;
        }
        let mut jobs = vec![];
        let mut levels = vec![];
        self.answers.clear();
        for (id, r) in self.ids.iter().zip(&replies[1 + places..]) {
            check_error(verb, &k.job(id), r)?;
            let fields = r.fields();
            let (Some(state), lane) = (fields.first().copied().flatten(), fields.get(1).copied().flatten()) else {
                self.answers.push(Answer::Missing);
                continue;
            };
            let takes = match self.action {
                Action::Retry => matches!(state, b"dead" | b"cancelled"),
                Action::PromoteNow => state == b"scheduled",
                Action::Delete => matches!(state, b"scheduled" | b"pending" | b"dead" | b"done" | b"cancelled"),
            };
            if !takes {
                self.answers.push(Answer::Refused);
                continue;
            }
            self.answers.push(Answer::Done);
            let lane = lane.map(<[u8]>::to_vec);
            if self.action != Action::Delete {
                if let Some(l) = &lane {
                    if !self.lanes.contains(l) {
                        self.lanes.push(l.clone());
                    }
                }
            }
            jobs.push((id.clone(), state.to_vec(), lane));
            levels.push(level(fields.get(2).copied().flatten()));
        }
        self.chosen = Some(Chosen { now, jobs, levels });
        if self.chosen.as_ref().is_some_and(|c| c.jobs.is_empty()) {
            return Ok(Step::Done(std::mem::take(&mut self.answers)));
        }
        if self.lanes.is_empty() {
            return Ok(Step::Exec(self.plan(&[])));
        }
        self.stage = Stage::Lanes;
        let watch: Vec<Vec<u8>> = self.lanes.iter().map(|l| k.lanectl(l)).collect();
        let mut cmds: Vec<Cmd> = watch.iter().map(|c| Cmd::new("HMGET").arg(c).args(CTL_FIELDS)).collect();
        cmds.extend(self.lanes.iter().map(|l| Cmd::new("LLEN").arg(k.lane(l))));
        Ok(Step::Read { watch, cmds })
    }

    /// The writes, given each lane's control (in `self.lanes`' order).
    fn plan(&self, ctls: &[(LaneCtl, i64)]) -> Vec<Write> {
        let Some(chosen) = &self.chosen else { return vec![] };
        let ids = |f: Pick<'_>| -> Members {
            chosen.jobs.iter().filter(|(_, s, l)| f(s, l.as_deref())).map(|(id, _, _)| id.as_slice()).collect()
        };
        let mut w = vec![];
        match self.action {
            Action::Delete => {
                let scheduled = ids(&|s, _| s == b"scheduled");
                if !scheduled.is_empty() {
                    w.push(Write::Unschedule(scheduled));
                    w.push(Write::CountPromotion);
                }
                for (id, _, lane) in chosen.jobs.iter().filter(|(_, s, _)| s == b"pending") {
                    w.push(Write::Unready { lane: lane.clone(), id: id.clone() });
                }
                let dead = ids(&|s, _| s == b"dead");
                if !dead.is_empty() {
                    w.push(Write::LeaveDead(dead));
                }
                let done = ids(&|s, _| s == b"done");
                if !done.is_empty() {
                    w.push(Write::LeaveDone(done));
                }
                let cancelled = ids(&|s, _| s == b"cancelled");
                if !cancelled.is_empty() {
                    w.push(Write::LeaveCancelled(cancelled));
                }
                w.push(Write::DeleteRows(ids(&|_, _| true)));
            }
            Action::Retry | Action::PromoteNow => {
                let all = ids(&|_, _| true);
                for (id, _, _) in &chosen.jobs {
                    if self.action == Action::Retry {
                        w.push(Write::SetRow { id: id.clone(), fields: RowFields::Revived { due: chosen.now } });
                        w.push(Write::DropFinished { id: id.clone() });
                    } else {
                        w.push(Write::SetRow { id: id.clone(), fields: RowFields::Ready });
                    }
                }
                if self.action == Action::Retry {
                    let dead = ids(&|s, _| s == b"dead");
                    if !dead.is_empty() {
                        w.push(Write::LeaveDead(dead));
                    }
                    let cancelled = ids(&|s, _| s == b"cancelled");
                    if !cancelled.is_empty() {
                        for id in cancelled.iter() {
                            w.push(Write::PersistRow { id: id.to_vec() });
                        }
                        w.push(Write::LeaveCancelled(cancelled.clone()));
                        w.push(Write::ForgetStops(cancelled));
                    }
                } else {
                    w.push(Write::Unschedule(all));
                    w.push(Write::CountPromotion);
                }
                let mut offers = Offers::default();
                // Jobs of priority 1 to 9 go back to their level's list (SPEC §15).
                let mut levels = Levels::default();
                let mut at_level0 = vec![true; chosen.jobs.len()];
                for (i, ((id, _, lane), &p)) in chosen.jobs.iter().zip(&chosen.levels).enumerate() {
                    if p > 0 {
                        levels.push(lane.as_deref(), p, id);
                        at_level0[i] = false;
                    }
                }
                let level0 = |f: Pick<'_>| -> Members {
                    chosen
                        .jobs
                        .iter()
                        .zip(&at_level0)
                        .filter(|((_, s, l), &z)| z && f(s, l.as_deref()))
                        .map(|((id, _, _), _)| id.as_slice())
                        .collect()
                };
                let flat = level0(&|_, l| l.is_none());
                if !flat.is_empty() {
                    w.push(Write::MakeReady { lane: None, ids: flat });
                }
                if levels.any_flat() || chosen.jobs.iter().zip(&at_level0).any(|((_, _, l), &z)| z && l.is_none()) {
                    offers.wake_flat();
                }
                for (lane, (ctl, len)) in self.lanes.iter().zip(ctls) {
                    let pushed = level0(&|_, l| l == Some(lane.as_slice()));
                    let len = len + (pushed.len() + levels.count_in(lane)) as i64;
                    if !pushed.is_empty() {
                        w.push(Write::MakeReady { lane: Some(lane.clone()), ids: pushed });
                    }
                    offers.offer(lane, len, ctl);
                }
                levels.writes(&mut w);
                offers.writes(&mut w);
            }
        }
        w
    }
}

impl Conversation for Act {
    type Out = Vec<Answer>;

    fn verb(&self) -> &'static str {
        self.action.verb()
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Vec<Answer>> {
        self.lanes.clear();
        self.chosen = None;
        match self.select {
            Some(n) => {
                self.stage = Stage::Select;
                let dead = self.keys.dead();
                let cmds = vec![Cmd::new("ZCARD").arg(&dead), Cmd::new("ZRANGE").arg(&dead).arg("0").arg((n - 1).to_string())];
                Step::Read { watch: vec![], cmds }
            }
            None if self.ids.is_empty() => Step::Done(vec![]),
            None => self.read_rows(),
        }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Vec<Answer>>> {
        let verb = self.action.verb();
        match self.stage {
            Stage::Select => {
                let [count, head] = replies else { return Err(Error::server(verb, "wrong number of replies")) };
                check_error(verb, &self.keys.dead(), count)?;
                check_error(verb, &self.keys.dead(), head)?;
                self.dead_then = count.as_int();
                let head = head.as_array().ok_or_else(|| Error::server(verb, "ZRANGE gave no array"))?;
                self.ids = head.iter().filter_map(|r| r.as_bytes().map(<[u8]>::to_vec)).collect();
                if self.ids.is_empty() {
                    return Ok(Step::Done(vec![]));
                }
                Ok(self.read_rows())
            }
            Stage::Rows => self.decide(replies),
            Stage::Lanes => {
                let n = self.lanes.len();
                if replies.len() != 2 * n {
                    return Err(Error::server(verb, "wrong number of replies"));
                }
                let mut ctls = Vec::with_capacity(n);
                for (i, lane) in self.lanes.iter().enumerate() {
                    check_error(verb, &self.keys.lanectl(lane), &replies[i])?;
                    check_error(verb, &self.keys.lane(lane), &replies[n + i])?;
                    ctls.push((LaneCtl::from_reply(&replies[i]), replies[n + i].as_int().unwrap_or(0)));
                }
                Ok(Step::Exec(self.plan(&ctls)))
            }
        }
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Vec<Answer>> {
        match exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            Some(Reply::Error { message, .. }) => Err(Error::server(self.action.verb(), message)),
            _ => Ok(std::mem::take(&mut self.answers)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::protocol::write::to_cmds;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn v(xs: &[&str]) -> Vec<Vec<u8>> {
        xs.iter().map(|x| x.as_bytes().to_vec()).collect()
    }

    fn row(state: Option<&str>, lane: Option<&str>) -> Reply {
        Reply::Array(vec![state.map_or(Reply::Nil, bulk), lane.map_or(Reply::Nil, bulk)])
    }

    /// TIME (ms 1700000000123) and the six places' sizes, before the rows.
    fn head() -> Vec<Reply> {
        let mut r = vec![Reply::Array(vec![bulk("1700000000"), bulk("123456")])];
        r.extend([0, 0, 0, 0, 0, 0, 0, 0].map(Reply::Int));
        r
    }

    fn rows_step(a: &mut Act, rows: Vec<Reply>) -> Step<Vec<Answer>> {
        let Step::Read { watch, cmds } = a.start() else { panic!() };
        assert_eq!(watch.len(), a.ids().len(), "the rows are watched");
        assert_eq!(cmds.len(), 9 + a.ids().len());
        let mut replies = head();
        replies.extend(rows);
        a.feed(&replies).unwrap()
    }

    fn exec_cmds(step: Step<Vec<Answer>>) -> Vec<Cmd> {
        let Step::Exec(w) = step else { panic!("{step:?}") };
        to_cmds(&Keys::new(b"q"), &w)
    }

    /// A retry that moved a job not dead, kept its attempts, or left it in
    /// `dead` would double it or make it die at once on its next failure.
    #[test]
    fn retry_moves_dead_jobs_only_and_resets_attempts() {
        let mut a = Act::new(Keys::new(b"q"), Action::Retry, v(&["d", "p", "gone", "d"])).unwrap();
        assert_eq!(a.ids(), &v(&["d", "p", "gone"])[..], "repeated ids act once");
        let step = rows_step(&mut a, vec![row(Some("dead"), None), row(Some("pending"), None), row(None, None)]);
        assert_eq!(
            exec_cmds(step),
            vec![
                Cmd::from_args(["HSET", "emq:{q}:job:d", "state", "pending", "attempts", "0", "stalls", "0", "due", "1700000000123"]),
                Cmd::from_args(["HDEL", "emq:{q}:job:d", "finished", "cancel"]),
                Cmd::from_args(["ZREM", "emq:{q}:dead", "d"]),
                Cmd::from_args(["RPUSH", "emq:{q}:pending", "d"]),
                Cmd::from_args(["RPUSH", "emq:{q}:wake", ""]),
                Cmd::from_args(["LTRIM", "emq:{q}:wake", "-64", "-1"]),
            ]
        );
        assert_eq!(a.finish(&[]).unwrap(), vec![Answer::Done, Answer::Refused, Answer::Missing]);
    }

    /// A cancelled job retried is ready again as a dead one is, and more: its
    /// row no longer expires (PERSIST: a kept cancelled row has an expiry,
    /// and a row that expired while ready or running would break I1), its
    /// `cancel` mark is dropped (else its next settle would cancel it again),
    /// it leaves `cancelled` and its old request to stop leaves `cancels`
    /// (else a worker reading the requests could stop the new run). A
    /// broken retry would refuse it, or miss any of these.
    #[test]
    fn retry_of_a_cancelled_job_makes_it_ready_and_forgets_the_cancel() {
        let mut a = Act::new(Keys::new(b"q"), Action::Retry, v(&["c", "d"])).unwrap();
        let step = rows_step(&mut a, vec![row(Some("cancelled"), None), row(Some("dead"), None)]);
        assert_eq!(
            exec_cmds(step),
            vec![
                Cmd::from_args(["HSET", "emq:{q}:job:c", "state", "pending", "attempts", "0", "stalls", "0", "due", "1700000000123"]),
                Cmd::from_args(["HDEL", "emq:{q}:job:c", "finished", "cancel"]),
                Cmd::from_args(["HSET", "emq:{q}:job:d", "state", "pending", "attempts", "0", "stalls", "0", "due", "1700000000123"]),
                Cmd::from_args(["HDEL", "emq:{q}:job:d", "finished", "cancel"]),
                Cmd::from_args(["ZREM", "emq:{q}:dead", "d"]),
                Cmd::from_args(["PERSIST", "emq:{q}:job:c"]),
                Cmd::from_args(["ZREM", "emq:{q}:cancelled", "c"]),
                Cmd::from_args(["ZREM", "emq:{q}:cancels", "c"]),
                Cmd::from_args(["RPUSH", "emq:{q}:pending", "c", "d"]),
                Cmd::from_args(["RPUSH", "emq:{q}:wake", ""]),
                Cmd::from_args(["LTRIM", "emq:{q}:wake", "-64", "-1"]),
            ]
        );
        assert_eq!(a.finish(&[]).unwrap(), vec![Answer::Done, Answer::Done]);
    }

    /// A lane job made ready without offer(L) would strand its lane out of
    /// the ring; a paused lane must not be offered.
    #[test]
    fn retry_into_a_lane_offers_it_under_its_control_watch() {
        let mut a = Act::new(Keys::new(b"q"), Action::Retry, v(&["a", "b"])).unwrap();
        let step = rows_step(&mut a, vec![row(Some("dead"), Some("L")), row(Some("dead"), Some("P"))]);
        let Step::Read { watch, cmds } = step else { panic!("{step:?}") };
        assert_eq!(watch, v(&["emq:{q}:lanectl:L", "emq:{q}:lanectl:P"]));
        assert_eq!(cmds[2], Cmd::from_args(["LLEN", "emq:{q}:lane:L"]));
        let ctl = |paused: &str| Reply::Array(vec![bulk(paused), Reply::Nil, Reply::Nil, Reply::Nil]);
        let step = a.feed(&[ctl("0"), ctl("1"), Reply::Int(0), Reply::Int(0)]).unwrap();
        let cmds = exec_cmds(step);
        assert!(cmds.contains(&Cmd::from_args(["RPUSH", "emq:{q}:lane:L", "a"])));
        assert!(cmds.contains(&Cmd::from_args(["RPUSH", "emq:{q}:lane:P", "b"])));
        assert!(cmds.contains(&Cmd::from_args(["HSET", "emq:{q}:lanectl:L", "ring", "1"])));
        assert!(cmds.contains(&Cmd::from_args(["RPUSH", "emq:{q}:ring", "L"])), "L offered; P is paused");
        assert!(!cmds.iter().any(|c| c == &Cmd::from_args(["HSET", "emq:{q}:lanectl:P", "ring", "1"])));
        assert!(!cmds.contains(&Cmd::from_args(["RPUSH", "emq:{q}:wake", ""])), "no flat job, no flat token");
    }

    /// A promote now that did not count as a promote would let a concurrent
    /// promote (which watches `P promotions`, not the rows) take the job again.
    #[test]
    fn promote_now_takes_scheduled_jobs_and_counts_as_a_promote() {
        let mut a = Act::new(Keys::new(b"q"), Action::PromoteNow, v(&["s", "d"])).unwrap();
        let step = rows_step(&mut a, vec![row(Some("scheduled"), None), row(Some("dead"), None)]);
        let cmds = exec_cmds(step);
        assert_eq!(cmds[0], Cmd::from_args(["HSET", "emq:{q}:job:s", "state", "pending"]));
        assert_eq!(cmds[1], Cmd::from_args(["ZREM", "emq:{q}:schedule", "s"]));
        assert_eq!(cmds[2], Cmd::from_args(["INCR", "emq:{q}:promotions"]));
        assert_eq!(cmds[3], Cmd::from_args(["RPUSH", "emq:{q}:pending", "s"]));
        assert_eq!(a.finish(&[]).unwrap(), vec![Answer::Done, Answer::Refused]);
    }

    /// A delete that removed an active job would leave its holder settling a
    /// ghost; one that kept the id in its place would leave a ghost there.
    #[test]
    fn delete_takes_each_job_from_its_place_and_refuses_an_active_one() {
        let ids = v(&["s", "p", "l", "d", "f", "c", "a"]);
        let mut a = Act::new(Keys::new(b"q"), Action::Delete, ids).unwrap();
        let rows = vec![
            row(Some("scheduled"), None),
            row(Some("pending"), None),
            row(Some("pending"), Some("L")),
            row(Some("dead"), None),
            row(Some("done"), None),
            row(Some("cancelled"), None),
            row(Some("active"), None),
        ];
        let cmds = exec_cmds(rows_step(&mut a, rows));
        assert_eq!(
            cmds,
            vec![
                Cmd::from_args(["ZREM", "emq:{q}:schedule", "s"]),
                Cmd::from_args(["INCR", "emq:{q}:promotions"]),
                Cmd::from_args(["LREM", "emq:{q}:pending", "1", "p"]),
                Cmd::from_args(["LREM", "emq:{q}:lane:L", "1", "l"]),
                Cmd::from_args(["ZREM", "emq:{q}:dead", "d"]),
                Cmd::from_args(["ZREM", "emq:{q}:done", "f"]),
                Cmd::from_args(["ZREM", "emq:{q}:cancelled", "c"]),
                Cmd::from_args([
                    "DEL",
                    "emq:{q}:job:s",
                    "emq:{q}:job:p",
                    "emq:{q}:job:l",
                    "emq:{q}:job:d",
                    "emq:{q}:job:f",
                    "emq:{q}:job:c",
                ]),
            ]
        );
        let answers = a.finish(&[]).unwrap();
        assert_eq!(answers, [Answer::Done; 6].into_iter().chain([Answer::Refused]).collect::<Vec<_>>());
    }

    #[test]
    fn nothing_to_do_writes_nothing() {
        let mut a = Act::new(Keys::new(b"q"), Action::Delete, v(&["a"])).unwrap();
        assert_eq!(rows_step(&mut a, vec![row(Some("active"), None)]), Step::Done(vec![Answer::Refused]));
        assert_eq!(Act::new(Keys::new(b"q"), Action::Retry, vec![]).unwrap().start(), Step::Done(vec![]));
    }

    /// A wrong type found after the first write would leave the call half
    /// applied (Redis runs every queued command): it refuses before `EXEC`.
    #[test]
    fn wrong_types_refuse_before_any_write() {
        let mut a = Act::new(Keys::new(b"q"), Action::Retry, v(&["a"])).unwrap();
        a.start();
        let mut replies = head();
        replies[2] = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        replies.push(row(Some("dead"), None));
        let e = a.feed(&replies).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:pending"), "{e}");
    }

    #[test]
    fn retry_dead_chooses_the_oldest_then_watches_their_rows() {
        let mut a = Act::retry_dead(Keys::new(b"q"), 2).unwrap();
        let Step::Read { watch, cmds } = a.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds[1], Cmd::from_args(["ZRANGE", "emq:{q}:dead", "0", "1"]));
        let Step::Read { watch, .. } = a.feed(&[Reply::Int(9), Reply::Array(vec![bulk("x"), bulk("y")])]).unwrap() else { panic!() };
        assert_eq!(watch, v(&["emq:{q}:job:x", "emq:{q}:job:y"]));
        assert_eq!(a.dead_then(), Some(9));
        let mut empty = Act::retry_dead(Keys::new(b"q"), 2).unwrap();
        empty.start();
        assert_eq!(empty.feed(&[Reply::Int(0), Reply::Array(vec![])]).unwrap(), Step::Done(vec![]));
    }

    #[test]
    fn bad_arguments_name_the_verb_and_argument() {
        let e = Act::new(Keys::new(b"q"), Action::Delete, vec![vec![]]).err().unwrap();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Argument, "EMQ.DELETE: ids each must be 1 to 256 bytes"));
        let many: Vec<Vec<u8>> = (0..=ACT_BATCH).map(|i| i.to_string().into_bytes()).collect();
        assert!(Act::new(Keys::new(b"q"), Action::Retry, many).is_err());
        assert_eq!(Act::retry_dead(Keys::new(b"q"), 0).err().unwrap().detail(), "limit must be 1 to 500 a transaction");
    }
}

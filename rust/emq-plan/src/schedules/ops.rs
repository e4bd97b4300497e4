//! The schedule verbs (SPEC §14) as conversations: SCHEDULE (create or
//! change), UNSCHEDULE, PAUSE, RESUME and RUN NOW of one schedule, and the
//! list of a queue's schedules.
//!
//! Each reads `TIME`, the schedule's record and the head of `P timers` under
//! `WATCH P schedules` (TIMERS writes the record's `last_tick`: a change must
//! not write back a stale one), then writes the record and its timer in one
//! transaction. A timer set before every other one appends the wake token
//! `""`, so parked workers learn of it at once (the head is read as a hint, as
//! ADD reads `schedule`'s: `crate::lanes::offer::new_head`).
//!
//! - SCHEDULE of a definition already stored writes nothing (its next tick and
//!   missed ticks are kept; a running schedule whose timer is gone gets it again,
//!   from `now`); a changed one takes effect at once: its next tick
//!   is the first after `now`. Whether the schedule is paused, its `created`
//!   and `last_tick` are kept.
//! - PAUSE drops the timer; RESUME sets it to the first tick after `now` (the
//!   ticks while paused are not run).
//! - RUN NOW enqueues one job now, id `tick_id(name, now)`, without moving the
//!   timer: two calls in the same ms make one job.

use super::record::{check_name, timer_member, Definition, Record};
use super::tick_id::tick_id;
use super::tick_jobs::{TickAdd, TickAdds};
use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::lanes::offer::new_head;
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{Members, Scored, Write};

pub const SCHEDULE: &str = "EMQ.SCHEDULE";
pub const UNSCHEDULE: &str = "EMQ.UNSCHEDULE";
pub const PAUSE: &str = "EMQ.SCHEDULE.PAUSE";
pub const RESUME: &str = "EMQ.SCHEDULE.RESUME";
pub const RUN_NOW: &str = "EMQ.SCHEDULE.RUN";
pub const SCHEDULES: &str = "EMQ.SCHEDULES";

#[derive(Clone, Debug)]
pub enum Op {
    Set(Box<Definition>),
    Remove,
    Pause,
    Resume,
    RunNow,
}

/// What a schedule verb did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Whether it wrote anything (`false`: the schedule was as asked already,
    /// or, for UNSCHEDULE, there was none).
    Changed(bool),
    /// RUN NOW: the job's id, and whether this call added it (`false`: a call
    /// in the same ms did).
    Enqueued { id: Vec<u8>, added: bool },
}

enum Stage {
    Read,
    Rows,
    Exec,
}

pub struct ScheduleOp {
    keys: Keys,
    name: Vec<u8>,
    op: Op,
    in_server: bool,
    stage: Stage,
    now: i64,
    adds: TickAdds,
    answer: Option<Answer>,
}

impl ScheduleOp {
    /// Checks the name (a definition is checked when it is made:
    /// `Definition::parse`).
    pub fn new(keys: Keys, name: Vec<u8>, op: Op) -> Result<Self> {
        let verb = verb_of(&op);
        check_name(verb, &name)?;
        Ok(ScheduleOp { keys, name, op, in_server: false, stage: Stage::Read, now: 0, adds: TickAdds::default(), answer: None })
    }

    /// Run inside the server (a module command): no watch.
    #[must_use]
    pub fn in_server(mut self) -> Self {
        self.in_server = true;
        self
    }

    fn missing(&self) -> Error {
        Error::argument(verb_of(&self.op), "name", format!("{:?} names no schedule of this queue", String::from_utf8_lossy(&self.name)))
    }

    /// The timer's writes for a schedule that runs again from `now`: its next
    /// tick (none left: no timer), and the wake when it is the new head.
    fn timer_from_now(&self, record: &Record, head: &Reply, w: &mut Vec<Write>) {
        let member = timer_member(&self.name);
        match record.spec().and_then(|s| s.next_after(self.now)) {
            Some(next) => {
                let mut at = Scored::new();
                at.push(next, &member);
                w.push(Write::SetTimers(at));
                if new_head(head, std::iter::once(next)) {
                    w.push(Write::Wake(Members::of(&[b""])));
                    w.push(Write::TrimWake);
                }
            }
            None => w.push(Write::DropTimers(Members::one(&member))),
        }
    }

    fn read(&mut self, replies: &[Reply]) -> Result<Step<Answer>> {
        let verb = verb_of(&self.op);
        let [time, stored, head, wake, timer] = replies else {
            return Err(Error::server(verb, "wrong number of replies"));
        };
        check_error(verb, &self.keys.schedules(), stored)?;
        check_error(verb, &self.keys.timers(), head)?;
        check_error(verb, &self.keys.wake(), wake)?;
        check_error(verb, &self.keys.timers(), timer)?;
        self.now = parse_time(time).ok_or_else(|| Error::server(verb, "TIME gave no clock"))?;
        let old = match stored {
            Reply::Nil => None,
            r => Some(r.as_bytes().and_then(Record::from_json).ok_or_else(|| {
                Error::layout(verb, format!("the record of schedule {:?} is not one emq reads", String::from_utf8_lossy(&self.name)))
            })?),
        };
        let member = timer_member(&self.name);
        let mut w = vec![];
        let changed = |w: Vec<Write>| if w.is_empty() { Step::Done(Answer::Changed(false)) } else { Step::Exec(w) };
        let step = match (&self.op, old) {
            (Op::Set(def), old) => {
                let mut record = def.record(self.now);
                if let Some(old) = old {
                    if old.same_schedule(&record) {
                        // Stored already: only a running schedule's lost timer is set again.
                        if old.paused || !matches!(timer, Reply::Nil) {
                            return Ok(Step::Done(Answer::Changed(false)));
                        }
                        self.timer_from_now(&old, head, &mut w);
                        self.answer = Some(Answer::Changed(true));
                        return Ok(Step::Exec(w));
                    }
                    (record.paused, record.last_tick, record.created) = (old.paused, old.last_tick, old.created);
                }
                w.push(Write::SetSchedule { name: self.name.clone(), record: record.to_json() });
                if record.paused {
                    w.push(Write::DropTimers(Members::one(&member)));
                } else {
                    self.timer_from_now(&record, head, &mut w);
                }
                changed(w)
            }
            (Op::Remove, None) => Step::Done(Answer::Changed(false)),
            (Op::Remove, Some(_)) => {
                w.push(Write::DropSchedule { name: self.name.clone() });
                w.push(Write::DropTimers(Members::one(&member)));
                changed(w)
            }
            (Op::Pause | Op::Resume | Op::RunNow, None) => return Err(self.missing()),
            (Op::Pause, Some(mut record)) => {
                if !record.paused {
                    record.paused = true;
                    w.push(Write::SetSchedule { name: self.name.clone(), record: record.to_json() });
                    w.push(Write::DropTimers(Members::one(&member)));
                }
                changed(w)
            }
            (Op::Resume, Some(mut record)) => {
                if record.paused {
                    record.paused = false;
                    w.push(Write::SetSchedule { name: self.name.clone(), record: record.to_json() });
                    self.timer_from_now(&record, head, &mut w);
                }
                changed(w)
            }
            (Op::RunNow, Some(record)) => {
                let id = tick_id(&self.name, self.now);
                self.adds = TickAdds::new(vec![TickAdd { id: id.clone(), tick: self.now, job: record.job }]);
                self.answer = Some(Answer::Enqueued { id, added: false });
                self.stage = Stage::Rows;
                let watch = if self.in_server { vec![] } else { self.adds.watch(&self.keys) };
                return Ok(Step::Read { watch, cmds: self.adds.reads(&self.keys) });
            }
        };
        if let Step::Exec(_) = step {
            self.answer = Some(Answer::Changed(true));
        }
        Ok(step)
    }
}

fn verb_of(op: &Op) -> &'static str {
    match op {
        Op::Set(_) => SCHEDULE,
        Op::Remove => UNSCHEDULE,
        Op::Pause => PAUSE,
        Op::Resume => RESUME,
        Op::RunNow => RUN_NOW,
    }
}

impl Conversation for ScheduleOp {
    type Out = Answer;

    fn verb(&self) -> &'static str {
        verb_of(&self.op)
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Answer> {
        self.stage = Stage::Read;
        let k = &self.keys;
        let cmds = vec![
            Cmd::new("TIME"),
            Cmd::new("HGET").arg(k.schedules()).arg(&self.name),
            Cmd::new("ZRANGE").arg(k.timers()).arg("0").arg("0").arg("WITHSCORES"),
            Cmd::new("LLEN").arg(k.wake()),
            Cmd::new("ZSCORE").arg(k.timers()).arg(timer_member(&self.name)),
        ];
        Step::Read { watch: if self.in_server { vec![] } else { vec![k.schedules()] }, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Answer>> {
        match std::mem::replace(&mut self.stage, Stage::Exec) {
            Stage::Read => self.read(replies),
            Stage::Rows => {
                let mut w = vec![];
                let added = self.adds.plan(RUN_NOW, &self.keys, self.now, replies, &mut w)?;
                if let Some(Answer::Enqueued { added: a, .. }) = &mut self.answer {
                    *a = !added.ids.is_empty();
                }
                Ok(if w.is_empty() { Step::Done(self.answer.take().expect("run now answers")) } else { Step::Exec(w) })
            }
            Stage::Exec => Err(Error::server(self.verb(), "a read was fed after the plan was built")),
        }
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Answer> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(self.verb(), message));
        }
        Ok(self.answer.take().unwrap_or(Answer::Changed(false)))
    }
}

/// One schedule as listed: its name, record and next tick (`None`: paused, or
/// no tick left).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listed {
    pub name: Vec<u8>,
    pub record: Record,
    pub next: Option<i64>,
}

/// The queue's schedules, sorted by name: `HGETALL P schedules`, then the
/// timers of those names, unwatched (a listing is a snapshot of each).
/// Records that emq does not read are left out.
pub struct ScheduleList {
    keys: Keys,
    listed: Vec<Listed>,
    /// The records are read: the next reply is the timers'.
    recorded: bool,
}

impl ScheduleList {
    pub fn new(keys: Keys) -> Self {
        ScheduleList { keys, listed: vec![], recorded: false }
    }
}

impl Conversation for ScheduleList {
    type Out = Vec<Listed>;

    fn verb(&self) -> &'static str {
        SCHEDULES
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("HGETALL").arg(self.keys.schedules())] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let [reply] = replies else { return Err(Error::server(SCHEDULES, "wrong number of replies")) };
        if self.recorded {
            let scores = reply;
            check_error(SCHEDULES, &self.keys.timers(), scores)?;
            let scores = scores.as_array().unwrap_or(&[]);
            for (l, s) in self.listed.iter_mut().zip(scores) {
                l.next = s.as_score().map(|s| s as i64);
            }
            return Ok(Step::Done(std::mem::take(&mut self.listed)));
        }
        self.recorded = true;
        let all = reply;
        check_error(SCHEDULES, &self.keys.schedules(), all)?;
        let items = all.as_array().unwrap_or(&[]);
        for pair in items.chunks_exact(2) {
            let (Some(name), Some(record)) = (pair[0].as_bytes(), pair[1].as_bytes().and_then(Record::from_json)) else { continue };
            self.listed.push(Listed { name: name.to_vec(), record, next: None });
        }
        self.listed.sort_by(|a, b| a.name.cmp(&b.name));
        if self.listed.is_empty() {
            return Ok(Step::Done(vec![]));
        }
        let members = self.listed.iter().map(|l| timer_member(&l.name));
        Ok(Step::Read { watch: vec![], cmds: vec![Cmd::new("ZMSCORE").arg(self.keys.timers()).args(members)] })
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(SCHEDULES, "a listing has no transaction"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::record::TickJob;

    fn keys() -> Keys {
        Keys::new(b"q")
    }

    fn time(ms: i64) -> Reply {
        Reply::Array(vec![Reply::Int(ms / 1000), Reply::Int(ms % 1000 * 1000)])
    }

    fn def(every_ms: i64) -> Definition {
        let job = TickJob { data: b"d".to_vec(), lane: None, max_attempts: 1 };
        Definition::parse(SCHEDULE, b"s", None, Some(every_ms), None, None, None, None, job).unwrap()
    }

    /// One verb's step after its first read: `stored` the record, `head` the
    /// first timer's time.
    fn step(op: Op, now: i64, stored: Option<&Record>, head: Option<i64>) -> Result<Step<Answer>> {
        step_with_timer(op, now, stored, head, stored.map(|_| 1))
    }

    /// `step`, with the schedule's own timer as read (`None`: absent).
    fn step_with_timer(op: Op, now: i64, stored: Option<&Record>, head: Option<i64>, timer: Option<i64>) -> Result<Step<Answer>> {
        let mut c = ScheduleOp::new(keys(), b"s".to_vec(), op)?;
        let Step::Read { watch, .. } = c.start() else { panic!() };
        assert_eq!(watch, vec![keys().schedules()]);
        let head = match head {
            None => Reply::Array(vec![]),
            Some(h) => Reply::Array(vec![Reply::Bulk(b"tick:x".to_vec()), Reply::Bulk(h.to_string().into_bytes())]),
        };
        let stored = stored.map_or(Reply::Nil, |r| Reply::Bulk(r.to_json()));
        let timer = timer.map_or(Reply::Nil, |t| Reply::Bulk(t.to_string().into_bytes()));
        c.feed(&[time(now), stored, head, Reply::Int(0), timer])
    }

    #[test]
    fn schedule_writes_the_record_and_the_next_tick_and_wakes_for_a_new_head() {
        let Step::Exec(w) = step(Op::Set(Box::new(def(1_000))), 1_500, None, Some(9_000)).unwrap() else { panic!() };
        assert_eq!(w[0], Write::SetSchedule { name: b"s".to_vec(), record: def(1_000).record(1_500).to_json() });
        assert_eq!(w[1], Write::SetTimers([(2_000, b"tick:s")].into_iter().collect()));
        assert_eq!(w[2..], [Write::Wake(Members::of(&[b""])), Write::TrimWake]);
        let Step::Exec(w) = step(Op::Set(Box::new(def(1_000))), 1_500, None, Some(1_800)).unwrap() else { panic!() };
        assert_eq!(w.len(), 2, "a timer after the head wakes nobody");
    }

    #[test]
    fn schedule_of_the_stored_definition_writes_nothing_and_a_change_keeps_state() {
        let mut stored = def(1_000).record(7);
        (stored.paused, stored.last_tick) = (true, Some(5_000));
        assert_eq!(step(Op::Set(Box::new(def(1_000))), 9_999, Some(&stored), None).unwrap(), Step::Done(Answer::Changed(false)));
        let Step::Exec(w) = step(Op::Set(Box::new(def(2_000))), 9_999, Some(&stored), None).unwrap() else { panic!() };
        let Write::SetSchedule { record, .. } = &w[0] else { panic!() };
        let r = Record::from_json(record).unwrap();
        assert_eq!((r.every_ms, r.paused, r.last_tick, r.created), (Some(2_000), true, Some(5_000), 7));
        assert_eq!(w[1], Write::DropTimers(Members::one(b"tick:s")), "a paused schedule has no timer");
    }

    #[test]
    fn schedule_of_the_stored_definition_sets_a_lost_timer_again() {
        let stored = def(1_000).record(7);
        let Step::Exec(w) = step_with_timer(Op::Set(Box::new(def(1_000))), 2_500, Some(&stored), None, None).unwrap() else {
            panic!("a running schedule with no timer would never tick again")
        };
        assert_eq!(w[0], Write::SetTimers([(3_000, b"tick:s")].into_iter().collect()));
        assert!(!w.iter().any(|x| matches!(x, Write::SetSchedule { .. })), "the record stays as it is");
        let paused = Record { paused: true, ..stored };
        let none = step_with_timer(Op::Set(Box::new(def(1_000))), 2_500, Some(&paused), None, None).unwrap();
        assert_eq!(none, Step::Done(Answer::Changed(false)), "a paused schedule has no timer");
    }

    #[test]
    fn bad_definitions_name_the_verb_and_the_argument() {
        let job = TickJob { data: vec![], lane: None, max_attempts: 1 };
        let bad = |cron: Option<&str>, every: Option<i64>, tz: Option<&str>, name: &[u8]| {
            Definition::parse(SCHEDULE, name, cron, every, tz, None, None, None, job.clone()).unwrap_err().message
        };
        assert!(bad(Some("61 * * * *"), None, None, b"s").starts_with("EMQ.SCHEDULE: cron minute field"));
        assert!(bad(Some("* * * * *"), None, Some("Mars/Olympus"), b"s").starts_with("EMQ.SCHEDULE: tz \"Mars/Olympus\""));
        assert_eq!(bad(None, Some(0), None, b"s"), "EMQ.SCHEDULE: every must be a positive number of milliseconds");
        assert!(bad(None, Some(1), None, b"").starts_with("EMQ.SCHEDULE: name "));
        let e = ScheduleOp::new(keys(), vec![b'x'; 231], Op::Pause).err().unwrap();
        assert!(e.message.starts_with("EMQ.SCHEDULE.PAUSE: name "), "{}", e.message);
    }

    #[test]
    fn pause_drops_the_timer_resume_sets_it_from_now() {
        let running = def(1_000).record(0);
        let Step::Exec(w) = step(Op::Pause, 3_500, Some(&running), None).unwrap() else { panic!() };
        assert_eq!(w[1], Write::DropTimers(Members::one(b"tick:s")));
        let paused = Record { paused: true, ..running.clone() };
        assert_eq!(step(Op::Pause, 3_500, Some(&paused), None).unwrap(), Step::Done(Answer::Changed(false)));
        let Step::Exec(w) = step(Op::Resume, 3_500, Some(&paused), None).unwrap() else { panic!() };
        assert_eq!(w[1], Write::SetTimers([(4_000, b"tick:s")].into_iter().collect()), "the ticks while paused are not run");
        assert!(step(Op::Resume, 3_500, None, None).unwrap_err().message.contains("names no schedule"));
    }

    #[test]
    fn unschedule_drops_both_and_run_now_adds_the_tick_of_now() {
        let running = def(1_000).record(0);
        let Step::Exec(w) = step(Op::Remove, 1, Some(&running), None).unwrap() else { panic!() };
        assert_eq!(w, vec![Write::DropSchedule { name: b"s".to_vec() }, Write::DropTimers(Members::one(b"tick:s"))]);
        assert_eq!(step(Op::Remove, 1, None, None).unwrap(), Step::Done(Answer::Changed(false)));
        let Step::Read { watch, .. } = step(Op::RunNow, 4_321, Some(&running), None).unwrap() else { panic!() };
        assert_eq!(watch, vec![keys().job(b"schedule:s:4321")]);
    }
}

//! TIMERS, the sibling sweep of PROMOTE that moves `P timers` (SPEC §14): for
//! each schedule whose next tick (`tick:<name>`) is at or before `now`, the
//! jobs of the ticks its missed-tick policy keeps, and the timer moved to the
//! first tick after `now`, in one transaction under the guard.
//!
//! 1. `WATCH P timers P schedules` (written only by the schedule verbs and
//!    TIMERS: producers and claims never abort it), then `TIME` and the first
//!    `batch` members of `P timers`, cut at `now`.
//! 2. `HMGET P schedules` of the due schedules: their records. A member whose
//!    schedule is gone, paused or unreadable is dropped; the others get
//!    `due_ticks` and their ticks' job ids (`tick_id`).
//! 3. (only when ticks are due) `WATCH` the rows of those ids and the lanes'
//!    control, and read them (`schedules::tick_jobs`): an id that exists is
//!    skipped (another host enqueued that tick).
//! 4. `MULTI`, the jobs (as ADD writes them), the timers moved, the records'
//!    `last_tick`, `EXEC`.
//!
//! In the server (`Timers::in_server`) nothing is watched; the reads and the
//! plan are the same. Members of another kind (not `tick:`) are left for the
//! sweep that knows them.

use crate::clock::parse_clock;
use crate::error::{Error, Result};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{Members, Scored, Write};
use crate::schedules::record::{timer_member, Record, TICK_PREFIX};
use crate::schedules::tick_jobs::{TickAdd, TickAdds};
use crate::schedules::{due_ticks, tick_id};

pub const TIMERS: &str = "EMQ.TIMERS";

/// What a TIMERS call did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ticked {
    /// The ids of the jobs it enqueued, schedule by schedule, oldest tick first.
    pub enqueued: Vec<Vec<u8>>,
    /// Ticks whose job existed already (another host enqueued it).
    pub skipped: usize,
    /// Schedules some of whose due ticks the policy dropped.
    pub dropped: usize,
    /// Timers dropped: their schedule is gone, paused, or has no tick left.
    pub removed: usize,
}

enum Stage {
    Select,
    Records,
    Rows,
    Exec,
}

/// One due schedule's member and its stored next tick.
struct DueTimer {
    name: Vec<u8>,
    member: Vec<u8>,
    at: i64,
}

pub struct Timers {
    keys: Keys,
    batch: u64,
    in_server: bool,
    stage: Stage,
    now: i64,
    now_us: i64,
    due: Vec<DueTimer>,
    /// The first time past `now` the selection showed (`Some(now)`: the batch
    /// was all due, more may be), then the earliest timer this call sets.
    next: Option<i64>,
    /// The timers' and records' writes, made once the records are read.
    timer_writes: Vec<Write>,
    adds: TickAdds,
    out: Ticked,
}

impl Timers {
    pub fn new(keys: Keys, batch: u64) -> Self {
        Timers {
            keys,
            batch: batch.max(1),
            in_server: false,
            stage: Stage::Select,
            now: 0,
            now_us: 0,
            due: vec![],
            next: None,
            timer_writes: vec![],
            adds: TickAdds::default(),
            out: Ticked::default(),
        }
    }

    /// Run inside the server (a module command): no watch.
    pub fn in_server(keys: Keys, batch: u64) -> Self {
        Timers { in_server: true, ..Self::new(keys, batch) }
    }

    /// How long after the call's clock reading the next timer it knows of falls
    /// due, in µs (`None`: none; 0: more may be due now).
    pub fn next_in_us(&self) -> Option<f64> {
        self.next.map(|n| ((n - self.now) as f64 * 1000.0 - self.now_us as f64).max(0.0))
    }

    fn watch(&self, keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        if self.in_server {
            vec![]
        } else {
            keys
        }
    }

    fn sooner(&mut self, at: i64) {
        self.next = Some(self.next.map_or(at, |n| n.min(at)));
    }

    fn selected(&mut self, replies: &[Reply]) -> Result<Step<Ticked>> {
        let [time, members] = replies else {
            return Err(Error::server(TIMERS, "select: wrong number of replies"));
        };
        check_error(TIMERS, &self.keys.timers(), members)?;
        (self.now, self.now_us) = parse_clock(time).ok_or_else(|| Error::server(TIMERS, "TIME gave no clock"))?;
        let items = members.as_array().ok_or_else(|| Error::server(TIMERS, "ZRANGE gave no array"))?;
        for pair in items.chunks_exact(2) {
            let (Some(member), Some(score)) = (pair[0].as_bytes(), pair[1].as_score()) else {
                return Err(Error::server(TIMERS, "ZRANGE gave no member and score"));
            };
            let at = score as i64;
            if score > self.now as f64 {
                self.sooner(at);
                break;
            }
            if let Some(name) = member.strip_prefix(TICK_PREFIX) {
                self.due.push(DueTimer { name: name.to_vec(), member: member.to_vec(), at });
            }
        }
        if items.len() / 2 >= usize::try_from(self.batch).unwrap_or(usize::MAX) && self.next.is_none() {
            self.next = Some(self.now);
        }
        if self.due.is_empty() {
            return Ok(Step::Done(Ticked::default()));
        }
        self.stage = Stage::Records;
        let cmd = Cmd::new("HMGET").arg(self.keys.schedules()).args(self.due.iter().map(|d| &d.name));
        Ok(Step::Read { watch: vec![], cmds: vec![cmd] })
    }

    fn records_read(&mut self, replies: &[Reply]) -> Result<Step<Ticked>> {
        let [records] = replies else {
            return Err(Error::server(TIMERS, "records: wrong number of replies"));
        };
        check_error(TIMERS, &self.keys.schedules(), records)?;
        let fields = records.fields();
        if fields.len() != self.due.len() {
            return Err(Error::server(TIMERS, "HMGET gave the wrong number of values"));
        }
        let (mut moved, mut gone, mut adds) = (Scored::new(), Members::new(), vec![]);
        let mut rewritten = vec![];
        for (d, field) in self.due.iter().zip(fields) {
            let record = field.and_then(Record::from_json).filter(|r| !r.paused);
            let Some((mut record, spec)) = record.and_then(|r| r.spec().map(|s| (r, s))) else {
                gone.push(&d.member);
                continue;
            };
            let due = due_ticks(&spec, d.at, self.now, record.missed);
            self.out.dropped += usize::from(due.dropped);
            for &tick in &due.ticks {
                adds.push(TickAdd { id: tick_id(&d.name, tick), tick, job: record.job.clone() });
            }
            match due.next {
                Some(next) => moved.push(next, &timer_member(&d.name)),
                None => gone.push(&d.member),
            }
            if let Some(&last) = due.ticks.last() {
                record.last_tick = Some(last);
                rewritten.push(Write::SetSchedule { name: d.name.clone(), record: record.to_json() });
            }
        }
        self.out.removed = gone.len();
        for (at, _) in moved.iter() {
            self.sooner(at);
        }
        if !moved.is_empty() {
            self.timer_writes.push(Write::SetTimers(moved));
        }
        if !gone.is_empty() {
            self.timer_writes.push(Write::DropTimers(gone));
        }
        self.timer_writes.extend(rewritten);
        self.adds = TickAdds::new(adds);
        if self.adds.is_empty() {
            return Ok(Step::Exec(std::mem::take(&mut self.timer_writes)));
        }
        self.stage = Stage::Rows;
        Ok(Step::Read { watch: self.watch(self.adds.watch(&self.keys)), cmds: self.adds.reads(&self.keys) })
    }

    fn rows_read(&mut self, replies: &[Reply]) -> Result<Step<Ticked>> {
        let mut w = vec![];
        let added = self.adds.plan(TIMERS, &self.keys, self.now, replies, &mut w)?;
        (self.out.enqueued, self.out.skipped) = (added.ids, added.skipped);
        w.append(&mut self.timer_writes);
        Ok(Step::Exec(w))
    }
}

impl Conversation for Timers {
    type Out = Ticked;

    fn verb(&self) -> &'static str {
        TIMERS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Ticked> {
        let last = self.batch.saturating_sub(1).to_string();
        let select = Cmd::new("ZRANGE").arg(self.keys.timers()).arg("0").arg(last).arg("WITHSCORES");
        Step::Read { watch: self.watch(vec![self.keys.timers(), self.keys.schedules()]), cmds: vec![Cmd::new("TIME"), select] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Ticked>> {
        match std::mem::replace(&mut self.stage, Stage::Exec) {
            Stage::Select => self.selected(replies),
            Stage::Records => self.records_read(replies),
            Stage::Rows => self.rows_read(replies),
            Stage::Exec => Err(Error::server(TIMERS, "a read was fed after the plan was built")),
        }
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Ticked> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(TIMERS, message));
        }
        Ok(std::mem::take(&mut self.out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::add::{digest_hex, NewJob, When};
    use crate::protocol::write::{NewRow, RowFields};
    use crate::schedules::record::TickJob;
    use crate::schedules::Missed;
    use jiff::Timestamp;

    fn keys() -> Keys {
        Keys::new(b"q")
    }

    fn time(ms: i64) -> Reply {
        Reply::Array(vec![Reply::Int(ms.div_euclid(1000)), Reply::Int(ms.rem_euclid(1000) * 1000)])
    }

    fn bulk(b: &[u8]) -> Reply {
        Reply::Bulk(b.to_vec())
    }

    fn every(ms: i64, missed: Missed, paused: bool) -> Record {
        Record {
            cron: None,
            every_ms: Some(ms),
            tz: "UTC".into(),
            missed,
            paused,
            job: TickJob { data: b"d".to_vec(), lane: None, max_attempts: 3 },
            last_tick: None,
            created: 0,
        }
    }

    /// The timers `(member, at)` as `ZRANGE … WITHSCORES` gives them.
    fn timers(members: &[(&str, i64)]) -> Reply {
        Reply::Array(members.iter().flat_map(|(m, at)| [bulk(m.as_bytes()), bulk(at.to_string().as_bytes())]).collect())
    }

    /// Replies to `TickAdds::reads` for flat jobs: `exists` per id, then the three lists.
    fn rows(exists: &[bool]) -> Vec<Reply> {
        let mut r: Vec<Reply> = exists.iter().map(|&e| Reply::Int(i64::from(e))).collect();
        r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
        r
    }

    /// Runs a TIMERS call at `now` over `members` with the records `stored`
    /// (one per due tick member, in order) and the rows' existence `exists`
    /// (`None`: the call reads no rows): its steps' watches and its writes.
    fn run(
        now: i64,
        members: &[(&str, i64)],
        stored: &[Option<Record>],
        exists: Option<&[bool]>,
    ) -> (Vec<Vec<Vec<u8>>>, Vec<Write>, Ticked) {
        let mut t = Timers::new(keys(), 100);
        let mut watches = vec![];
        let Step::Read { watch, .. } = t.start() else { panic!("reads first") };
        watches.push(watch);
        let step = t.feed(&[time(now), timers(members)]).unwrap();
        let step = match step {
            Step::Done(out) => return (watches, vec![], out),
            Step::Read { watch, cmds } => {
                watches.push(watch);
                assert_eq!(cmds[0].name(), b"HMGET");
                let values = stored.iter().map(|r| r.as_ref().map_or(Reply::Nil, |r| bulk(&r.to_json()))).collect();
                t.feed(&[Reply::Array(values)]).unwrap()
            }
            other => panic!("{other:?}"),
        };
        let writes = match (step, exists) {
            (Step::Exec(w), None) => w,
            (Step::Read { watch, .. }, Some(e)) => {
                watches.push(watch);
                match t.feed(&rows(e)).unwrap() {
                    Step::Exec(w) => w,
                    other => panic!("{other:?}"),
                }
            }
            (other, _) => panic!("{other:?}"),
        };
        let out = t.finish(&[]).unwrap();
        (watches, writes, out)
    }

    fn moved(writes: &[Write]) -> Vec<(i64, Vec<u8>)> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::SetTimers(s) => Some(s.iter().map(|(at, m)| (at, m.to_vec())).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    fn new_rows(writes: &[Write]) -> Vec<(Vec<u8>, i64)> {
        writes
            .iter()
            .filter_map(|w| match w {
                Write::SetRow { id, fields: RowFields::New(new) } => Some((id.clone(), new.due)),
                _ => None,
            })
            .collect()
    }

    fn last_tick(writes: &[Write]) -> Option<i64> {
        writes.iter().find_map(|w| match w {
            Write::SetSchedule { record, .. } => Record::from_json(record).and_then(|r| r.last_tick),
            _ => None,
        })
    }

    #[test]
    fn latest_enqueues_the_latest_due_tick_once_and_moves_the_timer_past_now() {
        // Ticks every second; stopped since 1 s: ten ticks due at 10.5 s.
        let (watches, w, out) = run(10_500, &[("tick:s", 1_000)], &[Some(every(1_000, Missed::Latest, false))], Some(&[false]));
        assert_eq!(watches[0], vec![keys().timers(), keys().schedules()], "the guard watches the timers and the records");
        assert_eq!(watches[2], vec![keys().job(b"schedule:s:10000")], "and the rows of the ids it adds");
        assert_eq!(new_rows(&w), vec![(b"schedule:s:10000".to_vec(), 10_000)]);
        assert_eq!(moved(&w), vec![(11_000, b"tick:s".to_vec())]);
        assert_eq!(last_tick(&w), Some(10_000));
        assert_eq!(out.enqueued, vec![b"schedule:s:10000".to_vec()]);
        assert_eq!(out.dropped, 1, "nine ticks got no job");
        assert!(w.contains(&Write::MakeReady { lane: None, ids: Members::of(&[b"schedule:s:10000"]) }));
        assert!(w.contains(&Write::Wake(Members::of(&[b""]))), "parked workers learn of the job");
    }

    #[test]
    fn the_row_is_the_one_add_writes_for_the_id_due_at_the_tick() {
        let (_, w, _) = run(2_000, &[("tick:s", 2_000)], &[Some(every(1_000, Missed::Latest, false))], Some(&[false]));
        let job = NewJob {
            priority: 0,
            id: Some(b"schedule:s:2000".to_vec()),
            data: b"d".to_vec(),
            when: When::At(2_000),
            lane: None,
            max_attempts: 3,
            keep: None,
            unique: None,
        };
        let want = NewRow {
            priority: 0,
            ready: true,
            data: b"d".to_vec(),
            due: 2_000,
            max_attempts: 3,
            created: 2_000,
            digest: digest_hex(&job),
            lane: None,
            keep: None,
            unique: None,
            wait: None,
        };
        assert_eq!(w[0], Write::SetRow { id: b"schedule:s:2000".to_vec(), fields: RowFields::New(Box::new(want)) });
    }

    #[test]
    fn all_enqueues_every_due_tick_up_to_its_bound() {
        let rec = every(1_000, Missed::All { max_missed: 10 }, false);
        let (_, w, out) = run(10_500, &[("tick:s", 1_000)], &[Some(rec)], Some(&[false; 10]));
        let ticks: Vec<i64> = new_rows(&w).into_iter().map(|(_, due)| due).collect();
        assert_eq!(ticks, (1..=10).map(|k| k * 1_000).collect::<Vec<_>>());
        assert_eq!((out.enqueued.len(), out.dropped), (10, 0));

        let rec = every(1_000, Missed::All { max_missed: 3 }, false);
        let (_, w, out) = run(10_500, &[("tick:s", 1_000)], &[Some(rec)], Some(&[false; 3]));
        let ticks: Vec<i64> = new_rows(&w).into_iter().map(|(_, due)| due).collect();
        assert_eq!(ticks, vec![8_000, 9_000, 10_000], "the most recent of them");
        assert_eq!(out.dropped, 1);
    }

    #[test]
    fn skip_enqueues_only_within_its_grace() {
        let (_, w, out) = run(10_500, &[("tick:s", 1_000)], &[Some(every(1_000, Missed::Skip { grace_ms: 100 }, false))], None);
        assert!(new_rows(&w).is_empty() && out.enqueued.is_empty());
        assert_eq!(moved(&w), vec![(11_000, b"tick:s".to_vec())], "the timer moves all the same");
        assert_eq!(last_tick(&w), None);
        let (_, w, _) = run(10_050, &[("tick:s", 1_000)], &[Some(every(1_000, Missed::Skip { grace_ms: 100 }, false))], Some(&[false]));
        assert_eq!(new_rows(&w), vec![(b"schedule:s:10000".to_vec(), 10_000)]);
    }

    #[test]
    fn an_id_that_exists_is_skipped_and_the_timer_still_moves() {
        let (_, w, out) = run(3_000, &[("tick:s", 3_000)], &[Some(every(1_000, Missed::Latest, false))], Some(&[true]));
        assert!(new_rows(&w).is_empty(), "another host enqueued this tick: no second row");
        assert!(!w.iter().any(|x| matches!(x, Write::MakeReady { .. } | Write::Wake(_))));
        assert_eq!(out.skipped, 1);
        assert_eq!(moved(&w), vec![(4_000, b"tick:s".to_vec())]);
    }

    #[test]
    fn a_paused_removed_or_unreadable_schedule_loses_its_timer_and_enqueues_nothing() {
        let members = [("tick:a", 1_000), ("tick:b", 1_000), ("tick:c", 1_000)];
        let stored = [Some(every(1_000, Missed::Latest, true)), None, None];
        let (_, w, out) = run(5_000, &members, &stored, None);
        assert_eq!(w, vec![Write::DropTimers(Members::of(&[b"tick:a", b"tick:b", b"tick:c"]))]);
        assert_eq!((out.removed, out.enqueued.len()), (3, 0));
    }

    #[test]
    fn nothing_due_reads_no_record_and_reports_the_next_timer() {
        let mut t = Timers::new(keys(), 100);
        t.start();
        let step = t.feed(&[time(999), timers(&[("tick:s", 1_000), ("tick:t", 5_000)])]).unwrap();
        assert_eq!(step, Step::Done(Ticked::default()));
        assert_eq!(t.next_in_us(), Some(1_000.0));
    }

    #[test]
    fn members_of_another_kind_are_left_alone() {
        let mut t = Timers::new(keys(), 100);
        t.start();
        let step = t.feed(&[time(2_000), timers(&[("rate:l", 1_000)])]).unwrap();
        assert_eq!(step, Step::Done(Ticked::default()));
    }

    #[test]
    fn in_the_server_nothing_is_watched() {
        let mut t = Timers::in_server(keys(), 100);
        let Step::Read { watch, .. } = t.start() else { panic!() };
        assert!(watch.is_empty());
    }

    #[test]
    fn a_cron_tick_in_a_skipped_hour_runs_at_the_jump() {
        // 02:30 in Berlin on 2025-03-30 does not exist: it ticks at 03:00 CEST
        // (01:00 UTC), and the next tick is 02:30 CEST the next day (00:30 UTC).
        let rec = Record { cron: Some("30 2 * * *".into()), tz: "Europe/Berlin".into(), every_ms: None, ..every(1, Missed::Latest, false) };
        let jump = 1_743_296_400_000;
        let (_, w, _) = run(jump + 5, &[("tick:s", jump)], &[Some(rec.clone())], Some(&[false]));
        assert_eq!(new_rows(&w), vec![(tick_id(b"s", jump), jump)]);
        assert_eq!(moved(&w), vec![(1_743_381_000_000, b"tick:s".to_vec())]);
        // The repeated 02:30 of 2025-10-26 runs once, at its first pass (00:30 UTC).
        let first = 1_761_438_600_000;
        let (_, w, _) = run(first + 3_600_000 + 5, &[("tick:s", first)], &[Some(rec)], Some(&[false]));
        assert_eq!(new_rows(&w), vec![(tick_id(b"s", first), first)], "the second pass is no tick of its own");
    }

    /// One TIMERS call at `now` on the one timer `tick:s` at `timer` (no row
    /// exists): the ticks it enqueued and the timer it leaves (`None`: removed).
    fn sweep(now: i64, timer: i64, rec: &Record) -> (Vec<i64>, Option<i64>) {
        let mut t = Timers::new(keys(), 100);
        t.start();
        let mut step = t.feed(&[time(now), timers(&[("tick:s", timer)])]).unwrap();
        if let Step::Read { .. } = step {
            step = t.feed(&[Reply::Array(vec![bulk(&rec.to_json())])]).unwrap();
        }
        if let Step::Read { watch, .. } = step {
            step = t.feed(&rows(&vec![false; watch.len()])).unwrap();
        }
        let writes = match step {
            Step::Done(_) => return (vec![], Some(timer)),
            Step::Exec(w) => w,
            other => panic!("{other:?}"),
        };
        let ticks = new_rows(&writes).into_iter().map(|(_, due)| due).collect();
        (ticks, moved(&writes).first().map(|(at, _)| *at))
    }

    /// Sweeps from `from` to `to` every `step_ms`, and at `to` (a clock this test moves), the
    /// timer set as SCHEDULE sets it at `from` and fed back from each call: every
    /// tick enqueued, in order.
    fn walk(rec: &Record, from: &str, to: &str, step_ms: i64) -> Vec<String> {
        let (from, to) = (ms(from), ms(to));
        let mut timer = rec.spec().unwrap().next_after(from);
        let mut ticks = vec![];
        let mut now = from;
        while let Some(at) = timer {
            let (got, next) = sweep(now, at, rec);
            ticks.extend(got);
            timer = next;
            if now == to {
                break;
            }
            now = (now + step_ms).min(to);
        }
        ticks.iter().map(|&t| Timestamp::from_millisecond(t).unwrap().to_string()).collect()
    }

    fn ms(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_millisecond()
    }

    fn utc(times: &[&str]) -> Vec<String> {
        times.iter().map(|s| s.parse::<Timestamp>().unwrap().to_string()).collect()
    }

    fn cron(expr: &str, tz: &str, missed: Missed) -> Record {
        Record { cron: Some(expr.into()), tz: tz.into(), every_ms: None, ..every(1, missed, false) }
    }

    #[test]
    fn sweeps_through_each_change_night_enqueue_each_local_time_once() {
        // A clock moved a minute at a time through the nights of 2025's changes in
        // Berlin and New York, and again with sweeps 50 minutes apart (several
        // ticks due at once, `all`): the same ticks, the rules of SPEC §14. A
        // sweep that recomputed from the local time it last ran, or kept the
        // repeated hour's second pass, enqueues a tick twice; one that skipped
        // the gap loses the missing time's tick.
        let every_half_hour = [
            (
                "Europe/Berlin",
                "2025-03-30T00:10+01:00",
                "2025-03-30T04:10+02:00",
                &[
                    "2025-03-30T00:30+01:00",
                    "2025-03-30T01:00+01:00",
                    "2025-03-30T01:30+01:00",
                    "2025-03-30T03:00+02:00",
                    "2025-03-30T03:30+02:00",
                    "2025-03-30T04:00+02:00",
                ][..],
            ),
            (
                "Europe/Berlin",
                "2025-10-26T01:10+02:00",
                "2025-10-26T04:10+01:00",
                &[
                    "2025-10-26T01:30+02:00",
                    "2025-10-26T02:00+02:00",
                    "2025-10-26T02:30+02:00",
                    "2025-10-26T03:00+01:00",
                    "2025-10-26T03:30+01:00",
                    "2025-10-26T04:00+01:00",
                ][..],
            ),
            (
                "America/New_York",
                "2025-03-09T00:10-05:00",
                "2025-03-09T04:10-04:00",
                &[
                    "2025-03-09T00:30-05:00",
                    "2025-03-09T01:00-05:00",
                    "2025-03-09T01:30-05:00",
                    "2025-03-09T03:00-04:00",
                    "2025-03-09T03:30-04:00",
                    "2025-03-09T04:00-04:00",
                ][..],
            ),
            (
                "America/New_York",
                "2025-11-02T00:10-04:00",
                "2025-11-02T03:10-05:00",
                &[
                    "2025-11-02T00:30-04:00",
                    "2025-11-02T01:00-04:00",
                    "2025-11-02T01:30-04:00",
                    "2025-11-02T02:00-05:00",
                    "2025-11-02T02:30-05:00",
                    "2025-11-02T03:00-05:00",
                ][..],
            ),
        ];
        for (zone, from, to, expected) in every_half_hour {
            let rec = cron("*/30 * * * *", zone, Missed::All { max_missed: 100 });
            assert_eq!(walk(&rec, from, to, 60_000), utc(expected), "{zone} {from}, a sweep a minute");
            assert_eq!(walk(&rec, from, to, 50 * 60_000), utc(expected), "{zone} {from}, a sweep every 50 minutes");
        }
        // A daily time in the changed hour, over three days around each change.
        let daily = [
            (
                "30 2 * * *",
                "Europe/Berlin",
                "2025-03-29T00:00+01:00",
                ["2025-03-29T02:30+01:00", "2025-03-30T03:00+02:00", "2025-03-31T02:30+02:00"],
            ),
            (
                "30 2 * * *",
                "Europe/Berlin",
                "2025-10-25T00:00+02:00",
                ["2025-10-25T02:30+02:00", "2025-10-26T02:30+02:00", "2025-10-27T02:30+01:00"],
            ),
            (
                "30 2 * * *",
                "America/New_York",
                "2025-03-08T00:00-05:00",
                ["2025-03-08T02:30-05:00", "2025-03-09T03:00-04:00", "2025-03-10T02:30-04:00"],
            ),
            (
                "30 1 * * *",
                "America/New_York",
                "2025-11-01T00:00-04:00",
                ["2025-11-01T01:30-04:00", "2025-11-02T01:30-04:00", "2025-11-03T01:30-05:00"],
            ),
        ];
        for (expr, zone, from, expected) in daily {
            let rec = cron(expr, zone, Missed::Latest);
            let to = Timestamp::from_millisecond(ms(from) + 3 * 86_400_000 - 1).unwrap().to_string();
            assert_eq!(walk(&rec, from, &to, 60_000), utc(&expected), "{zone} {expr} from {from}");
        }
    }
}

#[cfg(test)]
mod promote_head_tests {
    use crate::names::Keys;
    use crate::protocol::conversation::{Conversation, Step};
    use crate::protocol::reply::Reply;
    use crate::sweep::{Kind, Outcome, Sweep};

    #[test]
    fn a_worker_promote_reads_the_timers_head_last_in_its_first_pipeline() {
        let keys = Keys::new(b"q");
        let mut s = Sweep::new(Kind::Promote, keys.clone(), 10).timers_head(true);
        let Step::Read { cmds, .. } = s.start() else { panic!() };
        let last = cmds.last().unwrap().to_args();
        assert_eq!(last, vec![&b"ZRANGE"[..], &keys.timers(), b"0", b"0", b"WITHSCORES"]);
        let time = Reply::Array(vec![Reply::Int(5), Reply::Int(0)]);
        let head = Reply::Array(vec![Reply::Bulk(b"tick:s".to_vec()), Reply::Bulk(b"7000".to_vec())]);
        let step = s.feed(&[time, Reply::Array(vec![]), Reply::Nil, head]).unwrap();
        assert_eq!(step, Step::Done(Outcome::Promoted(0)), "the promote's own plan is unchanged");
        assert_eq!(s.next_timer(), Some(7_000));
        let mut plain = Sweep::new(Kind::Promote, keys, 10);
        let Step::Read { cmds: plain_cmds, .. } = plain.start() else { panic!() };
        assert_eq!(plain_cmds.len() + 1, cmds.len(), "emq.promote reads no timers");
    }
}

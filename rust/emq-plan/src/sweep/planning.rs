//! Steps 5 and 6 of a sweep: the current group's plan (its endings' extra
//! reads, the trim of `dead`), the guess made while the server works, and the
//! outcome its `EXEC` applied.

use crate::error::{Error, Result};
use crate::jobs::ending::{Ending, Extras};
use crate::jobs::retention;
use crate::protocol::guard::confirm_empty;
use crate::protocol::reply::Reply;
use crate::sweep::conversation::{Part, Stage, Sweep};
use crate::sweep::types::{Kind, Outcome, Plan, Read, Row, Step, Types};
use crate::sweep::{promote, stalled};

impl Sweep {
    /// The current group as a read (the part is left empty: `part_back` puts it back).
    pub(super) fn part_as_read(&mut self) -> Read {
        let part = std::mem::take(&mut self.part);
        Read {
            now: self.read.now,
            now_us: self.read.now_us,
            ids: part.ids,
            scores: part.scores,
            rows: part.rows,
            lanes: part.lanes,
            types: self.read.types,
            next: self.read.next,
            extras: self.part_extras,
        }
    }

    fn part_back(&mut self, read: Read) {
        self.part = Part { ids: read.ids, scores: read.scores, rows: read.rows, lanes: read.lanes };
    }

    pub(super) fn plan_part(&mut self) -> Result<Step> {
        if self.part_extras.is_none() {
            // The first group of a call in groups reads the extras of every row
            // selected: bad input present at the call's start writes nothing (SPEC §9).
            let rows = if self.current == 0 && self.grouped_call() { &self.read.rows } else { &self.part.rows };
            let extras = Extras::of(rows.iter().filter_map(|r| match r {
                Row::Live { ending, .. } => Some(ending),
                Row::Ghost => None,
            }));
            if extras.needed() {
                let step = extras.step(&self.keys);
                self.stage = Stage::Extras(extras);
                return Ok(step);
            }
        }
        let read = self.part_as_read();
        let relied = match self.kind {
            Kind::Promote => vec![], // every lane it touches gets rows
            Kind::Stalled { max_stalled } => stalled::empty_lanes_relied_on(&read, max_stalled),
        };
        if relied.is_empty() {
            return self.build(&read);
        }
        // The part is planned once the lanes are confirmed empty.
        self.part_back(read);
        let step = confirm_empty(&self.keys, &relied);
        self.stage = Stage::Confirm(relied);
        Ok(step)
    }

    pub(super) fn build(&mut self, read: &Read) -> Result<Step> {
        self.guessed_right = false;
        let plan = match self.guess.take() {
            // The whole read: a later group's ZMSCORE may leave out members, so
            // the same rows can belong to other ids.
            Some((guessed, plan)) if guessed == *read => {
                self.guessed_right = true;
                plan
            }
            _ => self.plan(read)?,
        };
        if let Outcome::Stalled { dead, .. } = &plan.outcome {
            if !dead.is_empty() {
                let step = retention::dead_step(&self.keys, dead.len());
                self.stage = Stage::Dead(plan);
                return Ok(step);
            }
        }
        Ok(self.exec(plan))
    }

    /// The current group's transaction: the call's last, or with the next
    /// group's guarded reads behind it.
    fn exec(&mut self, plan: Plan) -> Step {
        self.outcome = Some(plan.outcome);
        self.stage = Stage::Exec;
        if self.current + 1 < self.groups.len() {
            let (watch, cmds) = self.group_reads(self.current + 1);
            Step::Group { writes: plan.writes, watch, cmds }
        } else {
            Step::Exec(plan.writes)
        }
    }

    /// The plan with the trim of `dead` its deaths call for.
    pub(super) fn dead_read(&mut self, mut plan: Plan, replies: &[Reply]) -> Result<Step> {
        let Outcome::Stalled { dead, .. } = &plan.outcome else {
            return Err(self.host_error("only a stalled check makes jobs dead"));
        };
        let trim = retention::trim_from_replies(self.verb(), &self.keys, self.read.now, dead, replies)?;
        plan.writes.extend(trim);
        Ok(self.exec(plan))
    }

    /// The write plan for `read`: a pure function of it.
    fn plan(&self, read: &Read) -> Result<Plan> {
        match self.kind {
            Kind::Promote => promote::plan(read),
            Kind::Stalled { max_stalled } => stalled::plan(read, max_stalled),
        }
    }

    /// The current group's outcome as its `EXEC` replies count it.
    pub(super) fn applied(&mut self, exec: &[Reply]) -> Result<Outcome> {
        let planned = self.outcome.take().ok_or_else(|| self.host_error("EXEC's replies were fed before a plan"))?;
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(self.verb(), message));
        }
        Ok(match planned {
            // ZREM comes first in the plan: its count is the reply.
            Outcome::Promoted(_) => Outcome::Promoted(exec.first().and_then(Reply::as_int).unwrap_or(0)),
            stalled @ Outcome::Stalled { .. } => stalled,
        })
    }

    /// The committed groups' outcome with one more group's.
    pub(super) fn merged(&mut self, more: Outcome) -> Outcome {
        match (self.done.take(), more) {
            (None, more) => more,
            (Some(Outcome::Promoted(a)), Outcome::Promoted(b)) => Outcome::Promoted(a.saturating_add(b)),
            (Some(Outcome::Stalled { mut recovered, mut dead }), Outcome::Stalled { recovered: r, dead: d }) => {
                recovered.extend(r);
                dead.extend(d);
                Outcome::Stalled { recovered, dead }
            }
            (Some(a), _) => a,
        }
    }

    /// While the server works: the plan for the likely read of the current
    /// group. The first group's rows are not known yet (every row live and flat
    /// with no stalls yet is likely); a later group's are, from step 2 (the same
    /// rows, if none changed, and no lanes: a lane's control and length change
    /// with the groups before). `build` takes the guess only when the read turns
    /// out exactly so; as the plan is a function of the read, it is then the
    /// plan `build` would make.
    pub(super) fn guess_plan(&mut self, first: bool) {
        let r = self.groups[self.current].clone();
        let rows = if first {
            vec![Row::Live { lane: None, stalls: 0, ending: Ending::default(), priority: 0 }; r.len()]
        } else {
            self.read.rows[r.clone()].to_vec()
        };
        if !first && !Self::lanes_of(&rows).is_empty() {
            return;
        }
        let read = Read {
            now: self.read.now,
            now_us: self.read.now_us,
            ids: self.read.ids[r.clone()].to_vec(),
            scores: self.read.scores[r].to_vec(),
            rows,
            lanes: vec![],
            types: Types::ALL,
            next: self.read.next,
            extras: None,
        };
        self.guess = self.plan(&read).ok().map(|p| (read, p));
    }
}

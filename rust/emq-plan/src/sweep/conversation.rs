//! A sweep (SPEC §5, §6) as a conversation: the host asks for [`Step`]s and
//! feeds back replies.
//!
//! 1. select: `TIME` and the first `batch` members of the zset, pipelined. The
//!    clock is read before the selection; members with a score above it are cut.
//! 2. rows: `WATCH` every selected row (sent ahead, `Step::Watch`: the reads are
//!    built while the server works on it), then read the head of the zset again (the
//!    selection was read before the watch: a selected member gone or scored anew is
//!    a conflict), each row's `lane` (and `stalls`), an `EXISTS` per
//!    group of rows (`rows::GROUP`), and the types of the queue's lists.
//! 3. (only when a group's count cannot tell its ghosts from its rows with no
//!    `lane`) `TYPE` of each of those.
//! 4. (only when lane rows were selected) `WATCH` each lane's control hash, read
//!    it and the lane's length; (only when a stalled check leaves a lane out of the
//!    ring because its list is empty) `WATCH` that list and read its length again.
//! 5. (only when a stalled check makes jobs dead) `WATCH P dead`, read the
//!    retention and the head of `dead`, for the trim (`retention`).
//! 6. `MULTI`, the write plan, `EXEC`.
//!
//! Nothing watches `schedule`, `active`, `pending` or the ring, and a lane list
//! only in step 4's case, so producers, claims of other ids and ring rotation
//! never abort a sweep (`crate::guard` says why that is enough, SPEC §9).

use crate::clock::parse_time;
use crate::cmd::Cmd;
use crate::conversation::Conversation;
use crate::error::{Error, Result};
use crate::guard::{confirm_empty, still_empty, still_selected, RE_READ_SLACK};
use crate::names::Keys;
use crate::numbers::field_int;
use crate::offer::{LaneCtl, CTL_FIELDS};
use crate::reply::Reply;
use crate::retention;
use crate::rows;
use crate::sweep::types::{Kind, Lane, Outcome, Plan, Read, Row, Step, Types};
use crate::sweep::{promote, stalled};

enum Stage {
    Select,
    /// The rows are watched; their reads are next.
    Watched,
    Rows,
    Types {
        unsure: Vec<usize>,
    },
    Lanes,
    /// The lane lists whose emptiness the plan relies on, watched and read again.
    Confirm(Vec<Vec<u8>>),
    /// The plan makes jobs dead: `dead` watched, the retention and the head of
    /// `dead` read, for the trim (`retention::dead_step`).
    Dead(Plan),
    Exec,
}

pub struct Sweep {
    kind: Kind,
    keys: Keys,
    batch: u64,
    stage: Stage,
    read: Read,
    scores: Vec<f64>,
    /// The planned reply, once the plan is built.
    outcome: Option<Outcome>,
    /// The plan for the likely read (`speculate`), and the rows it assumed.
    guess: Option<(Vec<Row>, Plan)>,
}

impl Sweep {
    pub fn new(kind: Kind, keys: Keys, batch: u64) -> Self {
        Sweep { kind, keys, batch, stage: Stage::Select, read: Read::default(), scores: vec![], outcome: None, guess: None }
    }

    /// The clock reading and what came next in the zset (see `Read::next`).
    pub fn timing(&self) -> (i64, Option<f64>) {
        (self.read.now, self.read.next)
    }

    pub fn verb(&self) -> &'static str {
        self.kind.verb()
    }

    fn zset(&self) -> Vec<u8> {
        match self.kind {
            Kind::Promote => self.keys.schedule(),
            Kind::Stalled { .. } => self.keys.active(),
        }
    }

    /// The row fields a sweep reads (SPEC §2: only these). Rows with none of them
    /// are told from ghosts by the `EXISTS` count (see `rows`).
    fn fields(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Promote => &["lane"],
            Kind::Stalled { .. } => &["lane", "stalls"],
        }
    }

    fn host_error(&self, what: &str) -> Error {
        Error::server(self.verb(), what)
    }

    fn check(&self, r: &Reply, key: &[u8]) -> Result<()> {
        match r {
            r if r.is_wrongtype() => Err(Error::layout(self.verb(), format!("{} has the wrong type", String::from_utf8_lossy(key)))),
            Reply::Error { message, .. } => Err(Error::server(self.verb(), message)),
            _ => Ok(()),
        }
    }

    fn selected(&mut self, replies: &[Reply]) -> Result<Step> {
        let [time, members] = replies else { return Err(self.host_error("select: two replies expected")) };
        self.check(members, &self.zset())?;
        self.read.now = parse_time(time).ok_or_else(|| self.host_error("TIME gave no clock"))?;
        let items = members.as_array().ok_or_else(|| self.host_error("ZRANGE gave no array"))?;
        for pair in items.chunks_exact(2) {
            let score = pair[1].as_bytes().and_then(|s| std::str::from_utf8(s).ok()?.parse::<f64>().ok());
            let (Some(id), Some(score)) = (pair[0].as_bytes(), score) else {
                return Err(self.host_error("ZRANGE gave no member and score"));
            };
            if score > self.read.now as f64 {
                self.read.next = Some(score);
                break;
            }
            self.read.ids.push(id.to_vec());
            self.scores.push(score);
        }
        if self.read.next.is_none() && items.len() / 2 >= self.batch as usize {
            self.read.next = Some(self.read.now as f64);
        }
        Ok(self.rows_step())
    }

    /// Step 2: the watch on the selected rows, sent ahead of the reads under it.
    fn rows_step(&mut self) -> Step {
        if self.read.ids.is_empty() {
            return Step::Done(self.empty());
        }
        self.stage = Stage::Watched;
        Step::Watch(self.read.ids.iter().map(|id| self.keys.job(id)).collect())
    }

    /// The reads under the rows' watch.
    fn rows_reads(&mut self) -> Step {
        // The selection again: the head of the zset, as far as the members selected
        // and `RE_READ_SLACK` more (a range costs the server less than `ZMSCORE` of each
        // member).
        let last = (self.read.ids.len() - 1 + RE_READ_SLACK).to_string();
        let mut cmds = vec![Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(last).arg("WITHSCORES")];
        cmds.extend(rows::reads(&self.keys, &self.read.ids, self.fields()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.pending()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.ring()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.wake()));
        if matches!(self.kind, Kind::Stalled { .. }) {
            cmds.push(Cmd::new("ZCARD").arg(self.keys.dead()));
        }
        self.stage = Stage::Rows;
        Step::Read { watch: vec![], cmds }
    }

    fn empty(&self) -> Outcome {
        match self.kind {
            Kind::Promote => Outcome::Promoted(0),
            Kind::Stalled { .. } => Outcome::Stalled { recovered: vec![], dead: vec![] },
        }
    }

    fn rows_read(&mut self, replies: &[Reply]) -> Result<Step> {
        let n = self.read.ids.len();
        let extra = 3 + usize::from(matches!(self.kind, Kind::Stalled { .. }));
        let reads = rows::reply_count(n);
        if replies.len() != 1 + reads + extra {
            return Err(self.host_error("rows: wrong number of replies"));
        }
        if !replies[0].as_array().is_some_and(|a| still_selected(a, &self.read.ids, &self.scores)) {
            return Err(Error::conflict(self.verb(), "the selection changed before the watch"));
        }
        let (fields, unsure) = rows::parse(self.verb(), &self.keys, &self.read.ids, &replies[1..=reads], self.fields().len())?;
        self.read.rows = fields.into_iter().map(Self::row).collect();
        let t = &replies[1 + reads..];
        self.read.types = Types {
            pending: !t[0].is_wrongtype(),
            ring: !t[1].is_wrongtype(),
            wake: !t[2].is_wrongtype(),
            dead: !t.get(3).is_some_and(Reply::is_wrongtype),
        };
        if !unsure.is_empty() {
            let cmds = rows::type_reads(&self.keys, &self.read.ids, &unsure);
            self.stage = Stage::Types { unsure };
            return Ok(Step::Read { watch: vec![], cmds });
        }
        self.lanes_step()
    }

    /// A row from its fields (`lane`, then `stalls` for a stalled check).
    fn row(fields: Option<rows::Fields>) -> Row {
        match fields {
            None => Row::Ghost,
            Some(mut f) => {
                let stalls = f.get(1).and_then(|s| s.as_deref()).and_then(field_int).unwrap_or(0);
                Row::Live { lane: f.swap_remove(0), stalls }
            }
        }
    }

    fn types_read(&mut self, unsure: &[usize], replies: &[Reply]) -> Result<Step> {
        let mut fields: Vec<Option<rows::Fields>> = self
            .read
            .rows
            .iter()
            .map(|r| match r {
                Row::Ghost => None,
                Row::Live { .. } => Some(vec![]),
            })
            .collect();
        rows::resolve(self.verb(), &self.keys, &self.read.ids, &mut fields, unsure, replies)?;
        for (row, f) in self.read.rows.iter_mut().zip(fields) {
            if f.is_none() {
                *row = Row::Ghost;
            }
        }
        self.lanes_step()
    }

    fn lanes_step(&mut self) -> Result<Step> {
        for row in &self.read.rows {
            if let Row::Live { lane: Some(l), .. } = row {
                if !self.read.lanes.iter().any(|x| &x.name == l) {
                    self.read.lanes.push(Lane { name: l.clone(), ..Default::default() });
                }
            }
        }
        if self.read.lanes.is_empty() {
            return self.build();
        }
        let watch = self.read.lanes.iter().map(|l| self.keys.lanectl(&l.name)).collect();
        let mut cmds = Vec::with_capacity(2 * self.read.lanes.len());
        for l in &self.read.lanes {
            cmds.push(Cmd::new("HMGET").arg(self.keys.lanectl(&l.name)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(self.keys.lane(&l.name)));
        }
        self.stage = Stage::Lanes;
        Ok(Step::Read { watch, cmds })
    }

    fn lanes_read(&mut self, replies: &[Reply]) -> Result<Step> {
        if replies.len() != 2 * self.read.lanes.len() {
            return Err(self.host_error("lanes: wrong number of replies"));
        }
        for (i, pair) in replies.chunks_exact(2).enumerate() {
            let name = self.read.lanes[i].name.clone();
            self.check(&pair[0], &self.keys.lanectl(&name))?;
            self.check(&pair[1], &self.keys.lane(&name))?;
            self.read.lanes[i].ctl = LaneCtl::from_reply(&pair[0]);
            self.read.lanes[i].len = pair[1].as_int().unwrap_or(0);
        }
        let relied = match self.kind {
            Kind::Promote => vec![], // every lane it touches gets rows
            Kind::Stalled { max_stalled } => stalled::empty_lanes_relied_on(&self.read, max_stalled),
        };
        if relied.is_empty() {
            return self.build();
        }
        let step = confirm_empty(&self.keys, &relied);
        self.stage = Stage::Confirm(relied);
        Ok(step)
    }

    fn build(&mut self) -> Result<Step> {
        let plan = match self.guess.take() {
            Some((rows, plan)) if rows == self.read.rows && self.read.lanes.is_empty() && self.read.types == Types::ALL => plan,
            _ => self.plan(&self.read)?,
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

    fn exec(&mut self, plan: Plan) -> Step {
        self.outcome = Some(plan.outcome);
        self.stage = Stage::Exec;
        Step::Exec(plan.writes)
    }

    /// The plan with the trim of `dead` its deaths call for.
    fn dead_read(&mut self, mut plan: Plan, replies: &[Reply]) -> Result<Step> {
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
            Kind::Promote => promote::plan(&self.keys, read),
            Kind::Stalled { max_stalled } => stalled::plan(&self.keys, read, max_stalled),
        }
    }

    /// While the server runs the rows step: the plan for the likely read, every
    /// row live and flat with no stalls yet, each list of its type. `build` takes
    /// it only when the read turns out exactly so; as the plan is a function of
    /// the read, it is then the plan `build` would make.
    fn guess_plan(&mut self) {
        let rows = vec![Row::Live { lane: None, stalls: 0 }; self.read.ids.len()];
        let ids = std::mem::take(&mut self.read.ids);
        let read = Read { now: self.read.now, ids, rows, lanes: vec![], types: Types::ALL, next: self.read.next };
        let plan = self.plan(&read);
        self.read.ids = read.ids;
        self.guess = plan.ok().map(|p| (read.rows, p));
    }
}

impl Conversation for Sweep {
    type Out = Outcome;

    fn verb(&self) -> &'static str {
        Sweep::verb(self)
    }

    /// The first step: the clock and the selection.
    fn start(&mut self) -> Step {
        self.stage = Stage::Select;
        let range = Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg((self.batch - 1).to_string()).arg("WITHSCORES");
        Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME"), range] }
    }

    /// Feeds the replies of a `Read` step.
    fn feed(&mut self, replies: &[Reply]) -> Result<Step> {
        match std::mem::replace(&mut self.stage, Stage::Exec) {
            Stage::Select => self.selected(replies),
            Stage::Watched if replies.is_empty() => Ok(self.rows_reads()),
            Stage::Watched => Err(self.host_error("rows: a watch has no replies to feed")),
            Stage::Rows => self.rows_read(replies),
            Stage::Types { unsure } => self.types_read(&unsure, replies),
            Stage::Lanes => self.lanes_read(replies),
            Stage::Confirm(lanes) => {
                if !still_empty(replies, lanes.len()) {
                    return Err(Error::conflict(self.verb(), "a lane it found empty got work before the watch"));
                }
                self.build()
            }
            Stage::Dead(plan) => self.dead_read(plan, replies),
            Stage::Exec => Err(self.host_error("a read was fed after the plan was built")),
        }
    }

    fn speculate(&mut self) {
        if matches!(self.stage, Stage::Rows) && !self.read.ids.is_empty() {
            self.guess_plan();
        }
    }

    /// Feeds `EXEC`'s replies; the outcome counts from them.
    fn finish(&mut self, exec: &[Reply]) -> Result<Outcome> {
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
}

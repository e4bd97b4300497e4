//! A sweep (SPEC §5, §6) as a conversation: the host asks for [`Step`]s and
//! feeds back replies.
//!
//! 1. select: `TIME` and the first `batch` members of the zset, pipelined. The
//!    clock is read before the selection; members with a score above it are cut.
//!    (A promote may read them without scores and probe its first and last
//!    member instead: `Sweep::bare_selection`; and a backlog's promote may read
//!    them with their rows under its watch, in one `SORT_RO`, so that steps 2 and
//!    3's reads are done: `Sweep::sorted_selection`.)
//! 2. rows: `WATCH` (a promote: `P promotions`, which every promote bumps; a
//!    stalled check: its first group's lease marks, and the rows of its members
//!    of the current second; `crate::protocol::guard` says why; sent in front of the
//!    reads);
//!    then the head of the zset again (a member of the first group gone or scored
//!    anew is a conflict), every selected row's `lane` (and `stalls`), an `EXISTS`
//!    per group of rows (`rows::GROUP`), and the types of the queue's lists: every
//!    input check of the call is made here, before anything is written.
//! 3. (only when a group's count cannot tell its ghosts from its rows with no
//!    `lane`) `TYPE` of each of those.
//! 4. (only when lane rows were selected) `WATCH` the control hash of each lane
//!    of the first group, read every lane's control and length; (only when a
//!    stalled check leaves a lane out of the ring because its list is empty)
//!    `WATCH` that list and read its length again.
//! 5. (only when a stalled check's rows have waiters or a cancel, SPEC §13)
//!    the inboxes' types, and for a cancel the retention of done rows and
//!    `P cancelled`'s type (`jobs::ending::Extras`); (only when a stalled
//!    check makes jobs dead) `WATCH P dead`, read the retention and the head
//!    of `dead`, for the trim (`retention`).
//! 6. `MULTI`, the write plan, `EXEC`. (A call of one transaction that kills no
//!    one may have its guessed plan queued behind step 2's reads:
//!    `Conversation::expected_exec`.)
//!
//! **Groups** (SPEC §9). A call may apply its selection as consecutive
//! transactions of at most `group` rows, so that a server whose `WATCH` cost
//! grows with the keys watched (Redis 7, Valkey 8) stays linear in the rows
//! (automatically, only a stalled check whose watch would pass `watch_cap` keys).
//! Steps 2 to 5 read the whole selection, so every check is made before the
//! first `EXEC`; the first group is planned from them. Each later group's
//! transaction goes out with the next group's guarded reads behind it
//! (`Step::Group`): `WATCH` its marks and rows (or `P promotions`) and the control of its
//! lanes, `ZMSCORE` of its members (one taken meanwhile, or scored anew, is no
//! longer there to take: it is left out), its rows and its lanes again. A
//! group's plan is the plan of a call taking just that group, under the call's
//! one clock reading; an aborted group is read and planned again; the reply
//! covers every group.
//!
//! **In the server** (`Sweep::in_server`: the module host, where nothing runs
//! between a command's reads and its writes) there is no guard: step 2's watch
//! and the re-read under it are left out; every other read and the plan are the
//! same.
//!
//! Nothing watches `schedule`, `active`, `pending` or the ring, and a lane list
//! only in step 4's case, so producers, claims of other ids and ring rotation
//! never abort a sweep (`crate::protocol::guard` says why that is enough, SPEC §9).
//!
//! This module holds the sweep's state and the `Conversation` a host drives;
//! the steps live by role: `selection` (1), `rows_and_lanes` (2 to 4),
//! `groups` (the later groups), `planning` (5 and 6).

use std::ops::Range;

use crate::error::{Error, Result};
use crate::jobs::ending::{Extras, ExtrasRead};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::Conversation;
use crate::protocol::guard::still_empty;
use crate::protocol::reply::Reply;
use crate::protocol::write::Write;
use crate::sweep::types::{Kind, Lane, Outcome, Plan, Read, Row, Step};

pub(super) enum Stage {
    Select,
    /// A bare selection (`bare_selection`): its members and three probes.
    SelectBare,
    /// A sorted selection (`sorted_selection`): the bare one with every row's
    /// fields and the lists' types, under the watch.
    SelectSorted,
    /// A bare selection that could not tell where `now` cuts it, read again
    /// with its scores.
    Rescored,
    Rows,
    Types {
        unsure: Vec<usize>,
    },
    Lanes,
    /// A later group's guarded reads.
    Group,
    GroupTypes {
        unsure: Vec<usize>,
    },
    /// The lane lists whose emptiness the plan relies on, watched and read again.
    Confirm(Vec<Vec<u8>>),
    /// The current group's endings need more (`jobs::ending::Extras`): read.
    Extras(Extras),
    /// The plan makes jobs dead: `dead` watched, the retention and the head of
    /// `dead` read, for the trim (`retention::dead_step`).
    Dead(Plan),
    Exec,
}

/// The group being applied: its members that are still there to take, their
/// rows and lanes as read under its watch.
#[derive(Default)]
pub(super) struct Part {
    pub(super) ids: Vec<Vec<u8>>,
    pub(super) scores: Vec<f64>,
    pub(super) rows: Vec<Row>,
    pub(super) lanes: Vec<Lane>,
}

pub struct Sweep {
    pub(super) kind: Kind,
    pub(super) keys: Keys,
    pub(super) batch: u64,
    /// Most rows a transaction applies.
    pub(super) group: usize,
    pub(super) stage: Stage,
    /// The whole selection, its rows, every lane and the lists' types, as first read.
    pub(super) read: Read,
    /// A stalled check's automatic grouping where `WATCH` grows with the keys
    /// watched: one transaction when its watch (`guard::stalled_watch`) has at
    /// most this many keys, else groups of at most this many rows.
    pub(super) watch_cap: Option<usize>,
    /// A promote's reading of `P promotions` beside its selection (`GET`: nil or
    /// a count), read again under the watch (see `rows_reads`).
    pub(super) promotions: Option<Reply>,
    pub(super) groups: Vec<Range<usize>>,
    /// The group being applied.
    pub(super) current: usize,
    pub(super) part: Part,
    /// What the current group's endings' extra step read, once it has.
    pub(super) part_extras: Option<ExtrasRead>,
    /// What the committed groups took.
    pub(super) done: Option<Outcome>,
    /// The current group's planned reply, once its plan is built.
    pub(super) outcome: Option<Outcome>,
    /// The plan for the likely read (`speculate`), and the read it assumed.
    pub(super) guess: Option<(Read, Plan)>,
    /// Whether the plan `build` made last is the guess (`exec_as_expected`).
    pub(super) guessed_right: bool,
    /// Times the current group was aborted and taken up again.
    pub(super) retries: u32,
    /// Run inside the server (`in_server`): no watch, no re-read under it.
    pub(super) in_server: bool,
    /// A promote reads its selection without scores (`bare_selection`).
    pub(super) bare: bool,
    /// ... and its rows by `SORT_RO` under the watch (`sorted_selection`).
    pub(super) sorted: bool,
    /// The server refused the `SORT_RO` (`sort_refused`).
    pub(super) sort_refused: bool,
    /// A worker's promote also reads the head of `P timers` (`timers_head`),
    /// and what it read.
    pub(super) timers_head: bool,
    pub(super) timers_next: Option<i64>,
    /// Whether the rows' `priority` is read: a stalled check always; a promote
    /// once `P promotions`, read beside its selection, says the queue uses
    /// priorities (`offer::levels_in_use`), so one that uses none reads `lane` only.
    pub(super) levels: bool,
    /// A sorted selection's `SORT_RO` gets `priority` too (`levels_hint`).
    pub(super) levels_hint: bool,
}

impl Sweep {
    /// A sweep applied in one transaction.
    pub fn new(kind: Kind, keys: Keys, batch: u64) -> Self {
        Self::grouped(kind, keys, batch, usize::MAX)
    }

    /// A sweep applied in transactions of at most `group` rows (at least 1).
    pub fn grouped(kind: Kind, keys: Keys, batch: u64, group: usize) -> Self {
        Sweep {
            kind,
            keys,
            batch,
            group: group.max(1),
            stage: Stage::Select,
            read: Read::default(),
            watch_cap: None,
            promotions: None,
            groups: vec![],
            current: 0,
            part: Part::default(),
            part_extras: None,
            done: None,
            outcome: None,
            guess: None,
            guessed_right: false,
            retries: 0,
            in_server: false,
            bare: false,
            sorted: false,
            sort_refused: false,
            timers_head: false,
            timers_next: None,
            levels: !matches!(kind, Kind::Promote),
            levels_hint: false,
        }
    }

    /// A sweep run inside the server, by a host whose reads and writes nothing
    /// can come between (a module command): one transaction, and no guard, so
    /// neither the watch nor the re-read under it (the rest is the same plan).
    pub fn in_server(kind: Kind, keys: Keys, batch: u64) -> Self {
        Sweep { in_server: true, ..Self::new(kind, keys, batch) }
    }

    /// A promote of one transaction reads its selection without the members'
    /// scores: the members, then the first member's score, the last one's (by
    /// rank: `N-1`, or `-1` when fewer are there) and `P promotions`. Where the
    /// last member is due, every member is (the zset is in score order); where the
    /// first is not, none is. Only a selection that `now` cuts in the middle is
    /// read again with its scores (one more round trip). For a batch large
    /// enough to be a backlog's, whose members are all due: the server prints
    /// no scores (Redis before 7.2 formats each with `%.17g`) and the client
    /// parses none. The host decides (`emq-host/src/sweeps.rs`).
    ///
    /// The probes are read after the members, and a producer may insert between
    /// them: a probe is believed only when it names the member the selection
    /// ended (or began) with, so the score is that member's. A member's score does
    /// not change while it is in `schedule`, and only a promote takes a member out
    /// (`P promotions`, read again under the watch), so the selection stands as
    /// read at its own instant, as the scored one does.
    #[must_use]
    pub fn bare_selection(mut self, on: bool) -> Self {
        self.bare = on && self.kind == Kind::Promote && !self.in_server && self.group as u64 >= self.batch;
        self
    }

    /// A bare selection (`bare_selection`, called first) that reads every
    /// member's row with it, in one command the server loops over itself:
    /// `WATCH P promotions`, then `TIME`, `SORT_RO P schedule BY nosort LIMIT 0
    /// batch GET # GET P job:*->state GET P job:*->lane` (and `GET P
    /// job:*->priority` with `levels_hint`), the three probes, `P
    /// promotions` and the lists' types. Everything is read under the watch, so
    /// no second read is needed: a call of two round trips where the bare one
    /// takes three, and one command for a thousand rows where it sends a
    /// thousand `HGET`s and the `EXISTS` counts. A row with neither field (a
    /// ghost, a key of another type, or a hash without `state`) gets its `TYPE`
    /// (step 3). A selection cut by `now` is read again with scores and goes on
    /// as a bare one.
    ///
    /// Not where the queue's prefix holds `*` (the pattern would cut there). A
    /// server may refuse the `GET` patterns: a user without access to every key
    /// (Redis 7 and Valkey ask that of `SORT … GET`), or a cluster that cannot
    /// tell the pattern's slot; the call then reads as a bare one
    /// (`sort_refused` tells the host to stop asking). The read-only form: `SORT`
    /// is flagged a write (its `STORE`), which a full server refuses. It converts a
    /// small zset to its skiplist form: the host asks only for a backlog's
    /// promote, whose `schedule` is that large already.
    #[must_use]
    pub fn sorted_selection(mut self, on: bool) -> Self {
        self.sorted = on && self.bare && !self.keys.prefix.contains(&b'*');
        self
    }

    /// A sorted selection's `SORT_RO` also gets every row's `priority`: the
    /// host's guess that the queue uses priorities (the last promote on its
    /// connection found it so). Without it, a selection of a queue that does is
    /// read again as a bare one (`P promotions` tells, in the same pipeline).
    #[must_use]
    pub fn levels_hint(mut self, on: bool) -> Self {
        self.levels_hint = on;
        self
    }

    /// Whether this promote found the queue using priorities (`levels_hint`).
    pub fn levels_in_use(&self) -> bool {
        self.levels
    }

    /// A worker's promote (its beat form) reads the head of `P timers` in its
    /// first pipeline, after the selection's reads (`ZRANGE P timers 0 0
    /// WITHSCORES`: one cheap read, an empty one when no schedule is in use), so
    /// that the beat runs TIMERS only when a timer is due and parks no longer
    /// than the next one (`next_timer`). The plan is the promote's, unchanged.
    #[must_use]
    pub fn timers_head(mut self, on: bool) -> Self {
        self.timers_head = on && self.kind == Kind::Promote;
        self
    }

    /// The time of the first member of `P timers`, as `timers_head` read it
    /// (`None`: none, or not read).
    pub fn next_timer(&self) -> Option<i64> {
        self.timers_next
    }

    /// How long after the clock reading the first timer falls due, in µs (0:
    /// due now, TIMERS has work; `None`: no timer), counted as `next_in_us`.
    pub fn next_timer_in_us(&self) -> Option<f64> {
        self.timers_next.map(|t| ((t - self.read.now) as f64 * 1000.0 - self.read.now_us as f64).max(0.0))
    }

    /// Whether the server refused this call's `SORT_RO` (`sorted_selection`).
    pub fn sort_refused(&self) -> bool {
        self.sort_refused
    }

    /// Groups only where the call's watch would pass `cap` keys (see `watch_cap`).
    #[must_use]
    pub fn watch_cap(mut self, cap: Option<usize>) -> Self {
        self.watch_cap = cap.map(|c| c.max(1));
        self
    }

    /// The clock reading and what came next in the zset (see `Read::next`).
    pub fn timing(&self) -> (i64, Option<f64>) {
        (self.read.now, self.read.next)
    }

    /// How long after the clock reading `timing`'s next score falls due, in µs
    /// (`None`: nothing next; 0: the batch was all due). Counted from the
    /// reading's own µs: from its millisecond instead, a worker parked until
    /// then would wake up to 1 ms late.
    pub fn next_in_us(&self) -> Option<f64> {
        self.read.next.map(|n| ((n - self.read.now as f64) * 1000.0 - self.read.now_us as f64).max(0.0))
    }

    pub fn verb(&self) -> &'static str {
        self.kind.verb()
    }

    pub(super) fn zset(&self) -> Vec<u8> {
        match self.kind {
            Kind::Promote => self.keys.schedule(),
            Kind::Stalled { .. } => self.keys.active(),
        }
    }

    /// The first `batch` members of the zset, with their scores.
    pub(super) fn range(&self) -> Cmd {
        Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(self.batch.saturating_sub(1).to_string()).arg("WITHSCORES")
    }

    /// The row fields a sweep reads (SPEC §2: only these). Rows with none of them
    /// are told from ghosts by the `EXISTS` count (see `rows`).
    pub(super) fn fields(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Promote if self.levels => &["lane", "priority"],
            Kind::Promote => &["lane"],
            Kind::Stalled { .. } => &["lane", "stalls", "wait", "cancel", "keep", "priority"],
        }
    }

    pub(super) fn host_error(&self, what: &str) -> Error {
        Error::server(self.verb(), what)
    }

    pub(super) fn check(&self, r: &Reply, key: &[u8]) -> Result<()> {
        match r {
            r if r.is_wrongtype() => Err(Error::layout(self.verb(), format!("{} has the wrong type", String::from_utf8_lossy(key)))),
            Reply::Error { message, .. } => Err(Error::server(self.verb(), message)),
            _ => Ok(()),
        }
    }

    pub(super) fn empty(&self) -> Outcome {
        match self.kind {
            Kind::Promote => Outcome::Promoted(0),
            Kind::Stalled { .. } => Outcome::Stalled { recovered: vec![], dead: vec![] },
        }
    }

    pub(super) fn grouped_call(&self) -> bool {
        self.groups.len() > 1
    }

    /// Whether the first read checks `P retention`'s type: a stalled check in
    /// groups that may kill (a later group's trim reads it).
    pub(super) fn checks_retention(&self) -> bool {
        self.grouped_call() && matches!(self.kind, Kind::Stalled { max_stalled: Some(_) })
    }

    fn feed_stage(&mut self, replies: &[Reply]) -> Result<Step> {
        match std::mem::replace(&mut self.stage, Stage::Exec) {
            Stage::Select => self.selected(replies),
            Stage::SelectBare => self.selected_bare(replies),
            Stage::SelectSorted => self.selected_sorted(replies),
            Stage::Rescored => match replies {
                [members] => {
                    self.check(members, &self.zset())?;
                    self.scored(members)
                }
                _ => Err(self.host_error("select: wrong number of replies")),
            },
            Stage::Rows => self.rows_read(replies),
            Stage::Types { unsure } => self.types_read(&unsure, replies),
            Stage::Lanes => self.lanes_read(replies),
            Stage::Group => self.group_read(replies),
            Stage::GroupTypes { unsure } => self.group_types_read(&unsure, replies),
            Stage::Confirm(lanes) => {
                if still_empty(replies, lanes.len()) {
                    let read = self.part_as_read();
                    self.build(&read)
                } else if self.done.is_some() || self.current > 0 {
                    self.retry_group()
                } else {
                    Err(Error::conflict(self.verb(), "a lane it found empty got work before the watch"))
                }
            }
            Stage::Extras(extras) => {
                self.part_extras = Some(extras.parse(self.verb(), &self.keys, replies)?);
                self.plan_part()
            }
            Stage::Dead(plan) => self.dead_read(plan, replies),
            Stage::Exec => Err(self.host_error("a read was fed after the plan was built")),
        }
    }
}

impl Conversation for Sweep {
    type Out = Outcome;

    fn verb(&self) -> &'static str {
        Sweep::verb(self)
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The first step: the clock and the selection.
    fn start(&mut self) -> Step {
        let mut step = self.select();
        if let (true, Step::Read { cmds, .. }) = (self.timers_head, &mut step) {
            cmds.push(Cmd::new("ZRANGE").arg(self.keys.timers()).arg("0").arg("0").arg("WITHSCORES"));
        }
        step
    }

    /// Feeds the replies of a `Read` step.
    fn feed(&mut self, replies: &[Reply]) -> Result<Step> {
        let selecting = matches!(self.stage, Stage::Select | Stage::SelectBare | Stage::SelectSorted);
        let replies = match replies {
            [selection @ .., head] if selecting && self.timers_head => {
                self.check(head, &self.keys.timers())?;
                self.timers_next = head.as_array().and_then(|a| a.get(1)).and_then(Reply::as_score).map(|s| s as i64);
                selection
            }
            _ => replies,
        };
        self.feed_stage(replies)
    }

    fn speculate(&mut self) {
        match self.stage {
            Stage::Rows if !self.groups.is_empty() => self.guess_plan(true),
            Stage::Exec if self.current + 1 < self.groups.len() && self.outcome.is_some() => {
                // A group's EXEC and the next group's reads are on the wire.
                self.current += 1;
                self.guess_plan(false);
                self.current -= 1;
            }
            _ => {}
        }
    }

    /// The guessed plan of a call of one transaction that kills no one (a
    /// death adds the trim's reads before `EXEC`).
    fn expected_exec(&self) -> Option<&[Write]> {
        match (&self.stage, &self.guess) {
            (Stage::Rows, Some((_, plan))) if self.groups.len() == 1 => match &plan.outcome {
                Outcome::Stalled { dead, .. } if !dead.is_empty() => None,
                _ => Some(&plan.writes),
            },
            _ => None,
        }
    }

    fn exec_as_expected(&self) -> bool {
        self.guessed_right && matches!(self.stage, Stage::Exec) && self.groups.len() == 1
    }

    fn committed(&mut self, exec: Option<&[Reply]>) -> Result<()> {
        match exec {
            Some(exec) => {
                let out = self.applied(exec)?;
                let merged = self.merged(out);
                self.done = Some(merged);
                self.current += 1;
                self.retries = 0;
                self.stage = Stage::Group;
            }
            None => {
                self.outcome = None;
                self.guess = None;
            }
        }
        Ok(())
    }

    fn aborted(&mut self) -> Option<Step> {
        if self.done.is_none() && self.current == 0 {
            return None; // nothing applied yet: the call starts again
        }
        self.guess = None;
        self.retry_group().ok()
    }

    fn applied_so_far(&mut self) -> Option<Outcome> {
        self.done.take()
    }

    /// A sorted selection's `SORT_RO` refused for what it asks (`ERR`: its `GET`
    /// patterns, to a user without every key or in a cluster; `NOPERM`: a user
    /// without `SORT_RO`): the call reads as a bare one instead.
    fn reads_error(&self, index: usize, reply: &Reply) -> bool {
        matches!(self.stage, Stage::SelectSorted) && index == 1 && Self::sort_refusal(reply)
    }

    /// Feeds the last `EXEC`'s replies; the outcome covers every group.
    fn finish(&mut self, exec: &[Reply]) -> Result<Outcome> {
        let out = self.applied(exec)?;
        Ok(self.merged(out))
    }
}

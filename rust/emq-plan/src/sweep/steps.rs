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

use std::ops::Range;

use crate::clock::parse_clock;
use crate::error::{Error, Result};
use crate::jobs::ending::{Ending, Extras, ExtrasRead};
use crate::jobs::retention;
use crate::lanes::offer::{level, levels_in_use, LaneCtl, CTL_FIELDS};
use crate::names::Keys;
use crate::numbers::field_int;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::Conversation;
use crate::protocol::guard::{confirm_empty, stalled_watch, still_empty, still_selected, RE_READ_SLACK};
use crate::protocol::reply::Reply;
use crate::protocol::rows;
use crate::protocol::write::Write;
use crate::sweep::types::{Kind, Lane, Outcome, Plan, Read, Row, Step, Types};
use crate::sweep::{promote, stalled};

/// How many times one group of a call is read and planned again after the guard
/// aborted it before the call ends with the groups it has applied.
pub const GROUP_ATTEMPTS: u32 = 32;

enum Stage {
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
struct Part {
    ids: Vec<Vec<u8>>,
    scores: Vec<f64>,
    rows: Vec<Row>,
    lanes: Vec<Lane>,
}

pub struct Sweep {
    kind: Kind,
    keys: Keys,
    batch: u64,
    /// Most rows a transaction applies.
    group: usize,
    stage: Stage,
    /// The whole selection, its rows, every lane and the lists' types, as first read.
    read: Read,
    /// A stalled check's automatic grouping where `WATCH` grows with the keys
    /// watched: one transaction when its watch (`guard::stalled_watch`) has at
    /// most this many keys, else groups of at most this many rows.
    watch_cap: Option<usize>,
    /// A promote's reading of `P promotions` beside its selection (`GET`: nil or
    /// a count), read again under the watch (see `rows_reads`).
    promotions: Option<Reply>,
    groups: Vec<Range<usize>>,
    /// The group being applied.
    current: usize,
    part: Part,
    /// What the current group's endings' extra step read, once it has.
    part_extras: Option<ExtrasRead>,
    /// What the committed groups took.
    done: Option<Outcome>,
    /// The current group's planned reply, once its plan is built.
    outcome: Option<Outcome>,
    /// The plan for the likely read (`speculate`), and the read it assumed.
    guess: Option<(Read, Plan)>,
    /// Whether the plan `build` made last is the guess (`exec_as_expected`).
    guessed_right: bool,
    /// Times the current group was aborted and taken up again.
    retries: u32,
    /// Run inside the server (`in_server`): no watch, no re-read under it.
    in_server: bool,
    /// A promote reads its selection without scores (`bare_selection`).
    bare: bool,
    /// ... and its rows by `SORT_RO` under the watch (`sorted_selection`).
    sorted: bool,
    /// The server refused the `SORT_RO` (`sort_refused`).
    sort_refused: bool,
    /// A worker's promote also reads the head of `P timers` (`timers_head`),
    /// and what it read.
    timers_head: bool,
    timers_next: Option<i64>,
    /// Whether the rows' `priority` is read: a stalled check always; a promote
    /// once `P promotions`, read beside its selection, says the queue uses
    /// priorities (`offer::levels_in_use`), so one that uses none reads `lane` only.
    levels: bool,
    /// A sorted selection's `SORT_RO` gets `priority` too (`levels_hint`).
    levels_hint: bool,
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

    fn zset(&self) -> Vec<u8> {
        match self.kind {
            Kind::Promote => self.keys.schedule(),
            Kind::Stalled { .. } => self.keys.active(),
        }
    }

    /// The first `batch` members of the zset, with their scores.
    fn range(&self) -> Cmd {
        Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(self.batch.saturating_sub(1).to_string()).arg("WITHSCORES")
    }

    /// The row fields a sweep reads (SPEC §2: only these). Rows with none of them
    /// are told from ghosts by the `EXISTS` count (see `rows`).
    fn fields(&self) -> &'static [&'static str] {
        match self.kind {
            Kind::Promote if self.levels => &["lane", "priority"],
            Kind::Promote => &["lane"],
            Kind::Stalled { .. } => &["lane", "stalls", "wait", "cancel", "keep", "priority"],
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

    fn empty(&self) -> Outcome {
        match self.kind {
            Kind::Promote => Outcome::Promoted(0),
            Kind::Stalled { .. } => Outcome::Stalled { recovered: vec![], dead: vec![] },
        }
    }

    fn grouped_call(&self) -> bool {
        self.groups.len() > 1
    }

    /// Whether the first read checks `P retention`'s type: a stalled check in
    /// groups that may kill (a later group's trim reads it).
    fn checks_retention(&self) -> bool {
        self.grouped_call() && matches!(self.kind, Kind::Stalled { max_stalled: Some(_) })
    }

    // -- 1. the selection --------------------------------------------------------

    fn selected(&mut self, replies: &[Reply]) -> Result<Step> {
        let (time, members) = match (self.kind, replies) {
            (Kind::Promote, [time, members, promotions]) => {
                self.promoted_so_far(promotions)?;
                (time, members)
            }
            (Kind::Stalled { .. }, [time, members]) => (time, members),
            _ => return Err(self.host_error("select: wrong number of replies")),
        };
        self.check(members, &self.zset())?;
        self.clock(time)?;
        self.scored(members)
    }

    fn clock(&mut self, time: &Reply) -> Result<()> {
        (self.read.now, self.read.now_us) = parse_clock(time).ok_or_else(|| self.host_error("TIME gave no clock"))?;
        Ok(())
    }

    /// `P promotions` as read beside the selection.
    fn promoted_so_far(&mut self, promotions: &Reply) -> Result<()> {
        self.check(promotions, &self.keys.promotions())?;
        self.levels = levels_in_use(promotions);
        self.promotions = Some(promotions.clone());
        Ok(())
    }

    /// A bare selection (`bare_selection`): every member due, none, or read again
    /// with scores.
    fn selected_bare(&mut self, replies: &[Reply]) -> Result<Step> {
        let [time, members, first, last, tail, promotions] = replies else {
            return Err(self.host_error("select: wrong number of replies"));
        };
        self.promoted_so_far(promotions)?;
        for r in [members, first, last, tail] {
            self.check(r, &self.zset())?;
        }
        self.clock(time)?;
        let ids = members
            .as_array()
            .and_then(|a| a.iter().map(|m| m.as_bytes().map(<[u8]>::to_vec)).collect::<Option<Vec<_>>>())
            .ok_or_else(|| self.host_error("ZRANGE gave no members"))?;
        match self.probed(ids, [first, last, tail]) {
            Some(true) => Ok(self.chosen()),
            Some(false) => Ok(Step::Done(self.empty())),
            None => Ok(self.rescore()),
        }
    }

    /// What the probes say of a bare selection `ids`: `Some(true)`, every member
    /// is due (they are taken, without scores); `Some(false)`, none is (or none
    /// was there); `None`, `now` cuts it, or a probe could not be believed.
    fn probed(&mut self, ids: Vec<Vec<u8>>, [first, last, tail]: [&Reply; 3]) -> Option<bool> {
        let (Some(head), Some(end)) = (ids.first(), ids.last()) else {
            return Some(false);
        };
        let full = ids.len() as u64 >= self.batch;
        let now = self.read.now as f64;
        // A probe's score, when it names `member`.
        let probe = |r: &Reply, member: &[u8]| match r.as_array() {
            Some([m, score]) if m.as_bytes() == Some(member) => score.as_score(),
            _ => None,
        };
        if probe(first, head).is_some_and(|s| s > now) {
            self.read.next = probe(first, head);
            return Some(false);
        }
        if probe(if full { last } else { tail }, end).is_some_and(|s| s <= now) {
            self.read.next = full.then_some(now);
            // Scores are not read: a promote of one transaction plans without them.
            self.read.scores = vec![0.0; ids.len()];
            self.read.ids = ids;
            return Some(true);
        }
        None
    }

    /// A bare selection's probes: the member and score at rank 0, at `last`
    /// (the batch's last rank) and at -1.
    fn probes(&self, last: &str) -> [Cmd; 3] {
        ["0", last, "-1"].map(|at| Cmd::new("ZRANGE").arg(self.zset()).arg(at).arg(at).arg("WITHSCORES"))
    }

    /// The selection again, with scores (a bare one that `now` cut).
    fn rescore(&mut self) -> Step {
        self.stage = Stage::Rescored;
        Step::Read { watch: vec![], cmds: vec![self.range()] }
    }

    /// A sorted selection (`sorted_selection`): the bare one's answers, and
    /// with every member its row's `state` and `lane` and the lists' types, all
    /// read under the watch on `P promotions`. Where every member is due, steps
    /// 2 and 3 are done; else it goes on as a bare one.
    fn selected_sorted(&mut self, replies: &[Reply]) -> Result<Step> {
        let [time, sorted, first, last, tail, promotions, _pending, _ring, _wake] = replies else {
            return Err(self.host_error("select: wrong number of replies"));
        };
        if sort_refusal(sorted) {
            // Refused (ACL, cluster): read as a bare selection (the watch stays).
            self.sort_refused = true;
            self.sorted = false;
            return Ok(self.start());
        }
        self.promoted_so_far(promotions)?;
        if self.levels && !self.levels_hint {
            // The queue uses priorities and the rows came without them: read as a
            // bare selection (the watch stays); the host asks for them next time.
            self.sorted = false;
            return Ok(self.start());
        }
        for r in [sorted, first, last, tail] {
            self.check(r, &self.zset())?;
        }
        self.clock(time)?;
        let width = 3 + usize::from(self.levels_hint);
        let items = sorted.as_array().filter(|a| a.len() % width == 0).ok_or_else(|| self.host_error("SORT_RO gave no rows"))?;
        let mut ids = Vec::with_capacity(items.len() / width);
        let mut rows = Vec::with_capacity(items.len() / width);
        let mut unsure = vec![];
        for (i, t) in items.chunks_exact(width).enumerate() {
            let id = t[0].as_bytes().ok_or_else(|| self.host_error("SORT_RO gave no member"))?;
            ids.push(id.to_vec());
            let (state, lane) = (t[1].as_bytes(), t[2].as_bytes());
            if state.is_none() && lane.is_none() {
                // A ghost, a key of another type, or a hash without either: TYPE tells.
                unsure.push(i);
            }
            let priority = if self.levels { level(t.get(3).and_then(Reply::as_bytes)) } else { 0 };
            rows.push(Row::Live { lane: lane.map(<[u8]>::to_vec), stalls: 0, ending: Ending::default(), priority });
        }
        match self.probed(ids, [first, last, tail]) {
            Some(true) => {}
            Some(false) => return Ok(Step::Done(self.empty())),
            None => return Ok(self.rescore()),
        }
        self.read.rows = rows;
        self.read.types = Self::list_types(&replies[6..]);
        self.groups = std::iter::once(0..self.read.ids.len()).collect();
        self.rows_known(unsure)
    }

    /// The members and scores of a selection, cut at `now`.
    fn scored(&mut self, members: &Reply) -> Result<Step> {
        let items = members.as_array().ok_or_else(|| self.host_error("ZRANGE gave no array"))?;
        self.read.ids.reserve(items.len() / 2);
        self.read.scores.reserve(items.len() / 2);
        for pair in items.chunks_exact(2) {
            let score = pair[1].as_score();
            let (Some(id), Some(score)) = (pair[0].as_bytes(), score) else {
                return Err(self.host_error("ZRANGE gave no member and score"));
            };
            if score > self.read.now as f64 {
                self.read.next = Some(score);
                break;
            }
            self.read.ids.push(id.to_vec());
            self.read.scores.push(score);
        }
        if self.read.next.is_none() && items.len() / 2 >= usize::try_from(self.batch).unwrap_or(usize::MAX) {
            self.read.next = Some(self.read.now as f64);
        }
        if self.read.ids.is_empty() {
            return Ok(Step::Done(self.empty()));
        }
        Ok(self.chosen())
    }

    /// The selection is known: its groups, and the watch.
    fn chosen(&mut self) -> Step {
        let n = self.read.ids.len();
        let size = match self.watch_cap {
            Some(cap) if self.watch_of(0..n).len() > cap => self.group.min(cap),
            _ => self.group,
        };
        self.groups = (0..n).step_by(size).map(|a| a..(a + size).min(n)).collect();
        // Step 2: the watch (a promote's on `P promotions`, a stalled check's on
        // its first group's lease marks and rows), in front of the reads under it.
        self.rows_reads()
    }

    /// What the guard watches for the members in `r` (`crate::protocol::guard`), lanes aside.
    fn watch_of(&self, r: Range<usize>) -> Vec<Vec<u8>> {
        match self.kind {
            Kind::Promote => vec![self.keys.promotions()],
            Kind::Stalled { .. } => stalled_watch(&self.keys, &self.read.ids[r.clone()], &self.read.scores[r], self.read.now),
        }
    }

    // -- 2 to 4. every row and lane, the first group under its watch ---------------

    /// The first group's watch, and under it the reads of every selected row
    /// (in the server: no watch, no re-read).
    fn rows_reads(&mut self) -> Step {
        let mut cmds = vec![];
        cmds.extend((!self.in_server).then(|| match self.kind {
            // A promote: `P promotions` again. Unchanged, no promote ran between the
            // selection and the watch, and only a promote takes a due member or
            // writes its row (guard.rs): the selection stands, whatever its size.
            Kind::Promote => Cmd::new("GET").arg(self.keys.promotions()),
            // A stalled check: the first group again, the head of the zset as far as
            // its members and `RE_READ_SLACK` more (a range costs the server less
            // than `ZMSCORE`).
            Kind::Stalled { .. } => {
                let last = (self.groups[0].len() - 1 + RE_READ_SLACK).to_string();
                Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(last).arg("WITHSCORES")
            }
        }));
        cmds.extend(rows::reads(&self.keys, &self.read.ids, self.fields()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.pending()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.ring()));
        cmds.push(Cmd::new("LLEN").arg(self.keys.wake()));
        if matches!(self.kind, Kind::Stalled { .. }) {
            cmds.push(Cmd::new("ZCARD").arg(self.keys.dead()));
        }
        if self.checks_retention() {
            // A later group may kill and so trim `dead` by `P retention`: its type
            // too is checked before the first group's EXEC (SPEC §9).
            cmds.push(Cmd::new("HLEN").arg(self.keys.retention()));
        }
        self.stage = Stage::Rows;
        let watch = if self.in_server { vec![] } else { self.watch_of(self.groups[0].clone()) };
        Step::Read { watch, cmds }
    }

    fn rows_read(&mut self, replies: &[Reply]) -> Result<Step> {
        let n = self.read.ids.len();
        let stalled = matches!(self.kind, Kind::Stalled { .. });
        let (re_read, extra) = (usize::from(!self.in_server), 3 + usize::from(stalled) + usize::from(self.checks_retention()));
        let reads = rows::reply_count(n);
        if replies.len() != re_read + reads + extra {
            return Err(self.host_error("rows: wrong number of replies"));
        }
        let first = self.groups[0].clone();
        let stands = match self.kind {
            _ if self.in_server => true,
            Kind::Promote => self.promotions.as_ref() == Some(&replies[0]),
            Kind::Stalled { .. } => {
                replies[0].as_array().is_some_and(|a| still_selected(a, &self.read.ids[first.clone()], &self.read.scores[first]))
            }
        };
        if !stands {
            return Err(Error::conflict(self.verb(), "the selection changed before the watch"));
        }
        let (rows, unsure) =
            rows::parse_rows(self.verb(), &self.keys, &self.read.ids, &replies[re_read..re_read + reads], self.fields().len(), Self::row)?;
        self.read.rows = rows.into_iter().map(|r| r.unwrap_or(Row::Ghost)).collect();
        let t = &replies[re_read + reads..];
        self.read.types = Self::list_types(t);
        if self.checks_retention() && t.get(4).is_some_and(Reply::is_wrongtype) {
            let key = self.keys.retention();
            return Err(Error::layout(self.verb(), format!("{} has the wrong type", String::from_utf8_lossy(&key))));
        }
        self.rows_known(unsure)
    }

    /// Every row is read: the unsure ones get their `TYPE` (step 3), then the lanes.
    fn rows_known(&mut self, unsure: Vec<usize>) -> Result<Step> {
        if !unsure.is_empty() {
            let cmds = rows::type_reads(&self.keys, &self.read.ids, &unsure);
            self.stage = Stage::Types { unsure };
            return Ok(Step::Read { watch: vec![], cmds });
        }
        self.lanes_step()
    }

    /// The lists' types from their reads: `pending`, the ring, `wake`, then
    /// `dead` where read (a stalled check).
    fn list_types(t: &[Reply]) -> Types {
        Types {
            pending: !t[0].is_wrongtype(),
            ring: !t[1].is_wrongtype(),
            wake: !t[2].is_wrongtype(),
            dead: !t.get(3).is_some_and(Reply::is_wrongtype),
        }
    }

    /// A live row from its fields as read (a promote's `lane`, `priority`; a
    /// stalled check's `lane`, `stalls`, the ending fields `wait`, `cancel`,
    /// `keep`, then `priority`).
    fn row(fields: &[Option<&[u8]>]) -> Row {
        let field = |i: usize| fields.get(i).copied().flatten();
        if fields.len() <= 2 {
            return Row::Live { lane: field(0).map(<[u8]>::to_vec), stalls: 0, ending: Ending::default(), priority: level(field(1)) };
        }
        let stalls = field(1).and_then(field_int).unwrap_or(0);
        let ending = Ending::from_fields(field(2), field(3), field(4));
        Row::Live { lane: field(0).map(<[u8]>::to_vec), stalls, ending, priority: level(field(5)) }
    }

    /// Settles the rows whose `EXISTS` count left them unsure, from their `TYPE`.
    fn typed(&self, ids: &[Vec<u8>], rows: &mut [Row], unsure: &[usize], replies: &[Reply]) -> Result<()> {
        let mut fields: Vec<Option<rows::Fields>> = rows
            .iter()
            .map(|r| match r {
                Row::Ghost => None,
                Row::Live { .. } => Some(vec![]),
            })
            .collect();
        rows::resolve(self.verb(), &self.keys, ids, &mut fields, unsure, replies)?;
        for (row, f) in rows.iter_mut().zip(fields) {
            if f.is_none() {
                *row = Row::Ghost;
            }
        }
        Ok(())
    }

    fn types_read(&mut self, unsure: &[usize], replies: &[Reply]) -> Result<Step> {
        let mut rows = std::mem::take(&mut self.read.rows);
        let typed = self.typed(&self.read.ids, &mut rows, unsure, replies);
        self.read.rows = rows;
        typed?;
        self.lanes_step()
    }

    /// The lanes of `rows`, in the order of their first row.
    fn lanes_of(rows: &[Row]) -> Vec<Vec<u8>> {
        let mut names: Vec<Vec<u8>> = vec![];
        for row in rows {
            if let Row::Live { lane: Some(l), .. } = row {
                if !names.contains(l) {
                    names.push(l.clone());
                }
            }
        }
        names
    }

    /// Step 4: every lane's control and length (their types are checked here),
    /// the first group's lanes under their watch.
    fn lanes_step(&mut self) -> Result<Step> {
        self.read.lanes = Self::lanes_of(&self.read.rows).into_iter().map(|name| Lane { name, ..Default::default() }).collect();
        if self.grouped_call() {
            self.check_lists()?;
        }
        if self.read.lanes.is_empty() {
            return self.first_part();
        }
        let first = Self::lanes_of(&self.read.rows[self.groups[0].clone()]);
        let watch = first.iter().map(|l| self.keys.lanectl(l)).collect();
        let mut cmds = Vec::with_capacity(2 * self.read.lanes.len());
        for l in &self.read.lanes {
            cmds.push(Cmd::new("HMGET").arg(self.keys.lanectl(&l.name)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(self.keys.lane(&l.name)));
        }
        self.stage = Stage::Lanes;
        Ok(Step::Read { watch, cmds })
    }

    /// The lane reads' replies (`HMGET` control, `LLEN`) into `lanes`, types checked.
    fn lane_replies(&self, lanes: &mut [Lane], replies: &[Reply]) -> Result<()> {
        if replies.len() != 2 * lanes.len() {
            return Err(self.host_error("lanes: wrong number of replies"));
        }
        for (lane, pair) in lanes.iter_mut().zip(replies.chunks_exact(2)) {
            self.check(&pair[0], &self.keys.lanectl(&lane.name))?;
            self.check(&pair[1], &self.keys.lane(&lane.name))?;
            lane.ctl = LaneCtl::from_reply(&pair[0]);
            lane.len = pair[1].as_int().unwrap_or(0);
        }
        Ok(())
    }

    fn lanes_read(&mut self, replies: &[Reply]) -> Result<Step> {
        let mut lanes = std::mem::take(&mut self.read.lanes);
        let read = self.lane_replies(&mut lanes, replies);
        self.read.lanes = lanes;
        read?;
        self.first_part()
    }

    /// A call of several groups writes every list some group may write: their
    /// types are all checked before the first group's `EXEC` (SPEC §9).
    fn check_lists(&self) -> Result<()> {
        let t = self.read.types;
        let dies = matches!(self.kind, Kind::Stalled { max_stalled: Some(_) });
        if !t.pending || !t.ring || !t.wake || (dies && !t.dead) {
            return Err(Error::layout(self.verb(), "pending, ring, wake or dead has the wrong type"));
        }
        Ok(())
    }

    /// The first group, from the reads of steps 2 to 4.
    fn first_part(&mut self) -> Result<Step> {
        self.part_extras = None;
        let r = self.groups[0].clone();
        self.part = if self.groups.len() == 1 {
            // The call's one group: nothing reads the selection again (an abort
            // starts the call anew), so the part takes it rather than a copy.
            let lanes = std::mem::take(&mut self.read.lanes);
            Part {
                ids: std::mem::take(&mut self.read.ids),
                scores: std::mem::take(&mut self.read.scores),
                rows: std::mem::take(&mut self.read.rows),
                lanes,
            }
        } else {
            let rows = self.read.rows[r.clone()].to_vec();
            let names = Self::lanes_of(&rows);
            let lanes = self.read.lanes.iter().filter(|l| names.contains(&l.name)).cloned().collect();
            Part { ids: self.read.ids[r.clone()].to_vec(), scores: self.read.scores[r].to_vec(), rows, lanes }
        };
        self.plan_part()
    }

    // -- later groups ----------------------------------------------------------------

    /// What a later group watches: its lease marks and rows (a promote:
    /// `P promotions`) and the control of its lanes; and what it reads under
    /// that watch.
    fn group_reads(&self, k: usize) -> (Vec<Vec<u8>>, Vec<Cmd>) {
        let r = self.groups[k].clone();
        let ids = &self.read.ids[r.clone()];
        let lanes = Self::lanes_of(&self.read.rows[r.clone()]);
        let mut watch = self.watch_of(r);
        watch.extend(lanes.iter().map(|l| self.keys.lanectl(l)));
        let mut cmds = vec![Cmd::new("ZMSCORE").arg(self.zset()).args(ids)];
        cmds.extend(rows::reads(&self.keys, ids, self.fields()));
        for l in &lanes {
            cmds.push(Cmd::new("HMGET").arg(self.keys.lanectl(l)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(self.keys.lane(l)));
        }
        (watch, cmds)
    }

    /// Reads group `k` again (after an abort, or when a row changed lane).
    fn group_step(&mut self, k: usize) -> Step {
        let (watch, cmds) = self.group_reads(k);
        self.current = k;
        self.stage = Stage::Group;
        Step::Read { watch, cmds }
    }

    fn group_read(&mut self, replies: &[Reply]) -> Result<Step> {
        self.part_extras = None;
        let r = self.groups[self.current].clone();
        let (ids, old_rows) = (self.read.ids[r.clone()].to_vec(), self.read.rows[r.clone()].to_vec());
        let lane_names = Self::lanes_of(&old_rows);
        let reads = rows::reply_count(ids.len());
        if replies.len() != 1 + reads + 2 * lane_names.len() {
            return Err(self.host_error("group: wrong number of replies"));
        }
        self.check(&replies[0], &self.zset())?;
        let scores = replies[0].as_array().ok_or_else(|| self.host_error("ZMSCORE gave no array"))?;
        let (rows, unsure) = rows::parse_rows(self.verb(), &self.keys, &ids, &replies[1..=reads], self.fields().len(), Self::row)?;
        let mut rows: Vec<Row> = rows.into_iter().map(|r| r.unwrap_or(Row::Ghost)).collect();
        let mut lanes: Vec<Lane> = lane_names.into_iter().map(|name| Lane { name, ..Default::default() }).collect();
        self.lane_replies(&mut lanes, &replies[1 + reads..])?;
        // Members another call took, or scored anew, since the selection are left.
        let kept: Vec<bool> = ids
            .iter()
            .zip(&self.read.scores[r.clone()])
            .enumerate()
            .map(|(i, (_, s))| scores.get(i).and_then(Reply::as_score) == Some(*s))
            .collect();
        let scores = self.read.scores[r].to_vec();
        if !unsure.is_empty() {
            self.part = Part { ids, scores, rows, lanes };
            self.part_keep(&kept);
            let unsure_kept: Vec<usize> = unsure.iter().copied().filter(|&i| kept[i]).collect();
            if !unsure_kept.is_empty() {
                // Indexes of the kept members among those still in the part.
                let map: Vec<usize> = unsure_kept.iter().map(|&i| kept[..i].iter().filter(|k| **k).count()).collect();
                let cmds = rows::type_reads(&self.keys, &self.part.ids, &map);
                self.stage = Stage::GroupTypes { unsure: map };
                return Ok(Step::Read { watch: vec![], cmds });
            }
            return self.part_read();
        }
        self.part = Part { ids, scores, rows: std::mem::take(&mut rows), lanes };
        self.part_keep(&kept);
        self.part_read()
    }

    /// Keeps the members of the part that `kept` says are still there.
    fn part_keep(&mut self, kept: &[bool]) {
        let mut i = 0;
        self.part.ids.retain(|_| (kept[i], i += 1).0);
        let mut j = 0;
        self.part.rows.retain(|_| (kept[j], j += 1).0);
        let mut k = 0;
        self.part.scores.retain(|_| (kept[k], k += 1).0);
    }

    fn group_types_read(&mut self, unsure: &[usize], replies: &[Reply]) -> Result<Step> {
        let mut rows = std::mem::take(&mut self.part.rows);
        let typed = self.typed(&self.part.ids, &mut rows, unsure, replies);
        self.part.rows = rows;
        typed?;
        self.part_read()
    }

    /// A later group, read under its watch: planned, unless a row has moved to a
    /// lane whose control it did not read (then it is read again).
    fn part_read(&mut self) -> Result<Step> {
        if Self::lanes_of(&self.part.rows).iter().any(|l| !self.part.lanes.iter().any(|x| &x.name == l)) {
            return self.retry_group();
        }
        let names = Self::lanes_of(&self.part.rows);
        self.part.lanes.retain(|l| names.contains(&l.name));
        if self.part.ids.is_empty() {
            // Nothing of this group is left to take.
            return Ok(self.next_group());
        }
        self.plan_part()
    }

    /// The step after the current group, when it applied nothing.
    fn next_group(&mut self) -> Step {
        if self.current + 1 < self.groups.len() {
            self.group_step(self.current + 1)
        } else {
            Step::Done(self.done.take().unwrap_or_else(|| self.empty()))
        }
    }

    /// Takes the current group up again, or ends the call with the groups applied.
    fn retry_group(&mut self) -> Result<Step> {
        self.retries += 1;
        if self.retries > GROUP_ATTEMPTS {
            return match self.done.take() {
                Some(done) => Ok(Step::Done(done)),
                None => Err(Error::conflict(self.verb(), "a group kept changing under its watch")),
            };
        }
        Ok(self.group_step(self.current))
    }

    // -- 5, 6. the plan of the current group -------------------------------------------

    /// The current group as a read (the part is left empty: `part_back` puts it back).
    fn part_as_read(&mut self) -> Read {
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

    fn plan_part(&mut self) -> Result<Step> {
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

    fn build(&mut self, read: &Read) -> Result<Step> {
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
            Kind::Promote => promote::plan(read),
            Kind::Stalled { max_stalled } => stalled::plan(read, max_stalled),
        }
    }

    /// The current group's outcome as its `EXEC` replies count it.
    fn applied(&mut self, exec: &[Reply]) -> Result<Outcome> {
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
    fn merged(&mut self, more: Outcome) -> Outcome {
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
    fn guess_plan(&mut self, first: bool) {
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

/// A `SORT_RO … GET` refused for what it asks, not for where or when (see `reads_error`).
fn sort_refusal(reply: &Reply) -> bool {
    matches!(reply, Reply::Error { code, .. } if code == "ERR" || code == "NOPERM")
}

impl Sweep {
    /// Step 1's reads: the selection (scored, bare or sorted).
    fn select(&mut self) -> Step {
        let last = self.batch.saturating_sub(1).to_string();
        let mut cmds = vec![Cmd::new("TIME")];
        if self.sorted {
            self.stage = Stage::SelectSorted;
            let field = |f: &[u8]| [&self.keys.prefix[..], b"job:*->", f].concat();
            let mut sort = Cmd::new("SORT_RO")
                .arg(self.zset())
                .args(["BY", "nosort", "LIMIT", "0"])
                .arg(self.batch.to_string())
                .args(["GET", "#", "GET"])
                .arg(field(b"state"))
                .arg("GET")
                .arg(field(b"lane"));
            if self.levels_hint {
                sort = sort.arg("GET").arg(field(b"priority"));
            }
            cmds.push(sort);
            cmds.extend(self.probes(&last));
            cmds.extend([
                Cmd::new("GET").arg(self.keys.promotions()),
                Cmd::new("LLEN").arg(self.keys.pending()),
                Cmd::new("LLEN").arg(self.keys.ring()),
                Cmd::new("LLEN").arg(self.keys.wake()),
            ]);
            return Step::Read { watch: vec![self.keys.promotions()], cmds };
        }
        if self.bare {
            self.stage = Stage::SelectBare;
            cmds.push(Cmd::new("ZRANGE").arg(self.zset()).arg("0").arg(&last));
            cmds.extend(self.probes(&last));
        } else {
            self.stage = Stage::Select;
            cmds.push(self.range());
        }
        if self.kind == Kind::Promote {
            cmds.push(Cmd::new("GET").arg(self.keys.promotions()));
        }
        Step::Read { watch: vec![], cmds }
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
        matches!(self.stage, Stage::SelectSorted) && index == 1 && sort_refusal(reply)
    }

    /// Feeds the last `EXEC`'s replies; the outcome covers every group.
    fn finish(&mut self, exec: &[Reply]) -> Result<Outcome> {
        let out = self.applied(exec)?;
        Ok(self.merged(out))
    }
}

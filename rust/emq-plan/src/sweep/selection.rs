//! Step 1 of a sweep: the clock and the selection (scored, bare or sorted),
//! cut at `now`, and the groups the call applies it in.

use std::ops::Range;

use crate::clock::parse_clock;
use crate::error::Result;
use crate::jobs::ending::Ending;
use crate::lanes::offer::{level, levels_in_use};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::Conversation;
use crate::protocol::guard::stalled_watch;
use crate::protocol::reply::Reply;
use crate::sweep::conversation::{Stage, Sweep};
use crate::sweep::types::{Kind, Row, Step};

impl Sweep {
    /// Step 1's reads: the selection (scored, bare or sorted).
    pub(super) fn select(&mut self) -> Step {
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

    pub(super) fn selected(&mut self, replies: &[Reply]) -> Result<Step> {
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
    pub(super) fn selected_bare(&mut self, replies: &[Reply]) -> Result<Step> {
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
    pub(super) fn selected_sorted(&mut self, replies: &[Reply]) -> Result<Step> {
        let [time, sorted, first, last, tail, promotions, _pending, _ring, _wake] = replies else {
            return Err(self.host_error("select: wrong number of replies"));
        };
        if Self::sort_refusal(sorted) {
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
    pub(super) fn scored(&mut self, members: &Reply) -> Result<Step> {
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
    pub(super) fn watch_of(&self, r: Range<usize>) -> Vec<Vec<u8>> {
        match self.kind {
            Kind::Promote => vec![self.keys.promotions()],
            Kind::Stalled { .. } => stalled_watch(&self.keys, &self.read.ids[r.clone()], &self.read.scores[r], self.read.now),
        }
    }

    /// A `SORT_RO … GET` refused for what it asks, not for where or when (see `reads_error`).
    pub(super) fn sort_refusal(reply: &Reply) -> bool {
        matches!(reply, Reply::Error { code, .. } if code == "ERR" || code == "NOPERM")
    }
}

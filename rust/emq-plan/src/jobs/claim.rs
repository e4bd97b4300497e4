//! CLAIM (SPEC §7): up to `n` ready ids, flat ones first from the head of
//! `pending`, then lanes round-robin from the head of the ring.
//!
//! Priorities (SPEC §15): level 0 is `pending` and `lane:L`; levels 1 to 9
//! are lists of their own, used only where `lvl:<p>` of `P flatctl` (read
//! with the heads) or of `P lanectl:L` (read with the lane's control) says
//! so. A claim takes the flat list's levels in order, and each lane's turn
//! takes the head of its lowest non-empty level; it reads a level's list
//! only when the levels before it hold fewer ids than it may take, so its
//! cost does not grow with the backlog or the levels in use. A level whose
//! field is set but whose list is empty has its field cleared, the list
//! watched and read again (a producer's push there aborts the claim).
//!
//! The guard: the rows of the ids it takes; when it serves lanes, the ring
//! (every claim that takes from a lane rotates it, so it also guards the lane
//! heads); and, for each lane it drops from the ring, that lane's control hash
//! (dropped as not servable) or list (dropped as empty). The control hash of a
//! lane it serves is not watched: its `active` grows by `HINCRBY`, and what
//! others write there meanwhile (a complete's decrement, a pause, a new limit)
//! commutes with the claim. Producers appending to `pending` or to lanes never
//! abort a claim, nor do completes.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::lanes::offer::{levels_of, LaneCtl, CTL_FIELDS, LEVEL_FIELDS};
use crate::names::{Keys, LEVELS};
use crate::numbers::{field_int, later};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::Reply;
use crate::protocol::rows::{self, Fields};
use crate::protocol::write::{LaneField, Members, RowFields, Write};

pub const CLAIM: &str = "EMQ.CLAIM";
/// Most ids one claim takes: a larger `n` takes this many.
pub const MAX_CLAIM: u64 = 10_000;
/// Most ring entries one claim reads.
const RING_READ: usize = 1024;
/// The row fields a claim reads.
const FIELDS: [&str; 4] = ["state", "attempts", "max_attempts", "data"];

/// A job handed to a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claimed {
    pub id: Vec<u8>,
    pub data: Vec<u8>,
    pub lane: Option<Vec<u8>>,
    pub attempts: i64,
    pub max_attempts: i64,
    pub token: Vec<u8>,
    pub deadline: i64,
}

#[derive(Clone, Debug)]
struct LaneRead {
    name: Vec<u8>,
    ctl: LaneCtl,
    /// `active` is absent or an integer `HINCRBY` can add to.
    active_ok: bool,
    /// How many ids the lane holds, every level read together.
    len: i64,
    /// The ids read from its head, levels in order (a level's ids follow
    /// only when every level before it was read whole).
    head: Vec<Vec<u8>>,
    /// The levels of `head`, in order: (level, how many of its ids).
    segs: Vec<(u8, usize)>,
    /// Levels 1 to 9 whose lists were read (so the control's levels are known).
    levels_read: bool,
    /// Levels whose field is set and whose list was found empty.
    empty_levels: Vec<u8>,
}

impl LaneRead {
    /// The level of the id at `at` in `head`.
    fn level_at(&self, at: usize) -> u8 {
        let mut end = 0;
        for &(level, n) in &self.segs {
            end += n;
            if at < end {
                return level;
            }
        }
        0
    }

    /// Whether a turn may need the ids of its levels 1 to 9: some level is
    /// set and its level 0 was read whole, with fewer ids than `slots`.
    fn needs_levels(&self, slots: usize) -> bool {
        !self.levels_read && self.ctl.levels != 0 && (self.head.len() as i64) == self.len && self.head.len() < slots
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Visit {
    /// Took the lane's head id (ghost or live) and rotated the lane to the back.
    Serve(usize),
    /// The lane was empty (`true`) or could not be served (`false`): it left the ring.
    Drop(usize, bool),
}

enum Stage {
    Heads,
    /// The flat levels' lists, read when `pending` holds fewer than it may take.
    FlatLevels,
    /// The levels' lists of the lanes that may need them.
    LaneLevels(Vec<usize>),
    /// The heads and the hinted rows, read together under the hint's watch.
    Hinted,
    Rows,
    FlatTypes(Vec<usize>),
    /// `pending` watched and read again: the head holds ids it drops.
    PendingConfirm,
    LaneRows,
    LaneTypes(Vec<usize>),
    Exec,
}

pub struct Claim {
    keys: Keys,
    n: usize,
    lease_ms: u64,
    /// One fresh token per id it may claim, made by the host.
    tokens: Vec<Vec<u8>>,
    stage: Stage,
    now: i64,
    flat: Vec<Vec<u8>>,
    /// The levels of `flat`, in order: (level, how many of its ids); level 0 first.
    flat_segs: Vec<(u8, usize)>,
    /// The flat levels 1 to 9 whose fields are set (bit `p`).
    flat_levels: u16,
    /// Flat levels whose field is set and whose list was found empty.
    flat_empty: Vec<u8>,
    /// `pending` held more ids than it may take.
    pending_more: bool,
    ring: Vec<Vec<u8>>,
    ring_len: i64,
    flat_rows: Vec<Option<Fields>>,
    lanes: Vec<LaneRead>,
    visits: Vec<Visit>,
    /// (lane index, id) of each `Serve`, in visit order.
    lane_ids: Vec<(usize, Vec<u8>)>,
    lane_rows: Vec<Option<Fields>>,
    /// Lane ids found to be ghosts: the lanes are simulated again without them.
    ghosts: Vec<Vec<u8>>,
    wake_ok: bool,
    active_ok: bool,
    out: Vec<Claimed>,
    /// Takes from `pending` only (`flat_only`).
    flat_only: bool,
    /// The ids it expects at the head of `pending` (`hinted`).
    hint: Vec<Vec<u8>>,
    /// Up to `n` ids read past those it may take: the next claim's hint.
    beyond: Vec<Vec<u8>>,
}

impl Claim {
    pub fn new(keys: Keys, n: u64, lease_ms: u64, tokens: Vec<Vec<u8>>) -> Result<Self> {
        if n == 0 {
            return Err(Error::argument(CLAIM, "n", "must be a positive integer"));
        }
        if lease_ms == 0 {
            return Err(Error::argument(CLAIM, "lease_ms", "must be a positive integer"));
        }
        let n = n as usize;
        if tokens.len() < n {
            return Err(Error::server(CLAIM, "fewer tokens than n"));
        }
        Ok(Claim {
            keys,
            n,
            lease_ms,
            tokens,
            stage: Stage::Heads,
            now: 0,
            flat: vec![],
            flat_segs: vec![],
            flat_levels: 0,
            flat_empty: vec![],
            pending_more: false,
            ring: vec![],
            ring_len: 0,
            flat_rows: vec![],
            lanes: vec![],
            visits: vec![],
            lane_ids: vec![],
            lane_rows: vec![],
            ghosts: vec![],
            wake_ok: true,
            active_ok: true,
            out: vec![],
            flat_only: false,
            hint: vec![],
            beyond: vec![],
        })
    }

    /// A flat claim that expects `ids` (at most `n` of them) at the head of
    /// `pending`, as the last flat claim read past what it took (`next_hint`):
    /// it watches and reads their rows with the heads, in its first round trip.
    /// Read under that watch, the heads confirm the guess, and the call is a
    /// round trip shorter; else it goes on as an unhinted claim (the rows it
    /// watched for nothing can only abort it, never let it write wrongly).
    #[must_use]
    pub fn hinted(mut self, mut ids: Vec<Vec<u8>>) -> Self {
        if self.flat_only {
            ids.truncate(self.n);
            self.hint = ids;
        }
        self
    }

    /// The ids a flat claim read past those it took: the next one's hint.
    pub fn next_hint(&self) -> Vec<Vec<u8>> {
        self.beyond.clone()
    }

    /// How many ids of `pending` the first read takes: one more than it may take
    /// (to tell whether work is left), or for a flat claim, twice as many (the
    /// rest is the next one's hint).
    fn head_read(&self) -> usize {
        if self.flat_only {
            2 * self.n
        } else {
            self.n + 1
        }
    }

    /// A claim of flat jobs only: up to `n` from the head of `pending`, as a
    /// claim takes them first, and no lane (it reads the ring's length only, to
    /// leave a wake token when lanes have work; with nothing in `pending` it
    /// writes nothing). It touches nothing a complete writes, so a worker's
    /// group commit may carry it (`crate::batch::complete_and_claim`); the worker's own claims serve
    /// the lanes.
    #[must_use]
    pub fn flat_only(mut self) -> Self {
        self.flat_only = true;
        self
    }

    fn slots(&self) -> usize {
        self.n.saturating_sub(self.flat.len())
    }

    /// Lanes it reads: enough for every slot to be served or dropped.
    fn considered(&self) -> usize {
        if self.slots() == 0 {
            0
        } else {
            self.ring.len().min(2 * self.slots() + 16)
        }
    }

    fn layout(key: &[u8]) -> Error {
        Error::layout(CLAIM, format!("{} has the wrong type", String::from_utf8_lossy(key)))
    }

    fn list(r: &Reply, key: &[u8]) -> Result<Vec<Vec<u8>>> {
        match r {
            r if r.is_wrongtype() => Err(Self::layout(key)),
            Reply::Error { message, .. } => Err(Error::server(CLAIM, message)),
            Reply::Array(items) => Ok(items.iter().filter_map(|i| i.as_bytes().map(<[u8]>::to_vec)).collect()),
            _ => Ok(vec![]),
        }
    }

    fn heads_read(&mut self, replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let [time, pending, ring, flatctl] = replies else {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        };
        self.heads(time, pending, ring, flatctl)?;
        if let Some(step) = self.flat_levels_step() {
            return Ok(step);
        }
        self.rows_step()
    }

    /// The flat levels it may take from, when `pending` holds fewer ids than
    /// it may take: each set level's head (`LRANGE`, as many as it may take
    /// and one more), in order.
    fn flat_levels_step(&mut self) -> Option<Step<Vec<Claimed>>> {
        if self.flat_levels == 0 || self.flat.len() >= self.n {
            return None;
        }
        let k = &self.keys;
        let cmds = (1..LEVELS)
            .filter(|p| self.flat_levels & (1 << p) != 0)
            .map(|p| Cmd::new("LRANGE").arg(k.ready_at(None, p)).arg("0").arg((self.n - self.flat.len()).to_string()))
            .collect();
        self.stage = Stage::FlatLevels;
        Some(Step::Read { watch: vec![], cmds })
    }

    /// The set flat levels' heads: the ids it may take, level by level, after
    /// those of `pending`.
    fn flat_levels_read(&mut self, replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let set: Vec<u8> = (1..LEVELS).filter(|p| self.flat_levels & (1 << p) != 0).collect();
        if replies.len() != set.len() {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        }
        self.beyond.clear();
        for (&p, r) in set.iter().zip(replies) {
            let mut ids = Self::list(r, &self.keys.ready_at(None, p))?;
            if ids.is_empty() {
                self.flat_empty.push(p);
                continue;
            }
            let room = self.n - self.flat.len();
            if ids.len() > room {
                self.pending_more = true;
                ids.truncate(room);
            }
            if !ids.is_empty() {
                self.flat_segs.push((p, ids.len()));
                self.flat.extend(ids);
            }
        }
        self.rows_step()
    }

    /// The hinted first read: the heads, then the hinted rows, `LLEN wake`,
    /// `ZCARD active`, all under the watch of the hinted rows.
    fn hinted_read(&mut self, replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let k = self.keys.clone();
        let row_replies = rows::reply_count(self.hint.len());
        if replies.len() != 4 + row_replies + 2 {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        }
        self.heads(&replies[0], &replies[1], &replies[2], &replies[3])?;
        if let Some(step) = self.flat_levels_step() {
            return Ok(step);
        }
        if self.flat.is_empty() {
            return Ok(Step::Done(vec![]));
        }
        if self.flat != self.hint {
            return self.rows_step();
        }
        let (rows, unsure) = rows::parse(CLAIM, &k, &self.flat, &replies[4..4 + row_replies], FIELDS.len())?;
        self.flat_rows = rows;
        let at = 4 + row_replies;
        self.flat_rows_read(&replies[at], &replies[at + 1], unsure)
    }

    /// With the flat rows parsed (`unsure`: rows whose type must be read),
    /// `LLEN wake` and `ZCARD active`: the type reads, else on to the plan.
    fn flat_rows_read(&mut self, wake: &Reply, active: &Reply, unsure: Vec<usize>) -> Result<Step<Vec<Claimed>>> {
        self.wake_ok = !wake.is_wrongtype();
        self.active_ok = !active.is_wrongtype();
        if !unsure.is_empty() {
            let cmds = rows::type_reads(&self.keys, &self.flat, &unsure);
            self.stage = Stage::FlatTypes(unsure);
            return Ok(Step::Read { watch: vec![], cmds });
        }
        self.flat_known()
    }

    /// The clock, the ids it may take from `pending` (and those past them),
    /// the ring, the flat levels set.
    fn heads(&mut self, time: &Reply, pending: &Reply, ring: &Reply, flatctl: &Reply) -> Result<()> {
        let k = self.keys.clone();
        self.now = parse_time(time).ok_or_else(|| Error::server(CLAIM, "TIME gave no clock"))?;
        if flatctl.is_wrongtype() {
            return Err(Self::layout(&k.flatctl()));
        }
        self.flat_levels = levels_of(&flatctl.fields());
        // Ids past those it may take tell whether work is left.
        self.flat = Self::list(pending, &k.pending())?;
        self.pending_more = self.flat.len() > self.n;
        self.beyond = self.flat.split_off(self.n.min(self.flat.len()));
        self.flat_segs = vec![(0, self.flat.len())];
        // Levels it will not read (`pending` fills the claim) hold work, as far as it knows.
        self.pending_more |= self.flat_levels != 0 && self.flat.len() >= self.n;
        if self.flat_only {
            if ring.is_wrongtype() {
                return Err(Self::layout(&k.ring()));
            }
            self.ring_len = ring.as_int().unwrap_or(0);
        } else {
            self.ring = Self::list(ring, &k.ring())?;
            // A ring read short of RING_READ is the whole ring.
            self.ring_len = if self.ring.len() < RING_READ { self.ring.len() as i64 } else { i64::MAX };
        }
        Ok(())
    }

    /// After the heads: the rows of the ids, watched and read with `pending`
    /// again under the watch.
    fn rows_step(&mut self) -> Result<Step<Vec<Claimed>>> {
        let k = self.keys.clone();
        let lanes = self.considered();
        if self.flat.is_empty() && lanes == 0 && self.flat_empty.is_empty() {
            return Ok(Step::Done(vec![]));
        }
        let mut watch: Vec<Vec<u8>> = self.flat.iter().map(|id| k.job(id)).collect();
        let mut cmds = vec![Cmd::new("LRANGE").arg(k.pending()).arg("0").arg((self.n - 1).to_string())];
        self.flat_level_confirms(&mut watch, &mut cmds);
        cmds.extend(rows::reads(&k, &self.flat, &FIELDS));
        if lanes > 0 {
            watch.push(k.ring());
            cmds.push(Cmd::new("LRANGE").arg(k.ring()).arg("0").arg((RING_READ - 1).to_string()));
            for l in &self.ring[..lanes] {
                cmds.push(Cmd::new("HMGET").arg(k.lanectl(l)).args(CTL_FIELDS));
                cmds.push(Cmd::new("LLEN").arg(k.lane(l)));
                cmds.push(Cmd::new("LRANGE").arg(k.lane(l)).arg("0").arg((self.slots() - 1).to_string()));
            }
        }
        cmds.push(Cmd::new("LLEN").arg(k.wake()));
        cmds.push(Cmd::new("ZCARD").arg(k.active()));
        self.stage = Stage::Rows;
        Ok(Step::Read { watch, cmds })
    }

    /// The flat levels' lists it takes from or clears, watched (the ids
    /// taken are watched by their rows) and read again: `LRANGE` of each level
    /// it takes ids from, `LLEN` of each it found empty.
    fn flat_level_confirms(&self, watch: &mut Vec<Vec<u8>>, cmds: &mut Vec<Cmd>) {
        let k = &self.keys;
        for &(p, n) in self.flat_segs.iter().skip(1) {
            cmds.push(Cmd::new("LRANGE").arg(k.ready_at(None, p)).arg("0").arg((n - 1).to_string()));
        }
        for &p in &self.flat_empty {
            watch.push(k.ready_at(None, p));
            cmds.push(Cmd::new("LLEN").arg(k.ready_at(None, p)));
        }
    }

    /// How many replies [`Claim::flat_level_confirms`] gives.
    fn flat_confirm_count(&self) -> usize {
        self.flat_segs.len() - 1 + self.flat_empty.len()
    }

    /// Checks the replies of `LRANGE pending` and [`Claim::flat_level_confirms`]:
    /// each level it takes from still leads with the ids it read, each level
    /// it found empty is empty still.
    fn flat_confirmed(&self, replies: &[Reply]) -> Result<()> {
        let k = &self.keys;
        let mut at = 0;
        let mut from = 0;
        for (i, &(p, n)) in self.flat_segs.iter().enumerate() {
            let again = Self::list(&replies[i], &k.ready_at(None, p))?;
            if again.len() < n || again[..n] != self.flat[from..from + n] {
                return Err(Error::conflict(CLAIM, "pending changed before the watch"));
            }
            from += n;
            at = i + 1;
        }
        for r in &replies[at..] {
            if r.as_int() != Some(0) {
                return Err(Error::conflict(CLAIM, "a priority level it found empty got work before the watch"));
            }
        }
        Ok(())
    }

    fn rows_read(&mut self, replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let k = self.keys.clone();
        let lanes = self.considered();
        let nf = self.flat.len();
        let row_replies = rows::reply_count(nf);
        let confirms = 1 + self.flat_confirm_count();
        let expected = confirms + row_replies + if lanes > 0 { 1 + 3 * lanes } else { 0 } + 2;
        if replies.len() != expected {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        }
        // What was read before the watch, again under it. Producers may have
        // appended to `pending` since: only the ids it read must still lead it.
        self.flat_confirmed(&replies[..confirms])?;
        let (rows, unsure) = rows::parse(CLAIM, &k, &self.flat, &replies[confirms..confirms + row_replies], FIELDS.len())?;
        self.flat_rows = rows;
        let mut at = confirms + row_replies;
        if lanes > 0 {
            let ring = Self::list(&replies[at], &k.ring())?;
            if ring[..] != self.ring[..] {
                return Err(Error::conflict(CLAIM, "the ring changed before the watch"));
            }
            at += 1;
            for (i, chunk) in replies[at..at + 3 * lanes].chunks_exact(3).enumerate() {
                let name = self.ring[i].clone();
                if chunk[0].is_wrongtype() || chunk[1].is_wrongtype() {
                    return Err(Self::layout(&k.lane(&name)));
                }
                let f = chunk[0].fields();
                let head = Self::list(&chunk[2], &k.lane(&name))?;
                let active_ok = f.get(2).copied().flatten().is_none_or(|a| field_int(a).is_some());
                let ctl = LaneCtl::from_fields(&f);
                let len = chunk[1].as_int().unwrap_or(0);
                let segs = vec![(0, head.len())];
                self.lanes.push(LaneRead { name, ctl, active_ok, len, head, segs, levels_read: false, empty_levels: vec![] });
            }
            at += 3 * lanes;
        }
        self.flat_rows_read(&replies[at], &replies[at + 1], unsure)
    }

    /// With the flat rows known. Popping the head of `pending` is safe while the
    /// rows of the ids popped are watched: anyone else taking them writes them.
    /// Ids it drops (ghosts, rows not `pending`, an id listed twice) are not
    /// written by whoever else drops them, so then `pending` itself is watched,
    /// and read again.
    fn flat_known(&mut self) -> Result<Step<Vec<Claimed>>> {
        let unique = self.flat.iter().enumerate().all(|(i, id)| !self.flat[..i].contains(id));
        if unique && self.flat_rows.iter().all(claimable) {
            return self.lanes_step();
        }
        let k = &self.keys;
        self.stage = Stage::PendingConfirm;
        let mut watch = vec![k.pending()];
        let mut cmds = vec![Cmd::new("LRANGE").arg(k.pending()).arg("0").arg((self.n - 1).to_string())];
        for &(p, _) in self.flat_segs.iter().skip(1) {
            watch.push(k.ready_at(None, p));
        }
        self.flat_level_confirms(&mut watch, &mut cmds);
        Ok(Step::Read { watch, cmds })
    }

    /// Round-robin over the lanes read: one id per lane per turn. When the
    /// whole ring was read, turns wrap around it; otherwise each lane read is
    /// visited once.
    fn simulate(&mut self) {
        self.visits.clear();
        self.lane_ids.clear();
        let whole = self.lanes.len() as i64 == self.ring_len && self.lanes.len() == self.ring.len();
        let mut order: std::collections::VecDeque<usize> = (0..self.lanes.len()).collect();
        let mut taken = vec![0usize; self.lanes.len()];
        let mut active: Vec<i64> = self.lanes.iter().map(|l| l.ctl.active).collect();
        let mut slots = self.slots();
        let mut visits_left = if whole { usize::MAX } else { self.lanes.len() };
        while slots > 0 && visits_left > 0 {
            let Some(i) = order.pop_front() else { break };
            visits_left -= 1;
            let l = &self.lanes[i];
            let ctl = LaneCtl { active: active[i], ..l.ctl.clone() };
            if taken[i] == l.head.len() && l.len > taken[i] as i64 {
                break; // more ids than it read: leave the rest to the next claim
            }
            if l.len <= taken[i] as i64 || !ctl.can_serve() {
                self.visits.push(Visit::Drop(i, ctl.can_serve()));
                continue;
            }
            let id = l.head[taken[i]].clone();
            // A ghost takes the lane's turn, but neither a slot nor the limit.
            if !self.ghosts.contains(&id) {
                active[i] += 1;
                slots -= 1;
            }
            self.lane_ids.push((i, id));
            self.visits.push(Visit::Serve(i));
            taken[i] += 1;
            if whole {
                order.push_back(i);
            }
        }
    }

    /// The lanes it drops, with whether each was found empty (else not servable).
    fn drops(&self) -> Vec<(usize, bool)> {
        self.visits.iter().filter_map(|v| if let Visit::Drop(i, empty) = v { Some((*i, *empty)) } else { None }).collect()
    }

    /// The levels' lists of each lane read whose turns may need them: for each
    /// set level, `LLEN` and its head (as many ids as there are slots).
    fn lane_levels_step(&mut self) -> Option<Step<Vec<Claimed>>> {
        let slots = self.slots();
        let which: Vec<usize> = (0..self.lanes.len()).filter(|&i| self.lanes[i].needs_levels(slots)).collect();
        if which.is_empty() {
            return None;
        }
        let k = &self.keys;
        let mut cmds = vec![];
        for &i in &which {
            let l = &self.lanes[i];
            for p in (1..LEVELS).filter(|p| l.ctl.levels & (1 << p) != 0) {
                let key = k.ready_at(Some(&l.name), p);
                cmds.push(Cmd::new("LLEN").arg(key.clone()));
                cmds.push(Cmd::new("LRANGE").arg(key).arg("0").arg((slots - 1).to_string()));
            }
        }
        self.stage = Stage::LaneLevels(which);
        Some(Step::Read { watch: vec![], cmds })
    }

    fn lane_levels_read(&mut self, which: &[usize], replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let k = self.keys.clone();
        let mut r = replies.iter();
        for &i in which {
            let l = &mut self.lanes[i];
            l.levels_read = true;
            for p in (1..LEVELS).filter(|p| l.ctl.levels & (1 << p) != 0) {
                let key = k.ready_at(Some(&l.name), p);
                let (Some(len), Some(head)) = (r.next(), r.next()) else {
                    return Err(Error::server(CLAIM, "wrong number of replies"));
                };
                if len.is_wrongtype() {
                    return Err(Self::layout(&key));
                }
                let len = len.as_int().unwrap_or(0);
                let head = Self::list(head, &key)?;
                if len == 0 {
                    l.empty_levels.push(p);
                    continue;
                }
                // Ids of a level follow only while every level before it was read whole.
                if l.head.len() as i64 == l.len {
                    l.segs.push((p, head.len()));
                    l.head.extend(head);
                }
                l.len = l.len.saturating_add(len);
            }
        }
        if r.next().is_some() {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        }
        self.lanes_step()
    }

    fn lanes_step(&mut self) -> Result<Step<Vec<Claimed>>> {
        if let Some(step) = self.lane_levels_step() {
            return Ok(step);
        }
        self.simulate();
        let drops = self.drops();
        if self.lane_ids.is_empty() && drops.is_empty() {
            return self.build();
        }
        let k = self.keys.clone();
        let ids: Vec<Vec<u8>> = self.lane_ids.iter().map(|(_, id)| id.clone()).collect();
        let mut watch: Vec<Vec<u8>> = ids.iter().map(|id| k.job(id)).collect();
        let mut cmds = rows::reads(&k, &ids, &FIELDS);
        // What a drop decided on, watched and read again: the control hash of a
        // lane it could not serve, the list and the control (whose levels say
        // where else a producer pushed) of a lane it found empty.
        for &(i, empty) in &drops {
            let name = &self.lanes[i].name;
            if empty {
                watch.push(k.lane(name));
                cmds.push(Cmd::new("LLEN").arg(k.lane(name)));
            }
            watch.push(k.lanectl(name));
            cmds.push(Cmd::new("HMGET").arg(k.lanectl(name)).args(CTL_FIELDS));
        }
        // The levels it clears, found empty: watched and read again.
        for (l, p) in self.lane_clears() {
            let key = k.ready_at(Some(&self.lanes[l].name), p);
            watch.push(key.clone());
            cmds.push(Cmd::new("LLEN").arg(key));
        }
        self.stage = Stage::LaneRows;
        Ok(Step::Read { watch, cmds })
    }

    /// The (lane, level) lists it clears: levels found empty, of lanes read.
    fn lane_clears(&self) -> Vec<(usize, u8)> {
        self.lanes.iter().enumerate().flat_map(|(i, l)| l.empty_levels.iter().map(move |&p| (i, p))).collect()
    }

    fn lane_rows_read(&mut self, replies: &[Reply]) -> Result<Step<Vec<Claimed>>> {
        let ids: Vec<Vec<u8>> = self.lane_ids.iter().map(|(_, id)| id.clone()).collect();
        let row_replies = rows::reply_count(ids.len());
        let drops = self.drops();
        let empties = drops.iter().filter(|(_, empty)| *empty).count();
        let clears = self.lane_clears();
        if replies.len() != row_replies + drops.len() + empties + clears.len() {
            return Err(Error::server(CLAIM, "wrong number of replies"));
        }
        let mut r = replies[row_replies..].iter();
        for &(i, empty) in &drops {
            let l = &self.lanes[i];
            // An empty lane's level 0 is its whole length when it has no level (or they were read empty).
            let level0 = l.segs.first().map_or(0, |s| s.1) as i64;
            if empty && r.next().and_then(Reply::as_int) != Some(level0) {
                return Err(Error::conflict(CLAIM, "a lane it drops changed before the watch"));
            }
            if r.next().map(LaneCtl::from_reply).as_ref() != Some(&l.ctl) {
                return Err(Error::conflict(CLAIM, "a lane it drops changed before the watch"));
            }
        }
        if r.any(|len| len.as_int() != Some(0)) {
            return Err(Error::conflict(CLAIM, "a priority level it found empty got work before the watch"));
        }
        let (rows, unsure) = rows::parse(CLAIM, &self.keys, &ids, &replies[..row_replies], FIELDS.len())?;
        self.lane_rows = rows;
        if !unsure.is_empty() {
            let cmds = rows::type_reads(&self.keys, &ids, &unsure);
            self.stage = Stage::LaneTypes(unsure);
            return Ok(Step::Read { watch: vec![], cmds });
        }
        self.lane_rows_known()
    }

    /// With every lane row known: plan, or simulate again when it met new
    /// ghosts or rows not `pending` (they count against neither a slot nor a
    /// lane's limit).
    fn lane_rows_known(&mut self) -> Result<Step<Vec<Claimed>>> {
        // A row it skipped on an earlier read (its turn taken, no slot) that is
        // `pending` now changed before this read's watch: the turns it simulated
        // no longer hold (planned, it would take more than `n`).
        let revived = self.lane_ids.iter().zip(&self.lane_rows).any(|((_, id), row)| claimable(row) && self.ghosts.contains(id));
        if revived {
            return Err(Error::conflict(CLAIM, "a lane row it had skipped became pending before the watch"));
        }
        let new: Vec<Vec<u8>> = self
            .lane_ids
            .iter()
            .zip(&self.lane_rows)
            .filter(|((_, id), row)| !claimable(row) && !self.ghosts.contains(id))
            .map(|((_, id), _)| id.clone())
            .collect();
        if new.is_empty() {
            return self.build();
        }
        self.ghosts.extend(new);
        self.lanes_step()
    }

    fn claimed(&mut self, id: &[u8], f: &Fields, lane: Option<Vec<u8>>, w: &mut Vec<Write>) {
        let attempts = f[1].as_deref().and_then(field_int).unwrap_or(0) + 1;
        let max_attempts = f[2].as_deref().and_then(field_int).unwrap_or(0);
        // Each token is handed out once: the answer takes it, the row a copy.
        let token = std::mem::take(&mut self.tokens[self.out.len()]);
        let deadline = later(self.now, self.lease_ms);
        let fields = RowFields::Claimed { attempts, lease: deadline, token: token.clone(), claimed: self.now };
        w.push(Write::SetRow { id: id.to_vec(), fields });
        self.out.push(Claimed { id: id.to_vec(), data: f[3].clone().unwrap_or_default(), lane, attempts, max_attempts, token, deadline });
    }

    fn build(&mut self) -> Result<Step<Vec<Claimed>>> {
        let k = self.keys.clone();
        if !self.wake_ok || !self.active_ok {
            return Err(Error::layout(CLAIM, "wake or active has the wrong type"));
        }
        let mut w = vec![];
        for &(p, count) in &self.flat_segs {
            match p {
                0 if count > 0 => w.push(Write::TakePending { count }),
                0 => {}
                _ => w.push(Write::TakeAt { lane: None, level: p, count }),
            }
        }
        for &p in &self.flat_empty {
            w.push(Write::ClearLevel { lane: None, level: p });
        }
        let flat = std::mem::take(&mut self.flat);
        let flat_rows = std::mem::take(&mut self.flat_rows);
        for (id, row) in flat.iter().zip(&flat_rows) {
            // An id listed twice is taken once.
            let again = self.out.iter().any(|c| &c.id == id);
            if let (true, false, Some(f)) = (claimable(row), again, row) {
                self.claimed(id, f, None, &mut w);
            }
        }
        // Lane visits, in order: the visited lane is always at the ring's head.
        let mut served = self.lane_ids.clone().into_iter().zip(std::mem::take(&mut self.lane_rows));
        let mut taken_in = vec![0usize; self.lanes.len()];
        let mut claimed_in = vec![0i64; self.lanes.len()];
        let mut dropped = vec![false; self.lanes.len()];
        for v in self.visits.clone() {
            match v {
                Visit::Serve(i) => {
                    let name = self.lanes[i].name.clone();
                    match self.lanes[i].level_at(taken_in[i]) {
                        0 => w.push(Write::TakeLaneHead { lane: name.clone() }),
                        p => w.push(Write::TakeAt { lane: Some(name.clone()), level: p, count: 1 }),
                    }
                    taken_in[i] += 1;
                    w.push(Write::RotateRing);
                    let ((_, id), row) = served.next().expect("one id per serve");
                    let again = self.out.iter().any(|c| c.id == id);
                    if let (true, false, Some(f)) = (claimable(&row), again, &row) {
                        claimed_in[i] += 1;
                        self.claimed(&id, f, Some(name), &mut w);
                    }
                }
                Visit::Drop(i, _) => {
                    w.push(Write::DropRingHead);
                    dropped[i] = true;
                }
            }
        }
        for (i, l) in self.lanes.iter().enumerate() {
            if claimed_in[i] > 0 {
                if !l.active_ok {
                    let key = k.lanectl(&l.name);
                    return Err(Error::layout(
                        CLAIM,
                        format!("{} holds an active count that is not an integer", String::from_utf8_lossy(&key)),
                    ));
                }
                w.push(Write::TakeSlots { lane: l.name.clone(), by: claimed_in[i] });
            }
            if dropped[i] {
                w.push(Write::SetLane { lane: l.name.clone(), field: LaneField::InRing(false) });
            }
            // A lane dropped as empty had every marked level read and taken whole, under
            // the watch of its control (which a producer's push to a level writes): its
            // marks go with it. Otherwise only the levels it found empty.
            let empty_drop = self.visits.contains(&Visit::Drop(i, true));
            for p in (1..LEVELS).filter(|p| l.ctl.levels & (1 << p) != 0) {
                if l.empty_levels.contains(&p) || empty_drop {
                    w.push(Write::ClearLevel { lane: Some(l.name.clone()), level: p });
                }
            }
        }
        if !self.out.is_empty() {
            let ids: Vec<&[u8]> = self.out.iter().map(|c| c.id.as_slice()).collect();
            w.push(Write::Lease { deadline: later(self.now, self.lease_ms), ids: Members::of(&ids) });
        }
        let drops = dropped.iter().filter(|d| **d).count() as i64;
        let work_left = self.pending_more || self.ring_len > drops;
        if work_left {
            // Parked workers wake one another in a chain.
            w.push(Write::Wake(Members::one(b"")));
            w.push(Write::TrimWake);
        }
        self.stage = Stage::Exec;
        Ok(Step::Exec(w))
    }
}

impl Conversation for Claim {
    type Out = Vec<Claimed>;

    fn verb(&self) -> &'static str {
        CLAIM
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        let k = &self.keys;
        let mut cmds = vec![
            Cmd::new("TIME"),
            Cmd::new("LRANGE").arg(k.pending()).arg("0").arg((self.head_read() - 1).to_string()),
            if self.flat_only {
                Cmd::new("LLEN").arg(k.ring())
            } else {
                Cmd::new("LRANGE").arg(k.ring()).arg("0").arg((RING_READ - 1).to_string())
            },
            Cmd::new("HMGET").arg(k.flatctl()).args(LEVEL_FIELDS),
        ];
        if self.hint.is_empty() {
            self.stage = Stage::Heads;
            return Step::Read { watch: vec![], cmds };
        }
        self.stage = Stage::Hinted;
        cmds.extend(rows::reads(k, &self.hint, &FIELDS));
        cmds.push(Cmd::new("LLEN").arg(k.wake()));
        cmds.push(Cmd::new("ZCARD").arg(k.active()));
        Step::Read { watch: self.hint.iter().map(|id| k.job(id)).collect(), cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        match std::mem::replace(&mut self.stage, Stage::Exec) {
            Stage::Heads => self.heads_read(replies),
            Stage::Hinted => self.hinted_read(replies),
            Stage::Rows => self.rows_read(replies),
            Stage::FlatTypes(unsure) => {
                let flat = self.flat.clone();
                rows::resolve(CLAIM, &self.keys, &flat, &mut self.flat_rows, &unsure, replies)?;
                self.flat_known()
            }
            Stage::PendingConfirm => {
                if replies.len() != 1 + self.flat_confirm_count() {
                    return Err(Error::server(CLAIM, "wrong number of replies"));
                }
                self.flat_confirmed(replies)?;
                self.lanes_step()
            }
            Stage::FlatLevels => self.flat_levels_read(replies),
            Stage::LaneLevels(which) => self.lane_levels_read(&which, replies),
            Stage::LaneRows => self.lane_rows_read(replies),
            Stage::LaneTypes(unsure) => {
                let ids: Vec<Vec<u8>> = self.lane_ids.iter().map(|(_, id)| id.clone()).collect();
                rows::resolve(CLAIM, &self.keys, &ids, &mut self.lane_rows, &unsure, replies)?;
                self.lane_rows_known()
            }
            Stage::Exec => Err(Error::server(CLAIM, "a read was fed after the plan was built")),
        }
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(CLAIM, message));
        }
        Ok(std::mem::take(&mut self.out))
    }
}

/// A row a claim takes: one that says it is `pending`. Ghosts (no row) and rows
/// in any other state (an id left in a list by mistake) are dropped.
fn claimable(row: &Option<Fields>) -> bool {
    matches!(row, Some(f) if f.first().and_then(|v| v.as_deref()) == Some(b"pending".as_slice()))
}

//! ADD (SPEC §7): write the row; ready at once (pending or its lane, offer,
//! wake) when due, else into `schedule`.
//!
//! A job may carry its own retention (`keep`, SPEC §13) and a uniqueness key
//! with a window: under `WATCH P unique:K`, `GET P unique:K`; when it names a
//! job whose row exists (read in a second step, watched), the add of that job
//! is answered with that id and writes nothing; else the add's transaction
//! also sets `P unique:K` to the new id for the window (`SET … PX`). Producers
//! racing on one key all watch it: one `EXEC` wins, the others read again and
//! find its job.
//!
//! A caller that will wait for the jobs' outcomes may name its inbox
//! ([`Add::waited_by`]): each row the call writes lists it in `wait`, so the
//! call that brings the job to its outcome pushes the id there, and the wait
//! costs no registration of its own (no `AWAIT`, no round trip). Rows the
//! call does not write (landed, or named by a uniqueness key) are not
//! registered: the caller registers those itself.
use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::ending::inbox_problem;
use crate::lanes::offer::{levels_in_use, new_head, schedule_head, LaneCtl, Levels, Offers, CTL_FIELDS};
use crate::names::{id_problem, Keys, LEVELS};
use crate::numbers::{later, Decimal, HEX, MAX_MS};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::check_error;
use crate::protocol::reply::Reply;
use crate::protocol::write::{Members, NewRow, RowFields, Scored, Write};

pub const ADD: &str = "EMQ.ADD";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// Milliseconds after the call's clock reading (`0`: ready at once).
    Delay(u64),
    /// A due time, ms since the epoch on the server's clock.
    At(i64),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewJob {
    pub id: Option<Vec<u8>>,
    pub data: Vec<u8>,
    pub when: When,
    pub lane: Option<Vec<u8>>,
    pub max_attempts: u32,
    /// The job's own retention of its done or cancelled row (ms, `-1`:
    /// forever), in place of the queue's `done_ms`.
    pub keep: Option<i64>,
    /// Added only if no job holds this uniqueness key.
    pub unique: Option<Unique>,
    /// Its priority level, 0 (first, the default) to 9 (SPEC §15).
    pub priority: u8,
}

/// A uniqueness key and how long it holds (ms): a second add under the key
/// within the window, while the first job's row exists, is answered with the
/// first job's id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unique {
    pub key: Vec<u8>,
    pub window_ms: u64,
}

impl NewJob {
    /// A job of `data`, ready at once, flat, with 3 attempts and nothing else.
    pub fn of(data: &[u8]) -> Self {
        NewJob { priority: 0, id: None, data: data.to_vec(), when: When::Delay(0), lane: None, max_attempts: 3, keep: None, unique: None }
    }
}

pub struct Add {
    keys: Keys,
    jobs: Vec<NewJob>,
    /// For generated ids: this process's tag and the first sequence number.
    gen: (u32, u64),
    /// Lanes of jobs that may be ready at once, in order of first job.
    lanes: Vec<Vec<u8>>,
    /// The (lane, level) lists of priority 1 to 9 that jobs may be ready in
    /// at once: their types (and `P flatctl`'s, for flat ones) are read.
    levels: Vec<(Option<Vec<u8>>, u8)>,
    ids: Vec<Vec<u8>>,
    /// Whether this call wrote each job (`false`: it had landed, or its
    /// uniqueness key names another job, whose id `ids` holds).
    created: Vec<bool>,
    started: bool,
    /// A given id that another job has: the call's answer once its reads are confirmed.
    refused: Option<Error>,
    /// The first read's replies, kept while the jobs that uniqueness keys
    /// name are read.
    first: Option<Named>,
    /// The inbox each row written lists in `wait` (`waited_by`).
    inbox: Option<Vec<u8>>,
}

/// The first read's replies, and for each job with a uniqueness key the id
/// its key names (`None`: the key is free).
type Named = (Vec<Reply>, Vec<Option<Vec<u8>>>);

impl Add {
    /// Checks every job before anything is read: ids and lanes (SPEC §1),
    /// `max_attempts`, and ids given twice.
    pub fn new(keys: Keys, jobs: Vec<NewJob>, gen: (u32, u64)) -> Result<Self> {
        for (i, j) in jobs.iter().enumerate() {
            if let Some(id) = &j.id {
                if let Some(why) = id_problem(id) {
                    return Err(Error::argument(ADD, "id", why));
                }
                if jobs[..i].iter().any(|o| o.id.as_ref() == Some(id)) {
                    return Err(Error::argument(ADD, "id", format!("{:?} is given twice", String::from_utf8_lossy(id))));
                }
            }
            if let Some(why) = j.lane.as_deref().and_then(id_problem) {
                return Err(Error::argument(ADD, "lane", why));
            }
            if j.max_attempts == 0 {
                return Err(Error::argument(ADD, "max_attempts", "must be a positive integer"));
            }
            if j.priority >= LEVELS {
                return Err(Error::argument(ADD, "priority", "must be an integer from 0 to 9"));
            }
            if let Some(k) = j.keep {
                if !(-1..=MAX_MS).contains(&k) {
                    return Err(Error::argument(ADD, "keep", format!("must be -1 (forever) or from 0 to {MAX_MS} ms")));
                }
            }
            if let Some(u) = &j.unique {
                if let Some(why) = id_problem(&u.key) {
                    return Err(Error::argument(ADD, "unique_key", why));
                }
                if u.window_ms == 0 || u.window_ms > MAX_MS.unsigned_abs() {
                    return Err(Error::argument(ADD, "unique_for", format!("must be from 1 to {MAX_MS} ms")));
                }
                if jobs[..i].iter().any(|o| o.unique.as_ref().is_some_and(|x| x.key == u.key)) {
                    return Err(Error::argument(ADD, "unique_key", format!("{:?} is given twice", String::from_utf8_lossy(&u.key))));
                }
            }
        }
        let mut lanes: Vec<Vec<u8>> = vec![];
        for j in &jobs {
            if let (Some(l), false) = (&j.lane, matches!(j.when, When::Delay(d) if d > 0)) {
                if !lanes.contains(l) {
                    lanes.push(l.clone());
                }
            }
        }
        let mut levels: Vec<(Option<Vec<u8>>, u8)> = vec![];
        for j in &jobs {
            let at = (j.lane.clone(), j.priority);
            if j.priority > 0 && !matches!(j.when, When::Delay(d) if d > 0) && !levels.contains(&at) {
                levels.push(at);
            }
        }
        Ok(Add { keys, jobs, gen, lanes, levels, ids: vec![], created: vec![], started: false, refused: None, first: None, inbox: None })
    }

    /// Registers `inbox` (`ending::inbox_problem`) as the waiter of every job
    /// the call writes, in the add's own transaction.
    pub fn waited_by(mut self, inbox: Vec<u8>) -> Result<Self> {
        if let Some(why) = inbox_problem(&inbox) {
            return Err(Error::argument(ADD, "inbox", why));
        }
        self.inbox = Some(inbox);
        Ok(self)
    }

    /// How many replies the reads of the priority levels give.
    fn level_reads(&self) -> usize {
        self.levels.len() + usize::from(self.levels.iter().any(|(l, _)| l.is_none())) + usize::from(self.any_priority())
    }

    /// Whether a job has a priority: the add then reads `P promotions`, and
    /// marks the queue as using priorities there if it does not say so yet.
    fn any_priority(&self) -> bool {
        self.jobs.iter().any(|j| j.priority > 0)
    }

    fn given_ids(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.jobs.iter().filter_map(|j| j.id.as_ref())
    }

    fn unique_keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.jobs.iter().filter_map(|j| j.unique.as_ref().map(|u| &u.key))
    }

    /// Whether the call wrote each job, in order (once it is done): `false`
    /// where the job had landed already, or where its uniqueness key named
    /// another job, whose id the call answered.
    pub fn created(&self) -> &[bool] {
        &self.created
    }
}

/// The digest of an add's request, written to the row as `digest`: the first 16
/// bytes of SHA-1, in lowercase hex, over an unambiguous encoding of what the
/// caller asked for (the id aside: it is the row's key). Each part is tagged and
/// variable parts are length-prefixed:
/// `emq.add.v1` `d<len>:<data>` (`l<len>:<lane>` or `n`) `m<max_attempts>;`
/// (`D<delay ms>;` or `A<due ms>;`), then, only when given, `k<keep ms>;` and
/// `u<len>:<key>w<window ms>;` and `p<priority>;` (so the digest of a request without them is
/// what it always was). An add that finds a row with its own digest under the
/// id it names has already landed (a retry after a lost reply).
pub fn digest(job: &NewJob) -> String {
    String::from_utf8(digest_hex(job).to_vec()).expect("hex is ASCII")
}

/// [`digest`]'s 32 hex digits, without a string of their own (a row's field).
pub fn digest_hex(job: &NewJob) -> [u8; 32] {
    let mut buf = Vec::with_capacity(job.data.len() + job.lane.as_ref().map_or(0, Vec::len) + 80);
    buf.extend_from_slice(b"emq.add.v1d");
    buf.extend_from_slice(Decimal::count(job.data.len()).as_bytes());
    buf.push(b':');
    buf.extend_from_slice(&job.data);
    match &job.lane {
        Some(l) => {
            buf.push(b'l');
            buf.extend_from_slice(Decimal::count(l.len()).as_bytes());
            buf.push(b':');
            buf.extend_from_slice(l);
        }
        None => buf.push(b'n'),
    }
    buf.push(b'm');
    buf.extend_from_slice(Decimal::uint(u64::from(job.max_attempts)).as_bytes());
    buf.push(b';');
    match job.when {
        When::Delay(ms) => {
            buf.push(b'D');
            buf.extend_from_slice(Decimal::uint(ms).as_bytes());
        }
        When::At(t) => {
            buf.push(b'A');
            buf.extend_from_slice(Decimal::int(t).as_bytes());
        }
    }
    buf.push(b';');
    if let Some(k) = job.keep {
        buf.push(b'k');
        buf.extend_from_slice(Decimal::int(k).as_bytes());
        buf.push(b';');
    }
    if let Some(u) = &job.unique {
        buf.push(b'u');
        buf.extend_from_slice(Decimal::count(u.key.len()).as_bytes());
        buf.push(b':');
        buf.extend_from_slice(&u.key);
        buf.push(b'w');
        buf.extend_from_slice(Decimal::uint(u.window_ms).as_bytes());
        buf.push(b';');
    }
    if job.priority > 0 {
        buf.push(b'p');
        buf.extend_from_slice(Decimal::uint(u64::from(job.priority)).as_bytes());
        buf.push(b';');
    }
    let full = sha1_smol::Sha1::from(&buf).digest().bytes();
    let mut hex = [0u8; 32];
    for (pair, b) in hex.chunks_exact_mut(2).zip(&full[..16]) {
        pair.copy_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
    }
    hex
}

/// A generated id: the server's clock in ms, this process's tag and a sequence
/// number, in fixed-width hex, so ids are unique and sort by creation.
pub fn generated_id(now: i64, tag: u32, seq: u64) -> Vec<u8> {
    let mut id = Vec::with_capacity(32);
    for (v, width) in [(now.max(0).unsigned_abs(), 12), (u64::from(tag), 8), (seq, 12)] {
        // `{:0width$x}`: at least `width` digits, more where the value needs them.
        let digits = (64 - v.leading_zeros()).div_ceil(4).max(width);
        id.extend((0..digits).rev().map(|d| HEX[((v >> (4 * d)) & 15) as usize]));
    }
    id
}

impl Conversation for Add {
    type Out = Vec<Vec<u8>>;

    fn verb(&self) -> &'static str {
        ADD
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        self.started = true;
        let k = &self.keys;
        let mut watch: Vec<Vec<u8>> = self.given_ids().map(|id| k.job(id)).collect();
        watch.extend(self.lanes.iter().map(|l| k.lanectl(l)));
        watch.extend(self.unique_keys().map(|u| k.unique(u)));
        let mut cmds = vec![Cmd::new("TIME")];
        for id in self.given_ids() {
            cmds.push(Cmd::new("EXISTS").arg(k.job(id)));
            cmds.push(Cmd::new("HGET").arg(k.job(id)).arg("digest"));
        }
        cmds.extend(self.unique_keys().map(|u| Cmd::new("GET").arg(k.unique(u))));
        for l in &self.lanes {
            cmds.push(Cmd::new("HMGET").arg(k.lanectl(l)).args(CTL_FIELDS));
            cmds.push(Cmd::new("LLEN").arg(k.lane(l)));
        }
        cmds.push(Cmd::new("LLEN").arg(k.pending()));
        // The head of `schedule`: a job due before it wakes a parked worker (unwatched:
        // the token is a hint, see `new_head`).
        cmds.push(schedule_head(k));
        cmds.push(Cmd::new("LLEN").arg(k.ring()));
        cmds.push(Cmd::new("LLEN").arg(k.wake()));
        // Only an add of jobs with a priority reads these (SPEC §15).
        for (lane, level) in &self.levels {
            cmds.push(Cmd::new("LLEN").arg(k.ready_at(lane.as_deref(), *level)));
        }
        if self.levels.iter().any(|(l, _)| l.is_none()) {
            cmds.push(Cmd::new("HLEN").arg(k.flatctl()));
        }
        // Unwatched: two adds that both find no mark both add it, which still says so.
        if self.any_priority() {
            cmds.push(Cmd::new("GET").arg(k.promotions()));
        }
        Step::Read { watch, cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if let Some((first, named)) = self.first.take() {
            // Which of the jobs the keys named still have rows.
            if replies.len() != named.iter().flatten().count() {
                return Err(Error::server(ADD, "unique: wrong number of replies"));
            }
            let mut exists = replies.iter();
            let mut taken = Vec::with_capacity(named.len());
            for id in named {
                taken.push(match id {
                    None => None,
                    Some(id) => {
                        let r = exists.next().expect("one reply a job named");
                        check_error(ADD, &self.keys.job(&id), r)?;
                        match r.as_int() {
                            Some(0) => None,
                            Some(_) => Some(id),
                            None => return Err(Error::server(ADD, "EXISTS gave no count")),
                        }
                    }
                });
            }
            return self.plan(&first, taken);
        }
        let given = 2 * self.given_ids().count();
        let uniques = self.unique_keys().count();
        if replies.len() != 1 + given + uniques + 2 * self.lanes.len() + 4 + self.level_reads() {
            return Err(Error::server(ADD, "wrong number of replies"));
        }
        // The jobs the uniqueness keys name: each is read (and watched) before the plan.
        let mut named: Vec<Option<Vec<u8>>> = Vec::with_capacity(uniques);
        for (u, r) in self.unique_keys().zip(&replies[1 + given..1 + given + uniques]) {
            check_error(ADD, &self.keys.unique(u), r)?;
            named.push(r.as_bytes().map(<[u8]>::to_vec));
        }
        if named.iter().any(Option::is_some) {
            let rows: Vec<Vec<u8>> = named.iter().flatten().map(|id| self.keys.job(id)).collect();
            let cmds = rows.iter().map(|r| Cmd::new("EXISTS").arg(r)).collect();
            self.first = Some((replies.to_vec(), named));
            return Ok(Step::Read { watch: rows, cmds });
        }
        self.plan(replies, vec![None; uniques])
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Self::Out> {
        if let Some(e) = self.refused.take() {
            return Err(e);
        }
        if let Some(Reply::Error { message, .. }) = exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            return Err(Error::server(ADD, message));
        }
        Ok(std::mem::take(&mut self.ids))
    }
}

impl Add {
    /// The plan from the first read's `replies`; `taken`, for each job with a
    /// uniqueness key in order, the id of the job its key names whose row exists.
    fn plan(&mut self, replies: &[Reply], taken: Vec<Option<Vec<u8>>>) -> Result<Step<Vec<Vec<u8>>>> {
        let given = 2 * self.given_ids().count();
        let uniques = taken.len();
        let now = parse_time(&replies[0]).ok_or_else(|| Error::server(ADD, "TIME gave no clock"))?;
        // For each job, the id of the job its uniqueness key names (whose row exists).
        let mut taken = taken.into_iter();
        let named: Vec<Option<Vec<u8>>> = self.jobs.iter().map(|j| j.unique.as_ref().and_then(|_| taken.next().flatten())).collect();
        // Each given id: new, already landed (a row with this request's digest,
        // or the job its own uniqueness key names: skipped, its id returned), or
        // taken by another job (the call is refused).
        let mut landed = vec![false; self.jobs.len()];
        let mut pairs = replies[1..=given].chunks_exact(2);
        for (i, j) in self.jobs.iter().enumerate() {
            let Some(id) = &j.id else { continue };
            let [exists, stored] = pairs.next().expect("two replies a given id") else { unreachable!() };
            if let Reply::Error { message, .. } = exists {
                return Err(Error::server(ADD, message));
            }
            match exists.as_int() {
                Some(0) => {}
                Some(_) => {
                    if let Reply::Error { message, .. } = stored {
                        if !stored.is_wrongtype() {
                            return Err(Error::server(ADD, message));
                        }
                    }
                    if stored.as_bytes() != Some(digest(j).as_bytes()) && named[i].as_ref() != Some(id) {
                        // Refused once `EXEC` of nothing confirms the watched rows held
                        // still since they were read (else a new call reads them again).
                        self.refused = Some(Error::duplicate(
                            ADD,
                            format!("job {:?} exists: another job has this id; nothing was added", String::from_utf8_lossy(id)),
                        ));
                        return Ok(Step::Exec(vec![]));
                    }
                    landed[i] = true;
                }
                None => return Err(Error::server(ADD, "EXISTS gave no count")),
            }
        }
        // Jobs whose uniqueness key names a job that exists: answered with that id, not written.
        let answer: Vec<Option<Vec<u8>>> = named.into_iter().zip(&landed).map(|(n, &landed)| n.filter(|_| !landed)).collect();
        let k = &self.keys;
        let mut ctls = Vec::with_capacity(self.lanes.len());
        for (l, pair) in self.lanes.iter().zip(replies[1 + given + uniques..].chunks_exact(2)) {
            if pair[0].is_wrongtype() || pair[1].is_wrongtype() {
                return Err(Error::layout(ADD, format!("{} or its control has the wrong type", String::from_utf8_lossy(&k.lane(l)))));
            }
            ctls.push((LaneCtl::from_reply(&pair[0]), pair[1].as_int().unwrap_or(0)));
        }
        let t = &replies[1 + given + uniques + 2 * self.lanes.len()..];
        let (pending_ok, schedule_ok, ring_ok, wake_ok) =
            (!t[0].is_wrongtype(), !t[1].is_wrongtype(), !t[2].is_wrongtype(), !t[3].is_wrongtype());
        if t[4..].iter().any(Reply::is_wrongtype) {
            return Err(Error::layout(ADD, "a priority level's list, flatctl or promotions has the wrong type"));
        }
        let mark_levels = self.any_priority() && !t.last().is_some_and(levels_in_use);

        let (tag, seq) = self.gen;
        self.ids = self
            .jobs
            .iter()
            .enumerate()
            .map(|(i, j)| j.id.clone().unwrap_or_else(|| generated_id(now, tag, seq.wrapping_add(i as u64))))
            .collect();
        self.created = landed.iter().zip(&answer).map(|(&l, a)| !l && a.is_none()).collect();
        let mut uniques_set = vec![];

        let mut w = vec![];
        let (mut flat, mut scheduled): (Vec<&[u8]>, Scored) = (vec![], Scored::new());
        let mut by_lane: Vec<(&[u8], Vec<&[u8]>)> = vec![];
        // Asked before the loop, whose lanes borrow the jobs to the end (`P lanes`).
        let created_priority = self.jobs.iter().zip(&self.created).any(|(j, &c)| c && j.priority > 0);
        // Jobs of priority 1 to 9 ready at once, by (lane, level), in order of first job.
        let mut by_level = Levels::default();
        // Every lane a new row names, due now or later, in `P lanes` (the counts' list).
        let mut used_lanes: Vec<&[u8]> = vec![];
        for ((j, id), _) in self.jobs.iter_mut().zip(&self.ids).zip(&self.created).filter(|(_, &c)| c) {
            let due = match j.when {
                When::Delay(d) => later(now, d),
                When::At(t) => t.min(MAX_MS),
            };
            let ready = due <= now;
            // The data goes to the row as it is (the call reads no job again once it has planned).
            let digest = digest_hex(j);
            let data = std::mem::take(&mut j.data);
            let j: &NewJob = j;
            let unique = j.unique.as_ref().map(|u| u.key.clone());
            if let Some(u) = &j.unique {
                uniques_set.push(Write::ClaimUnique { key: u.key.clone(), id: id.clone(), ttl_ms: u.window_ms });
            }
            let new = NewRow {
                priority: j.priority,
                ready,
                data,
                due,
                max_attempts: j.max_attempts,
                created: now,
                digest,
                lane: j.lane.clone(),
                keep: j.keep,
                unique,
                wait: self.inbox.clone(),
            };
            let fields = RowFields::New(Box::new(new));
            w.push(Write::SetRow { id: id.clone(), fields });
            if let Some(l) = &j.lane {
                if !used_lanes.contains(&l.as_slice()) {
                    used_lanes.push(l);
                }
            }
            if ready && j.priority > 0 {
                by_level.push(j.lane.as_deref(), j.priority, id);
                if j.lane.is_none() {
                    continue;
                }
            }
            let level0 = j.priority == 0;
            match (&j.lane, ready) {
                (_, false) => scheduled.push(due, id),
                (Some(l), true) if !level0 => {
                    // Offered below with the lane's other jobs; pushed to its level.
                    if !by_lane.iter().any(|(name, _)| name == l) {
                        by_lane.push((l, vec![]));
                    }
                }
                (None, true) => flat.push(id),
                (Some(l), true) => match by_lane.iter_mut().find(|(name, _)| name == l) {
                    Some((_, ids)) => ids.push(id),
                    None => by_lane.push((l, vec![id])),
                },
            }
        }
        let mut offers = Offers::default();
        for (l, ids) in &by_lane {
            // Every lane a job may be ready in was read (`Add::new`): a job due later is
            // never ready, as the clock is short of `MAX_MS` (`clock`).
            let Some(i) = self.lanes.iter().position(|x| x == l) else {
                return Err(Error::server(ADD, "a job is ready in a lane it did not read"));
            };
            let (ctl, len) = &ctls[i];
            offers.offer(l, len.saturating_add((ids.len() + by_level.count_in(l)) as i64), ctl);
        }
        let flat_levels = by_level.any_flat();
        let ready = !flat.is_empty() || !by_lane.is_empty() || flat_levels;
        if (!flat.is_empty() && !pending_ok)
            || (!scheduled.is_empty() && !schedule_ok)
            || (offers.offered_any() && !ring_ok)
            || (ready && !wake_ok)
        {
            return Err(Error::layout(ADD, "pending, schedule, ring or wake has the wrong type"));
        }
        let woke = new_head(&t[1], scheduled.iter().map(|(due, _)| due));
        if !scheduled.is_empty() {
            w.push(Write::Schedule(scheduled));
        }
        if !flat.is_empty() {
            w.push(Write::MakeReady { lane: None, ids: Members::of(&flat) });
        }
        for (l, ids) in &by_lane {
            if !ids.is_empty() {
                w.push(Write::MakeReady { lane: Some(l.to_vec()), ids: Members::of(ids) });
            }
        }
        by_level.writes(&mut w);
        if mark_levels && created_priority {
            w.push(Write::MarkLevelsInUse);
        }
        if !flat.is_empty() || flat_levels || woke {
            offers.wake_flat();
        }
        if woke && !wake_ok {
            return Err(Error::layout(ADD, "pending, schedule, ring or wake has the wrong type"));
        }
        if ready || woke {
            offers.writes(&mut w);
        }
        if !used_lanes.is_empty() {
            w.push(Write::ListLanes(Members::of(&used_lanes)));
        }
        w.extend(uniques_set);
        // Answered with the jobs the keys name.
        for (id, a) in self.ids.iter_mut().zip(answer) {
            if let Some(a) = a {
                *id = a;
            }
        }
        if w.is_empty() {
            if self.jobs.iter().any(|j| j.unique.is_some()) {
                // The keys and the rows they name are confirmed by an `EXEC` of nothing
                // under the watch (else a new call reads them again).
                return Ok(Step::Exec(vec![]));
            }
            return Ok(Step::Done(std::mem::take(&mut self.ids)));
        }
        Ok(Step::Exec(w))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write;

    /// The digest and the generated id as first written (with `format!`): rows
    /// keep them, so their bytes never change.
    fn digest_as_written(job: &NewJob) -> String {
        let mut buf = b"emq.add.v1".to_vec();
        buf.extend_from_slice(format!("d{}:", job.data.len()).as_bytes());
        buf.extend_from_slice(&job.data);
        match &job.lane {
            Some(l) => {
                buf.extend_from_slice(format!("l{}:", l.len()).as_bytes());
                buf.extend_from_slice(l);
            }
            None => buf.push(b'n'),
        }
        buf.extend_from_slice(format!("m{};", job.max_attempts).as_bytes());
        match job.when {
            When::Delay(ms) => buf.extend_from_slice(format!("D{ms};").as_bytes()),
            When::At(t) => buf.extend_from_slice(format!("A{t};").as_bytes()),
        }
        let full = sha1_smol::Sha1::from(&buf).digest().bytes();
        full[..16].iter().fold(String::new(), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
    }

    #[test]
    fn digests_and_generated_ids_keep_their_bytes() {
        for data in [&b""[..], b"x", &[7u8; 300]] {
            for lane in [None, Some(b"l".to_vec()), Some(vec![b'z'; 120])] {
                for when in [
                    When::Delay(0),
                    When::Delay(1234),
                    When::Delay(u64::MAX),
                    When::At(0),
                    When::At(-7),
                    When::At(i64::MIN),
                    When::At(i64::MAX),
                ] {
                    for max_attempts in [1, 3, u32::MAX] {
                        let j = NewJob {
                            priority: 0,
                            id: None,
                            data: data.to_vec(),
                            when,
                            lane: lane.clone(),
                            max_attempts,
                            keep: None,
                            unique: None,
                        };
                        assert_eq!(digest(&j), digest_as_written(&j), "{j:?}");
                    }
                }
            }
        }
        for (now, tag, seq) in [(0, 0, 0), (1_764_650_000_000, 0xdead_beef, 42), (-5, 1, 1), (i64::MAX, u32::MAX, u64::MAX)] {
            let want = format!("{:012x}{tag:08x}{seq:012x}", now.max(0)).into_bytes();
            assert_eq!(generated_id(now, tag, seq), want, "{now} {tag} {seq}");
        }
    }
}

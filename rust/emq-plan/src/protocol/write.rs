//! The write plan, typed: every write the plans make, named for what it does
//! ([`Write`]), and the command each one is. This is the one place that decides
//! a write's command, its keys and its arguments: the client host renders the
//! writes straight into its send buffer ([`encode_into`]), and the server module
//! applies each variant on the key API and propagates it as the command it is
//! here ([`Write::args`]), so a replica or the AOF replays exactly these.
//!
//! A write names its keys by kind and name (`P job:ID`: the row's id) and takes
//! the queue's prefix when it is rendered, so no key is built on its own; the
//! ids, lane names and tokens a write lists are [`Members`], one buffer each.

use std::fmt;

use crate::names::{kind, Keys};
use crate::numbers::Decimal;
use crate::protocol::cmd::{push_array_head, push_bulk, Cmd};

/// Most wake tokens kept in `P wake` (SPEC §2): the trim every plan that writes
/// ends with ([`Write::TrimWake`]). The Lua scripts get it from the host, which
/// prepends it to their prelude.
pub const WAKE_MAX: i64 = 64;

/// How long a lease mark lives after its last write (ms, [`Write::MarkLease`]):
/// correctness never depends on it (a watch sees the write, and a mark gone or
/// expired is set again by the next write); it bounds the marks kept to the
/// seconds settled in the last minute or so.
pub const LEASE_MARK_KEEP_MS: u64 = 60_000;

/// What a lease mark holds: only its write matters to a watch, never its value.
pub const LEASE_MARK_VALUE: &[u8] = b"1";

/// How long a waiter's inbox lives after its last push (ms, [`Write::KeepInbox`]):
/// an inbox nobody pops any more goes by itself an hour later.
pub const INBOX_KEEP_MS: u64 = 3_600_000;

/// What an add of a job with a priority adds to `P promotions` once (SPEC §15):
/// a value of at least this says the queue's rows may hold `priority`, so its
/// promotes read that field. A promote reads `P promotions` anyway, so a queue
/// that uses no priority reads, per row, only `lane`, as it always did; counts
/// of promotes (`INCR`) never reach it.
pub const LEVELS_IN_USE: i64 = 1 << 40;

/// One write of a plan. Each variant's doc gives the command it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    // -- a job's row, `P job:ID`
    /// `HSET P job:ID field value…`: the fields of one change of the row.
    SetRow { id: Vec<u8>, fields: RowFields },
    /// `HDEL P job:ID token lease`: the row leaves its lease.
    DropLease { id: Vec<u8> },
    /// `HDEL P job:ID error_type traceback`: a fail that gives not both drops
    /// the earlier attempt's, so the row never pairs this error with another's.
    DropErrorDetail { id: Vec<u8> },
    /// `PEXPIREAT P job:ID at`: a done row kept until `at` (ms).
    ExpireRow { id: Vec<u8>, at: i64 },
    /// `DEL P job:ID…`: rows deleted (a done row not kept, dead rows trimmed).
    DeleteRows(Members),

    // -- a lane's control, `P lanectl:L`
    /// `HSET P lanectl:L field value`.
    SetLane { lane: Vec<u8>, field: LaneField },
    /// `HINCRBY P lanectl:L active by`: a claim's jobs take `by` of the lane's slots.
    TakeSlots { lane: Vec<u8>, by: i64 },

    // -- the sorted sets
    /// `ZADD P schedule due id…`: jobs due later, each at its time.
    Schedule(Scored),
    /// `ZADD P active deadline id…`: jobs claimed, leased until `deadline`.
    Lease { deadline: i64, ids: Members },
    /// `ZADD P active XX deadline id…`: leases extended, for jobs still in `active`.
    ExtendLeases { deadline: i64, ids: Members },
    /// `ZADD P dead at id…`: jobs made dead at `at`.
    Bury { at: i64, ids: Members },
    /// `ZADD P done at id…`: done rows kept, listed at their finish.
    ListDone { at: i64, ids: Members },
    /// `ZREM P schedule id…`: due jobs taken out of `schedule`.
    Unschedule(Members),
    /// `ZREM P active id…`: jobs that left `active` (settled, or stalled).
    LeaveActive(Members),
    /// `ZREM P dead id…`: dead jobs the retention trims.
    TrimDead(Members),
    /// `ZREMRANGEBYSCORE P done -inf (before`: the entries of done rows that
    /// finished before `before`, whose rows have expired.
    TrimDone { before: i64 },
    /// `ZADD P cancelled at id…`: cancelled rows kept, listed when the cancel took effect.
    ListCancelled { at: i64, ids: Members },
    /// `ZREMRANGEBYSCORE P cancelled -inf (before`: as [`Write::TrimDone`], for `P cancelled`.
    TrimCancelled { before: i64 },
    /// `ZADD P cancels at id…`: running jobs asked to stop, at `at`.
    AskToStop { at: i64, ids: Members },
    /// `ZREMRANGEBYSCORE P cancels -inf (before`: the requests older than the hour kept.
    TrimCancels { before: i64 },

    // -- the lists
    /// `RPUSH P pending id…` (`lane: None`) or `RPUSH P lane:L id…`: jobs ready to claim.
    MakeReady { lane: Option<Vec<u8>>, ids: Members },
    /// `LPOP P pending count`: the flat ids a claim takes.
    TakePending { count: usize },
    /// `LPOP P lane:L`: the head id a claim takes from a lane.
    TakeLaneHead { lane: Vec<u8> },
    /// `RPUSH P pending:<p> id…` (`lane: None`) or `RPUSH P plane:<p>:L id…`:
    /// jobs of priority `level` (1 to 9) ready to claim (SPEC §15).
    ReadyAt { lane: Option<Vec<u8>>, level: u8, ids: Members },
    /// `LPOP P pending:<p> count` or `LPOP P plane:<p>:L count`: ids a claim
    /// takes from the head of level `level` (1 to 9).
    TakeAt { lane: Option<Vec<u8>>, level: u8, count: usize },
    /// `HSET P flatctl|lanectl:L lvl:<p> 1`: level `level` holds work.
    MarkLevel { lane: Option<Vec<u8>>, level: u8 },
    /// `HDEL P flatctl|lanectl:L lvl:<p>`: level `level` was found empty.
    ClearLevel { lane: Option<Vec<u8>>, level: u8 },
    /// `RPUSH P ring lane…`: lanes offered to the ring.
    JoinRing(Members),
    /// `LMOVE P ring P ring LEFT RIGHT`: the lane a claim served goes to the back.
    RotateRing,
    /// `LPOP P ring`: the lane at the head leaves the ring (empty, or not servable).
    DropRingHead,
    /// `RPUSH P wake token…`: wake tokens for parked workers (a lane's name, or
    /// `""` for flat work).
    Wake(Members),
    /// `LTRIM P wake -WAKE_MAX -1`: `P wake` keeps its newest [`WAKE_MAX`] tokens.
    TrimWake,
    /// `LREM P pending 1 id` (`lane: None`) or `LREM P lane:L 1 id`: a ready job
    /// cancelled, taken out of its list (the first time it is listed).
    Dequeue { lane: Option<Vec<u8>>, id: Vec<u8> },
    /// `RPUSH P inbox:W id…`: the ids of jobs come to an outcome, for their waiter `W`.
    Notify { inbox: Vec<u8>, ids: Members },
    /// `PEXPIRE P inbox:W INBOX_KEEP_MS`: the inbox lives an hour past its last push.
    KeepInbox { inbox: Vec<u8> },

    // -- uniqueness, `P unique:K`
    /// `SET P unique:K id PX ttl_ms`: the job added under uniqueness key `K`, for the add's window.
    ClaimUnique { key: Vec<u8>, id: Vec<u8>, ttl_ms: u64 },

    // -- the guard's keys (`crate::protocol::guard`)
    /// `SET P leases:B 1 PX LEASE_MARK_KEEP_MS`: the lease mark of second `B`.
    MarkLease { second: i64 },
    /// `INCR P promotions`: a promote that took members.
    CountPromotion,
    /// `INCRBY P promotions LEVELS_IN_USE`: an add of a job with a priority
    /// where `P promotions` did not yet say the queue uses them (SPEC §15).
    MarkLevelsInUse,

    // -- the timers and schedules, `P timers` and `P schedules` (SPEC §14)
    /// `ZADD P timers at member…`: timers set (or moved) to their times.
    SetTimers(Scored),
    /// `ZREM P timers member…`: timers dropped.
    DropTimers(Members),
    /// `HSET P schedules name record`: a schedule's record written.
    SetSchedule { name: Vec<u8>, record: Vec<u8> },
    /// `HDEL P schedules name`: a schedule removed.
    DropSchedule { name: Vec<u8> },

    // -- the retention policy, `P retention`
    /// `HSET P retention field value…`.
    SetRetention(Vec<(&'static str, i64)>),

    // -- an operator's actions on jobs (`crate::operations`)
    /// `HDEL P job:ID finished cancel`: a dead or cancelled job retried is no
    /// longer finished, nor asked to stop.
    DropFinished { id: Vec<u8> },
    /// `PERSIST P job:ID`: a cancelled row retried is no longer kept for a time.
    PersistRow { id: Vec<u8> },
    /// `ZREM P cancels id…`: the requests to stop of cancelled jobs retried.
    ForgetStops(Members),
    /// `ZREM P dead id…`: dead jobs retried or deleted.
    LeaveDead(Members),
    /// `ZREM P done id…`: done rows deleted.
    LeaveDone(Members),
    /// `ZREM P cancelled ids`: cancelled rows deleted by an operator.
    LeaveCancelled(Members),
    /// `LREM P pending 1 id` (`lane: None`) or `LREM P lane:L 1 id`: a ready job deleted.
    Unready { lane: Option<Vec<u8>>, id: Vec<u8> },

    // -- the per-minute counters, `P stats:<minute>` (`jobs::counters`)
    /// `HINCRBY P stats:<minute> <kind> <by>`: `by` jobs of one kind settled in the minute.
    Count { minute: i64, kind: Counted, by: i64 },
    /// `PEXPIRE P stats:<minute> 90000000`: the minute's counters are kept 25 hours.
    KeepCounts { minute: i64 },

    /// `SADD P lanes L…`: lanes that have been used (added to or controlled), so
    /// that the counts and `lanes()` list them without `SCAN`.
    ListLanes(Members),

    // -- the registry (`crate::registry`: rendered with the registry's keys, `R`)
    /// `SADD R queues name`: a queue that has been used.
    RegisterQueue(Vec<u8>),
    /// `ZADD R workers expiry id`: a worker alive until `expiry` (ms).
    ListWorker { id: Vec<u8>, expiry: i64 },
    /// `HSET R worker:ID field value…`: what a worker says of itself.
    SetWorker { id: Vec<u8>, fields: Vec<(Vec<u8>, Vec<u8>)> },
    /// `PEXPIREAT R worker:ID at`.
    ExpireWorker { id: Vec<u8>, at: i64 },
    /// `ZREMRANGEBYSCORE R workers -inf (before`: workers that stopped beating.
    TrimWorkers { before: i64 },
    /// `ZREM R workers id`: a worker that stopped cleanly.
    UnlistWorker(Vec<u8>),
    /// `DEL R worker:ID`.
    DeleteWorker(Vec<u8>),
}

/// The fields a [`Write::SetRow`] sets, by the change of the row it records
/// (SPEC §2's row fields), in the order they are written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RowFields {
    /// ADD: the whole row of a new job (boxed: the other changes of a row, a
    /// sweep's thousand, stay small).
    New(Box<NewRow>),
    /// CLAIM: `state active attempts lease token claimed`.
    Claimed { attempts: i64, lease: i64, token: Vec<u8>, claimed: i64 },
    /// PROMOTE: `state pending`, the row is due.
    Ready,
    /// STALLED CHECK: `state pending|dead stalls [error stalled]`, dead past `max_stalled`.
    Stalled { stalls: i64, dead: bool },
    /// EXTEND: `lease`, the new deadline.
    Lease(i64),
    /// FAIL with attempts left: `state pending|scheduled error due
    /// [error_type T] [traceback B]`, retried at once when `ready`.
    Retry { ready: bool, error: Vec<u8>, due: i64, detail: Option<Box<ErrorDetail>> },
    /// FAIL of the last attempt: `state dead error finished [error_type T]
    /// [traceback B]`.
    Dead { error: Vec<u8>, finished: i64, detail: Option<Box<ErrorDetail>> },
    /// COMPLETE of a row that is kept: `state done finished [result R]`.
    Done { finished: i64, result: Option<Vec<u8>> },
    /// A cancel that took effect (SPEC §13): `state cancelled finished error cancelled`.
    Cancelled { finished: i64 },
    /// A dead job retried by an operator: `state pending attempts 0 stalls 0 due`,
    /// due now (its `error` is kept).
    Revived { due: i64 },
    /// PROGRESS of a held job: `progress value`.
    Progress(Vec<u8>),
    /// A waiter registered: `wait inboxes` (space-separated inbox ids).
    Waiters(Vec<u8>),
    /// A running job asked to stop: `cancel 1`.
    AskStop,
}

/// What a fail records beside its message (SPEC §13): the exception's class
/// name and its traceback text, each when given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorDetail {
    pub error_type: Option<Vec<u8>>,
    pub traceback: Option<Vec<u8>>,
}

impl ErrorDetail {
    /// How many fields it sets.
    fn count(detail: Option<&ErrorDetail>) -> usize {
        detail.map_or(0, |d| usize::from(d.error_type.is_some()) + usize::from(d.traceback.is_some()))
    }

    fn pairs(detail: Option<&ErrorDetail>, f: &mut impl FnMut(&'static Word, Arg<'_>)) {
        if let Some(d) = detail {
            if let Some(t) = &d.error_type {
                f(&word::ERROR_TYPE, Arg::Bytes(t));
            }
            if let Some(t) = &d.traceback {
                f(&word::TRACEBACK, Arg::Bytes(t));
            }
        }
    }
}

/// The whole row of a new job, `pending` when `ready`, else `scheduled`:
/// `state data due attempts(0) max_attempts created digest [lane] [keep]
/// [unique] [wait]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRow {
    pub ready: bool,
    pub data: Vec<u8>,
    pub due: i64,
    pub max_attempts: u32,
    pub created: i64,
    /// The request's digest, in hex (`jobs::add::digest`).
    pub digest: [u8; 32],
    pub lane: Option<Vec<u8>>,
    /// The job's own retention of its done (or cancelled) row, ms (`-1`: forever).
    pub keep: Option<i64>,
    /// The uniqueness key it was added under.
    pub unique: Option<Vec<u8>>,
    /// Its priority level (SPEC §15): written only when not 0.
    pub priority: u8,
    /// The inbox of a waiter registered by the add itself (SPEC §13).
    pub wait: Option<Vec<u8>>,
}

/// The field a [`Write::SetLane`] sets in `P lanectl:L`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneField {
    /// `active n`: the lane's jobs in `active`.
    Active(i64),
    /// `ring 1|0`: whether the lane is in the ring.
    InRing(bool),
    /// `paused 1|0`.
    Paused(bool),
    /// `limit n` (`0`: no limit).
    Limit(u64),
}

/// One argument of a write's command, as [`Write::args`] gives it: bytes, a
/// word the writes repeat, a key in parts, or a number rendered only where it
/// is written.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Bytes(&'a [u8]),
    Word(&'static Word),
    /// The queue's prefix, a kind (`job:`, `pending`) and a name (empty for the
    /// queue's own keys), end to end.
    Key([&'a [u8]; 3]),
    Int(i64),
    Uint(u64),
    /// `(n`: a score bound that leaves `n` out.
    Below(i64),
}

impl Arg<'_> {
    /// Appends the argument's bytes to `out`.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            Arg::Bytes(b) => out.extend_from_slice(b),
            Arg::Word(w) => out.extend_from_slice(w.bytes()),
            Arg::Key(parts) => parts.iter().for_each(|p| out.extend_from_slice(p)),
            Arg::Int(n) => out.extend_from_slice(Decimal::int(*n).as_bytes()),
            Arg::Uint(n) => out.extend_from_slice(Decimal::uint(*n).as_bytes()),
            Arg::Below(n) => {
                out.push(b'(');
                out.extend_from_slice(Decimal::int(*n).as_bytes());
            }
        }
    }

    /// Appends the argument RESP-encoded (`$<len>\r\n<bytes>\r\n`) to `out`.
    #[inline]
    fn push_bulk(&self, out: &mut Vec<u8>) {
        match self {
            Arg::Bytes(b) => push_bulk(out, &[b]),
            Arg::Word(w) => out.extend_from_slice(w.encoded()),
            Arg::Key(parts) => push_bulk(out, parts),
            Arg::Int(n) => push_bulk(out, &[Decimal::int(*n).as_bytes()]),
            Arg::Uint(n) => push_bulk(out, &[Decimal::uint(*n).as_bytes()]),
            Arg::Below(n) => push_bulk(out, &[b"(", Decimal::int(*n).as_bytes()]),
        }
    }
}

/// A kind of settled job the per-minute counters count (`P stats:<minute>`'s fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    Completed,
    Retried,
    Dead,
    Cancelled,
    /// Put back by the stalled check, its lease run out.
    Recovered,
}

impl Counted {
    /// Every kind, in the order a call writes them (so a minute's hash lists its
    /// fields in one order whichever backend wrote it first).
    pub const ALL: [Counted; 5] = [Counted::Completed, Counted::Retried, Counted::Dead, Counted::Cancelled, Counted::Recovered];

    /// The hash field.
    pub fn field(self) -> &'static Word {
        match self {
            Counted::Completed => &word::COMPLETED,
            Counted::Retried => &word::RETRIED,
            Counted::Dead => &word::DEAD,
            Counted::Cancelled => &word::CANCELLED,
            Counted::Recovered => &word::RECOVERED,
        }
    }
}

/// How long a minute's counters are kept after its last write (ms): 25 hours,
/// so a day's chart always has its first minute.
pub const COUNTS_KEEP_MS: u64 = 25 * 3_600_000;

/// A word the writes repeat (a command's name, a field's, a state), with its
/// RESP encoding made when the crate is built: rendering it is one copy.
pub struct Word {
    /// `$<len>\r\n<word>\r\n`.
    resp: [u8; 32],
    /// Where the word starts in `resp`, and its length.
    at: u8,
    len: u8,
}

impl Word {
    /// The word `w` (at most 25 bytes: its encoding fits).
    pub const fn new(w: &str) -> Word {
        let b = w.as_bytes();
        assert!(b.len() <= 25, "a word of at most 25 bytes");
        let mut resp = [0u8; 32];
        resp[0] = b'$';
        let mut at = 1;
        if b.len() >= 10 {
            resp[at] = b'0' + (b.len() / 10) as u8;
            at += 1;
        }
        resp[at] = b'0' + (b.len() % 10) as u8;
        resp[at + 1] = b'\r';
        resp[at + 2] = b'\n';
        at += 3;
        let mut i = 0;
        while i < b.len() {
            resp[at + i] = b[i];
            i += 1;
        }
        resp[at + i] = b'\r';
        resp[at + i + 1] = b'\n';
        Word { resp, at: at as u8, len: b.len() as u8 }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.resp[usize::from(self.at)..usize::from(self.at + self.len)]
    }

    /// The word RESP-encoded, as an argument of a command.
    pub fn encoded(&self) -> &[u8] {
        &self.resp[..usize::from(self.at + self.len) + 2]
    }

    /// The word as text (every word is ASCII).
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.bytes()).unwrap_or_default()
    }
}

impl fmt::Debug for Word {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Words end to end, RESP-encoded when the crate is built: a command's head
/// (`*<argc>` and its name) or the fixed arguments after a key. The writes a
/// sweep makes a thousand of are rendered from these, one copy for each run
/// of fixed words (`Write::encode_into`).
struct Frag {
    buf: [u8; 64],
    len: u8,
}

impl Frag {
    /// `*<argc>\r\n` (with `argc`, below 100) and each of `words`, encoded.
    const fn new(argc: Option<usize>, words: &[&str]) -> Frag {
        let mut buf = [0u8; 64];
        let mut at = 0;
        if let Some(n) = argc {
            assert!(n < 100, "a head of fewer than 100 arguments");
            buf[0] = b'*';
            at = 1;
            if n >= 10 {
                buf[at] = b'0' + (n / 10) as u8;
                at += 1;
            }
            buf[at] = b'0' + (n % 10) as u8;
            buf[at + 1] = b'\r';
            buf[at + 2] = b'\n';
            at += 3;
        }
        let mut i = 0;
        while i < words.len() {
            let w = Word::new(words[i]);
            let len = w.at as usize + w.len as usize + 2;
            let mut j = 0;
            while j < len {
                buf[at + j] = w.resp[j];
                j += 1;
            }
            at += len;
            i += 1;
        }
        Frag { buf, len: at as u8 }
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..usize::from(self.len)]
    }
}

/// The runs of fixed words of a sweep's row writes.
mod frag {
    use crate::protocol::write::Frag;

    pub const HSET_4: Frag = Frag::new(Some(4), &["HSET"]);
    pub const HSET_6: Frag = Frag::new(Some(6), &["HSET"]);
    pub const HSET_8: Frag = Frag::new(Some(8), &["HSET"]);
    pub const HDEL_4: Frag = Frag::new(Some(4), &["HDEL"]);
    pub const STATE_PENDING: Frag = Frag::new(None, &["state", "pending"]);
    pub const STATE_PENDING_STALLS: Frag = Frag::new(None, &["state", "pending", "stalls"]);
    pub const STATE_DEAD_STALLS: Frag = Frag::new(None, &["state", "dead", "stalls"]);
    pub const ERROR_STALLED: Frag = Frag::new(None, &["error", "stalled"]);
    pub const TOKEN_LEASE: Frag = Frag::new(None, &["token", "lease"]);
}

/// The words of the writes.
mod word {
    use crate::protocol::write::Word;

    pub const HSET: Word = Word::new("HSET");
    pub const HDEL: Word = Word::new("HDEL");
    pub const PEXPIREAT: Word = Word::new("PEXPIREAT");
    pub const PERSIST: Word = Word::new("PERSIST");
    pub const DEL: Word = Word::new("DEL");
    pub const HINCRBY: Word = Word::new("HINCRBY");
    pub const ZADD: Word = Word::new("ZADD");
    pub const ZREM: Word = Word::new("ZREM");
    pub const ZREMRANGEBYSCORE: Word = Word::new("ZREMRANGEBYSCORE");
    pub const RPUSH: Word = Word::new("RPUSH");
    pub const LPOP: Word = Word::new("LPOP");
    pub const LMOVE: Word = Word::new("LMOVE");
    pub const LTRIM: Word = Word::new("LTRIM");
    pub const SET: Word = Word::new("SET");
    pub const INCR: Word = Word::new("INCR");
    pub const INCRBY: Word = Word::new("INCRBY");

    pub const STATE: Word = Word::new("state");
    pub const DATA: Word = Word::new("data");
    pub const DUE: Word = Word::new("due");
    pub const ATTEMPTS: Word = Word::new("attempts");
    pub const MAX_ATTEMPTS: Word = Word::new("max_attempts");
    pub const CREATED: Word = Word::new("created");
    pub const DIGEST: Word = Word::new("digest");
    pub const LANE: Word = Word::new("lane");
    pub const LEASE: Word = Word::new("lease");
    pub const TOKEN: Word = Word::new("token");
    pub const CLAIMED: Word = Word::new("claimed");
    pub const STALLS: Word = Word::new("stalls");
    pub const ERROR: Word = Word::new("error");
    pub const FINISHED: Word = Word::new("finished");
    pub const ACTIVE: Word = Word::new("active");
    /// `lvl:<p>`, by `p` (index 0 unused: level 0 is always looked at).
    pub const LEVEL_FIELDS: [Word; 10] = [
        Word::new("lvl:0"),
        Word::new("lvl:1"),
        Word::new("lvl:2"),
        Word::new("lvl:3"),
        Word::new("lvl:4"),
        Word::new("lvl:5"),
        Word::new("lvl:6"),
        Word::new("lvl:7"),
        Word::new("lvl:8"),
        Word::new("lvl:9"),
    ];
    pub const RING: Word = Word::new("ring");
    pub const PAUSED: Word = Word::new("paused");
    pub const LIMIT: Word = Word::new("limit");

    pub const PENDING: Word = Word::new("pending");
    pub const SCHEDULED: Word = Word::new("scheduled");
    pub const DEAD: Word = Word::new("dead");
    pub const DONE: Word = Word::new("done");
    pub const STALLED: Word = Word::new("stalled");
    pub const ZERO: Word = Word::new("0");
    pub const ONE: Word = Word::new("1");
    pub const MINUS_ONE: Word = Word::new("-1");
    pub const XX: Word = Word::new("XX");
    pub const NEG_INF: Word = Word::new("-inf");
    pub const LEFT: Word = Word::new("LEFT");
    pub const RIGHT: Word = Word::new("RIGHT");
    pub const PX: Word = Word::new("PX");

    pub const SADD: Word = Word::new("SADD");
    pub const LREM: Word = Word::new("LREM");
    pub const PEXPIRE: Word = Word::new("PEXPIRE");
    pub const RESULT: Word = Word::new("result");
    pub const ERROR_TYPE: Word = Word::new("error_type");
    pub const TRACEBACK: Word = Word::new("traceback");
    pub const PROGRESS: Word = Word::new("progress");
    pub const WAIT: Word = Word::new("wait");
    pub const CANCEL: Word = Word::new("cancel");
    pub const KEEP: Word = Word::new("keep");
    pub const UNIQUE: Word = Word::new("unique");
    pub const PRIORITY: Word = Word::new("priority");
    pub const CANCELLED: Word = Word::new("cancelled");
    pub const COMPLETED: Word = Word::new("completed");
    pub const RETRIED: Word = Word::new("retried");
    pub const RECOVERED: Word = Word::new("recovered");
}

impl RowFields {
    /// How many fields it sets.
    pub fn count(&self) -> usize {
        match self {
            RowFields::New(new) => {
                7 + usize::from(new.lane.is_some())
                    + usize::from(new.keep.is_some())
                    + usize::from(new.unique.is_some())
                    + usize::from(new.priority > 0)
                    + usize::from(new.wait.is_some())
            }
            RowFields::Claimed { .. } => 5,
            RowFields::Ready | RowFields::Lease(_) | RowFields::Progress(_) | RowFields::Waiters(_) | RowFields::AskStop => 1,
            RowFields::Stalled { dead, .. } => 2 + usize::from(*dead),
            RowFields::Retry { detail, .. } | RowFields::Dead { detail, .. } => 3 + ErrorDetail::count(detail.as_deref()),
            RowFields::Done { result, .. } => 2 + usize::from(result.is_some()),
            RowFields::Cancelled { .. } => 3,
            RowFields::Revived { .. } => 4,
        }
    }

    /// Each field and its value, in order.
    pub fn pairs(&self, f: &mut impl FnMut(&'static Word, Arg<'_>)) {
        let state = |ready: bool| Arg::Word(if ready { &word::PENDING } else { &word::SCHEDULED });
        match self {
            RowFields::New(new) => {
                let NewRow { ready, data, due, max_attempts, created, digest, lane, keep, unique, priority, wait } = &**new;
                f(&word::STATE, state(*ready));
                f(&word::DATA, Arg::Bytes(data));
                f(&word::DUE, Arg::Int(*due));
                f(&word::ATTEMPTS, Arg::Word(&word::ZERO));
                f(&word::MAX_ATTEMPTS, Arg::Uint(u64::from(*max_attempts)));
                f(&word::CREATED, Arg::Int(*created));
                f(&word::DIGEST, Arg::Bytes(digest));
                if let Some(l) = lane {
                    f(&word::LANE, Arg::Bytes(l));
                }
                if let Some(k) = keep {
                    f(&word::KEEP, Arg::Int(*k));
                }
                if let Some(u) = unique {
                    f(&word::UNIQUE, Arg::Bytes(u));
                }
                if *priority > 0 {
                    f(&word::PRIORITY, Arg::Uint(u64::from(*priority)));
                }
                if let Some(w) = wait {
                    f(&word::WAIT, Arg::Bytes(w));
                }
            }
            RowFields::Claimed { attempts, lease, token, claimed } => {
                f(&word::STATE, Arg::Word(&word::ACTIVE));
                f(&word::ATTEMPTS, Arg::Int(*attempts));
                f(&word::LEASE, Arg::Int(*lease));
                f(&word::TOKEN, Arg::Bytes(token));
                f(&word::CLAIMED, Arg::Int(*claimed));
            }
            RowFields::Ready => f(&word::STATE, Arg::Word(&word::PENDING)),
            RowFields::Stalled { stalls, dead } => {
                f(&word::STATE, Arg::Word(if *dead { &word::DEAD } else { &word::PENDING }));
                f(&word::STALLS, Arg::Int(*stalls));
                if *dead {
                    f(&word::ERROR, Arg::Word(&word::STALLED));
                }
            }
            RowFields::Lease(deadline) => f(&word::LEASE, Arg::Int(*deadline)),
            RowFields::Retry { ready, error, due, detail } => {
                f(&word::STATE, state(*ready));
                f(&word::ERROR, Arg::Bytes(error));
                f(&word::DUE, Arg::Int(*due));
                ErrorDetail::pairs(detail.as_deref(), f);
            }
            RowFields::Dead { error, finished, detail } => {
                f(&word::STATE, Arg::Word(&word::DEAD));
                f(&word::ERROR, Arg::Bytes(error));
                f(&word::FINISHED, Arg::Int(*finished));
                ErrorDetail::pairs(detail.as_deref(), f);
            }
            RowFields::Done { finished, result } => {
                f(&word::STATE, Arg::Word(&word::DONE));
                f(&word::FINISHED, Arg::Int(*finished));
                if let Some(r) = result {
                    f(&word::RESULT, Arg::Bytes(r));
                }
            }
            RowFields::Revived { due } => {
                f(&word::STATE, Arg::Word(&word::PENDING));
                f(&word::ATTEMPTS, Arg::Word(&word::ZERO));
                f(&word::STALLS, Arg::Word(&word::ZERO));
                f(&word::DUE, Arg::Int(*due));
            }
            RowFields::Cancelled { finished } => {
                f(&word::STATE, Arg::Word(&word::CANCELLED));
                f(&word::FINISHED, Arg::Int(*finished));
                f(&word::ERROR, Arg::Word(&word::CANCELLED));
            }
            RowFields::Progress(v) => f(&word::PROGRESS, Arg::Bytes(v)),
            RowFields::Waiters(v) => f(&word::WAIT, Arg::Bytes(v)),
            RowFields::AskStop => f(&word::CANCEL, Arg::Word(&word::ONE)),
        }
    }
}

impl LaneField {
    /// The field and its value.
    pub fn pair(&self) -> (&'static Word, Arg<'static>) {
        let flag = |on: bool| Arg::Word(if on { &word::ONE } else { &word::ZERO });
        match *self {
            LaneField::Active(n) => (&word::ACTIVE, Arg::Int(n)),
            LaneField::InRing(on) => (&word::RING, flag(on)),
            LaneField::Paused(on) => (&word::PAUSED, flag(on)),
            LaneField::Limit(n) => (&word::LIMIT, Arg::Uint(n)),
        }
    }
}

impl Write {
    /// The command's name.
    pub fn name(&self) -> &'static str {
        self.command().as_str()
    }

    /// The command's name, as a word.
    pub fn command(&self) -> &'static Word {
        match self {
            Write::SetRow { .. } | Write::SetLane { .. } | Write::SetRetention(_) | Write::SetWorker { .. } | Write::SetSchedule { .. } => {
                &word::HSET
            }
            Write::DropLease { .. } | Write::DropErrorDetail { .. } | Write::DropFinished { .. } | Write::DropSchedule { .. } => {
                &word::HDEL
            }
            Write::ExpireRow { .. } | Write::ExpireWorker { .. } => &word::PEXPIREAT,
            Write::PersistRow { .. } => &word::PERSIST,
            Write::DeleteRows(_) | Write::DeleteWorker(_) => &word::DEL,
            Write::TakeSlots { .. } | Write::Count { .. } => &word::HINCRBY,
            Write::ReadyAt { .. } => &word::RPUSH,
            Write::TakeAt { .. } => &word::LPOP,
            Write::MarkLevel { .. } => &word::HSET,
            Write::ClearLevel { .. } => &word::HDEL,
            Write::Schedule(_)
            | Write::Lease { .. }
            | Write::ExtendLeases { .. }
            | Write::Bury { .. }
            | Write::ListDone { .. }
            | Write::ListCancelled { .. }
            | Write::AskToStop { .. }
            | Write::SetTimers(_)
            | Write::ListWorker { .. } => &word::ZADD,
            Write::Unschedule(_)
            | Write::LeaveActive(_)
            | Write::TrimDead(_)
            | Write::DropTimers(_)
            | Write::LeaveDead(_)
            | Write::LeaveDone(_)
            | Write::LeaveCancelled(_)
            | Write::ForgetStops(_)
            | Write::UnlistWorker(_) => &word::ZREM,
            Write::TrimDone { .. } | Write::TrimCancelled { .. } | Write::TrimCancels { .. } | Write::TrimWorkers { .. } => {
                &word::ZREMRANGEBYSCORE
            }
            Write::MakeReady { .. } | Write::JoinRing(_) | Write::Wake(_) | Write::Notify { .. } => &word::RPUSH,
            Write::Dequeue { .. } | Write::Unready { .. } => &word::LREM,
            Write::KeepInbox { .. } | Write::KeepCounts { .. } => &word::PEXPIRE,
            Write::ClaimUnique { .. } => &word::SET,
            Write::RegisterQueue(_) | Write::ListLanes(_) => &word::SADD,
            Write::TakePending { .. } | Write::TakeLaneHead { .. } | Write::DropRingHead => &word::LPOP,
            Write::RotateRing => &word::LMOVE,
            Write::TrimWake => &word::LTRIM,
            Write::MarkLease { .. } => &word::SET,
            Write::CountPromotion => &word::INCR,
            Write::MarkLevelsInUse => &word::INCRBY,
        }
    }

    /// Calls `f` with the parts of the key the write names first (the only one,
    /// but for `DEL` of several rows and the ring's rotation).
    pub fn key<R>(&self, keys: &Keys, f: impl FnOnce([&[u8]; 3]) -> R) -> R {
        let own = |k: &'static [u8]| keys.parts(k, b"");
        match self {
            Write::SetRow { id, .. }
            | Write::DropLease { id }
            | Write::DropErrorDetail { id }
            | Write::ExpireRow { id, .. }
            | Write::DropFinished { id }
            | Write::PersistRow { id } => f(keys.parts(kind::JOB, id)),
            Write::ForgetStops(_) => f(own(kind::CANCELS)),
            Write::LeaveDead(_) => f(own(kind::DEAD)),
            Write::LeaveDone(_) => f(own(kind::DONE)),
            Write::LeaveCancelled(_) => f(own(kind::CANCELLED)),
            Write::Unready { lane: None, .. } => f(own(kind::PENDING)),
            Write::Unready { lane: Some(lane), .. } => f(keys.parts(kind::LANE, lane)),
            Write::RegisterQueue(_) => f(own(kind::QUEUES)),
            Write::ListLanes(_) => f(own(kind::LANES)),
            Write::ListWorker { .. } | Write::TrimWorkers { .. } | Write::UnlistWorker(_) => f(own(kind::WORKERS)),
            Write::SetWorker { id, .. } | Write::ExpireWorker { id, .. } | Write::DeleteWorker(id) => f(keys.parts(kind::WORKER, id)),
            Write::DeleteRows(ids) => f(keys.parts(kind::JOB, ids.first().unwrap_or_default())),
            Write::SetLane { lane, .. } | Write::TakeSlots { lane, .. } => f(keys.parts(kind::LANECTL, lane)),
            Write::Schedule(_) | Write::Unschedule(_) => f(own(kind::SCHEDULE)),
            Write::Lease { .. } | Write::ExtendLeases { .. } | Write::LeaveActive(_) => f(own(kind::ACTIVE)),
            Write::Bury { .. } | Write::TrimDead(_) => f(own(kind::DEAD)),
            Write::ListDone { .. } | Write::TrimDone { .. } => f(own(kind::DONE)),
            Write::ListCancelled { .. } | Write::TrimCancelled { .. } => f(own(kind::CANCELLED)),
            Write::AskToStop { .. } | Write::TrimCancels { .. } => f(own(kind::CANCELS)),
            Write::MakeReady { lane: None, .. } | Write::TakePending { .. } | Write::Dequeue { lane: None, .. } => f(own(kind::PENDING)),
            Write::MakeReady { lane: Some(lane), .. } | Write::TakeLaneHead { lane } | Write::Dequeue { lane: Some(lane), .. } => {
                f(keys.parts(kind::LANE, lane))
            }
            Write::ReadyAt { lane: None, level, .. } | Write::TakeAt { lane: None, level, .. } => {
                f(own(kind::PENDING_AT[usize::from(*level)]))
            }
            Write::ReadyAt { lane: Some(lane), level, .. } | Write::TakeAt { lane: Some(lane), level, .. } => {
                f(keys.parts(kind::LANE_AT[usize::from(*level)], lane))
            }
            Write::MarkLevel { lane: None, .. } | Write::ClearLevel { lane: None, .. } => f(own(kind::FLATCTL)),
            Write::MarkLevel { lane: Some(lane), .. } | Write::ClearLevel { lane: Some(lane), .. } => f(keys.parts(kind::LANECTL, lane)),
            Write::Notify { inbox, .. } | Write::KeepInbox { inbox } => f(keys.parts(kind::INBOX, inbox)),
            Write::ClaimUnique { key, .. } => f(keys.parts(kind::UNIQUE, key)),
            Write::JoinRing(_) | Write::RotateRing | Write::DropRingHead => f(own(kind::RING)),
            Write::Wake(_) | Write::TrimWake => f(own(kind::WAKE)),
            Write::MarkLease { second } => f(keys.parts(kind::LEASES, Decimal::int(*second).as_bytes())),
            Write::CountPromotion | Write::MarkLevelsInUse => f(own(kind::PROMOTIONS)),
            Write::Count { minute, .. } | Write::KeepCounts { minute } => f(keys.parts(kind::STATS, Decimal::int(*minute).as_bytes())),
            Write::SetRetention(_) => f(own(kind::RETENTION)),
            Write::SetTimers(_) | Write::DropTimers(_) => f(own(kind::TIMERS)),
            Write::SetSchedule { .. } | Write::DropSchedule { .. } => f(own(kind::SCHEDULES)),
        }
    }

    /// Appends the key the write names first ([`Write::key`]) to `out`.
    pub fn key_into(&self, keys: &Keys, out: &mut Vec<u8>) {
        self.key(keys, |parts| parts.iter().for_each(|p| out.extend_from_slice(p)));
    }

    /// Calls `f` with each argument of the command after its name, in order:
    /// the key first, then what the write sets, adds or removes.
    pub fn args(&self, keys: &Keys, f: &mut impl FnMut(Arg<'_>)) {
        self.key(keys, |parts| f(Arg::Key(parts)));
        match self {
            Write::SetRow { fields, .. } => fields.pairs(&mut |field, value| {
                f(Arg::Word(field));
                f(value);
            }),
            Write::DropLease { .. } => {
                f(Arg::Word(&word::TOKEN));
                f(Arg::Word(&word::LEASE));
            }
            Write::DropErrorDetail { .. } => {
                f(Arg::Word(&word::ERROR_TYPE));
                f(Arg::Word(&word::TRACEBACK));
            }
            Write::ExpireRow { at, .. } | Write::ExpireWorker { at, .. } => f(Arg::Int(*at)),
            Write::DropFinished { .. } => {
                f(Arg::Word(&word::FINISHED));
                f(Arg::Word(&word::CANCEL));
            }
            Write::PersistRow { .. } => {}
            Write::LeaveDead(ids)
            | Write::LeaveDone(ids)
            | Write::LeaveCancelled(ids)
            | Write::ForgetStops(ids)
            | Write::ListLanes(ids) => {
                ids.iter().for_each(|id| f(Arg::Bytes(id)));
            }
            Write::Unready { id, .. } => {
                f(Arg::Word(&word::ONE));
                f(Arg::Bytes(id));
            }
            Write::RegisterQueue(member) | Write::UnlistWorker(member) => f(Arg::Bytes(member)),
            Write::ListWorker { id, expiry } => {
                f(Arg::Int(*expiry));
                f(Arg::Bytes(id));
            }
            Write::SetWorker { fields, .. } => {
                for (name, value) in fields {
                    f(Arg::Bytes(name));
                    f(Arg::Bytes(value));
                }
            }
            Write::TrimWorkers { before } => {
                f(Arg::Word(&word::NEG_INF));
                f(Arg::Below(*before));
            }
            Write::DeleteWorker(_) => {}
            Write::DeleteRows(ids) => ids.iter().skip(1).for_each(|id| f(Arg::Key(keys.parts(kind::JOB, id)))),
            Write::SetLane { field, .. } => {
                let (name, value) = field.pair();
                f(Arg::Word(name));
                f(value);
            }
            Write::TakeSlots { by, .. } => {
                f(Arg::Word(&word::ACTIVE));
                f(Arg::Int(*by));
            }
            Write::Schedule(due) | Write::SetTimers(due) => {
                for (score, id) in due.iter() {
                    f(Arg::Int(score));
                    f(Arg::Bytes(id));
                }
            }
            Write::ExtendLeases { deadline, ids } => {
                f(Arg::Word(&word::XX));
                scored(f, *deadline, ids);
            }
            Write::Lease { deadline: at, ids }
            | Write::Bury { at, ids }
            | Write::ListDone { at, ids }
            | Write::ListCancelled { at, ids }
            | Write::AskToStop { at, ids } => scored(f, *at, ids),
            Write::Unschedule(ids)
            | Write::LeaveActive(ids)
            | Write::TrimDead(ids)
            | Write::MakeReady { ids, .. }
            | Write::JoinRing(ids)
            | Write::Wake(ids)
            | Write::DropTimers(ids)
            | Write::Notify { ids, .. } => ids.iter().for_each(|id| f(Arg::Bytes(id))),
            Write::SetSchedule { name, record } => {
                f(Arg::Bytes(name));
                f(Arg::Bytes(record));
            }
            Write::DropSchedule { name } => f(Arg::Bytes(name)),
            Write::TrimDone { before } | Write::TrimCancelled { before } | Write::TrimCancels { before } => {
                f(Arg::Word(&word::NEG_INF));
                f(Arg::Below(*before));
            }
            Write::Dequeue { id, .. } => {
                f(Arg::Word(&word::ONE));
                f(Arg::Bytes(id));
            }
            Write::KeepInbox { .. } => f(Arg::Uint(INBOX_KEEP_MS)),
            Write::Count { kind, by, .. } => {
                f(Arg::Word(kind.field()));
                f(Arg::Int(*by));
            }
            Write::KeepCounts { .. } => f(Arg::Uint(COUNTS_KEEP_MS)),
            Write::ClaimUnique { id, ttl_ms, .. } => {
                f(Arg::Bytes(id));
                f(Arg::Word(&word::PX));
                f(Arg::Uint(*ttl_ms));
            }
            Write::TakePending { count } | Write::TakeAt { count, .. } => f(Arg::Uint(*count as u64)),
            Write::ReadyAt { ids, .. } => ids.iter().for_each(|id| f(Arg::Bytes(id))),
            Write::MarkLevel { level, .. } => {
                f(Arg::Word(level_field(*level)));
                f(Arg::Word(&word::ONE));
            }
            Write::ClearLevel { level, .. } => f(Arg::Word(level_field(*level))),
            Write::TakeLaneHead { .. } | Write::DropRingHead | Write::CountPromotion => {}
            Write::MarkLevelsInUse => f(Arg::Int(LEVELS_IN_USE)),
            Write::RotateRing => {
                self.key(keys, |parts| f(Arg::Key(parts)));
                f(Arg::Word(&word::LEFT));
                f(Arg::Word(&word::RIGHT));
            }
            Write::TrimWake => {
                f(Arg::Int(-WAKE_MAX));
                f(Arg::Word(&word::MINUS_ONE));
            }
            Write::MarkLease { .. } => {
                f(Arg::Bytes(LEASE_MARK_VALUE));
                f(Arg::Word(&word::PX));
                f(Arg::Uint(LEASE_MARK_KEEP_MS));
            }
            Write::SetRetention(fields) => {
                for (name, value) in fields {
                    f(Arg::Bytes(name.as_bytes()));
                    f(Arg::Int(*value));
                }
            }
        }
    }

    /// How many arguments the command has, its name included: what
    /// [`Write::args`] gives, counted without rendering them (a test holds the
    /// two together for every write).
    pub fn argc(&self) -> usize {
        match self {
            Write::SetRow { fields, .. } => 2 + 2 * fields.count(),
            Write::DropLease { .. }
            | Write::DropErrorDetail { .. }
            | Write::SetLane { .. }
            | Write::TakeSlots { .. }
            | Write::TrimDone { .. }
            | Write::TrimCancelled { .. }
            | Write::TrimCancels { .. }
            | Write::TrimWake
            | Write::Dequeue { .. }
            | Write::Unready { .. }
            | Write::ListWorker { .. }
            | Write::TrimWorkers { .. }
            | Write::SetSchedule { .. }
            | Write::MarkLevel { .. }
            | Write::DropFinished { .. }
            | Write::Count { .. } => 4,
            Write::TakeAt { .. } | Write::ClearLevel { .. } => 3,
            Write::ReadyAt { ids, .. } => 2 + ids.len(),
            Write::ExpireRow { .. }
            | Write::TakePending { .. }
            | Write::KeepInbox { .. }
            | Write::ExpireWorker { .. }
            | Write::RegisterQueue(_)
            | Write::UnlistWorker(_)
            | Write::DropSchedule { .. }
            | Write::KeepCounts { .. } => 3,
            Write::ClaimUnique { .. } | Write::RotateRing | Write::MarkLease { .. } => 5,
            Write::DeleteWorker(_) | Write::PersistRow { .. } => 2,
            Write::LeaveDead(ids)
            | Write::LeaveDone(ids)
            | Write::LeaveCancelled(ids)
            | Write::ForgetStops(ids)
            | Write::ListLanes(ids) => 2 + ids.len(),
            Write::SetWorker { fields, .. } => 2 + 2 * fields.len(),
            Write::DeleteRows(ids) => 1 + ids.len(),
            Write::Schedule(due) | Write::SetTimers(due) => 2 + 2 * due.len(),
            Write::Lease { ids, .. }
            | Write::Bury { ids, .. }
            | Write::ListDone { ids, .. }
            | Write::ListCancelled { ids, .. }
            | Write::AskToStop { ids, .. } => 2 + 2 * ids.len(),
            Write::ExtendLeases { ids, .. } => 3 + 2 * ids.len(),
            Write::Unschedule(ids)
            | Write::LeaveActive(ids)
            | Write::TrimDead(ids)
            | Write::MakeReady { ids, .. }
            | Write::JoinRing(ids)
            | Write::Wake(ids)
            | Write::DropTimers(ids)
            | Write::Notify { ids, .. } => 2 + ids.len(),
            Write::TakeLaneHead { .. } | Write::DropRingHead | Write::CountPromotion => 2,
            Write::MarkLevelsInUse => 3,
            Write::SetRetention(fields) => 2 + 2 * fields.len(),
        }
    }

    /// Appends the command, RESP-encoded, to `out`: the writes a sweep makes
    /// one or two of a row from their runs of fixed words (`Frag`), the others
    /// argument by argument ([`Write::args`]); a test holds both to the command.
    pub fn encode_into(&self, keys: &Keys, out: &mut Vec<u8>) {
        let row = |out: &mut Vec<u8>, head: &Frag, id: &[u8], tail: &Frag| {
            out.extend_from_slice(head.bytes());
            push_bulk(out, &keys.parts(kind::JOB, id));
            out.extend_from_slice(tail.bytes());
        };
        match self {
            Write::SetRow { id, fields: RowFields::Ready } => row(out, &frag::HSET_4, id, &frag::STATE_PENDING),
            Write::SetRow { id, fields: RowFields::Stalled { stalls, dead: false } } => {
                row(out, &frag::HSET_6, id, &frag::STATE_PENDING_STALLS);
                Arg::Int(*stalls).push_bulk(out);
            }
            Write::SetRow { id, fields: RowFields::Stalled { stalls, dead: true } } => {
                row(out, &frag::HSET_8, id, &frag::STATE_DEAD_STALLS);
                Arg::Int(*stalls).push_bulk(out);
                out.extend_from_slice(frag::ERROR_STALLED.bytes());
            }
            Write::DropLease { id } => row(out, &frag::HDEL_4, id, &frag::TOKEN_LEASE),
            _ => {
                push_array_head(out, self.argc());
                out.extend_from_slice(self.command().encoded());
                self.args(keys, &mut |a| a.push_bulk(out));
            }
        }
    }

    /// The command as a [`Cmd`] (what tests and the fuzz targets compare).
    pub fn to_cmd(&self, keys: &Keys) -> Cmd {
        let mut buf = Vec::with_capacity(64);
        buf.extend_from_slice(self.command().encoded());
        let mut argc = 1;
        self.args(keys, &mut |a| {
            a.push_bulk(&mut buf);
            argc += 1;
        });
        Cmd::from_encoded(argc, buf)
    }
}

/// The control field that says priority level `level` holds work: `lvl:<p>`.
pub fn level_field(level: u8) -> &'static Word {
    &word::LEVEL_FIELDS[usize::from(level.min(9))]
}

/// `score member` for each of `ids`, all at one score.
fn scored(f: &mut impl FnMut(Arg<'_>), score: i64, ids: &Members) {
    for id in ids.iter() {
        f(Arg::Int(score));
        f(Arg::Bytes(id));
    }
}

/// Appends `writes`, RESP-encoded back to back, to `out` (a host's send buffer).
pub fn encode_into(keys: &Keys, writes: &[Write], out: &mut Vec<u8>) {
    for w in writes {
        w.encode_into(keys, out);
    }
}

/// The commands of `writes` ([`Write::to_cmd`]).
pub fn to_cmds(keys: &Keys, writes: &[Write]) -> Vec<Cmd> {
    writes.iter().map(|w| w.to_cmd(keys)).collect()
}

// ------------------------------------------------------------------ members

const LEN: usize = size_of::<usize>();

/// Byte strings a write lists (ids, lane names, wake tokens), in one buffer:
/// each one's length, then its bytes. A write of a thousand ids is one
/// allocation, grown as a vector grows.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Members {
    buf: Vec<u8>,
    len: usize,
}

impl Members {
    pub fn new() -> Self {
        Members::default()
    }

    /// Room for `count` members of `bytes` bytes in all.
    pub fn with_capacity(count: usize, bytes: usize) -> Self {
        Members { buf: Vec::with_capacity(count * LEN + bytes), len: 0 }
    }

    /// The members of `items`, in a buffer of the exact size.
    pub fn of<A: AsRef<[u8]>>(items: &[A]) -> Self {
        let mut m = Members::with_capacity(items.len(), items.iter().map(|i| i.as_ref().len()).sum());
        m.extend(items);
        m
    }

    /// One member, in a buffer of the exact size.
    pub fn one(member: &[u8]) -> Self {
        Members::of(&[member])
    }

    pub fn push(&mut self, member: &[u8]) {
        self.buf.extend_from_slice(&member.len().to_ne_bytes());
        self.buf.extend_from_slice(member);
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn first(&self) -> Option<&[u8]> {
        self.iter().next()
    }

    pub fn iter(&self) -> MembersIter<'_> {
        MembersIter { buf: &self.buf, left: self.len }
    }
}

/// A member's length and bytes at the head of `buf`, and the rest.
fn take_member(buf: &[u8]) -> (&[u8], &[u8]) {
    let (len, rest) = buf.split_at(LEN);
    let len = usize::from_ne_bytes(len.try_into().expect("a length is LEN bytes"));
    rest.split_at(len)
}

/// The members of [`Members`], in order.
#[derive(Clone)]
pub struct MembersIter<'a> {
    buf: &'a [u8],
    left: usize,
}

impl<'a> Iterator for MembersIter<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (member, rest) = take_member(self.buf);
        (self.buf, self.left) = (rest, self.left - 1);
        Some(member)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for MembersIter<'_> {}

impl<A: AsRef<[u8]>> Extend<A> for Members {
    fn extend<I: IntoIterator<Item = A>>(&mut self, items: I) {
        for m in items {
            self.push(m.as_ref());
        }
    }
}

impl<A: AsRef<[u8]>> FromIterator<A> for Members {
    fn from_iter<I: IntoIterator<Item = A>>(items: I) -> Self {
        let items = items.into_iter();
        // Room for ids of 32 bytes (a generated one's): long lists grow once or twice, not ten times.
        let mut m = Members::with_capacity(items.size_hint().0, 32 * items.size_hint().0);
        m.extend(items);
        m
    }
}

impl fmt::Debug for Members {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

/// Members with a score each (a `ZADD` of jobs due at their own times), in
/// one buffer as [`Members`]: each one's score, length and bytes.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Scored {
    buf: Vec<u8>,
    len: usize,
}

impl Scored {
    pub fn new() -> Self {
        Scored::default()
    }

    pub fn push(&mut self, score: i64, member: &[u8]) {
        self.buf.extend_from_slice(&score.to_ne_bytes());
        self.buf.extend_from_slice(&member.len().to_ne_bytes());
        self.buf.extend_from_slice(member);
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Each score and member, in order.
    pub fn iter(&self) -> ScoredIter<'_> {
        ScoredIter { buf: &self.buf, left: self.len }
    }
}

/// The scores and members of [`Scored`], in order.
#[derive(Clone)]
pub struct ScoredIter<'a> {
    buf: &'a [u8],
    left: usize,
}

impl<'a> Iterator for ScoredIter<'a> {
    type Item = (i64, &'a [u8]);

    fn next(&mut self) -> Option<(i64, &'a [u8])> {
        if self.left == 0 {
            return None;
        }
        let (score, rest) = self.buf.split_at(size_of::<i64>());
        let (member, rest) = take_member(rest);
        (self.buf, self.left) = (rest, self.left - 1);
        Some((i64::from_ne_bytes(score.try_into().expect("a score is 8 bytes")), member))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ScoredIter<'_> {}

impl<A: AsRef<[u8]>> FromIterator<(i64, A)> for Scored {
    fn from_iter<I: IntoIterator<Item = (i64, A)>>(items: I) -> Self {
        let mut s = Scored::new();
        for (score, m) in items {
            s.push(score, m.as_ref());
        }
        s
    }
}

impl fmt::Debug for Scored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(|(s, m)| (s, String::from_utf8_lossy(m)))).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(xs: &[&str]) -> Members {
        xs.iter().collect()
    }

    fn cmd(parts: &[&str]) -> Cmd {
        Cmd::from_args(parts)
    }

    /// One of every write, and the command it is, argument by argument.
    fn every_write() -> Vec<(Write, Cmd)> {
        let row = |fields| Write::SetRow { id: b"a".to_vec(), fields };
        let lane = |field| Write::SetLane { lane: b"L".to_vec(), field };
        vec![
            (
                row(RowFields::New(Box::new(NewRow {
                    priority: 0,
                    ready: true,
                    data: b"d\r\n\xff".to_vec(),
                    due: 5,
                    max_attempts: u32::MAX,
                    created: -3,
                    digest: *b"0123456789abcdef0123456789abcdef",
                    lane: Some(b"L".to_vec()),
                    keep: Some(-1),
                    unique: Some(b"u 1".to_vec()),
                    wait: Some(b"in-1".to_vec()),
                }))),
                Cmd::from_args([
                    &b"HSET"[..],
                    b"emq:{q}:job:a",
                    b"state",
                    b"pending",
                    b"data",
                    b"d\r\n\xff",
                    b"due",
                    b"5",
                    b"attempts",
                    b"0",
                    b"max_attempts",
                    b"4294967295",
                    b"created",
                    b"-3",
                    b"digest",
                    b"0123456789abcdef0123456789abcdef",
                    b"lane",
                    b"L",
                    b"keep",
                    b"-1",
                    b"unique",
                    b"u 1",
                    b"wait",
                    b"in-1",
                ]),
            ),
            (
                row(RowFields::New(Box::new(NewRow {
                    priority: 0,
                    ready: false,
                    data: vec![],
                    due: 9,
                    max_attempts: 1,
                    created: 1,
                    digest: [b'f'; 32],
                    lane: None,
                    keep: None,
                    unique: None,
                    wait: None,
                }))),
                cmd(&[
                    "HSET",
                    "emq:{q}:job:a",
                    "state",
                    "scheduled",
                    "data",
                    "",
                    "due",
                    "9",
                    "attempts",
                    "0",
                    "max_attempts",
                    "1",
                    "created",
                    "1",
                    "digest",
                    "ffffffffffffffffffffffffffffffff",
                ]),
            ),
            (
                row(RowFields::Claimed { attempts: 2, lease: 70, token: b"t".to_vec(), claimed: 40 }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "active", "attempts", "2", "lease", "70", "token", "t", "claimed", "40"]),
            ),
            (row(RowFields::Ready), cmd(&["HSET", "emq:{q}:job:a", "state", "pending"])),
            (row(RowFields::Stalled { stalls: 1, dead: false }), cmd(&["HSET", "emq:{q}:job:a", "state", "pending", "stalls", "1"])),
            (
                row(RowFields::Stalled { stalls: 4, dead: true }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "dead", "stalls", "4", "error", "stalled"]),
            ),
            (row(RowFields::Lease(99)), cmd(&["HSET", "emq:{q}:job:a", "lease", "99"])),
            (
                row(RowFields::Retry { ready: false, error: b"e".to_vec(), due: 8, detail: None }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "scheduled", "error", "e", "due", "8"]),
            ),
            (
                row(RowFields::Retry { ready: true, error: b"e".to_vec(), due: 8, detail: None }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "pending", "error", "e", "due", "8"]),
            ),
            (
                row(RowFields::Retry {
                    ready: true,
                    error: b"e".to_vec(),
                    due: 8,
                    detail: Some(Box::new(ErrorDetail { error_type: None, traceback: Some(b"t\nb".to_vec()) })),
                }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "pending", "error", "e", "due", "8", "traceback", "t\nb"]),
            ),
            (
                row(RowFields::Dead { error: b"e".to_vec(), finished: 7, detail: None }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "dead", "error", "e", "finished", "7"]),
            ),
            (
                row(RowFields::Dead {
                    error: b"e".to_vec(),
                    finished: 7,
                    detail: Some(Box::new(ErrorDetail { error_type: Some(b"mod.E".to_vec()), traceback: Some(vec![]) })),
                }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "dead", "error", "e", "finished", "7", "error_type", "mod.E", "traceback", ""]),
            ),
            (row(RowFields::Done { finished: 7, result: None }), cmd(&["HSET", "emq:{q}:job:a", "state", "done", "finished", "7"])),
            (
                row(RowFields::Done { finished: 7, result: Some(b"{\"x\": 1}".to_vec()) }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "done", "finished", "7", "result", "{\"x\": 1}"]),
            ),
            (
                row(RowFields::Cancelled { finished: 9 }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "cancelled", "finished", "9", "error", "cancelled"]),
            ),
            (row(RowFields::Progress(b"0.5".to_vec())), cmd(&["HSET", "emq:{q}:job:a", "progress", "0.5"])),
            (row(RowFields::Waiters(b"w1 w2".to_vec())), cmd(&["HSET", "emq:{q}:job:a", "wait", "w1 w2"])),
            (row(RowFields::AskStop), cmd(&["HSET", "emq:{q}:job:a", "cancel", "1"])),
            (Write::DropLease { id: b"a".to_vec() }, cmd(&["HDEL", "emq:{q}:job:a", "token", "lease"])),
            (Write::DropErrorDetail { id: b"a".to_vec() }, cmd(&["HDEL", "emq:{q}:job:a", "error_type", "traceback"])),
            (Write::ExpireRow { id: b"a".to_vec(), at: 1050 }, cmd(&["PEXPIREAT", "emq:{q}:job:a", "1050"])),
            (Write::DeleteRows(ids(&["a", "b"])), cmd(&["DEL", "emq:{q}:job:a", "emq:{q}:job:b"])),
            (lane(LaneField::Active(3)), cmd(&["HSET", "emq:{q}:lanectl:L", "active", "3"])),
            (lane(LaneField::InRing(true)), cmd(&["HSET", "emq:{q}:lanectl:L", "ring", "1"])),
            (lane(LaneField::InRing(false)), cmd(&["HSET", "emq:{q}:lanectl:L", "ring", "0"])),
            (lane(LaneField::Paused(true)), cmd(&["HSET", "emq:{q}:lanectl:L", "paused", "1"])),
            (lane(LaneField::Paused(false)), cmd(&["HSET", "emq:{q}:lanectl:L", "paused", "0"])),
            (lane(LaneField::Limit(u64::MAX)), cmd(&["HSET", "emq:{q}:lanectl:L", "limit", "18446744073709551615"])),
            (Write::TakeSlots { lane: b"L".to_vec(), by: 2 }, cmd(&["HINCRBY", "emq:{q}:lanectl:L", "active", "2"])),
            (Write::Schedule([(5, "a"), (-1, "b")].into_iter().collect()), cmd(&["ZADD", "emq:{q}:schedule", "5", "a", "-1", "b"])),
            (Write::Lease { deadline: 9, ids: ids(&["a", "b"]) }, cmd(&["ZADD", "emq:{q}:active", "9", "a", "9", "b"])),
            (Write::ExtendLeases { deadline: 9, ids: ids(&["a"]) }, cmd(&["ZADD", "emq:{q}:active", "XX", "9", "a"])),
            (Write::Bury { at: 3, ids: ids(&["a"]) }, cmd(&["ZADD", "emq:{q}:dead", "3", "a"])),
            (Write::ListDone { at: 3, ids: ids(&["a", "b"]) }, cmd(&["ZADD", "emq:{q}:done", "3", "a", "3", "b"])),
            (Write::Unschedule(ids(&["a", "b"])), cmd(&["ZREM", "emq:{q}:schedule", "a", "b"])),
            (Write::LeaveActive(ids(&["a"])), cmd(&["ZREM", "emq:{q}:active", "a"])),
            (Write::TrimDead(ids(&["a"])), cmd(&["ZREM", "emq:{q}:dead", "a"])),
            (Write::TrimDone { before: -5 }, cmd(&["ZREMRANGEBYSCORE", "emq:{q}:done", "-inf", "(-5"])),
            (Write::ListCancelled { at: 3, ids: ids(&["a"]) }, cmd(&["ZADD", "emq:{q}:cancelled", "3", "a"])),
            (Write::TrimCancelled { before: 5 }, cmd(&["ZREMRANGEBYSCORE", "emq:{q}:cancelled", "-inf", "(5"])),
            (Write::AskToStop { at: 4, ids: ids(&["a", "b"]) }, cmd(&["ZADD", "emq:{q}:cancels", "4", "a", "4", "b"])),
            (Write::TrimCancels { before: 6 }, cmd(&["ZREMRANGEBYSCORE", "emq:{q}:cancels", "-inf", "(6"])),
            (Write::Dequeue { lane: None, id: b"a".to_vec() }, cmd(&["LREM", "emq:{q}:pending", "1", "a"])),
            (Write::Dequeue { lane: Some(b"L".to_vec()), id: b"a".to_vec() }, cmd(&["LREM", "emq:{q}:lane:L", "1", "a"])),
            (Write::Notify { inbox: b"w1".to_vec(), ids: ids(&["a", "b"]) }, cmd(&["RPUSH", "emq:{q}:inbox:w1", "a", "b"])),
            (Write::KeepInbox { inbox: b"w1".to_vec() }, cmd(&["PEXPIRE", "emq:{q}:inbox:w1", "3600000"])),
            (
                Write::ClaimUnique { key: b"k:1".to_vec(), id: b"a".to_vec(), ttl_ms: 600_000 },
                cmd(&["SET", "emq:{q}:unique:k:1", "a", "PX", "600000"]),
            ),
            (Write::MakeReady { lane: None, ids: ids(&["a", "b"]) }, cmd(&["RPUSH", "emq:{q}:pending", "a", "b"])),
            (Write::MakeReady { lane: Some(b"L".to_vec()), ids: ids(&["a"]) }, cmd(&["RPUSH", "emq:{q}:lane:L", "a"])),
            (Write::TakePending { count: 12 }, cmd(&["LPOP", "emq:{q}:pending", "12"])),
            (Write::TakeLaneHead { lane: b"L".to_vec() }, cmd(&["LPOP", "emq:{q}:lane:L"])),
            (Write::ReadyAt { lane: None, level: 2, ids: ids(&["a"]) }, cmd(&["RPUSH", "emq:{q}:pending:2", "a"])),
            (Write::ReadyAt { lane: Some(b"L".to_vec()), level: 9, ids: ids(&["a", "b"]) }, cmd(&["RPUSH", "emq:{q}:plane:9:L", "a", "b"])),
            (Write::TakeAt { lane: None, level: 1, count: 3 }, cmd(&["LPOP", "emq:{q}:pending:1", "3"])),
            (Write::TakeAt { lane: Some(b"L".to_vec()), level: 4, count: 1 }, cmd(&["LPOP", "emq:{q}:plane:4:L", "1"])),
            (Write::MarkLevel { lane: None, level: 5 }, cmd(&["HSET", "emq:{q}:flatctl", "lvl:5", "1"])),
            (Write::MarkLevel { lane: Some(b"L".to_vec()), level: 5 }, cmd(&["HSET", "emq:{q}:lanectl:L", "lvl:5", "1"])),
            (Write::ClearLevel { lane: None, level: 7 }, cmd(&["HDEL", "emq:{q}:flatctl", "lvl:7"])),
            (Write::JoinRing(ids(&["L", "M"])), cmd(&["RPUSH", "emq:{q}:ring", "L", "M"])),
            (Write::RotateRing, cmd(&["LMOVE", "emq:{q}:ring", "emq:{q}:ring", "LEFT", "RIGHT"])),
            (Write::DropRingHead, cmd(&["LPOP", "emq:{q}:ring"])),
            (Write::Wake(ids(&["L", ""])), cmd(&["RPUSH", "emq:{q}:wake", "L", ""])),
            (Write::TrimWake, cmd(&["LTRIM", "emq:{q}:wake", "-64", "-1"])),
            (Write::MarkLease { second: 1_700_000 }, cmd(&["SET", "emq:{q}:leases:1700000", "1", "PX", "60000"])),
            (Write::CountPromotion, cmd(&["INCR", "emq:{q}:promotions"])),
            (Write::MarkLevelsInUse, cmd(&["INCRBY", "emq:{q}:promotions", "1099511627776"])),
            (
                Write::Count { minute: 28_333_333, kind: Counted::Recovered, by: 100 },
                cmd(&["HINCRBY", "emq:{q}:stats:28333333", "recovered", "100"]),
            ),
            (Write::Count { minute: 1, kind: Counted::Completed, by: 1 }, cmd(&["HINCRBY", "emq:{q}:stats:1", "completed", "1"])),
            (Write::KeepCounts { minute: 7 }, cmd(&["PEXPIRE", "emq:{q}:stats:7", "90000000"])),
            (
                row(RowFields::Revived { due: 12 }),
                cmd(&["HSET", "emq:{q}:job:a", "state", "pending", "attempts", "0", "stalls", "0", "due", "12"]),
            ),
            (Write::DropFinished { id: b"a".to_vec() }, cmd(&["HDEL", "emq:{q}:job:a", "finished", "cancel"])),
            (Write::PersistRow { id: b"a".to_vec() }, cmd(&["PERSIST", "emq:{q}:job:a"])),
            (Write::ForgetStops(ids(&["a", "b"])), cmd(&["ZREM", "emq:{q}:cancels", "a", "b"])),
            (Write::LeaveDead(ids(&["a", "b"])), cmd(&["ZREM", "emq:{q}:dead", "a", "b"])),
            (Write::LeaveDone(ids(&["a"])), cmd(&["ZREM", "emq:{q}:done", "a"])),
            (Write::LeaveCancelled(ids(&["a"])), cmd(&["ZREM", "emq:{q}:cancelled", "a"])),
            (Write::Unready { lane: None, id: b"a".to_vec() }, cmd(&["LREM", "emq:{q}:pending", "1", "a"])),
            (Write::Unready { lane: Some(b"L".to_vec()), id: b"a".to_vec() }, cmd(&["LREM", "emq:{q}:lane:L", "1", "a"])),
            (Write::RegisterQueue(b"orders".to_vec()), cmd(&["SADD", "emq:{q}:queues", "orders"])),
            (Write::ListLanes(Members::of(&["eu", "us"])), cmd(&["SADD", "emq:{q}:lanes", "eu", "us"])),
            (Write::ListWorker { id: b"w".to_vec(), expiry: 15 }, cmd(&["ZADD", "emq:{q}:workers", "15", "w"])),
            (
                Write::SetWorker { id: b"w".to_vec(), fields: vec![(b"pid".to_vec(), b"7".to_vec())] },
                cmd(&["HSET", "emq:{q}:worker:w", "pid", "7"]),
            ),
            (Write::ExpireWorker { id: b"w".to_vec(), at: 15 }, cmd(&["PEXPIREAT", "emq:{q}:worker:w", "15"])),
            (Write::TrimWorkers { before: 9 }, cmd(&["ZREMRANGEBYSCORE", "emq:{q}:workers", "-inf", "(9"])),
            (Write::UnlistWorker(b"w".to_vec()), cmd(&["ZREM", "emq:{q}:workers", "w"])),
            (Write::DeleteWorker(b"w".to_vec()), cmd(&["DEL", "emq:{q}:worker:w"])),
            (
                Write::SetRetention(vec![("done_ms", 0), ("dead_max", -1)]),
                cmd(&["HSET", "emq:{q}:retention", "done_ms", "0", "dead_max", "-1"]),
            ),
            (
                Write::SetTimers([(12, b"tick:a"), (-3, b"tick:b")].into_iter().collect()),
                cmd(&["ZADD", "emq:{q}:timers", "12", "tick:a", "-3", "tick:b"]),
            ),
            (Write::DropTimers(Members::of(&[b"tick:a"])), cmd(&["ZREM", "emq:{q}:timers", "tick:a"])),
            (Write::SetSchedule { name: b"n".to_vec(), record: b"{}".to_vec() }, cmd(&["HSET", "emq:{q}:schedules", "n", "{}"])),
            (Write::DropSchedule { name: b"n".to_vec() }, cmd(&["HDEL", "emq:{q}:schedules", "n"])),
        ]
    }

    /// A broken rendering (a field out of order, a key of the wrong kind, a
    /// count off by one in the array head) sends another command than the plan
    /// meant, or one the server cannot parse.
    #[test]
    fn every_write_is_its_command_byte_for_byte() {
        let keys = Keys::new(b"q");
        for (w, want) in every_write() {
            assert_eq!(w.to_cmd(&keys), want, "{w:?}");
            assert_eq!(w.name().as_bytes(), want.name(), "{w:?}");
            assert_eq!(w.argc(), want.argc(), "{w:?}");
            let mut fields = 0;
            if let Write::SetRow { fields: f, .. } = &w {
                f.pairs(&mut |_, _| fields += 1);
                assert_eq!(f.count(), fields, "{w:?}");
            }
            let (mut got, mut sent) = (vec![], vec![]);
            w.encode_into(&keys, &mut got);
            want.encode_into(&mut sent);
            assert_eq!(got, sent, "{w:?}");
            let mut key = vec![];
            w.key_into(&keys, &mut key);
            assert_eq!(key, want.to_args()[1], "{w:?}: the key it names first");
        }
    }

    #[test]
    fn writes_encode_back_to_back() {
        let keys = Keys::new(b"q");
        let (writes, cmds): (Vec<Write>, Vec<Cmd>) = every_write().into_iter().unzip();
        let (mut got, mut want) = (vec![], vec![]);
        encode_into(&keys, &writes, &mut got);
        crate::protocol::cmd::encode_into(&cmds, &mut want);
        assert_eq!(got, want);
        assert_eq!(to_cmds(&keys, &writes), cmds);
    }

    /// A word's encoding is made at build time: a length of two digits, or
    /// none, must still be the argument `push_bulk` writes.
    #[test]
    fn words_are_encoded_as_arguments() {
        for w in ["", "0", "123456789", "1234567890", "ZREMRANGEBYSCORE", "abcdefghijklmnopqrstuvwxy"] {
            let word = Word::new(w);
            let mut want = vec![];
            push_bulk(&mut want, &[w.as_bytes()]);
            assert_eq!((word.encoded(), word.bytes(), word.as_str()), (&want[..], w.as_bytes(), w));
        }
    }

    #[test]
    fn members_keep_any_bytes_in_order() {
        let m: Members = [&b""[..], b"a", b"\r\n\x00", &[7u8; 300]].into_iter().collect();
        assert_eq!(m.len(), 4);
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![&b""[..], b"a", b"\r\n\x00", &[7u8; 300]]);
        assert_eq!(m.first(), Some(&b""[..]));
        assert!(Members::new().is_empty() && Members::new().first().is_none());
        assert_eq!(format!("{:?}", ids(&["a", "b"])), r#"["a", "b"]"#);
        let s: Scored = [(i64::MIN, "x"), (0, ""), (i64::MAX, "yz")].into_iter().collect();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![(i64::MIN, &b"x"[..]), (0, b""), (i64::MAX, b"yz")]);
        assert_eq!((s.len(), s.is_empty()), (3, false));
    }
}

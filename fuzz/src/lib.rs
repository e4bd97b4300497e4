//! What the fuzz targets share: replies made from the fuzz input, and a driver
//! that runs a conversation on them the way the host does and checks it.
//!
//! The properties, for every conversation and any replies (the server is not
//! ours to trust):
//! - no panic (arithmetic overflow included: the targets build with debug
//!   assertions);
//! - every key a step names (its `WATCH`, its reads, its writes as the host
//!   renders them) lies under the queue's prefix `emq:{q}:`, so no plan touches
//!   another queue or a key that is not emq's;
//! - `speculate` changes nothing: a twin told to speculate before every read
//!   answers every step alike.
//!
//! Replies are drawn from the input, mostly in the shape the command really
//! gets (so the fuzzer reaches the plans), sometimes anything at all (nested
//! arrays, extreme integers, error replies, strings of any bytes), and now and
//! then one too many or one too few.

use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::to_cmds;
use emq_plan::{Cmd, Keys, Reply};
pub use libfuzzer_sys::arbitrary::{self, Unstructured};

/// Values a stored field or a reply often holds: numbers at the edges of what
/// the plans read (15 and 16 digits, i64's ends), states, types, scores.
const WORDS: &[&str] = &[
    "",
    "0",
    "1",
    "-1",
    "2",
    "1.5",
    "inf",
    "-inf",
    "nan",
    "999999999999999",
    "1000000000000000",
    "-999999999999999",
    "9223372036854775807",
    "-9223372036854775808",
    "1700000000123",
    "pending",
    "active",
    "scheduled",
    "done",
    "dead",
    "cancelled",
    "w1 L",
    "hash",
    "none",
    "list",
    "zset",
    "L",
    "a",
    "m0",
    "m1",
];

/// The queue names the targets use: plain, glob characters (no pattern may
/// read them as a glob), multi-byte UTF-8, and the longest name allowed.
pub fn queue(u: &mut Unstructured<'_>) -> Keys {
    let long = "q".repeat(128);
    let names = ["q", "a*b?[c]\\", "заказы:eu", long.as_str()];
    Keys::new(names[usize::from(u.arbitrary::<u8>().unwrap_or(0)) % names.len()].as_bytes())
}

/// Replies made from the fuzz input.
pub struct Replies<'a, 'k> {
    pub u: Unstructured<'a>,
    keys: &'k Keys,
    /// The first `ZRANGE` reply, which a sweep's re-read mostly repeats.
    first_range: Option<Vec<Reply>>,
    /// Values the conversation knows (a digest), which an `HGET` may give back.
    hints: Vec<Vec<u8>>,
}

impl<'a, 'k> Replies<'a, 'k> {
    pub fn new(u: Unstructured<'a>, keys: &'k Keys, hints: Vec<Vec<u8>>) -> Self {
        Replies { u, keys, first_range: None, hints }
    }

    fn below(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.u.choose_index(n).unwrap_or(0)
    }

    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }

    fn bytes(&mut self) -> Vec<u8> {
        if self.chance(4) {
            let n = self.below(40);
            self.u.bytes(n).map(<[u8]>::to_vec).unwrap_or_default()
        } else if !self.hints.is_empty() && self.chance(6) {
            let i = self.below(self.hints.len());
            self.hints[i].clone()
        } else {
            WORDS[self.below(WORDS.len())].as_bytes().to_vec()
        }
    }

    fn int(&mut self) -> i64 {
        match self.below(6) {
            0 => i64::MIN,
            1 => i64::MAX,
            2 => self.u.arbitrary().unwrap_or(0),
            _ => i64::try_from(self.below(5)).unwrap_or(0) - 1,
        }
    }

    fn error(&mut self) -> Reply {
        match self.below(4) {
            0 => Reply::Error { code: "ERR".into(), message: "ERR x".into() },
            1 => Reply::Error { code: "NOPERM".into(), message: "NOPERM x".into() },
            _ => Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() },
        }
    }

    /// Any reply at all.
    pub fn any(&mut self, depth: u32) -> Reply {
        match self.below(if depth > 2 { 6 } else { 8 }) {
            0 => Reply::Nil,
            1 => Reply::Int(self.int()),
            2 | 3 => Reply::Bulk(self.bytes()),
            4 => Reply::Status(String::from_utf8_lossy(&self.bytes()).into_owned()),
            5 => self.error(),
            _ => Reply::Array((0..self.below(6)).map(|_| self.any(depth + 1)).collect()),
        }
    }

    fn bulk(&mut self) -> Reply {
        Reply::Bulk(self.bytes())
    }

    /// A reply in the shape `cmd` really gets, with values that vary.
    pub fn shaped(&mut self, cmd: &Cmd) -> Reply {
        if self.chance(10) {
            return self.any(0);
        }
        let args = cmd.to_args();
        let argc = args.len();
        let score = |r: &mut Self| {
            if r.chance(8) {
                r.bulk()
            } else {
                Reply::Bulk((1_700_000_000_120 + r.below(6)).to_string().into_bytes())
            }
        };
        match cmd.name() {
            b"TIME" => {
                if self.chance(8) {
                    Reply::Array(vec![Reply::Int(self.int()), Reply::Int(self.int())])
                } else {
                    Reply::Array(vec![Reply::Bulk(b"1700000000".to_vec()), Reply::Bulk(b"123456".to_vec())])
                }
            }
            b"ZRANGE" => {
                let again = !self.chance(4);
                if let (Some(first), true) = (&self.first_range, again) {
                    let stop = args.get(3).and_then(|s| std::str::from_utf8(s).ok()?.parse::<usize>().ok()).unwrap_or(0);
                    return Reply::Array(first.iter().take(2 * (stop + 1)).cloned().collect());
                }
                let items: Vec<Reply> = (0..self.below(5)).flat_map(|i| [Reply::Bulk(format!("m{i}").into_bytes()), score(self)]).collect();
                self.first_range.get_or_insert_with(|| items.clone());
                Reply::Array(items)
            }
            b"HGET" => {
                if self.chance(3) {
                    Reply::Nil
                } else {
                    self.bulk()
                }
            }
            // SORT_RO … GET # GET …->state GET …->lane: members and their two fields, or refused.
            b"SORT_RO" if self.chance(6) => Reply::Error { code: "ERR".into(), message: "ERR GET option of SORT denied".into() },
            b"SORT_RO" => Reply::Array(
                (0..self.below(5))
                    .flat_map(|i| {
                        let m = Reply::Bulk(format!("m{i}").into_bytes());
                        [m, if self.chance(3) { Reply::Nil } else { self.bulk() }, if self.chance(2) { Reply::Nil } else { self.bulk() }]
                    })
                    .collect(),
            ),
            // ZMSCORE: a score where the member is still there, nil where it was taken.
            b"ZMSCORE" => Reply::Array((2..argc).map(|_| if self.chance(3) { Reply::Nil } else { score(self) }).collect()),
            // `P promotions` (a promote reads it beside its selection and again under its watch): mostly unchanged.
            b"GET" if !self.chance(4) => Reply::Bulk(b"7".to_vec()),
            b"HGETALL" => Reply::Array((0..2 * self.below(5)).map(|_| self.bulk()).collect()),
            b"HMGET" => Reply::Array((2..argc).map(|_| if self.chance(3) { Reply::Nil } else { self.bulk() }).collect()),
            // `P lanes`: a few names, one sometimes empty.
            b"SMEMBERS" => Reply::Array(
                (0..self.below(4)).map(|i| Reply::Bulk(if self.chance(6) { vec![] } else { format!("L{i}").into_bytes() })).collect(),
            ),
            b"LRANGE" => Reply::Array((0..self.below(5)).map(|i| Reply::Bulk(format!("m{i}").into_bytes())).collect()),
            b"TYPE" => Reply::Status(["none", "hash", "string", "list"][self.below(4)].into()),
            b"EXISTS" => Reply::Int(i64::try_from(self.below(argc)).unwrap_or(0)),
            _ if self.chance(20) => self.error(),
            _ if self.chance(12) => Reply::Int(self.int()),
            _ => Reply::Int(i64::try_from(self.below(3)).unwrap_or(0)),
        }
    }

    /// The replies of a read: mostly one a command, sometimes one off.
    pub fn for_read(&mut self, cmds: &[Cmd]) -> Vec<Reply> {
        let n = match self.below(16) {
            0 => cmds.len() + 1,
            1 => cmds.len().saturating_sub(1),
            _ => cmds.len(),
        };
        (0..n).map(|i| if let Some(c) = cmds.get(i) { self.shaped(c) } else { self.any(0) }).collect()
    }

    /// `EXEC`'s replies: one a command queued (`writes` of them), each anything.
    pub fn for_exec(&mut self, writes: usize) -> Vec<Reply> {
        let n = if self.chance(16) { self.below(writes + 2) } else { writes };
        (0..n).map(|_| self.any(1)).collect()
    }
}

/// The arguments of `cmd` that are keys. A command the targets do not know
/// fails the target: add it here with its key positions.
fn keys_of(cmd: &Cmd) -> Vec<&[u8]> {
    let args = cmd.to_args();
    let name = String::from_utf8_lossy(args[0]).to_ascii_uppercase();
    match name.as_str() {
        "TIME" => vec![],
        "WATCH" | "EXISTS" | "DEL" => args[1..].to_vec(),
        "LMOVE" => args[1..3].to_vec(),
        "ZRANGE" | "ZREM" | "ZADD" | "ZCARD" | "ZCOUNT" | "ZREMRANGEBYSCORE" | "HGET" | "HMGET" | "HSET" | "HDEL" | "HGETALL"
        | "HINCRBY" | "INCRBY" | "PERSIST" | "LLEN" | "LRANGE" | "LPOP" | "RPUSH" | "LTRIM" | "TYPE" | "PEXPIREAT" | "INCR" | "GET"
        | "ZMSCORE" | "HLEN" | "SET" | "SORT_RO" | "PEXPIRE" | "LREM" | "SADD" | "SMEMBERS" => args[1..2].to_vec(),
        other => panic!("a command the fuzz targets do not know: {other}; add its keys to keys_of"),
    }
}

/// Checks that every key of `cmds` (and `watch`) lies under the queue's prefix
/// (no plan sends `SCAN`: it would read every key of the database).
pub fn check_keys(keys: &Keys, watch: &[Vec<u8>], cmds: &[Cmd]) {
    let prefix = &keys.prefix;
    for k in watch {
        assert!(k.starts_with(prefix), "WATCH {:?} is not under {:?}", String::from_utf8_lossy(k), String::from_utf8_lossy(prefix));
    }
    for c in cmds {
        for k in keys_of(c) {
            assert!(k.starts_with(prefix), "{c:?}: {:?} is not under {:?}", String::from_utf8_lossy(k), String::from_utf8_lossy(prefix));
        }
    }
}

/// Most steps a conversation takes on one input.
const MAX_STEPS: usize = 24;

/// Runs two copies of a conversation on replies made from `u`, one told to
/// `speculate` before each read, checking every step's keys; they must answer
/// alike at every step.
pub fn drive<C: Conversation>(mut r: Replies<'_, '_>, make: impl Fn() -> C)
where
    C::Out: std::fmt::Debug,
{
    let keys = r.keys;
    let (mut c, mut twin) = (make(), make());
    let mut step = c.start();
    assert_eq!(format!("{step:?}"), format!("{:?}", twin.start()), "two starts differ");
    for _ in 0..MAX_STEPS {
        match step {
            Step::Done(_) => return,
            Step::Read { watch, cmds } => {
                check_keys(keys, &watch, &cmds);
                let replies = r.for_read(&cmds);
                twin.speculate();
                let (got, twin_got) = (c.feed(&replies), twin.feed(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a step");
                match got {
                    Ok(next) => step = next,
                    Err(_) => return,
                }
            }
            Step::Exec(writes) => {
                check_keys(keys, &[], &to_cmds(keys, &writes));
                if r.chance(8) {
                    // The guard aborted it: the call starts again, or takes up its group.
                    let (next, twin_next) = (c.aborted(), twin.aborted());
                    assert_eq!(format!("{next:?}"), format!("{twin_next:?}"), "speculating changed a retry");
                    match next {
                        Some(next) => step = next,
                        None => return,
                    }
                    continue;
                }
                let replies = r.for_exec(writes.len());
                let (got, twin_got) = (c.finish(&replies), twin.finish(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed an outcome");
                return;
            }
            Step::Snapshot(cmds) => {
                check_keys(keys, &[], &cmds);
                let replies = r.for_exec(cmds.len());
                let (got, twin_got) = (c.finish(&replies), twin.finish(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed an outcome");
                return;
            }
            Step::Group { writes, watch, cmds } => {
                check_keys(keys, &watch, &to_cmds(keys, &writes));
                check_keys(keys, &[], &cmds);
                twin.speculate();
                if r.chance(6) {
                    let (got, twin_got) = (c.committed(None), twin.committed(None));
                    assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed an abort");
                    let (next, twin_next) = (c.aborted(), twin.aborted());
                    assert_eq!(format!("{next:?}"), format!("{twin_next:?}"), "speculating changed a retry");
                    match next {
                        Some(next) => step = next,
                        None => return,
                    }
                    continue;
                }
                let exec = r.for_exec(writes.len());
                let (got, twin_got) = (c.committed(Some(&exec)), twin.committed(Some(&exec)));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a group's outcome");
                if got.is_err() {
                    return;
                }
                let replies = r.for_read(&cmds);
                let (got, twin_got) = (c.feed(&replies), twin.feed(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a step");
                match got {
                    Ok(next) => step = next,
                    Err(_) => return,
                }
            }
        }
    }
}

/// A job id or lane name from the input: mostly a valid one, sometimes any bytes
/// (the conversation must refuse a bad one before it reads).
pub fn name(u: &mut Unstructured<'_>) -> Vec<u8> {
    match u.choose_index(8).unwrap_or(0) {
        0 => u.arbitrary::<Vec<u8>>().unwrap_or_default(),
        1 => "é:*".as_bytes().to_vec(),
        2 => b"b".to_vec(),
        _ => b"a".to_vec(),
    }
}

/// A sweep's `batch`: mostly small (the replies hold a few members), now and
/// then any positive number.
pub fn batch(u: &mut Unstructured<'_>) -> u64 {
    if u.ratio(1, 8).unwrap_or(false) {
        u.arbitrary::<u64>().unwrap_or(1).max(1)
    } else {
        u.int_in_range(1..=6).unwrap_or(1)
    }
}

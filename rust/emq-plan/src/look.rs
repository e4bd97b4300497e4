//! Reads for the facade, as conversations: a job's row (`Get`), the lanes
//! (`Lanes`), the counts of every place (`Counts`), and the retention policy
//! (`GetRetention`, `SetRetention`). The facade never spells a key; any error
//! reply is an error here, never a value.

use crate::clock::parse_time;
use crate::cmd::Cmd;
use crate::conversation::{Conversation, Step};
use crate::error::{Error, Result};
use crate::names::{id_problem, Keys};
use crate::numbers::field_int;
use crate::reply::Reply;
use crate::retention::{self, Retention, MAX_VALUE, RETENTION};

pub const GET: &str = "EMQ.GET";
pub const LANES: &str = "EMQ.LANES";
pub const COUNTS: &str = "EMQ.COUNTS";

/// Keys a `SCAN` asks for at a time.
const SCAN_COUNT: &str = "1000";

/// A key's error reply as the plans raise it: a wrong type is a layout error.
fn check(verb: &str, key: &[u8], r: &Reply) -> Result<()> {
    match r {
        r if r.is_wrongtype() => Err(retention::wrong_type(verb, key)),
        Reply::Error { message, .. } => Err(Error::server(verb, message)),
        _ => Ok(()),
    }
}

/// A glob pattern that matches `text` literally (for `SCAN MATCH`).
pub fn glob_escape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 4);
    for &b in text {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

// ------------------------------------------------------------------ get

/// A job's row as `Queue.get` gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobRow {
    pub state: Option<Vec<u8>>,
    pub data: Vec<u8>,
    pub lane: Option<Vec<u8>>,
    pub attempts: i64,
    pub max_attempts: i64,
    pub token: Option<Vec<u8>>,
    pub lease: Option<i64>,
    pub due: Option<i64>,
    pub stalls: i64,
    pub error: Option<Vec<u8>>,
    pub finished: Option<i64>,
}

impl JobRow {
    /// From `HGETALL`'s field/value pairs.
    pub fn from_pairs(items: &[Reply]) -> Self {
        let mut row = JobRow::default();
        for pair in items.chunks_exact(2) {
            let (Some(f), Some(v)) = (pair[0].as_bytes(), pair[1].as_bytes()) else { continue };
            let int = || field_int(v);
            match f {
                b"state" => row.state = Some(v.to_vec()),
                b"data" => row.data = v.to_vec(),
                b"lane" => row.lane = Some(v.to_vec()),
                b"attempts" => row.attempts = int().unwrap_or(0),
                b"max_attempts" => row.max_attempts = int().unwrap_or(0),
                b"token" => row.token = Some(v.to_vec()),
                b"lease" => row.lease = int(),
                b"due" => row.due = int(),
                b"stalls" => row.stalls = int().unwrap_or(0),
                b"error" => row.error = Some(v.to_vec()),
                b"finished" => row.finished = int(),
                _ => {}
            }
        }
        row
    }
}

/// `HGETALL P job:ID`: the row, or `None` when there is none.
pub struct Get {
    keys: Keys,
    id: Vec<u8>,
}

impl Get {
    pub fn new(keys: Keys, id: Vec<u8>) -> Result<Self> {
        if let Some(why) = id_problem(&id) {
            return Err(Error::argument(GET, "id", why));
        }
        Ok(Get { keys, id })
    }
}

impl Conversation for Get {
    type Out = Option<JobRow>;

    fn verb(&self) -> &'static str {
        GET
    }

    fn start(&mut self) -> Step<Self::Out> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("HGETALL").arg(self.keys.job(&self.id))] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let [r] = replies else { return Err(Error::server(GET, "wrong number of replies")) };
        check(GET, &self.keys.job(&self.id), r)?;
        let items = r.as_array().ok_or_else(|| Error::server(GET, "HGETALL gave no array"))?;
        Ok(Step::Done((!items.is_empty()).then(|| JobRow::from_pairs(items))))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(GET, "a read has no EXEC"))
    }
}

// ------------------------------------------------------------------ lanes

/// The names of the queue's lanes: every key `P lane:L` or `P lanectl:L`, by
/// `SCAN`, one pattern each, until both cursors come back to `0`.
#[derive(Clone, Debug)]
struct LaneScan {
    /// (kind, cursor) of each scan not yet done.
    open: Vec<(&'static [u8], Vec<u8>)>,
    names: Vec<Vec<u8>>,
}

impl LaneScan {
    fn new() -> Self {
        LaneScan { open: vec![(b"lane:", b"0".to_vec()), (b"lanectl:", b"0".to_vec())], names: vec![] }
    }

    fn cmds(&self, keys: &Keys) -> Vec<Cmd> {
        self.open
            .iter()
            .map(|(kind, cursor)| {
                let mut pattern = glob_escape(&keys.key(kind));
                pattern.push(b'*');
                Cmd::new("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(SCAN_COUNT)
            })
            .collect()
    }

    /// Takes the replies of `cmds`; gives whether every scan is done.
    fn feed(&mut self, verb: &str, keys: &Keys, replies: &[Reply]) -> Result<bool> {
        if replies.len() != self.open.len() {
            return Err(Error::server(verb, "SCAN: wrong number of replies"));
        }
        let mut open = vec![];
        for ((kind, _), r) in self.open.iter().zip(replies) {
            check(verb, b"SCAN", r)?;
            let (cursor, found) = match r.as_array() {
                Some([cursor, Reply::Array(found)]) => (cursor.as_bytes(), found),
                _ => return Err(Error::server(verb, "SCAN gave no cursor and keys")),
            };
            let cursor = cursor.ok_or_else(|| Error::server(verb, "SCAN gave no cursor"))?;
            let head = keys.key(kind);
            for k in found {
                if let Some(name) = k.as_bytes().and_then(|k| k.strip_prefix(head.as_slice())) {
                    if !name.is_empty() {
                        self.names.push(name.to_vec());
                    }
                }
            }
            if cursor != b"0" {
                open.push((*kind, cursor.to_vec()));
            }
        }
        self.open = open;
        Ok(self.open.is_empty())
    }

    fn done(&mut self) -> Vec<Vec<u8>> {
        let mut names = std::mem::take(&mut self.names);
        names.sort();
        names.dedup();
        names
    }
}

/// The queue's lanes, sorted by name bytes.
pub struct Lanes {
    keys: Keys,
    scan: LaneScan,
}

impl Lanes {
    pub fn new(keys: Keys) -> Self {
        Lanes { keys, scan: LaneScan::new() }
    }
}

impl Conversation for Lanes {
    type Out = Vec<Vec<u8>>;

    fn verb(&self) -> &'static str {
        LANES
    }

    fn start(&mut self) -> Step<Self::Out> {
        self.scan = LaneScan::new();
        Step::Read { watch: vec![], cmds: self.scan.cmds(&self.keys) }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if self.scan.feed(LANES, &self.keys, replies)? {
            return Ok(Step::Done(self.scan.done()));
        }
        Ok(Step::Read { watch: vec![], cmds: self.scan.cmds(&self.keys) })
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(LANES, "a read has no EXEC"))
    }
}

// ------------------------------------------------------------------ counts

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub schedule: i64,
    pub pending: i64,
    /// Each lane's list length, by name.
    pub lanes: Vec<(Vec<u8>, i64)>,
    pub active: i64,
    pub dead: i64,
    /// Done rows still kept: those in `P done` finished after `now - done_ms`
    /// (all of them when kept forever).
    pub done: i64,
    pub ring: i64,
}

/// The counts of every place, read in one `MULTI`/`EXEC` (one instant) once
/// the lanes are known: the clock and `done_ms` first, with the lane scans.
pub struct CountsRead {
    keys: Keys,
    scan: LaneScan,
    /// The clock reading, once the first reads are in.
    now: Option<i64>,
    done_ms: i64,
    lanes: Vec<Vec<u8>>,
}

impl CountsRead {
    pub fn new(keys: Keys) -> Self {
        CountsRead { keys, scan: LaneScan::new(), now: None, done_ms: retention::DONE_MS, lanes: vec![] }
    }

    fn count_cmds(&mut self) -> Step<Counts> {
        let k = &self.keys;
        self.lanes = self.scan.done();
        let done = if self.done_ms >= 0 {
            let from = format!("({}", self.now.unwrap_or(0).saturating_sub(self.done_ms));
            Cmd::new("ZCOUNT").arg(k.done()).arg(from).arg("+inf")
        } else {
            Cmd::new("ZCARD").arg(k.done())
        };
        let mut cmds = vec![
            Cmd::new("ZCARD").arg(k.schedule()),
            Cmd::new("LLEN").arg(k.pending()),
            Cmd::new("ZCARD").arg(k.active()),
            Cmd::new("ZCARD").arg(k.dead()),
            done,
            Cmd::new("LLEN").arg(k.ring()),
        ];
        cmds.extend(self.lanes.iter().map(|l| Cmd::new("LLEN").arg(k.lane(l))));
        Step::Exec(cmds)
    }
}

impl Conversation for CountsRead {
    type Out = Counts;

    fn verb(&self) -> &'static str {
        COUNTS
    }

    fn start(&mut self) -> Step<Counts> {
        self.scan = LaneScan::new();
        self.now = None;
        let mut cmds = vec![Cmd::new("TIME"), retention::read(&self.keys, &["done_ms"])];
        cmds.extend(self.scan.cmds(&self.keys));
        Step::Read { watch: vec![], cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Counts>> {
        let scans = if self.now.is_none() {
            let [time, policy, scans @ ..] = replies else {
                return Err(Error::server(COUNTS, "wrong number of replies"));
            };
            self.now = Some(parse_time(time).ok_or_else(|| Error::server(COUNTS, "TIME gave no clock"))?);
            self.done_ms = Retention::from_reply(COUNTS, &self.keys, &["done_ms"], policy)?.done_ms;
            scans
        } else {
            replies
        };
        if self.scan.feed(COUNTS, &self.keys, scans)? {
            return Ok(self.count_cmds());
        }
        Ok(Step::Read { watch: vec![], cmds: self.scan.cmds(&self.keys) })
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<Counts> {
        let k = &self.keys;
        let mut keys = vec![k.schedule(), k.pending(), k.active(), k.dead(), k.done(), k.ring()];
        keys.extend(self.lanes.iter().map(|l| k.lane(l)));
        if exec.len() != keys.len() {
            return Err(Error::server(COUNTS, "EXEC: wrong number of replies"));
        }
        let mut n = Vec::with_capacity(exec.len());
        for (key, r) in keys.iter().zip(exec) {
            check(COUNTS, key, r)?;
            n.push(r.as_int().ok_or_else(|| Error::server(COUNTS, "a count was not an integer"))?);
        }
        Ok(Counts {
            schedule: n[0],
            pending: n[1],
            active: n[2],
            dead: n[3],
            done: n[4],
            ring: n[5],
            lanes: std::mem::take(&mut self.lanes).into_iter().zip(n[6..].iter().copied()).collect(),
        })
    }
}

// ------------------------------------------------------------------ retention

/// The effective policy (`P retention` with the defaults filled in).
pub struct GetRetention {
    keys: Keys,
}

impl GetRetention {
    pub fn new(keys: Keys) -> Self {
        GetRetention { keys }
    }
}

impl Conversation for GetRetention {
    type Out = Retention;

    fn verb(&self) -> &'static str {
        RETENTION
    }

    fn start(&mut self) -> Step<Retention> {
        Step::Read { watch: vec![], cmds: vec![retention::read(&self.keys, &retention::FIELDS)] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Retention>> {
        let [r] = replies else { return Err(Error::server(RETENTION, "wrong number of replies")) };
        Ok(Step::Done(Retention::from_reply(RETENTION, &self.keys, &retention::FIELDS, r)?))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Retention> {
        Err(Error::server(RETENTION, "a read has no EXEC"))
    }
}

/// Sets the fields given (`None`: left as it is); each `-1` (none) or more.
pub struct SetRetention {
    keys: Keys,
    fields: Vec<(&'static str, i64)>,
}

impl SetRetention {
    pub fn new(keys: Keys, done_ms: Option<i64>, dead_ms: Option<i64>, dead_max: Option<i64>) -> Result<Self> {
        let mut fields = vec![];
        for (name, v) in retention::FIELDS.into_iter().zip([done_ms, dead_ms, dead_max]) {
            if let Some(v) = v {
                if !(-1..=MAX_VALUE).contains(&v) {
                    return Err(Error::argument(RETENTION, name, format!("must be -1 (none) or from 0 to {MAX_VALUE}, not {v}")));
                }
                fields.push((name, v));
            }
        }
        Ok(SetRetention { keys, fields })
    }
}

impl Conversation for SetRetention {
    type Out = ();

    fn verb(&self) -> &'static str {
        RETENTION
    }

    fn start(&mut self) -> Step<()> {
        if self.fields.is_empty() {
            return Step::Done(());
        }
        let mut set = Cmd::new("HSET").arg(self.keys.retention());
        for (name, v) in &self.fields {
            set = set.arg(name).arg(v.to_string());
        }
        Step::Exec(vec![set])
    }

    fn feed(&mut self, _replies: &[Reply]) -> Result<Step<()>> {
        Err(Error::server(RETENTION, "setting the retention reads nothing"))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        for r in exec {
            check(RETENTION, &self.keys.retention(), r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn scan(cursor: &str, keys: &[&str]) -> Reply {
        Reply::Array(vec![bulk(cursor), Reply::Array(keys.iter().map(|k| bulk(k)).collect())])
    }

    fn wrongtype() -> Reply {
        Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() }
    }

    #[test]
    fn glob_escapes_the_pattern_characters() {
        assert_eq!(glob_escape(b"emq:{a*b?[c]\\}:"), b"emq:{a\\*b\\?\\[c\\]\\\\}:".to_vec());
    }

    #[test]
    fn get_reads_the_row_and_raises_errors() {
        let mut g = Get::new(Keys::new(b"q"), b"a".to_vec()).unwrap();
        let Step::Read { cmds, .. } = g.start() else { panic!() };
        assert_eq!(cmds, vec![Cmd::from_args(["HGETALL", "emq:{q}:job:a"])]);
        let row = Reply::Array(vec![
            bulk("state"),
            bulk("active"),
            bulk("attempts"),
            bulk("2"),
            bulk("lease"),
            bulk("17"),
            bulk("data"),
            bulk("\u{0}x"),
        ]);
        let Step::Done(Some(r)) = g.feed(&[row]).unwrap() else { panic!() };
        assert_eq!((r.state.as_deref(), r.attempts, r.lease, r.data.as_slice()), (Some(&b"active"[..]), 2, Some(17), &b"\x00x"[..]));
        assert_eq!(g.feed(&[Reply::Array(vec![])]).unwrap(), Step::Done(None));
        assert_eq!(g.feed(&[wrongtype()]).unwrap_err().kind, crate::error::ErrorKind::Layout);
        let e = g.feed(&[Reply::Error { code: "NOPERM".into(), message: "NOPERM no".into() }]).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (crate::error::ErrorKind::Server, "EMQ.GET: NOPERM no"));
        assert_eq!(Get::new(Keys::new(b"q"), vec![]).err().unwrap().kind, crate::error::ErrorKind::Argument);
    }

    #[test]
    fn lanes_scan_until_both_cursors_are_done() {
        let mut l = Lanes::new(Keys::new(b"a*q"));
        let Step::Read { cmds, .. } = l.start() else { panic!() };
        assert_eq!(cmds[0], Cmd::from_args(["SCAN", "0", "MATCH", "emq:{a\\*q}:lane:*", "COUNT", "1000"]));
        assert_eq!(cmds[1], Cmd::from_args(["SCAN", "0", "MATCH", "emq:{a\\*q}:lanectl:*", "COUNT", "1000"]));
        let next = l.feed(&[scan("7", &["emq:{a*q}:lane:B"]), scan("0", &["emq:{a*q}:lanectl:A", "emq:{a*q}:lanectl:B"])]).unwrap();
        let Step::Read { cmds, .. } = next else { panic!("{next:?}") };
        assert_eq!(cmds, vec![Cmd::from_args(["SCAN", "7", "MATCH", "emq:{a\\*q}:lane:*", "COUNT", "1000"])]);
        let done = l.feed(&[scan("0", &["emq:{a*q}:lane:C"])]).unwrap();
        assert_eq!(done, Step::Done(vec![b"A".to_vec(), b"B".to_vec(), b"C".to_vec()]));
    }

    #[test]
    fn counts_read_done_rows_still_kept() {
        let mut c = CountsRead::new(Keys::new(b"q"));
        let Step::Read { cmds, .. } = c.start() else { panic!() };
        assert_eq!(cmds.len(), 4);
        let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
        let step = c.feed(&[time, Reply::Array(vec![bulk("1000")]), scan("0", &["emq:{q}:lane:L"]), scan("0", &[])]).unwrap();
        let Step::Exec(cmds) = step else { panic!("{step:?}") };
        assert_eq!(cmds[4], Cmd::from_args(["ZCOUNT", "emq:{q}:done", "(1699999999123", "+inf"]));
        assert_eq!(cmds[6], Cmd::from_args(["LLEN", "emq:{q}:lane:L"]));
        let counts = c.finish(&[1, 2, 3, 4, 5, 6, 7].map(Reply::Int)).unwrap();
        assert_eq!(counts, Counts { schedule: 1, pending: 2, active: 3, dead: 4, done: 5, ring: 6, lanes: vec![(b"L".to_vec(), 7)] });
    }

    #[test]
    fn counts_raise_error_replies() {
        let mut c = CountsRead::new(Keys::new(b"q"));
        c.start();
        let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
        c.feed(&[time, Reply::Array(vec![bulk("-1")]), scan("0", &[]), scan("0", &[])]).unwrap();
        let e = c.finish(&[Reply::Int(1), wrongtype(), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap_err();
        assert_eq!(e.kind, crate::error::ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:pending"), "{e}");
    }

    #[test]
    fn set_retention_checks_every_value_first() {
        let k = || Keys::new(b"q");
        let e = SetRetention::new(k(), Some(5), Some(-2), None).err().unwrap();
        assert_eq!(e.kind, crate::error::ErrorKind::Argument);
        assert!(e.message.starts_with("EMQ.RETENTION: dead_ms"), "{e}");
        assert!(SetRetention::new(k(), None, None, Some(MAX_VALUE + 1)).is_err());
        let mut s = SetRetention::new(k(), Some(0), None, Some(-1)).unwrap();
        assert_eq!(s.start(), Step::Exec(vec![Cmd::from_args(["HSET", "emq:{q}:retention", "done_ms", "0", "dead_max", "-1"])]));
        assert_eq!(SetRetention::new(k(), None, None, None).unwrap().start(), Step::Done(()));
    }
}

//! A schedule as the server keeps it: its record, one field of `P schedules`
//! (hash: name -> record), in JSON, and the checked definition a caller gives.
//!
//! The record is `{"v":1, "cron": ..., "every_ms": ..., "tz": ..., "missed":
//! "latest|all|skip", "max_missed": n, "grace_ms": n, "paused": bool, "job":
//! {"data": <UTF-8 text> or "data_b64": <base64>, "lane": ..., "max_attempts":
//! n}, "last_tick": ms, "created": ms}`, its keys in sorted order (every host
//! writes the same bytes for the same record). The schedule's next tick is not
//! in it: it is the `tick:<name>` member of `P timers` (absent while paused).

use serde_json::{json, Map, Value};

use super::due::Missed;
use super::spec::Spec;
use super::tick_id::schedule_name_problem;
use crate::error::{Error, Result};
use crate::names::id_problem;

/// What each tick enqueues: an ordinary job's data, lane and attempts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TickJob {
    pub data: Vec<u8>,
    pub lane: Option<Vec<u8>>,
    pub max_attempts: u32,
}

/// A schedule's record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub cron: Option<String>,
    pub every_ms: Option<i64>,
    /// The zone's canonical name (`UTC` for an interval).
    pub tz: String,
    pub missed: Missed,
    pub paused: bool,
    pub job: TickJob,
    /// The latest tick that enqueued a job (`None`: none yet).
    pub last_tick: Option<i64>,
    pub created: i64,
}

/// A schedule as a caller defines it (SCHEDULE), checked: name, spec, policy, job.
#[derive(Clone, Debug)]
pub struct Definition {
    pub name: Vec<u8>,
    pub spec: Spec,
    pub missed: Missed,
    pub job: TickJob,
}

impl Definition {
    /// Checks every argument before anything is read: the name
    /// (`schedule_name_problem`), the spec (`Spec::parse`), the policy
    /// (`Missed::parse`), the job's lane and attempts. `verb` names the call.
    #[allow(clippy::too_many_arguments)]
    pub fn parse(
        verb: &str,
        name: &[u8],
        cron: Option<&str>,
        every_ms: Option<i64>,
        tz: Option<&str>,
        missed: Option<&str>,
        max_missed: Option<i64>,
        grace_ms: Option<i64>,
        job: TickJob,
    ) -> Result<Definition> {
        check_name(verb, name)?;
        let spec = Spec::parse(verb, cron, every_ms, tz)?;
        let missed = Missed::parse(verb, missed, max_missed, grace_ms)?;
        if let Some(why) = job.lane.as_deref().and_then(id_problem) {
            return Err(Error::argument(verb, "lane", why));
        }
        if job.lane.as_deref().is_some_and(|l| std::str::from_utf8(l).is_err()) {
            return Err(Error::argument(verb, "lane", "must be UTF-8"));
        }
        if job.max_attempts == 0 {
            return Err(Error::argument(verb, "max_attempts", "must be a positive integer"));
        }
        Ok(Definition { name: name.to_vec(), spec, missed, job })
    }

    /// The record of this definition, new (`created`, nothing ticked, running).
    pub fn record(&self, created: i64) -> Record {
        Record {
            cron: self.spec.cron_expression().map(str::to_string),
            every_ms: self.spec.every_ms(),
            tz: self.spec.zone_name().to_string(),
            missed: self.missed,
            paused: false,
            job: self.job.clone(),
            last_tick: None,
            created,
        }
    }
}

/// A schedule name as every schedule verb takes it.
pub fn check_name(verb: &str, name: &[u8]) -> Result<()> {
    match schedule_name_problem(name) {
        Some(why) => Err(Error::argument(verb, "name", why)),
        None => Ok(()),
    }
}

/// A policy as its arguments: `missed`, `max_missed`, `grace_ms` (what
/// `Missed::parse` takes back).
pub fn missed_parts(m: Missed) -> (&'static str, Option<i64>, Option<i64>) {
    match m {
        Missed::Latest => ("latest", None, None),
        Missed::All { max_missed } => ("all", Some(i64::from(max_missed)), None),
        Missed::Skip { grace_ms } => ("skip", None, Some(grace_ms)),
    }
}

/// The member of `P timers` that holds a schedule's next tick.
pub fn timer_member(name: &[u8]) -> Vec<u8> {
    [TICK_PREFIX, name].concat()
}

/// The prefix of a schedule's member of `P timers`.
pub const TICK_PREFIX: &[u8] = b"tick:";

impl Record {
    /// The spec, parsed again from the record (`None`: it no longer parses, as
    /// when a zone left the bundled database).
    pub fn spec(&self) -> Option<Spec> {
        Spec::parse("EMQ.TIMERS", self.cron.as_deref(), self.every_ms, Some(&self.tz)).ok()
    }

    /// Whether `other` ticks the same ticks with the same jobs: a SCHEDULE that
    /// finds its own definition stored changes nothing (so a worker that starts
    /// and writes its app's schedules keeps their next ticks and missed ticks).
    pub fn same_schedule(&self, other: &Record) -> bool {
        (&self.cron, self.every_ms, &self.tz, self.missed, &self.job) == (&other.cron, other.every_ms, &other.tz, other.missed, &other.job)
    }

    /// The record's JSON, keys sorted.
    pub fn to_json(&self) -> Vec<u8> {
        let (missed, max_missed, grace_ms) = missed_parts(self.missed);
        let mut job = Map::new();
        match std::str::from_utf8(&self.job.data) {
            Ok(text) => job.insert("data".into(), Value::from(text)),
            Err(_) => job.insert("data_b64".into(), Value::from(base64_encode(&self.job.data))),
        };
        let lane = self.job.lane.as_deref().map(|l| String::from_utf8_lossy(l).into_owned());
        job.insert("lane".into(), json!(lane));
        job.insert("max_attempts".into(), json!(self.job.max_attempts));
        let v = json!({
            "v": 1,
            "cron": self.cron,
            "every_ms": self.every_ms,
            "tz": self.tz,
            "missed": missed,
            "max_missed": max_missed,
            "grace_ms": grace_ms,
            "paused": self.paused,
            "job": Value::Object(job),
            "last_tick": self.last_tick,
            "created": self.created,
        });
        serde_json::to_vec(&v).expect("a record is JSON")
    }

    /// A record from its JSON (`None`: not a record this version reads).
    pub fn from_json(bytes: &[u8]) -> Option<Record> {
        let v: Value = serde_json::from_slice(bytes).ok()?;
        let o = v.as_object()?;
        if o.get("v")?.as_i64()? != 1 {
            return None;
        }
        let opt_int = |k: &str| match o.get(k) {
            None | Some(Value::Null) => Some(None),
            Some(x) => x.as_i64().map(Some),
        };
        let missed = match o.get("missed")?.as_str()? {
            "latest" => Missed::Latest,
            "all" => Missed::All { max_missed: u32::try_from(opt_int("max_missed")??).ok()? },
            "skip" => Missed::Skip { grace_ms: opt_int("grace_ms")?? },
            _ => return None,
        };
        let job = o.get("job")?.as_object()?;
        let data = match (job.get("data"), job.get("data_b64")) {
            (Some(Value::String(text)), None) => text.as_bytes().to_vec(),
            (None, Some(Value::String(b64))) => base64_decode(b64)?,
            _ => return None,
        };
        let lane = match job.get("lane") {
            None | Some(Value::Null) => None,
            Some(l) => Some(l.as_str()?.as_bytes().to_vec()),
        };
        let max_attempts = u32::try_from(job.get("max_attempts")?.as_u64()?).ok()?;
        Some(Record {
            cron: match o.get("cron") {
                None | Some(Value::Null) => None,
                Some(c) => Some(c.as_str()?.to_string()),
            },
            every_ms: opt_int("every_ms")?,
            tz: o.get("tz")?.as_str()?.to_string(),
            missed,
            paused: o.get("paused")?.as_bool()?,
            job: TickJob { data, lane, max_attempts },
            last_tick: opt_int("last_tick")?,
            created: o.get("created")?.as_i64()?,
        })
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (data that is not UTF-8 text).
fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | u32::try_from(B64.iter().position(|&x| x == c)?).ok()?;
        }
        n <<= 6 * pad as u32;
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..3 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(data: &[u8], missed: Missed) -> Record {
        Record {
            cron: Some("0 3 * * *".into()),
            every_ms: None,
            tz: "Europe/Berlin".into(),
            missed,
            paused: true,
            job: TickJob { data: data.to_vec(), lane: Some(b"l".to_vec()), max_attempts: 7 },
            last_tick: Some(-5),
            created: 1_767_225_600_000,
        }
    }

    #[test]
    fn records_read_back_what_they_wrote() {
        for data in [&b""[..], b"x", b"ab", b"abc", b"\xff\x00\x01", &[0xfe; 10], "caf\u{e9}".as_bytes()] {
            for missed in [Missed::Latest, Missed::All { max_missed: 10 }, Missed::Skip { grace_ms: 0 }] {
                let r = record(data, missed);
                assert_eq!(Record::from_json(&r.to_json()), Some(r.clone()), "{data:?}");
            }
        }
        assert_eq!(base64_encode(b"\xff\x00\x01\x02"), "/wABAg==");
    }

    #[test]
    fn the_json_has_sorted_keys_and_the_documented_fields() {
        let r = record(b"hi", Missed::Latest);
        assert_eq!(
            String::from_utf8(r.to_json()).unwrap(),
            r#"{"created":1767225600000,"cron":"0 3 * * *","every_ms":null,"grace_ms":null,"job":{"data":"hi","lane":"l","max_attempts":7},"last_tick":-5,"max_missed":null,"missed":"latest","paused":true,"tz":"Europe/Berlin","v":1}"#
        );
    }

    #[test]
    fn what_is_not_a_record_reads_as_none() {
        for bad in [&b""[..], b"{}", b"[1]", b"{\"v\":2}", b"\xff"] {
            assert_eq!(Record::from_json(bad), None);
        }
        let mut text = String::from_utf8(record(b"x", Missed::Latest).to_json()).unwrap();
        text = text.replace("\"latest\"", "\"sometimes\"");
        assert_eq!(Record::from_json(text.as_bytes()), None);
    }

    #[test]
    fn same_schedule_ignores_state_not_definition() {
        let a = record(b"x", Missed::Latest);
        let mut b = a.clone();
        (b.paused, b.last_tick, b.created) = (false, None, 1);
        assert!(a.same_schedule(&b));
        b.job.max_attempts = 1;
        assert!(!a.same_schedule(&b));
    }
}

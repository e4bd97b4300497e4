//! A worker's module commands, in the sweeps' shape (the key that routes the
//! call, the prefix, the arguments): checked as the module checks them
//! (`parse_job`) and built as the client host sends them (`claim_cmd`, ...).
//! Each is one round trip, run by the plans inside the server.
//!
//! `EMQ.CLAIM 1 <P>pending <P> <n> <lease_ms> <token>…` (exactly `n` tokens,
//! made by the caller: a lease's proof, 128 random bits)
//!
//! `EMQ.COMPLETE 1 <P>active <P> v2 <id> <token> <lane> <result>…` (four
//! arguments a job; lane empty for none; `result` is `n` for none or `v` and
//! the value's bytes)
//!
//! `EMQ.ADD 1 <P>schedule <P> v2 <tag> <seq> <id> <data> <when> <lane>
//! <max_attempts> <keep> <unique_key> <unique_ms>…` (eight arguments a job: id
//! empty for one the plan makes from the caller's `tag` and `seq`, so a replica
//! or the AOF replays the very ids handed out; `when` is `d<ms>`, a delay, or
//! `a<ms>`, a due time; lane empty for none; `keep` empty for none, else the
//! job's own retention in ms, `-1` forever; `unique_key` and `unique_ms` empty
//! for none, else the uniqueness key and its window in ms)
//!
//! `EMQ.EXTEND 1 <P>active <P> <lease_ms> <id> <token> <lane>…` (the leases of a
//! worker's running jobs, `extend_many`: a triple a job)
//!
//! `EMQ.SETTLE 1 <P>active <P> v2 <id> <token> <lane> <fate> <a> <b> <c>…` (a
//! group commit of completes and fails, `settle_many`: seven arguments a job;
//! `fate` is `c` to complete, `r<ms>` to fail with that retry delay, `b<unit>`
//! to fail with the backoff, `unit` the jitter's draw in millionths; a complete's
//! `a` is its result as in `EMQ.COMPLETE`, `b` and `c` empty; a fail's `a` is its
//! error, `b` its error type and `c` its traceback, each `n` or `v` and the bytes)
//!
//! **Versions.** The forms that carry results and errors (SPEC §13) say their
//! version, `v2`, after the prefix; the module refuses a form without it (a
//! client of an older emq: `EMQARG … version`), and an older module refuses
//! this one (its argument checks fail: `tag`, the jobs' count), so a client and
//! a module of different versions never settle jobs by a misread form.

use crate::batch::extend_many::{Held, EXTEND_MAX};
use crate::batch::settle_many::Fate;
use crate::error::{Error, Result};
use crate::jobs::add::{NewJob, Unique, When, ADD};
use crate::jobs::claim::{CLAIM, MAX_CLAIM};
use crate::jobs::settle::{COMPLETE, EXTEND, FAIL};
use crate::names::Keys;
use crate::numbers::{count_arg, decimal, signed_decimal, MAX_MS};
use crate::protocol::cmd::Cmd;
use crate::protocol::write::ErrorDetail;
use crate::wire::routing::queue_of;

/// The version of the forms that carry results and errors.
pub const FORM_VERSION: &[u8] = b"v2";

/// A worker's call in its wire form (`parse_job`).
#[derive(Clone, Debug, PartialEq)]
pub enum JobRequest {
    Claim { queue: Vec<u8>, n: u64, lease_ms: u64, tokens: Vec<Vec<u8>> },
    Complete { queue: Vec<u8>, jobs: Vec<(Held, Option<Vec<u8>>)> },
    Extend { queue: Vec<u8>, lease_ms: u64, jobs: Vec<Held> },
    Add { queue: Vec<u8>, gen: (u32, u64), jobs: Vec<NewJob> },
    Settle { queue: Vec<u8>, jobs: Vec<(Held, Fate)> },
}

/// `EMQ.SETTLE`'s name, in its layout errors (a job's own errors name `EMQ.COMPLETE` or `EMQ.FAIL`).
pub const SETTLE: &str = "EMQ.SETTLE";

/// Checks `EMQ.CLAIM`, `EMQ.COMPLETE`, `EMQ.EXTEND`, `EMQ.SETTLE` or `EMQ.ADD` (its name first): the layout,
/// then each argument. What the conversation checks itself (no id twice, n and the lease
/// positive) it still checks, with the same errors as the client host's.
pub fn parse_job(args: &[&[u8]]) -> Result<JobRequest> {
    let Some((name, tail)) = args.split_first() else {
        return Err(Error::argument("emq", "command", "is empty"));
    };
    let upper = name.to_ascii_uppercase();
    let (verb, suffix): (&str, &[u8]) = match upper.as_slice() {
        b"EMQ.CLAIM" => (CLAIM, b"pending"),
        b"EMQ.COMPLETE" => (COMPLETE, b"active"),
        b"EMQ.EXTEND" => (EXTEND, b"active"),
        b"EMQ.ADD" => (ADD, b"schedule"),
        b"EMQ.SETTLE" => (SETTLE, b"active"),
        _ => {
            return Err(Error::argument(
                "emq",
                "command",
                format!("{:?} is not EMQ.CLAIM, EMQ.COMPLETE, EMQ.EXTEND, EMQ.SETTLE or EMQ.ADD", String::from_utf8_lossy(name)),
            ))
        }
    };
    let shape = match verb {
        CLAIM => "1 key, the prefix, n, lease_ms and n tokens",
        ADD => "1 key, the prefix, v2, the id tag and sequence, and an id, data, when, lane, max_attempts, keep, unique_key and unique_ms a job",
        SETTLE => "1 key, the prefix, v2 and an id, token, lane, fate and three values a job",
        EXTEND => "1 key, the prefix, lease_ms and an id, token and lane a job",
        _ => "1 key, the prefix, v2 and an id, token, lane and result a job",
    };
    if tail.len() < 3 || tail[0] != b"1" {
        return Err(Error::layout(verb, format!("expected {shape}")));
    }
    let mut argv = &tail[3..];
    let queue = queue_of(verb, tail[2], &tail[1..2], &[suffix])?.to_vec();
    if matches!(verb, ADD | SETTLE | COMPLETE) {
        if argv.is_empty() {
            return Err(Error::layout(verb, format!("expected {shape}")));
        }
        match argv.split_first() {
            Some((v, rest)) if *v == FORM_VERSION => argv = rest,
            _ => {
                return Err(Error::argument(
                    verb,
                    "version",
                    "must be v2 after the prefix (this module's form: the client and the module are of different emq versions)",
                ))
            }
        }
    }
    if verb == CLAIM {
        let [n, lease_ms, tokens @ ..] = argv else { return Err(Error::layout(verb, format!("expected {shape}"))) };
        let n = count_arg(n, false).filter(|&n| n <= MAX_CLAIM);
        let n = n.ok_or_else(|| Error::argument(verb, "n", format!("must be an integer from 1 to {MAX_CLAIM}")))?;
        let lease_ms = count_arg(lease_ms, false).ok_or_else(|| Error::argument(verb, "lease_ms", "must be a positive integer"))?;
        if tokens.len() as u64 != n {
            return Err(Error::layout(verb, format!("expected {shape} ({n} tokens, not {})", tokens.len())));
        }
        if tokens.iter().any(|t| t.is_empty()) {
            return Err(Error::argument(verb, "token", "must not be empty"));
        }
        return Ok(JobRequest::Claim { queue, n, lease_ms, tokens: tokens.iter().map(|t| t.to_vec()).collect() });
    }
    if verb == ADD {
        return parse_add(queue, argv, shape);
    }
    if verb == SETTLE {
        return parse_settle(queue, argv, shape);
    }
    if verb == EXTEND {
        let [lease_ms, jobs @ ..] = argv else { return Err(Error::layout(verb, format!("expected {shape}"))) };
        let lease_ms = count_arg(lease_ms, false).ok_or_else(|| Error::argument(verb, "lease_ms", "must be a positive integer"))?;
        return Ok(JobRequest::Extend { queue, lease_ms, jobs: held_triples(verb, jobs, shape)? });
    }
    Ok(JobRequest::Complete { queue, jobs: completes(argv, shape)? })
}

/// A value that may be absent, as the forms carry it: `n` for none, `v` and its bytes.
fn optional_value(verb: &str, name: &str, v: &[u8]) -> Result<Option<Vec<u8>>> {
    match v.split_first() {
        Some((b'n', [])) => Ok(None),
        Some((b'v', bytes)) => Ok(Some(bytes.to_vec())),
        _ => Err(Error::argument(verb, name, "must be n (none) or v and the value")),
    }
}

/// [`optional_value`]'s form of `v`.
fn value_arg(c: Cmd, v: Option<&[u8]>) -> Cmd {
    match v {
        None => c.arg("n"),
        Some(bytes) => c.arg_parts(&[b"v", bytes]),
    }
}

/// `EMQ.COMPLETE`'s jobs: an id, a token, a lane (empty for none) and a result each.
fn completes(argv: &[&[u8]], shape: &str) -> Result<Vec<(Held, Option<Vec<u8>>)>> {
    if argv.is_empty() || !argv.len().is_multiple_of(4) {
        return Err(Error::layout(COMPLETE, format!("expected {shape}")));
    }
    if argv.len() / 4 > EXTEND_MAX {
        return Err(Error::argument(COMPLETE, "jobs", format!("at most {EXTEND_MAX} a call")));
    }
    argv.chunks_exact(4)
        .map(|j| {
            if j[1].is_empty() {
                return Err(Error::argument(COMPLETE, "token", "must not be empty"));
            }
            let held = Held { id: j[0].to_vec(), token: j[1].to_vec(), lane: (!j[2].is_empty()).then(|| j[2].to_vec()) };
            Ok((held, optional_value(COMPLETE, "result", j[3])?))
        })
        .collect()
}

/// `EMQ.COMPLETE`'s and `EMQ.EXTEND`'s jobs: an id, a token and a lane (empty for none) each.
fn held_triples(verb: &'static str, argv: &[&[u8]], shape: &str) -> Result<Vec<Held>> {
    if argv.is_empty() || !argv.len().is_multiple_of(3) {
        return Err(Error::layout(verb, format!("expected {shape}")));
    }
    if argv.len() / 3 > EXTEND_MAX {
        return Err(Error::argument(verb, "jobs", format!("at most {EXTEND_MAX} a call")));
    }
    argv.chunks_exact(3)
        .map(|j| {
            if j[1].is_empty() {
                return Err(Error::argument(verb, "token", "must not be empty"));
            }
            Ok(Held { id: j[0].to_vec(), token: j[1].to_vec(), lane: (!j[2].is_empty()).then(|| j[2].to_vec()) })
        })
        .collect()
}

/// `EMQ.SETTLE`'s arguments after the version: seven a job. What `SettleMany::new`
/// checks (ids, none twice, sizes) it leaves to it.
fn parse_settle(queue: Vec<u8>, argv: &[&[u8]], shape: &str) -> Result<JobRequest> {
    if argv.is_empty() || !argv.len().is_multiple_of(7) {
        return Err(Error::layout(SETTLE, format!("expected {shape}")));
    }
    if argv.len() / 7 > EXTEND_MAX {
        return Err(Error::argument(SETTLE, "jobs", format!("at most {EXTEND_MAX} a call")));
    }
    let jobs = argv
        .chunks_exact(7)
        .map(|j| {
            let fail = |retry_in_ms, jitter, retry| -> Result<Fate> {
                let detail = ErrorDetail {
                    error_type: optional_value(FAIL, "error_type", j[5])?,
                    traceback: optional_value(FAIL, "traceback", j[6])?,
                };
                let detail = (detail.error_type.is_some() || detail.traceback.is_some()).then(|| Box::new(detail));
                Ok(Fate::Fail { error: j[4].to_vec(), retry_in_ms, jitter, detail, retry })
            };
            let fate = match j[3].split_first() {
                Some((b'c', [])) if j[5].is_empty() && j[6].is_empty() => {
                    Some(Fate::Complete { result: optional_value(COMPLETE, "result", j[4])? })
                }
                Some((b'r', ms)) => decimal::<u64>(ms).map(|ms| fail(Some(ms), 0.0, true)).transpose()?,
                Some((b'b', unit)) => {
                    decimal::<u64>(unit).filter(|&u| u < 1_000_000).map(|u| fail(None, u as f64 / 1e6, true)).transpose()?
                }
                Some((b'd', [])) => Some(fail(None, 0.0, false)?),
                _ => None,
            };
            let fate = fate.ok_or_else(|| {
                Error::argument(
                    SETTLE,
                    "fate",
                    "must be c (with a result and two empty values), r<retry ms>, b<jitter in millionths> or d (dead now)",
                )
            })?;
            let verb = if matches!(fate, Fate::Complete { .. }) { COMPLETE } else { FAIL };
            if j[1].is_empty() {
                return Err(Error::argument(verb, "token", "must not be empty"));
            }
            Ok((Held { id: j[0].to_vec(), token: j[1].to_vec(), lane: (!j[2].is_empty()).then(|| j[2].to_vec()) }, fate))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(JobRequest::Settle { queue, jobs })
}

/// `EMQ.ADD`'s arguments after the version: the id tag and sequence, then
/// eight a job. What `Add::new` checks (ids, lanes, `max_attempts` of 0, keys,
/// windows and keeps in range) it leaves to it.
fn parse_add(queue: Vec<u8>, argv: &[&[u8]], shape: &str) -> Result<JobRequest> {
    let [tag, seq, jobs @ ..] = argv else { return Err(Error::layout(ADD, format!("expected {shape}"))) };
    if jobs.is_empty() || jobs.len() % 8 != 0 {
        return Err(Error::layout(ADD, format!("expected {shape}")));
    }
    let tag = count_arg(tag, true).and_then(|t| u32::try_from(t).ok());
    let tag = tag.ok_or_else(|| Error::argument(ADD, "tag", "must be an integer from 0 to 4294967295"))?;
    let seq = decimal::<u64>(seq).ok_or_else(|| Error::argument(ADD, "seq", "must be a non-negative integer"))?;
    let jobs = jobs
        .chunks_exact(8)
        .map(|j| {
            // Any delay or due time the plan takes (the row's digest is of the value given).
            let when = match j[2].split_first() {
                Some((b'd', ms)) => decimal::<u64>(ms).map(When::Delay),
                Some((b'a', ms)) => signed_decimal(ms).map(When::At),
                _ => None,
            };
            let when = when.ok_or_else(|| Error::argument(ADD, "when", "must be d<delay ms> or a<due ms>"))?;
            // `<max_attempts>`, or `<max_attempts>:<priority>` for a priority other than 0.
            let (attempts, priority) = match j[4].iter().position(|&b| b == b':') {
                Some(at) => (&j[4][..at], Some(&j[4][at + 1..])),
                None => (j[4], None),
            };
            let max_attempts = count_arg(attempts, true).and_then(|n| u32::try_from(n).ok());
            let max_attempts = max_attempts.ok_or_else(|| Error::argument(ADD, "max_attempts", "must be a positive integer"))?;
            let priority = match priority {
                None => 0,
                Some(p) => decimal::<u8>(p).ok_or_else(|| Error::argument(ADD, "priority", "must be an integer from 0 to 9"))?,
            };
            let keep = match j[5] {
                b"" => None,
                k => Some(signed_decimal(k).ok_or_else(|| Error::argument(ADD, "keep", "must be empty or an integer (ms, -1: forever)"))?),
            };
            let unique = match (j[6], j[7]) {
                (b"", b"") => None,
                (key, ms) => {
                    let window_ms = decimal::<u64>(ms)
                        .ok_or_else(|| Error::argument(ADD, "unique_ms", "must be a positive integer with a unique_key"))?;
                    Some(Unique { key: key.to_vec(), window_ms })
                }
            };
            Ok(NewJob {
                id: (!j[0].is_empty()).then(|| j[0].to_vec()),
                data: j[1].to_vec(),
                when,
                lane: (!j[3].is_empty()).then(|| j[3].to_vec()),
                max_attempts,
                keep,
                unique,
                priority,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(JobRequest::Add { queue, gen: (tag, seq), jobs })
}

/// `EMQ.ADD`, as the client host sends it (`gen`: the id tag and the first
/// sequence number of the ids the plan makes).
pub fn add_cmd(keys: &Keys, gen: (u32, u64), jobs: &[NewJob]) -> Cmd {
    let mut c = Cmd::new(ADD).arg("1").arg(keys.schedule()).arg(&keys.prefix).arg(FORM_VERSION);
    c = c.arg_int(i64::from(gen.0)).arg(gen.1.to_string());
    for j in jobs {
        let when = match j.when {
            When::Delay(ms) => format!("d{ms}"),
            When::At(ms) => format!("a{ms}"),
        };
        c = c.arg(j.id.as_deref().unwrap_or_default()).arg(&j.data).arg(when).arg(j.lane.as_deref().unwrap_or_default());
        c = if j.priority > 0 { c.arg(format!("{}:{}", j.max_attempts, j.priority)) } else { c.arg_int(i64::from(j.max_attempts)) };
        c = match j.keep {
            Some(k) => c.arg_int(k),
            None => c.arg(""),
        };
        c = match &j.unique {
            Some(u) => c.arg(&u.key).arg(u.window_ms.to_string()),
            None => c.arg("").arg(""),
        };
    }
    c
}

/// `EMQ.CLAIM`, as the client host sends it. A lease of `MAX_MS` or more ends
/// at `MAX_MS` whatever its length (`numbers::later` saturates there), so the
/// form carries at most that: any lease the plan takes, the module takes too,
/// with the same deadline.
pub fn claim_cmd(keys: &Keys, n: u64, lease_ms: u64, tokens: &[Vec<u8>]) -> Cmd {
    let lease_ms = lease_ms.min(MAX_MS.unsigned_abs());
    Cmd::new(CLAIM).arg("1").arg(keys.pending()).arg(&keys.prefix).arg_int(n as i64).arg_int(lease_ms as i64).args(tokens)
}

/// `EMQ.COMPLETE`, as the client host sends it.
pub fn complete_cmd(keys: &Keys, jobs: &[(Held, Option<Vec<u8>>)]) -> Cmd {
    let mut c = Cmd::new(COMPLETE).arg("1").arg(keys.active()).arg(&keys.prefix).arg(FORM_VERSION);
    for (j, result) in jobs {
        c = c.arg(&j.id).arg(&j.token).arg(j.lane.as_deref().unwrap_or_default());
        c = value_arg(c, result.as_deref());
    }
    c
}

/// `EMQ.EXTEND`, as the client host sends it; the lease capped as `claim_cmd`
/// caps it (the plan's deadline is capped there too).
pub fn extend_cmd(keys: &Keys, lease_ms: u64, jobs: &[Held]) -> Cmd {
    let lease_ms = lease_ms.min(MAX_MS.unsigned_abs());
    with_triples(Cmd::new(EXTEND).arg("1").arg(keys.active()).arg(&keys.prefix).arg_int(lease_ms as i64), jobs)
}

fn with_triples(mut c: Cmd, jobs: &[Held]) -> Cmd {
    for j in jobs {
        c = c.arg(&j.id).arg(&j.token).arg(j.lane.as_deref().unwrap_or_default());
    }
    c
}

/// `EMQ.SETTLE`, as the client host sends it. A backoff's jitter goes in
/// millionths, as the module reads it back.
pub fn settle_cmd(keys: &Keys, jobs: &[(Held, Fate)]) -> Cmd {
    let mut c = Cmd::new(SETTLE).arg("1").arg(keys.active()).arg(&keys.prefix).arg(FORM_VERSION);
    for (j, fate) in jobs {
        c = c.arg(&j.id).arg(&j.token).arg(j.lane.as_deref().unwrap_or_default());
        c = match fate {
            Fate::Complete { result } => value_arg(c.arg("c"), result.as_deref()).arg("").arg(""),
            Fate::Fail { error, retry_in_ms, jitter, detail, retry } => {
                let fate = match retry_in_ms {
                    _ if !retry => "d".to_owned(),
                    Some(ms) => format!("r{ms}"),
                    None => format!("b{}", micros(*jitter)),
                };
                let d = detail.as_deref();
                let c = c.arg(fate).arg(error);
                let c = value_arg(c, d.and_then(|d| d.error_type.as_deref()));
                value_arg(c, d.and_then(|d| d.traceback.as_deref()))
            }
        };
    }
    c
}

/// A jitter's draw (in [0, 1)) in whole millionths, as the wire carries it
/// (rounded: what `parse_job` read from the wire goes back as it came).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to [0, 999999] first")]
pub fn micros(unit: f64) -> u64 {
    (unit * 1e6).round().clamp(0.0, 999_999.0) as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::jobs::settle::Settled;
    use crate::protocol::reply::Reply;
    use crate::wire::job_replies::{added_reply, parse_added, parse_settled, settled_reply};

    #[test]
    fn an_add_parses_as_the_host_builds_it_whatever_its_values() {
        let keys = Keys::new(b"orders");
        let job = |id: Option<&[u8]>, when, lane: Option<&[u8]>| NewJob {
            priority: 0,
            id: id.map(<[u8]>::to_vec),
            data: b"d \xff".to_vec(),
            when,
            lane: lane.map(<[u8]>::to_vec),
            max_attempts: 3,
            keep: None,
            unique: None,
        };
        let jobs = vec![
            job(None, When::Delay(0), None),
            job(Some(b"a"), When::Delay(u64::MAX), Some(b"l")),
            job(None, When::At(i64::MIN), None),
            job(None, When::At(i64::MAX), Some(b"\xfe")),
            job(None, When::At(-5), None),
            NewJob { keep: Some(-1), unique: Some(Unique { key: b"k \xff".to_vec(), window_ms: 1 }), ..job(None, When::Delay(1), None) },
            NewJob { keep: Some(0), unique: Some(Unique { key: b"k".to_vec(), window_ms: u64::MAX }), ..job(None, When::Delay(1), None) },
            NewJob { keep: Some(i64::MIN), ..job(None, When::Delay(1), None) },
        ];
        for gen in [(0, 0), (u32::MAX, u64::MAX)] {
            let r = parse_job(&add_cmd(&keys, gen, &jobs).to_args()).unwrap();
            assert_eq!(r, JobRequest::Add { queue: b"orders".to_vec(), gen, jobs: jobs.clone() });
        }
        let ids = vec![b"a".to_vec(), b"\xff".to_vec()];
        assert_eq!(parse_added(&added_reply(&ids, &[true, false]), 2).unwrap(), (ids.clone(), vec![true, false]));
        assert!(parse_added(&added_reply(&ids, &[true, true]), 3).is_err());
    }

    #[test]
    fn an_add_of_the_wrong_shape_or_values_is_refused() {
        let head = "EMQ.ADD 1 emq:{o}:schedule emq:{o}: v2";
        for (tail, kind, name) in [
            ("1 0", ErrorKind::Layout, "expected"),
            ("1 0 a d d0 l 1", ErrorKind::Layout, "expected"),
            ("x 0 a d d0 l 1   ", ErrorKind::Argument, "tag"),
            ("4294967296 0 a d d0 l 1   ", ErrorKind::Argument, "tag"),
            ("1 -1 a d d0 l 1   ", ErrorKind::Argument, "seq"),
            ("1 0 a d x0 l 1   ", ErrorKind::Argument, "when"),
            ("1 0 a d d-1 l 1   ", ErrorKind::Argument, "when"),
            ("1 0 a d a l 1   ", ErrorKind::Argument, "when"),
            ("1 0 a d d18446744073709551616 l 1   ", ErrorKind::Argument, "when"),
            ("1 0 a d d0 l x   ", ErrorKind::Argument, "max_attempts"),
            ("1 0 a d d0 l 1 x  ", ErrorKind::Argument, "keep"),
            ("1 0 a d d0 l 1  k ", ErrorKind::Argument, "unique_ms"),
            ("1 0 a d d0 l 1  k -5", ErrorKind::Argument, "unique_ms"),
        ] {
            refused(&format!("{head} {tail}"), kind, name);
        }
        refused("EMQ.ADD 1 emq:{o}:pending emq:{o}: v2 1 0 a d d0 l 1   ", ErrorKind::Layout, "key");
        // A form of another version (an older client's): refused, naming the version.
        refused("EMQ.ADD 1 emq:{o}:schedule emq:{o}: 1 0 a d d0 l 1", ErrorKind::Argument, "version");
    }

    #[test]
    fn a_workers_calls_parse_as_the_host_builds_them() {
        let keys = Keys::new(b"orders");
        let tokens = vec![b"t1".to_vec(), b"t2".to_vec()];
        let c = claim_cmd(&keys, 2, 30_000, &tokens);
        let r = parse_job(&c.to_args()).unwrap();
        assert_eq!(r, JobRequest::Claim { queue: b"orders".to_vec(), n: 2, lease_ms: 30_000, tokens: tokens.clone() });
        // Any lease: one past `MAX_MS` ends there in the plan, and is sent as `MAX_MS`.
        for lease in [MAX_MS.unsigned_abs(), MAX_MS.unsigned_abs() + 1, u64::MAX] {
            let r = parse_job(&claim_cmd(&keys, 2, lease, &tokens).to_args()).unwrap();
            let JobRequest::Claim { lease_ms, .. } = r else { panic!("{r:?}") };
            assert_eq!(lease_ms, MAX_MS.unsigned_abs());
        }
        let jobs = vec![
            Held { id: b"a".to_vec(), token: b"t".to_vec(), lane: None },
            Held { id: b"\xff".to_vec(), token: b"u".to_vec(), lane: Some(b"l".to_vec()) },
        ];
        let done: Vec<(Held, Option<Vec<u8>>)> = jobs.iter().cloned().zip([None, Some(b"\x00{}".to_vec())]).collect();
        let c = complete_cmd(&keys, &done);
        assert_eq!(parse_job(&c.to_args()).unwrap(), JobRequest::Complete { queue: b"orders".to_vec(), jobs: done.clone() });
        let empty = vec![(jobs[0].clone(), Some(vec![]))];
        let c = complete_cmd(&keys, &empty);
        assert_eq!(
            parse_job(&c.to_args()).unwrap(),
            JobRequest::Complete { queue: b"orders".to_vec(), jobs: empty },
            "an empty result is one"
        );
        let c = extend_cmd(&keys, 30_000, &jobs);
        assert_eq!(
            parse_job(&c.to_args()).unwrap(),
            JobRequest::Extend { queue: b"orders".to_vec(), lease_ms: 30_000, jobs: jobs.clone() }
        );
        for lease in [MAX_MS.unsigned_abs() + 1, u64::MAX] {
            let r = parse_job(&extend_cmd(&keys, lease, &jobs).to_args()).unwrap();
            let JobRequest::Extend { lease_ms, .. } = r else { panic!("{r:?}") };
            assert_eq!(lease_ms, MAX_MS.unsigned_abs());
        }
    }

    #[test]
    fn an_extend_of_the_wrong_shape_or_values_is_refused() {
        let head = "EMQ.EXTEND 1 emq:{o}:active emq:{o}:";
        for (tail, kind, name) in [
            ("", ErrorKind::Layout, "expected"),
            ("1000", ErrorKind::Layout, "expected"),
            ("1000 a t", ErrorKind::Layout, "expected"),
            ("0 a t l", ErrorKind::Argument, "lease_ms"),
            ("x a t l", ErrorKind::Argument, "lease_ms"),
            ("-5 a t l", ErrorKind::Argument, "lease_ms"),
        ] {
            refused(format!("{head} {tail}").trim_end(), kind, name);
        }
        refused("EMQ.EXTEND 1 emq:{o}:pending emq:{o}: 1000 a t l", ErrorKind::Layout, "key");
        let e = parse_job(&[b"EMQ.EXTEND", b"1", b"emq:{o}:active", b"emq:{o}:", b"1000", b"a", b"", b""]).unwrap_err();
        assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Argument, "EMQ.EXTEND: token must not be empty"));
    }

    #[test]
    fn a_settle_parses_as_the_host_builds_it_and_refuses_bad_fates() {
        let keys = Keys::new(b"orders");
        let fail = |retry_in_ms, jitter| Fate::Fail { error: b"e\xff".to_vec(), retry_in_ms, jitter, detail: None, retry: true };
        let detail = |error_type: Option<&[u8]>, traceback: Option<&[u8]>| {
            Some(Box::new(ErrorDetail { error_type: error_type.map(<[u8]>::to_vec), traceback: traceback.map(<[u8]>::to_vec) }))
        };
        let held = |id: &[u8]| Held { id: id.to_vec(), token: b"t".to_vec(), lane: None };
        let jobs = vec![
            (Held { id: b"a".to_vec(), token: b"t".to_vec(), lane: None }, Fate::COMPLETE),
            (Held { id: b"\xff".to_vec(), token: b"u".to_vec(), lane: Some(b"l".to_vec()) }, fail(Some(0), 0.0)),
            (Held { id: b"c".to_vec(), token: b"v".to_vec(), lane: None }, fail(None, 0.25)),
            (held(b"d"), Fate::Complete { result: Some(b"n".to_vec()) }),
            (
                held(b"e"),
                Fate::Fail { error: b"e".to_vec(), retry_in_ms: Some(5), jitter: 0.0, detail: detail(Some(b"m.E"), None), retry: true },
            ),
            (held(b"f"), Fate::Fail { error: vec![], retry_in_ms: None, jitter: 0.5, detail: detail(None, Some(b"")), retry: true }),
            (
                held(b"g"),
                Fate::Fail { error: b"p".to_vec(), retry_in_ms: None, jitter: 0.0, detail: detail(Some(b"m.P"), None), retry: false },
            ),
        ];
        let c = settle_cmd(&keys, &jobs);
        assert_eq!(parse_job(&c.to_args()).unwrap(), JobRequest::Settle { queue: b"orders".to_vec(), jobs });
        assert_eq!((micros(0.0), micros(0.999_999_9), micros(1.0), micros(-1.0), micros(f64::NAN)), (0, 999_999, 999_999, 0, 0));
        for u in [0, 1, 3, 7, 123_457, 999_999] {
            assert_eq!(micros(u as f64 / 1e6), u, "a draw read from the wire goes back as it came");
        }
        let head = "EMQ.SETTLE 1 emq:{o}:active emq:{o}: v2";
        for (tail, kind, name) in [
            ("a t l c n ", ErrorKind::Layout, "expected"),
            ("a t l x e n n", ErrorKind::Argument, "fate"),
            ("a t l c1 e n n", ErrorKind::Argument, "fate"),
            ("a t l r-1 e n n", ErrorKind::Argument, "fate"),
            ("a t l b1000000 e n n", ErrorKind::Argument, "fate"),
            ("a t l c n n n", ErrorKind::Argument, "fate"),
            ("a t l d1 e n n", ErrorKind::Argument, "fate"),
            ("a t l c x  ", ErrorKind::Argument, "result"),
            ("a t l r0 e x n", ErrorKind::Argument, "error_type"),
            ("a t l r0 e n ", ErrorKind::Argument, "traceback"),
        ] {
            refused(&format!("{head} {tail}"), kind, name);
        }
        refused("EMQ.SETTLE 1 emq:{o}:pending emq:{o}: v2 a t l c n  ", ErrorKind::Layout, "key");
        refused("EMQ.SETTLE 1 emq:{o}:active emq:{o}: a t l c e", ErrorKind::Argument, "version");
        let e =
            parse_job(&[b"EMQ.SETTLE", b"1", b"emq:{o}:active", b"emq:{o}:", b"v2", b"a", b"", b"", b"r0", b"e", b"n", b"n"]).unwrap_err();
        assert!(e.message.contains("EMQ.FAIL") && e.message.contains("token"), "{e:?}");
        let answers = [Settled::Refused, Settled::Completed, Settled::Retrying, Settled::Dead, Settled::Cancelled];
        assert_eq!(parse_settled(&settled_reply(&answers), 5).unwrap(), answers);
        assert!(parse_settled(&Reply::Array(vec![Reply::Int(5)]), 1).is_err());
    }

    #[test]
    fn a_workers_calls_refuse_bad_layouts_and_arguments() {
        for (bad, kind, name) in [
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{o}: 2 100 t", ErrorKind::Layout, "2 tokens"),
            ("EMQ.CLAIM 1 emq:{o}:active emq:{o}: 1 100 t", ErrorKind::Layout, "key"),
            ("EMQ.CLAIM 2 emq:{o}:pending emq:{o}: 1 100 t", ErrorKind::Layout, "expected"),
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{p}: 1 100 t", ErrorKind::Layout, "key"),
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{o}: 0 100", ErrorKind::Argument, "n"),
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{o}: 10001 100", ErrorKind::Argument, "n"),
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{o}: 1 0 t", ErrorKind::Argument, "lease_ms"),
            ("EMQ.CLAIM 1 emq:{o}:pending emq:{o}: 1", ErrorKind::Layout, "expected"),
            ("EMQ.COMPLETE 1 emq:{o}:active emq:{o}:", ErrorKind::Layout, "expected"),
            ("EMQ.COMPLETE 1 emq:{o}:active emq:{o}: v2 a t l", ErrorKind::Layout, "expected"),
            ("EMQ.COMPLETE 1 emq:{o}:active emq:{o}: v2 a t l x", ErrorKind::Argument, "result"),
            ("EMQ.COMPLETE 1 emq:{o}:active emq:{o}: a t l n", ErrorKind::Argument, "version"),
            ("EMQ.COMPLETE 1 emq:{o}:pending emq:{o}: v2 a t l n", ErrorKind::Layout, "key"),
        ] {
            refused(bad, kind, name);
        }
        let e = parse_job(&[b"EMQ.COMPLETE", b"1", b"emq:{o}:active", b"emq:{o}:", b"v2", b"a", b"", b"", b"n"]).unwrap_err();
        assert_eq!((e.kind, e.message.contains("token")), (ErrorKind::Argument, true), "{e}");
    }

    fn p_job(s: &str) -> Result<JobRequest> {
        let parts: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse_job(&parts)
    }

    /// `parse_job` refuses `s` with an error of `kind` that names `name`.
    fn refused(s: &str, kind: ErrorKind, name: &str) {
        let e = p_job(s).unwrap_err();
        assert_eq!(e.kind, kind, "{s}: {e}");
        assert!(e.message.contains(name), "{s}: {e}");
    }
}

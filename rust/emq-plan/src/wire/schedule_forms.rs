//! The schedules' forms (SPEC §14), after the routing head (`routing`):
//!
//! `EMQ.TIMERS 2 <P>timers <P>schedules <P> <batch>`: TIMERS; answers
//! `[[id…], skipped, dropped, removed]` (`Ticked`).
//!
//! `EMQ.SCHEDULE 1 <P>schedules <P> <op> <name> [<definition>]`, `op` one of
//! `SET` (with the definition: a schedule record's JSON, `schedules::record`,
//! checked again as SCHEDULE checks its arguments), `REMOVE`, `PAUSE`,
//! `RESUME`, `RUN`; answers `1` or `0` (whether it wrote), or for `RUN` `[id,
//! added]`.

use crate::error::{Error, Result};
use crate::names::Keys;
use crate::numbers::count_arg;
use crate::protocol::cmd::Cmd;
use crate::protocol::reply::Reply;
use crate::schedules::ops::{Answer, Op, SCHEDULE};
use crate::schedules::record::{missed_parts, Definition, Record};
use crate::sweep::timers::{Ticked, TIMERS};
use crate::wire::routing::queue_of;

/// A schedule command, checked.
#[derive(Clone, Debug)]
pub enum ScheduleRequest {
    Timers { queue: Vec<u8>, batch: u64 },
    Op { queue: Vec<u8>, name: Vec<u8>, op: Op },
}

/// `EMQ.TIMERS` of the queue `keys`.
pub fn timers_cmd(keys: &Keys, batch: u64) -> Cmd {
    Cmd::new(TIMERS).arg("2").arg(keys.timers()).arg(keys.schedules()).arg(&keys.prefix).arg(batch.to_string())
}

/// `EMQ.SCHEDULE` of `op` on the schedule `name`.
pub fn schedule_cmd(keys: &Keys, name: &[u8], op: &Op) -> Cmd {
    let head = Cmd::new(SCHEDULE).arg("1").arg(keys.schedules()).arg(&keys.prefix);
    match op {
        Op::Set(def) => head.arg("SET").arg(name).arg(def.record(0).to_json()),
        Op::Remove => head.arg("REMOVE").arg(name),
        Op::Pause => head.arg("PAUSE").arg(name),
        Op::Resume => head.arg("RESUME").arg(name),
        Op::RunNow => head.arg("RUN").arg(name),
    }
}

/// Checks a whole command (its name first).
pub fn parse_schedule(args: &[&[u8]]) -> Result<ScheduleRequest> {
    let Some((name, tail)) = args.split_first() else {
        return Err(Error::argument("emq", "command", "is empty"));
    };
    match name.to_ascii_uppercase().as_slice() {
        b"EMQ.TIMERS" => {
            let [n, timers, schedules, prefix, batch] = tail else {
                return Err(Error::layout(TIMERS, "expected 2 keys and 2 arguments"));
            };
            if *n != b"2" {
                return Err(Error::layout(TIMERS, "expected 2 keys and 2 arguments"));
            }
            let queue = queue_of(TIMERS, prefix, &[timers, schedules], &[b"timers", b"schedules"])?.to_vec();
            let batch = count_arg(batch, false).ok_or_else(|| Error::argument(TIMERS, "batch", "must be a positive integer"))?;
            Ok(ScheduleRequest::Timers { queue, batch })
        }
        b"EMQ.SCHEDULE" => {
            let [n, key, prefix, op, sched, rest @ ..] = tail else {
                return Err(Error::layout(SCHEDULE, "expected 1 key, the prefix, an op and a name"));
            };
            if *n != b"1" {
                return Err(Error::layout(SCHEDULE, "expected 1 key"));
            }
            let queue = queue_of(SCHEDULE, prefix, &[key], &[b"schedules"])?.to_vec();
            let op = match (op.to_ascii_uppercase().as_slice(), rest) {
                (b"SET", [definition]) => Op::Set(Box::new(definition_of(sched, definition)?)),
                (b"REMOVE", []) => Op::Remove,
                (b"PAUSE", []) => Op::Pause,
                (b"RESUME", []) => Op::Resume,
                (b"RUN", []) => Op::RunNow,
                _ => return Err(Error::argument(SCHEDULE, "op", "must be SET <definition>, REMOVE, PAUSE, RESUME or RUN")),
            };
            Ok(ScheduleRequest::Op { queue, name: sched.to_vec(), op })
        }
        _ => Err(Error::argument("emq", "command", format!("{:?} is not EMQ.TIMERS or EMQ.SCHEDULE", String::from_utf8_lossy(name)))),
    }
}

/// A definition from its record's JSON, checked as SCHEDULE checks its arguments.
fn definition_of(name: &[u8], json: &[u8]) -> Result<Definition> {
    let r = Record::from_json(json).ok_or_else(|| Error::argument(SCHEDULE, "definition", "is not a schedule record"))?;
    let (missed, max_missed, grace) = missed_parts(r.missed);
    Definition::parse(SCHEDULE, name, r.cron.as_deref(), r.every_ms, Some(&r.tz), Some(missed), max_missed, grace, r.job)
}

pub fn ticked_reply(t: &Ticked) -> Reply {
    let n = |x: usize| Reply::Int(i64::try_from(x).unwrap_or(i64::MAX));
    Reply::Array(vec![
        Reply::Array(t.enqueued.iter().map(|id| Reply::Bulk(id.clone())).collect()),
        n(t.skipped),
        n(t.dropped),
        n(t.removed),
    ])
}

pub fn parse_ticked(reply: &Reply) -> Result<Ticked> {
    let bad = || Error::server(TIMERS, "the module's reply is not [ids, skipped, dropped, removed]");
    let [ids, skipped, dropped, removed] = reply.as_array().ok_or_else(bad)? else { return Err(bad()) };
    let count = |r: &Reply| r.as_int().and_then(|n| usize::try_from(n).ok()).ok_or_else(bad);
    let enqueued =
        ids.as_array().ok_or_else(bad)?.iter().map(|r| r.as_bytes().map(<[u8]>::to_vec).ok_or_else(bad)).collect::<Result<_>>()?;
    Ok(Ticked { enqueued, skipped: count(skipped)?, dropped: count(dropped)?, removed: count(removed)? })
}

pub fn answer_reply(a: &Answer) -> Reply {
    match a {
        Answer::Changed(c) => Reply::Int(i64::from(*c)),
        Answer::Enqueued { id, added } => Reply::Array(vec![Reply::Bulk(id.clone()), Reply::Int(i64::from(*added))]),
    }
}

pub fn parse_answer(reply: &Reply) -> Result<Answer> {
    match reply {
        Reply::Int(n) => Ok(Answer::Changed(*n != 0)),
        Reply::Array(items) => match items.as_slice() {
            [Reply::Bulk(id), Reply::Int(added)] => Ok(Answer::Enqueued { id: id.clone(), added: *added != 0 }),
            _ => Err(Error::server(SCHEDULE, "the module's reply is not [id, added]")),
        },
        _ => Err(Error::server(SCHEDULE, "the module's reply is not an answer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedules::record::TickJob;

    #[test]
    fn the_forms_parse_back_to_their_requests() {
        let keys = Keys::new(b"q");
        let cmd = timers_cmd(&keys, 50);
        match parse_schedule(&cmd.to_args()).unwrap() {
            ScheduleRequest::Timers { queue, batch } => assert_eq!((queue.as_slice(), batch), (&b"q"[..], 50)),
            other @ ScheduleRequest::Op { .. } => panic!("{other:?}"),
        }
        let job = TickJob { data: b"\xff".to_vec(), lane: Some(b"l".to_vec()), max_attempts: 2 };
        let def = Definition::parse(SCHEDULE, b"n", Some("0 3 * * *"), None, Some("europe/berlin"), None, None, None, job).unwrap();
        let cmd = schedule_cmd(&keys, b"n", &Op::Set(Box::new(def.clone())));
        match parse_schedule(&cmd.to_args()).unwrap() {
            ScheduleRequest::Op { op: Op::Set(got), name, .. } => {
                assert_eq!(name, b"n");
                assert_eq!(got.record(1), def.record(1));
            }
            other => panic!("{other:?}"),
        }
        let t = Ticked { enqueued: vec![b"a".to_vec()], skipped: 1, dropped: 2, removed: 3 };
        assert_eq!(parse_ticked(&ticked_reply(&t)).unwrap(), t);
        let a = Answer::Enqueued { id: b"x".to_vec(), added: true };
        assert_eq!(parse_answer(&answer_reply(&a)).unwrap(), a);
    }

    #[test]
    fn bad_forms_are_refused() {
        let e = parse_schedule(&[b"EMQ.TIMERS", b"2", b"emq:{q}:timers", b"emq:{r}:schedules", b"emq:{q}:", b"1"]).unwrap_err();
        assert!(e.message.contains("is not emq:{q}:schedules"), "{}", e.message);
        let e = parse_schedule(&[b"EMQ.SCHEDULE", b"1", b"emq:{q}:schedules", b"emq:{q}:", b"FLY", b"n"]).unwrap_err();
        assert!(e.message.starts_with("EMQ.SCHEDULE: op "), "{}", e.message);
    }
}

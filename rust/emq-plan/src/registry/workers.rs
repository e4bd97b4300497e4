//! `R workers` (zset: worker id -> expiry, ms, server clock) and `R worker:ID`
//! (hash: what the worker says of itself), written by a worker's heartbeat
//! (`WorkerBeat`), removed by its clean stop (`WorkerLeave`), and read by
//! `Workers`: the ids whose expiry is still ahead, then their hashes.
//!
//! A beat scores the worker's entry and expires its hash at the same instant,
//! `now + ttl`, and trims the entries already past (`ZREMRANGEBYSCORE`), so a
//! worker killed by `SIGKILL` drops out of every reader's list at its expiry, and out of
//! the zset at the next beat of any worker. Readers write nothing.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::names::{id_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::Write;

pub const WORKER_BEAT: &str = "EMQ.WORKER.BEAT";
pub const WORKER_LEAVE: &str = "EMQ.WORKER.LEAVE";
pub const WORKERS: &str = "EMQ.WORKERS";

/// The most workers a reader lists.
pub const MAX_WORKERS: usize = 10_000;

/// The fields the beat itself sets, from the server's clock: when it beat, and
/// when the worker drops out unless it beats again.
pub const BEAT_FIELDS: [&str; 2] = ["beat", "expires"];

fn check_id(verb: &str, id: &[u8]) -> Result<()> {
    match id_problem(id) {
        Some(why) => Err(Error::argument(verb, "id", why)),
        None => Ok(()),
    }
}

fn finish_writes(verb: &str, exec: &[Reply]) -> Result<()> {
    match exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
        Some(Reply::Error { message, .. }) => Err(Error::server(verb, message)),
        _ => Ok(()),
    }
}

/// One heartbeat: `TIME`, then the zset entry, the hash, its expiry, and the
/// trim of the expired entries, in one transaction.
pub struct WorkerBeat {
    keys: Keys,
    id: Vec<u8>,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
    ttl_ms: u64,
}

impl WorkerBeat {
    /// `fields`: what the worker says of itself (names not empty, none of
    /// [`BEAT_FIELDS`]); `ttl_ms`: how long it counts as alive after this beat.
    pub fn new(id: Vec<u8>, fields: Vec<(Vec<u8>, Vec<u8>)>, ttl_ms: u64) -> Result<Self> {
        check_id(WORKER_BEAT, &id)?;
        if fields.iter().any(|(name, _)| name.is_empty() || BEAT_FIELDS.iter().any(|b| b.as_bytes() == name.as_slice())) {
            return Err(Error::argument(WORKER_BEAT, "fields", "must have names, none of them 'beat' or 'expires'"));
        }
        if ttl_ms == 0 || ttl_ms > 86_400_000 {
            return Err(Error::argument(WORKER_BEAT, "ttl", "must be above 0 and at most a day"));
        }
        Ok(WorkerBeat { keys: Keys::registry(), id, fields, ttl_ms })
    }
}

impl Conversation for WorkerBeat {
    type Out = ();

    fn verb(&self) -> &'static str {
        WORKER_BEAT
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<()> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME")] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<()>> {
        let [time] = replies else { return Err(Error::server(WORKER_BEAT, "wrong number of replies")) };
        let now = parse_time(time).ok_or_else(|| Error::server(WORKER_BEAT, "TIME gave no clock"))?;
        let expiry = now.saturating_add(self.ttl_ms as i64);
        let mut fields = self.fields.clone();
        fields.push((b"beat".to_vec(), now.to_string().into_bytes()));
        fields.push((b"expires".to_vec(), expiry.to_string().into_bytes()));
        Ok(Step::Exec(vec![
            Write::ListWorker { id: self.id.clone(), expiry },
            Write::SetWorker { id: self.id.clone(), fields },
            Write::ExpireWorker { id: self.id.clone(), at: expiry },
            Write::TrimWorkers { before: now },
        ]))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        finish_writes(WORKER_BEAT, exec)
    }
}

/// A clean stop: the entry and the hash removed.
pub struct WorkerLeave {
    keys: Keys,
    id: Vec<u8>,
}

impl WorkerLeave {
    pub fn new(id: Vec<u8>) -> Result<Self> {
        check_id(WORKER_LEAVE, &id)?;
        Ok(WorkerLeave { keys: Keys::registry(), id })
    }
}

impl Conversation for WorkerLeave {
    type Out = ();

    fn verb(&self) -> &'static str {
        WORKER_LEAVE
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<()> {
        Step::Exec(vec![Write::UnlistWorker(self.id.clone()), Write::DeleteWorker(self.id.clone())])
    }

    fn feed(&mut self, _replies: &[Reply]) -> Result<Step<()>> {
        Err(Error::server(WORKER_LEAVE, "a leave reads nothing"))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        finish_writes(WORKER_LEAVE, exec)
    }
}

/// The workers alive: each id and its hash's fields, in the order of their
/// expiry (the soonest to drop out first). A hash gone already is left out.
pub struct Workers {
    keys: Keys,
    stage: Stage,
}

enum Stage {
    Clock,
    Range,
    Rows(Vec<Vec<u8>>),
}

impl Workers {
    pub fn new() -> Self {
        Workers { keys: Keys::registry(), stage: Stage::Clock }
    }
}

impl Default for Workers {
    fn default() -> Self {
        Workers::new()
    }
}

/// A worker as read: its id and its hash's fields.
pub type WorkerFields = (Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>);

impl Conversation for Workers {
    type Out = Vec<WorkerFields>;

    fn verb(&self) -> &'static str {
        WORKERS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        self.stage = Stage::Clock;
        Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME")] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let k = &self.keys;
        match std::mem::replace(&mut self.stage, Stage::Range) {
            Stage::Clock => {
                let [time] = replies else { return Err(Error::server(WORKERS, "wrong number of replies")) };
                let now = parse_time(time).ok_or_else(|| Error::server(WORKERS, "TIME gave no clock"))?;
                let range = Cmd::new("ZRANGE")
                    .arg(k.workers())
                    .arg(format!("({now}"))
                    .arg("+inf")
                    .arg("BYSCORE")
                    .arg("LIMIT")
                    .arg("0")
                    .arg(MAX_WORKERS.to_string());
                Ok(Step::Read { watch: vec![], cmds: vec![range] })
            }
            Stage::Range => {
                let [range] = replies else { return Err(Error::server(WORKERS, "wrong number of replies")) };
                check_error(WORKERS, &k.workers(), range)?;
                let found: Vec<Vec<u8>> = range
                    .as_array()
                    .ok_or_else(|| Error::server(WORKERS, "ZRANGE gave no array"))?
                    .iter()
                    .filter_map(|r| r.as_bytes().map(<[u8]>::to_vec))
                    .collect();
                if found.is_empty() {
                    return Ok(Step::Done(vec![]));
                }
                let cmds = found.iter().map(|id| Cmd::new("HGETALL").arg(k.worker(id))).collect();
                self.stage = Stage::Rows(found);
                Ok(Step::Read { watch: vec![], cmds })
            }
            Stage::Rows(ids) => {
                if replies.len() != ids.len() {
                    return Err(Error::server(WORKERS, "wrong number of replies"));
                }
                let mut out = vec![];
                for (id, r) in ids.into_iter().zip(replies) {
                    check_error(WORKERS, &k.worker(&id), r)?;
                    let items = r.as_array().unwrap_or(&[]);
                    let fields: Vec<(Vec<u8>, Vec<u8>)> =
                        items.chunks_exact(2).filter_map(|p| Some((p[0].as_bytes()?.to_vec(), p[1].as_bytes()?.to_vec()))).collect();
                    if !fields.is_empty() {
                        out.push((id, fields));
                    }
                }
                Ok(Step::Done(out))
            }
        }
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(WORKERS, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::write::to_cmds;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn time() -> Reply {
        Reply::Array(vec![bulk("1700000000"), bulk("5000")])
    }

    /// A beat whose hash outlived its zset entry (or the other way round)
    /// would show a worker as alive after it died, or hide a live one.
    #[test]
    fn a_beat_scores_and_expires_at_one_instant_and_trims_the_dead() {
        let mut b = WorkerBeat::new(b"w1".to_vec(), vec![(b"pid".to_vec(), b"7".to_vec())], 15_000).unwrap();
        assert_eq!(b.start(), Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME")] });
        let Step::Exec(w) = b.feed(&[time()]).unwrap() else { panic!() };
        assert_eq!(
            to_cmds(b.keys(), &w),
            vec![
                Cmd::from_args(["ZADD", "emq:{emq registry}:workers", "1700000015005", "w1"]),
                Cmd::from_args(["HSET", "emq:{emq registry}:worker:w1", "pid", "7", "beat", "1700000000005", "expires", "1700000015005"]),
                Cmd::from_args(["PEXPIREAT", "emq:{emq registry}:worker:w1", "1700000015005"]),
                Cmd::from_args(["ZREMRANGEBYSCORE", "emq:{emq registry}:workers", "-inf", "(1700000000005"]),
            ]
        );
        assert!(WorkerBeat::new(b"w".to_vec(), vec![(b"beat".to_vec(), vec![])], 1).is_err());
        assert!(WorkerBeat::new(vec![], vec![], 1).is_err());
        assert!(WorkerBeat::new(b"w".to_vec(), vec![], 0).is_err());
    }

    #[test]
    fn a_leave_removes_both() {
        let mut l = WorkerLeave::new(b"w1".to_vec()).unwrap();
        let Step::Exec(w) = l.start() else { panic!() };
        assert_eq!(
            to_cmds(l.keys(), &w),
            vec![Cmd::from_args(["ZREM", "emq:{emq registry}:workers", "w1"]), Cmd::from_args(["DEL", "emq:{emq registry}:worker:w1"])]
        );
    }

    /// A reader that listed entries already past their expiry would show a
    /// worker killed by `SIGKILL` until some worker's beat trimmed it.
    #[test]
    fn readers_list_only_unexpired_workers_with_a_hash() {
        let mut r = Workers::new();
        r.start();
        let Step::Read { cmds, .. } = r.feed(&[time()]).unwrap() else { panic!() };
        assert_eq!(
            cmds,
            vec![Cmd::from_args(["ZRANGE", "emq:{emq registry}:workers", "(1700000000005", "+inf", "BYSCORE", "LIMIT", "0", "10000"])]
        );
        let Step::Read { cmds, .. } = r.feed(&[Reply::Array(vec![bulk("a"), bulk("b")])]).unwrap() else { panic!() };
        assert_eq!(cmds[1], Cmd::from_args(["HGETALL", "emq:{emq registry}:worker:b"]));
        let a = Reply::Array(vec![bulk("pid"), bulk("1")]);
        let Step::Done(out) = r.feed(&[a, Reply::Array(vec![])]).unwrap() else { panic!() };
        assert_eq!(out, vec![(b"a".to_vec(), vec![(b"pid".to_vec(), b"1".to_vec())])]);
        let mut none = Workers::new();
        none.start();
        none.feed(&[time()]).unwrap();
        assert_eq!(none.feed(&[Reply::Array(vec![])]).unwrap(), Step::Done(vec![]));
    }
}

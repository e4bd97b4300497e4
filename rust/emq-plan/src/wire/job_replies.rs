//! The replies of a worker's module commands, as the module gives them and the
//! client host reads them back: `EMQ.CLAIM` the jobs taken, each `[id, data,
//! lane or nil, attempts, max_attempts, token, deadline]`; `EMQ.COMPLETE` and
//! `EMQ.EXTEND` a 1 (done or cancelled, extended) or 0 (refused: the lease was
//! lost) a job; `EMQ.SETTLE` a 0 (refused), 1 (done), 2 (scheduled), 3 (dead)
//! or 4 (cancelled: it had been asked to stop) a job; `EMQ.ADD` a pair a job,
//! its id and 1 when the call added it (0: it had landed already, or its
//! uniqueness key named another job, whose id it is).

use crate::error::{Error, Result};
use crate::jobs::add::ADD;
use crate::jobs::claim::{Claimed, CLAIM};
use crate::jobs::settle::Settled;
use crate::protocol::reply::Reply;
use crate::wire::job_forms::SETTLE;

/// `EMQ.ADD`'s reply: each job's id, and whether the call added it.
pub fn added_reply(ids: &[Vec<u8>], created: &[bool]) -> Reply {
    Reply::Array(ids.iter().zip(created).map(|(id, &c)| Reply::Array(vec![Reply::Bulk(id.clone()), Reply::Int(i64::from(c))])).collect())
}

/// The ids and whether each was added, of `EMQ.ADD`'s reply (`added_reply`), `n` of them.
pub fn parse_added(reply: &Reply, n: usize) -> Result<(Vec<Vec<u8>>, Vec<bool>)> {
    let bad = || Error::server(ADD, format!("unexpected reply {reply:?}"));
    let items = reply.as_array().filter(|a| a.len() == n).ok_or_else(bad)?;
    items
        .iter()
        .map(|r| match r.as_array() {
            Some([id, created]) => Ok((id.as_bytes().ok_or_else(bad)?.to_vec(), created.as_int().ok_or_else(bad)? == 1)),
            _ => Err(bad()),
        })
        .collect::<Result<Vec<_>>>()
        .map(|pairs| pairs.into_iter().unzip())
}

/// `EMQ.SETTLE`'s reply: a number a job.
pub fn settled_reply(answers: &[Settled]) -> Reply {
    let code = |a: &Settled| match a {
        Settled::Completed => 1,
        Settled::Retrying => 2,
        Settled::Dead => 3,
        Settled::Cancelled => 4,
        _ => 0,
    };
    Reply::Array(answers.iter().map(|a| Reply::Int(code(a))).collect())
}

/// The answers of `EMQ.SETTLE`'s reply (`settled_reply`), `n` of them.
pub fn parse_settled(reply: &Reply, n: usize) -> Result<Vec<Settled>> {
    let bad = || Error::server(SETTLE, format!("unexpected reply {reply:?}"));
    let items = reply.as_array().filter(|a| a.len() == n).ok_or_else(bad)?;
    items
        .iter()
        .map(|r| match r.as_int() {
            Some(0) => Ok(Settled::Refused),
            Some(1) => Ok(Settled::Completed),
            Some(2) => Ok(Settled::Retrying),
            Some(3) => Ok(Settled::Dead),
            Some(4) => Ok(Settled::Cancelled),
            _ => Err(bad()),
        })
        .collect()
}

/// `EMQ.CLAIM`'s reply.
pub fn claimed_reply(jobs: &[Claimed]) -> Reply {
    let job = |c: &Claimed| {
        Reply::Array(vec![
            Reply::Bulk(c.id.clone()),
            Reply::Bulk(c.data.clone()),
            c.lane.clone().map_or(Reply::Nil, Reply::Bulk),
            Reply::Int(c.attempts),
            Reply::Int(c.max_attempts),
            Reply::Bulk(c.token.clone()),
            Reply::Int(c.deadline),
        ])
    };
    Reply::Array(jobs.iter().map(job).collect())
}

/// The jobs of `EMQ.CLAIM`'s reply (`claimed_reply`).
pub fn parse_claimed(reply: &Reply) -> Result<Vec<Claimed>> {
    let bad = || Error::server(CLAIM, format!("unexpected reply {reply:?}"));
    let jobs = reply.as_array().ok_or_else(bad)?;
    jobs.iter()
        .map(|j| match j.as_array() {
            Some([id, data, lane, attempts, max_attempts, token, deadline]) => Ok(Claimed {
                id: id.as_bytes().ok_or_else(bad)?.to_vec(),
                data: data.as_bytes().ok_or_else(bad)?.to_vec(),
                lane: match lane {
                    Reply::Nil => None,
                    l => Some(l.as_bytes().ok_or_else(bad)?.to_vec()),
                },
                attempts: attempts.as_int().ok_or_else(bad)?,
                max_attempts: max_attempts.as_int().ok_or_else(bad)?,
                token: token.as_bytes().ok_or_else(bad)?.to_vec(),
                deadline: deadline.as_int().ok_or_else(bad)?,
            }),
            _ => Err(bad()),
        })
        .collect()
}

/// `EMQ.COMPLETE`'s and `EMQ.EXTEND`'s reply: 1 for a job done (extended), 0
/// for one refused.
pub fn answers_reply(done: &[bool]) -> Reply {
    Reply::Array(done.iter().map(|&d| Reply::Int(i64::from(d))).collect())
}

/// The answers of `verb`'s reply (`answers_reply`), `n` of them.
pub fn parse_answers(verb: &str, reply: &Reply, n: usize) -> Result<Vec<bool>> {
    let bad = || Error::server(verb, format!("unexpected reply {reply:?}"));
    let items = reply.as_array().filter(|a| a.len() == n).ok_or_else(bad)?;
    items.iter().map(|r| r.as_int().map(|i| i == 1).ok_or_else(bad)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::settle::{COMPLETE, EXTEND};

    #[test]
    fn claimed_jobs_come_back_as_they_went() {
        let jobs = vec![
            Claimed {
                id: b"a".to_vec(),
                data: b"\x00".to_vec(),
                lane: None,
                attempts: 1,
                max_attempts: 3,
                token: b"t".to_vec(),
                deadline: 5,
            },
            Claimed {
                id: b"b".to_vec(),
                data: vec![],
                lane: Some(b"l".to_vec()),
                attempts: 2,
                max_attempts: 2,
                token: b"u".to_vec(),
                deadline: 6,
            },
        ];
        assert_eq!(parse_claimed(&claimed_reply(&jobs)).unwrap(), jobs);
        assert!(parse_claimed(&Reply::Int(1)).is_err());
        let done = answers_reply(&[true, false]);
        assert_eq!(done, Reply::Array(vec![Reply::Int(1), Reply::Int(0)]));
        assert_eq!(parse_answers(COMPLETE, &done, 2).unwrap(), vec![true, false]);
        assert!(parse_answers(EXTEND, &done, 3).is_err());
    }
}

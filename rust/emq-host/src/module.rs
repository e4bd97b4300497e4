//! The module backend (`backend="module"`): emq's server module runs the plans
//! inside the server, one command a call (`emq_plan::wire`): the sweeps
//! (`sweeps::run`), and a queue's adds, claims, extends, completes and fails, here.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::{NewJob, ADD};
use emq_plan::jobs::claim::{Claimed, CLAIM, MAX_CLAIM};
use emq_plan::jobs::settle::{Settled, COMPLETE, EXTEND};
use emq_plan::wire::SETTLE;
use emq_plan::{wire, Keys, Reply};

use crate::conn::Conn;
use crate::error::{HostError, HostResult};
use crate::jitter::Jitter;
use crate::jobs::{fates, id_gen, tokens, Failure};

pub fn claim(conn: &mut Conn, queue: &[u8], n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>> {
    let n = n.min(MAX_CLAIM);
    let reply = conn.writes(&[wire::claim_cmd(&Keys::new(queue), n, lease_ms, &tokens(n as usize)?)])?.remove(0);
    claimed(reply)
}

/// ADD by `EMQ.ADD`: the ids the plan would make come from this process's tag
/// and sequence, sent with the call.
pub fn add(conn: &mut Conn, queue: &[u8], jobs: &[NewJob]) -> HostResult<Vec<Vec<u8>>> {
    let reply = conn.writes(&[wire::add_cmd(&Keys::new(queue), id_gen(jobs.len()), jobs)])?.remove(0);
    Ok(wire::parse_added(&refused(ADD, reply)?, jobs.len())?)
}

pub fn complete_many(conn: &mut Conn, queue: &[u8], jobs: &[Held]) -> HostResult<Vec<bool>> {
    let reply = conn.writes(&[wire::complete_cmd(&Keys::new(queue), jobs)])?.remove(0);
    answers(COMPLETE, reply, jobs.len())
}

/// EXTEND of many held jobs by `EMQ.EXTEND`: whether each was extended.
pub fn extend_many(conn: &mut Conn, queue: &[u8], jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>> {
    let reply = conn.writes(&[wire::extend_cmd(&Keys::new(queue), lease_ms, jobs)])?.remove(0);
    answers(EXTEND, reply, jobs.len())
}

/// COMPLETE and FAIL of many held jobs by `EMQ.SETTLE`: each backoff's jitter
/// drawn here, as the plan's host draws it.
pub fn settle_many(conn: &mut Conn, queue: &[u8], jobs: &[(Held, Option<Failure>)]) -> HostResult<Vec<Settled>> {
    let fated = fates(jobs, &mut Jitter::new());
    let reply = conn.writes(&[wire::settle_cmd(&Keys::new(queue), &fated)])?.remove(0);
    Ok(wire::parse_settled(&refused(SETTLE, reply)?, jobs.len())?)
}

/// The completes, then the claim, in one round trip: two commands, each
/// all or none (unlike the plan's pair, which shares one transaction, the
/// claim may take lanes: nothing runs between the two but other calls).
pub fn complete_many_claim(conn: &mut Conn, queue: &[u8], jobs: &[Held], n: u64, lease_ms: u64) -> HostResult<(Vec<bool>, Vec<Claimed>)> {
    let keys = Keys::new(queue);
    let n = n.min(MAX_CLAIM);
    let mut cmds = vec![];
    if !jobs.is_empty() {
        cmds.push(wire::complete_cmd(&keys, jobs));
    }
    if n > 0 {
        cmds.push(wire::claim_cmd(&keys, n, lease_ms, &tokens(n as usize)?));
    }
    let mut replies = conn.writes(&cmds)?.into_iter();
    let done = if jobs.is_empty() { vec![] } else { answers(COMPLETE, replies.next().unwrap_or(Reply::Nil), jobs.len())? };
    let taken = if n == 0 { vec![] } else { claimed(replies.next().unwrap_or(Reply::Nil))? };
    Ok((done, taken))
}

fn claimed(reply: Reply) -> HostResult<Vec<Claimed>> {
    Ok(wire::parse_claimed(&refused(CLAIM, reply)?)?)
}

/// `EMQ.COMPLETE`'s or `EMQ.EXTEND`'s reply: a yes or no for each of `n` jobs.
fn answers(verb: &str, reply: Reply, n: usize) -> HostResult<Vec<bool>> {
    Ok(wire::parse_answers(verb, &refused(verb, reply)?, n)?)
}

/// An error reply as the error it is (`HostError::scripted`), a server
/// without the module said plainly.
pub fn refused(verb: &str, reply: Reply) -> HostResult<Reply> {
    match reply {
        // The server's message goes on to quote the arguments, tokens among them: left out.
        Reply::Error { message, .. } if message.starts_with("ERR unknown command") => Err(HostError::NoModule(format!(
            "{verb}: the server has not loaded emq's module ({}); load it (README, \"The server module\") or use backend=\"plan\"",
            message.split(", with args").next().unwrap_or_default()
        ))),
        Reply::Error { code, message } => Err(HostError::scripted(verb, &code, &message)),
        r => Ok(r),
    }
}

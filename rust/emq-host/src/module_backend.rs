//! The module backend (`backend="module"`): emq's server module runs the plans
//! inside the server, one command a call (`emq_plan::wire`): a queue's adds,
//! claims, extends, completes and fails here, the sweeps in `sweeps`.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::NewJob;
use emq_plan::jobs::claim::{Claimed, MAX_CLAIM};
use emq_plan::jobs::settle::Settled;
use emq_plan::{wire, Cmd, Keys, Reply};

use crate::claim_tokens;
use crate::conn::Conn;
use crate::error::{ForCall, HostError, HostResult};
use crate::jitter::Jitter;
use crate::job_backend::{Completion, Failure, Finish, JobBackend};
use crate::job_ids;
use crate::plan_backend::{fates, PlanBackend};

pub struct ModuleBackend;

/// One module command that writes: its reply, an error reply as the error it is.
fn one(conn: &mut Conn, call: &str, cmd: Cmd) -> HostResult<Reply> {
    refused(call, conn.writes(&[cmd])?.remove(0))
}

fn claim_cmd(call: &str, keys: &Keys, n: u64, lease_ms: u64) -> HostResult<Cmd> {
    Ok(wire::claim_cmd(keys, n, lease_ms, &claim_tokens::fresh(call, n as usize)?))
}

impl JobBackend for ModuleBackend {
    fn name(&self) -> &'static str {
        "module"
    }

    /// By `EMQ.ADD`: the ids the plan would make come from this process's tag
    /// and sequence, sent with the call.
    /// `EMQ.ADD`; an add that registers a waiter runs as the plan (the
    /// module's form carries no inbox), on the same connection.
    fn add(
        &self,
        conn: &mut Conn,
        call: &str,
        keys: &Keys,
        jobs: &[NewJob],
        inbox: Option<&[u8]>,
    ) -> HostResult<(Vec<Vec<u8>>, Vec<bool>)> {
        if inbox.is_some() {
            return PlanBackend.add(conn, call, keys, jobs, inbox);
        }
        let reply = one(conn, call, wire::add_cmd(keys, job_ids::next(jobs.len()), jobs))?;
        wire::parse_added(&reply, jobs.len()).for_call(call)
    }

    fn claim(&self, conn: &mut Conn, call: &str, keys: &Keys, n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>> {
        let reply = one(conn, call, claim_cmd(call, keys, n.min(MAX_CLAIM), lease_ms)?)?;
        wire::parse_claimed(&reply).for_call(call)
    }

    /// `EMQ.EXTEND` of one.
    fn extend(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, lease_ms: u64) -> HostResult<bool> {
        Ok(self.extend_many(conn, call, keys, std::slice::from_ref(job), lease_ms)?.first() == Some(&true))
    }

    fn extend_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>> {
        let reply = one(conn, call, wire::extend_cmd(keys, lease_ms, jobs))?;
        wire::parse_answers(call, &reply, jobs.len()).for_call(call)
    }

    /// `EMQ.COMPLETE` of one.
    fn complete(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Completion) -> HostResult<bool> {
        Ok(self.complete_many(conn, call, keys, std::slice::from_ref(job))?.first() == Some(&true))
    }

    fn complete_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Completion]) -> HostResult<Vec<bool>> {
        let reply = one(conn, call, wire::complete_cmd(keys, jobs))?;
        wire::parse_answers(call, &reply, jobs.len()).for_call(call)
    }

    /// `EMQ.SETTLE` of one.
    fn fail(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, failure: &Failure) -> HostResult<Settled> {
        let answers = self.settle_many(conn, call, keys, &[(job.clone(), Finish::Fail(failure.clone()))])?;
        Ok(answers.first().copied().unwrap_or(Settled::Refused))
    }

    /// By `EMQ.SETTLE`: each backoff's jitter drawn here, as the plan's host draws it.
    fn settle_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[(Held, Finish)]) -> HostResult<Vec<Settled>> {
        let fated = fates(jobs, &mut Jitter::new());
        let reply = one(conn, call, wire::settle_cmd(keys, &fated))?;
        wire::parse_settled(&reply, jobs.len()).for_call(call)
    }

    /// The completes, then the claim, in one round trip: two commands, each
    /// all or none (unlike the plan's pair, which shares one transaction, the
    /// claim may take lanes: nothing runs between the two but other calls).
    /// The jobs taken are never `None`.
    fn complete_and_claim(
        &self,
        conn: &mut Conn,
        call: &str,
        keys: &Keys,
        jobs: &[Completion],
        n: u64,
        lease_ms: u64,
    ) -> HostResult<(Vec<bool>, Option<Vec<Claimed>>)> {
        let n = n.min(MAX_CLAIM);
        let mut cmds = vec![];
        if !jobs.is_empty() {
            cmds.push(wire::complete_cmd(keys, jobs));
        }
        if n > 0 {
            cmds.push(claim_cmd(call, keys, n, lease_ms)?);
        }
        let mut replies = conn.writes(&cmds)?.into_iter();
        let mut next = || refused(call, replies.next().unwrap_or(Reply::Nil));
        let done = if jobs.is_empty() { vec![] } else { wire::parse_answers(call, &next()?, jobs.len()).for_call(call)? };
        let taken = if n == 0 { vec![] } else { wire::parse_claimed(&next()?).for_call(call)? };
        Ok((done, Some(taken)))
    }
}

/// An error reply as the error it is (`HostError::scripted`), naming `call`; a
/// server without the module said plainly.
pub fn refused(call: &str, reply: Reply) -> HostResult<Reply> {
    match reply {
        // The server's message goes on to quote the arguments, tokens among them: left out.
        Reply::Error { message, .. } if message.starts_with("ERR unknown command") => Err(HostError::NoModule(format!(
            "{call}: the server has not loaded emq's module ({}); load it (README, \"The server module\") or use backend=\"plan\"",
            message.split(", with args").next().unwrap_or_default()
        ))),
        Reply::Error { code, message } => Err(HostError::scripted(call, &code, &message)),
        r => Ok(r),
    }
}

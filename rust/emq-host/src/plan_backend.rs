//! The plan backend (`backend="plan"`): a queue's job operations run by the
//! plans in this process, each one guarded conversation (`emq_plan`) driven by
//! `drive`, on any server; and lane control, which the plan runs whatever the
//! queue's backend.

use emq_plan::batch::complete_and_claim::Both;
use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::{ExtendMany, Held};
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::add::{Add, NewJob};
use emq_plan::jobs::claim::{Claim, Claimed, MAX_CLAIM};
use emq_plan::jobs::settle::{Action, Settle, Settled};
use emq_plan::lanes::lane_control::{LaneControl, LaneOp};
use emq_plan::Keys;

use crate::claim_tokens;
use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{ForCall, HostResult};
use crate::jitter::Jitter;
use crate::job_backend::{Completion, Failure, Finish, JobBackend};
use crate::job_ids;

pub struct PlanBackend;

/// EXTEND, COMPLETE or FAIL of one held job (`emq_plan::jobs::settle`).
fn settle(conn: &mut Conn, call: &str, keys: &Keys, job: &Held, action: Action) -> HostResult<Settled> {
    let mut rng = Jitter::new();
    drive(
        conn,
        call,
        || Settle::new(keys.clone(), job.id.clone(), job.token.clone(), job.lane.clone(), action.clone(), rng.unit()).for_call(call),
        |_| {},
    )
}

/// Each job's fate: complete, or fail with a draw of the backoff's jitter.
pub fn fates(jobs: &[(Held, Finish)], rng: &mut Jitter) -> Vec<(Held, Fate)> {
    jobs.iter()
        .map(|(held, finish)| {
            let fate = match finish {
                Finish::Complete(result) => Fate::Complete { result: result.clone() },
                Finish::Fail(f) => Fate::Fail {
                    error: f.error.clone(),
                    retry_in_ms: f.retry_in_ms,
                    jitter: rng.unit(),
                    detail: f.detail.clone().map(Box::new),
                    retry: f.retry,
                },
            };
            (held.clone(), fate)
        })
        .collect()
}

/// A fail's action for the single call.
fn fail_action(f: &Failure) -> Action {
    Action::Fail { error: f.error.clone(), retry_in_ms: f.retry_in_ms, detail: f.detail.clone().map(Box::new), retry: f.retry }
}

impl JobBackend for PlanBackend {
    fn name(&self) -> &'static str {
        "plan"
    }

    fn add(
        &self,
        conn: &mut Conn,
        call: &str,
        keys: &Keys,
        jobs: &[NewJob],
        inbox: Option<&[u8]>,
    ) -> HostResult<(Vec<Vec<u8>>, Vec<bool>)> {
        // One id sequence for the call: a retry keeps the ids it generates.
        let gen = job_ids::next(jobs.len());
        let mut created = vec![];
        let start = || {
            let add = Add::new(keys.clone(), jobs.to_vec(), gen)?;
            match inbox {
                Some(i) => add.waited_by(i.to_vec()),
                None => Ok(add),
            }
        };
        let ids = drive(conn, call, || start().for_call(call), |a| created = a.created().to_vec())?;
        Ok((ids, created))
    }

    fn claim(&self, conn: &mut Conn, call: &str, keys: &Keys, n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>> {
        let n = n.min(MAX_CLAIM);
        drive(conn, call, || Claim::new(keys.clone(), n, lease_ms, claim_tokens::fresh(call, n as usize)?).for_call(call), |_| {})
    }

    fn extend(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, lease_ms: u64) -> HostResult<bool> {
        Ok(settle(conn, call, keys, job, Action::Extend { lease_ms })? == Settled::Extended)
    }

    fn extend_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>> {
        drive(conn, call, || ExtendMany::new(keys.clone(), jobs.to_vec(), lease_ms).for_call(call), |_| {})
    }

    fn complete(&self, conn: &mut Conn, call: &str, keys: &Keys, (job, result): &Completion) -> HostResult<bool> {
        let settled = settle(conn, call, keys, job, Action::Complete { result: result.clone() })?;
        Ok(matches!(settled, Settled::Completed | Settled::Cancelled))
    }

    fn complete_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Completion]) -> HostResult<Vec<bool>> {
        drive(conn, call, || CompleteMany::with_results(keys.clone(), jobs.to_vec()).for_call(call), |_| {})
    }

    fn fail(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, failure: &Failure) -> HostResult<Settled> {
        settle(conn, call, keys, job, fail_action(failure))
    }

    /// Each try draws each fail's jitter anew, as a new single call would.
    fn settle_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[(Held, Finish)]) -> HostResult<Vec<Settled>> {
        let mut rng = Jitter::new();
        drive(conn, call, || SettleMany::new(keys.clone(), fates(jobs, &mut rng)).for_call(call), |_| {})
    }

    /// The completes and a claim of up to `n` flat jobs in one transaction
    /// (`emq_plan::batch::complete_and_claim`). A call the guard aborts starts again without the
    /// claim (a claim meets other claimers; the completes should not wait on
    /// them): then the jobs taken are `None`.
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
        let mut first = true;
        // What the last commit's claim on this connection read past what it took:
        // most often the ids this one takes (one worker's commits follow each other).
        let hint = match conn.claim_hint.take() {
            Some((q, ids)) if q == keys.prefix => ids,
            _ => vec![],
        };
        let mut next = vec![];
        let out = drive(
            conn,
            call,
            || {
                let complete = CompleteMany::with_results(keys.clone(), jobs.to_vec()).for_call(call)?;
                let claim = if std::mem::take(&mut first) && n > 0 {
                    let claim = Claim::new(keys.clone(), n, lease_ms, claim_tokens::fresh(call, n as usize)?).for_call(call)?;
                    Some(claim.flat_only().hinted(hint.clone()))
                } else {
                    None
                };
                Ok(Both::new(claim, complete))
            },
            |both| next = both.first().map(Claim::next_hint).unwrap_or_default(),
        )?;
        if out.0.is_some() && !next.is_empty() {
            conn.claim_hint = Some((keys.prefix.clone(), next));
        }
        // No claim asked for is not a claim dropped.
        let (claimed, done) = out;
        Ok((done, if n == 0 { Some(vec![]) } else { claimed }))
    }
}

/// Pauses or resumes a lane, or sets its limit (SPEC §7), for either backend.
pub fn lane_control(conn: &mut Conn, call: &str, keys: &Keys, lane: &[u8], op: LaneOp) -> HostResult<()> {
    drive(conn, call, || LaneControl::new(keys.clone(), lane.to_vec(), op).for_call(call), |_| {})
}

//! Who runs a queue's job operations, chosen once per queue (`emq.Queue(…,
//! backend=)`, `QueueCore`): the plan in this process (`plan_backend`) or
//! emq's server module (`module_backend`). One method per operation; every
//! other call (lanes, reads, retention, sweeps) runs the same for both.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::NewJob;
use emq_plan::jobs::claim::Claimed;
use emq_plan::jobs::settle::Settled;
use emq_plan::protocol::write::ErrorDetail;
use emq_plan::Keys;

use crate::conn::Conn;
use crate::error::HostResult;

/// A fail: the error it records, its retry delay in ms (`None`: the backoff),
/// its error type and traceback (SPEC §13), and whether it may be retried
/// (`false`: dead now, attempts left or not).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub error: Vec<u8>,
    pub retry_in_ms: Option<u64>,
    pub detail: Option<ErrorDetail>,
    pub retry: bool,
}

/// How a held job is settled: completed with its result, or failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finish {
    Complete(Option<Vec<u8>>),
    Fail(Failure),
}

/// A held job to complete, with its result.
pub type Completion = (Held, Option<Vec<u8>>);

/// A queue's job operations on one connection. Each names `call`, the call the
/// user made, in its errors; `keys` are the queue's.
pub trait JobBackend: Sync {
    /// `"plan"` or `"module"`, as `emq.Queue(backend=)` names it.
    fn name(&self) -> &'static str;

    /// ADD (SPEC §7): the jobs' ids, all added or none, and whether this call
    /// added each (`false`: it had landed, or its uniqueness key named another
    /// job, whose id it is). `inbox`: a waiter registered with each job the
    /// call writes, in its own transaction (SPEC §13).
    fn add(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[NewJob], inbox: Option<&[u8]>)
        -> HostResult<(Vec<Vec<u8>>, Vec<bool>)>;

    /// CLAIM: up to `n` jobs (at most `MAX_CLAIM`), each leased for `lease_ms`.
    fn claim(&self, conn: &mut Conn, call: &str, keys: &Keys, n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>>;

    /// EXTEND: whether the lease now ends `lease_ms` from now.
    fn extend(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, lease_ms: u64) -> HostResult<bool>;

    /// EXTEND of many held jobs in one call: whether each was extended.
    fn extend_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>>;

    /// COMPLETE with its result: whether the job left `active` (done, or
    /// cancelled: it had been asked to stop).
    fn complete(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Completion) -> HostResult<bool>;

    /// COMPLETE of many held jobs in one call: whether each left `active`.
    fn complete_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Completion]) -> HostResult<Vec<bool>>;

    /// FAIL: retried, dead, cancelled (it had been asked to stop), or refused
    /// (the lease is lost).
    fn fail(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, failure: &Failure) -> HostResult<Settled>;

    /// COMPLETE or FAIL of many held jobs in one call, each answered as its
    /// single call would answer it.
    fn settle_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[(Held, Finish)]) -> HostResult<Vec<Settled>>;

    /// COMPLETE of many held jobs and a claim of up to `n` jobs in one round
    /// trip: whether each job was completed, and the jobs taken (`None`: the
    /// claim was dropped, see `plan_backend`).
    fn complete_and_claim(
        &self,
        conn: &mut Conn,
        call: &str,
        keys: &Keys,
        jobs: &[Completion],
        n: u64,
        lease_ms: u64,
    ) -> HostResult<(Vec<bool>, Option<Vec<Claimed>>)>;
}

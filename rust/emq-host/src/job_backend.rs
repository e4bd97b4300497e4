//! Who runs a queue's job operations, chosen once per queue (`emq.Queue(…,
//! backend=)`, `QueueCore`): the plan in this process (`plan_backend`) or
//! emq's server module (`module_backend`). One method per operation; every
//! other call (lanes, reads, retention, sweeps) runs the same for both.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::NewJob;
use emq_plan::jobs::claim::Claimed;
use emq_plan::jobs::settle::Settled;
use emq_plan::Keys;

use crate::conn::Conn;
use crate::error::HostResult;

/// A fail: the error it records, and its retry delay in ms (`None`: the backoff).
pub type Failure = (Vec<u8>, Option<u64>);

/// A queue's job operations on one connection. Each names `call`, the call the
/// user made, in its errors; `keys` are the queue's.
pub trait JobBackend: Sync {
    /// `"plan"` or `"module"`, as `emq.Queue(backend=)` names it.
    fn name(&self) -> &'static str;

    /// ADD (SPEC §7): the jobs' ids, all added or none.
    fn add(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[NewJob]) -> HostResult<Vec<Vec<u8>>>;

    /// CLAIM: up to `n` jobs (at most `MAX_CLAIM`), each leased for `lease_ms`.
    fn claim(&self, conn: &mut Conn, call: &str, keys: &Keys, n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>>;

    /// EXTEND: whether the lease now ends `lease_ms` from now.
    fn extend(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, lease_ms: u64) -> HostResult<bool>;

    /// EXTEND of many held jobs in one call: whether each was extended.
    fn extend_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>>;

    /// COMPLETE: whether the job is done.
    fn complete(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held) -> HostResult<bool>;

    /// COMPLETE of many held jobs in one call: whether each was completed.
    fn complete_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[Held]) -> HostResult<Vec<bool>>;

    /// FAIL: retried, dead, or refused (the lease is lost).
    fn fail(&self, conn: &mut Conn, call: &str, keys: &Keys, job: &Held, failure: &Failure) -> HostResult<Settled>;

    /// COMPLETE (`None`) or FAIL (`Some`) of many held jobs in one call, each
    /// answered as its single call would answer it.
    fn settle_many(&self, conn: &mut Conn, call: &str, keys: &Keys, jobs: &[(Held, Option<Failure>)]) -> HostResult<Vec<Settled>>;

    /// COMPLETE of many held jobs and a claim of up to `n` jobs in one round
    /// trip: whether each job was completed, and the jobs taken (`None`: the
    /// claim was dropped, see `plan_backend`).
    fn complete_and_claim(
        &self,
        conn: &mut Conn,
        call: &str,
        keys: &Keys,
        jobs: &[Held],
        n: u64,
        lease_ms: u64,
    ) -> HostResult<(Vec<bool>, Option<Vec<Claimed>>)>;
}

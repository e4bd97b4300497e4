//! An operator's operations on a queue (`emq_plan::operations`), driven on the
//! host whatever the queue's backend (the server module has no verb for them):
//! a page of jobs, retry, delete and promote now in batches of `ACT_BATCH`
//! ids (one guarded transaction each), retry of the dead, the lanes' controls,
//! the per-minute counters.

use emq_plan::lanes::offer::LaneCtl;
use emq_plan::operations::act::ACT_BATCH;
use emq_plan::operations::{Act, Action, Answer, JobPage, LaneControls, Minutes, Page, Place, Throughput};
use emq_plan::Keys;

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{ForCall, HostResult};

pub fn page(conn: &mut Conn, call: &str, keys: &Keys, place: &Place, offset: u64, limit: u64) -> HostResult<JobPage> {
    drive(conn, call, || Page::new(keys.clone(), place.clone(), offset, limit).for_call(call), |_| {})
}

/// The action on `ids` (distinct, checked), a batch at a time: each id's answer, in order.
pub fn act(conn: &mut Conn, call: &str, keys: &Keys, action: Action, ids: &[Vec<u8>]) -> HostResult<Vec<Answer>> {
    let mut answers = Vec::with_capacity(ids.len());
    for batch in ids.chunks(ACT_BATCH) {
        answers.extend(drive(conn, call, || Act::new(keys.clone(), action, batch.to_vec()).for_call(call), |_| {})?);
    }
    Ok(answers)
}

/// RETRY of the oldest dead jobs, a batch at a time, until `limit` are retried
/// or none is left (`None`: as many as `P dead` held at the first batch, so
/// jobs that die meanwhile cannot keep it going). How many were retried.
pub fn retry_dead(conn: &mut Conn, call: &str, keys: &Keys, limit: Option<u64>) -> HostResult<u64> {
    let mut left = limit;
    let mut retried = 0u64;
    loop {
        let n = left.unwrap_or(ACT_BATCH as u64).min(ACT_BATCH as u64);
        if n == 0 {
            return Ok(retried);
        }
        let mut held = None;
        let answers = drive(conn, call, || Act::retry_dead(keys.clone(), n).for_call(call), |a| held = a.dead_then())?;
        if left.is_none() {
            left = Some(held.unwrap_or(0).max(0).cast_unsigned());
        }
        let done = answers.iter().filter(|a| **a == Answer::Done).count() as u64;
        retried += done;
        left = left.map(|l| l.saturating_sub(answers.len().max(1) as u64));
        if answers.is_empty() {
            return Ok(retried);
        }
    }
}

pub fn lane_controls(conn: &mut Conn, call: &str, keys: &Keys, lanes: &[Vec<u8>]) -> HostResult<Vec<LaneCtl>> {
    drive(conn, call, || LaneControls::new(keys.clone(), lanes.to_vec()).for_call(call), |_| {})
}

pub fn throughput(conn: &mut Conn, call: &str, keys: &Keys, minutes: u64) -> HostResult<Minutes> {
    drive(conn, call, || Throughput::new(keys.clone(), minutes).for_call(call), |_| {})
}

//! The job's life on the host: add, claim, extend/complete/fail, lane control,
//! each one guarded conversation (`emq_plan`) driven by `drive`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use emq_plan::batch::complete_and_claim::Both;
use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::{ExtendMany, Held};
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::add::{Add, NewJob};
use emq_plan::jobs::claim::{Claim, Claimed, CLAIM, MAX_CLAIM};
use emq_plan::jobs::settle::{Action, Settle, Settled};
use emq_plan::lanes::lane_control::{LaneControl, LaneOp};
use emq_plan::Keys;

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{HostError, HostResult};
use crate::jitter::Jitter;

/// This process's tag for generated ids, and their sequence.
pub(crate) fn id_gen(count: usize) -> (u32, u64) {
    static TAG: OnceLock<u32> = OnceLock::new();
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let tag = *TAG.get_or_init(|| getrandom::u32().unwrap_or_else(|_| Jitter::new().next() as u32 ^ std::process::id()));
    (tag, SEQ.fetch_add(count as u64, Ordering::Relaxed))
}

pub fn add(conn: &mut Conn, queue: &[u8], jobs: &[NewJob]) -> HostResult<Vec<Vec<u8>>> {
    // One id sequence for the call: a retry keeps the ids it generates.
    let gen = id_gen(jobs.len());
    drive(conn, || Ok(Add::new(Keys::new(queue), jobs.to_vec(), gen)?), |_| {})
}

/// `n` fresh claim tokens: 128 bits each from the operating system's
/// randomness, in hex. A token is a lease's proof: it must not be guessable
/// from another (a late worker's word is refused by it).
pub(crate) fn tokens(n: usize) -> HostResult<Vec<Vec<u8>>> {
    let mut bytes = vec![0u8; 16 * n];
    getrandom::fill(&mut bytes).map_err(|e| HostError::Server(format!("{CLAIM}: no randomness from the operating system: {e}")))?;
    Ok(bytes
        .chunks_exact(16)
        .map(|t| {
            let mut hex = Vec::with_capacity(32);
            emq_plan::numbers::push_hex(&mut hex, t);
            hex
        })
        .collect())
}

pub fn claim(conn: &mut Conn, queue: &[u8], n: u64, lease_ms: u64) -> HostResult<Vec<Claimed>> {
    let n = n.min(MAX_CLAIM);
    drive(conn, || Ok(Claim::new(Keys::new(queue), n, lease_ms, tokens(n as usize)?)?), |_| {})
}

pub fn settle(conn: &mut Conn, queue: &[u8], id: &[u8], token: &[u8], lane: Option<&[u8]>, action: Action) -> HostResult<Settled> {
    let mut rng = Jitter::new();
    drive(
        conn,
        || Ok(Settle::new(Keys::new(queue), id.to_vec(), token.to_vec(), lane.map(<[u8]>::to_vec), action.clone(), rng.unit())?),
        |_| {},
    )
}

/// EXTEND of many held jobs in one call: whether each was extended.
pub fn extend_many(conn: &mut Conn, queue: &[u8], jobs: &[Held], lease_ms: u64) -> HostResult<Vec<bool>> {
    drive(conn, || Ok(ExtendMany::new(Keys::new(queue), jobs.to_vec(), lease_ms)?), |_| {})
}

/// COMPLETE of many held jobs in one call: whether each was completed.
pub fn complete_many(conn: &mut Conn, queue: &[u8], jobs: &[Held]) -> HostResult<Vec<bool>> {
    drive(conn, || Ok(CompleteMany::new(Keys::new(queue), jobs.to_vec())?), |_| {})
}

/// A fail in a batch: the error, and the retry delay (`None`: the backoff).
pub type Failure = (Vec<u8>, Option<u64>);

/// COMPLETE (`None`) or FAIL (`Some`) of many held jobs in one call: each
/// answered as its single call would answer it. Each try draws each fail's
/// jitter anew, as a new single call would.
pub fn settle_many(conn: &mut Conn, queue: &[u8], jobs: &[(Held, Option<Failure>)]) -> HostResult<Vec<Settled>> {
    let mut rng = Jitter::new();
    drive(conn, || Ok(SettleMany::new(Keys::new(queue), fates(jobs, &mut rng))?), |_| {})
}

/// Each job's fate: complete, or fail with a draw of the backoff's jitter.
pub fn fates(jobs: &[(Held, Option<Failure>)], rng: &mut Jitter) -> Vec<(Held, Fate)> {
    jobs.iter()
        .map(|(held, fail)| {
            let fate = match fail {
                None => Fate::Complete,
                Some((error, retry_in_ms)) => Fate::Fail { error: error.clone(), retry_in_ms: *retry_in_ms, jitter: rng.unit() },
            };
            (held.clone(), fate)
        })
        .collect()
}

/// COMPLETE of many held jobs and a claim of up to `n` flat jobs in one call
/// (`emq_plan::batch::complete_and_claim`): whether each job was completed, and the jobs taken. A
/// call the guard aborts starts again without the claim (a claim meets other
/// claimers; the completes should not wait on them): then the jobs taken are
/// `None`.
pub fn complete_many_claim(
    conn: &mut Conn,
    queue: &[u8],
    jobs: &[Held],
    n: u64,
    lease_ms: u64,
) -> HostResult<(Vec<bool>, Option<Vec<Claimed>>)> {
    let n = n.min(MAX_CLAIM);
    let mut first = true;
    // What the last commit's claim on this connection read past what it took:
    // most often the ids this one takes (one worker's commits follow each other).
    let hint = match conn.claim_hint.take() {
        Some((q, ids)) if q == queue => ids,
        _ => vec![],
    };
    let mut next = vec![];
    let out = drive(
        conn,
        || {
            let complete = CompleteMany::new(Keys::new(queue), jobs.to_vec())?;
            let claim = if std::mem::take(&mut first) && n > 0 {
                Some(Claim::new(Keys::new(queue), n, lease_ms, tokens(n as usize)?)?.flat_only().hinted(hint.clone()))
            } else {
                None
            };
            Ok(Both::new(claim, complete))
        },
        |both| next = both.first().map(Claim::next_hint).unwrap_or_default(),
    )?;
    if out.0.is_some() && !next.is_empty() {
        conn.claim_hint = Some((queue.to_vec(), next));
    }
    // No claim asked for is not a claim dropped.
    let (claimed, done) = out;
    Ok((done, if n == 0 { Some(vec![]) } else { claimed }))
}

pub fn lane(conn: &mut Conn, queue: &[u8], lane: &[u8], op: LaneOp) -> HostResult<()> {
    drive(conn, || Ok(LaneControl::new(Keys::new(queue), lane.to_vec(), op)?), |_| {})
}

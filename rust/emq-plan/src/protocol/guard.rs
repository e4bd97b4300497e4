//! The guard (SPEC §9): what each conversation watches, why that is enough, and
//! the parts of it that several conversations share.
//!
//! Every call reads, `WATCH`es what its plan depends on, reads that again under
//! the watch, and applies the plan in one `MULTI`/`EXEC`. An aborted `EXEC`, or a
//! re-read that differs from the first read (`Error::conflict`), starts a new call
//! with a new clock reading (the host's driver, `emq-host/src/drive.rs`: at most
//! `MAX_ATTEMPTS` calls, with backoff, then a contention error, nothing written).
//!
//! **Why the rows are enough.** A job joins `schedule` or `active` only with a due
//! time or lease deadline later than the clock reading of the call that adds it
//! (`clock`; anything due at once goes straight to `pending` or its lane), so no
//! one can make a member due under an earlier reading. Every other change to a
//! job (taken by another sweep, claimed, completed, re-scheduled, lease extended,
//! row deleted or created) writes its row (I5), and so aborts an `EXEC` that
//! watches the row. So a plan watches the rows it decides on, and never
//! `schedule`, `active`, `pending`, the lane lists or the ring: producers, claims
//! of other ids and ring rotation cannot abort it (the narrow guard).
//!
//! **Why lane control is watched.** offer(L) (`offer`) decides on a lane's control
//! hash; every change of it (pause, resume, limit, `active`, `ring`) writes the
//! hash. The one thing offer(L) decides on that is not in the hash is whether the
//! lane list is empty: a plan that leaves a servable lane out of the ring only
//! because its list is empty watches that list ([`relies_on_empty`],
//! [`confirm_empty`], [`still_empty`]): a producer appending meanwhile offers
//! nothing when its own reading found the lane not servable or in the ring, and
//! the lane would be stranded, non-empty and out of the ring (I3).
//!
//! **Why a promote watches one key.** Which emq operation can change the row of a
//! member that is due in `schedule`? Not a producer (a new job is never due under
//! an earlier reading, and an add under a taken id writes nothing), not a claim,
//! a settle or a stalled check (their rows are in `pending`, a lane or `active`,
//! I1), not the retention (it deletes done and dead rows only): only another
//! promote. So every promote, in every backend (the plan, the Lua script, the
//! module), increments `P promotions` in the transaction (or script) that takes
//! its members, and a promote watches that one key instead of its rows: what it
//! reads under the watch cannot change but by a promote, which aborts it. One key
//! instead of a thousand: no `WATCH` cost that grows with the batch (SPEC §9's
//! measurements), and promoters conflict exactly as they did (they all select the
//! head of `schedule`). Producers, claims and ring rotation still never abort it.
//! Any future operation that writes a due member's row must bump the key too.
//!
//! **Why a stalled check watches lease marks.** Which operation writes the row
//! of a member of `active`? Its holder's extend, complete or fail (token in
//! hand), and a stalled check (I1: the row is `active`; an add under its id
//! writes nothing; the retention deletes done and dead rows only). Each of
//! them, in every backend, also sets the **lease mark** of the second its lease
//! ends in (`P leases:B`, B = lease ms / 1000: [`lease_bucket`],
//! `Write::MarkLease`), in the same transaction. A stalled check selects members
//! whose leases ended at or before its clock reading; for each second that has
//! wholly passed by then it watches that second's mark instead of the rows in
//! it: the mark is set only by a write to a row whose lease ended in that
//! second, that is, by a holder late with its lease or by another stalled check,
//! exactly what must abort it. Holders settling live jobs set the marks of
//! seconds still to come and never abort it. Members of the current second
//! (leases that ended in the part of it that has passed) are watched by their
//! rows, as a live lease there still marks that second. So a selection of a
//! thousand rows whose leases ran out over a few seconds watches a few keys
//! (no `WATCH` cost that grows with the batch, SPEC §9), and is read once.
//! A mark holds `1` and lives [`LEASE_MARK_KEEP_MS`] from its last write: only
//! the write matters to a watch, never the value or whether the key is there.
//!
//! What each conversation watches:
//!
//! - **PROMOTE** (`sweep::conversation`): `P promotions` (in front of the
//!   reads) as soon as the selection is known; under it, `P promotions`
//!   again (read beside the selection: unchanged, no promote ran in between, so
//!   no selected member was taken or its row written: the selection stands
//!   without reading `schedule` again) and every row; the control hash of each
//!   lane its rows go to.
//! - **STALLED CHECK** (`sweep::conversation`): the lease marks of the seconds
//!   its selection's leases ended in, and the rows of the members of the
//!   current second ([`stalled_watch`]), in front of the reads as soon as
//!   the selection is known; under it, the head of `active` again (a member
//!   settled or taken between the selection and the watch is gone from it or
//!   scored anew: a conflict) and every row; the control hash of each lane its
//!   rows go to; the lane lists
//!   it relies on being empty (`sweep::stalled::empty_lanes_relied_on`); `P dead`
//!   when it makes jobs dead (`retention::dead_step`: a concurrent trim aborts it).
//! - **Groups** (both sweeps, SPEC §9): a call of more rows than one transaction
//!   should watch on the server (`WATCH` cost grows with the keys one connection
//!   watches on Redis 7 and Valkey 8) reads and checks the whole selection first,
//!   then applies it in groups; each later group watches its own rows (or
//!   `P promotions`) and lanes, and reads its members (`ZMSCORE`: one taken
//!   meanwhile is left out), rows and lanes again under that watch.
//! - **ADD** (`add`): the rows of the ids it is given (a taken id refuses the
//!   call) and the control hash of each lane it makes work ready in.
//! - **CLAIM** (`claim`): the rows it takes; the ring when it serves lanes (every
//!   claim that takes from a lane rotates it, so it also guards the lane heads);
//!   the control hash or the list of each lane it drops from the ring; `pending`
//!   when it drops ids from its head (ghosts, rows not `pending`). Not the control
//!   hash of a lane it serves: its `active` grows by `HINCRBY`, which commutes.
//! - **EXTEND, COMPLETE, FAIL** (`settle`): the job's row and its lane's control
//!   hash; the lane list when it relies on it being empty; `P dead` on a death.
//!   Each sets the lease mark of its row's lease (read with the row).
//! - **Lane control** (`lane_control`): the lane's control hash; its list when
//!   it relies on it being empty.
//! - **Reads** (`reads`, `jobs::retention`): none. A row, the lanes and the
//!   retention are single reads; the counts are read in one `MULTI`/`EXEC`,
//!   one instant.
//!
//! Type checks (SPEC §5 steps 4 and 5) are all made before `EXEC`, from the reads
//! (the rows' types are covered by their watch; the queue's own structures never
//! change type under emq), since Redis runs every queued command even when one
//! fails.

use crate::lanes::offer::LaneCtl;
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::Step;
use crate::protocol::reply::Reply;
use crate::protocol::write::Write;
pub use crate::protocol::write::LEASE_MARK_KEEP_MS;

/// Whether the only thing keeping offer(L) from putting the lane in the ring is
/// that the lane list is empty (`len` after this plan's pushes). A plan that
/// relies on that must watch the lane list: a producer appending to it in the
/// meantime offers nothing (the lane could not be served then, or was in the
/// ring), and the plan would leave a non-empty, servable lane out of the ring.
pub fn relies_on_empty(len: i64, ctl: &LaneCtl) -> bool {
    len <= 0 && ctl.levels == 0 && ctl.can_serve() && !ctl.in_ring
}

/// The step that watches lane lists a plan found empty and relies on staying
/// empty ([`relies_on_empty`]), and reads their lengths again under the watch.
pub fn confirm_empty<T>(keys: &Keys, lanes: &[Vec<u8>]) -> Step<T> {
    let watch: Vec<Vec<u8>> = lanes.iter().map(|l| keys.lane(l)).collect();
    let cmds = watch.iter().map(|k| Cmd::new("LLEN").arg(k)).collect();
    Step::Read { watch, cmds }
}

/// Whether the lists of a [`confirm_empty`] step are still empty.
pub fn still_empty(replies: &[Reply], lanes: usize) -> bool {
    replies.len() == lanes && replies.iter().all(|r| r.as_int() == Some(0))
}

/// The width of a lease mark's second (ms).
pub const LEASE_MARK_MS: i64 = 1000;

/// The second a lease (or an `active` score) ends in: `floor(ms / 1000)`, with
/// scores below 0 (and `-inf`) in second 0, as the Lua script computes it.
#[allow(clippy::cast_possible_truncation, reason = "floor of a score at most i64::MAX/1000: saturating `as`, as intended")]
pub fn lease_bucket(score: f64) -> i64 {
    if score.is_nan() || score <= 0.0 {
        return 0;
    }
    (score / 1000.0).floor() as i64
}

/// The lease marks of `scores`' seconds, each once (`scores` ascending, as a
/// selection is: a second's members are consecutive).
pub fn lease_marks(scores: &[f64]) -> Vec<Write> {
    let mut seen: Vec<i64> = vec![];
    for &s in scores {
        let b = lease_bucket(s);
        if seen.last() != Some(&b) {
            seen.push(b);
        }
    }
    seen.into_iter().map(|second| Write::MarkLease { second }).collect()
}

/// What a stalled check watches for members `ids` with leases `scores`, under
/// its clock reading `now`: the mark of each second wholly past by `now`, and
/// the row of each member whose lease ended in the current second (`scores`
/// ascending).
pub fn stalled_watch(keys: &Keys, ids: &[Vec<u8>], scores: &[f64], now: i64) -> Vec<Vec<u8>> {
    let mut marks: Vec<i64> = vec![];
    let mut rows = vec![];
    for (id, &s) in ids.iter().zip(scores) {
        let b = lease_bucket(s);
        if b.saturating_add(1).saturating_mul(LEASE_MARK_MS) <= now.saturating_add(1) {
            if marks.last() != Some(&b) {
                marks.push(b);
            }
        } else {
            rows.push(keys.job(id));
        }
    }
    let mut watch: Vec<Vec<u8>> = marks.into_iter().map(|b| keys.leases(b)).collect();
    watch.extend(rows);
    watch
}

/// Members past a sweep's selection that its re-read under the watch also reads:
/// room for members that joined the head since the selection.
pub const RE_READ_SLACK: usize = 16;

/// Whether the selected members are still in the zset's head (`ZRANGE … WITHSCORES`
/// pairs), in order and with the scores they had. Members between them joined since
/// the selection: a job joins with a due time or lease later than the clock reading of
/// the call that adds it, so such a member was added by a call that may be ordered
/// after this one, and is left for the next call, as `ZMSCORE` of the selection
/// would leave it. More than [`RE_READ_SLACK`] of them: a conflict, a new call.
pub fn still_selected(again: &[Reply], ids: &[Vec<u8>], scores: &[f64]) -> bool {
    let mut pairs = again.chunks_exact(2);
    ids.iter()
        .zip(scores)
        .all(|(id, s)| pairs.find(|p| p[0].as_bytes() == Some(id.as_slice())).is_some_and(|p| p[1].as_score() == Some(*s)))
}

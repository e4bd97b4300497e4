//! SPEC §13's calls that are not settles, run by the plan whatever the queue's
//! backend (the module has no verb of theirs): a waiter's registration, a
//! cancel, a progress, a status read of many rows, the read of requests to
//! stop (`emq_plan::jobs`, `emq_plan::reads`), and the blocking pop of a
//! waiter's inbox.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::cancel::{Cancel, CancelOutcome};
use emq_plan::jobs::progress::Progress;
use emq_plan::jobs::waiters::{Await, Watched};
use emq_plan::reads::cancels::{CancelRequests, Cancels};
use emq_plan::reads::{JobRow, Status};
use emq_plan::{Cmd, Keys, Reply};

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{ForCall, HostError, HostResult};

/// The most ids one pop takes after the first: the rest wait for the next pop.
pub const POP_MAX: usize = 1000;

pub fn watch(conn: &mut Conn, call: &str, keys: &Keys, ids: &[Vec<u8>], inbox: &[u8]) -> HostResult<Vec<Watched>> {
    drive(conn, call, || Await::new(keys.clone(), ids.to_vec(), inbox.to_vec()).for_call(call), |_| {})
}

pub fn cancel(conn: &mut Conn, call: &str, keys: &Keys, id: &[u8]) -> HostResult<CancelOutcome> {
    drive(conn, call, || Cancel::new(keys.clone(), id.to_vec()).for_call(call), |_| {})
}

pub fn progress(conn: &mut Conn, call: &str, keys: &Keys, job: &Held, value: &[u8]) -> HostResult<bool> {
    drive(
        conn,
        call,
        || Progress::new(keys.clone(), job.id.clone(), job.token.clone(), job.lane.clone(), value.to_vec()).for_call(call),
        |_| {},
    )
}

pub fn status(conn: &mut Conn, call: &str, keys: &Keys, ids: &[Vec<u8>]) -> HostResult<Vec<Option<JobRow>>> {
    drive(conn, call, || Status::new(keys.clone(), ids.to_vec()).for_call(call), |_| {})
}

pub fn cancel_requests(conn: &mut Conn, call: &str, keys: &Keys, since: Option<i64>) -> HostResult<CancelRequests> {
    drive(conn, call, || Ok(Cancels::new(keys.clone(), since)), |_| {})
}

/// `BLPOP P inbox:W timeout` and, in the same round trip, `LPOP P inbox:W
/// POP_MAX`: the server runs the second once the first returns (a push came,
/// the timeout passed, or `CLIENT UNBLOCK`), so every id there by then comes
/// back in one call. `timeout_s: None` blocks until a push or an unblock.
pub fn pop_inbox(conn: &mut Conn, call: &str, keys: &Keys, inbox: &[u8], timeout_s: Option<f64>) -> HostResult<Vec<Vec<u8>>> {
    let key = keys.inbox(inbox);
    let timeout = timeout_s.map_or_else(|| "0".to_string(), |t| format!("{:.3}", t.max(0.001)));
    let cmds = [Cmd::new("BLPOP").arg(&key).arg(timeout), Cmd::new("LPOP").arg(&key).arg(POP_MAX.to_string())];
    let replies = conn.pipeline(&cmds)?;
    let mut ids = vec![];
    // BLPOP's `[key, id]`, then LPOP's ids.
    for (r, skip) in replies.into_iter().zip([1, 0]) {
        match r {
            // A redirect is an error reply here, not a failed call: made one, so it is followed.
            Reply::Error { code, message } => return Err(HostError::classify(call, &code, &message)),
            Reply::Nil => {}
            Reply::Array(items) => ids.extend(items.iter().skip(skip).filter_map(Reply::as_bytes).map(<[u8]>::to_vec)),
            other => return Err(HostError::Server(format!("{call}: the inbox's pop gave {other:?}"))),
        }
    }
    Ok(ids)
}

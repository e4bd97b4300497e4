//! A queue's reads, driven on the host whatever its backend: a job's row, the
//! lanes, the counts, and the retention policy, read and set
//! (`emq_plan::reads`). The facade never spells a key.

use emq_plan::jobs::retention::Retention;
use emq_plan::jobs::retention::{GetRetention, SetRetention};
use emq_plan::reads::{Counts, CountsRead, Get, JobRow, Lanes};
use emq_plan::Keys;

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{ForCall, HostResult};

pub fn get(conn: &mut Conn, call: &str, keys: &Keys, id: &[u8]) -> HostResult<Option<JobRow>> {
    drive(conn, call, || Get::new(keys.clone(), id.to_vec()).for_call(call), |_| {})
}

pub fn lanes(conn: &mut Conn, call: &str, keys: &Keys) -> HostResult<Vec<Vec<u8>>> {
    drive(conn, call, || Ok(Lanes::new(keys.clone())), |_| {})
}

pub fn counts(conn: &mut Conn, call: &str, keys: &Keys) -> HostResult<Counts> {
    drive(conn, call, || Ok(CountsRead::new(keys.clone())), |_| {})
}

pub fn retention(conn: &mut Conn, call: &str, keys: &Keys) -> HostResult<Retention> {
    drive(conn, call, || Ok(GetRetention::new(keys.clone())), |_| {})
}

/// Sets the fields given (`None`: left as it is; `-1`: none).
pub fn set_retention(
    conn: &mut Conn,
    call: &str,
    keys: &Keys,
    done_ms: Option<i64>,
    dead_ms: Option<i64>,
    dead_max: Option<i64>,
) -> HostResult<()> {
    drive(conn, call, || SetRetention::new(keys.clone(), done_ms, dead_ms, dead_max).for_call(call), |_| {})
}

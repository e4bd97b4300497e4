//! The facade's reads, driven on the host: a job's row, the lanes, the counts,
//! and the retention policy (`emq_plan::reads`, `emq_plan::jobs::retention`). The facade never spells a key.

use emq_plan::jobs::retention::Retention;
use emq_plan::jobs::retention::{GetRetention, SetRetention};
use emq_plan::reads::{Counts, CountsRead, Get, JobRow, Lanes};
use emq_plan::Keys;

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::HostResult;

pub fn get(conn: &mut Conn, queue: &[u8], id: &[u8]) -> HostResult<Option<JobRow>> {
    drive(conn, || Ok(Get::new(Keys::new(queue), id.to_vec())?), |_| {})
}

pub fn lanes(conn: &mut Conn, queue: &[u8]) -> HostResult<Vec<Vec<u8>>> {
    drive(conn, || Ok(Lanes::new(Keys::new(queue))), |_| {})
}

pub fn counts(conn: &mut Conn, queue: &[u8]) -> HostResult<Counts> {
    drive(conn, || Ok(CountsRead::new(Keys::new(queue))), |_| {})
}

pub fn retention(conn: &mut Conn, queue: &[u8]) -> HostResult<Retention> {
    drive(conn, || Ok(GetRetention::new(Keys::new(queue))), |_| {})
}

pub fn set_retention(conn: &mut Conn, queue: &[u8], done_ms: Option<i64>, dead_ms: Option<i64>, dead_max: Option<i64>) -> HostResult<()> {
    drive(conn, || Ok(SetRetention::new(Keys::new(queue), done_ms, dead_ms, dead_max)?), |_| {})
}

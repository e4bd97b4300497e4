//! A queue's schedules (SPEC §14) on the host: the schedule verbs and TIMERS,
//! by the plan in this process (`emq_plan::schedules::ops`,
//! `emq_plan::sweep::timers`) or by emq's server module (`EMQ.SCHEDULE`,
//! `EMQ.TIMERS`, the same plans inside the server), and the listing.

use emq_plan::schedules::ops::{Answer, Listed, Op, ScheduleList, ScheduleOp};
use emq_plan::schedules::record::{missed_parts, Definition, TickJob};
use emq_plan::sweep::timers::{Ticked, Timers};
use emq_plan::wire::schedule_forms;
use emq_plan::Keys;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arguments::{self, integer, optional_duration, Least, MAX_STORED};
use crate::conn::Conn;
use crate::drive::drive_timed;
use crate::error::{ForCall, HostResult};
use crate::module_backend::refused;
use crate::py_values;

/// Most timers one TIMERS call takes (a worker's beat, and `emq.tools.timers`'s default).
pub const TIMERS_BATCH: u64 = 100;

/// One schedule verb on `name`.
pub fn schedule_op(conn: &mut Conn, call: &str, keys: &Keys, name: &[u8], op: &Op, module: bool) -> HostResult<Answer> {
    if module {
        let reply = refused(call, conn.one_write(schedule_forms::schedule_cmd(keys, name, op))?)?;
        return schedule_forms::parse_answer(&reply).for_call(call);
    }
    crate::drive::drive(conn, call, || ScheduleOp::new(keys.clone(), name.to_vec(), op.clone()).for_call(call), |_| {})
}

/// TIMERS, with how long from now (s) until the next timer it knows of
/// (`None`: none known; only the plan's call says).
pub fn timers(conn: &mut Conn, call: &str, keys: &Keys, batch: u64, module: bool) -> HostResult<(Ticked, Option<f64>)> {
    if module {
        let reply = refused(call, conn.one_write(schedule_forms::timers_cmd(keys, batch))?)?;
        return Ok((schedule_forms::parse_ticked(&reply).for_call(call)?, None));
    }
    let mut next = None;
    let ticked = drive_timed(
        conn,
        call,
        || Ok(Timers::new(keys.clone(), batch)),
        |t, replied| next = t.next_in_us().map(|us| (us / 1e6 - replied.elapsed().as_secs_f64()).max(0.0)),
    )?;
    Ok((ticked, next))
}

/// The queue's schedules, sorted by name.
pub fn list(conn: &mut Conn, call: &str, keys: &Keys) -> HostResult<Vec<Listed>> {
    crate::drive::drive(conn, call, || Ok(ScheduleList::new(keys.clone())), |_| {})
}

/// SCHEDULE's arguments as Python gives them, checked (`Definition::parse`):
/// `every` and `grace` are durations (seconds or a timedelta), the rest text,
/// counts and a job's data and lane as `Queue.add` takes them.
#[allow(clippy::too_many_arguments)]
pub fn definition(
    call: &str,
    name: &Bound<'_, PyAny>,
    cron: &Bound<'_, PyAny>,
    every: &Bound<'_, PyAny>,
    tz: &Bound<'_, PyAny>,
    missed: &Bound<'_, PyAny>,
    max_missed: &Bound<'_, PyAny>,
    grace: &Bound<'_, PyAny>,
    data: &Bound<'_, PyAny>,
    lane: &Bound<'_, PyAny>,
    max_attempts: &Bound<'_, PyAny>,
) -> PyResult<Definition> {
    let optional_text = |what: &str, v: &Bound<'_, PyAny>| if v.is_none() { Ok(None) } else { arguments::text(call, what, v).map(Some) };
    let name = arguments::text(call, "name", name)?.into_bytes();
    let cron = optional_text("cron", cron)?;
    let every_ms = optional_duration(call, "every", every, Least::Positive)?.map(|s| s.ms() as i64);
    let tz = optional_text("tz", tz)?;
    let missed = arguments::text(call, "missed", missed)?;
    let max_missed = if max_missed.is_none() { None } else { Some(integer(call, "max_missed", max_missed, 0, MAX_STORED)? as i64) };
    let grace_ms = optional_duration(call, "grace", grace, Least::Zero)?.map(|s| s.ms() as i64);
    let job = TickJob {
        data: arguments::text::data(call, "data", data)?,
        lane: arguments::text::optional_name(call, "lane", lane)?,
        max_attempts: integer(call, "max_attempts", max_attempts, 1, u64::from(u32::MAX))? as u32,
    };
    let def = Definition::parse(call, &name, cron.as_deref(), every_ms, tz.as_deref(), Some(&missed), max_missed, grace_ms, job);
    Ok(def.for_call(call)?)
}

/// One listed schedule as a dict of the facade's `emq.ScheduleInfo` fields
/// (times in ms since the epoch; `every_ms`, `grace_ms` in ms).
pub fn listed<'py>(py: Python<'py>, l: Listed) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let r = l.record;
    let (missed, max_missed, grace_ms) = missed_parts(r.missed);
    d.set_item("name", py_values::text(l.name))?;
    d.set_item("cron", r.cron)?;
    d.set_item("every_ms", r.every_ms)?;
    d.set_item("tz", r.tz)?;
    d.set_item("missed", missed)?;
    d.set_item("max_missed", max_missed)?;
    d.set_item("grace_ms", grace_ms)?;
    d.set_item("paused", r.paused)?;
    d.set_item("data", PyBytes::new(py, &r.job.data))?;
    d.set_item("lane", r.job.lane.map(py_values::text))?;
    d.set_item("max_attempts", r.job.max_attempts)?;
    d.set_item("next_tick", l.next)?;
    d.set_item("last_tick", r.last_tick)?;
    d.set_item("created", r.created)?;
    Ok(d)
}

//! A job's arguments: the jobs to add (`add`, `add_many`), and the held jobs
//! a worker hands back (`extend`, `complete`, `fail`, their batches).

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::{NewJob, When};
use emq_plan::names;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyMapping, PyTuple};

use super::durations::{duration, instant, retry_in, Least};
use super::numbers::integer;
use super::text::{data, failure, optional_name, refused, type_name};
use crate::job_backend::Failure;
use crate::job_class::Job;

/// A job the caller holds (claimed, with its lease's token): its id, token and lane.
pub fn held(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Held> {
    let job = v.cast::<Job>().map_err(|_| refused(call, format_args!("job must be an emq.Job, not {}", type_name(v))))?;
    let job = job.get();
    let token = job.token.as_deref().filter(|t| !t.is_empty()).ok_or_else(|| refused(call, "job holds no lease (it has no token)"))?;
    if let Some(why) = names::id_problem(job.id.as_bytes()) {
        return Err(refused(call, format_args!("job id {why}")));
    }
    if let Some(why) = job.lane.as_deref().and_then(|l| names::id_problem(l.as_bytes())) {
        return Err(refused(call, format_args!("job lane {why}")));
    }
    Ok(Held { id: job.id.as_bytes().to_vec(), token: token.as_bytes().to_vec(), lane: job.lane.as_ref().map(|l| l.as_bytes().to_vec()) })
}

/// The items of a list or a tuple.
fn sequence<'py>(call: &str, name: &str, what: &str, v: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = v.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    Err(refused(call, format_args!("{name} must be a list of {what}, not {}", type_name(v))))
}

/// A list (or tuple) of held jobs.
pub fn held_jobs(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Held>> {
    sequence(call, "jobs", "emq.Job", v)?.iter().map(|j| held(call, j)).collect()
}

/// `settle_many`'s items: a held job to complete (`None`), or `(job, error)` or
/// `(job, error, retry_in)` to fail.
pub fn settle_items(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<(Held, Option<Failure>)>> {
    sequence(call, "items", "jobs and (job, error[, retry_in]) tuples", v)?
        .iter()
        .map(|item| match item.cast::<PyTuple>() {
            Ok(t) if t.len() == 2 || t.len() == 3 => {
                let retry = if t.len() == 3 { retry_in(call, &t.get_item(2)?)? } else { None };
                Ok((held(call, &t.get_item(0)?)?, Some((failure(call, &t.get_item(1)?)?, retry))))
            }
            Ok(_) => Err(refused(call, "an item to fail is (job, error) or (job, error, retry_in)")),
            Err(_) => Ok((held(call, item)?, None)),
        })
        .collect()
}

/// The most attempts a job may have (a stored field the scripts read as a `u32`).
const MAX_ATTEMPTS: u64 = u32::MAX as u64;

/// One job to add: `add`'s arguments.
#[allow(clippy::too_many_arguments)]
pub fn new_job(
    call: &str,
    data_arg: &Bound<'_, PyAny>,
    id: &Bound<'_, PyAny>,
    delay: &Bound<'_, PyAny>,
    at: &Bound<'_, PyAny>,
    lane: &Bound<'_, PyAny>,
    max_attempts: &Bound<'_, PyAny>,
) -> PyResult<NewJob> {
    let id = optional_name(call, "id", id)?;
    let lane = optional_name(call, "lane", lane)?;
    let delay_ms = duration(call, "delay", delay, Least::Zero, None)?.ms();
    let when = if at.is_none() {
        When::Delay(delay_ms)
    } else {
        let at = instant(call, "at", at)?;
        if delay_ms > 0 {
            return Err(refused(call, "give delay or at, not both"));
        }
        When::At(at)
    };
    let max_attempts = integer(call, "max_attempts", max_attempts, 1, MAX_ATTEMPTS)? as u32;
    Ok(NewJob { id, data: data(call, "data", data_arg)?, when, lane, max_attempts })
}

/// The fields of an `add_many` item given as a dict: `add`'s keyword arguments.
const JOB_FIELDS: [&str; 6] = ["data", "id", "delay", "at", "lane", "max_attempts"];

/// `add_many`'s jobs: each its data, or a dict of `add`'s arguments (those it
/// leaves out: none, and `max_attempts` for the items that name none).
pub fn new_jobs<'py>(call: &str, v: &Bound<'py, PyAny>, max_attempts: &Bound<'py, PyAny>) -> PyResult<Vec<NewJob>> {
    let py = v.py();
    let none = py.None().into_bound(py);
    let zero = 0_i64.into_pyobject(py)?.into_any();
    let items = v.try_iter().map_err(|_| refused(call, format_args!("jobs must be an iterable of data or dicts, not {}", type_name(v))))?;
    let mut jobs = vec![];
    for item in items {
        let item = item?;
        let Ok(fields) = item.cast::<PyMapping>() else {
            jobs.push(new_job(call, &item, &none, &zero, &none, &none, max_attempts)?);
            continue;
        };
        let mut unknown = vec![];
        for key in fields.keys()? {
            let key = key.str()?.to_string();
            if !JOB_FIELDS.contains(&key.as_str()) {
                unknown.push(key);
            }
        }
        if !unknown.is_empty() {
            unknown.sort();
            return Err(refused(call, format_args!("unknown job fields {unknown:?} (a job's fields are {JOB_FIELDS:?})")));
        }
        let field = |k: &str, absent: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
            Ok(if fields.contains(k)? { fields.get_item(k)? } else { absent.clone() })
        };
        if !fields.contains("data")? {
            return Err(refused(call, "each job needs data"));
        }
        jobs.push(new_job(
            call,
            &field("data", &none)?,
            &field("id", &none)?,
            &field("delay", &zero)?,
            &field("at", &none)?,
            &field("lane", &none)?,
            &field("max_attempts", max_attempts)?,
        )?);
    }
    Ok(jobs)
}

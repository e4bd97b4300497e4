//! A job's arguments: the jobs to add (`add`, `add_many`), and the held jobs
//! a worker hands back (`extend`, `complete`, `fail`, their batches), with
//! their results and errors.

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::{NewJob, Unique, When};
use emq_plan::names;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyMapping, PyTuple};

use super::durations::{duration, instant, retry_in, Least, Span};
use super::numbers::integer;
use super::outcomes::{error_detail, result};
use super::text::{data, failure, optional_name, refused, sequence, type_name};
use crate::job_backend::{Completion, Failure, Finish};
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

/// A list (or tuple) of held jobs.
pub fn held_jobs(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Held>> {
    sequence(call, "jobs", "emq.Job", v)?.iter().map(|j| held(call, j)).collect()
}

/// Jobs to complete: each a held job, or `(job, result)` (`complete_many`,
/// `complete_and_claim`).
pub fn completions(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Completion>> {
    sequence(call, "jobs", "emq.Job or (job, result) tuples", v)?
        .iter()
        .map(|item| match item.cast::<PyTuple>() {
            Ok(t) if t.len() == 2 => Ok((held(call, &t.get_item(0)?)?, result(call, &t.get_item(1)?)?)),
            Ok(_) => Err(refused(call, "a job to complete with its result is (job, result)")),
            Err(_) => Ok((held(call, item)?, None)),
        })
        .collect()
}

/// A fail's arguments: its error, retry delay, error type, traceback, and
/// whether it may be retried (`None`: it may).
pub fn fail_of(
    call: &str,
    error: &Bound<'_, PyAny>,
    retry_in_value: &Bound<'_, PyAny>,
    (error_type, traceback): (&Bound<'_, PyAny>, &Bound<'_, PyAny>),
    retry: &Bound<'_, PyAny>,
) -> PyResult<Failure> {
    let may_retry = if retry.is_none() {
        true
    } else {
        retry.cast::<PyBool>().map_err(|_| refused(call, format_args!("retry must be a bool, not {}", type_name(retry))))?.is_true()
    };
    Ok(Failure {
        error: failure(call, error)?,
        retry_in_ms: retry_in(call, retry_in_value)?,
        detail: error_detail(call, error, error_type, traceback)?,
        retry: may_retry,
    })
}

/// The keys of a `settle_many` item given as a dict.
const SETTLE_FIELDS: [&str; 7] = ["job", "result", "error", "retry_in", "error_type", "traceback", "retry"];

/// `settle_many`'s items: a held job to complete; `(job, error)` or `(job,
/// error, retry_in)` to fail; or a dict: `{"job": j, "result": r}` to complete
/// with a result, `{"job": j, "error": e, "retry_in": …, "error_type": …,
/// "traceback": …, "retry": …}` to fail (the keys after `error` may be left
/// out; `"retry": False`: dead now).
pub fn settle_items(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<(Held, Finish)>> {
    let py = v.py();
    let none = py.None().into_bound(py);
    sequence(call, "items", "jobs, (job, error[, retry_in]) tuples and dicts", v)?
        .iter()
        .map(|item| {
            if let Ok(d) = item.cast::<PyDict>() {
                refuse_unknown(call, d.keys().iter(), &SETTLE_FIELDS, "item", "an item's")?;
                let get = |k: &str| -> PyResult<Bound<'_, PyAny>> { Ok(d.get_item(k)?.unwrap_or_else(|| none.clone())) };
                let job = held(call, &get("job")?)?;
                if !d.contains("error")? {
                    if ["retry_in", "error_type", "traceback", "retry"].iter().any(|k| d.contains(*k).unwrap_or(false)) {
                        return Err(refused(call, "an item with retry_in, error_type, traceback or retry is a fail: it needs an error"));
                    }
                    return Ok((job, Finish::Complete(result(call, &get("result")?)?)));
                }
                if d.contains("result")? {
                    return Err(refused(call, "an item has a result or an error, not both"));
                }
                let detail = (&get("error_type")?, &get("traceback")?);
                return Ok((job, Finish::Fail(fail_of(call, &get("error")?, &get("retry_in")?, detail, &get("retry")?)?)));
            }
            match item.cast::<PyTuple>() {
                Ok(t) if t.len() == 2 || t.len() == 3 => {
                    let retry = if t.len() == 3 { t.get_item(2)? } else { none.clone() };
                    Ok((held(call, &t.get_item(0)?)?, Finish::Fail(fail_of(call, &t.get_item(1)?, &retry, (&none, &none), &none)?)))
                }
                Ok(_) => Err(refused(call, "an item to fail is (job, error) or (job, error, retry_in)")),
                Err(_) => Ok((held(call, item)?, Finish::Complete(None))),
            }
        })
        .collect()
}

/// The most attempts a job may have (a stored field the scripts read as a `u32`).
const MAX_ATTEMPTS: u64 = u32::MAX as u64;

/// A job's own retention (`keep`) in ms: `None` (the queue's policy), a
/// duration (`0`: deleted at once), or `"forever"` (`-1`).
fn keep_of(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<i64>> {
    if v.is_none() {
        return Ok(None);
    }
    if v.extract::<String>().is_ok_and(|s| s == "forever") {
        return Ok(Some(-1));
    }
    if v.is_instance_of::<pyo3::types::PyString>() {
        return Err(refused(call, "keep must be a duration or \"forever\""));
    }
    // A duration is at most `MAX_SECONDS`: its ms fit a stored field.
    Ok(Some(duration(call, "keep", v, Least::Zero, None).map(Span::ms)? as i64))
}

/// A uniqueness key and its window: both given, or neither.
fn unique_of(call: &str, key: &Bound<'_, PyAny>, window: &Bound<'_, PyAny>) -> PyResult<Option<Unique>> {
    match (key.is_none(), window.is_none()) {
        (true, true) => Ok(None),
        (false, false) => Ok(Some(Unique {
            key: super::text::name(call, "unique_key", key)?,
            window_ms: duration(call, "unique_for", window, Least::Positive, None)?.ms(),
        })),
        _ => Err(refused(call, "give unique_key and unique_for together")),
    }
}

/// One job to add: `add`'s arguments; `extra`, its own retention, its
/// uniqueness key and window, and its priority (`None`: none of them).
#[allow(clippy::too_many_arguments)]
pub fn new_job(
    call: &str,
    data_arg: &Bound<'_, PyAny>,
    id: &Bound<'_, PyAny>,
    delay: &Bound<'_, PyAny>,
    at: &Bound<'_, PyAny>,
    lane: &Bound<'_, PyAny>,
    max_attempts: &Bound<'_, PyAny>,
    extra: Option<[&Bound<'_, PyAny>; 4]>,
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
    let (keep, unique, priority) = match extra {
        Some([keep, key, window, priority]) => (keep_of(call, keep)?, unique_of(call, key, window)?, priority_of(call, priority)?),
        None => (None, None, 0),
    };
    Ok(NewJob { id, data: data(call, "data", data_arg)?, when, lane, max_attempts, keep, unique, priority })
}

/// A job's priority level (SPEC §15): `None` or 0 (first, the default) to 9.
fn priority_of(call: &str, v: &Bound<'_, PyAny>) -> PyResult<u8> {
    if v.is_none() {
        return Ok(0);
    }
    Ok(integer(call, "priority", v, 0, 9)? as u8)
}

/// The fields of an `add_many` item given as a dict: `add`'s keyword arguments.
const JOB_FIELDS: [&str; 10] = ["data", "id", "delay", "at", "lane", "max_attempts", "keep", "unique_key", "unique_for", "priority"];

/// Refuses a dict whose keys are not all `allowed`, naming the unknown ones
/// (sorted) and the fields there are (`what` the item, `whose` its owner).
fn refuse_unknown<'py>(
    call: &str,
    keys: impl Iterator<Item = Bound<'py, PyAny>>,
    allowed: &[&str],
    what: &str,
    whose: &str,
) -> PyResult<()> {
    let mut unknown = vec![];
    for k in keys {
        let k = k.str()?.to_string();
        if !allowed.contains(&k.as_str()) {
            unknown.push(k);
        }
    }
    if unknown.is_empty() {
        return Ok(());
    }
    unknown.sort();
    Err(refused(call, format_args!("unknown {what} fields {unknown:?} ({whose} fields are {allowed:?})")))
}

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
            jobs.push(new_job(call, &item, &none, &zero, &none, &none, max_attempts, None)?);
            continue;
        };
        refuse_unknown(call, fields.keys()?.iter(), &JOB_FIELDS, "job", "a job's")?;
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
            Some([&field("keep", &none)?, &field("unique_key", &none)?, &field("unique_for", &none)?, &field("priority", &none)?]),
        )?);
    }
    Ok(jobs)
}

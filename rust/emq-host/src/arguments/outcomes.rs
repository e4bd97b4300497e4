//! The arguments of SPEC §13's calls: a complete's result, a fail's error type
//! and traceback, a progress value, a waiter's inbox, the ids of a status read
//! or a registration, each within the plan's limits (`emq_plan::jobs::ending`).

use emq_plan::jobs::ending::{inbox_problem, ERROR_TYPE_MAX, PROGRESS_MAX, RESULT_MAX, TRACEBACK_MAX};
use emq_plan::protocol::write::ErrorDetail;
use emq_plan::reads::STATUS_MAX;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyString};

use super::text::{data, name, refused, sequence, text, type_name};

/// Refuses a value of more than `max` bytes, naming the call and the argument.
fn within(call: &str, what: &str, v: Vec<u8>, max: usize) -> PyResult<Vec<u8>> {
    if v.len() > max {
        return Err(refused(call, format_args!("{what} is {} bytes, more than the limit of {max} ({} KiB)", v.len(), max / 1024)));
    }
    Ok(v)
}

/// A complete's result: `None`, or bytes or a `str` (its UTF-8), at most
/// `RESULT_MAX` bytes (512 KiB).
pub fn result(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if v.is_none() {
        return Ok(None);
    }
    within(call, "result", data(call, "result", v)?, RESULT_MAX).map(Some)
}

/// An exception's class name, qualified by its module (`app.tasks.Boom`;
/// a builtin's alone: `ValueError`).
fn class_name(v: &Bound<'_, PyAny>) -> PyResult<String> {
    let ty = v.get_type();
    let qualname: String = ty.getattr("__qualname__")?.extract()?;
    let module: Option<String> = ty.getattr("__module__").ok().and_then(|m| m.extract().ok());
    Ok(match module.as_deref() {
        None | Some("builtins") => qualname,
        Some(m) => format!("{m}.{qualname}"),
    })
}

/// A fail's error type and traceback: `error_type` a `str` (`None`: the
/// error's class when it is an exception, else none), `traceback` a `str` or
/// `None`; within their limits (1 KiB, 64 KiB). `None` when there is neither.
pub fn error_detail(
    call: &str,
    error: &Bound<'_, PyAny>,
    error_type: &Bound<'_, PyAny>,
    traceback: &Bound<'_, PyAny>,
) -> PyResult<Option<ErrorDetail>> {
    let py = error.py();
    let error_type = if error_type.is_none() {
        if error.is_instance(&py.get_type::<pyo3::exceptions::PyBaseException>())? {
            Some(class_name(error)?.into_bytes())
        } else {
            None
        }
    } else {
        Some(text(call, "error_type", error_type)?.into_bytes())
    };
    let traceback = if traceback.is_none() { None } else { Some(text(call, "traceback", traceback)?.into_bytes()) };
    let error_type = error_type.map(|t| within(call, "error_type", t, ERROR_TYPE_MAX)).transpose()?;
    let traceback = traceback.map(|t| within(call, "traceback", t, TRACEBACK_MAX)).transpose()?;
    Ok((error_type.is_some() || traceback.is_some()).then_some(ErrorDetail { error_type, traceback }))
}

/// A progress value: bytes or a `str` (as given), or a number (its decimal
/// text, as Python writes it), at most `PROGRESS_MAX` bytes (64 KiB).
pub fn progress(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let bytes = if v.is_instance_of::<PyFloat>() || (v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>()) {
        v.repr()?.to_string().into_bytes()
    } else if v.is_instance_of::<PyBool>() {
        return Err(refused(call, "value must be a number, str or bytes, not a bool"));
    } else {
        data(call, "value", v).map_err(|_| refused(call, format_args!("value must be a number, str or bytes, not {}", type_name(v))))?
    };
    within(call, "value", bytes, PROGRESS_MAX)
}

/// A waiter's inbox id (`ending::inbox_problem`: 1 to 64 ASCII letters, digits, `-`, `_`).
pub fn inbox(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let s = text(call, "inbox", v)?.into_bytes();
    match inbox_problem(&s) {
        Some(why) => Err(refused(call, format_args!("inbox {why}"))),
        None => Ok(s),
    }
}

/// Job ids: a list or a tuple of them (or one id alone), at most `STATUS_MAX`.
pub fn ids(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    let items = if v.is_instance_of::<PyString>() { vec![v.clone()] } else { sequence(call, "ids", "job ids", v)? };
    if items.len() > STATUS_MAX {
        return Err(refused(call, format_args!("ids: at most {STATUS_MAX} a call")));
    }
    items.iter().map(|i| name(call, "id", i)).collect()
}

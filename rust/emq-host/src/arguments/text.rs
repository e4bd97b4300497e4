//! Text arguments: `str`s that encode to UTF-8, queue names, job ids and
//! lanes (SPEC §1), a job's data and a fail's error, raw commands; and the
//! refusal every argument check raises.

use emq_plan::{names, Cmd};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyFloat, PyInt, PyList, PyMemoryView, PyString, PyTuple};

use crate::error::HostError;

/// The refusal of an argument: `emq.ArgumentError`, `"{call}: {what}"`.
pub fn refused(call: &str, what: impl std::fmt::Display) -> PyErr {
    HostError::Argument(format!("{call}: {what}")).into()
}

/// A value's type name, for a message (never the value itself).
pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// A `str` that encodes to UTF-8 (no lone surrogates).
pub fn text(call: &str, name: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    let s = v.cast::<PyString>().map_err(|_| refused(call, format_args!("{name} must be a str, not {}", type_name(v))))?;
    s.to_str().map(str::to_owned).map_err(|_| refused(call, format_args!("{name} must be valid UTF-8 text (it holds a lone surrogate)")))
}

/// A queue's name (SPEC §1: 1 to 128 bytes of UTF-8, no braces, control
/// characters or whitespace), as its `name` argument or a call's `queue`.
pub fn queue_name(call: &str, name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let q = text(call, name, v)?.into_bytes();
    match names::queue_name_problem(&q) {
        Some(why) => Err(refused(call, format_args!("{name} {why}"))),
        None => Ok(q),
    }
}

/// A job id or lane name (SPEC §1: 1 to 256 bytes of UTF-8, no control characters).
pub fn name(call: &str, what: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let s = text(call, what, v)?.into_bytes();
    match names::id_problem(&s) {
        Some(why) => Err(refused(call, format_args!("{what} {why}"))),
        None => Ok(s),
    }
}

/// `name`, where `None` means none.
pub fn optional_name(call: &str, what: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    if v.is_none() {
        return Ok(None);
    }
    name(call, what, v).map(Some)
}

/// Bytes, or a `str` as its UTF-8.
fn bytes_of(v: &Bound<'_, PyAny>) -> PyResult<Option<Vec<u8>>> {
    Ok(if let Ok(b) = v.cast::<PyBytes>() {
        Some(b.as_bytes().to_vec())
    } else if let Ok(b) = v.cast::<PyByteArray>() {
        Some(b.to_vec())
    } else if v.is_instance_of::<PyMemoryView>() {
        Some(v.py().get_type::<PyBytes>().call1((v,))?.extract()?)
    } else {
        None
    })
}

/// A job's data: bytes (`bytes`, `bytearray`, `memoryview`) or a `str`, kept as its UTF-8.
pub fn data(call: &str, name: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Some(b) = bytes_of(v)? {
        return Ok(b);
    }
    if v.is_instance_of::<PyString>() {
        return text(call, name, v).map(String::into_bytes);
    }
    Err(refused(call, format_args!("{name} must be bytes or str, not {}", type_name(v))))
}

/// What a fail records: `data`'s forms, or an exception, as `"Type: message"`
/// (whatever its text holds: a lone surrogate is written with a backslash).
pub fn failure(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let py = v.py();
    if v.is_instance(&py.get_type::<pyo3::exceptions::PyBaseException>())? {
        let line = PyString::new(py, &format!("{}: ", type_name(v))).add(v.str()?)?;
        return line.call_method1("encode", ("utf-8", "backslashreplace"))?.extract();
    }
    if bytes_of(v)?.is_none() && !v.is_instance_of::<PyString>() {
        return Err(refused(call, format_args!("error must be a str, bytes or an exception, not {}", type_name(v))));
    }
    data(call, "error", v)
}

/// A raw command's argument: bytes, str, int (any size) or float.
pub fn command_arg(call: &str, a: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = a.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if a.is_instance_of::<PyString>() {
        text(call, "an argument", a).map(String::into_bytes)
    } else if a.is_instance_of::<PyInt>() && !a.is_instance_of::<PyBool>() || a.is_instance_of::<PyFloat>() {
        Ok(a.str().map_err(|_| refused(call, "an argument has no text form"))?.to_string().into_bytes())
    } else {
        Err(refused(call, format_args!("arguments are str, bytes, int or float, not {}", type_name(a))))
    }
}

/// A raw command from Python values; its name (upper-cased) is the verb of its errors.
pub fn command<'py>(args: impl Iterator<Item = Bound<'py, PyAny>>) -> PyResult<Cmd> {
    let mut parts = vec![];
    for a in args {
        let verb = parts.first().map(|n: &Vec<u8>| String::from_utf8_lossy(n).to_uppercase()).unwrap_or_else(|| "command".into());
        parts.push(command_arg(&verb, &a)?);
    }
    if parts.is_empty() {
        return Err(refused("command", "no command given"));
    }
    Ok(Cmd::from_args(parts))
}

/// The items of a list or a tuple.
pub(super) fn sequence<'py>(call: &str, name: &str, what: &str, v: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if let Ok(l) = v.cast::<PyList>() {
        return Ok(l.iter().collect());
    }
    if let Ok(t) = v.cast::<PyTuple>() {
        return Ok(t.iter().collect());
    }
    Err(refused(call, format_args!("{name} must be a list of {what}, not {}", type_name(v))))
}

/// Job ids (`name` each) from a list, tuple or other iterable that is not
/// text itself, each kept once in the order given.
pub fn distinct_ids(call: &str, what: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<Vec<u8>>> {
    if v.is_instance_of::<PyString>() || bytes_of(v)?.is_some() {
        return Err(refused(call, format_args!("{what} must be a list of ids, not {}", type_name(v))));
    }
    let items = v.try_iter().map_err(|_| refused(call, format_args!("{what} must be a list of ids, not {}", type_name(v))))?;
    let mut seen = std::collections::HashSet::new();
    let mut out = vec![];
    for item in items {
        let id = name(call, what, &item?)
            .map_err(|_| refused(call, format_args!("{what} must each be a str of 1 to 256 bytes of UTF-8 with no control characters")))?;
        if seen.insert(id.clone()) {
            out.push(id);
        }
    }
    Ok(out)
}

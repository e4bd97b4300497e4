//! Python arguments as the core takes them: text that encodes to UTF-8, queue
//! names (SPEC §1), counts, timeouts, the sweep backend, raw commands. Each
//! refusal is an `emq.ArgumentError` that names the verb and the argument.

use std::time::Duration;

use emq_plan::names;
use emq_plan::Cmd;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyFloat, PyInt, PyString};

use crate::error::{HostError, HostResult};
use crate::sweeps::Backend;

/// Seconds as a timeout: a positive number; `inf`: no timeout (`None`).
pub fn seconds(verb: &str, name: &str, v: &Bound<'_, PyAny>) -> HostResult<Option<Duration>> {
    let secs = (!v.is_instance_of::<PyBool>()).then(|| v.extract::<f64>().ok()).flatten();
    match secs {
        Some(s) if s == f64::INFINITY => Some(None),
        Some(s) => Duration::try_from_secs_f64(s).ok().filter(|d| !d.is_zero()).map(Some),
        None => None,
    }
    .ok_or_else(|| HostError::Argument(format!("{verb}: {name} must be a positive number of seconds, not {}", short_repr(v))))
}

/// A value for a message: its repr, cut short.
fn short_repr(v: &Bound<'_, PyAny>) -> String {
    let r = v.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into());
    if r.chars().count() > 40 {
        format!("{}…", r.chars().take(40).collect::<String>())
    } else {
        r
    }
}

/// A raw command's argument: bytes, str, int (any size) or float.
pub fn arg_bytes(verb: &str, a: &Bound<'_, PyAny>) -> HostResult<Vec<u8>> {
    if let Ok(b) = a.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if a.is_instance_of::<PyString>() {
        text_arg(verb, "an argument", a).map(String::into_bytes)
    } else if a.is_instance_of::<PyInt>() && !a.is_instance_of::<PyBool>() || a.is_instance_of::<PyFloat>() {
        Ok(a.str().map_err(|_| HostError::Argument(format!("{verb}: an argument has no text form")))?.to_string().into_bytes())
    } else {
        Err(HostError::Argument(format!("{verb}: arguments are str, bytes, int or float, not {}", type_name(a))))
    }
}

pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// A `str` argument that encodes to UTF-8 (no lone surrogates).
pub fn text_arg(verb: &str, name: &str, v: &Bound<'_, PyAny>) -> HostResult<String> {
    let s = v.cast::<PyString>().map_err(|_| HostError::Argument(format!("{verb}: {name} must be a str, not {}", type_name(v))))?;
    s.to_str()
        .map(str::to_owned)
        .map_err(|_| HostError::Argument(format!("{verb}: {name} must be valid UTF-8 text (it holds a lone surrogate)")))
}

pub fn queue_arg(verb: &str, q: &Bound<'_, PyAny>) -> HostResult<Vec<u8>> {
    let q = text_arg(verb, "queue", q)?.into_bytes();
    match names::queue_name_problem(&q) {
        Some(why) => Err(HostError::Argument(format!("{verb}: queue {why}"))),
        None => Ok(q),
    }
}

/// A positive (or non-negative) int argument; `bool` is refused.
pub fn count(verb: &str, name: &str, v: &Bound<'_, PyAny>, zero_ok: bool) -> HostResult<u64> {
    let what = if zero_ok { "a non-negative integer" } else { "a positive integer" };
    let n = (!v.is_instance_of::<PyBool>()).then(|| v.extract::<i64>().ok()).flatten();
    match n.and_then(|n| u64::try_from(n).ok()) {
        Some(n) if n > 0 || zero_ok => Ok(n),
        _ => Err(HostError::Argument(format!("{verb}: {name} must be {what}"))),
    }
}

pub fn backend_arg(verb: &str, b: &Bound<'_, PyAny>) -> HostResult<Backend> {
    match text_arg(verb, "backend", b)?.as_str() {
        "plan" => Ok(Backend::Plan),
        "lua" => Ok(Backend::Lua),
        "module" => Ok(Backend::Module),
        other => Err(HostError::Argument(format!("{verb}: backend must be \"plan\", \"lua\" or \"module\", not {other:?}"))),
    }
}

/// A sweep's `group` (most rows per transaction): `None` (or absent) for the
/// automatic choice, else a positive integer; the plan backend's alone.
pub fn group_arg(verb: &str, g: Option<&Bound<'_, PyAny>>, backend: Backend) -> HostResult<Option<u64>> {
    let Some(g) = g.filter(|g| !g.is_none()) else { return Ok(None) };
    let g = count(verb, "group", g, false)?;
    if backend != Backend::Plan {
        return Err(HostError::Argument(format!("{verb}: group applies to backend=\"plan\"; a script or a module command is one call")));
    }
    Ok(Some(g))
}

/// A raw command from Python values; its name (upper-cased) is the verb of its errors.
pub fn raw_command<'py>(args: impl Iterator<Item = Bound<'py, PyAny>>) -> HostResult<Cmd> {
    let mut parts = vec![];
    for a in args {
        let verb = parts.first().map(|n: &Vec<u8>| String::from_utf8_lossy(n).to_uppercase()).unwrap_or_else(|| "command".into());
        parts.push(arg_bytes(&verb, &a)?);
    }
    if parts.is_empty() {
        return Err(HostError::Argument("command: no command given".into()));
    }
    Ok(Cmd::from_args(parts))
}

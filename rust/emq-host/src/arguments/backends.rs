//! Which backend runs a call: a queue's job operations (`plan`, `module`) and
//! a sweep's (`plan`, `lua`, `module`), and a sweep's grouping.

use pyo3::prelude::*;

use super::numbers::optional_count;
use super::text::{refused, text};

/// Who runs a queue's job operations (`job_backend`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobBackendName {
    Plan,
    Module,
}

pub fn job_backend(call: &str, v: &Bound<'_, PyAny>) -> PyResult<JobBackendName> {
    match text(call, "backend", v)?.as_str() {
        "plan" => Ok(JobBackendName::Plan),
        "module" => Ok(JobBackendName::Module),
        _ => Err(refused(call, "backend must be \"plan\" or \"module\"")),
    }
}

/// A sweep's backend: the plan in this process, the Lua scripts, or emq's server module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SweepBackend {
    Plan,
    Lua,
    Module,
}

pub fn sweep_backend(call: &str, v: &Bound<'_, PyAny>) -> PyResult<SweepBackend> {
    match text(call, "backend", v)?.as_str() {
        "plan" => Ok(SweepBackend::Plan),
        "lua" => Ok(SweepBackend::Lua),
        "module" => Ok(SweepBackend::Module),
        _ => Err(refused(call, "backend must be \"plan\", \"lua\" or \"module\"")),
    }
}

/// A sweep's `group` (most rows per transaction): `None` for the automatic
/// choice, else a positive integer; the plan backend's alone.
pub fn group(call: &str, v: &Bound<'_, PyAny>, backend: SweepBackend) -> PyResult<Option<u64>> {
    let g = optional_count(call, "group", v, false)?;
    if g.is_some() && backend != SweepBackend::Plan {
        return Err(refused(call, "group applies to backend=\"plan\"; a script or a module command is one call"));
    }
    Ok(g)
}

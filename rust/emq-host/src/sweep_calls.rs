//! The sweeps by a queue's name, as the module's functions (`emq.promote`,
//! `emq.stalled_check`, `emq.wire`): each checks its arguments and names
//! its call in every error; `client` is an `emq.Client` or a URL.

use emq_plan::sweep::{Kind, Outcome};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::arguments::{self, command_arg, count, optional_count, queue_name, SweepBackend};
use crate::client::Client;
use crate::error::HostError;
use crate::py_values;

/// A sweep's client, queue, batch, backend and group, checked.
type SweepArgs = (Py<Client>, Vec<u8>, u64, SweepBackend, Option<u64>);

fn sweep_args(
    call: &str,
    client: &Bound<'_, PyAny>,
    queue: &Bound<'_, PyAny>,
    batch: &Bound<'_, PyAny>,
    backend: &Bound<'_, PyAny>,
    group: &Bound<'_, PyAny>,
) -> PyResult<SweepArgs> {
    let client = Client::from_arg(call, client)?;
    let q = queue_name(call, "queue", queue)?;
    let batch = count(call, "batch", batch, false)?;
    let backend = arguments::sweep_backend(call, backend)?;
    Ok((client, q, batch, backend, arguments::group(call, group, backend)?))
}

/// PROMOTE (SPEC §5) for `emq.promote`: the number of ids taken out of
/// `schedule`. The facade gives the defaults.
#[pyfunction]
pub fn promote(
    py: Python<'_>,
    client: &Bound<'_, PyAny>,
    queue: &Bound<'_, PyAny>,
    batch: &Bound<'_, PyAny>,
    backend: &Bound<'_, PyAny>,
    group: &Bound<'_, PyAny>,
) -> PyResult<i64> {
    const CALL: &str = "emq.promote";
    let (client, q, batch, backend, group) = sweep_args(CALL, client, queue, batch, backend, group)?;
    match client.get().sweep(py, CALL, &q, Kind::Promote, batch, backend, group)? {
        Outcome::Promoted(n) => Ok(n),
        Outcome::Stalled { .. } => unreachable!("promote gives a count"),
    }
}

/// STALLED CHECK (SPEC §6) for `emq.stalled_check`: an `emq.StalledOutcome`
/// (recovered ids, dead ids); `max_stalled=None`: nothing dies.
#[pyfunction]
pub fn stalled_check<'py>(
    py: Python<'py>,
    client: &Bound<'py, PyAny>,
    queue: &Bound<'py, PyAny>,
    max_stalled: &Bound<'py, PyAny>,
    batch: &Bound<'py, PyAny>,
    backend: &Bound<'py, PyAny>,
    group: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    const CALL: &str = "emq.stalled_check";
    let (client, q, batch, backend, group) = sweep_args(CALL, client, queue, batch, backend, group)?;
    let max_stalled = optional_count(CALL, "max_stalled", max_stalled, true)?;
    match client.get().sweep(py, CALL, &q, Kind::Stalled { max_stalled }, batch, backend, group)? {
        Outcome::Stalled { recovered, dead } => py_values::stalled_outcome(py, recovered, dead),
        Outcome::Promoted(_) => unreachable!("a stalled check gives two lists"),
    }
}

/// The wire form: the seed's EVALSHA tail with the command's name first,
/// checked as the module checks it, then run by `backend`. Its errors name
/// the command given (`EMQ.PROMOTE`), as the module's do.
#[pyfunction(name = "wire")]
#[pyo3(signature = (client, *args, backend))]
pub fn wire_form<'py>(
    py: Python<'py>,
    client: &Bound<'py, PyAny>,
    args: &Bound<'py, PyTuple>,
    backend: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    const CALL: &str = "emq.wire";
    let client = Client::from_arg(CALL, client)?;
    let args: Vec<Vec<u8>> = args.iter().map(|a| command_arg(CALL, &a)).collect::<PyResult<_>>()?;
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    let req = emq_plan::wire::parse(&refs).map_err(HostError::plan)?;
    let verb = req.kind.verb();
    let backend = arguments::sweep_backend(verb, backend)?;
    match client.get().sweep(py, verb, &req.queue, req.kind, req.batch, backend, None)? {
        Outcome::Promoted(n) => Ok(n.into_pyobject(py)?.into_any()),
        Outcome::Stalled { recovered, dead } => {
            Ok(PyList::new(py, [py_values::ids(py, recovered)?, py_values::ids(py, dead)?])?.into_any())
        }
    }
}

//! The registry's calls (`emq_plan::registry`): a queue's name added once per
//! process on its first write (`register`), the queues and the workers as
//! `emq.queues` and `emq.workers` read them, and a worker's heartbeat and
//! clean stop. Each is routed by the registry's tag, so in a cluster every one
//! goes to the node that holds it.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};

use emq_plan::names::REGISTRY;
use emq_plan::registry::{QueueNames, RegisterQueue, WorkerBeat, WorkerFields, WorkerLeave, Workers};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::arguments::{self, duration, Least};
use crate::client::Client;
use crate::drive::drive;
use crate::error::ForCall;
use crate::py_values::text;

/// A queue on a server: its address and name.
type ServedQueue = (String, Vec<u8>);

/// The queues this process has registered.
static REGISTERED: Mutex<Option<HashSet<ServedQueue>>> = Mutex::new(None);

/// Adds `queue` to `R queues` unless this process did for this server already
/// (`done` is the queue's own flag: after the first write, one atomic load).
/// Best effort: a client whose ACL denies the registry's keys, or any other
/// refusal, leaves the queue unlisted and the call it precedes to go on; the
/// next process tries again.
pub fn register(py: Python<'_>, client: &Client, queue: &[u8], done: &AtomicBool) {
    if done.load(Ordering::Relaxed) {
        return;
    }
    let pair = (client.address.clone(), queue.to_vec());
    let fresh = REGISTERED.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(HashSet::new).insert(pair);
    if fresh {
        let call = "emq.Queue";
        let _ = client.on(py, call, REGISTRY, |c| drive(c, call, || RegisterQueue::new(queue.to_vec()).for_call(call), |_| {}));
    }
    done.store(true, Ordering::Relaxed);
}

/// `emq.queues(client)`: every queue name registered, sorted.
#[pyfunction]
pub fn registered_queues(py: Python<'_>, client: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    const CALL: &str = "emq.queues";
    let client = Client::from_arg(CALL, client)?;
    let names = client.get().on(py, CALL, REGISTRY, |c| drive(c, CALL, || Ok(QueueNames::new()), |_| {}))?;
    Ok(names.into_iter().map(text).collect())
}

/// `emq.workers(client)`: each live worker's id and fields, as `(id, {field: value})`.
#[pyfunction]
pub fn live_workers<'py>(py: Python<'py>, client: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    const CALL: &str = "emq.workers";
    let client = Client::from_arg(CALL, client)?;
    let found: Vec<WorkerFields> = client.get().on(py, CALL, REGISTRY, |c| drive(c, CALL, || Ok(Workers::new()), |_| {}))?;
    let out = PyList::empty(py);
    for (id, fields) in found {
        let d = PyDict::new(py);
        for (name, value) in fields {
            d.set_item(text(name), text(value))?;
        }
        out.append(PyTuple::new(py, [text(id).into_pyobject(py)?.into_any(), d.into_any()])?)?;
    }
    Ok(out)
}

/// A worker's heartbeat: its fields (str to str) kept for `ttl` (seconds) from
/// the server's clock now.
#[pyfunction]
pub fn worker_beat(
    py: Python<'_>,
    client: &Bound<'_, PyAny>,
    id: &Bound<'_, PyAny>,
    fields: &Bound<'_, PyDict>,
    ttl: &Bound<'_, PyAny>,
) -> PyResult<()> {
    const CALL: &str = "emq.Worker";
    let client = Client::from_arg(CALL, client)?;
    let id = arguments::text(CALL, "id", id)?.into_bytes();
    let ttl_ms = duration(CALL, "ttl", ttl, Least::Positive, None)?.ms();
    let mut pairs = Vec::with_capacity(fields.len());
    for (k, v) in fields.iter() {
        pairs.push((arguments::text(CALL, "fields", &k)?.into_bytes(), arguments::text(CALL, "fields", &v)?.into_bytes()));
    }
    let beat = || WorkerBeat::new(id.clone(), pairs.clone(), ttl_ms).for_call(CALL);
    beat()?;
    client.get().wrote(py, CALL, REGISTRY, |c| drive(c, CALL, beat, |_| {}))
}

/// A worker's clean stop: its entry and hash removed.
#[pyfunction]
pub fn worker_leave(py: Python<'_>, client: &Bound<'_, PyAny>, id: &Bound<'_, PyAny>) -> PyResult<()> {
    const CALL: &str = "emq.Worker";
    let client = Client::from_arg(CALL, client)?;
    let id = arguments::text(CALL, "id", id)?.into_bytes();
    client.get().wrote(py, CALL, REGISTRY, |c| drive(c, CALL, || WorkerLeave::new(id.clone()).for_call(CALL), |_| {}))
}

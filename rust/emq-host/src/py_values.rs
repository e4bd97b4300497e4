//! Rust values as Python ones: a server's replies (`Client.command`), `INFO`
//! text, ids, and emq's answers, whose classes live in `emq.answers`
//! (`FailOutcome`, `QueueCounts`, `Retention`, `StalledOutcome`,
//! `CancelOutcome`, `CancelRequests`, `UniqueAdd`), each looked up once.

use emq_plan::jobs::cancel::CancelOutcome;
use emq_plan::jobs::retention::Retention;
use emq_plan::jobs::settle::Settled;
use emq_plan::reads::cancels::CancelRequests;
use emq_plan::reads::Counts;
use emq_plan::Reply;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyType};

use crate::error::HostError;

/// Bytes the server stored, as text (a byte that is not UTF-8 as U+FFFD).
pub fn text(b: Vec<u8>) -> String {
    String::from_utf8(b).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// A reply as Python values: bytes, int, float, str, list, None; an error
/// reply raises its class.
pub fn reply(py: Python<'_>, r: Reply) -> PyResult<Bound<'_, PyAny>> {
    Ok(match r {
        Reply::Nil => py.None().into_bound(py),
        Reply::Int(n) => n.into_pyobject(py)?.into_any(),
        Reply::Bulk(b) => PyBytes::new(py, &b).into_any(),
        Reply::Double(d) => d.into_pyobject(py)?.into_any(),
        Reply::Status(s) => PyString::new(py, &s).into_any(),
        Reply::Array(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(reply(py, i)?)?;
            }
            l.into_any()
        }
        Reply::Error { code, message } => return Err(HostError::classify("emq", &code, &message).into()),
    })
}

/// `INFO` text as a dict of str.
pub fn info<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for line in text.lines() {
        if let Some((k, v)) = line.trim_end().split_once(':') {
            d.set_item(k, v)?;
        }
    }
    Ok(d)
}

/// Ids as a list of str.
pub fn ids(py: Python<'_>, ids: Vec<Vec<u8>>) -> PyResult<Bound<'_, PyList>> {
    PyList::new(py, ids.into_iter().map(text))
}

static FAIL_OUTCOME: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static QUEUE_COUNTS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static RETENTION: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static STALLED_OUTCOME: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CANCEL_OUTCOME: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static CANCEL_REQUESTS: PyOnceLock<Py<PyType>> = PyOnceLock::new();
static UNIQUE_ADD: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn answer<'py>(py: Python<'py>, cell: &'static PyOnceLock<Py<PyType>>, name: &str) -> PyResult<&'py Bound<'py, PyType>> {
    cell.import(py, "emq.answers", name)
}

/// A fail's answer: `FailOutcome.SCHEDULED` (retried later, or ready at once),
/// `DEAD`, `CANCELLED` (it had been asked to stop), or `REFUSED` (the lease is
/// lost; nothing changed).
pub fn fail_outcome(py: Python<'_>, s: Settled) -> PyResult<Bound<'_, PyAny>> {
    let member = match s {
        Settled::Retrying => "SCHEDULED",
        Settled::Dead => "DEAD",
        Settled::Cancelled => "CANCELLED",
        _ => "REFUSED",
    };
    answer(py, &FAIL_OUTCOME, "FailOutcome")?.getattr(member)
}

/// A batch's answer for one job, as its single call answers it: a complete's
/// bool, a fail's `FailOutcome`.
pub fn settle_answer(py: Python<'_>, s: Settled, failed: bool) -> PyResult<Bound<'_, PyAny>> {
    if failed {
        fail_outcome(py, s)
    } else {
        Ok(pyo3::types::PyBool::new(py, matches!(s, Settled::Completed | Settled::Cancelled)).to_owned().into_any())
    }
}

pub fn queue_counts(py: Python<'_>, n: Counts) -> PyResult<Bound<'_, PyAny>> {
    let lanes = PyDict::new(py);
    for (name, len) in n.lanes {
        lanes.set_item(text(name), len)?;
    }
    let kw = PyDict::new(py);
    kw.set_item("schedule", n.schedule)?;
    kw.set_item("pending", n.pending)?;
    kw.set_item("lanes", lanes)?;
    kw.set_item("active", n.active)?;
    kw.set_item("dead", n.dead)?;
    kw.set_item("done", n.done)?;
    kw.set_item("ring", n.ring)?;
    kw.set_item("cancelled", n.cancelled)?;
    answer(py, &QUEUE_COUNTS, "QueueCounts")?.call((), Some(&kw))
}

/// The policy in seconds (and a count), `None` where the plan keeps `-1` (forever, no limit).
pub fn retention(py: Python<'_>, r: Retention) -> PyResult<Bound<'_, PyAny>> {
    let secs = |ms: i64| (ms >= 0).then(|| ms as f64 / 1000.0);
    let kw = PyDict::new(py);
    kw.set_item("keep_done", secs(r.done_ms))?;
    kw.set_item("keep_dead", secs(r.dead_ms))?;
    kw.set_item("max_dead", (r.dead_max >= 0).then_some(r.dead_max))?;
    answer(py, &RETENTION, "Retention")?.call((), Some(&kw))
}

pub fn stalled_outcome(py: Python<'_>, recovered: Vec<Vec<u8>>, dead: Vec<Vec<u8>>) -> PyResult<Bound<'_, PyAny>> {
    answer(py, &STALLED_OUTCOME, "StalledOutcome")?.call1((ids(py, recovered)?, ids(py, dead)?))
}

/// A cancel's answer: an `emq.CancelOutcome`.
pub fn cancel_outcome(py: Python<'_>, c: CancelOutcome) -> PyResult<Bound<'_, PyAny>> {
    let member = match c {
        CancelOutcome::Cancelled => "CANCELLED",
        CancelOutcome::Stopping => "STOPPING",
        CancelOutcome::AlreadyDone => "ALREADY_DONE",
        CancelOutcome::Unknown => "UNKNOWN",
    };
    answer(py, &CANCEL_OUTCOME, "CancelOutcome")?.getattr(member)
}

/// The requests to stop read: an `emq.CancelRequests` (the ids, the next cursor).
pub fn cancel_requests(py: Python<'_>, r: CancelRequests) -> PyResult<Bound<'_, PyAny>> {
    answer(py, &CANCEL_REQUESTS, "CancelRequests")?.call1((ids(py, r.ids)?, r.until))
}

/// A unique add's answer: an `emq.UniqueAdd` (the id, whether this call added it).
pub fn unique_add(py: Python<'_>, id: Vec<u8>, created: bool) -> PyResult<Bound<'_, PyAny>> {
    answer(py, &UNIQUE_ADD, "UniqueAdd")?.call1((text(id), created))
}

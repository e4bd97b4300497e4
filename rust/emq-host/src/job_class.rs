//! The `emq.Job` class: a job as the core hands it to Python (a claim, a
//! `get`, a `status` read, a waiter's registration), and as a worker hands it
//! back to prove its lease (`extend`, `complete`, `fail`, `progress`). A row
//! read whole carries its outcome too (SPEC §13): result, error type and
//! traceback, progress, times, a cancel asked, its own retention, its
//! uniqueness key.

use std::fmt::Write;

use emq_plan::jobs::claim::Claimed;
use emq_plan::reads::JobRow;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyInt, PyString};

use crate::arguments::text::{text as text_arg, type_name};
use crate::error::HostError;

/// A job. `token` and `lease_deadline_ms` are set while it is claimed; the
/// token proves the lease to `extend`, `complete` and `fail`. Immutable;
/// equal when every field is.
#[pyclass(frozen, eq, hash, module = "emq._core", name = "Job")]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Job {
    #[pyo3(get)]
    pub id: String,
    pub data: Vec<u8>,
    #[pyo3(get)]
    pub lane: Option<String>,
    #[pyo3(get)]
    pub attempts: i64,
    #[pyo3(get)]
    pub max_attempts: i64,
    #[pyo3(get)]
    pub token: Option<String>,
    #[pyo3(get)]
    pub lease_deadline_ms: Option<i64>,
    #[pyo3(get)]
    pub state: Option<String>,
    #[pyo3(get)]
    pub due_ms: Option<i64>,
    #[pyo3(get)]
    pub stalls: i64,
    #[pyo3(get)]
    pub error: Option<String>,
    pub result: Option<Vec<u8>>,
    #[pyo3(get)]
    pub error_type: Option<String>,
    #[pyo3(get)]
    pub traceback: Option<String>,
    pub progress: Option<Vec<u8>>,
    #[pyo3(get)]
    pub created_ms: Option<i64>,
    #[pyo3(get)]
    pub started_ms: Option<i64>,
    #[pyo3(get)]
    pub finished_ms: Option<i64>,
    #[pyo3(get)]
    pub cancel_requested: bool,
    #[pyo3(get)]
    pub keep_ms: Option<i64>,
    #[pyo3(get)]
    pub unique_key: Option<String>,
    /// Its priority level, 0 to 9, as its row says (`None` on a claimed job:
    /// a claim does not read it).
    #[pyo3(get)]
    pub priority: Option<i64>,
}

const VERB: &str = "emq.Job";

fn text(b: Vec<u8>) -> String {
    String::from_utf8_lossy(&b).into_owned()
}

fn opt_text(v: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<String>> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) => text_arg(VERB, name, v).map(Some),
    }
}

fn int(v: Option<&Bound<'_, PyAny>>, name: &str) -> PyResult<Option<i64>> {
    match v.filter(|v| !v.is_none()) {
        None => Ok(None),
        Some(v) if v.is_instance_of::<PyInt>() && !v.is_instance_of::<PyBool>() => {
            v.extract::<i64>().map(Some).map_err(|_| HostError::Argument(format!("{VERB}: {name} must fit in 64 bits")).into())
        }
        Some(v) => Err(HostError::Argument(format!("{VERB}: {name} must be an int, not {}", type_name(v))).into()),
    }
}

impl Job {
    pub fn claimed(j: Claimed) -> Job {
        Job {
            id: text(j.id),
            data: j.data,
            lane: j.lane.map(text),
            attempts: j.attempts,
            max_attempts: j.max_attempts,
            token: Some(text(j.token)),
            lease_deadline_ms: Some(j.deadline),
            state: Some("active".into()),
            due_ms: None,
            stalls: 0,
            error: None,
            result: None,
            error_type: None,
            traceback: None,
            progress: None,
            created_ms: None,
            started_ms: None,
            finished_ms: None,
            cancel_requested: false,
            keep_ms: None,
            unique_key: None,
            priority: None,
        }
    }

    pub fn row(id: String, r: JobRow) -> Job {
        Job {
            id,
            data: r.data,
            lane: r.lane.map(text),
            attempts: r.attempts,
            max_attempts: r.max_attempts,
            token: r.token.map(text),
            lease_deadline_ms: r.lease,
            state: r.state.map(text),
            due_ms: r.due,
            stalls: r.stalls,
            error: r.error.map(text),
            result: r.result,
            error_type: r.error_type.map(text),
            traceback: r.traceback.map(text),
            progress: r.progress,
            created_ms: r.created,
            started_ms: r.claimed,
            finished_ms: r.finished,
            cancel_requested: r.cancel,
            keep_ms: r.keep,
            unique_key: r.unique.map(text),
            priority: Some(i64::from(r.priority)),
        }
    }
}

#[pymethods]
impl Job {
    #[new]
    #[pyo3(signature = (
        id, data=None, lane=None, attempts=None, max_attempts=None, token=None, lease_deadline_ms=None, state=None, due_ms=None,
        stalls=None, error=None, *, result=None, error_type=None, traceback=None, progress=None, created_ms=None, started_ms=None,
        finished_ms=None, cancel_requested=false, keep_ms=None, unique_key=None, priority=None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        id: &Bound<'_, PyAny>,
        data: Option<&Bound<'_, PyAny>>,
        lane: Option<&Bound<'_, PyAny>>,
        attempts: Option<&Bound<'_, PyAny>>,
        max_attempts: Option<&Bound<'_, PyAny>>,
        token: Option<&Bound<'_, PyAny>>,
        lease_deadline_ms: Option<&Bound<'_, PyAny>>,
        state: Option<&Bound<'_, PyAny>>,
        due_ms: Option<&Bound<'_, PyAny>>,
        stalls: Option<&Bound<'_, PyAny>>,
        error: Option<&Bound<'_, PyAny>>,
        result: Option<&Bound<'_, PyAny>>,
        error_type: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
        progress: Option<&Bound<'_, PyAny>>,
        created_ms: Option<&Bound<'_, PyAny>>,
        started_ms: Option<&Bound<'_, PyAny>>,
        finished_ms: Option<&Bound<'_, PyAny>>,
        cancel_requested: bool,
        keep_ms: Option<&Bound<'_, PyAny>>,
        unique_key: Option<&Bound<'_, PyAny>>,
        priority: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Job> {
        let bytes = |v: Option<&Bound<'_, PyAny>>, name: &str| -> PyResult<Option<Vec<u8>>> {
            match v.filter(|d| !d.is_none()) {
                None => Ok(None),
                Some(d) if d.is_instance_of::<PyBytes>() || d.is_instance_of::<PyByteArray>() => Ok(Some(d.extract::<Vec<u8>>()?)),
                Some(d) if d.is_instance_of::<PyString>() => Ok(Some(text_arg(VERB, name, d)?.into_bytes())),
                Some(d) => Err(HostError::Argument(format!("{VERB}: {name} must be bytes or str, not {}", type_name(d))).into()),
            }
        };
        let data = bytes(data, "data")?.unwrap_or_default();
        Ok(Job {
            id: text_arg(VERB, "id", id)?,
            data,
            lane: opt_text(lane, "lane")?,
            attempts: int(attempts, "attempts")?.unwrap_or(0),
            max_attempts: int(max_attempts, "max_attempts")?.unwrap_or(0),
            token: opt_text(token, "token")?,
            lease_deadline_ms: int(lease_deadline_ms, "lease_deadline_ms")?,
            state: opt_text(state, "state")?,
            due_ms: int(due_ms, "due_ms")?,
            stalls: int(stalls, "stalls")?.unwrap_or(0),
            error: opt_text(error, "error")?,
            result: bytes(result, "result")?,
            error_type: opt_text(error_type, "error_type")?,
            traceback: opt_text(traceback, "traceback")?,
            progress: bytes(progress, "progress")?,
            created_ms: int(created_ms, "created_ms")?,
            started_ms: int(started_ms, "started_ms")?,
            finished_ms: int(finished_ms, "finished_ms")?,
            cancel_requested,
            keep_ms: int(keep_ms, "keep_ms")?,
            unique_key: opt_text(unique_key, "unique_key")?,
            priority: int(priority, "priority")?,
        })
    }

    /// What its complete returned, as it was written (`None`: none, or not done).
    #[getter]
    fn result<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.result.as_deref().map(|r| PyBytes::new(py, r))
    }

    /// How far it has got, as its worker wrote it (`None`: never written).
    #[getter]
    fn progress<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.progress.as_deref().map(|p| PyBytes::new(py, p))
    }

    /// Whether it has come to an outcome: `state` is `done`, `dead` or `cancelled`.
    #[getter]
    fn ended(&self) -> bool {
        matches!(self.state.as_deref(), Some("done" | "dead" | "cancelled"))
    }

    /// The job's data, as it was added.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.data)
    }

    fn __repr__(&self) -> String {
        // Writing to a `String` cannot fail.
        let mut s = format!("Job(id={:?}", self.id);
        if let Some(l) = &self.lane {
            let _ = write!(s, ", lane={l:?}");
        }
        if let Some(st) = &self.state {
            let _ = write!(s, ", state={st:?}");
        }
        let _ = write!(s, ", attempts={}/{}", self.attempts, self.max_attempts);
        if self.token.is_some() {
            let _ = write!(s, ", lease_deadline_ms={}", self.lease_deadline_ms.unwrap_or_default());
        }
        let _ = write!(s, ", data={} bytes)", self.data.len());
        s
    }
}

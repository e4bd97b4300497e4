//! Host errors and their Python classes (defined in `emq/errors.py`).

use emq_plan::{Error as PlanError, ErrorKind};
use pyo3::prelude::*;
use pyo3::types::PyType;

#[derive(Debug)]
pub enum HostError {
    Layout(String),
    Argument(String),
    Contention(String),
    Connection(String),
    Timeout(String),
    Scripting(String),
    Duplicate(String),
    Server(String),
}

impl From<PlanError> for HostError {
    fn from(e: PlanError) -> Self {
        match e.kind {
            ErrorKind::Layout => HostError::Layout(e.message),
            ErrorKind::Argument => HostError::Argument(e.message),
            ErrorKind::Conflict => HostError::Contention(e.message),
            ErrorKind::Duplicate => HostError::Duplicate(e.message),
            ErrorKind::Server => HostError::Server(e.message),
        }
    }
}

impl From<HostError> for PyErr {
    fn from(e: HostError) -> PyErr {
        let (class, msg) = match e {
            HostError::Layout(m) => ("LayoutError", m),
            HostError::Argument(m) => ("ArgumentError", m),
            HostError::Contention(m) => ("ContentionError", m),
            HostError::Connection(m) => ("ConnectionError", m),
            HostError::Timeout(m) => ("TimeoutError", m),
            HostError::Scripting(m) => ("ScriptingError", m),
            HostError::Duplicate(m) => ("DuplicateJobError", m),
            HostError::Server(m) => ("ServerError", m),
        };
        Python::attach(|py| {
            match py.import("emq.errors").and_then(|m| m.getattr(class)).and_then(|c| Ok(c.cast_into::<PyType>()?)) {
                Ok(ty) => PyErr::from_type(ty, msg),
                Err(err) => err,
            }
        })
    }
}

pub type HostResult<T> = Result<T, HostError>;

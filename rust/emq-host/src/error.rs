//! Host errors and their Python classes (defined in `emq/errors.py`, looked up
//! once). A server's error reply is classed by its code (`classify`), so the
//! caller reads what happened from the class: never from an `EXECABORT`.

use emq_plan::{Error as PlanError, ErrorKind};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

#[derive(Debug)]
pub enum HostError {
    Layout(String),
    Argument(String),
    Contention(String),
    Connection(String),
    Timeout(String),
    /// The call's write was sent and its reply was lost: it may or may not have run.
    OutcomeUnknown(String),
    Scripting(String),
    Duplicate(String),
    /// `NOAUTH`, `WRONGPASS`: the server refused (or wants) credentials.
    Authentication(String),
    /// `NOPERM`: this user may not run a command or touch a key.
    Permission(String),
    /// `READONLY`: a replica.
    ReadOnly(String),
    /// `OOM`: `maxmemory` reached under `noeviction`.
    OutOfMemory(String),
    /// `MOVED`, `ASK`: the queue's slot is served by another node.
    Redirect(String),
    /// `LOADING`, `BUSY`, `MASTERDOWN`, `TRYAGAIN`, `CLUSTERDOWN`, …: try again later.
    Unavailable(String),
    Server(String),
    /// A cluster that kept redirecting a call (a slot migrating, a failover)
    /// past its budget (`cluster::Router::run`).
    Cluster(String),
    /// `backend="module"` on a server that has not loaded emq's module.
    NoModule(String),
    /// `emq.connect(wait_replicas=N)`: the call's writes were applied, but fewer
    /// than N replicas acknowledged them in time (`Conn::replicated`).
    NotReplicated(String),
}

impl HostError {
    /// What it says, whatever its class.
    pub fn message(&self) -> &str {
        match self {
            HostError::Layout(m)
            | HostError::Argument(m)
            | HostError::Contention(m)
            | HostError::Connection(m)
            | HostError::Timeout(m)
            | HostError::OutcomeUnknown(m)
            | HostError::Scripting(m)
            | HostError::Duplicate(m)
            | HostError::Authentication(m)
            | HostError::Permission(m)
            | HostError::ReadOnly(m)
            | HostError::OutOfMemory(m)
            | HostError::Redirect(m)
            | HostError::Unavailable(m)
            | HostError::Server(m)
            | HostError::Cluster(m)
            | HostError::NoModule(m)
            | HostError::NotReplicated(m) => m,
        }
    }

    /// The error an error reply stands for. `code` is its first word.
    pub fn classify(verb: &str, code: &str, message: &str) -> HostError {
        let m = format!("{verb}: {message}");
        match code {
            "NOAUTH" | "WRONGPASS" => HostError::Authentication(m),
            "NOPERM" => HostError::Permission(m),
            "READONLY" => HostError::ReadOnly(m),
            "OOM" => HostError::OutOfMemory(m),
            "MOVED" | "ASK" => HostError::Redirect(m),
            "WRONGTYPE" => HostError::Layout(m),
            "LOADING" | "BUSY" | "MASTERDOWN" | "TRYAGAIN" | "CLUSTERDOWN" | "NOREPLICAS" | "MISCONF" => HostError::Unavailable(m),
            _ => HostError::Server(m),
        }
    }

    /// The error a Lua script's or the module's error reply stands for: their
    /// own codes (`EMQLAYOUT`, `EMQARG`, the module's `EMQDUP`) as the plan's errors, any other as
    /// `classify` gives it.
    pub fn scripted(verb: &str, code: &str, message: &str) -> HostError {
        match code {
            "EMQLAYOUT" => HostError::Layout(message.trim_start_matches("EMQLAYOUT ").to_string()),
            "EMQARG" => HostError::Argument(message.trim_start_matches("EMQARG ").to_string()),
            "EMQDUP" => HostError::Duplicate(message.trim_start_matches("EMQDUP ").to_string()),
            _ => HostError::classify(verb, code, message),
        }
    }

    /// Whether the connection must not be used again: a replica may be promoted,
    /// or the name may now resolve to the new primary.
    pub fn drops_connection(&self) -> bool {
        matches!(self, HostError::ReadOnly(_) | HostError::Authentication(_))
    }
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

/// The classes of `emq.errors`, in `HostError`'s order, imported once.
const CLASSES: [&str; 18] = [
    "LayoutError",
    "ArgumentError",
    "ContentionError",
    "ConnectionError",
    "TimeoutError",
    "OutcomeUnknownError",
    "ScriptingError",
    "DuplicateJobError",
    "AuthenticationError",
    "PermissionError",
    "ReadOnlyError",
    "OutOfMemoryError",
    "RedirectError",
    "UnavailableError",
    "ServerError",
    "ClusterError",
    "ModuleMissingError",
    "NotReplicatedError",
];

static TYPES: PyOnceLock<Vec<Py<PyType>>> = PyOnceLock::new();

fn class(py: Python<'_>, i: usize) -> PyResult<Bound<'_, PyType>> {
    let types = TYPES.get_or_try_init(py, || {
        let m = py.import("emq.errors")?;
        CLASSES.iter().map(|c| Ok(m.getattr(*c)?.cast_into::<PyType>()?.unbind())).collect::<PyResult<Vec<_>>>()
    })?;
    Ok(types[i].bind(py).clone())
}

impl From<HostError> for PyErr {
    fn from(e: HostError) -> PyErr {
        let (i, msg) = match e {
            HostError::Layout(m) => (0, m),
            HostError::Argument(m) => (1, m),
            HostError::Contention(m) => (2, m),
            HostError::Connection(m) => (3, m),
            HostError::Timeout(m) => (4, m),
            HostError::OutcomeUnknown(m) => (5, m),
            HostError::Scripting(m) => (6, m),
            HostError::Duplicate(m) => (7, m),
            HostError::Authentication(m) => (8, m),
            HostError::Permission(m) => (9, m),
            HostError::ReadOnly(m) => (10, m),
            HostError::OutOfMemory(m) => (11, m),
            HostError::Redirect(m) => (12, m),
            HostError::Unavailable(m) => (13, m),
            HostError::Server(m) => (14, m),
            HostError::Cluster(m) => (15, m),
            HostError::NoModule(m) => (16, m),
            HostError::NotReplicated(m) => (17, m),
        };
        Python::attach(|py| match class(py, i) {
            Ok(ty) => PyErr::from_type(ty, msg),
            Err(err) => err,
        })
    }
}

pub type HostResult<T> = Result<T, HostError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_code() {
        let c = |code: &str| HostError::classify("EMQ.ADD", code, &format!("{code} something"));
        assert!(matches!(c("READONLY"), HostError::ReadOnly(m) if m == "EMQ.ADD: READONLY something"));
        assert!(matches!(c("OOM"), HostError::OutOfMemory(_)));
        assert!(matches!(c("NOPERM"), HostError::Permission(_)));
        assert!(matches!(c("NOAUTH"), HostError::Authentication(_)));
        assert!(matches!(c("WRONGPASS"), HostError::Authentication(_)));
        assert!(matches!(c("MOVED"), HostError::Redirect(_)));
        assert!(matches!(c("ASK"), HostError::Redirect(_)));
        assert!(matches!(c("WRONGTYPE"), HostError::Layout(_)));
        assert!(matches!(c("LOADING"), HostError::Unavailable(_)));
        assert!(matches!(c("EXECABORT"), HostError::Server(_)));
        assert!(matches!(c("ERR"), HostError::Server(_)));
    }
}

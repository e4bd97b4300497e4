//! Host errors and their Python classes (defined in `emq/errors.py`, looked up
//! once). A server's error reply is classed by its code (`classify`), so the
//! caller reads what happened from the class: never from an `EXECABORT`. Each
//! message names the call the user made (`Queue.add: …`), a plan's refusal too
//! (`ForCall`).

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

    /// The error a Lua script's or the module's error reply stands for, naming
    /// `call` (the call the user made) where the reply names its wire verb
    /// (`EMQARG EMQ.ADD: …`): their own codes (`EMQLAYOUT`, `EMQARG`, the
    /// module's `EMQDUP`) as the plan's errors, any other as `classify` gives it.
    pub fn scripted(call: &str, code: &str, message: &str) -> HostError {
        let named = || {
            let detail = message.strip_prefix(code).unwrap_or(message).trim_start();
            let detail = match detail.split_once(": ") {
                Some((verb, rest)) if verb.starts_with("EMQ.") && !verb.contains(' ') => rest,
                _ => detail,
            };
            format!("{call}: {detail}")
        };
        match code {
            "EMQLAYOUT" => HostError::Layout(named()),
            "EMQARG" => HostError::Argument(named()),
            "EMQDUP" => HostError::Duplicate(named()),
            _ => HostError::classify(call, code, message),
        }
    }

    /// A plan's refusal as the plan words it (naming its own verb): for a call
    /// that sent the plan's wire form itself (`emq.wire`).
    pub fn plan(e: PlanError) -> HostError {
        let m = e.message;
        match e.kind {
            ErrorKind::Layout => HostError::Layout(m),
            ErrorKind::Argument => HostError::Argument(m),
            ErrorKind::Conflict => HostError::Contention(m),
            ErrorKind::Duplicate => HostError::Duplicate(m),
            ErrorKind::Server => HostError::Server(m),
        }
    }

    /// The same error, its message led by `call` (for a connection's errors,
    /// which name its address: `emq.connect: redis://…: …`).
    pub fn prefixed(self, call: &str) -> HostError {
        self.map_message(|m| format!("{call}: {m}"))
    }

    fn map_message(self, f: impl FnOnce(String) -> String) -> HostError {
        match self {
            HostError::Layout(m) => HostError::Layout(f(m)),
            HostError::Argument(m) => HostError::Argument(f(m)),
            HostError::Contention(m) => HostError::Contention(f(m)),
            HostError::Connection(m) => HostError::Connection(f(m)),
            HostError::Timeout(m) => HostError::Timeout(f(m)),
            HostError::OutcomeUnknown(m) => HostError::OutcomeUnknown(f(m)),
            HostError::Scripting(m) => HostError::Scripting(f(m)),
            HostError::Duplicate(m) => HostError::Duplicate(f(m)),
            HostError::Authentication(m) => HostError::Authentication(f(m)),
            HostError::Permission(m) => HostError::Permission(f(m)),
            HostError::ReadOnly(m) => HostError::ReadOnly(f(m)),
            HostError::OutOfMemory(m) => HostError::OutOfMemory(f(m)),
            HostError::Redirect(m) => HostError::Redirect(f(m)),
            HostError::Unavailable(m) => HostError::Unavailable(f(m)),
            HostError::Server(m) => HostError::Server(f(m)),
            HostError::Cluster(m) => HostError::Cluster(f(m)),
            HostError::NoModule(m) => HostError::NoModule(f(m)),
            HostError::NotReplicated(m) => HostError::NotReplicated(f(m)),
        }
    }

    /// Whether the connection must not be used again: a replica may be promoted,
    /// or the name may now resolve to the new primary.
    pub fn drops_connection(&self) -> bool {
        matches!(self, HostError::ReadOnly(_) | HostError::Authentication(_))
    }
}

/// A plan's result, its refusal naming the call the user made
/// (`emq_plan::Error::for_call`): every conversation a call drives says so.
pub trait ForCall<T> {
    fn for_call(self, call: &str) -> HostResult<T>;
}

impl<T> ForCall<T> for emq_plan::error::Result<T> {
    fn for_call(self, call: &str) -> HostResult<T> {
        self.map_err(|e| HostError::plan(e.for_call(call)))
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

"""The errors emq raises (SPEC §10). Every message names the verb and what is wrong.

What happened is told by the class, never by the text: a transaction the server
discarded (`EXECABORT`) is raised as the error of the command that made it
discard it (`READONLY`, `OOM`, `NOPERM`, `MOVED`, …).

    EmqError
    ├── ArgumentError (also ValueError)   bad input; nothing read or written
    ├── LayoutError                       a key of the wrong type; nothing written
    ├── DuplicateJobError                 another job has this id; nothing written
    ├── ContentionError                   EXEC kept being aborted; nothing written
    ├── ScriptingError                    the Lua backend may not run scripts
    ├── ModuleMissingError                the module backend: the server has no emq module
    ├── PermissionError (also builtins.PermissionError)   NOPERM: an ACL denies a command or key
    ├── ConnectionError (also builtins.ConnectionError)   the server could not be reached, or the connection broke
    │   ├── TimeoutError (also builtins.TimeoutError)     no reply within the timeout; nothing was written
    │   ├── OutcomeUnknownError           the write was sent, its reply was lost: it may have run
    │   └── AuthenticationError           credentials refused or missing (WRONGPASS, NOAUTH)
    ├── ServerError                       any other error reply
    │   ├── ReadOnlyError                 READONLY: a replica
    │   ├── OutOfMemoryError              OOM: maxmemory reached with noeviction
    │   ├── RedirectError                 MOVED / ASK: another node serves the queue's slot
    │   ├── UnavailableError              LOADING, BUSY, MASTERDOWN, TRYAGAIN, CLUSTERDOWN: try later
    │   ├── ClusterError                  a cluster kept redirecting a call past its budget
    │   └── NotReplicatedError            written, but fewer replicas than wait_replicas acknowledged it
    ├── PermanentJobError                 a job no retry can mend (docs/tasks.md, "Failures")
    │   ├── CorruptCallError (also ValueError)    the job's data is not a task call emq can read
    │   ├── UnknownTaskError (also LookupError)   the call names a task the app does not have
    │   └── ResultError (also ValueError)         the task's return value cannot be stored
    │       └── ResultTooLargeError               its JSON is over the limit (512 KiB)
    ├── TaskError                         a waited-for job ended dead or cancelled (`Handle.result`)
    ├── ResultTimeoutError (also builtins.TimeoutError)   `Handle.result`'s timeout passed first
    ├── JobNotFoundError (also LookupError)   `Handle.result` of a job never added, or no longer kept
    └── TaskTimeout (also builtins.TimeoutError)   raised in a task that ran past its `timeout`

Apart from these, `MissingExtraError` (a `ModuleNotFoundError`) says that a part
of emq needs an optional dependency that is not installed, and names the extra
that installs it (`pip install 'emq[server]'`).
"""

import builtins


class EmqError(Exception):
    """Base of every emq error."""


class LayoutError(EmqError):
    """A key of the wrong type, or a wire-form key list that is not the queue's layout."""


class ArgumentError(EmqError, ValueError):
    """An argument with a bad value; nothing was read or written."""


class ContentionError(EmqError):
    """A call gave up after its EXEC kept being aborted; nothing was written."""


class ConnectionError(EmqError, builtins.ConnectionError):
    """The server could not be reached, or the connection broke before the call's
    write was sent: nothing was written."""


class TimeoutError(ConnectionError, builtins.TimeoutError):
    """The server did not answer a read within the read (or connect) timeout,
    before the call's write was sent: nothing was written."""


class OutcomeUnknownError(ConnectionError):
    """The call's write (its `EXEC`, or its script) was sent whole, and then the
    connection broke or the reply did not come within the read timeout: the write
    may or may not have run. Retrying an `add` that gave its ids is safe: an
    identical add that landed returns its ids, another job with the id is a
    `DuplicateJobError`."""


class AuthenticationError(ConnectionError):
    """The server refused the credentials, or wants some (`WRONGPASS`, `NOAUTH`):
    no retry mends it."""


class ScriptingError(EmqError):
    """The Lua backend cannot run: scripting is not allowed for this user."""


class ModuleMissingError(EmqError):
    """The module backend cannot run: the server has not loaded emq's module
    (`EMQ.PROMOTE` is an unknown command there). README, "The server module"."""


class DuplicateJobError(EmqError):
    """An add named a job id that another job has; nothing was written."""


class PermissionError(EmqError, builtins.PermissionError):
    """`NOPERM`: this user may not run a command the call needs, or touch its keys."""


class ServerError(EmqError):
    """Any other error reply from the server."""


class ReadOnlyError(ServerError):
    """`READONLY`: the server is a replica; nothing was written. The connection is
    dropped, so the next call connects again (to a primary, after a failover)."""


class OutOfMemoryError(ServerError):
    """`OOM`: the server is at `maxmemory` and evicts nothing; nothing was written."""


class RedirectError(ServerError):
    """`MOVED` or `ASK`: another cluster node serves the queue's slot; nothing was written."""


class UnavailableError(ServerError):
    """The server cannot serve the call now (`LOADING`, `BUSY`, `MASTERDOWN`,
    `TRYAGAIN`, `CLUSTERDOWN`, …): nothing was written; try again later."""


class ClusterError(ServerError):
    """A cluster kept redirecting a call (`ASK`, `TRYAGAIN`, `CLUSTERDOWN`: a slot
    migrating, a failover) for longer than the client's read timeout; the message
    names the verb and the queue's slot. Nothing was written (SPEC §11)."""


class NotReplicatedError(ServerError):
    """`emq.connect(wait_replicas=N)`: the call's writes were applied on the node
    that serves the queue, but fewer than N replicas acknowledged them within
    `wait_timeout` (or whether they did is unknown: the message says which). A
    failover now may lose them. Not retried: the call did what it did."""


class PermanentJobError(EmqError):
    """A job that no retry can mend: the call cannot be read, names no task of
    the app, or its result cannot be stored. The task runner raises it, and a
    handler or a task may raise it (or a subclass) too. It should make the job
    dead at once; until the core's fail can do so while attempts are left,
    `emq.Worker` retries a corrupt call or an unknown task at once (each claim
    fails it again, running nothing: dead within milliseconds) and any other
    as a failure."""


class CorruptCallError(PermanentJobError, ValueError):
    """A task job's data is not a call emq can read: not UTF-8 JSON, not an
    object, a field of the wrong type, a format version this emq does not read,
    or arguments that do not fit the task's parameters and annotations. The
    message says which, and never repeats the data."""


class UnknownTaskError(PermanentJobError, LookupError):
    """A task call names a task that the app running it does not have."""


class ResultError(PermanentJobError, ValueError):
    """A task returned a value that emq cannot write as JSON (the message names
    the task and the value's type, never the value)."""


class ResultTooLargeError(ResultError):
    """A task's return value, as JSON, is over the limit a row keeps (512 KiB):
    a row is read whole by a status read and by the dashboard."""


class TaskError(EmqError):
    """The job a `Handle.result` waited for ended dead (its last attempt
    failed) or cancelled. `type`: the exception's class as its worker wrote it
    (`module.QualName`; `"cancelled"` for a cancel, `"stalled"` for a job whose
    leases kept running out); `message`: its message; `traceback`: the
    traceback text its worker wrote (None where none was: a cancel, a stall);
    `state`: `"dead"` or `"cancelled"`; `job_id`: the job."""

    def __init__(self, job_id: str, state: str, type: str, message: str, traceback: str | None):
        super().__init__(f"job {job_id} is {state}: {message}" if type in ("", message) else f"job {job_id} is {state}: {type}: {message}")
        self.job_id = job_id
        self.state = state
        self.type = type
        self.message = message
        self.traceback = traceback

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.job_id, self.state, self.type, self.message, self.traceback))


class ResultTimeoutError(EmqError, builtins.TimeoutError):
    """`Handle.result(timeout=)`: the job came to no outcome within the
    timeout. Nothing changed: the job runs on, and a later wait may get it."""


class JobNotFoundError(EmqError, LookupError):
    """`Handle.result` of a job its queue has no row for: never added, or no
    longer kept (its retention ran out)."""


class TaskTimeout(EmqError, builtins.TimeoutError):
    """Raised in a task that ran past its `timeout=` (`@app.task(timeout=…)`):
    an async task is cancelled and its job fails with this error; a sync task
    gets it raised in its thread between two bytecodes (never inside a C call:
    docs/tasks.md, "Timeouts"). The job is retried by its policy."""


class MissingExtraError(ModuleNotFoundError):
    """A part of emq needs an optional dependency that is not installed: the
    message names it and the extra that installs it (`emq[server]`, `emq[cli]`).
    Not an `EmqError`: nothing was read or written, and no server was asked."""

    def __init__(self, what: str, module: str, extra: str):
        super().__init__(f"{what} needs {module}, which is not installed: pip install 'emq[{extra}]'", name=module)
        self.extra = extra


def check_extra(error: ModuleNotFoundError, module: str, extra: str, what: str) -> None:
    """Raises `MissingExtraError` (from `error`) when `error` says that `module`
    (or a module of its package) is missing; else returns, and the caller
    re-raises `error` as it is (a dependency broken inside is not a missing extra)."""
    missing = error.name or ""
    if missing == module or missing.startswith(module + ".") or module.startswith(missing + "."):
        raise MissingExtraError(what, module, extra) from error


__all__ = [
    "ArgumentError",
    "JobNotFoundError",
    "ResultTimeoutError",
    "TaskError",
    "TaskTimeout",
    "AuthenticationError",
    "ConnectionError",
    "ContentionError",
    "CorruptCallError",
    "DuplicateJobError",
    "EmqError",
    "LayoutError",
    "MissingExtraError",
    "OutOfMemoryError",
    "OutcomeUnknownError",
    "PermanentJobError",
    "PermissionError",
    "ReadOnlyError",
    "RedirectError",
    "ResultError",
    "ResultTooLargeError",
    "ScriptingError",
    "ModuleMissingError",
    "NotReplicatedError",
    "ServerError",
    "TimeoutError",
    "UnavailableError",
    "UnknownTaskError",
]

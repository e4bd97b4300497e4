"""emq: a job queue on Redis or Valkey, run by a Rust core in your process.

    import emq

    app = emq.App()                 # EMQ_URL, else the per-user development server

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    add(1, 2)                       # a plain call, here
    handle = add.enqueue(1, 2)      # a job: the call, as JSON, on the queue "default"
    # and in another terminal: emq worker tasks:app

The task layer (`emq.App`, `emq.Task`, `emq.Handle`, `emq.Context`; the
module `emq.tasks`) stands on the queue itself: `emq.Queue(client, name)` adds,
claims, completes and fails jobs of raw data, `emq.Worker(queue, handler)` runs
a handler for them, and `emq.promote` and `emq.stalled_check` are the two sweeps
that move time (SPEC §5, §6). `emq.connect(url)` makes a connection; the errors
are in `emq.errors`, every one an `emq.EmqError`. Maintenance tools (a queue's
cluster slot, the sweeps' wire forms) are in `emq.tools`. `emq.queues` and
`emq.workers` read the registry of the queues used and the workers alive.
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._core import Client, Job
from .answers import (
    ActionOutcome,
    CancelOutcome,
    CancelRequests,
    CurrentJob,
    FailOutcome,
    LaneControl,
    MinuteCounts,
    QueueCounts,
    Retention,
    ScheduleInfo,
    StalledOutcome,
    UniqueAdd,
    WorkerInfo,
)
from .client import connect
from .errors import (
    ArgumentError,
    AuthenticationError,
    ClusterError,
    ConnectionError,
    ContentionError,
    CorruptCallError,
    DuplicateJobError,
    EmqError,
    JobNotFoundError,
    LayoutError,
    MissingExtraError,
    ModuleMissingError,
    NotReplicatedError,
    OutcomeUnknownError,
    OutOfMemoryError,
    PermanentJobError,
    PermissionError,
    ReadOnlyError,
    RedirectError,
    ResultError,
    ResultTimeoutError,
    ResultTooLargeError,
    ScriptingError,
    ServerError,
    TaskError,
    TaskTimeout,
    TimeoutError,
    UnavailableError,
    UnknownTaskError,
)
from .queue import JobPage, Queue
from .registry import queues, workers
from .sweeps import promote, stalled_check
from .tasks import App, Context, ContextTask, Handle, JobState, JobStatus, Task, TaskOptions
from .tools import queue_slot, wire  # noqa: F401  (emq.tools' since; the tests and older code import them from emq)
from .worker import Stalled, Worker

try:
    # The one version number lives in the Cargo workspace (Cargo.toml); the wheel's
    # metadata carries it. A tree imported without being installed has none.
    __version__ = _metadata.version("emq")
except _metadata.PackageNotFoundError:  # pragma: no cover
    __version__ = "0+unknown"

__all__ = [
    # the task layer
    "App",
    "Context",
    "ContextTask",
    "Handle",
    "JobState",
    "JobStatus",
    "Task",
    "TaskOptions",
    # the queue
    "Client",
    "Job",
    "Queue",
    "Stalled",
    "Worker",
    "connect",
    "promote",
    "stalled_check",
    # the registry
    "queues",
    "workers",
    # answers
    "ActionOutcome",
    "CurrentJob",
    "CancelOutcome",
    "CancelRequests",
    "FailOutcome",
    "JobPage",
    "LaneControl",
    "MinuteCounts",
    "QueueCounts",
    "Retention",
    "ScheduleInfo",
    "StalledOutcome",
    "WorkerInfo",
    "UniqueAdd",
    # errors
    "ArgumentError",
    "AuthenticationError",
    "ClusterError",
    "ConnectionError",
    "ContentionError",
    "CorruptCallError",
    "DuplicateJobError",
    "EmqError",
    "JobNotFoundError",
    "LayoutError",
    "MissingExtraError",
    "ModuleMissingError",
    "NotReplicatedError",
    "OutOfMemoryError",
    "OutcomeUnknownError",
    "PermanentJobError",
    "PermissionError",
    "ReadOnlyError",
    "RedirectError",
    "ResultError",
    "ResultTimeoutError",
    "ResultTooLargeError",
    "ScriptingError",
    "ServerError",
    "TaskError",
    "TaskTimeout",
    "TimeoutError",
    "UnavailableError",
    "UnknownTaskError",
]

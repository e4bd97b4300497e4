"""emq: the sweeps of a Redis/Valkey job queue, run in-process by a Rust core.

from emq import connect, promote, stalled_check

client = connect()                    # EMQ_URL, else an embedded Valkey
promote(client, "orders")             # due jobs: schedule -> pending / lanes
recovered, dead = stalled_check(client, "orders")  # expired leases: back to pending, or dead
"""

from __future__ import annotations

from importlib import metadata as _metadata

from ._core import Client, Job, queue_slot
from .answers import CancelOutcome, CancelRequests, FailOutcome, QueueCounts, Retention, StalledOutcome, UniqueAdd
from .client import connect
from .errors import (
    ArgumentError,
    AuthenticationError,
    ClusterError,
    ConnectionError,
    ContentionError,
    DuplicateJobError,
    EmqError,
    LayoutError,
    MissingExtraError,
    ModuleMissingError,
    NotReplicatedError,
    OutcomeUnknownError,
    OutOfMemoryError,
    PermissionError,
    ReadOnlyError,
    RedirectError,
    ScriptingError,
    ServerError,
    TimeoutError,
    UnavailableError,
)
from .queue import Queue
from .sweeps import promote, stalled_check, wire
from .worker import Stalled, Worker

try:
    # The one version number lives in the Cargo workspace (Cargo.toml); the wheel's
    # metadata carries it. A tree imported without being installed has none.
    __version__ = _metadata.version("emq")
except _metadata.PackageNotFoundError:  # pragma: no cover
    __version__ = "0+unknown"

__all__ = [
    "ArgumentError",
    "AuthenticationError",
    "CancelOutcome",
    "CancelRequests",
    "Client",
    "ConnectionError",
    "ContentionError",
    "DuplicateJobError",
    "EmqError",
    "FailOutcome",
    "Job",
    "LayoutError",
    "MissingExtraError",
    "NotReplicatedError",
    "OutOfMemoryError",
    "OutcomeUnknownError",
    "PermissionError",
    "Queue",
    "QueueCounts",
    "ReadOnlyError",
    "RedirectError",
    "Retention",
    "ScriptingError",
    "ModuleMissingError",
    "ServerError",
    "Stalled",
    "StalledOutcome",
    "TimeoutError",
    "UnavailableError",
    "UniqueAdd",
    "ClusterError",
    "Worker",
    "connect",
    "promote",
    "queue_slot",
    "stalled_check",
    "wire",
]

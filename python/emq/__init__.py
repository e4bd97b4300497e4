"""emq: the sweeps of a Redis/Valkey job queue, run in-process by a Rust core.

    from emq import connect, promote, stalled_check

    client = connect()                    # EMQ_URL, else an embedded Valkey
    promote(client, "orders")             # due jobs: schedule -> pending / lanes
    stalled_check(client, "orders")       # expired leases: back to pending, or dead
"""

from __future__ import annotations

from ._core import Client
from .client import connect
from .errors import (
    ArgumentError,
    AuthenticationError,
    ConnectionError,
    ContentionError,
    DuplicateJobError,
    EmqError,
    LayoutError,
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
from .queue import Job, Queue
from .sweeps import promote, stalled_check, wire
from .worker import Stalled, Worker

__version__ = "0.1.0"

__all__ = [
    "ArgumentError",
    "AuthenticationError",
    "Client",
    "ConnectionError",
    "ContentionError",
    "DuplicateJobError",
    "EmqError",
    "Job",
    "LayoutError",
    "OutOfMemoryError",
    "OutcomeUnknownError",
    "PermissionError",
    "Queue",
    "ReadOnlyError",
    "RedirectError",
    "ScriptingError",
    "ServerError",
    "Stalled",
    "TimeoutError",
    "UnavailableError",
    "Worker",
    "connect",
    "promote",
    "stalled_check",
    "wire",
]

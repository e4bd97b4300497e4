"""emq: the sweeps of a Redis/Valkey job queue, run in-process by a Rust core.

    from emq import connect, promote, stalled_check

    client = connect()                    # EMQ_URL, else an embedded Valkey
    promote(client, "orders")             # due jobs: schedule -> pending / lanes
    stalled_check(client, "orders")       # expired leases: back to pending, or dead
"""

from __future__ import annotations

from ._core import Client
from .errors import (
    ArgumentError,
    ConnectionError,
    ContentionError,
    DuplicateJobError,
    EmqError,
    LayoutError,
    ScriptingError,
    ServerError,
    TimeoutError,
)
from .queue import Job, Queue
from .sweeps import promote, stalled_check, wire

__version__ = "0.1.0"


def connect(
    url: str | None = None,
    *,
    connect_timeout: float = 5.0,
    read_timeout: float | None = 30.0,
) -> Client:
    """A connection owned by the Rust core.

    `url` is `redis://[user:password@]host:port/db` or `rediss://…` (TLS); with no
    URL, `EMQ_URL` when set, else a private valkey-server started on 127.0.0.1
    (stopped when the process exits). Timeouts are in seconds; `read_timeout=None`
    waits as long as the server takes.
    """
    if url is None:
        from .embedded import default_url

        url = default_url()
    if not isinstance(url, str):
        raise ArgumentError(f"emq.connect: url must be a str, not {type(url).__name__}")
    return Client(url, connect_timeout=connect_timeout, read_timeout=read_timeout)


__all__ = [
    "ArgumentError",
    "Client",
    "ConnectionError",
    "ContentionError",
    "DuplicateJobError",
    "EmqError",
    "Job",
    "Queue",
    "LayoutError",
    "ScriptingError",
    "ServerError",
    "TimeoutError",
    "connect",
    "promote",
    "stalled_check",
    "wire",
]

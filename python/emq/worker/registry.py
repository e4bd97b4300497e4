"""Keeps a worker in the workers' registry (SPEC §17) while it runs: `emq workers` and the dashboard list it.

A `Heartbeat` writes what the worker is (host, pid, queues, concurrency,
started, version) and what it has done and runs (done, failed, current) every
`PERIOD_S`, on its own thread and its own connection, kept for three periods
from the server's clock: a worker killed without a word drops out of every
listing within `TTL_S` of its last beat. A clean stop removes it at once.

Why five seconds: a listing is at most that stale, and a thousand workers
beating cost the server two hundred small transactions a second. The
heartbeat never stops the worker: a failed beat is logged and tried again at
the next period.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from importlib import metadata

from .. import _core
from .._core import Client, Job
from ..queue import Queue
from .counters import Counters

log = logging.getLogger("emq.worker")

PERIOD_S = 5.0
"""How often a worker beats."""
TTL_S = 3 * PERIOD_S
"""How long after its last beat a worker counts as alive."""
MAX_CURRENT = 50
"""The most running jobs a beat lists (a worker of a thousand threads stays one small hash)."""


def _version() -> str:
    try:
        return metadata.version("emq")
    except metadata.PackageNotFoundError:  # a tree imported without being installed
        return "0+unknown"


class Heartbeat:
    """The registry's entry of one worker: `start()` beats once at once (so it is
    listed before it claims), then every `PERIOD_S`; `stop()` removes it."""

    def __init__(
        self,
        client: Client,
        queues: Sequence[Queue],
        concurrency: int,
        counters: Counters,
        running: Callable[[], list[tuple[Job, Queue]]],
        *,
        period: float | None = None,
    ):
        self.id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._client = client.sibling()
        self._queues = [q.name for q in queues]
        self._concurrency = concurrency
        self._counters = counters
        self._running = running
        self._period = PERIOD_S if period is None else period  # read now: a test may set a shorter one
        self._seen: dict[str, int] = {}  # claim token -> ms when a beat first saw the job
        self._started_ms = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            self._started_ms = self._client.time_ms()
            self._beat()
        except Exception as e:  # the worker runs without it; the loop tries again
            log.warning("worker %s: heartbeat failed: %s", self.id, e)
        self._thread = threading.Thread(target=self._loop, name="emq-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._period + 5)
        try:
            _core.worker_leave(self._client, self.id)
        except Exception as e:  # the entry expires by itself
            log.warning("worker %s: could not leave the registry: %s", self.id, e)
        self._client.close()

    def _loop(self) -> None:
        while not self._stop.wait(self._period):
            try:
                self._beat()
            except Exception as e:
                log.warning("worker %s: heartbeat failed: %s", self.id, e)

    def _fields(self) -> dict[str, str]:
        now_ms = int(time.time() * 1000)
        current: list[dict[str, object]] = []
        seen: dict[str, int] = {}
        for job, queue in self._running():
            token = job.token or job.id
            seen[token] = self._seen.get(token, now_ms)
            if len(current) < MAX_CURRENT:
                current.append({"queue": queue.name, "id": job.id, "since": seen[token]})
        self._seen = seen
        counts = self._counters.snapshot()
        return {
            "host": socket.gethostname(),
            "pid": str(os.getpid()),
            "queues": json.dumps(self._queues),
            "concurrency": str(self._concurrency),
            "started": str(self._started_ms),
            "done": str(counts["completed"]),
            "failed": str(counts["failed"]),
            "current": json.dumps(current),
            "version": _version(),
        }

    def _beat(self) -> None:
        _core.worker_beat(self._client, self.id, self._fields(), self._period * 3)


__all__ = ["MAX_CURRENT", "PERIOD_S", "TTL_S", "Heartbeat"]

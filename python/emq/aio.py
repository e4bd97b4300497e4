"""`emq.aio.Worker`: the same beat for `async def` handlers.

The beat and the job's calls run in threads (the Rust core releases the GIL
while it waits); handlers run as coroutines on the caller's event loop.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ._core import Job
from .errors import ArgumentError
from .queue import Queue
from .worker import Counters
from .worker import Worker as _SyncWorker


class Worker:
    """`await emq.aio.Worker(queue, handler, ...).run()`; `queue` (one, or a
    list) and the options are `emq.Worker`'s."""

    def __init__(self, queue: Queue | Sequence[Queue], handler: Callable[[Job], Awaitable[object]], **options: Any):
        if not asyncio.iscoroutinefunction(handler):
            raise ArgumentError("emq.aio.Worker: handler must be an async function")
        self.handler = handler
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inner = _SyncWorker(queue, self._call, **options)

    @property
    def counters(self) -> Counters:
        return self._inner.counters

    def _call(self, job: Job) -> object:
        # On a handler thread: run the coroutine on the loop and wait for it.
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(self.handler(job), self._loop).result()

    def stop(self) -> None:
        self._inner.stop()

    async def run(self) -> dict[str, int]:
        self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                self._loop.add_signal_handler(sig, self.stop)
            except (NotImplementedError, RuntimeError):  # not the main thread, or no signals here
                pass
        return await asyncio.to_thread(self._inner.run)

"""A handle on a job that a task call made: its id and queue, its result, its status and its cancel.

`task.enqueue(...)` and `app.enqueue(...)` return one; `app.handle(id, queue=...)`
makes one for a job enqueued elsewhere (another process, another language).
A wait for the result registers with the app's collector for the queue
(`emq.tasks.waiting`): a thousand waits cost one connection, and none polls.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Protocol

from .._core import Job
from ..errors import ResultTimeoutError
from ..queue import Duration, Queue
from .codec import decode_result
from .status import JobStatus, task_error
from .waiting import Collector, future_teller


class HandleOwner(Protocol):
    """What a handle needs of its app (`emq.App`): the queue objects that read
    and cancel its job, and the collector that its waits register with."""

    def queue(self, name: str | None = None) -> Queue: ...

    def _collector(self, queue: str) -> Collector: ...


def _timeout_s(verb: str, timeout: Duration | None) -> float | None:
    if timeout is None:
        return None
    from .._core import check_duration

    return check_duration(verb, "timeout", timeout, positive=False, maximum=None)


class Handle:
    """A job made by a task call: `h.id`, `h.queue`; `h.result()`,
    `await h.result_async()`, `h.status()` and `h.cancel()`.

    Handles compare equal when they name the same job (queue and id); a handle
    holds no connection, and may be made again from its id at any time."""

    __slots__ = ("id", "queue", "task", "_app", "_returns", "_registered")

    def __init__(self, id: str, queue: str, *, app: HandleOwner, task: str | None = None, returns: Any = Any, registered: bool = False):
        self.id = id
        """The job's id."""
        self.queue = queue
        """The name of the job's queue."""
        self.task = task
        """The task's name when the handle came from a task of this app (its result
        is read by the task's return annotation), else None (the plain JSON value)."""
        self._app = app
        self._returns = returns
        # Whether the add registered the app's collector's inbox with the job: its
        # waits then send nothing while the outcome is still expected.
        self._registered = registered

    def __repr__(self) -> str:
        task = f" {self.task}" if self.task else ""
        return f"<emq.Handle{task} {self.id!r} on {self.queue!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and (self.queue, self.id) == (other.queue, other.id)

    def __hash__(self) -> int:
        return hash((self.queue, self.id))

    # -- the result -------------------------------------------------------------------

    def result(self, timeout: Duration | None = None) -> Any:
        """The task's return value once the job is done, waiting up to `timeout`
        (seconds or a `timedelta`; None: as long as it takes), read by the task's
        return annotation (a handle made by `app.handle` gives the plain JSON
        value). Raises `emq.TaskError` (its `.type`, `.message`, `.traceback`)
        once the job is dead or cancelled (an attempt that will be retried is not
        an outcome), `emq.ResultTimeoutError` (a `TimeoutError`) when the timeout
        passes first, and `emq.JobNotFoundError` for a job with no row (never
        added, or no longer kept). Waiting polls nothing: the call that settles
        the job tells the app's collector in the same transaction."""
        timeout_s = _timeout_s("Handle.result", timeout)
        got = threading.Event()
        answer: list[Any] = [None, None]

        def tell(row: Job | None, error: BaseException | None) -> None:
            answer[0], answer[1] = row, error
            got.set()

        collector = self._app._collector(self.queue)
        w = collector.wait(self.id, tell, registered=self._registered)
        if not got.wait(timeout_s):
            collector.forget(w)
            if not w.resolve(None, None):  # resolved just now: take that answer
                got.wait()
            else:
                raise ResultTimeoutError(f"Handle.result: job {self.id} came to no outcome within {timeout_s:g} s")
        return self._outcome(answer[0], answer[1])

    async def result_async(self, timeout: Duration | None = None) -> Any:
        """`result` for asyncio: awaits the outcome without blocking the loop (the
        registration and the wait run on the collector's threads; a thousand
        concurrent awaits share its one connection)."""
        timeout_s = _timeout_s("Handle.result_async", timeout)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Job | None] = loop.create_future()
        collector = self._app._collector(self.queue)
        w = collector.wait(self.id, future_teller(loop, future), registered=self._registered)
        try:
            row = await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            collector.forget(w)
            raise ResultTimeoutError(f"Handle.result_async: job {self.id} came to no outcome within {timeout_s:g} s") from None
        except BaseException:
            collector.forget(w)
            raise
        return self._outcome(row, None)

    def _outcome(self, row: Job | None, error: BaseException | None) -> Any:
        if error is not None:
            raise error
        assert row is not None
        if row.state == "done":
            return None if row.result is None else decode_result(self.task or self.id, row.result, self._returns)
        raise task_error(row)

    # -- the row ------------------------------------------------------------------------

    def status(self) -> JobStatus:
        """The job's row as an `emq.JobStatus`: its state (`emq.JobState`, with
        `UNKNOWN` for a job that has no row: never added, or no longer kept),
        attempts, progress, result (read by the task's return annotation),
        error, and when it was added, due, started and finished (server clock,
        UTC). One read of one row."""
        row = self._app.queue(self.queue).status([self.id])[0]
        if row is None:
            return JobStatus.unknown(self.id, self.queue)
        result = None
        if row.state == "done" and row.result is not None:
            result = decode_result(self.task or self.id, row.result, self._returns)
        return JobStatus.of_row(self.queue, row, result)

    def cancel(self) -> bool:
        """Cancels the job. Not yet running (scheduled, ready, in a lane): it
        leaves its queue and its row says cancelled, in one transaction, and it
        never runs: True. Running: it is asked to stop (True too): its worker
        sees the request within a beat, cancels an async task (a sync task
        reads `ctx.cancelled`), and when that run ends, however it ends, the
        job is cancelled, never retried. False: it had already come to an outcome (done, dead,
        cancelled) or has no row; nothing changed. `Queue.cancel` says which of
        these it was (`emq.CancelOutcome`)."""
        outcome = self._app.queue(self.queue).cancel(self.id)
        return outcome.value in ("cancelled", "stopping")


__all__ = ["Handle", "HandleOwner"]

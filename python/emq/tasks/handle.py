"""A handle on a job that a task call made: its id and queue, and (in the next
pass) its result, its status and its cancel.

`task.enqueue(...)` and `app.enqueue(...)` return one; `app.handle(id, queue=...)`
makes one for a job enqueued elsewhere (another process, another language).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..queue import Duration, Queue

NOT_MERGED = "the core's result calls are not merged yet"


class HandleOwner(Protocol):
    """What a handle needs of its app (`emq.App`): the queue objects that read
    and cancel its job."""

    def queue(self, name: str | None = None) -> Queue: ...


class Handle:
    """A job made by a task call: `h.id`, `h.queue`; `h.result()`, `h.status()`
    and `h.cancel()` once the core's result calls are merged.

    Handles compare equal when they name the same job (queue and id); a handle
    holds no connection, and may be made again from its id at any time."""

    __slots__ = ("id", "queue", "task", "_app", "_returns")

    def __init__(self, id: str, queue: str, *, app: HandleOwner, task: str | None = None, returns: Any = Any):
        self.id = id
        """The job's id."""
        self.queue = queue
        """The name of the job's queue."""
        self.task = task
        """The task's name when the handle came from a task of this app (its result
        is read by the task's return annotation), else None (the plain JSON value)."""
        self._app = app
        self._returns = returns

    def __repr__(self) -> str:
        task = f" {self.task}" if self.task else ""
        return f"<emq.Handle{task} {self.id!r} on {self.queue!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and (self.queue, self.id) == (other.queue, other.id)

    def __hash__(self) -> int:
        return hash((self.queue, self.id))

    def result(self, timeout: Duration | None = None) -> Any:
        """The task's return value once the job is done, waiting up to `timeout`
        (None: as long as it takes), read by the task's return annotation (a handle
        made by `app.handle` gives the plain JSON value). Raises `emq.TaskError`
        (its `.type`, `.message`, `.traceback`) once the job is dead or cancelled,
        and a `TimeoutError` when the timeout passes first. Waiting polls nothing:
        the worker that settles the job tells the waiter, in the same transaction.

        Not available yet: it raises `NotImplementedError` until the core's
        result calls are merged, and will be filled in then."""
        raise NotImplementedError(f"Handle.result: {NOT_MERGED}")

    async def result_async(self, timeout: Duration | None = None) -> Any:
        """`result` for asyncio: awaits the outcome without blocking the loop.

        Not available yet: it raises `NotImplementedError` until the core's
        result calls are merged, and will be filled in then."""
        raise NotImplementedError(f"Handle.result_async: {NOT_MERGED}")

    def status(self) -> Any:
        """The job's row as an `emq.JobStatus`: its state (`emq.JobState`, with
        `UNKNOWN` for a job no longer kept and `CANCELLED`), attempts, progress,
        result, error, and when it was added, due, started and finished (server
        clock, UTC). One read of one row.

        Not available yet: it raises `NotImplementedError` until the core's
        status call is merged, and will be filled in then."""
        raise NotImplementedError(f"Handle.status: {NOT_MERGED}")

    def cancel(self) -> bool:
        """Cancels the job: one not yet running leaves its queue and is never run;
        one running is asked to stop (its worker sees it within a beat). True if
        this call cancelled it or asked it to stop; False if it had already
        finished or is no longer kept.

        Not available yet: it raises `NotImplementedError` until the core's
        cancel call is merged, and will be filled in then."""
        raise NotImplementedError(f"Handle.cancel: {NOT_MERGED}")


__all__ = ["Handle", "HandleOwner"]

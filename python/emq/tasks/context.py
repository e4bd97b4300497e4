"""What a running task knows of its job: `ctx.job_id`, `ctx.attempt`, `ctx.queue`,
`ctx.task`, and what it may do with it: `ctx.progress(x)` writes how far it has
got to the job's row, `ctx.cancelled` says whether someone asked it to stop. A
task that wants it takes it as its first parameter, annotated `emq.Context`; a
call never carries it (the worker makes it from the claimed job).

    @app.task
    def charge(ctx: emq.Context, order: int) -> None:
        log.info("charging %s, attempt %d of job %s", order, ctx.attempt, ctx.job_id)
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Any, get_args, get_origin

from .._core import Job
from ..errors import ArgumentError

if TYPE_CHECKING:
    from ..queue import Queue


@dataclass(frozen=True)
class Context:
    """The job a task runs for. `attempt` counts from 1 (the claim that runs it).

    A plain local call of a task that takes a context passes one itself:
    `charge(emq.Context(job_id="test-1", attempt=1, queue="default", task="charge"), 7)`.
    """

    job_id: str
    """The job's id."""
    attempt: int
    """Which claim of the job this is: 1 for the first run, 2 for the first retry."""
    queue: str
    """The queue the job was claimed from."""
    task: str
    """The task's registered name."""
    job: Job | None = field(default=None, repr=False, compare=False)
    """The claimed job (with its lease token), when a worker runs the task."""

    _queue: Queue | None = field(default=None, repr=False, compare=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def progress(self, value: float | int | str | dict[str, Any] | list[Any] | None) -> bool:
        """Writes the job's progress (a number, or a small JSON value: at most
        64 KiB as JSON) to its row, while this run still holds the job (token
        checked, as a lease extend is): True if it was written, False if the
        run lost its lease, or the context is a local call's (no job). One
        round trip: from an async task, `await ctx.progress_async(x)` keeps
        the loop free."""
        if self._queue is None or self.job is None:
            return False
        from .codec import Unwritable, dumps, to_json

        try:
            data = dumps(to_json(value))
        except Unwritable as e:
            raise ArgumentError(f"Context.progress: the value{e.where} {e.what}") from None
        return self._queue.progress(self.job, data)

    async def progress_async(self, value: float | int | str | dict[str, Any] | list[Any] | None) -> bool:
        """`progress` from an async task, its round trip on a thread of the loop's executor."""
        return await asyncio.get_running_loop().run_in_executor(None, self.progress, value)

    @property
    def cancelled(self) -> bool:
        """True once someone asked this job to stop (`Handle.cancel` of a running
        job): the worker learns of it within a beat. An async task is cancelled
        too (`asyncio.CancelledError` at its next await); a sync task reads this
        between steps and returns or raises. However the run ends, the job is
        then cancelled, never retried."""
        return self._stop.is_set()


# The names an annotation left as text (`from __future__ import annotations`) may
# give the class, when the module's names do not resolve yet at registration.
_NAMES = {"Context", "emq.Context", "emq.tasks.Context", "emq.tasks.context.Context"}


def takes_context(fn: Callable[..., Any], hints: dict[str, Any] | None) -> bool:
    """Whether `fn`'s first parameter is annotated `emq.Context` (`hints`: its
    resolved annotations, or None where they do not resolve yet)."""
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].kind not in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
        return False
    first = params[0]
    annotation = hints.get(first.name, inspect.Parameter.empty) if hints is not None else first.annotation
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type):
        return issubclass(annotation, Context)
    return isinstance(annotation, str) and annotation.strip("'\"") in _NAMES


__all__ = ["Context", "takes_context"]

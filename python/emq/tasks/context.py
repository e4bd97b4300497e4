"""What a running task knows of its job: `ctx.job_id`, `ctx.attempt`, `ctx.queue`,
`ctx.task`. A task that wants it takes it as its first parameter, annotated
`emq.Context`; a call never carries it (the worker makes it from the claimed job).

    @app.task
    def charge(ctx: emq.Context, order: int) -> None:
        log.info("charging %s, attempt %d of job %s", order, ctx.attempt, ctx.job_id)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args, get_origin

from .._core import Job

NOT_MERGED = "the core's progress and cancel calls are not merged yet"


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

    def progress(self, value: float | int | str | dict[str, Any] | list[Any]) -> bool:
        """Writes the job's progress (a number, or a small JSON value) to its row,
        while this run still holds the job; True if it was written.

        Not available yet: it raises `NotImplementedError` until the core's
        progress call is merged, and will be filled in then."""
        raise NotImplementedError(f"Context.progress: {NOT_MERGED}")

    @property
    def cancelled(self) -> bool:
        """True once someone asked this job to stop (`Handle.cancel` of a running
        job); a sync task reads it between steps, an async one is cancelled.

        Not available yet: it raises `NotImplementedError` until the core's
        cancel call is merged, and will be filled in then."""
        raise NotImplementedError(f"Context.cancelled: {NOT_MERGED}")


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

"""The task runner: the handler that reads a job's call, finds its task in the app,
and runs it; a worker of the app calls it for each job.

    emq.Worker(app.queue("default"), emq.tasks.TaskRunner(app, queue="default")).run()

`emq worker MODULE:APP` does this. A call that cannot be read raises
`emq.CorruptCallError`, one naming a task the app does not have
`emq.UnknownTaskError`, and a result that cannot be stored `emq.ResultError`:
each a `PermanentJobError`, which the worker will make dead at once once it runs
tasks itself (today it fails them as any error, so they are retried while attempts
are left). An `async def` task runs on an event loop that the runner keeps on a
thread of its own, one loop for all its async tasks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any

from .._core import Job
from ..errors import CorruptCallError, UnknownTaskError
from .app import App
from .codec import decode_call, encode_result
from .context import Context
from .task import Task


class TaskRunner:
    """Runs the job's task: `runner(job)` (a handler for `emq.Worker`), or
    `runner.run(job, queue)`. Returns the result as the JSON bytes that the row's
    `result` will hold.

    `queue`: the queue the runner's jobs come from, which their `Context` says;
    None, as for a worker of several queues until the worker says each job's
    queue itself: the task's own queue."""

    def __init__(self, app: App, *, queue: str | None = None):
        if not isinstance(app, App):
            raise TypeError(f"emq.tasks.TaskRunner: app must be an emq.App, not {type(app).__name__}")
        self.app = app
        self.queue = queue
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def __call__(self, job: Job) -> bytes:
        return self.run(job, self.queue)

    def task_of(self, job: Job) -> tuple[Task[Any, Any], tuple[Any, ...], dict[str, Any]]:
        """The job's task and its arguments, converted by the task's annotations;
        `CorruptCallError` or `UnknownTaskError`, naming the job, when there is none."""
        try:
            call = decode_call(job.data)
        except CorruptCallError as e:
            raise CorruptCallError(f"job {job.id}: {e}") from None
        task = self.app.tasks.get(call.task)
        if task is None:
            known = sorted(self.app.tasks)
            listed = ", ".join(known[:10]) + (", …" if len(known) > 10 else "")
            raise UnknownTaskError(f"job {job.id}: the app has no task named {call.task!r} (it has {len(known)}: {listed or 'none'})")
        try:
            args, kwargs = task.parameters.read(task.name, call)
        except CorruptCallError as e:
            raise CorruptCallError(f"job {job.id}: {e}") from None
        return task, args, kwargs

    def run(self, job: Job, queue: str | None = None) -> bytes:
        """Runs the job's task here and returns its result as JSON bytes; what the
        task raises, it raises."""
        task, args, kwargs = self.task_of(job)
        if task.takes_context:
            ctx = Context(job_id=job.id, attempt=job.attempts, queue=queue or task.queue, task=task.name, job=job)
            args = (ctx, *args)
        result = task.fn(*args, **kwargs)
        if asyncio.iscoroutine(result):
            result = self._await(result)
        return encode_result(task.name, result)

    def _await(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._running_loop()).result()

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="emq-tasks-loop", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def close(self) -> None:
        """Stops the runner's event loop (if an async task started one)."""
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


__all__ = ["TaskRunner"]

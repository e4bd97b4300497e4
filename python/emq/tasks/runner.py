"""The task runner: the handler that reads a job's call, finds its task in the app,
and runs it; a worker of the app runs it for each job.

    runner = emq.tasks.TaskRunner(app)
    emq.Worker(app.queue("default"), runner).run()

`emq worker MODULE:APP` does this. As the worker starts (`worker_starting`),
the app's declared schedules are written. For the worker (`start_job`), a run
ends as an `emq.worker.Done` with the result as JSON, or an
`emq.worker.Failed`: a call that cannot be read (`emq.CorruptCallError`), one
naming a task the app does not have (`emq.UnknownTaskError`), a result that
cannot be stored (`emq.ResultError`, `emq.ResultTooLargeError`) and an
`emq.PermanentJobError` the task raises are permanent failures, dead at once
(failed with `retry=False`: the first two run nothing); what else a task
raises fails the job (retried after the task's `retry_in`, else by the
backoff). A sync task runs on the worker's handler thread; an `async def` task
runs on the runner's one event loop (a thread of its own), and its job holds a
slot of the worker, not a thread, while it runs.

Timeouts (`@app.task(timeout=…)`): an async task is cancelled at its timeout; a
sync task gets `emq.TaskTimeout` raised in its thread (CPython's
`PyThreadState_SetAsyncExc`): it fires between two bytecodes, so a task inside
one long C call (`time.sleep(60)`, a blocking read) sees it only once the call
returns. Cancels: `cancel_job` (the worker calls it for a job asked to stop)
sets the task's `ctx.cancelled` and cancels an async task.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import heapq
import itertools
import threading
import time
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any

from .._core import Job
from ..errors import CorruptCallError, PermanentJobError, TaskTimeout, UnknownTaskError
from ..queue import Duration, Queue
from ..worker.outcomes import Done, Failed
from .app import App
from .codec import decode_call, encode_result
from .context import Context
from .task import Task


class _Run:
    """One run of a task: what a cancel and a timeout need to reach it."""

    __slots__ = ("stop", "task", "thread_id", "running", "timed_out", "lock")

    def __init__(self) -> None:
        self.stop = threading.Event()  # asked to stop: `ctx.cancelled`
        self.task: asyncio.Task[Any] | None = None  # an async run's task
        self.thread_id: int | None = None  # a sync run's thread
        self.running = False  # a sync run's function has not returned
        self.timed_out = False
        self.lock = threading.Lock()


class _Watchdog:
    """The one thread that raises `TaskTimeout` in the sync runs past their timeout."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Run]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, run: _Run, timeout: float) -> None:
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + timeout, next(self._seq), run))
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="emq-task-timeouts", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                now = time.monotonic()
                while self._heap and (self._heap[0][0] <= now or not self._heap[0][2].running):
                    _, _, run = heapq.heappop(self._heap)
                    if run.running:
                        _raise_in(run)
                self._cond.wait(None if not self._heap else self._heap[0][0] - now)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(5)


def _seconds(d: Duration) -> float:
    return d.total_seconds() if isinstance(d, timedelta) else float(d)


def _from_the_task(e: Exception) -> Exception:
    """`e` with its traceback starting in the task (the runner's own frame left
    out): what the row's traceback and the log show."""
    tb = e.__traceback__
    if tb is not None and tb.tb_next is not None and tb.tb_frame.f_code.co_filename == __file__:
        return e.with_traceback(tb.tb_next)
    return e


def _raise_in(run: _Run) -> None:
    """Raises `TaskTimeout` in a sync run's thread, if its function still runs."""
    with run.lock:
        if run.running and run.thread_id is not None and not run.timed_out:
            run.timed_out = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(run.thread_id), ctypes.py_object(TaskTimeout))


def _end_sync(run: _Run) -> None:
    """The run's function returned: no timeout is raised in its thread from now on."""
    with run.lock:
        run.running = False
        if run.timed_out and run.thread_id is not None:
            # Raised but maybe not yet delivered (it fires at the next bytecode): withdrawn.
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(run.thread_id), None)


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
        self._runs: dict[str | None, _Run] = {}  # by the job's lease token
        self._watchdog = _Watchdog()

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
        """Runs the job's task here, now (no timeout, no worker), and returns its
        result as JSON bytes; what the task raises, it raises."""
        task, args, kwargs = self.task_of(job)
        if task.takes_context:
            ctx = Context(job_id=job.id, attempt=job.attempts, queue=queue or task.queue, task=task.name, job=job)
            args = (ctx, *args)
        result = task.fn(*args, **kwargs)
        if asyncio.iscoroutine(result):
            result = asyncio.run_coroutine_threadsafe(result, self._running_loop()).result()
        return encode_result(task.name, result)

    # -- for the worker -----------------------------------------------------------------

    def start_job(self, job: Job, work: Queue) -> Done | Failed | concurrent.futures.Future[Done | Failed]:
        """Runs the job's task for a worker that claimed it from `work` (on the
        worker's connection: `ctx.progress` writes there): a sync task here, to
        its end; an async task on the runner's loop, answered as a future."""
        try:
            task, args, kwargs = self.task_of(job)
        except PermanentJobError as e:
            return Failed(e, dead=True)
        run = _Run()
        if task.takes_context:
            ctx = Context(job_id=job.id, attempt=job.attempts, queue=work.name, task=task.name, job=job, _queue=work, _stop=run.stop)
            args = (ctx, *args)
        with self._lock:
            self._runs[job.token] = run
        if task.is_async:
            future = asyncio.run_coroutine_threadsafe(self._run_async(task, run, task.fn(*args, **kwargs)), self._running_loop())
            future.add_done_callback(lambda _: self._forget(job))
            return future
        try:
            out: Done | Failed | concurrent.futures.Future[Done | Failed] = self._run_sync(task, run, args, kwargs)
        finally:
            self._forget(job)
        return out

    def cancel_job(self, job: Job) -> None:
        """The job was asked to stop: its `ctx.cancelled` is True from now, and an
        async run is cancelled."""
        with self._lock:
            run = self._runs.get(job.token)
        if run is None:
            return
        run.stop.set()
        loop = self._loop
        if run.task is not None and loop is not None:
            loop.call_soon_threadsafe(run.task.cancel)

    def _forget(self, job: Job) -> None:
        with self._lock:
            self._runs.pop(job.token, None)

    def _run_sync(self, task: Task[Any, Any], run: _Run, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        timeout = task.defaults.timeout
        retry_in = task.defaults.retry_in
        try:
            run.thread_id = threading.get_ident()
            run.running = True
            if timeout is not None:
                self._watchdog.arm(run, _seconds(timeout))
            try:
                value = task.fn(*args, **kwargs)
            finally:
                _end_sync(run)
        except TaskTimeout as e:  # the watchdog's (it may fire just after the function returned), or the task's own
            return Failed(self._timeout_error(task, run, e), retry_in=retry_in)
        except Exception as e:
            return Failed(_from_the_task(e), retry_in=retry_in)
        if asyncio.iscoroutine(value):  # a plain function that returned a coroutine
            return asyncio.run_coroutine_threadsafe(self._run_async(task, run, value), self._running_loop())
        return self._done(task, value)

    async def _run_async(self, task: Task[Any, Any], run: _Run, coro: Coroutine[Any, Any, Any]) -> Done | Failed:
        me = asyncio.current_task()
        assert me is not None
        run.task = me
        retry_in = task.defaults.retry_in
        timeout = task.defaults.timeout
        timer = None
        if timeout is not None:
            seconds = _seconds(timeout)

            def time_out() -> None:
                run.timed_out = True
                me.cancel()

            timer = asyncio.get_running_loop().call_later(seconds, time_out)
        try:
            if run.stop.is_set():  # asked to stop before it started
                coro.close()
                return Failed(asyncio.CancelledError("asked to stop"), cancelled=True)
            value = await coro
        except asyncio.CancelledError as e:
            if run.timed_out:
                return Failed(self._timeout_error(task, run, TaskTimeout()), retry_in=retry_in)
            if run.stop.is_set():
                return Failed(e, cancelled=True)
            raise  # the loop is closing: the job is left to recovery
        except Exception as e:
            return Failed(_from_the_task(e), retry_in=retry_in)
        finally:
            if timer is not None:
                timer.cancel()
        return self._done(task, value)

    @staticmethod
    def _timeout_error(task: Task[Any, Any], run: _Run, raised: TaskTimeout) -> TaskTimeout:
        if not run.timed_out or raised.args or task.defaults.timeout is None:  # the task's own TaskTimeout
            return raised
        seconds = _seconds(task.defaults.timeout)
        return TaskTimeout(f"{task.name} ran past its timeout of {seconds:g} s").with_traceback(raised.__traceback__)

    @staticmethod
    def _done(task: Task[Any, Any], value: Any) -> Done | Failed:
        try:
            return Done(encode_result(task.name, value))
        except PermanentJobError as e:  # a result that cannot be stored: no retry mends it
            return Failed(e, dead=True)

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="emq-tasks-loop", daemon=True)
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    def worker_starting(self, queues: Sequence[Queue]) -> None:
        """(Called by `emq.Worker.run` as it starts.) Writes the app's declared
        schedules on the worker's server, through its first queue's client and
        backend, so a worker made in code keeps the server's set the code's as
        `emq worker MODULE:APP` does."""
        first = queues[0]
        self.app._schedules.write_declared(lambda name: Queue(first.client, name, backend=first.backend))

    def close(self) -> None:
        """Stops the runner's event loop (if an async task started one) and its
        timeout thread."""
        self._watchdog.close()
        with self._lock:
            loop, thread = self._loop, self._loop_thread
            self._loop = self._loop_thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()


__all__ = ["TaskRunner"]

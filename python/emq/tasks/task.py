"""A task: a function registered with an app under a name, which a job calls.

`@app.task` makes one. Called, it runs the function here (`add(1, 2)`);
`add.enqueue(1, 2)` writes the call as a job instead (`emq.tasks.codec`'s
format) and returns a `Handle`; `add.options(delay=5).enqueue(1, 2)` does so
with options for that call.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from ..errors import ArgumentError
from ..queue import Queue
from .codec import Parameters, encode_call, task_name_problem
from .context import Context
from .handle import Handle
from .options import EnqueueOptions, Options, options_of
from .waiting import Collector

if TYPE_CHECKING:
    # Only the type checker reads it (the annotations are strings): emq needs no typing_extensions at run time.
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")


class TaskOwner(Protocol):
    """What a task needs of its app (`emq.App`): its default queue and the queue
    objects that add its jobs."""

    @property
    def default_queue(self) -> str: ...

    def queue(self, name: str | None = None) -> Queue: ...

    def _collector(self, queue: str) -> Collector: ...

    def _running_collector(self, queue: str) -> Collector | None: ...


def default_name(fn: Callable[..., Any]) -> str:
    """`module.qualname` of a function. A function of the script being run
    (`__main__`) is named by the module a worker imports it as: its spec's name
    under `python -m`, else the file's name without `.py`."""
    module = getattr(fn, "__module__", None) or "__main__"
    if module == "__main__":
        main = sys.modules.get("__main__")
        spec = getattr(main, "__spec__", None)
        if spec is not None and spec.name:
            module = spec.name
        elif getattr(main, "__file__", None):
            module = Path(main.__file__).stem  # type: ignore[union-attr, arg-type]
    return f"{module}.{getattr(fn, '__qualname__', getattr(fn, '__name__', 'task'))}"


def check_task_name(verb: str, name: object) -> str:
    if (problem := task_name_problem(name)) is not None:
        raise ArgumentError(f"{verb}: a task's name {problem}")
    assert isinstance(name, str)
    return name


class Task(Generic[P, R]):
    """A function registered with an app: `task(*args)` runs it here,
    `task.enqueue(*args)` makes a job that a worker of the app runs.

    Its options (`queue`, `max_attempts`, `retry_in`, `timeout`, `keep_result`,
    `priority`, `lane`) are the defaults of its jobs; `task.options(...)`
    overrides them for one call."""

    def __init__(self, fn: Callable[..., R], *, app: TaskOwner, name: str, options: Options, context: bool):
        functools.update_wrapper(self, fn)
        self.fn = fn
        """The function itself."""
        self.name = name
        """The name the task is registered as, and that its jobs' calls carry."""
        self.app = app
        """The app the task is registered with."""
        self.takes_context = context
        """Whether the function takes the job's `emq.Context` as its first parameter."""
        self.is_async = asyncio.iscoroutinefunction(fn)
        """Whether the function is an `async def`."""
        self.parameters = Parameters(fn, skip_first=context)
        """How its parameters read a call (`emq.tasks.codec.Parameters`)."""
        self._options = options

    @property
    def queue(self) -> str:
        """The queue its jobs go to (the app's default unless the task names one)."""
        return self._options.queue or self.app.default_queue

    @property
    def defaults(self) -> Options:
        """The task's options as given to `@app.task(...)` (None: not given)."""
        return self._options

    def __repr__(self) -> str:
        return f"<emq.Task {self.name!r} on queue {self.queue!r}>"

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        """Runs the function here, now, with these arguments (no job is made)."""
        return self.fn(*args, **kwargs)

    def encode(self, *args: P.args, **kwargs: P.kwargs) -> bytes:
        """The job data that `enqueue(*args, **kwargs)` writes: the call as UTF-8
        JSON (`emq.tasks.codec`); `emq.ArgumentError` as `enqueue` raises it."""
        return encode_call(self.name, args, kwargs, parameters=self.parameters, verb=f"{self.name}.enqueue")

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Handle:
        """Makes a job that calls the task with these arguments, on its queue, with
        its options; returns its `Handle`. The arguments must fit the function's
        parameters and be values emq writes as JSON (`emq.tasks.codec`): else
        `emq.ArgumentError` naming the task and the argument, and nothing is
        written."""
        return self._add(f"{self.name}.enqueue", self._options, args, kwargs)

    def options(self, **options: Unpack[EnqueueOptions]) -> TaskOptions[P]:
        """This task with options for one enqueue (each left out: the task's):
        `add.options(delay=5, id="order-7").enqueue(1, 2)`. Checked here
        (`emq.ArgumentError` naming the option).

        `delay` (seconds or a `timedelta`) or `at` (an aware `datetime`, or
        seconds since the epoch): when it is due. `id`: the job's id (an id
        that exists is refused: `emq.DuplicateJobError`). `lane`, `queue`,
        `max_attempts`: where it goes and how often it is tried.
        `unique_for` (seconds: a second enqueue of the same call within it is
        answered with the first job's handle, atomically across processes;
        with an `id`, an enqueue with that id is answered with the job that
        has it while its row is kept); `keep_result` (how long its row,
        and so its result, is kept once done or cancelled, in place of the
        queue's retention). `priority` (0 first, the default, to 9): a
        claim takes the lowest level first (SPEC §15)."""
        verb = f"{self.name}.options"
        given = options_of(verb, EnqueueOptions, options)
        return TaskOptions(self, self._options.merged(verb, given))

    def _add(self, verb: str, options: Options, args: Any, kwargs: Any) -> Handle:
        data = encode_call(self.name, args, kwargs, parameters=self.parameters, verb=verb)
        return add_job(self.app, verb, options, data, task=self.name, returns=self.parameters.hints().get("return", Any))


class ContextTask(Task[P, R]):
    """A task whose function takes the job's `emq.Context` first: a worker passes
    it, a call never carries it (`send.enqueue(to)` for `def send(ctx, to)`); a
    plain local call passes one itself (`send(ctx, to)`)."""

    # The local call takes the context the enqueue does not: the signatures differ on purpose.
    def __call__(self, ctx: Context, *args: P.args, **kwargs: P.kwargs) -> R:  # type: ignore[override]
        """Runs the function here, now, with this context and these arguments."""
        return self.fn(ctx, *args, **kwargs)


class TaskOptions(Generic[P]):
    """A task with options for one enqueue (`task.options(...)`): immutable;
    `.options(...)` makes another with more."""

    __slots__ = ("task", "given")

    def __init__(self, task: Task[P, Any], given: Options):
        self.task = task
        self.given = given
        """The options this enqueue uses: the task's, and those given over them."""

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.given.given().items())
        return f"<emq.TaskOptions {self.task.name!r} {shown}>"

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Handle:
        """`task.enqueue` with these options."""
        return self.task._add(f"{self.task.name}.enqueue", self.given, args, kwargs)

    def options(self, **options: Unpack[EnqueueOptions]) -> TaskOptions[P]:
        """These options with more over them (`Task.options`'s)."""
        verb = f"{self.task.name}.options"
        more = options_of(verb, EnqueueOptions, options)
        return TaskOptions(self.task, self.given.merged(verb, more))


def add_job(app: TaskOwner, verb: str, options: Options, data: bytes, *, task: str | None, returns: Any = Any) -> Handle:
    """Adds a job of `data` with `options` on its queue; its `Handle`. An argument
    the core refuses (an id, a lane) is raised naming `verb`, not `Queue.add`.
    With `unique_for`, the add is unique (`Queue.add_unique`) by the job's id
    when one is given, else by the call itself (its task and arguments): a
    second enqueue within the window is answered with the first job's handle.

    Once the app has waited for a result on the queue (its collector runs),
    the add registers the collector's inbox with the job in its own
    transaction: the handle's wait then sends nothing (`emq.tasks.waiting`)."""
    queue = app.queue(options.queue or app.default_queue)
    arguments = options.add_arguments()
    collector = app._running_collector(queue.name)
    token = collector.adding() if collector is not None else 0
    job_id: str | None = None
    created = False
    try:
        inbox = collector.inbox if collector is not None else None
        if options.unique_for is not None:
            key = options.id if options.id is not None else "call:" + hashlib.sha256(data).hexdigest()
            unique = queue.add_unique(data, unique_key=key, unique_for=options.unique_for, inbox=inbox, **arguments)
            job_id, created = unique.id, unique.created
        elif inbox is not None:
            job_id, created = queue.add_waited(data, inbox, **arguments)
        else:
            job_id = queue.add(data, **arguments)
    except ArgumentError as e:
        text = str(e)
        for prefix in ("Queue.add: ", "Queue.add_unique: ", "Queue.add_waited: "):
            text = text.removeprefix(prefix)
        raise ArgumentError(f"{verb}: {text}") from None
    finally:
        registered = collector.added(token, job_id if created else None) if collector is not None else False
    assert job_id is not None
    return Handle(job_id, queue.name, app=app, task=task, returns=returns, registered=registered)


__all__ = ["ContextTask", "Task", "TaskOptions", "TaskOwner", "add_job", "check_task_name", "default_name"]

"""The app: the tasks of one code base, registered by name, and the server their
jobs go to.

    app = emq.App()                       # EMQ_URL, else the development server
    @app.task
    def add(x: int, y: int) -> int:
        return x + y
    add.enqueue(1, 2)                     # a job on the queue "default"
    app.enqueue("tasks.add", 1, 2)        # the same, by name

A worker of the app (`emq worker tasks:app`) runs its tasks' jobs. The app
connects on its first call that needs the server, not when it is made, so a
module may make its app at import.
"""

from __future__ import annotations

import threading
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar, overload

from .._core import Client
from ..answers import ScheduleInfo
from ..errors import ArgumentError
from ..queue import Duration, JobBackend, Queue
from .codec import encode_call
from .context import Context, takes_context
from .handle import Handle
from .options import EnqueueOptions, Options, TaskDefaults, options_of, queue_name_problem
from .schedules import AppSchedules, Missed, Synced
from .task import ContextTask, Task, add_job, check_task_name, default_name
from .waiting import Collector

if TYPE_CHECKING:
    # Only the type checker reads it (the annotations are strings): emq needs no typing_extensions at run time.
    from typing_extensions import Unpack

P = ParamSpec("P")
R = TypeVar("R")


class TaskDecorator(Protocol):
    """What `@app.task(...)` with options returns: the decorator itself."""

    @overload
    def __call__(self, fn: Callable[Concatenate[Context, P], R], /) -> ContextTask[P, R]: ...
    @overload
    def __call__(self, fn: Callable[P, R], /) -> Task[P, R]: ...


class App:
    """The tasks of one code base and the server their jobs go to.

    `url`: the server (`emq.connect`'s URL); None: `EMQ_URL` when set, else the
    per-user development server (`emq server status`). `client`: an
    `emq.Client` to use instead of a URL. `queue`: the queue of tasks that name
    none, and of enqueues by a name the app has no task for. `backend`: the
    queues' backend (`emq.Queue`'s: `"plan"` or `"module"`).

    The app connects on first use (an enqueue, `app.client`), so a module may
    make it at import time; `close()` closes a connection it made.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        client: Client | None = None,
        queue: str = "default",
        backend: JobBackend = "plan",
    ):
        if url is not None and client is not None:
            raise ArgumentError("emq.App: give url or client, not both")
        if url is not None and not isinstance(url, str):
            raise ArgumentError(f"emq.App: url must be a str, not {type(url).__name__}")
        if client is not None and not isinstance(client, Client):
            raise ArgumentError(f"emq.App: client must be an emq.Client, not {type(client).__name__}")
        if (problem := queue_name_problem(queue)) is not None:
            raise ArgumentError(f"emq.App: queue {problem}")
        if backend not in ("plan", "module"):
            raise ArgumentError(f"emq.App: backend must be 'plan' or 'module', not {backend!r}")
        self.url = url
        """The URL the app was given (None: `EMQ_URL`, else the development server)."""
        self.backend: JobBackend = backend
        """The backend of the app's queues."""
        self._default_queue = queue
        self._client = client
        self._own_client = client is None
        self._tasks: dict[str, Task[Any, Any]] = {}
        self._queues: dict[str, Queue] = {}
        self._collectors: dict[str, Collector] = {}
        self._lock = threading.Lock()
        self._schedules = AppSchedules(self)

    def __repr__(self) -> str:
        return f"<emq.App {len(self._tasks)} tasks, queues {self.queues}>"

    # -- the server ---------------------------------------------------------------

    @property
    def default_queue(self) -> str:
        """The queue of tasks that name none."""
        return self._default_queue

    @property
    def client(self) -> Client:
        """The app's connection, made on first use."""
        with self._lock:
            if self._client is None:
                from ..client import connect

                self._client = connect(self.url)
            return self._client

    @property
    def connected(self) -> bool:
        """Whether the app has its connection yet (it makes it on first use)."""
        return self._client is not None

    def queue(self, name: str | None = None) -> Queue:
        """The `emq.Queue` of `name` (None: the default queue) on the app's server."""
        name = self._default_queue if name is None else name
        with self._lock:
            q = self._queues.get(name)
        if q is None:
            q = Queue(self.client, name, backend=self.backend)
            with self._lock:
                q = self._queues.setdefault(name, q)
        return q

    def _running_collector(self, queue: str) -> Collector | None:
        """The collector of `queue` if the app has one (it has waited for a result there)."""
        with self._lock:
            return self._collectors.get(queue)

    def _collector(self, queue: str) -> Collector:
        """The collector of the app's waits on `queue` (`emq.tasks.waiting`), started on first use."""
        with self._lock:
            c = self._collectors.get(queue)
        if c is None:
            q = self.queue(queue)
            with self._lock:
                c = self._collectors.get(queue)
                if c is None:
                    c = self._collectors[queue] = Collector(q)
        return c

    def close(self) -> None:
        """Ends the app's waits (each open `Handle.result` raises
        `emq.ConnectionError`), their collectors' threads and connections, at
        once; then closes the connection the app made (a client it was given
        stays open). The app connects again on its next call."""
        with self._lock:
            collectors, self._collectors = list(self._collectors.values()), {}
            unblocker = self._client
        for c in collectors:
            c.close(unblocker)
        with self._lock:
            client, self._client = self._client, (None if self._own_client else self._client)
            self._queues.clear()
        if client is not None and self._own_client:
            client.close()

    # -- tasks ----------------------------------------------------------------------

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]:
        """The registered tasks by name (a read-only view)."""
        return types.MappingProxyType(self._tasks)

    @property
    def queues(self) -> list[str]:
        """Every queue the app's tasks use, in the order they were first named (the
        default queue when it has no task): what `emq worker MODULE:APP` serves
        without `--queue`."""
        names = list(dict.fromkeys([*(t.queue for t in self._tasks.values()), *self._schedules.queues()]))
        return names or [self._default_queue]

    @overload
    def task(self, fn: Callable[Concatenate[Context, P], R], /) -> ContextTask[P, R]: ...
    @overload
    def task(self, fn: Callable[P, R], /) -> Task[P, R]: ...
    @overload
    def task(self, *, name: str | None = None, **options: Unpack[TaskDefaults]) -> TaskDecorator: ...

    def task(self, fn: Callable[..., Any] | None = None, *, name: str | None = None, **options: Unpack[TaskDefaults]) -> Any:
        """Registers a function as a task: `@app.task`, or `@app.task(...)` with
        options (each left out: the app's or the queue's default).

        `name`: what its jobs' calls carry (default: `module.qualname`; 1 to 200
        bytes of UTF-8, no control characters; registering a name twice is an
        error). `queue`, `max_attempts`, `lane`: where its jobs go and how
        often they are tried. `retry_in` (the wait before a retry, in place
        of the backoff), `timeout` (how long a run may take: past it the run
        fails with `emq.TaskTimeout` and is retried by its policy; docs/tasks.md,
        "Timeouts"), `keep_result` (how long a done or cancelled job's row, and
        so its result, is kept). `priority` (0 first, the default, to 9):
        a claim takes the lowest level first (SPEC §15).

        A function whose first parameter is annotated `emq.Context` gets its job's
        context there (the task is a `ContextTask`)."""
        defaults = options_of("emq.App.task", TaskDefaults, options)
        if name is not None:
            check_task_name("emq.App.task", name)

        def register(f: Callable[..., Any]) -> Task[Any, Any]:
            return self._register(f, name, defaults)

        return register if fn is None else register(fn)

    def _register(self, fn: Callable[..., Any], name: str | None, options: Options) -> Task[Any, Any]:
        if isinstance(fn, Task):
            raise ArgumentError(f"emq.App.task: {fn.name} is already a task")
        if not callable(fn):
            raise ArgumentError(f"emq.App.task: a task must be a function, not {type(fn).__name__}")
        name = check_task_name("emq.App.task", default_name(fn) if name is None else name)
        try:
            hints: dict[str, Any] | None = typing.get_type_hints(fn, include_extras=True)
        except Exception:  # names defined later in the module (resolved on first use), or not a function
            hints = None
        context = takes_context(fn, hints)
        task: Task[Any, Any] = (ContextTask if context else Task)(fn, app=self, name=name, options=options, context=context)
        with self._lock:
            if name in self._tasks:
                raise ArgumentError(f"emq.App.task: a task named {name!r} is already registered with this app")
            self._tasks[name] = task
        return task

    # -- enqueueing by name ------------------------------------------------------------

    def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Handle:
        """Makes a job that calls the task `name` with these arguments. A task of
        this app goes to its queue with its options (and its arguments are checked
        against its parameters, as `task.enqueue` does); any other name, a task of
        another code base, goes to the app's default queue with the arguments as
        given."""
        return self._enqueue("emq.App.enqueue", Options(), name, args, kwargs)

    def options(self, **options: Unpack[EnqueueOptions]) -> AppOptions:
        """Options for one enqueue by name: `app.options(queue="mail",
        delay=5).enqueue("mail.send", "a@b.c")`; the options are `Task.options`'s,
        and override the task's where the app has it."""
        return AppOptions(self, options_of("emq.App.options", EnqueueOptions, options))

    def _enqueue(self, verb: str, given: Options, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Handle:
        check_task_name(verb, name)
        task = self._tasks.get(name)
        if task is not None:
            return task._add(verb, task.defaults.merged(verb, given), args, kwargs)
        data = encode_call(name, args, kwargs, verb=verb)
        return add_job(self, verb, given, data, task=None)

    # -- schedules (emq.tasks.schedules) ------------------------------------------------

    def schedule(
        self,
        name: str,
        *,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str = "UTC",
        task: Task[Any, Any] | str | None = None,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        data: bytes | str | None = None,
        queue: str | None = None,
        lane: str | None = None,
        max_attempts: int | None = None,
        missed: Missed = "latest",
        max_missed: int | None = None,
        grace: Duration | None = None,
    ) -> bool:
        """Declares the periodic schedule `name` and writes it to the server now:
        each tick of `cron` (in the IANA zone `tz`) or of `every` (seconds or a
        timedelta) enqueues one job calling `task` with `args` and `kwargs` (or
        of raw `data`), on `queue` (default: the task's queue if this app has
        it, else the app's). `missed`: `latest` (one job for the ticks missed),
        `all` (one a tick, at most `max_missed`) or `skip` (none unless within
        `grace`). Whether the server's copy changed (`emq.tasks.schedules`)."""
        verb = "emq.App.schedule"
        declared = self._schedules.declare(
            verb, name, cron=cron, every=every, tz=tz, task=task, args=args, kwargs=kwargs, data=data,
            queue=queue, lane=lane, max_attempts=max_attempts, missed=missed, max_missed=max_missed, grace=grace,
        )  # fmt: skip
        return self._schedules.write(declared, verb)

    def cron(
        self,
        expression: str,
        *,
        tz: str = "UTC",
        name: str | None = None,
        args: tuple[Any, ...] | list[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        missed: Missed = "latest",
        max_missed: int | None = None,
        grace: Duration | None = None,
    ) -> Callable[[Any], Any]:
        """A decorator: `@app.cron("*/5 * * * *")` on a task (or a function,
        registered as a task) declares a schedule named after it (`name`: another
        name) that calls it at each tick. Written when a worker of the app starts
        (or by `sync_schedules`), not at import."""

        def declare(fn: Any) -> Any:
            task = fn if isinstance(fn, Task) else self.task(fn)
            self._schedules.declare(
                "emq.App.cron", name or task.name, cron=expression, every=None, tz=tz, task=task, args=args,
                kwargs=kwargs, data=None, queue=None, lane=None, max_attempts=None, missed=missed,
                max_missed=max_missed, grace=grace,
            )  # fmt: skip
            return task

        return declare

    def schedules(self) -> list[ScheduleInfo]:
        """The schedules on the server in the app's queues, by queue and name."""
        return self._schedules.listed(self.queues)

    def unschedule(self, name: str, *, queue: str | None = None) -> bool:
        """Removes the schedule from the server and from the app's declarations
        (False: the server had none). `queue`: its queue, when not the one it was
        declared on (or the app's default)."""
        removed = self._schedules.where(name, queue).unschedule(name)
        self._schedules.forget(name)
        return removed

    def pause_schedule(self, name: str, *, queue: str | None = None) -> bool:
        """Stops its ticks until `resume_schedule` (a worker's start keeps it paused)."""
        return self._schedules.where(name, queue).pause_schedule(name)

    def resume_schedule(self, name: str, *, queue: str | None = None) -> bool:
        """Ticks again from its next tick after now."""
        return self._schedules.where(name, queue).resume_schedule(name)

    def run_schedule_now(self, name: str, *, queue: str | None = None) -> Handle:
        """Enqueues one of its jobs now, its next tick left as it is."""
        q = self._schedules.where(name, queue)
        return Handle(q.run_schedule_now(name), q.name, app=self)

    def sync_schedules(self) -> Synced:
        """Writes every schedule the app declares, and removes from the app's
        queues the schedules it no longer declares."""
        return self._schedules.sync(self.queues)

    def handle(self, id: str, *, queue: str | None = None) -> Handle:
        """A handle on the job `id` of `queue` (None: the default queue), made
        elsewhere (another process, another language); its result is the plain
        JSON value."""
        if not isinstance(id, str) or not id:
            raise ArgumentError("emq.App.handle: id must be a non-empty str")
        queue = self._default_queue if queue is None else queue
        if (problem := queue_name_problem(queue)) is not None:
            raise ArgumentError(f"emq.App.handle: queue {problem}")
        return Handle(id, queue, app=self)


class AppOptions:
    """An app with options for one enqueue by name (`app.options(...)`): immutable."""

    __slots__ = ("app", "given")

    def __init__(self, app: App, given: Options):
        self.app = app
        self.given = given
        """The options given."""

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.given.given().items())
        return f"<emq.AppOptions {shown}>"

    def enqueue(self, name: str, /, *args: Any, **kwargs: Any) -> Handle:
        """`app.enqueue` with these options."""
        return self.app._enqueue("emq.App.enqueue", self.given, name, args, kwargs)


__all__ = ["App", "AppOptions", "TaskDecorator"]

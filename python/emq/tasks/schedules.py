"""An app's periodic schedules (SPEC §14): declared in code, kept on the server.

    app.schedule("nightly", cron="0 3 * * *", tz="Europe/Berlin", task="reports.nightly")
    app.schedule("flush", every=1, task=flush)          # seconds or a timedelta

    @app.cron("*/5 * * * *")                             # a schedule named after the task
    def poll() -> None: ...

A schedule lives on the server, in its queue (`emq.Queue.schedule`), so every
process sees the same ones and each tick enqueues exactly one job, whatever
number of workers run: its id is `schedule:<name>:<tick ms>`. Each tick's job is
an ordinary job of the task call (retries, results, the dashboard).

`app.schedule(...)` writes the schedule at once (it connects); `@app.cron`
only declares it. Every schedule the app declares is written again when a
worker of the app starts (`emq worker MODULE:APP`, or `emq.Worker` made in
code with the app's `TaskRunner`: the runner's `worker_starting`), so the
server's set is the code's: a definition already there is left as it is (its
next tick and the ticks it missed are kept), a changed one takes effect at
once, and a paused one stays paused. A schedule removed from the code stays on the server
until `app.unschedule(name)`, or `app.sync_schedules()`, which also removes
from the app's queues every schedule the app no longer declares.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from ..answers import ScheduleInfo
from ..errors import ArgumentError
from ..queue import Duration, Queue
from .codec import encode_call
from .task import Task, TaskOwner, check_task_name

log = logging.getLogger("emq.schedules")

Missed = Literal["latest", "all", "skip"]


@dataclass(frozen=True)
class Declared:
    """One schedule as the code declares it: Queue.schedule's arguments."""

    name: str
    queue: str
    cron: str | None
    every: Duration | None
    tz: str | None
    data: bytes
    lane: str | None
    max_attempts: int
    missed: Missed
    max_missed: int | None
    grace: Duration | None

    def write(self, queue: Queue) -> bool:
        """Writes it to `queue` (the server's copy): whether that changed anything."""
        return queue.schedule(
            self.name,
            cron=self.cron,
            every=self.every,
            tz=self.tz,
            data=self.data,
            lane=self.lane,
            max_attempts=self.max_attempts,
            missed=self.missed,
            max_missed=self.max_missed,
            grace=self.grace,
        )


@dataclass(frozen=True)
class Synced:
    """What `App.sync_schedules` did."""

    written: list[str]
    """The declared schedules whose definition it wrote (new or changed)."""
    removed: list[str]
    """The schedules of the app's queues that the app no longer declares."""


class ScheduleOwner(TaskOwner, Protocol):
    """What the schedules need of their app (`emq.App`): a task's, and its tasks."""

    @property
    def tasks(self) -> Mapping[str, Task[Any, Any]]: ...


class AppSchedules:
    """The schedules an app declares, and the calls on them (`App.schedule` and
    the rest: the app's methods call these)."""

    def __init__(self, app: ScheduleOwner):
        self._app = app
        self._declared: dict[str, Declared] = {}
        self._lock = threading.Lock()

    @property
    def declared(self) -> Mapping[str, Declared]:
        with self._lock:
            return dict(self._declared)

    def queues(self) -> list[str]:
        """The queues of the declared schedules, in the order first declared."""
        return list(dict.fromkeys(d.queue for d in self.declared.values()))

    def declare(
        self,
        verb: str,
        name: str,
        *,
        cron: str | None,
        every: Duration | None,
        tz: str | None,
        task: Task[Any, Any] | str | None,
        args: Sequence[Any],
        kwargs: Mapping[str, Any] | None,
        data: bytes | str | None,
        queue: str | None,
        lane: str | None,
        max_attempts: int | None,
        missed: Missed,
        max_missed: int | None,
        grace: Duration | None,
    ) -> Declared:
        """A schedule checked as far as the app can (its job's call; the core
        checks the rest when it is written) and kept as declared."""
        if not isinstance(name, str):
            raise ArgumentError(f"{verb}: name must be a str, not {type(name).__name__}")
        found = self._task(verb, task)
        if data is not None:
            if task is not None or args or kwargs:
                raise ArgumentError(f"{verb}: give task (with args and kwargs) or data, not both")
            payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        elif found is not None:
            payload = found.encode(*args, **(kwargs or {}))
        elif isinstance(task, str):
            payload = encode_call(task, tuple(args), dict(kwargs or {}), verb=verb)
        else:
            raise ArgumentError(f"{verb}: task (a task or a task's name) or data is required")
        defaults = found.defaults if found is not None else None
        declared = Declared(
            name=name,
            queue=queue or (found.queue if found is not None else self._app.default_queue),
            cron=cron,
            every=every,
            tz=tz,
            data=payload,
            lane=lane if lane is not None else (defaults.lane if defaults else None),
            max_attempts=max_attempts if max_attempts is not None else (defaults.max_attempts if defaults and defaults.max_attempts else 3),
            missed=missed,
            max_missed=max_missed,
            grace=grace,
        )
        with self._lock:
            self._declared[name] = declared
        return declared

    def _task(self, verb: str, task: Task[Any, Any] | str | None) -> Task[Any, Any] | None:
        """This app's task that `task` names, if any."""
        if isinstance(task, Task):
            if task.app is not self._app:
                raise ArgumentError(f"{verb}: task {task.name!r} is another app's")
            return task
        if isinstance(task, str):
            check_task_name(verb, task)
            return self._app.tasks.get(task)
        if task is not None:
            raise ArgumentError(f"{verb}: task must be a task or a task's name, not {type(task).__name__}")
        return None

    def write(self, declared: Declared, verb: str) -> bool:
        """Writes one declared schedule on the app's server (an argument the core
        refuses is raised naming `verb`); a refusal forgets the declaration."""
        try:
            return declared.write(self._app.queue(declared.queue))
        except ArgumentError as e:
            with self._lock:
                if self._declared.get(declared.name) is declared:
                    del self._declared[declared.name]
            raise ArgumentError(f"{verb}: {str(e).removeprefix('Queue.schedule: ')}") from None

    def write_declared(self, queues: Callable[[str], Queue]) -> list[str]:
        """Writes every declared schedule through `queues` (a worker's, on its
        connection): the names whose definition changed."""
        written = [d.name for d in self.declared.values() if d.write(queues(d.queue))]
        if written:
            log.info("schedules written: %s", ", ".join(written))
        return written

    def where(self, name: str, queue: str | None) -> Queue:
        """The queue of the schedule `name`: `queue`, else the one it was declared
        on, else the app's default queue."""
        if queue is None:
            d = self.declared.get(name)
            queue = d.queue if d is not None else self._app.default_queue
        return self._app.queue(queue)

    def forget(self, name: str) -> None:
        with self._lock:
            self._declared.pop(name, None)

    def listed(self, queues: Iterable[str]) -> list[ScheduleInfo]:
        """The schedules of `queues`, by queue then name."""
        out: list[ScheduleInfo] = []
        for q in dict.fromkeys(queues):
            out.extend(self._app.queue(q).schedules())
        return out

    def sync(self, queues: Iterable[str]) -> Synced:
        """Writes every declared schedule, then removes from `queues` (and the
        declared ones') every schedule not declared."""
        declared = self.declared
        written = self.write_declared(self._app.queue)
        removed: list[str] = []
        for info in self.listed([*queues, *(d.queue for d in declared.values())]):
            d = declared.get(info.name)
            if d is None or d.queue != info.queue:
                if self._app.queue(info.queue).unschedule(info.name):
                    removed.append(info.name)
        return Synced(written=written, removed=removed)


__all__ = ["AppSchedules", "Declared", "ScheduleOwner", "Synced"]

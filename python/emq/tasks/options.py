"""An enqueue's options: where a task's job goes, when it runs, and how it is
kept, checked when they are given (in `@app.task(...)`, `task.options(...)`,
`app.options(...)`), so that a bad one fails where it was written.

A task's options are its defaults; a call's options override them, one by one.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any, TypedDict

from .._core import MAX_ATTEMPTS, check_duration, check_integer
from ..errors import ArgumentError
from ..queue import Duration, Time

PRIORITIES = (0, 9)
"""The lowest and the highest priority (SPEC §15: 0 first, the default)."""


class JobOptions(TypedDict, total=False):
    """The options both a task and one enqueue may give: where its jobs go, how
    often they are tried and how long they are kept (None: not given)."""

    queue: str | None
    max_attempts: int | None
    keep_result: Duration | None
    priority: int | None
    lane: str | None


class EnqueueOptions(JobOptions, total=False):
    """The keyword arguments of `task.options(...)` and `app.options(...)`: one
    enqueue's (`Task.options` says what each does)."""

    delay: Duration | None
    at: Time | None
    id: str | None
    unique_for: Duration | None


class TaskDefaults(JobOptions, total=False):
    """The options of `@app.task(...)`, its jobs' defaults (`App.task` says what
    each does)."""

    retry_in: Duration | None
    timeout: Duration | None


def options_of(verb: str, accepted: Any, given: Mapping[str, Any]) -> Options:
    """The options a call `verb` was given as keywords (`**options` of the
    TypedDict `accepted`: `EnqueueOptions`, `TaskDefaults`), checked: a keyword
    `accepted` does not name is a `TypeError` naming `verb` and it, as Python
    raises for a keyword a signature lacks; a bad value, `Options.checked`'s
    `ArgumentError`."""
    names = accepted.__required_keys__ | accepted.__optional_keys__
    for name in given:
        if name not in names:
            raise TypeError(f"{verb}() got an unexpected keyword argument {name!r} (it takes {', '.join(sorted(names))})")
    return Options.checked(verb, **given)


@dataclass(frozen=True)
class Options:
    """Options as given; None: not given (the task's, else the queue's default).

    `queue`, `delay`, `at`, `id`, `lane`, `max_attempts`, `priority` and
    `keep_result` (as `keep`) go to `Queue.add`, `unique_for` makes it
    `Queue.add_unique`. `retry_in` and `timeout` are the task's, which the worker's
    task runner applies (the wait before a retry; how long a run may take)."""

    queue: str | None = None
    delay: Duration | None = None
    at: Time | None = None
    id: str | None = None
    lane: str | None = None
    max_attempts: int | None = None
    priority: int | None = None
    unique_for: Duration | None = None
    keep_result: Duration | None = None
    retry_in: Duration | None = None
    timeout: Duration | None = None

    @classmethod
    def checked(cls, verb: str, **given: Any) -> Options:
        """The options given (None: not given), each checked; `ArgumentError`
        naming `verb` and the option for a bad one."""
        for name, value in given.items():
            if value is not None:
                _CHECKS[name](verb, name, value)
        if given.get("delay") is not None and given.get("at") is not None:
            raise ArgumentError(f"{verb}: give delay or at, not both")
        return cls(**given)

    def merged(self, verb: str, over: Options) -> Options:
        """These options with those `over` gives in their place."""
        given = over.given()
        out = replace(self, **given)
        if out.delay is not None and out.at is not None:
            # A call's `at` replaces the task's `delay` and the other way round; both in one call are refused.
            out = replace(out, **({"delay": None} if "at" in given else {"at": None}))
        return out

    def given(self) -> dict[str, Any]:
        """The options given, by name."""
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def add_arguments(self) -> dict[str, Any]:
        """The keyword arguments of `Queue.add` that these options give (the others
        take `Queue.add`'s defaults)."""
        out: dict[str, Any] = {}
        for name in ("id", "delay", "at", "lane", "max_attempts", "priority"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.keep_result is not None:
            out["keep"] = self.keep_result
        return out


def queue_name_problem(name: object) -> str | None:
    """Why `name` cannot be a queue's name, or None (SPEC §1: 1 to 128 bytes of
    UTF-8, no `{`, `}`, control characters or whitespace; the core checks it
    again when the queue is made)."""
    if not isinstance(name, str):
        return f"must be a str, not {type(name).__name__}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "must be UTF-8"
    if not 1 <= size <= 128:
        return "must be 1 to 128 bytes"
    if any(c in "{}" or c.isspace() or unicodedata.category(c) == "Cc" for c in name):
        return "must have no '{', '}', control characters or whitespace"
    return None


def _queue(verb: str, name: str, value: Any) -> None:
    if (problem := queue_name_problem(value)) is not None:
        raise ArgumentError(f"{verb}: {name} {problem}")


def _text(verb: str, name: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise ArgumentError(f"{verb}: {name} must be a non-empty str, not {type(value).__name__}")


def _at(verb: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (datetime, int, float)):
        raise ArgumentError(f"{verb}: {name} must be a datetime or seconds since the epoch, not {type(value).__name__}")


def _duration(positive: bool) -> Any:
    def check(verb: str, name: str, value: Any) -> None:
        check_duration(verb, name, value, positive=positive, maximum=None)

    return check


def _integer(low: int, high: int) -> Any:
    def check(verb: str, name: str, value: Any) -> None:
        check_integer(verb, name, value, low, high)

    return check


_CHECKS = {
    "queue": _queue,
    "delay": _duration(positive=False),
    "at": _at,
    "id": _text,
    "lane": _text,
    "max_attempts": _integer(1, MAX_ATTEMPTS),
    "priority": _integer(*PRIORITIES),
    "unique_for": _duration(positive=True),
    "keep_result": _duration(positive=False),
    "retry_in": _duration(positive=False),
    "timeout": _duration(positive=True),
}

__all__ = ["PRIORITIES", "EnqueueOptions", "JobOptions", "Options", "TaskDefaults", "options_of", "queue_name_problem"]

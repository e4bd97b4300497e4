"""A job's status as a task's handle reads it: `JobState` and the frozen `JobStatus`.

`Handle.status()` reads the job's one row (`Queue.status`) and makes a
`JobStatus` of it: the state as an enum (`UNKNOWN` for a job that has no row:
never added, or no longer kept), the times as aware UTC datetimes on the
server's clock, the progress and the result read from their JSON.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from .._core import Job
from ..errors import TaskError


class JobState(str, enum.Enum):
    """Where a job is. A `str` too: each equals the row's `state` (`JobState.DONE == "done"`)."""

    SCHEDULED = "scheduled"
    """Waiting for its due time (a delay, an `at`, or a retry's backoff)."""
    PENDING = "pending"
    """Ready: waiting for a worker (in the queue's list or in its lane)."""
    ACTIVE = "active"
    """A worker runs it."""
    DONE = "done"
    """It completed: its result is kept as long as its row is."""
    DEAD = "dead"
    """Its last attempt failed (or it could not be run at all): its error is kept."""
    CANCELLED = "cancelled"
    """Cancelled before it ran, or stopped while it ran: never retried."""
    UNKNOWN = "unknown"
    """No row: never added, or no longer kept (its retention ran out)."""

    @property
    def ended(self) -> bool:
        """Whether it is an outcome: done, dead or cancelled."""
        return self in (JobState.DONE, JobState.DEAD, JobState.CANCELLED)


def _when(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _json_or_text(data: bytes | None) -> Any:
    """A progress value as the task wrote it: JSON where it is, else its text."""
    if data is None:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


@dataclass(frozen=True)
class JobStatus:
    """A job's row, read at one instant (`Handle.status()`). Times are aware
    UTC datetimes on the server's clock; None where the row has none yet."""

    id: str
    queue: str
    state: JobState
    attempts: int = 0
    """The claims so far: 1 while its first run runs."""
    max_attempts: int = 0
    progress: Any = None
    """What the task last wrote with `ctx.progress` (a number or a JSON value), or None."""
    result: Any = None
    """The result once done, read by the task's return annotation (a handle made by
    name: the JSON value); None until then."""
    error: str | None = None
    """The last failure's `Type: message` (or `cancelled`, `stalled`)."""
    error_type: str | None = None
    traceback: str | None = None
    lane: str | None = None
    added: datetime | None = None
    due: datetime | None = None
    """When it is (or was last) due: its delay's end, or its retry's."""
    started: datetime | None = None
    """When its last run started (its last claim)."""
    finished: datetime | None = None
    """When it came to its outcome."""
    cancel_requested: bool = False
    """It was asked to stop while it ran (`Handle.cancel`)."""
    priority: int = 0
    """Its priority level: 0 (first, the default) to 9."""

    @classmethod
    def unknown(cls, id: str, queue: str) -> JobStatus:
        return cls(id=id, queue=queue, state=JobState.UNKNOWN)

    @classmethod
    def of_row(cls, queue: str, row: Job, result: Any = None) -> JobStatus:
        """The status of a row read whole; `result` the decoded result (the caller
        reads it by the task's annotation)."""
        try:
            state = JobState(row.state or "unknown")
        except ValueError:  # a state a newer emq writes: shown as it stands would mislead, so unknown
            state = JobState.UNKNOWN
        return cls(
            id=row.id,
            queue=queue,
            state=state,
            attempts=row.attempts,
            max_attempts=row.max_attempts,
            progress=_json_or_text(row.progress),
            result=result,
            error=row.error,
            error_type=row.error_type,
            traceback=row.traceback,
            lane=row.lane,
            added=_when(row.created_ms),
            due=_when(row.due_ms),
            started=_when(row.started_ms),
            finished=_when(row.finished_ms),
            cancel_requested=row.cancel_requested,
            priority=row.priority or 0,
        )


def task_error(row: Job) -> TaskError:
    """The `TaskError` of a dead or cancelled row: its type, message and traceback
    as its worker wrote them."""
    state = row.state or "dead"
    error = row.error or state
    kind = row.error_type
    message = error
    if kind is None:
        # A cancel, a stall: the row's error is the whole message (`cancelled`, `stalled`).
        kind = "cancelled" if state == "cancelled" else error.split(":", 1)[0] if ": " in error else error
    else:
        short = kind.rsplit(".", 1)[-1]
        for prefix in (f"{kind}: ", f"{short}: "):
            if error.startswith(prefix):
                message = error[len(prefix) :]
                break
    return TaskError(row.id, state, kind, message, row.traceback)


__all__ = ["JobState", "JobStatus", "task_error"]

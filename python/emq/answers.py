"""What emq's calls answer, as types a checker reads: `Queue.fail`'s
`FailOutcome`, `Queue.counts`'s `QueueCounts`, `Queue.retention`'s `Retention`,
a stalled check's `StalledOutcome`, `Queue.cancel`'s `CancelOutcome`,
`Queue.cancel_requests`' `CancelRequests`, `Queue.add_unique`'s `UniqueAdd`, an
operator's `ActionOutcome` and `LaneControl` (`Queue.jobs`' `JobPage` is
`emq.queue`'s), `emq.workers`' `WorkerInfo`, and `Queue.schedules`'s `ScheduleInfo`.
The core makes them (`emq._core`); none of them holds anything but what the server
said."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import NamedTuple


class FailOutcome(str, enum.Enum):
    """What `Queue.fail` did with the job. A `str` too: each equals its value
    (`FailOutcome.DEAD == "dead"`), as the answers were strings before."""

    SCHEDULED = "scheduled"
    """Attempts are left: retried after `retry_in` (or the backoff), ready at once with 0."""
    DEAD = "dead"
    """Its last attempt failed: the job is in `dead`."""
    REFUSED = "refused"
    """The lease was lost (another worker holds the job, or it is no longer active): nothing changed."""
    CANCELLED = "cancelled"
    """It had been asked to stop (`Queue.cancel`): cancelled, never retried."""


class CancelOutcome(str, enum.Enum):
    """What `Queue.cancel` did. A `str` too (`CancelOutcome.STOPPING == "stopping"`)."""

    CANCELLED = "cancelled"
    """Not yet claimed: it left the queue, and its row says `cancelled`."""
    STOPPING = "stopping"
    """Running: asked to stop. Its worker sees it within a beat; it is cancelled when its worker settles it or its lease runs out."""
    ALREADY_DONE = "already_done"
    """It had come to an outcome already (done, dead or cancelled): nothing changed."""
    UNKNOWN = "unknown"
    """No such job (never added, or no longer kept): nothing changed."""


@dataclass(frozen=True)
class CancelRequests:
    """The running jobs asked to stop, as `Queue.cancel_requests` read them."""

    ids: list[str]
    """Their ids, oldest request first (a request may come twice)."""
    until: int
    """The read's clock (server ms): the `since` of the next read."""


@dataclass(frozen=True)
class UniqueAdd:
    """What `Queue.add_unique` did."""

    id: str
    """The job the key names: this call's, or the one added under the key before."""
    created: bool
    """Whether this call added it."""


@dataclass(frozen=True)
class QueueCounts:
    """A queue's jobs in each place, read at one instant."""

    schedule: int
    """Waiting for their due time."""
    pending: int
    """Ready, in no lane."""
    lanes: Mapping[str, int]
    """Ready, by lane."""
    active: int
    """Claimed, their leases running."""
    dead: int
    done: int
    """The done rows still kept (`Queue.set_retention(keep_done=)`)."""
    ring: int
    """The lanes that have ready jobs and may run now."""
    cancelled: int = 0
    """The cancelled rows still kept (as `done`, by `keep_done`)."""


@dataclass(frozen=True)
class Retention:
    """A queue's retention policy, in seconds; `None`: forever, or no limit."""

    keep_done: float | None
    """How long a done job's row is kept after it completes."""
    keep_dead: float | None
    """How long a dead job is kept."""
    max_dead: int | None
    """The most dead jobs kept."""


class StalledOutcome(NamedTuple):
    """A stalled check's jobs: `recovered, dead = queue.stalled_check()`."""

    recovered: list[str]
    """Sent back to `pending` (or their lane)."""
    dead: list[str]
    """Sent to `dead`: they stalled more than `max_stalled` times."""


@dataclass(frozen=True)
class ScheduleInfo:
    """One periodic schedule as the server keeps it (`Queue.schedules`,
    `App.schedules`; SPEC §14). Times are aware UTC datetimes."""

    name: str
    queue: str
    """The queue its jobs go to (where the schedule is kept)."""
    cron: str | None
    """The cron expression, or None for an interval."""
    every: timedelta | None
    """The interval, or None for a cron expression."""
    tz: str
    """The IANA zone of the cron expression (`UTC` for an interval)."""
    missed: str
    """What a sweep does with ticks missed: `latest`, `all` or `skip`."""
    max_missed: int | None
    grace: timedelta | None
    paused: bool
    next_tick: datetime | None
    """The next tick (None: paused, or no tick left)."""
    last_tick: datetime | None
    """The latest tick that enqueued a job (None: none yet)."""
    created: datetime
    data: bytes
    """What each tick's job holds (for an App's schedule: the task call)."""
    lane: str | None
    max_attempts: int

    @classmethod
    def _from_core(cls, queue: str, d: Mapping[str, object]) -> ScheduleInfo:
        def at(ms: object) -> datetime | None:
            return None if ms is None else datetime.fromtimestamp(int(str(ms)) / 1000, tz=timezone.utc)

        def span(ms: object) -> timedelta | None:
            return None if ms is None else timedelta(milliseconds=int(str(ms)))

        created = at(d["created"])
        assert created is not None
        return cls(
            name=str(d["name"]),
            queue=queue,
            cron=None if d["cron"] is None else str(d["cron"]),
            every=span(d["every_ms"]),
            tz=str(d["tz"]),
            missed=str(d["missed"]),
            max_missed=None if d["max_missed"] is None else int(str(d["max_missed"])),
            grace=span(d["grace_ms"]),
            paused=bool(d["paused"]),
            next_tick=at(d["next_tick"]),
            last_tick=at(d["last_tick"]),
            created=created,
            data=bytes(d["data"]),  # type: ignore[call-overload]
            lane=None if d["lane"] is None else str(d["lane"]),
            max_attempts=int(str(d["max_attempts"])),
        )


class ActionOutcome(str, enum.Enum):
    """What `Queue.retry`, `Queue.delete` and `Queue.promote_now` did with one id.
    A `str` too (`ActionOutcome.RETRIED == "retried"`)."""

    RETRIED = "retried"
    """The dead job is ready again, its attempts back to 0 (its error kept)."""
    DELETED = "deleted"
    """The job and its row are gone."""
    PROMOTED = "promoted"
    """The scheduled job is ready now."""
    NOT_FOUND = "not_found"
    """No such job (never added, or no longer kept): nothing changed."""
    NOT_DEAD = "not_dead"
    """Retry refused: the job is neither dead nor cancelled. Nothing changed."""
    ACTIVE = "active"
    """Delete refused: a worker holds the job (cancel it instead). Nothing changed."""
    NOT_SCHEDULED = "not_scheduled"
    """Promote now refused: the job is not scheduled. Nothing changed."""


@dataclass(frozen=True)
class LaneControl:
    """A lane's control as it stands (`Queue.lane_controls`)."""

    paused: bool
    limit: int
    """At most this many of its jobs active at once; 0: no limit."""
    active: int
    """Its jobs active now."""
    in_ring: bool
    """Whether it is offered to claims now (it has ready jobs and may run)."""


@dataclass(frozen=True)
class MinuteCounts:
    """The jobs a queue settled in one minute of the server's clock (`Queue.throughput`)."""

    minute: int
    """The minute: the server clock in ms // 60,000 (`start` is when it began)."""
    completed: int
    retried: int
    """Failed with attempts left: scheduled again."""
    dead: int
    """Failed for good (no attempts left, or stalled past `max_stalled`)."""
    cancelled: int
    recovered: int
    """Put back by a stalled check: their lease ran out."""

    @property
    def start(self) -> datetime:
        """When the minute began (UTC)."""
        return datetime.fromtimestamp(self.minute * 60, tz=timezone.utc)

    @property
    def failed(self) -> int:
        """Failures of any kind: retried and dead."""
        return self.retried + self.dead


@dataclass(frozen=True)
class CurrentJob:
    """A job a worker runs, as its heartbeat says."""

    queue: str
    id: str
    since: float
    """When it started, seconds since the epoch."""


@dataclass(frozen=True)
class WorkerInfo:
    """A live worker, as its last heartbeat says (`emq.workers`)."""

    id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    started: float
    """Seconds since the epoch (the server's clock)."""
    beat: float
    """Its last heartbeat, seconds since the epoch (the server's clock)."""
    expires: float
    """When it drops out unless it beats again."""
    done: int
    """Jobs it has completed."""
    failed: int
    """Jobs that failed in it."""
    current: list[CurrentJob]
    """What it runs now (at most the first 50)."""
    version: str


__all__ = [
    "ActionOutcome",
    "CancelOutcome",
    "CancelRequests",
    "CurrentJob",
    "FailOutcome",
    "LaneControl",
    "QueueCounts",
    "Retention",
    "ScheduleInfo",
    "StalledOutcome",
    "UniqueAdd",
    "WorkerInfo",
]

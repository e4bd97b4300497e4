"""What emq's calls answer, as types a checker reads: `Queue.fail`'s
`FailOutcome`, `Queue.counts`'s `QueueCounts`, `Queue.retention`'s `Retention`,
a stalled check's `StalledOutcome`, `Queue.cancel`'s `CancelOutcome`,
`Queue.cancel_requests`' `CancelRequests` and `Queue.add_unique`'s
`UniqueAdd`. The core makes them (`emq._core`); none of them holds anything
but what the server said."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
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


__all__ = ["CancelOutcome", "CancelRequests", "FailOutcome", "QueueCounts", "Retention", "StalledOutcome", "UniqueAdd"]

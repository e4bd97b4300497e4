"""What emq's calls answer, as types a checker reads: `Queue.fail`'s
`FailOutcome`, `Queue.counts`'s `QueueCounts`, `Queue.retention`'s `Retention`,
and a stalled check's `StalledOutcome`. The core makes them (`emq._core`);
none of them holds anything but what the server said."""

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


__all__ = ["FailOutcome", "QueueCounts", "Retention", "StalledOutcome"]

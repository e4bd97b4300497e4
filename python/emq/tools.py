"""Maintenance tools: a queue's cluster slot, the wire forms of the sweeps as
emq's server module checks them, and TIMERS, the sweep of schedules' ticks. Not needed to run jobs; for operators, tests and
other clients' authors."""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from . import _core
from .queue import Queue
from .sweeps import Backend, ClientLike


def queue_slot(queue: str) -> int:
    """The cluster hash slot of the queue's keys: every key of a queue has the
    queue's name as its hash tag, so one node serves all of them (SPEC §11)."""
    return _core.queue_slot(queue)


def wire(client: ClientLike, *args: str | bytes, backend: Backend = "plan") -> Any:
    """The wire form: the command's name, then the seed's EVALSHA tail (`"2"`,
    the keys of `schedule` and `pending`, the queue's prefix, the batch; SPEC §5
    and §6), checked as the module checks it."""
    return _core.wire(client, *args, backend=backend)


class Ticked(NamedTuple):
    """What a TIMERS call did."""

    enqueued: list[str]
    """The ids of the ticks' jobs it enqueued."""
    skipped: int
    """Ticks whose job existed already (another process enqueued it)."""
    dropped: int
    """Schedules some of whose due ticks their missed-tick policy dropped."""
    removed: int
    """Timers removed: their schedule is gone, paused, or has no tick left."""


def timers(client: ClientLike, queue: str, *, batch: int = 100, backend: Literal["plan", "module"] = "plan") -> Ticked:
    """TIMERS of `queue` (SPEC §14): enqueues the jobs of the schedules' due
    ticks and moves their timers past now, in one guarded transaction
    (`backend="module"`: `EMQ.TIMERS`, inside the server). A worker's beat
    runs it whenever a timer is due; this is for tests and tools."""
    return Ticked(*Queue(client, queue)._core.timers(batch, backend))


__all__ = ["Ticked", "queue_slot", "timers", "wire"]

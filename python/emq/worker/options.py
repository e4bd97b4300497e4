"""A worker's options, checked once, and the timing constants its beat keeps.

`Options.check` refuses a bad option with an `emq.ArgumentError` naming
`emq.Worker` and the option, before the worker opens any connection; what it
returns is frozen: no part of the worker changes an option as it runs. The
defaults are `emq.Worker`'s signature (what a user reads); the one default
that depends on another option, `idle_beat`'s, is settled here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from .._core import Job, check_duration, check_integer
from ..errors import ArgumentError
from ..queue import Duration, Queue

Recovery = Literal["reap", "stalled", "off"]

# The most a count option may be, and the longest beat (a stored field's
# width, as the options had it when they were in ms: about 49.7 days).
U32 = 2**32 - 1
LONGEST_BEAT = U32 / 1000

# A busy worker's beat comes round each time jobs finish; it promotes at most
# this often (seconds) unless a due time it saw has come or its last promote
# was cut by its batch. A job due meanwhile starts at most this late, and no
# worker parks without promoting first.
BUSY_PROMOTE_S = 0.005

# How long an idle worker parks by default (`idle_beat`, s): it still wakes for
# every job made ready, every new head of `schedule`, the next due time and the
# next lease deadline its stalled check saw, so only a lost wake token (or work
# written behind emq's back) waits this long. 4 idle workers then send about one
# command a second (benches/JOURNAL.md, "Idle workers").
IDLE_BEAT_S = 30.0

# The workers parked on a queue learn the same next due time. Woken together
# for it, all but one would promote and claim for nothing, and on a machine of
# few cores their CPU would hold up the one that runs the job. So a worker
# that found nothing at a due time it waited for waits this much past the due
# times it learns after; one that finds work, or learns a due time earlier than
# it waited for (it may be the only one that knows it), waits for them exactly
# again. The workers left waiting exactly are few, most often one; if none
# is (or it is gone), a due job starts this much late.
YIELD_S = 0.003

# Waking a sleeping thread, and a server that sat idle, costs a fraction of a
# millisecond each on a virtual machine (here: the first round trip after 30 ms
# idle took 0.45 ms, a warm one 0.04). A worker waiting exactly for a due time
# wakes this much early, pings the server (one command a due time), and waits
# out the rest: the due job's promote and claim then run on warm cores. At
# light load it took the lateness's median from 1.2 to 0.9 ms here
# (benches/JOURNAL.md, "Waking early for a due time").
WARM_S = 0.0005

CALL = "emq.Worker"


@dataclass(frozen=True)
class Options:
    """`emq.Worker`'s options as checked: durations in seconds, `idle_beat`
    settled, `ttl` None for no time to live."""

    queues: tuple[Queue, ...]
    handler: Callable[[Job], object]
    concurrency: int
    lease: float
    beat: float
    idle_beat: float
    pump_batch: int
    recovery: Recovery
    max_stalled: int
    ttl: float | None
    grace: float

    @property
    def queue(self) -> Queue:
        """The first queue (a worker of one queue: its queue)."""
        return self.queues[0]

    @classmethod
    def check(
        cls,
        queue: Queue | Sequence[Queue],
        handler: Callable[[Job], object],
        *,
        concurrency: int,
        lease: Duration,
        beat: Duration,
        idle_beat: Duration | None,
        pump_batch: int,
        recovery: Recovery,
        max_stalled: int,
        ttl: Duration | None,
        grace: Duration,
    ) -> Options:
        queues = [queue] if isinstance(queue, Queue) else list(queue) if isinstance(queue, (list, tuple)) else []
        if not queues or not all(isinstance(q, Queue) for q in queues):
            raise ArgumentError(f"{CALL}: queue must be an emq.Queue or a list of them, not {type(queue).__name__}")
        if len({q.name for q in queues}) != len(queues):
            raise ArgumentError(f"{CALL}: a queue is listed twice")
        if not callable(handler):
            raise ArgumentError(f"{CALL}: handler must be callable")
        concurrency = check_integer(CALL, "concurrency", concurrency, 1, 10_000)
        lease_s = check_duration(CALL, "lease", lease, positive=True, maximum=None)
        beat_s = check_duration(CALL, "beat", beat, positive=True, maximum=LONGEST_BEAT)
        idle = max(beat_s, IDLE_BEAT_S)
        if idle_beat is not None:
            idle = check_duration(CALL, "idle_beat", idle_beat, positive=True, maximum=LONGEST_BEAT)
        if idle < beat_s:
            raise ArgumentError(f"{CALL}: idle_beat must be at least beat")
        pump_batch = check_integer(CALL, "pump_batch", pump_batch, 1, U32)
        max_stalled = check_integer(CALL, "max_stalled", max_stalled, 0, U32)
        ttl_s = None if ttl is None else check_duration(CALL, "ttl", ttl, positive=False, maximum=None)
        grace_s = check_duration(CALL, "grace", grace, positive=False, maximum=None)
        if recovery not in ("reap", "stalled", "off"):
            raise ArgumentError(f"{CALL}: recovery must be 'reap', 'stalled' or 'off'")
        return cls(tuple(queues), handler, concurrency, lease_s, beat_s, idle, pump_batch, recovery, max_stalled, ttl_s, grace_s)


class OptionValues:
    """A worker's options, read as its attributes (`worker.lease`, ...)."""

    options: Options

    @property
    def queues(self) -> list[Queue]:
        return list(self.options.queues)

    @property
    def queue(self) -> Queue:
        return self.options.queue

    @property
    def handler(self) -> Callable[[Job], object]:
        return self.options.handler

    @property
    def concurrency(self) -> int:
        return self.options.concurrency

    @property
    def lease(self) -> float:
        return self.options.lease

    @property
    def beat(self) -> float:
        return self.options.beat

    @property
    def idle_beat(self) -> float:
        return self.options.idle_beat

    @property
    def pump_batch(self) -> int:
        return self.options.pump_batch

    @property
    def recovery(self) -> Recovery:
        return self.options.recovery

    @property
    def max_stalled(self) -> int:
        return self.options.max_stalled

    @property
    def ttl(self) -> float | None:
        return self.options.ttl

    @property
    def grace(self) -> float:
        return self.options.grace

"""The opt-in stalled sweeper: recovers the jobs whose leases ran out, for workers that run with `recovery="off"`."""

from __future__ import annotations

import logging
import threading

from .._core import check_duration, check_integer
from ..answers import StalledOutcome
from ..errors import ArgumentError, EmqError
from ..queue import Duration, Queue
from .counters import Counters
from .options import LONGEST_BEAT, U32
from .shutdown import FATAL, degraded_sleep

log = logging.getLogger("emq.worker")


class Stalled:
    """The opt-in stalled sweeper: a timer that runs the stalled check every
    `interval` (seconds, or a `timedelta`), re-armed after each sweep ends, so sweeps never overlap. A
    fatal error (see `emq.worker`) stops it; it is kept in `error`."""

    def __init__(self, queue: Queue, *, interval: Duration = 5, max_stalled: int | None = 1, batch: int = 100):
        if not isinstance(queue, Queue):
            raise ArgumentError(f"emq.Stalled: queue must be an emq.Queue, not {type(queue).__name__}")
        call = "emq.Stalled"
        interval = check_duration(call, "interval", interval, positive=True, maximum=LONGEST_BEAT)
        max_stalled = None if max_stalled is None else check_integer(call, "max_stalled", max_stalled, 0, U32)
        batch = check_integer(call, "batch", batch, 1, U32)
        self.queue = Queue(queue.client.sibling(), queue.name)
        self.interval = interval
        self.max_stalled = max_stalled
        self.batch = batch
        self.counters = Counters()
        self.error: EmqError | None = None  # the fatal error that stopped it, if any
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> StalledOutcome:
        outcome = self.queue.stalled_check(max_stalled=self.max_stalled, batch=self.batch)
        self.counters.add(sweeps=1, recovered=len(outcome.recovered), dead=len(outcome.dead))
        return outcome

    def _loop(self) -> None:
        streak = 0
        while not self._stop.wait(self.interval if not streak else degraded_sleep(streak)):
            try:
                self.sweep()
                streak = 0
            except FATAL as e:
                self.error = e
                log.error("stalled sweeper stopping: %s", e)
                return
            except EmqError as e:
                streak += 1
                self.counters.add(degraded_beats=1)
                log.warning("stalled sweep failed: %s", e)

    def start(self) -> Stalled:
        self._thread = threading.Thread(target=self._loop, name="emq-stalled", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the timer (a fatal error stops it by itself: see `error`)."""
        self._stop.set()
        if self._thread:
            self._thread.join()

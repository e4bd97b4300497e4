"""The beat (SPEC §8): recover, promote, claim for the free slots, and park until there is more to do.

Each beat recovers (at most once a `beat`), promotes each queue, then claims
for each with the slots left, the first to claim taking turns from beat to
beat, and parks: until a token, a free slot (when none is), the beat (an idle
worker's: `idle_beat`), the next due time its promotes saw, or, when idle, the
next lease deadline its stalled checks saw. While jobs run, a beat also reads
each queue's cancel requests (at most once a `beat`: one read a queue) and
tells the handlers of the running jobs asked to stop. A server's error degrades
the beat: it backs off and tries again; a fatal one stops the worker.
"""

from __future__ import annotations

import logging
import time

from ..errors import EmqError
from ..queue import Queue
from .counters import Counters
from .handlers import Handlers
from .options import BUSY_PROMOTE_S, WARM_S, YIELD_S, Options
from .parking import Park
from .shutdown import FATAL, Shutdown, degraded_sleep

log = logging.getLogger("emq.worker")


class Beat:
    """The beat loop's state: what the last beats found, and when each queue last promoted."""

    def __init__(self, options: Options, queues: list[Queue], handlers: Handlers, park: Park, counters: Counters, shutdown: Shutdown):
        self.options = options
        self.queues = queues  # the beat's own, on its connections
        self.handlers = handlers
        self.park = park
        self.counters = counters
        self.shutdown = shutdown
        self._turn = 0  # which queue claims first this beat: each in turn
        # Each queue's last promote: when (monotonic s), how many it moved, and the
        # next due time it saw (see `_promote`).
        self._promoted: dict[str, tuple[float, int, float | None]] = {}
        self._streak = 0  # degraded beats in a row
        self._last_recover = 0.0
        # The earliest lease deadline the last stalled checks saw (monotonic s), and
        # whether the last beat found anything to do: an idle worker parks up to
        # `idle_beat`, no later than that deadline or the next due time.
        self._lease_at: float | None = None
        self._busy = True
        self._took = False  # the last beat's claims took jobs
        # The due time the last park waited for (monotonic s), whether this beat
        # found work (moved, recovered or claimed jobs), and how long this worker
        # waits past the due times it learns (`YIELD_S`).
        self._waited_for: float | None = None
        self._found = False
        self._lag = 0.0
        # Each queue's last read of its cancel requests: its `until` (server ms), and when (monotonic s).
        self._cancels_since: dict[str, int] = {}
        self._cancels_read = 0.0

    def once(self) -> None:
        """One beat, its park included."""
        self.counters.add(beats=1)
        self.park.woken.clear()  # a token from here on means a new beat
        # Busy: jobs run, or the last beat's claims took some (they may all be
        # done by now: a claim's jobs run between two beats).
        self._busy = self.handlers.running > 0 or self._took
        self._took = False
        self._found = False
        stopping = self.shutdown.stopping
        try:
            self._recover()
            self._read_cancels()
            # Each queue promotes, then each claims with the slots left, the first
            # to claim taking turns from beat to beat.
            turn = self._turn % len(self.queues)
            order = self.queues[turn:] + self.queues[:turn]
            self._turn += 1
            due_at = None  # the earliest next due time any promote saw (monotonic s)
            for queue in order:
                at = self._promote(queue)
                if at is not None:
                    due_at = at if due_at is None else min(due_at, at)
            for queue in order:
                free = self.handlers.free()
                if not free or stopping.is_set():  # a stop may have come during the beat
                    break
                jobs = queue.claim(free, lease=self.options.lease)
                self.counters.add(claimed=len(jobs))
                self._took = self._took or bool(jobs)
                self._busy = self._busy or bool(jobs)
                self._found = self._found or bool(jobs)
                for job in jobs:
                    self.handlers.hand(job, queue.name)
            self._streak = 0
            if not stopping.is_set():
                # How long until the next due time, from what the promotes saw, and,
                # when idle, the next lease deadline the stalled checks saw.
                if not self._busy and self.options.recovery != "off" and self._lease_at is not None:
                    due_at = self._lease_at if due_at is None else min(due_at, self._lease_at)
                self._yield(due_at)
                self._wait(None if due_at is None else due_at + self._lag, warm=self._lag == 0)
        except FATAL as e:
            self.shutdown.give_up(e)
        except EmqError as e:
            if stopping.is_set():  # a signal interrupted a blocking call: we are stopping
                return
            # A wire error in any leg skips the rest of the beat and backs off.
            self._streak += 1
            self.counters.add(degraded_beats=1)
            pause = degraded_sleep(self._streak)
            log.warning("beat degraded (%d in a row): %s; backing off %.0f ms", self._streak, e, pause * 1000)
            stopping.wait(pause)

    def _recover(self) -> None:
        if self.options.recovery == "off":
            return
        now = time.monotonic()
        if now - self._last_recover < self.options.beat:
            return
        self._last_recover = now
        max_stalled = None if self.options.recovery == "reap" else self.options.max_stalled
        lease_at = None
        for queue in self.queues:
            recovered, dead, due_in = queue._stalled_next(max_stalled, self.options.pump_batch)
            self.counters.add(sweeps=1, recovered=len(recovered), dead=len(dead))
            if recovered or dead:
                self._busy = self._found = True
                log.info("%s: recovered %d, dead %d", queue.name, len(recovered), len(dead))
            if due_in is not None:
                at = time.monotonic() + due_in
                lease_at = at if lease_at is None else min(lease_at, at)
        self._lease_at = lease_at

    def _read_cancels(self) -> None:
        """The running jobs asked to stop since the last read, told to the
        handlers: at most once a `beat`, only while jobs run."""
        if not self.handlers.running:
            return
        now = time.monotonic()
        if now - self._cancels_read < self.options.beat:
            return
        self._cancels_read = now
        for queue in self.queues:
            requests = queue.cancel_requests(self._cancels_since.get(queue.name))
            self._cancels_since[queue.name] = requests.until
            if requests.ids:
                self.handlers.asked_to_stop(queue.name, requests.ids)

    def _promote(self, queue: Queue) -> float | None:
        """The beat's promote on one queue: the next due time it knows of
        (monotonic s). While jobs run, one promote in `BUSY_PROMOTE_S` serves
        the beats that come round as jobs finish, unless a due time has come or
        the last promote was cut by its batch. (Busy, as `once` says.)"""
        now = time.monotonic()
        batch = self.options.pump_batch
        last = self._promoted.get(queue.name)
        if last is not None and self._busy:
            at, moved, due_at = last
            if now - at < BUSY_PROMOTE_S and moved < batch and (due_at is None or due_at > now):
                return due_at
        moved, due_in = queue._promote_next(batch)
        self.counters.add(sweeps=1, moved=moved)
        self._busy = self._busy or moved > 0
        self._found = self._found or moved > 0
        due_at = None if due_in is None else time.monotonic() + due_in
        self._promoted[queue.name] = (now, moved, due_at)
        return due_at

    def _yield(self, due_at: float | None) -> None:
        """How long this worker waits past the due times it learns (`YIELD_S`),
        from what this beat found; `due_at` is the next one it learned."""
        last, self._waited_for = self._waited_for, due_at
        if self._found or (due_at is not None and (last is None or due_at < last)):
            self._lag = 0.0
        elif last is not None and time.monotonic() >= last:
            self._lag = YIELD_S  # another worker took what came due

    def _wait(self, due_at: float | None, *, warm: bool = False) -> None:
        """Park: on `wake` while slots are free, else until a slot frees; never
        past the beat (an idle worker's: `idle_beat`) or `due_at` (monotonic
        s, when known); `warm`: ping the server `WARM_S` before `due_at`."""
        self.park.check()
        beat_s = self.options.beat if self._busy else self.options.idle_beat
        if self.handlers.free() == 0:
            # A pop now would take tokens meant for workers with room.
            self.park.end_pop()
            self.handlers.wait_for_a_slot(self._timeout(beat_s, due_at))
            return
        self.park.arm()
        # A token on `wake` (a park thread pops it) wakes us at once; the due time
        # is kept on our own clock (see `parking`).
        woken = self.park.woken
        timeout = self._timeout(beat_s, due_at)
        if warm and due_at is not None and timeout < beat_s and timeout > WARM_S:
            if woken.wait(timeout - WARM_S) or self.shutdown.stopping.is_set():
                return
            for client in {id(q.client): q.client for q in self.queues}.values():
                client.ping()
            timeout = due_at - time.monotonic()
        if timeout > 0:
            woken.wait(timeout)

    @staticmethod
    def _timeout(beat_s: float, due_at: float | None) -> float:
        return beat_s if due_at is None else min(beat_s, due_at - time.monotonic())

"""Workers: the beat (recover, promote, drain, park) of SPEC §8, and the
opt-in stalled sweeper.

A worker owns three connections: the beat's (sweeps and claims), the park's
(a blocking pop on `wake`, so a parked worker never holds up the others), and
the handlers' (extend, complete, fail). Each is a sibling of the queue's client:
the same address, credentials, TLS, database and timeouts.

A wire error (the connection broke, a timeout, an unknown outcome), contention,
or a server that cannot serve now (a replica, out of memory, loading) degrades a
beat: it backs off and tries again. An error that no retry can mend (bad
arguments, a key of the wrong type, credentials refused, a permission denied)
is fatal for the queue: the worker stops, and `run()` raises it.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Sequence

from .._core import Job
from ..errors import EmqError
from ..queue import Duration, Queue
from .connections import Connections
from .counters import Counters
from .group_commit import GroupCommit
from .handlers import Handlers
from .leases import LeaseKeeper
from .options import BUSY_PROMOTE_S, IDLE_BEAT_S, LONGEST_BEAT, U32, WARM_S, YIELD_S, Options, OptionValues, Recovery
from .parking import ManyQueuesPark, OneQueuePark, Park
from .shutdown import FATAL, Shutdown, degraded_sleep
from .stalled import Stalled

__all__ = [
    "BUSY_PROMOTE_S",
    "FATAL",
    "IDLE_BEAT_S",
    "LONGEST_BEAT",
    "U32",
    "WARM_S",
    "YIELD_S",
    "Counters",
    "GroupCommit",
    "Options",
    "Recovery",
    "Stalled",
    "Worker",
    "degraded_sleep",
]

log = logging.getLogger("emq.worker")


class Worker(OptionValues):
    """Runs `handler(job)` for the queue's jobs, `concurrency` at a time. `queue`
    may be a list of queues (on one server, or on any nodes of a cluster): one
    beat serves them all, and a token on any of them wakes it.

    A handler that returns completes the job; one that raises fails it (retried
    with backoff while attempts are left, then dead). `run()` blocks until
    `stop()`, SIGTERM or SIGINT, or `ttl`; then it claims nothing more, lets
    running jobs finish within `grace`, and leaves the rest to recovery.

    Durations are seconds (an int or a float) or a `datetime.timedelta`:
    `lease`, each claimed job's (extended every third of it while it runs);
    `beat`, how often a busy worker recovers and promotes; `idle_beat`, how long
    an idle worker parks at most (None: 30 s, or `beat` if longer); `ttl`, how
    long `run()` runs (None: until stopped); `grace`, how long running jobs may
    finish once it stops.
    """

    def __init__(
        self,
        queue: Queue | Sequence[Queue],
        handler: Callable[[Job], object],
        *,
        concurrency: int = 8,
        lease: Duration = 30,
        beat: Duration = 1,
        idle_beat: Duration | None = None,
        pump_batch: int = 100,
        recovery: Recovery = "reap",
        max_stalled: int = 1,
        ttl: Duration | None = None,
        grace: Duration = 30,
    ):
        self.options = Options.check(
            queue,
            handler,
            concurrency=concurrency,
            lease=lease,
            beat=beat,
            idle_beat=idle_beat,
            pump_batch=pump_batch,
            recovery=recovery,
            max_stalled=max_stalled,
            ttl=ttl,
            grace=grace,
        )
        self.counters = Counters()
        self._shutdown = Shutdown()
        conns = Connections.open(self.options)
        self._beats = conns.beats
        self._handlers = Handlers(self.options, conns.works, self.counters, self._shutdown)
        self._leases = LeaseKeeper(self._handlers, self.options.lease, self.counters, self._shutdown)
        self._park: Park
        if len(self.options.queues) == 1:
            self._park = OneQueuePark(self.options, self._shutdown, conns.parks[0], conns.beats[0].client)
        else:
            self._park = ManyQueuesPark(self.options, self._shutdown, conns.parks)
        self._shutdown.on_stop(self._handlers.freed.set)
        self._shutdown.on_stop(self._park.stop)
        self._turn = 0  # which queue claims first this beat: each in turn
        # Each queue's last promote: when (monotonic s), how many it moved, and the
        # next due time it saw (see `_promote`).
        self._promoted: dict[str, tuple[float, int, float | None]] = {}
        self._stop, self._halt = self._shutdown.stopping, self._shutdown.over
        self._streak = 0
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

    # -- control ------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; `run()` returns once running jobs finish (or `grace`)."""
        self._shutdown.stop()

    def _ttl_reached(self) -> None:
        log.info("time to live reached")
        self.stop()

    @property
    def running(self) -> int:
        return self._handlers.running

    def run(self) -> dict[str, int]:
        """The beat loop; returns the counters when it stops, or raises the
        fatal error that stopped it (see the module's doc)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        self._handlers.start()
        self._leases.start()
        self._park.start()
        # The time to live ends a park too, as `stop()` does (a park may be long: `idle_beat`).
        ttl = None
        if self.ttl is not None:
            ttl = threading.Timer(self.ttl, self._ttl_reached)
            ttl.daemon = True
            ttl.start()
        log.info("worker on %s: concurrency %d, beat %g s", ", ".join(map(str, self.queues)), self.concurrency, self.beat)
        try:
            while not self._stop.is_set():  # the time to live's timer stops it too
                self._beat_once()
        finally:
            if ttl is not None:
                ttl.cancel()
            self._stop.set()
            self._handlers.drain(self.grace)
            self._halt.set()
            self._park.end()
            self._handlers.close()
            self._leases.join(timeout=5)
        if self._shutdown.error is not None:
            raise self._shutdown.error
        return self.counters.snapshot()

    # -- the beat -------------------------------------------------------------

    def _beat_once(self) -> None:
        self.counters.add(beats=1)
        self._park.woken.clear()  # a token from here on means a new beat
        # Busy: jobs run, or the last beat's claims took some (they may all be
        # done by now: a claim's jobs run between two beats).
        self._busy = self.running > 0 or self._took
        self._took = False
        self._found = False
        try:
            self._recover()
            # Each queue promotes, then each claims with the slots left, the first
            # to claim taking turns from beat to beat.
            order = self._beats[self._turn % len(self._beats) :] + self._beats[: self._turn % len(self._beats)]
            self._turn += 1
            due_at = None  # the earliest next due time any promote saw (monotonic s)
            for beat in order:
                at = self._promote(beat)
                if at is not None:
                    due_at = at if due_at is None else min(due_at, at)
            for beat in order:
                free = self._handlers.free()
                if not free or self._stop.is_set():  # a stop may have come during the beat
                    break
                jobs = beat.claim(free, lease=self.lease)
                self.counters.add(claimed=len(jobs))
                self._took = self._took or bool(jobs)
                self._busy = self._busy or bool(jobs)
                self._found = self._found or bool(jobs)
                for job in jobs:
                    self._handlers.run(job, beat.name)
            self._streak = 0
            if not self._stop.is_set():
                # How long until the next due time, from what the promotes saw, and,
                # when idle, the next lease deadline the stalled checks saw.
                if not self._busy and self.recovery != "off" and self._lease_at is not None:
                    due_at = self._lease_at if due_at is None else min(due_at, self._lease_at)
                self._yield(due_at)
                self._wait(None if due_at is None else due_at + self._lag, warm=self._lag == 0)
        except FATAL as e:
            self._shutdown.give_up(e)
        except EmqError as e:
            if self._stop.is_set():  # a signal interrupted a blocking call: we are stopping
                return
            # A wire error in any leg skips the rest of the beat and backs off.
            self._streak += 1
            self.counters.add(degraded_beats=1)
            pause = degraded_sleep(self._streak)
            log.warning("beat degraded (%d in a row): %s; backing off %.0f ms", self._streak, e, pause * 1000)
            self._stop.wait(pause)

    def _yield(self, due_at: float | None) -> None:
        """How long this worker waits past the due times it learns (`YIELD_S`),
        from what this beat found; `due_at` is the next one it learned."""
        last, self._waited_for = self._waited_for, due_at
        if self._found or (due_at is not None and (last is None or due_at < last)):
            self._lag = 0.0
        elif last is not None and time.monotonic() >= last:
            self._lag = YIELD_S  # another worker took what came due

    def _promote(self, beat: Queue) -> float | None:
        """The beat's promote on one queue: the next due time it knows of
        (monotonic s). While jobs run, one promote in `BUSY_PROMOTE_S` serves
        the beats that come round as jobs finish, unless a due time has come or
        the last promote was cut by its batch. (Busy, as `_beat_once` says.)"""
        now = time.monotonic()
        last = self._promoted.get(beat.name)
        if last is not None and self._busy:
            at, moved, due_at = last
            if now - at < BUSY_PROMOTE_S and moved < self.pump_batch and (due_at is None or due_at > now):
                return due_at
        moved, due_in = beat._promote_next(self.pump_batch)
        self.counters.add(sweeps=1, moved=moved)
        self._busy = self._busy or moved > 0
        self._found = self._found or moved > 0
        due_at = None if due_in is None else time.monotonic() + due_in
        self._promoted[beat.name] = (now, moved, due_at)
        return due_at

    def _recover(self) -> None:
        if self.recovery == "off":
            return
        now = time.monotonic()
        if now - self._last_recover < self.beat:
            return
        self._last_recover = now
        max_stalled = None if self.recovery == "reap" else self.max_stalled
        lease_at = None
        for beat in self._beats:
            recovered, dead, due_in = beat._stalled_next(max_stalled, self.pump_batch)
            self.counters.add(sweeps=1, recovered=len(recovered), dead=len(dead))
            if recovered or dead:
                self._busy = self._found = True
                log.info("%s: recovered %d, dead %d", beat.name, len(recovered), len(dead))
            if due_in is not None:
                at = time.monotonic() + due_in
                lease_at = at if lease_at is None else min(lease_at, at)
        self._lease_at = lease_at

    def _wait(self, due_at: float | None, *, warm: bool = False) -> None:
        """Park: on `wake` while slots are free, else until a slot frees; never
        past the beat (an idle worker's: `idle_beat`) or `due_at` (monotonic
        s, when known); `warm`: ping the server `WARM_S` before `due_at`."""
        self._park.check()
        beat_s = self.beat if self._busy else self.idle_beat
        if self._handlers.free() == 0:
            # A pop now would take tokens meant for workers with room.
            self._park.end_pop()
            self._handlers.wait_for_a_slot(self._timeout(beat_s, due_at))
            return
        self._park.arm()
        # A token on `wake` (a park thread pops it) wakes us at once. The due time
        # is kept on our own clock, to the 0.1 ms: the server times out a blocking
        # pop only on its tick (every 1/hz s, 100 ms by default), and a pop left
        # blocking past it costs the due job nothing.
        timeout = self._timeout(beat_s, due_at)
        if warm and due_at is not None and timeout < beat_s and timeout > WARM_S:
            if self._park.woken.wait(timeout - WARM_S) or self._stop.is_set():
                return
            for client in {id(b.client): b.client for b in self._beats}.values():
                client.ping()
            timeout = due_at - time.monotonic()
        if timeout > 0:
            self._park.woken.wait(timeout)

    @staticmethod
    def _timeout(beat_s: float, due_at: float | None) -> float:
        return beat_s if due_at is None else min(beat_s, due_at - time.monotonic())

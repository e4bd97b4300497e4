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

from .._core import Client, Job
from ..errors import EmqError, PermissionError
from ..queue import Duration, Queue
from .connections import Connections
from .counters import Counters
from .group_commit import GroupCommit
from .handlers import Handlers
from .leases import LeaseKeeper
from .options import BUSY_PROMOTE_S, IDLE_BEAT_S, LONGEST_BEAT, U32, WARM_S, YIELD_S, Options, OptionValues, Recovery
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
        self._shutdown.on_stop(self._wake_on_stop)
        conns = Connections.open(self.options)
        self._beats, self._parks = conns.beats, conns.parks
        self._handlers = Handlers(self.options, conns.works, self.counters, self._shutdown)
        self._leases = LeaseKeeper(self._handlers, self.options.lease, self.counters, self._shutdown)
        self._beat, self._park = self._beats[0], self._parks[0]
        self._turn = 0  # which queue claims first this beat: each in turn
        # Each queue's last promote: when (monotonic s), how many it moved, and the
        # next due time it saw (see `_promote`).
        self._promoted: dict[str, tuple[float, int, float | None]] = {}
        self._woken = threading.Event()  # several queues: a park thread saw a token
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
        self._park_id: int | None = None
        self._parking = False  # the park connection is blocked on `wake` (or about to be)
        self._ending_park = False
        self._can_unblock = True
        # A worker of one queue: whether the beat wants its park thread to pop
        # `wake` (see `_wait`), and what the last pop raised.
        self._pop_wanted = threading.Event()
        self._pop_error: Exception | None = None

    # -- control ------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; `run()` returns once running jobs finish (or `grace`)."""
        self._shutdown.stop()

    def _wake_on_stop(self) -> None:
        self._handlers.freed.set()
        self._woken.set()
        self._pop_wanted.set()  # the park thread of one queue ends
        # A park blocks for up to a beat: end it now, where this user may (until
        # run() is over: the stop may come just before the pop blocks).
        if self._can_unblock and len(self.queues) == 1 and not self._ending_park:
            self._ending_park = True
            threading.Thread(target=self._end_park, name="emq-stop", daemon=True).start()

    def _ttl_reached(self) -> None:
        log.info("time to live reached")
        self.stop()

    def _end_park(self) -> None:
        deadline = time.monotonic() + self.idle_beat + 5
        while not self._halt.is_set() and time.monotonic() < deadline and self._can_unblock:
            park_id = self._park_id
            if self._parking and park_id is not None:
                try:
                    self._beat.client._unblock(park_id, self.queue.name)
                except EmqError:
                    return
            time.sleep(0.02)

    @property
    def running(self) -> int:
        return self._handlers.running

    def run(self) -> dict[str, int]:
        """The beat loop; returns the counters when it stops, or raises the
        fatal error that stopped it (see the module's doc)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        if len(self.queues) > 1:
            parks = [
                threading.Thread(target=self._park_on, args=(park, q.name), name=f"emq-park-{q.name}", daemon=True)
                for park, q in zip(self._parks, self.queues)
            ]
        else:
            parks = [threading.Thread(target=self._pop_loop, name=f"emq-park-{self.queue.name}", daemon=True)]
        self._handlers.start()
        self._leases.start()
        for t in parks:
            t.start()
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
            self._pop_wanted.set()  # the park thread ends (a last `_end_pop` may have cleared it)
            self._handlers.close()
            self._leases.join(timeout=5)
        if self._shutdown.error is not None:
            raise self._shutdown.error
        return self.counters.snapshot()

    # -- the beat -------------------------------------------------------------

    def _beat_once(self) -> None:
        self.counters.add(beats=1)
        self._woken.clear()  # a token from here on means a new beat
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
        e, self._pop_error = self._pop_error, None
        if e is not None:
            raise e
        beat_s = self.beat if self._busy else self.idle_beat
        if self._handlers.free() == 0:
            # A pop now would take tokens meant for workers with room.
            self._end_pop()
            self._handlers.wait_for_a_slot(self._timeout(beat_s, due_at))
            return
        if len(self.queues) == 1:
            self._pop_wanted.set()
        # A token on `wake` (a park thread pops it) wakes us at once. The due time
        # is kept on our own clock, to the 0.1 ms: the server times out a blocking
        # pop only on its tick (every 1/hz s, 100 ms by default), and a pop left
        # blocking past it costs the due job nothing.
        timeout = self._timeout(beat_s, due_at)
        if warm and due_at is not None and timeout < beat_s and timeout > WARM_S:
            if self._woken.wait(timeout - WARM_S) or self._stop.is_set():
                return
            for client in {id(b.client): b.client for b in self._beats}.values():
                client.ping()
            timeout = due_at - time.monotonic()
        if timeout > 0:
            self._woken.wait(timeout)

    @staticmethod
    def _timeout(beat_s: float, due_at: float | None) -> float:
        return beat_s if due_at is None else min(beat_s, due_at - time.monotonic())

    def _pop_loop(self) -> None:
        """The park thread of a worker of one queue: pops `wake` while the beat
        wants it (`_wait`), a beat at a time where this user may not
        CLIENT UNBLOCK (so that a stop is served within a beat); a token wakes
        the beat, which asks again when it parks again. Ends with a stop."""
        name = self.queue.name
        while True:
            self._pop_wanted.wait()
            if self._stop.is_set():
                return
            try:
                self._park_client_id()  # the park connection is free: read its id once
                chunk = self.idle_beat if self._can_unblock else self.beat
                self._parking = True
                # A beat that no longer wants the pop saw `_parking` false, or sees it
                # true and unblocks it (`_end_pop`); so does a stop (`_end_park`).
                token = self._pop_wanted.is_set() and not self._stop.is_set() and self._park._park(name, chunk)
            except Exception as e:  # the beat raises it (`_wait`)
                self._pop_error, token = e, True
                self._park_id = None  # the connection may come back as another client
            finally:
                self._parking = False
            if token:
                self._pop_wanted.clear()
                self._woken.set()

    def _end_pop(self) -> None:
        """Ends the park thread's pop, if one blocks and this user may."""
        self._pop_wanted.clear()
        for _ in range(100):  # an id that never unblocks is stale: read it again later
            park_id = self._park_id if self._can_unblock else None
            if not self._parking or park_id is None:
                return
            try:
                if self._beat.client._unblock(park_id, self.queue.name):
                    return
            except PermissionError:
                self._can_unblock = False
                return
            time.sleep(0.0002)  # not blocking yet
        self._park_id = None

    def _park_on(self, park: Client, name: str) -> None:
        """A park thread (a worker of several queues): blocks on the queue's `wake`
        for up to a beat at a time, and wakes the beat when a token comes."""
        streak = 0
        while not self._stop.is_set():
            try:
                if park._park(name, self.idle_beat):
                    self._woken.set()
                streak = 0
            except FATAL as e:
                self._shutdown.give_up(e)
            except EmqError:
                streak += 1
                self._stop.wait(degraded_sleep(streak))

    def _park_client_id(self) -> int | None:
        """The park connection's CLIENT ID, or None where this user may not
        unblock clients (then its pops last a beat at a time)."""
        if self._park_id is None and self._can_unblock:
            try:
                self._park_id = self._park._client_id(self.queue.name)
            except PermissionError:
                self._can_unblock = False
        return self._park_id if self._can_unblock else None

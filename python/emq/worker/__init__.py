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

import functools
import logging
import queue as _queue
import signal
import threading
import time
from collections.abc import Callable, Sequence

from .._core import Client, Job
from ..answers import FailOutcome
from ..errors import EmqError, PermissionError
from ..queue import Duration, Queue
from .counters import Counters
from .group_commit import GroupCommit
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
        queues, idle = self.options.queues, self.options.idle_beat
        self.counters = Counters()
        self._shutdown = Shutdown()
        self._shutdown.on_stop(self._wake_on_stop)
        # Connections of its own, siblings of the queues' clients: a beat's and the
        # handlers' for each client, and a park for each queue (it blocks for up to
        # a beat). In a cluster each reaches the nodes of its queues by itself.
        beat_of: dict[int, Client] = {}
        work_of: dict[int, Client] = {}
        self._beats: list[Queue] = []
        self._works: dict[str, Queue] = {}
        self._commits: dict[str, GroupCommit] = {}
        self._parks: list[Client] = []
        for q in queues:
            if id(q.client) not in beat_of:
                beat_of[id(q.client)], work_of[id(q.client)] = q.client.sibling(), q.client.sibling()
            # The queue's backend runs the claims and commits (the beats' sweeps are the plan's).
            self._beats.append(Queue(beat_of[id(q.client)], q.name, backend=q.backend))
            self._works[q.name] = Queue(work_of[id(q.client)], q.name, backend=q.backend)
            work = self._works[q.name]
            # A worker of one queue claims with its commits too; one of several
            # claims on its beat only, which takes the queues in turn (a queue's
            # commits would refill every slot they free with its own jobs).
            self._commits[q.name] = GroupCommit(
                work,
                self._shutdown.settle,
                functools.partial(self._committed, work),
                reserve=self._reserve if len(queues) == 1 else None,
                lease=self.lease,
            )
            self._parks.append(q.client.sibling(read_timeout=idle + 5))
        self._beat, self._park = self._beats[0], self._parks[0]
        self._turn = 0  # which queue claims first this beat: each in turn
        # Each queue's last promote: when (monotonic s), how many it moved, and the
        # next due time it saw (see `_promote`).
        self._promoted: dict[str, tuple[float, int, float | None]] = {}
        self._woken = threading.Event()  # several queues: a park thread saw a token
        self._stop, self._halt = self._shutdown.stopping, self._shutdown.over
        self._jobs: _queue.SimpleQueue[Job | None] = _queue.SimpleQueue()
        # Running jobs by token, with the queue that settles them: a job claimed
        # again after its lease was lost is another run.
        self._running: dict[str | None, tuple[Job, Queue]] = {}
        self._running_lock = threading.Lock()
        self._held = 0  # free slots a group commit holds for the jobs it claims
        self._finishing: set[str | None] = set()  # finished jobs awaiting their commit
        self._failing: set[str | None] = set()  # of which, jobs whose handler raised
        self._freed = threading.Event()
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
        self._freed.set()
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
        with self._running_lock:
            return len(self._running)

    def run(self) -> dict[str, int]:
        """The beat loop; returns the counters when it stops, or raises the
        fatal error that stopped it (see the module's doc)."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        # Daemon threads: a job that outlasts the grace period must not keep the
        # process alive; it is left to recovery.
        threads = [threading.Thread(target=self._handle, name=f"emq-{self.queue.name}-{i}", daemon=True) for i in range(self.concurrency)]
        keeper = threading.Thread(target=self._keep_leases, name="emq-leases", daemon=True)
        if len(self.queues) > 1:
            parks = [
                threading.Thread(target=self._park_on, args=(park, q.name), name=f"emq-park-{q.name}", daemon=True)
                for park, q in zip(self._parks, self.queues)
            ]
        else:
            parks = [threading.Thread(target=self._pop_loop, name=f"emq-park-{self.queue.name}", daemon=True)]
        for t in [*threads, keeper, *parks]:
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
            self._drain_running()
            self._halt.set()
            self._pop_wanted.set()  # the park thread ends (a last `_end_pop` may have cleared it)
            for _ in threads:
                self._jobs.put(None)
            for commit in self._commits.values():
                commit.close(timeout=5)
            keeper.join(timeout=5)
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
                free = self._free_slots()
                if not free or self._stop.is_set():  # a stop may have come during the beat
                    break
                jobs = beat.claim(free, lease=self.lease)
                self.counters.add(claimed=len(jobs))
                self._took = self._took or bool(jobs)
                self._busy = self._busy or bool(jobs)
                self._found = self._found or bool(jobs)
                for job in jobs:
                    self._start(job, self._works[beat.name])
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

    def _free_slots(self) -> int:
        with self._running_lock:
            return self._unheld()

    def _unheld(self) -> int:
        """(Under the running lock.) Slots neither running a job nor held for a
        group commit's claim."""
        return max(0, self.concurrency - len(self._running) - self._held)

    def _wait(self, due_at: float | None, *, warm: bool = False) -> None:
        """Park: on `wake` while slots are free, else until a slot frees; never
        past the beat (an idle worker's: `idle_beat`) or `due_at` (monotonic
        s, when known); `warm`: ping the server `WARM_S` before `due_at`."""
        e, self._pop_error = self._pop_error, None
        if e is not None:
            raise e
        beat_s = self.beat if self._busy else self.idle_beat
        if self._free_slots() == 0:
            # A pop now would take tokens meant for workers with room.
            self._end_pop()
            self._freed.clear()
            if self._free_slots() == 0:
                self._freed.wait(self._timeout(beat_s, due_at))
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

    # -- running jobs --------------------------------------------------------

    def _start(self, job: Job, work: Queue) -> None:
        with self._running_lock:
            self._running[job.token] = (job, work)
        self._jobs.put(job)

    def _handle(self) -> None:
        """A handler thread: runs jobs until it is handed None."""
        while (job := self._jobs.get()) is not None:
            self._run_job(job)

    def _run_job(self, job: Job) -> None:
        """Runs the handler; the job, done or failed, is handed to its queue's
        group commit and holds its slot until the commit answers (`_committed`)."""
        with self._running_lock:
            work = self._running[job.token][1]
        try:
            self.handler(job)
        except BaseException as e:
            if not isinstance(e, Exception):  # an interrupt: the job is left to recovery
                self._release(job)
                raise
            log.info("job %s failed: %s", job.id, e)
            with self._running_lock:
                self._finishing.add(job.token)
                self._failing.add(job.token)
            self._commits[work.name].failed(job, e)
        else:
            with self._running_lock:
                self._finishing.add(job.token)
            self._commits[work.name].finished(job)

    def _reserve(self, finishing: int) -> int:
        """How many jobs a commit of `finishing` jobs may claim: the slots it
        frees, and those free now, held for it (the beat claims none of them)
        until `_committed` gives them back. None once the worker stops."""
        if self._stop.is_set():
            return 0
        with self._running_lock:
            free = self._unheld()
            self._held += free
        return finishing + free

    def _committed(self, work: Queue, answers: list[tuple[Job, bool | FailOutcome | None]], claimed: list[Job], held: int) -> None:
        """A group commit's outcome: its jobs leave their slots, the jobs it
        claimed take them (at once, so the beat never sees them free in
        between), and the slots it held are given back."""
        with self._running_lock:
            failed = sum(1 for job, _ in answers if job.token in self._failing)
            for job, _ in answers:
                self._running.pop(job.token, None)
                self._finishing.discard(job.token)
                self._failing.discard(job.token)
            self._held -= held
            for job in claimed:
                self._running[job.token] = (job, work)
            free = self._unheld()
        self.counters.add(
            completed=sum(1 for _, a in answers if a is True),
            failed=failed,
            refused=sum(1 for _, a in answers if a is False or a is FailOutcome.REFUSED),
            claimed=len(claimed),
        )
        for job in claimed:
            self._jobs.put(job)
        # The beat waits for a free slot; a commit that refilled every slot it
        # freed leaves it asleep (waking it for nothing cost a thread switch a commit).
        if free:
            self._freed.set()

    def _release(self, job: Job) -> None:
        with self._running_lock:
            self._running.pop(job.token, None)
        self._freed.set()

    def _runs_unfinished(self, job: Job) -> bool:
        """The job runs here and its handler has not returned."""
        with self._running_lock:
            return job.token in self._running and job.token not in self._finishing

    def _keep_leases(self) -> None:
        """Extends the leases of running jobs every third of a lease, until
        `run()` is over (jobs left running after the grace period then lose
        their leases, and recovery takes them)."""
        every = self.lease / 3
        while not self._halt.wait(every):
            with self._running_lock:
                running = list(self._running.values())
            # One call per queue extends all of its running jobs.
            by_queue: dict[str, tuple[Queue, list[Job]]] = {}
            for job, work in running:
                by_queue.setdefault(work.name, (work, []))[1].append(job)
            for work, jobs in by_queue.values():
                try:
                    kept = work.extend_many(jobs, self.lease)
                except FATAL as e:
                    self._shutdown.give_up(e)
                    continue
                except EmqError as e:
                    log.warning("extending %d jobs of %s: %s", len(jobs), work.name, e)
                    continue
                for job, ok in zip(jobs, kept):
                    # A finished job's commit may have made it done before this
                    # extend ran; one whose lease was lost, its commit refuses.
                    if not ok and self._runs_unfinished(job):
                        self.counters.add(lost_leases=1)
                        log.warning("lease of job %s was lost", job.id)

    def _drain_running(self) -> None:
        deadline = time.monotonic() + self.grace
        while self.running and time.monotonic() < deadline:
            self._freed.clear()
            self._freed.wait(0.05)
        if self.running:
            log.warning("%d jobs still running after the grace period: left to recovery", self.running)

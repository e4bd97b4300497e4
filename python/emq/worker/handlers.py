"""The handler pool: runs each claimed job on one of `concurrency` threads, and counts the slots they hold.

A job holds its slot from its claim until its queue's group commit answers for
it (done, failed or refused), not only while its handler runs: the beat claims
only for slots that are free. A worker of one queue has its commits claim too,
into the slots they free and the free ones, which they hold meanwhile.
"""

from __future__ import annotations

import functools
import logging
import queue as _queue
import threading
import time

from .._core import Job
from ..answers import FailOutcome
from ..queue import Queue
from .counters import Counters
from .group_commit import GroupCommit
from .options import Options
from .shutdown import Shutdown

log = logging.getLogger("emq.worker")


class Handlers:
    """The handler threads, the jobs they run, and each queue's group commit."""

    def __init__(self, options: Options, works: dict[str, Queue], counters: Counters, shutdown: Shutdown):
        self.options = options
        self.counters = counters
        self.shutdown = shutdown
        self._works = works
        self._jobs: _queue.SimpleQueue[Job | None] = _queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        # Running jobs by token, with the queue that settles them: a job claimed
        # again after its lease was lost is another run.
        self._running: dict[str | None, tuple[Job, Queue]] = {}
        self._lock = threading.Lock()
        self._held = 0  # free slots a group commit holds for the jobs it claims
        self._finishing: set[str | None] = set()  # finished jobs awaiting their commit
        self._failing: set[str | None] = set()  # of which, jobs whose handler raised
        self.freed = threading.Event()  # a slot came free (or the worker stops)
        # A worker of one queue claims with its commits too; one of several
        # claims on its beat only, which takes the queues in turn (a queue's
        # commits would refill every slot they free with its own jobs).
        one = len(options.queues) == 1
        self.commits = {
            name: GroupCommit(
                work,
                shutdown.settle,
                functools.partial(self._committed, work),
                reserve=self._reserve if one else None,
                lease=options.lease,
            )
            for name, work in works.items()
        }

    # -- the threads ---------------------------------------------------------

    def start(self) -> None:
        # Daemon threads: a job that outlasts the grace period must not keep the
        # process alive; it is left to recovery.
        name = self.options.queue.name
        self._threads = [
            threading.Thread(target=self._handle, name=f"emq-{name}-{i}", daemon=True) for i in range(self.options.concurrency)
        ]
        for t in self._threads:
            t.start()

    def close(self) -> None:
        """Ends the handler threads once they are free, and each commit thread
        once its jobs are answered (up to 5 s each)."""
        for _ in self._threads:
            self._jobs.put(None)
        for commit in self.commits.values():
            commit.close(timeout=5)

    def drain(self, grace: float) -> None:
        """Waits up to `grace` seconds for the running jobs to be settled."""
        deadline = time.monotonic() + grace
        while self.running and time.monotonic() < deadline:
            self.freed.clear()
            self.freed.wait(0.05)
        if self.running:
            log.warning("%d jobs still running after the grace period: left to recovery", self.running)

    # -- the slots -------------------------------------------------------------

    @property
    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def free(self) -> int:
        """Slots the beat may claim for."""
        with self._lock:
            return self._unheld()

    def _unheld(self) -> int:
        """(Under the lock.) Slots neither running a job nor held for a group
        commit's claim."""
        return max(0, self.options.concurrency - len(self._running) - self._held)

    def wait_for_a_slot(self, timeout: float) -> None:
        """Waits up to `timeout` seconds for a slot to come free, when none is."""
        self.freed.clear()
        if self.free() == 0:
            self.freed.wait(timeout)

    def running_jobs(self) -> list[tuple[Job, Queue]]:
        with self._lock:
            return list(self._running.values())

    def runs_unfinished(self, job: Job) -> bool:
        """The job runs here and its handler has not returned."""
        with self._lock:
            return job.token in self._running and job.token not in self._finishing

    # -- running jobs --------------------------------------------------------

    def hand(self, job: Job, queue: str) -> None:
        """Takes a slot for a job the beat claimed from `queue`, and hands it to a handler thread."""
        with self._lock:
            self._running[job.token] = (job, self._works[queue])
        self._jobs.put(job)

    def _handle(self) -> None:
        """A handler thread: runs jobs until it is handed None."""
        while (job := self._jobs.get()) is not None:
            self._run_job(job)

    def _run_job(self, job: Job) -> None:
        """Runs the handler; the job, done or failed, is handed to its queue's
        group commit and holds its slot until the commit answers (`_committed`)."""
        with self._lock:
            work = self._running[job.token][1]
        try:
            self.options.handler(job)
        except BaseException as e:
            if not isinstance(e, Exception):  # an interrupt: the job is left to recovery
                self._release(job)
                raise
            log.info("job %s failed: %s", job.id, e)
            with self._lock:
                self._finishing.add(job.token)
                self._failing.add(job.token)
            self.commits[work.name].failed(job, e)
        else:
            with self._lock:
                self._finishing.add(job.token)
            self.commits[work.name].finished(job)

    def _reserve(self, finishing: int) -> int:
        """How many jobs a commit of `finishing` jobs may claim: the slots it
        frees, and those free now, held for it (the beat claims none of them)
        until `_committed` gives them back; none once the worker stops."""
        if self.shutdown.stopping.is_set():
            return 0
        with self._lock:
            free = self._unheld()
            self._held += free
        return finishing + free

    def _committed(self, work: Queue, answers: list[tuple[Job, bool | FailOutcome | None]], claimed: list[Job], held: int) -> None:
        """A group commit's outcome: its jobs leave their slots, the jobs it
        claimed take them (at once, so the beat never sees them free in
        between), and the slots it held are given back."""
        with self._lock:
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
            self.freed.set()

    def _release(self, job: Job) -> None:
        with self._lock:
            self._running.pop(job.token, None)
        self.freed.set()

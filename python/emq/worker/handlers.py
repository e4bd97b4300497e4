"""The handler pool: runs each claimed job on one of `concurrency` threads, and counts the slots they hold.

A job holds its slot from its claim until its queue's group commit answers for
it (done, failed or refused), not only while its handler runs: the beat claims
only for slots that are free. A worker of one queue has its commits claim too,
into the slots they free and the free ones, which they hold meanwhile.

A handler's run ends as `emq.worker.outcomes` says: a return (its `Done`
result), a raise or a `Failed` (logged at WARNING with its traceback on
`emq.worker`, and written to the row), or a future of these, which the job
holds its slot for, not a thread. A handler with `start_job(job, queue)` (the
task runner) is called so, with the worker's queue of the job; one with
`cancel_job(job)` is told of the jobs asked to stop (the beat reads them).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
import queue as _queue
import threading
import time
from collections.abc import Iterable
from typing import Any

from .._core import Job
from ..answers import FailOutcome
from ..queue import Queue
from .counters import Counters
from .group_commit import GroupCommit
from .options import Options
from .outcomes import Done, Failed
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
        self._stopping: set[str | None] = set()  # running jobs asked to stop (`Queue.cancel`)
        self._start = getattr(options.handler, "start_job", None)
        self._cancel = getattr(options.handler, "cancel_job", None)
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
            out = self._start(job, work) if self._start is not None else self.options.handler(job)
        except BaseException as e:
            if not isinstance(e, Exception):  # an interrupt: the job is left to recovery
                self._release(job)
                raise
            if e.__traceback__ is not None and e.__traceback__.tb_next is not None:
                e = e.with_traceback(e.__traceback__.tb_next)  # from the handler's frame on: what the log and the row show
            self._ended(job, work, Failed(e))
            return
        if isinstance(out, concurrent.futures.Future):
            # The job holds its slot, not this thread, until the future is done.
            out.add_done_callback(functools.partial(self._future_done, job, work))
            return
        self._ended(job, work, out)

    def _future_done(self, job: Job, work: Queue, future: concurrent.futures.Future[Any]) -> None:
        try:
            out = future.result()
        except concurrent.futures.CancelledError:  # its loop went away: left to recovery
            self._release(job)
            return
        except Exception as e:
            out = Failed(e)
        self._ended(job, work, out)

    def _ended(self, job: Job, work: Queue, out: object) -> None:
        """The run is over: hands the job to its commit with its result, or its failure."""
        if isinstance(out, Failed):
            e = out.error
            if out.cancelled:
                log.info("job %s stopped: it was asked to", job.id)
            else:
                how = "permanent" if out.permanent else f"attempt {job.attempts} of {job.max_attempts}"
                log.warning("job %s failed (%s): %s: %s", job.id, how, type(e).__name__, e, exc_info=(type(e), e, e.__traceback__))
            with self._lock:
                self._finishing.add(job.token)
                self._failing.add(job.token)
            self.commits[work.name].failed(job, out)
            return
        with self._lock:
            self._finishing.add(job.token)
        self.commits[work.name].finished(job, out.result if isinstance(out, Done) else None)

    def asked_to_stop(self, queue: str, ids: Iterable[str]) -> int:
        """Tells the handler of the running jobs of `queue` among `ids` that they
        were asked to stop; how many it told (a job is told once)."""
        wanted = set(ids)
        with self._lock:
            jobs = [
                job
                for token, (job, work) in self._running.items()
                if work.name == queue and job.id in wanted and token not in self._stopping and token not in self._finishing
            ]
            self._stopping.update(job.token for job in jobs)
        for job in jobs:
            log.info("job %s was asked to stop", job.id)
            if self._cancel is not None:
                self._cancel(job)
        return len(jobs)

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
            # A job asked to stop that completed anyway is cancelled too (the core makes it so).
            stopped = sum(1 for job, a in answers if a is True and job.token in self._stopping)
            for job, _ in answers:
                self._running.pop(job.token, None)
                self._finishing.discard(job.token)
                self._failing.discard(job.token)
                self._stopping.discard(job.token)
            self._held -= held
            for job in claimed:
                self._running[job.token] = (job, work)
            free = self._unheld()
        self.counters.add(
            completed=sum(1 for _, a in answers if a is True) - stopped,
            failed=failed,
            retried=sum(1 for _, a in answers if a is FailOutcome.SCHEDULED),
            dead=sum(1 for _, a in answers if a is FailOutcome.DEAD),
            cancelled=stopped + sum(1 for _, a in answers if a is FailOutcome.CANCELLED),
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
            self._stopping.discard(job.token)
        self.freed.set()

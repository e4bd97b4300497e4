"""The lease keeper: extends the leases of a worker's running jobs every third of a lease, so that recovery leaves them be.

It keeps extending until `run()` is over, finished jobs included until their
commit answers; jobs left running after the grace period then lose their
leases, and recovery takes them.
"""

from __future__ import annotations

import logging
import threading

from .._core import Job
from ..errors import EmqError
from ..queue import Queue
from .counters import Counters
from .handlers import Handlers
from .shutdown import FATAL, Shutdown

log = logging.getLogger("emq.worker")


class LeaseKeeper:
    """The thread that extends the leases of the jobs `handlers` runs."""

    def __init__(self, handlers: Handlers, lease: float, counters: Counters, shutdown: Shutdown):
        self.handlers = handlers
        self.lease = lease
        self.counters = counters
        self.shutdown = shutdown
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._keep, name="emq-leases", daemon=True)
        self._thread.start()

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _keep(self) -> None:
        every = self.lease / 3
        while not self.shutdown.over.wait(every):
            # One call per queue extends all of its running jobs.
            by_queue: dict[str, tuple[Queue, list[Job]]] = {}
            for job, work in self.handlers.running_jobs():
                by_queue.setdefault(work.name, (work, []))[1].append(job)
            for work, jobs in by_queue.values():
                try:
                    kept = work.extend_many(jobs, self.lease)
                except FATAL as e:
                    self.shutdown.give_up(e)
                    continue
                except EmqError as e:
                    log.warning("extending %d jobs of %s: %s", len(jobs), work.name, e)
                    continue
                for job, ok in zip(jobs, kept):
                    # A finished job's commit may have made it done before this
                    # extend ran; one whose lease was lost, its commit refuses.
                    if not ok and self.handlers.runs_unfinished(job):
                        self.counters.add(lost_leases=1)
                        log.warning("lease of job %s was lost", job.id)

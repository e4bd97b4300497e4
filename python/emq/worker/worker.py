"""`emq.Worker`: runs a queue's jobs in this process, composed of its parts (see the package's doc)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence

from .._core import Job
from ..queue import Duration, Queue
from .beat import Beat
from .connections import Connections
from .counters import Counters
from .handlers import Handlers
from .leases import LeaseKeeper
from .options import Options, OptionValues, Recovery
from .parking import ManyQueuesPark, OneQueuePark, Park
from .registry import Heartbeat
from .shutdown import Shutdown

log = logging.getLogger("emq.worker")


class Worker(OptionValues):
    """Runs `handler(job)` for the queue's jobs, `concurrency` at a time. `queue`
    may be a list of queues (on one server, or on any nodes of a cluster): one
    beat serves them all, and a token on any of them wakes it.

    A handler that returns completes the job (a returned `emq.worker.Done`
    writes its result to the row); one that raises fails it (retried with
    backoff while attempts are left, then dead; an `emq.PermanentJobError`
    dead at once), its error, type and traceback written to the row and logged
    at WARNING on `emq.worker`; a returned `emq.worker.Failed` says more (its
    `retry_in`, that no retry mends it). `emq.tasks.TaskRunner` is such a
    handler, for an app's tasks: as `run()` starts, the app's declared
    schedules are written (a handler's `worker_starting(queues)`). `run()` blocks until
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
        options = Options.check(
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
        self.options = options
        self.counters = Counters()
        self._shutdown = Shutdown()
        conns = Connections.open(options)
        self._handlers = Handlers(options, conns.works, self.counters, self._shutdown)
        self._park: Park
        if len(options.queues) == 1:
            self._park = OneQueuePark(options, self._shutdown, conns.parks[0], conns.beats[0].client)
        else:
            self._park = ManyQueuesPark(options, self._shutdown, conns.parks)
        self._beat = Beat(options, conns.beats, self._handlers, self._park, self.counters, self._shutdown)
        self._leases = LeaseKeeper(self._handlers, options.lease, self.counters, self._shutdown)
        self._heartbeat = Heartbeat(options.queue.client, options.queues, options.concurrency, self.counters, self._handlers.running_jobs)
        self._shutdown.on_stop(self._handlers.freed.set)
        self._shutdown.on_stop(self._park.stop)

    def stop(self) -> None:
        """Stop claiming; `run()` returns once running jobs finish (or `grace`)."""
        self._shutdown.stop()

    @property
    def running(self) -> int:
        return self._handlers.running

    def run(self) -> dict[str, int]:
        """The beat loop; returns the counters when it stops, or raises the
        fatal error that stopped it (see `emq.worker`)."""
        starting = getattr(self.options.handler, "worker_starting", None)
        if starting is not None:
            starting(self.options.queues)  # an app's declared schedules, written before any job runs
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        self._handlers.start()
        self._leases.start()
        self._heartbeat.start()
        self._park.start()
        # The time to live ends a park too, as `stop()` does (a park may be long: `idle_beat`).
        ttl = None
        if self.options.ttl is not None:
            ttl = threading.Timer(self.options.ttl, self._ttl_reached)
            ttl.daemon = True
            ttl.start()
        queues = ", ".join(map(str, self.options.queues))
        log.info("worker on %s: concurrency %d, beat %g s", queues, self.options.concurrency, self.options.beat)
        stopping = self._shutdown.stopping
        try:
            while not stopping.is_set():  # the time to live's timer stops it too
                self._beat.once()
        finally:
            if ttl is not None:
                ttl.cancel()
            stopping.set()
            self._handlers.drain(self.options.grace)
            self._shutdown.over.set()
            self._park.end()
            self._handlers.close()
            self._leases.join(timeout=5)
            self._heartbeat.stop()
        if self._shutdown.error is not None:
            raise self._shutdown.error
        return self.counters.snapshot()

    def _ttl_reached(self) -> None:
        log.info("time to live reached")
        self.stop()

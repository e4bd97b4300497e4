"""How a worker stops: which errors stop it, how long it backs off from the others, and the two stages of a stop.

`FATAL` are the errors no retry mends (the package's doc says which); any
other `emq.EmqError` degrades a beat, which backs off (`degraded_sleep`) and
tries again. A stop comes in two stages: `stopping` (claim nothing more;
running jobs may finish within the grace period), then `over` (`run()` is
over: leases are no longer extended, commits no longer retried).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from .._core import backoff_s
from ..errors import (
    ArgumentError,
    AuthenticationError,
    EmqError,
    LayoutError,
    ModuleMissingError,
    PermissionError,
    ScriptingError,
)

log = logging.getLogger("emq.worker")

# Errors no retry mends: the worker stops with them.
FATAL = (ArgumentError, LayoutError, AuthenticationError, PermissionError, ScriptingError, ModuleMissingError)


def degraded_sleep(streak: int, *, base_ms: int = 50, cap_ms: int = 5000) -> float:
    """Seconds to back off after `streak` failed beats: growing, capped, jittered."""
    return backoff_s(streak, base_ms, cap_ms)


class Shutdown:
    """A worker's stop: what `stop()` sets and wakes, and the fatal error `run()` raises."""

    def __init__(self) -> None:
        self.stopping = threading.Event()  # claim nothing more
        self.over = threading.Event()  # run() is over: stop extending leases
        self.error: EmqError | None = None  # the fatal error that stopped the worker
        self._wakers: list[Callable[[], None]] = []

    def on_stop(self, wake: Callable[[], None]) -> None:
        """`wake` runs at each stop, after `stopping` is set (a part's waits end)."""
        self._wakers.append(wake)

    def stop(self) -> None:
        self.stopping.set()
        for wake in self._wakers:
            wake()

    def give_up(self, e: EmqError) -> None:
        """A fatal error: stop claiming; `run()` raises it once running jobs end."""
        if self.error is None:
            self.error = e
            log.error("stopping: %s", e)
        self.stop()

    def settle(self, call: Callable[[], object]) -> object:
        """Runs a group commit's `call`, retrying through the server's errors
        until `run()` is over (None then): the lease keeper extends the leases
        of finished jobs until their commit answers, and a commit that comes
        after a lease was lost is refused for that job, harmlessly. A fatal
        error stops the worker (None)."""
        streak = 0
        while True:
            try:
                return call()
            except FATAL as e:
                self.give_up(e)
                return None
            except EmqError as e:
                streak += 1
                if self.over.is_set():
                    log.warning("gave up settling a job: %s", e)
                    return None
                time.sleep(degraded_sleep(streak))

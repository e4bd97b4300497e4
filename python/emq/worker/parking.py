"""Parking: the threads that block on a queue's `wake` list, so that a token wakes the beat at once.

The beat itself waits on `woken`, on its own clock, for the next due time (to
the 0.1 ms): the server times out a blocking pop only on its tick (every 1/hz
s, 100 ms by default), and a pop left blocking past the beat's wait costs the
due job nothing. Two protocols:

- one queue (`OneQueuePark`): the park thread pops only while the beat wants it
  (it parks with a free slot: a worker with none would take the tokens meant
  for workers with room), and the beat ends a pop it no longer wants with
  `CLIENT UNBLOCK`; where this user may not, each pop lasts a beat at most;
- several queues (`ManyQueuesPark`): a park thread a queue, each popping its
  queue's `wake` for up to `idle_beat` at a time, until the worker stops.
"""

from __future__ import annotations

import threading
import time

from .._core import Client
from ..errors import EmqError, PermissionError
from .options import Options
from .shutdown import FATAL, Shutdown, degraded_sleep


class Park:
    """What the beat asks of parking; each protocol does what it needs of it."""

    def __init__(self, options: Options, shutdown: Shutdown):
        self.options = options
        self.shutdown = shutdown
        self.woken = threading.Event()  # a park thread popped a token (or the worker stops)

    def start(self) -> None:
        """Starts the park threads."""

    def check(self) -> None:
        """Raises what the last pop raised, if anything (on the beat's thread)."""

    def arm(self) -> None:
        """The beat is about to wait on `woken` with a slot free."""

    def end_pop(self) -> None:
        """The beat has no free slot: a pop now would take tokens meant for workers with room."""

    def stop(self) -> None:
        self.woken.set()

    def end(self) -> None:
        """`run()` is over: the park threads end."""


class OneQueuePark(Park):
    """The park thread of a worker of one queue, and its `CLIENT UNBLOCK`s."""

    def __init__(self, options: Options, shutdown: Shutdown, park: Client, unblocker: Client):
        super().__init__(options, shutdown)
        self.name = options.queue.name
        self._park = park
        self._unblocker = unblocker  # the beat's connection: it unblocks the park's
        self._pop_wanted = threading.Event()  # the beat wants the park thread to pop `wake`
        self._pop_error: Exception | None = None  # what the last pop raised
        self._park_id: int | None = None
        self._parking = False  # the park connection is blocked on `wake` (or about to be)
        self._ending_park = False
        self._can_unblock = True
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._pop_loop, name=f"emq-park-{self.name}", daemon=True)
        self._thread.start()

    def check(self) -> None:
        e, self._pop_error = self._pop_error, None
        if e is not None:
            raise e

    def arm(self) -> None:
        self._pop_wanted.set()

    def stop(self) -> None:
        super().stop()
        self._pop_wanted.set()  # the park thread ends
        # A park blocks for up to a beat: end it now, where this user may (until
        # run() is over: the stop may come just before the pop blocks).
        if self._can_unblock and not self._ending_park:
            self._ending_park = True
            threading.Thread(target=self._end_park, name="emq-stop", daemon=True).start()

    def end(self) -> None:
        self._pop_wanted.set()  # the park thread ends (a last `end_pop` may have cleared it)

    def _end_park(self) -> None:
        # Until the park thread is gone, not only until run() is over: a pop that
        # began just as the stop came, left blocking, would take the wake tokens
        # meant for the queue's other workers for up to `idle_beat`.
        deadline = time.monotonic() + self.options.idle_beat + 5
        thread = self._thread
        while thread is not None and thread.is_alive() and time.monotonic() < deadline and self._can_unblock:
            park_id = self._park_id
            if self._parking and park_id is not None:
                try:
                    self._unblocker._unblock(park_id, self.name)
                except EmqError:
                    return
            time.sleep(0.02)

    def _pop_loop(self) -> None:
        """Pops `wake` while the beat wants it (`arm`), a beat at a time where
        this user may not CLIENT UNBLOCK (so that a stop is served within a
        beat); a token wakes the beat, which asks again when it parks again.
        Ends with a stop."""
        stopping = self.shutdown.stopping
        while True:
            self._pop_wanted.wait()
            if stopping.is_set():
                return
            try:
                self._park_client_id()  # the park connection is free: read its id once
                chunk = self.options.idle_beat if self._can_unblock else self.options.beat
                self._parking = True
                # A beat that no longer wants the pop saw `_parking` false, or sees it
                # true and unblocks it (`end_pop`); so does a stop (`_end_park`).
                token = self._pop_wanted.is_set() and not stopping.is_set() and self._park._park(self.name, chunk)
            except Exception as e:  # the beat raises it (`check`)
                self._pop_error, token = e, True
                self._park_id = None  # the connection may come back as another client
            finally:
                self._parking = False
            if token:
                self._pop_wanted.clear()
                self.woken.set()

    def end_pop(self) -> None:
        """Ends the park thread's pop, if one blocks and this user may."""
        self._pop_wanted.clear()
        for _ in range(100):  # an id that never unblocks is stale: read it again later
            park_id = self._park_id if self._can_unblock else None
            if not self._parking or park_id is None:
                return
            try:
                if self._unblocker._unblock(park_id, self.name):
                    return
            except PermissionError:
                self._can_unblock = False
                return
            time.sleep(0.0002)  # not blocking yet
        self._park_id = None

    def _park_client_id(self) -> int | None:
        """The park connection's CLIENT ID, or None where this user may not
        unblock clients (then its pops last a beat at a time)."""
        if self._park_id is None and self._can_unblock:
            try:
                self._park_id = self._park._client_id(self.name)
            except PermissionError:
                self._can_unblock = False
        return self._park_id if self._can_unblock else None


class ManyQueuesPark(Park):
    """The park threads of a worker of several queues: a token on any of them wakes the beat."""

    def __init__(self, options: Options, shutdown: Shutdown, parks: list[Client]):
        super().__init__(options, shutdown)
        self._parks = parks

    def start(self) -> None:
        for park, q in zip(self._parks, self.options.queues):
            threading.Thread(target=self._park_on, args=(park, q.name), name=f"emq-park-{q.name}", daemon=True).start()

    def _park_on(self, park: Client, name: str) -> None:
        """Blocks on the queue's `wake` for up to `idle_beat` at a time, and
        wakes the beat when a token comes."""
        streak = 0
        while not self.shutdown.stopping.is_set():
            try:
                if park._park(name, self.options.idle_beat):
                    self.woken.set()
                streak = 0
            except FATAL as e:
                self.shutdown.give_up(e)
            except EmqError:  # backs off, as a degraded beat does
                streak += 1
                self.shutdown.stopping.wait(degraded_sleep(streak))

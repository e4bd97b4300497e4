"""Waiting for outcomes: one collector per app and queue, so that any number of waits cost one connection and one blocking pop.

A wait (`Handle.result`, `Handle.result_async`) registers with the collector
of its queue and waits on a `threading.Event` (sync) or an asyncio future
(resolved with `loop.call_soon_threadsafe`, so the loop never blocks). The
collector has two threads:

- the registrar takes the new waits in batches and registers them with their
  jobs in one guarded call (`Queue.watch`, on the app's connection): an
  outcome already known, or a job with no row, is answered at once;
- the popper owns a connection of its own, blocks on the collector's inbox
  (`Queue.pop_inbox`: the call that brings a watched job to its outcome pushes
  its id there, in the same transaction), reads the rows of the ids it pops
  (one pipelined status read, on that connection), and resolves their waits.

Once the collector runs, the app's enqueues on its queue register the
collector's inbox with each job in the add's own transaction (`add_waited`):
a wait for such a job then needs no registration at all, so enqueue-and-wait
is one round trip and the wait is a dictionary insert. The collector keeps
those ids (`expect`) until their outcomes arrive; an outcome that arrives
while the add that made the job is still returning is held for it
(`_arrived`), so none is missed. A job nobody waits for whose enqueuer has a
collector costs its settle the push to the inbox (the popper drops its id).

Nothing polls. A pop that failed (the connection broke: an id popped may be
lost with the reply) registers every open wait again, which answers what
ended meanwhile. `close()` ends the pop at once (`CLIENT UNBLOCK`; where this
user may not, a pop lasts `POP_CHUNK_NO_UNBLOCK_S` at most) and joins both
threads; open waits then raise `emq.ConnectionError`.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import threading
from collections.abc import Callable
from typing import Any

from .._core import Client, Job
from ..errors import ConnectionError, EmqError, JobNotFoundError, PermissionError
from ..queue import Queue

log = logging.getLogger("emq.tasks")

POP_CHUNK_S = 30.0
"""The longest blocking pop (s): it is ended at once by `close()`, so only its
read timeout bounds it."""

POP_CHUNK_NO_UNBLOCK_S = 1.0
"""The longest blocking pop where this user may not `CLIENT UNBLOCK`: how long a
`close()` may wait for it."""

REGISTER_BATCH = 1000
"""The most waits one `watch` registers."""

EXPECTED_MAX = 1_000_000
"""The most ids registered at their add whose outcomes have not arrived: past
it the collector forgets them all (their waits then register with `watch`)."""

Outcome = Callable[[Job | None, BaseException | None], None]


class Wait:
    """One wait for one job's outcome: resolved once, with the job's row (ended),
    None (no such job) or an error, from any thread."""

    __slots__ = ("id", "_tell", "_done", "_lock")

    def __init__(self, id: str, tell: Outcome):
        self.id = id
        self._tell = tell
        self._done = False
        self._lock = threading.Lock()

    def resolve(self, row: Job | None, error: BaseException | None = None) -> bool:
        with self._lock:
            if self._done:
                return False
            self._done = True
        self._tell(row, error)
        return True

    @property
    def done(self) -> bool:
        return self._done


class Collector:
    """The waits of one app on one queue (see the module's doc)."""

    def __init__(self, queue: Queue):
        self.queue = queue  # on the app's connection: the registrar's watches
        self.inbox = secrets.token_hex(16)
        self._waits: dict[str, list[Wait]] = {}
        self._new: list[Wait] = []
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._closing = threading.Event()
        self._pop_client: Client | None = None
        self._pop_queue: Queue | None = None  # the queue on the pop's connection: its status reads
        self._pop_id: int | None = None
        self._can_unblock = True
        self._popping = False
        # Ids registered with the inbox by their add, outcome not yet arrived; the
        # adds in flight; outcomes of unknown ids that arrived while adds were in
        # flight (for the add that is still returning); and the epoch, bumped when
        # `_expected` is dropped (a failed pop, or too many).
        self._expected: set[str] = set()
        self._adding = 0
        self._arrived: set[str] = set()
        self._epoch = 0
        self._popper = threading.Thread(target=self._pop_loop, name=f"emq-results-{queue.name}", daemon=True)
        self._registrar = threading.Thread(target=self._register_loop, name=f"emq-watch-{queue.name}", daemon=True)
        self._popper.start()
        self._registrar.start()

    # -- adds that register --------------------------------------------------------

    def adding(self) -> int:
        """Says an add with this collector's inbox is about to be sent; the
        token for `added`."""
        with self._lock:
            self._adding += 1
            return self._epoch

    def added(self, token: int, id: str | None) -> bool:
        """The add of `adding()` returned, with the job it registered (`id`;
        None: it failed, or wrote no row): whether a wait for it may skip its
        registration (`wait(..., registered=True)`)."""
        with self._lock:
            self._adding -= 1
            expected = False
            if id is not None and token == self._epoch and not self._closing.is_set():
                if id in self._arrived:
                    self._arrived.discard(id)  # came already: a wait registers, and is answered at once
                elif len(self._expected) >= EXPECTED_MAX:
                    self._drop_expected()
                else:
                    self._expected.add(id)
                    expected = True
            if self._adding == 0:
                self._arrived.clear()
            return expected

    def _drop_expected(self) -> None:
        """Forgets every id registered at its add (under the lock): their waits
        register with `watch`, which answers what came meanwhile."""
        self._expected.clear()
        self._arrived.clear()
        self._epoch += 1

    # -- waits ------------------------------------------------------------------------

    def wait(self, id: str, tell: Outcome, *, registered: bool = False) -> Wait:
        """A new wait for job `id`: `tell(row, error)` is called once, from the
        collector's threads (or this one, when the collector is closed).
        `registered`: its add registered this collector's inbox (`added`);
        while the outcome is still expected the wait sends nothing."""
        w = Wait(id, tell)
        with self._lock:
            if self._closing.is_set():
                closed = True
            else:
                closed = False
                self._waits.setdefault(id, []).append(w)
                if not (registered and id in self._expected):
                    self._new.append(w)
                    self._wake.notify()
        if closed:
            w.resolve(None, ConnectionError("Handle.result: the app was closed"))
        return w

    def forget(self, w: Wait) -> None:
        """A wait that timed out, or whose caller went away: it is told nothing more."""
        with self._lock:
            waits = self._waits.get(w.id)
            if waits is not None and w in waits:
                waits.remove(w)
                if not waits:
                    del self._waits[w.id]

    def open_waits(self) -> int:
        with self._lock:
            return sum(len(ws) for ws in self._waits.values())

    def _take(self, id: str) -> list[Wait]:
        with self._lock:
            return self._waits.pop(id, [])

    def _answer(self, row: Job | None, id: str) -> None:
        """Resolves every wait for `id` with its row (ended), or as unknown."""
        for w in self._take(id):
            w.resolve(row, None if row is not None else JobNotFoundError(f"Handle.result: no job {id!r} on queue {self.queue.name!r}"))

    # -- the registrar --------------------------------------------------------------

    def _register_loop(self) -> None:
        while True:
            with self._lock:
                while not self._new and not self._closing.is_set():
                    self._wake.wait()
                if self._closing.is_set():
                    return
                batch, self._new = self._new[:REGISTER_BATCH], self._new[REGISTER_BATCH:]
            self._register([w for w in batch if not w.done])

    def _register(self, batch: list[Wait]) -> None:
        ids = list(dict.fromkeys(w.id for w in batch))
        if not ids:
            return
        try:
            rows = self.queue.watch(ids, self.inbox)
        except Exception as e:  # noqa: BLE001 - told to the waits, which raise it in their callers
            for w in batch:
                self.forget(w)
                w.resolve(None, e)
            return
        for id, row in zip(ids, rows):
            if row is None or row.ended:
                self._answer(row, id)

    # -- the popper -----------------------------------------------------------------

    def _pop_loop(self) -> None:
        streak = 0
        while not self._closing.is_set():
            try:
                if self._pop_client is None:
                    self._pop_client = self.queue.client.sibling(read_timeout=None)
                    self._pop_queue = Queue(self._pop_client, self.queue.name)
                    self._pop_id = None
                    if self._can_unblock:
                        try:
                            self._pop_id = self._pop_client._client_id(self.queue.name)
                        except PermissionError:
                            self._can_unblock = False
                chunk = POP_CHUNK_S if self._can_unblock else POP_CHUNK_NO_UNBLOCK_S
                self._popping = True
                try:
                    if self._closing.is_set():
                        return
                    ids = self.queue.pop_inbox(self.inbox, chunk, client=self._pop_client)
                finally:
                    self._popping = False
                streak = 0
                if ids:
                    self._settled(list(dict.fromkeys(ids)))
            except EmqError as e:
                if self._closing.is_set():
                    return
                streak += 1
                log.warning("waiting for results on %s: %s; registering the open waits again", self.queue.name, e)
                self._drop_pop_client()
                with self._lock:
                    self._drop_expected()  # an id popped may be lost with the reply
                    again = [w for ws in self._waits.values() for w in ws]
                    self._new.extend(again)
                    self._wake.notify()
                threading.Event().wait(min(5.0, 0.05 * 2**streak))

    def _settled(self, ids: list[str]) -> None:
        """Reads the rows of the ids popped (one pipelined read) and resolves their waits."""
        with self._lock:
            for id in ids:
                if id in self._expected:
                    self._expected.discard(id)
                elif self._adding and id not in self._waits:
                    self._arrived.add(id)  # perhaps the job of an add still returning
            if len(self._arrived) > EXPECTED_MAX:
                self._drop_expected()
            wanted = [id for id in ids if id in self._waits]
        if not wanted:
            return
        assert self._pop_queue is not None
        rows = self._pop_queue.status(wanted)
        for id, row in zip(wanted, rows):
            if row is None or row.ended:
                self._answer(row, id)

    def _drop_pop_client(self) -> None:
        client, self._pop_client, self._pop_queue, self._pop_id = self._pop_client, None, None, None
        if client is not None:
            try:
                client.close()
            except EmqError:
                pass

    # -- closing ----------------------------------------------------------------------

    def close(self, unblocker: Client | None) -> None:
        """Ends both threads (the pop at once, with `unblocker`'s `CLIENT UNBLOCK`),
        closes the pop's connection, and fails the open waits."""
        with self._lock:
            if self._closing.is_set():
                return
            self._closing.set()
            self._wake.notify_all()
            open_waits = [w for ws in self._waits.values() for w in ws] + self._new
            self._waits.clear()
            self._new = []
        for _ in range(500):
            if not self._popper.is_alive():
                break
            pop_id = self._pop_id
            if self._popping and pop_id is not None and unblocker is not None and self._can_unblock:
                try:
                    unblocker._unblock(pop_id, self.queue.name)
                except EmqError:
                    pass
            self._popper.join(0.01)
        self._popper.join(POP_CHUNK_NO_UNBLOCK_S + 5)
        self._registrar.join(5)
        self._drop_pop_client()
        for w in open_waits:
            w.resolve(None, ConnectionError("Handle.result: the app was closed while waiting"))


def future_teller(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any]) -> Outcome:
    """A wait's `tell` that resolves an asyncio future on its loop, from any thread."""

    def set_on_loop(row: Job | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(row)

    def tell(row: Job | None, error: BaseException | None) -> None:
        try:
            loop.call_soon_threadsafe(set_on_loop, row, error)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    return tell


__all__ = ["EXPECTED_MAX", "POP_CHUNK_S", "REGISTER_BATCH", "Collector", "Wait", "future_teller"]

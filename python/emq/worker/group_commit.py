"""Settles a queue's finished jobs together: one commit for every job that finished while the last was on the wire.

The commit thread starts with the first finished job; a job alone is settled at
once, with no added wait. A worker of one queue has its commits claim the slots
they free too (`Queue.complete_and_claim`), so a busy worker claims without a beat.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .._core import Job
from ..answers import FailOutcome
from ..queue import Duration, Queue, Result
from .outcomes import Failed, traceback_text

log = logging.getLogger("emq.worker")

Answer = Callable[[Job, "bool | FailOutcome | None"], None]


class GroupCommit:
    """Settles the finished jobs of one queue together (SPEC §8): a group commit.

    A handler thread whose job finished hands it over (`finished`, or `failed`
    when its handler raised) and goes back for its next job at once. The commit
    thread completes every job that has finished by then in one `complete_many`
    (each answered as `complete` alone would: refused alone when its lease was
    lost), or, when any of them failed, completes and fails them all in one
    `settle_many` (each answered as `complete` or `fail` alone would); jobs
    that finish while a commit is on the wire go together in the next. Alone,
    a job is completed at once, with no added wait. A job id held twice (a run
    whose lease was lost, and the new run) goes in separate commits. The thread
    starts with the first job and ends with `close`.

    With `reserve`, a commit also claims the worker's next jobs in the same
    transaction (`Queue.complete_and_claim`): `reserve(k)` says how many a
    commit of `k` jobs may take (the slots it frees, and any free now, which
    the worker holds for it; a commit with a failed job claims nothing).
    `committed(answers, claimed, reserve(k) - k)` then gets each job's answer
    (True: done; False: its lease was lost; for a failed job, `fail`'s answer;
    None: gave up, as the server stayed unreachable for a lease or an error
    stopped the worker), the jobs taken, and the extra slots it held, in one
    call.
    """

    MAX = 1000  # jobs a commit
    ALONE_MAX = 64  # most commits in a row without a claim after a dropped one

    def __init__(
        self,
        work: Queue,
        settle: Callable[[Callable[[], object]], object],
        committed: Callable[[list[tuple[Job, bool | FailOutcome | None]], list[Job], int], None] | None = None,
        *,
        reserve: Callable[[int], int] | None = None,
        lease: Duration = 30,
    ):
        self.work = work
        self._settle = settle
        self._committed = committed or (lambda answers, claimed, held: None)
        self._reserve = reserve
        self._lease = lease
        self._cond = threading.Condition()
        # Finished jobs, each with whom to tell its answer (None: `committed`)
        # and its result, or for a failed one its failure.
        self._finished: list[_Item] = []
        self._thread: threading.Thread | None = None
        self._closed = False
        self.commits = 0
        self._alone = 0  # commits without a claim after the last dropped one
        self._alone_next = 0  # of which are left

    def finished(self, job: Job, result: Result | None = None) -> None:
        """Hands a finished job over, with its `result` (written to its row as
        it completes); its answer comes to `committed`."""
        self._put(job, None, result)

    def failed(self, job: Job, error: BaseException | Failed) -> None:
        """Hands over a job whose handler raised `error` (or said how it failed:
        a `Failed`): it is failed, with its error's type and traceback (retried
        or dead, as `fail` decides; dead at once when no retry mends it), and
        its answer comes to `committed`."""
        self._put(job, None, None, error if isinstance(error, Failed) else Failed(error))

    def complete(self, job: Job) -> bool | None:
        """Hands a finished job over and waits for its answer."""
        got = threading.Event()
        answer: list[bool | None] = [None]

        def tell(_: Job, a: bool | FailOutcome | None) -> None:
            answer[0] = a if not isinstance(a, FailOutcome) else None  # a completed job's answer is never a fail's
            got.set()

        self._put(job, tell)
        got.wait()
        return answer[0]

    def close(self, timeout: float | None = None) -> None:
        """Ends the commit thread once every job handed over is answered (waits
        up to `timeout` seconds for it)."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _put(self, job: Job, tell: Answer | None, result: Result | None = None, failure: Failed | None = None) -> None:
        with self._cond:
            self._finished.append(_Item(job, tell, result, failure))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"emq-commit-{self.work.name}", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _take(self) -> list[_Item]:
        """(Under the lock.) The next commit's jobs, in the order they
        finished: no id twice."""
        batch: list[_Item] = []
        ids: set[str] = set()
        rest = []
        for item in self._finished:
            if len(batch) < self.MAX and item.job.id not in ids:
                ids.add(item.job.id)
                batch.append(item)
            else:
                rest.append(item)
        self._finished = rest
        return batch

    def _commit(self, batch: list[_Item], n: int) -> tuple[list[bool | FailOutcome], list[Job]] | None:
        """One commit (and claim of `n`), retried through the server's errors
        as the worker settles; None when it gave up. Only the first try
        claims: after a wire error the commit retries alone, with fewer
        commands to lose, so that its jobs are settled within their leases.
        A claim dropped because another client's write aborted the transaction
        (other claimers, most often) makes the next commits complete alone,
        twice as many each time (at most `ALONE_MAX`), and a claim made halves
        that again: where workers contend for the head of `pending`, their
        beats claim."""
        tries = 0
        if any(item.failure is not None for item in batch):
            items = [item.settle_item() for item in batch]
            settled = self._settle(lambda: self.work.settle_many(items))
            return (settled, []) if isinstance(settled, list) else None
        jobs: list[Job | tuple[Job, Result | None]] = [item.job if item.result is None else (item.job, item.result) for item in batch]

        def call() -> tuple[list[bool], list[Job] | None]:
            nonlocal tries
            tries += 1
            if n > 0 and tries == 1:
                return self.work.complete_and_claim(jobs, n, lease=self._lease)
            return self.work.complete_many(jobs), []

        got = self._settle(call)
        if not isinstance(got, tuple):
            return None
        answers, claimed = got
        if claimed is None:
            self._alone_next = self._alone = min(self.ALONE_MAX, 2 * self._alone or 1)
            return answers, []
        if n > 0 and tries == 1:
            self._alone //= 2
        return answers, claimed

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._finished and not self._closed:
                    self._cond.wait()
                if not self._finished:
                    return
                batch = self._take()
            n = 0
            if self._alone_next:
                self._alone_next -= 1
            elif self._reserve is not None and all(item.failure is None for item in batch):
                n = self._reserve(len(batch))
            got = None
            try:
                got = self._commit(batch, n)
                self.commits += 1
            except BaseException:  # noqa: BLE001 - not a server's error: a bug; the jobs get no answer
                log.exception("completing %d jobs of %s", len(batch), self.work.name)
            answers, claimed = got if got is not None else (None, [])
            mine = []
            for i, item in enumerate(batch):
                answer = answers[i] if answers is not None else None
                if item.tell is not None:
                    item.tell(item.job, answer)
                else:
                    mine.append((item.job, answer))
            self._committed(mine, claimed, max(0, n - len(batch)))


class _Item:
    """A finished job handed to a commit: whom to tell, and its result or its failure."""

    __slots__ = ("job", "tell", "result", "failure")

    def __init__(self, job: Job, tell: Answer | None, result: Result | None, failure: Failed | None):
        self.job = job
        self.tell = tell
        self.result = result
        self.failure = failure

    def settle_item(self) -> Job | dict[str, object]:
        """The item of `settle_many` that settles this job."""
        if self.failure is None:
            return self.job if self.result is None else {"job": self.job, "result": self.result}
        f = self.failure
        item: dict[str, object] = {"job": self.job, "error": f.error, "traceback": traceback_text(f.error)}
        if f.retry_in is not None:
            item["retry_in"] = f.retry_in
        if f.permanent:
            item["retry"] = False
        return item

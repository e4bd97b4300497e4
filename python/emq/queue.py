"""A queue's jobs: add, claim, extend, complete, fail, lanes (SPEC §7).

Every call reads the server's clock once, runs under the same narrow WATCH
guard as the sweeps, keeps the invariants I1 to I5, and writes nothing when it
refuses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from ._core import Client, Job, check_name, check_queue, check_text
from .errors import ArgumentError
from .sweeps import Backend, ClientLike, _client, promote, stalled_check

U64 = 2**64 - 1  # milliseconds and counts the core takes
I64 = 2**63 - 1  # times since the epoch
U32 = 2**32 - 1


def _int(verb: str, name: str, value: Any, *, minimum: int, maximum: int = U64) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentError(f"{verb}: {name} must be an int, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise ArgumentError(f"{verb}: {name} must be from {minimum} to {maximum}, not {value}")
    return value


# `set_retention`: an argument left out leaves the field as it is.
_LEAVE: Any = object()
_POLICY_MAX = 10**15 - 1  # stored fields are read to 15 digits


def _keep_ms(verb: str, name: str, value: Any) -> int | None:
    """Seconds (int or float, >= 0) -> ms; None -> -1 (forever); left out -> None."""
    if value is _LEAVE:
        return None
    if value is None:
        return -1
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArgumentError(f"{verb}: {name} must be a number of seconds or None, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ArgumentError(f"{verb}: {name} must be a finite number of seconds >= 0 or None (forever), not {value}")
    ms = round(value * 1000)
    if value > 0 and ms == 0:
        ms = 1  # under half a millisecond: kept 1 ms, not "deleted at once"
    if ms > _POLICY_MAX:
        raise ArgumentError(f"{verb}: {name} must be at most {_POLICY_MAX // 1000} seconds, not {value}")
    return ms


def _text(verb: str, name: str, value: Any) -> str:
    """A str that encodes to UTF-8 (no lone surrogates)."""
    return check_text(verb, name, value)


def _failure(error: Any, retry_in_ms: Any) -> tuple[bytes, int | None]:
    """FAIL's error (a handler's exception is recorded whatever its text holds)
    and retry delay, checked."""
    if retry_in_ms is not None:
        retry_in_ms = _int("EMQ.FAIL", "retry_in_ms", retry_in_ms, minimum=0)
    if isinstance(error, BaseException):
        error = f"{type(error).__name__}: {error}".encode("utf-8", "backslashreplace")
    if not isinstance(error, (str, bytes, bytearray, memoryview)):
        raise ArgumentError(f"EMQ.FAIL: error must be a str, bytes or an exception, not {type(error).__name__}")
    return _data("EMQ.FAIL", error, "error"), retry_in_ms


def _name(verb: str, what: str, value: Any) -> str:
    """A job id or lane name (SPEC §1: 1 to 256 bytes of UTF-8, no control characters)."""
    return check_name(verb, what, value)


def _data(verb: str, data: Any, what: str = "data") -> bytes:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if isinstance(data, str):
        return check_text(verb, what, data).encode()
    raise ArgumentError(f"{verb}: {what} must be bytes or str, not {type(data).__name__}")


JobBackend = Literal["plan", "module"]
Failure = str | bytes | BaseException  # what `fail` records
FailAnswer = Literal["scheduled", "dead", "refused"]


class Queue:
    """The jobs of one queue: `Queue(client, "orders")`.

    `backend`: who runs the adds, claims, extends, completes and fails (`add`,
    `add_many`, `claim`, `extend`, `extend_many`, `complete`, `complete_many`,
    `complete_and_claim`, `fail`, `settle_many`, and so a worker's on this
    queue). `"plan"` (the default): the Rust core in this process, under its
    `WATCH` guard, on any server. `"module"`: emq's server module (`EMQ.ADD`,
    `EMQ.CLAIM`, `EMQ.EXTEND`, `EMQ.COMPLETE`, `EMQ.SETTLE`: the same plans, run inside
    the server, one round trip a call; README, "The server module"); a server
    without it raises `emq.ModuleMissingError`. Every other call runs the plan
    either way.
    """

    def __init__(self, client: ClientLike, name: str, *, backend: JobBackend = "plan"):
        self.client: Client = _client(client)
        self.name = check_queue("emq.Queue", name)  # SPEC §1, checked once here
        if backend not in ("plan", "module"):
            raise ArgumentError(f'emq.Queue: backend must be "plan" or "module", not {backend!r}')
        self.backend: JobBackend = backend

    @property
    def _module(self) -> bool:
        return self.backend == "module"

    def __repr__(self) -> str:
        more = ", backend='module'" if self._module else ""
        return f"<emq.Queue {self.name!r} on {self.client.address}{more}>"

    # -- adding ---------------------------------------------------------------

    def _job_args(
        self,
        verb: str,
        data: Any,
        id: Any = None,
        delay_ms: Any = 0,
        at_ms: Any = None,
        lane: Any = None,
        max_attempts: Any = 3,
    ) -> tuple[str | None, bytes, int | None, int | None, str | None, int]:
        if id is not None:
            _name(verb, "id", id)
        if lane is not None:
            _name(verb, "lane", lane)
        if at_ms is not None:
            _int(verb, "at_ms", at_ms, minimum=0, maximum=I64)
            if delay_ms:
                raise ArgumentError(f"{verb}: give delay_ms or at_ms, not both")
        delay_ms = _int(verb, "delay_ms", delay_ms, minimum=0)
        max_attempts = _int(verb, "max_attempts", max_attempts, minimum=1, maximum=U32)
        return (id, _data(verb, data), delay_ms, at_ms, lane, max_attempts)

    def add(
        self,
        data: bytes | str,
        *,
        id: str | None = None,
        delay_ms: int = 0,
        at_ms: int | None = None,
        lane: str | None = None,
        max_attempts: int = 3,
    ) -> str:
        """Adds a job; returns its id (generated ids are unique and sort by
        creation). Due now: ready at once; else it waits in `schedule`. An id
        that exists raises `emq.DuplicateJobError`."""
        args = self._job_args("EMQ.ADD", data, id, delay_ms, at_ms, lane, max_attempts)
        return self.client._add(self.name, [args], self._module)[0]

    def add_many(self, jobs: Iterable[Mapping[str, Any] | bytes | str]) -> list[str]:
        """Adds many jobs in one guarded transaction (all or none). Each item is
        the data, or a dict of `add`'s arguments (`{"data": …, "lane": …}`)."""
        args: list[tuple[str | None, bytes, int | None, int | None, str | None, int]] = []
        for j in jobs:
            if isinstance(j, Mapping):
                j = dict(j)
                if "data" not in j:
                    raise ArgumentError("EMQ.ADD: each job needs data")
                unknown = set(j) - {"data", "id", "delay_ms", "at_ms", "lane", "max_attempts"}
                if unknown:
                    raise ArgumentError(f"EMQ.ADD: unknown job fields {sorted(unknown)}")
                args.append(self._job_args("EMQ.ADD", **j))
            else:
                args.append(self._job_args("EMQ.ADD", j))
        return self.client._add(self.name, args, self._module) if args else []

    # -- working --------------------------------------------------------------

    def claim(self, n: int = 1, *, lease_ms: int = 30000) -> list[Job]:
        """Takes up to `n` ready jobs (at most 10,000 a call): flat ones first,
        then lanes round-robin."""
        n = _int("EMQ.CLAIM", "n", n, minimum=1)
        lease_ms = _int("EMQ.CLAIM", "lease_ms", lease_ms, minimum=1)
        return self.client._claim(self.name, n, lease_ms, self._module)

    def _held(self, verb: str, job: Job) -> Job:
        if not isinstance(job, Job):
            raise ArgumentError(f"{verb}: job must be an emq.Job, not {type(job).__name__}")
        if not job.token:
            raise ArgumentError(f"{verb}: job holds no lease (it has no token)")
        _name(verb, "job id", job.id)
        _text(verb, "job token", job.token)
        if job.lane is not None:
            _name(verb, "job lane", job.lane)
        return job

    def _held_jobs(self, verb: str, jobs: Sequence[Job]) -> list[Job]:
        """A batch call's jobs: a list of held jobs (`_held` each)."""
        if not isinstance(jobs, (list, tuple)):
            raise ArgumentError(f"{verb}: jobs must be a list of emq.Job, not {type(jobs).__name__}")
        return [self._held(verb, j) for j in jobs]

    def extend(self, job: Job, lease_ms: int) -> bool:
        """Moves the lease deadline to now + `lease_ms`; False if the lease is lost."""
        job = self._held("EMQ.EXTEND", job)
        lease_ms = _int("EMQ.EXTEND", "lease_ms", lease_ms, minimum=1)
        if self._module:
            return self.client._extend_many(self.name, [job], lease_ms, True)[0]
        return self.client._extend(self.name, job, lease_ms)

    def extend_many(self, jobs: Sequence[Job], lease_ms: int) -> list[bool]:
        """`extend` for many held jobs in one call (one clock reading, one
        transaction): for each, True if its lease now ends `lease_ms` from now,
        False if it was lost (that job is left as it is). With
        `backend="module"`: one `EMQ.EXTEND`, run by emq's server module."""
        held = self._held_jobs("EMQ.EXTEND", jobs)
        lease_ms = _int("EMQ.EXTEND", "lease_ms", lease_ms, minimum=1)
        return self.client._extend_many(self.name, held, lease_ms, self._module)

    def complete_many(self, jobs: Sequence[Job]) -> list[bool]:
        """`complete` for many held jobs in one call (one clock reading, one
        transaction: a group commit): for each, True if it is done, False if its
        lease was lost (that job is left as it is)."""
        return self.client._complete_many(self.name, self._held_jobs("EMQ.COMPLETE", jobs), self._module)

    def complete_and_claim(self, jobs: Sequence[Job], n: int, *, lease_ms: int = 30000) -> tuple[list[bool], list[Job] | None]:
        """`complete_many(jobs)` and a claim of up to `n` flat jobs (from the
        head of `pending`; lanes are left to `claim`) in the same transaction: a
        worker's group commit that takes its next jobs. Returns the answers, as
        `complete_many` gives them, and the jobs taken. When another client's
        write aborts the transaction, the call starts again without the claim,
        so that the completes do not wait on other claimers: the jobs taken are
        then None (and none were). With `backend="module"`: the completes, then
        a claim that may serve lanes too, as two commands in one round trip
        (each all or none; the jobs taken are never None)."""
        held = self._held_jobs("EMQ.COMPLETE", jobs)
        n = _int("EMQ.CLAIM", "n", n, minimum=0)
        lease_ms = _int("EMQ.CLAIM", "lease_ms", lease_ms, minimum=1)
        return self.client._complete_many_claim(self.name, held, n, lease_ms, self._module)

    def complete(self, job: Job) -> bool:
        """Marks the job done; False (and nothing changes) if the lease is lost."""
        job = self._held("EMQ.COMPLETE", job)
        if self._module:
            return self.client._complete_many(self.name, [job], True)[0]
        return self.client._complete(self.name, job)

    def fail(self, job: Job, error: Failure, *, retry_in_ms: int | None = None) -> FailAnswer:
        """Records a failure: `"scheduled"` (retried after `retry_in_ms`, or an
        exponential backoff with jitter; ready at once with 0) while attempts are
        left, else `"dead"`; `"refused"` if the lease is lost (nothing changes)."""
        job = self._held("EMQ.FAIL", job)
        err, retry_in_ms = _failure(error, retry_in_ms)
        if self._module:
            return self.client._settle_many(self.name, [job], [(err, retry_in_ms)], True)[0]  # type: ignore[return-value]
        return self.client._fail(self.name, job, err, retry_in_ms)

    def settle_many(self, items: Sequence[Job | tuple[Job, Failure] | tuple[Job, Failure, int | None]]) -> list[bool | FailAnswer]:
        """`complete` and `fail` for many held jobs in one call (one clock
        reading, one transaction: a group commit of finished and failed jobs).
        Each item is a job to complete, or `(job, error)` or `(job, error,
        retry_in_ms)` to fail. Each is answered as its single call would answer
        it alone (`complete`: True, or False if the lease is lost; `fail`:
        `"scheduled"`, `"dead"` or `"refused"`), and the result is that of the
        single calls one after another, in this order. With `backend="module"`:
        one `EMQ.SETTLE`, run by emq's server module."""
        if not isinstance(items, (list, tuple)):
            raise ArgumentError(f"EMQ.COMPLETE: items must be a list, not {type(items).__name__}")
        jobs: list[Job] = []
        fails: list[tuple[bytes, int | None] | None] = []
        for item in items:
            if isinstance(item, tuple):
                if len(item) not in (2, 3):
                    raise ArgumentError("EMQ.FAIL: an item to fail is (job, error) or (job, error, retry_in_ms)")
                jobs.append(self._held("EMQ.FAIL", item[0]))
                fails.append(_failure(item[1], item[2] if len(item) == 3 else None))
            else:
                jobs.append(self._held("EMQ.COMPLETE", item))
                fails.append(None)
        answers = self.client._settle_many(self.name, jobs, fails, self._module)
        return [a == "done" if f is None else a for a, f in zip(answers, fails)]  # type: ignore[misc]

    # -- lanes ----------------------------------------------------------------

    def pause_lane(self, lane: str) -> None:
        self.client._pause_lane(self.name, _name("EMQ.LANE", "lane", lane))

    def resume_lane(self, lane: str) -> None:
        self.client._resume_lane(self.name, _name("EMQ.LANE", "lane", lane))

    def set_lane_limit(self, lane: str, n: int) -> None:
        """At most `n` of the lane's jobs active at once (0: no limit)."""
        n = _int("EMQ.LANE", "n", n, minimum=0, maximum=10**15 - 1)  # stored fields are read to 15 digits
        self.client._set_lane_limit(self.name, _name("EMQ.LANE", "lane", lane), n)

    # -- looking --------------------------------------------------------------

    def get(self, id: str) -> Job | None:
        """The job's row, or None (never added, or no longer kept)."""
        return self.client._get(self.name, _name("EMQ.GET", "id", id))

    def lanes(self) -> list[str]:
        """The lanes that have a list or a control hash, sorted."""
        return self.client._lanes(self.name)

    def counts(self) -> dict[str, Any]:
        """`{"schedule", "pending", "lanes": {lane: n}, "active", "dead", "done",
        "ring"}`, read at one instant; `done` counts the done rows still kept."""
        return self.client._counts(self.name)

    # -- retention ------------------------------------------------------------

    def set_retention(
        self,
        *,
        keep_done_s: float | None | object = _LEAVE,
        keep_dead_s: float | None | object = _LEAVE,
        max_dead: int | None | object = _LEAVE,
    ) -> None:
        """Sets the queue's retention policy, shared by every process (each
        argument left out stays as it is): how long a done job's row is kept
        after it completes (`0`: deleted at once), how long a dead job is kept
        (`0`: not kept), and the most dead jobs kept. `None`: forever / no limit.
        Applies to jobs that finish from now on; `dead` is trimmed as jobs die."""
        verb = "EMQ.RETENTION"
        done_ms = _keep_ms(verb, "keep_done_s", keep_done_s)
        dead_ms = _keep_ms(verb, "keep_dead_s", keep_dead_s)
        if max_dead is _LEAVE:
            dead_max = None
        elif max_dead is None:
            dead_max = -1
        else:
            dead_max = _int(verb, "max_dead", max_dead, minimum=0, maximum=_POLICY_MAX)
        self.client._set_retention(self.name, done_ms, dead_ms, dead_max)

    def retention(self) -> dict[str, Any]:
        """The effective policy: `{"keep_done_s", "keep_dead_s", "max_dead"}`,
        `None` for forever / no limit (the defaults where none was set)."""
        done_ms, dead_ms, dead_max = self.client._retention(self.name)

        def secs(ms: int) -> float | None:
            return None if ms < 0 else ms / 1000

        return {"keep_done_s": secs(done_ms), "keep_dead_s": secs(dead_ms), "max_dead": None if dead_max < 0 else dead_max}

    # -- sweeps ---------------------------------------------------------------

    def promote(self, *, batch: int = 100, backend: Backend = "plan", group: int | None = None) -> int:
        return promote(self.client, self.name, batch=batch, backend=backend, group=group)

    def _promote_next(self, batch: int) -> tuple[int, float | None]:
        """PROMOTE for a worker's beat: `(moved, due_in)`, `due_in` being how
        long from now (s) until the next due time it saw (see `Client._promote_next`)."""
        return self.client._promote_next(self.name, batch)

    def _stalled_next(self, max_stalled: int | None, batch: int) -> tuple[list[str], list[str], float | None]:
        """STALLED CHECK for a worker's beat: `(recovered, dead, due_in)`, `due_in`
        being how long from now (s) until the next lease deadline it saw (see
        `Client._stalled_next`)."""
        return self.client._stalled_next(self.name, max_stalled, batch)

    def stalled_check(
        self, *, max_stalled: int | None = 1, batch: int = 100, backend: Backend = "plan", group: int | None = None
    ) -> tuple[list[str], list[str]]:
        return stalled_check(self.client, self.name, max_stalled=max_stalled, batch=batch, backend=backend, group=group)

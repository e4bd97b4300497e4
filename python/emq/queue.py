"""A queue's jobs: add, claim, extend, complete, fail, lanes (SPEC §7).

Every call reads the server's clock once, runs under the same narrow WATCH
guard as the sweeps, keeps the invariants I1 to I5, and writes nothing when it
refuses. The calls state their defaults here and hand their arguments to the
queue's core (`emq._core.QueueCore`, made once per queue), which checks every
one of them: a bad argument raises `emq.ArgumentError` naming the call
(`Queue.add: delay must be …`) and writes nothing.

Durations are seconds (an int or a float) or a `datetime.timedelta`; the core
keeps them in milliseconds, rounded to the nearest (a tie to the even one),
and a positive duration under half a millisecond is 1 ms, never 0.

Results and outcomes (SPEC §13): a complete writes its result and a fail its
error, error type and traceback, in the transaction that settles the job; a
job's outcome (done, dead, cancelled) is pushed to the inbox of each waiter
registered with `watch`, which `pop_inbox` blocks on (no polling); `status`
reads many rows at once; `cancel` takes a job out of the queue or asks a
running one to stop (`cancel_requests` is what its worker reads); `progress`
writes how far a running job has got; `add_unique` adds a job once per key
and window.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ._core import RESULT_MAX, Client, Job, QueueCore
from .answers import (
    ActionOutcome,
    CancelOutcome,
    CancelRequests,
    FailOutcome,
    LaneControl,
    MinuteCounts,
    QueueCounts,
    Retention,
    ScheduleInfo,
    StalledOutcome,
    UniqueAdd,
)
from .sweeps import Backend, ClientLike

JobBackend = Literal["plan", "module"]
Failure = str | bytes | BaseException  # what `fail` records
Duration = float | timedelta  # seconds (an int or a float), or a timedelta
Time = datetime | float  # an aware datetime (naive: local time), or seconds since the epoch
Keep = float | timedelta | Literal["forever"]  # a job's own retention of its done or cancelled row
Result = bytes | str  # what a complete writes (the task layer writes JSON)
Progress = bytes | str | int | float  # what a running job reports (bytes as given; a number as its text)

__all__ = ["Queue", "RESULT_MAX", "UNCHANGED"]


class _Unchanged:
    """`set_retention`'s default: the field stays as it is."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()

JobState = Literal["scheduled", "pending", "active", "dead", "done", "cancelled"]


@dataclass(frozen=True)
class JobPage:
    """One page of a queue's jobs in one state (`Queue.jobs`)."""

    jobs: list[Job]
    """The page's jobs, as `Queue.get` gives them (a job gone between the reads is left out)."""
    total: int
    """How many jobs the state holds."""
    offset: int
    limit: int

    @property
    def has_next(self) -> bool:
        return self.offset + self.limit < self.total


def _outcomes(answers: list[tuple[str, str]], done: ActionOutcome, refused: ActionOutcome) -> dict[str, ActionOutcome]:
    """The core's answers (`done`, `missing`, `refused` for each id) as this action names them."""
    names = {"done": done, "missing": ActionOutcome.NOT_FOUND, "refused": refused}
    return {id: names[a] for id, a in answers}


class Queue:
    """The jobs of one queue: `Queue(client, "orders")`; `client` is an
    `emq.Client` or a URL (`emq.connect(url)`).

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
        self._core = QueueCore(client, name, backend)

    @property
    def client(self) -> Client:
        return self._core.client

    @property
    def name(self) -> str:
        return self._core.name

    @property
    def backend(self) -> JobBackend:
        return self._core.backend

    def __repr__(self) -> str:
        more = ", backend='module'" if self.backend == "module" else ""
        return f"<emq.Queue {self.name!r} on {self.client.address}{more}>"

    # -- adding ---------------------------------------------------------------

    RESULT_MAX = RESULT_MAX
    """The largest result `complete` writes, in bytes (512 KiB)."""

    def add(
        self,
        data: bytes | str,
        *,
        id: str | None = None,
        delay: Duration = 0,
        at: Time | None = None,
        lane: str | None = None,
        max_attempts: int = 3,
        keep: Keep | None = None,
        priority: int = 0,
        inbox: str | None = None,
    ) -> str:
        """Adds a job; returns its id (generated ids are unique and sort by
        creation). Due after `delay`, or at `at` (one of the two): ready at once
        when due now; else it waits in `schedule`. An id that exists raises
        `emq.DuplicateJobError`. `keep`: how long the job's row is kept once it
        is done or cancelled, in place of the queue's `keep_done` (0: deleted
        at once; `"forever"`). `priority`: 0 (first, the default) to 9; a claim
        takes the lowest level first, and the oldest ready within a level.
        `inbox`: a waiter's inbox (as `watch` takes it) registered with the job
        in the add's own transaction, so its outcome is pushed there with no
        `watch` (a given id that had landed already is not registered:
        `add_waited` says so)."""
        return self._core.add(data, id, delay, at, lane, max_attempts, keep, priority, inbox)[0]

    def add_waited(
        self,
        data: bytes | str,
        inbox: str,
        *,
        id: str | None = None,
        delay: Duration = 0,
        at: Time | None = None,
        lane: str | None = None,
        max_attempts: int = 3,
        keep: Keep | None = None,
        priority: int = 0,
    ) -> tuple[str, bool]:
        """`add(..., inbox=inbox)`, and whether the call wrote the job (and so
        registered `inbox` with it): False for a given id that had landed
        already (a retry), whose waiter must `watch` it."""
        return self._core.add(data, id, delay, at, lane, max_attempts, keep, priority, inbox)

    def add_unique(
        self,
        data: bytes | str,
        *,
        unique_key: str,
        unique_for: Duration,
        id: str | None = None,
        delay: Duration = 0,
        at: Time | None = None,
        lane: str | None = None,
        max_attempts: int = 3,
        keep: Keep | None = None,
        priority: int = 0,
        inbox: str | None = None,
    ) -> UniqueAdd:
        """Adds a job once per `unique_key` and window: while the job a key
        names (added under it within the last `unique_for`) has a row, an add
        under the key writes nothing and answers that job's id
        (`UniqueAdd(id, created=False)`); else it adds the job as `add` does
        and holds the key for it for `unique_for` (`created=True`). Atomic
        across processes: producers racing on a key make exactly one job.
        `inbox`, as `add` takes it: registered only when `created`."""
        return self._core.add_unique(data, unique_key, unique_for, id, delay, at, lane, max_attempts, keep, priority, inbox)

    def add_many(self, jobs: Iterable[Mapping[str, Any] | bytes | str], *, max_attempts: int = 3) -> list[str]:
        """Adds many jobs in one guarded transaction (all or none). Each item is
        the data, or a dict of `add`'s arguments (`{"data": …, "lane": …}`,
        `priority`, and `keep`, `unique_key` and `unique_for` as `add_unique` takes them:
        such a job is answered with the id its key names);
        `max_attempts` is for the items that name none."""
        return self._core.add_many(jobs, max_attempts)

    # -- working --------------------------------------------------------------

    def claim(self, n: int = 1, *, lease: Duration = 30) -> list[Job]:
        """Takes up to `n` ready jobs (at most 10,000 a call): flat ones first,
        then lanes round-robin. Each is leased for `lease`."""
        return self._core.claim(n, lease)

    def extend(self, job: Job, lease: Duration) -> bool:
        """Moves the lease deadline to now + `lease`; False if the lease is lost."""
        return self._core.extend(job, lease)

    def extend_many(self, jobs: Sequence[Job], lease: Duration) -> list[bool]:
        """`extend` for many held jobs in one call (one clock reading, one
        transaction): for each, True if its lease now ends `lease` from now,
        False if it was lost (that job is left as it is). With
        `backend="module"`: one `EMQ.EXTEND`, run by emq's server module."""
        return self._core.extend_many(jobs, lease)

    def complete(self, job: Job, result: Result | None = None) -> bool:
        """Marks the job done, its `result` (bytes, or a str as UTF-8; at most
        `RESULT_MAX` bytes) written to its row in the same transaction; its
        waiters are told. True once the job has left `active`: done, or
        cancelled if it had been asked to stop (`cancel`); False (and nothing
        changes) if the lease is lost."""
        return self._core.complete(job, result)

    def complete_many(self, jobs: Sequence[Job | tuple[Job, Result | None]]) -> list[bool]:
        """`complete` for many held jobs in one call (one clock reading, one
        transaction: a group commit), each a job or `(job, result)`: for each,
        True if it left `active` (done, or cancelled), False if its lease was
        lost (that job is left as it is)."""
        return self._core.complete_many(jobs)

    def complete_and_claim(
        self, jobs: Sequence[Job | tuple[Job, Result | None]], n: int, *, lease: Duration = 30
    ) -> tuple[list[bool], list[Job] | None]:
        """`complete_many(jobs)` and a claim of up to `n` flat jobs (from the
        head of `pending`; lanes are left to `claim`) in the same transaction: a
        worker's group commit that takes its next jobs. Returns the answers, as
        `complete_many` gives them, and the jobs taken. When another client's
        write aborts the transaction, the call starts again without the claim,
        so that the completes do not wait on other claimers: the jobs taken are
        then None (and none were). With `backend="module"`: the completes, then
        a claim that may serve lanes too, as two commands in one round trip
        (each all or none; the jobs taken are never None)."""
        return self._core.complete_and_claim(jobs, n, lease)

    def fail(
        self,
        job: Job,
        error: Failure,
        *,
        retry_in: Duration | None = None,
        error_type: str | None = None,
        traceback: str | None = None,
        retry: bool = True,
    ) -> FailOutcome:
        """Records a failure: `FailOutcome.SCHEDULED` (retried after `retry_in`,
        or an exponential backoff with jitter; ready at once with 0) while
        attempts are left and `retry` is True, else `FailOutcome.DEAD` (its
        waiters are told; `retry=False`: dead now, for an error no retry mends);
        `FailOutcome.CANCELLED` if it had been asked to stop (never retried);
        `FailOutcome.REFUSED` if the lease is lost (nothing changes). The row
        gets `error` (an exception as `"Type: message"`), `error_type` (None:
        the exception's class, `module.QualName`, when `error` is one; at most
        1 KiB) and `traceback` (at most 64 KiB: bound it before)."""
        return self._core.fail(job, error, retry_in, error_type, traceback, retry)

    def settle_many(
        self,
        items: Sequence[Job | tuple[Job, Failure] | tuple[Job, Failure, Duration | None] | Mapping[str, Any]],
    ) -> list[bool | FailOutcome]:
        """`complete` and `fail` for many held jobs in one call (one clock
        reading, one transaction: a group commit of finished and failed jobs).
        Each item is a job to complete, `(job, error)` or `(job, error,
        retry_in)` to fail, or a dict: `{"job": j, "result": r}` to complete
        with a result, `{"job": j, "error": e}` with any of `retry_in`,
        `error_type`, `traceback`, `retry` (False: dead now) to fail. Each is answered as its single call
        would answer it alone (`complete`: True, or False if the lease is lost;
        `fail`: a `FailOutcome`), and the result is that of the single calls
        one after another, in this order. With `backend="module"`: one
        `EMQ.SETTLE`, run by emq's server module."""
        return self._core.settle_many(items)

    def progress(self, job: Job, value: Progress) -> bool:
        """Writes how far a held job has got to its row (`progress`): bytes or
        a str as given, a number as its text (a small JSON value; at most 64
        KiB). Only while the job holds its lease, as `extend`: False (nothing
        written) if it is lost."""
        return self._core.progress(job, value)

    # -- outcomes -------------------------------------------------------------

    def status(self, ids: Sequence[str]) -> list[Job | None]:
        """The rows of many jobs in one round trip (one `HGETALL` each,
        pipelined): for each id its `emq.Job`, every field of its row (state,
        attempts, result, error, error type, traceback, progress, times), or
        None (never added, or no longer kept)."""
        return self._core.status(ids)

    def watch(self, ids: Sequence[str], inbox: str) -> list[Job | None]:
        """Registers a waiter's `inbox` (1 to 64 ASCII letters, digits, `-`,
        `_`: `secrets.token_hex(16)` makes one) with each job, in one guarded
        transaction. For each id: None (no such job), its `emq.Job` come to an
        outcome already (`job.ended`: done, dead or cancelled; nothing
        registered), or its `emq.Job` as it stands: registered, so the call
        that brings it to an outcome pushes its id to the inbox in the same
        transaction (`pop_inbox`). No outcome is lost between a registration
        and a settle. A row lists its 16 latest waiters."""
        return self._core.watch(ids, inbox)

    def pop_inbox(self, inbox: str, timeout: Duration | None, *, client: Client) -> list[str]:
        """The ids pushed to `inbox` (jobs its waiter watches come to their
        outcomes), oldest first, in one round trip: blocks on the server until
        one comes or `timeout` passes (`[]`; None: no limit), then takes all
        that are there (up to 1,000). It blocks `client`'s connection: give it
        a client of its own (`queue.client.sibling(read_timeout=None)`), held
        by the one thread that pops. `client._client_id(queue.name)` is that
        connection's id: `CLIENT UNBLOCK` of it from another client
        (`other._unblock(id, queue.name)`) ends the pop at once, with what the
        inbox holds then. An inbox lives an hour past its last push."""
        return self._core.pop_inbox(inbox, timeout, client)

    def cancel(self, id: str) -> CancelOutcome:
        """Cancels a job: not yet claimed (scheduled, ready, in a lane), it
        leaves the queue and its row says `cancelled`, in one transaction
        (`CancelOutcome.CANCELLED`); running, it is asked to stop
        (`CancelOutcome.STOPPING`: its worker learns of it within a beat by
        `cancel_requests`, and the job is cancelled, never retried, when its
        worker settles it or its lease runs out); come to an outcome already,
        or unknown, nothing changes (`ALREADY_DONE`, `UNKNOWN`). A cancelled
        row is kept as a done one is (the job's `keep`, else the queue's
        `keep_done`), and its waiters are told."""
        return self._core.cancel(id)

    def cancel_requests(self, since: int | None = None) -> CancelRequests:
        """The running jobs asked to stop since the last read, for a worker:
        `since` is the `until` of that read (None: every request kept, the
        last hour's). A request may be reported twice (a read looks 10 s back
        past `since`, so that none is missed); pass `until` to the next read."""
        return self._core.cancel_requests(since)

    # -- lanes ----------------------------------------------------------------

    def pause_lane(self, lane: str) -> None:
        self._core.pause_lane(lane)

    def resume_lane(self, lane: str) -> None:
        self._core.resume_lane(lane)

    def set_lane_limit(self, lane: str, n: int) -> None:
        """At most `n` of the lane's jobs active at once (0: no limit)."""
        self._core.set_lane_limit(lane, n)

    # -- looking --------------------------------------------------------------

    def get(self, id: str) -> Job | None:
        """The job's row, or None (never added, or no longer kept)."""
        return self._core.get(id)

    def lanes(self) -> list[str]:
        """The lanes used (named by an add or a lane control: the set `P lanes`, one
        read, whatever the queue holds), sorted."""
        return self._core.lanes()

    def counts(self) -> QueueCounts:
        """The jobs in each place, read at one instant; `done` counts the done
        rows still kept."""
        return self._core.counts()

    # -- operating ------------------------------------------------------------

    def jobs(self, state: JobState, *, lane: str | None = None, offset: int = 0, limit: int = 50) -> JobPage:
        """A page of the jobs in `state`, by rank: `scheduled` soonest due first,
        `pending` next to be claimed first (`lane`: that lane's ready jobs),
        `active` soonest lease end first, `dead`, `done` and `cancelled` newest
        first (`done` and `cancelled`: the rows still kept). At
        most 1,000 a page. Its cost is the page's, whatever the queue holds:
        the place's size, the window of ids, and the rows of those ids only."""
        jobs, total = self._core.jobs(state, lane, offset, limit)
        return JobPage(jobs=jobs, total=total, offset=offset, limit=limit)

    def retry(self, ids: Iterable[str]) -> dict[str, ActionOutcome]:
        """Dead or cancelled jobs back to ready (attempts and stalls back to
        0, the error kept; lane jobs to their lane; a cancelled row kept for
        good again and no longer asked to stop): for each id, `RETRIED`,
        `NOT_DEAD` (neither dead nor cancelled) or `NOT_FOUND`. One guarded
        transaction per 500 ids."""
        return _outcomes(self._core.retry(ids), ActionOutcome.RETRIED, ActionOutcome.NOT_DEAD)

    def retry_dead(self, limit: int | None = None) -> int:
        """`retry` of the oldest dead jobs, up to `limit` (`None`: as many as are
        dead when it starts); how many were retried."""
        return self._core.retry_dead(limit)

    def delete(self, ids: Iterable[str]) -> dict[str, ActionOutcome]:
        """Deletes jobs from wherever they wait (scheduled, ready, dead, done, cancelled),
        rows and all: for each id, `DELETED`, `ACTIVE` (refused: a worker holds
        it) or `NOT_FOUND`. A ready job is found in its list by `LREM`, whose
        cost grows with its position."""
        return _outcomes(self._core.delete(ids), ActionOutcome.DELETED, ActionOutcome.ACTIVE)

    def promote_now(self, ids: Iterable[str]) -> dict[str, ActionOutcome]:
        """Scheduled jobs ready now: for each id, `PROMOTED`, `NOT_SCHEDULED` or `NOT_FOUND`."""
        return _outcomes(self._core.promote_now(ids), ActionOutcome.PROMOTED, ActionOutcome.NOT_SCHEDULED)

    def lane_controls(self, lanes: Iterable[str]) -> dict[str, LaneControl]:
        """Each lane's control as it stands (paused, limit, active count, in the ring)."""
        names = lanes if isinstance(lanes, str) else list(lanes)  # a str goes on, for the core to refuse
        return {n: LaneControl(*c) for n, c in zip(names, self._core.lane_controls(names), strict=True)}

    def throughput(self, minutes: int = 60) -> list[MinuteCounts]:
        """The jobs settled per minute of the server's clock over the last `minutes`
        (1 to 1,500: the counters are kept 25 hours), oldest first, the current
        minute last (still counting). One `TIME`, then one `HMGET` a minute,
        pipelined: an hour is 60 small commands, a day 1,440."""
        _, rows = self._core.throughput(minutes)
        return [MinuteCounts(*r) for r in rows]

    # -- retention ------------------------------------------------------------

    def set_retention(
        self,
        *,
        keep_done: Duration | None = UNCHANGED,
        keep_dead: Duration | None = UNCHANGED,
        max_dead: int | None = UNCHANGED,
    ) -> None:
        """Sets the queue's retention policy, shared by every process (each
        argument left out stays as it is): how long a done job's row is kept
        after it completes (`0`: deleted at once), how long a dead job is kept
        (`0`: not kept), and the most dead jobs kept. `None`: forever / no limit.
        Applies to jobs that finish from now on; `dead` is trimmed as jobs die."""
        given: dict[str, Any] = {"keep_done": keep_done, "keep_dead": keep_dead, "max_dead": max_dead}
        self._core.set_retention(**{k: v for k, v in given.items() if v is not UNCHANGED})

    def retention(self) -> Retention:
        """The effective policy (the defaults where none was set)."""
        return self._core.retention()

    # -- schedules (SPEC §14) ---------------------------------------------------

    def schedule(
        self,
        name: str,
        *,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str | None = None,
        data: bytes | str = b"",
        lane: str | None = None,
        max_attempts: int = 3,
        missed: Literal["latest", "all", "skip"] = "latest",
        max_missed: int | None = None,
        grace: Duration | None = None,
    ) -> bool:
        """Creates or changes the periodic schedule `name` of this queue: each
        tick of `cron` (5 fields, or 6 with seconds, in the IANA zone `tz`,
        default UTC) or of `every` (a duration: every multiple of it since the
        epoch) enqueues one job of `data` (id `schedule:<name>:<tick ms>`),
        exactly once whatever runs or crashes. `missed`: what a sweep that
        finds several ticks due enqueues (`latest`: one; `all`: one a tick, at
        most `max_missed`; `skip`: none unless within `grace`). A changed
        schedule takes effect at once; the same definition again changes
        nothing (False). A paused schedule stays paused."""
        return self._core.schedule(name, cron, every, tz, missed, max_missed, grace, data, lane, max_attempts)

    def unschedule(self, name: str) -> bool:
        """Removes the schedule (False: there was none). Its jobs stay."""
        return self._core.unschedule(name)

    def pause_schedule(self, name: str) -> bool:
        """Stops its ticks until `resume_schedule` (False: it was paused)."""
        return self._core.pause_schedule(name)

    def resume_schedule(self, name: str) -> bool:
        """Ticks again from its first tick after now; ticks while paused are
        not run (False: it was not paused)."""
        return self._core.resume_schedule(name)

    def run_schedule_now(self, name: str) -> str:
        """Enqueues one of the schedule's jobs now (id `schedule:<name>:<now
        ms>`), leaving its next tick as it is: its job's id."""
        return self._core.run_schedule_now(name)[0]

    def schedules(self) -> list[ScheduleInfo]:
        """This queue's schedules, sorted by name."""
        return [ScheduleInfo._from_core(self.name, d) for d in self._core.schedules()]

    # -- sweeps ---------------------------------------------------------------

    def promote(self, *, batch: int = 100, backend: Backend = "plan", group: int | None = None) -> int:
        """`emq.promote` of this queue."""
        return self._core.promote(batch, backend, group)

    def _promote_next(self, batch: int) -> tuple[int, float | None]:
        """PROMOTE for a worker's beat: `(moved, due_in)`, `due_in` being how
        long from now (s) until the next due time it saw (see `QueueCore._promote_next`)."""
        return self._core._promote_next(batch)

    def _stalled_next(self, max_stalled: int | None, batch: int) -> tuple[list[str], list[str], float | None]:
        """STALLED CHECK for a worker's beat: `(recovered, dead, due_in)`, `due_in`
        being how long from now (s) until the next lease deadline it saw (see
        `QueueCore._stalled_next`)."""
        return self._core._stalled_next(max_stalled, batch)

    def stalled_check(
        self, *, max_stalled: int | None = 1, batch: int = 100, backend: Backend = "plan", group: int | None = None
    ) -> StalledOutcome:
        """`emq.stalled_check` of this queue."""
        return self._core.stalled_check(max_stalled, batch, backend, group)

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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from ._core import Client, Job, QueueCore
from .answers import ActionOutcome, FailOutcome, LaneControl, QueueCounts, Retention, ScheduleInfo, StalledOutcome
from .sweeps import Backend, ClientLike

JobBackend = Literal["plan", "module"]
Failure = str | bytes | BaseException  # what `fail` records
Duration = float | timedelta  # seconds (an int or a float), or a timedelta
Time = datetime | float  # an aware datetime (naive: local time), or seconds since the epoch


class _Unchanged:
    """`set_retention`'s default: the field stays as it is."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()

JobState = Literal["scheduled", "pending", "active", "dead", "done"]


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

    def add(
        self,
        data: bytes | str,
        *,
        id: str | None = None,
        delay: Duration = 0,
        at: Time | None = None,
        lane: str | None = None,
        max_attempts: int = 3,
    ) -> str:
        """Adds a job; returns its id (generated ids are unique and sort by
        creation). Due after `delay`, or at `at` (one of the two): ready at once
        when due now; else it waits in `schedule`. An id that exists raises
        `emq.DuplicateJobError`."""
        return self._core.add(data, id, delay, at, lane, max_attempts)

    def add_many(self, jobs: Iterable[Mapping[str, Any] | bytes | str], *, max_attempts: int = 3) -> list[str]:
        """Adds many jobs in one guarded transaction (all or none). Each item is
        the data, or a dict of `add`'s arguments (`{"data": …, "lane": …}`);
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

    def complete(self, job: Job) -> bool:
        """Marks the job done; False (and nothing changes) if the lease is lost."""
        return self._core.complete(job)

    def complete_many(self, jobs: Sequence[Job]) -> list[bool]:
        """`complete` for many held jobs in one call (one clock reading, one
        transaction: a group commit): for each, True if it is done, False if its
        lease was lost (that job is left as it is)."""
        return self._core.complete_many(jobs)

    def complete_and_claim(self, jobs: Sequence[Job], n: int, *, lease: Duration = 30) -> tuple[list[bool], list[Job] | None]:
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

    def fail(self, job: Job, error: Failure, *, retry_in: Duration | None = None) -> FailOutcome:
        """Records a failure: `FailOutcome.SCHEDULED` (retried after `retry_in`,
        or an exponential backoff with jitter; ready at once with 0) while
        attempts are left, else `FailOutcome.DEAD`; `FailOutcome.REFUSED` if the
        lease is lost (nothing changes)."""
        return self._core.fail(job, error, retry_in)

    def settle_many(self, items: Sequence[Job | tuple[Job, Failure] | tuple[Job, Failure, Duration | None]]) -> list[bool | FailOutcome]:
        """`complete` and `fail` for many held jobs in one call (one clock
        reading, one transaction: a group commit of finished and failed jobs).
        Each item is a job to complete, or `(job, error)` or `(job, error,
        retry_in)` to fail. Each is answered as its single call would answer it
        alone (`complete`: True, or False if the lease is lost; `fail`: a
        `FailOutcome`), and the result is that of the single calls one after
        another, in this order. With `backend="module"`: one `EMQ.SETTLE`, run
        by emq's server module."""
        return self._core.settle_many(items)

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
        """The lanes that have a list or a control hash, sorted."""
        return self._core.lanes()

    def counts(self) -> QueueCounts:
        """The jobs in each place, read at one instant; `done` counts the done
        rows still kept."""
        return self._core.counts()

    # -- operating ------------------------------------------------------------

    def jobs(self, state: JobState, *, lane: str | None = None, offset: int = 0, limit: int = 50) -> JobPage:
        """A page of the jobs in `state`, by rank: `scheduled` soonest due first,
        `pending` next to be claimed first (`lane`: that lane's ready jobs),
        `active` soonest lease end first, `dead` and `done` newest first. At
        most 1,000 a page. Its cost is the page's, whatever the queue holds:
        the place's size, the window of ids, and the rows of those ids only."""
        jobs, total = self._core.jobs(state, lane, offset, limit)
        return JobPage(jobs=jobs, total=total, offset=offset, limit=limit)

    def retry(self, ids: Iterable[str]) -> dict[str, ActionOutcome]:
        """Dead jobs back to ready (attempts and stalls back to 0, the error
        kept; lane jobs to their lane): for each id, `RETRIED`, `NOT_DEAD` or
        `NOT_FOUND`. One guarded transaction per 500 ids."""
        return _outcomes(self._core.retry(ids), ActionOutcome.RETRIED, ActionOutcome.NOT_DEAD)

    def retry_dead(self, limit: int | None = None) -> int:
        """`retry` of the oldest dead jobs, up to `limit` (`None`: as many as are
        dead when it starts); how many were retried."""
        return self._core.retry_dead(limit)

    def delete(self, ids: Iterable[str]) -> dict[str, ActionOutcome]:
        """Deletes jobs from wherever they wait (scheduled, ready, dead, done),
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

"""What the dashboard shows, read through emq's own API: one `Source` answers each page.

The pages ask a `Source`; it asks `emq.Queue` (`counts`, `get`, `retention`,
`jobs`, `lane_controls`, `schedules`) and the registry (`emq.queues`,
`emq.workers`), and acts through `emq.Queue` (`pause_lane`, `resume_lane`,
`set_lane_limit`, `promote`, `retry`, `retry_dead`, `cancel`, `delete`,
`promote_now`, `pause_schedule`, `resume_schedule`, `run_schedule_now`, the
operations `App.pause_schedule` and its kin call), so the dashboard checks and
refuses exactly as the API does. What a page reads does not grow with the
queue: counts, the page's rows, one row a ready list for the oldest wait
(`tests/test_dashboard_bounded.py` counts the commands of every page).
Its calls block on the server: the app runs them in a thread.

Throughput is `Queue.throughput` over the last day (1,440 `HMGET`s of a
queue's per-minute counters, pipelined: one read per queue and page, from
which both the hour's chart and the day's are drawn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._core import Client, Job
from ..answers import ActionOutcome, CancelOutcome, LaneControl, MinuteCounts, QueueCounts, Retention, ScheduleInfo, WorkerInfo
from ..queue import JobPage, Queue
from ..registry import queues as registered_queues
from ..registry import workers as live_workers

DAY_MINUTES = 1440
"""The span of the day's chart, in minutes."""
KEPT_MINUTES = 1500
"""The minutes the counters are kept (25 hours): the window `/metrics` sums."""

STATES = ("scheduled", "pending", "active", "dead", "done", "cancelled")
"""The places a job can be, in the order the pages show them (SPEC §2, the row's `state`)."""


@dataclass(frozen=True)
class QueueSummary:
    """One queue's line on the overview."""

    name: str
    counts: QueueCounts

    @property
    def by_state(self) -> dict[str, int]:
        """The jobs in each state; `pending` counts the ready jobs of every lane too."""
        return counts_by_state(self.counts)

    @property
    def total(self) -> int:
        return sum(self.by_state.values())


LaneControls = LaneControl
"""A lane's control fields (SPEC §2, lane control), as `Queue.lane_controls` answers them."""


@dataclass(frozen=True)
class LaneView:
    """One lane, as the queue page shows it: its ready jobs (`Queue.counts`), and its
    controls (`Source.lane_controls`; None for a lane that went between the two reads)."""

    name: str
    ready: int
    controls: LaneControls | None


@dataclass(frozen=True)
class QueueView:
    """Everything the queue page shows, read at one moment (`now_ms`: the server's clock)."""

    name: str
    counts: QueueCounts
    lanes: list[LaneView]
    retention: Retention
    schedules: list[ScheduleInfo]
    now_ms: int

    @property
    def by_state(self) -> dict[str, int]:
        return counts_by_state(self.counts)


@dataclass(frozen=True)
class JobView:
    """A job's row as `Queue.get` gives it, with the server's clock to say how far off its times are."""

    queue: str
    job: Job
    now_ms: int


def counts_by_state(counts: QueueCounts) -> dict[str, int]:
    """`Queue.counts()` by the row's state: a lane's ready jobs are `pending` too."""
    return {
        "scheduled": counts.schedule,
        "pending": counts.pending + sum(counts.lanes.values()),
        "active": counts.active,
        "dead": counts.dead,
        "done": counts.done,
        "cancelled": counts.cancelled,
    }


class Source:
    """The dashboard's reads and actions on one server, through `emq.Queue`."""

    def __init__(self, client: Client, queues: Sequence[str] = ()):
        self.client = client
        self._queues = list(dict.fromkeys(queues))  # in the order given, once each
        self._queue_objects: dict[str, Queue] = {}

    def queue(self, name: str) -> Queue:
        """The `emq.Queue` of `name` (its name checked as `emq.Queue` checks it: `emq.ArgumentError`)."""
        q = self._queue_objects.get(name)
        if q is None:
            q = Queue(self.client, name)
            if len(self._queue_objects) < 1024:  # a cache, not a record of every name asked for
                self._queue_objects[name] = q
        return q

    # -- the registry, the pages of jobs, the lanes' controls ----------------------

    def queue_names(self) -> list[str]:
        """The queues the overview lists: those given to the dashboard, then every
        other queue in the registry (`emq.queues`), sorted."""
        given = set(self._queues)
        return list(self._queues) + [q for q in registered_queues(self.client) if q not in given]

    def workers(self) -> list[WorkerInfo]:
        """The workers alive and what they run (`emq.workers`)."""
        return live_workers(self.client)

    def throughput(self, queue: str | None = None, minutes: int = DAY_MINUTES) -> list[MinuteCounts]:
        """The jobs settled per minute over the last `minutes`, oldest first
        (`Queue.throughput`): of `queue`, or summed over every listed queue."""
        names = [queue] if queue is not None else self.queue_names()
        by_minute: dict[int, list[int]] = {}
        for name in names:
            for m in self.queue(name).throughput(minutes):
                t = by_minute.setdefault(m.minute, [0, 0, 0, 0, 0])
                for i, n in enumerate((m.completed, m.retried, m.dead, m.cancelled, m.recovered)):
                    t[i] += n
        # The newest `minutes` minutes read (queues read at a minute's turn may name one more).
        return [MinuteCounts(k, *v) for k, v in sorted(by_minute.items())][-minutes:]

    def settled_totals(self, queue: str) -> MinuteCounts:
        """Every job the queue settled in the counters' kept window (25 hours), summed:
        what `/metrics` reports as counters (they fall back as old minutes expire)."""
        ms = self.queue(queue).throughput(KEPT_MINUTES)
        return MinuteCounts(
            ms[-1].minute if ms else 0,
            sum(m.completed for m in ms),
            sum(m.retried for m in ms),
            sum(m.dead for m in ms),
            sum(m.cancelled for m in ms),
            sum(m.recovered for m in ms),
        )

    def jobs_by_state(self, queue: str, state: str, offset: int = 0, limit: int = 50) -> JobPage:
        """A page of the queue's jobs in `state` (`Queue.jobs`): what it shows is all it reads."""
        return self.queue(queue).jobs(state, offset=offset, limit=limit)  # type: ignore[arg-type]

    def lane_controls(self, queue: str, lanes: Sequence[str]) -> Mapping[str, LaneControls]:
        """Each lane's paused flag, limit and active count (`Queue.lane_controls`)."""
        return self.queue(queue).lane_controls(lanes)

    def oldest_waiting_ms(self, queue: str, counts: QueueCounts, now_ms: int) -> int | None:
        """How long the oldest ready job has waited since it was due (ms): the head of
        `pending` and of each lane with ready jobs, one row each; None when none waits."""
        q = self.queue(queue)
        heads: list[Job] = []
        if counts.pending:
            heads += q.jobs("pending", limit=1).jobs
        for lane, n in counts.lanes.items():
            if n:
                heads += q.jobs("pending", lane=lane, limit=1).jobs
        dues = [j.due_ms for j in heads if j.due_ms is not None]
        return max(0, now_ms - min(dues)) if dues else None

    def lateness_ms(self, queue: str, counts: QueueCounts, now_ms: int, oldest_waiting_ms: int | None) -> int:
        """How late the queue's work is (ms, server clock): the longest any job has
        been due without being claimed. The larger of `oldest_waiting_ms` (a ready
        job) and how long ago the soonest-due job in `scheduled` fell due, when it
        has (due, not yet promoted); 0 when nothing is due. One row more than the
        oldest wait reads: the head of `scheduled`."""
        late = oldest_waiting_ms or 0
        if counts.schedule:
            head = self.queue(queue).jobs("scheduled", limit=1).jobs
            if head and head[0].due_ms is not None and head[0].due_ms <= now_ms:
                late = max(late, now_ms - head[0].due_ms)
        return late

    # -- reads -------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.client.time_ms()

    def overview(self) -> list[QueueSummary]:
        return [QueueSummary(name, self.queue(name).counts()) for name in self.queue_names()]

    def queue_view(self, name: str) -> QueueView:
        q = self.queue(name)
        counts = q.counts()  # every lane of `P lanes`, with its ready count
        names = sorted(counts.lanes)
        controls = self.lane_controls(q.name, names)
        lanes = [LaneView(lane, counts.lanes.get(lane, 0), controls.get(lane)) for lane in names]
        return QueueView(name=q.name, counts=counts, lanes=lanes, retention=q.retention(), schedules=q.schedules(), now_ms=self.now_ms())

    def job(self, queue: str, id: str) -> JobView | None:
        job = self.queue(queue).get(id)
        return None if job is None else JobView(queue=queue, job=job, now_ms=self.now_ms())

    # -- actions -----------------------------------------------------------------

    def pause_lane(self, queue: str, lane: str) -> None:
        self.queue(queue).pause_lane(lane)

    def resume_lane(self, queue: str, lane: str) -> None:
        self.queue(queue).resume_lane(lane)

    def set_lane_limit(self, queue: str, lane: str, limit: int) -> None:
        self.queue(queue).set_lane_limit(lane, limit)

    def pause_schedule(self, queue: str, name: str) -> bool:
        """`Queue.pause_schedule`: False when it was paused already."""
        return self.queue(queue).pause_schedule(name)

    def resume_schedule(self, queue: str, name: str) -> bool:
        """`Queue.resume_schedule`: False when it was not paused."""
        return self.queue(queue).resume_schedule(name)

    def run_schedule_now(self, queue: str, name: str) -> str:
        """`Queue.run_schedule_now`: the id of the job it enqueued."""
        return self.queue(queue).run_schedule_now(name)

    def promote(self, queue: str) -> int:
        """PROMOTE once (`emq.promote`): the jobs due now become ready; how many moved."""
        return self.queue(queue).promote()

    def retry(self, queue: str, ids: Sequence[str]) -> dict[str, ActionOutcome]:
        return self.queue(queue).retry(ids)

    def retry_dead(self, queue: str) -> int:
        return self.queue(queue).retry_dead()

    def cancel(self, queue: str, ids: Sequence[str]) -> dict[str, CancelOutcome]:
        """`Queue.cancel` of each id: a waiting job cancelled, a running one asked to stop."""
        q = self.queue(queue)
        return {id: q.cancel(id) for id in dict.fromkeys(ids)}

    def delete(self, queue: str, ids: Sequence[str]) -> dict[str, ActionOutcome]:
        return self.queue(queue).delete(ids)

    def promote_now(self, queue: str, ids: Sequence[str]) -> dict[str, ActionOutcome]:
        return self.queue(queue).promote_now(ids)

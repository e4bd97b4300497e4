"""What the dashboard shows, read through emq's own API: one `Source` answers each page.

The pages ask a `Source`; it asks `emq.Queue` (`counts`, `lanes`, `get`,
`retention`) and acts through it (`pause_lane`, `resume_lane`,
`set_lane_limit`, `promote`), so the dashboard checks and refuses exactly as
the API does. Its calls block on the server: the app runs them in a thread.

Where emq has no call yet for what a page wants, the method says so by
answering `None`, and the page says plainly that the section appears once the
call exists. These are the seams the operations API fills:

- `queue_names`: the queues given to `create_app(queues=...)` (or `--queue`),
  until the queue registry lists every queue that has been used;
- `workers`: `None` until the workers' registry exists;
- `throughput`: `None` until the per-minute counters exist;
- `jobs_by_state`: `None` until `Queue.jobs(state, offset=, limit=)` exists;
- `lane_controls`: `None` until the core answers a lane's paused flag, limit
  and active count (only the core reads keys: the facade never spells one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._core import Client, Job
from ..answers import QueueCounts, Retention
from ..queue import Queue

STATES = ("scheduled", "pending", "active", "dead", "done")
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


@dataclass(frozen=True)
class LaneControls:
    """A lane's control fields (SPEC §2, lane control), as the core will answer them."""

    paused: bool
    limit: int
    """0: no limit."""
    active: int


@dataclass(frozen=True)
class LaneView:
    """One lane, as the queue page shows it: its ready jobs (`Queue.counts`), and its
    controls, None until emq answers them (`Source.lane_controls`)."""

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

    # -- seams the operations API fills ----------------------------------------

    def queue_names(self) -> list[str]:
        """The queues the overview lists: those given to the dashboard. Once emq
        keeps a registry of the queues used, this reads it instead."""
        return list(self._queues)

    def workers(self) -> Sequence[object] | None:
        """The workers alive and what they run: `None` until emq keeps a workers' registry."""
        return None

    def throughput(self, queue: str | None = None) -> Mapping[str, object] | None:
        """Jobs completed, retried and dead per minute: `None` until emq keeps per-minute counters."""
        return None

    def jobs_by_state(self, queue: str, state: str, *, offset: int = 0, limit: int = 50) -> Sequence[object] | None:
        """A page of the queue's jobs in `state`: `None` until `Queue.jobs` exists."""
        return None

    def lane_controls(self, queue: str, lanes: Sequence[str]) -> Mapping[str, LaneControls] | None:
        """Each lane's paused flag, limit and active count: `None` until the core answers them."""
        return None

    # -- reads -------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.client.time_ms()

    def overview(self) -> list[QueueSummary]:
        return [QueueSummary(name, self.queue(name).counts()) for name in self.queue_names()]

    def queue_view(self, name: str) -> QueueView:
        q = self.queue(name)
        counts = q.counts()
        names = sorted(set(q.lanes()) | set(counts.lanes))
        controls = self.lane_controls(q.name, names) or {}
        lanes = [LaneView(lane, counts.lanes.get(lane, 0), controls.get(lane)) for lane in names]
        return QueueView(name=q.name, counts=counts, lanes=lanes, retention=q.retention(), now_ms=self.now_ms())

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

    def promote(self, queue: str) -> int:
        """PROMOTE once (`emq.promote`): the jobs due now become ready; how many moved."""
        return self.queue(queue).promote()

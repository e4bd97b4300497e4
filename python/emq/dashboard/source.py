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
- `_lane_controls`: reads each lane's control hash (SPEC §2, `P lanectl:L`)
  itself, until the core answers a lane's paused flag, limit and active count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .._core import Client, Job
from ..answers import QueueCounts, Retention
from ..errors import RedirectError
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
class LaneView:
    """One lane, as the queue page shows it. `active`, `limit`, `paused` and
    `in_ring` are None when the lane's controls could not be read (a cluster
    node that does not hold the queue answered the read)."""

    name: str
    ready: int
    active: int | None
    limit: int | None
    """0: no limit."""
    paused: bool | None
    in_ring: bool | None


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


def _integer(value: object) -> int:
    """A stored integer of SPEC §2; anything else counts as absent (0)."""
    text = value.decode() if isinstance(value, bytes) else str(value)
    return int(text) if text.lstrip("-").isdigit() and len(text.lstrip("-")) <= 15 else 0


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

    # -- reads -------------------------------------------------------------------

    def now_ms(self) -> int:
        return self.client.time_ms()

    def overview(self) -> list[QueueSummary]:
        return [QueueSummary(name, self.queue(name).counts()) for name in self.queue_names()]

    def queue_view(self, name: str) -> QueueView:
        q = self.queue(name)
        counts = q.counts()
        names = sorted(set(q.lanes()) | set(counts.lanes))
        controls = self._lane_controls(q, names)
        lanes = []
        for lane in names:
            c = controls.get(lane)
            lanes.append(
                LaneView(
                    name=lane,
                    ready=counts.lanes.get(lane, 0),
                    active=None if c is None else _integer(c.get(b"active", b"0")),
                    limit=None if c is None else _integer(c.get(b"limit", b"0")),
                    paused=None if c is None else c.get(b"paused") == b"1",
                    in_ring=None if c is None else c.get(b"ring") == b"1",
                )
            )
        return QueueView(name=q.name, counts=counts, lanes=lanes, retention=q.retention(), now_ms=self.now_ms())

    def job(self, queue: str, id: str) -> JobView | None:
        job = self.queue(queue).get(id)
        return None if job is None else JobView(queue=queue, job=job, now_ms=self.now_ms())

    def _lane_controls(self, q: Queue, lanes: list[str]) -> dict[str, dict[bytes, bytes]]:
        """Each lane's control hash, in one round trip. The core has no call that
        answers it yet, so this reads the key of SPEC §2 on the client's first
        connection; where that node does not serve the queue (a cluster), the
        lanes' controls are left out and the page shows them as unknown."""
        if not lanes:
            return {}
        prefix = f"emq:{{{q.name}}}:lanectl:"
        try:
            replies = self.client.pipeline([["HGETALL", prefix + lane] for lane in lanes])
        except RedirectError:
            return {}
        out: dict[str, dict[bytes, bytes]] = {}
        for lane, reply in zip(lanes, replies):
            if isinstance(reply, dict):
                out[lane] = {_bytes(k): _bytes(v) for k, v in reply.items()}
            elif isinstance(reply, list):  # RESP2: field, value, field, value
                out[lane] = {_bytes(reply[i]): _bytes(reply[i + 1]) for i in range(0, len(reply) - 1, 2)}
        return out

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


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()

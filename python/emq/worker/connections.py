"""A worker's own connections, so that a parked or busy worker never holds up the others' calls.

Siblings of its queues' clients (the package's doc says which does what): the
beat's and the handlers' for each client, and a park for each queue, whose
read timeout outlasts the longest pop. In a cluster each reaches the nodes of
its queues by itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._core import Client
from ..queue import Queue
from .options import Options


@dataclass(frozen=True)
class Connections:
    """The beat's queues, the handlers' queues by name, and the parks, in the
    order of the worker's queues."""

    beats: list[Queue]
    works: dict[str, Queue]
    parks: list[Client]

    @classmethod
    def open(cls, options: Options) -> Connections:
        beat_of: dict[int, Client] = {}
        work_of: dict[int, Client] = {}
        beats: list[Queue] = []
        works: dict[str, Queue] = {}
        parks: list[Client] = []
        for q in options.queues:
            if id(q.client) not in beat_of:
                beat_of[id(q.client)], work_of[id(q.client)] = q.client.sibling(), q.client.sibling()
            # The queue's backend runs the claims and commits (the beats' sweeps are the plan's).
            beats.append(Queue(beat_of[id(q.client)], q.name, backend=q.backend))
            works[q.name] = Queue(work_of[id(q.client)], q.name, backend=q.backend)
            parks.append(q.client.sibling(read_timeout=options.idle_beat + 5))
        return cls(beats, works, parks)

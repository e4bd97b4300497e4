"""The registry (SPEC §17): the queues that have been used and the workers alive.

`emq.queues(client)` lists every queue a process has added a job to (each
process adds a queue's name once, on its first add); `emq.workers(client)`
lists the workers whose heartbeat has not expired, as their last beat says.
Both read keys under one tag no queue can have, so a cluster answers from one
node and nothing needs `SCAN`. `client` is an `emq.Client` or a URL.
"""

from __future__ import annotations

import json

from . import _core
from .answers import CurrentJob, WorkerInfo
from .sweeps import ClientLike


def queues(client: ClientLike) -> list[str]:
    """Every queue name registered, sorted."""
    return _core.registered_queues(client)


def workers(client: ClientLike) -> list[WorkerInfo]:
    """The live workers, the soonest to expire first."""
    return [_worker(id, fields) for id, fields in _core.live_workers(client)]


def _worker(id: str, f: dict[str, str]) -> WorkerInfo:
    """A worker's hash as `WorkerInfo`; a field missing or malformed reads as empty (it is untrusted)."""

    def num(name: str) -> int:
        try:
            return int(f.get(name, "0"))
        except ValueError:
            return 0

    def listed(name: str) -> list[object]:
        try:
            v = json.loads(f.get(name, "[]"))
        except ValueError:
            return []
        return v if isinstance(v, list) else []

    def since(c: dict[str, object]) -> float:
        v = c.get("since", 0)
        return v / 1000 if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    current = [
        CurrentJob(queue=str(c.get("queue", "")), id=str(c.get("id", "")), since=since(c)) for c in listed("current") if isinstance(c, dict)
    ]
    return WorkerInfo(
        id=id,
        host=f.get("host", ""),
        pid=num("pid"),
        queues=[str(q) for q in listed("queues")],
        concurrency=num("concurrency"),
        started=num("started") / 1000,
        beat=num("beat") / 1000,
        expires=num("expires") / 1000,
        done=num("done"),
        failed=num("failed"),
        current=current,
        version=f.get("version", ""),
    )


__all__ = ["queues", "workers"]

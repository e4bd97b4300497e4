"""Maintenance tools: a queue's cluster slot, and the wire forms of the sweeps as
emq's server module checks them. Not needed to run jobs; for operators, tests and
other clients' authors."""

from __future__ import annotations

from typing import Any

from . import _core
from .sweeps import Backend, ClientLike


def queue_slot(queue: str) -> int:
    """The cluster hash slot of the queue's keys: every key of a queue has the
    queue's name as its hash tag, so one node serves all of them (SPEC §11)."""
    return _core.queue_slot(queue)


def wire(client: ClientLike, *args: str | bytes, backend: Backend = "plan") -> Any:
    """The wire form: the command's name, then the seed's EVALSHA tail (`"2"`,
    the keys of `schedule` and `pending`, the queue's prefix, the batch; SPEC §5
    and §6), checked as the module checks it."""
    return _core.wire(client, *args, backend=backend)


__all__ = ["queue_slot", "wire"]

"""The two sweeps (SPEC §5, §6), on the plan backend (in-process, under a narrow
WATCH guard), the Lua backend (the reference scripts, by EVALSHA) or the module
backend (`EMQ.PROMOTE`, `EMQ.STALLED.CHECK`: emq's server module runs the same
plans inside the server; README, "The server module").

The functions state their defaults and hand their arguments to the core,
which checks them; `client` is an `emq.Client` or a URL (`emq.connect(url)`)."""

from __future__ import annotations

from typing import Literal

from . import _core
from ._core import Client
from .answers import StalledOutcome

Backend = Literal["plan", "lua", "module"]
ClientLike = Client | str


def promote(client: ClientLike, queue: str, *, batch: int = 100, backend: Backend = "plan", group: int | None = None) -> int:
    """Moves up to `batch` due jobs from `schedule` to `pending` or their lanes.

    Returns how many ids left `schedule`, ghosts (ids whose row is gone) included.
    `group`: at most that many rows per transaction (SPEC §9; `None`: the
    whole batch, as a promote watches one key whatever the batch).
    """
    return _core.promote(client, queue, batch, backend, group)


def stalled_check(
    client: ClientLike,
    queue: str,
    *,
    max_stalled: int | None = 1,
    batch: int = 100,
    backend: Backend = "plan",
    group: int | None = None,
) -> StalledOutcome:
    """Sends up to `batch` jobs whose lease expired back to `pending` (or their
    lane), or to `dead` once they stalled more than `max_stalled` times
    (`None`: never). Returns `StalledOutcome(recovered ids, dead ids)`.
    `group`: at most that many rows per transaction (SPEC §9; `None`: chosen
    for the server, the whole batch where `WATCH` is flat, Valkey 9 and later,
    else 64)."""
    return _core.stalled_check(client, queue, max_stalled, batch, backend, group)

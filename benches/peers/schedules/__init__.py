"""The systems `benches/schedules.py` drives, one module each: the processes that
run a 1-second periodic job (`argv(role, python, url)`: `worker`, or for systems
whose scheduler is a process of its own, `scheduler`), configured as each
library's documentation shows, everything else default.

Each job's handler records `[tick_ms, added_ms, started_ms]` (RPUSH, JSON) on
`LOG` of the bench's server: the tick the job is for (as exactly as the library
tells it), when it was enqueued and when the handler began, from the library's
own job fields where it keeps them, else this host's clock (the server's is the
same machine's). emq records nothing: the bench reads each tick's row (`due`,
`created`, `claimed`, all the server's clock).
"""

from __future__ import annotations

LOG = "bench:ticks"
SYSTEMS = ("emq", "arq", "saq", "rq")


def record(url: str, tick_ms: float, added_ms: float, started_ms: float) -> None:
    """One job's times on `LOG` (a connection a process, made on first use)."""
    import json

    import redis

    global _conn
    try:
        conn = _conn
    except NameError:
        conn = _conn = redis.Redis.from_url(url)
    conn.rpush(LOG, json.dumps([tick_ms, added_ms, started_ms]))

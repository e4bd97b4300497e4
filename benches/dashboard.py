"""The dashboard's server time per page on a queue of a million jobs (goal: every page ≤ 50 ms).

One embedded Valkey started here and one queue seeded with `--jobs` jobs spread
over the states (`seed`): 10 % in two lanes, 10 % scheduled an hour ahead,
5 % dead, 5 % done with a result, 100 active, and the rest ready (`pending`),
loaded through the API in batches of 10,000 (`add_many`, then `claim` and
`settle_many` / `complete_many` for the dead and the done: a million jobs are
about 200 calls); two schedules, one paused; and a day of per-minute counters
(written straight with `HSET`, so the day's chart reads a full day).

Then each page and each live fragment is requested `--runs` times through the
dashboard's ASGI app, called in this process (`get`: no HTTP server, no
socket to it; what is timed is the app's own handling, its reads of the
server and the Jinja rendering included), and for each the report gives:

- the app's time per request, median and 95th percentile (ms);
- the commands the request sent to the server (`INFO commandstats` calls
  before and after, less the `INFO` itself), and the server's CPU for them
  (`usec` of the same, summed).

    python benches/dashboard.py                        # 1,000,000 jobs, 20 runs a page
    python benches/dashboard.py --jobs 2000 --runs 2   # a smoke

`tests/test_dashboard_bounded.py` seeds with `seed` and counts with
`page_commands` on N and 10×N jobs: each page's commands must be the same.
The overview and the queue page each read a day of counters (1,440 `HMGET`s a
queue, pipelined); `/metrics` reads the 25 hours kept (1,500).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import emq
from emq.dashboard import create_app
from emq.embedded import Server, valkey_binary

QUEUE = "bench-dashboard"
BATCH = 10_000
"""Jobs a call adds or settles while seeding (a claim takes at most 10,000)."""


@dataclass(frozen=True)
class Seeded:
    """What `seed` made: how many jobs in all and in `pending`, and a dead and a done job's ids."""

    jobs: int
    pending: int
    dead_id: str
    done_id: str


def seed(client: emq.Client, jobs: int, queue: str = QUEUE) -> Seeded:
    """`jobs` jobs in `queue`, spread over the states as the module's docstring says."""
    q = emq.Queue(client, queue)
    q.set_retention(keep_done=None, keep_dead=None, max_dead=None)  # nothing trimmed while seeding
    dead, done = jobs // 20, jobs // 20
    lanes, scheduled = jobs // 10, jobs // 10
    pending = jobs - dead - done - lanes - scheduled - 100
    assert pending > 0, "--jobs must be at least 2,000"

    def settle(n: int, fate) -> str:
        """Adds `n` jobs, claims them and settles each with `fate(jobs)`; the last id."""
        last = ""
        for start in range(0, n, BATCH):
            size = min(BATCH, n - start)
            q.add_many([b'{"charge": "card-4242"}'] * size, max_attempts=1)
            held = q.claim(size, lease=600)
            assert len(held) == size
            fate(held)
            last = held[-1].id
        return last

    dead_id = settle(dead, lambda held: q.settle_many([(j, "RuntimeError: card declined") for j in held]))
    done_id = settle(done, lambda held: q.complete_many([(j, b'{"receipt": "r-1"}') for j in held]))
    q.add_many([b'{"email": "welcome"}'] * 100)
    assert len(q.claim(100, lease=3600)) == 100  # active
    for start in range(0, pending, BATCH):
        q.add_many([b'{"order": 1042}'] * min(BATCH, pending - start))
    for start in range(0, lanes, BATCH):
        size = min(BATCH, lanes - start)
        q.add_many([{"data": b'{"invoice": 7}', "lane": ("eu", "us")[i % 2]} for i in range(size)])
    for start in range(0, scheduled, BATCH):
        q.add_many([{"data": b'{"reminder": 1}', "delay": 3600}] * min(BATCH, scheduled - start))
    q.schedule("nightly-report", cron="0 3 * * *", data=b"report")
    q.schedule("heartbeat", every=60, data=b"beat")
    q.pause_schedule("heartbeat")
    # The rest of the day's counters, written straight (a bench may spell keys).
    now_minute = client.time_ms() // 60_000
    cmds = [
        ["HSET", f"emq:{{{queue}}}:stats:{m}", "completed", "900", "retried", "12", "dead", "1"]
        for m in range(now_minute - 1439, now_minute)
    ]
    for i in range(0, len(cmds), 500):
        client.pipeline(cmds[i : i + 500])
    return Seeded(jobs, pending, dead_id, done_id)


def pages(seeded: Seeded, queue: str = QUEUE) -> dict[str, str]:
    """Every page and live fragment of the dashboard, on the seeded queue."""
    q = quote(queue, safe="")
    far = max(0, seeded.pending - 50)  # the last page of `pending`
    job = f"queue={q}&id={quote(seeded.dead_id, safe='')}"
    return {
        "overview": "/",
        "overview fragment": "/fragments/overview",
        "queue (dead, its default)": f"/queues/{q}",
        "queue pending": f"/queues/{q}?state=pending",
        "queue pending, last page": f"/queues/{q}?state=pending&offset={far}",
        "queue scheduled": f"/queues/{q}?state=scheduled",
        "queue active": f"/queues/{q}?state=active",
        "queue done": f"/queues/{q}?state=done",
        "queue fragment": f"/fragments/queue/{q}?state=pending",
        "job (dead)": f"/job?{job}",
        "job (done)": f"/job?queue={q}&id={quote(seeded.done_id, safe='')}",
        "job fragment": f"/fragments/job?{job}",
        "workers": "/workers",
        "workers fragment": "/fragments/workers",
        "metrics": "/metrics",
    }


def command_calls(client: emq.Client) -> tuple[Counter[str], int]:
    """Each command's calls so far (`INFO commandstats`), and every command's usec summed."""
    calls: Counter[str] = Counter()
    usec = 0
    for name, line in client.info("commandstats").items():
        fields = dict(part.split("=", 1) for part in line.split(","))
        calls[name.removeprefix("cmdstat_")] = int(fields["calls"])
        usec += int(fields["usec"])
    return calls, usec


async def get(app: Any, path: str) -> tuple[int, bytes]:
    """One GET through the ASGI app, as a loopback client."""
    raw_path, _, query = path.partition("?")
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": raw_path,
        "raw_path": raw_path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8000")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    status, body = 0, []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(body)


@dataclass(frozen=True)
class Request:
    """One request's measure: its status, the app's time, the commands it sent (by name) and their server usec."""

    status: int
    ms: float
    commands: Counter[str]
    server_usec: int


def page_commands(client: emq.Client, app: Any, path: str) -> Request:
    """`path` requested once, timed, with the commands it sent counted by name."""
    c0, u0 = command_calls(client)
    t0 = time.perf_counter()
    status, _ = asyncio.run(get(app, path))
    ms = (time.perf_counter() - t0) * 1000
    c1, u1 = command_calls(client)
    sent = c1 - c0
    sent["info"] -= 1  # the INFO that read c0
    return Request(status, ms, +sent, u1 - u0)


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[18] if len(values) >= 2 else values[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    srv = Server(valkey_binary()).start()
    try:
        client = emq.connect(srv.url)
        t = time.monotonic()
        seeded = seed(client, args.jobs)
        print(f"seeded {args.jobs:,} jobs in {time.monotonic() - t:.1f} s: {emq.Queue(client, QUEUE).counts()}")
        app = create_app(client, queues=[QUEUE])
        print(f"{'page':28} {'median ms':>10} {'p95 ms':>8} {'server ms':>10} {'commands':>9}")
        for name, path in pages(seeded).items():
            runs = [page_commands(client, app, path) for _ in range(args.runs)]
            assert all(r.status == 200 for r in runs), (name, [r.status for r in runs])
            ms = [r.ms for r in runs]
            server = statistics.median(r.server_usec for r in runs) / 1000
            commands = statistics.median(sum(r.commands.values()) for r in runs)
            print(f"{name:28} {statistics.median(ms):10.1f} {p95(ms):8.1f} {server:10.2f} {commands:9.0f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

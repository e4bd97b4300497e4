"""The dashboard's server time per page on a queue of a million jobs (goal: ≤ 50 ms a page).

One embedded Valkey started here, seeded with `--jobs` ready jobs (`add_many` in
batches of 10,000: 100 calls for a million), a few hundred dead, done and
scheduled ones, lanes, and a day of per-minute counters (the settles that made
the dead and done rows wrote the current minute; the other 1,439 minutes are
written straight with `HSET` so the day's chart reads a full day). Then each page
is requested `--runs` times through the dashboard's ASGI app, called in this
process (no HTTP server, no network: what is timed is the app's own work and its
reads of the server):

- the app's wall time per page (median and worst), the Jinja rendering included;
- the server's CPU per page (`INFO commandstats` usec summed over the page's
  commands) and the commands a page sends.

    python benches/dashboard.py                        # 1,000,000 jobs, 20 runs a page
    python benches/dashboard.py --jobs 2000 --runs 2   # a smoke

Pages: the overview (every queue's counts, the day's throughput), a queue on
each state (`pending` pages the million), a job, the workers, `/metrics` (which
sums 1,500 minutes a queue). The overview and a queue page each read a day of
counters: 1,440 `HMGET`s a queue, pipelined.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from urllib.parse import quote

import emq
from emq.dashboard import create_app
from emq.embedded import Server, valkey_binary

QUEUE = "bench-dashboard"


def seed(client: emq.Client, jobs: int) -> str:
    q = emq.Queue(client, QUEUE)
    batch = 10_000
    for start in range(0, jobs, batch):
        q.add_many([b'{"n": 1}'] * min(batch, jobs - start))
    for lane in ("eu", "us"):
        q.add_many([{"data": b"lane", "lane": lane}] * 100)
    q.add_many([{"data": b"later", "delay": 3600}] * 200)
    # Dead and done rows, through the API (their settles write this minute's counters).
    q.add_many([b"dies"] * 200, max_attempts=1)
    dead_id = None
    while q.counts().dead < 200:
        for job in q.claim(100, lease=60):
            if job.data == b"dies":
                q.fail(job, "RuntimeError: boom")
                dead_id = job.id
            else:
                q.complete(job)
    # The rest of the day's counters, written straight (a bench may spell keys).
    now_minute = client.time_ms() // 60_000
    pipe = [
        ("HSET", f"emq:{{{QUEUE}}}:stats:{m}", "completed", "900", "retried", "12", "dead", "1")
        for m in range(now_minute - 1439, now_minute)
    ]
    for i in range(0, len(pipe), 500):
        client.pipeline([list(c) for c in pipe[i : i + 500]])
    assert dead_id is not None
    return dead_id


def command_usec(client: emq.Client) -> tuple[int, int]:
    """Every command's calls and usec so far (`INFO commandstats`), summed."""
    calls = usec = 0
    for line in client.info("commandstats").values():
        fields = dict(part.split("=", 1) for part in line.split(","))
        calls += int(fields["calls"])
        usec += int(fields["usec"])
    return calls, usec


async def get(app, path: str) -> tuple[int, bytes]:
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

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(body)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args(argv)
    srv = Server(valkey_binary()).start()
    try:
        client = emq.connect(srv.url)
        t = time.monotonic()
        dead_id = seed(client, args.jobs)
        print(f"seeded {args.jobs:,} jobs in {time.monotonic() - t:.1f} s")
        app = create_app(client, queues=[QUEUE])
        q = quote(QUEUE, safe="")
        pages = {
            "overview": "/",
            "queue pending": f"/queues/{q}?state=pending",
            "queue pending, far page": f"/queues/{q}?state=pending&offset={max(0, args.jobs - 100)}",
            "queue dead": f"/queues/{q}?state=dead",
            "queue done": f"/queues/{q}?state=done",
            "job": f"/job?queue={q}&id={quote(dead_id)}",
            "workers": "/workers",
            "metrics": "/metrics",
            "overview fragment": "/fragments/overview",
        }
        print(f"{'page':28} {'median ms':>10} {'worst ms':>9} {'server ms':>10} {'commands':>9}")
        for name, path in pages.items():
            walls, server, cmds = [], [], []
            for _ in range(args.runs):
                c0, u0 = command_usec(client)
                t0 = time.perf_counter()
                status, _ = asyncio.run(get(app, path))
                walls.append((time.perf_counter() - t0) * 1000)
                c1, u1 = command_usec(client)
                assert status == 200, (name, status)
                server.append((u1 - u0) / 1000)
                cmds.append(c1 - c0 - 1)  # less the INFO of the measure itself
            wall = f"{statistics.median(walls):10.1f} {max(walls):9.1f}"
            print(f"{name:28} {wall} {statistics.median(server):10.2f} {statistics.median(cmds):9.0f}")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

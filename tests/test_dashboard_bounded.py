"""Every page of the dashboard reads only what it shows: the commands each page and live
fragment sends are the same, command for command, on a queue of N jobs and of 10×N.

The queue is seeded and the pages listed by the dashboard's benchmark (`benches/dashboard.py`:
`seed`, `pages`, `page_commands`), which times them on a million jobs; here only the
commands are counted (`INFO commandstats`), never a time. A page that scanned the keyspace,
read a whole state, or paged through a list by fetching it would send more on the larger
queue and fail here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import redis

import emq
from conftest import fresh_server
from emq.dashboard import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

import dashboard as bench  # noqa: E402  (benches/dashboard.py)

N = 2_000
"""The smaller queue: each state's page still full (50 dead, 50 done and more of the others)."""


def commands_per_page(servers, jobs: int) -> dict[str, dict[str, int]]:
    server = fresh_server(servers, "valkey")
    client = emq.connect(server.url)
    try:
        seeded = bench.seed(client, jobs)
        counts = emq.Queue(client, bench.QUEUE).counts()
        assert counts.dead == jobs // 20 and counts.done == jobs // 20 and counts.active == 100
        # auth=None: the in-process requests have no loopback socket to check (the bench's do).
        app = create_app(client, queues=[bench.QUEUE], auth=None)
        out = {}
        for name, path in bench.pages(seeded).items():
            bench.page_commands(client, app, path)  # a first request sets up the app's caches
            r = bench.page_commands(client, app, path)
            assert r.status == 200, (name, r.status)
            out[name] = dict(r.commands)
        return out
    finally:
        client.close()
        redis.Redis.from_url(server.url).flushall()


def test_every_page_sends_the_same_commands_on_n_and_ten_times_n_jobs(servers):
    """The commands of each page, by name and count, on 2,000 and 20,000 jobs: equal. The
    queue page's lanes come from `P lanes` (one `SMEMBERS`), not a `SCAN` of the keyspace,
    whose rounds grew with every row; the last page of `pending` is one `LRANGE` window."""
    small = commands_per_page(servers, N)
    large = commands_per_page(servers, 10 * N)
    assert set(small) == set(large)
    for page in small:
        assert small[page] == large[page], page
    assert all("scan" not in sent for sent in small.values())
    # The last page of `pending` shows its 50 rows: one window of the list, a read a row.
    last = small["queue pending, last page"]
    assert last["lrange"] == 1 and last["hgetall"] == small["queue pending"]["hgetall"]


@pytest.mark.parametrize("jobs", [N])
def test_the_bench_seeds_every_state(servers, jobs):
    """The seed the bench times on a million: every state holds jobs, the lanes too, and a
    schedule is paused (a bench that timed empty pages would flatter them)."""
    server = fresh_server(servers, "valkey")
    client = emq.connect(server.url)
    try:
        bench.seed(client, jobs)
        q = emq.Queue(client, bench.QUEUE)
        c = q.counts()
        assert c.pending > 0 and c.schedule == jobs // 10 and c.dead == c.done == jobs // 20 and c.active == 100
        assert c.lanes == {"eu": jobs // 20, "us": jobs // 20}
        assert [(s.name, s.paused) for s in q.schedules()] == [("heartbeat", True), ("nightly-report", False)]
        assert q.get(q.jobs("done", limit=1).jobs[0].id).result == b'{"receipt": "r-1"}'
    finally:
        client.close()

"""The per-minute counters of settled jobs (`P stats:<minute>`, SPEC §17) on real servers.

A real worker runs jobs that complete, retry, die and are cancelled; a stalled
check recovers one and kills another; `Queue.throughput` must count exactly
those, in a single server and a cluster. A group commit of 100 adds one
`HINCRBY` and one `PEXPIRE` (counted in `INFO commandstats`, never timed), a
call that settles nothing adds none, and the module writes the counters' key
byte for byte as the in-process plan does (`DUMP`).
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

import emq
from emq.embedded import module_path


def fresh(client: emq.Client, backend: str = "plan") -> tuple[emq.Queue, str]:
    name = "counters-" + uuid.uuid4().hex[:10]
    return emq.Queue(client, name, backend=backend), f"emq:{{{name}}}:"  # type: ignore[arg-type]


def calls(r, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def totals(q: emq.Queue, minutes: int = 10) -> dict[str, int]:
    ms = q.throughput(minutes)
    return {k: sum(getattr(m, k) for m in ms) for k in ("completed", "retried", "dead", "cancelled", "recovered")}


def wait_for(cond, timeout: float, what: str, show=lambda: None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: {show()!r}")
        time.sleep(0.05)


def run_mix(q: emq.Queue) -> None:
    """Through a real worker: 5 jobs complete, 2 die on their only attempt, 1
    fails twice (one retry, then dead), 1 is cancelled before it runs; then a
    claim left to stall is recovered and one stalled past `max_stalled` dies."""
    q.add_many([b"ok"] * 5)
    q.add_many([b"boom"] * 2, max_attempts=1)
    q.add(b"boom", max_attempts=2)
    cancelled = q.add(b"ok", delay=3600)
    assert q.cancel(cancelled) is emq.CancelOutcome.CANCELLED

    def handler(job):
        if job.data == b"boom":
            raise RuntimeError("boom")

    w = emq.Worker(q, handler, concurrency=4, beat=0.05)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        wait_for(lambda: q.counts().dead == 3 and q.counts().done == 5, 30, "the worker's jobs", show=q.counts)
    finally:
        w.stop()
        t.join(10)
    # A stall: one claim recovered (stalls 1, no limit), then one past max_stalled 0.
    q.add(b"stall")
    assert len(q.claim(1, lease=0.05)) == 1
    time.sleep(0.1)
    assert len(emq.stalled_check(q.client, q.name).recovered) == 1
    assert len(q.claim(1, lease=0.05)) == 1
    time.sleep(0.1)
    assert len(emq.stalled_check(q.client, q.name, max_stalled=0).dead) == 1


WANT = {"completed": 5, "retried": 1, "dead": 4, "cancelled": 1, "recovered": 1}


def test_the_counters_count_what_a_real_worker_and_the_stalled_check_settled(client, r):
    """Each kind is counted once per job, in the minute it settled: a broken counter that
    counted per call, missed the batch path of the worker's group commits, counted a
    refused settle, or counted a retry as dead would miss these totals."""
    q, P = fresh(client)
    run_mix(q)
    assert totals(q) == WANT
    ms = q.throughput(3)
    assert len(ms) == 3 and ms[0].minute + 2 == ms[-1].minute, "the last 3 minutes, oldest first"
    assert ms[-1].minute == client.time_ms() // 60000 or ms[-1].minute + 1 == client.time_ms() // 60000
    for key in r.keys(P + "stats:*"):
        assert 0 < r.pttl(key) <= 25 * 3600 * 1000, "each minute expires within 25 hours"


@pytest.mark.skipif(module_path() is None, reason="./dev has not built emq's server module")
def test_the_module_counts_as_the_plan_does(client, r):
    """The server module runs the same plans, so the same settles give the same totals."""
    q, _ = fresh(client, "module")
    run_mix(q)
    assert totals(q) == WANT


def test_in_a_cluster_the_counters_live_in_the_queues_slot(cluster):
    """In a cluster the counters' key carries the queue's hash tag: the settles' own
    transactions write it (a key in another slot would be refused as CROSSSLOT)."""
    c = emq.connect(cluster.url)
    q, _ = fresh(c)
    run_mix(q)
    assert totals(q) == WANT


def test_a_group_commit_of_100_adds_one_increment_and_one_expiry(client, r):
    """100 completes in one call write one HINCRBY and one PEXPIRE, not 100 of each;
    a call that settles nothing (every token stale) writes neither."""
    q, P = fresh(client)
    q.add_many([b"x"] * 100)
    jobs = q.claim(100, lease=60)
    assert len(jobs) == 100
    before = (calls(r, "hincrby"), calls(r, "pexpire"))
    assert q.complete_many(jobs) == [True] * 100
    assert (calls(r, "hincrby") - before[0], calls(r, "pexpire") - before[1]) == (1, 1)
    before = (calls(r, "hincrby"), calls(r, "pexpire"))
    assert q.complete_many(jobs) == [False] * 100, "settled already: refused"
    assert (calls(r, "hincrby"), calls(r, "pexpire")) == before, "a call that settles nothing writes no counter"
    assert totals(q)["completed"] == 100


def test_a_request_to_stop_a_running_job_is_not_counted_until_it_ends(client):
    """Asking a running job to stop settles nothing; its end (here, its complete) counts one cancel."""
    q, _ = fresh(client)
    q.add(b"x")
    (job,) = q.claim(1, lease=60)
    assert q.cancel(job.id) is emq.CancelOutcome.STOPPING
    assert totals(q)["cancelled"] == 0
    q.complete(job)
    assert totals(q) == {"completed": 0, "retried": 0, "dead": 0, "cancelled": 1, "recovered": 0}


@pytest.mark.skipif(module_path() is None, reason="./dev has not built emq's server module")
def test_the_module_writes_the_counters_key_byte_for_byte_as_the_plan(client, r):
    """The same calls on a plan queue and a module queue leave the same `P stats:<minute>`
    (compared as `DUMP`, which holds the fields' order): a module that wrote its own
    commands for the counters, or other fields, would differ."""

    def settle(backend: str) -> tuple[int, bytes]:
        q, P = fresh(client, backend)
        q.add_many([b"x"] * 4)
        q.add(b"y", max_attempts=1)
        jobs = q.claim(5, lease=60)
        by = {j.data: j for j in jobs}
        q.fail(by[b"y"], "boom")
        q.complete_many([j for j in jobs if j.data == b"x"][:3])
        q.fail([j for j in jobs if j.data == b"x"][3], "again", retry_in=3600)
        (key,) = r.keys(P + "stats:*")
        return int(key.rsplit(b":", 1)[1]), r.dump(key)

    for _ in range(3):  # the two runs in one minute (a turn between them is retried)
        (m1, plan), (m2, module) = settle("plan"), settle("module")
        if m1 == m2:
            break
    assert plan == module


def test_throughput_refuses_bad_minutes_naming_the_call(client):
    q, _ = fresh(client)
    for bad in (0, -1, 1501, 1.5, True, "60"):
        with pytest.raises(emq.ArgumentError, match=r"^Queue.throughput: minutes must be an integer from 1 to 1500$"):
            q.throughput(bad)  # type: ignore[arg-type]
    assert len(q.throughput(1500)) == 1500

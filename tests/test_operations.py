"""An operator's operations on a real server, both Valkey and Redis: a page of jobs by state
(`Queue.jobs`), `retry`, `retry_dead`, `delete`, `promote_now`, the lanes' controls, and the
registry of queues and workers (`emq.queues`, `emq.workers`).

Each action is checked against the keyspace it must leave (the rows, the places, the
promotions counter a promote watches), the invariants I1 to I5 after it (SPEC §3), and,
refused on bad input, against the whole keyspace before it: nothing written. A page's cost
is counted in commands (`INFO commandstats`), never timed: the same on a queue ten times
as large, and one row read for each job shown.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

import emq
from test_jobs_model import assert_invariants, snapshot

LATER = 3600


def fresh(client: emq.Client) -> tuple[emq.Queue, str]:
    """A queue of its own (the registry is added to once per process and queue)."""
    name = "ops-" + uuid.uuid4().hex[:10]
    return emq.Queue(client, name), f"emq:{{{name}}}:"


def calls(r, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def every_state(q: emq.Queue, r, P: str) -> dict[str, list[str]]:
    """Jobs in every state: 3 scheduled, 2 pending (one in lane L), 1 active, 2 dead, 2 done."""
    ids: dict[str, list[str]] = {}
    ids["scheduled"] = [q.add(f"s{i}", delay=LATER + i) for i in range(3)]
    ids["dead"] = [q.add(f"d{i}", max_attempts=1) for i in range(2)]
    for j in q.claim(2, lease=60):
        assert q.fail(j, f"boom {j.id}") is emq.FailOutcome.DEAD
    ids["done"] = [q.add(f"f{i}") for i in range(2)]
    for j in q.claim(2, lease=60):
        assert q.complete(j)
    ids["active"] = [q.add("a")]
    assert [j.id for j in q.claim(1, lease=60)] == ids["active"]
    ids["pending"] = [q.add("p"), q.add("l", lane="L")]
    return ids


def test_a_page_lists_each_state_in_its_order_with_rows(client, r):
    """Each state's page holds its jobs, in the order an operator reads them (scheduled
    soonest due first, dead and done newest first), with their rows; the offset and limit
    window it. A page that listed another place, lost the rows or ignored the window would fail."""
    q, P = fresh(client)
    ids = every_state(q, r, P)
    page = q.jobs("scheduled")
    assert [j.id for j in page.jobs] == ids["scheduled"] and page.total == 3
    assert all(j.state == "scheduled" and j.data.startswith(b"s") for j in page.jobs)
    assert [j.id for j in q.jobs("dead").jobs] == ids["dead"][::-1]
    assert "boom" in (q.jobs("dead").jobs[0].error or "")
    assert {j.id for j in q.jobs("done").jobs} == set(ids["done"])  # completed in one ms, they may tie
    assert [j.id for j in q.jobs("active").jobs] == ids["active"]
    assert [j.id for j in q.jobs("pending").jobs] == ids["pending"][:1]
    assert [j.id for j in q.jobs("pending", lane="L").jobs] == ids["pending"][1:]
    window = q.jobs("scheduled", offset=1, limit=1)
    assert ([j.id for j in window.jobs], window.total, window.has_next) == (ids["scheduled"][1:2], 3, True)
    assert q.jobs("scheduled", offset=10).jobs == []


def test_a_page_costs_the_same_on_a_queue_ten_times_larger(client, r):
    """Commands per page, counted: a page of 20 from 200 dead jobs and from 2,000 costs the
    same commands, and reads 20 rows. A page that read the whole place or every row grows."""
    q, P = fresh(client)

    def cost() -> dict[str, int]:
        names = ("zrange", "zcard", "hgetall", "lrange", "llen")
        r.config_resetstat()
        page = q.jobs("dead", offset=7, limit=20)
        assert len(page.jobs) == 20
        return {n: calls(r, n) for n in names}

    def bury(n: int) -> None:
        q.add_many([b"x"] * n, max_attempts=1)
        for _ in range(n // 500 + 1):
            js = q.claim(500, lease=60)
            if js:
                q.settle_many([(j, "no") for j in js])

    bury(200)
    small = cost()
    bury(1800)
    assert q.counts().dead == 2000
    assert cost() == small
    assert small["hgetall"] == 20 and small["zrange"] == 1


def test_retry_makes_dead_jobs_ready_with_attempts_reset_and_their_error_kept(client, r):
    """Retry: the dead job leaves `dead` for `pending` (a lane job for its lane, the lane
    offered to the ring), its attempts and stalls back to 0 and its error kept; a job that
    is not dead, and an unknown id, are answered so and left as they are."""
    q, P = fresh(client)
    a, b = q.add("a", max_attempts=1), q.add("b", lane="L", max_attempts=1)
    for j in q.claim(2, lease=60):
        q.fail(j, "boom")
    live = q.add("live")
    before = {live: r.hgetall(P + f"job:{live}")}
    got = q.retry([a, b, live, "nope", a])
    outcome = emq.ActionOutcome
    assert got == {a: outcome.RETRIED, b: outcome.RETRIED, live: outcome.NOT_DEAD, "nope": outcome.NOT_FOUND}
    assert r.zcard(P + "dead") == 0
    assert [x.decode() for x in r.lrange(P + "pending", 0, -1)] == [live, a]
    assert [x.decode() for x in r.lrange(P + "lane:L", 0, -1)] == [b]
    assert r.lrange(P + "ring", 0, -1) == [b"L"]
    row = {k.decode(): v.decode() for k, v in r.hgetall(P + f"job:{a}").items()}
    assert (row["state"], row["attempts"], row["stalls"], row["error"]) == ("pending", "0", "0", "boom")
    assert "finished" not in row
    assert r.hgetall(P + f"job:{live}") == before[live]
    assert_invariants(r, P)
    # claimed again, it has its attempts again: one failure kills it, as it did the first time
    (j,) = [j for j in q.claim(3, lease=60) if j.id == a]
    assert j.attempts == 1


def test_retry_dead_takes_the_oldest_up_to_a_limit_then_all(client, r):
    q, P = fresh(client)
    ids = q.add_many([f"x{i}".encode() for i in range(7)], max_attempts=1)
    for j in q.claim(7, lease=60):
        q.fail(j, "no")
    oldest = [m.decode() for m in r.zrange(P + "dead", 0, 2)]
    assert q.retry_dead(3) == 3
    assert set(oldest) <= {x.decode() for x in r.lrange(P + "pending", 0, -1)}
    assert q.retry_dead() == 4 and r.zcard(P + "dead") == 0
    assert q.retry_dead() == 0
    assert sorted(x.decode() for x in r.lrange(P + "pending", 0, -1)) == sorted(ids)
    assert_invariants(r, P)


def test_delete_removes_each_job_from_its_place_and_refuses_an_active_one(client, r):
    """Delete: scheduled, ready (flat and lane), dead and done jobs leave their places and
    their rows go; an active job is refused (a worker holds it) and stays whole. Deleting a
    scheduled job counts as a promote (`P promotions`): a promote that had chosen it aborts
    instead of bringing its row back."""
    q, P = fresh(client)
    ids = every_state(q, r, P)
    promotions = int(r.get(P + "promotions") or 0)
    active_row = r.hgetall(P + f"job:{ids['active'][0]}")
    victims = [ids["scheduled"][0], *ids["pending"], ids["dead"][0], ids["done"][0]]
    got = q.delete([*victims, ids["active"][0]])
    assert got == {**{v: emq.ActionOutcome.DELETED for v in victims}, ids["active"][0]: emq.ActionOutcome.ACTIVE}
    for v in victims:
        assert not r.exists(P + f"job:{v}")
    assert [m.decode() for m in r.zrange(P + "schedule", 0, -1)] == ids["scheduled"][1:]
    assert r.llen(P + "pending") == 0 and r.llen(P + "lane:L") == 0
    assert [m.decode() for m in r.zrange(P + "dead", 0, -1)] == ids["dead"][1:]
    assert [m.decode() for m in r.zrange(P + "done", 0, -1)] == ids["done"][1:]
    assert r.hgetall(P + f"job:{ids['active'][0]}") == active_row
    assert int(r.get(P + "promotions")) == promotions + 1
    assert q.delete(victims[:1]) == {victims[0]: emq.ActionOutcome.NOT_FOUND}
    assert_invariants(r, P)


def test_cancelled_rows_are_listed_newest_first_while_kept_and_deleted_from_their_index(client, r):
    """`jobs("cancelled")` lists `P cancelled` newest first with the rows, counting only the
    rows still kept (the queue's `keep_done`); `delete` of a cancelled row takes it out of
    `P cancelled` with its row; a retry of one takes it out of `P cancelled` too (it is
    ready again: `test_retry_of_a_cancelled_job_runs_it_again_as_a_new_job`). A
    page that read another index, counted expired rows, or a delete that left the index entry
    (a ghost in the dashboard's list) fails here."""
    q, P = fresh(client)
    ids = [q.add(f"c{i}", delay=LATER) for i in range(3)]
    for id in ids:
        assert q.cancel(id) is emq.CancelOutcome.CANCELLED
        time.sleep(0.003)  # each its own ms: the order is the cancels'
    page = q.jobs("cancelled")
    assert ([j.id for j in page.jobs], page.total) == (ids[::-1], 3)
    assert all(j.state == "cancelled" and j.error == "cancelled" for j in page.jobs)
    assert [j.id for j in q.jobs("cancelled", offset=1, limit=1).jobs] == [ids[1]]

    assert q.retry([ids[0]]) == {ids[0]: emq.ActionOutcome.RETRIED}
    assert q.delete([ids[1]]) == {ids[1]: emq.ActionOutcome.DELETED}
    assert not r.exists(P + f"job:{ids[1]}")
    assert [m.decode() for m in r.zrange(P + "cancelled", 0, -1)] == [ids[2]]
    assert_invariants(r, P)

    q.set_retention(keep_done=0.05)
    time.sleep(0.1)  # the one left is past keep_done now: listed no more, though their rows are kept
    late = q.add("late", delay=LATER)
    q.cancel(late)
    assert [j.id for j in q.jobs("cancelled").jobs] == [late]
    time.sleep(0.1)
    assert q.jobs("cancelled").total == 0 and q.jobs("cancelled").jobs == []


def test_promote_now_makes_scheduled_jobs_ready_and_counts_as_a_promote(client, r):
    q, P = fresh(client)
    s, in_lane = q.add("s", delay=LATER), q.add("l", delay=LATER, lane="L")
    q.pause_lane("L")
    ready = q.add("ready")
    got = q.promote_now([s, in_lane, ready])
    assert got == {s: emq.ActionOutcome.PROMOTED, in_lane: emq.ActionOutcome.PROMOTED, ready: emq.ActionOutcome.NOT_SCHEDULED}
    assert r.zcard(P + "schedule") == 0
    assert [x.decode() for x in r.lrange(P + "pending", 0, -1)] == [ready, s]
    assert [x.decode() for x in r.lrange(P + "lane:L", 0, -1)] == [in_lane]
    assert r.llen(P + "ring") == 0  # a paused lane is not offered
    assert int(r.get(P + "promotions")) == 1
    assert_invariants(r, P)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda q: q.retry(["ok", ""]), "Queue.retry: ids must each be"),
        (lambda q: q.retry("abc"), "Queue.retry: ids must be a list of ids, not str"),
        (lambda q: q.delete(["a\x00b"]), "Queue.delete: ids must each be"),
        (lambda q: q.promote_now([7]), "Queue.promote_now: ids must each be"),
        (lambda q: q.retry_dead(-1), "Queue.retry_dead: limit"),
        (lambda q: q.jobs("running"), "Queue.jobs: state must be one of scheduled, pending, active, dead, done"),
        (lambda q: q.jobs("dead", lane="L"), "Queue.jobs: lane is for state 'pending' only"),
        (lambda q: q.jobs("dead", limit=0), "Queue.jobs: limit"),
        (lambda q: q.jobs("dead", limit=1001), "Queue.jobs: limit"),
        (lambda q: q.jobs("dead", offset=-1), "Queue.jobs: offset"),
        (lambda q: q.lane_controls([""]), "Queue.lane_controls: lanes must each be"),
        (lambda q: q.lane_controls("eu"), "Queue.lane_controls: lanes must be a list of ids, not str"),
    ],
)
def test_bad_input_names_the_call_and_argument_and_writes_nothing(client, r, call, message):
    q, P = fresh(client)
    every_state(q, r, P)
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError) as e:
        call(q)
    assert str(e.value).startswith(message), str(e.value)
    assert snapshot(r) == before


def test_a_wrong_type_refuses_the_action_before_anything_is_written(client, r):
    q, P = fresh(client)
    d = q.add("d", max_attempts=1)
    q.fail(q.claim(1, lease=60)[0], "x")
    r.delete(P + "pending")
    r.set(P + "pending", "not a list")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError, match="pending"):
        q.retry([d])
    assert snapshot(r) == before


def test_lane_controls_answer_paused_limit_and_active(client, r):
    q, P = fresh(client)
    q.add_many([{"data": b"x", "lane": "A"}, {"data": b"y", "lane": "A"}, {"data": b"z", "lane": "B"}])
    q.claim(1, lease=60)
    q.set_lane_limit("A", 4)
    q.pause_lane("B")
    c = q.lane_controls(["A", "B", "none"])
    assert (c["A"].limit, c["A"].paused, c["B"].paused) == (4, False, True)
    assert c["A"].active + c["B"].active == 1
    assert c["none"] == emq.LaneControl(paused=False, limit=0, active=0, in_ring=False)


# -- the registry ---------------------------------------------------------------------


def test_a_queue_is_registered_once_per_process_on_its_first_add(client, r):
    """`emq.queues` lists a queue once a job was added to it, and the process registers it
    once: later adds send no `SADD` (a registration on every call would tax the hot path)."""
    q, _ = fresh(client)
    assert q.name not in emq.queues(client)
    r.config_resetstat()
    q.add("x")
    emq.Queue(client, q.name).add_many([b"y", b"z"])
    for _ in range(5):
        q.add("w")
    assert calls(r, "sadd") == 1
    assert q.name in emq.queues(client)
    assert r.smembers("emq:{emq registry}:queues") >= {q.name.encode()}


WORKER_SCRIPT = textwrap.dedent(
    """
    import sys, time
    import emq, emq.worker.registry as registry
    registry.PERIOD_S = 0.3
    q = emq.Queue(emq.connect(sys.argv[1]), sys.argv[2])
    def handler(job):
        time.sleep(60 if job.data == b"slow" else 0)
    emq.Worker(q, handler, concurrency=2, ttl=float(sys.argv[3])).run()
    """
)


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def test_workers_appear_say_what_they_run_and_leave(server, client, r):
    """A running worker is listed with its host, pid, queue, concurrency and the job it runs;
    a clean stop removes it at once; a SIGKILLed one drops out within three heartbeats."""
    q, _ = fresh(client)
    q.add("slow")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    killed = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, server.url, q.name, "120"], env=env)
    try:
        w = _wait(lambda: [w for w in emq.workers(client) if w.pid == killed.pid and w.current], 20, "the worker listed, running")[0]
        assert (w.queues, w.concurrency, w.current[0].queue) == ([q.name], 2, q.name)
        assert w.current[0].id == q.jobs("active").jobs[0].id
        assert w.expires > w.beat >= w.started > 0 and w.version == emq.__version__
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        _wait(lambda: all(w.pid != killed.pid for w in emq.workers(client)), 3 * 0.3 + 3, "the killed worker gone")
    finally:
        killed.kill()
    clean = subprocess.Popen([sys.executable, "-c", WORKER_SCRIPT, server.url, q.name, "1.5"], env=env)
    _wait(lambda: any(w.pid == clean.pid for w in emq.workers(client)), 20, "the second worker listed")
    assert clean.wait(30) == 0
    assert all(w.pid != clean.pid for w in emq.workers(client))
    assert not r.exists(f"emq:{{emq registry}}:worker:{w.id}")


def test_the_registry_is_routed_by_its_tag_in_a_cluster(cluster):
    """In a cluster the registry's keys live in their tag's slot, and `emq.queues` and
    `emq.workers` read them there through any seed."""
    c = emq.connect(cluster.url)
    names = [f"ops-cl-{i}-{uuid.uuid4().hex[:6]}" for i in range(3)]
    for n in names:
        emq.Queue(c, n).add("x")
    assert set(names) <= set(emq.queues(c))
    emq._core.worker_beat(c, "w-cluster", {"host": "h", "pid": "1", "queues": "[]"}, 30)
    assert [w.id for w in emq.workers(c) if w.id == "w-cluster"] == ["w-cluster"]
    emq._core.worker_leave(c, "w-cluster")
    assert all(w.id != "w-cluster" for w in emq.workers(c))
    c.close()


def test_a_module_backend_queue_runs_the_same_operations_by_the_plan(client, r):
    """The server module has no verb for an operator's actions: a queue with
    `backend="module"` runs them by the plan on the host, with the same answers and writes."""
    q, P = fresh(client)
    m = emq.Queue(client, q.name, backend="module")
    d = q.add("d", max_attempts=1)
    q.fail(q.claim(1, lease=60)[0], "x")
    s = q.add("s", delay=LATER)
    assert m.retry([d]) == {d: emq.ActionOutcome.RETRIED}
    assert m.promote_now([s]) == {s: emq.ActionOutcome.PROMOTED}
    assert [j.id for j in m.jobs("pending").jobs] == [d, s]
    assert m.delete([d, s]) == {d: emq.ActionOutcome.DELETED, s: emq.ActionOutcome.DELETED}
    assert_invariants(r, P)


def test_retry_of_a_cancelled_job_runs_it_again_as_a_new_job(client, r):
    """An operator may retry a cancelled job as a dead one (Sidekiq and Oban
    let them): a job cancelled before it ran, and one asked to stop while
    running and cancelled when its worker settled it, are ready again with 0
    attempts; each row is kept for good again (no expiry, out of `P
    cancelled`), the running one's `cancel` mark and its request in `P
    cancels` are gone, and its next run completes as done, not cancelled. A
    retry that left the mark would cancel the new run at its settle; one that
    left the expiry would lose a ready row (I1); `retry_dead` still takes dead
    jobs only."""
    q, P = fresh(client)
    q.set_retention(keep_done=600)
    waiting = q.add("w", delay=LATER)
    assert q.cancel(waiting) is emq.CancelOutcome.CANCELLED
    running = q.add("r")
    (job,) = q.claim(1)
    assert job.id == running and q.cancel(running) is emq.CancelOutcome.STOPPING
    assert q.complete(job) is True
    for id in (waiting, running):
        assert r.hget(P + f"job:{id}", "state") == b"cancelled" and r.pttl(P + f"job:{id}") > 0
    assert r.hget(P + f"job:{running}", "cancel") == b"1" and r.zscore(P + "cancels", running) is not None

    assert q.retry_dead() == 0, "retry_dead takes dead jobs only"
    assert q.retry([waiting, running]) == {waiting: emq.ActionOutcome.RETRIED, running: emq.ActionOutcome.RETRIED}
    for id in (waiting, running):
        row = r.hgetall(P + f"job:{id}")
        assert (row[b"state"], row[b"attempts"]) == (b"pending", b"0"), row
        assert b"cancel" not in row and b"finished" not in row
        assert r.pttl(P + f"job:{id}") == -1, "kept for good again"
    assert r.zcard(P + "cancelled") == 0 and r.zscore(P + "cancels", running) is None
    assert sorted(m.decode() for m in r.lrange(P + "pending", 0, -1)) == sorted([waiting, running])
    assert_invariants(r, P)

    jobs = q.claim(2)
    assert sorted(j.id for j in jobs) == sorted([waiting, running])
    assert all(q.complete(j) for j in jobs)
    assert {r.hget(P + f"job:{id}", "state") for id in (waiting, running)} == {b"done"}
    assert q.retry([waiting]) == {waiting: emq.ActionOutcome.NOT_DEAD}, "a done job is still refused"


@pytest.mark.parametrize("backend", ["plan", "lua"])
def test_a_job_the_stalled_check_kills_says_it_stalled(client, r, backend):
    """A job that failed once (its error type and traceback written) and then
    lost its lease past `max_stalled` ends dead with the error `stalled` and
    no error type or traceback: those were an earlier attempt's, and a reader
    (`TaskError.type`) would blame the stall on them. Both backends write the
    same."""
    q, P = fresh(client)
    id = q.add("x", max_attempts=5)
    (job,) = q.claim(1)
    q.fail(job, "ValueError: boom", retry_in=0, error_type="app.ValueError", traceback="Traceback ...")
    assert r.hget(P + f"job:{id}", "error_type") == b"app.ValueError"
    (job,) = q.claim(1, lease=0.05)
    time.sleep(0.15)
    recovered, dead = emq.stalled_check(client, q.name, max_stalled=0, backend=backend)
    assert (recovered, dead) == ([], [id])
    row = r.hgetall(P + f"job:{id}")
    assert (row[b"state"], row[b"error"]) == (b"dead", b"stalled")
    assert b"error_type" not in row and b"traceback" not in row
    (status,) = q.status([id])
    assert status is not None and status.error == "stalled" and status.error_type is None

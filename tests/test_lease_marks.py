"""Lease marks (SPEC §9): a stalled check watches the mark of each second its
selected leases ended in, not their rows; every write to a row in `active`
sets the mark of its lease's second.

Each race is made deterministic with the fault proxy: the check's connection
is held just before its transaction goes out (its reads and watch are done),
another client acts, then the transaction runs. A late holder's settle must
abort the check (the job is not recovered after it was settled); live jobs'
settles, producers and claims must not (the check commits at its first try).
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

import emq

from faults import FaultProxy

Q = "marks"
P = f"emq:{{{Q}}}:"
HOUR_AGO = 3_600_000


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def expire(r: redis.Redis, jobs, *, spacing_ms: int = 1) -> dict[str, int]:
    """The jobs' leases ran out an hour ago (`active` score and row `lease`),
    `spacing_ms` apart: seconds wholly past, whose marks a check watches."""
    base = server_ms(r) - HOUR_AGO
    leases = {}
    for i, job in enumerate(jobs):
        leases[job.id] = base + i * spacing_ms
        r.zadd(P + "active", {job.id: leases[job.id]}, xx=True)
        r.hset(P + "job:" + job.id, "lease", leases[job.id])
    return leases


def claimed(q: emq.Queue, n: int, *, lease: float = 60) -> list:
    q.add_many([b"x"] * n)
    jobs = q.claim(n, lease=lease)
    assert len(jobs) == n
    return jobs


def held_check(proxy: FaultProxy, *, times: int = 2, seconds: float = 0.4, command: str = "MULTI", **kw):
    """Starts a stalled check through `proxy` whose `command` (by default its
    transaction, each try's) is held `seconds` before it goes out; returns
    (thread, result box, a wait for the first hold)."""
    proxy.arm("stall", command=command, times=times, seconds=seconds)
    box: dict = {}

    def run():
        c = emq.connect(proxy.url)
        try:
            box["out"] = emq.stalled_check(c, Q, max_stalled=None, batch=1000, **kw)
        except Exception as e:  # handed to the test
            box["error"] = e

    t = threading.Thread(target=run)
    t.start()

    def wait_for_hold():
        deadline = time.monotonic() + 10
        while not proxy.faults("stall"):
            assert time.monotonic() < deadline, f"the check never reached its {command}"
            time.sleep(0.005)

    return t, box, wait_for_hold


def test_a_check_watches_a_few_marks_for_many_rows_and_sets_them(server, r, client):
    q = emq.Queue(client, Q)
    jobs = claimed(q, 300)
    leases = expire(r, jobs, spacing_ms=10)  # 300 leases over 3 seconds
    seconds = {lease // 1000 for lease in leases.values()}
    assert 3 <= len(seconds) <= 4
    r.config_resetstat()
    recovered, dead = emq.stalled_check(client, Q, max_stalled=None, batch=1000)
    assert sorted(recovered) == sorted(leases) and dead == []
    stats = r.info("commandstats")
    assert stats["cmdstat_exec"]["calls"] == 1, "one transaction on every server"
    assert stats["cmdstat_watch"]["calls"] == 1
    # WATCH's keys: the marks of the seconds, nothing per row.
    assert stats["cmdstat_hmget"]["calls"] == 300, "each row read once"
    for sec in seconds:
        assert r.get(f"{P}leases:{sec}") == b"1"
        assert 0 < r.pttl(f"{P}leases:{sec}") <= 60_000


def test_settles_set_the_mark_of_their_leases_second(server, r, client):
    q = emq.Queue(client, Q)
    a, b, c = claimed(q, 3)
    lease = {j.id: int(r.hget(P + "job:" + j.id, "lease")) for j in (a, b, c)}
    assert q.extend(a, 120)
    assert q.complete(b)
    assert q.fail(c, "boom", retry_in=0) is emq.FailOutcome.SCHEDULED
    for j in (a, b, c):
        assert r.get(f"{P}leases:{lease[j.id] // 1000}") == b"1", j.id
    # A refused settle (a stale token) writes nothing, no mark either.
    before = set(r.keys(P + "leases:*"))
    r.flushdb()
    assert not q.complete(b)
    assert set(r.keys(P + "leases:*")) == set() and before


def settle_late(q: emq.Queue, late, settle: str) -> None:
    """The late holder settles its job: completes, extends or fails it."""
    if settle == "complete":
        assert q.complete(late)
    elif settle == "extend":
        assert q.extend(late, 60)
    else:
        assert q.fail(late, "late", retry_in=10**6) is emq.FailOutcome.SCHEDULED


@pytest.mark.parametrize("settle", ["complete", "extend", "fail"])
def test_a_late_holder_settling_during_a_check_aborts_it(server, r, proxy, settle):
    """The holder of an expired lease settles it between the check's reads and
    its EXEC: the check must see that (the mark of the lease's second) and not
    recover the job afterwards."""
    q = emq.Queue(emq.connect(server.url), Q)
    jobs = claimed(q, 20)
    expire(r, jobs)
    late = jobs[7]
    t, box, wait_for_hold = held_check(proxy)
    wait_for_hold()
    settle_late(q, late, settle)
    t.join(30)
    assert "error" not in box, box.get("error")
    recovered, dead = box["out"]
    assert late.id not in recovered, "recovered after its holder settled it"
    assert sorted(recovered) == sorted(j.id for j in jobs if j is not late)
    assert len(proxy.faults("stall")) == 2, "the first transaction was aborted and tried again"
    state = r.hget(P + "job:" + late.id, "state")
    assert state == {"complete": b"done", "extend": b"active", "fail": b"scheduled"}[settle]
    assert late.id.encode() not in r.lrange(P + "pending", 0, -1)


@pytest.mark.parametrize("settle", ["complete", "extend", "fail"])
def test_a_holder_settling_between_the_selection_and_the_watch_is_seen(server, r, proxy, settle):
    """The holder of an expired lease settles it after the check has read its
    selection and before its watch: the head of `active`, read again under the
    watch, shows it (gone, or scored anew), so the check starts again and
    leaves the job alone."""
    q = emq.Queue(emq.connect(server.url), Q)
    jobs = claimed(q, 20)
    expire(r, jobs)
    late = jobs[11]
    t, box, wait_for_hold = held_check(proxy, times=1, command="WATCH")
    wait_for_hold()
    settle_late(q, late, settle)
    t.join(30)
    assert "error" not in box, box.get("error")
    recovered, dead = box["out"]
    assert late.id not in recovered and not dead, "recovered after its holder settled it"
    assert sorted(recovered) == sorted(j.id for j in jobs if j is not late)
    assert r.hget(P + "job:" + late.id, "state") == {"complete": b"done", "extend": b"active", "fail": b"scheduled"}[settle]


def test_live_settles_producers_and_claims_do_not_abort_a_check(server, r, proxy):
    """Between the check's reads and its EXEC: live jobs complete, extend and
    fail, producers add, a worker claims. None of it touches what the check
    decided on: it commits at its first try."""
    q = emq.Queue(emq.connect(server.url), Q)
    expired = claimed(q, 50)
    live = claimed(q, 30)
    expire(r, expired)
    t, box, wait_for_hold = held_check(proxy)
    wait_for_hold()
    for j in live[:10]:
        assert q.complete(j)
    for j in live[10:20]:
        assert q.extend(j, 60)
    for j in live[20:]:
        assert q.fail(j, "x", retry_in=0) is emq.FailOutcome.SCHEDULED
    q.add_many([b"y"] * 20)
    assert len(q.claim(15, lease=60)) == 15
    t.join(30)
    assert "error" not in box, box.get("error")
    recovered, _ = box["out"]
    assert sorted(recovered) == sorted(j.id for j in expired)
    assert len(proxy.faults("stall")) == 1, "the check was aborted by traffic it does not depend on"


def test_a_selection_over_many_seconds_is_grouped_where_watch_grows(server, r, client):
    """130 leases, each in a second of its own: 130 marks. Where WATCH grows with
    the keys watched (before Valkey 9) the check applies groups of 64 rows; on
    Valkey 9 one transaction. Every job is recovered once either way."""
    q = emq.Queue(client, Q)
    jobs = claimed(q, 130)
    leases = expire(r, jobs, spacing_ms=1000)
    rows, cap = emq._core._sweep_group(client, "stalled", 1000)
    assert rows == 1000
    r.config_resetstat()
    recovered, _ = emq.stalled_check(client, Q, max_stalled=None, batch=1000)
    assert recovered == sorted(leases, key=leases.get)
    execs = r.info("commandstats")["cmdstat_exec"]["calls"]
    assert execs == (1 if cap is None else 3), (cap, execs)
    assert len(r.keys(P + "leases:*")) == 130

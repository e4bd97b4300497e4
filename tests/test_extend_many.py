"""`Queue.extend_many` (SPEC §7, issue 17): a worker extends every running job in
one call. Each job is answered as `extend` would answer it alone; a lost lease
is left as it is; bad input writes nothing."""

from __future__ import annotations

import pytest
import redis

import emq

Q = "many"
P = f"emq:{{{Q}}}:"


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def snapshot(r: redis.Redis) -> dict:
    return {k: (r.type(k), r.dump(k), r.pttl(k) >= 0) for k in sorted(r.keys("*"))}


def test_a_batch_of_current_stale_done_and_ghost_jobs(server, r, client):
    q = emq.Queue(client, Q)
    q.add_many([b"a", b"b", b"c", b"d", b"e"])
    a, b, c, d, e = q.claim(5, lease_ms=60_000)
    assert q.complete(c)  # done: its token is no longer good
    r.delete(P + "job:" + d.id)  # a ghost: its row is gone
    stale_b = emq.Job(id=b.id, data=b"", token="not-the-token")
    before = {j.id: (r.hgetall(P + "job:" + j.id), r.zscore(P + "active", j.id)) for j in (c, d)}
    t0 = server_ms(r)
    got = q.extend_many([a, stale_b, c, d, e], 120_000)
    t1 = server_ms(r)
    assert got == [True, False, False, False, True]
    # Each as the single call answers it.
    assert [q.extend(j, 120_000) for j in (stale_b, c, d)] == [False, False, False]
    for j in (a, e):
        lease = int(r.hget(P + "job:" + j.id, "lease"))
        assert t0 + 120_000 <= lease <= t1 + 120_000 + 1000
        assert r.zscore(P + "active", j.id) == lease
    assert int(r.hget(P + "job:" + b.id, "lease")) < t0 + 60_000 + 1000, "the stale token's job keeps its lease"
    assert {j.id: (r.hgetall(P + "job:" + j.id), r.zscore(P + "active", j.id)) for j in (c, d)} == before


def test_an_extend_sets_the_lease_marks_of_the_old_leases(server, r, client):
    q = emq.Queue(client, Q)
    q.add_many([b"a", b"b"])
    jobs = q.claim(2, lease_ms=60_000)
    old = {int(r.hget(P + "job:" + j.id, "lease")) // 1000 for j in jobs}
    assert q.extend_many(jobs, 60_000) == [True, True]
    for second in old:
        assert r.get(f"{P}leases:{second}") == b"1"


@pytest.mark.parametrize(
    "bad",
    ["lane", "lease_ms", "not a job", "no token"],
)
def test_bad_input_writes_nothing(server, r, client, bad):
    q = emq.Queue(client, Q)
    q.add_many([b"a", b"b"])
    a, b = q.claim(2, lease_ms=60_000)
    before = snapshot(r)
    lease_ms = 1000
    jobs: list = [a, b]
    if bad == "lane":
        jobs = [a, emq.Job(id=b.id, data=b"", token=b.token, lane="other")]
    elif bad == "lease_ms":
        lease_ms = 0
    elif bad == "not a job":
        jobs = [a, "b"]
    else:
        jobs = [a, emq.Job(id=b.id, data=b"")]
    with pytest.raises(emq.ArgumentError, match="EMQ.EXTEND"):
        q.extend_many(jobs, lease_ms)
    assert snapshot(r) == before


def test_a_job_run_again_after_its_lease_was_lost(server, r, client):
    """A worker may hold a job twice: the run whose lease was lost and the new
    claim. Both in one call: the old token refused, the new one extended."""
    q = emq.Queue(client, Q)
    q.add(b"a")
    (old,) = q.claim(1, lease_ms=60_000)
    r.zadd(P + "active", {old.id: 1}, xx=True)  # its lease ran out
    assert emq.stalled_check(client, Q, max_stalled=None) == ([old.id], [])
    (new,) = q.claim(1, lease_ms=60_000)
    assert q.extend_many([old, new, old], 120_000) == [False, True, False]
    assert q.extend_many([new, new], 120_000) == [True, True]


def test_no_jobs_is_no_call(server, r, client):
    q = emq.Queue(client, Q)
    before = snapshot(r)
    assert q.extend_many([], 1000) == []
    assert snapshot(r) == before

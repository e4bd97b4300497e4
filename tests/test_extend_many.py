"""`Queue.extend_many` (SPEC §7): a worker extends every running job in
one call. Each job is answered as `extend` would answer it alone; a lost lease
is left as it is; bad input writes nothing."""

from __future__ import annotations

import pytest
import redis

import emq
from emq.embedded import module_path
from test_complete_many import normalised

needs_module = pytest.mark.skipif(module_path() is None, reason="./dev module has not built it")

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
    a, b, c, d, e = q.claim(5, lease=60)
    assert q.complete(c)  # done: its token is no longer good
    r.delete(P + "job:" + d.id)  # a ghost: its row is gone
    stale_b = emq.Job(id=b.id, data=b"", token="not-the-token")
    before = {j.id: (r.hgetall(P + "job:" + j.id), r.zscore(P + "active", j.id)) for j in (c, d)}
    t0 = server_ms(r)
    got = q.extend_many([a, stale_b, c, d, e], 120)
    t1 = server_ms(r)
    assert got == [True, False, False, False, True]
    # Each as the single call answers it.
    assert [q.extend(j, 120) for j in (stale_b, c, d)] == [False, False, False]
    for j in (a, e):
        lease = int(r.hget(P + "job:" + j.id, "lease"))
        assert t0 + 120_000 <= lease <= t1 + 120_000 + 1000
        assert r.zscore(P + "active", j.id) == lease
    assert int(r.hget(P + "job:" + b.id, "lease")) < t0 + 60_000 + 1000, "the stale token's job keeps its lease"
    assert {j.id: (r.hgetall(P + "job:" + j.id), r.zscore(P + "active", j.id)) for j in (c, d)} == before


def test_an_extend_sets_the_lease_marks_of_the_old_leases(server, r, client):
    q = emq.Queue(client, Q)
    q.add_many([b"a", b"b"])
    jobs = q.claim(2, lease=60)
    old = {int(r.hget(P + "job:" + j.id, "lease")) // 1000 for j in jobs}
    assert q.extend_many(jobs, 60) == [True, True]
    for second in old:
        assert r.get(f"{P}leases:{second}") == b"1"


@pytest.mark.parametrize(
    "bad",
    ["lane", "lease", "not a job", "no token"],
)
def test_bad_input_writes_nothing(server, r, client, bad):
    q = emq.Queue(client, Q)
    q.add_many([b"a", b"b"])
    a, b = q.claim(2, lease=60)
    before = snapshot(r)
    lease = 1
    jobs: list = [a, b]
    if bad == "lane":
        jobs = [a, emq.Job(id=b.id, data=b"", token=b.token, lane="other")]
    elif bad == "lease":
        lease = 0
    elif bad == "not a job":
        jobs = [a, "b"]
    else:
        jobs = [a, emq.Job(id=b.id, data=b"")]
    with pytest.raises(emq.ArgumentError, match=f"^Queue.extend_many: .*{bad.split()[-1]}"):
        q.extend_many(jobs, lease)
    assert snapshot(r) == before


def test_a_job_run_again_after_its_lease_was_lost(server, r, client):
    """A worker may hold a job twice: the run whose lease was lost and the new
    claim. Both in one call: the old token refused, the new one extended."""
    q = emq.Queue(client, Q)
    q.add(b"a")
    (old,) = q.claim(1, lease=60)
    r.zadd(P + "active", {old.id: 1}, xx=True)  # its lease ran out
    assert emq.stalled_check(client, Q, max_stalled=None) == ([old.id], [])
    (new,) = q.claim(1, lease=60)
    assert q.extend_many([old, new, old], 120) == [False, True, False]
    assert q.extend_many([new, new], 120) == [True, True]


def test_no_jobs_is_no_call(server, r, client):
    q = emq.Queue(client, Q)
    before = snapshot(r)
    assert q.extend_many([], 1) == []
    assert snapshot(r) == before


def held_set(q: emq.Queue, r: redis.Redis) -> list[emq.Job]:
    """Jobs claimed on `q` (flat and on lane L), then one done, one a ghost,
    and a stale copy of another: the same on every call."""
    q.add_many([b"a", b"b", b"c", b"d"])
    q.add_many([{"data": b"l1", "lane": "L"}, {"data": b"l2", "lane": "L"}])
    jobs = sorted(q.claim(6, lease=60), key=lambda j: j.data)
    a, b, c, d, l1, l2 = jobs
    assert q.complete(c)
    r.delete(f"emq:{{{q.name}}}:job:{d.id}")
    stale = emq.Job(id=b.id, data=b"", token="not-the-token")
    return [a, stale, c, d, l1, l2, a]


@needs_module
def test_the_module_extends_as_the_plan_does(server, r, client):
    """`EMQ.EXTEND` (emq's server module, one command) against the plan's
    conversation, from the same state: the same answers, the same keyspace
    (leases aside), leases that end `lease` after the call's clock, and the
    marks of the old leases' seconds set."""
    mq, pq = emq.Queue(client, "one", backend="module"), emq.Queue(client, "two")
    mjobs, pjobs = held_set(mq, r), held_set(pq, r)
    old = {int(r.hget("emq:{one}:job:" + j.id, "lease")) // 1000 for j in (mjobs[0], *mjobs[4:6])}  # the held ones
    t0 = server_ms(r)
    got = mq.extend_many(mjobs, 120)
    t1 = server_ms(r)
    ghosts = [("emq:{one}:active", mjobs[3].id), ("emq:{two}:active", pjobs[3].id)]
    kept = [r.zscore(*g) for g in ghosts]
    assert got == pq.extend_many(pjobs, 120) == [True, False, False, False, True, True, True]
    assert [r.zscore(*g) for g in ghosts] == kept, "a ghost is left as it is"
    for g in ghosts:
        r.zrem(*g)  # its id differs between the two queues: out of the comparison
    assert normalised(r, "one") == normalised(r, "two")
    for j, ok in zip(mjobs, got):
        if ok:
            lease = int(r.hget("emq:{one}:job:" + j.id, "lease"))
            assert t0 + 120_000 <= lease <= t1 + 120_000 and r.zscore("emq:{one}:active", j.id) == lease
    assert all(r.get(f"emq:{{one}}:leases:{s}") == b"1" for s in old)
    # One job alone (`extend` sends EMQ.EXTEND of one), held and not.
    assert [mq.extend(j, 5) for j in mjobs[:2]] == [pq.extend(j, 5) for j in pjobs[:2]] == [True, False]
    assert normalised(r, "one") == normalised(r, "two")


@needs_module
def test_the_module_refuses_bad_input_and_wrong_types_writing_nothing(server, r, client):
    q = emq.Queue(client, Q, backend="module")
    jobs = held_set(q, r)
    a, l1 = jobs[0], jobs[4]
    before = snapshot(r)
    p = P  # the rows below fit on a line
    for args, code, words in [
        (["EMQ.EXTEND", "1", p + "active", p, "0", a.id, a.token, ""], "EMQARG", "lease_ms must be a positive integer"),
        (["EMQ.EXTEND", "1", p + "active", p, "x", a.id, a.token, ""], "EMQARG", "lease_ms"),
        (["EMQ.EXTEND", "1", p + "active", p, "1000", a.id, a.token], "EMQLAYOUT", "lease_ms and an id, token and lane a job"),
        (["EMQ.EXTEND", "1", p + "pending", p, "1000", a.id, a.token, ""], "EMQLAYOUT", "is not"),
        (["EMQ.EXTEND", "1", p + "active", p, "1000", a.id, "", ""], "EMQARG", "token must not be empty"),
    ]:
        with pytest.raises(redis.ResponseError, match=f"^{code} EMQ.EXTEND: (layout: )?.*{words}"):
            r.execute_command(*args)
        assert snapshot(r) == before, args
    # A lane other than its row's: the plan's ArgumentError, from both backends.
    other = emq.Job(id=l1.id, data=b"", token=l1.token, lane="M")
    for backend in ("module", "plan"):
        with pytest.raises(emq.ArgumentError, match="^Queue.extend_many: job names another lane than its row"):
            emq.Queue(client, Q, backend=backend).extend_many([a, other], 1)  # type: ignore[arg-type]
        assert snapshot(r) == before
    # `active` of the wrong type: the same LayoutError from both, nothing written.
    r.delete(P + "active")
    r.set(P + "active", "not a zset")
    wrong = snapshot(r)
    errors = []
    for backend in ("module", "plan"):
        with pytest.raises(emq.LayoutError, match="^Queue.extend_many: ") as e:
            emq.Queue(client, Q, backend=backend).extend_many([a], 1)  # type: ignore[arg-type]
        errors.append(str(e.value))
        assert snapshot(r) == wrong
    assert errors[0] == errors[1]

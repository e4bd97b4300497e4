"""`Queue.settle_many` (SPEC §7, a worker's group commit): completes and fails of
many held jobs in one call. Each is answered as `complete` or `fail` would answer
it alone, the result is that of the single calls one after another, and bad
input writes nothing."""

from __future__ import annotations

import pytest
import redis

import emq
from emq.embedded import module_path
from test_complete_many import normalised, snapshot

needs_module = pytest.mark.skipif(module_path() is None, reason="./dev module has not built it")


def twin(client: emq.Client, r: redis.Redis, name: str, backend: str = "plan") -> tuple[emq.Queue, dict[bytes, emq.Job]]:
    """A queue with flat and lane jobs claimed, by their data: f1 to f4 flat, d1
    and d2 on their last attempt (a fail makes them dead), a1 on lane A (limited
    to 1, with a2 waiting), b1 and b2 on lane B (limited to 1, over it), c1 on
    lane C (no limit, nothing waiting). The same on every call."""
    q = emq.Queue(client, name, backend=backend)  # type: ignore[arg-type]
    q.add_many([b"f1", b"f2", b"f3", b"f4"])
    q.add_many([{"data": b"d1", "max_attempts": 1}, {"data": b"d2", "max_attempts": 1}])
    q.add_many([{"data": b"a1", "lane": "A"}, {"data": b"b1", "lane": "B"}, {"data": b"b2", "lane": "B"}, {"data": b"c1", "lane": "C"}])
    jobs = q.claim(10, lease=60)
    assert len(jobs) == 10
    q.set_lane_limit("A", 1)
    q.set_lane_limit("B", 1)
    q.add_many([{"data": b"a2", "lane": "A"}, {"data": b"b3", "lane": "B"}])  # waiting: offered once a slot frees
    return q, {j.data: j for j in jobs}


def single(q: emq.Queue, item) -> object:
    if isinstance(item, tuple):
        job, error, *retry = item
        return q.fail(job, error, retry_in=retry[0] if retry else None)
    return q.complete(item)


def batch(jobs: dict[bytes, emq.Job], plan: list) -> list:
    """`plan`'s items with each job's data replaced by the job."""
    return [(jobs[p[0]], *p[1:]) if isinstance(p, tuple) else jobs[p] for p in plan]


PLANS = {
    # Retries ready at once (flat: pending and a wake token; lane C: its list
    # and the ring), retries later (the first a new head of `schedule`, the
    # second earlier still, the third later: two wake tokens), completes, and
    # the last attempts dying, interleaved.
    "mixed": [
        (b"f1", "boom", 0),
        b"f2",
        (b"f3", "later", 60),
        (b"c1", ValueError("lane"), 0),
        (b"f4", "sooner", 30),
        (b"d1", "last"),
        b"a1",
        (b"b1", "b later", 90),
        (b"d2", b"last too", 0),
        b"b2",
    ],
    # Lane jobs only: slots freed by completes and by fails, in turn.
    "lanes": [(b"b1", "x", 0), b"a1", b"b2", (b"c1", "y", 5)],
    # Fails only, one with the backoff drawn (its due time is left out of the
    # comparison; two drawn would make the second's wake token a coin toss).
    "fails": [(b"f1", "a"), (b"a1", "b", 0), (b"d1", "c"), (b"f2", "d", 0)],
}


@pytest.mark.parametrize("plan", sorted(PLANS))
def test_the_same_as_the_single_calls_one_after_another(server, r, client, plan):
    q1, jobs1 = twin(client, r, "one")
    q2, jobs2 = twin(client, r, "two")
    got = q1.settle_many(batch(jobs1, PLANS[plan]))
    want = [single(q2, item) for item in batch(jobs2, PLANS[plan])]
    assert got == want
    assert normalised(r, "one") == normalised(r, "two")
    assert r.llen("emq:{one}:wake") == r.llen("emq:{two}:wake")


@needs_module
@pytest.mark.parametrize("plan", sorted(PLANS))
def test_the_module_settles_as_the_plan_does(server, r, client, plan):
    """`EMQ.SETTLE` (emq's server module, one command) against the plan's
    conversation: the same answers and the same keyspace, from the same state."""
    q1, jobs1 = twin(client, r, "one", backend="module")
    q2, jobs2 = twin(client, r, "two")
    got = q1.settle_many(batch(jobs1, PLANS[plan]))
    want = q2.settle_many(batch(jobs2, PLANS[plan]))
    assert got == want
    assert normalised(r, "one") == normalised(r, "two")
    assert r.llen("emq:{one}:wake") == r.llen("emq:{two}:wake")
    # A single fail through the module (`EMQ.SETTLE` of one) against the plan's
    # (held still, or settled above: "scheduled", or refused).
    assert q1.fail(jobs1[b"f3"], "again", retry_in=0) == q2.fail(jobs2[b"f3"], "again", retry_in=0)
    assert normalised(r, "one") == normalised(r, "two")


@needs_module
def test_the_module_refuses_bad_input_and_wrong_types_writing_nothing(server, r, client):
    q, jobs = twin(client, r, "mbad", backend="module")
    f1, f2, f3 = jobs[b"f1"], jobs[b"f2"], jobs[b"f3"]
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError, match=r"^Queue\.settle_many: .*twice"):
        q.settle_many([f1, (f2, "x", 0), (f1, "y", 0)])
    assert snapshot(r) == before
    r.delete("emq:{mbad}:schedule")
    r.set("emq:{mbad}:schedule", "not a zset")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError, match="^Queue.settle_many: "):
        q.settle_many([f1, (f2, "y", 0), (f3, "x", 60)])
    assert snapshot(r) == before


def test_the_answers_of_the_mixed_plan(server, r, client):
    q, jobs = twin(client, r, "ans")
    got = q.settle_many(batch(jobs, PLANS["mixed"]))
    assert got == ["scheduled", True, "scheduled", "scheduled", "scheduled", "dead", True, "scheduled", "dead", True]
    assert r.lrange("emq:{ans}:pending", 0, -1) == [jobs[b"f1"].id.encode()]
    assert r.zscore("emq:{ans}:dead", jobs[b"d2"].id) is not None
    row = r.hgetall(f"emq:{{ans}}:job:{jobs[b'c1'].id}")
    assert (row[b"state"], row[b"error"], b"token" in row) == (b"pending", b"ValueError: lane", False)
    assert r.zcard("emq:{ans}:active") == 0


def test_a_batch_of_current_stale_done_and_ghost_jobs(server, r, client):
    q, jobs = twin(client, r, "mix")
    f1, f2, f3, f4, b1 = (jobs[d] for d in (b"f1", b"f2", b"f3", b"f4", b"b1"))
    assert q.complete(f2)  # done already
    r.delete(f"emq:{{mix}}:job:{f3.id}")  # a ghost
    stale = emq.Job(id=b1.id, data=b"", token="not-the-token", lane="B")
    kept = {j.id: r.hgetall(f"emq:{{mix}}:job:{j.id}") for j in (f2, b1)}
    got = q.settle_many([(f1, "boom", 0), (stale, "x", 0), (f2, "y"), (f3, "z", 0), f4])
    assert got == ["scheduled", "refused", "refused", "refused", True]
    assert [single(q, item) for item in [(stale, "x", 0), (f2, "y"), (f3, "z", 0)]] == ["refused"] * 3, "as the single calls answer"
    assert {j.id: r.hgetall(f"emq:{{mix}}:job:{j.id}") for j in (f2, b1)} == kept
    assert not r.exists(f"emq:{{mix}}:job:{f3.id}"), "a ghost is not written"
    assert r.lrange("emq:{mix}:pending", 0, -1) == [f1.id.encode()]
    assert r.zscore("emq:{mix}:active", b1.id) is not None


def test_dead_trimmed_as_the_single_calls_trim_it(server, r, client):
    qs = []
    for name in ("one", "two"):
        q = emq.Queue(client, name)
        q.set_retention(max_dead=2)
        q.add_many([{"data": b"%d" % i, "max_attempts": 1} for i in range(5)])
        qs.append((q, sorted(q.claim(5), key=lambda j: j.data)))
    (q1, j1), (q2, j2) = qs
    assert q1.settle_many([(j, "gone") for j in j1]) == ["dead"] * 5
    assert [q2.fail(j, "gone") for j in j2] == ["dead"] * 5
    assert r.zcard("emq:{one}:dead") == r.zcard("emq:{two}:dead") == 2
    assert normalised(r, "one") == normalised(r, "two")


@pytest.mark.parametrize("bad", ["twice", "lane", "not a job", "no token", "item", "error", "retry"])
def test_bad_input_writes_nothing(server, r, client, bad):
    q, jobs = twin(client, r, "bad")
    f1, f2, a1 = jobs[b"f1"], jobs[b"f2"], jobs[b"a1"]
    before = snapshot(r)
    items: list = {
        "twice": [f1, (f2, "x", 0), (f1, "y", 0)],
        "lane": [(f1, "x", 0), (emq.Job(id=a1.id, data=b"", token=a1.token, lane="B"), "y", 0)],
        "not a job": [(f1, "x", 0), "x"],
        "no token": [f1, (emq.Job(id=f2.id, data=b""), "x")],
        "item": [f1, (f2, "x", 0, 1)],
        "error": [f1, (f2, 42)],
        "retry": [f1, (f2, "x", -1)],
    }[bad]
    with pytest.raises(emq.ArgumentError, match=r"^Queue\.settle_many: "):
        q.settle_many(items)
    assert snapshot(r) == before


@pytest.mark.parametrize("wrong", ["row", "schedule", "dead", "pending"])
def test_a_wrong_type_found_in_any_job_writes_nothing(server, r, client, wrong):
    """The type of every row, and of every structure any job's fail writes, is
    checked before the transaction: a wrong one at the end of the batch leaves
    the completes and fails before it unwritten."""
    q, jobs = twin(client, r, "wt")
    f1, f2, f3, d1 = jobs[b"f1"], jobs[b"f2"], jobs[b"f3"], jobs[b"d1"]
    last = {"row": (f3, "x", 0), "schedule": (f3, "x", 60), "dead": (d1, "x"), "pending": (f3, "x", 0)}[wrong]
    if wrong == "row":
        r.delete(f"emq:{{wt}}:job:{f3.id}")
        r.set(f"emq:{{wt}}:job:{f3.id}", "not a hash")
    else:
        r.delete(f"emq:{{wt}}:{wrong}")
        r.set(f"emq:{{wt}}:{wrong}", "not a zset or list")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError, match="^Queue.settle_many: "):
        q.settle_many([f1, (f2, "y", 0), last])
    assert snapshot(r) == before


def test_no_jobs_is_no_call(server, r, client):
    q = emq.Queue(client, "none")
    before = snapshot(r)
    assert q.settle_many([]) == []
    assert snapshot(r) == before

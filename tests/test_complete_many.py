"""`Queue.complete_many` (SPEC §7, a worker's group commit): many held jobs
completed in one call. Each is answered as `complete` would answer it alone, the
result is that of the completes one after another, and bad input writes nothing."""

from __future__ import annotations

import pytest
import redis

import emq


def snapshot(r: redis.Redis) -> dict:
    return {k: (r.type(k), r.dump(k), r.pttl(k) >= 0) for k in sorted(r.keys("*"))}


def twin(client: emq.Client, r: redis.Redis, name: str) -> tuple[emq.Queue, list]:
    """A queue with flat and lane jobs claimed (lane A limited to 1 with work
    waiting, lane B over its limit), some left to settle: the same on every call."""
    q = emq.Queue(client, name)
    q.add_many([b"f1", b"f2"])
    q.add_many([{"data": b"a1", "lane": "A"}, {"data": b"b1", "lane": "B"}, {"data": b"b2", "lane": "B"}])
    jobs = q.claim(5, lease=60)
    assert len(jobs) == 5
    q.set_lane_limit("A", 1)
    q.set_lane_limit("B", 1)
    q.add_many([{"data": b"a2", "lane": "A"}, {"data": b"b3", "lane": "B"}])  # waiting: offered once a slot frees
    return q, sorted(jobs, key=lambda j: j.data)


def normalised(r: redis.Redis, name: str) -> dict:
    """The queue's keyspace, times (finished, done scores, expiries) and ids left out."""
    p = f"emq:{{{name}}}:"
    ids = {}
    for k in r.keys(p + "job:*"):
        ids[k.decode()[len(p) + 4 :]] = r.hget(k, "data").decode()
    name_of = lambda i: ids.get(i.decode() if isinstance(i, bytes) else i, i)  # noqa: E731
    out = {}
    for k in sorted(r.keys(p + "*")):
        key = k.decode()[len(p) :]
        t = r.type(k).decode()
        if key.startswith("job:"):
            row = {
                f.decode(): v for f, v in r.hgetall(k).items() if f not in (b"finished", b"token", b"lease", b"claimed", b"created", b"due")
            }
            out["job:" + name_of(key[4:])] = row
        elif key.startswith("leases:"):
            # Marks were set; how many depends on how many seconds the leases
            # ended in, which two runs a moment apart may not share.
            out["leases"] = True
        elif t == "list":
            out[key] = [name_of(x) for x in r.lrange(k, 0, -1)] if key in ("pending",) or key.startswith("lane:") else r.lrange(k, 0, -1)
        elif t == "zset":
            out[key] = sorted(name_of(m) for m in r.zrange(k, 0, -1))
        elif t == "hash":
            out[key] = r.hgetall(k)
        elif t == "set":
            out[key] = sorted(r.smembers(k))
        else:
            out[key] = r.get(k)
    return out


def test_the_same_as_completes_one_after_another(server, r, client):
    q1, jobs1 = twin(client, r, "one")
    q2, jobs2 = twin(client, r, "two")
    order = [3, 2, 0, 4, 1]  # by data a1, b1, b2, f1, f2: f1, b2 (B still full), a1 (offers A), f2, b1 (offers B)
    got = q1.complete_many([jobs1[i] for i in order])
    want = [q2.complete(jobs2[i]) for i in order]
    assert got == want == [True] * 5
    assert normalised(r, "one") == normalised(r, "two")


def test_a_batch_of_current_stale_done_and_ghost_jobs(server, r, client):
    q, jobs = twin(client, r, "mix")
    a1, b1, b2, f1, f2 = jobs
    assert q.complete(b2)  # done already
    r.delete(f"emq:{{mix}}:job:{f2.id}")  # a ghost
    stale = emq.Job(id=b1.id, data=b"", token="not-the-token", lane="B")
    before = {j.id: r.hgetall(f"emq:{{mix}}:job:{j.id}") for j in (b1, b2)}
    got = q.complete_many([a1, stale, b2, f2, f1])
    assert got == [True, False, False, False, True]
    assert [q.complete(j) for j in (stale, b2, f2)] == [False, False, False], "as the single calls answer"
    assert {j.id: r.hgetall(f"emq:{{mix}}:job:{j.id}") for j in (b1, b2)} == before
    for j in (a1, f1):
        assert r.hget(f"emq:{{mix}}:job:{j.id}", "state") == b"done"
        assert r.zscore("emq:{mix}:done", j.id) is not None
    assert b"A" in r.lrange("emq:{mix}:ring", 0, -1), "lane A's slot freed: offered"


@pytest.mark.parametrize("bad", ["twice", "lane", "not a job", "no token"])
def test_bad_input_writes_nothing(server, r, client, bad):
    q, jobs = twin(client, r, "bad")
    a1, b1, b2, f1, f2 = jobs
    before = snapshot(r)
    batch: list = {
        "twice": [f1, f2, f1],
        "lane": [f1, emq.Job(id=a1.id, data=b"", token=a1.token, lane="B")],
        "not a job": [f1, "x"],
        "no token": [f1, emq.Job(id=f2.id, data=b"")],
    }[bad]
    with pytest.raises(emq.ArgumentError, match="^Queue.complete_many: "):
        q.complete_many(batch)
    assert snapshot(r) == before


def test_no_jobs_is_no_call(server, r, client):
    q = emq.Queue(client, "none")
    before = snapshot(r)
    assert q.complete_many([]) == []
    assert snapshot(r) == before

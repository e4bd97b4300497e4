"""Retention (bounded memory), on both servers: the policy in `P retention`
(`Queue.set_retention`, `Queue.retention`), done rows (deleted at once, kept with
an expiry and listed in `done`, or kept forever), `dead` trimmed by count and by
age as jobs die (FAIL and the stalled check, both backends), the facade's reads
(`get`, `counts`, `lanes`) raising error replies, bad input writing nothing, and
a steady load whose memory stays flat under a policy and grows without one.

The memory test measures the server's `used_memory` (INFO memory) while a
steady load runs through the core (add_many, claim, complete or fail in batches
of 500, at most 4,000 jobs a second, no worker threads): with done rows kept
1 s and at most 100 dead jobs, every sample after a warm-up (jobs 8,000 to
16,000) stays within `BOUND` (4 MiB) of the warm-up's highest sample; with
nothing bounded, the same measurement grows past it (so it can fail).
"""

from __future__ import annotations

import math
import time

import pytest

import emq
from test_jobs_model import assert_invariants, snapshot

Q = "ret"
P = f"emq:{{{Q}}}:"
DEFAULTS = emq._core.RETENTION_DEFAULTS
LATER = 3600  # seconds


@pytest.fixture
def q(client) -> emq.Queue:
    return emq.Queue(client, Q)


def job_key(id_: str) -> str:
    return P + "job:" + id_


def server_ms(r) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def run_one(q: emq.Queue, data=b"x", **kw) -> emq.Job:
    """Adds a job and claims it."""
    id_ = q.add(data, **kw)
    [j] = q.claim(1)
    assert j.id == id_
    return j


# ---------------------------------------------------------------------------
# the policy
# ---------------------------------------------------------------------------


def test_the_defaults_and_setting_each_field(q, r):
    assert DEFAULTS == {"done_ms": 600_000, "dead_ms": 2_592_000_000, "dead_max": 10_000}
    assert q.retention() == emq.Retention(keep_done=600.0, keep_dead=2_592_000.0, max_dead=10_000)
    assert not r.exists(P + "retention"), "reading the policy writes nothing"
    q.set_retention(keep_done=1.5)
    assert r.hgetall(P + "retention") == {b"done_ms": b"1500"}
    assert q.retention() == emq.Retention(keep_done=1.5, keep_dead=2_592_000.0, max_dead=10_000)
    q.set_retention(keep_dead=None, max_dead=3)
    assert q.retention() == emq.Retention(keep_done=1.5, keep_dead=None, max_dead=3)
    q.set_retention(keep_done=None, keep_dead=0, max_dead=None)
    assert r.hgetall(P + "retention") == {b"done_ms": b"-1", b"dead_ms": b"0", b"dead_max": b"-1"}
    assert q.retention() == emq.Retention(keep_done=None, keep_dead=0.0, max_dead=None)
    q.set_retention(keep_done=0.0001)
    assert q.retention().keep_done == 0.001, "a positive time is never rounded down to 0 (deleted at once)"
    q.set_retention(keep_done=None, keep_dead=0, max_dead=None)
    q.set_retention()  # nothing given: nothing written
    assert r.hgetall(P + "retention") == {b"done_ms": b"-1", b"dead_ms": b"0", b"dead_max": b"-1"}


def test_unreadable_fields_count_as_their_defaults(q, r):
    r.hset(P + "retention", mapping={"done_ms": "soon", "dead_ms": "-2", "dead_max": "1" * 16, "other": "kept"})
    assert q.retention() == emq.Retention(keep_done=600.0, keep_dead=2_592_000.0, max_dead=10_000)


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"keep_done": -1}, "keep_done"),
        ({"keep_done": -0.5}, "keep_done"),
        ({"keep_done": math.nan}, "keep_done"),
        ({"keep_done": math.inf}, "keep_done"),
        ({"keep_done": "10"}, "keep_done"),
        ({"keep_done": True}, "keep_done"),
        ({"keep_done": 10**13}, "keep_done"),
        ({"keep_dead": -3}, "keep_dead"),
        ({"keep_dead": [1]}, "keep_dead"),
        ({"max_dead": -1}, "max_dead"),
        ({"max_dead": 1.5}, "max_dead"),
        ({"max_dead": False}, "max_dead"),
        ({"max_dead": 10**15}, "max_dead"),
        ({"keep_done": 5, "max_dead": -2}, "max_dead"),
    ],
)
def test_bad_policies_are_refused_and_write_nothing(q, r, kw, name):
    q.set_retention(keep_done=7)
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError) as e:
        q.set_retention(**kw)
    assert str(e.value).startswith("Queue.set_retention: ") and name in str(e.value), str(e.value)
    assert snapshot(r) == before


@pytest.mark.parametrize(
    "kw, name",
    [
        ({"keep_done": -2}, "keep_done"),
        ({"keep_dead": True}, "keep_dead"),
        ({"max_dead": "1"}, "max_dead"),
        ({"max_dead": 10**15}, "max_dead"),
    ],
)
def test_the_core_checks_its_arguments_itself(q, r, kw, name):
    """The facade checks nothing: the queue's core refuses on its own."""
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError) as e:
        q._core.set_retention(**kw)
    assert str(e.value).startswith("Queue.set_retention: ") and name in str(e.value), str(e.value)
    assert snapshot(r) == before


def test_a_retention_key_of_the_wrong_type_is_a_layout_error_and_nothing_is_written(q, r):
    j = run_one(q)
    r.set(P + "retention", "x")
    before = snapshot(r)
    for call in (q.retention, lambda: q.set_retention(max_dead=1), q.counts, lambda: q.complete(j)):
        with pytest.raises(emq.LayoutError) as e:
            call()
        assert "retention" in str(e.value)
        assert snapshot(r) == before


# ---------------------------------------------------------------------------
# done rows
# ---------------------------------------------------------------------------


def test_a_done_row_is_kept_ten_minutes_by_default_and_listed_in_done(q, r):
    j = run_one(q, lane="A")
    t0 = server_ms(r)
    assert q.complete(j)
    t1 = server_ms(r)
    finished = int(r.hget(job_key(j.id), "finished"))
    assert t0 <= finished <= t1
    assert r.zscore(P + "done", j.id) == finished
    assert 0 < r.pttl(job_key(j.id)) <= 600_000
    assert r.pexpiretime(job_key(j.id)) == finished + 600_000
    got = q.get(j.id)
    assert (got.state, got.token, got.lease_deadline_ms) == ("done", None, None)
    assert q.counts().done == 1
    assert_invariants(r, P)


def test_done_ms_0_deletes_the_row_at_once(q, r):
    q.set_retention(keep_done=0)
    j = run_one(q, lane="A")
    assert q.complete(j)
    assert not r.exists(job_key(j.id)) and not r.exists(P + "done")
    assert q.get(j.id) is None
    assert r.hget(P + "lanectl:A", "active") == b"0", "the lane's slot is given back"
    assert q.counts().done == 0
    assert q.complete(j) is False, "a late word about a deleted row is refused"
    assert_invariants(r, P)


def test_done_rows_kept_forever_have_no_expiry(q, r):
    q.set_retention(keep_done=None)
    j = run_one(q)
    assert q.complete(j)
    assert r.pttl(job_key(j.id)) == -1
    assert r.zscore(P + "done", j.id) == int(r.hget(job_key(j.id), "finished"))
    r.zadd(P + "done", {"old": 5})  # forever: nothing leaves the index
    assert q.complete(run_one(q))
    assert r.zcard(P + "done") == 3
    assert q.counts().done == 3


def test_expired_rows_leave_the_index_and_the_counts(q, r):
    q.set_retention(keep_done=0.2)
    first = run_one(q)
    assert q.complete(first)
    assert q.counts().done == 1
    time.sleep(0.3)
    assert not r.exists(job_key(first.id)), "the row expired"
    assert q.counts().done == 0, "counts only rows still kept"
    assert r.zcard(P + "done") == 1
    second = run_one(q)
    assert q.complete(second)
    assert [m.decode() for m in r.zrange(P + "done", 0, -1)] == [second.id], "the next complete drops the expired entry"
    assert q.counts().done == 1


def test_a_done_key_of_the_wrong_type_refuses_the_complete(q, r):
    j = run_one(q)
    r.set(P + "done", "x")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError) as e:
        q.complete(j)
    assert str(e.value).startswith("Queue.complete: ") and "done" in str(e.value)
    assert snapshot(r) == before
    q.set_retention(keep_done=0)  # it deletes the row, and does not touch done
    assert q.complete(j)
    assert not r.exists(job_key(j.id))


# ---------------------------------------------------------------------------
# dead jobs
# ---------------------------------------------------------------------------


def test_fail_trims_dead_to_max_dead_oldest_first(q, r):
    q.set_retention(max_dead=2)
    ids = []
    for i in range(5):
        j = run_one(q, f"d{i}", id=f"d{i}", max_attempts=1)
        assert q.fail(j, "boom") is emq.FailOutcome.DEAD
        ids.append(j.id)
    assert [m.decode() for m in r.zrange(P + "dead", 0, -1)] == ids[-2:]
    assert r.exists(*[job_key(i) for i in ids[:3]]) == 0, "trimmed jobs lose their rows"
    assert q.get(ids[-1]).state == "dead"
    assert q.counts().dead == 2
    assert_invariants(r, P)


def test_dead_not_kept_and_kept_by_age(q, r):
    q.set_retention(keep_dead=0)
    j = run_one(q, max_attempts=1)
    assert q.fail(j, "boom") is emq.FailOutcome.DEAD
    assert not r.exists(P + "dead") and not r.exists(job_key(j.id)), "not kept: gone at once"
    q.set_retention(keep_dead=60)
    r.zadd(P + "dead", {"old": server_ms(r) - 120_000, "young": server_ms(r) - 1000})
    r.hset(job_key("old"), "state", "dead")
    r.hset(job_key("young"), "state", "dead")
    j = run_one(q, max_attempts=1)
    assert q.fail(j, "boom") is emq.FailOutcome.DEAD
    assert [m.decode() for m in r.zrange(P + "dead", 0, -1)] == ["young", j.id]
    assert not r.exists(job_key("old")) and r.exists(job_key("young"))


@pytest.mark.parametrize("backend", ["plan", "lua"])
def test_stalled_deaths_trim_dead_too(q, r, backend):
    q.set_retention(max_dead=3)
    t = server_ms(r) - 10_000  # recent: the default age limit (30 days) trims none of them
    r.zadd(P + "dead", {f"old{i}": t + i for i in range(4)})
    for i in range(4):
        r.hset(job_key(f"old{i}"), "state", "dead")
    ids = q.add_many([{"data": b"s", "id": f"s{i}"} for i in range(2)])
    for j in q.claim(2, lease=LATER):
        r.zadd(P + "active", {j.id: 1}, xx=True)
        r.hset(job_key(j.id), "lease", 1)
    recovered, dead = q.stalled_check(max_stalled=0, backend=backend)
    assert (recovered, dead) == ([], ids), "the reply lists every id that died"
    # 4 + 2 - 3 = 3 leave, the oldest first.
    assert [m.decode() for m in r.zrange(P + "dead", 0, -1)] == ["old3", "s0", "s1"]
    assert r.exists(job_key("old0"), job_key("old1"), job_key("old2")) == 0
    assert_invariants(r, P)


# ---------------------------------------------------------------------------
# the facade's reads
# ---------------------------------------------------------------------------


def test_get_counts_and_lanes_raise_error_replies(q, r):
    r.set(job_key("s"), "x")
    with pytest.raises(emq.LayoutError) as e:
        q.get("s")
    assert str(e.value).startswith("Queue.get: ") and "job:s" in str(e.value)
    assert q.get("nobody") is None
    with pytest.raises(emq.ArgumentError):
        q.get("")
    r.set(P + "pending", "x")
    with pytest.raises(emq.LayoutError) as e:
        q.counts()
    assert str(e.value).startswith("Queue.counts: ") and "pending" in str(e.value)
    r.delete(P + "pending")
    r.set(P + "lane:L", "x")
    r.sadd(P + "lanes", "L")  # a lane the counts know of (`P lanes`), its list of the wrong type
    with pytest.raises(emq.LayoutError) as e:
        q.counts()
    assert "lane:L" in str(e.value)
    r.delete(P + "lane:L", P + "lanes")
    r.set(P + "lanes", "x")  # the lanes' set itself of the wrong type: counts and lanes() say so
    for read in (q.counts, q.lanes):
        with pytest.raises(emq.LayoutError) as e:
            read()
        assert "lanes" in str(e.value)


def test_lanes_of_a_queue_whose_name_is_a_glob(client, r):
    star, plain = emq.Queue(client, "q*[x]?"), emq.Queue(client, "qa[x]b")
    star.add(b"1", lane="mine")
    star.pause_lane("paused-empty")
    plain.add(b"2", lane="theirs")
    for i in range(1500):  # more than one SCAN page
        r.set(f"noise:{i}", 1)
    assert star.lanes() == ["mine", "paused-empty"]
    assert plain.lanes() == ["theirs"]
    c = star.counts()
    assert c.lanes == {"mine": 1, "paused-empty": 0} and c.ring == 1 and c.done == 0


# ---------------------------------------------------------------------------
# memory under a steady load
# ---------------------------------------------------------------------------

BATCH = 500
SAMPLE_EVERY = 2_000
WARM_UP = (8_000, 16_000)  # jobs: the plateau is the highest sample in this window
BOUND = 4 * 2**20  # bytes a later sample may lie above the plateau


RATE = 4_000  # jobs a second, at most


def steady_load(client: emq.Client, q: emq.Queue, jobs: int) -> list[tuple[int, int]]:
    """Adds, claims and settles `jobs` jobs in batches, at most RATE a second; one
    in ten fails with no attempts left (dies). Gives `(jobs done, used_memory)`
    every SAMPLE_EVERY jobs. Paced, because at full speed on two shared cores the
    server's active expiry falls behind in bursts (rows that are due to expire
    pile up for a second or two, then go at once): bounded too, but a sawtooth."""
    payload = b"p" * 200
    samples = []
    n = 0
    t0 = time.monotonic()
    while n < jobs:
        q.add_many([{"data": payload, "max_attempts": 1}] * BATCH)
        for k, j in enumerate(q.claim(BATCH, lease=600)):
            if k % 10 == 0:
                assert q.fail(j, "boom") is emq.FailOutcome.DEAD
            else:
                assert q.complete(j)
        n += BATCH
        ahead = n / RATE - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
        if n % SAMPLE_EVERY == 0:
            samples.append((n, int(client.info("memory")["used_memory"])))
    return samples


def growth(samples: list[tuple[int, int]]) -> tuple[int, int]:
    """(the plateau, the highest sample after the warm-up)."""
    plateau = max(m for n, m in samples if WARM_UP[0] <= n <= WARM_UP[1])
    later = max(m for n, m in samples if n > WARM_UP[1])
    return plateau, later


def table(samples) -> str:
    return "\n".join(f"{n:>7} jobs {m / 2**20:8.2f} MiB" for n, m in samples)


@pytest.mark.timeout(120)
def test_memory_stays_flat_under_a_steady_load_with_retention(client, q, r):
    """40,000 jobs with done rows kept 1 s and at most 100 dead: every sample
    after the warm-up within 4 MiB of the plateau (without retention the same
    load grows by about 0.8 KiB a job: 18 MiB over these last 24,000 jobs)."""
    q.set_retention(keep_done=1, max_dead=100)
    samples = steady_load(client, q, 40_000)
    plateau, later = growth(samples)
    assert later <= plateau + BOUND, f"memory grew {(later - plateau) / 2**20:.2f} MiB past the plateau:\n{table(samples)}"
    c = q.counts()
    assert c.dead == 100 and c.active == 0 and c.pending == 0
    assert r.zcard(P + "done") < 40_000 * 0.9 / 2, "the done index is trimmed as rows expire"


@pytest.mark.timeout(120)
def test_the_measurement_sees_memory_grow_without_retention(client, q, r):
    """The same load and bound, nothing bounded: memory grows past the bound, so
    the test above can fail."""
    q.set_retention(keep_done=None, keep_dead=None, max_dead=None)
    samples = steady_load(client, q, 28_000)
    plateau, later = growth(samples)
    assert later > plateau + BOUND, f"memory grew only {(later - plateau) / 2**20:.2f} MiB:\n{table(samples)}"
    assert q.counts().done == 28_000 * 9 // 10

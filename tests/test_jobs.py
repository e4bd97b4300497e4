"""The job's operations (SPEC §7), one by one, on both servers: add and add_many,
claim (flat first, lanes round-robin, lanes that cannot be served or are empty
leave the ring, ghosts dropped), extend, complete and fail with the worker's
token, late workers refused after a sweep took the job back, backoff and death.

Time is never slept. A job due "later" is added with a long delay; "time
passes" is modelled by rewriting its `schedule` score and row `due` into the
past with redis-py (`make_due`), and a lease runs out by moving its `active`
score and row `lease` into the past (`expire_lease`). Due times and leases
given to emq are either far in the past (`at=0`: ready at once) or far in
the future, so that the real clock never decides anything during a test. Where a
value depends on the server's clock, it is checked between two TIME readings
taken before and after the call.

After each scenario the invariants I1 to I5 (SPEC §3) are checked on the real
keyspace (`assert_invariants`, from test_jobs_model), and a refused or failed
call is checked to have written nothing by comparing the whole keyspace before
and after (`snapshot`).
"""

from __future__ import annotations

import datetime
import threading
import time

import pytest

import emq
from test_jobs_model import assert_invariants, expire_lease, lrange, make_due, server_ms, snapshot

Q = "jobs"
P = f"emq:{{{Q}}}:"
SCHEDULE, PENDING, ACTIVE, DEAD, RING, WAKE = (P + k for k in ("schedule", "pending", "active", "dead", "ring", "wake"))
LATER = 3600  # an hour, in seconds: "later" (never comes during a test)
LATER_MS = LATER * 1000  # the same, as the server's scores count it
FAR = 10**9


def lane_key(lane: str) -> str:
    return f"{P}lane:{lane}"


def ctl_key(lane: str) -> str:
    return f"{P}lanectl:{lane}"


def job_key(id_: str) -> str:
    return f"{P}job:{id_}"


def zmembers(r, key) -> list[str]:
    return [x.decode() for x in r.zrange(key, 0, -1)]


def ctl(r, lane: str) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in r.hgetall(ctl_key(lane)).items()}


def row(r, id_: str) -> dict[str, str]:
    return {k.decode(): (v if k == b"data" else v.decode("utf-8", "replace")) for k, v in r.hgetall(job_key(id_)).items()}


@pytest.fixture
def q(client) -> emq.Queue:
    return emq.Queue(client, Q)


def ids_of(jobs) -> list[str]:
    return [j.id for j in jobs]


# ---------------------------------------------------------------------------
# add
# ---------------------------------------------------------------------------


def test_add_due_now_is_pending_at_once(q, r):
    before = server_ms(r)
    id_ = q.add(b"hello")
    after = server_ms(r)
    assert isinstance(id_, str) and id_
    assert lrange(r, PENDING) == [id_]
    assert r.zcard(SCHEDULE) == 0
    assert lrange(r, WAKE) == [""], "a flat ready job wakes a parked worker with the token ''"
    f = row(r, id_)
    assert f["state"] == "pending" and f["data"] == b"hello"
    assert (f["attempts"], f["max_attempts"]) == ("0", "3")
    assert "lane" not in f and "token" not in f
    assert before <= int(f["due"]) <= after
    j = q.get(id_)
    assert (j.id, j.data, j.state, j.lane, j.attempts, j.max_attempts, j.token) == (id_, b"hello", "pending", None, 0, 3, None)
    assert_invariants(r, P)


@pytest.mark.parametrize("at", [0, 0.001, "now"])
def test_add_at_a_past_or_present_time_is_ready_at_once(q, r, at):
    if at == "now":
        at = server_ms(r) / 1000
    at_ms = round(at * 1000)
    id_ = q.add("x", at=at)
    assert lrange(r, PENDING) == [id_]
    assert r.zcard(SCHEDULE) == 0
    assert row(r, id_)["state"] == "pending"
    assert int(row(r, id_)["due"]) == at_ms
    assert_invariants(r, P)


# Durations as numbers and as timedeltas, each with the ms the core keeps for it:
# rounded to the nearest (a tie to the even one), a positive one never to 0.
DURATIONS = [
    (LATER, datetime.timedelta(hours=1), LATER_MS),
    (1.5, datetime.timedelta(milliseconds=1500), 1500),
    (172_800.0015, datetime.timedelta(days=2, microseconds=1500), 172_800_002),
    (0.0025, datetime.timedelta(microseconds=2500), 2),
    (0.0004, datetime.timedelta(microseconds=400), 1),
    (0, datetime.timedelta(0), 0),
]


@pytest.mark.parametrize("number, delta, ms", DURATIONS, ids=[str(d[0]) for d in DURATIONS])
def test_a_duration_as_seconds_or_as_a_timedelta_is_the_same_duration(q, r, number, delta, ms):
    """Every duration argument reads seconds and timedeltas alike, to the same
    ms. The retention policy keeps them exactly (its hash), and a delay and a
    lease land within the call's clock readings of now plus that many ms. A
    broken version that read a timedelta by its `.seconds` (dropping days and
    microseconds), or rounded a number one way and a timedelta another, or
    rounded a positive duration down to 0 (deleted at once; due now), would
    differ."""
    for given in (number, delta):
        q.set_retention(keep_done=given, keep_dead=given)
        stored = {k.decode(): int(v) for k, v in r.hgetall(P + "retention").items()}
        assert (stored["done_ms"], stored["dead_ms"]) == (ms, ms), given
        assert q.retention().keep_done == ms / 1000
    if ms < 1000:
        return  # below a second, the clock readings around a call cannot tell the ms
    for given in (number, delta):
        before = server_ms(r)
        id_ = q.add(b"x", delay=given)
        after = server_ms(r)
        assert before + ms <= r.zscore(SCHEDULE, id_) <= after + ms, given
        q.add(b"y", id=f"ready-{given!r}")
        before = server_ms(r)
        [j] = q.claim(1, lease=given)
        after = server_ms(r)
        assert before + ms <= j.lease_deadline_ms <= after + ms, given
        before = server_ms(r)
        assert q.extend(j, given) is True
        after = server_ms(r)
        assert before + ms <= r.zscore(ACTIVE, j.id) <= after + ms, given
        before = server_ms(r)
        assert q.fail(j, "e", retry_in=given) is emq.FailOutcome.SCHEDULED
        after = server_ms(r)
        assert before + ms <= r.zscore(SCHEDULE, j.id) <= after + ms, given
    assert_invariants(r, P)


@pytest.fixture
def local_zone(monkeypatch):
    """This process's local time is UTC+5:30 for the test (a fixed offset: no
    summer time, no zone files), so a naive time that a broken version took
    as UTC would land five and a half hours off."""
    monkeypatch.setenv("TZ", "EMQ-5:30")
    time.tzset()
    yield datetime.timedelta(hours=5, minutes=30)
    monkeypatch.undo()
    time.tzset()


def test_at_takes_an_aware_or_a_naive_datetime_or_epoch_seconds(q, r, local_zone):
    """A due time as an aware datetime (in any zone), a naive one (local time,
    as `datetime.timestamp()` takes it) or seconds since the epoch: the same
    instant is the same score, to the ms. A broken version that took a naive
    time as UTC, dropped an aware one's offset, or truncated the ms would score
    one of them off."""
    instant = datetime.datetime(2300, 1, 2, 3, 4, 5, 678_000, tzinfo=datetime.timezone.utc)
    ms = 10_413_889_445_678  # 2300-01-02T03:04:05.678Z (calendar.timegm)
    assert round(instant.timestamp() * 1000) == ms
    forms = {
        "aware UTC": instant,
        "aware UTC-7": instant.astimezone(datetime.timezone(datetime.timedelta(hours=-7))),
        "naive local": (instant + local_zone).replace(tzinfo=None),
        "epoch seconds": ms / 1000,
        "epoch seconds, an int": (ms - 678) // 1000,
    }
    for name, at in forms.items():
        id_ = q.add(b"x", id=name, at=at)
        want = ms - 678 if name == "epoch seconds, an int" else ms
        assert r.zscore(SCHEDULE, id_) == want, name
        assert int(row(r, id_)["due"]) == want, name
    # A naive time is local: the same wall time without its zone is 5:30 later than UTC's.
    id_ = q.add(b"x", id="naive as wall time", at=instant.replace(tzinfo=None))
    assert r.zscore(SCHEDULE, id_) == ms - 19_800_000
    assert_invariants(r, P)


def test_add_later_waits_in_schedule(q, r):
    before = server_ms(r)
    a = q.add("a", delay=LATER)
    after = server_ms(r)
    b = q.add("b", at=(after + 2 * LATER_MS) / 1000)
    c = q.add("c", delay=LATER, lane="L")
    assert r.llen(PENDING) == 0
    # SPEC §7: a is the head of an empty schedule (a token, so parked workers
    # re-park until it); b and c are due after it: no token.
    assert lrange(r, WAKE) == [""], "one token, for the new head"
    d = q.add("d", delay=LATER // 2)
    assert lrange(r, WAKE) == ["", ""], "d is due before every member: the new head"
    q.add("e", delay=LATER // 2)
    assert lrange(r, WAKE) == ["", ""], "e is not due before d"
    assert row(r, d)["state"] == "scheduled"
    assert not r.exists(RING) and not r.exists(lane_key("L")) and not r.exists(ctl_key("L")), "a lane job due later does not touch its lane"
    sa, sb = r.zscore(SCHEDULE, a), r.zscore(SCHEDULE, b)
    assert before + LATER_MS <= sa <= after + LATER_MS
    assert sb == after + 2 * LATER_MS
    for id_, score in ((a, sa), (b, sb)):
        f = row(r, id_)
        assert f["state"] == "scheduled" and int(f["due"]) == score
    assert row(r, c)["lane"] == "L" and row(r, c)["state"] == "scheduled"
    assert q.get(a).due_ms == sa and q.get(a).state == "scheduled"
    assert_invariants(r, P)


def test_add_to_a_lane_offers_it_once(q, r):
    a1 = q.add("1", lane="A")
    assert lrange(r, lane_key("A")) == [a1]
    assert lrange(r, RING) == ["A"]
    assert ctl(r, "A").get("ring") == "1"
    assert lrange(r, WAKE) == ["A"], "offer(L) wakes with the lane's name"
    assert row(r, a1)["lane"] == "A" and row(r, a1)["state"] == "pending"
    a2 = q.add("2", lane="A")
    assert lrange(r, lane_key("A")) == [a1, a2]
    assert lrange(r, RING) == ["A"], "a lane already in the ring is not offered again"
    assert lrange(r, WAKE) == ["A"]
    b1 = q.add("3", lane="B")
    assert lrange(r, RING) == ["A", "B"] and lrange(r, WAKE) == ["A", "B"]
    assert r.llen(PENDING) == 0 and b1
    assert_invariants(r, P)


def test_add_to_a_paused_or_full_lane_does_not_offer_it(q, r):
    q.pause_lane("P")
    q.set_lane_limit("F", 1)
    q.add("f0", lane="F", id="f0")
    q.claim(1)  # F has 1 active: full
    q.claim(1)  # F found full: it leaves the ring
    assert lrange(r, RING) == []
    r.delete(WAKE)
    p1 = q.add("p", lane="P")
    f1 = q.add("f", lane="F")
    assert lrange(r, lane_key("P")) == [p1] and lrange(r, lane_key("F")) == [f1]
    assert lrange(r, RING) == [] and not r.exists(WAKE)
    assert ctl(r, "P").get("ring") != "1" and ctl(r, "F").get("ring") != "1"
    assert_invariants(r, P)
    q.resume_lane("P")
    assert lrange(r, RING) == ["P"] and lrange(r, WAKE) == ["P"]
    q.set_lane_limit("F", 2)
    assert lrange(r, RING) == ["P", "F"] and lrange(r, WAKE) == ["P", "F"]
    assert_invariants(r, P)


def test_add_data_types_round_trip(q, r):
    blobs = [b"\x00\xff\x01binary", "text é", bytearray(b"ba"), memoryview(b"mv"), b""]
    ids = [q.add(d) for d in blobs]
    want = [b"\x00\xff\x01binary", "text é".encode(), b"ba", b"mv", b""]
    assert [q.get(i).data for i in ids] == want
    assert [j.data for j in q.claim(5)] == want


def test_add_takes_the_given_id_and_max_attempts(q, r):
    assert q.add("x", id="order-1 ünïcode", max_attempts=7) == "order-1 ünïcode"
    assert row(r, "order-1 ünïcode")["max_attempts"] == "7"
    long_id = "é" * 128  # 256 bytes of UTF-8: the most allowed
    assert q.add("x", id=long_id) == long_id
    assert_invariants(r, P)


def test_generated_ids_are_unique_and_sorted_by_creation(q, r):
    ids = []
    for i in range(60):
        ids.append(q.add(b"x", delay=LATER if i % 3 == 0 else 0, lane="L" if i % 2 else None))
        if i % 10 == 0:
            ids += q.add_many([b"a", {"data": b"b", "lane": "M"}, b"c"])
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids), "generated ids sort by creation within a process"
    assert_invariants(r, P)


def test_generated_ids_are_unique_across_threads(server, r):
    out: list[list[str]] = [[] for _ in range(4)]

    def producer(k: int) -> None:
        c = emq.connect(server.url)
        qq = emq.Queue(c, Q)
        for i in range(50):
            out[k].append(qq.add(b"x") if i % 2 else qq.add_many([b"y", b"z"])[0])
        c.close()

    threads = [threading.Thread(target=producer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    every = [i for ids in out for i in ids]
    assert len(every) == 200 and len(set(every)) == 200
    for ids in out:
        assert ids == sorted(ids), "each thread's ids sort by creation"
    assert r.llen(PENDING) == 300
    assert_invariants(r, P)


def test_duplicate_id_is_refused_and_writes_nothing(q, r):
    q.add("first", id="dup", lane="A")
    q.add("other", id="later", delay=LATER)
    before = snapshot(r)
    with pytest.raises(emq.DuplicateJobError) as e:
        q.add("second", id="dup")
    assert str(e.value).startswith("Queue.add: ") and "dup" in str(e.value)
    with pytest.raises(emq.DuplicateJobError):
        q.add("second", id="dup", lane="B", delay=LATER)
    with pytest.raises(emq.DuplicateJobError):
        q.add_many([{"data": "new", "id": "new-1", "lane": "C"}, b"generated", {"data": "again", "id": "later"}])
    assert snapshot(r) == before
    assert row(r, "dup")["data"] == b"first"


def test_duplicate_of_a_finished_job_is_refused(q, r):
    q.add("x", id="done-once")
    q.complete(q.claim(1)[0])
    before = snapshot(r)
    with pytest.raises(emq.DuplicateJobError):
        q.add("y", id="done-once")
    assert snapshot(r) == before


def test_an_identical_re_add_returns_the_id_and_writes_nothing(q, r):
    """A retry of an add whose reply was lost: every row carries the digest of
    its request, and the same request under the same id has already landed,
    wherever the job is now (waiting, held, done, dead)."""
    specs = [
        {"data": b"x", "id": "a"},
        {"data": "y", "id": "b", "lane": "A", "max_attempts": 5},
        {"data": b"z", "id": "c", "delay": LATER},
        {"data": b"w", "id": "d", "at": 0.005},
        {"data": b"v", "id": "e", "at": 4 * 10**10, "lane": "B"},
        {"data": b"", "id": "done-one"},
        {"data": b"", "id": "dead-one", "max_attempts": 1},
    ]
    assert q.add_many(specs) == [sp["id"] for sp in specs]
    for j in q.claim(10):
        if j.id == "done-one":
            assert q.complete(j)
        elif j.id == "dead-one":
            assert q.fail(j, "x") is emq.FailOutcome.DEAD
    for sp in specs:
        assert len(row(r, sp["id"])["digest"]) == 32
    before = snapshot(r)
    for sp in specs:
        assert q.add(**sp) == sp["id"]
    assert q.add_many(specs) == [sp["id"] for sp in specs]
    assert q.add_many(list(reversed(specs))) == [sp["id"] for sp in reversed(specs)]
    assert snapshot(r) == before
    assert_invariants(r, P)


def test_a_different_request_under_a_given_id_is_refused_and_writes_nothing(q, r):
    q.add(b"x", id="a", lane="A", max_attempts=2, delay=LATER)
    q.add(b"x", id="at", at=4 * 10**10)
    r.hset(job_key("old"), mapping={"state": "pending", "data": "x"})  # a row with no digest
    r.rpush(PENDING, "old")
    r.set(job_key("str"), "x")  # not a row at all
    before = snapshot(r)
    same = {"data": b"x", "id": "a", "lane": "A", "max_attempts": 2, "delay": LATER}
    others = [
        {**same, "data": b"y"},
        {**same, "data": "x "},
        {**same, "lane": "B"},
        {**same, "lane": None},
        {**same, "max_attempts": 3},
        {**same, "delay": LATER + 0.001},
        {**same, "delay": 0},
        {k: v for k, v in same.items() if k != "delay"} | {"at": 4 * 10**10},
        {"data": b"x", "id": "at", "at": 4 * 10**10 + 0.001},
        {"data": b"x", "id": "at", "delay": LATER},
        {"data": b"x", "id": "old"},
        {"data": b"x", "id": "str"},
    ]
    for spec in others:
        with pytest.raises(emq.DuplicateJobError) as e:
            q.add(**spec)
        msg = str(e.value)
        assert msg.startswith("Queue.add: ") and f'"{spec["id"]}"' in msg and "another job" in msg, msg
        with pytest.raises(emq.DuplicateJobError):
            q.add_many([{"data": b"new", "id": "new"}, b"generated", spec])
        assert snapshot(r) == before, spec


def test_add_many_mixing_landed_new_and_duplicate_ids(q, r):
    q.add_many([{"data": b"1", "id": "l1"}, {"data": b"2", "id": "l2", "lane": "A"}])
    landed = {i: row(r, i) for i in ("l1", "l2")}
    before = snapshot(r)
    # One id that another job has refuses the whole call.
    with pytest.raises(emq.DuplicateJobError):
        q.add_many([{"data": b"1", "id": "l1"}, {"data": b"n", "id": "new"}, {"data": b"other", "id": "l2", "lane": "A"}])
    assert snapshot(r) == before
    r.delete(WAKE)
    ids = q.add_many(
        [{"data": b"1", "id": "l1"}, {"data": b"n", "id": "new", "lane": "A"}, b"gen", {"data": b"2", "id": "l2", "lane": "A"}]
    )
    assert ids[:2] == ["l1", "new"] and ids[3] == "l2" and ids[2] not in ("l1", "l2", "new")
    assert lrange(r, PENDING) == ["l1", ids[2]], "the landed job is not queued again"
    assert lrange(r, lane_key("A")) == ["l2", "new"]
    assert lrange(r, RING) == ["A"] and lrange(r, WAKE) == [""], "lane A was in the ring already; one flat token"
    assert {i: row(r, i) for i in ("l1", "l2")} == landed
    assert_invariants(r, P)


def test_add_many_adds_all_in_order_with_one_wake_per_lane_then_flat(q, r):
    r.delete(WAKE)
    ids = q.add_many(
        [
            {"data": b"1", "lane": "B"},
            b"2",
            {"data": b"3", "lane": "A"},
            {"data": b"4", "lane": "B"},
            {"data": b"5", "delay": LATER},
            {"data": b"6", "id": "given", "max_attempts": 1},
            "7",
        ]
    )
    assert len(ids) == 7 and ids[5] == "given"
    assert lrange(r, PENDING) == [ids[1], ids[5], ids[6]]
    assert lrange(r, lane_key("B")) == [ids[0], ids[3]]
    assert lrange(r, lane_key("A")) == [ids[2]]
    assert zmembers(r, SCHEDULE) == [ids[4]]
    assert lrange(r, RING) == ["B", "A"], "lanes offered in the order of their first job"
    assert lrange(r, WAKE) == ["B", "A", ""], "lane tokens, then one flat token (SPEC §5 step 6)"
    assert row(r, "given")["max_attempts"] == "1"
    assert_invariants(r, P)


def test_add_many_is_all_or_nothing(q, r):
    q.add("seed", id="seed", lane="A")
    before = snapshot(r)
    bad_batches = [
        [b"ok", {"data": b"x", "lane": "bad\nlane"}],
        [{"data": b"x", "id": "fine"}, {"data": b"y", "id": ""}],
        [b"ok", {"data": b"y", "max_attempts": 0}],
        [b"ok", {"data": b"y", "delay": -1}],
        [b"ok", {"data": b"y", "bogus": 1}],
        [b"ok", {"lane": "A"}],
        [b"ok", 5],
        [{"data": b"x", "id": "twice"}, {"data": b"y", "id": "twice"}],
    ]
    for batch in bad_batches:
        with pytest.raises(emq.ArgumentError) as e:
            q.add_many(batch)
        assert str(e.value).startswith("Queue.add_many: "), batch
        assert snapshot(r) == before, batch
    with pytest.raises(emq.DuplicateJobError):
        q.add_many([b"ok", {"data": b"x", "lane": "B"}, {"data": b"y", "id": "seed"}])
    assert snapshot(r) == before
    assert q.add_many([]) == []
    assert snapshot(r) == before


def test_wake_keeps_only_the_newest_64_tokens(q, r):
    for i in range(70):
        q.add(b"x", lane=f"L{i}")
    assert r.llen(WAKE) == emq._core.WAKE_MAX
    assert lrange(r, WAKE) == [f"L{i}" for i in range(70 - emq._core.WAKE_MAX, 70)]
    assert_invariants(r, P)


def test_queue_accepts_a_url(server, r):
    qq = emq.Queue(server.url, Q)
    qq.add("x", id="via-url")
    assert row(r, "via-url")["state"] == "pending"


# ---------------------------------------------------------------------------
# claim
# ---------------------------------------------------------------------------


def test_claim_on_an_empty_queue_writes_nothing(q, r):
    before = snapshot(r)
    assert q.claim(5) == []
    assert snapshot(r) == before
    q.add("later", delay=LATER)
    q.pause_lane("A")
    before = snapshot(r)
    assert q.claim(5) == []
    assert snapshot(r) == before


def test_claim_takes_flat_ids_first_from_the_head(q, r):
    lane_job = q.add("lane", lane="A", id="a1")
    flat = [q.add(f"f{i}", id=f"f{i}") for i in range(5)]
    got = q.claim(3)
    assert ids_of(got) == flat[:3]
    assert lrange(r, PENDING) == flat[3:]
    got = q.claim(3)
    assert ids_of(got) == flat[3:] + [lane_job], "flat first, then lanes"
    assert_invariants(r, P)


def test_claim_writes_the_row_the_lease_and_the_lane_count(q, r):
    q.add(b"payload", id="a", lane="A", max_attempts=5)
    before = server_ms(r)
    [j] = q.claim(1, lease=60)
    after = server_ms(r)
    assert (j.id, j.data, j.lane, j.attempts, j.max_attempts, j.state) == ("a", b"payload", "A", 1, 5, "active")
    assert j.token and len(j.token) >= 16
    assert before + 60_000 <= j.lease_deadline_ms <= after + 60_000
    assert r.zscore(ACTIVE, "a") == j.lease_deadline_ms
    f = row(r, "a")
    assert (f["state"], f["attempts"], f["token"], int(f["lease"])) == ("active", "1", j.token, j.lease_deadline_ms)
    assert ctl(r, "A")["active"] == "1"
    got = q.get("a")
    assert (got.state, got.token, got.lease_deadline_ms, got.attempts) == ("active", j.token, j.lease_deadline_ms, 1)
    assert_invariants(r, P)


def test_claim_tokens_are_fresh(q, r):
    q.add_many([{"data": b"x", "id": f"t{i}"} for i in range(20)])
    tokens = [j.token for j in q.claim(20)]
    assert len(set(tokens)) == 20


def test_lanes_are_served_round_robin_one_id_per_lane_per_turn(q, r):
    q.add_many([{"data": b"", "id": i, "lane": i[0].upper()} for i in ["a1", "a2", "a3", "b1", "c1", "c2"]])
    assert lrange(r, RING) == ["A", "B", "C"]
    got = q.claim(5)
    assert ids_of(got) == ["a1", "b1", "c1", "a2", "c2"]
    assert lrange(r, RING) == ["A", "C"], "B was found empty on its second turn and left the ring"
    assert ctl(r, "B")["ring"] == "0"
    assert (ctl(r, "A")["active"], ctl(r, "B")["active"], ctl(r, "C")["active"]) == ("2", "1", "2")
    assert ids_of(q.claim(1)) == ["a3"]
    assert lrange(r, RING) == ["C", "A"], "the ring is rotated past the last lane served"
    assert q.claim(5) == []
    assert lrange(r, RING) == [] and ctl(r, "A")["ring"] == "0" and ctl(r, "C")["ring"] == "0"
    assert_invariants(r, P)


def test_one_lane_alone_is_served_turn_after_turn(q, r):
    q.add_many([{"data": b"", "id": f"a{i}", "lane": "A"} for i in range(3)])
    assert ids_of(q.claim(2)) == ["a0", "a1"]
    assert lrange(r, RING) == ["A"]
    assert_invariants(r, P)


def test_claim_splits_n_between_flat_and_lanes(q, r):
    q.add_many([{"data": b"", "id": "a1", "lane": "A"}, {"data": b"", "id": "b1", "lane": "B"}, {"data": b"", "id": "f1"}])
    assert ids_of(q.claim(2)) == ["f1", "a1"]
    assert lrange(r, RING) == ["B", "A"]
    assert ids_of(q.claim(2)) == ["b1"]
    assert_invariants(r, P)


def test_a_paused_lane_leaves_the_ring_and_returns_on_resume(q, r):
    q.add_many([{"data": b"", "id": i, "lane": i[0].upper()} for i in ["a1", "a2", "b1", "b2"]])
    q.pause_lane("A")
    assert lrange(r, RING) == ["A", "B"], "pausing does not touch the ring"
    assert ids_of(q.claim(3)) == ["b1", "b2"]
    assert ctl(r, "A")["ring"] == "0" and "A" not in lrange(r, RING)
    assert lrange(r, lane_key("A")) == ["a1", "a2"]
    assert_invariants(r, P)
    r.delete(WAKE)
    q.resume_lane("A")
    assert lrange(r, RING)[-1] == "A" and ctl(r, "A")["ring"] == "1"
    assert lrange(r, WAKE) == ["A"]
    assert ids_of(q.claim(3)) == ["a1", "a2"]
    assert_invariants(r, P)


def test_a_lane_at_its_limit_leaves_the_ring_until_a_slot_frees(q, r):
    q.set_lane_limit("A", 1)
    q.add_many([{"data": b"", "id": i, "lane": i[0].upper()} for i in ["a1", "a2", "b1", "b2"]])
    got = q.claim(3)
    assert ids_of(got) == ["a1", "b1", "b2"]
    assert "A" not in lrange(r, RING) and ctl(r, "A")["ring"] == "0"
    assert ctl(r, "A")["active"] == "1"
    assert_invariants(r, P)
    r.delete(WAKE)
    assert q.complete(got[0]) is True
    assert ctl(r, "A")["active"] == "0"
    assert lrange(r, RING)[-1] == "A" and lrange(r, WAKE) == ["A"], "complete frees a slot, then offer(A)"
    assert ids_of(q.claim(3)) == ["a2"]
    assert_invariants(r, P)


def test_raising_or_clearing_a_limit_offers_the_lane(q, r):
    q.set_lane_limit("A", 1)
    q.add_many([{"data": b"", "id": f"a{i}", "lane": "A"} for i in range(3)])
    assert ids_of(q.claim(3)) == ["a0"]
    assert lrange(r, RING) == []
    q.set_lane_limit("A", 2)
    assert lrange(r, RING) == ["A"]
    assert ids_of(q.claim(3)) == ["a1"]
    q.set_lane_limit("A", 0)
    assert lrange(r, RING) == ["A"], "limit 0: no limit"
    assert ids_of(q.claim(3)) == ["a2"]
    assert ctl(r, "A")["active"] == "3"
    assert_invariants(r, P)


def test_lane_control_on_an_empty_lane_offers_nothing(q, r):
    q.pause_lane("E")
    q.resume_lane("E")
    q.set_lane_limit("E", 3)
    assert not r.exists(RING) and not r.exists(WAKE)
    assert ctl(r, "E") == {"paused": "0", "limit": "3"}
    assert_invariants(r, P)


def test_ghosts_in_pending_are_dropped(q, r):
    r.rpush(PENDING, "ghost-1")
    q.add("x", id="x")
    r.rpush(PENDING, "ghost-2")
    got = q.claim(3)
    assert ids_of(got) == ["x"]
    assert r.llen(PENDING) == 0
    assert not r.exists(job_key("ghost-1")) and not r.exists(job_key("ghost-2"))
    assert zmembers(r, ACTIVE) == ["x"]
    assert_invariants(r, P)


def test_ghosts_in_a_lane_are_dropped(q, r):
    q.add_many([{"data": b"", "id": f"a{i}", "lane": "A"} for i in range(3)])
    r.delete(job_key("a0"), job_key("a1"))
    got = q.claim(3)
    assert ids_of(got) == ["a2"]
    assert r.llen(lane_key("A")) == 0
    assert ctl(r, "A")["active"] == "1", "a ghost takes no slot of its lane"
    assert_invariants(r, P)


def test_an_id_left_twice_in_pending_is_claimed_once(q, r):
    """A row deleted while its id waits in pending, then the id added again:
    pending holds it twice. A claim takes only a row that says `pending`, so
    the second entry is dropped, not handed out with a new token."""
    q.add("old", id="x")
    r.delete(job_key("x"))
    q.add("new", id="x")
    assert lrange(r, PENDING) == ["x", "x"]
    got = q.claim(2)
    assert ids_of(got) == ["x"] and got[0].data == b"new"
    assert lrange(r, PENDING) == []
    assert q.claim(1) == []
    assert q.complete(got[0]) is True
    assert_invariants(r, P)


def test_a_ghost_does_not_count_against_the_lane_limit(q, r):
    """A lane with limit 1 whose head is a ghost: the ghost is dropped and the
    lane, still servable with an id in it, must not be stranded (I3)."""
    q.set_lane_limit("B", 1)
    q.add_many([{"data": b"", "id": "b1", "lane": "B"}, {"data": b"", "id": "b2", "lane": "B"}])
    r.delete(job_key("b1"))
    got = q.claim(2)
    assert_invariants(r, P, where="after the claim")
    assert ids_of(got) == ["b2"]


def test_claim_leaves_a_wake_token_when_work_is_left(q, r):
    q.add_many([{"data": b"", "id": "f1"}, {"data": b"", "id": "f2"}])
    r.delete(WAKE)
    q.claim(1)
    assert lrange(r, WAKE) == [""], "work left: one token so parked workers wake one another"
    r.delete(WAKE)
    q.claim(1)
    assert not r.exists(WAKE), "nothing left: no token"
    q.add_many([{"data": b"", "id": "a1", "lane": "A"}, {"data": b"", "id": "a2", "lane": "A"}])
    r.delete(WAKE)
    q.claim(1)
    assert lrange(r, WAKE) == [""]


# ---------------------------------------------------------------------------
# extend, complete, fail
# ---------------------------------------------------------------------------


def test_extend_moves_the_lease(q, r):
    q.add("x", id="x", lane="A")
    [j] = q.claim(1, lease=1)
    before = server_ms(r)
    assert q.extend(j, 90) is True
    after = server_ms(r)
    score = r.zscore(ACTIVE, "x")
    assert before + 90_000 <= score <= after + 90_000
    f = row(r, "x")
    assert int(f["lease"]) == score and f["token"] == j.token and f["state"] == "active"
    assert ctl(r, "A")["active"] == "1"
    assert_invariants(r, P)


def test_extend_after_the_lease_ran_out_but_before_a_sweep(q, r):
    """Only the row decides: a lease past its deadline that no sweep took back
    is still held, and extend renews it."""
    q.add("x", id="x")
    [j] = q.claim(1)
    expire_lease(r, P, ["x"])
    assert q.extend(j, FAR) is True
    assert r.zscore(ACTIVE, "x") > server_ms(r)
    assert q.stalled_check() == ([], [])
    assert q.complete(j) is True


def test_extend_with_a_huge_lease_does_not_wrap_into_the_past(q, r):
    q.add("x", id="x")
    longest = 999_999_999_999  # seconds: the longest duration a call takes (past the latest time a plan writes)
    [j] = q.claim(1, lease=longest)
    assert j.lease_deadline_ms > server_ms(r), "claim saturates the deadline"
    assert q.extend(j, longest) is True
    assert r.zscore(ACTIVE, "x") > server_ms(r), "extend's deadline must not wrap around into the past"
    assert_invariants(r, P)


def test_claim_with_a_large_n_takes_what_there_is(q, r):
    q.add_many([b"a", b"b"])
    assert len(q.claim(200_000)) == 2


def test_complete(q, r):
    q.add("x", id="x", lane="A")
    q.add("y", id="y")
    jx, jy = sorted(q.claim(2), key=lambda j: j.id)
    before = server_ms(r)
    assert q.complete(jx) is True
    f = row(r, "x")
    assert f["state"] == "done" and "token" not in f and "lease" not in f
    assert before <= int(f["finished"]) <= server_ms(r)
    assert zmembers(r, ACTIVE) == ["y"]
    assert ctl(r, "A")["active"] == "0"
    assert q.complete(jy) is True
    assert r.zcard(ACTIVE) == 0
    assert_invariants(r, P)
    before = snapshot(r)
    assert q.complete(jx) is False, "a second complete is refused"
    assert q.fail(jx, "late") is emq.FailOutcome.REFUSED
    assert q.extend(jx, 1) is False
    assert snapshot(r) == before


def test_fail_with_no_delay_is_ready_at_once(q, r):
    q.add("x", id="x")
    q.add("y", id="y")
    q.add("a", id="a", lane="A")
    jobs = {j.id: j for j in q.claim(1)}
    r.delete(WAKE)
    assert q.fail(jobs["x"], "boom", retry_in=0) is emq.FailOutcome.SCHEDULED
    assert lrange(r, PENDING) == ["y", "x"], "back at the tail of pending"
    assert lrange(r, WAKE) == [""]
    f = row(r, "x")
    assert (f["state"], f["error"], f["attempts"]) == ("pending", "boom", "1")
    assert "token" not in f and "lease" not in f
    assert r.zcard(SCHEDULE) == 0
    assert_invariants(r, P)
    [ja] = [j for j in q.claim(3) if j.id == "a"]
    assert q.fail(ja, b"lane boom", retry_in=0) is emq.FailOutcome.SCHEDULED
    assert lrange(r, lane_key("A")) == ["a"]
    assert ctl(r, "A")["active"] == "0"
    assert "A" in lrange(r, RING)
    assert_invariants(r, P)


def test_fail_with_a_delay_goes_to_schedule_at_now_plus_delay(q, r):
    q.add("x", id="x", lane="A")
    [j] = q.claim(1)
    before = server_ms(r)
    assert q.fail(j, "later", retry_in=LATER) is emq.FailOutcome.SCHEDULED
    after = server_ms(r)
    score = r.zscore(SCHEDULE, "x")
    assert before + LATER_MS <= score <= after + LATER_MS
    f = row(r, "x")
    assert (f["state"], int(f["due"]), f["error"]) == ("scheduled", score, "later")
    assert r.llen(lane_key("A")) == 0 and ctl(r, "A")["active"] == "0"
    assert_invariants(r, P)
    make_due(r, P, ["x"])  # time passes
    assert q.promote() == 1
    [j2] = q.claim(1)
    assert (j2.id, j2.attempts) == ("x", 2)
    assert_invariants(r, P)


def test_fail_without_a_delay_backs_off(q, r):
    q.add("x", id="x", max_attempts=10)
    for attempt in range(1, 4):
        [j] = q.claim(1)
        assert j.attempts == attempt
        before = server_ms(r)
        assert q.fail(j, ValueError("bad")) is emq.FailOutcome.SCHEDULED
        delay = r.zscore(SCHEDULE, "x") - before
        assert 500 <= delay <= 3_600_000 + 1_000, f"attempt {attempt}: backoff {delay} ms"
        assert row(r, "x")["error"] == "ValueError: bad"
        make_due(r, P, ["x"])
        assert q.promote() == 1
    assert_invariants(r, P)


def test_fail_after_max_attempts_is_dead(q, r):
    q.add("x", id="x", lane="A", max_attempts=2)
    [j] = q.claim(1)
    assert q.fail(j, "one", retry_in=0) is emq.FailOutcome.SCHEDULED
    [j] = q.claim(1)
    assert j.attempts == 2
    before = server_ms(r)
    assert q.fail(j, "two", retry_in=0) is emq.FailOutcome.DEAD
    after = server_ms(r)
    assert zmembers(r, DEAD) == ["x"]
    assert before <= r.zscore(DEAD, "x") <= after
    f = row(r, "x")
    assert (f["state"], f["error"], f["attempts"]) == ("dead", "two", "2")
    assert "token" not in f and "lease" not in f
    assert r.zcard(ACTIVE) == 0 and r.llen(lane_key("A")) == 0 and r.zcard(SCHEDULE) == 0
    assert ctl(r, "A")["active"] == "0"
    assert_invariants(r, P)


def test_max_attempts_one_dies_on_the_first_failure(q, r):
    q.add("x", id="x", max_attempts=1)
    [j] = q.claim(1)
    assert q.fail(j, "once", retry_in=LATER) is emq.FailOutcome.DEAD
    assert zmembers(r, DEAD) == ["x"] and r.zcard(SCHEDULE) == 0
    assert_invariants(r, P)


def test_a_forged_token_is_refused_and_changes_nothing(q, r):
    q.add("x", id="x", lane="A")
    [j] = q.claim(1)
    forged = emq.Job(id="x", data=b"", lane="A", token="0" * 32)
    before = snapshot(r)
    assert q.complete(forged) is False
    assert q.fail(forged, "no", retry_in=0) is emq.FailOutcome.REFUSED
    assert q.extend(forged, 1) is False
    unknown = emq.Job(id="nobody", data=b"", token=j.token)
    assert q.complete(unknown) is False
    assert q.fail(unknown, "no") is emq.FailOutcome.REFUSED
    assert q.extend(unknown, 1) is False
    assert snapshot(r) == before
    assert q.complete(j) is True


@pytest.mark.parametrize("lane", [None, "A"])
@pytest.mark.parametrize("max_stalled", [None, 0])
def test_a_late_worker_is_refused_after_a_sweep_took_the_job(q, r, lane, max_stalled):
    q.add("x", id="x", lane=lane)
    [j] = q.claim(1, lease=60)
    expire_lease(r, P, ["x"])  # time passes: the worker stalled
    recovered, dead = q.stalled_check(max_stalled=max_stalled)
    assert (recovered, dead) == ((["x"], []) if max_stalled is None else ([], ["x"]))
    assert_invariants(r, P)
    before = snapshot(r)
    assert q.complete(j) is False
    assert q.fail(j, "late", retry_in=0) is emq.FailOutcome.REFUSED
    assert q.fail(j, "late") is emq.FailOutcome.REFUSED
    assert q.extend(j, 60) is False
    assert snapshot(r) == before, "the late worker's word changes nothing"
    if max_stalled is None:
        f = row(r, "x")
        assert (f["state"], f["stalls"]) == ("pending", "1")
        [j2] = q.claim(1)
        assert j2.id == "x" and j2.token != j.token and j2.attempts == 2
        before = snapshot(r)
        assert q.complete(j) is False, "the old token stays refused while another worker holds the job"
        assert q.extend(j, 0.001) is False
        assert snapshot(r) == before
        assert q.complete(j2) is True
    assert_invariants(r, P)


def test_jobs_due_later_are_promoted_when_time_passes(q, r):
    ids = q.add_many([{"data": b"", "id": "f", "delay": LATER}, {"data": b"", "id": "a", "delay": LATER, "lane": "A"}])
    assert q.promote() == 0
    make_due(r, P, ids)
    r.delete(WAKE)
    assert q.promote() == 2
    assert lrange(r, PENDING) == ["f"] and lrange(r, lane_key("A")) == ["a"]
    assert lrange(r, RING) == ["A"] and lrange(r, WAKE) == ["A", ""]
    assert ids_of(q.claim(2)) == ["f", "a"]
    assert_invariants(r, P)


def test_counts(q, r):
    q.add_many([b"f", {"data": b"a", "lane": "A"}, {"data": b"l", "delay": LATER}])
    c = q.counts()
    assert (c.schedule, c.pending, c.lanes, c.active, c.dead, c.ring) == (1, 1, {"A": 1}, 0, 0, 1)
    q.claim(5)
    c = q.counts()
    assert (c.pending, c.lanes, c.active) == (0, {"A": 0}, 2)

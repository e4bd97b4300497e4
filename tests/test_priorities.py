"""Priorities (SPEC §15): `add(priority=p)`, 0 first and the default; a claim takes
the lowest level first and the oldest ready within a level, in the flat list and
within each lane; promote, the stalled check, a fail's retry and an operator's
retry or promote-now put a job back at its own level.

The claim order is held to a model over random adds, claims, retries at once,
recoveries and promotions (flat and lanes) on the plan and on the module; the
plan's claims, promotes and stalled checks are held to the module's (and the
sweeps to the Lua scripts') byte for byte over random states with priorities,
stale level fields included. A queue that uses no priority keeps exactly the keys
it had; bad priorities name the argument and write nothing. Time is never slept:
due times and leases are moved into the past with redis-py, as test_jobs.py does.
"""

from __future__ import annotations

import copy
import random
from collections import deque

import pytest
import redis

import emq
from emq.embedded import module_path
from test_jobs_model import expire_lease, make_due, snapshot
from test_sweeps_differential import dump, reset

Q = "prio"
P = f"emq:{{{Q}}}:"
PB = P.encode()
LANES = ["a", "b:1", "c"]
BACKENDS = ["plan", pytest.param("module", marks=pytest.mark.skipif(module_path() is None, reason="module not built"))]
LATER = 3600


def level_key(lane: str | None, p: int) -> str:
    """The ready list of level `p` (SPEC §2): `pending`, `pending:<p>`, `lane:L`, `plane:<p>:L`."""
    if lane is None:
        return P + ("pending" if p == 0 else f"pending:{p}")
    return P + (f"lane:{lane}" if p == 0 else f"plane:{p}:{lane}")


class Order:
    """The ready jobs as a model keeps them: per lane (None: flat) and level, oldest first."""

    def __init__(self) -> None:
        self.ready: dict[str | None, dict[int, deque[str]]] = {}

    def push(self, lane: str | None, p: int, id_: str) -> None:
        self.ready.setdefault(lane, {}).setdefault(p, deque()).append(id_)

    def head(self, lane: str | None) -> str | None:
        levels = self.ready.get(lane, {})
        for p in sorted(levels):
            if levels[p]:
                return levels[p][0]
        return None

    def take(self, lane: str | None) -> str:
        levels = self.ready[lane]
        for p in sorted(levels):
            if levels[p]:
                return levels[p].popleft()
        raise AssertionError(f"nothing ready in {lane!r}")

    def count(self, lane: str | None) -> int:
        return sum(len(d) for d in self.ready.get(lane, {}).values())


@pytest.fixture
def r(server):
    c = redis.Redis.from_url(server.url)
    c.flushall()
    yield c
    c.close()


@pytest.fixture
def mclient(client, r):
    """The client and redis-py of a server with emq's module loaded (the test
    servers load it where ./dev built it)."""
    if module_path() is None:
        pytest.skip("emq's server module is not built (./dev module)")
    return client, r


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("seed", range(6))
def test_claims_take_the_lowest_level_first_and_fifo_within_it(client, r, backend, seed):
    """Random adds (priority 0 to 9, flat or in three lanes, some delayed), claims,
    fails retried at once, stalled recoveries and promotes: every flat job a claim
    takes is the model's head of the flat list (lowest level, oldest first); every
    lane job is the head of its lane; a claim takes flat jobs first and as many as
    there are (up to `n`). A claim that took level order from the row's position,
    a retry or recovery that went back to level 0 (or to the back of another
    level), or a promote that lost a level fails here."""
    rng = random.Random(seed)
    q = emq.Queue(client, Q, backend=backend)
    model = Order()
    held: dict[str, emq.Job] = {}
    delayed: dict[str, tuple[str | None, int]] = {}
    prio: dict[str, tuple[str | None, int]] = {}
    for step in range(120):
        op = rng.choice(["add", "add", "add", "claim", "claim", "fail", "stall", "later", "promote"])
        if op == "add":
            lane = rng.choice([None, None, *LANES])
            p = rng.choice([0, 0, 1, 3, 9, rng.randrange(10)])
            id_ = f"j{step}"
            q.add(b"x", id=id_, lane=lane, priority=p, at=0)
            model.push(lane, p, id_)
            prio[id_] = (lane, p)
        elif op == "later":
            lane, p = rng.choice([None, *LANES]), rng.randrange(10)
            id_ = f"d{step}"
            q.add(b"x", id=id_, lane=lane, priority=p, delay=LATER)
            delayed[id_] = (lane, p)
            prio[id_] = (lane, p)
        elif op == "promote" and delayed:
            due = sorted(delayed)[: rng.randint(1, len(delayed))]
            # Made due in the order of their ids: the promote moves them in due order.
            for i, id_ in enumerate(due):
                make_due(r, P, [id_], at=1 + i)
            emq.promote(client, Q, backend=rng.choice(["plan", "lua"]))
            for id_ in due:
                lane, p = delayed.pop(id_)
                model.push(lane, p, id_)
        elif op == "claim":
            n = rng.randint(1, 4)
            flat_before = model.count(None)
            lanes_before = sum(model.count(lane) for lane in LANES)
            got = q.claim(n, lease=LATER)
            assert len(got) == min(n, flat_before + lanes_before), f"step {step}: {got}"
            flat = [j for j in got if j.lane is None]
            assert len(flat) == min(n, flat_before), "flat jobs first"
            for j in got:
                lane = j.lane
                assert j.id == model.head(lane), f"step {step}: took {j.id} from {lane!r}, the head is {model.head(lane)}"
                model.take(lane)
                held[j.id] = j
        elif op == "fail" and held:
            id_ = rng.choice(sorted(held))
            job = held.pop(id_)
            assert q.fail(job, "boom", retry_in=0) in ("scheduled", "dead")
            row = r.hgetall(f"{P}job:{id_}")
            if row[b"state"] == b"pending":
                lane, p = prio[id_]
                model.push(lane, p, id_)
        elif op == "stall" and held:
            ids = sorted(held)[: rng.randint(1, len(held))]
            for i, id_ in enumerate(ids):
                expire_lease(r, P, [id_], at=1 + i)
            recovered, dead = emq.stalled_check(client, Q, max_stalled=None, backend=rng.choice(["plan", "lua"]))
            assert recovered == ids and dead == []
            for id_ in ids:
                held.pop(id_)
                lane, p = prio[id_]
                model.push(lane, p, id_)
    # Drain: everything left comes out in the model's order.
    while model.count(None) + sum(model.count(lane) for lane in LANES):
        got = q.claim(5, lease=LATER)
        assert got, "ready jobs are left, and a claim took none"
        for j in got:
            assert j.id == model.head(j.lane)
            model.take(j.lane)
    assert q.claim(5) == []
    # The level fields found empty are cleared: a drained queue is left with no level marked.
    for k in r.keys(P + "*ctl*"):
        assert not [f for f in r.hkeys(k) if f.startswith(b"lvl:")], f"{k!r} still marks a level after the queue drained"


def _random_state(rng: random.Random, now_ms: int) -> dict:
    """Rows pending at random levels in the flat list and three lanes, their lists
    and level fields (some of them stale: a field whose list is empty), lanes in
    the ring (some paused or full), due rows in `schedule` and expired ones in
    `active`, at random levels."""
    d: dict = {}
    ring = []
    n = 0
    for lane in [None, *LANES]:
        lists: dict[int, list[bytes]] = {}
        for _ in range(rng.randint(0, 6)):
            p = rng.choice([0, 0, 2, 5, 9])
            id_ = f"r{n}".encode()
            n += 1
            row = {b"state": b"pending", b"data": b"x", b"attempts": b"0", b"max_attempts": b"3"}
            if p:
                row[b"priority"] = str(p).encode()
            if lane is not None:
                row[b"lane"] = lane.encode()
            d[PB + b"job:" + id_] = ("hash", row)
            lists.setdefault(p, []).append(id_)
        marks = {p for p in lists if p}
        if rng.random() < 0.4:
            marks.add(rng.choice([1, 4, 7]))  # stale: nothing at that level
        for p, ids in lists.items():
            d[level_key(lane, p).encode()] = ("list", ids)
        ctl = {f"lvl:{p}".encode(): b"1" for p in marks}
        if lane is None:
            if ctl:
                d[PB + b"flatctl"] = ("hash", ctl)
            continue
        if rng.random() < 0.2:
            ctl[b"paused"] = b"1"
        if rng.random() < 0.2:
            ctl[b"limit"] = b"1"
            ctl[b"active"] = b"1"
        if rng.random() < 0.8:
            ctl[b"ring"] = b"1"
            ring.append(lane.encode())
        if ctl:
            d[PB + b"lanectl:" + lane.encode()] = ("hash", ctl)
    if ring:
        d[PB + b"ring"] = ("list", ring)
    sched, active = {}, {}
    for i in range(rng.randint(0, 5)):
        lane = rng.choice([None, *LANES])
        p = rng.choice([0, 3, 9])
        id_ = f"s{i}".encode()
        row = {b"state": b"scheduled", b"data": b"x"}
        if p:
            row[b"priority"] = str(p).encode()
        if lane:
            row[b"lane"] = lane.encode()
        d[PB + b"job:" + id_] = ("hash", row)
        sched[id_] = float(now_ms - 100 - i)
    for i in range(rng.randint(0, 5)):
        lane = rng.choice([None, *LANES])
        p = rng.choice([0, 3, 9])
        id_ = f"e{i}".encode()
        row = {b"state": b"active", b"token": b"t", b"lease": b"1", b"data": b"x"}
        if p:
            row[b"priority"] = str(p).encode()
        if lane:
            row[b"lane"] = lane.encode()
        d[PB + b"job:" + id_] = ("hash", row)
        active[id_] = float(1 + i)
    if rng.random() < 0.9:
        # What an add of a job with a priority leaves (SPEC §15): the promotes then
        # read rows' `priority`; without it they read `lane` only, as before.
        d[PB + b"promotions"] = ("string", str((1 << 40) + rng.randrange(5)).encode())
    if sched:
        d[PB + b"schedule"] = ("zset", sched)
    if active:
        d[PB + b"active"] = ("zset", active)
    return d


def _normalised(d: dict) -> dict:
    """A claim's tokens, leases and clock readings replaced by placeholders (each
    call makes its own); everything else as written."""
    d = copy.deepcopy(d)
    for k, (t, v) in d.items():
        if t == "hash" and k.startswith(PB + b"job:"):
            for f in (b"token", b"lease", b"claimed"):
                if f in v and v.get(b"state") == b"active" and f in v:
                    v[f] = b"X"
        if k == PB + b"active":
            d[k] = (t, {m: "X" for m in v})
    return d


@pytest.mark.parametrize("seed", range(12))
def test_the_module_claims_promotes_and_recovers_as_the_plan_does(mclient, seed):
    """Over random states with priorities (levels in the flat list and in lanes,
    stale level fields, paused and full lanes), a claim, a promote and a stalled
    check by the module write byte for byte what the plan writes, and the sweeps
    what the Lua scripts write. A module that ran another claim than the plan, or a
    script that pushed a recovered job to level 0, would differ here."""
    client, r = mclient
    rng = random.Random(seed)
    now = int(r.time()[0]) * 1000
    start = _random_state(rng, now)
    n = rng.randint(1, 8)
    claims = []
    for backend in ("plan", "module"):
        reset(r, start)
        got = emq.Queue(client, Q, backend=backend).claim(n, lease=LATER)
        claims.append(([j.id for j in got], _normalised(dump(r))))
    assert claims[0] == claims[1]
    for sweep in (lambda be: emq.promote(client, Q, backend=be), lambda be: emq.stalled_check(client, Q, max_stalled=None, backend=be)):
        outs = []
        for backend in ("plan", "lua", "module"):
            reset(r, start)
            reply = sweep(backend)
            outs.append((reply, dump(r)))
        assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_retry_at_once_and_a_recovery_go_back_to_their_level(client, r, backend):
    """A fail with `retry_in=0` and a stalled recovery put the job at the back of
    its own level, not at level 0: with a level-0 job added after, the claim takes
    the level-0 job first, then the retried one before a later job of its level."""
    q = emq.Queue(client, Q, backend=backend)
    q.add(b"x", id="p5", priority=5, at=0)
    (job,) = q.claim(1, lease=LATER)
    q.fail(job, "boom", retry_in=0)
    assert r.lrange(P + "pending:5", 0, -1) == [b"p5"]
    assert r.hget(P + "flatctl", "lvl:5") == b"1"
    q.add(b"x", id="p5b", priority=5, at=0)
    q.add(b"x", id="z", at=0)
    assert [j.id for j in q.claim(2, lease=LATER)] == ["z", "p5"]
    (late,) = q.claim(1, lease=LATER)
    assert late.id == "p5b"
    q.add(b"x", id="p5c", priority=5, at=0)
    expire_lease(r, P, ["p5b"])
    assert emq.stalled_check(client, Q, max_stalled=None) == (["p5b"], [])
    assert [j.id for j in q.claim(2)] == ["p5c", "p5b"]


def test_lanes_keep_round_robin_and_take_each_lane_by_level(client, r):
    """Within each lane the lowest level first; between lanes the round robin
    holds: one job a lane a turn, whatever the levels. A lane dropped as empty
    leaves with its level marks cleared."""
    q = emq.Queue(client, Q)
    q.add(b"x", id="a9", lane="a", priority=9, at=0)
    q.add(b"x", id="a0", lane="a", at=0)
    q.add(b"x", id="b3", lane="b", priority=3, at=0)
    q.add(b"x", id="b1", lane="b", priority=1, at=0)
    got = [j.id for j in q.claim(2)]
    assert got == ["a0", "b1"]
    assert [j.id for j in q.claim(2)] == ["a9", "b3"]
    assert q.claim(2) == []
    assert r.llen(P + "ring") == 0, "both lanes drained and dropped"
    for lane in ("a", "b"):
        assert not [f for f in r.hkeys(f"{P}lanectl:{lane}") if f.startswith(b"lvl:")], "a drained lane keeps no level mark"


def test_an_operator_retry_and_promote_now_keep_the_level(client, r):
    """`Queue.retry` of a dead job and `promote_now` of a scheduled one push the
    job to its own level."""
    q = emq.Queue(client, Q)
    q.add(b"x", id="d", priority=4, at=0, max_attempts=1)
    (job,) = q.claim(1)
    assert q.fail(job, "boom") == "dead"
    q.retry(["d"])
    q.add(b"x", id="s", lane="L", priority=2, delay=LATER)
    q.promote_now(["s"])
    assert r.lrange(P + "pending:4", 0, -1) == [b"d"]
    assert r.lrange(P + "plane:2:L", 0, -1) == [b"s"]
    assert r.hget(P + "lanectl:L", "lvl:2") == b"1"
    q.add(b"x", id="z", at=0)
    assert [j.id for j in q.claim(3)] == ["z", "d", "s"]


def test_a_queue_that_uses_no_priority_writes_no_key_or_field_of_them(client, r):
    """Adds, claims, retries, promotes and recoveries with no priority leave the
    keyspace as it always was: no `pending:<p>`, `plane:`, `flatctl` or `lvl:`
    field, and no `priority` in a row."""
    q = emq.Queue(client, Q)
    q.add(b"x", id="f", at=0)
    q.add(b"x", id="l", lane="L", at=0)
    q.add(b"x", id="later", delay=LATER)
    jobs = q.claim(2, lease=LATER)
    q.fail(jobs[0], "boom", retry_in=0)
    make_due(r, P, ["later"])
    emq.promote(client, Q)
    expire_lease(r, P, [jobs[1].id])
    emq.stalled_check(client, Q, max_stalled=None)
    keys = [k.decode() for k in r.keys(P + "*")]
    assert not [k for k in keys if "pending:" in k or "plane:" in k or k.endswith("flatctl")], keys
    for k in keys:
        if r.type(k) == b"hash":
            fields = r.hkeys(k)
            assert b"priority" not in fields and not [f for f in fields if f.startswith(b"lvl:")], (k, fields)


@pytest.mark.parametrize("bad", [10, -1, 1.5, "1", 99])
def test_a_bad_priority_names_the_argument_and_writes_nothing(client, r, bad):
    """A priority that is not an integer from 0 to 9 refuses the add, naming the
    verb and `priority`, before anything is written (the keyspace is compared)."""
    q = emq.Queue(client, Q)
    q.add(b"x", id="seed", at=0)
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError, match=r"^Queue\.add: priority must be an integer from 0 to 9"):
        q.add(b"x", priority=bad)
    with pytest.raises(emq.ArgumentError, match=r"^Queue\.add_unique: priority"):
        q.add_unique(b"x", unique_key="k", unique_for=60, priority=bad)
    with pytest.raises(emq.ArgumentError, match=r"^Queue\.add_many: priority"):
        q.add_many([{"data": b"x"}, {"data": b"y", "priority": bad}])
    assert snapshot(r) == before


def test_the_module_refuses_a_bad_priority_in_its_wire_form(mclient):
    """The module's add takes `<max_attempts>:<priority>`; a priority out of range
    is an argument error naming it, nothing written."""
    client, r = mclient
    q = emq.Queue(client, Q, backend="module")
    q.add(b"x", id="m", priority=7, at=0)
    assert r.hget(P + "job:m", "priority") == b"7"
    assert r.lrange(P + "pending:7", 0, -1) == [b"m"]
    before = dump(r)
    with pytest.raises(redis.ResponseError, match="priority"):
        r.execute_command("EMQ.ADD", 1, P + "schedule", P, "v2", 0, 0, "", "x", "d0", "", "3:12", "", "", "")
    assert dump(r) == before


def test_rows_and_task_status_show_the_priority(client, r, server):
    """`Queue.get` and a task's `Handle.status()` show the row's priority; a
    task's `options(priority=)` reaches the row and the claim order."""
    q = emq.Queue(client, Q)
    q.add(b"x", id="g", priority=6, at=0)
    assert q.get("g").priority == 6
    app = emq.App(server.url)

    @app.task(queue=Q)
    def work(x: int) -> int:
        return x

    low = work.options(priority=8).enqueue(1)
    high = work.enqueue(2)
    assert low.status().priority == 8
    assert high.status().priority == 0
    assert [j.id for j in q.claim(3)] == [high.id, "g", low.id]
    app.close()


def _calls(r: redis.Redis, *names: str) -> dict[str, int]:
    stats = r.info("commandstats")
    return {n: stats.get(f"cmdstat_{n}", {}).get("calls", 0) for n in names}


@pytest.mark.parametrize("backend", ["plan", "lua"])
def test_a_promote_reads_priority_only_once_the_queue_uses_it(client, r, backend):
    """A queue that uses no priority is promoted as before: one `HGET lane` a row
    and no `HMGET`, so its per-row reads do not grow (the promoters' race of
    test_sweeps_concurrency is as tight as before). The first add of a job with a
    priority marks `P promotions` (`+ 2**40`, once: a later one writes it no more,
    so producers never abort a promote again), and from then on a promote reads
    `priority` and puts the job at its level. A promote that ignored the mark
    would push the level-3 job to `pending`."""
    q = emq.Queue(client, Q)
    ids = [f"n{i}" for i in range(5)]
    for id_ in ids:
        q.add(b"x", id=id_, delay=LATER)
    make_due(r, P, ids)
    r.config_resetstat()
    assert emq.promote(client, Q, backend=backend) == 5
    assert _calls(r, "hget", "hmget") == {"hget": 5, "hmget": 0}
    assert r.get(P + "promotions") == b"1"

    q.add(b"x", id="p3", priority=3, delay=LATER)
    marked = int(r.get(P + "promotions"))
    assert marked == 1 + 2**40
    q.add(b"x", id="p4", priority=4, delay=LATER)
    q.add_many([{"data": b"y", "priority": 2, "delay": LATER}])
    assert int(r.get(P + "promotions")) == marked, "a second add of a priority wrote the mark again"
    make_due(r, P, ["p3", "p4"])
    assert emq.promote(client, Q, backend=backend) == 2
    assert r.lrange(P + "pending:3", 0, -1) == [b"p3"]
    assert r.lrange(P + "pending:4", 0, -1) == [b"p4"]
    assert int(r.get(P + "promotions")) == marked + 1


def test_a_backlog_promote_of_a_queue_with_priorities_keeps_the_levels(client, r):
    """A backlog's promote reads its rows by `SORT_RO`. Its first one after the
    queue took up priorities does not yet ask for `priority`, finds the queue's
    mark in `P promotions`, and reads the rows again as a bare selection; the next
    asks for it. Every job lands at its own level either way: a sorted read that
    dropped `priority` would put them all in `pending`."""
    q = emq.Queue(client, Q)

    def backlog(ids, priority):
        q.add_many([{"data": b"x", "id": i, "priority": priority(n), "delay": LATER} for n, i in enumerate(ids)])
        pipe = r.pipeline(transaction=False)
        for n, id_ in enumerate(ids):
            pipe.zadd(P + "schedule", {id_: 1 + n}, xx=True)
        pipe.execute()

    plain = [f"a{i:04d}" for i in range(300)]
    backlog(plain, lambda n: 0)
    assert emq.promote(client, Q, batch=300) == 300  # a whole batch: the next is a backlog's
    ids = [f"b{i:04d}" for i in range(600)]
    backlog(ids, lambda n: n % 10)
    r.config_resetstat()
    for _ in range(2):
        assert emq.promote(client, Q, batch=300) == 300
    # At least one each (a first call whose guessed plan was wrong starts again).
    assert _calls(r, "sort_ro")["sort_ro"] >= 2, "both promotes read a backlog's rows by SORT_RO"
    for p in range(10):
        want = [i.encode() for n, i in enumerate(ids) if n % 10 == p]
        if p == 0:
            want = [i.encode() for i in plain] + want
        assert r.lrange(level_key(None, p), 0, -1) == want, p

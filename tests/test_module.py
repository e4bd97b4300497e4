"""emq's server module (rust/emq-module): EMQ.PROMOTE and EMQ.STALLED.CHECK run
by the plans inside the server, sent by `backend="module"`; EMQ.CLAIM and
EMQ.COMPLETE, sent by a queue's claims and completes with
`emq.Queue(..., backend="module")`.

The differential tests (test_sweeps_differential.py) hold the module to the Lua
reference from every random state, three ways with the plan. These are the rest:
the wire form's refusals, bytes that are not UTF-8, a server without the module,
replication and the AOF (a replica without the module applies what it wrote),
deny-oom, and cluster routing by its key positions. The queue's claims and
completes by the module are held to the model of SPEC §7 by the state machine
of test_jobs_model.py (`test_jobs_state_machine_with_the_module`).
"""

from __future__ import annotations

import signal
import time

import pytest
import redis

import emq
from conftest import _started
from emq.embedded import Server, module_path
from test_sweeps_differential import dump, reset

import servers as _servers
from servers import binary

pytestmark = pytest.mark.skipif(module_path() is None, reason="emq's server module is not built (./dev module)")

# The servers: the embedded Valkey 9 and Debian's Redis 7.0 (Valkey 8.1 runs the
# module in the differential tests).
KINDS = ["valkey", "redis"]

Q = "mq"
P = b"emq:{mq}:"


@pytest.fixture(params=KINDS)
def server(request, servers):
    from conftest import fresh_server

    return fresh_server(servers, request.param)


@pytest.fixture
def r(server):
    c = redis.Redis.from_url(server.url)
    yield c
    c.close()


@pytest.fixture
def client(server):
    c = emq.connect(server.url)
    yield c
    c.close()


def state(now_ms: int, ids: list[bytes], lane: bytes | None = None, data: bytes = b"x") -> dict:
    """Due ids in `schedule`, and the same ids' leases run out in `active`, each
    with a row (in `lane`, if given)."""
    d: dict = {
        P + b"schedule": ("zset", {i: float(now_ms - 10 - n) for n, i in enumerate(ids)}),
    }
    for i in ids:
        row = {b"state": b"scheduled", b"data": data}
        if lane is not None:
            row[b"lane"] = lane
        d[P + b"job:" + i] = ("hash", row)
    return d


def stalled_state(now_ms: int, ids: list[bytes], lane: bytes | None = None) -> dict:
    d: dict = {P + b"active": ("zset", {i: float(now_ms - 5_000 - n) for n, i in enumerate(ids)})}
    for n, i in enumerate(ids):
        row = {b"state": b"active", b"token": b"t", b"lease": b"1", b"stalls": str(n % 3).encode()}
        if lane is not None:
            row[b"lane"] = lane
        d[P + b"job:" + i] = ("hash", row)
    return d


def both(r, client, start: dict, call) -> list:
    """`call(backend)` from `start` on the Lua and module backends: [(reply, dump)]."""
    out = []
    for backend in ("lua", "module"):
        reset(r, start)
        try:
            reply = call(backend)
        except emq.EmqError as e:
            reply = e
        out.append((reply, dump(r)))
    return out


def test_bytes_that_are_not_utf8_are_ids_lanes_and_values_like_any_other(r, client):
    """Ids, lane names and row values that are not UTF-8 are bytes to the module
    (a host that decoded them as text would fail or kill the server)."""
    now = client.time_ms()
    ids = [b"\xff\xfe", b"\x80abc", b"ok", b"\xc3\x28"]
    for make, call in [
        (lambda: state(now, ids, lane=b"\xfflane\x00", data=b"\x00\xff\xfe"), lambda be: emq.promote(client, Q, batch=10, backend=be)),
        (lambda: state(now, ids, data=b"\xed\xa0\x80"), lambda be: emq.promote(client, Q, batch=10, backend=be)),
        (
            lambda: stalled_state(now, ids, lane=b"\xe2\x28\xa1"),
            lambda be: emq.stalled_check(client, Q, max_stalled=1, batch=10, backend=be),
        ),
    ]:
        (lr, la), (mr, ma) = both(r, client, make(), call)
        assert not isinstance(mr, Exception), mr
        assert mr == lr
        # Lease marks and dead entries carry the clock's second: compare all but those.
        strip = lambda d: {k: v for k, v in d.items() if b":leases:" not in k and not k.endswith(b":dead")}  # noqa: E731
        assert strip(ma) == strip(la)
        assert r.ping()
    # The raw command, with a prefix that is not UTF-8: refused as a layout, the server alive.
    with pytest.raises(redis.ResponseError, match="EMQLAYOUT"):
        r.execute_command("EMQ.PROMOTE", "2", b"emq:{\xff}:schedule", b"emq:{\xfe}:pending", b"emq:{\xff}:", "1")
    assert r.ping()


def test_bad_input_is_refused_as_the_plan_refuses_it_and_writes_nothing(r, client):
    now = client.time_ms()
    start = state(now, [b"a", b"b"])
    S, A = "EMQ.PROMOTE", "EMQ.STALLED.CHECK"
    pk = [P.decode() + "schedule", P.decode() + "pending", P.decode()]
    sk = [P.decode() + "active", P.decode() + "pending", P.decode() + "dead", P.decode()]
    cases = [
        ([S, "2", *pk, "0"], emq.ArgumentError, "batch"),
        ([S, "2", *pk, "-3"], emq.ArgumentError, "batch"),
        ([S, "2", *pk, "1.5"], emq.ArgumentError, "batch"),
        ([A, "3", *sk, "x", "10"], emq.ArgumentError, "max_stalled"),
        ([A, "3", *sk, "1", "0"], emq.ArgumentError, "batch"),
        ([S, "1", *pk, "10"], emq.LayoutError, "expected 2 keys and 2 arguments"),
        ([S, "2", pk[1], pk[0], pk[2], "10"], emq.LayoutError, "is not"),
        ([S, "2", *pk[:2], "emq:mq:", "10"], emq.LayoutError, "queue prefix"),
    ]
    for args, cls, words in cases:
        reset(r, start)
        errors = []
        for backend in ("plan", "module"):
            with pytest.raises(cls, match=words) as e:
                emq.wire(client, *args, backend=backend)
            errors.append(str(e.value))
            assert dump(r) == start, f"{args}: {backend} wrote before refusing"
        assert errors[0] == errors[1], errors
        assert args[0] in errors[1]
    # The raw command's reply codes are the Lua scripts': EMQARG, EMQLAYOUT.
    with pytest.raises(redis.ResponseError, match=r"^EMQARG EMQ.PROMOTE: batch must be a positive integer"):
        r.execute_command(S, "2", *pk, "0")
    with pytest.raises(redis.ResponseError, match=r"^EMQLAYOUT EMQ.PROMOTE: layout: expected 2 keys"):
        r.execute_command(S, "3", *pk, "0")
    # A key of the wrong type: the same layout error as the plan's, nothing written.
    bad = dict(start)
    bad[P + b"pending"] = ("string", b"v")
    (lr, la), (mr, ma) = both(r, client, bad, lambda be: emq.promote(client, Q, batch=10, backend=be))
    assert isinstance(lr, emq.LayoutError) and isinstance(mr, emq.LayoutError)
    assert la == ma == bad
    # group is the plan's alone.
    with pytest.raises(emq.ArgumentError, match="group"):
        emq.promote(client, Q, backend="module", group=2)


def test_a_row_written_then_deleted_in_the_same_call_is_closed_first(r, client):
    """A stalled check that kills every job it recovers, under a policy that keeps
    no dead job, writes each row (state, stalls, error) and then deletes it with
    the trim of `dead`, a command the module runs by `RedisModule_Call`. The row's
    key, kept open since its read, is closed (and signalled) before that command
    names it. What this can see is the keyspace (the script's) and a live server;
    a handle left open across the delete would be a use after free that need not
    crash (checking that takes a sanitizer build of the server)."""
    now = client.time_ms()
    ids = [b"k%02d" % i for i in range(40)]
    start = stalled_state(now, ids)
    for i in ids:
        start[P + b"job:" + i][1][b"stalls"] = b"0"
    start[P + b"retention"] = ("hash", {b"dead_max": b"0"})
    call = lambda be: emq.stalled_check(client, Q, max_stalled=0, batch=100, backend=be)  # noqa: E731
    (lr, la), (mr, ma) = both(r, client, start, call)
    assert not isinstance(mr, Exception), mr
    assert mr == lr and sorted(mr[1]) == sorted(i.decode() for i in ids)
    strip = lambda d: {k: v for k, v in d.items() if b":leases:" not in k}  # noqa: E731
    assert strip(ma) == strip(la)
    assert not any(k.startswith(P + b"job:") for k in ma), "a dead row outlived the trim"
    assert r.ping()


def watched_exec(r, key: bytes, between) -> list | None:
    """`WATCH key`, then `between()`, then a transaction: its replies, or None
    when the watch aborted it."""
    with r.pipeline(transaction=True) as p:
        p.watch(key)
        between()
        p.multi()
        p.set(b"other", b"1")
        try:
            return p.execute()
        except redis.WatchError:
            return None


def test_a_watch_sees_the_rows_the_module_writes_and_not_those_it_only_reads(r, client):
    """The module keeps a row open from its read to its write and signals it as
    modified itself: a client's WATCH on a row it wrote aborts (as after the
    script's HSET), and one on a row it only read does not (a call refused
    before its first write, the row of another queue's prefix untouched)."""
    now = client.time_ms()
    row = P + b"job:a"
    for sweep, make in [
        (lambda: emq.promote(client, Q, batch=10, backend="module"), lambda: state(now, [b"a", b"b"])),
        (lambda: emq.stalled_check(client, Q, batch=10, backend="module"), lambda: stalled_state(now, [b"a", b"b"])),
    ]:
        reset(r, make())
        assert watched_exec(r, row, sweep) is None, "a row the module wrote did not abort the watch"
        # Refused before the first write (pending of the wrong type): the rows were read only.
        bad = make()
        bad[P + b"pending"] = ("string", b"v")
        reset(r, bad)

        def refused(sweep=sweep):
            with pytest.raises(emq.LayoutError):
                sweep()

        assert watched_exec(r, row, refused) == [True], "a row the module only read aborted the watch"
        assert dump(r) == {**bad, b"other": ("string", b"1")}


def test_claim_and_complete_refuse_bad_input_and_write_nothing(r, client):
    """EMQ.CLAIM and EMQ.COMPLETE check their wire form as the sweeps do (the
    Lua scripts' codes), and a structure of the wrong type refuses the call as
    the plan refuses it: a LayoutError, nothing written."""
    q = emq.Queue(client, Q, backend="module")
    q.add_many([b"a", b"b"])
    start = dump(r)
    p = P.decode()
    C, D, S = "EMQ.CLAIM", "EMQ.COMPLETE", "EMQ.SETTLE"
    for args, code, words in [
        ([C, "1", p + "pending", p, "0", "100"], "EMQARG", "n must be an integer from 1"),
        ([C, "1", p + "pending", p, "1", "0", "t"], "EMQARG", "lease_ms"),
        ([C, "1", p + "pending", p, "2", "100", "t"], "EMQLAYOUT", "2 tokens, not 1"),
        ([C, "1", p + "active", p, "1", "100", "t"], "EMQLAYOUT", "is not"),
        ([C, "1", p + "pending", "emq:mq:", "1", "100", "t"], "EMQLAYOUT", "queue prefix"),
        ([D, "1", p + "active", p, "v2", "a", "t", ""], "EMQLAYOUT", "an id, token, lane and result a job"),
        ([D, "1", p + "active", p, "v2", "a", "", "", "n"], "EMQARG", "token must not be empty"),
        ([D, "1", p + "active", p, "v2", "a", "t", "", "x"], "EMQARG", "result must be n"),
        ([D, "1", p + "active", p, "v2", "a", "t", "", "n", "a", "t", "", "n"], "EMQARG", "given twice"),
        ([D, "1", p + "active", p, "v2", "a", "t", "", "v" + "x" * (512 * 1024 + 1)], "EMQARG", "result is 524289 bytes"),
        # A form of an older client (no version): refused, naming the version.
        ([D, "1", p + "active", p, "a", "t", ""], "EMQARG", "version must be v2"),
        ([S, "1", p + "active", p, "a", "t", "", "c", "e"], "EMQARG", "version must be v2"),
        ([S, "1", p + "active", p, "v2", "a", "t", "", "c"], "EMQLAYOUT", "an id, token, lane, fate and three values a job"),
        ([S, "1", p + "active", p, "v2", "a", "t", "", "x", "e", "n", "n"], "EMQARG", "fate must be c"),
        ([S, "1", p + "active", p, "v2", "a", "t", "", "b1000000", "e", "n", "n"], "EMQARG", "fate must be"),
        ([S, "1", p + "active", p, "v2", "a", "", "", "r0", "e", "n", "n"], ("EMQARG", "EMQ.FAIL"), "token must not be empty"),
        ([S, "1", p + "active", p, "v2", "a", "t", "", "r0", "e", "x", "n"], ("EMQARG", "EMQ.FAIL"), "error_type must be n"),
        (
            [S, "1", p + "active", p, "v2", "a", "t", "", "c", "n", "", "", "a", "t", "", "r0", "e", "n", "n"],
            ("EMQARG", "EMQ.FAIL"),
            "given twice",
        ),
    ]:
        code, verb = code if isinstance(code, tuple) else (code, args[0])
        with pytest.raises(redis.ResponseError, match=f"^{code} {verb}: (layout: )?.*{words}"):
            r.execute_command(*args)
        assert dump(r) == start, args
    # A wrong type: the plan's LayoutError from both backends, nothing written.
    jobs = emq.Queue(client, Q).claim(1)
    bad = dict(dump(r))
    for key, call in [
        (P + b"pending", lambda be: emq.Queue(client, Q, backend=be).claim(2)),
        (P + b"active", lambda be: emq.Queue(client, Q, backend=be).complete_many(jobs)),
        (P + b"schedule", lambda be: emq.Queue(client, Q, backend=be).settle_many([(jobs[0], "x", 1000)])),
        (P + b"wake", lambda be: emq.Queue(client, Q, backend=be).claim(1)),
    ]:
        wrong = {**bad, key: ("string", b"v")}
        (pr, pa), (mr, ma) = [one(r, wrong, lambda call=call, be=be: call(be)) for be in ("plan", "module")]
        assert isinstance(pr, emq.LayoutError) and isinstance(mr, emq.LayoutError), (key, pr, mr)
        assert str(pr) == str(mr)
        assert pa == ma == wrong


def test_an_add_refuses_bad_input_as_the_plan_does_and_writes_nothing(r, client):
    """EMQ.ADD checks its wire form (the Lua scripts' codes), and what the plan
    refuses (an id taken, an id or lane not allowed, `max_attempts` 0, a
    structure of the wrong type) it refuses with the same error class and
    message: nothing written."""
    emq.Queue(client, Q).add_many([{"data": b"a", "id": "taken"}, {"data": b"b", "lane": "L"}])
    start = dump(r)
    p = P.decode()
    A = "EMQ.ADD"
    for args, code, words in [
        ([A, "1", p + "schedule", p, "v2", "1", "0", "", "d", "d0", "", "1"], "EMQLAYOUT", "unique_key and unique_ms a job"),
        ([A, "1", p + "pending", p, "v2", "1", "0", "", "d", "d0", "", "1", "", "", ""], "EMQLAYOUT", "is not"),
        ([A, "1", p + "schedule", p, "v2", "x", "0", "", "d", "d0", "", "1", "", "", ""], "EMQARG", "tag"),
        ([A, "1", p + "schedule", p, "v2", "1", "0", "", "d", "soon", "", "1", "", "", ""], "EMQARG", "when must be"),
        ([A, "1", p + "schedule", p, "v2", "1", "0", "", "d", "d0", "", "0", "", "", ""], "EMQARG", "max_attempts"),
        ([A, "1", p + "schedule", p, "v2", "1", "0", "taken", "d", "d0", "", "1", "", "", ""], "EMQDUP", "exists"),
        ([A, "1", p + "schedule", p, "v2", "1", "0", "", "d", "d0", "", "1", "-2", "", ""], "EMQARG", "keep must be"),
        ([A, "1", p + "schedule", p, "v2", "1", "0", "", "d", "d0", "", "1", "", "k", "0"], "EMQARG", "unique_for"),
        ([A, "1", p + "schedule", p, "1", "0", "", "d", "d0", "", "1"], "EMQARG", "version must be v2"),
        (
            [A, "1", p + "schedule", p, "v2", "1", "0", "x", "d", "d0", "", "1", "", "", "", "x", "e", "d0", "", "1", "", "", ""],
            "EMQARG",
            "given twice",
        ),
    ]:
        with pytest.raises(redis.ResponseError, match=f"^{code} {A}: (layout: )?.*{words}"):
            r.execute_command(*args)
        assert dump(r) == start, args
    for jobs, error in [
        ([{"data": b"x", "id": "taken"}], emq.DuplicateJobError),
        ([{"data": b"x"}, {"data": b"y", "id": "taken"}], emq.DuplicateJobError),
        ([{"data": b"x", "id": "a\tb"}], emq.ArgumentError),
        ([{"data": b"x", "id": "i" * 257}], emq.ArgumentError),
        ([{"data": b"x", "lane": ""}], emq.ArgumentError),
    ]:
        got = [one(r, start, lambda be=be, jobs=jobs: emq.Queue(client, Q, backend=be).add_many(jobs)) for be in ("plan", "module")]
        (pe, pa), (me, ma) = got
        assert isinstance(pe, error) and type(me) is type(pe), (jobs, pe, me)
        assert str(pe) == str(me)
        assert pa == ma == start
    # A wrong type: the plan's LayoutError from both backends, nothing written.
    for key in (P + b"pending", P + b"schedule", P + b"lane:L"):
        wrong = {**start, key: ("string", b"v")}
        job = {"data": b"z", "lane": "L"} if key.endswith(b"L") else {"data": b"z", "delay": 5 if key.endswith(b"schedule") else 0}
        (pe, pa), (me, ma) = [
            one(r, wrong, lambda be=be, job=job: emq.Queue(client, Q, backend=be).add_many([job])) for be in ("plan", "module")
        ]
        assert isinstance(pe, emq.LayoutError) and isinstance(me, emq.LayoutError), (key, pe, me)
        assert str(pe) == str(me)
        assert pa == ma == wrong


def settled(r, want: dict, seconds: float = 5.0) -> dict:
    """`dump(r)` once it equals `want`, or the last one read after `seconds`
    (a read that met a key deleted under it is read again)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            got = dump(r)
        except AssertionError:  # a key deleted between KEYS and TYPE
            got = None
        if got == want or time.monotonic() > deadline:
            return got if got is not None else dump(r)
        time.sleep(0.05)


def one(r, start: dict, call):
    """`call()` from `start`: (its reply or error, the keyspace after)."""
    reset(r, start)
    try:
        reply = call()
    except emq.EmqError as e:
        reply = e
    return reply, dump(r)


def test_claim_and_complete_take_ids_lanes_and_values_that_are_not_utf8(r, client):
    """The module's claim hands back the bytes it read, and its complete finds
    the row by them (a host that decoded them as text would fail)."""
    now = client.time_ms()
    ids = [b"\xff\xfe", b"\x80abc", b"\xc3\x28"]
    reset(r, {P + b"pending": ("list", ids), **{P + b"job:" + i: ("hash", {b"state": b"pending", b"data": b"\x00\xff"}) for i in ids}})
    got = r.execute_command("EMQ.CLAIM", "1", P + b"pending", P, "3", "60000", "t1", "t2", "t3")
    assert [j[0] for j in got] == ids and all(j[1] == b"\x00\xff" and j[2] is None for j in got)
    assert all(now <= j[6] - 60000 <= client.time_ms() for j in got)
    done = r.execute_command(
        "EMQ.COMPLETE", "1", P + b"active", P, "v2", ids[0], "t1", "", "n", ids[1], "bad", "", "n", ids[2], "t3", "", b"v\xff"
    )
    assert done == [1, 0, 1]
    assert r.zrange(P + b"active", 0, -1) == [ids[1]]
    assert r.hget(P + b"job:" + ids[2], "state") == b"done" and r.ping()
    assert r.hget(P + b"job:" + ids[2], "result") == b"\xff", "a result of any bytes, as given"


def test_a_server_without_the_module_says_so():
    with Server(binary("valkey"), module=False) as s:
        c = emq.connect(s.url)
        r = redis.Redis.from_url(s.url)
        r.zadd(P + b"schedule", {b"a": 1})
        r.hset(P + b"job:a", "state", "scheduled")
        emq.Queue(c, Q).add_many([b"x", b"y"])
        held = emq.Queue(c, Q).claim(1)
        before = dump(r)
        with pytest.raises(emq.ModuleMissingError, match="^emq.promote: the server has not loaded emq's module"):
            emq.promote(c, Q, backend="module")
        with pytest.raises(emq.ModuleMissingError, match="^emq.stalled_check: "):
            emq.stalled_check(c, Q, backend="module")
        q = emq.Queue(c, Q, backend="module")
        with pytest.raises(emq.ModuleMissingError, match="^Queue.claim: the server has not loaded emq's module"):
            q.claim(1)
        with pytest.raises(emq.ModuleMissingError, match="^Queue.complete_and_claim: ") as e:
            q.complete_and_claim(held, 1)
        assert held[0].token not in str(e.value), "the lease's token is not the error's to show"
        assert dump(r) == before
        assert emq.promote(c, Q, backend="plan") == 1
        c.close()
        r.close()


def test_deny_oom_refuses_before_anything_is_written(r, client):
    now = client.time_ms()
    start = state(now, [b"a", b"b", b"c"])
    reset(r, start)
    r.config_set("maxmemory", 1)
    try:
        with pytest.raises(emq.OutOfMemoryError, match="^emq.promote: "):
            emq.promote(client, Q, backend="module")
    finally:
        r.config_set("maxmemory", 0)
    assert dump(r) == start
    assert emq.promote(client, Q, backend="module") == 3


@pytest.mark.parametrize("kind", KINDS)
def test_a_replica_without_the_module_and_an_aof_reload_end_with_the_primarys_keyspace(kind):
    """The module's writes reach replicas and the AOF as the commands themselves
    (never as EMQ.*), so a replica without the module, and the primary restarted
    from its AOF without the module, hold what the primary holds."""
    pair = _servers.start_replicated(kind, primary_extra=["--appendonly", "yes", "--appendfsync", "always"], module=True)
    try:
        primary, replica = redis.Redis.from_url(pair.primary.url), redis.Redis.from_url(pair.replica.url)
        c = emq.connect(pair.primary.url)
        q = emq.Queue(c, Q)
        q.add_many([{"data": "x", "id": f"f{i}", "delay": 0.001} for i in range(30)])
        q.add_many([{"data": "x", "id": f"l{i}", "delay": 0.001, "lane": "L"} for i in range(20)])
        time.sleep(0.01)
        assert emq.promote(c, Q, batch=40, backend="module") == 40
        assert emq.promote(c, Q, batch=40, backend="module") == 10
        claimed = q.claim(25, lease=0.001)
        assert len(claimed) == 25
        time.sleep(0.01)
        recovered, dead = emq.stalled_check(c, Q, max_stalled=0, batch=10, backend="module")
        assert len(recovered) + len(dead) == 10 and dead
        recovered, dead = emq.stalled_check(c, Q, max_stalled=5, batch=100, backend="module")
        assert len(recovered) == 15 and not dead
        # The queue's adds, claims and completes by the module (ids and tokens the client seeded).
        mq = emq.Queue(c, Q, backend="module")
        assert len(mq.add_many([{"data": "m", "delay": 60}, {"data": "n"}, {"data": "o", "lane": "L"}])) == 3
        taken = mq.claim(60)
        assert len(taken) > 20 and any(j.lane for j in taken)
        assert mq.complete_many(taken[:5]) == [True] * 5
        # Fails by EMQ.SETTLE: ready again, later, after the backoff (the module's own draw).
        assert mq.settle_many([(taken[5], "boom", 0), taken[6], (taken[7], "later", 60_000), (taken[8], "backoff")]) == [
            "scheduled",
            True,
            "scheduled",
            "scheduled",
        ]
        # Extends by EMQ.EXTEND: the leases, `active`'s scores and the old leases' marks.
        assert mq.extend_many(taken[9:], 120) == [True] * (len(taken) - 9)
        done, more = mq.complete_and_claim(taken[9:], 3)
        assert done == [True] * (len(taken) - 9)
        assert [j.id for j in more] == [taken[5].id], "the retry made ready is claimed again"
        assert mq.complete_many(more) == [True]
        assert primary.execute_command("WAIT", 1, 5000) == 1
        # The done rows expire as the retention says (10 minutes after `finished`), on both.
        for j in taken[:5] + taken[6:7] + taken[9:]:
            row = P + b"job:" + j.id.encode()
            at = primary.pexpiretime(row)
            assert at == int(primary.hget(row, "finished")) + 600_000 and replica.pexpiretime(row) == at
        # The lease marks (a SET … PX by the key API, propagated with PXAT) end at the same moment on both.
        marks = primary.keys(P + b"leases:*")
        assert marks and all(replica.pexpiretime(m) == primary.pexpiretime(m) > 0 for m in marks)
        want = dump(primary)
        assert want and dump(replica) == want
        aof = primary.config_get("dir")["dir"]
        c.close()
        primary.close()
        pair.primary.proc.terminate()  # not stop(): that removes the data directory
        pair.primary.proc.wait(10)
        # The same data directory, the AOF loaded by a server without the module.
        again = Server(binary(kind), extra=["--appendonly", "yes", "--dir", aof], module=False).start()
        try:
            with redis.Redis.from_url(again.url) as r2:
                assert dump(r2) == want
        finally:
            again.stop()
        replica.close()
    finally:
        pair.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_writes_reach_a_replica_and_one_that_comes_back_without_an_aof(kind):
    """Without an AOF, what takes the module's writes is a replica, or the
    replication backlog while a replica is away: the module leaves its row writes
    unpropagated only where neither is there (`ffi::propagates`). A replica linked
    throughout ends with the primary's keyspace; so does one whose link was cut
    before a sweep and that comes back by a partial resync from the backlog (the
    row writes of that sweep reach it only through the backlog)."""
    pair = _servers.start_replicated(kind, module=True)
    try:
        primary, replica = redis.Redis.from_url(pair.primary.url), redis.Redis.from_url(pair.replica.url)
        c = emq.connect(pair.primary.url)
        q = emq.Queue(c, Q)
        q.add_many([{"data": "x", "id": f"f{i}", "delay": 0.001} for i in range(30)])
        time.sleep(0.01)
        assert emq.promote(c, Q, batch=10, backend="module") == 10
        assert primary.execute_command("WAIT", 1, 5000) == 1
        assert dump(replica) == dump(primary)
        claimed = q.claim(5, lease=0.001)
        time.sleep(0.01)
        # The link cut, the replica stopped so that it cannot come back yet: no
        # replica connected, the backlog kept.
        partial = primary.info("stats")["sync_partial_ok"]
        pair.replica.proc.send_signal(signal.SIGSTOP)
        try:
            primary.client_kill_filter(_type="replica")
            assert primary.info("replication")["connected_slaves"] == 0
            assert emq.promote(c, Q, batch=10, backend="module") == 10
            recovered, _ = emq.stalled_check(c, Q, max_stalled=None, batch=10, backend="module")
            assert len(claimed) == len(recovered) == 5
            assert primary.info("replication")["connected_slaves"] == 0
        finally:
            pair.replica.proc.send_signal(signal.SIGCONT)
        assert primary.execute_command("WAIT", 1, 10000) == 1
        assert primary.info("stats")["sync_partial_ok"] == partial + 1, "the replica came back by a partial resync"
        want = dump(primary)
        # Once in a loaded CI run the replica was still applying the backlog when read
        # after WAIT (a key listed by KEYS was gone by its TYPE): read it until it
        # settles, a few seconds at most; what it ends with must be the primary's.
        assert settled(replica, want) == want
        c.close()
        primary.close()
        replica.close()
    finally:
        pair.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_a_replica_that_first_syncs_after_sweeps_gets_the_writes_of_the_later_ones(kind):
    """The module keeps its answer to "does anything take my writes?" from call to
    call (`ffi::propagates`). A primary that swept with no replica and no backlog
    (writes left unpropagated), then gets its first replica (a full sync, which
    forks: the answer is read again), propagates the row writes of the sweeps
    that follow: the replica ends with the primary's keyspace."""
    fast = ["--repl-diskless-sync", "no", "--repl-diskless-load", "on-empty-db"]
    primary = Server(binary(kind), extra=fast, module=True).start()
    replica = None
    try:
        with redis.Redis.from_url(primary.url) as p:
            c = emq.connect(primary.url)
            q = emq.Queue(c, Q)
            q.add_many([{"data": "x", "id": f"f{i}", "delay": 0.001} for i in range(40)])
            time.sleep(0.01)
            assert emq.promote(c, Q, batch=10, backend="module") == 10
            assert p.info("replication")["repl_backlog_active"] == 0, "no backlog yet: the first sweep's writes went nowhere"
            replica = Server(binary(kind), extra=[*fast, "--replicaof", "127.0.0.1", str(primary.port)], module=False).start()
            pair = _servers.Replicated(kind, primary, replica)
            pair.wait_link()
            assert emq.promote(c, Q, batch=10, backend="module") == 10
            claimed = q.claim(8, lease=0.001)
            time.sleep(0.01)
            recovered, _ = emq.stalled_check(c, Q, max_stalled=None, batch=10, backend="module")
            assert len(claimed) == len(recovered) == 8
            pair.sync()
            with redis.Redis.from_url(replica.url) as rr:
                assert dump(rr) == dump(p)
            c.close()
    finally:
        if replica is not None:
            replica.stop()
        primary.stop()


@pytest.mark.parametrize("kind", KINDS)
def test_an_aof_alone_takes_the_writes(kind):
    """No replica, no backlog, the append-only file on: the module's row writes
    are propagated to it, and a server without the module restarted from it holds
    what the primary held."""
    s = Server(binary(kind), extra=["--appendonly", "yes", "--appendfsync", "always"], module=True).start()
    try:
        with redis.Redis.from_url(s.url) as r0:
            assert r0.info("replication")["repl_backlog_active"] == 0
            c = emq.connect(s.url)
            q = emq.Queue(c, Q)
            q.add_many([{"data": "x", "id": f"f{i}", "delay": 0.001} for i in range(20)])
            time.sleep(0.01)
            assert emq.promote(c, Q, batch=20, backend="module") == 20
            claimed = q.claim(5, lease=0.001)
            time.sleep(0.01)
            recovered, _ = emq.stalled_check(c, Q, max_stalled=None, batch=10, backend="module")
            assert len(claimed) == len(recovered) == 5
            want = dump(r0)
            c.close()
        data = s.dir
        s.proc.terminate()  # not stop(): that removes the data directory
        s.proc.wait(10)
        again = Server(binary(kind), extra=["--appendonly", "yes", "--dir", str(data)], module=False).start()
        try:
            with redis.Redis.from_url(again.url) as r2:
                assert dump(r2) == want
        finally:
            again.stop()
    finally:
        s.stop()


def test_in_a_cluster_the_key_positions_route_the_commands(_production_servers):
    """The commands' key positions (2 to 3, 2 to 4) route them: the node that does
    not own the queue's slot answers MOVED, keys of two slots CROSSSLOT, and the
    client sends each queue's sweep to its owner."""
    c = _started(_production_servers, ("cluster", "valkey", "module"), lambda: _servers.start_cluster("valkey", module=True))
    c.flush()
    client = emq.connect(c.nodes[0].url)
    for i in range(3):
        q = c.queue_on(i, "mod")
        queue = emq.Queue(client, q)
        queue.add_many([{"data": "x", "id": f"j{n}", "delay": 0.001} for n in range(5)])
        time.sleep(0.01)
        assert emq.promote(client, q, batch=10, backend="module") == 5
        assert queue.counts().pending == 5
        other = c.node((i + 1) % 3)
        p = f"emq:{{{q}}}:"
        with pytest.raises(redis.exceptions.MovedError):
            other.execute_command("EMQ.PROMOTE", "2", p + "schedule", p + "pending", p, "10")
        with pytest.raises(redis.exceptions.MovedError):
            other.execute_command("EMQ.STALLED.CHECK", "3", p + "active", p + "pending", p + "dead", p, "1", "10")
        with pytest.raises(redis.exceptions.MovedError):
            other.execute_command("EMQ.CLAIM", "1", p + "pending", p, "1", "100", "t")
        with pytest.raises(redis.exceptions.MovedError):
            other.execute_command("EMQ.COMPLETE", "1", p + "active", p, "v2", "j0", "t", "", "n")
        with pytest.raises(redis.exceptions.MovedError):
            other.execute_command("EMQ.EXTEND", "1", p + "active", p, "1000", "j0", "t", "")
        other.close()
        # The client follows the queue to its node for the module's claims and completes.
        mq = emq.Queue(client, q, backend="module")
        taken = mq.claim(5)
        assert [j.id for j in taken] == [f"j{n}" for n in range(5)]
        assert mq.extend_many(taken, 60) == [True] * 5
        assert mq.complete_and_claim(taken, 1) == ([True] * 5, [])
    a, b = c.queue_on(0, "x"), c.queue_on(1, "y")
    with c.node(0) as n0, pytest.raises(redis.ResponseError, match="(CROSSSLOT|hash to the same slot)"):
        n0.execute_command("EMQ.PROMOTE", "2", f"emq:{{{a}}}:schedule", f"emq:{{{b}}}:pending", f"emq:{{{a}}}:", "10")
    client.close()


def test_an_acl_user_needs_only_the_module_commands(r, server):
    """The module's own reads and writes are not the user's commands: a user
    allowed only the module's commands (and the handshake) on `~emq:*` runs both
    sweeps, and a queue's adds, claims and completes; without them, a
    PermissionError, nothing written."""
    c0 = emq.connect(server.url)
    now = c0.time_ms()
    c0.close()
    start = {**state(now, [b"a", b"b"]), **stalled_state(now, [b"c"])}
    reset(r, start)
    module_commands = ["emq.promote", "emq.stalled.check", "emq.claim", "emq.complete", "emq.extend", "emq.settle", "emq.add"]
    _servers.set_user(r, "sweeper", "pw", ["hello", "ping", *module_commands])
    _servers.set_user(r, "nobody", "pw", ["hello", "ping", "time"])
    url = server.url.replace("redis://", "redis://{}:pw@")
    c = emq.connect(url.format("nobody"))
    for call in (lambda: emq.promote(c, Q, backend="module"), lambda: emq.stalled_check(c, Q, backend="module")):
        with pytest.raises(emq.PermissionError):
            call()
    assert dump(r) == start
    c.close()
    c = emq.connect(url.format("sweeper"))
    assert emq.promote(c, Q, batch=10, backend="module") == 2
    assert emq.stalled_check(c, Q, batch=10, backend="module") == (["c"], [])
    q = emq.Queue(c, Q, backend="module")
    taken = q.claim(5)
    assert sorted(j.id for j in taken) == ["a", "b", "c"]
    assert q.extend_many(taken, 60) == [True] * 3
    # These rows have no max_attempts: a fail is their last attempt (dead, and `dead` trimmed).
    assert q.settle_many([taken[0], (taken[1], "boom", 60_000)]) == [True, "dead"]
    assert q.complete_many(taken[2:]) == [True]
    assert q.add_many([b"x", {"data": b"y", "delay": 60}]) and q.claim(5)[0].data == b"x"
    c.close()


def test_the_embedded_server_loads_the_module_when_asked(monkeypatch):
    def loaded(s: Server) -> bool:
        with redis.Redis.from_url(s.url) as r:
            return any(m[b"name"] == b"emq" for m in r.module_list())

    monkeypatch.delenv("EMQ_SERVER_MODULE", raising=False)
    with Server() as s:
        assert not loaded(s), "not unless asked"
    with Server(module=True) as s:
        assert loaded(s)
    monkeypatch.setenv("EMQ_SERVER_MODULE", "1")
    with Server() as s:
        assert loaded(s)
    monkeypatch.setenv("EMQ_SERVER_MODULE", str(module_path()))
    with Server() as s:
        assert loaded(s)
    monkeypatch.setenv("EMQ_SERVER_MODULE", "/nonexistent/libemq_module.so")
    with pytest.raises(FileNotFoundError, match="./dev module"):
        Server()


def keyspace_events(r, run) -> list[tuple[str, str]]:
    """The keyspace events (`event`, key) that `run()` fires, in order, the queue's
    name and a lease mark's second written as `Q` and `S`."""
    import re

    p = r.pubsub()
    p.psubscribe("__keyspace@0__:*")
    assert p.get_message(timeout=1)["type"] == "psubscribe"
    run()
    r.publish("__keyspace@0__:end", "end")  # after every event of the call
    out = []
    while (m := p.get_message(timeout=2)) is not None and m["data"] != b"end":
        key = m["channel"].decode().removeprefix("__keyspace@0__:")
        out.append((m["data"].decode(), re.sub(r"leases:\d+", "leases:S", re.sub(r"\{ev\w\}", "{Q}", key))))
    p.close()
    return out


def test_the_module_fires_the_keyspace_events_of_the_commands_it_stands_in_for(r, client):
    """Where the module writes with the key API instead of a command (a row's
    HSET/HDEL/PEXPIREAT, a lease mark's SET, the ZADD and ZREM of a claim and a
    complete, a retention trim with nothing to trim), it fires the events the
    command would, in the same order: a client listening to keyspace events sees
    the same claims and completes from both backends."""
    old = r.config_get("notify-keyspace-events")["notify-keyspace-events"]
    r.config_set("notify-keyspace-events", "KA")
    try:

        def run(backend: str, name: str) -> list:
            q = emq.Queue(client, name, backend=backend)
            q.add_many([{"data": "x", "id": f"j{i}"} for i in range(5)] + [{"data": "x", "id": "l0", "lane": "L"}])
            jobs: list = []
            events = keyspace_events(r, lambda: jobs.extend(q.claim(6)))
            assert len(jobs) == 6
            events += keyspace_events(r, lambda: q.complete(jobs[0]))
            events += keyspace_events(r, lambda: q.complete_many(jobs[1:]))
            # A stale token: refused, nothing written, no event.
            assert keyspace_events(r, lambda: q.complete(jobs[0])) == []
            return events

        seen = {backend: run(backend, name) for backend, name in (("plan", "evp"), ("module", "evm"))}
        assert seen["module"] == seen["plan"]
        kinds = {e for e, _ in seen["module"]}
        assert {"hset", "zadd", "zrem", "set", "expire"} <= kinds, kinds
    finally:
        r.config_set("notify-keyspace-events", old)


def test_sweeps_fire_the_keyspace_events_of_the_script_but_one(r, client):
    """A module sweep's writes by the key API (rows, pushes, the wake list's
    trim) fire the events the Lua script's commands fire, in the same order; the
    one substitution (SPEC difference 14) removes the selected head with
    `ZREMRANGEBYRANK`, whose event is named for it."""
    old = r.config_get("notify-keyspace-events")["notify-keyspace-events"]
    r.config_set("notify-keyspace-events", "KA")
    try:
        now = client.time_ms()
        for start, sweep in [
            ({**state(now, [b"a", b"b", b"c"]), **state(now, [b"l1", b"l2"], lane=b"L")}, emq.promote),
            ({**stalled_state(now, [b"a", b"b"]), **stalled_state(now, [b"l1"], lane=b"L")}, emq.stalled_check),
        ]:
            seen = {}
            for backend in ("lua", "module"):
                reset(r, start)
                events = keyspace_events(r, lambda backend=backend, sweep=sweep: sweep(client, Q, batch=10, backend=backend))
                seen[backend] = [(e.replace("zremrangebyrank", "zrem"), k) for e, k in events]
            assert seen["module"] == seen["lua"]
            assert {"rpush", "hset", "zrem"} <= {e for e, _ in seen["module"]}
    finally:
        r.config_set("notify-keyspace-events", old)


def test_a_client_parked_on_the_wake_list_is_woken_by_the_modules_push(r, server, client):
    """The module pushes its wake token with the key API: a client blocked in
    `BLPOP` on `wake` (a parked worker) is served it, as after the script's RPUSH."""
    import threading

    reset(r, state(client.time_ms(), [b"a"]))
    got = []

    def park():
        with redis.Redis.from_url(server.url) as b:
            got.append(b.blpop([P + b"wake"], timeout=10))

    t = threading.Thread(target=park)
    t.start()
    deadline = time.monotonic() + 5
    while r.info("clients")["blocked_clients"] < 1 and time.monotonic() < deadline:
        time.sleep(0.005)
    assert emq.promote(client, Q, batch=10, backend="module") == 1
    t.join(10)
    assert got and got[0] is not None and got[0][0] == P + b"wake"


def test_a_lease_of_any_length_is_taken_by_both_backends_alike(client):
    """A lease too long to end before the plans' last instant (`MAX_MS`) ends
    there: the module takes any lease the plan takes, with the same deadline."""
    longest = 999_999_999_999  # seconds: the longest duration a call takes
    deadlines = {}
    for backend in ("plan", "module"):
        q = emq.Queue(client, f"long-{backend}", backend=backend)
        q.add_many([b"x", b"y"])
        for lease in (longest, 10**11):
            t0 = client.time_ms()
            (job,) = q.claim(1, lease=lease)
            deadlines[backend, lease] = job.lease_deadline_ms - (0 if lease == longest else t0)
    assert deadlines["module", longest] == deadlines["plan", longest] == 999_999_999_999_999
    for backend in ("plan", "module"):
        assert 10**14 <= deadlines[backend, 10**11] <= 10**14 + 1000, backend

"""No scripting: a user that may run only the plain commands the plan backend
sends, only on emq's keys, with `-@scripting` (managed services often grant no
more). The plan backend does all its work as that user; the Lua backend says
plainly that scripting is not allowed, and writes nothing.
"""

from __future__ import annotations

import pytest
import redis

import emq
from test_jobs_model import server_ms

from servers import set_user

Q = "acl"
P = f"emq:{{{Q}}}:"
USER, PASSWORD = "emq-sweeper", "s3cret-sweeps"
FAR = 4_000_000_000_000
OLD_WAKE = 70  # more than WAKE_MAX: every sweep trims

# Everything the plan backend sends (rust/emq-host/src/{conn,sweeps}.rs,
# rust/emq-plan/src/{sweep,lanes}/): PING when connecting,
# the reads, the guard, the writes.
PLAN_COMMANDS = [
    "ping",
    "time",
    "zrange",
    "hget",
    "hmget",
    "exists",
    "type",
    "llen",
    "zcard",
    "watch",
    "unwatch",
    "multi",
    "exec",
    "discard",  # a sweep's transaction queued ahead of a read that turned out otherwise
    "zrem",
    "zadd",
    "rpush",
    "hset",
    "hdel",
    "ltrim",
    "incr",
    "zmscore",  # a promote counts itself in P promotions; a later group re-reads its members
    "get",  # a promote reads P promotions beside its selection and again under its watch
    "hlen",  # a stalled check in groups that may kill checks P retention's type first
    "del",  # a stalled check that trims `dead` (retention) deletes the trimmed rows
    "set",  # a stalled check sets the lease marks of the seconds its leases ended in
    "hincrby",  # a stalled check counts what it recovered or killed in P stats:<minute> (SPEC §17)
    "pexpire",  # and keeps that minute's counters 25 hours
    "sort_ro",  # a backlog's promote reads its rows by SORT_RO … GET, refused to a user without every key
]


def key(suffix: str) -> str:
    return P + suffix


def make_user(r: redis.Redis, commands: list[str]) -> None:
    set_user(r, USER, PASSWORD, commands)
    r.execute_command("ACL", "LOG", "RESET")


def user_url(server) -> str:
    return f"redis://{USER}:{PASSWORD}@127.0.0.1:{server.port}"


def seed(r: redis.Redis) -> None:
    """One queue that takes every path of both sweeps: flat and lane rows, a
    paused lane, ghosts among flat rows, rows with none of the fields a sweep
    reads (told from ghosts by their group's EXISTS count, or by TYPE), more
    rows than one EXISTS group, a full
    `wake`, deaths and recoveries, a lane already in the ring. Times are fixed, so
    two seeds give the same keyspace."""
    r.flushdb()
    p = r.pipeline(transaction=False)
    # PROMOTE: due (in 1970) and one future job
    due = 1_000_000
    for i in range(250):
        p.hset(key(f"job:bulk{i:03d}"), mapping={"state": "scheduled", "due": due + i})
        p.zadd(key("schedule"), {f"bulk{i:03d}": due + i})
    rows = [
        ("f1", {"state": "scheduled"}),
        ("g1", None),
        ("la1", {"state": "scheduled", "lane": "a"}),
        ("bare", {"data": "no state, no lane"}),
        ("g2", None),
        ("lb1", {"state": "scheduled", "lane": "b"}),
        ("f2", {"state": "scheduled"}),
        ("la2", {"state": "scheduled", "lane": "a"}),
    ]
    for j, (id_, row) in enumerate(rows):
        if row:
            p.hset(key(f"job:{id_}"), mapping=row)
        p.zadd(key("schedule"), {id_: due + 500 + j})
    p.hset(key("job:fut"), mapping={"state": "scheduled"})
    p.zadd(key("schedule"), {"fut": FAR})
    p.hset(key("lanectl:b"), "paused", "1")
    p.rpush(key("wake"), *[f"old{i}" for i in range(OLD_WAKE)])
    # STALLED CHECK: expired leases (in 1970) and one that holds
    lease = 2_000_000
    active = [
        ("s1", {"state": "active", "token": "t1", "lease": lease}),
        ("s2", {"state": "active", "stalls": "1", "token": "t2", "lease": lease + 1}),
        ("sg", None),
        ("s3", {"state": "active", "lane": "c", "stalls": "0", "token": "t3", "lease": lease + 3}),
        ("sbare", {"token": "t4", "lease": lease + 4}),
        ("s4", {"state": "active", "lane": "c", "stalls": "1", "token": "t5", "lease": lease + 5}),
        ("s5", {"state": "active", "lane": "d", "token": "t6", "lease": lease + 6}),
    ]
    for j, (id_, row) in enumerate(active):
        if row:
            p.hset(key(f"job:{id_}"), mapping=row)
        p.zadd(key("active"), {id_: lease + j})
    p.hset(key("job:keep"), mapping={"state": "active", "lane": "c", "token": "t9", "lease": FAR})
    p.zadd(key("active"), {"keep": FAR})
    p.hset(key("lanectl:c"), mapping={"active": "3", "limit": "5"})
    p.hset(key("lanectl:d"), mapping={"active": "1", "ring": "1"})
    p.rpush(key("lane:d"), "d-ready")
    p.rpush(key("ring"), "d")
    p.execute()


def snapshot(r: redis.Redis) -> dict:
    """Every key of the queue with its type and contents; `dead` scores (the
    sweep's clock reading) are returned apart."""
    out, dead_scores = {}, []
    for k in sorted(r.scan_iter(match=P + "*", count=1000)):
        t = r.type(k).decode()
        if t == "list":
            v = r.lrange(k, 0, -1)
        elif t == "hash":
            v = r.hgetall(k)
        elif t == "zset":
            v = r.zrange(k, 0, -1, withscores=True)
            if k == key("dead").encode():
                dead_scores = [s for _, s in v]
                v = [m for m, _ in v]
        else:
            v = r.dump(k)
        out[k.decode()] = (t, v)
    return {"keys": out, "dead_scores": dead_scores}


def sweep(c: emq.Client) -> tuple[list[int], tuple[list[str], list[str]]]:
    promoted = []
    while n := emq.promote(c, Q, batch=1000):
        promoted.append(n)
    return promoted, emq.stalled_check(c, Q, max_stalled=1, batch=1000)


def strs(xs) -> list[str]:
    return [x.decode() for x in xs]


def check_expected(r: redis.Redis, promoted, stalled, t0: int, t1: int) -> None:
    assert promoted == [258], promoted
    recovered, dead = stalled
    assert recovered == ["s1", "s3", "sbare", "s5"]
    assert dead == ["s2", "s4"]
    assert strs(r.zrange(key("schedule"), 0, -1)) == ["fut"]
    assert strs(r.lrange(key("pending"), 0, -1)) == ([f"bulk{i:03d}" for i in range(250)] + ["f1", "bare", "f2"] + ["s1", "sbare"])
    assert strs(r.lrange(key("lane:a"), 0, -1)) == ["la1", "la2"]
    assert strs(r.lrange(key("lane:b"), 0, -1)) == ["lb1"]
    assert strs(r.lrange(key("lane:c"), 0, -1)) == ["s3"]
    assert strs(r.lrange(key("lane:d"), 0, -1)) == ["d-ready", "s5"]
    assert strs(r.lrange(key("ring"), 0, -1)) == ["d", "a", "c"]
    assert r.hget(key("lanectl:a"), "ring") == b"1" and r.hget(key("lanectl:b"), "ring") is None
    assert r.hgetall(key("lanectl:c")) == {b"active": b"1", b"limit": b"5", b"ring": b"1"}
    assert r.hgetall(key("lanectl:d")) == {b"active": b"0", b"ring": b"1"}
    assert strs(r.lrange(key("wake"), 0, -1)) == [f"old{i}" for i in range(OLD_WAKE - 60, OLD_WAKE)] + ["a", "", "c", ""]
    for id_ in [f"bulk{i:03d}" for i in range(250)] + ["f1", "bare", "f2", "la1", "la2", "lb1"]:
        assert r.hget(key(f"job:{id_}"), "state") == b"pending", id_
    assert r.exists(key("job:g1"), key("job:g2"), key("job:sg")) == 0
    assert strs(r.zrange(key("active"), 0, -1)) == ["keep"]
    dead_z = r.zrange(key("dead"), 0, -1, withscores=True)
    assert strs(m for m, _ in dead_z) == ["s2", "s4"] and all(t0 <= s <= t1 for _, s in dead_z)
    for id_, stalls in [("s1", "1"), ("s3", "1"), ("sbare", "1"), ("s5", "1")]:
        row = r.hgetall(key(f"job:{id_}"))
        assert row[b"state"] == b"pending" and row[b"stalls"] == stalls.encode(), (id_, row)
        assert b"token" not in row and b"lease" not in row, (id_, row)
    for id_ in ["s2", "s4"]:
        row = r.hgetall(key(f"job:{id_}"))
        assert (row[b"state"], row[b"stalls"], row[b"error"]) == (b"dead", b"2", b"stalled"), (id_, row)
        assert b"token" not in row and b"lease" not in row, (id_, row)


def denied(r: redis.Redis) -> set[str]:
    """What the ACL log holds for our user: the commands (or keys) it was refused."""
    entries = r.acl_log()
    return {f"{e['reason']}:{e['object']}" for e in entries if e.get("username") == USER}


# `client|setinfo` is what the redis crate sends while connecting and ignores the
# answer of (only servers that know it, Valkey here, log the refusal).
IGNORED_BY_THE_CLIENT_LIBRARY = {"command:client|setinfo"}


def test_plan_backend_needs_no_scripting(server, r):
    """The plan backend, as a user with PLAN_COMMANDS on ~emq:* and -@scripting,
    leaves exactly the keyspace the default user's run leaves, and the server
    refuses it nothing."""
    make_user(r, PLAN_COMMANDS)

    seed(r)
    t0 = server_ms(r)
    c = emq.connect(user_url(server))
    promoted, stalled = sweep(c)
    t1 = server_ms(r)
    check_expected(r, promoted, stalled, t0, t1)
    as_user = snapshot(r)
    refused = denied(r) - IGNORED_BY_THE_CLIENT_LIBRARY
    assert refused == set(), f"the plan backend was refused: {refused}"

    # A layout error on the guarded path: the plan has watched the rows and must
    # UNWATCH; the user may, and nothing is written.
    r.set(key("job:broken"), "not a hash")
    r.zadd(key("schedule"), {"broken": 1})
    before = snapshot(r)
    with pytest.raises(emq.LayoutError) as e:
        emq.promote(c, Q)
    assert "job:broken" in str(e.value)
    assert snapshot(r) == before
    assert c.ping()
    assert denied(r) - IGNORED_BY_THE_CLIENT_LIBRARY == refused
    c.close()

    # the same work as the default user
    seed(r)
    t0 = server_ms(r)
    d = emq.connect(server.url)
    promoted, stalled = sweep(d)
    t1 = server_ms(r)
    d.close()
    check_expected(r, promoted, stalled, t0, t1)
    assert snapshot(r)["keys"] == as_user["keys"]


@pytest.mark.parametrize("verb", ["promote", "stalled_check"])
def test_lua_backend_says_scripting_is_not_allowed(server, r, verb):
    make_user(r, PLAN_COMMANDS)
    seed(r)
    before = snapshot(r)
    c = emq.connect(user_url(server))
    with pytest.raises(emq.ScriptingError) as e:
        if verb == "promote":
            emq.promote(c, Q, backend="lua")
        else:
            emq.stalled_check(c, Q, max_stalled=1, backend="lua")
    msg = str(e.value)
    assert isinstance(e.value, emq.EmqError)
    assert "scripting is not allowed" in msg, msg
    assert msg.startswith("emq.promote: " if verb == "promote" else "emq.stalled_check: "), msg
    assert PASSWORD not in msg
    assert snapshot(r) == before, "the Lua backend wrote something"
    # the connection is still good, and the plan backend does the work
    assert c.ping()
    if verb == "promote":
        assert emq.promote(c, Q, batch=1000) == 258
    else:
        assert emq.stalled_check(c, Q, max_stalled=1) == (["s1", "s3", "sbare", "s5"], ["s2", "s4"])
    c.close()


def test_the_user_really_cannot_run_scripts(server, r):
    make_user(r, PLAN_COMMANDS)
    u = redis.Redis.from_url(user_url(server))
    try:
        assert u.ping()
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.eval("return redis.call('TIME')", 0)
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.script_load("return 1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.evalsha("0" * 40, 0)
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.set("not-emq", "x")  # keys outside ~emq:* too
        with pytest.raises(redis.exceptions.NoPermissionError):
            u.strlen("emq:{acl}:x")  # and commands off the list
    finally:
        u.close()


@pytest.mark.parametrize("verb", ["promote", "stalled_check"])
def test_a_refused_watch_stops_the_sweep_before_it_writes(server, r, verb):
    """The rows' WATCH is sent ahead of the reads, its reply read with theirs: a
    user denied WATCH gets a permission error naming the verb, nothing is written,
    and the connection's replies stay in step for the next command."""
    make_user(r, [c for c in PLAN_COMMANDS if c != "watch"])
    seed(r)
    before = snapshot(r)
    c = emq.connect(user_url(server))
    with pytest.raises(emq.PermissionError) as e:
        if verb == "promote":
            emq.promote(c, Q, batch=1000)
        else:
            emq.stalled_check(c, Q, max_stalled=1)
    msg = str(e.value)
    assert msg.startswith("emq.promote: " if verb == "promote" else "emq.stalled_check: "), msg
    assert "watch" in msg.lower(), msg
    assert snapshot(r) == before, "a sweep wrote without its guard"
    assert c.ping()
    assert c.command("ZCARD", key("schedule")) == r.zcard(key("schedule"))
    c.close()


@pytest.mark.parametrize("may_sort", [True, False])
def test_a_backlog_promote_refused_its_sort_reads_row_by_row(server, r, may_sort):
    """A backlog's promote reads its rows by `SORT_RO … GET` (`Sweep::sorted_selection`),
    which the server refuses to a user without access to every key (`ERR`), or
    without `SORT_RO` at all (`NOPERM`: a user made from the command list of an
    earlier emq). The call then reads as it would have without it, and the
    connection stops asking: the same keyspace as the default user's calls,
    which sort."""
    make_user(r, PLAN_COMMANDS if may_sort else [c for c in PLAN_COMMANDS if c != "sort_ro"])

    def backlog() -> None:
        r.flushdb()
        p = r.pipeline(transaction=False)
        for i in range(700):
            if i % 9 != 4:  # the rest are ghosts
                p.hset(key(f"job:b{i:03d}"), mapping={"state": "scheduled", **({"lane": "a"} if i % 4 == 1 else {})})
            p.zadd(key("schedule"), {f"b{i:03d}": 1_000_000 + i})
        p.execute()

    after = {}
    for who, url in (("user", user_url(server)), ("default", server.url)):
        backlog()
        r.config_resetstat()
        c = emq.connect(url)
        taken = [emq.promote(c, Q, batch=256) for _ in range(4)]
        c.close()
        assert taken == [256, 256, 188, 0], (who, taken)
        after[who] = snapshot(r)["keys"]
        sort = r.info("commandstats").get("cmdstat_sort_ro", {})
        # The second call sorts (the first took a whole batch); refused, the user's
        # connection asks no more.
        tried = sort.get("calls", 0) + sort.get("rejected_calls", 0)
        assert tried == (1 if who == "user" else 2), (who, sort)
    assert after["user"] == after["default"]

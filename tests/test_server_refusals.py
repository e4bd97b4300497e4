"""Production conditions: what a refusal by the server surfaces as,
on every verb, with the keyspace unchanged; workers that stop on errors no retry
mends and ride out those that pass; no password in any string emq shows; a call
that panicked leaves nothing behind on its connection.

Real servers only: a read-only replica (`--replicaof`), `maxmemory` with
`noeviction`, `CLIENT PAUSE WRITE`, an ACL user denied one command.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import threading
import time

import pytest
import redis

import emq
from test_jobs_model import snapshot

Q = "hard"
P = f"emq:{{{Q}}}:"
FAR = 10**6  # seconds: "later" (about 11 days)


def loaded(c: emq.Client, r: redis.Redis) -> tuple[emq.Queue, emq.Job]:
    """A queue where every verb has something to write: ready jobs (flat and in
    a lane), due jobs, expired leases, and a job held with a long lease."""
    q = emq.Queue(c, Q)
    q.add_many([{"data": b"p1", "id": "p1"}, {"data": b"p2", "id": "p2", "lane": "L"}])
    q.add_many([{"data": b"d1", "id": "d1", "delay": FAR}, {"data": b"d2", "id": "d2", "delay": FAR, "lane": "L"}])
    r.zadd(P + "schedule", {"d1": 1000, "d2": 1001})
    q.add_many([{"data": b"x1", "id": "x1"}, {"data": b"x2", "id": "x2"}, {"data": b"h", "id": "h"}])
    held = None
    for j in q.claim(10, lease=FAR):
        if j.id == "h":
            held = j
        elif j.id in ("x1", "x2"):
            r.zadd(P + "active", {j.id: 2000 + int(j.id[1])})
    # p1, p2 were claimed too: put them back as ready, so a claim has work
    for j in ("p1", "p2"):
        r.zrem(P + "active", j)
    r.hset(P + "job:p1", mapping={"state": "pending"})
    r.hset(P + "job:p2", mapping={"state": "pending"})
    r.hset(P + "lanectl:L", mapping={"active": "0"})
    r.rpush(P + "pending", "p1")
    r.rpush(P + "lane:L", "p2")
    assert held is not None
    return q, held


def verbs(q: emq.Queue, held: emq.Job):
    """Every verb that writes, each with what it must write."""
    c = q.client
    return {
        "add": lambda: q.add(b"new", id="new"),
        "add_many": lambda: q.add_many([b"a", b"b"]),
        "add_later": lambda: q.add(b"later", delay=FAR),
        "claim": lambda: q.claim(5),
        "extend": lambda: q.extend(held, FAR),
        "complete": lambda: q.complete(held),
        "fail": lambda: q.fail(held, "boom"),
        "pause_lane": lambda: q.pause_lane("L"),
        "set_lane_limit": lambda: q.set_lane_limit("L", 3),
        "promote": lambda: emq.promote(c, Q),
        "promote_lua": lambda: emq.promote(c, Q, backend="lua"),
        "stalled_check": lambda: emq.stalled_check(c, Q),
        "stalled_check_lua": lambda: emq.stalled_check(c, Q, backend="lua"),
    }


VERBS = [
    "add",
    "add_many",
    "add_later",
    "claim",
    "extend",
    "complete",
    "fail",
    "pause_lane",
    "set_lane_limit",
    "promote",
    "promote_lua",
    "stalled_check",
    "stalled_check_lua",
]


def refused(r: redis.Redis, call, cls: type, *words: str) -> str:
    before = snapshot(r)
    with pytest.raises(cls) as e:
        call()
    msg = str(e.value)
    assert "EXECABORT" not in msg, msg
    for w in words:
        assert w in msg, f"{msg!r} does not say {w!r}"
    assert snapshot(r) == before, f"{msg!r}: the keyspace changed"
    return msg


# ---------------------------------------------------------------------------
# Refusals by the server, each its own class, nothing written.


@pytest.mark.parametrize("verb", VERBS)
def test_out_of_memory(server, r, verb):
    c = emq.connect(server.url)
    q, held = loaded(c, r)
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        if verb.endswith("_lua"):
            # A script that has written once may write on past maxmemory (the
            # server will not leave it half done): it runs, or is refused whole.
            before = snapshot(r)
            try:
                verbs(q, held)[verb]()
            except emq.OutOfMemoryError:
                assert snapshot(r) == before
        else:
            msg = refused(r, verbs(q, held)[verb], emq.OutOfMemoryError, "OOM")
            assert msg.startswith(("Queue.", "emq.")), msg  # names the call
    finally:
        r.config_set("maxmemory", "0")
    assert c.ping()


def test_out_of_memory_in_a_backlogs_sorted_read(server, r):
    """A backlog's promote reads its rows with `SORT_RO` under its watch
    (`Sweep::sorted_selection`): on a full server the read goes through (it is
    read-only) and the transaction is refused whole, as `OutOfMemoryError`,
    with nothing written; with room again the backlog drains."""
    c = emq.connect(server.url)
    p = r.pipeline(transaction=False)
    for i in range(600):
        p.hset(f"{P}job:b{i:03d}", "state", "scheduled")
        p.zadd(f"{P}schedule", {f"b{i:03d}": 1_000_000 + i})
    p.execute()
    assert emq.promote(c, Q, batch=256) == 256  # a whole batch: the next call sorts
    r.config_resetstat()
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        msg = refused(r, lambda: emq.promote(c, Q, batch=256), emq.OutOfMemoryError, "OOM")
        assert msg.startswith("emq.promote: "), msg
    finally:
        r.config_set("maxmemory", "0")
    assert r.info("commandstats")["cmdstat_sort_ro"]["calls"] == 1, "the refused call read sorted"
    assert [emq.promote(c, Q, batch=256) for _ in range(3)] == [256, 88, 0]
    assert r.llen(f"{P}pending") == 600


@pytest.mark.parametrize("verb", VERBS)
def test_read_only_replica(replica, verb):
    r = redis.Redis.from_url(replica.primary_url)
    rr = redis.Redis.from_url(replica.url)
    q, held = loaded(emq.connect(replica.primary_url), r)
    replica.sync()
    c = emq.connect(replica.url)
    refused(rr, verbs(emq.Queue(c, Q), held)[verb], emq.ReadOnlyError, "READONLY")
    assert snapshot(r) == snapshot(rr)
    assert c.ping()  # the connection was dropped and comes back


def test_read_only_connection_is_dropped_so_a_promoted_replica_is_written(replica):
    """After READONLY the connection is not reused: once the replica is
    promoted, the same client writes."""
    rr = redis.Redis.from_url(replica.url)
    c = emq.connect(replica.url)
    q = emq.Queue(c, Q)
    first = c._client_id()
    with pytest.raises(emq.ReadOnlyError):
        q.add(b"x", id="x")
    rr.replicaof("NO", "ONE")
    try:
        assert q.add(b"x", id="x") == "x"
        assert c._client_id() != first
    finally:
        rr.replicaof("127.0.0.1", replica.primary.port)
        replica.wait_link()


@contextlib.contextmanager
def stopped(server):
    """The server's process stopped (SIGSTOP) for the block: it answers nothing,
    its replication link included."""
    os.kill(server.proc.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(server.proc.pid, signal.SIGCONT)


@pytest.mark.parametrize("verb", VERBS)
def test_a_write_no_replica_acknowledges_raises_not_replicated_and_is_kept(replica, verb):
    """`emq.connect(wait_replicas=1)`: with the replica stopped, every verb that
    writes makes its writes on the primary and then raises NotReplicatedError
    naming the verb (not retried: it did what it did); once the replica runs
    again it holds the same keyspace."""
    r = redis.Redis.from_url(replica.primary_url)
    rr = redis.Redis.from_url(replica.url)
    _, held = loaded(emq.connect(replica.primary_url), r)
    q = emq.Queue(emq.connect(replica.primary_url, wait_replicas=1, wait_timeout=0.2), Q)
    before = snapshot(r)
    with stopped(replica.replica), pytest.raises(emq.NotReplicatedError) as e:
        verbs(q, held)[verb]()
    msg = str(e.value)
    assert "0 of 1 replica" in msg and msg.startswith(("Queue.", "emq.")), msg
    assert snapshot(r) != before, "the call wrote nothing"
    replica.sync()
    assert snapshot(rr) == snapshot(r)


def test_wait_replicas_holds_a_call_until_a_replica_has_its_writes(replica):
    """The call returns once the replica acknowledged it, and not before: here
    the replica is stopped when the add starts and let go later."""
    rr = redis.Redis.from_url(replica.url)
    q = emq.Queue(emq.connect(replica.primary_url, wait_replicas=1, wait_timeout=30), Q)
    returned = threading.Event()
    out: dict = {}

    def add():
        try:
            out["id"] = q.add(b"durable", id="d")
        except BaseException as e:  # noqa: BLE001 - reported below
            out["error"] = e
        returned.set()

    with stopped(replica.replica):
        t = threading.Thread(target=add, daemon=True)
        t.start()
        assert not returned.wait(0.5), f"the add returned before the replica had it: {out}"
    assert returned.wait(20), "the add did not return once the replica ran again"
    assert out == {"id": "d"}, out
    assert rr.hget(P + "job:d", "data") == b"durable", "the call returned before the replica had its write"


def test_a_call_that_writes_nothing_waits_for_no_replica(replica):
    """Asking for more replicas than there are: calls that write nothing (a
    beat's promote with nothing due, a claim of an empty queue, a stalled check
    with no lease) neither send WAIT nor raise; the first write does."""
    c = emq.connect(replica.primary_url, wait_replicas=2, wait_timeout=0.1)
    q = emq.Queue(c, "nothing")
    assert emq.promote(c, "nothing") == 0
    assert q.claim(5) == []
    assert emq.stalled_check(c, "nothing") == ([], [])
    with pytest.raises(emq.NotReplicatedError, match="1 of 2 replica"):
        q.add(b"x")


def test_more_replicas_than_the_primary_has_raise_not_replicated(replica):
    q = emq.Queue(emq.connect(replica.primary_url, wait_replicas=2, wait_timeout=0.1), Q)
    with pytest.raises(emq.NotReplicatedError, match="1 of 2 replica"):
        q.add(b"x", id="x")
    assert q.get("x") is not None, "written on the primary"
    assert q.counts().pending == 1  # reads wait for no replica


@pytest.mark.parametrize("verb", VERBS)
def test_permission_denied(server, r, verb):
    """A user denied one command the call needs: PermissionError, nothing written."""
    c = emq.connect(server.url)
    q, held = loaded(c, r)
    needs = {
        "add": "rpush",
        "add_many": "rpush",
        "add_later": "zadd",
        "claim": "zadd",
        "extend": "zadd",
        "complete": "zrem",
        "fail": "zadd",
        "pause_lane": "hset",
        "set_lane_limit": "hset",
        "promote": "zrem",
        "promote_lua": "evalsha",
        "stalled_check": "zrem",
        "stalled_check_lua": "evalsha",
    }[verb]
    r.execute_command("ACL", "SETUSER", "narrow", "reset", "on", ">pw", "~emq:*", "+@all", f"-{needs}")
    u = emq.connect(f"redis://narrow:pw@127.0.0.1:{server.port}")
    cls = emq.ScriptingError if needs == "evalsha" else emq.PermissionError
    msg = refused(r, verbs(emq.Queue(u, Q), held)[verb], cls, needs)
    assert "pw" not in msg.replace("permission", "")
    assert u.ping()


@pytest.mark.parametrize("verb", ["add", "claim", "complete", "fail", "promote", "promote_lua", "stalled_check", "stalled_check_lua"])
def test_paused_writes_leave_the_outcome_unknown_and_write_nothing(server, r, verb):
    """`CLIENT PAUSE WRITE` longer than the read timeout: the reads go through,
    EXEC (or the script) waits; the reply does not come in time, so the outcome
    is unknown to the caller, and the server, its client gone, runs nothing.

    A plan sweep queues its expected writes behind its reads (`MULTI` without
    `EXEC`, `Conversation::expected_exec`), and sends `EXEC` as soon as the reads
    are the ones it expected: then the pause holds the queued writes and the
    `EXEC` behind them, and the outcome is unknown too; where the reads were not
    as expected, the time runs out before `EXEC` was sent: a plain timeout.
    Either way the server runs nothing."""
    c = emq.connect(server.url, read_timeout=0.2)
    q, held = loaded(c, r)
    before = snapshot(r)
    r.execute_command("CLIENT", "PAUSE", "700", "WRITE")
    t0 = time.monotonic()
    try:
        if verb in ("promote", "stalled_check"):
            with pytest.raises((emq.TimeoutError, emq.OutcomeUnknownError)) as e:
                verbs(q, held)[verb]()
            assert isinstance(e.value, emq.ConnectionError), e.value
        else:
            with pytest.raises(emq.OutcomeUnknownError) as e:
                verbs(q, held)[verb]()
            assert isinstance(e.value, emq.ConnectionError)
            assert "unknown" in str(e.value)
    finally:
        time.sleep(max(0.0, 0.8 - (time.monotonic() - t0)))
        r.execute_command("CLIENT", "UNPAUSE")
    assert snapshot(r) == before
    assert c.ping()


def test_a_timeout_before_the_write_is_a_plain_timeout(server, r):
    """A read that times out before EXEC was sent (the server pauses every
    client): TimeoutError, not unknown, and nothing is written."""
    c = emq.connect(server.url, read_timeout=0.2)
    q = emq.Queue(c, Q)
    r.execute_command("CLIENT", "PAUSE", "600", "ALL")
    with pytest.raises(emq.TimeoutError) as e:
        q.add(b"x", id="x")
    assert not isinstance(e.value, emq.OutcomeUnknownError)
    time.sleep(0.7)
    assert r.exists(P + "job:x") == 0
    assert q.add(b"x", id="x") == "x"


# ---------------------------------------------------------------------------
# Credentials and what emq shows.


SECRET = "s3cr3t-Pa55"


def test_no_password_in_any_string(server, r, caplog):
    r.execute_command("ACL", "SETUSER", "app", "on", f">{SECRET}", "~*", "+@all")
    url = f"redis://app:{SECRET}@127.0.0.1:{server.port}/2"
    c = emq.connect(url)
    q = emq.Queue(c, Q)
    shown = [c.address, repr(c), repr(q), repr(c.sibling()), c.sibling().address]
    assert c.address == f"redis://app@127.0.0.1:{server.port}/2"
    # errors: a refused password, a port nobody listens on, a unix socket that is not there
    for bad in [
        f"redis://app:{SECRET}x@127.0.0.1:{server.port}",
        f"redis://app:{SECRET}@127.0.0.1:1",
        f"unix:///nonexistent/emq.sock?pass={SECRET}&db=1",
        f"redis+unix:///nonexistent/emq.sock?user=app&pass={SECRET}",
        f"nonsense://app:{SECRET}@h",
        f"redis://app:{SECRET}@127.0.0.1:{server.port}/notadb",
    ]:
        with pytest.raises(emq.EmqError) as e:
            emq.connect(bad, connect_timeout=1)
        shown.append(str(e.value))
    with caplog.at_level(logging.DEBUG):
        w = emq.Worker(q, lambda job: None, beat=0.05, ttl=0.3)
        w.run()
    shown.extend(rec.getMessage() for rec in caplog.records)
    for s in shown:
        assert SECRET not in s, s


def test_connect_to_a_protected_server(server, r):
    """A server that wants a password, asked without one, says that the URL
    needs a password and how to give one, not the server's own words about
    `HELLO` (which a broken version passed on: "NOAUTH HELLO must be called
    with the client already authenticated…"); a wrong password says the
    credentials were refused. Neither shows the password."""
    r.config_set("requirepass", SECRET)
    try:
        with pytest.raises(emq.AuthenticationError) as e:
            emq.connect(server.url)
        msg = str(e.value)
        assert msg.startswith(f"emq.connect: redis://127.0.0.1:{server.port}: the server needs a password, and the URL gives none"), msg
        assert "redis://:PASSWORD@host:port" in msg and "EMQ_URL" in msg, msg
        assert "HELLO" not in msg and "NOAUTH" not in msg, msg
        assert isinstance(e.value, emq.ConnectionError)
        with pytest.raises(emq.AuthenticationError) as e:
            emq.connect(f"redis://:n0t-it@127.0.0.1:{server.port}")
        msg = str(e.value)
        assert "refused the URL's credentials" in msg and "password is wrong" in msg, msg
        assert "n0t-it" not in msg and "WRONGPASS" not in msg, msg
        with pytest.raises(emq.AuthenticationError) as e:
            emq.connect(f"redis://app@127.0.0.1:{server.port}")  # a user, no password
        assert "needs a password, and the URL gives none" in str(e.value), str(e.value)
        c = emq.connect(f"redis://:{SECRET}@127.0.0.1:{server.port}")
        assert c.ping() is True
        assert c.sibling().ping() is True
    finally:
        r.execute_command("AUTH", SECRET)
        r.config_set("requirepass", "")


def test_siblings_carry_user_db_and_timeouts(server, r):
    r.execute_command("ACL", "SETUSER", "app", "on", f">{SECRET}", "~*", "+@all")
    c = emq.connect(f"redis://app:{SECRET}@127.0.0.1:{server.port}/3", read_timeout=0.4)
    s = c.sibling()
    assert s.command("ACL", "WHOAMI") == b"app"
    s.command("SET", "k", "in-3")
    assert redis.Redis.from_url(server.url + "/3").get("k") == b"in-3"
    # the read timeout is the parent's: a blocking pop of 1 s gives up at 0.4 s
    with pytest.raises(emq.TimeoutError):
        s.command("BLPOP", "nothing", "1")
    longer = c.sibling(read_timeout=5)
    assert longer.command("BLPOP", "nothing", "0.5") is None
    with pytest.raises(emq.ArgumentError):
        c.sibling(read_timeout=-1)


# ---------------------------------------------------------------------------
# Workers: fatal errors stop them; passing ones are ridden out.


def test_worker_stops_with_a_layout_error(server, r):
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    q.add(b"x", id="x", delay=FAR)
    r.zadd(P + "schedule", {"x": 1000})
    r.set(P + "pending", "not a list")
    w = emq.Worker(q, lambda job: None, beat=0.05, ttl=30)
    t0 = time.monotonic()
    with pytest.raises(emq.LayoutError, match="^Queue.promote: "):
        w.run()
    assert time.monotonic() - t0 < 20
    assert w.counters.snapshot()["degraded_beats"] == 0


def test_worker_stops_with_a_permission_error(server, r):
    r.execute_command("ACL", "SETUSER", "w", "reset", "on", ">pw", "~emq:*", "+@all", "-zrange")
    c = emq.connect(f"redis://w:pw@127.0.0.1:{server.port}")
    w = emq.Worker(emq.Queue(c, Q), lambda job: None, beat=0.05, ttl=30)
    with pytest.raises(emq.PermissionError, match="zrange"):
        w.run()


def test_worker_stops_when_its_password_is_revoked(server, r):
    r.execute_command("ACL", "SETUSER", "w", "reset", "on", ">pw", "~emq:*", "+@all")
    c = emq.connect(f"redis://w:pw@127.0.0.1:{server.port}")
    w = emq.Worker(emq.Queue(c, Q), lambda job: None, beat=0.05, ttl=30)
    result: dict = {}

    def run():
        try:
            w.run()
        except BaseException as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    time.sleep(0.3)
    r.execute_command("ACL", "SETUSER", "w", "resetpass", ">other")
    r.execute_command("CLIENT", "KILL", "USER", "w")
    t.join(20)
    assert not t.is_alive()
    assert isinstance(result.get("error"), emq.AuthenticationError), result


def test_worker_rides_out_a_full_server_and_runs_the_jobs_after(server, r):
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    done = []
    w = emq.Worker(q, lambda job: done.append(job.id), beat=0.05)
    r.config_set("maxmemory-policy", "noeviction")
    q.add(b"a", id="a", delay=0.2)
    r.config_set("maxmemory", "1")
    result: dict = {}

    def run():
        try:
            result["counters"] = w.run()
        except BaseException as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 20
        while w.counters.snapshot()["degraded_beats"] < 2:
            assert time.monotonic() < deadline, w.counters.snapshot()
            time.sleep(0.02)
    finally:
        r.config_set("maxmemory", "0")
    deadline = time.monotonic() + 20
    while done != ["a"]:
        assert time.monotonic() < deadline, (done, w.counters.snapshot())
        time.sleep(0.02)
    w.stop()
    t.join(20)
    assert "error" not in result, result


def test_stalled_sweeper_stops_with_a_fatal_error(server, r):
    r.set(P + "active", "not a zset")
    s = emq.Stalled(emq.Queue(emq.connect(server.url), Q), interval=0.02).start()
    deadline = time.monotonic() + 10
    while s.error is None:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert isinstance(s.error, emq.LayoutError)
    s.stop()


# ---------------------------------------------------------------------------
# The connection itself.


def test_a_call_that_panicked_leaves_no_watch_behind(server, r):
    """A panic while a call holds the connection (here: after a WATCH) poisons
    its lock; the next call closes that connection and opens a new one, so the
    stale watch cannot abort it."""
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    first = c._client_id()
    with pytest.raises(BaseException, match="panic for the tests"):
        emq._core._panic_while_watching(c, P + "job:w")
    r.hset(P + "job:other", "x", "1")
    r.set(P + "job:w", "touched")  # would abort an EXEC under the old watch
    r.delete(P + "job:w")
    assert q.add(b"w", id="w") == "w"
    assert c._client_id() != first
    assert r.hget(P + "job:w", "state") == b"pending"


def test_claim_tokens_are_unique_and_128_bits(server, r):
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    q.add_many([b"x"] * 2000)
    jobs = q.claim(2000) + emq.Queue(emq.connect(server.url), Q).claim(10)
    tokens = [j.token for j in jobs]
    assert len(set(tokens)) == len(tokens) == 2000
    assert all(re.fullmatch(r"[0-9a-f]{32}", t) for t in tokens)

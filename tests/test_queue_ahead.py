"""A sweep queues the transaction it expects behind its guarded reads (`MULTI`
and the writes, without `EXEC`: `Conversation::expected_exec`), and sends
`EXEC` only when the read turns out as expected; otherwise it sends `DISCARD`
(which ends its watch) and the call starts again, without queueing ahead until
a guess would have been right again. What a broken version would get wrong: a
connection left inside `MULTI`, a discarded plan that was never applied, a
queue refused by the server and run anyway, or a wrong guess paid on every call.
"""

from __future__ import annotations

import pytest
import redis

import emq

Q = "ahead"
P = f"emq:{{{Q}}}:"


def due(r: redis.Redis, ids: list[str], lane_every: int = 0, ghost_every: int = 0) -> None:
    now = int(r.time()[0]) * 1000
    pipe = r.pipeline(transaction=False)
    for k, i in enumerate(ids):
        pipe.zadd(P + "schedule", {i: now - 10_000 + k})
        if ghost_every and k % ghost_every == ghost_every - 1:
            continue
        h = {"state": "scheduled"}
        if lane_every and k % lane_every == 0:
            h["lane"] = "L"
        pipe.hset(P + "job:" + i, mapping=h)
    pipe.execute()


def stats(r: redis.Redis) -> dict:
    return {k[len("cmdstat_") :]: v["calls"] for k, v in r.info("commandstats").items() if k.startswith("cmdstat_")}


def test_a_wrong_guess_is_discarded_once_and_the_plan_still_applies(server, r):
    c = emq.connect(server.url)
    # Lane rows and ghosts: not the guessed read (every row live and flat).
    due(r, [f"a{k:03d}" for k in range(40)], lane_every=3, ghost_every=7)
    r.config_resetstat()
    assert emq.promote(c, Q, batch=100) == 40
    s = stats(r)
    assert s.get("discard") == 1 and s.get("exec") == 1, s
    assert c.command("SET", "k", "v") == "OK", "the connection is not left inside MULTI"
    assert r.zcard(P + "schedule") == 0
    assert r.llen(P + "pending") + r.llen(P + "lane:L") == 40 - 40 // 7
    # The next such call does not queue ahead: no DISCARD, one transaction.
    due(r, [f"b{k:03d}" for k in range(40)], lane_every=3)
    r.config_resetstat()
    assert emq.promote(c, Q, batch=100) == 40
    s = stats(r)
    assert s.get("discard", 0) == 0 and s.get("exec") == 1 and s.get("multi") == 1, s


def test_a_right_guess_queues_ahead_and_sends_exec_alone(server, r):
    c = emq.connect(server.url)
    for round_ in range(3):
        due(r, [f"r{round_}-{k:03d}" for k in range(50)])
        r.config_resetstat()
        assert emq.promote(c, Q, batch=100) == 50
        s = stats(r)
        assert s.get("discard", 0) == 0 and s.get("exec") == 1 and s.get("multi") == 1, s
    # A flat backlog after lane rows: the first call learns the guess holds again.
    due(r, [f"l{k:03d}" for k in range(30)], lane_every=2)
    emq.promote(c, Q, batch=100)
    due(r, [f"f{k:03d}" for k in range(30)])
    emq.promote(c, Q, batch=100)  # not queued ahead; its guess would have held
    due(r, [f"g{k:03d}" for k in range(30)])
    before = r.info("commandstats").get("cmdstat_exec", {}).get("calls", 0)
    assert emq.promote(c, Q, batch=100) == 30
    assert r.info("commandstats")["cmdstat_exec"]["calls"] == before + 1
    assert r.info("commandstats").get("cmdstat_discard", {}).get("calls", 0) == 1


@pytest.mark.parametrize("verb", ["promote", "stalled_check"])
def test_a_queue_the_server_refuses_writes_nothing_and_raises_its_class(server, r, verb):
    """Out of memory: each queued write is refused. The read was the expected
    one, so the call's own transaction was refused: OutOfMemoryError, naming
    the verb, nothing written, and the connection usable."""
    c = emq.connect(server.url)
    if verb == "promote":
        due(r, [f"m{k:03d}" for k in range(20)])
    else:
        now = int(r.time()[0]) * 1000
        for k in range(20):
            r.zadd(P + "active", {f"m{k:03d}": now - 10_000 + k})
            r.hset(P + f"job:m{k:03d}", mapping={"state": "active", "token": "t", "lease": now - 10_000 + k})
    before = {k: r.dump(k) for k in r.keys("*")}
    r.config_set("maxmemory-policy", "noeviction")
    r.config_set("maxmemory", "1")
    try:
        r.config_resetstat()
        with pytest.raises(emq.OutOfMemoryError) as e:
            (emq.promote(c, Q, batch=100) if verb == "promote" else emq.stalled_check(c, Q, max_stalled=None, batch=100))
        assert "EXECABORT" not in str(e.value) and str(e.value).startswith(("emq.promote: ", "emq.stalled_check: ")), e.value
        # The read was as expected, so EXEC went behind the queued writes: the server,
        # having refused one of them, refused the EXEC (EXECABORT) and ran nothing.
        assert stats(r).get("exec") == 1 and not stats(r).get("discard"), "the queued transaction was refused, not run"
    finally:
        r.config_set("maxmemory", "0")
    assert {k: r.dump(k) for k in r.keys("*")} == before
    assert c.ping()


def test_a_backlog_drained_a_batch_at_a_time_reads_its_selections_bare(server, r):
    """A promote that took a whole batch leaves its connection expecting a
    backlog: the next reads its selection without scores (its members, and
    the scores of its first and last by rank, `Sweep::bare_selection`), and one
    cut by `now` in the middle reads it again with them. Each call takes what
    the scored read would take, in due order."""
    c = emq.connect(server.url)
    due(r, [f"d{k:03d}" for k in range(250)])
    now = int(r.time()[0]) * 1000
    r.zadd(P + "schedule", {f"later{k}": now + 600_000 + k for k in range(60)})
    for k in range(60):
        r.hset(P + f"job:later{k}", "state", "scheduled")
    zranges = []
    for want in (100, 100, 50, 0):
        r.config_resetstat()
        assert emq.promote(c, Q, batch=100) == want
        zranges.append(stats(r).get("zrange", 0))
    # Scored (one read); bare (the members and three probes); bare, cut by now
    # at 50, read again with scores; scored again, after a call that took less
    # than a batch.
    assert zranges == [1, 4, 5, 1], zranges
    assert [x.decode() for x in r.lrange(P + "pending", 0, -1)] == [f"d{k:03d}" for k in range(250)]
    assert r.zcard(P + "schedule") == 60

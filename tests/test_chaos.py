"""Faults on the wire (tests/faults.py's proxy between emq and a real server):
EXECs dropped before and after they run, replies cut by resets, closes, stalls.

- Every reply lost after the server got the write (an `EXEC` or a script it
  ran, or may have run) surfaces as `emq.OutcomeUnknownError`, and a plain
  `emq.ConnectionError` means nothing was written.
- An `add` retried after an unknown outcome returns its id whether or not the
  first one landed; another job with the id is still refused.
- Under producer and worker load with chaos on every connection: no job is
  lost, none is run twice (every handler finishes well within its lease), and
  I1 to I4 hold at the end.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest

import emq
from test_jobs_model import assert_invariants, snapshot

Q = "chaos"
P = f"emq:{{{Q}}}:"
FAR = 10**6  # seconds: "later" (about 11 days)


def lost_writes(faults) -> list:
    """The faults that lost the reply to a write the server got (EXEC or a script)."""
    return [f for f in faults if {"EXEC", "EVALSHA"} & set(f.detail.get("unanswered", ()))]


@pytest.mark.parametrize("seed", [1, 2])
def test_every_lost_reply_is_an_unknown_outcome(server, proxy, r, seed):
    """A seeded run of random calls through chaos. After each call: a fault that
    lost a write's reply means the call raised OutcomeUnknownError; a plain
    ConnectionError means the keyspace is as it was before the call."""
    direct = emq.Queue(emq.connect(server.url), Q)
    c = emq.connect(proxy.url, read_timeout=3)
    q = emq.Queue(c, Q)
    rnd = random.Random(seed)
    held: list[emq.Job] = []
    n = 0

    def add():
        nonlocal n
        n += 1
        q.add(b"x", id=f"a{n}", lane=rnd.choice([None, "L"]), delay=rnd.choice([0, 0, FAR]))

    def due():  # make some scheduled jobs due and a lease expire, directly (score and row, I5)
        for m in r.zrange(P + "schedule", 0, 2):
            r.zadd(P + "schedule", {m: 1000})
            r.hset(P + "job:" + m.decode(), "due", 1000)
        for m in r.zrange(P + "active", 0, 0):
            r.zadd(P + "active", {m: 1000})
            r.hset(P + "job:" + m.decode(), "lease", 1000)

    def claim():
        held.extend(q.claim(2, lease=FAR))

    def settle():
        if held:
            j = held.pop(rnd.randrange(len(held)))
            rnd.choice([lambda: q.complete(j), lambda: q.fail(j, "e", retry_in=rnd.choice([0, FAR])), lambda: q.extend(j, FAR)])()

    ops = {
        "add": add,
        "add_many": lambda: q.add_many([b"m1", b"m2"]),
        "claim": claim,
        "settle": settle,
        "promote": lambda: emq.promote(c, Q),
        "promote_lua": lambda: emq.promote(c, Q, backend="lua"),
        "stalled": lambda: emq.stalled_check(c, Q),
        "stalled_lua": lambda: emq.stalled_check(c, Q, backend="lua"),
        "pause": lambda: q.pause_lane("L"),
        "resume": lambda: q.resume_lane("L"),
    }
    for _ in range(5):
        direct.add(b"seed", lane=rnd.choice([None, "L"]))
    proxy.chaos(seed, p_drop_before=0.06, p_drop_after=0.06, p_reset=0.03, p_drop=0.03, p_stall=0.03, max_stall=0.05)
    seen = Counter()
    for i in range(150):
        if i % 10 == 0:
            due()
        name = rnd.choice(list(ops))
        before = snapshot(r)
        mark = len(proxy.events)
        try:
            ops[name]()
            outcome = "ok"
        except emq.OutcomeUnknownError:
            outcome = "unknown"
        except emq.ConnectionError:
            outcome = "connection"
        except emq.ContentionError:
            outcome = "contention"
        new = proxy.events[mark:]
        seen[outcome] += 1
        if lost_writes(new):
            assert outcome == "unknown", (i, name, outcome, new)
        if outcome == "connection":
            assert snapshot(r) == before, (i, name, new)
    proxy.calm()
    assert seen["unknown"] >= 3 and seen["connection"] >= 3 and seen["ok"] >= 50, seen
    assert lost_writes(proxy.events), "the run lost no write's reply"
    assert_invariants(r, P)


def test_an_add_retried_after_an_unknown_outcome(proxy, r):
    """The reply to an add is lost after it landed: the retry returns the id
    (the add landed once); a different job under that id is still refused; an
    add whose EXEC never ran is done by its retry."""
    c = emq.connect(proxy.url)
    q = emq.Queue(c, Q)
    proxy.arm("drop_after_exec")
    with pytest.raises(emq.OutcomeUnknownError):
        q.add(b"payload", id="x", lane="L", max_attempts=5)
    assert [f.exec_forwarded for f in proxy.faults("drop_after_exec")] == [True]
    landed = snapshot(r)
    assert q.add(b"payload", id="x", lane="L", max_attempts=5) == "x"
    assert snapshot(r) == landed, "the retry wrote again"
    for other in [
        dict(data=b"other"),
        dict(data=b"payload", lane="M"),
        dict(data=b"payload", max_attempts=4),
        dict(data=b"payload", delay=0.005),
    ]:
        kw = {"lane": "L", "max_attempts": 5, **other}
        with pytest.raises(emq.DuplicateJobError):
            q.add(kw.pop("data"), id="x", **kw)
    assert snapshot(r) == landed
    proxy.arm("drop_before_exec")
    with pytest.raises(emq.ConnectionError):
        q.add(b"y", id="y")
    assert r.exists(P + "job:y") == 0
    assert q.add(b"y", id="y") == "y"
    assert r.hget(P + "job:y", "state") == b"pending"


def test_producers_and_workers_under_chaos_lose_nothing_and_run_nothing_twice(server, proxy, r):
    """Two producers add 400 jobs with ids (retrying what ends in a wire error,
    which the digest makes safe), two workers run them, every connection
    through chaos. Each job runs once, all are done, I1 to I4 hold."""
    n = 400
    runs: Counter = Counter()
    lock = threading.Lock()

    def handler(job):
        with lock:
            runs[job.id] += 1

    proxy.chaos(7, p_drop_before=0.01, p_drop_after=0.01, p_reset=0.005, p_drop=0.005, p_stall=0.01, max_stall=0.05)
    workers = [
        emq.Worker(emq.Queue(emq.connect(proxy.url, read_timeout=2), Q), handler, beat=0.1, lease=3, concurrency=4) for _ in range(2)
    ]
    errors: list = []

    def work(w):
        try:
            w.run()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def produce(k):
        c = None
        for i in range(k, n, 2):
            while True:
                try:
                    c = c or emq.connect(proxy.url, read_timeout=2)
                    emq.Queue(c, Q).add(b"job", id=f"j{i}", lane="L" if i % 5 == 0 else None, delay=0.2 if i % 7 == 0 else 0)
                    break
                except emq.ConnectionError:  # a dropped connection, or an unknown outcome: add again
                    time.sleep(0.01)

    threads = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]
    threads += [threading.Thread(target=produce, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    direct = emq.Queue(emq.connect(server.url), Q)
    deadline = time.monotonic() + 120
    try:
        while True:
            c = direct.counts()
            if threads[2].is_alive() or threads[3].is_alive() or c.schedule + c.pending + c.active + sum(c.lanes.values()):
                assert time.monotonic() < deadline, (c, len(runs))
                assert not errors, errors
                time.sleep(0.1)
                continue
            break
    finally:
        for w in workers:
            w.stop()
        for t in threads[:2]:
            t.join(30)
    proxy.calm()
    assert not errors, errors
    assert proxy.events, "no fault was injected"
    states = Counter((j.state if j else None) for j in map(direct.get, [f"j{i}" for i in range(n)]))
    assert states == {"done": n}, states
    twice = {k: v for k, v in runs.items() if v != 1}
    assert not twice, twice
    assert set(runs) == {f"j{i}" for i in range(n)}
    assert_invariants(r, P)

"""The narrow guard (SPEC §9): traffic that cannot change a plan must not abort it.

The issue asks that a promoter keep "at no less than half its idle speed" while
producers append to `schedule` and `pending` and a worker rotates the ring. The
test is a ratio measured in one run on one machine, not an absolute timer.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import statistics
import time
from collections import Counter

import pytest
import redis

import emq

Q = "guard"
P = f"emq:{{{Q}}}:"
SCHEDULE, PENDING, RING, WAKE = (P + k for k in ("schedule", "pending", "ring", "wake"))
N = 20_000
BATCH = 1_000
LANE = "a"  # one due row in ten is lane a's; a joins the ring on the first call
IDLE_LANES = ["z1", "z2"]  # in the ring from the start; the promoter never touches them
FAR = 4_000_000_000_000
ROUNDS = 3


def job_key(id_: str) -> str:
    return f"{P}job:{id_}"


def s(b) -> str:
    return b.decode() if isinstance(b, bytes) else b


def seed(r: redis.Redis) -> list[str]:
    """A fresh queue: N due rows (one in ten of lane a), the ring holding z1 and z2."""
    r.flushdb()
    sec, usec = r.time()
    now = sec * 1000 + usec // 1000
    ids = [f"d{i:05d}" for i in range(N)]
    pipe = r.pipeline(transaction=False)
    for i, id_ in enumerate(ids):
        mapping = {"state": "scheduled", "due": now - N - 1_000 + i}
        if i % 10 == 0:
            mapping["lane"] = LANE
        pipe.hset(job_key(id_), mapping=mapping)
    for k in range(0, N, 1_000):
        pipe.zadd(SCHEDULE, {id_: now - N - 1_000 + i for i, id_ in enumerate(ids[k : k + 1_000], start=k)})
    for lane in IDLE_LANES:
        pipe.rpush(f"{P}lane:{lane}", f"{lane}-ready")
        pipe.hset(f"{P}lanectl:{lane}", "ring", "1")
        pipe.rpush(RING, lane)
    pipe.execute()
    return ids


def attempts(r: redis.Redis) -> tuple[int, int]:
    """(EXISTS and SORT_RO calls, UNWATCH calls) since the last CONFIG RESETSTAT.
    Only the plan sends them here: in each attempt that selected something, an
    EXISTS per group of its rows under the watch, or, a backlog's promote that
    reads its rows with its selection, one SORT_RO an attempt. Only a dropped
    selection sends UNWATCH, and a sorted read that found nothing due (it
    watched before it read: the last call of a backlog)."""
    stats = r.info("commandstats")
    calls = {c: stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("exists", "sort_ro", "unwatch")}
    return calls["exists"] + calls["sort_ro"], calls["unwatch"]


def promote_all(c: emq.Client, group: int | None = None) -> tuple[float, int, int]:
    """Promotes until nothing is due: (seconds, ids moved, calls)."""
    moved = calls = 0
    t0 = time.perf_counter()
    while True:
        n = emq.promote(c, Q, batch=BATCH, backend="plan", group=group)
        calls += 1
        if n == 0:
            break
        moved += n
        assert calls <= 2 * N // BATCH + 5, "promote keeps finding work"
    return time.perf_counter() - t0, moved, calls


# Each load client's pace, operations a second. Steady traffic (a write to
# `schedule` or `pending` every few hundred microseconds in all), paced so that
# the load measures the guard, not how three busy processes starve two cores.
RATE = 1500


def _load_loop(url: str, tag: str, name: str, stop, count, errors) -> None:
    """One load client, in a process of its own (so it never holds the test's
    GIL): future jobs (row + ZADD schedule, far in the future), ready flat jobs
    (row + RPUSH pending), or LMOVE ring ring LEFT RIGHT, at RATE a second."""
    c = redis.Redis.from_url(url)
    k = 0
    next_at = time.monotonic()
    try:
        while not stop.is_set():
            next_at += 1 / RATE
            pause = next_at - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            if name == "schedule":
                id_ = f"f{tag}-{k}"
                p = c.pipeline(transaction=True)
                p.hset(job_key(id_), mapping={"state": "scheduled", "due": FAR + k})
                p.zadd(SCHEDULE, {id_: FAR + k})
                p.execute()
            elif name == "pending":
                id_ = f"x{tag}-{k}"
                p = c.pipeline(transaction=True)
                p.hset(job_key(id_), mapping={"state": "pending"})
                p.rpush(PENDING, id_)
                p.execute()
            else:
                c.lmove(RING, RING, "LEFT", "RIGHT")
            k += 1
            count.value = k
    except Exception as e:  # noqa: BLE001 - reported by the test
        errors.put(f"{name}: {e!r}")
    finally:
        c.close()


class Load:
    """Two producers and a ring rotator, each a process with its own redis-py
    connection, at RATE operations a second. Processes, not threads: the
    promoter's speed must not depend on waiting for the GIL behind the load."""

    NAMES = ("schedule", "pending", "ring")

    def __init__(self, url: str, tag: str):
        ctx = mp.get_context("spawn")
        self.stop = ctx.Event()
        self.counts = {n: ctx.Value("q", 0, lock=False) for n in self.NAMES}
        self.error_queue = ctx.Queue()
        self.procs = [
            ctx.Process(target=_load_loop, args=(url, tag, n, self.stop, self.counts[n], self.error_queue), daemon=True) for n in self.NAMES
        ]
        self.errors: list[str] = []

    @property
    def ops(self) -> Counter:
        return Counter({n: v.value for n, v in self.counts.items()})

    def __enter__(self) -> Load:
        for p in self.procs:
            p.start()
        deadline = time.monotonic() + 30
        while min(self.ops.values()) == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # all three running before the clock starts
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        for p in self.procs:
            p.join(10)
        while not self.error_queue.empty():
            self.errors.append(self.error_queue.get())


def wide_guard_aborts(url: str) -> int:
    """How many of 5 transactions that WATCH schedule and pending (the guard this
    test rules out) survive the load: read, think for 5 ms, write nothing."""
    c = redis.Redis.from_url(url)
    ok = 0
    try:
        for _ in range(5):
            with c.pipeline(transaction=True) as p:
                try:
                    p.watch(SCHEDULE, PENDING)
                    p.zrange(SCHEDULE, 0, 0)
                    time.sleep(0.005)
                    p.multi()
                    p.ping()
                    p.execute()
                    ok += 1
                except redis.WatchError:
                    pass
    finally:
        c.close()
    return ok


def check_moved(r: redis.Redis, ids: list[str]) -> None:
    pending = [s(x) for x in r.lrange(PENDING, 0, -1)]
    lane = [s(x) for x in r.lrange(f"{P}lane:{LANE}", 0, -1)]
    mine = [i for i in pending if i.startswith("d")]
    assert Counter(mine + lane) == Counter(ids), "every due id once, in pending or its lane"
    assert mine == [i for i in ids if int(i[1:]) % 10], "flat rows in due order"
    assert lane == [i for i in ids if int(i[1:]) % 10 == 0], "lane rows in due order"
    pipe = r.pipeline(transaction=False)
    for i in ids:
        pipe.hget(job_key(i), "state")
    assert Counter(s(x) for x in pipe.execute()) == {"pending": N}
    ring = [s(x) for x in r.lrange(RING, 0, -1)]
    assert sorted(ring) == sorted(IDLE_LANES + [LANE]), ring
    assert r.zcount(SCHEDULE, "-inf", FAR - 1) == 0


@pytest.mark.timeout(240)
@pytest.mark.parametrize("group", [None, 100])
def test_promote_never_starts_again_under_producer_and_ring_traffic(server, r, group):
    """One promoter (plan backend, batch 1000) moves 20,000 due jobs, first on an
    idle server, then again, from the same fresh state, while two producers append
    to `schedule` and `pending` and a third client rotates the ring, each at RATE
    operations a second, from processes of their own. Under that traffic it must
    take as many attempts as idle (no call started again), with no ContentionError;
    in one transaction a call, and in groups of 100 rows (SPEC §9), whose later
    groups read and watch their rows (a promote: its key) anew. The wall times,
    idle and loaded, are printed, not asserted.

    A promote watches only `P promotions` (which only a promote changes) and the
    control hash of the lanes it writes (SPEC §9), none of which this traffic touches. A guard that watched
    `schedule` or `pending` instead would see its EXEC aborted by nearly every
    call (a producer writes one of them every few hundred microseconds, and a
    1,000-row plan takes milliseconds to read and write), so it would retry until
    it gave up with ContentionError (livelock) or at best crawl: this test fails
    such a guard. `wide_guard_aborts` shows, under the same load, that even a
    short transaction watching those two keys does not get through.
    """
    c = emq.connect(server.url)
    seed(r)
    promote_all(c, group)  # warm-up, untimed: the connection, the server's allocator
    idle, loaded, ops_per_s, wide_ok = [], [], [], []
    for rnd in range(ROUNDS):
        ids = seed(r)
        gc.collect()
        r.config_resetstat()
        secs, moved, calls = promote_all(c, group)
        assert moved == N and calls == N // BATCH + 1
        idle_tries = attempts(r)
        # One transaction a call: the last call, which finds nothing, read sorted.
        assert idle_tries[1] == (1 if group is None else 0), "a selection was dropped with nothing else running"
        check_moved(r, ids)
        idle.append(secs)

        ids = seed(r)
        gc.collect()
        with Load(server.url, str(rnd)) as load:
            before = sum(load.ops.values())
            r.config_resetstat()
            try:
                secs, moved, calls = promote_all(c, group)
            except emq.ContentionError as e:
                pytest.fail(f"round {rnd}: the promoter gave up under traffic that cannot change its plan: {e}")
            ops = sum(load.ops.values()) - before
            tries = attempts(r)
            wide_ok.append(wide_guard_aborts(server.url))
        assert not load.errors, load.errors
        assert moved == N, moved
        assert calls == N // BATCH + 1, f"round {rnd}: {calls} calls for {N} ids"
        assert tries == idle_tries, (
            f"round {rnd}: the traffic made the plan start again: (attempts, dropped selections) = {tries} under load, {idle_tries} idle"
        )
        assert min(load.ops[k] for k in ("schedule", "pending", "ring")) > 50, load.ops
        check_moved(r, ids)
        assert r.zcount(SCHEDULE, FAR, "+inf") == load.ops["schedule"], "the future jobs stay scheduled"
        loaded.append(secs)
        ops_per_s.append(ops / secs)
    c.close()

    ratio = statistics.median(loaded) / statistics.median(idle)
    print(
        f"\nidle {[round(x, 3) for x in idle]} s, loaded {[round(x, 3) for x in loaded]} s, "
        f"median ratio {ratio:.2f}, load {[round(x) for x in ops_per_s]} ops/s, "
        f"wide-guard transactions through: {wide_ok} of 5"
    )
    assert max(wide_ok) <= 2, f"the load is too light to tell a wide guard from a narrow one: {wide_ok}"
    # No bound on `ratio`: a timer is no test on a shared machine (benches/ measures
    # speed). What fails a wide guard is above: its EXEC aborted, the call starts again.

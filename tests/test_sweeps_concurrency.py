"""Sweeps racing each other and producers (SPEC §9: linearizable, nothing promoted,
recovered or killed twice, nothing lost).

Every racing client has its own connection (an `emq.Client` serializes its callers
on one connection, so sharing one would not race anything). Loops are bounded in
count and in time: a test that cannot finish fails with what it saw.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import pytest
import redis

import emq
from test_jobs_model import server_ms

Q = "conc"
P = f"emq:{{{Q}}}:"
SCHEDULE, PENDING, ACTIVE, DEAD, RING, WAKE = (P + k for k in ("schedule", "pending", "active", "dead", "ring", "wake"))
WAKE_MAX = 64
FAR = 4_000_000_000_000  # a lease or due time that never comes during a test

# A producer's add of future work (SPEC §7): the row and the schedule entry, with a
# due time later than the clock reading of the same call, atomically. A producer
# that read TIME in one round trip and wrote in another could land a due time that
# is already past by the time it is written, which SPEC §9 rules out for emq's own
# add; a script keeps the clock reading and the write one instant.
ADD_FUTURE = """
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local out = {}
for i = 1, #ARGV, 3 do
  local id, lane, delay = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local row = KEYS[2 + (i - 1) / 3]
  local due = now + delay
  redis.call('HSET', row, 'state', 'scheduled', 'due', due)
  if lane ~= '' then redis.call('HSET', row, 'lane', lane) end
  redis.call('ZADD', KEYS[1], due, id)
  out[#out + 1] = due
end
return out
"""


def lane_key(lane: str) -> str:
    return f"{P}lane:{lane}"


def ctl_key(lane: str) -> str:
    return f"{P}lanectl:{lane}"


def job_key(id_: str) -> str:
    return f"{P}job:{id_}"


def exec_stats(r: redis.Redis) -> dict[str, int]:
    """Calls of EXEC and UNWATCH since the last CONFIG RESETSTAT. A plan sends
    UNWATCH only when it drops what it watched without an EXEC (its selection
    changed under it, or an error): with one client alone that does not happen, so
    UNWATCH calls show the racing clients really got in each other's way."""
    stats = r.info("commandstats")
    return {c: stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("exec", "unwatch")}


def s(b) -> str:
    return b.decode() if isinstance(b, bytes) else b


def backends_for(mode: str, n: int) -> list[str]:
    """`plan`, `lua`, or `mixed`: plan and Lua clients racing one another;
    `grouped`: plan clients applying their calls in small groups (SPEC §9)."""
    if mode == "mixed":
        return ["plan" if i % 2 == 0 else "lua" for i in range(n)]
    if mode == "grouped":
        return ["plan"] * n
    return [mode] * n


def groups_for(mode: str, n: int) -> list[int | None]:
    """The rows per transaction of each client: small groups in `grouped` mode,
    else the automatic choice."""
    return [[1, 3, 7, 16][i % 4] for i in range(n)] if mode == "grouped" else [None] * n


def check_ring(
    snapshot_ring: list[str], ring_fields: dict[str, str | None], lanes_len: dict[str, int], servable: dict[str, bool], where: str
) -> None:
    """I2 (ring field agrees with ring membership, each lane at most once) and I3
    (a non-empty lane that can be served is in the ring)."""
    counts = Counter(snapshot_ring)
    dup = {ln: c for ln, c in counts.items() if c > 1}
    assert not dup, f"{where}: lanes in the ring more than once (I2): {dup}"
    for lane, field in ring_fields.items():
        assert (field == "1") == (lane in counts), f"{where}: lane {lane!r} ring field {field!r} but in ring: {lane in counts} (I2)"
    for lane, n in lanes_len.items():
        if n > 0 and servable[lane]:
            assert lane in counts, f"{where}: lane {lane!r} holds {n} ids and can be served but is not in the ring (I3)"


# ---------------------------------------------------------------------------
# PROMOTE racing PROMOTE, with producers adding work that comes due meanwhile
# ---------------------------------------------------------------------------

SERVED_LANES = ["a", "b", "c"]
PAUSED_LANE = "p"
FULL_LANE = "full"  # limit 1 and one of its ids in active: cannot be served
ALL_LANES = SERVED_LANES + [PAUSED_LANE, FULL_LANE]
PRODUCED = 5_000  # by the producer threads, while the promoters run
PRESEEDED = 400  # already due before the promoters start
GHOSTS = 40  # due ids without a row


def _pick_lane(rng: random.Random) -> str:
    # about half flat, the rest spread over every kind of lane
    x = rng.random()
    if x < 0.5:
        return ""
    return ALL_LANES[int((x - 0.5) * 2 * len(ALL_LANES)) % len(ALL_LANES)]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["plan", "lua", "mixed", "grouped"])
def test_promoters_race_each_other_and_producers(server, r, mode):
    rng = random.Random(1234)
    lane_of: dict[str, str] = {}  # id -> lane ('' = flat), live rows only
    due_of: dict[str, int] = {}

    # Lanes: a, b, c can be served; p is paused; full is at its limit because one of
    # its jobs is active (I4 holds: active = 1 and one id of the lane in `active`).
    r.hset(ctl_key(PAUSED_LANE), mapping={"paused": "1"})
    r.hset(ctl_key(FULL_LANE), mapping={"limit": "1", "active": "1"})
    r.hset(job_key("full-running"), mapping={"state": "active", "lane": FULL_LANE, "token": "t", "lease": FAR})
    r.zadd(ACTIVE, {"full-running": FAR})

    # Already due before anyone starts (with ghosts among them).
    now = server_ms(r)
    pipe = r.pipeline(transaction=False)
    for i in range(PRESEEDED):
        id_ = f"pre{i:05d}"
        lane = _pick_lane(rng)
        due = now - 2_000 + rng.randrange(1_500)
        mapping = {"state": "scheduled", "due": due}
        if lane:
            mapping["lane"] = lane
        pipe.hset(job_key(id_), mapping=mapping)
        pipe.zadd(SCHEDULE, {id_: due})
        lane_of[id_], due_of[id_] = lane, due
    ghosts = [f"ghost{i:03d}" for i in range(GHOSTS)]
    for g in ghosts:
        pipe.zadd(SCHEDULE, {g: now - 2_000 + rng.randrange(1_500)})
    pipe.execute()

    n_promoters = 4
    # 300: a call of many EXISTS groups, one transaction on every server, and a
    # bare selection (no scores) whose probes race the producers.
    batches = [7, 50, 7, 300]
    backends = backends_for(mode, n_promoters)
    groups = groups_for(mode, n_promoters)
    produced_done = threading.Event()
    stop = threading.Event()
    deadline = time.monotonic() + 60
    lock = threading.Lock()
    errors: list[str] = []
    totals = [0] * n_promoters
    calls = [0] * n_promoters
    wrote = [0] * n_promoters  # plan calls that ran their EXEC (n > 0)
    gave_up = [0] * n_promoters  # grouped calls that gave up (ContentionError)
    monitor_snaps = 0

    def producer(k: int, count: int) -> None:
        prng = random.Random(100 + k)
        pr = redis.Redis.from_url(server.url)
        script = pr.register_script(ADD_FUTURE)
        made = 0
        try:
            while made < count and time.monotonic() < deadline:
                take = min(count - made, prng.randrange(1, 6))
                ids = [f"p{k}-{made + j:05d}" for j in range(take)]
                lanes = [_pick_lane(prng) for _ in ids]
                argv = []
                for id_, lane in zip(ids, lanes):
                    argv += [id_, lane, prng.randrange(1, 25)]  # due 1 to 24 ms after the call's clock
                dues = script(keys=[SCHEDULE] + [job_key(i) for i in ids], args=argv, client=pr)
                with lock:
                    for id_, lane, due in zip(ids, lanes, dues):
                        lane_of[id_], due_of[id_] = lane, int(due)
                made += take
                time.sleep(prng.random() * 0.002)
            if made < count:
                errors.append(f"producer {k} ran out of time after {made} of {count}")
        except BaseException as e:  # noqa: BLE001 - reported by the main thread (a Rust panic is a BaseException)
            errors.append(f"producer {k}: {e!r}")
        finally:
            pr.close()

    def promoter(k: int) -> None:
        c = emq.connect(server.url)
        try:
            while time.monotonic() < deadline:
                try:
                    n = emq.promote(c, Q, batch=batches[k], backend=backends[k], group=groups[k])
                except emq.ContentionError as e:
                    # In `grouped` mode each call commits up to 19 small transactions
                    # back to back, and every one bumps the key all promoters watch:
                    # on a loaded machine a call's first group can lose 32 times in a
                    # row. It then writes nothing (SPEC §9), which the checks below
                    # hold it to; it stays the exception (counted, bounded below).
                    if mode == "grouped":
                        gave_up[k] += 1
                        continue
                    errors.append(f"promoter {k} ({backends[k]}, batch {batches[k]}): ContentionError: {e}")
                    continue
                calls[k] += 1
                totals[k] += n
                wrote[k] += n > 0 and backends[k] == "plan"
                if n == 0:
                    if produced_done.is_set() and c.command("ZCARD", SCHEDULE) == 0:
                        return
                    time.sleep(0.0005)
            errors.append(f"promoter {k} did not see schedule empty within the time limit")
        except BaseException as e:  # noqa: BLE001 - a Rust panic too
            errors.append(f"promoter {k}: {e!r}")
        finally:
            c.close()

    def monitor() -> None:
        """I2, I3 and the wake cap at instants between sweeps: one MULTI reads them."""
        nonlocal monitor_snaps
        mr = redis.Redis.from_url(server.url, decode_responses=True)
        servable = {ln: ln in SERVED_LANES for ln in ALL_LANES}
        try:
            while not stop.is_set():
                pipe = mr.pipeline(transaction=True)
                pipe.lrange(RING, 0, -1)
                pipe.llen(WAKE)
                for lane in ALL_LANES:
                    pipe.hget(ctl_key(lane), "ring")
                    pipe.llen(lane_key(lane))
                got = pipe.execute()
                ring, wake_len, rest = got[0], got[1], got[2:]
                fields = {ln: rest[2 * i] for i, ln in enumerate(ALL_LANES)}
                lens = {ln: rest[2 * i + 1] for i, ln in enumerate(ALL_LANES)}
                check_ring(ring, fields, lens, servable, "mid-run")
                assert wake_len <= WAKE_MAX, f"mid-run: wake holds {wake_len} tokens"
                monitor_snaps += 1
                time.sleep(0.003)
        except AssertionError as e:
            errors.append(f"monitor: {e}")
        except BaseException as e:  # noqa: BLE001 - a Rust panic too
            errors.append(f"monitor: {e!r}")
        finally:
            mr.close()

    per_producer = PRODUCED // 2
    producers = [threading.Thread(target=producer, args=(k, per_producer)) for k in range(2)]
    promoters = [threading.Thread(target=promoter, args=(k,)) for k in range(n_promoters)]
    mon = threading.Thread(target=monitor)
    r.config_resetstat()
    t0 = time.monotonic()
    for t in [mon, *promoters, *producers]:
        t.start()
    for t in producers:
        t.join()
    produced_done.set()
    for t in promoters:
        t.join()
    stop.set()
    mon.join()
    elapsed = time.monotonic() - t0

    assert not errors, "\n".join(errors)
    assert sum(gave_up) <= max(4, sum(calls) // 20), f"calls that gave up {gave_up} of {calls}"
    assert len(lane_of) == PRESEEDED + PRODUCED

    # schedule is empty; the replies add up to every id that left it, ghosts included
    assert r.zcard(SCHEDULE) == 0
    assert sum(totals) == PRESEEDED + PRODUCED + GHOSTS, (totals, calls)

    # every live id is in pending or its own lane exactly once; ghosts nowhere
    pending = [s(x) for x in r.lrange(PENDING, 0, -1)]
    lanes = {ln: [s(x) for x in r.lrange(lane_key(ln), 0, -1)] for ln in ALL_LANES}
    seen = Counter(pending)
    for ids in lanes.values():
        seen.update(ids)
    dups = {i: c for i, c in seen.items() if c > 1}
    assert not dups, f"ids moved more than once: {list(dups.items())[:10]}"
    assert set(seen) == set(lane_of), f"lost: {sorted(set(lane_of) - set(seen))[:10]}, unexpected: {sorted(set(seen) - set(lane_of))[:10]}"
    assert all(lane_of[i] == "" for i in pending), "a lane row went to pending"
    for lane, ids in lanes.items():
        assert all(lane_of[i] == lane for i in ids), f"a row that is not lane {lane!r}'s went to its list"

    # linearizable: every sequential order of these calls appends in (due, id) order
    for name, ids in [("pending", pending), *lanes.items()]:
        keys = [(due_of[i], i) for i in ids]
        assert keys == sorted(keys), f"{name} is not in (due, id) order"

    # every row is pending; ghosts got no row
    pipe = r.pipeline(transaction=False)
    for id_ in lane_of:
        pipe.hget(job_key(id_), "state")
    for g in ghosts:
        pipe.exists(job_key(g))
    got = pipe.execute()
    states = Counter(s(x) for x in got[: len(lane_of)])
    assert states == {"pending": len(lane_of)}, states
    assert not any(got[len(lane_of) :]), "a sweep wrote a ghost's row"

    # the ring: each servable lane that got rows once, ring fields agree (I2, I3)
    ring = [s(x) for x in r.lrange(RING, 0, -1)]
    fields = {ln: s(r.hget(ctl_key(ln), "ring")) for ln in ALL_LANES}
    check_ring(ring, fields, {ln: len(ids) for ln, ids in lanes.items()}, {ln: ln in SERVED_LANES for ln in ALL_LANES}, "end")
    assert sorted(ring) == sorted(ln for ln in SERVED_LANES if lanes[ln]), ring
    assert lanes[PAUSED_LANE] and lanes[FULL_LANE], "the test meant to give rows to the lanes that cannot be served"
    assert r.llen(WAKE) <= WAKE_MAX
    # the sweeps leave `active` and lane control counts alone
    assert [s(x) for x in r.zrange(ACTIVE, 0, -1)] == ["full-running"]
    assert s(r.hget(ctl_key(FULL_LANE), "active")) == "1"
    assert monitor_snaps > 0
    st = exec_stats(r)
    if mode != "lua":
        assert st["unwatch"] > 0, "no plan call ever dropped a selection: the race this test is for did not happen"
    print(
        f"\n[{mode}] {PRESEEDED + PRODUCED + GHOSTS} ids in {elapsed:.2f}s, calls {calls}, "
        f"moved {totals}, gave up {gave_up}, {monitor_snaps} snapshots, EXEC calls "
        f"{st['exec'] - monitor_snaps} for {sum(wrote)} plan calls that wrote, UNWATCH calls {st['unwatch']}"
    )


# ---------------------------------------------------------------------------
# STALLED CHECK racing STALLED CHECK
# ---------------------------------------------------------------------------

LIM_LANE = "lim"  # limit 2, with 2 jobs that stay active: never servable
STALL_LANES = ["a", "b", "c", PAUSED_LANE, LIM_LANE]
STALL_SERVABLE = {"a": True, "b": True, "c": True, PAUSED_LANE: False, LIM_LANE: False}
N_ACTIVE = 3_000
N_STALL_GHOSTS = 30


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", ["plan", "lua", "mixed", "grouped"])
def test_stalled_checks_race_each_other(server, r, mode):
    rng = random.Random(4321)
    now = server_ms(r)
    lane_of: dict[str, str] = {}
    lease_of: dict[str, int] = {}
    stalls_before: dict[str, int | None] = {}
    keep: list[str] = []  # leases that never expire during the test

    pipe = r.pipeline(transaction=False)

    def add_active(id_: str, lane: str, lease: int, stalls: int | None) -> None:
        mapping = {"state": "active", "token": f"tok-{id_}", "lease": lease, "attempts": 1}
        if lane:
            mapping["lane"] = lane
        if stalls is not None:
            mapping["stalls"] = stalls
        pipe.hset(job_key(id_), mapping=mapping)
        pipe.zadd(ACTIVE, {id_: lease})
        lane_of[id_], lease_of[id_], stalls_before[id_] = lane, lease, stalls

    for i in range(N_ACTIVE):
        lane = rng.choice(["", "", ""] + STALL_LANES)
        # most expired already; a third expire while the checks run
        lease = now - rng.randrange(1, 3_000) if rng.random() < 0.67 else now + rng.randrange(1, 1_200)
        add_active(f"j{i:05d}", lane, lease, rng.choice([None, 0, 1]))
    for i, lane in enumerate(["", "a", LIM_LANE, LIM_LANE, "b"]):
        id_ = f"keep{i}"
        add_active(id_, lane, FAR, None)
        keep.append(id_)
    ghosts = [f"ghost{i:03d}" for i in range(N_STALL_GHOSTS)]
    for g in ghosts:
        pipe.zadd(ACTIVE, {g: now - rng.randrange(1, 3_000)})
    pipe.execute()

    # lane control consistent with `active` (I4); lane b is already in the ring with
    # ready work of its own; lim is at its limit for the whole test
    for lane in STALL_LANES:
        n = sum(1 for i, ln in lane_of.items() if ln == lane)
        r.hset(ctl_key(lane), "active", n)
    r.hset(ctl_key(PAUSED_LANE), "paused", "1")
    r.hset(ctl_key(LIM_LANE), "limit", "2")
    r.rpush(lane_key("b"), "b-old-1", "b-old-2")
    r.hset(ctl_key("b"), "ring", "1")
    r.rpush(RING, "b")

    expiring = [i for i in lane_of if i not in keep]
    last_lease = max(lease_of[i] for i in expiring)
    n_checkers = 4
    batches = [7, 50, 7, 250]  # 250: a call of many EXISTS groups, one transaction on every server
    backends = backends_for(mode, n_checkers)
    groups = groups_for(mode, n_checkers)
    deadline = time.monotonic() + 60
    errors: list[str] = []
    recovered: list[list[str]] = [[] for _ in range(n_checkers)]
    dead: list[list[str]] = [[] for _ in range(n_checkers)]
    calls = [0] * n_checkers
    wrote = [0] * n_checkers
    gave_up = [0] * n_checkers  # calls that gave up (ContentionError)
    stop = threading.Event()
    monitor_snaps = 0

    def checker(k: int) -> None:
        c = emq.connect(server.url)
        try:
            while time.monotonic() < deadline:
                past_last = c.time_ms() > last_lease  # read before the call: no lease expires after it
                try:
                    rec, died = emq.stalled_check(c, Q, max_stalled=1, batch=batches[k], backend=backends[k], group=groups[k])
                except emq.ContentionError:
                    # Checkers race for the same members: a call whose selection
                    # others took before its watch is a new call (SPEC §9), and on a
                    # starved machine the batch-250 one, slowest to reach its watch,
                    # can lose 32 times in a row. It then writes nothing, which the
                    # checks below hold it to; it stays the exception (bounded below).
                    gave_up[k] += 1
                    continue
                calls[k] += 1
                wrote[k] += bool(rec or died) and backends[k] == "plan"
                recovered[k] += rec
                dead[k] += died
                if not rec and not died:
                    if past_last:
                        return
                    time.sleep(0.0005)
            errors.append(f"checker {k} did not finish within the time limit")
        except BaseException as e:  # noqa: BLE001 - a Rust panic too
            errors.append(f"checker {k}: {e!r}")
        finally:
            c.close()

    def monitor() -> None:
        """I4 (and never below 0), I2 and I3 at instants between sweeps."""
        nonlocal monitor_snaps
        mr = redis.Redis.from_url(server.url, decode_responses=True)
        try:
            while not stop.is_set():
                pipe = mr.pipeline(transaction=True)
                pipe.zrange(ACTIVE, 0, -1)
                pipe.lrange(RING, 0, -1)
                for lane in STALL_LANES:
                    pipe.hmget(ctl_key(lane), ["active", "ring"])
                    pipe.llen(lane_key(lane))
                got = pipe.execute()
                in_active, ring, rest = got[0], got[1], got[2:]
                counts = Counter(lane_of.get(i) for i in in_active)
                fields, lens = {}, {}
                for j, lane in enumerate(STALL_LANES):
                    act, ring_field = rest[2 * j]
                    fields[lane], lens[lane] = ring_field, rest[2 * j + 1]
                    act = int(act or 0)
                    assert act >= 0, f"mid-run: lane {lane!r} active = {act}"
                    assert act == counts[lane], f"mid-run: lane {lane!r} active field {act}, ids in active {counts[lane]} (I4)"
                # `lim` at its limit and `p` paused: a lane's servability as of this snapshot
                servable = {ln: STALL_SERVABLE[ln] for ln in STALL_LANES}
                check_ring(ring, fields, lens, servable, "mid-run")
                monitor_snaps += 1
                time.sleep(0.003)
        except AssertionError as e:
            errors.append(f"monitor: {e}")
        except BaseException as e:  # noqa: BLE001 - a Rust panic too
            errors.append(f"monitor: {e!r}")
        finally:
            mr.close()

    threads = [threading.Thread(target=checker, args=(k,)) for k in range(n_checkers)]
    mon = threading.Thread(target=monitor)
    r.config_resetstat()
    t0 = time.monotonic()
    mon.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    mon.join()
    end = server_ms(r)
    elapsed = time.monotonic() - t0
    assert not errors, "\n".join(errors)
    assert sum(gave_up) <= max(4, sum(calls) // 20), f"calls that gave up {gave_up} of {calls}"

    all_rec = [i for part in recovered for i in part]
    all_dead = [i for part in dead for i in part]
    both = Counter(all_rec) + Counter(all_dead)
    dups = {i: c for i, c in both.items() if c > 1}
    assert not dups, f"ids listed more than once across replies: {list(dups.items())[:10]}"
    want_dead = {i for i in expiring if stalls_before[i] == 1}
    want_rec = set(expiring) - want_dead
    assert set(all_rec) == want_rec, (sorted(want_rec - set(all_rec))[:10], sorted(set(all_rec) - want_rec)[:10])
    assert set(all_dead) == want_dead, (sorted(want_dead - set(all_dead))[:10], sorted(set(all_dead) - want_dead)[:10])
    # each reply lists its ids in `expired` order, so each thread's list is in (lease, id) order
    for k in range(n_checkers):
        for part in (recovered[k], dead[k]):
            keys = [(lease_of[i], i) for i in part]
            assert keys == sorted(keys), f"checker {k}'s replies are not in expired order"

    # `active` holds exactly the unexpired; ghosts gone and listed nowhere, no rows made
    assert sorted(s(x) for x in r.zrange(ACTIVE, 0, -1)) == sorted(keep)
    assert not set(ghosts) & set(both)
    assert r.exists(*[job_key(g) for g in ghosts]) == 0

    # pending and lanes hold exactly the recovered ids, each once, in (lease, id) order
    pending = [s(x) for x in r.lrange(PENDING, 0, -1)]
    lanes = {ln: [s(x) for x in r.lrange(lane_key(ln), 0, -1)] for ln in STALL_LANES}
    assert lanes["b"][:2] == ["b-old-1", "b-old-2"]
    lanes_new = {ln: (ids[2:] if ln == "b" else ids) for ln, ids in lanes.items()}
    assert Counter(pending) == Counter(i for i in want_rec if lane_of[i] == "")
    for lane, ids in lanes_new.items():
        assert Counter(ids) == Counter(i for i in want_rec if lane_of[i] == lane), lane
    for name, ids in [("pending", pending), *lanes_new.items()]:
        keys = [(lease_of[i], i) for i in ids]
        assert keys == sorted(keys), f"{name} is not in (lease, id) order"

    # dead holds exactly the dead, scored within the run
    dead_z = {s(m): sc for m, sc in r.zrange(DEAD, 0, -1, withscores=True)}
    assert set(dead_z) == want_dead
    assert all(now <= sc <= end for sc in dead_z.values())

    # the rows
    ids = sorted(expiring)
    pipe = r.pipeline(transaction=False)
    for i in ids:
        pipe.hgetall(job_key(i))
    for i, row in zip(ids, pipe.execute()):
        row = {s(k): s(v) for k, v in row.items()}
        want_stalls = str((stalls_before[i] or 0) + 1)
        assert "token" not in row and "lease" not in row, (i, row)
        assert row.get("stalls") == want_stalls, (i, row)
        if i in want_dead:
            assert row["state"] == "dead" and row.get("error") == "stalled", (i, row)
        else:
            assert row["state"] == "pending" and "error" not in row, (i, row)
        assert row.get("lane", "") == lane_of[i]
    for i in keep:
        assert s(r.hget(job_key(i), "state")) == "active"

    # I4 at the end: each lane's active field = its ids still in `active`
    for lane in STALL_LANES:
        want = sum(1 for i in keep if lane_of[i] == lane)
        assert int(r.hget(ctl_key(lane), "active") or 0) == want, lane
    # I2/I3 at the end: a and c joined the ring once; b stayed once; p and lim never
    ring = [s(x) for x in r.lrange(RING, 0, -1)]
    fields = {ln: s(r.hget(ctl_key(ln), "ring")) for ln in STALL_LANES}
    check_ring(ring, fields, {ln: len(v) for ln, v in lanes.items()}, STALL_SERVABLE, "end")
    assert sorted(ring) == ["a", "b", "c"], ring
    assert lanes_new[PAUSED_LANE] and lanes_new[LIM_LANE], "the test meant to recover rows into unservable lanes"
    assert r.llen(WAKE) <= WAKE_MAX
    assert monitor_snaps > 0
    st = exec_stats(r)
    if mode != "lua":
        assert st["unwatch"] > 0, "no plan call ever dropped a selection: the race this test is for did not happen"
    print(
        f"\n[{mode}] {len(expiring)} expiring ids in {elapsed:.2f}s, calls {calls}, gave up {gave_up}, "
        f"{len(all_rec)} recovered, {len(all_dead)} dead, {monitor_snaps} snapshots, EXEC calls "
        f"{st['exec'] - monitor_snaps} for {sum(wrote)} plan calls that wrote, UNWATCH calls {st['unwatch']}"
    )

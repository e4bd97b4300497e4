"""The two sweeps (SPEC §5, §6) in plain redis-py: the same plan as the Rust core
(rust/emq-plan/src/sweep/), written the way a Python programmer would.

The conversation, per call (one guarded transaction):

1. one `transaction=False` pipeline: `TIME`, `ZRANGE zset 0 batch-1 WITHSCORES`;
   members scored above the clock reading are cut;
2. `pipe.watch(*rows)` on the transaction pipeline (a promote: `P promotions`,
   read beside the selection in 1), then one `transaction=False` pipeline:
   `ZRANGE zset 0 k-1+16 WITHSCORES` for the k ids selected (one gone or scored
   anew: a new call; a promote: `GET P promotions` again, changed: a new call),
   `HGET row lane` (promote) or `HMGET row lane stalls` (stalled check) per id,
   one `EXISTS` per group of 32 rows, `LLEN` of pending, ring, wake (and
   `ZCARD dead` for the stalled check), which also check their types;
3. only when a group's `EXISTS` count cannot tell its ghosts from its rows with
   none of the fields: `TYPE` of each of those;
4. only when lane rows were selected: `pipe.watch(*lanectls)`, then `HMGET lanectl
   paused limit active ring` and `LLEN lane` per lane; for the stalled check, a
   lane left out of the ring only because its list is empty (its rows all die):
   `pipe.watch(lane list)` and `LLEN` again, any change a new call;
5. `pipe.multi()`, the same writes as the plan, in the same order, `execute()`; a
   `WatchError` starts a new call after a jittered pause, at most 32 times.

The watch lives on the transaction pipeline's connection; the reads go out on
another pooled connection after the `WATCH` has been answered, so anything that
changes a watched key after the reads began aborts the `EXEC`, as in the plan.

    python benches/plain.py --check    # compare with backend="plan" and "lua"
"""

from __future__ import annotations

import math
import random
import time

import redis
from redis.exceptions import ResponseError, WatchError

from emq import _core

WAKE_MAX = _core.WAKE_MAX
MAX_ATTEMPTS = _core.MAX_ATTEMPTS
GROUP = _core.ROW_GROUP  # rows per EXISTS (rust/emq-plan/src/protocol/rows.rs)
SLACK = _core.RE_READ_SLACK  # members past the selection that its re-read reads (rust/emq-plan/src/protocol/guard.rs)
CTL_FIELDS = ("paused", "limit", "active", "ring")
LEASE_MARK_KEEP_MS = _core.LEASE_MARK_KEEP_MS  # how long a lease mark lives (rust/emq-plan/src/protocol/guard.rs)


class LayoutError(Exception):
    pass


class ContentionError(Exception):
    pass


class _Conflict(Exception):
    """What the plan read before its watch changed: a new call."""


def _prefix(queue: str) -> bytes:
    return b"emq:{" + queue.encode() + b"}:"


def _wrongtype(v) -> bool:
    return isinstance(v, ResponseError) and str(v).startswith("WRONGTYPE")


def _check(v, key: bytes):
    if _wrongtype(v):
        raise LayoutError(f"{key.decode(errors='replace')} has the wrong type")
    if isinstance(v, Exception):
        raise v
    return v


def _still_selected(head: list, ids: list, scores: list) -> bool:
    """The selected members are still in the head, in order, with their scores;
    members between them joined since and are left for the next call."""
    it = iter(head)
    for i, s in zip(ids, scores):
        for member, score in it:
            if member == i:
                if score != s:
                    return False
                break
        else:
            return False
    return True


def _int(v: bytes | None) -> int | None:
    """A stored decimal integer, as the plans read it: `-?` and 1 to 15 digits."""
    if v is None:
        return None
    d = v[1:] if v[:1] == b"-" else v
    if not d or len(d) > 15 or not d.isdigit():
        return None
    return int(v)


def _serves(ctl: dict) -> bool:
    """A lane can be served: not paused, and no limit or fewer active than it."""
    return not ctl["paused"] and (ctl["limit"] <= 0 or ctl["active"] < ctl["limit"])


class _Offers:
    """offer(L) for the lanes a plan touches, the wake tokens, the trim of wake."""

    def __init__(self):
        self.ring: list[bytes] = []
        self.tokens: list[bytes] = []

    def offer(self, lane: bytes, length: int, ctl: dict) -> None:
        if length > 0 and _serves(ctl) and not ctl["ring"] and lane not in self.ring:
            self.ring.append(lane)
            self.tokens.append(lane)

    def write(self, tx, p: bytes) -> None:
        for lane in self.ring:
            tx.hset(p + b"lanectl:" + lane, "ring", "1")
        if self.ring:
            tx.rpush(p + b"ring", *self.ring)
        if self.tokens:
            tx.rpush(p + b"wake", *self.tokens)
        tx.ltrim(p + b"wake", -WAKE_MAX, -1)


def _ctl(fields: list) -> dict:
    paused, limit, active, ring = fields
    return {
        "paused": paused == b"1",
        "limit": _int(limit) or 0,
        "active": _int(active) or 0,
        "ring": ring == b"1",
    }


def _lease_second(score: float) -> int:
    """The second a lease ends in (SPEC §9's lease marks); below 0: second 0."""
    return 0 if score <= 0 else math.floor(score / _core.LEASE_MARK_MS)


def _stalled_watch(p: bytes, ids: list, scores: list, now: int) -> list:
    """The marks of the seconds wholly past by `now` that the leases ended in,
    and the rows of the members of the current second (SPEC §9)."""
    watch: list = []
    for i, sc in zip(ids, scores):
        second = _lease_second(sc)
        if (second + 1) * _core.LEASE_MARK_MS <= now + 1:
            key = p + b"leases:%d" % second
            if not watch or watch[-1] != key:
                watch.append(key)
        else:
            watch.append(p + b"job:" + i)
    return watch


def _attempt(r: redis.Redis, p: bytes, stalled: bool, batch: int, max_stalled: int | None):
    """One call: one guarded transaction. Raises _Conflict or WatchError when it
    must start again."""
    zset = p + (b"active" if stalled else b"schedule")

    # 1. The clock, then the selection; members above the clock are cut.
    rd = r.pipeline(transaction=False)
    rd.time()
    rd.zrange(zset, 0, batch - 1, withscores=True)
    if not stalled:
        rd.get(p + b"promotions")
    t, members, *promotions = rd.execute(raise_on_error=False)
    now = int(t[0]) * 1000 + int(t[1]) // 1000
    ids, scores = [], []
    for member, score in _check(members, zset):
        if score > now:
            break
        ids.append(member)
        scores.append(score)
    if not ids:
        return ([], []) if stalled else 0
    rows = [p + b"job:" + i for i in ids]

    with r.pipeline() as tx:
        # 2. Watch the lease marks (a promote: P promotions), then read again what was
        # read before the watch (a promote: P promotions, unchanged if no promote ran).
        tx.watch(*(_stalled_watch(p, ids, scores, now) if stalled else [p + b"promotions"]))
        rd = r.pipeline(transaction=False)
        if stalled:
            rd.zrange(zset, 0, len(ids) - 1 + SLACK, withscores=True)
        else:
            rd.get(p + b"promotions")
        for k in rows:
            if stalled:
                rd.hmget(k, ("lane", "stalls"))
            else:
                rd.hget(k, "lane")
        for g in range(0, len(rows), GROUP):
            rd.exists(*rows[g : g + GROUP])
        rd.llen(p + b"pending")
        rd.llen(p + b"ring")
        rd.llen(p + b"wake")
        if stalled:
            rd.zcard(p + b"dead")
        rep = rd.execute(raise_on_error=False)
        n = len(ids)
        if not (_still_selected(_check(rep[0], zset), ids, scores) if stalled else [rep[0]] == promotions):
            raise _Conflict()
        live: list[list | None] = []  # [lane, stalls] per id, None for a ghost
        groups = (n + GROUP - 1) // GROUP
        unsure = []
        for g in range(groups):
            group_unsure, known_live = [], 0
            for i in range(g * GROUP, min(n, (g + 1) * GROUP)):
                f = _check(rep[1 + i], rows[i]) if stalled else [_check(rep[1 + i], rows[i])]
                if all(v is None for v in f):
                    group_unsure.append(i)  # a ghost, or a hash with none of the fields
                else:
                    known_live += 1
                live.append([f[0], (_int(f[1]) or 0) if stalled else 0])
            k = rep[1 + n + g] - known_live
            if k == 0:
                for i in group_unsure:
                    live[i] = None
            elif k != len(group_unsure):
                unsure += group_unsure
        t = 1 + n + groups
        pending_ok, ring_ok, wake_ok = (not _wrongtype(x) for x in rep[t : t + 3])
        dead_ok = not (stalled and _wrongtype(rep[t + 3]))
        if unsure:
            # 3. Some of a group's unsure rows exist: ask each its type.
            rd = r.pipeline(transaction=False)
            for i in unsure:
                rd.type(rows[i])
            for i, t in zip(unsure, rd.execute()):
                if t == b"none":
                    live[i] = None
                elif t != b"hash":
                    raise LayoutError(f"{rows[i].decode(errors='replace')} has the wrong type")

        # 4. The lanes: watch their control, read it and the lane's length.
        lanes: dict[bytes, dict] = {}
        for row in live:
            if row is not None and row[0] is not None and row[0] not in lanes:
                lanes[row[0]] = {}
        if lanes:
            tx.watch(*(p + b"lanectl:" + name for name in lanes))
            rd = r.pipeline(transaction=False)
            for name in lanes:
                rd.hmget(p + b"lanectl:" + name, CTL_FIELDS)
                rd.llen(p + b"lane:" + name)
            rep = rd.execute(raise_on_error=False)
            for j, name in enumerate(lanes):
                ctl = _ctl(_check(rep[2 * j], p + b"lanectl:" + name))
                ctl["len"] = _check(rep[2 * j + 1], p + b"lane:" + name)
                lanes[name] = ctl

        # 5. The writes, under the watch.
        offers = _Offers()
        if not stalled:
            flat = [i for i, row in zip(ids, live) if row is not None and row[0] is None]
            by_lane: dict[bytes, list] = {}
            for i, row in zip(ids, live):
                if row is not None and row[0] is not None:
                    by_lane.setdefault(row[0], []).append(i)
            for name, lids in by_lane.items():
                offers.offer(name, lanes[name]["len"] + len(lids), lanes[name])
            if (flat and not pending_ok) or (offers.ring and not ring_ok) or not wake_ok:
                raise LayoutError("EMQ.PROMOTE: pending, ring or wake has the wrong type")
            tx.multi()
            tx.zrem(zset, *ids)
            if flat:
                tx.rpush(p + b"pending", *flat)
                offers.tokens.append(b"")
            for name, lids in by_lane.items():
                tx.rpush(p + b"lane:" + name, *lids)
            for k, row in zip(rows, live):
                if row is not None:
                    tx.hset(k, "state", "pending")
            offers.write(tx, p)
            tx.incr(p + b"promotions")
            return tx.execute()[0]

        recovered, dead, flat = [], [], []
        by_lane = {}  # lane -> [recovered ids, rows that left active]
        row_writes = []
        for i, k, row in zip(ids, rows, live):
            if row is None:
                continue
            lane, st = row[0], row[1] + 1
            dies = max_stalled is not None and st > max_stalled
            if dies:
                row_writes.append((k, {"state": "dead", "stalls": st, "error": "stalled"}))
                dead.append(i)
            else:
                row_writes.append((k, {"state": "pending", "stalls": st}))
                recovered.append(i)
            if lane is None:
                if not dies:
                    flat.append(i)
            else:
                entry = by_lane.setdefault(lane, [[], 0])
                entry[1] += 1
                if not dies:
                    entry[0].append(i)
        actives, relied = {}, []
        for name, (lids, left) in by_lane.items():
            ctl = dict(lanes[name])
            ctl["active"] = max(ctl["active"] - left, 0)
            actives[name] = ctl["active"]
            if ctl["len"] + len(lids) <= 0 and _serves(ctl) and not ctl["ring"]:
                relied.append(name)  # out of the ring only because its list is empty
            offers.offer(name, ctl["len"] + len(lids), ctl)
        if relied:
            # 4b. Watch those lane lists and read them again: still empty?
            tx.watch(*(p + b"lane:" + name for name in relied))
            rd = r.pipeline(transaction=False)
            for name in relied:
                rd.llen(p + b"lane:" + name)
            if any(n != 0 for n in rd.execute(raise_on_error=False)):
                raise _Conflict()
        if (flat and not pending_ok) or (dead and not dead_ok) or (offers.ring and not ring_ok) or not wake_ok:
            raise LayoutError("EMQ.STALLED.CHECK: pending, dead, ring or wake has the wrong type")
        tx.multi()
        tx.zrem(zset, *ids)
        for second in dict.fromkeys(_lease_second(sc) for sc in scores):
            tx.set(p + b"leases:%d" % second, "1", px=LEASE_MARK_KEEP_MS)
        if dead:
            tx.zadd(p + b"dead", {i: now for i in dead})
        for k, m in row_writes:
            tx.hset(k, mapping=m)
            tx.hdel(k, "token", "lease")
        if flat:
            tx.rpush(p + b"pending", *flat)
            offers.tokens.append(b"")
        for name, (lids, _) in by_lane.items():
            if lids:
                tx.rpush(p + b"lane:" + name, *lids)
            tx.hset(p + b"lanectl:" + name, "active", actives[name])
        offers.write(tx, p)
        tx.execute()
        return [i.decode() for i in recovered], [i.decode() for i in dead]


def _run(r: redis.Redis, queue: str, stalled: bool, batch: int, max_stalled: int | None):
    """A call, started again after a jittered pause while it conflicts."""
    if not isinstance(batch, int) or batch <= 0:
        raise ValueError("batch must be a positive integer")
    p = _prefix(queue)
    for attempt in range(MAX_ATTEMPTS):
        try:
            return _attempt(r, p, stalled, batch, max_stalled)
        except (WatchError, _Conflict):
            time.sleep(random.uniform(0, min(100e-6 * 2 ** min(attempt, 8), 0.02)))
    raise ContentionError(f"gave up after {MAX_ATTEMPTS} attempts; nothing was written")


def promote(r: redis.Redis, queue: str, *, batch: int = 100) -> int:
    """PROMOTE (SPEC §5): ids taken out of schedule, ghosts included."""
    return _run(r, queue, False, batch, None)


def stalled_check(r: redis.Redis, queue: str, *, max_stalled: int | None = 1, batch: int = 100) -> tuple[list[str], list[str]]:
    """STALLED CHECK (SPEC §6): (recovered ids, dead ids)."""
    return _run(r, queue, True, batch, max_stalled)


# --- the self-check: the same state, the same calls, the same keyspace ---------


def _dump(r: redis.Redis, lo: int, hi: int) -> dict:
    """The whole keyspace; `dead` scores between lo and hi (a call's clock) read 'now'."""
    out = {}
    for k in sorted(r.scan_iter(count=1000)):
        t = r.type(k).decode()
        if t == "hash":
            v = sorted(r.hgetall(k).items())
        elif t == "list":
            v = r.lrange(k, 0, -1)
        elif t == "zset":
            v = [(m, "now" if k.endswith(b":dead") and lo <= s <= hi else s) for m, s in r.zrange(k, 0, -1, withscores=True)]
            if k.endswith(b":dead"):  # the calls' clocks differ by a few ms between runs
                v.sort(key=lambda ms: (str(ms[1]), ms[0]))
        elif t == "string":
            v = r.get(k)
        else:
            v = t
        out[k] = (t, v)
    return out


def _state_promote(r: redis.Redis, q: str, now: int) -> list:
    p = "emq:{" + q + "}:"
    past, later = now - 1_000_000, now + 10**9
    z = {}
    # calls of 3, 4, 6 then 100: ghosts only, flat only, a mix of all, the rest
    order = ["g0", "g1", "g2", "f0", "f1", "f2", "f3", "g3", "f4", "a1", "b1", "g4", "c1"]
    order += ["d1", "e1", "f5", "a2", "a3", "e2", "b2", "f6", "g5", "d2", "c2"]
    order += [f"f{i}" for i in range(7, 30)] + [f"e{i}" for i in range(3, 10)]
    for n, i in enumerate(order):
        z[i] = past + n * 7
        if i[0] == "g":
            continue
        fields = {"state": "scheduled", "data": "x" * 8, "attempts": "0", "due": z[i]}
        if i[0] != "f":
            fields["lane"] = "lane-" + i[0]
        r.hset(p + "job:" + i, mapping=fields)
    for i in ("n0", "n1", "n2"):
        z[i] = later
        r.hset(p + "job:" + i, mapping={"state": "scheduled", "lane": "lane-a"})
    z["fsame1"] = z["fsame2"] = past + 500  # ties: (score, member) order
    for i in ("fsame1", "fsame2"):
        r.hset(p + "job:" + i, mapping={"state": "scheduled"})
    z["h0"] = z["g3"] + 1  # a row with none of the fields read, next to ghosts
    r.hset(p + "job:h0", "data", "only data")
    r.zadd(p + "schedule", z)
    r.rpush(p + "pending", "old")
    r.hset(p + "lanectl:lane-b", mapping={"ring": "1"})
    r.rpush(p + "ring", "lane-b")
    r.rpush(p + "lane:lane-b", "b0")
    r.hset(p + "lanectl:lane-c", mapping={"paused": "1"})
    r.hset(p + "lanectl:lane-d", mapping={"limit": "2", "active": "2"})
    r.hset(p + "lanectl:lane-e", mapping={"limit": "3", "active": "1", "ring": "0"})
    r.rpush(p + "wake", *[f"t{i}" for i in range(60)])
    return [("promote", 3), ("promote", 4), ("promote", 6), ("promote", 5), ("promote", 100), ("promote", 100)]


def _state_stalled(r: redis.Redis, q: str, now: int) -> list:
    p = "emq:{" + q + "}:"
    past, later = now - 1_000_000, now + 10**9
    z = {}
    order = ["g0", "g1", "f0", "f1", "s0", "g2", "a0", "b0", "f2", "c0", "d0", "s1", "e0", "a1"]
    order += [f"f{i}" for i in range(3, 20)] + ["d1", "s2", "b1", "g3", "e1", "c1", "a2"]
    active_per_lane: dict[str, int] = {}
    for n, i in enumerate(order):
        z[i] = past + n * 3
        if i[0] == "g":
            continue
        fields = {"state": "active", "data": "y", "attempts": "1", "token": f"tok-{i}", "lease": "30000"}
        if i[0] == "s":
            fields["stalls"] = "1"  # dies with max_stalled=1
        if i[0] in "abcde":
            fields["lane"] = "lane-" + i[0]
            active_per_lane[i[0]] = active_per_lane.get(i[0], 0) + 1
            if i == "a1":
                fields["stalls"] = "5"
        if i == "f5":
            fields["stalls"] = "1000000000000000"  # 16 digits: read as absent
        if i == "f6":
            fields["stalls"] = "999999999999998"  # 15 digits: read
        r.hset(p + "job:" + i, mapping=fields)
    for i in ("n0", "n1"):
        z[i] = later
        r.hset(p + "job:" + i, mapping={"state": "active", "lane": "lane-a", "token": "t", "lease": "1"})
        active_per_lane["a"] += 1
    r.zadd(p + "active", z)
    r.hset(p + "lanectl:lane-a", mapping={"active": active_per_lane["a"]})
    r.hset(p + "lanectl:lane-b", mapping={"active": active_per_lane["b"], "ring": "1"})
    r.rpush(p + "ring", "lane-b")
    r.rpush(p + "lane:lane-b", "bx")
    r.hset(p + "lanectl:lane-c", mapping={"active": active_per_lane["c"], "paused": "1"})
    # at its limit until one of its ids leaves active
    r.hset(p + "lanectl:lane-d", mapping={"active": active_per_lane["d"], "limit": active_per_lane["d"]})
    r.hset(p + "lanectl:lane-e", mapping={"active": "0"})  # already wrong: never below 0
    r.zadd(p + "dead", {"old": 5})
    r.rpush(p + "wake", *[f"t{i}" for i in range(WAKE_MAX - 1)])
    return [("stalled", 2), ("stalled", 5), ("stalled", 7), ("stalled", 100), ("stalled", 100)]


def _state_big(r: redis.Redis, q: str, now: int) -> list:
    """Hundreds of rows per call: flat, lanes (one at its limit), ghosts, stalls."""
    p = "emq:{" + q + "}:"
    past = now - 1_000_000
    sched, act = {}, {}
    for n in range(450):
        i = f"b{n:04d}"
        if n % 17 == 5:
            sched[i] = act[i] = past + n  # a ghost in both
            continue
        fields = {"state": "scheduled", "data": "z"}
        if n % 3 == 1:
            fields["lane"] = f"L{n % 4}"
        if n % 11 == 0:
            fields["stalls"] = "2"
        if n < 300:
            sched[i] = past + n
        else:
            act[i] = past + n
            fields.update(state="active", token="t", lease="1")
        r.hset(p + "job:" + i, mapping=fields)
    r.zadd(p + "schedule", sched)
    r.zadd(p + "active", act)
    r.hset(p + "lanectl:L1", mapping={"limit": "1", "active": "1"})
    r.hset(p + "lanectl:L2", mapping={"active": "50"})
    return [("promote", 250), ("promote", 1000), ("stalled", 120), ("stalled", 1000), ("promote", 1000)]


def _state_layout(r: redis.Redis, q: str, now: int) -> list:
    p = "emq:{" + q + "}:"
    r.zadd(p + "schedule", {"f0": now - 1000, "f1": now - 999, "x": now - 998})
    r.hset(p + "job:f0", "state", "scheduled")
    r.hset(p + "job:f1", "state", "scheduled")
    r.set(p + "pending", "not a list")
    r.zadd(p + "active", {"f0": now - 1000, "s": now - 500})
    r.hset(p + "job:s", "state", "active")
    r.set(p + "job:x", "a string row")
    return [("promote", 2), ("promote", 10), ("stalled", 10)]


def check() -> int:
    import shutil

    import emq
    from emq.embedded import Server

    impls = ("plan", "lua", "plain")
    scenarios = [
        ("promote", _state_promote, None),
        ("stalled, max_stalled=1", _state_stalled, 1),
        ("stalled, max_stalled=None", _state_stalled, None),
        ("stalled, max_stalled=0", _state_stalled, 0),
        ("layout errors", _state_layout, 1),
        ("450 rows, batch 250 and 1000", _state_big, 2),
    ]
    binaries = {"valkey": None, "redis": shutil.which("redis-server")}
    failures = 0
    for server_name, binary in binaries.items():
        if server_name == "redis" and not binary:
            print("redis-server not found: skipped")
            continue
        server = Server(binary).start()
        try:
            r = redis.Redis.from_url(server.url)
            c = emq.connect(server.url)
            for title, fill, max_stalled in scenarios:
                results = {}
                now = r.time()[0] * 1000  # one base for every run of this scenario
                for impl in impls:
                    r.flushall()
                    q = "chk"
                    calls = fill(r, q, now)
                    before = _dump(r, 0, -1)
                    lo = r.time()[0] * 1000
                    r.config_resetstat()
                    replies = []
                    for kind, batch in calls:
                        try:
                            if impl == "plain":
                                if kind == "promote":
                                    out = promote(r, q, batch=batch)
                                else:
                                    out = stalled_check(r, q, max_stalled=max_stalled, batch=batch)
                                    out = (list(out[0]), list(out[1]))
                            elif kind == "promote":
                                out = emq.promote(c, q, batch=batch, backend=impl)
                            else:
                                out = emq.stalled_check(c, q, max_stalled=max_stalled, batch=batch, backend=impl)
                                out = (list(out[0]), list(out[1]))
                        except (emq.LayoutError, LayoutError):
                            out = ("layout error", _dump(r, 0, -1) == before)
                            before = _dump(r, 0, -1)
                        replies.append(out)
                    calls = {k: v["calls"] for k, v in r.info("commandstats").items()}
                    # the connection handshake of a new pooled connection is not part of a sweep
                    for k in (
                        "cmdstat_info",
                        "cmdstat_config|resetstat",
                        "cmdstat_evalsha",
                        "cmdstat_script|load",
                        "cmdstat_hello",
                        "cmdstat_client|setinfo",
                    ):
                        calls.pop(k, None)
                    hi = r.time()[0] * 1000 + 1000
                    results[impl] = (replies, _dump(r, lo, hi), calls)
                ref_replies, ref_keys, ref_calls = results["plan"]
                for impl in impls[1:]:
                    replies, keys, calls = results[impl]
                    ok = replies == ref_replies and keys == ref_keys
                    same_cmds = calls == ref_calls
                    print(
                        f"{server_name:6} {title:28} plan vs {impl:5}: {'same' if ok else 'DIFFERENT'}"
                        + ("" if impl == "lua" else f", commands sent {'same' if same_cmds else 'DIFFERENT'}")
                    )
                    if impl != "lua" and not same_cmds:
                        failures += 1
                        print(f"   commands plan:  {sorted(ref_calls.items())}\n   commands {impl}: {sorted(calls.items())}")
                    if not ok:
                        failures += 1
                        if replies != ref_replies:
                            print("   replies plan:", ref_replies, f"\n   replies {impl}:", replies)
                        for k in sorted(set(keys) | set(ref_keys)):
                            if keys.get(k) != ref_keys.get(k):
                                print(f"   {k!r}\n     plan:  {ref_keys.get(k)}\n     {impl}: {keys.get(k)}")
                print(f"{'':6} {'':28} replies: {ref_replies if len(str(ref_replies)) < 300 else str(ref_replies)[:300] + '…'}")
            c.close()
            r.close()
        finally:
            server.stop()
    print("check:", "every implementation agrees" if not failures else f"{failures} differences")
    return 1 if failures else 0


if __name__ == "__main__":
    import argparse
    import sys

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare with the plan and Lua backends on fixed states")
    args = ap.parse_args()
    if not args.check:
        ap.print_help()
        sys.exit(2)
    sys.exit(check())

"""The job's operations (SPEC §7) against a plain Python model of the queue.

A hypothesis `RuleBasedStateMachine` drives a real server (both of the fixture's
servers) and a model side by side: add (due now or later), claim, extend,
complete, fail (retry at once, much later, or the default backoff), promote,
stalled_check, pause/resume/limit, ghosts, late workers holding stale tokens,
identical re-adds (a retry of an add that landed: its digest matches) and
re-adds of another job under a taken id, and the retention policy
(`Queue.set_retention`: done rows deleted at once, kept with an expiry and
listed in `done`, or kept forever; `dead` trimmed by count and by age); and
SPEC §13: results and errors' types written at settle, a job's own `keep`,
unique adds, progress (only by the holder), cancels of waiting and running
jobs (a running one cancelled when it is settled or its lease runs out, never
retried), waiters registered with `watch` and the ids their inboxes get, and
the requests to stop that workers read.
After every step the replies must have matched the model, the whole queue
keyspace must equal the model, and the invariants I1 to I5 (SPEC §3) must hold
on the real keyspace (`assert_invariants`, also used by the other test_jobs*
modules).

Time is never slept. Jobs due "later" are added with a delay of ~11 days and
leases are ~11 days long; "time passes" is modelled by rewriting the `schedule`
score (and row `due`) or the `active` score (and row `lease`) of chosen ids to
small past values (1000, 1001, …: unique, so the sweeps' (score, member) order is
the model's). A fail with the default backoff (due 0.5 s to a few seconds later)
is checked against the server clock and then moved ~11 days out, so that real
time passing during the run cannot make it due behind the model's back. The same
rewriting ages `done` and `dead` entries: a done entry moved into the past is
dropped from the index by the next COMPLETE that keeps rows for a while (its row
keeps its expiry, ~10 minutes or more away); a dead entry moved into the past is
due for a trim by age. A dead entry's score is read back after the call that
wrote it (it is the call's clock reading), and before a call that may kill, the
test waits for the server's clock to pass every score in `dead` (under a
millisecond), so the new entries sort after the old ones, as the model assumes.

A state machine cannot take pytest fixtures: `test_jobs_state_machine` takes
`server` and builds the machine class around its URL (`machine_for`). Settings
(80 examples of up to 60 steps) keep it to ~25 s a server on an idle 2-core
machine (~10 s before the retention rules and the `work` rule, which claims and
settles a few jobs a step), and within a few minutes when the machine is busy.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict

import pytest
import redis
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test

import emq

WAKE_MAX = emq._core.WAKE_MAX
FAR = 1_000_000_000  # ms: "later" (about 11 days): never comes during a test
FAR_S = FAR / 1000  # the same in seconds, as emq takes it
LANES = ["A", "B", "C"]
Q = "model"
PREFIX = f"emq:{{{Q}}}:"


# ---------------------------------------------------------------------------
# Helpers shared by the test_jobs* modules
# ---------------------------------------------------------------------------


def s(b) -> str:
    return b.decode() if isinstance(b, (bytes, bytearray)) else b


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def lrange(r, key) -> list[str]:
    return [x.decode() for x in r.lrange(key, 0, -1)]


def _glob(text: str) -> str:
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


def digest(
    data: bytes, lane: str | None, max_attempts: int, when: tuple[str, int], keep: int | None = None, unique: tuple[str, int] | None = None
) -> str:
    """ADD's digest of a request (rust/emq-plan/src/jobs/add.rs), computed apart:
    `when` is ("D", delay in ms) or ("A", due time in ms), as given; `keep` (ms)
    and `unique` (key, window ms) only when given."""
    buf = b"emq.add.v1" + b"d%d:" % len(data) + data
    if lane is None:
        buf += b"n"
    else:
        lb = lane.encode()
        buf += b"l%d:" % len(lb) + lb
    buf += b"m%d;" % max_attempts + when[0].encode() + b"%d;" % when[1]
    if keep is not None:
        buf += b"k%d;" % keep
    if unique is not None:
        kb = unique[0].encode()
        buf += b"u%d:" % len(kb) + kb + b"w%d;" % unique[1]
    return hashlib.sha1(buf).hexdigest()[:32]


def snapshot(r: redis.Redis) -> dict:
    """Every key of the database with its type and whole value (and whether it
    has a TTL): two equal snapshots mean nothing was written."""
    out = {}
    for k in sorted(r.scan_iter(count=1000)):
        t = s(r.type(k))
        if t == "string":
            v = r.get(k)
        elif t == "list":
            v = tuple(r.lrange(k, 0, -1))
        elif t == "hash":
            v = tuple(sorted(r.hgetall(k).items()))
        elif t == "zset":
            v = tuple(r.zrange(k, 0, -1, withscores=True))
        elif t == "set":
            v = tuple(sorted(r.smembers(k)))
        else:
            v = r.dump(k)
        out[s(k)] = (t, v, r.ttl(k) >= 0)
    return out


def read_queue(r: redis.Redis, prefix: str) -> dict:
    """The queue's keyspace, decoded: lists, zsets (id -> score), lane lists and
    controls by lane name, rows by id."""
    P = prefix
    keys = sorted(s(k) for k in r.scan_iter(match=_glob(P) + "*", count=1000))
    q = {
        "schedule": {s(m): int(sc) for m, sc in r.zrange(P + "schedule", 0, -1, withscores=True)},
        "pending": [s(x) for x in r.lrange(P + "pending", 0, -1)],
        "active": {s(m): int(sc) for m, sc in r.zrange(P + "active", 0, -1, withscores=True)},
        "dead": {s(m): int(sc) for m, sc in r.zrange(P + "dead", 0, -1, withscores=True)},
        "done": {s(m): int(sc) for m, sc in r.zrange(P + "done", 0, -1, withscores=True)},
        "cancelled": {s(m): int(sc) for m, sc in r.zrange(P + "cancelled", 0, -1, withscores=True)},
        "cancels": {s(m) for m in r.zrange(P + "cancels", 0, -1)},
        "inboxes": {},
        "uniques": {},
        "retention": {s(f): s(v) for f, v in r.hgetall(P + "retention").items()},
        "expiring": set(),
        "ring": [s(x) for x in r.lrange(P + "ring", 0, -1)],
        "wake": [s(x) for x in r.lrange(P + "wake", 0, -1)],
        "lanes": {},
        "ctl": {},
        "rows": {},
        "keys": keys,
    }
    for k in keys:
        if k.startswith(P + "lane:"):
            q["lanes"][k[len(P + "lane:") :]] = [s(x) for x in r.lrange(k, 0, -1)]
        elif k.startswith(P + "lanectl:"):
            q["ctl"][k[len(P + "lanectl:") :]] = {s(f): s(v) for f, v in r.hgetall(k).items()}
        elif k.startswith(P + "inbox:"):
            q["inboxes"][k[len(P + "inbox:") :]] = [s(x) for x in r.lrange(k, 0, -1)]
        elif k.startswith(P + "unique:"):
            q["uniques"][k[len(P + "unique:") :]] = s(r.get(k))
        elif k.startswith(P + "job:"):
            row = r.hgetall(k)
            # data, error, result, progress and traceback are opaque bytes; the other fields are text
            opaque = (b"data", b"error", b"result", b"progress", b"traceback")
            q["rows"][k[len(P + "job:") :]] = {s(f): (v if f in opaque else s(v)) for f, v in row.items()}
            if r.pttl(k) >= 0:
                q["expiring"].add(k[len(P + "job:") :])
    return q


def _int_field(v) -> int | None:
    if v is None:
        return None
    digits = v[1:] if v.startswith("-") else v
    return int(v) if digits.isdigit() and len(digits) <= 18 else None


def can_serve(ctl: dict) -> bool:
    """SPEC §2: not paused, and no limit or fewer active than the limit."""
    limit = _int_field(ctl.get("limit")) or 0
    active = _int_field(ctl.get("active")) or 0
    return ctl.get("paused") != "1" and (limit <= 0 or active < limit)


def assert_invariants(r: redis.Redis, prefix: str, *, where: str = "") -> dict:
    """I1 to I5 (SPEC §3) on the real keyspace of one queue; returns what it read.

    I1: each id in at most one of schedule, pending, a lane list, active, dead, and
    its row's state names that place (a lane list only for a row of that lane); a
    row that is not done or cancelled is in its place (none lost), a done or
    cancelled row in none of them (only in `done` or `cancelled`, while it is
    kept). Ghosts (ids without a row) aside; an id in `done` has a done row or
    none (it expired), an id in `cancelled` a cancelled row or none. Only done and
    cancelled rows expire.
    I2: a lane's `ring` field is 1 exactly when it is in the ring, then once.
    I3: a non-empty lane that can be served is in the ring.
    I4: a lane's `active` field = the number of its ids in `active`.
    I5, as far as a snapshot shows it: an active row's `lease` is its score in
    `active` and it holds a token; a scheduled row's `due` is its score in
    `schedule`.
    """
    q = read_queue(r, prefix)
    at = f" ({where})" if where else ""
    rows = q["rows"]
    places: dict[str, list[tuple[str, str | None]]] = defaultdict(list)
    for id_ in q["schedule"]:
        places[id_].append(("schedule", None))
    for id_ in q["pending"]:
        places[id_].append(("pending", None))
    for lane, ids in q["lanes"].items():
        for id_ in ids:
            places[id_].append(("lane", lane))
    for id_ in q["active"]:
        places[id_].append(("active", None))
    for id_ in q["dead"]:
        places[id_].append(("dead", None))
    state_of = {"schedule": "scheduled", "pending": "pending", "lane": "pending", "active": "active", "dead": "dead"}
    for id_, ps in places.items():
        if id_ not in rows:
            continue  # a ghost
        assert len(ps) == 1, f"I1{at}: job {id_!r} is in {ps}"
        place, lane = ps[0]
        row = rows[id_]
        assert row.get("state") == state_of[place], f"I1{at}: job {id_!r} is in {place} {lane or ''} but its row says {row.get('state')!r}"
        if place == "pending":
            assert "lane" not in row, f"I1{at}: lane job {id_!r} is in the flat pending list"
        if place == "lane":
            assert row.get("lane") == lane, f"I1{at}: job {id_!r} of lane {row.get('lane')!r} is in lane list {lane!r}"
    for id_, row in rows.items():
        if row.get("state") in ("done", "cancelled"):
            assert id_ not in places, f"I1{at}: {row.get('state')} job {id_!r} is still in {places[id_]}"
            other = "cancelled" if row.get("state") == "done" else "done"
            assert id_ not in q[other], f"I1{at}: {row.get('state')} job {id_!r} is listed in {other}"
        else:
            assert id_ in places, f"I1{at}: job {id_!r} in state {row.get('state')!r} is in no structure (lost)"
            assert id_ not in q["done"], f"I1{at}: job {id_!r} in state {row.get('state')!r} is listed in done"
            assert id_ not in q["cancelled"], f"I1{at}: job {id_!r} in state {row.get('state')!r} is listed in cancelled"
            assert id_ not in q["expiring"], f"I1{at}: job {id_!r} in state {row.get('state')!r} expires"

    ring = Counter(q["ring"])
    names = set(q["lanes"]) | set(q["ctl"]) | set(ring)
    for lane in sorted(names):
        ctl = q["ctl"].get(lane, {})
        assert ring[lane] <= 1, f"I2{at}: lane {lane!r} is in the ring {ring[lane]} times: {q['ring']}"
        assert (ctl.get("ring") == "1") == (ring[lane] == 1), (
            f"I2{at}: lane {lane!r} has ring field {ctl.get('ring')!r} but is{'' if ring[lane] else ' not'} in the ring"
        )
        if q["lanes"].get(lane) and can_serve(ctl):
            assert ring[lane] == 1, f"I3{at}: lane {lane!r} holds {q['lanes'][lane]} and can be served ({ctl}) but is not in the ring"
    counts = Counter(rows[i].get("lane") for i in q["active"] if i in rows and rows[i].get("lane") is not None)
    for lane in sorted(names | set(counts)):
        field = _int_field(q["ctl"].get(lane, {}).get("active")) or 0
        assert field == counts[lane], f"I4{at}: lane {lane!r} has active field {field} but {counts[lane]} of its ids are in active"

    for id_, score in q["active"].items():
        if id_ in rows:
            assert _int_field(rows[id_].get("lease")) == score, (
                f"I5{at}: active job {id_!r} has lease {rows[id_].get('lease')} but score {score}"
            )
            assert rows[id_].get("token"), f"I5{at}: active job {id_!r} has no token"
    for id_, score in q["schedule"].items():
        if id_ in rows:
            assert _int_field(rows[id_].get("due")) == score, (
                f"I5{at}: scheduled job {id_!r} has due {rows[id_].get('due')} but score {score}"
            )
    for id_, row in rows.items():
        if row.get("state") != "active":
            assert "token" not in row and "lease" not in row, f"I5{at}: job {id_!r} in state {row.get('state')!r} keeps a token or lease"
    assert len(q["wake"]) <= WAKE_MAX, f"{at}: wake holds {len(q['wake'])} tokens"
    return q


def make_due(r: redis.Redis, prefix: str, ids, *, at: int = 1) -> None:
    """Time passes: each id's due time is now in the past (`at`, `at + 1`, …): its
    `schedule` score and its row's `due`, as if the clock had moved past them."""
    for i, id_ in enumerate(ids):
        assert r.zadd(prefix + "schedule", {id_: at + i}, xx=True, ch=True) in (0, 1)
        assert r.zscore(prefix + "schedule", id_) == at + i, f"{id_} is not scheduled"
        if r.exists(prefix + "job:" + id_):
            r.hset(prefix + "job:" + id_, "due", at + i)


def expire_lease(r: redis.Redis, prefix: str, ids, *, at: int = 1) -> None:
    """Time passes: each id's lease ran out (`active` score and row `lease` moved
    into the past, `at`, `at + 1`, …)."""
    for i, id_ in enumerate(ids):
        r.zadd(prefix + "active", {id_: at + i}, xx=True)
        assert r.zscore(prefix + "active", id_) == at + i, f"{id_} is not active"
        if r.exists(prefix + "job:" + id_):
            r.hset(prefix + "job:" + id_, "lease", at + i)


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


class Model:
    """The queue as SPEC §2 to §7 describe it, for one queue, in plain Python.

    Scores that are "later" (now + FAR) are kept as None: the model does not know
    the server's clock, only that they are far in the future; past scores are the
    exact values the test wrote."""

    def __init__(self):
        self.rows: dict[str, dict] = {}
        self.schedule: dict[str, int | None] = {}
        self.pending: list[str] = []
        self.lanes: dict[str, list[str]] = {}
        self.ctl: dict[str, dict[str, int]] = {}
        self.ring: list[str] = []
        self.wake: list[str] = []
        self.active: dict[str, int | None] = {}
        # id -> score: exact (read back after the call that wrote it, or a past
        # value the test wrote); "NOW" until read back.
        self.dead: dict[str, int | str] = {}
        # The done index: id -> None (finished during the run) or a past score.
        self.done: dict[str, int | None] = {}
        # The effective retention policy, and the hash as written.
        self.ret = dict(emq._core.RETENTION_DEFAULTS)
        self.ret_hash: dict[str, str] = {}
        # Each given id's request, as add got it: (data, lane, max_attempts, when).
        self.requests: dict[str, tuple] = {}
        # Ids in `schedule` at `at_ms` AT_FAR (None there too): later than every
        # other "later" member, which are all due about FAR after their call.
        self.at_far: set[str] = set()
        # SPEC §13: the cancelled index (as `done`), the requests to stop, each
        # waiter's inbox (the ids pushed to it, in order), the uniqueness keys.
        self.cancelled: dict[str, int | None] = {}
        self.cancels: set[str] = set()
        self.stalled_cancelled: list[str] = []
        self.inboxes: dict[str, list[str]] = {}
        self.uniques: dict[str, str] = {}

    # -- lanes -----------------------------------------------------------------

    def c(self, lane: str) -> dict[str, int]:
        return self.ctl.setdefault(lane, {"paused": 0, "limit": 0, "active": 0, "ring": 0})

    def servable(self, lane: str) -> bool:
        c = self.c(lane)
        return not c["paused"] and (c["limit"] <= 0 or c["active"] < c["limit"])

    def offer(self, lane: str) -> None:
        c = self.c(lane)
        if self.lanes.get(lane) and self.servable(lane) and c["ring"] != 1:
            self.ring.append(lane)
            c["ring"] = 1
            self.wake.append(lane)

    def trim(self) -> None:
        self.wake = self.wake[-WAKE_MAX:]

    def announce(self, lanes: list[str], flat: bool) -> None:
        """After work became ready: offer(L) for each lane in order, the flat
        token, the trim of `wake` (SPEC §5 step 6)."""
        for lane in lanes:
            self.offer(lane)
        if flat:
            self.wake.append("")
        self.trim()

    def push_ready(self, id_: str) -> None:
        lane = self.rows[id_].get("lane") if id_ in self.rows else None
        if lane is None:
            self.pending.append(id_)
        else:
            self.lanes.setdefault(lane, []).append(id_)

    # -- operations ------------------------------------------------------------

    def new_head(self, due: str) -> bool:
        """Whether a job due `due` ("backoff": a few seconds from now; "far": about
        FAR from now; "at_far": AT_FAR) is due before every member of `schedule`
        (SPEC §7: then its call appends the token "")."""
        past = [i for i, sc in self.schedule.items() if sc is not None]
        later = [i for i, sc in self.schedule.items() if sc is None and i not in self.at_far]
        if due == "backoff":
            return not past
        if due == "far":
            return not past and not later
        return not self.schedule

    def add(
        self,
        jobs: list[tuple[str, bytes, str | None, bool, int, tuple[str, int]]],
        keep: int | None = None,
        unique: tuple[str, int] | None = None,
    ) -> None:
        """jobs: (id, data, lane, later, max_attempts, when as given); `keep`
        (ms) and `unique` (key, window ms): each job's own, as given."""
        flat = False
        lanes_hit: list[str] = []
        scheduled = [(id_, when) for id_, _, _, later, _, when in jobs if later]
        if scheduled:
            # The earliest of the call's scheduled jobs is a "far" one unless all are at AT_FAR.
            earliest = "at_far" if all(w[0] == "A" for _, w in scheduled) else "far"
            flat = self.new_head(earliest)
        for id_, data, lane, later, max_attempts, when in jobs:
            row = {
                "state": "scheduled" if later else "pending",
                "data": data,
                "attempts": 0,
                "max_attempts": max_attempts,
                "stalls": 0,
                "digest": digest(data, lane, max_attempts, when, keep, unique),
            }
            if keep is not None:
                row["keep"] = keep
            if unique is not None:
                row["unique"] = unique[0]
                self.uniques[unique[0]] = id_
            if keep is None and unique is None:
                self.requests[id_] = (data, lane, max_attempts, when)
            if lane is not None:
                row["lane"] = lane
            self.rows[id_] = row
            if later:
                self.schedule[id_] = None
                if when[0] == "A":
                    self.at_far.add(id_)
                continue
            self.push_ready(id_)
            if lane is None:
                flat = True
            elif lane not in lanes_hit:
                lanes_hit.append(lane)
        self.announce(lanes_hit, flat)

    def claim(self, n: int, flat_only: bool = False) -> list[str]:
        out: list[str] = []
        pending_len, ring_len = len(self.pending), len(self.ring)
        flat, self.pending = self.pending[:n], self.pending[n:]
        for id_ in flat:
            if id_ in self.rows:
                out.append(id_)
        # A flat claim (a group commit's) leaves the lanes to the claims, and
        # with nothing in `pending` writes nothing.
        if flat_only and not flat:
            return []
        slots = 0 if flat_only else n - len(flat)
        drops = 0
        # A claim reads at most `slots` ids from each lane's head: a lane whose
        # head it used up while more ids wait ends the claim (ghosts among them
        # took turns without taking slots); the rest is left to the next claim.
        head = slots
        taken: Counter = Counter()
        while slots > 0 and self.ring:
            lane = self.ring[0]
            if taken[lane] == head and self.lanes.get(lane):
                break
            if not self.lanes.get(lane) or not self.servable(lane):
                self.ring.pop(0)
                self.c(lane)["ring"] = 0
                drops += 1
                continue
            id_ = self.lanes[lane].pop(0)
            taken[lane] += 1
            self.ring.append(self.ring.pop(0))
            if id_ in self.rows:  # a ghost takes the lane's turn, but neither a slot nor the limit
                slots -= 1
                out.append(id_)
                self.c(lane)["active"] += 1
        for id_ in out:
            row = self.rows[id_]
            row["state"] = "active"
            row["attempts"] += 1
            self.active[id_] = None
        if pending_len > len(flat) or ring_len > drops:
            self.wake.append("")
            self.trim()
        return out

    def leave_active(self, id_: str) -> None:
        del self.active[id_]
        self.rows[id_].pop("token", None)

    def keep(self, row: dict) -> int:
        """How long a row is kept once it ends: its own `keep`, else the queue's `done_ms`."""
        return row["keep"] if row.get("keep") is not None else self.ret["done_ms"]

    def tell(self, id_: str) -> None:
        """`id_` came to an outcome: its id goes to each of its waiters' inboxes."""
        for w in self.rows[id_].get("wait", []):
            self.inboxes.setdefault(w, []).append(id_)

    def end_cancelled(self, id_: str) -> None:
        """The row becomes `cancelled`, kept as a done row is, listed in `cancelled`."""
        row = self.rows[id_]
        self.tell(id_)
        keep = self.keep(row)
        event(f"cancelled, keep {keep}")
        if keep == 0:
            del self.rows[id_]
            return
        row["state"] = "cancelled"
        row["error"] = b"cancelled"
        row["expires"] = keep > 0
        row.pop("token", None)
        if keep > 0:
            self.cancelled = {i: sc for i, sc in self.cancelled.items() if sc is None}
        self.cancelled[id_] = None

    def complete(self, id_: str, result: bytes | None = None) -> None:
        self.leave_active(id_)
        row = self.rows[id_]
        lane = row.get("lane")
        if row.get("cancel"):
            event("complete of a job asked to stop: cancelled")
            self.end_cancelled(id_)
        else:
            self.tell(id_)
            keep = self.keep(row)
            event(f"complete, keep {keep}")
            if keep > 0 and any(sc is not None for sc in self.done.values()):
                event("complete drops old done entries")
            if keep == 0:
                del self.rows[id_]
            else:
                row["state"] = "done"
                row["expires"] = keep > 0
                if result is not None:
                    row["result"] = result
                if keep > 0:  # index entries of rows expired by now: those moved into the past
                    self.done = {i: sc for i, sc in self.done.items() if sc is None}
                self.done[id_] = None
        if lane is not None:
            c = self.c(lane)
            c["active"] = max(c["active"] - 1, 0)
            self.offer(lane)
            self.trim()

    def fail(self, id_: str, error: bytes, retry: str, error_type: str | None = None) -> str:
        """retry: "now" (0), "far" (FAR) or "backoff" (moved FAR out after the call)."""
        self.leave_active(id_)
        row = self.rows[id_]
        lane = row.get("lane")
        head = False
        if row.get("cancel"):
            event("fail of a job asked to stop: cancelled")
            self.end_cancelled(id_)
            out = "cancelled"
        else:
            row["error"] = error
            # This fail's error type, or none: never an earlier attempt's (nor its traceback: the model gives none).
            if error_type is not None:
                row["error_type"] = error_type
            else:
                row.pop("error_type", None)
            row.pop("traceback", None)
            if row["attempts"] < row["max_attempts"]:
                if retry == "now":
                    row["state"] = "pending"
                    self.push_ready(id_)
                else:
                    row["state"] = "scheduled"
                    head = self.new_head(retry)
                    self.schedule[id_] = None
                    self.at_far.discard(id_)
                out = "scheduled"
            else:
                row["state"] = "dead"
                self.tell(id_)
                out = "dead"
        if lane is not None:
            c = self.c(lane)
            c["active"] = max(c["active"] - 1, 0)
            self.offer(lane)
        elif retry == "now" and out == "scheduled":
            self.wake.append("")
        if head:
            self.wake.append("")
        self.trim()
        if out == "dead":
            self.die([id_])
        return out

    def die(self, ids: list[str]) -> list[str]:
        """`ids` join `dead` (score "NOW", after every score there), then the
        retention's trim: the first k of the head merged with the new entries,
        k = min(d + 64, max(count_k, time_k)). Gives the ids trimmed."""
        if not ids:
            return []
        d = len(ids)
        head = sorted(self.dead.items(), key=lambda e: (e[1], e[0].encode()))[: d + emq._core.TRIM_SLACK]
        merged = [i for i, _ in head] + sorted(ids, key=str.encode)
        dead_ms, dead_max = self.ret["dead_ms"], self.ret["dead_max"]
        count_k = max(0, len(self.dead) + d - dead_max) if dead_max >= 0 else 0
        if dead_ms < 0:
            time_k = 0
        elif dead_ms == 0:
            time_k = len(merged)  # every score is at or before now
        else:  # past scores are old enough; scores of this run (and the new ones) are not
            time_k = sum(1 for i, sc in head if sc < 10**12)
        k = min(d + emq._core.TRIM_SLACK, max(count_k, time_k))
        for i in ids:
            self.dead[i] = "NOW"
        for i in merged[:k]:
            self.dead.pop(i, None)
            self.rows.pop(i, None)
        if k:
            event(
                "dead trimmed"
                + (" (the new ones too)" if set(ids) & set(merged[:k]) else "")
                + (" by age" if time_k >= count_k else " by count")
            )
        return merged[:k]

    def promote(self, batch: int) -> int:
        due = sorted((sc, id_) for id_, sc in self.schedule.items() if sc is not None)[:batch]
        if not due:
            return 0
        flat = False
        lanes_hit: list[str] = []
        for _, id_ in due:
            del self.schedule[id_]
            if id_ not in self.rows:
                continue
            self.rows[id_]["state"] = "pending"
            self.push_ready(id_)
            lane = self.rows[id_].get("lane")
            if lane is None:
                flat = True
            elif lane not in lanes_hit:
                lanes_hit.append(lane)
        self.announce(lanes_hit, flat)
        return len(due)

    def stalled_check(self, max_stalled: int | None, batch: int) -> tuple[list[str], list[str]]:
        expired = sorted((sc, id_) for id_, sc in self.active.items() if sc is not None)[:batch]
        recovered: list[str] = []
        dead: list[str] = []
        if not expired:
            return recovered, dead
        left: dict[str, int] = {}
        flat = False
        self.stalled_cancelled = []
        for _, id_ in expired:
            del self.active[id_]
            if id_ not in self.rows:
                continue
            row = self.rows[id_]
            row.pop("token", None)
            lane = row.get("lane")
            if lane is not None:
                left[lane] = left.get(lane, 0) + 1
            if row.get("cancel"):
                event("stalled check of a job asked to stop: cancelled")
                self.stalled_cancelled.append(id_)
                self.end_cancelled(id_)
                continue
            row["stalls"] += 1
            if max_stalled is not None and row["stalls"] > max_stalled:
                row["state"] = "dead"
                row["error"] = b"stalled"
                # The ending is the stall's: an earlier attempt's error type and traceback go.
                row.pop("error_type", None)
                row.pop("traceback", None)
                self.tell(id_)
                dead.append(id_)
            else:
                row["state"] = "pending"
                self.push_ready(id_)
                recovered.append(id_)
                flat = flat or lane is None
        for lane, n in left.items():
            c = self.c(lane)
            c["active"] = max(c["active"] - n, 0)
        self.announce(list(left), flat)
        self.die(dead)
        return recovered, dead

    def cancel(self, id_: str) -> str:
        """CANCEL (SPEC §13): the answer, as `emq.CancelOutcome`'s value."""
        row = self.rows.get(id_)
        if row is None:
            return "unknown"
        state = row["state"]
        if state in ("done", "dead", "cancelled"):
            return "already_done"
        if state == "active":
            row["cancel"] = True
            self.cancels.add(id_)
            return "stopping"
        if state == "scheduled":
            del self.schedule[id_]
            self.at_far.discard(id_)
        else:
            lane = row.get("lane")
            lst = self.pending if lane is None else self.lanes[lane]
            lst.remove(id_)
        self.end_cancelled(id_)
        return "cancelled"

    def watch(self, ids: list[str], inbox: str) -> list[str]:
        """AWAIT: for each id "unknown", "ended" or "waiting" (the inbox added)."""
        out = []
        for id_ in ids:
            row = self.rows.get(id_)
            if row is None:
                out.append("unknown")
            elif row["state"] in ("done", "dead", "cancelled"):
                out.append("ended")
            else:
                wait = row.setdefault("wait", [])
                if inbox not in wait:
                    wait.append(inbox)
                    del wait[: -emq._core.WAITERS_MAX]
                out.append("waiting")
        return out

    def lane_op(self, lane: str, op: str, n: int = 0) -> None:
        c = self.c(lane)
        if op == "pause":
            c["paused"] = 1
            return
        if op == "resume":
            c["paused"] = 0
        else:
            c["limit"] = n
        self.offer(lane)
        self.trim()


def assert_matches_model(q: dict, m: Model) -> None:
    """The real keyspace `q` (from read_queue) equals the model."""
    assert q["pending"] == m.pending, "pending"
    assert {k: v for k, v in q["lanes"].items()} == {k: v for k, v in m.lanes.items() if v}, "lane lists"
    assert q["ring"] == m.ring, "ring"
    assert q["wake"] == m.wake, "wake"
    assert set(q["schedule"]) == set(m.schedule), "schedule members"
    for id_, sc in m.schedule.items():
        if sc is not None:
            assert q["schedule"][id_] == sc, f"schedule score of {id_}"
        else:
            assert q["schedule"][id_] > 10**12 + FAR // 2, f"schedule score of {id_} is not later"
    assert set(q["active"]) == set(m.active), "active members"
    for id_, sc in m.active.items():
        if sc is not None:
            assert q["active"][id_] == sc, f"active score of {id_}"
        else:
            assert q["active"][id_] > 10**12 + FAR // 2, f"lease of {id_} is not later"
    assert q["dead"] == m.dead, "dead"
    assert set(q["done"]) == set(m.done), "done index"
    for id_, sc in m.done.items():
        if sc is not None:
            assert q["done"][id_] == sc, f"done score of {id_}"
        else:
            assert q["done"][id_] > 10**12, f"done score of {id_} is not of this run"
    assert q["retention"] == m.ret_hash, "retention"
    assert set(q["cancelled"]) == set(m.cancelled), "cancelled index"
    assert q["cancels"] == m.cancels, "requests to stop"
    assert q["inboxes"] == {w: ids for w, ids in m.inboxes.items() if ids}, "inboxes"
    assert q["uniques"] == m.uniques, "uniqueness keys"
    ctl = {}
    for lane, f in q["ctl"].items():
        ctl[lane] = {
            "paused": int(f.get("paused") == "1"),
            "limit": _int_field(f.get("limit")) or 0,
            "active": _int_field(f.get("active")) or 0,
            "ring": int(f.get("ring") == "1"),
        }
    default = {"paused": 0, "limit": 0, "active": 0, "ring": 0}
    for lane in set(ctl) | set(m.ctl):
        assert ctl.get(lane, default) == m.ctl.get(lane, default), f"lanectl of {lane}"
    assert set(q["rows"]) == set(m.rows), "rows"
    for id_, mrow in m.rows.items():
        row = q["rows"][id_]
        assert row.get("state") == mrow["state"], f"state of {id_}"
        assert row.get("data") == mrow["data"], f"data of {id_}"
        assert row.get("lane") == mrow.get("lane"), f"lane of {id_}"
        assert int(row.get("attempts", 0)) == mrow["attempts"], f"attempts of {id_}"
        assert int(row.get("max_attempts", 0)) == mrow["max_attempts"], f"max_attempts of {id_}"
        assert int(row.get("stalls", 0)) == mrow["stalls"], f"stalls of {id_}"
        assert row.get("error") == mrow.get("error"), f"error of {id_}"
        assert ("token" in row) == (mrow["state"] == "active"), f"token of {id_}"
        assert row.get("digest") == mrow["digest"], f"digest of {id_}"
        assert row.get("result") == mrow.get("result"), f"result of {id_}"
        assert row.get("progress") == mrow.get("progress"), f"progress of {id_}"
        assert row.get("error_type") == mrow.get("error_type"), f"error_type of {id_}"
        assert row.get("traceback") == mrow.get("traceback"), f"traceback of {id_}"
        assert (row.get("cancel") == "1") == bool(mrow.get("cancel")), f"cancel of {id_}"
        assert row.get("keep") == (None if mrow.get("keep") is None else str(mrow["keep"])), f"keep of {id_}"
        assert row.get("unique") == mrow.get("unique"), f"unique of {id_}"
        assert row.get("wait", "").split() == mrow.get("wait", []), f"waiters of {id_}"
        assert (id_ in q["expiring"]) == mrow.get("expires", False), f"expiry of {id_}"


# ---------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------

ids_st = st.integers(min_value=0, max_value=10**6)


def machine_for(url: str, seed: str | None = None, backend: str = "plan"):
    """The machine on the server at `url`; with `seed`, emq connects there (a
    cluster node other than the queue's: it follows the queue to `url`).
    `backend`: the queue's (`emq.Queue(..., backend=)`): "module" has the
    server's module run the claims and completes."""

    class JobsMachine(RuleBasedStateMachine):
        def __init__(self):
            super().__init__()
            self.r = redis.Redis.from_url(url)
            self.r.flushdb()
            self.client = emq.connect(seed or url)
            self.q = emq.Queue(self.client, Q, backend=backend)
            self.m = Model()
            self.held: dict[str, emq.Job] = {}  # id -> the Job its current holder has
            self.stale: list[emq.Job] = []  # Jobs whose lease is lost (refused from now on)
            self.seq = 0
            self.past = 1000  # the next past score to write
            self.ghosts = 0
            self.deleted = 0

        def teardown(self):
            if hasattr(self, "popper"):
                self.popper.close()
            self.client.close()
            self.r.close()

        def _lose(self, id_: str) -> None:
            if id_ in self.held:
                self.stale.append(self.held.pop(id_))

        def _pick(self, seq, k):
            seq = sorted(seq)
            return seq[k % len(seq)]

        # -- adding ---------------------------------------------------------------

        @rule(
            jobs=st.lists(
                st.tuples(st.sampled_from([None] + LANES), st.booleans(), st.binary(max_size=8), st.integers(1, 3)),
                min_size=1,
                max_size=4,
            ),
            given_ids=st.booleans(),
            many=st.booleans(),
            keep=st.sampled_from([None, None, 0, 600, "forever"]),
        )
        def add(self, jobs, given_ids, many, keep):
            if len(jobs) > 1:
                many = True
            specs = []
            for lane, later, data, max_attempts in jobs:
                spec = {"data": data, "lane": lane, "delay": FAR_S if later else 0, "max_attempts": max_attempts}
                if keep is not None:
                    spec["keep"] = keep
                if given_ids:
                    self.seq += 1
                    spec["id"] = f"j{self.seq:05d}"
                specs.append(spec)
            if many:
                ids = self.q.add_many(specs)
            else:
                ids = [self.q.add(**specs[0])]
            assert len(ids) == len(specs) and len(set(ids)) == len(ids)
            if given_ids:
                assert ids == [sp["id"] for sp in specs]
            self.m.add(
                [
                    (i, sp["data"], sp["lane"], sp["delay"] > 0, sp["max_attempts"], ("D", round(sp["delay"] * 1000)))
                    for i, sp in zip(ids, specs)
                ],
                keep=None if keep is None else -1 if keep == "forever" else keep * 1000,
            )

        @rule(k=ids_st, key=st.sampled_from(["u0", "u1", "u2"]), later=st.booleans(), lane=st.sampled_from([None, *LANES]))
        def add_unique(self, k, key, later, lane):
            """A unique add: while the job its key names has a row, answered with
            that job and nothing written; else a new job, the key its."""
            named = self.m.uniques.get(key)
            before = snapshot(self.r)
            delay = FAR_S if later else 0
            got = self.q.add_unique(b"u%d" % k, unique_key=key, unique_for=FAR_S, delay=delay, lane=lane, max_attempts=2)
            if named is not None and named in self.m.rows:
                assert got == emq.UniqueAdd(named, False)
                assert snapshot(self.r) == before, "a unique add answered with the first job wrote"
                event("unique add: answered with the first job")
                return
            assert got.created
            when = ("D", round(delay * 1000))
            self.m.add([(got.id, b"u%d" % k, lane, later, 2, when)], unique=(key, FAR))

        @rule(k=ids_st, at_past=st.booleans())
        def add_at(self, k, at_past):
            """`at` in the past (ready at once) or far ahead (the model keeps ms)."""
            lane = [None, *LANES][k % 4]
            at = 5 if at_past else 10**13 * 4
            id_ = self.q.add(b"at", at=at / 1000, lane=lane)
            self.m.add([(id_, b"at", lane, not at_past, 3, ("A", at))])
            if not at_past:
                assert self.r.zscore(PREFIX + "schedule", id_) == at

        @precondition(lambda self: self.m.rows)
        @rule(k=ids_st, what=st.sampled_from(["data", "lane", "max_attempts", "when"]))
        def add_duplicate(self, k, what):
            """Another job under a taken id (its request differs in `what`): the
            whole call is refused and nothing is written."""
            id_ = self._pick(self.m.rows, k)
            data, lane, max_attempts, when = self.m.requests.get(id_, (b"", None, 3, ("D", 0)))
            if id_ not in self.m.requests:  # a generated id: any request differs in data
                what = "data"
            spec = {"data": data, "id": id_, "lane": lane, "max_attempts": max_attempts, **self._when(when)}
            if what == "data":
                spec["data"] = data + b"!"
            elif what == "lane":
                spec["lane"] = "A" if lane != "A" else None
            elif what == "max_attempts":
                spec["max_attempts"] = max_attempts + 1
            else:
                spec.pop("at", None)
                spec["delay"] = (when[1] + 1) / 1000 if when[0] == "D" else 0
            before = snapshot(self.r)
            with pytest.raises(emq.DuplicateJobError) as e:
                self.q.add_many([{"data": b"new", "id": f"fresh{k}"}, spec])
            assert repr(id_) in str(e.value) or id_ in str(e.value)
            assert snapshot(self.r) == before

        @staticmethod
        def _when(when: tuple[str, int]) -> dict:
            return {"delay": when[1] / 1000} if when[0] == "D" else {"at": when[1] / 1000}

        @precondition(lambda self: self.m.requests)
        @rule(k=ids_st, many=st.booleans())
        def add_again(self, k, many):
            """The same request again (a retry after a lost reply): a job whose row
            is there (waiting, active, done or dead) has landed, its id comes back
            and nothing is written; one whose row is gone (deleted when done, or
            trimmed from dead) is added anew."""
            id_ = self._pick(self.m.requests, k)
            data, lane, max_attempts, when = self.m.requests[id_]
            spec = {"data": data, "id": id_, "lane": lane, "max_attempts": max_attempts, **self._when(when)}
            before = snapshot(self.r)
            got = self.q.add_many([spec]) if many else [self.q.add(**spec)]
            assert got == [id_]
            if id_ in self.m.rows:
                assert snapshot(self.r) == before, "a landed add wrote"
                event(f"add again: landed ({self.m.rows[id_]['state']})")
            else:
                event("add again: the row was gone, added anew")
                later = when[0] == "D" and when[1] > 0 or when[0] == "A" and when[1] > 10**13
                self.m.add([(id_, data, lane, later, max_attempts, when)])

        # -- working --------------------------------------------------------------

        @rule(n=st.integers(1, 4))
        def claim(self, n):
            jobs = self.q.claim(n, lease=FAR_S)
            expected = self.m.claim(n)
            assert [j.id for j in jobs] == expected
            for j in jobs:
                row = self.m.rows[j.id]
                assert (j.lane, j.attempts, j.max_attempts, j.data) == (row.get("lane"), row["attempts"], row["max_attempts"], row["data"])
                assert j.token and j.state == "active"
                self._lose(j.id)
                self.held[j.id] = j

        @precondition(lambda self: self.held)
        @rule(k=ids_st)
        def extend(self, k):
            j = self.held[self._pick(self.held, k)]
            assert self.q.extend(j, FAR_S) is True
            self.m.active[j.id] = None

        def _batch(self, k: int, n_held: int, n_stale: int) -> tuple[list[emq.Job], list[str]]:
            """A batch call's jobs: up to `n_held` held ones and `n_stale` stale ones
            (ids not held, none twice), rotated by `k`; and the held ids chosen."""
            held = sorted(self.held)
            chosen = list(dict.fromkeys(held[(k + i) % len(held)] for i in range(min(n_held, len(held))))) if held else []
            stale: list[emq.Job] = []
            for j in self.stale[k % max(1, len(self.stale)) :] + self.stale:
                if len(stale) < n_stale and j.id not in chosen and all(j.id != o.id for o in stale):
                    stale.append(j)
            jobs = [self.held[i] for i in chosen] + stale
            return jobs[k % max(1, len(jobs)) :] + jobs[: k % max(1, len(jobs))], chosen

        @precondition(lambda self: self.held or self.stale)
        @rule(k=ids_st, n_held=st.integers(0, 3), n_stale=st.integers(0, 2))
        def extend_many(self, k, n_held, n_stale):
            """A worker's keeper: held and stale jobs extended in one call, each
            answered as `extend` alone would, the stale ones left as they are."""
            jobs, chosen = self._batch(k, n_held, n_stale)
            before = snapshot(self.r)
            got = self.q.extend_many(jobs, FAR_S)
            assert got == [j.id in chosen for j in jobs]
            for i in chosen:
                self.m.active[i] = None
            if not chosen:
                assert snapshot(self.r) == before, "an extend of lost leases only wrote"

        def _await_dead_scores(self) -> None:
            """Before a call that may kill: the server's clock past every score
            in `dead`, so new entries sort after the old ones (see the module doc)."""
            newest = max((sc for sc in self.m.dead.values()), default=0)
            while server_ms(self.r) <= newest:
                pass

        def _read_dead_scores(self, t0: int, t1: int) -> None:
            """After a call that may kill: the scores it wrote (its clock reading)."""
            new = [i for i, sc in self.m.dead.items() if sc == "NOW"]
            scores = [self.r.zscore(PREFIX + "dead", i) for i in new]
            assert None not in scores, f"the model keeps {new} in dead, the server has scores {scores}"
            assert len(set(scores)) <= 1 and all(t0 <= sc <= t1 for sc in scores), f"dead scores {scores}: not one reading in {t0}..{t1}"
            for i, sc in zip(new, scores):
                self.m.dead[i] = int(sc)

        @precondition(lambda self: self.held)
        @rule(k=ids_st, result=st.one_of(st.none(), st.binary(max_size=6)))
        def complete(self, k, result=None):
            j = self.held[self._pick(self.held, k)]
            assert self.q.complete(j, result) is True
            self.m.complete(j.id, result)
            self._lose(j.id)

        @precondition(lambda self: self.held or self.stale)
        @rule(k=ids_st, n_held=st.integers(0, 3), n_stale=st.integers(0, 2))
        def complete_many(self, k, n_held, n_stale):
            """A group commit: held and stale jobs completed in one call, each
            answered as `complete` alone would, the result that of the completes
            one after another."""
            jobs, chosen = self._batch(k, n_held, n_stale)
            results = [b"r%d" % i if (k + i) % 2 else None for i in range(len(jobs))]
            before = snapshot(self.r)
            got = self.q.complete_many([j if r is None else (j, r) for j, r in zip(jobs, results)])
            assert got == [j.id in chosen for j in jobs]
            for j, r in zip(jobs, results):
                if j.id in chosen:
                    self.m.complete(j.id, r)
                    self._lose(j.id)
            if not chosen:
                assert snapshot(self.r) == before, "a complete of lost leases only wrote"

        @precondition(lambda self: self.held or self.stale)
        @rule(k=ids_st, n_held=st.integers(0, 3), n_stale=st.integers(0, 2), n=st.integers(0, 3))
        def complete_and_claim(self, k, n_held, n_stale, n):
            """A group commit that claims. The plan: a claim of flat jobs, then
            the completes, in one transaction (no other client writes here: the
            claim is never dropped). The module: the completes, then a claim
            (lanes too), two commands in one round trip."""
            jobs, chosen = self._batch(k, n_held, n_stale)
            got, claimed = self.q.complete_and_claim(jobs, n, lease=FAR_S)
            expected = self.m.claim(n, flat_only=True) if n and backend == "plan" else []
            assert got == [j.id in chosen for j in jobs]
            for j in jobs:
                if j.id in chosen:
                    self.m.complete(j.id)
                    self._lose(j.id)
            if n and backend == "module":
                expected = self.m.claim(n)
            assert claimed is not None and [j.id for j in claimed] == expected
            for j in claimed:
                row = self.m.rows[j.id]
                assert (j.lane, j.attempts, j.max_attempts, j.data) == (row.get("lane"), row["attempts"], row["max_attempts"], row["data"])
                assert j.token and j.state == "active"
            for j in claimed:
                self._lose(j.id)
                self.held[j.id] = j

        @precondition(lambda self: self.held or self.stale)
        @rule(
            k=ids_st,
            n_held=st.integers(0, 3),
            n_stale=st.integers(0, 2),
            fates=st.lists(st.sampled_from(["done", "now", "far"]), min_size=5, max_size=5),
            error=st.binary(min_size=1, max_size=6),
        )
        def settle_many(self, k, n_held, n_stale, fates, error):
            """A group commit of finished and failed jobs: held and stale jobs
            completed or failed in one call, each answered as `complete` or
            `fail` alone would, the result that of the single calls one after
            another (ready retries, new heads of `schedule`, lanes offered,
            deaths and the trim of `dead` included)."""
            jobs, chosen = self._batch(k, n_held, n_stale)
            # A complete with a result, and a fail with its type, are dicts.
            items = [
                (j if k % 2 else {"job": j, "result": error})
                if f == "done"
                else (
                    (j, error, 0 if f == "now" else FAR_S)
                    if k % 2
                    else {"job": j, "error": error, "retry_in": 0 if f == "now" else FAR_S, "error_type": "m.E"}
                )
                for j, f in zip(jobs, fates)
            ]
            self._await_dead_scores()
            before = snapshot(self.r)
            t0 = server_ms(self.r)
            got = self.q.settle_many(items)
            t1 = server_ms(self.r)
            want: list = []
            # The jobs that die join `dead` under the call's one clock reading,
            # and `dead` is trimmed once, for them all (as a stalled check's
            # deaths are): the singles in one millisecond.
            dying: list[str] = []
            die, self.m.die = self.m.die, lambda ids: dying.extend(ids) or []  # type: ignore[method-assign]
            try:
                for j, f in zip(jobs, fates):
                    if j.id not in chosen:
                        want.append(False if f == "done" else "refused")
                        continue
                    if f == "done":
                        self.m.complete(j.id, None if k % 2 else error)
                        want.append(True)
                    else:
                        want.append(self.m.fail(j.id, error, f, None if k % 2 else "m.E"))
                    self._lose(j.id)
            finally:
                self.m.die = die  # type: ignore[method-assign]
            self.m.die(dying)
            assert got == want
            self._read_dead_scores(t0, t1)
            if not chosen:
                assert snapshot(self.r) == before, "a settle of lost leases only wrote"

        @precondition(lambda self: self.held)
        @rule(
            k=ids_st,
            retry=st.sampled_from(["now", "far", "backoff"]),
            error=st.binary(min_size=1, max_size=6),
            error_type=st.sampled_from([None, "app.Boom"]),
        )
        def fail(self, k, retry, error, error_type=None):
            j = self.held[self._pick(self.held, k)]
            self._await_dead_scores()
            before = server_ms(self.r)
            got = self.q.fail(j, error, retry_in={"now": 0, "far": FAR_S, "backoff": None}[retry], error_type=error_type)
            after = server_ms(self.r)
            assert got == self.m.fail(j.id, error, retry, error_type)
            self._read_dead_scores(before, after)
            self._lose(j.id)
            if got == "scheduled" and retry == "backoff":
                due = int(self.r.zscore(PREFIX + "schedule", j.id))
                assert before + 500 <= due <= after + 3_600_000, f"backoff due {due - before} ms after the call"
                # Keep real time from making it due behind the model's back.
                self.r.zadd(PREFIX + "schedule", {j.id: after + FAR}, xx=True)
                self.r.hset(PREFIX + "job:" + j.id, "due", after + FAR)

        @rule(n=st.integers(1, 4), how=st.sampled_from(["complete", "fail", "both"]))
        def work(self, n, how):
            """A worker's turn: claim, then settle everything held (completes and
            failures that retry at once or die), so finished jobs meet the policy."""
            self.claim(n)
            turn = 0
            while self.held:
                if how == "complete" or (how == "both" and turn % 2 == 0):
                    self.complete(0)
                else:
                    self.fail(0, "now", b"boom")
                turn += 1

        @precondition(lambda self: self.stale)
        @rule(k=ids_st, how=st.sampled_from(["complete", "fail", "extend"]))
        def late_worker(self, k, how):
            """A worker whose lease was lost (completed, failed, or recovered by a
            sweep, maybe claimed again since) is refused and changes nothing."""
            j = self.stale[k % len(self.stale)]
            before = snapshot(self.r)
            if how == "complete":
                assert self.q.complete(j) is False
            elif how == "fail":
                assert self.q.fail(j, "late", retry_in=0) is emq.FailOutcome.REFUSED
            else:
                assert self.q.extend(j, 1) is False
            assert snapshot(self.r) == before

        # -- time and the sweeps -------------------------------------------------

        @precondition(lambda self: any(sc is None for sc in self.m.schedule.values()))
        @rule(k=ids_st, count=st.integers(1, 3))
        def time_passes_for_schedule(self, k, count):
            later = sorted(i for i, sc in self.m.schedule.items() if sc is None)
            chosen = [later[(k + i) % len(later)] for i in range(min(count, len(later)))]
            chosen = list(dict.fromkeys(chosen))
            make_due(self.r, PREFIX, chosen, at=self.past)
            for i, id_ in enumerate(chosen):
                self.m.schedule[id_] = self.past + i
            self.past += len(chosen)

        @rule(batch=st.integers(1, 5))
        def promote(self, batch):
            assert self.q.promote(batch=batch) == self.m.promote(batch)

        @precondition(lambda self: any(sc is None for sc in self.m.active.values()))
        @rule(k=ids_st, count=st.integers(1, 3), sweep=st.sampled_from([None, 0, 1, "no"]))
        def time_passes_for_leases(self, k, count, sweep):
            """Some leases run out; then, mostly, a stalled check at once."""
            live = sorted(i for i, sc in self.m.active.items() if sc is None)
            chosen = list(dict.fromkeys(live[(k + i) % len(live)] for i in range(min(count, len(live)))))
            expire_lease(self.r, PREFIX, chosen, at=self.past)
            for i, id_ in enumerate(chosen):
                self.m.active[id_] = self.past + i
            self.past += len(chosen)
            if sweep != "no":
                self.stalled_check(sweep, 100)

        @rule(max_stalled=st.sampled_from([None, 0, 1]), batch=st.integers(1, 5))
        def stalled_check(self, max_stalled, batch):
            self._await_dead_scores()
            t0 = server_ms(self.r)
            got = self.q.stalled_check(max_stalled=max_stalled, batch=batch)
            t1 = server_ms(self.r)
            recovered, dead = self.m.stalled_check(max_stalled, batch)
            assert (list(got[0]), list(got[1])) == (recovered, dead)
            self._read_dead_scores(t0, t1)
            for id_ in recovered + dead + self.m.stalled_cancelled:
                self._lose(id_)

        # -- SPEC §13: cancels, progress, waiters ----------------------------------

        @rule(k=ids_st, unknown=st.booleans())
        def cancel(self, k, unknown):
            """A cancel of any job (or none): a waiting one leaves the queue and
            is cancelled, a running one is asked to stop, an ended or unknown one
            is left as it is (nothing written)."""
            id_ = f"nobody{k}" if unknown or not self.m.rows else self._pick(self.m.rows, k)
            before = snapshot(self.r)
            want = self.m.cancel(id_)
            got = self.q.cancel(id_)
            assert got == want, (id_, got, want)
            event(f"cancel: {want}")
            if want in ("unknown", "already_done"):
                assert snapshot(self.r) == before, "a cancel that changed nothing wrote"

        @precondition(lambda self: self.held or self.stale)
        @rule(k=ids_st, value=st.sampled_from([0.5, 7, "half", b"\x00"]))
        def progress(self, k, value):
            """Only the holder writes progress; a stale worker is refused and writes nothing."""
            pool = [*self.held.values(), *self.stale]
            j = pool[k % len(pool)]
            before = snapshot(self.r)
            got = self.q.progress(j, value)
            held = self.held.get(j.id) is j
            assert got is held
            if held:
                self.m.rows[j.id]["progress"] = value if isinstance(value, bytes) else str(value).encode()
            else:
                assert snapshot(self.r) == before

        @rule(k=ids_st, n=st.integers(1, 3), inbox=st.sampled_from(["w1", "w2"]), running=st.booleans())
        def watch(self, k, n, inbox, running):
            """A waiter registers: an ended job is answered now, an unknown one is
            None, any other gets the inbox among its waiters (`running`: the
            jobs held, whose settles and stalled checks then tell it)."""
            known = sorted(self.m.active if running and self.m.active else self.m.rows)
            ids = list(dict.fromkeys([*(known[(k + i) % len(known)] for i in range(min(n, len(known)))), f"nobody{k}"]))
            got = self.q.watch(ids, inbox)
            want = self.m.watch(ids, inbox)
            assert ["unknown" if j is None else "ended" if j.ended else "waiting" for j in got] == want
            for j, w in zip(got, want):
                if w == "ended":
                    row = self.m.rows[j.id]
                    assert (j.state, j.result, j.error_type) == (row["state"], row.get("result"), row.get("error_type"))

        @precondition(lambda self: any(self.m.inboxes.values()))
        @rule(inbox=st.sampled_from(["w1", "w2"]))
        def pop_inbox(self, inbox):
            """The ids an inbox got, in order, taken in one pop (only when it holds some: no wait)."""
            if not self.m.inboxes.get(inbox):
                return
            if not hasattr(self, "popper"):
                self.popper = self.client.sibling(read_timeout=None)
            assert self.q.pop_inbox(inbox, 5, client=self.popper) == self.m.inboxes.pop(inbox)

        @rule()
        def cancel_requests(self):
            got = self.q.cancel_requests()
            assert set(got.ids) == self.m.cancels and got.until > 10**12

        # -- retention --------------------------------------------------------------

        POLICY = {
            "done": st.sampled_from(["leave", None, 0, 600, 10**6]),
            "dead": st.sampled_from(["leave", None, 0, 10**6]),
            "dead_max": st.sampled_from(["leave", None, 0, 1, 2, 3, 5]),
        }

        @initialize(**POLICY)
        def start_with_a_policy(self, done, dead, dead_max):
            """Each run starts under some policy (the defaults when all are "leave")."""
            self.set_retention(done, dead, dead_max)

        @rule(**POLICY)
        def set_retention(self, done, dead, dead_max):
            """A policy (seconds; None: forever / no limit; "leave": not given)."""
            args = {name: v for name, v in (("keep_done", done), ("keep_dead", dead), ("max_dead", dead_max)) if v != "leave"}
            self.q.set_retention(**args)
            for field, v, scale in (("done_ms", done, 1000), ("dead_ms", dead, 1000), ("dead_max", dead_max, 1)):
                if v != "leave":
                    self.m.ret[field] = -1 if v is None else v * scale
                    self.m.ret_hash[field] = str(self.m.ret[field])
            secs = lambda ms: None if ms < 0 else ms / 1000  # noqa: E731
            want = emq.Retention(
                keep_done=secs(self.m.ret["done_ms"]),
                keep_dead=secs(self.m.ret["dead_ms"]),
                max_dead=None if self.m.ret["dead_max"] < 0 else self.m.ret["dead_max"],
            )
            assert self.q.retention() == want

        @precondition(lambda self: any(sc is None for sc in self.m.done.values()))
        @rule(k=ids_st, count=st.integers(1, 3))
        def time_passes_for_done(self, k, count):
            """Done entries grow old: the next COMPLETE that keeps rows for a
            while drops them from the index (their rows keep their expiry)."""
            recent = sorted(i for i, sc in self.m.done.items() if sc is None)
            chosen = list(dict.fromkeys(recent[(k + i) % len(recent)] for i in range(min(count, len(recent)))))
            for i, id_ in enumerate(chosen):
                assert self.r.zadd(PREFIX + "done", {id_: self.past + i}, xx=True, ch=True) == 1
                self.m.done[id_] = self.past + i
            self.past += len(chosen)

        @precondition(lambda self: any(sc > 10**12 for sc in self.m.dead.values()))
        @rule(k=ids_st, count=st.integers(1, 3))
        def time_passes_for_dead(self, k, count):
            """Dead entries grow old: due for a trim by age."""
            recent = sorted(i for i, sc in self.m.dead.items() if sc > 10**12)
            chosen = list(dict.fromkeys(recent[(k + i) % len(recent)] for i in range(min(count, len(recent)))))
            for i, id_ in enumerate(chosen):
                assert self.r.zadd(PREFIX + "dead", {id_: self.past + i}, xx=True, ch=True) == 1
                self.m.dead[id_] = self.past + i
            self.past += len(chosen)

        @rule()
        def counts(self):
            c = self.q.counts()
            m = self.m
            lanes = {lane: len(ids) for lane, ids in m.lanes.items() if ids}
            assert {k: v for k, v in c.lanes.items() if v} == lanes
            assert (c.schedule, c.pending, c.active, c.dead, c.ring) == (
                len(m.schedule),
                len(m.pending),
                len(m.active),
                len(m.dead),
                len(m.ring),
            )
            # Done rows still kept: entries finished after now - done_ms (past ones are not).
            kept = len(m.done) if m.ret["done_ms"] < 0 else 0 if m.ret["done_ms"] == 0 else sum(1 for sc in m.done.values() if sc is None)
            assert c.done == kept
            kept = (
                len(m.cancelled)
                if m.ret["done_ms"] < 0
                else 0
                if m.ret["done_ms"] == 0
                else sum(1 for sc in m.cancelled.values() if sc is None)
            )
            assert c.cancelled == kept

        # -- lanes ----------------------------------------------------------------

        @rule(lane=st.sampled_from(LANES), op=st.sampled_from(["pause", "resume", "limit"]), n=st.integers(0, 2))
        def lane_control(self, lane, op, n):
            if op == "pause":
                self.q.pause_lane(lane)
            elif op == "resume":
                self.q.resume_lane(lane)
            else:
                self.q.set_lane_limit(lane, n)
            self.m.lane_op(lane, op, n)

        # -- ghosts ---------------------------------------------------------------

        @precondition(lambda self: self.ghosts < 3)
        @rule()
        def ghost_in_pending(self):
            """An id in `pending` whose row is gone: claims drop it."""
            self.ghosts += 1
            g = f"ghost{self.ghosts}"
            self.r.rpush(PREFIX + "pending", g)
            self.m.pending.append(g)

        @precondition(lambda self: self.deleted < 3 and any(r["state"] in ("pending", "scheduled") for r in self.m.rows.values()))
        @rule(k=ids_st, lane_first=st.booleans())
        def row_deleted(self, k, lane_first):
            """The row of a waiting job is deleted (expired): its id stays behind
            as a ghost in its list or in `schedule`."""
            waiting = [i for i, r in self.m.rows.items() if r["state"] in ("pending", "scheduled")]
            in_lanes = [i for i in waiting if self.m.rows[i]["state"] == "pending" and "lane" in self.m.rows[i]]
            id_ = self._pick(in_lanes if lane_first and in_lanes else waiting, k)
            self.r.delete(PREFIX + "job:" + id_)
            del self.m.rows[id_]
            self.m.requests.pop(id_, None)  # its id stays behind as a ghost: never added again
            self.deleted += 1

        # -- after every step ----------------------------------------------------

        @invariant()
        def keyspace_matches_model_and_invariants_hold(self):
            q = assert_invariants(self.r, PREFIX)
            assert_matches_model(q, self.m)

    return JobsMachine


@pytest.mark.timeout(600)
def test_jobs_state_machine_on_a_cluster(cluster):
    """The same machine with the queue on one primary of a 3-primary cluster and
    emq connected to another (SPEC §11): every call follows the queue there."""
    owner = cluster.owner(cluster.slot(Q))
    run_machine(machine_for(cluster.nodes[owner].url, seed=cluster.nodes[(owner + 1) % 3].url), examples=30)


def test_jobs_state_machine(server):
    run_machine(machine_for(server.url), examples=80)


def test_jobs_state_machine_with_the_module(server):
    """The same machine with the queue's claims and completes run by emq's
    server module (`backend="module"`): the same answers, the same keyspace."""
    from emq.embedded import module_path

    if module_path() is None:
        pytest.skip("emq's server module is not built (./dev module)")
    run_machine(machine_for(server.url, backend="module"), examples=60)


def run_machine(machine, *, examples: int) -> None:
    """`examples` runs of up to 60 steps each."""
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=60,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        ),
    )

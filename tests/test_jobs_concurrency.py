"""The job's operations racing one another (SPEC §7, §9): linearizable, every job
completed exactly once by a worker holding its lease, none lost, no lane
stranded.

Two kinds of test:

- A stress run: claimer threads claim, extend, complete and fail (some jobs are
  deliberately abandoned so that their short leases run out, and a few take
  longer than their lease, so that their complete races the recovery), while a producer
  adds flat and lane jobs (some due a few ms later), a promoter promotes, a
  stalled checker recovers expired leases and a lane controller pauses, resumes
  and limits a lane. Here real time does pass: leases are ~200 ms and delays a
  few ms, which is the point of the run; nothing sleeps to make anything happen,
  threads only pause briefly when idle. Totals are modest (a 2-core machine
  shared with others) and every loop is bounded in count and in time.

- Deterministic interleavings: a small TCP proxy (`HoldingProxy`) lets one
  client's call do all its reads and `WATCH`, then holds its `MULTI … EXEC` at
  the server's door while another call runs to completion, then lets it go. The
  result must be one that some sequential order of the two calls gives (SPEC §9),
  and the invariants I1 to I4 must hold. Time is modelled as in test_jobs: due
  times and leases are moved into the past with redis-py.

Every racing client has its own connection (an `emq.Client` serializes its
callers on one connection, so sharing one would not race anything).
"""

from __future__ import annotations

import random
import socket
import threading
import time
from collections import Counter, defaultdict

import pytest

import emq
from emq.embedded import module_path
from test_jobs_model import assert_invariants, expire_lease, lrange, make_due, read_queue, snapshot

Q = "jconc"
P = f"emq:{{{Q}}}:"
PENDING, RING, WAKE, ACTIVE = P + "pending", P + "ring", P + "wake", P + "active"
HOUR = 3600  # seconds


def lane_key(lane: str) -> str:
    return f"{P}lane:{lane}"


def job_key(id_: str) -> str:
    return f"{P}job:{id_}"


# ---------------------------------------------------------------------------
# The stress run
# ---------------------------------------------------------------------------

LANES = ["a", "b", "c", "lim"]  # lim: at most 2 active at once
TOGGLED = "t"  # paused and resumed, limited and unlimited, by the lane controller
TOTAL = 2_000
LEASE = 0.2  # seconds
ABANDON = 0.04  # a claimed job the worker walks away from: its lease runs out
FAIL = 0.06  # a failed attempt (retried at once or a few ms later)
SLOW = 0.01  # a worker that takes longer than the lease: its complete races the recovery
RUN_S = 90  # the whole run's bound
STUCK_S = 8  # no job completed for this long: stop and report


@pytest.mark.timeout(240)
@pytest.mark.parametrize(
    "mixed",
    [False, pytest.param(True, marks=pytest.mark.skipif(module_path() is None, reason="./dev module has not built it"))],
    ids=["plan", "plan-and-module"],
)
def test_claimers_producers_and_sweepers_race(server, r, mixed):
    """`mixed`: half the claimers claim and complete through emq's server module
    (`backend="module"`), racing the others' guarded plans."""
    lock = threading.Lock()
    errors: list[str] = []
    produced: list[str] = []
    completes: list[tuple[str, str]] = []  # (id, token) of every complete that returned True
    claims: dict[str, list[str]] = defaultdict(list)  # id -> tokens, in the order claimed
    retries: Counter = Counter()  # fails that returned "scheduled"
    recovered: Counter = Counter()  # ids the stalled checker sent back
    abandoned: list[emq.Job] = []
    refused = Counter()  # a worker's complete/fail/extend refused (its lease was taken back)
    stop = threading.Event()
    produced_all = threading.Event()
    deadline = time.monotonic() + RUN_S
    last_progress = [time.monotonic()]

    setup = emq.connect(server.url)
    emq.Queue(setup, Q).set_lane_limit("lim", 2)
    setup.close()

    def guard(name, fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported by the main thread (a Rust panic is a BaseException)
                errors.append(f"{name}: {e!r}")
                stop.set()

        return threading.Thread(target=run, name=name)

    def producer():
        c = emq.connect(server.url)
        q = emq.Queue(c, Q)
        prng = random.Random(7)
        made = 0
        while made < TOTAL and not stop.is_set():
            take = min(TOTAL - made, prng.randrange(1, 6))
            jobs = []
            for _ in range(take):
                x = prng.random()
                lane = None if x < 0.4 else (TOGGLED if x < 0.5 else LANES[int((x - 0.5) * 2 * len(LANES)) % len(LANES)])
                job = {"data": f"{made}".encode(), "lane": lane, "max_attempts": 1_000}
                if prng.random() < 0.2:
                    job["delay"] = prng.randrange(1, 20) / 1000
                jobs.append(job)
            ids = q.add_many(jobs) if take > 1 else [q.add(**jobs[0])]
            with lock:
                produced.extend(ids)
            made += take
            time.sleep(prng.random() * 0.003)
        produced_all.set()
        c.close()

    def failed(j: emq.Job, out: str) -> None:
        if out == "scheduled":
            with lock:
                retries[j.id] += 1
        else:
            assert out == "refused", out
            refused["fail"] += 1

    def completed(j: emq.Job, done: bool) -> None:
        if done:
            with lock:
                completes.append((j.id, j.token))
                last_progress[0] = time.monotonic()
        else:
            refused["complete"] += 1

    def claimer(k: int):
        c = emq.connect(server.url)
        q = emq.Queue(c, Q, backend="module" if mixed and k % 2 else "plan")
        # Every third claimer settles a claim's jobs together, completes and
        # fails in one `settle_many` (a worker's group commit), racing the rest.
        together = k % 3 == 2
        wrng = random.Random(100 + k)
        while not stop.is_set():
            jobs = q.claim(wrng.randrange(1, 5), lease=LEASE)
            if not jobs:
                c.command("BLPOP", WAKE, "0.02")  # park briefly on the wake list
                continue
            with lock:
                for j in jobs:
                    claims[j.id].append(j.token)
            items: list = []
            for j in jobs:
                x = wrng.random()
                if x < ABANDON:
                    with lock:
                        abandoned.append(j)
                    continue
                if x < ABANDON + FAIL:
                    retry = wrng.choice([0, 0, 3, 10])
                    if together:
                        items.append((j, "flaky", retry / 1000))
                    else:
                        failed(j, q.fail(j, "flaky", retry_in=retry / 1000))
                    continue
                if x < ABANDON + FAIL + SLOW:
                    time.sleep(LEASE + wrng.randrange(0, 60) / 1000)  # real work running late
                elif x < 0.2 and not q.extend(j, LEASE):
                    refused["extend"] += 1
                    continue
                if together:
                    items.append(j)
                else:
                    completed(j, q.complete(j))
            for item, out in zip(items, q.settle_many(items) if items else []):
                if isinstance(item, tuple):
                    failed(item[0], out)
                else:
                    completed(item, out)
        c.close()

    def promoter():
        c = emq.connect(server.url)
        while not stop.is_set():
            if emq.promote(c, Q, batch=50) == 0:
                time.sleep(0.002)
        c.close()

    def stalled_checker():
        c = emq.connect(server.url)
        while not stop.is_set():
            back, dead = emq.stalled_check(c, Q, max_stalled=None, batch=50)
            assert dead == [], dead
            with lock:
                recovered.update(back)
            time.sleep(0.02)
        c.close()

    def lane_controller():
        c = emq.connect(server.url)
        q = emq.Queue(c, Q)
        crng = random.Random(99)
        while not stop.is_set() and not produced_all.is_set():
            op = crng.randrange(4)
            if op == 0:
                q.pause_lane(TOGGLED)
            elif op == 1:
                q.resume_lane(TOGGLED)
            else:
                q.set_lane_limit(TOGGLED, crng.choice([0, 1, 3]))
            time.sleep(0.01)
        # Everything is added: leave the lane servable so that the run can finish.
        q.resume_lane(TOGGLED)
        q.set_lane_limit(TOGGLED, 0)
        c.close()

    threads = [guard("producer", producer), guard("promoter", promoter), guard("stalled", stalled_checker)]
    threads += [guard("lanes", lane_controller)]
    threads += [guard(f"claimer{k}", lambda k=k: claimer(k)) for k in range(4)]
    for t in threads:
        t.start()
    outcome = "done"
    try:
        while True:
            time.sleep(0.05)
            with lock:
                done = len({i for i, _ in completes})
            if errors:
                outcome = "error"
                break
            if produced_all.is_set() and done >= TOTAL:
                break
            if time.monotonic() > deadline:
                outcome = "out of time"
                break
            if time.monotonic() - last_progress[0] > STUCK_S and produced_all.is_set():
                outcome = "stuck"
                break
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors
    ks = read_queue(r, P)
    left = {
        "schedule": len(ks["schedule"]),
        "pending": len(ks["pending"]),
        "lanes": {k: len(v) for k, v in ks["lanes"].items()},
        "active": len(ks["active"]),
        "ring": ks["ring"],
        "ctl": ks["ctl"],
    }
    assert_invariants(r, P, where=f"after the run ({outcome})")
    assert outcome == "done", f"{outcome}: {len({i for i, _ in completes})} of {TOTAL} completed; left {left}"

    # Every job completed exactly once, by a worker holding its lease.
    assert len(produced) == TOTAL and len(set(produced)) == TOTAL
    per_id = Counter(i for i, _ in completes)
    twice = {i: n for i, n in per_id.items() if n > 1}
    assert not twice, f"completed more than once: {twice}"
    assert set(per_id) == set(produced), "every produced job completed"
    for id_, token in completes:
        assert token in claims[id_], f"{id_} was completed with token {token}, which no claim handed out"
    # No job claimed twice without being given back in between (a recovery or a retry).
    for id_ in produced:
        assert len(claims[id_]) == 1 + recovered[id_] + retries[id_], (
            f"{id_}: claimed {len(claims[id_])} times, recovered {recovered[id_]}, retried {retries[id_]}"
        )
        assert len(set(claims[id_])) == len(claims[id_]), f"{id_}: a token was handed out twice"
    rows = ks["rows"]
    assert all(row["state"] == "done" for row in rows.values()), Counter(row["state"] for row in rows.values())
    assert left["schedule"] == left["pending"] == left["active"] == 0 and not any(left["lanes"].values())
    assert abandoned and sum(recovered.values()) >= len(abandoned), "the run abandoned jobs and the checker took them back"

    # A late worker (every abandoned job was recovered and completed since) is refused.
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    before = snapshot(r)
    for j in abandoned:
        assert q.complete(j) is False
        assert q.fail(j, "late", retry_in=0) is emq.FailOutcome.REFUSED
        assert q.extend(j, 1) is False
    assert snapshot(r) == before
    c.close()


# ---------------------------------------------------------------------------
# Deterministic interleavings
# ---------------------------------------------------------------------------


class HoldingProxy:
    """A TCP proxy in front of the server. Armed, it holds the first chunk a
    client sends that holds `MULTI` (the call's `MULTI … EXEC`, sent after all
    its reads and its `WATCH`) until released."""

    def __init__(self, port: int):
        self.target = ("127.0.0.1", port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.url = f"redis://127.0.0.1:{self.listener.getsockname()[1]}"
        self.armed = False
        self.held = threading.Event()
        self.release = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self):
        self.release.set()
        for sock in [self.listener, *self.sockets]:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self.sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, False), daemon=True).start()

    def _pump(self, src, dst, from_client):
        try:
            while True:
                data = src.recv(1 << 16)
                if not data:
                    break
                if from_client and self.armed and b"MULTI\r\n" in data.upper():
                    self.armed = False
                    self.held.set()
                    self.release.wait(30)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def hold(self, fn):
        """Runs `fn()` in a thread until its EXEC is held; returns `finish`, which
        lets the EXEC through and gives fn's result (or raises its error)."""
        self.held.clear()
        self.release.clear()
        self.armed = True
        box: dict = {}

        def run():
            try:
                box["out"] = fn()
            except BaseException as e:  # noqa: BLE001 - re-raised by finish
                box["err"] = e

        t = threading.Thread(target=run)
        t.start()
        assert self.held.wait(10), "the held call never reached its EXEC"

        def finish():
            self.release.set()
            t.join(30)
            assert not t.is_alive(), "the held call did not return"
            if "err" in box:
                raise box["err"]
            return box.get("out")

        return finish


@pytest.fixture
def pair(server):
    """(held, other, r): a Queue whose calls go through a HoldingProxy, one that
    goes straight to the server, and redis-py."""
    proxy = HoldingProxy(server.port)
    held_client = emq.connect(proxy.url)
    other_client = emq.connect(server.url)
    held = emq.Queue(held_client, Q)
    held.proxy = proxy
    yield held, emq.Queue(other_client, Q)
    held_client.close()
    other_client.close()
    proxy.close()


def interleave(held: emq.Queue, first, then):
    """`first` (through the proxy) reads and watches, `then` runs whole, then
    `first`'s EXEC goes through: (first's result, then's result)."""
    finish = held.proxy.hold(first)
    out_then = then()
    return finish(), out_then


def test_two_claims_of_one_job(pair, r):
    held, other = pair
    other.add("x", id="x")
    got_held, got_other = interleave(held, lambda: held.claim(1), lambda: other.claim(1))
    assert [j.id for j in got_other] == ["x"]
    assert got_held == [], "the held claim's EXEC was aborted and its retry found nothing"
    assert_invariants(r, P)


def test_claim_while_a_producer_appends(pair, r):
    held, other = pair
    other.add("x", id="x")
    got, _ = interleave(held, lambda: held.claim(2), lambda: other.add("y", id="y"))
    assert [j.id for j in got] == ["x"]
    assert lrange(r, PENDING) == ["y"]
    assert_invariants(r, P)


def test_late_complete_while_the_stalled_check_recovers(pair, r):
    held, other = pair
    other.add("x", id="x", lane="A")
    [j] = other.claim(1, lease=HOUR)
    expire_lease(r, P, ["x"])
    done, (back, dead) = interleave(held, lambda: held.complete(j), lambda: other.stalled_check(max_stalled=None))
    assert back == ["x"] and dead == []
    assert done is False, "recovered first: the late complete is refused"
    assert r.hget(job_key("x"), "state") == b"pending"
    assert_invariants(r, P)


def test_stalled_check_while_a_worker_completes(pair, r):
    held, other = pair
    other.add("x", id="x")
    [j] = other.claim(1, lease=HOUR)
    expire_lease(r, P, ["x"])
    (back, dead), done = interleave(held, lambda: held.stalled_check(max_stalled=None), lambda: other.complete(j))
    assert done is True
    assert (back, dead) == ([], []), "completed first: nothing to recover"
    assert r.hget(job_key("x"), "state") == b"done"
    assert_invariants(r, P)


def test_two_claims_with_a_ghost_at_the_head_of_pending(pair, r):
    """Both claims read [ghost]; the second EXEC must not pop the live job that
    came to the head meanwhile (it would be lost: in no list, row pending)."""
    held, other = pair
    r.rpush(PENDING, "ghost")
    other.add("x", id="x")
    got_held, got_other = interleave(held, lambda: held.claim(1), lambda: other.claim(1))
    claimed = [j.id for j in got_held + got_other]
    assert_invariants(r, P, where="after both claims")
    assert claimed in ([], ["x"])
    if not claimed:
        assert lrange(r, PENDING) == ["x"]


def _lane_in_ring_but_empty(q):
    """Lane A served its last id: it is still in the ring, and empty."""
    q.add("a", id="a1", lane="A")
    [j] = q.claim(1, lease=HOUR)
    return j


def test_claim_drops_an_empty_lane_while_a_producer_adds_to_it(pair, r):
    held, other = pair
    _lane_in_ring_but_empty(other)
    got, _ = interleave(held, lambda: held.claim(1), lambda: other.add("y", id="y1", lane="A"))
    assert_invariants(r, P, where="claim dropped lane A while y1 joined it")
    # Added first: the held claim (retried) takes y1; else the next claim does.
    assert [j.id for j in got + other.claim(5)] == ["y1"]


def test_claim_drops_an_empty_lane_while_promote_moves_a_job_into_it(pair, r):
    held, other = pair
    _lane_in_ring_but_empty(other)
    other.add("z", id="z1", lane="A", delay=HOUR)
    make_due(r, P, ["z1"])
    got, _ = interleave(held, lambda: held.claim(1), lambda: other.promote())
    assert_invariants(r, P, where="claim dropped lane A while z1 was promoted into it")
    assert [j.id for j in got + other.claim(5)] == ["z1"]


def test_promote_while_a_claim_drops_the_lane(pair, r):
    held, other = pair
    _lane_in_ring_but_empty(other)
    other.add("z", id="z1", lane="A", delay=HOUR)
    make_due(r, P, ["z1"])
    n, _ = interleave(held, lambda: held.promote(), lambda: other.claim(1))
    assert n == 1
    assert_invariants(r, P)
    assert [j.id for j in other.claim(5)] == ["z1"]


def test_add_while_a_claim_drops_the_lane(pair, r):
    held, other = pair
    _lane_in_ring_but_empty(other)
    interleave(held, lambda: held.add("y", id="y1", lane="A"), lambda: other.claim(1))
    assert_invariants(r, P)
    assert [j.id for j in other.claim(5)] == ["y1"]


def test_fail_while_a_claim_drops_the_lane(pair, r):
    held, other = pair
    j = _lane_in_ring_but_empty(other)
    out, _ = interleave(held, lambda: held.fail(j, "again", retry_in=0), lambda: other.claim(1))
    assert out == "scheduled"
    assert_invariants(r, P)
    assert [x.id for x in other.claim(5)] == ["a1"]


def test_stalled_check_while_a_claim_drops_the_lane(pair, r):
    held, other = pair
    _lane_in_ring_but_empty(other)
    expire_lease(r, P, ["a1"])
    (back, _), _ = interleave(held, lambda: held.stalled_check(max_stalled=None), lambda: other.claim(1))
    assert back == ["a1"]
    assert_invariants(r, P)
    assert [x.id for x in other.claim(5)] == ["a1"]


def _lane_full_and_out_of_the_ring(q):
    """Lane A with limit 1, its one job active, and A out of the ring."""
    q.set_lane_limit("A", 1)
    q.add("a", id="a1", lane="A")
    [j] = q.claim(1, lease=HOUR)
    q.claim(1)  # A found full: it leaves the ring
    assert q.counts().ring == 0
    return j


def test_complete_frees_a_slot_while_a_producer_adds_to_the_lane(pair, r):
    held, other = pair
    j = _lane_full_and_out_of_the_ring(other)
    done, _ = interleave(held, lambda: held.complete(j), lambda: other.add("y", id="y1", lane="A"))
    assert done is True
    assert_invariants(r, P, where="complete freed lane A's slot while y1 joined it")
    assert [x.id for x in other.claim(5)] == ["y1"]


def test_add_while_complete_frees_a_slot(pair, r):
    held, other = pair
    j = _lane_full_and_out_of_the_ring(other)
    _, done = interleave(held, lambda: held.add("y", id="y1", lane="A"), lambda: other.complete(j))
    assert done is True
    assert_invariants(r, P)
    assert [x.id for x in other.claim(5)] == ["y1"]


def test_resume_while_a_producer_adds_to_the_paused_lane(pair, r):
    held, other = pair
    other.pause_lane("A")
    interleave(held, lambda: held.resume_lane("A"), lambda: other.add("y", id="y1", lane="A"))
    assert_invariants(r, P, where="resume of lane A while y1 joined it")
    assert [x.id for x in other.claim(5)] == ["y1"]


def test_raising_the_limit_while_a_producer_adds_to_the_full_lane(pair, r):
    held, other = pair
    _lane_full_and_out_of_the_ring(other)
    interleave(held, lambda: held.set_lane_limit("A", 2), lambda: other.add("y", id="y1", lane="A"))
    assert_invariants(r, P, where="limit raised on lane A while y1 joined it")
    assert [x.id for x in other.claim(5)] == ["y1"]


def test_pause_while_a_claim_serves_the_lane(pair, r):
    held, other = pair
    other.add_many([{"data": b"", "id": "a1", "lane": "A"}, {"data": b"", "id": "a2", "lane": "A"}])
    got, _ = interleave(held, lambda: held.claim(1), lambda: other.pause_lane("A"))
    # Either order is a sequential one: claimed first (a1), or paused first (nothing).
    assert [j.id for j in got] in (["a1"], [])
    assert_invariants(r, P)


def test_claim_while_a_complete_frees_a_slot_of_the_same_lane(pair, r):
    """The claim does not watch the control hash of a lane it serves: its
    `active` grows by HINCRBY, which commutes with a complete's decrement (I4)."""
    held, other = pair
    other.add_many([{"data": b"", "id": "a1", "lane": "A"}, {"data": b"", "id": "a2", "lane": "A"}])
    [j1] = other.claim(1, lease=HOUR)
    got, done = interleave(held, lambda: held.claim(1), lambda: other.complete(j1))
    assert done is True and [j.id for j in got] == ["a2"]
    assert r.hget(P + "lanectl:A", "active") == b"1"
    assert_invariants(r, P)


def test_claim_while_the_stalled_check_recovers_a_job_of_the_same_lane(pair, r):
    held, other = pair
    other.add_many([{"data": b"", "id": "a1", "lane": "A"}, {"data": b"", "id": "a2", "lane": "A"}])
    other.claim(1, lease=HOUR)
    expire_lease(r, P, ["a1"])
    got, (back, _) = interleave(held, lambda: held.claim(1), lambda: other.stalled_check(max_stalled=None))
    assert back == ["a1"] and [j.id for j in got] == ["a2"]
    assert lrange(r, lane_key("A")) == ["a1"]
    assert r.hget(P + "lanectl:A", "active") == b"1"
    assert_invariants(r, P)

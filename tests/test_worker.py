"""Workers (SPEC §7, §8): a killed worker's job recovered by another, stalled jobs
dying, work found without wake tokens, wire errors and a server restart ridden
out, graceful stop, the aio worker, the stalled sweeper, and the `emq` command.

Worker processes are `python -m emq worker tests.worker_handlers:…`, run from
the repository root; their handlers record `start`/`finish` in a Redis list, so
one history covers every process. Every wait polls for a condition with a
generous deadline (the machine is shared and noisy); no test asserts how late
anything was.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import redis

import emq
import emq.aio
from emq.embedded import Server, module_path

import worker_handlers as wh

REPO = Path(__file__).resolve().parent.parent


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def keys(q: str) -> dict[str, str]:
    p = f"emq:{{{q}}}:"
    return {k: p + k for k in ("schedule", "pending", "active", "dead", "ring", "wake")} | {"prefix": p}


def wait_for(cond, timeout: float, what: str, *, every: float = 0.05, show=None):
    """Polls `cond()` until it is truthy (returns it) or `timeout` s pass (fails
    with `what` and what `show()` says)."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            extra = f"\n  state: {show()}" if show else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{extra}")
        time.sleep(every)


def history(r: redis.Redis) -> list[tuple[str, ...]]:
    return [tuple(e.decode().split()) for e in r.lrange(wh.LOG, 0, -1)]


def starts(r: redis.Redis, job_id: str) -> list[str]:
    """The tags of the workers that started `job_id`, in order."""
    return [e[1] for e in history(r) if e[0] == "start" and e[2] == job_id]


def finishes(r: redis.Redis, job_id: str) -> list[str]:
    return [e[1] for e in history(r) if e[0] == "finish" and e[2] == job_id]


def state(q: emq.Queue, job_id: str) -> str | None:
    job = q.get(job_id)
    return job.state if job else None


class Procs:
    """Worker subprocesses started by one test; all killed at its end."""

    def __init__(self, tmp_path: Path):
        self.tmp_path = tmp_path
        self.started: list[subprocess.Popen] = []

    def worker(self, url: str, queue: str, tag: str, *args: str, block: bool = False, handler: str = "record") -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
        env.update(EMQ_TEST_URL=url, EMQ_TEST_TAG=tag, EMQ_TEST_BLOCK="1" if block else "0")
        out = open(self.tmp_path / f"worker-{tag}.log", "wb")
        p = subprocess.Popen(
            [sys.executable, "-m", "emq", "-v", "worker", f"tests.worker_handlers:{handler}", "--queue", queue, "--url", url, *args],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        p.tag = tag  # type: ignore[attr-defined]
        self.started.append(p)
        return p

    def output(self, p: subprocess.Popen) -> str:
        return (self.tmp_path / f"worker-{p.tag}.log").read_text(errors="replace")  # type: ignore[attr-defined]

    def kill_all(self) -> None:
        for p in self.started:
            if p.poll() is None:
                p.kill()
                p.wait(10)


@pytest.fixture
def procs(tmp_path):
    ps = Procs(tmp_path)
    yield ps
    ps.kill_all()


@pytest.fixture
def log_env(server, monkeypatch):
    """In-process handlers of worker_handlers log to this server as `B`."""
    monkeypatch.setenv("EMQ_TEST_URL", server.url)
    monkeypatch.setenv("EMQ_TEST_TAG", "B")
    monkeypatch.setenv("EMQ_TEST_BLOCK", "0")


@contextlib.contextmanager
def running(worker, *, join_s: float = 30.0):
    """Runs `worker.run()` on a thread for the block; stops and joins it after."""
    result: dict = {}

    def target():
        try:
            result["counters"] = worker.run()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            result["error"] = e

    t = threading.Thread(target=target, name="test-worker", daemon=True)
    t.start()
    try:
        yield result
    finally:
        worker.stop()
        t.join(join_s)
        assert not t.is_alive(), "the worker did not stop"
        assert "error" not in result, f"worker.run() raised {result.get('error')!r}"


def parked(worker, beats: int = 2):
    """Waits until the worker has beaten `beats` times (it is running and idle)."""
    wait_for(lambda: worker.counters.snapshot()["beats"] >= beats, 15, f"{beats} beats", show=worker.counters.snapshot)


# ---------------------------------------------------------------------------
# 1. A worker killed mid-job: another recovers the job and finishes it once.


# A queue's claims and completes: the plan in the worker, or emq's server module
# (`emq.Queue(..., backend="module")`, `emq worker --backend module`).
BACKENDS = ["plan", pytest.param("module", marks=pytest.mark.skipif(module_path() is None, reason="./dev module has not built it"))]


@pytest.mark.parametrize("backend", BACKENDS)
def test_killed_worker_job_is_recovered_and_finished_once(server, r, procs, log_env, backend):
    qn = "kill"
    q = emq.Queue(emq.connect(server.url), qn)
    lease, beat = 2, 0.3
    q.add(json.dumps({"sleep": 0.05}), id="X")
    a = procs.worker(
        server.url, qn, "A", "--concurrency", "1", "--lease", str(lease), "--beat", str(beat), "--backend", backend, block=True
    )
    wait_for(lambda: starts(r, "X") == ["A"], 20, "worker A to start X", show=lambda: (history(r), a.poll()))
    assert q.get("X").state == "active"

    b = emq.Worker(emq.Queue(emq.connect(server.url), qn, backend=backend), wh.record, concurrency=2, lease=lease, beat=beat)
    with running(b) as ran:
        parked(b)
        assert starts(r, "X") == ["A"], "B took X while A held its lease"
        a.kill()
        assert a.wait(10) == -signal.SIGKILL
        # The lease runs out within `lease` of A's last extend; B reaps it on
        # its next beat and runs it. Generous slack for a loaded machine.
        wait_for(
            lambda: state(q, "X") == "done",
            lease + beat + 15,
            "B to finish X",
            show=lambda: (q.get("X"), history(r), b.counters.snapshot()),
        )
        time.sleep(3 * beat)  # a duplicate run would show by now
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands

    assert starts(r, "X") == ["A", "B"]
    assert finishes(r, "X") == ["B"]
    job = q.get("X")
    assert job.state == "done" and job.attempts == 2 and job.token is None
    assert c["recovered"] >= 1 and c["completed"] == 1 and c["dead"] == 0 and c["refused"] == 0
    assert r.zcard(keys(qn)["active"]) == 0 and r.llen(keys(qn)["pending"]) == 0 and r.zcard(keys(qn)["dead"]) == 0


# ---------------------------------------------------------------------------
# 2. recovery="stalled": a job that stalls more than max_stalled times dies.


def _start_and_kill(procs, r, url: str, qn: str, tag: str, job_id: str, *args: str) -> None:
    p = procs.worker(url, qn, tag, "--concurrency", "1", *args, block=True)
    wait_for(
        lambda: tag in starts(r, job_id),
        25,
        f"worker {tag} to start {job_id}",
        show=lambda: (history(r), p.poll(), procs.output(p)[-2000:]),
    )
    p.kill()
    p.wait(10)


def test_stalled_recovery_max_stalled_0_kills_on_first_stall(server, r, procs, log_env):
    qn = "stall0"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add(json.dumps({"sleep": 0}), id="X")
    _start_and_kill(procs, r, server.url, qn, "A", "X", "--lease", "1.5", "--beat", "0.3")

    b = emq.Worker(emq.Queue(emq.connect(server.url), qn), wh.record, lease=1.5, beat=0.3, recovery="stalled", max_stalled=0)
    with running(b) as ran:
        wait_for(lambda: state(q, "X") == "dead", 1.8 + 15, "X to die", show=lambda: (q.get("X"), b.counters.snapshot()))
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands
    job = q.get("X")
    assert job.error == "stalled" and job.stalls == 1 and job.token is None
    assert r.zscore(keys(qn)["dead"], "X") is not None
    assert r.zcard(keys(qn)["active"]) == 0 and r.llen(keys(qn)["pending"]) == 0
    assert starts(r, "X") == ["A"] and finishes(r, "X") == []
    assert c["dead"] == 1 and c["recovered"] == 0


def test_stalled_recovery_dies_after_max_stalled_kills(server, r, procs, log_env):
    qn = "stall1"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add(json.dumps({"sleep": 0}), id="X", max_attempts=5)
    opts = ("--lease", "1.5", "--beat", "0.3", "--recovery", "stalled", "--max-stalled", "1")
    _start_and_kill(procs, r, server.url, qn, "A1", "X", *opts)
    # A2 recovers X (its first stall: within max_stalled), runs it, and is killed too.
    _start_and_kill(procs, r, server.url, qn, "A2", "X", *opts)
    job = q.get("X")
    assert job.state == "active" and job.stalls == 1 and job.attempts == 2

    b = emq.Worker(emq.Queue(emq.connect(server.url), qn), wh.record, lease=1.5, beat=0.3, recovery="stalled", max_stalled=1)
    with running(b) as ran:
        wait_for(lambda: state(q, "X") == "dead", 1.8 + 15, "X to die", show=lambda: (q.get("X"), b.counters.snapshot()))
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands
    job = q.get("X")
    assert job.error == "stalled" and job.stalls == 2 and job.token is None
    assert r.zscore(keys(qn)["dead"], "X") is not None
    assert starts(r, "X") == ["A1", "A2"] and finishes(r, "X") == []
    assert c["dead"] == 1 and c["claimed"] == 0


# ---------------------------------------------------------------------------
# 3. No wake token: the worker still finds the work within about a beat.


def test_rows_written_without_wake_are_worked_within_a_beat(server, r):
    qn = "nowake"
    k = keys(qn)
    done: list[str] = []
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: done.append(job.id), beat=0.3, concurrency=4, idle_beat=0.3)
    with running(w):
        parked(w, 3)
        # Ready rows pushed straight into pending, and rows due soon put straight
        # into schedule: no wake token for either.
        now_ms = int(r.time()[0]) * 1000 + int(r.time()[1]) // 1000
        pipe = r.pipeline(transaction=True)
        for i in range(5):
            pipe.hset(
                f"{k['prefix']}job:p{i}",
                mapping={"state": "pending", "data": "x", "attempts": 0, "max_attempts": 3, "due": now_ms, "created": now_ms},
            )
            pipe.rpush(k["pending"], f"p{i}")
        for i in range(5):
            due = now_ms + 200 + 100 * i
            pipe.hset(
                f"{k['prefix']}job:s{i}",
                mapping={"state": "scheduled", "data": "x", "attempts": 0, "max_attempts": 3, "due": due, "created": now_ms},
            )
            pipe.zadd(k["schedule"], {f"s{i}": due})
        pipe.delete(k["wake"])
        pipe.execute()
        want = {f"p{i}" for i in range(5)} | {f"s{i}" for i in range(5)}
        wait_for(
            lambda: want <= set(done), 5, "the rows written without wake to be done", show=lambda: (sorted(done), w.counters.snapshot())
        )
    assert sorted(done) == sorted(want)
    assert r.llen(k["pending"]) == 0 and r.zcard(k["schedule"]) == 0 and r.zcard(k["active"]) == 0


def test_short_delays_added_while_workers_park_wake_them_for_the_due_time(server, r):
    """SPEC §7: an add (and a fail that retries later) whose job becomes the new
    head of `schedule` appends the token "", so a parked worker wakes, sees the
    earlier due time and parks until it. The beat here is a minute: without the
    token every job would wait for it."""
    qn = "shortdelay"
    k = keys(qn)
    ran: dict[str, tuple[int, int]] = {}  # id -> (due, started), server ms
    q = emq.Queue(emq.connect(server.url), qn)

    def handler(job):
        ran[job.id] = (int(r.hget(f"{k['prefix']}job:{job.id}", "due")), server_ms(r))

    workers = [emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, beat=60, concurrency=2) for _ in range(2)]
    with running(workers[0]), running(workers[1]):
        for w in workers:
            parked(w, 1)
        rng = random.Random(7)
        ids = []
        for delay in (10, 300, 40, 150, 20, 80):
            time.sleep(rng.uniform(0.0, 0.1))  # at random moments while they park
            ids.append(q.add(b"x", delay=delay / 1000))
        wait_for(lambda: set(ids) <= set(ran), 10, "the delayed jobs to run", show=lambda: (ran, [w.counters.snapshot() for w in workers]))
    for id_ in ids:
        due, started = ran[id_]
        assert started >= due, f"{id_} ran {due - started} ms early"
    assert r.zcard(k["schedule"]) == 0


def test_a_retry_due_before_the_schedule_head_wakes_a_parked_worker(server, r):
    qn = "shortretry"
    k = keys(qn)
    runs: list[int] = []
    q = emq.Queue(emq.connect(server.url), qn)
    q.add(b"far", delay=3600)  # the head of schedule, an hour away

    def handler(job):
        runs.append(server_ms(r))
        if len(runs) == 1:
            raise RuntimeError("again soon")

    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, beat=60, concurrency=1)
    with running(w):
        parked(w, 1)
        q.add(b"now")
        wait_for(lambda: len(runs) >= 2, 15, "the retry to run", show=lambda: (runs, w.counters.snapshot()))
    # The default backoff of a first failure is 0.5 to 1 s: the retry ran then,
    # long before the beat, woken by the token its fail appended.
    assert 400 <= runs[1] - runs[0] < 10_000
    assert r.zcard(k["schedule"]) == 1


def test_a_worker_with_every_slot_taken_leaves_no_pop_blocking_on_wake(server, r):
    """SPEC §8: the park thread's pop may outlive a wait that ended at its due
    time or its beat, but a worker whose slots are all taken ends it: it would
    take the tokens meant for workers with room. The job here is written
    without a token, so no token ends the pop: the worker finds the job at its
    (short) beat and must end the pop itself."""
    qn = "fullpop"
    k = keys(qn)
    release = threading.Event()
    started = threading.Event()

    def handler(job):
        started.set()
        release.wait(30)

    def popping() -> bool:  # the worker's park connection is blocked now (flag b)
        park_id = w._park._park_id
        return park_id is not None and any(c["id"] == str(park_id) and "b" in c["flags"] for c in r.client_list())

    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, beat=0.2, idle_beat=0.2, concurrency=1)
    with running(w):
        parked(w, 1)
        wait_for(popping, 10, "the idle worker's pop")
        r.hset(f"{k['prefix']}job:x", mapping={"state": "pending", "data": "x", "attempts": 0, "max_attempts": 3, "due": server_ms(r)})
        r.rpush(k["pending"], "x")  # no token
        wait_for(started.is_set, 10, "the job to start", show=w.counters.snapshot)
        try:
            wait_for(lambda: not popping(), 10, "the full worker to end its pop")
            for _ in range(10):  # and not to pop again while full (its pops last 200 ms)
                time.sleep(0.05)
                assert not popping(), "a worker with no free slot pops wake"
        finally:
            release.set()


def test_workers_that_find_a_due_job_taken_wait_a_little_longer_for_the_next(server):
    """SPEC §8: parked workers learn the same due time; one that found nothing
    at a due time it waited for waits `YIELD_S` past the next ones, until it
    finds work or learns of an earlier due time (it may be the only one that
    knows it); a wake before its due time (a token) changes nothing."""
    from emq.worker import YIELD_S

    w = emq.Worker(emq.Queue(emq.connect(server.url), "yield"), lambda job: None)
    now = time.monotonic()

    def beat(*, waited_for, found, learned):
        w._beat._waited_for, w._beat._found = waited_for, found
        w._beat._yield(learned)
        return w._beat._lag

    assert w._beat._lag == 0.0
    assert beat(waited_for=now - 0.001, found=False, learned=now + 1) == YIELD_S, "another worker took it"
    assert beat(waited_for=now + 1, found=False, learned=now + 1) == YIELD_S, "a token before the due time"
    assert beat(waited_for=now - 0.001, found=True, learned=now + 2) == 0.0, "it found work"
    assert beat(waited_for=now + 1, found=False, learned=now + 1) == 0.0, "a token before the due time"
    assert beat(waited_for=now - 0.001, found=False, learned=None) == YIELD_S
    assert beat(waited_for=None, found=False, learned=now + 5) == 0.0, "the first due time it learns"
    beat(waited_for=now - 0.001, found=False, learned=now + 5)
    assert beat(waited_for=now + 5, found=False, learned=now + 3) == 0.0, "an earlier due time: news"


def test_an_idle_worker_parks_for_idle_beat_and_wakes_for_work_due_times_and_leases(server, r):
    """SPEC §8 (idle cost): a worker that found nothing to do parks up to
    `idle_beat`, not `beat`; a token (work made ready, a new head of
    `schedule`), the next due time and the next lease deadline it saw end the
    park sooner, so nothing waits for the idle beat but a lost token."""
    qn = "idle"
    done: list[str] = []
    q = emq.Queue(emq.connect(server.url), qn)
    # A job held by a worker that died: the idle worker sees its lease deadline in
    # its stalled check and wakes for it.
    q.add(b"orphan")
    (orphan,) = q.claim(1, lease=2)
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: done.append(job.id), beat=0.05, idle_beat=60)
    with running(w):
        parked(w, 1)
        time.sleep(1.0)
        assert w.counters.snapshot()["beats"] <= 3, "an idle worker beats at its beat"
        ready = q.add(b"now")
        soon = q.add(b"soon", delay=0.2)
        wait_for(lambda: {ready, soon} <= set(done), 10, "ready and delayed work", show=w.counters.snapshot)
        wait_for(lambda: orphan.id in done, 15, "the orphan's recovery", show=w.counters.snapshot)
    assert w.counters.snapshot()["beats"] < 40


def test_a_worker_waiting_for_a_due_time_pings_the_server_just_before_it():
    """A parked worker that waits exactly for a due time wakes `WARM_S` early and
    pings the server (so the due job's promote runs on warm cores); a worker
    parked with nothing due sends nothing, and the due job still runs at its
    due time, not before."""
    with Server() as srv:
        r = redis.Redis(port=srv.port)
        qn = "warm"
        ran: dict[str, int] = {}
        q = emq.Queue(emq.connect(srv.url), qn)
        w = emq.Worker(emq.Queue(emq.connect(srv.url), qn), lambda job: ran.setdefault(job.id, server_ms(r)), idle_beat=60)
        with running(w):
            parked(w, 1)
            time.sleep(0.3)
            r.config_resetstat()
            time.sleep(1.0)
            assert "cmdstat_ping" not in r.info("commandstats"), "a worker with nothing due pinged"
            due = server_ms(r) + 400
            job = q.add(b"x", at=due / 1000)
            wait_for(lambda: job in ran, 10, "the due job", show=w.counters.snapshot)
            assert ran[job] >= due
            pings = r.info("commandstats").get("cmdstat_ping", {}).get("calls", 0)
            assert 1 <= pings <= 2, f"{pings} pings for one due time"


def test_a_lost_token_is_healed_within_idle_beat(server, r):
    qn = "lost"
    k = keys(qn)
    done: list[str] = []
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: done.append(job.id), beat=0.05, idle_beat=0.5)
    with running(w):
        parked(w, 1)
        now_ms = server_ms(r)
        r.hset(f"{k['prefix']}job:x", mapping={"state": "pending", "data": "x", "attempts": 0, "max_attempts": 3, "due": now_ms})
        r.rpush(k["pending"], "x")  # no token
        wait_for(lambda: "x" in done, 10, "the job written without a token", show=w.counters.snapshot)


def test_wake_deleted_continuously_work_still_done(server, r):
    qn = "wakedel"
    k = keys(qn)
    done: list[str] = []

    def handler(job):
        time.sleep(0.02)  # busy workers leave tokens in wake: the deleter takes them
        done.append(job.id)

    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, beat=0.3, concurrency=2, idle_beat=0.3)
    stop = threading.Event()
    deletes = Counter()

    def deleter():
        rr = redis.Redis.from_url(server.url)
        while not stop.is_set():
            deletes["n"] += rr.delete(k["wake"])
        rr.close()

    d = threading.Thread(target=deleter, daemon=True)
    with running(w):
        parked(w, 3)
        d.start()
        try:
            q = emq.Queue(emq.connect(server.url), qn)
            ids = []
            for i in range(40):
                ids.append(q.add("x", id=f"j{i}", delay=(0 if i % 2 else (100 + 10 * i) / 1000)))
                time.sleep(0.01)
            wait_for(
                lambda: set(ids) <= set(done),
                5,
                "the jobs to be done with wake deleted",
                show=lambda: (len(done), q.counts(), w.counters.snapshot()),
            )
        finally:
            stop.set()
            d.join(5)
    assert Counter(done) == Counter(ids)
    assert deletes["n"] > 0, "the deleter never caught a wake token: the test proved nothing"


# ---------------------------------------------------------------------------
# 4. Connections killed and the server restarted (AOF on): degraded, back, no job lost.


@pytest.fixture
def aof_server(server):
    s = Server(server.binary, extra=["--appendonly", "yes", "--appendfsync", "always"]).start()
    try:
        rr = redis.Redis.from_url(s.url)
        assert rr.config_get("appendonly") == {"appendonly": "yes"}
        assert rr.config_get("appendfsync") == {"appendfsync": "always"}
        rr.close()
        yield s
    finally:
        s.stop()


# A connection killed while emq's core probes a fresh connection (its INFO right
# after connecting) comes out as emq.ServerError, not emq.ConnectionError: see
# test_connection_dropped_during_the_connect_probe_is_a_connection_error. The
# producer of the chaos test (not the subject here) retries those as well.
WIRE_MESSAGES = ("unexpected end of file", "Connection reset by peer", "Broken pipe", "os error")


def _retrying(fn, *, tries: int = 200):
    """Calls `fn` through connection errors (the chaos of the test)."""
    for i in range(tries):
        try:
            return fn()
        except (redis.ConnectionError, redis.TimeoutError, emq.ConnectionError, emq.ContentionError, emq.ServerError) as e:
            if isinstance(e, emq.ServerError) and not any(m in str(e) for m in WIRE_MESSAGES):
                raise
            if i == tries - 1:
                raise
            time.sleep(0.05)


def test_killed_connections_and_restart_lose_no_job(aof_server):
    url = aof_server.url
    qn = "chaos"
    k = keys(qn)
    runs: Counter[str] = Counter()
    runs_lock = threading.Lock()

    def handler(job):
        time.sleep(0.005)
        with runs_lock:
            runs[job.id] += 1

    w = emq.Worker(emq.Queue(emq.connect(url), qn), handler, concurrency=4, lease=2, beat=0.2, idle_beat=0.2)
    producer = emq.Queue(emq.connect(url), qn)
    ids: list[str] = []

    def add_batch(batch: list[dict]) -> None:
        def once():
            # A retry of an add that was applied and whose reply was lost finds
            # every row with its own digest: the ids come back, nothing is added twice.
            assert producer.add_many(batch) == [j["id"] for j in batch]

        _retrying(once)
        ids.extend(j["id"] for j in batch)

    killer_stop = threading.Event()
    kills = Counter()

    def killer():
        rr = redis.Redis.from_url(url)
        while not killer_stop.wait(0.15):
            try:
                kills["n"] += rr.client_kill_filter(_type="normal")  # SKIPME yes: not this one
            except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                pass  # the server is restarting
        rr.close()

    kt = threading.Thread(target=killer, daemon=True)
    n = 0
    with running(w) as ran:
        parked(w, 2)
        kt.start()
        try:
            for round_ in range(12):
                batch = [{"data": "x", "id": f"j{n + i}", "delay": (0 if i % 3 else 0.15)} for i in range(20)]
                n += len(batch)
                add_batch(batch)
                time.sleep(0.1)
                if round_ == 6:
                    # Work waiting in schedule across the restart: only the AOF keeps it.
                    add_batch([{"data": "x", "id": f"kept{i}", "delay": 1} for i in range(20)])
                    aof_server.restart()
            wait_for(lambda: kills["n"] > 0, 10, "a CLIENT KILL to hit")
        finally:
            killer_stop.set()
            kt.join(5)
        assert w.counters.snapshot()["degraded_beats"] > 0, w.counters.snapshot()
        # Back by itself: work added after the chaos is done as well.
        add_batch([{"data": "x", "id": f"after{i}"} for i in range(20)])
        rr = redis.Redis.from_url(url)

        def states() -> list:
            pipe = rr.pipeline(transaction=False)
            for i in ids:
                pipe.hget(f"{k['prefix']}job:{i}", "state")
            return pipe.execute()

        def all_done():
            return all(s == b"done" for s in _retrying(states))

        def show():
            return Counter(_retrying(states)), producer.counts(), w.counters.snapshot()

        wait_for(all_done, 25, "every job to be done", every=0.2, show=show)
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands
    print("chaos:", dict(kills), c)
    assert len(set(ids)) == len(ids) == 280
    assert set(runs) == set(ids), f"never ran: {sorted(set(ids) - set(runs))[:10]}"
    assert rr.zcard(k["active"]) == 0 and rr.llen(k["pending"]) == 0 and rr.zcard(k["schedule"]) == 0
    assert rr.zcard(k["dead"]) == 0
    assert c["degraded_beats"] > 0 and c["completed"] >= len(ids) - c["refused"]
    rr.close()


class _CutOnInfo:
    """A TCP proxy to a server that cuts a connection when the client sends INFO
    (as CLIENT KILL or a restart could, right after a connect)."""

    def __init__(self, port: int):
        import socket

        self.target = port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.cuts = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        import socket

        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._pump, args=(c, s, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, False), daemon=True).start()

    def _pump(self, src, dst, upstream: bool):
        import socket

        try:
            while data := src.recv(65536):
                if upstream and b"\r\nINFO\r\n" in data.upper():
                    self.cuts += 1
                    break
                dst.sendall(data)
        except OSError:
            pass
        for x in (src, dst):
            with contextlib.suppress(OSError):
                x.shutdown(socket.SHUT_RDWR)
            x.close()

    def close(self):
        self.sock.close()


def test_a_connection_cut_mid_call_is_a_connection_error_and_the_next_call_reconnects(server):
    """Found by the chaos test above (when the core still probed INFO on each
    connect): a connection that breaks during a call raises emq.ConnectionError
    (SPEC §10), never emq.ServerError, and is not kept for the next call."""
    proxy = _CutOnInfo(server.port)
    try:
        c = emq.connect(f"redis://127.0.0.1:{proxy.port}", connect_timeout=5, read_timeout=5)
        with pytest.raises(emq.EmqError) as e:
            c.info()
        assert proxy.cuts == 1
        assert isinstance(e.value, emq.ConnectionError), f"{type(e.value).__name__}: {e.value}"
        assert c.ping(), "the next call connects afresh"
    finally:
        proxy.close()


# ---------------------------------------------------------------------------
# 5. Graceful stop: SIGTERM lets running jobs finish, claims nothing more, exits 0.


def test_sigterm_finishes_running_jobs_and_claims_nothing_more(server, r, procs):
    qn = "term"
    k = keys(qn)
    q = emq.Queue(emq.connect(server.url), qn)
    ids = [q.add(json.dumps({"sleep": 2.0}), id=f"j{i}") for i in range(5)]
    grace = 20.0
    p = procs.worker(server.url, qn, "A", "--concurrency", "2", "--beat", "0.3", "--lease", "10", "--grace", str(grace))
    wait_for(
        lambda: len([e for e in history(r) if e[0] == "start"]) == 2,
        20,
        "two jobs to start",
        show=lambda: (history(r), procs.output(p)[-2000:]),
    )
    running_ids = [e[2] for e in history(r) if e[0] == "start"]
    p.send_signal(signal.SIGTERM)
    # More work while it stops: its wake tokens must not draw a claim either.
    late = [q.add(json.dumps({"sleep": 0}), id=f"late{i}") for i in range(2)]
    rc = p.wait(grace + 10)
    out = procs.output(p)
    assert rc == 0, out[-3000:]
    assert sorted(e[2] for e in history(r) if e[0] == "start") == sorted(running_ids), history(r)
    assert sorted(e[2] for e in history(r) if e[0] == "finish") == sorted(running_ids), history(r)
    for i in running_ids:
        assert state(q, i) == "done"
    rest = [i for i in ids + late if i not in running_ids]
    for i in rest:
        job = q.get(i)
        assert job.state == "pending" and job.attempts == 0, job
    assert sorted(x.decode() for x in r.lrange(k["pending"], 0, -1)) == sorted(rest)
    assert r.zcard(k["active"]) == 0


def test_sigterm_job_outlasting_grace_is_left_to_recovery(server, r, procs, log_env):
    """A job that outlasts the grace period: the process still exits, and the
    job is left to recovery (Worker's docstring), so another worker runs it."""
    qn = "outlast"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add(json.dumps({"sleep": 0}), id="X")
    grace = 1.0
    a = procs.worker(server.url, qn, "A", "--lease", "1.5", "--beat", "0.3", "--grace", str(grace), block=True)
    wait_for(lambda: starts(r, "X") == ["A"], 20, "worker A to start X", show=lambda: (history(r), procs.output(a)[-2000:]))
    a.send_signal(signal.SIGTERM)
    try:
        rc = a.wait(grace + 10)
    except subprocess.TimeoutExpired:
        job = q.get("X")
        lease_left = job.lease_deadline_ms - q.client.time_ms() if job.lease_deadline_ms else None
        pytest.fail(
            f"the worker did not exit {grace} s grace + 10 s after SIGTERM; X is {job.state}, "
            f"its lease still {lease_left} ms ahead\n{procs.output(a)[-2000:]}"
        )
    assert rc == 0, procs.output(a)[-3000:]
    b = emq.Worker(emq.Queue(emq.connect(server.url), qn), wh.record, lease=1.5, beat=0.3)
    with running(b):
        wait_for(lambda: state(q, "X") == "done", 1.8 + 15, "B to finish X", show=lambda: (q.get("X"), history(r)))
    assert starts(r, "X") == ["A", "B"] and finishes(r, "X") == ["B"]


def test_run_returning_after_grace_stops_extending_the_leftover_lease(server, r, log_env):
    """`run()` gave up on a job after `grace` ("left to recovery"): its lease
    must then run out, so another worker can recover it."""
    qn = "leftover"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add(json.dumps({"sleep": 0}), id="X")
    release = threading.Event()
    a = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: release.wait(60), lease=1.5, beat=0.3, grace=0.5)
    try:
        with running(a):
            wait_for(lambda: state(q, "X") == "active", 15, "A to claim X")
        # run() has returned; A's handler still holds X.
        b = emq.Worker(emq.Queue(emq.connect(server.url), qn), wh.record, lease=1.5, beat=0.3)
        with running(b):
            wait_for(
                lambda: state(q, "X") == "done",
                1.8 + 8,
                "B to recover and finish X",
                show=lambda: (q.get("X"), q.client.time_ms(), b.counters.snapshot()),
            )
        assert starts(r, "X") == ["B"] and finishes(r, "X") == ["B"]
    finally:
        release.set()


def test_stop_waits_for_running_jobs_without_spinning_the_lease_keeper(server, r):
    """While `run()` drains after `stop()`, leases are kept every third of a
    lease as before: not extended back to back."""
    qn = "calm"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add("x", id="X")
    release = threading.Event()
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: release.wait(20), lease=30, beat=0.3, grace=20)
    try:
        with running(w):
            wait_for(lambda: state(q, "X") == "active", 15, "the worker to claim X")
            r.config_resetstat()
            w.stop()
            time.sleep(1.5)  # draining: X is still running
            extends = r.info("commandstats").get("cmdstat_zadd", {}).get("calls", 0)
            release.set()
    finally:
        release.set()
    c = w.counters.snapshot()
    assert state(q, "X") == "done"
    # A lease of 30 s is extended every 10 s: in 1.5 s of draining, once at most.
    assert extends <= 2, f"{extends} extends (ZADD XX) in 1.5 s of draining with a 30 s lease"
    assert c["lost_leases"] == 0, c


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_job_longer_than_its_lease_is_kept_by_its_worker(server, r, backend):
    """The lease keeper extends a running job's lease every third of a lease
    (with `backend="module"`, by `EMQ.EXTEND`): a stalled sweeper running
    meanwhile never takes it, and it runs once."""
    qn = "kept"
    q = emq.Queue(emq.connect(server.url), qn)
    q.add("x", id="X")
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn, backend=backend), lambda job: time.sleep(2.5), lease=0.9, beat=0.3)
    sweeper = emq.Stalled(emq.Queue(emq.connect(server.url), qn), interval=0.1, max_stalled=0)
    r.config_resetstat()
    with running(w) as ran:
        sweeper.start()
        try:
            wait_for(lambda: state(q, "X") == "done", 20, "the worker to finish X", show=lambda: q.get("X"))
        finally:
            sweeper.stop()
    job, c = q.get("X"), ran["counters"]
    assert job.state == "done" and job.attempts == 1, job
    assert c["completed"] == 1 and c["lost_leases"] == 0 and c["recovered"] == 0, c
    stats = {k.lower(): v["calls"] for k, v in r.info("commandstats").items()}
    assert (stats.get("cmdstat_emq.extend", 0) > 0) == (backend == "module"), stats


def test_stop_during_a_beat_claims_nothing_more(server, r):
    """stop() (or SIGTERM, whose handler runs as soon as a wire call of the beat
    returns) arriving mid-beat: the beat must not go on to claim."""
    qn = "midbeat"
    k = keys(qn)
    q = emq.Queue(emq.connect(server.url), qn)
    ids = [q.add("x", id=f"j{i}") for i in range(3)]
    done: list[str] = []
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), lambda job: done.append(job.id), beat=0.3)
    real = w._beat.queues[0]
    promoted = threading.Event()

    class StopDuringPromote:  # the beat's connection, with a stop arriving during PROMOTE
        def __getattr__(self, name):
            return getattr(real, name)

        def _promote_next(self, *a, **kw):
            w.stop()
            try:
                return real._promote_next(*a, **kw)
            finally:
                promoted.set()

    w._beat.queues[0] = StopDuringPromote()
    with running(w) as result:
        wait_for(promoted.is_set, 15, "the first beat's promote")
    c = result["counters"]
    assert c["claimed"] == 0 and done == [], c
    assert [x.decode() for x in r.lrange(k["pending"], 0, -1)] == ids


def test_lost_lease_counted_late_complete_refused_and_the_new_claim_kept(server, r):
    """A job whose lease was lost while its handler ran (recovered by a sweep) and
    then claimed again by the same worker: the first run's late complete is
    refused, and the second run keeps its own lease until it completes."""
    qn = "relost"
    k = keys(qn)
    q = emq.Queue(emq.connect(server.url), qn)
    q.add("x", id="X", max_attempts=5)
    release1, release2 = threading.Event(), threading.Event()
    runs: list[int] = []
    lease = 0.9

    def handler(job):
        runs.append(job.attempts)
        (release1 if job.attempts == 1 else release2).wait(20)

    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, concurrency=2, lease=lease, beat=0.3)
    try:
        with running(w) as ran:
            wait_for(lambda: runs == [1], 15, "the first run")

            # Its lease runs out (as if the keeper had been cut off) and a sweep
            # recovers the job; the worker claims it again.
            def lose():
                r.zadd(k["active"], {"X": 1}, xx=True)
                return "X" in q.stalled_check(max_stalled=None)[0]

            wait_for(lose, 15, "a sweep to recover X", every=0.01)
            wait_for(lambda: runs == [1, 2], 15, "the second run", show=lambda: (runs, q.get("X")))
            # The keeper (every lease/3) tries the first run's token and finds it
            # refused; whether it did is checked at the end.
            with contextlib.suppress(AssertionError):
                wait_for(lambda: w.counters.snapshot()["lost_leases"] >= 1, 5, "the keeper to see the first lease lost")
            release1.set()  # the first run ends: its complete is refused
            wait_for(lambda: w.counters.snapshot()["refused"] >= 1, 15, "the late complete", show=w.counters.snapshot)
            time.sleep(3 * lease)  # the second run holds X for three leases more
            release2.set()
            wait_for(lambda: state(q, "X") == "done", 15, "X to be done", show=lambda: (runs, q.get("X"), w.counters.snapshot()))
            time.sleep(lease)
    finally:
        release1.set()
        release2.set()
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands
    assert runs == [1, 2], f"X ran as attempts {runs}: the second run's lease was not kept"
    assert q.get("X").attempts == 2
    assert c["refused"] == 1 and c["completed"] == 1 and c["recovered"] == 0, c
    assert c["lost_leases"] >= 1, c


def test_sync_handler_failures_retry_then_die(server, r):
    qn = "syncfail"
    q = emq.Queue(emq.connect(server.url), qn)
    seen: Counter[str] = Counter()

    def handler(job):
        seen[job.id] += 1
        if job.data == b"fail" or (job.data == b"flaky" and job.attempts == 1):
            raise KeyError(f"nope {job.id}")

    w = emq.Worker(emq.Queue(emq.connect(server.url), qn), handler, beat=0.3)
    q.add("fail", id="bad", max_attempts=2)
    q.add("flaky", id="flaky", max_attempts=3)
    with running(w) as ran:
        wait_for(
            lambda: state(q, "bad") == "dead" and state(q, "flaky") == "done",
            15,
            "bad dead, flaky done",
            show=lambda: (q.get("bad"), q.get("flaky"), w.counters.snapshot()),
        )
    c = ran["counters"]  # what run() returned: a counter moves just after the write it counts lands
    assert seen == {"bad": 2, "flaky": 2}
    bad = q.get("bad")
    assert bad.attempts == 2 and "KeyError" in bad.error and "nope bad" in bad.error
    assert r.zscore(keys(qn)["dead"], "bad") is not None
    assert c["failed"] == 3 and c["completed"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_failed_jobs_go_through_the_group_commit(server, r, backend, monkeypatch):
    """A handler that raises hands its job to the group commit, as one that
    returns does: `Queue.fail` is never called on its own, the
    jobs are retried or dead as `fail` would leave them, and the counters
    say so."""

    def single_fail(*args, **kw):
        raise AssertionError("a failed job was settled alone, not by the group commit")

    monkeypatch.setattr(emq.Queue, "fail", single_fail)
    qn = "commitfail"
    q = emq.Queue(emq.connect(server.url), qn)

    def handler(job):
        if job.data != b"ok":
            raise ValueError(job.data.decode())

    q.add_many([{"data": b"ok"}] * 6 + [{"data": b"last", "max_attempts": 1}] * 3 + [{"data": b"again", "max_attempts": 5}] * 3)
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn, backend=backend), handler, concurrency=4, beat=0.3)
    with running(w) as ran:
        wait_for(
            lambda: q.counts().dead == 3 and q.counts().done == 6 and q.counts().active == 0,
            15,
            "every job settled",
            show=lambda: (q.counts(), w.counters.snapshot()),
        )
    c = ran["counters"]
    assert c["completed"] == 6 and c["failed"] >= 6 and c["refused"] == 0, c
    retried = [j for j in (q.get(k.decode().rsplit(":", 1)[1]) for k in r.keys(f"emq:{{{qn}}}:job:*")) if j and j.data == b"again"]
    assert len(retried) == 3 and all(j.state == "scheduled" and j.error == "ValueError: again" for j in retried)


@pytest.mark.parametrize("backend", BACKENDS)
def test_worker_serves_lanes_within_their_limits(server, r, backend):
    qn = "lanes"
    k = keys(qn)
    q = emq.Queue(emq.connect(server.url), qn)
    q.set_lane_limit("a", 1)
    lock = threading.Lock()
    active = Counter()
    most = Counter()
    done: list[str] = []

    def handler(job):
        with lock:
            active[job.lane] += 1
            most[job.lane] = max(most[job.lane], active[job.lane])
        time.sleep(0.05)
        with lock:
            active[job.lane] -= 1
            done.append(job.id)

    ids = q.add_many(
        [{"data": "x", "id": f"a{i}", "lane": "a"} for i in range(6)]
        + [{"data": "x", "id": f"b{i}", "lane": "b"} for i in range(6)]
        + [{"data": "x", "id": f"f{i}"} for i in range(6)]
    )
    w = emq.Worker(emq.Queue(emq.connect(server.url), qn, backend=backend), handler, beat=0.3, concurrency=6)
    with running(w):
        wait_for(lambda: set(ids) <= set(done), 15, "every job done", show=lambda: (sorted(done), q.counts()))
    assert Counter(done) == Counter(ids)
    assert most["a"] == 1, most  # lane a's limit
    assert r.hget(k["prefix"] + "lanectl:a", "active") in (b"0", None)
    assert r.hget(k["prefix"] + "lanectl:b", "active") in (b"0", None)
    c = q.counts()
    assert c.pending == c.active == 0 and c.lanes.get("a", 0) == c.lanes.get("b", 0) == 0


# ---------------------------------------------------------------------------
# 6. The aio worker (complete and fail paths), and emq.Stalled.


@pytest.mark.parametrize("backend", BACKENDS)
def test_aio_worker_runs_async_handlers(server, r, backend):
    qn = "aio"
    q = emq.Queue(emq.connect(server.url), qn)
    seen: Counter[str] = Counter()
    done: list[str] = []

    async def handler(job):
        seen[job.id] += 1
        await asyncio.sleep(0.02)
        if job.data == b"fail" or (job.data == b"flaky" and job.attempts == 1):
            raise ValueError(f"boom {job.id}")
        done.append(job.id)

    async def main():
        w = emq.aio.Worker(emq.Queue(emq.connect(server.url), qn, backend=backend), handler, beat=0.3, concurrency=4)
        task = asyncio.create_task(w.run())
        ok = [q.add("ok", id=f"ok{i}") for i in range(5)]
        q.add("fail", id="bad", max_attempts=1)
        q.add("flaky", id="flaky", max_attempts=2)  # fails once, retried after the backoff (≤ 1 s)
        deadline = time.monotonic() + 15
        while not (set(ok) | {"flaky"} <= set(done) and state(q, "bad") == "dead"):
            assert time.monotonic() < deadline, (done, q.counts(), w.counters.snapshot())
            assert not task.done(), task
            await asyncio.sleep(0.05)
        w.stop()
        return await asyncio.wait_for(task, 30)

    c = asyncio.run(main())
    assert Counter(done) == Counter([f"ok{i}" for i in range(5)] + ["flaky"])
    assert seen["flaky"] == 2 and seen["bad"] == 1
    bad = q.get("bad")
    assert bad.state == "dead" and "ValueError" in bad.error and "boom bad" in bad.error
    flaky = q.get("flaky")
    assert flaky.state == "done" and flaky.attempts == 2 and "boom flaky" in (flaky.error or "boom flaky")
    assert c["completed"] == 6 and c["failed"] == 2 and c["claimed"] == 8  # flaky twice
    assert r.zcard(keys(qn)["dead"]) == 1


def test_aio_worker_refuses_a_sync_handler(server):
    with pytest.raises(emq.ArgumentError):
        emq.aio.Worker(emq.Queue(emq.connect(server.url), "x"), lambda job: None)


@pytest.mark.parametrize("max_stalled", [1, 0])
def test_stalled_sweeper_recovers_expired_leases_on_its_interval(server, r, max_stalled):
    qn = "sweeper"
    k = keys(qn)
    q = emq.Queue(emq.connect(server.url), qn)
    q.add("x", id="X")
    q.add("y", id="Y")
    (held,) = [j for j in q.claim(1, lease=60)]  # a live lease: left alone
    (lost,) = q.claim(1, lease=0.3)  # a worker that died holding it
    sweeper = emq.Stalled(q, interval=0.2, max_stalled=max_stalled).start()
    try:
        want = "dead" if max_stalled == 0 else "pending"
        wait_for(
            lambda: state(q, lost.id) == want, 15, f"{lost.id} to be {want}", show=lambda: (q.get(lost.id), sweeper.counters.snapshot())
        )
        wait_for(lambda: sweeper.counters.snapshot()["sweeps"] >= 3, 15, "the sweeper to keep sweeping")
    finally:
        sweeper.stop()
    c = sweeper.counters.snapshot()
    job = q.get(lost.id)
    assert job.stalls == 1 and job.token is None
    if max_stalled == 0:
        assert job.error == "stalled" and c["dead"] == 1 and c["recovered"] == 0
        assert r.zscore(k["dead"], lost.id) is not None
    else:
        assert c["recovered"] == 1 and c["dead"] == 0
        assert [x.decode() for x in r.lrange(k["pending"], 0, -1)] == [lost.id]
    assert q.get(held.id).state == "active" and r.zscore(k["active"], held.id) is not None
    # Stopped means stopped: no sweep after stop().
    time.sleep(0.5)
    assert sweeper.counters.snapshot()["sweeps"] == c["sweeps"]


# ---------------------------------------------------------------------------
# 7. The `emq` command.


def emq_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env.pop("EMQ_URL", None)
    return subprocess.run([sys.executable, "-m", "emq", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)


def table_count(out: str, label: str) -> int:
    """The number in the stats table's row `label`."""
    m = re.search(r"^\W*" + re.escape(label) + r"\W+(\d+)\W*$", out, re.M)
    assert m, f"no row {label!r} in:\n{out}"
    return int(m.group(1))


def test_cli_stats_promote_stalled(server, r):
    qn = "cli"
    k = keys(qn)
    url = server.url
    q = emq.Queue(emq.connect(url), qn)
    for i in range(2):
        q.add("far", id=f"far{i}", delay=3600)
    for i in range(3):
        q.add("soon", id=f"soon{i}", delay=0.2)
    q.add("lane", id="L1", lane="tenant-a")
    for i in range(4):
        q.add("now", id=f"now{i}")
    (dies,) = q.claim(1, lease=0.001)  # now0
    q.fail(dies, "bad", retry_in=0)  # max_attempts 3: back to pending
    dying = q.add("dying", id="dying", max_attempts=1)
    assert dying == "dying"

    # The stats table before anything moves.
    res = emq_cli("stats", "--queue", qn, "--url", url)
    assert res.returncode == 0, res.stderr
    assert table_count(res.stdout, "schedule") == 5
    assert table_count(res.stdout, "pending") == 5  # now0..now3, dying
    assert table_count(res.stdout, "active") == 0
    assert table_count(res.stdout, "dead") == 0
    assert table_count(res.stdout, "lane tenant-a") == 1
    assert table_count(res.stdout, "lanes in the ring") == 1

    # promote: the three due jobs move, the far ones stay.
    t = r.time()
    wait_for(lambda: (lambda t2: t2[0] * 1000 + t2[1] // 1000)(r.time()) > t[0] * 1000 + t[1] // 1000 + 250, 10, "the soon jobs to be due")
    res = emq_cli("promote", "--queue", qn, "--url", url)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "3"
    assert r.zcard(k["schedule"]) == 2 and r.llen(k["pending"]) == 8
    res = emq_cli("promote", "--queue", qn, "--url", url)
    assert res.stdout.strip() == "0"

    # stalled: leases of 1 ms, expired at once.
    claimed = q.claim(3, lease=0.001)
    assert len(claimed) == 3
    wait_for(
        lambda: not r.zrangebyscore(k["active"], (lambda t2: t2[0] * 1000 + t2[1] // 1000 + 1)(r.time()), "+inf"),
        10,
        "the leases to expire",
    )
    res = emq_cli("stalled", "--queue", qn, "--url", url)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "recovered 3, dead 0"
    claimed = q.claim(3, lease=0.001)
    wait_for(
        lambda: not r.zrangebyscore(k["active"], (lambda t2: t2[0] * 1000 + t2[1] // 1000 + 1)(r.time()), "+inf"),
        10,
        "the leases to expire",
    )
    res = emq_cli("stalled", "--queue", qn, "--url", url, "--max-stalled", "0")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "recovered 0, dead 3"
    res = emq_cli("stalled", "--queue", qn, "--url", url)
    assert res.stdout.strip() == "recovered 0, dead 0"

    res = emq_cli("stats", "--queue", qn, "--url", url)
    assert res.returncode == 0, res.stderr
    assert table_count(res.stdout, "schedule") == 2
    assert table_count(res.stdout, "dead") == 3
    assert table_count(res.stdout, "active") == 0
    c = q.counts()
    assert table_count(res.stdout, "pending") == c.pending == 8 - 3
    assert table_count(res.stdout, "lane tenant-a") == c.lanes["tenant-a"]


def test_cli_worker_async_handler_with_ttl_exits_by_itself(server, r, procs):
    qn = "cliaio"
    q = emq.Queue(emq.connect(server.url), qn)
    ok = [q.add(json.dumps({"sleep": 0.05}), id=f"ok{i}") for i in range(4)]
    q.add(json.dumps({"fail": True}), id="bad", max_attempts=1)
    p = procs.worker(server.url, qn, "T", "--beat", "0.2", "--ttl", "5", handler="arecord")
    wait_for(
        lambda: all(state(q, i) == "done" for i in ok) and state(q, "bad") == "dead",
        20,
        "the jobs to settle",
        show=lambda: (history(r), procs.output(p)[-2000:]),
    )
    assert p.wait(30) == 0, procs.output(p)[-3000:]
    assert sorted(finishes(r, i)[0] for i in ok) == ["T"] * 4
    assert starts(r, "bad") == ["T"] and finishes(r, "bad") == []
    assert "asked to fail" in q.get("bad").error


def test_cli_worker_serves_every_queue_given(server, r, procs):
    """`emq worker H --queue A --queue B`: one worker process, both queues."""
    qs = [emq.Queue(emq.connect(server.url), n) for n in ("clia", "clib")]
    ids = {q.name: [q.add(json.dumps({}), id=f"{q.name}-{i}") for i in range(3)] for q in qs}
    p = procs.worker(server.url, "clia", "M", "--queue", "clib", "--beat", "0.2", "--ttl", "5")
    wait_for(
        lambda: all(state(q, i) == "done" for q in qs for i in ids[q.name]),
        20,
        "both queues' jobs to run",
        show=lambda: (history(r), procs.output(p)[-2000:]),
    )
    assert p.wait(30) == 0, procs.output(p)[-3000:]
    assert sorted(finishes(r, i)[0] for q in qs for i in ids[q.name]) == ["M"] * 6


def test_cli_worker_waits_for_the_replicas_asked_for(replica, procs):
    """`emq worker … --wait-replicas N`: the worker's calls wait for N replicas.
    With the one replica there is, jobs run and their rows reach it; asking for
    two, every call that writes raises NotReplicatedError (the beat's claim:
    its jobs are left leased, 1 s here, until recovery), the beat degrades, and
    nothing runs."""
    r = redis.Redis.from_url(replica.primary_url)
    rr = redis.Redis.from_url(replica.url)
    q = emq.Queue(emq.connect(replica.primary_url), "cliw")
    ids = [q.add(json.dumps({}), id=f"w{i}") for i in range(3)]
    p = procs.worker(replica.primary_url, "cliw", "W", "--wait-replicas", "2", "--beat", "0.2", "--lease", "1", "--ttl", "3")
    assert p.wait(30) == 0, procs.output(p)[-3000:]
    out = procs.output(p)
    assert "NotReplicatedError" in out or "1 of 2 replica" in out, out[-3000:]
    assert history(r) == [], "a job ran though its claim was not replicated"
    p = procs.worker(replica.primary_url, "cliw", "V", "--wait-replicas", "1", "--beat", "0.2", "--lease", "1", "--ttl", "8")
    wait_for(lambda: all(state(q, i) == "done" for i in ids), 20, "the jobs to run", show=lambda: procs.output(p)[-2000:])
    assert p.wait(30) == 0, procs.output(p)[-3000:]
    assert all(rr.hget(f"emq:{{cliw}}:job:{i}", "state") == b"done" for i in ids), "a done row did not reach the replica"


def test_cli_worker_rejects_a_bad_handler_spec(server):
    res = emq_cli("worker", "no_colon_here", "--queue", "x", "--url", server.url)
    assert res.returncode != 0 and "MODULE:FUNCTION" in res.stderr

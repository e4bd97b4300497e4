"""Exactly once under kills (SPEC §14), the slow proof: three worker processes
and two scheduler-only processes (`tests/timers_loop.py`, one through the plan
and one through the server module where it is loaded) all sweep one schedule
with a 1 s tick, while this test SIGKILLs one of them at a random moment every
half second to two and a half seconds and starts it again at once, runs the
schedule now at random moments, and changes its interval to 2 s and back.

Done rows are deleted at once (`keep_done=0`), so the tick's row cannot shield a
second enqueue: a sweep that enqueued a tick again after its job finished would
make a fresh job of the same id, started at attempt 1 again. Afterwards, from the
handlers' log of every start (`tests/worker_handlers.py`):

- every tick of the schedule in the window has a job that finished (each change,
  and the pause, is made once the sweepers have moved the timer past now: a
  change takes effect at once, so a tick due and not yet swept would go);
- no id's starts go back to an earlier attempt (a tick enqueued twice);
- no tick is of the other interval after a change (a stale next tick), none is
  after the pause, and every job is a tick's or a run-now's.

Each job's handler sleeps 0.2 s, so some kills land mid-job (its job runs again
at its next attempt, which is no second job). valkey runs for 48 s (about 70 s
with the start and the drain); valkey8 and redis for 15 s each, the same checks
with fewer kills; `EMQ_TEST_SOAK_S=60` runs each server for a minute."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest
import redis

import emq
from conftest import fresh_server
from test_schedules import server_ms
from test_sweeps_differential import module_loaded
from test_worker import REPO, Procs

from worker_handlers import LOG

Q = "soak"
NAME = "sec"
SOAK_S = {"valkey": 48.0, "valkey8": 15.0, "redis": 15.0}
WORKER_ARGS = ("--idle-beat", "30", "--lease", "2", "--beat", "0.5")


def scheduler(procs: Procs, url: str, tag: str, backend: str) -> subprocess.Popen:
    """A scheduler-only process (`tests/timers_loop.py`), killed with the test's workers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    out = open(procs.tmp_path / f"timers-{tag}.log", "wb")
    argv = [sys.executable, "-m", "tests.timers_loop", url, Q, backend]
    p = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    out.close()
    p.tag = tag  # type: ignore[attr-defined]
    procs.started.append(p)
    return p


def settled(r: redis.Redis) -> int:
    """Waits until every due tick is swept (the stored next tick is past the
    server's now): that next tick. A change or pause made right after drops no
    due tick, unless the next falls due in between."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        at = r.zscore(f"emq:{{{Q}}}:timers", f"tick:{NAME}")
        if at is not None and at > server_ms(r):
            return int(at)
        time.sleep(0.01)
    raise AssertionError("no sweeper moved the due timer for 30 s")


def log_entries(r: redis.Redis) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Per job id, the attempts of its starts in order, and how many finishes."""
    starts: dict[str, list[int]] = defaultdict(list)
    finishes: dict[str, int] = defaultdict(int)
    for line in r.lrange(LOG, 0, -1):
        parts = line.decode().split()
        if parts[0] == "start":
            starts[parts[2]].append(int(parts[3]))
        elif parts[0] == "finish":
            finishes[parts[2]] += 1
    return starts, finishes


def tick_of(job_id: str) -> int:
    return int(job_id.rsplit(":", 1)[1])


@pytest.mark.timeout(240)
@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL of worker subprocesses")
@pytest.mark.parametrize("name", sorted(SOAK_S))
def test_each_tick_has_exactly_one_job_while_workers_and_schedulers_are_killed(servers, tmp_path, name):
    """A broken guard lets two sweepers enqueue one tick (a second attempt-1
    start); a timer written from a stale read of the spec keeps the old
    interval's ticks after a change; a lost timer, or one moved without its
    jobs, leaves a tick with no job."""
    server = fresh_server(servers, name)
    soak_s = float(os.environ.get("EMQ_TEST_SOAK_S") or SOAK_S[name])
    r = redis.Redis.from_url(server.url)
    client = emq.connect(server.url)
    procs = Procs(tmp_path)
    try:
        q = emq.Queue(client, Q)
        q.set_retention(keep_done=0)
        # Attempts to spare: a job whose workers are all killed under it is not a lost tick.
        spec = {"data": '{"sleep": 0.2}', "missed": "all", "max_missed": 100, "max_attempts": 20}
        created = server_ms(r)
        q.schedule(NAME, every=1, **spec)
        created_after = server_ms(r)
        makers = {f"w{i}": (lambda tag: procs.worker(server.url, Q, tag, *WORKER_ARGS)) for i in range(3)}
        backends = ["plan", "module" if module_loaded(r) else "plan"]
        makers.update({f"t{i}": (lambda tag, b=b: scheduler(procs, server.url, tag, b)) for i, b in enumerate(backends)})
        running = {tag: make(tag) for tag, make in makers.items()}

        rng = random.Random()
        run_now: list[str] = []
        errors: list[BaseException] = []
        stop = threading.Event()

        def run_now_loop() -> None:
            own = emq.connect(server.url)
            try:
                other = emq.Queue(own, Q)
                while not stop.wait(rng.uniform(0.3, 1.5)):
                    run_now.append(other.run_schedule_now(NAME))
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)
            finally:
                own.close()

        runner = threading.Thread(target=run_now_loop)
        runner.start()
        start = time.monotonic()
        # (the server's ms once every due tick was swept, just before the change; after it; the new period)
        changes: list[tuple[int, int, int]] = []
        kills = 0
        for at, period in ((soak_s / 3, 2), (2 * soak_s / 3, 1)):
            while time.monotonic() - start < at:
                time.sleep(rng.uniform(0.5, 2.5))
                tag = rng.choice(sorted(running))
                running[tag].send_signal(signal.SIGKILL)
                running[tag].wait(10)
                running[tag] = makers[tag](f"{tag}.{kills}")
                kills += 1
            settled(r)
            before = server_ms(r)
            q.schedule(NAME, every=period, **spec)
            changes.append((before, server_ms(r), period * 1000))
        while time.monotonic() - start < soak_s:
            time.sleep(0.2)
        stop.set()
        runner.join(10)
        assert not errors, errors
        settled(r)
        paused_at = server_ms(r)
        q.pause_schedule(NAME)
        paused_after = server_ms(r)

        # Every job runs to its end (killed workers' jobs are recovered after their lease).
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            c = q.counts()
            if c.pending == 0 and c.active == 0 and c.schedule == 0 and not any(c.lanes.values()):
                break
            time.sleep(0.2)
        else:
            pytest.fail(f"the jobs did not all finish: {q.counts()}")
        exited = [tag for tag, p in running.items() if p.poll() is not None]
        assert not exited, f"processes exited on their own: {exited}"

        starts, finishes = log_entries(r)
        # A run-now in the millisecond of a tick makes the tick's id: one job for both.
        present = {tick_of(i) for i in starts}
        ticks = sorted(tick_of(i) for i in starts if i not in run_now)
        went_back = {i: a for i, a in starts.items() if any(x >= y for x, y in zip(a, a[1:]))}
        assert not went_back, f"ticks enqueued twice (their attempts start again): {went_back}"
        unfinished = [i for i in [*starts, *run_now] if finishes.get(i, 0) < 1]
        assert not unfinished, f"jobs that never finished: {unfinished}"
        assert set(run_now) <= set(starts), "a run-now's job never ran"

        # The ticks each phase must have (every one up to the moment, just before its end,
        # when all due ticks were swept), and those it must not (another period's).
        bounds = [(created_after, 1000), *((after, period) for _, after, period in changes)]
        ends = [before for before, _, _ in changes] + [paused_at]
        missing, stale = [], []
        for (begin, period), end in zip(bounds, ends):
            missing += sorted(set(range((begin // period + 1) * period, end + 1, period)) - present)
            stale += sorted(t for t in ticks if begin < t <= end and t % period)
        assert not missing, f"ticks with no job: {missing}; phases {list(zip(bounds, ends))}"
        assert not stale, f"ticks of the old interval after a change: {stale}"
        outside = [t for t in ticks if t <= created or t > paused_after]
        assert not outside, f"ticks outside the schedule's life: {outside}"
        print(
            f"\n{name}: {soak_s:.0f} s, {kills} kills, {len(ticks)} ticks and {len(run_now)} run-nows each with one job, "
            f"{sum(len(a) for a in starts.values())} starts ({sum(len(a) > 1 for a in starts.values())} jobs run again after a kill)"
        )
    finally:
        procs.kill_all()
        client.close()
        r.close()

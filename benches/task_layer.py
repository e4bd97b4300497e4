"""What emq's task layer costs over raw jobs, what the result feature costs jobs
nobody waits for, and how long an asyncio loop that enqueues and awaits results
stalls.

    python benches/task_layer.py --quick            # smoke run, tiny sizes
    python benches/task_layer.py --jobs 20000       # for numbers, on a quiet host
    python benches/task_layer.py --phases stall     # one phase

One embedded Valkey on 127.0.0.1 (FLUSHALLed, its stats reset before each
turn); `--workers` worker processes (`python -m emq worker`, `--concurrency`
each) started for each turn and stopped after it. Phases:

- `overhead`: raw jobs (`Queue.add` one at a time, a no-op sync handler; the
  client waits until `done` holds them all) against no-op tasks whose caller
  waits for each result (`task.enqueue`, then `Handle.result` in order, as
  `tasks.py` does): jobs/s, the server's CPU per job (`INFO cpu`, user +
  system) and its calls per job (commandstats), and the ratios task ÷ raw.
- `unwaited`: the server's CPU per job for jobs nobody waits for: raw jobs
  with the bytes of a task's call (no result), tasks returning a value (its
  result stored), and the same tasks with `keep_result=0` (the row deleted as it
  completes): the difference is what the result feature costs them.
- `stall`: one asyncio loop runs `--concurrency` coroutines that each enqueue a
  task and await `result_async`, over and over, while a ticker wakes every
  millisecond and records how late it woke: max and p99 of that lag, with the
  enqueue on the loop (a blocking call, GIL released) and in a thread
  (`asyncio.to_thread`).

Writes a JSON line per phase to stdout; `--out` also writes them to a file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent
QUEUE = "bench"

if "BENCH_URL" in os.environ:  # under a worker or the client: the app, its tasks, the raw handler
    import emq

    app = emq.App(os.environ["BENCH_URL"], queue=QUEUE)

    @app.task
    def noop() -> None:
        return None

    @app.task
    def value(i: int) -> int:
        return i

    @app.task(keep_result=0)
    def value_unkept(i: int) -> int:
        return i

    def raw(job: emq.Job) -> None:
        return None


def pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


class Turn:
    """One turn: a fresh server state, the worker processes, the server's stats around the measured part."""

    def __init__(self, url: str, target: str, workers: int, concurrency: int, logdir: Path):
        import emq

        self.url = url
        self.admin = emq.connect(url)
        self.admin.command("FLUSHALL")
        self.admin.command("CONFIG", "RESETSTAT")
        env = dict(os.environ, BENCH_URL=url, EMQ_URL=url, PYTHONPATH=str(BENCHES), PYTHONUNBUFFERED="1")
        env.pop("VIRTUAL_ENV", None)
        argv = [sys.executable, "-m", "emq", "worker", target, "--queue", QUEUE, "--concurrency", str(concurrency)]
        self.procs = []
        for k in range(workers):
            out = open(logdir / f"{target.replace(':', '-')}-{k}.log", "ab")
            self.procs.append(subprocess.Popen(argv, cwd=BENCHES, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True))

    def cpu_s(self) -> float:
        info = self.admin.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def calls(self) -> int:
        return sum(
            int(v.split(",")[0].split("=")[1]) for k, v in self.admin.info("commandstats").items() if "info" not in k and "config" not in k
        )

    def check(self) -> None:
        for p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"a worker exited ({p.returncode}); see its log")

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)


def done_count(admin, queue: str) -> int:
    return int(admin.command("ZCARD", "emq:{" + queue + "}:done"))


def measured(turn: Turn, jobs: int, body) -> dict:
    """Runs `body()` (which returns when its `jobs` are done) between two readings of the server's stats."""
    cpu0, calls0 = turn.cpu_s(), turn.calls()
    t0 = time.perf_counter()
    body()
    wall = time.perf_counter() - t0
    cpu, calls = turn.cpu_s() - cpu0, turn.calls() - calls0
    turn.check()
    return {
        "jobs": jobs,
        "jobs_per_s": round(jobs / wall, 1),
        "server_cpu_us_per_job": round(cpu / jobs * 1e6, 2),
        "calls_per_job": round(calls / jobs, 2),
    }


def warm_up(url: str) -> None:
    """Waits until a worker runs a task (its start-up is not measured)."""
    import task_layer

    task_layer.noop.enqueue().result(timeout=60)


def run_raw(url: str, jobs: int, data: bytes, cfg, logdir: Path) -> dict:
    import emq

    turn = Turn(url, "task_layer:raw", cfg.workers, cfg.concurrency, logdir)
    try:
        q = emq.Queue(emq.connect(url), QUEUE)
        q.add(data)
        deadline = time.monotonic() + 60
        while done_count(turn.admin, QUEUE) < 1:
            turn.check()
            if time.monotonic() > deadline:
                raise RuntimeError("raw: the warm-up job was not done within 60 s")
            time.sleep(0.01)

        def body() -> None:
            for _ in range(jobs):
                q.add(data)
            while done_count(turn.admin, QUEUE) < jobs + 1:
                time.sleep(0.002)

        return measured(turn, jobs, body)
    finally:
        turn.stop()


def run_tasks(url: str, jobs: int, task_name: str, cfg, logdir: Path, *, wait: bool) -> dict:
    import task_layer

    task = getattr(task_layer, task_name)
    turn = Turn(url, "task_layer:app", cfg.workers, cfg.concurrency, logdir)
    try:
        warm_up(url)
        args = () if task_name == "noop" else (7,)

        def body() -> None:
            handles = [task.enqueue(*args) for _ in range(jobs)]
            if wait:
                for h in handles:
                    h.result(timeout=cfg.wait_timeout)
            else:
                # Nobody waits: the client watches `done` (or, for unkept rows, the completed counter).
                deadline = time.monotonic() + cfg.wait_timeout
                while time.monotonic() < deadline:
                    if task.name.endswith("unkept"):
                        if (
                            int(turn.admin.command("LLEN", "emq:{" + QUEUE + "}:pending")) == 0
                            and int(turn.admin.command("ZCARD", "emq:{" + QUEUE + "}:active")) == 0
                        ):
                            return
                    elif done_count(turn.admin, QUEUE) >= jobs + 1:
                        return
                    time.sleep(0.002)
                raise RuntimeError(f"{task_name}: not done within {cfg.wait_timeout} s")

        return measured(turn, jobs, body)
    finally:
        turn.stop()
        task_layer.app.close()


def ratio(a: float, b: float) -> float | None:
    return round(a / b, 3) if b else None


def phase_overhead(url: str, cfg, logdir: Path) -> dict:
    raw = run_raw(url, cfg.jobs, b"x", cfg, logdir)
    tasks = run_tasks(url, cfg.jobs, "noop", cfg, logdir, wait=True)
    return {
        "phase": "overhead",
        "raw": raw,
        "tasks_with_results": tasks,
        "jobs_per_s_task_over_raw": ratio(tasks["jobs_per_s"], raw["jobs_per_s"]),
        "server_cpu_task_over_raw": ratio(tasks["server_cpu_us_per_job"], raw["server_cpu_us_per_job"]),
    }


def phase_unwaited(url: str, cfg, logdir: Path) -> dict:
    import task_layer
    from emq.tasks.codec import encode_call

    call = encode_call(task_layer.value.name, (7,), {}, parameters=task_layer.value.parameters, verb="bench")
    raw = run_raw(url, cfg.jobs, call, cfg, logdir)
    kept = run_tasks(url, cfg.jobs, "value", cfg, logdir, wait=False)
    unkept = run_tasks(url, cfg.jobs, "value_unkept", cfg, logdir, wait=False)
    return {
        "phase": "unwaited",
        "raw_same_data": raw,
        "tasks_result_kept": kept,
        "tasks_keep_result_0": unkept,
        "result_feature_us_per_job": round(kept["server_cpu_us_per_job"] - raw["server_cpu_us_per_job"], 2),
    }


async def _stall(cfg, *, in_thread: bool) -> dict:
    import task_layer

    lags: list[float] = []
    stop = asyncio.Event()
    done = 0

    async def ticker() -> None:
        while not stop.is_set():
            t = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - t - 0.001)

    async def caller() -> None:
        nonlocal done
        while not stop.is_set():
            h = await asyncio.to_thread(task_layer.value.enqueue, 1) if in_thread else task_layer.value.enqueue(1)
            await h.result_async(timeout=cfg.wait_timeout)
            done += 1

    tick = asyncio.create_task(ticker())
    callers = [asyncio.create_task(caller()) for _ in range(cfg.concurrency)]
    await asyncio.sleep(cfg.stall_s)
    stop.set()
    await asyncio.gather(*callers)
    await tick
    return {
        "enqueue": "asyncio.to_thread" if in_thread else "on the loop",
        "tasks_per_s": round(done / cfg.stall_s, 1),
        "lag_max_ms": round(max(lags) * 1e3, 3),
        "lag_p99_ms": round((pct(lags, 99) or 0) * 1e3, 3),
        "lag_p50_ms": round((pct(lags, 50) or 0) * 1e3, 3),
        "ticks": len(lags),
    }


def phase_stall(url: str, cfg, logdir: Path) -> dict:
    import task_layer

    out = {"phase": "stall", "callers": cfg.concurrency, "seconds": cfg.stall_s}
    for in_thread in (False, True):
        turn = Turn(url, "task_layer:app", cfg.workers, cfg.concurrency, logdir)
        try:
            warm_up(url)
            out["thread" if in_thread else "loop"] = asyncio.run(_stall(cfg, in_thread=in_thread))
            turn.check()
        finally:
            turn.stop()
            task_layer.app.close()
    return out


PHASES = {"overhead": phase_overhead, "unwaited": phase_unwaited, "stall": phase_stall}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--jobs", type=int, default=10000)
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--stall-s", type=float, default=10.0)
    ap.add_argument("--wait-timeout", type=float, default=60.0)
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes")
    ap.add_argument("--out", help="also write the JSON lines here")
    cfg = ap.parse_args()
    if cfg.quick:
        cfg.jobs, cfg.stall_s = min(cfg.jobs, 300), min(cfg.stall_s, 2.0)
    from emq.embedded import Server

    srv = Server().start()
    os.environ["BENCH_URL"] = srv.url
    sys.path.insert(0, str(BENCHES))
    lines = []
    try:
        with tempfile.TemporaryDirectory(prefix="emq-task-layer-") as d:
            for name in cfg.phases.split(","):
                line = PHASES[name](srv.url, cfg, Path(d))
                print(json.dumps(line), flush=True)
                lines.append(line)
    finally:
        srv.stop()
    if cfg.out:
        Path(cfg.out).write_text("".join(json.dumps(x) + "\n" for x in lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())

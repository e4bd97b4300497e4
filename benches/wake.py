"""Lateness at light load, with and without the worker's early wake for a due time.

    python benches/wake.py                    # embedded Valkey 9.1, 4 worker processes, 3 runs a side
    python benches/wake.py --server redis     # Debian's Redis 7.0
    python benches/wake.py --runs 5 --jobs 600 --window-s 30

`--workers` worker processes (`python -m emq worker wake:handler`, the CLI as
users run it, 8 slots each) start on an empty queue and park; then `--jobs`
jobs due at random moments over `--window-s` seconds are added ahead of time
(one `add_many`). Each handler records `time.time()` first thing, and with it
where its process's beat was when the job came due: when its park ended, when
its promote and its claim returned (the last of each in that process, so the
columns for a job that another worker promoted are approximate). Lateness =
handler start - due time (the job's `at`), in ms.

The runs alternate: the worker as it is ("warm": it wakes `WARM_S` before a
due time it waits for exactly and pings the server), and the same worker with
the early wake switched off ("cold"). Reports p50, p90, p99 and max of each
side's jobs pooled over its runs, and the medians of the runs' p50 and p99.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent

# -- the handler side (imported by the worker processes) ----------------------

_ev: dict[str, float] = {}
_out = None


def _instrument() -> None:
    """Patches the worker in this process (the bench's processes only): times
    of the beat's last park end, promote and claim; the early wake off for the
    cold side."""
    import emq.queue as Q
    import emq.worker.beat as B

    wait, promote, claim = B.Beat._wait, B.Beat._promote, Q.Queue.claim

    def _wait(self, due_at, **kw):
        wait(self, due_at, **kw)
        _ev["woke"] = time.time()

    def _promote(self, queue):
        r = promote(self, queue)
        _ev["promoted"] = time.time()
        return r

    def _claim(self, n=1, **kw):
        r = claim(self, n, **kw)
        _ev["claimed"] = time.time()
        return r

    B.Beat._wait, B.Beat._promote, Q.Queue.claim = _wait, _promote, _claim
    if os.environ.get("EMQ_BENCH_COLD") == "1":
        B.WARM_S = float("inf")  # never early: the wait goes to the due time in one sleep


if os.environ.get("EMQ_BENCH_WAKE_OUT"):
    _instrument()
    _out = open(os.environ["EMQ_BENCH_WAKE_OUT"], "a", buffering=1)  # noqa: SIM115 - the process's life


def handler(job) -> None:
    now = time.time()
    due = int(job.data) / 1000
    cols = [now - due] + [_ev.get(k, 0.0) - due for k in ("woke", "promoted", "claimed")]
    _out.write(" ".join(f"{x * 1000:.3f}" for x in cols) + "\n")


# -- the bench ---------------------------------------------------------------

COLUMNS = ["late", "park ended", "promoted", "claimed"]


def one_run(url: str, *, cold: bool, workers: int, jobs: int, window_s: float, seed: int, tmp: Path) -> list[list[float]]:
    import redis

    import emq

    redis.Redis.from_url(url).flushall()
    out = tmp / f"run-{seed}-{int(cold)}.txt"
    out.write_text("")
    env = dict(os.environ, EMQ_BENCH_WAKE_OUT=str(out), EMQ_BENCH_COLD="1" if cold else "0")
    env["PYTHONPATH"] = os.pathsep.join([str(BENCHES), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "emq", "worker", "wake:handler", "--queue", "wake", "--url", url, "--concurrency", "8"]
    procs = [subprocess.Popen(argv, env=env) for _ in range(workers)]
    try:
        time.sleep(3)  # started and parked
        q = emq.Queue(emq.connect(url), "wake")
        rng = random.Random(seed)
        start = time.time() * 1000 + 2000
        dues = sorted(int(start + rng.random() * window_s * 1000) for _ in range(jobs))
        q.add_many([{"data": str(d), "at": d / 1000} for d in dues])
        deadline = time.monotonic() + 2 + window_s + 30
        while len(out.read_text().splitlines()) < jobs:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"only {len(out.read_text().splitlines())} of {jobs} jobs ran")
            time.sleep(0.1)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(30)
    return [list(map(float, line.split())) for line in out.read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["valkey", "redis"], default="valkey")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--window-s", type=float, default=20.0)
    ap.add_argument("--runs", type=int, default=3)
    cfg = ap.parse_args()

    from delays import pct  # the same percentile as the short-delay bench's
    from emq.embedded import Server

    binary = None if cfg.server == "valkey" else shutil.which("redis-server")
    rows: dict[str, list[list[float]]] = {"warm": [], "cold": []}
    per_run: dict[str, list[tuple[float, float]]] = {"warm": [], "cold": []}
    with Server(binary) as srv, tempfile.TemporaryDirectory() as tmp:
        for run in range(cfg.runs):
            for side in ("cold", "warm") if run % 2 else ("warm", "cold"):
                cold = side == "cold"
                got = one_run(srv.url, cold=cold, workers=cfg.workers, jobs=cfg.jobs, window_s=cfg.window_s, seed=run, tmp=Path(tmp))
                late = [r[0] for r in got]
                rows[side] += got
                per_run[side].append((pct(late, 50), pct(late, 99)))
                print(f"run {run + 1} {side}: lateness p50 {pct(late, 50):.2f} ms, p99 {pct(late, 99):.2f}", flush=True)
    print(f"\n{cfg.server}, {cfg.workers} workers, {cfg.jobs} jobs over {cfg.window_s:.0f} s a run, {cfg.runs} runs a side (ms after due):")
    print("| side | column | p50 | p90 | p99 | max |\n|---|---|---|---|---|---|")
    for side in ("cold", "warm"):
        for i, col in enumerate(COLUMNS):
            xs = [r[i] for r in rows[side]]
            print(f"| {side} | {col} | {pct(xs, 50):.2f} | {pct(xs, 90):.2f} | {pct(xs, 99):.2f} | {max(xs):.2f} |")
    for side in ("cold", "warm"):
        p50s, p99s = zip(*per_run[side])
        print(f"{side}: median of the runs' p50 {statistics.median(p50s):.2f} ms, of their p99 {statistics.median(p99s):.2f} ms")


if __name__ == "__main__":
    main()

"""Tick lateness of a 1-second periodic job: emq's schedules against arq's cron,
saq's cron and RQ's cron scheduler; and, with several schedulers at once, how
many ticks got two jobs or none.

    python benches/schedules.py                             # every system, 60 ticks each
    python benches/schedules.py --ticks 10 --systems emq    # a smoke run

One embedded Valkey 9.1 on 127.0.0.1 for the whole run, FLUSHALLed before each
turn. Each system runs its own processes (`benches/peers/schedules/` says which,
system by system), the peers under their virtualenvs (`python benches/tasks.py
--setup` makes them). Two scenarios a system:

1. **lateness**: one scheduler and `--workers` parked workers (emq: the workers,
   whose beats are its schedulers; arq and saq: workers that schedule too, one
   of them; RQ: one `CronScheduler` and the workers). For each tick of the
   `--ticks` after a warm-up: `started − tick` (when the job's handler began, or
   emq's claim) and `added − tick` (when the tick's job was enqueued; arq
   enqueues ahead, deferred, so it is negative there), p50 and p99 in ms.
2. **duplicates**: `--schedulers` schedulers at once (emq and arq and saq: that
   many workers; RQ: that many `CronScheduler`s and one worker): over the same
   window, the ticks that ran twice or more (`dup`) and those that never ran
   (`lost`).

Celery beat is not here: its crontab schedules stop at minutes, and a 1-second
`schedule` is an interval from the beat's own last run, not a tick of the
clock, so lateness against a tick has no meaning for it (and its documentation
says to run exactly one beat). A tick, for each system, is the time its own
schedule names: emq's row `due`, arq's job id, saq's `scheduled` (whole
seconds), RQ's enqueue rounded down to the second (RQ keeps none).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import emq  # noqa: E402
from compare import BENCHES, QUEUE, Harness, log, pct, python_of, sub_env  # noqa: E402
from emq.embedded import Server  # noqa: E402

from peers.schedules import LOG, SYSTEMS  # noqa: E402

WARM_S = 4.0  # processes started and parked before the window opens


def start(system: str, role: str, url: str, logdir: Path, tag: str) -> subprocess.Popen:
    """One of the system's processes, in a process group of its own."""
    module = __import__(f"peers.schedules.{system}", fromlist=["argv"])
    out = open(logdir / f"{system}-{tag}.log", "wb")
    p = subprocess.Popen(
        module.argv(role, python_of(system), url, QUEUE),
        cwd=BENCHES,
        env=sub_env({"BENCH_URL": url, "BENCH_QUEUE": QUEUE, "EMQ_URL": url}),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out.close()
    return p


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(5)


def server_ms(h: Harness) -> int:
    return h.client.time_ms()


def records(h: Harness, system: str) -> list[tuple[float, float, float]]:
    """Every job's `(tick, added, started)`, ms."""
    if system != "emq":
        return [tuple(json.loads(x)) for x in h.cmd("LRANGE", LOG, 0, -1)]
    out = []
    for key in h.cmd("KEYS", f"emq:{{{QUEUE}}}:job:schedule:tick:*"):
        row = dict(zip(*[iter(h.cmd("HGETALL", key))] * 2))
        if b"claimed" in row:
            out.append((float(row[b"due"]), float(row[b"created"]), float(row[b"claimed"])))
    return out


def turn(system: str, h: Harness, srv: Server, args, logdir: Path, *, schedulers: int) -> dict:
    """One scenario of one system: its processes, `--ticks` ticks, their records."""
    h.fresh()
    if system == "emq":
        emq.Queue(h.client, QUEUE).schedule("tick", every=1, data=b"")
    procs = []
    if system == "rq":
        procs += [start(system, "scheduler", srv.url, logdir, f"scheduler{i}") for i in range(schedulers)]
        procs += [start(system, "worker", srv.url, logdir, f"worker{i}") for i in range(args.workers if schedulers == 1 else 1)]
    else:
        procs += [start(system, "worker", srv.url, logdir, f"worker{i}") for i in range(args.workers if schedulers == 1 else schedulers)]
    try:
        time.sleep(WARM_S)
        begin = (server_ms(h) // 1000 + 1) * 1000
        end = begin + args.ticks * 1000
        while server_ms(h) < end + 2_000:  # the window's last tick has run
            time.sleep(0.2)
            if any(p.poll() is not None for p in procs):
                raise RuntimeError(f"{system}: a process exited; see {logdir}")
    finally:
        stop(procs)
    # A tick late by more than a few ms is still this window's: at most half a tick off.
    got = [r for r in records(h, system) if begin - 500 <= r[0] < end - 500]
    by_tick: dict[int, list[tuple[float, float, float]]] = {}
    for r in got:
        by_tick.setdefault(round(r[0] / 1000) * 1000, []).append(r)
    ticks = range(begin, end, 1000)
    first = [min(by_tick[t], key=lambda r: r[2]) for t in ticks if t in by_tick]
    started = [r[2] - r[0] for r in first]
    added = [r[1] - r[0] for r in first]
    return {
        "ticks": len(ticks),
        "ran": len(first),
        "lost": sum(t not in by_tick for t in ticks),
        "dup": sum(len(by_tick.get(t, [])) > 1 for t in ticks),
        "jobs": len(got),
        "started_p50": pct(started, 50),
        "started_p99": pct(started, 99),
        "added_p50": pct(added, 50),
        "added_p99": pct(added, 99),
    }


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--ticks", type=int, default=60, help="ticks measured a scenario")
    ap.add_argument("--workers", type=int, default=4, help="parked workers in the lateness scenario")
    ap.add_argument("--schedulers", type=int, default=3, help="schedulers at once in the duplicates scenario")
    ap.add_argument("--out", type=Path, help="the results as JSON")
    args = ap.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"--systems: {s!r} is none of {', '.join(SYSTEMS)}")
        if s != "emq" and not Path(python_of(s)).exists():
            ap.error(f"{s}: no virtualenv at {python_of(s)} (python benches/tasks.py --setup)")
    logdir = Path(tempfile.mkdtemp(prefix="emq-bench-schedules-"))
    srv = Server(emq.embedded.valkey_binary()).start()
    results: dict[str, dict] = {}
    try:
        h = Harness(srv.url)
        for s in systems:
            results[s] = {}
            for scenario, n in (("lateness", 1), ("duplicates", args.schedulers)):
                log(f"{s}: {scenario}, {args.ticks} ticks")
                try:
                    results[s][scenario] = turn(s, h, srv, args, logdir, schedulers=n)
                except RuntimeError as e:
                    log(f"{s}: {e}")
                    results[s][scenario] = {"error": str(e)}
    finally:
        srv.stop()
    print(
        f"\n{args.ticks} ticks of 1 s a scenario; lateness: 1 scheduler, {args.workers} parked workers; "
        f"duplicates: {args.schedulers} schedulers. ms; logs in {logdir}\n"
    )
    head = "| system | started − tick p50 | p99 | added − tick p50 | p99 | ran | dup | lost "
    print(f"{head}| with {args.schedulers} schedulers: dup | lost |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s, r in results.items():
        a, d = r.get("lateness", {}), r.get("duplicates", {})
        if "error" in a or "error" in d:
            print(f"| {s} | {a.get('error') or d.get('error')} |")
            continue
        print(
            f"| {s} | {fmt(a['started_p50'])} | {fmt(a['started_p99'])} | {fmt(a['added_p50'])} | {fmt(a['added_p99'])} "
            f"| {a['ran']}/{a['ticks']} | {a['dup']} | {a['lost']} | {d['dup']} | {d['lost']} |"
        )
    if args.out:
        run = {"ticks": args.ticks, "workers": args.workers, "schedulers": args.schedulers, "results": results}
        args.out.write_text(json.dumps(run, indent=1))


if __name__ == "__main__":
    main()

"""End-to-end worker throughput and the server's cost per job.

One server started here (the embedded Valkey 9.1 on jemalloc, or `--server
redis`); `--procs` worker processes (`emq.Worker`, no-op handler, `--concurrency`
threads each) started first and idle; then `--jobs` ready no-op jobs are added
in batches of 100 (`add_many`) as fast as one producer can. Measured from the
first add to the moment every job is done:

- jobs/s (per run, and per worker process);
- server CPU per job: `INFO cpu` (sys + user) over the run, divided by the jobs:
  adds, claims, completes, sweeps, parks, everything;
- the worker processes' CPU per job (user + system, from /proc), over the same span;
- server commands per job (`INFO commandstats` calls, those inside `EXEC`
  included) and transactions (`EXEC`) per job;
- the per-minute counters' cost: their `HINCRBY` and `PEXPIRE` calls per job and
  the server's µs in them per job (`INFO commandstats`; the goal is ≤ 1 µs a job
  under group commit);
- round trips per job: the reads the server served (`INFO stats`
  `total_reads_processed`: each read of a client's socket that found bytes, a
  pipeline's commands most often in one), those of the producer and of the
  poll for the end included.

    python benches/throughput.py                          # 1 process, 30,000 jobs, 3 runs
    python benches/throughput.py --procs 4 --jobs 60000
    python benches/throughput.py --server redis
    python benches/throughput.py --fail --compare fail-single   # handlers that raise: group-committed fails against a fail per job

Medians over `--runs`. The processes share this machine's cores with the server
and the producer (2 here): the figure is what those cores allow.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import emq  # noqa: E402
from emq.embedded import Server, valkey_binary  # noqa: E402

Q = "tput"


# The worker as it is, and two older forms to compare with (patched in, for the
# comparison only): "unpaired", whose group commits claim nothing (the beat
# claims every job); "single", a complete per job on the handler's thread and a
# promote every beat (before the group commit). And "module": the worker as it
# is, on `emq.Queue(..., backend="module")` (its claims and commits are
# EMQ.CLAIM and EMQ.COMPLETE, and the producer's adds EMQ.ADD, run by emq's
# server module, which the server then loads).
MODES = {
    "paired": "",
    "unpaired": " (commits claim nothing)",
    "single": " (a complete per job)",
    "module": " (claims and commits by the server module)",
    "fail-single": " (a fail per job)",
}
FAILING = ", every job failed"


def queue(c, mode: str):
    """The benchmark's queue as `mode` runs it: on the module, or the plan."""
    return emq.Queue(c, Q, backend="module" if mode == "module" else "plan")


def fail(job) -> None:
    raise RuntimeError("this handler fails")


def worker_proc(url: str, concurrency: int, stop, mode: str = "paired", spin_us: int | None = None, fails: bool = False) -> None:
    import emq.worker as W
    import emq.worker.beat as B
    import emq.worker.handlers as H

    if mode == "fail-single":
        # As before fails joined the group commit: each failed on the handler's
        # thread, alone (patched in for the comparison only).
        def failed(self, job, error):
            self._committed([(job, self._settle(lambda: self.work.fail(job, error)))], [], 0)

        W.GroupCommit.failed = failed  # type: ignore[method-assign]

    if mode in ("unpaired", "single"):
        H.Handlers._reserve = lambda self, finishing: 0  # type: ignore[method-assign]
    if mode == "single":
        B.BUSY_PROMOTE_S = 0.0

        def finished(self, job):
            self._committed([(job, self._settle(lambda: self.work.complete(job)))], [], 0)

        W.GroupCommit.finished = finished  # type: ignore[method-assign]
    c = emq.connect(url) if spin_us is None else emq.connect(url, spin=spin_us / 1e6)
    handler = fail if fails else (lambda job: None)
    w = emq.Worker(queue(c, mode), handler, concurrency=concurrency, beat=1, pump_batch=1000)

    def watch():
        stop.wait()
        w.stop()

    threading.Thread(target=watch, daemon=True).start()
    w.run()


def cpu(c: emq.Client) -> float:
    i = c.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


def proc_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes have used (Linux's /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def reads(c: emq.Client) -> int:
    return int(c.info("stats")["total_reads_processed"])


def commandstats(c: emq.Client) -> dict[str, tuple[int, float]]:
    """Each command's calls and the µs spent in it (a module command's and
    `EXEC`'s include the commands they run)."""
    out = {}
    for k, v in c.info("commandstats").items():
        if k.startswith("cmdstat_"):
            f = dict(x.split("=", 1) for x in v.split(","))
            out[k[8:]] = (int(f["calls"]), float(f["usec"]))
    return out


def one_run(url: str, args, mode: str = "paired") -> dict:
    c = emq.connect(url)
    c.command("FLUSHALL")
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    work = (url, args.concurrency, stop, mode, args.spin_us, args.fail)
    procs = [ctx.Process(target=worker_proc, args=work, daemon=True) for _ in range(args.procs)]
    for p in procs:
        p.start()
    time.sleep(args.settle)
    q = queue(c, mode)
    c.command("CONFIG", "RESETSTAT")
    pids = [p.pid for p in procs if p.pid is not None]
    cpu0, t0, wcpu0, reads0 = cpu(c), time.perf_counter(), proc_cpu(pids), reads(c)
    for i in range(0, args.jobs, 100):
        q.add_many([{"data": b"x", "max_attempts": 1} if args.fail else b"x"] * min(100, args.jobs - i))
    # Done when nothing is pending or held: three small reads every 5 ms (counts()
    # scans for lanes, which would cost the server more than the jobs do).
    keys = [f"emq:{{{Q}}}:{k}" for k in ("pending", "active", "schedule")]
    while c.command("LLEN", keys[0]) or c.command("ZCARD", keys[1]) or c.command("ZCARD", keys[2]):
        time.sleep(0.005)
    t1, cpu1, wcpu1, reads1 = time.perf_counter(), cpu(c), proc_cpu(pids), reads(c)
    stats = commandstats(c)
    stop.set()
    for p in procs:
        p.join(10)
        if p.is_alive():
            p.kill()
    c.close()
    calls = sum(v[0] for k, v in stats.items() if k not in ("info", "config|resetstat"))
    execs = stats.get("exec", (0, 0.0))[0]
    return {
        "jobs_per_s": args.jobs / (t1 - t0),
        "server_us_per_job": (cpu1 - cpu0) * 1e6 / args.jobs,
        "worker_us_per_job": (wcpu1 - wcpu0) * 1e6 / args.jobs,
        "commands_per_job": calls / args.jobs,
        "exec_per_job": execs / args.jobs,
        "reads_per_job": (reads1 - reads0) / args.jobs,
        # The per-minute counters (SPEC §17): the settles' HINCRBY and PEXPIRE (no job here
        # has waiters, whose inboxes' PEXPIRE would count too), calls and server time a job.
        "counter_calls_per_job": sum(stats.get(k, (0, 0.0))[0] for k in ("hincrby", "pexpire")) / args.jobs,
        "counter_us_per_job": sum(stats.get(k, (0, 0.0))[1] for k in ("hincrby", "pexpire")) / args.jobs,
        "calls_per_job": {k: v[0] / args.jobs for k, v in sorted(stats.items(), key=lambda kv: -kv[1][0])},
        "usec_per_job": {k: v[1] / args.jobs for k, v in stats.items()},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=("valkey", "redis"), default="valkey")
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--jobs", type=int, default=30000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--settle", type=float, default=1.5)
    ap.add_argument("--spin-us", type=int, default=None, help="the workers' emq.connect(spin=...), in µs (default: its default)")
    ap.add_argument("--fail", action="store_true", help="handlers that raise, jobs with one attempt: every job is failed, and dies")
    ap.add_argument("--stats", action="store_true", help="also print each command's calls and time per job (the last run)")
    ap.add_argument(
        "--compare",
        action="append",
        choices=("unpaired", "single", "module", "fail-single"),
        default=[],
        help="also run workers whose commits claim nothing (unpaired), or that complete each job alone on "
        "the handler's thread and promote every beat (single, as before the group commit), or whose claims and "
        "commits the server module runs (module: ./dev module), or that fail each job alone (fail-single, with "
        "--fail: as before fails joined the group commit), alternating",
    )
    args = ap.parse_args(argv)
    binary = valkey_binary() if args.server == "valkey" else shutil.which("redis-server")
    modes = ["paired", *args.compare]
    runs: dict[str, list] = {m: [] for m in modes}
    with Server(binary, module="module" in modes) as s:
        for i in range(args.runs):
            for m in modes[i % len(modes) :] + modes[: i % len(modes)]:
                runs[m].append(one_run(s.url, args, m))
    for m in modes:
        rs = runs[m]
        keys = (
            "jobs_per_s",
            "server_us_per_job",
            "worker_us_per_job",
            "commands_per_job",
            "exec_per_job",
            "reads_per_job",
            "counter_calls_per_job",
            "counter_us_per_job",
        )
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        print(
            f"{args.server}{MODES[m]}{FAILING if args.fail else ''}, "
            f"{args.procs} worker process(es) x {args.concurrency} threads, "
            f"{args.jobs:,} jobs, medians of {args.runs}: "
            f"{med['jobs_per_s']:,.0f} jobs/s ({med['jobs_per_s'] / args.procs:,.0f} per process), "
            f"server {med['server_us_per_job']:.1f} us/job, worker processes {med['worker_us_per_job']:.1f} us/job, "
            f"{med['commands_per_job']:.1f} commands/job, "
            f"{med['exec_per_job']:.2f} EXEC/job, "
            f"{med['reads_per_job']:.2f} round trips/job; "
            f"the counters {med['counter_calls_per_job']:.3f} commands/job, {med['counter_us_per_job']:.3f} us/job"
        )
    if args.stats:
        for m in modes:
            print(f"{m}, the last run:")
            last = runs[m][-1]
            for name, per in last["calls_per_job"].items():
                print(f"   {name:24} {per:.3f} calls/job  {last['usec_per_job'][name]:6.2f} us/job in it")
    return 0


if __name__ == "__main__":
    sys.exit(main())

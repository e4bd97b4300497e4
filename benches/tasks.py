"""emq against the Python task queues, for tasks whose caller waits for the result:
arq, saq, RQ, Celery, Dramatiq and Taskiq.

    python benches/tasks.py --setup                        # the peers' virtualenvs (once)
    python benches/tasks.py                                # full run, embedded Valkey 9.1
    python benches/tasks.py --quick --systems arq,celery   # smoke run of some systems
    python benches/tasks.py --render benches/figures/tasks-valkey.json   # table and plots again

One server on 127.0.0.1 for the whole run (started here, as compare.py starts
it); before each turn it is FLUSHALLed and its stats reset, and the previous
turn's processes are gone. Each system runs its own worker processes through its
own CLI, configured as its documentation shows for Redis (`benches/peers/tasks/`
says what and where, system by system), each worker running `--concurrency`
tasks at a time (8; RQ's worker runs one). Each system's client (its own
interpreter) calls the tasks and waits for their values through the library's own
result API. Per system and run:

1. throughput with 1 worker process, then with `--workers` (4): the client
   enqueues `--tasks` calls of `add(i, i)` (one call each, the asynchronous
   libraries 100 at a time gathered), then waits for each result in order and
   checks it is 2i; tasks/s from the first enqueue to the last result held (a
   run stops waiting after `--cap-s` and is marked capped);
2. result latency at light load, with the `--workers` processes: `stamp(i)`,
   which returns `[i, time.time()]` as it returns, sent one at a time at `--rate`
   a second for `--latency-s` seconds, each with a waiter of its own blocked on
   its result (a thread of a pool, or an asyncio task); latency = when the
   waiter holds the value − the time the task put in it.

Beside each: the server's CPU per task (`INFO cpu`, user + system, from the
client's `go` to its last result, over the tasks) and the calls it counted
(commandstats). A wrong or missing result fails that system's run (its logs are
named); so does a worker that exits. Medians over `--runs` runs; the table,
with emq ÷ the best peer in each column, is printed; raw numbers and plots go to
`--out` (benches/figures/tasks-<server>[-quick].json and *.png).
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib
import itertools
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import NoReturn

import compare
from compare import BENCHES, QUEUE, Harness, Workers, log, median, pct, python_of, sub_env
from emq.embedded import Server

SYSTEMS = ["emq", "arq", "saq", "rq", "celery", "dramatiq", "taskiq"]
PEERS = {s: importlib.import_module(f"peers.tasks.{s}") for s in SYSTEMS}
FIGURES = BENCHES / "figures"
COLORS = {
    "emq": "#1f77b4",
    "arq": "#2ca02c",
    "saq": "#9467bd",
    "rq": "#ff7f0e",
    "celery": "#8c564b",
    "dramatiq": "#e377c2",
    "taskiq": "#7f7f7f",
}
SKIP = {"info", "config|resetstat", "config"}  # the harness's own calls


# -- a client process -------------------------------------------------------------


class ClientRun:
    """One `python -m peers.tasks OP` under the system's interpreter: its warm-up,
    `ready`, our `go`, its JSON line. Every wait has a deadline; on any failure
    its process group is killed and the error names its log."""

    SEQ = itertools.count(1)

    def __init__(self, name: str, url: str, op: str, logdir: Path, **opts):
        self.name, self.op = name, op
        argv = [python_of(name), "-m", "peers.tasks", op, "--system", name, "--url", url, "--queue", QUEUE]
        for k, v in opts.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        self.log = logdir / f"{name}-client-{op}-{next(self.SEQ)}.log"
        self._err = open(self.log, "ab")
        self.p = subprocess.Popen(
            argv,
            cwd=BENCHES,
            env=sub_env({"BENCH_URL": url, "BENCH_QUEUE": QUEUE}),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            start_new_session=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self._lines.put(line.strip())
        self._lines.put(None)

    def _next(self, deadline: float, what: str) -> str | None:
        try:
            return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.fail(f"no {what} within its timeout")

    def expect_ready(self, timeout: float) -> None:
        line = self._next(time.monotonic() + timeout, "`ready` (start-up and warm-up)")
        if line is None:
            self.p.wait(10)
            self.fail(f"exited ({self.p.returncode}) before `ready`")
        if line != "ready":
            self.fail(f"expected `ready`, got {line!r}")

    def go(self) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write("go\n")
        self.p.stdin.flush()

    def result(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        last = None
        while (line := self._next(deadline, "result")) is not None:
            last = line or last
        try:
            self.p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.fail("did not exit after its result")
        if self.p.returncode != 0 or not last:
            self.fail(f"exited with {self.p.returncode}")
        return json.loads(last)

    def fail(self, why: str) -> NoReturn:
        self.kill()
        tail = self.log.read_text(errors="replace")[-2000:]
        raise RuntimeError(f"{self.name} client ({self.op}): {why}; log {self.log}:\n{tail}")

    def kill(self) -> None:
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.p.wait(10)
        self._err.close()


# -- the measurements -----------------------------------------------------------


def measure(h: Harness, name: str, op: str, cfg, logdir: Path, timeout: float, **opts) -> dict:
    """One client run, with the server's CPU and calls from its `go` to its result."""
    c = ClientRun(name, h.url, op, logdir, timeout=cfg.wait_timeout, warmup=cfg.warmup, **opts)
    try:
        c.expect_ready(cfg.ready_timeout)
        h.client.command("CONFIG", "RESETSTAT")
        h.sent = {}
        cpu0 = h.cpu_s()
        c.go()
        out = c.result(timeout)
        cpu1 = h.cpu_s()
        stats = h.commandstats()
    finally:
        c.kill()
    done = max(1, out["ok"])
    calls = sum(n for k, (n, _) in stats.items() if k not in SKIP) - sum(h.sent.values())
    out["server_cpu_us_per_task"] = (cpu1 - cpu0) * 1e6 / done
    out["calls_per_task"] = calls / done
    out["calls_per_task_by_command"] = {
        k: round(n / done, 3) for k, (n, _) in sorted(stats.items(), key=lambda kv: -kv[1][0]) if k not in SKIP and n
    }
    out["client_log"] = str(c.log)
    return out


def check_results(name: str, out: dict, what: str) -> None:
    """A wrong value, a failed wait or a wait never finished fails the run."""
    unfinished = out["count"] - out["ok"] - out["wrong"] - out["failed"] if not out.get("capped") else 0
    if out["wrong"] or out["failed"] or unfinished:
        raise RuntimeError(
            f"{name}: {what}: {out['wrong']} wrong, {out['failed']} failed and {unfinished} unfinished results of "
            f"{out['count']} (first errors: {out['errors']}); client log {out['client_log']}"
        )


def measure_throughput(h: Harness, name: str, cfg, logdir: Path, tasks: int, workers: int) -> dict:
    out = measure(h, name, "throughput", cfg, logdir, cfg.cap_s + cfg.wait_timeout + 60, count=tasks, cap_s=cfg.cap_s)
    check_results(name, out, f"throughput with {workers} worker(s)")
    out["tasks_per_s"] = out["ok"] / out["seconds"] if out["seconds"] > 0 else None
    return out


def measure_latency(h: Harness, name: str, cfg, logdir: Path) -> dict:
    out = measure(h, name, "latency", cfg, logdir, cfg.latency_s + cfg.wait_timeout + 60, rate=cfg.rate, seconds=cfg.latency_s)
    check_results(name, out, "latency")
    xs = out["latency_ms"]
    out.update(p50=pct(xs, 50), p99=pct(xs, 99), max=max(xs) if xs else None, min=min(xs) if xs else None)
    return out


def run_system(name: str, h: Harness, cfg, run: int, logdir: Path) -> dict:
    out: dict = {"run": run, "loadavg_before": os.getloadavg()[0]}
    for n in sorted({1, cfg.workers}):
        h.fresh()
        w = Workers(name, h.url, n, cfg.concurrency, None, logdir, peer=PEERS[name]).start()
        logs = list(w.logs)
        try:
            time.sleep(cfg.settle)
            w.check()
            tasks = cfg.tasks1 if n == 1 else cfg.tasks
            log(f"  {name}: throughput, {n} worker process(es), {tasks} tasks")
            out[f"tput{n}"] = measure_throughput(h, name, cfg, logdir, tasks, n)
            w.check()
            if n == cfg.workers:
                log(f"  {name}: result latency, {cfg.rate:g} tasks/s for {cfg.latency_s:g} s, {n} worker process(es)")
                out["latency"] = measure_latency(h, name, cfg, logdir)
                w.check()
        except Exception as e:
            # A client's error may be the workers' doing (a worker that cannot start
            # may stay up): their logs go with it.
            raise RuntimeError(f"{e}\n{name} worker logs: {', '.join(map(str, logs))}") from e
        finally:
            w.stop(grace=10)
    out["loadavg_after"] = os.getloadavg()[0]
    return out


# -- summary, table, plots ---------------------------------------------------------

# (column key, label, phase, field, higher is better)
COLUMNS = [
    ("tput1", "tasks/s, 1 worker", "tput1", "tasks_per_s", True),
    ("cpu1", "server µs/task", "tput1", "server_cpu_us_per_task", False),
    ("tputW", "tasks/s, {w} workers", "tput{w}", "tasks_per_s", True),
    ("cpuW", "server µs/task", "tput{w}", "server_cpu_us_per_task", False),
    ("p50", "latency p50 (ms)", "latency", "p50", False),
    ("p99", "latency p99 (ms)", "latency", "p99", False),
    ("cpuL", "server µs/task", "latency", "server_cpu_us_per_task", False),
]


def summarize(runs: list[dict], workers: int) -> dict:
    s: dict = {}
    for key, _, phase, field, _ in COLUMNS:
        phase = phase.format(w=workers)
        s[key] = median([r[phase].get(field) for r in runs if phase in r])
    s["capped1"] = any(r.get("tput1", {}).get("capped") for r in runs)
    s["cappedW"] = any(r.get(f"tput{workers}", {}).get("capped") for r in runs)
    s["callsW"] = median([r[f"tput{workers}"].get("calls_per_task") for r in runs if f"tput{workers}" in r])
    notes: dict = {}
    for r in runs:
        for phase in ("tput1", f"tput{workers}", "latency"):
            for k, v in r.get(phase, {}).get("notes", {}).items():
                notes[k] = notes.get(k, 0) + v
    s["notes"] = notes
    return s


def ratios(summary: dict) -> dict:
    """emq ÷ the best peer in each column (and which peer that is)."""
    base = summary.get("emq")
    out: dict = {}
    for key, _, _, _, higher in COLUMNS:
        peers = [(s[key], name) for name, s in summary.items() if name != "emq" and s.get(key) is not None]
        if not peers:
            continue
        best, who = max(peers) if higher else min(peers)
        mine = base.get(key) if base else None
        out[key] = {"best": who, "best_value": best, "ratio": mine / best if mine is not None and best else None}
    return out


def fmt(x, nd=1) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{nd}f}"


def table(data: dict) -> str:
    w = data["config"]["workers"]
    labels = [label.format(w=w) for _, label, *_ in COLUMNS]
    rows = ["| system | version | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(COLUMNS)]
    for s in data["systems"]:
        sm = data["summary"].get(s)
        v = data["versions"].get(s, {})
        ver = " + ".join(f"{v.get(d, '?')}" for d in PEERS[s].DISTS)
        if not sm:
            rows.append(f"| {s} | {ver} | {data['results'].get(s, {}).get('error', 'not run')} |" + " |" * (len(COLUMNS) - 1))
            continue
        cells = []
        for key, *_ in COLUMNS:
            cell = fmt(sm.get(key))
            if key in ("tput1", "tputW") and sm.get("capped" + key[-1]):
                cell += " (capped)"
            cells.append(cell)
        rows.append(f"| {s} | {ver} | " + " | ".join(cells) + " |")
    r = data["ratios"]
    rows.append(
        "| **emq ÷ best peer** | | "
        + " | ".join(
            (f"{r[k]['ratio']:.2f}× ({r[k]['best']})" if r.get(k, {}).get("ratio") is not None else f"– (best: {r[k]['best']})")
            if k in r
            else "–"
            for k, *_ in COLUMNS
        )
        + " |"
    )
    notes = [f"{s}: {k.replace('_', ' ')} {v}" for s in data["systems"] for k, v in data["summary"].get(s, {}).get("notes", {}).items()]
    if notes:
        rows += ["", "What the clients counted, all runs and phases: " + "; ".join(notes) + "."]
    return "\n".join(rows)


def plots(data: dict, out: Path, tag: str) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in data["systems"] if data["results"].get(s, {}).get("runs")]
    w = data["config"]["workers"]
    srv = f"{data['server']['name']} {data['server']['version']}"
    colors = [COLORS.get(s, "grey") for s in systems]
    files = []

    def bars(ax, groups, ylabel, title, nd=0):
        """A bar a group (told apart by hatching) for each system (by colour)."""
        from matplotlib.patches import Patch

        width = 0.8 / len(groups)
        hatches = ["", "//", ".."]
        for j, (key, _) in enumerate(groups):
            ys = [data["summary"][s].get(key) or 0 for s in systems]
            xs = [k + (j - (len(groups) - 1) / 2) * width for k in range(len(systems))]
            bs = ax.bar(xs, ys, width, color=colors, alpha=0.8, edgecolor="black", hatch=hatches[j])
            for b, y in zip(bs, ys):
                ax.annotate(f"{y:,.{nd}f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(systems)), systems)
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title}  [{srv}]")
        handles = [Patch(facecolor="white", edgecolor="black", hatch=hatches[j], label=label) for j, (_, label) in enumerate(groups)]
        ax.legend(handles=handles, fontsize=8)
        ax.grid(axis="y", alpha=0.3)

    def save(fig, what):
        f = out / f"tasks-{tag}-{what}.png"
        fig.tight_layout()
        fig.savefig(f, dpi=110)
        plt.close(fig)
        files.append(f)

    fig, ax = plt.subplots(figsize=(10, 5))
    bars(
        ax,
        [("tput1", "1 worker process"), ("tputW", f"{w} worker processes")],
        "tasks/s, first enqueue to last result held (median of runs)",
        f"Throughput of tasks with results (left bar: 1 worker, right: {w})",
    )
    save(fig, "throughput")

    fig, ax = plt.subplots(figsize=(10, 5))
    vals = [[x for r in data["results"][s]["runs"] for x in r.get("latency", {}).get("latency_ms", [])] for s in systems]
    bp = ax.boxplot(vals, whis=(1, 99), showfliers=True, patch_artist=True, widths=0.6, flierprops={"markersize": 2, "alpha": 0.4})
    for patch, c in zip(bp["boxes"], colors):
        patch.set_facecolor(c)
        patch.set_alpha(0.6)
    for k, v in enumerate(vals, start=1):
        if v:
            ax.annotate(
                f"p50 {pct(v, 50):.1f}\np99 {pct(v, 99):.1f}", (k, pct(v, 99)), xytext=(4, 6), textcoords="offset points", fontsize=7
            )
    ax.set_xticks(range(1, len(systems) + 1), systems)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(0, 4 * max((max(v) for v in vals if v), default=1))
    ax.set_ylabel("waiter holds the value − task returned (ms, symlog)")
    c = data["config"]
    ax.set_title(f"Result latency, {c['rate']:g} tasks/s, {w} workers, runs pooled (whiskers p1–p99)  [{srv}]")
    ax.grid(axis="y", alpha=0.3)
    save(fig, "latency")

    fig, ax = plt.subplots(figsize=(10, 5))
    bars(
        ax,
        [("cpu1", "throughput, 1 worker"), ("cpuW", f"throughput, {w} workers"), ("cpuL", "light load")],
        "server CPU per task (µs, INFO cpu; median of runs)",
        "What a task with a result costs the server",
    )
    save(fig, "cpu")
    return files


# -- main -----------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=["valkey", "redis"], default="valkey", help="valkey: the embedded Valkey 9.1; redis: redis-server")
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4, help="worker processes of the second throughput phase and of the latency phase")
    ap.add_argument("--concurrency", type=int, default=8, help="tasks at a time a worker process (where the library has the setting)")
    ap.add_argument("--tasks", type=int, default=10000, help="tasks of the throughput phase with --workers processes")
    ap.add_argument("--tasks1", type=int, default=10000, help="tasks of the throughput phase with 1 process")
    ap.add_argument("--cap-s", type=float, default=60.0, help="a throughput phase stops waiting after this (capped)")
    ap.add_argument("--rate", type=float, default=20.0, help="latency: tasks a second")
    ap.add_argument("--latency-s", type=float, default=10.0, help="latency: for this long")
    ap.add_argument("--wait-timeout", type=float, default=30.0, help="the longest one wait for one result may take")
    ap.add_argument("--warmup", type=int, default=50, help="tasks each client runs (and checks) before it is measured")
    ap.add_argument("--ready-timeout", type=float, default=120.0, help="for a client's start-up and warm-up")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds from starting the workers to the first client")
    ap.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, one run")
    ap.add_argument("--setup", action="store_true", help="make the peers' virtualenvs (and install matplotlib) and stop")
    ap.add_argument("--out", default=str(FIGURES), help="where tasks-<server>[-quick][-tag].json and its plots go")
    ap.add_argument("--tag", help="a suffix for the result files")
    ap.add_argument("--render", metavar="JSON", help="print the table and redraw the plots of a results file; runs nothing")
    cfg = ap.parse_args()
    # The peer modules build their apps when this is set: never in the harness itself.
    os.environ.pop("BENCH_URL", None)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))  # so every `finally` stops what it started

    if cfg.render:
        path = Path(cfg.render)
        data = json.loads(path.read_text())
        print(table(data))
        for f in plots(data, path.parent, path.stem.removeprefix("tasks-")):
            log(f"wrote {f}")
        return 0
    systems = [s for s in cfg.systems.split(",") if s]
    for s in systems:
        if s not in PEERS:
            ap.error(f"unknown system {s!r} (known: {', '.join(SYSTEMS)})")
    if cfg.setup:
        compare.setup_plotting()
        compare.setup(systems)
        return 0
    if "emq" in systems and not PEERS["emq"].available():
        print("tasks.py: skipping emq: this emq has no emq.App (its task layer) yet", file=sys.stderr)
        systems.remove("emq")
    if not systems:
        ap.error("no system to run")
    if not compare.have_plotting():
        print("tasks.py: matplotlib is missing (its plots): python benches/tasks.py --setup", file=sys.stderr)
        return 2
    if cfg.quick:
        cfg.runs, cfg.tasks, cfg.tasks1, cfg.cap_s = 1, 300, 200, 30.0
        cfg.latency_s, cfg.wait_timeout, cfg.warmup, cfg.settle = 3.0, 15.0, 10, 2.0
    missing = [s for s in systems if not Path(python_of(s)).exists()]
    if missing:
        log(f"no virtualenv for {', '.join(missing)}: running setup first")
        compare.setup(missing)

    started = time.monotonic()
    out_dir = Path(cfg.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    logdir = Path(tempfile.mkdtemp(prefix="emq-tasks-"))
    binary = None if cfg.server == "valkey" else shutil.which("redis-server")
    if cfg.server == "redis" and not binary:
        ap.error("--server redis: no redis-server on PATH")
    srv = Server(binary).start()
    try:
        h = Harness(srv.url)
        info = h.client.info("server")
        server = {"name": cfg.server, "version": info.get("valkey_version") or info.get("redis_version"), "allocator": srv.allocator}
        log(f"{server['name']} {server['version']} ({srv.allocator}) at {srv.url}; logs in {logdir}")
        versions = {s: compare.versions_of(s, PEERS[s].DISTS) for s in systems}
        results = compare.run_rounds(systems, cfg.runs, h, lambda s, run: run_system(s, h, cfg, run, logdir))
    finally:
        srv.stop()
    summary = {s: summarize(r["runs"], cfg.workers) for s, r in results.items() if r["runs"]}
    data = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "command": "python benches/tasks.py" + "".join(f" {a}" for a in sys.argv[1:]),
        "machine": f"{os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}",
        "python": sys.version.split()[0],
        "emq_commit": compare.emq_commit(),
        "server": server,
        "systems": systems,
        "versions": versions,
        "config": {k: v for k, v in vars(cfg).items() if k not in ("setup", "render")},
        "summary": summary,
        "ratios": ratios(summary),
        "results": results,
        "logs": str(logdir),
        "elapsed_s": round(time.monotonic() - started, 1),
    }
    tag = cfg.server + ("-quick" if cfg.quick else "") + (f"-{cfg.tag}" if cfg.tag else "")
    path = out_dir / f"tasks-{tag}.json"
    path.write_text(json.dumps(data, indent=1))
    pngs = plots(data, out_dir, tag)
    print()
    print(table(data))
    print()
    log(f"wrote {path} and {', '.join(p.name for p in pngs)} in {data['elapsed_s'] / 60:.1f} min")
    failed = [s for s in systems if results[s].get("errors")]
    if failed:
        for s in failed:
            log(f"{s} failed: {results[s]['error']}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

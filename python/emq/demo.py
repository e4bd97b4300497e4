"""`emq demo`: a few thousand jobs scheduled over some seconds, flat and in
lanes; worker processes run them; one is killed mid-run (SIGKILL) and the others
recover its jobs; a table of what happened and how late jobs started."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from ._core import Job
from ._describe import server_line
from .errors import check_extra

LANES = ["eu", "us", "ap", "bulk:low"]


def handler(job: Job) -> None:
    """The demo's handler: record when it started, work a little, sometimes fail."""
    d = json.loads(job.data)
    started = time.time() * 1000
    _record([job.id, d["due"], started, job.attempts])
    time.sleep(d["work_ms"] / 1000)
    if d.get("flaky") and job.attempts == 1:
        raise RuntimeError("flaky once")
    if d.get("poison"):
        raise ValueError("poison")


def _record(row: list[Any]) -> None:
    """Appends a start to this worker process's file in the demo's directory
    (one write of one line: the lines of concurrent handlers never mix)."""
    path = os.path.join(os.environ["EMQ_DEMO_DIR"], f"starts-{os.getpid()}.jsonl")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(row) + "\n").encode())
    finally:
        os.close(fd)


def _starts(directory: str) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name)) as f:
            rows.extend(json.loads(line) for line in f if line.strip())
    return rows


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else float("nan")


def run_demo(*, url: str | None, jobs: int, seconds: float, workers: int) -> int:
    try:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        from rich.table import Table
    except ModuleNotFoundError as e:
        check_extra(e, "rich", "cli", "emq demo")
        raise

    import emq

    from .embedded import Server

    console = Console()
    server = None
    if url is None:
        server = Server().start()
        url = server.url
    client = emq.connect(url)
    console.print(f"[bold]emq demo[/] on {server_line(client)}")
    name = f"demo-{int(time.time())}"
    q = emq.Queue(client, name)
    q.set_lane_limit("bulk:low", 2)

    rnd = random.Random(7)
    now = client.time_ms()
    start_at = now + 1500
    specs = []
    for _ in range(jobs):
        due = start_at + int(rnd.random() * seconds * 1000)
        d = {"due": due, "work_ms": rnd.choice([0, 1, 2, 5, 20])}
        if rnd.random() < 0.02:
            d["flaky"] = True
        if rnd.random() < 0.003:
            d["poison"] = True
        lane = rnd.choice(LANES) if rnd.random() < 0.35 else None
        specs.append({"data": json.dumps(d), "at": due / 1000, "lane": lane, "max_attempts": 2})
    for i in range(0, len(specs), 500):
        q.add_many(specs[i : i + 500])
    in_lanes = sum(1 for s in specs if s["lane"])
    console.print(f"scheduled {jobs} jobs over {seconds:.0f} s ({in_lanes} in {len(LANES)} lanes, one limited to 2 at a time)")

    # The URL (and its password, if any) goes to the workers in their environment,
    # never on a command line, which every user of the machine can read.
    starts_dir = tempfile.mkdtemp(prefix="emq-demo-")
    env = dict(os.environ, EMQ_URL=url, EMQ_DEMO_DIR=starts_dir)
    cmd = [
        sys.executable,
        "-m",
        "emq",
        "worker",
        "emq.demo:handler",
        "--queue",
        name,
        "--concurrency",
        "16",
        "--lease",
        "1.5",
        "--beat",
        "1",
    ]
    procs = [subprocess.Popen(cmd, env=env) for _ in range(workers)]
    killed = False
    try:
        with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console) as bar:
            task = bar.add_task("jobs settled", total=jobs)
            deadline = time.monotonic() + seconds + 60
            while time.monotonic() < deadline:
                c = q.counts()
                left = c.schedule + c.pending + c.active + sum(c.lanes.values())
                bar.update(task, completed=jobs - left)
                if not killed and jobs - left > jobs * 0.4 and len(procs) > 1:
                    procs[0].send_signal(signal.SIGKILL)
                    killed = True
                    bar.console.print(f"[red]killed worker {procs[0].pid} (SIGKILL) with jobs in flight: the others will recover them[/]")
                if left == 0:
                    break
                time.sleep(0.1)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()

    rows = _starts(starts_dir)
    shutil.rmtree(starts_dir, ignore_errors=True)
    first: dict[str, float] = {}
    for job_id, due, started, attempts in rows:
        late = started - due
        if attempts == 1 and (job_id not in first or late < first[job_id]):
            first[job_id] = late
    c = q.counts()
    again = sum(1 for s in rows if s[3] > 1)  # a second start: a retry or a recovery
    dead = c.dead
    left = c.schedule + c.pending + c.active + sum(c.lanes.values())
    lateness = list(first.values())
    table = Table(title="emq demo: what happened")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("jobs scheduled", str(jobs))
    table.add_row("jobs done", str(jobs - dead - left))
    table.add_row("second starts (retries and recoveries)", str(again))
    table.add_row("dead (poison jobs, out of attempts)", str(dead))
    table.add_row("worker killed mid-run", "yes" if killed else "no")
    table.add_row("lateness p50 (ms)", f"{_pct(lateness, 50):.1f}")
    table.add_row("lateness p99 (ms)", f"{_pct(lateness, 99):.1f}")
    table.add_row("lateness max (ms)", f"{max(lateness) if lateness else float('nan'):.1f}")
    console.print(table)
    console.print("lateness: handler start − due time, first attempts, on this machine's clock")
    if server is not None:
        server.stop()
    return 0

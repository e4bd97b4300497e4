"""`emq demo`: first tasks with results (a worker process runs `emq.demo_tasks`:
values that come back as their types, a retry, a failure with its traceback, a
cancel of a running task with its progress); then a few thousand jobs scheduled
over some seconds, flat and in lanes; worker processes run them; one is killed
mid-run (SIGKILL) and the others recover its jobs; a table of what happened and
how late jobs started."""

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
from decimal import Decimal
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


def run_tasks(console: Any, url: str, queue: str) -> None:
    """The demo's first part: tasks called from here, run by a worker process,
    each waited for; a table of their outcomes."""
    from rich.table import Table

    from .errors import TaskError
    from .tasks import JobState

    os.environ["EMQ_URL"] = url  # the demo's tasks' app (emq.demo_tasks) reaches the demo's server
    from . import demo_tasks as t

    log_path = os.path.join(tempfile.mkdtemp(prefix="emq-demo-tasks-"), "worker.log")
    cmd = [sys.executable, "-m", "emq", "worker", "emq.demo_tasks:app", "--queue", queue, "--concurrency", "4", "--beat", "0.2"]
    console.print(f"[bold]tasks[/]: a worker process runs emq.demo_tasks on the queue {queue!r}; each call below waits for its result")
    with open(log_path, "w") as log_file:
        worker = subprocess.Popen(cmd, env=dict(os.environ), stdout=log_file, stderr=log_file)
    table = Table(title="emq demo: tasks and their results")
    for column in ("call", "outcome", "value or error", "attempts", "ms"):
        table.add_column(column, justify="right" if column in ("attempts", "ms") else "left")
    try:
        calls = [
            ("add(2, 3)", t.add.options(queue=queue).enqueue(2, 3)),
            ("total(Invoice(...))", t.total.options(queue=queue).enqueue(t.Invoice("ada", [Decimal("9.99"), Decimal("0.01")]))),
            ("flaky(7)", t.flaky.options(queue=queue).enqueue(7)),
            ("broken(2)", t.broken.options(queue=queue).enqueue(2)),
        ]
        dead: TaskError | None = None
        for label, h in calls:
            began = time.monotonic()
            try:
                outcome, shown = "done", repr(h.result(timeout=30))
            except TaskError as e:
                outcome, shown, dead = e.state, f"{e.type}: {e.message}", e
            ms = (time.monotonic() - began) * 1000
            table.add_row(label, outcome, shown, str(h.status().attempts), f"{ms:.1f}")
        slow = t.slow.options(queue=queue).enqueue(200)
        deadline = time.monotonic() + 30
        status = slow.status()
        while time.monotonic() < deadline and not (status.state is JobState.ACTIVE and status.progress):
            time.sleep(0.05)
            status = slow.status()
        asked = slow.cancel()
        try:
            slow.result(timeout=30)
            outcome = "done (the cancel came late)"
        except TaskError as e:
            outcome = e.state
        shown = f"progress {status.progress} when cancel() said {asked}"
        table.add_row("slow(200), cancelled", outcome, shown, str(slow.status().attempts), "")
        console.print(table)
        if dead is not None and dead.traceback:
            tail = dead.traceback.strip().splitlines()[-4:]
            console.print("the dead job's traceback, as its worker wrote it (the last lines):", markup=False)
            console.print("\n".join("  " + line for line in tail), markup=False, highlight=False)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(15)
        except subprocess.TimeoutExpired:
            worker.kill()
        t.app.close()
    with open(log_path) as f:
        warnings = sum(1 for line in f if " WARNING " in line)
    console.print(f"the task worker logged {warnings} failures at WARNING, each with its traceback ({log_path})")


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
    run_tasks(console, url, f"{name}-tasks")
    console.print(f"[bold]jobs[/]: {jobs} scheduled jobs, {workers} worker processes, one of them killed mid-run")
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
    # The workers' logs (a WARNING with its traceback for each failure) go to a file, under the progress bar.
    jobs_log = open(os.path.join(starts_dir + "-logs.txt"), "w")  # noqa: SIM115 - closed once the workers are gone
    procs = [subprocess.Popen(cmd, env=env, stdout=jobs_log, stderr=jobs_log) for _ in range(workers)]
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
        jobs_log.close()

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
    with open(jobs_log.name) as f:
        warnings = sum(1 for line in f if " WARNING " in line)
    console.print(f"the workers logged {warnings} failures at WARNING, each with its traceback ({jobs_log.name})")
    if server is not None:
        server.stop()
    return 0

"""An app's schedules (emq.tasks.schedules) on real servers: `app.schedule`
writes at once and each tick's job is the task call; `@app.cron` declares
without connecting, and a worker of the app writes what the code declares;
`sync_schedules` removes what it no longer declares; refusals name the call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
import redis

import emq
import emq.tools
from test_sweeps_differential import dump


@pytest.fixture
def app(client):
    a = emq.App(client=client, queue="apps")
    yield a


def test_app_schedule_writes_the_task_call_on_the_task_queue(app, client):
    """A schedule of a task must enqueue the task's call with its arguments,
    on the task's queue; a broken one would write the data elsewhere or lose
    the arguments."""

    @app.task(queue="reports", max_attempts=5)
    def report(day: str, verbose: bool = False) -> None: ...

    assert app.schedule("daily", cron="0 6 * * *", tz="America/New_York", task=report, args=("mon",), kwargs={"verbose": True})
    [info] = app.schedules()
    assert (info.name, info.queue, info.cron, info.tz, info.max_attempts) == ("daily", "reports", "0 6 * * *", "America/New_York", 5)
    assert json.loads(info.data) == {"emq": 1, "task": report.name, "args": ["mon"], "kwargs": {"verbose": True}}
    handle = app.run_schedule_now("daily")
    assert handle.queue == "reports" and handle.id.startswith("schedule:daily:")
    assert app.queue("reports").get(handle.id).data == info.data
    assert "reports" in app.queues
    assert app.unschedule("daily") and app.schedules() == []


def test_app_schedule_refusals_name_the_call_and_write_nothing(app, client, r):
    """A bad cron or a task given with data must be refused before anything is
    written, naming `emq.App.schedule`."""

    @app.task
    def t() -> None: ...

    before = dump(r)
    with pytest.raises(emq.ArgumentError, match=r"^emq\.App\.schedule: cron minute field"):
        app.schedule("bad", cron="99 * * * *", task=t)
    with pytest.raises(emq.ArgumentError, match=r"^emq\.App\.schedule: give task .* or data, not both"):
        app.schedule("bad", every=1, task=t, data=b"x")
    with pytest.raises(emq.ArgumentError, match=r"^emq\.App\.schedule: tz applies to cron only"):
        app.schedule("bad", every=timedelta(minutes=1), tz="Europe/Berlin", task=t)
    assert dump(r) == before
    assert "bad" not in app._schedules.declared


def test_cron_declares_without_connecting_and_sync_writes_and_removes(server):
    """`@app.cron` at import must not connect (a module makes its app at
    import); `sync_schedules` writes the declared one and removes a schedule of
    the app's queues that the code no longer declares."""
    app = emq.App(server.url, queue="synced")

    @app.cron("*/5 * * * *")
    @app.task
    def poll() -> None: ...

    assert not app.connected
    assert app.queue("synced").schedule("stale", every=60, data="x")
    synced = app.sync_schedules()
    assert (synced.written, synced.removed) == ([poll.name], ["stale"])
    assert [s.name for s in app.schedules()] == [poll.name]
    assert app.sync_schedules().written == [], "the same definitions change nothing"
    app.close()


APP = """
import emq
app = emq.App(queue="started")

@app.cron("* * * * * *")
@app.task
def every_second() -> None:
    pass
"""


def test_a_worker_of_the_app_writes_its_declared_schedules_and_runs_their_ticks(server, tmp_path: Path):
    """`emq worker MODULE:APP` writes the schedules the code declares as it
    starts, and its beat runs their ticks (a 6-field cron, every second)."""
    (tmp_path / "ticking.py").write_text(APP)
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    p = subprocess.Popen(
        [sys.executable, "-m", "emq", "worker", "ticking:app", "--url", server.url, "--idle-beat", "30"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        q = emq.Queue(emq.connect(server.url), "started")  # type: ignore[arg-type]
        end = time.monotonic() + 15
        done = []
        while time.monotonic() < end:
            done = [j for j in [q.get(i) for i in _tick_ids(server.url)] if j is not None and j.state != "pending"]
            if len(done) >= 2:
                break
            time.sleep(0.1)
        assert [s.name for s in q.schedules()] == ["ticking.every_second"]
        assert len(done) >= 2, "the worker ran fewer than two ticks"
    finally:
        p.kill()
        p.wait(10)


def _tick_ids(url: str) -> list[str]:
    r = redis.Redis.from_url(url)
    prefix = "emq:{started}:job:"
    return [k.decode()[len(prefix) :] for k in r.scan_iter(match="emq:\\{started\\}:job:schedule:*")]


def test_a_worker_made_in_code_writes_the_apps_declared_schedules_as_it_starts(server):
    """`emq.Worker(queue, TaskRunner(app))`, made in code, writes the schedules
    the app declares as `run()` starts, on the worker's own client (the app
    never connects), and its beat runs their ticks; a changed declaration is
    written again by the next worker. A worker that wrote nothing would leave
    the server with no schedule and no tick."""
    import threading

    from emq.tasks import TaskRunner

    app = emq.App(server.url, queue="coded")
    ran = threading.Event()

    @app.cron("* * * * * *")
    @app.task
    def tick() -> None:
        ran.set()

    client = emq.connect(server.url)
    q = emq.Queue(client, "coded")
    assert q.schedules() == []

    def run_worker(until) -> None:
        runner = TaskRunner(app, queue="coded")
        worker = emq.Worker(q, runner, beat=0.05, idle_beat=0.5)
        thread = threading.Thread(target=worker.run, daemon=True)
        thread.start()
        try:
            until()
        finally:
            worker.stop()
            thread.join(15)
            runner.close()
        assert not thread.is_alive()

    run_worker(lambda: ran.wait(15))
    assert ran.is_set(), "the worker ran no tick of the declared schedule"
    [info] = q.schedules()
    assert (info.name, info.cron) == (tick.name, "* * * * * *")
    assert not app.connected, "the schedules went through the worker's client"

    app.cron("*/2 * * * * *", name=tick.name)(tick)
    run_worker(lambda: None)
    assert [s.cron for s in q.schedules()] == ["*/2 * * * * *"]
    client.close()
    app.close()

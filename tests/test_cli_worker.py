"""`emq worker MODULE:APP` finds the user's code: the current directory first on
sys.path (the `emq` script has its own directory there, not the user's), the
app's queues by default, and one line with exit code 2 (no traceback unless -v)
for code that cannot be found or imported. Run as the installed `emq` command,
from a directory that holds only the user's files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import emq
from conftest import fresh_server

EMQ_SCRIPT = Path(sys.executable).with_name("emq")  # the console script pip installed

TASKS = """
import json, os
import emq

app = emq.App()

def record(*row):
    with open(os.environ["EMQ_TEST_OUT"], "a") as f:
        f.write(json.dumps(row) + "\\n")

@app.task(queue="alpha")
def first(n: int) -> int:
    record("first", n)
    return n

@app.task(name="second", queue="beta")
async def second(ctx: emq.Context, word: str) -> None:
    record("second", word, ctx.queue)

@app.task(queue="alpha", max_attempts=1)
def fails(order: int) -> None:
    raise LookupError(f"order {order} is not on file")

def handler(job):
    record("handler", job.data.decode())

not_an_app = 42
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A directory with the user's modules, and nothing of the tests' on PYTHONPATH."""
    (tmp_path / "usertasks.py").write_text(TASKS)
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    (tmp_path / "needs_dep.py").write_text("import not_installed_dependency\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "jobs.py").write_text(TASKS)
    return tmp_path


def run(project: Path, *args: str, url: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EMQ_SCRIPT), *args], cwd=project, env=_env(project, url), capture_output=True, text=True, timeout=timeout)


def start_worker(project: Path, url: str, *args: str) -> subprocess.Popen[str]:
    """`emq worker ARGS` running in the project's directory, its output piped."""
    return subprocess.Popen(
        [str(EMQ_SCRIPT), "worker", *args], cwd=project, env=_env(project, url), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _env(project: Path, url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EMQ_URL")}
    env["EMQ_TEST_OUT"] = str(project / "out.jsonl")
    if url:
        env["EMQ_URL"] = url
    return env


def test_code_that_cannot_be_loaded_is_one_line_and_exit_code_2(project):
    """Each way of naming code wrongly: one line that says what is missing, exit
    code 2, no traceback; `-v` adds the traceback of an import that raised."""
    cases = [
        (("nomodule:app",), "emq worker: no module named 'nomodule' (looked in "),
        (("pkg.nothere:app",), "emq worker: no module named 'pkg.nothere'"),
        (("usertasks:ap",), "emq worker: usertasks has no attribute 'ap' (its emq.App: app)"),
        (("usertasks:app.nothing",), "emq worker: usertasks.app has no attribute 'nothing'"),
        (("usertasks:not_an_app",), "emq worker: usertasks:not_an_app is a int, not an emq.App or a function"),
        (("usertasks:first",), "emq worker: usertasks:first is a task: run its app (emq worker MODULE:APP)"),
        (("usertasks:handler",), "emq worker: a handler function needs --queue (an emq.App knows its queues)"),
        (("broken:app",), "emq worker: importing 'broken' raised RuntimeError: boom at import"),
        (("needs_dep:app",), "emq worker: importing 'needs_dep' raised ModuleNotFoundError: No module named 'not_installed_dependency'"),
        (("usertasks",), "emq worker: give MODULE:APP (an emq.App) or MODULE:FUNCTION (a handler), not 'usertasks'"),
    ]
    for args, line in cases:
        res = run(project, "worker", *args)
        assert res.returncode == 2, (args, res.stderr)
        assert res.stderr.splitlines() == [res.stderr.strip()] and res.stderr.startswith(line), (args, res.stderr)
        assert "Traceback" not in res.stderr
    res = run(project, "worker", "broken:app", "-v")
    assert res.returncode == 2 and "Traceback" in res.stderr and "boom at import" in res.stderr
    assert res.stderr.strip().splitlines()[-1] == "emq worker: importing 'broken' raised RuntimeError: boom at import"


def test_the_worker_of_an_app_serves_every_queue_its_tasks_use(project, servers):
    """Without --queue, `emq worker usertasks:app` serves alpha and beta (the queues
    its tasks name), imported from the current directory by the `emq` script; its
    sync and async tasks run. With --queue it serves only that one."""
    server = fresh_server(servers, "valkey")
    app = emq.App(server.url)
    # This process has none of the user's tasks: it enqueues them by name, on their queues.
    app.options(queue="alpha").enqueue("usertasks.first", 1)
    app.options(queue="beta").enqueue("second", "hi")
    worker = start_worker(project, server.url, "usertasks:app", "--beat", "0.1")
    try:
        rows = _rows_when(project, 2, worker)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert sorted(rows) == [["first", 1], ["second", "hi", "beta"]]
    assert err.splitlines() == [f"emq: using {server.url} (EMQ_URL)"], err

    (project / "out.jsonl").unlink()
    app.options(queue="alpha").enqueue("pkg.jobs.first", 2)
    app.options(queue="beta").enqueue("second", "not served")
    res = run(project, "worker", "pkg.jobs:app", "--queue", "alpha", "--ttl", "3", "--beat", "0.1", url=server.url)
    assert res.returncode == 0, res.stderr
    assert _rows(project) == [["first", 2]]
    assert app.queue("beta").counts().pending == 1
    app.close()


def test_a_worker_from_the_command_line_answers_waiters(project, servers):
    """Two terminals: this process (which has none of the user's code) enqueues by
    name and waits; `emq worker usertasks:app` runs the tasks: the value comes
    back as JSON, a task that raises is dead with its traceback (naming the
    user's file) in the waiter's TaskError, and the worker logged it at WARNING
    with the traceback, without -v; its last line counts what it did by name."""
    server = fresh_server(servers, "valkey")
    app = emq.App(server.url)
    worker = start_worker(project, server.url, "usertasks:app", "--queue", "alpha", "--beat", "0.1")
    try:
        assert app.options(queue="alpha").enqueue("usertasks.first", 5).result(timeout=30) == 5
        with pytest.raises(emq.TaskError) as e:
            app.options(queue="alpha").enqueue("usertasks.fails", 7).result(timeout=30)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert e.value.type == "LookupError" and e.value.message == "order 7 is not on file", e.value
    assert e.value.traceback is not None and "usertasks.py" in e.value.traceback and "in fails" in e.value.traceback
    assert "WARNING" in err and "Traceback (most recent call last)" in err and "order 7 is not on file" in err, err
    assert worker.returncode == 0, err
    app.close()


def test_a_handler_function_still_works(project, servers):
    """The raw-job form, `emq worker MODULE:FUNCTION --queue Q`, runs the function
    for each job, as before the task layer."""
    server = fresh_server(servers, "valkey")
    emq.Queue(emq.connect(server.url), "raw").add("payload")
    res = run(project, "worker", "usertasks:handler", "--queue", "raw", "--ttl", "2", "--beat", "0.1", "--url", server.url)
    assert res.returncode == 0, res.stderr
    assert _rows(project) == [["handler", "payload"]]
    assert res.stderr.splitlines() == [f"emq: using {server.url} (--url)"]


def _rows(project: Path) -> list[list]:
    path = project / "out.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _rows_when(project: Path, n: int, proc: subprocess.Popen[str], timeout: float = 20) -> list[list]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = _rows(project)
        if len(rows) >= n:
            return rows
        if proc.poll() is not None:
            raise AssertionError(f"the worker exited: {proc.communicate()[1]}")
        time.sleep(0.05)
    raise AssertionError(f"only {_rows(project)} after {timeout} s")


def test_python_m_emq_works_as_the_script_does(project):
    """`python -m emq` is the same command."""
    res = subprocess.run(
        [sys.executable, "-m", "emq", "worker", "usertasks:nothing"],
        cwd=project,
        env=_env(project, None),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert res.returncode == 2 and res.stderr.startswith("emq worker: usertasks has no attribute 'nothing'"), res.stderr

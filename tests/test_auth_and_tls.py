"""Every process that opens a connection (an in-process `Worker`, a `Stalled`
sweeper, the `emq worker` command, the demo) runs jobs on a server with
`requirepass`, as an ACL user limited to `~emq:*` without `@scripting` (the
`default` user off, so a connection that does not authenticate is refused), and
over TLS; and no connection runs as another user.

Once, a worker opened its other connections from the client's
address, which has the password removed: every beat failed with `NOAUTH` and no
job ran (or, with `default` open, ran as `default`).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import emq

from servers import set_user

REPO = Path(__file__).resolve().parent.parent
Q = "prod"
CLI_Q = "prod-cli"  # the `emq worker` process's own queue, so it must run jobs itself
USER, PASSWORD = "emq-worker", "w0rker s3cret"

# What emq's workers, sweepers, CLI and demo send, and nothing else: no
# scripting, no CLIENT (the park then waits its last stretch on its own clock).
WORKER_COMMANDS = [
    "ping",
    "time",
    "info",
    "zrange",
    "zcard",
    "zcount",
    "hget",
    "hmget",
    "hgetall",
    "exists",
    "type",
    "llen",
    "lrange",
    "watch",
    "unwatch",
    "multi",
    "exec",
    "discard",
    "zadd",
    "zrem",
    "zremrangebyscore",
    "rpush",
    "lpop",
    "lmove",
    "ltrim",
    "hset",
    "hdel",
    "hincrby",
    "del",
    "pexpireat",
    "pexpire",
    "lrem",
    "blpop",
    "incr",
    "zmscore",
    "get",
    "hlen",
    "set",
    "sadd",
    "smembers",
    "lrem",
]


def ran_something(c: dict) -> bool:
    """A connection that has run a command of its own: not one caught between
    its accept and its handshake's AUTH (listed as `default` until then)."""
    return (c.get("cmd") or "NULL").lower() not in ("null", "auth", "hello")


def add_jobs(q: emq.Queue, n: int = 24) -> list[str]:
    """Ready jobs, flat and in a lane, some due a little later, and three whose
    lease runs out without a worker (for the stalled sweeper)."""
    ids = q.add_many(
        [{"data": b"x", "id": f"j{i}", "lane": "L" if i % 3 == 0 else None, "delay": 0.3 if i % 4 == 0 else 0} for i in range(n)]
    )
    q.add_many([{"data": b"s", "id": f"s{i}"} for i in range(3)])
    stalled = [j.id for j in q.claim(20, lease=0.2) if j.id.startswith("s")]
    assert stalled, "the abandoned claims took no s job"
    return ids + [f"s{i}" for i in range(3)]


def worker_cli(url: str, tmp: Path, env: dict | None = None) -> subprocess.Popen:
    e = dict(env or os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), e.get("PYTHONPATH")]))
    e.update(EMQ_URL=url, EMQ_TEST_DIR=str(tmp))  # the URL in the environment, not on the command line
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "emq",
            "-v",
            "worker",
            "tests.worker_handlers:touch",
            "--queue",
            CLI_Q,
            "--beat",
            "0.1",
            "--lease",
            "5",
            "--concurrency",
            "4",
        ],
        cwd=REPO,
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )


def ran_by_cli(tmp: Path) -> list[str]:
    return [line.split()[0] for f in tmp.glob("ran-*.txt") for line in f.read_text().splitlines()]


def run_everything(url: str, who, tmp: Path, env: dict | None = None) -> set[str]:
    """Jobs added; an in-process Worker and a Stalled sweeper run one queue's,
    an `emq worker` process another's. Returns the users seen on the server's connections
    (`who()`), sampled while everything runs."""
    c = emq.connect(url)
    q = emq.Queue(c, Q)
    ids = add_jobs(q)
    cli_q = emq.Queue(c, CLI_Q)
    cli_ids = cli_q.add_many([{"data": b"c", "id": f"c{i}", "lane": "L" if i % 2 else None} for i in range(8)])
    here: list[str] = []
    w = emq.Worker(q, lambda job: here.append(job.id), beat=0.1, lease=5, concurrency=4)
    s = emq.Stalled(q, interval=0.1, max_stalled=5).start()
    result: dict = {}

    def run():
        try:
            result["counters"] = w.run()
        except BaseException as e:  # noqa: BLE001 - checked below
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    cli = worker_cli(url, tmp, env)
    users: set[str] = set()
    try:
        deadline = time.monotonic() + 60
        while True:
            users |= who()
            states = [(j.state if j else None) for j in [*map(q.get, ids), *map(cli_q.get, cli_ids)]]
            if all(st == "done" for st in states):
                break
            assert time.monotonic() < deadline, (dict(zip(ids + cli_ids, states)), result, w.counters.snapshot())
            assert "error" not in result, result
            assert cli.poll() is None, cli.stdout.read().decode(errors="replace")
            time.sleep(0.05)
        users |= who()
    finally:
        w.stop()
        s.stop()
        cli.send_signal(signal.SIGTERM)
        out = cli.communicate(timeout=30)[0].decode(errors="replace")
        t.join(30)
    assert "error" not in result, result
    assert s.error is None, s.error
    assert cli.returncode == 0, out
    assert "NOAUTH" not in out and "NOPERM" not in out, out
    assert PASSWORD not in out
    assert set(here) == set(ids), set(ids) ^ set(here)
    assert sorted(ran_by_cli(tmp)) == sorted(cli_ids)
    assert s.counters.snapshot()["sweeps"] >= 1
    return users


def demo(url: str, env: dict | None = None) -> tuple[str, int]:
    """`emq demo` on that server (the URL from EMQ_URL): its output, and how
    many jobs it says were done."""
    e = dict(env or os.environ, EMQ_URL=url, COLUMNS="120")
    p = subprocess.run(
        [sys.executable, "-m", "emq", "demo", "--jobs", "150", "--seconds", "1", "--workers", "2"],
        cwd=REPO,
        env=e,
        capture_output=True,
        timeout=120,
    )
    out = (p.stdout + p.stderr).decode(errors="replace")
    assert p.returncode == 0, out
    done = [int(m) for m in re.findall(r"jobs done\D*(\d+)", out)]
    assert done, out
    return out, done[0]


def test_requirepass(protected_server, tmp_path):
    """The `default` user with a password: every connection authenticates."""
    url = protected_server.url_for(password=protected_server.password)
    admin = protected_server.admin()

    def who():
        return {c["user"] for c in admin.client_list(_type="normal") if c.get("user") != "admin" and ran_something(c)}

    users = run_everything(url, who, tmp_path)
    assert users == {"default"}, users
    out, done = demo(url)
    assert done >= 140, out  # the demo's poison jobs die
    assert protected_server.password not in out


def test_acl_user_without_scripting(protected_server, acl, tmp_path):
    """A user limited to `~emq:*`, the commands above, no `@scripting`, and
    `default` off: the work is done, every connection runs as that user, and
    the server refused nothing emq needs."""
    url = acl.restrict(USER, PASSWORD, WORKER_COMMANDS)
    users = run_everything(url, lambda: {c["user"] for c in acl.clients() if ran_something(c)}, tmp_path)
    assert users == {USER}, users
    out, done = demo(url)
    assert done >= 140, out
    assert PASSWORD not in out
    # refused: only what emq asks for and does without (naming the client, the park's CLIENT ID)
    refused = {e["object"] for e in acl.log() if e.get("reason") == "command"}
    assert refused <= {"client|id", "client|setinfo"}, acl.log()
    assert not [e for e in acl.log() if e.get("reason") in ("key", "channel")], acl.log()


def test_tls_as_an_acl_user(tls_server, tls_env, tmp_path, monkeypatch):
    """Over TLS, verified against the server's CA (`SSL_CERT_FILE`), as an ACL
    user: every connection to the TLS port runs as that user."""
    admin = tls_server.admin()
    set_user(admin, USER, PASSWORD, WORKER_COMMANDS)
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_server.ca))
    url = tls_server.url_for(USER, PASSWORD)

    def who():
        port = f":{tls_server.tls_port}"
        return {c["user"] for c in admin.client_list(_type="normal") if c.get("laddr", "").endswith(port) and ran_something(c)}

    try:
        users = run_everything(url, who, tmp_path, tls_env)
        assert users == {USER}, users
        out, done = demo(url, tls_env)
        assert done >= 140, out
        assert PASSWORD not in out
    finally:
        admin.acl_deluser(USER)
        admin.close()


def test_an_idle_worker_stops_within_beats_where_it_may_not_unblock(protected_server, acl):
    """An idle worker parks 30 s by default; `stop()` ends the park with
    CLIENT UNBLOCK, which this user may not send: its pops then last a beat
    at a time, and the stop is served within a few beats, not the idle park."""
    url = acl.restrict(USER, PASSWORD, WORKER_COMMANDS)
    w = emq.Worker(emq.Queue(emq.connect(url), "idle-stop"), lambda job: None, beat=0.2)
    assert w.idle_beat == 30
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    time.sleep(1.0)  # idle, parked
    w.stop()
    t.join(5)
    assert not t.is_alive(), "the stop waited for the idle park"
    assert w.counters.degraded_beats == 0

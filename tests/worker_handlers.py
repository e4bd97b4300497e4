"""Handlers for the worker tests' `python -m emq worker tests.worker_handlers:…`
subprocesses (run with the repository root as the working directory).

They record what they do in a Redis list, so the test reads one history across
processes: `start <tag> <id> <attempt>` when a handler begins and `finish <tag>
<id>` when it returns. The environment says where and how:

- `EMQ_TEST_URL`: the server of the log (required);
- `EMQ_TEST_TAG`: this worker's name in the log (default: the pid);
- `EMQ_TEST_BLOCK=1`: every handler blocks (sleeps an hour) after recording its
  start, a worker to be killed mid-job.

A job's data may be JSON: `{"sleep": seconds}` (the handler's run time) and
`{"fail": true}` (the handler raises after sleeping).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time

import redis

LOG = "emq-test:log"

_lock = threading.Lock()
_clients: dict[str, redis.Redis] = {}


def log_client(url: str | None = None) -> redis.Redis:
    """One redis-py client per URL (thread-safe: it has a connection pool)."""
    url = url or os.environ["EMQ_TEST_URL"]
    with _lock:
        if url not in _clients:
            _clients[url] = redis.Redis.from_url(url)
        return _clients[url]


def _spec(job) -> dict:
    try:
        spec = json.loads(job.data)
    except (ValueError, UnicodeDecodeError):
        return {}
    return spec if isinstance(spec, dict) else {}


def _tag() -> str:
    return os.environ.get("EMQ_TEST_TAG") or str(os.getpid())


def _plan(job) -> tuple[float, bool]:
    spec = _spec(job)
    sleep = float(spec.get("sleep", 0))
    if os.environ.get("EMQ_TEST_BLOCK") == "1":
        sleep = 3600.0
    return sleep, bool(spec.get("fail"))


def record(job) -> None:
    """Records the start, sleeps as the job says, raises if it says `fail`,
    records the finish."""
    r = log_client()
    tag = _tag()
    r.rpush(LOG, f"start {tag} {job.id} {job.attempts}")
    sleep, fail = _plan(job)
    time.sleep(sleep)
    if fail:
        raise RuntimeError(f"job {job.id} asked to fail")
    r.rpush(LOG, f"finish {tag} {job.id}")


async def arecord(job) -> None:
    """`record` as a coroutine (the CLI runs it on emq.aio.Worker)."""
    r = log_client()
    tag = _tag()
    await asyncio.to_thread(r.rpush, LOG, f"start {tag} {job.id} {job.attempts}")
    sleep, fail = _plan(job)
    await asyncio.sleep(sleep)
    if fail:
        raise RuntimeError(f"job {job.id} asked to fail")
    await asyncio.to_thread(r.rpush, LOG, f"finish {tag} {job.id}")


def touch(job) -> None:
    """Records `<id> <attempt>` in a file of its own in `EMQ_TEST_DIR` (one
    line, one write), for workers whose user may touch nothing but emq's keys."""
    path = os.path.join(os.environ["EMQ_TEST_DIR"], f"ran-{os.getpid()}.txt")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{job.id} {job.attempts}\n".encode())
    finally:
        os.close(fd)

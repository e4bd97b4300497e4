"""The client side of `benches/tasks.py`: one module per task queue, each defining
the same two tasks and a `Client` that enqueues them and waits for their results.

Every module here is importable with the standard library alone, so the harness
(emq's environment) can ask it for its worker command line; the library, the app
or broker its worker CLI loads, and the tasks are made only when `$BENCH_URL` is
set, which the harness sets for the processes it runs under the peer's own
interpreter (its virtualenv): the workers, and the client,

    python -m peers.tasks {throughput,latency} --system NAME --url URL ...

which imports `peers.tasks.NAME` by that name (so a task's registered name is the
same in the client and in the workers), warms the system up with `--warmup` tasks
(their results checked), prints `ready`, waits for a `go` line on stdin (the
harness reads the server's CPU in between), runs the measurement and prints one
line of JSON.

A module defines:

- `DIST` (and `DISTS`, every distribution whose version is reported);
- `worker_argv(python, url, queue, concurrency)` and `worker_env(...)`: one
  worker process, its CLI as its documentation shows (`{k}` in an argument
  becomes the worker's index: Celery's node names must differ);
- `Client(url, queue)` (or an awaitable `Client.create(url, queue)` where
  `ASYNC = True`): `submit_add(x, y)` and `submit_stamp(i)` return a handle,
  `wait(handle, timeout)` returns the task's value (or raises), `close()`. The
  methods are coroutines in the asynchronous clients. A client may keep counts
  of what it saw in `notes` (a dict), printed with its measurement.

The tasks: `add(x, y) -> x + y` and `stamp(i) -> [i, time.time()]`, the clock
read as the task returns.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib
import json
import sys
import threading
import time

SEND_BATCH = 100  # asynchronous clients gather this many enqueues at a time, as compare.py's producers do


def _check_add(x: int, value) -> str | None:
    return None if value == 2 * x else f"add({x}, {x}) returned {value!r}"


def _check_stamp(i: int, value) -> str | None:
    ok = isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == i and isinstance(value[1], float)
    return None if ok else f"stamp({i}) returned {value!r}"


class Tally:
    """What came back: right values, wrong ones, and waits that failed (the
    first few errors kept word for word)."""

    def __init__(self) -> None:
        self.ok = 0
        self.wrong = 0
        self.failed = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def settle(self, check, arg, value, error: str | None) -> bool:
        """Counts one wait's outcome (`error`: why the wait failed); True if right."""
        why = error or check(arg, value)
        with self._lock:
            if why is None:
                self.ok += 1
                return True
            if error:
                self.failed += 1
            else:
                self.wrong += 1
            if len(self.errors) < 5:
                self.errors.append(why[:300])
        return False

    def as_dict(self) -> dict:
        return {"ok": self.ok, "wrong": self.wrong, "failed": self.failed, "errors": self.errors}


def _error(arg, e: BaseException) -> str:
    return f"waiting for task {arg}: {type(e).__module__}.{type(e).__qualname__}: {e}"


def _summary(count: int, waited: int, start: float, enqueued: float, tally: Tally) -> dict:
    end = time.perf_counter()
    return {
        "count": count,
        "waited": waited,
        "capped": waited < count,
        "enqueue_s": enqueued - start,
        "seconds": end - start,
        **tally.as_dict(),
    }


# -- synchronous clients (emq, rq, celery, dramatiq) ----------------------------


def _sync_wait(client, h, timeout: float, arg):
    """(value, None), or (None, why the wait failed)."""
    try:
        return client.wait(h, timeout), None
    except Exception as e:  # noqa: BLE001 - the peer's own error, reported as a failed wait
        return None, _error(arg, e)


def sync_warmup(client, count: int, timeout: float) -> None:
    """`count` adds, each checked; the first that is not right ends it."""
    tally = Tally()
    handles = [client.submit_add(i, i) for i in range(count)]
    for i, h in enumerate(handles):
        if not tally.settle(_check_add, i, *_sync_wait(client, h, timeout, i)):
            raise RuntimeError(f"warm-up: {tally.errors[0]}")


def sync_throughput(client, count: int, timeout: float, cap_s: float) -> dict:
    """Enqueue `count` adds one call at a time, then wait for each in order; a
    wait cut short by the cap ends the run (capped), uncounted."""
    tally = Tally()
    start = time.perf_counter()
    handles = [client.submit_add(i, i) for i in range(count)]
    enqueued = time.perf_counter()
    waited = 0
    for i, h in enumerate(handles):
        left = start + cap_s - time.perf_counter()
        if left <= 0:
            break
        value, error = _sync_wait(client, h, min(timeout, left), i)
        if error and left < timeout:
            break
        tally.settle(_check_add, i, value, error)
        waited += 1
    return _summary(count, waited, start, enqueued, tally)


def sync_latency(client, rate: float, seconds: float, timeout: float) -> dict:
    """`stamp(i)` sent at `rate` a second, each waited for on a thread of a pool
    (a thread stays warm, and with it the library's connection for that thread)."""
    tally = Tally()
    count = max(1, int(rate * seconds))
    latencies: list[float] = []
    lag = 0.0

    def waiter(i, h):
        value, error = _sync_wait(client, h, timeout, i)
        held = time.time()
        if tally.settle(_check_stamp, i, value, error):
            latencies.append((held - value[1]) * 1000)

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=16)
    start = time.perf_counter()
    futures = []
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        lag = max(lag, -delay)
        futures.append(pool.submit(waiter, i, client.submit_stamp(i)))
    # Each wait has its own timeout; a library that overran one is reported, not waited for.
    concurrent.futures.wait(futures, timeout=timeout + 5)
    pool.shutdown(wait=False, cancel_futures=True)
    return {"count": count, "latency_ms": latencies, "send_lag_ms_max": lag * 1000, **tally.as_dict()}


# -- asynchronous clients (arq, saq, taskiq) -------------------------------------


async def _async_wait(client, h, timeout: float, arg):
    """As `_sync_wait`."""
    try:
        return await client.wait(h, timeout), None
    except Exception as e:  # noqa: BLE001 - as in _sync_wait
        return None, _error(arg, e)


async def _submit_adds(client, xs: range) -> list:
    handles: list = []
    for k in range(0, len(xs), SEND_BATCH):
        handles += await asyncio.gather(*(client.submit_add(x, x) for x in xs[k : k + SEND_BATCH]))
    return handles


async def async_warmup(client, count: int, timeout: float) -> None:
    """As `sync_warmup`."""
    tally = Tally()
    handles = await _submit_adds(client, range(count))
    for i, h in enumerate(handles):
        if not tally.settle(_check_add, i, *(await _async_wait(client, h, timeout, i))):
            raise RuntimeError(f"warm-up: {tally.errors[0]}")


async def async_throughput(client, count: int, timeout: float, cap_s: float) -> dict:
    """As `sync_throughput`, the adds enqueued `SEND_BATCH` gathered at a time."""
    tally = Tally()
    start = time.perf_counter()
    handles = await _submit_adds(client, range(count))
    enqueued = time.perf_counter()
    waited = 0
    for i, h in enumerate(handles):
        left = start + cap_s - time.perf_counter()
        if left <= 0:
            break
        value, error = await _async_wait(client, h, min(timeout, left), i)
        if error and left < timeout:
            break
        tally.settle(_check_add, i, value, error)
        waited += 1
    return _summary(count, waited, start, enqueued, tally)


async def async_latency(client, rate: float, seconds: float, timeout: float) -> dict:
    """`stamp(i)` sent at `rate` a second, each waited for by a task of its own."""
    tally = Tally()
    count = max(1, int(rate * seconds))
    latencies: list[float] = []
    lag = 0.0

    async def waiter(i, h):
        value, error = await _async_wait(client, h, timeout, i)
        held = time.time()
        if tally.settle(_check_stamp, i, value, error):
            latencies.append((held - value[1]) * 1000)

    start = time.perf_counter()
    waiters = []
    for i in range(count):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        lag = max(lag, -delay)
        waiters.append(asyncio.create_task(waiter(i, await client.submit_stamp(i))))
    await asyncio.wait(waiters, timeout=timeout + 5)
    return {"count": count, "latency_ms": latencies, "send_lag_ms_max": lag * 1000, **tally.as_dict()}


# -- the command line --------------------------------------------------------------


def _handshake() -> None:
    """`ready` out, then a `go` line in: the harness reads the server's CPU between."""
    print("ready", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit(f"peers.tasks: expected 'go' on stdin, got {line!r}")


def _reset_notes(client) -> None:
    """The counts start again after the warm-up: the measurement's own."""
    if hasattr(client, "notes"):
        client.notes = dict.fromkeys(client.notes, 0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m peers.tasks")
    p.add_argument("op", choices=["throughput", "latency"])
    p.add_argument("--system", required=True)
    p.add_argument("--url", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--count", type=int, default=1000, help="throughput: tasks")
    p.add_argument("--cap-s", type=float, default=60.0, help="throughput: stop waiting after this many seconds (the run is capped)")
    p.add_argument("--rate", type=float, default=20.0, help="latency: tasks a second")
    p.add_argument("--seconds", type=float, default=10.0, help="latency: for this long")
    p.add_argument("--timeout", type=float, default=30.0, help="the longest one wait for one result may take")
    p.add_argument("--warmup", type=int, default=20, help="tasks run (and checked) before `ready`")
    args = p.parse_args(argv)
    mod = importlib.import_module(f"peers.tasks.{args.system}")
    if getattr(mod.Client, "ASYNC", False):
        out = asyncio.run(_run_async(mod, args))
    else:
        out = _run_sync(mod, args)
    print(json.dumps(out), flush=True)


def _run_sync(mod, args) -> dict:
    client = mod.Client(args.url, args.queue)
    try:
        sync_warmup(client, args.warmup, args.timeout)
        _reset_notes(client)
        _handshake()
        if args.op == "throughput":
            out = sync_throughput(client, args.count, args.timeout, args.cap_s)
        else:
            out = sync_latency(client, args.rate, args.seconds, args.timeout)
        return {**out, "notes": getattr(client, "notes", {})}
    finally:
        client.close()


async def _run_async(mod, args) -> dict:
    client = await mod.Client.create(args.url, args.queue)
    try:
        await async_warmup(client, args.warmup, args.timeout)
        _reset_notes(client)
        await asyncio.get_running_loop().run_in_executor(None, _handshake)
        if args.op == "throughput":
            out = await async_throughput(client, args.count, args.timeout, args.cap_s)
        else:
            out = await async_latency(client, args.rate, args.seconds, args.timeout)
        return {**out, "notes": getattr(client, "notes", {})}
    finally:
        await client.close()

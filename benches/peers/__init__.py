"""One small module per queue system, each exposing the same operations for
`benches/compare.py`.

Every peer module is importable with the standard library alone (the queue
library is imported inside functions), so the harness, which runs in emq's
environment, can ask it for the worker command line and for the raw Redis
commands that count its unfinished jobs, while the operations that need the
library (the producers, and the workers) run as subprocesses under the
peer's own interpreter (its virtualenv, see compare.py).

A peer module defines:

- `DIST`: the distribution whose version is reported.
- `worker_argv(python, url, queue, concurrency) -> list[str]`: one worker
  process, run as the library's documentation says (its CLI where it has one).
- `outstanding(cmd, queue) -> int`: jobs not finished yet (queued, scheduled
  or active), from raw commands sent with `cmd(*args)`.
- `Producer(url, queue)`: `add_now(ids)` and `add_at(pairs)` (coroutines),
  `close()`; driven by `main()` below (`python -m peers.NAME schedule|flood|delays|burst`).

The handlers all do the same: record `id due_ms start_ms` (wall clock,
`time.time() * 1000`, taken first thing) in the file named by
`$BENCH_RECORDS`, one `write` on an O_APPEND descriptor per job, so records
cost the server nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time

_fd: int | None = None
_fd_pid: int | None = None


def record(job_id, due) -> None:
    """Called first thing by every handler."""
    start = time.time() * 1000
    global _fd, _fd_pid
    if _fd is None or _fd_pid != os.getpid():
        _fd = os.open(os.environ["BENCH_RECORDS"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        _fd_pid = os.getpid()
    os.write(_fd, f"{job_id} {int(due)} {start:.3f}\n".encode())


def now_ms() -> float:
    return time.time() * 1000


async def _maybe(x):
    if asyncio.iscoroutine(x):
        return await x
    return x


async def _drive(producer, args) -> dict:
    """The producer side of one phase; prints a JSON summary."""
    out: dict = {"n": 0}
    first = last = None
    if args.op == "schedule":
        # stdin: [[id, due_ms], ...]; each job is due at its own absolute time.
        pairs = json.load(sys.stdin)
        late = 0
        for i in range(0, len(pairs), args.batch):
            chunk = pairs[i : i + args.batch]
            t = now_ms()
            late += sum(1 for _, due in chunk if due <= t)
            first = first or t
            await _maybe(producer.add_at(chunk))
            out["n"] += len(chunk)
        last = now_ms()
        out["late_at_enqueue"] = late
    elif args.op == "flood":
        # Immediate jobs at a steady rate, a batch every `tick` seconds (a
        # producer that falls behind catches up without sleeping), bounded by
        # count and by time.
        tick = 0.02
        per_tick = max(1, round(args.rate * tick))
        start = time.monotonic()
        deadline = start + args.seconds
        k = ticks = 0
        while k < args.count and time.monotonic() < deadline:
            ticks += 1
            target = min(args.count, ticks * per_tick)
            ids = [f"{args.prefix}{j}" for j in range(k, target)]
            first = first or now_ms()
            await _maybe(producer.add_now(ids))
            k = target
            out["n"] = k
            delay = start + ticks * tick - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
        last = now_ms()
        out["seconds"] = round(time.monotonic() - start, 3)
    elif args.op == "delays":
        # One job at a time, at random moments (0 to `--gap-ms` apart), each due
        # `--min-ms` to `--max-ms` after its add: the retry backoffs and short
        # waits that come while the workers park. Prints each job's due time.
        rnd = random.Random(args.seed)
        pairs = []
        for k in range(args.count):
            await asyncio.sleep(rnd.uniform(0, args.gap_ms / 1000))
            t = now_ms()
            first = first or t
            pair = [f"{args.prefix}{k}", int(t + rnd.randint(args.min_ms, args.max_ms))]
            await _maybe(producer.add_at([pair]))
            pairs.append(pair)
            out["n"] = k + 1
        last = now_ms()
        out["pairs"] = pairs
    elif args.op == "burst":
        # As fast as the producer can: batches of `batch`.
        deadline = time.monotonic() + args.seconds
        k = 0
        first = now_ms()
        while k < args.count and time.monotonic() < deadline:
            ids = [f"{args.prefix}{j}" for j in range(k, min(args.count, k + args.batch))]
            await _maybe(producer.add_now(ids))
            k += len(ids)
            out["n"] = k
        last = now_ms()
    out["first_add_ms"] = first
    out["last_add_ms"] = last
    await _maybe(producer.close())
    return out


def main(make_producer) -> None:
    """`python -m peers.NAME {schedule,flood,delays,burst} --url U --queue Q ...`"""
    p = argparse.ArgumentParser()
    p.add_argument("op", choices=["schedule", "flood", "delays", "burst"])
    p.add_argument("--url", required=True)
    p.add_argument("--queue", required=True)
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--rate", type=float, default=1000.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--prefix", default="b")
    p.add_argument("--gap-ms", type=float, default=100.0)
    p.add_argument("--min-ms", type=int, default=10)
    p.add_argument("--max-ms", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    async def go():
        producer = await _maybe(make_producer(args.url, args.queue))
        return await _drive(producer, args)

    print(json.dumps(asyncio.run(go())), flush=True)

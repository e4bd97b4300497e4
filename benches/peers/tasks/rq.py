"""RQ: `rq worker` processes (its CLI; the default worker forks a work horse for
each job and runs one job at a time, so the benchmark's concurrency does not
apply), everything else default (pickled calls and results, results kept 500 s);
`Queue.enqueue` to call a task and `Job.latest_result(timeout=...)` to wait for
its `Result`, as RQ's documentation shows (https://python-rq.org/docs/results/,
"job.latest_result(timeout=60)"). With a timeout it blocks on the server (XREAD
BLOCK on the job's results stream); the timeout is whole seconds.
"""

from __future__ import annotations

import math
import os
import time

DIST = "rq"
DISTS = ("rq",)


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [os.path.join(os.path.dirname(python), "rq"), "worker", "--url", url, "--quiet", queue]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {}


def add(x: int, y: int) -> int:
    return x + y


def stamp(i: int) -> list:
    return [i, time.time()]


class Client:
    def __init__(self, url: str, queue: str):
        from redis import Redis
        from rq import Queue

        self.q = Queue(queue, connection=Redis.from_url(url))

    def submit_add(self, x: int, y: int):
        return self.q.enqueue(add, x, y)

    def submit_stamp(self, i: int):
        return self.q.enqueue(stamp, i)

    def wait(self, job, timeout: float):
        result = job.latest_result(timeout=max(1, math.ceil(timeout)))
        if result is None:
            raise TimeoutError(f"rq job {job.id}: no result within {math.ceil(timeout)} s")
        if result.type != result.Type.SUCCESSFUL:
            raise RuntimeError(f"rq job {job.id}: {result.type.name}: {result.exc_string}")
        return result.return_value

    def close(self) -> None:
        self.q.connection.close()

"""Celery with Redis as broker and result backend, as its "Using Redis" page says
(https://docs.celeryq.dev/en/stable/getting-started/backends-and-brokers/redis.html:
"app.conf.broker_url = 'redis://localhost:6379/0'" and, to store "the state and
return values of tasks in Redis", "app.conf.result_backend =
'redis://localhost:6379/0'"); everything else default (JSON, prefetch multiplier
4, visibility timeout 1 h, results kept 1 day). `celery -A peers.tasks.celery
worker` processes (its CLI) on its default prefork pool, `--concurrency` child
processes each (its default is the number of CPUs), each with its own node name;
`Task.delay` to call a task and `AsyncResult.get(timeout=...)` to wait for its
value. On the Redis backend `get` does not poll: the client SUBSCRIBEs to the
task's channel when it sends the task, and the worker PUBLISHes the result.
"""

from __future__ import annotations

import os
import time

DIST = "celery"
DISTS = ("celery", "kombu")


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    celery = os.path.join(os.path.dirname(python), "celery")
    return [
        celery,
        "-A",
        "peers.tasks.celery",
        "worker",
        "--concurrency",
        str(concurrency),
        "--hostname",
        "bench{k}@%h",
        "--loglevel",
        "WARNING",
    ]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url}


if "BENCH_URL" in os.environ:
    from celery import Celery

    app = Celery("peers.tasks.celery")
    app.conf.broker_url = os.environ["BENCH_URL"]
    app.conf.result_backend = os.environ["BENCH_URL"]

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def stamp(i: int) -> list:
        return [i, time.time()]


class Client:
    def __init__(self, url: str, queue: str):
        self.app = app

    def submit_add(self, x: int, y: int):
        return add.delay(x, y)

    def submit_stamp(self, i: int):
        return stamp.delay(i)

    def wait(self, result, timeout: float):
        return result.get(timeout=timeout)

    def close(self) -> None:
        self.app.close()

"""Taskiq with taskiq-redis's broker and result backend, as taskiq-redis's README
shows (https://pypi.org/project/taskiq-redis/: "broker =
RedisStreamBroker(url=...).with_result_backend(RedisAsyncResultBackend(redis_url=...))",
"taskiq worker broker:broker", "await task.wait_result()"; the stream broker is the
one of its three with acknowledgements); everything else default (results
pickled, kept until read and after: `keep_results=True`, no expiry). `taskiq
worker peers.tasks.taskiq:broker --workers 1 --max-async-tasks N` processes (its
CLI; its defaults are 2 worker processes and 100 tasks at a time each); async
tasks; `Task.kiq` to call one and `TaskiqTask.wait_result(timeout=...)` to wait,
which polls: a GET (is it ready?) every `check_interval` (default 0.2 s), then
one more GET for the value.
"""

from __future__ import annotations

import os
import time

DIST = "taskiq"
DISTS = ("taskiq", "taskiq-redis")


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    taskiq = os.path.join(os.path.dirname(python), "taskiq")
    return [
        taskiq,
        "worker",
        "peers.tasks.taskiq:broker",
        "--workers",
        "1",
        "--max-async-tasks",
        str(concurrency),
        "--log-level",
        "WARNING",
    ]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url}


if "BENCH_URL" in os.environ:
    from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

    broker = RedisStreamBroker(url=os.environ["BENCH_URL"]).with_result_backend(RedisAsyncResultBackend(redis_url=os.environ["BENCH_URL"]))

    @broker.task
    async def add(x: int, y: int) -> int:
        return x + y

    @broker.task
    async def stamp(i: int) -> list:
        return [i, time.time()]


class Client:
    ASYNC = True

    @classmethod
    async def create(cls, url: str, queue: str) -> Client:
        await broker.startup()
        return cls()

    async def submit_add(self, x: int, y: int):
        return await add.kiq(x, y)

    async def submit_stamp(self, i: int):
        return await stamp.kiq(i)

    async def wait(self, task, timeout: float):
        result = await task.wait_result(timeout=timeout)
        if result.is_err:
            raise RuntimeError(f"taskiq task {task.task_id}: {result.error!r}")
        return result.return_value

    async def close(self) -> None:
        await broker.shutdown()

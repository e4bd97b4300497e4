"""arq: `arq peers.tasks.arq.WorkerSettings` processes (its CLI), `max_jobs` set to
the benchmark's concurrency (its default is 10), everything else default (the
worker polls the queue every 0.5 s; results kept 3600 s); `ArqRedis.enqueue_job`
to call a task and `Job.result(timeout=...)` to wait for its value, as arq's
documentation shows (https://arq-docs.helpmanual.io/, "Jobs": "await
job.result(timeout=5)"). `Job.result` polls: a GET and a ZSCORE in a MULTI every
`poll_delay` (default 0.5 s) until the result is there.
"""

from __future__ import annotations

import os
import time

DIST = "arq"
DISTS = ("arq",)


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [os.path.join(os.path.dirname(python), "arq"), "peers.tasks.arq.WorkerSettings"]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url, "BENCH_CONCURRENCY": str(concurrency)}


async def add(ctx, x: int, y: int) -> int:
    return x + y


async def stamp(ctx, i: int) -> list:
    return [i, time.time()]


if "BENCH_URL" in os.environ:
    from arq.connections import RedisSettings

    class WorkerSettings:
        functions = [add, stamp]
        redis_settings = RedisSettings.from_dsn(os.environ["BENCH_URL"])
        max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "10"))


class Client:
    ASYNC = True

    @classmethod
    async def create(cls, url: str, queue: str) -> Client:
        from arq import create_pool
        from arq.connections import RedisSettings

        self = cls()
        self.pool = await create_pool(RedisSettings.from_dsn(url))
        return self

    async def submit_add(self, x: int, y: int):
        return await self.pool.enqueue_job("add", x, y)

    async def submit_stamp(self, i: int):
        return await self.pool.enqueue_job("stamp", i)

    async def wait(self, job, timeout: float):
        return await job.result(timeout=timeout)

    async def close(self) -> None:
        await self.pool.aclose()

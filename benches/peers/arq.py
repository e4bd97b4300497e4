"""arq: `arq peers.arq.WorkerSettings` processes (its CLI), `max_jobs` set to the
benchmark's concurrency (its default is 10), everything else default (poll
every 0.5 s); `enqueue_job` to add (arq has no bulk add: a batch is gathered
concurrently on one pool), `_defer_until` for scheduled jobs."""

from __future__ import annotations

import os

from . import main, record

DIST = "arq"


async def noop(ctx, i, d):
    record(i, d)


def _settings():
    if "BENCH_URL" not in os.environ:  # imported by the harness: no worker settings
        return None
    from arq.connections import RedisSettings

    class WorkerSettings:
        functions = [noop]
        redis_settings = RedisSettings.from_dsn(os.environ["BENCH_URL"])
        max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "10"))

    return WorkerSettings


WorkerSettings = _settings()


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    # arq's queue name stays its default (`arq:queue`); the settings read
    # BENCH_URL and BENCH_CONCURRENCY (worker_env).
    return [os.path.join(os.path.dirname(python), "arq"), "peers.arq.WorkerSettings"]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url, "BENCH_CONCURRENCY": str(concurrency)}


def outstanding(cmd, queue: str) -> int:
    return int(cmd("ZCARD", "arq:queue"))


class Producer:
    @classmethod
    async def create(cls, url: str, queue: str):
        from arq import create_pool
        from arq.connections import RedisSettings

        self = cls()
        self.pool = await create_pool(RedisSettings.from_dsn(url))
        return self

    async def add_now(self, ids):
        import asyncio

        await asyncio.gather(*(self.pool.enqueue_job("noop", i, 0) for i in ids))

    async def add_at(self, pairs):
        import asyncio
        from datetime import datetime, timezone

        await asyncio.gather(
            *(self.pool.enqueue_job("noop", i, due, _defer_until=datetime.fromtimestamp(due / 1000, tz=timezone.utc)) for i, due in pairs)
        )

    async def close(self):
        await self.pool.aclose()


if __name__ == "__main__":
    main(Producer.create)

"""arq: `arq peers.schedules.arq.WorkerSettings` processes with one cron job,
`cron(tick, second=set(range(60)))` (every second; arq's default `microsecond`
of 123456 places it 0.123 s past each second; `unique=True`, its default, so its
job id is `cron:tick:<ms of the run>` and several workers enqueue it once). The
worker's loop enqueues a cron job ahead of its time (deferred to it) and polls
for due jobs every `poll_delay` (0.5 s, its default)."""

from __future__ import annotations

import os
import time

from peers.schedules import record


def argv(role: str, python: str, url: str, queue: str) -> list[str]:
    return [os.path.join(os.path.dirname(python), "arq"), "peers.schedules.arq.WorkerSettings"]


async def tick(ctx) -> None:
    started = time.time() * 1000
    tick_ms = float(ctx["job_id"].rsplit(":", 1)[1])
    record(os.environ["BENCH_URL"], tick_ms, ctx["enqueue_time"].timestamp() * 1000, started)


if "BENCH_URL" in os.environ:
    from arq import cron
    from arq.connections import RedisSettings

    class WorkerSettings:
        functions: list = []
        cron_jobs = [cron(tick, second=set(range(60)))]
        redis_settings = RedisSettings.from_dsn(os.environ["BENCH_URL"])

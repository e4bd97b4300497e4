"""saq: `saq peers.schedules.saq.settings` processes with one cron job,
`CronJob(tick, cron="* * * * * *")` (croniter's six fields: seconds last; every
second; `unique=True`, its default: key `cron:tick`). Each worker's `schedule`
upkeep (every 1 s, its default) enqueues the next run, scheduled at its second,
and moves due scheduled jobs to the queue."""

from __future__ import annotations

import os

from peers.schedules import record


def argv(role: str, python: str, url: str, queue: str) -> list[str]:
    return [os.path.join(os.path.dirname(python), "saq"), "peers.schedules.saq.settings", "--quiet"]


async def tick(ctx) -> None:
    job = ctx["job"]
    record(os.environ["BENCH_URL"], job.scheduled * 1000.0, float(job.queued), float(job.started))


if "BENCH_URL" in os.environ:
    from saq import CronJob, Queue

    settings = {
        "queue": Queue.from_url(os.environ["BENCH_URL"], name=os.environ["BENCH_QUEUE"]),
        "functions": [],
        "cron_jobs": [CronJob(tick, cron="* * * * * *")],
    }

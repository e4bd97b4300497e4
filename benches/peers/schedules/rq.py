"""RQ: its own cron scheduler (`rq.cron.CronScheduler`, RQ 2.5 and later, as
`rq cron CONFIG` runs it) with `cron.register(tick, queue, cron="* * * * * *")`
(croniter's six fields: every second), and `rq worker` processes to run the
jobs. A scheduler computes its next run in-process and keeps no shared state
that another scheduler reads, so each scheduler process enqueues every tick.
RQ's job carries no tick: it is the second its enqueue fell in (a run more than
a second late would count against the next tick)."""

from __future__ import annotations

import math
import os
import sys

from peers.schedules import record


def argv(role: str, python: str, url: str, queue: str) -> list[str]:
    if role == "scheduler":
        return [python, "-m", "peers.schedules.rq", url, queue]
    return [python, "-m", "rq.cli", "worker", "--url", url, "--quiet", queue]


def tick() -> None:
    from rq import get_current_job

    job = get_current_job()
    added = job.enqueued_at.timestamp() * 1000
    record(os.environ["BENCH_URL"], math.floor(added / 1000) * 1000.0, added, job.started_at.timestamp() * 1000)


def main() -> None:
    import redis
    from rq import cron

    from peers.schedules.rq import tick as by_name  # a worker imports it by this name, not __main__'s

    url, queue = sys.argv[1:3]
    cron.register(by_name, queue, cron="* * * * * *")
    cron.create_cron(redis.Redis.from_url(url)).start()


if __name__ == "__main__":
    main()

"""rq: `rq worker --with-scheduler` processes (its CLI; the default worker forks
a work horse per job and runs one job at a time, so `concurrency` does not
apply), everything else default (the scheduler looks every 1 s);
`Queue.enqueue_many` to add, `Queue.enqueue_at` for scheduled jobs (rq
stores the due time in whole seconds)."""

from __future__ import annotations

import os

from . import main, record

DIST = "rq"


def noop(i, d):
    record(i, d)


# By its import path: run as `python -m peers.rq`, `noop` would be `__main__.noop`.
NOOP = "peers.rq.noop"


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [os.path.join(os.path.dirname(python), "rq"), "worker", "--url", url, "--with-scheduler", "--quiet", queue]


def outstanding(cmd, queue: str) -> int:
    return int(cmd("LLEN", f"rq:queue:{queue}")) + int(cmd("ZCARD", f"rq:wip:{queue}")) + int(cmd("ZCARD", f"rq:scheduled:{queue}"))


class Producer:
    def __init__(self, url: str, queue: str):
        from redis import Redis
        from rq import Queue

        self.q = Queue(queue, connection=Redis.from_url(url))

    def add_now(self, ids):
        from rq import Queue

        self.q.enqueue_many([Queue.prepare_data(NOOP, (i, 0)) for i in ids])

    def add_at(self, pairs):
        from datetime import datetime, timezone

        for i, due in pairs:
            self.q.enqueue_at(datetime.fromtimestamp(due / 1000, tz=timezone.utc), NOOP, i, due)

    def close(self):
        pass


if __name__ == "__main__":
    main(Producer)

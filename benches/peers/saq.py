"""saq: `saq peers.saq.settings` processes (its CLI), `concurrency` set (its
default is 10), everything else default (the scheduler timer runs every 1 s);
`Queue.enqueue` to add (no bulk add: a batch is gathered concurrently),
`scheduled` = the due time in epoch seconds (a float, so the ms are kept)."""

from __future__ import annotations

import os

from . import main, record

DIST = "saq"


async def noop(ctx, *, i, d):
    record(i, d)


def _settings():
    if "BENCH_URL" not in os.environ:  # imported by the harness
        return None
    from saq import Queue

    return {
        "queue": Queue.from_url(os.environ["BENCH_URL"], name=os.environ["BENCH_QUEUE"]),
        "functions": [noop],
        "concurrency": int(os.environ.get("BENCH_CONCURRENCY", "10")),
    }


settings = _settings()


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [os.path.join(os.path.dirname(python), "saq"), "peers.saq.settings", "--quiet"]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url, "BENCH_QUEUE": queue, "BENCH_CONCURRENCY": str(concurrency)}


def outstanding(cmd, queue: str) -> int:
    return int(cmd("ZCARD", f"saq:{queue}:incomplete"))


class Producer:
    def __init__(self, url: str, queue: str):
        from saq import Queue

        self.q = Queue.from_url(url, name=queue)

    async def add_now(self, ids):
        import asyncio

        await asyncio.gather(*(self.q.enqueue("noop", i=i, d=0) for i in ids))

    async def add_at(self, pairs):
        import asyncio

        await asyncio.gather(*(self.q.enqueue("noop", i=i, d=due, scheduled=due / 1000) for i, due in pairs))

    async def close(self):
        await self.q.disconnect()


if __name__ == "__main__":
    main(Producer)

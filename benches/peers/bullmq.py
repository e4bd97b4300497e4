"""BullMQ's Python package: a worker process as its docs show (a `Worker` on an
asyncio loop until SIGTERM, then `worker.close()`), `concurrency` set (its
default is 1), everything else default; `Queue.addBulk` to add, with a `delay`
of due − now for scheduled jobs (the package has no absolute due time)."""

from __future__ import annotations

import sys

from . import main, now_ms, record

DIST = "bullmq"


async def process(job, token):
    record(job.data["i"], job.data["d"])


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [python, "-m", "peers.bullmq", "worker", url, queue, str(concurrency)]


def outstanding(cmd, queue: str) -> int:
    p = f"bull:{queue}:"
    return (
        int(cmd("LLEN", p + "wait"))
        + int(cmd("LLEN", p + "active"))
        + int(cmd("LLEN", p + "paused"))
        + int(cmd("ZCARD", p + "delayed"))
        + int(cmd("ZCARD", p + "prioritized"))
    )


async def run_worker(url: str, queue: str, concurrency: int) -> None:
    import asyncio
    import signal

    from bullmq import Worker

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker = Worker(queue, process, {"connection": url, "concurrency": concurrency})
    await stop.wait()
    await worker.close()


class Producer:
    def __init__(self, url: str, queue: str):
        from bullmq import Queue

        self.q = Queue(queue, {"connection": url})

    async def add_now(self, ids):
        await self.q.addBulk([{"name": "noop", "data": {"i": i, "d": 0}} for i in ids])

    async def add_at(self, pairs):
        t = now_ms()
        await self.q.addBulk([{"name": "noop", "data": {"i": i, "d": due}, "opts": {"delay": max(0, int(due - t))}} for i, due in pairs])

    async def close(self):
        await self.q.close()


if __name__ == "__main__":
    if sys.argv[1:2] == ["worker"]:
        import asyncio

        asyncio.run(run_worker(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    else:
        main(Producer)

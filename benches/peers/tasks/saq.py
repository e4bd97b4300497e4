"""saq: `saq peers.tasks.saq.settings` processes (its CLI), `concurrency` set (its
README's example and default are 10), everything else default; `Queue.enqueue` to
call a task and `Job.refresh(until_complete=timeout)` to wait for it, as saq's
README shows ("await job.refresh(1)"), then `Job.result`. On Redis `refresh`
waits on the queue's pub/sub channel (one PSUBSCRIBE a queue, shared in-process);
`Queue.apply` and `Queue.map` poll instead (every `poll_interval`, 0.5 s, and
once more after the last result), so they are not used here.

`refresh` can miss the completion it waits for: it reads the job, and only then
registers for its channel (and PSUBSCRIBEs again if no other wait was open), so
a job that finishes in between leaves it waiting until its timeout. The client
therefore waits as the README does, `refresh(1)`, again until the job is done or
`timeout` has passed, and counts each one-second wait that ran out while the job
then read as complete (`lost_wakeups`, in the client's output).
"""

from __future__ import annotations

import os
import time

DIST = "saq"
DISTS = ("saq",)
REFRESH_S = 1.0  # the README's `refresh(1)`


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [os.path.join(os.path.dirname(python), "saq"), "peers.tasks.saq.settings", "--quiet"]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url, "BENCH_QUEUE": queue, "BENCH_CONCURRENCY": str(concurrency)}


async def add(ctx, *, x: int, y: int) -> int:
    return x + y


async def stamp(ctx, *, i: int) -> list:
    return [i, time.time()]


if "BENCH_URL" in os.environ:
    from saq import Queue

    settings = {
        "queue": Queue.from_url(os.environ["BENCH_URL"], name=os.environ["BENCH_QUEUE"]),
        "functions": [add, stamp],
        "concurrency": int(os.environ.get("BENCH_CONCURRENCY", "10")),
    }


class Client:
    ASYNC = True

    @classmethod
    async def create(cls, url: str, queue: str) -> Client:
        from saq import Queue

        self = cls()
        self.notes = {"lost_wakeups": 0}
        self.q = Queue.from_url(url, name=queue)
        await self.q.connect()
        return self

    async def submit_add(self, x: int, y: int):
        return await self.q.enqueue("add", x=x, y=y)

    async def submit_stamp(self, i: int):
        return await self.q.enqueue("stamp", i=i)

    async def wait(self, job, timeout: float):
        import asyncio

        from saq.job import Status

        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            left = deadline - loop.time()
            try:
                await job.refresh(until_complete=max(0.001, min(REFRESH_S, left)))  # 0 would wait forever
                break
            except asyncio.TimeoutError:
                if left <= REFRESH_S:
                    raise
                await job.refresh()
                if job.completed:
                    self.notes["lost_wakeups"] += 1
                    break
        if job.status != Status.COMPLETE:
            raise RuntimeError(f"saq job {job.key} is {job.status}: {job.error}")
        return job.result

    async def close(self) -> None:
        await self.q.disconnect()

"""Dramatiq with its Redis broker and the Results middleware on the Redis backend,
as its cookbook shows (https://dramatiq.io/cookbook.html#results: "result_backend
= RedisBackend()", "broker.add_middleware(Results(backend=result_backend))",
"@dramatiq.actor(store_results=True)", "message.get_result(block=True)"), both on
the one server; everything else default (results kept 10 min). `dramatiq
peers.tasks.dramatiq --processes 1 --threads N` processes (its CLI; its defaults
are a process a CPU and 8 threads each); `Actor.send` to call a task and
`Message.get_result(block=True, timeout=ms)` to wait for its value: a BRPOPLPUSH
on the result's key, whose timeout is whole seconds (below one second it does not
block at all), so every wait here asks for at least 1000 ms.
"""

from __future__ import annotations

import os
import time

DIST = "dramatiq"
DISTS = ("dramatiq",)


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    dramatiq = os.path.join(os.path.dirname(python), "dramatiq")
    return [dramatiq, "peers.tasks.dramatiq", "--processes", "1", "--threads", str(concurrency)]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    return {"BENCH_URL": url}


if "BENCH_URL" in os.environ:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.results import Results
    from dramatiq.results.backends import RedisBackend

    broker = RedisBroker(url=os.environ["BENCH_URL"])
    broker.add_middleware(Results(backend=RedisBackend(url=os.environ["BENCH_URL"])))
    dramatiq.set_broker(broker)

    @dramatiq.actor(store_results=True)
    def add(x: int, y: int) -> int:
        return x + y

    @dramatiq.actor(store_results=True)
    def stamp(i: int) -> list:
        return [i, time.time()]


class Client:
    def __init__(self, url: str, queue: str):
        self.broker = broker

    def submit_add(self, x: int, y: int):
        return add.send(x, y)

    def submit_stamp(self, i: int):
        return stamp.send(i)

    def wait(self, message, timeout: float):
        return message.get_result(block=True, timeout=max(1000, int(timeout * 1000)))

    def close(self) -> None:
        self.broker.close()

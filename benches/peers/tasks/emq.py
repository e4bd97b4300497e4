"""emq's task layer: `emq.App(url)`, tasks registered with `@app.task` (as
`module.qualname`), `python -m emq worker peers.tasks.emq:app --concurrency N`
processes (sync tasks on threads), `task.enqueue(...)` to call one and
`Handle.result(timeout=...)` to wait for its value, which blocks on the server.

It runs in emq's own environment and imports nothing but emq; the app's default
queue is used on both sides (the worker is given no `--queue`).
"""

from __future__ import annotations

import os
import time

DIST = "emq"
DISTS = ("emq",)


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [python, "-m", "emq", "worker", "peers.tasks.emq:app", "--concurrency", str(concurrency)]


def worker_env(url: str, queue: str, concurrency: int) -> dict[str, str]:
    # EMQ_URL too: the CLI's own default URL, should it want one besides the app's.
    return {"BENCH_URL": url, "EMQ_URL": url}


def available() -> bool:
    """Whether this emq has its task layer (`emq.App`)."""
    import emq

    return hasattr(emq, "App")


if "BENCH_URL" in os.environ:  # under a worker or the client: the app and its tasks
    import emq

    app = emq.App(os.environ["BENCH_URL"])

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task
    def stamp(i: int) -> list:
        return [i, time.time()]


class Client:
    def __init__(self, url: str, queue: str):
        self.app = app

    def submit_add(self, x: int, y: int):
        return add.enqueue(x, y)

    def submit_stamp(self, i: int):
        return stamp.enqueue(i)

    def wait(self, h, timeout: float):
        return h.result(timeout=timeout)

    def close(self) -> None:
        pass

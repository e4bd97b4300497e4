"""emq with its server module: the same worker processes as `peers.emq`, on a
queue whose claims and commits the module runs (`emq worker --backend module`;
compare.py's server then loads it), the same producer."""

from __future__ import annotations

from . import main
from .emq import DIST, Producer, handler, outstanding
from .emq import worker_argv as emq_worker_argv

__all__ = ["DIST", "Producer", "handler", "outstanding", "worker_argv"]


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return emq_worker_argv(python, url, queue, concurrency) + ["--backend", "module"]


if __name__ == "__main__":
    main(Producer)

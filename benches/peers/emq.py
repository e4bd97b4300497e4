"""emq: `python -m emq worker MODULE:FUNCTION` processes (its CLI; default beat
1 s, lease 30 s, recovery `reap`), a sync handler, `Queue.add_many` to add."""

from __future__ import annotations

from . import main, record

DIST = "emq"


def handler(job) -> None:
    job_id, due = job.data.split()
    record(job_id.decode(), int(due))


def worker_argv(python: str, url: str, queue: str, concurrency: int) -> list[str]:
    return [python, "-m", "emq", "worker", "peers.emq:handler", "--queue", queue, "--url", url, "--concurrency", str(concurrency)]


def outstanding(cmd, queue: str) -> int:
    p = "emq:{" + queue + "}:"
    return int(cmd("LLEN", p + "pending")) + int(cmd("ZCARD", p + "active")) + int(cmd("ZCARD", p + "schedule"))


class Producer:
    def __init__(self, url: str, queue: str):
        import emq

        self.q = emq.Queue(emq.connect(url), queue)

    def add_now(self, ids):
        self.q.add_many([f"{i} 0" for i in ids])

    def add_at(self, pairs):
        self.q.add_many([{"data": f"{i} {due}", "at": int(due) / 1000} for i, due in pairs])

    def close(self):
        pass


if __name__ == "__main__":
    main(Producer)

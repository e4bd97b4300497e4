"""emq: `python -m emq worker peers.schedules.emq:tick --queue bench` processes,
parked between ticks; the bench makes the schedule (`Queue.schedule("tick",
every=1)`) before they start. Each worker's beat runs TIMERS when a timer is due,
so every worker is also a scheduler; the tick's job id makes it one job."""

from __future__ import annotations


def argv(role: str, python: str, url: str, queue: str) -> list[str]:
    return [python, "-m", "emq", "worker", "peers.schedules.emq:tick", "--queue", queue, "--url", url]


def tick(job) -> None:
    """Nothing: the row holds the times."""

"""The demo's tasks: what `emq demo` enqueues first, and what its task worker
(`python -m emq worker emq.demo_tasks:app`) runs.

The app takes its server from `EMQ_URL`, which the demo sets for its worker
processes; the demo enqueues on a queue of its own run (`--queue`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from decimal import Decimal

from .tasks import App, Context

app = App()


@dataclass(frozen=True)
class Invoice:
    customer: str
    lines: list[Decimal]


@dataclass(frozen=True)
class Total:
    customer: str
    total: Decimal
    lines: int


@app.task
def add(x: int, y: int) -> int:
    """The smallest task: its result comes back as an int."""
    return x + y


@app.task
def total(invoice: Invoice) -> Total:
    """A dataclass in, a dataclass out: Decimals stay Decimals (JSON strings on the wire)."""
    return Total(invoice.customer, sum(invoice.lines, Decimal(0)), len(invoice.lines))


@app.task(max_attempts=3, retry_in=0.2)
def flaky(ctx: Context, order: int) -> str:
    """Fails its first attempt (the worker logs it, with its traceback) and is retried 0.2 s later."""
    if ctx.attempt == 1:
        raise ConnectionResetError(f"the payment gateway hung up on order {order}")
    return f"order {order} charged on attempt {ctx.attempt}"


@app.task(max_attempts=1)
def broken(order: int) -> None:
    """Always raises: the job is dead, and the waiter gets the worker's traceback."""
    prices = {1: Decimal("9.99")}
    print(prices[order])


@app.task
def slow(ctx: Context, steps: int) -> int:
    """Writes its progress as it goes, and stops when asked to (a cancel)."""
    for i in range(steps):
        if ctx.cancelled:
            return i
        ctx.progress(round(i / steps, 2))
        time.sleep(0.05)
    return steps


__all__ = ["Invoice", "Total", "add", "app", "broken", "flaky", "slow", "total"]

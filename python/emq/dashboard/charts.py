"""Throughput charts drawn on the server as SVG: the jobs a queue settled per minute (or hour), from `Queue.throughput`.

A `Chart` is the data the template `_chart.html` draws (autoescaped; no script
and no inline style, which the Content-Security-Policy refuses): for each bar,
its box for the jobs completed and, stacked above it, its box for the jobs that
failed (retried or dead), with a title the browser shows as a tooltip. Heights
are scaled to the busiest bar; an empty chart draws no bar and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..answers import MinuteCounts

WIDTH = 600
"""The chart's width in SVG units (the page scales it to its column)."""
HEIGHT = 120
"""The bars' height at their tallest, in SVG units."""


@dataclass(frozen=True)
class Bar:
    """One bar: a minute (or an hour) of settled jobs."""

    x: float
    width: float
    completed_y: float
    completed_height: float
    failed_y: float
    failed_height: float
    title: str
    """What the bar holds, as text (the tooltip)."""


@dataclass(frozen=True)
class Chart:
    """A titled bar chart with the totals of what it shows."""

    title: str
    bars: tuple[Bar, ...]
    completed: int
    retried: int
    dead: int
    cancelled: int
    recovered: int
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def failed(self) -> int:
        return self.retried + self.dead


def grouped(minutes: Sequence[MinuteCounts], size: int) -> list[MinuteCounts]:
    """Consecutive runs of `size` minutes summed (the last run may be shorter), each named by its first minute."""
    out = []
    for i in range(0, len(minutes), size):
        run = minutes[i : i + size]
        out.append(
            MinuteCounts(
                run[0].minute,
                sum(m.completed for m in run),
                sum(m.retried for m in run),
                sum(m.dead for m in run),
                sum(m.cancelled for m in run),
                sum(m.recovered for m in run),
            )
        )
    return out


def chart(title: str, spans: Sequence[MinuteCounts], *, span_label: str) -> Chart:
    """The chart of `spans` (oldest first); `span_label` names one span ("minute", "hour") in the tooltips."""
    peak = max((s.completed + s.failed for s in spans), default=0)
    step = WIDTH / max(1, len(spans))
    bars = []
    for i, s in enumerate(spans):
        if not s.completed and not s.failed:
            continue
        ok = HEIGHT * s.completed / peak
        bad = HEIGHT * s.failed / peak
        when = s.start.strftime("%Y-%m-%d %H:%M UTC")
        text = f"{span_label} from {when}: {s.completed} completed, {s.retried} retried, {s.dead} dead"
        bars.append(
            Bar(
                round(i * step, 2),
                round(max(step - 1, 1), 2),
                round(HEIGHT - ok, 2),
                round(ok, 2),
                round(HEIGHT - ok - bad, 2),
                round(bad, 2),
                text,
            )
        )
    return Chart(
        title,
        tuple(bars),
        completed=sum(s.completed for s in spans),
        retried=sum(s.retried for s in spans),
        dead=sum(s.dead for s in spans),
        cancelled=sum(s.cancelled for s in spans),
        recovered=sum(s.recovered for s in spans),
    )

"""`/metrics`: jobs by state, workers alive, the oldest wait and the lateness, in the Prometheus text format, read when scraped.

From `Queue.counts()` of each queue the dashboard lists (`Source.queue_names`),
the workers' registry (`emq.workers`) and the heads of each queue's ready lists
and of its `scheduled`:

    emq_jobs{queue="orders",state="pending"} 12.0
    emq_workers 3.0
    emq_oldest_waiting_seconds{queue="orders"} 0.8
    emq_lateness_seconds{queue="orders"} 2.5

    emq_jobs_completed_total{queue="orders"} 1520.0

`state` is `scheduled`, `pending` (a lane's ready jobs too), `active`, `dead`,
`done` or `cancelled` (the done and cancelled rows still kept). `emq_oldest_waiting_seconds`: how long
the ready job due first has waited since its due time (0 with none ready;
one row read for `pending` and for each lane with ready jobs).

`emq_lateness_seconds`: by the server's clock, the longest any job of the queue
has been due without being claimed: the largest of `now - due` over the ready
jobs at the heads of `pending` and of each lane (ready, not yet claimed: what
`emq_oldest_waiting_seconds` reads) and the job soonest due in `scheduled` when
its due time has passed (due, not yet promoted: no promote has run since, so no
worker is beating); 0 when nothing is due. A job's due time is when it was
added (no delay), its `delay`/`at`, or its retry's time. It grows by one second
a second while workers are stopped or short, whatever the queue's length; alert
on it (`emq_lateness_seconds > 30`) rather than on the length.

`emq_jobs_completed_total`, `emq_jobs_retried_total`, `emq_jobs_dead_total`,
`emq_jobs_cancelled_total` and `emq_jobs_recovered_total` (per queue) are the
per-minute counters (`Queue.throughput`) summed over the 25 hours they are
kept: 1,500 `HMGET`s a queue per scrape, pipelined. They are counters in
Prometheus's sense only between the minutes that expire: each value falls as
its oldest minute goes, which `rate()` reads as a counter reset, so rate over
windows well under a day (`rate(emq_jobs_completed_total[5m])` is exact while
the 25-hour window holds more than the last 5 minutes).

The names follow Prometheus's conventions: the `emq_` prefix, base units in
the name (`_seconds`), `_total` on counters only, no label repeating the name
(`tests/test_dashboard_metrics.py` checks them on a scrape).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .source import Source

SETTLED = ("completed", "retried", "dead", "cancelled", "recovered")
"""The kinds of settled job the counters count, as `MinuteCounts` names them."""
LATENESS_HELP = "The longest any job has been due without being claimed (ready, or due in scheduled and not promoted), server clock"


class QueueCollector(Collector):
    """The series of the module's docstring, read at each scrape."""

    def __init__(self, source: Source):
        self.source = source

    def describe(self) -> Iterator[Metric]:
        # Named here, so that registering the collector does not read the server.
        yield GaugeMetricFamily("emq_jobs", "Jobs in each state, by queue", labels=["queue", "state"])
        yield GaugeMetricFamily("emq_workers", "Workers alive (their heartbeat not expired)")
        yield GaugeMetricFamily("emq_oldest_waiting_seconds", "How long the oldest ready job has waited since due", labels=["queue"])
        yield GaugeMetricFamily("emq_lateness_seconds", LATENESS_HELP, labels=["queue"])
        yield from self.settled()

    @staticmethod
    def settled() -> list[CounterMetricFamily]:
        """The families of the settled jobs' counters, empty (`emq_jobs_<kind>_total`)."""
        return [
            CounterMetricFamily(f"emq_jobs_{kind}", f"Jobs {kind} in the last 25 hours, by queue", labels=["queue"]) for kind in SETTLED
        ]

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("emq_jobs", "Jobs in each state, by queue", labels=["queue", "state"])
        waiting = GaugeMetricFamily("emq_oldest_waiting_seconds", "How long the oldest ready job has waited since due", labels=["queue"])
        lateness = GaugeMetricFamily("emq_lateness_seconds", LATENESS_HELP, labels=["queue"])
        settled = self.settled()
        now_ms = self.source.now_ms()
        for summary in self.source.overview():
            for state, n in summary.by_state.items():
                jobs.add_metric([summary.name, state], n)
            oldest = self.source.oldest_waiting_ms(summary.name, summary.counts, now_ms)
            waiting.add_metric([summary.name], (oldest or 0) / 1000)
            late = self.source.lateness_ms(summary.name, summary.counts, now_ms, oldest)
            lateness.add_metric([summary.name], late / 1000)
            totals = self.source.settled_totals(summary.name)
            for family, kind in zip(settled, SETTLED, strict=True):
                family.add_metric([summary.name], getattr(totals, kind))
        yield jobs
        yield waiting
        yield lateness
        yield from settled
        workers = GaugeMetricFamily("emq_workers", "Workers alive (their heartbeat not expired)")
        workers.add_metric([], len(self.source.workers()))
        yield workers


def metrics_response(source: Source) -> tuple[bytes, str]:
    """The text of a scrape and its content type; blocks on the server (the app runs it in a thread)."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(source))
    return generate_latest(registry), CONTENT_TYPE_LATEST

"""`/metrics`: the queues' jobs by state, the workers alive and the oldest wait, in the Prometheus text format, read when scraped.

From `Queue.counts()` of each queue the dashboard lists (`Source.queue_names`),
the workers' registry (`emq.workers`) and the head of each queue's ready lists:

    emq_jobs{queue="orders",state="pending"} 12.0
    emq_workers 3.0
    emq_oldest_waiting_seconds{queue="orders"} 0.8

`state` is `scheduled`, `pending` (a lane's ready jobs too), `active`, `dead`,
`done` or `cancelled` (the done and cancelled rows still kept). `emq_oldest_waiting_seconds`: how long
the ready job due first has waited since its due time (0 with none ready;
one row read for `pending` and for each lane with ready jobs). The series
that need the per-minute counters (`emq_jobs_completed_total`,
`emq_jobs_retried_total`, `emq_jobs_dead_total`, `emq_lateness_seconds`) are
added by `QueueCollector.collect` once those exist; until then they are
absent, not zero.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .source import Source


class QueueCollector(Collector):
    """The series of the module's docstring, read at each scrape."""

    def __init__(self, source: Source):
        self.source = source

    def describe(self) -> Iterator[Metric]:
        # Named here, so that registering the collector does not read the server.
        yield GaugeMetricFamily("emq_jobs", "Jobs in each state, by queue", labels=["queue", "state"])
        yield GaugeMetricFamily("emq_workers", "Workers alive (their heartbeat not expired)")
        yield GaugeMetricFamily("emq_oldest_waiting_seconds", "How long the oldest ready job has waited since due", labels=["queue"])

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("emq_jobs", "Jobs in each state, by queue", labels=["queue", "state"])
        waiting = GaugeMetricFamily("emq_oldest_waiting_seconds", "How long the oldest ready job has waited since due", labels=["queue"])
        now_ms = self.source.now_ms()
        for summary in self.source.overview():
            for state, n in summary.by_state.items():
                jobs.add_metric([summary.name, state], n)
            oldest = self.source.oldest_waiting_ms(summary.name, summary.counts, now_ms)
            waiting.add_metric([summary.name], (oldest or 0) / 1000)
        yield jobs
        yield waiting
        workers = GaugeMetricFamily("emq_workers", "Workers alive (their heartbeat not expired)")
        workers.add_metric([], len(self.source.workers()))
        yield workers


def metrics_response(source: Source) -> tuple[bytes, str]:
    """The text of a scrape and its content type; blocks on the server (the app runs it in a thread)."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(source))
    return generate_latest(registry), CONTENT_TYPE_LATEST

"""`/metrics`: the queues' jobs by state in the Prometheus text format, read from the server when scraped.

One series today, from `Queue.counts()` of each queue the dashboard lists
(`Source.queue_names`):

    emq_jobs{queue="orders",state="pending"} 12.0

`state` is `scheduled`, `pending` (a lane's ready jobs too), `active`, `dead`
or `done` (the done rows still kept). The series that need the per-minute
counters and the workers' registry (`emq_jobs_completed_total`,
`emq_jobs_retried_total`, `emq_jobs_dead_total`, `emq_workers`,
`emq_oldest_waiting_seconds`, `emq_lateness_seconds`) are added by
`QueueCollector.collect` once those exist; until then they are absent, not zero.
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

    def collect(self) -> Iterator[Metric]:
        jobs = GaugeMetricFamily("emq_jobs", "Jobs in each state, by queue", labels=["queue", "state"])
        for summary in self.source.overview():
            for state, n in summary.by_state.items():
                jobs.add_metric([summary.name, state], n)
        yield jobs


def metrics_response(source: Source) -> tuple[bytes, str]:
    """The text of a scrape and its content type; blocks on the server (the app runs it in a thread)."""
    registry = CollectorRegistry()
    registry.register(QueueCollector(source))
    return generate_latest(registry), CONTENT_TYPE_LATEST

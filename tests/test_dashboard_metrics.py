"""`/metrics`, scraped through the dashboard's app in this process: `emq_lateness_seconds` says
how late the queue's work is by the server's clock (a due job not yet promoted, a ready job not
yet claimed), and every family is named as Prometheus's conventions ask.
"""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

import emq
from emq.dashboard import create_app

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

import dashboard as bench  # noqa: E402  (benches/dashboard.py: the in-process GET)

QUEUE = "metered"


def scrape(app) -> dict:
    status, body = asyncio.run(bench.get(app, "/metrics"))
    assert status == 200
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def sample(families: dict, name: str, queue: str = QUEUE) -> float:
    (value,) = [s.value for s in families[name].samples if s.labels.get("queue") == queue]
    return value


def test_lateness_is_how_long_the_oldest_due_job_has_waited_unclaimed(client):
    """A job due 0.2 s after its add and never promoted is late by the time since its due
    time (so is the queue, though nothing is ready: `emq_oldest_waiting_seconds` stays 0);
    once promoted it is still late, now as the oldest ready job; claimed, nothing is late;
    a job due in an hour is not late. A lateness that read only the ready lists, or the
    local clock, or counted a job not yet due, would fail here."""
    q = emq.Queue(client, QUEUE)
    app = create_app(client, queues=[QUEUE], auth=None)
    assert sample(scrape(app), "emq_lateness_seconds") == 0
    id = q.add("due soon", delay=0.2)
    due = q.get(id).due_ms
    time.sleep(0.6)
    before = client.time_ms()
    families = scrape(app)
    after = client.time_ms()
    late = sample(families, "emq_lateness_seconds")
    assert (before - due) / 1000 <= late <= (after - due) / 1000
    assert late >= 0.35
    assert sample(families, "emq_oldest_waiting_seconds") == 0  # nothing ready: the job is still in `scheduled`

    assert q.promote() == 1
    before = client.time_ms()
    families = scrape(app)
    after = client.time_ms()
    assert (before - due) / 1000 <= sample(families, "emq_lateness_seconds") <= (after - due) / 1000
    assert sample(families, "emq_oldest_waiting_seconds") == sample(families, "emq_lateness_seconds")

    (job,) = q.claim(1)
    q.add("later", delay=3600)
    assert sample(scrape(app), "emq_lateness_seconds") == 0
    assert q.complete(job)


def test_metric_names_follow_the_prometheus_conventions(client):
    """Each family: `emq_` and snake case; a counter's samples end in `_total` and a gauge's
    never do; a duration is in seconds and says so (`_seconds`), no other unit named; every
    family has help text and the families the dashboard documents, lateness included. A
    series named `emq_oldestWaitingMs` or a gauge called `_total` would fail here."""
    q = emq.Queue(client, QUEUE)
    q.add("x")
    families = scrape(create_app(client, queues=[QUEUE], auth=None))
    assert {
        "emq_jobs",
        "emq_workers",
        "emq_oldest_waiting_seconds",
        "emq_lateness_seconds",
        "emq_jobs_completed",
        "emq_jobs_retried",
        "emq_jobs_dead",
        "emq_jobs_cancelled",
        "emq_jobs_recovered",
    } == set(families)
    for name, family in families.items():
        assert re.fullmatch(r"emq_[a-z]+(_[a-z]+)*", name), name
        assert family.documentation, name
        assert family.type in ("counter", "gauge"), name
        assert not re.search(r"_(ms|milliseconds|minutes|hours|bytes_total|count)$", name), name
        for s in family.samples:
            assert (s.name == name + "_total") if family.type == "counter" else (s.name == name and not name.endswith("_total")), s.name
            assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", label) for label in s.labels), s.labels
        if "wait" in name or "late" in name:
            assert name.endswith("_seconds") and family.type == "gauge", name

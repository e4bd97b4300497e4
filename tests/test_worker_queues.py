"""A worker over several queues (`emq.Worker([q1, q2, q3], handler)`): one beat
serves them all, each job is settled on its own queue, and a token on any queue
wakes the parked worker (a park thread a queue), on every server."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import emq
import emq.aio


def run_worker(w: emq.Worker) -> threading.Thread:
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    return t


def wait_for(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_one_worker_runs_every_queues_jobs_and_settles_each_on_its_queue(client):
    queues = [emq.Queue(client, f"mq{i}") for i in range(3)]
    ran: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def handler(job):
        with lock:
            ran.append((job.id, job.data))
        if job.data == b"boom":
            raise RuntimeError("boom")

    ids = {q.name: q.add_many([f"{q.name}-{k}".encode() for k in range(5)]) for q in queues}
    bad = queues[1].add(b"boom", max_attempts=1)
    w = emq.Worker(queues, handler, concurrency=4, beat=0.1)
    t = run_worker(w)
    try:
        assert wait_for(lambda: all(q.counts().done == 5 for q in queues)), [q.counts() for q in queues]
        assert wait_for(lambda: queues[1].counts().dead == 1)
    finally:
        w.stop()
        t.join(10)
    assert sorted(i for i, _ in ran) == sorted([*sum(ids.values(), []), bad])
    for q in queues:
        c = q.counts()
        assert (c.pending, c.active, c.done) == (0, 0, 5), (q.name, c)
        assert all(q.get(i).state == "done" for i in ids[q.name])
    assert queues[1].get(bad).state == "dead"


def test_a_token_on_any_queue_wakes_the_parked_worker(client):
    """With a beat of 30 s, a job added to the third queue while the worker parks
    runs long before the next beat: its token woke the worker. A job due in 300 ms
    on the second queue (the promotes saw it) runs when it is due."""
    queues = [emq.Queue(client, f"wake{i}") for i in range(3)]
    started: dict[bytes, float] = {}

    def handler(job):
        started[job.data] = time.monotonic()

    w = emq.Worker(queues, handler, concurrency=2, beat=30)
    t = run_worker(w)
    try:
        time.sleep(0.3)  # the first beat found nothing: parked
        t0 = time.monotonic()
        queues[2].add(b"now")
        assert wait_for(lambda: b"now" in started, timeout=10), "the token did not wake the worker"
        queues[1].add(b"soon", delay=0.3)
        time.sleep(0.1)
        queues[0].add(b"poke")  # a beat after this one sees `soon` due in about 200 ms
        assert wait_for(lambda: b"soon" in started, timeout=10), "the delayed job did not run"
    finally:
        w.stop()
        t.join(40)
    assert started[b"now"] - t0 < 10


def test_bad_queue_lists_are_refused(client):
    q = emq.Queue(client, "one")
    for bad in ([], [q, q], [q, "other"], "one", None):
        with pytest.raises(emq.ArgumentError):
            emq.Worker(bad, lambda j: None)


def test_the_asyncio_worker_serves_several_queues(client):
    queues = [emq.Queue(client, f"amq{i}") for i in range(2)]
    for q in queues:
        q.add_many([b"a", b"b"])
    seen: list[str] = []

    async def handler(job):
        await asyncio.sleep(0)
        seen.append(job.id)

    async def main():
        w = emq.aio.Worker(queues, handler, concurrency=2, beat=0.1)
        task = asyncio.create_task(w.run())
        for _ in range(500):
            if len(seen) == 4:
                break
            await asyncio.sleep(0.01)
        w.stop()
        await task

    asyncio.run(main())
    assert len(seen) == 4 and all(q.counts().done == 2 for q in queues)

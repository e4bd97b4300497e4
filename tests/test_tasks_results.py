"""Tasks end to end against real servers: results waited for (sync and asyncio,
many waits on one connection), errors with their remote traceback, timeouts,
cancels before and during a run, progress, status, and what a worker makes dead
at once. Each test runs a real `emq.Worker` with the app's `TaskRunner`."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import enum
import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest
import redis

import emq
from emq.tasks import TaskRunner


@dataclasses.dataclass(frozen=True)
class Invoice:
    number: int
    total: Decimal
    due: date


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@contextlib.contextmanager
def working(app: emq.App, *queues: str, concurrency: int = 4, beat: float = 0.05) -> Iterator[emq.Worker]:
    """A worker of the app's tasks on its own connection, run on a thread, stopped at the end."""
    client = emq.connect(app.url)
    names = list(queues) or app.queues
    runner = TaskRunner(app, queue=names[0] if len(names) == 1 else None)
    qs = [emq.Queue(client, n) for n in names]
    worker = emq.Worker(qs[0] if len(qs) == 1 else qs, runner, concurrency=concurrency, beat=beat, lease=5)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(15)
        runner.close()
        client.close()
        assert not thread.is_alive(), "the worker did not stop"


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def test_results_round_trip_by_the_return_annotation(server):
    """A task's return value comes back as the type its annotation names (a
    datetime with its offset, a Decimal, a dataclass of a Decimal and a date, a
    UUID, bytes, an enum, a tuple); a handle made by name gives the plain JSON
    value; status shows the same result and the times. A version that handed
    back the JSON text, lost the offset, or read the result before the job was
    done fails here."""
    app = emq.App(server.url)
    tz = timezone(timedelta(hours=-5))

    @app.task
    def invoice(n: int, total: Decimal) -> Invoice:
        return Invoice(n, total * 2, date(2025, 3, 1))

    @app.task
    def when(iso: str) -> datetime:
        return datetime.fromisoformat(iso)

    @app.task
    async def mixed(b: bytes) -> tuple[uuid.UUID, bytes, Color, list[int]]:
        await asyncio.sleep(0)
        return uuid.UUID(int=7), b[::-1], Color.BLUE, [1, 2]

    @app.task
    def nothing() -> None:
        return None

    with working(app):
        h1 = invoice.enqueue(4, Decimal("10.25"))
        h2 = when.enqueue(datetime(2025, 1, 2, 3, 4, 5, tzinfo=tz).isoformat())
        h3 = mixed.enqueue(b"\x00\xffab")
        h4 = nothing.enqueue()
        assert h1.result(timeout=20) == Invoice(4, Decimal("20.50"), date(2025, 3, 1))
        got = h2.result(timeout=20)
        assert got == datetime(2025, 1, 2, 3, 4, 5, tzinfo=tz) and got.utcoffset() == timedelta(hours=-5)
        assert h3.result(timeout=20) == (uuid.UUID(int=7), b"ba\xff\x00", Color.BLUE, [1, 2])
        assert h4.result(timeout=20) is None
        by_name = app.handle(h1.id)
        assert by_name.result(timeout=5) == {"number": 4, "total": "20.50", "due": "2025-03-01"}
        s = h1.status()
        assert s.state is emq.JobState.DONE and s.state == "done" and s.result == Invoice(4, Decimal("20.50"), date(2025, 3, 1))
        assert s.attempts == 1 and s.max_attempts == 3 and s.error is None
        assert s.added is not None and s.started is not None and s.finished is not None
        assert s.added.tzinfo is timezone.utc and s.added <= s.started <= s.finished
        assert abs((s.finished - datetime.now(timezone.utc)).total_seconds()) < 60
        with pytest.raises(dataclasses.FrozenInstanceError):
            s.state = emq.JobState.DEAD  # type: ignore[misc]
    app.close()


def test_a_result_read_after_the_job_settled_returns_at_once(server):
    """An outcome known at registration is answered by the registration itself:
    a wait for a job done long ago returns with no worker running, and again
    from another app (another process would do the same)."""
    app = emq.App(server.url)

    @app.task
    def one() -> int:
        return 1

    with working(app):
        h = one.enqueue()
        assert h.result(timeout=20) == 1
    assert h.result(timeout=1) == 1
    other = emq.App(server.url)
    assert other.handle(h.id).result(timeout=1) == 1
    assert asyncio.run(other.handle(h.id).result_async(timeout=1)) == 1
    other.close()
    app.close()


def connected_clients(r: redis.Redis) -> int:
    return int(r.info("clients")["connected_clients"])


def test_many_waits_share_one_connection(server):
    """500 concurrent waits (asyncio tasks and threads) on jobs not yet run open
    one connection (the collector's) beside the app's own: a version that opened
    a connection per wait, or one per thread, shows hundreds more. Every wait
    then gets its own job's value."""
    app = emq.App(server.url)

    @app.task
    def square(n: int) -> int:
        return n * n

    r = redis.Redis.from_url(server.url)
    handles = [square.options(delay=1.5).enqueue(i) for i in range(500)]
    app.queue()  # the app's connection is open
    before = connected_clients(r)
    seen: list[int] = []

    async def many() -> list[int]:
        tasks = [asyncio.ensure_future(h.result_async(timeout=60)) for h in handles[:400]]
        await asyncio.sleep(0.3)
        seen.append(connected_clients(r))
        return await asyncio.gather(*tasks)

    thread_results: dict[int, int] = {}

    def in_thread(i: int) -> None:
        thread_results[i] = handles[i].result(timeout=60)

    threads = [threading.Thread(target=in_thread, args=(i,)) for i in range(400, 500)]
    for t in threads:
        t.start()
    collected: list[int] = []
    runner = threading.Thread(target=lambda: collected.extend(asyncio.run(many())))
    runner.start()
    wait_for(lambda: seen, 20, "the waits to be registered")
    assert seen[0] <= before + 1, f"{seen[0] - before} connections more for 500 waits"
    assert app._collector("default").open_waits() == 500
    with working(app, concurrency=8):
        runner.join(60)
        for t in threads:
            t.join(60)
    assert collected == [i * i for i in range(400)]
    assert thread_results == {i: i * i for i in range(400, 500)}
    r.close()
    app.close()


def test_result_async_does_not_block_the_loop(server):
    """While a coroutine awaits a result that takes a second, another coroutine
    on the same loop keeps running (it ticks every 10 ms); a result_async that
    blocked the loop in a pop or a sleep lets it tick once or not at all."""
    app = emq.App(server.url)

    @app.task
    def slow() -> str:
        time.sleep(1)
        return "ok"

    async def main() -> tuple[str, int]:
        ticks = 0
        stop = False

        async def ticker() -> None:
            nonlocal ticks
            while not stop:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.ensure_future(ticker())
        h = await asyncio.get_running_loop().run_in_executor(None, slow.enqueue)
        value = await h.result_async(timeout=30)
        stop = True
        await t
        return value, ticks

    with working(app):
        value, ticks = asyncio.run(main())
    assert value == "ok" and ticks >= 20, ticks
    app.close()


def test_a_dead_jobs_error_carries_its_type_message_and_traceback(server, caplog):
    """A task that raises on its last attempt: result raises emq.TaskError with
    the exception's class, its message and the traceback as the worker saw it
    (naming the task's function and line); the attempt before was retried after
    the task's retry_in; the worker logged each failure at WARNING with the
    traceback; its counters say one retried, one dead. A version that lost the
    traceback, logged nothing, or counted the dead job as merely failed fails here."""
    app = emq.App(server.url)

    class OutOfStock(Exception):
        pass

    @app.task(max_attempts=2, retry_in=0)
    def reserve(sku: str) -> None:
        raise OutOfStock(f"no {sku} left")

    caplog.set_level(logging.WARNING, logger="emq.worker")
    with working(app) as worker:
        h = reserve.enqueue("apple")
        with pytest.raises(emq.TaskError) as e:
            h.result(timeout=30)
        wait_for(lambda: worker.counters.snapshot()["dead"] == 1, 10, "the counters")
        c = worker.counters.snapshot()
    err = e.value
    assert err.state == "dead" and err.job_id == h.id
    assert err.type.endswith("OutOfStock") and err.message == "no apple left", (err.type, err.message)
    assert err.traceback is not None and "in reserve" in err.traceback and 'raise OutOfStock(f"no {sku} left")' in err.traceback
    assert f"job {h.id} is dead" in str(err)
    s = h.status()
    assert s.state is emq.JobState.DEAD and s.attempts == 2 and s.error_type == err.type and s.traceback == err.traceback
    assert c["failed"] == 2 and c["retried"] == 1 and c["dead"] == 1 and c["completed"] == 0, c
    warned = [rec for rec in caplog.records if rec.name == "emq.worker" and rec.levelno == logging.WARNING and h.id in rec.getMessage()]
    assert len(warned) == 2 and all(rec.exc_info and rec.exc_info[0] is OutOfStock for rec in warned)
    app.close()


def test_a_call_no_worker_can_run_dies_without_running_anything(server):
    """An unknown task name and a call that is not JSON (written by another
    client): each job ends dead after its first attempt, although attempts are
    left, with an error saying why, and no task code runs. A version that ran
    anything, retried a call no retry mends, or lost the reason, fails here."""
    app = emq.App(server.url)
    q = app.queue()
    unknown = app.enqueue("elsewhere.task", 1)
    corrupt = app.handle(q.add(b"not json", max_attempts=3))
    with working(app) as worker:
        errors = {}
        for name, h in (("unknown", unknown), ("corrupt", corrupt)):
            with pytest.raises(emq.TaskError) as e:
                h.result(timeout=30)
            errors[name] = e.value
        # A waiter hears of the outcome in the commit's own transaction, a moment before the counters move.
        wait_for(lambda: worker.counters.snapshot()["dead"] == 2, 10, "the counters")
        c = worker.counters.snapshot()
    assert errors["unknown"].type.endswith("UnknownTaskError") and "no task named 'elsewhere.task'" in errors["unknown"].message
    assert errors["corrupt"].type.endswith("CorruptCallError") and "not JSON" in errors["corrupt"].message
    for h in (unknown, corrupt):
        s = h.status()
        assert s.state is emq.JobState.DEAD and s.attempts == 1 and s.max_attempts >= 3, s
    assert c["dead"] == 2 and c["retried"] == 0, c
    app.close()


def test_a_result_too_large_or_a_permanent_error_is_dead_after_one_attempt(server):
    """A result over 512 KiB, and a PermanentJobError the task raises: each job
    is dead after its first attempt, although attempts are left, its error
    saying why (the limit; the task's message), and the task ran once. A
    version that retried them would run each task three times."""
    app = emq.App(server.url)
    runs: list[str] = []

    @app.task(max_attempts=3, retry_in=0)
    def huge() -> str:
        runs.append("huge")
        return "x" * (600 * 1024)

    @app.task(max_attempts=3, retry_in=0)
    def refuse() -> None:
        runs.append("refuse")
        raise emq.PermanentJobError("this order was withdrawn")

    h_huge, h_refuse = huge.enqueue(), refuse.enqueue()
    with working(app):
        errors = {}
        for name, h in (("huge", h_huge), ("refuse", h_refuse)):
            with pytest.raises(emq.TaskError) as e:
                h.result(timeout=30)
            errors[name] = e.value
    assert errors["huge"].type.endswith("ResultTooLargeError") and "512 KiB" in errors["huge"].message
    assert errors["refuse"].message == "this order was withdrawn"
    for h in (h_huge, h_refuse):
        s = h.status()
        assert s.state is emq.JobState.DEAD and s.attempts == 1 and s.max_attempts == 3, s
    app.close()
    assert sorted(runs) == ["huge", "refuse"], runs


def test_timeouts_of_sync_and_async_tasks(server):
    """A sync task looping past its timeout gets emq.TaskTimeout raised in its
    thread; an async one awaiting past it is cancelled; both jobs fail with
    TaskTimeout (dead: one attempt), and the worker's threads are free again (a
    second job runs). A version without timeouts waits the 30 s out."""
    app = emq.App(server.url)
    seen: list[str] = []

    @app.task(timeout=0.3, max_attempts=1)
    def spin() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(0.005)
        seen.append("spin finished")

    @app.task(timeout=timedelta(milliseconds=300), max_attempts=1)
    async def nap() -> None:
        await asyncio.sleep(30)
        seen.append("nap finished")

    @app.task
    def after() -> str:
        return "free"

    with working(app, concurrency=2):
        h1, h2 = spin.enqueue(), nap.enqueue()
        for h, task in ((h1, spin), (h2, nap)):
            with pytest.raises(emq.TaskError) as e:
                h.result(timeout=20)
            assert e.value.type.endswith("TaskTimeout"), e.value.type
            assert e.value.message == f"{task.name} ran past its timeout of 0.3 s", e.value.message
        assert after.enqueue().result(timeout=20) == "free"
    assert seen == []
    app.close()


def test_cancel_of_a_pending_and_of_running_tasks(server):
    """Pending: cancel answers True, the job never runs, its state is cancelled,
    its result raises TaskError (cancelled), and a second cancel answers False.
    Running: a sync task sees ctx.cancelled and returns, an async task is
    cancelled at its await; both jobs end cancelled (never retried, although
    attempts are left), within a few beats. A version that let them run on, or
    retried them, fails here."""
    app = emq.App(server.url)
    started = {"sync": threading.Event(), "async": threading.Event()}
    ran: list[str] = []

    @app.task
    def later() -> None:
        ran.append("later")

    @app.task
    def steps(ctx: emq.Context) -> str:
        started["sync"].set()
        deadline = time.monotonic() + 30
        while not ctx.cancelled and time.monotonic() < deadline:
            time.sleep(0.01)
        return "saw the cancel" if ctx.cancelled else "ran out"

    @app.task
    async def waits() -> str:
        started["async"].set()
        await asyncio.sleep(30)
        return "ran out"

    pending = later.options(delay=60).enqueue()
    assert pending.cancel() is True
    assert pending.status().state is emq.JobState.CANCELLED
    with pytest.raises(emq.TaskError) as e:
        pending.result(timeout=5)
    assert e.value.state == "cancelled" and e.value.type == "cancelled"
    assert pending.cancel() is False
    with working(app) as worker:
        hs, ha = steps.enqueue(), waits.enqueue()
        for kind, h in (("sync", hs), ("async", ha)):
            assert started[kind].wait(20), kind
            assert h.status().state is emq.JobState.ACTIVE
            assert h.cancel() is True
            with pytest.raises(emq.TaskError) as e:
                h.result(timeout=20)
            assert e.value.state == "cancelled", (kind, e.value)
            s = h.status()
            assert s.state is emq.JobState.CANCELLED and s.attempts == 1 and s.cancel_requested, (kind, s)
        wait_for(lambda: worker.counters.snapshot()["cancelled"] == 2, 10, "the counters")
        assert worker.counters.snapshot()["retried"] == 0
    assert ran == []
    app.close()


def test_progress_is_visible_in_status(server):
    """A running task's ctx.progress writes to its row while it runs (a number,
    then a JSON object); status shows it; a value that is not JSON is refused
    naming the call. A progress outside a worker (a local call's context)
    writes nothing and says so."""
    app = emq.App(server.url)
    step = threading.Event()
    go_on = threading.Event()
    refused: list[str] = []

    @app.task
    def work(ctx: emq.Context) -> int:
        assert ctx.progress(0.5) is True
        try:
            ctx.progress(object())  # type: ignore[arg-type]
        except emq.ArgumentError as e:
            refused.append(str(e))
        step.set()
        go_on.wait(20)
        ctx.progress({"done": 9, "of": 10})
        return 10

    local = emq.Context(job_id="local", attempt=1, queue="default", task="t")
    assert local.progress(0.1) is False
    with working(app):
        h = work.enqueue()
        assert step.wait(20)
        assert h.status().progress == 0.5
        go_on.set()
        assert h.result(timeout=20) == 10
    assert h.status().progress == {"done": 9, "of": 10}
    assert refused and refused[0].startswith("Context.progress: the value is a object")
    app.close()


def test_unknown_ids_and_bad_arguments(server):
    """An id never added: status says UNKNOWN, result raises JobNotFoundError,
    cancel answers False. A bad timeout names the call and the argument, and
    registers nothing."""
    app = emq.App(server.url)
    h = app.handle("never-added")
    s = h.status()
    assert s.state is emq.JobState.UNKNOWN and s.id == "never-added" and s.queue == "default" and s.attempts == 0
    with pytest.raises(emq.JobNotFoundError, match="no job 'never-added' on queue 'default'"):
        h.result(timeout=5)
    with pytest.raises(emq.JobNotFoundError):
        asyncio.run(h.result_async(timeout=5))
    assert h.cancel() is False
    with pytest.raises(emq.ArgumentError, match="Handle.result: timeout must be a non-negative duration"):
        h.result(timeout=-1)
    with pytest.raises(emq.ArgumentError, match="Handle.result_async: timeout must be"):
        asyncio.run(h.result_async(timeout="soon"))  # type: ignore[arg-type]
    with pytest.raises(emq.ResultTimeoutError) as e:
        app.handle(app.enqueue("elsewhere.never_run").id).result(timeout=0.2)
    assert isinstance(e.value, TimeoutError)
    with pytest.raises(TimeoutError):
        asyncio.run(app.handle(app.enqueue("elsewhere.never_run").id).result_async(timeout=0.2))
    assert app._collector("default").open_waits() == 0
    app.close()


def test_closing_the_app_ends_its_waits_at_once(server):
    """A result() blocked with no timeout on a job that will not run raises
    emq.ConnectionError as soon as the app closes, and the collector's threads
    are gone: a version whose pop waited out its 30 s, or left a thread behind,
    fails here."""
    app = emq.App(server.url)
    h = app.enqueue("elsewhere.never_run")
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            h.result()
        except BaseException as e:  # noqa: BLE001
            raised.append(e)

    t = threading.Thread(target=wait)
    t.start()
    collector = app._collector("default")
    wait_for(lambda: collector.open_waits() == 1, 10, "the wait to register")
    time.sleep(0.2)  # the pop blocks by now
    app.close()
    t.join(10)
    assert not t.is_alive() and isinstance(raised[0], emq.ConnectionError), raised
    assert not collector._popper.is_alive() and not collector._registrar.is_alive(), "a collector's thread was left behind"
    app.close()  # twice is fine
    assert json.loads(app.queue().get(h.id).data)["task"] == "elsewhere.never_run"  # the app connects again
    app.close()


def test_results_and_cancels_on_a_cluster(cluster):
    """On a 3-primary cluster, tasks on queues of two different nodes: each
    result and each error reaches its wait (the collector of each queue pops on
    that queue's node), a cancel of a pending job works there, and closing the
    app ends both collectors. A version that popped or watched on the seed node
    would wait forever for the other node's outcomes."""
    q1, q2 = cluster.queue_on(1), cluster.queue_on(2)
    app = emq.App(cluster.url)

    @app.task(queue=q1)
    def double(n: int) -> int:
        return 2 * n

    @app.task(queue=q2, max_attempts=1)
    def broken() -> None:
        raise KeyError("gone")

    with working(app, q1, q2):
        h1, h2 = double.enqueue(21), broken.enqueue()
        collectors = [app._collector(q1), app._collector(q2)]
        assert h1.result(timeout=30) == 42
        assert asyncio.run(h1.result_async(timeout=5)) == 42
        with pytest.raises(emq.TaskError) as e:
            h2.result(timeout=30)
        assert e.value.type.endswith("KeyError") and "raise KeyError" in (e.value.traceback or "")
        later = double.options(delay=60).enqueue(1)
        assert later.cancel() is True and later.status().state is emq.JobState.CANCELLED
    app.close()
    assert not any(t.is_alive() for c in collectors for t in (c._popper, c._registrar)), "a collector's thread was left behind"


def test_unique_enqueues_and_a_tasks_own_retention(server):
    """`unique_for`: a second enqueue of the same call inside the window is
    answered with the first job's handle (nothing written), another call makes
    its own job, and with an id the id is the key (no DuplicateJobError).
    `keep_result`: the row (and its result) is kept that long past done, not
    the queue's default. A version that ignored either option makes a second
    job, or keeps the row for the queue's week."""
    app = emq.App(server.url)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    once = add.options(unique_for=60)
    h1, h2, h3 = once.enqueue(1, 2), once.enqueue(1, 2), once.enqueue(2, 2)
    assert h1 == h2 and h1 != h3 and app.queue().counts().pending == 2
    named = add.options(id="order-7", unique_for=60)
    assert named.enqueue(5, 5).id == named.enqueue(6, 6).id == "order-7"
    assert json.loads(app.queue().get("order-7").data)["args"] == [5, 5]
    short = add.options(keep_result=timedelta(seconds=30)).enqueue(3, 4)
    with working(app):
        assert short.result(timeout=20) == 7 and h1.result(timeout=20) == 3
    r = redis.Redis.from_url(server.url)
    kept_short = r.pttl(f"emq:{{default}}:job:{short.id}")
    kept_default = r.pttl(f"emq:{{default}}:job:{h1.id}")
    r.close()
    assert 0 < kept_short <= 30_000 < kept_default, (kept_short, kept_default)
    app.close()


def test_once_an_app_waits_its_adds_register_the_waiter_themselves(server):
    """After an app's first wait on a queue, each task enqueue there writes the
    collector's inbox into the new row's `wait` in the add's own transaction,
    and a wait for that job registers nothing (no `watch`), yet hears the
    outcome: when the wait began before the job ran, and when the job was done
    before the wait began (its push popped while nobody waited). An app that
    never waited writes no `wait`; a given id that had landed already (a
    second add of the same call) is not registered by the add, so its wait
    registers as before. A broken version would wait forever for a job whose
    push came first, send a `watch` for every wait, or make every job of a
    fire-and-forget app push to an inbox nobody pops."""
    r = redis.Redis.from_url(server.url)
    app = emq.App(server.url, queue="reg-" + uuid.uuid4().hex[:8])
    P = f"emq:{{{app.default_queue}}}:"

    @app.task
    def double(x: int) -> int:
        return 2 * x

    quiet = emq.App(server.url, queue=app.default_queue)
    h_quiet = quiet.enqueue(double.name, 1)
    assert not r.hexists(P + f"job:{h_quiet.id}", "wait"), "an app that never waited registers nothing"

    with working(app):
        assert double.enqueue(1).result(timeout=20) == 2  # the collector starts
    collector = app._collector(app.default_queue)
    watched: list[list[str]] = []
    real_watch = collector.queue.watch

    def counting_watch(ids, inbox):
        watched.append(list(ids))
        return real_watch(ids, inbox)

    collector.queue.watch = counting_watch  # type: ignore[method-assign]

    early = double.enqueue(21)  # no worker: the wait begins before the job runs
    assert r.hget(P + f"job:{early.id}", "wait") == collector.inbox.encode()
    with pytest.raises(emq.ResultTimeoutError):
        early.result(timeout=0.2)
    assert watched == [], "a job its add registered needs no watch"

    with working(app):
        assert early.result(timeout=20) == 42
        late = double.enqueue(5)
        wait_for(lambda: r.hget(P + f"job:{late.id}", "state") == b"done", 20, "the job done before anyone waits")
        wait_for(lambda: late.id not in collector._expected, 20, "its push popped while nobody waited")
        assert late.result(timeout=5) == 10, "a push that came before the wait is not lost"
        assert asyncio.run(double.enqueue(7).result_async(timeout=20)) == 14
        first = double.options(id="given-" + uuid.uuid4().hex[:8]).enqueue(3)
        again = double.options(id=first.id).enqueue(3)  # landed already: not registered by this add
        assert again._registered is False
        assert again.result(timeout=20) == 6
    assert [ids for ids in watched if early.id in ids] == []
    # The landed add's wait registers with `watch`, unless the outcome's push reaches it first.
    assert [ids for ids in watched if first.id in ids] in ([], [[first.id]])
    assert [ids for ids in watched if late.id in ids] in ([], [[late.id]])
    app.close()
    quiet.close()


def test_a_failed_pop_forgets_the_waiters_its_adds_registered(server):
    """An outcome popped on a connection that broke may be lost with the reply:
    the collector then forgets every id its adds registered (their waits
    register with `watch`, which answers what came meanwhile), so a wait
    begun after the break does not wait for a push that was lost. A broken
    version would hang here."""
    app = emq.App(server.url, queue="reg-" + uuid.uuid4().hex[:8])

    @app.task
    def one() -> int:
        return 1

    with working(app):
        assert one.enqueue().result(timeout=20) == 1
        collector = app._collector(app.default_queue)
        h = one.enqueue()
        assert h._registered
        with collector._lock:
            collector._drop_expected()  # what a failed pop does
        assert h.id not in collector._expected
        assert h.result(timeout=20) == 1
    app.close()

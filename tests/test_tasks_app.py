"""The task layer's app: registering tasks, enqueueing them (by the task, with
options, by name), and a worker running them through the task runner, against
real servers. Results, status, cancel and progress: tests/test_tasks_results.py."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

import emq
from emq.tasks import TaskRunner

Q = "default"


def make_app(url: str) -> tuple[emq.App, dict[str, emq.Task]]:
    app = emq.App(url)

    @app.task
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(name="mail.send", queue="mail", max_attempts=5, lane="eu", priority=2, timeout=30, keep_result=60, retry_in=1)
    def send(ctx: emq.Context, to: str, *, when: datetime | None = None) -> str:
        return f"{to} {ctx.job_id}"

    return app, {"add": add, "send": send}


def data_of(app: emq.App, handle: emq.Handle) -> dict:
    job = app.queue(handle.queue).get(handle.id)
    assert job is not None, handle
    return json.loads(job.data)


def test_a_task_runs_locally_and_enqueues_its_call(server):
    """`add(1, 2)` runs the function (no job); `add.enqueue(1, 2)` writes exactly the
    documented call to the default queue and returns a handle on that job. A
    version that ran the function on enqueue, or wrote another shape, fails here."""
    app, t = make_app(server.url)
    add = t["add"]
    assert add(1, 2) == 3
    assert app.queue().counts().pending == 0, "a local call made a job"
    h = add.enqueue(1, y=2)
    assert isinstance(h, emq.Handle) and h.queue == Q and h.task == add.name
    assert add.name == f"{__name__}.make_app.<locals>.add"
    job = app.queue().get(h.id)
    assert job.state == "pending" and job.max_attempts == 3
    assert job.data == json.dumps({"emq": 1, "task": add.name, "args": [1], "kwargs": {"y": 2}}, separators=(",", ":")).encode()
    assert app.handle(h.id) == h and hash(app.handle(h.id)) == hash(h)
    assert app.handle(h.id, queue="mail") != h
    app.close()


def test_a_tasks_options_are_its_jobs_defaults_and_a_calls_options_override_them(server):
    """The decorator's queue, lane and max_attempts reach the job; `.options(...)`
    overrides them for one call (delay, id, lane, queue, max_attempts), and the
    view it returns is immutable (a chained `.options` does not change the first)."""
    app, t = make_app(server.url)
    send = t["send"]
    assert send.queue == "mail" and app.queues == [Q, "mail"]
    h = send.enqueue("a@b.c")
    job = app.queue("mail").get(h.id)
    assert (job.lane, job.max_attempts, job.state) == ("eu", 5, "pending")
    assert data_of(app, h) == {"emq": 1, "task": "mail.send", "args": ["a@b.c"], "kwargs": {}}

    later = send.options(delay=timedelta(hours=1), id="order-7", lane="us")
    even_later = later.options(max_attempts=2, queue="other")
    h2 = later.enqueue("x@y.z", when=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert h2.id == "order-7" and h2.queue == "mail"
    job = app.queue("mail").get("order-7")
    assert (job.state, job.lane, job.max_attempts) == ("scheduled", "us", 5)
    assert job.due_ms >= app.client.time_ms() + 3_500_000
    assert data_of(app, h2)["kwargs"] == {"when": "2025-01-02T03:04:05+00:00"}
    h3 = even_later.enqueue("q@r.s")
    job = app.queue("other").get(h3.id)
    assert (job.lane, job.max_attempts, job.state) == ("us", 2, "scheduled")
    at = datetime.now(timezone.utc) + timedelta(minutes=5)
    h4 = send.options(at=at).enqueue("t@u.v")
    assert abs(app.queue("mail").get(h4.id).due_ms - at.timestamp() * 1000) < 2
    with pytest.raises(emq.DuplicateJobError):
        later.enqueue("other")  # the id exists
    app.close()


def test_enqueue_by_name(server):
    """By name: a task of the app keeps its queue and options and has its arguments
    checked; a name the app does not know (another code base's task) goes to the
    app's default queue as given; `app.options` overrides either."""
    app, _ = make_app(server.url)
    h = app.enqueue("mail.send", "a@b.c")
    assert h.queue == "mail" and app.queue("mail").get(h.id).lane == "eu"
    with pytest.raises(emq.ArgumentError, match="emq.App.enqueue: missing a required argument: 'to'"):
        app.enqueue("mail.send")
    h = app.enqueue("billing.charge", 7, when="tomorrow")
    assert h.queue == Q and h.task is None
    assert data_of(app, h) == {"emq": 1, "task": "billing.charge", "args": [7], "kwargs": {"when": "tomorrow"}}
    h = app.options(queue="billing", delay=60, id="c-1").enqueue("billing.charge", Decimal("9.50"))
    job = app.queue("billing").get("c-1")
    assert job.state == "scheduled" and json.loads(job.data)["args"] == ["9.50"]
    h = app.options(lane="apac").enqueue("mail.send", "x@y.z")
    assert h.queue == "mail" and app.queue("mail").get(h.id).lane == "apac"
    app.close()


def test_bad_input_raises_naming_the_call_and_writes_nothing(server):
    """Every refusal names the call the user made and the argument, and no job is
    written: a value emq cannot send, an argument that does not fit, a bad
    option, an id the core refuses (named as the enqueue, not as Queue.add)."""
    app, t = make_app(server.url)
    add, send = t["add"], t["send"]
    cases = [
        (lambda: add.enqueue(1, object()), f"{add.name}.enqueue: argument 'y' is a object, which emq cannot write as JSON"),
        (lambda: add.enqueue(1, "2"), f"{add.name}.enqueue: argument 'y' would not reach the task as its annotation int says"),
        (lambda: add.enqueue(1), f"{add.name}.enqueue: missing a required argument: 'y'"),
        (lambda: add.enqueue(1, 2, 3), f"{add.name}.enqueue: too many positional arguments"),
        (lambda: send.enqueue("a", when="soon"), "mail.send.enqueue: argument 'when' would not reach the task"),
        (lambda: add.options(delay=-1), f"{add.name}.options: delay must be a non-negative duration"),
        (lambda: add.options(delay=1, at=time.time()), f"{add.name}.options: give delay or at, not both"),
        (lambda: add.options(at="noon"), f"{add.name}.options: at must be a datetime or seconds since the epoch, not str"),
        (lambda: add.options(priority=10), f"{add.name}.options: priority must be an integer from 0 to 9"),
        (lambda: add.options(max_attempts=0), f"{add.name}.options: max_attempts must be an integer from 1 to 32"),
        (lambda: add.options(unique_for=0), f"{add.name}.options: unique_for must be a positive duration"),
        (lambda: add.options(queue="a b"), f"{add.name}.options: queue must have no '{{', '}}', control characters or whitespace"),
        (lambda: add.options(id=""), f"{add.name}.options: id must be a non-empty str"),
        (lambda: add.options(id="a\nb").enqueue(1, 2), f"{add.name}.enqueue: id must have no control characters"),
        (lambda: add.options(lane="x" * 300).enqueue(1, 2), f"{add.name}.enqueue: lane must be 1 to 256 bytes"),
        (lambda: app.enqueue("", 1), "emq.App.enqueue: a task's name must be 1 to 200 bytes of UTF-8"),
        (lambda: app.enqueue("a\x00b"), "emq.App.enqueue: a task's name must have no control characters"),
        (lambda: app.enqueue("other", {1, object()}), "emq.App.enqueue: argument 1[…] is a object"),
        (lambda: app.options(max_attempts=99), "emq.App.options: max_attempts must be an integer from 1 to 32"),
        (lambda: app.handle(""), "emq.App.handle: id must be a non-empty str"),
    ]
    for call, message in cases:
        with pytest.raises(emq.ArgumentError) as e:
            call()
        assert str(e.value).startswith(message), (message, str(e.value))
    for name in (Q, "mail"):
        c = app.queue(name).counts()
        assert c.pending == c.schedule == 0, f"a refused enqueue wrote a job to {name}"
    app.close()


def test_registering():
    """Names are validated, and a name registered twice in one app is an error (a
    worker would not know which to run); a task needs no server to exist, and an
    app connects only on first use."""
    app = emq.App("redis://127.0.0.1:1")  # nothing listens there: a connect would fail
    assert not app.connected

    def f(x: int) -> int:
        return x

    task = app.task(name="jobs.f")(f)
    assert app.tasks == {"jobs.f": task} and task.fn is f and task.__wrapped__ is f and task.__doc__ == f.__doc__
    assert repr(task) == "<emq.Task 'jobs.f' on queue 'default'>"
    with pytest.raises(emq.ArgumentError, match="a task named 'jobs.f' is already registered with this app"):
        app.task(name="jobs.f")(lambda: None)
    with pytest.raises(emq.ArgumentError, match="is already a task"):
        app.task(task)
    with pytest.raises(emq.ArgumentError, match="emq.App.task: a task's name must be 1 to 200 bytes"):
        app.task(name="é" * 101)
    with pytest.raises(emq.ArgumentError, match="emq.App.task: a task's name must have no control characters"):
        app.task(name="a\tb")
    with pytest.raises(emq.ArgumentError, match="emq.App.task: timeout must be a positive duration"):
        app.task(timeout=0)
    with pytest.raises(emq.ArgumentError, match="emq.App.task: queue must be 1 to 128 bytes"):
        app.task(queue="")
    assert app.task(name="é" * 100)(f).name == "é" * 100  # 200 bytes: the limit
    with pytest.raises(emq.ArgumentError, match="emq.App: give url or client, not both"):
        emq.App("redis://x", client=object())  # type: ignore[arg-type]
    with pytest.raises(emq.ArgumentError, match="emq.App: queue must have no"):
        emq.App(queue="a{b}")
    with pytest.raises(emq.ConnectionError):
        task.enqueue(1)


def test_context_detection():
    """A first parameter annotated emq.Context (also as the string a
    `from __future__ import annotations` module leaves) makes a ContextTask, which
    a call never carries; any other first parameter does not."""
    app = emq.App("redis://127.0.0.1:1")

    @app.task
    def with_ctx(ctx: emq.Context, n: int) -> int:
        return n

    @app.task
    def without(n: int, ctx: emq.Context | None = None) -> int:
        return n

    def text_annotated(ctx: emq.Context, n: UnknownYet) -> int:  # type: ignore[name-defined]  # noqa: F821
        return n

    later = app.task(text_annotated)
    assert isinstance(with_ctx, emq.ContextTask) and with_ctx.takes_context
    assert not isinstance(without, emq.ContextTask) and not without.takes_context
    assert later.takes_context
    ctx = emq.Context(job_id="j", attempt=1, queue="default", task=with_ctx.name)
    assert with_ctx(ctx, 5) == 5  # a local call passes the context itself
    assert with_ctx.encode(5) == f'{{"emq":1,"task":"{with_ctx.name}","args":[5],"kwargs":{{}}}}'.encode()
    with pytest.raises(TypeError, match="annotations of .*text_annotated do not resolve"):
        later.encode(1)


def test_the_runner_refuses_what_no_retry_mends():
    """A job whose data is not a call, or names a task the app has not, or whose
    arguments do not fit: a PermanentJobError naming the job (a worker makes
    these dead at once: tests/test_tasks_results.py), raised before any task runs."""
    app = emq.App("redis://127.0.0.1:1")
    ran = []

    @app.task(name="t.one")
    def one(n: int) -> None:
        ran.append(n)

    runner = TaskRunner(app)
    with pytest.raises(emq.UnknownTaskError, match=r"job j1: the app has no task named 't.two' \(it has 1: t.one\)"):
        runner(emq.Job("j1", b'{"emq":1,"task":"t.two","args":[]}'))
    with pytest.raises(emq.CorruptCallError, match="job j2: the job's data is not a task call: it is not JSON"):
        runner(emq.Job("j2", b"plain data"))
    with pytest.raises(emq.CorruptCallError, match="job j3: t.one: argument 'n' is a JSON string, which does not read as int"):
        runner(emq.Job("j3", b'{"emq":1,"task":"t.one","args":["1"]}'))
    assert ran == []
    assert runner(emq.Job("j4", b'{"emq":1,"task":"t.one","args":[4]}')) == b"null"
    assert ran == [4]


def test_a_worker_runs_the_apps_tasks(server):
    """emq.Worker with the app's TaskRunner runs sync, async and context tasks,
    their arguments converted by the annotations (a datetime arrives as a
    datetime), the context naming the job; a task that raises is retried as today."""
    app = emq.App(server.url)
    seen: list[tuple] = []
    lock = threading.Lock()

    @app.task
    def stamp(when: datetime, amount: Decimal) -> str:
        with lock:
            seen.append(("stamp", when, amount))
        return when.isoformat()

    @app.task
    async def later(ctx: emq.Context, n: int) -> int:
        await asyncio.sleep(0)
        with lock:
            seen.append(("later", ctx.job_id, ctx.attempt, ctx.queue, ctx.task, n, asyncio.get_running_loop() is not None))
        return n

    flaky_runs = []

    @app.task(max_attempts=2)
    def flaky() -> None:
        flaky_runs.append(1)
        if len(flaky_runs) == 1:
            raise RuntimeError("once")

    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    stamp.enqueue(when, Decimal("1.10"))
    h = later.enqueue(7)
    flaky.options(max_attempts=2).enqueue()
    runner = TaskRunner(app, queue=Q)
    worker = emq.Worker(app.queue(), runner, concurrency=2, beat=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and worker.counters.snapshot()["completed"] < 3:
        time.sleep(0.02)
    worker.stop()
    thread.join(10)
    runner.close()
    c = worker.counters.snapshot()
    assert c["completed"] == 3 and c["failed"] == 1, c
    assert ("stamp", when, Decimal("1.10")) in seen
    assert ("later", h.id, 1, Q, later.name, 7, True) in seen
    assert len(flaky_runs) == 2
    app.close()

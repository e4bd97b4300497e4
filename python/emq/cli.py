"""The `emq` command: worker, promote, stalled, stats, demo, dashboard, server (the
per-user development server), and the operator's verbs on jobs and workers
(jobs, job, retry, delete, promote-now, workers, queues: `emq.cli_operations`).

Every verb's first line (on stderr) says which server it talks to: the one
`--url` names, `EMQ_URL`, or, with neither, the development server (started on
first use, `emq.devserver`). `emq worker MODULE:APP` imports the user's code
with the current directory first on `sys.path`, as `celery -A`, `rq worker` and
`uvicorn` do; code that cannot be found or imported is one line and exit code 2
(`-v` shows the traceback).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import EmqError, MissingExtraError, check_extra

if TYPE_CHECKING:
    from ._core import Client
    from .queue import Queue
    from .tasks import App

USAGE_ERROR = 2  # what argparse exits with for a bad command line: code that cannot be loaded is one too


class UsageError(Exception):
    """A command line that names code or options that cannot be used: one line, exit code 2."""

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.cause = cause


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def server_url(url: str | None) -> tuple[str, str]:
    """The URL a verb uses and how it was chosen: `--url`, else `EMQ_URL`, else the
    development server (started here if none runs)."""
    if url:
        return url, "--url"
    if env := os.environ.get("EMQ_URL"):
        return env, "EMQ_URL"
    from . import devserver

    return devserver.ensure().url, "development"


def connect(url: str | None, how: str | None = None, **options: Any) -> Client:
    """A connection for a verb, after the line that says which server it is."""
    import emq

    if how is None:
        url, how = server_url(url)
    if how == "development":
        _say(f"emq: using the development server at {url} (started by emq; 'emq server stop' stops it)")
        return emq.connect(url, **options)
    client = emq.connect(url, **options)
    _say(f"emq: using {client.address} ({how})")
    return client


def _queue(args: argparse.Namespace) -> Queue:
    import emq

    return emq.Queue(connect(args.url), args.queue)


def load_target(spec: str) -> object:
    """`package.module:app` (or `:function`, or a dotted attribute) -> the object,
    imported with the current directory first on `sys.path`. Raises `UsageError`
    saying what is missing."""
    module_name, colon, attribute = spec.partition(":")
    if not colon or not module_name or not attribute:
        raise UsageError(f"emq worker: give MODULE:APP (an emq.App) or MODULE:FUNCTION (a handler), not {spec!r}")
    here = os.getcwd()
    if here not in sys.path:
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise UsageError(f"emq worker: no module named {e.name!r} (looked in {here} and the rest of sys.path)", e) from None
        raise UsageError(f"emq worker: importing {module_name!r} raised {_first_line(e)}", e) from None
    except (Exception, SystemExit) as e:
        raise UsageError(f"emq worker: importing {module_name!r} raised {_first_line(e)}", e) from None
    obj: object = module
    for i, part in enumerate(attribute.split(".")):
        if not hasattr(obj, part):
            where = module_name + "".join("." + p for p in attribute.split(".")[:i])
            raise UsageError(f"emq worker: {where} has no attribute {part!r}{_apps_in(module) if i == 0 else ''}")
        obj = getattr(obj, part)
    return obj


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def _apps_in(module: object) -> str:
    from .tasks import App

    apps = sorted(name for name, value in vars(module).items() if isinstance(value, App))
    return f" (its emq.App: {', '.join(apps)})" if apps else " (it has no emq.App)"


def load_handler(spec: str) -> Callable[..., object]:
    """`package.module:function` -> the function (a `UsageError` for anything else)."""
    target = load_target(spec)
    if not callable(target):
        raise UsageError(f"emq worker: {spec} is not a function")
    return target


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line: the others take the call's
    defaults (emq.Worker's, emq.connect's, Queue.promote's), stated there once."""
    return {k: v for k, v in options.items() if v is not None}


def cmd_worker(args: argparse.Namespace) -> int:
    import emq
    import emq.aio

    from .tasks import App, Task, TaskRunner

    target = load_target(args.target)
    options = _given(
        concurrency=args.concurrency,
        lease=args.lease,
        beat=args.beat,
        idle_beat=args.idle_beat,
        pump_batch=args.pump_batch,
        recovery=args.recovery,
        max_stalled=args.max_stalled,
        ttl=args.ttl,
        grace=args.grace,
    )
    connect_options = _given(wait_replicas=args.wait_replicas)
    if isinstance(target, App):
        names = args.queue or target.queues
        backend = args.backend or target.backend
        client = _app_client(args, target, connect_options)
        queues = [emq.Queue(client, name, backend=backend) for name in names]
        runner = TaskRunner(target, queue=names[0] if len(names) == 1 else None)
        try:
            counters = emq.Worker(queues[0] if len(queues) == 1 else queues, runner, **options).run()
        finally:
            runner.close()
    else:
        if isinstance(target, Task):
            raise UsageError(f"emq worker: {args.target} is a task: run its app (emq worker MODULE:APP)")
        if not callable(target) or isinstance(target, type):
            raise UsageError(f"emq worker: {args.target} is a {type(target).__name__}, not an emq.App or a function")
        if not args.queue:
            raise UsageError("emq worker: a handler function needs --queue (an emq.App knows its queues)")
        client = connect(args.url, **connect_options)
        queues = [emq.Queue(client, name, backend=args.backend or "plan") for name in args.queue]
        queue = queues[0] if len(queues) == 1 else queues
        if asyncio.iscoroutinefunction(target):
            counters = asyncio.run(emq.aio.Worker(queue, target, **options).run())
        else:
            counters = emq.Worker(queue, target, **options).run()
    logging.getLogger("emq.worker").info("stopped: %s", counters)
    return 0


def _app_client(args: argparse.Namespace, app: App, connect_options: dict[str, Any]) -> Client:
    """The worker's connection for an app: `--url`, else the app's URL or client,
    else `EMQ_URL` or the development server (what the app itself would reach)."""
    if args.url:
        # The app's own enqueues (a task that enqueues another) reach the same server.
        os.environ["EMQ_URL"] = args.url
        return connect(args.url, "--url", **connect_options)
    if app.url is not None:
        return connect(app.url, "the app's URL", **connect_options)
    if app.connected:
        if connect_options:
            raise UsageError("emq worker: --wait-replicas needs --url for an app made with client=")
        client = app.client
        _say(f"emq: using {client.address} (the app's client)")
        return client
    return connect(None, **connect_options)


def cmd_promote(args: argparse.Namespace) -> int:
    print(_queue(args).promote(**_given(batch=args.batch)))
    return 0


def cmd_stalled(args: argparse.Namespace) -> int:
    outcome = _queue(args).stalled_check(**_given(max_stalled=args.max_stalled, batch=args.batch))
    print(f"recovered {len(outcome.recovered)}, dead {len(outcome.dead)}")
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    try:
        from rich.console import Console
        from rich.table import Table
    except ModuleNotFoundError as e:
        check_extra(e, "rich", "cli", "emq stats")
        raise

    q = _queue(args)
    c = q.counts()
    table = Table(title=f"emq queue {q.name!r} on {q.client.address}")
    table.add_column("where")
    table.add_column("jobs", justify="right")
    for key, n in (("schedule", c.schedule), ("pending", c.pending), ("active", c.active), ("dead", c.dead), ("done", c.done)):
        table.add_row(key, str(n))
    for lane, n in c.lanes.items():
        table.add_row(f"lane {lane}", str(n))
    table.add_row("lanes in the ring", str(c.ring))
    Console().print(table)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from .demo import run_demo

    try:  # rich first: a missing extra is said before any server is started
        import rich  # noqa: F401
    except ModuleNotFoundError as e:
        check_extra(e, "rich", "cli", "emq demo")
        raise
    # The URL reaches the demo's workers in their environment, never on a command line.
    client = connect(args.url)
    url = args.url or os.environ.get("EMQ_URL") or client.address
    client.close()
    return run_demo(url=url, jobs=args.jobs, seconds=args.seconds, workers=args.workers)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from .dashboard.serve import run

    return run(args, connect)


def cmd_server(args: argparse.Namespace) -> int:
    from . import devserver

    if args.action == "start":
        dev = devserver.ensure()
        how = "started now" if dev.started else "already running"
        print(f"emq: the development server at {dev.url} is running (pid {dev.pid or '?'}, {how})")
        return 0
    if args.action == "stop":
        dev = devserver.stop()
        if dev.running:
            print(f"emq: stopped the development server at {dev.url} (pid {dev.pid or '?'})")
        else:
            print(f"emq: no development server was running at {dev.url}")
        return 0
    dev = devserver.status()
    if not dev.running:
        print(f"emq: no development server is running (it would be at {dev.url}; any emq call with no URL starts it)")
        return 1
    import emq

    client = emq.connect(dev.url)
    info = client.info("server")
    db0 = client.info("keyspace").get("db0", "keys=0")  # `keys=12,expires=0,avg_ttl=0`
    keys = dict(part.split("=", 1) for part in db0.split(",") if "=" in part).get("keys", "0")
    client.close()
    version = info.get("valkey_version") or info.get("redis_version", "?")
    print(
        f"emq: the development server at {dev.url} is running: valkey {version}, pid {info.get('process_id', dev.pid)}, "
        f"up {info.get('uptime_in_seconds', '?')} s, {keys} keys (directory {dev.directory})"
    )
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="emq", description="emq: a job queue on Redis or Valkey")
    verbose = argparse.ArgumentParser(add_help=False)
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help="log at INFO; show tracebacks")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO; show tracebacks")
    sub = parser.add_subparsers(dest="verb", required=True)

    def url_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--url",
            default=None,
            help="redis://, rediss:// or unix:// URL (default: EMQ_URL, else the per-user development server); "
            "prefer EMQ_URL for a URL with a password, which a command line shows to every user of the machine",
        )

    def with_queue(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument("--queue", "-q", required=True)
        url_option(p)
        return p

    w = sub.add_parser(
        "worker",
        parents=[verbose],
        help="run a worker: emq worker MODULE:APP [--queue Q ...], or emq worker MODULE:FUNCTION --queue Q",
    )
    w.add_argument("target", metavar="MODULE:APP", help="an emq.App (its tasks' jobs), or a handler function (raw jobs)")
    w.add_argument("--queue", "-q", action="append", help="a queue; repeat it for several (default for an app: every queue its tasks use)")
    url_option(w)
    # Each option left out takes emq.Worker's (or emq.connect's) default; durations in seconds.
    w.add_argument("--concurrency", type=int, help="jobs run at once")
    w.add_argument("--lease", type=float, help="each claimed job's lease (s)")
    w.add_argument("--beat", type=float, help="how often a busy worker recovers and promotes (s)")
    w.add_argument("--idle-beat", type=float, help="how long an idle worker parks at most (s)")
    w.add_argument("--pump-batch", type=int)
    w.add_argument("--recovery", choices=["reap", "stalled", "off"])
    w.add_argument("--max-stalled", type=int)
    w.add_argument("--ttl", type=float, help="how long the worker runs (s; default: until stopped)")
    w.add_argument("--grace", type=float, help="how long running jobs may finish once it stops (s)")
    w.add_argument("--wait-replicas", type=int, help="replicas each write must reach before it counts (WAIT)")
    w.add_argument(
        "--backend",
        choices=("plan", "module"),
        default=None,
        help="who runs the claims and completes: the plan in this process (default, or the app's), or emq's server module "
        "(EMQ.CLAIM, EMQ.COMPLETE: one round trip each; the server must load it)",
    )
    w.set_defaults(run=cmd_worker)

    p = with_queue(sub.add_parser("promote", parents=[verbose], help="run PROMOTE once"))
    p.add_argument("--batch", type=int)
    p.set_defaults(run=cmd_promote)

    s = with_queue(sub.add_parser("stalled", parents=[verbose], help="run STALLED CHECK once"))
    s.add_argument("--batch", type=int)
    s.add_argument("--max-stalled", type=int)
    s.set_defaults(run=cmd_stalled)

    t = with_queue(sub.add_parser("stats", parents=[verbose], help="a table of the queue's counts"))
    t.set_defaults(run=cmd_stats)

    d = sub.add_parser(
        "demo", parents=[verbose], help="the demo: tasks with results, then scheduled jobs, workers, a killed worker, lateness"
    )
    url_option(d)
    d.add_argument("--jobs", type=int, default=3000)
    d.add_argument("--seconds", type=float, default=6.0, help="the window the due times spread over")
    d.add_argument("--workers", type=int, default=3)
    d.set_defaults(run=cmd_demo)

    v = sub.add_parser("server", parents=[verbose], help="the per-user development server: emq server status|start|stop")
    v.add_argument("action", choices=("status", "start", "stop"))
    v.set_defaults(run=cmd_server)

    from .cli_operations import add_verbs

    add_verbs(sub, verbose, url_option, connect)

    from .dashboard.serve import add_arguments as dashboard_arguments

    b = sub.add_parser("dashboard", help="the web dashboard (emq[dashboard]): emq dashboard --queue Q [--password | --token]")
    dashboard_arguments(b)
    b.set_defaults(run=cmd_dashboard)

    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        code = args.run(args)
    except UsageError as e:
        if args.verbose and e.cause is not None:
            traceback.print_exception(type(e.cause), e.cause, e.cause.__traceback__)
        _say(str(e))
        code = USAGE_ERROR
    except EmqError as e:  # the class says what happened; the message never holds a password
        _say(f"emq {args.verb}: {type(e).__name__}: {e}")
        code = 1
    except MissingExtraError as e:  # an optional dependency: the message names the extra
        _say(f"emq {args.verb}: {e}")
        code = 1
    sys.exit(code)

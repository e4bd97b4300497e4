"""The `emq` command: worker, promote, stalled, stats, demo, dashboard."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import EmqError, MissingExtraError, check_extra

if TYPE_CHECKING:
    from .queue import Queue


def _queue(args: argparse.Namespace) -> Queue:
    import emq

    return emq.Queue(emq.connect(args.url), args.queue)


def load_handler(spec: str) -> Callable[..., object]:
    """`package.module:function` -> the function."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise SystemExit(f"emq worker: handler must be MODULE:FUNCTION, not {spec!r}")
    fn: object = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise SystemExit(f"emq worker: {spec} is not a function")
    return fn


def _given(**options: Any) -> dict[str, Any]:
    """The options given on the command line: the others take the call's
    defaults (emq.Worker's, emq.connect's, Queue.promote's), stated there once."""
    return {k: v for k, v in options.items() if v is not None}


def cmd_worker(args: argparse.Namespace) -> int:
    import emq
    import emq.aio

    handler = load_handler(args.handler)
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
    client = emq.connect(args.url, **_given(wait_replicas=args.wait_replicas))
    queues = [emq.Queue(client, name, backend=args.backend) for name in args.queue]
    queue = queues[0] if len(queues) == 1 else queues
    if asyncio.iscoroutinefunction(handler):
        counters = asyncio.run(emq.aio.Worker(queue, handler, **options).run())
    else:
        counters = emq.Worker(queue, handler, **options).run()
    logging.getLogger("emq.worker").info("stopped: %s", counters)
    return 0


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
    import os

    from .demo import run_demo

    url = args.url or os.environ.get("EMQ_URL")  # the variable keeps a password off the command line
    return run_demo(url=url, jobs=args.jobs, seconds=args.seconds, workers=args.workers)


def cmd_dashboard(args: argparse.Namespace) -> int:
    from .dashboard.serve import run

    return run(args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="emq", description="emq: move time in a Redis/Valkey job queue")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO")
    sub = parser.add_subparsers(dest="verb", required=True)

    def with_queue(p: argparse.ArgumentParser, *, many: bool = False) -> argparse.ArgumentParser:
        if many:
            p.add_argument("--queue", "-q", required=True, action="append", help="a queue; repeat it for a worker of several")
        else:
            p.add_argument("--queue", "-q", required=True)
        p.add_argument(
            "--url",
            default=None,
            help="redis://, rediss:// or unix:// URL (default: EMQ_URL, else an embedded Valkey); "
            "prefer EMQ_URL for a URL with a password, which a command line shows to every user of the machine",
        )
        return p

    w = with_queue(sub.add_parser("worker", help="run a worker: emq worker MODULE:FUNCTION --queue Q [--queue Q2 ...]"), many=True)
    w.add_argument("handler")
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
        default="plan",
        help="who runs the claims and completes: the plan in this process (default), or emq's server module "
        "(EMQ.CLAIM, EMQ.COMPLETE: one round trip each; the server must load it)",
    )
    w.set_defaults(run=cmd_worker)

    p = with_queue(sub.add_parser("promote", help="run PROMOTE once"))
    p.add_argument("--batch", type=int)
    p.set_defaults(run=cmd_promote)

    s = with_queue(sub.add_parser("stalled", help="run STALLED CHECK once"))
    s.add_argument("--batch", type=int)
    s.add_argument("--max-stalled", type=int)
    s.set_defaults(run=cmd_stalled)

    t = with_queue(sub.add_parser("stats", help="a table of the queue's counts"))
    t.set_defaults(run=cmd_stats)

    d = sub.add_parser("demo", help="the demo: scheduled jobs, workers, a killed worker, lateness")
    d.add_argument("--url", default=None, help="a server to use (default: EMQ_URL, else an embedded Valkey)")
    d.add_argument("--jobs", type=int, default=3000)
    d.add_argument("--seconds", type=float, default=6.0, help="the window the due times spread over")
    d.add_argument("--workers", type=int, default=3)
    d.set_defaults(run=cmd_demo)

    from .dashboard.serve import add_arguments as dashboard_arguments

    b = sub.add_parser("dashboard", help="the web dashboard (emq[dashboard]): emq dashboard --queue Q [--password | --token]")
    dashboard_arguments(b)
    b.set_defaults(run=cmd_dashboard)

    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        code = args.run(args)
    except EmqError as e:  # the class says what happened; the message never holds a password
        print(f"emq {args.verb}: {type(e).__name__}: {e}", file=sys.stderr)
        code = 1
    except MissingExtraError as e:  # an optional dependency: the message names the extra
        print(f"emq {args.verb}: {e}", file=sys.stderr)
        code = 1
    sys.exit(code)

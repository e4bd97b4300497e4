"""The `emq` verbs an operator runs on jobs and workers: jobs, job, retry, cancel,
delete, promote-now, workers, queues.

Each goes through the same calls as the API (`Queue.jobs`, `Queue.retry`, ...,
`emq.workers`, `emq.queues`), so it checks and refuses as they do. Output is
plain text, one line a job or worker, for people and for `grep`/`awk`; a job's
data and error are untrusted, so every control character is shown escaped
(`\\x1b`), never sent to the terminal. retry, cancel, delete and promote-now
exit with 1 when any id was not acted on (not found, or refused; for cancel,
already ended or unknown), else 0.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._core import Client, Job
    from .answers import ActionOutcome
    from .queue import Queue

ConnectFn = Callable[[str | None], "Client"]

ACTED = ("retried", "deleted", "promoted")
USAGE_ERROR = 2  # as argparse exits for a bad command line


def safe(text: str, *, newlines: bool = False) -> str:
    """`text` with every control character (a newline too, unless `newlines`) escaped."""
    out = []
    for ch in text:
        if ch == "\n" and newlines:
            out.append(ch)
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "".join(out)


def shown_data(data: bytes) -> str:
    """A job's data as a person reads it: JSON pretty-printed, text as itself, else escaped bytes."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return repr(data)
    try:
        return safe(json.dumps(json.loads(text), indent=2, ensure_ascii=False), newlines=True)
    except ValueError:
        return safe(text, newlines=True)


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _first_line(error: str | None) -> str:
    if not error:
        return ""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return safe(lines[-1] if lines else "")[:120]


def _queue(args: argparse.Namespace, connect: ConnectFn) -> Queue:
    import emq

    return emq.Queue(connect(args.url), args.queue)


def cmd_jobs(args: argparse.Namespace, connect: ConnectFn) -> int:
    page = _queue(args, connect).jobs(args.state, lane=args.lane, offset=args.offset, limit=args.limit)
    shown = f"{page.offset + 1}-{page.offset + len(page.jobs)}" if page.jobs else "none"
    print(f"{args.state}: {page.total} jobs; showing {shown}")
    for j in page.jobs:
        print(f"{safe(j.id)}\t{j.state or '-'}\tattempts {j.attempts}/{j.max_attempts}\t{safe(j.lane or '-')}\t{_first_line(j.error)}")
    if page.has_next:
        print(f"(more: --offset {page.offset + page.limit})")
    return 0


def describe_job(job: Job) -> list[str]:
    """A job's row, line by line, every value escaped."""
    lines = [
        f"id:        {safe(job.id)}",
        f"state:     {job.state or '-'}",
        f"lane:      {safe(job.lane or '-')}",
        f"attempts:  {job.attempts} of {job.max_attempts}",
        f"stalls:    {job.stalls}",
        f"due:       {_when(job.due_ms)}",
        f"lease:     {_when(job.lease_deadline_ms)}",
        "data:",
        *("  " + line for line in shown_data(job.data).splitlines()),
    ]
    if job.error:
        lines += ["error:", *("  " + line for line in safe(job.error, newlines=True).splitlines())]
    return lines


def cmd_job(args: argparse.Namespace, connect: ConnectFn) -> int:
    job = _queue(args, connect).get(args.id)
    if job is None:
        print(f"no job {safe(args.id)!s} in {args.queue} (never added, or no longer kept)")
        return 1
    print("\n".join(describe_job(job)))
    return 0


def _answers(outcomes: dict[str, ActionOutcome]) -> int:
    for id, outcome in outcomes.items():
        print(f"{safe(id)}\t{outcome.value}")
    return 0 if all(o.value in ACTED for o in outcomes.values()) else 1


def cmd_retry(args: argparse.Namespace, connect: ConnectFn) -> int:
    if args.all_dead == bool(args.ids):
        print("emq retry: give job ids or --all-dead (not both)", file=sys.stderr)
        return USAGE_ERROR
    q = _queue(args, connect)
    if args.all_dead:
        print(f"retried {q.retry_dead(args.limit)}")
        return 0
    return _answers(q.retry(args.ids))


def cmd_cancel(args: argparse.Namespace, connect: ConnectFn) -> int:
    """`Queue.cancel` of each id: a waiting job is cancelled, a running one asked to stop."""
    q = _queue(args, connect)
    outcomes = {id: q.cancel(id) for id in dict.fromkeys(args.ids)}
    for id, outcome in outcomes.items():
        print(f"{safe(id)}\t{outcome.value}")
    return 0 if all(o.value in ("cancelled", "stopping") for o in outcomes.values()) else 1


def cmd_delete(args: argparse.Namespace, connect: ConnectFn) -> int:
    return _answers(_queue(args, connect).delete(args.ids))


def cmd_promote_now(args: argparse.Namespace, connect: ConnectFn) -> int:
    return _answers(_queue(args, connect).promote_now(args.ids))


def cmd_workers(args: argparse.Namespace, connect: ConnectFn) -> int:
    import emq

    client = connect(args.url)
    found = emq.workers(client)
    now_ms = client.time_ms()
    print(f"{len(found)} workers alive")
    for w in found:
        age = max(0.0, now_ms / 1000 - w.beat)
        up = max(0.0, now_ms / 1000 - w.started)
        queues = ",".join(safe(q) for q in w.queues)
        print(
            f"{safe(w.id)}\tqueues {queues}\trunning {len(w.current)}/{w.concurrency}\tdone {w.done}\tfailed {w.failed}"
            f"\tup {up:.0f} s\tbeat {age:.1f} s ago"
        )
        for c in w.current:
            print(f"  {safe(c.queue)}\t{safe(c.id)}\tfor {max(0.0, time.time() - c.since):.1f} s")
    return 0


def cmd_queues(args: argparse.Namespace, connect: ConnectFn) -> int:
    import emq

    for name in emq.queues(connect(args.url)):
        print(safe(name))
    return 0


def add_verbs(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    verbose: argparse.ArgumentParser,
    url_option: Callable[[argparse.ArgumentParser], None],
    connect: ConnectFn,
) -> None:
    """The verbs, on the `emq` parser's subcommands."""

    def verb(name: str, run: Callable[[argparse.Namespace, ConnectFn], int], help: str, queue: bool = True) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = sub.add_parser(name, parents=[verbose], help=help)
        if queue:
            p.add_argument("queue", metavar="QUEUE")
        url_option(p)
        p.set_defaults(run=lambda args: run(args, connect))
        return p

    p = verb("jobs", cmd_jobs, "a page of a queue's jobs in one state: emq jobs QUEUE --state dead")
    p.add_argument("--state", required=True, choices=("scheduled", "pending", "active", "dead", "done", "cancelled"))
    p.add_argument("--lane", default=None, help="with --state pending: that lane's ready jobs")
    p.add_argument("--offset", type=int, default=0)
    p.add_argument("--limit", type=int, default=50, help="jobs a page (at most 1000)")

    p = verb("job", cmd_job, "one job: its state, attempts, data, error")
    p.add_argument("id", metavar="ID")

    p = verb("retry", cmd_retry, "dead jobs back to ready: emq retry QUEUE ID ... | --all-dead")
    p.add_argument("ids", metavar="ID", nargs="*")
    p.add_argument("--all-dead", action="store_true", help="every job dead now (oldest first)")
    p.add_argument("--limit", type=int, default=None, help="with --all-dead: at most this many")

    p = verb("cancel", cmd_cancel, "cancel jobs: a waiting one at once, a running one asked to stop")
    p.add_argument("ids", metavar="ID", nargs="+")

    p = verb("delete", cmd_delete, "delete jobs (not active ones: they run)")
    p.add_argument("ids", metavar="ID", nargs="+")

    p = verb("promote-now", cmd_promote_now, "scheduled jobs ready now")
    p.add_argument("ids", metavar="ID", nargs="+")

    verb("workers", cmd_workers, "the workers alive, what they run", queue=False)
    verb("queues", cmd_queues, "every queue that has been used", queue=False)

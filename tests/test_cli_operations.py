"""The operator's `emq` verbs, run as a user runs them (`python -m emq ...` against a real
server): jobs, job, retry, delete, promote-now, workers, queues. Each says which server it
uses on its first line (stderr), prints what the API answers, changes the keyspace as the
API call does, and shows untrusted job data with its control characters escaped (a raw
escape sequence would reach the operator's terminal).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import emq


def run(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EMQ_URL"}
    return subprocess.run([sys.executable, "-m", "emq", *args, "--url", url], capture_output=True, text=True, env=env, timeout=60)


def test_a_new_user_finds_a_dead_job_reads_it_and_retries_it(server, client):
    """The path the verbs exist for: list the dead, read one's error, retry it (then it is
    ready with its attempts back to 0), delete another, promote a scheduled one, list queues."""
    name = "cli-" + uuid.uuid4().hex[:8]
    q = emq.Queue(client, name)
    dead = [q.add(f"d{i}", max_attempts=1) for i in range(2)]
    for j in q.claim(2, lease=60):
        q.fail(j, "Traceback (most recent call last):\n  ValueError: bad \x1b[31mred\x1b[0m")
    later = q.add('{"order": 7}', delay=3600)

    listed = run("jobs", name, "--state", "dead", url=server.url)
    assert listed.returncode == 0, listed.stderr
    assert listed.stderr.startswith("emq: using ")
    lines = listed.stdout.splitlines()
    assert lines[0] == "dead: 2 jobs; showing 1-2"
    assert {line.split("\t")[0] for line in lines[1:]} == set(dead)
    assert "\x1b" not in listed.stdout and "\\x1b[31mred" in listed.stdout

    shown = run("job", name, dead[0], url=server.url)
    assert shown.returncode == 0 and "state:     dead" in shown.stdout and "ValueError: bad" in shown.stdout
    assert "\x1b" not in shown.stdout
    assert '"order": 7' in run("job", name, later, url=server.url).stdout

    retried = run("retry", name, dead[0], "no-such-id", url=server.url)
    assert retried.returncode == 1  # one id was not acted on
    assert retried.stdout.splitlines() == [f"{dead[0]}\tretried", "no-such-id\tnot_found"]
    job = q.get(dead[0])
    assert job is not None and (job.state, job.attempts) == ("pending", 0)

    deleted = run("delete", name, dead[1], url=server.url)
    assert (deleted.returncode, deleted.stdout.strip()) == (0, f"{dead[1]}\tdeleted")
    assert q.get(dead[1]) is None
    promoted = run("promote-now", name, later, url=server.url)
    assert (promoted.returncode, promoted.stdout.strip()) == (0, f"{later}\tpromoted")
    assert q.counts().pending == 2 and q.counts().schedule == 0

    assert name in run("queues", url=server.url).stdout.splitlines()
    workers = run("workers", url=server.url)
    assert workers.returncode == 0 and workers.stdout.splitlines()[0].endswith("workers alive")


def test_retry_all_dead_and_bad_command_lines(server, client):
    name = "cli-" + uuid.uuid4().hex[:8]
    q = emq.Queue(client, name)
    q.add_many([b"a", b"b", b"c"], max_attempts=1)
    for j in q.claim(3, lease=60):
        q.fail(j, "no")
    assert run("retry", name, "--all-dead", "--limit", "2", url=server.url).stdout.strip() == "retried 2"
    assert run("retry", name, "--all-dead", url=server.url).stdout.strip() == "retried 1"
    assert q.counts().dead == 0
    both = run("retry", name, "x", "--all-dead", url=server.url)
    assert both.returncode == 2 and "give job ids or --all-dead" in both.stderr
    bad = run("jobs", name, "--state", "dead", "--limit", "5000", url=server.url)
    assert bad.returncode == 1 and "Queue.jobs: limit" in bad.stderr


def test_cancel_a_waiting_and_a_running_job_then_list_and_delete_the_cancelled(server, client):
    """`emq cancel QUEUE ID ...` cancels a waiting job and asks a running one to stop (what
    `Queue.cancel` answers, one line an id; exit 1 when one is unknown or ended); `emq jobs
    --state cancelled` lists the cancelled rows, newest first; `emq delete` removes one from
    `P cancelled` with its row. A cancel that went elsewhere, or a listing that read another
    index, would show other ids."""
    name = "cli-" + uuid.uuid4().hex[:8]
    q = emq.Queue(client, name)
    running = q.add("r")
    [held] = q.claim(1, lease=60)
    assert held.id == running
    waiting = [q.add(f"w{i}", delay=3600 * i) for i in range(2)]

    cancelled = run("cancel", name, waiting[0], running, waiting[1], waiting[0], url=server.url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.splitlines() == [f"{waiting[0]}\tcancelled", f"{running}\tstopping", f"{waiting[1]}\tcancelled"]
    again = run("cancel", name, waiting[0], "no-such-id", url=server.url)
    assert (again.returncode, again.stdout.splitlines()) == (1, [f"{waiting[0]}\talready_done", "no-such-id\tunknown"])
    assert [q.get(i).state for i in waiting] == ["cancelled", "cancelled"]
    assert q.get(running).state == "active" and q.cancel_requests().ids == [running]

    listed = run("jobs", name, "--state", "cancelled", url=server.url)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0] == "cancelled: 2 jobs; showing 1-2"
    assert [line.split("\t")[0] for line in lines[1:]] == [j.id for j in q.jobs("cancelled").jobs]
    assert {line.split("\t")[0] for line in lines[1:]} == set(waiting)

    deleted = run("delete", name, waiting[1], url=server.url)
    assert (deleted.returncode, deleted.stdout.strip()) == (0, f"{waiting[1]}\tdeleted")
    assert q.get(waiting[1]) is None and [j.id for j in q.jobs("cancelled").jobs] == [waiting[0]]
    assert q.jobs("cancelled").total == 1

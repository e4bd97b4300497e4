"""The worker's group commit (SPEC §8): handler threads whose jobs
finish while a commit is on the wire are completed together by the next one
(`complete_many`), each answered as its own `complete` would be."""

from __future__ import annotations

import threading
import time

import emq
from emq.worker import GroupCommit


def finish_together(commit: GroupCommit, jobs: list) -> list:
    """`commit.complete(job)` for each job on its own thread, all released at once."""
    answers: list = [None] * len(jobs)
    gate = threading.Barrier(len(jobs))

    def one(i: int) -> None:
        gate.wait()
        answers[i] = commit.complete(jobs[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return answers


def test_jobs_that_finish_together_are_answered_each_as_complete_would(client):
    q = emq.Queue(client, "gc")
    q.add_many([b"a", b"b", b"c", b"d"])
    a, b, c, d = sorted(q.claim(4, lease=60), key=lambda j: j.data)
    # b's lease is lost: recovered, and claimed again (another token).
    q.extend(b, 0.001)
    time.sleep(0.01)
    assert q.stalled_check(max_stalled=None) == ([b.id], [])
    b2 = q.claim(1, lease=60)[0]
    assert b2.id == b.id and b2.token != b.token
    # c is already done.
    assert q.complete(c)
    commit = GroupCommit(q, lambda call: call())
    # The stale run of b and its new run finish together: separate commits, no id twice.
    answers = finish_together(commit, [a, b, c, d, b2])
    assert answers == [True, False, False, True, True]
    assert commit.commits <= 4
    counts = q.counts()
    assert counts.active == 0 and counts.pending == 0 and counts.done == 4
    assert q.get(b.id).state == "done"


def test_a_busy_worker_completes_its_jobs_in_fewer_commits_than_jobs(client):
    """Eight handlers released at once finish together: one leads a commit, the
    others join the next, so a round of eight takes two commits or so, never
    eight (what a complete per job would take)."""
    q = emq.Queue(client, "gc-busy")
    rounds = 6
    q.add_many([b"x"] * (8 * rounds))
    gate = threading.Barrier(8)

    def handler(job):
        gate.wait(10)

    w = emq.Worker(q, handler, concurrency=8, beat=0.05)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 30
    while w.counters.completed < 8 * rounds and time.monotonic() < deadline:
        time.sleep(0.01)
    w.stop()
    t.join(10)
    assert w.counters.completed == 8 * rounds
    commits = w._handlers.commits["gc-busy"].commits
    assert commits < 8 * rounds / 2, f"{commits} commits for {8 * rounds} jobs"
    assert q.counts().done == 8 * rounds


def test_a_commit_that_refills_its_slots_leaves_the_beat_asleep(client):
    """The beat waits for a free slot. A group commit that claims a job for every
    slot it frees (a busy queue) leaves none free, so it does not wake the beat:
    waking it would cost a thread switch a commit for nothing. The beat wakes
    when a slot stays free (the queue ran dry) and at its beat."""
    q = emq.Queue(client, "gc-asleep")
    jobs = 2000
    q.add_many([b"x"] * jobs)
    w = emq.Worker(q, lambda job: None, concurrency=4, beat=1)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    deadline = time.monotonic() + 60
    while w.counters.completed < jobs and time.monotonic() < deadline:
        time.sleep(0.001)
    # Counted while the jobs ran: once idle, the worker pops the wake tokens the
    # add left (one beat each).
    beats, commits = w.counters.beats, w._handlers.commits["gc-asleep"].commits
    w.stop()
    t.join(10)
    assert w.counters.completed == jobs
    assert commits > jobs / 8, f"{commits} commits: the commits did not claim"
    assert beats < commits / 10, f"{beats} beats for {commits} commits"


def test_a_commit_that_raises_leaves_nobody_waiting(client):
    """An error that is not the server's (a bug, an interrupt) in a commit: its
    jobs are answered None, the jobs that finished meanwhile still commit, and
    nobody hangs."""
    q = emq.Queue(client, "gc-raise")
    q.add_many([b"a", b"b", b"c"])
    jobs = q.claim(3, lease=60)
    calls = []

    def settle(call):
        calls.append(call)
        if len(calls) == 1:
            time.sleep(0.05)  # the others finish meanwhile
            raise RuntimeError("boom")
        return call()

    commit = GroupCommit(q, settle)
    answers: list = [None] * 3

    def one(i):
        answers[i] = commit.complete(jobs[i])

    first = threading.Thread(target=one, args=(0,))
    first.start()
    time.sleep(0.01)
    rest = [threading.Thread(target=one, args=(i,)) for i in (1, 2)]
    for t in rest:
        t.start()
    for t in [first, *rest]:
        t.join(10)
        assert not t.is_alive(), "a handler waits forever"
    assert answers == [None, True, True]
    assert len(calls) == 2
    assert q.counts().active == 1
    commit.close(timeout=5)


def test_a_handler_thread_does_not_wait_for_its_commit(client):
    """A handler thread hands its finished job over and is free at once: the
    answer comes later, from the commit thread (held up here until released).
    Had `finished` waited for the commit, the answer would be in by the time it
    returned."""
    q = emq.Queue(client, "gc-async")
    q.add_many([b"a"])
    job = q.claim(1, lease=60)[0]
    release = threading.Event()
    answered: list = []

    def settle(call):
        release.wait(10)
        return call()

    commit = GroupCommit(q, settle, lambda answers, claimed, held: answered.extend((j.id, a) for j, a in answers))
    commit.finished(job)
    assert answered == [] and not release.is_set()
    assert q.counts().active == 1
    release.set()
    commit.close(timeout=10)
    assert answered == [(job.id, True)]
    assert q.counts().done == 1


def test_a_commit_retried_after_a_wire_error_claims_nothing(client):
    """Only a commit's first try claims: after a wire error it completes alone
    (fewer commands to lose), and gives back the slots it held."""
    q = emq.Queue(client, "gc-retry")
    q.add_many([b"a", b"b", b"c"])
    job = q.claim(1, lease=60)[0]
    tries: list = []

    def failing(*args, **kw):
        tries.append("pair")
        raise emq.ConnectionError("dropped")

    q.complete_and_claim = failing  # type: ignore[method-assign]
    alone = q.complete_many

    def counted(jobs):
        tries.append("alone")
        return alone(jobs)

    q.complete_many = counted  # type: ignore[method-assign]

    def settle(call):
        while True:
            try:
                return call()
            except emq.ConnectionError:
                continue

    got: list = []
    commit = GroupCommit(q, settle, lambda answers, claimed, held: got.append((answers, claimed, held)), reserve=lambda k: k + 1)
    commit.finished(job)
    commit.close(timeout=10)
    assert tries == ["pair", "alone"]
    assert got == [([(job, True)], [], 1)]
    assert q.counts().pending == 2, "nothing was claimed"


def test_failed_jobs_are_settled_with_the_finished_ones_in_one_call(client):
    """Jobs whose handlers raised go to the group commit too: held up behind
    a first commit, two finished and two failed jobs (one on its last attempt)
    and a stale run are settled by one `settle_many`, each answered as its
    single call would be, and that commit claims nothing."""
    q = emq.Queue(client, "gc-fail")
    q.add_many([b"first", b"a", b"b", b"c"])
    q.add_many([{"data": b"last", "max_attempts": 1}])
    first, a, b, c, last = sorted(q.claim(5, lease=60), key=lambda j: (j.data != b"first", j.data != b"a", j.data))
    stale = emq.Job(id=c.id, data=b"", token="not-the-token")
    release = threading.Event()
    calls: list = []
    got: list = []

    def settle(call):
        calls.append(call)
        if len(calls) == 1:
            release.wait(10)
        return call()

    many = q.settle_many
    batches: list = []

    def counted(items):
        batches.append(list(items))
        return many(items)

    q.settle_many = counted  # type: ignore[method-assign]
    commit = GroupCommit(q, settle, lambda answers, claimed, held: got.append((answers, claimed, held)), reserve=lambda k: k + 1)
    commit.finished(first)
    time.sleep(0.05)  # the first commit is on the wire, held up
    commit.failed(a, ValueError("a"))
    commit.finished(b)
    commit.failed(last, RuntimeError("last"))
    commit.failed(stale, RuntimeError("late"))
    release.set()
    commit.close(timeout=10)
    assert len(batches) == 1 and len(batches[0]) == 4, batches
    answers = [a for batch in got for a in batch[0]]
    assert [(j.data, x) for j, x in answers] == [(b"first", True), (b"a", "scheduled"), (b"b", True), (b"last", "dead"), (b"", "refused")]
    assert got[1][1] == [] and got[1][2] == 0, "a commit with a failed job claims nothing and holds no slot"
    assert q.get(a.id).state == "scheduled" and q.get(a.id).error == "ValueError: a"
    assert q.get(last.id).state == "dead"
    assert q.get(c.id).state == "active", "the stale run's fail is refused"

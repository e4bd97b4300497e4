"""Tasks' outcomes in the core (SPEC §13), on every server and both job
backends: results and errors written in the transaction that settles a job and
read back by another process; waiters registered with `Queue.watch` and woken
by the settle through their inbox, with one blocking pop and no polling; a
registration racing a settle; cancels of scheduled, ready, lane and running
jobs (a running one cancelled when it is settled or its lease runs out, never
retried); progress only with the job's token; unique adds under racing
producers; the limits; and bad input writing nothing."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import threading
import time

import pytest
import redis

import emq
from test_jobs_model import assert_invariants, expire_lease, snapshot

Q = "outcomes"
P = f"emq:{{{Q}}}:"


@pytest.fixture(params=["plan", "module"])
def backend(request, r) -> str:
    if request.param == "module" and not any(m.get(b"name") == b"emq" for m in r.module_list()):
        pytest.fail("emq's server module is not loaded (./dev builds it)")
    return request.param


@pytest.fixture
def q(client, backend) -> emq.Queue:
    return emq.Queue(client, Q, backend=backend)


@pytest.fixture
def popper(client):
    """A client of its own for the blocking pops."""
    c = client.sibling(read_timeout=None)
    yield c
    c.close()


def inbox() -> str:
    return secrets.token_hex(8)


def until_blocked(r: redis.Redis, *client_id: str) -> None:
    """Returns once a client (of the ids given, else any) is blocked in a BLPOP; fails after 10 s."""
    deadline = time.monotonic() + 10
    while "cmd=blpop" not in r.execute_command("CLIENT", "LIST", *(("ID", *client_id) if client_id else ())).decode():
        assert time.monotonic() < deadline, "the pop never blocked"
        time.sleep(0.001)


def calls(r: redis.Redis, command: str) -> int:
    """How many times the server has run `command` (INFO commandstats)."""
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


# ---------------------------------------------------------------------------
# results and errors


def test_results_and_errors_are_written_at_settle_and_read_by_another_process(server, q):
    """A complete writes its result and a fail its error, error type and
    traceback in the settling transaction; another process's status read finds
    them. A broken settle that wrote the result in a later call, or not at all,
    leaves the other process nothing to read."""
    ids = [q.add(b"d", max_attempts=1) for _ in range(5)]
    jobs = {j.id: j for j in q.claim(5)}
    a, b, c, d, e = (jobs[i] for i in ids)
    assert q.complete(a, b'{"sum": 3}') is True
    try:
        raise ValueError("no such thing")
    except ValueError as err:
        assert q.fail(b, err, traceback="Traceback (most recent call last):\n  ...") is emq.FailOutcome.DEAD
    assert q.complete_many([(c, "text"), d]) == [True, True]
    assert q.settle_many([{"job": e, "result": b"\x00\xff"}]) == [True]
    code = f"import emq, json; q = emq.Queue(emq.connect({server.url!r}), {Q!r})\n" + (
        "print(json.dumps([None if j is None else [j.state, j.result and j.result.hex(), j.error, j.error_type, j.traceback]"
        f" for j in q.status({ids!r})]))"
    )
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert out == [
        ["done", b'{"sum": 3}'.hex(), None, None, None],
        ["dead", None, "ValueError: no such thing", "ValueError", "Traceback (most recent call last):\n  ..."],
        ["done", b"text".hex(), None, None, None],
        ["done", None, None, None, None],
        ["done", "00ff", None, None, None],
    ]


def test_an_exceptions_type_is_qualified_by_its_module_and_may_be_given(q):
    """`error_type` is the exception's `module.QualName` (a local class too), or
    the one given. A broken fail that wrote the bare class name would make two
    tasks' `ValueError`s of different modules alike."""

    class Boom(Exception):
        pass

    q.add(b"d", max_attempts=1)
    q.add(b"d", max_attempts=1)
    j1, j2 = q.claim(2)
    q.fail(j1, Boom("x"))
    q.fail(j2, "plain", error_type="app.tasks.Other")
    s1, s2 = q.status([j1.id, j2.id])
    assert (s1.error_type, s2.error_type) == (
        f"{__name__}.test_an_exceptions_type_is_qualified_by_its_module_and_may_be_given.<locals>.Boom",
        "app.tasks.Other",
    )


def test_a_result_past_the_limit_is_refused_naming_the_call_and_writes_nothing(r, q):
    """512 KiB is the most a complete writes: one byte more is an
    ArgumentError naming the call and `result`, before anything is sent, in
    every form (single, batch, settle, group commit)."""
    assert emq.Queue.RESULT_MAX == emq._core.RESULT_MAX == 512 * 1024
    q.add(b"d")
    [j] = q.claim(1)
    big = b"x" * (emq.Queue.RESULT_MAX + 1)
    before = snapshot(r)
    for call, name in [
        (lambda: q.complete(j, big), "Queue.complete"),
        (lambda: q.complete_many([(j, big)]), "Queue.complete_many"),
        (lambda: q.settle_many([{"job": j, "result": big}]), "Queue.settle_many"),
        (lambda: q.complete_and_claim([(j, big)], 1), "Queue.complete_and_claim"),
    ]:
        with pytest.raises(emq.ArgumentError, match=f"^{name}: result is 524289 bytes, more than the limit of 524288"):
            call()
        assert snapshot(r) == before
    assert q.complete(j, b"x" * emq.Queue.RESULT_MAX) is True
    assert len(q.status([j.id])[0].result) == emq.Queue.RESULT_MAX


def test_bad_input_to_the_new_calls_is_refused_and_writes_nothing(r, q, popper):
    """Each bad argument is an ArgumentError naming the call and the argument,
    raised before anything is sent: the keyspace is unchanged after each."""
    q.add(b"d")
    [j] = q.claim(1)
    before = snapshot(r)
    for call, words in [
        (lambda: q.watch([j.id], "not an inbox"), "Queue.watch: inbox must hold only ASCII"),
        (lambda: q.watch([j.id], "x" * 65), "Queue.watch: inbox must be 1 to 64"),
        (lambda: q.watch([""], "w"), "Queue.watch: id must be 1 to 256 bytes"),
        (lambda: q.watch([j.id, j.id], "w"), "Queue.watch: ids .* is given twice"),
        (lambda: q.status("x" * 257), "Queue.status: id must be"),
        (lambda: q.cancel(""), "Queue.cancel: id must be"),
        (lambda: q.progress(j, True), "Queue.progress: value must be a number"),
        (lambda: q.progress(j, b"x" * (64 * 1024 + 1)), "Queue.progress: value is 65537 bytes"),
        (lambda: q.fail(j, "e", traceback=b"tb"), "Queue.fail: traceback must be a str"),
        (lambda: q.fail(j, "e", traceback="t" * (64 * 1024 + 1)), "Queue.fail: traceback is 65537 bytes"),
        (lambda: q.add_unique(b"d", unique_key="k", unique_for=0), "Queue.add_unique: unique_for must be a positive duration"),
        (lambda: q.add_unique(b"d", unique_key="", unique_for=5), "Queue.add_unique: unique_key must be"),
        (lambda: q.add(b"d", keep=-1), "Queue.add: keep must be a non-negative duration"),
        (lambda: q.add(b"d", keep="always"), 'Queue.add: keep must be a duration or "forever"'),
        (lambda: q.add_many([{"data": b"d", "unique_key": "k"}]), "Queue.add_many: give unique_key and unique_for together"),
        (lambda: q.settle_many([{"job": j, "result": b"r", "error": "e"}]), "Queue.settle_many: an item has a result or an error"),
        (lambda: q.settle_many([{"job": j, "retry_in": 1}]), "Queue.settle_many: an item with retry_in"),
        (lambda: q.settle_many([{"job": j, "retry": False}]), "Queue.settle_many: an item with .*retry is a fail"),
        (lambda: q.fail(j, "e", retry=0), "Queue.fail: retry must be a bool, not int"),
        (lambda: q.settle_many([{"job": j, "error": "e", "retry": "no"}]), "Queue.settle_many: retry must be a bool, not str"),
        (lambda: q.settle_many([{"job": j, "other": 1}]), "Queue.settle_many: unknown item fields"),
        (lambda: q.add_many([{"data": b"d", "uniq": "k"}]), r'Queue.add_many: unknown job fields \["uniq"\]'),
        (lambda: q.cancel_requests(-1), "Queue.cancel_requests: since must be a non-negative integer"),
        (lambda: q.pop_inbox("w", 1, client="redis://x"), "Queue.pop_inbox: client must be an emq.Client"),
        (lambda: q.pop_inbox("w", 0, client=popper), "Queue.pop_inbox: timeout must be a positive duration"),
    ]:
        with pytest.raises(emq.ArgumentError, match=words):
            call()
        assert snapshot(r) == before, words


def test_a_jobs_own_keep_outlives_or_undercuts_the_queues(r, q):
    """`keep` sets the done row's expiry in place of the queue's `keep_done`:
    0 deletes it at once (its result with it), "forever" sets none."""
    q.set_retention(keep_done=600)
    ids = [q.add(b"d", keep=k) for k in (0, 5, "forever", None)]
    jobs = {j.id: j for j in q.claim(4)}
    assert q.complete_many([(jobs[i], b"r") for i in ids]) == [True] * 4
    gone, short, forever, default = ids
    assert not r.exists(P + "job:" + gone)
    assert 4000 < r.pttl(P + "job:" + short) <= 5000
    assert r.pttl(P + "job:" + forever) == -1
    assert 590_000 < r.pttl(P + "job:" + default) <= 600_000
    assert q.status([forever])[0].keep_ms == -1


# ---------------------------------------------------------------------------
# waiting


def test_a_registration_answers_ended_jobs_now_and_registers_the_rest(q, popper):
    """A registration answers a job already done with its outcome, a waiting
    one with its row, an unknown one with None; the done one is not pushed as
    well (a waiter would take it twice)."""
    done, waiting = q.add(b"a"), q.add(b"b")
    [j] = q.claim(1)
    assert j.id == done
    q.complete(j, b"1")
    w = inbox()
    got = q.watch([done, waiting, "never-added"], w)
    assert got[0].ended and got[0].state == "done" and got[0].result == b"1"
    assert not got[1].ended and got[1].state == "pending"
    assert got[2] is None
    assert q.pop_inbox(w, 0.2, client=popper) == [], "an ended job is not pushed: it was answered"


def test_a_waiter_is_woken_by_the_settle_with_one_blocking_pop(r, q, popper):
    """The waiter's connection sends one BLPOP (and the LPOP behind it) while it
    waits, and the settle's push ends it: no polling. A broken wait that polled
    would send a command a tick; one that missed the push would run to its
    timeout and give nothing."""
    w = inbox()
    ids = [q.add(b"d") for _ in range(3)]
    q.watch(ids, w)
    jobs = q.claim(3)
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(q.pop_inbox(w, 30, client=popper)))
    blpop, lpop = calls(r, "blpop"), calls(r, "lpop")
    t0 = time.monotonic()
    waiter.start()
    until_blocked(r)
    time.sleep(0.05)  # blocked a while: a poller would have sent more by now
    assert q.complete_many(jobs) == [True] * 3
    waiter.join(10)
    assert got == [ids], "every id the settle pushed, in one pop"
    assert time.monotonic() - t0 < 20, "woken by the push, not by the timeout"
    assert (calls(r, "blpop") - blpop, calls(r, "lpop") - lpop) == (1, 1)


OUTCOMES = ["complete", "fail-dead", "stalled-dead", "cancel-pending", "cancel-running"]


def bring_to_outcome(r, q, j, how: str) -> tuple[str, str | None]:
    """Brings the claimed job `j` to the outcome `how`; its state and error then."""
    if how == "complete":
        assert q.complete(j, b"42") is True
        return "done", None
    if how == "fail-dead":
        assert q.fail(j, "boom", retry_in=0) is emq.FailOutcome.DEAD
        return "dead", "boom"
    if how == "stalled-dead":
        expire_lease(r, P, [j.id])
        assert q.stalled_check(max_stalled=0).dead == [j.id]
        return "dead", "stalled"
    assert q.cancel(j.id) is emq.CancelOutcome.STOPPING
    assert q.complete(j) is True
    return "cancelled", "cancelled"


@pytest.mark.parametrize("how", OUTCOMES)
def test_each_waiter_is_told_of_each_outcome_exactly_once(r, q, popper, how):
    """Two waiters registered before the outcome (one of them twice) each find
    the id in their inbox once; a waiter registering after it is answered at
    registration and finds nothing pushed. A broken settle that skipped the
    push, pushed an inbox once per registration, or pushed to a late waiter
    would fail one of these."""
    if how == "cancel-pending":
        id_ = q.add(b"d", max_attempts=1)
    else:
        q.add(b"d", max_attempts=1)
        [j] = q.claim(1)
        id_ = j.id
    early, twice, late = inbox(), inbox(), inbox()
    for w in (early, twice, twice):
        [got] = q.watch([id_], w)
        assert got is not None and not got.ended
    if how == "cancel-pending":
        assert q.cancel(id_) is emq.CancelOutcome.CANCELLED
        state, error = "cancelled", "cancelled"
    else:
        state, error = bring_to_outcome(r, q, j, how)
    [answer] = q.watch([id_], late)
    assert answer.ended and (answer.state, answer.error) == (state, error)
    for w in (early, twice):
        assert q.pop_inbox(w, 5, client=popper) == [id_], w
        assert q.pop_inbox(w, 0.1, client=popper) == [], f"{w}: told twice"
    assert q.pop_inbox(late, 0.1, client=popper) == [], "a late waiter was pushed as well as answered"
    assert not r.exists(P + "inbox:" + late)
    assert 3_590_000 < r.pttl(P + "inbox:" + early) <= 3_600_000 or not r.exists(P + "inbox:" + early)


def test_a_fail_that_allows_no_retry_is_dead_with_attempts_left(r, q, popper):
    """`fail(retry=False)` and a `settle_many` item with `"retry": False` make
    the job dead on its first of five attempts: in `dead`, the row dead with its
    error, type and traceback, its waiter told, nothing left in `schedule` or
    `pending`; a retry_in given beside it changes nothing. A version that
    ignored the flag (or a module that misread the form) would schedule a retry
    and tell no one."""
    ids = [q.add(b"d", max_attempts=5) for _ in range(2)]
    w = inbox()
    q.watch(ids, w)
    jobs = {j.id: j for j in q.claim(2)}
    a, b = (jobs[i] for i in ids)
    assert q.fail(a, "withdrawn", retry_in=0, traceback="tb", retry=False) is emq.FailOutcome.DEAD
    assert q.settle_many([{"job": b, "error": "bad call", "error_type": "m.E", "retry": False}]) == [emq.FailOutcome.DEAD]
    assert sorted(q.pop_inbox(w, 5, client=popper)) == sorted(ids)
    sa, sb = q.status(ids)
    assert (sa.state, sa.attempts, sa.error, sa.traceback) == ("dead", 1, "withdrawn", "tb"), sa
    assert (sb.state, sb.attempts, sb.error, sb.error_type) == ("dead", 1, "bad call", "m.E"), sb
    assert {m.decode() for m in r.zrange(P + "dead", 0, -1)} == set(ids)
    assert r.zcard(P + "schedule") == 0 and r.llen(P + "pending") == 0 and r.zcard(P + "active") == 0
    assert_invariants(r, P)


def test_a_fail_that_will_be_retried_tells_no_one_until_the_outcome(q, popper):
    """A retried fail is not an outcome: the waiter stays registered through
    the retry and is told once, by the complete of the next attempt. A broken
    fail that pushed on every failure would wake the waiter to a job still
    running; one that dropped `wait` on retry would never wake it."""
    id_ = q.add(b"d", max_attempts=3)
    w = inbox()
    q.watch([id_], w)
    [j] = q.claim(1)
    assert q.fail(j, "again", retry_in=0) is emq.FailOutcome.SCHEDULED
    assert q.pop_inbox(w, 0.2, client=popper) == []
    [j] = q.claim(1)
    assert j.id == id_ and q.complete(j, b"ok") is True
    assert q.pop_inbox(w, 5, client=popper) == [id_]
    assert q.status([id_])[0].result == b"ok"


def test_status_and_watch_answer_unknown_ids_with_none_and_write_nothing(r, q, popper):
    """An id that names no row (never added, or expired) is None to status and
    to a registration, which registers nothing for it: a broken watch that
    wrote a `wait` field would make a row of one field, which status would
    then answer as a job."""
    q.add(b"d")
    before = snapshot(r)
    w = inbox()
    assert q.status(["never", "nor-this"]) == [None, None]
    assert q.watch(["never"], w) == [None]
    assert snapshot(r) == before
    assert q.status(["never"]) == [None]


def test_an_unblock_ends_a_pop_at_once(r, q, popper, client):
    """`CLIENT UNBLOCK` of the popping connection ends a pop without a timeout
    at once, with an empty answer: a broken pop that retried its BLPOP on an
    unblock would hang here."""
    w = inbox()
    got: list = []
    # The id first: the pop holds the popper's connection until it ends.
    id_ = popper._client_id(Q)
    waiter = threading.Thread(target=lambda: got.append(q.pop_inbox(w, None, client=popper)))
    waiter.start()
    until_blocked(r, str(id_))
    assert client._unblock(id_, Q)
    waiter.join(10)
    assert got == [[]]


@pytest.mark.parametrize("sweep", ["plan", "lua", "module"])
def test_a_death_by_the_stalled_check_is_told(r, q, popper, sweep):
    """A stalled check that makes a watched job dead pushes its id, whichever runs it."""
    w = inbox()
    q.add(b"d")
    [j] = q.claim(1)
    q.watch([j.id], w)
    expire_lease(r, P, [j.id])
    assert q.stalled_check(max_stalled=0, backend=sweep).dead == [j.id]
    assert q.pop_inbox(w, 5, client=popper) == [j.id]
    assert q.status([j.id])[0].error == "stalled"


def test_a_registration_racing_settles_never_loses_an_outcome(q, client, popper):
    """Registrations in one thread, completes in another, on the same jobs:
    each job is answered at registration (ended) or its id reaches the inbox,
    never neither (a lost outcome) nor both. A registration that wrote `wait`
    without the guard would lose the outcomes of jobs settled in between."""
    n = 120
    ids = [q.add(b"d") for _ in range(n)]
    jobs = q.claim(n)
    w = inbox()
    answers: dict[str, bool] = {}
    other = emq.Queue(client.sibling(), Q, backend=q.backend)

    def register():
        for i in ids:
            [job] = q.watch([i], w)
            answers[i] = job.ended

    def settle():
        for j in jobs:
            assert other.complete(j) is True

    threads = [threading.Thread(target=register), threading.Thread(target=settle)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    pushed: list[str] = []
    while len(pushed) < sum(1 for e in answers.values() if not e):
        got = q.pop_inbox(w, 5, client=popper)
        assert got, "an outcome was lost"
        pushed += got
    assert sorted(pushed) == sorted(i for i, ended in answers.items() if not ended)
    assert q.pop_inbox(w, 0.2, client=popper) == []
    other.client.close()


# ---------------------------------------------------------------------------
# cancels


def test_cancels_of_waiting_jobs_take_them_out_in_one_transaction(r, q, popper):
    """Scheduled, ready, and lane jobs leave where they were; their rows say
    cancelled and are kept as done rows are; their waiters are told; a promote
    or a claim finds nothing of them. A broken cancel that left an id in its
    list would have it claimed."""
    later = q.add(b"l", delay=3600)
    ready = q.add(b"r")
    lane = q.add(b"x", lane="L")
    kept = q.add(b"k", lane="L")
    w = inbox()
    q.watch([later, ready, lane], w)
    for i in (later, ready, lane):
        assert q.cancel(i) is emq.CancelOutcome.CANCELLED
        assert q.cancel(i) is emq.CancelOutcome.ALREADY_DONE
    assert q.cancel("never") is emq.CancelOutcome.UNKNOWN
    assert sorted(q.pop_inbox(w, 5, client=popper)) == sorted([later, ready, lane])
    assert [s.state for s in q.status([later, ready, lane])] == ["cancelled"] * 3
    assert q.status([ready])[0].error == "cancelled"
    assert [j.id for j in q.claim(5)] == [kept]
    c = q.counts()
    assert (c.schedule, c.pending, c.cancelled) == (0, 0, 3)
    assert set(r.zrange(P + "cancelled", 0, -1)) == {i.encode() for i in (later, ready, lane)}
    assert_invariants(r, P)


def test_cancels_of_ended_and_unknown_jobs_change_nothing(r, q):
    """A done, dead or cancelled job is ALREADY_DONE and an unknown id UNKNOWN,
    and the keyspace is as it was. A broken cancel that re-cancelled a done
    row (or made a row for an unknown id) would change it."""
    for _ in range(3):
        q.add(b"d", max_attempts=1)
    done, dead, running = q.claim(3)
    q.complete(done, b"r")
    q.fail(dead, "e")
    assert q.cancel(running.id) is emq.CancelOutcome.STOPPING
    q.complete(running)
    before = snapshot(r)
    for id_, want in [(done.id, "ALREADY_DONE"), (dead.id, "ALREADY_DONE"), (running.id, "ALREADY_DONE"), ("never", "UNKNOWN")]:
        assert q.cancel(id_) is emq.CancelOutcome[want], id_
        assert snapshot(r) == before, id_
    assert [s.state for s in q.status([done.id, dead.id, running.id])] == ["done", "dead", "cancelled"]
    assert q.status([done.id])[0].result == b"r"


def test_a_cancel_of_a_running_job_writes_only_its_flag_and_its_request(r, q):
    """Asking a running job to stop writes `cancel 1` to its row and its id to
    `P cancels` (and the lease mark, as every write to an active row: SPEC
    §9), and nothing else: it stays active with its lease. A broken cancel
    that took it out of `active` would let another worker's claim or a stalled
    check race the worker still running it."""
    q.add(b"d")
    [j] = q.claim(1)
    mark = P + f"leases:{int(r.hget(P + 'job:' + j.id, 'lease')) // 1000}"
    r.delete(mark)
    before = snapshot(r)
    assert q.cancel(j.id) is emq.CancelOutcome.STOPPING
    after = snapshot(r)
    changed = {k for k in set(before) | set(after) if before.get(k) != after.get(k)}
    assert changed == {P + "job:" + j.id, P + "cancels", mark}
    assert dict(after[P + "job:" + j.id][1]) == {**dict(before[P + "job:" + j.id][1]), b"cancel": b"1"}
    assert r.zrange(P + "cancels", 0, -1) == [j.id.encode()]
    assert q.cancel(j.id) is emq.CancelOutcome.STOPPING, "asked again: still running"
    assert r.zscore(P + "active", j.id) is not None


def test_a_cancelled_rows_keep_is_its_own_else_the_queues(r, q):
    """A cancel keeps the row as a complete would: the job's own `keep` (0:
    deleted at once, and not listed), else the queue's `keep_done`."""
    q.set_retention(keep_done=600)
    gone, short, default = (q.add(b"d", keep=k, delay=3600) for k in (0, 5, None))
    for i in (gone, short, default):
        assert q.cancel(i) is emq.CancelOutcome.CANCELLED
    assert not r.exists(P + "job:" + gone) and r.zscore(P + "cancelled", gone) is None
    assert 4000 < r.pttl(P + "job:" + short) <= 5000
    assert 590_000 < r.pttl(P + "job:" + default) <= 600_000
    assert q.counts().cancelled == 2
    assert_invariants(r, P)


@pytest.mark.parametrize(
    "ending",
    ["complete", "complete_many", "complete_and_claim", "fail", "settle_many", "stalled-plan", "stalled-lua", "stalled-module"],
)
def test_a_running_job_asked_to_stop_is_cancelled_never_retried(r, q, popper, ending):
    """A running job is asked to stop (the row's flag, the request its worker
    reads), and becomes cancelled when its worker settles it, whatever it
    says, or when its lease runs out: never retried, its waiter told."""
    q.add(b"d", max_attempts=5)
    [j] = q.claim(1)
    w = inbox()
    q.watch([j.id], w)
    since = q.cancel_requests().until
    assert q.cancel(j.id) is emq.CancelOutcome.STOPPING
    assert q.status([j.id])[0].cancel_requested and q.status([j.id])[0].state == "active"
    assert j.id in q.cancel_requests(since).ids
    assert q.progress(j, 0.9) is True, "it still holds its lease"
    if ending == "complete":
        assert q.complete(j, b"r") is True
    elif ending == "complete_many":
        assert q.complete_many([(j, b"r")]) == [True]
    elif ending == "complete_and_claim":
        assert q.complete_and_claim([(j, b"r")], 1) == ([True], [])
    elif ending == "fail":
        assert q.fail(j, "stopped", retry_in=0) is emq.FailOutcome.CANCELLED
    elif ending == "settle_many":
        assert q.settle_many([(j, "stopped", 0)]) == [emq.FailOutcome.CANCELLED]
    else:
        expire_lease(r, P, [j.id])
        assert q.stalled_check(max_stalled=None, backend=ending.split("-")[1]) == ([], [])
    row = q.status([j.id])[0]
    assert (row.state, row.error, row.result) == ("cancelled", "cancelled", None)
    assert q.claim(1) == [], "never retried"
    assert q.pop_inbox(w, 5, client=popper) == [j.id]
    assert q.complete(j) is False, "its lease is gone"
    assert_invariants(r, P)


def test_progress_is_written_only_with_the_jobs_token(r, q):
    """Progress is written while the job holds its lease, as extend is; a stale
    token or a settled job writes nothing and answers False."""
    q.add(b"d")
    [j] = q.claim(1)
    assert q.progress(j, 0.25) is True
    assert q.status([j.id])[0].progress == b"0.25"
    stale = emq.Job(j.id, token="not-the-token")
    before = snapshot(r)
    assert q.progress(stale, b"99") is False
    assert snapshot(r) == before, "a stale worker wrote progress"
    q.complete(j)
    assert q.progress(j, 1) is False


# ---------------------------------------------------------------------------
# unique adds


def test_unique_adds_racing_in_threads_make_exactly_one_job(client, backend):
    """Eight producers add under one key at once: one job, and every one is
    answered with its id (one of them created it)."""
    queues = [emq.Queue(client.sibling(), Q, backend=backend) for _ in range(8)]
    got: list = []
    go = threading.Barrier(len(queues))

    def produce(q):
        go.wait()
        got.append(q.add_unique(b"d", unique_key="order-7", unique_for=60))

    threads = [threading.Thread(target=produce, args=(q,)) for q in queues]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len({u.id for u in got}) == 1 and sum(u.created for u in got) == 1
    assert queues[0].counts().pending == 1
    for q in queues:
        q.client.close()


def test_unique_adds_racing_in_processes_make_exactly_one_job(server, q, backend):
    """Four processes add under one key at once: one of them creates the job,
    the others are answered with it. An add that read the key without the
    guard would let two of them create one each."""
    code = (
        "import emq, sys; q = emq.Queue(emq.connect(sys.argv[1]), sys.argv[2], backend=sys.argv[3])\n"
        "print(q.add_unique(b'd', unique_key='k', unique_for=60).created)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, server.url, Q, backend], stdout=subprocess.PIPE, text=True) for _ in range(4)]
    created = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(created) == ["False", "False", "False", "True"]
    assert q.counts().pending == 1


def test_an_add_under_a_live_key_answers_the_first_job_and_writes_nothing(r, q):
    """While the key lives and names a job with a row, a second add under it
    (another data, another delay, another lane, in a batch too) is answered
    with the first id and the keyspace is unchanged. A broken add that wrote
    the second job, or renewed the key's window, would change it."""
    first = q.add_unique(b"d", unique_key="k", unique_for=60)
    assert first.created
    before = snapshot(r)
    assert q.add_unique(b"other", unique_key="k", unique_for=600, delay=5, lane="L") == emq.UniqueAdd(first.id, False)
    assert q.add_many([{"data": b"e", "unique_key": "k", "unique_for": 60}]) == [first.id]
    assert snapshot(r) == before
    assert q.counts().pending == 1


def test_an_add_of_the_id_its_key_names_answers_it_and_writes_nothing(r, q):
    """`add_unique(data2, unique_key=K, id=I)` where K names job I (added with
    other data) is answered `UniqueAdd(I, created=False)` with the keyspace
    unchanged, in a batch too; the same id under a key that names no job is
    still refused as a duplicate, writing nothing. A version that checked the
    id before the key would raise DuplicateJobError for the first."""
    first = q.add_unique(b"one", unique_key="k", unique_for=60, id="order-7")
    assert first == emq.UniqueAdd("order-7", True)
    before = snapshot(r)
    assert q.add_unique(b"two", unique_key="k", unique_for=60, id="order-7") == emq.UniqueAdd("order-7", False)
    assert q.add_many([{"data": b"three", "id": "order-7", "unique_key": "k", "unique_for": 30}]) == ["order-7"]
    assert snapshot(r) == before
    with pytest.raises(emq.DuplicateJobError, match="order-7"):
        q.add_unique(b"two", unique_key="other", unique_for=60, id="order-7")
    assert snapshot(r) == before
    assert q.status(["order-7"])[0].data == b"one"


def test_a_key_whose_job_is_gone_is_taken_anew(r, q):
    """A key naming a job whose row is gone (kept 0 ms once done) no longer
    holds: the next add under it creates a job and takes the key for its
    window. A broken add that trusted the key alone would answer a job no one
    can read."""
    first = q.add_unique(b"d", unique_key="k", unique_for=60, keep=0)
    assert q.add_unique(b"e", unique_key="k", unique_for=60) == emq.UniqueAdd(first.id, False)
    [j] = q.claim(1)
    q.complete(j)  # kept 0 ms: the row goes, the key stays
    second = q.add_unique(b"e", unique_key="k", unique_for=60)
    assert second.created and second.id != first.id
    assert r.get(P + "unique:k") == second.id.encode() and 59_000 < r.pttl(P + "unique:k") <= 60_000
    assert q.status([second.id])[0].unique_key == "k"


# ---------------------------------------------------------------------------
# the cluster


def test_the_new_calls_follow_the_queue_on_a_cluster(cluster):
    """A queue owned by another node than the seed: registration, the pop,
    cancel, progress and status all reach its node."""
    q_name = cluster.queue_on(2)
    client = emq.connect(cluster.nodes[0].url)
    popper = client.sibling(read_timeout=None)
    try:
        q = emq.Queue(client, q_name)
        a, b = q.add(b"a"), q.add(b"b", delay=3600)
        w = inbox()
        assert [x.state for x in q.watch([a, b], w)] == ["pending", "scheduled"]
        [j] = q.claim(1)
        assert q.progress(j, 1) and q.complete(j, b"r")
        assert q.cancel(b) is emq.CancelOutcome.CANCELLED
        assert sorted(q.pop_inbox(w, 5, client=popper)) == sorted([a, b])
        assert [s.state for s in q.status([a, b])] == ["done", "cancelled"]
        assert q.add_unique(b"u", unique_key="k", unique_for=60).created
    finally:
        popper.close()
        client.close()

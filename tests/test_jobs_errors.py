"""Bad input to the job's operations writes nothing (SPEC §7, §10).

Each case runs on a queue seeded with a job in every place (scheduled, pending,
a lane, active, dead, done) and compares the whole keyspace before and after
(`snapshot`). Bad arguments raise `emq.ArgumentError` (a `ValueError`) whose
message names the call the user made (`Queue.add`, `Queue.claim`, …) and the
argument, and never the bad value (a value may be a secret, or huge); an
unknown id or a forged token is not an error but a refusal (False /
`FailOutcome.REFUSED`), and writes nothing either.

No test here sleeps or depends on the clock: the seeded jobs are due an hour
from now or ready at once, and leases are an hour long.
"""

from __future__ import annotations

import datetime
import math

import pytest

import emq
from test_jobs_model import assert_invariants, snapshot

Q = "errs"
P = f"emq:{{{Q}}}:"
HOUR = 3600


@pytest.fixture
def seeded(client, r):
    """A queue with a job in every place, and the Job a worker holds."""
    q = emq.Queue(client, Q)
    q.add("scheduled", id="s", delay=HOUR)
    q.add("dead", id="d", max_attempts=1)
    q.add("done", id="c")
    q.add("held", id="h", lane="A")
    [jd] = q.claim(1, lease=HOUR)
    assert q.fail(jd, "bye", retry_in=0) is emq.FailOutcome.DEAD
    [jc] = q.claim(1, lease=HOUR)
    assert q.complete(jc)
    [held] = q.claim(1, lease=HOUR)
    assert held.id == "h"
    q.set_lane_limit("B", 2)
    q.pause_lane("C")
    q.add("pending", id="p")
    q.add("lane", id="l", lane="B")
    q.add("paused", id="pc", lane="C")
    assert_invariants(r, P)
    return q, held


def shown(value: object) -> list[str]:
    """How a message could echo `value`: its text, its repr (long enough to tell)."""
    forms = [str(value), repr(value)] if isinstance(value, (str, int, float)) and not isinstance(value, bool) else []
    return [f for f in forms if len(f) >= 3 and f not in ("inf", "nan", "None", "'x'")]


def check(r, call, verb: str, *names: str, value: object = None):
    """`call()` raises ArgumentError naming the verb and each of `names`, never
    echoing `value` (the bad one), and writes nothing."""
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError) as e:
        call()
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert msg.startswith(f"{verb}: "), f"{msg!r} does not name {verb}"
    for name in names:
        assert name in msg, f"{msg!r} does not name {name!r}"
    for form in shown(value):
        assert form not in msg.removeprefix(f"{verb}: ").split(" must ", 1)[-1], f"{msg!r} echoes the bad value {form!r}"
    assert snapshot(r) == before, f"{msg!r}: the keyspace changed"
    return msg


BAD_NAMES = {
    "empty": "",
    "257 bytes": "a" * 257,
    "257 bytes of UTF-8": "é" * 128 + "a",
    "newline": "a\nb",
    "tab": "a\tb",
    "NUL": "\x00",
    "DEL": "a\x7f",
    "C1 control": "a\x85b",
}


# ---------------------------------------------------------------------------
# Queue.add, Queue.add_many
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_add_bad_id(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.add("x", id=bad), "Queue.add", "id")
    check(r, lambda: q.add_many([b"fine", {"data": "x", "id": bad}]), "Queue.add_many", "id")


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_add_bad_lane(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.add("x", lane=bad), "Queue.add", "lane")
    check(r, lambda: q.add("x", lane=bad, delay=HOUR), "Queue.add", "lane")
    check(r, lambda: q.add_many([{"data": "x", "lane": "A"}, {"data": "x", "lane": bad}]), "Queue.add_many", "lane")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"delay": -1}, "delay"),
        ({"delay": -0.5}, "delay"),
        ({"delay": datetime.timedelta(seconds=-1)}, "delay"),
        ({"delay": math.nan}, "delay"),
        ({"delay": math.inf}, "delay"),
        ({"at": -1}, "at"),
        ({"at": math.nan}, "at"),
        ({"at": datetime.date(2030, 1, 1)}, "at"),
        ({"at": "2030-01-01"}, "at"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"delay": "10"}, "delay"),
        ({"delay": None}, "delay"),
        ({"delay": True}, "delay"),
        ({"delay": [1]}, "delay"),
        ({"at": True}, "at"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 2.0}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"id": 5}, "id"),
        ({"id": b"bytes-id"}, "id"),
        ({"lane": 7}, "lane"),
        ({"lane": b"A"}, "lane"),
    ],
    ids=repr,
)
def test_add_bad_arguments(seeded, r, kwargs, name):
    q, _ = seeded
    [value] = kwargs.values()
    check(r, lambda: q.add("x", **kwargs), "Queue.add", name, value=value)
    check(r, lambda: q.add_many([b"fine", {"data": "x", **kwargs}]), "Queue.add_many", name, value=value)


def test_add_at_with_delay(seeded, r):
    q, _ = seeded
    check(r, lambda: q.add("x", at=5, delay=0.01), "Queue.add", "at", "delay")
    check(
        r,
        lambda: q.add("x", at=datetime.datetime.now(datetime.timezone.utc), delay=datetime.timedelta(seconds=1)),
        "Queue.add",
        "at",
        "delay",
    )


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_attempts": 2**32}, "max_attempts"),
        ({"max_attempts": 2**70}, "max_attempts"),
        ({"delay": 2**64}, "delay"),
        ({"delay": 10**400}, "delay"),
        ({"delay": datetime.timedelta(days=999_999_999)}, "delay"),
        ({"at": 2**63}, "at"),
        ({"at": 10**13}, "at"),
    ],
    ids=repr,
)
def test_add_out_of_range_numbers(seeded, r, kwargs, name):
    """Numbers too large for the core are argument errors too (SPEC §10), not a
    bare OverflowError, and a due time past the latest a plan writes is refused,
    not saturated."""
    q, _ = seeded
    check(r, lambda: q.add("x", **kwargs), "Queue.add", name)


@pytest.mark.parametrize("data", [5, None, 1.5, ["x"], {"a": 1}, object()], ids=lambda d: type(d).__name__)
def test_add_data_of_the_wrong_type(seeded, r, data):
    q, _ = seeded
    check(r, lambda: q.add(data), "Queue.add", "data")
    check(r, lambda: q.add_many([b"fine", {"data": data}]), "Queue.add_many", "data")


def test_add_many_item_shapes(seeded, r):
    q, _ = seeded
    check(r, lambda: q.add_many([b"fine", {"lane": "A"}]), "Queue.add_many", "data")
    check(r, lambda: q.add_many([b"fine", {"data": "x", "weight": 1}]), "Queue.add_many", "weight")
    check(r, lambda: q.add_many([b"fine", {"data": "x", "priority": 10}]), "Queue.add_many", "priority")
    check(r, lambda: q.add_many([{"data": "x", "id": "k"}, {"data": "y", "id": "k"}]), "Queue.add_many", "id")
    check(r, lambda: q.add_many([b"fine", 42]), "Queue.add_many", "data")
    check(r, lambda: q.add_many(5), "Queue.add_many", "jobs")
    check(r, lambda: q.add_many([b"fine"], max_attempts=0), "Queue.add_many", "max_attempts")


def test_duplicate_ids_write_nothing(seeded, r):
    q, _ = seeded
    for existing in ["s", "p", "l", "h", "d", "c"]:
        before = snapshot(r)
        with pytest.raises(emq.DuplicateJobError) as e:
            q.add_many([{"data": b"new", "id": "brand-new", "lane": "Z"}, {"data": b"x", "id": existing}])
        assert str(e.value).startswith("Queue.add_many: ")
        assert snapshot(r) == before


# ---------------------------------------------------------------------------
# Queue.claim
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, 1.5, True, False, "1", None])
def test_claim_bad_n(seeded, r, n):
    q, _ = seeded
    check(r, lambda: q.claim(n), "Queue.claim", "n", value=n)


@pytest.mark.parametrize("lease", [0, -5, True, 0.0, -0.001, math.inf, math.nan, "100", None, datetime.timedelta(0)], ids=repr)
def test_claim_bad_lease(seeded, r, lease):
    q, _ = seeded
    check(r, lambda: q.claim(1, lease=lease), "Queue.claim", "lease", value=lease)


@pytest.mark.parametrize("kwargs, name", [({"n": 2**64}, "n"), ({"lease": 2**64}, "lease")])
def test_claim_out_of_range_integers(seeded, r, kwargs, name):
    q, _ = seeded
    kwargs = dict(kwargs)  # the parameter is shared by both servers' runs
    n = kwargs.pop("n", 1)
    check(r, lambda: q.claim(n, **kwargs), "Queue.claim", name)


# ---------------------------------------------------------------------------
# Queue.extend / Queue.complete / Queue.fail
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lease", [0, -1, True, -1.5, "1000", None], ids=repr)
def test_extend_bad_lease(seeded, r, lease):
    q, held = seeded
    check(r, lambda: q.extend(held, lease), "Queue.extend", "lease", value=lease)


def test_extend_out_of_range_lease(seeded, r):
    q, held = seeded
    check(r, lambda: q.extend(held, 2**64), "Queue.extend", "lease")


@pytest.mark.parametrize("retry", [-1, True, -1.5, "0", math.nan], ids=repr)
def test_fail_bad_retry(seeded, r, retry):
    q, held = seeded
    check(r, lambda: q.fail(held, "e", retry_in=retry), "Queue.fail", "retry_in", value=retry)


def test_fail_out_of_range_retry(seeded, r):
    q, held = seeded
    check(r, lambda: q.fail(held, "e", retry_in=2**64), "Queue.fail", "retry_in")


@pytest.mark.parametrize("error", [5, None, ["e"]], ids=lambda e: type(e).__name__)
def test_fail_error_of_the_wrong_type(seeded, r, error):
    q, held = seeded
    check(r, lambda: q.fail(held, error), "Queue.fail", "error")


@pytest.mark.parametrize(
    "verb, call",
    [
        ("Queue.extend", lambda q, j: q.extend(j, 1)),
        ("Queue.complete", lambda q, j: q.complete(j)),
        ("Queue.fail", lambda q, j: q.fail(j, "e")),
    ],
)
def test_settle_needs_a_held_job(seeded, r, verb, call):
    q, held = seeded
    check(r, lambda: call(q, "h"), verb, "job")
    check(r, lambda: call(q, None), verb, "job")
    check(r, lambda: call(q, {"id": "h", "token": held.token}), verb, "job")
    check(r, lambda: call(q, emq.Job(id="h", data=b"", lane="A")), verb, "job", "token")
    check(r, lambda: call(q, emq.Job(id="h", data=b"", lane="A", token="")), verb, "job", "token")


@pytest.mark.parametrize(
    "verb, call, refused",
    [
        ("Queue.extend", lambda q, j: q.extend(j, 1), False),
        ("Queue.complete", lambda q, j: q.complete(j), False),
        ("Queue.fail", lambda q, j: q.fail(j, "e", retry_in=0), emq.FailOutcome.REFUSED),
        ("Queue.fail", lambda q, j: q.fail(j, "e"), emq.FailOutcome.REFUSED),
    ],
)
def test_unknown_ids_and_forged_tokens_are_refused(seeded, r, verb, call, refused):
    q, held = seeded
    forged = [
        emq.Job(id="h", data=b"", lane="A", token="f" * 32),  # the held job, a forged token
        emq.Job(id="h", data=b"", lane="A", token=held.token + "x"),
        emq.Job(id="nobody", data=b"", token=held.token),  # no such job
        emq.Job(id="p", data=b"", token=held.token),  # pending: not active
        emq.Job(id="s", data=b"", token=held.token),  # scheduled
        emq.Job(id="d", data=b"", token=held.token),  # dead
        emq.Job(id="c", data=b"", token=held.token),  # done
    ]
    for j in forged:
        before = snapshot(r)
        assert call(q, j) == refused, (verb, j.id[:20])
        assert snapshot(r) == before, (verb, j.id[:20])
    # ids no job can have (SPEC §1) are refused at the boundary
    for j in [emq.Job(id="a" * 300, data=b"", token="t"), emq.Job(id="a\nb", data=b"", token="t")]:
        check(r, lambda: call(q, j), verb, "job id")  # noqa: B023 - called at once
    assert q.complete(held) is True


def test_a_job_that_names_another_lane_than_its_row(seeded, r):
    """The right token with the wrong lane: an argument error, nothing written."""
    q, held = seeded
    for lane in ["B", None]:
        j = emq.Job(id=held.id, data=b"", lane=lane, token=held.token)
        check(r, lambda: q.complete(j), "Queue.complete", "lane")  # noqa: B023 - called at once
        check(r, lambda: q.fail(j, "e", retry_in=0), "Queue.fail", "lane")  # noqa: B023 - called at once
        check(r, lambda: q.extend(j, 1), "Queue.extend", "lane")  # noqa: B023 - called at once
    assert q.complete(held) is True


# ---------------------------------------------------------------------------
# Queue.pause_lane, Queue.resume_lane, Queue.set_lane_limit
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_lane_control_bad_lane_names(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.pause_lane(bad), "Queue.pause_lane", "lane")
    check(r, lambda: q.resume_lane(bad), "Queue.resume_lane", "lane")
    check(r, lambda: q.set_lane_limit(bad, 1), "Queue.set_lane_limit", "lane")


@pytest.mark.parametrize("lane", [None, 5, b"A"], ids=repr)
def test_lane_control_lane_of_the_wrong_type(seeded, r, lane):
    q, _ = seeded
    check(r, lambda: q.pause_lane(lane), "Queue.pause_lane", "lane")
    check(r, lambda: q.resume_lane(lane), "Queue.resume_lane", "lane")
    check(r, lambda: q.set_lane_limit(lane, 1), "Queue.set_lane_limit", "lane")


@pytest.mark.parametrize("n", [-1, True, 1.5, "2", None, 2**64])
def test_lane_limit_bad_n(seeded, r, n):
    q, _ = seeded
    check(r, lambda: q.set_lane_limit("B", n), "Queue.set_lane_limit", "n", value=n)


# ---------------------------------------------------------------------------
# Every call: its bad arguments name it and the argument, never the value
# ---------------------------------------------------------------------------

SECRET = "s3cret\nvalue"  # a bad name (a control character in it); no message may show it
NUMBER = -12345  # a bad number; no message may show it

EVERY_CALL = [
    ("Queue.add", "data", lambda q, j, v: q.add(v), -NUMBER),
    ("Queue.add", "id", lambda q, j, v: q.add("x", id=v), SECRET),
    ("Queue.add", "delay", lambda q, j, v: q.add("x", delay=v), NUMBER),
    ("Queue.add", "at", lambda q, j, v: q.add("x", at=v), NUMBER),
    ("Queue.add", "lane", lambda q, j, v: q.add("x", lane=v), SECRET),
    ("Queue.add", "max_attempts", lambda q, j, v: q.add("x", max_attempts=v), NUMBER),
    ("Queue.add_many", "jobs", lambda q, j, v: q.add_many(v), -NUMBER),
    ("Queue.add_many", "id", lambda q, j, v: q.add_many([{"data": "x", "id": v}]), SECRET),
    ("Queue.add_many", "delay", lambda q, j, v: q.add_many([{"data": "x", "delay": v}]), NUMBER),
    ("Queue.add_many", "max_attempts", lambda q, j, v: q.add_many([b"x"], max_attempts=v), NUMBER),
    ("Queue.claim", "n", lambda q, j, v: q.claim(v), NUMBER),
    ("Queue.claim", "lease", lambda q, j, v: q.claim(1, lease=v), NUMBER),
    ("Queue.extend", "job", lambda q, j, v: q.extend(v, 1), SECRET),
    ("Queue.extend", "lease", lambda q, j, v: q.extend(j, v), NUMBER),
    ("Queue.extend_many", "jobs", lambda q, j, v: q.extend_many(v, 1), SECRET),
    ("Queue.extend_many", "lease", lambda q, j, v: q.extend_many([j], v), NUMBER),
    ("Queue.complete", "job", lambda q, j, v: q.complete(v), SECRET),
    ("Queue.complete_many", "jobs", lambda q, j, v: q.complete_many(v), SECRET),
    ("Queue.complete_many", "job", lambda q, j, v: q.complete_many([j, v]), SECRET),
    ("Queue.complete_and_claim", "jobs", lambda q, j, v: q.complete_and_claim(v, 1), SECRET),
    ("Queue.complete_and_claim", "n", lambda q, j, v: q.complete_and_claim([j], v), NUMBER),
    ("Queue.complete_and_claim", "lease", lambda q, j, v: q.complete_and_claim([j], 1, lease=v), NUMBER),
    ("Queue.fail", "job", lambda q, j, v: q.fail(v, "e"), SECRET),
    ("Queue.fail", "error", lambda q, j, v: q.fail(j, v), -NUMBER),
    ("Queue.fail", "retry_in", lambda q, j, v: q.fail(j, "e", retry_in=v), NUMBER),
    ("Queue.settle_many", "items", lambda q, j, v: q.settle_many(v), SECRET),
    ("Queue.settle_many", "job", lambda q, j, v: q.settle_many([v]), SECRET),
    ("Queue.settle_many", "error", lambda q, j, v: q.settle_many([(j, v)]), -NUMBER),
    ("Queue.settle_many", "retry_in", lambda q, j, v: q.settle_many([(j, "e", v)]), NUMBER),
    ("Queue.pause_lane", "lane", lambda q, j, v: q.pause_lane(v), SECRET),
    ("Queue.resume_lane", "lane", lambda q, j, v: q.resume_lane(v), SECRET),
    ("Queue.set_lane_limit", "lane", lambda q, j, v: q.set_lane_limit(v, 1), SECRET),
    ("Queue.set_lane_limit", "n", lambda q, j, v: q.set_lane_limit("B", v), NUMBER),
    ("Queue.get", "id", lambda q, j, v: q.get(v), SECRET),
    ("Queue.set_retention", "keep_done", lambda q, j, v: q.set_retention(keep_done=v), NUMBER),
    ("Queue.set_retention", "keep_dead", lambda q, j, v: q.set_retention(keep_dead=v), NUMBER),
    ("Queue.set_retention", "max_dead", lambda q, j, v: q.set_retention(keep_done=1, max_dead=v), NUMBER),
    ("Queue.promote", "batch", lambda q, j, v: q.promote(batch=v), NUMBER),
    ("Queue.promote", "backend", lambda q, j, v: q.promote(backend=v), SECRET),
    ("Queue.promote", "group", lambda q, j, v: q.promote(group=v), NUMBER),
    ("Queue.stalled_check", "max_stalled", lambda q, j, v: q.stalled_check(max_stalled=v), NUMBER),
    ("Queue.stalled_check", "batch", lambda q, j, v: q.stalled_check(batch=v), NUMBER),
    ("Queue.stalled_check", "backend", lambda q, j, v: q.stalled_check(backend=v), SECRET),
    ("emq.promote", "queue", lambda q, j, v: emq.promote(q.client, v), SECRET),
    ("emq.promote", "batch", lambda q, j, v: emq.promote(q.client, Q, batch=v), NUMBER),
    ("emq.stalled_check", "queue", lambda q, j, v: emq.stalled_check(q.client, v), SECRET),
    ("emq.stalled_check", "max_stalled", lambda q, j, v: emq.stalled_check(q.client, Q, max_stalled=v), NUMBER),
    ("emq.Queue", "client", lambda q, j, v: emq.Queue(v, Q), -NUMBER),
    ("emq.Queue", "name", lambda q, j, v: emq.Queue(q.client, v), SECRET),
    ("emq.Queue", "backend", lambda q, j, v: emq.Queue(q.client, Q, backend=v), SECRET),
    ("emq.connect", "read_timeout", lambda q, j, v: emq.connect(q.client.address, read_timeout=v), NUMBER),
    ("emq.connect", "spin", lambda q, j, v: emq.connect(q.client.address, spin=v), NUMBER),
    ("emq.Worker", "lease", lambda q, j, v: emq.Worker(q, print, lease=v), NUMBER),
    ("emq.Stalled", "interval", lambda q, j, v: emq.Stalled(q, interval=v), NUMBER),
]


@pytest.mark.parametrize("verb, name, call, value", EVERY_CALL, ids=[f"{v} {n}" for v, n, _, _ in EVERY_CALL])
def test_every_call_names_itself_and_the_argument_never_the_value(seeded, r, verb, name, call, value):
    """Each call's bad argument raises `ArgumentError` that starts with the call
    the user made (not a wire verb such as `EMQ.ADD`) and names the argument; a
    message that quoted the value would leak what may be a secret (a broken
    version showed `not -12345`, or the id itself); nothing is written."""
    q, held = seeded
    msg = check(r, lambda: call(q, held, value), verb, name)
    assert "s3cret" not in msg and "12345" not in msg, f"{msg!r} echoes the value"
    assert "EMQ." not in msg, f"{msg!r} names a wire verb, not the call"

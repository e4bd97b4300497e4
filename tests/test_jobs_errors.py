"""Bad input to the job's operations writes nothing (SPEC §7, §10).

Each case runs on a queue seeded with a job in every place (scheduled, pending,
a lane, active, dead, done) and compares the whole keyspace before and after
(`snapshot`). Bad arguments raise `emq.ArgumentError` (a `ValueError`) whose
message names the verb (EMQ.ADD, EMQ.CLAIM, EMQ.EXTEND, EMQ.COMPLETE, EMQ.FAIL,
EMQ.LANE) and the argument; an unknown id or a forged token is not an error but
a refusal (False / "refused"), and writes nothing either.

No test here sleeps or depends on the clock: the seeded jobs are due an hour
from now or ready at once, and leases are an hour long.
"""

from __future__ import annotations

import pytest

import emq
from test_jobs_model import assert_invariants, snapshot

Q = "errs"
P = f"emq:{{{Q}}}:"
HOUR = 3_600_000


@pytest.fixture
def seeded(client, r):
    """A queue with a job in every place, and the Job a worker holds."""
    q = emq.Queue(client, Q)
    q.add("scheduled", id="s", delay_ms=HOUR)
    q.add("dead", id="d", max_attempts=1)
    q.add("done", id="c")
    q.add("held", id="h", lane="A")
    [jd] = q.claim(1, lease_ms=HOUR)
    assert q.fail(jd, "bye", retry_in_ms=0) == "dead"
    [jc] = q.claim(1, lease_ms=HOUR)
    assert q.complete(jc)
    [held] = q.claim(1, lease_ms=HOUR)
    assert held.id == "h"
    q.set_lane_limit("B", 2)
    q.pause_lane("C")
    q.add("pending", id="p")
    q.add("lane", id="l", lane="B")
    q.add("paused", id="pc", lane="C")
    assert_invariants(r, P)
    return q, held


def check(r, call, verb: str, *names: str):
    """`call()` raises ArgumentError naming the verb and each of `names`, and
    writes nothing."""
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError) as e:
        call()
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert verb in msg, f"{msg!r} does not name {verb}"
    for name in names:
        assert name in msg, f"{msg!r} does not name {name!r}"
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
# EMQ.ADD
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_add_bad_id(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.add("x", id=bad), "EMQ.ADD", "id")
    check(r, lambda: q.add_many([b"fine", {"data": "x", "id": bad}]), "EMQ.ADD", "id")


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_add_bad_lane(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.add("x", lane=bad), "EMQ.ADD", "lane")
    check(r, lambda: q.add("x", lane=bad, delay_ms=HOUR), "EMQ.ADD", "lane")
    check(r, lambda: q.add_many([{"data": "x", "lane": "A"}, {"data": "x", "lane": bad}]), "EMQ.ADD", "lane")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"delay_ms": -1}, "delay_ms"),
        ({"at_ms": -1}, "at_ms"),
        ({"max_attempts": 0}, "max_attempts"),
        ({"max_attempts": -3}, "max_attempts"),
        ({"delay_ms": 1.5}, "delay_ms"),
        ({"delay_ms": "10"}, "delay_ms"),
        ({"delay_ms": None}, "delay_ms"),
        ({"delay_ms": True}, "delay_ms"),
        ({"at_ms": True}, "at_ms"),
        ({"at_ms": 1.0}, "at_ms"),
        ({"max_attempts": True}, "max_attempts"),
        ({"max_attempts": 2.0}, "max_attempts"),
        ({"max_attempts": "3"}, "max_attempts"),
        ({"id": 5}, "id"),
        ({"id": b"bytes-id"}, "id"),
        ({"lane": 7}, "lane"),
        ({"lane": b"A"}, "lane"),
    ],
)
def test_add_bad_arguments(seeded, r, kwargs, name):
    q, _ = seeded
    check(r, lambda: q.add("x", **kwargs), "EMQ.ADD", name)
    check(r, lambda: q.add_many([b"fine", {"data": "x", **kwargs}]), "EMQ.ADD", name)


def test_add_at_with_delay(seeded, r):
    q, _ = seeded
    check(r, lambda: q.add("x", at_ms=5, delay_ms=10), "EMQ.ADD", "at_ms", "delay_ms")


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"max_attempts": 2**32}, "max_attempts"),
        ({"max_attempts": 2**70}, "max_attempts"),
        ({"delay_ms": 2**64}, "delay_ms"),
        ({"at_ms": 2**63}, "at_ms"),
    ],
)
def test_add_out_of_range_integers(seeded, r, kwargs, name):
    """Integers too large for the core are argument errors too (SPEC §10), not a
    bare OverflowError."""
    q, _ = seeded
    check(r, lambda: q.add("x", **kwargs), "EMQ.ADD", name)


@pytest.mark.parametrize("data", [5, None, 1.5, ["x"], {"a": 1}, object()], ids=lambda d: type(d).__name__)
def test_add_data_of_the_wrong_type(seeded, r, data):
    q, _ = seeded
    check(r, lambda: q.add(data), "EMQ.ADD", "data")
    check(r, lambda: q.add_many([b"fine", {"data": data}]), "EMQ.ADD", "data")


def test_add_many_item_shapes(seeded, r):
    q, _ = seeded
    check(r, lambda: q.add_many([b"fine", {"lane": "A"}]), "EMQ.ADD", "data")
    check(r, lambda: q.add_many([b"fine", {"data": "x", "priority": 1}]), "EMQ.ADD", "priority")
    check(r, lambda: q.add_many([{"data": "x", "id": "k"}, {"data": "y", "id": "k"}]), "EMQ.ADD", "id")
    check(r, lambda: q.add_many([b"fine", 42]), "EMQ.ADD", "data")


def test_duplicate_ids_write_nothing(seeded, r):
    q, _ = seeded
    for existing in ["s", "p", "l", "h", "d", "c"]:
        before = snapshot(r)
        with pytest.raises(emq.DuplicateJobError) as e:
            q.add_many([{"data": b"new", "id": "brand-new", "lane": "Z"}, {"data": b"x", "id": existing}])
        assert "EMQ.ADD" in str(e.value)
        assert snapshot(r) == before


# ---------------------------------------------------------------------------
# EMQ.CLAIM
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("n", [0, -1, 1.5, True, False, "1", None])
def test_claim_bad_n(seeded, r, n):
    q, _ = seeded
    check(r, lambda: q.claim(n), "EMQ.CLAIM", "n")


@pytest.mark.parametrize("lease_ms", [0, -5, True, 1.0, "100", None])
def test_claim_bad_lease(seeded, r, lease_ms):
    q, _ = seeded
    check(r, lambda: q.claim(1, lease_ms=lease_ms), "EMQ.CLAIM", "lease_ms")


@pytest.mark.parametrize("kwargs, name", [({"n": 2**64}, "n"), ({"lease_ms": 2**64}, "lease_ms")])
def test_claim_out_of_range_integers(seeded, r, kwargs, name):
    q, _ = seeded
    kwargs = dict(kwargs)  # the parameter is shared by both servers' runs
    n = kwargs.pop("n", 1)
    check(r, lambda: q.claim(n, **kwargs), "EMQ.CLAIM", name)


# ---------------------------------------------------------------------------
# EMQ.EXTEND / EMQ.COMPLETE / EMQ.FAIL
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("lease_ms", [0, -1, True, 1.5, "1000", None])
def test_extend_bad_lease(seeded, r, lease_ms):
    q, held = seeded
    check(r, lambda: q.extend(held, lease_ms), "EMQ.EXTEND", "lease_ms")


def test_extend_out_of_range_lease(seeded, r):
    q, held = seeded
    check(r, lambda: q.extend(held, 2**64), "EMQ.EXTEND", "lease_ms")


@pytest.mark.parametrize("retry", [-1, True, 1.5, "0"])
def test_fail_bad_retry(seeded, r, retry):
    q, held = seeded
    check(r, lambda: q.fail(held, "e", retry_in_ms=retry), "EMQ.FAIL", "retry_in_ms")


def test_fail_out_of_range_retry(seeded, r):
    q, held = seeded
    check(r, lambda: q.fail(held, "e", retry_in_ms=2**64), "EMQ.FAIL", "retry_in_ms")


@pytest.mark.parametrize("error", [5, None, ["e"]], ids=lambda e: type(e).__name__)
def test_fail_error_of_the_wrong_type(seeded, r, error):
    q, held = seeded
    check(r, lambda: q.fail(held, error), "EMQ.FAIL", "error")


@pytest.mark.parametrize(
    "verb, call",
    [
        ("EMQ.EXTEND", lambda q, j: q.extend(j, 1000)),
        ("EMQ.COMPLETE", lambda q, j: q.complete(j)),
        ("EMQ.FAIL", lambda q, j: q.fail(j, "e")),
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
        ("EMQ.EXTEND", lambda q, j: q.extend(j, 1000), False),
        ("EMQ.COMPLETE", lambda q, j: q.complete(j), False),
        ("EMQ.FAIL", lambda q, j: q.fail(j, "e", retry_in_ms=0), "refused"),
        ("EMQ.FAIL", lambda q, j: q.fail(j, "e"), "refused"),
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
        check(r, lambda: q.complete(j), "EMQ.COMPLETE", "lane")  # noqa: B023 - called at once
        check(r, lambda: q.fail(j, "e", retry_in_ms=0), "EMQ.FAIL", "lane")  # noqa: B023 - called at once
        check(r, lambda: q.extend(j, 1000), "EMQ.EXTEND", "lane")  # noqa: B023 - called at once
    assert q.complete(held) is True


# ---------------------------------------------------------------------------
# EMQ.LANE
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", list(BAD_NAMES.values()), ids=list(BAD_NAMES))
def test_lane_control_bad_lane_names(seeded, r, bad):
    q, _ = seeded
    check(r, lambda: q.pause_lane(bad), "EMQ.LANE", "lane")
    check(r, lambda: q.resume_lane(bad), "EMQ.LANE", "lane")
    check(r, lambda: q.set_lane_limit(bad, 1), "EMQ.LANE", "lane")


@pytest.mark.parametrize("lane", [None, 5, b"A"], ids=repr)
def test_lane_control_lane_of_the_wrong_type(seeded, r, lane):
    q, _ = seeded
    check(r, lambda: q.pause_lane(lane), "EMQ.LANE", "lane")
    check(r, lambda: q.resume_lane(lane), "EMQ.LANE", "lane")
    check(r, lambda: q.set_lane_limit(lane, 1), "EMQ.LANE", "lane")


@pytest.mark.parametrize("n", [-1, True, 1.5, "2", None, 2**64])
def test_lane_limit_bad_n(seeded, r, n):
    q, _ = seeded
    check(r, lambda: q.set_lane_limit("B", n), "EMQ.LANE", "n")

"""Every `str`, `int` and duration a public call takes, fed hypothesis-generated
values (lone surrogates, NUL and other control characters, braces,
300-character strings, ints past 64 bits, bools, floats, None, bytes,
timedeltas, datetimes and dates): the call succeeds or
raises `emq.ArgumentError` (a `DuplicateJobError` where the value is a good id
that is taken, a `LayoutError` for a wire form whose keys are not a queue's),
never another exception and never a crash, and a refusal writes nothing.
"""

from __future__ import annotations

import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import emq
from test_jobs_model import snapshot

Q = "bounds"

texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
    st.builds(
        lambda a, mid, b: a + mid + b,
        st.text(max_size=4),
        st.sampled_from(["\ud800", "\udfff", "\x00", "\x1f", "\x7f", "{", "}", " ", "\n", "\u2028", "é"]),
        st.text(max_size=4),
    ),
    st.text(min_size=250, max_size=300),
)
ints = st.one_of(
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, -1, 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64 - 1, 2**64, 10**400, -(10**400)]),
)
# Durations and times: timedeltas either side of zero and at their limits, datetimes, dates.
durations = st.one_of(
    st.timedeltas(min_value=datetime.timedelta(days=-2), max_value=datetime.timedelta(days=2)),
    st.sampled_from([datetime.timedelta.max, datetime.timedelta.min, datetime.timedelta(microseconds=1)]),
    st.datetimes(),
    st.dates(),
)
values = st.one_of(
    texts, ints, st.booleans(), st.none(), st.floats(), st.binary(max_size=8), st.lists(st.integers(), max_size=2), durations
)

REFUSALS = (emq.ArgumentError, emq.DuplicateJobError, emq.LayoutError)
# A timeout small but valid may run out while connecting: what it is for.
TIMEOUT_SITES = {"connect connect_timeout", "connect read_timeout", "sibling read_timeout"}


def sites(c: emq.Client, q: emq.Queue, held: emq.Job) -> dict:
    """Each call site with one argument taken from the test; the others good."""
    job = lambda **kw: emq.Job(**{"id": held.id, "data": b"", "lane": held.lane, "token": held.token, **kw})  # noqa: E731
    return {
        "connect url": lambda v: emq.connect(v),
        "connect connect_timeout": lambda v: emq.connect(q.client.address, connect_timeout=v),
        "connect read_timeout": lambda v: emq.connect(q.client.address, read_timeout=v),
        "sibling read_timeout": lambda v: c.sibling(read_timeout=v),
        "Queue name": lambda v: emq.Queue(c, v),
        "add data": lambda v: q.add(v),
        "add id": lambda v: q.add(b"x", id=v),
        "add delay": lambda v: q.add(b"x", delay=v),
        "add at": lambda v: q.add(b"x", at=v),
        "add lane": lambda v: q.add(b"x", lane=v),
        "add max_attempts": lambda v: q.add(b"x", max_attempts=v),
        "add_many item": lambda v: q.add_many([v]),
        "add_many field": lambda v: q.add_many([{"data": b"x", "id": v}]),
        "claim n": lambda v: q.claim(v),
        "claim lease": lambda v: q.claim(1, lease=v),
        "extend lease": lambda v: q.extend(held, v),
        "complete job id": lambda v: q.complete(job(id=v)),
        "complete job token": lambda v: q.complete(job(token=v)),
        "complete job lane": lambda v: q.complete(job(lane=v)),
        "fail error": lambda v: q.fail(job(token="f" * 32), v),
        "fail retry_in": lambda v: q.fail(job(token="f" * 32), "e", retry_in=v),
        "set_retention keep_done": lambda v: q.set_retention(keep_done=v),
        "set_retention max_dead": lambda v: q.set_retention(max_dead=v),
        "pause_lane lane": lambda v: q.pause_lane(v),
        "resume_lane lane": lambda v: q.resume_lane(v),
        "set_lane_limit lane": lambda v: q.set_lane_limit(v, 1),
        "set_lane_limit n": lambda v: q.set_lane_limit("L", v),
        "get id": lambda v: q.get(v),
        "promote queue": lambda v: emq.promote(c, v),
        "promote batch": lambda v: emq.promote(c, Q, batch=v),
        "promote backend": lambda v: emq.promote(c, Q, backend=v),
        "stalled_check queue": lambda v: emq.stalled_check(c, v),
        "stalled_check max_stalled": lambda v: emq.stalled_check(c, Q, max_stalled=v),
        "stalled_check batch": lambda v: emq.stalled_check(c, Q, batch=v),
        "stalled_check backend": lambda v: emq.stalled_check(c, Q, backend=v),
        "wire argument": lambda v: emq.wire(c, "EMQ.PROMOTE", "2", v, f"emq:{{{Q}}}:pending", f"emq:{{{Q}}}:", "10"),
        "wire batch": lambda v: emq.wire(c, "EMQ.PROMOTE", "2", f"emq:{{{Q}}}:schedule", f"emq:{{{Q}}}:pending", f"emq:{{{Q}}}:", v),
        "command argument": lambda v: c.command("ECHO", v),
        "Worker concurrency": lambda v: emq.Worker(q, print, concurrency=v),
        "Worker lease": lambda v: emq.Worker(q, print, lease=v),
        "Worker beat": lambda v: emq.Worker(q, print, beat=v),
        "Worker idle_beat": lambda v: emq.Worker(q, print, idle_beat=v),
        "Worker pump_batch": lambda v: emq.Worker(q, print, pump_batch=v),
        "Worker max_stalled": lambda v: emq.Worker(q, print, max_stalled=v),
        "Worker ttl": lambda v: emq.Worker(q, print, ttl=v),
        "Worker grace": lambda v: emq.Worker(q, print, grace=v),
        "Worker recovery": lambda v: emq.Worker(q, print, recovery=v),
        "Stalled interval": lambda v: emq.Stalled(q, interval=v),
        "Stalled max_stalled": lambda v: emq.Stalled(q, max_stalled=v),
        "Stalled batch": lambda v: emq.Stalled(q, batch=v),
    }


def _site_names() -> list[str]:
    dummy = emq.Job(id="h", data=b"", token="t")
    return list(sites(None, None, dummy).keys())  # type: ignore[arg-type]


@pytest.mark.parametrize("site", _site_names())
def test_every_boundary(server, r, site):
    c = emq.connect(server.url)
    q = emq.Queue(c, Q)
    q.add(b"h", id="h", lane="L")
    [held] = q.claim(1, lease=10**6)
    call = sites(c, q, held)[site]

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(v=values)
    def check(v):
        before = snapshot(r)
        try:
            call(v)
        except REFUSALS as e:
            assert snapshot(r) == before, f"{site} = {v!r}: {e!r} wrote"
            assert str(e), f"{site} = {v!r}: an error without a message"
        except (emq.TimeoutError, emq.ConnectionError) as e:
            secs = v.total_seconds() if isinstance(v, datetime.timedelta) else v
            if site not in TIMEOUT_SITES or not (isinstance(secs, (int, float)) and 0 < secs < 0.01):
                raise AssertionError(f"{site} = {v!r}: {type(e).__name__}: {e}") from e
            assert snapshot(r) == before, f"{site} = {v!r}: {e!r} wrote"
        except emq.EmqError as e:
            raise AssertionError(f"{site} = {v!r}: {type(e).__name__}: {e}") from e

    check()

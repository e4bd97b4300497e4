"""Bad input to the two sweeps (SPEC §5, §6, §10): keys of the wrong type, bad
arguments on the Python API and on the wire form, and calls with nothing due.
Every refusal must write nothing: each test first writes a state with work due
(so an implementation that wrote before refusing would change it), takes a dump
of the whole keyspace, and compares it after the call."""

from __future__ import annotations

import pytest

import emq
from test_jobs_model import snapshot
from test_sweeps_differential import WRONG, dump, write  # tests/ is on sys.path (pytest's rootdir-relative import)

BACKENDS = ["plan", "lua"]
PROMOTE = "EMQ.PROMOTE"
STALLED = "EMQ.STALLED.CHECK"
# The call the user made, which an error names (the wire form names its command).
CALL = {PROMOTE: "emq.promote", STALLED: "emq.stalled_check"}
PAST = -(10**6)
FUTURE = 10**6


def prefix(q: str) -> bytes:
    return f"emq:{{{q}}}:".encode()


def promote_state(q: str, now: int) -> dict:
    """Due: a flat row, a lane row of a servable lane not in the ring (so the
    call writes pending, the lane, lanectl, ring and wake), a ghost; one future."""
    P = prefix(q)
    return {
        P + b"schedule": (
            "zset",
            {b"f1": float(now + PAST), b"l1": float(now + PAST + 1), b"g1": float(now - 5000), b"fut": float(now + FUTURE)},
        ),
        P + b"job:f1": ("hash", {b"state": b"scheduled", b"data": b"x"}),
        P + b"job:l1": ("hash", {b"state": b"scheduled", b"lane": b"L"}),
        P + b"job:fut": ("hash", {b"state": b"scheduled"}),
        P + b"pending": ("list", [b"p0"]),
        P + b"lane:L": ("list", [b"w0"]),
        P + b"ring": ("list", [b"other"]),
        P + b"lanectl:other": ("hash", {b"ring": b"1"}),
        P + b"wake": ("list", [b""] * 3),
        P + b"dead": ("zset", {b"old": 1.0}),
    }


def stalled_state(q: str, now: int) -> dict:
    """Expired (with max_stalled=1): a flat row that recovers, a flat row that
    dies, a lane row that recovers (its lane then joins the ring), a ghost."""
    P = prefix(q)
    return {
        P + b"active": (
            "zset",
            {
                b"f1": float(now + PAST),
                b"d1": float(now + PAST + 1),
                b"l1": float(now + PAST + 2),
                b"g1": float(now - 5000),
                b"fut": float(now + FUTURE),
            },
        ),
        P + b"job:f1": ("hash", {b"state": b"active", b"token": b"t", b"lease": b"30000"}),
        P + b"job:d1": ("hash", {b"state": b"active", b"stalls": b"1", b"token": b"t"}),
        P + b"job:l1": ("hash", {b"state": b"active", b"lane": b"L", b"token": b"t"}),
        P + b"job:fut": ("hash", {b"state": b"active", b"token": b"t"}),
        P + b"lanectl:L": ("hash", {b"active": b"1", b"limit": b"1"}),
        P + b"pending": ("list", [b"p0"]),
        P + b"ring": ("list", [b"other"]),
        P + b"lanectl:other": ("hash", {b"ring": b"1"}),
        P + b"wake": ("list", [b""] * 3),
        P + b"dead": ("zset", {b"old": 1.0}),
    }


def due_everywhere(r, client, queues=("q",)) -> dict:
    """Both due states for each queue; returns the dump to compare against."""
    now = client.time_ms()
    state: dict = {}
    for q in queues:
        state.update(promote_state(q, now))
        state.update(stalled_state(q, now))  # shares pending, ring, wake, dead
    r.flushall()
    write(r, state)
    before = dump(r)
    assert before, "the due state was written"
    return before


def call(client, verb, q, backend, form, max_stalled=1):
    P = prefix(q).decode()
    if verb == PROMOTE:
        if form == "api":
            return emq.promote(client, q, backend=backend)
        return emq.wire(client, PROMOTE, "2", P + "schedule", P + "pending", P, "100", backend=backend)
    if form == "api":
        return emq.stalled_check(client, q, max_stalled=max_stalled, backend=backend)
    return emq.wire(client, STALLED, "3", P + "active", P + "pending", P + "dead", P, str(max_stalled), "100", backend=backend)


# --------------------------------------------------------------------------- wrong types

PROMOTE_TARGETS = (
    [("schedule", t) for t in ("hash", "list", "string", "set")]
    + [("pending", t) for t in ("string", "hash", "zset", "set")]
    + [("job:f1", t) for t in ("string", "list", "zset", "set")]
    + [
        ("job:l1", "list"),
        ("lane:L", "hash"),
        ("lane:L", "string"),
        ("lane:L", "zset"),
        ("lanectl:L", "string"),
        ("lanectl:L", "list"),
        ("lanectl:L", "zset"),
        ("ring", "hash"),
        ("ring", "string"),
        ("ring", "zset"),
        ("wake", "set"),
        ("wake", "string"),
        ("wake", "hash"),
        ("wake", "zset"),
    ]
)

STALLED_TARGETS = (
    [("active", t) for t in ("hash", "list", "string", "set")]
    + [("pending", t) for t in ("string", "hash")]
    + [("dead", t) for t in ("string", "list", "hash", "set")]
    + [(f"job:{i}", t) for i in ("f1", "d1", "l1") for t in ("string", "list", "zset")]
    + [
        ("job:f1", "set"),
        ("lane:L", "hash"),
        ("lane:L", "string"),
        ("lanectl:L", "string"),
        ("lanectl:L", "list"),
        ("ring", "hash"),
        ("ring", "string"),
        ("wake", "set"),
        ("wake", "string"),
        ("wake", "hash"),
    ]
)


def _refuses_wrong_type(r, client, verb, state_of, suffix, wrong, backend, form):
    q = "q"
    state = state_of(q, client.time_ms())
    state[prefix(q) + suffix.encode()] = WRONG[wrong]
    r.flushall()
    write(r, state)
    before = dump(r)
    with pytest.raises(emq.LayoutError) as e:
        call(client, verb, q, backend, form)
    msg = str(e.value)
    assert not isinstance(e.value, ValueError)
    assert msg.startswith(f"{verb if form == 'wire' else CALL[verb]}: "), msg
    assert "type" in msg, msg
    assert dump(r) == before, f"{backend} wrote before refusing ({msg})"


@pytest.mark.parametrize("form", ["api", "wire"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("suffix, wrong", PROMOTE_TARGETS)
def test_promote_wrong_type_is_a_layout_error_and_writes_nothing(r, client, suffix, wrong, backend, form):
    _refuses_wrong_type(r, client, PROMOTE, promote_state, suffix, wrong, backend, form)


@pytest.mark.parametrize("form", ["api", "wire"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("suffix, wrong", STALLED_TARGETS)
def test_stalled_wrong_type_is_a_layout_error_and_writes_nothing(r, client, suffix, wrong, backend, form):
    _refuses_wrong_type(r, client, STALLED, stalled_state, suffix, wrong, backend, form)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_refusal_leaves_the_client_usable(r, client, backend):
    """After a layout error (the plan backend refuses with rows watched), the same
    client runs the repaired call normally."""
    now = client.time_ms()
    state = promote_state("q", now)
    state[b"emq:{q}:job:f1"] = WRONG["string"]
    r.flushall()
    write(r, state)
    with pytest.raises(emq.LayoutError):
        emq.promote(client, "q", backend=backend)
    r.delete(b"emq:{q}:job:f1")
    r.hset(b"emq:{q}:job:f1", "state", "scheduled")
    assert emq.promote(client, "q", backend=backend) == 3
    assert r.lrange(b"emq:{q}:pending", 0, -1) == [b"p0", b"f1"]
    assert r.lrange(b"emq:{q}:lane:L", 0, -1) == [b"w0", b"l1"]
    assert r.lrange(b"emq:{q}:ring", 0, -1) == [b"other", b"L"]
    assert r.lrange(b"emq:{q}:wake", 0, -1) == [b""] * 3 + [b"L", b""]
    assert r.zrange(b"emq:{q}:schedule", 0, -1) == [b"fut"]


def big_state(verb: str, now: int, first: str, second: str, n: int = 250, split: int = 150) -> dict:
    """`n` due members, in order j0000, j0001, ...: the first `split` rows of
    kind `first`, the rest of kind `second` ("flat", "lane:<L>", "dies" (a flat
    row with stalls=1), "ghost"). More than one transaction's worth of rows on
    servers where the plan backend watches at most 100 rows per EXEC."""
    P = prefix("q")
    zname = b"schedule" if verb == PROMOTE else b"active"
    keys: dict = {P + zname: ("zset", {f"j{k:04d}".encode(): float(now + PAST + k) for k in range(n)})}
    for k in range(n):
        what = first if k < split else second
        if what == "ghost":
            continue
        h = {b"state": b"scheduled" if verb == PROMOTE else b"active"}
        if what.startswith("lane:"):
            h[b"lane"] = what[5:].encode()
        if what == "dies":
            h[b"stalls"] = b"1"
        keys[P + f"job:j{k:04d}".encode()] = ("hash", h)
    keys[P + b"wake"] = ("list", [b""])
    return keys


LATE = [
    # (verb, first rows, late rows, the key given a wrong type, its wrong type)
    (PROMOTE, "flat", "flat", "job:j0180", "string"),
    (PROMOTE, "flat", "flat", "job:j0249", "list"),
    (PROMOTE, "lane:L", "flat", "pending", "string"),
    (PROMOTE, "flat", "lane:M", "lane:M", "hash"),
    (PROMOTE, "flat", "lane:M", "lanectl:M", "string"),
    (PROMOTE, "flat", "lane:M", "ring", "hash"),
    (STALLED, "flat", "flat", "job:j0180", "zset"),
    (STALLED, "flat", "dies", "dead", "string"),
    (STALLED, "lane:L", "flat", "pending", "hash"),
    (STALLED, "flat", "lane:M", "lane:M", "string"),
    (STALLED, "ghost", "lane:M", "lanectl:M", "list"),
    (STALLED, "dies", "lane:M", "ring", "string"),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("verb, first, second, suffix, wrong", LATE, ids=repr)
def test_wrong_type_met_late_in_a_large_selection_writes_nothing(r, client, backend, verb, first, second, suffix, wrong):
    """SPEC §5 steps 4 to 6 and §9 ("No partial writes"): the writes of one call
    are all or none, however many rows it selected. The offending key matters
    only to rows 150 to 249 of 250 due: a backend that applies a large call in
    several transactions must still check every type before the first EXEC."""
    state = big_state(verb, client.time_ms(), first, second)
    state[prefix("q") + suffix.encode()] = WRONG[wrong]
    r.flushall()
    write(r, state)
    before = dump(r)
    with pytest.raises(emq.LayoutError) as e:
        if verb == PROMOTE:
            emq.promote(client, "q", batch=1000, backend=backend)
        else:
            emq.stalled_check(client, "q", max_stalled=1, batch=1000, backend=backend)
    assert str(e.value).startswith(f"{CALL[verb]}: ")
    after = dump(r)
    changed = [k.decode() for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    assert after == before, f"{backend} refused but changed {len(changed)} keys, e.g. {changed[:4]}"


@pytest.mark.parametrize(
    "verb, suffix, wrong, max_stalled",
    [
        # SPEC §5 step 5: only the keys "that the writes touch" must have their type.
        (PROMOTE, "ring", "hash", None),  # the due lane is already in the ring: no ring write
        (STALLED, "dead", "string", None),  # nothing dies: no write to dead
    ],
)
def test_wrong_type_of_a_key_the_call_does_not_write_both_backends_agree(r, client, verb, suffix, wrong, max_stalled):
    results = []
    now = client.time_ms()
    for backend in BACKENDS:
        state = promote_state("q", now) if verb == PROMOTE else stalled_state("q", now)
        if verb == PROMOTE:
            state[b"emq:{q}:lanectl:L"] = ("hash", {b"ring": b"1"})
        state[prefix("q") + suffix.encode()] = WRONG[wrong]
        r.flushall()
        write(r, state)
        reply = call(client, verb, "q", backend, "api", max_stalled=max_stalled)
        after = dump(r)
        assert after[prefix("q") + suffix.encode()] == WRONG[wrong]
        results.append((reply, after))
    assert results[0] == results[1]


# --------------------------------------------------------------------------- Python API arguments

BAD_BATCH = [0, -1, "10", 1.5, True, False, None]
BAD_MAX_STALLED = [-1, "x", True, 1.5, "1"]
BAD_QUEUES = ["", "a{b", "a}b", "{q}", "a b", "a\tb", "a\nb", "a\x01b", "a\u00a0b", "x" * 129, "é" * 65, 1, b"q", None]


def commands_since_reset(r) -> list[str]:
    """The commands the server ran since `CONFIG RESETSTAT` (besides that one)."""
    return sorted(k for k in r.info("commandstats") if k != "cmdstat_config|resetstat")


def _refused(r, client, fn, verb, name, queues=("q",)):
    before = due_everywhere(r, client, queues)
    r.config_resetstat()
    with pytest.raises(emq.ArgumentError) as e:
        fn()
    assert commands_since_reset(r) == [], "validation comes before anything is read (SPEC §5)"
    assert isinstance(e.value, ValueError)
    msg = str(e.value)
    assert msg.startswith(f"{CALL[verb]}: "), msg
    assert name in msg, msg
    assert dump(r) == before, "a refused call wrote"


def _queues_for(q):
    """Also write the due state under a bad queue's own prefix, so a call that
    went ahead with it would change the keyspace."""
    return ("q", q) if isinstance(q, str) else ("q",)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", BAD_BATCH, ids=repr)
def test_promote_bad_batch(r, client, backend, batch):
    _refused(r, client, lambda: emq.promote(client, "q", batch=batch, backend=backend), PROMOTE, "batch")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", BAD_BATCH, ids=repr)
def test_stalled_bad_batch(r, client, backend, batch):
    _refused(r, client, lambda: emq.stalled_check(client, "q", batch=batch, backend=backend), STALLED, "batch")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("max_stalled", BAD_MAX_STALLED, ids=repr)
def test_stalled_bad_max_stalled(r, client, backend, max_stalled):
    _refused(
        r,
        client,
        lambda: emq.stalled_check(client, "q", max_stalled=max_stalled, backend=backend),
        STALLED,
        "max_stalled",
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("queue", BAD_QUEUES, ids=repr)
def test_promote_bad_queue(r, client, backend, queue):
    _refused(r, client, lambda: emq.promote(client, queue, backend=backend), PROMOTE, "queue", _queues_for(queue))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("queue", BAD_QUEUES, ids=repr)
def test_stalled_bad_queue(r, client, backend, queue):
    _refused(r, client, lambda: emq.stalled_check(client, queue, backend=backend), STALLED, "queue", _queues_for(queue))


@pytest.mark.parametrize("backend", ["nope", ""])
def test_bad_backend(r, client, backend):
    _refused(r, client, lambda: emq.promote(client, "q", backend=backend), PROMOTE, "backend")
    _refused(r, client, lambda: emq.stalled_check(client, "q", backend=backend), STALLED, "backend")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("queue", ["x" * 128, "é" * 64, "заказы:eu", "a:b:c"])
def test_queue_names_at_the_limits_work(r, client, backend, queue):
    """The boundary of §1: 128 bytes (of UTF-8, not characters) is allowed."""
    due_everywhere(r, client, (queue,))
    assert emq.promote(client, queue, backend=backend) == 3
    assert emq.stalled_check(client, queue, backend=backend) == (["f1", "l1"], ["d1"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", [10**16, 10**17, 10**18 - 1, 2**63 - 1], ids=repr)
def test_large_batches_are_valid(r, client, backend, batch):
    """SPEC §5/§6: `batch` is any positive integer; the API takes it (it refuses
    only non-integers and values < 1), so a large one must simply take every
    due member."""
    due_everywhere(r, client)
    assert emq.promote(client, "q", batch=batch, backend=backend) == 3
    assert emq.stalled_check(client, "q", batch=batch, backend=backend) == (["f1", "l1"], ["d1"])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("batch", ["100000000000000000", "999999999999999999"])
def test_large_batches_are_valid_on_the_wire(r, client, backend, batch):
    due_everywhere(r, client)
    assert emq.wire(client, *promote_wire(batch=batch), backend=backend) == 3
    assert emq.wire(client, *stalled_wire(batch=batch), backend=backend) == [["f1", "l1"], ["d1"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_smallest_good_arguments_work(r, client, backend):
    due_everywhere(r, client)
    assert emq.promote(client, "q", batch=1, backend=backend) == 1
    assert emq.stalled_check(client, "q", max_stalled=0, batch=1, backend=backend) == ([], ["f1"])


# --------------------------------------------------------------------------- wire arguments


def promote_wire(q="q", batch="100"):
    P = prefix(q).decode()
    return [PROMOTE, "2", P + "schedule", P + "pending", P, batch]


def stalled_wire(q="q", max_stalled="1", batch="100"):
    P = prefix(q).decode()
    return [STALLED, "3", P + "active", P + "pending", P + "dead", P, max_stalled, batch]


def _with(args, i, v):
    args = list(args)
    args[i] = v
    return args


def _bad_prefix_forms(make, n_keys, suffixes):
    """The prefix argument malformed, with keys that match it textually, so the
    only thing wrong is the prefix's form (§1)."""
    out = []
    for bad in [
        "emq:q:",
        "emq:{}:",
        "emq:{q}",
        "EMQ:{q}:",
        "emq:{q}:x",
        "emq:{a b}:",
        "emq:{a{b}:",
        "emq:{a}b}:",
        "emq:{a\x01}:",
        "emq:{" + "x" * 129 + "}:",
        "",
        "q",
    ]:
        args = make()
        for k, s in enumerate(suffixes):
            args[2 + k] = bad + s
        args[2 + n_keys] = bad
        out.append((args, "prefix"))
    return out


# (args, what the message must name)
WIRE_PROMOTE_LAYOUT = (
    [
        (_with(promote_wire(), 1, "1"), "keys"),
        (_with(promote_wire(), 1, "3"), "keys"),
        (_with(promote_wire(), 1, "0"), "keys"),
        (_with(promote_wire(), 1, "02"), "keys"),
        (_with(promote_wire(), 1, "two"), "keys"),
        (_with(promote_wire(), 1, "-2"), "keys"),
        (_with(promote_wire(), 1, ""), "keys"),
        (promote_wire()[:-1], "keys"),  # batch missing
        (promote_wire()[:3] + promote_wire()[4:], "keys"),  # a key missing
        (promote_wire() + ["x"], "keys"),  # an extra argument
        (promote_wire()[:2], "keys"),  # only numkeys
        (promote_wire()[:1], "keys"),  # the verb alone
        (["EMQ.PROMOTE", "3", "emq:{q}:schedule", "emq:{q}:pending", "emq:{q}:active", "emq:{q}:", "100"], "keys"),
        (_with(_with(promote_wire(), 2, "emq:{q}:pending"), 3, "emq:{q}:schedule"), "emq:{q}:pending"),  # swapped
        (_with(promote_wire(), 3, "emq:{other}:pending"), "emq:{other}:pending"),
        (_with(promote_wire(), 2, "emq:{other}:schedule"), "emq:{other}:schedule"),
        (_with(promote_wire(), 2, "emq:{q}:sched"), "emq:{q}:sched"),
        (_with(promote_wire(), 2, "EMQ:{q}:schedule"), "EMQ:{q}:schedule"),
        (_with(promote_wire(), 2, "emq:{q}:schedule "), "emq:{q}:schedule "),
        (_with(promote_wire(), 3, "emq:{q}:active"), "emq:{q}:active"),
        (_with(promote_wire(), 4, "emq:{other}:"), "emq:{other}:"),  # keys of q, prefix of another queue
    ]
    + _bad_prefix_forms(promote_wire, 2, ["schedule", "pending"])
)

WIRE_STALLED_LAYOUT = (
    [
        (_with(stalled_wire(), 1, "2"), "keys"),
        (_with(stalled_wire(), 1, "4"), "keys"),
        (_with(stalled_wire(), 1, "03"), "keys"),
        (_with(stalled_wire(), 1, "three"), "keys"),
        (stalled_wire()[:-1], "keys"),  # batch missing
        (stalled_wire()[:-2], "keys"),  # max_stalled and batch missing
        (stalled_wire()[:4] + stalled_wire()[5:], "keys"),  # dead missing
        (stalled_wire() + ["x"], "keys"),
        (_with(_with(stalled_wire(), 3, "emq:{q}:dead"), 4, "emq:{q}:pending"), "emq:{q}:dead"),  # swapped
        (_with(stalled_wire(), 2, "emq:{q}:schedule"), "emq:{q}:schedule"),
        (_with(stalled_wire(), 4, "emq:{other}:dead"), "emq:{other}:dead"),
        (_with(stalled_wire(), 3, "emq:{q}:pendin"), "emq:{q}:pendin"),
        (_with(stalled_wire(), 5, "emq:{other}:"), "emq:{other}:"),
    ]
    + _bad_prefix_forms(stalled_wire, 3, ["active", "pending", "dead"])
)

BAD_WIRE_BATCH = ["0", "-1", "-0", "1.5", "abc", "", "+1", " 1", "1 ", "1e2", "0x10", "١"]
WIRE_ARGUMENT = (
    [(promote_wire(batch=b), PROMOTE, "batch") for b in BAD_WIRE_BATCH]
    + [(stalled_wire(batch=b), STALLED, "batch") for b in BAD_WIRE_BATCH]
    + [(stalled_wire(max_stalled=m), STALLED, "max_stalled") for m in ["-1", "x", "1.5", "+0", " 0", "None", "1e1"]]
)


def _wire_refused(r, client, args, backend, cls, verb, name):
    before = due_everywhere(r, client, ("q", "other"))
    r.config_resetstat()
    with pytest.raises(cls) as e:
        emq.wire(client, *args, backend=backend)
    assert commands_since_reset(r) == [], "validation comes before anything is read (SPEC §5)"
    msg = str(e.value)
    assert verb in msg, msg
    assert name in msg, msg
    assert dump(r) == before, "a refused call wrote"
    return e.value


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args, name", WIRE_PROMOTE_LAYOUT, ids=repr)
def test_wire_promote_layout_errors(r, client, backend, args, name):
    err = _wire_refused(r, client, args, backend, emq.LayoutError, PROMOTE, name)
    assert not isinstance(err, ValueError)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args, name", WIRE_STALLED_LAYOUT, ids=repr)
def test_wire_stalled_layout_errors(r, client, backend, args, name):
    err = _wire_refused(r, client, args, backend, emq.LayoutError, STALLED, name)
    assert not isinstance(err, ValueError)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args, verb, name", WIRE_ARGUMENT, ids=repr)
def test_wire_argument_errors_name_the_argument(r, client, backend, args, verb, name):
    err = _wire_refused(r, client, args, backend, emq.ArgumentError, verb, name)
    assert isinstance(err, ValueError)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("args", [[], ["EMQ.NOPE", "0"], ["PROMOTE"] + promote_wire()[1:], ["EVALSHA"]], ids=repr)
def test_wire_unknown_command_is_refused(r, client, backend, args):
    before = due_everywhere(r, client)
    with pytest.raises(emq.EmqError):
        emq.wire(client, *args, backend=backend)
    assert dump(r) == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_wire_good_forms_work(r, client, backend):
    """The positive controls of the tables above (bytes arguments too)."""
    due_everywhere(r, client)
    assert emq.wire(client, *[a.encode() for a in promote_wire(batch="1")], backend=backend) == 1
    assert emq.wire(client, *promote_wire(batch="2"), backend=backend) == 2
    assert emq.wire(client, *stalled_wire(max_stalled="0", batch="1"), backend=backend) == [[], ["f1"]]
    assert emq.wire(client, *stalled_wire(max_stalled="1"), backend=backend) == [["l1"], ["d1"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_wire_empty_max_stalled_means_no_limit(r, client, backend):
    """An empty `max_stalled` is no limit (as the Lua tail and the module take
    it, SPEC §6): every expired job is recovered, none dies."""
    due_everywhere(r, client)
    recovered, dead = emq.wire(client, *stalled_wire(max_stalled=""), backend=backend)
    assert recovered and dead == []


# --------------------------------------------------------------------------- nothing due


@pytest.mark.parametrize("form", ["api", "wire"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_keyspace_nothing_written(r, client, backend, form):
    """SPEC §5 step 3, §6 step 3: nothing due, reply 0 / [[], []], nothing
    written: not even `wake` (or its trim)."""
    r.flushall()
    assert call(client, PROMOTE, "q", backend, form) == 0
    reply = call(client, STALLED, "q", backend, form)
    assert list(map(list, reply)) == [[], []]
    if form == "api":
        assert reply == ([], [])
        assert emq.stalled_check(client, "q", max_stalled=None, backend=backend) == ([], [])
    assert dump(r) == {}


@pytest.mark.parametrize("form", ["api", "wire"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_only_future_members_nothing_written(r, client, backend, form):
    """Schedule and active hold only future members, wake is over its cap (a
    call that wrote would trim it), lanes are stranded: still nothing is written."""
    now = client.time_ms()
    P = prefix("q")
    state = {
        P + b"schedule": ("zset", {b"a": float(now + FUTURE), b"b": float("inf")}),
        P + b"active": ("zset", {b"a": float(now + FUTURE), b"c": float(now + 2 * FUTURE)}),
        P + b"job:a": ("hash", {b"state": b"scheduled", b"lane": b"L"}),
        P + b"job:c": ("hash", {b"state": b"active", b"lane": b"L", b"stalls": b"9"}),
        P + b"lane:L": ("list", [b"x"]),
        P + b"pending": ("list", [b"y"]),
        P + b"wake": ("list", [b""] * 70),
        P + b"dead": ("zset", {b"old": 1.0}),
    }
    r.flushall()
    write(r, state)
    before = dump(r)
    assert call(client, PROMOTE, "q", backend, form) == 0
    assert list(map(list, call(client, STALLED, "q", backend, form, max_stalled=0))) == [[], []]
    assert dump(r) == before


@pytest.mark.parametrize("backend", BACKENDS)
def test_nothing_due_in_this_queue_while_another_has_work(r, client, backend):
    """Another queue's due work is not this queue's: nothing written anywhere."""
    before = due_everywhere(r, client, ("other",))
    assert emq.promote(client, "q", backend=backend) == 0
    assert emq.stalled_check(client, "q", max_stalled=0, backend=backend) == ([], [])
    assert dump(r) == before


# ---------------------------------------------------------------------------
# Groups (SPEC §9): every check of a call's input before its first EXEC.


@pytest.mark.parametrize("kind", ["promote", "stalled"])
@pytest.mark.parametrize("bad", ["last row a string", "pending a string"])
def test_bad_input_in_a_later_group_writes_nothing_at_all(r, client, kind, bad):
    """A call applied one row a transaction (`group=1`) with bad input that only
    its last group would meet: it refuses before its first EXEC, and writes
    nothing; the script called again and again with `batch=1`, as the groups are,
    writes the first rows before it meets it."""
    P = "emq:{grp}:"
    zset, state = ("schedule", "scheduled") if kind == "promote" else ("active", "active")

    def seed():
        r.flushall()
        for i in range(3):
            r.hset(f"{P}job:j{i}", mapping={"state": state, "lane": "L"})
            r.zadd(P + zset, {f"j{i}": 1000 + i})
        if bad == "last row a string":
            r.delete(f"{P}job:j2")
            r.set(f"{P}job:j2", "not a row")
        else:
            r.set(P + "pending", "not a list")

    def call(backend, batch, group=None):
        if kind == "promote":
            return emq.promote(client, "grp", batch=batch, backend=backend, group=group)
        return emq.stalled_check(client, "grp", max_stalled=None, batch=batch, backend=backend, group=group)

    seed()
    before = snapshot(r)
    with pytest.raises(emq.LayoutError) as e:
        call("plan", 3, group=1)
    assert str(e.value).startswith("emq.promote: " if kind == "promote" else "emq.stalled_check: ")
    assert snapshot(r) == before, "a grouped call wrote before refusing"
    if bad == "last row a string":
        seed()
        call("lua", 1)  # the first group's rows, one call of the script: it writes
        assert snapshot(r) != before


def test_a_retention_of_the_wrong_type_that_only_a_later_groups_death_meets_writes_nothing(r, client):
    """A stalled check in groups of one that may kill (max_stalled=0): the first
    member is a ghost (removed, no death), the second dies, so only the second
    group would trim `dead` by `P retention`, here a list. The call refuses before
    its first EXEC and writes nothing (found by the differential tests)."""
    P = "emq:{grp}:"
    r.flushall()
    r.zadd(P + "active", {"0": 1000, "00": 1000})
    r.hset(P + "job:00", mapping={"state": "active", "attempts": "1"})
    r.rpush(P + "retention", "x")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError) as e:
        emq.stalled_check(client, "grp", max_stalled=0, batch=2, group=1)
    assert "retention" in str(e.value), e.value
    assert snapshot(r) == before, "a grouped call wrote before refusing"

"""The call format (emq.tasks.codec): every value emq writes comes back, by the
task's annotation, as the same type and value; JSON that another client wrote
(plain values) reads; a value emq cannot write, and a call it cannot read, is an
error that names the task and the argument, never the value. No server: the codec
is pure."""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
import uuid
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Annotated, Any, Literal, NewType, Optional, Union

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import emq
from emq.tasks.codec import (
    FORMAT_VERSION,
    RESULT_LIMIT,
    Call,
    Parameters,
    decode_call,
    decode_result,
    encode_call,
    encode_result,
    from_json,
    to_json,
)

# -- the types of the round trip ------------------------------------------------------


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 9


UserId = NewType("UserId", int)


@dataclasses.dataclass(frozen=True)
class Inner:
    code: str
    at: date | None = None


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    when: datetime
    tags: tuple[str, ...]
    inner: Inner | None
    color: Color = Color.RED


class Item(pydantic.BaseModel):
    sku: str
    price: Decimal
    shipped: datetime | None = None


class Order(pydantic.BaseModel):
    id: uuid.UUID
    placed: datetime
    items: list[Item]
    count: int = 0


class Duck:
    """A pydantic-style model that is not pydantic: the two methods are the contract."""

    def __init__(self, n: int, label: str):
        self.n, self.label = n, label

    def model_dump(self, mode: str = "python") -> dict[str, Any]:
        assert mode == "json"
        return {"n": self.n, "label": self.label}

    @classmethod
    def model_validate(cls, value: Any) -> Duck:
        if not isinstance(value, dict) or not isinstance(value.get("n"), int):
            raise ValueError("not a Duck")
        return cls(value["n"], value["label"])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Duck) and (self.n, self.label) == (other.n, other.label)

    __hash__ = None  # type: ignore[assignment]


# Offsets to the second (historic local mean times have seconds); Python's own
# fromisoformat drops an offset under a second, which no time zone has.
offsets = st.integers(-86_399, 86_399).map(lambda s: timezone(timedelta(seconds=s)))
# pydantic writes an offset to the minute (its limit, not emq's): its models get those.
minute_offsets = st.integers(-23 * 60 - 59, 23 * 60 + 59).map(lambda m: timezone(timedelta(minutes=m)))
# Years where Python can compare any two aware datetimes (near year 1 and 9999 an
# offset pushes the UTC instant out of range): a limit of the comparison, not of emq.
datetimes = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.none() | offsets)
model_datetimes = st.datetimes(min_value=datetime(2, 1, 1), max_value=datetime(9998, 12, 31), timezones=st.none() | minute_offsets)
# timedelta writes seconds as a float: exact to the microsecond within about ±270 years
# (docs/tasks.md); whole seconds are an int, exact at any size.
short_timedeltas = st.timedeltas(min_value=timedelta(days=-98_000), max_value=timedelta(days=98_000))
# timedelta.min is -999999999 days: -86_399_999_913_600 s
whole_timedeltas = st.integers(-86_399_999_913_600, 86_399_999_999_999).map(lambda s: timedelta(seconds=s))

LEAVES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers()),
    (float, st.floats(allow_nan=False, allow_infinity=False)),
    (str, st.text()),
    (bool, st.booleans()),
    (type(None), st.none()),
    (datetime, datetimes),
    (date, st.dates()),
    (time, st.times(timezones=st.none() | offsets)),
    (timedelta, short_timedeltas | whole_timedeltas),
    (uuid.UUID, st.uuids()),
    (Decimal, st.decimals(allow_nan=False)),
    (bytes, st.binary()),
    (bytearray, st.binary().map(bytearray)),
    (Color, st.sampled_from(Color)),
    (Level, st.sampled_from(Level)),
    (Literal["a", "b", 3, True], st.sampled_from(["a", "b", 3, True])),
    (Literal[Color.GREEN], st.just(Color.GREEN)),
    (Annotated[int, "meta"], st.integers()),
    (UserId, st.integers()),
    (Any, st.integers() | st.text()),
]
HASHABLE: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers()),
    (str, st.text()),
    (uuid.UUID, st.uuids()),
    (date, st.dates()),
    (Color, st.sampled_from(Color)),
]
KEYS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (str, st.text()),
    (int, st.integers()),
    (uuid.UUID, st.uuids()),
    (Color, st.sampled_from(Color)),
    (Level, st.sampled_from(Level)),
    (date, st.dates()),
    (bool, st.booleans()),
]
RECORDS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (
        Point,
        st.builds(
            Point,
            x=st.integers(),
            when=datetimes,
            tags=st.lists(st.text(), max_size=3).map(tuple),
            inner=st.none() | st.builds(Inner, code=st.text(), at=st.none() | st.dates()),
            color=st.sampled_from(Color),
        ),
    ),
    (
        Order,
        st.builds(
            Order,
            id=st.uuids(),
            placed=model_datetimes,
            items=st.lists(
                st.builds(
                    Item,
                    sku=st.text(),
                    price=st.decimals(allow_nan=False, allow_infinity=False, places=2, max_value=10**9, min_value=-(10**9)),
                    shipped=st.none() | model_datetimes,
                ),
                max_size=3,
            ),
            count=st.integers(-(2**63), 2**63 - 1),
        ),
    ),
    (Duck, st.builds(Duck, st.integers(), st.text())),
]


def annotated_values(depth: int = 2) -> st.SearchStrategy[tuple[Any, Any]]:
    """`(annotation, value)` pairs: the leaves and records, containers of them, sets
    and unions, nested up to `depth`."""
    leaf = st.sampled_from(LEAVES + RECORDS).flatmap(lambda hv: st.tuples(st.just(hv[0]), hv[1]))
    sets = st.sampled_from(HASHABLE).flatmap(
        lambda hv: st.one_of(
            st.sets(hv[1], max_size=4).map(lambda v: (set[hv[0]], v)),
            st.frozensets(hv[1], max_size=4).map(lambda v: (frozenset[hv[0]], v)),
        )
    )
    unions = st.one_of(
        # typing.Union's spelling and the `|` one (types.UnionType) are two types
        st.integers().map(lambda v: (Union[int, str], v)),  # noqa: UP007
        st.text().map(lambda v: (Union[int, str], v)),  # noqa: UP007
        datetimes.map(lambda v: (datetime | int, v)),
        st.lists(st.integers(), max_size=3).map(lambda v: (list[int] | str, v)),
        st.one_of(st.none(), st.integers()).map(lambda v: (int | None, v)),
    )
    if depth == 0:
        return st.one_of(leaf, sets, unions)
    inner = annotated_values(depth - 1)
    hints = inner.map(lambda hv: hv[0])
    containers = st.one_of(
        hints.flatmap(lambda h: st.lists(strategy_for(h), max_size=3).map(lambda v: (list[h], v))),
        hints.flatmap(lambda h: st.lists(strategy_for(h), max_size=3).map(lambda v: (tuple[h, ...], tuple(v)))),
        inner.map(lambda hv: (Optional[hv[0]], hv[1])),  # noqa: UP045 (made at run time, of any annotation)
        st.tuples(inner, inner).map(lambda ab: (tuple[ab[0][0], ab[1][0]], (ab[0][1], ab[1][1]))),
        st.tuples(st.sampled_from(KEYS), hints).flatmap(
            lambda kh: st.dictionaries(kh[0][1], strategy_for(kh[1]), max_size=3).map(lambda d: (dict[kh[0][0], kh[1]], d))
        ),
    )
    return st.one_of(leaf, sets, unions, containers)


_LIKE: dict[Any, st.SearchStrategy[Any]] = dict(LEAVES + RECORDS)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """Values of an annotation that `annotated_values` makes."""
    if hint in _LIKE:
        return _LIKE[hint]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is list:
        return st.lists(strategy_for(args[0]), max_size=3)
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(strategy_for(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(strategy_for(a) for a in args))
    if origin is set:
        return st.sets(dict(HASHABLE)[args[0]], max_size=4)
    if origin is frozenset:
        return st.frozensets(dict(HASHABLE)[args[0]], max_size=4)
    if origin is Union or isinstance(hint, types.UnionType):
        return st.one_of(*(strategy_for(a) for a in args))
    if origin is dict:
        return st.dictionaries(dict(KEYS)[args[0]], strategy_for(args[1]), max_size=3)
    raise AssertionError(f"no strategy for {hint!r}")


def same(a: Any, b: Any) -> bool:
    """Equal, of the same type all the way down, and a datetime with the same offset."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (datetime, time)):
        return a == b and a.utcoffset() == b.utcoffset() and (a.tzinfo is None) == (b.tzinfo is None)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if isinstance(a, float):
        return a == b and str(a) == str(b)  # -0.0 stays -0.0
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a) and all(type(k) is type(_key(b, k)) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, pydantic.BaseModel):
        return all(same(getattr(a, n), getattr(b, n)) for n in type(a).model_fields)
    return bool(a == b)


def _key(d: dict[Any, Any], k: Any) -> Any:
    return next(x for x in d if x == k)


def round_trip(hint: Any, value: Any) -> Any:
    """The value written as a call's argument and read back by a task annotated `hint`."""

    def task(arg):  # type: ignore[no-untyped-def]
        return arg

    task.__annotations__ = {"arg": hint}
    params = Parameters(task, skip_first=False)
    data = encode_call("t.task", [value], {}, parameters=params)
    args, kwargs = params.read("t.task", decode_call(data))
    assert kwargs == {}
    return args[0]


@settings(max_examples=400, deadline=None)
@given(annotated_values())
def test_every_supported_value_round_trips_by_its_annotation(hv):
    """A codec that wrote a type one way and read it another (a datetime losing its
    offset, a float read as an int, a set as a list, a dataclass as a dict, an
    enum as its value) returns something not the same as what was sent."""
    hint, value = hv
    back = round_trip(hint, value)
    assert same(value, back), (hint, value, back)


@settings(max_examples=200, deadline=None)
@given(annotated_values())
def test_results_round_trip_by_the_return_annotation(hv):
    """A result is written and read as an argument is: by the return annotation."""
    hint, value = hv
    back = decode_result("t.task", encode_result("t.task", value), hint)
    assert same(value, back), (hint, value, back)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(json_values, max_size=4), st.dictionaries(st.from_regex(r"[a-z_]{1,8}", fullmatch=True), json_values, max_size=4))
def test_json_another_client_wrote_decodes_as_plain_values(args, kwargs):
    """Another client writes the call with its own JSON writer (here: ASCII escapes,
    spaces, its own key order, an extra key): a task without annotations gets the
    plain values; a reader that needed emq's own spelling would refuse them."""
    doc = {"kwargs": kwargs, "task": "other.lang", "extra": {"trace": "x"}, "args": args, "emq": 1}
    data = json.dumps(doc, ensure_ascii=True, indent=1).encode()
    call = decode_call(data)
    assert call == Call("other.lang", args, kwargs)

    def task(*a, **kw):  # type: ignore[no-untyped-def]
        return a, kw

    got_args, got_kwargs = Parameters(task, skip_first=False).read("other.lang", call)
    assert list(got_args) == args and got_kwargs == kwargs


def test_the_spellings_other_clients_write_read_as_the_annotation_says():
    """RFC 3339's `Z`, a number for a Decimal, an integral float for an int, a
    missing `args` and `kwargs`: what other writers produce. A number is not a
    datetime (seconds or milliseconds? the reader would have to guess)."""

    def task(when: datetime, at: datetime | None, amount: Decimal, n: int, ratio: float, b: bytes, day: date) -> None: ...

    params = Parameters(task, skip_first=False)
    call = decode_call(b'{"emq":1,"task":"t","args":["2025-01-02T03:04:05.5Z",null,12.5,3.0,2,"AAE=","2025-01-02"],"kwargs":{}}')
    args, _ = params.read("t", call)
    assert args[0] == datetime(2025, 1, 2, 3, 4, 5, 500000, tzinfo=timezone.utc)
    assert args[1] is None
    with pytest.raises(emq.CorruptCallError, match="argument 'when' is a JSON number, which does not read as datetime"):
        params.read("t", Call("t", [1700000000, None, 1, 1, 1, "", "2025-01-02"], {}))
    assert args[2] == Decimal("12.5") and isinstance(args[2], Decimal)
    assert args[3] == 3 and type(args[3]) is int
    assert args[4] == 2.0 and type(args[4]) is float
    assert args[5] == b"\x00\x01"
    assert args[6] == date(2025, 1, 2)
    assert decode_call(b'{"emq": 1, "task": "t"}') == Call("t", [], {})


def test_the_call_is_the_documented_json():
    """The bytes are the format docs/SPEC.md gives, compact UTF-8 (not ASCII escapes),
    positional arguments positional and keywords keywords, as the caller gave them."""

    def add(x: int, y: int) -> int:
        return x + y

    data = encode_call("tasks.add", [1], {"y": 2}, parameters=Parameters(add, skip_first=False))
    assert data == b'{"emq":1,"task":"tasks.add","args":[1],"kwargs":{"y":2}}'
    assert FORMAT_VERSION == 1
    assert encode_call("x", ["é"], {}) == '{"emq":1,"task":"x","args":["é"],"kwargs":{}}'.encode()


class Secret:
    """A value whose repr is a secret: no message may show it."""

    def __repr__(self) -> str:
        return "hunter2"

    __str__ = __repr__


SECRET = f"{Secret.__module__}.Secret"


def test_a_value_that_does_not_serialize_names_the_task_and_argument_never_the_value():
    """A socket, a lambda, NaN, a nested unknown object, a set of mixed keys: each an
    emq.ArgumentError naming the task, the argument and where inside it, and saying
    nothing of the value (a repr can hold a secret)."""

    def add(when: datetime, items: list[Any], *rest: Any, **extra: Any) -> None: ...

    params = Parameters(add, skip_first=False)
    cases = [
        ((Secret(), []), {}, f"tasks.add: argument 'when' is a {SECRET}, which emq cannot write as JSON"),
        ((datetime(2025, 1, 1), [1, {"k": Secret()}]), {}, f"tasks.add: argument 'items'[1][…] is a {SECRET}"),
        ((datetime(2025, 1, 1), [float("nan")]), {}, "tasks.add: argument 'items'[0] is a float that JSON cannot hold"),
        ((datetime(2025, 1, 1), [], Secret()), {}, f"tasks.add: argument 'rest'[0] is a {SECRET}"),
        ((datetime(2025, 1, 1), []), {"token": Secret()}, f"tasks.add: argument 'extra'['token'] is a {SECRET}"),
        ((datetime(2025, 1, 1), [{1: "a", "1": "b"}]), {}, "tasks.add: argument 'items'[0] has two keys that write the same JSON key"),
        (("hunter2", []), {}, "tasks.add: argument 'when' would not reach the task as its annotation datetime says"),
    ]
    for args, kwargs, message in cases:
        with pytest.raises(emq.ArgumentError) as e:
            encode_call("tasks.add", args, kwargs, parameters=params)
        assert str(e.value).startswith(message), str(e.value)
        assert "hunter2" not in str(e.value)
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(emq.ArgumentError, match=r"argument 'items'(\[0\])+ nests deeper than 100 levels"):
        encode_call("tasks.add", (datetime(2025, 1, 1), looped), {}, parameters=params)
    with pytest.raises(emq.ArgumentError, match="tasks.add: missing a required argument: 'items'"):
        encode_call("tasks.add", (datetime(2025, 1, 1),), {}, parameters=params)
    with pytest.raises(emq.ArgumentError, match="argument 'items'.* lone surrogate"):
        encode_call("tasks.add", (datetime(2025, 1, 1), ["\ud800"]), {}, parameters=params)


def test_a_corrupt_call_says_what_is_wrong():
    """Each shape of wrong data is a CorruptCallError that says which, and repeats
    none of the data; an unknown version is refused, not guessed at."""
    cases = {
        b"\xffsecret": "it is not UTF-8 (byte 0)",
        b"secret": "it is not JSON (Expecting value at line 1, column 1)",
        b'["secret"]': "it is a JSON array of 1 item, not a JSON object",
        b'{"task": "t"}': "it has no format version (the key 'emq')",
        b'{"emq": "1", "task": "t"}': "its format version ('emq') is a JSON string, not an integer",
        b'{"emq": true, "task": "t"}': "its format version ('emq') is a JSON boolean, not an integer",
        b'{"emq": 2, "task": "t"}': "it is in format version 2, and this emq reads version 1",
        b'{"emq": 1}': "it has no task name (the key 'task')",
        b'{"emq": 1, "task": ["secret"]}': "its 'task' is a JSON array of 1 item, not a string",
        b'{"emq": 1, "task": ""}': "its task name must be 1 to 200 bytes of UTF-8",
        b'{"emq": 1, "task": "a\\u0000b"}': "its task name must have no control characters",
        b'{"emq": 1, "task": "t", "args": {"secret": 1}}': "its 'args' is a JSON object, not an array",
        b'{"emq": 1, "task": "t", "kwargs": ["secret"]}': "its 'kwargs' is a JSON array of 1 item, not an object",
        b'{"emq": 1, "task": "t", "args": [NaN]}': "it is not JSON emq reads: NaN is not JSON",
        b"[" * 100_000: "it nests too deep to read",
    }
    for data, problem in cases.items():
        with pytest.raises(emq.CorruptCallError) as e:
            decode_call(data)
        assert str(e.value) == f"the job's data is not a task call: {problem}", data[:40]
        assert "secret" not in str(e.value)
        assert isinstance(e.value, emq.PermanentJobError) and isinstance(e.value, ValueError)


def test_arguments_that_do_not_fit_the_task_are_a_corrupt_call():
    """A call another client wrote with the wrong arity, an unknown keyword or a
    value its annotation does not read: CorruptCallError naming the task and the
    argument (the job can never run), never a TypeError from inside the task."""

    def charge(order: int, when: datetime, *, note: str = "") -> None: ...

    params = Parameters(charge, skip_first=False)
    cases = [
        ([1], {}, "b.charge: the call does not fit the task's parameters: missing a required argument: 'when'"),
        ([1, "2025-01-01"], {"x": 1}, "unexpected keyword argument 'x'"),
        (["1", "2025-01-01"], {}, "b.charge: argument 'order' is a JSON string, which does not read as int"),
        ([1, "secret"], {}, "b.charge: argument 'when' is a JSON string, which does not read as datetime"),
        ([1.5, "2025-01-01"], {}, "b.charge: argument 'order' is a JSON number, which does not read as int"),
        ([1, "2025-01-01"], {"note": 7}, "b.charge: argument 'note' is a JSON number, which does not read as str"),
    ]
    for args, kwargs, message in cases:
        data = json.dumps({"emq": 1, "task": "b.charge", "args": args, "kwargs": kwargs})
        with pytest.raises(emq.CorruptCallError) as e:
            params.read("b.charge", decode_call(data))
        assert message in str(e.value), str(e.value)
        assert "secret" not in str(e.value)


def test_nested_values_that_do_not_fit_say_where():
    """A field of a dataclass inside a list: the path points at it."""
    with pytest.raises(emq.tasks.codec.Unreadable) as e:
        from_json(list[Point], [{"x": 1, "when": "2025-01-01T00:00:00", "tags": [], "inner": {"code": 5}}])
    assert e.value.where == "[0].inner.code" and "does not read as str" in e.value.what
    with pytest.raises(emq.tasks.codec.Unreadable, match="without 'when', which Point needs"):
        from_json(Point, {"x": 1, "tags": [], "inner": None})
    with pytest.raises(emq.tasks.codec.Unreadable, match=r"does not validate as Order \(id: uuid_parsing\)"):
        from_json(Order, {"id": "secret", "placed": "2025-01-01T00:00:00", "items": []})


def test_results_over_the_limit_or_unwritable_are_result_errors():
    """A result too large for a row, or of a type emq cannot write, is a
    ResultError (a PermanentJobError: retrying the task would not mend it)."""
    with pytest.raises(emq.ResultTooLargeError, match=r"t.big: its result is \d+ bytes of JSON, over the 524288 bytes"):
        encode_result("t.big", "x" * RESULT_LIMIT)
    assert len(encode_result("t.fits", "x" * (RESULT_LIMIT - 2))) == RESULT_LIMIT
    with pytest.raises(emq.ResultError, match=rf"t.obj: its result\[0\] is a {SECRET}") as e:
        encode_result("t.obj", [Secret()])
    assert "hunter2" not in str(e.value) and isinstance(e.value, emq.PermanentJobError)


def test_unknown_annotations_pass_the_plain_value():
    """A class of the user's own that is neither a dataclass nor a model, a
    Callable, a TypeVar: the task gets the JSON value as it is (no guessing)."""

    class Mine:
        pass

    T = typing.TypeVar("T")
    for hint in (Mine, typing.Callable[[int], int], T, "NotAType"):
        assert from_json(hint, {"a": [1]}) == {"a": [1]}
    assert to_json({"k": (1, 2)}) == {"k": [1, 2]}

"""The call format of a task job: a call written as UTF-8 JSON that any client can
write, read back as the Python values that the task's annotations name.

    {"emq": 1, "task": "billing.charge", "args": [42], "kwargs": {"when": "2025-01-02T03:04:05+00:00"}}

`emq` is the format's version, `task` the task's name, `args` and `kwargs` its
positional and keyword arguments; other top-level keys are ignored (docs/SPEC.md,
"The call format"). Writing goes by each value's type: a `datetime` becomes its
ISO 8601 text, a `UUID` its string, `bytes` base64, a dataclass an object (the
table is in docs/tasks.md). Reading goes by the annotation: a parameter annotated
`datetime` reads that text back as a `datetime`, one without an annotation gets
the plain JSON value. A task's return value is written and read the same way, by
its return annotation. Nothing is pickled or evaluated: a queue is a trust
boundary, and a job's data is input.
"""

from __future__ import annotations

import base64
import binascii
import collections
import collections.abc as abc
import dataclasses
import decimal
import enum
import functools
import inspect
import json
import math
import types
import typing
import unicodedata
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from ..errors import ArgumentError, CorruptCallError, ResultError, ResultTooLargeError

FORMAT_VERSION = 1
"""The version of the call format this emq writes and reads (the call's `emq` key)."""

RESULT_LIMIT = 512 * 1024
"""The most bytes a task's result may take as JSON: a row is read whole by a
status read and by the dashboard."""

TASK_NAME_MAX = 200
"""The most bytes a task's name may take in UTF-8."""

# Deeper values are refused: they are almost always a structure that holds itself,
# and a limit keeps both the writer and the reader off Python's recursion limit.
MAX_DEPTH = 100

WRITES = (
    "JSON values (None, bool, int, float, str, list, tuple, dict), datetime, date, time, "
    "timedelta, UUID, Decimal, bytes, Enum, sets, dataclasses and pydantic-style models"
)


@dataclass(frozen=True)
class Call:
    """A task call as read from a job's data: the task's name and its arguments
    as plain JSON values (a task's annotations convert them: `Parameters.read`)."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]


def task_name_problem(name: object) -> str | None:
    """Why `name` cannot be a task's name, or None: a `str` of 1 to 200 bytes of
    UTF-8 with no control characters."""
    if not isinstance(name, str):
        return f"must be a str, not {_type_name(name)}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "must be UTF-8 (it has a lone surrogate)"
    if not 1 <= size <= TASK_NAME_MAX:
        return f"must be 1 to {TASK_NAME_MAX} bytes of UTF-8"
    if any(unicodedata.category(c) == "Cc" for c in name):
        return "must have no control characters"
    return None


# -- writing ------------------------------------------------------------------------


class Unwritable(Exception):
    """A value emq cannot write as JSON: `where` inside it (`[3].when`, or empty
    for the value itself) and what it is. Never the value's text."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where} {what}".strip())
        self.where = where
        self.what = what


def to_json(value: object, where: str = "", depth: int = 0) -> Any:
    """`value` as a plain JSON value (what `json.dumps` writes), by its type; raises
    `Unwritable` for a value of any other type."""
    if depth > MAX_DEPTH:
        raise Unwritable(where, f"nests deeper than {MAX_DEPTH} levels (or holds itself)")
    # Enums first: an IntEnum is an int and a StrEnum a str, and each writes its value.
    if isinstance(value, enum.Enum):
        return to_json(value.value, where, depth + 1)
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise Unwritable(where, "is a float that JSON cannot hold (nan or infinity)")
        return float(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, datetime):  # before date: a datetime is a date
        return value.isoformat()
    if isinstance(value, (date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        if value.microseconds == 0:
            return value.days * 86_400 + value.seconds
        return value.total_seconds()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), f"{where}.{f.name}", depth + 1) for f in dataclasses.fields(value)}
    if _is_model(type(value)):
        try:
            dumped = value.model_dump(mode="json")  # type: ignore[attr-defined]
        except Exception as e:
            raise Unwritable(where, f"is a {_type_name(value)} whose model_dump(mode='json') raised {type(e).__name__}") from None
        return to_json(dumped, where, depth + 1)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            key = _json_key(k, where, depth)
            if key in out:
                raise Unwritable(where, "has two keys that write the same JSON key")
            out[key] = to_json(v, f"{where}[…]", depth + 1)
        return out
    if isinstance(value, (list, tuple, collections.deque)):
        return [to_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        items = [to_json(v, f"{where}[…]", depth + 1) for v in value]
        try:  # a set has no order: sorted, the same set writes the same bytes
            items.sort()
        except TypeError:
            pass
        return items
    raise Unwritable(where, f"is a {_type_name(value)}, which emq cannot write as JSON (it writes {WRITES})")


def _json_key(key: object, where: str, depth: int) -> str:
    """A dict key as a JSON object's key: a str, or a number, bool or None as
    `json.dumps` writes them (read back by the dict's key annotation)."""
    k = to_json(key, f"{where}[…]", depth + 1)
    if isinstance(k, str):
        return k
    if k is None or isinstance(k, (bool, int, float)):
        return json.dumps(k)
    raise Unwritable(where, f"has a key of type {_type_name(key)}, which cannot be a JSON object's key")


def dumps(value: Any) -> bytes:
    """A plain JSON value (`to_json`'s) as compact UTF-8 JSON; a str with a lone
    surrogate raises `UnicodeEncodeError`."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


# -- reading ------------------------------------------------------------------------


class Unreadable(Exception):
    """A JSON value that an annotation cannot read: `where` inside it and why.
    Never the value's text."""

    def __init__(self, where: str, what: str):
        super().__init__(f"{where} {what}".strip())
        self.where = where
        self.what = what


def _kind(value: object) -> str:
    """What a JSON value is, in words, without its text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a JSON boolean"
    if isinstance(value, (int, float)):
        return "a JSON number"
    if isinstance(value, str):
        return "a JSON string"
    if isinstance(value, list):
        return f"a JSON array of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return "a JSON object"
    return f"a {_type_name(value)}"


def _type_name(value: object) -> str:
    t = value if isinstance(value, type) else type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def hint_name(hint: object) -> str:
    """An annotation as a reader writes it: `datetime`, `list[int]`, `int | None`."""
    if isinstance(hint, type) and get_origin(hint) is None:
        return hint.__qualname__
    return repr(hint).replace("typing.", "").replace("datetime.", "").replace("uuid.", "").replace("decimal.", "")


def _mismatch(where: str, value: object, hint: object) -> Unreadable:
    return Unreadable(where, f"is {_kind(value)}, which does not read as {hint_name(hint)}")


_SEQUENCES = (list, abc.Sequence, abc.MutableSequence, abc.Iterable, abc.Collection, abc.Reversible)
_SETS = (set, frozenset, abc.Set, abc.MutableSet)
_MAPPINGS = (dict, abc.Mapping, abc.MutableMapping)


def from_json(hint: Any, value: Any, where: str = "") -> Any:
    """The plain JSON `value` as the annotation `hint` names it; a hint emq has no
    reading for (a class of the user's own, a `Callable`, a type variable) gets the
    value as it is. Raises `Unreadable` where the value does not fit."""
    if hint is Any or hint is object or hint is inspect.Parameter.empty:
        return value
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return from_json(args[0], value, where)
    if hint is None or hint is type(None):
        if value is not None:
            raise _mismatch(where, value, None)
        return None
    if origin is Union or (hasattr(types, "UnionType") and origin is types.UnionType):
        return _read_union(hint, args, value, where)
    if origin is Literal:
        return _read_literal(hint, args, value, where)
    if isinstance(hint, typing.NewType):
        return from_json(hint.__supertype__, value, where)
    if isinstance(hint, typing.TypeVar):
        return value
    if origin is not None:
        return _read_generic(hint, origin, args, value, where)
    if isinstance(hint, type):
        return _read_class(hint, value, where)
    return value


def _read_union(hint: Any, members: tuple[Any, ...], value: Any, where: str) -> Any:
    # The first member that reads the value, in the order written: `datetime | str`
    # reads an ISO 8601 string as a datetime, `str | datetime` as a str.
    if value is None and type(None) in members:
        return None
    others = [m for m in members if m is not type(None)]
    if len(others) == 1:  # `X | None`: X's own reason, which says where inside it
        return from_json(others[0], value, where)
    for member in others:
        try:
            return from_json(member, value, where)
        except Unreadable:
            continue
    raise _mismatch(where, value, hint)


def _read_literal(hint: Any, options: tuple[Any, ...], value: Any, where: str) -> Any:
    for option in options:
        if isinstance(option, enum.Enum):
            if type(value) is type(option.value) and value == option.value:
                return option
        elif type(value) is type(option) and value == option:
            return option
    raise Unreadable(where, f"is {_kind(value)} that is not one of {hint_name(hint)}'s values")


def _read_generic(hint: Any, origin: Any, args: tuple[Any, ...], value: Any, where: str) -> Any:
    if origin in _SEQUENCES or origin is collections.deque:
        if not isinstance(value, list):
            raise _mismatch(where, value, hint)
        item = args[0] if args else Any
        items = [from_json(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
        return collections.deque(items) if origin is collections.deque else items
    if origin is tuple:
        if not isinstance(value, list):
            raise _mismatch(where, value, hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(from_json(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
        if args == ((),):  # `Tuple[()]`
            args = ()
        if len(value) != len(args):
            raise Unreadable(where, f"is {_kind(value)}, and {hint_name(hint)} has {len(args)}")
        return tuple(from_json(a, v, f"{where}[{i}]") for i, (a, v) in enumerate(zip(args, value)))
    if origin in _SETS:
        if not isinstance(value, list):
            raise _mismatch(where, value, hint)
        item = args[0] if args else Any
        try:
            members = {from_json(item, v, f"{where}[…]") for v in value}
        except TypeError:
            raise Unreadable(where, f"holds items that cannot be in a set ({hint_name(hint)})") from None
        return frozenset(members) if origin is frozenset else members
    if origin in _MAPPINGS:
        if not isinstance(value, dict):
            raise _mismatch(where, value, hint)
        key, val = args if len(args) == 2 else (Any, Any)
        return {_read_key(key, k, where): from_json(val, v, f"{where}[…]") for k, v in value.items()}
    return value  # `type[X]`, `Callable[...]`, a generic of the user's own: as it is


def _read_key(hint: Any, key: str, where: str) -> Any:
    """A JSON object's key (always a str) as the dict's key annotation names it."""
    if hint is int or hint is float or hint is bool or hint is type(None):
        try:
            parsed = json.loads(key)
        except ValueError:
            raise Unreadable(f"{where}[…]", f"is a key that does not read as {hint_name(hint)}") from None
        return from_json(hint, parsed, f"{where}[…]")
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(key)
        except ValueError:
            pass
        try:
            return hint(json.loads(key))
        except (ValueError, TypeError):
            raise Unreadable(f"{where}[…]", f"is a key that is not a value of {hint_name(hint)}") from None
    return from_json(hint, key, f"{where}[…]")


def _read_class(hint: type, value: Any, where: str) -> Any:
    # Exact classes only for the JSON types: a subclass of str or int of the user's
    # own may check or mean more than its base, so it gets the value as it is.
    if issubclass(hint, enum.Enum):
        try:
            return hint(tuple(value) if isinstance(value, list) else value)
        except (ValueError, TypeError):
            raise Unreadable(where, f"is {_kind(value)} that is not a value of {hint_name(hint)}") from None
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _mismatch(where, value, hint)
    if hint is int:
        if isinstance(value, int):  # a bool too: in Python it is an int
            return value
        if isinstance(value, float) and value.is_integer():  # JavaScript writes no difference
            return int(value)
        raise _mismatch(where, value, hint)
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _mismatch(where, value, hint)
    if hint is str:
        if isinstance(value, str):
            return value
        raise _mismatch(where, value, hint)
    reader = _READERS.get(hint)
    if reader is not None:
        try:
            return reader(value)
        except (ValueError, TypeError, OverflowError, OSError, ArithmeticError, binascii.Error):
            raise _mismatch(where, value, hint) from None
    if dataclasses.is_dataclass(hint):
        return _read_dataclass(hint, value, where)
    if _is_model(hint):
        return _read_model(hint, value, where)
    if hint in (list, tuple, set, frozenset, collections.deque):
        if not isinstance(value, list):
            raise _mismatch(where, value, hint)
        return hint(value)
    if hint is dict:
        if not isinstance(value, dict):
            raise _mismatch(where, value, hint)
        return value
    return value


def _need(kind: type | tuple[type, ...], value: Any) -> Any:
    if not isinstance(value, kind) or isinstance(value, bool):
        raise TypeError
    return value


def _read_datetime(value: Any) -> datetime:
    text = _need(str, value)
    if text[-1:] in ("Z", "z"):  # RFC 3339's UTC, which Python 3.10's fromisoformat does not read
        text = text[:-1] + "+00:00"
    return datetime.fromisoformat(text)


def _read_decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, float):
        return decimal.Decimal(repr(value))
    return decimal.Decimal(_need((str, int), value))


def _read_bytes(value: Any) -> bytes:
    return base64.b64decode(_need(str, value), validate=True)


_READERS: dict[type, Callable[[Any], Any]] = {
    datetime: _read_datetime,
    date: lambda v: date.fromisoformat(_need(str, v)),
    time: lambda v: time.fromisoformat(_need(str, v)),
    timedelta: lambda v: timedelta(seconds=_need((int, float), v)),
    uuid.UUID: lambda v: uuid.UUID(_need(str, v)),
    decimal.Decimal: _read_decimal,
    bytes: _read_bytes,
    bytearray: lambda v: bytearray(_read_bytes(v)),
}


@functools.lru_cache(maxsize=512)
def _field_hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls, include_extras=True)


def _read_dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise _mismatch(where, value, cls)
    try:
        hints = _field_hints(cls)
    except Exception as e:
        raise Unreadable(where, f"is for {hint_name(cls)}, whose annotations do not resolve ({type(e).__name__})") from None
    given: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in value:
            given[f.name] = from_json(hints.get(f.name, Any), value[f.name], f"{where}.{f.name}")
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise Unreadable(where, f"is a JSON object without {f.name!r}, which {hint_name(cls)} needs")
    try:
        return cls(**given)
    except Exception as e:  # its __post_init__ refused; the message may hold the value
        raise Unreadable(where, f"does not make a {hint_name(cls)} ({type(e).__name__})") from None


def _is_model(cls: type) -> bool:
    """A pydantic-style model (pydantic 2, or any class with the same two methods):
    written by `model_dump(mode="json")`, read by `model_validate`."""
    return callable(getattr(cls, "model_validate", None)) and callable(getattr(cls, "model_dump", None))


def _read_model(cls: type, value: Any, where: str) -> Any:
    try:
        return cls.model_validate(value)  # type: ignore[attr-defined]
    except Exception as e:
        raise Unreadable(where, f"does not validate as {hint_name(cls)} ({_model_problems(e)})") from None


def _model_problems(e: Exception) -> str:
    """A validation error's places and kinds (pydantic's `errors()`: `id:
    uuid_parsing`), else its class: its messages may quote the input."""
    errors = getattr(e, "errors", None)
    if callable(errors):
        try:
            listed = errors(include_input=False, include_url=False)
            parts = [f"{'.'.join(map(str, err.get('loc', ()))) or 'the value'}: {err.get('type', '?')}" for err in listed[:3]]
            return "; ".join(parts) + ("; …" if len(listed) > 3 else "")
        except Exception:
            pass
    return type(e).__name__


# -- a task's parameters -------------------------------------------------------------


class Parameters:
    """How a task's parameters read a call: which argument is which parameter, and
    the annotations that convert each (resolved on first use, so that a module may
    annotate with classes it defines after the task)."""

    def __init__(self, fn: Callable[..., Any], *, skip_first: bool):
        self.fn = fn
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        # A task that takes its job's context gets it first; a call never carries it.
        self.signature = signature.replace(parameters=params[1:] if skip_first else params)
        self._hints: dict[str, Any] | None = None

    def hints(self) -> dict[str, Any]:
        """The parameters' annotations and `return`'s, resolved once
        (`typing.get_type_hints` with `include_extras`); raises `TypeError`
        naming the task when they do not resolve."""
        if self._hints is None:
            if not (inspect.isfunction(self.fn) or inspect.ismethod(self.fn)):
                # A callable object or a partial: get_type_hints reads no signature from it.
                self._hints = {}
                return self._hints
            try:
                self._hints = typing.get_type_hints(self.fn, include_extras=True)
            except Exception as e:
                name = getattr(self.fn, "__qualname__", repr(self.fn))
                raise TypeError(f"emq: the annotations of {name} do not resolve: {type(e).__name__}: {e}") from None
        return self._hints

    def bind(self, verb: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> inspect.BoundArguments:
        """The arguments bound to the parameters; `ArgumentError` naming `verb`
        when they do not fit (a missing or an unknown argument)."""
        try:
            return self.signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{verb}: {e}") from None

    def slots(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[list[tuple[str, Any]], dict[str, tuple[str, Any]]]:
        """For arguments that `bind` accepted, each one's label and annotation, the
        positional ones in order and the keywords by name: `'when'`, `'items'[2]`
        for the third of `*items`, `'extra'['k']` for a keyword of `**extra`."""
        hints = self.hints()
        params = list(self.signature.parameters.values())
        positional = [p for p in params if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        var_args = next((p for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None)
        var_kwargs = next((p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        by_position: list[tuple[str, Any]] = []
        for i in range(len(args)):
            if i < len(positional):
                by_position.append((repr(positional[i].name), hints.get(positional[i].name, Any)))
            else:
                assert var_args is not None  # bind accepted the call
                by_position.append((f"{var_args.name!r}[{i - len(positional)}]", hints.get(var_args.name, Any)))
        by_name: dict[str, tuple[str, Any]] = {}
        for k in kwargs:
            param = self.signature.parameters.get(k)
            if param is not None and param.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                by_name[k] = (repr(k), hints.get(k, Any))
            else:
                assert var_kwargs is not None
                by_name[k] = (f"{var_kwargs.name!r}[{k!r}]", hints.get(var_kwargs.name, Any))
        return by_position, by_name

    def read(self, task: str, call: Call) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The call's arguments converted by the annotations, ready to pass to the
        function; `CorruptCallError` when they do not fit its parameters."""
        try:
            bound = self.signature.bind(*call.args, **call.kwargs)
        except TypeError as e:
            raise CorruptCallError(f"{task}: the call does not fit the task's parameters: {e}") from None
        hints = self.hints()
        for name, value in list(bound.arguments.items()):
            param = self.signature.parameters[name]
            hint = hints.get(name, Any)
            try:
                if param.kind is inspect.Parameter.VAR_POSITIONAL:
                    bound.arguments[name] = tuple(from_json(hint, v, f"[{i}]") for i, v in enumerate(value))
                elif param.kind is inspect.Parameter.VAR_KEYWORD:
                    bound.arguments[name] = {k: from_json(hint, v, f"[{k!r}]") for k, v in value.items()}
                else:
                    bound.arguments[name] = from_json(hint, value)
            except Unreadable as e:
                raise CorruptCallError(f"{task}: argument {name!r}{e.where} {e.what}") from None
        return bound.args, bound.kwargs


# -- calls and results -------------------------------------------------------------


def encode_call(
    task: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    parameters: Parameters | None = None,
    verb: str | None = None,
) -> bytes:
    """The call `task(*args, **kwargs)` in the call format, as UTF-8 JSON bytes.

    With the task's `parameters`, the arguments must fit its signature, and each
    must read back by its annotation (a `datetime` given for a parameter annotated
    `int` is refused here, not by the worker). A value that cannot be written, or
    does not fit, raises `emq.ArgumentError` naming `verb` (default: the task)
    and the argument, never the value; nothing is written to any server."""
    verb = verb or task
    if parameters is not None:
        parameters.bind(verb, args, kwargs)
        by_position, by_name = parameters.slots(args, kwargs)
    else:
        by_position = [(f"{i + 1}", Any) for i in range(len(args))]
        by_name = {k: (repr(k), Any) for k in kwargs}
    for k in kwargs:
        if not isinstance(k, str):  # only a `**{...}` of the caller's own can pass one
            raise ArgumentError(f"{verb}: a keyword argument's name must be a str, not {_type_name(k)}")
    written_args = [_argument(verb, label, hint, v) for (label, hint), v in zip(by_position, args)]
    written_kwargs = {k: _argument(verb, *by_name[k], v) for k, v in kwargs.items()}
    try:
        return dumps({"emq": FORMAT_VERSION, "task": task, "args": written_args, "kwargs": written_kwargs})
    except UnicodeEncodeError:
        labels = [label for label, _ in by_position] + [label for label, _ in by_name.values()]
        values = written_args + list(written_kwargs.values())
        label = next((lb for lb, v in zip(labels, values) if _has_surrogate(v)), "?")
        raise ArgumentError(f"{verb}: argument {label} holds a str with a lone surrogate, which UTF-8 cannot hold") from None


def _argument(verb: str, label: str, hint: Any, value: object) -> Any:
    """One argument as a plain JSON value, checked to read back by its annotation."""
    try:
        written = to_json(value)
    except Unwritable as e:
        raise ArgumentError(f"{verb}: argument {label}{e.where} {e.what}") from None
    try:
        from_json(hint, written)
    except Unreadable as e:
        raise ArgumentError(
            f"{verb}: argument {label}{e.where} would not reach the task as its annotation {hint_name(hint)} says: as JSON it {e.what}"
        ) from None
    return written


def _has_surrogate(value: Any) -> bool:
    try:
        dumps(value)
    except UnicodeEncodeError:
        return True
    return False


def decode_call(data: bytes | str) -> Call:
    """A job's data read as a call; `emq.CorruptCallError` saying what is wrong
    when it is not one (never repeating the data)."""

    def corrupt(problem: str) -> CorruptCallError:
        return CorruptCallError(f"the job's data is not a task call: {problem}")

    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as e:
            raise corrupt(f"it is not UTF-8 (byte {e.start})") from None
    else:
        text = data
    try:
        call = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise corrupt(f"it is not JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise corrupt("it nests too deep to read") from None
    except ValueError as e:  # NaN or Infinity (`_no_constant`), an int of too many digits
        raise corrupt(f"it is not JSON emq reads: {e}") from None
    if not isinstance(call, dict):
        raise corrupt(f"it is {_kind(call)}, not a JSON object")
    if "emq" not in call:
        raise corrupt("it has no format version (the key 'emq')")
    version = call["emq"]
    if not isinstance(version, int) or isinstance(version, bool):
        raise corrupt(f"its format version ('emq') is {_kind(version)}, not an integer")
    if version != FORMAT_VERSION:
        raise corrupt(f"it is in format version {version}, and this emq reads version {FORMAT_VERSION}")
    task = call.get("task")
    if not isinstance(task, str):
        raise corrupt("it has no task name (the key 'task')" if task is None else f"its 'task' is {_kind(task)}, not a string")
    if (problem := task_name_problem(task)) is not None:
        raise corrupt(f"its task name {problem}")
    args = call.get("args", [])
    if not isinstance(args, list):
        raise corrupt(f"its 'args' is {_kind(args)}, not an array")
    kwargs = call.get("kwargs", {})
    if not isinstance(kwargs, dict):
        raise corrupt(f"its 'kwargs' is {_kind(kwargs)}, not an object")
    return Call(task, args, kwargs)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def encode_result(task: str, value: object) -> bytes:
    """A task's return value as UTF-8 JSON bytes, for the row's `result`;
    `emq.ResultError` when it cannot be written, `emq.ResultTooLargeError` when
    it is over `RESULT_LIMIT`."""
    try:
        data = dumps(to_json(value))
    except Unwritable as e:
        raise ResultError(f"{task}: its result{e.where} {e.what}") from None
    except UnicodeEncodeError:
        raise ResultError(f"{task}: its result holds a str with a lone surrogate, which UTF-8 cannot hold") from None
    if len(data) > RESULT_LIMIT:
        raise ResultTooLargeError(
            f"{task}: its result is {len(data)} bytes of JSON, over the {RESULT_LIMIT} bytes (512 KiB) a row keeps; "
            "store a large result elsewhere and return where it is"
        )
    return data


def decode_result(task: str, data: bytes | str, hint: Any = Any) -> Any:
    """A result read back from the row: JSON, converted by the task's return
    annotation `hint` (none: the plain JSON value); `emq.ResultError` when it
    is not JSON or does not fit the annotation."""
    try:
        value = json.loads(data, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:
        raise ResultError(f"{task}: its stored result is not JSON ({type(e).__name__})") from None
    try:
        return from_json(hint, value)
    except Unreadable as e:
        raise ResultError(f"{task}: its stored result{e.where} {e.what}") from None


__all__ = [
    "FORMAT_VERSION",
    "RESULT_LIMIT",
    "TASK_NAME_MAX",
    "Call",
    "Parameters",
    "Unreadable",
    "Unwritable",
    "decode_call",
    "decode_result",
    "encode_call",
    "encode_result",
    "from_json",
    "hint_name",
    "task_name_problem",
    "to_json",
]

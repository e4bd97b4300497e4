"""How values read from the server are shown: job data as pretty JSON, text or a hex dump, times and durations in words.

Everything here returns plain strings for the templates, which escape them
(autoescape is on): nothing a job holds is ever executed, unpickled or placed
in the page as markup. Job data is opaque bytes: it is shown as JSON when it
parses as JSON, as text when it is UTF-8 without control characters, and as
a hex dump otherwise, at most `SHOWN_BYTES` of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone

from ..answers import ActionOutcome, CancelOutcome

SHOWN_BYTES = 64 * 1024
"""The most bytes of a job's data a page shows: a page stays small whatever a job holds."""

_TEXT_CONTROLS = {"\t", "\n", "\r"}


@dataclass(frozen=True)
class Shown:
    """A value as a page shows it: `kind` is `json`, `text`, `hex` or `empty`."""

    kind: str
    text: str
    size: int
    """The value's whole size in bytes."""
    cut: bool
    """Only the first `SHOWN_BYTES` are shown."""


def show_data(data: bytes) -> Shown:
    """Job data for a page (see the module's docstring)."""
    size = len(data)
    if size == 0:
        return Shown("empty", "", 0, False)
    head, cut = data[:SHOWN_BYTES], size > SHOWN_BYTES
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        # A cut can split a character: text whose only fault is its last few bytes is still text.
        if not (cut and e.start >= len(head) - 3):
            return Shown("hex", hex_dump(head), size, cut)
        text = head[: e.start].decode("utf-8")
    if any(_is_control(ch) for ch in text):
        return Shown("hex", hex_dump(head), size, cut)
    if not cut:
        try:
            value = json.loads(text)
        except ValueError:
            pass
        else:
            return Shown("json", json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False), size, cut)
    return Shown("text", text, size, cut)


def _is_control(ch: str) -> bool:
    """C0 and C1 control characters and DEL, bar tab and the line ends: text holding them is shown in hex."""
    return (ch < " " and ch not in _TEXT_CONTROLS) or "\x7f" <= ch <= "\x9f"


def hex_dump(data: bytes, width: int = 16) -> str:
    """`hexdump -C` style: offset, the bytes in hex, and the printable ASCII ones (others as `.`)."""
    lines = []
    for offset in range(0, len(data), width):
        chunk = data[offset : offset + width]
        hexes = " ".join(f"{b:02x}" for b in chunk)
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{offset:08x}  {hexes:<{width * 3 - 1}}  |{ascii_}|")
    return "\n".join(lines)


def utc_time(ms: int | None) -> str:
    """Milliseconds since the epoch as an ISO time in UTC, to the millisecond."""
    if ms is None:
        return "—"
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return f"{ms} ms"
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def epoch_ms(moment: datetime | None) -> int | None:
    """An aware datetime (a schedule's ticks) as milliseconds since the epoch, for `utc_time` and `relative`."""
    return None if moment is None else round(moment.timestamp() * 1000)


def duration(seconds: float | None, *, none: str = "forever") -> str:
    """A duration in the largest units that keep it short: `950 ms`, `42 s`, `5 min 3 s`, `2 h 5 min`, `30 d`."""
    if seconds is None:
        return none
    s = abs(seconds)
    if s < 1:
        text = f"{s * 1000:.0f} ms"
    elif s < 60:
        text = f"{s:.0f} s" if s >= 10 or s == int(s) else f"{s:.1f} s"
    elif s < 3600:
        m, rest = divmod(int(s), 60)
        text = f"{m} min" + (f" {rest} s" if rest else "")
    elif s < 86400:
        h, rest = divmod(int(s) // 60, 60)
        text = f"{h} h" + (f" {rest} min" if rest else "")
    else:
        d, rest = divmod(int(s) // 3600, 24)
        text = f"{d} d" + (f" {rest} h" if rest else "")
    return "-" + text if seconds < 0 else text


def relative(ms: int | None, now_ms: int) -> str:
    """How far a time is from the server's now: `in 5 s`, `3 min ago`."""
    if ms is None:
        return ""
    delta = (ms - now_ms) / 1000
    if abs(delta) < 0.5:
        return "now"
    return f"in {duration(delta)}" if delta > 0 else f"{duration(-delta)} ago"


def count(n: int) -> str:
    """An integer with thin groups of three: `1 234 567`."""
    return f"{n:,}".replace(",", "\u202f")


ACTED = ("retried", "deleted", "promoted", "cancelled")
"""The answers that say an action took its job (a cancel's `stopping` is told apart)."""


def outcomes(done_word: str, answers: Mapping[str, ActionOutcome] | Mapping[str, CancelOutcome]) -> str:
    """An action's notice: `Retried 3 of 4 jobs (1 not dead).`, `Cancelled 1 of 2 jobs (1 stopping).`"""
    acted = sum(1 for a in answers.values() if a.value in ACTED)
    others: dict[str, int] = {}
    for a in answers.values():
        if a.value not in ACTED:
            others[a.value.replace("_", " ")] = others.get(a.value.replace("_", " "), 0) + 1
    total = len(answers)
    rest = f" ({', '.join(f'{n} {why}' for why, n in sorted(others.items()))})" if others else ""
    return f"{done_word} {acted} of {total} job{'s' if total != 1 else ''}{rest}."

"""How a handler's run ends, as the worker settles it: `Done` (a result), `Failed` (an error, its traceback, when to retry).

A handler returns (`None`, or a `Done` with its result), raises (a failure:
retried by the queue's policy; an `emq.PermanentJobError` is dead at once),
returns a `Failed` to say more (its `retry_in`, that no retry mends it), or
returns a `concurrent.futures.Future` of any of these: the job then holds
its slot, not a thread, until the future is done (the task runner's async
tasks run so, on one event loop).
"""

from __future__ import annotations

import traceback as _traceback
from dataclasses import dataclass

from .._core import TRACEBACK_MAX
from ..errors import PermanentJobError
from ..queue import Duration

TRACEBACK_HEAD = 4096
"""The bytes a traceback over `TRACEBACK_MAX` keeps from its start (the rest
from its end, where the frame that raised and the message are)."""


@dataclass(frozen=True)
class Done:
    """The run completed: `result` (bytes, or a str as UTF-8; None: none) is
    written to the job's row as it settles."""

    result: bytes | str | None = None


@dataclass(frozen=True)
class Failed:
    """The run failed with `error`. `retry_in`: the wait before the retry (None:
    the queue's backoff); `dead`: no retry mends it (an
    `emq.PermanentJobError` is so by itself): it is dead at once, attempts
    left or not (`Queue.fail(retry=False)`); `cancelled`: the run stopped
    because the job was asked to (`Queue.cancel`), which its fail makes
    cancelled (logged as such, not as a failure)."""

    error: BaseException
    retry_in: Duration | None = None
    dead: bool = False
    cancelled: bool = False

    @property
    def permanent(self) -> bool:
        return self.dead or isinstance(self.error, PermanentJobError)


def traceback_text(error: BaseException) -> str:
    """`error`'s traceback as text, at most `TRACEBACK_MAX` bytes of UTF-8 (a
    longer one keeps its head and its tail, and says how much it cut)."""
    text = "".join(_traceback.format_exception(type(error), error, error.__traceback__))
    data = text.encode("utf-8", "replace")
    if len(data) <= TRACEBACK_MAX:
        return data.decode("utf-8")
    marker = "\n… {} bytes of the traceback cut …\n"
    tail_size = TRACEBACK_MAX - TRACEBACK_HEAD - len(marker.encode()) - 16
    cut = len(data) - TRACEBACK_HEAD - tail_size
    head = data[:TRACEBACK_HEAD].decode("utf-8", "ignore")
    tail = data[-tail_size:].decode("utf-8", "ignore")
    return head + marker.format(cut) + tail


__all__ = ["TRACEBACK_HEAD", "Done", "Failed", "traceback_text"]

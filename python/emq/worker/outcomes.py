"""How a handler's run ends, as the worker settles it: `Done` (a result), `Failed` (an error, its traceback, a retry or dead at once).

A handler returns (`None`, or a `Done` with its result), raises (a failure:
retried by the queue's policy, dead at once for an `emq.PermanentJobError`),
returns a `Failed` to say more (its `retry_in`, that no retry mends it), or
returns a `concurrent.futures.Future` of any of these: the job then holds
its slot, not a thread, until the future is done (the task runner's async
tasks run so, on one event loop).
"""

from __future__ import annotations

import traceback as _traceback
from dataclasses import dataclass

from .._core import TRACEBACK_MAX, Job
from ..errors import EmqError, PermanentJobError
from ..queue import Duration, Queue

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
    the queue's backoff); `dead`: no retry mends it, the job is dead at once
    (an `emq.PermanentJobError` is so by itself); `cancelled`: the run stopped
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


# Makes the run's attempt its last, so that the fail that follows makes the job
# dead. Token-checked as every job operation is (only the run that holds the
# job may), in one script: the core's fail has no "dead now" of its own.
_LAST_ATTEMPT_LUA = """
local row = redis.call('HMGET', KEYS[1], 'state', 'token', 'attempts')
if row[1] ~= 'active' or row[2] ~= ARGV[1] or not row[3] then return 0 end
redis.call('HSET', KEYS[1], 'max_attempts', row[3])
return 1
"""


def make_last_attempt(queue: Queue, job: Job) -> bool:
    """Makes this run the job's last attempt (its fail then makes it dead);
    False where it could not (the lease is lost, scripts are not allowed, a
    cluster: the job is then retried by its policy)."""
    if job.token is None:
        return False
    key = "emq:{" + queue.name + "}:job:" + job.id
    try:
        return bool(queue.client.command("EVAL", _LAST_ATTEMPT_LUA, 1, key, job.token))
    except EmqError:
        return False


__all__ = ["TRACEBACK_HEAD", "Done", "Failed", "make_last_attempt", "traceback_text"]

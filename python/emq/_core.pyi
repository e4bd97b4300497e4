"""emq._core, the extension built from rust/emq-host (PyO3). Checked against the
built module by `python -m mypy.stubtest emq._core` (./dev lint).

The core takes the values it is given (the facade states every default) and
checks every one of them: a bad one raises `emq.ArgumentError` naming the call.
Durations are seconds (an int or a float) or a `datetime.timedelta`; times a
`datetime.datetime` or seconds since the epoch."""

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Literal, final

from .answers import CancelOutcome, CancelRequests, FailOutcome, QueueCounts, Retention, StalledOutcome, UniqueAdd

__all__ = [
    "Client",
    "QueueCore",
    "Job",
    "parse_info",
    "queue_slot",
    "promote",
    "stalled_check",
    "wire",
    "check_duration",
    "check_integer",
    "_panic_while_watching",
    "_spin_us",
    "_sweep_group",
    "registered_queues",
    "live_workers",
    "worker_beat",
    "worker_leave",
    "PROMOTE_LUA",
    "STALLED_LUA",
    "WAKE_MAX",
    "MAX_CLAIM",
    "TRIM_SLACK",
    "RE_READ_SLACK",
    "LEASE_MARK_MS",
    "LEASE_MARK_KEEP_MS",
    "ROW_GROUP",
    "MAX_ATTEMPTS",
    "MAX_PAGE",
    "ACT_BATCH",
    "RETENTION_DEFAULTS",
    "RESULT_MAX",
    "TRACEBACK_MAX",
    "PROGRESS_MAX",
    "WAITERS_MAX",
    "INBOX_KEEP_MS",
    "CANCELS_OVERLAP_MS",
    "backoff_s",
]

_Duration = float | timedelta
_Time = datetime | float
_Failure = str | bytes | BaseException
_Keep = float | timedelta | Literal["forever"]
_Result = bytes | str

PROMOTE_LUA: str
STALLED_LUA: str
WAKE_MAX: int
MAX_CLAIM: int
TRIM_SLACK: int
RE_READ_SLACK: int
LEASE_MARK_MS: int
LEASE_MARK_KEEP_MS: int
ROW_GROUP: int
MAX_ATTEMPTS: int
MAX_PAGE: int
ACT_BATCH: int
RETENTION_DEFAULTS: dict[str, int]  # done_ms, dead_ms, dead_max (-1: none)
RESULT_MAX: int
TRACEBACK_MAX: int
PROGRESS_MAX: int
WAITERS_MAX: int
INBOX_KEEP_MS: int
CANCELS_OVERLAP_MS: int

def parse_info(text: str) -> dict[str, str]: ...
def queue_slot(queue: str) -> int: ...
def promote(client: Client | str, queue: str, batch: int, backend: str, group: int | None) -> int: ...
def stalled_check(
    client: Client | str, queue: str, max_stalled: int | None, batch: int, backend: str, group: int | None
) -> StalledOutcome: ...
def wire(client: Client | str, *args: str | bytes, backend: str) -> Any: ...
def registered_queues(client: Client | str) -> list[str]: ...
def live_workers(client: Client | str) -> list[tuple[str, dict[str, str]]]: ...
def worker_beat(client: Client | str, id: str, fields: dict[str, str], ttl: _Duration) -> None: ...
def worker_leave(client: Client | str, id: str) -> None: ...
def backoff_s(streak: int, base_ms: int, cap_ms: int) -> float: ...
def check_duration(call: str, name: str, value: object, *, positive: bool, maximum: float | None) -> float: ...
def check_integer(call: str, name: str, value: object, minimum: int, maximum: int) -> int: ...
def _panic_while_watching(client: Client, key: str) -> None: ...
def _spin_us(client: Client) -> int: ...
def _sweep_group(client: Client, kind: str, batch: int, group: int | None = None) -> tuple[int, int | None]: ...

@final
class Job:
    """A job: a claim's (with `token` and `lease_deadline_ms`), or a row read
    whole (`get`, `status`, `watch`) with its outcome (SPEC §13)."""

    id: str
    data: bytes
    lane: str | None
    attempts: int
    max_attempts: int
    token: str | None
    lease_deadline_ms: int | None
    state: str | None
    due_ms: int | None
    stalls: int
    error: str | None
    error_type: str | None
    traceback: str | None
    created_ms: int | None
    started_ms: int | None
    finished_ms: int | None
    cancel_requested: bool
    keep_ms: int | None
    unique_key: str | None
    priority: int | None
    @property
    def result(self) -> bytes | None: ...
    @property
    def progress(self) -> bytes | None: ...
    @property
    def ended(self) -> bool: ...
    def __new__(
        cls,
        id: str,
        data: bytes | str | None = None,
        lane: str | None = None,
        attempts: int | None = None,
        max_attempts: int | None = None,
        token: str | None = None,
        lease_deadline_ms: int | None = None,
        state: str | None = None,
        due_ms: int | None = None,
        stalls: int | None = None,
        error: str | None = None,
        *,
        result: bytes | str | None = None,
        error_type: str | None = None,
        traceback: str | None = None,
        progress: bytes | str | None = None,
        created_ms: int | None = None,
        started_ms: int | None = None,
        finished_ms: int | None = None,
        cancel_requested: bool = False,
        keep_ms: int | None = None,
        unique_key: str | None = None,
        priority: int | None = None,
    ) -> Job: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Client:
    """One connection (emq.connect() makes one, with the defaults)."""

    address: str
    def __new__(
        cls,
        url: str,
        *,
        connect_timeout: _Duration,
        read_timeout: _Duration | None,
        spin: _Duration,
        wait_replicas: int,
        wait_timeout: _Duration,
    ) -> Client: ...
    def sibling(self, *, read_timeout: _Duration | None = ...) -> Client: ...
    def ping(self) -> bool: ...
    def time_ms(self) -> int: ...
    def command(self, *args: str | bytes | int | float) -> Any: ...
    def pipeline(self, cmds: list[list[str | bytes | int | float]]) -> list[Any]: ...
    def _park(self, queue: str, timeout: float) -> bool: ...
    def _client_id(self, queue: str | None = None) -> int: ...
    def _unblock(self, id: int, queue: str | None = None) -> bool: ...
    def info(self, section: str = "server") -> dict[str, str]: ...
    def close(self) -> None: ...

@final
class QueueCore:
    """One queue, as `emq.Queue` holds it: its client, checked name and backend."""

    @property
    def client(self) -> Client: ...
    @property
    def name(self) -> str: ...
    @property
    def backend(self) -> Literal["plan", "module"]: ...
    def __new__(cls, client: Client | str, name: str, backend: str) -> QueueCore: ...
    def add(
        self,
        data: bytes | str,
        id: str | None,
        delay: _Duration,
        at: _Time | None,
        lane: str | None,
        max_attempts: int,
        keep: _Keep | None,
        priority: int | None,
        inbox: str | None,
    ) -> tuple[str, bool]: ...
    def add_unique(
        self,
        data: bytes | str,
        unique_key: str,
        unique_for: _Duration,
        id: str | None,
        delay: _Duration,
        at: _Time | None,
        lane: str | None,
        max_attempts: int,
        keep: _Keep | None,
        priority: int | None,
        inbox: str | None,
    ) -> UniqueAdd: ...
    def add_many(self, jobs: Iterable[Mapping[str, Any] | bytes | str], max_attempts: int) -> list[str]: ...
    def claim(self, n: int, lease: _Duration) -> list[Job]: ...
    def extend(self, job: Job, lease: _Duration) -> bool: ...
    def extend_many(self, jobs: Sequence[Job], lease: _Duration) -> list[bool]: ...
    def complete(self, job: Job, result: _Result | None) -> bool: ...
    def complete_many(self, jobs: Sequence[Job | tuple[Job, _Result | None]]) -> list[bool]: ...
    def complete_and_claim(
        self, jobs: Sequence[Job | tuple[Job, _Result | None]], n: int, lease: _Duration
    ) -> tuple[list[bool], list[Job] | None]: ...
    def fail(
        self,
        job: Job,
        error: _Failure,
        retry_in: _Duration | None,
        error_type: str | None,
        traceback: str | None,
        retry: bool | None = None,
    ) -> FailOutcome: ...
    def settle_many(
        self,
        items: Sequence[Job | tuple[Job, _Failure] | tuple[Job, _Failure, _Duration | None] | Mapping[str, Any]],
    ) -> list[bool | FailOutcome]: ...
    def progress(self, job: Job, value: bytes | str | int | float) -> bool: ...
    def status(self, ids: Sequence[str]) -> list[Job | None]: ...
    def watch(self, ids: Sequence[str], inbox: str) -> list[Job | None]: ...
    def pop_inbox(self, inbox: str, timeout: _Duration | None, client: Client) -> list[str]: ...
    def cancel(self, id: str) -> CancelOutcome: ...
    def cancel_requests(self, since: int | None) -> CancelRequests: ...
    def pause_lane(self, lane: str) -> None: ...
    def resume_lane(self, lane: str) -> None: ...
    def set_lane_limit(self, lane: str, n: int) -> None: ...
    def get(self, id: str) -> Job | None: ...
    def lanes(self) -> list[str]: ...
    def counts(self) -> QueueCounts: ...
    def jobs(self, state: str, lane: str | None, offset: int, limit: int) -> tuple[list[Job], int]: ...
    def retry(self, ids: Iterable[str]) -> list[tuple[str, str]]: ...
    def delete(self, ids: Iterable[str]) -> list[tuple[str, str]]: ...
    def promote_now(self, ids: Iterable[str]) -> list[tuple[str, str]]: ...
    def retry_dead(self, limit: int | None) -> int: ...
    def lane_controls(self, lanes: Iterable[str]) -> list[tuple[bool, int, int, bool]]: ...
    def throughput(self, minutes: int) -> tuple[int, list[tuple[int, int, int, int, int, int]]]: ...
    def retention(self) -> Retention: ...
    def set_retention(
        self, *, keep_done: _Duration | None = ..., keep_dead: _Duration | None = ..., max_dead: int | None = ...
    ) -> None: ...
    def schedule(
        self,
        name: str,
        cron: str | None,
        every: _Duration | None,
        tz: str | None,
        missed: str,
        max_missed: int | None,
        grace: _Duration | None,
        data: bytes | str,
        lane: str | None,
        max_attempts: int,
    ) -> bool: ...
    def unschedule(self, name: str) -> bool: ...
    def pause_schedule(self, name: str) -> bool: ...
    def resume_schedule(self, name: str) -> bool: ...
    def run_schedule_now(self, name: str) -> tuple[str, bool]: ...
    def schedules(self) -> list[dict[str, Any]]: ...
    def timers(self, batch: int, backend: str) -> tuple[list[str], int, int, int]: ...
    def promote(self, batch: int, backend: str, group: int | None) -> int: ...
    def stalled_check(self, max_stalled: int | None, batch: int, backend: str, group: int | None) -> StalledOutcome: ...
    def _promote_next(self, batch: int) -> tuple[int, float | None]: ...
    def _stalled_next(self, max_stalled: int | None, batch: int) -> tuple[list[str], list[str], float | None]: ...

"""What a worker (or a stalled sweeper) has done, counted as it runs and read at any time."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Counters:
    """What a worker has done; read them at any time."""

    beats: int = 0
    sweeps: int = 0
    moved: int = 0
    recovered: int = 0
    dead: int = 0
    claimed: int = 0
    completed: int = 0
    failed: int = 0
    refused: int = 0
    lost_leases: int = 0
    degraded_beats: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

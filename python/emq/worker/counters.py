"""What a worker (or a stalled sweeper) has done, counted as it runs and read at any time."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass
class Counters:
    """What a worker has done; read them at any time. Each counts what its name
    says, once the server answered for it."""

    beats: int = 0
    """Beats run (recover, promote, claim, park)."""
    sweeps: int = 0
    """Promotes and stalled checks run."""
    moved: int = 0
    """Due jobs its promotes moved to ready."""
    recovered: int = 0
    """Jobs whose leases ran out that its stalled checks made ready again."""
    dead: int = 0
    """Jobs it made dead: a failed last attempt, or a
    job whose leases ran out too often (its stalled checks)."""
    claimed: int = 0
    """Jobs it claimed."""
    completed: int = 0
    """Jobs it completed (done)."""
    failed: int = 0
    """Runs whose handler raised (or failed): each then `retried`, `dead`, `cancelled` or `refused`."""
    retried: int = 0
    """Failed runs whose job was scheduled again (attempts were left)."""
    cancelled: int = 0
    """Runs of jobs asked to stop (`Queue.cancel`) that ended: their jobs are cancelled."""
    refused: int = 0
    """Settles refused: the job's lease had been lost (another worker holds it)."""
    lost_leases: int = 0
    """Leases of running jobs that an extend found lost."""
    degraded_beats: int = 0
    """Beats a server's error cut short (backed off, then tried again)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

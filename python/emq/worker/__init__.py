"""Workers: run a queue's jobs in this process (SPEC §8), and the opt-in stalled sweeper.

A worker is a beat (recover, promote, claim, park) that hands the jobs it
claims to a pool of handler threads; a group commit settles each queue's
finished jobs together, and a keeper extends the leases of the jobs that run.
It owns three connections, siblings of its queue's client (the same address,
credentials, TLS, database and timeouts): the beat's (sweeps and claims), the
park's (a blocking pop on `wake`, so a parked worker never holds up the
others), and the handlers' (extend, complete, fail).

A wire error (the connection broke, a timeout, an unknown outcome), contention,
or a server that cannot serve now (a replica, out of memory, loading) degrades a
beat: it backs off and tries again. An error that no retry can mend (bad
arguments, a key of the wrong type, credentials refused, a permission denied:
`FATAL`) is fatal for the queue: the worker stops, and `run()` raises it.

The package's modules are the worker's roles, each owning its state:

- `options`: the options, checked once into a frozen `Options`, and the
  timing constants, with their reasons;
- `connections`: the worker's own connections;
- `beat`: the beat loop and its timing (when to promote, how long to park);
- `parking`: the threads parked on `wake`, for one queue and for several;
- `outcomes`: how a handler's run ends (`Done`, `Failed`), as the worker settles it;
- `handlers`: the handler pool and the slots its jobs hold;
- `group_commit`: a queue's finished jobs settled together (`GroupCommit`);
- `leases`: the lease keeper;
- `shutdown`: which errors stop a worker and which it backs off from, and its stop;
- `counters`: what it has done (`Counters`);
- `stalled`: the opt-in stalled sweeper (`Stalled`);
- `worker`: `Worker`, which makes these parts and runs them.

Why so: each part is one thread's work (the beat, a park, the handlers, a
commit, the keeper), or state that threads share under one lock (the slots),
so its events and locks live with it and nowhere else, and the worker's next
capability is one more part it composes. The parts import downwards (options,
counters and shutdown first, the worker last): no cycle.
"""

from __future__ import annotations

from .counters import Counters
from .group_commit import GroupCommit
from .options import BUSY_PROMOTE_S, IDLE_BEAT_S, LONGEST_BEAT, U32, WARM_S, YIELD_S, Recovery
from .outcomes import Done, Failed
from .shutdown import FATAL, degraded_sleep
from .stalled import Stalled
from .worker import Worker

__all__ = [
    "BUSY_PROMOTE_S",
    "FATAL",
    "IDLE_BEAT_S",
    "LONGEST_BEAT",
    "U32",
    "WARM_S",
    "YIELD_S",
    "Counters",
    "Done",
    "Failed",
    "GroupCommit",
    "Recovery",
    "Stalled",
    "Worker",
    "degraded_sleep",
]

"""Lateness of jobs added with a delay shorter than the beat while workers park.

    python benches/delays.py                  # embedded Valkey 9.1, 4 workers, 300 jobs (~1 minute)
    python benches/delays.py --server redis   # Debian's Redis 7.0
    python benches/delays.py --beat-ms 5000   # a longer beat: the lateness must not follow it

Workers (`--workers`, each an `emq.Worker` on a thread of this process, with
its own connections) start on an empty queue and park. Then, at random moments
(0 to `--gap-ms` apart), a producer adds `--jobs` no-op jobs, each with a delay
drawn from 10 to 300 ms: the retry backoffs and short waits that a beat of one
second used to round up. Each handler records when it started on the server's
clock; lateness = start - due (the due time the add wrote). Reports p50, p90,
p99 and max in ms.

Before the wake for a new head of `schedule` (SPEC §7), a job like these waited
for the next beat: p50 370 ms, p99 780 ms at `beat=1`.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import threading
import time

import redis

import emq
from emq.embedded import Server


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def run(url: str, *, workers: int, jobs: int, beat_ms: int, gap_ms: int, seed: int) -> list[int]:
    r = redis.Redis.from_url(url)
    r.flushall()
    queue = "delays"
    late: dict[str, int] = {}  # id -> handler start - due, server ms
    lock = threading.Lock()

    def handler(job):
        t = server_ms(r)
        due = int(r.hget(f"emq:{{{queue}}}:job:{job.id}", "due"))  # a claimed Job does not carry it
        with lock:
            late[job.id] = t - due

    ws = [emq.Worker(emq.Queue(emq.connect(url), queue), handler, beat=beat_ms / 1000, concurrency=4) for _ in range(workers)]
    threads = [threading.Thread(target=w.run, daemon=True) for w in ws]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while any(w.counters.snapshot()["beats"] < 1 for w in ws):
        if time.monotonic() > deadline:
            raise RuntimeError("the workers did not start")
        time.sleep(0.01)
    time.sleep(beat_ms / 2000)  # mid-park
    q = emq.Queue(emq.connect(url), queue)
    rng = random.Random(seed)
    ids = []
    for _ in range(jobs):
        time.sleep(rng.uniform(0, gap_ms / 1000))
        ids.append(q.add(b"", delay=rng.randint(10, 300) / 1000))
    deadline = time.monotonic() + 30 + 2 * beat_ms / 1000
    while len(late) < len(ids):
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(late)} of {len(ids)} jobs ran")
        time.sleep(0.01)
    for w in ws:
        w.stop()
    for t in threads:
        t.join(10)
    return [late[i] for i in ids]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["valkey", "redis"], default="valkey")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=300)
    ap.add_argument("--beat-ms", type=int, default=1000)
    ap.add_argument("--gap-ms", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    cfg = ap.parse_args()
    binary = None if cfg.server == "valkey" else shutil.which("redis-server")
    srv = Server(binary).start()
    try:
        late = run(srv.url, workers=cfg.workers, jobs=cfg.jobs, beat_ms=cfg.beat_ms, gap_ms=cfg.gap_ms, seed=cfg.seed)
    finally:
        srv.stop()
    print(
        f"{cfg.server}: {len(late)} jobs, delays 10-300 ms, {cfg.workers} workers parked, beat {cfg.beat_ms} ms: "
        f"lateness p50 {statistics.median(late):.1f} ms, p90 {pct(late, 90):.1f}, p99 {pct(late, 99):.1f}, max {max(late):.1f}"
    )


if __name__ == "__main__":
    main()

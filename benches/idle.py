"""What idle workers cost the server: commands per second from workers parked on
an empty queue.

    python benches/idle.py                          # 4 workers, beat 1 s, then idle_beat_ms 30 s
    python benches/idle.py --server redis --seconds 60

Workers (`--workers`, each an `emq.Worker` on a thread of this process, with
its own connections) start on an empty queue; after `--settle` seconds the
server's stats are reset (`CONFIG RESETSTAT`), and after `--seconds` more the
calls it counted (`INFO commandstats`, every command) are divided by the time.
One row per `idle_beat` setting, in one run on one server. BullMQ's Python
workers measured about 2 commands/s for 4 workers on this machine
(`benches/compare.py` measures the peers).
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time

import redis

import emq
from emq.embedded import Server


def idle_rate(url: str, *, workers: int, beat_ms: int, idle_beat_ms: int | None, settle_s: float, seconds: float) -> tuple[float, dict]:
    r = redis.Redis.from_url(url)
    r.flushall()
    ws = [
        emq.Worker(
            emq.Queue(emq.connect(url), "idle"),
            lambda job: None,
            beat=beat_ms / 1000,
            idle_beat=None if idle_beat_ms is None else idle_beat_ms / 1000,
        )
        for _ in range(workers)
    ]
    threads = [threading.Thread(target=w.run, daemon=True) for w in ws]
    for t in threads:
        t.start()
    time.sleep(settle_s)
    r.config_resetstat()
    time.sleep(seconds)
    stats = r.info("commandstats")
    for w in ws:
        w.stop()
    for t in threads:
        t.join(10)
    # The reading connection's own INFO is left out.
    calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items() if k != "cmdstat_info"}
    return sum(calls.values()) / seconds, calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", choices=["valkey", "redis"], default="valkey")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--beat-ms", type=int, default=1000)
    ap.add_argument("--idle-beat-ms", type=int, nargs="*", default=[0, 30_000], help="0: the default (beat_ms)")
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=30.0)
    cfg = ap.parse_args()
    binary = None if cfg.server == "valkey" else shutil.which("redis-server")
    srv = Server(binary).start()
    try:
        for idle in cfg.idle_beat_ms:
            rate, calls = idle_rate(
                srv.url, workers=cfg.workers, beat_ms=cfg.beat_ms, idle_beat_ms=idle or None, settle_s=cfg.settle, seconds=cfg.seconds
            )
            top = ", ".join(f"{k} {v}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:6])
            print(
                f"{cfg.server}: {cfg.workers} idle workers, beat {cfg.beat_ms} ms, idle_beat_ms {idle or 'default'}: "
                f"{rate:.2f} commands/s over {cfg.seconds:.0f} s ({top})"
            )
    finally:
        srv.stop()


if __name__ == "__main__":
    main()

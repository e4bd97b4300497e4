"""The cluster benchmark: the same queues on one node and on a 3-primary cluster.

Both run the embedded Valkey 9.1 (as emq starts it), started here on loopback:
one server, and a cluster of three primaries (tests/servers.py makes it; every
slot served, node i owning the i-th third). The queues are the same three names,
one per primary in the cluster, all on the one server otherwise. For each setup
and each repeat, fresh state:

- **promote**: `--jobs` due jobs a queue (added with a 1 ms delay), then
  `emq.promote(batch=1000)` on each queue in turn until none moves;
- **claim + complete**: `--jobs` ready jobs a queue, then `claim(100)` and a
  `complete` of each, queue after queue, until all are done;
- **worker**: `--jobs` ready jobs a queue, then one `emq.Worker` over the three
  queues (16 handler threads, a no-op handler) until every job is done (the
  wait polls `counts()` every 20 ms, which the figures include).

Measured over the sweeping or the claiming (the fill is not timed): wall time,
this process's CPU (the client: Python and the Rust core) and the servers' CPU
(`INFO cpu`, summed over the nodes), each per job. The table shows medians over
`--repeats` and the ratio cluster / one node. The client runs the calls one after
another on one thread, so the cluster's three primaries do not work in parallel
here: what it measures is what routing costs a call (the slot lookup, a
connection a node), not what three cores could do. On this 2-core machine the
servers and the client share the cores.

    python benches/cluster.py              # 20,000 jobs a queue, 5 repeats (about 1 minute)
    python benches/cluster.py --jobs 5000 --repeats 3
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import emq  # noqa: E402
from emq.embedded import Server  # noqa: E402

import servers  # noqa: E402  (tests/servers.py: the cluster fixture's maker)

PHASES = ("promote", "claim+complete", "worker")


def server_cpu(ports: list[int]) -> float:
    total = 0.0
    for port in ports:
        c = emq.connect(f"redis://127.0.0.1:{port}")
        i = c.info("cpu")
        total += float(i["used_cpu_sys"]) + float(i["used_cpu_user"])
        c.close()
    return total


def measure(url: str, ports: list[int], names: list[str], jobs: int, phase: str) -> dict[str, float]:
    client = emq.connect(url, read_timeout=120)
    queues = [emq.Queue(client, n) for n in names]
    for p in ports:
        emq.connect(f"redis://127.0.0.1:{p}").command("FLUSHALL", "SYNC")
    for q in queues:
        for k in range(0, jobs, 1000):
            q.add_many([{"data": b"d" * 64, "delay_ms": 1 if phase == "promote" else 0}] * min(1000, jobs - k))
    time.sleep(0.01)
    s0, c0, t0 = server_cpu(ports), time.process_time(), time.perf_counter()
    if phase == "promote":
        for q in queues:
            while emq.promote(client, q.name, batch=1000):
                pass
    elif phase == "claim+complete":
        for q in queues:
            while got := q.claim(100):
                for j in got:
                    q.complete(j)
    else:  # worker: one emq.Worker over the three queues, no-op handler
        w = emq.Worker(queues, lambda job: None, concurrency=16, beat_ms=100)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        while sum(q.counts()["done"] for q in queues) < jobs * len(queues):
            time.sleep(0.02)
        w.stop()
        t.join(30)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    srv = server_cpu(ports) - s0
    n = jobs * len(queues)
    assert all(q.counts()["pending"] == (n // len(queues) if phase == "promote" else 0) for q in queues)
    if phase == "worker":  # the jobs' rows go on being kept (retention): none lost
        assert sum(q.counts()["done"] for q in queues) == n
    client.close()
    return {"jobs/s": n / wall, "client µs/job": cpu / n * 1e6, "server µs/job": srv / n * 1e6}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=20_000, help="jobs a queue (default 20000)")
    ap.add_argument("--repeats", "-R", type=int, default=5)
    args = ap.parse_args()
    single = Server().start()
    cluster = servers.start_cluster("valkey")
    try:
        names = [cluster.queue_on(i, prefix="bench") for i in range(3)]
        setups = {
            "one node": (single.url, [single.port]),
            "cluster": (cluster.url, [s.port for s in cluster.nodes]),
        }
        results: dict[tuple[str, str], list[dict[str, float]]] = {}
        for rep in range(args.repeats):
            for phase in PHASES:
                order = list(setups) if rep % 2 == 0 else list(reversed(setups))
                for setup in order:
                    url, ports = setups[setup]
                    results.setdefault((phase, setup), []).append(measure(url, ports, names, args.jobs, phase))
        print(f"{args.jobs:,} jobs a queue, 3 queues, medians of {args.repeats} (cluster: one queue a primary)")
        print(f"{'phase':16} {'metric':15} {'one node':>10} {'cluster':>10} {'cluster/one':>12}")
        for phase in PHASES:
            for metric in ("jobs/s", "client µs/job", "server µs/job"):
                one = statistics.median(r[metric] for r in results[(phase, "one node")])
                clu = statistics.median(r[metric] for r in results[(phase, "cluster")])
                print(f"{phase:16} {metric:15} {one:10.2f} {clu:10.2f} {clu / one:11.2f}x")
    finally:
        single.stop()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

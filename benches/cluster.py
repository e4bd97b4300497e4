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
  wait polls `counts()` every 20 ms, which the figures include);
- **parallel**: `--jobs` ready jobs a queue, then three client processes at
  once, one a queue, each `claim(100)` + `complete_many` until its queue is
  empty: the aggregate. Client CPU is the three processes'; each server's CPU
  over the wall time is printed too (how busy each primary was), since on this
  2-core machine the three clients and the servers share two cores.

Measured over the sweeping or the claiming (the fill is not timed): wall time,
this process's CPU (the client: Python and the Rust core) and the servers' CPU
(`INFO cpu`, summed over the nodes), each per job. The table shows medians over
`--repeats` and the ratio cluster / one node. In the first three phases the client
runs the calls one after another on one thread, so the cluster's three
primaries do not work in parallel: what they measure is what routing costs a
call (the slot lookup, a connection a node), not what three cores could do. On this 2-core machine the
servers and the client share the cores.

    python benches/cluster.py              # 20,000 jobs a queue, 5 repeats (about 2 minutes)
    python benches/cluster.py --jobs 5000 --repeats 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
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

PHASES = ("promote", "claim+complete", "worker", "parallel")


def node_cpu(ports: list[int]) -> list[float]:
    out = []
    for port in ports:
        c = emq.connect(f"redis://127.0.0.1:{port}")
        i = c.info("cpu")
        out.append(float(i["used_cpu_sys"]) + float(i["used_cpu_user"]))
        c.close()
    return out


def server_cpu(ports: list[int]) -> float:
    return sum(node_cpu(ports))


def drain(url: str, name: str, ready, go) -> None:
    """A client process of the parallel phase: connects, says so, waits for the
    start, then claims and completes until its queue is empty."""
    q = emq.Queue(emq.connect(url, read_timeout=120), name)
    q.counts()
    ready.set()
    go.wait()
    while got := q.claim(100):
        q.complete_many(got)


def parallel(url: str, names: list[str]) -> float:
    """The parallel phase's wall time: three processes, one a queue, at once."""
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    readies = [ctx.Event() for _ in names]
    procs = [ctx.Process(target=drain, args=(url, n, r, go)) for n, r in zip(names, readies)]
    for p in procs:
        p.start()
    for r in readies:
        r.wait(60)
    t0 = time.perf_counter()
    go.set()
    for p in procs:
        p.join(300)
    return time.perf_counter() - t0


def measure(url: str, ports: list[int], names: list[str], jobs: int, phase: str) -> dict[str, float]:
    client = emq.connect(url, read_timeout=120)
    queues = [emq.Queue(client, n) for n in names]
    for p in ports:
        emq.connect(f"redis://127.0.0.1:{p}").command("FLUSHALL", "SYNC")
    for q in queues:
        for k in range(0, jobs, 1000):
            q.add_many([{"data": b"d" * 64, "delay": 0.001 if phase == "promote" else 0}] * min(1000, jobs - k))
    time.sleep(0.01)
    if phase == "parallel":
        s0, k0 = node_cpu(ports), resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = parallel(url, names)
        k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy = [(b - a) / wall for a, b in zip(s0, node_cpu(ports))]
        n = jobs * len(queues)
        assert all(q.counts().done == jobs for q in queues)
        client.close()
        cpu = (k1.ru_utime + k1.ru_stime) - (k0.ru_utime + k0.ru_stime)
        out = {"jobs/s": n / wall, "client µs/job": cpu / n * 1e6, "server µs/job": sum(busy) * wall / n * 1e6}
        out.update({f"node {i} busy": b for i, b in enumerate(busy)})
        return out
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
        w = emq.Worker(queues, lambda job: None, concurrency=16, beat=0.1)
        t = threading.Thread(target=w.run, daemon=True)
        t.start()
        while sum(q.counts().done for q in queues) < jobs * len(queues):
            time.sleep(0.02)
        w.stop()
        t.join(30)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    srv = server_cpu(ports) - s0
    n = jobs * len(queues)
    assert all(q.counts().pending == (n // len(queues) if phase == "promote" else 0) for q in queues)
    if phase == "worker":  # the jobs' rows go on being kept (retention): none lost
        assert sum(q.counts().done for q in queues) == n
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
        busy = {
            setup: [statistics.median(r[f"node {i} busy"] for r in results[("parallel", setup)]) for i in range(len(ports))]
            for setup, (_, ports) in setups.items()
        }
        print("parallel: each server's CPU over the wall time (1.0: a whole core):")
        for setup, b in busy.items():
            print(f"  {setup:9} " + " ".join(f"{x:.2f}" for x in b))
    finally:
        single.stop()
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

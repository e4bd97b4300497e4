"""The retention benchmark: the server's memory under a steady load, with and
without a retention policy.

A steady load runs through the core as tests/test_retention.py runs it, only
longer: `add_many` of `--batch` jobs (`--payload` bytes of data, max_attempts 1),
`claim` them, then `complete` each one, except one in `--fail-every` that fails
and so dies; at most `--rate` jobs a second (0: as fast as it goes). Every
`--sample-every` jobs it reads `INFO memory` `used_memory`. It runs once per
policy on a fresh server (FLUSHALL between):

- with: `Queue.set_retention(keep_done=--keep-done-s, max_dead=--max-dead,
  keep_dead=--keep-dead-s)` (by default done rows kept 1 s, 100 dead jobs);
- without: `keep_done=None, keep_dead=None, max_dead=None` (nothing bounded,
  as before retention).

It prints used_memory over the run as a table (one column per policy) and the
growth per job: (last sample - the sample at 10% of the jobs) / the jobs between.

    python benches/retention.py                          # 1,000,000 jobs a policy, Valkey
    python benches/retention.py --jobs 100000 --servers valkey,redis
    python benches/retention.py --policies with --keep-done-s 60 --rate 0

See benches/README.md ("Retention").
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

import emq
from emq.embedded import Server, valkey_binary

HERE = Path(__file__).resolve().parent


def server_binary(name: str) -> str:
    binary = valkey_binary() if name == "valkey" else shutil.which("redis-server")
    if not binary:
        sys.exit(f"no {name} server binary")
    return binary


def seconds(v: str) -> float | None:
    return None if v in ("none", "None", "forever") else float(v)


def count(v: str) -> int | None:
    return None if v in ("none", "None") else int(v)


def steady_load(client: emq.Client, q: emq.Queue, args) -> list[dict]:
    payload = b"p" * args.payload
    jobs = [{"data": payload, "max_attempts": 1}] * args.batch
    samples = []
    n = 0
    t0 = time.monotonic()
    next_sample = args.sample_every
    while n < args.jobs:
        q.add_many(jobs)
        for k, j in enumerate(q.claim(args.batch, lease=600)):
            if args.fail_every and k % args.fail_every == 0:
                q.fail(j, "boom")
            else:
                q.complete(j)
        n += args.batch
        if args.rate:
            ahead = n / args.rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)
        if n >= next_sample:
            next_sample += args.sample_every
            mem = client.info("memory")
            samples.append({"jobs": n, "s": round(time.monotonic() - t0, 1), "used_memory": int(mem["used_memory"])})
            print(f"  {n:>9,} jobs  {samples[-1]['s']:7.1f} s  {int(mem['used_memory']) / 2**20:9.2f} MiB", flush=True)
    return samples


def per_job(samples: list[dict], jobs: int) -> float:
    """Bytes a job: growth from the sample at 10% of the jobs to the last one."""
    base = next(s for s in samples if s["jobs"] >= jobs // 10)
    last = samples[-1]
    return (last["used_memory"] - base["used_memory"]) / max(1, last["jobs"] - base["jobs"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--servers", default="valkey", help="valkey,redis")
    ap.add_argument("--policies", default="with,without")
    ap.add_argument("--keep-done-s", type=seconds, default=1.0, help="the 'with' policy ('none': forever)")
    ap.add_argument("--keep-dead-s", type=seconds, default=None, help="the 'with' policy (default: leave emq's 30 days)")
    ap.add_argument("--max-dead", type=count, default=100, help="the 'with' policy ('none': no limit)")
    ap.add_argument("--rate", type=float, default=4000, help="jobs a second at most (0: unpaced)")
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--fail-every", type=int, default=10, help="one job in N dies (0: none)")
    ap.add_argument("--payload", type=int, default=200, help="bytes of data a job")
    ap.add_argument("--sample-every", type=int, default=None, help="jobs (default: --jobs / 20)")
    ap.add_argument("--out", type=Path, default=None, help="write the samples as JSON here")
    args = ap.parse_args()
    args.sample_every = args.sample_every or max(args.batch, args.jobs // 20)

    results: dict = {}
    for name in args.servers.split(","):
        srv = Server(server_binary(name)).start()
        try:
            client = emq.connect(srv.url)
            info = client.info("server")
            label = f"{name} {info.get('valkey_version') or info.get('redis_version')}"
            results[label] = {}
            for policy in args.policies.split(","):
                client.command("FLUSHALL")
                q = emq.Queue(client, "bench-retention")
                if policy == "with":
                    kw = {"keep_done": args.keep_done_s, "max_dead": args.max_dead}
                    if args.keep_dead_s is not None:
                        kw["keep_dead"] = args.keep_dead_s
                    q.set_retention(**kw)
                else:
                    q.set_retention(keep_done=None, keep_dead=None, max_dead=None)
                print(f"{label}, {policy} retention: {q.retention()}", flush=True)
                samples = steady_load(client, q, args)
                counts = dataclasses.asdict(q.counts())
                peak = int(client.info("memory")["used_memory_peak"])
                results[label][policy] = {
                    "policy": dataclasses.asdict(q.retention()),
                    "samples": samples,
                    "counts": counts,
                    "peak": peak,
                    "per_job": per_job(samples, args.jobs),
                }
            client.close()
        finally:
            srv.stop()

    print()
    print(
        f"{args.jobs:,} jobs, batch {args.batch}, {args.payload}-byte data, 1 in {args.fail_every} dies, "
        f"{'unpaced' if not args.rate else f'at most {args.rate:,.0f} jobs/s'}"
    )
    for label, by_policy in results.items():
        policies = list(by_policy)
        print(f"\n{label}: used_memory, MiB")
        print("| jobs | " + " | ".join(policies) + " |")
        print("|---:|" + "---:|" * len(policies))
        rows = zip(*(by_policy[p]["samples"] for p in policies))
        for row in rows:
            print(f"| {row[0]['jobs']:,} | " + " | ".join(f"{s['used_memory'] / 2**20:.1f}" for s in row) + " |")
        for p in policies:
            r = by_policy[p]
            c = r["counts"]
            print(
                f"{p}: {r['per_job']:.1f} bytes a job (growth after 10% of the jobs), peak {r['peak'] / 2**20:.1f} MiB, "
                f"left: done {c['done']:,}, dead {c['dead']:,}"
            )
    if args.out:
        args.out.write_text(
            json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}, "results": results}, indent=1)
        )


if __name__ == "__main__":
    main()

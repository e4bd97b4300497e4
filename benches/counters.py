"""What the per-minute counters cost the server per job: their `HINCRBY` and `PEXPIRE` against the whole settle.

The counters (`P stats:<minute>`, SPEC §17) are written by the calls that settle
jobs, in their own transaction: one `HINCRBY` per kind of outcome present in the
call and one `PEXPIRE`, whatever the number of jobs, so a group commit of 100
jobs pays two or three commands for all of them. There is no switch to turn them
off, so the cost "without" is the whole cost less theirs: `INFO commandstats`
gives each command's usec, and the counters' share is the usec of `HINCRBY` and
`PEXPIRE` (no other write of these settles sends either: flat jobs, no lane's
`active`, no waiter's inbox) over the usec of every command of the run.

For each group size (`--groups`, jobs per settling call), `--jobs` flat jobs are
added, then claimed and settled `group` at a time through `complete_many`
(a tenth failed through `settle_many` instead, so a call writes two kinds), on
one embedded Valkey started here; the report gives per job:

- the server's CPU (`used_cpu_user + used_cpu_sys` of `INFO`, in µs), the adds
  and claims included;
- the usec of every command of the settles, and of the counters' commands, with
  their share;
- the counters' commands per job.

    python benches/counters.py                          # 100,000 jobs, groups 1, 10, 100
    python benches/counters.py --jobs 2000 --groups 1,100   # a smoke
"""

from __future__ import annotations

import argparse
import time

import emq
from emq.embedded import Server, valkey_binary

QUEUE = "bench-counters"
COUNTERS = ("hincrby", "pexpire")
"""The commands the counters send (and, in this run, nothing else does)."""


def command_usec(client: emq.Client) -> dict[str, tuple[int, int]]:
    """Each command's (calls, usec) so far (`INFO commandstats`)."""
    out = {}
    for name, line in client.info("commandstats").items():
        fields = dict(part.split("=", 1) for part in line.split(","))
        out[name.removeprefix("cmdstat_")] = (int(fields["calls"]), int(fields["usec"]))
    return out


def server_cpu_us(client: emq.Client) -> float:
    info = client.info("cpu")
    return (float(info["used_cpu_user"]) + float(info["used_cpu_sys"])) * 1e6


def run(client: emq.Client, jobs: int, group: int) -> dict[str, float]:
    """`jobs` jobs added, claimed and settled `group` at a time; the per-job figures."""
    q = emq.Queue(client, f"{QUEUE}-{group}")
    q.set_retention(keep_done=0)  # done rows deleted at once: the same work at every size
    for start in range(0, jobs, 10_000):
        q.add_many([b"x"] * min(10_000, jobs - start))
    client.pipeline([["CONFIG", "RESETSTAT"]])
    cpu0 = server_cpu_us(client)
    t0 = time.perf_counter()
    settled = 0
    while settled < jobs:
        held = q.claim(group, lease=60)
        if not held:
            break
        failing = held[: len(held) // 10]
        if failing:
            q.settle_many([*((j, "RuntimeError: boom") for j in failing), *held[len(failing) :]])
        else:
            q.complete_many(held)
        settled += len(held)
    wall = time.perf_counter() - t0
    cpu = server_cpu_us(client) - cpu0
    stats = command_usec(client)
    stats.pop("info", None)
    stats.pop("config", None)
    every = sum(usec for _, usec in stats.values())
    counters = sum(stats.get(c, (0, 0))[1] for c in COUNTERS)
    calls = sum(stats.get(c, (0, 0))[0] for c in COUNTERS)
    return {
        "jobs/s": settled / wall,
        "cpu_us": cpu / settled,
        "cmd_us": every / settled,
        "counters_us": counters / settled,
        "share": counters / every if every else 0.0,
        "counter_cmds": calls / settled,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--groups", default="1,10,100", help="jobs per settling call, comma-separated")
    args = ap.parse_args(argv)
    groups = [int(g) for g in args.groups.split(",")]
    srv = Server(valkey_binary()).start()
    try:
        client = emq.connect(srv.url)
        print(f"{args.jobs:,} jobs a group size; per job: server CPU, commands' usec, the counters' usec and share")
        print(f"{'group':>6} {'jobs/s':>9} {'cpu µs':>8} {'cmds µs':>8} {'counters µs':>12} {'share':>7} {'counter cmds':>13}")
        for g in groups:
            r = run(client, args.jobs, g)
            print(
                f"{g:6} {r['jobs/s']:9.0f} {r['cpu_us']:8.2f} {r['cmd_us']:8.2f} {r['counters_us']:12.3f}"
                f" {r['share']:7.1%} {r['counter_cmds']:13.3f}"
            )
        print("without the counters: each cpu µs less the counters' µs (no switch turns them off)")
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

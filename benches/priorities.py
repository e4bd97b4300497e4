"""The priorities benchmark: a claim's server CPU with a small and a large backlog over 10 levels.

SPEC §15 says a claim's cost does not grow with the number of ready jobs or of
levels in use; the goal is a claim with 1,000,000 ready jobs spread over the 10
levels at most 1.1x the server CPU of one with 1,000. For each server (started
here) and each backlog size: a fresh queue gets `size` ready jobs, job `i` at
priority `i % 10` (`add_many`, chunks of 1,000), then one client claims
`--claims` times, `--batch` jobs a claim (lease an hour: nothing is recovered
meanwhile). Only the claims are measured, after `CONFIG RESETSTAT`:

- server CPU, `used_cpu_sys + used_cpu_user` of `INFO cpu`, after minus before,
  per claim (as claims.py counts it);
- the server's own time in commands, the sum of `usec` over `INFO commandstats`,
  per claim (less noise from the server's idle work than the CPU counters).

The claims of the small backlog cross levels (100 jobs a level at 1,000): they
read the level marks and the lists the large one never empties; so the ratio is
the cost a backlog adds, and any cost of levels shows in both. Prints each
cell and the ratios large / small.

    python benches/priorities.py                           # 1,000 vs 1,000,000 on valkey
    python benches/priorities.py --servers valkey,redis --runs 3
    python benches/priorities.py --small 100 --large 2000 --claims 20   # a smoke run

The claims never empty the small backlog (the script refuses `--claims` x
`--batch` over `--small`): an empty queue's claims cost less and would flatter
the ratio.

See benches/README.md ("Priorities").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import emq
from emq.embedded import Server, valkey_binary

QUEUE = "bench-prio"
LEVELS = 10
CHUNK = 1_000


def binaries() -> dict[str, str | None]:
    import shutil

    sys.path.insert(0, "tests")
    try:
        from servers import valkey8_binary
    except ImportError:  # run from elsewhere: no Valkey 8.1
        valkey8 = None
    else:
        valkey8 = valkey8_binary()
    return {"valkey": valkey_binary(), "valkey8": valkey8, "redis": shutil.which("redis-server")}


def server_cpu(c: emq.Client) -> float:
    info = c.command("INFO", "cpu").decode()
    fields = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return float(fields["used_cpu_sys"]) + float(fields["used_cpu_user"])


def command_usec(c: emq.Client) -> int:
    info = c.command("INFO", "commandstats").decode()
    total = 0
    for line in info.splitlines():
        if line.startswith("cmdstat_"):
            stats = dict(kv.split("=", 1) for kv in line.split(":", 1)[1].split(","))
            total += int(stats["usec"])
    return total


def fill(q: emq.Queue, size: int) -> None:
    for start in range(0, size, CHUNK):
        q.add_many([{"data": b"x", "priority": i % LEVELS, "at": 0} for i in range(start, min(size, start + CHUNK))])


def one_cell(c: emq.Client, size: int, claims: int, batch: int) -> tuple[float, float]:
    """(server CPU µs, command µs) per claim, for a backlog of `size`."""
    c.command("FLUSHALL")
    q = emq.Queue(c, QUEUE)
    fill(q, size)
    c.command("CONFIG", "RESETSTAT")
    cpu0, usec0 = server_cpu(c), command_usec(c)
    taken = 0
    for _ in range(claims):
        taken += len(q.claim(batch, lease=3600))
    cpu1, usec1 = server_cpu(c), command_usec(c)
    if taken != min(size, claims * batch):
        raise SystemExit(f"priorities: {taken} jobs claimed of {min(size, claims * batch)} expected")
    return (cpu1 - cpu0) * 1e6 / claims, (usec1 - usec0) / claims


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", default="valkey", help="comma-separated: valkey, valkey8, redis")
    ap.add_argument("--small", type=int, default=1_000, help="the small backlog (ready jobs)")
    ap.add_argument("--large", type=int, default=1_000_000, help="the large backlog (ready jobs)")
    ap.add_argument("--claims", type=int, default=500, help="claims measured per cell (at most --small / --batch)")
    ap.add_argument("--batch", type=int, default=1, help="jobs a claim asks for")
    ap.add_argument("--runs", type=int, default=1, help="cells per size, interleaved; medians shown")
    args = ap.parse_args(argv)
    if args.claims * args.batch > args.small:
        # A backlog that runs dry mid-run measures empty claims, which are cheaper.
        ap.error(f"--claims x --batch ({args.claims * args.batch}) must not exceed --small ({args.small})")
    found = binaries()
    for name in args.servers.split(","):
        binary = found.get(name)
        if not binary:
            print(f"priorities: no binary for {name}; skipped", file=sys.stderr)
            continue
        server = Server(binary).start()
        try:
            c = emq.connect(server.url)
            cells: dict[int, list[tuple[float, float]]] = {args.small: [], args.large: []}
            for _ in range(args.runs):
                for size in (args.small, args.large):
                    started = time.monotonic()
                    cells[size].append(one_cell(c, size, args.claims, args.batch))
                    print(f"{name}: {size:>9,} ready, {time.monotonic() - started:.1f} s", file=sys.stderr)
            c.close()
        finally:
            server.stop()
        med = {size: (statistics.median(x[0] for x in v), statistics.median(x[1] for x in v)) for size, v in cells.items()}
        (cpu_s, usec_s), (cpu_l, usec_l) = med[args.small], med[args.large]
        print(f"{name}: a claim of {args.batch}, {args.claims} claims, medians of {args.runs}")
        print(f"  {args.small:>9,} ready over {LEVELS} levels: server CPU {cpu_s:8.1f} µs, in commands {usec_s:8.1f} µs")
        print(f"  {args.large:>9,} ready over {LEVELS} levels: server CPU {cpu_l:8.1f} µs, in commands {usec_l:8.1f} µs")
        ratio = (cpu_l / cpu_s) if cpu_s else float("nan")
        in_commands = (usec_l / usec_s) if usec_s else float("nan")
        print(f"  ratio large / small: server CPU {ratio:.3f}x, in commands {in_commands:.3f}x (goal <= 1.1x)")


if __name__ == "__main__":
    main()

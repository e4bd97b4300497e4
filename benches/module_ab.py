"""Two builds of emq's server module side by side: the time inside `EMQ.PROMOTE`
or `EMQ.STALLED.CHECK` a job (`INFO commandstats` usec), alternating.

`sweeps.py` compares the module with Lua and the plan by jobs/s and `INFO cpu`,
which a shared 2-core machine moves by 10 to 25% from run to run. To see a change
to the module itself, this starts one server per build (same binary, same
allocator), fills both with the same due jobs (or expired leases), sweeps them in
turns, the order alternating, and reports the median time inside the command a
job, and the ratio after/before. The time inside the command leaves out the
network and the event loop, which the two builds share.

    ./dev module && cp target/release/libemq_module.so /tmp/after.so
    git stash && ./dev module && cp target/release/libemq_module.so /tmp/before.so && git stash pop
    python benches/module_ab.py /tmp/before.so /tmp/after.so --server redis
    python benches/module_ab.py /tmp/before.so /tmp/after.so --server valkey --sweep stalled --batches 1000,100,10
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import emq  # noqa: E402
import sweeps  # noqa: E402  (benches/sweeps.py: the fill, the sweeper)
from emq.embedded import Server, valkey_binary  # noqa: E402

COMMAND = {"promote": "EMQ.PROMOTE", "stalled": "EMQ.STALLED.CHECK"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", help="a build of libemq_module.so")
    ap.add_argument("after", help="another build")
    ap.add_argument("--server", choices=["valkey", "valkey-libc", "redis"], default="redis")
    ap.add_argument("--sweep", choices=sorted(COMMAND), default="promote")
    ap.add_argument("--batches", default="1000,100")
    ap.add_argument("--jobs", type=int, default=20000, help="jobs a fill (default 20000)")
    ap.add_argument("--repeats", "-R", type=int, default=9)
    args = ap.parse_args(argv)
    batches = [int(b) for b in args.batches.split(",")]
    binary = shutil.which("redis-server") if args.server == "redis" else valkey_binary()
    if binary is None:
        ap.error("redis-server is not on PATH (./dev bench installs it)")
    malloc = "jemalloc" if args.server == "valkey" else "build"

    started = {}
    try:
        for tag, so in (("before", args.before), ("after", args.after)):
            s = Server(binary, malloc=malloc, module=str(Path(so).resolve())).start()
            started[tag] = (s, emq.connect(s.url, read_timeout=120), redis.Redis.from_url(s.url))
        times: dict = {(tag, b): [] for tag in started for b in batches}
        for rep in range(args.repeats):
            for b in batches:
                for tag in ("before", "after") if rep % 2 == 0 else ("after", "before"):
                    s, c, r = started[tag]
                    c.command("FLUSHALL", "SYNC")
                    base = c.time_ms() - 3_600_000 - 10 * args.jobs
                    fill = sweeps.build_fill(args.sweep, "flat", args.jobs, 4, base)
                    sweeps.send_raw(s.port, sweeps.for_impl(fill, "module"))
                    call = sweeps.sweeper("module", args.sweep, b, c, r)
                    c.command("CONFIG", "RESETSTAT")
                    moved = 0
                    while n := call():
                        moved += n
                    if moved != args.jobs:
                        raise RuntimeError(f"{tag}: moved {moved} of {args.jobs}")
                    stats = sweeps.parse_commandstats(c.info("commandstats"))[COMMAND[args.sweep]]
                    times[(tag, b)].append(stats["usec"] / args.jobs)
        print(f"{args.server}, {args.sweep}, {args.jobs:,} jobs a fill, medians of {args.repeats} alternating runs,", end=" ")
        print("us inside the command a job:")
        for b in batches:
            before, after = statistics.median(times[("before", b)]), statistics.median(times[("after", b)])
            print(f"  batch {b:5}: before {before:.3f}  after {after:.3f}  after/before {after / before:.3f}")
    finally:
        for s, c, r in started.values():
            c.close()
            r.close()
            s.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

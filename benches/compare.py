"""emq against the Python queues people use: BullMQ's Python package, arq, saq, rq.

    python benches/compare.py --setup            # the peers' virtualenvs (once)
    python benches/compare.py                    # full run, embedded Valkey 9.1 (~20 min)
    python benches/compare.py --server redis     # the same on Debian's Redis 7.0
    python benches/compare.py --quick            # smoke run (< 3 min)

One server on 127.0.0.1 for the whole run; before each system's turn it is
FLUSHALLed and its stats reset, and the previous system's processes are gone.
Each system runs its own worker processes, as its documentation says (its CLI
where it has one), with a no-op handler that records its start time (wall
clock) in a file. Per system and run:

1. idle: 4 workers (`--workers`) started on an empty queue; after `--settle`
   seconds, for `--idle-s` seconds, the commands they send (MONITOR, script
   internals left out) and the calls the server counts (INFO commandstats
   deltas, script internals included), per second;
2. lateness, light load: `--sched-jobs` jobs due at random times over
   `--window-s` seconds, the workers idle until then; handler start − due;
3. lateness, short delays: while the workers park, a producer adds
   `--delay-jobs` jobs one at a time, at random moments (0 to
   `--delay-gap-ms` apart), each due 10 to 300 ms after its add (a retry's
   backoff, a short wait); handler start − due;
4. lateness, heavy load: the same as 2. while a producer floods the queue with
   immediate no-op jobs at `--flood-rate` jobs/s;
5. throughput with 4 workers, then (after a restart) with 1: the workers
   running and idle, a producer adds `--tput-jobs` immediate no-op jobs as fast
   as it can in batches of 100 (the library's bulk add where it has one, else
   100 adds gathered concurrently); the clock runs from the first add to the
   moment every job has started and the queue holds none unfinished.

Medians over `--runs` runs; ratios against emq; JSON to
benches/results/compare-<server>.json, plots to benches/results/*.png, and
the table to benches/JOURNAL.md (the benches' journal) under "Against other queues".
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCHES = Path(__file__).resolve().parent
REPO = BENCHES.parent
RESULTS = BENCHES / "results"
VENVS = BENCHES / ".venvs"
# The journal of dated runs holds this section (benches/README.md has the standing).
README = BENCHES / "JOURNAL.md"
HEADING = "## Against other queues"

sys.path.insert(0, str(BENCHES))

import emq  # noqa: E402
from emq.embedded import Server  # noqa: E402

import peers.arq  # noqa: E402
import peers.bullmq  # noqa: E402
import peers.emq  # noqa: E402
import peers.emq_module  # noqa: E402
import peers.rq  # noqa: E402
import peers.saq  # noqa: E402

SYSTEMS = ["emq", "bullmq", "arq", "saq", "rq"]
# Not run unless named (`--systems emq,emq_module,bullmq`): emq's workers with the
# server module running their claims and commits (the server then loads it).
EXTRA = ["emq_module"]
PEERS = {
    "emq": peers.emq,
    "emq_module": peers.emq_module,
    "bullmq": peers.bullmq,
    "arq": peers.arq,
    "saq": peers.saq,
    "rq": peers.rq,
}
QUEUE = "bench"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def now_ms() -> float:
    return time.time() * 1000


def pct(xs: list[float], p: float) -> float | None:
    """Nearest-rank percentile."""
    if not xs:
        return None
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


# -- the peers' environments ----------------------------------------------------


def peer_pins() -> dict[str, str]:
    pins = {}
    for line in (BENCHES / "requirements.txt").read_text().splitlines():
        m = re.match(r"#peer\s+(\S+)\s+(.+)", line)
        if m:
            pins[m.group(1)] = m.group(2).split()
    return pins


def python_of(name: str) -> str:
    return sys.executable if name in ("emq", "emq_module") else str(VENVS / name / "bin" / "python")


def setup(names: list[str]) -> None:
    """One virtualenv per peer, its pinned package installed from PyPI."""
    pins = peer_pins()
    for name in names:
        if name in ("emq", "emq_module"):
            continue
        py = Path(python_of(name))
        if not py.exists():
            log(f"setup: virtualenv for {name}")
            subprocess.run([sys.executable, "-m", "venv", str(VENVS / name)], check=True)
        have = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
        want = pins[name]
        have = {x.lower().replace("-", "_") for x in have.split()}
        if any(re.sub(r"\[.*\]", "", w).lower().replace("-", "_") not in have for w in want):
            log(f"setup: pip install {' '.join(want)} into {VENVS / name}")
            subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", *want], check=True)


def versions_of(name: str, dists: tuple[str, ...] | None = None) -> dict[str, str]:
    """The versions of `dists` (default: the peer's own) and of redis-py and
    hiredis, as the system's interpreter sees them."""
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        f"for d in ({tuple(dists or (peer_dist(name),))!r} + ('redis', 'hiredis')):\n"
        "    try: out[d] = m.version(d)\n"
        "    except Exception: pass\n"
        "print(json.dumps(out))"
    )
    r = subprocess.run([python_of(name), "-c", code], capture_output=True, text=True, timeout=60)
    return json.loads(r.stdout) if r.returncode == 0 else {"error": r.stderr.strip()[-300:]}


def seed_index(name: str) -> int:
    """A system's place in the random seeds: emq_module draws emq's due times."""
    return SYSTEMS.index("emq" if name == "emq_module" else name)


def peer_dist(name: str) -> str:
    return PEERS[name].DIST


def sub_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env["PYTHONPATH"] = str(BENCHES) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


# -- the server -----------------------------------------------------------------


class Harness:
    """The harness's connection, counting the commands it sends itself."""

    def __init__(self, url: str):
        self.url = url
        self.client = emq.connect(url)
        self.sent: dict[str, int] = {}

    def cmd(self, *args):
        name = str(args[0]).lower()
        self.sent[name] = self.sent.get(name, 0) + 1
        return self.client.command(*args)

    def commandstats(self) -> dict[str, tuple[int, int]]:
        out = {}
        for k, v in self.client.info("commandstats").items():
            f = dict(x.split("=", 1) for x in v.split(","))
            out[k.removeprefix("cmdstat_")] = (int(f["calls"]), int(f["usec"]))
        return out

    def cpu_s(self) -> float:
        """The server process's CPU time so far (`INFO cpu`: user + system, s)."""
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def clients(self) -> int:
        return len([line for line in self.client.command("CLIENT", "LIST").decode().splitlines() if line.strip()])

    def fresh(self) -> None:
        """No connection but ours, nothing stored, stats reset."""
        deadline = time.monotonic() + 15
        while self.clients() > 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        if self.clients() > 1:
            log(f"warning: {self.clients() - 1} other connections still open")
        self.client.command("FLUSHALL")
        self.client.command("CONFIG", "RESETSTAT")
        self.sent = {}


class Monitor:
    """Counts the commands clients send, from MONITOR (script internals apart)."""

    LINE = re.compile(rb'^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"')

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.sent: dict[str, int] = {}
        self.lua: dict[str, int] = {}
        self.started = time.monotonic()
        self._buf = b""
        self._stop = threading.Event()
        self._ok = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        self._ok.wait(2)
        self.started = time.monotonic()

    def _read(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            self._buf += data
            *lines, self._buf = self._buf.split(b"\r\n")
            for line in lines:
                if line == b"+OK":
                    self._ok.set()
                    continue
                m = self.LINE.match(line)
                if not m or not self._ok.is_set():
                    continue
                where = self.lua if m.group(1) == b"lua" else self.sent
                name = m.group(2).decode(errors="replace").lower()
                where[name] = where.get(name, 0) + 1

    def stop(self) -> float:
        self._stop.set()
        elapsed = time.monotonic() - self.started
        self._thread.join(1)
        self.sock.close()
        return elapsed


# -- worker processes and records ------------------------------------------------


class Workers:
    """N worker processes of one system, each in its own process group.

    `peer`: the module that says how to run one (default: this harness's peer
    module of that name); `{k}` in an argument of its command line becomes the
    worker's index. `records`: the handlers' records file, if they keep one."""

    def __init__(self, name: str, url: str, n: int, concurrency: int, records: Path | None, logdir: Path, peer=None):
        self.name, self.url, self.n, self.concurrency = name, url, n, concurrency
        self.records, self.logdir = records, logdir
        self.peer = peer or PEERS[name]
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    def start(self) -> Workers:
        argv = self.peer.worker_argv(python_of(self.name), self.url, QUEUE, self.concurrency)
        extra = getattr(self.peer, "worker_env", lambda *a: {})(self.url, QUEUE, self.concurrency)
        env = sub_env({**({"BENCH_RECORDS": str(self.records)} if self.records else {}), **extra})
        for k in range(self.n):
            path = self.logdir / f"{self.name}-worker-{k}-{len(self.procs)}.log"
            out = open(path, "ab")
            self.procs.append(
                subprocess.Popen(
                    [a.replace("{k}", str(k)) for a in argv],
                    cwd=BENCHES,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
            )
            self.logs.append(path)
        return self

    def check(self) -> None:
        dead = [(p, log) for p, log in zip(self.procs, self.logs) if p.poll() is not None]
        if dead:
            p, log = dead[0]
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{self.name}: {len(dead)} worker process(es) exited ({p.returncode}); log {log}:\n{tail}")

    def stop(self, grace: float = 15.0) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for p in self.procs:
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # our own group: any work horse left over
            except (ProcessLookupError, PermissionError):
                pass
            if p.poll() is None:
                p.wait(5)
        self.procs = []
        self.logs = []


class Records:
    """The handlers' records file, read as it grows."""

    def __init__(self, path: Path):
        self.path = path
        path.touch()
        self._off = 0
        self._rest = b""
        self.first: dict[str, tuple[float, float]] = {}  # id -> (due, start), first start
        self.count: dict[str, int] = {}  # id prefix letter -> distinct ids

    def poll(self) -> None:
        with open(self.path, "rb") as f:
            f.seek(self._off)
            data = f.read()
        self._off += len(data)
        data = self._rest + data
        *lines, self._rest = data.split(b"\n")
        for line in lines:
            try:
                i, due, start = line.decode().split()
            except ValueError:
                continue
            if i not in self.first:
                self.first[i] = (float(due), float(start))
                self.count[i[0]] = self.count.get(i[0], 0) + 1

    def n(self, tag: str) -> int:
        return self.count.get(tag, 0)


def produce(name: str, url: str, op: str, *, stdin: str | None = None, timeout: float = 120, wait: bool = True, **opts):
    argv = [python_of(name), "-m", f"peers.{name}", op, "--url", url, "--queue", QUEUE]
    for k, v in opts.items():
        argv += [f"--{k}", str(v)]
    p = subprocess.Popen(
        argv,
        cwd=BENCHES,
        env=sub_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    if stdin is not None:
        p.stdin.write(stdin)
    p.stdin.close()
    if not wait:
        return p
    return finish(p, timeout)


def finish(p: subprocess.Popen, timeout: float) -> dict:
    try:
        out = p.stdout.read() if p.stdout else ""
        p.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        raise RuntimeError("producer timed out") from None
    if p.returncode != 0:
        raise RuntimeError(f"producer failed ({p.returncode}): {p.stderr.read()[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


# -- the phases -----------------------------------------------------------------


def measure_idle(h: Harness, port: int, seconds: float) -> dict:
    h.client.command("CONFIG", "RESETSTAT")
    cpu0, t0 = h.cpu_s(), time.monotonic()
    mon = Monitor(port)
    time.sleep(seconds)
    mon_s = mon.stop()
    stats = h.commandstats()
    cpu1, stats_s = h.cpu_s(), time.monotonic() - t0
    skip = {"info", "config|resetstat", "config", "monitor"}
    calls = {k: c for k, (c, _) in stats.items() if k not in skip and c}
    usec = sum(u for k, (_, u) in stats.items() if k not in skip)
    sent = {k: v for k, v in mon.sent.items() if k not in {"info", "config"}}
    return {
        "sent_per_s": sum(sent.values()) / mon_s,
        "calls_per_s": sum(calls.values()) / stats_s,
        "command_usec_per_s": usec / stats_s,
        # The server's whole CPU (its timers and the MONITOR feed included, as for every system).
        "server_cpu_us_per_s": (cpu1 - cpu0) * 1e6 / stats_s,
        "sent": dict(sorted(sent.items(), key=lambda kv: -kv[1])),
        "script_internal": dict(sorted(mon.lua.items(), key=lambda kv: -kv[1])),
        "calls": dict(sorted(calls.items(), key=lambda kv: -kv[1])),
        "monitor_s": round(mon_s, 3),
        "stats_s": round(stats_s, 3),
    }


def drain(h: Harness, name: str, rec: Records, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if PEERS[name].outstanding(h.cmd, QUEUE) == 0:
            return True
        time.sleep(0.1)
    return False


def measure_lateness(
    h: Harness,
    name: str,
    rec: Records,
    tag: str,
    *,
    jobs: int,
    window_s: float,
    lead_s: float,
    flood_rate: float,
    tail_s: float,
    rnd: random.Random,
) -> dict:
    t0 = now_ms() + lead_s * 1000
    pairs = [[f"{tag}{k}", int(t0 + rnd.random() * window_s * 1000)] for k in range(jobs)]
    pairs.sort(key=lambda p: p[1])
    sched = produce(name, h.url, "schedule", stdin=json.dumps(pairs), timeout=60)
    flood = None
    flood_tag = tag.lower()
    if flood_rate > 0:
        # From now until a second past the last due time.
        seconds = (t0 + window_s * 1000 - now_ms()) / 1000 + 1
        flood = produce(
            name,
            h.url,
            "flood",
            wait=False,
            rate=flood_rate,
            seconds=f"{seconds:.2f}",
            count=int(flood_rate * seconds) + 1,
            prefix=flood_tag,
        )
    await_started(rec, tag, jobs, time.monotonic() + (t0 + window_s * 1000 - now_ms()) / 1000 + tail_s)
    flood_out = finish(flood, 60) if flood else None
    out = lateness(rec, pairs, jobs)
    out["late_at_enqueue"] = sched.get("late_at_enqueue")
    if flood_out:
        secs = (flood_out["last_add_ms"] - flood_out["first_add_ms"]) / 1000 if flood_out["first_add_ms"] else 0
        out["flood"] = {"added": flood_out["n"], "rate_target": flood_rate, "rate_achieved": flood_out["n"] / secs if secs > 0 else None}
    return out


def measure_delays(h: Harness, name: str, rec: Records, tag: str, *, jobs: int, gap_ms: float, tail_s: float, seed: int) -> dict:
    """Short delays while the workers park: the producer adds one job at a time
    and says when each is due; then until every job started, or `tail_s` past
    the last add."""
    prod = produce(name, h.url, "delays", timeout=jobs * gap_ms / 1000 + 120, count=jobs, prefix=tag, seed=seed, **{"gap-ms": gap_ms})
    await_started(rec, tag, jobs, time.monotonic() + tail_s)
    return lateness(rec, prod["pairs"], jobs)


def await_started(rec: Records, tag: str, jobs: int, deadline: float) -> None:
    """Until `jobs` jobs of `tag` have started, or the deadline (monotonic s)."""
    while time.monotonic() < deadline:
        rec.poll()
        if rec.n(tag) >= jobs:
            break
        time.sleep(0.1)


def lateness(rec: Records, pairs: list, jobs: int) -> dict:
    """Handler start - due time of the jobs `pairs` (`[id, due_ms]`) started by now."""
    rec.poll()
    late = [rec.first[i][1] - due for i, due in pairs if i in rec.first]
    return {
        "jobs": jobs,
        "started": len(late),
        "missing": jobs - len(late),
        "p50": pct(late, 50),
        "p99": pct(late, 99),
        "max": max(late) if late else None,
        "min": min(late) if late else None,
        "lateness_ms": [round(x, 3) for x in late],
    }


def measure_throughput(h: Harness, name: str, rec: Records, tag: str, *, jobs: int, cap_s: float) -> dict:
    h.client.command("CONFIG", "RESETSTAT")
    h.sent = {}
    cpu0 = h.cpu_s()
    start = time.monotonic()
    p = produce(name, h.url, "burst", wait=False, count=jobs, batch=100, seconds=cap_s, prefix=tag)
    end_ms = None
    deadline = start + cap_s
    while time.monotonic() < deadline:
        rec.poll()
        if rec.n(tag) >= jobs and PEERS[name].outstanding(h.cmd, QUEUE) == 0:
            end_ms = now_ms()
            break
        # Every 2 ms: the fastest runs take a quarter of a second, which a coarser
        # poll would stretch by several percent.
        time.sleep(0.002 if rec.n(tag) >= jobs else 0.02)
    cpu1 = h.cpu_s()  # at the end, or at the cap: what the server spent on what was done
    prod = finish(p, 60)
    stats = h.commandstats()
    rec.poll()
    done = rec.n(tag)
    first = prod["first_add_ms"]
    if end_ms is None:  # capped: what started by now
        end_ms = now_ms()
    secs = (end_ms - first) / 1000
    skip = {"info", "config|resetstat", "config"}
    calls = sum(c for k, (c, _) in stats.items() if k not in skip) - sum(h.sent.values())
    usec = sum(u for k, (_, u) in stats.items() if k not in skip)
    add_s = (prod["last_add_ms"] - first) / 1000
    return {
        "jobs": jobs,
        "done": done,
        "capped": done < jobs,
        "seconds": round(secs, 3),
        "jobs_per_s": done / secs if secs > 0 else None,
        "enqueue_per_s": prod["n"] / add_s if add_s > 0 else None,
        "calls_per_job": calls / max(1, done),
        # The server's CPU (`INFO cpu`, user + system) from the first add to the
        # end, over the jobs: commands, scripts, system calls, everything.
        "server_cpu_us_per_job": (cpu1 - cpu0) * 1e6 / max(1, done),
        # commandstats `usec` summed: time inside commands; a transaction's or a
        # script's usec includes its commands', which count again on their own.
        "command_usec_per_job": usec / max(1, done),
        "calls_per_job_by_command": {
            k: round((c - h.sent.get(k, 0)) / max(1, done), 3)
            for k, (c, _) in sorted(stats.items(), key=lambda kv: -kv[1][0])
            if k not in skip and c - h.sent.get(k, 0) > 0
        },
    }


def run_system(name: str, srv: Server, h: Harness, cfg, run: int, logdir: Path) -> dict:
    h.fresh()
    rnd = random.Random(1000 * run + seed_index(name))
    out: dict = {"run": run, "loadavg_before": os.getloadavg()[0]}
    rec = Records(logdir / f"{name}-run{run}-records.txt")
    w = Workers(name, srv.url, cfg.workers, cfg.concurrency, rec.path, logdir).start()
    try:
        time.sleep(cfg.settle)
        w.check()
        log(f"  {name}: idle {cfg.workers} workers, {cfg.idle_s:.0f} s")
        out["idle"] = measure_idle(h, srv.port, cfg.idle_s)
        w.check()
        log(f"  {name}: lateness, light load ({cfg.sched_jobs} jobs over {cfg.window_s:.0f} s)")
        out["light"] = measure_lateness(
            h, name, rec, "L", jobs=cfg.sched_jobs, window_s=cfg.window_s, lead_s=cfg.lead_s, flood_rate=0, tail_s=cfg.tail_s, rnd=rnd
        )
        drain(h, name, rec, 10)
        if cfg.delay_jobs:
            log(f"  {name}: lateness, short delays ({cfg.delay_jobs} jobs added while the workers park)")
            out["delays"] = measure_delays(
                h, name, rec, "D", jobs=cfg.delay_jobs, gap_ms=cfg.delay_gap_ms, tail_s=cfg.tail_s, seed=1000 * run + seed_index(name)
            )
            drain(h, name, rec, 10)
        log(f"  {name}: lateness, heavy load (+{cfg.flood_rate:.0f} immediate jobs/s)")
        out["heavy"] = measure_lateness(
            h,
            name,
            rec,
            "H",
            jobs=cfg.sched_jobs,
            window_s=cfg.window_s,
            lead_s=cfg.lead_s,
            flood_rate=cfg.flood_rate,
            tail_s=cfg.heavy_tail_s,
            rnd=rnd,
        )
        w.check()
        if not drain(h, name, rec, 5):
            out["heavy"]["backlog_left"] = PEERS[name].outstanding(h.cmd, QUEUE)
            log(f"  {name}: backlog of {out['heavy']['backlog_left']} left after the heavy phase: restarting")
            w.stop()
            h.fresh()
            w = Workers(name, srv.url, cfg.workers, cfg.concurrency, rec.path, logdir).start()
            time.sleep(cfg.settle)
        log(f"  {name}: throughput, {cfg.workers} workers, {cfg.tput_jobs} jobs")
        out[f"tput{cfg.workers}"] = measure_throughput(h, name, rec, "T", jobs=cfg.tput_jobs, cap_s=cfg.tput_cap_s)
        w.check()
    finally:
        w.stop()
    h.fresh()
    w = Workers(name, srv.url, 1, cfg.concurrency, rec.path, logdir).start()
    try:
        time.sleep(cfg.settle)
        w.check()
        log(f"  {name}: throughput, 1 worker, {cfg.tput1_jobs} jobs")
        out["tput1"] = measure_throughput(h, name, rec, "U", jobs=cfg.tput1_jobs, cap_s=cfg.tput_cap_s)
        w.check()
    finally:
        w.stop()
    out["loadavg_after"] = os.getloadavg()[0]
    return out


def run_rounds(systems: list[str], runs: int, h: Harness, run_one) -> dict:
    """`runs` rounds of `run_one(system, run)` over the systems, each round's order
    rotated by one; a system's failure is recorded (`errors`, and `error`, its
    first line) and the others go on, on an emptied server."""
    results: dict = {s: {"runs": []} for s in systems}
    for run in range(runs):
        order = systems[run % len(systems) :] + systems[: run % len(systems)]
        for s in order:
            log(f"run {run + 1}/{runs}: {s}")
            try:
                results[s]["runs"].append(run_one(s, run))
            except Exception as e:  # noqa: BLE001 - one system's failure is reported, the rest go on
                log(f"  {s} failed: {e}")
                results[s].setdefault("errors", []).append(str(e)[-3000:])
                results[s]["error"] = str(e).splitlines()[0][:300]
                h.fresh()
    return results


# -- summary, plots, README -----------------------------------------------------


def summarize(runs: list[dict], workers: int) -> dict:
    s: dict = {}
    for phase in ("light", "delays", "heavy"):
        rs = [r[phase] for r in runs if phase in r]
        s[phase] = {k: median([r.get(k) for r in rs]) for k in ("p50", "p99", "max")}
        s[phase]["missing"] = max((r["missing"] for r in rs), default=None)
        s[phase]["backlog_left"] = max((r.get("backlog_left", 0) for r in rs), default=0)
        if rs and "flood" in rs[0]:
            s[phase]["flood_rate_achieved"] = median([r["flood"]["rate_achieved"] for r in rs])
    for phase in (f"tput{workers}", "tput1"):
        rs = [r[phase] for r in runs if phase in r]
        s[phase] = {
            k: median([r.get(k) for r in rs])
            for k in ("jobs_per_s", "enqueue_per_s", "calls_per_job", "server_cpu_us_per_job", "command_usec_per_job")
        }
        s[phase]["capped"] = any(r["capped"] for r in rs)
    rs = [r["idle"] for r in runs if "idle" in r]
    s["idle"] = {k: median([r.get(k) for r in rs]) for k in ("sent_per_s", "calls_per_s", "server_cpu_us_per_s")}
    return s


def ratios(summary: dict, workers: int) -> dict:
    base = summary.get("emq")
    if not base:
        return {}
    out = {}
    keys = [
        ("light", "p99"),
        ("delays", "p99"),
        ("heavy", "p99"),
        (f"tput{workers}", "jobs_per_s"),
        ("tput1", "jobs_per_s"),
        ("idle", "sent_per_s"),
        ("idle", "calls_per_s"),
    ]
    for name, s in summary.items():
        out[name] = {}
        for phase, k in keys:
            a, b = s.get(phase, {}).get(k), base.get(phase, {}).get(k)
            out[name][f"{phase}.{k}"] = (a / b) if a is not None and b not in (None, 0) else None
    return out


def have_plotting() -> bool:
    """The harness's own requirement (benches/requirements.txt), checked before
    a run of several minutes rather than at its end."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def setup_plotting() -> None:
    """matplotlib in this environment (benches/requirements.txt), for the plots."""
    if not have_plotting():
        log("setup: pip install -r benches/requirements.txt (matplotlib, for the plots)")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(BENCHES / "requirements.txt")], check=True)


def plots(data: dict, tag: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = [s for s in data["systems"] if data["results"].get(s, {}).get("runs")]
    colors = {"emq": "#1f77b4", "emq_module": "#17becf", "bullmq": "#d62728", "arq": "#2ca02c", "saq": "#9467bd", "rq": "#ff7f0e"}
    files = []
    w = data["config"]["workers"]
    srv = data["server"]["name"] + " " + data["server"]["version"]

    panels = [("light", "light load: idle workers")]
    if any("delays" in r for s in systems for r in data["results"][s]["runs"]):
        panels.append(("delays", "short delays (10–300 ms) added while idle"))
    panels.append(("heavy", f"heavy load: + {data['config']['flood_rate']:.0f} immediate jobs/s"))
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 5), sharey=True)
    for ax, (phase, title) in zip(axes, panels):
        vals = [[x for r in data["results"][s]["runs"] for x in r.get(phase, {}).get("lateness_ms", [])] for s in systems]
        bp = ax.boxplot(vals, whis=(1, 99), showfliers=True, patch_artist=True, widths=0.6, flierprops={"markersize": 2, "alpha": 0.4})
        for patch, s in zip(bp["boxes"], systems):
            patch.set_facecolor(colors.get(s, "grey"))
            patch.set_alpha(0.6)
        for k, v in enumerate(vals, start=1):
            if v:
                p99 = pct(v, 99)
                ax.annotate(f"p99 {p99:.0f}", (k, p99), xytext=(4, 6), textcoords="offset points", fontsize=8)
        labels = []
        for s in systems:
            never = sum(r.get(phase, {}).get("missing", 0) for r in data["results"][s]["runs"])
            labels.append(s + (f"\n({never} never\nstarted)" if never else ""))
        ax.set_xticks(range(1, len(systems) + 1), labels)
        ax.set_yscale("symlog", linthresh=10)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("handler start − due time (ms, symlog)")
    fig.suptitle(f"Lateness of delayed jobs, {w} worker processes, all runs pooled (box: quartiles, whiskers: p1–p99)  [{srv}]")
    fig.tight_layout()
    f = RESULTS / f"compare-{tag}-lateness.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    files.append(f.name)

    fig, ax = plt.subplots(figsize=(9, 5))
    width = 0.38
    for j, (phase, label) in enumerate(((("tput1"), "1 worker process"), (f"tput{w}", f"{w} worker processes"))):
        ys = [data["summary"][s][phase]["jobs_per_s"] or 0 for s in systems]
        capped = [data["summary"][s][phase].get("capped") for s in systems]
        xs = [k + (j - 0.5) * width for k in range(len(systems))]
        bars = ax.bar(
            xs, ys, width, label=label, alpha=0.85 if j else 0.5, color=[colors.get(s, "grey") for s in systems], edgecolor="black"
        )
        for b, y, cap in zip(bars, ys, capped):
            ax.annotate(f"{y:,.0f}" + ("\ncapped" if cap else ""), (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(systems)), systems)
    ax.set_ylabel("no-op jobs/s, first add to all done (median of runs)")
    ax.set_title(f"End-to-end throughput (left bar: 1 worker process, right: {w})  [{srv}]")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    f = RESULTS / f"compare-{tag}-throughput.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    files.append(f.name)

    fig, ax = plt.subplots(figsize=(9, 5))
    for j, (k, label) in enumerate(
        (("sent_per_s", "commands sent (MONITOR)"), ("calls_per_s", "calls counted (commandstats, incl. inside scripts)"))
    ):
        ys = [data["summary"][s]["idle"][k] or 0 for s in systems]
        xs = [i + (j - 0.5) * width for i in range(len(systems))]
        bars = ax.bar(
            xs,
            ys,
            width,
            label=label,
            color=[colors.get(s, "grey") for s in systems],
            alpha=0.85 if j == 0 else 0.4,
            edgecolor="black",
            hatch=None if j == 0 else "//",
        )
        for b, y in zip(bars, ys):
            ax.annotate(f"{y:.1f}", (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(systems)), systems)
    ax.set_ylabel("per second, 4 idle worker processes (median of runs)".replace("4", str(w)))
    ax.set_title(f"Cost of waiting  [{srv}]")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    f = RESULTS / f"compare-{tag}-idle.png"
    fig.savefig(f, dpi=110)
    plt.close(fig)
    files.append(f.name)
    return files


def fmt(x, nd=1):
    if x is None:
        return "–"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.{nd}f}"


def late(p: dict, jobs: int) -> str:
    """p50 / p99 / max; with jobs that never started, p99 and max are lower bounds."""
    ge = "≥ " if p.get("missing") else ""
    s = f"{fmt(p['p50'])} / {ge}{fmt(p['p99'])} / {ge}{fmt(p['max'])}"
    if p.get("missing"):
        s += f" ({p['missing']} of {jobs} never started, worst run)"
    return s


def table(data: dict) -> str:
    w = data["config"]["workers"]
    n = data["config"]["sched_jobs"]
    rows = [
        "| system | version | light p50 / p99 / max (ms) | short delays p50 / p99 / max (ms) | heavy p50 / p99 / max (ms) | "
        f"jobs/s, 1 worker | jobs/s, {w} workers | idle: calls/s (sent/s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in data["systems"]:
        sm = data["summary"].get(s)
        if not sm:
            rows.append(f"| {s} | – | {data['results'].get(s, {}).get('error', 'not run')} | | | | | |")
            continue
        v = data["versions"][s].get(PEERS[s].DIST, "?")
        lt, dl, hv = sm["light"], sm.get("delays") or {}, sm["heavy"]
        nd = data["config"].get("delay_jobs", 0)
        cap = lambda p: " (capped)" if p.get("capped") else ""  # noqa: E731
        rows.append(
            f"| {s} | {v} | {late(lt, n)} | {late(dl, nd) if dl.get('p50') is not None else '–'} | {late(hv, n)} | "
            f"{fmt(sm['tput1']['jobs_per_s'])}{cap(sm['tput1'])} | {fmt(sm[f'tput{w}']['jobs_per_s'])}{cap(sm[f'tput{w}'])} | "
            f"{fmt(sm['idle']['calls_per_s'])} ({fmt(sm['idle']['sent_per_s'])}) |"
        )
    rows += [
        "",
        "Against emq (ratio peer / emq; lateness and idle: lower is better, throughput: higher):",
        "",
        f"| system | light p99 | short delays p99 | heavy p99 | jobs/s, 1 worker | jobs/s, {w} workers | idle calls/s | idle sent/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s, r in data["ratios"].items():
        f = lambda k, r=r: "–" if r.get(k) is None else f"{r[k]:.2f}×"  # noqa: E731
        rows.append(
            f"| {s} | {f('light.p99')} | {f('delays.p99')} | {f('heavy.p99')} | {f('tput1.jobs_per_s')} | {f(f'tput{w}.jobs_per_s')} | "
            f"{f('idle.calls_per_s')} | {f('idle.sent_per_s')} |"
        )
    rows += [
        "",
        "What the server spends: calls from commandstats (those inside scripts and transactions included); "
        "CPU from `INFO cpu` (user + system, commands and system calls alike) over the phase; time "
        "inside commands from commandstats `usec` (a transaction's or a script's includes its commands', "
        "which count again on their own):",
        "",
        f"| system | calls per job, {w} workers | server CPU per job, {w} workers (µs) | time in commands per job (µs) "
        f"| idle server CPU ({w} workers, µs/s) |",
        "|---|---|---|---|---|",
    ]
    for s in data["systems"]:
        sm = data["summary"].get(s)
        if sm:
            rows.append(
                f"| {s} | {fmt(sm[f'tput{w}']['calls_per_job'])} | {fmt(sm[f'tput{w}']['server_cpu_us_per_job'])} | "
                f"{fmt(sm[f'tput{w}']['command_usec_per_job'])} | {fmt(sm['idle']['server_cpu_us_per_s'])} |"
            )
    return "\n".join(rows)


def loads(data: dict) -> str:
    xs = [
        r[k]
        for s in data["systems"]
        for r in data["results"].get(s, {}).get("runs", [])
        for k in ("loadavg_before", "loadavg_after")
        if k in r
    ]
    return (
        f"1-min load average {min(xs):.1f} to {max(xs):.1f} during the run, on {os.cpu_count()} CPUs shared with other work" if xs else ""
    )


def readme_section(data: dict, path_json: str, pngs: list[str]) -> str:
    c = data["config"]
    v = data["versions"]
    vers = ", ".join(f"{s} {v[s].get(PEERS[s].DIST, '?')} (redis-py {v[s].get('redis', '?')})" for s in data["systems"] if s in v)
    return f"""### {data["server"]["name"]} {data["server"]["version"]}

Run {data["date"]} on this machine ({data["machine"]}), emq at {data["emq_commit"]}, {vers}; Python {data["python"]}.
Command: `{data["command"]}` ({c["runs"]} run(s), medians; {data["elapsed_s"] / 60:.1f} min; {loads(data)}).
Raw numbers: `benches/results/{path_json}`; plots: {", ".join(f"`benches/results/{p}`" for p in pngs)}.

{table(data)}
"""


SECTION_INTRO = """## Against other queues

`benches/compare.py` runs emq side by side with the Python queues people use:
[BullMQ's Python package](https://pypi.org/project/bullmq/), [arq](https://pypi.org/project/arq/),
[saq](https://pypi.org/project/saq/) and [rq](https://pypi.org/project/rq/), each pinned in
`benches/requirements.txt` and installed into its own virtualenv under `benches/.venvs/` by
`python benches/compare.py --setup` (they cannot share one: arq 0.28 requires redis-py < 6,
BullMQ 3.4 redis-py ≥ 6.2, saq[redis] 0.26 redis-py < 8; emq's tests run redis-py 8.1).

    pip install -r benches/requirements.txt      # matplotlib, in emq's environment
    python benches/compare.py --setup            # the peers' virtualenvs
    python benches/compare.py                    # embedded Valkey 9.1, ~20 min
    python benches/compare.py --server redis     # Debian's Redis 7.0
    python benches/compare.py --quick            # smoke run, < 3 min
    python benches/compare.py --render benches/results/compare-valkey.json --observations NOTES.md
                                                 # plots and this section again, from saved results

How each system runs (`benches/peers/`): its own worker processes as its documentation
says, default settings except concurrency (8 jobs at a time per process where the library
has the setting; rq's default worker forks one work horse per job and runs one at a time):

| system | worker process | add | scheduled job |
|---|---|---|---|
| emq | `python -m emq worker peers.emq:handler` (beat 1 s, lease 30 s), sync handler in threads | `Queue.add_many` | `at` = due time |
| bullmq | `Worker(queue, process, {{"connection": url, "concurrency": 8}})` on asyncio until SIGTERM (no CLI) | `Queue.addBulk` | `delay` = due − now |
| arq | `arq peers.arq.WorkerSettings`, `max_jobs = 8` (polls every 0.5 s) | `enqueue_job`, 100 gathered | `_defer_until` = due |
| saq | `saq peers.saq.settings`, `concurrency = 8` (schedule timer 1 s) | `Queue.enqueue`, 100 gathered | `scheduled` = due (float s) |
| rq | `rq worker --with-scheduler` (scheduler every 1 s) | `Queue.enqueue_many` | `enqueue_at(due)`, stored in whole seconds |

Every handler records `time.time()` first thing into a file (no server traffic). One server
on 127.0.0.1, FLUSHALLed with stats reset before each system's turn, after the previous
system's processes have exited. Per system and run: **idle**: {workers} idle workers on an
empty queue, the commands they send per second (MONITOR, without the commands that run
inside scripts) and the calls the server counts (INFO commandstats deltas, which include
the commands inside Lua scripts and transactions); **lateness**: {sched} jobs due at random
times over {window} s, handler start − due time, first with the workers idle (light) and
then while a producer adds {flood} immediate no-op jobs/s (heavy); between the two, **short
delays**: {delays} jobs added one at a time while the workers park, at random moments 0 to
{gap} ms apart, each due 10 to 300 ms after its add; **throughput**: with the
workers running and idle, a producer adds N no-op jobs as fast as it can in batches of 100
(enqueue concurrently with the work); from the first add until every job has started and the
library holds none unfinished; with {workers} worker processes ({tput} jobs), then 1 ({tput1}).
Rates are capped at {cap} s per measurement ("capped": the rate of what was done by then).
"""


def update_readme(section: str) -> None:
    """Replaces our section (from our heading to the next `## ` heading, or the
    end) or appends it; the other sections are left as they are."""
    text = README.read_text() if README.exists() else "# Benchmarks\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, line in enumerate(lines) if line.rstrip() == HEADING), None)
    if start is None:
        text = text.rstrip("\n") + "\n\n" + section.rstrip("\n") + "\n"
    else:
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        text = "".join(lines[:start]) + section.rstrip("\n") + "\n" + ("\n" + "".join(lines[end:]) if end < len(lines) else "")
    README.write_text(text)


def merge_readme(data: dict, path_json: str, pngs: list[str], observations: str | None) -> None:
    """Our section keeps one subsection per server: this run's replaces its own."""
    c = data["config"]
    intro = SECTION_INTRO.format(
        workers=c["workers"],
        sched=c["sched_jobs"],
        window=f"{c['window_s']:g}",
        flood=f"{c['flood_rate']:g}",
        delays=c.get("delay_jobs", 0),
        gap=f"{c.get('delay_gap_ms', 100):g}",
        tput=c["tput_jobs"],
        tput1=c["tput1_jobs"],
        cap=f"{c['tput_cap_s']:g}",
    )
    old = README.read_text() if README.exists() else ""
    # Every subsection kept, in order (the runs' notes written by hand too); this
    # run's server's replaced, or added after the other server's.
    subs: list[tuple[str, str]] = []
    if HEADING in old:
        body = old.split(HEADING, 1)[1]
        body = re.split(r"\n## ", body, maxsplit=1)[0]
        for m in re.finditer(r"(### (\S+)\s.*?)(?=\n### |\Z)", body, re.S):
            subs.append((m.group(2), m.group(1).strip() + "\n"))
    mine = (data["server"]["name"], readme_section(data, path_json, pngs))
    names = [n for n, _ in subs]
    if mine[0] in names:
        subs[names.index(mine[0])] = mine
    else:
        at = max((i + 1 for i, n in enumerate(names) if n in ("valkey", "redis")), default=len(subs))
        subs.insert(at, mine)
    if observations:
        subs = [(n, t) for n, t in subs if n != "Observations"] + [("Observations", observations)]
    section = intro + "\n" + "\n".join(t for _, t in subs)
    update_readme(section)


# -- main ----------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--server",
        choices=["valkey", "redis"],
        default="valkey",
        help="valkey: the embedded Valkey 9.1 (default); redis: Debian's redis-server",
    )
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sched-jobs", type=int, default=200)
    ap.add_argument("--window-s", type=float, default=10.0)
    ap.add_argument("--lead-s", type=float, default=3.0, help="from adding the scheduled jobs to the window's start")
    ap.add_argument("--tail-s", type=float, default=5.0)
    ap.add_argument("--heavy-tail-s", type=float, default=15.0)
    ap.add_argument("--flood-rate", type=float, default=500.0)
    ap.add_argument("--delay-jobs", type=int, default=200, help="jobs of the short-delay phase (0: no such phase)")
    ap.add_argument("--delay-gap-ms", type=float, default=100.0, help="the most between two of its adds")
    ap.add_argument("--tput-jobs", type=int, default=10000)
    ap.add_argument("--tput1-jobs", type=int, default=10000)
    ap.add_argument("--tput-cap-s", type=float, default=20.0)
    ap.add_argument("--idle-s", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--quick", action="store_true", help="a smoke run (< 3 min)")
    ap.add_argument("--setup", action="store_true", help="make the peers' virtualenvs and stop")
    ap.add_argument("--no-readme", action="store_true")
    ap.add_argument("--observations", help="a file whose text goes under the tables (### Observations)")
    ap.add_argument("--tag", help="a suffix for the result files (compare-<server>-<tag>.*); such runs leave the README alone")
    ap.add_argument("--render", metavar="JSON", help="redo the plots and the README section from a results file")
    cfg = ap.parse_args()
    if cfg.render:
        path = Path(cfg.render)
        data = json.loads(path.read_text())
        tag = path.stem.removeprefix("compare-")
        pngs = plots(data, tag)
        print(table(data))
        if not cfg.no_readme and not data["config"].get("quick") and not data["config"].get("tag"):
            obs = Path(cfg.observations).read_text() if cfg.observations else None
            merge_readme(data, path.name, pngs, obs)
            log(f"updated {README} ({HEADING})")
        return 0
    systems = [s for s in cfg.systems.split(",") if s]
    for s in systems:
        if s not in PEERS:
            ap.error(f"unknown system {s!r}")
    if cfg.setup:
        setup_plotting()
        setup(systems)
        return 0
    if not have_plotting():
        print(
            "compare.py: matplotlib is missing (its plots): python benches/compare.py --setup, or pip install -r benches/requirements.txt",
            file=sys.stderr,
        )
        return 2
    if cfg.quick:
        cfg.runs, cfg.sched_jobs, cfg.window_s, cfg.lead_s = 1, 40, 3.0, 2.0
        cfg.tail_s, cfg.heavy_tail_s, cfg.flood_rate, cfg.delay_jobs = 3.0, 8.0, 250.0, 30
        cfg.tput_jobs, cfg.tput1_jobs, cfg.tput_cap_s, cfg.idle_s, cfg.settle = 1500, 600, 6.0, 3.0, 2.0
    missing = [s for s in systems if not Path(python_of(s)).exists()]
    if missing:
        log(f"no virtualenv for {', '.join(missing)}: running setup first")
        setup(missing)

    started = time.monotonic()
    RESULTS.mkdir(parents=True, exist_ok=True)
    logdir = Path(tempfile.mkdtemp(prefix="emq-compare-"))
    binary = None if cfg.server == "valkey" else shutil.which("redis-server")
    if cfg.server == "redis" and not binary:
        ap.error("--server redis: no redis-server on PATH")
    srv = Server(binary, module="emq_module" in systems).start()
    try:
        h = Harness(srv.url)
        info = h.client.info("server")
        server = {
            "name": cfg.server,
            "version": info.get("valkey_version") or info.get("redis_version"),
            "hz": h.client.command("CONFIG", "GET", "hz")[1].decode(),
            "allocator": srv.allocator,
        }
        log(f"{server['name']} {server['version']} ({srv.allocator}) at {srv.url}; logs and records in {logdir}")
        versions = {s: versions_of(s) for s in systems}
        results = run_rounds(systems, cfg.runs, h, lambda s, run: run_system(s, srv, h, cfg, run, logdir))
    finally:
        srv.stop()
    summary = {s: summarize(r["runs"], cfg.workers) for s, r in results.items() if r["runs"]}
    argv = [a for a in sys.argv[1:] if not a.startswith("--observations")]
    data = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "command": "python benches/compare.py" + ("" if not argv else " " + " ".join(argv)),
        "machine": f"{os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}",
        "python": sys.version.split()[0],
        "emq_commit": emq_commit(),
        "server": server,
        "systems": systems,
        "versions": versions,
        "config": {k: v for k, v in vars(cfg).items() if k not in ("setup", "observations", "no_readme", "render")},
        "summary": summary,
        "ratios": ratios(summary, cfg.workers),
        "results": results,
        "logs": str(logdir),
    }
    data["elapsed_s"] = round(time.monotonic() - started, 1)
    tag = cfg.server + ("-quick" if cfg.quick else "") + (f"-{cfg.tag}" if cfg.tag else "")
    name = f"compare-{tag}"
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=1))
    pngs = plots(data, tag)
    print()
    print(table(data))
    print()
    log(f"wrote {path} and {', '.join(pngs)} in {data['elapsed_s'] / 60:.1f} min")
    if not cfg.no_readme and not cfg.quick and not cfg.tag:
        obs = Path(cfg.observations).read_text() if cfg.observations else None
        merge_readme(data, path.name, pngs, obs)
        log(f"updated {README} ({HEADING})")
    return 0


def emq_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "rust", "python"], capture_output=True, text=True
        ).stdout.strip()
        return head + ("+uncommitted changes" if dirty else "")
    except OSError:
        return "?"


if __name__ == "__main__":
    sys.exit(main())

"""Periodic schedules (SPEC §14) on real servers: the verbs and their refusals,
TIMERS' missed-tick policies after a stop, exactly one job per tick with
several workers and an extra scheduler (one of them SIGKILLed), a parked worker
that wakes for a new schedule without polling, and the plan against the
server module byte for byte over the keyspace.

A tick's job id is `schedule:<name>:<tick ms>`; the tests read ticks back from
it. Times come from the server's clock (`TIME`), never this process's."""

from __future__ import annotations

import random
import re
import signal
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest
import redis

import emq
import emq.tools
from test_sweeps_differential import dump, module_loaded
from test_worker import procs  # noqa: F401  (the fixture)

from worker_handlers import LOG

HOUR = 3_600_000


def server_ms(r: redis.Redis) -> int:
    sec, usec = r.time()
    return sec * 1000 + usec // 1000


def ticks_of(r: redis.Redis, q: str, name: str) -> list[int]:
    """The ticks whose job exists, from their ids, sorted."""
    prefix = f"emq:{{{q}}}:job:schedule:{name}:"
    return sorted(int(k.decode()[len(prefix) :]) for k in r.scan_iter(match=prefix.replace("{", "\\{").replace("}", "\\}") + "*"))


def move_timer(r: redis.Redis, q: str, name: str, at: int) -> None:
    """Sets the schedule's next tick to `at`, as a stop that long ago leaves it."""
    r.zadd(f"emq:{{{q}}}:timers", {f"tick:{name}": at})


# ------------------------------------------------------------------------- the verbs


def test_a_schedule_is_listed_paused_resumed_run_now_and_removed(client, r):
    """A broken listing would lose the spec or the next tick; a broken pause
    would keep ticking (a next tick while paused), a broken resume would leave
    none; run now must enqueue the tick of now without moving the timer."""
    q = emq.Queue(client, "s")
    assert q.schedule("nightly", cron="0 3 * * *", tz="europe/berlin", data=b"\xff", lane="l", max_attempts=2) is True
    assert q.schedule("nightly", cron="0 3 * * *", tz="Europe/Berlin", data=b"\xff", lane="l", max_attempts=2) is False, (
        "the same definition again changes nothing"
    )
    [info] = q.schedules()
    assert (info.name, info.queue, info.cron, info.every, info.tz) == ("nightly", "s", "0 3 * * *", None, "Europe/Berlin")
    assert (info.data, info.lane, info.max_attempts, info.paused, info.last_tick) == (b"\xff", "l", 2, False, None)
    now = server_ms(r)
    assert info.next_tick is not None and now < info.next_tick.timestamp() * 1000 <= now + 25 * HOUR
    assert info.next_tick.astimezone().minute == 0

    assert q.pause_schedule("nightly") is True and q.pause_schedule("nightly") is False
    assert q.schedules()[0].paused and q.schedules()[0].next_tick is None
    assert q.resume_schedule("nightly") is True
    assert q.schedules()[0].next_tick == info.next_tick

    job_id = q.run_schedule_now("nightly")
    name, tick = job_id.rsplit(":", 1)
    assert name == "schedule:nightly" and abs(int(tick) - server_ms(r)) < 5_000
    job = q.get(job_id)
    assert job is not None and job.data == b"\xff" and job.state == "pending" and job.lane == "l"
    assert q.schedules()[0].next_tick == info.next_tick, "run now leaves the timer"

    assert q.unschedule("nightly") is True and q.unschedule("nightly") is False
    assert q.schedules() == [] and r.zcard("emq:{s}:timers") == 0
    assert q.get(job_id) is not None, "its jobs stay"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"cron": "61 * * * *"}, r"Queue\.schedule: cron minute field \"61\""),
        ({"cron": "* * * *"}, r"Queue\.schedule: cron has 4 fields"),
        ({"cron": "* * * * *", "tz": "Mars/Olympus"}, r"Queue\.schedule: tz \"Mars/Olympus\" is not a time zone"),
        ({"every": 0}, r"Queue\.schedule: every must be a positive duration"),
        ({"every": 1, "cron": "* * * * *"}, r"Queue\.schedule: cron and every are exclusive"),
        ({"every": 1, "missed": "sometimes"}, r"Queue\.schedule: missed must be 'latest', 'all' or 'skip'"),
        ({"every": 1, "missed": "all", "max_missed": 1001}, r"Queue\.schedule: max_missed must be an integer from 1 to 1000"),
        ({"every": 1, "name": ""}, r"Queue\.schedule: name must be 1 to 230 bytes"),
        ({"every": 1, "name": "x" * 231}, r"Queue\.schedule: name must be 1 to 230 bytes"),
        ({"every": 1, "max_attempts": 0}, r"Queue\.schedule: max_attempts"),
    ],
)
def test_bad_input_names_the_verb_and_argument_and_writes_nothing(client, r, kwargs, message):
    """A check made after a write (or not at all) would change the keyspace,
    which holds a schedule and a job already."""
    q = emq.Queue(client, "s")
    q.schedule("kept", every=60, data="x")
    q.add("j")
    before = dump(r)
    kwargs = dict(kwargs)
    name = kwargs.pop("name", "new")
    with pytest.raises(emq.ArgumentError, match=message):
        q.schedule(name, **kwargs)
    assert dump(r) == before


def test_the_verbs_on_a_schedule_that_is_not_there_refuse_and_write_nothing(client, r):
    """Pausing or running a name that has no schedule is a mistake to report,
    not a no-op that leaves the caller believing it paused something."""
    q = emq.Queue(client, "s")
    before = dump(r)
    for verb in (q.pause_schedule, q.resume_schedule, q.run_schedule_now):
        with pytest.raises(emq.ArgumentError, match=r"name \"ghost\" names no schedule of this queue"):
            verb("ghost")
    assert dump(r) == before


# --------------------------------------------------------------------------- TIMERS


@pytest.mark.parametrize(("missed", "extra", "jobs"), [("latest", {}, 1), ("all", {"max_missed": 100}, 10), ("skip", {"grace": 1}, 0)])
def test_missed_ticks_after_a_stop_of_ten_ticks(client, r, missed, extra, jobs):
    """Ten hourly ticks are due after a stop: latest enqueues the last one, all
    each of the ten (oldest first), skip none (the last is older than its
    grace); every policy moves the timer past now. A sweep that walked the
    ticks, or kept the old timer, would enqueue again on the next call."""
    q = emq.Queue(client, "s")
    q.schedule("h", every=timedelta(hours=1), data="x", missed=missed, **extra)
    latest = server_ms(r) // HOUR * HOUR
    move_timer(r, "s", "h", latest - 9 * HOUR)
    ticked = emq.tools.timers(client, "s")
    want = [latest - k * HOUR for k in range(9, -1, -1)][-jobs:] if jobs else []
    assert ticks_of(r, "s", "h") == want
    assert ticked.enqueued == [f"schedule:h:{t}" for t in want]
    [info] = q.schedules()
    assert info.next_tick is not None and info.next_tick.timestamp() * 1000 == latest + HOUR
    assert info.last_tick == (None if not jobs else info.last_tick) and (not jobs or info.last_tick.timestamp() * 1000 == latest)
    assert emq.tools.timers(client, "s").enqueued == [], "nothing is due until the next tick"


def wait_until_server_ms(r: redis.Redis, at: int) -> None:
    while (left := at - server_ms(r)) > 0:
        time.sleep(min(left, 200) / 1000)


@pytest.mark.timeout(120)
def test_a_real_stop_of_ten_one_second_ticks_under_each_policy(client, r):
    """Schedules ticking every second, made and then left with nothing sweeping
    them for ten ticks (the server's clock runs; no timer is moved by hand),
    then one sweep half a tick after the tenth: latest enqueues the tenth
    tick, all the ten (or the four most recent with max_missed=4), skip none
    with a grace shorter than half a tick and the tenth with a longer one. A
    sweep that read the clock of another process, or counted the ticks from
    its own start, gets another set."""
    policies = {
        "latest": {"missed": "latest"},
        "all": {"missed": "all", "max_missed": 100},
        "all4": {"missed": "all", "max_missed": 4},
        "skip": {"missed": "skip", "grace": 0.2},
        "skip2": {"missed": "skip", "grace": 2},
    }
    for attempt in range(3):  # a sweep that the machine's load delays past its window: again
        q = emq.Queue(client, f"stop{attempt}")
        for name, policy in policies.items():
            q.schedule(name, every=1, data="x", **policy)
        firsts = {int(i.next_tick.timestamp() * 1000) for i in q.schedules()}
        if len(firsts) != 1:  # made across a tick
            continue
        [first] = firsts
        wait_until_server_ms(r, first + 9_500)
        before = server_ms(r)
        ticked = emq.tools.timers(client, q.name)
        after = server_ms(r)
        if first + 9_200 < before and after < first + 10_000:
            break
    else:
        pytest.fail("three times, the schedules were made across a tick or the sweep ran outside its window")
    due = [first + k * 1000 for k in range(10)]
    want = {"latest": due[-1:], "all": due, "all4": due[-4:], "skip": [], "skip2": due[-1:]}
    for name, ticks in want.items():
        assert ticks_of(r, q.name, name) == ticks, name
    assert len(ticked.enqueued) == sum(map(len, want.values()))
    assert ticked.dropped == 4, "every policy but all with 100 dropped some"
    for info in q.schedules():
        assert int(info.next_tick.timestamp() * 1000) == due[-1] + 1000, f"{info.name}: the next tick is the first after the sweep"


def test_a_tick_whose_job_exists_is_skipped_and_a_removed_schedule_loses_its_timer(client, r):
    """A second host that finds the tick's job made must not add it again (nor
    fail): its timer still moves. A timer whose schedule is gone is dropped."""
    q = emq.Queue(client, "s")
    q.schedule("h", every=timedelta(hours=1), data="x")
    latest = server_ms(r) // HOUR * HOUR
    move_timer(r, "s", "h", latest)
    q.add("other's", id=f"schedule:h:{latest}")
    r.zadd("emq:{s}:timers", {"tick:gone": latest})
    ticked = emq.tools.timers(client, "s")
    assert (ticked.enqueued, ticked.skipped, ticked.removed) == ([], 1, 1)
    assert q.get(f"schedule:h:{latest}").data == b"other's"
    assert r.zrange("emq:{s}:timers", 0, -1, withscores=True) == [(b"tick:h", latest + HOUR)]


# -------------------------------------------------------- daylight saving, server clock


def next_change(zone: ZoneInfo, after: datetime) -> datetime:
    """The next instant (UTC) after `after` at which the zone's offset changes."""
    t = after.astimezone(timezone.utc).replace(second=0, microsecond=0)
    step = timedelta(hours=1)
    for _ in range(24 * 400):
        if (t + step).astimezone(zone).utcoffset() != t.astimezone(zone).utcoffset():
            while step > timedelta(minutes=1):  # the change is within this step: halve it
                step /= 2
                if (t + step).astimezone(zone).utcoffset() == t.astimezone(zone).utcoffset():
                    t += step
            return (t + timedelta(minutes=1)).replace(second=0, microsecond=0)
        t += step
    raise AssertionError(f"{zone}: no change within 400 days")


def tick_of_wall(zone: ZoneInfo, wall: datetime) -> datetime:
    """SPEC §14's rule, with Python's zoneinfo for the oracle: the first instant
    at which the zone's clock shows `wall` or later."""
    shown = []
    for fold in (0, 1):
        at = wall.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc)
        if at.astimezone(zone).replace(tzinfo=None) == wall:
            shown.append(at)
    if shown:
        return min(shown)
    # In a gap: the instant the new offset starts.
    return next_change(zone, wall.replace(tzinfo=zone, fold=0).astimezone(timezone.utc) - timedelta(hours=3))


@pytest.mark.timeout(120)
def test_the_next_tick_the_server_clock_gives_is_the_zones_rule(server, client, r):
    """SCHEDULE reads the server's clock and stores the first tick after it
    (plan and module alike). For the next daylight saving change of Berlin
    and New York after the server's now: a daily time in the skipped hour
    must be stored at the jump, one in the repeated hour at its first pass
    (a broken rule stores an instant an hour off, or next year's); a daily
    03:00 and an every-2-seconds cron are checked too, the latter swept for
    four seconds of the server's clock, one job an even second."""
    backends = ["plan", *(["module"] if module_loaded(r) else [])]
    now = datetime.fromtimestamp(server_ms(r) / 1000, timezone.utc)
    for backend in backends:
        q = emq.Queue(client, f"dst-{backend}", backend=backend)  # type: ignore[arg-type]
        for zone_name in ("Europe/Berlin", "America/New_York"):
            zone = ZoneInfo(zone_name)
            change = next_change(zone, now + timedelta(days=1))
            old, new = (change - timedelta(minutes=1)).astimezone(zone).utcoffset(), change.astimezone(zone).utcoffset()
            assert old is not None and new is not None
            spring = new > old
            # Half past the changed hour's start: skipped (spring) or repeated (fall).
            wall = (change + (old if spring else new) + timedelta(minutes=30)).replace(tzinfo=None)
            want = change if spring else change - timedelta(minutes=30)
            assert tick_of_wall(zone, wall) == want, "the oracle itself"
            name = f"{zone_name}-{'spring' if spring else 'fall'}"
            q.schedule(name, cron=f"{wall.minute} {wall.hour} {wall.day} {wall.month} *", tz=zone_name, data="x")
            q.schedule(f"{zone_name}-3am", cron="0 3 * * *", tz=zone_name, data="x")
            told = server_ms(r)
            stored = {i.name: i.next_tick for i in q.schedules()}
            assert stored[name] == want, f"{backend} {name}: {stored[name]} for {wall} local"
            local_now = datetime.fromtimestamp(told / 1000, zone).replace(tzinfo=None)
            days = [datetime.combine(local_now.date() + timedelta(days=d), datetime.min.time()) for d in range(3)]
            three = [tick_of_wall(zone, day.replace(hour=3)) for day in days]
            assert stored[f"{zone_name}-3am"] == min(t for t in three if t.timestamp() * 1000 > told - 2_000), backend

        made = server_ms(r)
        q.schedule("even", cron="*/2 * * * * *", tz="America/New_York", data="x", missed="all", max_missed=10)
        while server_ms(r) < made + 4_000:
            emq.tools.timers(client, q.name, backend=backend)  # type: ignore[arg-type]
            time.sleep(0.05)
        emq.tools.timers(client, q.name, backend=backend)  # type: ignore[arg-type]
        end = server_ms(r)
        ticks = ticks_of(r, q.name, "even")
        assert len(ticks) >= 2 and ticks == list(range(ticks[0], ticks[-1] + 1, 2000)) and ticks[0] % 2000 == 0, ticks
        assert made < ticks[0] <= made + 2_000 + 500 and ticks[-1] >= end - 2_500, (made, ticks, end)
        [even] = [i for i in q.schedules() if i.name == "even"]
        assert even.next_tick is not None and int(even.next_tick.timestamp() * 1000) == ticks[-1] + 2000


# ------------------------------------------------------------------ workers and wakes


def starts(r: redis.Redis) -> list[tuple[str, int]]:
    """`(id, attempt)` of every handler start the workers logged."""
    out = []
    for line in r.lrange(LOG, 0, -1):
        parts = line.decode().split()
        if parts[0] == "start":
            out.append((parts[2], int(parts[3])))
    return out


@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL of worker subprocesses")
def test_exactly_one_job_a_tick_with_two_workers_an_extra_scheduler_and_a_kill(server, client, r, procs):  # noqa: F811
    """Two workers and this process's TIMERS calls all sweep a 1 s schedule for
    about six seconds; one worker is SIGKILLed mid-way and restarted. Every
    tick from the first to the last has exactly one job (no gap: a tick lost;
    a job started twice at its first attempt: a tick enqueued twice)."""
    q = emq.Queue(client, "x1")
    q.schedule("sec", every=1, data="{}", missed="all", max_missed=100)
    args = ("--idle-beat", "30", "--lease", "2")
    a = procs.worker(server.url, "x1", "a", *args)
    procs.worker(server.url, "x1", "b", *args)
    deadline = time.monotonic() + 6
    killed = False
    while time.monotonic() < deadline:
        emq.tools.timers(client, "x1")
        if not killed and time.monotonic() > deadline - 3.5:
            a.send_signal(signal.SIGKILL)
            a.wait(10)
            procs.worker(server.url, "x1", "a2", *args)
            killed = True
        time.sleep(0.05)
    q.pause_schedule("sec")
    ticks = ticks_of(r, "x1", "sec")
    assert len(ticks) >= 4, ticks
    assert ticks == list(range(ticks[0], ticks[-1] + 1000, 1000)), "a tick between the first and the last got no job"
    # Every tick's job runs (the workers park no longer than the next tick).
    end = time.monotonic() + 10
    while time.monotonic() < end and not {f"schedule:sec:{t}" for t in ticks} <= {i for i, _ in starts(r)}:
        time.sleep(0.1)
    # A job the killed worker held runs again at its next attempt; a tick
    # enqueued twice would be claimed fresh (attempt 1) twice.
    first = [i for i, attempt in starts(r) if attempt == 1]
    assert sorted(first) == sorted(set(first)), "a tick's job was enqueued (and claimed fresh) twice"
    assert {f"schedule:sec:{t}" for t in ticks} <= {i for i, _ in starts(r)}, "a tick's job never ran"


def command_calls(r: redis.Redis) -> int:
    """Commands the server has run, from INFO commandstats (the INFO itself is one)."""
    return sum(int(v["calls"]) for k, v in r.info("commandstats").items() if k.startswith("cmdstat_"))


def test_a_parked_worker_wakes_for_a_new_earlier_schedule_without_polling(server, client, r, procs):  # noqa: F811
    """A worker parked with a 30 s idle beat must run the first tick of a
    schedule made after it parked within about a second (the wake token: a
    worker that only looked at its beat would wait 30 s), and, between ticks
    an hour apart, send next to nothing (no polling)."""
    q = emq.Queue(client, "w")
    procs.worker(server.url, "w", "p", "--idle-beat", "30")
    time.sleep(1.5)  # started and parked
    q.schedule("soon", every=1, data="{}")
    end = time.monotonic() + 5
    while time.monotonic() < end and not starts(r):
        time.sleep(0.05)
    ran = starts(r)
    assert ran and ran[0][0].startswith("schedule:soon:"), "the parked worker did not wake for the schedule"
    q.unschedule("soon")
    q.schedule("hourly", every=timedelta(hours=1), data="{}")
    time.sleep(1)
    before = command_calls(r)
    time.sleep(3)
    calls = command_calls(r) - before - 1
    assert calls <= 12, f"{calls} commands in 3 s while parked: someone polls"


# ------------------------------------------------------------------ plan against module


def random_state(rng: random.Random, q: emq.Queue, r: redis.Redis, now: int) -> None:
    """Schedules of every kind (daily ticks, so two runs a moment apart agree),
    paused or not, some timers due long ago, some jobs of due ticks already
    there, lanes paused or limited, a timer with no schedule."""
    day = 24 * HOUR
    for i in range(rng.randint(1, 6)):
        name = f"s{i}"
        policy = rng.choice(
            [{"missed": "latest"}, {"missed": "all", "max_missed": rng.randint(1, 5)}, {"missed": "skip", "grace": 3 * 86400}]
        )
        spec = rng.choice(
            [
                {"every": timedelta(days=1)},
                {"cron": "0 0 * * *", "tz": rng.choice(["UTC", "Europe/Berlin", "America/New_York"])},
                {"cron": "30 2 * * *", "tz": "Europe/Berlin"},
            ]
        )
        lane = rng.choice([None, "l1", "l2"])
        q.schedule(name, data=rng.choice([b"d", b"\xfe\xff", "{}"]), lane=lane, max_attempts=rng.randint(1, 4), **spec, **policy)
        if rng.random() < 0.2:
            q.pause_schedule(name)
        elif rng.random() < 0.8:
            back = now // day * day - rng.randint(0, 6) * day
            move_timer(r, q.name, name, back)
            if rng.random() < 0.3:
                q.add("taken", id=f"schedule:{name}:{back}")
    for lane in ("l1", "l2"):
        if rng.random() < 0.3:
            q.pause_lane(lane)
        if rng.random() < 0.3:
            q.set_lane_limit(lane, 1)
    if rng.random() < 0.3:
        r.zadd(f"emq:{{{q.name}}}:timers", {"tick:nothing": now - day})
    if rng.random() < 0.3:
        q.add("ready", id="ready")


def normalized(d: dict, t0: int, t1: int) -> dict:
    """The dump with every time in the calls' window replaced by NOW (a row's
    `created`, a record's `created`)."""
    pattern = re.compile(rb"\d{13}")

    def norm(b):
        if isinstance(b, bytes):
            return pattern.sub(lambda m: b"NOW" if t0 <= int(m.group()) <= t1 else m.group(), b)
        if isinstance(b, dict):
            return {norm(k): norm(v) for k, v in b.items()}
        if isinstance(b, list | tuple):
            return type(b)(norm(x) for x in b)
        return b

    return norm(d)


def queue_keys(keyspace: dict) -> dict:
    """The keys of queue `d` in a dump."""
    return {k: v for k, v in keyspace.items() if k.startswith(b"emq:{d}:")}


def test_timers_plan_and_module_write_the_same_keyspace(server, client, r):
    """Over random states, TIMERS by the plan (in this process, under its
    guard) and by the module (`EMQ.TIMERS`) leave the same keyspace, byte for
    byte, and answer the same."""
    if not module_loaded(r):
        pytest.skip("the server has no emq module (./dev builds it)")
    seen = {"enqueued": 0, "skipped": 0, "removed": 0}
    for seed in range(25):
        answers, dumps = [], []
        for backend in ("plan", "module"):
            r.flushall()
            t0 = server_ms(r)
            q = emq.Queue(client, "d")
            random_state(random.Random(seed), q, r, t0)
            answers.append(emq.tools.timers(client, "d", backend=backend))
            # The queue's keys only: the registry of queues is written once per process,
            # by the state's first add, not by TIMERS.
            dumps.append(normalized(queue_keys(dump(r)), t0, server_ms(r)))
        assert answers[0] == answers[1], f"seed {seed}"
        assert dumps[0] == dumps[1], f"seed {seed}"
        seen["enqueued"] += len(answers[0].enqueued)
        seen["skipped"] += answers[0].skipped
        seen["removed"] += answers[0].removed
    assert all(seen.values()), f"the states did not cover every decision: {seen}"


def test_the_schedule_verbs_by_the_module_write_what_the_plan_writes(server, r):
    """`Queue(backend="module")` runs the verbs as `EMQ.SCHEDULE`: the same
    records, timers and wake tokens as the plan's."""
    if not module_loaded(r):
        pytest.skip("the server has no emq module (./dev builds it)")
    dumps = []
    for backend in ("plan", "module"):
        r.flushall()
        t0 = server_ms(r)
        q = emq.Queue(emq.connect(server.url), "m", backend=backend)  # type: ignore[arg-type]
        q.schedule("a", cron="*/5 * * * *", tz="America/New_York", data=b"\x00x", missed="all", max_missed=3)
        q.schedule("b", every=timedelta(days=1), data="y", lane="l")
        q.pause_schedule("a")
        q.resume_schedule("a")
        q.schedule("b", every=timedelta(days=2), data="y", lane="l")
        q.unschedule("nothing")
        dumps.append(normalized(queue_keys(dump(r)), t0, server_ms(r)))
    assert dumps[0] == dumps[1]


# ------------------------------------------------------------------------ races, cluster


def test_racing_run_now_spec_changes_and_sweeps_leave_one_consistent_schedule(client, r):
    """Threads run the schedule now, change its period back and forth, pause
    and resume it, and sweep it, all at once. Afterwards the timer is the
    first tick after some moment of the last definition (a lost update can
    leave a timer of the other period, or none while running), and each job is
    a tick's or a run's, ready once."""
    q = emq.Queue(client, "race")
    q.schedule("s", every=1, data="x", missed="all", max_missed=10)
    stop = time.monotonic() + 2
    errors: list[BaseException] = []

    def loop(f):
        def run():
            try:
                while time.monotonic() < stop:
                    f()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        return threading.Thread(target=run)

    periods = iter(range(10**9))
    sweeper = emq.connect(_url(r))
    threads = [
        loop(lambda: q.run_schedule_now("s")),
        loop(lambda: q.schedule("s", every=1 + next(periods) % 2, data="x", missed="all", max_missed=10)),
        loop(lambda: (q.pause_schedule("s"), q.resume_schedule("s"))),
        loop(lambda: emq.tools.timers(sweeper, "race")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sweeper.close()
    assert not errors, errors
    q.resume_schedule("s")
    [info] = q.schedules()
    period = int(info.every.total_seconds() * 1000)
    next_ms = int(info.next_tick.timestamp() * 1000)
    assert next_ms % period == 0 and next_ms > server_ms(r) - 5_000
    assert r.zrange("emq:{race}:timers", 0, -1) == [b"tick:s"]
    ids = [k.decode().split(":job:", 1)[1] for k in r.scan_iter(match="emq:\\{race\\}:job:*")]
    assert ids and all(i.startswith("schedule:s:") for i in ids)
    assert sorted(r.lrange("emq:{race}:pending", 0, -1)) == sorted(i.encode() for i in ids), "each job is ready once"


def _url(r: redis.Redis) -> str:
    kw = r.connection_pool.connection_kwargs
    return f"redis://{kw['host']}:{kw['port']}"


def test_schedules_route_to_their_queues_node_in_a_cluster(cluster):
    """The verbs, the listing and TIMERS run on the node of the queue's slot
    (every key of a queue shares its hash tag)."""
    client = emq.connect(cluster.url)
    try:
        for i in range(3):
            name = cluster.queue_on(i, prefix="sch")
            q = emq.Queue(client, name)
            q.schedule("h", every=timedelta(hours=1), data="x")
            with cluster.node(i) as node:
                latest = server_ms(node) // HOUR * HOUR
                move_timer(node, name, "h", latest)
            assert emq.tools.timers(client, name).enqueued == [f"schedule:h:{latest}"]
            assert [s.name for s in q.schedules()] == ["h"]
            assert q.get(f"schedule:h:{latest}") is not None
    finally:
        client.close()

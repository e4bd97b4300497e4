"""A real Redis/Valkey Cluster (SPEC §11): 3 primaries on loopback (tests/servers.py),
Valkey 9.1 and Redis 7.0. Every call runs whole on the node that serves its queue's
slot, through any seed node; a slot that moves is followed; a redirect never reaches
the caller as another error or as a value."""

from __future__ import annotations

import threading
import time

import pytest

import emq
from emq import _core


def keys_on(cluster, i: int, queue: str) -> list[str]:
    with cluster.node(i) as r:
        return sorted(k.decode() for k in r.keys("emq:{" + queue + "}:*"))


def test_the_core_hashes_queues_to_the_servers_slots(cluster):
    with cluster.node(0) as r:
        for name in ["q", "orders", "a-b.c_d", "émq", "0", "x" * 128, *(f"q{i}" for i in range(200))]:
            assert _core.queue_slot(name) == r.execute_command("CLUSTER", "KEYSLOT", "emq:{" + name + "}:job:1"), name


def exercise(client: emq.Client, name: str, backend: str = "plan") -> dict:
    """Every kind of call on one queue: adds (flat, lane, delayed), promote,
    claim, extend, complete, fail, a stalled check, lane control, the reads."""
    q = emq.Queue(client, name)
    q.add(b"now")
    q.add(b"laned", lane="L")
    q.add(b"later", delay=0.001)
    time.sleep(0.01)
    assert emq.promote(client, name, batch=10, backend=backend) == 1
    jobs = q.claim(3, lease=60)
    assert sorted(j.data for j in jobs) == [b"laned", b"later", b"now"]
    by = {j.data: j for j in jobs}
    assert q.extend(by[b"now"], lease=60)
    assert q.complete(by[b"now"])
    assert q.fail(by[b"later"], "boom", retry_in=0) in ("scheduled",)
    q.pause_lane("L")
    q.resume_lane("L")
    q.set_lane_limit("L", 2)
    q.set_retention(keep_done=60)
    assert q.retention().keep_done == 60
    # No lease has expired: the check takes nothing, on the queue's node.
    recovered, dead = emq.stalled_check(client, name, max_stalled=None, batch=10, backend=backend)
    assert (recovered, dead) == ([], [])
    assert q.get(by[b"now"].id).state == "done"
    return q.counts()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_call_runs_on_its_queues_node_through_any_seed(cluster, seed):
    client = emq.connect(cluster.nodes[seed].url)
    try:
        names = [cluster.queue_on(i) for i in range(3)]
        for i, name in enumerate(names):
            counts = exercise(client, name)
            assert counts.done == 1 and counts.active == 1 and counts.pending == 1, counts
            assert keys_on(cluster, i, name), f"{name}: no keys on its node {i}"
            for j in range(3):
                if j != i:
                    assert keys_on(cluster, j, name) == [], f"{name} (node {i}) has keys on node {j}"
        assert emq.Queue(client, names[2]).lanes() == ["L"]
    finally:
        client.close()


def test_a_group_commit_of_completes_and_fails_runs_on_its_queues_node(cluster):
    """`settle_many` (and `complete_many`, `extend_many`) through a seed that
    serves none of the queues: each runs on its queue's node, all or none."""
    client = emq.connect(cluster.nodes[0].url)
    try:
        for i in (1, 2):
            name = cluster.queue_on(i, prefix="gc")
            q = emq.Queue(client, name)
            q.add_many([b"a", b"b", {"data": b"c", "lane": "L"}, {"data": b"d", "max_attempts": 1}])
            a, b, c, d = sorted(q.claim(4, lease=60), key=lambda j: j.data)
            assert q.extend_many([a, b, c, d], 60) == [True] * 4
            assert q.complete_many([a]) == [True]
            assert q.settle_many([b, (c, "boom", 0), (d, "bye")]) == [True, "scheduled", "dead"]
            counts = q.counts()
            assert (counts.done, counts.dead, counts.lanes, counts.active) == (2, 1, {"L": 1}, 0), counts
            assert keys_on(cluster, i, name) and keys_on(cluster, 0, name) == []
    finally:
        client.close()


@pytest.mark.parametrize("backend", ["plan", "lua"])
def test_both_sweep_backends_route_by_queue(cluster, backend):
    client = emq.connect(cluster.url)
    try:
        for i in range(3):
            name = cluster.queue_on(i, prefix=f"b{backend}")
            q = emq.Queue(client, name)
            q.add_many([{"data": b"x", "delay": 0.001}] * 5)
            time.sleep(0.01)
            assert emq.promote(client, name, batch=100, backend=backend) == 5
            assert q.counts().pending == 5
            assert keys_on(cluster, (i + 1) % 3, name) == []
    finally:
        client.close()


def test_a_queue_whose_slot_moved_is_followed_with_nothing_lost(cluster):
    client = emq.connect(cluster.url)
    try:
        name = cluster.queue_on(1)
        q = emq.Queue(client, name)
        ids = q.add_many([b"a", b"b", b"c"])
        assert q.counts().pending == 3  # the client has learned the map
        slot = cluster.slot(name)
        cluster.move_slot(slot, 2)
        assert cluster.owner(slot) == 2
        # Every call now meets MOVED on node 1 and follows it to node 2.
        jobs = q.claim(3)
        assert sorted(j.id for j in jobs) == sorted(ids)
        assert all(q.complete(j) for j in jobs)
        assert q.counts().done == 3
        assert keys_on(cluster, 1, name) == []
        # And back, to a client that never saw it move.
        cluster.move_slot(slot, 0)
        other = emq.connect(cluster.nodes[2].url)
        assert emq.Queue(other, name).counts().done == 3
        other.close()
    finally:
        client.close()


def test_an_unserved_slot_raises_cluster_error_naming_the_verb_and_the_slot(cluster):
    name = cluster.queue_on(0, prefix="gone")
    slot = cluster.slot(name)
    client = emq.connect(cluster.url, read_timeout=1.0)
    with cluster.node(0) as r:
        r.execute_command("CLUSTER", "DELSLOTS", slot)
    try:
        t = time.monotonic()
        with pytest.raises(emq.ClusterError) as e:
            emq.Queue(client, name).add(b"x")
        assert time.monotonic() - t < 5
        assert str(e.value).startswith("Queue.add: ") and str(slot) in str(e.value), e.value
    finally:
        with cluster.node(0) as r:
            r.execute_command("CLUSTER", "ADDSLOTS", slot)
        cluster.wait_ok()
        client.close()
    with cluster.node(0) as r:
        assert r.keys("emq:{" + name + "}:*") == [], "a refused call wrote nothing"


def test_a_worker_serves_a_queue_on_another_node(cluster):
    client = emq.connect(cluster.url)
    name = cluster.queue_on(2, prefix="w")
    q = emq.Queue(client, name)
    ran: list[bytes] = []
    done = threading.Event()

    def handler(job):
        ran.append(job.data)
        if len(ran) == 4:
            done.set()

    w = emq.Worker(q, handler, concurrency=2, beat=0.2)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        q.add_many([b"1", b"2"])
        q.add(b"3", delay=0.05)
        time.sleep(0.3)  # the worker parks on node 2; the token of a new add wakes it
        q.add(b"4")
        assert done.wait(10), ran
        assert sorted(ran) == [b"1", b"2", b"3", b"4"]
    finally:
        w.stop()
        t.join(10)
        client.close()


def test_an_acl_user_limited_to_emq_keys_runs_everything_on_every_node(cluster):
    """The user that test_auth_and_tls.py holds a worker to (`~emq:*`, no scripting,
    no CLUSTER): without `CLUSTER SLOTS` the client learns each slot from the
    `MOVED` that names it. Every node's connections run as that user."""
    from test_auth_and_tls import WORKER_COMMANDS

    user, password = "emq-cluster", "cluster-pw"
    for i in range(3):
        with cluster.node(i) as r:
            r.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["emq:*"], commands=[f"+{c}" for c in WORKER_COMMANDS])
    try:
        url = f"redis://{user}:{password}@127.0.0.1:{cluster.nodes[0].port}"
        client = emq.connect(url)
        for i in range(3):
            name = cluster.queue_on(i, prefix="acl")
            counts = exercise(client, name)
            assert counts.done == 1, counts
        for i in range(1, 3):
            with cluster.node(i) as r:
                users = {c["user"] for c in r.client_list() if c.get("user") != "default"}
                assert users == {user}, users
        client.close()
    finally:
        for i in range(3):
            with cluster.node(i) as r:
                r.acl_deluser(user)


# ---------------------------------------------------------------------------
# Failover: a cluster of its own (3 primaries, a replica of node 1), per test.


@pytest.fixture(params=["valkey", "redis"])
def failover_cluster(request):
    import servers

    c = servers.start_cluster(request.param, replicas=(1,))
    yield c
    c.stop()


class Load:
    """A thread that adds jobs to `queue` through emq, one call at a time, and
    records every id an add returned, every error, and the longest call."""

    def __init__(self, url: str, queue: str, **connect: object):
        self.client = emq.connect(url, **connect)
        self.queue = emq.Queue(self.client, queue)
        self.ids: list[str] = []
        self.not_replicated = 0
        self.errors: list[BaseException] = []
        # A reply lost to a killed node: the add may have landed (OutcomeUnknownError says so).
        self.unknown = 0
        self.longest = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            t = time.monotonic()
            try:
                self.ids.append(self.queue.add(f"job {n}".encode()))
            except emq.OutcomeUnknownError:
                self.unknown += 1
            except emq.NotReplicatedError:
                self.not_replicated += 1  # written, not acknowledged: like a lost reply
            except emq.EmqError as e:
                self.errors.append(e)
            self.longest = max(self.longest, time.monotonic() - t)
            n += 1
            time.sleep(0.002)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()


def wait_role(port: int, role: str, timeout: float = 30.0) -> None:
    import redis

    deadline = time.monotonic() + timeout
    with redis.Redis(host="127.0.0.1", port=port) as r:
        while r.info("replication")["role"] != role:
            assert time.monotonic() < deadline, f"{port} did not become {role}"
            time.sleep(0.05)


def test_a_graceful_failover_under_load_loses_nothing(failover_cluster):
    c = failover_cluster
    name = c.queue_on(1, prefix="fo")
    with Load(c.url, name) as load:
        time.sleep(0.3)
        replica = c.replicas[0]
        import redis

        with redis.Redis(host="127.0.0.1", port=replica.port) as r:
            r.execute_command("CLUSTER", "FAILOVER")
        wait_role(replica.port, "master")
        time.sleep(0.5)
    assert load.errors == [] and load.unknown == 0, (load.errors[:3], load.unknown)
    assert load.ids, "the load added nothing"
    client = emq.connect(c.url)
    counts = emq.Queue(client, name).counts()
    client.close()
    assert counts.pending == len(load.ids), (counts, len(load.ids))
    print(f"\ngraceful failover: {len(load.ids)} adds, the longest took {load.longest * 1000:.0f} ms")


def test_a_killed_primary_is_replaced_and_calls_go_on(failover_cluster):
    """SIGKILL of node 1 under load: calls wait (within the read timeout) while the
    replica takes over, then go on there. A write acknowledged by the primary
    but not yet replicated may be lost: counted and printed, not asserted."""
    c = failover_cluster
    name = c.queue_on(1, prefix="kill")
    with Load(c.url, name) as load:
        time.sleep(0.3)
        c.nodes[1].proc.kill()
        c.nodes[1].proc.wait()
        wait_role(c.replicas[0].port, "master")
        time.sleep(0.5)
        after = len(load.ids)
        time.sleep(0.5)
        assert len(load.ids) > after, "the load did not go on after the failover"
    assert load.errors == [], load.errors[:3]
    client = emq.connect(c.url)
    pending = emq.Queue(client, name).counts().pending
    client.close()
    lost = len(load.ids) - pending
    assert -load.unknown <= lost <= 5, (lost, len(load.ids), load.unknown)
    print(f"\nprimary killed: {len(load.ids)} adds, {lost} acknowledged then lost, longest call {load.longest:.1f} s")


def test_with_wait_replicas_no_acknowledged_add_is_lost_to_a_killed_primary(failover_cluster):
    """`emq.connect(wait_replicas=1)` under the same kill: an add returns only
    once the replica has it, so every add that returned is in the promoted
    replica. After the failover the new primary has no replica: its adds are
    written and raise NotReplicatedError."""
    c = failover_cluster
    name = c.queue_on(1, prefix="killw")
    with Load(c.url, name, wait_replicas=1, wait_timeout=2.0) as load:
        time.sleep(0.3)
        c.nodes[1].proc.kill()
        c.nodes[1].proc.wait()
        wait_role(c.replicas[0].port, "master")
        time.sleep(0.5)
        before, deadline = load.not_replicated, time.monotonic() + 10
        while load.not_replicated <= before:  # adds go on, on the new primary, which has no replica
            assert time.monotonic() < deadline, "the load did not go on after the failover"
            time.sleep(0.05)
    assert load.errors == [], load.errors[:3]
    assert load.ids, "the load added nothing before the kill"
    client = emq.connect(c.url)
    q = emq.Queue(client, name)
    missing = [i for i in load.ids if q.get(i) is None]
    pending = q.counts().pending
    client.close()
    assert missing == [], f"{len(missing)} of {len(load.ids)} acknowledged adds lost"
    print(f"\nprimary killed, wait_replicas=1: {len(load.ids)} adds acknowledged, none lost; {pending} in all")


# ---------------------------------------------------------------------------
# Slot migration under load


@pytest.mark.parametrize("how", ["setslot", "migrateslots"])
def test_a_busy_queue_moves_under_load_with_nothing_lost_or_run_twice(cluster, how):
    """Producers add, a worker runs every job (each well within its lease) and
    sweeps, while the queue's slot moves to another node: by the classic
    SETSLOT IMPORTING/MIGRATING + MIGRATE steps, or Valkey 9's CLUSTER MIGRATESLOTS.
    Every id added runs once and is done; SPEC I1 to I4 hold (nothing left in
    pending, active or schedule, no key left on the old node)."""
    if how == "migrateslots" and cluster.kind != "valkey":
        pytest.skip("CLUSTER MIGRATESLOTS is Valkey 9's")
    name = cluster.queue_on(1, prefix=f"mig{how}")
    slot = cluster.slot(name)
    runs: dict[str, int] = {}
    lock = threading.Lock()

    def handler(job):
        with lock:
            runs[job.id] = runs.get(job.id, 0) + 1
        time.sleep(0.002)

    client = emq.connect(cluster.url)
    q = emq.Queue(client, name)
    # Ballast, so that the slot has thousands of keys to move: jobs due in an hour.
    later = 3000
    for _ in range(later // 500):
        q.add_many([{"data": b"later", "delay": 3600}] * 500)
    w = emq.Worker(q, handler, concurrency=4, lease=20, beat=0.2)
    wt = threading.Thread(target=w.run, daemon=True)
    wt.start()
    try:
        with Load(cluster.url, name) as load:
            time.sleep(0.5)
            t = time.monotonic()
            if how == "setslot":
                cluster.move_slot(slot, 2)
            else:
                cluster.migrate_slot(slot, 2)
            moved_in = time.monotonic() - t
            time.sleep(0.5)
        assert load.errors == [] and load.unknown == 0, (load.errors[:3], load.unknown)
        deadline = time.monotonic() + 30
        while q.counts().done < len(load.ids):
            assert time.monotonic() < deadline, (q.counts(), len(load.ids))
            time.sleep(0.05)
    finally:
        w.stop()
        wt.join(30)
    counts = q.counts()
    client.close()
    assert sorted(runs) == sorted(load.ids), "every job added ran, and nothing else"
    assert [i for i, n in runs.items() if n > 1] == [], "no job ran twice"
    assert (counts.pending, counts.active, counts.schedule, counts.done) == (0, 0, later, len(load.ids)), counts
    assert keys_on(cluster, 1, name) == []
    print(f"\n{how}: {len(load.ids)} jobs; the slot moved in {moved_in * 1000:.0f} ms; the longest add took {load.longest * 1000:.0f} ms")


def test_one_worker_serves_queues_on_every_node_and_wakes_on_any(cluster):
    """A worker over a queue on each primary (through node 0): every job runs,
    and with a 30 s beat, a job added to node 2's queue while it parks runs long
    before the next beat (it parks on each node)."""
    client = emq.connect(cluster.url)
    queues = [emq.Queue(client, cluster.queue_on(i, prefix="mw")) for i in range(3)]
    ran: list[bytes] = []
    for q in queues:
        q.add_many([q.name.encode()] * 3)
    w = emq.Worker(queues, lambda job: ran.append(job.data), concurrency=3, beat=30)
    t = threading.Thread(target=w.run, daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        while len(ran) < 9:
            assert time.monotonic() < deadline, ran
            time.sleep(0.01)
        time.sleep(0.2)  # parked
        queues[2].add(b"late")
        deadline = time.monotonic() + 10
        while b"late" not in ran:
            assert time.monotonic() < deadline, "a token on node 2's queue did not wake the worker"
            time.sleep(0.01)
    finally:
        w.stop()
        t.join(40)
        client.close()
    assert sorted(ran) == sorted([q.name.encode() for q in queues for _ in range(3)] + [b"late"])


def test_a_cluster_over_tls_is_served_on_every_node_over_tls(monkeypatch):
    """`rediss://` to one node of a cluster whose nodes serve TLS (the bus too):
    the map gives the nodes' TLS ports, and every node's connection verifies the
    node against the CA, as the seed's does."""
    import servers

    c = servers.start_cluster("redis", tls=True)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(c.certs.ca))
        client = emq.connect(c.tls_url)
        for i in range(3):
            name = c.queue_on(i, prefix="tls")
            assert exercise(client, name).done == 1
            assert keys_on(c, i, name)
        for i in range(3):
            with c.node(i) as r:
                tls = [x for x in r.client_list() if x.get("laddr", "").endswith(f":{c.tls_ports[i]}")]
                assert tls, f"node {i}: no client on its TLS port"
        client.close()
    finally:
        c.stop()


@pytest.mark.parametrize("how", ["setslot", "migrateslots"])
def test_a_grouped_call_whose_slot_moves_replies_what_it_took(cluster, how):
    """A promote of 3,000 due jobs in groups of one (3,000 transactions) while its
    queue's slot moves: the call ends with the groups it applied (a redirect comes
    before anything of the next group is written) and its reply counts exactly
    those; the calls after it take the rest. Every job is counted once."""
    if how == "migrateslots" and cluster.kind != "valkey":
        pytest.skip("CLUSTER MIGRATESLOTS is Valkey 9's")
    name = cluster.queue_on(1, prefix=f"grp{how}")
    client = emq.connect(cluster.url)
    q = emq.Queue(client, name)
    n = 3000
    for _ in range(n // 500):
        q.add_many([{"data": b"x", "delay": 0.001}] * 500)
    time.sleep(0.01)
    replies: list[int] = []
    first = threading.Thread(target=lambda: replies.append(emq.promote(client, name, batch=n, group=1)))
    first.start()
    time.sleep(0.1)
    slot = cluster.slot(name)
    (cluster.move_slot if how == "setslot" else cluster.migrate_slot)(slot, 2)
    first.join(60)
    # The old node's connection, which met the redirect with the next group's
    # reads behind the EXEC, is still in step: another queue there works.
    other = emq.Queue(client, cluster.queue_on(1, prefix="still"))
    other.add(b"y")
    assert other.counts().pending == 1
    while moved := emq.promote(client, name, batch=n, group=1):
        replies.append(moved)
    counts = q.counts()
    client.close()
    assert counts.pending == n and counts.schedule == 0, counts
    assert sum(replies) == n, replies
    print(f"\n{how}: replies {replies}")

"""`Queue.complete_and_claim` (a group commit that claims the next
jobs in the same transaction). It is a claim of flat jobs (from `pending`; lanes
are left to `claim`) and `complete_many`, one after the other, in one
transaction: each job answered as `complete` alone would, the jobs taken as a
claim takes them from `pending`; bad input writes nothing; and when another
client's write aborts it, the completes are made without the claim."""

from __future__ import annotations

import threading
import time

import pytest

import emq
from test_complete_many import normalised, snapshot, twin


def with_work(client, r, name: str, flat: int) -> tuple[emq.Queue, list]:
    """`twin`'s queue (flat and lane jobs claimed, lanes with work waiting) and
    `flat` more flat jobs ready in `pending`."""
    q, jobs = twin(client, r, name)
    if flat:
        q.add_many([f"g{i}".encode() for i in range(flat)])
    return q, jobs


def test_the_same_as_a_flat_claim_then_the_completes(server, r, client):
    q1, jobs1 = with_work(client, r, "pair", 4)
    q2, jobs2 = with_work(client, r, "seq", 4)
    order = [3, 2, 0, 4, 1]
    done, claimed = q1.complete_and_claim([jobs1[i] for i in order], 3, lease=60)
    taken = q2.claim(3, lease=60)  # pending holds more than 3: flat ones only
    want = q2.complete_many([jobs2[i] for i in order])
    assert done == want == [True] * 5
    assert [(j.data, j.attempts, j.lane, j.state) for j in claimed] == [(j.data, j.attempts, j.lane, j.state) for j in taken]
    assert [j.data for j in claimed] == [b"g0", b"g1", b"g2"]
    assert all(j.token for j in claimed) and len({j.token for j in claimed}) == 3
    assert normalised(r, "pair") == normalised(r, "seq")


def test_lanes_are_left_to_the_claims(server, r, client):
    """With fewer flat jobs than it may take, it takes those and no lane job
    (a claim would go on to the lanes); the lanes its completes free are
    offered, with their wake tokens, for a claim to serve."""
    q, jobs = with_work(client, r, "lanes-left", 1)
    r.delete("emq:{lanes-left}:wake")
    a1, b1, b2, f1, f2 = jobs
    done, claimed = q.complete_and_claim([a1, b1], 5, lease=60)
    assert done == [True, True]
    assert [j.data for j in claimed] == [b"g0"] and claimed[0].lane is None
    assert q.counts().lanes == {"A": 1, "B": 1}
    assert b"A" in r.lrange("emq:{lanes-left}:wake", 0, -1)  # B is still at its limit (b2 runs)
    # The lane jobs are a claim's to take (b3 once b2, still running, frees B's slot).
    assert [j.data for j in q.claim(5, lease=60)] == [b"a2"]


def test_nothing_to_claim_and_nothing_held(server, r, client):
    q, jobs = with_work(client, r, "idle", 0)
    assert q.complete_and_claim([], 4) == ([], [])
    before = snapshot(r)
    stale = emq.Job(id=jobs[3].id, data=b"", token="not-the-token")
    # Nothing in `pending`, a stale job: refused, and nothing written.
    assert q.complete_and_claim([stale], 2) == ([False], [])
    assert snapshot(r) == before


def test_a_batch_of_current_stale_done_and_ghost_jobs(server, r, client):
    q, jobs = with_work(client, r, "mixed", 2)
    a1, b1, b2, f1, f2 = jobs
    assert q.complete(b2)
    r.delete(f"emq:{{mixed}}:job:{f2.id}")
    stale = emq.Job(id=b1.id, data=b"", token="not-the-token", lane="B")
    done, claimed = q.complete_and_claim([a1, stale, b2, f2, f1], 2, lease=60)
    assert done == [True, False, False, False, True]
    assert [j.data for j in claimed] == [b"g0", b"g1"]
    assert r.hget(f"emq:{{mixed}}:job:{b1.id}", "state") == b"active", "the stale job's row is left as it is"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda q, jobs: q.complete_and_claim(jobs, -1), "Queue.complete_and_claim: n"),
        (lambda q, jobs: q.complete_and_claim(jobs, 1, lease=0), "Queue.complete_and_claim: lease"),
        (lambda q, jobs: q.complete_and_claim(jobs[0], 1), "Queue.complete_and_claim: jobs"),
        (lambda q, jobs: q.complete_and_claim([*jobs, "x"], 1), "Queue.complete_and_claim: job"),
        (lambda q, jobs: q.complete_and_claim([jobs[0], jobs[0]], 1), "Queue.complete_and_claim: jobs"),
    ],
)
def test_bad_input_names_the_verb_and_writes_nothing(server, r, client, call, message):
    q, jobs = with_work(client, r, "bad", 2)
    before = snapshot(r)
    with pytest.raises(emq.ArgumentError, match=message):
        call(q, jobs)
    assert snapshot(r) == before


def test_a_wrong_type_writes_nothing(server, r, client):
    q, jobs = with_work(client, r, "wrong", 2)
    r.delete("emq:{wrong}:ring")
    r.set("emq:{wrong}:ring", "x")
    before = snapshot(r)
    with pytest.raises(emq.LayoutError, match="ring"):
        q.complete_and_claim(jobs[:2], 2)
    assert snapshot(r) == before


def test_another_claimer_drops_the_claim_not_the_completes(server, r, proxy):
    """Another client claims the head of `pending` between the call's reads and
    its EXEC (held by the proxy): the transaction aborts, and the call is made
    again without the claim. The completes are made; the claim takes nothing
    and says so (None), and no job is claimed twice."""
    q = emq.Queue(emq.connect(proxy.url), "race")
    other = emq.Queue(emq.connect(server.url), "race")
    q.add_many([b"h1", b"h2"])
    held = q.claim(2, lease=60)
    q.add_many([b"n1", b"n2", b"n3"])
    proxy.arm("stall", command="MULTI", times=1, seconds=0.4)
    box: dict = {}
    t = threading.Thread(target=lambda: box.update(out=q.complete_and_claim(held, 2, lease=60)))
    t.start()
    deadline = time.monotonic() + 10
    while not proxy.faults("stall"):
        assert time.monotonic() < deadline, "the call never reached its transaction"
        time.sleep(0.005)
    taken = other.claim(1, lease=60)
    t.join(30)
    done, claimed = box["out"]
    assert done == [True, True]
    assert claimed is None
    assert [j.data for j in taken] == [b"n1"]
    counts = q.counts()
    assert (counts.done, counts.active, counts.pending) == (2, 1, 2)


def test_racing_pairs_and_claims_take_every_job_once(server, r, client):
    """Workers' group commits that claim, and plain claims, racing over one
    queue: every job is run exactly once and completed."""
    q = emq.Queue(client, "racing")
    total = 400
    q.add_many([f"j{i}".encode() for i in range(total)])
    seen: list[str] = []
    lock = threading.Lock()

    def pairing(c: emq.Client) -> None:
        mine = emq.Queue(c, "racing")
        held = mine.claim(3, lease=60)
        while held:
            with lock:
                seen.extend(j.id for j in held)
            done, claimed = mine.complete_and_claim(held, 3, lease=60)
            assert all(done)
            held = claimed if claimed is not None else mine.claim(3, lease=60)

    def claiming(c: emq.Client) -> None:
        mine = emq.Queue(c, "racing")
        while held := mine.claim(2, lease=60):
            with lock:
                seen.extend(j.id for j in held)
            assert all(mine.complete_many(held))

    threads = [threading.Thread(target=pairing, args=(emq.connect(server.url),)) for _ in range(3)]
    threads += [threading.Thread(target=claiming, args=(emq.connect(server.url),)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert len(seen) == total and len(set(seen)) == total, "a job was taken twice, or lost"
    counts = q.counts()
    assert (counts.done, counts.active, counts.pending) == (total, 0, 0)


def watches(r) -> int:
    return calls(r, "watch")


def calls(r, command: str) -> int:
    return int(r.info("commandstats").get(f"cmdstat_{command}", {}).get("calls", 0))


def test_a_commit_reads_the_clock_once_and_each_list_type_once(r, client):
    """The claim and the completes of a commit read `TIME` and the types of the
    lists both write once between them: one clock reading for the call (SPEC
    §4), and fewer commands for the server. A hinted commit (the claim reads its
    rows with its first read, beside the completes') shares `LLEN ring`, `LLEN
    wake` and `ZCARD active` too."""
    q = emq.Queue(client, "once")
    q.add_many([f"o{i}".encode() for i in range(12)])
    jobs = q.claim(4, lease=60)
    done, first = q.complete_and_claim(jobs, 2, lease=60)  # reads past: the next commit is hinted
    assert done == [True] * 4 and len(first) == 2
    before = {c: calls(r, c) for c in ("time", "llen", "zcard")}
    done, second = q.complete_and_claim(first, 2, lease=60)
    assert done == [True] * 2 and [j.data for j in second] == [b"o6", b"o7"]
    got = {c: calls(r, c) - before[c] for c in before}
    # Apart: TIME twice, LLEN ring and wake twice each, ZCARD active twice and done.
    assert got == {"time": 1, "llen": 2, "zcard": 2}, got


def test_a_commit_claims_what_the_last_one_read_past_in_one_round_trip_less(server, r, client):
    """A commit's claim reads `pending` twice as far as it may take; the next
    commit on the connection watches and reads those ids' rows with its first
    read (one WATCH where an unhinted call sends two), and takes them only if
    `pending` still leads with them: the same keyspace as a claim then the
    completes on a twin queue. A hint gone stale (another claimer took the ids)
    costs the round trip back, never a wrong job."""
    q, jobs = with_work(client, r, "hint", 9)
    q2, jobs2 = with_work(client, r, "nohint", 9)
    done, first = q.complete_and_claim(jobs, 3, lease=60)  # g0..g2; g3..g5 read past
    before = watches(r)
    done2, second = q.complete_and_claim(first, 3, lease=60)
    assert watches(r) - before == 1, "the hinted commit watched twice: the hint was not used"
    assert done == [True] * len(jobs) and done2 == [True] * 3
    assert [j.data for j in first + second] == [f"g{i}".encode() for i in range(6)]
    taken = q2.claim(3, lease=60)  # pending holds more than 3: flat ones only
    q2.complete_many(jobs2)
    taken2 = q2.claim(3, lease=60)
    q2.complete_many(taken)
    assert [j.data for j in taken2] == [j.data for j in second]
    assert normalised(r, "hint") == normalised(r, "nohint")
    # Stale: another client takes g6, g7 (the hint) before the next commit.
    other = emq.Queue(emq.connect(server.url), "hint")
    assert [j.data for j in other.claim(2, lease=60)] == [b"g6", b"g7"]
    before = watches(r)
    done3, third = q.complete_and_claim(second, 3, lease=60)
    assert watches(r) - before == 2, "a stale hint: the rows actually taken are watched"
    assert done3 == [True] * 3 and [j.data for j in third] == [b"g8"]
    held = {x.decode() for x in r.zrange("emq:{hint}:active", 0, -1)}
    assert {j.id for j in third} <= held and len(held) == 3, held  # g6, g7 (the other claimer's) and g8

//! The claim conversation driven with made-up replies: what it reads and
//! watches, and the writes it decides on. No server.

mod support;

use emq_plan::jobs::claim::{Claim, Claimed};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{LaneField, RowFields, Write};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

/// The lease every claim here takes (ms).
const LEASE: u64 = 1000;

/// A row as a claim reads it: `state`, `attempts`, `max_attempts`, `data`.
fn job(state: &str) -> Reply {
    fields(&[Some(state), Some("0"), Some("3"), Some("d")])
}

/// A row with none of the fields: a ghost where `EXISTS` does not count it.
fn ghost() -> Reply {
    fields(&[None, None, None, None])
}

/// `HMGET P flatctl lvl:1 … lvl:9` of a queue that uses no priority.
fn no_levels() -> Reply {
    Reply::Array(vec![Reply::Nil; 9])
}

fn expect_read<T: std::fmt::Debug>(step: Step<T>) {
    assert!(matches!(step, Step::Read { .. }), "expected a read, got {step:?}");
}

fn claim(n: u64) -> Claim {
    let tokens = (1..=n).map(|i| format!("t{i}").into_bytes()).collect();
    Claim::new(Keys::new(b"q"), n, LEASE, tokens).unwrap()
}

/// The row write of a job this claim takes: attempts one more than read (0),
/// the lease from the call's clock, the token handed to it.
fn claimed_row(i: &str, token: &str) -> Write {
    row(i, RowFields::Claimed { attempts: 1, lease: NOW + LEASE as i64, token: id(token), claimed: NOW })
}

fn lease(ids: &[&str]) -> Write {
    Write::Lease { deadline: NOW + LEASE as i64, ids: members(ids) }
}

/// The wake chain: a parked worker woken for the work this claim left.
fn wake_chain() -> [Write; 2] {
    [Write::Wake(members(&[""])), Write::TrimWake]
}

/// Flat ids come from the head of `pending`, each row taken with one attempt
/// more and a fresh token, leased from the call's clock; `pending` read one
/// past `n` showed more work, so the claim leaves a wake token for the next
/// worker. A broken claim that took ids past `n`, kept the attempts as read,
/// reused a token or left no token while work remains fails here.
#[test]
fn flat_ids_come_first_with_a_fresh_token_each_and_work_left_wakes_the_next_worker() {
    let mut c = claim(2);
    let (watch, cmds) = read(c.start());
    assert!(watch.is_empty(), "nothing is watched before the heads are read");
    assert_eq!(
        cmds,
        vec![
            cmd(&["TIME"]),
            cmd(&["LRANGE", "emq:{q}:pending", "0", "2"]),
            cmd(&["LRANGE", "emq:{q}:ring", "0", "1023"]),
            cmd(&["HMGET", "emq:{q}:flatctl", "lvl:1", "lvl:2", "lvl:3", "lvl:4", "lvl:5", "lvl:6", "lvl:7", "lvl:8", "lvl:9"]),
        ]
    );
    let (watch, cmds) = read(c.feed(&[time(), list(&["a", "b", "c"]), list(&[]), no_levels()]).unwrap());
    assert_eq!(watch, vec![key("job:a"), key("job:b")], "the rows it takes, not pending");
    assert_eq!(cmds[0], cmd(&["LRANGE", "emq:{q}:pending", "0", "1"]), "the head again, under the watch");
    let w = exec(c.feed(&[list(&["a", "b"]), job("pending"), job("pending"), Reply::Int(2), Reply::Int(0), Reply::Int(0)]).unwrap());
    let mut want = vec![Write::TakePending { count: 2 }, claimed_row("a", "t1"), claimed_row("b", "t2"), lease(&["a", "b"])];
    want.extend(wake_chain());
    assert_eq!(w, want);
    let out = c.finish(&vec![Reply::Int(1); w.len()]).unwrap();
    let taken = |i: &str, t: &str| Claimed {
        id: id(i),
        data: id("d"),
        lane: None,
        attempts: 1,
        max_attempts: 3,
        token: id(t),
        deadline: NOW + LEASE as i64,
    };
    assert_eq!(out, vec![taken("a", "t1"), taken("b", "t2")]);
}

/// With `pending` holding no more than it takes and no lane in the ring, no
/// work is left: no wake token (a worker woken for nothing would claim nothing).
#[test]
fn no_work_left_leaves_no_wake_token() {
    let mut c = claim(2);
    c.start();
    c.feed(&[time(), list(&["a"]), list(&[]), no_levels()]).unwrap();
    let w = exec(c.feed(&[list(&["a"]), job("pending"), Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert_eq!(w, vec![Write::TakePending { count: 1 }, claimed_row("a", "t1"), lease(&["a"])]);
}

/// Flat ids first, then the lanes for the slots left: a claim that served the
/// lanes first would starve `pending` behind busy lanes.
#[test]
fn flat_ids_first_then_the_lanes_for_the_slots_left() {
    let mut c = claim(2);
    c.start();
    let (watch, cmds) = read(c.feed(&[time(), list(&["a"]), list(&["L"]), no_levels()]).unwrap());
    assert_eq!(watch, vec![key("job:a"), key("ring")]);
    assert!(cmds.contains(&cmd(&["LRANGE", "emq:{q}:lane:L", "0", "0"])), "one slot left for the lanes: {cmds:?}");
    let replies = [list(&["a"]), job("pending"), Reply::Int(1), list(&["L"]), ctl(false, 0, 0, true), Reply::Int(1), list(&["b"])];
    read(c.feed(&[&replies[..], &[Reply::Int(0), Reply::Int(0)]].concat()).unwrap());
    let w = exec(c.feed(&[job("pending"), Reply::Int(1)]).unwrap());
    let mut want = vec![
        Write::TakePending { count: 1 },
        claimed_row("a", "t1"),
        Write::TakeLaneHead { lane: id("L") },
        Write::RotateRing,
        claimed_row("b", "t2"),
        Write::TakeSlots { lane: id("L"), by: 1 },
        lease(&["a", "b"]),
    ];
    want.extend(wake_chain());
    assert_eq!(w, want);
}

/// Nothing flat: the lanes of the ring, round-robin from its head, one id per
/// lane per turn (L, M, then L again), each serve taking the lane's head and
/// rotating the ring; each lane's `active` grows by what it gave. A claim that
/// drained L before M, or forgot to rotate, would not be fair between lanes.
#[test]
fn lanes_are_served_round_robin_one_id_per_turn() {
    let mut c = claim(3);
    c.start();
    let (watch, cmds) = read(c.feed(&[time(), list(&[]), list(&["L", "M"]), no_levels()]).unwrap());
    assert_eq!(watch, vec![key("ring")], "the ring, which every serve rotates, guards the lane heads");
    assert_eq!(cmds[2], lanectl_read("L"));
    assert_eq!(cmds[4], cmd(&["LRANGE", "emq:{q}:lane:L", "0", "2"]), "up to a slot's worth of each lane's head");
    let in_ring = ctl(false, 0, 0, true);
    let replies = [list(&[]), list(&["L", "M"]), in_ring.clone(), Reply::Int(2), list(&["a", "b"]), in_ring, Reply::Int(1), list(&["c"])];
    let (watch, _) = read(c.feed(&[&replies[..], &[Reply::Int(0), Reply::Int(0)]].concat()).unwrap());
    assert_eq!(watch, vec![key("job:a"), key("job:c"), key("job:b")], "the lane rows it takes, in turn order");
    let w = exec(c.feed(&[job("pending"), job("pending"), job("pending"), Reply::Int(3)]).unwrap());
    let serve = |l: &str| [Write::TakeLaneHead { lane: id(l) }, Write::RotateRing];
    let mut want = vec![];
    for (l, i, t) in [("L", "a", "t1"), ("M", "c", "t2"), ("L", "b", "t3")] {
        want.extend(serve(l));
        want.push(Write::SetRow { id: id(i), fields: RowFields::Claimed { attempts: 1, lease: NOW + 1000, token: id(t), claimed: NOW } });
    }
    want.extend([Write::TakeSlots { lane: id("L"), by: 2 }, Write::TakeSlots { lane: id("M"), by: 1 }, lease(&["a", "c", "b"])]);
    want.extend(wake_chain());
    assert_eq!(w, want, "the ring's lanes may hold more: the chain goes on");
    let lanes: Vec<_> = c.finish(&[]).unwrap().into_iter().map(|j| j.lane).collect();
    assert_eq!(lanes, vec![Some(id("L")), Some(id("M")), Some(id("L"))]);
}

/// A lane that cannot be served (paused, or at its limit) and a lane found
/// empty leave the ring from its head, with `ring` cleared in their control
/// (so the next offer puts them back); the claim watches what it decided on:
/// the control of the one, the list of the other. A broken claim that skipped
/// them in place would serve a paused lane on the next turn, or strand an
/// empty one marked as in the ring.
#[test]
fn a_lane_that_cannot_be_served_or_is_empty_leaves_the_ring_with_ring_cleared() {
    for blocked in [ctl(true, 0, 0, true), ctl(false, 1, 1, true)] {
        let mut c = claim(1);
        c.start();
        c.feed(&[time(), list(&[]), list(&["P", "E", "L"]), no_levels()]).unwrap();
        let in_ring = ctl(false, 0, 0, true);
        let replies = [
            list(&[]),
            list(&["P", "E", "L"]),
            blocked.clone(),
            Reply::Int(1),
            list(&["x"]),
            in_ring.clone(),
            Reply::Int(0),
            list(&[]),
            in_ring,
            Reply::Int(1),
            list(&["a"]),
            Reply::Int(0),
            Reply::Int(0),
        ];
        let (watch, cmds) = read(c.feed(&replies).unwrap());
        assert_eq!(watch, vec![key("job:a"), key("lanectl:P"), key("lane:E"), key("lanectl:E")], "{blocked:?}");
        let hmget = |l: &str| {
            let key = format!("emq:{{q}}:lanectl:{l}");
            cmd(&[
                "HMGET", &key, "paused", "limit", "active", "ring", "lvl:1", "lvl:2", "lvl:3", "lvl:4", "lvl:5", "lvl:6", "lvl:7", "lvl:8",
                "lvl:9",
            ])
        };
        assert_eq!(cmds[2..], [hmget("P"), cmd(&["LLEN", "emq:{q}:lane:E"]), hmget("E")]);
        let w = exec(c.feed(&[job("pending"), Reply::Int(1), blocked.clone(), Reply::Int(0), ctl(false, 0, 0, true)]).unwrap());
        let mut want = vec![
            Write::DropRingHead,
            Write::DropRingHead,
            Write::TakeLaneHead { lane: id("L") },
            Write::RotateRing,
            claimed_row("a", "t1"),
            lane("P", LaneField::InRing(false)),
            lane("E", LaneField::InRing(false)),
            Write::TakeSlots { lane: id("L"), by: 1 },
            lease(&["a"]),
        ];
        want.extend(wake_chain());
        assert_eq!(w, want, "{blocked:?}");
    }
}

/// What a drop decided on changed under its watch (the paused lane resumed):
/// a conflict, a new call, not a lane dropped that could be served.
#[test]
fn a_dropped_lane_that_changed_before_the_watch_is_a_conflict() {
    let mut c = claim(1);
    c.start();
    c.feed(&[time(), list(&[]), list(&["P", "L"]), no_levels()]).unwrap();
    let in_ring = ctl(false, 0, 0, true);
    let replies = [list(&[]), list(&["P", "L"]), ctl(true, 0, 0, true), Reply::Int(1), list(&["x"]), in_ring, Reply::Int(1), list(&["a"])];
    c.feed(&[&replies[..], &[Reply::Int(0), Reply::Int(0)]].concat()).unwrap();
    let e = c.feed(&[job("pending"), Reply::Int(1), ctl(false, 0, 0, true)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
}

/// A flat ghost (an id in `pending` with no row) is popped with the rest but
/// not claimed, and takes no token; `pending` is watched and read again first,
/// since no one who drops it writes its row. A broken claim would hand out a
/// job with no row, or skip the pop and leave the ghost at the head forever.
#[test]
fn a_flat_ghost_is_popped_unclaimed_under_a_watch_on_pending() {
    let mut c = claim(2);
    c.start();
    c.feed(&[time(), list(&["g", "a"]), list(&[]), no_levels()]).unwrap();
    let (watch, cmds) = read(c.feed(&[list(&["g", "a"]), ghost(), job("pending"), Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert_eq!((watch, cmds), (vec![key("pending")], vec![cmd(&["LRANGE", "emq:{q}:pending", "0", "1"])]));
    let w = exec(c.feed(&[list(&["g", "a"])]).unwrap());
    assert_eq!(w, vec![Write::TakePending { count: 2 }, claimed_row("a", "t1"), lease(&["a"])]);
    // A row in another state (taken by someone) is dropped the same way.
    let mut c = claim(1);
    c.start();
    c.feed(&[time(), list(&["a"]), list(&[]), no_levels()]).unwrap();
    c.feed(&[list(&["a"]), job("active"), Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap();
    assert_eq!(exec(c.feed(&[list(&["a"])]).unwrap()), vec![Write::TakePending { count: 1 }]);
}

/// A lane's ghost takes the lane's turn (it is popped and the ring rotates)
/// but neither a slot nor the lane's limit: the claim simulates the lanes
/// again without it and takes the next id.
#[test]
fn a_lane_ghost_takes_its_turn_but_no_slot() {
    let mut c = claim(1);
    c.start();
    c.feed(&[time(), list(&[]), list(&["L"]), no_levels()]).unwrap();
    let replies = [list(&[]), list(&["L"]), ctl(false, 0, 0, true), Reply::Int(2), list(&["g", "a"]), Reply::Int(0), Reply::Int(0)];
    c.feed(&replies).unwrap();
    let (watch, _) = read(c.feed(&[ghost(), Reply::Int(0)]).unwrap());
    assert_eq!(watch, vec![key("job:g"), key("job:a")], "simulated again: the ghost's turn, then a");
    let w = exec(c.feed(&[ghost(), job("pending"), Reply::Int(1)]).unwrap());
    let mut want = vec![
        Write::TakeLaneHead { lane: id("L") },
        Write::RotateRing,
        Write::TakeLaneHead { lane: id("L") },
        Write::RotateRing,
        claimed_row("a", "t1"),
        Write::TakeSlots { lane: id("L"), by: 1 },
        lease(&["a"]),
    ];
    want.extend(wake_chain());
    assert_eq!(w, want);
}

/// A flat claim (a group commit's) reads the ring's length only: with
/// nothing in `pending` it is done without a write, whatever the lanes hold;
/// with flat work it takes it and, lanes having work, wakes a worker for them.
#[test]
fn a_flat_claim_takes_from_pending_only_and_wakes_for_the_lanes() {
    let flat = || claim(1).flat_only();
    let mut c = flat();
    let (_, cmds) = read(c.start());
    assert_eq!(cmds[1..3], [cmd(&["LRANGE", "emq:{q}:pending", "0", "1"]), cmd(&["LLEN", "emq:{q}:ring"])]);
    assert_eq!(c.feed(&[time(), list(&[]), Reply::Int(3), no_levels()]).unwrap(), Step::Done(vec![]));
    let mut c = flat();
    c.start();
    let (_, cmds) = read(c.feed(&[time(), list(&["a"]), Reply::Int(3), no_levels()]).unwrap());
    assert!(!cmds.iter().any(|c| c.to_args()[1].starts_with(b"emq:{q}:lane")), "no lane is read: {cmds:?}");
    let w = exec(c.feed(&[list(&["a"]), job("pending"), Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap());
    let mut want = vec![Write::TakePending { count: 1 }, claimed_row("a", "t1"), lease(&["a"])];
    want.extend(wake_chain());
    assert_eq!(w, want);
}

/// `wake` or `active` of the wrong type refuses the claim before it writes.
#[test]
fn a_wake_or_active_of_the_wrong_type_refuses_the_claim() {
    for (wake, active) in [(wrongtype(), Reply::Int(0)), (Reply::Int(0), wrongtype())] {
        let mut c = claim(1);
        c.start();
        c.feed(&[time(), list(&["a"]), list(&[]), no_levels()]).unwrap();
        let e = c.feed(&[list(&["a"]), job("pending"), Reply::Int(1), wake, active]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Layout, "{e}");
    }
}

/// Lanes L (a, b) and M (c, d) in the ring, nothing flat, claim(2). The first
/// read of `a` finds it not `pending` (claimed, say), so the claim turns to c and b
/// and skips a's turn; when it reads the rows again under the watch, `a` is
/// `pending` again (recovered meanwhile). Planning now would take a, c and b: more
/// than 2, with a slot nobody counted. It is a conflict, a new call.
#[test]
fn a_skipped_lane_row_that_became_pending_is_a_conflict() {
    let mut c = Claim::new(Keys::new(b"q"), 2, 1000, vec![b"t1".to_vec(), b"t2".to_vec()]).unwrap();
    expect_read(c.start());
    let time = Reply::Array(vec![bulk("1700000000"), bulk("123456")]);
    expect_read(c.feed(&[time, list(&[]), list(&["L", "M"]), no_levels()]).unwrap());
    let in_ring = fields(&[None, None, None, Some("1")]);
    let rows = [
        list(&[]),
        list(&["L", "M"]),
        in_ring.clone(),
        Reply::Int(2),
        list(&["a", "b"]),
        in_ring,
        Reply::Int(2),
        list(&["c", "d"]),
        Reply::Int(0),
        Reply::Int(0),
    ];
    expect_read(c.feed(&rows).unwrap());
    // a and c: a is not pending.
    expect_read(c.feed(&[job("active"), job("pending"), Reply::Int(2)]).unwrap());
    // a, c and b: a is pending again.
    let e = c.feed(&[job("pending"), job("pending"), job("pending"), Reply::Int(3)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
}

/// `HMGET P flatctl lvl:1 … lvl:9` with `levels` marked.
fn marked(levels: &[usize]) -> Reply {
    Reply::Array((1..=9).map(|p| if levels.contains(&p) { bulk("1") } else { Reply::Nil }).collect())
}

/// Priorities in the flat list (SPEC §15): `pending` (level 0) holds fewer ids
/// than the claim may take and levels 2 and 5 are marked, so one more read takes
/// each marked level's head; the claim takes level 0, then level 2 in order,
/// confirms both heads under the rows' watch, clears level 5 (found empty, its
/// list watched and read again) and leaves a wake token for level 2's rest. A
/// claim that took level 2 before `pending`, skipped the read of a marked level,
/// or cleared a field without watching its list would fail here.
#[test]
fn a_claim_takes_the_flat_levels_in_order_and_clears_an_empty_one() {
    let mut c = claim(3);
    c.start();
    let (watch, cmds) = read(c.feed(&[time(), list(&["a"]), list(&[]), marked(&[2, 5])]).unwrap());
    assert!(watch.is_empty());
    assert_eq!(cmds, vec![cmd(&["LRANGE", "emq:{q}:pending:2", "0", "2"]), cmd(&["LRANGE", "emq:{q}:pending:5", "0", "2"])]);
    let (watch, cmds) = read(c.feed(&[list(&["b", "c", "d"]), list(&[])]).unwrap());
    assert_eq!(watch, vec![key("job:a"), key("job:b"), key("job:c"), key("pending:5")]);
    assert_eq!(
        cmds[..3],
        [
            cmd(&["LRANGE", "emq:{q}:pending", "0", "2"]),
            cmd(&["LRANGE", "emq:{q}:pending:2", "0", "1"]),
            cmd(&["LLEN", "emq:{q}:pending:5"])
        ]
    );
    let confirm = [list(&["a"]), list(&["b", "c"]), Reply::Int(0)];
    let rows = [job("pending"), job("pending"), job("pending"), Reply::Int(3), Reply::Int(0), Reply::Int(0)];
    let w = exec(c.feed(&[&confirm[..], &rows[..]].concat()).unwrap());
    let mut want = vec![
        Write::TakePending { count: 1 },
        Write::TakeAt { lane: None, level: 2, count: 2 },
        Write::ClearLevel { lane: None, level: 5 },
        claimed_row("a", "t1"),
        claimed_row("b", "t2"),
        claimed_row("c", "t3"),
        lease(&["a", "b", "c"]),
    ];
    want.extend(wake_chain());
    assert_eq!(w, want);
}

/// A level a producer pushed to between the read and the watch: the claim's
/// second look at the list it found empty sees it, and the call is a conflict
/// (a new call), not a field cleared over a job.
#[test]
fn a_level_found_empty_that_got_work_before_the_watch_is_a_conflict() {
    let mut c = claim(1);
    c.start();
    read(c.feed(&[time(), list(&[]), list(&[]), marked(&[4])]).unwrap());
    let (watch, _) = read(c.feed(&[list(&[])]).unwrap());
    assert_eq!(watch, vec![key("pending:4")]);
    let e = c.feed(&[list(&[]), Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Conflict, "{e}");
}

/// A lane's levels: its control marks level 3 and its level-0 list holds fewer
/// ids than the slots, so the claim reads level 3's length and head, and the
/// lane's turns take level 0's id, then level 3's, round robin as ever (the
/// ring rotated at each serve, the lane's slots taken by both).
#[test]
fn a_lane_turn_takes_its_lowest_non_empty_level() {
    let mut c = claim(2);
    c.start();
    read(c.feed(&[time(), list(&[]), list(&["L"]), no_levels()]).unwrap());
    let mut f: Vec<Option<&str>> = vec![None, None, None, Some("1")];
    f.extend((1..=9).map(|p| if p == 3 { Some("1") } else { None }));
    let replies = [list(&[]), list(&["L"]), fields(&f), Reply::Int(1), list(&["a"]), Reply::Int(0), Reply::Int(0)];
    let (watch, cmds) = read(c.feed(&replies).unwrap());
    assert!(watch.is_empty(), "the ring guards the lane's level heads");
    assert_eq!(cmds, vec![cmd(&["LLEN", "emq:{q}:plane:3:L"]), cmd(&["LRANGE", "emq:{q}:plane:3:L", "0", "1"])]);
    let (watch, _) = read(c.feed(&[Reply::Int(2), list(&["b", "c"])]).unwrap());
    assert_eq!(watch, vec![key("job:a"), key("job:b")]);
    let w = exec(c.feed(&[job("pending"), job("pending"), Reply::Int(2)]).unwrap());
    let mut want = vec![
        Write::TakeLaneHead { lane: id("L") },
        Write::RotateRing,
        claimed_row("a", "t1"),
        Write::TakeAt { lane: Some(id("L")), level: 3, count: 1 },
        Write::RotateRing,
        claimed_row("b", "t2"),
        Write::TakeSlots { lane: id("L"), by: 2 },
        lease(&["a", "b"]),
    ];
    want.extend(wake_chain());
    assert_eq!(w, want);
}

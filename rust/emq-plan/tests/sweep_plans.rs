//! PROMOTE's and STALLED CHECK's write plans, pure functions of what a sweep
//! read: each row's fate, the lanes' slots and offers, the wake tokens, the
//! guard's marks. (How the sweep reads under its guard: `sweep_conversation`.)

mod support;

use emq_plan::lanes::offer::LaneCtl;
use emq_plan::protocol::write::{Counted, LaneField, RowFields, Write};
use emq_plan::sweep::stalled::empty_lanes_relied_on;
use emq_plan::sweep::{promote, stalled, Lane, Outcome, Read, Row, Types};
use emq_plan::ErrorKind;
use support::*;

fn live(lane: Option<&str>, stalls: i64) -> Row {
    Row::Live { lane: lane.map(id), stalls, ending: Default::default(), priority: 0 }
}

fn read_of(rows: &[(&str, f64, Row)], lanes: Vec<Lane>) -> Read {
    Read {
        now: NOW,
        ids: rows.iter().map(|(i, ..)| id(i)).collect(),
        scores: rows.iter().map(|(_, s, _)| *s).collect(),
        rows: rows.iter().map(|(.., r)| r.clone()).collect(),
        lanes,
        types: Types::ALL,
        ..Read::default()
    }
}

fn lane_read(name: &str, ctl: LaneCtl, len: i64) -> Lane {
    Lane { name: id(name), ctl, len }
}

/// Every due id leaves `schedule`, ghosts too; flat rows go to `pending` and
/// lane rows to their lane, in due order; only live rows are written
/// `pending`; the lane, out of the ring, is offered; a flat token follows the
/// lane's; and `P promotions` counts the call last. A broken plan that wrote a
/// ghost's row (making a row from nothing) or skipped the count (leaving
/// promoters' watches blind) fails here.
#[test]
fn promote_moves_due_rows_and_counts_the_call() {
    let r = read_of(
        &[("a", 1.0, live(None, 0)), ("g", 2.0, Row::Ghost), ("b", 3.0, live(Some("L"), 0)), ("c", 4.0, live(Some("L"), 0))],
        vec![lane_read("L", LaneCtl::default(), 0)],
    );
    let plan = promote::plan(&r).unwrap();
    assert_eq!(
        plan.writes,
        vec![
            Write::Unschedule(members(&["a", "g", "b", "c"])),
            Write::MakeReady { lane: None, ids: members(&["a"]) },
            Write::MakeReady { lane: Some(id("L")), ids: members(&["b", "c"]) },
            row("a", RowFields::Ready),
            row("b", RowFields::Ready),
            row("c", RowFields::Ready),
            lane("L", LaneField::InRing(true)),
            Write::JoinRing(members(&["L"])),
            Write::Wake(members(&["L", ""])),
            Write::TrimWake,
            Write::CountPromotion,
        ]
    );
    assert_eq!(plan.outcome, Outcome::Promoted(4));
    let mut bad = r.clone();
    bad.types.pending = false;
    assert_eq!(promote::plan(&bad).unwrap_err().kind, ErrorKind::Layout, "pending is typed on every call");
}

/// A row whose stalls (counting this one) pass `max_stalled` dies: listed in
/// `dead` at the call's clock, its row `dead` with the error `stalled`; the
/// others go back to `pending` (or their lane) with the stall counted. A dead
/// row loses an earlier attempt's error type and traceback. Every
/// member leaves `active` and its lease; each second the leases ended in is
/// marked once. Lane rows give back their lane's slot (L, with work, is then
/// offered). A broken plan that let
/// a row past `max_stalled` live, or gave back no slot, fails here.
#[test]
fn stalled_recovers_rows_counts_stalls_and_kills_past_max_stalled() {
    let r = read_of(
        &[
            ("x", 1_000_500.0, live(None, 0)),
            ("y", 1_000_700.0, live(Some("L"), 1)),
            ("z", 1_001_100.0, live(None, 1)),
            ("g", 1_001_200.0, Row::Ghost),
        ],
        vec![lane_read("L", LaneCtl { active: 3, ..LaneCtl::default() }, 2)],
    );
    let plan = stalled::plan(&r, Some(1)).unwrap();
    assert_eq!(
        plan.writes,
        vec![
            Write::LeaveActive(members(&["x", "y", "z", "g"])),
            Write::MarkLease { second: 1000 },
            Write::MarkLease { second: 1001 },
            Write::Bury { at: NOW, ids: members(&["y", "z"]) },
            row("x", RowFields::Stalled { stalls: 1, dead: false }),
            Write::DropLease { id: id("x") },
            row("y", RowFields::Stalled { stalls: 2, dead: true }),
            Write::DropLease { id: id("y") },
            Write::DropErrorDetail { id: id("y") },
            row("z", RowFields::Stalled { stalls: 2, dead: true }),
            Write::DropLease { id: id("z") },
            Write::DropErrorDetail { id: id("z") },
            Write::MakeReady { lane: None, ids: members(&["x"]) },
            lane("L", LaneField::Active(2)),
            // L holds work, and has a slot again: offered, its token first.
            lane("L", LaneField::InRing(true)),
            Write::JoinRing(members(&["L"])),
            Write::Wake(members(&["L", ""])),
            Write::TrimWake,
        ]
        .into_iter()
        .chain(counted(&[(Counted::Dead, 2), (Counted::Recovered, 1)]))
        .collect::<Vec<_>>(),
        "the ghost is counted as nothing"
    );
    assert_eq!(plan.outcome, Outcome::Stalled { recovered: vec![id("x")], dead: vec![id("y"), id("z")] });
    // With no limit (`max_stalled: None`, a worker's reap) no one dies.
    let plan = stalled::plan(&r, None).unwrap();
    assert_eq!(plan.outcome, Outcome::Stalled { recovered: vec![id("x"), id("y"), id("z")], dead: vec![] });
    assert!(plan.writes.contains(&Write::MakeReady { lane: Some(id("L")), ids: members(&["y"]) }));
}

/// A lane whose only rows die is left out of the ring because its list is
/// empty: the sweep must watch that list (`empty_lanes_relied_on`); a lane
/// that gets a recovered row, or holds work, needs no such watch.
#[test]
fn stalled_names_the_empty_lanes_it_relies_on() {
    let dying = read_of(&[("y", 1.0, live(Some("L"), 1))], vec![lane_read("L", LaneCtl { active: 1, ..LaneCtl::default() }, 0)]);
    assert_eq!(empty_lanes_relied_on(&dying, Some(1)), vec![id("L")]);
    assert!(empty_lanes_relied_on(&dying, None).is_empty(), "recovered into its lane: offered, not empty");
    let busy = read_of(&[("y", 1.0, live(Some("L"), 1))], vec![lane_read("L", LaneCtl::default(), 4)]);
    assert!(empty_lanes_relied_on(&busy, Some(1)).is_empty());
    let mut bad = dying.clone();
    bad.types.dead = false;
    assert_eq!(stalled::plan(&bad, Some(1)).unwrap_err().kind, ErrorKind::Layout, "a death writes dead: typed");
}

fn at_level(lane: Option<&str>, stalls: i64, priority: u8) -> Row {
    Row::Live { lane: lane.map(id), stalls, ending: Default::default(), priority }
}

/// Priorities (SPEC §15): a promoted row of level `p > 0` joins its level's list
/// and marks the level; a lane that gets only such rows is still offered (its
/// work counts, wherever it lies), and a flat one still wakes a worker. A promote
/// that pushed every row to level 0, or offered only lanes with level-0 rows,
/// fails here.
#[test]
fn promote_keeps_each_rows_level() {
    let r = read_of(
        &[("a", 1.0, at_level(None, 0, 3)), ("b", 2.0, at_level(Some("L"), 0, 9)), ("c", 3.0, live(None, 0))],
        vec![lane_read("L", LaneCtl::default(), 0)],
    );
    let plan = promote::plan(&r).unwrap();
    assert_eq!(
        plan.writes,
        vec![
            Write::Unschedule(members(&["a", "b", "c"])),
            Write::MakeReady { lane: None, ids: members(&["c"]) },
            Write::ReadyAt { lane: None, level: 3, ids: members(&["a"]) },
            Write::MarkLevel { lane: None, level: 3 },
            Write::ReadyAt { lane: Some(id("L")), level: 9, ids: members(&["b"]) },
            Write::MarkLevel { lane: Some(id("L")), level: 9 },
            row("a", RowFields::Ready),
            row("b", RowFields::Ready),
            row("c", RowFields::Ready),
            lane("L", LaneField::InRing(true)),
            Write::JoinRing(members(&["L"])),
            Write::Wake(members(&["L", ""])),
            Write::TrimWake,
            Write::CountPromotion,
        ]
    );
}

/// A recovered row goes back to its own level; a lane whose list is empty but
/// whose control marks a level is offered (it has work), and is not one whose
/// emptiness the plan relies on.
#[test]
fn a_recovery_keeps_the_level_and_a_marked_lane_counts_as_work() {
    let r = read_of(&[("a", 1.0, at_level(None, 0, 2))], vec![]);
    let plan = stalled::plan(&r, None).unwrap();
    assert!(plan.writes.contains(&Write::ReadyAt { lane: None, level: 2, ids: members(&["a"]) }));
    assert!(plan.writes.contains(&Write::MarkLevel { lane: None, level: 2 }));
    assert!(!plan.writes.iter().any(|w| matches!(w, Write::MakeReady { .. })));
    let marked = LaneCtl { levels: 1 << 4, active: 1, ..LaneCtl::default() };
    let r = read_of(&[("b", 1.0, live(Some("L"), 5))], vec![lane_read("L", marked, 0)]);
    let plan = stalled::plan(&r, Some(0)).unwrap();
    assert!(plan.writes.contains(&Write::JoinRing(members(&["L"]))), "{:?}", plan.writes);
    assert!(empty_lanes_relied_on(&r, Some(0)).is_empty());
}

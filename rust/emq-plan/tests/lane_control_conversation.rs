//! Lane control (pause, resume, limit) driven with made-up replies: what each
//! writes to the lane's control, and when it offers the lane. No server.

mod support;

use emq_plan::lanes::lane_control::{LaneControl, LaneOp};
use emq_plan::protocol::conversation::Conversation;
use emq_plan::protocol::write::{LaneField, Write};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

/// Plans `op` on lane L read with control `c` and `len` jobs.
fn planned(op: LaneOp, c: Reply, len: i64) -> emq_plan::error::Result<emq_plan::protocol::conversation::Step<()>> {
    let mut l = LaneControl::new(Keys::new(b"q"), id("L"), op).unwrap();
    let (watch, cmds) = read(l.start());
    assert_eq!(watch, vec![key("lanectl:L")], "the control it decides on");
    assert_eq!(cmds.len(), 5, "the clock, the control, the lane's length, the ring's and wake's types");
    l.feed(&[time(), c, Reply::Int(len), Reply::Int(0), Reply::Int(0)])
}

/// `SADD P lanes L`: every control lists its lane, so the counts find it without `SCAN`.
fn listed() -> Write {
    Write::ListLanes(members(&["L"]))
}

fn offer() -> [Write; 4] {
    [lane("L", LaneField::InRing(true)), Write::JoinRing(members(&["L"])), Write::Wake(members(&["L"])), Write::TrimWake]
}

/// Pause lists the lane and writes `paused = 1`, nothing else, whatever the lane holds: a
/// paused lane in the ring leaves it when a claim finds it so.
#[test]
fn pause_sets_paused_only() {
    let w = exec(planned(LaneOp::Pause, ctl(false, 0, 0, true), 3).unwrap());
    assert_eq!(w, vec![listed(), lane("L", LaneField::Paused(true))]);
}

/// Resume clears `paused` and offers the lane: with work, out of the ring, it
/// joins the ring and wakes a worker; already in the ring, nothing more. A
/// broken resume that offered a lane in the ring would list it twice.
#[test]
fn resume_offers_a_lane_with_work_out_of_the_ring() {
    let mut want = vec![listed(), lane("L", LaneField::Paused(false))];
    want.extend(offer());
    assert_eq!(exec(planned(LaneOp::Resume, ctl(true, 0, 0, false), 2).unwrap()), want);
    assert_eq!(exec(planned(LaneOp::Resume, ctl(true, 0, 0, true), 2).unwrap()), vec![listed(), lane("L", LaneField::Paused(false))]);
}

/// Resuming an empty lane relies on it staying empty: its list is watched and
/// read again; a push meanwhile is a conflict (the producer offered nothing
/// while the lane was paused), so the lane is never left with work out of the ring.
#[test]
fn resume_of_an_empty_lane_confirms_it_empty() {
    let (watch, cmds) = read(planned(LaneOp::Resume, ctl(true, 0, 0, false), 0).unwrap());
    assert_eq!((watch, cmds), (vec![key("lane:L")], vec![cmd(&["LLEN", "emq:{q}:lane:L"])]));
    let mut l = LaneControl::new(Keys::new(b"q"), id("L"), LaneOp::Resume).unwrap();
    l.start();
    l.feed(&[time(), ctl(true, 0, 0, false), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap();
    assert_eq!(exec(l.feed(&[Reply::Int(0)]).unwrap()), vec![listed(), lane("L", LaneField::Paused(false))]);
    let mut l = LaneControl::new(Keys::new(b"q"), id("L"), LaneOp::Resume).unwrap();
    l.start();
    l.feed(&[time(), ctl(true, 0, 0, false), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap();
    assert_eq!(l.feed(&[Reply::Int(1)]).unwrap_err().kind, ErrorKind::Conflict);
}

/// A new limit is written, and the lane offered only if the limit lets it be
/// served now: raised past `active` (2 of 3), yes; at `active` (2 of 2), no.
#[test]
fn a_limit_offers_the_lane_only_when_it_can_be_served() {
    let mut want = vec![listed(), lane("L", LaneField::Limit(3))];
    want.extend(offer());
    assert_eq!(exec(planned(LaneOp::Limit(3), ctl(false, 2, 2, false), 1).unwrap()), want);
    assert_eq!(exec(planned(LaneOp::Limit(2), ctl(false, 1, 2, false), 1).unwrap()), vec![listed(), lane("L", LaneField::Limit(2))]);
}

#[test]
fn a_lane_of_the_wrong_type_or_a_bad_name_is_refused() {
    assert_eq!(planned(LaneOp::Pause, wrongtype(), 0).unwrap_err().kind, ErrorKind::Layout);
    assert_eq!(LaneControl::new(Keys::new(b"q"), vec![], LaneOp::Pause).err().unwrap().kind, ErrorKind::Argument);
}

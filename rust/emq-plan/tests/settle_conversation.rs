//! EXTEND, COMPLETE and FAIL of one held job, driven with made-up replies: the
//! guard each reads under, the writes it decides on, and when it refuses. No
//! server. (The retention's part of COMPLETE and a death's trim of `dead` are
//! in `jobs_conversation`.)

mod support;

use emq_plan::jobs::settle::{Action, Settle, Settled};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{Counted, LaneField, RowFields, Scored, Write};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

/// The lease the held row had: it ended in second `1_700_000_001`.
const OLD_LEASE: &str = "1700000001500";
const OLD_SECOND: i64 = 1_700_000_001;

fn settle(lane: Option<&str>, action: Action) -> Settle {
    Settle::new(Keys::new(b"q"), id("a"), id("t"), lane.map(id), action, 0.5).unwrap()
}

/// The row as a settle reads it: `state token lane attempts max_attempts lease`.
fn held(token: &str, lane: Option<&str>, attempts: &str) -> Reply {
    fields(&[Some("active"), Some(token), lane, Some(attempts), Some("3"), Some(OLD_LEASE)])
}

fn fail(retry_in_ms: Option<u64>) -> Action {
    Action::Fail { error: id("boom"), retry_in_ms, detail: None, retry: true }
}

/// The replies of a flat FAIL's read: the clock, the row, `ZCARD active`, the
/// ring, `wake`, `pending`, the head of `schedule`, `ZCARD dead`.
fn fail_replies(row: Reply, schedule_head: Reply) -> Vec<Reply> {
    vec![time(), row, Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0), schedule_head, Reply::Int(0)]
}

/// EXTEND moves the lease: `active`'s score (`XX`: only while it is there) and
/// the row's copy, with the mark of the second the old lease ended in (a
/// stalled check that selected it watches that mark). It watches the row.
#[test]
fn extend_moves_the_lease_and_marks_the_old_one() {
    let mut s = settle(None, Action::Extend { lease_ms: 5000 });
    let (watch, cmds) = read(s.start());
    assert_eq!(watch, vec![key("job:a")]);
    assert_eq!(cmds.len(), 3, "the clock, the row and active's type: {cmds:?}");
    let w = exec(s.feed(&[time(), held("t", None, "1"), Reply::Int(1)]).unwrap());
    assert_eq!(
        w,
        vec![
            Write::MarkLease { second: OLD_SECOND },
            Write::ExtendLeases { deadline: NOW + 5000, ids: members(&["a"]) },
            row("a", RowFields::Lease(NOW + 5000)),
        ]
    );
    assert_eq!(s.finish(&[]).unwrap(), Settled::Extended);
}

/// A row no longer `active` with the worker's token (a sweep recovered the job,
/// another worker holds it) refuses every action and writes nothing; a row of
/// another lane than the worker named is the worker's mistake.
#[test]
fn a_lost_lease_is_refused_and_writes_nothing() {
    for action in [Action::Extend { lease_ms: 5 }, Action::COMPLETE, fail(None)] {
        let mut s = settle(None, action.clone());
        let (_, cmds) = read(s.start());
        let mut r = vec![time(), held("other", None, "1")];
        r.extend((2..cmds.len()).map(|_| Reply::Int(0)));
        assert_eq!(s.feed(&r).unwrap(), Step::Done(Settled::Refused), "{action:?}");
        let mut s = settle(None, action.clone());
        s.start();
        r[1] = held("t", Some("M"), "1");
        assert_eq!(s.feed(&r).unwrap_err().kind, ErrorKind::Argument, "{action:?}");
    }
}

/// FAIL with attempts left and a delay: the job leaves `active` and its lease,
/// the row says `scheduled` with the error and its due time, and it waits in
/// `schedule`; due before the head of `schedule` (empty here), it wakes a
/// parked worker to see the earlier time. Due after the head, it wakes no one.
#[test]
fn a_fail_with_attempts_left_is_scheduled_and_wakes_only_as_the_new_head() {
    let retried = |schedule_head: Reply| {
        let mut s = settle(None, fail(Some(5000)));
        s.start();
        let w = exec(s.feed(&fail_replies(held("t", None, "1"), schedule_head)).unwrap());
        assert_eq!(s.finish(&[]).unwrap(), Settled::Retrying);
        w
    };
    let mut want = vec![
        Write::MarkLease { second: OLD_SECOND },
        Write::LeaveActive(members(&["a"])),
        Write::DropLease { id: id("a") },
        Write::DropErrorDetail { id: id("a") },
        row("a", RowFields::Retry { ready: false, error: id("boom"), due: NOW + 5000, detail: None }),
        Write::Schedule(Scored::from_iter([(NOW + 5000, "a")])),
    ];
    let counts = counted(&[(Counted::Retried, 1)]);
    assert_eq!(retried(Reply::Array(vec![bulk("x"), bulk(&(NOW + 1).to_string())])), [want.clone(), counts.clone()].concat());
    want.extend([Write::Wake(members(&[""])), Write::TrimWake]);
    assert_eq!(retried(Reply::Array(vec![])), [want, counts].concat());
}

/// FAIL with no delay: ready at once, back at the tail of `pending` (or its
/// lane), with a flat wake token. The backoff's delay (`retry_in_ms: None`)
/// doubles with the attempts: after the second, 2 s, half of it drawn.
#[test]
fn a_fail_with_no_delay_is_ready_at_once_and_the_backoff_doubles() {
    let mut s = settle(None, fail(Some(0)));
    s.start();
    let w = exec(s.feed(&fail_replies(held("t", None, "1"), Reply::Array(vec![]))).unwrap());
    assert_eq!(
        w[2..],
        [
            Write::DropLease { id: id("a") },
            Write::DropErrorDetail { id: id("a") },
            row("a", RowFields::Retry { ready: true, error: id("boom"), due: NOW, detail: None }),
            Write::MakeReady { lane: None, ids: members(&["a"]) },
            Write::Wake(members(&[""])),
            Write::TrimWake,
        ]
        .into_iter()
        .chain(counted(&[(Counted::Retried, 1)]))
        .collect::<Vec<_>>()
    );
    let mut s = settle(None, fail(None));
    s.start();
    let w = exec(s.feed(&fail_replies(held("t", None, "2"), Reply::Array(vec![]))).unwrap());
    // 1 s · 2^(2-1) = 2 s, half fixed and half drawn: 1 s + 1 s · 0.5.
    assert_eq!(w[4], row("a", RowFields::Retry { ready: false, error: id("boom"), due: NOW + 1500, detail: None }));
}

/// A lane job's COMPLETE gives back its lane's slot (`active` one less) and
/// offers the lane: with work in it, servable and out of the ring, the lane
/// joins the ring with its wake token. It watches the row and the control.
#[test]
fn a_lane_jobs_complete_gives_back_its_slot_and_offers_the_lane() {
    let mut s = settle(Some("L"), Action::COMPLETE);
    let (watch, _) = read(s.start());
    assert_eq!(watch, vec![key("job:a"), key("lanectl:L")]);
    // The clock, the row, the lane's control (at its limit) and length, `active`,
    // the ring, `wake`, the retention (kept forever), `done`.
    let r = [
        time(),
        held("t", Some("L"), "1"),
        ctl(false, 1, 1, false),
        Reply::Int(2),
        Reply::Int(1),
        Reply::Int(0),
        Reply::Int(0),
        fields(&[Some("-1")]),
        Reply::Int(0),
    ];
    let w = exec(s.feed(&r).unwrap());
    assert_eq!(
        w,
        vec![
            Write::MarkLease { second: OLD_SECOND },
            Write::LeaveActive(members(&["a"])),
            row("a", RowFields::Done { finished: NOW, result: None }),
            Write::DropLease { id: id("a") },
            Write::ListDone { at: NOW, ids: members(&["a"]) },
            lane("L", LaneField::Active(0)),
            lane("L", LaneField::InRing(true)),
            Write::JoinRing(members(&["L"])),
            Write::Wake(members(&["L"])),
            Write::TrimWake,
        ]
        .into_iter()
        .chain(counted(&[(Counted::Completed, 1)]))
        .collect::<Vec<_>>()
    );
}

/// A lane left out of the ring only because its list is empty: the complete
/// watches the list and reads it again; a producer that pushed meanwhile
/// (offering nothing, as the lane was then at its limit) makes it a conflict,
/// so the lane is never stranded, non-empty and out of the ring.
#[test]
fn a_lane_left_empty_is_confirmed_empty_under_a_watch() {
    let planned = |again: i64| {
        let mut s = settle(Some("L"), Action::COMPLETE);
        s.start();
        let r = [
            time(),
            held("t", Some("L"), "1"),
            ctl(false, 1, 1, false),
            Reply::Int(0),
            Reply::Int(1),
            Reply::Int(0),
            Reply::Int(0),
            fields(&[Some("0")]),
            Reply::Int(0),
        ];
        let (watch, cmds) = read(s.feed(&r).unwrap());
        assert_eq!((watch, cmds), (vec![key("lane:L")], vec![cmd(&["LLEN", "emq:{q}:lane:L"])]));
        s.feed(&[Reply::Int(again)])
    };
    let w = exec(planned(0).unwrap());
    assert_eq!(w[w.len() - 3], lane("L", LaneField::Active(0)), "no offer, then the counters: {w:?}");
    assert_eq!(planned(1).unwrap_err().kind, ErrorKind::Conflict);
}

/// FAIL with `retry: false` (an error no retry mends) makes the job dead on
/// its first attempt of three: buried in `dead`, the row dead with its error,
/// after the trim of `dead`. A version that ignored the flag would schedule a
/// retry (`RowFields::Retry`, a `schedule` entry) as the other fails here do.
#[test]
fn a_fail_that_allows_no_retry_is_dead_with_attempts_left() {
    let action = Action::Fail { error: id("boom"), retry_in_ms: Some(5000), detail: None, retry: false };
    let mut s = settle(None, action);
    s.start();
    let Step::Read { watch, .. } = s.feed(&fail_replies(held("t", None, "1"), Reply::Array(vec![]))).unwrap() else {
        panic!("a dying fail reads the dead index's trim first")
    };
    assert_eq!(watch, vec![key("dead")]);
    let w = exec(s.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap());
    assert!(w.contains(&Write::Bury { at: NOW, ids: members(&["a"]) }), "{w:?}");
    assert!(w.contains(&row("a", RowFields::Dead { error: id("boom"), finished: NOW, detail: None })), "{w:?}");
    assert!(!w.iter().any(|x| matches!(x, Write::Schedule(_) | Write::MakeReady { .. })), "{w:?}");
    assert_eq!(s.finish(&[]).unwrap(), Settled::Dead);
}

/// A fail that gives no error type or traceback (or one of them) drops the
/// earlier attempt's (`HDEL error_type traceback`) before it writes its own, so
/// the row never pairs this error with another attempt's traceback; a fail
/// that gives both overwrites them and drops nothing. A version that left them
/// would show a retried job's first traceback beside its last error.
#[test]
fn a_fail_without_its_own_detail_drops_the_earlier_ones() {
    use emq_plan::protocol::write::ErrorDetail;
    let writes = |detail: Option<ErrorDetail>| {
        let mut s = settle(None, Action::Fail { error: id("boom"), retry_in_ms: Some(0), detail: detail.map(Box::new), retry: true });
        s.start();
        exec(s.feed(&fail_replies(held("t", None, "1"), Reply::Array(vec![]))).unwrap())
    };
    let detail = |t: Option<&str>, tb: Option<&str>| ErrorDetail { error_type: t.map(id), traceback: tb.map(id) };
    for given in [None, Some(detail(Some("m.E"), None)), Some(detail(None, Some("tb")))] {
        let w = writes(given.clone());
        let dropped = w.iter().position(|x| *x == Write::DropErrorDetail { id: id("a") });
        let set = w.iter().position(|x| matches!(x, Write::SetRow { fields: RowFields::Retry { .. }, .. }));
        assert!(dropped.is_some() && dropped < set, "{given:?}: {w:?}");
    }
    let w = writes(Some(detail(Some("m.E"), Some("tb"))));
    assert!(!w.contains(&Write::DropErrorDetail { id: id("a") }), "{w:?}");
}

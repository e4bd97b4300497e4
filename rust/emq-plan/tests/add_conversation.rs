//! ADD's decisions driven with made-up replies: where each job goes (ready in
//! `pending` or its lane, or due later in `schedule`), the row it gets, the
//! lanes it offers and the workers it wakes. No server.

mod support;

use emq_plan::jobs::add::{digest, generated_id, Add, NewJob, When};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{LaneField, NewRow, RowFields, Scored, Write};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

fn new_job(lane: Option<&str>, when: When) -> NewJob {
    NewJob { priority: 0, id: None, data: id("d"), when, lane: lane.map(id), max_attempts: 3, keep: None, unique: None }
}

/// The row ADD writes for `job` under id `i`, due at `due`.
fn new_row(i: &[u8], job: &NewJob, due: i64) -> Write {
    let digest: [u8; 32] = digest(job).into_bytes().try_into().unwrap();
    let fields = RowFields::New(Box::new(NewRow {
        priority: 0,
        ready: due <= NOW,
        data: job.data.clone(),
        due,
        max_attempts: job.max_attempts,
        created: NOW,
        digest,
        lane: job.lane.clone(),
        keep: job.keep,
        unique: job.unique.as_ref().map(|u| u.key.clone()),
        wait: None,
    }));
    Write::SetRow { id: i.to_vec(), fields }
}

/// Replies to ADD's read for no given id: the clock, each lane's control and
/// length, `LLEN pending`, the head of `schedule`, `LLEN ring`, `LLEN wake`.
fn replies(lanes: &[(Reply, i64)], schedule_head: Reply) -> Vec<Reply> {
    let mut r = vec![time()];
    for (ctl, len) in lanes {
        r.extend([ctl.clone(), Reply::Int(*len)]);
    }
    r.extend([Reply::Int(0), schedule_head, Reply::Int(0), Reply::Int(0)]);
    r
}

/// A flat job due now, one due in 5 s and a lane job due now, with generated
/// ids: each row whole with its digest; the later one in `schedule` at its due
/// time; the flat one pushed to `pending`, the lane one to its lane; the lane,
/// servable and out of the ring, offered (`ring = 1`, pushed to the ring, its
/// token), and a flat token (work in `pending`, and a new head of `schedule`);
/// the lane listed in `P lanes`. A broken add that pushed the later job to `pending`, offered a lane already
/// in the ring, or woke no one would fail here.
#[test]
fn ready_jobs_go_to_pending_or_their_lane_and_later_ones_to_schedule() {
    let jobs = vec![new_job(None, When::Delay(0)), new_job(None, When::Delay(5000)), new_job(Some("L"), When::Delay(0))];
    let mut a = Add::new(Keys::new(b"q"), jobs.clone(), (1, 0)).unwrap();
    let (watch, cmds) = read(a.start());
    assert_eq!(watch, vec![key("lanectl:L")], "the control of the lane it may offer; no row (no id given)");
    assert_eq!(cmds[1..3], [lanectl_read("L"), cmd(&["LLEN", "emq:{q}:lane:L"])]);
    let w = exec(a.feed(&replies(&[(ctl(false, 0, 0, false), 0)], Reply::Array(vec![]))).unwrap());
    let ids: Vec<Vec<u8>> = (0..3).map(|i| generated_id(NOW, 1, i)).collect();
    let want = vec![
        new_row(&ids[0], &jobs[0], NOW),
        new_row(&ids[1], &jobs[1], NOW + 5000),
        new_row(&ids[2], &jobs[2], NOW),
        Write::Schedule(Scored::from_iter([(NOW + 5000, &ids[1])])),
        Write::MakeReady { lane: None, ids: [&ids[0]].into_iter().collect() },
        Write::MakeReady { lane: Some(id("L")), ids: [&ids[2]].into_iter().collect() },
        lane("L", LaneField::InRing(true)),
        Write::JoinRing(members(&["L"])),
        Write::Wake(members(&["L", ""])),
        Write::TrimWake,
        Write::ListLanes(members(&["L"])),
    ];
    assert_eq!(w, want);
    assert_eq!(a.finish(&vec![Reply::Int(1); w.len()]).unwrap(), ids);
}

/// A job ready in a lane that cannot be served (paused), or that is in the
/// ring already, joins the lane and offers nothing: no ring push, no token (a
/// worker woken for it could not take it). The plan still trims `wake`.
#[test]
fn a_lane_that_cannot_be_served_or_is_in_the_ring_is_not_offered() {
    for c in [ctl(true, 0, 0, false), ctl(false, 0, 0, true), ctl(false, 2, 2, false)] {
        let job = new_job(Some("L"), When::Delay(0));
        let mut a = Add::new(Keys::new(b"q"), vec![job.clone()], (1, 0)).unwrap();
        a.start();
        let w = exec(a.feed(&replies(&[(c.clone(), 4)], Reply::Array(vec![]))).unwrap());
        let i = generated_id(NOW, 1, 0);
        let want = vec![
            new_row(&i, &job, NOW),
            Write::MakeReady { lane: Some(id("L")), ids: [&i].into_iter().collect() },
            Write::TrimWake,
            Write::ListLanes(members(&["L"])),
        ];
        assert_eq!(w, want, "{c:?}");
    }
}

/// A job due after the head of `schedule` wakes no one (the parked workers
/// already wait for the earlier head); one due before it does, with the flat
/// token. A due time given outright (`At`) is the row's and the score's.
#[test]
fn a_later_job_wakes_a_worker_only_as_the_new_head_of_schedule() {
    let head = |score: i64| Reply::Array(vec![bulk("x"), bulk(&score.to_string())]);
    let job = new_job(None, When::At(NOW + 5000));
    let i = generated_id(NOW, 1, 0);
    let planned = |schedule_head: Reply| {
        let mut a = Add::new(Keys::new(b"q"), vec![job.clone()], (1, 0)).unwrap();
        a.start();
        exec(a.feed(&replies(&[], schedule_head)).unwrap())
    };
    let due_later = vec![new_row(&i, &job, NOW + 5000), Write::Schedule(Scored::from_iter([(NOW + 5000, &i)]))];
    assert_eq!(planned(head(NOW + 1000)), due_later);
    let mut woken = due_later.clone();
    woken.extend([Write::Wake(members(&[""])), Write::TrimWake]);
    assert_eq!(planned(head(NOW + 9000)), woken);
}

/// `pending`, `schedule`, the ring and `wake` are checked for their types before
/// anything is written, but only where the plan writes them.
#[test]
fn only_what_the_plan_writes_must_have_its_type() {
    let flat = new_job(None, When::Delay(0));
    let mut r = replies(&[], Reply::Array(vec![]));
    r[1] = wrongtype(); // pending
    let mut a = Add::new(Keys::new(b"q"), vec![flat.clone()], (1, 0)).unwrap();
    a.start();
    assert_eq!(a.feed(&r).unwrap_err().kind, ErrorKind::Layout);
    let mut r = replies(&[], Reply::Array(vec![]));
    r[3] = wrongtype(); // the ring: a flat job offers no lane
    let mut a = Add::new(Keys::new(b"q"), vec![flat], (1, 0)).unwrap();
    a.start();
    assert!(matches!(a.feed(&r).unwrap(), Step::Exec(_)));
}

/// An add that names its caller's inbox (`waited_by`) writes `wait <inbox>` in
/// each new row, in the same transaction, so no registration of its own is
/// needed; a landed job (its row there with this request's digest) gets no
/// write at all, so the caller must register it. A bad inbox is refused
/// before anything is read. A broken add would leave `wait` out (the waiter
/// never hears), write it to a row it did not create, or take any inbox.
#[test]
fn an_add_waited_by_an_inbox_lists_it_in_each_new_row() {
    let jobs = vec![new_job(None, When::Delay(0)), new_job(None, When::Delay(5000))];
    let mut a = Add::new(Keys::new(b"q"), jobs.clone(), (1, 0)).unwrap().waited_by(id("in-1")).unwrap();
    let _ = read(a.start());
    let w = exec(a.feed(&replies(&[], Reply::Array(vec![]))).unwrap());
    let rows: Vec<&NewRow> = w
        .iter()
        .filter_map(|x| match x {
            Write::SetRow { fields: RowFields::New(r), .. } => Some(&**r),
            _ => None,
        })
        .collect();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.wait.as_deref() == Some(&b"in-1"[..])), "{rows:?}");

    let given = NewJob { id: Some(id("J")), ..new_job(None, When::Delay(0)) };
    let mut a = Add::new(Keys::new(b"q"), vec![given.clone()], (1, 0)).unwrap().waited_by(id("in-1")).unwrap();
    let _ = read(a.start());
    let mut r = vec![time(), Reply::Int(1), Reply::Bulk(digest(&given).into_bytes())];
    r.extend([Reply::Int(0), Reply::Array(vec![]), Reply::Int(0), Reply::Int(0)]);
    match a.feed(&r).unwrap() {
        Step::Done(ids) => assert_eq!(ids, vec![id("J")]),
        other => panic!("a landed job is answered without a write: {other:?}"),
    }
    assert_eq!(a.created(), [false]);

    for bad in ["", "a b", &"x".repeat(65)] {
        let e = Add::new(Keys::new(b"q"), jobs.clone(), (1, 0)).unwrap().waited_by(id(bad)).err().unwrap();
        assert_eq!(e.kind, ErrorKind::Argument, "{bad:?}");
        assert!(e.to_string().contains("inbox"), "{e}");
    }
}

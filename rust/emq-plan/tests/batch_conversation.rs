//! A worker's jobs in one call, driven with made-up replies: EXTEND, COMPLETE,
//! and COMPLETE and FAIL of many held jobs, and the group commit that claims in
//! the same transaction. Each job is answered as its single call would answer
//! it; the writes are those of the single calls one after another. No server.

mod support;

use emq_plan::batch::complete_and_claim::CompleteAndClaim;
use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::{ExtendMany, Held};
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::claim::Claim;
use emq_plan::jobs::settle::Settled;
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{Counted, LaneField, RowFields, Write};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

fn job(i: &str, token: &str, lane: Option<&str>) -> Held {
    Held { id: id(i), token: id(token), lane: lane.map(id) }
}

/// A row as the batch calls read it (`state token lane lease`), held with
/// token `t`, its lease ending in second `second`.
fn held_row(lane: Option<&str>, second: i64) -> Reply {
    let lease = (second * 1000 + 250).to_string();
    fields(&[Some("active"), Some("t"), lane, Some(&lease)])
}

/// Every job held with its token is extended, in one `ZADD … XX` and a row
/// write each; one refused (an old token) is answered `false` and left alone;
/// the old leases' seconds are marked once each. A job named twice (run again
/// after a lost lease) is extended once. A broken batch that extended the
/// refused job, or marked a second twice, fails here.
#[test]
fn extend_many_extends_the_held_jobs_and_refuses_the_rest() {
    let jobs = vec![job("a", "t", None), job("b", "old", None), job("c", "t", None), job("a", "t", None)];
    let mut c = ExtendMany::new(Keys::new(b"q"), jobs, 5000).unwrap();
    let (watch, cmds) = read(c.start());
    assert_eq!(watch, vec![key("job:a"), key("job:b"), key("job:c"), key("job:a")]);
    assert_eq!(cmds[1], cmd(&["HMGET", "emq:{q}:job:a", "state", "token", "lane", "lease"]));
    let r = [time(), held_row(None, 7), held_row(None, 7), held_row(None, 7), held_row(None, 7), Reply::Int(3)];
    let w = exec(c.feed(&r).unwrap());
    assert_eq!(
        w,
        vec![
            Write::MarkLease { second: 7 },
            Write::ExtendLeases { deadline: NOW + 5000, ids: members(&["a", "c"]) },
            row("a", RowFields::Lease(NOW + 5000)),
            row("c", RowFields::Lease(NOW + 5000)),
        ]
    );
    assert_eq!(c.finish(&[]).unwrap(), vec![true, false, true, true]);
    // Every job refused: nothing to write.
    let mut c = ExtendMany::new(Keys::new(b"q"), vec![job("b", "old", None)], 5000).unwrap();
    c.start();
    assert_eq!(c.feed(&[time(), held_row(None, 7), Reply::Int(0)]).unwrap(), Step::Done(vec![false]));
}

/// The replies of COMPLETE's batch read after the rows and lanes: the ring,
/// `wake`, `active`, the retention (`done_ms`), `done`.
fn done_tail(done_ms: &str) -> [Reply; 5] {
    [Reply::Int(0), Reply::Int(0), Reply::Int(2), fields(&[Some(done_ms)]), Reply::Int(0)]
}

/// Two jobs of lane L and one refused: both leave `active` in one `ZREM`, each
/// row done (kept 50 ms here: expiring then), listed in `done` in one `ZADD`;
/// the lane gives back both slots and, with work left, is offered once (as the
/// first complete that frees a slot would). A broken batch that offered the
/// lane twice, or counted the refused job's slot, fails here.
#[test]
fn complete_many_completes_the_held_jobs_and_offers_their_lane_once() {
    let jobs = vec![job("a", "t", Some("L")), job("b", "t", Some("L")), job("c", "old", None)];
    let mut c = CompleteMany::new(Keys::new(b"q"), jobs).unwrap();
    let (watch, _) = read(c.start());
    assert_eq!(watch, vec![key("job:a"), key("job:b"), key("job:c"), key("lanectl:L")]);
    let mut r = vec![time(), held_row(Some("L"), 7), held_row(Some("L"), 7), held_row(None, 7)];
    r.extend([ctl(false, 2, 2, false), Reply::Int(3)]);
    r.extend(done_tail("50"));
    let w = exec(c.feed(&r).unwrap());
    let done = |i: &str| {
        [
            row(i, RowFields::Done { finished: NOW, result: None }),
            Write::DropLease { id: id(i) },
            Write::ExpireRow { id: id(i), at: NOW + 50 },
        ]
    };
    let mut want = vec![Write::MarkLease { second: 7 }, Write::LeaveActive(members(&["a", "b"]))];
    want.extend(done("a"));
    want.extend(done("b"));
    want.extend([
        Write::ListDone { at: NOW, ids: members(&["a", "b"]) },
        Write::TrimDone { before: NOW - 50 },
        lane("L", LaneField::Active(0)),
        lane("L", LaneField::InRing(true)),
        Write::JoinRing(members(&["L"])),
        Write::Wake(members(&["L"])),
        Write::TrimWake,
    ]);
    want.extend(counted(&[(Counted::Completed, 2)]));
    assert_eq!(w, want, "one increment for the two completes, none for the refused one");
    assert_eq!(c.finish(&[]).unwrap(), vec![true, true, false]);
}

/// A lane left out of the ring only because its list is empty is confirmed
/// empty under a watch on that list before the batch writes (a producer's push
/// meanwhile is a conflict).
#[test]
fn complete_many_confirms_a_lane_it_leaves_empty() {
    let mut c = CompleteMany::new(Keys::new(b"q"), vec![job("a", "t", Some("L"))]).unwrap();
    c.start();
    let mut r = vec![time(), held_row(Some("L"), 7), ctl(false, 1, 1, false), Reply::Int(0)];
    r.extend(done_tail("0"));
    let (watch, _) = read(c.feed(&r).unwrap());
    assert_eq!(watch, vec![key("lane:L")]);
    assert_eq!(c.feed(&[Reply::Int(2)]).unwrap_err().kind, ErrorKind::Conflict);
}

/// A complete, a fail of the last attempt and a fail retried at once, flat:
/// one `ZREM` of the three, the fails' writes in order, then the complete's;
/// the retry wakes a worker; the death waits for the trim of `dead` (its
/// policy and head read under a watch on `dead`) and keeps the outcome of each.
#[test]
fn settle_many_plans_each_job_as_its_single_call() {
    let fail = |retry_in_ms| Fate::Fail { error: id("e"), retry_in_ms, jitter: 0.0, detail: None, retry: true };
    let jobs = vec![(job("a", "t", None), Fate::COMPLETE), (job("b", "t", None), fail(None)), (job("c", "t", None), fail(Some(0)))];
    let mut c = SettleMany::new(Keys::new(b"q"), jobs).unwrap();
    c.start();
    // Rows `state token lane attempts max_attempts lease`: b on its last attempt.
    let row_of = |attempts: &str| fields(&[Some("active"), Some("t"), None, Some(attempts), Some("2"), Some("7250")]);
    let mut r = vec![time(), row_of("1"), row_of("2"), row_of("1")];
    r.extend(done_tail("0"));
    r.extend([Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]);
    let (watch, _) = read(c.feed(&r).unwrap());
    assert_eq!(watch, vec![key("dead")], "a death trims dead: its head, under a watch");
    let w = exec(c.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap());
    assert_eq!(
        w,
        vec![
            Write::MarkLease { second: 7 },
            Write::LeaveActive(members(&["a", "b", "c"])),
            Write::DropLease { id: id("b") },
            Write::DropErrorDetail { id: id("b") },
            Write::Bury { at: NOW, ids: members(&["b"]) },
            row("b", RowFields::Dead { error: id("e"), finished: NOW, detail: None }),
            Write::DropLease { id: id("c") },
            Write::DropErrorDetail { id: id("c") },
            row("c", RowFields::Retry { ready: true, error: id("e"), due: NOW, detail: None }),
            Write::MakeReady { lane: None, ids: members(&["c"]) },
            Write::DeleteRows(members(&["a"])),
            Write::Wake(members(&[""])),
            Write::TrimWake,
        ]
        .into_iter()
        .chain(counted(&[(Counted::Completed, 1), (Counted::Retried, 1), (Counted::Dead, 1)]))
        .collect::<Vec<_>>()
    );
    assert_eq!(c.finish(&[]).unwrap(), vec![Settled::Completed, Settled::Dead, Settled::Retrying]);
}

/// The group commit that claims: the flat claim and the completes read
/// together, the clock and the ring's length once for both (the pair reads one
/// instant), and their writes in one transaction, the claim's first. A broken
/// pair that sent `TIME` twice would plan under two clocks; one that wrote
/// the completes first would not be the claim then the completes.
#[test]
fn complete_and_claim_reads_once_for_both_and_writes_the_claim_first() {
    let claim = Claim::new(Keys::new(b"q"), 1, 1000, vec![id("t1")]).unwrap().flat_only();
    let complete = CompleteMany::new(Keys::new(b"q"), vec![job("a", "t", None)]).unwrap();
    let mut both: CompleteAndClaim = CompleteAndClaim::new(Some(claim), complete);
    let (watch, cmds) = read(both.start());
    assert_eq!(watch, vec![key("job:a")], "the completes' row; the claim watches once it knows its ids");
    assert_eq!(
        cmds,
        vec![
            cmd(&["TIME"]),
            cmd(&["LRANGE", "emq:{q}:pending", "0", "1"]),
            cmd(&["LLEN", "emq:{q}:ring"]),
            cmd(&["HMGET", "emq:{q}:flatctl", "lvl:1", "lvl:2", "lvl:3", "lvl:4", "lvl:5", "lvl:6", "lvl:7", "lvl:8", "lvl:9"]),
            cmd(&["HMGET", "emq:{q}:job:a", "state", "token", "lane", "lease", "wait", "cancel", "keep"]),
            cmd(&["LLEN", "emq:{q}:wake"]),
            cmd(&["ZCARD", "emq:{q}:active"]),
            cmd(&["HMGET", "emq:{q}:retention", "done_ms"]),
            cmd(&["ZCARD", "emq:{q}:done"]),
        ]
    );
    let r = [
        time(),
        list(&["x"]),
        Reply::Int(0),
        Reply::Array(vec![Reply::Nil; 9]),
        held_row(None, 7),
        Reply::Int(0),
        Reply::Int(1),
        fields(&[Some("0")]),
        Reply::Int(0),
    ];
    let (watch, _) = read(both.feed(&r).unwrap());
    assert_eq!(watch, vec![key("job:x")]);
    let claimed = fields(&[Some("pending"), Some("0"), Some("3"), Some("d")]);
    let w = exec(both.feed(&[list(&["x"]), claimed, Reply::Int(1), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert_eq!(
        w,
        vec![
            Write::TakePending { count: 1 },
            row("x", RowFields::Claimed { attempts: 1, lease: NOW + 1000, token: id("t1"), claimed: NOW }),
            Write::Lease { deadline: NOW + 1000, ids: members(&["x"]) },
            Write::MarkLease { second: 7 },
            Write::LeaveActive(members(&["a"])),
            Write::DeleteRows(members(&["a"])),
        ]
        .into_iter()
        .chain(counted(&[(Counted::Completed, 1)]))
        .collect::<Vec<_>>()
    );
    let (claimed, done) = both.finish(&vec![Reply::Int(1); w.len()]).unwrap();
    assert_eq!((claimed.map(|c| c.len()), done), (Some(1), vec![true]));
}

//! How a job's run ends (SPEC §13), driven with made-up replies: the results
//! and errors a settle writes, the waiters it tells, a cancel it honours, a
//! job's own retention, in the single calls, the batches, the stalled check,
//! and unique adds. No server.

mod support;

use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::Held;
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::add::{Add, NewJob, Unique, When};
use emq_plan::jobs::ending::RESULT_MAX;
use emq_plan::jobs::settle::{Action, Settle, Settled};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{Counted, ErrorDetail, RowFields, Write};
use emq_plan::sweep::{Kind, Outcome, Sweep};
use emq_plan::{ErrorKind, Keys, Reply};
use support::*;

/// The lease the held row had: it ended in second `1_700_000_001`.
const OLD_LEASE: &str = "1700000001500";
const OLD_SECOND: i64 = 1_700_000_001;

fn settle(action: Action) -> Settle {
    Settle::new(Keys::new(b"q"), id("a"), id("t"), None, action, 0.5).unwrap()
}

/// The row as a complete or a fail reads it: `state token lane attempts
/// max_attempts lease wait cancel keep`, held with token `t`.
fn held(attempts: &str, wait: Option<&str>, cancel: Option<&str>, keep: Option<&str>) -> Reply {
    fields(&[Some("active"), Some("t"), None, Some(attempts), Some("3"), Some(OLD_LEASE), wait, cancel, keep])
}

/// A flat COMPLETE's first read: the clock, the row, `active`, the retention
/// (kept 50 ms) and `done`.
fn complete_replies(row: Reply) -> Vec<Reply> {
    vec![time(), row, Reply::Int(1), fields(&[Some("50")]), Reply::Int(0)]
}

/// A flat FAIL's first read: the clock, the row, `active`, the ring, `wake`,
/// `pending`, the head of `schedule` (empty), `dead`.
fn fail_replies(row: Reply) -> Vec<Reply> {
    vec![time(), row, Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]
}

/// What a complete of `a`, kept 50 ms, writes with no waiters: the same writes
/// as before there were results and waiters, and the result in the done row.
fn completed(result: Option<&str>) -> Vec<Write> {
    vec![
        Write::MarkLease { second: OLD_SECOND },
        Write::LeaveActive(members(&["a"])),
        row("a", RowFields::Done { finished: NOW, result: result.map(id) }),
        Write::DropLease { id: id("a") },
        Write::ExpireRow { id: id("a"), at: NOW + 50 },
        Write::ListDone { at: NOW, ids: members(&["a"]) },
        Write::TrimDone { before: NOW - 50 },
    ]
}

fn notify(inbox: &str, ids: &[&str]) -> [Write; 2] {
    [Write::Notify { inbox: id(inbox), ids: members(ids) }, Write::KeepInbox { inbox: id(inbox) }]
}

/// A complete nobody waits for reads three more fields of the row it reads
/// anyway, and writes exactly what it wrote before (no step, no write more);
/// its result goes in the done row's `result`. A broken complete that read
/// the inboxes, or pushed anywhere, for a job nobody waits for would cost every
/// job a command.
#[test]
fn a_complete_nobody_waits_for_writes_what_it_wrote_before_and_its_result() {
    let mut s = settle(Action::COMPLETE);
    let (_, cmds) = read(s.start());
    assert_eq!(
        cmds[1],
        cmd(&[
            "HMGET",
            "emq:{q}:job:a",
            "state",
            "token",
            "lane",
            "attempts",
            "max_attempts",
            "lease",
            "wait",
            "cancel",
            "keep",
            "priority"
        ])
    );
    let with_counts = |mut w: Vec<Write>| {
        w.extend(counted(&[(Counted::Completed, 1)]));
        w
    };
    assert_eq!(exec(s.feed(&complete_replies(held("1", None, None, None))).unwrap()), with_counts(completed(None)));
    let mut s = settle(Action::Complete { result: Some(id("{\"x\": 1}")) });
    s.start();
    assert_eq!(exec(s.feed(&complete_replies(held("1", None, None, None))).unwrap()), with_counts(completed(Some("{\"x\": 1}"))));
    assert_eq!(s.finish(&[]).unwrap(), Settled::Completed);
}

/// A complete with waiters first reads each inbox's type (a push to a key of
/// another type would fail inside EXEC, after writes that stand), then writes
/// what it writes for a job nobody waits for and, for each inbox, one push of
/// its id and the inbox's expiry: nothing else.
#[test]
fn a_complete_with_waiters_pushes_to_each_inbox_and_nothing_else() {
    let mut s = settle(Action::COMPLETE);
    s.start();
    let (watch, cmds) = read(s.feed(&complete_replies(held("1", Some("w1 w2"), None, None))).unwrap());
    assert!(watch.is_empty(), "the row is watched already");
    assert_eq!(cmds, vec![cmd(&["LLEN", "emq:{q}:inbox:w1"]), cmd(&["LLEN", "emq:{q}:inbox:w2"])]);
    let w = exec(s.feed(&[Reply::Int(0), Reply::Int(4)]).unwrap());
    let mut want = completed(None);
    want.extend(notify("w1", &["a"]));
    want.extend(notify("w2", &["a"]));
    want.extend(counted(&[(Counted::Completed, 1)]));
    assert_eq!(w, want);
    // An inbox of another type: refused, nothing written.
    let mut s = settle(Action::COMPLETE);
    s.start();
    s.feed(&complete_replies(held("1", Some("w1"), None, None))).unwrap();
    let e = s.feed(&[wrongtype()]).unwrap_err();
    assert!(e.kind == ErrorKind::Layout && e.message.contains("emq:{q}:inbox:w1"), "{e}");
}

/// A job's own `keep` sets its done row's expiry in place of the queue's
/// `done_ms`; `0` deletes it at once, `-1` keeps it forever.
#[test]
fn a_jobs_own_keep_sets_its_expiry() {
    let w = |keep: &str| {
        let mut s = settle(Action::COMPLETE);
        s.start();
        exec(s.feed(&complete_replies(held("1", None, None, Some(keep)))).unwrap())
    };
    let long = w("5000");
    assert!(long.contains(&Write::ExpireRow { id: id("a"), at: NOW + 5000 }) && long.contains(&Write::TrimDone { before: NOW - 5000 }));
    assert_eq!(
        w("0")[2..],
        [Write::DeleteRows(members(&["a"]))].into_iter().chain(counted(&[(Counted::Completed, 1)])).collect::<Vec<_>>()
    );
    assert!(!w("-1").iter().any(|x| matches!(x, Write::ExpireRow { .. } | Write::TrimDone { .. })));
}

/// A job asked to stop while it ran is cancelled whatever its worker says,
/// never retried: a complete or a fail (attempts left) makes it `cancelled`,
/// kept as a done row is and listed in `P cancelled`, with its waiters told.
/// A broken settle that retried it would run it again after its cancel.
#[test]
fn a_job_asked_to_stop_is_cancelled_by_its_settle_never_retried() {
    for action in [Action::COMPLETE, Action::fail(b"e", Some(0))] {
        let mut s = settle(action.clone());
        s.start();
        let first = if matches!(action, Action::Complete { .. }) { complete_replies } else { fail_replies };
        let (_, cmds) = read(s.feed(&first(held("1", Some("w1"), Some("1"), None))).unwrap());
        assert_eq!(
            cmds,
            vec![cmd(&["LLEN", "emq:{q}:inbox:w1"]), cmd(&["HMGET", "emq:{q}:retention", "done_ms"]), cmd(&["ZCARD", "emq:{q}:cancelled"])]
        );
        let w = exec(s.feed(&[Reply::Int(0), fields(&[Some("70")]), Reply::Int(0)]).unwrap());
        let mut want = vec![
            Write::MarkLease { second: OLD_SECOND },
            Write::LeaveActive(members(&["a"])),
            row("a", RowFields::Cancelled { finished: NOW }),
            Write::DropLease { id: id("a") },
            Write::ExpireRow { id: id("a"), at: NOW + 70 },
            Write::ListCancelled { at: NOW, ids: members(&["a"]) },
            Write::TrimCancelled { before: NOW - 70 },
        ];
        want.extend(notify("w1", &["a"]));
        want.extend(counted(&[(Counted::Cancelled, 1)]));
        assert_eq!(w, want, "cancelled and counted as a cancel, not a retry: {action:?}");
        assert_eq!(s.finish(&[]).unwrap(), Settled::Cancelled);
    }
}

/// A fail writes its error type and traceback beside the error; its last
/// attempt is an outcome its waiters hear of, a retry is not.
#[test]
fn a_fail_writes_its_detail_and_only_a_death_is_told() {
    let detail = || Some(Box::new(ErrorDetail { error_type: Some(id("app.Boom")), traceback: Some(id("Traceback ...")) }));
    let fail = || Action::Fail { error: id("Boom: x"), retry_in_ms: Some(5000), detail: detail(), retry: true };
    // The last attempt: dead, told to its waiter (after the dead step's trim read).
    let mut s = settle(fail());
    s.start();
    s.feed(&fail_replies(held("3", Some("w1"), None, None))).unwrap();
    let (watch, _) = read(s.feed(&[Reply::Int(0)]).unwrap());
    assert_eq!(watch, vec![key("dead")]);
    let w = exec(s.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap());
    assert!(w.contains(&row("a", RowFields::Dead { error: id("Boom: x"), finished: NOW, detail: detail() })), "{w:?}");
    assert!(w.ends_with(&notify("w1", &["a"])) || w.windows(2).any(|p| p == notify("w1", &["a"])), "{w:?}");
    assert_eq!(s.finish(&[]).unwrap(), Settled::Dead);
    // Attempts left: retried, its waiter not told (no outcome yet).
    let mut s = settle(fail());
    s.start();
    s.feed(&fail_replies(held("1", Some("w1"), None, None))).unwrap();
    let w = exec(s.feed(&[Reply::Int(0)]).unwrap());
    assert!(w.contains(&row("a", RowFields::Retry { ready: false, error: id("Boom: x"), due: NOW + 5000, detail: detail() })));
    assert!(!w.iter().any(|x| matches!(x, Write::Notify { .. })), "{w:?}");
}

#[test]
fn results_and_details_past_their_limits_are_refused_before_anything_is_read() {
    let big = Action::Complete { result: Some(vec![b'x'; RESULT_MAX + 1]) };
    let e = Settle::new(Keys::new(b"q"), id("a"), id("t"), None, big, 0.5).err().unwrap();
    assert!(e.kind == ErrorKind::Argument && e.message.contains("result is 524289 bytes"), "{e}");
    let tb = Action::Fail {
        error: id("e"),
        retry_in_ms: None,
        detail: Some(Box::new(ErrorDetail { error_type: None, traceback: Some(vec![0; 65537]) })),
        retry: true,
    };
    assert!(Settle::new(Keys::new(b"q"), id("a"), id("t"), None, tb, 0.5).err().unwrap().message.contains("traceback"));
    let e = CompleteMany::with_results(Keys::new(b"q"), vec![(held_job("a"), Some(vec![0; RESULT_MAX + 1]))]).err().unwrap();
    assert!(e.message.contains("result"), "{e}");
}

fn held_job(i: &str) -> Held {
    Held { id: id(i), token: id("t"), lane: None }
}

/// A batch row as COMPLETE's and SETTLE's batches read it, held with token `t`.
fn batch_row(wait: Option<&str>, cancel: Option<&str>) -> Reply {
    fields(&[Some("active"), Some("t"), None, Some("1250"), wait, cancel, None])
}

/// A group commit: each done row gets its result, a job asked to stop is
/// cancelled, and each inbox gets one push of its jobs' ids in the order of the
/// completes. A broken batch that pushed a job to another's inbox, or
/// completed the one asked to stop, fails here.
#[test]
fn complete_many_writes_results_cancels_and_tells_each_inbox_once() {
    let jobs = vec![(held_job("a"), Some(id("1"))), (held_job("b"), None), (held_job("c"), Some(id("3")))];
    let mut c = CompleteMany::with_results(Keys::new(b"q"), jobs).unwrap();
    c.start();
    let mut r = vec![time(), batch_row(Some("w1"), None), batch_row(None, Some("1")), batch_row(Some("w1 w2"), None)];
    r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(3), fields(&[Some("-1")]), Reply::Int(0)]);
    let (_, cmds) = read(c.feed(&r).unwrap());
    assert_eq!(cmds.len(), 4, "two inboxes, the policy and `cancelled`: {cmds:?}");
    let w = exec(c.feed(&[Reply::Int(0), Reply::Int(0), fields(&[Some("-1")]), Reply::Int(0)]).unwrap());
    assert_eq!(
        w,
        vec![
            Write::MarkLease { second: 1 },
            Write::LeaveActive(members(&["a", "b", "c"])),
            row("a", RowFields::Done { finished: NOW, result: Some(id("1")) }),
            Write::DropLease { id: id("a") },
            row("c", RowFields::Done { finished: NOW, result: Some(id("3")) }),
            Write::DropLease { id: id("c") },
            Write::ListDone { at: NOW, ids: members(&["a", "c"]) },
            row("b", RowFields::Cancelled { finished: NOW }),
            Write::DropLease { id: id("b") },
            Write::ListCancelled { at: NOW, ids: members(&["b"]) },
            Write::Notify { inbox: id("w1"), ids: members(&["a", "c"]) },
            Write::KeepInbox { inbox: id("w1") },
            Write::Notify { inbox: id("w2"), ids: members(&["c"]) },
            Write::KeepInbox { inbox: id("w2") },
        ]
        .into_iter()
        .chain(counted(&[(Counted::Completed, 2), (Counted::Cancelled, 1)]))
        .collect::<Vec<_>>()
    );
    assert_eq!(c.finish(&[]).unwrap(), vec![true, true, true]);
}

/// The same batch with nobody waiting and no cancel takes no step more than it
/// took before: its first read plans.
#[test]
fn complete_many_with_no_waiters_plans_from_its_first_read() {
    let mut c = CompleteMany::new(Keys::new(b"q"), vec![held_job("a")]).unwrap();
    c.start();
    let mut r = vec![time(), batch_row(None, None)];
    r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(1), fields(&[Some("-1")]), Reply::Int(0)]);
    assert!(matches!(c.feed(&r).unwrap(), Step::Exec(_)));
}

/// SETTLE's batch: a result, a cancel honoured, a death told, a retry not.
#[test]
fn settle_many_writes_what_each_single_call_writes() {
    let fail = |retry| Fate::Fail { error: id("e"), retry_in_ms: retry, jitter: 0.0, detail: None, retry: true };
    let jobs = vec![
        (held_job("a"), Fate::Complete { result: Some(id("r")) }),
        (held_job("b"), fail(Some(0))),
        (held_job("c"), fail(Some(0))),
        (held_job("d"), fail(Some(0))),
    ];
    let mut c = SettleMany::new(Keys::new(b"q"), jobs).unwrap();
    c.start();
    let settle_row = |attempts: &str, wait: Option<&str>, cancel: Option<&str>| {
        fields(&[Some("active"), Some("t"), None, Some(attempts), Some("3"), Some("1250"), wait, cancel, None])
    };
    let mut r = vec![time(), settle_row("1", None, None), settle_row("1", Some("w"), Some("1")), settle_row("3", Some("w"), None)];
    r.push(settle_row("1", Some("w"), None));
    r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(4), fields(&[Some("-1")]), Reply::Int(0)]);
    r.extend([Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]);
    read(c.feed(&r).unwrap());
    // The dead step (the trim's reads), then the plan.
    read(c.feed(&[Reply::Int(0), fields(&[None]), Reply::Int(0)]).unwrap());
    let w = exec(c.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap());
    assert!(w.contains(&row("a", RowFields::Done { finished: NOW, result: Some(id("r")) })));
    assert!(w.contains(&row("b", RowFields::Cancelled { finished: NOW })));
    assert!(w.contains(&Write::Notify { inbox: id("w"), ids: members(&["b", "c"]) }), "the cancel and the death, not the retry: {w:?}");
    assert_eq!(c.finish(&[]).unwrap(), vec![Settled::Completed, Settled::Cancelled, Settled::Dead, Settled::Retrying]);
}

/// A stalled check reads each row's ending fields: a row asked to stop is
/// cancelled (not recovered, never retried), a row that dies is told to its
/// waiters, a recovered one is not (it has no outcome yet).
#[test]
fn the_stalled_check_cancels_rows_asked_to_stop_and_tells_the_dead() {
    let mut s = Sweep::new(Kind::Stalled { max_stalled: Some(0) }, Keys::new(b"q"), 10);
    s.start();
    let sel = Reply::Array(["x", "5", "y", "6"].iter().map(|v| bulk(v)).collect());
    let (_, cmds) = read(s.feed(&[time(), sel.clone()]).unwrap());
    assert_eq!(cmds[1], cmd(&["HMGET", "emq:{q}:job:x", "lane", "stalls", "wait", "cancel", "keep", "priority"]));
    let x = fields(&[None, None, Some("w1"), Some("1"), None, None]);
    let y = fields(&[None, None, Some("w1"), None, None, None]);
    let (_, cmds) = read(s.feed(&[sel, x, y, Reply::Int(2), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert_eq!(cmds[0], cmd(&["LLEN", "emq:{q}:inbox:w1"]), "the extras first");
    // The extras, then the dead step's trim reads.
    read(s.feed(&[Reply::Int(0), fields(&[Some("-1")]), Reply::Int(0)]).unwrap());
    let w = exec(s.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap());
    assert!(w.contains(&row("x", RowFields::Cancelled { finished: NOW })), "{w:?}");
    assert!(w.contains(&Write::ListCancelled { at: NOW, ids: members(&["x"]) }));
    assert!(!w.contains(&row("x", RowFields::Stalled { stalls: 1, dead: true })));
    assert!(w.contains(&row("y", RowFields::Stalled { stalls: 1, dead: true })));
    assert!(w.contains(&Write::Notify { inbox: id("w1"), ids: members(&["x", "y"]) }), "{w:?}");
    assert!(!w.iter().any(|x| matches!(x, Write::MakeReady { .. })), "nothing recovered: {w:?}");
    assert_eq!(s.finish(&[]).unwrap(), Outcome::Stalled { recovered: vec![], dead: vec![id("y")] }, "cancelled: in neither list");
    // Recovered rows with waiters: no outcome, no push.
    let mut s = Sweep::new(Kind::Stalled { max_stalled: None }, Keys::new(b"q"), 10);
    s.start();
    let sel = Reply::Array(["y", "6"].iter().map(|v| bulk(v)).collect());
    s.feed(&[time(), sel.clone()]).unwrap();
    let y = fields(&[None, None, Some("w1"), None, None, None]);
    read(s.feed(&[sel, y, Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap());
    let w = exec(s.feed(&[Reply::Int(0)]).unwrap());
    assert!(!w.iter().any(|x| matches!(x, Write::Notify { .. })), "{w:?}");
}

fn unique_job(key: &str) -> NewJob {
    NewJob { unique: Some(Unique { key: id(key), window_ms: 600_000 }), keep: Some(3_600_000), ..NewJob::of(b"d") }
}

/// ADD's first read for one flat job with a uniqueness key: the clock, the
/// key's value, `pending`, the head of `schedule`, the ring, `wake`.
fn unique_replies(named: Reply) -> Vec<Reply> {
    vec![time(), named, Reply::Int(0), Reply::Array(vec![]), Reply::Int(0), Reply::Int(0)]
}

/// A unique add watches its key and reads it: free, the job is written with
/// its `keep` and `unique` fields and the key set to its id for the window;
/// naming a job whose row exists, the add answers that id and writes nothing
/// (confirmed by an EXEC of nothing under the watch); naming a job gone, the
/// key is taken anew. A broken add that wrote a second job under a taken key
/// would run the job twice.
#[test]
fn a_unique_add_is_answered_with_the_job_its_key_names() {
    let mut a = Add::new(Keys::new(b"q"), vec![unique_job("k")], (1, 0)).unwrap();
    let (watch, cmds) = read(a.start());
    assert_eq!(watch, vec![key("unique:k")]);
    assert_eq!(cmds[1], cmd(&["GET", "emq:{q}:unique:k"]));
    let w = exec(a.feed(&unique_replies(Reply::Nil)).unwrap());
    let mine = a.finish(&[]).unwrap();
    assert_eq!(a.created(), [true]);
    let Write::SetRow { fields: RowFields::New(new), .. } = &w[0] else { panic!("{w:?}") };
    assert_eq!((new.keep, new.unique.as_deref()), (Some(3_600_000), Some(&b"k"[..])));
    assert_eq!(w.last(), Some(&Write::ClaimUnique { key: id("k"), id: mine[0].clone(), ttl_ms: 600_000 }));

    let mut a = Add::new(Keys::new(b"q"), vec![unique_job("k")], (1, 0)).unwrap();
    a.start();
    let (watch, cmds) = read(a.feed(&unique_replies(bulk("first"))).unwrap());
    assert_eq!((watch, cmds), (vec![key("job:first")], vec![cmd(&["EXISTS", "emq:{q}:job:first"])]));
    assert_eq!(exec(a.feed(&[Reply::Int(1)]).unwrap()), vec![], "nothing written");
    assert_eq!((a.finish(&[]).unwrap(), a.created()), (vec![id("first")], &[false][..]));

    let mut a = Add::new(Keys::new(b"q"), vec![unique_job("k")], (1, 0)).unwrap();
    a.start();
    a.feed(&unique_replies(bulk("gone"))).unwrap();
    let w = exec(a.feed(&[Reply::Int(0)]).unwrap());
    assert!(matches!(w.last(), Some(Write::ClaimUnique { .. })), "the key is taken anew: {w:?}");
    assert_eq!(a.created(), [true]);
}

/// A unique add that gives the id its key already names (another call's data
/// under that id) is answered with the id, not created, nothing written; the
/// same id under a key that names another job (or none) is refused as a
/// duplicate, as before. A version that checked the id before the key would
/// refuse the first add, which the key says is the same job.
#[test]
fn a_unique_add_of_the_id_its_key_names_answers_it() {
    let add = |named: Reply| {
        let job = NewJob { id: Some(id("I")), ..unique_job("k") };
        let mut a = Add::new(Keys::new(b"q"), vec![job], (1, 0)).unwrap();
        a.start();
        // The clock, the id's EXISTS and digest, the key, `pending`, the head of `schedule`, the ring, `wake`.
        let first = vec![time(), Reply::Int(1), bulk("0123456789abcdef0123456789abcdef"), named.clone()];
        let rest = [Reply::Int(0), Reply::Array(vec![]), Reply::Int(0), Reply::Int(0)];
        let step = a.feed(&[first, rest.to_vec()].concat()).unwrap();
        let step = if named == Reply::Nil { step } else { a.feed(&[Reply::Int(1)]).unwrap() };
        let w = exec(step);
        (w, a.finish(&[]), a.created().to_vec())
    };
    let (w, ids, created) = add(bulk("I"));
    assert_eq!((w, ids.unwrap(), created), (vec![], vec![id("I")], vec![false]));
    for named in [bulk("other"), Reply::Nil] {
        let (w, ids, _) = add(named);
        assert!(w.is_empty() && ids.unwrap_err().kind == ErrorKind::Duplicate, "refused as a duplicate");
    }
}

#[test]
fn unique_adds_refuse_bad_keys_windows_and_keeps() {
    let k = || Keys::new(b"q");
    let with = |unique: Option<Unique>, keep| NewJob { unique, keep, ..NewJob::of(b"d") };
    for (job, name) in [
        (with(Some(Unique { key: vec![], window_ms: 5 }), None), "unique_key"),
        (with(Some(Unique { key: id("k"), window_ms: 0 }), None), "unique_for"),
        (with(None, Some(-2)), "keep"),
    ] {
        let e = Add::new(k(), vec![job], (1, 0)).err().unwrap();
        assert!(e.kind == ErrorKind::Argument && e.message.contains(name), "{e}");
    }
    let e = Add::new(k(), vec![unique_job("k"), unique_job("k")], (1, 0)).err().unwrap();
    assert!(e.message.contains("twice"), "{e}");
    let _ = When::Delay(0);
}

//! ADD (its digest: a retry of an add that landed) and COMPLETE / FAIL under the
//! retention policy, driven with made-up replies. No server.

use emq_plan::jobs::add::{digest, Add, NewJob, When};
use emq_plan::jobs::settle::{Action, Settle, Settled};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::to_cmds;
use emq_plan::{Cmd, ErrorKind, Keys, Reply};

const NOW: i64 = 1_700_000_000_123;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn time() -> Reply {
    Reply::Array(vec![bulk("1700000000"), bulk("123456")])
}

fn fields(values: &[Option<&str>]) -> Reply {
    Reply::Array(values.iter().map(|v| v.map(bulk).unwrap_or(Reply::Nil)).collect())
}

fn wrongtype() -> Reply {
    Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() }
}

fn cmd(parts: &[&str]) -> Cmd {
    Cmd::from_args(parts)
}

fn job(id: Option<&str>, data: &str, lane: Option<&str>, max_attempts: u32, when: When) -> NewJob {
    NewJob {
        priority: 0,
        id: id.map(|s| s.as_bytes().to_vec()),
        data: data.as_bytes().to_vec(),
        when,
        lane: lane.map(|s| s.as_bytes().to_vec()),
        max_attempts,
        keep: None,
        unique: None,
    }
}

// ------------------------------------------------------------------ add

/// Found by the `add` fuzz target: a clock at `MAX_MS` made a job due later
/// (saturated at `MAX_MS`) count as ready in a lane it had not read, and panic.
#[test]
fn a_clock_at_the_latest_time_a_plan_writes_fails_the_call() {
    let mut add = Add::new(Keys::new(b"q"), vec![job(None, "d", Some("L"), 1, When::Delay(5))], (1, 0)).unwrap();
    let Step::Read { cmds, .. } = add.start() else { panic!("a read first") };
    let mut replies = vec![Reply::Array(vec![bulk("999999999999"), bulk("999999")])];
    replies.extend((1..cmds.len()).map(|_| Reply::Int(0)));
    let e = add.feed(&replies).unwrap_err();
    assert_eq!((e.kind, e.message.as_str()), (ErrorKind::Server, "EMQ.ADD: TIME gave no clock"));
}

#[test]
fn the_digest_is_32_hex_digits_and_tells_every_part_of_the_request_apart() {
    let base = job(None, "d", None, 3, When::Delay(0));
    let d = digest(&base);
    assert_eq!(d.len(), 32);
    assert!(d.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)), "{d}");
    assert_eq!(digest(&job(Some("any id"), "d", None, 3, When::Delay(0))), d, "the id is the key, not the request");
    let others = [
        job(None, "e", None, 3, When::Delay(0)),
        job(None, "d", Some(""), 3, When::Delay(0)),
        job(None, "d", Some("L"), 3, When::Delay(0)),
        job(None, "d", None, 4, When::Delay(0)),
        job(None, "d", None, 3, When::Delay(1)),
        job(None, "d", None, 3, When::At(0)),
        // Length prefixes: the data's end and the lane's start cannot trade bytes.
        job(None, "dl1:L", None, 3, When::Delay(0)),
    ];
    let mut all: Vec<String> = others.iter().map(digest).collect();
    all.push(d);
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), n, "every request has its own digest");
    assert_ne!(digest(&job(None, "dl1:", Some("L"), 3, When::Delay(0))), digest(&job(None, "d", Some("L"), 3, When::Delay(0))));
}

/// The replies of ADD's one read for `given` ids (each `(exists, stored digest)`),
/// no lanes, every list of its type.
fn add_replies(given: &[(i64, Reply)]) -> Vec<Reply> {
    let mut r = vec![time()];
    for (exists, stored) in given {
        r.push(Reply::Int(*exists));
        r.push(stored.clone());
    }
    r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
    r
}

#[test]
fn add_reads_each_given_id_and_its_digest_under_the_watch() {
    let jobs = vec![job(Some("a"), "x", None, 3, When::Delay(0)), job(None, "y", None, 3, When::Delay(0))];
    let mut a = Add::new(Keys::new(b"q"), jobs, (1, 0)).unwrap();
    let Step::Read { watch, cmds } = a.start() else { panic!() };
    assert_eq!(watch, vec![b"emq:{q}:job:a".to_vec()]);
    assert_eq!(cmds[1..3], [cmd(&["EXISTS", "emq:{q}:job:a"]), cmd(&["HGET", "emq:{q}:job:a", "digest"])]);
    let Step::Exec(w) = a.feed(&add_replies(&[(0, Reply::Nil)])).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    let d = digest(&job(None, "x", None, 3, When::Delay(0)));
    let row = &w[0];
    let args = row.to_args();
    assert_eq!(args[1], b"emq:{q}:job:a");
    assert_eq!(args[args.len() - 2..], [&b"digest"[..], d.as_bytes()], "every row written carries its digest");
    assert!(w[1].to_args().contains(&&b"digest"[..]), "a generated id's row too");
}

#[test]
fn an_add_that_landed_is_skipped_and_its_id_returned() {
    let landed = job(Some("a"), "x", Some("L"), 3, When::Delay(0));
    let d = digest(&landed);
    // Only the landed job: nothing to write, the id back.
    let mut a = Add::new(Keys::new(b"q"), vec![landed.clone()], (1, 0)).unwrap();
    a.start();
    let mut replies = vec![time(), Reply::Int(1), bulk(&d)];
    replies.extend([fields(&[None, None, None, None]), Reply::Int(0)]); // the lane's control and length
    replies.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
    assert_eq!(a.feed(&replies).unwrap(), Step::Done(vec![b"a".to_vec()]));
    // With a new one: only the new one is written; both ids back, in order.
    let fresh = job(Some("b"), "y", None, 3, When::Delay(0));
    let mut a = Add::new(Keys::new(b"q"), vec![landed, fresh], (1, 0)).unwrap();
    a.start();
    let mut replies = vec![time(), Reply::Int(1), bulk(&d), Reply::Int(0), Reply::Nil];
    replies.extend([fields(&[None, None, None, None]), Reply::Int(0)]);
    replies.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
    let Step::Exec(w) = a.feed(&replies).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert!(w.iter().all(|c| !c.to_args().iter().any(|a| *a == b"emq:{q}:job:a" || *a == b"emq:{q}:lane:L")), "{w:?}");
    assert!(w.contains(&cmd(&["RPUSH", "emq:{q}:pending", "b"])));
    assert!(!w.iter().any(|c| c.to_args().contains(&&b"emq:{q}:ring"[..])), "the landed lane job is not offered again");
    assert_eq!(a.finish(&vec![Reply::Int(1); w.len()]).unwrap(), vec![b"a".to_vec(), b"b".to_vec()]);
}

#[test]
fn an_id_another_job_has_refuses_the_call_once_the_watch_holds() {
    let j = job(Some("a"), "x", None, 3, When::Delay(0));
    for stored in [bulk("0123456789abcdef0123456789abcdef"), Reply::Nil, wrongtype()] {
        let mut a = Add::new(Keys::new(b"q"), vec![j.clone(), job(Some("b"), "y", None, 3, When::Delay(0))], (1, 0)).unwrap();
        a.start();
        let step = a.feed(&add_replies(&[(1, stored.clone()), (0, Reply::Nil)])).unwrap();
        // An empty transaction: EXEC confirms that the rows read held still.
        assert_eq!(step, Step::Exec(vec![]), "{stored:?}");
        let e = a.finish(&[]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Duplicate);
        assert!(e.message.contains("EMQ.ADD") && e.message.contains("\"a\"") && e.message.contains("another job"), "{e}");
    }
    // A server error on the read is raised as one.
    let mut a = Add::new(Keys::new(b"q"), vec![j], (1, 0)).unwrap();
    a.start();
    let noperm = Reply::Error { code: "NOPERM".into(), message: "NOPERM no".into() };
    let e = a.feed(&add_replies(&[(1, noperm)])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Server);
}

// ------------------------------------------------------------------ complete and fail

/// A flat job `a` held with token `t`: the replies of the settle's first read (the
/// clock, the row, `ZCARD active`), then for COMPLETE (`done_ms` given) the
/// retention's `done_ms` and `ZCARD done`, for FAIL the ring, `wake`, `pending`, the
/// head of `schedule` and `ZCARD dead`.
fn settle_replies(done_ms: Option<&str>, done: Reply, attempts: &str) -> Vec<Reply> {
    let mut r = vec![time(), fields(&[Some("active"), Some("t"), None, Some(attempts), Some("1")]), Reply::Int(1)];
    if done_ms.is_none() {
        r.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]);
    }
    if let Some(v) = done_ms {
        r.push(fields(&[if v == "absent" { None } else { Some(v) }]));
        r.push(done);
    }
    r
}

fn complete() -> Settle {
    Settle::new(Keys::new(b"q"), b"a".to_vec(), b"t".to_vec(), None, Action::COMPLETE, 0.5).unwrap()
}

#[test]
fn complete_reads_done_ms_in_its_first_read_and_follows_it() {
    let mut s = complete();
    let Step::Read { cmds, .. } = s.start() else { panic!() };
    assert_eq!(cmds[cmds.len() - 2..], [cmd(&["HMGET", "emq:{q}:retention", "done_ms"]), cmd(&["ZCARD", "emq:{q}:done"])]);
    let now = NOW.to_string();
    // The default: kept 10 minutes.
    let Step::Exec(w) = s.feed(&settle_replies(Some("absent"), Reply::Int(0), "1")).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert_eq!(
        w,
        vec![
            cmd(&["ZREM", "emq:{q}:active", "a"]),
            cmd(&["HSET", "emq:{q}:job:a", "state", "done", "finished", &now]),
            cmd(&["HDEL", "emq:{q}:job:a", "token", "lease"]),
            cmd(&["PEXPIREAT", "emq:{q}:job:a", &(NOW + 600_000).to_string()]),
            cmd(&["ZADD", "emq:{q}:done", &now, "a"]),
            cmd(&["ZREMRANGEBYSCORE", "emq:{q}:done", "-inf", &format!("({}", NOW - 600_000)]),
            cmd(&["HINCRBY", "emq:{q}:stats:28333333", "completed", "1"]),
            cmd(&["PEXPIRE", "emq:{q}:stats:28333333", "90000000"]),
        ]
    );
    assert_eq!(s.finish(&vec![Reply::Int(1); w.len()]).unwrap(), Settled::Completed);
    // 0: deleted at once, and `done` is not touched (its type does not matter).
    let mut s = complete();
    s.start();
    let Step::Exec(w) = s.feed(&settle_replies(Some("0"), wrongtype(), "1")).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert_eq!(w[..2], [cmd(&["ZREM", "emq:{q}:active", "a"]), cmd(&["DEL", "emq:{q}:job:a"])]);
    assert_eq!(w[2], cmd(&["HINCRBY", "emq:{q}:stats:28333333", "completed", "1"]), "a row deleted at once is counted too");
    assert_eq!(w.len(), 4);
    // -1: kept forever, listed, no expiry.
    let mut s = complete();
    s.start();
    let Step::Exec(w) = s.feed(&settle_replies(Some("-1"), Reply::Int(0), "1")).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert_eq!(w.len(), 6);
    assert_eq!(w[3], cmd(&["ZADD", "emq:{q}:done", &now, "a"]));
}

#[test]
fn complete_refuses_a_done_or_retention_of_the_wrong_type() {
    for (done_ms, done) in [(Some("absent"), wrongtype()), (Some("-1"), wrongtype())] {
        let mut s = complete();
        s.start();
        let e = s.feed(&settle_replies(done_ms, done, "1")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:done"), "{e}");
    }
    let mut s = complete();
    s.start();
    let mut r = settle_replies(Some("absent"), Reply::Int(0), "1");
    let n = r.len();
    r[n - 2] = wrongtype();
    let e = s.feed(&r).unwrap_err();
    assert!(e.kind == ErrorKind::Layout && e.message.contains("emq:{q}:retention"), "{e}");
}

#[test]
fn a_fail_that_kills_reads_the_dead_head_under_a_watch_and_trims() {
    let mut s = Settle::new(
        Keys::new(b"q"),
        b"a".to_vec(),
        b"t".to_vec(),
        None,
        Action::Fail { error: b"e".to_vec(), retry_in_ms: None, detail: None, retry: true },
        0.5,
    )
    .unwrap();
    let Step::Read { cmds, .. } = s.start() else { panic!() };
    assert!(!cmds.iter().any(|c| c.to_args().contains(&&b"emq:{q}:retention"[..])), "FAIL reads the policy only when the job dies");
    let Step::Read { watch, cmds } = s.feed(&settle_replies(None, Reply::Nil, "1")).unwrap() else { panic!() };
    assert_eq!(watch, vec![b"emq:{q}:dead".to_vec()]);
    assert_eq!(
        cmds,
        vec![
            cmd(&["HMGET", "emq:{q}:retention", "dead_ms", "dead_max"]),
            cmd(&["ZCARD", "emq:{q}:dead"]),
            cmd(&["ZRANGE", "emq:{q}:dead", "0", "64", "WITHSCORES"]),
        ]
    );
    let head = Reply::Array(vec![bulk("old"), bulk("5"), bulk("older"), bulk("6")]);
    let Step::Exec(w) = s.feed(&[fields(&[None, Some("1")]), Reply::Int(2), head]).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert_eq!(w[w.len() - 2..], [cmd(&["ZREM", "emq:{q}:dead", "old", "older"]), cmd(&["DEL", "emq:{q}:job:old", "emq:{q}:job:older"])]);
    assert!(w.contains(&cmd(&["ZADD", "emq:{q}:dead", &NOW.to_string(), "a"])));
    assert_eq!(s.finish(&vec![Reply::Int(1); w.len()]).unwrap(), Settled::Dead);
}

#[test]
fn a_lane_job_that_dies_trims_then_confirms_its_empty_lane() {
    let action = Action::Fail { error: b"e".to_vec(), retry_in_ms: Some(0), detail: None, retry: true };
    let mut s = Settle::new(Keys::new(b"q"), b"a".to_vec(), b"t".to_vec(), Some(b"L".to_vec()), action, 0.5).unwrap();
    s.start();
    let mut r = vec![time(), fields(&[Some("active"), Some("t"), Some("L"), Some("1"), Some("1")])];
    r.extend([fields(&[None, Some("1"), Some("1"), None]), Reply::Int(0)]);
    // `ZCARD active`, the ring, `wake`, `pending`, the head of `schedule`, `ZCARD dead`.
    r.extend([Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Array(vec![]), Reply::Int(0)]);
    let Step::Read { watch, .. } = s.feed(&r).unwrap() else { panic!() };
    assert_eq!(watch, vec![b"emq:{q}:dead".to_vec()]);
    let Step::Read { watch, .. } = s.feed(&[fields(&[None, None]), Reply::Int(0), Reply::Array(vec![])]).unwrap() else { panic!() };
    assert_eq!(watch, vec![b"emq:{q}:lane:L".to_vec()]);
    let Step::Exec(w) = s.feed(&[Reply::Int(0)]).unwrap() else { panic!() };
    let w = to_cmds(&Keys::new(b"q"), &w);
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:lanectl:L", "active", "0"])));
}

#[test]
fn a_settle_reads_the_types_of_what_its_action_may_write_and_no_more() {
    let reads = |lane: Option<&str>, action: Action| -> Vec<Vec<u8>> {
        let mut s = Settle::new(Keys::new(b"q"), b"a".to_vec(), b"t".to_vec(), lane.map(|l| l.as_bytes().to_vec()), action, 0.5).unwrap();
        let Step::Read { cmds, .. } = s.start() else { panic!() };
        // Every key read past the clock and the row.
        cmds[2..].iter().map(|c| c.to_args()[1].to_vec()).collect()
    };
    let keys = |ks: &[&str]| ks.iter().map(|k| format!("emq:{{q}}:{k}").into_bytes()).collect::<Vec<_>>();
    // A flat complete writes `active`, the row and `done` (by the retention): not
    // `pending`, `schedule`, `dead`, the ring or `wake`.
    assert_eq!(reads(None, Action::COMPLETE), keys(&["active", "retention", "done"]));
    assert_eq!(reads(None, Action::Extend { lease_ms: 5 }), keys(&["active"]));
    // A lane job's complete offers its lane: the ring and `wake` too.
    assert_eq!(reads(Some("L"), Action::COMPLETE), keys(&["lanectl:L", "lane:L", "active", "ring", "wake", "retention", "done"]));
    let fail = Action::Fail { error: b"e".to_vec(), retry_in_ms: None, detail: None, retry: true };
    assert_eq!(reads(None, fail), keys(&["active", "ring", "wake", "pending", "schedule", "dead"]));
}

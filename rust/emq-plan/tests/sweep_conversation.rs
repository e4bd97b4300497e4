//! The sweep conversation driven with made-up replies: what it asks for, what it
//! plans, and what it refuses. No server.

use emq_plan::protocol::conversation::Conversation;
use emq_plan::protocol::write::to_cmds;
use emq_plan::sweep::{Kind, Outcome, Step, Sweep};
use emq_plan::{Cmd, ErrorKind, Keys, Reply};

const NOW: i64 = 1_700_000_000_123;

fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

fn time() -> Reply {
    Reply::Array(vec![bulk("1700000000"), bulk("123456")])
}

/// `ZRANGE … WITHSCORES` of `(member, score)`.
fn members(items: &[(&str, i64)]) -> Reply {
    Reply::Array(items.iter().flat_map(|(m, s)| [bulk(m), bulk(&s.to_string())]).collect())
}

fn wrongtype() -> Reply {
    Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE Operation against a key".into() }
}

/// A value or nil.
fn opt(value: Option<&str>) -> Reply {
    value.map(bulk).unwrap_or(Reply::Nil)
}

/// A promote's row as it reads it where the queue uses no priority (`HGET lane`).
fn field(lane: Option<&str>) -> Reply {
    opt(lane)
}

/// An `HMGET` reply of optional values.
fn fields(values: &[Option<&str>]) -> Reply {
    Reply::Array(values.iter().map(|v| v.map(bulk).unwrap_or(Reply::Nil)).collect())
}

/// A stalled check's row as it reads it (`lane stalls wait cancel keep priority`): its
/// `lane` and `stalls`, no waiters, no cancel.
fn row(lane_stalls: &[Option<&str>; 2]) -> Reply {
    fields(&[lane_stalls[0], lane_stalls[1], None, None, None, None])
}

/// `HMGET P lanectl:L` of every control field a sweep reads (`CTL_FIELDS`).
fn lanectl_read(lane: &str) -> Cmd {
    Cmd::new("HMGET").arg(format!("emq:{{q}}:lanectl:{lane}")).args(emq_plan::lanes::offer::CTL_FIELDS)
}

fn cmd(parts: &[&str]) -> Cmd {
    Cmd::from_args(parts)
}

fn read(step: Step) -> (Vec<Vec<u8>>, Vec<Cmd>) {
    match step {
        Step::Read { watch, cmds } => (watch, cmds),
        other => panic!("expected a read, got {other:?}"),
    }
}

/// Feeds a promote's selection: it watches `P promotions` (in front of its reads), never a
/// row, then reads. Gives the reads after the selection read again (whose reply
/// the tests feed first: `again`).
fn select_promote(s: &mut Sweep, replies: &[Reply]) -> Vec<Cmd> {
    let (watch, cmds) = select(s, &[replies, &[promotions()]].concat());
    assert_eq!(watch, vec![b"emq:{q}:promotions".to_vec()], "a promote watches no row");
    assert_eq!(cmds[0], cmd(&["GET", "emq:{q}:promotions"]), "the count of promotes, read again");
    cmds[1..].to_vec()
}

/// `P promotions` as a promote's selection reads it (`GET`), and as the tests
/// feed it again under the watch: no promote ran meanwhile.
fn promotions() -> Reply {
    bulk("7")
}

/// Feeds a sweep's selection: the rows' reads come next, under the watch sent
/// in front of them. Gives what is watched and the reads.
fn select(s: &mut Sweep, replies: &[Reply]) -> (Vec<Vec<u8>>, Vec<Cmd>) {
    read(s.feed(replies).unwrap())
}

/// The plan's commands, as a host renders its writes (the queue is `q`).
fn commands(writes: &[emq_plan::Write]) -> Vec<Cmd> {
    to_cmds(&Keys::new(b"q"), writes)
}

fn writes(step: Step) -> Vec<Cmd> {
    match step {
        Step::Exec(w) => commands(&w),
        other => panic!("expected the plan, got {other:?}"),
    }
}

fn promote() -> Sweep {
    Sweep::new(Kind::Promote, Keys::new(b"q"), 10)
}

#[test]
fn promote_reads_the_clock_then_the_first_batch_members() {
    let mut s = promote();
    let (watch, cmds) = read(s.start());
    assert!(watch.is_empty(), "nothing is watched before the selection is known");
    assert_eq!(
        cmds,
        vec![cmd(&["TIME"]), cmd(&["ZRANGE", "emq:{q}:schedule", "0", "9", "WITHSCORES"]), cmd(&["GET", "emq:{q}:promotions"])]
    );
}

#[test]
fn nothing_due_replies_zero_and_plans_nothing() {
    let mut s = promote();
    s.start();
    let step = s.feed(&[time(), members(&[("later", NOW + 1)]), Reply::Nil]).unwrap();
    assert_eq!(step, Step::Done(Outcome::Promoted(0)));
}

/// Selects `a` (flat), `g` (ghost), `b` (lane L), `c` (lane L) and `later` (not due).
fn promote_to_plan(lanectl: Reply, lane_len: i64) -> Vec<Cmd> {
    let mut s = promote();
    s.start();
    let sel = members(&[("a", NOW - 5), ("g", NOW - 4), ("b", NOW - 3), ("c", NOW), ("later", NOW + 1)]);
    let cmds = select_promote(&mut s, &[time(), sel]);
    assert_eq!(cmds[0], cmd(&["HGET", "emq:{q}:job:a", "lane"]));
    assert_eq!(cmds[4], cmd(&["EXISTS", "emq:{q}:job:a", "emq:{q}:job:g", "emq:{q}:job:b", "emq:{q}:job:c"]));
    let rows = [field(None), field(None), field(Some("L")), field(Some("L"))];
    let mut replies = vec![promotions()];
    replies.extend(rows);
    // Three of the four rows exist: `g`, with no `lane` like `a`, is the ghost only
    // if `a` exists, which the count cannot say; `TYPE` does.
    replies.extend([Reply::Int(3), Reply::Int(0), Reply::Int(0), Reply::Int(2)]);
    let (watch, cmds) = read(s.feed(&replies).unwrap());
    assert!(watch.is_empty());
    assert_eq!(cmds, vec![cmd(&["TYPE", "emq:{q}:job:a"]), cmd(&["TYPE", "emq:{q}:job:g"])]);
    let replies = [Reply::Status("hash".into()), Reply::Status("none".into())];
    let (watch, cmds) = read(s.feed(&replies).unwrap());
    assert_eq!(watch, vec![b"emq:{q}:lanectl:L".to_vec()], "the lanes it decides on are watched");
    assert_eq!(cmds[0], lanectl_read("L"));
    writes(s.feed(&[lanectl, Reply::Int(lane_len)]).unwrap())
}

#[test]
fn promote_plans_flat_lane_and_ghost_rows_with_offer_and_wake() {
    let w = promote_to_plan(fields(&[None, None, None, None]), 0);
    assert_eq!(
        w,
        vec![
            cmd(&["ZREM", "emq:{q}:schedule", "a", "g", "b", "c"]),
            cmd(&["RPUSH", "emq:{q}:pending", "a"]),
            cmd(&["RPUSH", "emq:{q}:lane:L", "b", "c"]),
            cmd(&["HSET", "emq:{q}:job:a", "state", "pending"]),
            cmd(&["HSET", "emq:{q}:job:b", "state", "pending"]),
            cmd(&["HSET", "emq:{q}:job:c", "state", "pending"]),
            cmd(&["HSET", "emq:{q}:lanectl:L", "ring", "1"]),
            cmd(&["RPUSH", "emq:{q}:ring", "L"]),
            cmd(&["RPUSH", "emq:{q}:wake", "L", ""]),
            cmd(&["LTRIM", "emq:{q}:wake", "-64", "-1"]),
            cmd(&["INCR", "emq:{q}:promotions"]),
        ]
    );
}

#[test]
fn a_lane_in_the_ring_paused_or_full_is_not_offered() {
    for ctl in [fields(&[None, None, None, Some("1")]), fields(&[Some("1"), None, None, None]), fields(&[None, Some("2"), Some("2"), None])]
    {
        let w = promote_to_plan(ctl, 5);
        assert!(!w.iter().any(|c| c.to_args()[1] == b"emq:{q}:ring"), "{w:?}");
        assert!(w.contains(&cmd(&["RPUSH", "emq:{q}:wake", ""])), "the flat wake still goes out");
    }
}

#[test]
fn a_changed_selection_is_a_conflict() {
    // A stalled check watches its rows after the selection, and reads it again.
    let stalled = || Sweep::new(Kind::Stalled { max_stalled: None }, Keys::new(b"q"), 10);
    let mut s = stalled();
    s.start();
    select(&mut s, &[time(), members(&[("a", NOW - 5)])]);
    // `a` left active between the selection and the watch.
    let rest = [row(&[None, None]), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
    let e = s.feed(&[&[Reply::Array(vec![])][..], &rest].concat());
    assert_eq!(e.unwrap_err().kind, ErrorKind::Conflict);
    // `a` was scored again, or is out of the range read again.
    for again in [members(&[("a", NOW - 4)]), members(&[("z", NOW - 6)])] {
        let mut s = stalled();
        s.start();
        select(&mut s, &[time(), members(&[("a", NOW - 5)])]);
        let e = s.feed(&[&[again][..], &rest].concat());
        assert_eq!(e.unwrap_err().kind, ErrorKind::Conflict);
    }
    // A member that joined the head since is left for the next call.
    let mut s = stalled();
    s.start();
    select(&mut s, &[time(), members(&[("a", NOW - 5)])]);
    let again = members(&[("z", NOW - 6), ("a", NOW - 5), ("later", NOW + 1)]);
    let w = writes(s.feed(&[&[again][..], &rest].concat()).unwrap());
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:active", "a"]));
}

#[test]
fn a_promote_that_ran_between_the_selection_and_the_watch_is_a_conflict() {
    // Read beside the selection, then again under the watch: another promote
    // counted itself in between (nil to a count, or one count to the next).
    let rest = [field(None), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
    for (before, again) in [(Reply::Nil, bulk("1")), (bulk("7"), bulk("8"))] {
        let mut s = promote();
        s.start();
        let (_, cmds) = select(&mut s, &[time(), members(&[("a", NOW - 5)]), before.clone()]);
        assert_eq!(cmds[0], cmd(&["GET", "emq:{q}:promotions"]));
        let e = s.feed(&[&[again][..], &rest].concat()).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Conflict);
        // Unchanged (nil included): the selection stands.
        let mut s = promote();
        s.start();
        select(&mut s, &[time(), members(&[("a", NOW - 5)]), before.clone()]);
        let w = writes(s.feed(&[&[before][..], &rest].concat()).unwrap());
        assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a"]));
    }
}

#[test]
fn a_row_of_the_wrong_type_is_a_layout_error() {
    let mut s = promote();
    s.start();
    select_promote(&mut s, &[time(), members(&[("a", NOW - 5)])]);
    let e = s.feed(&[promotions(), wrongtype(), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout);
    assert!(e.message.starts_with("EMQ.PROMOTE: layout:"), "{e}");
    assert!(e.message.contains("emq:{q}:job:a"), "{e}");
}

#[test]
fn pending_of_the_wrong_type_refuses_every_call_that_selected_members() {
    // SPEC §5 step 5: whether the rows are flat or lane rows.
    for lane in [None, Some("L")] {
        let mut s = promote();
        s.start();
        select_promote(&mut s, &[time(), members(&[("a", NOW - 5)])]);
        let step = s.feed(&[promotions(), field(lane), Reply::Int(1), wrongtype(), Reply::Int(0), Reply::Int(0)]);
        let e = match step {
            Err(e) => e,
            Ok(Step::Read { .. }) => s.feed(&[fields(&[None, None, None, None]), Reply::Int(0)]).unwrap_err(),
            Ok(other) => panic!("{other:?}"),
        };
        assert_eq!(e.kind, ErrorKind::Layout, "lane {lane:?}");
    }
}

#[test]
fn unsure_rows_are_typed_when_the_count_cannot_tell() {
    // Two rows with no fields read; one of them exists: which one needs TYPE.
    let mut s = promote();
    s.start();
    select_promote(&mut s, &[time(), members(&[("a", NOW - 5), ("b", NOW - 4)])]);
    let (watch, cmds) =
        read(s.feed(&[promotions(), field(None), field(None), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert!(watch.is_empty());
    assert_eq!(cmds, vec![cmd(&["TYPE", "emq:{q}:job:a"]), cmd(&["TYPE", "emq:{q}:job:b"])]);
    let w = writes(s.feed(&[Reply::Status("none".into()), Reply::Status("hash".into())]).unwrap());
    assert_eq!(w[1], cmd(&["RPUSH", "emq:{q}:pending", "b"]));
    assert_eq!(w[2], cmd(&["HSET", "emq:{q}:job:b", "state", "pending"]));
}

#[test]
fn stalled_check_counts_stalls_recovers_and_kills() {
    let mut s = Sweep::new(Kind::Stalled { max_stalled: Some(1) }, Keys::new(b"q"), 100);
    let (_, cmds) = read(s.start());
    assert_eq!(cmds[1], cmd(&["ZRANGE", "emq:{q}:active", "0", "99", "WITHSCORES"]));
    let (watch, _) = select(&mut s, &[time(), members(&[("x", NOW - 2), ("y", NOW - 1)])]);
    assert_eq!(watch, vec![b"emq:{q}:job:x".to_vec(), b"emq:{q}:job:y".to_vec()], "leases of the current second: their rows");
    let again = members(&[("x", NOW - 2), ("y", NOW - 1)]);
    let x = row(&[None, None]);
    let y = row(&[Some("L"), Some("1")]);
    let (_, cmds) = read(s.feed(&[again, x, y, Reply::Int(2), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap());
    assert_eq!(cmds[0], lanectl_read("L"));
    let (watch, cmds) = read(s.feed(&[fields(&[None, Some("1"), Some("1"), None]), Reply::Int(3)]).unwrap());
    assert_eq!(watch, vec![b"emq:{q}:dead".to_vec()], "one died: dead is watched for the trim");
    assert_eq!(
        cmds,
        vec![
            cmd(&["HMGET", "emq:{q}:retention", "dead_ms", "dead_max"]),
            cmd(&["ZCARD", "emq:{q}:dead"]),
            cmd(&["ZRANGE", "emq:{q}:dead", "0", "64", "WITHSCORES"]),
        ]
    );
    let w = writes(s.feed(&[fields(&[None, None]), Reply::Int(0), members(&[])]).unwrap());
    let now = NOW.to_string();
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:active", "x", "y"]));
    assert_eq!(w[1], cmd(&["SET", "emq:{q}:leases:1700000000", "1", "PX", "60000"]), "the lease mark of their second");
    assert_eq!(w[2], cmd(&["ZADD", "emq:{q}:dead", &now, "y"]));
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:job:x", "state", "pending", "stalls", "1"])));
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:job:y", "state", "dead", "stalls", "2", "error", "stalled"])));
    assert!(w.contains(&cmd(&["HDEL", "emq:{q}:job:y", "token", "lease"])));
    assert!(w.contains(&cmd(&["RPUSH", "emq:{q}:pending", "x"])));
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:lanectl:L", "active", "0"])), "the dead lane row gives back its slot");
    // The lane had work waiting and now has a free slot: offered.
    assert!(w.contains(&cmd(&["RPUSH", "emq:{q}:wake", "L", ""])));
    assert_eq!(
        s.finish(&vec![Reply::Int(2); w.len()]).unwrap(),
        Outcome::Stalled { recovered: vec![b"x".to_vec()], dead: vec![b"y".to_vec()] }
    );
}

#[test]
fn the_reply_counts_from_exec() {
    let mut s = promote();
    s.start();
    select_promote(&mut s, &[time(), members(&[("a", NOW)])]);
    writes(s.feed(&[promotions(), field(None), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap());
    // EXEC says ZREM removed none (what cannot happen under the guard): the reply says so too.
    assert_eq!(s.finish(&[Reply::Int(0)]).unwrap(), Outcome::Promoted(0));
}

#[test]
fn a_ghost_costs_a_type_only_for_the_rows_of_its_group() {
    // 40 flat rows (no lane: each one a ghost or a row, as far as the fields say);
    // one `EXISTS` per group of 32; the ghost `m35` is in the second group.
    let n = 40;
    let ids: Vec<String> = (0..n).map(|i| format!("m{i:02}")).collect();
    let mut s = Sweep::new(Kind::Promote, Keys::new(b"q"), 100);
    s.start();
    let sel = members(&ids.iter().map(|id| (id.as_str(), NOW - 1)).collect::<Vec<_>>());
    let cmds = select_promote(&mut s, &[time(), sel.clone()]);
    let exists: Vec<&Cmd> = cmds.iter().filter(|c| c.name() == b"EXISTS").collect();
    assert_eq!(exists.iter().map(|c| c.argc() - 1).collect::<Vec<_>>(), vec![32, 8]);
    let mut replies = vec![promotions()];
    replies.extend((0..n).map(|_| field(None)));
    replies.extend([Reply::Int(32), Reply::Int(7), Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
    let (_, cmds) = read(s.feed(&replies).unwrap());
    let typed: Vec<String> = cmds.iter().map(|c| String::from_utf8_lossy(c.to_args()[1]).into_owned()).collect();
    assert_eq!(typed, (32..40).map(|i| format!("emq:{{q}}:job:m{i:02}")).collect::<Vec<_>>());
    let replies: Vec<Reply> = (32..40).map(|i| Reply::Status(if i == 35 { "none" } else { "hash" }.into())).collect();
    let w = writes(s.feed(&replies).unwrap());
    let pushed = w.iter().find(|c| c.name() == b"RPUSH").unwrap();
    assert_eq!(pushed.argc(), 2 + 39, "39 rows join pending, not the ghost");
    assert!(!pushed.to_args().contains(&&b"m35"[..]));
}

/// A stalled check of `x` and `y` whose rows read `x_fields` and `y_fields`
/// (`lane`, `stalls`); with `speculate`, told to speculate before the rows are
/// fed. Gives the plan.
fn stalled_plan(speculate: bool, x_fields: Reply, y_fields: Reply) -> Vec<Cmd> {
    let mut s = Sweep::new(Kind::Stalled { max_stalled: Some(1) }, Keys::new(b"q"), 100);
    s.start();
    select(&mut s, &[time(), members(&[("x", NOW - 2), ("y", NOW - 1)])]);
    if speculate {
        s.speculate();
    }
    let again = members(&[("x", NOW - 2), ("y", NOW - 1)]);
    let replies = [again, x_fields, y_fields, Reply::Int(2), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
    let mut step = s.feed(&replies).unwrap();
    loop {
        step = match step {
            Step::Exec(w) => return commands(&w),
            // The trim of `dead`: two old entries, at most 2 kept.
            Step::Read { watch, .. } if watch == vec![b"emq:{q}:dead".to_vec()] => {
                s.feed(&[fields(&[None, Some("2")]), Reply::Int(2), members(&[("old1", NOW - 9), ("old2", NOW - 8)])]).unwrap()
            }
            Step::Read { .. } => s.feed(&[fields(&[None, None, None, None]), Reply::Int(0)]).unwrap(),
            other => panic!("expected a plan, got {other:?}"),
        }
    }
}

#[test]
fn the_speculated_plan_is_the_plan_whether_or_not_the_guess_holds() {
    let cases = [
        // The guess: flat rows at their first stall.
        (row(&[None, None]), row(&[None, None])),
        // Not the guess: a row that stalled before (it dies here), a lane row.
        (row(&[None, None]), row(&[None, Some("1")])),
        (row(&[Some("L"), None]), row(&[None, None])),
    ];
    for (x, y) in cases {
        let plain = stalled_plan(false, x.clone(), y.clone());
        assert_eq!(stalled_plan(true, x, y), plain);
    }
    let w = stalled_plan(true, row(&[None, None]), row(&[None, Some("1")]));
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:job:y", "state", "dead", "stalls", "2", "error", "stalled"])), "{w:?}");
    assert_eq!(w[w.len() - 2..], [cmd(&["ZREM", "emq:{q}:dead", "old1"]), cmd(&["DEL", "emq:{q}:job:old1"])], "{w:?}");
}

/// A stalled check with `max_stalled: Some(0)`: the likely read (flat rows at
/// their first stall) kills every row, so the speculated plan goes through the
/// trim step too.
fn all_die_plan(speculate: bool, dead_head: Reply, policy: Reply, card: i64) -> Vec<Cmd> {
    let mut s = Sweep::new(Kind::Stalled { max_stalled: Some(0) }, Keys::new(b"q"), 100);
    s.start();
    select(&mut s, &[time(), members(&[("x", NOW - 2), ("y", NOW - 1)])]);
    if speculate {
        s.speculate();
    }
    let again = members(&[("x", NOW - 2), ("y", NOW - 1)]);
    let replies =
        [again, row(&[None, None]), row(&[None, None]), Reply::Int(2), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
    let (watch, cmds) = read(s.feed(&replies).unwrap());
    assert_eq!(watch, vec![b"emq:{q}:dead".to_vec()]);
    assert_eq!(cmds[2], cmd(&["ZRANGE", "emq:{q}:dead", "0", "65", "WITHSCORES"]), "d + 64 entries: d = 2");
    writes(s.feed(&[policy, Reply::Int(card), dead_head]).unwrap())
}

#[test]
fn deaths_trim_dead_by_count_and_by_time_with_or_without_speculation() {
    let head = members(&[("a", NOW - 100_000), ("b", NOW - 50), ("c", NOW - 50)]);
    for speculate in [false, true] {
        // Nothing trimmed under the defaults.
        let w = all_die_plan(speculate, head.clone(), fields(&[None, None]), 3);
        assert!(!w.iter().any(|c| c.name() == b"DEL"), "{w:?}");
        // At most 3 kept: 3 + 2 - 3 = 2 leave, the oldest first.
        let w = all_die_plan(speculate, head.clone(), fields(&[None, Some("3")]), 3);
        assert_eq!(w[w.len() - 2..], [cmd(&["ZREM", "emq:{q}:dead", "a", "b"]), cmd(&["DEL", "emq:{q}:job:a", "emq:{q}:job:b"])]);
        // Kept 1 s: only `a` is older.
        let w = all_die_plan(speculate, head.clone(), fields(&[Some("1000"), Some("-1")]), 3);
        assert_eq!(w[w.len() - 2..], [cmd(&["ZREM", "emq:{q}:dead", "a"]), cmd(&["DEL", "emq:{q}:job:a"])]);
        // Not kept: every entry, the new ones too (ties at `now` by member), rows deleted after they are written.
        let w = all_die_plan(speculate, head.clone(), fields(&[Some("0"), None]), 3);
        let n = w.len();
        assert_eq!(w[n - 2], cmd(&["ZREM", "emq:{q}:dead", "a", "b", "c", "x", "y"]));
        let set_x = w.iter().position(|c| c.to_args()[..2] == [&b"HSET"[..], b"emq:{q}:job:x"]).unwrap();
        assert!(set_x < n - 1, "the row is written, then deleted");
    }
    assert_eq!(all_die_plan(true, head.clone(), fields(&[None, Some("1")]), 3), all_die_plan(false, head, fields(&[None, Some("1")]), 3));
}

#[test]
fn a_dead_zset_or_retention_of_the_wrong_type_at_the_trim_is_a_layout_error() {
    for (policy, card) in [(wrongtype(), Reply::Int(0)), (fields(&[None, None]), wrongtype())] {
        let mut s = Sweep::new(Kind::Stalled { max_stalled: Some(0) }, Keys::new(b"q"), 100);
        s.start();
        select(&mut s, &[time(), members(&[("x", NOW - 2)])]);
        let replies =
            [members(&[("x", NOW - 2)]), row(&[None, None]), Reply::Int(1), Reply::Int(0), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
        read(s.feed(&replies).unwrap());
        let e = s.feed(&[policy, card, members(&[])]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Layout, "{e}");
    }
}

/// Replies to a read: the selection again for `ZRANGE`, flat rows at their first
/// stall for `HMGET`, every row there for `EXISTS`, `zmscore` for `ZMSCORE`, and
/// 0 for the rest (the empty lists and zsets whose types are checked).
fn answer(cmds: &[Cmd], again: &Reply, zmscore: &Reply) -> Vec<Reply> {
    cmds.iter()
        .map(|c| match c.name() {
            b"ZRANGE" => again.clone(),
            b"ZMSCORE" => zmscore.clone(),
            b"HMGET" => row(&[None, None]),
            b"EXISTS" => Reply::Int(i64::try_from(c.to_args().len() - 1).unwrap()),
            _ => Reply::Int(0),
        })
        .collect()
}

/// A grouped stalled check of a, b, c, d in groups of 2, where another call took
/// `c` between the selection and the second group's read; with `speculate`, told
/// to guess each group's plan while the one before runs. Gives every EXEC's writes.
fn stalled_in_groups_with_c_taken(speculate: bool) -> Vec<Vec<Cmd>> {
    let mut s = Sweep::grouped(Kind::Stalled { max_stalled: Some(5) }, Keys::new(b"q"), 4, 2);
    s.start();
    let selection = members(&[("a", NOW - 4), ("b", NOW - 3), ("c", NOW - 2), ("d", NOW - 1)]);
    let (_, cmds) = select(&mut s, &[time(), selection.clone()]);
    if speculate {
        s.speculate();
    }
    let c_taken = Reply::Array(vec![Reply::Nil, bulk(&(NOW - 1).to_string())]);
    let mut step = s.feed(&answer(&cmds, &selection, &c_taken)).unwrap();
    let mut execs = vec![];
    loop {
        step = match step {
            Step::Exec(w) => {
                execs.push(commands(&w));
                return execs;
            }
            Step::Group { writes, cmds, .. } => {
                execs.push(commands(&writes));
                if speculate {
                    s.speculate();
                }
                s.committed(Some(&vec![Reply::Int(1); execs.last().unwrap().len()])).unwrap();
                s.feed(&answer(&cmds, &selection, &c_taken)).unwrap()
            }
            Step::Read { cmds, .. } => s.feed(&answer(&cmds, &selection, &c_taken)).unwrap(),
            other @ (Step::Done(_) | Step::Snapshot(_)) => panic!("expected a plan, got {other:?}"),
        }
    }
}

#[test]
fn a_member_taken_before_its_groups_read_is_left_out_guessed_or_not() {
    let plain = stalled_in_groups_with_c_taken(false);
    assert_eq!(stalled_in_groups_with_c_taken(true), plain);
    let second: Vec<String> = plain[1].iter().map(|c| format!("{c:?}")).collect();
    assert!(second.iter().all(|c| !c.contains("job:c")), "c was taken: {second:?}");
    assert!(second.iter().any(|c| c.contains("job:d")), "{second:?}");
}

#[test]
fn a_stalled_check_watches_the_lease_marks_of_past_seconds_and_the_rows_of_the_current_one() {
    let mut s = Sweep::new(Kind::Stalled { max_stalled: None }, Keys::new(b"q"), 100);
    s.start();
    let expired = [("a", -5.0), ("b", 1_699_999_998_000.0), ("c", 1_699_999_998_999.0), ("d", 1_699_999_999_999.0), ("e", NOW as f64)];
    let pairs: Vec<Reply> = expired.iter().flat_map(|(m, sc)| [bulk(m), bulk(&sc.to_string())]).collect();
    let (watch, _) = select(&mut s, &[time(), Reply::Array(pairs)]);
    let keys: Vec<&[u8]> = watch.iter().map(Vec::as_slice).collect();
    assert_eq!(
        keys,
        vec![&b"emq:{q}:leases:0"[..], b"emq:{q}:leases:1699999998", b"emq:{q}:leases:1699999999", b"emq:{q}:job:e"],
        "one mark a past second (a score below 0 in second 0), the rows of the current second"
    );
}

#[test]
fn lease_buckets() {
    use emq_plan::protocol::guard::lease_bucket;
    assert_eq!(lease_bucket(f64::NEG_INFINITY), 0);
    assert_eq!(lease_bucket(-1.5), 0);
    assert_eq!(lease_bucket(999.9), 0);
    assert_eq!(lease_bucket(1000.0), 1);
    assert_eq!(lease_bucket(1_700_000_000_123.0), 1_700_000_000);
    assert_eq!(lease_bucket(f64::INFINITY), i64::MAX);
}

/// In the server (the module host) a sweep has no guard: no watch step, no
/// re-read under it; the reads and the plan are the guarded call's.
#[test]
fn in_the_server_a_sweep_reads_once_and_watches_nothing() {
    let sel = || members(&[("a", NOW - 5), ("b", NOW - 4)]);
    let rows = [field(None), field(None), Reply::Int(2), Reply::Int(0), Reply::Int(0), Reply::Int(0)];
    // The guarded promote, for comparison: the watch, then GET promotions again.
    let mut guarded = promote();
    guarded.start();
    let cmds = select_promote(&mut guarded, &[time(), sel()]);
    let want = writes(guarded.feed(&[[promotions()].as_slice(), &rows].concat()).unwrap());

    let mut s = Sweep::in_server(Kind::Promote, Keys::new(b"q"), 10);
    s.start();
    let (watch, in_server_cmds) = read(s.feed(&[time(), sel(), promotions()]).unwrap());
    assert!(watch.is_empty(), "nothing is watched");
    assert_eq!(in_server_cmds, cmds, "the same reads, without the re-read");
    assert_eq!(writes(s.feed(&rows).unwrap()), want, "the same plan");

    let mut s = Sweep::in_server(Kind::Stalled { max_stalled: Some(1) }, Keys::new(b"q"), 10);
    s.start();
    let (watch, cmds) = read(s.feed(&[time(), sel()]).unwrap());
    assert!(watch.is_empty());
    assert_eq!(cmds[0], cmd(&["HMGET", "emq:{q}:job:a", "lane", "stalls", "wait", "cancel", "keep", "priority"]), "no ZRANGE again first");
}

// -- a bare selection (`Sweep::bare_selection`) -------------------------------------

fn bare(batch: u64) -> Sweep {
    Sweep::new(Kind::Promote, Keys::new(b"q"), batch).bare_selection(true)
}

/// `ZRANGE` without scores: the members.
fn ids(items: &[&str]) -> Reply {
    Reply::Array(items.iter().map(|m| bulk(m)).collect())
}

#[test]
fn a_bare_selection_reads_members_and_three_probes() {
    let mut s = bare(3);
    let (watch, cmds) = read(s.start());
    assert!(watch.is_empty());
    let z = "emq:{q}:schedule";
    assert_eq!(
        cmds,
        vec![
            cmd(&["TIME"]),
            cmd(&["ZRANGE", z, "0", "2"]),
            cmd(&["ZRANGE", z, "0", "0", "WITHSCORES"]),
            cmd(&["ZRANGE", z, "2", "2", "WITHSCORES"]),
            cmd(&["ZRANGE", z, "-1", "-1", "WITHSCORES"]),
            cmd(&["GET", "emq:{q}:promotions"]),
        ]
    );
    // Only a promote of one transaction, from the client, reads bare.
    let scored = |mut s: Sweep| read(s.start()).1.len();
    assert_eq!(scored(Sweep::grouped(Kind::Promote, Keys::new(b"q"), 3, 2).bare_selection(true)), 3);
    assert_eq!(scored(Sweep::in_server(Kind::Promote, Keys::new(b"q"), 3).bare_selection(true)), 3);
    assert_eq!(scored(Sweep::new(Kind::Stalled { max_stalled: None }, Keys::new(b"q"), 3).bare_selection(true)), 2);
}

/// Feeds a bare selection of `sel` with its probes; gives the next step.
fn feed_bare(s: &mut Sweep, sel: &[&str], first: Reply, last: Reply, tail: Reply) -> Step {
    s.start();
    s.feed(&[time(), ids(sel), first, last, tail, promotions()]).unwrap()
}

/// What a scored selection of the same members plans (the reads under the
/// watch answered alike: every row flat).
fn plan_of(s: &mut Sweep, step: Step, n: usize) -> Vec<Cmd> {
    let (w, cmds) = read(step);
    assert_eq!(w, vec![b"emq:{q}:promotions".to_vec()]);
    assert_eq!(cmds[0], cmd(&["GET", "emq:{q}:promotions"]));
    let mut replies = vec![promotions()];
    replies.extend((0..n).map(|_| field(None)));
    replies.push(Reply::Int(n as i64));
    replies.extend([Reply::Int(0), Reply::Int(0), Reply::Int(0)]);
    writes(s.feed(&replies).unwrap())
}

#[test]
fn a_bare_selection_whose_last_member_is_due_takes_every_member() {
    // A full batch: the probe at rank N-1 names the last member.
    let mut s = bare(3);
    let step = feed_bare(&mut s, &["a", "b", "c"], members(&[("a", NOW - 9)]), members(&[("c", NOW)]), members(&[("z", NOW + 9)]));
    let w = plan_of(&mut s, step, 3);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b", "c"]));
    assert_eq!(s.timing(), (NOW, Some(NOW as f64)), "a full batch: more may be due");
    assert_eq!(s.next_in_us(), Some(0.0), "due now, not 456 µs ago");
    // Fewer than N there: the probe at rank -1 names the last member.
    let mut s = bare(5);
    let step = feed_bare(&mut s, &["a", "b"], members(&[("a", NOW - 9)]), members(&[]), members(&[("b", NOW - 1)]));
    let w = plan_of(&mut s, step, 2);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b"]));
    assert_eq!(s.timing(), (NOW, None), "nothing past the selection");
}

#[test]
fn a_bare_selection_whose_first_member_is_not_due_takes_none() {
    let mut s = bare(3);
    let step = feed_bare(&mut s, &["a", "b"], members(&[("a", NOW + 5)]), members(&[]), members(&[("b", NOW + 6)]));
    assert_eq!(step, Step::Done(Outcome::Promoted(0)));
    assert_eq!(s.timing(), (NOW, Some((NOW + 5) as f64)), "the worker parks until the first due time");
    // The clock read 123,456 µs into its second: 456 µs into its millisecond.
    assert_eq!(s.next_in_us(), Some(5000.0 - 456.0), "counted from the reading, not from its millisecond");
    let mut s = bare(3);
    assert_eq!(feed_bare(&mut s, &[], members(&[]), members(&[]), members(&[])), Step::Done(Outcome::Promoted(0)));
    assert_eq!(s.timing(), (NOW, None));
    assert_eq!(s.next_in_us(), None);
}

#[test]
fn a_bare_selection_cut_by_now_or_moved_under_it_is_read_again_with_scores() {
    let scored = vec![cmd(&["ZRANGE", "emq:{q}:schedule", "0", "2", "WITHSCORES"])];
    // `now` falls between the first member and the last.
    let mut s = bare(3);
    let step = feed_bare(&mut s, &["a", "b", "c"], members(&[("a", NOW - 1)]), members(&[("c", NOW + 1)]), members(&[("c", NOW + 1)]));
    assert_eq!(read(step), (vec![], scored.clone()));
    let step = s.feed(&[members(&[("a", NOW - 1), ("b", NOW), ("c", NOW + 1)])]).unwrap();
    let w = plan_of(&mut s, step, 2);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b"]));
    assert_eq!(s.timing(), (NOW, Some((NOW + 1) as f64)));
    // A producer inserted a member between the read and the probes: the probe
    // names another member, whose score says nothing of `c`'s.
    let mut s = bare(3);
    let step = feed_bare(&mut s, &["a", "b", "c"], members(&[("a", NOW - 1)]), members(&[("x", NOW - 1)]), members(&[("z", NOW + 9)]));
    assert_eq!(read(step), (vec![], scored.clone()));
    // Fewer than N, and the last one not due.
    let mut s = bare(3);
    let step = feed_bare(&mut s, &["a", "b"], members(&[("a", NOW - 1)]), members(&[]), members(&[("b", NOW + 1)]));
    assert_eq!(read(step), (vec![], scored));
}

#[test]
fn a_bare_selection_of_the_wrong_type_is_a_layout_error() {
    let mut s = bare(3);
    s.start();
    let e = s.feed(&[time(), wrongtype(), wrongtype(), wrongtype(), wrongtype(), promotions()]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout, "{e:?}");
}

// -- a sorted selection (`Sweep::sorted_selection`) ---------------------------------

fn sorted(batch: u64) -> Sweep {
    bare(batch).sorted_selection(true)
}

/// `SORT_RO … GET # GET …->state GET …->lane` of `(member, state, lane)`.
fn sorted_rows(items: &[(&str, Option<&str>, Option<&str>)]) -> Reply {
    Reply::Array(items.iter().flat_map(|(m, st, l)| [bulk(m), opt(*st), opt(*l)]).collect())
}

/// Feeds a sorted selection; the lists' types all right. Gives the next step.
fn feed_sorted(s: &mut Sweep, rows: Reply, first: Reply, last: Reply, tail: Reply) -> Step {
    s.start();
    s.feed(&[time(), rows, first, last, tail, promotions(), Reply::Int(0), Reply::Int(0), Reply::Int(0)]).unwrap()
}

#[test]
fn a_sorted_selection_reads_members_and_rows_under_the_watch_in_one_step() {
    let mut s = sorted(3);
    let (watch, cmds) = read(s.start());
    assert_eq!(watch, vec![b"emq:{q}:promotions".to_vec()], "everything it reads is read under the watch");
    let z = "emq:{q}:schedule";
    assert_eq!(
        cmds,
        vec![
            cmd(&["TIME"]),
            cmd(&[
                "SORT_RO",
                z,
                "BY",
                "nosort",
                "LIMIT",
                "0",
                "3",
                "GET",
                "#",
                "GET",
                "emq:{q}:job:*->state",
                "GET",
                "emq:{q}:job:*->lane"
            ]),
            cmd(&["ZRANGE", z, "0", "0", "WITHSCORES"]),
            cmd(&["ZRANGE", z, "2", "2", "WITHSCORES"]),
            cmd(&["ZRANGE", z, "-1", "-1", "WITHSCORES"]),
            cmd(&["GET", "emq:{q}:promotions"]),
            cmd(&["LLEN", "emq:{q}:pending"]),
            cmd(&["LLEN", "emq:{q}:ring"]),
            cmd(&["LLEN", "emq:{q}:wake"]),
        ]
    );
    // Only over a bare selection, and not where the prefix holds the pattern's `*`.
    let first = |mut s: Sweep| read(s.start()).1[1].clone();
    assert_eq!(first(Sweep::new(Kind::Promote, Keys::new(b"q"), 3).sorted_selection(true)), cmd(&["ZRANGE", z, "0", "2", "WITHSCORES"]));
    assert_eq!(first(Sweep::grouped(Kind::Promote, Keys::new(b"q"), 3, 2).bare_selection(true).sorted_selection(true)).name(), b"ZRANGE");
    assert_eq!(first(Sweep::in_server(Kind::Promote, Keys::new(b"q"), 3).bare_selection(true).sorted_selection(true)).name(), b"ZRANGE");
    let star = Sweep::new(Kind::Promote, Keys::new(b"a*b"), 3).bare_selection(true).sorted_selection(true);
    assert_eq!(first(star), cmd(&["ZRANGE", "emq:{a*b}:schedule", "0", "2"]));
}

#[test]
fn a_sorted_selection_all_due_plans_at_once() {
    let mut s = sorted(3);
    let rows = sorted_rows(&[("a", Some("scheduled"), None), ("b", Some("scheduled"), None), ("c", Some("scheduled"), None)]);
    let step = feed_sorted(&mut s, rows, members(&[("a", NOW - 9)]), members(&[("c", NOW)]), members(&[("z", NOW + 9)]));
    let w = writes(step);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b", "c"]));
    assert_eq!(w[1], cmd(&["RPUSH", "emq:{q}:pending", "a", "b", "c"]));
    assert!(w.contains(&cmd(&["HSET", "emq:{q}:job:b", "state", "pending"])));
    assert_eq!(s.timing(), (NOW, Some(NOW as f64)), "a full batch: more may be due");
    // None due, or none there.
    let mut s = sorted(3);
    let rows = sorted_rows(&[("a", Some("scheduled"), None)]);
    let step = feed_sorted(&mut s, rows, members(&[("a", NOW + 5)]), members(&[]), members(&[("a", NOW + 5)]));
    assert_eq!(step, Step::Done(Outcome::Promoted(0)));
    assert_eq!(s.timing(), (NOW, Some((NOW + 5) as f64)));
}

#[test]
fn a_sorted_selection_types_rows_with_neither_field_and_reads_lanes() {
    // `b` has neither field: a ghost, another type, or a hash without them.
    let mut s = sorted(3);
    let rows = sorted_rows(&[("a", Some("scheduled"), Some("l1")), ("b", None, None), ("c", None, Some("l1"))]);
    let step = feed_sorted(&mut s, rows, members(&[("a", NOW - 9)]), members(&[("c", NOW)]), members(&[("c", NOW)]));
    assert_eq!(read(step), (vec![], vec![cmd(&["TYPE", "emq:{q}:job:b"])]));
    // A ghost: the lane's control and length are read next, under their watch.
    let (watch, cmds) = read(s.feed(&[bulk("none")]).unwrap());
    assert_eq!(watch, vec![b"emq:{q}:lanectl:l1".to_vec()]);
    assert_eq!(cmds[1], cmd(&["LLEN", "emq:{q}:lane:l1"]));
    let w = writes(s.feed(&[fields(&[None, None, None, None]), Reply::Int(0)]).unwrap());
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b", "c"]), "the ghost leaves schedule");
    assert_eq!(w[1], cmd(&["RPUSH", "emq:{q}:lane:l1", "a", "c"]));
    assert!(!w.contains(&cmd(&["HSET", "emq:{q}:job:b", "state", "pending"])), "a ghost's row is not written");
    // A row of another type: a layout error, before anything is written.
    let mut s = sorted(2);
    let rows = sorted_rows(&[("a", Some("scheduled"), None), ("b", None, None)]);
    let step = feed_sorted(&mut s, rows, members(&[("a", NOW - 9)]), members(&[("b", NOW)]), members(&[("b", NOW)]));
    read(step);
    let e = s.feed(&[bulk("string")]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout, "{e:?}");
    // A hash without either field is a live flat row.
    let mut s = sorted(1);
    let step =
        feed_sorted(&mut s, sorted_rows(&[("b", None, None)]), members(&[("b", NOW)]), members(&[("b", NOW)]), members(&[("b", NOW)]));
    read(step);
    let w = writes(s.feed(&[bulk("hash")]).unwrap());
    assert_eq!(w[1], cmd(&["RPUSH", "emq:{q}:pending", "b"]));
}

#[test]
fn a_sorted_selection_cut_by_now_is_read_again_as_a_bare_one() {
    let mut s = sorted(3);
    let rows = sorted_rows(&[("a", Some("scheduled"), None), ("b", Some("scheduled"), None), ("c", Some("scheduled"), None)]);
    let step = feed_sorted(&mut s, rows, members(&[("a", NOW - 1)]), members(&[("c", NOW + 1)]), members(&[("c", NOW + 1)]));
    assert_eq!(read(step), (vec![], vec![cmd(&["ZRANGE", "emq:{q}:schedule", "0", "2", "WITHSCORES"])]));
    let step = s.feed(&[members(&[("a", NOW - 1), ("b", NOW), ("c", NOW + 1)])]).unwrap();
    let w = plan_of(&mut s, step, 2);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b"]));
}

#[test]
fn a_refused_sort_reads_as_a_bare_selection() {
    let mut s = sorted(3);
    s.start();
    let refused = Reply::Error { code: "ERR".into(), message: "ERR GET option of SORT denied due to insufficient ACL permissions.".into() };
    assert!(s.reads_error(1, &refused), "the sweep reads around a refused SORT itself");
    let noperm = Reply::Error { code: "NOPERM".into(), message: "NOPERM User has no permissions to run the 'sort' command".into() };
    assert!(s.reads_error(1, &noperm));
    let moved = Reply::Error { code: "MOVED".into(), message: "MOVED 1 127.0.0.1:7001".into() };
    assert!(!s.reads_error(1, &moved), "a redirect is the host's");
    assert!(!s.reads_error(2, &refused), "only the SORT's");
    let step = s
        .feed(&[time(), refused, members(&[]), members(&[]), members(&[]), promotions(), Reply::Int(0), Reply::Int(0), Reply::Int(0)])
        .unwrap();
    assert!(!s.reads_error(1, &noperm), "only while it selects");
    assert!(s.sort_refused());
    let (watch, cmds) = read(step);
    assert!(watch.is_empty());
    assert_eq!(cmds[1], cmd(&["ZRANGE", "emq:{q}:schedule", "0", "2"]));
    let step =
        s.feed(&[time(), ids(&["a", "b"]), members(&[("a", NOW - 9)]), members(&[]), members(&[("b", NOW - 1)]), promotions()]).unwrap();
    let w = plan_of(&mut s, step, 2);
    assert_eq!(w[0], cmd(&["ZREM", "emq:{q}:schedule", "a", "b"]));
    // The wrong type is not a refusal: a layout error.
    let mut s = sorted(3);
    s.start();
    let e = s
        .feed(&[time(), wrongtype(), wrongtype(), wrongtype(), wrongtype(), promotions(), Reply::Int(0), Reply::Int(0), Reply::Int(0)])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout, "{e:?}");
    assert!(!s.sort_refused());
    // `pending` of the wrong type, as the selection read it.
    let mut s = sorted(1);
    s.start();
    let e = s
        .feed(&[
            time(),
            sorted_rows(&[("a", Some("s"), None)]),
            members(&[("a", NOW)]),
            members(&[("a", NOW)]),
            members(&[("a", NOW)]),
            promotions(),
            wrongtype(),
            Reply::Int(0),
            Reply::Int(0),
        ])
        .unwrap_err();
    assert_eq!(e.kind, ErrorKind::Layout, "{e:?}");
}

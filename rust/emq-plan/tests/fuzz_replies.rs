//! Every conversation fed random replies of the right count (and the wrong
//! count) refuses or plans, and never panics: the replies come from a server we
//! do not control. A small, dependency-free fuzzer: xorshift over reply shapes
//! biased towards what the reads really return. Each conversation runs twice,
//! once told to `speculate` before every feed: the two must not differ.

use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::{ExtendMany, Held};
use emq_plan::batch::settle_many::{Fate, SettleMany};
use emq_plan::jobs::add::{Add, NewJob, When};
use emq_plan::jobs::claim::Claim;
use emq_plan::jobs::retention::{GetRetention, SetRetention};
use emq_plan::jobs::settle::{Action, Settle};
use emq_plan::lanes::lane_control::{LaneControl, LaneOp};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::reads::{CountsRead, Get, Lanes};
use emq_plan::sweep::{Kind, Sweep};
use emq_plan::{Keys, Reply};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const WORDS: [&str; 12] = ["", "0", "1", "-1", "2", "1.5", "active", "pending", "L", "a", "1700000000123", "hash"];

fn reply(rng: &mut Rng, depth: u32) -> Reply {
    match rng.below(if depth > 2 { 6 } else { 8 }) {
        0 => Reply::Nil,
        1 => Reply::Int(rng.below(5) as i64 - 1),
        2 | 3 => Reply::Bulk(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes().to_vec()),
        4 => Reply::Status(["OK", "none", "hash", "list", "string"][rng.below(5) as usize].into()),
        5 => Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() },
        _ => Reply::Array((0..rng.below(6)).map(|_| reply(rng, depth + 1)).collect()),
    }
}

fn word(rng: &mut Rng) -> Reply {
    Reply::Bulk(WORDS[rng.below(WORDS.len() as u64) as usize].as_bytes().to_vec())
}

/// A reply of the shape the command really gets, with values that vary. A range
/// read again (a sweep's re-read under its watch) mostly repeats the first one.
fn shaped(rng: &mut Rng, cmd: Option<&emq_plan::Cmd>, first_range: &mut Option<Vec<Reply>>, hints: &[Vec<u8>]) -> Reply {
    let Some(cmd) = cmd else { return reply(rng, 0) };
    let argc = cmd.argc();
    if cmd.name() == b"ZRANGE" && rng.below(4) != 0 {
        if let Some(first) = first_range {
            let stop = std::str::from_utf8(cmd.to_args()[3]).ok().and_then(|s| s.parse::<usize>().ok()).unwrap_or(0);
            return Reply::Array(first.iter().take(2 * (stop + 1)).cloned().collect());
        }
    }
    let score = |rng: &mut Rng| Reply::Bulk((1_700_000_000_120 + rng.below(6)).to_string().into_bytes());
    match cmd.name() {
        b"TIME" => Reply::Array(vec![Reply::Bulk(b"1700000000".to_vec()), Reply::Bulk(b"123456".to_vec())]),
        b"ZRANGE" => {
            let items: Vec<Reply> = (0..rng.below(4)).flat_map(|i| [Reply::Bulk(format!("m{i}").into_bytes()), score(rng)]).collect();
            first_range.get_or_insert_with(|| items.clone());
            Reply::Array(items)
        }
        b"SORT_RO" if rng.below(6) == 0 => Reply::Error { code: "ERR".into(), message: "ERR GET option of SORT denied".into() },
        b"SORT_RO" => Reply::Array(
            (0..rng.below(4))
                .flat_map(|i| {
                    let m = Reply::Bulk(format!("m{i}").into_bytes());
                    [m, if rng.below(3) == 0 { Reply::Nil } else { word(rng) }, if rng.below(2) == 0 { Reply::Nil } else { word(rng) }]
                })
                .collect(),
        ),
        b"HGET" if !hints.is_empty() && rng.below(2) == 0 => Reply::Bulk(hints[rng.below(hints.len() as u64) as usize].clone()),
        b"HGET" => {
            if rng.below(3) == 0 {
                Reply::Nil
            } else {
                word(rng)
            }
        }
        // `P promotions` (a promote reads it beside its selection and again under its watch): mostly unchanged.
        b"GET" if rng.below(4) != 0 => Reply::Bulk(b"7".to_vec()),
        b"HGETALL" => Reply::Array((0..rng.below(4)).flat_map(|_| [word(rng), word(rng)]).collect()),
        b"SCAN" => {
            let cursor = if rng.below(3) == 0 { "17" } else { "0" };
            let keys = (0..rng.below(3)).map(|i| Reply::Bulk(format!("emq:{{q}}:lane:L{i}").into_bytes())).collect();
            Reply::Array(vec![Reply::Bulk(cursor.as_bytes().to_vec()), Reply::Array(keys)])
        }
        b"HMGET" => Reply::Array((2..argc).map(|_| if rng.below(3) == 0 { Reply::Nil } else { word(rng) }).collect()),
        b"LRANGE" => Reply::Array((0..rng.below(4)).map(|i| Reply::Bulk(format!("m{i}").into_bytes())).collect()),
        b"TYPE" => Reply::Status(["none", "hash", "string"][rng.below(3) as usize].into()),
        b"EXISTS" => Reply::Int(rng.below(argc as u64) as i64),
        _ if rng.below(20) == 0 => Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() },
        // A count or length no server gives: the plans' arithmetic must not overflow on it.
        _ if rng.below(16) == 0 => Reply::Int([i64::MIN, i64::MAX][rng.below(2) as usize]),
        _ => Reply::Int(rng.below(3) as i64),
    }
}

static PLANNED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Trim steps reached (a read that watches `dead`), and adds answered with no writes (all landed).
static TRIMS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
static LANDED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// Groups of a call committed with more to come.
static GROUPS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Drives two copies of a conversation with the same replies, one of them told to
/// `speculate` before each feed: they must answer alike at every step.
fn drive<C: Conversation>(rng: &mut Rng, make: impl Fn() -> C)
where
    C::Out: std::fmt::Debug,
{
    drive_with(rng, make, &[]);
}

/// `drive`, with values an `HGET` may give back (a digest the conversation knows).
fn drive_with<C: Conversation>(rng: &mut Rng, make: impl Fn() -> C, hints: &[Vec<u8>])
where
    C::Out: std::fmt::Debug,
{
    let (mut c, mut twin) = (make(), make());
    let mut step = c.start();
    assert_eq!(format!("{step:?}"), format!("{:?}", twin.start()));
    let mut first_range = None;
    for _ in 0..24 {
        match step {
            Step::Done(_) => {
                if c.verb() == "EMQ.ADD" {
                    LANDED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                return;
            }
            Step::Read { cmds, watch } => {
                if watch == [b"emq:{q}:dead".to_vec()] {
                    TRIMS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                // Mostly the right count; sometimes one off.
                let n = match rng.below(10) {
                    0 => cmds.len() + 1,
                    1 => cmds.len().saturating_sub(1),
                    _ => cmds.len(),
                };
                let replies: Vec<Reply> = (0..n)
                    .map(|i| if rng.below(10) == 0 { reply(rng, 0) } else { shaped(rng, cmds.get(i), &mut first_range, hints) })
                    .collect();
                twin.speculate();
                let (got, twin_got) = (c.feed(&replies), twin.feed(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a step");
                match got {
                    Ok(next) => step = next,
                    Err(_) => return,
                }
            }
            Step::Exec(writes) => {
                PLANNED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if rng.below(8) == 0 {
                    // The guard aborted it.
                    let (next, twin_next) = (c.aborted(), twin.aborted());
                    assert_eq!(format!("{next:?}"), format!("{twin_next:?}"));
                    match next {
                        Some(next) => step = next,
                        None => return,
                    }
                    continue;
                }
                let replies: Vec<Reply> = (0..writes.len()).map(|_| reply(rng, 1)).collect();
                let (got, twin_got) = (c.finish(&replies), twin.finish(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed an outcome");
                return;
            }
            Step::Snapshot(cmds) => {
                let replies: Vec<Reply> = (0..cmds.len()).map(|_| reply(rng, 1)).collect();
                let (got, twin_got) = (c.finish(&replies), twin.finish(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed an outcome");
                return;
            }
            Step::Group { writes, cmds, .. } => {
                GROUPS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                twin.speculate();
                if rng.below(6) == 0 {
                    let (got, twin_got) = (c.committed(None), twin.committed(None));
                    assert_eq!(format!("{got:?}"), format!("{twin_got:?}"));
                    let (next, twin_next) = (c.aborted(), twin.aborted());
                    assert_eq!(format!("{next:?}"), format!("{twin_next:?}"));
                    match next {
                        Some(next) => step = next,
                        None => return,
                    }
                    continue;
                }
                let exec: Vec<Reply> = (0..writes.len()).map(|_| reply(rng, 1)).collect();
                let (got, twin_got) = (c.committed(Some(&exec)), twin.committed(Some(&exec)));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a group's outcome");
                if got.is_err() {
                    return;
                }
                let replies: Vec<Reply> = (0..cmds.len())
                    .map(|i| if rng.below(10) == 0 { reply(rng, 0) } else { shaped(rng, cmds.get(i), &mut first_range, hints) })
                    .collect();
                let (got, twin_got) = (c.feed(&replies), twin.feed(&replies));
                assert_eq!(format!("{got:?}"), format!("{twin_got:?}"), "speculating changed a step");
                match got {
                    Ok(next) => step = next,
                    Err(_) => return,
                }
            }
        }
    }
}

#[test]
fn no_conversation_panics_on_any_reply() {
    // EMQ_FUZZ_ITERS and EMQ_FUZZ_SEED run it longer or elsewhere.
    let iters: u64 = std::env::var("EMQ_FUZZ_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(20_000);
    let seed: u64 = std::env::var("EMQ_FUZZ_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(0x9E37_79B9_7F4A_7C15);
    let mut rng = Rng(seed | 1);
    let keys = || Keys::new(b"q");
    for i in 0..iters {
        let batch = 1 + rng.below(4);
        match i % 9 {
            0 => {
                let group = 1 + rng.below(3) as usize;
                let (bare, sorted) = (rng.below(2) == 0, rng.below(2) == 0);
                drive(&mut rng, || Sweep::grouped(Kind::Promote, keys(), batch, group).bare_selection(bare).sorted_selection(sorted));
            }
            1 => {
                let max_stalled = Some(rng.below(3));
                let group = 1 + rng.below(3) as usize;
                let cap = [None, Some(1), Some(2)][rng.below(3) as usize];
                drive(&mut rng, || Sweep::grouped(Kind::Stalled { max_stalled }, keys(), batch, group).watch_cap(cap));
            }
            2 => {
                let jobs: Vec<NewJob> = (0..=rng.below(3))
                    .map(|j| NewJob {
                        priority: 0,
                        id: (j % 2 == 0).then(|| format!("id{j}").into_bytes()),
                        data: vec![],
                        when: if rng.below(2) == 0 { When::Delay(rng.below(3)) } else { When::At(rng.below(3) as i64) },
                        lane: (rng.below(2) == 0).then(|| b"L".to_vec()),
                        max_attempts: 1,
                        keep: None,
                        unique: None,
                    })
                    .collect();
                let digests: Vec<Vec<u8>> = jobs.iter().map(|j| emq_plan::jobs::add::digest(j).into_bytes()).collect();
                drive_with(&mut rng, || Add::new(keys(), jobs.clone(), (1, 0)).unwrap(), &digests);
            }
            3 => {
                let n = 1 + rng.below(4);
                drive(&mut rng, || Claim::new(keys(), n, 1000, vec![b"t".to_vec(); n as usize]).unwrap());
            }
            4 => {
                let action = match rng.below(3) {
                    0 => Action::Extend { lease_ms: 10 },
                    1 => Action::COMPLETE,
                    _ => Action::Fail { error: b"e".to_vec(), retry_in_ms: (rng.below(2) == 0).then_some(0), detail: None, retry: true },
                };
                let lane = (rng.below(2) == 0).then(|| b"L".to_vec());
                if rng.below(4) == 0 {
                    // Many extended at once.
                    let held = vec![
                        Held { id: b"a".to_vec(), token: b"1".to_vec(), lane: lane.clone() },
                        Held { id: b"b".to_vec(), token: b"1".to_vec(), lane: None },
                    ];
                    match rng.below(3) {
                        0 => drive(&mut rng, || ExtendMany::new(keys(), held.clone(), 10).unwrap()),
                        1 => drive(&mut rng, || CompleteMany::new(keys(), held.clone()).unwrap()),
                        _ => {
                            // Completed and failed at once (a fail ready at once, or after a backoff).
                            let fates = [
                                Fate::Fail {
                                    error: b"e".to_vec(),
                                    retry_in_ms: (rng.below(2) == 0).then_some(0),
                                    jitter: 0.5,
                                    detail: None,
                                    retry: true,
                                },
                                if rng.below(2) == 0 {
                                    Fate::COMPLETE
                                } else {
                                    Fate::Fail { error: vec![], retry_in_ms: None, jitter: 0.1, detail: None, retry: true }
                                },
                            ];
                            let items: Vec<_> = held.iter().cloned().zip(fates).collect();
                            drive(&mut rng, || SettleMany::new(keys(), items.clone()).unwrap());
                        }
                    }
                } else {
                    drive(&mut rng, || Settle::new(keys(), b"a".to_vec(), b"1".to_vec(), lane.clone(), action.clone(), 0.5).unwrap());
                }
            }
            5 => {
                let op = [LaneOp::Pause, LaneOp::Resume, LaneOp::Limit(2)][rng.below(3) as usize];
                drive(&mut rng, || LaneControl::new(keys(), b"L".to_vec(), op).unwrap());
            }
            6 => drive(&mut rng, || Sweep::new(Kind::Stalled { max_stalled: None }, keys(), batch)),
            7 => match rng.below(9) {
                0 => drive(&mut rng, || Get::new(keys(), b"a".to_vec()).unwrap()),
                1 => drive(&mut rng, || Lanes::new(keys())),
                2 => drive(&mut rng, || CountsRead::new(keys())),
                // SPEC §13's calls.
                3 => drive(&mut rng, || emq_plan::jobs::cancel::Cancel::new(keys(), b"a".to_vec()).unwrap()),
                4 => drive(&mut rng, || {
                    emq_plan::jobs::waiters::Await::new(keys(), vec![b"a".to_vec(), b"b".to_vec()], b"w".to_vec()).unwrap()
                }),
                5 => drive(&mut rng, || {
                    emq_plan::jobs::progress::Progress::new(keys(), b"a".to_vec(), b"1".to_vec(), None, b"0.5".to_vec()).unwrap()
                }),
                6 => drive(&mut rng, || emq_plan::reads::Status::new(keys(), vec![b"a".to_vec()]).unwrap()),
                7 => drive(&mut rng, || emq_plan::reads::cancels::Cancels::new(keys(), Some(5))),
                _ => drive(&mut rng, || GetRetention::new(keys())),
            },
            _ => {
                let v = |rng: &mut Rng| [None, Some(-1), Some(0), Some(5)][rng.below(4) as usize];
                let (a, b, c) = (v(&mut rng), v(&mut rng), v(&mut rng));
                drive(&mut rng, || SetRetention::new(keys(), a, b, c).unwrap());
            }
        }
    }
    // The fuzzer must reach plans, not only early refusals.
    let planned = PLANNED.load(std::sync::atomic::Ordering::Relaxed);
    assert!(planned as u64 > iters / 40, "only {planned} of {iters} conversations reached a plan");
    let (trims, landed) = (TRIMS.load(std::sync::atomic::Ordering::Relaxed), LANDED.load(std::sync::atomic::Ordering::Relaxed));
    eprintln!("planned {planned}, trims {trims}, all landed {landed}");
    assert!(trims as u64 > iters / 1000, "only {trims} of {iters} conversations reached the trim of dead");
    assert!(landed as u64 > iters / 1000, "only {landed} of {iters} adds found every job landed");
    let groups = GROUPS.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!("groups committed with more to come {groups}");
    assert!(groups as u64 > iters / 1000, "only {groups} of {iters} sweeps went past a first group");
}

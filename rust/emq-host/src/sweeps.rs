//! Running a sweep: the plan backend (reads, guard, one MULTI/EXEC, retries) and
//! the Lua backend (the reference scripts, by EVALSHA).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use emq_plan::sweep::{is_conflict, Kind, Outcome, Step, Sweep, PROMOTE, STALLED};
use emq_plan::{Cmd, Keys, Reply};

use crate::conn::Conn;
use crate::error::{HostError, HostResult};

pub const PROMOTE_LUA: &str = include_str!("../lua/promote.lua");
pub const STALLED_LUA: &str = include_str!("../lua/stalled.lua");

/// How many times a call starts again after its `EXEC` was aborted (or what it
/// read changed under its watch) before it gives up with a contention error.
pub const MAX_ATTEMPTS: u32 = 32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Plan,
    Lua,
}

pub fn verb(kind: Kind) -> &'static str {
    match kind {
        Kind::Promote => PROMOTE,
        Kind::Stalled { .. } => STALLED,
    }
}

pub fn run(conn: &mut Conn, backend: Backend, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    match backend {
        Backend::Plan => run_plan(conn, kind, queue, batch),
        Backend::Lua => run_lua(conn, kind, queue, batch),
    }
}

/// The plan backend. On servers whose `WATCH` cost grows with the keys already
/// watched (Redis, Valkey before 9: SPEC §9), a call's work is split into
/// transactions of at most `conn.watch_chunk` rows, all with the call's one
/// clock reading; each transaction is atomic and the reply adds them up.
fn run_plan(conn: &mut Conn, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    let keys = Keys::new(queue);
    let chunk = conn.watch_chunk.unwrap_or(batch).min(batch);
    let split = chunk < batch;
    let (mut now, mut left, mut total, mut flat) = (None, batch, None::<Outcome>, false);
    loop {
        let part = left.min(chunk);
        let (outcome, used_now, selected, part_flat) = run_transaction(conn, kind, &keys, part, now, split)?;
        flat |= part_flat;
        total = Some(match total {
            None => outcome,
            Some(t) => merge(t, outcome),
        });
        now = Some(used_now);
        left -= selected;
        if selected < part || left == 0 {
            if split && flat {
                // The flat wake token, last, as one transaction would have pushed it.
                let wake = keys.wake();
                conn.pipeline(&[
                    Cmd::new("MULTI"),
                    Cmd::new("RPUSH").arg(&wake).arg(""),
                    Cmd::new("LTRIM").arg(&wake).arg((-emq_plan::WAKE_MAX).to_string()).arg("-1"),
                    Cmd::new("EXEC"),
                ])?;
            }
            return Ok(total.expect("one transaction ran"));
        }
    }
}

fn merge(a: Outcome, b: Outcome) -> Outcome {
    match (a, b) {
        (Outcome::Promoted(x), Outcome::Promoted(y)) => Outcome::Promoted(x + y),
        (Outcome::Stalled { mut recovered, mut dead }, Outcome::Stalled { recovered: r, dead: d }) => {
            recovered.extend(r);
            dead.extend(d);
            Outcome::Stalled { recovered, dead }
        }
        (a, _) => a,
    }
}

/// One guarded transaction, started again (a new clock reading unless the call
/// already has one) while its `EXEC` aborts. Gives the outcome, the clock
/// reading, how many members it selected, and whether it appended flat rows.
fn run_transaction(
    conn: &mut Conn,
    kind: Kind,
    keys: &Keys,
    batch: u64,
    now: Option<i64>,
    defer_flat_wake: bool,
) -> HostResult<(Outcome, i64, u64, bool)> {
    let mut rng = Jitter::new();
    for attempt in 0..MAX_ATTEMPTS {
        let mut sweep = Sweep::new(kind, keys.clone(), batch);
        if let Some(now) = now {
            sweep = sweep.at(now);
        }
        if defer_flat_wake {
            sweep = sweep.defer_flat_wake();
        }
        match attempt_once(conn, &mut sweep)? {
            Some(outcome) => return Ok((outcome, sweep.now(), sweep.selected_count() as u64, sweep.flat())),
            None => std::thread::sleep(rng.backoff(attempt)),
        }
    }
    Err(HostError::Contention(format!(
        "{}: gave up after {MAX_ATTEMPTS} attempts: other clients kept changing the rows it selected; nothing was written",
        verb(kind)
    )))
}

/// One call: `Some(outcome)`, or `None` when it must start again.
fn attempt_once(conn: &mut Conn, sweep: &mut Sweep) -> HostResult<Option<Outcome>> {
    let mut step = sweep.start();
    let mut watching = false;
    loop {
        let result = match step {
            Step::Done(outcome) => return Ok(Some(outcome)),
            Step::Read { watch, cmds } => {
                let mut all = Vec::with_capacity(cmds.len() + 1);
                if !watch.is_empty() {
                    all.push(Cmd::new("WATCH").args(&watch));
                    watching = true;
                }
                let skip = all.len();
                all.extend(cmds);
                let replies = conn.pipeline(&all)?;
                if let Some(Reply::Error { message, .. }) = replies[..skip].first() {
                    Err(emq_plan::Error::server(sweep.verb(), message))
                } else {
                    sweep.feed(&replies[skip..])
                }
            }
            Step::Exec(writes) => {
                let mut all = Vec::with_capacity(writes.len() + 2);
                all.push(Cmd::new("MULTI"));
                all.extend(writes);
                all.push(Cmd::new("EXEC"));
                let replies = conn.pipeline(&all)?;
                return match replies.last() {
                    Some(Reply::Nil) => Ok(None),
                    Some(Reply::Array(exec)) => Ok(Some(sweep.finish(exec)?)),
                    Some(Reply::Error { message, .. }) => {
                        Err(HostError::Server(format!("{}: EXEC refused: {message}", sweep.verb())))
                    }
                    _ => Err(HostError::Server(format!("{}: EXEC gave no reply", sweep.verb()))),
                };
            }
        };
        match result {
            Ok(next) => step = next,
            Err(e) => {
                if watching {
                    conn.one(Cmd::new("UNWATCH"))?;
                }
                return if is_conflict(&e) { Ok(None) } else { Err(e.into()) };
            }
        }
    }
}

/// The Lua backend: `EVALSHA`, loading the script when the server lacks it.
fn run_lua(conn: &mut Conn, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    let keys = Keys::new(queue);
    let (script, ks, argv) = match kind {
        Kind::Promote => (PROMOTE_LUA, vec![keys.schedule(), keys.pending()], vec![keys.prefix.clone()]),
        Kind::Stalled { max_stalled } => (
            STALLED_LUA,
            vec![keys.active(), keys.pending(), keys.dead()],
            vec![keys.prefix.clone(), max_stalled.map(|m| m.to_string()).unwrap_or_default().into_bytes()],
        ),
    };
    let sha = sha1_hex(script);
    let call = Cmd::new("EVALSHA")
        .arg(&sha)
        .arg(ks.len().to_string())
        .args(&ks)
        .args(&argv)
        .arg(batch.to_string());
    let mut reply = conn.one(call.clone())?;
    if matches!(&reply, Reply::Error { code, .. } if code == "NOSCRIPT") {
        let loaded = conn.one(Cmd::new("SCRIPT").arg("LOAD").arg(script))?;
        if let Reply::Error { .. } = loaded {
            reply = loaded;
        } else {
            reply = conn.one(call)?;
        }
    }
    let verb = verb(kind);
    match reply {
        Reply::Error { code, message } => Err(match code.as_str() {
            "EMQLAYOUT" => HostError::Layout(message.trim_start_matches("EMQLAYOUT ").to_string()),
            "NOPERM" => HostError::Scripting(format!(
                "{verb}: scripting is not allowed for this connection's user ({message}); backend=\"plan\" needs no scripts"
            )),
            _ => HostError::Server(format!("{verb}: {message}")),
        }),
        Reply::Int(n) => Ok(Outcome::Promoted(n)),
        Reply::Array(lists) if lists.len() == 2 => {
            let ids = |r: &Reply| r.as_array().unwrap_or(&[]).iter().filter_map(|x| x.as_bytes().map(<[u8]>::to_vec)).collect();
            Ok(Outcome::Stalled { recovered: ids(&lists[0]), dead: ids(&lists[1]) })
        }
        other => Err(HostError::Server(format!("{verb}: unexpected script reply {other:?}"))),
    }
}

/// Full jitter: a random pause up to a cap that doubles with each attempt.
struct Jitter(u64);

impl Jitter {
    fn new() -> Self {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1);
        let addr = &t as *const u64 as u64;
        Jitter(t ^ addr.rotate_left(32) | 1)
    }

    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn backoff(&mut self, attempt: u32) -> Duration {
        let cap_us = (100u64 << attempt.min(8)).min(20_000);
        Duration::from_micros(self.next() % (cap_us + 1))
    }
}

/// The script's EVALSHA name.
fn sha1_hex(script: &str) -> String {
    sha1_smol::Sha1::from(script).digest().to_string()
}

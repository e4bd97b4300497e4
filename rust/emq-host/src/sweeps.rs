//! Running a sweep: the plan backend (reads, guard, one MULTI/EXEC, retries) and
//! the Lua backend (the reference scripts, by EVALSHA).

use emq_plan::sweep::{Kind, Outcome, Sweep, PROMOTE, STALLED};
use emq_plan::{Cmd, Keys, Reply};

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{HostError, HostResult};

pub const PROMOTE_LUA: &str = include_str!("../lua/promote.lua");
pub const STALLED_LUA: &str = include_str!("../lua/stalled.lua");

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
    let mut selected = (0, 0, false);
    let outcome = drive(conn, || {
        let mut sweep = Sweep::new(kind, keys.clone(), batch);
        if let Some(now) = now {
            sweep = sweep.at(now);
        }
        if defer_flat_wake {
            sweep = sweep.defer_flat_wake();
        }
        Ok(sweep)
    }, |sweep| selected = (sweep.now(), sweep.selected_count() as u64, sweep.flat()))?;
    Ok((outcome, selected.0, selected.1, selected.2))
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

/// The script's EVALSHA name.
fn sha1_hex(script: &str) -> String {
    sha1_smol::Sha1::from(script).digest().to_string()
}

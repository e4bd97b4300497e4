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
/// watched (Redis, Valkey before 9: SPEC §9), a call selects once, then applies
/// its selection in transactions of at most `conn.watch_chunk` rows, all with
/// the call's one clock reading; each transaction is atomic and guarded, and the
/// reply adds them up.
fn run_plan(conn: &mut Conn, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    let keys = Keys::new(queue);
    let chunk = conn.watch_chunk.unwrap_or(batch).min(batch);
    if chunk == batch {
        return run_transaction(conn, kind, &keys, Part::Select { batch, now: None }, false).map(|r| r.0);
    }
    let (mut now, mut ids, mut scores) = (0, vec![], vec![]);
    drive(conn, || Ok(Sweep::select_only(kind, keys.clone(), batch, None)), |s| {
        let (n, i, sc) = s.selection();
        (now, ids, scores) = (n, i.to_vec(), sc.to_vec());
    })?;
    let (mut total, mut flat) = (None::<Outcome>, false);
    for (part_ids, part_scores) in ids.chunks(chunk as usize).zip(scores.chunks(chunk as usize)) {
        let part = Part::Given { now, ids: part_ids.to_vec(), scores: part_scores.to_vec() };
        let (outcome, part_flat) = run_transaction(conn, kind, &keys, part, true)?;
        flat |= part_flat;
        total = Some(match total {
            None => outcome,
            Some(t) => merge(t, outcome),
        });
    }
    if flat {
        // The flat wake token, last, as one transaction would have pushed it.
        let wake = keys.wake();
        conn.pipeline(&[
            Cmd::new("MULTI"),
            Cmd::new("RPUSH").arg(&wake).arg(""),
            Cmd::new("LTRIM").arg(&wake).arg((-emq_plan::WAKE_MAX).to_string()).arg("-1"),
            Cmd::new("EXEC"),
        ])?;
    }
    Ok(total.unwrap_or(match kind {
        Kind::Promote => Outcome::Promoted(0),
        Kind::Stalled { .. } => Outcome::Stalled { recovered: vec![], dead: vec![] },
    }))
}

/// What one transaction works on.
#[derive(Clone)]
enum Part {
    /// Its own selection (at the call's clock reading, if it has one).
    Select { batch: u64, now: Option<i64> },
    /// Members the call selected; if they changed before the watch, the
    /// transaction selects again, as many, at the call's clock reading.
    Given { now: i64, ids: Vec<Vec<u8>>, scores: Vec<f64> },
}

/// One guarded transaction, started again while its `EXEC` aborts. Gives the
/// outcome and whether it appended flat rows.
fn run_transaction(conn: &mut Conn, kind: Kind, keys: &Keys, part: Part, defer_flat_wake: bool) -> HostResult<(Outcome, bool)> {
    let mut flat = false;
    let mut first = true;
    let outcome = drive(
        conn,
        || {
            let sweep = match (&part, std::mem::replace(&mut first, false)) {
                (Part::Select { batch, now: None }, _) => Sweep::new(kind, keys.clone(), *batch),
                (Part::Select { batch, now: Some(now) }, _) => Sweep::new(kind, keys.clone(), *batch).at(*now),
                (Part::Given { now, ids, scores }, true) => Sweep::new(kind, keys.clone(), ids.len() as u64).preselected(*now, ids.clone(), scores.clone()),
                (Part::Given { now, ids, .. }, false) => Sweep::new(kind, keys.clone(), ids.len() as u64).at(*now),
            };
            Ok(if defer_flat_wake { sweep.defer_flat_wake() } else { sweep })
        },
        |sweep| flat = sweep.flat(),
    )?;
    Ok((outcome, flat))
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

//! Running a sweep: the plan backend (reads, guard, one MULTI/EXEC, retries) and
//! the Lua backend (the reference scripts, by EVALSHA).

use std::sync::OnceLock;

use emq_plan::sweep::{Kind, Outcome, Sweep};
use emq_plan::{Cmd, Keys, Reply};

use crate::conn::Conn;
use crate::drive::drive;
use crate::error::{HostError, HostResult};

pub const PROMOTE_LUA: &str = concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/promote.lua"));
pub const STALLED_LUA: &str = concat!(include_str!("../lua/prelude.lua"), include_str!("../lua/stalled.lua"));

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Plan,
    Lua,
}

pub fn run(conn: &mut Conn, backend: Backend, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    match backend {
        Backend::Plan => run_plan(conn, kind, queue, batch),
        Backend::Lua => run_lua(conn, kind, queue, batch),
    }
}

/// The plan backend: one guarded transaction, started again (a new call with
/// a new clock reading) while its `EXEC` aborts.
///
/// On Redis, and Valkey before 9, `WATCH` compares each new key with those
/// already watched (SPEC §9), so a batch of 1,000 costs about 6 µs of server
/// CPU per row there, against 0.7 µs at 100: keep batches near 100 on those
/// servers. Splitting a call into smaller transactions would be cheaper, but
/// a call would no longer act at one instant, all or nothing.
fn run_plan(conn: &mut Conn, kind: Kind, queue: &[u8], batch: u64) -> HostResult<Outcome> {
    run_plan_timed(conn, kind, queue, batch).map(|(outcome, _)| outcome)
}

/// The plan backend, with the call's clock reading and the next score it saw
/// (`Sweep::timing`): a worker parks until then without reading again.
pub fn run_plan_timed(conn: &mut Conn, kind: Kind, queue: &[u8], batch: u64) -> HostResult<(Outcome, (i64, Option<f64>))> {
    let keys = Keys::new(queue);
    let mut timing = (0, None);
    let outcome = drive(conn, || Ok(Sweep::new(kind, keys.clone(), batch)), |s| timing = s.timing())?;
    Ok((outcome, timing))
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
    let sha = script_sha(kind);
    let call = Cmd::new("EVALSHA")
        .arg(sha)
        .arg(ks.len().to_string())
        .args(&ks)
        .args(&argv)
        .arg(batch.to_string());
    let mut reply = conn.one_write(call.clone())?;
    if matches!(&reply, Reply::Error { code, .. } if code == "NOSCRIPT") {
        let loaded = conn.one(Cmd::new("SCRIPT").arg("LOAD").arg(script))?;
        if let Reply::Error { .. } = loaded {
            reply = loaded;
        } else {
            reply = conn.one_write(call)?;
        }
    }
    let verb = kind.verb();
    match reply {
        Reply::Error { code, message } => Err(match code.as_str() {
            "EMQLAYOUT" => HostError::Layout(message.trim_start_matches("EMQLAYOUT ").to_string()),
            "NOPERM" if is_script_command_denied(&message) => HostError::Scripting(format!(
                "{verb}: scripting is not allowed for this connection's user ({message}); backend=\"plan\" needs no scripts"
            )),
            _ => HostError::classify(verb, &code, &message),
        }),
        Reply::Int(n) => Ok(Outcome::Promoted(n)),
        Reply::Array(lists) if lists.len() == 2 => {
            let ids = |r: &Reply| r.as_array().unwrap_or(&[]).iter().filter_map(|x| x.as_bytes().map(<[u8]>::to_vec)).collect();
            Ok(Outcome::Stalled { recovered: ids(&lists[0]), dead: ids(&lists[1]) })
        }
        other => Err(HostError::Server(format!("{verb}: unexpected script reply {other:?}"))),
    }
}

/// Whether a `NOPERM` is about the scripting commands themselves (not a key or
/// command a script touched).
fn is_script_command_denied(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    ["'evalsha'", "'script|load'", "'script'", "'eval'"].iter().any(|c| m.contains(c))
}

/// The script's EVALSHA name, hashed once per process.
fn script_sha(kind: Kind) -> &'static str {
    static PROMOTE_SHA: OnceLock<String> = OnceLock::new();
    static STALLED_SHA: OnceLock<String> = OnceLock::new();
    let (cell, script) = match kind {
        Kind::Promote => (&PROMOTE_SHA, PROMOTE_LUA),
        Kind::Stalled { .. } => (&STALLED_SHA, STALLED_LUA),
    };
    cell.get_or_init(|| sha1_smol::Sha1::from(script).digest().to_string())
}

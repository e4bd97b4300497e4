//! Driving a plan's conversation inside the server. A module command runs alone
//! (nothing else runs between its reads and its writes), so the host needs no
//! `WATCH`: a `Step::Watch` is skipped, the re-reads under it find what the
//! first reads found, and the transaction's writes run one after another, each
//! propagated to replicas and the AOF as itself (the server wraps them in one
//! `MULTI`/`EXEC`), so a replica without the module applies exactly them.
//!
//! Most commands go through `RedisModule_Call`, which parses and runs them as a
//! client's. The ones a sweep sends per row (`HGET`, `HMGET`, `EXISTS`, `HSET`)
//! are done with the key API instead, with the same replies, errors, keyspace
//! events and propagation: a call re-parses a command and builds its reply,
//! which costs more than the work itself at a few fields a row.

use emq_plan::conversation::{Conversation, Step};
use emq_plan::error::{Error, Result};
use emq_plan::{Cmd, Reply};

use crate::ffi::{self, Ctx};

/// Runs `c` to its end.
pub fn run<C: Conversation>(ctx: *mut Ctx, c: &mut C) -> Result<C::Out> {
    let mut step = c.start();
    loop {
        step = match step {
            Step::Done(out) => return Ok(out),
            Step::Watch(_) => c.feed(&[])?,
            Step::Read { cmds, .. } => {
                let replies: Vec<Reply> = cmds.iter().map(|cmd| one(ctx, cmd, false)).collect();
                c.feed(&replies)?
            }
            Step::Exec(writes) => {
                let replies = apply(ctx, c.verb(), &writes)?;
                return c.finish(&replies);
            }
            Step::Group { writes, cmds, .. } => {
                let replies = apply(ctx, c.verb(), &writes)?;
                c.committed(Some(&replies))?;
                let replies: Vec<Reply> = cmds.iter().map(|cmd| one(ctx, cmd, false)).collect();
                c.feed(&replies)?
            }
        };
    }
}

/// The writes in order. Every input check was made before the first one (SPEC
/// §5, §6), so an error here is the server's (out of memory): the writes stop
/// there, as a script's do.
fn apply(ctx: *mut Ctx, verb: &str, writes: &[Cmd]) -> Result<Vec<Reply>> {
    let mut replies = Vec::with_capacity(writes.len());
    for w in writes {
        match one(ctx, w, true) {
            Reply::Error { message, .. } => return Err(Error::server(verb, message)),
            r => replies.push(r),
        }
    }
    Ok(replies)
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// One command: a row command by the key API, any other by `RedisModule_Call`.
fn one(ctx: *mut Ctx, cmd: &Cmd, write: bool) -> Reply {
    let args = cmd.to_args();
    let Some((name, rest)) = args.split_first() else { return error("ERR empty command") };
    match (name.to_ascii_uppercase().as_slice(), rest) {
        (b"HGET", [_, _]) if !write => return hget(ctx, rest).map_or_else(|e| e, |mut v| v.pop().unwrap_or(Reply::Nil)),
        (b"HMGET", [_, _, ..]) if !write => return hget(ctx, rest).map_or_else(|e| e, Reply::Array),
        (b"EXISTS", [_, ..]) if !write => return exists(ctx, rest),
        (b"HSET", [_, _, _, ..]) if write && rest.len() % 2 == 1 => return hset(ctx, rest),
        _ => {}
    }
    let r = ffi::call(ctx, name, rest, write);
    match r.get() {
        Some(r) => convert(r),
        None => error(&format!("ERR the server refused {} from the module", String::from_utf8_lossy(name))),
    }
}

/// `HMGET key field…` (`HGET` is one field): each value or nil; a key of another
/// type is `WRONGTYPE`, an empty one all nils.
fn hget(ctx: *mut Ctx, args: &[&[u8]]) -> std::result::Result<Vec<Reply>, Reply> {
    let s = ffi::Strings::new(ctx, args);
    let key = ffi::OpenKey::read(ctx, s.items[0]);
    match key.kind() {
        ffi::KEYTYPE_EMPTY => Ok(vec![Reply::Nil; args.len() - 1]),
        ffi::KEYTYPE_HASH => Ok(s.items[1..].iter().map(|&f| key.hash_get(f).map_or(Reply::Nil, Reply::Bulk)).collect()),
        _ => Err(error(WRONGTYPE)),
    }
}

/// `EXISTS key…`: how many of the keys exist.
fn exists(ctx: *mut Ctx, args: &[&[u8]]) -> Reply {
    let s = ffi::Strings::new(ctx, args);
    let n = s.items.iter().filter(|&&k| ffi::OpenKey::read(ctx, k).kind() != ffi::KEYTYPE_EMPTY).count();
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// `HSET key field value…`, propagated as itself, with its keyspace event. Its
/// reply (the count of new fields, which no plan reads) is given as 0.
fn hset(ctx: *mut Ctx, args: &[&[u8]]) -> Reply {
    let mut s = ffi::Strings::new(ctx, args);
    {
        let key = ffi::OpenKey::write(ctx, s.items[0]);
        if !matches!(key.kind(), ffi::KEYTYPE_EMPTY | ffi::KEYTYPE_HASH) {
            return error(WRONGTYPE);
        }
        for pair in s.items[1..].chunks_exact(2) {
            key.hash_set(pair[0], pair[1]);
        }
    }
    ffi::notify_hash(ctx, c"hset", s.items[0]);
    ffi::replicate(ctx, c"HSET", &mut s.items);
    Reply::Int(0)
}

fn error(message: &str) -> Reply {
    let code = message.split(' ').next().unwrap_or("ERR").to_string();
    Reply::Error { code, message: message.to_string() }
}

fn convert(r: ffi::ReplyRef<'_>) -> Reply {
    match r.kind() {
        ffi::REPLY_STRING => Reply::Bulk(r.bytes().to_vec()),
        ffi::REPLY_INTEGER => Reply::Int(r.integer()),
        ffi::REPLY_ARRAY => Reply::Array((0..r.len()).filter_map(|i| r.item(i)).map(convert).collect()),
        ffi::REPLY_NULL => Reply::Nil,
        ffi::REPLY_ERROR => error(&String::from_utf8_lossy(r.bytes())),
        other => error(&format!("ERR reply of type {other} in a module call")),
    }
}

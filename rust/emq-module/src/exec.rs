//! Driving a plan's conversation inside the server. A module command runs alone
//! (nothing else runs between its reads and its writes), so the host needs no
//! `WATCH`: a read's watch is skipped, the re-reads under it find what the
//! first reads found, and the transaction's writes run one after another, each
//! propagated to replicas and the AOF as itself (the server wraps them in one
//! `MULTI`/`EXEC`), so a replica without the module applies exactly them.
//!
//! Most commands go through `RedisModule_Call`, which parses and runs them as a
//! client's. The ones a sweep sends per row (`HGET`, `HMGET`, `EXISTS`, `HSET`, `HDEL`)
//! and its selection (`ZRANGE key 0 N WITHSCORES`) are done with the key API
//! instead, with the same replies, errors, keyspace events and propagation: a
//! call re-parses a command and builds its reply (a thousand scores printed and
//! parsed again), which costs more than the work itself.

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
            Step::Read { cmds, .. } => {
                let replies = Reads::new(ctx).run(&cmds);
                c.feed(&replies)?
            }
            Step::Exec(writes) => {
                let replies = apply(ctx, c.verb(), &writes)?;
                return c.finish(&replies);
            }
            Step::Group { writes, cmds, .. } => {
                let replies = apply(ctx, c.verb(), &writes)?;
                c.committed(Some(&replies))?;
                let replies = Reads::new(ctx).run(&cmds);
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
    let mut args = vec![];
    let mut words = Words::new(ctx);
    for w in writes {
        args.clear();
        args.extend(w.iter_args());
        let reply = match args.as_slice() {
            [name, rest @ ..] if name.eq_ignore_ascii_case(b"HSET") && rest.len() >= 3 && rest.len() % 2 == 1 => {
                hash_write(ctx, &mut words, rest, HashOp::Set)
            }
            [name, rest @ ..] if name.eq_ignore_ascii_case(b"HDEL") && rest.len() >= 2 => hash_write(ctx, &mut words, rest, HashOp::Del),
            [name, rest @ ..] => call(ctx, name, rest, true),
            [] => error("ERR empty command"),
        };
        match reply {
            Reply::Error { message, .. } => return Err(Error::server(verb, message)),
            r => replies.push(r),
        }
    }
    Ok(replies)
}

/// One read step's commands. Nothing is written between them, so a key whose
/// type a row read saw needs no second lookup for the `EXISTS` that follows.
struct Reads<'a> {
    ctx: *mut Ctx,
    /// Keys the row reads opened, in order, and whether each exists.
    seen: Vec<(&'a [u8], bool)>,
    /// The next of `seen` an `EXISTS` is likely to name (the plans count rows in
    /// the order they read them).
    at: usize,
}

impl<'a> Reads<'a> {
    fn new(ctx: *mut Ctx) -> Self {
        Reads { ctx, seen: vec![], at: 0 }
    }

    fn run(mut self, cmds: &'a [Cmd]) -> Vec<Reply> {
        let mut args: Vec<&'a [u8]> = vec![];
        cmds.iter()
            .map(|cmd| {
                args.clear();
                args.extend(cmd.iter_args());
                match args.as_slice() {
                    [name, key, field] if name.eq_ignore_ascii_case(b"HGET") => match self.hash_fields(key, &[field]) {
                        Ok(mut v) => v.pop().unwrap_or(Reply::Nil),
                        Err(e) => e,
                    },
                    [name, key, fields @ ..] if name.eq_ignore_ascii_case(b"HMGET") && !fields.is_empty() => {
                        self.hash_fields(key, fields).map_or_else(|e| e, Reply::Array)
                    }
                    [name, keys @ ..] if name.eq_ignore_ascii_case(b"EXISTS") && !keys.is_empty() => self.exists(keys),
                    [name, key, b"0", stop, ws] if name.eq_ignore_ascii_case(b"ZRANGE") && ws.eq_ignore_ascii_case(b"WITHSCORES") => {
                        match std::str::from_utf8(stop).ok().and_then(|s| s.parse::<usize>().ok()) {
                            Some(stop) => self.zset_head(key, stop.saturating_add(1)),
                            None => call(self.ctx, name, &args[1..], false),
                        }
                    }
                    [name, rest @ ..] => call(self.ctx, name, rest, false),
                    [] => error("ERR empty command"),
                }
            })
            .collect()
    }

    /// `HMGET key field…`: each value or nil; a key of another type is
    /// `WRONGTYPE`, an empty one all nils.
    fn hash_fields(&mut self, key: &'a [u8], fields: &[&[u8]]) -> std::result::Result<Vec<Reply>, Reply> {
        let (_name, k) = open_read(self.ctx, key);
        let kind = k.kind();
        self.seen.push((key, kind != ffi::KEYTYPE_EMPTY));
        match kind {
            ffi::KEYTYPE_EMPTY => Ok(vec![Reply::Nil; fields.len()]),
            ffi::KEYTYPE_HASH => Ok(fields.iter().map(|f| k.hash_get(self.ctx, f).map_or(Reply::Nil, Reply::Bulk)).collect()),
            _ => Err(error(WRONGTYPE)),
        }
    }

    /// `ZRANGE key 0 n-1 WITHSCORES`: members and scores (as the server prints
    /// them: the plans parse them back to the same doubles).
    fn zset_head(&self, key: &[u8], n: usize) -> Reply {
        let (_name, k) = open_read(self.ctx, key);
        match k.kind() {
            ffi::KEYTYPE_EMPTY => Reply::Array(vec![]),
            ffi::KEYTYPE_ZSET => Reply::Array(
                k.zset_head(n).into_iter().flat_map(|(m, s)| [Reply::Bulk(m), Reply::Bulk(score_text(s).into_bytes())]).collect(),
            ),
            _ => error(WRONGTYPE),
        }
    }

    /// `EXISTS key…`: how many of the keys exist.
    fn exists(&mut self, keys: &[&[u8]]) -> Reply {
        let mut n = 0i64;
        for &key in keys {
            let known = match self.seen.get(self.at) {
                Some(&(k, exists)) if k == key => {
                    self.at += 1;
                    Some(exists)
                }
                _ => None,
            };
            let exists = known.unwrap_or_else(|| open_read(self.ctx, key).1.kind() != ffi::KEYTYPE_EMPTY);
            n += i64::from(exists);
        }
        Reply::Int(n)
    }
}

/// `key` opened for reading, with its name (kept while the key is open).
fn open_read(ctx: *mut Ctx, key: &[u8]) -> (ffi::Strings, ffi::OpenKey) {
    let name = ffi::Strings::new(ctx, &[key]);
    let k = ffi::OpenKey::read(ctx, name.items[0]);
    (name, k)
}

/// A score as text that parses back to the same double: an integer where it is
/// one (scores are times in ms), else Rust's shortest round-trip form; `inf`, `-inf`.
fn score_text(s: f64) -> String {
    if s.fract() == 0.0 && s.abs() < 1e15 {
        #[allow(clippy::cast_possible_truncation)] // integral and below 2^53
        return (s as i64).to_string();
    }
    s.to_string()
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The server strings of the fields and values a write plan repeats row after
/// row (`state`, `pending`, `token`, `lease`, …), made once per plan: a row
/// write then makes one string, its key.
struct Words {
    ctx: *mut Ctx,
    known: Vec<(Vec<u8>, ffi::Strings)>,
}

/// How many distinct words are kept; past it, each is made anew.
const WORDS: usize = 16;

impl Words {
    fn new(ctx: *mut Ctx) -> Self {
        Words { ctx, known: vec![] }
    }

    /// The strings of `key` and `rest`, in order: the key's and any word not kept
    /// are made anew and freed with the first value; kept words live as long as `self`.
    fn command(&mut self, key: &[u8], rest: &[&[u8]]) -> (ffi::Strings, Vec<*mut ffi::RString>) {
        let mut owned = ffi::Strings::new(self.ctx, &[key]);
        let mut all = Vec::with_capacity(rest.len() + 1);
        all.push(owned.items[0]);
        for &w in rest {
            let s = match self.known.iter().find(|(b, _)| b.as_slice() == w) {
                Some((_, s)) => s.items[0],
                None if self.known.len() < WORDS && w.len() <= 32 => {
                    let s = ffi::Strings::new(self.ctx, &[w]);
                    let p = s.items[0];
                    self.known.push((w.to_vec(), s));
                    p
                }
                None => owned.push(w),
            };
            all.push(s);
        }
        (owned, all)
    }
}

#[derive(Clone, Copy, PartialEq)]
enum HashOp {
    /// `HSET key field value…`
    Set,
    /// `HDEL key field…` (a key left without fields is deleted, as HDEL does)
    Del,
}

/// `HSET` or `HDEL` with the key API, propagated as itself, with its keyspace
/// event. Its reply (a count of fields, which no plan reads) is given as 0.
fn hash_write(ctx: *mut Ctx, words: &mut Words, args: &[&[u8]], op: HashOp) -> Reply {
    let (_owned, mut s) = words.command(args[0], &args[1..]);
    {
        let key = ffi::OpenKey::write(ctx, s[0]);
        match key.kind() {
            ffi::KEYTYPE_HASH => {}
            // Nothing to delete: nothing written, nothing propagated.
            ffi::KEYTYPE_EMPTY if op == HashOp::Del => return Reply::Int(0),
            ffi::KEYTYPE_EMPTY => {}
            _ => return error(WRONGTYPE),
        }
        match op {
            HashOp::Set => s[1..].chunks_exact(2).for_each(|pair| key.hash_set(pair[0], pair[1])),
            HashOp::Del => s[1..].iter().for_each(|&field| key.hash_del(field)),
        }
    }
    let (name, event) = match op {
        HashOp::Set => (c"HSET", c"hset"),
        HashOp::Del => (c"HDEL", c"hdel"),
    };
    ffi::notify_hash(ctx, event, s[0]);
    ffi::replicate(ctx, name, &mut s);
    Reply::Int(0)
}

/// One command by `RedisModule_Call` (`write`: propagated as itself).
fn call(ctx: *mut Ctx, name: &[u8], rest: &[&[u8]], write: bool) -> Reply {
    let r = ffi::call(ctx, name, rest, write);
    match r.get() {
        Some(r) => convert(r),
        None => error(&format!("ERR the server refused {} from the module", String::from_utf8_lossy(name))),
    }
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

//! Driving a plan's conversation inside the server. A module command runs alone
//! (nothing else runs between its reads and its writes), so the host needs no
//! `WATCH`: a `Step::Watch` is skipped, the re-reads under it find what the
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
            Step::Watch(_) => c.feed(&[])?,
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
                hset(ctx, &mut words, rest)
            }
            [name, rest @ ..] if name.eq_ignore_ascii_case(b"HDEL") && rest.len() >= 2 => hdel(ctx, &mut words, rest),
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
        let name = ffi::Strings::new(self.ctx, &[key]);
        let k = ffi::OpenKey::read(self.ctx, name.items[0]);
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
        let name = ffi::Strings::new(self.ctx, &[key]);
        let k = ffi::OpenKey::read(self.ctx, name.items[0]);
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
            let exists = known.unwrap_or_else(|| {
                let name = ffi::Strings::new(self.ctx, &[key]);
                ffi::OpenKey::read(self.ctx, name.items[0]).kind() != ffi::KEYTYPE_EMPTY
            });
            n += i64::from(exists);
        }
        Reply::Int(n)
    }
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

    /// The strings of `key` (made anew) and `rest` (kept), in order.
    fn command(&mut self, key: &[u8], rest: &[&[u8]]) -> (ffi::Strings, Vec<*mut ffi::RString>) {
        let key = ffi::Strings::new(self.ctx, &[key]);
        let mut all = Vec::with_capacity(rest.len() + 1);
        all.push(key.items[0]);
        let mut fresh = vec![];
        for &w in rest {
            match self.known.iter().find(|(b, _)| b.as_slice() == w) {
                Some((_, s)) => all.push(s.items[0]),
                None if self.known.len() < WORDS && w.len() <= 32 => {
                    let s = ffi::Strings::new(self.ctx, &[w]);
                    all.push(s.items[0]);
                    self.known.push((w.to_vec(), s));
                }
                None => {
                    let s = ffi::Strings::new(self.ctx, &[w]);
                    all.push(s.items[0]);
                    fresh.push(s);
                }
            }
        }
        // The key string and any fresh ones are freed with the first value;
        // kept words live as long as `self`.
        let mut owned = key;
        for s in &mut fresh {
            owned.items.append(&mut s.items);
        }
        (owned, all)
    }
}

/// `HSET key field value…`, propagated as itself, with its keyspace event. Its
/// reply (the count of new fields, which no plan reads) is given as 0.
fn hset(ctx: *mut Ctx, words: &mut Words, args: &[&[u8]]) -> Reply {
    let (_owned, mut s) = words.command(args[0], &args[1..]);
    {
        let key = ffi::OpenKey::write(ctx, s[0]);
        if !matches!(key.kind(), ffi::KEYTYPE_EMPTY | ffi::KEYTYPE_HASH) {
            return error(WRONGTYPE);
        }
        for pair in s[1..].chunks_exact(2) {
            key.hash_set(pair[0], pair[1]);
        }
    }
    ffi::notify_hash(ctx, c"hset", s[0]);
    ffi::replicate(ctx, c"HSET", &mut s);
    Reply::Int(0)
}

/// `HDEL key field…`, propagated as itself (a key left without fields is
/// deleted, as HDEL does), with its keyspace event. Its reply (the count of
/// fields removed, which no plan reads) is given as 0.
fn hdel(ctx: *mut Ctx, words: &mut Words, args: &[&[u8]]) -> Reply {
    let (_owned, mut s) = words.command(args[0], &args[1..]);
    {
        let key = ffi::OpenKey::write(ctx, s[0]);
        match key.kind() {
            ffi::KEYTYPE_EMPTY => return Reply::Int(0),
            ffi::KEYTYPE_HASH => {}
            _ => return error(WRONGTYPE),
        }
        for &field in &s[1..] {
            key.hash_del(field);
        }
    }
    ffi::notify_hash(ctx, c"hdel", s[0]);
    ffi::replicate(ctx, c"HDEL", &mut s);
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

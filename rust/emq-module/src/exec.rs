//! Driving a plan's conversation inside the server. A module command runs alone
//! (nothing else runs between its reads and its writes), so the host needs no
//! `WATCH`: a read's watch is skipped, the re-reads under it find what the
//! first reads found, and the plan's writes run one after another, each
//! propagated to replicas and the AOF as the command it is
//! (`emq_plan::protocol::write`; the server wraps them in one `MULTI`/`EXEC`),
//! so a replica without the module applies exactly them.
//!
//! The writes are typed (`Write`): `apply` takes each variant to the key API
//! with one `match` over them all. The reads are commands, decoded by name.
//! Some commands go through `RedisModule_Call`, which parses and runs them as a
//! client's. The ones sent per row (`HGET`, `HMGET`, `EXISTS`, a row's writes,
//! and a complete's expiry of its done row), a sweep's selection (`ZRANGE key 0
//! N WITHSCORES`), the lengths of lists and sorted sets (`LLEN`, `ZCARD`: three
//! or more a call), the clock (`TIME`), the lists' reads and writes (`LRANGE key
//! 0 N`, pushes, pops, the trim of `wake`, the ring's rotation) and the writes of
//! a claim and a complete (the sorted sets' adds and removals, a lane's slots,
//! a lease mark, a retention trim that finds nothing to trim) are done with the
//! key API instead, with the same replies, errors, keyspace events and
//! propagation: a call re-parses a command and builds its reply (a thousand
//! scores printed and parsed again), which costs more than the work itself, and
//! even a trivial one costs 1.5 to 2 µs.
//!
//! What nothing else can change between a read and a write is kept for the
//! write (`Host`): the hashes a read opened stay open (a row is looked up once,
//! not once a command), and the head of the sorted set read serves the writes
//! that name it (its members' strings are the arguments of the pushes, and
//! removing exactly that head is `ZREMRANGEBYRANK`, which finds no member).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

use emq_plan::error::{Error, Result};
use emq_plan::numbers::{signed_decimal, Decimal, MAX_MS};
use emq_plan::protocol::conversation::{Conversation, Step};
use emq_plan::protocol::write::{Members, Write, LEASE_MARK_KEEP_MS, LEASE_MARK_VALUE, WAKE_MAX};
use emq_plan::{Cmd, Keys, Reply};

use crate::ffi::{self, Ctx, RString};

/// Runs `c` to its end.
pub fn run<C: Conversation>(ctx: *mut Ctx, c: &mut C) -> Result<C::Out> {
    let mut host = Host::new(ctx);
    let mut step = c.start();
    loop {
        step = match step {
            Step::Done(out) => return Ok(out),
            Step::Read { cmds, .. } => {
                let replies = host.reads(&cmds);
                c.feed(&replies)?
            }
            Step::Exec(writes) => {
                let replies = host.apply(c.verb(), c.keys(), &writes)?;
                return c.finish(&replies);
            }
            Step::Snapshot(cmds) => {
                let replies = host.reads(&cmds);
                return c.finish(&replies);
            }
            Step::Group { writes, cmds, .. } => {
                let replies = host.apply(c.verb(), c.keys(), &writes)?;
                c.committed(Some(&replies))?;
                let replies = host.reads(&cmds);
                c.feed(&replies)?
            }
        };
    }
}

/// What one module call keeps from its reads for its writes.
struct Host {
    ctx: *mut Ctx,
    /// The hashes the reads opened (rows, lane controls), in order, open for
    /// writing too: their writes need no second lookup. Closed when the call
    /// ends, or before a command by `RedisModule_Call` names one.
    open: Vec<Open>,
    /// `open`'s index by the hash of a key's name, for the keys still open
    /// (names of the same hash are chained by `Open::next`): no copy of a name.
    index: HashMap<u64, usize, BuildHasherDefault<Hashed>>,
    hasher: RandomState,
    /// The shortest and longest name in `index`: a `Call` argument outside
    /// them (an id) is no open key, without hashing it.
    lens: (usize, usize),
    /// Where a key is looked for in `open` first, with the one after it (the
    /// plans write rows in the order they read them, one or two commands a row).
    at: usize,
    head: Head,
    words: Words,
    /// Whether the hash writes are propagated as commands (`ffi::propagates`),
    /// asked at the first one. Where nothing takes them, `RedisModule_Replicate`
    /// (a command lookup by name and a vector of arguments a row, 10 to 14% of a
    /// sweep's time) is left out; the writes by `RedisModule_Call` are propagated,
    /// or not, by the server itself.
    propagates: Option<bool>,
    /// `hash_write`'s vectors, kept for the next row.
    argv: Vec<*mut RString>,
    pairs: Vec<(*mut RString, *mut RString)>,
    /// An argument's bytes, rendered for the write at hand (`hash_write`).
    arg: Vec<u8>,
}

struct Open {
    /// The key's name (the key's writes propagate it).
    name: ffi::Str,
    key: Option<ffi::OpenKey>,
    /// Written through `key`: signalled as modified when closed.
    modified: bool,
    /// The next open key whose name has the same hash.
    next: Option<usize>,
}

/// A hash a write goes to (`Host::hash_target`).
struct HashTarget {
    name: *mut RString,
    /// Its entry in `Host::open`, where a read left it open.
    entry: Option<usize>,
    /// Else the key, opened for this write alone.
    alone: Option<ffi::OpenKey>,
}

impl HashTarget {
    /// The open key (borrowing `open` alone, not the host).
    fn key<'a>(&'a self, open: &'a [Open]) -> &'a ffi::OpenKey {
        match (&self.alone, self.entry) {
            (Some(k), _) => k,
            (None, Some(i)) => open[i].key.as_ref().expect("a found key is open"),
            (None, None) => unreachable!("a key not found is opened"),
        }
    }
}

/// The head of the sorted set a `ZRANGE key 0 N` read.
struct Head {
    /// The set, while nothing has written it since the read.
    key: Option<Vec<u8>>,
    /// The members read, in order, as server strings (kept to the end of the
    /// call: they are the arguments of the writes that name them).
    members: ffi::Strings,
    /// Where the next argument is looked for in `members`.
    at: usize,
}

impl Host {
    fn new(ctx: *mut Ctx) -> Self {
        Host {
            ctx,
            open: vec![],
            index: HashMap::default(),
            hasher: RandomState::new(),
            lens: (usize::MAX, 0),
            at: 0,
            head: Head { key: None, members: ffi::Strings::empty(ctx), at: 0 },
            words: Words::new(ctx),
            propagates: None,
            argv: vec![],
            pairs: vec![],
            arg: vec![],
        }
    }

    /// One read step's commands, in order. Nothing is written between them.
    fn reads(&mut self, cmds: &[Cmd]) -> Vec<Reply> {
        let mut args: Vec<&[u8]> = vec![];
        let mut replies = Vec::with_capacity(cmds.len());
        // Room for a row a command: nothing grows (and copies) a row at a time.
        self.open.reserve(cmds.len());
        self.index.reserve(cmds.len());
        for cmd in cmds {
            args.clear();
            args.extend(cmd.iter_args());
            let reply = match args.as_slice() {
                [name, key, field] if name.eq_ignore_ascii_case(b"HGET") => self.hash_field(key, field),
                [name, key, fields @ ..] if name.eq_ignore_ascii_case(b"HMGET") && !fields.is_empty() => {
                    self.hash_fields(key, fields).map_or_else(|e| e, Reply::Array)
                }
                [name, keys @ ..] if name.eq_ignore_ascii_case(b"EXISTS") && !keys.is_empty() => self.exists(keys),
                [name, key] if name.eq_ignore_ascii_case(b"LLEN") => length(self.ctx, key, ffi::KEYTYPE_LIST),
                [name, key] if name.eq_ignore_ascii_case(b"ZCARD") => length(self.ctx, key, ffi::KEYTYPE_ZSET),
                [name] if name.eq_ignore_ascii_case(b"TIME") => time(),
                [name, key, b"0", stop, ws] if name.eq_ignore_ascii_case(b"ZRANGE") && ws.eq_ignore_ascii_case(b"WITHSCORES") => {
                    match std::str::from_utf8(stop).ok().and_then(|s| s.parse::<usize>().ok()) {
                        Some(stop) => self.zset_head(key, stop.saturating_add(1)),
                        None => self.call(name, &args[1..], false),
                    }
                }
                [name, key, b"0", stop] if name.eq_ignore_ascii_case(b"LRANGE") && ffi::OpenKey::can_index_lists() => {
                    match std::str::from_utf8(stop).ok().and_then(|s| s.parse::<usize>().ok()) {
                        Some(last) => self.list_head(key, last),
                        None => self.call(name, &args[1..], false),
                    }
                }
                [name, rest @ ..] => self.call(name, rest, false),
                [] => error("ERR empty command"),
            };
            replies.push(reply);
        }
        replies
    }

    /// The writes in order, each variant on the key API or, where the key API
    /// would not do exactly what the command does, by `RedisModule_Call` of the
    /// command it is. Every input check was made before the first one (SPEC §5,
    /// §6), so an error here is the server's (out of memory): the writes stop
    /// there, as a script's do.
    fn apply(&mut self, verb: &str, keys: &Keys, writes: &[Write]) -> Result<Vec<Reply>> {
        let mut replies = Vec::with_capacity(writes.len());
        // The key each write names first, made here for each (no key built on its own).
        let mut key = Vec::with_capacity(keys.prefix.len() + 64);
        for w in writes {
            key.clear();
            w.key_into(keys, &mut key);
            let reply = match w {
                Write::SetRow { .. } | Write::SetLane { .. } | Write::SetRetention(_) => self.hash_write(keys, w, &key, HashOp::Set),
                Write::DropLease { .. } | Write::DropErrorDetail { .. } => self.hash_write(keys, w, &key, HashOp::Del),
                Write::ExpireRow { at, .. } => match self.expire_at(&key, *at) {
                    Some(r) => r,
                    None => self.call_write(keys, w),
                },
                Write::DeleteRows(_) | Write::CountPromotion | Write::MarkLevelsInUse | Write::ExtendLeases { .. } => {
                    self.call_write(keys, w)
                }
                // A schedule's writes, a few a tick: the command itself.
                Write::SetTimers(_) | Write::DropTimers(_) | Write::SetSchedule { .. } | Write::DropSchedule { .. } => {
                    self.call_write(keys, w)
                }
                Write::TakeSlots { by, .. } => self.hash_incr(&key, b"active", *by),
                Write::Schedule(due) if due.iter().all(|(s, _)| plain_score(s)) && !due.is_empty() => self.zset_add(&key, due.iter()),
                Write::Lease { deadline: at, ids }
                | Write::Bury { at, ids }
                | Write::ListDone { at, ids }
                | Write::ListCancelled { at, ids }
                | Write::AskToStop { at, ids }
                    if plain_score(*at) && !ids.is_empty() =>
                {
                    self.zset_add(&key, ids.iter().map(|id| (*at, id)))
                }
                Write::Schedule(_)
                | Write::Lease { .. }
                | Write::Bury { .. }
                | Write::ListDone { .. }
                | Write::ListCancelled { .. }
                | Write::AskToStop { .. } => self.call_write(keys, w),
                Write::Unschedule(ids) | Write::LeaveActive(ids) | Write::TrimDead(ids) if self.is_head(&key, ids) => {
                    // The members are the set's first ones, in order: the same removal,
                    // without a lookup and a search for each member.
                    let last = Decimal::count(ids.len() - 1);
                    self.call(b"ZREMRANGEBYRANK", &[&key, b"0", last.as_bytes()], true)
                }
                Write::Unschedule(ids) | Write::LeaveActive(ids) | Write::TrimDead(ids) if !ids.is_empty() => self.zset_rem(&key, ids),
                Write::Unschedule(_) | Write::LeaveActive(_) | Write::TrimDead(_) => self.call_write(keys, w),
                Write::TrimDone { before } | Write::TrimCancelled { before } | Write::TrimCancels { before } => {
                    match self.none_in_range(&key, (f64::NEG_INFINITY, false), *before) {
                        Some(r) => r,
                        None => self.call_write(keys, w),
                    }
                }
                Write::MakeReady { ids, .. } | Write::JoinRing(ids) | Write::Wake(ids) | Write::Notify { ids, .. } if !ids.is_empty() => {
                    self.list_push(&key, ids)
                }
                Write::MakeReady { .. } | Write::JoinRing(_) | Write::Wake(_) | Write::Notify { .. } => self.call_write(keys, w),
                // A cancel's removal from a list, an inbox's expiry, a uniqueness key: rare, by the commands themselves.
                Write::Dequeue { .. } | Write::KeepInbox { .. } | Write::ClaimUnique { .. } => self.call_write(keys, w),
                Write::RotateRing => self.list_rotate(&key),
                Write::TrimWake => self.list_trim(&key, (-WAKE_MAX, -1)),
                Write::TakePending { count: 0 } => self.call_write(keys, w),
                Write::TakePending { count } => self.list_pop(&key, Some(*count)),
                // The writes of priorities (SPEC §15), as the commands they are.
                Write::ReadyAt { .. } | Write::TakeAt { .. } | Write::MarkLevel { .. } | Write::ClearLevel { .. } => {
                    self.call_write(keys, w)
                }
                Write::TakeLaneHead { .. } | Write::DropRingHead => self.list_pop(&key, None),
                Write::MarkLease { .. } => match self.set_px(&key, LEASE_MARK_VALUE, LEASE_MARK_KEEP_MS) {
                    Some(r) => r,
                    None => self.call_write(keys, w),
                },
                // The operator's actions and the registry run on the client host
                // only (no module verb makes them); as commands, should one ever.
                Write::DropFinished { .. }
                | Write::PersistRow { .. }
                | Write::ForgetStops(_)
                | Write::LeaveDead(_)
                | Write::LeaveDone(_)
                | Write::LeaveCancelled(_)
                | Write::Unready { .. }
                | Write::RegisterQueue(_)
                | Write::ListLanes(_)
                | Write::ListWorker { .. }
                | Write::SetWorker { .. }
                | Write::ExpireWorker { .. }
                | Write::TrimWorkers { .. }
                | Write::UnlistWorker(_)
                | Write::DeleteWorker(_)
                | Write::Count { .. }
                | Write::KeepCounts { .. } => self.call_write(keys, w),
            };
            match reply {
                Reply::Error { message, .. } => return Err(Error::server(verb, message)),
                r => replies.push(r),
            }
        }
        Ok(replies)
    }

    /// `w` by `RedisModule_Call`, as the command it is (propagated as itself).
    fn call_write(&mut self, keys: &Keys, w: &Write) -> Reply {
        let args = rendered(keys, w);
        let args: Vec<&[u8]> = args.iter().collect();
        self.call(w.name().as_bytes(), &args, true)
    }

    /// `open`'s entry for `key`, opening it (for reading and writing) if it is not.
    fn opened(&mut self, key: &[u8]) -> usize {
        if let Some(i) = self.near(key) {
            return i;
        }
        // Hashed once, for the lookup and the insert.
        let hash = self.hasher.hash_one(key);
        if let Some((i, _)) = self.lookup_hashed(key, hash) {
            self.at = i;
            return i;
        }

        let name = ffi::Str::new(self.ctx, key);
        let k = ffi::OpenKey::write(self.ctx, name.raw());
        let i = self.open.len();
        let next = self.index.insert(hash, i);
        self.open.push(Open { name, key: Some(k), modified: false, next });
        self.lens = (self.lens.0.min(key.len()), self.lens.1.max(key.len()));
        i
    }

    /// The open entry of `key` by its hash, and the entry before it in its chain.
    fn lookup(&self, key: &[u8]) -> Option<(usize, Option<usize>)> {
        if key.len() < self.lens.0 || key.len() > self.lens.1 {
            return None;
        }
        self.lookup_hashed(key, self.hasher.hash_one(key))
    }

    fn lookup_hashed(&self, key: &[u8], hash: u64) -> Option<(usize, Option<usize>)> {
        let (mut at, mut before) = (*self.index.get(&hash)?, None);
        loop {
            if self.open[at].name.bytes() == key {
                return Some((at, before));
            }
            before = Some(at);
            at = self.open[at].next?;
        }
    }

    /// `open`'s entry for `key` if it is open.
    fn find(&mut self, key: &[u8]) -> Option<usize> {
        if let Some(i) = self.near(key) {
            return Some(i);
        }
        let (i, _) = self.lookup(key)?;
        self.at = i;
        Some(i)
    }

    /// `key`'s entry if it is the one found last or the one after it (rows are
    /// read, counted and written in order): no hashing.
    fn near(&mut self, key: &[u8]) -> Option<usize> {
        for i in [self.at + 1, self.at] {
            if let Some(o) = self.open.get(i) {
                if o.key.is_some() && o.name.bytes() == key {
                    self.at = i;
                    return Some(i);
                }
            }
        }
        None
    }

    /// Closes `key` if it is open (a command by `Call` is about to name it).
    fn close(&mut self, key: &[u8]) {
        let Some((i, before)) = self.lookup(key) else { return };
        let next = self.open[i].next.take();
        match before {
            Some(b) => self.open[b].next = next,
            None => match next {
                Some(n) => drop(self.index.insert(self.hasher.hash_one(key), n)),
                None => drop(self.index.remove(&self.hasher.hash_one(key))),
            },
        }
        self.open[i].close(self.ctx);
    }

    /// `HMGET key field…`: each value or nil; a key of another type is
    /// `WRONGTYPE`, an empty one all nils.
    fn hash_fields(&mut self, key: &[u8], fields: &[&[u8]]) -> std::result::Result<Vec<Reply>, Reply> {
        let Some(i) = self.opened_hash(key)? else { return Ok(vec![Reply::Nil; fields.len()]) };
        let (k, mut owned) = (self.open[i].key.as_ref().expect("an indexed key is open"), ffi::Strings::empty(self.ctx));
        Ok(fields.iter().map(|f| k.hash_get(self.words.word(f, &mut owned)).map_or(Reply::Nil, Reply::Bulk)).collect())
    }

    /// `HGET key field`: `hash_fields` for one field, without a vector.
    fn hash_field(&mut self, key: &[u8], field: &[u8]) -> Reply {
        match self.opened_hash(key) {
            Ok(Some(i)) => {
                let (k, mut owned) = (self.open[i].key.as_ref().expect("an indexed key is open"), ffi::Strings::empty(self.ctx));
                k.hash_get(self.words.word(field, &mut owned)).map_or(Reply::Nil, Reply::Bulk)
            }
            Ok(None) => Reply::Nil,
            Err(e) => e,
        }
    }

    /// `key` opened (`opened`) as a hash: its entry, None when there is no key,
    /// `WRONGTYPE` for a key of another type.
    fn opened_hash(&mut self, key: &[u8]) -> std::result::Result<Option<usize>, Reply> {
        let i = self.opened(key);
        match self.open[i].key.as_ref().expect("an indexed key is open").kind() {
            ffi::KEYTYPE_EMPTY => Ok(None),
            ffi::KEYTYPE_HASH => Ok(Some(i)),
            _ => Err(error(WRONGTYPE)),
        }
    }

    /// `ZRANGE key 0 n-1 WITHSCORES`: members and scores (as doubles: the plans
    /// read them as the server keeps them).
    fn zset_head(&mut self, key: &[u8], n: usize) -> Reply {
        let (_name, k) = open_read(self.ctx, key);
        match k.kind() {
            ffi::KEYTYPE_EMPTY => Reply::Array(vec![]),
            ffi::KEYTYPE_ZSET => {
                let mut members = ffi::Strings::empty(self.ctx);
                let scores = k.zset_head(n, &mut members);
                let mut reply = Vec::with_capacity(2 * scores.len());
                for (&m, s) in members.items.iter().zip(scores) {
                    reply.extend([Reply::Bulk(ffi::bytes(m).to_vec()), Reply::Double(s)]);
                }
                let reply = Reply::Array(reply);
                self.head = Head { key: Some(key.to_vec()), members, at: 0 };
                reply
            }
            _ => error(WRONGTYPE),
        }
    }

    /// Whether `members` are the first members of `key`, in order, as the head read them.
    fn is_head(&self, key: &[u8], members: &Members) -> bool {
        let head = &self.head;
        head.key.as_deref() == Some(key)
            && !members.is_empty()
            && members.len() <= head.members.items.len()
            && members.iter().zip(&head.members.items).all(|(m, &s)| m == ffi::bytes(s))
    }

    /// `EXISTS key…`: how many of the keys exist.
    fn exists(&mut self, keys: &[&[u8]]) -> Reply {
        let mut n = 0i64;
        for &key in keys {
            let exists = match self.find(key) {
                Some(i) => self.open[i].key.as_ref().is_some_and(|k| k.kind() != ffi::KEYTYPE_EMPTY),
                None => open_read(self.ctx, key).1.kind() != ffi::KEYTYPE_EMPTY,
            };
            n += i64::from(exists);
        }
        Reply::Int(n)
    }

    /// The hash a write goes to: the entry a read left open (a row is looked up
    /// once), else the key opened for this write alone (its name made into `owned`).
    fn hash_target(&mut self, key: &[u8], owned: &mut ffi::Strings) -> HashTarget {
        match self.find(key) {
            Some(i) => HashTarget { name: self.open[i].name.raw(), entry: Some(i), alone: None },
            None => {
                let name = owned.push(key);
                HashTarget { name, entry: None, alone: Some(ffi::OpenKey::write(self.ctx, name)) }
            }
        }
    }

    /// `t` was written: signalled when its entry is closed, or now, closed, if
    /// it was opened for the write alone.
    fn hash_written(&mut self, t: HashTarget) {
        match t.entry {
            Some(i) => self.open[i].modified = true,
            None => {
                drop(t.alone);
                ffi::signal_modified(self.ctx, t.name);
            }
        }
    }

    /// A hash write (`HSET`, `HDEL`: `w`'s fields after its key) with the key
    /// API, propagated as the command, with its keyspace event. Its reply (a
    /// count of fields, which no plan reads) is given as 0.
    fn hash_write(&mut self, keys: &Keys, w: &Write, key: &[u8], op: HashOp) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let t = self.hash_target(key, &mut owned);
        let (name, k) = (t.name, t.key(&self.open));
        match k.kind() {
            ffi::KEYTYPE_HASH => {}
            // Nothing to delete: nothing written, nothing propagated.
            ffi::KEYTYPE_EMPTY if op == HashOp::Del => return Reply::Int(0),
            ffi::KEYTYPE_EMPTY => {}
            _ => return error(WRONGTYPE),
        }
        // The command's strings and the API's pairs, in vectors kept from row to row.
        let (mut s, mut pairs) = (std::mem::take(&mut self.argv), std::mem::take(&mut self.pairs));
        s.clear();
        pairs.clear();
        s.push(name);
        let (words, arg) = (&mut self.words, &mut self.arg);
        let mut at_key = true;
        w.args(keys, &mut |a| {
            if std::mem::take(&mut at_key) {
                return; // the key: `name`
            }
            arg.clear();
            a.append_to(arg);
            s.push(words.word(arg, &mut owned));
        });
        match op {
            HashOp::Set => pairs.extend(s[1..].chunks_exact(2).map(|p| (p[0], p[1]))),
            HashOp::Del => pairs.extend(s[1..].iter().map(|&field| (field, ffi::DELETE))),
        }
        k.hash_set(&pairs);
        self.hash_written(t);
        if self.head.key.as_deref() == Some(key) {
            self.head.key = None;
        }
        let (command, event) = match op {
            HashOp::Set => (c"HSET", c"hset"),
            HashOp::Del => (c"HDEL", c"hdel"),
        };
        ffi::notify(self.ctx, ffi::NOTIFY_HASH, event, name);
        if self.propagates() {
            ffi::replicate(self.ctx, command, &mut s);
        }
        (self.argv, self.pairs) = (s, pairs);
        Reply::Int(0)
    }

    /// `PEXPIREAT key ms` of a row the reads opened (a complete's done row, kept
    /// as the retention says), with the key API, propagated as itself, with its
    /// keyspace event; None (for `call`) where the command would do more than
    /// set the expiry: no such open key, or a time not well ahead of the clock
    /// (`PEXPIREAT` deletes a key whose time has come).
    fn expire_at(&mut self, key: &[u8], ms: i64) -> Option<Reply> {
        if ms <= (ffi::time_us() / 1000).saturating_add(1000) {
            return None;
        }
        let i = self.find(key)?;
        let k = self.open[i].key.as_ref()?;
        if k.kind() == ffi::KEYTYPE_EMPTY || !k.set_abs_expire(ms) {
            return None;
        }
        self.open[i].modified = true;
        let name = self.open[i].name.raw();
        ffi::notify(self.ctx, ffi::NOTIFY_GENERIC, c"expire", name);
        if self.propagates() {
            let mut owned = ffi::Strings::empty(self.ctx);
            let mut s = vec![name, owned.push(Decimal::int(ms).as_bytes())];
            ffi::replicate(self.ctx, c"PEXPIREAT", &mut s);
        }
        Some(Reply::Int(1))
    }

    /// `key` opened for a write by the key API: closed first where a read left
    /// it open, and no longer the head read where it was that set. Its name is
    /// made into `owned`.
    fn write_key(&mut self, key: &[u8], owned: &mut ffi::Strings) -> (*mut RString, ffi::OpenKey) {
        self.close(key);
        if self.head.key.as_deref() == Some(key) {
            self.head.key = None;
        }
        let name = owned.push(key);
        (name, ffi::OpenKey::write(self.ctx, name))
    }

    /// `key` opened for a write (`write_key`) where it holds a `kind`, or is
    /// empty and `empty` is None (the write makes it); else the command's
    /// answer: `empty` for no key (nothing written), `WRONGTYPE` for another type.
    fn write_key_of(
        &mut self,
        key: &[u8],
        kind: std::ffi::c_int,
        empty: Option<Reply>,
        owned: &mut ffi::Strings,
    ) -> std::result::Result<(*mut RString, ffi::OpenKey), Reply> {
        let (name, k) = self.write_key(key, owned);
        match (k.kind(), empty) {
            (t, _) if t == kind => Ok((name, k)),
            (ffi::KEYTYPE_EMPTY, None) => Ok((name, k)),
            (ffi::KEYTYPE_EMPTY, Some(answer)) => Err(answer),
            _ => Err(error(WRONGTYPE)),
        }
    }

    /// Propagates `command name args…` where the writes are propagated.
    fn replicate(&mut self, command: &std::ffi::CStr, name: *mut RString, args: &[&[u8]], owned: &mut ffi::Strings) {
        self.replicate_with(command, name, owned, args.len(), |push| args.iter().for_each(|a| push(a)));
    }

    /// Propagates `command name` and the `n` arguments `args` gives to its
    /// `push`, where the writes are propagated (and makes none where not).
    fn replicate_with(
        &mut self,
        command: &std::ffi::CStr,
        name: *mut RString,
        owned: &mut ffi::Strings,
        n: usize,
        args: impl FnOnce(&mut dyn FnMut(&[u8])),
    ) {
        if self.propagates() {
            let mut s = Vec::with_capacity(n + 1);
            s.push(name);
            args(&mut |a| s.push(owned.push(a)));
            ffi::replicate(self.ctx, command, &mut s);
        }
    }

    /// Propagates `command name member…`.
    fn replicate_members(&mut self, command: &std::ffi::CStr, name: *mut RString, members: &Members, owned: &mut ffi::Strings) {
        self.replicate_with(command, name, owned, members.len(), |push| members.iter().for_each(push));
    }

    /// `ZADD key score member…` (scores the server reads exactly as the plans
    /// write them: `plain_score`; no options) with the key API: the members
    /// added, and where anything changed the command's keyspace event and
    /// propagation, as `ZADD` has them.
    fn zset_add<'a>(&mut self, key: &[u8], pairs: impl Iterator<Item = (i64, &'a [u8])> + Clone) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_ZSET, None, &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        let (mut added, mut changed) = (0i64, false);
        for (score, member) in pairs.clone() {
            match k.zset_add(score as f64, owned.push(member)) {
                Some((a, u)) => {
                    added += i64::from(a);
                    changed |= a || u;
                }
                None => return error("ERR the server refused ZADD from the module"),
            }
        }
        drop(k);
        if changed {
            ffi::signal_modified(self.ctx, name);
            ffi::notify(self.ctx, ffi::NOTIFY_ZSET, c"zadd", name);
            let n = 2 * pairs.clone().count();
            self.replicate_with(c"ZADD", name, &mut owned, n, |push| {
                for (score, member) in pairs {
                    push(Decimal::int(score).as_bytes());
                    push(member);
                }
            });
        }
        Reply::Int(added)
    }

    /// `ZREM key member…` with the key API: the members removed, and where any
    /// was the command's keyspace events (`zrem`, and `del` when the set is left
    /// empty and deleted) and propagation, as `ZREM` has them.
    fn zset_rem(&mut self, key: &[u8], members: &Members) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_ZSET, Some(Reply::Int(0)), &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        let mut removed = 0i64;
        for m in members.iter() {
            match k.zset_rem(owned.push(m)) {
                Some(r) => removed += i64::from(r),
                None => return error("ERR the server refused ZREM from the module"),
            }
        }
        if removed > 0 {
            self.removed(k, name, (ffi::NOTIFY_ZSET, c"zrem"));
            self.replicate_members(c"ZREM", name, members, &mut owned);
        }
        Reply::Int(removed)
    }

    /// `LRANGE key 0 last` with the key API: the list's first elements, none
    /// for no key, `WRONGTYPE` for another type.
    fn list_head(&mut self, key: &[u8], last: usize) -> Reply {
        let (_name, k) = open_read(self.ctx, key);
        match k.kind() {
            ffi::KEYTYPE_EMPTY => Reply::Array(vec![]),
            ffi::KEYTYPE_LIST => Reply::Array(k.list_head(last).into_iter().map(Reply::Bulk).collect()),
            _ => error(WRONGTYPE),
        }
    }

    /// `RPUSH key element…` with the key API: the list's new length, with the
    /// command's keyspace event and propagation.
    fn list_push(&mut self, key: &[u8], elements: &Members) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_LIST, None, &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        for e in elements.iter() {
            // A member of the head read is pushed as the string read.
            let s = self.head.member(e).unwrap_or_else(|| owned.push(e));
            if !k.list_push_tail(s) {
                return error("ERR the server refused RPUSH from the module");
            }
        }
        let len = i64::try_from(k.len()).unwrap_or(i64::MAX);
        drop(k);
        ffi::signal_modified(self.ctx, name);
        ffi::notify(self.ctx, ffi::NOTIFY_LIST, c"rpush", name);
        self.replicate_members(c"RPUSH", name, elements, &mut owned);
        Reply::Int(len)
    }

    /// `LMOVE key key LEFT RIGHT` (the ring's rotation) with the key API: the
    /// head element moved to the tail and given; nil for no key. As the command:
    /// the destination's event (`rpush`), then the source's (`lpop`), one change.
    fn list_rotate(&mut self, key: &[u8]) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_LIST, Some(Reply::Nil), &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        let moved = if k.len() == 1 && ffi::OpenKey::can_index_lists() {
            // One element: the rotation leaves it in place (a pop would delete the key).
            k.list_head(0).pop()
        } else {
            k.list_pop(true).filter(|e| k.list_push_tail(owned.push(e)))
        };
        drop(k);
        let Some(moved) = moved else { return error("ERR the server refused LMOVE from the module") };
        ffi::signal_modified(self.ctx, name);
        ffi::notify(self.ctx, ffi::NOTIFY_LIST, c"rpush", name);
        ffi::notify(self.ctx, ffi::NOTIFY_LIST, c"lpop", name);
        self.replicate(c"LMOVE", name, &[key, b"LEFT", b"RIGHT"], &mut owned);
        Reply::Bulk(moved)
    }

    /// `HINCRBY key field by` with the key API (a lane's `active` count): the new
    /// value, the command's errors (a value that is not an integer as the server
    /// reads one, an overflow), event and propagation. The key may be one a read
    /// opened.
    fn hash_incr(&mut self, key: &[u8], field: &[u8], by_n: i64) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let t = self.hash_target(key, &mut owned);
        let (name, k) = (t.name, t.key(&self.open));
        if !matches!(k.kind(), ffi::KEYTYPE_HASH | ffi::KEYTYPE_EMPTY) {
            return error(WRONGTYPE);
        }
        let f = self.words.word(field, &mut owned);
        let now = match k.hash_get(f) {
            None => 0,
            Some(v) => match strict_integer(&v) {
                Some(n) => n,
                None => return error("ERR hash value is not an integer"),
            },
        };
        let Some(new) = now.checked_add(by_n) else { return error("ERR increment or decrement would overflow") };
        let v = owned.push(new.to_string().as_bytes());
        k.hash_set(&[(f, v)]);
        self.hash_written(t);
        ffi::notify(self.ctx, ffi::NOTIFY_HASH, c"hincrby", name);
        self.replicate(c"HINCRBY", name, &[field, Decimal::int(by_n).as_bytes()], &mut owned);
        Reply::Int(new)
    }

    /// After a command removed elements of `k`: closes it, then, as the command,
    /// fires its event (`class`, `event`), `del` where it left the key empty
    /// (the server deleted it), and signals the key.
    fn removed(&self, k: ffi::OpenKey, name: *mut RString, (class, event): (std::ffi::c_int, &std::ffi::CStr)) {
        let deleted = k.kind() == ffi::KEYTYPE_EMPTY;
        drop(k);
        ffi::notify(self.ctx, class, event, name);
        if deleted {
            ffi::notify(self.ctx, ffi::NOTIFY_GENERIC, c"del", name);
        }
        ffi::signal_modified(self.ctx, name);
    }

    /// `LTRIM key start stop` (the trim of `wake`) with the key API, as the
    /// command does it: the elements outside the range removed (the key
    /// deleted if none is left), its keyspace events, and propagated where it
    /// removed any.
    fn list_trim(&mut self, key: &[u8], (start, stop): (i64, i64)) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_LIST, Some(Reply::Status("OK".to_string())), &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        let len = i64::try_from(k.len()).unwrap_or(i64::MAX);
        let (mut start, mut stop) = (start, stop);
        if start < 0 {
            start = start.saturating_add(len).max(0);
        }
        if stop < 0 {
            stop = stop.saturating_add(len);
        }
        let (head, tail) = if start > stop || start >= len { (len, 0) } else { (start, len - stop.min(len - 1) - 1) };
        for _ in 0..head {
            k.list_pop(true);
        }
        for _ in 0..tail {
            k.list_pop(false);
        }
        self.removed(k, name, (ffi::NOTIFY_LIST, c"ltrim"));
        if head + tail > 0 {
            self.replicate(c"LTRIM", name, &[Decimal::int(start).as_bytes(), Decimal::int(stop).as_bytes()], &mut owned);
        }
        Reply::Status("OK".to_string())
    }

    /// `LPOP key [count]` with the key API: the element (or, with a count, the
    /// elements) removed from the head, nil for no key; the command's keyspace
    /// events and propagation.
    fn list_pop(&mut self, key: &[u8], count: Option<usize>) -> Reply {
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = match self.write_key_of(key, ffi::KEYTYPE_LIST, Some(Reply::Nil), &mut owned) {
            Ok(open) => open,
            Err(answer) => return answer,
        };
        let mut popped = vec![];
        while popped.len() < count.unwrap_or(1) {
            match k.list_pop(true) {
                Some(e) => popped.push(Reply::Bulk(e)),
                None => break,
            }
        }
        self.removed(k, name, (ffi::NOTIFY_LIST, c"lpop"));
        let n = count.map(Decimal::count);
        self.replicate(c"LPOP", name, n.as_ref().map(Decimal::as_bytes).as_slice(), &mut owned);
        match count {
            Some(_) => Reply::Array(popped),
            None => popped.pop().unwrap_or(Reply::Nil),
        }
    }

    /// `ZREMRANGEBYSCORE key min (before` where the range holds no member (the
    /// retention's trim of `done`, most calls): 0, nothing written, nothing
    /// propagated, as the command does. None (for `call`) where there is
    /// something to remove, the key is of another type, or `before` is not a
    /// score the server reads exactly (`plain_score`).
    fn none_in_range(&mut self, key: &[u8], (min, min_ex): (f64, bool), before: i64) -> Option<Reply> {
        let (max, max_ex) = (plain_score(before).then_some(before as f64)?, true);
        let (_name, k) = open_read(self.ctx, key);
        match k.kind() {
            ffi::KEYTYPE_EMPTY => Some(Reply::Int(0)),
            ffi::KEYTYPE_ZSET if !k.zset_any_in_range(min, max, min_ex, max_ex) => Some(Reply::Int(0)),
            _ => None,
        }
    }

    /// `SET key value PX ms` (a lease mark) with the key API, with the command's
    /// keyspace events (`set`, `expire`) and propagated as the server propagates
    /// it (`PXAT` the deadline). None (for `call`) for a time that is not a
    /// positive integer.
    fn set_px(&mut self, key: &[u8], value: &[u8], ms: u64) -> Option<Reply> {
        let ms = i64::try_from(ms).ok().filter(|&ms| ms > 0)?;
        let at = (ffi::time_us() / 1000).checked_add(ms)?;
        let mut owned = ffi::Strings::empty(self.ctx);
        let (name, k) = self.write_key(key, &mut owned);
        let v = owned.push(value);
        if !(k.string_set(v) && k.set_abs_expire(at)) {
            return Some(error("ERR the server refused SET from the module"));
        }
        drop(k);
        ffi::signal_modified(self.ctx, name);
        ffi::notify(self.ctx, ffi::NOTIFY_STRING, c"set", name);
        ffi::notify(self.ctx, ffi::NOTIFY_GENERIC, c"expire", name);
        let at = at.to_string();
        self.replicate(c"SET", name, &[value, b"PXAT", at.as_bytes()], &mut owned);
        Some(Reply::Status("OK".to_string()))
    }

    /// Whether the key API's writes are propagated (`ffi::propagates`), asked at the first one.
    fn propagates(&mut self) -> bool {
        *self.propagates.get_or_insert_with(|| ffi::propagates(self.ctx))
    }

    /// One command by `RedisModule_Call` (`write`: propagated as itself). The
    /// keys it names are closed first; a member of the head read is passed as
    /// the string read.
    fn call(&mut self, name: &[u8], rest: &[&[u8]], write: bool) -> Reply {
        if write {
            for a in rest {
                self.close(a);
                if self.head.key.as_deref() == Some(*a) {
                    self.head.key = None;
                }
            }
        }
        let mut owned = ffi::Strings::empty(self.ctx);
        let mut argv: Vec<*mut RString> = rest.iter().map(|a| self.head.member(a).unwrap_or_else(|| owned.push(a))).collect();
        let r = ffi::call(self.ctx, name, &mut argv, write);
        match r.get() {
            Some(r) => convert(r),
            None => error(&format!("ERR the server refused {} from the module", String::from_utf8_lossy(name))),
        }
    }
}

impl Head {
    /// The string of the member `a` (looked for from where the last one was
    /// found, a few members on: writes name the members in the order read,
    /// some left out).
    fn member(&mut self, a: &[u8]) -> Option<*mut RString> {
        let items = &self.members.items;
        let end = items.len().min(self.at + 8);
        let i = (self.at..end).find(|&i| ffi::bytes(items[i]) == a)?;
        self.at = i + 1;
        Some(items[i])
    }
}

impl Open {
    fn close(&mut self, ctx: *mut Ctx) {
        if self.key.take().is_some() && self.modified {
            ffi::signal_modified(ctx, self.name.raw());
        }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        for o in &mut self.open {
            o.close(self.ctx);
        }
    }
}

/// `key` opened for reading, with its name (kept while the key is open).
fn open_read(ctx: *mut Ctx, key: &[u8]) -> (ffi::Str, ffi::OpenKey) {
    let name = ffi::Str::new(ctx, key);
    let k = ffi::OpenKey::read(ctx, name.raw());
    (name, k)
}

/// `TIME`: seconds and microseconds, as the server's `TIME` answers (`ffi::time_us`).
fn time() -> Reply {
    let us = ffi::time_us();
    let (sec, usec) = (us.div_euclid(1_000_000), us.rem_euclid(1_000_000));
    Reply::Array(vec![Reply::Bulk(sec.to_string().into_bytes()), Reply::Bulk(usec.to_string().into_bytes())])
}

/// `LLEN key` (`kind` a list) or `ZCARD key` (a sorted set): the length, 0 for
/// no key, `WRONGTYPE` for another type. (The plans read the queue's lists and
/// the retention's `done` and `dead`, never a row.)
fn length(ctx: *mut Ctx, key: &[u8], kind: std::ffi::c_int) -> Reply {
    let (_name, k) = open_read(ctx, key);
    match k.kind() {
        ffi::KEYTYPE_EMPTY => Reply::Int(0),
        t if t == kind => Reply::Int(i64::try_from(k.len()).unwrap_or(i64::MAX)),
        _ => error(WRONGTYPE),
    }
}

/// A score the server reads as exactly the integer the plans write
/// (`numbers::field_int`'s 15 digits at most: a double holds it exactly), so
/// the key API adds or compares the very score the command would.
fn plain_score(score: i64) -> bool {
    score.unsigned_abs() <= MAX_MS.unsigned_abs()
}

/// The arguments of `w`'s command after its name, rendered (what a write by
/// `RedisModule_Call` sends).
fn rendered(keys: &Keys, w: &Write) -> Members {
    let (mut out, mut arg) = (Members::new(), vec![]);
    w.args(keys, &mut |a| {
        arg.clear();
        a.append_to(&mut arg);
        out.push(&arg);
    });
    out
}

/// An integer as the server reads a stored or given one (`string2ll`): an
/// optional `-`, no leading zero but in `0`, no `-0`, within 64 bits.
fn strict_integer(b: &[u8]) -> Option<i64> {
    let digits = b.strip_prefix(b"-").unwrap_or(b);
    if (digits.len() > 1 && digits[0] == b'0') || b == b"-0" {
        return None;
    }
    signed_decimal(b)
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

/// The hasher of `Host::index`, whose keys are hashes already.
#[derive(Default)]
struct Hashed(u64);

impl Hasher for Hashed {
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u64` is used; anything else is folded in, not dropped.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The server strings of the fields and values the plans repeat row after row
/// (`lane`, `state`, `pending`, `token`, `lease`, …), made once per call.
struct Words {
    ctx: *mut Ctx,
    known: Vec<ffi::Str>,
}

/// How many distinct words are kept; past it, each is made anew.
const WORDS: usize = 16;

impl Words {
    fn new(ctx: *mut Ctx) -> Self {
        Words { ctx, known: vec![] }
    }

    /// The string of `w`: a kept word's, or one made anew into `owned`.
    fn word(&mut self, w: &[u8], owned: &mut ffi::Strings) -> *mut RString {
        match self.known.iter().find(|s| s.bytes() == w) {
            Some(s) => s.raw(),
            None if self.known.len() < WORDS && w.len() <= 32 => {
                let s = ffi::Str::new(self.ctx, w);
                let p = s.raw();
                self.known.push(s);
                p
            }
            None => owned.push(w),
        }
    }
}

#[derive(Clone, Copy, PartialEq)]
enum HashOp {
    /// `HSET key field value…`
    Set,
    /// `HDEL key field…` (a key left without fields is deleted, as HDEL does)
    Del,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_as_the_server_reads_them() {
        // Scores the key API takes as the command would: 15 digits at most, exact
        // in a double (a due time `At` far in the past or future goes by `ZADD`).
        for good in [0, 1_700_000_000_000, -5, MAX_MS, -MAX_MS] {
            assert!(plain_score(good) && (good as f64) as i64 == good, "{good}");
        }
        for bad in [MAX_MS + 1, -MAX_MS - 1, i64::MIN, i64::MAX] {
            assert!(!plain_score(bad), "{bad}");
        }
        // HINCRBY's, as string2ll: no leading zero, no -0, 64 bits.
        assert_eq!(strict_integer(b"0"), Some(0));
        assert_eq!(strict_integer(b"-12"), Some(-12));
        assert_eq!(strict_integer(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b""[..], b"-", b"-0", b"007", b"+1", b" 1", b"1 ", b"9223372036854775808"] {
            assert_eq!(strict_integer(bad), None, "{bad:?}");
        }
    }
}

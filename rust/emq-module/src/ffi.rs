//! The few functions of the Redis/Valkey module API this host uses, declared by
//! hand (no bindgen, no libclang) and looked up once at load time, as
//! `redismodule.h`'s `RedisModule_Init` does: the first word of the load
//! context is the server's `GetApi`, which gives each function by name. Valkey
//! answers the `RedisModule_` names too, so one table serves both servers.
//!
//! Everything here is `unsafe` glue; `lib.rs` and `exec.rs` keep to the safe
//! wrappers at the bottom.

use std::ffi::{c_char, c_int, c_longlong, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;

#[repr(C)]
pub struct Ctx {
    _private: [u8; 0],
}
#[repr(C)]
pub struct RString {
    _private: [u8; 0],
}
#[repr(C)]
pub struct CallReply {
    _private: [u8; 0],
}
#[repr(C)]
pub struct Key {
    _private: [u8; 0],
}

const READ: c_int = 1;
const WRITE: c_int = 2;
/// `RedisModule_KeyType`.
pub const KEYTYPE_EMPTY: c_int = 0;
pub const KEYTYPE_LIST: c_int = 2;
pub const KEYTYPE_HASH: c_int = 3;
pub const KEYTYPE_ZSET: c_int = 5;
const HASH_NONE: c_int = 0;
/// `REDISMODULE_NOTIFY_*`: the classes of keyspace events.
pub const NOTIFY_GENERIC: c_int = 1 << 2;
pub const NOTIFY_STRING: c_int = 1 << 3;
pub const NOTIFY_LIST: c_int = 1 << 4;
pub const NOTIFY_HASH: c_int = 1 << 6;
pub const NOTIFY_ZSET: c_int = 1 << 7;
/// `REDISMODULE_ZADD_ADDED` and `REDISMODULE_ZADD_UPDATED`: what `ZsetAdd` did.
const ZADD_ADDED: c_int = 1 << 2;
const ZADD_UPDATED: c_int = 1 << 3;
/// `REDISMODULE_LIST_HEAD` and `REDISMODULE_LIST_TAIL`.
const LIST_HEAD: c_int = 0;
const LIST_TAIL: c_int = 1;
/// `REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED` (Redis 6.0 and later, every Valkey).
const NO_IMPLICIT_SIGNAL_MODIFIED: c_int = 1 << 1;

pub const OK: c_int = 0;
pub const ERR: c_int = 1;
const APIVER_1: c_int = 1;

/// `RedisModule_CallReplyType` (RESP2 replies: the call asks for no RESP3).
pub const REPLY_STRING: c_int = 0;
pub const REPLY_ERROR: c_int = 1;
pub const REPLY_INTEGER: c_int = 2;
pub const REPLY_ARRAY: c_int = 3;
pub const REPLY_NULL: c_int = 4;

pub type CmdFunc = unsafe extern "C" fn(*mut Ctx, *mut *mut RString, c_int) -> c_int;

/// `RedisModuleEvent`: a server event's id and the version of its data.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ServerEvent {
    id: u64,
    dataver: u64,
}
type EventFunc = unsafe extern "C" fn(*mut Ctx, ServerEvent, u64, *mut c_void);
/// `RedisModuleEvent_ReplicationRoleChanged` and `RedisModuleEvent_ForkChild`.
const ROLE_CHANGED: ServerEvent = ServerEvent { id: 0, dataver: 1 };
const FORK_CHILD: ServerEvent = ServerEvent { id: 13, dataver: 1 };
type GetApi = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;

/// The API table, filled once by `init`.
pub struct Api {
    set_module_attribs: unsafe extern "C" fn(*mut Ctx, *const c_char, c_int, c_int),
    set_module_options: unsafe extern "C" fn(*mut Ctx, c_int),
    signal_modified_key: unsafe extern "C" fn(*mut Ctx, *mut RString) -> c_int,
    create_command: unsafe extern "C" fn(*mut Ctx, *const c_char, CmdFunc, *const c_char, c_int, c_int, c_int) -> c_int,
    string_ptr_len: unsafe extern "C" fn(*const RString, *mut usize) -> *const c_char,
    create_string: unsafe extern "C" fn(*mut Ctx, *const c_char, usize) -> *mut RString,
    free_string: unsafe extern "C" fn(*mut Ctx, *mut RString),
    call: unsafe extern "C" fn(*mut Ctx, *const c_char, *const c_char, ...) -> *mut CallReply,
    call_reply_type: unsafe extern "C" fn(*mut CallReply) -> c_int,
    call_reply_string_ptr: unsafe extern "C" fn(*mut CallReply, *mut usize) -> *const c_char,
    call_reply_integer: unsafe extern "C" fn(*mut CallReply) -> c_longlong,
    call_reply_length: unsafe extern "C" fn(*mut CallReply) -> usize,
    call_reply_array_element: unsafe extern "C" fn(*mut CallReply, usize) -> *mut CallReply,
    free_call_reply: unsafe extern "C" fn(*mut CallReply),
    reply_with_error: unsafe extern "C" fn(*mut Ctx, *const c_char) -> c_int,
    reply_with_long_long: unsafe extern "C" fn(*mut Ctx, c_longlong) -> c_int,
    reply_with_array: unsafe extern "C" fn(*mut Ctx, std::ffi::c_long) -> c_int,
    reply_with_string_buffer: unsafe extern "C" fn(*mut Ctx, *const c_char, usize) -> c_int,
    reply_with_null: unsafe extern "C" fn(*mut Ctx) -> c_int,
    open_key: unsafe extern "C" fn(*mut Ctx, *mut RString, c_int) -> *mut Key,
    close_key: unsafe extern "C" fn(*mut Key),
    key_type: unsafe extern "C" fn(*mut Key) -> c_int,
    value_length: unsafe extern "C" fn(*mut Key) -> usize,
    hash_get: unsafe extern "C" fn(*mut Key, c_int, ...) -> c_int,
    hash_set: unsafe extern "C" fn(*mut Key, c_int, ...) -> c_int,
    replicate: unsafe extern "C" fn(*mut Ctx, *const c_char, *const c_char, ...) -> c_int,
    get_context_flags: unsafe extern "C" fn(*mut Ctx) -> c_int,
    get_server_info: unsafe extern "C" fn(*mut Ctx, *const c_char) -> *mut c_void,
    server_info_get_field_signed: unsafe extern "C" fn(*mut c_void, *const c_char, *mut c_int) -> c_longlong,
    free_server_info: unsafe extern "C" fn(*mut Ctx, *mut c_void),
    subscribe_to_server_event: unsafe extern "C" fn(*mut Ctx, ServerEvent, EventFunc) -> c_int,
    notify_keyspace_event: unsafe extern "C" fn(*mut Ctx, c_int, *const c_char, *mut RString) -> c_int,
    set_abs_expire: unsafe extern "C" fn(*mut Key, c_longlong) -> c_int,
    zset_first_in_score_range: unsafe extern "C" fn(*mut Key, f64, f64, c_int, c_int) -> c_int,
    zset_range_current_element: unsafe extern "C" fn(*mut Key, *mut f64) -> *mut RString,
    zset_range_next: unsafe extern "C" fn(*mut Key) -> c_int,
    zset_range_stop: unsafe extern "C" fn(*mut Key),
    zset_add: unsafe extern "C" fn(*mut Key, f64, *mut RString, *mut c_int) -> c_int,
    zset_rem: unsafe extern "C" fn(*mut Key, *mut RString, *mut c_int) -> c_int,
    string_set: unsafe extern "C" fn(*mut Key, *mut RString) -> c_int,
    list_push: unsafe extern "C" fn(*mut Key, c_int, *mut RString) -> c_int,
    list_pop: unsafe extern "C" fn(*mut Key, c_int) -> *mut RString,
    /// `RedisModule_ListGet` (Redis 7.0 and later, every Valkey).
    list_get: Option<unsafe extern "C" fn(*mut Key, std::ffi::c_long) -> *mut RString>,
    /// `RedisModule_CachedMicroseconds` (Redis 7.2 and later, every Valkey 8+): the
    /// clock `TIME` answers with there. None on Redis 7.0.
    cached_microseconds: Option<unsafe extern "C" fn() -> c_longlong>,
    // The heap (`heap::Heap`), which `cargo test` builds leave to the system.
    #[cfg_attr(test, allow(dead_code))]
    alloc: unsafe extern "C" fn(usize) -> *mut c_void,
    #[cfg_attr(test, allow(dead_code))]
    realloc: unsafe extern "C" fn(*mut c_void, usize) -> *mut c_void,
    #[cfg_attr(test, allow(dead_code))]
    free: unsafe extern "C" fn(*mut c_void),
}

static API: OnceLock<Api> = OnceLock::new();

/// Looks up every function (`name` without its `RedisModule_` prefix).
///
/// # Safety
/// `ctx` is the context the server passed to `RedisModule_OnLoad`.
unsafe fn lookup(ctx: *mut Ctx) -> Option<Api> {
    // SAFETY: the module ABI puts the server's GetApi first in the load context.
    let get_api: GetApi = unsafe { std::mem::transmute::<*mut c_void, GetApi>(*ctx.cast::<*mut c_void>()) };
    // A function some servers lack: None there.
    macro_rules! get_opt {
        ($name:literal) => {{
            let mut f: *mut c_void = std::ptr::null_mut();
            let name = concat!("RedisModule_", $name, "\0");
            // SAFETY: GetApi writes a function pointer into `f` or fails.
            let found = unsafe { get_api(name.as_ptr().cast(), std::ptr::addr_of_mut!(f).cast()) } == OK && !f.is_null();
            // SAFETY: the server's function has the signature redismodule.h gives it.
            found.then(|| unsafe { std::mem::transmute_copy(&f) })
        }};
    }
    // A function every supported server has: the module does not load without it.
    macro_rules! get {
        ($name:literal) => {
            get_opt!($name)?
        };
    }
    Some(Api {
        set_module_attribs: get!("SetModuleAttribs"),
        set_module_options: get!("SetModuleOptions"),
        signal_modified_key: get!("SignalModifiedKey"),
        create_command: get!("CreateCommand"),
        string_ptr_len: get!("StringPtrLen"),
        create_string: get!("CreateString"),
        free_string: get!("FreeString"),
        call: get!("Call"),
        call_reply_type: get!("CallReplyType"),
        call_reply_string_ptr: get!("CallReplyStringPtr"),
        call_reply_integer: get!("CallReplyInteger"),
        call_reply_length: get!("CallReplyLength"),
        call_reply_array_element: get!("CallReplyArrayElement"),
        free_call_reply: get!("FreeCallReply"),
        reply_with_error: get!("ReplyWithError"),
        reply_with_long_long: get!("ReplyWithLongLong"),
        reply_with_array: get!("ReplyWithArray"),
        reply_with_string_buffer: get!("ReplyWithStringBuffer"),
        reply_with_null: get!("ReplyWithNull"),
        open_key: get!("OpenKey"),
        close_key: get!("CloseKey"),
        key_type: get!("KeyType"),
        value_length: get!("ValueLength"),
        hash_get: get!("HashGet"),
        hash_set: get!("HashSet"),
        replicate: get!("Replicate"),
        get_context_flags: get!("GetContextFlags"),
        get_server_info: get!("GetServerInfo"),
        server_info_get_field_signed: get!("ServerInfoGetFieldSigned"),
        free_server_info: get!("FreeServerInfo"),
        subscribe_to_server_event: get!("SubscribeToServerEvent"),
        notify_keyspace_event: get!("NotifyKeyspaceEvent"),
        set_abs_expire: get!("SetAbsExpire"),
        zset_first_in_score_range: get!("ZsetFirstInScoreRange"),
        zset_range_current_element: get!("ZsetRangeCurrentElement"),
        zset_range_next: get!("ZsetRangeNext"),
        zset_range_stop: get!("ZsetRangeStop"),
        zset_add: get!("ZsetAdd"),
        zset_rem: get!("ZsetRem"),
        string_set: get!("StringSet"),
        list_push: get!("ListPush"),
        list_pop: get!("ListPop"),
        list_get: get_opt!("ListGet"),
        cached_microseconds: get_opt!("CachedMicroseconds"),
        alloc: get!("Alloc"),
        realloc: get!("Realloc"),
        free: get!("Free"),
    })
}

fn api() -> &'static Api {
    API.get().expect("the module API is looked up at load time")
}

/// `RedisModule_Init`: the API table, then the module's name.
///
/// # Safety
/// `ctx` is the context the server passed to `RedisModule_OnLoad`.
pub unsafe fn init(ctx: *mut Ctx, name: &CStr, version: c_int) -> bool {
    if API.get().is_none() {
        // SAFETY: as the caller promises.
        let Some(table) = (unsafe { lookup(ctx) }) else { return false };
        let _ = API.set(table);
    }
    // SAFETY: a load context and a C string.
    unsafe { (api().set_module_attribs)(ctx, name.as_ptr(), version, APIVER_1) };
    // A key written with the key API is signalled as modified by `signal_modified`,
    // not by closing it: the host keeps a row open from its read to its write, and
    // a row it only read must not abort a client's `WATCH` on it.
    // SAFETY: a load context.
    unsafe { (api().set_module_options)(ctx, NO_IMPLICIT_SIGNAL_MODIFIED) };
    true
}

/// The server's clock as `TIME` gives it, in µs since the epoch: the time the
/// server cached for this command where `TIME` answers with that (Redis 7.2 and
/// later, Valkey), else the system's real-time clock, which `TIME` reads on
/// Redis 7.0 (`gettimeofday`). One reading a call (SPEC §4), without a call of
/// `TIME` through `RedisModule_Call`.
pub fn time_us() -> i64 {
    match api().cached_microseconds {
        // SAFETY: takes nothing, reads the server's cached time.
        Some(f) => unsafe { f() },
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX)),
    }
}

/// Tells the server `name` was written (a client's `WATCH` on it aborts, client
/// tracking invalidates it), as a command that writes a key does.
pub fn signal_modified(ctx: *mut Ctx, name: *mut RString) {
    // SAFETY: the command's context and a live key name.
    unsafe { (api().signal_modified_key)(ctx, name) };
}

/// The bytes of a server string (valid while the string lives).
pub fn bytes<'a>(s: *mut RString) -> &'a [u8] {
    let mut len = 0usize;
    // SAFETY: a live string; its bytes stay put while it lives (the caller keeps it).
    unsafe {
        let p = (api().string_ptr_len)(s, &mut len);
        std::slice::from_raw_parts(p.cast::<u8>(), len)
    }
}

/// Registers a command; `first`, `last`, `step`: its key positions.
///
/// # Safety
/// `ctx` is the load context.
pub unsafe fn create_command(ctx: *mut Ctx, name: &CStr, f: CmdFunc, flags: &CStr, first: c_int, last: c_int, step: c_int) -> bool {
    // SAFETY: a load context and C strings.
    unsafe { (api().create_command)(ctx, name.as_ptr(), f, flags.as_ptr(), first, last, step) == OK }
}

/// A command's arguments as byte slices, valid for the command's call.
///
/// # Safety
/// `argv` holds `argc` strings the server passed to a command function.
pub unsafe fn args<'a>(argv: *mut *mut RString, argc: c_int) -> Vec<&'a [u8]> {
    let n = usize::try_from(argc).unwrap_or(0);
    // SAFETY: `i < argc`; the server's strings outlive the command call.
    (0..n).map(|i| bytes(unsafe { *argv.add(i) })).collect()
}

/// A reply of `RedisModule_Call`, freed when dropped.
pub struct Reply(*mut CallReply);

impl Drop for Reply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: a top-level reply of Call, freed once.
            unsafe { (api().free_call_reply)(self.0) }
        }
    }
}

/// A borrowed (nested) reply.
#[derive(Clone, Copy)]
pub struct ReplyRef<'a>(*mut CallReply, std::marker::PhantomData<&'a Reply>);

impl Reply {
    pub fn get(&self) -> Option<ReplyRef<'_>> {
        (!self.0.is_null()).then_some(ReplyRef(self.0, std::marker::PhantomData))
    }
}

impl<'a> ReplyRef<'a> {
    pub fn kind(self) -> c_int {
        // SAFETY: a live reply.
        unsafe { (api().call_reply_type)(self.0) }
    }
    pub fn bytes(self) -> &'a [u8] {
        let mut len = 0usize;
        // SAFETY: a live string or error reply; the bytes live as long as the reply.
        unsafe {
            let p = (api().call_reply_string_ptr)(self.0, &mut len);
            if p.is_null() {
                return &[];
            }
            std::slice::from_raw_parts(p.cast::<u8>(), len)
        }
    }
    pub fn integer(self) -> i64 {
        // SAFETY: a live reply.
        unsafe { (api().call_reply_integer)(self.0) }
    }
    pub fn len(self) -> usize {
        // SAFETY: a live reply.
        unsafe { (api().call_reply_length)(self.0) }
    }
    pub fn item(self, i: usize) -> Option<ReplyRef<'a>> {
        // SAFETY: a live array reply; the element lives as long as its parent.
        let p = unsafe { (api().call_reply_array_element)(self.0, i) };
        (!p.is_null()).then_some(ReplyRef(p, std::marker::PhantomData))
    }
}

/// `RedisModule_Call(ctx, name, "v" [+ "!"], argv, argc)` with the arguments as
/// live server strings (the call takes its own references). `replicate`: the
/// call is propagated to replicas and the AOF as itself (the writes; reads are not).
pub fn call(ctx: *mut Ctx, name: &[u8], argv: &mut [*mut RString], replicate: bool) -> Reply {
    let mut cname = Vec::with_capacity(name.len() + 1);
    cname.extend_from_slice(name);
    cname.push(0);
    let fmt: &[u8] = if replicate { b"v!\0" } else { b"v\0" };
    // SAFETY: `ctx` is the command's context, the name and format C strings, and
    // `argv` live strings with their count.
    Reply(unsafe { (api().call)(ctx, cname.as_ptr().cast(), fmt.as_ptr().cast(), argv.as_mut_ptr(), argv.len()) })
}

/// A block of `size` bytes from the server's allocator (`RedisModule_Alloc`:
/// jemalloc where the server has it, counted in `INFO memory` as the server's
/// own), aligned to 16 bytes. Nothing allocates before `RedisModule_OnLoad` has
/// looked the API up.
#[cfg_attr(test, allow(dead_code))]
pub fn server_alloc(size: usize) -> *mut u8 {
    // SAFETY: the API was looked up at load time; any size may be asked.
    unsafe { (api().alloc)(size).cast() }
}

/// Gives back a block of `server_alloc` or `server_realloc`.
///
/// # Safety
/// `p` is such a block, not used after.
#[cfg_attr(test, allow(dead_code))]
pub unsafe fn server_free(p: *mut u8) {
    // SAFETY: as the caller promises.
    unsafe { (api().free)(p.cast()) }
}

/// A block of `server_alloc` grown or shrunk to `size`.
///
/// # Safety
/// `p` is such a block, not used after (the result replaces it).
#[cfg_attr(test, allow(dead_code))]
pub unsafe fn server_realloc(p: *mut u8, size: usize) -> *mut u8 {
    // SAFETY: as the caller promises.
    unsafe { (api().realloc)(p.cast(), size).cast() }
}

/// Server strings made from bytes, freed when dropped.
pub struct Strings {
    ctx: *mut Ctx,
    pub items: Vec<*mut RString>,
}

impl Strings {
    pub fn empty(ctx: *mut Ctx) -> Strings {
        Strings { ctx, items: vec![] }
    }

    /// One more string, freed with the others; gives it.
    pub fn push(&mut self, bytes: &[u8]) -> *mut RString {
        // SAFETY: the command's context; the server copies the bytes.
        let s = unsafe { (api().create_string)(self.ctx, bytes.as_ptr().cast(), bytes.len()) };
        self.items.push(s);
        s
    }
}

impl Drop for Strings {
    fn drop(&mut self) {
        for s in self.items.drain(..) {
            // SAFETY: made by `new`, freed once.
            unsafe { (api().free_string)(self.ctx, s) }
        }
    }
}

/// One server string made from bytes, freed when dropped, its bytes at hand
/// (a key's name, compared again and again: no call to the server to read it).
pub struct Str {
    ctx: *mut Ctx,
    s: *mut RString,
    ptr: *const u8,
    len: usize,
}

impl Str {
    pub fn new(ctx: *mut Ctx, bytes: &[u8]) -> Str {
        // SAFETY: the command's context; the server copies the bytes.
        let s = unsafe { (api().create_string)(ctx, bytes.as_ptr().cast(), bytes.len()) };
        let mut len = 0usize;
        // SAFETY: a live string; its bytes stay put while it lives (nothing writes it).
        let ptr = unsafe { (api().string_ptr_len)(s, &mut len) }.cast::<u8>();
        Str { ctx, s, ptr, len }
    }
    pub fn raw(&self) -> *mut RString {
        self.s
    }
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the string's bytes, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for Str {
    fn drop(&mut self) {
        // SAFETY: made by `new`, freed once.
        unsafe { (api().free_string)(self.ctx, self.s) }
    }
}

/// A key opened with the key API, closed when dropped (a key written through it
/// is signalled by the host: `signal_modified`).
pub struct OpenKey(*mut Key);

impl OpenKey {
    pub fn read(ctx: *mut Ctx, name: *mut RString) -> OpenKey {
        // SAFETY: the command's context and a live string; NULL for a missing key.
        OpenKey(unsafe { (api().open_key)(ctx, name, READ) })
    }
    pub fn write(ctx: *mut Ctx, name: *mut RString) -> OpenKey {
        // SAFETY: as `read`.
        OpenKey(unsafe { (api().open_key)(ctx, name, READ | WRITE) })
    }
    pub fn kind(&self) -> c_int {
        if self.0.is_null() {
            return KEYTYPE_EMPTY;
        }
        // SAFETY: an open key.
        unsafe { (api().key_type)(self.0) }
    }
    /// The length of the value (a list's: its elements); 0 for an empty key.
    pub fn len(&self) -> usize {
        if self.0.is_null() {
            return 0;
        }
        // SAFETY: an open key.
        unsafe { (api().value_length)(self.0) }
    }
    /// A field of a hash (the key is one): its value, or None.
    pub fn hash_get(&self, field: *mut RString) -> Option<Vec<u8>> {
        if self.0.is_null() {
            return None;
        }
        let mut value: *mut RString = std::ptr::null_mut();
        // SAFETY: an open hash key, a field, a slot for the value and the NULL that
        // ends the list; the value is ours to free.
        unsafe {
            (api().hash_get)(self.0, HASH_NONE, field, std::ptr::addr_of_mut!(value), std::ptr::null_mut::<c_void>());
            taken(value)
        }
    }
    /// The first `n` members of a sorted set (the key is one), in the set's
    /// order, as server strings (into `members`) with their scores.
    pub fn zset_head(&self, n: usize, members: &mut Strings) -> Vec<f64> {
        let mut scores = vec![];
        if self.0.is_null() || n == 0 {
            return scores;
        }
        // Room for the head (as far as a sweep's batch goes): the vectors never grow.
        let room = n.min(1 << 16);
        scores.reserve(room);
        members.items.reserve(room);
        let a = api();
        // SAFETY: an open sorted set; each element is ours (freed with `members`); the range is stopped.
        unsafe {
            if (a.zset_first_in_score_range)(self.0, f64::NEG_INFINITY, f64::INFINITY, 0, 0) != OK {
                return scores;
            }
            while scores.len() < n {
                let mut score = 0f64;
                let member = (a.zset_range_current_element)(self.0, &mut score);
                if member.is_null() {
                    break;
                }
                members.items.push(member);
                scores.push(score);
                if (a.zset_range_next)(self.0) == 0 {
                    break;
                }
            }
            (a.zset_range_stop)(self.0);
        }
        scores
    }

    /// Sets fields of a hash (created if the key is empty), `(field, value)`
    /// pairs; a value of [`DELETE`] deletes its field (a hash left empty is
    /// deleted). Up to nine pairs go in one call of the API (its argument list
    /// is variadic: a new job's row is eight or nine), more in several.
    pub fn hash_set(&self, pairs: &[(*mut RString, *mut RString)]) {
        let f = api().hash_set;
        let end = std::ptr::null_mut::<c_void>();
        for chunk in pairs.chunks(9) {
            // SAFETY: a key open for writing, field and value strings (or the
            // delete marker), the ending NULL.
            unsafe {
                match *chunk {
                    [(f1, v1)] => f(self.0, HASH_NONE, f1, v1, end),
                    [(f1, v1), (f2, v2)] => f(self.0, HASH_NONE, f1, v1, f2, v2, end),
                    [(f1, v1), (f2, v2), (f3, v3)] => f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, end),
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4)] => f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, end),
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5)] => f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, end),
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5), (f6, v6)] => {
                        f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, f6, v6, end)
                    }
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5), (f6, v6), (f7, v7)] => {
                        f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, f6, v6, f7, v7, end)
                    }
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5), (f6, v6), (f7, v7), (f8, v8)] => {
                        f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, f6, v6, f7, v7, f8, v8, end)
                    }
                    [(f1, v1), (f2, v2), (f3, v3), (f4, v4), (f5, v5), (f6, v6), (f7, v7), (f8, v8), (f9, v9)] => {
                        f(self.0, HASH_NONE, f1, v1, f2, v2, f3, v3, f4, v4, f5, v5, f6, v6, f7, v7, f8, v8, f9, v9, end)
                    }
                    _ => 0,
                }
            };
        }
    }
}

impl OpenKey {
    /// Sets the key's expiry to `ms` (Unix time, ms): false if the server
    /// refused (no key).
    pub fn set_abs_expire(&self, ms: i64) -> bool {
        // SAFETY: a key open for writing.
        unsafe { (api().set_abs_expire)(self.0, ms) == OK }
    }

    /// Makes the key the string `value`, whatever it held, without expiry (as
    /// `SET` does): false if the server refused.
    pub fn string_set(&self, value: *mut RString) -> bool {
        // SAFETY: a key open for writing and a live string (the server copies it).
        unsafe { (api().string_set)(self.0, value) == OK }
    }

    /// Adds `member` with `score` to the sorted set (created if the key is
    /// empty): `Some((added, updated))`, None if the server refused (another type).
    pub fn zset_add(&self, score: f64, member: *mut RString) -> Option<(bool, bool)> {
        let mut flags: c_int = 0;
        // SAFETY: a key open for writing, a live member, the flags in and out.
        let ok = unsafe { (api().zset_add)(self.0, score, member, &raw mut flags) } == OK;
        ok.then_some((flags & ZADD_ADDED != 0, flags & ZADD_UPDATED != 0))
    }

    /// Removes `member` from the sorted set (the key is deleted when it is left
    /// empty): whether it was there; None if the server refused (another type).
    pub fn zset_rem(&self, member: *mut RString) -> Option<bool> {
        let mut deleted: c_int = 0;
        // SAFETY: a key open for writing, a live member, the answer out.
        let ok = unsafe { (api().zset_rem)(self.0, member, &raw mut deleted) } == OK;
        ok.then_some(deleted != 0)
    }

    /// Appends `element` to the list (created if the key is empty): false if
    /// the server refused (another type).
    pub fn list_push_tail(&self, element: *mut RString) -> bool {
        // SAFETY: a key open for writing and a live string (the server copies it).
        unsafe { (api().list_push)(self.0, LIST_TAIL, element) == OK }
    }

    /// Removes the list's first (`head`) or last element and gives its bytes
    /// (the key is deleted when it is left empty); None for an empty list.
    pub fn list_pop(&self, head: bool) -> Option<Vec<u8>> {
        // SAFETY: a key open for writing; the element is ours to free.
        unsafe { taken((api().list_pop)(self.0, if head { LIST_HEAD } else { LIST_TAIL })) }
    }

    /// Whether the server can read a list's elements by index (`list_head`).
    pub fn can_index_lists() -> bool {
        api().list_get.is_some()
    }

    /// The list's elements from index 0 to `last` (at most `last + 1` of them);
    /// empty where the server cannot read them by index (`can_index_lists`).
    pub fn list_head(&self, last: usize) -> Vec<Vec<u8>> {
        let (Some(get), false) = (api().list_get, self.0.is_null()) else { return vec![] };
        let n = self.len().min(last.saturating_add(1));
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: an open list and an index in it (read in order: the server
            // keeps an iterator for the next index); the element is ours to free.
            match unsafe { taken(get(self.0, std::ffi::c_long::try_from(i).unwrap_or(std::ffi::c_long::MAX))) } {
                Some(e) => out.push(e),
                None => break,
            }
        }
        out
    }

    /// Whether the sorted set has a member with a score in the range (`*_ex`:
    /// the bound itself excluded).
    pub fn zset_any_in_range(&self, min: f64, max: f64, min_ex: bool, max_ex: bool) -> bool {
        if self.0.is_null() {
            return false;
        }
        let a = api();
        // SAFETY: an open key; a range started is stopped.
        unsafe {
            let found = (a.zset_first_in_score_range)(self.0, min, max, c_int::from(min_ex), c_int::from(max_ex)) == OK;
            if found {
                (a.zset_range_stop)(self.0);
            }
            found
        }
    }
}

/// The bytes of a string the server handed over (a value read, an element
/// popped), then the string freed; None for none.
///
/// # Safety
/// `s` is null or a live string that is ours to free, not used after.
unsafe fn taken(s: *mut RString) -> Option<Vec<u8>> {
    if s.is_null() {
        return None;
    }
    let out = bytes(s).to_vec();
    // SAFETY: as the caller promises.
    unsafe { (api().free_string)(std::ptr::null_mut(), s) };
    Some(out)
}

/// `REDISMODULE_HASH_DELETE`: as a value of `hash_set`, deletes the field.
pub const DELETE: *mut RString = std::ptr::without_provenance_mut::<RString>(1);

impl Drop for OpenKey {
    fn drop(&mut self) {
        if !self.0.is_null() {
            // SAFETY: opened by this value, closed once.
            unsafe { (api().close_key)(self.0) }
        }
    }
}

/// `REDISMODULE_CTX_FLAGS_AOF`: the append-only file is on.
const CTX_FLAGS_AOF: c_int = 1 << 6;

/// What `propagates` last read of the replication state: `UNKNOWN`, `NO`
/// (no replica, no backlog) or `YES`.
static LISTENERS: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const NO: u8 = 1;
const YES: u8 = 2;
/// Whether the server tells the module of the events that end `LISTENERS`'
/// answer (`watch_replication`); if not, the state is read on every call.
static WATCHED: AtomicBool = AtomicBool::new(false);

/// Whether anything takes this server's writes as commands: the append-only
/// file, a replica, or a replication backlog (kept for a replica that comes back
/// and asks for what it missed). Where nothing does, the server propagates no
/// command (a script's writes neither), and `replicate` would only build and
/// drop its arguments. Asked once a call: nothing attaches while a command runs.
/// When the answer cannot be read: yes.
///
/// The replication state costs an `INFO replication` to read (some 10 µs, the
/// cost of a sweep of five rows), so its answer is kept from call to call until
/// an event can change it (`watch_replication`). The AOF is asked each time (a
/// flag).
pub fn propagates(ctx: *mut Ctx) -> bool {
    // SAFETY: the command's context.
    if unsafe { (api().get_context_flags)(ctx) } & CTX_FLAGS_AOF != 0 {
        return true;
    }
    match LISTENERS.load(Ordering::Relaxed) {
        NO => return false,
        YES => return true,
        _ => {}
    }
    // SAFETY: the command's context and a C string; the info is freed below.
    let info = unsafe { (api().get_server_info)(ctx, c"replication".as_ptr()) };
    if info.is_null() {
        return true;
    }
    let field = |name: &CStr| {
        let mut err: c_int = 0;
        // SAFETY: live info, a C string, an out-parameter.
        let v = unsafe { (api().server_info_get_field_signed)(info, name.as_ptr(), &raw mut err) };
        err != 0 || v != 0
    };
    let listened = field(c"repl_backlog_active") || field(c"connected_slaves");
    // SAFETY: got above, freed once.
    unsafe { (api().free_server_info)(ctx, info) };
    if WATCHED.load(Ordering::Relaxed) {
        LISTENERS.store(if listened { YES } else { NO }, Ordering::Relaxed);
    }
    listened
}

/// Subscribes to the events after which `propagates` reads the replication
/// state again. A backlog is made when a replica first syncs, and a full sync
/// forks (the snapshot the replica loads: a write before the fork is in it, one
/// after it goes to the replica as a command, read anew); a replica promoted to
/// primary keeps the backlog it had. A fork for a save or an AOF rewrite only
/// costs one more read. Without both events, the state is read on every call.
///
/// # Safety
/// `ctx` is the load context.
pub unsafe fn watch_replication(ctx: *mut Ctx) {
    // A module unloaded and loaded again may find the answer of its last load:
    // what happened in between went unseen.
    LISTENERS.store(UNKNOWN, Ordering::Relaxed);
    let subscribe = api().subscribe_to_server_event;
    // SAFETY: the load context, the server's event ids, a callback that lives as long as the module.
    let ok =
        unsafe { subscribe(ctx, FORK_CHILD, replication_may_change) == OK && subscribe(ctx, ROLE_CHANGED, replication_may_change) == OK };
    WATCHED.store(ok, Ordering::Relaxed);
}

unsafe extern "C" fn replication_may_change(_ctx: *mut Ctx, _event: ServerEvent, _sub: u64, _data: *mut c_void) {
    LISTENERS.store(UNKNOWN, Ordering::Relaxed);
}

/// Propagates `name args…` to replicas and the AOF, as a command would.
pub fn replicate(ctx: *mut Ctx, name: &CStr, args: &mut [*mut RString]) {
    // SAFETY: the command's context; "v": a vector of live strings and its length.
    unsafe { (api().replicate)(ctx, name.as_ptr(), c"v".as_ptr(), args.as_mut_ptr(), args.len()) };
}

/// A keyspace event (`notify-keyspace-events`) of class `class` (`NOTIFY_*`), as
/// the command the key API stands in for fires it.
pub fn notify(ctx: *mut Ctx, class: c_int, event: &CStr, key: *mut RString) {
    // SAFETY: the command's context, a C string, a live key name.
    unsafe { (api().notify_keyspace_event)(ctx, class, event.as_ptr(), key) };
}

/// The command's reply.
pub fn reply_error(ctx: *mut Ctx, message: &str) {
    // A RESP error is one line: no CR, LF or NUL.
    let line: Vec<u8> = message.bytes().map(|b| if matches!(b, b'\r' | b'\n' | 0) { b' ' } else { b }).chain([0]).collect();
    // SAFETY: the command's context; a NUL-terminated string.
    unsafe { (api().reply_with_error)(ctx, line.as_ptr().cast()) };
}

pub fn reply_int(ctx: *mut Ctx, n: i64) {
    // SAFETY: the command's context.
    unsafe { (api().reply_with_long_long)(ctx, n) };
}

pub fn reply_array(ctx: *mut Ctx, len: usize) {
    // SAFETY: the command's context.
    unsafe { (api().reply_with_array)(ctx, std::ffi::c_long::try_from(len).unwrap_or(0)) };
}

pub fn reply_bytes(ctx: *mut Ctx, b: &[u8]) {
    // SAFETY: the command's context; the server copies the bytes.
    unsafe { (api().reply_with_string_buffer)(ctx, b.as_ptr().cast(), b.len()) };
}

pub fn reply_nil(ctx: *mut Ctx) {
    // SAFETY: the command's context.
    unsafe { (api().reply_with_null)(ctx) };
}

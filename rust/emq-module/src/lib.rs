//! emq's server module: `EMQ.PROMOTE` and `EMQ.STALLED.CHECK` (SPEC §5, §6),
//! a worker's `EMQ.CLAIM`, `EMQ.COMPLETE`, `EMQ.EXTEND`, `EMQ.SETTLE` and `EMQ.ADD` (§7),
//! and the schedules' `EMQ.TIMERS` and `EMQ.SCHEDULE` (§14), as native commands of
//! Redis 7 and Valkey 8/9, run by the same plans as the client host
//! (`emq-plan`), inside the server: no round trips, no `WATCH`, no script
//! interpreter. Their wire forms: `emq_plan::wire`.
//!
//! Load it with `--loadmodule libemq_module.so` (or `MODULE LOAD`); the client
//! runs a sweep on it with `backend="module"`, and a queue's adds, claims,
//! extends, completes and fails with `Queue(..., backend="module")`.
//!
//! `unsafe` lives in `ffi` (the module API), `heap` (the allocator) and in the
//! entry points below.

#![allow(unsafe_code)]

mod exec;
mod ffi;
mod heap;

use std::ffi::{c_int, CStr};

use emq_plan::batch::complete_many::CompleteMany;
use emq_plan::batch::extend_many::ExtendMany;
use emq_plan::batch::settle_many::SettleMany;
use emq_plan::error::{Error, ErrorKind};
use emq_plan::jobs::add::Add;
use emq_plan::jobs::claim::Claim;
use emq_plan::schedules::ops::ScheduleOp;
use emq_plan::sweep::timers::Timers;
use emq_plan::sweep::{Outcome, Sweep};
use emq_plan::wire::schedule_forms::{self, ScheduleRequest};
use emq_plan::wire::JobRequest;
use emq_plan::{wire, Keys, Reply};

use ffi::{Ctx, RString};

#[cfg(not(test))]
#[global_allocator]
static ALLOC: heap::Heap = heap::Heap;

/// The module's name (`MODULE LIST`) and version.
const NAME: &CStr = c"emq";
const VERSION: c_int = 1;

/// Called by the server when it loads the module.
///
/// # Safety
/// Called by the server with its load context.
#[no_mangle]
pub unsafe extern "C" fn RedisModule_OnLoad(ctx: *mut Ctx, _argv: *mut *mut RString, _argc: c_int) -> c_int {
    // SAFETY: the server's load context.
    unsafe {
        if !ffi::init(ctx, NAME, VERSION) {
            return ffi::ERR;
        }
        // Key positions: the wire form has a fixed key count (2 or 3, checked), so
        // a fixed range routes a call in a cluster.
        let flags = c"write deny-oom";
        if !ffi::create_command(ctx, c"EMQ.PROMOTE", sweep_command, flags, 2, 3, 1)
            || !ffi::create_command(ctx, c"EMQ.STALLED.CHECK", sweep_command, flags, 2, 4, 1)
            || !ffi::create_command(ctx, c"EMQ.CLAIM", job_command, flags, 2, 2, 1)
            || !ffi::create_command(ctx, c"EMQ.COMPLETE", job_command, flags, 2, 2, 1)
            || !ffi::create_command(ctx, c"EMQ.EXTEND", job_command, flags, 2, 2, 1)
            || !ffi::create_command(ctx, c"EMQ.SETTLE", job_command, flags, 2, 2, 1)
            || !ffi::create_command(ctx, c"EMQ.ADD", job_command, flags, 2, 2, 1)
            || !ffi::create_command(ctx, c"EMQ.TIMERS", schedule_command, flags, 2, 3, 1)
            || !ffi::create_command(ctx, c"EMQ.SCHEDULE", schedule_command, flags, 2, 2, 1)
        {
            return ffi::ERR;
        }
        ffi::watch_replication(ctx);
    }
    ffi::OK
}

/// Both commands: the wire form checked (`wire::parse`), then the sweep.
unsafe extern "C" fn sweep_command(ctx: *mut Ctx, argv: *mut *mut RString, argc: c_int) -> c_int {
    // SAFETY: the server's arguments for this call.
    let args = unsafe { ffi::args(argv, argc) };
    // A panic must not cross into the server (it would abort it): it becomes an error reply.
    let result = std::panic::catch_unwind(|| sweep(ctx, &args))
        .unwrap_or_else(|_| Err(Error::server("emq module", "ERR the sweep panicked; nothing more was written")));
    match result {
        Ok(Outcome::Promoted(n)) => ffi::reply_int(ctx, n),
        Ok(Outcome::Stalled { recovered, dead }) => {
            ffi::reply_array(ctx, 2);
            for ids in [recovered, dead] {
                ffi::reply_array(ctx, ids.len());
                for id in ids {
                    ffi::reply_bytes(ctx, &id);
                }
            }
        }
        Err(e) => ffi::reply_error(ctx, &error_line(&e)),
    }
    ffi::OK
}

/// `EMQ.CLAIM`, `EMQ.COMPLETE`, `EMQ.EXTEND`, `EMQ.SETTLE` and `EMQ.ADD`: the
/// wire form checked (`wire::parse_job`), then the claim, the completes, the
/// extends, the completes and fails, or the adds, as the client host's
/// conversations.
unsafe extern "C" fn job_command(ctx: *mut Ctx, argv: *mut *mut RString, argc: c_int) -> c_int {
    // SAFETY: the server's arguments for this call.
    let args = unsafe { ffi::args(argv, argc) };
    let result = std::panic::catch_unwind(|| job(ctx, &args))
        .unwrap_or_else(|_| Err(Error::server("emq module", "ERR the call panicked; nothing more was written")));
    match result {
        Ok(reply) => reply_with(ctx, &reply),
        Err(e) => ffi::reply_error(ctx, &error_line(&e)),
    }
    ffi::OK
}

fn job(ctx: *mut Ctx, args: &[&[u8]]) -> emq_plan::error::Result<Reply> {
    match wire::parse_job(args)? {
        JobRequest::Claim { queue, n, lease_ms, tokens } => {
            let mut c = Claim::new(Keys::new(&queue), n, lease_ms, tokens)?;
            Ok(wire::claimed_reply(&exec::run(ctx, &mut c)?))
        }
        JobRequest::Complete { queue, jobs } => {
            let mut c = CompleteMany::with_results(Keys::new(&queue), jobs)?;
            Ok(wire::answers_reply(&exec::run(ctx, &mut c)?))
        }
        JobRequest::Extend { queue, lease_ms, jobs } => {
            let mut c = ExtendMany::new(Keys::new(&queue), jobs, lease_ms)?;
            Ok(wire::answers_reply(&exec::run(ctx, &mut c)?))
        }
        JobRequest::Settle { queue, jobs } => {
            let mut c = SettleMany::new(Keys::new(&queue), jobs)?;
            Ok(wire::settled_reply(&exec::run(ctx, &mut c)?))
        }
        JobRequest::Add { queue, gen, jobs } => {
            let mut c = Add::new(Keys::new(&queue), jobs, gen)?;
            let ids = exec::run(ctx, &mut c)?;
            Ok(wire::added_reply(&ids, c.created()))
        }
    }
}

/// `EMQ.TIMERS` and `EMQ.SCHEDULE` (SPEC §14): the wire form checked
/// (`wire::schedule_forms`), then TIMERS or the schedule verb, as the client
/// host's conversations.
unsafe extern "C" fn schedule_command(ctx: *mut Ctx, argv: *mut *mut RString, argc: c_int) -> c_int {
    // SAFETY: the server's arguments for this call.
    let args = unsafe { ffi::args(argv, argc) };
    let result = std::panic::catch_unwind(|| schedule(ctx, &args))
        .unwrap_or_else(|_| Err(Error::server("emq module", "ERR the call panicked; nothing more was written")));
    match result {
        Ok(reply) => reply_with(ctx, &reply),
        Err(e) => ffi::reply_error(ctx, &error_line(&e)),
    }
    ffi::OK
}

fn schedule(ctx: *mut Ctx, args: &[&[u8]]) -> emq_plan::error::Result<Reply> {
    match schedule_forms::parse_schedule(args)? {
        ScheduleRequest::Timers { queue, batch } => {
            let mut t = Timers::in_server(Keys::new(&queue), batch);
            Ok(schedule_forms::ticked_reply(&exec::run(ctx, &mut t)?))
        }
        ScheduleRequest::Op { queue, name, op } => {
            let mut c = ScheduleOp::new(Keys::new(&queue), name, op)?.in_server();
            Ok(schedule_forms::answer_reply(&exec::run(ctx, &mut c)?))
        }
    }
}

/// Writes `reply` (what `wire` builds: arrays, strings, integers, nil) as the command's reply.
fn reply_with(ctx: *mut Ctx, reply: &Reply) {
    match reply {
        Reply::Array(items) => {
            ffi::reply_array(ctx, items.len());
            for r in items {
                reply_with(ctx, r);
            }
        }
        Reply::Bulk(b) => ffi::reply_bytes(ctx, b),
        Reply::Int(n) => ffi::reply_int(ctx, *n),
        Reply::Nil => ffi::reply_nil(ctx),
        other => ffi::reply_error(ctx, &format!("ERR emq module: no reply of the form {other:?}")),
    }
}

fn sweep(ctx: *mut Ctx, args: &[&[u8]]) -> emq_plan::error::Result<Outcome> {
    let req = wire::parse(args)?;
    let mut s = Sweep::in_server(req.kind, Keys::new(&req.queue), req.batch);
    exec::run(ctx, &mut s)
}

/// The error reply, with the codes of the Lua scripts' replies: `EMQLAYOUT`,
/// `EMQARG`, `EMQDUP` (an add's id taken), and a server error as the server
/// gave it (its own code first).
fn error_line(e: &Error) -> String {
    match e.kind {
        ErrorKind::Layout => format!("EMQLAYOUT {}", e.message),
        ErrorKind::Argument => format!("EMQARG {}", e.message),
        // An add's id that another job has (no script adds: a code of the module's own).
        ErrorKind::Duplicate => format!("EMQDUP {}", e.message),
        _ => match e.message.split_once(": ") {
            Some((_, server)) if server.split(' ').next().is_some_and(|c| !c.is_empty() && c.bytes().all(|b| b.is_ascii_uppercase())) => {
                server.to_string()
            }
            _ => format!("ERR {}", e.message),
        },
    }
}

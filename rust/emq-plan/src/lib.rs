//! emq's plans, with no I/O and no Python.
//!
//! Every emq call is a short conversation with the server, driven by a host:
//! the client host (`emq-host`, over its own connection) or the server module
//! (`emq-module`, inside Valkey/Redis). The host sends the reads this crate asks
//! for, hands back the replies, and at the end applies the write plan in one
//! `MULTI`/`EXEC` (the module: one command). Everything that decides (which
//! members are due, ghosts, lane rows, lane control, what to write, what to
//! answer) lives here, so it can be unit-tested and fuzzed without a server.
//!
//! Folders by role, each `mod.rs` saying what it holds:
//!
//! - the contract's vocabulary: `names` (queue names, keys; SPEC §1, §2),
//!   `numbers` (stored integers, arguments, times), `clock` (§4), `backoff`
//!   (the one capped exponential backoff), `error` (§10);
//! - `protocol`: the conversation a host drives, its commands, replies and
//!   guard (§9);
//! - the conversations: `sweep` (PROMOTE §5, STALLED CHECK §6), `jobs` (add,
//!   claim, extend/complete/fail, retention), `batch` (a worker's jobs at once,
//!   and the group commit that claims), `lanes` (offer(L) and lane control),
//!   `reads` (a row, the lanes, the counts), `operations` (an operator's: a
//!   page of jobs by state, retry, delete, promote now, the lanes' controls),
//!   `registry` (the queues used and the workers alive, SPEC §17),
//!   `schedules` (the time arithmetic of periodic schedules, SPEC §14: cron,
//!   zones, due ticks);
//! - `wire`: the forms of the module's commands and their replies.
//!
//! Modules import one another, never this root: it only declares and re-exports.

#![forbid(unsafe_code)]

pub mod backoff;
pub mod batch;
pub mod clock;
pub mod error;
pub mod jobs;
pub mod lanes;
pub mod names;
pub mod numbers;
pub mod operations;
pub mod protocol;
pub mod reads;
pub mod registry;
pub mod schedules;
pub mod sweep;
pub mod wire;

pub use error::{Error, ErrorKind};
pub use lanes::offer::WAKE_MAX;
pub use names::Keys;
pub use protocol::cmd::Cmd;
pub use protocol::reply::Reply;
pub use protocol::write::Write;

//! emq's sweep plans, with no I/O and no Python.
//!
//! A sweep is a short conversation with the server, driven by a host (the PyO3
//! extension today, a Valkey module later). The host sends the reads this crate
//! asks for, hands back the replies, and at the end applies the write plan in one
//! `MULTI`/`EXEC`. Everything that decides (which members are due, ghosts, lane
//! rows, lane control, what to write, what to answer) lives here, so it can be
//! unit-tested and fuzzed without a server.

pub mod add;
pub mod claim;
pub mod cmd;
pub mod conversation;
pub mod error;
pub mod lane_ops;
pub mod lanes;
pub mod look;
pub mod names;
pub mod promote;
pub mod reply;
pub mod retention;
pub mod rows;
pub mod settle;
pub mod stalled;
pub mod sweep;
pub mod wire;

pub use cmd::Cmd;
pub use error::{Error, ErrorKind};
pub use names::Keys;
pub use reply::Reply;

/// Most wake tokens kept in `P wake` (SPEC §2).
pub const WAKE_MAX: i64 = 64;

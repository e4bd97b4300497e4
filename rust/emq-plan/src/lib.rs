//! emq's plans, with no I/O and no Python.
//!
//! Every emq call is a short conversation with the server, driven by a host (the
//! `PyO3` extension today, a Valkey module later). The host sends the reads this
//! crate asks for, hands back the replies, and at the end applies the write plan
//! in one `MULTI`/`EXEC`. Everything that decides (which members are due, ghosts,
//! lane rows, lane control, what to write, what to answer) lives here, so it can
//! be unit-tested and fuzzed without a server.
//!
//! One home per concept; each module's opening comment says what it owns:
//!
//! - the contract's vocabulary: `names` (queue names, keys; SPEC §1, §2),
//!   `numbers` (stored integers, arguments, times), `clock` (§4), `cmd`, `reply`,
//!   `error` (§10);
//! - the conversation and its guard: `conversation` (the host's protocol),
//!   `guard` (§9: what each conversation watches and why), `rows` (reading rows,
//!   telling ghosts), `offer` (lane control and offer(L), §2), `retention`;
//! - the conversations: `sweep` (PROMOTE §5, STALLED CHECK §6), `add`, `claim`,
//!   `settle` (extend, complete, fail), `extend_many` and `complete_many` (a
//!   worker's jobs at once), `both` (two of them as one call: a group commit
//!   that claims), `lane_control` (§7), `look` (reads);
//! - `backoff` (the one capped exponential backoff) and `wire` (the sweeps'
//!   wire form).
//!
//! Modules import one another, never this root: it only declares and re-exports.

#![forbid(unsafe_code)]

pub mod add;
pub mod backoff;
pub mod both;
pub mod claim;
pub mod clock;
pub mod cmd;
pub mod complete_many;
pub mod conversation;
pub mod error;
pub mod extend_many;
pub mod guard;
pub mod lane_control;
pub mod look;
pub mod names;
pub mod numbers;
pub mod offer;
pub mod reply;
pub mod retention;
pub mod rows;
pub mod schedules;
pub mod settle;
pub mod settle_many;
pub mod sweep;
pub mod wire;

pub use cmd::Cmd;
pub use error::{Error, ErrorKind};
pub use names::Keys;
pub use offer::WAKE_MAX;
pub use reply::Reply;

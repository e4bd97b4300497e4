//! The sweeps that move time, PROMOTE (SPEC §5) and STALLED CHECK (§6), and
//! their sibling TIMERS (§14: schedules' ticks, `timers`):
//! what a sweep reads and plans (`types`), each sweep's write plan, a pure
//! function of the read (`promote`, `stalled`), and [`Sweep`], the reads under
//! the guard that feed the plans (`conversation`, its steps by role in
//! `selection`, `rows_and_lanes`, `groups` and `planning`).

pub mod conversation;
mod groups;
mod planning;
pub mod promote;
mod rows_and_lanes;
mod selection;
pub mod stalled;
pub mod timers;
pub mod types;

pub use conversation::Sweep;
pub use types::{Kind, Lane, Outcome, Plan, Read, Row, Step, Types, PROMOTE, STALLED};

//! The sweeps that move time, PROMOTE (SPEC §5) and STALLED CHECK (§6), and
//! their sibling TIMERS (§14: schedules' ticks, `timers`):
//! what a sweep reads and plans (`types`), each sweep's write plan, a pure
//! function of the read (`promote`, `stalled`), and [`Sweep`], the reads under
//! the guard that feed the plans (`steps`).

pub mod promote;
pub mod stalled;
pub mod steps;
pub mod timers;
pub mod types;

pub use steps::Sweep;
pub use types::{Kind, Lane, Outcome, Plan, Read, Row, Step, Types, PROMOTE, STALLED};

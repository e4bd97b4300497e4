//! The two sweeps that move time, PROMOTE (SPEC §5) and STALLED CHECK (§6).
//!
//! - `types`: what a sweep reads and plans (rows, lanes, the plan, the reply);
//! - `promote`, `stalled`: each sweep's write plan, a pure function of the read;
//! - `conversation`: [`Sweep`], the reads under the guard (`crate::guard`) that
//!   feed the plans.
//!
//! The children import one another directly; this module only re-exports.

pub mod conversation;
pub mod promote;
pub mod stalled;
pub mod types;

pub use conversation::Sweep;
pub use types::{Kind, Lane, Outcome, Plan, Read, Row, Step, Types, PROMOTE, STALLED};

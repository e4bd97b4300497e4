//! The time arithmetic of periodic schedules (SPEC §14): when a schedule ticks,
//! which ticks a sweep enqueues after a stop, and each tick's job id.
//!
//! - `cron`: the cron dialect, parsed, and its matching wall clock times;
//! - `zone`: IANA time zones from the database bundled into the binary, and the
//!   daylight saving rules (a wall clock time ticks at the first instant the
//!   zone's clock shows it or later);
//! - `spec`: a schedule's spec (cron in a zone, or a fixed interval anchored at
//!   the epoch) and its next and latest ticks.

pub mod cron;
pub mod spec;
pub mod zone;

pub use spec::Spec;
pub use zone::tzdb_version;

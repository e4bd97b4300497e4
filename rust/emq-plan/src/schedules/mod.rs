//! The time arithmetic of periodic schedules (SPEC §14): when a schedule ticks,
//! which ticks a sweep enqueues after a stop, and each tick's job id.
//!
//! Pure and shared by every host (the client's and the server module's sweeps
//! run this same code, so they agree on every tick and id):
//!
//! - `cron`: the cron dialect, parsed, and its matching wall clock times;
//! - `zone`: IANA time zones from the database bundled into the binary, and the
//!   daylight saving rules (a wall clock time ticks at the first instant the
//!   zone's clock shows it or later);
//! - `spec`: a schedule's spec (cron in a zone, or a fixed interval anchored at
//!   the epoch) and its next and latest ticks;
//! - `due`: the missed-tick policies and the ticks a sweep enqueues;
//! - `tick_id`: `schedule:<name>:<tick ms>` and the schedule name's limits;
//! - `record`: a schedule as `P schedules` keeps it (JSON) and as a caller
//!   defines it;
//! - `tick_jobs`: the ticks' jobs, added as ADD adds them (shared by TIMERS,
//!   `crate::sweep::timers`, and RUN NOW);
//! - `ops`: the schedule verbs (SCHEDULE, UNSCHEDULE, PAUSE, RESUME, RUN NOW)
//!   and the listing, as conversations.
//!
//! `cron` and `zone` are this module's own (the public API speaks ms and
//! strings, not jiff's types); `docs/schedules-arith.md` is the account of the
//! rules.

mod cron;
pub mod due;
pub mod ops;
pub mod record;
pub mod spec;
pub mod tick_id;
pub mod tick_jobs;
mod zone;

#[cfg(test)]
mod tests;

pub use due::{due_ticks, Due, Missed, MAX_MISSED_LIMIT};
pub use spec::Spec;
pub use tick_id::{parse_tick_id, schedule_name_problem, tick_id, SCHEDULE_NAME_MAX};
pub use zone::tzdb_version;

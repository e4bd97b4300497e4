//! The time arithmetic of periodic schedules (SPEC §14): when a schedule ticks,
//! which ticks a sweep enqueues after a stop, and each tick's job id.
//!
//! - `cron`: the cron dialect, parsed, and its matching wall clock times.

pub mod cron;

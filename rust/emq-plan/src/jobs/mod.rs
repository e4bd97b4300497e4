//! A job's own calls (SPEC §7, §13): ADD (`add`), CLAIM (`claim`), EXTEND,
//! COMPLETE and FAIL of one held job (`settle`), PROGRESS (`progress`), CANCEL
//! (`cancel`), a waiter's registration (`waiters`), how a job's run ends for its
//! waiters and its cancel (`ending`), and the retention of done and dead rows
//! that a complete or a death applies (`retention`).

pub mod add;
pub mod cancel;
pub mod claim;
pub mod counters;
pub mod ending;
pub mod progress;
pub mod retention;
pub mod settle;
pub mod waiters;

//! The facade's reads, as conversations: a job's row and many rows at once
//! (`job_row`), the requests to stop running jobs (`cancels`), the names of a
//! queue's lanes (`lane_names`), and the counts of every place (`counts`).
//! The facade never spells a key; any error reply is an error here, never a value.

pub mod cancels;
pub mod counts;
pub mod job_row;
pub mod lane_names;

pub use counts::{Counts, CountsRead, COUNTS};
pub use job_row::{Get, JobRow, Status, GET, ROW_FIELDS, STATUS, STATUS_MAX};
pub use lane_names::{Lanes, LANES};

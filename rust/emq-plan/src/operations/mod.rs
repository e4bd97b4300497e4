//! An operator's operations on a queue, as conversations: a page of the jobs
//! in one place (`page`), the actions on chosen jobs, retry, delete and promote
//! now (`act`), the lanes' controls as they stand (`lane_controls`), and the
//! per-minute counters of settled jobs (`throughput`). The
//! dashboard and the CLI use only these, so they check and refuse as the API does.

pub mod act;
pub mod lane_controls;
pub mod page;
pub mod throughput;

pub use act::{Act, Action, Answer};
pub use lane_controls::{LaneControls, LANE_CONTROLS};
pub use page::{JobPage, Page, Place, JOBS, MAX_PAGE};
pub use throughput::{Minute, Minutes, Throughput, THROUGHPUT};

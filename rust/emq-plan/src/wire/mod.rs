//! The wire forms of the module's commands (every one the module registers): the
//! sweeps' (`sweep_form`), a worker's calls (`job_forms`) and their replies
//! (`job_replies`), the schedules' (`schedule_forms`), after the routing head
//! they share (`routing`).

pub mod job_forms;
pub mod job_replies;
pub mod routing;
pub mod schedule_forms;
pub mod sweep_form;

pub use job_forms::{add_cmd, claim_cmd, complete_cmd, extend_cmd, micros, parse_job, settle_cmd, JobRequest, FORM_VERSION, SETTLE};
pub use job_replies::{added_reply, answers_reply, claimed_reply, parse_added, parse_answers, parse_claimed, parse_settled, settled_reply};
pub use sweep_form::{parse, Request};

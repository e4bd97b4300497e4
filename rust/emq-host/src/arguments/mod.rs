//! Every argument of every call, checked in one place as the core takes it from
//! Python: text, queue names, job ids and lanes, a job's data and a fail's
//! error (`text`), counts (`numbers`), durations and times (`durations`), the
//! jobs to add and the held jobs (`jobs`), results, errors' details, progress,
//! inboxes and ids (`outcomes`), backends (`backends`).
//!
//! A refusal is an `emq.ArgumentError` that names the call the user made
//! (`Queue.add`, `emq.connect`) and the argument, never the bad value (its type
//! name at most: a value may be a secret, or huge); a call checks all of its
//! arguments before it sends anything, so a refusal writes nothing. The Python
//! facade checks nothing itself and states every default; the core takes the
//! values it is given.

mod backends;
mod durations;
mod jobs;
mod numbers;
mod outcomes;
pub mod text;

pub use backends::{group, job_backend, sweep_backend, JobBackendName, SweepBackend};
pub use durations::{duration, optional_duration, Least, Span};
pub use jobs::{completions, fail_of, held, held_jobs, new_job, new_jobs, settle_items};
pub use numbers::{count, integer, optional_count, MAX_STORED};
pub use outcomes::{ids, inbox, progress, result};
pub use text::{command, command_arg, distinct_ids, name, queue_name, refused, text, type_name};

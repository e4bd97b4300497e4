//! `emq._core`, the Python module: the registry of its classes (`Client`,
//! `QueueCore`, `Job`), functions and constants. The work is the modules':
//! `arguments` (every argument checked), `client` and `queue_core` (the calls),
//! `job_backend` (`plan_backend`, `module_backend`), `sweep_calls` and
//! `sweeps`, `reads`, `operations` (an operator's), `registry` (queues and workers),
//! `outcome_calls` (SPEC §13's calls that are not settles), `drive` (a
//! conversation on the wire), `conn` and `cluster` (connections),
//! `py_values` (answers as Python values), `error` (the exception classes).

mod allocator;
mod arguments;
mod claim_tokens;
mod client;
mod cluster;
mod conn;
mod drive;
mod error;
mod jitter;
mod job_backend;
mod job_class;
mod job_ids;
mod module_backend;
mod operations;
mod outcome_calls;
mod plan_backend;
mod py_values;
mod queue_core;
mod reads;
mod registry;
mod schedules;
mod signals;
mod sweep_calls;
mod sweeps;
mod test_hooks;
mod tools;
mod worker_helpers;

use pyo3::prelude::*;
use pyo3::types::PyDict;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    signals::install();
    m.add_class::<client::Client>()?;
    m.add_class::<queue_core::QueueCore>()?;
    m.add_class::<job_class::Job>()?;
    m.add_function(wrap_pyfunction!(sweep_calls::promote, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_calls::stalled_check, m)?)?;
    m.add_function(wrap_pyfunction!(sweep_calls::wire_form, m)?)?;
    m.add_function(wrap_pyfunction!(tools::queue_slot, m)?)?;
    m.add_function(wrap_pyfunction!(registry::registered_queues, m)?)?;
    m.add_function(wrap_pyfunction!(registry::live_workers, m)?)?;
    m.add_function(wrap_pyfunction!(registry::worker_beat, m)?)?;
    m.add_function(wrap_pyfunction!(registry::worker_leave, m)?)?;
    m.add_function(wrap_pyfunction!(tools::parse_info, m)?)?;
    m.add_function(wrap_pyfunction!(worker_helpers::backoff_s, m)?)?;
    m.add_function(wrap_pyfunction!(worker_helpers::check_duration, m)?)?;
    m.add_function(wrap_pyfunction!(worker_helpers::check_integer, m)?)?;
    m.add_function(wrap_pyfunction!(test_hooks::panic_while_watching, m)?)?;
    m.add_function(wrap_pyfunction!(test_hooks::spin_us, m)?)?;
    m.add_function(wrap_pyfunction!(test_hooks::sweep_group, m)?)?;
    m.add("PROMOTE_LUA", sweeps::PROMOTE_LUA.as_str())?;
    m.add("STALLED_LUA", sweeps::STALLED_LUA.as_str())?;
    // The caps, for the tests and benches: one place each, here.
    m.add("WAKE_MAX", emq_plan::WAKE_MAX)?;
    m.add("MAX_CLAIM", emq_plan::jobs::claim::MAX_CLAIM)?;
    m.add("TRIM_SLACK", emq_plan::jobs::retention::TRIM_SLACK)?;
    m.add("RE_READ_SLACK", emq_plan::protocol::guard::RE_READ_SLACK)?;
    m.add("LEASE_MARK_MS", emq_plan::protocol::guard::LEASE_MARK_MS)?;
    m.add("LEASE_MARK_KEEP_MS", emq_plan::protocol::guard::LEASE_MARK_KEEP_MS)?;
    m.add("ROW_GROUP", emq_plan::protocol::rows::GROUP)?;
    m.add("MAX_ATTEMPTS", drive::MAX_ATTEMPTS)?;
    m.add("MAX_PAGE", emq_plan::operations::MAX_PAGE)?;
    m.add("ACT_BATCH", emq_plan::operations::act::ACT_BATCH)?;
    // SPEC §13's limits, for the task layer and the tests.
    m.add("RESULT_MAX", emq_plan::jobs::ending::RESULT_MAX)?;
    m.add("TRACEBACK_MAX", emq_plan::jobs::ending::TRACEBACK_MAX)?;
    m.add("PROGRESS_MAX", emq_plan::jobs::ending::PROGRESS_MAX)?;
    m.add("WAITERS_MAX", emq_plan::jobs::ending::WAITERS_MAX)?;
    m.add("INBOX_KEEP_MS", emq_plan::protocol::write::INBOX_KEEP_MS)?;
    m.add("CANCELS_OVERLAP_MS", emq_plan::reads::cancels::CANCELS_OVERLAP_MS)?;
    let defaults = PyDict::new(m.py());
    defaults.set_item("done_ms", emq_plan::jobs::retention::DONE_MS)?;
    defaults.set_item("dead_ms", emq_plan::jobs::retention::DEAD_MS)?;
    defaults.set_item("dead_max", emq_plan::jobs::retention::DEAD_MAX)?;
    m.add("RETENTION_DEFAULTS", defaults)?;
    Ok(())
}

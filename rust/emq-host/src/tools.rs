//! The module's functions for tools and tests: a queue's cluster slot, and
//! `INFO` text as a dict.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arguments::queue_name;
use crate::cluster;
use crate::py_values;

/// The cluster slot of every key of `queue` (`CLUSTER KEYSLOT emq:{queue}:…`).
#[pyfunction]
pub fn queue_slot(queue: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(cluster::queue_slot(&queue_name("emq.queue_slot", "queue", queue)?))
}

/// Parses `INFO` text into a dict of str.
#[pyfunction]
pub fn parse_info<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    py_values::info(py, text)
}

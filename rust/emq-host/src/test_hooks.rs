//! Hooks for the tests, as module functions of their own (never a facade's
//! call): a panic while a call holds the connection, a connection's spin, and
//! how a sweep groups its rows on a server.

use emq_plan::sweep::Kind;
use emq_plan::Cmd;
use pyo3::prelude::*;

use crate::arguments::text;
use crate::client::Client;
use crate::error::{HostError, HostResult};
use crate::sweeps;

/// Watches `key` and panics while the connection is held, leaving a watch and
/// the lock poisoned behind: the next call must run on a new connection.
#[pyfunction(name = "_panic_while_watching")]
pub fn panic_while_watching(py: Python<'_>, client: &Client, key: &Bound<'_, PyAny>) -> PyResult<()> {
    let key = text("_panic_while_watching", "key", key)?;
    client.with(py, |c| -> HostResult<()> {
        c.one(Cmd::new("WATCH").arg(key))?;
        panic!("emq: a panic for the tests, while a call holds the connection");
    })
}

/// How long the client's reads poll before they sleep (µs): its `spin`,
/// between sweeps too (`Conn::sweeping` lends a sweep a longer one).
#[pyfunction(name = "_spin_us")]
pub fn spin_us(py: Python<'_>, client: &Client) -> PyResult<u64> {
    client.with(py, |c| Ok(u64::try_from(c.spin().as_micros()).unwrap_or(u64::MAX)))
}

/// How a plan-backend sweep of `kind` (`"promote"` or `"stalled"`) with
/// `batch` and `group` splits its selection on the client's server
/// (`sweeps::group_for`): `(rows, watch_cap)`.
#[pyfunction(name = "_sweep_group")]
#[pyo3(signature = (client, kind, batch, group=None))]
pub fn sweep_group(py: Python<'_>, client: &Client, kind: &str, batch: u64, group: Option<u64>) -> PyResult<(u64, Option<u64>)> {
    let kind = match kind {
        "promote" => Kind::Promote,
        "stalled" => Kind::Stalled { max_stalled: None },
        _ => return Err(HostError::Argument("_sweep_group: kind must be \"promote\" or \"stalled\"".into()).into()),
    };
    client.with(py, |c| sweeps::group_for(c, kind, batch, group)).map(|g| (g.rows, g.watch_cap))
}

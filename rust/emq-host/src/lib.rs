//! `emq._core`: the connection owned by the core, and the sweeps.
//!
//! Every call that waits on the server releases the GIL (`py.detach`), so other
//! Python threads run while this one waits.

mod conn;
mod drive;
mod error;
mod jobs;
mod look;
mod resp;
mod sweeps;

use std::sync::Mutex;
use std::time::Duration;

use emq_plan::sweep::{Kind, Outcome, PROMOTE, STALLED};
use emq_plan::add::{NewJob, When};
use emq_plan::lane_ops::LaneOp;
use emq_plan::settle::{Action, Settled};
use emq_plan::{names, wire, Cmd, Reply};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use conn::Conn;

// Sweeps allocate many small buffers (commands out, replies in); mimalloc keeps
// that off the system allocator's slow paths.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
use error::{HostError, HostResult};
use sweeps::Backend;

/// A connection to one server, owned by the Rust core. Thread-safe: calls from
/// several threads take turns on the one connection.
#[pyclass(frozen, module = "emq._core")]
struct Client {
    conn: Mutex<Conn>,
    #[pyo3(get)]
    address: String,
}

impl Client {
    /// Runs `f` on the connection with the GIL released.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Conn) -> HostResult<T> + Send) -> PyResult<T> {
        py.detach(|| {
            let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .map_err(PyErr::from)
    }
}

#[pymethods]
impl Client {
    #[new]
    #[pyo3(signature = (url, *, connect_timeout=5.0, read_timeout=30.0))]
    fn new(py: Python<'_>, url: &str, connect_timeout: f64, read_timeout: Option<f64>) -> PyResult<Self> {
        let secs = |name: &str, v: f64| -> HostResult<Duration> {
            Duration::try_from_secs_f64(v).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
                HostError::Argument(format!("emq.connect: {name} must be a positive number of seconds, not {v}"))
            })
        };
        let ct = secs("connect_timeout", connect_timeout)?;
        let rt = read_timeout.map(|v| secs("read_timeout", v)).transpose()?;
        let conn = Conn::open(url, ct, rt)?;
        let address = conn.address.clone();
        let client = Client { conn: Mutex::new(conn), address };
        // Connect now, so a bad address fails here and not on first use.
        client.with(py, |c| c.one(Cmd::new("PING")).map(drop))?;
        Ok(client)
    }

    /// `PING`: `True` when the server answers.
    fn ping(&self, py: Python<'_>) -> PyResult<bool> {
        let r = self.with(py, |c| c.one(Cmd::new("PING")))?;
        Ok(matches!(r, Reply::Status(ref s) if s == "PONG"))
    }

    /// The server's clock in ms: `TIME` as `sec * 1000 + floor(usec / 1000)`.
    fn time_ms(&self, py: Python<'_>) -> PyResult<i64> {
        let r = self.with(py, |c| c.one(Cmd::new("TIME")))?;
        emq_plan::sweep::parse_time(&r).ok_or_else(|| HostError::Server("TIME gave no clock".into()).into())
    }

    /// Any command, for tools and tests: replies as Python values (bytes,
    /// int, str, list, None); an error reply raises `emq.ServerError`.
    #[pyo3(signature = (*args))]
    fn command<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let cmd = Cmd::from_args(args.iter().map(|a| arg_bytes(&a)).collect::<PyResult<Vec<_>>>()?);
        if cmd.argc() == 0 {
            return Err(HostError::Argument("command: no command given".into()).into());
        }
        let r = self.with(py, |c| c.one(cmd))?;
        to_py(py, r)
    }

    /// Several commands in one round trip; error replies come back as
    /// `emq.ServerError` instances in the list, not raised.
    fn pipeline<'py>(&self, py: Python<'py>, cmds: Vec<Vec<Bound<'py, PyAny>>>) -> PyResult<Bound<'py, PyList>> {
        let cmds: Vec<Cmd> = cmds
            .iter()
            .map(|c| Ok(Cmd::from_args(c.iter().map(arg_bytes).collect::<PyResult<Vec<_>>>()?)))
            .collect::<PyResult<_>>()?;
        let replies = self.with(py, |c| c.pipeline(&cmds))?;
        let out = PyList::empty(py);
        for r in replies {
            match r {
                Reply::Error { message, .. } => out.append(PyErr::from(HostError::Server(message)).into_value(py))?,
                r => out.append(to_py(py, r)?)?,
            }
        }
        Ok(out)
    }

    /// PROMOTE (SPEC §5): the number of ids taken out of `schedule`. The facade
    /// (`emq.promote`) gives the defaults.
        fn promote(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, batch: &Bound<'_, PyAny>, backend: &str) -> PyResult<i64> {
        let (q, batch, backend) = (queue_arg(PROMOTE, queue)?, count(PROMOTE, "batch", batch, false)?, backend_arg(PROMOTE, backend)?);
        match self.with(py, |c| sweeps::run(c, backend, Kind::Promote, &q, batch))? {
            Outcome::Promoted(n) => Ok(n),
            _ => unreachable!("promote gives a count"),
        }
    }

    /// PROMOTE for a worker's beat: `(moved, now_ms, next_ms)`, where `next_ms`
    /// is the first due time past the call's clock reading that it saw (`None`:
    /// nothing else scheduled; `now_ms`: the batch was all due, more may be).
    fn _promote_next(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, batch: &Bound<'_, PyAny>) -> PyResult<(i64, i64, Option<f64>)> {
        let (q, batch) = (queue_arg(PROMOTE, queue)?, count(PROMOTE, "batch", batch, false)?);
        match self.with(py, |c| sweeps::run_plan_timed(c, Kind::Promote, &q, batch))? {
            (Outcome::Promoted(n), (now, next)) => Ok((n, now, next)),
            _ => unreachable!("promote gives a count"),
        }
    }

    /// STALLED CHECK (SPEC §6): `(recovered ids, dead ids)`; `max_stalled=None`:
    /// nothing dies.
        fn stalled_check<'py>(
        &self,
        py: Python<'py>,
        queue: &Bound<'py, PyAny>,
        max_stalled: Option<&Bound<'py, PyAny>>,
        batch: &Bound<'py, PyAny>,
        backend: &str,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let q = queue_arg(STALLED, queue)?;
        let max_stalled = max_stalled.map(|m| count(STALLED, "max_stalled", m, true)).transpose()?;
        let (batch, backend) = (count(STALLED, "batch", batch, false)?, backend_arg(STALLED, backend)?);
        let outcome = self.with(py, |c| sweeps::run(c, backend, Kind::Stalled { max_stalled }, &q, batch))?;
        let Outcome::Stalled { recovered, dead } = outcome else { unreachable!("a stalled check gives two lists") };
        PyTuple::new(py, [id_list(py, recovered)?, id_list(py, dead)?])
    }

    /// The wire form: the seed's EVALSHA tail with the command's name first,
    /// checked as the module checks it, then run by `backend`.
    #[pyo3(signature = (*args, backend="plan"))]
    fn wire<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>, backend: &str) -> PyResult<Bound<'py, PyAny>> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| arg_bytes(&a)).collect::<PyResult<_>>()?;
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let req = wire::parse(&refs).map_err(HostError::from)?;
        let backend = backend_arg(req.kind.verb(), backend)?;
        match self.with(py, |c| sweeps::run(c, backend, req.kind, &req.queue, req.batch))? {
            Outcome::Promoted(n) => Ok(n.into_pyobject(py)?.into_any()),
            Outcome::Stalled { recovered, dead } => {
                Ok(PyList::new(py, [id_list(py, recovered)?, id_list(py, dead)?])?.into_any())
            }
        }
    }

    /// ADD (SPEC §7) for the facade's `Queue.add` / `add_many`: `jobs` are
    /// `(id or None, data, delay_ms or None, at_ms or None, lane or None,
    /// max_attempts)`, checked by the facade for types and signs. All are added
    /// in one guarded transaction; an id that exists refuses the whole call.
    fn _add(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, jobs: Vec<(Option<String>, Vec<u8>, Option<u64>, Option<i64>, Option<String>, u32)>) -> PyResult<Vec<String>> {
        let q = queue_arg(emq_plan::add::ADD, queue)?;
        let jobs: Vec<NewJob> = jobs
            .into_iter()
            .map(|(id, data, delay, at, lane, max_attempts)| NewJob {
                id: id.map(String::into_bytes),
                data,
                when: match at {
                    Some(t) => When::At(t),
                    None => When::Delay(delay.unwrap_or(0)),
                },
                lane: lane.map(String::into_bytes),
                max_attempts,
            })
            .collect();
        let ids = self.with(py, |c| jobs::add(c, &q, jobs))?;
        Ok(ids.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
    }

    /// CLAIM (SPEC §7): `(id, data, lane, attempts, max_attempts, token, lease deadline ms)` each.
    #[allow(clippy::type_complexity)]
    fn _claim(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, n: u64, lease_ms: u64) -> PyResult<Vec<(String, Py<PyBytes>, Option<String>, i64, i64, String, i64)>> {
        let q = queue_arg(emq_plan::claim::CLAIM, queue)?;
        let claimed = self.with(py, |c| jobs::claim(c, &q, n, lease_ms))?;
        let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
        Ok(claimed
            .into_iter()
            .map(|j| (text(j.id), PyBytes::new(py, &j.data).unbind(), j.lane.map(text), j.attempts, j.max_attempts, text(j.token), j.deadline))
            .collect())
    }

    /// EXTEND / COMPLETE / FAIL (SPEC §7): `action` is `"extend"`, `"complete"`
    /// or `"fail"`. Gives `"refused"`, `"extended"`, `"completed"`, `"scheduled"`
    /// or `"dead"`.
    #[pyo3(signature = (queue, id, token, lane, action, lease_ms=0, error=None, retry_in_ms=None))]
    #[allow(clippy::too_many_arguments)]
    fn _settle(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        id: &str,
        token: &str,
        lane: Option<&str>,
        action: &str,
        lease_ms: u64,
        error: Option<Vec<u8>>,
        retry_in_ms: Option<u64>,
    ) -> PyResult<&'static str> {
        let action = match action {
            "extend" => Action::Extend { lease_ms },
            "complete" => Action::Complete,
            "fail" => Action::Fail { error: error.unwrap_or_default(), retry_in_ms },
            other => return Err(HostError::Argument(format!("settle: unknown action {other:?}")).into()),
        };
        let q = queue_arg("EMQ.SETTLE", queue)?;
        let (id, token, lane) = (id.as_bytes().to_vec(), token.as_bytes().to_vec(), lane.map(|l| l.as_bytes().to_vec()));
        let out = self.with(py, |c| jobs::settle(c, &q, &id, &token, lane.as_deref(), action))?;
        Ok(match out {
            Settled::Refused => "refused",
            Settled::Extended => "extended",
            Settled::Completed => "completed",
            Settled::Retrying => "scheduled",
            Settled::Dead => "dead",
        })
    }

    /// Lane control: `op` is `"pause"`, `"resume"` or `"limit"` (with `limit`).
    #[pyo3(signature = (queue, lane, op, limit=0))]
    fn _lane(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, lane: &str, op: &str, limit: u64) -> PyResult<()> {
        let op = match op {
            "pause" => LaneOp::Pause,
            "resume" => LaneOp::Resume,
            "limit" => LaneOp::Limit(limit),
            other => return Err(HostError::Argument(format!("lane: unknown op {other:?}")).into()),
        };
        let q = queue_arg(emq_plan::lane_ops::LANE, queue)?;
        let lane = lane.as_bytes().to_vec();
        self.with(py, |c| jobs::lane(c, &q, &lane, op))
    }

    /// `INFO section` as a dict of str (`server_name`, `redis_version`, …).
    #[pyo3(signature = (section="server"))]
    fn info<'py>(&self, py: Python<'py>, section: &str) -> PyResult<Bound<'py, PyDict>> {
        let section = section.to_string();
        let r = self.with(py, move |c| c.one(Cmd::new("INFO").arg(section)))?;
        let text = match r {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(HostError::Server(format!("INFO gave {other:?}")).into()),
        };
        parse_info(py, &text)
    }

    /// Drops the connection; the next call connects again.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.with(py, |c| {
            c.close();
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!("<emq.Client {}>", self.address)
    }

    /// The job's row for `Queue.get`: `None`, or `(data, lane, attempts,
    /// max_attempts, token, lease, state, due, stalls, error)`.
    #[allow(clippy::type_complexity)]
    fn _get(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, id: &str) -> PyResult<Option<(Py<PyBytes>, Option<String>, i64, i64, Option<String>, Option<i64>, Option<String>, Option<i64>, i64, Option<String>)>> {
        let q = queue_arg(emq_plan::look::GET, queue)?;
        let id = id.as_bytes().to_vec();
        let row = self.with(py, |c| look::get(c, &q, &id))?;
        let text = |b: Option<Vec<u8>>| b.map(|b| String::from_utf8_lossy(&b).into_owned());
        Ok(row.map(|r| (PyBytes::new(py, &r.data).unbind(), text(r.lane), r.attempts, r.max_attempts, text(r.token), r.lease, text(r.state), r.due, r.stalls, text(r.error))))
    }

    /// The lanes that have a list or a control hash, sorted.
    fn _lanes(&self, py: Python<'_>, queue: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let q = queue_arg(emq_plan::look::LANES, queue)?;
        let names = self.with(py, |c| look::lanes(c, &q))?;
        Ok(names.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
    }

    /// `{"schedule", "pending", "lanes": {lane: n}, "active", "dead", "done", "ring"}`,
    /// read at one instant; `done` counts the done rows still kept.
    fn _counts<'py>(&self, py: Python<'py>, queue: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let q = queue_arg(emq_plan::look::COUNTS, queue)?;
        let n = self.with(py, |c| look::counts(c, &q))?;
        let d = PyDict::new(py);
        let lanes = PyDict::new(py);
        for (name, len) in n.lanes {
            lanes.set_item(String::from_utf8_lossy(&name).into_owned(), len)?;
        }
        d.set_item("schedule", n.schedule)?;
        d.set_item("pending", n.pending)?;
        d.set_item("lanes", lanes)?;
        d.set_item("active", n.active)?;
        d.set_item("dead", n.dead)?;
        d.set_item("done", n.done)?;
        d.set_item("ring", n.ring)?;
        Ok(d)
    }

    /// The effective retention policy: `(done_ms, dead_ms, dead_max)`, `-1` for none.
    fn _retention(&self, py: Python<'_>, queue: &Bound<'_, PyAny>) -> PyResult<(i64, i64, i64)> {
        let q = queue_arg(emq_plan::retention::RETENTION, queue)?;
        let r = self.with(py, |c| look::retention(c, &q))?;
        Ok((r.done_ms, r.dead_ms, r.dead_max))
    }

    /// Sets the retention fields given (`None`: left as it is; `-1`: none).
    #[pyo3(signature = (queue, done_ms=None, dead_ms=None, dead_max=None))]
    fn _set_retention(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        done_ms: Option<&Bound<'_, PyAny>>,
        dead_ms: Option<&Bound<'_, PyAny>>,
        dead_max: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let verb = emq_plan::retention::RETENTION;
        let q = queue_arg(verb, queue)?;
        let int = |name: &str, v: Option<&Bound<'_, PyAny>>| -> HostResult<Option<i64>> {
            let Some(v) = v.filter(|v| !v.is_none()) else { return Ok(None) };
            match (!v.is_instance_of::<PyBool>()).then(|| v.extract::<i64>().ok()).flatten() {
                Some(n) if n >= -1 => Ok(Some(n)),
                _ => Err(HostError::Argument(format!("{verb}: {name} must be an integer of -1 (none) or more"))),
            }
        };
        let (a, b, c) = (int("done_ms", done_ms)?, int("dead_ms", dead_ms)?, int("dead_max", dead_max)?);
        // The range is checked again (and in full) by the plan before anything is sent.
        self.with(py, |conn| look::set_retention(conn, &q, a, b, c))
    }
}

fn arg_bytes(a: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(b) = a.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(s) = a.cast::<PyString>() {
        Ok(s.to_str()?.as_bytes().to_vec())
    } else if a.is_instance_of::<PyBool>() {
        Err(PyTypeError::new_err("command arguments are str, bytes, int or float, not bool"))
    } else if let Ok(n) = a.extract::<i64>() {
        Ok(n.to_string().into_bytes())
    } else if let Ok(f) = a.extract::<f64>() {
        Ok(f.to_string().into_bytes())
    } else {
        Err(PyTypeError::new_err(format!("command arguments are str, bytes, int or float, not {}", a.get_type().name()?)))
    }
}

fn queue_arg(verb: &str, q: &Bound<'_, PyAny>) -> HostResult<Vec<u8>> {
    let q = q
        .cast::<PyString>()
        .ok()
        .and_then(|s| s.to_str().ok().map(|s| s.as_bytes().to_vec()))
        .ok_or_else(|| HostError::Argument(format!("{verb}: queue must be a str")))?;
    match names::queue_name_problem(&q) {
        Some(why) => Err(HostError::Argument(format!("{verb}: queue {why}"))),
        None => Ok(q),
    }
}

/// A positive (or non-negative) int argument; `bool` is refused.
fn count(verb: &str, name: &str, v: &Bound<'_, PyAny>, zero_ok: bool) -> HostResult<u64> {
    let what = if zero_ok { "a non-negative integer" } else { "a positive integer" };
    let n = (!v.is_instance_of::<PyBool>()).then(|| v.extract::<i64>().ok()).flatten();
    match n {
        Some(n) if n > 0 || (zero_ok && n == 0) => Ok(n as u64),
        _ => Err(HostError::Argument(format!("{verb}: {name} must be {what}"))),
    }
}

fn backend_arg(verb: &str, b: &str) -> HostResult<Backend> {
    match b {
        "plan" => Ok(Backend::Plan),
        "lua" => Ok(Backend::Lua),
        _ => Err(HostError::Argument(format!("{verb}: backend must be \"plan\" or \"lua\", not {b:?}"))),
    }
}

fn id_list(py: Python<'_>, ids: Vec<Vec<u8>>) -> PyResult<Bound<'_, PyList>> {
    let strs: Vec<String> = ids.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect();
    PyList::new(py, strs)
}

fn to_py(py: Python<'_>, r: Reply) -> PyResult<Bound<'_, PyAny>> {
    Ok(match r {
        Reply::Nil => py.None().into_bound(py),
        Reply::Int(n) => n.into_pyobject(py)?.into_any(),
        Reply::Bulk(b) => PyBytes::new(py, &b).into_any(),
        Reply::Status(s) => PyString::new(py, &s).into_any(),
        Reply::Array(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(to_py(py, i)?)?;
            }
            l.into_any()
        }
        Reply::Error { message, .. } => return Err(HostError::Server(message).into()),
    })
}

/// Parses `INFO` text into a dict of str.
#[pyfunction]
fn parse_info<'py>(py: Python<'py>, text: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for line in text.lines() {
        if let Some((k, v)) = line.trim_end().split_once(':') {
            d.set_item(k, v)?;
        }
    }
    Ok(d)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Client>()?;
    m.add_function(wrap_pyfunction!(parse_info, m)?)?;
    m.add("PROMOTE_LUA", sweeps::PROMOTE_LUA)?;
    m.add("STALLED_LUA", sweeps::STALLED_LUA)?;
    m.add("WAKE_MAX", emq_plan::WAKE_MAX)?;
    m.add("MAX_ATTEMPTS", drive::MAX_ATTEMPTS)?;
    let defaults = PyDict::new(m.py());
    defaults.set_item("done_ms", emq_plan::retention::DONE_MS)?;
    defaults.set_item("dead_ms", emq_plan::retention::DEAD_MS)?;
    defaults.set_item("dead_max", emq_plan::retention::DEAD_MAX)?;
    m.add("RETENTION_DEFAULTS", defaults)?;
    Ok(())
}

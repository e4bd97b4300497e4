//! The `emq.Client` class: one connection owned by the core (or, once it meets
//! a cluster, one to each node whose queues it calls: `cluster`), its
//! settings checked once when it is made (`emq.connect`), its own calls
//! (`ping`, `command`, `info`, …) and the worker's park. A queue's calls are
//! `QueueCore`'s; the sweeps by a queue's name, `sweep_calls`'.
//!
//! Every call that waits on the server releases the GIL (`py.detach`), so other
//! Python threads run while this one waits.

use std::sync::{Mutex, PoisonError};

use emq_plan::sweep::{Kind, Outcome};
use emq_plan::{Cmd, Keys, Reply};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::arguments::{self, command, count, duration, optional_duration, queue_name, Least, SweepBackend};
use crate::cluster::Router;
use crate::conn::{self, Conn};
use crate::error::{HostError, HostResult};
use crate::py_values;
use crate::signals;
use crate::sweeps;

/// A connection to one server (or a cluster's nodes), owned by the Rust core.
/// Thread-safe: calls from several threads take turns.
#[pyclass(frozen, module = "emq._core")]
pub struct Client {
    conn: Mutex<Router>,
    #[pyo3(get)]
    pub(crate) address: String,
}

/// An argument that may be left out, told apart from one given as `None`
/// (`Client.sibling(read_timeout=None)`: no read timeout).
pub enum Setting<'py> {
    Unchanged,
    Given(Bound<'py, PyAny>),
}

impl<'a, 'py> FromPyObject<'a, 'py> for Setting<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        Ok(Setting::Given(obj.to_owned()))
    }
}

impl Client {
    /// Runs `f` on the seed connection with the GIL released.
    pub(crate) fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Conn) -> HostResult<T> + Send) -> PyResult<T> {
        self.routed(py, |r| f(r.seed()))
    }

    /// Runs `f` on the connection of `queue`'s node (`cluster::Router::run`: a
    /// redirect is followed, never raised), with the GIL released; `call`
    /// names the call the user made in its errors.
    pub(crate) fn on<T: Send>(
        &self,
        py: Python<'_>,
        call: &str,
        queue: &[u8],
        mut f: impl FnMut(&mut Conn) -> HostResult<T> + Send,
    ) -> PyResult<T> {
        self.routed(py, |r| r.run(call, queue, &mut f))
    }

    /// `on`, for a call that writes: then, with `emq.connect(wait_replicas=N)`,
    /// waits for N replicas to acknowledge it (`Conn::replicated`).
    pub(crate) fn wrote<T: Send>(
        &self,
        py: Python<'_>,
        call: &str,
        queue: &[u8],
        mut f: impl FnMut(&mut Conn) -> HostResult<T> + Send,
    ) -> PyResult<T> {
        self.on(py, call, queue, |c| {
            let out = f(c)?;
            c.replicated(call)?;
            Ok(out)
        })
    }

    /// The router, with the GIL released. A connection whose last call
    /// panicked is in an unknown state (a watch, unread replies): it is closed,
    /// and connects again for this call.
    pub(crate) fn routed<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Router) -> HostResult<T> + Send) -> PyResult<T> {
        let out = py.detach(|| {
            let mut router = self.conn.lock().unwrap_or_else(|poisoned| {
                let mut router = poisoned.into_inner();
                router.close();
                self.conn.clear_poison();
                router
            });
            f(&mut router)
        });
        // A signal handler that raised while the call waited ended it: its error,
        // not the broken read's.
        match signals::take_raised() {
            Some(e) => Err(e),
            None => out.map_err(PyErr::from),
        }
    }

    /// The client a call runs on: an `emq.Client`, or a URL that `emq.connect`
    /// connects to (with the facade's defaults, stated there once).
    pub(crate) fn from_arg(call: &str, v: &Bound<'_, PyAny>) -> PyResult<Py<Client>> {
        if let Ok(c) = v.cast::<Client>() {
            return Ok(c.clone().unbind());
        }
        if v.is_instance_of::<PyString>() {
            let c = v.py().import("emq.client")?.getattr("connect")?.call1((v,))?;
            return Ok(c.cast_into::<Client>()?.unbind());
        }
        Err(arguments::refused(call, format_args!("client must be an emq.Client or a URL, not {}", arguments::type_name(v))))
    }

    /// A sweep of `queue` (checked), `call` being the call the user made.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sweep(
        &self,
        py: Python<'_>,
        call: &str,
        queue: &[u8],
        kind: Kind,
        batch: u64,
        backend: SweepBackend,
        group: Option<u64>,
    ) -> PyResult<Outcome> {
        let keys = Keys::new(queue);
        self.wrote(py, call, queue, |c| sweeps::run(c, call, backend, kind, &keys, batch, group))
    }

    /// A `CLIENT` command on the seed, or with `queue` on the connection to the
    /// node that serves it (where that queue's park blocks).
    fn client_cmd(&self, py: Python<'_>, call: &str, cmd: Cmd, queue: Option<&Bound<'_, PyAny>>) -> PyResult<Reply> {
        match queue {
            Some(q) => {
                let q = queue_name(call, "queue", q)?;
                self.routed(py, |r| r.conn_for(&q)?.one(cmd))
            }
            None => self.with(py, |c| c.one(cmd)),
        }
    }

    /// A client on `router`, connected now: a bad address or refused
    /// credentials fail here (naming `call`), not on first use.
    fn connected(py: Python<'_>, call: &str, router: Router) -> PyResult<Self> {
        let address = router.address().to_string();
        let client = Client { conn: Mutex::new(router), address };
        client.with(py, |c| c.connect().map_err(|e| e.prefixed(call)))?;
        Ok(client)
    }
}

#[pymethods]
impl Client {
    /// `emq.connect`'s client, its settings as the facade gives them (seconds,
    /// or `datetime.timedelta`): `read_timeout=None` waits as long as the
    /// server takes; `spin` is how long a read polls before it sleeps (at most
    /// `conn::MAX_SPIN`, in µs: rounded to the nearest, a positive spin under
    /// 1 µs is 1 µs); `wait_timeout` in ms, rounded as every duration is
    /// (`arguments::Span::ms`); `wait_replicas`: see `Conn::replicated`.
    #[new]
    #[pyo3(signature = (url, *, connect_timeout, read_timeout, spin, wait_replicas, wait_timeout))]
    fn new(
        py: Python<'_>,
        url: &Bound<'_, PyAny>,
        connect_timeout: &Bound<'_, PyAny>,
        read_timeout: &Bound<'_, PyAny>,
        spin: &Bound<'_, PyAny>,
        wait_replicas: &Bound<'_, PyAny>,
        wait_timeout: &Bound<'_, PyAny>,
    ) -> PyResult<Self> {
        const CALL: &str = "emq.connect";
        let url = arguments::text(CALL, "url", url)?;
        let connect_timeout = duration(CALL, "connect_timeout", connect_timeout, Least::Positive, None)?.duration();
        let read_timeout = optional_duration(CALL, "read_timeout", read_timeout, Least::Positive)?.map(arguments::Span::duration);
        let spin = duration(CALL, "spin", spin, Least::Zero, Some(conn::MAX_SPIN.as_secs_f64()))?;
        let replicas = count(CALL, "wait_replicas", wait_replicas, true)?;
        let wait_ms = duration(CALL, "wait_timeout", wait_timeout, Least::Positive, None)?.ms();
        let wait = (replicas > 0).then_some((replicas, wait_ms));
        let spin = std::time::Duration::from_micros(spin.micros());
        let conn = Conn::open(&url, connect_timeout, read_timeout, spin, wait)?;
        Client::connected(py, CALL, Router::new(conn))
    }

    /// A new connection with this one's settings (address, credentials, TLS,
    /// database, timeouts, spin, replica wait); `read_timeout`, when given,
    /// replaces this one's (`None`: wait as long as the server takes).
    #[pyo3(signature = (*, read_timeout = Setting::Unchanged))]
    fn sibling(&self, py: Python<'_>, read_timeout: Setting<'_>) -> PyResult<Self> {
        const CALL: &str = "Client.sibling";
        let read_timeout = match read_timeout {
            Setting::Unchanged => None,
            Setting::Given(v) => Some(optional_duration(CALL, "read_timeout", &v, Least::Positive)?.map(arguments::Span::duration)),
        };
        let router = self.conn.lock().unwrap_or_else(PoisonError::into_inner).sibling(read_timeout);
        Client::connected(py, CALL, router)
    }

    /// `PING`: `True` when the server answers; an error reply raises its class.
    fn ping(&self, py: Python<'_>) -> PyResult<bool> {
        match self.with(py, |c| c.one(Cmd::new("PING")))? {
            Reply::Error { code, message } => Err(HostError::classify("Client.ping", &code, &message).into()),
            r => Ok(matches!(r, Reply::Status(ref s) if s == "PONG")),
        }
    }

    /// The server's clock in ms: `TIME` as `sec * 1000 + floor(usec / 1000)`.
    fn time_ms(&self, py: Python<'_>) -> PyResult<i64> {
        let r = self.with(py, |c| c.one(Cmd::new("TIME")))?;
        emq_plan::clock::parse_time(&r).ok_or_else(|| HostError::Server("Client.time_ms: TIME gave no clock".into()).into())
    }

    /// Any command, for tools and tests: replies as Python values (bytes,
    /// int, str, list, None); an error reply raises its class (`emq.ServerError`
    /// or a subclass, `emq.PermissionError`, …).
    #[pyo3(signature = (*args))]
    fn command<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let cmd = command(args.iter())?;
        match self.with(py, |c| c.one(cmd))? {
            Reply::Error { code, message } => {
                let verb = args.get_item(0).and_then(|a| a.str()).map(|n| n.to_string().to_uppercase()).unwrap_or_default();
                Err(HostError::classify(&verb, &code, &message).into())
            }
            r => py_values::reply(py, r),
        }
    }

    /// Several commands in one round trip; an error reply raises its class
    /// (after every reply is read, so the connection stays in step).
    fn pipeline<'py>(&self, py: Python<'py>, cmds: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyList>> {
        let cmds: Vec<Cmd> =
            cmds.iter().map(|c| command(c.try_iter()?.collect::<PyResult<Vec<_>>>()?.into_iter())).collect::<PyResult<_>>()?;
        let replies = self.with(py, |c| c.pipeline(&cmds))?;
        let out = PyList::empty(py);
        for r in replies {
            out.append(py_values::reply(py, r)?)?;
        }
        Ok(out)
    }

    /// The park of a worker's beat: blocks on the queue's `wake` list until a
    /// token comes (`True`) or `timeout` seconds pass (`False`).
    fn _park(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, timeout: f64) -> PyResult<bool> {
        const CALL: &str = "emq.Worker";
        let q = queue_name(CALL, "queue", queue)?;
        let cmd = Cmd::new("BLPOP").arg(Keys::new(&q).wake()).arg(format!("{:.3}", timeout.max(0.001)));
        // A redirect is an error reply here, not a failed call: make it one, so it is followed.
        let parked = self.on(py, CALL, &q, |c| match c.one(cmd.clone())? {
            Reply::Error { code, message } => Err(HostError::classify(CALL, &code, &message)),
            r => Ok(r),
        });
        Ok(parked? != Reply::Nil)
    }

    /// This connection's `CLIENT ID` (it connects first if it must); with
    /// `queue`, the id of its connection to the node that serves the queue (where
    /// `_park` blocks).
    #[pyo3(signature = (queue=None))]
    fn _client_id(&self, py: Python<'_>, queue: Option<&Bound<'_, PyAny>>) -> PyResult<i64> {
        match self.client_cmd(py, "CLIENT ID", Cmd::new("CLIENT").arg("ID"), queue)? {
            Reply::Int(id) => Ok(id),
            Reply::Error { code, message } => Err(HostError::classify("CLIENT ID", &code, &message).into()),
            other => Err(HostError::Server(format!("CLIENT ID gave {other:?}")).into()),
        }
    }

    /// `CLIENT UNBLOCK id`: whether a client blocked with that id was unblocked;
    /// with `queue`, sent to the node that serves the queue (the park's).
    #[pyo3(signature = (id, queue=None))]
    fn _unblock(&self, py: Python<'_>, id: i64, queue: Option<&Bound<'_, PyAny>>) -> PyResult<bool> {
        let cmd = Cmd::new("CLIENT").arg("UNBLOCK").arg(id.to_string());
        match self.client_cmd(py, "CLIENT UNBLOCK", cmd, queue)? {
            Reply::Int(n) => Ok(n == 1),
            Reply::Error { code, message } => Err(HostError::classify("CLIENT UNBLOCK", &code, &message).into()),
            other => Err(HostError::Server(format!("CLIENT UNBLOCK gave {other:?}")).into()),
        }
    }

    /// `INFO section` as a dict of str (`server_name`, `redis_version`, …).
    #[pyo3(signature = (section="server"))]
    fn info<'py>(&self, py: Python<'py>, section: &str) -> PyResult<Bound<'py, PyDict>> {
        let section = section.to_string();
        let r = self.with(py, move |c| c.one(Cmd::new("INFO").arg(section)))?;
        let text = match r {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            other => return Err(HostError::Server(format!("Client.info: INFO gave {other:?}")).into()),
        };
        py_values::info(py, &text)
    }

    /// Drops the connection; the next call connects again.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.routed(py, |r| {
            r.close();
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!("<emq.Client {}>", self.address)
    }
}

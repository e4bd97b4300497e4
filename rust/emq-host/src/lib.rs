//! `emq._core`: the Python module. `Client` (one connection owned by the core)
//! and its methods, one per emq call (SPEC §5 to §7), the module's functions and
//! constants. The work is the other modules': `args` (Python arguments in),
//! `conn` (the connection), `drive` (running a conversation), `sweeps`, `jobs`,
//! `look` (the calls), `job` (`emq.Job`), `error` (the exception classes).
//!
//! Every call that waits on the server releases the GIL (`py.detach`), so other
//! Python threads run while this one waits.

mod args;
mod cluster;
mod conn;
mod drive;
mod error;
mod jitter;
mod job;
mod jobs;
mod look;
mod module;
mod sweeps;

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use emq_plan::batch::extend_many::Held;
use emq_plan::jobs::add::{NewJob, When};
use emq_plan::jobs::settle::{Action, Settled};
use emq_plan::lanes::lane_control::LaneOp;
use emq_plan::sweep::{Kind, Outcome, PROMOTE, STALLED};
use emq_plan::{names, wire, Cmd, Keys, Reply};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyList, PyString, PyTuple};

use crate::args::{arg_bytes, backend_arg, count, group_arg, queue_arg, raw_command, seconds, text_arg};
use crate::cluster::Router;
use crate::conn::Conn;
use crate::error::{HostError, HostResult};
use crate::jitter::Jitter;
use crate::job::Job;
use crate::sweeps::Backend;

// Sweeps allocate many small buffers (commands out, replies in); mimalloc keeps
// that off the system allocator's slow paths.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A job for `Client._add`: `(id, data, delay_ms, at_ms, lane, max_attempts)`.
type NewJobArgs = (Option<String>, Vec<u8>, Option<u64>, Option<i64>, Option<String>, u32);

/// A connection to one server (or, once it meets a cluster, one to each node
/// whose queues it calls: `cluster`), owned by the Rust core. Thread-safe: calls
/// from several threads take turns.
#[pyclass(frozen, module = "emq._core")]
struct Client {
    conn: Mutex<Router>,
    #[pyo3(get)]
    address: String,
}

impl Client {
    /// Runs `f` on the connection with the GIL released. A connection whose
    /// last call panicked is in an unknown state (a watch, unread replies): it is
    /// closed, and connects again for this call.
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Conn) -> HostResult<T> + Send) -> PyResult<T> {
        self.routed(py, |r| f(r.seed()))
    }

    /// Runs `f` on the connection of `queue`'s node (`cluster::Router::run`: a
    /// redirect is followed, never raised), with the GIL released.
    fn on<T: Send>(&self, py: Python<'_>, verb: &str, queue: &[u8], mut f: impl FnMut(&mut Conn) -> HostResult<T> + Send) -> PyResult<T> {
        self.routed(py, |r| r.run(verb, queue, &mut f))
    }

    /// `on`, for a call that writes: then, with `emq.connect(wait_replicas=N)`,
    /// waits for N replicas to acknowledge it (`Conn::replicated`).
    fn wrote<T: Send>(
        &self,
        py: Python<'_>,
        verb: &str,
        queue: &[u8],
        mut f: impl FnMut(&mut Conn) -> HostResult<T> + Send,
    ) -> PyResult<T> {
        self.on(py, verb, queue, |c| {
            let out = f(c)?;
            c.replicated(verb)?;
            Ok(out)
        })
    }

    /// A call on many held jobs that answers each yes or no (`_extend_many`,
    /// `_complete_many`): none is no call; else `f` on the queue's connection.
    fn held_answers(
        &self,
        py: Python<'_>,
        verb: &'static str,
        queue: &Bound<'_, PyAny>,
        jobs: &[PyRef<'_, Job>],
        f: impl Fn(&mut Conn, &[u8], &[Held]) -> HostResult<Vec<bool>> + Send + Sync,
    ) -> PyResult<Vec<bool>> {
        let q = queue_arg(verb, queue)?;
        let held = held_jobs(jobs);
        if held.is_empty() {
            return Ok(vec![]);
        }
        self.wrote(py, verb, &q, |c| f(c, &q, &held))
    }

    fn routed<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&mut Router) -> HostResult<T> + Send) -> PyResult<T> {
        let out = py.detach(|| {
            let mut router = self.conn.lock().unwrap_or_else(|poisoned| {
                let mut router = poisoned.into_inner();
                router.close();
                self.conn.clear_poison();
                router
            });
            f(&mut router)
        });
        // A signal handler that raised while the call waited (`signal_raised`)
        // ended it: its error, not the broken read's.
        match RAISED.with(|r| r.borrow_mut().take()) {
            Some(e) => Err(e),
            None => out.map_err(PyErr::from),
        }
    }

    fn settle(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, job: &Job, action: Action) -> PyResult<Settled> {
        let q = queue_arg(emq_plan::jobs::settle::verb(&action), queue)?;
        let token = job.token.as_deref().unwrap_or_default().as_bytes();
        let lane = job.lane.as_deref().map(str::as_bytes);
        let verb = emq_plan::jobs::settle::verb(&action);
        self.wrote(py, verb, &q, |c| jobs::settle(c, &q, job.id.as_bytes(), token, lane, action.clone()))
    }

    fn lane(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, lane: &str, op: LaneOp) -> PyResult<()> {
        let q = queue_arg(emq_plan::lanes::lane_control::LANE, queue)?;
        let lane = lane.as_bytes().to_vec();
        self.wrote(py, emq_plan::lanes::lane_control::LANE, &q, |c| jobs::lane(c, &q, &lane, op))
    }

    /// A `CLIENT` command on the seed, or with `queue` on the connection to the
    /// node that serves it (where that queue's park blocks).
    fn client_cmd(&self, py: Python<'_>, verb: &str, cmd: Cmd, queue: Option<&Bound<'_, PyAny>>) -> PyResult<Reply> {
        match queue {
            Some(q) => {
                let q = queue_arg(verb, q)?;
                self.routed(py, |r| r.conn_for(&q)?.one(cmd))
            }
            None => self.with(py, |c| c.one(cmd)),
        }
    }

    fn from_conn(py: Python<'_>, conn: Conn) -> PyResult<Self> {
        let address = conn.address.clone();
        let client = Client { conn: Mutex::new(Router::new(conn)), address };
        // Connect now, so a bad address or refused credentials fail here and not on first use.
        client.with(py, Conn::connect)?;
        Ok(client)
    }
}

#[pymethods]
impl Client {
    #[new]
    /// `Client(url, *, connect_timeout=5.0, read_timeout=30.0, spin_us=150,
    /// wait_replicas=0, wait_timeout=1.0)`, timeouts in seconds (`math.inf`: no
    /// read timeout, `emq.connect(read_timeout=None)`), the spin in
    /// microseconds (`conn::DEFAULT_SPIN`); `wait_replicas`: see `Conn::replicated`.
    #[pyo3(signature = (url, *, connect_timeout=None, read_timeout=None, spin_us=None, wait_replicas=None, wait_timeout=None))]
    fn new(
        py: Python<'_>,
        url: &Bound<'_, PyAny>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        read_timeout: Option<&Bound<'_, PyAny>>,
        spin_us: Option<&Bound<'_, PyAny>>,
        wait_replicas: Option<&Bound<'_, PyAny>>,
        wait_timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        const VERB: &str = "emq.connect";
        let url = text_arg(VERB, "url", url)?;
        let ct = match connect_timeout {
            Some(v) => seconds(VERB, "connect_timeout", v)?
                .ok_or_else(|| HostError::Argument(format!("{VERB}: connect_timeout must be finite")))?,
            None => Duration::from_secs(5),
        };
        let rt = match read_timeout {
            Some(v) => seconds(VERB, "read_timeout", v)?,
            None => Some(Duration::from_secs(30)),
        };
        let spin = match spin_us {
            Some(v) => Duration::from_micros(count(VERB, "spin_us", v, true)?),
            None => conn::DEFAULT_SPIN,
        };
        if spin > conn::MAX_SPIN {
            let most = conn::MAX_SPIN.as_micros();
            return Err(HostError::Argument(format!("{VERB}: spin_us must be at most {most} (microseconds)")).into());
        }
        let replicas = match wait_replicas {
            Some(v) => count(VERB, "wait_replicas", v, true)?,
            None => 0,
        };
        let wait_ms = match wait_timeout {
            Some(v) => seconds(VERB, "wait_timeout", v)?
                .map(|d| d.as_millis())
                .filter(|&ms| ms >= 1)
                .and_then(|ms| u64::try_from(ms).ok())
                .ok_or_else(|| HostError::Argument(format!("{VERB}: wait_timeout must be finite and at least 0.001 (seconds)")))?,
            None => 1000,
        };
        let wait = (replicas > 0).then_some((replicas, wait_ms));
        Client::from_conn(py, Conn::open(&url, ct, rt, spin, wait)?)
    }

    /// A new connection with this one's settings (address, credentials, TLS,
    /// database, timeouts); `read_timeout` in seconds (`math.inf`: none)
    /// replaces this one's.
    #[pyo3(signature = (*, read_timeout=None))]
    fn sibling(&self, py: Python<'_>, read_timeout: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let rt = read_timeout.map(|v| seconds("emq.Client.sibling", "read_timeout", v)).transpose()?;
        let router = self.conn.lock().unwrap_or_else(PoisonError::into_inner).sibling(rt);
        let address = router_address(&router);
        let client = Client { conn: Mutex::new(router), address };
        client.with(py, Conn::connect)?;
        Ok(client)
    }

    /// `PING`: `True` when the server answers; an error reply raises its class.
    fn ping(&self, py: Python<'_>) -> PyResult<bool> {
        let r = self.with(py, |c| c.one(Cmd::new("PING")))?;
        match r {
            Reply::Error { code, message } => Err(HostError::classify("PING", &code, &message).into()),
            r => Ok(matches!(r, Reply::Status(ref s) if s == "PONG")),
        }
    }

    /// The server's clock in ms: `TIME` as `sec * 1000 + floor(usec / 1000)`.
    fn time_ms(&self, py: Python<'_>) -> PyResult<i64> {
        let r = self.with(py, |c| c.one(Cmd::new("TIME")))?;
        emq_plan::clock::parse_time(&r).ok_or_else(|| HostError::Server("TIME gave no clock".into()).into())
    }

    /// Any command, for tools and tests: replies as Python values (bytes,
    /// int, str, list, None); an error reply raises its class (`emq.ServerError`
    /// or a subclass, `emq.PermissionError`, …).
    #[pyo3(signature = (*args))]
    fn command<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>) -> PyResult<Bound<'py, PyAny>> {
        let cmd = raw_command(args.iter())?;
        match self.with(py, |c| c.one(cmd))? {
            Reply::Error { code, message } => {
                let verb = args.get_item(0).and_then(|a| a.str()).map(|n| n.to_string().to_uppercase()).unwrap_or_default();
                Err(HostError::classify(&verb, &code, &message).into())
            }
            r => to_py(py, r),
        }
    }

    /// Several commands in one round trip; an error reply raises its class
    /// (after every reply is read, so the connection stays in step).
    fn pipeline<'py>(&self, py: Python<'py>, cmds: Vec<Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyList>> {
        let cmds: Vec<Cmd> = cmds
            .iter()
            .map(|c| raw_command(c.try_iter()?.collect::<PyResult<Vec<_>>>()?.into_iter()).map_err(PyErr::from))
            .collect::<PyResult<_>>()?;
        let replies = self.with(py, |c| c.pipeline(&cmds))?;
        let out = PyList::empty(py);
        for r in replies {
            out.append(to_py(py, r)?)?;
        }
        Ok(out)
    }

    /// PROMOTE (SPEC §5): the number of ids taken out of `schedule`. The facade
    /// (`emq.promote`) gives the defaults.
    #[pyo3(signature = (queue, batch, backend, group=None))]
    fn promote(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        batch: &Bound<'_, PyAny>,
        backend: &Bound<'_, PyAny>,
        group: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<i64> {
        let (q, batch, backend) = (queue_arg(PROMOTE, queue)?, count(PROMOTE, "batch", batch, false)?, backend_arg(PROMOTE, backend)?);
        let group = group_arg(PROMOTE, group, backend)?;
        match self.wrote(py, PROMOTE, &q, |c| sweeps::run(c, backend, Kind::Promote, &q, batch, group))? {
            Outcome::Promoted(n) => Ok(n),
            Outcome::Stalled { .. } => unreachable!("promote gives a count"),
        }
    }

    /// PROMOTE for a worker's beat: `(moved, due_in)`, where `due_in` is how
    /// long from now (s) until the first due time past the call's clock reading
    /// that it saw (`None`: nothing else scheduled; 0: the batch was all due,
    /// more may be).
    fn _promote_next(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, batch: &Bound<'_, PyAny>) -> PyResult<(i64, Option<f64>)> {
        let (q, batch) = (queue_arg(PROMOTE, queue)?, count(PROMOTE, "batch", batch, false)?);
        match self.wrote(py, PROMOTE, &q, |c| sweeps::run_plan_timed(c, Kind::Promote, &q, batch, None))? {
            (Outcome::Promoted(n), due_in) => Ok((n, due_in)),
            _ => unreachable!("promote gives a count"),
        }
    }

    /// STALLED CHECK for a worker's beat: `(recovered, dead, due_in)`, where
    /// `due_in` is how long from now (s) until the first lease deadline past the
    /// call's clock reading that it saw (`None`: no other lease; 0: the batch
    /// was all expired, more may be): an idle worker parks no longer than that.
    #[pyo3(signature = (queue, max_stalled, batch))]
    fn _stalled_next<'py>(
        &self,
        py: Python<'py>,
        queue: &Bound<'py, PyAny>,
        max_stalled: Option<&Bound<'py, PyAny>>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<StalledNext<'py>> {
        let (q, max_stalled, batch) = stalled_args(queue, max_stalled, batch)?;
        match self.wrote(py, STALLED, &q, |c| sweeps::run_plan_timed(c, Kind::Stalled { max_stalled }, &q, batch, None))? {
            (Outcome::Stalled { recovered, dead }, due_in) => Ok((id_list(py, recovered)?, id_list(py, dead)?, due_in)),
            _ => unreachable!("a stalled check gives two lists"),
        }
    }

    /// How a plan-backend sweep of `kind` (`"promote"` or `"stalled"`) with
    /// `batch` and `group` splits its selection on this server (`sweeps::group_for`):
    /// `(rows, watch_cap)`: groups of at most `rows` rows; with a `watch_cap`, one
    /// transaction unless the call would watch more keys than that, then groups
    /// of that many rows.
    #[pyo3(signature = (kind, batch, group=None))]
    fn _sweep_group(&self, py: Python<'_>, kind: &str, batch: u64, group: Option<u64>) -> PyResult<(u64, Option<u64>)> {
        let kind = match kind {
            "promote" => Kind::Promote,
            "stalled" => Kind::Stalled { max_stalled: None },
            other => {
                return Err(HostError::Argument(format!("_sweep_group: kind must be \"promote\" or \"stalled\", not {other:?}")).into())
            }
        };
        self.with(py, |c| sweeps::group_for(c, kind, batch, group)).map(|g| (g.rows, g.watch_cap))
    }

    /// How long this connection's reads poll before they sleep (µs): its
    /// `spin_us`, between sweeps too (`Conn::sweeping` lends a sweep a longer one).
    fn _spin_us(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |c| Ok(u64::try_from(c.spin().as_micros()).unwrap_or(u64::MAX)))
    }

    /// STALLED CHECK (SPEC §6): `(recovered ids, dead ids)`; `max_stalled=None`:
    /// nothing dies.
    #[pyo3(signature = (queue, max_stalled, batch, backend, group=None))]
    fn stalled_check<'py>(
        &self,
        py: Python<'py>,
        queue: &Bound<'py, PyAny>,
        max_stalled: Option<&Bound<'py, PyAny>>,
        batch: &Bound<'py, PyAny>,
        backend: &Bound<'py, PyAny>,
        group: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let (q, max_stalled, batch) = stalled_args(queue, max_stalled, batch)?;
        let backend = backend_arg(STALLED, backend)?;
        let group = group_arg(STALLED, group, backend)?;
        let outcome = self.wrote(py, STALLED, &q, |c| sweeps::run(c, backend, Kind::Stalled { max_stalled }, &q, batch, group))?;
        let Outcome::Stalled { recovered, dead } = outcome else { unreachable!("a stalled check gives two lists") };
        PyTuple::new(py, [id_list(py, recovered)?, id_list(py, dead)?])
    }

    /// The wire form: the seed's EVALSHA tail with the command's name first,
    /// checked as the module checks it, then run by `backend`.
    #[pyo3(signature = (*args, backend=None))]
    fn wire<'py>(&self, py: Python<'py>, args: &Bound<'py, PyTuple>, backend: Option<&Bound<'py, PyAny>>) -> PyResult<Bound<'py, PyAny>> {
        let args: Vec<Vec<u8>> = args.iter().map(|a| arg_bytes("emq.wire", &a)).collect::<HostResult<_>>()?;
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let req = wire::parse(&refs).map_err(HostError::from)?;
        let backend = backend.map(|b| backend_arg(req.kind.verb(), b)).transpose()?.unwrap_or(Backend::Plan);
        match self.wrote(py, req.kind.verb(), &req.queue, |c| sweeps::run(c, backend, req.kind, &req.queue, req.batch, None))? {
            Outcome::Promoted(n) => Ok(n.into_pyobject(py)?.into_any()),
            Outcome::Stalled { recovered, dead } => Ok(PyList::new(py, [id_list(py, recovered)?, id_list(py, dead)?])?.into_any()),
        }
    }

    /// ADD (SPEC §7) for the facade's `Queue.add` / `add_many`: `jobs` are
    /// `(id or None, data, delay_ms or None, at_ms or None, lane or None,
    /// max_attempts)`, checked by the facade for types and signs. All are added
    /// in one guarded transaction; an id that exists refuses the whole call.
    /// `module`: by emq's server module (`EMQ.ADD`, one round trip).
    #[pyo3(signature = (queue, jobs, module=false))]
    fn _add(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, jobs: Vec<NewJobArgs>, module: bool) -> PyResult<Vec<String>> {
        let q = queue_arg(emq_plan::jobs::add::ADD, queue)?;
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
        let ids =
            self.wrote(py, emq_plan::jobs::add::ADD, &q, |c| if module { module::add(c, &q, &jobs) } else { jobs::add(c, &q, &jobs) })?;
        Ok(ids.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
    }

    /// CLAIM (SPEC §7): the jobs taken, each with its lease's token. `module`:
    /// by emq's server module (`EMQ.CLAIM`, one round trip).
    #[pyo3(signature = (queue, n, lease_ms, module=false))]
    fn _claim(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, n: u64, lease_ms: u64, module: bool) -> PyResult<Vec<Job>> {
        let q = queue_arg(emq_plan::jobs::claim::CLAIM, queue)?;
        let claimed = self.wrote(py, emq_plan::jobs::claim::CLAIM, &q, |c| {
            if module {
                module::claim(c, &q, n, lease_ms)
            } else {
                jobs::claim(c, &q, n, lease_ms)
            }
        })?;
        Ok(claimed.into_iter().map(Job::claimed).collect())
    }

    /// EXTEND (SPEC §7): whether the lease was extended (`False`: it is lost).
    fn _extend(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, job: &Job, lease_ms: u64) -> PyResult<bool> {
        Ok(self.settle(py, queue, job, Action::Extend { lease_ms })? == Settled::Extended)
    }

    /// EXTEND of many held jobs of the queue in one call (one clock reading, one
    /// transaction): for each, whether its lease now ends `lease_ms` from now
    /// (`False`: lost, and left as it is), as `_extend` would answer it alone.
    /// `module`: by `EMQ.EXTEND`, run by emq's server module.
    #[pyo3(signature = (queue, jobs, lease_ms, module=false))]
    fn _extend_many(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        jobs: Vec<PyRef<'_, Job>>,
        lease_ms: u64,
        module: bool,
    ) -> PyResult<Vec<bool>> {
        self.held_answers(py, emq_plan::jobs::settle::EXTEND, queue, &jobs, |c, q, held| {
            if module {
                module::extend_many(c, q, held, lease_ms)
            } else {
                jobs::extend_many(c, q, held, lease_ms)
            }
        })
    }

    /// COMPLETE of many held jobs of the queue in one call (one clock reading,
    /// one transaction): for each, whether it is done (`False`: its lease was
    /// lost, and it is left as it is), as `_complete` would answer it alone.
    #[pyo3(signature = (queue, jobs, module=false))]
    fn _complete_many(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, jobs: Vec<PyRef<'_, Job>>, module: bool) -> PyResult<Vec<bool>> {
        let complete_many = if module { module::complete_many } else { jobs::complete_many };
        self.held_answers(py, emq_plan::jobs::settle::COMPLETE, queue, &jobs, complete_many)
    }

    /// COMPLETE or FAIL of many held jobs of the queue in one call (one clock
    /// reading, one transaction: a group commit of finished and failed jobs).
    /// `fails[i]`: `None` completes `jobs[i]`, `(error, retry_in_ms)` fails it.
    /// For each: `"done"`, `"scheduled"`, `"dead"` or `"refused"`, as its single
    /// call would answer it. `module`: by `EMQ.SETTLE`, run by emq's server module.
    #[pyo3(signature = (queue, jobs, fails, module=false))]
    fn _settle_many(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        jobs: Vec<PyRef<'_, Job>>,
        fails: Vec<Option<jobs::Failure>>,
        module: bool,
    ) -> PyResult<Vec<&'static str>> {
        let verb = if fails.iter().all(Option::is_none) { emq_plan::jobs::settle::COMPLETE } else { emq_plan::jobs::settle::FAIL };
        let q = queue_arg(verb, queue)?;
        if jobs.len() != fails.len() {
            return Err(HostError::Argument(format!("{verb}: jobs and fails differ in length")).into());
        }
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        let items: Vec<_> = held_jobs(&jobs).into_iter().zip(fails).collect();
        let answers =
            self.wrote(py, verb, &q, |c| if module { module::settle_many(c, &q, &items) } else { jobs::settle_many(c, &q, &items) })?;
        Ok(answers
            .into_iter()
            .map(|a| match a {
                Settled::Completed => "done",
                Settled::Retrying => "scheduled",
                Settled::Dead => "dead",
                _ => "refused",
            })
            .collect())
    }

    /// `_complete_many` and a claim of up to `n` flat jobs (from `pending`; no
    /// lane) in the same transaction: the answers, and the jobs taken (`None`
    /// when the guard aborted the first try and the claim was dropped: see
    /// `jobs::complete_many_claim`).
    #[pyo3(signature = (queue, jobs, n, lease_ms, module=false))]
    fn _complete_many_claim(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        jobs: Vec<PyRef<'_, Job>>,
        n: u64,
        lease_ms: u64,
        module: bool,
    ) -> PyResult<(Vec<bool>, Option<Vec<Job>>)> {
        let q = queue_arg(emq_plan::jobs::settle::COMPLETE, queue)?;
        let held = held_jobs(&jobs);
        let (done, claimed) = self.wrote(py, emq_plan::jobs::settle::COMPLETE, &q, |c| {
            if module {
                module::complete_many_claim(c, &q, &held, n, lease_ms).map(|(done, taken)| (done, Some(taken)))
            } else {
                jobs::complete_many_claim(c, &q, &held, n, lease_ms)
            }
        })?;
        Ok((done, claimed.map(|c| c.into_iter().map(Job::claimed).collect())))
    }

    /// COMPLETE (SPEC §7): whether the job is done (`False`: the lease is lost).
    fn _complete(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, job: &Job) -> PyResult<bool> {
        Ok(self.settle(py, queue, job, Action::Complete)? == Settled::Completed)
    }

    /// FAIL (SPEC §7): `"scheduled"` (retried later, or ready at once), `"dead"`,
    /// or `"refused"` (the lease is lost).
    #[pyo3(signature = (queue, job, error, retry_in_ms=None))]
    fn _fail(
        &self,
        py: Python<'_>,
        queue: &Bound<'_, PyAny>,
        job: &Job,
        error: Vec<u8>,
        retry_in_ms: Option<u64>,
    ) -> PyResult<&'static str> {
        Ok(match self.settle(py, queue, job, Action::Fail { error, retry_in_ms })? {
            Settled::Retrying => "scheduled",
            Settled::Dead => "dead",
            _ => "refused",
        })
    }

    /// Pauses a lane: it keeps its jobs and leaves the ring.
    fn _pause_lane(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, lane: &str) -> PyResult<()> {
        self.lane(py, queue, lane, LaneOp::Pause)
    }

    /// Resumes a lane (then offers it).
    fn _resume_lane(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, lane: &str) -> PyResult<()> {
        self.lane(py, queue, lane, LaneOp::Resume)
    }

    /// At most `limit` of the lane's jobs active at once (`0`: no limit), then offers it.
    fn _set_lane_limit(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, lane: &str, limit: u64) -> PyResult<()> {
        self.lane(py, queue, lane, LaneOp::Limit(limit))
    }

    /// The park of a worker's beat: blocks on the queue's `wake` list until a
    /// token comes (`True`) or `timeout_s` passes (`False`).
    fn _park(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, timeout_s: f64) -> PyResult<bool> {
        let q = queue_arg("EMQ.PARK", queue)?;
        let cmd = Cmd::new("BLPOP").arg(Keys::new(&q).wake()).arg(format!("{:.3}", timeout_s.max(0.001)));
        // A redirect is an error reply here, not a failed call: make it one, so it is followed.
        let parked = self.on(py, "EMQ.PARK", &q, |c| match c.one(cmd.clone())? {
            Reply::Error { code, message } => Err(HostError::classify("EMQ.PARK", &code, &message)),
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

    /// For the tests of a call that panics: watches `key` and panics while the
    /// connection is held, leaving a watch and the lock poisoned behind. The next
    /// call must run on a new connection.
    fn _panic_while_watching(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<()> {
        let key = text_arg("_panic_while_watching", "key", key)?;
        self.with(py, |c| -> HostResult<()> {
            c.one(Cmd::new("WATCH").arg(key))?;
            panic!("emq: a panic for the tests, while a call holds the connection");
        })
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
        self.routed(py, |r| {
            r.close();
            Ok(())
        })
    }

    fn __repr__(&self) -> String {
        format!("<emq.Client {}>", self.address)
    }

    /// The job under `id` for `Queue.get`, or `None` (never added, or no longer kept).
    fn _get(&self, py: Python<'_>, queue: &Bound<'_, PyAny>, id: &str) -> PyResult<Option<Job>> {
        let q = queue_arg(emq_plan::reads::GET, queue)?;
        let key = id.as_bytes().to_vec();
        let row = self.on(py, emq_plan::reads::GET, &q, |c| look::get(c, &q, &key))?;
        Ok(row.map(|r| Job::row(id.to_string(), r)))
    }

    /// The lanes that have a list or a control hash, sorted.
    fn _lanes(&self, py: Python<'_>, queue: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let q = queue_arg(emq_plan::reads::LANES, queue)?;
        let names = self.on(py, emq_plan::reads::LANES, &q, |c| look::lanes(c, &q))?;
        Ok(names.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect())
    }

    /// `{"schedule", "pending", "lanes": {lane: n}, "active", "dead", "done", "ring"}`,
    /// read at one instant; `done` counts the done rows still kept.
    fn _counts<'py>(&self, py: Python<'py>, queue: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let q = queue_arg(emq_plan::reads::COUNTS, queue)?;
        let n = self.on(py, emq_plan::reads::COUNTS, &q, |c| look::counts(c, &q))?;
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
        let q = queue_arg(emq_plan::jobs::retention::RETENTION, queue)?;
        let r = self.on(py, emq_plan::jobs::retention::RETENTION, &q, |c| look::retention(c, &q))?;
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
        let verb = emq_plan::jobs::retention::RETENTION;
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
        self.wrote(py, verb, &q, |conn| look::set_retention(conn, &q, a, b, c))
    }
}

/// A router's address: its seed's, without a password.
fn router_address(r: &Router) -> String {
    r.address().to_string()
}

/// The held jobs (id, token, lane) a batch call is given.
fn held_jobs(jobs: &[PyRef<'_, Job>]) -> Vec<Held> {
    jobs.iter()
        .map(|j| Held {
            id: j.id.as_bytes().to_vec(),
            token: j.token.as_deref().unwrap_or_default().as_bytes().to_vec(),
            lane: j.lane.as_deref().map(|l| l.as_bytes().to_vec()),
        })
        .collect()
}

/// `_stalled_next`'s reply: recovered and dead ids, and how long until the next lease deadline.
type StalledNext<'py> = (Bound<'py, PyList>, Bound<'py, PyList>, Option<f64>);

/// A stalled check's queue, `max_stalled` (None: nothing dies) and `batch`, checked.
fn stalled_args(
    queue: &Bound<'_, PyAny>,
    max_stalled: Option<&Bound<'_, PyAny>>,
    batch: &Bound<'_, PyAny>,
) -> HostResult<(Vec<u8>, Option<u64>, u64)> {
    let q = queue_arg(STALLED, queue)?;
    let max_stalled = max_stalled.map(|m| count(STALLED, "max_stalled", m, true)).transpose()?;
    Ok((q, max_stalled, count(STALLED, "batch", batch, false)?))
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
        Reply::Double(d) => d.into_pyobject(py)?.into_any(),
        Reply::Status(s) => PyString::new(py, &s).into_any(),
        Reply::Array(items) => {
            let l = PyList::empty(py);
            for i in items {
                l.append(to_py(py, i)?)?;
            }
            l.into_any()
        }
        Reply::Error { code, message } => return Err(HostError::classify("emq", &code, &message).into()),
    })
}

/// A queue name as SPEC §1 has it (1 to 128 bytes of UTF-8, no braces, control
/// characters or whitespace), or `emq.ArgumentError` naming `verb`.
#[pyfunction]
fn check_queue(verb: &str, name: &Bound<'_, PyAny>) -> PyResult<String> {
    let q = queue_arg(verb, name)?;
    Ok(String::from_utf8(q).expect("checked UTF-8"))
}

/// A job id or lane name as SPEC §1 has it (1 to 256 bytes of UTF-8, no control
/// characters), or `emq.ArgumentError` naming `verb` and `what`.
#[pyfunction]
fn check_name(verb: &str, what: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    let v = text_arg(verb, what, value)?;
    match names::id_problem(v.as_bytes()) {
        Some(why) => Err(HostError::Argument(format!("{verb}: {what} {why}")).into()),
        None => Ok(v),
    }
}

/// A `str` that encodes to UTF-8, or `emq.ArgumentError` naming `verb` and `what`.
#[pyfunction]
fn check_text(verb: &str, what: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    Ok(text_arg(verb, what, value)?)
}

/// Seconds to back off after `streak` failures in a row (a worker's degraded
/// beats, SPEC §8): `base_ms · 2^streak`, capped at `cap_ms`, half of it fixed
/// and half random (`emq_plan::backoff`, the randomness the core's own).
#[pyfunction]
fn backoff_s(streak: u64, base_ms: u64, cap_ms: u64) -> f64 {
    let attempt = u32::try_from(streak).unwrap_or(u32::MAX);
    emq_plan::backoff::backoff(attempt, base_ms, cap_ms, Jitter::new().unit()) / 1000.0
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

/// The cluster slot of every key of `queue` (`CLUSTER KEYSLOT emq:{queue}:…`).
#[pyfunction]
fn queue_slot(queue: &Bound<'_, PyAny>) -> PyResult<u16> {
    Ok(cluster::queue_slot(&queue_arg("emq.queue_slot", queue)?))
}

thread_local! {
    /// What a Python signal handler raised during this thread's call (`signal_raised`).
    static RAISED: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// The wire's hook for a read interrupted by a signal (`emq_wire::resp::on_interrupt`):
/// runs the Python signal handlers, as Python's own blocking calls do (PEP 475;
/// only the main thread has any to run), and gives the read up only when one
/// raised (`KeyboardInterrupt`), which the call then raises (`Client::routed`).
/// Else the read goes on: a handler that returns (a worker's `SIGTERM`, which
/// ends its park from another thread; a `SIGCHLD`, a profiler's) does not break
/// the call.
fn signal_raised() -> bool {
    Python::attach(|py| match py.check_signals() {
        Ok(()) => false,
        Err(e) => {
            RAISED.with(|r| *r.borrow_mut() = Some(e));
            true
        }
    })
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    emq_wire::resp::on_interrupt(signal_raised);
    m.add_function(wrap_pyfunction!(queue_slot, m)?)?;
    m.add_class::<Client>()?;
    m.add_class::<Job>()?;
    m.add_function(wrap_pyfunction!(parse_info, m)?)?;
    m.add_function(wrap_pyfunction!(backoff_s, m)?)?;
    m.add_function(wrap_pyfunction!(check_queue, m)?)?;
    m.add_function(wrap_pyfunction!(check_name, m)?)?;
    m.add_function(wrap_pyfunction!(check_text, m)?)?;
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
    let defaults = PyDict::new(m.py());
    defaults.set_item("done_ms", emq_plan::jobs::retention::DONE_MS)?;
    defaults.set_item("dead_ms", emq_plan::jobs::retention::DEAD_MS)?;
    defaults.set_item("dead_max", emq_plan::jobs::retention::DEAD_MAX)?;
    m.add("RETENTION_DEFAULTS", defaults)?;
    Ok(())
}

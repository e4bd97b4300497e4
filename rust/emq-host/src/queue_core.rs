//! The `QueueCore` class: one queue as `emq.Queue` holds it, made once: its
//! client, its name (checked then), its keys, and its backend (`JobBackend`,
//! chosen then). One method per call of `emq.Queue`, each checking its
//! arguments (`arguments`) and naming `Queue.<call>` in every error.

use std::sync::atomic::AtomicBool;

use emq_plan::jobs::waiters::Watched;
use emq_plan::lanes::lane_control::LaneOp;
use emq_plan::operations::{Action, Answer, Place};
use emq_plan::schedules::ops::{Answer as ScheduleAnswer, Op};
use emq_plan::sweep::{Kind, Outcome};
use emq_plan::Keys;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::arguments::{
    self, completions, count, duration, fail_of, held, held_jobs, integer, optional_count, optional_duration, JobBackendName, Least, Span,
    MAX_STORED,
};
use crate::client::{Client, Setting};
use crate::conn::Conn;
use crate::error::{ForCall, HostResult};
use crate::job_backend::JobBackend;
use crate::job_class::Job;
use crate::module_backend::ModuleBackend;
use crate::operations;
use crate::outcome_calls;
use crate::plan_backend::{lane_control, PlanBackend};
use crate::py_values;
use crate::reads;
use crate::registry;
use crate::schedules;
use crate::sweeps;

#[pyclass(frozen, module = "emq._core")]
pub struct QueueCore {
    client: Py<Client>,
    name: String,
    keys: Keys,
    backend: &'static dyn JobBackend,
    /// Whether this process has added the name to the registry (`registry::register`).
    registered: AtomicBool,
}

impl QueueCore {
    fn queue(&self) -> &[u8] {
        self.name.as_bytes()
    }

    /// A job operation on the queue's connection, by its backend.
    fn job_op<T: Send>(
        &self,
        py: Python<'_>,
        call: &str,
        f: impl Fn(&dyn JobBackend, &mut Conn, &Keys) -> HostResult<T> + Send + Sync,
    ) -> PyResult<T> {
        let (backend, keys) = (self.backend, &self.keys);
        self.client.get().wrote(py, call, self.queue(), |c| f(backend, c, keys))
    }

    /// An add's result, once the queue is registered if the add landed or may
    /// have (`emq.OutcomeUnknownError`: a retry of it then writes nothing new).
    fn added<T>(&self, py: Python<'_>, result: PyResult<T>) -> PyResult<T> {
        let landed = match &result {
            Ok(_) => true,
            Err(e) => e.get_type(py).name().is_ok_and(|n| n == "OutcomeUnknownError"),
        };
        if landed {
            registry::register(py, self.client.get(), self.queue(), &self.registered);
        }
        result
    }

    /// An operator's action on the jobs `ids` (checked first): each id and its answer.
    fn act(&self, py: Python<'_>, call: &str, action: Action, ids: &Bound<'_, PyAny>) -> PyResult<Vec<(String, &'static str)>> {
        let ids = arguments::distinct_ids(call, "ids", ids)?;
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let keys = &self.keys;
        let answers = self.client.get().wrote(py, call, self.queue(), |c| operations::act(c, call, keys, action, &ids))?;
        let word = |a: Answer| match a {
            Answer::Done => "done",
            Answer::Missing => "missing",
            Answer::Refused => "refused",
        };
        Ok(ids.into_iter().map(py_values::text).zip(answers.into_iter().map(word)).collect())
    }

    fn lane(&self, py: Python<'_>, call: &str, lane: &Bound<'_, PyAny>, op: LaneOp) -> PyResult<()> {
        let lane = arguments::name(call, "lane", lane)?;
        let keys = &self.keys;
        self.client.get().wrote(py, call, self.queue(), |c| lane_control(c, call, keys, &lane, op))
    }

    fn sweep(
        &self,
        py: Python<'_>,
        call: &str,
        kind: Kind,
        batch: u64,
        backend: &Bound<'_, PyAny>,
        group: &Bound<'_, PyAny>,
    ) -> PyResult<Outcome> {
        let backend = arguments::sweep_backend(call, backend)?;
        let group = arguments::group(call, group, backend)?;
        self.client.get().sweep(py, call, self.queue(), kind, batch, backend, group)
    }

    /// A schedule verb on `name`, by the queue's backend.
    fn schedule_op(&self, py: Python<'_>, call: &str, name: &Bound<'_, PyAny>, op: Op) -> PyResult<ScheduleAnswer> {
        let name = arguments::text(call, "name", name)?.into_bytes();
        let (keys, module) = (&self.keys, self.backend.name() == "module");
        self.client.get().wrote(py, call, self.queue(), |c| schedules::schedule_op(c, call, keys, &name, &op, module))
    }

    fn changed(&self, py: Python<'_>, call: &str, name: &Bound<'_, PyAny>, op: Op) -> PyResult<bool> {
        Ok(self.schedule_op(py, call, name, op)? == ScheduleAnswer::Changed(true))
    }

    /// A worker's beat sweep: the plan's, with how long from now (s) until the
    /// next due time or lease deadline it saw (`sweeps::run_plan_timed`).
    fn beat_sweep(&self, py: Python<'_>, call: &str, kind: Kind, batch: u64) -> PyResult<(Outcome, Option<f64>)> {
        let keys = &self.keys;
        let timers = kind == Kind::Promote;
        self.client.get().wrote(py, call, self.queue(), |c| sweeps::run_plan_timed(c, call, kind, keys, batch, None, timers))
    }
}

/// A retention field as the plan sets it: left out (`None`), `None` given
/// (`-1`: forever, no limit), or its value.
fn retention_field(v: Setting<'_>, parse: impl Fn(&Bound<'_, PyAny>) -> PyResult<u64>) -> PyResult<Option<i64>> {
    match v {
        Setting::Unchanged => Ok(None),
        Setting::Given(v) if v.is_none() => Ok(Some(-1)),
        // Both parses stay within a stored field's 15 digits (`MAX_STORED`).
        Setting::Given(v) => Ok(Some(parse(&v)? as i64)),
    }
}

#[pymethods]
impl QueueCore {
    /// `emq.Queue(client, name, backend=)`'s core: `client` an `emq.Client` or
    /// a URL, the name checked once (SPEC §1), the backend chosen once.
    #[new]
    fn new(client: &Bound<'_, PyAny>, name: &Bound<'_, PyAny>, backend: &Bound<'_, PyAny>) -> PyResult<Self> {
        const CALL: &str = "emq.Queue";
        let client = Client::from_arg(CALL, client)?;
        let queue = arguments::queue_name(CALL, "name", name)?;
        let backend: &'static dyn JobBackend = match arguments::job_backend(CALL, backend)? {
            JobBackendName::Plan => &PlanBackend,
            JobBackendName::Module => &ModuleBackend,
        };
        let keys = Keys::new(&queue);
        Ok(QueueCore { client, name: String::from_utf8(queue).expect("checked UTF-8"), keys, backend, registered: AtomicBool::new(false) })
    }

    #[getter]
    fn client(&self, py: Python<'_>) -> Py<Client> {
        self.client.clone_ref(py)
    }

    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    #[getter]
    fn backend(&self) -> &'static str {
        self.backend.name()
    }

    /// ADD (SPEC §7) of one job: its id. `delay` and `at` (at most one of them)
    /// in ms as every duration and time is (`arguments::Span::ms`, `instant`);
    /// `keep`, the job's own retention (`None`: the queue's; `"forever"`);
    /// `priority`, 0 (first, the default) to 9; `inbox`, a waiter registered
    /// with the job in the add's transaction (`None`: none). Whether this call
    /// wrote the job comes with its id (`false`: it had landed, so no waiter
    /// was registered).
    #[allow(clippy::too_many_arguments)]
    fn add(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        id: &Bound<'_, PyAny>,
        delay: &Bound<'_, PyAny>,
        at: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        max_attempts: &Bound<'_, PyAny>,
        keep: &Bound<'_, PyAny>,
        priority: &Bound<'_, PyAny>,
        inbox: &Bound<'_, PyAny>,
    ) -> PyResult<(String, bool)> {
        const CALL: &str = "Queue.add";
        let none = py.None().into_bound(py);
        let job = [arguments::new_job(CALL, data, id, delay, at, lane, max_attempts, Some([keep, &none, &none, priority]))?];
        let inbox = if inbox.is_none() { None } else { Some(arguments::inbox(CALL, inbox)?) };
        let (ids, created) = self.added(py, self.job_op(py, CALL, |b, c, k| b.add(c, CALL, k, &job, inbox.as_deref())))?;
        Ok((ids.into_iter().next().map(py_values::text).unwrap_or_default(), created.first().copied().unwrap_or(false)))
    }

    /// ADD of one job under a uniqueness key for `unique_for`: an
    /// `emq.UniqueAdd`, the id of the job the key names while its row exists
    /// (and nothing written), else of the new job.
    #[allow(clippy::too_many_arguments)]
    fn add_unique<'py>(
        &self,
        py: Python<'py>,
        data: &Bound<'py, PyAny>,
        unique_key: &Bound<'py, PyAny>,
        unique_for: &Bound<'py, PyAny>,
        id: &Bound<'py, PyAny>,
        delay: &Bound<'py, PyAny>,
        at: &Bound<'py, PyAny>,
        lane: &Bound<'py, PyAny>,
        max_attempts: &Bound<'py, PyAny>,
        keep: &Bound<'py, PyAny>,
        priority: &Bound<'py, PyAny>,
        inbox: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.add_unique";
        if unique_key.is_none() || unique_for.is_none() {
            return Err(arguments::refused(CALL, "unique_key and unique_for are needed"));
        }
        let job = [arguments::new_job(CALL, data, id, delay, at, lane, max_attempts, Some([keep, unique_key, unique_for, priority]))?];
        let inbox = if inbox.is_none() { None } else { Some(arguments::inbox(CALL, inbox)?) };
        let (ids, created) = self.added(py, self.job_op(py, CALL, |b, c, k| b.add(c, CALL, k, &job, inbox.as_deref())))?;
        py_values::unique_add(py, ids.into_iter().next().unwrap_or_default(), created.first().copied().unwrap_or(false))
    }

    /// ADD of many jobs in one guarded transaction (all or none): each its data,
    /// or a dict of `add`'s arguments; `max_attempts` for those that name none.
    fn add_many(&self, py: Python<'_>, jobs: &Bound<'_, PyAny>, max_attempts: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        const CALL: &str = "Queue.add_many";
        let jobs = arguments::new_jobs(CALL, jobs, max_attempts)?;
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        let (ids, _) = self.added(py, self.job_op(py, CALL, |b, c, k| b.add(c, CALL, k, &jobs, None)))?;
        Ok(ids.into_iter().map(py_values::text).collect())
    }

    /// CLAIM: up to `n` jobs, each leased for `lease` (in ms, `Span::ms`).
    fn claim(&self, py: Python<'_>, n: &Bound<'_, PyAny>, lease: &Bound<'_, PyAny>) -> PyResult<Vec<Job>> {
        const CALL: &str = "Queue.claim";
        let n = count(CALL, "n", n, false)?;
        let lease_ms = duration(CALL, "lease", lease, Least::Positive, None)?.ms();
        let claimed = self.job_op(py, CALL, |b, c, k| b.claim(c, CALL, k, n, lease_ms))?;
        Ok(claimed.into_iter().map(Job::claimed).collect())
    }

    /// EXTEND: whether the lease now ends `lease` from now (`False`: it is lost).
    fn extend(&self, py: Python<'_>, job: &Bound<'_, PyAny>, lease: &Bound<'_, PyAny>) -> PyResult<bool> {
        const CALL: &str = "Queue.extend";
        let job = held(CALL, job)?;
        let lease_ms = duration(CALL, "lease", lease, Least::Positive, None)?.ms();
        self.job_op(py, CALL, |b, c, k| b.extend(c, CALL, k, &job, lease_ms))
    }

    /// EXTEND of many held jobs in one call: whether each was extended.
    fn extend_many(&self, py: Python<'_>, jobs: &Bound<'_, PyAny>, lease: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        const CALL: &str = "Queue.extend_many";
        let jobs = held_jobs(CALL, jobs)?;
        let lease_ms = duration(CALL, "lease", lease, Least::Positive, None)?.ms();
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        self.job_op(py, CALL, |b, c, k| b.extend_many(c, CALL, k, &jobs, lease_ms))
    }

    /// COMPLETE with its result (`None`: none): whether the job left `active`
    /// (done, or cancelled: it had been asked to stop; `False`: the lease is lost).
    fn complete(&self, py: Python<'_>, job: &Bound<'_, PyAny>, result: &Bound<'_, PyAny>) -> PyResult<bool> {
        const CALL: &str = "Queue.complete";
        let job = (held(CALL, job)?, arguments::result(CALL, result)?);
        self.job_op(py, CALL, |b, c, k| b.complete(c, CALL, k, &job))
    }

    /// COMPLETE of many held jobs in one call (each a job, or `(job, result)`):
    /// whether each left `active`.
    fn complete_many(&self, py: Python<'_>, jobs: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        const CALL: &str = "Queue.complete_many";
        let jobs = completions(CALL, jobs)?;
        if jobs.is_empty() {
            return Ok(vec![]);
        }
        self.job_op(py, CALL, |b, c, k| b.complete_many(c, CALL, k, &jobs))
    }

    /// `complete_many` and a claim of up to `n` jobs (0: none), each leased for
    /// `lease`: the answers, and the jobs taken (`None`: the claim was dropped).
    fn complete_and_claim(
        &self,
        py: Python<'_>,
        jobs: &Bound<'_, PyAny>,
        n: &Bound<'_, PyAny>,
        lease: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<bool>, Option<Vec<Job>>)> {
        const CALL: &str = "Queue.complete_and_claim";
        let jobs = completions(CALL, jobs)?;
        let n = count(CALL, "n", n, true)?;
        let lease_ms = duration(CALL, "lease", lease, Least::Positive, None)?.ms();
        let (done, claimed) = self.job_op(py, CALL, |b, c, k| b.complete_and_claim(c, CALL, k, &jobs, n, lease_ms))?;
        Ok((done, claimed.map(|c| c.into_iter().map(Job::claimed).collect())))
    }

    /// FAIL: an `emq.FailOutcome`. `retry_in` (`None`: the backoff) in ms,
    /// `Span::ms`; `error_type` (`None`: the error's class, when it is an
    /// exception) and `traceback` written beside the error; `retry` False:
    /// dead now, attempts left or not.
    #[pyo3(signature = (job, error, retry_in, error_type, traceback, retry = None))]
    #[allow(clippy::too_many_arguments, reason = "the facade's keyword arguments, one each")]
    fn fail<'py>(
        &self,
        py: Python<'py>,
        job: &Bound<'py, PyAny>,
        error: &Bound<'py, PyAny>,
        retry_in: &Bound<'py, PyAny>,
        error_type: &Bound<'py, PyAny>,
        traceback: &Bound<'py, PyAny>,
        retry: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.fail";
        let job = held(CALL, job)?;
        let none = py.None().into_bound(py);
        let failure = fail_of(CALL, error, retry_in, (error_type, traceback), retry.unwrap_or(&none))?;
        let settled = self.job_op(py, CALL, |b, c, k| b.fail(c, CALL, k, &job, &failure))?;
        py_values::fail_outcome(py, settled)
    }

    /// COMPLETE and FAIL of many held jobs in one call: for each item, what its
    /// single call answers (`complete`: a bool; `fail`: an `emq.FailOutcome`).
    fn settle_many<'py>(&self, py: Python<'py>, items: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        const CALL: &str = "Queue.settle_many";
        let items = arguments::settle_items(CALL, items)?;
        let answers = if items.is_empty() { vec![] } else { self.job_op(py, CALL, |b, c, k| b.settle_many(c, CALL, k, &items))? };
        let out = PyList::empty(py);
        for ((_, finish), settled) in items.iter().zip(answers) {
            out.append(py_values::settle_answer(py, settled, matches!(finish, crate::job_backend::Finish::Fail(_)))?)?;
        }
        Ok(out)
    }

    /// Pauses a lane: it keeps its jobs and leaves the ring.
    fn pause_lane(&self, py: Python<'_>, lane: &Bound<'_, PyAny>) -> PyResult<()> {
        self.lane(py, "Queue.pause_lane", lane, LaneOp::Pause)
    }

    /// Resumes a lane (then offers it).
    fn resume_lane(&self, py: Python<'_>, lane: &Bound<'_, PyAny>) -> PyResult<()> {
        self.lane(py, "Queue.resume_lane", lane, LaneOp::Resume)
    }

    /// At most `n` of the lane's jobs active at once (`0`: no limit), then offers it.
    fn set_lane_limit(&self, py: Python<'_>, lane: &Bound<'_, PyAny>, n: &Bound<'_, PyAny>) -> PyResult<()> {
        const CALL: &str = "Queue.set_lane_limit";
        let n = integer(CALL, "n", n, 0, MAX_STORED)?;
        self.lane(py, CALL, lane, LaneOp::Limit(n))
    }

    /// The job under `id`, or `None` (never added, or no longer kept).
    fn get(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> PyResult<Option<Job>> {
        const CALL: &str = "Queue.get";
        let key = arguments::name(CALL, "id", id)?;
        let keys = &self.keys;
        let row = self.client.get().on(py, CALL, self.queue(), |c| reads::get(c, CALL, keys, &key))?;
        Ok(row.map(|r| Job::row(py_values::text(key), r)))
    }

    /// Many rows in one pipelined read: for each id its `emq.Job` (every
    /// field of the row), or `None` (never added, or no longer kept).
    fn status(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<Option<Job>>> {
        const CALL: &str = "Queue.status";
        let ids = arguments::ids(CALL, ids)?;
        let keys = &self.keys;
        let rows = self.client.get().on(py, CALL, self.queue(), |c| outcome_calls::status(c, CALL, keys, &ids))?;
        Ok(ids.into_iter().zip(rows).map(|(id, r)| r.map(|r| Job::row(py_values::text(id), r))).collect())
    }

    /// Registers `inbox` with each job (SPEC §13): for each id, `None` (no
    /// such job), its `emq.Job` come to an outcome (`ended`: done, dead or
    /// cancelled; nothing registered), or its `emq.Job` as it stands
    /// (registered: the inbox gets its id when it comes to an outcome).
    fn watch(&self, py: Python<'_>, ids: &Bound<'_, PyAny>, inbox: &Bound<'_, PyAny>) -> PyResult<Vec<Option<Job>>> {
        const CALL: &str = "Queue.watch";
        let ids = arguments::ids(CALL, ids)?;
        let inbox = arguments::inbox(CALL, inbox)?;
        let keys = &self.keys;
        let found = self.client.get().wrote(py, CALL, self.queue(), |c| outcome_calls::watch(c, CALL, keys, &ids, &inbox))?;
        Ok(ids
            .into_iter()
            .zip(found)
            .map(|(id, w)| match w {
                Watched::Unknown => None,
                Watched::Ended(r) | Watched::Waiting(r) => Some(Job::row(py_values::text(id), r)),
            })
            .collect())
    }

    /// The ids pushed to `inbox` (its waiters' jobs come to outcomes), oldest
    /// first: blocks on `client`'s connection until one comes, `timeout`
    /// passes (`[]`) or the pop is unblocked (`CLIENT UNBLOCK`), then takes
    /// every id there in the same round trip. `client` is one of its own.
    fn pop_inbox(
        &self,
        py: Python<'_>,
        inbox: &Bound<'_, PyAny>,
        timeout: &Bound<'_, PyAny>,
        client: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<String>> {
        const CALL: &str = "Queue.pop_inbox";
        let inbox = arguments::inbox(CALL, inbox)?;
        let timeout = optional_duration(CALL, "timeout", timeout, Least::Positive)?.map(Span::seconds);
        let client = client
            .cast::<Client>()
            .map_err(|_| arguments::refused(CALL, format_args!("client must be an emq.Client, not {}", arguments::type_name(client))))?;
        let keys = &self.keys;
        let ids = client.get().on(py, CALL, self.queue(), |c| outcome_calls::pop_inbox(c, CALL, keys, &inbox, timeout))?;
        Ok(ids.into_iter().map(py_values::text).collect())
    }

    /// CANCEL (SPEC §13): an `emq.CancelOutcome`.
    fn cancel<'py>(&self, py: Python<'py>, id: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.cancel";
        let id = arguments::name(CALL, "id", id)?;
        let keys = &self.keys;
        let out = self.client.get().wrote(py, CALL, self.queue(), |c| outcome_calls::cancel(c, CALL, keys, &id))?;
        py_values::cancel_outcome(py, out)
    }

    /// PROGRESS of a held job: whether it was written (`False`: the lease is lost).
    fn progress(&self, py: Python<'_>, job: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<bool> {
        const CALL: &str = "Queue.progress";
        let job = held(CALL, job)?;
        let value = arguments::progress(CALL, value)?;
        let keys = &self.keys;
        self.client.get().wrote(py, CALL, self.queue(), |c| outcome_calls::progress(c, CALL, keys, &job, &value))
    }

    /// The running jobs asked to stop since `since` (the cursor an earlier
    /// read gave; `None`: all still kept): an `emq.CancelRequests`.
    fn cancel_requests<'py>(&self, py: Python<'py>, since: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.cancel_requests";
        let since = optional_count(CALL, "since", since, true)?.map(|s| i64::try_from(s).unwrap_or(i64::MAX));
        let keys = &self.keys;
        let r = self.client.get().on(py, CALL, self.queue(), |c| outcome_calls::cancel_requests(c, CALL, keys, since))?;
        py_values::cancel_requests(py, r)
    }

    /// The lanes that have a list or a control hash, sorted.
    fn lanes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        const CALL: &str = "Queue.lanes";
        let keys = &self.keys;
        let names = self.client.get().on(py, CALL, self.queue(), |c| reads::lanes(c, CALL, keys))?;
        Ok(names.into_iter().map(py_values::text).collect())
    }

    /// The counts, read at one instant: an `emq.QueueCounts`.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.counts";
        let keys = &self.keys;
        let n = self.client.get().on(py, CALL, self.queue(), |c| reads::counts(c, CALL, keys))?;
        py_values::queue_counts(py, n)
    }

    /// A page of the jobs in `state` (`lane`: a lane's, for `pending`), by
    /// rank: `(jobs, total)`, the rows read only for the page.
    fn jobs(
        &self,
        py: Python<'_>,
        state: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        offset: &Bound<'_, PyAny>,
        limit: &Bound<'_, PyAny>,
    ) -> PyResult<(Vec<Job>, i64)> {
        const CALL: &str = "Queue.jobs";
        let state = arguments::text(CALL, "state", state)?;
        let lane = arguments::text::optional_name(CALL, "lane", lane)?;
        let place = Place::parse(CALL, state.as_bytes(), lane).for_call(CALL)?;
        let offset = integer(CALL, "offset", offset, 0, MAX_STORED)?;
        let limit = integer(CALL, "limit", limit, 1, emq_plan::operations::MAX_PAGE)?;
        let keys = &self.keys;
        let page = self.client.get().on(py, CALL, self.queue(), |c| operations::page(c, CALL, keys, &place, offset, limit))?;
        Ok((page.jobs.into_iter().map(|(id, row)| Job::row(py_values::text(id), row)).collect(), page.total))
    }

    /// RETRY of dead jobs: each id and `"done"`, `"missing"` or `"refused"` (not dead).
    fn retry(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<(String, &'static str)>> {
        self.act(py, "Queue.retry", Action::Retry, ids)
    }

    /// DELETE of jobs from wherever they wait: `"refused"` for an active one.
    fn delete(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<(String, &'static str)>> {
        self.act(py, "Queue.delete", Action::Delete, ids)
    }

    /// PROMOTE NOW of scheduled jobs: `"refused"` for one not scheduled.
    fn promote_now(&self, py: Python<'_>, ids: &Bound<'_, PyAny>) -> PyResult<Vec<(String, &'static str)>> {
        self.act(py, "Queue.promote_now", Action::PromoteNow, ids)
    }

    /// RETRY of the oldest dead jobs, up to `limit` (`None`: those dead now): how many.
    fn retry_dead(&self, py: Python<'_>, limit: &Bound<'_, PyAny>) -> PyResult<u64> {
        const CALL: &str = "Queue.retry_dead";
        let limit = optional_count(CALL, "limit", limit, true)?;
        let keys = &self.keys;
        self.client.get().wrote(py, CALL, self.queue(), |c| operations::retry_dead(c, CALL, keys, limit))
    }

    /// Each lane's control as it stands: `(paused, limit, active, in_ring)`, in the order asked.
    fn lane_controls(&self, py: Python<'_>, lanes: &Bound<'_, PyAny>) -> PyResult<Vec<(bool, i64, i64, bool)>> {
        const CALL: &str = "Queue.lane_controls";
        let lanes = arguments::distinct_ids(CALL, "lanes", lanes)?;
        let keys = &self.keys;
        let ctls = self.client.get().on(py, CALL, self.queue(), |c| operations::lane_controls(c, CALL, keys, &lanes))?;
        Ok(ctls.into_iter().map(|c| (c.paused, c.limit, c.active, c.in_ring)).collect())
    }

    /// The per-minute counters of the last `minutes` minutes, oldest first: the
    /// server clock (ms), then `(minute, completed, retried, dead, cancelled, recovered)` each.
    #[allow(clippy::type_complexity)]
    fn throughput(&self, py: Python<'_>, minutes: &Bound<'_, PyAny>) -> PyResult<(i64, Vec<(i64, i64, i64, i64, i64, i64)>)> {
        const CALL: &str = "Queue.throughput";
        let minutes = integer(CALL, "minutes", minutes, 1, emq_plan::operations::throughput::MAX_MINUTES)?;
        let keys = &self.keys;
        let m = self.client.get().on(py, CALL, self.queue(), |c| operations::throughput(c, CALL, keys, minutes))?;
        let rows = m.minutes.iter().map(|x| (x.minute, x.counts[0], x.counts[1], x.counts[2], x.counts[3], x.counts[4])).collect();
        Ok((m.now_ms, rows))
    }

    /// The effective retention policy: an `emq.Retention`.
    fn retention<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.retention";
        let keys = &self.keys;
        let r = self.client.get().on(py, CALL, self.queue(), |c| reads::retention(c, CALL, keys))?;
        py_values::retention(py, r)
    }

    /// Sets the retention fields given (each left out stays as it is; `None`:
    /// forever, no limit). `keep_done` and `keep_dead` in ms, `Span::ms`.
    #[pyo3(signature = (*, keep_done = Setting::Unchanged, keep_dead = Setting::Unchanged, max_dead = Setting::Unchanged))]
    fn set_retention(&self, py: Python<'_>, keep_done: Setting<'_>, keep_dead: Setting<'_>, max_dead: Setting<'_>) -> PyResult<()> {
        const CALL: &str = "Queue.set_retention";
        let ms = |name: &'static str| move |v: &Bound<'_, PyAny>| duration(CALL, name, v, Least::Zero, None).map(Span::ms);
        let done_ms = retention_field(keep_done, ms("keep_done"))?;
        let dead_ms = retention_field(keep_dead, ms("keep_dead"))?;
        let dead_max = retention_field(max_dead, |v| integer(CALL, "max_dead", v, 0, MAX_STORED))?;
        let keys = &self.keys;
        self.client.get().wrote(py, CALL, self.queue(), |c| reads::set_retention(c, CALL, keys, done_ms, dead_ms, dead_max))
    }

    /// SCHEDULE (SPEC §14): creates or changes the schedule `name`; whether it
    /// wrote (`False`: this definition is stored already). `every` and `grace`
    /// are durations; `missed` is `latest`, `all` (with `max_missed`) or
    /// `skip` (with `grace`).
    #[allow(clippy::too_many_arguments)]
    fn schedule(
        &self,
        py: Python<'_>,
        name: &Bound<'_, PyAny>,
        cron: &Bound<'_, PyAny>,
        every: &Bound<'_, PyAny>,
        tz: &Bound<'_, PyAny>,
        missed: &Bound<'_, PyAny>,
        max_missed: &Bound<'_, PyAny>,
        grace: &Bound<'_, PyAny>,
        data: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        max_attempts: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        const CALL: &str = "Queue.schedule";
        let def = schedules::definition(CALL, name, cron, every, tz, missed, max_missed, grace, data, lane, max_attempts)?;
        self.changed(py, CALL, name, Op::Set(Box::new(def)))
    }

    /// UNSCHEDULE: whether there was such a schedule.
    fn unschedule(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.changed(py, "Queue.unschedule", name, Op::Remove)
    }

    /// PAUSE: whether it was running.
    fn pause_schedule(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.changed(py, "Queue.pause_schedule", name, Op::Pause)
    }

    /// RESUME: whether it was paused.
    fn resume_schedule(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.changed(py, "Queue.resume_schedule", name, Op::Resume)
    }

    /// RUN NOW: the id of the job enqueued now (`tick_id(name, now)`), and
    /// whether this call added it.
    fn run_schedule_now(&self, py: Python<'_>, name: &Bound<'_, PyAny>) -> PyResult<(String, bool)> {
        match self.schedule_op(py, "Queue.run_schedule_now", name, Op::RunNow)? {
            ScheduleAnswer::Enqueued { id, added } => Ok((py_values::text(id), added)),
            ScheduleAnswer::Changed(_) => unreachable!("run now enqueues"),
        }
    }

    /// The queue's schedules, sorted by name: a dict each (`schedules::listed`).
    fn schedules<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        const CALL: &str = "Queue.schedules";
        let keys = &self.keys;
        let listed = self.client.get().on(py, CALL, self.queue(), |c| schedules::list(c, CALL, keys))?;
        let out = PyList::empty(py);
        for l in listed {
            out.append(schedules::listed(py, l)?)?;
        }
        Ok(out)
    }

    /// TIMERS of this queue (`backend`: `"plan"` or `"module"`): the ids of
    /// the jobs it enqueued, the ticks skipped (their job existed), the
    /// schedules some of whose ticks the policy dropped, the timers removed.
    fn timers<'py>(
        &self,
        py: Python<'py>,
        batch: &Bound<'py, PyAny>,
        backend: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyList>, usize, usize, usize)> {
        const CALL: &str = "emq.tools.timers";
        let batch = count(CALL, "batch", batch, false)?;
        let module = match arguments::sweep_backend(CALL, backend)? {
            arguments::SweepBackend::Plan => false,
            arguments::SweepBackend::Module => true,
            arguments::SweepBackend::Lua => {
                return Err(arguments::refused(CALL, "backend must be \"plan\" or \"module\": TIMERS has no Lua script"))
            }
        };
        let keys = &self.keys;
        let (t, _) = self.client.get().wrote(py, CALL, self.queue(), |c| schedules::timers(c, CALL, keys, batch, module))?;
        Ok((py_values::ids(py, t.enqueued)?, t.skipped, t.dropped, t.removed))
    }

    /// PROMOTE of this queue: the ids taken out of `schedule`.
    fn promote(&self, py: Python<'_>, batch: &Bound<'_, PyAny>, backend: &Bound<'_, PyAny>, group: &Bound<'_, PyAny>) -> PyResult<i64> {
        const CALL: &str = "Queue.promote";
        let batch = count(CALL, "batch", batch, false)?;
        match self.sweep(py, CALL, Kind::Promote, batch, backend, group)? {
            Outcome::Promoted(n) => Ok(n),
            Outcome::Stalled { .. } => unreachable!("promote gives a count"),
        }
    }

    /// STALLED CHECK of this queue: an `emq.StalledOutcome`.
    fn stalled_check<'py>(
        &self,
        py: Python<'py>,
        max_stalled: &Bound<'py, PyAny>,
        batch: &Bound<'py, PyAny>,
        backend: &Bound<'py, PyAny>,
        group: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        const CALL: &str = "Queue.stalled_check";
        let max_stalled = optional_count(CALL, "max_stalled", max_stalled, true)?;
        let batch = count(CALL, "batch", batch, false)?;
        match self.sweep(py, CALL, Kind::Stalled { max_stalled }, batch, backend, group)? {
            Outcome::Stalled { recovered, dead } => py_values::stalled_outcome(py, recovered, dead),
            Outcome::Promoted(_) => unreachable!("a stalled check gives two lists"),
        }
    }

    /// PROMOTE for a worker's beat: `(moved, due_in)`, where `due_in` is how
    /// long from now (s) until the first due time past the call's clock reading
    /// that it saw (`None`: nothing else scheduled; 0: the batch was all due,
    /// more may be).
    fn _promote_next(&self, py: Python<'_>, batch: &Bound<'_, PyAny>) -> PyResult<(i64, Option<f64>)> {
        const CALL: &str = "Queue.promote";
        let batch = count(CALL, "batch", batch, false)?;
        match self.beat_sweep(py, CALL, Kind::Promote, batch)? {
            (Outcome::Promoted(n), due_in) => Ok((n, due_in)),
            _ => unreachable!("promote gives a count"),
        }
    }

    /// STALLED CHECK for a worker's beat: `(recovered, dead, due_in)`, where
    /// `due_in` is how long from now (s) until the first lease deadline past the
    /// call's clock reading that it saw (`None`: no other lease; 0: the batch
    /// was all expired, more may be): an idle worker parks no longer than that.
    #[allow(clippy::type_complexity)]
    fn _stalled_next<'py>(
        &self,
        py: Python<'py>,
        max_stalled: &Bound<'py, PyAny>,
        batch: &Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>, Option<f64>)> {
        const CALL: &str = "Queue.stalled_check";
        let max_stalled = optional_count(CALL, "max_stalled", max_stalled, true)?;
        let batch = count(CALL, "batch", batch, false)?;
        match self.beat_sweep(py, CALL, Kind::Stalled { max_stalled }, batch)? {
            (Outcome::Stalled { recovered, dead }, due_in) => Ok((py_values::ids(py, recovered)?, py_values::ids(py, dead)?, due_in)),
            _ => unreachable!("a stalled check gives two lists"),
        }
    }
}

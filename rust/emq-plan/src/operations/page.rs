//! JOBS: one page of the jobs in one place of a queue (`Page`), by rank: the
//! place's size and the page's window of ids (`ZRANGE` by rank, `LRANGE`), then
//! the rows of those ids only, one `HGETALL` each. A page's cost depends on its
//! length, never on how many jobs the queue holds. Unwatched: a read.
//!
//! Orders, as an operator looks: `scheduled` soonest due first, `pending` (and
//! a lane) next to be claimed first, `active` soonest lease end first, `dead`,
//! `done` and `cancelled` newest first.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::jobs::retention::{self, Retention};
use crate::names::{id_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::reads::JobRow;

pub const JOBS: &str = "EMQ.JOBS";

/// The most jobs a page shows.
pub const MAX_PAGE: u64 = 1000;

/// A place a job can be in, as `Queue.jobs(state)` names it (the row's `state`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Place {
    Scheduled,
    /// The flat list, or a lane's.
    Pending {
        lane: Option<Vec<u8>>,
    },
    Active,
    Dead,
    Done,
    /// The cancelled rows still kept (SPEC §13: kept as done rows are).
    Cancelled,
}

/// The states a page can list, in the order the facade names them.
pub const STATES: [&str; 6] = ["scheduled", "pending", "active", "dead", "done", "cancelled"];

impl Place {
    /// The place of `state` (and `lane`, for `pending` only).
    pub fn parse(verb: &str, state: &[u8], lane: Option<Vec<u8>>) -> Result<Place> {
        let place = match state {
            b"scheduled" => Place::Scheduled,
            b"pending" => Place::Pending { lane: lane.clone() },
            b"active" => Place::Active,
            b"dead" => Place::Dead,
            b"done" => Place::Done,
            b"cancelled" => Place::Cancelled,
            _ => return Err(Error::argument(verb, "state", format_args!("must be one of {}", STATES.join(", ")))),
        };
        match (&place, lane) {
            (Place::Pending { .. }, Some(l)) => match id_problem(&l) {
                Some(why) => Err(Error::argument(verb, "lane", why)),
                None => Ok(place),
            },
            (_, Some(_)) => Err(Error::argument(verb, "lane", "is for state 'pending' only")),
            (_, None) => Ok(place),
        }
    }

    fn key(&self, k: &Keys) -> Vec<u8> {
        match self {
            Place::Scheduled => k.schedule(),
            Place::Pending { lane: None } => k.pending(),
            Place::Pending { lane: Some(l) } => k.lane(l),
            Place::Active => k.active(),
            Place::Dead => k.dead(),
            Place::Done => k.done(),
            Place::Cancelled => k.cancelled(),
        }
    }

    /// Whether the place lists ended rows that expire (`done`, `cancelled`):
    /// a page counts only those finished within the queue's `done_ms`.
    fn expires(&self) -> bool {
        matches!(self, Place::Done | Place::Cancelled)
    }
}

/// One page: its jobs (id and row; a row deleted between the two reads is left
/// out), and how many jobs the place holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobPage {
    pub jobs: Vec<(Vec<u8>, JobRow)>,
    pub total: i64,
}

enum Stage {
    /// `TIME` and the done rows' retention (only `done` and `cancelled` need them).
    Clock,
    /// The size and the window.
    Window,
    /// The window's rows.
    Rows,
}

pub struct Page {
    keys: Keys,
    place: Place,
    offset: u64,
    limit: u64,
    stage: Stage,
    /// Done rows count from here (ms): those finished after `now - done_ms`.
    kept_after: Option<i64>,
    ids: Vec<Vec<u8>>,
    total: i64,
}

impl Page {
    /// `limit` from 1 to [`MAX_PAGE`]; `offset` any rank.
    pub fn new(keys: Keys, place: Place, offset: u64, limit: u64) -> Result<Self> {
        if !(1..=MAX_PAGE).contains(&limit) {
            return Err(Error::argument(JOBS, "limit", format_args!("must be 1 to {MAX_PAGE}")));
        }
        if offset > i64::MAX as u64 / 2 {
            return Err(Error::argument(JOBS, "offset", "is too large"));
        }
        Ok(Page { keys, place, offset, limit, stage: Stage::Clock, kept_after: None, ids: vec![], total: 0 })
    }

    fn window(&mut self) -> Step<JobPage> {
        self.stage = Stage::Window;
        let key = self.place.key(&self.keys);
        let (start, stop) = (self.offset.to_string(), (self.offset + self.limit - 1).to_string());
        let cmds = match &self.place {
            Place::Pending { .. } => vec![Cmd::new("LLEN").arg(&key), Cmd::new("LRANGE").arg(&key).arg(start).arg(stop)],
            Place::Scheduled | Place::Active => vec![Cmd::new("ZCARD").arg(&key), Cmd::new("ZRANGE").arg(&key).arg(start).arg(stop)],
            Place::Dead => vec![Cmd::new("ZCARD").arg(&key), Cmd::new("ZRANGE").arg(&key).arg(start).arg(stop).arg("REV")],
            Place::Done | Place::Cancelled => {
                let count = match self.kept_after {
                    Some(after) => Cmd::new("ZCOUNT").arg(&key).arg(format!("({after}")).arg("+inf"),
                    None => Cmd::new("ZCARD").arg(&key),
                };
                vec![count, Cmd::new("ZRANGE").arg(&key).arg(start).arg(stop).arg("REV")]
            }
        };
        Step::Read { watch: vec![], cmds }
    }
}

impl Conversation for Page {
    type Out = JobPage;

    fn verb(&self) -> &'static str {
        JOBS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<JobPage> {
        self.ids.clear();
        if self.place.expires() {
            self.stage = Stage::Clock;
            return Step::Read { watch: vec![], cmds: vec![Cmd::new("TIME"), retention::read(&self.keys, &["done_ms"])] };
        }
        self.window()
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<JobPage>> {
        match self.stage {
            Stage::Clock => {
                let [time, policy] = replies else { return Err(Error::server(JOBS, "wrong number of replies")) };
                let now = parse_time(time).ok_or_else(|| Error::server(JOBS, "TIME gave no clock"))?;
                let done_ms = Retention::from_reply(JOBS, &self.keys, &["done_ms"], policy)?.done_ms;
                self.kept_after = (done_ms >= 0).then(|| now.saturating_sub(done_ms));
                Ok(self.window())
            }
            Stage::Window => {
                let [count, window] = replies else { return Err(Error::server(JOBS, "wrong number of replies")) };
                let key = self.place.key(&self.keys);
                check_error(JOBS, &key, count)?;
                check_error(JOBS, &key, window)?;
                self.total = count.as_int().ok_or_else(|| Error::server(JOBS, "a count was not an integer"))?;
                let items = window.as_array().ok_or_else(|| Error::server(JOBS, "a range gave no array"))?;
                // Done rows past the kept ones (the oldest, listed last) have expired.
                let shown = usize::try_from(self.total.saturating_sub(self.offset as i64).max(0)).unwrap_or(usize::MAX);
                self.ids = items.iter().filter_map(|r| r.as_bytes().map(<[u8]>::to_vec)).take(shown).collect();
                if self.ids.is_empty() {
                    return Ok(Step::Done(JobPage { jobs: vec![], total: self.total }));
                }
                self.stage = Stage::Rows;
                Ok(Step::Read { watch: vec![], cmds: self.ids.iter().map(|id| Cmd::new("HGETALL").arg(self.keys.job(id))).collect() })
            }
            Stage::Rows => {
                if replies.len() != self.ids.len() {
                    return Err(Error::server(JOBS, "rows: wrong number of replies"));
                }
                let mut jobs = Vec::with_capacity(self.ids.len());
                for (id, r) in std::mem::take(&mut self.ids).into_iter().zip(replies) {
                    check_error(JOBS, &self.keys.job(&id), r)?;
                    match r.as_array() {
                        Some(items) if !items.is_empty() => jobs.push((id, JobRow::from_pairs(items))),
                        _ => {}
                    }
                }
                Ok(Step::Done(JobPage { jobs, total: self.total }))
            }
        }
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<JobPage> {
        Err(Error::server(JOBS, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn ids(xs: &[&str]) -> Reply {
        Reply::Array(xs.iter().map(|x| bulk(x)).collect())
    }

    fn row(state: &str) -> Reply {
        Reply::Array(vec![bulk("state"), bulk(state), bulk("data"), bulk("<script>")])
    }

    fn page(place: Place, offset: u64, limit: u64) -> Page {
        Page::new(Keys::new(b"q"), place, offset, limit).unwrap()
    }

    /// A page that read the whole place, or asked for more rows than it shows,
    /// would cost what the queue holds: the window is by rank and the rows
    /// read are the window's.
    #[test]
    fn a_page_reads_its_window_and_only_its_rows() {
        let mut p = page(Place::Dead, 1_000_000, 3);
        let Step::Read { watch, cmds } = p.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(
            cmds,
            vec![Cmd::from_args(["ZCARD", "emq:{q}:dead"]), Cmd::from_args(["ZRANGE", "emq:{q}:dead", "1000000", "1000002", "REV"])]
        );
        let Step::Read { cmds, .. } = p.feed(&[Reply::Int(2_000_000), ids(&["c", "b", "a"])]).unwrap() else { panic!() };
        assert_eq!(cmds, ["c", "b", "a"].map(|id| Cmd::from_args(["HGETALL", &format!("emq:{{q}}:job:{id}")])).to_vec());
        // `b` was deleted between the reads: left out, not shown empty.
        let Step::Done(out) = p.feed(&[row("dead"), Reply::Array(vec![]), row("dead")]).unwrap() else { panic!() };
        assert_eq!(out.total, 2_000_000);
        assert_eq!(out.jobs.iter().map(|(id, _)| id.as_slice()).collect::<Vec<_>>(), vec![&b"c"[..], b"a"]);
        assert_eq!(out.jobs[0].1.data, b"<script>".to_vec());
    }

    #[test]
    fn each_place_has_its_key_and_order() {
        let first = |place| {
            let Step::Read { cmds, .. } = page(place, 0, 2).start() else { panic!() };
            cmds
        };
        assert_eq!(first(Place::Scheduled)[1], Cmd::from_args(["ZRANGE", "emq:{q}:schedule", "0", "1"]));
        assert_eq!(first(Place::Active)[1], Cmd::from_args(["ZRANGE", "emq:{q}:active", "0", "1"]));
        assert_eq!(first(Place::Pending { lane: None })[0], Cmd::from_args(["LLEN", "emq:{q}:pending"]));
        assert_eq!(first(Place::Pending { lane: Some(b"L".to_vec()) })[1], Cmd::from_args(["LRANGE", "emq:{q}:lane:L", "0", "1"]));
    }

    /// Done and cancelled rows past the retention are expired: counted out,
    /// and not shown; both newest first, each from its own index.
    #[test]
    fn done_and_cancelled_count_and_show_the_kept_rows_only() {
        for (place, index) in [(Place::Done, "emq:{q}:done"), (Place::Cancelled, "emq:{q}:cancelled")] {
            let mut p = page(place, 1, 5);
            let Step::Read { cmds, .. } = p.start() else { panic!() };
            assert_eq!(cmds[0], Cmd::new("TIME"));
            let time = Reply::Array(vec![bulk("1700000000"), bulk("0")]);
            let Step::Read { cmds, .. } = p.feed(&[time, Reply::Array(vec![bulk("1000")])]).unwrap() else { panic!() };
            assert_eq!(cmds[0], Cmd::from_args(["ZCOUNT", index, "(1699999999000", "+inf"]));
            assert_eq!(cmds[1], Cmd::from_args(["ZRANGE", index, "1", "5", "REV"]));
            let Step::Read { cmds, .. } = p.feed(&[Reply::Int(3), ids(&["b", "c", "old"])]).unwrap() else { panic!() };
            assert_eq!(cmds.len(), 2, "ranks 1 and 2 of 3 kept rows; the third id has expired");
        }
    }

    #[test]
    fn an_empty_window_reads_no_rows() {
        let mut p = page(Place::Scheduled, 10, 5);
        p.start();
        assert_eq!(p.feed(&[Reply::Int(3), ids(&[])]).unwrap(), Step::Done(JobPage { jobs: vec![], total: 3 }));
    }

    #[test]
    fn bad_arguments_name_themselves() {
        let e = Place::parse(JOBS, b"running", None).unwrap_err();
        assert_eq!((e.kind, e.detail()), (ErrorKind::Argument, "state must be one of scheduled, pending, active, dead, done, cancelled"));
        assert!(Place::parse(JOBS, b"dead", Some(b"L".to_vec())).unwrap_err().detail().starts_with("lane "));
        assert!(Place::parse(JOBS, b"pending", Some(vec![])).unwrap_err().detail().starts_with("lane "));
        assert_eq!(Place::parse(JOBS, b"pending", Some(b"L".to_vec())).unwrap(), Place::Pending { lane: Some(b"L".to_vec()) });
        for limit in [0, MAX_PAGE + 1] {
            let e = Page::new(Keys::new(b"q"), Place::Dead, 0, limit).err().unwrap();
            assert_eq!(e.detail(), "limit must be 1 to 1000");
        }
    }

    #[test]
    fn wrong_types_are_layout_errors() {
        let mut p = page(Place::Pending { lane: None }, 0, 5);
        p.start();
        let wrongtype = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let e = p.feed(&[wrongtype.clone(), wrongtype]).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Layout);
        assert!(e.message.contains("emq:{q}:pending"), "{e}");
    }
}

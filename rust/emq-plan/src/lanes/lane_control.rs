//! Changing a lane's control (SPEC §7 "lanes"): pause, resume (then offer), set
//! limit (then offer), each one guarded conversation. How a lane is read and
//! offered is `offer`'s.

use crate::clock::parse_time;
use crate::error::{Error, Result};
use crate::lanes::offer::{LaneCtl, Offers, CTL_FIELDS};
use crate::names::{id_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::guard::{confirm_empty, relies_on_empty, still_empty};
use crate::protocol::reply::Reply;
use crate::protocol::write::{LaneField, Members, Write};

pub const LANE: &str = "EMQ.LANE";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LaneOp {
    Pause,
    Resume,
    /// `0`: no limit.
    Limit(u64),
}

pub struct LaneControl {
    keys: Keys,
    lane: Vec<u8>,
    op: LaneOp,
    /// The plan, held while the empty lane list it relies on is confirmed.
    held: Option<Vec<Write>>,
}

impl LaneControl {
    pub fn new(keys: Keys, lane: Vec<u8>, op: LaneOp) -> Result<Self> {
        if let Some(why) = id_problem(&lane) {
            return Err(Error::argument(LANE, "lane", why));
        }
        Ok(LaneControl { keys, lane, op, held: None })
    }
}

impl Conversation for LaneControl {
    type Out = ();

    fn verb(&self) -> &'static str {
        LANE
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<()> {
        let (k, l) = (&self.keys, &self.lane);
        Step::Read {
            watch: vec![k.lanectl(l)],
            cmds: vec![
                Cmd::new("TIME"),
                Cmd::new("HMGET").arg(k.lanectl(l)).args(CTL_FIELDS),
                Cmd::new("LLEN").arg(k.lane(l)),
                Cmd::new("LLEN").arg(k.ring()),
                Cmd::new("LLEN").arg(k.wake()),
            ],
        }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<()>> {
        if let Some(writes) = self.held.take() {
            if !still_empty(replies, 1) {
                return Err(Error::conflict(LANE, "the lane got work before the watch"));
            }
            return Ok(Step::Exec(writes));
        }
        let (k, l) = (&self.keys, &self.lane);
        let [time, ctl, len, ring, wake] = replies else { return Err(Error::server(LANE, "wrong number of replies")) };
        parse_time(time).ok_or_else(|| Error::server(LANE, "TIME gave no clock"))?;
        if ctl.is_wrongtype() || len.is_wrongtype() {
            return Err(Error::layout(LANE, format!("{} or its control has the wrong type", String::from_utf8_lossy(&k.lane(l)))));
        }
        let mut ctl = LaneCtl::from_reply(ctl);
        let set = |field| Write::SetLane { lane: l.clone(), field };
        // A lane controlled before any job was added to it is listed all the same.
        let mut w = vec![Write::ListLanes(Members::of(std::slice::from_ref(l)))];
        match self.op {
            LaneOp::Pause => {
                w.push(set(LaneField::Paused(true)));
                return Ok(Step::Exec(w));
            }
            LaneOp::Resume => {
                w.push(set(LaneField::Paused(false)));
                ctl.paused = false;
            }
            LaneOp::Limit(n) => {
                w.push(set(LaneField::Limit(n)));
                ctl.limit = n.min(i64::MAX as u64) as i64;
            }
        }
        let mut offers = Offers::default();
        let len = len.as_int().unwrap_or(0);
        if offers.offer(l, len, &ctl) {
            if ring.is_wrongtype() || wake.is_wrongtype() {
                return Err(Error::layout(LANE, "ring or wake has the wrong type"));
            }
            offers.writes(&mut w);
        } else if relies_on_empty(len, &ctl) {
            let step = confirm_empty(k, std::slice::from_ref(l));
            self.held = Some(w);
            return Ok(step);
        }
        Ok(Step::Exec(w))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        match exec.iter().find(|r| matches!(r, Reply::Error { .. })) {
            Some(Reply::Error { message, .. }) => Err(Error::server(LANE, message)),
            _ => Ok(()),
        }
    }
}

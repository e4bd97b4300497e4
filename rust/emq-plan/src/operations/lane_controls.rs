//! LANE.CONTROLS: the control fields of the lanes asked for (paused, limit,
//! active count, in the ring), one `HMGET` each, unwatched: what the dashboard's
//! queue page shows beside each lane's depth.

use crate::error::{Error, Result};
use crate::lanes::offer::{LaneCtl, CTL_FIELDS};
use crate::names::{id_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const LANE_CONTROLS: &str = "EMQ.LANE.CONTROLS";

pub struct LaneControls {
    keys: Keys,
    lanes: Vec<Vec<u8>>,
}

impl LaneControls {
    pub fn new(keys: Keys, lanes: Vec<Vec<u8>>) -> Result<Self> {
        if let Some(why) = lanes.iter().find_map(|l| id_problem(l)) {
            return Err(Error::argument(LANE_CONTROLS, "lanes", format_args!("each {why}")));
        }
        Ok(LaneControls { keys, lanes })
    }
}

impl Conversation for LaneControls {
    /// Each lane's control, in the order asked.
    type Out = Vec<LaneCtl>;

    fn verb(&self) -> &'static str {
        LANE_CONTROLS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        if self.lanes.is_empty() {
            return Step::Done(vec![]);
        }
        let cmds = self.lanes.iter().map(|l| Cmd::new("HMGET").arg(self.keys.lanectl(l)).args(&CTL_FIELDS[..4])).collect();
        Step::Read { watch: vec![], cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if replies.len() != self.lanes.len() {
            return Err(Error::server(LANE_CONTROLS, "wrong number of replies"));
        }
        let mut out = Vec::with_capacity(replies.len());
        for (l, r) in self.lanes.iter().zip(replies) {
            check_error(LANE_CONTROLS, &self.keys.lanectl(l), r)?;
            out.push(LaneCtl::from_reply(r));
        }
        Ok(Step::Done(out))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(LANE_CONTROLS, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn controls_read_each_lane_and_default_when_absent() {
        let mut c = LaneControls::new(Keys::new(b"q"), vec![b"A".to_vec(), b"B".to_vec()]).unwrap();
        let Step::Read { cmds, watch } = c.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds[1], Cmd::from_args(["HMGET", "emq:{q}:lanectl:B", "paused", "limit", "active", "ring"]));
        let a = Reply::Array(vec![bulk("1"), bulk("5"), bulk("2"), Reply::Nil]);
        let none = Reply::Array(vec![Reply::Nil, Reply::Nil, Reply::Nil, Reply::Nil]);
        let Step::Done(out) = c.feed(&[a, none]).unwrap() else { panic!() };
        assert_eq!(out[0], LaneCtl { paused: true, limit: 5, active: 2, in_ring: false, levels: 0 });
        assert_eq!(out[1], LaneCtl::default());
        let wrongtype = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        assert_eq!(c.feed(&[Reply::Array(vec![]), wrongtype]).unwrap_err().kind, crate::error::ErrorKind::Layout);
        assert!(LaneControls::new(Keys::new(b"q"), vec![vec![]]).is_err());
        assert_eq!(LaneControls::new(Keys::new(b"q"), vec![]).unwrap().start(), Step::Done(vec![]));
    }
}

//! LANES: the names of a queue's lanes, read from `P lanes` (the set every add
//! naming a lane and every lane control adds to, SPEC §2) by one `SMEMBERS`
//! (`LaneList`, which the counts share), unwatched. A `SCAN` of the keys would
//! read every key of the database, the jobs' rows included: its cost would grow
//! with the queue.

use crate::error::{Error, Result};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const LANES: &str = "EMQ.LANES";

/// The names of the queue's lanes: the members of `P lanes`, in one read.
#[derive(Clone, Debug, Default)]
pub(crate) struct LaneList {
    names: Vec<Vec<u8>>,
}

impl LaneList {
    pub(crate) fn new() -> Self {
        LaneList::default()
    }

    pub(crate) fn cmds(keys: &Keys) -> Vec<Cmd> {
        vec![Cmd::new("SMEMBERS").arg(keys.lanes())]
    }

    /// Takes the reply of `cmds`: the set's members (none when there is no set).
    pub(crate) fn feed(&mut self, verb: &str, keys: &Keys, replies: &[Reply]) -> Result<()> {
        let [r] = replies else {
            return Err(Error::server(verb, "SMEMBERS: wrong number of replies"));
        };
        check_error(verb, &keys.lanes(), r)?;
        let Reply::Array(found) = r else {
            return Err(Error::server(verb, "SMEMBERS gave no members"));
        };
        self.names = found.iter().filter_map(Reply::as_bytes).filter(|n| !n.is_empty()).map(<[u8]>::to_vec).collect();
        Ok(())
    }

    pub(crate) fn done(&mut self) -> Vec<Vec<u8>> {
        let mut names = std::mem::take(&mut self.names);
        names.sort();
        names.dedup();
        names
    }
}

/// The queue's lanes, sorted by name bytes.
pub struct Lanes {
    keys: Keys,
    list: LaneList,
}

impl Lanes {
    pub fn new(keys: Keys) -> Self {
        Lanes { keys, list: LaneList::new() }
    }
}

impl Conversation for Lanes {
    type Out = Vec<Vec<u8>>;

    fn verb(&self) -> &'static str {
        LANES
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        self.list = LaneList::new();
        Step::Read { watch: vec![], cmds: LaneList::cmds(&self.keys) }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        self.list.feed(LANES, &self.keys, replies)?;
        Ok(Step::Done(self.list.done()))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(LANES, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    #[test]
    fn lanes_are_the_members_of_the_lanes_set_sorted_in_one_read() {
        let mut l = Lanes::new(Keys::new(b"a*q"));
        let Step::Read { cmds, watch } = l.start() else { panic!() };
        assert!(watch.is_empty());
        assert_eq!(cmds, vec![Cmd::from_args(["SMEMBERS", "emq:{a*q}:lanes"])]);
        let done = l.feed(&[Reply::Array(vec![bulk("C"), bulk("A"), bulk("B")])]).unwrap();
        assert_eq!(done, Step::Done(vec![b"A".to_vec(), b"B".to_vec(), b"C".to_vec()]));
    }

    #[test]
    fn a_lanes_key_of_another_type_is_an_error() {
        let mut l = Lanes::new(Keys::new(b"q"));
        l.start();
        let wrong = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        let e = l.feed(&[wrong]).unwrap_err();
        assert!(e.to_string().contains("emq:{q}:lanes has the wrong type"), "{e}");
    }
}

//! `R queues`: the set of every queue name that has been used. A process adds
//! a queue's name once, on its first write to it (`RegisterQueue`); readers
//! take the whole set (`QueueNames`).

use crate::error::{Error, Result};
use crate::names::{queue_name_problem, Keys};
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::Write;

pub const REGISTER: &str = "EMQ.REGISTER";
pub const QUEUES: &str = "EMQ.QUEUES";

/// `SADD R queues name`, alone in its transaction (no read, no watch: adding
/// a member twice is adding it once).
pub struct RegisterQueue {
    keys: Keys,
    name: Vec<u8>,
}

impl RegisterQueue {
    pub fn new(name: Vec<u8>) -> Result<Self> {
        if let Some(why) = queue_name_problem(&name) {
            return Err(Error::argument(REGISTER, "name", why));
        }
        Ok(RegisterQueue { keys: Keys::registry(), name })
    }
}

impl Conversation for RegisterQueue {
    type Out = ();

    fn verb(&self) -> &'static str {
        REGISTER
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<()> {
        Step::Exec(vec![Write::RegisterQueue(self.name.clone())])
    }

    fn feed(&mut self, _replies: &[Reply]) -> Result<Step<()>> {
        Err(Error::server(REGISTER, "a registration reads nothing"))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<()> {
        match exec.first() {
            Some(r @ Reply::Error { .. }) => check_error(REGISTER, &self.keys.queues(), r),
            _ => Ok(()),
        }
    }
}

/// `SMEMBERS R queues`, sorted by name bytes.
pub struct QueueNames {
    keys: Keys,
}

impl QueueNames {
    pub fn new() -> Self {
        QueueNames { keys: Keys::registry() }
    }
}

impl Default for QueueNames {
    fn default() -> Self {
        QueueNames::new()
    }
}

impl Conversation for QueueNames {
    type Out = Vec<Vec<u8>>;

    fn verb(&self) -> &'static str {
        QUEUES
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<Self::Out> {
        Step::Read { watch: vec![], cmds: vec![Cmd::new("SMEMBERS").arg(self.keys.queues())] }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        let [r] = replies else { return Err(Error::server(QUEUES, "wrong number of replies")) };
        check_error(QUEUES, &self.keys.queues(), r)?;
        let items = r.as_array().ok_or_else(|| Error::server(QUEUES, "SMEMBERS gave no array"))?;
        // A member that is no queue name (written by hand) is left out, never shown as one.
        let mut names: Vec<Vec<u8>> =
            items.iter().filter_map(Reply::as_bytes).filter(|n| queue_name_problem(n).is_none()).map(<[u8]>::to_vec).collect();
        names.sort();
        Ok(Step::Done(names))
    }

    fn finish(&mut self, _exec: &[Reply]) -> Result<Self::Out> {
        Err(Error::server(QUEUES, "a read has no EXEC"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::write::to_cmds;

    #[test]
    fn registering_is_one_sadd_under_the_registry_tag() {
        let mut r = RegisterQueue::new(b"orders".to_vec()).unwrap();
        let Step::Exec(w) = r.start() else { panic!() };
        assert_eq!(to_cmds(r.keys(), &w), vec![Cmd::from_args(["SADD", "emq:{emq registry}:queues", "orders"])]);
        assert!(r.finish(&[Reply::Int(0)]).is_ok());
        assert!(RegisterQueue::new(b"a b".to_vec()).is_err(), "no queue has the registry's tag");
    }

    #[test]
    fn queue_names_are_sorted_and_only_queue_names() {
        let mut q = QueueNames::new();
        let Step::Read { cmds, .. } = q.start() else { panic!() };
        assert_eq!(cmds, vec![Cmd::from_args(["SMEMBERS", "emq:{emq registry}:queues"])]);
        let members = Reply::Array(["b", "a", "bad name", ""].iter().map(|s| Reply::Bulk(s.as_bytes().to_vec())).collect());
        assert_eq!(q.feed(&[members]).unwrap(), Step::Done(vec![b"a".to_vec(), b"b".to_vec()]));
        let wrongtype = Reply::Error { code: "WRONGTYPE".into(), message: "WRONGTYPE x".into() };
        assert_eq!(q.feed(&[wrongtype]).unwrap_err().kind, crate::error::ErrorKind::Layout);
    }
}

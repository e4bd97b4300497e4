//! PROGRESS (SPEC §13): a running job writes how far it has got (a number or
//! a small JSON value, bytes as given) to its row's `progress`, only while the
//! row is `active` with the worker's token, as EXTEND checks it; otherwise
//! nothing changes and the worker is told so.
//!
//! The guard: the row, watched. It sets no lease mark: the field is one no
//! stalled check reads or writes, so a progress cannot change a check's plan,
//! and a check that recovers the job writes the row and aborts the progress.

use crate::error::{Error, Result};
use crate::jobs::ending::{check_size, PROGRESS_MAX};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};
use crate::protocol::write::{RowFields, Write};

pub const PROGRESS: &str = "EMQ.PROGRESS";

pub struct Progress {
    keys: Keys,
    id: Vec<u8>,
    token: Vec<u8>,
    lane: Option<Vec<u8>>,
    value: Vec<u8>,
    written: bool,
}

impl Progress {
    /// Checks the call: a job with an id, a value of at most [`PROGRESS_MAX`] bytes.
    pub fn new(keys: Keys, id: Vec<u8>, token: Vec<u8>, lane: Option<Vec<u8>>, value: Vec<u8>) -> Result<Self> {
        if id.is_empty() {
            return Err(Error::argument(PROGRESS, "job", "has no id"));
        }
        check_size(PROGRESS, "value", Some(&value), PROGRESS_MAX)?;
        Ok(Progress { keys, id, token, lane, value, written: false })
    }
}

impl Conversation for Progress {
    type Out = bool;

    fn verb(&self) -> &'static str {
        PROGRESS
    }

    fn keys(&self) -> &Keys {
        &self.keys
    }

    fn start(&mut self) -> Step<bool> {
        let row = self.keys.job(&self.id);
        let cmds = vec![Cmd::new("HMGET").arg(&row).args(["state", "token", "lane"])];
        Step::Read { watch: vec![row], cmds }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<bool>> {
        let [r] = replies else { return Err(Error::server(PROGRESS, "wrong number of replies")) };
        check_error(PROGRESS, &self.keys.job(&self.id), r)?;
        let f = r.fields();
        let field = |i: usize| f.get(i).copied().flatten();
        if field(0) != Some(b"active".as_slice()) || field(1) != Some(self.token.as_slice()) {
            return Ok(Step::Done(false));
        }
        if field(2) != self.lane.as_deref() {
            return Err(Error::argument(PROGRESS, "job", "names another lane than its row"));
        }
        self.written = true;
        Ok(Step::Exec(vec![Write::SetRow { id: self.id.clone(), fields: RowFields::Progress(std::mem::take(&mut self.value)) }]))
    }

    fn finish(&mut self, exec: &[Reply]) -> Result<bool> {
        for r in exec {
            check_error(PROGRESS, &self.keys.job(&self.id), r)?;
        }
        Ok(self.written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Reply {
        Reply::Bulk(s.as_bytes().to_vec())
    }

    fn progress() -> Progress {
        Progress::new(Keys::new(b"q"), b"a".to_vec(), b"t".to_vec(), None, b"0.5".to_vec()).unwrap()
    }

    /// Only the holder writes: a row active with the job's token gets the one
    /// field, under a watch of the row; any other row (another token, a state
    /// but active, none) writes nothing and says so. A broken progress that
    /// skipped the token check would let a worker whose lease was lost write
    /// over the new holder's progress.
    #[test]
    fn progress_is_written_only_by_the_holder() {
        let mut p = progress();
        let Step::Read { watch, cmds } = p.start() else { panic!("a read") };
        assert_eq!(watch, vec![b"emq:{q}:job:a".to_vec()]);
        assert_eq!(cmds, vec![Cmd::from_args(["HMGET", "emq:{q}:job:a", "state", "token", "lane"])]);
        let held = Reply::Array(vec![bulk("active"), bulk("t"), Reply::Nil]);
        let Step::Exec(w) = p.feed(&[held]).unwrap() else { panic!("a write") };
        assert_eq!(w, vec![Write::SetRow { id: b"a".to_vec(), fields: RowFields::Progress(b"0.5".to_vec()) }]);
        assert!(p.finish(&[Reply::Int(0)]).unwrap());
        for row in [
            Reply::Array(vec![bulk("active"), bulk("other"), Reply::Nil]),
            Reply::Array(vec![bulk("pending"), bulk("t"), Reply::Nil]),
            Reply::Array(vec![Reply::Nil, Reply::Nil, Reply::Nil]),
        ] {
            assert_eq!(progress().feed(&[row]).unwrap(), Step::Done(false));
        }
        let lane = Reply::Array(vec![bulk("active"), bulk("t"), bulk("L")]);
        assert_eq!(progress().feed(&[lane]).unwrap_err().kind, crate::error::ErrorKind::Argument);
        let big = Progress::new(Keys::new(b"q"), b"a".to_vec(), b"t".to_vec(), None, vec![b'1'; PROGRESS_MAX + 1]);
        assert!(big.err().unwrap().message.contains("value is 65537 bytes"));
    }
}

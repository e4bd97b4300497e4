//! LANES: the names of a queue's lanes, by `SCAN` of the keys `P lane:L` and
//! `P lanectl:L` (`LaneScan`, which the counts share), unwatched.

use crate::error::{Error, Result};
use crate::names::Keys;
use crate::protocol::cmd::Cmd;
use crate::protocol::conversation::{Conversation, Step};
use crate::protocol::reply::{check_error, Reply};

pub const LANES: &str = "EMQ.LANES";

/// Keys a `SCAN` asks for at a time.
const SCAN_COUNT: &str = "1000";

/// A glob pattern that matches `text` literally (for `SCAN MATCH`).
pub fn glob_escape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 4);
    for &b in text {
        if matches!(b, b'*' | b'?' | b'[' | b']' | b'\\') {
            out.push(b'\\');
        }
        out.push(b);
    }
    out
}

/// The names of the queue's lanes: every key `P lane:L` or `P lanectl:L`, by
/// `SCAN`, one pattern each, until both cursors come back to `0`.
#[derive(Clone, Debug)]
pub(crate) struct LaneScan {
    /// (kind, cursor) of each scan not yet done.
    open: Vec<(&'static [u8], Vec<u8>)>,
    names: Vec<Vec<u8>>,
}

impl LaneScan {
    pub(crate) fn new() -> Self {
        LaneScan { open: vec![(b"lane:", b"0".to_vec()), (b"lanectl:", b"0".to_vec())], names: vec![] }
    }

    pub(crate) fn cmds(&self, keys: &Keys) -> Vec<Cmd> {
        self.open
            .iter()
            .map(|(kind, cursor)| {
                let mut pattern = glob_escape(&keys.key(kind));
                pattern.push(b'*');
                Cmd::new("SCAN").arg(cursor).arg("MATCH").arg(pattern).arg("COUNT").arg(SCAN_COUNT)
            })
            .collect()
    }

    /// Takes the replies of `cmds`; gives whether every scan is done.
    pub(crate) fn feed(&mut self, verb: &str, keys: &Keys, replies: &[Reply]) -> Result<bool> {
        if replies.len() != self.open.len() {
            return Err(Error::server(verb, "SCAN: wrong number of replies"));
        }
        let mut open = vec![];
        for ((kind, _), r) in self.open.iter().zip(replies) {
            check_error(verb, b"SCAN", r)?;
            let (cursor, found) = match r.as_array() {
                Some([cursor, Reply::Array(found)]) => (cursor.as_bytes(), found),
                _ => return Err(Error::server(verb, "SCAN gave no cursor and keys")),
            };
            let cursor = cursor.ok_or_else(|| Error::server(verb, "SCAN gave no cursor"))?;
            let head = keys.key(kind);
            for k in found {
                if let Some(name) = k.as_bytes().and_then(|k| k.strip_prefix(head.as_slice())) {
                    if !name.is_empty() {
                        self.names.push(name.to_vec());
                    }
                }
            }
            if cursor != b"0" {
                open.push((*kind, cursor.to_vec()));
            }
        }
        self.open = open;
        Ok(self.open.is_empty())
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
    scan: LaneScan,
}

impl Lanes {
    pub fn new(keys: Keys) -> Self {
        Lanes { keys, scan: LaneScan::new() }
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
        self.scan = LaneScan::new();
        Step::Read { watch: vec![], cmds: self.scan.cmds(&self.keys) }
    }

    fn feed(&mut self, replies: &[Reply]) -> Result<Step<Self::Out>> {
        if self.scan.feed(LANES, &self.keys, replies)? {
            return Ok(Step::Done(self.scan.done()));
        }
        Ok(Step::Read { watch: vec![], cmds: self.scan.cmds(&self.keys) })
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

    fn scan(cursor: &str, keys: &[&str]) -> Reply {
        Reply::Array(vec![bulk(cursor), Reply::Array(keys.iter().map(|k| bulk(k)).collect())])
    }

    #[test]
    fn glob_escapes_the_pattern_characters() {
        assert_eq!(glob_escape(b"emq:{a*b?[c]\\}:"), b"emq:{a\\*b\\?\\[c\\]\\\\}:".to_vec());
    }

    #[test]
    fn lanes_scan_until_both_cursors_are_done() {
        let mut l = Lanes::new(Keys::new(b"a*q"));
        let Step::Read { cmds, .. } = l.start() else { panic!() };
        assert_eq!(cmds[0], Cmd::from_args(["SCAN", "0", "MATCH", "emq:{a\\*q}:lane:*", "COUNT", "1000"]));
        assert_eq!(cmds[1], Cmd::from_args(["SCAN", "0", "MATCH", "emq:{a\\*q}:lanectl:*", "COUNT", "1000"]));
        let next = l.feed(&[scan("7", &["emq:{a*q}:lane:B"]), scan("0", &["emq:{a*q}:lanectl:A", "emq:{a*q}:lanectl:B"])]).unwrap();
        let Step::Read { cmds, .. } = next else { panic!("{next:?}") };
        assert_eq!(cmds, vec![Cmd::from_args(["SCAN", "7", "MATCH", "emq:{a\\*q}:lane:*", "COUNT", "1000"])]);
        let done = l.feed(&[scan("0", &["emq:{a*q}:lane:C"])]).unwrap();
        assert_eq!(done, Step::Done(vec![b"A".to_vec(), b"B".to_vec(), b"C".to_vec()]));
    }
}

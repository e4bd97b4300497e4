//! The routing head every module command opens with, `<numkeys> <key>… <prefix>`:
//! the keys a cluster routes the call by, each checked to be the queue's key of
//! its place, and the queue prefix `emq:{q}:` they must lie under.

use crate::error::{Error, Result};
use crate::names::{queue_of_prefix, Keys};

/// The queue of a command's `prefix`, each of its `keys` checked to be that
/// queue's key of the same place in `suffixes`.
pub(crate) fn queue_of<'a>(verb: &str, prefix: &'a [u8], keys: &[&[u8]], suffixes: &[&[u8]]) -> Result<&'a [u8]> {
    let queue = queue_of_prefix(prefix)
        .ok_or_else(|| Error::layout(verb, format!("{:?} is not a queue prefix emq:{{q}}:", String::from_utf8_lossy(prefix))))?;
    let want = Keys::new(queue);
    for (key, suffix) in keys.iter().zip(suffixes) {
        let want = want.key(suffix);
        if *key != want.as_slice() {
            return Err(Error::layout(verb, format!("key {:?} is not {}", String::from_utf8_lossy(key), String::from_utf8_lossy(&want))));
        }
    }
    Ok(queue)
}
